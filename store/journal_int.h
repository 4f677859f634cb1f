/* Private to store/'s journal files (journal.c, journal_record.c,
 * journal_index.c, journal_replay.c, crc32c.c): the journal object, the
 * record codec, CRC32C, the live-entry index and the segment scanner. The
 * on-disk formats are described in journal.c's opening comment. Nothing
 * outside store/ (except the journal's own unit tests) includes this.
 * journal_compact.c compacts sparse segments. */
#ifndef WARREN_JOURNAL_INT_H
#define WARREN_JOURNAL_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "store.h"

struct event;

/* Collected segment files kept for reuse (journal.c). */
#define JOURNAL_SPARES 2

/* ---- on-disk constants ------------------------------------------------- */

#define JOURNAL_SEG_MAGIC "WARRENJS" /* 8 bytes, no NUL on disk */
#define JOURNAL_CK_MAGIC "WARRENCK"
#define JOURNAL_SUBDIR "journal"
#define JOURNAL_CK_NAME "checkpoint"

enum {
    JOURNAL_VERSION = 2,     /* of the checkpoint; 1 (no delays) is still read */
    JOURNAL_SEG_VERSION = 3, /* of segment files; 2: no groups or delays; 1: records'
                                CRCs start from 0 (both still read) */
    SEG_HEADER_SIZE = 32,
    REC_HEADER_SIZE = 16,
    REC_ALIGN = 8,
    CK_HEADER_SIZE = 48,
    CK_SEG_SIZE = 16,
    CK_REF_SIZE = 12,
    CK_ENTRY_SIZE = 32,
};

/* Payload sizes (bytes after the record header). */
enum {
    MSG_FIXED = 20,    /* msg_id, exchange len, routing key len, props len, body len */
    ENQ_PAYLOAD = 32,  /* queue, msg, loc */
    SETTLE_FIXED = 34, /* queue, msg, loc, kind, pad, reason len, target len */
    DLV_PAYLOAD = 20,  /* queue, msg, count */
    QUEUE_PAYLOAD = 8, /* purge, queue delete: queue */
    GROUP_PAYLOAD = 8, /* group end: records, bytes */
    DLY_PAYLOAD = 24,  /* queue, msg, until_ms */
};

/* Record header flags (byte 5). */
enum { REC_FLAG_GROUP = 1 }; /* a member of an atomic group: applied only with it */

typedef enum rec_type {
    REC_MESSAGE = 1,
    REC_ENQUEUE = 2,
    REC_SETTLE = 3,
    REC_DELIVERED = 4,
    REC_PURGE = 5,
    REC_QUEUE_DELETE = 6,
    REC_GROUP_END = 7,
    REC_DELAYED = 8,
} rec_type;

/* Log levels, numbered as core/core.h's log_level. */
enum { JLOG_INFO = 1, JLOG_WARNING = 2, JLOG_ERROR = 3 };

static inline uint64_t align8(uint64_t n) { return (n + REC_ALIGN - 1) & ~(uint64_t)(REC_ALIGN - 1); }

static inline void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

/* ---- CRC32C (crc32c.c) ------------------------------------------------- */

/* CRC32C of `len` bytes, continuing from `crc` (0 to start). Hardware when
 * available, else slice-by-8. */
uint32_t journal_crc32c(uint32_t crc, const void *data, size_t len);
/* The table implementation alone (tests compare the two). */
uint32_t journal_crc32c_sw(uint32_t crc, const void *data, size_t len);
/* Whether journal_crc32c uses the SSE4.2 instruction. */
bool journal_crc32c_hw(void);

/* ---- records (journal_record.c) ---------------------------------------- */

/* A decoded record; slices point into the record's bytes. */
typedef struct jrec {
    rec_type type;
    bool grouped; /* REC_FLAG_GROUP */
    uint64_t queue_id, msg_id;
    journal_loc loc;          /* enqueue, settle: where the message is */
    journal_settle_kind kind; /* settle */
    amqp_bytes reason, target;
    uint32_t count;      /* delivered; group end: member records */
    uint32_t bytes;      /* group end: the members' bytes, padding included */
    uint64_t until_ms;   /* delayed */
    journal_message msg; /* message */
} jrec;

typedef enum rec_status {
    REC_OK,
    REC_BAD_HEADER, /* header CRC, type or length impossible */
    REC_TRUNCATED,  /* plausible header, but the record runs past `avail` */
    REC_BAD_CRC,    /* payload CRC mismatch or inconsistent payload */
} rec_status;

/* A record's CRCs start from its segment's seed: the segment number (since
 * version 2), so a reused segment file's old records never pass for new
 * ones. */
static inline uint32_t journal_rec_seed(uint32_t seg_version, uint32_t seg_num)
{
    return seg_version >= 2 ? seg_num : 0;
}

/* Checks the record starting at p with `avail` bytes readable, in a segment
 * whose seed is `seed`; on REC_OK and REC_TRUNCATED sets *len to the record
 * length (header included). */
rec_status journal_rec_check(const uint8_t *p, uint64_t avail, uint32_t seed, uint32_t *len);
/* Decodes a record that passed journal_rec_check. false if its payload is
 * inconsistent (lengths that do not add up, unknown settle kind). */
bool journal_rec_decode(const uint8_t *rec, uint32_t len, jrec *out);
/* Fills in the header of a record whose payload is already at rec + 16
 * (flags: REC_FLAG_*), and zeroes the padding up to align8(len). */
void journal_rec_seal(uint8_t *rec, rec_type type, uint8_t flags, uint32_t len, uint32_t seed);

void journal_seg_header_encode(uint8_t *out, uint32_t num, uint64_t first_seq);
bool journal_seg_header_decode(const uint8_t *p, uint64_t avail, uint32_t *num,
                               uint64_t *first_seq, uint32_t *seed);

/* ---- live-entry index (journal_index.c) -------------------------------- */

/* A live queue entry: message msg_id is in the queue. It pins the segment
 * of its message record (seg), of its enqueue record (enq_seg), of its
 * newest delivered record (dlv_seg, 0 = none, then count is 0) and, if
 * ENTRY_DELAYED, of its newest delayed record (kept in the queue's
 * `delays`: few entries have one, so the common entry stays 24 bytes). */
typedef struct jentry {
    uint64_t msg_id;
    uint32_t seg, enq_seg, dlv_seg;
    uint32_t flags : 2;  /* ENTRY_* */
    uint32_t count : 30; /* the delivery count of its newest delivered record */
} jentry;

enum {
    ENTRY_REPLAYED = 1, /* its enqueue went to the replay handler */
    ENTRY_DELAYED = 2,  /* it has a delayed record: see jqueue.delays */
};
#define ENTRY_COUNT_MAX 0x3fffffffu

/* An entry's delay, in a jqueue's `delays` table (a jentry_table too): seg
 * is its newest delayed record's segment and enq_seg, dlv_seg hold that
 * record's until_ms (low, high 32 bits). journal_index.c's delay_* helpers
 * are the only readers and writers. */

/* Open addressing, linear probing, backward-shift deletion; a slot is empty
 * when seg == 0 (segment numbers start at 1). */
typedef struct jentry_table {
    jentry *slots;
    uint32_t mask, count;
} jentry_table;

typedef struct jqueue {
    uint64_t id;
    jentry_table entries;
    jentry_table delays; /* the delays of its ENTRY_DELAYED entries */
} jqueue;

typedef struct jqueue_slot {
    uint64_t key;
    jqueue *q; /* NULL: empty */
} jqueue_slot;

typedef struct jqueue_map {
    jqueue_slot *slots;
    uint32_t mask, count;
} jqueue_map;

jentry *journal_entry_find(const jentry_table *t, uint64_t msg_id);
/* Finds or inserts (with seg 0 -> caller fills it in); NULL if out of memory. */
jentry *journal_entry_upsert(jentry_table *t, uint64_t msg_id, bool *created);
void journal_entry_remove(jentry_table *t, jentry *e);
void journal_entry_table_free(jentry_table *t);

jqueue *journal_queue_find(const jqueue_map *m, uint64_t id);
jqueue *journal_queue_get(jqueue_map *m, uint64_t id); /* creates; NULL if OOM */
void journal_queue_remove(jqueue_map *m, uint64_t id); /* frees the queue */
void journal_queue_map_free(jqueue_map *m);

/* ---- segments ---------------------------------------------------------- */

typedef struct jseg_ref {
    uint32_t seg, count;
} jseg_ref;

/* A segment file as the loop thread sees it. */
typedef struct jseg {
    uint32_t num;
    uint32_t seed;  /* of its records' CRCs (journal_rec_seed) */
    uint64_t size;  /* bytes appended to it (written or still in a batch) */
    uint64_t pins;  /* live-entry references (see jentry) */
    uint64_t pins_at_tick; /* pins at the last compaction check: still falling = draining */
    uint32_t msgs;  /* message records in it (compaction's measure of density) */
    uint64_t refs;  /* settles here of entries enqueued in older segments still present */
    jseg_ref *refd_by; /* later segments holding settles of entries enqueued here */
    uint32_t nrefd_by, caprefd_by;
    int rfd;           /* read fd, -1 until journal_read_message needs it */
    bool scanned;      /* its records are accounted (replayed or appended here) */
    bool refs_changed; /* refs dropped during the current GC pass */
    bool compacted;    /* compaction ran on it (it is not tried again) */
    uint64_t first_seq;
} jseg;

/* ---- batches (loop -> sync thread) ------------------------------------- */

/* A contiguous stretch of a batch that goes to one segment at seg_off. */
typedef struct jrun {
    uint32_t seg;
    uint64_t seg_off;
    size_t buf_off, len;
} jrun;

typedef struct jbatch {
    struct jbatch *next;
    uint8_t *data;
    size_t len, cap;
    jrun *runs;
    size_t nruns, capruns;
    uint32_t *deletes; /* segments to unlink once this batch is on disk */
    size_t ndeletes, capdeletes;
    uint8_t *ck_image; /* a checkpoint to store once this batch is on disk */
    size_t ck_len;
    uint32_t ck_seg; /* the segment appends went to when it was taken */
    journal_seq last_seq; /* highest record in this batch, 0 if none */
    journal_sync_task **tasks; /* other files to sync in this batch's round */
    size_t ntasks, captasks;
} jbatch;

/* ---- checkpoint (journal_replay.c) ------------------------------------- */

typedef struct jck_seg {
    uint32_t num, msgs;
    uint64_t size;
} jck_seg;

typedef struct jck_ref {
    uint32_t from, to, count; /* `to` holds `count` settles of entries enqueued in `from` */
} jck_ref;

typedef struct jck_entry {
    uint64_t queue_id, msg_id;
    uint32_t seg, enq_seg, dlv_seg, dly_seg;
} jck_entry;

typedef struct jcheckpoint {
    uint64_t next_seq;
    uint32_t nsegs, nrefs;
    uint64_t nentries;
    jck_seg *segs;
    jck_ref *refs;
    jck_entry *entries;
} jcheckpoint;

/* ---- the journal ------------------------------------------------------- */

struct journal {
    /* fixed after open */
    char *path; /* <dir>/journal */
    int dirfd;
    uint64_t segment_size;
    journal_sync_mode mode;
    void (*log)(int level, const char *text);
    mirror *mirror; /* journal_config.mirror: file operations go through it */
    bool gated;     /* journal_config.gated */
    struct event_base *base;
    struct event *notify_ev, *commit_ev;
    int efd; /* eventfd: sync thread -> loop */
    void (*on_synced)(void *ctx, journal_seq synced);
    void *ctx;

    /* loop thread only */
    jbatch *fill;
    void (*before_commit)(void *ctx); /* journal_set_before_commit */
    void *before_commit_ctx;
    bool commit_pending;
    jseg *active; /* segment appends go to; NULL: the next append starts one */
    uint32_t next_seg_num;
    journal_seq next_seq, reported_synced;
    journal_seq replicated; /* gated: journal_set_replicated's, or the replay's end */
    jseg **segs; /* sorted by num */
    size_t nsegs, capsegs;
    jqueue_map queues;
    uint64_t live_entries, appended_records, appended_bytes;
    bool replayed, replay_called, appended_since_tick;
    uint64_t idle_since_ms;
    jcheckpoint *ck; /* loaded at open, consumed by replay */
    int open_rfds;
    bool ck_in_flight;       /* a periodic checkpoint is on its way to disk */
    uint64_t ck_sent;        /* periodic checkpoints handed to the sync thread */
    uint32_t ck_applied_seg; /* refs into segments below this were dropped */
    struct jcompact *compact; /* the compaction under way, or NULL */
    struct event *compact_ev; /* runs its next step */
    struct jmoved_map {       /* message id -> where compaction moved its record */
        struct jmoved *slots;
        uint32_t mask, count, swept_at;
    } moved;
    struct jgroup {            /* the atomic group being appended */
        bool open;
        uint32_t records;      /* members so far */
        uint32_t seg;          /* where they are (a group never spans segments) */
        uint64_t first_off;    /* the first member's offset */
    } group;

    /* shared: mu guards these */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    jbatch *queue_head, *queue_tail; /* committed, oldest first; in flight stay at the head */
    jbatch *free_list;
    size_t free_bytes; /* buffer capacity held by free_list */
    uint32_t written_seg; /* everything before (written_seg, written_off) is in the files */
    uint64_t written_off;
    uint32_t ck_durable_seg; /* the newest checkpoint on disk was taken in this segment */
    uint64_t ck_attempts;    /* periodic checkpoints the sync thread tried to store */
    bool stop;

    /* either thread, lock-free */
    _Atomic uint64_t written_bytes; /* of appended_bytes, what is in the files */
    _Atomic uint64_t synced;
    _Atomic uint64_t syncs;
    _Atomic uint64_t round_started_ms; /* CLOCK_MONOTONIC ms of the round being written; 0 idle */
    _Atomic bool failed;
    _Atomic bool out_of_space; /* the round being written met ENOSPC/EDQUOT: it is retried */

    /* sync thread only */
    pthread_t thread;
    bool thread_started;
    int wfd;
    uint32_t wseg;
    uint64_t wfile_size, wend; /* of wfd: the file's size, the end of what was written */
    bool spare[JOURNAL_SPARES]; /* spare<i> exists: a collected segment file to reuse */
};

/* Logs a line through cfg->log or to stderr ("YYYY-MM-DD hh:mm:ss.mmm
 * [warning] text"). Safe from either thread. */
void journal_log(const journal *j, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Segment table (journal_index.c). */
jseg *journal_seg_find(const journal *j, uint32_t num);
jseg *journal_seg_add(journal *j, uint32_t num); /* appended in order; NULL if OOM */
void journal_seg_remove(journal *j, jseg *s);    /* unlinks from the table, frees */

/* Accounting, shared by appends and replay (journal_index.c). `at` is the
 * segment the record is in. Each returns whether the entry was live. */
void journal_account_enqueue(journal *j, uint64_t queue_id, uint64_t msg_id, uint32_t msg_seg,
                             uint32_t at);
bool journal_account_settle(journal *j, uint64_t queue_id, uint64_t msg_id, uint32_t at);
bool journal_account_delivered(journal *j, uint64_t queue_id, uint64_t msg_id, uint32_t count,
                               uint32_t at);
bool journal_account_delayed(journal *j, uint64_t queue_id, uint64_t msg_id, uint64_t until_ms,
                             uint32_t at);
/* The delay of a live entry with ENTRY_DELAYED: its record's segment and
 * until_ms (then true), or false. */
bool journal_delay_of(const journal *j, uint64_t queue_id, const jentry *e, uint32_t *seg,
                      uint64_t *until_ms);
/* Sets the until_ms of an entry's delay (replay of a checkpointed one,
 * whose value is in its record); false if it has none. */
bool journal_delay_set_until(journal *j, uint64_t queue_id, const jentry *e, uint64_t until_ms);
void journal_account_purge(journal *j, uint64_t queue_id, uint32_t at);
void journal_account_queue_delete(journal *j, uint64_t queue_id, uint32_t at);
/* Records that `to` holds `count` settles for entries enqueued in `from`. */
bool journal_add_ref(journal *j, uint32_t from, uint32_t to, uint32_t count);

/* Drops the references that a durable checkpoint taken while appends went
 * to segment `seg` makes unnecessary: settles in segments before it. */
void journal_drop_refs_before(journal *j, uint32_t seg);

/* Checkpoints (journal_replay.c). */
jcheckpoint *journal_checkpoint_load(journal *j);
void journal_checkpoint_free(jcheckpoint *ck);
/* The live state as a checkpoint image (malloc'd, *len bytes); NULL if out
 * of memory. Loop thread. */
uint8_t *journal_checkpoint_image(journal *j, size_t *len);
/* Writes an image to <path>/checkpoint atomically and durably (tmp file,
 * fsync, rename, directory fsync). Either thread; logs failures. */
bool journal_checkpoint_store(journal *j, const uint8_t *image, size_t len);

/* Compaction (journal_compact.c). A sparse segment -- closed, written, its
 * live entries pinning at most half of its messages, and no fewer than at
 * the previous tick (one still being drained by consumers or expiry empties
 * on its own) -- is read a step per loop turn, until it pins nothing; the
 * message, enqueue and delivered records of its live entries are appended
 * again (an enqueue of a live entry moves it), so it no longer
 * pins anything and GC deletes it once the copies are on disk. Readers of
 * old locations find the new ones through `moved`. */
/* Starts compacting one sparse segment if none is under way (journal_tick). */
void journal_compact_maybe_start(journal *j);
/* Where message msg_id's record is now, given where it was. */
journal_loc journal_moved_loc(const journal *j, uint64_t msg_id, journal_loc was);
/* Forgets moves of messages no queue holds any more (journal_tick). */
void journal_moved_sweep(journal *j);
/* Frees compaction state (journal_close). */
void journal_compact_free(journal *j);
/* Reads `len` bytes of segment s at `off` (pread on its read fd); logs failures. */
bool journal_read_span(journal *j, jseg *s, uint8_t *buf, size_t len, uint64_t off);
/* Asks the kernel to read that stretch into the page cache meanwhile. */
void journal_read_ahead(journal *j, jseg *s, uint64_t off, size_t len);
/* The live entry (queue_id, msg_id), or NULL (journal_index.c). */
jentry *journal_entry_of(const journal *j, uint64_t queue_id, uint64_t msg_id);

/* Segment file names: <path>/<%08u>.seg */
void journal_seg_path(const journal *j, uint32_t num, char *out, size_t outlen);

/* Reports an allocation failure the interface cannot return, and aborts. */
_Noreturn void journal_oom(const journal *j, const char *what);

/* pread until n bytes are read (EINTR retried); false on an error or
 * end of file. (journal.c; the spill reads with it too) */
bool journal_pread_full(int fd, uint8_t *buf, size_t n, uint64_t off);

#endif
