/* Channels: deliveries and their settlement, prefetch, the basic.* and
 * channel methods. Publishing, confirms and transactions are in publish.c,
 * exchange and queue methods in decl.c.
 *
 * Unacked deliveries sit in `ua`, a ring ordered by delivery tag. Tags only
 * grow, so an ack for tag t is found by binary search (the common case, the
 * head, is checked first). Settled entries become holes (m == NULL); holes at
 * the head are popped, and the ring is compacted when holes outnumber live
 * entries, so one old unacked message cannot pin memory for later ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "chan_internal.h"

/* ---- lifecycle ---------------------------------------------------------- */

chan *chan_new(conn *c, uint16_t number)
{
    chan *ch = calloc(1, sizeof *ch);
    if (!ch)
        return NULL;
    ch->c = c;
    ch->number = number;
    ch->access.ctl = server_access(conn_server(c));
    ch->counts = loop_counters(conn_loop(c));
    return ch;
}

uint16_t chan_number(const chan *ch) { return ch->number; }
conn *chan_conn(chan *ch) { return ch->c; }
bool chan_expecting_content(const chan *ch) { return ch->content != CONTENT_IDLE; }

void chan_tx_clear(chan *ch)
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
    chan_tx_clear(ch);
    free(ch->tx_pubs);
    free(ch->tx_acks);
    chan_content_release(ch);
    stats_free(&ch->stats);
    chan_objstats_free(&ch->exchange_stats);
    chan_objstats_free(&ch->queue_stats);
    free(ch->access.memo);
    free(ch->pub_names);
    free(ch->last_queue);
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

uint64_t chan_oldest_unacked_ms(chan *ch)
{
    return ch->ua_live ? ua_at(ch, 0)->delivered_at : 0;
}

/* Index of the entry with `tag`, or -1. */
int64_t chan_ua_find(chan *ch, uint64_t tag)
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
        queue_requeue(q, it, QUEUE_RETURN_PLAIN);
        msg_unref(it.m);
        return;
    }
    unacked *e = ua_at(ch, ch->ua_count++);
    *e = (unacked){.tag = tag,
                   .delivered_at = loop_now_ms(conn_loop(ch->c)),
                   .it = it,
                   .q = q,
                   .cons = cons};
    ch->ua_live++;
    queue_hold(q);
    queue_delivery_held(q, it.delivery_count, it.m);
    if (cons)
        cons->unacked++;
}

/* Settles one entry: ack drops the message, requeue and return put it
 * back, reject dead-letters it. Queues whose consumers gained capacity are dispatched by
 * the caller. */
static void ua_settle(chan *ch, unacked *e, settle_mode mode)
{
    if (e->cons)
        e->cons->unacked--;
    queue_delivery_settled(e->q, e->it.delivery_count, e->it.m);
    if (queue_is_deleted(e->q) || mode == SETTLE_ACK) {
        if (mode == SETTLE_ACK)
            persist_settle(e->q, e->it.m, JOURNAL_ACK), chan_count(ch, e->q, STAT_ACK);
        msg_unref(e->it.m);
    } else if (mode == SETTLE_REQUEUE || mode == SETTLE_RETURN) {
        queue_requeue(e->q, e->it,
                      mode == SETTLE_REQUEUE ? QUEUE_RETURN_FAILED : QUEUE_RETURN_RETURNED);
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

/* Settles the outstanding deliveries up to index `last` in delivery order,
 * so that rejected ones are dead-lettered in the order they came (each
 * requeued one finds its own place in its queue whatever the order). */
static void settle_upto(chan *ch, int64_t last, settle_mode mode, touched *t)
{
    for (int64_t i = 0; i <= last; i++) {
        unacked *e = ua_at(ch, (uint32_t)i);
        if (e->it.m) {
            touch(t, e->q);
            ua_settle(ch, e, mode);
        }
    }
}

/* Settles `tag` (or everything up to it with `multiple`; tag 0 + multiple
 * means all). 406 for a tag that is not outstanding. */
int chan_not_supported(queue *q, const char *what, uint32_t method_id, amqp_error *err)
{
    amqp_bytes n = queue_name(q);
    return amqp_fail(err, AMQP_NOT_IMPLEMENTED, method_id,
                     "%s not supported by %s queues queue '%.*s' in vhost '%s'", what,
                     queue_type_of(q)->name, (int)n.len, (const char *)n.ptr,
                     vhost_name(queue_vhost(q)));
}

/* basic.nack and basic.reject of a delivery from a queue whose consumers
 * read without taking (a stream): RabbitMQ 3.10 closes the connection. */
static int refuse_unsettleable(chan *ch, int64_t first, int64_t last, settle_mode mode,
                               uint32_t method_id, amqp_error *err)
{
    if (mode != SETTLE_REQUEUE && mode != SETTLE_REJECT)
        return AMQP_OK;
    for (int64_t i = first; i <= last; i++) {
        unacked *e = ua_at(ch, (uint32_t)i);
        if (e->it.m && queue_type_of(e->q)->reads_without_taking)
            return chan_not_supported(e->q, "basic.nack and basic.reject", method_id, err);
    }
    return AMQP_OK;
}

int chan_settle(chan *ch, uint64_t tag, bool multiple, settle_mode mode, uint32_t method_id,
                  amqp_error *err)
{
    touched t = TOUCHED_INIT(t);
    if (multiple) {
        int64_t last = tag == 0 ? (int64_t)ch->ua_count - 1 : chan_ua_find(ch, tag);
        if (last < 0 && tag != 0)
            return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id,
                             "unknown delivery tag %llu", (unsigned long long)tag);
        if (refuse_unsettleable(ch, 0, last, mode, method_id, err) != AMQP_OK)
            return AMQP_ERROR;
        settle_upto(ch, last, mode, &t);
    } else {
        int64_t i = chan_ua_find(ch, tag);
        if (i < 0)
            return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id,
                             "unknown delivery tag %llu", (unsigned long long)tag);
        if (refuse_unsettleable(ch, i, i, mode, method_id, err) != AMQP_OK)
            return AMQP_ERROR;
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
    settle_upto(ch, (int64_t)ch->ua_count - 1, SETTLE_RETURN, &t);
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

#define DC_STACK 4096

/* Sends a delivery or get-ok; a message returned before carries its count
 * where the queue shows it (queue_shows_delivery_count). RabbitMQ 3.10's
 * quorum queues also put x-delivery-count 0 on the first basic.get
 * (`always`). The first delivery, the hot path, goes as it is. */
static void send_counted(chan *ch, const amqp_method *m, const queue *q, queue_item it,
                         bool always)
{
    if ((it.delivery_count == 0 && !always) || !queue_shows_delivery_count(q)) {
        conn_send_content(ch->c, ch->number, m, it.m);
        return;
    }
    uint8_t local[DC_STACK], *heap = NULL;
    size_t n = msg_delivery_count_properties(it.m, it.delivery_count, local, sizeof local, &heap);
    if (n)
        conn_send_content_props(ch->c, ch->number, m, it.m,
                                (amqp_bytes){heap ? heap : local, (uint32_t)n});
    else
        conn_send_content(ch->c, ch->number, m, it.m);
    free(heap);
}

/* ---- the consumer seam: a channel's consumers (chan_consumer_ops) ------ */

static bool chan_can_deliver(const consumer *cons)
{
    const chan *ch = cons->owner;
    if (conn_output_full(ch->c))
        return false;
    if (cons->no_ack)
        return true;
    if (cons->prefetch && cons->unacked >= cons->prefetch)
        return false;
    return !ch->prefetch_global || ch->ua_live < ch->prefetch_global;
}

static void chan_deliver(consumer *cons, queue *q, queue_item it)
{
    chan *ch = cons->owner;
    uint64_t tag = ++ch->delivery_tag;
    amqp_method d = {.id = AMQP_BASIC_DELIVER};
    d.basic_deliver.consumer_tag = AMQP_CSTR(cons->tag);
    d.basic_deliver.delivery_tag = tag;
    d.basic_deliver.redelivered = it.delivery_count > 0 || it.maybe_delivered;
    d.basic_deliver.exchange = msg_exchange(it.m);
    d.basic_deliver.routing_key = msg_routing_key(it.m);
    send_counted(ch, &d, q, it, false);
    chan_count(ch, q, cons->no_ack ? STAT_DELIVER_NO_ACK : STAT_DELIVER);
    if (d.basic_deliver.redelivered)
        chan_count(ch, q, STAT_REDELIVER);
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

/* ---- consumer timeouts -------------------------------------------------- *
 *
 * A delivery's timeout is its consumer's x-consumer-timeout, else its
 * queue's (x-consumer-timeout or consumer-timeout policy, the lower), else
 * consumer_timeout. The tick costs one comparison per channel: no delivery
 * can time out before `timeout_check_at`, since every delivery was made at
 * or after the oldest one and none has a timeout below the channel's floor
 * (the least over its consumers and consumer_timeout). Only past that
 * moment are the deliveries walked, and the next moment computed. */

#define NO_TIMEOUT UINT64_MAX

static uint64_t timeout_of(chan *ch, const consumer *cons, const queue *q)
{
    int64_t t = cons && cons->timeout_ms >= 0 ? cons->timeout_ms : queue_get_args(q)->consumer_timeout;
    uint64_t ms = t >= 0 ? (uint64_t)t : server_config(conn_server(ch->c))->consumer_timeout_ms;
    return ms ? ms : NO_TIMEOUT;
}

static uint64_t timeout_floor(chan *ch)
{
    uint64_t floor = server_config(conn_server(ch->c))->consumer_timeout_ms;
    floor = floor ? floor : NO_TIMEOUT;
    for (consumer *cons = ch->consumers; cons; cons = cons->ch_next) {
        uint64_t t = cons->no_ack ? NO_TIMEOUT : timeout_of(ch, cons, cons->q);
        floor = t < floor ? t : floor;
    }
    return floor;
}

/* 406 on the channel, RabbitMQ 3.x's words. Frees the channel. */
static void timed_out_close(chan *ch, uint64_t timeout)
{
    amqp_error err;
    amqp_fail(&err, AMQP_PRECONDITION_FAILED, 0,
              "delivery acknowledgement on channel %u timed out. Timeout value used: %llu ms. "
              "This timeout value can be configured, see consumers doc guide to learn more",
              ch->number, (unsigned long long)timeout);
    conn_raise(ch->c, ch->number, &err);
}

/* Cancels `cons` and puts its unacked deliveries back (RabbitMQ 4.3's
 * quorum queue behaviour): each return counts towards x-delivery-limit. */
static void timed_out_cancel(chan *ch, consumer *cons, uint64_t timeout)
{
    log_msg(LOG_WARNING,
            "consumer '%s' on channel %u has timed out waiting for a consumer acknowledgement "
            "(timeout %llu ms): cancelled, its deliveries requeued",
            cons->tag, ch->number, (unsigned long long)timeout);
    touched t = TOUCHED_INIT(t);
    for (uint32_t i = 0; i < ch->ua_count; i++) {
        unacked *e = ua_at(ch, i);
        if (e->it.m && e->cons == cons) {
            touch(&t, e->q);
            ua_settle(ch, e, SETTLE_RETURN);
        }
    }
    /* cancelled before the queues deliver again, so not to it */
    chan_cancel_consumer(ch, cons, conn_cancel_notify(ch->c));
    dispatch_touched(ch, &t);
}

static void chan_timeouts_changed(consumer *cons)
{
    chan *ch = cons->owner;
    ch->timeout_check_at = 0; /* the next tick looks at them again */
}

void chan_tick(chan *ch, uint64_t now)
{
    if (!ch->ua_live || now < ch->timeout_check_at)
        return;
    uint64_t floor = timeout_floor(ch), oldest = chan_oldest_unacked_ms(ch);
    if (floor == NO_TIMEOUT || now - oldest < floor) {
        ch->timeout_check_at = floor == NO_TIMEOUT ? NO_TIMEOUT : oldest + floor;
        return;
    }
    uint64_t next = now + floor;
    for (uint32_t i = 0; i < ch->ua_count; i++) {
        unacked *e = ua_at(ch, i);
        if (!e->it.m)
            continue;
        uint64_t t = timeout_of(ch, e->cons, e->q);
        if (t == NO_TIMEOUT || e->delivered_at + t > now) {
            if (t != NO_TIMEOUT && e->delivered_at + t < next)
                next = e->delivered_at + t;
            continue;
        }
        queue_consumer_timed_out(e->q);
        if (!e->cons || server_config(conn_server(ch->c))->consumer_timeout_close_channel) {
            timed_out_close(ch, t);
            return; /* the channel is gone */
        }
        timed_out_cancel(ch, e->cons, t);
    }
    ua_pop_holes(ch);
    ch->timeout_check_at = next;
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
    free(cons->arguments);
    free(cons);
}

static void chan_consumer_cancelled(consumer *cons)
{
    chan *ch = cons->owner;
    cons->q = NULL; /* the queue already unlinked it */
    chan_cancel_consumer(ch, cons, conn_cancel_notify(ch->c));
}

const consumer_ops chan_consumer_ops = {
    .can_take = chan_can_deliver,
    .deliver = chan_deliver,
    .cancelled = chan_consumer_cancelled,
    .timeouts_changed = chan_timeouts_changed,
};

chan *consumer_chan(const consumer *cons)
{
    return cons->ops == &chan_consumer_ops ? cons->owner : NULL;
}

/* ---- basic.* methods ---------------------------------------------------- */

static int ack_like(chan *ch, uint32_t id, uint64_t tag, bool multiple, settle_mode mode,
                    amqp_error *err)
{
    if (ch->mode == MODE_TX) {
        tx_ack a = {.tag = tag, .multiple = multiple, .mode = mode, .method_id = id};
        return chan_tx_add_ack(ch, &a, err);
    }
    return chan_settle(ch, tag, multiple, mode, id, err);
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
    settle_upto(ch, (int64_t)ch->ua_count - 1, SETTLE_RETURN, &t);
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
        journal_seq wait = chan_tx_commit(ch);
        if (wait > chan_synced_seq(ch)) { /* commit-ok once the disk has it */
            ch->commit_wait = wait;
            loop_journal_wait(conn_loop(ch->c), wait);
            return AMQP_OK;
        }
    } else {
        chan_tx_clear(ch);
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
        return chan_begin_publish(ch, &m->basic_publish, err);
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
    send_counted(ch, &g, q, it, queue_type_of(q)->get_counts_first);
    chan_count(ch, q, no_ack ? STAT_GET_NO_ACK : STAT_GET);
    if (g.basic_get_ok.redelivered)
        chan_count(ch, q, STAT_REDELIVER);
    it.delivery_count++;
    if (no_ack) {
        persist_settle(q, it.m, JOURNAL_ACK);
        msg_unref(it.m);
    } else {
        persist_delivered(q, it.m, it.delivery_count);
        ua_push(ch, tag, q, NULL, it);
    }
}

/* ---- introspection (management API) ------------------------------------ */

void chan_describe(const chan *ch, chan_info *out)
{
    uint32_t consumers = 0;
    for (const consumer *c = ch->consumers; c; c = c->ch_next)
        consumers++;
    *out = (chan_info){.number = ch->number,
                       .confirm = ch->mode == MODE_CONFIRM,
                       .transactional = ch->mode == MODE_TX,
                       .prefetch_count = ch->prefetch_consumer,
                       .global_prefetch_count = ch->prefetch_global,
                       .unacked = ch->ua_live,
                       .unconfirmed = (uint32_t)(ch->confirm_seq - ch->confirm_sent),
                       .uncommitted_msgs = (uint32_t)ch->tx_npubs,
                       .uncommitted_acks = (uint32_t)ch->tx_nacks,
                       .consumers = consumers,
                       .oldest_unacked_ms = ch->ua_live ? ch->ua[ch->ua_head].delivered_at : 0,
                       .stats = &ch->stats};
}

consumer *chan_consumers(chan *ch) { return ch->consumers; }

/* Deliveries are in delivery order, so the first live one from q is its
 * oldest here. */
uint64_t chan_oldest_unacked_from(chan *ch, const queue *q)
{
    for (uint32_t i = 0; i < ch->ua_count; i++) {
        unacked *e = ua_at(ch, i);
        if (e->it.m && e->q == q)
            return e->delivered_at;
    }
    return 0;
}
