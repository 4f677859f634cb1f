/* The client: endpoints, and the queue of unary requests.
 *
 * Requests wait in `queue` in order; the head is the one in flight when
 * `inflight` is set (one at a time over `conn`). Each request owns a
 * deadline timer armed when it is queued. A request leaves the queue when
 * its reply arrives, its deadline passes or its connection fails after
 * sending it -- its callback then runs once (none when cancelled). After
 * a failure (or a reply that does not decode) `conn` is dropped and the
 * next request connects to the next endpoint, after the `retry` timer (a
 * backoff once every endpoint has failed in a row). With credentials, an
 * authenticate goes first on each connection (auth.c).
 */
#include <event2/event.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include "etcd_int.h"

static void pump(etcd_client *c);

const char *etcd_status_name(etcd_status s)
{
    static const char *names[] = {"ok", "unavailable", "timeout", "protocol error",
                                  "server error", "compacted", "lease lost"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

etcd_limits etcd_default_limits(void)
{
    return (etcd_limits){.max_head_bytes = 8192, .max_message_bytes = 4u << 20,
                         .request_timeout_ms = 5000, .max_queued = 1024};
}

uint64_t etcd_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct event_base *etcd_base(etcd_client *c) { return c->base; }
const etcd_limits *etcd_limits_of(etcd_client *c) { return &c->lim; }
const endpoint *etcd_cur_endpoint(etcd_client *c) { return &c->eps[c->cur]; }
void etcd_endpoint_ok(etcd_client *c) { c->fails_in_row = 0; }

const endpoint *etcd_next_endpoint(etcd_client *c, unsigned *delay_ms)
{
    c->cur = (c->cur + 1) % c->n_eps;
    c->fails_in_row++;
    unsigned rounds = c->fails_in_row / (unsigned)c->n_eps;
    *delay_ms = rounds == 0 ? 0 : rounds > 5 ? 1000 : 25u << rounds;
    return &c->eps[c->cur];
}

static int parse_endpoint(const char *s, endpoint *ep)
{
    if (strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0)
        s += s[4] == 's' ? 8 : 7; /* the scheme is the client's: etcd_client_set_tls */
    if (strlen(s) >= sizeof(ep->host))
        return -1;
    int len = (int)sizeof(ep->addr);
    if (evutil_parse_sockaddr_port(s, (struct sockaddr *)&ep->addr, &len) < 0)
        return -1;
    in_port_t port = ep->addr.ss_family == AF_INET6
                         ? ((struct sockaddr_in6 *)&ep->addr)->sin6_port
                         : ((struct sockaddr_in *)&ep->addr)->sin_port;
    if (port == 0) /* "host" alone parses, as port 0 */
        return -1;
    const void *a = ep->addr.ss_family == AF_INET6
                        ? (const void *)&((struct sockaddr_in6 *)&ep->addr)->sin6_addr
                        : (const void *)&((struct sockaddr_in *)&ep->addr)->sin_addr;
    if (!evutil_inet_ntop(ep->addr.ss_family, a, ep->ip, sizeof(ep->ip)))
        return -1;
    ep->addr_len = (socklen_t)len;
    snprintf(ep->host, sizeof(ep->host), "%s", s);
    return 0;
}

static void on_retry(evutil_socket_t fd, short what, void *arg) { pump(arg); }

etcd_client *etcd_client_new(struct event_base *base, const char *const *endpoints,
                             size_t n_endpoints, const etcd_limits *lim)
{
    if (n_endpoints == 0)
        return NULL;
    etcd_client *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->base = base;
    c->lim = lim ? *lim : etcd_default_limits();
    TAILQ_INIT(&c->queue);
    c->eps = calloc(n_endpoints, sizeof(*c->eps));
    c->n_eps = n_endpoints;
    c->retry = evtimer_new(base, on_retry, c);
    bool ok = c->eps && c->retry && c->lim.max_head_bytes > 0 && c->lim.max_message_bytes > 0;
    for (size_t i = 0; ok && i < n_endpoints; i++)
        ok = parse_endpoint(endpoints[i], &c->eps[i]) == 0;
    if (!ok) {
        etcd_client_free(c);
        return NULL;
    }
    return c;
}

void etcd_req_free(etcd_req *r)
{
    if (r->deadline)
        event_free(r->deadline);
    free(r->body);
    free(r);
}

void etcd_client_free(etcd_client *c)
{
    if (!c)
        return;
    etcd_req *r;
    while ((r = TAILQ_FIRST(&c->queue))) {
        TAILQ_REMOVE(&c->queue, r, link);
        etcd_req_free(r);
    }
    econn_free(c->conn);
    if (c->retry)
        event_free(c->retry);
    free(c->eps);
    free(c->user);
    free(c->password);
    free(c->token);
    SSL_CTX_free(c->tls);
    free(c);
}

/* Takes `r` out of the queue, calls its callback with `res`, frees it. */
static void complete(etcd_req *r, const etcd_result *res)
{
    etcd_client *c = r->c;
    TAILQ_REMOVE(&c->queue, r, link);
    c->n_queued--;
    if (c->inflight == r)
        c->inflight = NULL;
    if (r->cb)
        r->cb(res, r->arg);
    etcd_req_free(r);
}

static void complete_status(etcd_req *r, etcd_status st, const char *text)
{
    etcd_result res = {.status = st, .message = text ? text : ""};
    complete(r, &res);
}

/* The connection is unusable: drop it, try the next endpoint later. */
static void drop_conn(etcd_client *c)
{
    econn_free(c->conn);
    c->conn = NULL;
    free(c->token); /* the next connection authenticates again */
    c->token = NULL;
    unsigned delay;
    etcd_next_endpoint(c, &delay);
    struct timeval tv = {delay / 1000, (delay % 1000) * 1000};
    evtimer_add(c->retry, &tv);
}

static void on_connected(void *arg) {}

static bool on_message(void *arg, int status, const char *msg, size_t len)
{
    etcd_client *c = arg;
    etcd_req *r = c->inflight;
    if (!r || r->answered)
        return true; /* a stream's later messages: ignored for unary calls */
    r->answered = true;
    etcd_result res;
    json_t *keep;
    codec_result(msg, len, status, &res, &keep);
    r->garbled = res.status == ETCD_PROTOCOL;
    if (r->is_auth) {
        etcd_auth_reply(c, r, &res, msg, len);
        codec_result_free(&res, keep);
        return true;
    }
    if (c->user && codec_token_refused(&res) && !r->auth_retried) {
        r->auth_retried = r->requeue = true; /* authenticate, then again */
        free(c->token);
        c->token = NULL;
        codec_result_free(&res, keep);
        return true;
    }
    etcd_cb cb = r->cb;
    r->cb = NULL; /* answered; `r` leaves the queue when the reply ends */
    if (cb)
        cb(&res, r->arg);
    codec_result_free(&res, keep);
    return true;
}

static void on_done(void *arg, int status)
{
    etcd_client *c = arg;
    etcd_req *r = c->inflight;
    if (r && r->requeue) { /* stays first in the queue */
        r->requeue = r->answered = false;
        c->inflight = NULL;
        pump(c);
        return;
    }
    bool broken = !r || !r->answered || r->garbled;
    if (broken) /* an endpoint that answers nonsense: try the next */
        drop_conn(c);
    else
        etcd_endpoint_ok(c);
    if (r && r->answered)
        complete(r, NULL);
    else if (r)
        complete_status(r, ETCD_PROTOCOL, "empty reply");
    pump(c);
}

static void on_failed(void *arg, etcd_status why, const char *text, bool sent)
{
    etcd_client *c = arg;
    etcd_req *r = c->inflight;
    drop_conn(c);
    c->inflight = NULL;
    if (r && (sent || r->answered)) /* it may have been applied: the caller decides */
        complete_status(r, why, text);
    /* never sent: it stays first in the queue for the next endpoint */
}

static const econn_ops unary_ops = {on_connected, on_message, on_done, on_failed};

static bool send_req(etcd_client *c, etcd_req *r)
{
    if (!c->conn ||
        econn_send(c->conn, r->path, r->body, strlen(r->body), r->is_auth ? NULL : c->token) < 0)
        return false;
    c->inflight = r;
    return true;
}

static void pump(etcd_client *c)
{
    if (TAILQ_EMPTY(&c->queue) || c->inflight || evtimer_pending(c->retry, NULL))
        return;
    if (c->conn && send_req(c, etcd_auth_first(c)))
        return;
    econn_free(c->conn); /* closed by the server after its last reply */
    free(c->token);
    c->token = NULL;
    c->conn = econn_new(c, etcd_cur_endpoint(c), &unary_ops, c);
    if (!send_req(c, etcd_auth_first(c)))
        drop_conn(c);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    etcd_req *r = arg;
    etcd_client *c = r->c;
    if (c->inflight == r) /* the endpoint stalls: leave it */
        drop_conn(c);
    complete_status(r, ETCD_TIMEOUT, "deadline passed");
    pump(c);
}

/* A request with its deadline armed, not yet queued; `body` is taken. */
etcd_req *etcd_req_new(etcd_client *c, const char *path, char *body, etcd_cb cb, void *arg)
{
    etcd_req *r = body ? calloc(1, sizeof(*r)) : NULL;
    if (!r) {
        free(body);
        return NULL;
    }
    r->c = c;
    r->path = path;
    r->cb = cb;
    r->arg = arg;
    r->body = body;
    r->deadline = evtimer_new(c->base, on_deadline, r);
    if (!r->deadline) {
        etcd_req_free(r);
        return NULL;
    }
    unsigned ms = c->lim.request_timeout_ms;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(r->deadline, &tv);
    return r;
}

etcd_req *etcd_request(etcd_client *c, const char *path, json_t *body, etcd_cb cb, void *arg)
{
    etcd_req *r = NULL;
    if (body && c->n_queued < c->lim.max_queued)
        r = etcd_req_new(c, path, json_dumps(body, JSON_COMPACT), cb, arg);
    json_decref(body);
    if (!r)
        return NULL;
    TAILQ_INSERT_TAIL(&c->queue, r, link);
    c->n_queued++;
    if (!evtimer_pending(c->retry, NULL)) { /* send from the loop, not from here */
        struct timeval now = {0, 0};
        evtimer_add(c->retry, &now);
    }
    return r;
}

void etcd_req_cancel(etcd_client *c, etcd_req *r)
{
    if (c->inflight == r) {
        r->cb = NULL; /* its reply still has to be read */
        return;
    }
    TAILQ_REMOVE(&c->queue, r, link);
    c->n_queued--;
    etcd_req_free(r);
}

void etcd_client_set_tls(etcd_client *c, struct ssl_ctx_st *ctx)
{
    SSL_CTX_up_ref(ctx);
    SSL_CTX_free(c->tls);
    c->tls = ctx;
}
