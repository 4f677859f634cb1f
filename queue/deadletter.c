/* Dead-lettering: a message rejected without requeue, expired, or dropped
 * by a length limit is republished to the queue's x-dead-letter-exchange
 * with x-death history, as RabbitMQ 3.10 does:
 *
 *   x-death: array of tables, newest first, one per (queue, reason):
 *     count, reason, queue, time, exchange, routing-keys[, original-expiration]
 *   x-first-death-reason / -queue / -exchange: set once, never changed
 *
 * The expiration property is removed (kept as original-expiration) so the
 * copy does not expire again. A message that would cycle back to a queue it
 * already died in is dropped unless a rejection is part of the cycle.
 *
 * At-least-once (a quorum queue's x-dead-letter-strategy): a message that
 * no queue would take stays with its queue, unsettled in the journal, and
 * is tried again (queue_hold_dead_letter) until one does.
 *
 * Each death is counted once, when it happens (not again when a held one is
 * tried again), by the queue's type, the reason and the strategy in force
 * -- at-most-once only when the dead-letter exchange exists, as RabbitMQ
 * 3.10 counts them -- and an at-least-once one again as confirmed when a
 * queue takes it.
 *
 * Persistence: the copy is a message of its own (its headers differ), so
 * leaving the source and arriving in the durable targets is one
 * persist_move -- an atomic group in the journal -- before the copy is
 * enqueued anywhere: after a crash the message is in exactly one place. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "queue.h"

/* Writes one x-death table for this death, count `count`. */
static void put_death(amqp_writer *w, queue *q, const msg *m, const char *reason, int64_t count,
                      const amqp_basic_properties *p)
{
    amqp_put_u8(w, 'F');
    size_t mark = amqp_table_begin(w);
    amqp_put_field_long(w, "count", count);
    amqp_put_field_str(w, "reason", AMQP_CSTR(reason));
    amqp_put_field_str(w, "queue", queue_name(q));
    amqp_put_key(w, "time");
    amqp_put_u8(w, 'T');
    amqp_put_u64(w, (uint64_t)time(NULL));
    amqp_put_field_str(w, "exchange", msg_exchange(m));
    amqp_put_key(w, "routing-keys");
    amqp_put_u8(w, 'A');
    size_t keys = amqp_table_begin(w);
    amqp_put_u8(w, 'S');
    amqp_put_longstr(w, msg_routing_key(m));
    amqp_table_end(w, keys);
    if (p->flags & AMQP_BASIC_EXPIRATION_FLAG)
        amqp_put_field_str(w, "original-expiration", p->expiration);
    amqp_table_end(w, mark);
}

static bool field_is(amqp_bytes table, const char *key, amqp_bytes value)
{
    amqp_field f;
    return amqp_table_get(table, key, &f) && f.type == 'S' && amqp_bytes_equal(f.v.bytes, value);
}

/* The new x-death array: this death first (its count carried over from an
 * earlier entry for the same queue and reason), then the other entries. */
static void put_x_death(amqp_writer *w, queue *q, const msg *m, const char *reason,
                        const amqp_basic_properties *p, amqp_field *old)
{
    int64_t count = 1;
    amqp_iter it;
    amqp_field e;
    if (old) {
        amqp_iter_init(&it, old->v.bytes);
        while (amqp_array_next(&it, &e))
            if (e.type == 'F' && field_is(e.v.bytes, "queue", queue_name(q)) &&
                field_is(e.v.bytes, "reason", AMQP_CSTR(reason))) {
                amqp_field c;
                if (amqp_table_get(e.v.bytes, "count", &c) && amqp_field_int(&c, &count))
                    count++;
            }
    }
    amqp_put_key(w, "x-death");
    amqp_put_u8(w, 'A');
    size_t mark = amqp_table_begin(w);
    put_death(w, q, m, reason, count, p);
    if (old) {
        amqp_iter_init(&it, old->v.bytes);
        while (amqp_array_next(&it, &e))
            if (!(e.type == 'F' && field_is(e.v.bytes, "queue", queue_name(q)) &&
                  field_is(e.v.bytes, "reason", AMQP_CSTR(reason))))
                amqp_put_field(w, &e);
    }
    amqp_table_end(w, mark);
}

/* New properties for the dead-lettered copy; returns its length or 0. */
static size_t dead_properties(queue *q, const msg *m, const char *reason, uint8_t *buf,
                              size_t cap, uint8_t *hdrbuf, size_t hdrcap)
{
    amqp_basic_properties p;
    if (amqp_properties_decode(msg_properties(m), &p, NULL) != AMQP_OK)
        return 0;
    amqp_writer w;
    amqp_writer_init(&w, hdrbuf, hdrcap);
    size_t mark = amqp_table_begin(&w);
    amqp_field old, f;
    bool had = (p.flags & AMQP_BASIC_HEADERS_FLAG) && amqp_table_get(p.headers, "x-death", &old) &&
               old.type == 'A';
    put_x_death(&w, q, m, reason, &p, had ? &old : NULL);
    bool first = (p.flags & AMQP_BASIC_HEADERS_FLAG) &&
                 amqp_table_get(p.headers, "x-first-death-reason", &f);
    if (!first) {
        amqp_put_field_str(&w, "x-first-death-reason", AMQP_CSTR(reason));
        amqp_put_field_str(&w, "x-first-death-queue", queue_name(q));
        amqp_put_field_str(&w, "x-first-death-exchange", msg_exchange(m));
    }
    amqp_put_entries_except(&w, (p.flags & AMQP_BASIC_HEADERS_FLAG) ? p.headers : (amqp_bytes){0},
                            "x-death");
    amqp_table_end(&w, mark);
    if (w.overflow)
        return 0;
    p.headers = (amqp_bytes){hdrbuf + 4, (uint32_t)w.len - 4};
    p.flags |= AMQP_BASIC_HEADERS_FLAG;
    p.flags &= (uint16_t)~AMQP_BASIC_EXPIRATION_FLAG;
    return amqp_properties_encode(&p, buf, cap);
}

/* Whether `target` already saw this message die for a reason other than
 * rejection -- routing there again would loop forever. */
static bool would_cycle(msg *copy, queue *target, const char *reason)
{
    if (strcmp(reason, "rejected") == 0)
        return false;
    amqp_basic_properties p;
    amqp_field deaths, e;
    if (amqp_properties_decode(msg_properties(copy), &p, NULL) != AMQP_OK ||
        !amqp_table_get(p.headers, "x-death", &deaths) || deaths.type != 'A')
        return false;
    amqp_iter it;
    amqp_iter_init(&it, deaths.v.bytes);
    bool seen = false;
    while (amqp_array_next(&it, &e)) {
        if (e.type != 'F')
            continue;
        if (field_is(e.v.bytes, "reason", AMQP_CSTR("rejected")))
            return false;
        seen |= field_is(e.v.bytes, "queue", queue_name(target));
    }
    return seen;
}

/* Leaves only the targets the copy would not cycle into; returns how many. */
static size_t drop_cycles(msg *copy, queue **targets, size_t n, const char *reason)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (!would_cycle(copy, targets[i], reason))
            targets[kept++] = targets[i];
    return kept;
}

static dead_reason reason_of(const char *reason)
{
    if (strcmp(reason, "maxlen") == 0)
        return DEAD_MAXLEN;
    if (strcmp(reason, "expired") == 0)
        return DEAD_EXPIRED;
    return strcmp(reason, "delivery_limit") == 0 ? DEAD_DELIVERY_LIMIT : DEAD_REJECTED;
}

/* At-most-once only when the dead-letter exchange exists (a missing one
 * counts as none, as RabbitMQ 3.10 counts it). */
static dead_strategy strategy_of(const queue_args *a, const route_exchange *ex)
{
    if (a->at_least_once)
        return DEAD_AT_LEAST_ONCE;
    return ex ? DEAD_AT_MOST_ONCE : DEAD_DISABLED;
}

void queue_count_dead_letter(queue *q, dead_reason why, dead_strategy how)
{
    server_counts *k = loop_counters(vhost_loop(queue_vhost(q)));
    k->dead_lettered[queue_get_args(q)->type][how][why]++;
}

/* Dead-letters `it`; false (nothing done) when no queue would take it and
 * the queue's strategy is at-least-once, so the caller keeps it. `first`:
 * this death has not been counted yet. */
static bool dead_letter(queue *q, queue_item it, const char *reason, bool first)
{
    const queue_args *a = queue_get_args(q);
    route_table *routes = vhost_routes(queue_vhost(q));
    route_exchange *ex = a->has_dlx ? route_exchange_find(routes, a->dlx) : NULL;
    if (first)
        queue_count_dead_letter(q, reason_of(reason), strategy_of(a, ex));
    if (!ex && a->at_least_once)
        return false;
    if (!ex) {
        persist_settle(q, it.m, JOURNAL_DROP);
        msg_unref(it.m);
        return true;
    }
    size_t cap = msg_properties(it.m).len + 4096, hdrcap = cap;
    uint8_t *buf = malloc(cap + hdrcap);
    size_t n = buf ? dead_properties(q, it.m, reason, buf, cap, buf + cap, hdrcap) : 0;
    amqp_bytes key = a->has_dlrk ? a->dlrk : msg_routing_key(it.m);
    msg *copy = n ? msg_copy_with(loop_msgs(vhost_loop(queue_vhost(q))), it.m, a->dlx, key, (amqp_bytes){buf, (uint32_t)n}) : NULL;
    free(buf);
    if (!copy && a->at_least_once)
        return false; /* out of memory: try again later */
    if (!copy) {
        persist_settle(q, it.m, JOURNAL_DEAD_LETTER);
        msg_unref(it.m);
        log_msg(LOG_WARNING, "queue '%.*s': could not dead-letter a message",
                (int)queue_name(q).len, (const char *)queue_name(q).ptr);
        return true;
    }
    amqp_basic_properties p;
    amqp_properties_decode(msg_properties(copy), &p, NULL);
    queue *local[16], **targets;
    size_t nt = vhost_route(queue_vhost(q), ex, key, p.headers, copy, local, 16, &targets);
    if (nt == 0 && a->at_least_once) {
        msg_unref(copy);
        return false;
    }
    nt = drop_cycles(copy, targets, nt, reason);
    bool held_ok; /* a delayed exchange keeps it now (xdelay.c) */
    xdelay_hold_routed(queue_vhost(q), copy, &held_ok);
    persist_move(q, it.m, JOURNAL_DEAD_LETTER, reason, copy, targets, nt);
    msg_unref(it.m);
    for (size_t i = 0; i < nt; i++)
        if (!queue_publish(targets[i], copy, -1))
            persist_settle(targets[i], copy, JOURNAL_DROP);
    if (targets != local)
        free(targets);
    msg_unref(copy);
    if (a->at_least_once)
        loop_counters(vhost_loop(queue_vhost(q)))->dead_lettered_confirmed++;
    return true;
}

void queue_dead_letter(queue *q, queue_item it, const char *reason)
{
    if (!dead_letter(q, it, reason, true))
        queue_hold_dead_letter(q, it, reason);
}

void queue_retry_dead_letter(queue *q, queue_item it, const char *reason)
{
    if (!dead_letter(q, it, reason, false))
        queue_hold_dead_letter(q, it, reason);
}
