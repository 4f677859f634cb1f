/* Connections: the frame loop, errors, heartbeats and output (the
 * handshake and the connection class are in handshake.c).
 *
 * State diagram:
 *   HEADER --proto header--> START_OK --start-ok--> TUNE_OK --tune-ok-->
 *   OPEN_WAIT --connection.open--> OPEN
 *   START_OK, TUNE_OK --any error--> HELD (nothing sent, input ignored),
 *         or CLOSING for a refused login of a client with
 *         authentication_failure_close; either is closed LOGIN_HOLD_MS
 *         later at the latest, as RabbitMQ closes them (see hold_refused)
 *   any --hard error / shutdown--> CLOSING (close sent, await close-ok)
 *   OPEN --client's connection.close--> LINGER (close-ok sent; answer any
 *         further close, wait for the client to close the socket)
 *   any --close-ok / EOF / timeout--> CLOSED (flush output, then free)
 *
 * Channels live in `chans`, indexed by channel number and grown on demand
 * (clients number channels from 1 up), so an idle connection stays small;
 * numbers from 256 up, which a peer may pick at will, in a hash table.
 * A channel that we closed with an error keeps the CHAN_CLOSING marker in its
 * slot until the client's close-ok, and frames for it are ignored meanwhile.
 *
 * Output goes to the transport's output buffer, written once at the end of
 * the loop turn, so every frame produced while handling reads is sent with
 * one writev. Past conn_output_limit bytes, queues stop delivering to this
 * connection, and past four times that it stops reading the client.
 * A connection is never freed on the stack of its own callbacks: teardown
 * marks it CLOSED and the free runs from a zero-delay event.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "conn_internal.h"

static void on_read(void *arg);
static void update_reading(conn *c);

/* ---- output ------------------------------------------------------------- */

static void put_frame_end(uint8_t *p) { *p = AMQP_FRAME_END; }

void conn_send_method(conn *c, uint16_t channel, const amqp_method *m)
{
    if (c->state == S_CLOSED)
        return;
    uint8_t buf[AMQP_FRAME_OVERHEAD + 4096];
    size_t n = amqp_method_encode(m, buf + AMQP_FRAME_HEADER_SIZE, 4096);
    if (n == 0) {
        log_msg(LOG_ERROR, "cannot encode %s", amqp_method_name(m->id));
        return;
    }
    amqp_frame_header_put(buf, AMQP_FRAME_METHOD, channel, (uint32_t)n);
    put_frame_end(buf + AMQP_FRAME_HEADER_SIZE + n);
    transport_write(c->t, buf, n + AMQP_FRAME_OVERHEAD);
    c->last_send_ms = loop_now_ms(c->loop);
}

static void unref_cleanup(const void *data, size_t len, void *arg)
{
    (void)data, (void)len;
    msg_unref(arg);
}

/* Bodies up to this size are copied into the output with the headers (one
 * contiguous write); larger ones are sent from the message by reference. */
#define COPY_BODY_MAX (128 * 1024)

/* Method and header frames (and a small body) straight into the output. */
static void put_content_frames(conn *c, uint16_t channel, const uint8_t *method, size_t mlen,
                               msg *body, amqp_bytes props, bool with_body)
{
    uint64_t size = msg_body_size(body);
    uint32_t chunk = c->frame_max - AMQP_FRAME_OVERHEAD;
    size_t nbody_frames = size ? (size_t)((size + chunk - 1) / chunk) : 0;
    size_t need = AMQP_FRAME_OVERHEAD + mlen + AMQP_FRAME_OVERHEAD + 12 + props.len +
                  (with_body ? size + nbody_frames * AMQP_FRAME_OVERHEAD : 0);
    uint8_t *start = transport_reserve(c->t, need), *p = start;
    if (!p)
        return;
    amqp_frame_header_put(p, AMQP_FRAME_METHOD, channel, (uint32_t)mlen);
    memcpy(p + AMQP_FRAME_HEADER_SIZE, method, mlen);
    p += AMQP_FRAME_HEADER_SIZE + mlen;
    put_frame_end(p++);
    amqp_frame_header_put(p, AMQP_FRAME_HEADER, channel, 12 + props.len);
    amqp_writer w;
    amqp_writer_init(&w, p + AMQP_FRAME_HEADER_SIZE, 12 + props.len);
    amqp_put_u16(&w, AMQP_CLASS_BASIC);
    amqp_put_u16(&w, 0);
    amqp_put_u64(&w, size);
    amqp_put_raw(&w, props.ptr, props.len);
    p += AMQP_FRAME_HEADER_SIZE + w.len;
    put_frame_end(p++);
    const uint8_t *b = msg_body(body);
    for (uint64_t off = 0; with_body && off < size; off += chunk) {
        uint32_t len = (uint32_t)(size - off < chunk ? size - off : chunk);
        amqp_frame_header_put(p, AMQP_FRAME_BODY, channel, len);
        memcpy(p + AMQP_FRAME_HEADER_SIZE, b + off, len);
        p += AMQP_FRAME_HEADER_SIZE + len;
        put_frame_end(p++);
    }
    transport_commit(c->t, (size_t)(p - start));
}

void conn_send_content(conn *c, uint16_t channel, const amqp_method *m, msg *body)
{
    conn_send_content_props(c, channel, m, body, msg_properties(body));
}

void conn_send_content_props(conn *c, uint16_t channel, const amqp_method *m, msg *body,
                             amqp_bytes props)
{
    if (c->state == S_CLOSED)
        return;
    uint8_t method[1024];
    size_t mlen = amqp_method_encode(m, method, sizeof method);
    uint64_t size = msg_body_size(body);
    bool copy = size <= COPY_BODY_MAX;
    put_content_frames(c, channel, method, mlen, body, props, copy);
    uint32_t chunk = c->frame_max - AMQP_FRAME_OVERHEAD;
    const uint8_t *b = msg_body(body);
    for (uint64_t off = 0; !copy && off < size; off += chunk) {
        uint32_t len = (uint32_t)(size - off < chunk ? size - off : chunk);
        uint8_t hdr[AMQP_FRAME_HEADER_SIZE];
        static const uint8_t end = AMQP_FRAME_END;
        amqp_frame_header_put(hdr, AMQP_FRAME_BODY, channel, len);
        transport_write(c->t, hdr, sizeof hdr);
        msg_ref(body);
        transport_write_reference(c->t, b + off, len, unref_cleanup, body);
        transport_write(c->t, &end, 1);
    }
    c->last_send_ms = loop_now_ms(c->loop);
    if (transport_pending(c->t) > server_config(c->srv)->conn_output_limit)
        c->output_blocked = true;
}

bool conn_output_full(const conn *c) { return c->output_blocked || c->state != S_OPEN; }

/* ---- accessors ---------------------------------------------------------- */

server *conn_server(conn *c) { return c->srv; }
loop *conn_loop(conn *c) { return c->loop; }
vhost *conn_vhost(conn *c) { return c->vh; }
const char *conn_peer_name(const conn *c) { return c->peer; }
const char *conn_user(const conn *c) { return c->user ? c->user : ""; }
bool conn_cancel_notify(const conn *c) { return c->cancel_notify; }

/* ---- unfinished message bodies ------------------------------------------ */

#define INLINE_RESERVE_MAX (4u << 20)

/* Each loop's connections get their share of the broker's budget for
 * unfinished bodies (all of it while there is one loop). */
static uint64_t loop_budget(const server *s)
{
    return server_content_limit(s) / server_loop_count(s);
}

/* What the unfinished bodies of the loop's connections hold together
 * (loop_content_held), against the connection's copy of the budget. */
static bool content_over_budget(conn *c)
{
    return *loop_content_held(c->loop) > c->content_limit &&
           c->content_held > server_content_share(c->srv);
}

static int content_over_share(conn *c, amqp_error *err)
{
    return amqp_fail(err, AMQP_RESOURCE_ERROR, 0,
                     "unfinished message bodies on this connection hold %llu bytes, more than "
                     "its share of the broker's limit for them",
                     (unsigned long long)c->content_held);
}

bool conn_content_reserve(conn *c, uint64_t body_size, uint64_t extra)
{
    uint64_t n = body_size + extra, *total = loop_content_held(c->loop);
    if (body_size > c->frame_max - AMQP_FRAME_OVERHEAD ||
        c->content_held + n > INLINE_RESERVE_MAX || *total + n > c->content_limit)
        return false;
    c->content_held += n;
    *total += n;
    return true;
}

int conn_content_held(conn *c, int64_t delta, amqp_error *err)
{
    uint64_t *total = loop_content_held(c->loop);
    c->content_held = (uint64_t)((int64_t)c->content_held + delta);
    *total = (uint64_t)((int64_t)*total + delta);
    if (delta <= 0 || !content_over_budget(c))
        return AMQP_OK;
    return content_over_share(c, err);
}

/* ---- channels table ----------------------------------------------------- */

/* Channel numbers below LOW_CHANNELS (clients count from 1) index `chans`,
 * grown on demand up to that size. A peer may open any number up to 65535,
 * as RabbitMQ allows; the higher ones live in `high`, a linear-probing
 * table sized by how many there are, not by how large a number the peer
 * picked (a flat array indexed by it made one channel.open cost 512 KiB). */
#define LOW_CHANNELS 256u
#define HIGH_MIN_CAP 8u

/* Fibonacci hashing: the high bits of the product, so numbers that share
 * their low bits (256, 512, ...) still spread. */
static uint32_t high_home(const conn *c, uint16_t n)
{
    return (uint32_t)(((uint64_t)n * 0x9E3779B97F4A7C15ull) >> 40) & (c->high_cap - 1);
}

static chan_entry *high_find(conn *c, uint16_t n)
{
    for (uint32_t i = c->high_cap ? high_home(c, n) : 0; c->high_cap && c->high[i].ch;
         i = (i + 1) & (c->high_cap - 1))
        if (c->high[i].number == n)
            return &c->high[i];
    return NULL;
}

static void high_insert(conn *c, uint16_t n, chan *ch)
{
    uint32_t i = high_home(c, n);
    while (c->high[i].ch)
        i = (i + 1) & (c->high_cap - 1);
    c->high[i] = (chan_entry){n, ch};
    c->nhigh++;
}

static bool high_grow(conn *c)
{
    uint32_t old_cap = c->high_cap, cap = old_cap ? old_cap * 2 : HIGH_MIN_CAP;
    chan_entry *old = c->high, *grown = calloc(cap, sizeof *grown);
    if (!grown)
        return false;
    c->high = grown;
    c->high_cap = cap;
    c->nhigh = 0;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].ch)
            high_insert(c, old[i].number, old[i].ch);
    free(old);
    return true;
}

/* Deletes by shifting later entries of the cluster back (no tombstones). */
static void high_delete(conn *c, chan_entry *e)
{
    uint32_t mask = c->high_cap - 1, hole = (uint32_t)(e - c->high);
    for (uint32_t j = (hole + 1) & mask; c->high[j].ch; j = (j + 1) & mask) {
        uint32_t home = high_home(c, c->high[j].number);
        /* j's entry may fill the hole unless its home lies in (hole, j] */
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            c->high[hole] = c->high[j];
            hole = j;
        }
    }
    c->high[hole] = (chan_entry){0, NULL};
    c->nhigh--;
}

static chan *chan_slot(conn *c, uint16_t n)
{
    if (n < LOW_CHANNELS)
        return n < c->nchans ? c->chans[n] : NULL;
    chan_entry *e = high_find(c, n);
    return e ? e->ch : NULL;
}

static bool set_low_slot(conn *c, uint16_t n, chan *ch)
{
    if (n >= c->nchans) {
        if (!ch)
            return true;
        uint32_t cap = c->nchans ? c->nchans : 4;
        while (cap <= n)
            cap *= 2;
        chan **grown = realloc(c->chans, cap * sizeof *grown);
        if (!grown)
            return false;
        memset(grown + c->nchans, 0, (cap - c->nchans) * sizeof *grown);
        c->chans = grown;
        c->nchans = cap;
    }
    c->chans[n] = ch;
    return true;
}

/* Sets slot n to ch (NULL empties it, and cannot fail). False on OOM. */
static bool set_chan_slot(conn *c, uint16_t n, chan *ch)
{
    if (n < LOW_CHANNELS)
        return set_low_slot(c, n, ch);
    chan_entry *e = high_find(c, n);
    if (e) {
        if (ch)
            e->ch = ch;
        else
            high_delete(c, e);
        return true;
    }
    if (!ch)
        return true;
    if (2 * (c->nhigh + 1) > c->high_cap && !high_grow(c))
        return false;
    high_insert(c, n, ch);
    return true;
}

/* Channels are visited by slot index: the low array, then the table. */
static uint32_t chan_slots(const conn *c) { return c->nchans + c->high_cap; }

/* The open channel at slot index i, or NULL (empty, or closing). */
static chan *chan_at(const conn *c, uint32_t i)
{
    chan *ch = i < c->nchans ? c->chans[i] : c->high[i - c->nchans].ch;
    return ch == CHAN_CLOSING ? NULL : ch;
}

/* Frees the channel in slot n, leaving `marker` (NULL or CHAN_CLOSING). */
static void close_channel(conn *c, uint16_t n, chan *marker)
{
    chan *ch = chan_slot(c, n);
    set_chan_slot(c, n, marker); /* the slot exists: replacing or emptying cannot fail */
    if (ch && ch != CHAN_CLOSING) {
        c->nopen--;
        loop_counters(c->loop)->channels_closed++;
        chan_free(ch);
    }
}

static void free_channels(conn *c)
{
    for (uint32_t i = 0; i < c->nchans; i++)
        close_channel(c, (uint16_t)i, NULL);
    /* a deletion may shift an entry back into a slot already passed: repeat */
    while (c->nhigh)
        for (uint32_t i = 0; i < c->high_cap; i++)
            while (c->high[i].ch)
                close_channel(c, c->high[i].number, NULL);
}

/* ---- errors and closing ------------------------------------------------- */

static void send_close(conn *c, uint16_t channel, const amqp_error *err)
{
    amqp_method m = {0};
    if (channel == 0) {
        m.id = AMQP_CONNECTION_CLOSE;
        m.connection_close.reply_code = err->code;
        m.connection_close.reply_text = AMQP_CSTR(err->text);
        m.connection_close.class_id = (uint16_t)(err->method_id >> 16);
        m.connection_close.method_id = (uint16_t)err->method_id;
    } else {
        m.id = AMQP_CHANNEL_CLOSE;
        m.channel_close.reply_code = err->code;
        m.channel_close.reply_text = AMQP_CSTR(err->text);
        m.channel_close.class_id = (uint16_t)(err->method_id >> 16);
        m.channel_close.method_id = (uint16_t)err->method_id;
    }
    conn_send_method(c, channel, &m);
}

void conn_close(conn *c, uint16_t code, const char *text, uint32_t method_id)
{
    if (c->state >= S_CLOSING)
        return;
    amqp_error err = {.code = code, .method_id = method_id};
    snprintf(err.text, sizeof err.text, "%s", text);
    if (c->state >= S_START_OK)
        send_close(c, 0, &err);
    free_channels(c);
    c->state = S_CLOSING;
    c->close_deadline_ms = loop_now_ms(c->loop) + CLOSE_OK_TIMEOUT_MS;
}

/* RabbitMQ's answer to a handshake that fails before connection.open (a
 * refused login, a malformed login response, a wrong method or frame): the
 * socket is held LOGIN_HOLD_MS, a brake on guessing passwords, then closed.
 * Only a refused login of a client that announced
 * authentication_failure_close hears connection.close first, and its
 * close-ok ends the wait; the others hear nothing. Past the login brake's
 * cap on held connections one is closed at once. */
static void hold_refused(conn *c, const amqp_error *err)
{
    login_brake *b = server_login_brake(c->srv);
    if (!login_brake_hold(b)) {
        log_msg(LOG_WARNING, "connection %s: %u refused connections are held already, closing it "
                "at once", c->peer, login_brake_held(b));
        conn_teardown(c);
        return;
    }
    c->held = true;
    if (err->code == AMQP_ACCESS_REFUSED && c->auth_failure_close) {
        conn_close(c, err->code, err->text, err->method_id);
    } else {
        c->state = S_HELD;
        update_reading(c);
    }
    c->close_deadline_ms = loop_now_ms(c->loop) + LOGIN_HOLD_MS;
}

void conn_raise(conn *c, uint16_t channel, const amqp_error *err)
{
    if (c->state < S_OPEN_WAIT) {
        log_msg(LOG_WARNING, "connection %s: handshake failed: %s", c->peer, err->text);
        hold_refused(c, err);
        return;
    }
    if (err->silent) {
        log_msg(LOG_WARNING, "connection %s dropped: %s", c->peer, err->text);
        conn_teardown(c);
        return;
    }
    if (channel == 0 || amqp_reply_is_hard(err->code)) {
        log_msg(LOG_WARNING, "connection %s closed: %s", c->peer, err->text);
        conn_close(c, err->code, err->text, err->method_id);
        return;
    }
    if (chan_slot(c, channel))
        close_channel(c, channel, CHAN_CLOSING);
    send_close(c, channel, err);
}

static void free_conn(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    conn *c = arg;
    invariant(c->content_held == 0); /* every channel released its content */
    if (c->held)
        login_brake_release(server_login_brake(c->srv));
    if (c->vh)
        vhost_connection_left(c->vh); /* the vhost counted it at connection.open */
    loop_conn_closed(c->loop, c);
    transport_free(c->t);
    free(c->chans);
    free(c->client_props);
    free(c->user);
    free(c->names);
    stats_free(&c->stats);
    free(c->high);
    free(c);
}

/* The client closed the connection: answer, drop its channels and
 * exclusive queues, and wait for it to close the socket. */
void conn_linger(conn *c)
{
    amqp_method ok = {.id = AMQP_CONNECTION_CLOSE_OK};
    conn_send_method(c, 0, &ok);
    if (c->state == S_LINGER)
        return;
    free_channels(c);
    if (c->vh)
        vhost_drop_exclusive(c->vh, c);
    c->state = S_LINGER;
    c->close_deadline_ms = loop_now_ms(c->loop) + LINGER_TIMEOUT_MS;
}

static void schedule_free(conn *c)
{
    if (c->free_scheduled)
        return;
    c->free_scheduled = true;
    event_base_once(loop_base(c->loop), -1, EV_TIMEOUT, free_conn, c, NULL);
}

/* Ends the connection: channels and exclusive queues go now, the socket once
 * the output has been written (or at once if nothing is pending). */
void conn_teardown(conn *c)
{
    if (c->state == S_CLOSED)
        return;
    free_channels(c);
    c->state = S_CLOSED;
    transport_pause_reading(c->t, true);
    if (c->vh)
        vhost_drop_exclusive(c->vh, c);
    if (transport_pending(c->t) == 0)
        schedule_free(c);
    /* else on_drained frees it once written; conn_tick bounds the wait. */
}

/* ---- frames ------------------------------------------------------------- */

/* ---- limits: a user's connections and channels ---- */

/* Adds up `what` of the listed connections of `user` on every loop. */
static uint64_t user_total(server *s, const char *user, bool channels)
{
    uint64_t n = 0;
    for (size_t i = 0; i < server_loop_count(s); i++) {
        loop *l = server_loop(s, i);
        for (size_t j = 0; j < loop_conn_count(l); j++) {
            conn *c = loop_conn_at(l, j);
            if (c->user && strcmp(c->user, user) == 0)
                n += channels ? c->nopen : 1;
        }
    }
    return n;
}

uint64_t conn_user_connections(server *s, const char *user) { return user_total(s, user, false); }
uint64_t conn_user_channels(server *s, const char *user) { return user_total(s, user, true); }

/* channel.open: the negotiated channel_max, then the user's max-channels,
 * each closing the connection with 530 as RabbitMQ's reader does. */
static int check_channel_limits(conn *c, amqp_error *err)
{
    if (c->nopen >= c->channel_max) {
        loop_refused(c->loop, REFUSED_CHAN_MAX, "connection %s: channel_max (%u) reached",
                     c->peer, c->channel_max);
        return amqp_fail(err, AMQP_NOT_ALLOWED, 0,
                         "number of channels opened (%u) has reached the negotiated "
                         "channel_max (%u)",
                         c->nopen, c->channel_max);
    }
    const access_user *u = access_find_user(server_access(c->srv), c->user);
    meta_limit max = u ? access_user_max_channels(u) : (meta_limit){0};
    if (max.set && max.value >= 0 && conn_user_channels(c->srv, c->user) >= (uint64_t)max.value) {
        loop_refused(c->loop, REFUSED_CHAN_USER_LIMIT, "connection %s: user '%s' channel limit "
                     "(%lld) reached", c->peer, c->user, (long long)max.value);
        return amqp_fail(err, AMQP_NOT_ALLOWED, 0,
                         "number of channels opened for user '%s' has reached the maximum "
                         "allowed user limit of (%lld)", c->user, (long long)max.value);
    }
    return AMQP_OK;
}

static int handle_channel_method(conn *c, uint16_t n, const amqp_method *m, amqp_error *err)
{
    chan *ch = chan_slot(c, n);
    if (ch == CHAN_CLOSING) {
        /* Waiting for close-ok: everything else is dropped, as RabbitMQ does. */
        if (m->id == AMQP_CHANNEL_CLOSE_OK) {
            set_chan_slot(c, n, NULL);
        } else if (m->id == AMQP_CHANNEL_CLOSE) {
            /* the client's close crossed ours: answer it, still await close-ok */
            amqp_method ok = {.id = AMQP_CHANNEL_CLOSE_OK};
            conn_send_method(c, n, &ok);
        } else if (m->id == AMQP_CHANNEL_OPEN) {
            return amqp_fail(err, AMQP_CHANNEL_ERROR, m->id, "second 'channel.open' seen");
        }
        return AMQP_OK;
    }
    if (!ch) {
        if (m->id != AMQP_CHANNEL_OPEN)
            return amqp_fail(err, AMQP_CHANNEL_ERROR, m->id, "expected 'channel.open'");
        /* RabbitMQ limits how many channels are open, not their numbers. */
        if (check_channel_limits(c, err) != AMQP_OK)
            return AMQP_ERROR;
        ch = chan_new(c, n);
        if (!ch || !set_chan_slot(c, n, ch)) {
            if (ch)
                chan_free(ch);
            return amqp_fail(err, AMQP_INTERNAL_ERROR, m->id, "out of memory");
        }
        c->nopen++;
        loop_counters(c->loop)->channels_opened++;
        amqp_method ok = {.id = AMQP_CHANNEL_OPEN_OK};
        conn_send_method(c, n, &ok);
        return AMQP_OK;
    }
    if (m->id == AMQP_CHANNEL_OPEN)
        return amqp_fail(err, AMQP_CHANNEL_ERROR, m->id, "second 'channel.open' seen");
    if (chan_expecting_content(ch))
        return chan_content_expected(ch, err);
    if (m->id == AMQP_CHANNEL_CLOSE) {
        close_channel(c, n, NULL);
        amqp_method ok = {.id = AMQP_CHANNEL_CLOSE_OK};
        conn_send_method(c, n, &ok);
        return AMQP_OK;
    }
    if ((m->id >> 16) == AMQP_CLASS_CONNECTION)
        return amqp_fail(err, AMQP_COMMAND_INVALID, m->id, "unimplemented method");
    return chan_handle(ch, m, err);
}

static int handle_method_frame(conn *c, const amqp_frame *f, amqp_error *err)
{
    amqp_method m;
    if (amqp_method_decode(f->payload, f->size, &m, err) != AMQP_OK)
        return AMQP_ERROR;
    if (c->state == S_CLOSING || c->state == S_LINGER) {
        /* closing: only the close handshake matters now */
        if (m.id == AMQP_CONNECTION_CLOSE_OK && c->state == S_CLOSING) {
            conn_teardown(c);
        } else if (m.id == AMQP_CONNECTION_CLOSE) {
            bool ours = c->state == S_CLOSING;
            conn_linger(c);
            if (ours)
                conn_teardown(c);
        }
        return AMQP_OK;
    }
    if (f->channel == 0)
        return handshake_method(c, &m, err);
    if (c->state != S_OPEN)
        return amqp_fail(err, AMQP_CHANNEL_ERROR, m.id, "channel %u used before connection.open",
                         f->channel);
    return handle_channel_method(c, f->channel, &m, err);
}

/* RabbitMQ's text for a frame it cannot place: "type 3, all octets = <<...>>". */
static int misplaced_frame(const amqp_frame *f, const char *reason, amqp_error *err)
{
    char octets[160];
    amqp_field payload = {.type = 'x', .v.bytes = {f->payload, f->size}};
    uint16_t code = reason ? AMQP_FRAME_ERROR : AMQP_UNEXPECTED_FRAME;
    return amqp_fail(err, code, 0, "type %u, all octets = %s%s%s", f->type,
                     amqp_erl_term(&payload, octets, sizeof octets), reason ? ": " : "",
                     reason ? reason : "");
}

/* Content frames go to a channel that is waiting for them; anything else is
 * 505 UNEXPECTED_FRAME, with RabbitMQ's texts. */
static int handle_content_frame(conn *c, const amqp_frame *f, amqp_error *err)
{
    if (c->state == S_CLOSING || c->state == S_LINGER)
        return AMQP_OK;
    if (f->channel == 0)
        return misplaced_frame(f, NULL, err);
    chan *ch = c->state == S_OPEN ? chan_slot(c, f->channel) : NULL;
    if (ch == CHAN_CLOSING)
        return AMQP_OK;
    if (!ch || !chan_expecting_content(ch))
        return amqp_fail(err, AMQP_UNEXPECTED_FRAME, 0,
                         "expected method frame, got non method frame instead");
    if (f->type == AMQP_FRAME_BODY)
        return chan_content_body(ch, f->payload, f->size, err);
    amqp_content_header h;
    if (amqp_content_header_decode(f->payload, f->size, &h, err) == AMQP_OK)
        return chan_content_header(ch, &h, err);
    if (err->code == AMQP_UNEXPECTED_FRAME) {
        err->method_id = AMQP_BASIC_PUBLISH;
        return AMQP_ERROR;
    }
    if (err->final)
        return AMQP_ERROR; /* a non-finite float: the codec's 502 stands */
    /* Malformed properties crash RabbitMQ's channel: a bare 541. */
    err->code = AMQP_INTERNAL_ERROR;
    err->method_id = 0;
    snprintf(err->text, sizeof err->text, "INTERNAL_ERROR");
    return AMQP_ERROR;
}

static int handle_frame(conn *c, const amqp_frame *f, amqp_error *err)
{
    switch (f->type) {
    case AMQP_FRAME_METHOD:
        return handle_method_frame(c, f, err);
    case AMQP_FRAME_HEADER:
    case AMQP_FRAME_BODY:
        return handle_content_frame(c, f, err);
    case AMQP_FRAME_HEARTBEAT:
        if (f->size != 0)
            return misplaced_frame(f, "unknown_frame", err);
        return f->channel == 0 ? AMQP_OK : misplaced_frame(f, NULL, err);
    default:
        return amqp_fail(err, AMQP_FRAME_ERROR, 0, "unknown frame type %u", f->type);
    }
}

static void flush_confirms(conn *c)
{
    for (uint32_t i = 0; i < chan_slots(c); i++) {
        chan *ch = chan_at(c, i);
        if (ch)
            chan_flush_confirms(ch);
    }
}

/* The frames of one read are handled where they lie in the input and
 * drained together (amqp_frame_reader), not copied or drained one by one. */
static void read_frames(conn *c)
{
    amqp_frame_reader rd;
    amqp_frames_begin(&rd, transport_input(c->t));
    while (c->state != S_CLOSED && c->state != S_HELD) {
        amqp_frame f;
        amqp_error err = {0};
        int r = amqp_frames_next(&rd, c->frame_max, 0, &f, &err);
        if (r == AMQP_NEED_MORE)
            break;
        if (r == AMQP_OK) {
            uint16_t channel = f.channel;
            bool publish = amqp_frame_method_id(&f) == AMQP_BASIC_PUBLISH;
            r = handle_frame(c, &f, &err);
            if (r == AMQP_OK && publish && (c->alarm || server_journal_lagging(c->srv))) {
                c->reading_blocked |= c->alarm;
                c->journal_blocked = !c->alarm;
                update_reading(c);
                break;
            }
            if (r == AMQP_OK)
                continue;
            conn_raise(c, (f.type == AMQP_FRAME_METHOD || f.type == AMQP_FRAME_HEADER ||
                           f.type == AMQP_FRAME_BODY) ? channel : 0, &err);
        } else {
            if (strstr(err.text, "frame_too_large")) /* the reader's text for it (amqp/frame.c) */
                loop_refused(c->loop, REFUSED_FRAME_MAX, "connection %s: frame over frame_max "
                             "(%u): %s", c->peer, c->frame_max, err.text);
            conn_raise(c, 0, &err);
            evbuffer_drain(rd.in, evbuffer_get_length(rd.in)); /* what was handled, and the rest */
            return;
        }
    }
    amqp_frames_drain(&rd);
}

static void update_reading(conn *c)
{
    transport_pause_reading(c->t, c->reading_paused || c->reading_blocked || c->journal_blocked ||
                                      c->state == S_CLOSED || c->state == S_HELD);
}

static void on_read(void *arg)
{
    conn *c = arg;
    loop_touch_clock(c->loop);
    c->last_recv_ms = loop_now_ms(c->loop);
    if (c->state == S_HEADER) {
        handshake_header(c);
        if (c->state == S_HEADER)
            return;
    }
    read_frames(c);
    if (c->state == S_OPEN)
        flush_confirms(c);
    if (c->state != S_CLOSED &&
        transport_pending(c->t) > 4 * server_config(c->srv)->conn_output_limit) {
        c->reading_paused = true;
        update_reading(c);
    }
}

/* ---- write side and events ---------------------------------------------- */

static void resume_deliveries(conn *c)
{
    c->output_blocked = false;
    for (uint32_t i = 0; i < chan_slots(c) && c->state == S_OPEN; i++) {
        chan *ch = chan_at(c, i);
        if (ch)
            chan_resume(ch);
    }
}

static void on_drained(void *arg, size_t pending)
{
    conn *c = arg;
    if (c->state == S_CLOSED) {
        if (pending == 0)
            schedule_free(c);
        return;
    }
    size_t limit = server_config(c->srv)->conn_output_limit;
    if (c->reading_paused && pending <= limit) {
        c->reading_paused = false;
        update_reading(c);
    }
    if (c->output_blocked && pending <= limit / 2)
        resume_deliveries(c);
}

static void on_closed(void *arg, int error)
{
    conn *c = arg;
    if (error == ENOMEM)
        log_msg(LOG_ERROR, "connection %s: out of memory for its input; closing it", c->peer);
    else if (error == EPROTO && *transport_tls_error(c->t)) /* a refused TLS handshake */
        log_msg(LOG_WARNING, "connection %s: %s", c->peer, transport_tls_error(c->t));
    if (c->state == S_CLOSED) {
        schedule_free(c);
        return;
    }
    if (c->state == S_OPEN)
        log_msg(LOG_WARNING, "connection %s: client closed the socket without "
                             "connection.close", c->peer);
    conn_teardown(c);
}

static const transport_handlers handlers = {on_read, on_drained, on_closed};

/* ---- lifecycle ---------------------------------------------------------- */

/* RabbitMQ's connection name, "peer -> local", and its parts, in one
 * block; ids number connections. False when out of memory. */
static bool name_connection(server *s, conn *c, transport *t, const char *peer)
{
    server_conn_name n;
    if (!(c->names = server_conn_names(t, peer, &n)))
        return false;
    c->peer = n.peer, c->peer_host = n.peer_host, c->host = n.host, c->name = n.name;
    c->peer_port = n.peer_port, c->port = n.port;
    c->id = server_new_conn_id(s);
    c->connected_at = wall_clock_ms();
    return true;
}

/* AMQP sockets open now, on every loop. */
static uint64_t sockets_open(server *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i < server_loop_count(s); i++)
        n += loop_socket_count(server_loop(s, i));
    return n;
}

void conn_accept(server *s, loop *l, int fd, const char *peer)
{
    /* connection_max: RabbitMQ stops accepting (ranch's max_connections),
     * so a client waits in the backlog until it gives up; Warren closes the
     * socket at once, so it fails fast, and counts and logs it. */
    uint32_t max = server_config(s)->connection_max;
    if (max && sockets_open(s) >= max) {
        loop_refused(l, REFUSED_CONN_MAX, "connection from %s refused: connection_max (%u) "
                     "reached", peer ? peer : "?", max);
        evutil_closesocket(fd);
        return;
    }
    transport *t = transport_new_tcp(loop_flusher(l), loop_base(l), fd);
    if (!t) {
        evutil_closesocket(fd);
        return;
    }
    conn_attach(s, l, t, peer);
}

static conn *attach(server *s, loop *l, transport *t, const char *peer, bool trusted)
{
    conn *c = calloc(1, sizeof *c);
    if (!c || !name_connection(s, c, t, peer) || !loop_conn_opened(l, c)) {
        if (c)
            free(c->names);
        free(c);
        transport_free(t);
        return NULL;
    }
    c->trusted = trusted;
    struct sockaddr_storage sa = {.ss_family = AF_UNSPEC};
    transport_address(t, false, &sa);
    c->srv = s;
    c->loop = l;
    c->t = t;
    c->state = S_HEADER;
    c->loopback = server_sockaddr_loopback((struct sockaddr *)&sa);
    login_brake_key((struct sockaddr *)&sa, c->brake_key);
    c->mechanism = "";
    /* until tune-ok, RabbitMQ's initial_frame_max: a client that has not
     * logged in (or was refused) can make us buffer no more than that */
    c->frame_max = AMQP_FRAME_MIN_SIZE;
    c->content_limit = loop_budget(s);
    c->channel_max = server_config(s)->channel_max;
    c->opened_ms = c->last_recv_ms = c->last_send_ms = loop_now_ms(l);
    transport_start(t, &handlers, c);
    return c;
}

void conn_attach(server *s, loop *l, transport *t, const char *peer) { attach(s, l, t, peer, false); }

void conn_attach_trusted(server *s, loop *l, transport *t, const char *peer)
{
    attach(s, l, t, peer, true);
}

bool conn_trusted(const conn *c) { return c->trusted; }

void conn_tick(conn *c, uint64_t now)
{
    const config *cfg = server_config(c->srv);
    if (c->state == S_CLOSED) {
        if (now - c->last_send_ms > CLOSE_OK_TIMEOUT_MS) {
            transport_abort(c->t); /* a client that does not read its close */
            schedule_free(c);
        }
        return;
    }
    if (c->state == S_CLOSING || c->state == S_LINGER || c->state == S_HELD) {
        if (now >= c->close_deadline_ms)
            conn_teardown(c);
        return;
    }
    /* A connection that holds more than its share of unfinished bodies
     * while others keep growing them is closed, even if it sends nothing. */
    if (c->content_held && content_over_budget(c)) {
        amqp_error err;
        content_over_share(c, &err);
        conn_raise(c, 0, &err);
        return;
    }
    if (c->state < S_OPEN_WAIT) {
        if (now - c->opened_ms > cfg->handshake_timeout_ms) {
            log_msg(LOG_WARNING, "connection %s: handshake timeout", c->peer);
            conn_teardown(c);
        }
        return;
    }
    /* consumer timeouts: one comparison per channel (chan_tick); a
     * channel closed meanwhile leaves CHAN_CLOSING in its slot */
    for (uint32_t i = 0; c->state == S_OPEN && i < chan_slots(c); i++) {
        chan *ch = chan_at(c, i);
        if (ch)
            chan_tick(ch, now);
    }
    if (c->heartbeat == 0)
        return;
    uint64_t interval = (uint64_t)c->heartbeat * 1000;
    if (now - c->last_recv_ms > 2 * interval) {
        log_msg(LOG_WARNING, "connection %s: missed heartbeats from client, timeout: %us",
                c->peer, c->heartbeat);
        transport_abort(c->t);
        conn_teardown(c);
        return;
    }
    if (now - c->last_send_ms >= interval / 2) {
        static const uint8_t hb[8] = {AMQP_FRAME_HEARTBEAT, 0, 0, 0, 0, 0, 0, AMQP_FRAME_END};
        transport_write(c->t, hb, sizeof hb);
        c->last_send_ms = now;
    }
}


void conn_free_now(conn *c)
{
    free_channels(c);
    if (c->vh)
        vhost_drop_exclusive(c->vh, c);
    free_conn(-1, 0, c);
}

void conn_content_limit_changed(conn *c) { c->content_limit = loop_budget(c->srv); }

void conn_set_alarm(conn *c, unsigned alarms)
{
    static const char *const reasons[] = {"", "low on memory", "low on disk",
                                          "low on memory & low on disk"};
    bool on = alarms != 0;
    if (c->state != S_OPEN || c->alarm == on)
        return;
    c->alarm = on;
    amqp_method m = {.id = on ? AMQP_CONNECTION_BLOCKED : AMQP_CONNECTION_UNBLOCKED};
    if (on && c->blocked_capable) {
        m.connection_blocked.reason = AMQP_CSTR(reasons[alarms & 3]);
        conn_send_method(c, 0, &m);
        c->blocked_sent = true;
    } else if (!on && c->blocked_sent) {
        conn_send_method(c, 0, &m);
        c->blocked_sent = false;
    }
    if (!on && c->reading_blocked) {
        c->reading_blocked = false;
        update_reading(c);
        if (!c->reading_paused)
            on_read(c); /* frames may be waiting in the input buffer */
    }
}

void conn_journal_synced(conn *c)
{
    if (c->journal_blocked && !server_journal_lagging(c->srv)) {
        c->journal_blocked = false;
        update_reading(c);
        if (!c->reading_paused && !c->reading_blocked)
            on_read(c); /* frames may be waiting in the input buffer */
    }
    for (uint32_t i = 0; c->state == S_OPEN && i < chan_slots(c); i++) {
        chan *ch = chan_at(c, i);
        if (ch)
            chan_flush_confirms(ch);
    }
}

/* ---- introspection (management API) ------------------------------------ */

bool conn_logged_in(conn *c, amqp_bytes user, amqp_bytes props, config_auth_mech mechanism)
{
    char *name = malloc(user.len + 1);
    uint8_t *copy = props.len ? malloc(props.len) : NULL;
    if (!name || (props.len && !copy)) {
        free(name);
        free(copy);
        return false;
    }
    memcpy(name, user.ptr, user.len);
    name[user.len] = 0;
    free(c->user);
    c->user = name;
    c->mechanism = config_auth_mech_name(mechanism);
    free(c->client_props);
    c->client_props = copy;
    c->client_props_len = props.len;
    if (copy)
        memcpy(copy, props.ptr, props.len);
    return true;
}

static const char *state_name(const conn *c)
{
    switch (c->state) {
    case S_HEADER:
    case S_START_OK:
        return "starting";
    case S_TUNE_OK:
        return "tuning";
    case S_OPEN_WAIT:
        return "opening";
    case S_OPEN:
        /* RabbitMQ's "blocking": an alarm is on, the connection has not published since */
        return c->reading_blocked || c->journal_blocked ? "blocked" : c->alarm ? "blocking" : "running";
    default:
        return "closing";
    }
}

uint64_t conn_id(const conn *c) { return c->id; }

void conn_describe(const conn *c, conn_info *out)
{
    uint64_t io[4];
    transport_io_counts(c->t, io);
    conn *mut = (conn *)c; /* the byte counters live in the transport */
    mut->stats.n[STAT_RECV_OCT] = io[0], mut->stats.n[STAT_SEND_OCT] = io[1];
    mut->stats.n[STAT_RECV_CNT] = io[2], mut->stats.n[STAT_SEND_CNT] = io[3];
    *out = (conn_info){.id = c->id,
                       .name = c->name,
                       .peer_host = c->peer_host,
                       .peer_port = c->peer_port,
                       .host = c->host,
                       .port = c->port,
                       .user = conn_user(c),
                       .vhost = c->vh ? vhost_name(c->vh) : "",
                       .state = state_name(c),
                       .auth_mechanism = c->mechanism,
                       .transport = c->t,
                       .client_properties = {c->client_props, c->client_props_len},
                       .channel_max = c->channel_max,
                       .heartbeat = c->heartbeat,
                       .frame_max = c->frame_max,
                       .channels = c->nopen,
                       .connected_at = c->connected_at,
                       .send_pend = transport_pending(c->t),
                       .stats = &c->stats};
}

uint32_t conn_channel_slots(const conn *c) { return c->state == S_OPEN ? c->nchans : 0; }

chan *conn_channel_at(conn *c, uint32_t slot)
{
    chan *ch = slot < c->nchans ? c->chans[slot] : NULL;
    return ch == CHAN_CLOSING ? NULL : ch;
}

chan *conn_channel_find(conn *c, uint16_t number)
{
    return c->state == S_OPEN ? conn_channel_at(c, number) : NULL;
}

void conn_force_close(conn *c, const char *reason)
{
    char text[256];
    snprintf(text, sizeof text, "CONNECTION_FORCED - %s",
             reason && *reason ? reason : "Closed via management plugin");
    log_msg(LOG_INFO, "connection %s closed via the management API: %s", c->peer, text);
    conn_close(c, AMQP_CONNECTION_FORCED, text, 0);
}
