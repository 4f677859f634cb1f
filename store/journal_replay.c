/* Journal recovery: replay of the segment files, the resynchronising
 * record scanner, and the checkpoint (formats: journal.c).
 *
 * Two ways to read a record, which leave the handlers with the same state:
 * - Scanned: without a usable checkpoint, or past what it covers, every
 *   record is accounted (journal_index.c) as it was when appended.
 * - Covered by the checkpoint: its live entries and segment references are
 *   loaded as they are. A covered segment that no live entry pins and that
 *   did not grow since is not read at all (it is kept only for its settles,
 *   which the checkpoint has already applied; it may even be gone). The
 *   others are read with a filter that passes only what was still live:
 *   the message records of live entries, their enqueue records (the one in
 *   the entry's enqueue segment) and their delivered records. Settles,
 *   purges and queue deletes before the checkpoint are already in the
 *   loaded state. Records after it -- the end of its last segment, newer
 *   segments -- are scanned.
 * Either way the handlers see, in append order: a message before any
 * enqueue of it; an enqueue only for a message they were given; a settle,
 * delivered or delayed only for an entry they were given an enqueue of.
 *
 * Atomic groups (format: journal.c). The scanner holds a group's flagged
 * members back (their offsets: the segment is in memory) and applies them
 * when the group end that counts them follows; anything else -- damage
 * between them, an unflagged record, a count or length that does not
 * match, the segment ending first -- drops the held members, counted in
 * incomplete_groups. At the end of the last segment that is a group torn
 * by the crash: the file is truncated from its first member, so the next
 * replay sees it the same way (not at all).
 *
 * Damage: a record that fails its checks is skipped by scanning forward
 * 8 bytes at a time for the next record whose header and payload CRCs both
 * check out. If one is found the damage was in the middle (error, counted);
 * if not and this is the last segment, it is where its records end and the
 * rest is truncated: a warning if a record was cut short there (its header
 * checks out), information if what follows is no record of this segment
 * (zeros, or a reused file's old contents: journal.c); if not in an older
 * segment, the rest of it is lost (error, counted). A last segment with
 * nothing valid in it is removed.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal_int.h"

/* ---- a set of u64 (message ids seen) ------------------------------------ */

typedef struct u64set {
    uint64_t *slots; /* 0 = empty; key 0 is has_zero */
    uint64_t mask, count;
    bool has_zero;
} u64set;

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

static bool set_has(const u64set *s, uint64_t k)
{
    if (k == 0)
        return s->has_zero;
    if (s->slots == NULL)
        return false;
    for (uint64_t i = mix(k) & s->mask; s->slots[i]; i = (i + 1) & s->mask) {
        if (s->slots[i] == k)
            return true;
    }
    return false;
}

static void set_put(uint64_t *slots, uint64_t mask, uint64_t k)
{
    uint64_t i = mix(k) & mask;
    while (slots[i] && slots[i] != k)
        i = (i + 1) & mask;
    slots[i] = k;
}

static bool set_add(u64set *s, uint64_t k)
{
    if (k == 0) {
        s->has_zero = true;
        return true;
    }
    if (s->slots == NULL || (s->count + 1) * 2 > s->mask + 1) {
        uint64_t cap = s->slots ? (s->mask + 1) * 2 : 1024;
        uint64_t *slots = calloc(cap, sizeof *slots);
        if (slots == NULL)
            return false;
        for (uint64_t i = 0; s->slots && i <= s->mask; i++) {
            if (s->slots[i])
                set_put(slots, cap - 1, s->slots[i]);
        }
        free(s->slots);
        s->slots = slots;
        s->mask = cap - 1;
    }
    if (!set_has(s, k)) {
        set_put(s->slots, s->mask, k);
        s->count++;
    }
    return true;
}

static bool read_all(int fd, uint8_t *buf, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t k = pread(fd, buf + done, n - done, (off_t)done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        done += (size_t)k;
    }
    return true;
}

/* ---- replay --------------------------------------------------------------- */

typedef struct replay {
    journal *j;
    const journal_replay_handlers *h;
    void *ctx;
    journal_replay_stats *stats;
    u64set seen;    /* messages given to the handler */
    u64set ck_msgs; /* messages of the checkpoint's live entries */
    uint8_t *buf;   /* the segment being scanned */
    uint64_t cap;
} replay;

typedef struct scan_out {
    uint64_t valid_end; /* where a torn tail starts */
    uint64_t records, corrupt, torn, incomplete_groups;
    uint32_t msgs; /* message records not covered by the checkpoint */
    uint64_t first_seq;
    uint32_t seed; /* of its records, from its header */
    bool header_ok, remove;
} scan_out;

static void replay_message(replay *rp, const jrec *r, journal_loc at, bool filtered)
{
    if (filtered && !set_has(&rp->ck_msgs, r->msg_id))
        return;
    if (!set_add(&rp->seen, r->msg_id))
        journal_oom(rp->j, "the replay message set");
    if (rp->h->message)
        rp->h->message(rp->ctx, r->msg_id, at, &r->msg);
}

static void replay_enqueue(replay *rp, const jrec *r, uint32_t seg, bool filtered)
{
    journal *j = rp->j;
    if (!set_has(&rp->seen, r->msg_id) || !journal_seg_find(j, r->loc.segment))
        return; /* its message record is gone (collected or damaged) */
    jentry *e;
    if (filtered) {
        e = journal_entry_of(j, r->queue_id, r->msg_id);
        if (e == NULL || e->enq_seg != seg || (e->flags & ENTRY_REPLAYED))
            return;
    } else {
        journal_account_enqueue(j, r->queue_id, r->msg_id, r->loc.segment, seg);
        e = journal_entry_of(j, r->queue_id, r->msg_id);
    }
    e->flags |= ENTRY_REPLAYED;
    if (rp->h->enqueue)
        rp->h->enqueue(rp->ctx, r->queue_id, r->msg_id, r->loc);
}

/* Covered by the checkpoint, only the entry's newest delayed record counts
 * (the checkpoint has its segment, not its until_ms). */
static void replay_delayed(replay *rp, const jrec *r, uint32_t seg, bool filtered)
{
    journal *j = rp->j;
    jentry *e = journal_entry_of(j, r->queue_id, r->msg_id);
    uint32_t dly_seg;
    uint64_t until;
    if (e == NULL || !(e->flags & ENTRY_REPLAYED))
        return;
    if (!filtered)
        journal_account_delayed(j, r->queue_id, r->msg_id, r->until_ms, seg);
    else if (!journal_delay_of(j, r->queue_id, e, &dly_seg, &until) || dly_seg != seg)
        return;
    else
        journal_delay_set_until(j, r->queue_id, e, r->until_ms);
    if (rp->h->delayed)
        rp->h->delayed(rp->ctx, r->queue_id, r->msg_id, r->until_ms);
}

static void dispatch(replay *rp, const jrec *r, journal_loc at, bool filtered)
{
    journal *j = rp->j;
    const journal_replay_handlers *h = rp->h;
    jentry *e;
    switch (r->type) {
    case REC_MESSAGE: replay_message(rp, r, at, filtered); return;
    case REC_ENQUEUE: replay_enqueue(rp, r, at.segment, filtered); return;
    case REC_SETTLE:
        if (filtered)
            return;
        e = journal_entry_of(j, r->queue_id, r->msg_id);
        if (e && (e->flags & ENTRY_REPLAYED) &&
            journal_account_settle(j, r->queue_id, r->msg_id, at.segment) && h->settle)
            h->settle(rp->ctx, r->queue_id, r->msg_id, r->kind);
        return;
    case REC_DELIVERED:
        e = journal_entry_of(j, r->queue_id, r->msg_id);
        if (e == NULL || !(e->flags & ENTRY_REPLAYED))
            return;
        if (!filtered)
            journal_account_delivered(j, r->queue_id, r->msg_id, r->count, at.segment);
        else if (e->dlv_seg == at.segment)
            e->count = r->count & ENTRY_COUNT_MAX; /* the checkpoint has the pin, not the count */
        if (h->delivered)
            h->delivered(rp->ctx, r->queue_id, r->msg_id, r->count);
        return;
    case REC_PURGE:
        if (filtered)
            return;
        journal_account_purge(j, r->queue_id, at.segment);
        if (h->purge)
            h->purge(rp->ctx, r->queue_id);
        return;
    case REC_QUEUE_DELETE:
        if (filtered)
            return;
        journal_account_queue_delete(j, r->queue_id, at.segment);
        if (h->queue_delete)
            h->queue_delete(rp->ctx, r->queue_id);
        return;
    case REC_DELAYED: replay_delayed(rp, r, at.segment, filtered); return;
    case REC_GROUP_END: return; /* the scanner's business */
    }
}

static bool record_at(const uint8_t *map, uint64_t size, uint64_t off, uint32_t seed, jrec *r,
                      uint32_t *len)
{
    return off <= UINT32_MAX && journal_rec_check(map + off, size - off, seed, len) == REC_OK &&
           journal_rec_decode(map + off, *len, r);
}

/* The first 8-aligned offset >= from where a whole valid record starts;
 * size if there is none. */
static uint64_t resync(const uint8_t *map, uint64_t size, uint64_t from, uint32_t seed)
{
    for (uint64_t off = align8(from); off < size && size - off >= REC_HEADER_SIZE;
         off += REC_ALIGN) {
        jrec r;
        uint32_t len;
        if (record_at(map, size, off, seed, &r, &len))
            return off;
    }
    return size;
}

/* Damage at `off` with nothing valid after it. In the last segment that is
 * where its records end: either a record cut short by the crash (its header
 * checks out) or bytes that were never a record of it -- the old contents
 * of a reused file (see journal.c), or a header cut short. */
static void damaged_end(replay *rp, const jseg *s, const uint8_t *map, uint64_t off,
                        uint64_t size, bool last, scan_out *o)
{
    if (last) {
        uint32_t len;
        bool torn = journal_rec_check(map + off, size - off, o->seed, &len) != REC_BAD_HEADER;
        o->torn = size - off;
        o->valid_end = off;
        o->remove = off <= SEG_HEADER_SIZE && !o->header_ok;
        journal_log(rp->j, torn ? JLOG_WARNING : JLOG_INFO,
                    torn ? "segment %u: torn record at offset %llu, truncating %llu bytes"
                         : "segment %u: its records end at offset %llu; truncating the %llu "
                           "bytes after them",
                    s->num, (unsigned long long)off, (unsigned long long)(size - off));
    } else {
        o->corrupt++;
        journal_log(rp->j, JLOG_ERROR,
                    "segment %u: unreadable from offset %llu to its end (%llu bytes skipped)",
                    s->num, (unsigned long long)off, (unsigned long long)(size - off));
    }
}

/* A group's members held back until its end record (offsets into the
 * segment, which is in memory). */
typedef struct held_group {
    uint64_t first_off, end; /* the first member; just past the last */
    uint32_t n;
    bool broken; /* dropped for damage: members and end after it are its rest */
} held_group;

/* Applies one record; those before `covered` are the checkpoint's. */
static void apply(replay *rp, const jrec *r, journal_loc at, uint64_t covered, scan_out *o)
{
    dispatch(rp, r, at, at.offset < covered);
    o->msgs += r->type == REC_MESSAGE && at.offset >= covered;
}

/* Drops the held members (`why` for the log), counting the group once:
 * what follows damage up to its end record is the rest of the same one. */
static void group_drop(replay *rp, const jseg *s, held_group *g, scan_out *o, const char *why)
{
    if (g->n > 0 && !g->broken) {
        o->incomplete_groups++;
        journal_log(rp->j, JLOG_ERROR,
                    "segment %u: atomic group of %u records at offset %llu dropped whole (%s)",
                    s->num, g->n, (unsigned long long)g->first_off, why);
    }
    *g = (held_group){0};
}

/* A group end at `off`: applies the held members if they are all of it. */
static void group_end(replay *rp, const jseg *s, const uint8_t *map, uint64_t size,
                      held_group *g, const jrec *end, uint64_t off, uint64_t covered,
                      scan_out *o)
{
    if (g->broken || g->n != end->count || g->end != off || off - g->first_off != end->bytes) {
        if (g->n == 0 && !g->broken) {
            o->incomplete_groups++; /* every member lost, and nothing else */
            journal_log(rp->j, JLOG_ERROR, "segment %u: group end at offset %llu without "
                        "its records", s->num, (unsigned long long)off);
        }
        group_drop(rp, s, g, o, "records missing");
        return;
    }
    for (uint64_t at = g->first_off; at < off;) {
        jrec r;
        uint32_t len = 0;
        bool ok = record_at(map, size, at, o->seed, &r, &len);
        assert(ok); /* checked when held */
        (void)ok;
        apply(rp, &r, (journal_loc){s->num, (uint32_t)at, len}, covered, o);
        at += align8(len);
    }
    *g = (held_group){0};
}

/* A group still held where the last segment's records end was torn by the
 * crash: the tail is cut from its first member. */
static void group_torn(replay *rp, const jseg *s, uint64_t size, held_group *g, scan_out *o)
{
    journal_log(rp->j, JLOG_WARNING,
                "segment %u: atomic group of %u records at offset %llu torn; dropped whole, "
                "truncating from there", s->num, g->n, (unsigned long long)g->first_off);
    o->incomplete_groups += !g->broken;
    o->records -= g->n;
    o->valid_end = g->first_off;
    o->torn = size - g->first_off;
    o->remove = g->first_off <= SEG_HEADER_SIZE && !o->header_ok;
    *g = (held_group){0};
}

/* Where a segment's records end (damage with nothing valid after it, or
 * its end): a held group is incomplete. */
static void scan_end(replay *rp, const jseg *s, uint64_t size, bool last, held_group *g,
                     scan_out *o)
{
    if (g->n > 0 && last)
        group_torn(rp, s, size, g, o);
    else
        group_drop(rp, s, g, o, "the segment ends first");
}

static void scan(replay *rp, const jseg *s, const uint8_t *map, uint64_t size, bool last,
                 uint64_t covered, scan_out *o)
{
    uint32_t num = 0;
    uint64_t off = SEG_HEADER_SIZE;
    held_group g = {0};
    o->seed = s->seed;
    o->header_ok = journal_seg_header_decode(map, size, &num, &o->first_seq, &o->seed) &&
                   num == s->num;
    if (!o->header_ok) {
        o->seed = s->seed;
        uint64_t next = resync(map, size, SEG_HEADER_SIZE, o->seed);
        if (next >= size) {
            damaged_end(rp, s, map, 0, size, last, o);
            return;
        }
        o->corrupt++;
        journal_log(rp->j, JLOG_ERROR, "segment %u: bad segment header; reading on at %llu",
                    s->num, (unsigned long long)next);
        off = next;
    }
    while (off < size) {
        jrec r;
        uint32_t len = 0;
        if (record_at(map, size, off, o->seed, &r, &len)) {
            if (r.grouped) {
                g.first_off = g.n++ ? g.first_off : off;
                g.end = off + align8(len);
            } else if (r.type == REC_GROUP_END) {
                group_end(rp, s, map, size, &g, &r, off, covered, o);
            } else {
                group_drop(rp, s, &g, o, "its end is missing");
                apply(rp, &r, (journal_loc){s->num, (uint32_t)off, len}, covered, o);
            }
            o->records++;
            off += align8(len);
            continue;
        }
        uint64_t next = resync(map, size, off + REC_ALIGN, o->seed);
        if (next >= size) {
            damaged_end(rp, s, map, off, size, last, o);
            scan_end(rp, s, size, last, &g, o);
            return;
        }
        group_drop(rp, s, &g, o, "a damaged record");
        g.broken = true;
        o->corrupt++;
        journal_log(rp->j, JLOG_ERROR,
                    "segment %u: corrupt record at offset %llu, skipped %llu bytes to the "
                    "next valid record", s->num, (unsigned long long)off,
                    (unsigned long long)(next - off));
        off = next;
    }
    scan_end(rp, s, size, last, &g, o);
}

static bool io_fail(char *err, size_t errlen, const char *what, const char *path)
{
    if (err && errlen)
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
    return false;
}

/* Truncates a torn tail, or removes a last segment with nothing in it. */
static bool cut_tail(replay *rp, jseg *s, int fd, const char *path, const scan_out *o,
                     char *err, size_t errlen)
{
    journal *j = rp->j;
    if (o->remove) {
        if (unlink(path) != 0 || fsync(j->dirfd) != 0)
            return io_fail(err, errlen, "removing", path);
        journal_seg_remove(j, s);
        return true;
    }
    if (ftruncate(fd, (off_t)o->valid_end) != 0 || fsync(fd) != 0)
        return io_fail(err, errlen, "truncating", path);
    s->size = o->valid_end;
    return true;
}

/* Replays one segment file; records before `covered` are the checkpoint's. */
static bool replay_segment(replay *rp, jseg *s, bool last, const jck_seg *ck, uint64_t *next_seq,
                           char *err, size_t errlen)
{
    journal *j = rp->j;
    char path[PATH_MAX];
    journal_seg_path(j, s->num, path, sizeof path);
    int fd = open(path, (last ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return io_fail(err, errlen, "opening", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    /* read, not mapped: page faults cost more than the copy (in a VM) */
    if (size > rp->cap) {
        free(rp->buf);
        rp->cap = 0;
        if ((rp->buf = malloc(size)) == NULL) {
            close(fd);
            errno = ENOMEM;
            return io_fail(err, errlen, "reading", path);
        }
        rp->cap = size;
    }
    if (size > 0 && !read_all(fd, rp->buf, size)) {
        close(fd);
        return io_fail(err, errlen, "reading", path);
    }
    scan_out o = {0};
    scan(rp, s, size > 0 ? rp->buf : (const uint8_t *)"", size, last, ck ? ck->size : 0, &o);
    rp->stats->segments++;
    rp->stats->bytes += size;
    rp->stats->records += o.records;
    rp->stats->corrupt_records += o.corrupt;
    rp->stats->torn_tail_bytes += o.torn;
    rp->stats->incomplete_groups += o.incomplete_groups;
    if (o.header_ok && o.first_seq + o.records > *next_seq)
        *next_seq = o.first_seq + o.records;
    s->size = size;
    s->seed = o.seed;
    s->msgs = (ck ? ck->msgs : 0) + o.msgs;
    s->scanned = true;
    bool ok = o.torn == 0 && !o.remove ? true : cut_tail(rp, s, fd, path, &o, err, errlen);
    close(fd);
    return ok;
}

/* ---- checkpoint: use ------------------------------------------------------ */

/* The checkpoint's entry for segment num, or NULL. */
static const jck_seg *ck_seg(const jcheckpoint *ck, uint32_t num)
{
    uint32_t lo = 0, hi = ck->nsegs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ck->segs[mid].num < num)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ck->nsegs && ck->segs[lo].num == num ? &ck->segs[lo] : NULL;
}

/* Whether the checkpoint is consistent, and with the segment files: each
 * file it lists is at least as long as it was then. (A listed segment may
 * be gone: collected after the checkpoint. An older file it does not list
 * was collected before it, its unlink lost: replay skips it.) */
static bool checkpoint_matches(journal *j, const jcheckpoint *ck)
{
    for (size_t i = 0; i < j->nsegs; i++) {
        const jck_seg *c = ck_seg(ck, j->segs[i]->num);
        if (c && j->segs[i]->size < c->size)
            return false;
    }
    for (uint32_t i = 0; i < ck->nrefs; i++) {
        const jck_ref *r = &ck->refs[i];
        if (r->from >= r->to || !ck_seg(ck, r->from) || !ck_seg(ck, r->to))
            return false;
    }
    for (uint64_t i = 0; i < ck->nentries; i++) {
        const jck_entry *e = &ck->entries[i];
        if (!ck_seg(ck, e->seg) || !ck_seg(ck, e->enq_seg) ||
            (e->dlv_seg && !ck_seg(ck, e->dlv_seg)) || (e->dly_seg && !ck_seg(ck, e->dly_seg)))
            return false;
    }
    return true;
}

static void checkpoint_apply(replay *rp, const jcheckpoint *ck)
{
    journal *j = rp->j;
    for (uint32_t i = 0; i < ck->nrefs; i++) {
        if (!journal_add_ref(j, ck->refs[i].from, ck->refs[i].to, ck->refs[i].count))
            journal_oom(j, "segment references");
    }
    for (uint64_t i = 0; i < ck->nentries; i++) {
        const jck_entry *e = &ck->entries[i];
        journal_account_enqueue(j, e->queue_id, e->msg_id, e->seg, e->enq_seg);
        if (e->dlv_seg)
            journal_account_delivered(j, e->queue_id, e->msg_id, 0, e->dlv_seg);
        if (e->dly_seg) /* until_ms: from its record, when replay reads it */
            journal_account_delayed(j, e->queue_id, e->msg_id, 0, e->dly_seg);
        if (!set_add(&rp->ck_msgs, e->msg_id))
            journal_oom(j, "the replay message set");
    }
}

/* Entries the checkpoint had but whose enqueue never reached the handler
 * (their records were damaged since): nobody can settle them, so drop them
 * rather than pin their segments forever. */
static void drop_unreplayed(journal *j)
{
    for (uint32_t i = 0; j->queues.slots && i <= j->queues.mask; i++) {
        jqueue *q = j->queues.slots[i].q;
        for (uint32_t k = 0; q && q->entries.slots && k <= q->entries.mask;) {
            jentry *e = &q->entries.slots[k];
            if (e->seg == 0 || (e->flags & ENTRY_REPLAYED)) {
                k++;
                continue;
            }
            /* Settling at its own enqueue segment adds no reference. */
            journal_account_settle(j, q->id, e->msg_id, e->enq_seg);
            /* backward shift may have moved another entry into slot k */
        }
    }
}

/* Replays every segment file in order, skipping those the checkpoint says
 * hold nothing live (and that did not grow since) or were collected. */
static bool replay_segments(replay *rp, bool use_ck, uint64_t *next_seq, char *err,
                            size_t errlen)
{
    journal *j = rp->j;
    size_t n = j->nsegs;
    uint32_t *nums = malloc((n ? n : 1) * sizeof *nums);
    if (nums == NULL) {
        snprintf(err, errlen, "journal_replay: out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++)
        nums[i] = j->segs[i]->num; /* the table changes if a torn segment goes */
    uint32_t ck_last = use_ck && j->ck->nsegs ? j->ck->segs[j->ck->nsegs - 1].num : 0;
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        jseg *s = journal_seg_find(j, nums[i]);
        if (s == NULL)
            continue;
        const jck_seg *listed = use_ck ? ck_seg(j->ck, s->num) : NULL;
        if ((listed && s->pins == 0 && s->size == listed->size) || (!listed && s->num < ck_last)) {
            s->scanned = true; /* nothing live: kept for its settles, or collected */
            continue;
        }
        ok = replay_segment(rp, s, i == n - 1, listed, next_seq, err, errlen);
    }
    free(nums);
    return ok;
}

bool journal_replay(journal *j, const journal_replay_handlers *h, void *ctx,
                    journal_replay_stats *stats, char *err, size_t errlen)
{
    static const journal_replay_handlers none;
    journal_replay_stats local;
    stats = stats ? stats : &local;
    memset(stats, 0, sizeof *stats);
    if (j->appended_records > 0 || j->replay_called) {
        snprintf(err, errlen, "journal_replay: must be called once, before any append");
        return false;
    }
    j->replay_called = true;
    replay rp = {.j = j, .h = h ? h : &none, .ctx = ctx, .stats = stats};
    bool use_ck = j->ck && checkpoint_matches(j, j->ck);
    uint64_t next_seq = 1;
    if (j->ck && !use_ck)
        journal_log(j, JLOG_WARNING, "the checkpoint does not match the segment files; "
                    "rescanning them all");
    if (use_ck) {
        checkpoint_apply(&rp, j->ck);
        stats->from_checkpoint = true;
        next_seq = j->ck->next_seq;
    }
    bool ok = replay_segments(&rp, use_ck, &next_seq, err, errlen);
    if (use_ck && ok)
        drop_unreplayed(j);
    free(rp.seen.slots);
    free(rp.ck_msgs.slots);
    free(rp.buf);
    journal_checkpoint_free(j->ck);
    j->ck = NULL;
    if (next_seq > j->next_seq)
        j->next_seq = next_seq;
    atomic_store(&j->synced, j->next_seq - 1);
    j->reported_synced = j->next_seq - 1;
    if (j->replicated < j->next_seq - 1)
        j->replicated = j->next_seq - 1; /* what was there before is not gated */
    j->replayed = ok;
    return ok;
}

/* ---- checkpoint: write ------------------------------------------------------ */

static uint8_t *put_entries(const journal *j, uint8_t *p)
{
    for (uint32_t i = 0; j->queues.slots && i <= j->queues.mask; i++) {
        const jqueue *q = j->queues.slots[i].q;
        for (uint32_t k = 0; q && q->entries.slots && k <= q->entries.mask; k++) {
            const jentry *e = &q->entries.slots[k];
            uint32_t dly_seg = 0;
            uint64_t until;
            if (e->seg == 0)
                continue;
            if (e->flags & ENTRY_DELAYED)
                journal_delay_of(j, q->id, e, &dly_seg, &until);
            memset(p, 0, CK_ENTRY_SIZE);
            put64(p, q->id);
            put64(p + 8, e->msg_id);
            put32(p + 16, e->seg);
            put32(p + 20, e->enq_seg);
            put32(p + 24, e->dlv_seg);
            put32(p + 28, dly_seg);
            p += CK_ENTRY_SIZE;
        }
    }
    return p;
}

/* Refs into segments before `cutoff` (where appends go now) are settles
 * that this very checkpoint makes unnecessary: they are left out. */
uint8_t *journal_checkpoint_image(journal *j, size_t *len)
{
    assert(!j->group.open); /* it describes whole groups only */
    uint32_t cutoff = j->active ? j->active->num : j->next_seg_num;
    uint64_t nentries = 0, nrefs = 0;
    for (uint32_t i = 0; j->queues.slots && i <= j->queues.mask; i++)
        nentries += j->queues.slots[i].q ? j->queues.slots[i].q->entries.count : 0;
    for (size_t i = 0; i < j->nsegs; i++) {
        for (uint32_t k = 0; k < j->segs[i]->nrefd_by; k++)
            nrefs += j->segs[i]->refd_by[k].seg >= cutoff;
    }
    size_t size = CK_HEADER_SIZE + CK_SEG_SIZE * j->nsegs + CK_REF_SIZE * nrefs +
                  CK_ENTRY_SIZE * nentries + 4;
    uint8_t *b = calloc(1, size), *p = b + CK_HEADER_SIZE;
    if (b == NULL)
        return NULL;
    memcpy(b, JOURNAL_CK_MAGIC, 8);
    put32(b + 8, JOURNAL_VERSION);
    put32(b + 12, (uint32_t)j->nsegs);
    put64(b + 16, nentries);
    put32(b + 24, (uint32_t)nrefs);
    put64(b + 32, j->next_seq);
    for (size_t i = 0; i < j->nsegs; i++, p += CK_SEG_SIZE) {
        put32(p, j->segs[i]->num);
        put32(p + 4, j->segs[i]->msgs);
        put64(p + 8, j->segs[i]->size);
    }
    for (size_t i = 0; i < j->nsegs; i++) {
        for (uint32_t k = 0; k < j->segs[i]->nrefd_by; k++) {
            const jseg_ref *r = &j->segs[i]->refd_by[k];
            if (r->seg < cutoff)
                continue;
            put32(p, j->segs[i]->num);
            put32(p + 4, r->seg);
            put32(p + 8, r->count);
            p += CK_REF_SIZE;
        }
    }
    p = put_entries(j, p);
    assert(p == b + size - 4);
    put32(p, journal_crc32c(0, b, size - 4));
    *len = size;
    return b;
}

/* Through the mirror when there is one: the tmp file's creation, its
 * bytes and the rename are repeated on a follower. */
bool journal_checkpoint_store(journal *j, const uint8_t *image, size_t len)
{
    char tmp[PATH_MAX], path[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", j->path, JOURNAL_CK_NAME);
    snprintf(path, sizeof path, "%s/%s", j->path, JOURNAL_CK_NAME);
    int fd = mirror_open(j->mirror, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool ok = fd >= 0;
    for (size_t done = 0; ok && done < len;) {
        ssize_t k = write(fd, image + done, len - done);
        if (k < 0 && errno == EINTR)
            continue;
        ok = k > 0;
        done += ok ? (size_t)k : 0;
    }
    if (ok && j->mirror)
        mirror_wrote(j->mirror, tmp, 0, &(struct iovec){(void *)image, len}, 1);
    ok = ok && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    ok = ok && mirror_rename(j->mirror, tmp, path) == 0 && fsync(j->dirfd) == 0;
    if (!ok) {
        journal_log(j, JLOG_ERROR, "writing the checkpoint: %s", strerror(errno));
        mirror_unlink(j->mirror, tmp);
    }
    return ok;
}

/* ---- checkpoint: load --------------------------------------------------------- */

void journal_checkpoint_free(jcheckpoint *ck)
{
    if (ck == NULL)
        return;
    free(ck->segs);
    free(ck->refs);
    free(ck->entries);
    free(ck);
}


/* Parses a checkpoint image; NULL (with *why) if it is not a valid one. */
static jcheckpoint *ck_parse(const uint8_t *b, uint64_t size, const char **why)
{
    *why = "bad header or CRC";
    uint32_t version = size >= CK_HEADER_SIZE ? get32(b + 8) : 0;
    if (size < CK_HEADER_SIZE + 4 || memcmp(b, JOURNAL_CK_MAGIC, 8) != 0 || version < 1 ||
        version > JOURNAL_VERSION || journal_crc32c(0, b, size - 4) != get32(b + size - 4))
        return NULL;
    uint64_t nsegs = get32(b + 12), nentries = get64(b + 16), nrefs = get32(b + 24);
    *why = "sizes do not add up";
    if (nentries > size / CK_ENTRY_SIZE ||
        CK_HEADER_SIZE + nsegs * CK_SEG_SIZE + nrefs * CK_REF_SIZE + nentries * CK_ENTRY_SIZE +
                4 != size)
        return NULL;
    jcheckpoint *ck = calloc(1, sizeof *ck);
    if (ck == NULL)
        return NULL;
    ck->next_seq = get64(b + 32);
    ck->nsegs = (uint32_t)nsegs;
    ck->nrefs = (uint32_t)nrefs;
    ck->nentries = nentries;
    ck->segs = calloc(nsegs ? nsegs : 1, sizeof *ck->segs);
    ck->refs = calloc(nrefs ? nrefs : 1, sizeof *ck->refs);
    ck->entries = calloc(nentries ? nentries : 1, sizeof *ck->entries);
    *why = "out of memory";
    if (!ck->segs || !ck->refs || !ck->entries) {
        journal_checkpoint_free(ck);
        return NULL;
    }
    const uint8_t *p = b + CK_HEADER_SIZE;
    *why = "segments out of order";
    for (uint32_t i = 0; i < nsegs; i++, p += CK_SEG_SIZE) {
        ck->segs[i] = (jck_seg){get32(p), get32(p + 4), get64(p + 8)};
        if (ck->segs[i].num == 0 || (i > 0 && ck->segs[i].num <= ck->segs[i - 1].num)) {
            journal_checkpoint_free(ck);
            return NULL;
        }
    }
    for (uint32_t i = 0; i < nrefs; i++, p += CK_REF_SIZE)
        ck->refs[i] = (jck_ref){get32(p), get32(p + 4), get32(p + 8)};
    for (uint64_t i = 0; i < nentries; i++, p += CK_ENTRY_SIZE)
        ck->entries[i] = (jck_entry){get64(p), get64(p + 8), get32(p + 16), get32(p + 20),
                                     get32(p + 24), version >= 2 ? get32(p + 28) : 0};
    return ck;
}

jcheckpoint *journal_checkpoint_load(journal *j)
{
    int fd = openat(j->dirfd, JOURNAL_CK_NAME, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT)
            journal_log(j, JLOG_WARNING, "opening the checkpoint: %s; replay will rescan",
                        strerror(errno));
        return NULL;
    }
    struct stat st;
    uint8_t *buf = NULL;
    const char *why = "unreadable";
    jcheckpoint *ck = NULL;
    if (fstat(fd, &st) == 0 && st.st_size > 0 &&
        (buf = malloc((size_t)st.st_size)) != NULL && read_all(fd, buf, (size_t)st.st_size))
        ck = ck_parse(buf, (uint64_t)st.st_size, &why);
    free(buf);
    close(fd);
    if (ck == NULL)
        journal_log(j, JLOG_WARNING, "ignoring the checkpoint (%s); replay will rescan", why);
    return ck;
}
