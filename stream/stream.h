/* stream: the on-disk append-only log behind a stream queue -- a directory
 * of segment files holding chunks in osiris's format (RabbitMQ's stream
 * storage), an index file per segment, group commit, readers (cursors) that
 * start at first / last / next / an offset / a timestamp, a Bloom filter per
 * chunk for filtered reads, retention by size and age, and recovery of a
 * torn tail. Independent of store/'s work-queue journal.
 *
 * Offsets: every record gets the next offset (0, 1, 2, ...). A chunk is the
 * unit of writing and reading; its id is the offset of its first record. A
 * sub-batch entry (one entry, several records) takes as many offsets as it
 * has records.
 *
 * Threads: a log, its builders and its readers belong to one thread (the
 * stream's loop); nothing here locks. The one exception is
 * stream_sync_run, which touches only its ticket and may run anywhere.
 * Time is passed in ("now", in ms since the epoch) so that callers and
 * tests control the clock.
 */
#ifndef WARREN_STREAM_H
#define WARREN_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct stream_log stream_log;
typedef struct stream_builder stream_builder;
typedef struct stream_reader stream_reader;

typedef enum stream_status {
    STREAM_OK = 0,
    STREAM_END,      /* a reader is at the committed end: nothing more yet */
    STREAM_FULL,     /* the builder's chunk cannot take this entry: append it first */
    STREAM_AGAIN,    /* a reader passed over STREAM_SKIP_MAX chunks: call again */
    STREAM_EINVAL,   /* a bad argument (a filter size out of 16..255, an entry too large) */
    STREAM_ECORRUPT, /* bytes on disk are not a valid chunk, index or entry (bad CRC too) */
    STREAM_EIO,      /* a system call failed; errno says why */
    STREAM_ENOMEM,
} stream_status;

/* Short text for a status ("corrupt stream data", ...), never NULL. */
const char *stream_status_text(stream_status st);

enum {
    STREAM_CHUNK_HEADER_SIZE = 48,   /* osiris_log.erl's chunk header */
    STREAM_FILTER_SIZE_DEFAULT = 16, /* osiris_bloom's default, bytes */
    STREAM_FILTER_SIZE_MIN = 16,
    STREAM_FILTER_SIZE_MAX = 255,
    STREAM_MAX_ENTRIES = 65535,        /* the header's 16-bit entry count */
    STREAM_FILTER_VALUE_MAX = 0x7fff,  /* bytes: the stream protocol's string length */
    STREAM_SKIP_MAX = 4096, /* chunks one stream_reader_next may pass over */
};

/* Chunk types, osiris's: user data, and the writer/offset tracking chunks
 * a later layer may write (the log treats their data as opaque). */
typedef enum stream_chunk_type {
    STREAM_CHUNK_USER = 0,
    STREAM_CHUNK_TRACKING_DELTA = 1,
    STREAM_CHUNK_TRACKING_SNAPSHOT = 2,
} stream_chunk_type;

/* RabbitMQ's default x-stream-max-segment-size-bytes (500 MB) and osiris's
 * cap on chunks per segment. */
#define STREAM_SEGMENT_BYTES_DEFAULT 500000000ULL
#define STREAM_SEGMENT_CHUNKS_DEFAULT 256000u
/* A chunk's data and trailer together never exceed this (a reader's one
 * buffer is bounded by it; a larger length on disk is corruption). */
#define STREAM_CHUNK_DATA_MAX (1u << 30)

/* ======================================================================
 * The log
 * ====================================================================== */

typedef struct stream_config {
    uint64_t max_segment_bytes;  /* 0: 500 MB; a segment rolls once it reaches this */
    uint32_t max_segment_chunks; /* 0: 256,000 */
    uint32_t filter_size;        /* Bloom filter bytes per chunk, 16..255; 0: 16 */
    uint64_t epoch;              /* written into each chunk; 0: 1 */
    /* Retention (stream_retain): 0 = none. */
    uint64_t max_bytes; /* x-max-length-bytes */
    int64_t max_age_ms; /* x-max-age */
    /* A cluster leader's replication log (NULL: none): file operations
     * go through it -- the directory's creation and removal, segment and
     * index creation, each chunk's bytes and index record (recorded once
     * written), truncation, retention's unlinks. The repairs of
     * stream_open's recovery do not (a follower starts from a snapshot
     * taken after). Kept by stream_set_config; stream_set_mirror changes it. */
    struct mirror *mirror;
} stream_config;

/* Opens the stream in `dir` (created if missing), recovering it: the last
 * segment is cut back to its last whole chunk whose CRC checks, and an index
 * that is missing or disagrees with its segment is rebuilt from it. On
 * success *out owns the open files; everything on disk is committed. Fails
 * with STREAM_EINVAL for a bad config, STREAM_EIO (errno set) or
 * STREAM_ECORRUPT for a segment that is not a stream segment at all. */
stream_status stream_open(const char *dir, const stream_config *cfg, stream_log **out);
/* Closes the files (nothing is synced: call stream_sync first) and frees
 * the log. Readers must be closed before. NULL is fine. */
void stream_close(stream_log *log);
/* Closes the log and removes its files and its directory (the stream queue
 * is deleted). Readers must be closed before. STREAM_EIO when something
 * could not be removed (the rest still is). */
stream_status stream_delete(stream_log *log);
/* Changes retention (policies change at run time); the segment size and
 * filter size too, for segments and chunks written from now on. */
stream_status stream_set_config(stream_log *log, const stream_config *cfg);
/* From now on the log's file operations go through `m` (NULL: none). */
void stream_set_mirror(stream_log *log, struct mirror *m);

/* What stream_open had to repair, for the caller's log line. */
typedef struct stream_recovery {
    uint64_t bytes_cut;        /* torn or corrupt tail bytes removed from segments */
    uint32_t indexes_rebuilt;  /* index files rewritten from their segment */
    uint32_t segments_dropped; /* older segments left without a whole chunk */
} stream_recovery;

typedef struct stream_info {
    bool empty;                /* no chunk at all (never written, or all removed) */
    uint64_t first_offset;     /* the first chunk's id (next_offset when empty) */
    uint64_t last_chunk_id;    /* the last chunk's id (valid when !empty) */
    uint64_t next_offset;      /* the offset the next record gets */
    uint64_t committed_offset; /* the offset after the last synced record */
    uint64_t committed_chunk_id; /* the last synced chunk's id (valid when committed_offset > first) */
    int64_t first_timestamp;   /* ms, of the first chunk */
    int64_t last_timestamp;    /* ms, of the last chunk */
    uint64_t segments;
    uint64_t bytes;            /* segment files' total size */
    uint64_t chunks;
    stream_recovery recovery; /* at open */
} stream_info;

void stream_get_info(const stream_log *log, stream_info *out);

/* ======================================================================
 * Writing: builder -> append -> sync
 * ====================================================================== */

/* A builder collects one chunk's entries during a loop turn; its buffers
 * are reused chunk after chunk (no allocation once they have grown). */
stream_builder *stream_builder_new(void);
void stream_builder_free(stream_builder *b);
/* Empties the builder (stream_append does it after writing). */
void stream_builder_reset(stream_builder *b);
bool stream_builder_empty(const stream_builder *b);
uint32_t stream_builder_records(const stream_builder *b);
uint32_t stream_builder_bytes(const stream_builder *b); /* data bytes so far */

/* Adds a simple entry (one record) made of `nparts` pieces (e.g. a
 * message's header and body, copied once into the chunk buffer).
 * `filter`/`filter_len` is the entry's filter value (x-stream-filter-value;
 * NULL or 0 bytes: unfiltered). STREAM_FULL: the chunk already holds 65,535
 * entries or would pass STREAM_CHUNK_DATA_MAX -- append it and add again
 * (an entry alone too large for a chunk is STREAM_EINVAL). */
typedef struct stream_part {
    const void *bytes;
    size_t len;
} stream_part;
stream_status stream_builder_add(stream_builder *b, const stream_part *parts, int nparts,
                                 const void *filter, size_t filter_len);
/* Adds a sub-batch entry as a stream-protocol publisher sends it: `records`
 * records, compressed with `compression` (0 none, 1 gzip, ... as the
 * protocol numbers them; 0..7), `uncompressed_len` bytes once expanded. */
stream_status stream_builder_add_batch(stream_builder *b, uint8_t compression, uint16_t records,
                                       uint32_t uncompressed_len, const void *data, size_t len,
                                       const void *filter, size_t filter_len);
/* Osiris tracking bytes for the chunk's trailer (writer deduplication
 * sequences, stored offsets), opaque to the log; copied. Replaces earlier
 * ones of this chunk. STREAM_FULL when the chunk has no room left for them,
 * STREAM_EINVAL past half a chunk. */
stream_status stream_builder_set_tracking(stream_builder *b, const void *bytes, size_t len);

/* Writes the builder's chunk (type user, `timestamp_ms`) at the end of the
 * log with one writev to the segment and one write to the index, rolling to
 * a new segment first when the current one is full. *first_offset gets the
 * chunk id (may be NULL). The builder is reset. The chunk is not committed
 * (not visible to readers) until stream_sync. An empty builder writes
 * nothing (STREAM_OK, *first_offset = next offset). On STREAM_EIO the files
 * are cut back to before this chunk; the builder keeps its entries. */
stream_status stream_append(stream_log *log, stream_builder *b, int64_t timestamp_ms,
                            uint64_t *first_offset);
/* The same for a tracking chunk: `data` is its one entry's body. */
stream_status stream_append_tracking(stream_log *log, stream_chunk_type type, const void *data,
                                     size_t len, int64_t timestamp_ms);
/* fdatasyncs the segment and index; afterwards every appended chunk is
 * committed: readers see it and its publishers may be confirmed. Group
 * commit: call once per loop turn, after that turn's appends. */
stream_status stream_sync(stream_log *log);

/* The same in three steps, so that the fdatasync can run on another thread
 * while the loop goes on appending: prepare (loop thread) notes what is
 * appended so far and duplicates the descriptors; run (any thread, touches
 * only the ticket) syncs and closes them; complete (loop thread, after run
 * succeeded) commits what prepare noted -- not what was appended since.
 * Call run exactly once per prepared ticket (it also releases it). */
typedef struct stream_sync_ticket {
    int fd, idx_fd;
    uint64_t offset, chunk_id; /* committed_offset / chunk id once done */
    uint64_t segment, size;    /* the active segment and its size then */
} stream_sync_ticket;
stream_status stream_sync_prepare(stream_log *log, stream_sync_ticket *t);
stream_status stream_sync_run(stream_sync_ticket *t);
void stream_sync_complete(stream_log *log, const stream_sync_ticket *t);

/* ======================================================================
 * Retention
 * ====================================================================== */

/* Removes whole segments, oldest first, never the one being written: while
 * the total size passes max_bytes, and while a segment's newest chunk is
 * older than now_ms - max_age_ms (osiris_log's eval_max_bytes and eval_age).
 * Call it when an append has rolled a segment (stream_info.segments grew),
 * when retention changes, and on a timer for max_age. *removed (may be
 * NULL) gets the number of segments removed. Readers in a removed segment
 * move on by themselves (to the new first chunk). */
stream_status stream_retain(stream_log *log, int64_t now_ms, unsigned *removed);

/* Parses RabbitMQ's age strings (x-max-age, and x-stream-offset's interval):
 * a positive decimal number and one unit, Y (365 days), M (30 days), D, h,
 * m or s -- "7D", "12h" (rabbit_amqqueue:check_max_age/1). No sign, no
 * space, no fraction; 0 is refused. A number too large saturates at
 * INT64_MAX ms (RabbitMQ's integers have no bound).
 *
 * RabbitMQ 3.10 has two ways to refuse one (seen with its pika client):
 * STREAM_AGE_INVALID ("0h", "10x", "1.5h", "10S") is queue.declare's
 *   406 PRECONDITION_FAILED - invalid arg 'x-max-age' for queue 'Q' in
 *   vhost 'V': invalid_max_age
 * and, for basic.consume's x-stream-offset,
 *   406 PRECONDITION_FAILED - invalid arg 'x-stream-offset' for queue 'Q'
 *   in vhost 'V': {invalid_stream_offset_arg,{longstr,<<"10x">>}}
 * STREAM_AGE_NO_NUMBER ("", "h", "-1h", " 1h": no leading digit) crashes
 *   its channel (list_to_integer("")): connection.close 541 INTERNAL_ERROR,
 *   for both arguments. */
typedef enum stream_age_status {
    STREAM_AGE_OK,
    STREAM_AGE_INVALID,
    STREAM_AGE_NO_NUMBER,
} stream_age_status;
stream_age_status stream_parse_age(const char *s, size_t len, int64_t *ms);

/* ======================================================================
 * Reading
 * ====================================================================== */

/* Where a reader starts, as x-stream-offset and the stream protocol's
 * OffsetSpecification mean it (osiris_log:init_offset_reader/2):
 * FIRST the first chunk; LAST the last user chunk (NEXT if there is none);
 * NEXT after the last chunk (only what is written from now on); OFFSET the
 * chunk holding that offset, clamped to the first chunk, NEXT past the end
 * (records before the offset in that chunk are skipped by
 * stream_entry_next for AMQP consumers); TIMESTAMP the first chunk whose
 * timestamp is at or after it (NEXT if none). RabbitMQ 3.10 reads the
 * x-stream-offset argument as: "first"/"last"/"next", a number (OFFSET), an
 * AMQP timestamp (seconds: x 1000 for TIMESTAMP), an age string (TIMESTAMP
 * now - stream_parse_age), none (NEXT). */
typedef enum stream_start_kind {
    STREAM_START_FIRST,
    STREAM_START_LAST,
    STREAM_START_NEXT,
    STREAM_START_OFFSET,
    STREAM_START_TIMESTAMP,
} stream_start_kind;

typedef struct stream_start {
    stream_start_kind kind;
    uint64_t offset;      /* STREAM_START_OFFSET */
    int64_t timestamp_ms; /* STREAM_START_TIMESTAMP */
} stream_start;

/* A consumer's filter (x-stream-filter, x-stream-match-unfiltered). The
 * Bloom filter follows osiris_bloom's layout and rules (bit 0 for entries
 * without a value, two bits per value) but not its hash (erlang:phash2):
 * only Warren reads Warren's filters (bloom.c). */
typedef struct stream_filter {
    const stream_part *values;
    size_t count;
    bool match_unfiltered;
} stream_filter;

/* What a reader has done, for statistics and benchmarks. */
typedef struct stream_reader_stats {
    uint64_t chunks_read;    /* chunks returned */
    uint64_t chunks_skipped; /* chunks the Bloom filter ruled out: data never read */
    uint64_t bytes_skipped;  /* their filter + data + trailer bytes */
    uint64_t bytes_read;     /* data bytes loaded into the reader's buffer */
} stream_reader_stats;

/* Opens a reader at `start`; with `filter` (copied; NULL = everything) it
 * returns only chunks whose Bloom filter may hold a wanted value. Fails
 * with STREAM_ENOMEM, STREAM_EINVAL (an empty filter) or STREAM_EIO. */
stream_status stream_reader_open(stream_log *log, const stream_start *start,
                                 const stream_filter *filter, stream_reader **out);
void stream_reader_close(stream_reader *r);
/* The offset of the next record the reader will return (the chunk it will
 * read next, or the start offset inside it). */
uint64_t stream_reader_offset(const stream_reader *r);
void stream_reader_get_stats(const stream_reader *r, stream_reader_stats *out);
/* Makes the reader return tracking chunks too (osiris's chunk selector
 * "all"), for a layer that rebuilds writer and offset tracking; they pass
 * any filter. */
void stream_reader_include_tracking(stream_reader *r);

/* One chunk as a reader returns it. `header` is the 48 bytes as stored,
 * which is what RabbitMQ sends as the Deliver frame's OsirisChunk header
 * (its send_file sends the stored header unchanged, then the data and no
 * filter bytes, and no trailer for a user chunk; byte 44, the filter size,
 * is the spec's "Reserved" that clients ignore): a stream-protocol server
 * writes `header` then `data_len` bytes from `fd` at `data_pos` (pread or
 * sendfile) -- or from `data` when it was loaded. The data's CRC in the
 * header is what clients may check. */
typedef struct stream_chunk {
    uint8_t header[STREAM_CHUNK_HEADER_SIZE];
    stream_chunk_type type;
    uint16_t num_entries;
    uint32_t num_records;
    int64_t timestamp_ms;
    uint64_t epoch;
    uint64_t first_offset; /* the chunk id */
    uint32_t crc;          /* of the data, IEEE CRC32 (erlang:crc32) */
    uint32_t data_len;
    uint32_t trailer_len;
    uint8_t filter_size;   /* Bloom filter bytes, 0 when no entry had a value */
    int fd;                /* the segment; valid until the next read or close */
    off_t data_pos;        /* file position of the data */
    /* Set by a loaded read only (the reader's memory, valid until the next
     * read): the data (CRC checked), and each entry's filter value table
     * (Warren's, kept in the trailer so it never goes to the wire). */
    const uint8_t *data;
    const uint8_t *filter_values;
    uint32_t filter_values_len;
    const uint8_t *tracking; /* the trailer's osiris tracking blocks, NULL: none */
    uint32_t tracking_len;
    uint64_t skip_below; /* stream_entry_next skips records below this */
} stream_chunk;

/* Reads the next committed chunk after the reader's position: STREAM_OK and
 * *out, STREAM_END when there is none yet (call again after more is
 * committed), STREAM_AGAIN when it passed over STREAM_SKIP_MAX chunks (the
 * filter's, or tracking ones) without finding one -- call again, so that
 * one call stays short however much a filter skips -- and STREAM_ECORRUPT
 * or STREAM_EIO on a bad read (the reader stays where it was). With `load`
 * the data and trailer are read (from the read-ahead window or into the
 * reader's buffer) and the CRC is checked; without, only the header and
 * the filter are read, for a sendfile of the data. Tracking chunks are
 * passed over (see stream_reader_include_tracking). A reader whose segment
 * retention removed moves to the first chunk. */
stream_status stream_reader_next(stream_reader *r, bool load, stream_chunk *out);

/* ---- entries of a loaded user chunk ----------------------------------- */

typedef struct stream_entry {
    uint64_t offset;   /* of its first record */
    uint32_t records;  /* 1, or a sub-batch's count */
    bool batch;
    uint8_t compression;       /* sub-batch only */
    uint32_t uncompressed_len; /* sub-batch only */
    const uint8_t *bytes;      /* the record (or the sub-batch's body) */
    uint32_t len;
    const uint8_t *filter;     /* the entry's filter value; NULL: unfiltered */
    uint16_t filter_len;
} stream_entry;

typedef struct stream_entry_iter {
    const stream_chunk *chunk;
    uint32_t pos, fpos;
    uint32_t index;
    uint64_t next_offset;
} stream_entry_iter;

void stream_entry_begin(stream_entry_iter *it, const stream_chunk *chunk);
/* The next entry: STREAM_OK, STREAM_END after the last, STREAM_ECORRUPT
 * when a length runs past the data or the counts disagree with the header.
 * Entries wholly below the chunk's skip_below are passed over (a sub-batch
 * that straddles it is returned whole). */
stream_status stream_entry_next(stream_entry_iter *it, stream_entry *out);
/* Whether an entry passes a filter exactly (its value is one of the wanted
 * ones, or it has none and match_unfiltered). NULL filter: true. */
bool stream_filter_match(const stream_filter *f, const stream_entry *e);

#endif
