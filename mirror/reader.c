/* A reader: a fuzzy snapshot of the data directory, then the log.
 *
 * mirror_reader_new, under the mirror's lock, lists the directory (pre-
 * order: a directory before what it holds), opens every regular file and
 * attaches to the log at its end. mirror_reader_next then hands out,
 * without the lock:
 *
 *   BEGIN -> ENTRIES (MKDIR per directory; FILE + WRITEs per file, read
 *   with pread from the kept descriptor up to its size when reached) ->
 *   META (the image, in parts) -> END -> LOG (frames copied from the log
 *   under the lock)
 *
 * Contents read after the listing may already hold later writes; the log
 * repeats those (and every later truncate, rename, unlink) in order, so
 * the replica ends with the leader's bytes. Every frame goes through the
 * reader's own buffer: what next returns stays valid whatever the log
 * frees meanwhile. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mirror_int.h"

typedef struct snap_entry {
    char *path; /* relative */
    int fd;     /* -1: a directory */
    mode_t mode;
} snap_entry;

typedef enum phase { PH_BEGIN, PH_ENTRIES, PH_META, PH_END, PH_LOG } phase;

struct mirror_reader {
    mirror *m;
    log_hold hold;
    phase phase;
    uint64_t epoch;
    uint8_t *meta;
    size_t meta_len, meta_off;
    snap_entry *ents;
    size_t n_ents, cap_ents, n_files, i_ent;
    bool file_started;
    uint64_t file_off, file_size;
    uint8_t *buf; /* what next hands out */
    size_t len, cap;
    int err; /* a snapshot read failed: MIRROR_ERROR from now on */
};

static int add_entry(mirror_reader *r, const char *path, int fd, mode_t mode)
{
    if (r->n_ents == r->cap_ents) {
        size_t cap = r->cap_ents ? 2 * r->cap_ents : 64;
        snap_entry *e = realloc(r->ents, cap * sizeof *e);
        if (!e)
            return -1;
        r->ents = e;
        r->cap_ents = cap;
    }
    char *p = strdup(path);
    if (!p)
        return -1;
    r->ents[r->n_ents++] = (snap_entry){p, fd, mode & 07777};
    return 0;
}

static int list_dir(mirror_reader *r, int dfd, const char *prefix);

/* One directory entry `name` of dfd; `rel` its relative path. */
static int list_entry(mirror_reader *r, int dfd, const char *name, const char *rel)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : -1; /* changed by someone not using the mirror */
    if (S_ISDIR(st.st_mode)) {
        int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            return errno == ENOENT ? 0 : -1;
        if (add_entry(r, rel, -1, st.st_mode) != 0) {
            close(sub);
            return -1;
        }
        return list_dir(r, sub, rel);
    }
    if (!S_ISREG(st.st_mode))
        return 0; /* sockets, symlinks: not the broker's data */
    if (r->n_files == SNAP_MAX_FILES) {
        errno = EMFILE;
        return -1;
    }
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    if (add_entry(r, rel, fd, st.st_mode) != 0) {
        close(fd);
        return -1;
    }
    r->n_files++;
    return 0;
}

/* Lists the directory open as dfd (closed here); prefix: its relative
 * path, "" at the top. */
static int list_dir(mirror_reader *r, int dfd, const char *prefix)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    char rel[PATH_MAX];
    while (rc == 0 && (errno = 0, de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (!strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        if (!*prefix && mirror_is_meta_file(name, strlen(name)))
            continue;
        int n = snprintf(rel, sizeof rel, "%s%s%s", prefix, *prefix ? "/" : "", name);
        if (n < 0 || (size_t)n >= sizeof rel) {
            errno = ENAMETOOLONG;
            rc = -1;
            break;
        }
        rc = list_entry(r, dirfd(d), name, rel);
    }
    if (rc == 0 && errno != 0)
        rc = -1;
    int e = errno;
    closedir(d);
    errno = e;
    return rc;
}

static void free_entries(mirror_reader *r)
{
    for (size_t i = 0; i < r->n_ents; i++) {
        if (r->ents[i].fd >= 0)
            close(r->ents[i].fd);
        free(r->ents[i].path);
    }
    free(r->ents);
}

mirror_reader *mirror_reader_new(mirror *m, uint64_t epoch, const void *meta_image,
                                 size_t meta_len)
{
    mirror_reader *r = calloc(1, sizeof *r);
    if (!r || (meta_len && !(r->meta = malloc(meta_len)))) {
        free(r);
        errno = ENOMEM;
        return NULL;
    }
    r->m = m;
    r->hold.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->hold.wake_fd < 0) {
        free(r->meta);
        free(r);
        return NULL;
    }
    r->epoch = epoch;
    if (meta_len)
        memcpy(r->meta, meta_image, meta_len);
    r->meta_len = meta_len;
    pthread_mutex_lock(&m->lock);
    int top = open(m->dir_len ? m->dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = top < 0 ? -1 : list_dir(r, top, "");
    if (rc == 0)
        log_attach(m, &r->hold);
    int e = errno;
    pthread_mutex_unlock(&m->lock);
    if (rc != 0) {
        free_entries(r);
        close(r->hold.wake_fd);
        free(r->meta);
        free(r);
        errno = e;
        return NULL;
    }
    return r;
}

void mirror_reader_free(mirror_reader *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->m->lock);
    log_detach(r->m, &r->hold);
    pthread_mutex_unlock(&r->m->lock);
    free_entries(r);
    close(r->hold.wake_fd);
    free(r->meta);
    free(r->buf);
    free(r);
}

int mirror_reader_wait_fd(const mirror_reader *r)
{
    return r->hold.wake_fd;
}

bool mirror_reader_caught_up(const mirror_reader *r)
{
    return r->phase == PH_LOG;
}

/* Starts a frame of `type` with `fixed_len` bytes of fields to follow and
 * `data_len` of data after them; returns where the fields go. */
static uint8_t *frame(mirror_reader *r, frame_type type, size_t fixed_len, size_t data_len)
{
    uint8_t *p = r->buf + r->len;
    p = put_u32(p, (uint32_t)(1 + fixed_len + data_len));
    *p++ = (uint8_t)type;
    r->len += FRAME_HEAD + fixed_len + data_len;
    return p;
}

static uint8_t *path_field(uint8_t *p, const char *path)
{
    size_t n = strlen(path);
    p = put_u16(p, (uint16_t)n);
    memcpy(p, path, n);
    return p + n;
}

/* The next frame of the current entry; false: a read failed (errno). */
static bool entry_frame(mirror_reader *r)
{
    snap_entry *e = &r->ents[r->i_ent];
    size_t plen = 2 + strlen(e->path);
    if (e->fd < 0 || !r->file_started) {
        uint8_t *p = frame(r, e->fd < 0 ? FRAME_MKDIR : FRAME_FILE, plen + 4, 0);
        put_u32(path_field(p, e->path), (uint32_t)e->mode);
        if (e->fd < 0) {
            r->i_ent++;
            return true;
        }
        struct stat st;
        if (fstat(e->fd, &st) != 0)
            return false;
        r->file_started = true;
        r->file_off = 0;
        r->file_size = (uint64_t)st.st_size;
        return true;
    }
    uint64_t left = r->file_size - r->file_off;
    size_t want = left < FRAME_DATA_MAX ? (size_t)left : FRAME_DATA_MAX;
    ssize_t got = want ? pread(e->fd, r->buf + r->len + FRAME_HEAD + plen + 8, want, (off_t)r->file_off) : 0;
    if (got < 0)
        return false;
    if (got == 0) { /* the whole size, or truncated since: the log has the rest */
        close(e->fd);
        e->fd = -2;
        r->i_ent++;
        r->file_started = false;
        return true;
    }
    uint8_t *p = frame(r, FRAME_WRITE, plen + 8, (size_t)got);
    put_u64(path_field(p, e->path), r->file_off);
    r->file_off += (uint64_t)got;
    return true;
}

/* Snapshot frames into buf until `max`; false: a read failed. */
static bool snapshot_frames(mirror_reader *r, size_t max)
{
    while (r->len < max && r->phase != PH_LOG) {
        switch (r->phase) {
        case PH_BEGIN:
            put_u64(frame(r, FRAME_SNAP_BEGIN, 8, 0), r->epoch);
            r->phase = PH_ENTRIES;
            break;
        case PH_ENTRIES:
            if (r->i_ent == r->n_ents)
                r->phase = PH_META;
            else if (!entry_frame(r))
                return false;
            break;
        case PH_META: {
            size_t n = r->meta_len - r->meta_off < FRAME_DATA_MAX ? r->meta_len - r->meta_off : FRAME_DATA_MAX;
            bool last = r->meta_off + n == r->meta_len;
            uint8_t *p = frame(r, last ? FRAME_META_IMAGE : FRAME_META_IMAGE_MORE, 0, n);
            if (n)
                memcpy(p, r->meta + r->meta_off, n);
            r->meta_off += n;
            if (last)
                r->phase = PH_END;
            break;
        }
        case PH_END:
            frame(r, FRAME_SNAP_END, 0, 0);
            r->phase = PH_LOG;
            break;
        case PH_LOG:
            break;
        }
    }
    return true;
}

mirror_read_status mirror_reader_next(mirror_reader *r, size_t max, const uint8_t **out,
                                      size_t *len)
{
    *out = NULL;
    *len = 0;
    if (r->err) {
        errno = r->err;
        return MIRROR_ERROR;
    }
    if (max == 0)
        max = 1;
    if (r->cap < max + FRAME_LOG_MAX) {
        uint8_t *b = realloc(r->buf, max + FRAME_LOG_MAX);
        if (!b) {
            errno = ENOMEM;
            return MIRROR_ERROR; /* transient: err stays 0 */
        }
        r->buf = b;
        r->cap = max + FRAME_LOG_MAX;
    }
    r->len = 0;
    if (!snapshot_frames(r, max)) {
        r->err = errno ? errno : EIO;
        return MIRROR_ERROR;
    }
    mirror *m = r->m;
    pthread_mutex_lock(&m->lock);
    if (r->hold.cut) {
        pthread_mutex_unlock(&m->lock);
        return MIRROR_CUT;
    }
    log_looking(m, &r->hold);
    if (r->phase == PH_LOG && r->len < max)
        r->len += log_copy(m, &r->hold, r->buf + r->len, max - r->len);
    bool idle = r->len == 0;
    if (idle != r->hold.idle) {
        r->hold.idle = idle;
        if (idle)
            m->idle_readers++;
        else
            m->idle_readers--;
    }
    pthread_mutex_unlock(&m->lock);
    if (idle)
        return MIRROR_IDLE;
    *out = r->buf;
    *len = r->len;
    return MIRROR_DATA;
}
