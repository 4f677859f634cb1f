/* Queues: ready messages in a ring (head = next to deliver), consumers in a
 * circular list served round-robin, highest priority first.
 *
 * With x-max-priority there is one ring per priority level and the highest
 * non-empty level is the head; x-single-active-consumer delivers only to the
 * oldest consumer until it goes.
 *
 * A ring slot is a message reference plus its delivery count; the count
 * says how often the message was delivered before, so a requeued one is
 * redelivered=true. A slot also keeps when the message entered this queue
 * and its own expiry, so a changed x-message-ttl (a policy) applies to
 * messages already queued, and the age of the oldest message can be
 * reported.
 *
 * Order: every message gets the queue's next sequence number when it is
 * enqueued, and a ring is always sorted by it. A requeued message keeps its
 * number and goes back to its place -- before the first message that
 * entered the queue after it -- as RabbitMQ puts it back at its original
 * position, whatever order the rejects come in. It was delivered from near
 * the head, so the shift that makes room is short.
 *
 * Paging: only the first RESIDENT_SLOTS slots of a ring keep their message
 * in RAM. A message published further back that the journal holds for this
 * queue is dropped from RAM at once, leaving its id, journal location and
 * size in the slot, and is read back when it reaches the head. Recovery
 * restores every message that way, without reading bodies. While memory
 * is short (server_paging: past vm_memory_high_watermark_paging_ratio of
 * the watermark, a flag the memory timer sets) the others -- transient
 * messages, and any in a queue that does not journal them -- go to the
 * loop's spill file the same way (store/spill.c), read back and dropped
 * from it once at the head; nothing of them survives a restart.
 *
 * Arguments: x-message-ttl (counted from the enqueue time) and per-message
 * expiration give each item an expiry; see "Expiry".
 * x-max-length / x-max-length-bytes apply after each publish: drop-head
 * dead-letters the oldest, reject-publish refuses the new message.
 * x-expires deletes the queue after that long without consumers or use.
 *
 * Delayed retry: a return that x-delayed-retry-type selects waits in
 * `delayed`, a min-heap by deadline (delayed.c), neither ready nor unacked;
 * one timer per queue is armed for the earliest. At its deadline the slot
 * goes back to its place by its sequence number, as a requeue does, with
 * its delivery count. A durable queue journals the deadline (wall clock),
 * so recovery holds the message back until then.
 *
 * Expiry: an expired message is dead-lettered (reason expired) or dropped
 * as soon as its time comes, wherever it is in the ring, by one timer per
 * queue armed for the earliest expiry. The TTL's expiry grows along a ring
 * (enqueue times do, and a requeue keeps its place), so for it the heads
 * are enough. A slot whose own expiration comes before its TTL's is also
 * put in a min-heap of (expires_at, seq) (expiry.c); at its time it is
 * found by binary search on seq (a ring is sorted by it) and taken out of
 * the middle, leaving a tombstone (a slot neither paged nor holding a
 * message) that counts nowhere: the ready count and bytes drop at once.
 * Pops skip tombstones -- a ring's head and tail are always live -- and
 * they are dropped when the ring is next full and they are a quarter of it
 * or more (otherwise it doubles), so compaction costs what doubling does.
 * A heap entry goes stale when its slot leaves another way; stale ones are
 * skipped when they come up, all dropped when a slot arrives in an empty
 * queue, and those of slots taken from the head are filtered out when the
 * heap is over twice the ready count (and twice what the last filter kept).
 * A requeue adds an entry again (the old one cannot be told apart), so a
 * message requeued over and over has several until its time. A policy that
 * raises or removes the TTL rebuilds the heap in one pass over the rings.
 * Expiry works in slices (at most EXPIRY_SLICE_MAX messages or ~1 ms, then
 * again on a zero-delay timer), so a million messages expiring together do
 * not hold up other queues. A paged-out slot that is just dropped is
 * settled in the journal by its id, its body never read; only
 * dead-lettering reads it back. Deliveries check the head they take too
 * (the timer may be a turn late), so no expired message goes out.
 *
 * Health counts: the queue keeps, per bucket of delivery count, how many of
 * its messages (ready, delayed, or delivered and not yet settled) have been
 * delivered that often, so a message that keeps coming back shows before
 * it loops for long. Ready slots are counted as they enter and leave the
 * rings, deliveries by the channel (queue_delivery_held / _settled).
 * So are the ready slots paged out, and the ready and unacked messages the
 * journal holds for the queue (persistent), with their bytes.
 *
 * Consumer capacity, as RabbitMQ's rabbit_queue_consumers computes it: the
 * queue is active while it can hand a message to a consumer at once, and
 * turns inactive when a message waits and no consumer can take it (none,
 * or all at their prefetch), until a consumer is added or takes a message
 * again. The capacity is the moving average (half-life 1 s) of the active
 * share of the time over the last active period and the inactive one
 * since; only the changes of state are recorded, not each message.
 *
 * Lifetime: the vhost holds one reference, every unacked delivery another
 * (queue_hold/queue_release). queue_delete unlinks the queue from the vhost
 * and its bindings, cancels its consumers and drops ready messages; the
 * struct is freed when the last unacked delivery from it is settled.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "queue.h"
#include "queue_internal.h"

/* Quorum queue priorities (RabbitMQ 4.x): 0..4 normal, above high; while
 * both wait, a normal message goes after every QUORUM_HIGH_RUN high ones,
 * so the normal ones are not starved. */
#define QUORUM_NORMAL_PRIORITY_MAX 4
#define QUORUM_HIGH_RUN 2

/* Messages this close to the head of a ring stay in RAM, so a consumer
 * that keeps up never waits for a read. */
#define RESIDENT_SLOTS 64

/* See "Consumer capacity". */
typedef struct consumer_use {
    bool inactive;
    uint64_t since;     /* loop_now_ms of the last change */
    uint64_t active_ms; /* when inactive: how long the active period before it lasted */
    double avg;
} consumer_use;
#define USE_HALF_LIFE_MS 1000.0

/* A FIFO of slots; cap is a power of two. `count` includes `dead`
 * tombstones (see "Expiry"), never at the head or the tail. */
typedef struct ring {
    qslot *buf;
    uint32_t head, count, cap, dead;
} ring;

struct held_dead_letter {
    queue_item it;
    const char *reason; /* a string literal */
};

struct queue {
    struct queue_link link; /* vhost bookkeeping; first member */
    vhost *v;
    bool durable, exclusive, auto_delete, deleted, dispatching, had_consumer;
    bool mixed_priorities;
    conn *owner;
    uint8_t *args;
    uint32_t args_len;
    queue_args limits; /* parsed from the effective arguments */
    uint8_t *policy_blob;   /* names, merged definition, effective arguments */
    policy_applied applied; /* slices of policy_blob; all empty without a policy */
    amqp_bytes eff_args;    /* args with the policies' values; args itself without */
    struct event *ttl_timer, *idle_timer, *dl_timer, *retry_timer;
    delayed_set delayed;   /* held back by delayed retry, see "Delayed retry" */
    uint64_t ttl_armed_at; /* when ttl_timer fires; 0 = not armed */
    expiry_heap due;       /* early own expirations, see "Expiry" */
    uint32_t due_kept;     /* entries the last filter of `due` kept */
    struct held_dead_letter *held; /* at-least-once dead letters nobody took yet */
    uint32_t nheld, held_cap;
    uint64_t bytes; /* body bytes of ready messages */
    uint64_t store_id; /* the metadata row of a durable queue */
    uint32_t refs;
    ring *levels;    /* one ring per priority, 0 lowest; one without x-max-priority */
    uint32_t nlevels;
    uint32_t count;  /* ready messages over all levels */
    consumer *consumers; /* circular; the next to serve */
    consumer *active;    /* x-single-active-consumer: the one that gets messages */
    uint32_t nconsumers;
    uint32_t exclusive_consumers;
    uint32_t next_seq; /* for the next message enqueued */
    uint32_t high_run; /* quorum: high-priority deliveries in a row */
    uint32_t unacked;  /* deliveries not yet settled */
    uint64_t unacked_bytes; /* their body bytes */
    uint64_t delivery_limit_dead; /* dead-lettered or dropped by x-delivery-limit */
    uint64_t consumer_timeouts;   /* deliveries whose consumer timeout fired */
    uint32_t by_delivery_count[QUEUE_DC_BUCKETS]; /* ready + unacked, see above */
    uint32_t paged;           /* ready slots paged out */
    uint64_t paged_bytes;     /* their body bytes */
    uint32_t persistent;      /* ready and unacked messages the journal holds for it */
    uint64_t persistent_bytes;
    consumer_use use; /* see "Consumer capacity" */
    stats stats;      /* management counters */
    stream_queue *sq; /* a stream's log (stream_queue.c), else NULL */
    qdedup *dedup;    /* x-message-deduplication (dedup.c), else NULL */
};

qdedup **queue_dedup_slot(queue *q) { return &q->dedup; }

/* Its type, by the id its arguments give (no pointer in the struct: the
 * hot fields keep their cache lines). */
static const queue_type *type_of(const queue *q) { return queue_type_by_id(q->limits.type); }

const uint32_t queue_dc_bucket_floor[QUEUE_DC_BUCKETS] = {0, 1, 2, 3, 5, 10, 20, 50};

static inline unsigned dc_bucket(uint32_t count)
{
    if (count < 3) /* buckets 0, 1, 2 are those counts: nearly every message */
        return count;
    unsigned b = QUEUE_DC_BUCKETS - 1;
    while (count < queue_dc_bucket_floor[b])
        b--;
    return b;
}

static void queue_free(queue *q);

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
    /* validated by the caller; read again so slices point into q->args */
    q->eff_args = queue_arguments(q);
    queue_args_read(q->eff_args, &q->limits);
    /* a quorum queue has RabbitMQ 4.x's two levels: priority 5 and up is high */
    q->nlevels = type_of(q)->priority_levels ? q->limits.max_priority + 1u : 2u;
    q->levels = calloc(q->nlevels, sizeof *q->levels);
    if (!q->levels) {
        free(q->args);
        free(q);
        return NULL;
    }
    if (q->limits.expires >= 0)
        queue_touch(q);
    q->use = (consumer_use){.since = loop_now_ms(vhost_loop(v)), .avg = 1.0};
    policy_apply_queue(v, q);
    if (q->limits.type != QUEUE_TYPE_STREAM && !queue_dedup_open(q, queue_arguments(q))) {
        queue_free(q);
        return NULL;
    }
    if (q->limits.type == QUEUE_TYPE_STREAM && !(q->sq = stream_queue_open(q))) {
        queue_free(q);
        return NULL;
    }
    return q;
}

stream_queue *queue_stream_state(const queue *q) { return q->sq; }

static void drop_held(queue *q)
{
    for (uint32_t i = 0; i < q->nheld; i++)
        msg_unref(q->held[i].it.m);
    q->nheld = 0;
}

static void queue_free(queue *q)
{
    queue_dedup_close(q);
    stream_queue_close(q->sq, false);
    drop_held(q);
    free(q->held);
    delayed_free(&q->delayed);
    if (q->retry_timer)
        event_free(q->retry_timer);
    if (q->dl_timer)
        event_free(q->dl_timer);
    if (q->ttl_timer)
        event_free(q->ttl_timer);
    if (q->idle_timer)
        event_free(q->idle_timer);
    expiry_heap_free(&q->due);
    for (uint32_t i = 0; i < q->nlevels; i++)
        free(q->levels[i].buf);
    free(q->levels);
    free(q->args);
    stats_free(&q->stats);
    free(q->policy_blob);
    free(q);
}

void queue_hold(queue *q) { q->refs++; }

void queue_release(queue *q)
{
    invariant(q->refs > 0); /* the vhost's and each unacked delivery's */
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
const queue_args *queue_get_args(const queue *q) { return &q->limits; }
vhost *queue_vhost(queue *q) { return q->v; }
uint64_t queue_store_id(const queue *q) { return q->store_id; }
void queue_set_store_id(queue *q, uint64_t id) { q->store_id = id; }
const queue_type *queue_type_of(const queue *q) { return type_of(q); }

bool queue_shows_delivery_count(const queue *q)
{
    const queue_args *a = &q->limits;
    return type_of(q)->counts_deliveries || a->delivery_limit >= 0 ||
           (a->retry_min > 0 && a->retry_type != QUEUE_RETRY_DISABLED);
}

static uint64_t now_ms(queue *q) { return loop_now_ms(vhost_loop(q->v)); }

/* ---- health counts ------------------------------------------------------ */

/* Whether the journal holds `m` for `q` (a transient queue's test is inline:
 * it is on every enqueue and delivery). */
static bool held_in_journal(queue *q, const msg *m) { return q->durable && persist_pageable(q, m); }

void queue_delivery_held(queue *q, uint32_t count, const msg *m)
{
    uint64_t bytes = msg_body_size(m);
    q->unacked++;
    q->unacked_bytes += bytes;
    q->by_delivery_count[dc_bucket(count)]++;
    if (held_in_journal(q, m))
        q->persistent++, q->persistent_bytes += bytes;
}

void queue_core_settled(queue *q, uint32_t count, const msg *m)
{
    uint64_t bytes = msg_body_size(m);
    q->unacked--;
    q->unacked_bytes -= bytes;
    q->by_delivery_count[dc_bucket(count)]--;
    if (held_in_journal(q, m))
        q->persistent--, q->persistent_bytes -= bytes;
}

/* ---- consumer capacity -------------------------------------------------- */

/* RabbitMQ's moving average of the active share: `active` and `inactive`
 * ms since `avg` was last brought up to date. */
static double use_avg(uint64_t active, uint64_t inactive, double avg)
{
    double t = (double)(active + inactive);
    if (t == 0)
        return avg;
    double w = exp(t * log(0.5) / USE_HALF_LIFE_MS);
    return (double)active / t * (1 - w) + avg * w;
}

static void use_set(queue *q, bool active)
{
    consumer_use *u = &q->use;
    if (u->inactive != active)
        return;
    uint64_t now = now_ms(q);
    if (active)
        u->avg = use_avg(u->active_ms, now - u->since, u->avg);
    else
        u->active_ms = now - u->since;
    u->inactive = !active;
    u->since = now;
}

static double consumer_capacity(queue *q)
{
    const consumer_use *u = &q->use;
    uint64_t for_ms = now_ms(q) - u->since;
    if (!q->nconsumers)
        return 0;
    return u->inactive ? use_avg(u->active_ms, for_ms, u->avg) : use_avg(for_ms, 0, u->avg);
}

uint32_t queue_unacked_count(const queue *q) { return q->unacked; }

void queue_consumer_timed_out(queue *q) { q->consumer_timeouts++; }

void queue_delivery_counts(const queue *q, uint32_t out[QUEUE_DC_BUCKETS])
{
    memcpy(out, q->by_delivery_count, sizeof q->by_delivery_count);
}

/* The oldest ready message is at the head of one of the priority rings. */
uint64_t queue_oldest_ready_ms(const queue *q)
{
    uint64_t oldest = 0;
    for (uint32_t i = 0; i < q->nlevels; i++) {
        const ring *r = &q->levels[i];
        uint64_t t = r->count ? r->buf[r->head].enqueued_at : 0;
        if (t && (!oldest || t < oldest))
            oldest = t;
    }
    return oldest;
}

/* ---- the ring ----------------------------------------------------------- */

static qslot *ring_at(ring *r, uint32_t i) { return &r->buf[(r->head + i) & (r->cap - 1)]; }

/* A slot expired from the middle of its ring (see "Expiry"). */
static bool is_dead(const qslot *s) { return !s->paged && !s->m; }

/* Doubles a full ring without tombstones. realloc moves a large buffer's
 * pages rather than copying them, so only the shorter part of a wrapped
 * ring is copied: a backlog of millions grows without a pause. */
static bool ring_double(ring *r)
{
    uint32_t cap = r->cap ? r->cap * 2 : 16, old = r->cap;
    qslot *n = realloc(r->buf, (size_t)cap * sizeof *n);
    if (!n)
        return false;
    uint32_t tail_part = old - r->head, wrapped = r->head ? r->count - tail_part : 0;
    if (wrapped <= tail_part) { /* the wrapped start goes after the old end */
        memcpy(n + old, n, (size_t)wrapped * sizeof *n);
    } else { /* the part before the old end goes to the new end */
        memcpy(n + cap - tail_part, n + r->head, (size_t)tail_part * sizeof *n);
        r->head = cap - tail_part;
    }
    r->buf = n;
    r->cap = cap;
    return true;
}

/* Makes room for one more slot in a full ring: drops its tombstones when
 * they are a quarter of it or more, so each compaction frees many slots,
 * else doubles it. */
static bool ring_make_room(ring *r)
{
    if (!r->cap || r->dead < r->count / 4)
        return ring_double(r);
    qslot *n = malloc(r->cap * sizeof *n);
    if (!n)
        return false;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < r->count; i++)
        if (!is_dead(ring_at(r, i)))
            n[kept++] = *ring_at(r, i);
    free(r->buf);
    r->buf = n;
    r->head = 0;
    r->count = kept;
    r->dead = 0;
    return true;
}

/* Keeps a ring's head and tail live. */
static void strip_dead_ends(ring *r)
{
    while (r->count && is_dead(ring_at(r, 0))) {
        r->head = (r->head + 1) & (r->cap - 1);
        r->count--, r->dead--;
    }
    while (r->count && is_dead(ring_at(r, r->count - 1)))
        r->count--, r->dead--;
}

/* The level a message of priority `p` goes to: capped at the queue's
 * maximum (0 when unset, as in RabbitMQ). */
static uint8_t level_for(const queue *q, uint8_t p)
{
    if (!type_of(q)->priority_levels)
        return p > QUORUM_NORMAL_PRIORITY_MAX;
    return p < q->nlevels ? p : (uint8_t)(q->nlevels - 1);
}

static uint8_t level_of(const queue *q, const msg *m)
{
    amqp_bytes raw = msg_properties(m);
    amqp_basic_properties p;
    if (q->nlevels == 1 || raw.len < 2 || !(raw.ptr[0] << 8 & AMQP_BASIC_PRIORITY_FLAG) ||
        amqp_properties_decode(raw, &p, NULL) != AMQP_OK)
        return 0;
    return level_for(q, p.priority);
}

/* The ring holding the head: the highest non-empty level. */
static ring *top(queue *q)
{
    for (uint32_t i = q->nlevels; i-- > 0;)
        if (q->levels[i].count)
            return &q->levels[i];
    return &q->levels[0];
}

static qslot slot_of(queue_item it)
{
    return (qslot){.m = it.m,
                   .enqueued_at = it.enqueued_at,
                   .expires_at = it.expires_at,
                   .body_size = (uint32_t)msg_body_size(it.m),
                   .seq = it.seq,
                   .delivery_count = it.delivery_count,
                   .maybe_delivered = it.maybe_delivered};
}

/* Leaves only what the journal needs to give `s`'s message back. */
static void page_out(queue *q, qslot *s)
{
    msg *m = s->m;
    msg_journal_loc(m, &s->loc);
    s->id = msg_id(m);
    s->paged = true;
    q->paged++, q->paged_bytes += s->body_size;
    msg_unref(m);
}

/* Writes `s`'s message to the loop's spill and leaves only where it is;
 * nothing changes when it cannot be written. A record: the lengths of
 * exchange, routing key, properties and body (4 bytes each), then they. */
static void spill_out(queue *q, qslot *s)
{
    spill *sp = loop_spill(vhost_loop(q->v));
    msg *m = s->m;
    amqp_bytes ex = msg_exchange(m), rk = msg_routing_key(m), props = msg_properties(m);
    uint32_t lens[4] = {(uint32_t)ex.len, (uint32_t)rk.len, (uint32_t)props.len, s->body_size};
    amqp_bytes parts[5] = {{(const uint8_t *)lens, sizeof lens}, ex, rk, props,
                           {msg_body(m), s->body_size}};
    if (!sp || !spill_write(sp, parts, 5, &s->loc))
        return;
    s->id = msg_id(m);
    s->paged = true;
    s->spilled = true;
    q->paged++, q->paged_bytes += s->body_size;
    msg_unref(m);
}

/* A paged-out slot's message leaves without being read back. */
static void drop_paged(queue *q, const qslot *s)
{
    if (s->spilled)
        spill_drop(loop_spill(vhost_loop(q->v)), s->loc);
    else
        persist_settle_paged(q, s->id, s->loc, JOURNAL_DROP);
}

/* `s` holds its message again. */
static void paged_in(queue *q, qslot *s, msg *m)
{
    if (s->spilled)
        spill_drop(loop_spill(vhost_loop(q->v)), s->loc);
    s->m = m;
    s->paged = false;
    s->spilled = false;
    q->paged--, q->paged_bytes -= s->body_size;
}

/* The spilled message of `s` read back as a new message (a transient one
 * has no identity to keep); NULL when it cannot be. */
static msg *spill_in(queue *q, const qslot *s)
{
    loop *l = vhost_loop(q->v);
    size_t cap;
    uint8_t *b = loop_read_buffer(l, s->loc.length, &cap);
    uint32_t len[4];
    if (!b || cap < s->loc.length || s->loc.length < sizeof len ||
        !spill_read(loop_spill(l), s->loc, b))
        return NULL;
    memcpy(len, b, sizeof len);
    if ((uint64_t)len[0] + len[1] + len[2] + len[3] != s->loc.length - sizeof len)
        return NULL;
    const uint8_t *p = b + sizeof len;
    amqp_bytes ex = {p, len[0]}, rk = {p + len[0], len[1]}, props = {p + len[0] + len[1], len[2]};
    msg *m = msg_new(loop_msgs(l), ex, rk, props, len[3]);
    if (m)
        msg_append_body(m, p + len[0] + len[1] + len[2], len[3]);
    return m;
}

/* Whether the journal holds slot `s`'s message for `q`. */
static bool slot_persistent(queue *q, const qslot *s)
{
    return s->paged ? !s->spilled : held_in_journal(q, s->m);
}

/* Counts a slot entering a ring; uncount undoes it. */
static inline void count_in(queue *q, const qslot *s)
{
    q->count++;
    q->bytes += s->body_size;
    q->by_delivery_count[dc_bucket(s->delivery_count)]++;
    if (s->paged)
        q->paged++, q->paged_bytes += s->body_size;
    if (slot_persistent(q, s))
        q->persistent++, q->persistent_bytes += s->body_size;
}

static inline void uncount(queue *q, const qslot *s)
{
    q->count--;
    q->bytes -= s->body_size;
    q->by_delivery_count[dc_bucket(s->delivery_count)]--;
    if (s->paged)
        q->paged--, q->paged_bytes -= s->body_size;
    if (slot_persistent(q, s))
        q->persistent--, q->persistent_bytes -= s->body_size;
}

/* Sequence numbers wrap; a queue never holds 2^31 messages, so serial
 * number arithmetic (RFC 1982) orders them. */
static bool seq_before(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }

static bool push_back(queue *q, qslot s, uint8_t level)
{
    ring *r = &q->levels[level];
    if (r->count == r->cap && !ring_make_room(r))
        return false;
    /* a ring is sorted by sequence number: a new message is the newest */
    invariant(r->count == 0 || seq_before(ring_at(r, r->count - 1)->seq, s.seq));
    *ring_at(r, r->count++) = s;
    count_in(q, &s);
    return true;
}

/* The index of the first slot of `r` (tombstones included) not before
 * `seq`; r->count when there is none. */
static uint32_t lower_bound(ring *r, uint32_t seq)
{
    uint32_t lo = 0, hi = r->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (seq_before(ring_at(r, mid)->seq, seq))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The index of the live slot `seq` in `r`, r->count when it is not there. */
static uint32_t ring_find(ring *r, uint32_t seq)
{
    uint32_t i = lower_bound(r, seq);
    return i < r->count && ring_at(r, i)->seq == seq && !is_dead(ring_at(r, i)) ? i : r->count;
}

static void track_expiry(queue *q, uint8_t level, const qslot *s);

/* Puts a requeued slot back at its place in its level's ring, moving the
 * shorter side of the ring by one to make room. */
static bool insert_in_place(queue *q, qslot s, uint8_t level)
{
    ring *r = &q->levels[level];
    if (r->count == r->cap && !ring_make_room(r))
        return false;
    uint32_t lo = lower_bound(r, s.seq);
    if (lo <= r->count - lo) {
        r->head = (r->head - 1) & (r->cap - 1);
        for (uint32_t i = 0; i < lo; i++)
            *ring_at(r, i) = *ring_at(r, i + 1);
    } else {
        for (uint32_t i = r->count; i > lo; i--)
            *ring_at(r, i) = *ring_at(r, i - 1);
    }
    r->count++;
    *ring_at(r, lo) = s;
    /* its place keeps the ring sorted (and it is not there twice) */
    invariant(lo == 0 || seq_before(ring_at(r, lo - 1)->seq, s.seq));
    invariant(lo + 1 == r->count || seq_before(s.seq, ring_at(r, lo + 1)->seq));
    count_in(q, &s);
    if (s.expires_at || q->limits.message_ttl >= 0)
        track_expiry(q, level, &s);
    return true;
}

/* Takes the head (i = 0) or the tail of `r`. */
static qslot pop_slot(queue *q, ring *r, uint32_t i)
{
    qslot s = *ring_at(r, i);
    if (i == 0)
        r->head = (r->head + 1) & (r->cap - 1);
    r->count--;
    if (r->dead)
        strip_dead_ends(r);
    /* a ring's head and tail are always live */
    invariant(r->count == 0 || (!is_dead(ring_at(r, 0)) && !is_dead(ring_at(r, r->count - 1))));
    uncount(q, &s);
    return s;
}

/* Takes slot i of `r`, leaving a tombstone when it is in the middle. */
static qslot take_slot(queue *q, ring *r, uint32_t i)
{
    if (i == 0 || i == r->count - 1)
        return pop_slot(q, r, i);
    qslot *at = ring_at(r, i), s = *at;
    at->m = NULL;
    at->paged = false;
    at->spilled = false;
    r->dead++;
    uncount(q, &s);
    return s;
}

/* Pages out the newest slot of `m`'s level if it is far from the head. */
static void page_tail(queue *q, const msg *m)
{
    ring *r = &q->levels[level_of(q, m)];
    qslot *last = r->count ? ring_at(r, r->count - 1) : NULL;
    if (r->count <= RESIDENT_SLOTS || last->m != m || last->paged)
        return;
    if (persist_pageable(q, m))
        page_out(q, last);
    else if (server_paging(vhost_server(q->v)))
        spill_out(q, last);
}

static bool page_in_one(queue *q, qslot *s);

/* Reads the paged-out slots at the head of `r` back, as many as one read
 * gives. false if the first cannot be read (it is dropped). */
static bool page_in_head(queue *q, ring *r)
{
    uint64_t ids[PAGE_IN_MAX];
    journal_loc locs[PAGE_IN_MAX];
    msg *got[PAGE_IN_MAX];
    size_t n = 0;
    if (ring_at(r, 0)->spilled)
        return page_in_one(q, ring_at(r, 0));
    for (qslot *s; n < PAGE_IN_MAX && n < r->count && (s = ring_at(r, (uint32_t)n))->paged &&
                   !s->spilled; n++) {
        ids[n] = s->id;
        locs[n] = s->loc;
    }
    n = persist_page_in(q, ids, locs, n, got);
    for (size_t i = 0; i < n; i++)
        paged_in(q, ring_at(r, (uint32_t)i), got[i]);
    return n > 0;
}

/* Reads back the paged-out slot `s` alone; false if it cannot be (it is
 * then settled as dropped). */
static bool page_in_one(queue *q, qslot *s)
{
    msg *m;
    if (s->spilled && !(m = spill_in(q, s))) {
        log_msg(LOG_ERROR, "queue '%s': a transient message could not be read back from the "
                "spill file; it is dropped", q->link.name);
        spill_drop(loop_spill(vhost_loop(q->v)), s->loc);
        return false;
    }
    if (!s->spilled && !persist_page_in(q, &s->id, &s->loc, 1, &m))
        return false;
    paged_in(q, s, m);
    return true;
}

static queue_item item_of(qslot s)
{
    return (queue_item){.m = s.m,
                        .seq = s.seq,
                        .delivery_count = s.delivery_count,
                        .maybe_delivered = s.maybe_delivered,
                        .enqueued_at = s.enqueued_at,
                        .expires_at = s.expires_at};
}

/* The ring the next delivery comes from: the head's, except in a quorum
 * queue whose high level has had its run while normal messages wait. */
static ring *next_ring(queue *q, bool deliver)
{
    ring *r = top(q);
    if (!deliver || type_of(q)->priority_levels)
        return r;
    if (r == &q->levels[1] && q->levels[0].count && q->high_run >= QUORUM_HIGH_RUN)
        r = &q->levels[0];
    q->high_run = r == &q->levels[1] ? q->high_run + 1 : 0;
    return r;
}

/* Takes the head (for a delivery: the next to deliver), reading it back if
 * it was paged out; false when the queue is empty. A message the journal
 * cannot give back is skipped. */
static bool pop_next(queue *q, queue_item *out, bool deliver)
{
    while (q->count) {
        ring *r = next_ring(q, deliver);
        if (ring_at(r, 0)->paged && !page_in_head(q, r)) {
            pop_slot(q, r, 0);
            continue;
        }
        *out = item_of(pop_slot(q, r, 0));
        return true;
    }
    return false;
}

static bool pop_front(queue *q, queue_item *out) { return pop_next(q, out, false); }

/* Drops every slot without reading anything back. */
static void drop_all(queue *q)
{
    while (q->count) {
        qslot s = pop_slot(q, top(q), 0);
        if (!s.paged)
            msg_unref(s.m);
        else if (s.spilled)
            drop_paged(q, &s);
    }
}

/* Takes back the slot push_back just added (reject-publish). */
static queue_item pop_newest(queue *q, msg *m)
{
    ring *r = &q->levels[level_of(q, m)];
    return item_of(pop_slot(q, r, r->count - 1));
}

/* ---- expiry ------------------------------------------------------------- */

static void ttl_fired(evutil_socket_t fd, short what, void *arg);

/* When a message expires: its own expiry, or the queue's TTL counted from
 * when it entered the queue, whichever comes first; 0 = never. */
static uint64_t expiry_of(const queue *q, uint64_t enqueued_at, uint64_t expires_at)
{
    if (q->limits.message_ttl >= 0) {
        uint64_t ttl_end = enqueued_at + (uint64_t)q->limits.message_ttl;
        if (!expires_at || ttl_end < expires_at)
            return ttl_end;
    }
    return expires_at;
}

static uint64_t slot_expiry(const queue *q, const qslot *s)
{
    return expiry_of(q, s->enqueued_at, s->expires_at);
}

static bool item_expired(queue *q, const queue_item *it)
{
    uint64_t at = expiry_of(q, it->enqueued_at, it->expires_at);
    return at && at <= now_ms(q);
}

/* Only a slot whose own expiration comes before the TTL's can expire
 * behind a live head, so only such slots go in the heap. */
static bool expires_early(const queue *q, const qslot *s)
{
    return s->expires_at && (q->limits.message_ttl < 0 ||
                             s->expires_at < s->enqueued_at + (uint64_t)q->limits.message_ttl);
}

/* Arms the timer for `at` (0: nothing) unless it fires sooner already. */
static void arm(queue *q, uint64_t at)
{
    if (!at || q->deleted || (q->ttl_armed_at && q->ttl_armed_at <= at))
        return;
    if (!q->ttl_timer &&
        !(q->ttl_timer = evtimer_new(loop_base(vhost_loop(q->v)), ttl_fired, q)))
        return;
    uint64_t now = now_ms(q), wait = at > now ? at - now : 0;
    struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)(wait % 1000) * 1000};
    if (evtimer_add(q->ttl_timer, &tv) == 0)
        q->ttl_armed_at = at;
}

/* Arms the timer for the earliest head or heap entry. */
static void rearm(queue *q)
{
    uint64_t next = 0;
    for (uint32_t i = 0; i < q->nlevels; i++) {
        ring *r = &q->levels[i];
        uint64_t at = r->count ? slot_expiry(q, ring_at(r, 0)) : 0;
        if (at && (!next || at < next))
            next = at;
    }
    const expiry_entry *top = expiry_heap_top(&q->due);
    if (top && (!next || top->at < next))
        next = top->at;
    arm(q, next);
}

/* A heap entry whose slot has been taken from the head is stale: rings
 * are sorted by seq, so it is before the head's. */
static bool still_queued(void *ctx, const expiry_entry *e)
{
    ring *r = &((queue *)ctx)->levels[e->level];
    return r->count && !seq_before(e->seq, ring_at(r, 0)->seq);
}

/* Tells the heap and the timer of slot `s`, just queued in `level`. */
static void track_expiry(queue *q, uint8_t level, const qslot *s)
{
    uint64_t at = slot_expiry(q, s);
    if (!at)
        return;
    if (expires_early(q, s)) {
        if (q->count == 1) {
            expiry_heap_clear(&q->due); /* every entry left is stale */
        } else if (q->due.n > 2 * q->count + 1024 && q->due.n > 2 * q->due_kept) {
            expiry_heap_filter(&q->due, still_queued, q);
            q->due_kept = q->due.n; /* at most once per doubling: O(1) a push */
        }
        if (!expiry_heap_push(&q->due, (expiry_entry){s->expires_at, s->seq, level}))
            log_msg(LOG_WARNING, "queue '%s': out of memory; a message expires only when it "
                    "reaches the head", q->link.name);
    }
    arm(q, at);
}

/* The heap again from every slot: after the TTL grew or went, other slots
 * expire before it. */
static void rebuild_heap(queue *q)
{
    expiry_heap_clear(&q->due);
    for (uint32_t l = 0; l < q->nlevels; l++)
        for (uint32_t i = 0; i < q->levels[l].count; i++) {
            qslot *s = ring_at(&q->levels[l], i);
            if (!is_dead(s) && expires_early(q, s))
                expiry_heap_push(&q->due, (expiry_entry){s->expires_at, s->seq, l});
        }
}

/* Expires slot i of `r`: dead-lettered with reason expired, or dropped. A
 * paged-out message is read back only to be dead-lettered. */
static void expire_slot(queue *q, ring *r, uint32_t i)
{
    qslot *at = ring_at(r, i);
    if (at->paged && q->limits.has_dlx && !(i == 0 ? page_in_head(q, r) : page_in_one(q, at))) {
        take_slot(q, r, i); /* unreadable: persist_page_in settled it */
        return;
    }
    qslot s = take_slot(q, r, i);
    if (s.paged) { /* no dead-letter exchange: dropped where it lies */
        drop_paged(q, &s);
        queue_count_dead_letter(q, DEAD_EXPIRED, DEAD_DISABLED);
    } else {
        queue_dead_letter(q, item_of(s), "expired");
    }
}

/* Expires what is due at `now` -- the heads, then the heap -- within one
 * slice; false when some is left for the next. */
static bool expire_due(queue *q, uint64_t now)
{
    expiry_slice sl;
    expiry_slice_begin(&sl);
    for (uint32_t l = 0; l < q->nlevels; l++) {
        ring *r = &q->levels[l];
        uint64_t at;
        while (r->count && (at = slot_expiry(q, ring_at(r, 0))) && at <= now) {
            if (!expiry_slice_more(&sl))
                return false;
            expire_slot(q, r, 0);
            sl.done++;
        }
    }
    const expiry_entry *top;
    while ((top = expiry_heap_top(&q->due)) && top->at <= now) {
        if (!expiry_slice_more(&sl))
            return false;
        expiry_entry e = *top;
        expiry_heap_pop(&q->due);
        sl.done++; /* stale ones count too: they cost a search */
        ring *r = &q->levels[e.level];
        uint32_t i = ring_find(r, e.seq);
        uint64_t at = i < r->count ? slot_expiry(q, ring_at(r, i)) : 0;
        if (at && at <= now)
            expire_slot(q, r, i);
    }
    return true;
}

/* One slice now, the rest on the next loop turn; true when none is left. */
static bool expire_now(queue *q)
{
    uint64_t now = now_ms(q);
    bool done = expire_due(q, now);
    if (done)
        rearm(q);
    else
        arm(q, now);
    return done;
}

static void ttl_fired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    queue *q = arg;
    loop_touch_clock(vhost_loop(q->v));
    q->ttl_armed_at = 0;
    if (expire_now(q) && q->nconsumers && q->count)
        queue_dispatch(q); /* a delivery may have stopped at expired heads */
}

static void idle_fired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    queue *q = arg;
    if (q->nconsumers == 0 && !q->deleted) {
        log_msg(LOG_INFO, "queue '%s' expired (x-expires)", q->link.name);
        queue_delete(q);
    }
}

void queue_touch(queue *q)
{
    if (q->limits.expires < 0 || q->deleted)
        return;
    if (!q->idle_timer)
        q->idle_timer = evtimer_new(loop_base(vhost_loop(q->v)), idle_fired, q);
    struct timeval tv = {(time_t)(q->limits.expires / 1000),
                         (suseconds_t)(q->limits.expires % 1000) * 1000};
    if (q->idle_timer)
        evtimer_add(q->idle_timer, &tv);
}

/* ---- at-least-once dead letters ---------------------------------------- */

static void dl_retry_fired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    queue *q = arg;
    loop_touch_clock(vhost_loop(q->v));
    struct held_dead_letter *batch = q->held;
    uint32_t n = q->nheld;
    q->held = NULL, q->nheld = q->held_cap = 0;
    for (uint32_t i = 0; i < n; i++) /* one nobody takes comes back to q->held */
        queue_retry_dead_letter(q, batch[i].it, batch[i].reason);
    free(batch);
}

void queue_hold_dead_letter(queue *q, queue_item it, const char *reason)
{
    if (q->deleted) {
        msg_unref(it.m);
        return;
    }
    if (q->nheld == q->held_cap) {
        uint32_t cap = q->held_cap ? q->held_cap * 2 : 8;
        struct held_dead_letter *grown = realloc(q->held, cap * sizeof *grown);
        if (!grown) { /* kept in the journal: it comes back after a restart */
            log_msg(LOG_ERROR, "queue '%s': out of memory holding a dead letter", q->link.name);
            msg_unref(it.m);
            return;
        }
        q->held = grown, q->held_cap = cap;
    }
    q->held[q->nheld++] = (struct held_dead_letter){it, reason};
    if (!q->dl_timer)
        q->dl_timer = evtimer_new(loop_base(vhost_loop(q->v)), dl_retry_fired, q);
    struct timeval second = {1, 0};
    if (q->dl_timer && !evtimer_pending(q->dl_timer, NULL))
        evtimer_add(q->dl_timer, &second);
}

/* ---- policies ----------------------------------------------------------- */

static bool same_name(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static bool same_policy(const queue *q, const policy_applied *a, amqp_bytes eff)
{
    return same_name(q->applied.policy, a->policy) &&
           same_name(q->applied.operator_policy, a->operator_policy) &&
           amqp_bytes_equal(q->applied.definition, a->definition) &&
           amqp_bytes_equal(q->eff_args, eff);
}

/* Copies `s` (NULL stays NULL) to *at, advancing it. */
static const char *blob_str(uint8_t **at, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    memcpy(*at, s, n);
    *at += n;
    return (const char *)*at - n;
}

static amqp_bytes blob_bytes(uint8_t **at, amqp_bytes b)
{
    if (b.len)
        memcpy(*at, b.ptr, b.len);
    *at += b.len;
    return (amqp_bytes){*at - b.len, b.len};
}

static bool over_limit(const queue *q);

/* As rabbit_amqqueue_process:process_args_policy after a change. */
static void apply_limits(queue *q, uint8_t old_overflow, int64_t old_ttl)
{
    if (q->limits.expires >= 0)
        queue_touch(q);
    else if (q->idle_timer)
        event_del(q->idle_timer);
    /* max-length is applied before overflow, so the old x-overflow decides
     * first; a new drop-head then drops too */
    queue_item it;
    if (old_overflow == QUEUE_DROP_HEAD || q->limits.overflow == QUEUE_DROP_HEAD)
        while (over_limit(q) && pop_front(q, &it))
            queue_dead_letter(q, it, "maxlen");
    int64_t ttl = q->limits.message_ttl;
    if (old_ttl >= 0 && (ttl < 0 || ttl > old_ttl))
        rebuild_heap(q);
    expire_now(q);
}

bool queue_set_policy(queue *q, const policy_applied *a, amqp_bytes eff)
{
    if (same_policy(q, a, eff))
        return true;
    size_t n = (a->policy ? strlen(a->policy) + 1 : 0) +
               (a->operator_policy ? strlen(a->operator_policy) + 1 : 0) + a->definition.len +
               eff.len;
    uint8_t *blob = malloc(n ? n : 1), *at = blob;
    if (!blob)
        return false;
    policy_applied next = {.policy = blob_str(&at, a->policy),
                           .operator_policy = blob_str(&at, a->operator_policy),
                           .definition = blob_bytes(&at, a->definition)};
    amqp_bytes next_eff = blob_bytes(&at, eff);
    queue_args limits;
    queue_args_read(next_eff, &limits);
    /* fixed at declare: a policy can set neither */
    limits.max_priority = q->limits.max_priority;
    limits.single_active = q->limits.single_active;
    uint8_t old_overflow = q->limits.overflow;
    int64_t old_ttl = q->limits.message_ttl;
    if (limits.consumer_timeout != q->limits.consumer_timeout)
        for (consumer *c = q->consumers; c; c = c->q_next == q->consumers ? NULL : c->q_next)
            c->ops->timeouts_changed(c);
    free(q->policy_blob); /* nothing points into it once limits are replaced */
    q->policy_blob = blob;
    q->applied = next;
    q->eff_args = next_eff;
    q->limits = limits;
    if (q->sq)
        stream_queue_set_config(q->sq, &q->limits);
    if (!q->deleted)
        apply_limits(q, old_overflow, old_ttl);
    return true;
}

/* Declared in the policy section of queue.h; the state lives here. */
void policy_of_queue(const queue *q, policy_applied *out) { *out = q->applied; }

/* ---- consumers and dispatch --------------------------------------------- */

/* The consumer to serve next: the first one in round-robin order that can
 * take a message, or with mixed priorities the highest-priority such one. */
static consumer *pick(queue *q)
{
    consumer *start = q->consumers, *best = NULL;
    if (!start)
        return NULL;
    if (q->limits.single_active)
        return q->active->ops->can_take(q->active) ? q->active : NULL;
    consumer *c = start;
    do {
        if ((!best || c->priority > best->priority) && c->ops->can_take(c)) {
            best = c;
            if (!q->mixed_priorities)
                break;
        }
        c = c->q_next;
    } while (c != start);
    return best;
}

static void deliver_to(queue *q, consumer *c, queue_item e)
{
    if (!q->limits.single_active)
        q->consumers = c->q_next; /* round-robin: the next one goes first next time */
    c->ops->deliver(c, q, e);
}

void queue_core_dispatch(queue *q)
{
    if (q->dispatching || q->deleted)
        return;
    q->dispatching = true;
    queue_item it;
    uint32_t expired = 0;
    bool delivered = false, blocked = false;
    while (q->count) {
        consumer *c = pick(q);
        if (!c) {
            blocked = true;
            break;
        }
        if (!pop_next(q, &it, true))
            break;
        if (item_expired(q, &it)) { /* the timer is a turn late */
            queue_dead_letter(q, it, "expired");
            if (++expired == EXPIRY_SLICE_MAX) {
                arm(q, now_ms(q)); /* the rest next turn; the timer dispatches again */
                break;
            }
            continue;
        }
        deliver_to(q, c, it);
        delivered = true;
    }
    /* consumer capacity: a consumer took messages, then perhaps none could
     * take more; or the queue was emptied another way (purge, expiry) while
     * none could, and one can now */
    if (delivered)
        use_set(q, true);
    if (blocked)
        use_set(q, false);
    else if (!q->count && q->use.inactive && pick(q))
        use_set(q, true);
    q->dispatching = false;
}

static bool over_limit(const queue *q)
{
    return (q->limits.max_length >= 0 && q->count > (uint64_t)q->limits.max_length) ||
           (q->limits.max_length_bytes >= 0 && q->bytes > (uint64_t)q->limits.max_length_bytes);
}

static bool hold_until_its_time(queue *q, queue_item e);

bool queue_core_publish(queue *q, msg *m, int64_t expiration_ms)
{
    msg_ref(m);
    q->stats.n[STAT_PUBLISH]++;
    uint64_t now = now_ms(q);
    queue_item e = {.m = m,
                    .seq = q->next_seq++,
                    .enqueued_at = now,
                    .expires_at = expiration_ms >= 0 ? now + (uint64_t)expiration_ms : 0};
    if (type_of(q)->delays_publish && hold_until_its_time(q, e))
        return true;
    if (q->count == 0 && !q->dispatching) {
        consumer *c = pick(q);
        if (c) {
            deliver_to(q, c, e);
            use_set(q, true);
            return true;
        }
        use_set(q, false);
    }
    /* a quorum queue refuses once it is over its limit, so it takes the
     * message that crosses it (RabbitMQ 3.10's rabbit_fifo) */
    bool refuses_over = type_of(q)->refuses_over_limit && q->limits.overflow == QUEUE_REJECT_PUBLISH;
    if (refuses_over) {
        if (over_limit(q)) {
            msg_unref(m);
            return false;
        }
    }
    uint64_t at = expiry_of(q, e.enqueued_at, e.expires_at);
    if (at && at <= now) { /* TTL 0 and nobody to take it */
        queue_dead_letter(q, e, "expired");
        return true;
    }
    qslot slot = slot_of(e);
    uint8_t level = level_of(q, m);
    if (!push_back(q, slot, level)) {
        log_msg(LOG_ERROR, "queue '%s': out of memory, message refused", q->link.name);
        msg_unref(m);
        return false;
    }
    queue_item it;
    while (over_limit(q) && !refuses_over) {
        if (q->limits.overflow == QUEUE_DROP_HEAD) {
            if (pop_front(q, &it))
                queue_dead_letter(q, it, "maxlen");
            continue;
        }
        /* reject-publish: the newest message goes */
        it = pop_newest(q, m);
        if (q->limits.overflow == QUEUE_REJECT_PUBLISH_DLX)
            queue_dead_letter(q, it, "maxlen");
        else
            msg_unref(it.m);
        return false;
    }
    page_tail(q, m);
    if (at)
        track_expiry(q, level, &slot);
    return true;
}

/* ---- delayed retry ------------------------------------------------------ */

static void retry_fired(evutil_socket_t fd, short what, void *arg);

/* Arms the queue's one retry timer for its earliest deadline. */
static void arm_retry(queue *q)
{
    const delayed_entry *first = delayed_first(&q->delayed);
    if (!first || q->deleted)
        return;
    if (!q->retry_timer)
        q->retry_timer = evtimer_new(loop_base(vhost_loop(q->v)), retry_fired, q);
    uint64_t now = now_ms(q), wait = first->due > now ? first->due - now : 0;
    struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)(wait % 1000) * 1000};
    if (q->retry_timer)
        evtimer_add(q->retry_timer, &tv);
}

/* Holds `s` back until `due`; false on out-of-memory (then it is not). */
static bool hold_delayed(queue *q, qslot s, uint8_t level, uint64_t due)
{
    delayed_entry e = {.due = due, .s = s, .level = level};
    if (!delayed_push(&q->delayed, &e))
        return false;
    q->by_delivery_count[dc_bucket(s.delivery_count)]++;
    if (delayed_first(&q->delayed)->due == due) /* the new earliest */
        arm_retry(q);
    return true;
}

/* Puts the slots whose time has come back at their places; their TTL
 * applies from now on, at the head as for every message. */
static void retry_fired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    queue *q = arg;
    loop_touch_clock(vhost_loop(q->v));
    uint64_t now = now_ms(q);
    const delayed_entry *first;
    while ((first = delayed_first(&q->delayed)) && first->due <= now) {
        delayed_entry e = delayed_pop(&q->delayed);
        q->by_delivery_count[dc_bucket(e.s.delivery_count)]--;
        if (!insert_in_place(q, e.s, e.level)) {
            log_msg(LOG_ERROR, "queue '%s': out of memory, delayed message dropped",
                    q->link.name);
            if (!e.s.paged)
                msg_unref(e.s.m);
        }
    }
    arm_retry(q);
    queue_dispatch(q); /* expires the head too */
}

static void drop_delayed(queue *q)
{
    while (q->delayed.n) {
        delayed_entry e = delayed_pop(&q->delayed);
        q->by_delivery_count[dc_bucket(e.s.delivery_count)]--;
        if (!e.s.paged)
            msg_unref(e.s.m);
    }
    if (q->retry_timer)
        event_del(q->retry_timer);
}

uint32_t queue_delayed_count(const queue *q) { return q->delayed.n; }

/* A new message whose x-opt-delivery-time lies ahead waits for it as a
 * delayed retry does, then takes its place (by its sequence: ahead of the
 * messages published after it; RabbitMQ puts it with the returns, ahead
 * of every ready message). */
static bool hold_until_its_time(queue *q, queue_item e)
{
    uint64_t at = queue_delivery_time(msg_properties(e.m)), wall;
    if (!at || at <= (wall = delayed_wall_ms()) || q->deleted || vhost_closing(q->v) ||
        !hold_delayed(q, slot_of(e), level_of(q, e.m), now_ms(q) + (at - wall)))
        return false;
    persist_delayed(q, e.m, at);
    return true;
}

/* A return past x-delivery-limit dead-letters the message, as RabbitMQ's
 * quorum queues do: its delivery count is its returns so far, this one
 * included. The limit comes first: a message over it is not delayed. */
void queue_core_requeue(queue *q, queue_item e, queue_return why)
{
    msg_ref(e.m);
    if (q->limits.delivery_limit >= 0 && e.delivery_count > q->limits.delivery_limit) {
        q->delivery_limit_dead++;
        queue_dead_letter(q, e, "delivery_limit");
        return;
    }
    uint8_t level = level_of(q, e.m);
    uint64_t delay = queue_retry_delay_ms(&q->limits, why, e.delivery_count);
    /* a stopping broker keeps no new deadline: the message is simply back */
    if (delay && !q->deleted && !vhost_closing(q->v) &&
        hold_delayed(q, slot_of(e), level, now_ms(q) + delay)) {
        persist_delayed(q, e.m, delayed_wall_ms() + delay);
        return;
    }
    if (!insert_in_place(q, slot_of(e), level)) {
        log_msg(LOG_ERROR, "queue '%s': out of memory, requeued message dropped", q->link.name);
        msg_unref(e.m);
    }
}

bool queue_core_get(queue *q, queue_item *out)
{
    queue_touch(q);
    for (uint32_t expired = 0; pop_next(q, out, true);) {
        if (!item_expired(q, out))
            return true;
        queue_dead_letter(q, *out, "expired"); /* the timer is a turn late */
        if (++expired == EXPIRY_SLICE_MAX) {
            arm(q, now_ms(q));
            break;
        }
    }
    return false;
}

/* Recovery appends in journal order; limits and TTLs (the queue's and the
 * message's own expiration) apply from now. A deadline still ahead (wall
 * clock) holds the message back that long, one already past makes it ready
 * at once. */
void queue_restore(queue *q, const queue_paged *p)
{
    uint64_t now = now_ms(q);
    qslot s = {.id = p->id,
               .paged = true,
               .loc = p->loc,
               .body_size = p->body_size,
               .seq = q->next_seq++,
               .delivery_count = p->delivery_count & 0x1fffffff,
               .maybe_delivered = p->maybe_delivered,
               .enqueued_at = now,
               .expires_at = p->expiration_ms >= 0 ? now + (uint64_t)p->expiration_ms : 0};
    uint8_t level = level_for(q, p->priority);
    uint64_t wall = p->delayed_until ? delayed_wall_ms() : 0;
    if (p->delayed_until > wall && hold_delayed(q, s, level, now + (p->delayed_until - wall)))
        return;
    if (!push_back(q, s, level))
        log_msg(LOG_ERROR, "queue '%s': out of memory restoring a message", q->link.name);
    else
        track_expiry(q, level, &s);
}

/* Delayed messages go too (as LavinMQ purges its retry queue): they wait
 * for nobody but the clock. Unacked ones stay with their consumers. */
static void settle_dropped(queue *q, const qslot *s)
{
    if (s->paged && !s->spilled) /* spilled ones: drop_all */
        persist_settle_paged(q, s->id, s->loc, JOURNAL_DROP);
    else if (!s->paged)
        persist_settle(q, s->m, JOURNAL_DROP);
}

/* One purge record empties all of the queue's journal entries, unacked
 * deliveries too (which must come back after a crash); with deliveries
 * outstanding, each ready and delayed message is settled on its own. */
static void journal_purge(queue *q)
{
    if (!q->unacked) {
        persist_queue_emptied(q, false);
        return;
    }
    for (uint32_t l = 0; l < q->nlevels; l++)
        for (uint32_t i = 0; i < q->levels[l].count; i++)
            if (!is_dead(ring_at(&q->levels[l], i)))
                settle_dropped(q, ring_at(&q->levels[l], i));
    for (uint32_t i = 0; i < q->delayed.n; i++)
        settle_dropped(q, &q->delayed.v[i].s);
}

/* A purge frees the keys of what it drops (unacked messages keep theirs). */
static void dedup_forget_ready(queue *q)
{
    for (uint32_t l = 0; l < q->nlevels; l++)
        for (uint32_t i = 0; i < q->levels[l].count; i++) {
            const qslot *s = ring_at(&q->levels[l], i);
            if (!is_dead(s))
                queue_dedup_release(q, s->paged ? s->id : msg_id(s->m));
        }
    for (uint32_t i = 0; i < q->delayed.n; i++) {
        const qslot *s = &q->delayed.v[i].s;
        queue_dedup_release(q, s->paged ? s->id : msg_id(s->m));
    }
}

uint32_t queue_core_purge(queue *q)
{
    uint32_t n = q->count + q->delayed.n;
    if (q->dedup)
        dedup_forget_ready(q);
    if (n && !q->deleted && !vhost_closing(q->v))
        journal_purge(q);
    drop_all(q);
    drop_delayed(q);
    expiry_heap_clear(&q->due);
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
    use_set(q, true);
    if (!q->active)
        q->active = cons;
    if (cons->exclusive)
        q->exclusive_consumers++;
    update_priorities(q);
}

void queue_remove_consumer(queue *q, consumer *cons)
{
    if (q->active == cons) /* the next oldest takes over */
        q->active = cons->q_next != cons ? cons->q_next : NULL;
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
    if (type_of(q)->ops->consumer_gone)
        type_of(q)->ops->consumer_gone(q, cons);
    update_priorities(q);
    if (q->nconsumers == 0)
        queue_touch(q);
    if (q->auto_delete && q->nconsumers == 0 && !q->deleted)
        queue_delete(q);
}

void queue_core_delete(queue *q)
{
    if (q->deleted)
        return;
    q->deleted = true;
    server_counts *k = loop_counters(vhost_loop(q->v));
    for (int f = STAT_DELIVER; f <= STAT_REDELIVER; f++)
        k->by_queue_type[q->limits.type][f] += q->stats.n[f];
    if (!vhost_closing(q->v)) {
        persist_queue_emptied(q, true);
        k->queues_deleted++;
    }
    durable_queue_deleted(q->v, q);
    queue_dedup_close(q);
    route_unbind_queue(vhost_routes(q->v), q);
    vhost_queue_remove(q->v, q);
    while (q->consumers) {
        consumer *c = q->consumers;
        queue_remove_consumer(q, c);
        c->ops->cancelled(c);
    }
    queue_purge(q);
    drop_held(q);
    if (!vhost_closing(q->v)) { /* deleted: its files go with it (else freed, kept) */
        stream_queue_close(q->sq, true);
        q->sq = NULL;
    }
    if (q->dl_timer)
        event_del(q->dl_timer);
    if (q->ttl_timer)
        event_del(q->ttl_timer);
    q->ttl_armed_at = 0;
    if (q->idle_timer)
        event_del(q->idle_timer);
    queue_release(q);
}

/* ---- introspection (management API) ------------------------------------ */

stats *queue_stats(queue *q) { return &q->stats; }

/* `memory` is what the queue itself holds: its struct, arguments, ring
 * slots and expiry heap. Message bodies are shared between queues and
 * counted once, in msg_pool_memory. */
void queue_core_describe(queue *q, queue_info *out)
{
    size_t memory = sizeof *q + q->args_len + q->nlevels * sizeof *q->levels;
    for (uint32_t i = 0; i < q->nlevels; i++)
        memory += q->levels[i].cap * sizeof(qslot);
    memory += q->delayed.cap * sizeof(delayed_entry);
    memory += q->due.cap * sizeof(expiry_entry);
    *out = (queue_info){.ready = q->count,
                        .unacked = q->unacked,
                        .consumers = q->nconsumers,
                        .ready_bytes = q->bytes,
                        .unacked_bytes = q->unacked_bytes,
                        .paged = q->paged,
                        .paged_bytes = q->paged_bytes,
                        .persistent = q->persistent,
                        .persistent_bytes = q->persistent_bytes,
                        .consumer_capacity = consumer_capacity(q),
                        .memory = memory,
                        .oldest_ready_ms = queue_oldest_ready_ms(q),
                        .delivery_limit_dead = q->delivery_limit_dead,
                        .consumer_timeouts = q->consumer_timeouts,
                        .dead_letters_held = q->nheld,
                        .delayed = q->delayed.n,
                        .active_consumer = q->limits.single_active ? q->active : NULL,
                        .stats = &q->stats};
    queue_delivery_counts(q, out->delivery_counts);
    for (uint32_t i = 0; i < q->nheld; i++)
        out->dead_letter_bytes_held += msg_body_size(q->held[i].it.m);
    /* an exclusive consumer is its queue's only one */
    out->exclusive_consumer = q->exclusive_consumers ? q->consumers : NULL;
}

consumer *queue_next_consumer(queue *q, consumer *prev)
{
    if (!prev)
        return q->consumers;
    return prev->q_next == q->consumers ? NULL : prev->q_next;
}

/* ---- through the queue's type ------------------------------------------- */

/* A duplicate in a deduplicating queue is dropped as accepted: the
 * publisher's confirm is an ack, as the plugin's is_duplicate gives.
 * Out of line: a plain queue's publish stays a test and a call. */
static __attribute__((noinline, cold)) bool publish_dedup(queue *q, msg *m, int64_t expiration_ms)
{
    if (!queue_dedup_admit(q, m)) {
        persist_settle(q, m, JOURNAL_DROP); /* its id holds no key: nothing released */
        return true;
    }
    bool taken = type_of(q)->ops->publish(q, m, expiration_ms);
    if (!taken)
        queue_dedup_release(q, msg_id(m));
    return taken;
}

bool queue_publish(queue *q, msg *m, int64_t expiration_ms)
{
    if (__builtin_expect(q->dedup != NULL, 0))
        return publish_dedup(q, m, expiration_ms);
    return type_of(q)->ops->publish(q, m, expiration_ms);
}
bool queue_get(queue *q, queue_item *it) { return type_of(q)->ops->get(q, it); }
void queue_requeue(queue *q, queue_item it, queue_return why) { type_of(q)->ops->requeue(q, it, why); }
void queue_delivery_settled(queue *q, uint32_t count, const msg *m)
{
    type_of(q)->ops->settled(q, count, m);
}
uint32_t queue_purge(queue *q) { return type_of(q)->ops->purge(q); }
void queue_dispatch(queue *q) { type_of(q)->ops->dispatch(q); }
int queue_consume_check(queue *q, consumer *c, amqp_bytes args, amqp_error *err)
{
    return type_of(q)->ops->consume ? type_of(q)->ops->consume(q, c, args, err) : AMQP_OK;
}
void queue_delete(queue *q) { type_of(q)->ops->delete(q); }
void queue_describe(queue *q, queue_info *out) { type_of(q)->ops->describe(q, out); }
