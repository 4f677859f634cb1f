/* The applying side: frames parsed from any split of the stream and
 * repeated under the follower's data directory.
 *
 * State: NONE -(SNAP_BEGIN)-> SNAPSHOT -(SNAP_END)-> LOG; a SNAP_BEGIN in
 * any state starts over. Nothing but SNAP_BEGIN is taken before the first
 * snapshot, so the directory has been emptied (of all but the follower's
 * own metadata.db*) before anything is written: no path met afterwards is
 * a symlink, as frames make none, and the last component is opened with
 * O_NOFOLLOW anyway. Every path is relative, without empty, "." or ".."
 * components, and never names metadata.db*; all calls are *at() calls on
 * the directory's descriptor.
 *
 * A WRITE or TRUNCATE to a missing file is skipped: by the snapshot
 * argument (mirror.h) every file the leader writes exists here when its
 * write arrives, unless the leader unlinked it before the write was
 * recorded -- then the leader does not have those bytes either, and
 * creating the file would leave one it lacks. Likewise a RENAME of a
 * missing source.
 *
 * Files written since the last SYNCED stay in a small descriptor cache
 * (dirty); the mark fdatasyncs them and fsyncs the directories whose
 * entries changed. A dirty file leaving the cache is fdatasynced first;
 * an unlinked or replaced one is just closed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mirror_int.h"

#define CACHE_FDS 16

typedef enum rstate { ST_NONE, ST_SNAPSHOT, ST_LOG } rstate;

typedef struct cached_fd {
    char *path; /* NULL: free slot */
    int fd;
    bool dirty;
} cached_fd;

struct mirror_replica {
    int dfd;
    mirror_replica_handlers h;
    void *ctx;
    rstate state;
    mirror_apply_status failed;
    uint8_t *pend; /* a partial frame: its length field and what came of it */
    size_t pend_len, pend_cap;
    cached_fd cache[CACHE_FDS];
    unsigned next_evict;
    char **dirs; /* directories whose entries changed since the last mark ("" the top) */
    size_t n_dirs, cap_dirs;
    uint8_t *meta; /* metadata parts joined */
    size_t meta_len, meta_cap;
    int meta_type; /* FRAME_META_IMAGE or FRAME_META_CHANGES while parts come, else 0 */
    bool mark_due; /* a sync mark came in this feed: synced once at its end */
    uint64_t mark_seq;
    char err[256];
};

static mirror_apply_status fail(mirror_replica *r, mirror_apply_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    r->failed = st;
    return st;
}

static mirror_apply_status io_fail(mirror_replica *r, const char *what, const char *path)
{
    int e = errno;
    fail(r, MIRROR_IO_FAILED, "%s %s: %s", what, path, strerror(e));
    errno = e;
    return MIRROR_IO_FAILED;
}

mirror_replica *mirror_replica_new(const char *data_dir, const mirror_replica_handlers *h,
                                   void *ctx)
{
    mirror_replica *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->dfd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (r->dfd < 0) {
        free(r);
        return NULL;
    }
    r->h = *h;
    r->ctx = ctx;
    return r;
}

/* ---- the descriptor cache ---- */

/* Closes a cached descriptor; `sync`: fdatasync it first when dirty
 * (-1 with errno when that fails; it is closed anyway). */
static int cache_drop(cached_fd *c, bool sync)
{
    int rc = sync && c->dirty ? fdatasync(c->fd) : 0;
    int e = errno;
    close(c->fd);
    free(c->path);
    c->path = NULL;
    errno = e;
    return rc;
}

static void cache_clear(mirror_replica *r)
{
    for (int i = 0; i < CACHE_FDS; i++)
        if (r->cache[i].path)
            cache_drop(&r->cache[i], false);
}

static void dirs_clear(mirror_replica *r)
{
    for (size_t i = 0; i < r->n_dirs; i++)
        free(r->dirs[i]);
    r->n_dirs = 0;
}

void mirror_replica_free(mirror_replica *r)
{
    if (!r)
        return;
    cache_clear(r);
    dirs_clear(r);
    free(r->dirs);
    close(r->dfd);
    free(r->pend);
    free(r->meta);
    free(r);
}

const char *mirror_replica_error(const mirror_replica *r)
{
    return r->err[0] ? r->err : "no error";
}

static cached_fd *cache_find(mirror_replica *r, const char *path)
{
    for (int i = 0; i < CACHE_FDS; i++)
        if (r->cache[i].path && !strcmp(r->cache[i].path, path))
            return &r->cache[i];
    return NULL;
}

/* The cached descriptor of `path`, opened with `flags` when not cached;
 * NULL with errno (ENOENT: the file does not exist). */
static cached_fd *cache_open(mirror_replica *r, const char *path, int flags, mode_t mode)
{
    cached_fd *c = cache_find(r, path);
    if (c && !(flags & O_TRUNC))
        return c;
    if (c)
        cache_drop(c, false); /* truncated now: reopen */
    int fd = openat(r->dfd, path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | flags, mode);
    if (fd < 0)
        return NULL;
    char *key = strdup(path);
    if (!key) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    c = NULL;
    for (int i = 0; i < CACHE_FDS && !c; i++)
        if (!r->cache[i].path)
            c = &r->cache[i];
    if (!c) {
        c = &r->cache[r->next_evict++ % CACHE_FDS];
        if (cache_drop(c, true) != 0) {
            close(fd);
            free(key);
            errno = EIO;
            return NULL;
        }
    }
    *c = (cached_fd){key, fd, false};
    return c;
}

/* Whether `path` is `dir` or under it; the rest after dir in *rest. */
static bool under(const char *path, const char *dir, const char **rest)
{
    size_t n = strlen(dir);
    if (strncmp(path, dir, n) != 0 || (path[n] != '\0' && path[n] != '/'))
        return false;
    *rest = path + n;
    return true;
}

/* Renames *key when it is `from` or under it; false on OOM. */
static bool rekey(char **key, const char *from, const char *to)
{
    const char *rest;
    if (!under(*key, from, &rest))
        return true;
    size_t n = strlen(to) + strlen(rest) + 1;
    char *k = malloc(n);
    if (!k)
        return false;
    snprintf(k, n, "%s%s", to, rest);
    free(*key);
    *key = k;
    return true;
}

/* ---- directories to fsync at the mark ---- */

static bool dir_changed(mirror_replica *r, const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    for (size_t i = 0; i < r->n_dirs; i++)
        if (strlen(r->dirs[i]) == n && !strncmp(r->dirs[i], path, n))
            return true;
    if (r->n_dirs == r->cap_dirs) {
        size_t cap = r->cap_dirs ? 2 * r->cap_dirs : 16;
        char **d = realloc(r->dirs, cap * sizeof *d);
        if (!d)
            return false;
        r->dirs = d;
        r->cap_dirs = cap;
    }
    char *d = strndup(path, n);
    if (!d)
        return false;
    r->dirs[r->n_dirs++] = d;
    return true;
}

static mirror_apply_status sync_all(mirror_replica *r)
{
    for (int i = 0; i < CACHE_FDS; i++) {
        cached_fd *c = &r->cache[i];
        if (c->path && c->dirty) {
            if (fdatasync(c->fd) != 0)
                return io_fail(r, "fdatasync", c->path);
            c->dirty = false;
        }
    }
    for (size_t i = 0; i < r->n_dirs; i++) {
        int fd = openat(r->dfd, *r->dirs[i] ? r->dirs[i] : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
            continue; /* removed since: its parent is in the list */
        if (fd < 0 || fsync(fd) != 0) {
            if (fd >= 0)
                close(fd);
            return io_fail(r, "fsync", r->dirs[i]);
        }
        close(fd);
    }
    dirs_clear(r);
    return MIRROR_APPLIED;
}

/* ---- emptying the directory for a snapshot ---- */

static int empty_dir(int dfd, bool top)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (!strcmp(name, ".") || !strcmp(name, "..") || (top && mirror_is_meta_file(name, strlen(name))))
            continue;
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = sub < 0 ? -1 : empty_dir(sub, false);
            if (sub >= 0)
                close(sub);
            if (rc == 0)
                rc = unlinkat(dfd, name, AT_REMOVEDIR);
        } else {
            rc = unlinkat(dfd, name, 0);
        }
    }
    int e = errno;
    closedir(d);
    errno = e;
    return rc;
}

/* ---- frame fields ---- */

typedef struct cursor {
    const uint8_t *p;
    size_t left;
} cursor;

static bool take_u32(cursor *c, uint32_t *v)
{
    if (c->left < 4)
        return false;
    *v = get_u32(c->p);
    c->p += 4;
    c->left -= 4;
    return true;
}

static bool take_u64(cursor *c, uint64_t *v)
{
    if (c->left < 8)
        return false;
    *v = get_u64(c->p);
    c->p += 8;
    c->left -= 8;
    return true;
}

/* A path field into out (PATH_MAX): relative, no empty, "." or ".."
 * components, no NUL, not the metadata's files. */
static bool take_path(cursor *c, char *out)
{
    if (c->left < 2)
        return false;
    size_t n = (size_t)c->p[0] << 8 | c->p[1];
    if (n == 0 || n >= PATH_MAX || n > c->left - 2)
        return false;
    const char *s = (const char *)c->p + 2;
    if (memchr(s, '\0', n))
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '/')
            continue;
        size_t len = i - start;
        if (len == 0 || (len == 1 && s[start] == '.') || (len == 2 && s[start] == '.' && s[start + 1] == '.'))
            return false;
        if (start == 0 && mirror_is_meta_file(s, len))
            return false;
        start = i + 1;
    }
    memcpy(out, s, n);
    out[n] = '\0';
    c->p += 2 + n;
    c->left -= 2 + n;
    return true;
}

/* ---- applying ---- */

static mirror_apply_status bad(mirror_replica *r, int type, const char *why)
{
    return fail(r, MIRROR_BAD_FRAME, "bad frame (type %d): %s", type, why);
}

static mirror_apply_status apply_write(mirror_replica *r, cursor *c, const char *path)
{
    uint64_t off;
    if (!take_u64(c, &off) || off > (uint64_t)INT64_MAX - c->left)
        return bad(r, FRAME_WRITE, "offset");
    cached_fd *f = cache_open(r, path, 0, 0);
    if (!f)
        return errno == ENOENT ? MIRROR_APPLIED : io_fail(r, "open", path);
    while (c->left) {
        ssize_t n = pwrite(f->fd, c->p, c->left, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return io_fail(r, "pwrite", path);
        c->p += n;
        c->left -= (size_t)n;
        off += (uint64_t)n;
    }
    f->dirty = true;
    return MIRROR_APPLIED;
}

static mirror_apply_status apply_rename(mirror_replica *r, const char *from, const char *to)
{
    if (renameat(r->dfd, from, r->dfd, to) != 0)
        return errno == ENOENT ? MIRROR_APPLIED : io_fail(r, "rename", from);
    cached_fd *old = strcmp(from, to) ? cache_find(r, to) : NULL;
    if (old)
        cache_drop(old, false); /* replaced: its inode is gone */
    for (int i = 0; i < CACHE_FDS; i++)
        if (r->cache[i].path && !rekey(&r->cache[i].path, from, to))
            return fail(r, MIRROR_IO_FAILED, "out of memory");
    for (size_t i = 0; i < r->n_dirs; i++)
        if (!rekey(&r->dirs[i], from, to))
            return fail(r, MIRROR_IO_FAILED, "out of memory");
    if (!dir_changed(r, from) || !dir_changed(r, to))
        return fail(r, MIRROR_IO_FAILED, "out of memory");
    return MIRROR_APPLIED;
}

/* Metadata parts: joined until the last, then handed over. */
static mirror_apply_status apply_meta(mirror_replica *r, int type, bool more, cursor *c)
{
    if (r->meta_type && r->meta_type != type)
        return bad(r, type, "metadata parts mixed");
    if (c->left > MIRROR_MAX_META - r->meta_len)
        return bad(r, type, "metadata too large");
    if (r->meta_len + c->left > r->meta_cap) {
        size_t cap = r->meta_cap ? r->meta_cap : 4096;
        while (cap < r->meta_len + c->left)
            cap *= 2;
        uint8_t *b = realloc(r->meta, cap);
        if (!b)
            return fail(r, MIRROR_IO_FAILED, "out of memory");
        r->meta = b;
        r->meta_cap = cap;
    }
    if (c->left)
        memcpy(r->meta + r->meta_len, c->p, c->left);
    r->meta_len += c->left;
    c->left = 0;
    r->meta_type = more ? type : 0;
    if (more)
        return MIRROR_APPLIED;
    bool ok = true;
    if (type == FRAME_META_IMAGE && r->h.meta_image)
        ok = r->h.meta_image(r->ctx, r->meta, r->meta_len);
    else if (type == FRAME_META_CHANGES && r->h.meta_changes)
        ok = r->h.meta_changes(r->ctx, r->meta, r->meta_len);
    r->meta_len = 0;
    return ok ? MIRROR_APPLIED : fail(r, MIRROR_APPLY_FAILED, "the metadata handler refused a %s",
                                      type == FRAME_META_IMAGE ? "snapshot image" : "changeset");
}

static mirror_apply_status snapshot_begin(mirror_replica *r, cursor *c)
{
    uint64_t epoch;
    if (!take_u64(c, &epoch))
        return bad(r, FRAME_SNAP_BEGIN, "epoch");
    cache_clear(r);
    dirs_clear(r);
    r->meta_len = 0;
    r->meta_type = 0;
    if (empty_dir(r->dfd, true) != 0)
        return io_fail(r, "emptying", "the data directory");
    if (!dir_changed(r, ""))
        return fail(r, MIRROR_IO_FAILED, "out of memory");
    r->state = ST_SNAPSHOT;
    if (r->h.snapshot_begin)
        r->h.snapshot_begin(r->ctx, epoch);
    return MIRROR_APPLIED;
}

/* The namespace and data frames (one path first). */
static mirror_apply_status apply_path_op(mirror_replica *r, int type, cursor *c)
{
    char path[PATH_MAX], to[PATH_MAX];
    uint32_t mode = 0;
    uint64_t length = 0;
    if (!take_path(c, path))
        return bad(r, type, "path");
    if (type == FRAME_WRITE)
        return apply_write(r, c, path);
    bool ok = (type == FRAME_FILE || type == FRAME_CREATE || type == FRAME_MKDIR) ? take_u32(c, &mode)
            : type == FRAME_TRUNCATE ? take_u64(c, &length)
            : type == FRAME_RENAME ? take_path(c, to) : true;
    if (!ok || c->left)
        return bad(r, type, "fields");
    if (type != FRAME_TRUNCATE && type != FRAME_RENAME && !dir_changed(r, path))
        return fail(r, MIRROR_IO_FAILED, "out of memory");
    cached_fd *f;
    switch (type) {
    case FRAME_FILE:
    case FRAME_CREATE:
        f = cache_open(r, path, O_CREAT | (type == FRAME_FILE ? O_TRUNC : 0), (mode_t)((mode & 0777) | 0600));
        if (!f)
            return io_fail(r, "create", path);
        f->dirty = true;
        return MIRROR_APPLIED;
    case FRAME_TRUNCATE:
        if (length > (uint64_t)INT64_MAX)
            return bad(r, type, "length");
        f = cache_open(r, path, 0, 0);
        if (!f)
            return errno == ENOENT ? MIRROR_APPLIED : io_fail(r, "open", path);
        if (ftruncate(f->fd, (off_t)length) != 0)
            return io_fail(r, "ftruncate", path);
        f->dirty = true;
        return MIRROR_APPLIED;
    case FRAME_RENAME:
        return apply_rename(r, path, to);
    case FRAME_UNLINK:
        if ((f = cache_find(r, path)))
            cache_drop(f, false);
        return unlinkat(r->dfd, path, 0) == 0 || errno == ENOENT ? MIRROR_APPLIED : io_fail(r, "unlink", path);
    case FRAME_MKDIR:
        return mkdirat(r->dfd, path, (mode_t)((mode & 0777) | 0700)) == 0 || errno == EEXIST ? MIRROR_APPLIED
                                                                                   : io_fail(r, "mkdir", path);
    default: /* FRAME_RMDIR */
        return unlinkat(r->dfd, path, AT_REMOVEDIR) == 0 || errno == ENOENT ? MIRROR_APPLIED
                                                                            : io_fail(r, "rmdir", path);
    }
}

static mirror_apply_status apply(mirror_replica *r, const uint8_t *p, size_t n)
{
    int type = p[0];
    cursor c = {p + 1, n - 1};
    if (type == FRAME_SNAP_BEGIN)
        return snapshot_begin(r, &c);
    if (r->state == ST_NONE)
        return bad(r, type, "before the snapshot");
    if (r->meta_type && type != FRAME_META_IMAGE && type != FRAME_META_IMAGE_MORE &&
        type != FRAME_META_CHANGES && type != FRAME_META_CHANGES_MORE)
        return bad(r, type, "inside metadata parts");
    uint64_t seq;
    switch (type) {
    case FRAME_META_IMAGE:
    case FRAME_META_IMAGE_MORE:
        if (r->state != ST_SNAPSHOT)
            return bad(r, type, "image outside the snapshot");
        return apply_meta(r, FRAME_META_IMAGE, type == FRAME_META_IMAGE_MORE, &c);
    case FRAME_META_CHANGES:
    case FRAME_META_CHANGES_MORE:
        return apply_meta(r, FRAME_META_CHANGES, type == FRAME_META_CHANGES_MORE, &c);
    case FRAME_SNAP_END:
        if (r->state != ST_SNAPSHOT || c.left)
            return bad(r, type, "snapshot end");
        r->state = ST_LOG;
        if (r->h.snapshot_end)
            r->h.snapshot_end(r->ctx);
        return MIRROR_APPLIED;
    case FRAME_SYNCED: /* group commit: the feed's last mark is synced at its end */
        if (!take_u64(&c, &seq) || c.left)
            return bad(r, type, "sequence");
        r->mark_due = true;
        r->mark_seq = seq;
        return MIRROR_APPLIED;
    case FRAME_FILE:
        if (r->state != ST_SNAPSHOT)
            return bad(r, type, "file outside the snapshot");
        return apply_path_op(r, type, &c);
    case FRAME_CREATE:
    case FRAME_WRITE:
    case FRAME_TRUNCATE:
    case FRAME_RENAME:
    case FRAME_UNLINK:
    case FRAME_MKDIR:
    case FRAME_RMDIR:
        return apply_path_op(r, type, &c);
    default:
        return bad(r, type, "unknown type");
    }
}

/* Buffers from data into the partial frame; applies it when whole. */
static size_t feed_partial(mirror_replica *r, const uint8_t *data, size_t len)
{
    size_t want = r->pend_len < 4 ? 4 : 4 + (size_t)get_u32(r->pend);
    size_t n = want - r->pend_len < len ? want - r->pend_len : len;
    memcpy(r->pend + r->pend_len, data, n);
    r->pend_len += n;
    return n;
}

mirror_apply_status mirror_replica_feed(mirror_replica *r, const uint8_t *data, size_t len)
{
    if (r->failed)
        return r->failed;
    while (len) {
        if (r->pend_len == 0 && len >= 4) {
            uint32_t flen = get_u32(data);
            if (flen == 0 || flen > MIRROR_MAX_FRAME - 4)
                return bad(r, -1, "length");
            if (len - 4 >= flen) {
                if (apply(r, data + 4, flen) != MIRROR_APPLIED)
                    return r->failed;
                data += 4 + flen;
                len -= 4 + flen;
                continue;
            }
        }
        if (!r->pend && !(r->pend = malloc(MIRROR_MAX_FRAME)))
            return fail(r, MIRROR_IO_FAILED, "out of memory");
        size_t n = feed_partial(r, data, len);
        data += n;
        len -= n;
        if (r->pend_len == 4) {
            uint32_t flen = get_u32(r->pend);
            if (flen == 0 || flen > MIRROR_MAX_FRAME - 4)
                return bad(r, -1, "length");
        }
        if (r->pend_len > 4 && r->pend_len == 4 + (size_t)get_u32(r->pend)) {
            r->pend_len = 0;
            if (apply(r, r->pend + 4, get_u32(r->pend)) != MIRROR_APPLIED)
                return r->failed;
        }
    }
    if (r->mark_due) {
        r->mark_due = false;
        if (sync_all(r) != MIRROR_APPLIED)
            return r->failed;
        if (r->h.synced)
            r->h.synced(r->ctx, r->mark_seq);
    }
    return MIRROR_APPLIED;
}
