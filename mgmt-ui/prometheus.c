/* The Prometheus listener: its own HTTP server on the broker's loop, bound to
 * prometheus.tcp.ip:prometheus.tcp.port (rabbitmq_prometheus's 15692),
 * serving GET /metrics (aggregated, or per object with
 * prometheus.return_per_object_metrics = true), /metrics/per-object and
 * /metrics/detailed?family=...&vhost=...; anything else is 404. No
 * authentication, as rabbitmq_prometheus.
 *
 * A scrape is a job for the management scheduler (work.c), written in
 * slices of about SLICE_BYTES, as list_reply.c writes lists: when the first
 * slice completes the scrape it is one reply with a Content-Length (an
 * aggregated scrape always is); otherwise the reply goes out chunked and
 * each further slice is queued only when the client has read the previous
 * one, so the loop serves AMQP between slices. A client that goes away mid-scrape frees it through the
 * request's abort callback. Requests with a body, or other than GET and
 * HEAD, are refused on their head.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt_int.h"

#define SLICE_BYTES (64 * 1024)
#define CONTENT_TYPE "text/plain; version=0.0.4"

struct mgmt_prometheus {
    mgmt *m;
    server *s;
    http_server *http;
    int port;
    mgmt_https https;
};

typedef struct slices {
    mgmt_job job; /* first: the job is the scrape */
    mgmt_prometheus *p;
    http_req *req;
    struct evbuffer *out;
    mgmt_prom *w;
    prom_scrape *sc;
    bool started;
} slices;

static void slices_free(slices *st)
{
    mgmt_work_cancel(mgmt_work_of(st->p->m), &st->job);
    prom_scrape_free(st->sc);
    mgmt_prom_free(st->w);
    if (st->out)
        evbuffer_free(st->out);
    free(st);
}

static void send_text(http_req *req, int status, const char *reason, const char *text)
{
    struct evbuffer *b = evbuffer_new();
    if (b)
        evbuffer_add(b, text, strlen(text));
    http_reply_header(req, "Content-Type", "text/plain; charset=utf-8");
    http_reply(req, status, reason, b);
    if (b)
        evbuffer_free(b);
}

static void drained(http_req *req, void *arg)
{
    (void)req;
    slices *st = arg;
    mgmt_work_queue(mgmt_work_of(st->p->m), &st->job);
}

/* What the request asks for. /metrics/detailed's query as
 * rabbitmq_prometheus reads it: each family= names a family to write
 * (unknown ones are ignored), each vhost= a vhost whose queues are written
 * (without any, every vhost's); a parameter without '=' is ignored, as
 * there. */
typedef struct scrape_query {
    prom_options o;
    char **vhosts; /* decoded, owned */
} scrape_query;

/* One key=value of the query; false on out-of-memory. */
static bool detailed_param(scrape_query *d, const char *p, size_t n)
{
    const char *eq = memchr(p, '=', n);
    size_t klen = eq ? (size_t)(eq - p) : 0;
    bool family = klen == 6 && memcmp(p, "family", 6) == 0;
    if (!family && !(klen == 5 && memcmp(p, "vhost", 5) == 0))
        return true;
    char *raw = strndup(eq + 1, n - klen - 1);
    char *v = raw ? evhttp_uridecode(raw, 1, NULL) : NULL;
    free(raw);
    char **grown = v && !family ? realloc(d->vhosts, (d->o.nvhosts + 1) * sizeof *grown) : NULL;
    if (!v || (!family && !grown)) {
        free(v);
        return false;
    }
    if (family) {
        d->o.families |= prom_family_bit(v);
        free(v);
        return true;
    }
    d->vhosts = grown;
    d->vhosts[d->o.nvhosts++] = v;
    d->o.vhosts = (const char *const *)d->vhosts;
    d->o.vhost_filter = true;
    return true;
}

static void query_free(scrape_query *d)
{
    for (size_t i = 0; i < d->o.nvhosts; i++)
        free(d->vhosts[i]);
    free(d->vhosts);
}

/* false on out-of-memory (query_free it all the same). */
static bool query_parse(mgmt_prometheus *p, http_req *req, scrape_query *d)
{
    const char *path = http_req_path(req);
    *d = (scrape_query){.o = {.per_object = strcmp(path, "/metrics/per-object") == 0 ||
                                            server_config(p->s)->prometheus_per_object}};
    if (strcmp(path, "/metrics/detailed") != 0)
        return true;
    d->o.detailed = true;
    for (const char *q = http_req_query(req); q && *q;) {
        size_t n = strcspn(q, "&");
        if (!detailed_param(d, q, n))
            return false;
        q += n + (q[n] == '&');
    }
    return true;
}

/* The first step takes the snapshot; each one renders a slice. */
static void step(mgmt_job *j)
{
    slices *st = (slices *)j;
    loop_touch_clock(admin_loop(st->p->s));
    if (!st->sc) {
        scrape_query d;
        if (query_parse(st->p, st->req, &d))
            st->sc = prom_scrape_new(st->p->m, st->p->s, &d.o, st->w);
        query_free(&d);
        if (!st->sc) {
            send_text(st->req, 500, "Internal Server Error", "out of memory\n");
            slices_free(st);
            return;
        }
    }
    bool done = prom_scrape_step(st->sc, SLICE_BYTES);
    mgmt_prom_flush(st->w);
    if (!st->started && done) { /* it all fits: one plain reply */
        http_reply_header(st->req, "Content-Type", CONTENT_TYPE);
        http_reply(st->req, 200, "OK", st->out);
        slices_free(st);
        return;
    }
    if (!st->started) {
        st->started = true;
        http_reply_header(st->req, "Content-Type", CONTENT_TYPE);
        http_reply_start(st->req, 200, "OK");
    }
    if (!done) {
        http_reply_chunk(st->req, st->out, drained, st);
        return;
    }
    http_reply_chunk(st->req, st->out, NULL, NULL);
    http_reply_end(st->req);
    slices_free(st);
}

/* The client went away mid-scrape (the server frees the request). */
static void slices_aborted(http_req *req, void *arg)
{
    (void)req;
    slices_free(arg);
}

/* Only bodiless GET and HEAD requests get past their head. */
static bool admit(http_req *req, void *arg)
{
    (void)arg;
    http_method m = http_req_method(req);
    if (m != HTTP_GET && m != HTTP_HEAD) {
        http_reply_header(req, "Allow", "GET, HEAD");
        send_text(req, 405, "Method Not Allowed", "method not allowed\n");
        return false;
    }
    if (http_req_has_body(req)) {
        send_text(req, 400, "Bad Request", "a scrape has no body\n");
        return false;
    }
    return true;
}

static void handle(http_req *req, void *arg)
{
    mgmt_prometheus *p = arg;
    const char *path = http_req_path(req);
    if (strcmp(path, "/metrics") != 0 && strcmp(path, "/metrics/per-object") != 0 &&
        strcmp(path, "/metrics/detailed") != 0) {
        send_text(req, 404, "Not Found", "not found\n");
        return;
    }
    slices *st = calloc(1, sizeof *st);
    if (!st || !(st->out = evbuffer_new()) || !(st->w = mgmt_prom_new(st->out))) {
        if (st) {
            st->p = p;
            slices_free(st);
        }
        send_text(req, 500, "Internal Server Error", "out of memory\n");
        return;
    }
    st->job.step = step;
    st->p = p;
    st->req = req;
    http_req_on_abort(req, slices_aborted, st);
    mgmt_work_queue(mgmt_work_of(p->m), &st->job);
}

mgmt_prometheus *mgmt_prometheus_new(mgmt *m, server *s)
{
    const config *cfg = server_config(s);
    mgmt_prometheus *p = calloc(1, sizeof *p);
    http_limits lim = mgmt_http_limits(cfg);
    lim.max_body_bytes = 0;
    static const http_callbacks cb = {.admit = admit, .handle = handle};
    if (!p || !(p->http = http_server_new(loop_base(admin_loop(s)), &lim, &cb, p))) {
        free(p);
        errno = ENOMEM;
        return NULL;
    }
    p->m = m;
    p->s = s;
    bool first = !mgmt_plain_wanted(cfg->prometheus_tls.on, cfg->prometheus_port_set,
                                    &cfg->prometheus_more) ||
                 mgmt_http_bind(p->http, cfg->prometheus_ip, cfg->prometheus_port, "prometheus",
                                &p->port);
    if (!first || !mgmt_http_bind_more(p->http, &cfg->prometheus_more, "prometheus") ||
        !mgmt_https_listen(&p->https, s, p->http, &cfg->prometheus_tls, "prometheus")) {
        /* only a default port in use is let pass (mgmt_new); a listener
         * named in the configuration that cannot be bound is fatal */
        int e = first ? ECANCELED : errno;
        mgmt_prometheus_free(p);
        errno = e;
        return NULL;
    }
    return p;
}

int mgmt_prometheus_port(const mgmt_prometheus *p) { return p->port; }
const mgmt_https *mgmt_prometheus_https(const mgmt_prometheus *p)
{
    return p->https.http ? &p->https : NULL;
}

void mgmt_prometheus_free(mgmt_prometheus *p)
{
    if (!p)
        return;
    http_server_free(p->http);
    free(p);
}
