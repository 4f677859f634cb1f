/* Queues: ready messages in a ring (head = next to deliver), consumers in a
 * circular list served round-robin, highest priority first.
 *
 * A ring entry is a message reference plus its delivery count; the count
 * says how often the message was delivered before, so a requeued one is
 * redelivered=true. Requeues go to the head: a channel requeues its
 * deliveries newest first, so they come back in their old order.
 *
 * Lifetime: the vhost holds one reference, every unacked delivery another
 * (queue_hold/queue_release). queue_delete unlinks the queue from the vhost
 * and its bindings, cancels its consumers and drops ready messages; the
 * struct is freed when the last unacked delivery from it is settled.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "queue_internal.h"

typedef struct qentry {
    msg *m;
    uint32_t delivery_count;
} qentry;

struct queue {
    struct queue_link link; /* vhost bookkeeping; first member */
    vhost *v;
    bool durable, exclusive, auto_delete, deleted, dispatching, had_consumer;
    bool mixed_priorities;
    conn *owner;
    uint8_t *args;
    uint32_t args_len;
    uint32_t refs;
    qentry *ring;
    uint32_t head, count, cap; /* cap is a power of two */
    consumer *consumers;       /* circular; the next to serve */
    uint32_t nconsumers;
    uint32_t exclusive_consumers;
};

queue *queue_new(vhost *v, const queue_spec *spec)
{
    queue *q = calloc(1, sizeof *q + spec->name.len + 1);
    if (!q)
        return NULL;
    q->link.name = (char *)(q + 1);
    memcpy(q->link.name, spec->name.ptr, spec->name.len);
    q->link.name_len = spec->name.len;
    q->v = v;
    q->durable = spec->durable;
    q->exclusive = spec->exclusive;
    q->auto_delete = spec->auto_delete;
    q->owner = spec->exclusive ? spec->owner : NULL;
    q->refs = 1;
    if (spec->arguments.len) {
        q->args = malloc(spec->arguments.len);
        if (!q->args) {
            free(q);
            return NULL;
        }
        memcpy(q->args, spec->arguments.ptr, spec->arguments.len);
        q->args_len = spec->arguments.len;
    }
    return q;
}

static void queue_free(queue *q)
{
    free(q->ring);
    free(q->args);
    free(q);
}

void queue_hold(queue *q) { q->refs++; }

void queue_release(queue *q)
{
    if (--q->refs == 0)
        queue_free(q);
}

amqp_bytes queue_name(const queue *q)
{
    return (amqp_bytes){(const uint8_t *)q->link.name, q->link.name_len};
}
bool queue_durable(const queue *q) { return q->durable; }
bool queue_exclusive(const queue *q) { return q->exclusive; }
bool queue_auto_delete(const queue *q) { return q->auto_delete; }
conn *queue_owner(const queue *q) { return q->owner; }
amqp_bytes queue_arguments(const queue *q) { return (amqp_bytes){q->args, q->args_len}; }
uint32_t queue_ready_count(const queue *q) { return q->count; }
uint32_t queue_consumer_count(const queue *q) { return q->nconsumers; }
bool queue_has_exclusive_consumer(const queue *q) { return q->exclusive_consumers > 0; }
bool queue_is_deleted(const queue *q) { return q->deleted; }

/* ---- the ring ----------------------------------------------------------- */

static qentry *at(queue *q, uint32_t i) { return &q->ring[(q->head + i) & (q->cap - 1)]; }

static bool grow(queue *q)
{
    uint32_t cap = q->cap ? q->cap * 2 : 16;
    qentry *n = malloc(cap * sizeof *n);
    if (!n)
        return false;
    for (uint32_t i = 0; i < q->count; i++)
        n[i] = *at(q, i);
    free(q->ring);
    q->ring = n;
    q->cap = cap;
    q->head = 0;
    return true;
}

static bool push_back(queue *q, msg *m, uint32_t count)
{
    if (q->count == q->cap && !grow(q))
        return false;
    *at(q, q->count++) = (qentry){m, count};
    return true;
}

static bool push_front(queue *q, msg *m, uint32_t count)
{
    if (q->count == q->cap && !grow(q))
        return false;
    q->head = (q->head - 1) & (q->cap - 1);
    q->count++;
    *at(q, 0) = (qentry){m, count};
    return true;
}

static qentry pop_front(queue *q)
{
    qentry e = *at(q, 0);
    q->head = (q->head + 1) & (q->cap - 1);
    q->count--;
    return e;
}

/* ---- consumers and dispatch --------------------------------------------- */

/* The consumer to serve next: the first one in round-robin order that can
 * take a message, or with mixed priorities the highest-priority such one. */
static consumer *pick(queue *q)
{
    consumer *start = q->consumers, *best = NULL;
    if (!start)
        return NULL;
    consumer *c = start;
    do {
        if ((!best || c->priority > best->priority) && chan_can_deliver(c->ch, c)) {
            best = c;
            if (!q->mixed_priorities)
                break;
        }
        c = c->q_next;
    } while (c != start);
    return best;
}

static void deliver_to(queue *q, consumer *c, msg *m, uint32_t count)
{
    q->consumers = c->q_next; /* round-robin: the next one goes first next time */
    chan_deliver(c->ch, c, q, m, count > 0, count + 1);
}

void queue_dispatch(queue *q)
{
    if (q->dispatching || q->deleted)
        return;
    q->dispatching = true;
    while (q->count) {
        consumer *c = pick(q);
        if (!c)
            break;
        qentry e = pop_front(q);
        deliver_to(q, c, e.m, e.delivery_count);
    }
    q->dispatching = false;
}

void queue_publish(queue *q, msg *m)
{
    msg_ref(m);
    if (q->count == 0 && !q->dispatching) {
        consumer *c = pick(q);
        if (c) {
            deliver_to(q, c, m, 0);
            return;
        }
    }
    if (!push_back(q, m, 0)) {
        log_msg(LOG_ERROR, "queue '%s': out of memory, message dropped", q->link.name);
        msg_unref(m);
    }
}

void queue_requeue(queue *q, msg *m, uint32_t delivery_count)
{
    msg_ref(m);
    if (!push_front(q, m, delivery_count)) {
        log_msg(LOG_ERROR, "queue '%s': out of memory, requeued message dropped", q->link.name);
        msg_unref(m);
    }
}

msg *queue_get(queue *q, bool *redelivered, uint32_t *delivery_count)
{
    if (!q->count)
        return NULL;
    qentry e = pop_front(q);
    *redelivered = e.delivery_count > 0;
    *delivery_count = e.delivery_count + 1;
    return e.m;
}

uint32_t queue_purge(queue *q)
{
    uint32_t n = q->count;
    while (q->count)
        msg_unref(pop_front(q).m);
    return n;
}

static void update_priorities(queue *q)
{
    q->mixed_priorities = false;
    consumer *c = q->consumers;
    for (uint32_t i = 0; c && i < q->nconsumers; i++, c = c->q_next)
        if (c->priority != q->consumers->priority)
            q->mixed_priorities = true;
}

void queue_add_consumer(queue *q, consumer *cons)
{
    if (!q->consumers) {
        cons->q_next = cons->q_prev = cons;
        q->consumers = cons;
    } else {
        /* insert last in round-robin order: just before the next to serve */
        consumer *first = q->consumers;
        cons->q_next = first;
        cons->q_prev = first->q_prev;
        first->q_prev->q_next = cons;
        first->q_prev = cons;
    }
    q->nconsumers++;
    q->had_consumer = true;
    if (cons->exclusive)
        q->exclusive_consumers++;
    update_priorities(q);
}

void queue_remove_consumer(queue *q, consumer *cons)
{
    if (cons->q_next == cons) {
        q->consumers = NULL;
    } else {
        cons->q_prev->q_next = cons->q_next;
        cons->q_next->q_prev = cons->q_prev;
        if (q->consumers == cons)
            q->consumers = cons->q_next;
    }
    q->nconsumers--;
    if (cons->exclusive)
        q->exclusive_consumers--;
    update_priorities(q);
    if (q->auto_delete && q->nconsumers == 0 && !q->deleted)
        queue_delete(q);
}

void queue_delete(queue *q)
{
    if (q->deleted)
        return;
    q->deleted = true;
    route_unbind_queue(vhost_routes(q->v), q);
    vhost_queue_remove(q->v, q);
    while (q->consumers) {
        consumer *c = q->consumers;
        queue_remove_consumer(q, c);
        chan_consumer_cancelled(c->ch, c);
    }
    queue_purge(q);
    queue_release(q);
}
