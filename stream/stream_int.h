/* Private to stream/: the log, builder and reader objects, the on-disk
 * constants and the helpers shared by chunk.c (chunks, builder, entries),
 * bloom.c, segment.c (segment and index files, the directory), log.c
 * (open, append, sync, roll), retention.c and reader.c. Formats are drawn
 * in chunk.c (chunks) and segment.c (files, index). */
#ifndef WARREN_STREAM_INT_H
#define WARREN_STREAM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../mirror/mirror.h"
#include "stream.h"

/* osiris.hrl: segment and index files start with a magic and a version. */
#define SEG_MAGIC "OSIL"
#define IDX_MAGIC "OSII"
enum {
    FILE_HEADER_SIZE = 8,
    IDX_RECORD_SIZE = 29, /* chunk id, timestamp, epoch, file pos, type */
    CHUNK_MAGIC = 5,      /* high nibble of byte 0 */
    CHUNK_VERSION = 0,    /* low nibble (osiris.hrl's ?VERSION) */
    /* The entry filter-value block Warren keeps in the trailer: a tag no
     * osiris tracking block uses (they are 0..2). */
    FV_TAG = 0x57,
    FV_HEADER = 5, /* tag, u32 length of what follows */
};

static inline void be16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void be32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (24 - 8 * i));
}
static inline void be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}
static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) << 32 | rd32(p + 4); }

/* A growable byte buffer, reused. */
typedef struct sbuf {
    uint8_t *p;
    size_t len, cap;
} sbuf;
bool sbuf_reserve(sbuf *b, size_t more);
void sbuf_free(sbuf *b);

/* ---- chunk.c ----------------------------------------------------------- */

typedef struct chunk_header {
    uint8_t type;
    uint16_t num_entries;
    uint32_t num_records;
    int64_t timestamp;
    uint64_t epoch;
    uint64_t chunk_id;
    uint32_t crc;
    uint32_t data_len;
    uint32_t trailer_len;
    uint8_t filter_size;
} chunk_header;

void chunk_header_encode(const chunk_header *h, uint8_t out[STREAM_CHUNK_HEADER_SIZE]);
/* Checks magic, version, type and that filter + data + trailer fit
 * STREAM_CHUNK_DATA_MAX; false for anything else. */
bool chunk_header_decode(const uint8_t in[STREAM_CHUNK_HEADER_SIZE], chunk_header *h);
static inline uint64_t chunk_total(const chunk_header *h)
{
    return (uint64_t)STREAM_CHUNK_HEADER_SIZE + h->filter_size + h->data_len + h->trailer_len;
}
uint32_t stream_crc32(uint32_t crc, const void *p, size_t n);
/* Whether `data` (h->data_len bytes) holds exactly h's entries and records. */
bool chunk_entries_ok(const chunk_header *h, const uint8_t *data);

struct stream_builder {
    sbuf data;   /* encoded entries */
    sbuf values; /* per entry: u16 length + filter value bytes */
    sbuf tracking;
    uint32_t entries, records;
    bool any_value;
};

/* Sets a loaded chunk's filter_values and tracking from its trailer. */
void chunk_split_trailer(stream_chunk *c, const uint8_t *trailer);

/* ---- bloom.c ----------------------------------------------------------- */

/* Sets, in `bits` of `size` bytes, the bits of each of the builder's values
 * (bit 0 for an unfiltered entry). */
void bloom_build(const stream_builder *b, uint8_t *bits, uint32_t size);

/* A reader's wanted values, hashed for the filter size last seen. */
typedef struct bloom_matcher {
    uint8_t *values; /* u16 length + bytes, each */
    size_t values_len, count;
    bool match_unfiltered;
    uint32_t size;       /* filter size the hashes are for; 0: none yet */
    uint32_t (*hashes)[2];
} bloom_matcher;

bool bloom_matcher_init(bloom_matcher *m, const stream_filter *f);
void bloom_matcher_free(bloom_matcher *m);
/* Whether a chunk with this filter (size 0: no entry had a value) may
 * hold an entry the matcher wants; false only when it surely does not. */
bool bloom_may_match(bloom_matcher *m, const uint8_t *filter, uint32_t size);

/* ---- segment.c --------------------------------------------------------- */

/* One segment file as the log knows it. */
typedef struct segment {
    uint64_t first_id;     /* the name; the first chunk's id */
    uint64_t next_offset;  /* after its last record */
    uint64_t last_id;
    int64_t first_ts, last_ts;
    uint64_t size;         /* bytes of the segment file */
    uint32_t chunks;
} segment;

typedef struct idx_record {
    uint64_t chunk_id;
    int64_t timestamp;
    uint64_t epoch;
    uint32_t pos;
    uint8_t type;
} idx_record;

/* pread of exactly n bytes (false on an error or end of file). */
bool seg_pread(int fd, void *buf, size_t n, uint64_t at);
void segment_name(char *out, size_t n, const char *dir, uint64_t first_id, const char *ext);
void idx_record_encode(const idx_record *r, uint8_t out[IDX_RECORD_SIZE]);
void idx_record_decode(const uint8_t in[IDX_RECORD_SIZE], idx_record *r);
/* Recovers one segment (the last one with CRC checks of every chunk, and
 * cut back to its last whole chunk) and makes its index agree; fills *s
 * and adds what it repaired to *rec.
 * A file that is not a segment is STREAM_ECORRUPT. */
stream_status segment_recover(const char *dir, uint64_t first_id, bool last, segment *s,
                              stream_recovery *rec);
/* Binary search of a segment's index: the last chunk whose id <= offset
 * (by_time false), or the first whose timestamp >= ts (by_time true).
 * STREAM_END when there is none. */
stream_status segment_find(const char *dir, const segment *s, bool by_time, uint64_t offset,
                           int64_t ts, idx_record *out);
/* The last user chunk with id < before in a segment's index (STREAM_END: none). */
stream_status segment_last_user(const char *dir, const segment *s, uint64_t before, idx_record *out);

/* The first ids of a directory's segments, sorted (*ids is the caller's
 * to free); indexes without a segment are removed on the way. */
stream_status list_segments(const char *dir, uint64_t **ids, size_t *n);
/* Unlinks a segment and then its index (through m, which may be NULL). */
void remove_files(struct mirror *m, const char *dir, uint64_t id);

/* ---- log.c -------------------------------------------------------------- */

struct stream_log {
    char *dir;
    stream_config cfg;
    segment *segs; /* oldest first; the last one is being written */
    size_t nsegs, cap;
    int fd, idx_fd; /* of the last segment */
    uint64_t next_offset;
    uint64_t committed_offset, committed_chunk_id;
    uint64_t last_chunk_id;
    uint64_t synced_size; /* of the active segment: bytes below never change */
    bool has_chunks;
    stream_recovery recovery;
    uint8_t *bloom; /* filter bytes for the chunk being written */
};

/* The index of the segment holding offset `o` (the last whose first id <=
 * o); 0 when o is below the first. nsegs must be > 0. */
size_t log_segment_for(const stream_log *log, uint64_t o);

#endif
