/* The recording side: file operations performed and appended to the log.
 *
 * The log is a list of chunks (LOG_CHUNK bytes, or one frame's size when
 * larger) holding whole frames; a log position counts bytes since the
 * mirror began. Every attached reader holds its position: chunks wholly
 * before the lowest are freed. With no reader attached nothing is stored
 * (mirror_wrote does not even take the lock); a reader that falls
 * max_log bytes behind the end is cut and detached, so recorders never
 * wait for a reader. Allocation failure cuts every reader: each must
 * start again from a snapshot, and the leader goes on.
 *
 * Namespace operations run under the lock, so a reader's listing (also
 * under it) sees each either done or not yet, and in the latter case
 * after its start position in the log. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mirror_int.h"

mirror *mirror_new(const char *data_dir, size_t max_log_bytes)
{
    mirror *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->dir = strdup(data_dir);
    m->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!m->dir || m->wake_fd < 0 || pthread_mutex_init(&m->lock, NULL) != 0) {
        if (m->wake_fd >= 0)
            close(m->wake_fd);
        free(m->dir);
        free(m);
        return NULL;
    }
    m->dir_len = strlen(m->dir);
    while (m->dir_len > 0 && m->dir[m->dir_len - 1] == '/')
        m->dir[--m->dir_len] = '\0';
    m->max_log = max_log_bytes;
    atomic_init(&m->n_readers, 0);
    atomic_init(&m->last_synced, 0);
    return m;
}

/* A chunk no reader needs: kept for reuse while few are. */
static void drop_chunk(mirror *m, log_chunk *c)
{
    if (c->cap == LOG_CHUNK && m->n_spare < LOG_SPARE) {
        c->next = m->spare;
        m->spare = c;
        m->n_spare++;
    } else {
        free(c);
    }
}

static void free_chunks(mirror *m)
{
    while (m->head) {
        log_chunk *c = m->head;
        m->head = c->next;
        drop_chunk(m, c);
    }
    m->tail = NULL;
}

void mirror_free(mirror *m)
{
    if (!m)
        return;
    free_chunks(m);
    while (m->spare) {
        log_chunk *c = m->spare;
        m->spare = c->next;
        free(c);
    }
    pthread_mutex_destroy(&m->lock);
    close(m->wake_fd);
    free(m->dir);
    free(m);
}

int mirror_wait_fd(mirror *m)
{
    return m->wake_fd;
}

uint64_t mirror_last_synced(mirror *m)
{
    return m ? atomic_load(&m->last_synced) : 0;
}

size_t mirror_log_bytes(mirror *m)
{
    if (!m)
        return 0;
    pthread_mutex_lock(&m->lock);
    size_t n = m->head ? (size_t)(m->end - m->head->start) : 0;
    pthread_mutex_unlock(&m->lock);
    return n;
}

bool mirror_is_meta_file(const char *name, size_t len)
{
    size_t n = strlen(META_FILE);
    if (len < n || memcmp(name, META_FILE, n) != 0)
        return false;
    const char *rest = name + n;
    size_t left = len - n;
    return left == 0 || (left == 4 && (!memcmp(rest, "-wal", 4) || !memcmp(rest, "-shm", 4))) ||
           (left == 8 && !memcmp(rest, "-journal", 8));
}

const char *mirror_relative(const mirror *m, const char *path)
{
    if (strncmp(path, m->dir, m->dir_len) != 0 || path[m->dir_len] != '/')
        return NULL;
    const char *rel = path + m->dir_len;
    while (*rel == '/')
        rel++;
    return *rel && strlen(rel) < PATH_MAX ? rel : NULL;
}

/* ---- readers' holds ---- */

static void signal_fd(int fd)
{
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof one);
    (void)n; /* EAGAIN: the counter is already non-zero, readers wake anyway */
}

static void unlink_hold(mirror *m, log_hold *h)
{
    for (log_hold **p = &m->readers; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    if (h->idle)
        m->idle_readers--;
    h->attached = h->idle = false;
    atomic_fetch_sub(&m->n_readers, 1);
}

/* Frees the chunks no attached reader needs any more. */
static void trim(mirror *m)
{
    if (!m->readers) {
        free_chunks(m);
        return;
    }
    uint64_t low = m->end;
    for (log_hold *h = m->readers; h; h = h->next)
        if (h->pos < low)
            low = h->pos;
    while (m->head && m->head->start + m->head->used <= low && m->head->next) {
        log_chunk *c = m->head;
        m->head = c->next;
        drop_chunk(m, c);
    }
    if (m->head && m->head->start + m->head->used <= low) { /* the last one, read by all */
        drop_chunk(m, m->head);
        m->head = m->tail = NULL;
    }
}


/* Cut readers are woken to learn it (they may be waiting). */
static void cut(mirror *m, log_hold *h)
{
    unlink_hold(m, h);
    h->cut = true;
    signal_fd(h->wake_fd);
    signal_fd(m->wake_fd);
}

/* Cuts the readers further behind than the bound, then trims. */
static void enforce(mirror *m)
{
    for (;;) {
        log_hold *low = NULL;
        for (log_hold *h = m->readers; h; h = h->next)
            if (!low || h->pos < low->pos)
                low = h;
        if (!low || m->end - low->pos <= m->max_log)
            break;
        cut(m, low);
    }
    trim(m);
}

void log_attach(mirror *m, log_hold *h)
{
    h->pos = m->end;
    h->attached = true;
    h->cut = h->idle = h->signalled = false;
    h->next = m->readers;
    m->readers = h;
    atomic_fetch_add(&m->n_readers, 1);
}

void log_detach(mirror *m, log_hold *h)
{
    if (h->attached)
        unlink_hold(m, h);
    trim(m);
}

/* Room for a frame of `size` bytes at the log's end, or NULL (every reader
 * is cut: they could not get this frame). */
static uint8_t *reserve(mirror *m, size_t size)
{
    log_chunk *c = m->tail;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > LOG_CHUNK ? size : LOG_CHUNK;
        if (cap == LOG_CHUNK && m->spare) {
            c = m->spare;
            m->spare = c->next;
            m->n_spare--;
        } else {
            c = malloc(sizeof *c + cap);
        }
        if (!c) {
            while (m->readers)
                cut(m, m->readers);
            trim(m);
            return NULL;
        }
        c->next = NULL;
        c->start = m->end;
        c->used = 0;
        c->cap = cap;
        if (m->tail)
            m->tail->next = c;
        else
            m->head = c;
        m->tail = c;
    }
    uint8_t *p = c->data + c->used;
    c->used += size;
    m->end += size;
    return p;
}

/* One eventfd write per idle spell, not per record: until a reader calls
 * next again, more records add nothing to wake it for. */
static void wake(mirror *m)
{
    if (!m->idle_readers)
        return;
    if (!m->signalled) {
        m->signalled = true;
        signal_fd(m->wake_fd);
    }
    for (log_hold *h = m->readers; h; h = h->next)
        if (h->idle && !h->signalled) {
            h->signalled = true;
            signal_fd(h->wake_fd);
        }
}

void log_looking(mirror *m, log_hold *h)
{
    m->signalled = false;
    h->signalled = false;
}

/* A frame: the head, `fixed` (encoded fields), then `data_len` bytes
 * gathered from iov from byte `skip` on. Under the lock, with readers. */
static void append(mirror *m, frame_type type, const uint8_t *fixed, size_t fixed_len,
                   const struct iovec *iov, size_t skip, size_t data_len)
{
    size_t size = FRAME_HEAD + fixed_len + data_len;
    uint8_t *p = reserve(m, size);
    if (!p)
        return;
    p = put_u32(p, (uint32_t)(size - 4));
    *p++ = (uint8_t)type;
    memcpy(p, fixed, fixed_len);
    p += fixed_len;
    while (data_len) {
        while (skip >= iov->iov_len) {
            skip -= iov->iov_len;
            iov++;
        }
        size_t n = iov->iov_len - skip < data_len ? iov->iov_len - skip : data_len;
        memcpy(p, (const uint8_t *)iov->iov_base + skip, n);
        p += n;
        skip += n;
        data_len -= n;
    }
}

static size_t put_path(uint8_t *p, const char *rel)
{
    size_t n = strlen(rel);
    put_u16(p, (uint16_t)n);
    memcpy(p + 2, rel, n);
    return n + 2;
}

/* Records a frame of one or two paths and an optional u32/u64 field. */
static void record(mirror *m, frame_type type, const char *rel, const char *rel2, int width,
                   uint64_t v)
{
    uint8_t fixed[2 * (2 + PATH_MAX) + 8];
    size_t n = put_path(fixed, rel);
    if (rel2)
        n += put_path(fixed + n, rel2);
    if (width == 4)
        n = (size_t)(put_u32(fixed + n, (uint32_t)v) - fixed);
    else if (width == 8)
        n = (size_t)(put_u64(fixed + n, v) - fixed);
    append(m, type, fixed, n, NULL, 0, 0);
    enforce(m);
    wake(m);
}

/* Records `len` bytes in frames of at most FRAME_DATA_MAX: WRITE frames
 * at the offset they go to, or metadata parts (`more` for all but the
 * last). */
static void record_data(mirror *m, frame_type type, frame_type more, const char *rel,
                        uint64_t offset, const struct iovec *iov, int iovcnt)
{
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    uint8_t fixed[2 + PATH_MAX + 8];
    size_t done = 0;
    do {
        size_t n = total - done < FRAME_DATA_MAX ? total - done : FRAME_DATA_MAX;
        size_t fl = 0;
        if (rel) {
            fl = put_path(fixed, rel);
            put_u64(fixed + fl, offset + done);
            fl += 8;
        }
        append(m, done + n < total ? more : type, fixed, fl, iov, done, n);
        done += n;
        if (!m->readers)
            break; /* cut (allocation failed): nobody to record for */
    } while (done < total);
    enforce(m);
    wake(m);
}

/* ---- recording ---- */

int mirror_open(mirror *m, const char *path, int flags, mode_t mode)
{
    const char *rel = m ? mirror_relative(m, path) : NULL;
    if (!rel)
        return open(path, flags, mode);
    pthread_mutex_lock(&m->lock);
    int fd = open(path, flags, mode);
    if (fd >= 0 && m->readers && (flags & O_CREAT))
        record(m, FRAME_CREATE, rel, NULL, 4, mode & 07777);
    if (fd >= 0 && m->readers && (flags & O_TRUNC))
        record(m, FRAME_TRUNCATE, rel, NULL, 8, 0);
    pthread_mutex_unlock(&m->lock);
    return fd;
}

int mirror_rename(mirror *m, const char *from, const char *to)
{
    const char *rf = m ? mirror_relative(m, from) : NULL, *rt = m ? mirror_relative(m, to) : NULL;
    if (!rf || !rt)
        return rename(from, to);
    pthread_mutex_lock(&m->lock);
    int rc = rename(from, to);
    if (rc == 0 && m->readers)
        record(m, FRAME_RENAME, rf, rt, 0, 0);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* unlink, mkdir and rmdir: one path, performed and recorded under the lock. */
static int path_op(mirror *m, const char *path, frame_type type, mode_t mode)
{
    const char *rel = m ? mirror_relative(m, path) : NULL;
    if (rel)
        pthread_mutex_lock(&m->lock);
    int rc = type == FRAME_UNLINK ? unlink(path) : type == FRAME_MKDIR ? mkdir(path, mode) : rmdir(path);
    if (rel) {
        int e = errno;
        if (rc == 0 && m->readers)
            record(m, type, rel, NULL, type == FRAME_MKDIR ? 4 : 0, mode & 07777);
        pthread_mutex_unlock(&m->lock);
        errno = e;
    }
    return rc;
}

int mirror_unlink(mirror *m, const char *path)
{
    return path_op(m, path, FRAME_UNLINK, 0);
}

int mirror_mkdir(mirror *m, const char *path, mode_t mode)
{
    return path_op(m, path, FRAME_MKDIR, mode);
}

int mirror_rmdir(mirror *m, const char *path)
{
    return path_op(m, path, FRAME_RMDIR, 0);
}

int mirror_ftruncate(mirror *m, int fd, const char *path, uint64_t length)
{
    const char *rel = m ? mirror_relative(m, path) : NULL;
    if (!rel)
        return ftruncate(fd, (off_t)length);
    pthread_mutex_lock(&m->lock);
    int rc = ftruncate(fd, (off_t)length);
    int e = errno;
    if (rc == 0 && m->readers)
        record(m, FRAME_TRUNCATE, rel, NULL, 8, length);
    pthread_mutex_unlock(&m->lock);
    errno = e;
    return rc;
}

void mirror_wrote(mirror *m, const char *path, uint64_t offset, const struct iovec *iov,
                  int iovcnt)
{
    /* No reader: nothing to copy. One attaching meanwhile lists the
     * directory after these bytes reached the file, so its snapshot has
     * them. */
    if (!m || atomic_load(&m->n_readers) == 0)
        return;
    const char *rel = mirror_relative(m, path);
    if (!rel)
        return;
    pthread_mutex_lock(&m->lock);
    if (m->readers)
        record_data(m, FRAME_WRITE, FRAME_WRITE, rel, offset, iov, iovcnt);
    pthread_mutex_unlock(&m->lock);
}

void mirror_synced(mirror *m, uint64_t seq)
{
    if (!m)
        return;
    atomic_store(&m->last_synced, seq);
    if (atomic_load(&m->n_readers) == 0)
        return;
    pthread_mutex_lock(&m->lock);
    if (m->readers) {
        uint8_t fixed[8];
        put_u64(fixed, seq);
        append(m, FRAME_SYNCED, fixed, sizeof fixed, NULL, 0, 0);
        enforce(m);
        wake(m);
    }
    pthread_mutex_unlock(&m->lock);
}

void mirror_meta_changes(mirror *m, const void *changeset, size_t len)
{
    if (!m || atomic_load(&m->n_readers) == 0)
        return;
    struct iovec iov = {(void *)changeset, len};
    pthread_mutex_lock(&m->lock);
    if (m->readers)
        record_data(m, FRAME_META_CHANGES, FRAME_META_CHANGES_MORE, NULL, 0, &iov, 1);
    pthread_mutex_unlock(&m->lock);
}

/* ---- reading the log ---- */

static const log_chunk *chunk_at(const mirror *m, uint64_t pos)
{
    for (const log_chunk *c = m->head; c; c = c->next)
        if (pos < c->start + c->used)
            return c;
    return NULL;
}

size_t log_pending(const mirror *m, const log_hold *h)
{
    return h->attached ? (size_t)(m->end - h->pos) : 0;
}

size_t log_copy(mirror *m, log_hold *h, uint8_t *out, size_t max)
{
    size_t copied = 0;
    const log_chunk *c = h->attached ? chunk_at(m, h->pos) : NULL;
    while (c && copied < max) {
        size_t off = (size_t)(h->pos - c->start);
        if (off == c->used) {
            c = c->next;
            continue;
        }
        size_t flen = 4 + get_u32(c->data + off);
        memcpy(out + copied, c->data + off, flen);
        copied += flen;
        h->pos += flen;
    }
    trim(m);
    return copied;
}
