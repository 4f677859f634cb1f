/* One shovel's two links, as rabbit_shovel_worker runs them: the
 * destination is connected and set up first (its queue, confirm mode),
 * then the source (its queue, or a server-named queue bound to the source
 * exchange; qos; consume); then the shovel runs. Each end goes through
 *   CONNECTING -> CHANNEL -> [PASSIVE -> (404) REOPEN -> DECLARE] [BIND]
 *   -> QOS -> CONSUME (source) | CONFIRM (destination) -> READY
 * A queue named in the definition is declared passively first and only
 * declared (durable) when it is missing, as RabbitMQ's ensure_queue does.
 *
 * Forwarding: each delivery is published to the destination; with
 * on-confirm its source tag waits in a ring indexed by the publish
 * sequence number until the destination confirms (then basic.ack) or
 * rejects (basic.nack, requeued) it; on-publish acks as it publishes;
 * no-ack consumes without acks. A delivery the destination's output cannot
 * take is held and the source paused until it drains; a full ring pauses
 * the source too. Any error of either link terminates the shovel with the
 * reason and closes both links (shovels.c decides what comes next).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shovel_int.h"

#define RING_MAX (1u << 20)
#define DEST_MAX_OUTPUT (1u << 20)

static void fail(shovel *sh, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void connect_end(shovel *sh, shovel_end *e, const client_uri *u);
static void autodelete(shovel *sh);

void shovel_set_state(shovel *sh, shovel_state st, const char *reason)
{
    sh->state = st;
    sh->since_s = (int64_t)time(NULL);
    snprintf(sh->reason, sizeof sh->reason, "%s", reason ? reason : "");
    if (st == SHOVEL_TERMINATED)
        log_msg(LOG_WARNING, "shovel '%s' in vhost '%s' terminated: %s", sh->name, sh->vhost,
                sh->reason);
    else
        log_msg(LOG_INFO, "shovel '%s' in vhost '%s' %s", sh->name, sh->vhost,
                shovel_state_name(st));
}

static void fail(shovel *sh, const char *fmt, ...)
{
    if (sh->state == SHOVEL_TERMINATED || sh->dead || sh->stopping)
        return;
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    sh->failures++;
    shovel_set_state(sh, SHOVEL_TERMINATED, why);
    shovel_link_stop(sh);
}

static shovel_end *end_of(shovel *sh, client *c) { return c == sh->src.c ? &sh->src : &sh->dest; }

/* An Erlang-ish reason, as RabbitMQ's status prints its exit reasons. */
static void describe(const client_error *why, char *out, size_t cap)
{
    switch (why->kind) {
    case CLIENT_ERR_SERVER_CLOSE:
        snprintf(out, cap, "{server_initiated_close,%u,<<\"%s\">>}", why->code, why->text);
        break;
    case CLIENT_ERR_CLIENT_CLOSE:
        snprintf(out, cap, "{client_initiated_close,%u,<<\"%s\">>}", why->code, why->text);
        break;
    case CLIENT_ERR_AUTH: snprintf(out, cap, "{auth_failure,\"%s\"}", why->text); break;
    case CLIENT_ERR_NETWORK:
        if (strcmp(why->text, "Connection refused") == 0)
            snprintf(out, cap, "connection to target host was refused (ECONNREFUSED)");
        else
            snprintf(out, cap, "%s", why->text);
        break;
    case CLIENT_ERR_TIMEOUT:
        snprintf(out, cap, "%s", strncmp(why->text, "missed", 6) == 0 ? "heartbeat timeout"
                                                                        : why->text);
        break;
    default: snprintf(out, cap, "%s", why->text); break;
    }
}

/* ---- setting up ------------------------------------------------------------ */

static void call_declare(shovel *sh, shovel_end *e, const char *qname, bool passive,
                         bool exclusive)
{
    amqp_method m = {.id = AMQP_QUEUE_DECLARE};
    m.queue_declare.queue = AMQP_CSTR(qname);
    m.queue_declare.passive = passive;
    m.queue_declare.durable = !passive && !exclusive;
    m.queue_declare.exclusive = exclusive;
    e->step = passive ? STEP_PASSIVE : STEP_DECLARE;
    if (!client_call(e->c, 1, &m))
        fail(sh, "cannot declare queue '%s'", qname);
}

static void dest_ready(shovel *sh)
{
    sh->dest.step = STEP_READY;
    connect_end(sh, &sh->src, &sh->cfg.src);
}

static void dest_declared(shovel *sh)
{
    if (sh->cfg.ack_mode != ACK_ON_CONFIRM) {
        dest_ready(sh);
        return;
    }
    amqp_method m = {.id = AMQP_CONFIRM_SELECT};
    sh->dest.step = STEP_CONFIRM;
    if (!client_call(sh->dest.c, 1, &m))
        fail(sh, "cannot select confirms");
}

static void consume(shovel *sh)
{
    amqp_method m = {.id = AMQP_BASIC_CONSUME};
    m.basic_consume.queue = AMQP_CSTR(sh->src.queue);
    m.basic_consume.no_ack = sh->cfg.ack_mode == ACK_NO_ACK;
    sh->src.step = STEP_CONSUME;
    if (!client_call(sh->src.c, 1, &m))
        fail(sh, "cannot consume from '%s'", sh->src.queue);
}

/* The source queue is known (with its length now): qos, then consume. */
static void src_declared(shovel *sh, uint32_t message_count)
{
    int64_t d = sh->cfg.delete_after;
    sh->remaining = sh->remaining_unacked =
        d == DELETE_NEVER ? -1 : d == DELETE_QUEUE_LENGTH ? (int64_t)message_count : d;
    if (sh->remaining == 0) {
        autodelete(sh);
        return;
    }
    if (sh->cfg.ack_mode == ACK_NO_ACK) {
        consume(sh);
        return;
    }
    amqp_method m = {.id = AMQP_BASIC_QOS};
    m.basic_qos.prefetch_count = sh->cfg.prefetch;
    sh->src.step = STEP_QOS;
    if (!client_call(sh->src.c, 1, &m))
        fail(sh, "cannot set qos");
}

static void begin_declare(shovel *sh, shovel_end *e)
{
    bool src = e == &sh->src;
    bool named = src ? sh->cfg.has_src_queue : sh->cfg.has_dest_queue;
    if (!named && !src) {
        dest_declared(sh);
        return;
    }
    if (!named) { /* a source exchange: a server-named queue bound to it */
        call_declare(sh, e, "", false, true);
        return;
    }
    snprintf(e->queue, sizeof e->queue, "%s", src ? sh->cfg.src_queue : sh->cfg.dest_queue);
    call_declare(sh, e, e->queue, e->step != STEP_REOPEN, false);
}

static void on_declare_ok(shovel *sh, shovel_end *e, const amqp_queue_declare_ok *ok)
{
    if (e == &sh->dest) {
        dest_declared(sh);
        return;
    }
    if (sh->cfg.has_src_queue) {
        src_declared(sh, ok->message_count);
        return;
    }
    snprintf(e->queue, sizeof e->queue, "%.*s", (int)ok->queue.len, (const char *)ok->queue.ptr);
    amqp_method m = {.id = AMQP_QUEUE_BIND};
    m.queue_bind.queue = AMQP_CSTR(e->queue);
    m.queue_bind.exchange = AMQP_CSTR(sh->cfg.src_exchange);
    m.queue_bind.routing_key = AMQP_CSTR(sh->cfg.src_exchange_key);
    e->step = STEP_BIND;
    if (!client_call(e->c, 1, &m))
        fail(sh, "cannot bind to '%s'", sh->cfg.src_exchange);
}

static void on_reply(void *ctx, client *c, uint16_t ch, const amqp_method *m)
{
    shovel *sh = ctx;
    shovel_end *e = end_of(sh, c);
    (void)ch;
    switch (m->id) {
    case AMQP_QUEUE_DECLARE_OK: on_declare_ok(sh, e, &m->queue_declare_ok); break;
    case AMQP_QUEUE_BIND_OK: src_declared(sh, 0); break;
    case AMQP_BASIC_QOS_OK: consume(sh); break;
    case AMQP_CONFIRM_SELECT_OK: dest_ready(sh); break;
    case AMQP_BASIC_CONSUME_OK:
        sh->src.step = STEP_READY;
        sh->failures = 0;
        shovel_set_state(sh, SHOVEL_RUNNING, NULL);
        break;
    }
}

static void on_opened(void *ctx, client *c)
{
    shovel *sh = ctx;
    shovel_end *e = end_of(sh, c);
    e->step = STEP_CHANNEL;
    if (!client_channel_open(c, 1))
        fail(sh, "cannot open a channel");
}

static void on_channel_opened(void *ctx, client *c, uint16_t ch)
{
    shovel *sh = ctx;
    (void)ch;
    begin_declare(sh, end_of(sh, c));
}

static void on_channel_closed(void *ctx, client *c, uint16_t ch, const client_error *why)
{
    shovel *sh = ctx;
    shovel_end *e = end_of(sh, c);
    (void)ch;
    if (e->step == STEP_PASSIVE && why->code == AMQP_NOT_FOUND) {
        e->step = STEP_REOPEN; /* missing: declare it */
        if (!client_channel_open(c, 1))
            fail(sh, "cannot open a channel");
        return;
    }
    fail(sh, "{%s_link_or_channel_closure,{%u,<<\"%s\">>}}",
         e == &sh->src ? "inbound" : "outbound", why->code, why->text);
}

static void on_closed(void *ctx, client *c, const client_error *why)
{
    shovel *sh = ctx;
    shovel_end *e = end_of(sh, c);
    char reason[400];
    client_free(c);
    e->c = NULL;
    e->step = STEP_IDLE;
    if (!sh->stopping && sh->state != SHOVEL_TERMINATED && !sh->dead) {
        describe(why, reason, sizeof reason);
        fail(sh, "{%s_conn_died,%s}", e == &sh->src ? "inbound" : "outbound", reason);
        return;
    }
    if (!sh->src.c && !sh->dest.c) {
        sh->stopping = false;
        shovels_links_closed(sh);
    }
}

/* ---- forwarding ------------------------------------------------------------- */

static void decr_remaining(shovel *sh, uint64_t n)
{
    if (sh->remaining < 0)
        return;
    sh->remaining -= (int64_t)n;
    if (sh->remaining <= 0)
        autodelete(sh);
}

static bool ring_room(shovel *sh)
{
    if (sh->next_seq - sh->head_seq < sh->ring_cap)
        return true;
    size_t cap = sh->ring_cap ? sh->ring_cap * 2 : 1024;
    if (cap > RING_MAX)
        return false;
    uint64_t *ring = malloc(cap * sizeof *ring);
    uint8_t *done = malloc(cap);
    if (!ring || !done) {
        free(ring), free(done);
        return false;
    }
    for (uint64_t s = sh->head_seq; s < sh->next_seq; s++) {
        ring[s & (cap - 1)] = sh->ring[s & (sh->ring_cap - 1)];
        done[s & (cap - 1)] = sh->done[s & (sh->ring_cap - 1)];
    }
    free(sh->ring), free(sh->done);
    sh->ring = ring, sh->done = done, sh->ring_cap = cap;
    return true;
}

static void published(shovel *sh, uint64_t tag, uint64_t seq)
{
    sh->forwarded++;
    switch (sh->cfg.ack_mode) {
    case ACK_ON_CONFIRM:
        sh->ring[seq & (sh->ring_cap - 1)] = tag;
        sh->done[seq & (sh->ring_cap - 1)] = 0;
        sh->next_seq = seq + 1;
        if (sh->remaining_unacked > 0)
            sh->remaining_unacked--;
        break;
    case ACK_ON_PUBLISH:
        client_ack(sh->src.c, 1, tag, false);
        sh->acked++;
        decr_remaining(sh, 1);
        break;
    default: decr_remaining(sh, 1); break;
    }
}

static bool keep(uint8_t **buf, size_t *cap, size_t *len, amqp_bytes b)
{
    if (b.len > *cap) {
        uint8_t *p = realloc(*buf, b.len);
        if (!p)
            return false;
        *buf = p, *cap = b.len;
    }
    memcpy(*buf, b.ptr, b.len);
    *len = b.len;
    return true;
}

static void hold(shovel *sh, uint64_t tag, amqp_bytes ex, amqp_bytes rk, amqp_bytes props,
                 amqp_bytes body)
{
    held_msg *h = &sh->held;
    if (!keep(&h->props, &h->props_cap, &h->props_len, props) ||
        !keep(&h->body, &h->body_cap, &h->body_len, body)) {
        fail(sh, "out of memory");
        return;
    }
    memcpy(h->exchange, ex.ptr, ex.len);
    memcpy(h->routing_key, rk.ptr, rk.len);
    h->exchange_len = ex.len, h->routing_key_len = rk.len;
    h->tag = tag;
    h->present = true;
    client_pause_reading(sh->src.c, true);
}

static void on_deliver(void *ctx, client *c, uint16_t ch, const client_message *m)
{
    shovel *sh = ctx;
    (void)c, (void)ch;
    if (sh->state != SHOVEL_RUNNING || sh->remaining_unacked == 0)
        return; /* left unacked: requeued when the link closes */
    const shovel_cfg *k = &sh->cfg;
    amqp_bytes props = shovel_props(sh, m->properties);
    if ((k->forward_headers || k->timestamp_header) && !props.len) {
        fail(sh, "cannot add the shovel's headers");
        return;
    }
    amqp_bytes ex = k->has_dest_queue      ? AMQP_CSTR("")
                    : k->has_dest_exchange ? AMQP_CSTR(k->dest_exchange)
                                           : m->exchange;
    amqp_bytes rk = k->has_dest_queue            ? AMQP_CSTR(k->dest_queue)
                    : k->has_dest_exchange_key   ? AMQP_CSTR(k->dest_exchange_key)
                                                 : m->routing_key;
    if (k->ack_mode == ACK_ON_CONFIRM && !ring_room(sh)) {
        hold(sh, m->delivery_tag, ex, rk, props, m->body);
        return;
    }
    uint64_t seq = client_publish(sh->dest.c, 1, ex, rk, false, props, m->body);
    if (!seq)
        hold(sh, m->delivery_tag, ex, rk, props, m->body);
    else
        published(sh, m->delivery_tag, seq);
}

static void release_held(shovel *sh)
{
    held_msg *h = &sh->held;
    if (!h->present || (sh->cfg.ack_mode == ACK_ON_CONFIRM && !ring_room(sh)))
        return;
    uint64_t seq = client_publish(sh->dest.c, 1, (amqp_bytes){h->exchange, h->exchange_len},
                                  (amqp_bytes){h->routing_key, h->routing_key_len},
                                  false, (amqp_bytes){h->props, (uint32_t)h->props_len},
                                  (amqp_bytes){h->body, (uint32_t)h->body_len});
    if (!seq)
        return;
    h->present = false;
    if (sh->src.c)
        client_pause_reading(sh->src.c, false);
    published(sh, h->tag, seq);
}

static void on_writable(void *ctx, client *c)
{
    (void)c;
    release_held(ctx);
}

static void on_confirm(void *ctx, client *c, uint16_t ch, uint64_t seq, bool multiple, bool ack)
{
    shovel *sh = ctx;
    (void)c, (void)ch;
    if (seq < sh->head_seq || seq >= sh->next_seq || !sh->src.c)
        return;
    size_t mask = sh->ring_cap - 1;
    uint64_t tag = sh->ring[seq & mask], n = 0;
    for (uint64_t s = multiple ? sh->head_seq : seq; s <= seq; s++)
        if (!sh->done[s & mask]) {
            sh->done[s & mask] = 1;
            n++;
        }
    if (ack)
        client_ack(sh->src.c, 1, tag, multiple);
    else
        client_nack(sh->src.c, 1, tag, multiple, true);
    while (sh->head_seq < sh->next_seq && sh->done[sh->head_seq & mask])
        sh->head_seq++;
    if (ack)
        sh->acked += n;
    release_held(sh);
    decr_remaining(sh, n);
}

static void on_cancelled(void *ctx, client *c, uint16_t ch, amqp_bytes tag)
{
    (void)c, (void)ch, (void)tag;
    fail(ctx, "{shutdown,restart}: the server cancelled the consumer");
}

static const client_handlers handlers = {
    .opened = on_opened,
    .closed = on_closed,
    .channel_opened = on_channel_opened,
    .channel_closed = on_channel_closed,
    .reply = on_reply,
    .deliver = on_deliver,
    .confirm = on_confirm,
    .cancelled = on_cancelled,
    .writable = on_writable,
};

/* ---- the links ------------------------------------------------------------- */

static void connect_end(shovel *sh, shovel_end *e, const client_uri *u)
{
    char name[300];
    snprintf(name, sizeof name, "Shovel %s", sh->name);
    client_options o = {.connection_name = name, .max_output = DEST_MAX_OUTPUT};
    e->step = STEP_CONNECTING;
    if (!u->local) {
        e->c = client_connect(shovels_base(sh->set), shovels_flusher(sh->set), u, &o, &handlers,
                              sh);
    } else {
        client_uri local = *u;
        if (!local.user_given)
            snprintf(local.user, sizeof local.user, "none"); /* RabbitMQ's direct user */
        transport *t = shovels_local_transport(sh->set, name);
        e->c = t ? client_attach(shovels_base(sh->set), t, &local, &o, &handlers, sh) : NULL;
    }
    if (!e->c)
        fail(sh, "out of memory");
}

void shovel_link_start(shovel *sh)
{
    if (sh->cfg.unsupported[0]) {
        shovel_set_state(sh, SHOVEL_TERMINATED, sh->cfg.unsupported);
        return;
    }
    sh->head_seq = sh->next_seq = 1;
    sh->held.present = false;
    sh->remaining = sh->remaining_unacked = -1;
    shovel_set_state(sh, SHOVEL_STARTING, NULL);
    connect_end(sh, &sh->dest, &sh->cfg.dest);
}

static void stop_end(shovel_end *e)
{
    if (!e->c)
        return;
    if (client_is_open(e->c)) {
        client_close(e->c, AMQP_REPLY_SUCCESS, "shovel stopped"); /* on_closed frees it */
        return;
    }
    client_free(e->c);
    e->c = NULL;
    e->step = STEP_IDLE;
}

void shovel_link_stop(shovel *sh)
{
    if (sh->stopping)
        return; /* under way: shovels_links_closed comes when both are gone */
    sh->stopping = true;
    stop_end(&sh->src);
    stop_end(&sh->dest);
    if (!sh->src.c && !sh->dest.c) {
        sh->stopping = false;
        shovels_links_closed(sh);
    }
}

static void autodelete(shovel *sh)
{
    if (sh->dead)
        return;
    log_msg(LOG_INFO, "shovel '%s' in vhost '%s' is stopping: it was configured to autodelete "
            "and the transfer is completed", sh->name, sh->vhost);
    shovels_autodelete(sh);
}

void shovel_link_free(shovel *sh)
{
    client_free(sh->src.c);
    client_free(sh->dest.c);
    sh->src.c = sh->dest.c = NULL;
    free(sh->ring);
    free(sh->done);
    free(sh->held.props);
    free(sh->held.body);
    free(sh->props_buf);
}
