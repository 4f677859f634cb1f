/* journal: the append-only message journal -- segment files of CRC32C-checked
 * records, group commit by a sync thread, read-back, segment GC, replay.
 * This file: appends, the sync thread, open/close, read-back, GC. Also
 * journal_record.c (record codec), journal_index.c (live entries, what
 * keeps a segment), journal_replay.c (replay, checkpoints), crc32c.c;
 * journal_int.h is their private header.
 *
 * Files. <dir>/journal/00000001.seg, 00000002.seg, ... (number = %08u),
 * <dir>/journal/checkpoint, and up to JOURNAL_SPARES spare files (spare0,
 * spare1): collected segments kept for reuse. Every open starts a new
 * segment for its appends, so a segment is only ever written by the process
 * that created it, from offset 0, and never again after a restart. All
 * integers are little-endian.
 *
 * Reused files. A new segment takes a spare file if there is one (renamed
 * to its name), because overwriting a file's blocks lets fdatasync skip the
 * file system's metadata commit that growing the file costs: one disk write
 * and flush less per sync round. Its old records stay after the new ones
 * until overwritten; they cannot pass for new ones because a record's CRCs
 * start from its segment number (segment version 2). A segment is cut to
 * its own records when it is closed, so only the last one, after a crash,
 * can have old bytes after its records; replay truncates them.
 *
 * The checkpoint is the live state (live entries, segment references) as
 * of a position: the end of each segment it lists. It is written at
 * journal_close and, while running, whenever segments kept only for their
 * settles pile up (journal_index.c explains why). Replay loads it and then
 * reads only what it does not cover (journal_replay.c). It is replaced
 * atomically and always describes a durable prefix of the segments, so an
 * old one is still correct after a crash: it is not removed at open.
 *
 * Segment header (32 bytes):
 *   offset size field
 *   0      8    magic "WARRENJS"
 *   8      4    version (3; 2 and 1 are still read: they have no groups or
 *               delays, and version 1's CRCs start from 0)
 *   12     4    segment number (matches the file name)
 *   16     8    sequence number of the segment's first record
 *   24     4    reserved, 0
 *   28     4    CRC32C of bytes 0..27
 *
 * Record (starts at an 8-aligned offset; zero padding up to the next one):
 *   offset size field
 *   0      4    length: header + payload, without padding (loc.length)
 *   4      1    type: 1 message, 2 enqueue, 3 settle, 4 delivered, 5 purge,
 *               6 queue delete, 7 group end, 8 delayed
 *   5      1    flags: bit 0 = member of an atomic group (not on a group
 *               end); the other bits 0
 *   6      2    reserved, 0
 *   8      4    header CRC: CRC32C of bytes 0..7, starting from the segment
 *               number (from 0 in version 1 segments)
 *   12     4    payload CRC: CRC32C of bytes 16..length-1, starting likewise
 *   16     ..   payload
 *
 * Payloads (offsets from the payload start):
 *   message (1)        enqueue (2)           settle (3)
 *   0  8 msg_id        0  8 queue_id         0  8 queue_id
 *   8  2 exchange len  8  8 msg_id           8  8 msg_id
 *   10 2 routing len   16 4 loc.segment      16 4 loc.segment
 *   12 4 props len     20 4 loc.offset       20 4 loc.offset
 *   16 4 body len      24 4 loc.length       24 4 loc.length
 *   20 .. exchange, routing key,             28 1 kind (1 ack, 2 drop, 3 dead-
 *         properties, body                        letter, 4 move)
 *                                            29 1 reserved, 0
 *                                            30 2 reason len
 *   delivered (4)      purge (5),            32 2 target len
 *   0  8 queue_id      queue delete (6)      34 .. reason, target (exchange)
 *   8  8 msg_id        0  8 queue_id
 *   16 4 delivery count
 *
 *   group end (7)                            delayed (8)
 *   0  4 member records (at least 1)         0  8 queue_id
 *   4  4 member bytes: from the first        8  8 msg_id
 *        member's offset to this record's    16 8 until_ms (wall clock, ms
 *                                                 since the epoch; 0 = cleared)
 *
 * Atomic groups (journal_group_begin/end). A group is its member records
 * -- each flagged, contiguous, in one segment -- followed by a group end
 * record that counts them:
 *
 *   [member|F] [member|F] ... [member|F] [group end: n, bytes]
 *
 * Replay applies the members only when it reaches their group end and the
 * n flagged records just before it are whole and take exactly `bytes`; a
 * group cut short by a crash (anywhere in its records), or with a record
 * damaged, is dropped whole, and so is a flagged record with no group end
 * after it. A group never spans segments (reserve() does not roll over
 * inside one), so a torn group is always at the end of the last segment,
 * which replay truncates from the group's first member. Records outside
 * groups are as before: no extra bytes, no extra work.
 *
 * Compaction (journal_compact.c) copies the live records of a sparse
 * segment to the active one: a message record again with the same msg_id,
 * an enqueue for an entry already live -- which moves it to the new
 * location -- and its delivered count and delay. Replay therefore meets a moved
 * entry's enqueue after entries enqueued later; the broker restores queues
 * in msg_id order.
 *
 * Checkpoint (written to checkpoint.tmp, fsynced, renamed):
 *   offset size field
 *   0      8    magic "WARRENCK"
 *   8      4    version (2; 1 is still read: its entries have no delays)
 *   12     4    S: number of segments
 *   16     8    E: number of live entries
 *   24     4    R: number of segment references
 *   28     4    reserved, 0
 *   32     8    next sequence number
 *   40     8    reserved, 0
 *   48     16*S segments:    0 4 number, 4 4 message records, 8 8 size
 *   ..     12*R references:  0 4 from (enqueue segment), 4 4 to (settle
 *                            segment, the last listed one), 8 4 count
 *   ..     32*E live entries: 0 8 queue_id, 8 8 msg_id, 16 4 message
 *                            segment, 20 4 enqueue segment, 24 4 delivered
 *                            segment (0 = none), 28 4 delayed segment
 *                            (0 = none)
 *   ..     4    CRC32C of everything before it
 *
 * Threads and the batch pipeline. The loop thread appends each record into
 * j->fill (memcpy plus CRC, no syscall, no lock) and on the first append of
 * a loop turn activates commit_ev; that callback runs after the turn's
 * other ready callbacks and hands the fill batch to the queue (mutex) --
 * with sync = batch or none only if the sync thread is idle: while it is
 * busy the fill keeps growing and the end of its round hands it over, so
 * each round takes everything that accumulated, in one buffer. The sync
 * thread takes batches from the queue head -- all of them (batch, none) or
 * one turn's (always) -- pwritev()s them, fdatasync()s (not with none),
 * stores a checkpoint or unlinks segments if a batch carries them, then
 * under the mutex advances the written position, recycles the batches,
 * publishes `synced` (atomic) and writes the eventfd; its read callback on
 * the loop commits what accumulated and calls on_synced. Batches being
 * written stay on the queue until then, so the loop can still copy an
 * unwritten record out of them (under the mutex).
 *
 *   append -> fill --commit_ev / end of round--> queue --sync thread-->
 *   pwritev, fdatasync -> synced, eventfd --loop--> on_synced(ctx, synced)
 *
 * Invariants:
 * - Records are in the files in sequence order; a segment's records all
 *   precede the next segment's, and when a round moves on to a new segment
 *   the old one is fdatasynced first, so a torn record can only be at the
 *   end of the last segment.
 * - A segment is unlinked (or made a spare) only after every batch
 *   committed before the GC decision is on disk (the deletion rides on the
 *   next batch), and segments that depended on it wait for a later batch
 *   (journal_index.c).
 * - Only the sync thread writes or syncs segment files; only the loop
 *   thread appends, reads back and collects.
 *
 * Memory: a record that cannot be buffered cannot be reported through this
 * interface, so allocation failure on the append path logs and aborts.
 * Errors: a failed write or fdatasync is logged and freezes `synced` for
 * good (confirms must not go out for data that may not be on disk) --
 * except when the file system is full (ENOSPC, EDQUOT): then the round is
 * written again, whole, every NO_SPACE_RETRY_MS until it goes through (its
 * writes are positioned, so writing them twice is harmless, and writing the
 * bytes again is what makes a failed fdatasync's pages dirty again). Its
 * records stay unconfirmed meanwhile, later ones wait behind it, and the
 * unwritten bytes grow until publishers pause (server_journal_lagging).
 * A close while still full gives up as a failure does.
 * Logging goes to journal_config.log, or to stderr in core/log.c's format.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include <event2/event.h>

#include "journal_int.h"

enum {
    DEFAULT_SEGMENT_SIZE = 64u << 20,
    MIN_SEGMENT_SIZE = 4096,
    MAX_SEGMENT_SIZE = 1u << 30,
    FILL_INITIAL = 64u << 10,
    BATCH_KEEP_CAP = 8u << 20, /* a recycled batch keeps at most this much buffer */
    FREE_LIST_BYTES = 32u << 20, /* and the free list at most this much in all */
    COMMIT_EAGER_BYTES = 4u << 20, /* a fill this big goes to the sync thread at once */
    IOV_BATCH = 64,
    MAX_READ_FDS = 64,
    IDLE_MS = 1000,
    READ_MAX = 64, /* records journal_read_messages reads at once */
};

/* ---- logging ----------------------------------------------------------- */

void journal_log(const journal *j, int level, const char *fmt, ...)
{
    static const char *const names[] = {"debug", "info", "warning", "error"};
    char text[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (j && j->log) {
        j->log(level, text);
        return;
    }
    char line[1024];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    int n = (int)strftime(line, sizeof line, "%Y-%m-%d %H:%M:%S", &tm);
    n += snprintf(line + n, sizeof line - (size_t)n, ".%03d [%s] journal: %s\n",
                  (int)(tv.tv_usec / 1000), names[level & 3], text);
    if (n > (int)sizeof line - 1)
        n = (int)sizeof line - 1;
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}

_Noreturn void journal_oom(const journal *j, const char *what)
{
    journal_log(j, JLOG_ERROR, "out of memory growing %s; aborting", what);
    abort();
}

void journal_seg_path(const journal *j, uint32_t num, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%08u.seg", j->path, num);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- batches ----------------------------------------------------------- */

static void batch_free(jbatch *b)
{
    if (b == NULL)
        return;
    free(b->ck_image);
    free(b->data);
    free(b->runs);
    free(b->deletes);
    free(b->tasks);
    free(b);
}

static void grow_array(const journal *j, void **p, size_t *cap, size_t need, size_t elem,
                       size_t initial)
{
    if (need <= *cap)
        return;
    size_t cap2 = *cap ? *cap : initial;
    while (cap2 < need)
        cap2 *= 2;
    void *q = realloc(*p, cap2 * elem);
    if (q == NULL)
        journal_oom(j, "the journal batch");
    *p = q;
    *cap = cap2;
}

/* The run that the next `n` bytes for `seg` at `seg_off` extend. */
static jrun *batch_run(journal *j, jbatch *b, uint32_t seg, uint64_t seg_off)
{
    if (b->nruns > 0) {
        jrun *r = &b->runs[b->nruns - 1];
        if (r->seg == seg && r->seg_off + r->len == seg_off)
            return r;
    }
    grow_array(j, (void **)&b->runs, &b->capruns, b->nruns + 1, sizeof *b->runs, 4);
    jrun *r = &b->runs[b->nruns++];
    *r = (jrun){.seg = seg, .seg_off = seg_off, .buf_off = b->len};
    return r;
}

/* Room for n more bytes in the fill batch; returns where they go. */
static uint8_t *batch_room(journal *j, size_t n)
{
    jbatch *b = j->fill;
    grow_array(j, (void **)&b->data, &b->cap, b->len + n, 1, FILL_INITIAL);
    return b->data + b->len;
}

/* Keeps batches for reuse (under load many turns' batches are in flight at
 * once; fresh buffers would page-fault on every turn), within a budget. */
static void batch_recycle_locked(journal *j, jbatch *b)
{
    if (b->cap > BATCH_KEEP_CAP) {
        free(b->data);
        b->data = NULL;
        b->cap = 0;
    }
    if (j->free_bytes + b->cap > FREE_LIST_BYTES) {
        batch_free(b);
        return;
    }
    j->free_bytes += b->cap;
    free(b->ck_image);
    b->ck_image = NULL;
    b->len = b->nruns = b->ndeletes = b->ck_len = b->ntasks = 0;
    b->last_seq = 0;
    b->next = j->free_list;
    j->free_list = b;
}

/* Hands the fill batch to the sync thread (loop thread). Unless `force`,
 * with sync = batch or none, while the sync thread still has work the fill
 * keeps growing instead (up to COMMIT_EAGER_BYTES): on_notify commits it
 * when the round ends, so one round takes everything that accumulated in
 * one buffer rather than one small batch per turn. */
static void commit(journal *j, bool force)
{
    j->commit_pending = false;
    jbatch *b = j->fill;
    if (b->nruns == 0 && b->ndeletes == 0 && b->ck_image == NULL && b->ntasks == 0)
        return;
    bool may_wait = !force && j->mode != JOURNAL_SYNC_ALWAYS && b->len < COMMIT_EAGER_BYTES;
    pthread_mutex_lock(&j->mu);
    bool busy = j->queue_head != NULL;
    pthread_mutex_unlock(&j->mu);
    if (may_wait && busy)
        return;
    if (j->before_commit && b->ntasks)
        j->before_commit(j->before_commit_ctx); /* may append: still this batch */
    pthread_mutex_lock(&j->mu);
    b->next = NULL;
    if (j->queue_tail)
        j->queue_tail->next = b;
    else
        j->queue_head = b;
    j->queue_tail = b;
    jbatch *f = j->free_list;
    if (f) {
        j->free_list = f->next;
        j->free_bytes -= f->cap;
    }
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (f == NULL && (f = calloc(1, sizeof *f)) == NULL)
        journal_oom(j, "the journal batch");
    f->next = NULL;
    j->fill = f;
}

static void on_commit(evutil_socket_t fd, short what, void *arg) { commit(arg, false); }

static void report_synced(journal *j)
{
    journal_seq s = journal_synced(j);
    if (s > j->reported_synced) {
        j->reported_synced = s;
        if (j->on_synced)
            j->on_synced(j->ctx, s);
    }
}

static void on_notify(evutil_socket_t fd, short what, void *arg)
{
    journal *j = arg;
    uint64_t v;
    ssize_t r = read(j->efd, &v, sizeof v);
    (void)r;
    commit(j, false); /* what accumulated during the round just ended */
    report_synced(j);
}

/* ---- appends (loop thread) ---------------------------------------------- */

static void start_segment(journal *j)
{
    uint32_t num = j->next_seg_num++;
    jseg *s = journal_seg_add(j, num);
    if (s == NULL)
        journal_oom(j, "the segment table");
    s->scanned = true;
    s->seed = journal_rec_seed(JOURNAL_SEG_VERSION, num);
    s->first_seq = j->next_seq;
    j->active = s;
    uint8_t *p = batch_room(j, SEG_HEADER_SIZE);
    journal_seg_header_encode(p, num, j->next_seq);
    batch_run(j, j->fill, num, 0)->len += SEG_HEADER_SIZE;
    j->fill->len += SEG_HEADER_SIZE;
    j->appended_bytes += SEG_HEADER_SIZE;
    s->size = SEG_HEADER_SIZE;
}

/* Whether a record may start a new segment: not an enqueue, which stays
 * next to the message it usually follows, nor a group's records after its
 * first, so a group never spans segments (replay decides on a group within
 * one segment). */
static bool may_roll(const journal *j, rec_type type)
{
    return type != REC_ENQUEUE && (!j->group.open || j->group.records == 0);
}

/* Reserves a record of `len` bytes (header included) in the fill batch and
 * the active segment, rolling to a new segment first when the active one
 * has passed segment_size (if may_roll). Returns the record's first byte. */
static uint8_t *reserve(journal *j, rec_type type, uint64_t len, journal_loc *loc)
{
    assert(len <= UINT32_MAX);
    uint64_t padded = align8(len);
    jseg *s = j->active;
    bool roll = s == NULL || (s->size >= j->segment_size && may_roll(j, type));
    /* A group's records (a few messages of at most max_message_size) fit
     * in the 3 GiB between a segment's size limit and UINT32_MAX. */
    assert(!j->group.open || j->group.records == 0 || roll ||
           s->size + padded <= UINT32_MAX);
    if (roll || s->size + padded > UINT32_MAX)
        start_segment(j);
    s = j->active;
    uint8_t *p = batch_room(j, padded);
    batch_run(j, j->fill, s->num, s->size)->len += padded;
    *loc = (journal_loc){s->num, (uint32_t)s->size, (uint32_t)len};
    j->fill->len += padded;
    j->appended_bytes += padded;
    s->size += padded;
    return p;
}

static journal_seq finish(journal *j, uint8_t *rec, rec_type type, uint32_t len)
{
    uint8_t flags = 0;
    if (j->group.open && type != REC_GROUP_END) {
        if (j->group.records++ == 0) {
            j->group.seg = j->active->num;
            j->group.first_off = j->active->size - align8(len);
        }
        assert(j->group.seg == j->active->num);
        flags = REC_FLAG_GROUP;
    }
    journal_rec_seal(rec, type, flags, len, j->active->seed);
    journal_seq seq = j->next_seq++;
    j->fill->last_seq = seq;
    j->appended_records++;
    j->appended_since_tick = true;
    if (!j->commit_pending) {
        j->commit_pending = true;
        event_active(j->commit_ev, EV_TIMEOUT, 0);
    }
    return seq;
}

static uint8_t *put_bytes(uint8_t *p, amqp_bytes b)
{
    if (b.len > 0)
        memcpy(p, b.ptr, b.len);
    return p + b.len;
}

static void put_loc(uint8_t *p, journal_loc loc)
{
    put32(p, loc.segment);
    put32(p + 4, loc.offset);
    put32(p + 8, loc.length);
}

journal_seq journal_append_message(journal *j, uint64_t msg_id, amqp_bytes exchange,
                                   amqp_bytes routing_key, amqp_bytes properties, amqp_bytes body,
                                   journal_loc *loc)
{
    assert(exchange.len <= UINT16_MAX && routing_key.len <= UINT16_MAX);
    uint64_t len = (uint64_t)REC_HEADER_SIZE + MSG_FIXED + exchange.len + routing_key.len +
                   properties.len + body.len;
    journal_loc at;
    uint8_t *rec = reserve(j, REC_MESSAGE, len, &at);
    j->active->msgs++;
    uint8_t *p = rec + REC_HEADER_SIZE;
    put64(p, msg_id);
    put16(p + 8, (uint16_t)exchange.len);
    put16(p + 10, (uint16_t)routing_key.len);
    put32(p + 12, properties.len);
    put32(p + 16, body.len);
    p = put_bytes(p + MSG_FIXED, exchange);
    p = put_bytes(p, routing_key);
    p = put_bytes(p, properties);
    put_bytes(p, body);
    if (loc)
        *loc = at;
    return finish(j, rec, REC_MESSAGE, (uint32_t)len);
}

/* The broker keeps a message's first location; compaction may have copied
 * it since, and an enqueue must name a copy that exists: replay drops an
 * enqueue whose segment is gone, and the index must pin the copy's. (The
 * copy's segment may be collected while the first stays, pinned by others.) */
static journal_loc existing_copy(const journal *j, uint64_t msg_id, journal_loc was)
{
    journal_loc moved = journal_moved_loc(j, msg_id, was);
    return moved.segment != 0 && journal_seg_find(j, moved.segment) ? moved : was;
}

bool journal_message_at(const journal *j, uint64_t msg_id, journal_loc was, journal_loc *now)
{
    *now = existing_copy(j, msg_id, was);
    return now->segment != 0 && journal_seg_find(j, now->segment) != NULL;
}

journal_seq journal_append_enqueue(journal *j, uint64_t queue_id, uint64_t msg_id,
                                   journal_loc loc)
{
    loc = existing_copy(j, msg_id, loc);
    journal_loc at;
    uint8_t *rec = reserve(j, REC_ENQUEUE, REC_HEADER_SIZE + ENQ_PAYLOAD, &at);
    uint8_t *p = rec + REC_HEADER_SIZE;
    put64(p, queue_id);
    put64(p + 8, msg_id);
    put_loc(p + 16, loc);
    if (loc.segment != 0 && journal_seg_find(j, loc.segment))
        journal_account_enqueue(j, queue_id, msg_id, loc.segment, at.segment);
    else
        journal_log(j, JLOG_ERROR,
                    "enqueue of message %llu into queue %llu: its segment %u is gone",
                    (unsigned long long)msg_id, (unsigned long long)queue_id, loc.segment);
    return finish(j, rec, REC_ENQUEUE, at.length);
}

journal_seq journal_append_settle(journal *j, uint64_t queue_id, uint64_t msg_id,
                                  journal_loc loc, journal_settle_kind kind, amqp_bytes reason,
                                  amqp_bytes target)
{
    assert(kind >= JOURNAL_ACK && kind <= JOURNAL_MOVE);
    assert(reason.len <= UINT16_MAX && target.len <= UINT16_MAX);
    journal_loc at;
    uint64_t len = (uint64_t)REC_HEADER_SIZE + SETTLE_FIXED + reason.len + target.len;
    uint8_t *rec = reserve(j, REC_SETTLE, len, &at);
    uint8_t *p = rec + REC_HEADER_SIZE;
    put64(p, queue_id);
    put64(p + 8, msg_id);
    put_loc(p + 16, loc);
    p[28] = (uint8_t)kind;
    p[29] = 0;
    put16(p + 30, (uint16_t)reason.len);
    put16(p + 32, (uint16_t)target.len);
    put_bytes(put_bytes(p + SETTLE_FIXED, reason), target);
    journal_account_settle(j, queue_id, msg_id, at.segment);
    return finish(j, rec, REC_SETTLE, at.length);
}

journal_seq journal_append_delivered(journal *j, uint64_t queue_id, uint64_t msg_id,
                                     uint32_t count)
{
    journal_loc at;
    uint8_t *rec = reserve(j, REC_DELIVERED, REC_HEADER_SIZE + DLV_PAYLOAD, &at);
    uint8_t *p = rec + REC_HEADER_SIZE;
    put64(p, queue_id);
    put64(p + 8, msg_id);
    put32(p + 16, count);
    journal_account_delivered(j, queue_id, msg_id, count, at.segment);
    return finish(j, rec, REC_DELIVERED, at.length);
}

journal_seq journal_append_delayed(journal *j, uint64_t queue_id, uint64_t msg_id,
                                   uint64_t until_ms)
{
    journal_loc at;
    uint8_t *rec = reserve(j, REC_DELAYED, REC_HEADER_SIZE + DLY_PAYLOAD, &at);
    uint8_t *p = rec + REC_HEADER_SIZE;
    put64(p, queue_id);
    put64(p + 8, msg_id);
    put64(p + 16, until_ms);
    journal_account_delayed(j, queue_id, msg_id, until_ms, at.segment);
    return finish(j, rec, REC_DELAYED, at.length);
}

journal_seq journal_append_sync_task(journal *j, journal_sync_task *t)
{
    jbatch *b = j->fill;
    grow_array(j, (void **)&b->tasks, &b->captasks, b->ntasks + 1, sizeof *b->tasks, 4);
    b->tasks[b->ntasks++] = t;
    journal_seq seq = j->next_seq++;
    b->last_seq = seq;
    if (!j->commit_pending) {
        j->commit_pending = true;
        event_active(j->commit_ev, EV_TIMEOUT, 0);
    }
    return seq;
}

void journal_set_before_commit(journal *j, void (*fn)(void *ctx), void *ctx)
{
    j->before_commit = fn;
    j->before_commit_ctx = ctx;
}

void journal_group_begin(journal *j)
{
    assert(!j->group.open); /* groups do not nest */
    j->group = (struct jgroup){.open = true};
}

/* The end record names how many members precede it and how many bytes they
 * take, so replay can tell a whole group from one that lost records. */
journal_seq journal_group_end(journal *j)
{
    assert(j->group.open);
    uint32_t records = j->group.records;
    if (records == 0) {
        j->group.open = false;
        return 0;
    }
    journal_loc at;
    uint8_t *rec = reserve(j, REC_GROUP_END, REC_HEADER_SIZE + GROUP_PAYLOAD, &at);
    assert(at.segment == j->group.seg);
    put32(rec + REC_HEADER_SIZE, records);
    put32(rec + REC_HEADER_SIZE + 4, (uint32_t)(at.offset - j->group.first_off));
    journal_seq seq = finish(j, rec, REC_GROUP_END, at.length);
    j->group = (struct jgroup){0};
    return seq;
}

static journal_seq append_queue_record(journal *j, rec_type type, uint64_t queue_id)
{
    journal_loc at;
    uint8_t *rec = reserve(j, type, REC_HEADER_SIZE + QUEUE_PAYLOAD, &at);
    put64(rec + REC_HEADER_SIZE, queue_id);
    if (type == REC_PURGE)
        journal_account_purge(j, queue_id, at.segment);
    else
        journal_account_queue_delete(j, queue_id, at.segment);
    return finish(j, rec, type, at.length);
}

journal_seq journal_append_purge(journal *j, uint64_t queue_id)
{
    return append_queue_record(j, REC_PURGE, queue_id);
}

journal_seq journal_append_queue_delete(journal *j, uint64_t queue_id)
{
    return append_queue_record(j, REC_QUEUE_DELETE, queue_id);
}

uint64_t journal_round_age_ms(journal *j)
{
    uint64_t started = atomic_load(&j->round_started_ms);
    uint64_t now = now_ms();
    return started && now > started ? now - started : 0;
}

journal_seq journal_synced(const journal *j)
{
    journal_seq s = atomic_load(&j->synced);
    return j->gated && j->replicated < s ? j->replicated : s;
}

void journal_set_replicated(journal *j, journal_seq replicated_through)
{
    j->replicated = replicated_through;
    if (j->gated)
        report_synced(j);
}

mirror *journal_mirror(const journal *j) { return j->mirror; }

uint64_t journal_unwritten_bytes(const journal *j)
{
    return j->appended_bytes - atomic_load(&j->written_bytes);
}

uint64_t journal_size_bytes(const journal *j)
{
    uint64_t n = 0;
    for (size_t i = 0; i < j->nsegs; i++)
        n += j->segs[i]->size;
    return n;
}

/* ---- the sync thread ---------------------------------------------------- */

/* What the sync thread is writing: an iovec run for one segment. */
typedef struct writer {
    struct iovec iov[IOV_BATCH];
    int niov;
    uint32_t seg;
    uint64_t start, end;
    bool dirty;     /* j->wfd has data not yet fdatasynced */
    bool dir_dirty; /* a segment was created since the directory was synced */
} writer;

static bool sys_fail(journal *j, const char *what, uint32_t seg)
{
    if (errno == ENOSPC || errno == EDQUOT) {
        if (!atomic_exchange(&j->out_of_space, true))
            journal_log(j, JLOG_ERROR, "%s (segment %u) failed: %s; retrying until there is "
                        "space, nothing further is confirmed until then", what, seg,
                        strerror(errno));
        return false;
    }
    journal_log(j, JLOG_ERROR, "%s (segment %u) failed: %s; no further records will be "
                "reported synced", what, seg, strerror(errno));
    atomic_store(&j->failed, true);
    return false;
}

static void spare_path(const journal *j, unsigned i, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/spare%u", j->path, i);
}

/* Cuts the open segment's file to what was written in it. */
static bool truncate_reused(journal *j)
{
    char path[PATH_MAX];
    journal_seg_path(j, j->wseg, path, sizeof path);
    return mirror_ftruncate(j->mirror, j->wfd, path, j->wend) == 0;
}

/* A reused file is cut to what this segment holds before it is closed, so
 * only the last segment can have old bytes after its records. */
static bool close_segment(journal *j, writer *w)
{
    if (j->wfd < 0)
        return true;
    if (j->wfile_size > j->wend) {
        if (!truncate_reused(j))
            return sys_fail(j, "truncating the reused file of", j->wseg);
        w->dirty = true;
    }
    if (w->dirty && j->mode != JOURNAL_SYNC_NONE && fdatasync(j->wfd) != 0)
        return sys_fail(j, "fdatasync", j->wseg);
    close(j->wfd);
    j->wfd = -1;
    j->wseg = 0;
    w->dirty = false;
    return true;
}

/* Renames a spare file, if there is one, to `path`. Overwriting a file's
 * existing blocks lets fdatasync skip the file system's metadata commit
 * that growing a file costs (one disk write and flush less per round). */
static bool take_spare(journal *j, const char *path)
{
    for (unsigned i = 0; i < JOURNAL_SPARES; i++) {
        if (!j->spare[i])
            continue;
        j->spare[i] = false;
        char from[PATH_MAX];
        spare_path(j, i, from, sizeof from);
        if (mirror_rename(j->mirror, from, path) == 0)
            return true;
        journal_log(j, JLOG_WARNING, "reusing %s: %s", from, strerror(errno));
    }
    return false;
}

static bool open_segment(journal *j, writer *w, uint32_t seg, uint64_t off)
{
    if (j->wfd >= 0 && j->wseg == seg)
        return true;
    if (!close_segment(j, w))
        return false;
    char path[PATH_MAX];
    journal_seg_path(j, seg, path, sizeof path);
    int flags = O_WRONLY | O_CLOEXEC;
    if (off == 0 && !take_spare(j, path))
        flags |= O_CREAT | O_EXCL;
    j->wfd = mirror_open(j->mirror, path, flags, 0644);
    struct stat st;
    if (j->wfd < 0 || fstat(j->wfd, &st) != 0)
        return sys_fail(j, "creating the segment file", seg);
    j->wseg = seg;
    j->wfile_size = (uint64_t)st.st_size;
    j->wend = off;
    w->dir_dirty |= off == 0;
    return true;
}

static bool flush_iov(journal *j, writer *w)
{
    if (w->niov == 0)
        return true;
    if (!open_segment(j, w, w->seg, w->start))
        return false;
    struct iovec *iov = w->iov;
    int n = w->niov;
    uint64_t off = w->start;
    w->niov = 0;
    w->dirty = true;
    struct iovec whole[IOV_BATCH]; /* for the mirror: the loop below consumes w->iov */
    int nwhole = n;
    if (j->mirror)
        memcpy(whole, w->iov, (size_t)n * sizeof *whole);
    while (n > 0) {
        ssize_t k = pwritev(j->wfd, iov, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return sys_fail(j, "write", w->seg);
        off += (uint64_t)k;
        while (n > 0 && (size_t)k >= iov->iov_len) {
            k -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + k;
            iov->iov_len -= (size_t)k;
        }
    }
    if (j->mirror) {
        char path[PATH_MAX];
        journal_seg_path(j, w->seg, path, sizeof path);
        mirror_wrote(j->mirror, path, w->start, whole, nwhole);
    }
    if (off > j->wend)
        j->wend = off;
    return true;
}

static bool add_run(journal *j, writer *w, const jbatch *b, const jrun *r)
{
    if (w->niov > 0 && (w->seg != r->seg || w->end != r->seg_off || w->niov == IOV_BATCH)) {
        if (!flush_iov(j, w))
            return false;
    }
    if (w->niov == 0) {
        w->seg = r->seg;
        w->start = w->end = r->seg_off;
    }
    w->iov[w->niov++] = (struct iovec){b->data + r->buf_off, r->len};
    w->end += r->len;
    return true;
}

/* Makes everything written so far durable (per the sync mode). */
static bool sync_written(journal *j, writer *w, bool force)
{
    if (!flush_iov(j, w))
        return false;
    if (j->mode == JOURNAL_SYNC_NONE && !force)
        return true;
    if (w->dirty && j->wfd >= 0 && fdatasync(j->wfd) != 0)
        return sys_fail(j, "fdatasync", j->wseg);
    w->dirty = false;
    if (w->dir_dirty && fsync(j->dirfd) != 0)
        return sys_fail(j, "fsync of the journal directory", 0);
    w->dir_dirty = false;
    return true;
}

/* A collected segment becomes a spare file if a slot is free and it is at
 * least half a segment long; otherwise it is unlinked. */
static void delete_segments(journal *j, writer *w, const jbatch *b)
{
    for (size_t i = 0; i < b->ndeletes; i++) {
        if (b->deletes[i] == j->wseg) {
            close(j->wfd);
            j->wfd = -1;
            j->wseg = 0;
            w->dirty = false;
        }
        char path[PATH_MAX], spare[PATH_MAX];
        journal_seg_path(j, b->deletes[i], path, sizeof path);
        struct stat st;
        unsigned k = 0;
        while (k < JOURNAL_SPARES && j->spare[k])
            k++;
        if (k < JOURNAL_SPARES && stat(path, &st) == 0 &&
            (uint64_t)st.st_size >= j->segment_size / 2) {
            spare_path(j, k, spare, sizeof spare);
            if (mirror_rename(j->mirror, path, spare) == 0) {
                j->spare[k] = true;
                continue;
            }
        }
        if (mirror_unlink(j->mirror, path) != 0 && errno != ENOENT)
            journal_log(j, JLOG_ERROR, "deleting %s: %s", path, strerror(errno));
    }
    if (fsync(j->dirfd) != 0)
        journal_log(j, JLOG_ERROR, "fsync of the journal directory: %s", strerror(errno));
}

/* The batch's other files (journal_append_sync_task); each task runs once,
 * even when the round is tried again after the disk filled up. */
static bool run_tasks(journal *j, jbatch *b)
{
    bool sync = j->mode != JOURNAL_SYNC_NONE;
    for (; b->ntasks > 0; b->ntasks--) {
        journal_sync_task *t = b->tasks[b->ntasks - 1];
        if (!t->run(t, sync)) {
            journal_log(j, JLOG_ERROR, "syncing a stream failed: what it held is not confirmed");
            atomic_store(&j->failed, true);
            return false;
        }
    }
    return true;
}

/* Writes n batches from `first` on and syncs; stores their checkpoints and
 * carries out their deletions, each once its own batch and everything
 * before it is durable. *ck_seg: the newest checkpoint stored, if any. */
static bool write_round(journal *j, jbatch *first, size_t n, uint32_t *ck_seg)
{
    writer w = {.dir_dirty = false};
    jbatch *b = first;
    for (size_t k = 0; k < n; k++, b = k < n ? b->next : NULL) {
        /* (the last one's `next` belongs to the loop thread: not read) */
        for (size_t i = 0; i < b->nruns; i++) {
            if (!add_run(j, &w, b, &b->runs[i]))
                return false;
        }
        if (b->ck_image) {
            if (!sync_written(j, &w, true))
                return false;
            if (journal_checkpoint_store(j, b->ck_image, b->ck_len))
                *ck_seg = b->ck_seg;
        }
        if (b->ndeletes > 0) {
            if (!sync_written(j, &w, false))
                return false;
            delete_segments(j, &w, b);
        }
        if (!run_tasks(j, b))
            return false;
    }
    /* A cluster leader's followers sync the round while the leader does:
     * its mark goes out once its bytes are written, before the fdatasync
     * (a confirm still waits for the local sync as well as the gate). */
    if (j->mirror) {
        journal_seq last = 0;
        b = first;
        for (size_t k = 0; k < n; k++, b = k < n ? b->next : NULL)
            last = b->last_seq ? b->last_seq : last;
        if (!flush_iov(j, &w))
            return false;
        if (last)
            mirror_synced(j->mirror, last);
    }
    return sync_written(j, &w, false);
}

/* Under the mutex: retires the n batches of a finished round (their
 * records are in the files now) and returns the last sequence in them. */
static journal_seq retire_round_locked(journal *j, size_t n, uint32_t ck_seg)
{
    journal_seq seq = 0;
    if (ck_seg)
        j->ck_durable_seg = ck_seg;
    for (size_t k = 0; k < n; k++) {
        jbatch *b = j->queue_head;
        j->queue_head = b->next;
        if (b->last_seq)
            seq = b->last_seq;
        j->ck_attempts += b->ck_image != NULL;
        atomic_fetch_add(&j->written_bytes, b->len);
        if (b->nruns > 0) {
            const jrun *r = &b->runs[b->nruns - 1];
            j->written_seg = r->seg;
            j->written_off = r->seg_off + r->len;
        }
        batch_recycle_locked(j, b);
    }
    if (j->queue_head == NULL)
        j->queue_tail = NULL;
    return seq;
}

/* Closing: whatever the mode, everything appended is made durable. */
static void sync_final(journal *j)
{
    writer w = {.dirty = true, .dir_dirty = true};
    if (j->wfd >= 0 && j->wfile_size > j->wend && !truncate_reused(j))
        sys_fail(j, "truncating the reused file of", j->wseg);
    if (!atomic_load(&j->failed) && j->wfd >= 0)
        sync_written(j, &w, true);
    else if (!atomic_load(&j->failed))
        fsync(j->dirfd);
    if (j->wfd >= 0)
        close(j->wfd);
    j->wfd = -1;
}

#define NO_SPACE_RETRY_MS 200

/* Out of space: waits before the round is tried again; false when the
 * journal is closing meanwhile (the round then counts as failed). */
static bool wait_for_space(journal *j)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += NO_SPACE_RETRY_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&j->mu);
    while (!j->stop && pthread_cond_timedwait(&j->cv, &j->mu, &until) != ETIMEDOUT) {
    } /* new batches signal cv too: they do not make room */
    bool stop = j->stop;
    pthread_mutex_unlock(&j->mu);
    if (stop) {
        journal_log(j, JLOG_ERROR, "closing while the disk is full: what was not written is "
                    "lost (it was never confirmed)");
        atomic_store(&j->failed, true);
    }
    return !stop;
}

static void *sync_main(void *arg)
{
    journal *j = arg;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        while (j->queue_head == NULL && !j->stop)
            pthread_cond_wait(&j->cv, &j->mu);
        if (j->queue_head == NULL)
            break;
        jbatch *first = j->queue_head;
        size_t n = 1;
        for (jbatch *b = first; j->mode != JOURNAL_SYNC_ALWAYS && b->next; b = b->next)
            n++;
        pthread_mutex_unlock(&j->mu);

        uint32_t ck_seg = 0;
        atomic_store(&j->round_started_ms, now_ms());
        bool ok = !atomic_load(&j->failed) && write_round(j, first, n, &ck_seg);
        while (!ok && atomic_load(&j->out_of_space) && wait_for_space(j))
            ok = write_round(j, first, n, &ck_seg);
        if (ok && atomic_exchange(&j->out_of_space, false))
            journal_log(j, JLOG_INFO, "writes resumed: there is space again");

        atomic_store(&j->round_started_ms, 0);
        pthread_mutex_lock(&j->mu);
        journal_seq seq = retire_round_locked(j, n, ck_seg);
        pthread_mutex_unlock(&j->mu);
        if (ok && seq)
            atomic_store(&j->synced, seq);
        atomic_fetch_add(&j->syncs, 1);
        uint64_t one = 1;
        ssize_t r = write(j->efd, &one, sizeof one);
        (void)r;
        pthread_mutex_lock(&j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    sync_final(j);
    return NULL;
}

/* ---- open and close ----------------------------------------------------- */

static bool fail(char *err, size_t errlen, const char *fmt, const char *arg)
{
    if (err && errlen)
        snprintf(err, errlen, fmt, arg, strerror(errno));
    return false;
}

static bool parse_seg_name(const char *name, uint32_t *num)
{
    size_t n = strlen(name);
    if (n < 12 || n > 14 || strcmp(name + n - 4, ".seg") != 0)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n - 4; i++) {
        if (name[i] < '0' || name[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    if (v == 0 || v >= UINT32_MAX)
        return false;
    *num = (uint32_t)v;
    return true;
}

/* Adds every segment file to the table (unscanned until replay). */
static bool list_segments(journal *j, char *err, size_t errlen)
{
    DIR *d = opendir(j->path);
    if (d == NULL)
        return fail(err, errlen, "opening %s: %s", j->path);
    struct dirent *de;
    uint32_t max = 0;
    while ((de = readdir(d)) != NULL) {
        uint32_t num;
        struct stat st;
        if (!parse_seg_name(de->d_name, &num) || fstatat(j->dirfd, de->d_name, &st, 0) != 0)
            continue;
        jseg *s = journal_seg_add(j, num);
        if (s == NULL) {
            closedir(d);
            errno = ENOMEM;
            return fail(err, errlen, "listing %s: %s", j->path);
        }
        s->size = (uint64_t)st.st_size;
        s->seed = journal_rec_seed(JOURNAL_SEG_VERSION, num); /* replay reads the header */
        max = num > max ? num : max;
    }
    closedir(d);
    j->next_seg_num = max + 1;
    for (unsigned i = 0; i < JOURNAL_SPARES; i++) {
        char path[PATH_MAX];
        spare_path(j, i, path, sizeof path);
        j->spare[i] = access(path, F_OK) == 0;
    }
    return true;
}

static bool make_dirs(journal *j, const char *dir, char *err, size_t errlen)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return fail(err, errlen, "creating %s: %s", dir);
    size_t n = strlen(dir) + sizeof "/" JOURNAL_SUBDIR;
    if ((j->path = malloc(n)) == NULL)
        return fail(err, errlen, "%s: %s", "journal_open");
    snprintf(j->path, n, "%s/%s", dir, JOURNAL_SUBDIR);
    if (mirror_mkdir(j->mirror, j->path, 0755) != 0 && errno != EEXIST)
        return fail(err, errlen, "creating %s: %s", j->path);
    j->dirfd = open(j->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (j->dirfd < 0)
        return fail(err, errlen, "opening %s: %s", j->path);
    return true;
}

/* Loads the checkpoint for replay. It stays on disk: it covers a durable
 * prefix, and segments may already have been collected relying on it.
 * New segments are numbered past every one it lists, so none of them can
 * be mistaken for a listed one that has since been collected. */
static void take_checkpoint(journal *j)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", j->path, JOURNAL_CK_NAME);
    mirror_unlink(j->mirror, tmp);
    j->ck = journal_checkpoint_load(j);
    if (j->ck && j->ck->nsegs > 0 && j->ck->segs[j->ck->nsegs - 1].num >= j->next_seg_num)
        j->next_seg_num = j->ck->segs[j->ck->nsegs - 1].num + 1;
}

static bool start_thread(journal *j, char *err, size_t errlen)
{
    j->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (j->efd < 0)
        return fail(err, errlen, "%s: eventfd: %s", "journal_open");
    j->notify_ev = event_new(j->base, j->efd, EV_READ | EV_PERSIST, on_notify, j);
    j->commit_ev = event_new(j->base, -1, 0, on_commit, j);
    if (j->notify_ev == NULL || j->commit_ev == NULL || event_add(j->notify_ev, NULL) != 0) {
        errno = ENOMEM;
        return fail(err, errlen, "%s: events: %s", "journal_open");
    }
    int rc = pthread_create(&j->thread, NULL, sync_main, j);
    if (rc != 0) {
        errno = rc;
        return fail(err, errlen, "%s: starting the sync thread: %s", "journal_open");
    }
    j->thread_started = true;
    return true;
}

static void journal_free(journal *j)
{
    if (j->notify_ev)
        event_free(j->notify_ev);
    if (j->commit_ev)
        event_free(j->commit_ev);
    if (j->efd >= 0)
        close(j->efd);
    if (j->dirfd >= 0)
        close(j->dirfd);
    for (size_t i = 0; i < j->nsegs; i++) {
        if (j->segs[i]->rfd >= 0)
            close(j->segs[i]->rfd);
        free(j->segs[i]->refd_by);
        free(j->segs[i]);
    }
    free(j->segs);
    batch_free(j->fill);
    for (jbatch *b = j->queue_head, *next; b; b = next) {
        next = b->next;
        batch_free(b);
    }
    for (jbatch *b = j->free_list, *next; b; b = next) {
        next = b->next;
        batch_free(b);
    }
    journal_compact_free(j);
    journal_queue_map_free(&j->queues);
    journal_checkpoint_free(j->ck);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j->path);
    free(j);
}

journal *journal_open(const journal_config *cfg, struct event_base *base,
                      void (*on_synced)(void *ctx, journal_seq synced), void *ctx, char *err,
                      size_t errlen)
{
    journal *j = calloc(1, sizeof *j);
    if (j == NULL || cfg == NULL || cfg->dir == NULL || base == NULL) {
        errno = j ? EINVAL : ENOMEM;
        fail(err, errlen, "%s: %s", "journal_open");
        free(j);
        return NULL;
    }
    j->dirfd = j->efd = j->wfd = -1;
    j->segment_size = cfg->segment_size ? cfg->segment_size : DEFAULT_SEGMENT_SIZE;
    if (j->segment_size < MIN_SEGMENT_SIZE)
        j->segment_size = MIN_SEGMENT_SIZE;
    if (j->segment_size > MAX_SEGMENT_SIZE)
        j->segment_size = MAX_SEGMENT_SIZE;
    j->mode = cfg->sync;
    j->log = cfg->log;
    j->mirror = cfg->mirror;
    j->gated = cfg->gated;
    j->base = base;
    j->on_synced = on_synced;
    j->ctx = ctx;
    j->next_seq = 1;
    j->idle_since_ms = now_ms();
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->fill = calloc(1, sizeof *j->fill);
    bool ok = j->fill != NULL && make_dirs(j, cfg->dir, err, errlen) &&
              list_segments(j, err, errlen);
    if (ok)
        take_checkpoint(j);
    if (!ok || !start_thread(j, err, errlen)) {
        journal_free(j);
        return NULL;
    }
    j->replayed = j->nsegs == 0;
    return j;
}

static void gc_pass(journal *j, bool include_active);

void journal_close(journal *j)
{
    if (j == NULL)
        return;
    assert(!j->group.open);
    gc_pass(j, false);
    commit(j, true);
    pthread_mutex_lock(&j->mu);
    j->stop = true;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (j->thread_started)
        pthread_join(j->thread, NULL);
    bool all_scanned = true;
    for (size_t i = 0; i < j->nsegs; i++)
        all_scanned &= j->segs[i]->scanned;
    if (!atomic_load(&j->failed) && all_scanned) {
        size_t len;
        uint8_t *image = journal_checkpoint_image(j, &len);
        if (image)
            journal_checkpoint_store(j, image, len);
        free(image);
    }
    journal_free(j);
}

/* ---- reading back -------------------------------------------------------- */

/* Copies the record at loc out of `b` if it is there. */
static bool copy_from_batch(const jbatch *b, journal_loc loc, uint8_t *buf)
{
    for (size_t i = 0; i < b->nruns; i++) {
        const jrun *r = &b->runs[i];
        if (r->seg == loc.segment && loc.offset >= r->seg_off &&
            loc.offset < r->seg_off + r->len && loc.length <= r->seg_off + r->len - loc.offset) {
            memcpy(buf, b->data + r->buf_off + (loc.offset - r->seg_off), loc.length);
            return true;
        }
    }
    return false;
}

/* Copies a record that is not in the file yet; false: read the file. */
static bool copy_unwritten(journal *j, journal_loc loc, uint8_t *buf)
{
    if (copy_from_batch(j->fill, loc, buf))
        return true;
    bool found = false;
    pthread_mutex_lock(&j->mu);
    bool written = loc.segment < j->written_seg ||
                   (loc.segment == j->written_seg && loc.offset < j->written_off);
    for (const jbatch *b = j->queue_head; !written && !found && b; b = b->next)
        found = copy_from_batch(b, loc, buf);
    pthread_mutex_unlock(&j->mu);
    return found;
}

static int read_fd(journal *j, jseg *s)
{
    if (s->rfd >= 0)
        return s->rfd;
    if (j->open_rfds >= MAX_READ_FDS) {
        for (size_t i = 0; i < j->nsegs; i++) {
            if (j->segs[i]->rfd >= 0) {
                close(j->segs[i]->rfd);
                j->segs[i]->rfd = -1;
            }
        }
        j->open_rfds = 0;
    }
    char path[PATH_MAX];
    journal_seg_path(j, s->num, path, sizeof path);
    s->rfd = open(path, O_RDONLY | O_CLOEXEC);
    if (s->rfd >= 0)
        j->open_rfds++;
    return s->rfd;
}

bool journal_pread_full(int fd, uint8_t *buf, size_t n, uint64_t off)
{
    while (n > 0) {
        ssize_t k = pread(fd, buf, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        buf += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return true;
}

/* Decodes the message record at `loc`, read into `rec`. */
static bool decode_message(journal *j, const jseg *s, journal_loc loc, const uint8_t *rec,
                           journal_message *out)
{
    uint32_t len = 0;
    jrec r;
    if (journal_rec_check(rec, loc.length, s->seed, &len) != REC_OK || len != loc.length ||
        rec[4] != REC_MESSAGE || !journal_rec_decode(rec, len, &r)) {
        journal_log(j, JLOG_ERROR, "segment %u offset %u: not a valid message record",
                    loc.segment, loc.offset);
        return false;
    }
    *out = r.msg;
    return true;
}

static jseg *message_segment(journal *j, journal_loc loc)
{
    jseg *s = journal_seg_find(j, loc.segment);
    if (s == NULL || loc.length < REC_HEADER_SIZE + MSG_FIXED || loc.offset > s->size ||
        loc.length > s->size - loc.offset) {
        journal_log(j, JLOG_ERROR, "read of a message at segment %u offset %u length %u: "
                    "no such record", loc.segment, loc.offset, loc.length);
        return NULL;
    }
    return s;
}

bool journal_read_span(journal *j, jseg *s, uint8_t *buf, size_t len, uint64_t off)
{
    errno = 0;
    int fd = read_fd(j, s);
    if (fd < 0 || !journal_pread_full(fd, buf, len, off)) {
        journal_log(j, JLOG_ERROR, "reading segment %u offset %llu: %s", s->num,
                    (unsigned long long)off, fd < 0 || errno ? strerror(errno) : "short file");
        return false;
    }
    return true;
}

void journal_read_ahead(journal *j, jseg *s, uint64_t off, size_t len)
{
    int fd = read_fd(j, s);
    if (fd >= 0)
        posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
}

bool journal_read_message(journal *j, journal_loc loc, uint8_t *buf, journal_message *out)
{
    jseg *s = message_segment(j, loc);
    if (s == NULL)
        return false;
    if (!copy_unwritten(j, loc, buf) && !journal_read_span(j, s, buf, loc.length, loc.offset))
        return false;
    return decode_message(j, s, loc, buf, out);
}

static bool is_message(journal *j, const journal_message *m, uint64_t id)
{
    if (m->msg_id == id)
        return true;
    journal_log(j, JLOG_ERROR, "message %llu expected, %llu found", (unsigned long long)id,
                (unsigned long long)m->msg_id);
    return false;
}

/* Whether the file holds everything before `end` in segment `seg`. */
static bool written_before(journal *j, uint32_t seg, uint64_t end)
{
    pthread_mutex_lock(&j->mu);
    bool written = seg < j->written_seg || (seg == j->written_seg && end <= j->written_off);
    pthread_mutex_unlock(&j->mu);
    return written;
}

size_t journal_read_messages(journal *j, const uint64_t *ids, const journal_loc *was, size_t n,
                             uint8_t *buf, size_t cap, journal_message *out)
{
    journal_loc locs[READ_MAX];
    n = n < READ_MAX ? n : READ_MAX;
    for (size_t i = 0; i < n; i++)
        locs[i] = journal_moved_loc(j, ids[i], was[i]);
    if (n == 0 || locs[0].length > cap)
        return 0;
    size_t k = 1;
    uint64_t start = locs[0].offset, end = start + locs[0].length;
    while (k < n && locs[k].segment == locs[0].segment && locs[k].offset >= end &&
           locs[k].offset + (uint64_t)locs[k].length - start <= cap) {
        end = locs[k].offset + (uint64_t)locs[k].length;
        k++;
    }
    jseg *s = message_segment(j, (journal_loc){locs[0].segment, (uint32_t)start,
                                               (uint32_t)(end - start)});
    if (k == 1 || s == NULL || !written_before(j, s->num, end))
        return journal_read_message(j, locs[0], buf, out) && is_message(j, out, ids[0]) ? 1 : 0;
    if (!journal_read_span(j, s, buf, end - start, start))
        return 0;
    for (size_t i = 0; i < k; i++)
        if (!decode_message(j, s, locs[i], buf + (locs[i].offset - start), &out[i]) ||
            !is_message(j, &out[i], ids[i]))
            return i;
    return k;
}

/* ---- space ---------------------------------------------------------------- */

/* Deletes every collectable segment: no pins, no refs, scanned; the active
 * one only if include_active (then the next append starts a new segment).
 * A segment freed by another's deletion goes in the next batch, so the
 * sync thread unlinks (and syncs the directory) in dependency order. */
static size_t gc_level(journal *j, bool include_active)
{
    for (size_t i = 0; i < j->nsegs; i++)
        j->segs[i]->refs_changed = false;
    size_t deleted = 0;
    for (size_t i = 0; i < j->nsegs;) {
        jseg *s = j->segs[i];
        if (!s->scanned || s->pins || s->refs || s->refs_changed ||
            (s == j->active && !include_active)) {
            i++;
            continue;
        }
        for (uint32_t k = 0; k < s->nrefd_by; k++) {
            jseg *t = journal_seg_find(j, s->refd_by[k].seg);
            if (t) {
                assert(t->refs >= s->refd_by[k].count);
                t->refs -= s->refd_by[k].count;
                t->refs_changed = true;
            }
        }
        if (s->rfd >= 0) {
            close(s->rfd);
            j->open_rfds--;
        }
        jbatch *b = j->fill;
        grow_array(j, (void **)&b->deletes, &b->capdeletes, b->ndeletes + 1,
                   sizeof *b->deletes, 8);
        b->deletes[b->ndeletes++] = s->num;
        journal_seg_remove(j, s);
        deleted++;
    }
    if (deleted > 0)
        commit(j, true); /* each level in its own batch: unlinks reach the disk in order */
    return deleted;
}

static void gc_pass(journal *j, bool include_active)
{
    if (!j->replayed)
        return; /* the index lacks what the unreplayed segments hold */
    while (gc_level(j, include_active) > 0) {
    }
}

/* Once a periodic checkpoint is on disk, settles before it are not needed. */
static void apply_durable_checkpoint(journal *j)
{
    pthread_mutex_lock(&j->mu);
    uint32_t seg = j->ck_durable_seg;
    uint64_t attempts = j->ck_attempts;
    pthread_mutex_unlock(&j->mu);
    if (seg > j->ck_applied_seg) {
        journal_drop_refs_before(j, seg);
        j->ck_applied_seg = seg;
    }
    if (attempts == j->ck_sent)
        j->ck_in_flight = false;
}

/* Takes a checkpoint when segments kept only for their settles exceed a
 * few segments and twice the checkpoint's size, so its cost stays a small
 * fraction of what it frees. */
static void maybe_checkpoint(journal *j)
{
    uint64_t kept = 0;
    for (size_t i = 0; i < j->nsegs; i++) {
        const jseg *s = j->segs[i];
        if (s->scanned && s->pins == 0 && s->refs > 0 && s != j->active)
            kept += s->size;
    }
    uint64_t estimate = CK_HEADER_SIZE + (uint64_t)CK_ENTRY_SIZE * j->live_entries +
                        (uint64_t)CK_SEG_SIZE * j->nsegs;
    if (j->ck_in_flight || !j->replayed || kept < 4 * j->segment_size || kept < 2 * estimate)
        return;
    size_t len;
    uint8_t *image = journal_checkpoint_image(j, &len);
    if (image == NULL) {
        journal_log(j, JLOG_WARNING, "out of memory for a checkpoint; will retry");
        return;
    }
    jbatch *b = j->fill;
    b->ck_image = image;
    b->ck_len = len;
    b->ck_seg = j->active ? j->active->num : j->next_seg_num;
    j->ck_in_flight = true;
    j->ck_sent++;
    commit(j, true);
}

void journal_tick(journal *j)
{
    assert(!j->group.open); /* a group is appended within one callback */
    uint64_t now = now_ms();
    if (j->appended_since_tick) {
        j->appended_since_tick = false;
        j->idle_since_ms = now;
    }
    apply_durable_checkpoint(j);
    gc_pass(j, now - j->idle_since_ms >= IDLE_MS);
    maybe_checkpoint(j);
    journal_moved_sweep(j);
    journal_compact_maybe_start(j);
}

void journal_get_stats(const journal *j, journal_stats *out)
{
    *out = (journal_stats){
        .segments = j->nsegs,
        .live_messages = j->live_entries,
        .appended_records = j->appended_records,
        .syncs = atomic_load(&j->syncs),
    };
    for (size_t i = 0; i < j->nsegs; i++)
        out->bytes_on_disk += j->segs[i]->size;
}
