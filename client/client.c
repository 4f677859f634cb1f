/* A client connection's life: resolve (numeric hosts at once, names with
 * libevent's evdns), a non-blocking connect watched for writability, the
 * transport once connected, a 1 s timer for the connect / handshake /
 * close-ok deadlines and heartbeats, and the end.
 *
 * Handlers are only called from libevent callbacks (entry points), never
 * from inside a client_* call: a failure found in a call is reported
 * through the `kick` event. Every entry point counts itself in `depth`, so
 * a client_free from a handler only marks the client, and the outermost
 * entry point frees it on the way out.
 *
 * Heartbeats cost nothing per frame: the timer compares the transport's
 * byte counts with the last tick's to know when we last heard from the
 * server and last wrote.
 */
#include <errno.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client_int.h"

#define DEFAULT_TIMEOUT_MS 30000
#define DEFAULT_FRAME_MAX 131072
#define DEFAULT_HEARTBEAT 60
#define DEFAULT_MAX_MESSAGE (128ull << 20)
#define DEFAULT_MAX_OUTPUT (4u << 20)

uint64_t client_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void destroy(client *c)
{
    c->free_pending = true;
    if (c->dns_req)
        evdns_getaddrinfo_cancel(c->dns_req); /* its callback runs now, sees free_pending */
    if (c->dns)
        evdns_base_free(c->dns, 0);
    if (c->conn_ev)
        event_free(c->conn_ev);
    if (c->fd >= 0)
        close(c->fd);
    if (c->t)
        transport_free(c->t);
    event_free(c->timer);
    event_free(c->kick);
    client_chans_free(c);
    free(c);
}

static void enter(client *c) { c->depth++; }

/* False when c is gone. */
static bool leave(client *c)
{
    if (--c->depth == 0 && c->free_pending) {
        destroy(c);
        return false;
    }
    return true;
}

static void kick_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    client *c = arg;
    enter(c);
    if (c->report_pending && !c->free_pending) {
        c->report_pending = false;
        c->h.closed(c->ctx, c, &c->why);
    } else if (client_live(c) && !c->paused) {
        client_process_input(c); /* input held while paused */
    }
    leave(c);
}

static void keep_reason(client *c, client_error_kind kind, uint16_t code, uint32_t method_id,
                        const char *fmt, va_list ap)
{
    if (c->why_set)
        return;
    c->why_set = true;
    c->why.kind = kind;
    c->why.code = code;
    c->why.method_id = method_id;
    vsnprintf(c->why.text, sizeof c->why.text, fmt, ap);
}

static void die(client *c)
{
    if (c->state == C_DEAD)
        return;
    c->state = C_DEAD;
    if (c->t)
        transport_pause_reading(c->t, true);
    c->report_pending = true;
    event_active(c->kick, 0, 0);
}

void client_fail(client *c, client_error_kind kind, uint16_t code, uint32_t method_id,
                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    keep_reason(c, kind, code, method_id, fmt, ap);
    va_end(ap);
    die(c);
}

static void start_closing(client *c, uint16_t code, const char *text, uint32_t method_id)
{
    amqp_method m = {.id = AMQP_CONNECTION_CLOSE};
    m.connection_close.reply_code = code;
    m.connection_close.reply_text = AMQP_CSTR(text);
    m.connection_close.class_id = (uint16_t)(method_id >> 16);
    m.connection_close.method_id = (uint16_t)method_id;
    client_send_method(c, 0, &m);
    c->state = C_CLOSING;
    c->deadline_ms = client_now_ms() + c->o.connect_timeout_ms;
}

void client_protocol_error(client *c, uint16_t code, uint32_t method_id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    keep_reason(c, CLIENT_ERR_CLIENT_CLOSE, code, method_id, fmt, ap);
    va_end(ap);
    if (c->state >= C_WAIT_START && c->state <= C_OPEN)
        start_closing(c, code, c->why.text, method_id);
    else
        die(c);
}

void client_close(client *c, uint16_t code, const char *text)
{
    if (c->state == C_CLOSING || c->state == C_DEAD)
        return;
    c->why_set = true;
    c->why = (client_error){.kind = CLIENT_OK, .code = code};
    snprintf(c->why.text, sizeof c->why.text, "%s", text);
    if (c->state >= C_WAIT_START)
        start_closing(c, code, text, 0);
    else
        die(c);
}

/* ---- transport ----------------------------------------------------------- */

static void on_read(void *arg)
{
    client *c = arg;
    enter(c);
    if (client_live(c) && !c->paused)
        client_process_input(c);
    leave(c);
}

static void on_drained(void *arg, size_t pending)
{
    client *c = arg;
    enter(c);
    if (c->want_writable && pending <= c->o.max_output / 2 && client_live(c)) {
        c->want_writable = false;
        if (c->h.writable)
            c->h.writable(c->ctx, c);
    }
    leave(c);
}

static void on_closed(void *arg, int error)
{
    client *c = arg;
    if (c->state == C_CLOSING)
        die(c); /* the server closed the socket instead of sending close-ok */
    else
        client_fail(c, CLIENT_ERR_NETWORK, 0, 0, "%s",
                    error ? strerror(error) : "connection closed by the server");
}

static const transport_handlers handlers = {on_read, on_drained, on_closed};

static void begin_protocol(client *c)
{
    transport_start(c->t, &handlers, c);
    if (c->paused)
        transport_pause_reading(c->t, true);
    c->state = C_WAIT_START;
    c->last_in_ms = c->last_out_ms = client_now_ms();
    client_send_header(c);
}

/* ---- connecting ---------------------------------------------------------- */

static void connected_cb(evutil_socket_t fd, short what, void *arg)
{
    client *c = arg;
    int err = 0;
    socklen_t len = sizeof err;
    (void)what;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    event_free(c->conn_ev);
    c->conn_ev = NULL;
    if (err) {
        client_fail(c, CLIENT_ERR_NETWORK, 0, 0, "%s", strerror(err));
        return;
    }
    c->t = transport_new_tcp(c->fl, c->base, c->fd);
    if (!c->t) {
        client_fail(c, CLIENT_ERR_MEMORY, 0, 0, "out of memory");
        return;
    }
    c->fd = -1; /* the transport's now */
    enter(c);
    begin_protocol(c);
    leave(c);
}

static void connect_to(client *c, const struct sockaddr *sa, socklen_t salen)
{
    c->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        client_fail(c, CLIENT_ERR_NETWORK, 0, 0, "%s", strerror(errno));
        return;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, sa, salen) < 0 && errno != EINPROGRESS) {
        client_fail(c, CLIENT_ERR_NETWORK, 0, 0, "%s", strerror(errno));
        return;
    }
    c->state = C_CONNECTING;
    c->conn_ev = event_new(c->base, c->fd, EV_WRITE, connected_cb, c);
    if (!c->conn_ev || event_add(c->conn_ev, NULL) < 0)
        client_fail(c, CLIENT_ERR_MEMORY, 0, 0, "out of memory");
}

static void resolved_cb(int result, struct evutil_addrinfo *res, void *arg)
{
    client *c = arg;
    c->dns_req = NULL;
    if (c->free_pending || result == EVUTIL_EAI_CANCEL) {
        if (res)
            evutil_freeaddrinfo(res);
        return;
    }
    if (result != 0 || !res)
        client_fail(c, CLIENT_ERR_NETWORK, 0, 0, "cannot resolve %s: %s", c->uri.host,
                    evutil_gai_strerror(result));
    else
        connect_to(c, res->ai_addr, (socklen_t)res->ai_addrlen);
    if (res)
        evutil_freeaddrinfo(res);
}

static void resolve(client *c)
{
    char port[8];
    snprintf(port, sizeof port, "%u", c->uri.port);
    struct evutil_addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_protocol = IPPROTO_TCP,
                                    .ai_flags = EVUTIL_AI_NUMERICHOST | EVUTIL_AI_NUMERICSERV};
    struct evutil_addrinfo *res = NULL;
    const char *host = strcmp(c->uri.host, "localhost") == 0 ? "127.0.0.1" : c->uri.host;
    if (evutil_getaddrinfo(host, port, &hints, &res) == 0 && res) {
        connect_to(c, res->ai_addr, (socklen_t)res->ai_addrlen);
        evutil_freeaddrinfo(res);
        return;
    }
    /* a name: the loop must not block in getaddrinfo */
    c->dns = evdns_base_new(c->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                         EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (!c->dns) {
        client_fail(c, CLIENT_ERR_NETWORK, 0, 0, "cannot resolve %s: no resolver", c->uri.host);
        return;
    }
    hints.ai_flags = EVUTIL_AI_NUMERICSERV;
    c->state = C_RESOLVING;
    c->dns_req = evdns_getaddrinfo(c->dns, c->uri.host, port, &hints, resolved_cb, c);
}

/* ---- the timer ----------------------------------------------------------- */

static void heartbeat_check(client *c, uint64_t now)
{
    uint64_t io[4];
    transport_io_counts(c->t, io);
    if (io[0] != c->seen_in)
        c->last_in_ms = now, c->seen_in = io[0];
    if (io[1] != c->seen_out)
        c->last_out_ms = now, c->seen_out = io[1];
    uint64_t hb = (uint64_t)c->heartbeat * 1000;
    if (!hb)
        return;
    if (!c->paused && now - c->last_in_ms > 2 * hb) {
        client_fail(c, CLIENT_ERR_TIMEOUT, 0, 0, "missed heartbeats from server, timeout: %us",
                    c->heartbeat);
        return;
    }
    if (now - c->last_out_ms >= hb / 2) {
        static const uint8_t frame[8] = {AMQP_FRAME_HEARTBEAT, 0, 0, 0, 0, 0, 0, AMQP_FRAME_END};
        transport_write(c->t, frame, sizeof frame);
        c->last_out_ms = now;
    }
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    client *c = arg;
    uint64_t now = client_now_ms();
    enter(c);
    if (c->state == C_DEAD || c->free_pending)
        ;
    else if (c->state == C_CLOSING && now >= c->deadline_ms)
        die(c);
    else if (c->state < C_OPEN && now >= c->deadline_ms)
        client_fail(c, CLIENT_ERR_TIMEOUT, 0, 0, "%s",
                    c->state <= C_CONNECTING ? "connection timeout" : "handshake timeout");
    else if (c->state == C_OPEN)
        heartbeat_check(c, now);
    leave(c);
}

/* ---- creating and freeing ------------------------------------------------ */

static client *client_new(struct event_base *base, transport_flusher *fl, const client_uri *uri,
                          const client_options *o, const client_handlers *h, void *ctx)
{
    client *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->base = base, c->fl = fl, c->h = *h, c->ctx = ctx, c->uri = *uri, c->fd = -1;
    c->o = o ? *o : (client_options){0};
    c->o.connection_name = NULL; /* not kept: the caller's string */
    if (uri->connection_timeout > 0)
        c->o.connect_timeout_ms = (uint32_t)uri->connection_timeout;
    if (!c->o.connect_timeout_ms)
        c->o.connect_timeout_ms = DEFAULT_TIMEOUT_MS;
    if (uri->frame_max >= 0)
        c->o.frame_max = (uint32_t)uri->frame_max;
    if (!c->o.frame_max)
        c->o.frame_max = DEFAULT_FRAME_MAX;
    if (uri->heartbeat >= 0)
        c->o.heartbeat = (uint16_t)(uri->heartbeat > 65535 ? 65535 : uri->heartbeat);
    else if (!o || !o->heartbeat)
        c->o.heartbeat = DEFAULT_HEARTBEAT;
    if (uri->channel_max > 0 && uri->channel_max < CLIENT_MAX_CHANNELS)
        c->o.channel_max = (uint16_t)uri->channel_max;
    if (!c->o.channel_max || c->o.channel_max > CLIENT_MAX_CHANNELS)
        c->o.channel_max = CLIENT_MAX_CHANNELS;
    if (!c->o.max_message_size)
        c->o.max_message_size = DEFAULT_MAX_MESSAGE;
    if (!c->o.max_output)
        c->o.max_output = DEFAULT_MAX_OUTPUT;
    if (o && o->connection_name)
        snprintf(c->name, sizeof c->name, "%s", o->connection_name);
    c->timer = event_new(base, -1, EV_PERSIST, timer_cb, c);
    c->kick = event_new(base, -1, 0, kick_cb, c);
    struct timeval second = {1, 0};
    if (!c->timer || !c->kick || event_add(c->timer, &second) < 0) {
        if (c->timer)
            event_free(c->timer);
        if (c->kick)
            event_free(c->kick);
        free(c);
        return NULL;
    }
    c->deadline_ms = client_now_ms() + c->o.connect_timeout_ms;
    return c;
}

client *client_connect(struct event_base *base, transport_flusher *fl, const client_uri *uri,
                       const client_options *o, const client_handlers *h, void *ctx)
{
    client *c = client_new(base, fl, uri, o, h, ctx);
    if (!c)
        return NULL;
    if (uri->tls)
        client_fail(c, CLIENT_ERR_UNSUPPORTED, 0, 0, "amqps is not supported");
    else if (uri->local)
        client_fail(c, CLIENT_ERR_UNSUPPORTED, 0, 0, "a URI without host needs a local transport");
    else
        resolve(c);
    return c;
}

client *client_attach(struct event_base *base, transport *t, const client_uri *uri,
                      const client_options *o, const client_handlers *h, void *ctx)
{
    client *c = client_new(base, NULL, uri, o, h, ctx);
    if (!c) {
        transport_free(t);
        return NULL;
    }
    c->t = t;
    begin_protocol(c);
    return c;
}

void client_free(client *c)
{
    if (!c)
        return;
    if (c->depth > 0) {
        c->free_pending = true;
        return;
    }
    destroy(c);
}

/* ---- state ---------------------------------------------------------------- */

bool client_is_open(const client *c) { return c->state == C_OPEN && !c->free_pending; }
uint32_t client_frame_max(const client *c) { return c->state >= C_WAIT_OPEN_OK ? c->frame_max : 0; }
uint16_t client_heartbeat(const client *c) { return c->heartbeat; }
const char *client_server_product(const client *c) { return c->state > C_WAIT_START ? c->product : ""; }
const char *client_server_version(const client *c) { return c->state > C_WAIT_START ? c->version : ""; }

void client_pause_reading(client *c, bool paused)
{
    if (c->paused == paused)
        return;
    c->paused = paused;
    if (c->t && c->state != C_DEAD)
        transport_pause_reading(c->t, paused);
    if (!paused) {
        /* the silence while paused was ours, not the server's */
        c->last_in_ms = client_now_ms();
        event_active(c->kick, 0, 0); /* frames already read wait in the input */
    }
}

size_t client_output_pending(const client *c) { return c->t ? transport_pending(c->t) : 0; }
bool client_writable(const client *c) { return client_output_pending(c) < c->o.max_output; }
