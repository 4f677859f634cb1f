/* Persistence of messages: a persistent message (delivery mode 2) routed to
 * durable queues is written to the journal once, with an enqueue record per
 * durable queue; every way it leaves such a queue (ack, drop, dead-letter,
 * purge, queue deletion) is a settle record, and every delivery a delivered
 * record, so its delivery count survives a restart, and a delay (held back
 * until a time) a delayed record. Moving a message to other queues (dead-
 * lettering, redrive) settles it in its queue and enqueues its copy in the
 * targets in one atomic group of the journal: after a crash it is in
 * exactly one of the two places. Publisher confirms and tx.commit-ok for
 * such messages wait for the journal's sync (chan.c).
 *
 * Recovery replays the journal into a list of live entries, in append
 * order, and puts each back in its queue paged out (queue.c), with its
 * delivery count, so a message that was delivered but not acked comes back
 * redelivered. Bodies are not read: a message's size, priority and
 * expiration are noted while its record is replayed.
 *
 * Paging reads a message back when its queue is about to deliver it.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "queue.h"
#include "queue_internal.h"

static journal *journal_of(queue *q) { return server_journal(vhost_server(queue_vhost(q))); }

/* Whether this queue keeps `m` in the journal. */
static bool journaled_in(queue *q, const msg *m)
{
    return msg_journaled(m) && durable_queue(q) && queue_store_id(q) && journal_of(q) &&
           (!msg_journaled_transient(m) || queue_type_of(q)->journals_transient);
}

/* Some types (quorum) keep every message durably, whatever its delivery mode. */
static bool keeps(queue *q, bool persistent)
{
    return durable_queue(q) && queue_store_id(q) && !queue_type_of(q)->own_log &&
           (persistent || queue_type_of(q)->journals_transient);
}

journal_seq persist_publish(server *s, msg *m, queue **queues, size_t n)
{
    journal *j = server_journal(s);
    journal_seq seq = 0;
    if (!j)
        return 0;
    bool persistent = msg_persistent(m);
    for (size_t i = 0; i < n; i++) {
        queue *q = queues[i];
        if (!keeps(q, persistent))
            continue;
        if (!persistent && !msg_journaled(m))
            msg_set_journaled_transient(m);
        journal_loc loc;
        if (!msg_journal_loc(m, &loc) || !journal_message_at(j, msg_id(m), loc, &loc)) {
            seq = journal_append_message(j, msg_id(m), msg_exchange(m), msg_routing_key(m),
                                         msg_properties(m),
                                         (amqp_bytes){msg_body(m), (uint32_t)msg_body_size(m)},
                                         &loc);
            msg_set_journal_loc(m, loc);
        }
        seq = journal_append_enqueue(j, queue_store_id(q), msg_id(m), loc);
    }
    return seq;
}

static void settle(queue *q, uint64_t id, journal_loc loc, journal_settle_kind kind)
{
    amqp_bytes reason = {0}, target = {0};
    if (kind == JOURNAL_DEAD_LETTER)
        target = queue_get_args(q)->dlx;
    journal_append_settle(journal_of(q), queue_store_id(q), id, loc, kind, reason, target);
}

/* Whether persist_publish would journal `m` in one of the queues. */
static bool journals_into(const msg *m, queue **queues, size_t n)
{
    bool persistent = msg_persistent(m);
    for (size_t i = 0; i < n; i++)
        if (keeps(queues[i], persistent))
            return true;
    return false;
}

journal_seq persist_move(queue *from, const msg *m, journal_settle_kind kind, const char *reason,
                         msg *copy, queue **to, size_t n)
{
    if (*queue_dedup_slot(from)) /* before the copy may come back to `from` */
        queue_dedup_release(from, msg_id(m));
    server *s = vhost_server(queue_vhost(from));
    journal *j = server_journal(s);
    journal_loc loc;
    bool leaves = journaled_in(from, m) && msg_journal_loc(m, &loc);
    bool arrives = j && journals_into(copy, to, n);
    if (leaves && arrives)
        journal_group_begin(j);
    if (leaves)
        journal_append_settle(j, queue_store_id(from), msg_id(m), loc, kind, AMQP_CSTR(reason),
                              msg_exchange(copy));
    journal_seq seq = arrives ? persist_publish(s, copy, to, n) : 0;
    if (leaves && arrives)
        seq = journal_group_end(j);
    return seq;
}

static inline void settle_journaled(queue *q, const msg *m, journal_settle_kind kind)
{
    journal_loc loc;
    if (journaled_in(q, m) && msg_journal_loc(m, &loc))
        settle(q, msg_id(m), loc, kind);
}

/* A deduplicating queue frees the key of a message it settles; out of
 * line, so a plain queue's settle keeps its frame-less fast path. */
static __attribute__((noinline, cold)) void settle_dedup(queue *q, const msg *m,
                                                         journal_settle_kind kind)
{
    settle_journaled(q, m, kind);
    queue_dedup_release(q, msg_id(m));
}

/* Every message leaving a queue for good is settled here, journaled or
 * not: where a deduplicating queue frees its key. */
void persist_settle(queue *q, const msg *m, journal_settle_kind kind)
{
    if (__builtin_expect(*queue_dedup_slot(q) != NULL, 0))
        settle_dedup(q, m, kind);
    else
        settle_journaled(q, m, kind);
}

void persist_settle_paged(queue *q, uint64_t id, journal_loc loc, journal_settle_kind kind)
{
    settle(q, id, loc, kind); /* only what this queue journaled is paged out */
    if (__builtin_expect(*queue_dedup_slot(q) != NULL, 0))
        queue_dedup_release(q, id);
}

void persist_delivered(queue *q, const msg *m, uint32_t count)
{
    if (journaled_in(q, m))
        journal_append_delivered(journal_of(q), queue_store_id(q), msg_id(m), count);
}

void persist_delayed(queue *q, const msg *m, uint64_t until_ms)
{
    if (journaled_in(q, m))
        journal_append_delayed(journal_of(q), queue_store_id(q), msg_id(m), until_ms);
}

void persist_queue_emptied(queue *q, bool deleted)
{
    journal *j = journal_of(q);
    if (!j || !durable_queue(q) || !queue_store_id(q))
        return;
    if (deleted)
        journal_append_queue_delete(j, queue_store_id(q));
    else
        journal_append_purge(j, queue_store_id(q));
}

/* ---- paging ------------------------------------------------------------- */

bool persist_pageable(queue *q, const msg *m) { return journaled_in(q, m); }

/* A message record read back: a new message with its old identity. */
static msg *message_of(msg_pool *pool, const journal_message *jm, uint64_t id,
                       journal_loc loc)
{
    msg *m = msg_new(pool, jm->exchange, jm->routing_key, jm->properties, jm->body.len);
    if (m) {
        msg_append_body(m, jm->body.ptr, jm->body.len);
        msg_restore_identity(m, id, loc);
    }
    return m;
}

enum { PAGE_IN_SPAN = 256 * 1024 }; /* bytes read at once when paging in */

size_t persist_page_in(queue *q, const uint64_t *ids, const journal_loc *locs, size_t n,
                       msg **out)
{
    loop *l = vhost_loop(queue_vhost(q));
    size_t want = locs[0].length > PAGE_IN_SPAN ? locs[0].length : PAGE_IN_SPAN, cap;
    uint8_t *buf = loop_read_buffer(l, want, &cap);
    journal_message jm[PAGE_IN_MAX];
    n = n < PAGE_IN_MAX ? n : PAGE_IN_MAX;
    size_t got = buf ? journal_read_messages(journal_of(q), ids, locs, n, buf, cap, jm) : 0;
    size_t made = 0;
    while (made < got && (out[made] = message_of(loop_msgs(l), &jm[made], ids[made], locs[made])))
        made++;
    if (made == 0) {
        log_msg(LOG_ERROR, "queue '%s': message %llu could not be read back from the journal; "
                "it is dropped", (const char *)queue_name(q).ptr, (unsigned long long)ids[0]);
        settle(q, ids[0], locs[0], JOURNAL_DROP);
    }
    return made;
}

/* ---- recovery ----------------------------------------------------------- */

struct msg_info {
    uint32_t body_size;
    uint8_t priority;
    int64_t expiration_ms; /* -1 = none */
};

/* A live (queue, message) entry found by replay. */
typedef struct entry {
    uint64_t queue_id, msg_id;
    journal_loc loc;
    uint64_t delayed_until;
    int64_t expiration_ms; /* -1 = none */
    uint32_t count, body_size;
    uint8_t priority;
    bool live;
} entry;

/* Open addressing from a key to a value; keys are never 0. */
typedef struct index_map {
    uint64_t *keys;
    uint64_t *vals;
    size_t cap, n;
} index_map;

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    return k ^ (k >> 33);
}

static bool map_put(index_map *m, uint64_t key, uint64_t val);

static bool map_grow(index_map *m)
{
    index_map g = {.cap = m->cap ? m->cap * 2 : 1024};
    g.keys = calloc(g.cap, sizeof *g.keys);
    g.vals = calloc(g.cap, sizeof *g.vals);
    if (!g.keys || !g.vals) {
        free(g.keys);
        free(g.vals);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i])
            map_put(&g, m->keys[i], m->vals[i]);
    free(m->keys);
    free(m->vals);
    *m = g;
    return true;
}

static bool map_put(index_map *m, uint64_t key, uint64_t val)
{
    if ((m->n + 1) * 2 > m->cap && !map_grow(m))
        return false;
    size_t i = mix(key) & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    m->n += !m->keys[i];
    m->keys[i] = key;
    m->vals[i] = val;
    return true;
}

static bool map_get(const index_map *m, uint64_t key, uint64_t *val)
{
    if (!m->cap)
        return false;
    size_t i = mix(key) & (m->cap - 1);
    for (; m->keys[i]; i = (i + 1) & (m->cap - 1))
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return true;
        }
    return false;
}

typedef struct replay {
    entry *entries;
    size_t n, cap;
    index_map by_entry; /* (queue, message) -> entry index */
    journal *j;
    uint64_t last_id; /* the message record just replayed, and what restore needs of it */
    struct msg_info last_info;
    uint64_t max_msg_id;
    bool unordered; /* an entry came after a newer message's: restore sorts */
    bool oom;
} replay;

static uint64_t entry_key(uint64_t queue_id, uint64_t msg_id)
{
    return mix(queue_id * 0x9E3779B97F4A7C15ull) ^ msg_id ^ 1;
}

static entry *find_entry(replay *r, uint64_t queue_id, uint64_t msg_id)
{
    uint64_t i;
    return map_get(&r->by_entry, entry_key(queue_id, msg_id), &i) ? &r->entries[i] : NULL;
}

/* A valid expiration (checked at publish): decimal milliseconds. */
static int64_t expiration_of(amqp_bytes s)
{
    int64_t ms = 0;
    for (uint32_t i = 0; i < s.len && ms <= INT64_MAX / 10 - 10; i++)
        ms = ms * 10 + (s.ptr[i] - '0');
    return ms;
}

/* What a queue needs of a message it restores paged out. */
static struct msg_info info(const journal_message *m)
{
    amqp_basic_properties p;
    struct msg_info in = {.body_size = m->body.len, .expiration_ms = -1};
    uint16_t flags = m->properties.len >= 2 ? (uint16_t)(m->properties.ptr[0] << 8) : 0;
    if (!(flags & (AMQP_BASIC_PRIORITY_FLAG | AMQP_BASIC_EXPIRATION_FLAG)) ||
        amqp_properties_decode(m->properties, &p, NULL) != AMQP_OK)
        return in;
    if (p.flags & AMQP_BASIC_PRIORITY_FLAG)
        in.priority = p.priority;
    if (p.flags & AMQP_BASIC_EXPIRATION_FLAG)
        in.expiration_ms = expiration_of(p.expiration);
    return in;
}

/* A message's enqueues follow its record, so remembering the last one
 * serves almost every enqueue; the rest read the record back. */
static void on_message(void *ctx, uint64_t msg_id, journal_loc loc, const journal_message *m)
{
    (void)loc;
    replay *r = ctx;
    r->last_id = msg_id;
    r->last_info = info(m);
}

static struct msg_info info_of(replay *r, uint64_t msg_id, journal_loc loc)
{
    if (msg_id == r->last_id)
        return r->last_info;
    uint8_t *buf = malloc(loc.length);
    journal_message m;
    struct msg_info found = {.expiration_ms = -1};
    if (buf && journal_read_message(r->j, loc, buf, &m))
        found = info(&m);
    free(buf);
    return found;
}

static void on_enqueue(void *ctx, uint64_t queue_id, uint64_t msg_id, journal_loc loc)
{
    replay *r = ctx;
    entry *moved = find_entry(r, queue_id, msg_id);
    if (moved && moved->live) { /* compaction moved it: same place in the queue */
        moved->loc = loc;
        return;
    }
    r->unordered |= msg_id < r->max_msg_id;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 1024;
        entry *e = realloc(r->entries, cap * sizeof *e);
        if (!e) {
            r->oom = true;
            return;
        }
        r->entries = e;
        r->cap = cap;
    }
    struct msg_info in = info_of(r, msg_id, loc);
    r->entries[r->n] = (entry){.queue_id = queue_id,
                               .msg_id = msg_id,
                               .loc = loc,
                               .body_size = in.body_size,
                               .priority = in.priority,
                               .expiration_ms = in.expiration_ms,
                               .live = true};
    if (!map_put(&r->by_entry, entry_key(queue_id, msg_id), r->n))
        r->oom = true;
    r->n++;
    if (msg_id > r->max_msg_id)
        r->max_msg_id = msg_id;
}

static void on_settle(void *ctx, uint64_t queue_id, uint64_t msg_id, journal_settle_kind kind)
{
    (void)kind;
    entry *e = find_entry(ctx, queue_id, msg_id);
    if (e)
        e->live = false;
}

static void on_delivered(void *ctx, uint64_t queue_id, uint64_t msg_id, uint32_t count)
{
    entry *e = find_entry(ctx, queue_id, msg_id);
    if (e)
        e->count = count;
}

static void on_delayed(void *ctx, uint64_t queue_id, uint64_t msg_id, uint64_t until_ms)
{
    entry *e = find_entry(ctx, queue_id, msg_id);
    if (e)
        e->delayed_until = until_ms;
}

static void on_queue_emptied(void *ctx, uint64_t queue_id)
{
    replay *r = ctx;
    for (size_t i = 0; i < r->n; i++)
        if (r->entries[i].queue_id == queue_id)
            r->entries[i].live = false;
}

static int by_queue_and_id(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->queue_id != y->queue_id)
        return x->queue_id < y->queue_id ? -1 : 1;
    return (x->msg_id > y->msg_id) - (x->msg_id < y->msg_id);
}

/* Hands every live entry on, in journal order -- or in message id order
 * when compaction moved entries (ids grow with time). */
static void restore(replay *r, bool clean,
                    void (*each)(void *ctx, uint64_t queue_id, const queue_paged *p), void *ctx)
{
    if (r->unordered)
        qsort(r->entries, r->n, sizeof *r->entries, by_queue_and_id);
    for (size_t i = 0; i < r->n; i++) {
        entry *e = &r->entries[i];
        if (!e->live)
            continue;
        queue_paged p = {.id = e->msg_id,
                         .loc = e->loc,
                         .body_size = e->body_size,
                         .priority = e->priority,
                         .delivery_count = e->count,
                         .maybe_delivered = !clean,
                         .delayed_until = e->delayed_until,
                         .expiration_ms = e->expiration_ms};
        each(ctx, e->queue_id, &p);
    }
}

static long long ms_between(struct timespec a, struct timespec b)
{
    return (long long)(b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
}

bool persist_replay(journal *j, bool clean,
                    void (*each)(void *ctx, uint64_t queue_id, const queue_paged *p), void *ctx,
                    uint64_t *max_msg_id)
{
    static const journal_replay_handlers h = {
        .message = on_message,
        .enqueue = on_enqueue,
        .settle = on_settle,
        .delivered = on_delivered,
        .purge = on_queue_emptied,
        .queue_delete = on_queue_emptied,
        .delayed = on_delayed,
    };
    replay r = {.j = j};
    journal_replay_stats st;
    char err[256];
    struct timespec t0, t1, t2;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool ok = journal_replay(j, &h, &r, &st, err, sizeof err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!ok)
        log_msg(LOG_ERROR, "journal replay failed: %s", err);
    else if (r.oom)
        log_msg(LOG_ERROR, "out of memory replaying the journal");
    ok = ok && !r.oom;
    if (ok)
        restore(&r, clean, each, ctx);
    *max_msg_id = r.max_msg_id;
    clock_gettime(CLOCK_MONOTONIC, &t2);
    log_msg(LOG_INFO,
            "journal: %llu records in %llu segments replayed%s in %lld ms, live entries "
            "restored%s in %lld ms, %llu corrupt records skipped, %llu bytes truncated after "
            "the last records, %llu incomplete atomic groups dropped",
            (unsigned long long)st.records, (unsigned long long)st.segments,
            st.from_checkpoint ? " from a checkpoint" : "", ms_between(t0, t1),
            clean ? "" : " after an unclean stop", ms_between(t1, t2),
            (unsigned long long)st.corrupt_records, (unsigned long long)st.torn_tail_bytes,
            (unsigned long long)st.incomplete_groups);
    free(r.entries);
    free(r.by_entry.keys);
    free(r.by_entry.vals);
    return ok;
}

/* Recovery's target: store id -> queue, remembered (entries of many queues
 * interleave; 0: the queue is gone). */
typedef struct restorer {
    server *s;
    index_map queues;
    uint64_t last_id;
    void *last; /* a queue, or with XDELAY_ID_BIT a delayed exchange's xdelay */
    size_t restored;
    bool clock_set;
} restorer;

static void touch_clocks(server *s)
{
    for (size_t i = 0; i < server_loop_count(s); i++)
        loop_touch_clock(server_loop(s, i));
}

static void restore_into_queue(void *ctx, uint64_t queue_id, const queue_paged *p)
{
    restorer *rs = ctx;
    if (!rs->clock_set) { /* replay took a while: restored entries are enqueued now */
        touch_clocks(rs->s);
        rs->clock_set = true;
    }
    if (queue_id != rs->last_id) {
        uint64_t found;
        rs->last_id = queue_id;
        if (map_get(&rs->queues, queue_id, &found)) {
            rs->last = (void *)(uintptr_t)found;
        } else {
            rs->last = queue_id & XDELAY_ID_BIT ? (void *)xdelay_by_store_id(rs->s, queue_id)
                                                : (void *)queue_by_store_id(rs->s, queue_id);
            map_put(&rs->queues, queue_id, (uint64_t)(uintptr_t)rs->last);
        }
    }
    if (rs->last && (queue_id & XDELAY_ID_BIT))
        xdelay_restore(rs->last, p);
    else if (rs->last)
        queue_restore(rs->last, p);
    rs->restored += rs->last != NULL;
}

bool persist_recover(server *s, journal *j, bool clean)
{
    restorer rs = {.s = s};
    uint64_t max_id = 0;
    bool ok = persist_replay(j, clean, restore_into_queue, &rs, &max_id);
    for (size_t i = 0; i < server_loop_count(s); i++)
        msg_reserve_ids(loop_msgs(server_loop(s, i)), max_id);
    touch_clocks(s);
    log_msg(LOG_INFO, "journal: %zu messages restored into their queues", rs.restored);
    free(rs.queues.keys);
    free(rs.queues.vals);
    return ok;
}
