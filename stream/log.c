/* The log: open and recover, append, group commit, segment roll.
 *
 * State: `segs` lists the segment files oldest first; the last is the
 * active one, open as `fd`/`idx_fd`, written with positioned writes at its
 * `size`. Offsets: next_offset >= committed_offset; a chunk is visible to
 * readers once its records are below committed_offset (stream_sync). Older
 * segments are complete and synced (a roll syncs the one it leaves), so
 * retention may remove any but the active one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "stream_int.h"

static stream_status check_config(const stream_config *in, stream_config *out)
{
    *out = *in;
    if (!out->max_segment_bytes)
        out->max_segment_bytes = STREAM_SEGMENT_BYTES_DEFAULT;
    if (!out->max_segment_chunks)
        out->max_segment_chunks = STREAM_SEGMENT_CHUNKS_DEFAULT;
    if (!out->filter_size)
        out->filter_size = STREAM_FILTER_SIZE_DEFAULT;
    if (!out->epoch)
        out->epoch = 1;
    /* index records hold a chunk's position in 32 bits */
    bool ok = out->max_segment_bytes <= UINT32_MAX && out->max_age_ms >= 0 &&
              out->filter_size >= STREAM_FILTER_SIZE_MIN && out->filter_size <= STREAM_FILTER_SIZE_MAX;
    return ok ? STREAM_OK : STREAM_EINVAL;
}

size_t log_segment_for(const stream_log *log, uint64_t o)
{
    size_t lo = 0, hi = log->nsegs; /* first segment with first_id > o */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (log->segs[mid].first_id > o)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo ? lo - 1 : 0;
}

static bool push_segment(stream_log *log, const segment *s)
{
    if (log->nsegs == log->cap) {
        size_t cap = log->cap ? log->cap * 2 : 8;
        segment *p = realloc(log->segs, cap * sizeof *p);
        if (!p)
            return false;
        log->segs = p;
        log->cap = cap;
    }
    log->segs[log->nsegs++] = *s;
    return true;
}

static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Writes a new file's header (through the mirror). */
static bool write_magic(stream_log *log, int fd, const char *path, const char *magic)
{
    if (pwrite(fd, magic, FILE_HEADER_SIZE, 0) != FILE_HEADER_SIZE)
        return false;
    if (log->cfg.mirror)
        mirror_wrote(log->cfg.mirror, path, 0,
                     &(struct iovec){(void *)magic, FILE_HEADER_SIZE}, 1);
    return true;
}

/* Opens (creating when `create`) the active segment's two files. */
static stream_status open_active(stream_log *log, bool create)
{
    char path[4096], idx_path[4096];
    const segment *s = &log->segs[log->nsegs - 1];
    int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0);
    segment_name(path, sizeof path, log->dir, s->first_id, "segment");
    log->fd = mirror_open(log->cfg.mirror, path, flags, 0644);
    segment_name(idx_path, sizeof idx_path, log->dir, s->first_id, "index");
    log->idx_fd = mirror_open(log->cfg.mirror, idx_path, flags, 0644);
    if (log->fd < 0 || log->idx_fd < 0)
        return STREAM_EIO;
    if (create && (!write_magic(log, log->fd, path, SEG_MAGIC "\0\0\0\1") ||
                   !write_magic(log, log->idx_fd, idx_path, IDX_MAGIC "\0\0\0\1")))
        return STREAM_EIO;
    if (create)
        sync_dir(log->dir);
    return STREAM_OK;
}

static stream_status recover_all(stream_log *log)
{
    uint64_t *ids = NULL;
    size_t n = 0;
    stream_status st = list_segments(log->dir, &ids, &n);
    for (size_t i = 0; st == STREAM_OK && i < n; i++) {
        segment s;
        st = segment_recover(log->dir, ids[i], i + 1 == n, &s, &log->recovery);
        if (st != STREAM_OK)
            break;
        if (s.chunks == 0 && i + 1 < n) { /* an older segment with nothing in it */
            remove_files(log->cfg.mirror, log->dir, ids[i]);
            log->recovery.segments_dropped++;
            continue;
        }
        if (!push_segment(log, &s))
            st = STREAM_ENOMEM;
    }
    free(ids);
    return st;
}

stream_status stream_open(const char *dir, const stream_config *cfg, stream_log **out)
{
    *out = NULL;
    stream_log *log = calloc(1, sizeof *log);
    if (!log)
        return STREAM_ENOMEM;
    log->fd = log->idx_fd = -1;
    stream_status st = check_config(cfg, &log->cfg);
    log->dir = strdup(dir);
    log->bloom = malloc(STREAM_FILTER_SIZE_MAX);
    if (st == STREAM_OK && (!log->dir || !log->bloom))
        st = STREAM_ENOMEM;
    if (st == STREAM_OK && mirror_mkdir(log->cfg.mirror, dir, 0755) != 0 && errno != EEXIST)
        st = STREAM_EIO;
    if (st == STREAM_OK)
        st = recover_all(log);
    bool create = log->nsegs == 0;
    if (st == STREAM_OK && create && !push_segment(log, &(segment){.size = FILE_HEADER_SIZE}))
        st = STREAM_ENOMEM;
    if (st == STREAM_OK)
        st = open_active(log, create);
    if (st != STREAM_OK) {
        stream_close(log);
        return st;
    }
    const segment *last = &log->segs[log->nsegs - 1];
    log->next_offset = log->committed_offset = last->next_offset;
    log->synced_size = last->size;
    for (size_t i = log->nsegs; i-- > 0;)
        if (log->segs[i].chunks) {
            log->has_chunks = true;
            log->last_chunk_id = log->committed_chunk_id = log->segs[i].last_id;
            break;
        }
    *out = log;
    return STREAM_OK;
}

void stream_close(stream_log *log)
{
    if (!log)
        return;
    if (log->fd >= 0)
        close(log->fd);
    if (log->idx_fd >= 0)
        close(log->idx_fd);
    free(log->segs);
    free(log->bloom);
    free(log->dir);
    free(log);
}

stream_status stream_set_config(stream_log *log, const stream_config *cfg)
{
    stream_config c;
    stream_status st = check_config(cfg, &c);
    if (st == STREAM_OK) {
        c.mirror = log->cfg.mirror;
        log->cfg = c;
    }
    return st;
}

void stream_set_mirror(stream_log *log, mirror *m) { log->cfg.mirror = m; }

void stream_get_info(const stream_log *log, stream_info *out)
{
    const segment *first = &log->segs[0], *last = &log->segs[log->nsegs - 1];
    *out = (stream_info){
        .empty = !log->has_chunks || first->chunks == 0,
        .first_offset = first->chunks ? first->first_id : log->next_offset,
        .last_chunk_id = log->last_chunk_id,
        .next_offset = log->next_offset,
        .committed_offset = log->committed_offset,
        .committed_chunk_id = log->committed_chunk_id,
        .first_timestamp = first->first_ts,
        .last_timestamp = last->chunks ? last->last_ts : first->last_ts,
        .segments = log->nsegs,
        .recovery = log->recovery,
    };
    for (size_t i = 0; i < log->nsegs; i++) {
        out->bytes += log->segs[i].size;
        out->chunks += log->segs[i].chunks;
    }
}

/* Leaves the full active segment (synced, so retention may take it) and
 * starts the next one, named by the next offset. */
static stream_status roll(stream_log *log)
{
    if (fdatasync(log->fd) != 0 || fdatasync(log->idx_fd) != 0)
        return STREAM_EIO;
    segment s = {.first_id = log->next_offset, .next_offset = log->next_offset,
                 .last_id = log->next_offset, .size = FILE_HEADER_SIZE};
    if (!push_segment(log, &s))
        return STREAM_ENOMEM;
    close(log->fd);
    close(log->idx_fd);
    stream_status st = open_active(log, true);
    if (st == STREAM_OK)
        log->synced_size = FILE_HEADER_SIZE;
    if (st != STREAM_OK) { /* stay on the old segment's record; files reopen next time */
        log->nsegs--;
        remove_files(log->cfg.mirror, log->dir, s.first_id);
        open_active(log, false);
    }
    return st;
}

/* Cuts one of the active segment's files (through the mirror). */
static int truncate_active(stream_log *log, int fd, const char *kind, uint64_t length)
{
    char path[4096];
    segment_name(path, sizeof path, log->dir, log->segs[log->nsegs - 1].first_id, kind);
    return mirror_ftruncate(log->cfg.mirror, fd, path, length);
}

/* Records a chunk just written at the active segment's end, and its index
 * record at idx_at. */
static void mirror_chunk(stream_log *log, const struct iovec *iov, int n, uint64_t idx_at,
                         uint8_t rec[IDX_RECORD_SIZE])
{
    const segment *s = &log->segs[log->nsegs - 1];
    char path[4096];
    segment_name(path, sizeof path, log->dir, s->first_id, "segment");
    mirror_wrote(log->cfg.mirror, path, s->size, iov, n);
    segment_name(path, sizeof path, log->dir, s->first_id, "index");
    mirror_wrote(log->cfg.mirror, path, idx_at, &(struct iovec){rec, IDX_RECORD_SIZE}, 1);
}

/* Writes one chunk: the iovecs after the header (filter, data, trailer)
 * total `body` bytes; h is complete but for chunk_id. */
static stream_status write_chunk(stream_log *log, chunk_header *h, struct iovec *iov, int n)
{
    segment *s = &log->segs[log->nsegs - 1];
    bool full = s->size >= log->cfg.max_segment_bytes || s->chunks >= log->cfg.max_segment_chunks;
    if (s->chunks > 0 && full) { /* osiris rolls before the chunk that finds it full */
        stream_status st = roll(log);
        if (st != STREAM_OK)
            return st;
        s = &log->segs[log->nsegs - 1];
    }
    uint8_t head[STREAM_CHUNK_HEADER_SIZE], rec[IDX_RECORD_SIZE];
    h->chunk_id = log->next_offset;
    chunk_header_encode(h, head);
    iov[0] = (struct iovec){head, sizeof head};
    idx_record r = {h->chunk_id, h->timestamp, h->epoch, (uint32_t)s->size, h->type};
    idx_record_encode(&r, rec);
    uint64_t total = chunk_total(h);
    off_t idx_at = FILE_HEADER_SIZE + (off_t)s->chunks * IDX_RECORD_SIZE;
    if ((uint64_t)pwritev(log->fd, iov, n, (off_t)s->size) != total ||
        pwrite(log->idx_fd, rec, sizeof rec, idx_at) != (ssize_t)sizeof rec) {
        int saved = errno;
        /* leave no partial chunk behind for the next append to follow */
        if (truncate_active(log, log->fd, "segment", s->size) != 0 ||
            truncate_active(log, log->idx_fd, "index", (uint64_t)idx_at) != 0)
            saved = errno;
        errno = saved;
        return STREAM_EIO;
    }
    if (log->cfg.mirror)
        mirror_chunk(log, iov, n, (uint64_t)idx_at, rec);
    s->size += total;
    if (s->chunks == 0)
        s->first_ts = h->timestamp;
    s->last_ts = h->timestamp;
    s->last_id = h->chunk_id;
    s->chunks++;
    log->next_offset += h->num_records;
    s->next_offset = log->next_offset;
    log->last_chunk_id = h->chunk_id;
    log->has_chunks = true;
    return STREAM_OK;
}

stream_status stream_append(stream_log *log, stream_builder *b, int64_t timestamp_ms,
                            uint64_t *first_offset)
{
    if (first_offset)
        *first_offset = log->next_offset;
    if (b->entries == 0)
        return STREAM_OK;
    uint8_t fv[FV_HEADER] = {FV_TAG};
    uint32_t fsize = b->any_value ? log->cfg.filter_size : 0;
    uint32_t values = b->any_value ? (uint32_t)(FV_HEADER + b->values.len) : 0;
    be32(fv + 1, (uint32_t)b->values.len);
    if (fsize)
        bloom_build(b, log->bloom, fsize);
    chunk_header h = {
        .type = STREAM_CHUNK_USER, .num_entries = (uint16_t)b->entries, .num_records = b->records,
        .timestamp = timestamp_ms, .epoch = log->cfg.epoch,
        .crc = stream_crc32(stream_crc32(0, NULL, 0), b->data.p, b->data.len),
        .data_len = (uint32_t)b->data.len, .trailer_len = values + (uint32_t)b->tracking.len,
        .filter_size = (uint8_t)fsize,
    };
    struct iovec iov[6] = {
        [1] = {log->bloom, fsize},
        [2] = {b->data.p, b->data.len},
        [3] = {fv, values ? FV_HEADER : 0},
        [4] = {b->values.p, values ? b->values.len : 0},
        [5] = {b->tracking.p, b->tracking.len},
    };
    stream_status st = write_chunk(log, &h, iov, 6);
    if (st != STREAM_OK)
        return st;
    if (first_offset)
        *first_offset = h.chunk_id;
    stream_builder_reset(b);
    return STREAM_OK;
}

stream_status stream_append_tracking(stream_log *log, stream_chunk_type type, const void *data,
                                     size_t len, int64_t timestamp_ms)
{
    if (type == STREAM_CHUNK_USER || type > STREAM_CHUNK_TRACKING_SNAPSHOT || len > STREAM_CHUNK_DATA_MAX - 4)
        return STREAM_EINVAL;
    uint8_t size[4];
    be32(size, (uint32_t)len); /* one simple entry */
    uint32_t crc = stream_crc32(stream_crc32(0, NULL, 0), size, 4);
    chunk_header h = {.type = (uint8_t)type, .num_entries = 1, .num_records = 1,
                      .timestamp = timestamp_ms, .epoch = log->cfg.epoch,
                      .crc = stream_crc32(crc, data, len), .data_len = (uint32_t)(4 + len)};
    struct iovec iov[3] = {[1] = {size, 4}, [2] = {(void *)data, len}};
    return write_chunk(log, &h, iov, 3);
}

stream_status stream_sync_prepare(stream_log *log, stream_sync_ticket *t)
{
    const segment *s = &log->segs[log->nsegs - 1];
    *t = (stream_sync_ticket){.fd = -1, .idx_fd = -1, .offset = log->next_offset,
                              .chunk_id = log->last_chunk_id, .segment = s->first_id, .size = s->size};
    if (log->committed_offset == log->next_offset)
        return STREAM_OK;
    /* duplicates: a roll may close the log's own descriptors meanwhile */
    t->fd = dup(log->fd);
    t->idx_fd = dup(log->idx_fd);
    if (t->fd < 0 || t->idx_fd < 0) {
        stream_sync_run(t);
        return STREAM_EIO;
    }
    return STREAM_OK;
}

stream_status stream_sync_run(stream_sync_ticket *t)
{
    bool ok = t->fd < 0 || (fdatasync(t->fd) == 0 && fdatasync(t->idx_fd) == 0);
    if (t->fd >= 0)
        close(t->fd);
    if (t->idx_fd >= 0)
        close(t->idx_fd);
    t->fd = t->idx_fd = -1;
    return ok ? STREAM_OK : STREAM_EIO;
}

void stream_sync_complete(stream_log *log, const stream_sync_ticket *t)
{
    if (t->offset <= log->committed_offset)
        return;
    log->committed_offset = t->offset;
    log->committed_chunk_id = t->chunk_id;
    /* a roll since then synced the segment it left; the bound is the
     * active segment's */
    const segment *s = &log->segs[log->nsegs - 1];
    if (s->first_id == t->segment && t->size > log->synced_size)
        log->synced_size = t->size;
}

stream_status stream_sync(stream_log *log)
{
    stream_sync_ticket t;
    stream_status st = stream_sync_prepare(log, &t);
    if (st == STREAM_OK)
        st = stream_sync_run(&t);
    if (st == STREAM_OK)
        stream_sync_complete(log, &t);
    return st;
}
