/* A channel's counters per exchange it publishes to and per queue it takes
 * messages from: RabbitMQ's channel_exchange_metrics and
 * channel_queue_metrics, the {vhost, exchange} and {vhost, queue} labels of
 * /metrics/per-object's channel families.
 *
 * Each kind is a small array of slots in first-use order, plus the index
 * of the slot used last: a channel that takes from one queue finds its slot
 * with one compare of the queue's pointer (inline, chan_queue_counts); a
 * queue slot holds a reference on its queue (queue_hold), so that pointer
 * cannot be reused by another queue while the slot exists. Exchanges are
 * keyed by name (an exchange deleted and declared again is the same series,
 * as RabbitMQ keys them), and a publish finds its slot through the
 * channel's publish memo, which already compares the exchange's name with
 * the last one allowed (chan_publish_counts). Other slots are found by a
 * linear scan; a new one is allocated only when the channel meets a new
 * exchange or queue, never per message.
 *
 * At most CHAN_OBJECT_STATS_MAX slots of each kind, so a client touching
 * thousands of queues on one channel cannot grow it without bound: a full
 * array first reuses the slot of a deleted queue, else the slots in turn
 * (those counts leave the per-object view; the channel's totals keep them).
 * Deleted queues' slots are left out when listed, as RabbitMQ drops a
 * queue's channel metrics when the queue goes.
 */
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "chan_internal.h"

static void slot_clear(chan_objslot *s)
{
    if (s->q)
        queue_release(s->q);
    free(s->name);
    memset(s, 0, sizeof *s);
}

static int32_t reusable(const chan_objstats *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (s->slots[i].q && queue_is_deleted(s->slots[i].q))
            return (int32_t)i;
    return -1;
}

/* A fresh (zeroed) slot, or NULL on out-of-memory; s->last points at it.
 * The publish memo forgets a slot reused for another exchange. */
static chan_objslot *add_slot(chan *ch, chan_objstats *s)
{
    if (s->n == s->cap && s->cap < CHAN_OBJECT_STATS_MAX) {
        uint32_t cap = s->cap ? s->cap * 2 : 2;
        cap = cap < CHAN_OBJECT_STATS_MAX ? cap : CHAN_OBJECT_STATS_MAX;
        chan_objslot *grown = realloc(s->slots, cap * sizeof *grown);
        if (!grown)
            return NULL;
        s->slots = grown, s->cap = (uint16_t)cap;
    }
    if (s->n < s->cap) {
        s->last = s->n++;
        memset(&s->slots[s->last], 0, sizeof s->slots[0]);
        return &s->slots[s->last];
    }
    int32_t dead = reusable(s);
    s->last = dead >= 0 ? (uint16_t)dead : s->victim;
    if (dead < 0)
        s->victim = (uint16_t)((s->victim + 1) % s->n);
    slot_clear(&s->slots[s->last]);
    if (ch->access.memo && ch->access.memo->stats_slot == (uint32_t)s->last + 1)
        ch->access.memo->stats_slot = 0;
    return &s->slots[s->last];
}

uint64_t *chan_queue_counts_find(chan *ch, queue *q)
{
    chan_objstats *s = &ch->queue_stats;
    for (uint32_t i = 0; i < s->n; i++)
        if (s->slots[i].q == q) {
            s->last = i;
            return s->slots[i].n;
        }
    chan_objslot *slot = add_slot(ch, s);
    if (!slot)
        return NULL;
    queue_hold(q);
    slot->q = q;
    return slot->n;
}

static bool named(const chan_objslot *slot, amqp_bytes name)
{
    return slot->len == name.len && memcmp(slot->name, name.ptr, name.len) == 0;
}

uint64_t *chan_exchange_counts(chan *ch, amqp_bytes exchange)
{
    chan_objstats *s = &ch->exchange_stats;
    if (s->n && named(&s->slots[s->last], exchange))
        return s->slots[s->last].n;
    for (uint32_t i = 0; i < s->n; i++)
        if (named(&s->slots[i], exchange)) {
            s->last = i;
            return s->slots[i].n;
        }
    uint8_t *name = malloc(exchange.len ? exchange.len : 1);
    chan_objslot *slot = name ? add_slot(ch, s) : NULL;
    if (!slot) {
        free(name);
        return NULL;
    }
    memcpy(name, exchange.ptr, exchange.len);
    slot->name = name, slot->len = exchange.len;
    return slot->n;
}

uint64_t *chan_publish_counts(chan *ch, amqp_bytes exchange)
{
    chan_publish_memo *memo = ch->access.memo;
    if (memo && memo->write_ok && memo->stats_slot)
        return ch->exchange_stats.slots[memo->stats_slot - 1].n;
    uint64_t *n = chan_exchange_counts(ch, exchange);
    if (memo && memo->write_ok && n)
        memo->stats_slot = ch->exchange_stats.last + 1;
    return n;
}

void chan_objstats_free(chan_objstats *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        slot_clear(&s->slots[i]);
    free(s->slots);
    memset(s, 0, sizeof *s);
}

void chan_foreach_queue_stats(chan *ch, chan_queue_stats_fn fn, void *arg)
{
    const chan_objstats *s = &ch->queue_stats;
    for (uint32_t i = 0; i < s->n; i++)
        if (!queue_is_deleted(s->slots[i].q))
            fn(arg, s->slots[i].q, s->slots[i].n);
}

void chan_foreach_exchange_stats(chan *ch, chan_exchange_stats_fn fn, void *arg)
{
    const chan_objstats *s = &ch->exchange_stats;
    for (uint32_t i = 0; i < s->n; i++)
        fn(arg, (amqp_bytes){s->slots[i].name, s->slots[i].len}, s->slots[i].n);
}
