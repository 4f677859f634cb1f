/* One HTTP/1.1 connection to one etcd endpoint (econn): connect, send a
 * POST, parse the reply with resp.c and hand its messages to the owner.
 * Owners (the client's unary queue, each watch) decide what a failure
 * means; econn only reports it, once, and never calls back after that
 * until it is freed. An owner may free the econn from any callback: the
 * read path checks a "freed" flag through a guard it sets on the stack.
 */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_int.h"

struct econn {
    struct bufferevent *bev;
    resp_parser parser;
    const econn_ops *ops;
    void *arg;
    bool connected, busy, dead;
    bool *freed; /* set when freed inside a callback */
    const endpoint *ep;
};

static void fail(econn *e, etcd_status why, const char *text)
{
    if (e->dead)
        return;
    e->dead = true;
    bufferevent_disable(e->bev, EV_READ | EV_WRITE);
    e->ops->failed(e->arg, why, text, e->connected);
}

static bool on_message(void *arg, const char *msg, size_t len)
{
    econn *e = arg;
    bool freed = false;
    e->freed = &freed;
    bool go = e->ops->message(e->arg, e->parser.status, msg, len);
    if (freed)
        return false;
    e->freed = NULL;
    return go && !e->dead;
}

static void on_read(struct bufferevent *bev, void *arg)
{
    econn *e = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    while (!e->dead && evbuffer_get_length(in) > 0) {
        if (!e->busy) {
            fail(e, ETCD_PROTOCOL, "bytes without a request");
            return;
        }
        resp_rc rc = resp_feed(&e->parser, in, on_message, e);
        if (rc == RESP_STOP || rc == RESP_MORE)
            return; /* RESP_STOP: e may be gone */
        if (rc == RESP_ERROR) {
            fail(e, ETCD_PROTOCOL, e->parser.error);
            return;
        }
        int status = e->parser.status;
        bool close = e->parser.close;
        e->busy = false;
        resp_reset(&e->parser);
        if (close)
            e->dead = true; /* reported as failed if used again */
        e->ops->done(e->arg, status); /* may free e */
        return;
    }
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    econn *e = arg;
    if (what & BEV_EVENT_CONNECTED) {
        e->connected = true;
        e->ops->connected(e->arg);
        return;
    }
    fail(e, ETCD_UNAVAILABLE, (what & BEV_EVENT_EOF) ? "connection closed"
                              : !e->connected && bufferevent_get_openssl_error(bev)
                                  ? "TLS handshake failed"
                                  : "connection failed");
}

/* A quiet stream (a watch) to a peer that vanished without a FIN (a
 * partition, a dead host) breaks after about 5 + 3 * 2 s of silence. */
static void keepalive(evutil_socket_t fd)
{
    int on = 1, idle = 5, intvl = 2, cnt = 3;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* A TLS bufferevent whose peer must present a certificate for the
 * endpoint's IP address, verified as the caller's SSL_CTX says (its CA,
 * its client certificate). etcd may close without close_notify: allowed,
 * as every reply is delimited by its length or its last chunk. */
static struct bufferevent *tls_bufferevent(etcd_client *c, const endpoint *ep)
{
    SSL *ssl = SSL_new(c->tls);
    if (!ssl)
        return NULL;
    if (!X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ep->ip)) {
        SSL_free(ssl);
        return NULL;
    }
    struct bufferevent *bev = bufferevent_openssl_socket_new(c->base, -1, ssl,
                                                             BUFFEREVENT_SSL_CONNECTING,
                                                             BEV_OPT_CLOSE_ON_FREE);
    if (bev) /* on failure libevent has freed ssl */
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

econn *econn_new(etcd_client *c, const endpoint *ep, const econn_ops *ops, void *arg)
{
    econn *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    const etcd_limits *lim = etcd_limits_of(c);
    e->ops = ops;
    e->arg = arg;
    e->bev = c->tls ? tls_bufferevent(c, ep) : bufferevent_socket_new(c->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!e->bev || resp_init(&e->parser, lim->max_head_bytes, lim->max_message_bytes) < 0) {
        econn_free(e);
        return NULL;
    }
    bufferevent_setcb(e->bev, on_read, NULL, on_event, e);
    bufferevent_enable(e->bev, EV_READ | EV_WRITE);
    if (bufferevent_socket_connect(e->bev, (const struct sockaddr *)&ep->addr,
                                   (int)ep->addr_len) < 0) {
        econn_free(e);
        return NULL;
    }
    e->ep = ep;
    keepalive(bufferevent_getfd(e->bev));
    return e;
}

int econn_send(econn *e, const char *path, const char *body, size_t len, const char *token)
{
    if (e->busy || e->dead)
        return -1;
    struct evbuffer *out = bufferevent_get_output(e->bev);
    if (evbuffer_add_printf(out,
                            "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                            "%s%s%sContent-Length: %zu\r\n\r\n",
                            path, e->ep->host, token ? "Authorization: " : "", token ? token : "",
                            token ? "\r\n" : "", len) < 0 ||
        evbuffer_add(out, body, len) < 0)
        return -1;
    e->busy = true;
    return 0;
}

void econn_free(econn *e)
{
    if (!e)
        return;
    if (e->freed)
        *e->freed = true;
    if (e->bev)
        bufferevent_free(e->bev);
    resp_fini(&e->parser);
    free(e);
}
