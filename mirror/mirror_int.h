/* mirror/'s private parts: the wire frames, the log (log.c) the reader
 * (reader.c) copies from, and the byte helpers both ends share.
 *
 * A frame:   offset size  field
 *            0      4     length of what follows (type + payload), >= 1
 *            4      1     type (frame_type)
 *            5      n     payload, by type:
 *   SNAP_BEGIN   u64 epoch
 *   FILE         path, u32 mode      (snapshot: the file, empty; WRITEs follow)
 *   META_IMAGE*  bytes               (*_MORE: a part, more follow)
 *   SNAP_END     -
 *   CREATE       path, u32 mode      (open O_CREAT, no truncation)
 *   WRITE        path, u64 offset, bytes
 *   TRUNCATE     path, u64 length
 *   RENAME       path, path
 *   UNLINK       path
 *   MKDIR        path, u32 mode
 *   RMDIR        path
 *   SYNCED       u64 seq
 *   META_CHANGES* bytes
 * A path is u16 length + bytes, relative to the data directory.
 * Metadata larger than a frame goes as *_MORE parts and a final part: the
 * replica joins them (up to MIRROR_MAX_META). */
#ifndef WARREN_MIRROR_INT_H
#define WARREN_MIRROR_INT_H

#include <pthread.h>
#include <limits.h>
#include <stdatomic.h>

#include "mirror.h"

typedef enum frame_type {
    FRAME_SNAP_BEGIN = 1,
    FRAME_FILE,
    FRAME_META_IMAGE,
    FRAME_META_IMAGE_MORE,
    FRAME_SNAP_END,
    FRAME_CREATE,
    FRAME_WRITE,
    FRAME_TRUNCATE,
    FRAME_RENAME,
    FRAME_UNLINK,
    FRAME_MKDIR,
    FRAME_RMDIR,
    FRAME_SYNCED,
    FRAME_META_CHANGES,
    FRAME_META_CHANGES_MORE,
} frame_type;

#define FRAME_HEAD 5u
/* Data per WRITE or metadata part: a frame fits a log chunk several times
 * over, so chunks stay small and little of one is wasted. */
#define FRAME_DATA_MAX (64u * 1024u)
#define LOG_CHUNK (256u * 1024u)
#define LOG_SPARE 4u
/* The bound of a joined metadata image or changeset on the replica. */
#define MIRROR_MAX_META (512u * 1024u * 1024u)
/* Paths the mirror never carries: the follower's own sqlite files. */
#define META_FILE "metadata.db"
/* A snapshot keeps every file open; more is refused (EMFILE). */
#define SNAP_MAX_FILES 4096u
/* The largest frame the log holds: a WRITE of FRAME_DATA_MAX or a RENAME. */
#define FRAME_LOG_MAX (FRAME_HEAD + 2 * (2 + PATH_MAX) + 8 + FRAME_DATA_MAX)

/* ---- byte helpers ---- */
static inline uint8_t *put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}
static inline uint8_t *put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}
static inline uint8_t *put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}
static inline uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}
/* Whether `name` (a relative path, `len` bytes) is one of sqlite's files
 * of the metadata (metadata.db, -wal, -shm, -journal) at the top of the
 * directory. */
bool mirror_is_meta_file(const char *name, size_t len);

/* ---- the log (log.c) ---- */
typedef struct log_chunk {
    struct log_chunk *next;
    uint64_t start; /* log position of data[0] */
    size_t used, cap;
    uint8_t data[];
} log_chunk;

struct mirror {
    pthread_mutex_t lock;
    char *dir;      /* data_dir without trailing '/' */
    size_t dir_len;
    size_t max_log;
    int wake_fd;    /* eventfd */
    atomic_uint n_readers;  /* read without the lock by mirror_wrote's fast path */
    atomic_uint_fast64_t last_synced;
    /* under the lock: */
    log_chunk *head, *tail;
    log_chunk *spare; /* freed chunks kept for reuse (up to LOG_SPARE): no mmap per chunk */
    unsigned n_spare;
    uint64_t end;   /* log position after the last frame */
    struct log_hold *readers;
    unsigned idle_readers; /* readers that returned MIRROR_IDLE: wake them */
    bool signalled;        /* wake_fd written since a reader last looked */
};

/* The reader's part the log sees (reader.c owns the rest). */
typedef struct log_hold {
    struct log_hold *next;
    uint64_t pos;   /* next log byte this reader needs */
    int wake_fd;    /* the reader's own eventfd */
    bool attached, cut, idle;
    bool signalled; /* wake_fd written since the reader last looked */
} log_hold;

/* Under m->lock: attaches a reader at the log's end / detaches it. */
/* Under m->lock: the reader looks now; records after wake it again. */
void log_looking(mirror *m, log_hold *h);
void log_attach(mirror *m, log_hold *h);
void log_detach(mirror *m, log_hold *h);
/* Under m->lock: copies whole frames from h->pos into `out` (at least one
 * if any, then while under `max`); returns the bytes copied. */
size_t log_copy(mirror *m, log_hold *h, uint8_t *out, size_t max);
/* Under m->lock: the bytes log_copy could copy now. */
size_t log_pending(const mirror *m, const log_hold *h);
/* The path relative to m->dir, or NULL when `path` is not under it. */
const char *mirror_relative(const mirror *m, const char *path);

#endif
