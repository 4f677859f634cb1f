/* Compaction of sparse segments (journal_int.h says what and why).
 *
 * A compaction runs in steps on the loop thread, each bounded so that the
 * loop never stalls for long: first it collects the live entries whose
 * message record is in the segment (COLLECT_SLOTS index slots a step),
 * then it reads the segment (STEP_BYTES a step) and appends again what
 * live entries still need of it:
 * - a message record with live entries here: copied once (same msg_id),
 *   then each such entry moved to the copy by an enqueue record;
 * - an enqueue record of a live entry whose message is elsewhere: the entry
 *   moved (to where its message is now);
 * - a delivered record holding an entry's newest count, a delayed record
 *   holding its newest delay: appended again.
 * A moved entry's delivery count and delay go with it. When the last step is done
 * the segment pins nothing; GC deletes it after the copies are on disk.
 * Between steps the broker appends as usual: new records never land in a
 * closed segment, and an entry settled meanwhile is simply not found.
 */
#include <assert.h>
#include <stdlib.h>
#include <time.h>

#include <event2/event.h>

#include "journal_int.h"

enum {
    STEP_BYTES = 256u << 10, /* segment bytes read per step (the next ones read ahead) */
    COLLECT_SLOTS = 1u << 16, /* index slots examined per step */
    MIN_MSGS = 16,            /* smaller segments are not worth it */
};

typedef struct jmoved {
    uint64_t msg_id; /* 0: empty slot */
    journal_loc loc;
} jmoved;

/* A live entry to carry: message msg_id in queue queue_id. */
typedef struct jpair {
    uint64_t msg_id, queue_id;
} jpair;

typedef struct jcompact {
    uint32_t seg;
    uint64_t off, end; /* next record to read; the segment's size */
    /* collecting: position in the queue map and in that queue's entries */
    bool collecting;
    uint32_t qslot, eslot;
    jpair *pairs; /* sorted by msg_id once collected */
    size_t npairs, cappairs;
    uint8_t *buf;
    size_t cap;
    uint64_t copied_msgs, moved_entries;
    uint64_t steps, longest_step_us; /* reported: the loop must not stall */
} jcompact;

/* ---- where moved messages are ------------------------------------------ */

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    return k ^ (k >> 33);
}

static void moved_insert(jmoved *slots, uint32_t mask, uint64_t id, journal_loc loc, bool *added)
{
    uint32_t i = (uint32_t)mix(id) & mask;
    while (slots[i].msg_id && slots[i].msg_id != id)
        i = (i + 1) & mask;
    *added = slots[i].msg_id == 0;
    slots[i] = (jmoved){id, loc};
}

/* Rebuilds the map with room for `want` entries, keeping those keep() says. */
static void moved_rebuild(journal *j, uint32_t want, bool (*keep)(journal *, uint64_t))
{
    struct jmoved_map *m = &j->moved;
    uint32_t cap = 64;
    while (cap < want * 2)
        cap *= 2;
    jmoved *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        journal_oom(j, "the moved-message map");
    uint32_t count = 0;
    bool added;
    for (uint32_t i = 0; m->slots && i <= m->mask; i++) {
        if (m->slots[i].msg_id && (!keep || keep(j, m->slots[i].msg_id))) {
            moved_insert(slots, cap - 1, m->slots[i].msg_id, m->slots[i].loc, &added);
            count++;
        }
    }
    free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    m->count = count;
    m->swept_at = count;
}

static void moved_put(journal *j, uint64_t id, journal_loc loc)
{
    struct jmoved_map *m = &j->moved;
    if (m->slots == NULL || (m->count + 1) * 2 > m->mask + 1)
        moved_rebuild(j, m->count + 1, NULL);
    bool added;
    moved_insert(m->slots, m->mask, id, loc, &added);
    m->count += added;
}

journal_loc journal_moved_loc(const journal *j, uint64_t msg_id, journal_loc was)
{
    const struct jmoved_map *m = &j->moved;
    if (m->count == 0)
        return was;
    for (uint32_t i = (uint32_t)mix(msg_id) & m->mask; m->slots[i].msg_id; i = (i + 1) & m->mask)
        if (m->slots[i].msg_id == msg_id)
            return m->slots[i].loc;
    return was;
}

/* Whether any queue still holds the message. */
static bool held(journal *j, uint64_t msg_id)
{
    for (uint32_t i = 0; j->queues.slots && i <= j->queues.mask; i++) {
        jqueue *q = j->queues.slots[i].q;
        if (q && journal_entry_find(&q->entries, msg_id))
            return true;
    }
    return false;
}

void journal_moved_sweep(journal *j)
{
    if (j->moved.count > 2 * j->moved.swept_at + 1024)
        moved_rebuild(j, j->moved.count, held);
}

/* ---- compaction ------------------------------------------------------- */

static void step(evutil_socket_t fd, short what, void *arg);

void journal_compact_free(journal *j)
{
    if (j->compact) {
        free(j->compact->pairs);
        free(j->compact->buf);
        free(j->compact);
        j->compact = NULL;
    }
    if (j->compact_ev) {
        event_free(j->compact_ev);
        j->compact_ev = NULL;
    }
    free(j->moved.slots);
    j->moved = (struct jmoved_map){0};
}

static void finish(journal *j, const char *why)
{
    jcompact *c = j->compact;
    if (why)
        journal_log(j, JLOG_WARNING, "segment %u: compaction stopped: %s", c->seg, why);
    else
        journal_log(j, JLOG_INFO,
                    "segment %u compacted: %llu messages copied, %llu entries moved, in %llu "
                    "steps of at most %llu us",
                    c->seg, (unsigned long long)c->copied_msgs,
                    (unsigned long long)c->moved_entries, (unsigned long long)c->steps,
                    (unsigned long long)c->longest_step_us);
    free(c->pairs);
    free(c->buf);
    free(c);
    j->compact = NULL;
}

/* The next step runs on a later loop turn, after the sockets are served:
 * a zero timer, not event_active, which would run every step in this pass. */
static void schedule_step(journal *j)
{
    static const struct timeval now = {0, 0};
    evtimer_add(j->compact_ev, &now);
}

static bool sparse(const journal *j, const jseg *s)
{
    return s != j->active && s->scanned && !s->compacted && s->pins > 0 && s->msgs >= MIN_MSGS &&
           s->pins * 2 <= s->msgs;
}

/* A segment whose pins fell since the last tick is being drained (consumers,
 * expiry): copying what is about to be settled anyway would only cost reads. */
static bool draining(jseg *s)
{
    bool falling = s->pins < s->pins_at_tick;
    s->pins_at_tick = s->pins;
    return falling;
}

void journal_compact_maybe_start(journal *j)
{
    if (j->compact || !j->replayed || atomic_load(&j->failed))
        return;
    for (size_t i = 0; i < j->nsegs; i++) {
        jseg *s = j->segs[i];
        if (draining(s) || !sparse(j, s))
            continue;
        pthread_mutex_lock(&j->mu);
        bool written = s->num < j->written_seg;
        pthread_mutex_unlock(&j->mu);
        if (!written)
            return; /* older segments are written first: none further on is */
        if (j->compact_ev == NULL && (j->compact_ev = event_new(j->base, -1, 0, step, j)) == NULL)
            return;
        jcompact *c = calloc(1, sizeof *c);
        if (c == NULL)
            return;
        *c = (jcompact){.seg = s->num, .off = SEG_HEADER_SIZE, .end = s->size, .collecting = true};
        s->compacted = true; /* once: what cannot be moved is not retried */
        journal_read_ahead(j, s, SEG_HEADER_SIZE, STEP_BYTES); /* while collecting */
        j->compact = c;
        schedule_step(j);
        return;
    }
}

static int by_msg(const void *a, const void *b)
{
    uint64_t x = ((const jpair *)a)->msg_id, y = ((const jpair *)b)->msg_id;
    return (x > y) - (x < y);
}

/* Notes the live entries whose message is in the segment; true when done. */
static bool collect(journal *j, jcompact *c)
{
    uint32_t budget = COLLECT_SLOTS;
    for (; j->queues.slots && c->qslot <= j->queues.mask; c->qslot++, c->eslot = 0) {
        jqueue *q = j->queues.slots[c->qslot].q;
        for (; q && q->entries.slots && c->eslot <= q->entries.mask; c->eslot++) {
            if (budget-- == 0)
                return false;
            const jentry *e = &q->entries.slots[c->eslot];
            if (e->seg != c->seg)
                continue;
            if (c->npairs == c->cappairs) {
                size_t cap = c->cappairs ? c->cappairs * 2 : 256;
                jpair *p = realloc(c->pairs, cap * sizeof *p);
                if (p == NULL)
                    journal_oom(j, "the compaction list");
                c->pairs = p;
                c->cappairs = cap;
            }
            c->pairs[c->npairs++] = (jpair){e->msg_id, q->id};
        }
    }
    qsort(c->pairs, c->npairs, sizeof *c->pairs, by_msg);
    c->collecting = false;
    return true;
}

static void move_entry(journal *j, jcompact *c, uint64_t queue_id, const jentry *e,
                       journal_loc to)
{
    uint64_t id = e->msg_id, until = 0;
    uint32_t count = e->count, dly_seg;
    bool delivered = e->dlv_seg != 0;
    bool delayed = journal_delay_of(j, queue_id, e, &dly_seg, &until);
    journal_append_enqueue(j, queue_id, id, to); /* resets its delivered and delayed pins */
    if (delivered)
        journal_append_delivered(j, queue_id, id, count);
    if (delayed)
        journal_append_delayed(j, queue_id, id, until);
    c->moved_entries++;
}

static void carry_message(journal *j, jcompact *c, const jrec *r)
{
    jpair key = {r->msg_id, 0};
    jpair *p = bsearch(&key, c->pairs, c->npairs, sizeof key, by_msg);
    while (p && p > c->pairs && p[-1].msg_id == r->msg_id)
        p--;
    bool copied = false;
    journal_loc to;
    for (; p && p < c->pairs + c->npairs && p->msg_id == r->msg_id; p++) {
        jentry *e = journal_entry_of(j, p->queue_id, r->msg_id);
        if (e == NULL || e->seg != c->seg)
            continue; /* settled meanwhile */
        if (!copied) {
            journal_append_message(j, r->msg_id, r->msg.exchange, r->msg.routing_key,
                                   r->msg.properties, r->msg.body, &to);
            moved_put(j, r->msg_id, to);
            c->copied_msgs++;
            copied = true;
        }
        move_entry(j, c, p->queue_id, e, to);
    }
}

static void carry(journal *j, jcompact *c, const jrec *r)
{
    jentry *e;
    switch (r->type) {
    case REC_MESSAGE: carry_message(j, c, r); return;
    case REC_ENQUEUE:
        e = journal_entry_of(j, r->queue_id, r->msg_id);
        if (e && e->enq_seg == c->seg && e->seg != c->seg)
            move_entry(j, c, r->queue_id, e, journal_moved_loc(j, r->msg_id, r->loc));
        return;
    case REC_DELIVERED:
        e = journal_entry_of(j, r->queue_id, r->msg_id);
        if (e && e->dlv_seg == c->seg)
            journal_append_delivered(j, r->queue_id, r->msg_id, e->count);
        return;
    case REC_DELAYED: { /* the newest one is in the index: appended once */
        uint32_t seg;
        uint64_t until;
        e = journal_entry_of(j, r->queue_id, r->msg_id);
        if (e && journal_delay_of(j, r->queue_id, e, &seg, &until) && seg == c->seg)
            journal_append_delayed(j, r->queue_id, r->msg_id, until);
        return;
    }
    default: return; /* settles, purges, deletes: what they did is in the index */
    }
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static bool reserve_buf(jcompact *c, size_t n)
{
    if (n <= c->cap)
        return true;
    uint8_t *b = realloc(c->buf, n);
    if (b == NULL)
        return false;
    c->buf = b;
    c->cap = n;
    return true;
}

/* Reads the next stretch and carries its records; false if it cannot. */
static bool copy_step(journal *j, jcompact *c, jseg *s)
{
    uint64_t len = c->end - c->off < STEP_BYTES ? c->end - c->off : STEP_BYTES;
    if (!reserve_buf(c, len) || !journal_read_span(j, s, c->buf, len, c->off))
        return false;
    uint32_t rlen = 0;
    if (journal_rec_check(c->buf, len, s->seed, &rlen) == REC_TRUNCATED && rlen <= c->end - c->off) {
        len = rlen; /* one record bigger than a step: read it whole */
        if (!reserve_buf(c, len) || !journal_read_span(j, s, c->buf, len, c->off))
            return false;
    }
    uint64_t pos = 0;
    while (pos < len) {
        rec_status st = journal_rec_check(c->buf + pos, len - pos, s->seed, &rlen);
        if (st == REC_TRUNCATED && pos > 0)
            break; /* the next step starts with it */
        jrec r;
        if (st != REC_OK || !journal_rec_decode(c->buf + pos, rlen, &r))
            return false;
        carry(j, c, &r);
        pos += align8(rlen);
    }
    c->off += pos;
    journal_read_ahead(j, s, c->off, STEP_BYTES); /* a step reads from the cache, not the disk */
    return true;
}


/* One step, timed; false when the compaction is over. */
static bool run_step(journal *j, jcompact *c)
{
    jseg *s = journal_seg_find(j, c->seg);
    if (s == NULL)
        return false; /* collected meanwhile: nothing left to do */
    if (c->collecting)
        return !(collect(j, c) && c->npairs == 0 && s->pins == 0);
    if (!copy_step(j, c, s)) {
        finish(j, "unreadable record; the segment stays");
        return true; /* finished already */
    }
    return c->off < c->end && s->pins > 0; /* all settled meanwhile: no need to read on */
}

static void step(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    journal *j = arg;
    jcompact *c = j->compact;
    if (c == NULL)
        return;
    assert(!j->group.open); /* its records must not join one */
    uint64_t t0 = now_us();
    bool more = run_step(j, c);
    if (j->compact != c)
        return; /* it stopped on an error */
    uint64_t took = now_us() - t0;
    c->steps++;
    if (took > c->longest_step_us)
        c->longest_step_us = took;
    if (more)
        schedule_step(j);
    else
        finish(j, NULL);
}
