/* Segment and index files: naming, recovery, index searches, the
 * directory's listing.
 *
 * A stream directory holds, per segment, <first chunk id, 20 digits>.segment
 * and .index (osiris's names). Segment file: "OSIL", u32 version 1, then
 * chunks (chunk.c). Index file: "OSII", u32 version 1, then one 29-byte
 * record per chunk, in order (osiris_log.erl's "Index format", big-endian):
 *
 *   offset size field
 *        0    8 chunk id
 *        8    8 timestamp, ms (signed)
 *       16    8 epoch
 *       24    4 position of the chunk in the segment file
 *       28    1 chunk type
 *
 * Recovery trusts nothing it has not checked: the last segment (the one
 * written when a crash happened) is scanned chunk by chunk, headers and
 * CRCs, and cut back to the last whole chunk; its index is rewritten when
 * it does not say exactly that. An older segment is trusted when its index
 * is well formed and its last record points at a chunk that ends the file;
 * otherwise it is scanned (headers only) and its index rebuilt.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stream_int.h"

void segment_name(char *out, size_t n, const char *dir, uint64_t first_id, const char *ext)
{
    snprintf(out, n, "%s/%020" PRIu64 ".%s", dir, first_id, ext);
}

void idx_record_encode(const idx_record *r, uint8_t out[IDX_RECORD_SIZE])
{
    be64(out, r->chunk_id);
    be64(out + 8, (uint64_t)r->timestamp);
    be64(out + 16, r->epoch);
    be32(out + 24, r->pos);
    out[28] = r->type;
}

void idx_record_decode(const uint8_t in[IDX_RECORD_SIZE], idx_record *r)
{
    *r = (idx_record){.chunk_id = rd64(in), .timestamp = (int64_t)rd64(in + 8),
                      .epoch = rd64(in + 16), .pos = rd32(in + 24), .type = in[28]};
}

bool seg_pread(int fd, void *buf, size_t n, uint64_t at)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = pread(fd, p, n, (off_t)at);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return false;
        p += got;
        n -= (size_t)got;
        at += (uint64_t)got;
    }
    return true;
}

/* Reads a chunk's data into `buf` and checks its CRC and its entries
 * against the header's counts (the CRC does not cover the header). */
static bool chunk_ok(int fd, uint64_t at, const chunk_header *h, sbuf *buf)
{
    buf->len = 0;
    if (!sbuf_reserve(buf, h->data_len ? h->data_len : 1) || !seg_pread(fd, buf->p, h->data_len, at))
        return false;
    return stream_crc32(stream_crc32(0, NULL, 0), buf->p, h->data_len) == h->crc &&
           chunk_entries_ok(h, buf->p);
}

static void seg_note(segment *s, const idx_record *r, uint32_t records)
{
    if (s->chunks == 0)
        s->first_ts = r->timestamp;
    s->last_ts = r->timestamp;
    s->last_id = r->chunk_id;
    s->next_offset = r->chunk_id + records;
    s->chunks++;
}

/* Walks the chunks of a segment from its header on, stopping at the first
 * one that is torn, malformed, out of sequence or (with `check`) fails its
 * CRC or its entry counts. Fills *s and the index records (`recs`); s->size
 * is the valid length. */
static stream_status scan(int fd, uint64_t size, bool check, segment *s, sbuf *recs)
{
    sbuf data = {0};
    uint64_t pos = FILE_HEADER_SIZE;
    stream_status st = STREAM_OK;
    while (size - pos >= STREAM_CHUNK_HEADER_SIZE && pos <= UINT32_MAX) {
        uint8_t hb[STREAM_CHUNK_HEADER_SIZE];
        chunk_header h;
        if (!seg_pread(fd, hb, sizeof hb, pos) || !chunk_header_decode(hb, &h) ||
            chunk_total(&h) > size - pos || h.chunk_id != s->next_offset)
            break;
        if (check && !chunk_ok(fd, pos + STREAM_CHUNK_HEADER_SIZE + h.filter_size, &h, &data))
            break;
        idx_record r = {h.chunk_id, h.timestamp, h.epoch, (uint32_t)pos, h.type};
        if (!sbuf_reserve(recs, IDX_RECORD_SIZE)) {
            st = STREAM_ENOMEM;
            break;
        }
        idx_record_encode(&r, recs->p + recs->len);
        recs->len += IDX_RECORD_SIZE;
        seg_note(s, &r, h.num_records);
        pos += chunk_total(&h);
    }
    sbuf_free(&data);
    s->size = pos;
    return st;
}

static bool write_all(int fd, const void *p, size_t n, off_t at)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = pwrite(fd, b, n, at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        b += w;
        n -= (size_t)w;
        at += w;
    }
    return true;
}

/* Makes the index file say exactly `recs`, rewriting it only if it differs. */
static stream_status index_agree(const char *path, const sbuf *recs, stream_recovery *rec)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return STREAM_EIO;
    size_t want = FILE_HEADER_SIZE + recs->len;
    uint8_t *have = malloc(want);
    struct stat sb;
    stream_status st = STREAM_OK;
    if (!have) {
        st = STREAM_ENOMEM;
    } else if (fstat(fd, &sb) != 0) {
        st = STREAM_EIO;
    } else if ((uint64_t)sb.st_size != want || !seg_pread(fd, have, want, 0) ||
               memcmp(have, IDX_MAGIC "\0\0\0\1", FILE_HEADER_SIZE) != 0 ||
               (recs->len && memcmp(have + FILE_HEADER_SIZE, recs->p, recs->len) != 0)) {
        rec->indexes_rebuilt++;
        if (!write_all(fd, IDX_MAGIC "\0\0\0\1", FILE_HEADER_SIZE, 0) ||
            (recs->len && !write_all(fd, recs->p, recs->len, FILE_HEADER_SIZE)) ||
            ftruncate(fd, (off_t)want) != 0 || fdatasync(fd) != 0)
            st = STREAM_EIO;
    }
    free(have);
    close(fd);
    return st;
}

/* An older segment's index, if it is whole and ends where the file ends. */
static bool index_trusted(const char *idx_path, int seg_fd, uint64_t seg_size, segment *s)
{
    int fd = open(idx_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat sb;
    uint8_t head[FILE_HEADER_SIZE], rec[IDX_RECORD_SIZE], hb[STREAM_CHUNK_HEADER_SIZE];
    idx_record first, last;
    chunk_header h;
    bool ok = fstat(fd, &sb) == 0 && sb.st_size > FILE_HEADER_SIZE &&
              (sb.st_size - FILE_HEADER_SIZE) % IDX_RECORD_SIZE == 0 &&
              seg_pread(fd, head, sizeof head, 0) && memcmp(head, IDX_MAGIC "\0\0\0\1", 8) == 0 &&
              seg_pread(fd, rec, sizeof rec, FILE_HEADER_SIZE);
    if (ok) {
        idx_record_decode(rec, &first);
        ok = seg_pread(fd, rec, sizeof rec, sb.st_size - IDX_RECORD_SIZE);
    }
    if (ok) {
        idx_record_decode(rec, &last);
        ok = first.chunk_id == s->first_id && first.pos == FILE_HEADER_SIZE &&
             seg_pread(seg_fd, hb, sizeof hb, last.pos) && chunk_header_decode(hb, &h) &&
             h.chunk_id == last.chunk_id && last.pos + chunk_total(&h) == seg_size;
    }
    if (ok) {
        s->chunks = (uint32_t)((sb.st_size - FILE_HEADER_SIZE) / IDX_RECORD_SIZE);
        s->first_ts = first.timestamp;
        s->last_ts = last.timestamp;
        s->last_id = last.chunk_id;
        s->next_offset = last.chunk_id + h.num_records;
        s->size = seg_size;
    }
    close(fd);
    return ok;
}

stream_status segment_recover(const char *dir, uint64_t first_id, bool last, segment *s,
                              stream_recovery *rec)
{
    char path[4096], idx_path[4096];
    segment_name(path, sizeof path, dir, first_id, "segment");
    segment_name(idx_path, sizeof idx_path, dir, first_id, "index");
    *s = (segment){.first_id = first_id, .next_offset = first_id, .last_id = first_id};
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return STREAM_EIO;
    struct stat sb;
    uint8_t head[FILE_HEADER_SIZE];
    stream_status st = STREAM_OK;
    if (fstat(fd, &sb) != 0) {
        st = STREAM_EIO;
    } else if (sb.st_size < FILE_HEADER_SIZE) { /* torn as it was created */
        if (!write_all(fd, SEG_MAGIC "\0\0\0\1", FILE_HEADER_SIZE, 0) || ftruncate(fd, FILE_HEADER_SIZE) != 0)
            st = STREAM_EIO;
        sb.st_size = FILE_HEADER_SIZE;
    } else if (!seg_pread(fd, head, sizeof head, 0) || memcmp(head, SEG_MAGIC "\0\0\0\1", 8) != 0) {
        st = STREAM_ECORRUPT;
    }
    if (st != STREAM_OK || (!last && index_trusted(idx_path, fd, (uint64_t)sb.st_size, s))) {
        close(fd);
        return st;
    }
    sbuf recs = {0};
    st = scan(fd, (uint64_t)sb.st_size, last, s, &recs);
    rec->bytes_cut += (uint64_t)sb.st_size - s->size;
    if (st == STREAM_OK && s->size < (uint64_t)sb.st_size &&
        (ftruncate(fd, (off_t)s->size) != 0 || fdatasync(fd) != 0))
        st = STREAM_EIO;
    close(fd);
    if (st == STREAM_OK)
        st = index_agree(idx_path, &recs, rec);
    sbuf_free(&recs);
    return st;
}

stream_status segment_find(const char *dir, const segment *s, bool by_time, uint64_t offset,
                           int64_t ts, idx_record *out)
{
    char path[4096];
    segment_name(path, sizeof path, dir, s->first_id, "index");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return STREAM_EIO;
    /* Records are in chunk id order with non-decreasing timestamps: find
     * the first record where "id > offset" (or "timestamp >= ts") holds. */
    uint32_t lo = 0, hi = s->chunks;
    stream_status st = STREAM_OK;
    uint8_t rec[IDX_RECORD_SIZE];
    idx_record r;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (!seg_pread(fd, rec, sizeof rec, FILE_HEADER_SIZE + (off_t)mid * IDX_RECORD_SIZE)) {
            st = STREAM_ECORRUPT;
            break;
        }
        idx_record_decode(rec, &r);
        if (by_time ? r.timestamp >= ts : r.chunk_id > offset)
            hi = mid;
        else
            lo = mid + 1;
    }
    /* by offset the answer is the record before; by time that record */
    uint32_t pick = by_time ? lo : lo - 1;
    if (st == STREAM_OK && (by_time ? lo == s->chunks : lo == 0))
        st = STREAM_END;
    if (st == STREAM_OK && !seg_pread(fd, rec, sizeof rec, FILE_HEADER_SIZE + (off_t)pick * IDX_RECORD_SIZE))
        st = STREAM_ECORRUPT;
    if (st == STREAM_OK)
        idx_record_decode(rec, out);
    close(fd);
    return st;
}

stream_status segment_last_user(const char *dir, const segment *s, uint64_t before, idx_record *out)
{
    char path[4096];
    segment_name(path, sizeof path, dir, s->first_id, "index");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return STREAM_EIO;
    stream_status st = STREAM_END;
    uint8_t rec[IDX_RECORD_SIZE];
    for (uint32_t i = s->chunks; i-- > 0;) {
        if (!seg_pread(fd, rec, sizeof rec, FILE_HEADER_SIZE + (off_t)i * IDX_RECORD_SIZE)) {
            st = STREAM_ECORRUPT;
            break;
        }
        idx_record_decode(rec, out);
        if (out->chunk_id < before && out->type == STREAM_CHUNK_USER) {
            st = STREAM_OK;
            break;
        }
    }
    close(fd);
    return st;
}

/* ---- the directory ------------------------------------------------------ */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* An index left without its segment (retention removes the segment
 * first) is removed. */
static void orphan_index(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%.20s.segment", dir, name);
    if (access(path, F_OK) != 0 && errno == ENOENT) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        unlink(path);
    }
}

/* The first ids of the directory's segments, sorted; *n of them; indexes
 * without a segment are removed on the way. */
stream_status list_segments(const char *dir, uint64_t **ids, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return STREAM_EIO;
    size_t cap = 0;
    *ids = NULL;
    *n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const char *name = e->d_name;
        size_t len = strlen(name);
        if (strspn(name, "0123456789") != 20)
            continue;
        if (len == 26 && strcmp(name + 20, ".index") == 0) {
            orphan_index(dir, name);
            continue;
        }
        if (len != 28 || strcmp(name + 20, ".segment") != 0)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *p = realloc(*ids, cap * sizeof *p);
            if (!p) {
                closedir(d);
                return STREAM_ENOMEM;
            }
            *ids = p;
        }
        (*ids)[(*n)++] = strtoull(name, NULL, 10);
    }
    closedir(d);
    if (*n > 1)
        qsort(*ids, *n, sizeof **ids, cmp_u64);
    return STREAM_OK;
}

void remove_files(mirror *m, const char *dir, uint64_t id)
{
    char path[4096];
    segment_name(path, sizeof path, dir, id, "segment");
    mirror_unlink(m, path);
    segment_name(path, sizeof path, dir, id, "index");
    mirror_unlink(m, path);
}
