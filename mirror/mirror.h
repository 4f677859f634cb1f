/* mirror: the replication log of a data directory. A cluster leader's
 * files go through it so that followers can repeat them byte for byte:
 * the journal's segments and checkpoint, the stream queues' segments, and
 * the metadata as sqlite changesets (store/ hands them over). A follower's
 * data directory is then the image a crash of the leader would have left,
 * and it starts from it with the crash recovery every node already has.
 *
 * Three parts:
 * - Recording (the leader; any thread): a file operation is performed and
 *   recorded in order. Namespace operations (create, rename, unlink,
 *   truncate, mkdir, rmdir) are performed BY the mirror under its lock;
 *   data writes are performed by the caller on its open descriptor and
 *   recorded after (mirror_wrote). Together that lets a reader take a
 *   snapshot of the directory without stopping writers (below).
 * - Reading (the leader's replication thread): a reader per follower
 *   yields the log as wire frames -- first a snapshot of the directory and
 *   the metadata, then every operation recorded after it.
 * - Applying (a follower): a replica parses those frames from the network
 *   and repeats them in its directory; at each sync mark it fdatasyncs what
 *   it wrote and reports the mark's sequence.
 *
 * With a NULL mirror every recording function is the plain system call:
 * a broker that is not in a cluster pays one branch.
 *
 * The snapshot is fuzzy, as a database's fuzzy checkpoint: under the lock
 * the reader lists the directory and opens every file (so renames and
 * unlinks after it cannot hide a file), then reads their contents later
 * while writers go on. Every operation recorded after that moment is sent
 * after the snapshot, and repeating them on top of contents read at any
 * later time gives the leader's files: a write is idempotent, and every
 * namespace operation is recorded after the listing or seen by it.
 *
 * Wire frames: u32 length (of what follows), u8 type, payload; integers
 * big-endian; a path is u16 length + bytes, relative to the data
 * directory, without ".." or a leading '/'. The replica refuses anything
 * else (MIRROR_MAX_FRAME bounds a frame).
 */
#ifndef WARREN_MIRROR_H
#define WARREN_MIRROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define MIRROR_MAX_FRAME (1024u * 1024u + 4096u)

typedef struct mirror mirror;

/* A mirror of `data_dir` (absolute or relative; recorded paths must start
 * with it). The log holds at most `max_log_bytes` of frames not yet read by
 * every reader: a reader that falls further behind is cut off (its
 * mirror_reader_next returns MIRROR_CUT) and must start again with a new
 * snapshot. NULL on OOM. */
mirror *mirror_new(const char *data_dir, size_t max_log_bytes);
/* After every reader was freed. */
void mirror_free(mirror *m);

/* ---- recording (any thread; m may be NULL) ---- */

/* Each performs the call and records it if it succeeded; the result and
 * errno are the system call's. `path` is a path under data_dir. */
int mirror_open(mirror *m, const char *path, int flags, mode_t mode); /* O_CREAT: recorded as a create; O_TRUNC: as a truncate to 0 */
int mirror_rename(mirror *m, const char *from, const char *to);
int mirror_unlink(mirror *m, const char *path);
int mirror_ftruncate(mirror *m, int fd, const char *path, uint64_t length);
int mirror_mkdir(mirror *m, const char *path, mode_t mode);
int mirror_rmdir(mirror *m, const char *path);
/* The caller wrote these bytes at `offset` of `path` (its open descriptor)
 * with pwrite/pwritev/write: records them (a copy). Call after a write
 * that succeeded, for the bytes it wrote, and before the file is renamed
 * or unlinked (a follower skips a write to a path that is gone, as the
 * leader's file lost those bytes too when it was unlinked). Every
 * namespace change under data_dir must go through the mirror: a follower
 * fails on a file created in a directory it never saw made. */
void mirror_wrote(mirror *m, const char *path, uint64_t offset, const struct iovec *iov,
                  int iovcnt);
/* Everything recorded before this makes up journal sequence `seq` (the
 * journal's sync thread, once the round is written; the leader syncs it
 * meanwhile): a follower acknowledges `seq` once it synced the same. */
void mirror_synced(mirror *m, uint64_t seq);
/* A committed metadata change (an sqlite changeset, store/ makes it);
 * loop thread. */
void mirror_meta_changes(mirror *m, const void *changeset, size_t len);

/* The sequence of the last mirror_synced (0: none yet). */
uint64_t mirror_last_synced(mirror *m);
/* Bytes of frames held for readers now, and the bound. */
size_t mirror_log_bytes(mirror *m);

/* ---- reading (one thread per reader) ---- */

typedef struct mirror_reader mirror_reader;

/* A reader that starts with a snapshot: every file under data_dir except
 * metadata.db* (sqlite's files: the metadata goes as `meta_image`, a
 * serialized database the caller made in the same loop callback, so that
 * no changeset falls between it and the reader's start), then the log from
 * this moment. Call on the thread that records metadata changes. `epoch`
 * goes in the first frame. Symlinks and special files are left out. The
 * listing holds the mirror's lock (recorders wait) and keeps every file
 * open: more than 4096 files fail with EMFILE. NULL with errno on
 * failure. */
mirror_reader *mirror_reader_new(mirror *m, uint64_t epoch, const void *meta_image,
                                 size_t meta_len);
void mirror_reader_free(mirror_reader *r);

typedef enum mirror_read_status {
    MIRROR_DATA,  /* *out holds *len bytes (whole frames) to send */
    MIRROR_IDLE,  /* nothing to send now; mirror_reader_wait tells when there is */
    MIRROR_CUT,   /* the reader fell behind the log's bound: drop the follower */
    MIRROR_ERROR, /* a snapshot file could not be read (errno) */
} mirror_read_status;

/* The next bytes to send (at most about `max` plus one frame). Valid until
 * the next call on this reader. Snapshot file contents are read here with
 * pread (this may block on the disk: call it off the broker's loop). */
mirror_read_status mirror_reader_next(mirror_reader *r, size_t max, const uint8_t **out,
                                      size_t *len);
/* Whether the snapshot has been fully handed out. */
bool mirror_reader_caught_up(const mirror_reader *r);
/* An eventfd that becomes readable when the log grows (any reader of the
 * mirror) or a reader is cut; the caller reads it (8 bytes) before calling
 * next again. Written once per idle spell -- by the first record after a
 * reader got MIRROR_IDLE, not again until some reader calls next: for ONE
 * thread that serves every reader (threads sharing it would steal each
 * other's wake-ups). */
int mirror_wait_fd(mirror *m);
/* The same for one reader (its own eventfd, readable when the log grows
 * after this reader got MIRROR_IDLE, or it is cut): for a thread per
 * reader. Owned by the reader. */
int mirror_reader_wait_fd(const mirror_reader *r);

/* ---- applying (a follower) ---- */

typedef struct mirror_replica mirror_replica;

typedef struct mirror_replica_handlers {
    /* the snapshot begins: the leader's epoch. The replica has emptied the
     * data directory's mirrored files already. */
    void (*snapshot_begin)(void *ctx, uint64_t epoch);
    /* the metadata as a whole (snapshot), then each change, in order.
     * false: the replica fails (MIRROR_APPLY_FAILED). */
    bool (*meta_image)(void *ctx, const void *image, size_t len);
    bool (*meta_changes)(void *ctx, const void *changeset, size_t len);
    /* the snapshot is complete: from here the directory follows the log */
    void (*snapshot_end)(void *ctx);
    /* every frame up to a sync mark of sequence `seq` is applied and
     * fdatasynced (and the metadata committed): acknowledge it */
    void (*synced)(void *ctx, uint64_t seq);
} mirror_replica_handlers;

typedef enum mirror_apply_status {
    MIRROR_APPLIED = 0,
    MIRROR_BAD_FRAME,     /* malformed, too large, or a path outside the directory */
    MIRROR_IO_FAILED,     /* a system call failed (errno) */
    MIRROR_APPLY_FAILED,  /* a handler refused */
} mirror_apply_status;

/* A replica writing under `data_dir` (which must exist). NULL on OOM or
 * when data_dir cannot be opened (errno). */
mirror_replica *mirror_replica_new(const char *data_dir, const mirror_replica_handlers *h,
                                   void *ctx);
void mirror_replica_free(mirror_replica *r);
/* Feeds bytes received (any split); whole frames are applied at once, a
 * partial one is kept (at most MIRROR_MAX_FRAME). Sync marks are group
 * committed: at the end of the call, if any came, the files are synced
 * once and `synced` reports the last one -- so feed everything that has
 * arrived in one call, not frame by frame. After an error the replica
 * must be freed. */
mirror_apply_status mirror_replica_feed(mirror_replica *r, const uint8_t *data, size_t len);
/* What went wrong, for the log. */
const char *mirror_replica_error(const mirror_replica *r);

#endif
