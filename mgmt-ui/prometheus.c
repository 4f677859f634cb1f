/* The Prometheus listener: its own evhttp on the broker's loop, bound to
 * prometheus.tcp.ip:prometheus.tcp.port (rabbitmq_prometheus's 15692),
 * serving GET /metrics (aggregated, or per object with
 * prometheus.return_per_object_metrics = true) and /metrics/per-object;
 * anything else is 404. No authentication, as rabbitmq_prometheus.
 *
 * A scrape is written in slices of about SLICE_BYTES, as stream.c writes
 * lists: when the first slice completes the scrape it is one reply with a
 * Content-Length (an aggregated scrape always is); otherwise the reply
 * goes out chunked and each further slice is rendered only when the
 * previous one has been written to the socket, so the loop serves AMQP
 * between slices. A client that goes away mid-scrape frees it through the
 * connection's close callback.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt_int.h"

#define SLICE_BYTES (64 * 1024)
#define CONTENT_TYPE "text/plain; version=0.0.4"

struct mgmt_prometheus {
    mgmt *m;
    server *s;
    struct evhttp *http;
    int port;
};

typedef struct slices {
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    struct evbuffer *out;
    mgmt_prom *w;
    prom_scrape *sc;
} slices;

static void slices_free(slices *st)
{
    if (st->evcon)
        evhttp_connection_set_closecb(st->evcon, NULL, NULL);
    prom_scrape_free(st->sc);
    mgmt_prom_free(st->w);
    if (st->out)
        evbuffer_free(st->out);
    free(st);
}

static void next_slice(struct evhttp_connection *evcon, void *arg);

static void send_slice(slices *st)
{
    bool done = prom_scrape_step(st->sc, SLICE_BYTES);
    mgmt_prom_flush(st->w);
    if (!done) {
        evhttp_send_reply_chunk_with_cb(st->req, st->out, next_slice, st);
        return;
    }
    evhttp_send_reply_chunk(st->req, st->out);
    /* no close callback once done: ending the reply may free the connection */
    evhttp_connection_set_closecb(st->evcon, NULL, NULL);
    st->evcon = NULL;
    evhttp_send_reply_end(st->req);
    slices_free(st);
}

static void next_slice(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    send_slice(arg);
}

/* The client went away mid-scrape. */
static void slices_closed(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    slices *st = arg;
    st->evcon = NULL;
    mgmt_http_abandon(st->req);
    slices_free(st);
}

static void scrape(mgmt_prometheus *p, struct evhttp_request *req, bool per_object)
{
    slices *st = calloc(1, sizeof *st);
    if (!st || !(st->out = evbuffer_new()) || !(st->w = mgmt_prom_new(st->out)) ||
        !(st->sc = prom_scrape_new(p->m, p->s, per_object, st->w))) {
        if (st)
            slices_free(st);
        evhttp_send_error(req, 500, "Internal Server Error");
        return;
    }
    st->req = req;
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", CONTENT_TYPE);
    if (prom_scrape_step(st->sc, SLICE_BYTES)) { /* it all fits: one plain reply */
        mgmt_prom_flush(st->w);
        evhttp_send_reply(req, 200, "OK", st->out);
        slices_free(st);
        return;
    }
    mgmt_prom_flush(st->w);
    evhttp_send_reply_start(req, 200, "OK");
    st->evcon = evhttp_request_get_connection(req);
    evhttp_connection_set_closecb(st->evcon, slices_closed, st);
    evhttp_send_reply_chunk_with_cb(req, st->out, next_slice, st);
}

static void dispatch(struct evhttp_request *req, void *arg)
{
    mgmt_prometheus *p = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    server_touch_clock(p->s);
    if (path && strcmp(path, "/metrics") == 0)
        scrape(p, req, server_config(p->s)->prometheus_per_object);
    else if (path && strcmp(path, "/metrics/per-object") == 0)
        scrape(p, req, true);
    else
        evhttp_send_error(req, 404, "Not Found");
}

mgmt_prometheus *mgmt_prometheus_new(mgmt *m, server *s)
{
    const config *cfg = server_config(s);
    mgmt_prometheus *p = calloc(1, sizeof *p);
    if (!p || !(p->http = evhttp_new(server_base(s)))) {
        free(p);
        errno = ENOMEM;
        return NULL;
    }
    p->m = m;
    p->s = s;
    evhttp_set_gencb(p->http, dispatch, p);
    evhttp_set_allowed_methods(p->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
    evhttp_set_max_body_size(p->http, 64 * 1024);
    evhttp_set_max_headers_size(p->http, 64 * 1024);
    evhttp_set_timeout(p->http, 120);
    if (!mgmt_http_bind(p->http, cfg->prometheus_ip, cfg->prometheus_port, "prometheus",
                        &p->port)) {
        int e = errno;
        mgmt_prometheus_free(p);
        errno = e;
        return NULL;
    }
    return p;
}

void mgmt_prometheus_free(mgmt_prometheus *p)
{
    if (!p)
        return;
    if (p->http)
        evhttp_free(p->http);
    free(p);
}
