/* Stream-protocol connections: the hub, the frame loop, output, closing,
 * heartbeats and timeouts (the handshake is in handshake.c).
 *
 * State diagram (rabbit_stream_reader's steps):
 *   CONNECTED --PeerProperties--> PEER_PROPS --SaslAuthenticate ok--> TUNING
 *   (Tune sent) --client's Tune--> TUNED --Open ok--> OPEN
 *   before OPEN --a refused login or Open (answered), anything out of
 *         order, a bad frame--> CLOSED (RabbitMQ 3.10.8 answers a refused
 *         login at once and closes; PeerProperties is optional)
 *   OPEN --bad frame--> CLOSE_SENT (Close sent; its response, or the
 *         timeout, ends it)
 *   any --client's Close--> CLOSED (after the response is written)
 *   OPEN --vhost or user deleted, management API, shutdown--> CLOSED (the
 *         socket closes without a Close frame, as RabbitMQ 3.10.8's)
 *   OPEN, publishing during an alarm or a journal backlog: not read until
 *         it clears (publish_blocked)
 *
 * Input is cut where it lies in the input buffer: a frame is handled in
 * place when it is contiguous there, and only one that spans two blocks
 * is made contiguous (bounded by frame_max). Output is queued on the
 * transport and written once per loop turn. A connection is never freed
 * inside its own callbacks: teardown marks it CLOSED and the free runs
 * from a zero-delay event.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "sconn_int.h"

static void update_reading(sconn *c);

/* ---- output ------------------------------------------------------------- */

sp_buf sc_out(sconn *c, size_t want)
{
    uint8_t *p = c->state == SC_CLOSED && c->free_scheduled ? NULL : transport_reserve(c->t, want);
    return (sp_buf){.p = p, .cap = p ? want : 0};
}

void sc_commit(sconn *c, sp_buf *b)
{
    if (!b->p)
        return;
    transport_commit(c->t, b->len);
    c->last_send_ms = loop_now_ms(c->loop);
}

void sc_response(sconn *c, uint16_t key, uint32_t correlation_id, uint16_t code)
{
    sp_buf b = sc_out(c, 16);
    sp_encode_response(&b, key, correlation_id, code);
    sc_commit(c, &b);
}

/* ---- closing ------------------------------------------------------------ */

static void free_sconn(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    sconn *c = arg;
    sconn_hub *h = c->hub;
    loop_counters(c->loop)->connections_closed++; /* every client socket, as conn/ counts them */
    sc_forget_streams(c);
    if (c->vh)
        vhost_connection_left(c->vh);
    if (c->prev)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    h->count--;
    transport_free(c->t);
    if (c->resume)
        event_free(c->resume);
    free(c->pending);
    free(c->client_props);
    free(c->user);
    free(c->names);
    free(c);
}

static void schedule_free(sconn *c)
{
    if (c->free_scheduled)
        return;
    c->free_scheduled = true;
    event_base_once(loop_base(c->loop), -1, EV_TIMEOUT, free_sconn, c, NULL);
}

void sc_teardown(sconn *c)
{
    if (c->state == SC_CLOSED)
        return;
    c->state = SC_CLOSED;
    c->deadline_ms = loop_now_ms(c->loop) + SC_CLOSE_TIMEOUT_MS;
    transport_pause_reading(c->t, true);
    if (transport_pending(c->t) == 0)
        schedule_free(c);
    /* else on_drained frees it once written; the tick bounds the wait */
}

void sc_close(sconn *c, uint16_t code, const char *reason)
{
    if (c->state >= SC_CLOSE_SENT)
        return;
    sp_buf b = sc_out(c, 32 + strlen(reason));
    sp_encode_close(&b, 1, code, (sp_slice){(const uint8_t *)reason, (uint32_t)strlen(reason)});
    sc_commit(c, &b);
    c->state = SC_CLOSE_SENT;
    c->deadline_ms = loop_now_ms(c->loop) + SC_CLOSE_TIMEOUT_MS;
}

/* ---- frames ------------------------------------------------------------- */

/* A frame that does not decode: before Open the socket just closes, after
 * it Close(unknown frame), as RabbitMQ 3.10.8 does (streamproto.h). */
static void bad_command(sconn *c, sp_status st, const sp_command *cmd)
{
    log_msg(LOG_WARNING, "stream connection %s: %s command key 0x%04x version %u, closing",
            c->peer, st == SP_UNKNOWN ? "unknown" : "malformed", cmd->key, cmd->version);
    if (c->state != SC_OPEN)
        sc_teardown(c);
    else
        sc_close(c, SP_UNKNOWN_FRAME, "unknown frame");
}

static void handle_open_command(sconn *c, const sp_command *cmd)
{
    switch (cmd->key) {
    case SP_HEARTBEAT:
        return;
    case SP_CLOSE:
        if (!cmd->response) {
            sc_response(c, SP_CLOSE, cmd->correlation_id, SP_OK);
            log_msg(LOG_INFO, "stream connection %s closed by the client", c->peer);
            sc_teardown(c);
        }
        return;
    default:
        if (!sc_command(c, cmd))
            bad_command(c, SP_UNKNOWN, cmd);
    }
}

static void handle_frame(sconn *c, const sp_frame *f)
{
    sp_command cmd;
    sp_status st = sp_command_decode(f, &cmd);
    if (c->state == SC_CLOSE_SENT) {
        /* only the close handshake matters now */
        if (st == SP_DONE && cmd.key == SP_CLOSE) {
            if (!cmd.response)
                sc_response(c, SP_CLOSE, cmd.correlation_id, SP_OK);
            sc_teardown(c);
        }
        return;
    }
    if (st != SP_DONE) {
        bad_command(c, st, &cmd);
        return;
    }
    if (c->state == SC_OPEN)
        handle_open_command(c, &cmd);
    else if (!sc_handshake_command(c, &cmd))
        bad_command(c, SP_UNKNOWN, &cmd);
}

/* The size was over frame_max, or under the header's: before Open the
 * socket closes silently; after, Close(frame too large) -- and there is
 * no frame boundary any more, so what follows is thrown away. */
static void bad_frame(sconn *c, sp_status st, uint32_t size)
{
    log_msg(LOG_WARNING, "stream connection %s: frame of %u bytes %s, closing", c->peer, size,
            st == SP_TOO_LARGE ? "over frame_max" : "malformed");
    c->discard_input = true;
    if (c->state == SC_OPEN)
        sc_close(c, st == SP_TOO_LARGE ? SP_FRAME_TOO_LARGE : SP_UNKNOWN_FRAME,
                 st == SP_TOO_LARGE ? "frame too large" : "unknown frame");
    else if (c->state < SC_OPEN)
        sc_teardown(c);
}

static bool reading(const sconn *c)
{
    return c->state != SC_CLOSED && !c->discard_input && !c->publish_blocked;
}

static void read_frames(sconn *c)
{
    struct evbuffer *in = transport_input(c->t);
    while (reading(c)) {
        size_t total = evbuffer_get_length(in);
        size_t n = (size_t)evbuffer_get_contiguous_space(in);
        if (total == 0)
            break;
        const uint8_t *p = evbuffer_pullup(in, (ev_ssize_t)n); /* contiguous already: no copy */
        sp_frame f;
        size_t used;
        sp_status st = sp_frame_next(p, n, c->frame_max, &f, &used);
        if (st == SP_NEED_MORE && n < total) {
            /* the size bytes, or the frame, span two blocks: join them
             * (frame_max bounds the copy) once they are all there */
            size_t want = n < SP_SIZE_LEN ? SP_SIZE_LEN : SP_SIZE_LEN + (size_t)f.size;
            if (want > total)
                break;
            evbuffer_pullup(in, (ev_ssize_t)want);
            continue;
        }
        if (st == SP_NEED_MORE)
            break;
        if (st != SP_DONE) {
            bad_frame(c, st, f.size);
            break;
        }
        handle_frame(c, &f);
        evbuffer_drain(in, used);
        if (f.key == SP_PUBLISH && (c->alarm || server_journal_lagging(c->srv))) {
            c->publish_blocked = true; /* until the alarm clears / the journal syncs */
            update_reading(c);
            break;
        }
    }
    if (c->discard_input)
        evbuffer_drain(in, evbuffer_get_length(in));
}

static void update_reading(sconn *c)
{
    transport_pause_reading(c->t, c->reading_paused || !reading(c));
}

static void on_read(void *arg)
{
    sconn *c = arg;
    loop_touch_clock(c->loop);
    c->last_recv_ms = loop_now_ms(c->loop);
    read_frames(c);
    if (c->state == SC_OPEN)
        sc_flush_confirms(c); /* duplicates, and what needs no sync */
    if (c->state != SC_CLOSED &&
        transport_pending(c->t) > 4 * server_config(c->srv)->conn_output_limit) {
        c->reading_paused = true; /* a client that sends but does not read */
        update_reading(c);
    }
}

static void on_drained(void *arg, size_t pending)
{
    sconn *c = arg;
    if (c->state == SC_CLOSED) {
        if (pending == 0)
            schedule_free(c);
        return;
    }
    size_t limit = server_config(c->srv)->conn_output_limit;
    if (c->reading_paused && pending <= limit) {
        c->reading_paused = false;
        update_reading(c);
    }
    if (c->output_full && pending <= limit / 2) {
        c->output_full = false;
        sc_subs_deliver(c, NULL);
    }
}

static void on_closed(void *arg, int error)
{
    sconn *c = arg;
    if (error == ENOMEM)
        log_msg(LOG_ERROR, "stream connection %s: out of memory for its input; closing it",
                c->peer);
    if (c->state == SC_OPEN)
        log_msg(LOG_WARNING, "stream connection %s: client closed the socket without Close",
                c->peer);
    sc_teardown(c);
    schedule_free(c);
}

static const transport_handlers handlers = {on_read, on_drained, on_closed};

/* ---- lifecycle ---------------------------------------------------------- */

/* RabbitMQ's connection name, "peer -> local", and its parts. */
static bool name_connection(sconn *c, const char *peer)
{
    server_conn_name n;
    if (!(c->names = server_conn_names(c->t, peer, &n)))
        return false;
    c->peer = n.peer, c->peer_host = n.peer_host, c->host = n.host, c->name = n.name;
    c->peer_port = n.peer_port, c->port = n.port;
    return true;
}

void sconn_attach(sconn_hub *h, loop *l, transport *t, const char *peer)
{
    sconn *c = calloc(1, sizeof *c);
    if (c)
        c->t = t;
    if (!c || !name_connection(c, peer)) {
        free(c);
        transport_free(t);
        return;
    }
    struct sockaddr_storage sa = {.ss_family = AF_UNSPEC};
    transport_address(t, false, &sa);
    c->hub = h;
    c->srv = h->srv;
    c->loop = l;
    c->state = SC_CONNECTED;
    c->loopback = server_sockaddr_loopback((struct sockaddr *)&sa);
    login_brake_key((struct sockaddr *)&sa, c->brake_key);
    c->mechanism = "";
    c->alarm = server_alarms(h->srv) != 0;
    c->frame_max = sp_pre_open_frame_max(server_config(h->srv)->stream_frame_max);
    c->id = server_new_conn_id(h->srv);
    c->connected_at = wall_clock_ms();
    c->opened_ms = c->last_recv_ms = c->last_send_ms = loop_now_ms(l);
    c->next = h->conns;
    if (h->conns)
        h->conns->prev = c;
    h->conns = c;
    h->count++;
    transport_start(t, &handlers, c);
}

void sconn_accept(sconn_hub *h, loop *l, int fd, const char *peer)
{
    transport *t = transport_new_tcp(loop_flusher(l), loop_base(l), fd);
    if (!t) {
        evutil_closesocket(fd);
        return;
    }
    sconn_attach(h, l, t, peer);
}

static void tick(sconn *c, uint64_t now)
{
    if (c->state == SC_CLOSED) {
        if (now >= c->deadline_ms) { /* a client that does not read its output */
            transport_abort(c->t);
            schedule_free(c);
        }
        return;
    }
    if (c->state == SC_CLOSE_SENT) {
        if (now >= c->deadline_ms)
            sc_teardown(c);
        return;
    }
    if (c->state < SC_OPEN) {
        if (now - c->opened_ms > server_config(c->srv)->handshake_timeout_ms) {
            log_msg(LOG_WARNING, "stream connection %s: handshake timeout", c->peer);
            sc_teardown(c);
        }
        return;
    }
    if (c->heartbeat == 0)
        return;
    uint64_t interval = (uint64_t)c->heartbeat * 1000;
    if (now - c->last_recv_ms > 2 * interval) {
        log_msg(LOG_WARNING, "stream connection %s: missed heartbeats from client, timeout: %us",
                c->peer, c->heartbeat);
        transport_abort(c->t);
        sc_teardown(c);
        return;
    }
    if (now - c->last_send_ms >= interval) {
        sp_buf b = sc_out(c, 16);
        sp_encode_heartbeat(&b);
        sc_commit(c, &b);
    }
}

/* ---- the hub ------------------------------------------------------------ */

sconn_hub *sconn_hub_new(server *s)
{
    sconn_hub *h = calloc(1, sizeof *h);
    if (h)
        h->srv = s;
    return h;
}

void sconn_hub_free(sconn_hub *h)
{
    if (!h)
        return;
    while (h->conns)
        free_sconn(-1, 0, h->conns);
    free(h);
}

void sconn_hub_add_listener(sconn_hub *h, const char *ip, int port)
{
    if (h->nlisteners == CONFIG_MAX_LISTENERS)
        return;
    snprintf(h->listeners[h->nlisteners].ip, sizeof h->listeners[0].ip, "%s", ip);
    h->listeners[h->nlisteners++].port = port;
}

size_t sconn_hub_listener_count(const sconn_hub *h) { return h->nlisteners; }

int sconn_hub_listener(const sconn_hub *h, size_t i, const char **ip)
{
    *ip = h->listeners[i].ip;
    return h->listeners[i].port;
}

void sc_advertised(const sconn_hub *h, char *host, size_t hostlen, char *port, size_t portlen)
{
    const config *cfg = server_config(h->srv);
    const char *node = server_node_name(h->srv), *at = strchr(node, '@');
    snprintf(host, hostlen, "%s", *cfg->stream_advertised_host ? cfg->stream_advertised_host
                                  : *cfg->cluster.advertised_host ? cfg->cluster.advertised_host
                                  : at ? at + 1 : node);
    snprintf(port, portlen, "%d", cfg->stream_advertised_port ? cfg->stream_advertised_port
                                  : h->nlisteners ? h->listeners[0].port : 0);
}
size_t sconn_hub_count(const sconn_hub *h) { return h->count; }

/* Frees are deferred, so the list is stable during these walks. */
void sconn_hub_tick(sconn_hub *h, uint64_t now)
{
    for (sconn *c = h->conns; c; c = c->next)
        tick(c, now);
}

/* A publisher blocked by an alarm or the journal's backlog reads again,
 * the frames already in its input first. */
static void unblock(sconn *c)
{
    if (!c->publish_blocked || c->alarm || server_journal_lagging(c->srv))
        return;
    c->publish_blocked = false;
    update_reading(c);
    if (!c->reading_paused)
        on_read(c);
}

void sconn_hub_journal_synced(sconn_hub *h)
{
    for (sconn *c = h->conns; c; c = c->next)
        if (c->state == SC_OPEN) {
            sc_flush_confirms(c);
            unblock(c);
        }
}

void sconn_hub_set_alarm(sconn_hub *h, unsigned alarms)
{
    for (sconn *c = h->conns; c; c = c->next) {
        c->alarm = alarms != 0;
        if (c->state == SC_OPEN)
            unblock(c);
    }
}

/* RabbitMQ 3.10.8 (live) closes these sockets without a Close frame; a
 * vhost's connections hear MetadataUpdate for their streams first. */
void sconn_hub_close_matching(sconn_hub *h, const vhost *v, const char *user, const char *text)
{
    for (sconn *c = h->conns; c; c = c->next) {
        if ((v && c->vh != v) || (user && (!c->user || strcmp(c->user, user) != 0)) ||
            c->state == SC_CLOSED)
            continue;
        log_msg(LOG_INFO, "stream connection %s closed: %s", c->peer, text);
        if (v)
            sc_streams_unavailable(c);
        sc_teardown(c);
        if (v && c->vh) { /* nothing may refer to the vhost once it is gone */
            sc_forget_streams(c);
            vhost_connection_left(c->vh);
            c->vh = NULL;
        }
    }
}

void sconn_hub_close_all(sconn_hub *h)
{
    for (sconn *c = h->conns; c; c = c->next)
        sc_teardown(c);
}
