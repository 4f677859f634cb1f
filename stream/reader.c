/* Readers: a cursor over committed chunks.
 *
 * A reader is a position: the segment file it reads (`seg_id`, open as
 * `fd`), the file position of its next chunk and that chunk's id
 * (`next_id`). It never reads a chunk at or past the log's committed
 * offset, nor a byte of the active segment past its last sync (bytes there
 * may still be cut back by a failed append). When retention has removed its
 * segment, the next read starts again at the log's first chunk.
 *
 * Memory: a read-ahead window of RA_SIZE bytes (`ra`, the file's bytes from
 * `ra_at`), which serves the headers and the data of small chunks with one
 * pread for many chunks, and a buffer for a chunk larger than the window,
 * sized by the largest such chunk -- so a reader far behind costs reads,
 * not memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stream_int.h"

enum { RA_SIZE = 64 * 1024 };

struct stream_reader {
    stream_log *log;
    uint64_t seg_id;
    int fd;
    uint64_t pos;
    uint64_t next_id;
    uint64_t skip_below; /* the requested offset inside the first chunk */
    bool filtered;
    bool tracking; /* tracking chunks are returned too */
    bloom_matcher matcher;
    sbuf ra;
    uint64_t ra_at;
    bool big; /* the last chunk did not fit the window: read headers alone */
    bool skipping; /* the filter ruled out the last chunk: so it may the next */
    sbuf buf;
    stream_reader_stats stats;
};

static void place(stream_reader *r, uint64_t seg_id, uint64_t pos, uint64_t id)
{
    if (r->fd >= 0 && seg_id != r->seg_id) {
        close(r->fd);
        r->fd = -1;
        r->ra.len = 0;
    }
    r->seg_id = seg_id;
    r->pos = pos;
    r->next_id = id;
}

static void place_first(stream_reader *r)
{
    const segment *s = &r->log->segs[0];
    place(r, s->first_id, FILE_HEADER_SIZE, s->first_id);
}

static void place_next(stream_reader *r)
{
    const segment *s = &r->log->segs[r->log->nsegs - 1];
    place(r, s->first_id, s->size, r->log->next_offset);
}

static stream_status place_record(stream_reader *r, const segment *s, const idx_record *rec)
{
    place(r, s->first_id, rec->pos, rec->chunk_id);
    return STREAM_OK;
}

static stream_status place_last(stream_reader *r)
{
    stream_log *log = r->log;
    for (size_t i = log->nsegs; i-- > 0;) {
        idx_record rec;
        stream_status st = segment_last_user(log->dir, &log->segs[i], log->committed_offset, &rec);
        if (st == STREAM_OK)
            return place_record(r, &log->segs[i], &rec);
        if (st != STREAM_END)
            return st;
    }
    place_next(r);
    return STREAM_OK;
}

static stream_status place_offset(stream_reader *r, uint64_t o)
{
    stream_log *log = r->log;
    if (!log->has_chunks || o < log->segs[0].first_id) {
        place_first(r);
        return STREAM_OK;
    }
    if (o >= log->next_offset) {
        place_next(r);
        return STREAM_OK;
    }
    const segment *s = &log->segs[log_segment_for(log, o)];
    idx_record rec;
    stream_status st = segment_find(log->dir, s, false, o, 0, &rec);
    if (st == STREAM_END) {
        place_first(r);
        return STREAM_OK;
    }
    r->skip_below = o;
    return st == STREAM_OK ? place_record(r, s, &rec) : st;
}

static stream_status place_time(stream_reader *r, int64_t ts)
{
    stream_log *log = r->log;
    for (size_t i = 0; i < log->nsegs; i++) {
        const segment *s = &log->segs[i];
        if (s->chunks == 0 || s->last_ts < ts)
            continue;
        idx_record rec;
        stream_status st = segment_find(log->dir, s, true, 0, ts, &rec);
        if (st != STREAM_END)
            return st == STREAM_OK ? place_record(r, s, &rec) : st;
    }
    place_next(r);
    return STREAM_OK;
}

stream_status stream_reader_open(stream_log *log, const stream_start *start,
                                 const stream_filter *filter, stream_reader **out)
{
    *out = NULL;
    if (filter && filter->count == 0 && !filter->match_unfiltered)
        return STREAM_EINVAL;
    stream_reader *r = calloc(1, sizeof *r);
    if (!r)
        return STREAM_ENOMEM;
    r->log = log;
    r->fd = -1;
    if (filter && !bloom_matcher_init(&r->matcher, filter)) {
        free(r);
        return STREAM_ENOMEM;
    }
    r->filtered = filter != NULL;
    stream_status st = STREAM_OK;
    switch (start->kind) {
    case STREAM_START_FIRST: place_first(r); break;
    case STREAM_START_NEXT: place_next(r); break;
    case STREAM_START_LAST: st = place_last(r); break;
    case STREAM_START_OFFSET: st = place_offset(r, start->offset); break;
    case STREAM_START_TIMESTAMP: st = place_time(r, start->timestamp_ms); break;
    default: st = STREAM_EINVAL;
    }
    if (st != STREAM_OK) {
        stream_reader_close(r);
        return st;
    }
    *out = r;
    return STREAM_OK;
}

void stream_reader_close(stream_reader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    bloom_matcher_free(&r->matcher);
    sbuf_free(&r->ra);
    sbuf_free(&r->buf);
    free(r);
}

uint64_t stream_reader_offset(const stream_reader *r)
{
    return r->next_id > r->skip_below ? r->next_id : r->skip_below;
}

void stream_reader_include_tracking(stream_reader *r) { r->tracking = true; }

void stream_reader_get_stats(const stream_reader *r, stream_reader_stats *out) { *out = r->stats; }

/* Makes fd the reader's segment, or moves on when that segment is done:
 * returns the segment, or NULL at the end of the log. */
static const segment *current(stream_reader *r, stream_status *st)
{
    stream_log *log = r->log;
    *st = STREAM_OK;
    if (r->seg_id < log->segs[0].first_id) /* retention took it */
        place_first(r);
    size_t i = log_segment_for(log, r->seg_id);
    const segment *s = &log->segs[i];
    if (r->pos >= s->size) {
        if (i + 1 == log->nsegs)
            return NULL;
        s = &log->segs[i + 1];
        place(r, s->first_id, FILE_HEADER_SIZE, s->first_id > r->next_id ? s->first_id : r->next_id);
    }
    if (r->fd < 0) {
        char path[4096];
        segment_name(path, sizeof path, log->dir, s->first_id, "segment");
        r->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (r->fd < 0) {
            *st = STREAM_EIO;
            return NULL;
        }
    }
    return s;
}

/* `n` bytes of the file at `at` from the read-ahead window, refilled from
 * `at` when they are not all in it -- with `span` bytes, or fewer where
 * readable bytes end (`limit`); NULL when they cannot fit the window (or
 * the read fails). */
static const uint8_t *ra_get(stream_reader *r, uint64_t at, size_t n, size_t span, uint64_t limit)
{
    if (at >= r->ra_at && at - r->ra_at <= r->ra.len && n <= r->ra.len - (at - r->ra_at))
        return r->ra.p + (at - r->ra_at);
    if (n > RA_SIZE || at > limit || n > limit - at)
        return NULL;
    size_t want = limit - at < span ? (size_t)(limit - at) : span;
    r->ra.len = 0;
    if (!sbuf_reserve(&r->ra, RA_SIZE) || !seg_pread(r->fd, r->ra.p, want, at))
        return NULL;
    r->ra_at = at;
    r->ra.len = want;
    return r->ra.p;
}

/* Points the chunk at its data and trailer (from the window, or read into
 * the buffer) and checks the CRC. */
static stream_status load(stream_reader *r, stream_chunk *c, uint64_t limit)
{
    size_t n = (size_t)c->data_len + c->trailer_len;
    const uint8_t *p = ra_get(r, (uint64_t)c->data_pos, n, RA_SIZE, limit);
    if (!p) {
        r->buf.len = 0;
        if (!sbuf_reserve(&r->buf, n ? n : 1))
            return STREAM_ENOMEM;
        if (!seg_pread(r->fd, r->buf.p, n, (uint64_t)c->data_pos))
            return STREAM_EIO;
        p = r->buf.p;
    }
    if (stream_crc32(stream_crc32(0, NULL, 0), p, c->data_len) != c->crc)
        return STREAM_ECORRUPT;
    c->data = p;
    chunk_split_trailer(c, p + c->data_len);
    r->stats.bytes_read += c->data_len;
    return STREAM_OK;
}

/* Reads the header of the chunk at the reader's position (copied into
 * `header`), in the segment whose readable bytes end at *limit; `span` is
 * the read-ahead to use. STREAM_END at the committed end. */
static stream_status next_header(stream_reader *r, chunk_header *h, uint8_t *header, uint64_t *limit,
                                 size_t *span)
{
    if (r->next_id >= r->log->committed_offset)
        return STREAM_END;
    stream_status st;
    const segment *s = current(r, &st);
    if (!s)
        return st == STREAM_OK ? STREAM_END : st;
    bool active = s == &r->log->segs[r->log->nsegs - 1];
    *limit = active ? r->log->synced_size : s->size;
    if (r->pos >= *limit)
        return STREAM_END;
    uint64_t room = *limit - r->pos;
    if (room < STREAM_CHUNK_HEADER_SIZE)
        return STREAM_ECORRUPT;
    /* after a big chunk or one the filter ruled out, a window would be
     * mostly the next one's data, which the filter may not need either:
     * read the header and filter alone */
    *span = r->big || r->skipping ? STREAM_CHUNK_HEADER_SIZE + STREAM_FILTER_SIZE_MAX : RA_SIZE;
    const uint8_t *hb = ra_get(r, r->pos, STREAM_CHUNK_HEADER_SIZE, *span, *limit);
    if (!hb)
        return STREAM_EIO;
    if (!chunk_header_decode(hb, h) || h->chunk_id != r->next_id || chunk_total(h) > room)
        return STREAM_ECORRUPT;
    if (h->chunk_id >= r->log->committed_offset)
        return STREAM_END;
    memcpy(header, hb, STREAM_CHUNK_HEADER_SIZE); /* before the window moves */
    r->big = chunk_total(h) > RA_SIZE;
    return STREAM_OK;
}

/* Whether the reader wants the chunk at its position: a user chunk that
 * its filter (if any) may match. */
static stream_status wanted(stream_reader *r, const chunk_header *h, size_t span, uint64_t limit, bool *yes)
{
    *yes = h->type == STREAM_CHUNK_USER || r->tracking;
    if (h->type != STREAM_CHUNK_USER || !r->filtered)
        return STREAM_OK;
    const uint8_t *filter = ra_get(r, r->pos + STREAM_CHUNK_HEADER_SIZE, h->filter_size, span, limit);
    if (!filter && h->filter_size)
        return STREAM_EIO;
    r->skipping = !bloom_may_match(&r->matcher, filter, h->filter_size);
    if (r->skipping) {
        r->stats.chunks_skipped++;
        r->stats.bytes_skipped += chunk_total(h) - STREAM_CHUNK_HEADER_SIZE;
        *yes = false;
    }
    return STREAM_OK;
}

stream_status stream_reader_next(stream_reader *r, bool want_data, stream_chunk *out)
{
    for (unsigned skipped = 0; skipped < STREAM_SKIP_MAX; skipped++) {
        chunk_header h;
        uint8_t header[STREAM_CHUNK_HEADER_SIZE];
        uint64_t limit;
        size_t span;
        bool yes;
        stream_status st = next_header(r, &h, header, &limit, &span);
        if (st == STREAM_OK)
            st = wanted(r, &h, span, limit, &yes);
        if (st != STREAM_OK)
            return st;
        uint64_t at = r->pos;
        if (yes) {
            *out = (stream_chunk){
                .type = h.type, .num_entries = h.num_entries, .num_records = h.num_records,
                .timestamp_ms = h.timestamp, .epoch = h.epoch, .first_offset = h.chunk_id,
                .crc = h.crc, .data_len = h.data_len, .trailer_len = h.trailer_len,
                .filter_size = h.filter_size, .fd = r->fd,
                .data_pos = (off_t)(at + STREAM_CHUNK_HEADER_SIZE + h.filter_size),
                .skip_below = r->skip_below,
            };
            memcpy(out->header, header, sizeof header);
            if (want_data && (st = load(r, out, limit)) != STREAM_OK)
                return st;
            r->stats.chunks_read++;
        }
        r->pos += chunk_total(&h);
        r->next_id += h.num_records;
        if (yes)
            return STREAM_OK;
    }
    return STREAM_AGAIN;
}
