/* Chunks: the header codec, the builder and the entry iterator.
 *
 * A chunk on disk (osiris_log.erl's "Chunk format"; integers big-endian):
 *
 *   offset size field
 *        0    1 magic (5) << 4 | version (0)
 *        1    1 chunk type: 0 user, 1 tracking delta, 2 tracking snapshot
 *        2    2 number of entries
 *        4    4 number of records (a sub-batch entry holds several)
 *        8    8 timestamp, ms (signed)
 *       16    8 epoch
 *       24    8 chunk id = offset of the first record
 *       32    4 CRC32 (IEEE, as erlang:crc32) of the data
 *       36    4 data length
 *       40    4 trailer length
 *       44    1 filter size (Bloom filter bytes, 0 or 16..255)
 *       45    3 reserved (0)
 *       48    F Bloom filter (bloom.c)
 *     48+F    D data: the entries, back to back
 *   48+F+D    T trailer
 *
 * Entries (osiris_log.erl's "Data Entry format"):
 *   simple     0:1 size:31, then size bytes (one record)
 *   sub-batch  1:1 compression:3 reserved:4, records u16, uncompressed
 *              length u32, length u32, then length bytes
 *
 * The trailer holds osiris tracking blocks (types 0..2, opaque here) and,
 * first, Warren's own block when any entry has a filter value: tag 0x57,
 * u32 length, then per entry a u16 value length (0: unfiltered) and the
 * value. RabbitMQ keeps no values (its clients filter); Warren filters
 * exactly on the server for AMQP consumers. The trailer of a user chunk
 * never goes to the wire (RabbitMQ's send_file sends header + data).
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "stream_int.h"

bool sbuf_reserve(sbuf *b, size_t more)
{
    if (more <= b->cap - b->len)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

void sbuf_free(sbuf *b)
{
    free(b->p);
    *b = (sbuf){0};
}

const char *stream_status_text(stream_status st)
{
    switch (st) {
    case STREAM_OK: return "ok";
    case STREAM_END: return "end of stream";
    case STREAM_FULL: return "chunk full";
    case STREAM_AGAIN: return "try again";
    case STREAM_EINVAL: return "invalid argument";
    case STREAM_ECORRUPT: return "corrupt stream data";
    case STREAM_EIO: return "i/o error";
    case STREAM_ENOMEM: return "out of memory";
    }
    return "unknown status";
}

uint32_t stream_crc32(uint32_t crc, const void *p, size_t n)
{
    /* zlib's crc32 is what erlang:crc32 computes; it takes uInt lengths */
    const uint8_t *b = p;
    while (n > 0) {
        uInt step = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, b, step);
        b += step;
        n -= step;
    }
    return crc;
}

void chunk_header_encode(const chunk_header *h, uint8_t out[STREAM_CHUNK_HEADER_SIZE])
{
    out[0] = CHUNK_MAGIC << 4 | CHUNK_VERSION;
    out[1] = h->type;
    be16(out + 2, h->num_entries);
    be32(out + 4, h->num_records);
    be64(out + 8, (uint64_t)h->timestamp);
    be64(out + 16, h->epoch);
    be64(out + 24, h->chunk_id);
    be32(out + 32, h->crc);
    be32(out + 36, h->data_len);
    be32(out + 40, h->trailer_len);
    out[44] = h->filter_size;
    out[45] = out[46] = out[47] = 0;
}

bool chunk_header_decode(const uint8_t in[STREAM_CHUNK_HEADER_SIZE], chunk_header *h)
{
    if (in[0] != (CHUNK_MAGIC << 4 | CHUNK_VERSION) || in[1] > STREAM_CHUNK_TRACKING_SNAPSHOT)
        return false;
    *h = (chunk_header){
        .type = in[1],
        .num_entries = rd16(in + 2),
        .num_records = rd32(in + 4),
        .timestamp = (int64_t)rd64(in + 8),
        .epoch = rd64(in + 16),
        .chunk_id = rd64(in + 24),
        .crc = rd32(in + 32),
        .data_len = rd32(in + 36),
        .trailer_len = rd32(in + 40),
        .filter_size = in[44],
    };
    uint64_t body = (uint64_t)h->filter_size + h->data_len + h->trailer_len;
    if (body > STREAM_CHUNK_DATA_MAX || (h->filter_size != 0 && h->filter_size < STREAM_FILTER_SIZE_MIN))
        return false;
    /* a user chunk's records are its offsets: at least one per entry */
    return h->num_records >= h->num_entries && (h->num_entries > 0 || h->data_len == 0);
}

/* ---- builder ------------------------------------------------------------ */

stream_builder *stream_builder_new(void) { return calloc(1, sizeof(stream_builder)); }

void stream_builder_free(stream_builder *b)
{
    if (!b)
        return;
    sbuf_free(&b->data);
    sbuf_free(&b->values);
    sbuf_free(&b->tracking);
    free(b);
}

void stream_builder_reset(stream_builder *b)
{
    b->data.len = b->values.len = b->tracking.len = 0;
    b->entries = b->records = 0;
    b->any_value = false;
}

bool stream_builder_empty(const stream_builder *b) { return b->entries == 0; }
uint32_t stream_builder_records(const stream_builder *b) { return b->records; }
uint32_t stream_builder_bytes(const stream_builder *b) { return (uint32_t)b->data.len; }

/* Room check shared by both entry kinds: entry bytes `n` plus the value.
 * Data, value table and tracking stay under the chunk bound with the
 * largest filter; an entry that cannot fit even an empty chunk is invalid. */
static stream_status room_for(stream_builder *b, size_t n, size_t filter_len, uint32_t records)
{
    const size_t bound = STREAM_CHUNK_DATA_MAX - STREAM_FILTER_SIZE_MAX - FV_HEADER;
    size_t need = n + 2 + filter_len, used = b->data.len + b->values.len + b->tracking.len;
    if (filter_len > STREAM_FILTER_VALUE_MAX || n > bound || need > bound - b->tracking.len)
        return STREAM_EINVAL;
    if (b->entries == STREAM_MAX_ENTRIES || b->records > UINT32_MAX - records || need > bound - used)
        return STREAM_FULL;
    if (!sbuf_reserve(&b->data, n) || !sbuf_reserve(&b->values, 2 + filter_len))
        return STREAM_ENOMEM;
    return STREAM_OK;
}

static void add_value(stream_builder *b, const void *filter, size_t filter_len, uint32_t records)
{
    uint8_t *v = b->values.p + b->values.len;
    be16(v, (uint16_t)filter_len);
    if (filter_len)
        memcpy(v + 2, filter, filter_len);
    b->values.len += 2 + filter_len;
    b->any_value |= filter_len > 0;
    b->entries++;
    b->records += records;
}

stream_status stream_builder_add(stream_builder *b, const stream_part *parts, int nparts,
                                 const void *filter, size_t filter_len)
{
    size_t n = 0;
    for (int i = 0; i < nparts; i++) {
        if (parts[i].len > STREAM_CHUNK_DATA_MAX)
            return STREAM_EINVAL;
        n += parts[i].len;
    }
    stream_status st = room_for(b, 4 + n, filter ? filter_len : 0, 1);
    if (st != STREAM_OK)
        return st;
    uint8_t *p = b->data.p + b->data.len;
    be32(p, (uint32_t)n); /* top bit 0: a simple entry */
    p += 4;
    for (int i = 0; i < nparts; i++) {
        if (parts[i].len)
            memcpy(p, parts[i].bytes, parts[i].len);
        p += parts[i].len;
    }
    b->data.len += 4 + n;
    add_value(b, filter, filter ? filter_len : 0, 1);
    return STREAM_OK;
}

stream_status stream_builder_add_batch(stream_builder *b, uint8_t compression, uint16_t records,
                                       uint32_t uncompressed_len, const void *data, size_t len,
                                       const void *filter, size_t filter_len)
{
    if (compression > 7 || records == 0)
        return STREAM_EINVAL;
    stream_status st = room_for(b, 11 + len, filter ? filter_len : 0, records);
    if (st != STREAM_OK)
        return st;
    uint8_t *p = b->data.p + b->data.len;
    p[0] = (uint8_t)(0x80 | compression << 4);
    be16(p + 1, records);
    be32(p + 3, uncompressed_len);
    be32(p + 7, (uint32_t)len);
    if (len)
        memcpy(p + 11, data, len);
    b->data.len += 11 + len;
    add_value(b, filter, filter ? filter_len : 0, records);
    return STREAM_OK;
}

stream_status stream_builder_set_tracking(stream_builder *b, const void *bytes, size_t len)
{
    if (len > STREAM_CHUNK_DATA_MAX / 2)
        return STREAM_EINVAL;
    if (len > STREAM_CHUNK_DATA_MAX - STREAM_FILTER_SIZE_MAX - FV_HEADER - b->data.len - b->values.len)
        return STREAM_FULL;
    b->tracking.len = 0;
    if (!sbuf_reserve(&b->tracking, len))
        return STREAM_ENOMEM;
    if (len)
        memcpy(b->tracking.p, bytes, len);
    b->tracking.len = len;
    return STREAM_OK;
}

/* ---- reading entries ---------------------------------------------------- */

void chunk_split_trailer(stream_chunk *c, const uint8_t *trailer)
{
    uint32_t len = c->trailer_len, n = 0;
    c->filter_values = NULL;
    c->filter_values_len = 0;
    if (c->type == STREAM_CHUNK_USER && len >= FV_HEADER && trailer[0] == FV_TAG &&
        (n = rd32(trailer + 1)) <= len - FV_HEADER) {
        c->filter_values = trailer + FV_HEADER;
        c->filter_values_len = n;
        n += FV_HEADER;
    } else {
        n = 0;
    }
    c->tracking = len > n ? trailer + n : NULL;
    c->tracking_len = len - n;
}

void stream_entry_begin(stream_entry_iter *it, const stream_chunk *chunk)
{
    *it = (stream_entry_iter){.chunk = chunk, .next_offset = chunk->first_offset};
}

/* The entry's filter value from the table, advancing through it. */
static stream_status next_value(stream_entry_iter *it, stream_entry *e)
{
    const stream_chunk *c = it->chunk;
    e->filter = NULL;
    e->filter_len = 0;
    if (!c->filter_values)
        return STREAM_OK;
    uint32_t left = c->filter_values_len - it->fpos;
    if (left < 2)
        return STREAM_ECORRUPT;
    uint16_t n = rd16(c->filter_values + it->fpos);
    if (n > left - 2)
        return STREAM_ECORRUPT;
    if (n)
        e->filter = c->filter_values + it->fpos + 2;
    e->filter_len = n;
    it->fpos += 2 + n;
    return STREAM_OK;
}

static stream_status parse_entry(stream_entry_iter *it, stream_entry *e)
{
    const stream_chunk *c = it->chunk;
    const uint8_t *p = c->data + it->pos;
    uint32_t left = c->data_len - it->pos;
    if (left < 4)
        return STREAM_ECORRUPT;
    *e = (stream_entry){.offset = it->next_offset, .records = 1};
    uint32_t head = 4;
    if (p[0] & 0x80) {
        if (left < 11 || (p[0] & 0x0f) != 0)
            return STREAM_ECORRUPT;
        e->batch = true;
        e->compression = (p[0] >> 4) & 7;
        e->records = rd16(p + 1);
        e->uncompressed_len = rd32(p + 3);
        e->len = rd32(p + 7);
        head = 11;
        if (e->records == 0)
            return STREAM_ECORRUPT;
    } else {
        e->len = rd32(p) & 0x7fffffffu;
    }
    if (e->len > left - head)
        return STREAM_ECORRUPT;
    e->bytes = p + head;
    it->pos += head + e->len;
    it->next_offset += e->records;
    it->index++;
    return next_value(it, e);
}

stream_status stream_entry_next(stream_entry_iter *it, stream_entry *out)
{
    const stream_chunk *c = it->chunk;
    if (!c->data)
        return STREAM_EINVAL;
    for (;;) {
        if (it->index == c->num_entries) {
            bool whole = it->pos == c->data_len &&
                         it->next_offset - c->first_offset == c->num_records;
            return whole ? STREAM_END : STREAM_ECORRUPT;
        }
        stream_status st = parse_entry(it, out);
        if (st != STREAM_OK)
            return st;
        if (out->offset + out->records > c->skip_below)
            return STREAM_OK;
    }
}

bool chunk_entries_ok(const chunk_header *h, const uint8_t *data)
{
    stream_chunk c = {.num_entries = h->num_entries, .num_records = h->num_records,
                      .first_offset = h->chunk_id, .data_len = h->data_len, .data = data};
    stream_entry_iter it;
    stream_entry e;
    stream_status st;
    stream_entry_begin(&it, &c);
    while ((st = stream_entry_next(&it, &e)) == STREAM_OK)
        ;
    return st == STREAM_END;
}

bool stream_filter_match(const stream_filter *f, const stream_entry *e)
{
    if (!f)
        return true;
    if (!e->filter)
        return f->match_unfiltered;
    for (size_t i = 0; i < f->count; i++)
        if (f->values[i].len == e->filter_len && memcmp(f->values[i].bytes, e->filter, e->filter_len) == 0)
            return true;
    return false;
}
