/* etcd/'s client against fake etcds in the test's own loop: a broken or
 * hostile server (garbage, endless heads and bodies, silence, a closed
 * connection, refusals) ends the request with a status and never grows
 * memory past the bounds; the next request goes to the next endpoint; a
 * watch whose stream breaks resumes after the last revision delivered;
 * queue bound and cancel. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../etcd/etcd_int.h"
#include "test_etcd_util.h"

static struct event_base *base;

/* What a fake does with its n-th request (over all its connections). */
typedef enum act { REPLY, SILENT, CLOSE, HUGE_HEAD, HUGE_BODY } act;
typedef struct step {
    act what;
    const char *text; /* REPLY: raw bytes to send */
} step;

typedef struct fake {
    struct evconnlistener *l;
    char addr[32];
    const step *script;
    int n_script, n_reqs;
    char reqs[8][512];
    struct fconn *conns[16]; /* open ones, freed by fake_stop */
} fake;

typedef struct fconn {
    fake *f;
    struct bufferevent *bev;
    int slot;
} fconn;

static void fc_close(fconn *fc)
{
    fc->f->conns[fc->slot] = NULL;
    bufferevent_free(fc->bev);
    free(fc);
}

static void fc_event(struct bufferevent *bev, short what, void *arg) { fc_close(arg); }

static void fc_read(struct bufferevent *bev, void *arg)
{
    fconn *fc = arg;
    fake *f = fc->f;
    struct evbuffer *in = bufferevent_get_input(bev), *out = bufferevent_get_output(bev);
    struct evbuffer_ptr hend = evbuffer_search(in, "\r\n\r\n", 4, NULL);
    if (hend.pos < 0)
        return;
    char *all = (char *)evbuffer_pullup(in, -1);
    const char *cl = strstr(all, "Content-Length: ");
    size_t body = cl ? strtoul(cl + 16, NULL, 10) : 0, total = (size_t)hend.pos + 4 + body;
    if (evbuffer_get_length(in) < total)
        return;
    int i = f->n_reqs++;
    snprintf(f->reqs[i % 8], sizeof(f->reqs[0]), "%.*s", (int)total, all);
    evbuffer_drain(in, total);
    const step *s = &f->script[i < f->n_script ? i : f->n_script - 1];
    switch (s->what) {
    case REPLY: evbuffer_add(out, s->text, strlen(s->text)); break;
    case SILENT: break;
    case CLOSE: fc_close(fc); break;
    case HUGE_HEAD:
        evbuffer_add_printf(out, "HTTP/1.1 200 OK\r\n");
        for (int k = 0; k < 20000; k++)
            evbuffer_add_printf(out, "X-Filler-%d: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n", k);
        break;
    case HUGE_BODY:
        evbuffer_add_printf(out, "HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n{\"kvs\":\"");
        for (int k = 0; k < 1000; k++)
            evbuffer_add_printf(out, "%01000d", 0);
        break;
    }
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *a, int len,
                      void *arg)
{
    fconn *fc = calloc(1, sizeof(*fc));
    fake *f = arg;
    fc->f = f;
    while (fc->slot < 15 && f->conns[fc->slot])
        fc->slot++;
    assert_null(f->conns[fc->slot]);
    f->conns[fc->slot] = fc;
    fc->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(fc->bev, fc_read, NULL, fc_event, fc);
    bufferevent_enable(fc->bev, EV_READ | EV_WRITE);
}

static void fake_start(fake *f, const step *script, int n)
{
    memset(f, 0, sizeof(*f));
    f->script = script;
    f->n_script = n;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    f->l = evconnlistener_new_bind(base, on_accept, f, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
                                   16, (struct sockaddr *)&a, sizeof(a));
    assert_non_null(f->l);
    socklen_t l = sizeof(a);
    getsockname(evconnlistener_get_fd(f->l), (struct sockaddr *)&a, &l);
    snprintf(f->addr, sizeof(f->addr), "127.0.0.1:%d", ntohs(a.sin_port));
}

static void fake_stop(fake *f)
{
    evconnlistener_free(f->l);
    for (int i = 0; i < 16; i++)
        if (f->conns[i])
            fc_close(f->conns[i]);
}

typedef struct res {
    bool done;
    etcd_status status;
    int grpc_code;
    char message[128];
    int64_t revision;
} res;

static void on_res(const etcd_result *r, void *arg)
{
    res *x = arg;
    assert_false(x->done);
    x->done = true;
    x->status = r->status;
    x->grpc_code = r->grpc_code;
    x->revision = r->revision;
    snprintf(x->message, sizeof(x->message), "%s", r->message);
}

static void run_until(bool *flag)
{
    for (int i = 0; i < 100000 && !*flag; i++)
        event_base_loop(base, EVLOOP_ONCE);
    assert_true(*flag);
}

static res get_once(etcd_client *c)
{
    res x = {0};
    assert_non_null(etcd_get(c, "k", 1, NULL, on_res, &x));
    run_until(&x.done);
    return x;
}

#define OK_REPLY "HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n{\"header\":{\"revision\":\"42\"}}\n\n"

static etcd_client *client_of(fake *a, fake *b, unsigned timeout_ms)
{
    const char *eps[] = {a->addr, b ? b->addr : a->addr};
    etcd_limits lim = etcd_default_limits();
    lim.max_message_bytes = 64 << 10;
    lim.max_head_bytes = 4096;
    lim.max_queued = 4;
    lim.request_timeout_ms = timeout_ms;
    etcd_client *c = etcd_client_new(base, eps, 2, &lim);
    assert_non_null(c);
    return c;
}

/* Each broken reply ends its request with the status it deserves; the
 * following request goes to the good second endpoint. */
static void test_hostile_then_next_endpoint(void **st)
{
    static const struct {
        step s;
        etcd_status want;
    } cases[] = {
        {{REPLY, "HELLO\r\n\r\n"}, ETCD_PROTOCOL},
        {{HUGE_HEAD, NULL}, ETCD_PROTOCOL},
        {{HUGE_BODY, NULL}, ETCD_PROTOCOL},
        {{REPLY, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nnope!"}, ETCD_PROTOCOL},
        {{REPLY, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}, ETCD_PROTOCOL},
        {{CLOSE, NULL}, ETCD_UNAVAILABLE},
        {{SILENT, NULL}, ETCD_TIMEOUT},
    };
    static const step good[] = {{REPLY, OK_REPLY}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fake bad, ok;
        fake_start(&bad, &cases[i].s, 1);
        fake_start(&ok, good, 1);
        etcd_client *c = client_of(&bad, &ok, 300);
        res r = get_once(c);
        print_message("# case %zu: %s (%s)\n", i, etcd_status_name(r.status), r.message);
        assert_int_equal(r.status, cases[i].want);
        r = get_once(c);
        assert_int_equal(r.status, ETCD_OK);
        assert_int_equal(r.revision, 42);
        assert_int_equal(bad.n_reqs, 1);
        assert_int_equal(ok.n_reqs, 1);
        assert_non_null(strstr(ok.reqs[0], "POST /v3/kv/range HTTP/1.1\r\n"));
        assert_non_null(strstr(ok.reqs[0], "{\"key\":\"aw==\"}"));
        etcd_client_free(c);
        fake_stop(&bad);
        fake_stop(&ok);
    }
}

static void test_server_error_and_keepalive_reuse(void **st)
{
    static const step script[] = {
        {REPLY, "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
                "6c\r\n{\"error\":\"etcdserver: requested lease not found\",\"message\":"
                "\"etcdserver: requested lease not found\",\"code\":5}\r\n0\r\nX-T: 1\r\n\r\n"},
        {REPLY, OK_REPLY},
    };
    fake f;
    fake_start(&f, script, 2);
    etcd_client *c = client_of(&f, NULL, 5000);
    res r = get_once(c);
    assert_int_equal(r.status, ETCD_SERVER);
    assert_int_equal(r.grpc_code, 5);
    assert_string_equal(r.message, "etcdserver: requested lease not found");
    r = get_once(c);
    assert_int_equal(r.status, ETCD_OK);
    etcd_client_free(c);
    fake_stop(&f);
}

static void on_never(const etcd_result *r, void *arg) { fail_msg("cancelled callback called"); }

static void test_queue_bound_and_cancel(void **st)
{
    static const step script[] = {{REPLY, OK_REPLY}};
    fake f;
    fake_start(&f, script, 1);
    etcd_client *c = client_of(&f, NULL, 5000);
    res a = {0}, d = {0};
    assert_non_null(etcd_get(c, "k", 1, NULL, on_res, &a));
    etcd_req *b = etcd_get(c, "k", 1, NULL, on_never, NULL);
    etcd_req *cc = etcd_get(c, "k", 1, NULL, on_never, NULL);
    assert_non_null(etcd_get(c, "k", 1, NULL, on_res, &d));
    assert_null(etcd_get(c, "k", 1, NULL, on_res, NULL)); /* max_queued 4 */
    etcd_req_cancel(c, b);
    etcd_req_cancel(c, cc);
    run_until(&a.done);
    run_until(&d.done);
    assert_int_equal(f.n_reqs, 2);
    etcd_client_free(c);
    fake_stop(&f);
}

#define WATCH_HEAD "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
/* A stream that breaks after revisions 7 and 8: the watch asks for 9 on
 * the next connection and drops a stale 8 sent again; a compaction ends it. */
static void test_watch_resume(void **st)
{
    static const step script[] = {
        {REPLY, WATCH_HEAD "28\r\n{\"result\":{\"header\":{},\"created\":true}}\n\r\n"
                           "6a\r\n{\"result\":{\"events\":[{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":\"7\"}},"
                           "{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":\"8\"}}]}}\n\r\n0\r\n\r\n"},
        {REPLY, WATCH_HEAD "28\r\n{\"result\":{\"header\":{},\"created\":true}}\n\r\n"
                           "7a\r\n{\"result\":{\"events\":[{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":\"8\"}},"
                           "{\"type\":\"DELETE\",\"kv\":{\"key\":\"YQ==\",\"mod_revision\":\"9\"}}]}}\n\r\n"
                           "35\r\n{\"result\":{\"canceled\":true,\"compact_revision\":\"20\"}}\n\r\n"},
    };
    fake f;
    fake_start(&f, script, 2);
    etcd_client *c = client_of(&f, NULL, 5000);
    seen w = {0};
    etcd_watch *wa = etcd_watch_start(c, "a", 1, false, 5, on_events, &w);
    run_until(&w.ended);
    assert_int_equal(w.end, ETCD_COMPACTED);
    assert_int_equal(w.n, 3);
    assert_int_equal(w.revs[0], 7);
    assert_int_equal(w.revs[1], 8);
    assert_int_equal(w.revs[2], 9);
    assert_int_equal(f.n_reqs, 2);
    assert_non_null(strstr(f.reqs[0], "\"start_revision\":\"5\""));
    assert_non_null(strstr(f.reqs[1], "\"start_revision\":\"9\""));
    assert_int_equal(etcd_watch_next_revision(wa), 10);
    etcd_watch_free(wa);
    etcd_client_free(c);
    fake_stop(&f);
}

/* A watch response over the message bound ends the watch (a retry would
 * fetch the same revision again), once. */
static void test_watch_too_large(void **st)
{
    static const step script[] = {{HUGE_BODY, NULL}};
    fake f;
    fake_start(&f, script, 1);
    etcd_client *c = client_of(&f, NULL, 5000);
    seen w = {0};
    etcd_watch *wa = etcd_watch_start(c, "a", 1, true, 0, on_events, &w);
    run_until(&w.ended);
    assert_int_equal(w.end, ETCD_PROTOCOL);
    assert_int_equal(w.n, 0);
    assert_int_equal(f.n_reqs, 1);
    etcd_watch_free(wa);
    etcd_client_free(c);
    fake_stop(&f);
}

static void test_bad_endpoints(void **st)
{
    const char *bad[] = {"localhost:2379", "127.0.0.1", "", "1.2.3.4:99999"};
    for (int i = 0; i < 4; i++)
        assert_null(etcd_client_new(base, &bad[i], 1, NULL));
    assert_null(etcd_client_new(base, bad, 0, NULL));
    const char *good[] = {"http://127.0.0.1:2379", "[::1]:2379"};
    etcd_client *c = etcd_client_new(base, good, 2, NULL);
    assert_non_null(c);
    etcd_client_free(c);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    base = event_base_new();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_then_next_endpoint),
        cmocka_unit_test(test_server_error_and_keepalive_reuse),
        cmocka_unit_test(test_queue_bound_and_cancel),
        cmocka_unit_test(test_watch_resume),
        cmocka_unit_test(test_watch_too_large),
        cmocka_unit_test(test_bad_endpoints),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    event_base_free(base);
    return rc;
}
