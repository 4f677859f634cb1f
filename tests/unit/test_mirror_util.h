/* Shared by the mirror tests: temporary directories, a tree comparison,
 * a handler context that keeps what the replica reported, and a pump from
 * a reader into a replica in random splits. */
#ifndef TEST_MIRROR_UTIL_H
#define TEST_MIRROR_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../mirror/mirror.h"

static inline unsigned rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(*s >> 33);
}

static inline void rm_rf_at(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd >= 0) {
        DIR *d = fdopendir(fd);
        struct dirent *de;
        while ((de = readdir(d)) != NULL)
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                rm_rf_at(dirfd(d), de->d_name);
        closedir(d);
        unlinkat(dfd, name, AT_REMOVEDIR);
    } else {
        unlinkat(dfd, name, 0);
    }
}

static inline void rm_rf(const char *path)
{
    rm_rf_at(AT_FDCWD, path);
}

static inline char *tmpdir(void)
{
    char *t = strdup("/tmp/warren-mirror-XXXXXX");
    assert_non_null(mkdtemp(t));
    return t;
}

static inline void join(char *out, const char *a, const char *b)
{
    int n = snprintf(out, PATH_MAX, "%s/%s", a, b);
    assert_true(n > 0 && n < PATH_MAX);
}

static inline void put_file(const char *dir, const char *name, const void *data, size_t len)
{
    char p[PATH_MAX];
    join(p, dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static inline bool is_meta_name(const char *n)
{
    return !strncmp(n, "metadata.db", 11);
}

static inline int no_dots(const struct dirent *de)
{
    return strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
}

static inline void assert_same_file(const char *a, const char *b)
{
    int fa = open(a, O_RDONLY), fb = open(b, O_RDONLY);
    assert_true(fa >= 0);
    if (fb < 0)
        fail_msg("%s missing", b);
    struct stat sa, sb;
    fstat(fa, &sa);
    fstat(fb, &sb);
    if (sa.st_size != sb.st_size)
        fail_msg("%s: %lld bytes, %s: %lld", a, (long long)sa.st_size, b, (long long)sb.st_size);
    static __thread uint8_t ba[65536], bb[65536];
    for (off_t off = 0; off < sa.st_size;) {
        ssize_t n = pread(fa, ba, sizeof ba, off);
        assert_true(n > 0);
        assert_int_equal(pread(fb, bb, (size_t)n, off), n);
        if (memcmp(ba, bb, (size_t)n))
            fail_msg("%s and %s differ near %lld", a, b, (long long)off);
        off += n;
    }
    close(fa);
    close(fb);
}

/* Directories a and b hold the same names, types and bytes (metadata.db*
 * at the top left out). */
static inline void assert_same_tree(const char *a, const char *b, bool top)
{
    struct dirent **la, **lb;
    int na = scandir(a, &la, no_dots, alphasort), nb = scandir(b, &lb, no_dots, alphasort);
    assert_true(na >= 0 && nb >= 0);
    int i = 0, j = 0;
    while (i < na || j < nb) {
        if (top && i < na && is_meta_name(la[i]->d_name)) {
            i++;
            continue;
        }
        if (top && j < nb && is_meta_name(lb[j]->d_name)) {
            j++;
            continue;
        }
        if (i == na || j == nb || strcmp(la[i]->d_name, lb[j]->d_name))
            fail_msg("%s and %s list different names (%s vs %s)", a, b, i < na ? la[i]->d_name : "-",
                     j < nb ? lb[j]->d_name : "-");
        char pa[PATH_MAX], pb[PATH_MAX];
        join(pa, a, la[i]->d_name);
        join(pb, b, lb[j]->d_name);
        struct stat sa, sb;
        assert_int_equal(lstat(pa, &sa), 0);
        assert_int_equal(lstat(pb, &sb), 0);
        assert_int_equal(S_ISDIR(sa.st_mode), S_ISDIR(sb.st_mode));
        if (S_ISDIR(sa.st_mode))
            assert_same_tree(pa, pb, false);
        else
            assert_same_file(pa, pb);
        i++;
        j++;
    }
    for (int k = 0; k < na; k++)
        free(la[k]);
    for (int k = 0; k < nb; k++)
        free(lb[k]);
    free(la);
    free(lb);
}

/* What the replica's handlers saw. */
typedef struct seen {
    uint64_t epoch;
    int begins, ends;
    uint8_t *image;
    size_t image_len;
    uint8_t *changes; /* every changeset, joined */
    size_t changes_len, n_changes;
    uint64_t last_synced;
    int n_synced;
    bool refuse;
} seen;

static inline void on_begin(void *ctx, uint64_t epoch)
{
    seen *s = ctx;
    s->epoch = epoch;
    s->begins++;
}

static inline bool on_image(void *ctx, const void *image, size_t len)
{
    seen *s = ctx;
    free(s->image);
    s->image = malloc(len + 1);
    if (len)
        memcpy(s->image, image, len);
    s->image_len = len;
    return !s->refuse;
}

static inline bool on_changes(void *ctx, const void *cs, size_t len)
{
    seen *s = ctx;
    s->changes = realloc(s->changes, s->changes_len + len + 1);
    memcpy(s->changes + s->changes_len, cs, len);
    s->changes_len += len;
    s->n_changes++;
    return !s->refuse;
}

static inline void on_end(void *ctx)
{
    ((seen *)ctx)->ends++;
}

static inline void on_synced(void *ctx, uint64_t seq)
{
    seen *s = ctx;
    assert_true(seq >= s->last_synced);
    s->last_synced = seq;
    s->n_synced++;
}

static const mirror_replica_handlers handlers = {on_begin, on_image, on_changes, on_end, on_synced};

static inline void seen_free(seen *s)
{
    free(s->image);
    free(s->changes);
}

/* Feeds `len` bytes in random pieces; asserts each is applied. */
static inline void feed_split(mirror_replica *rep, const uint8_t *p, size_t len, uint64_t *rng)
{
    while (len) {
        size_t n = 1 + rnd(rng) % (rnd(rng) % 4 == 0 ? 16 : 200000);
        if (n > len)
            n = len;
        mirror_apply_status st = mirror_replica_feed(rep, p, n);
        if (st != MIRROR_APPLIED)
            fail_msg("feed: %d %s", st, mirror_replica_error(rep));
        p += n;
        len -= n;
    }
}

/* Moves what the reader has now into the replica; returns the last
 * status (MIRROR_IDLE when drained). */
static inline mirror_read_status pump(mirror_reader *rd, mirror_replica *rep, size_t max, uint64_t *rng)
{
    for (;;) {
        const uint8_t *out;
        size_t len;
        mirror_read_status st = mirror_reader_next(rd, max, &out, &len);
        if (st != MIRROR_DATA)
            return st;
        assert_true(len > 0 && len <= max + 200000);
        feed_split(rep, out, len, rng);
    }
}

#endif
