/* Readers: a cursor over committed chunks.
 *
 * A reader is a position: the segment file it reads (`seg_id`, open as
 * `fd`), the file position of its next chunk and that chunk's id
 * (`next_id`). It holds one buffer, sized by the largest chunk it has
 * loaded, so a reader far behind costs reads, not memory. It never reads a
 * chunk at or past the log's committed offset. When retention has removed
 * its segment, the next read starts again at the log's first chunk.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stream_int.h"

struct stream_reader {
    stream_log *log;
    uint64_t seg_id;
    int fd;
    uint64_t pos;
    uint64_t next_id;
    uint64_t skip_below; /* the requested offset inside the first chunk */
    bool filtered;
    bloom_matcher matcher;
    sbuf buf;
    stream_reader_stats stats;
};

static void place(stream_reader *r, uint64_t seg_id, uint64_t pos, uint64_t id)
{
    if (r->fd >= 0 && seg_id != r->seg_id) {
        close(r->fd);
        r->fd = -1;
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
    sbuf_free(&r->buf);
    free(r);
}

uint64_t stream_reader_offset(const stream_reader *r)
{
    return r->next_id > r->skip_below ? r->next_id : r->skip_below;
}

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

/* Reads data and trailer into the buffer and checks the CRC. */
static stream_status load(stream_reader *r, stream_chunk *c)
{
    size_t n = (size_t)c->data_len + c->trailer_len;
    r->buf.len = 0;
    if (!sbuf_reserve(&r->buf, n ? n : 1))
        return STREAM_ENOMEM;
    if (!seg_pread(r->fd, r->buf.p, n, (uint64_t)c->data_pos))
        return STREAM_EIO;
    if (stream_crc32(stream_crc32(0, NULL, 0), r->buf.p, c->data_len) != c->crc)
        return STREAM_ECORRUPT;
    c->data = r->buf.p;
    if (c->type == STREAM_CHUNK_USER)
        chunk_find_values(r->buf.p + c->data_len, c->trailer_len, &c->filter_values, &c->filter_values_len);
    r->stats.bytes_read += c->data_len;
    return STREAM_OK;
}

stream_status stream_reader_next(stream_reader *r, bool want_data, stream_chunk *out)
{
    for (;;) {
        if (r->next_id >= r->log->committed_offset)
            return STREAM_END;
        stream_status st;
        const segment *s = current(r, &st);
        if (!s)
            return st == STREAM_OK ? STREAM_END : st;
        /* header and filter in one read */
        uint8_t hb[STREAM_CHUNK_HEADER_SIZE + STREAM_FILTER_SIZE_MAX];
        chunk_header h;
        uint64_t room = s->size - r->pos;
        size_t want = room < sizeof hb ? (size_t)room : sizeof hb;
        if (room < STREAM_CHUNK_HEADER_SIZE || !seg_pread(r->fd, hb, want, r->pos))
            return STREAM_ECORRUPT;
        if (!chunk_header_decode(hb, &h) || h.chunk_id != r->next_id || chunk_total(&h) > room)
            return STREAM_ECORRUPT;
        if (h.chunk_id >= r->log->committed_offset)
            return STREAM_END;
        uint64_t at = r->pos;
        bool skip = h.type != STREAM_CHUNK_USER;
        if (!skip && r->filtered && !bloom_may_match(&r->matcher, hb + STREAM_CHUNK_HEADER_SIZE, h.filter_size)) {
            r->stats.chunks_skipped++;
            r->stats.bytes_skipped += chunk_total(&h) - STREAM_CHUNK_HEADER_SIZE;
            skip = true;
        }
        if (skip) {
            r->pos += chunk_total(&h);
            r->next_id += h.num_records;
            continue;
        }
        *out = (stream_chunk){
            .type = h.type, .num_entries = h.num_entries, .num_records = h.num_records,
            .timestamp_ms = h.timestamp, .epoch = h.epoch, .first_offset = h.chunk_id,
            .crc = h.crc, .data_len = h.data_len, .trailer_len = h.trailer_len,
            .filter_size = h.filter_size, .fd = r->fd,
            .data_pos = (off_t)(at + STREAM_CHUNK_HEADER_SIZE + h.filter_size),
            .skip_below = r->skip_below,
        };
        memcpy(out->header, hb, STREAM_CHUNK_HEADER_SIZE);
        if (want_data && (st = load(r, out)) != STREAM_OK)
            return st;
        r->pos += chunk_total(&h);
        r->next_id += h.num_records;
        r->stats.chunks_read++;
        return STREAM_OK;
    }
}
