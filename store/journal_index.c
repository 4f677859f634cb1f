/* The journal's live-entry index and segment accounting, which drive GC.
 *
 * Data structures (all loop thread):
 * - queues: queue_id -> jqueue, whose `entries` map msg_id -> jentry for
 *   every live (queue, message) pair. Both are open-addressing hash tables
 *   with linear probing and backward-shift deletion (no tombstones).
 * - segs: the segment table, sorted by number, binary-searched.
 *
 * Why per entry and not per-queue counts: an entry's records can span
 * segments (a message is enqueued again into a dead-letter queue much later;
 * a delivered record lands wherever the active segment is when the consumer
 * gets it), and deleting the wrong segment would lose an enqueue or the
 * delivery count, or -- by losing a settle -- resurrect an acked message.
 * So:
 *
 * Invariants (pins and refs are what keep a segment on disk):
 * - A live entry pins the segment of its message record, of its enqueue
 *   record, of its newest delivered record and of its newest delayed record
 *   (one that clears the delay too: an older one must not come back):
 *   seg.pins is the number of such references (an entry whose records share
 *   a segment pins it more than once; only zero matters). A delay lives in
 *   its queue's `delays` table while the entry is live; an enqueue of a
 *   live entry (a move by compaction) drops it, as it drops the delivered
 *   pin: compaction appends both again.
 * - A settle, purge or queue delete record in segment T that ends an entry
 *   enqueued in an older segment E makes T depend on E: E.refd_by[T] and
 *   T.refs count such settles. While E exists, the enqueue in it would
 *   come back on replay without the settle, so T must stay. When E is
 *   deleted, T.refs drops by E.refd_by[T].
 * - A durable checkpoint taken while appends went to segment P holds the
 *   live state, so replay never needs a settle written before it: refs
 *   into segments below P are dropped once it is on disk. Without this, one
 *   message that is never acked would keep every later segment: each holds
 *   settles of entries enqueued in the one before, which is kept for the
 *   same reason. journal.c takes such a checkpoint when segments kept only
 *   by refs add up to more than a few segments (and twice the checkpoint).
 * - A segment is deletable when pins == 0 and refs == 0 (journal.c's GC
 *   adds: not the active one unless idle, and never in the same batch as a
 *   segment it depended on, so the unlinks reach the disk in order).
 */
#include <stdlib.h>

#include "journal_int.h"

/* A full mix: message ids are mostly consecutive, and a hash that kept
 * them in neighbouring slots would make one long run of occupied slots out
 * of a backlog, which every backward-shift deletion scans to its end. */
static uint32_t hash64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return (uint32_t)k;
}

/* Whether slot k lies cyclically in (i, j]. */
static bool in_range(uint32_t k, uint32_t i, uint32_t j)
{
    return i <= j ? (k > i && k <= j) : (k > i || k <= j);
}

/* ---- entry tables ------------------------------------------------------ */

jentry *journal_entry_find(const jentry_table *t, uint64_t msg_id)
{
    if (t->slots == NULL)
        return NULL;
    for (uint32_t i = hash64(msg_id) & t->mask;; i = (i + 1) & t->mask) {
        jentry *e = &t->slots[i];
        if (e->seg == 0)
            return NULL;
        if (e->msg_id == msg_id)
            return e;
    }
}

static bool entry_table_grow(jentry_table *t)
{
    uint32_t cap = t->slots ? (t->mask + 1) * 2 : 8;
    jentry *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return false;
    for (uint32_t i = 0; t->slots && i <= t->mask; i++) {
        if (t->slots[i].seg == 0)
            continue;
        uint32_t k = hash64(t->slots[i].msg_id) & (cap - 1);
        while (slots[k].seg != 0)
            k = (k + 1) & (cap - 1);
        slots[k] = t->slots[i];
    }
    free(t->slots);
    t->slots = slots;
    t->mask = cap - 1;
    return true;
}

jentry *journal_entry_upsert(jentry_table *t, uint64_t msg_id, bool *created)
{
    if (t->slots == NULL || (uint64_t)(t->count + 1) * 4 > (uint64_t)(t->mask + 1) * 3) {
        if (!entry_table_grow(t))
            return NULL;
    }
    uint32_t i = hash64(msg_id) & t->mask;
    for (; t->slots[i].seg != 0; i = (i + 1) & t->mask) {
        if (t->slots[i].msg_id == msg_id) {
            *created = false;
            return &t->slots[i];
        }
    }
    t->slots[i] = (jentry){.msg_id = msg_id};
    t->count++;
    *created = true;
    return &t->slots[i];
}

void journal_entry_remove(jentry_table *t, jentry *e)
{
    uint32_t i = (uint32_t)(e - t->slots);
    for (uint32_t k = (i + 1) & t->mask; t->slots[k].seg != 0; k = (k + 1) & t->mask) {
        uint32_t home = hash64(t->slots[k].msg_id) & t->mask;
        if (!in_range(home, i, k)) {
            t->slots[i] = t->slots[k];
            i = k;
        }
    }
    t->slots[i].seg = 0;
    t->count--;
}

void journal_entry_table_free(jentry_table *t)
{
    free(t->slots);
    *t = (jentry_table){0};
}

/* ---- queue map --------------------------------------------------------- */

jqueue *journal_queue_find(const jqueue_map *m, uint64_t id)
{
    if (m->slots == NULL)
        return NULL;
    for (uint32_t i = hash64(id) & m->mask; m->slots[i].q; i = (i + 1) & m->mask) {
        if (m->slots[i].key == id)
            return m->slots[i].q;
    }
    return NULL;
}

static bool queue_map_grow(jqueue_map *m)
{
    uint32_t cap = m->slots ? (m->mask + 1) * 2 : 16;
    jqueue_slot *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return false;
    for (uint32_t i = 0; m->slots && i <= m->mask; i++) {
        if (m->slots[i].q == NULL)
            continue;
        uint32_t k = hash64(m->slots[i].key) & (cap - 1);
        while (slots[k].q)
            k = (k + 1) & (cap - 1);
        slots[k] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return true;
}

jqueue *journal_queue_get(jqueue_map *m, uint64_t id)
{
    jqueue *q = journal_queue_find(m, id);
    if (q)
        return q;
    if (m->slots == NULL || (uint64_t)(m->count + 1) * 4 > (uint64_t)(m->mask + 1) * 3) {
        if (!queue_map_grow(m))
            return NULL;
    }
    q = calloc(1, sizeof *q);
    if (q == NULL)
        return NULL;
    q->id = id;
    uint32_t i = hash64(id) & m->mask;
    while (m->slots[i].q)
        i = (i + 1) & m->mask;
    m->slots[i] = (jqueue_slot){id, q};
    m->count++;
    return q;
}

void journal_queue_remove(jqueue_map *m, uint64_t id)
{
    if (m->slots == NULL)
        return;
    uint32_t i = hash64(id) & m->mask;
    while (m->slots[i].q && m->slots[i].key != id)
        i = (i + 1) & m->mask;
    if (m->slots[i].q == NULL)
        return;
    journal_entry_table_free(&m->slots[i].q->entries);
    journal_entry_table_free(&m->slots[i].q->delays);
    free(m->slots[i].q);
    for (uint32_t k = (i + 1) & m->mask; m->slots[k].q; k = (k + 1) & m->mask) {
        if (!in_range(hash64(m->slots[k].key) & m->mask, i, k)) {
            m->slots[i] = m->slots[k];
            i = k;
        }
    }
    m->slots[i] = (jqueue_slot){0};
    m->count--;
}

void journal_queue_map_free(jqueue_map *m)
{
    for (uint32_t i = 0; m->slots && i <= m->mask; i++) {
        if (m->slots[i].q) {
            journal_entry_table_free(&m->slots[i].q->entries);
            journal_entry_table_free(&m->slots[i].q->delays);
            free(m->slots[i].q);
        }
    }
    free(m->slots);
    *m = (jqueue_map){0};
}

/* ---- segment table ----------------------------------------------------- */

/* Index of the first segment with number >= num. */
static size_t seg_lower_bound(const journal *j, uint32_t num)
{
    size_t lo = 0, hi = j->nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (j->segs[mid]->num < num)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

jseg *journal_seg_find(const journal *j, uint32_t num)
{
    if (j->active && j->active->num == num)
        return j->active;
    size_t i = seg_lower_bound(j, num);
    return i < j->nsegs && j->segs[i]->num == num ? j->segs[i] : NULL;
}

jseg *journal_seg_add(journal *j, uint32_t num)
{
    if (j->nsegs == j->capsegs) {
        size_t cap = j->capsegs ? j->capsegs * 2 : 16;
        jseg **segs = realloc(j->segs, cap * sizeof *segs);
        if (segs == NULL)
            return NULL;
        j->segs = segs;
        j->capsegs = cap;
    }
    jseg *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->num = num;
    s->rfd = -1;
    size_t i = seg_lower_bound(j, num);
    memmove(&j->segs[i + 1], &j->segs[i], (j->nsegs - i) * sizeof *j->segs);
    j->segs[i] = s;
    j->nsegs++;
    return s;
}

void journal_seg_remove(journal *j, jseg *s)
{
    size_t i = seg_lower_bound(j, s->num);
    if (i >= j->nsegs || j->segs[i] != s)
        return;
    memmove(&j->segs[i], &j->segs[i + 1], (j->nsegs - i - 1) * sizeof *j->segs);
    j->nsegs--;
    if (j->active == s)
        j->active = NULL;
    free(s->refd_by);
    free(s);
}

/* ---- accounting -------------------------------------------------------- */

static void pin(journal *j, uint32_t num)
{
    jseg *s = journal_seg_find(j, num);
    if (s)
        s->pins++;
}

static void unpin(journal *j, uint32_t num)
{
    jseg *s = journal_seg_find(j, num);
    if (s && s->pins > 0)
        s->pins--;
}

bool journal_add_ref(journal *j, uint32_t from, uint32_t to, uint32_t count)
{
    jseg *f = journal_seg_find(j, from), *t = journal_seg_find(j, to);
    if (f == NULL || t == NULL || from >= to)
        return true; /* nothing to keep: the enqueue is gone or in the same segment */
    jseg_ref *r = NULL;
    for (uint32_t i = f->nrefd_by; i-- > 0;) {
        if (f->refd_by[i].seg == to) {
            r = &f->refd_by[i];
            break;
        }
    }
    if (r == NULL) {
        if (f->nrefd_by == f->caprefd_by) {
            uint32_t cap = f->caprefd_by ? f->caprefd_by * 2 : 4;
            jseg_ref *refs = realloc(f->refd_by, cap * sizeof *refs);
            if (refs == NULL)
                return false;
            f->refd_by = refs;
            f->caprefd_by = cap;
        }
        r = &f->refd_by[f->nrefd_by++];
        *r = (jseg_ref){to, 0};
    }
    r->count += count;
    t->refs += count;
    return true;
}

/* ---- delays ------------------------------------------------------------ */

static uint64_t delay_until(const jentry *d) { return d->enq_seg | (uint64_t)d->dlv_seg << 32; }

static void delay_put(jentry *d, uint32_t seg, uint64_t until_ms)
{
    d->seg = seg;
    d->enq_seg = (uint32_t)until_ms;
    d->dlv_seg = (uint32_t)(until_ms >> 32);
}

static jentry *delay_find(jqueue *q, const jentry *e)
{
    return (e->flags & ENTRY_DELAYED) ? journal_entry_find(&q->delays, e->msg_id) : NULL;
}

/* Forgets an entry's delay and its pin. */
static void delay_drop(journal *j, jqueue *q, jentry *e)
{
    jentry *d = delay_find(q, e);
    if (d) {
        unpin(j, d->seg);
        journal_entry_remove(&q->delays, d);
    }
    e->flags &= ~ENTRY_DELAYED;
}

bool journal_account_delayed(journal *j, uint64_t queue_id, uint64_t msg_id, uint64_t until_ms,
                             uint32_t at)
{
    jqueue *q = journal_queue_find(&j->queues, queue_id);
    jentry *e = q ? journal_entry_find(&q->entries, msg_id) : NULL;
    if (e == NULL)
        return false;
    bool created = false;
    jentry *d = journal_entry_upsert(&q->delays, msg_id, &created);
    if (d == NULL)
        journal_oom(j, "the delay index");
    if (!created)
        unpin(j, d->seg);
    delay_put(d, at, until_ms);
    pin(j, at);
    e->flags |= ENTRY_DELAYED; /* (upserting into delays left entries as they were) */
    return true;
}

bool journal_delay_of(const journal *j, uint64_t queue_id, const jentry *e, uint32_t *seg,
                      uint64_t *until_ms)
{
    jqueue *q = journal_queue_find(&j->queues, queue_id);
    const jentry *d = q ? delay_find(q, e) : NULL;
    if (d == NULL)
        return false;
    *seg = d->seg;
    *until_ms = delay_until(d);
    return true;
}

bool journal_delay_set_until(journal *j, uint64_t queue_id, const jentry *e, uint64_t until_ms)
{
    jqueue *q = journal_queue_find(&j->queues, queue_id);
    jentry *d = q ? delay_find(q, e) : NULL;
    if (d == NULL)
        return false;
    delay_put(d, d->seg, until_ms);
    return true;
}

/* ---- entries ----------------------------------------------------------- */

/* Drops a live entry's pins (and its delay); the record ending it is in
 * segment `at`. */
static void release_entry(journal *j, jqueue *q, jentry *e, uint32_t at)
{
    unpin(j, e->seg);
    unpin(j, e->enq_seg);
    if (e->dlv_seg)
        unpin(j, e->dlv_seg);
    delay_drop(j, q, e);
    if (!journal_add_ref(j, e->enq_seg, at, 1))
        journal_oom(j, "segment references");
}

void journal_account_enqueue(journal *j, uint64_t queue_id, uint64_t msg_id, uint32_t msg_seg,
                             uint32_t at)
{
    jqueue *q = journal_queue_get(&j->queues, queue_id);
    bool created = false;
    jentry *e = q ? journal_entry_upsert(&q->entries, msg_id, &created) : NULL;
    if (e == NULL)
        journal_oom(j, "the live-entry index");
    if (created) {
        j->live_entries++;
    } else {
        unpin(j, e->seg);
        unpin(j, e->enq_seg);
        if (e->dlv_seg)
            unpin(j, e->dlv_seg);
        delay_drop(j, q, e);
    }
    *e = (jentry){.msg_id = msg_id, .seg = msg_seg, .enq_seg = at};
    pin(j, msg_seg);
    pin(j, at);
}

bool journal_account_settle(journal *j, uint64_t queue_id, uint64_t msg_id, uint32_t at)
{
    jqueue *q = journal_queue_find(&j->queues, queue_id);
    jentry *e = q ? journal_entry_find(&q->entries, msg_id) : NULL;
    if (e == NULL)
        return false;
    release_entry(j, q, e, at);
    journal_entry_remove(&q->entries, e);
    j->live_entries--;
    return true;
}

jentry *journal_entry_of(const journal *j, uint64_t queue_id, uint64_t msg_id)
{
    jqueue *q = journal_queue_find(&j->queues, queue_id);
    return q ? journal_entry_find(&q->entries, msg_id) : NULL;
}

bool journal_account_delivered(journal *j, uint64_t queue_id, uint64_t msg_id, uint32_t count,
                               uint32_t at)
{
    jentry *e = journal_entry_of(j, queue_id, msg_id);
    if (e == NULL)
        return false;
    e->count = count & ENTRY_COUNT_MAX;
    if (e->dlv_seg != at) {
        if (e->dlv_seg)
            unpin(j, e->dlv_seg);
        pin(j, at);
        e->dlv_seg = at;
    }
    return true;
}

void journal_account_purge(journal *j, uint64_t queue_id, uint32_t at)
{
    jqueue *q = journal_queue_find(&j->queues, queue_id);
    if (q == NULL)
        return;
    for (uint32_t i = 0; q->entries.slots && i <= q->entries.mask; i++) {
        if (q->entries.slots[i].seg != 0)
            release_entry(j, q, &q->entries.slots[i], at);
    }
    j->live_entries -= q->entries.count;
    journal_entry_table_free(&q->entries);
    journal_entry_table_free(&q->delays);
}

void journal_account_queue_delete(journal *j, uint64_t queue_id, uint32_t at)
{
    journal_account_purge(j, queue_id, at);
    journal_queue_remove(&j->queues, queue_id);
}

void journal_drop_refs_before(journal *j, uint32_t seg)
{
    for (size_t i = 0; i < j->nsegs; i++) {
        jseg *f = j->segs[i];
        uint32_t kept = 0;
        for (uint32_t k = 0; k < f->nrefd_by; k++) {
            jseg_ref r = f->refd_by[k];
            jseg *t = r.seg < seg ? journal_seg_find(j, r.seg) : NULL;
            if (r.seg >= seg)
                f->refd_by[kept++] = r;
            else if (t && t->refs >= r.count)
                t->refs -= r.count;
            else if (t)
                t->refs = 0;
        }
        f->nrefd_by = kept;
    }
}
