/* Connections: accepting within a limit, reading heads and bodies within
 * deadlines and a shared body budget, and closing.
 *
 * A connection's states:
 *
 *   HEAD --admit: refused, replied--------------------------> CLOSING
 *     |  admit: no body ---------------------------------> HANDLING
 *     |  admit: body, no room in the budget --> BUDGET --room--> BODY
 *     '  admit: body -------------------------------------------> BODY
 *   BODY --complete--> HANDLING --reply ends, keep-alive--> HEAD
 *                          '------reply ends, close-------> CLOSING
 *   CLOSING --output written, write side shut--> LINGER --EOF or 2 s--> freed
 *
 * A refused request's body is never read: the reply says "Connection:
 * close", and once it is written the socket's write side is shut and what
 * the client still sends is read and dropped for a moment (lingering
 * close), so the client sees the reply rather than a reset.
 *
 * One timer per connection holds the deadline of its state: the head
 * (head_timeout_ms from the accept or from a request's first byte), the
 * body (body_timeout_ms from its admission, waiting for budget included),
 * the idle time between requests, the linger. A reply's progress is the
 * bufferevent's write timeout (idle_timeout_ms without a byte written).
 *
 * Connections are freed only from this file's event callbacks, never
 * inside a call from the user (admit, handle, a reply function), so a
 * request or connection on the caller's stack stays valid.
 */
#include <assert.h>
#include <errno.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <netdb.h>
#include <openssl/ssl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http_int.h"

#define LINGER_MS 2000
#define CHUNK_LINE_MAX 1024

http_limits http_default_limits(void)
{
    return (http_limits){
        .max_connections = 512,
        .max_head_bytes = 64 * 1024,
        .max_body_bytes = 8000000,
        .body_budget_bytes = 32 * 1024 * 1024,
        .head_timeout_ms = 10000,
        .body_timeout_ms = 60000,
        .idle_timeout_ms = 60000,
    };
}

static void conn_close(http_conn *c);
static void drop_request(http_conn *c);

/* ---- deadlines ------------------------------------------------------------ */

static void arm(http_conn *c, unsigned ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(c->timer, &tv);
}

/* A reply the server writes itself (malformed heads, timeouts, a body over
 * the limit); the connection closes after it. */
static void reply_and_close(http_conn *c, int status, const char *reason, const char *text)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                        "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                        status, reason, strlen(text), text);
    c->state = CONN_CLOSING;
    evtimer_del(c->timer);
    bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
}

/* Refuses an admitted request's body: its owner (the admit callback took
 * it) hears of it through the abort callback, as when the client goes. */
static void refuse_body(http_conn *c, int status, const char *reason, const char *text)
{
    http_req *r = c->req;
    if (r->abort)
        r->abort(r, r->abort_arg);
    drop_request(c);
    reply_and_close(c, status, reason, text);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    http_conn *c = arg;
    http_server *s = c->srv;
    switch (c->state) {
    case CONN_HEAD:
        if (c->tls_handshaking) { /* no reply can go before the handshake */
            s->st.head_timeouts++;
            conn_close(c);
            return;
        }
        if (!c->head_started && evbuffer_get_length(bufferevent_get_input(c->bev)) == 0 &&
            c->keep_alive) {
            s->st.idle_timeouts++;
            conn_close(c);
            return;
        }
        s->st.head_timeouts++;
        reply_and_close(c, 408, "Request Timeout", "request head not received in time\n");
        return;
    case CONN_BUDGET:
    case CONN_BODY:
        s->st.body_timeouts++;
        refuse_body(c, 408, "Request Timeout", "request body not received in time\n");
        return;
    case CONN_LINGER:
        conn_close(c);
        return;
    case CONN_HANDLING:
    case CONN_CLOSING:
        return;
    }
}

/* ---- the body budget ------------------------------------------------------ */

static size_t body_need(const http_server *s, const http_req *r)
{
    return r->h.content_length < 0 ? s->lim.max_body_bytes : (size_t)r->h.content_length;
}

static void start_body(http_conn *c)
{
    http_req *r = c->req;
    r->reserved = body_need(c->srv, r);
    c->srv->st.body_bytes += r->reserved;
    c->state = CONN_BODY;
    r->chunk_left = -1;
    if (r->h.expect_continue)
        evbuffer_add_printf(bufferevent_get_output(c->bev), "HTTP/1.1 100 Continue\r\n\r\n");
    bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
    bufferevent_enable(c->bev, EV_READ);
    bufferevent_trigger(c->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

/* Lets waiting bodies in, first come first served, while there is room.
 * The first in line always fits an empty budget. */
static void wake_waiting(http_server *s)
{
    http_conn *c;
    while ((c = TAILQ_FIRST(&s->budget_wait))) {
        size_t need = body_need(s, c->req);
        if (s->st.body_bytes && s->st.body_bytes + need > s->lim.body_budget_bytes)
            return;
        TAILQ_REMOVE(&s->budget_wait, c, waiting);
        s->st.waiting_for_budget--;
        start_body(c);
    }
}

void http_req_free(http_req *r)
{
    if (!r)
        return;
    http_server *s = r->c->srv;
    if (r->reserved) {
        s->st.body_bytes -= r->reserved;
        r->reserved = 0;
        wake_waiting(s);
    }
    if (r->body)
        evbuffer_free(r->body);
    if (r->reply_headers)
        evbuffer_free(r->reply_headers);
    free(r->head_buf);
    free(r);
}

/* ---- reading -------------------------------------------------------------- */

/* Where the head's blank line ends in `in` (its length), 0 when it has not
 * arrived. Blank lines before a request line are part of no head. */
static size_t find_head_end(http_conn *c, struct evbuffer *in, size_t len)
{
    size_t n = len < c->srv->lim.max_head_bytes + 4 ? len : c->srv->lim.max_head_bytes + 4;
    const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
    size_t start = 0;
    while (start < n && (p[start] == '\r' || p[start] == '\n'))
        start++;
    for (size_t i = c->scanned > start + 3 ? c->scanned - 3 : start; i < n; i++) {
        if (p[i] != '\n')
            continue;
        if (i + 1 < n && p[i + 1] == '\n')
            return i + 2;
        if (i + 2 < n && p[i + 1] == '\r' && p[i + 2] == '\n')
            return i + 3;
    }
    c->scanned = n;
    return 0;
}

static const char *status_reason(int status)
{
    switch (status) {
    case 400: return "Bad Request";
    case 413: return "Payload Too Large";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

static void admit(http_conn *c)
{
    http_server *s = c->srv;
    http_req *r = c->req;
    s->st.requests++;
    c->state = CONN_HANDLING;
    c->keep_alive = r->h.keep_alive;
    if (!s->cb.admit(r, s->arg)) {
        assert(c->req != r); /* it replied, which freed r */
        return;
    }
    assert(c->req == r && c->state == CONN_HANDLING);
    if (!http_req_has_body(r)) {
        s->cb.handle(r, s->arg);
        return;
    }
    if (r->h.content_length > (int64_t)s->lim.max_body_bytes) {
        refuse_body(c, 413, "Payload Too Large", "request body too large\n");
        return;
    }
    if (!(r->body = evbuffer_new())) {
        conn_close(c);
        return;
    }
    arm(c, s->lim.body_timeout_ms);
    size_t need = body_need(s, r);
    if (s->st.body_bytes && s->st.body_bytes + need > s->lim.body_budget_bytes) {
        c->state = CONN_BUDGET;
        bufferevent_disable(c->bev, EV_READ);
        TAILQ_INSERT_TAIL(&s->budget_wait, c, waiting);
        s->st.waiting_for_budget++;
        return;
    }
    start_body(c);
}

static void read_head(http_conn *c)
{
    http_server *s = c->srv;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t len = evbuffer_get_length(in);
    if (!len)
        return;
    if (!c->head_started) {
        c->head_started = true;
        arm(c, s->lim.head_timeout_ms);
    }
    size_t head_len = find_head_end(c, in, len);
    if (!head_len) {
        if (len > s->lim.max_head_bytes) {
            s->st.bad_requests++;
            reply_and_close(c, 431, status_reason(431), "request head too large\n");
        }
        return;
    }
    http_req *r = calloc(1, sizeof *r);
    char *buf = r ? malloc(2 * head_len + 2) : NULL;
    if (!buf) {
        free(r);
        conn_close(c);
        return;
    }
    evbuffer_remove(in, buf, head_len);
    *r = (http_req){.c = c, .head_buf = buf};
    c->req = r;
    c->scanned = 0;
    const char *why = "";
    int status = http_parse_head(buf, head_len, &r->h, &why);
    if (status) {
        s->st.bad_requests++;
        http_req_free(r);
        c->req = NULL;
        char text[128];
        snprintf(text, sizeof text, "%s\n", why);
        reply_and_close(c, status, status_reason(status), text);
        return;
    }
    evtimer_del(c->timer);
    admit(c);
}

/* The next chunk-size line, or false when it has not arrived (or is bad:
 * then *bad). */
static bool chunk_size_line(struct evbuffer *in, int64_t *size, bool *bad)
{
    size_t eol_len;
    struct evbuffer_ptr eol = evbuffer_search_eol(in, NULL, &eol_len, EVBUFFER_EOL_CRLF);
    if (eol.pos < 0) {
        *bad = evbuffer_get_length(in) > CHUNK_LINE_MAX;
        return false;
    }
    char line[CHUNK_LINE_MAX + 1];
    if ((size_t)eol.pos > CHUNK_LINE_MAX) {
        *bad = true;
        return false;
    }
    evbuffer_remove(in, line, (size_t)eol.pos);
    evbuffer_drain(in, eol_len);
    line[eol.pos] = 0;
    line[strcspn(line, "; \t")] = 0; /* extensions are ignored */
    size_t digits = strspn(line, "0123456789abcdefABCDEF");
    if (!digits || line[digits] || digits > 15) {
        *bad = true;
        return false;
    }
    *size = strtoll(line, NULL, 16);
    return true;
}

/* Moves chunked body bytes into the body; true when the body is complete.
 * chunk_left: -1 before a size line, -2 before the CRLF ending a chunk. */
static bool read_chunked(http_conn *c, bool *bad)
{
    http_req *r = c->req;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    for (;;) {
        if (r->chunk_trailer) { /* trailer lines up to a blank one */
            size_t eol_len;
            struct evbuffer_ptr eol = evbuffer_search_eol(in, NULL, &eol_len, EVBUFFER_EOL_CRLF);
            if (eol.pos < 0) {
                *bad = evbuffer_get_length(in) > CHUNK_LINE_MAX;
                return false;
            }
            evbuffer_drain(in, (size_t)eol.pos + eol_len);
            if (eol.pos == 0)
                return true;
            continue;
        }
        if (r->chunk_left == -2) {
            if (evbuffer_get_length(in) < 2)
                return false;
            char crlf[2];
            evbuffer_remove(in, crlf, 2);
            if (crlf[0] != '\r' || crlf[1] != '\n') {
                *bad = true;
                return false;
            }
            r->chunk_left = -1;
        }
        if (r->chunk_left == -1) {
            int64_t size;
            if (!chunk_size_line(in, &size, bad))
                return false;
            if (size == 0) {
                r->chunk_trailer = true;
                continue;
            }
            if ((uint64_t)size > c->srv->lim.max_body_bytes - evbuffer_get_length(r->body)) {
                *bad = true;
                return false;
            }
            r->chunk_left = size;
        }
        size_t avail = evbuffer_get_length(in);
        if (!avail)
            return false;
        size_t n = avail < (size_t)r->chunk_left ? avail : (size_t)r->chunk_left;
        evbuffer_remove_buffer(in, r->body, n);
        r->chunk_left -= (int64_t)n;
        if (r->chunk_left == 0)
            r->chunk_left = -2;
    }
}

static void read_body(http_conn *c)
{
    http_req *r = c->req;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    bool done, bad = false;
    if (r->h.content_length >= 0) {
        size_t want = (size_t)r->h.content_length - evbuffer_get_length(r->body);
        size_t avail = evbuffer_get_length(in);
        evbuffer_remove_buffer(in, r->body, avail < want ? avail : want);
        done = evbuffer_get_length(r->body) == (size_t)r->h.content_length;
    } else {
        done = read_chunked(c, &bad);
    }
    if (bad) {
        c->srv->st.bad_requests++;
        refuse_body(c, 400, "Bad Request", "malformed or oversized chunked body\n");
        return;
    }
    if (!done)
        return;
    evtimer_del(c->timer);
    r->body_complete = true;
    c->state = CONN_HANDLING;
    /* pipelined bytes wait, bounded like a head */
    bufferevent_setwatermark(c->bev, EV_READ, 0, c->srv->lim.max_head_bytes + 1);
    c->srv->cb.handle(r, c->srv->arg);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
    http_conn *c = arg;
    switch (c->state) {
    case CONN_HEAD:
        read_head(c);
        break;
    case CONN_BODY:
        read_body(c);
        break;
    case CONN_LINGER:
        evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
        break;
    case CONN_BUDGET:
    case CONN_HANDLING:
    case CONN_CLOSING:
        break; /* later requests wait (bounded by the read watermark) */
    }
}

/* ---- replies done, writing, closing -------------------------------------- */

void http_conn_reply_done(http_req *r)
{
    http_conn *c = r->c;
    bool whole = c->state == CONN_HANDLING && (!http_req_has_body(r) || r->body_complete);
    http_req_free(r);
    c->req = NULL;
    if (!whole || !c->keep_alive) {
        c->state = CONN_CLOSING;
        evtimer_del(c->timer);
        bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
        if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) /* nothing left to write */
            bufferevent_trigger(c->bev, EV_WRITE, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
        return;
    }
    c->state = CONN_HEAD;
    c->head_started = false;
    bufferevent_setwatermark(c->bev, EV_READ, 0, c->srv->lim.max_head_bytes + 1);
    arm(c, c->srv->lim.idle_timeout_ms);
    /* the next request is read once this reply is out: a client that
     * pipelines without reading gets no more than one reply queued */
    bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        bufferevent_trigger(c->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
    else
        bufferevent_disable(c->bev, EV_READ);
}

static void write_cb(struct bufferevent *bev, void *arg)
{
    http_conn *c = arg;
    if (evbuffer_get_length(bufferevent_get_output(bev)) != 0)
        return;
    switch (c->state) {
    case CONN_HANDLING:
        if (c->req && c->req->drained) {
            void (*fn)(http_req *, void *) = c->req->drained;
            c->req->drained = NULL;
            fn(c->req, c->req->drained_arg);
        }
        break;
    case CONN_HEAD: /* the previous reply is out: read the next request */
        bufferevent_enable(bev, EV_READ);
        read_head(c);
        break;
    case CONN_CLOSING:
        if (c->peer_eof) {
            conn_close(c);
            break;
        }
        shutdown(c->fd, SHUT_WR);
        c->state = CONN_LINGER;
        bufferevent_setwatermark(bev, EV_READ, 0, 0);
        bufferevent_enable(bev, EV_READ);
        arm(c, LINGER_MS);
        break;
    default:
        break;
    }
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    http_conn *c = arg;
    if (what == BEV_EVENT_CONNECTED) { /* a TLS handshake done */
        c->tls_handshaking = false;
        return;
    }
    if (what & BEV_EVENT_TIMEOUT)
        c->srv->st.idle_timeouts++;
    /* End of input while a reply is being made: the client may only have
     * shut its write side, so the reply goes on and the connection closes
     * after it. Anything else ends the connection now. */
    if ((what & BEV_EVENT_EOF) && (c->state == CONN_HANDLING || c->state == CONN_CLOSING)) {
        c->keep_alive = false;
        c->peer_eof = true;
        bufferevent_disable(c->bev, EV_READ);
        return;
    }
    conn_close(c);
}

/* Frees the connection's request, if any, out of the budget queue. */
static void drop_request(http_conn *c)
{
    if (c->state == CONN_BUDGET) {
        TAILQ_REMOVE(&c->srv->budget_wait, c, waiting);
        c->srv->st.waiting_for_budget--;
        c->state = CONN_CLOSING;
    }
    http_req_free(c->req);
    c->req = NULL;
}

static void conn_close(http_conn *c)
{
    http_server *s = c->srv;
    http_req *r = c->req;
    if (r && r->abort)
        r->abort(r, r->abort_arg);
    drop_request(c);
    TAILQ_REMOVE(&s->conns, c, link);
    s->st.open--;
    event_free(c->timer);
    bufferevent_free(c->bev);
    free(c);
    if (s->listeners_paused) {
        for (size_t i = 0; i < s->nlisteners; i++)
            evconnlistener_enable(s->listeners[i]);
        s->listeners_paused = false;
    }
}

/* ---- accepting ------------------------------------------------------------ */

/* Makes room for one more connection: the oldest one waiting for a request
 * head (with no reply still going out) or lingering goes. False when every
 * connection is busy. */
static bool evict_one(http_server *s)
{
    http_conn *c;
    TAILQ_FOREACH(c, &s->conns, link)
        if ((c->state == CONN_HEAD && !evbuffer_get_length(bufferevent_get_output(c->bev))) ||
            c->state == CONN_LINGER) {
            s->st.evicted++;
            conn_close(c);
            return true;
        }
    return false;
}

/* The connection's bufferevent: over TLS when its listener has a context. */
static struct bufferevent *new_bev(http_server *s, struct evconnlistener *l, int fd)
{
    SSL_CTX *ctx = NULL;
    for (size_t i = 0; i < s->nlisteners; i++)
        if (s->listeners[i] == l)
            ctx = s->tls[i];
    if (!ctx)
        return bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
    SSL *ssl = SSL_new(ctx);
    /* libevent reads only when the socket is readable: records OpenSSL
     * read ahead with the handshake's would wait there unseen */
    if (ssl)
        SSL_set_read_ahead(ssl, 0);
    struct bufferevent *bev = ssl ? bufferevent_openssl_socket_new(
        s->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE) : NULL;
    if (!bev)
        SSL_free(ssl);
    else /* a client that closes without close_notify has ended, not failed */
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    http_server *s = arg;
    if (s->st.open >= s->lim.max_connections && !evict_one(s)) {
        close(fd); /* and let the rest wait in the backlog */
        s->st.refused++;
        for (size_t i = 0; i < s->nlisteners; i++)
            evconnlistener_disable(s->listeners[i]);
        s->listeners_paused = true;
        return;
    }
    http_conn *c = calloc(1, sizeof *c);
    struct bufferevent *bev = c ? new_bev(s, l, fd) : NULL;
    struct event *timer = bev ? evtimer_new(s->base, timer_cb, c) : NULL;
    if (!timer) {
        if (bev)
            bufferevent_free(bev);
        else
            close(fd);
        free(c);
        return;
    }
    *c = (http_conn){.srv = s, .bev = bev, .fd = fd, .timer = timer, .state = CONN_HEAD,
                     .head_started = true, .tls_handshaking = bufferevent_openssl_get_ssl(bev) != NULL};
    if (salen > 0 && (size_t)salen <= sizeof c->peer)
        memcpy(&c->peer, sa, (size_t)salen);
    if (sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6))
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
    TAILQ_INSERT_TAIL(&s->conns, c, link);
    s->st.open++;
    s->st.accepted++;
    struct timeval idle = {s->lim.idle_timeout_ms / 1000, (s->lim.idle_timeout_ms % 1000) * 1000};
    bufferevent_set_timeouts(bev, NULL, &idle);
    bufferevent_setcb(bev, read_cb, write_cb, event_cb, c);
    bufferevent_setwatermark(bev, EV_READ, 0, s->lim.max_head_bytes + 1);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
    arm(c, s->lim.head_timeout_ms);
}

/* ---- the server ----------------------------------------------------------- */

http_server *http_server_new(struct event_base *base, const http_limits *lim,
                             const http_callbacks *cb, void *arg)
{
    http_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    *s = (http_server){.base = base, .lim = *lim, .cb = *cb, .arg = arg};
    TAILQ_INIT(&s->conns);
    TAILQ_INIT(&s->budget_wait);
    return s;
}

void http_server_free(http_server *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nlisteners; i++) {
        evconnlistener_free(s->listeners[i]);
        SSL_CTX_free(s->tls[i]);
    }
    free(s->listeners);
    free(s->tls);
    s->nlisteners = 0;
    s->listeners_paused = false;
    while (!TAILQ_EMPTY(&s->conns))
        conn_close(TAILQ_FIRST(&s->conns));
    free(s);
}

bool http_server_listen_fd(http_server *s, int fd)
{
    struct evconnlistener **more = realloc(s->listeners, (s->nlisteners + 1) * sizeof *more);
    if (more)
        s->listeners = more;
    void **tls = more ? realloc(s->tls, (s->nlisteners + 1) * sizeof *tls) : NULL;
    if (!tls) {
        close(fd);
        errno = ENOMEM;
        return false;
    }
    s->tls = tls;
    s->tls[s->nlisteners] = NULL;
    evutil_make_socket_nonblocking(fd);
    struct evconnlistener *l = evconnlistener_new(
        s->base, accept_cb, s, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 128, fd);
    if (!l) {
        int e = errno;
        close(fd);
        errno = e ? e : ENOMEM;
        return false;
    }
    s->listeners[s->nlisteners++] = l;
    return true;
}

bool http_server_listen(http_server *s, const char *ip, int port, int *bound)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_PASSIVE,
                             .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char service[8];
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(ip, service, &hints, &ai) != 0 || !ai) {
        errno = EINVAL;
        return false;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = fd < 0 ? -1 : setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int){1}, sizeof(int));
    if (rc == 0 && ai->ai_family == AF_INET6)
        rc = setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &(int){1}, sizeof(int));
    if (rc == 0)
        rc = bind(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (rc == 0)
        rc = getsockname(fd, (struct sockaddr *)&ss, &len);
    if (rc != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return false;
    }
    *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port);
    return http_server_listen_fd(s, fd);
}

http_server_stats http_server_stats_of(const http_server *s) { return s->st; }

bool http_server_listen_tls(http_server *s, const char *ip, int port, int *bound, void *ssl_ctx)
{
    if (!http_server_listen(s, ip, port, bound))
        return false;
    SSL_CTX_up_ref(ssl_ctx);
    s->tls[s->nlisteners - 1] = ssl_ctx;
    return true;
}

void http_server_set_tls(http_server *s, void *ssl_ctx)
{
    for (size_t i = 0; i < s->nlisteners; i++)
        if (s->tls[i]) {
            SSL_CTX_up_ref(ssl_ctx);
            SSL_CTX_free(s->tls[i]);
            s->tls[i] = ssl_ctx;
        }
}
