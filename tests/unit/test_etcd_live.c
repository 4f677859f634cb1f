/* etcd/ against a real etcd that the test starts on ephemeral 127.0.0.1
 * ports in a temporary data dir: keys, CAS races, a lease that lapses when
 * nobody keeps it, watches in order across a restart of etcd, compaction,
 * and an election taken over when the leader's lease lapses. Without the
 * etcd binary the test fails and says how to install it. Waits are loops
 * on the event base bounded by a generous safety timer, never a timing
 * assertion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/ssl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../etcd/etcd_int.h"
#include "test_etcd_util.h"

typedef struct etcd_proc {
    char dir[64], client[64];
    int cport, pport;
    pid_t pid;
    bool tls; /* clients over https, with dir/srv.crt and dir/srv.key */
    const char *name, *cluster; /* a member of a cluster; NULL: "t" alone */
} etcd_proc;

static struct event_base *base;
static etcd_proc E;

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(s, (struct sockaddr *)&a, &l), 0);
    close(s);
    return ntohs(a.sin_port);
}

static void etcd_spawn(etcd_proc *p)
{
    char curl[80], purl[80], cluster[100], datadir[80], log[80], crt[80], key[80];
    snprintf(curl, sizeof(curl), "%s://127.0.0.1:%d", p->tls ? "https" : "http", p->cport);
    snprintf(crt, sizeof(crt), "%s/srv.crt", p->dir);
    snprintf(key, sizeof(key), "%s/srv.key", p->dir);
    snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", p->pport);
    snprintf(cluster, sizeof(cluster), "t=%s", purl);
    const char *name = p->name ? p->name : "t", *members = p->cluster ? p->cluster : cluster;
    snprintf(datadir, sizeof(datadir), "%s/data", p->dir);
    snprintf(log, sizeof(log), "%s/etcd.log", p->dir);
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no etcd outlives a crashed test */
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execlp("etcd", "etcd", "--name", name, "--data-dir", datadir, "--listen-client-urls", curl,
               "--advertise-client-urls", curl, "--listen-peer-urls", purl,
               "--initial-advertise-peer-urls", purl, "--initial-cluster", members,
               /* idle tokens expire fast: test_auth sees one refused */
               "--auth-token-ttl", "2", p->tls ? "--cert-file" : NULL, crt, "--key-file", key,
               NULL);
        _exit(127);
    }
}

static void etcd_stop(etcd_proc *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGTERM);
        int st;
        waitpid(p->pid, &st, 0);
        assert_false(WIFEXITED(st) && WEXITSTATUS(st) == 127);
    }
    p->pid = 0;
}

/* ---- running the loop until something happened ---- */
static bool timed_out;
static void on_safety(evutil_socket_t fd, short w, void *arg) { timed_out = true; }

/* Runs the loop until *flag, or fails after `secs` (a safety net only). */
static void run_until(volatile bool *flag, int secs)
{
    struct event *t = evtimer_new(base, on_safety, NULL);
    struct timeval tv = {secs, 0};
    timed_out = false;
    evtimer_add(t, &tv);
    while (!*flag && !timed_out)
        event_base_loop(base, EVLOOP_ONCE);
    event_free(t);
    assert_true(*flag);
}

static void on_sleep(evutil_socket_t fd, short w, void *arg) { *(bool *)arg = true; }
static void run_for_ms(int ms)
{
    bool done = false;
    struct event *t = evtimer_new(base, on_sleep, &done);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(t, &tv);
    run_until(&done, ms / 1000 + 30);
    event_free(t);
}

/* A synchronous view of one request, for the test's convenience. */
typedef struct sync_res {
    bool done;
    etcd_status status;
    bool succeeded;
    int64_t revision, count, deleted, lease_id, ttl, create_rev, mod_rev;
    char value[256];
    int n_kvs;
} sync_res;

static void on_res(const etcd_result *r, void *arg)
{
    sync_res *s = arg;
    s->done = true;
    s->status = r->status;
    s->succeeded = r->succeeded;
    s->revision = r->revision;
    s->count = r->count;
    s->deleted = r->deleted;
    s->lease_id = r->lease_id;
    s->ttl = r->ttl;
    s->n_kvs = (int)r->n_kvs;
    if (r->n_kvs) {
        s->create_rev = r->kvs[0].create_revision;
        s->mod_rev = r->kvs[0].mod_revision;
        snprintf(s->value, sizeof(s->value), "%.*s", (int)r->kvs[0].value_len,
                 (const char *)r->kvs[0].value);
    }
}

static sync_res wait_res(etcd_req *req, sync_res *s)
{
    assert_non_null(req);
    run_until(&s->done, 60);
    return *s;
}

#define SYNC(call_with_s) ({ sync_res s_ = {0}; sync_res *s = &s_; wait_res((call_with_s), s); })

static etcd_client *new_client(void)
{
    const char *eps[] = {E.client};
    etcd_client *c = etcd_client_new(base, eps, 1, NULL);
    assert_non_null(c);
    return c;
}

static void wait_ready(void)
{
    etcd_client *c = new_client();
    for (int i = 0; i < 300; i++) {
        sync_res r = SYNC(etcd_get(c, "ready", 5, NULL, on_res, s));
        if (r.status == ETCD_OK)
            break;
        assert_int_not_equal(waitpid(E.pid, NULL, WNOHANG), E.pid);
        run_for_ms(100);
    }
    etcd_client_free(c);
}

static int setup(void **state)
{
    if (access("/usr/bin/etcd", X_OK) != 0 && system("command -v etcd > /dev/null") != 0) {
        fprintf(stderr, "etcd is not installed: apt-get install -y etcd-server "
                        "(scripts/deps.sh installs it)\n");
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    base = event_base_new();
    snprintf(E.dir, sizeof(E.dir), "/tmp/warren-etcd-XXXXXX");
    assert_non_null(mkdtemp(E.dir));
    E.cport = free_port();
    E.pport = free_port();
    snprintf(E.client, sizeof(E.client), "127.0.0.1:%d", E.cport);
    etcd_spawn(&E);
    wait_ready();
    return 0;
}

static int teardown(void **state)
{
    etcd_stop(&E);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", E.dir);
    assert_int_equal(system(cmd), 0);
    event_base_free(base);
    return 0;
}

/* The first endpoint refuses connections: requests go on to the next. */
static void test_endpoint_list(void **st)
{
    char dead[64];
    snprintf(dead, sizeof(dead), "127.0.0.1:%d", free_port());
    const char *eps[] = {dead, E.client};
    etcd_client *c = etcd_client_new(base, eps, 2, NULL);
    for (int i = 0; i < 3; i++) {
        sync_res r = SYNC(etcd_put(c, "ep/k", 4, "v", 1, 0, on_res, s));
        assert_int_equal(r.status, ETCD_OK);
    }
    etcd_client_free(c);
}

static void test_kv(void **st)
{
    etcd_client *c = new_client();
    sync_res r = SYNC(etcd_put(c, "kv/a", 4, "1", 1, 0, on_res, s));
    assert_int_equal(r.status, ETCD_OK);
    int64_t put_rev = r.revision;
    r = SYNC(etcd_put(c, "kv/b", 4, "2", 1, 0, on_res, s));
    r = SYNC(etcd_get(c, "kv/a", 4, NULL, on_res, s));
    assert_int_equal(r.n_kvs, 1);
    assert_string_equal(r.value, "1");
    assert_int_equal(r.create_rev, put_rev);
    etcd_get_opts o = {.prefix = true};
    r = SYNC(etcd_get(c, "kv/", 3, &o, on_res, s));
    assert_int_equal(r.count, 2);
    r = SYNC(etcd_get(c, "kv/none", 7, NULL, on_res, s));
    assert_int_equal(r.status, ETCD_OK);
    assert_int_equal(r.n_kvs, 0);
    r = SYNC(etcd_delete(c, "kv/", 3, true, on_res, s));
    assert_int_equal(r.deleted, 2);
    /* a lease that does not exist: etcd's refusal comes through */
    r = SYNC(etcd_put(c, "kv/x", 4, "1", 1, 12345, on_res, s));
    assert_int_equal(r.status, ETCD_SERVER);
    etcd_client_free(c);
}

/* Two clients race CAS increments of one counter: every increment lands
 * once, the losers see the current value and retry. */
typedef struct incr {
    etcd_client *c;
    int left, conflicts;
    int64_t mod;
    int value;
    bool done;
} incr;

static void incr_step(incr *in);
static void on_incr(const etcd_result *r, void *arg)
{
    incr *in = arg;
    assert_int_equal(r->status, ETCD_OK);
    if (r->succeeded) {
        in->left--;
        in->mod = r->revision;
        in->value++;
    } else {
        in->conflicts++;
        in->mod = r->n_kvs ? r->kvs[0].mod_revision : 0;
        in->value = r->n_kvs ? atoi((const char *)r->kvs[0].value) : 0;
    }
    incr_step(in);
}

static void incr_step(incr *in)
{
    if (in->left == 0) {
        in->done = true;
        return;
    }
    char v[16];
    int n = snprintf(v, sizeof(v), "%d", in->value + 1);
    assert_non_null(etcd_cas(in->c, "cas/n", 5, in->mod, v, (size_t)n, 0, on_incr, in));
}

static void test_cas_race(void **st)
{
    incr a = {.c = new_client(), .left = 25}, b = {.c = new_client(), .left = 25};
    incr_step(&a);
    incr_step(&b);
    run_until(&a.done, 120);
    run_until(&b.done, 120);
    etcd_client *c = new_client();
    sync_res r = SYNC(etcd_get(c, "cas/n", 5, NULL, on_res, s));
    assert_string_equal(r.value, "50");
    /* a stale expectation loses and reads the current value */
    r = SYNC(etcd_cas(c, "cas/n", 5, r.mod_rev - 1, "x", 1, 0, on_res, s));
    assert_false(r.succeeded);
    assert_string_equal(r.value, "50");
    /* a create-only CAS on an existing key fails */
    r = SYNC(etcd_cas(c, "cas/n", 5, 0, "x", 1, 0, on_res, s));
    assert_false(r.succeeded);
    print_message("# cas race: 50 increments, %d conflicts\n", a.conflicts + b.conflicts);
    etcd_client_free(a.c);
    etcd_client_free(b.c);
    etcd_client_free(c);
}

static void on_lost(etcd_status why, void *arg)
{
    assert_int_equal(why, ETCD_LEASE_LOST);
    *(bool *)arg = true;
}

static void test_lease(void **st)
{
    etcd_client *c = new_client();
    uint64_t t0 = etcd_now_ms();
    /* TTLs of 3 s: renewals every second hold even on a loaded machine */
    sync_res g = SYNC(etcd_lease_grant(c, 3, on_res, s));
    assert_int_equal(g.status, ETCD_OK);
    assert_true(g.lease_id != 0 && g.ttl >= 3);
    bool lost = false;
    etcd_keeper *k = etcd_keeper_start(c, g.lease_id, g.ttl, t0, on_lost, &lost);
    sync_res r = SYNC(etcd_put(c, "lease/k", 7, "v", 1, g.lease_id, on_res, s));
    assert_int_equal(r.status, ETCD_OK);
    run_for_ms((int)g.ttl * 2000); /* twice the TTL: kept alive */
    assert_false(lost);
    assert_true(etcd_keeper_alive(k));
    /* renewed: the deadline moved past the grant's */
    assert_true(etcd_keeper_deadline_ms(k) > t0 + (uint64_t)g.ttl * 1000);
    assert_true(etcd_keeper_deadline_ms(k) <= etcd_now_ms() + (uint64_t)g.ttl * 1000);
    r = SYNC(etcd_get(c, "lease/k", 7, NULL, on_res, s));
    assert_int_equal(r.n_kvs, 1);
    etcd_keeper_free(k); /* nobody renews: the key goes with the lease */
    for (int i = 0; i < 100 && r.n_kvs; i++) {
        run_for_ms(200);
        r = SYNC(etcd_get(c, "lease/k", 7, NULL, on_res, s));
    }
    assert_int_equal(r.n_kvs, 0);

    /* a keeper whose lease is revoked reports the loss once */
    g = SYNC(etcd_lease_grant(c, 5, on_res, s));
    lost = false;
    k = etcd_keeper_start(c, g.lease_id, g.ttl, etcd_now_ms(), on_lost, &lost);
    r = SYNC(etcd_lease_revoke(c, g.lease_id, on_res, s));
    assert_int_equal(r.status, ETCD_OK);
    run_until(&lost, 60);
    assert_false(etcd_keeper_alive(k));
    etcd_keeper_free(k);
    etcd_client_free(c);
}

static void wait_events(seen *w, int n)
{
    for (int i = 0; i < 600 && w->n < n; i++)
        run_for_ms(100);
    assert_int_equal(w->n, n);
}

static void test_watch_restart_compaction(void **st)
{
    etcd_client *c = new_client();
    sync_res r = SYNC(etcd_put(c, "w/a", 3, "1", 1, 0, on_res, s));
    seen w = {0};
    etcd_watch *wa = etcd_watch_start(c, "w/", 2, true, r.revision, on_events, &w);
    SYNC(etcd_put(c, "w/b", 3, "2", 1, 0, on_res, s));
    SYNC(etcd_delete(c, "w/a", 3, false, on_res, s));
    SYNC(etcd_put(c, "x/other", 7, "2", 1, 0, on_res, s));
    wait_events(&w, 3);
    assert_string_equal(w.log[0], "+w/a");
    assert_string_equal(w.log[1], "+w/b");
    assert_string_equal(w.log[2], "-w/a");

    /* etcd restarts; the watch resumes after the last revision it gave */
    etcd_stop(&E);
    etcd_spawn(&E);
    wait_ready();
    SYNC(etcd_put(c, "w/c", 3, "3", 1, 0, on_res, s));
    SYNC(etcd_put(c, "w/d", 3, "4", 1, 0, on_res, s));
    wait_events(&w, 5);
    assert_string_equal(w.log[3], "+w/c");
    assert_string_equal(w.log[4], "+w/d");
    for (int i = 1; i < w.n; i++)
        assert_true(w.revs[i] > w.revs[i - 1]);
    assert_false(w.ended);
    etcd_watch_free(wa);

    /* a watch from a compacted revision ends, saying where history starts */
    r = SYNC(etcd_put(c, "w/e", 3, "5", 1, 0, on_res, s));
    json_t *j = json_pack("{sI}", "revision", (json_int_t)r.revision);
    sync_res cr = SYNC(etcd_request(c, "/v3/kv/compaction", j, on_res, s));
    assert_int_equal(cr.status, ETCD_OK);
    seen w2 = {0};
    wa = etcd_watch_start(c, "w/", 2, true, 2, on_events, &w2);
    run_until(&w2.ended, 60);
    assert_int_equal(w2.end, ETCD_COMPACTED);
    assert_int_equal(w2.compact, r.revision);
    etcd_watch_free(wa);
    etcd_client_free(c);
}

typedef struct cand {
    etcd_client *c;
    etcd_keeper *k;
    etcd_election *e;
    int64_t lease, epoch;
    bool is_me, campaigning, lost;
    int views;
} cand;

static void on_view(const etcd_election_view *v, void *arg)
{
    cand *x = arg;
    x->views++;
    if (v->status != ETCD_OK)
        return;
    x->epoch = v->epoch;
    x->is_me = v->is_me;
    x->campaigning = v->campaigning;
}

static void cand_start(cand *x, const char *name)
{
    x->c = new_client();
    uint64_t t0 = etcd_now_ms();
    sync_res g = SYNC(etcd_lease_grant(x->c, 3, on_res, s));
    assert_int_equal(g.status, ETCD_OK);
    x->lease = g.lease_id;
    x->k = etcd_keeper_start(x->c, g.lease_id, g.ttl, t0, on_lost, &x->lost);
    x->e = etcd_election_new(x->c, "elect", on_view, x);
    assert_non_null(x->e);
    assert_int_equal(etcd_election_campaign(x->e, x->lease, name, strlen(name)), 0);
    assert_int_equal(etcd_election_campaign(x->e, x->lease, name, strlen(name)), -1);
}

static void wait_flag(bool *f, bool want)
{
    for (int i = 0; i < 600 && *f != want; i++)
        run_for_ms(50);
    assert_int_equal(*f, want);
}

static void test_election_takeover(void **st)
{
    cand a = {0}, b = {0};
    cand_start(&a, "node-a");
    wait_flag(&a.is_me, true);
    int64_t first = a.epoch;
    assert_true(first > 0);
    cand_start(&b, "node-b");
    wait_flag(&b.campaigning, true);
    assert_false(b.is_me);
    assert_int_equal(b.epoch, first); /* b observes a's leadership */

    etcd_keeper_free(a.k); /* a stops renewing: its lease lapses */
    a.k = NULL;
    wait_flag(&b.is_me, true);
    assert_true(b.epoch > first);
    wait_flag(&a.campaigning, false);
    assert_false(a.is_me);
    assert_int_equal(a.epoch, b.epoch);
    assert_false(b.lost);
    int64_t second = b.epoch;

    /* b resigns: nobody leads, a (its key gone) sees that */
    etcd_election_resign(b.e);
    wait_flag(&b.is_me, false);
    for (int i = 0; i < 600 && a.epoch != 0; i++)
        run_for_ms(50);
    assert_int_equal(a.epoch, 0);
    print_message("# election: epochs %lld then %lld\n", (long long)first, (long long)second);

    cand *all[] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        etcd_election_free(all[i]->e);
        etcd_keeper_free(all[i]->k);
        etcd_client_free(all[i]->c);
    }
}

/* A CA, and a certificate for 127.0.0.1 that it signs, in `dir`. */
static void make_certs(const char *dir, const char *ca_name)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "cd %s && printf 'subjectAltName=IP:127.0.0.1\\n' > ext && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout %s.key -out %s.crt -days 2 -subj /CN=%s 2>/dev/null && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout srv.key "
             "-out srv.csr -subj /CN=etcd 2>/dev/null && "
             "openssl x509 -req -in srv.csr -CA %s.crt -CAkey %s.key -CAcreateserial -out srv.crt "
             "-days 2 -extfile ext 2>/dev/null",
             dir, ca_name, ca_name, ca_name, ca_name, ca_name);
    assert_int_equal(system(cmd), 0);
}

static SSL_CTX *ctx_trusting(const char *ca_file)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(ctx);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    assert_int_equal(SSL_CTX_load_verify_locations(ctx, ca_file, NULL), 1);
    return ctx;
}

/* etcd over TLS: a client trusting its CA works (a watch too); one
 * trusting another CA never sends a byte and times out. */
static void test_tls(void **st)
{
    etcd_proc T = {.tls = true};
    snprintf(T.dir, sizeof(T.dir), "/tmp/warren-etcd-tls-XXXXXX");
    assert_non_null(mkdtemp(T.dir));
    make_certs(T.dir, "ca");
    char other[80], ca[96], other_ca[96];
    snprintf(other, sizeof(other), "%s/other", T.dir);
    assert_int_equal(mkdir(other, 0700), 0);
    make_certs(other, "ca");
    T.cport = free_port();
    T.pport = free_port();
    snprintf(T.client, sizeof(T.client), "127.0.0.1:%d", T.cport);
    etcd_spawn(&T);
    snprintf(ca, sizeof(ca), "%s/ca.crt", T.dir);
    snprintf(other_ca, sizeof(other_ca), "%s/ca.crt", other);

    const char *eps[] = {T.client};
    etcd_client *c = etcd_client_new(base, eps, 1, NULL);
    SSL_CTX *ctx = ctx_trusting(ca);
    etcd_client_set_tls(c, ctx);
    SSL_CTX_free(ctx); /* the client holds its own reference */
    sync_res r = {0};
    for (int i = 0; i < 300; i++) { /* until etcd listens */
        r = SYNC(etcd_put(c, "tls/k", 5, "v", 1, 0, on_res, s));
        if (r.status == ETCD_OK)
            break;
        run_for_ms(100);
    }
    assert_int_equal(r.status, ETCD_OK);
    seen w = {0};
    etcd_watch *wa = etcd_watch_start(c, "tls/k", 5, false, r.revision, on_events, &w);
    wait_events(&w, 1);
    assert_string_equal(w.log[0], "+tls/k");
    etcd_watch_free(wa);
    etcd_client_free(c);

    etcd_limits lim = etcd_default_limits();
    lim.request_timeout_ms = 1000;
    c = etcd_client_new(base, eps, 1, &lim);
    ctx = ctx_trusting(other_ca);
    etcd_client_set_tls(c, ctx);
    SSL_CTX_free(ctx);
    r = SYNC(etcd_put(c, "tls/k", 5, "x", 1, 0, on_res, s));
    assert_int_equal(r.status, ETCD_TIMEOUT);
    etcd_client_free(c);

    etcd_stop(&T);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", T.dir);
    assert_int_equal(system(cmd), 0);
}

/* Puts until etcd answers OK (a cluster electing its leader refuses a
 * while); the last result. */
static sync_res put_until_ok(etcd_client *c, const char *key, const char *value)
{
    sync_res r = {0};
    for (int i = 0; i < 300; i++) {
        r = SYNC(etcd_put(c, key, strlen(key), value, strlen(value), 0, on_res, s));
        if (r.status == ETCD_OK)
            break;
        run_for_ms(100);
    }
    assert_int_equal(r.status, ETCD_OK);
    return r;
}

/* A cluster of three members; the one the client and its watch use is
 * killed: requests go on through the next endpoint and the watch resumes
 * there, nothing repeated or lost. */
static void test_cluster_failover(void **st)
{
    char dir[40], members[400] = "";
    snprintf(dir, sizeof(dir), "/tmp/warren-etcd-cl-XXXXXX");
    assert_non_null(mkdtemp(dir));
    static const char *names[] = {"m0", "m1", "m2"};
    etcd_proc m[3] = {0};
    for (int i = 0; i < 3; i++) {
        m[i].name = names[i];
        m[i].cport = free_port();
        m[i].pport = free_port();
        snprintf(m[i].dir, sizeof(m[i].dir), "%s/%s", dir, names[i]);
        assert_int_equal(mkdir(m[i].dir, 0700), 0);
        snprintf(m[i].client, sizeof(m[i].client), "127.0.0.1:%d", m[i].cport);
        size_t n = strlen(members);
        snprintf(members + n, sizeof(members) - n, "%s%s=http://127.0.0.1:%d", i ? "," : "",
                 names[i], m[i].pport);
    }
    for (int i = 0; i < 3; i++) {
        m[i].cluster = members;
        etcd_spawn(&m[i]);
    }
    const char *eps[] = {m[0].client, m[1].client, m[2].client};
    etcd_client *c = etcd_client_new(base, eps, 3, NULL);
    sync_res r = put_until_ok(c, "cl/a", "1");
    seen w = {0};
    etcd_watch *wa = etcd_watch_start(c, "cl/", 3, true, r.revision, on_events, &w);
    wait_events(&w, 1);

    int used = 0; /* the member both connections use */
    while (strcmp(m[used].client, etcd_cur_endpoint(c)->host) != 0)
        used++;
    kill(m[used].pid, SIGKILL);
    waitpid(m[used].pid, NULL, 0);
    m[used].pid = 0;
    put_until_ok(c, "cl/b", "2");
    assert_string_not_equal(etcd_cur_endpoint(c)->host, m[used].client);
    put_until_ok(c, "cl/c", "3");
    wait_events(&w, 3);
    assert_string_equal(w.log[0], "+cl/a");
    assert_string_equal(w.log[1], "+cl/b");
    assert_string_equal(w.log[2], "+cl/c");
    r = SYNC(etcd_get(c, "cl/b", 4, NULL, on_res, s));
    assert_string_equal(r.value, "2");
    etcd_watch_free(wa);
    etcd_client_free(c);
    for (int i = 0; i < 3; i++)
        etcd_stop(&m[i]);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void admin(etcd_client *c, const char *path, json_t *body)
{
    sync_res r = SYNC(etcd_request(c, path, body, on_res, s));
    assert_int_equal(r.status, ETCD_OK);
}

/* Last: it turns etcd's authentication on. */
static void test_auth(void **st)
{
    etcd_client *c = new_client();
    admin(c, "/v3/auth/role/add", json_pack("{ss}", "name", "root"));
    admin(c, "/v3/auth/user/add", json_pack("{ssss}", "name", "root", "password", "s3cret"));
    admin(c, "/v3/auth/user/grant", json_pack("{ssss}", "user", "root", "role", "root"));
    admin(c, "/v3/auth/enable", json_object());
    sync_res r = SYNC(etcd_put(c, "auth/k", 6, "v", 1, 0, on_res, s));
    assert_int_equal(r.status, ETCD_SERVER); /* no credentials */
    etcd_client_free(c);

    c = new_client();
    assert_int_equal(etcd_client_set_auth(c, "root", "wrong"), 0);
    sync_res a = {0}, b = {0};
    assert_non_null(etcd_put(c, "auth/k", 6, "v", 1, 0, on_res, &a));
    assert_non_null(etcd_put(c, "auth/k", 6, "v", 1, 0, on_res, &b));
    run_until(&b.done, 60);
    assert_int_equal(a.status, ETCD_SERVER);
    assert_int_equal(b.status, ETCD_SERVER);
    etcd_client_free(c);

    c = new_client();
    assert_int_equal(etcd_client_set_auth(c, "root", "s3cret"), 0);
    seen w = {0};
    etcd_watch *wa = etcd_watch_start(c, "auth/", 5, true, 0, on_events, &w);
    run_for_ms(500);
    r = SYNC(etcd_put(c, "auth/k", 6, "v1", 2, 0, on_res, s));
    assert_int_equal(r.status, ETCD_OK);
    /* idle past the token's TTL: refused once, authenticated anew */
    run_for_ms(4000);
    r = SYNC(etcd_put(c, "auth/k", 6, "v2", 2, 0, on_res, s));
    assert_int_equal(r.status, ETCD_OK);
    r = SYNC(etcd_get(c, "auth/k", 6, NULL, on_res, s));
    assert_string_equal(r.value, "v2");
    wait_events(&w, 2);
    assert_string_equal(w.log[0], "+auth/k");
    etcd_watch_free(wa);
    etcd_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoint_list),
        cmocka_unit_test(test_kv),
        cmocka_unit_test(test_cas_race),
        cmocka_unit_test(test_lease),
        cmocka_unit_test(test_watch_restart_compaction),
        cmocka_unit_test(test_election_takeover),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_cluster_failover),
        cmocka_unit_test(test_auth),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
