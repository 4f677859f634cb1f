/* Publishing on a channel: content assembly, property checks, routing and
 * enqueueing, mandatory returns, publisher confirms, and transactions.
 *
 * Content assembly: basic.publish -> AWAIT_HEADER -> AWAIT_BODY (until the
 * body is complete) -> IDLE; the connection routes header and body frames
 * here only while chan_expecting_content() is true.
 *
 * Memory for a body is what has arrived, not what the header declares: a
 * body that fits one frame gets its room with the message (one allocation,
 * the common case) while the connection's unfinished bodies stay under
 * 4 MiB (conn_content_reserve) -- all a client can make us reserve
 * ahead of its bytes -- and any other body grows as its frames come
 * (msg_new_incoming).
 * The message being assembled is reported to the connection as it grows
 * (pub_held), and released when it is complete or dropped; a connection
 * past its share of the broker's budget for unfinished bodies gets a 506.
 *
 * Confirms: every publish in confirm mode takes the next sequence number.
 * A message is confirmed once routed -- and, when the journal holds it,
 * once its records are synced -- so at the end of each read batch one
 * basic.ack(multiple) covers what is ready.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "chan_internal.h"

/* ---- publishing --------------------------------------------------------- */

#define MSG_HEADER_ESTIMATE 64

/* Reports pub_msg's current size to the connection. */
static int content_grew(chan *ch, amqp_error *err)
{
    uint64_t now = msg_memory(ch->pub_msg);
    int64_t delta = (int64_t)(now - ch->pub_held);
    ch->pub_held = now;
    return delta ? conn_content_held(ch->c, delta, err) : AMQP_OK;
}

/* The message is complete or dropped: no longer unfinished. Returns it. */
static msg *content_done(chan *ch)
{
    msg *m = ch->pub_msg;
    if (ch->pub_held)
        conn_content_held(ch->c, -(int64_t)ch->pub_held, NULL);
    ch->pub_held = 0;
    ch->pub_msg = NULL;
    return m;
}

void chan_content_release(chan *ch)
{
    msg_unref(content_done(ch));
}

/* The names of the publish being assembled, kept from basic.publish to the
 * header; allocated at the channel's first publish (idle and consuming
 * channels do not carry them). */
struct chan_pub_names {
    uint8_t exchange_len, rkey_len;
    uint8_t exchange[255], rkey[255];
};

int chan_begin_publish(chan *ch, const amqp_basic_publish *p, amqp_error *err)
{
    struct chan_pub_names *n = ch->pub_names;
    if (!n && !(n = ch->pub_names = malloc(sizeof *n)))
        return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_PUBLISH, "out of memory");
    memcpy(n->exchange, p->exchange.ptr, p->exchange.len);
    n->exchange_len = (uint8_t)p->exchange.len;
    memcpy(n->rkey, p->routing_key.ptr, p->routing_key.len);
    n->rkey_len = (uint8_t)p->routing_key.len;
    ch->pub_mandatory = p->mandatory;
    ch->pub_immediate = p->immediate;
    ch->content = CONTENT_HEADER;
    return AMQP_OK;
}

/* A complete basic.publish, counted before any check as RabbitMQ's
 * rabbit_channel does (immediate=true is refused before it counts); a
 * transaction counts as expecting a confirmation there. */
static void count_received(chan *ch)
{
    server_counts *k = ch->counts;
    k->messages_received++;
    k->messages_received_confirm += ch->mode != MODE_NONE;
}

static int finish_publish(chan *ch, amqp_error *err)
{
    if (!ch->pub_immediate)
        count_received(ch);
    if (!ch->pub_msg) {
        ch->content = CONTENT_IDLE;
        uint64_t max = server_config(conn_server(ch->c))->max_message_size;
        loop_refused(conn_loop(ch->c), REFUSED_MESSAGE_SIZE, "channel %u of connection %s: "
                     "message of %llu bytes over max_message_size (%llu) refused", ch->number,
                     conn_peer_name(ch->c), (unsigned long long)ch->body_size,
                     (unsigned long long)max);
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_PUBLISH,
                         "message size %llu is larger than configured max size %llu",
                         (unsigned long long)ch->body_size, (unsigned long long)max);
    }
    amqp_basic_publish p = {
        .exchange = {ch->pub_names->exchange, ch->pub_names->exchange_len},
        .routing_key = {ch->pub_names->rkey, ch->pub_names->rkey_len},
        .mandatory = ch->pub_mandatory,
        .immediate = ch->pub_immediate,
    };
    msg *m = content_done(ch);
    ch->content = CONTENT_IDLE;
    int r = chan_publish(ch, &p, m, err);
    msg_unref(m);
    return r;
}

/* The error for a frame that is not the content this channel waits for,
 * as RabbitMQ's command assembler words it. */
int chan_content_expected(chan *ch, amqp_error *err)
{
    if (ch->content == CONTENT_HEADER)
        return amqp_fail(err, AMQP_UNEXPECTED_FRAME, AMQP_BASIC_PUBLISH,
                         "expected content header for class 60, got non content header frame "
                         "instead");
    return amqp_fail(err, AMQP_UNEXPECTED_FRAME, AMQP_BASIC_PUBLISH,
                     "expected content body, got non content body frame instead");
}

/* A body over max_message_size is not stored: its frames are counted and
 * dropped, and the 406 comes once it is complete, as RabbitMQ checks the
 * size of the whole message. */
int chan_content_header(chan *ch, const amqp_content_header *h, amqp_error *err)
{
    if (ch->content != CONTENT_HEADER)
        return chan_content_expected(ch, err);
    ch->body_size = ch->body_left = h->body_size;
    ch->content = CONTENT_BODY;
    if (h->body_size <= server_config(conn_server(ch->c))->max_message_size) {
        amqp_bytes ex = {ch->pub_names->exchange, ch->pub_names->exchange_len};
        amqp_bytes rk = {ch->pub_names->rkey, ch->pub_names->rkey_len};
        /* reserved: about the message's block (header, names, properties, body) */
        uint64_t extra = MSG_HEADER_ESTIMATE + ex.len + rk.len + h->properties.len;
        bool one_frame = h->body_size && conn_content_reserve(ch->c, h->body_size, extra);
        ch->pub_held = one_frame ? h->body_size + extra : 0;
        ch->pub_msg = msg_new_incoming(loop_msgs(conn_loop(ch->c)), ex, rk, h->properties, h->body_size, one_frame);
        if (!ch->pub_msg)
            return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_PUBLISH, "out of memory");
        if (h->body_size && !one_frame && content_grew(ch, err) != AMQP_OK)
            return AMQP_ERROR;
    }
    return h->body_size == 0 ? finish_publish(ch, err) : AMQP_OK;
}

/* A body frame longer than what is left never completes the message, as in
 * RabbitMQ: the channel keeps waiting, and the next method is unexpected. */
int chan_content_body(chan *ch, const uint8_t *p, size_t n, amqp_error *err)
{
    if (ch->content != CONTENT_BODY)
        return chan_content_expected(ch, err);
    if (n > ch->body_left) {
        chan_content_release(ch); /* it can never complete: hold nothing for it */
        ch->body_left = UINT64_MAX;
        return AMQP_OK;
    }
    ch->body_left -= n;
    if (ch->pub_msg) {
        if (!msg_append_body(ch->pub_msg, p, n))
            return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_PUBLISH, "out of memory");
        if (ch->body_left && content_grew(ch, err) != AMQP_OK)
            return AMQP_ERROR;
    }
    return ch->body_left == 0 ? finish_publish(ch, err) : AMQP_OK;
}

static void send_return(chan *ch, msg *m)
{
    amqp_method r = {.id = AMQP_BASIC_RETURN};
    r.basic_return.reply_code = AMQP_NO_ROUTE;
    r.basic_return.reply_text = AMQP_CSTR("NO_ROUTE");
    r.basic_return.exchange = msg_exchange(m);
    r.basic_return.routing_key = msg_routing_key(m);
    conn_send_content(ch->c, ch->number, &r, m);
}

/* What publishing needs from the properties. */
typedef struct publish_props {
    amqp_bytes headers;    /* for headers exchanges */
    int64_t expiration_ms; /* per-message TTL, -1 = none */
    bool direct_reply;     /* reply_to is amq.rabbitmq.reply-to */
    bool bcc;              /* a BCC header, to be removed before delivery */
} publish_props;

/* RabbitMQ's expiration: a string of decimal digits (milliseconds). */
static int parse_expiration(amqp_bytes s, int64_t *out, amqp_error *err)
{
    int64_t v = 0;
    for (uint32_t i = 0; i < s.len; i++) {
        if (s.ptr[i] < '0' || s.ptr[i] > '9' || v > INT64_MAX / 10 - 10)
            return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_PUBLISH,
                             "invalid expiration '%.*s': %s", (int)s.len, (const char *)s.ptr,
                             i ? "{leftover_string}" : "no_integer");
        v = v * 10 + (s.ptr[i] - '0');
    }
    if (s.len == 0)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_PUBLISH,
                         "invalid expiration '': no_integer");
    *out = v;
    return AMQP_OK;
}

/* Decodes the properties publishing acts on (only when their flags are set,
 * so the common message costs two byte reads) and checks user-id. */
static int check_properties(const char *user, msg *m, publish_props *out, amqp_error *err)
{
    amqp_bytes raw = msg_properties(m);
    *out = (publish_props){.expiration_ms = -1};
    uint16_t flags = raw.len < 2 ? 0 : (uint16_t)(raw.ptr[0] << 8 | raw.ptr[1]);
    if (!(flags & (AMQP_BASIC_HEADERS_FLAG | AMQP_BASIC_USER_ID_FLAG |
                   AMQP_BASIC_EXPIRATION_FLAG | AMQP_BASIC_REPLY_TO_FLAG)))
        return AMQP_OK;
    amqp_basic_properties props;
    if (amqp_properties_decode(raw, &props, err) != AMQP_OK)
        return AMQP_ERROR;
    out->headers = props.headers;
    out->direct_reply = chan_is_reply_queue(props.reply_to);
    amqp_field f;
    out->bcc = amqp_table_get(props.headers, "BCC", &f);
    if ((flags & AMQP_BASIC_EXPIRATION_FLAG) &&
        parse_expiration(props.expiration, &out->expiration_ms, err) != AMQP_OK)
        return AMQP_ERROR;
    if ((flags & AMQP_BASIC_USER_ID_FLAG) && !amqp_bytes_equal_cstr(props.user_id, user))
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_PUBLISH,
                         "user_id property set to '%.*s' but authenticated user was '%s'",
                         (int)props.user_id.len, (const char *)props.user_id.ptr, user);
    return AMQP_OK;
}

/* What enqueueing a message did. */
typedef vhost_routed routed;

/* Routes, journals (persistent messages in durable queues) and enqueues. */
static routed route_and_enqueue(chan *ch, route_exchange *ex, msg *m, const publish_props *pp)
{
    if (route_exchange_name(ex).len == 0 &&
        chan_reply_route(conn_vhost(ch->c), msg_routing_key(m), m))
        return (routed){.queues = 1};
    return vhost_publish(conn_vhost(ch->c), ex, m, pp->headers, pp->expiration_ms);
}

vhost_routed vhost_publish(vhost *v, route_exchange *ex, msg *m, amqp_bytes headers,
                           int64_t expiration_ms)
{
    vhost_routed r = {0};
    queue *local[16], **queues;
    /* a duplicate goes nowhere: unroutable, confirmed (dedup.c) */
    if (__builtin_expect(route_exchange_extra(ex) != NULL, 0) &&
        dedup_exchange_duplicate(v, ex, headers))
        queues = local;
    else
        r.queues = vhost_route(v, ex, msg_routing_key(m), headers, m, local, 16, &queues);
    r.wait = persist_publish(vhost_server(v), m, queues, r.queues);
    size_t holds; /* x-delayed-message exchanges that held it (queue/xdelay.c) */
    route_held(vhost_routes(v), &holds);
    if (__builtin_expect(holds != 0, 0)) {
        bool held_ok;
        journal_seq held = xdelay_hold_routed(v, m, &held_ok);
        r.wait = held > r.wait ? held : r.wait;
        r.refused |= !held_ok;
    }
    for (size_t i = 0; i < r.queues; i++) {
        if (!queue_publish(queues[i], m, expiration_ms)) {
            persist_settle(queues[i], m, JOURNAL_DROP);
            r.refused = true;
        }
        journal_seq w = queue_stream_pending(queues[i]); /* a stream's own commit */
        if (w > r.wait)
            r.wait = w;
    }
    if (queues != local)
        free(queues);
    stats *xs = stats_of_exchange(ex);
    if (xs)
        xs->n[STAT_PUBLISH_IN]++, xs->n[STAT_PUBLISH_OUT] += r.queues;
    vhost_stats(v)->n[STAT_PUBLISH]++;
    loop_counters(vhost_loop(v))->messages_routed += r.queues;
    return r;
}

journal_seq chan_synced_seq(chan *ch)
{
    journal *j = server_journal(conn_server(ch->c));
    return j ? journal_synced(j) : UINT64_MAX;
}

/* Publisher confirms: a publish that must wait for the journal, or be
 * nacked, is remembered in `pending`; the others are acked in batches by
 * chan_flush_confirms, each ack covering everything before the first
 * pending one. */
static void confirm_next(chan *ch, const routed *r)
{
    uint64_t seq = ++ch->confirm_seq;
    bool wait = r->wait && r->wait > chan_synced_seq(ch);
    if (!r->refused && !wait)
        return;
    if (wait)
        loop_journal_wait(conn_loop(ch->c), r->wait);
    if (ch->pending_n == ch->pending_cap) {
        uint32_t cap = ch->pending_cap ? ch->pending_cap * 2 : 64;
        pending_confirm *n = malloc(cap * sizeof *n);
        if (!n)
            return; /* acked with the batch: better late than a stuck channel */
        for (uint32_t i = 0; i < ch->pending_n; i++)
            n[i] = ch->pending[(ch->pending_head + i) & (ch->pending_cap - 1)];
        free(ch->pending);
        ch->pending = n;
        ch->pending_cap = cap;
        ch->pending_head = 0;
    }
    ch->pending[(ch->pending_head + ch->pending_n++) & (ch->pending_cap - 1)] =
        (pending_confirm){seq, r->refused ? 0 : r->wait};
}

/* The message as delivered: BCC recipients are not shown (RabbitMQ's
 * sender-selected distribution). `headers` still routes with BCC. */
static msg *without_bcc(msg_pool *pool, msg *m, amqp_bytes headers)
{
    amqp_basic_properties p;
    if (amqp_properties_decode(msg_properties(m), &p, NULL) != AMQP_OK)
        return NULL;
    uint8_t *buf = malloc(headers.len + 4);
    if (!buf)
        return NULL;
    amqp_writer w;
    amqp_writer_init(&w, buf, headers.len + 4);
    size_t mark = amqp_table_begin(&w);
    amqp_put_entries_except(&w, headers, "BCC");
    amqp_table_end(&w, mark);
    p.headers = (amqp_bytes){buf + 4, (uint32_t)w.len - 4};
    msg *copy = msg_with_properties(pool, m, &p);
    free(buf);
    return copy;
}

/* A message no queue took: returned (mandatory) or dropped. */
static void count_unroutable(chan *ch, uint64_t *per_exchange, bool mandatory)
{
    stat_id f = mandatory ? STAT_RETURN_UNROUTABLE : STAT_DROP_UNROUTABLE;
    ch->stats.n[f]++;
    if (per_exchange)
        per_exchange[f]++;
    vhost_stats(conn_vhost(ch->c))->n[f]++;
    server_counts *k = ch->counts;
    if (mandatory)
        k->messages_returned++;
    else
        k->messages_dropped++;
}

/* A publish routed to `queues` queues, on the channel and its exchange
 * (`per_exchange`, NULL on out-of-memory). */
static void count_publish(chan *ch, uint64_t *per_exchange, size_t queues, bool mandatory)
{
    ch->stats.n[STAT_PUBLISH]++;
    if (per_exchange)
        per_exchange[STAT_PUBLISH]++;
    if (queues == 0)
        count_unroutable(ch, per_exchange, mandatory);
}

/* Publishes a message whose properties passed the checks. */
static int publish_checked(chan *ch, const amqp_basic_publish *p, route_exchange *ex, msg *m,
                           const publish_props *pp, amqp_error *err)
{
    if (ch->mode == MODE_TX) {
        tx_publish t = {.m = m, .mandatory = p->mandatory, .expiration_ms = pp->expiration_ms};
        return chan_tx_add_publish(ch, &t, err);
    }
    routed r = route_and_enqueue(ch, ex, m, pp);
    uint64_t *per_exchange = chan_publish_counts(ch, p->exchange);
    count_publish(ch, per_exchange, r.queues, p->mandatory);
    if (r.queues == 0 && p->mandatory)
        send_return(ch, m);
    if (ch->mode != MODE_CONFIRM)
        return AMQP_OK;
    confirm_next(ch, &r);
    /* per exchange, a confirm counts when it is decided, not when its ack
     * leaves: the ack does not say which exchanges it covers */
    if (per_exchange && !r.refused)
        per_exchange[STAT_CONFIRM]++;
    return AMQP_OK;
}

/* ---- permissions ------------------------------------------------------- */

/* write on the exchange (before it is looked up, as RabbitMQ checks), with
 * the last allowed exchange cached: the common publisher sends to one
 * exchange, so it costs a generation compare and a memcmp per message. */
static int write_permitted(chan *ch, amqp_bytes exchange, amqp_error *err)
{
    chan_access_cache *a = chan_access(ch);
    if (!a->memo)
        a->memo = calloc(1, sizeof *a->memo); /* without it, every publish is checked */
    chan_publish_memo *c = a->memo;
    if (c && c->write_ok && c->write_len == exchange.len &&
        memcmp(c->write_exchange, exchange.ptr, exchange.len) == 0)
        return AMQP_OK;
    if (chan_permitted(ch, ACCESS_WRITE, "exchange", exchange, AMQP_BASIC_PUBLISH, err) !=
        AMQP_OK)
        return AMQP_ERROR;
    if (!c)
        return AMQP_OK;
    c->write_ok = true;
    c->topic_ok = false; /* it was for another exchange */
    c->stats_slot = 0;
    c->ex = NULL;
    c->write_len = (uint8_t)exchange.len;
    memcpy(c->write_exchange, exchange.ptr, exchange.len);
    return AMQP_OK;
}

/* Topic write on the routing key (after the internal-exchange check), with
 * the last allowed key on the cached exchange remembered. */
static int topic_write_permitted(chan *ch, const route_exchange *ex, amqp_bytes key,
                                 amqp_error *err)
{
    const chan_access_cache *a = &ch->access; /* write_permitted just refreshed it */
    chan_publish_memo *c = a->memo;
    if (!a->topics || route_exchange_type(ex) != ROUTE_TOPIC ||
        (c && c->topic_ok && c->topic_len == key.len &&
         memcmp(c->topic_key, key.ptr, key.len) == 0))
        return AMQP_OK;
    if (chan_topic_permitted(ch, ex, ACCESS_WRITE, key, AMQP_BASIC_PUBLISH, err) != AMQP_OK)
        return AMQP_ERROR;
    if (!c)
        return AMQP_OK;
    c->topic_ok = true;
    c->topic_len = (uint8_t)key.len;
    memcpy(c->topic_key, key.ptr, key.len);
    return AMQP_OK;
}

/* The exchange a publish names, after write_permitted: the memo's when no
 * exchange was added or removed since it was found (the common publisher
 * sends to one exchange; a lookup is a hash of the name and a probe). */
static route_exchange *publish_exchange(chan *ch, amqp_bytes name, amqp_error *err)
{
    route_table *routes = vhost_routes(conn_vhost(ch->c));
    chan_publish_memo *c = ch->access.memo; /* write_exchange is `name` now */
    uint64_t version = route_exchanges_version(routes);
    if (c && c->ex && c->ex_version == version)
        return c->ex;
    route_exchange *ex = route_exchange_lookup(routes, name, AMQP_BASIC_PUBLISH, err);
    if (c && ex) {
        c->ex = ex;
        c->ex_version = version;
    }
    return ex;
}

/* RabbitMQ's order: immediate, write permission, the exchange (404),
 * internal (403), topic permission, then the properties. */
int chan_publish(chan *ch, const amqp_basic_publish *p, msg *m, amqp_error *err)
{
    if (p->immediate)
        return amqp_fail(err, AMQP_NOT_IMPLEMENTED, AMQP_BASIC_PUBLISH, "immediate=true");
    if (write_permitted(ch, p->exchange, err) != AMQP_OK)
        return AMQP_ERROR;
    route_exchange *ex = publish_exchange(ch, p->exchange, err);
    if (!ex)
        return AMQP_ERROR;
    if (route_exchange_internal(ex))
        return amqp_fail(err, AMQP_ACCESS_REFUSED, AMQP_BASIC_PUBLISH,
                         "cannot publish to internal exchange '%.*s' in vhost '%s'",
                         (int)p->exchange.len, (const char *)p->exchange.ptr,
                         vhost_name(conn_vhost(ch->c)));
    if (topic_write_permitted(ch, ex, p->routing_key, err) != AMQP_OK)
        return AMQP_ERROR;
    publish_props pp;
    if (check_properties(conn_user(ch->c), m, &pp, err) != AMQP_OK)
        return AMQP_ERROR;
    if (pp.direct_reply || pp.bcc) {
        msg *copy = pp.direct_reply ? chan_reply_rewrite(ch, m, err)
                                      : without_bcc(loop_msgs(conn_loop(ch->c)), m, pp.headers);
        if (!copy)
            return AMQP_ERROR;
        int r = publish_checked(ch, p, ex, copy, &pp, err);
        msg_unref(copy);
        return r;
    }
    return publish_checked(ch, p, ex, m, &pp, err);
}

/* Acks everything not yet confirmed up to `upto`, in one frame. */
static void ack_upto(chan *ch, uint64_t upto)
{
    if (upto <= ch->confirm_sent)
        return;
    amqp_method a = {.id = AMQP_BASIC_ACK};
    a.basic_ack.delivery_tag = upto;
    a.basic_ack.multiple = upto - ch->confirm_sent > 1;
    ch->stats.n[STAT_CONFIRM] += upto - ch->confirm_sent;
    vhost_stats(conn_vhost(ch->c))->n[STAT_CONFIRM] += upto - ch->confirm_sent;
    ch->counts->messages_confirmed += upto - ch->confirm_sent;
    conn_send_method(ch->c, ch->number, &a);
    ch->confirm_sent = upto;
}

void chan_flush_confirms(chan *ch)
{
    journal_seq synced = chan_synced_seq(ch);
    while (ch->pending_n) {
        pending_confirm *p = &ch->pending[ch->pending_head];
        if (p->wait > synced) {
            ack_upto(ch, p->seq - 1);
            break;
        }
        if (p->wait == 0) { /* refused: nacked on its own, after the acks before it */
            ack_upto(ch, p->seq - 1);
            amqp_method n = {.id = AMQP_BASIC_NACK};
            n.basic_nack.delivery_tag = p->seq;
            n.basic_nack.requeue = true; /* as RabbitMQ sends it */
            conn_send_method(ch->c, ch->number, &n);
            ch->confirm_sent = p->seq;
        }
        ch->pending_head = (ch->pending_head + 1) & (ch->pending_cap - 1);
        ch->pending_n--;
    }
    if (!ch->pending_n)
        ack_upto(ch, ch->confirm_seq);
    if (ch->commit_wait && ch->commit_wait <= synced) {
        ch->commit_wait = 0;
        amqp_method ok = {.id = AMQP_TX_COMMIT_OK};
        conn_send_method(ch->c, ch->number, &ok);
    }
}

/* ---- transactions ------------------------------------------------------- */

int chan_tx_add_publish(chan *ch, const tx_publish *p, amqp_error *err)
{
    if (ch->tx_npubs == ch->tx_pubs_cap) {
        size_t cap = ch->tx_pubs_cap ? ch->tx_pubs_cap * 2 : 16;
        tx_publish *n = realloc(ch->tx_pubs, cap * sizeof *n);
        if (!n)
            return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_PUBLISH, "out of memory");
        ch->tx_pubs = n;
        ch->tx_pubs_cap = cap;
    }
    msg_ref(p->m);
    ch->tx_pubs[ch->tx_npubs++] = *p;
    return AMQP_OK;
}

int chan_tx_add_ack(chan *ch, const tx_ack *a, amqp_error *err)
{
    if (a->tag != 0 || !a->multiple) {
        if (chan_ua_find(ch, a->tag) < 0)
            return amqp_fail(err, AMQP_PRECONDITION_FAILED, a->method_id,
                             "unknown delivery tag %llu", (unsigned long long)a->tag);
    }
    if (ch->tx_nacks == ch->tx_acks_cap) {
        size_t cap = ch->tx_acks_cap ? ch->tx_acks_cap * 2 : 16;
        tx_ack *n = realloc(ch->tx_acks, cap * sizeof *n);
        if (!n)
            return amqp_fail(err, AMQP_INTERNAL_ERROR, a->method_id, "out of memory");
        ch->tx_acks = n;
        ch->tx_acks_cap = cap;
    }
    ch->tx_acks[ch->tx_nacks++] = *a;
    return AMQP_OK;
}

/* Publishes and settles what the transaction holds, in order. Messages
 * whose exchange went away meanwhile are unroutable. Returns the journal
 * sequence commit-ok must wait for (0: none). */
journal_seq chan_tx_commit(chan *ch)
{
    journal_seq wait = 0;
    route_table *routes = vhost_routes(conn_vhost(ch->c));
    for (size_t i = 0; i < ch->tx_npubs; i++) {
        tx_publish *t = &ch->tx_pubs[i];
        route_exchange *ex = route_exchange_find(routes, msg_exchange(t->m));
        publish_props pp;
        amqp_error ignored;
        routed r = {0};
        if (ex && check_properties(conn_user(ch->c), t->m, &pp, &ignored) == AMQP_OK)
            r = route_and_enqueue(ch, ex, t->m, &pp);
        if (r.wait > wait)
            wait = r.wait;
        count_publish(ch, chan_exchange_counts(ch, msg_exchange(t->m)), r.queues, t->mandatory);
        if (!r.queues && t->mandatory)
            send_return(ch, t->m);
    }
    for (size_t i = 0; i < ch->tx_nacks; i++) {
        tx_ack *a = &ch->tx_acks[i];
        /* Acks validated when they arrived; one may have been covered since
         * by an earlier `multiple`, which is not an error at commit. */
        amqp_error ignored;
        chan_settle(ch, a->tag, a->multiple, a->mode, a->method_id, &ignored);
    }
    chan_tx_clear(ch);
    return wait;
}

/* ---- the management API's publish -------------------------------------- */

/* RabbitMQ's management publish is a mandatory publish on a confirm
 * channel: received, expecting a confirmation, returned when no queue took
 * it, confirmed unless a queue refused it. */
static void count_admin_publish(server_counts *k, const vhost_routed *vr)
{
    k->messages_received++;
    k->messages_received_confirm++;
    k->messages_returned += vr->queues == 0;
    k->messages_confirmed += !vr->refused;
}

int admin_publish(vhost *v, const char *user, amqp_bytes exchange, amqp_bytes key,
                  amqp_bytes props, amqp_bytes body, bool *routed_out, amqp_error *err)
{
    route_exchange *ex = route_exchange_lookup(vhost_routes(v), exchange, AMQP_BASIC_PUBLISH, err);
    if (!ex)
        return AMQP_ERROR;
    if (route_exchange_internal(ex))
        return amqp_fail(err, AMQP_ACCESS_REFUSED, AMQP_BASIC_PUBLISH,
                         "cannot publish to internal exchange '%.*s' in vhost '%s'",
                         (int)exchange.len, (const char *)exchange.ptr, vhost_name(v));
    msg_pool *pool = loop_msgs(vhost_loop(v));
    msg *m = msg_new(pool, exchange, key, props, body.len);
    if (!m)
        return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_PUBLISH, "out of memory");
    msg_append_body(m, body.ptr, body.len);
    publish_props pp;
    int r = check_properties(user, m, &pp, err);
    msg *sent = m;
    if (r == AMQP_OK && pp.bcc && !(sent = without_bcc(pool, m, pp.headers)))
        r = amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_PUBLISH, "out of memory");
    if (r == AMQP_OK) {
        vhost_routed vr = vhost_publish(v, ex, sent, pp.headers, pp.expiration_ms);
        *routed_out = vr.queues > 0;
        if (vr.queues == 0)
            vhost_stats(v)->n[STAT_DROP_UNROUTABLE]++;
        count_admin_publish(loop_counters(vhost_loop(v)), &vr);
    }
    if (sent != m)
        msg_unref(sent);
    msg_unref(m);
    return r;
}
