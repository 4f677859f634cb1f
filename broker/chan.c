/* Channels: content assembly, publishing, deliveries and their settlement,
 * prefetch, publisher confirms and transactions. Exchange and queue methods
 * are in decl.c.
 *
 * Unacked deliveries sit in `ua`, a ring ordered by delivery tag. Tags only
 * grow, so an ack for tag t is found by binary search (the common case, the
 * head, is checked first). Settled entries become holes (m == NULL); holes at
 * the head are popped, and the ring is compacted when holes outnumber live
 * entries, so one old unacked message cannot pin memory for later ones.
 *
 * Content assembly: basic.publish -> AWAIT_HEADER -> AWAIT_BODY (until the
 * body is complete) -> IDLE; the connection routes header and body frames
 * here only while chan_expecting_content() is true.
 *
 * Confirms: every publish in confirm mode takes the next sequence number.
 * Messages are confirmed as soon as they are routed (in memory), so at the
 * end of each read batch one basic.ack(multiple) covers the batch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "chan_internal.h"

/* ---- lifecycle ---------------------------------------------------------- */

chan *chan_new(conn *c, uint16_t number)
{
    chan *ch = calloc(1, sizeof *ch);
    if (!ch)
        return NULL;
    ch->c = c;
    ch->number = number;
    return ch;
}

uint16_t chan_number(const chan *ch) { return ch->number; }
conn *chan_conn(chan *ch) { return ch->c; }
bool chan_expecting_content(const chan *ch) { return ch->content != CONTENT_IDLE; }

static void tx_clear(chan *ch)
{
    for (size_t i = 0; i < ch->tx_npubs; i++)
        msg_unref(ch->tx_pubs[i].m);
    ch->tx_npubs = 0;
    ch->tx_nacks = 0;
}

void chan_free(chan *ch)
{
    while (ch->consumers)
        chan_cancel_consumer(ch, ch->consumers, false);
    chan_reply_cancel(ch, (amqp_bytes){NULL, 0});
    chan_requeue_all(ch);
    free(ch->ua);
    free(ch->pending);
    tx_clear(ch);
    free(ch->tx_pubs);
    free(ch->tx_acks);
    msg_unref(ch->pub_msg);
    free(ch);
}

/* ---- unacked ring ------------------------------------------------------- */

static unacked *ua_at(chan *ch, uint32_t i) { return &ch->ua[(ch->ua_head + i) & (ch->ua_cap - 1)]; }

static bool ua_grow(chan *ch)
{
    uint32_t cap = ch->ua_cap ? ch->ua_cap * 2 : 16;
    unacked *n = malloc(cap * sizeof *n);
    if (!n)
        return false;
    for (uint32_t i = 0; i < ch->ua_count; i++)
        n[i] = *ua_at(ch, i);
    free(ch->ua);
    ch->ua = n;
    ch->ua_cap = cap;
    ch->ua_head = 0;
    return true;
}

/* Removes holes, keeping order. */
static void ua_compact(chan *ch)
{
    uint32_t live = 0;
    for (uint32_t i = 0; i < ch->ua_count; i++) {
        unacked *e = ua_at(ch, i);
        if (e->it.m)
            *ua_at(ch, live++) = *e;
    }
    ch->ua_count = live;
}

static void ua_pop_holes(chan *ch)
{
    while (ch->ua_count && !ua_at(ch, 0)->it.m) {
        ch->ua_head = (ch->ua_head + 1) & (ch->ua_cap - 1);
        ch->ua_count--;
    }
    if (ch->ua_count > 64 && ch->ua_count > 2 * ch->ua_live)
        ua_compact(ch);
}

/* Index of the entry with `tag`, or -1. */
static int64_t ua_find(chan *ch, uint64_t tag)
{
    if (!ch->ua_count)
        return -1;
    uint32_t lo = 0, hi = ch->ua_count;
    if (ua_at(ch, 0)->tag == tag)
        return 0;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint64_t t = ua_at(ch, mid)->tag;
        if (t == tag)
            return ua_at(ch, mid)->it.m ? (int64_t)mid : -1;
        if (t < tag)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static void ua_push(chan *ch, uint64_t tag, queue *q, consumer *cons, queue_item it)
{
    if (ch->ua_count == ch->ua_cap && !ua_grow(ch)) {
        /* Out of memory: the message goes back rather than being lost. */
        queue_requeue(q, it);
        msg_unref(it.m);
        return;
    }
    unacked *e = ua_at(ch, ch->ua_count++);
    *e = (unacked){.tag = tag, .it = it, .q = q, .cons = cons};
    ch->ua_live++;
    queue_hold(q);
    if (cons)
        cons->unacked++;
}

/* Settles one entry: ack drops the message, requeue puts it back, reject
 * dead-letters it. Queues whose consumers gained capacity are dispatched by
 * the caller. */
static void ua_settle(chan *ch, unacked *e, settle_mode mode)
{
    if (e->cons)
        e->cons->unacked--;
    if (queue_is_deleted(e->q) || mode == SETTLE_ACK) {
        if (mode == SETTLE_ACK)
            persist_settle(e->q, e->it.m, JOURNAL_ACK);
        msg_unref(e->it.m);
    } else if (mode == SETTLE_REQUEUE) {
        queue_requeue(e->q, e->it);
        msg_unref(e->it.m);
    } else {
        queue_dead_letter(e->q, e->it, "rejected");
    }
    queue_release(e->q);
    e->it.m = NULL;
    ch->ua_live--;
}

/* Queues that may deliver again after settlements, deduplicated. Each
 * holds a reference: settling the last delivery of a deleted queue would
 * otherwise free it before it is looked at again. */
typedef struct touched {
    queue *local[8];
    queue **q;
    int n, cap;
} touched;

#define TOUCHED_INIT(t) {.q = (t).local, .cap = 8}

static void touch(touched *t, queue *q)
{
    for (int i = 0; i < t->n; i++)
        if (t->q[i] == q)
            return;
    if (t->n == t->cap) {
        queue **grown = malloc((size_t)t->cap * 2 * sizeof *grown);
        if (!grown)
            return; /* that queue dispatches at its next publish or consume */
        memcpy(grown, t->q, (size_t)t->n * sizeof *grown);
        if (t->q != t->local)
            free(t->q);
        t->q = grown;
        t->cap *= 2;
    }
    queue_hold(q);
    t->q[t->n++] = q;
}

/* Lets the touched queues deliver again, then drops the references. With a
 * channel-wide prefetch, every queue the channel consumes from may go on. */
static void dispatch_touched(chan *ch, touched *t)
{
    for (int i = 0; i < t->n; i++) {
        if (!queue_is_deleted(t->q[i]))
            queue_dispatch(t->q[i]);
        queue_release(t->q[i]);
    }
    if (t->q != t->local)
        free(t->q);
    if (ch && ch->prefetch_global)
        chan_resume(ch);
}

/* Settles `tag` (or everything up to it with `multiple`; tag 0 + multiple
 * means all). 406 for a tag that is not outstanding. */
static int settle(chan *ch, uint64_t tag, bool multiple, settle_mode mode, uint32_t method_id,
                  amqp_error *err)
{
    touched t = TOUCHED_INIT(t);
    if (multiple) {
        int64_t last = tag == 0 ? (int64_t)ch->ua_count - 1 : ua_find(ch, tag);
        if (last < 0 && tag != 0)
            return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id,
                             "unknown delivery tag %llu", (unsigned long long)tag);
        /* Requeue back to front so the queue gets them in their old order. */
        for (int64_t i = last; i >= 0; i--) {
            unacked *e = ua_at(ch, (uint32_t)i);
            if (e->it.m) {
                touch(&t, e->q);
                ua_settle(ch, e, mode);
            }
        }
    } else {
        int64_t i = ua_find(ch, tag);
        if (i < 0)
            return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id,
                             "unknown delivery tag %llu", (unsigned long long)tag);
        unacked *e = ua_at(ch, (uint32_t)i);
        touch(&t, e->q);
        ua_settle(ch, e, mode);
    }
    ua_pop_holes(ch);
    dispatch_touched(ch, &t);
    return AMQP_OK;
}

void chan_requeue_all(chan *ch)
{
    touched t = TOUCHED_INIT(t);
    for (int64_t i = (int64_t)ch->ua_count - 1; i >= 0; i--) {
        unacked *e = ua_at(ch, (uint32_t)i);
        if (e->it.m) {
            e->cons = NULL; /* consumers are gone or going */
            touch(&t, e->q);
            ua_settle(ch, e, SETTLE_REQUEUE);
        }
    }
    ch->ua_count = 0;
    ch->ua_head = 0;
    /* other consumers of these queues may take the messages now */
    dispatch_touched(NULL, &t);
}

/* A cancelled consumer's deliveries stay on the channel, unowned. */
static void forget_consumer(chan *ch, consumer *cons)
{
    for (uint32_t i = 0; i < ch->ua_count; i++)
        if (ua_at(ch, i)->cons == cons)
            ua_at(ch, i)->cons = NULL;
}

/* ---- deliveries --------------------------------------------------------- */

bool chan_can_deliver(const chan *ch, const consumer *cons)
{
    if (conn_output_full(ch->c))
        return false;
    if (cons->no_ack)
        return true;
    if (cons->prefetch && cons->unacked >= cons->prefetch)
        return false;
    return !ch->prefetch_global || ch->ua_live < ch->prefetch_global;
}

void chan_deliver(chan *ch, consumer *cons, queue *q, queue_item it)
{
    uint64_t tag = ++ch->delivery_tag;
    amqp_method d = {.id = AMQP_BASIC_DELIVER};
    d.basic_deliver.consumer_tag = AMQP_CSTR(cons->tag);
    d.basic_deliver.delivery_tag = tag;
    d.basic_deliver.redelivered = it.delivery_count > 0 || it.maybe_delivered;
    d.basic_deliver.exchange = msg_exchange(it.m);
    d.basic_deliver.routing_key = msg_routing_key(it.m);
    conn_send_content(ch->c, ch->number, &d, it.m);
    it.delivery_count++;
    if (cons->no_ack) {
        persist_settle(q, it.m, JOURNAL_ACK);
        msg_unref(it.m);
    } else {
        persist_delivered(q, it.m, it.delivery_count);
        ua_push(ch, tag, q, cons, it);
    }
}

/* Lets every queue this channel consumes from deliver again. */
void chan_resume(chan *ch)
{
    for (consumer *cons = ch->consumers; cons; cons = cons->ch_next)
        queue_dispatch(cons->q);
}

/* ---- consumers ---------------------------------------------------------- */

consumer *chan_find_consumer(chan *ch, amqp_bytes tag)
{
    for (consumer *cons = ch->consumers; cons; cons = cons->ch_next)
        if (amqp_bytes_equal_cstr(tag, cons->tag))
            return cons;
    return NULL;
}

void chan_cancel_consumer(chan *ch, consumer *cons, bool notify)
{
    consumer **pp = &ch->consumers;
    while (*pp != cons)
        pp = &(*pp)->ch_next;
    *pp = cons->ch_next;
    forget_consumer(ch, cons);
    if (notify) {
        amqp_method m = {.id = AMQP_BASIC_CANCEL};
        m.basic_cancel.consumer_tag = AMQP_CSTR(cons->tag);
        m.basic_cancel.nowait = true;
        conn_send_method(ch->c, ch->number, &m);
    }
    queue *q = cons->q;
    cons->q = NULL;
    if (q)
        queue_remove_consumer(q, cons);
    free(cons);
}

void chan_consumer_cancelled(chan *ch, consumer *cons)
{
    cons->q = NULL; /* the queue already unlinked it */
    chan_cancel_consumer(ch, cons, conn_cancel_notify(ch->c));
}

/* ---- publishing --------------------------------------------------------- */

static int begin_publish(chan *ch, const amqp_basic_publish *p)
{
    memcpy(ch->pub_exchange, p->exchange.ptr, p->exchange.len);
    ch->pub_exchange_len = (uint8_t)p->exchange.len;
    memcpy(ch->pub_rkey, p->routing_key.ptr, p->routing_key.len);
    ch->pub_rkey_len = (uint8_t)p->routing_key.len;
    ch->pub_mandatory = p->mandatory;
    ch->pub_immediate = p->immediate;
    ch->content = CONTENT_HEADER;
    return AMQP_OK;
}

static int finish_publish(chan *ch, amqp_error *err)
{
    if (!ch->pub_msg) {
        ch->content = CONTENT_IDLE;
        uint64_t max = server_config(conn_server(ch->c))->max_message_size;
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_PUBLISH,
                         "message size %llu is larger than configured max size %llu",
                         (unsigned long long)ch->body_size, (unsigned long long)max);
    }
    amqp_basic_publish p = {
        .exchange = {ch->pub_exchange, ch->pub_exchange_len},
        .routing_key = {ch->pub_rkey, ch->pub_rkey_len},
        .mandatory = ch->pub_mandatory,
        .immediate = ch->pub_immediate,
    };
    msg *m = ch->pub_msg;
    ch->pub_msg = NULL;
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
        amqp_bytes ex = {ch->pub_exchange, ch->pub_exchange_len};
        amqp_bytes rk = {ch->pub_rkey, ch->pub_rkey_len};
        ch->pub_msg = msg_new(ex, rk, h->properties, h->body_size);
        if (!ch->pub_msg)
            return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_PUBLISH, "out of memory");
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
        ch->body_left = UINT64_MAX;
        return AMQP_OK;
    }
    ch->body_left -= n;
    if (ch->pub_msg)
        msg_append_body(ch->pub_msg, p, n);
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
static int check_properties(chan *ch, msg *m, publish_props *out, amqp_error *err)
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
    const char *user = conn_user(ch->c);
    if ((flags & AMQP_BASIC_USER_ID_FLAG) && !amqp_bytes_equal_cstr(props.user_id, user))
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_PUBLISH,
                         "user_id property set to '%.*s' but authenticated user was '%s'",
                         (int)props.user_id.len, (const char *)props.user_id.ptr, user);
    return AMQP_OK;
}

/* What enqueueing a message did. */
typedef struct routed {
    size_t queues;     /* how many queues it was routed to */
    bool refused;      /* one refused it (x-overflow reject-publish) */
    journal_seq wait;  /* journal sequence that makes it safe (0: nothing) */
} routed;

/* Routes, journals (persistent messages in durable queues) and enqueues. */
static routed route_and_enqueue(chan *ch, route_exchange *ex, msg *m, const publish_props *pp)
{
    routed r = {0};
    if (route_exchange_name(ex).len == 0 &&
        chan_reply_route(conn_vhost(ch->c), msg_routing_key(m), m)) {
        r.queues = 1;
        return r;
    }
    queue *local[16], **queues;
    r.queues = vhost_route(conn_vhost(ch->c), ex, msg_routing_key(m), pp->headers, local, 16,
                           &queues);
    r.wait = persist_publish(conn_server(ch->c), m, queues, r.queues);
    for (size_t i = 0; i < r.queues; i++)
        if (!queue_publish(queues[i], m, pp->expiration_ms)) {
            persist_settle(queues[i], m, JOURNAL_DROP);
            r.refused = true;
        }
    if (queues != local)
        free(queues);
    return r;
}

static journal_seq synced_seq(chan *ch)
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
    bool wait = r->wait && r->wait > synced_seq(ch);
    if (!r->refused && !wait)
        return;
    if (wait)
        server_journal_wait(conn_server(ch->c), r->wait);
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
static msg *without_bcc(msg *m, amqp_bytes headers)
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
    msg *copy = msg_with_properties(m, &p);
    free(buf);
    return copy;
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
    if (r.queues == 0 && p->mandatory)
        send_return(ch, m);
    if (ch->mode == MODE_CONFIRM)
        confirm_next(ch, &r);
    return AMQP_OK;
}

int chan_publish(chan *ch, const amqp_basic_publish *p, msg *m, amqp_error *err)
{
    if (p->immediate)
        return amqp_fail(err, AMQP_NOT_IMPLEMENTED, AMQP_BASIC_PUBLISH, "immediate=true");
    route_table *routes = vhost_routes(conn_vhost(ch->c));
    route_exchange *ex = route_exchange_lookup(routes, p->exchange, AMQP_BASIC_PUBLISH, err);
    if (!ex)
        return AMQP_ERROR;
    if (route_exchange_internal(ex))
        return amqp_fail(err, AMQP_ACCESS_REFUSED, AMQP_BASIC_PUBLISH,
                         "cannot publish to internal exchange '%.*s' in vhost '%s'",
                         (int)p->exchange.len, (const char *)p->exchange.ptr,
                         vhost_name(conn_vhost(ch->c)));
    publish_props pp;
    if (check_properties(ch, m, &pp, err) != AMQP_OK)
        return AMQP_ERROR;
    if (pp.direct_reply || pp.bcc) {
        msg *copy = pp.direct_reply ? chan_reply_rewrite(ch, m, err) : without_bcc(m, pp.headers);
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
    conn_send_method(ch->c, ch->number, &a);
    ch->confirm_sent = upto;
}

void chan_flush_confirms(chan *ch)
{
    journal_seq synced = synced_seq(ch);
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

static int tx_add_ack(chan *ch, const tx_ack *a, amqp_error *err)
{
    if (a->tag != 0 || !a->multiple) {
        if (ua_find(ch, a->tag) < 0)
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
static journal_seq tx_commit(chan *ch)
{
    journal_seq wait = 0;
    route_table *routes = vhost_routes(conn_vhost(ch->c));
    for (size_t i = 0; i < ch->tx_npubs; i++) {
        tx_publish *t = &ch->tx_pubs[i];
        route_exchange *ex = route_exchange_find(routes, msg_exchange(t->m));
        publish_props pp;
        amqp_error ignored;
        routed r = {0};
        if (ex && check_properties(ch, t->m, &pp, &ignored) == AMQP_OK)
            r = route_and_enqueue(ch, ex, t->m, &pp);
        if (r.wait > wait)
            wait = r.wait;
        if (!r.queues && t->mandatory)
            send_return(ch, t->m);
    }
    for (size_t i = 0; i < ch->tx_nacks; i++) {
        tx_ack *a = &ch->tx_acks[i];
        /* Acks validated when they arrived; one may have been covered since
         * by an earlier `multiple`, which is not an error at commit. */
        amqp_error ignored;
        settle(ch, a->tag, a->multiple, a->mode, a->method_id, &ignored);
    }
    tx_clear(ch);
    return wait;
}

/* ---- basic.* methods ---------------------------------------------------- */

static int ack_like(chan *ch, uint32_t id, uint64_t tag, bool multiple, settle_mode mode,
                    amqp_error *err)
{
    if (ch->mode == MODE_TX) {
        tx_ack a = {.tag = tag, .multiple = multiple, .mode = mode, .method_id = id};
        return tx_add_ack(ch, &a, err);
    }
    return settle(ch, tag, multiple, mode, id, err);
}

static settle_mode requeue_or_reject(bool requeue)
{
    return requeue ? SETTLE_REQUEUE : SETTLE_REJECT;
}

static int basic_qos(chan *ch, const amqp_basic_qos *q, amqp_error *err)
{
    if (q->prefetch_size != 0)
        return amqp_fail(err, AMQP_NOT_IMPLEMENTED, AMQP_BASIC_QOS, "prefetch_size!=0 (%u)",
                         q->prefetch_size);
    if (q->global) {
        ch->prefetch_global = q->prefetch_count;
        chan_resume(ch);
    } else {
        ch->prefetch_consumer = q->prefetch_count;
    }
    amqp_method ok = {.id = AMQP_BASIC_QOS_OK};
    conn_send_method(ch->c, ch->number, &ok);
    return AMQP_OK;
}

static int basic_recover(chan *ch, const amqp_method *m, amqp_error *err)
{
    bool requeue = m->id == AMQP_BASIC_RECOVER ? m->basic_recover.requeue
                                                : m->basic_recover_async.requeue;
    if (!requeue)
        return amqp_fail(err, AMQP_NOT_IMPLEMENTED, m->id, "requeue=false");
    touched t = TOUCHED_INIT(t);
    for (int64_t i = (int64_t)ch->ua_count - 1; i >= 0; i--) {
        unacked *e = ua_at(ch, (uint32_t)i);
        if (e->it.m) {
            touch(&t, e->q);
            ua_settle(ch, e, SETTLE_REQUEUE);
        }
    }
    ua_pop_holes(ch);
    if (m->id == AMQP_BASIC_RECOVER) {
        amqp_method ok = {.id = AMQP_BASIC_RECOVER_OK};
        conn_send_method(ch->c, ch->number, &ok);
    }
    dispatch_touched(ch, &t);
    return AMQP_OK;
}

static int select_mode(chan *ch, const amqp_method *m, amqp_error *err)
{
    bool tx = m->id == AMQP_TX_SELECT;
    if (ch->mode == (tx ? MODE_CONFIRM : MODE_TX))
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, m->id,
                         tx ? "cannot switch from confirm to tx mode"
                            : "cannot switch from tx to confirm mode");
    ch->mode = tx ? MODE_TX : MODE_CONFIRM;
    if (!tx && m->confirm_select.nowait)
        return AMQP_OK;
    amqp_method ok = {.id = tx ? AMQP_TX_SELECT_OK : AMQP_CONFIRM_SELECT_OK};
    conn_send_method(ch->c, ch->number, &ok);
    return AMQP_OK;
}

static int tx_end(chan *ch, const amqp_method *m, amqp_error *err)
{
    if (ch->mode != MODE_TX)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, m->id, "channel is not transactional");
    if (m->id == AMQP_TX_COMMIT) {
        journal_seq wait = tx_commit(ch);
        if (wait > synced_seq(ch)) { /* commit-ok once the disk has it */
            ch->commit_wait = wait;
            server_journal_wait(conn_server(ch->c), wait);
            return AMQP_OK;
        }
    } else {
        tx_clear(ch);
    }
    amqp_method ok = {.id = m->id == AMQP_TX_COMMIT ? AMQP_TX_COMMIT_OK : AMQP_TX_ROLLBACK_OK};
    conn_send_method(ch->c, ch->number, &ok);
    return AMQP_OK;
}

/* RabbitMQ 3.x refuses client-side flow control (active=false) with 540. */
static int channel_flow(chan *ch, const amqp_channel_flow *f, amqp_error *err)
{
    if (!f->active)
        return amqp_fail(err, AMQP_NOT_IMPLEMENTED, AMQP_CHANNEL_FLOW, "active=false");
    amqp_method ok = {.id = AMQP_CHANNEL_FLOW_OK};
    ok.channel_flow_ok.active = true;
    conn_send_method(ch->c, ch->number, &ok);
    return AMQP_OK;
}

int chan_handle(chan *ch, const amqp_method *m, amqp_error *err)
{
    switch (m->id) {
    case AMQP_BASIC_PUBLISH:
        return begin_publish(ch, &m->basic_publish);
    case AMQP_BASIC_ACK:
        return ack_like(ch, m->id, m->basic_ack.delivery_tag, m->basic_ack.multiple, SETTLE_ACK,
                        err);
    case AMQP_BASIC_NACK:
        return ack_like(ch, m->id, m->basic_nack.delivery_tag, m->basic_nack.multiple,
                        requeue_or_reject(m->basic_nack.requeue), err);
    case AMQP_BASIC_REJECT:
        return ack_like(ch, m->id, m->basic_reject.delivery_tag, false,
                        requeue_or_reject(m->basic_reject.requeue), err);
    case AMQP_BASIC_QOS:
        return basic_qos(ch, &m->basic_qos, err);
    case AMQP_BASIC_CONSUME:
        return chan_basic_consume(ch, &m->basic_consume, err);
    case AMQP_BASIC_CANCEL:
        return chan_basic_cancel(ch, &m->basic_cancel, err);
    case AMQP_BASIC_GET:
        return chan_basic_get(ch, &m->basic_get, err);
    case AMQP_BASIC_RECOVER:
    case AMQP_BASIC_RECOVER_ASYNC:
        return basic_recover(ch, m, err);
    case AMQP_CONFIRM_SELECT:
    case AMQP_TX_SELECT:
        return select_mode(ch, m, err);
    case AMQP_TX_COMMIT:
    case AMQP_TX_ROLLBACK:
        return tx_end(ch, m, err);
    case AMQP_CHANNEL_FLOW:
        return channel_flow(ch, &m->channel_flow, err);
    default:
        return chan_handle_declaration(ch, m, err);
    }
}

/* basic.get: the delivery is unacked (unless no_ack) with no consumer. */
void chan_deliver_get(chan *ch, queue *q, queue_item it, bool no_ack)
{
    uint64_t tag = ++ch->delivery_tag;
    amqp_method g = {.id = AMQP_BASIC_GET_OK};
    g.basic_get_ok.delivery_tag = tag;
    g.basic_get_ok.redelivered = it.delivery_count > 0 || it.maybe_delivered;
    g.basic_get_ok.exchange = msg_exchange(it.m);
    g.basic_get_ok.routing_key = msg_routing_key(it.m);
    g.basic_get_ok.message_count = queue_ready_count(q);
    conn_send_content(ch->c, ch->number, &g, it.m);
    it.delivery_count++;
    if (no_ack) {
        persist_settle(q, it.m, JOURNAL_ACK);
        msg_unref(it.m);
    } else {
        persist_delivered(q, it.m, it.delivery_count);
        ua_push(ch, tag, q, NULL, it);
    }
}
