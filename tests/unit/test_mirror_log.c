/* The mirror's log end to end: what is recorded through a mirror on dir A
 * arrives, through a reader and a replica fed in random splits, as the
 * same tree in dir B, with the metadata and sync marks in order; a reader
 * that falls behind is cut and the log stays within its bound; nothing is
 * kept without a reader; a NULL mirror is the plain system calls. */
#include <sys/resource.h>

#include "test_mirror_util.h"

typedef struct pair {
    char *a, *b;
    mirror *m;
    mirror_reader *rd;
    mirror_replica *rep;
    seen s;
    uint64_t rng;
} pair;

static void pair_open(pair *p, size_t max_log, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->rng = seed;
    p->a = tmpdir();
    p->b = tmpdir();
    p->m = mirror_new(p->a, max_log);
    assert_non_null(p->m);
    p->rep = mirror_replica_new(p->b, &handlers, &p->s);
    assert_non_null(p->rep);
}

static void pair_close(pair *p)
{
    mirror_reader_free(p->rd);
    mirror_replica_free(p->rep);
    mirror_free(p->m);
    rm_rf(p->a);
    rm_rf(p->b);
    free(p->a);
    free(p->b);
    seen_free(&p->s);
}

static void path_in(char *out, const pair *p, const char *name)
{
    join(out, p->a, name);
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

/* Files made before the mirror, a snapshot, then every kind of operation. */
static void test_round_trip(void **state)
{
    for (uint64_t seed = 1; seed <= 12; seed++) {
        pair p;
        pair_open(&p, 64u << 20, seed);
        size_t big_n = 300000 + seed * 1000;
        uint8_t *big = malloc(big_n);
        fill(big, big_n, (unsigned)seed);
        put_file(p.a, "old", big, big_n);
        put_file(p.a, "metadata.db", "not mirrored", 12);
        put_file(p.b, "stale", "x", 1); /* the snapshot removes it */
        put_file(p.b, "metadata.db", "mine", 4); /* and keeps this */
        char path[PATH_MAX], to[PATH_MAX];
        path_in(path, &p, "d");
        assert_int_equal(mirror_mkdir(NULL, path, 0755), 0);
        put_file(p.a, "d/inner", "inner", 5);
        uint8_t *image = malloc(150000);
        fill(image, 150000, 99);
        p.rd = mirror_reader_new(p.m, 7 + seed, image, 150000);
        assert_non_null(p.rd);
        free(image); /* the reader keeps a copy */
        size_t max = seed % 3 == 0 ? 1 : seed % 3 == 1 ? 4096 : 1 << 20;
        if (seed % 2)
            assert_int_equal(pump(p.rd, p.rep, max, &p.rng), MIRROR_IDLE);

        path_in(path, &p, "seg");
        int fd = mirror_open(p.m, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        assert_true(fd >= 0);
        struct iovec iov[3] = {{big, 10}, {big + 10, 100000}, {big + 100010, 90000}};
        assert_int_equal(pwritev(fd, iov, 3, 5), 190010);
        mirror_wrote(p.m, path, 5, iov, 3);
        assert_int_equal(mirror_ftruncate(p.m, fd, path, 150000), 0);
        close(fd);
        mirror_synced(p.m, 11);
        path_in(path, &p, "d/sub");
        assert_int_equal(mirror_mkdir(p.m, path, 0755), 0);
        path_in(path, &p, "seg");
        path_in(to, &p, "d/sub/seg");
        assert_int_equal(mirror_rename(p.m, path, to), 0);
        path_in(path, &p, "old");
        assert_int_equal(mirror_unlink(p.m, path), 0);
        path_in(path, &p, "gone");
        assert_int_equal(mirror_mkdir(p.m, path, 0755), 0);
        assert_int_equal(mirror_rmdir(p.m, path), 0);
        assert_int_equal(mirror_unlink(p.m, path), -1); /* failed: not recorded */
        assert_int_equal(errno, ENOENT);
        uint8_t *cs = malloc(200000);
        fill(cs, 200000, 5);
        mirror_meta_changes(p.m, "abc", 3);
        mirror_meta_changes(p.m, cs, 200000);
        mirror_synced(p.m, 12);
        assert_int_equal(mirror_last_synced(p.m), 12);

        assert_int_equal(pump(p.rd, p.rep, max, &p.rng), MIRROR_IDLE);
        assert_true(mirror_reader_caught_up(p.rd));
        assert_same_tree(p.a, p.b, true);
        assert_int_equal(p.s.begins, 1);
        assert_int_equal(p.s.ends, 1);
        assert_int_equal(p.s.epoch, 7 + seed);
        assert_int_equal(p.s.image_len, 150000);
        uint8_t *want = malloc(150000);
        fill(want, 150000, 99);
        assert_memory_equal(p.s.image, want, 150000);
        assert_int_equal(p.s.n_changes, 2);
        assert_int_equal(p.s.changes_len, 200003);
        assert_memory_equal(p.s.changes, "abc", 3);
        assert_memory_equal(p.s.changes + 3, cs, 200000);
        assert_int_equal(p.s.n_synced, 2);
        assert_int_equal(p.s.last_synced, 12);
        char mine[8] = {0};
        int mfd = open(strcat(strcpy(path, p.b), "/metadata.db"), O_RDONLY);
        assert_int_equal(read(mfd, mine, sizeof mine), 4);
        assert_string_equal(mine, "mine");
        close(mfd);
        free(want);
        free(cs);
        free(big);
        pair_close(&p);
    }
}

/* Recording with no reader keeps nothing; a second reader after the
 * first is freed starts from a fresh snapshot. */
static void test_no_reader_keeps_nothing(void **state)
{
    pair p;
    pair_open(&p, 1 << 20, 3);
    char path[PATH_MAX];
    path_in(path, &p, "f");
    int fd = mirror_open(p.m, path, O_RDWR | O_CREAT, 0644);
    uint8_t buf[4096];
    fill(buf, sizeof buf, 1);
    struct iovec iov = {buf, sizeof buf};
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(pwrite(fd, buf, sizeof buf, (off_t)i * 4096), 4096);
        mirror_wrote(p.m, path, (uint64_t)i * 4096, &iov, 1);
        mirror_synced(p.m, (uint64_t)i + 1);
    }
    assert_int_equal(mirror_log_bytes(p.m), 0);
    assert_int_equal(mirror_last_synced(p.m), 1000);
    p.rd = mirror_reader_new(p.m, 1, NULL, 0);
    assert_non_null(p.rd);
    assert_int_equal(pump(p.rd, p.rep, 65536, &p.rng), MIRROR_IDLE);
    assert_same_tree(p.a, p.b, true);
    mirror_reader_free(p.rd);
    p.rd = NULL;
    assert_int_equal(mirror_log_bytes(p.m), 0);
    close(fd);
    pair_close(&p);
}

/* A reader that does not read is cut once the log would pass the bound,
 * and woken to learn it; one that reads keeps going; memory stays near
 * the bound. */
static void test_slow_reader_cut(void **state)
{
    pair p;
    size_t bound = 1 << 20;
    pair_open(&p, bound, 4);
    mirror_reader *slow = mirror_reader_new(p.m, 1, NULL, 0);
    assert_non_null(slow);
    const uint8_t *out;
    size_t len;
    while (mirror_reader_next(slow, 65536, &out, &len) == MIRROR_DATA)
        ; /* its snapshot; then it waits */
    uint64_t v;
    int slow_fd = mirror_reader_wait_fd(slow);
    assert_int_equal(read(slow_fd, &v, sizeof v), -1);
    p.rd = mirror_reader_new(p.m, 1, NULL, 0);
    assert_non_null(p.rd);
    char path[PATH_MAX];
    path_in(path, &p, "f");
    int fd = mirror_open(p.m, path, O_RDWR | O_CREAT, 0644);
    uint8_t buf[8192];
    fill(buf, sizeof buf, 2);
    struct iovec iov = {buf, sizeof buf};
    size_t most = 0;
    for (int i = 0; i < 1024; i++) { /* 8 MiB */
        assert_int_equal(pwrite(fd, buf, sizeof buf, (off_t)i * 8192), 8192);
        mirror_wrote(p.m, path, (uint64_t)i * 8192, &iov, 1);
        size_t held = mirror_log_bytes(p.m);
        most = held > most ? held : most;
        if (i % 16 == 0)
            assert_int_equal(pump(p.rd, p.rep, 65536, &p.rng), MIRROR_IDLE);
    }
    assert_true(most <= bound + 256 * 1024 + 70000);
    assert_int_equal(read(slow_fd, &v, sizeof v), 8); /* woken: it was idle, then cut */
    assert_int_equal(mirror_reader_next(slow, 65536, &out, &len), MIRROR_CUT);
    assert_int_equal(mirror_reader_next(slow, 65536, &out, &len), MIRROR_CUT);
    mirror_reader_free(slow);
    assert_int_equal(pump(p.rd, p.rep, 65536, &p.rng), MIRROR_IDLE);
    assert_same_tree(p.a, p.b, true);
    assert_true(mirror_log_bytes(p.m) <= 256 * 1024);
    close(fd);
    pair_close(&p);
}

/* The wait fds (the mirror's and the reader's) become readable when a
 * reader that went idle has more, once per idle spell. */
static void test_wait_fd(void **state)
{
    pair p;
    pair_open(&p, 1 << 20, 5);
    p.rd = mirror_reader_new(p.m, 1, NULL, 0);
    assert_int_equal(pump(p.rd, p.rep, 65536, &p.rng), MIRROR_IDLE);
    uint64_t v;
    int wfd = mirror_wait_fd(p.m), rfd = mirror_reader_wait_fd(p.rd);
    assert_int_equal(read(wfd, &v, sizeof v), -1); /* nothing yet */
    assert_int_equal(read(rfd, &v, sizeof v), -1);
    mirror_synced(p.m, 1);
    mirror_synced(p.m, 2); /* one write for both: the reader has not looked yet */
    assert_int_equal(read(wfd, &v, sizeof v), 8);
    assert_int_equal(v, 1);
    assert_int_equal(read(rfd, &v, sizeof v), 8);
    assert_int_equal(v, 1);
    assert_int_equal(pump(p.rd, p.rep, 65536, &p.rng), MIRROR_IDLE);
    assert_int_equal(p.s.last_synced, 2);
    mirror_synced(p.m, 3); /* idle again: woken again */
    assert_int_equal(read(wfd, &v, sizeof v), 8);
    assert_int_equal(read(rfd, &v, sizeof v), 8);
    assert_int_equal(pump(p.rd, p.rep, 65536, &p.rng), MIRROR_IDLE);
    assert_int_equal(p.s.last_synced, 3);
    assert_int_equal(read(wfd, &v, sizeof v), -1);
    assert_int_equal(read(rfd, &v, sizeof v), -1);
    pair_close(&p);
}

static void test_null_mirror(void **state)
{
    char *d = tmpdir(), p1[PATH_MAX], p2[PATH_MAX];
    join(p1, d, "a");
    join(p2, d, "b");
    int fd = mirror_open(NULL, p1, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "hello", 5), 5);
    struct iovec iov = {"hello", 5};
    mirror_wrote(NULL, p1, 0, &iov, 1);
    mirror_synced(NULL, 3);
    mirror_meta_changes(NULL, "x", 1);
    assert_int_equal(mirror_last_synced(NULL), 0);
    assert_int_equal(mirror_log_bytes(NULL), 0);
    assert_int_equal(mirror_ftruncate(NULL, fd, p1, 2), 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, 2);
    close(fd);
    assert_int_equal(mirror_open(NULL, p1, O_RDWR | O_CREAT | O_EXCL, 0600), -1);
    assert_int_equal(errno, EEXIST);
    assert_int_equal(mirror_rename(NULL, p1, p2), 0);
    assert_int_equal(access(p2, F_OK), 0);
    assert_int_equal(mirror_unlink(NULL, p2), 0);
    assert_int_equal(mirror_unlink(NULL, p2), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(mirror_mkdir(NULL, p1, 0700), 0);
    assert_int_equal(mirror_mkdir(NULL, p1, 0700), -1);
    assert_int_equal(errno, EEXIST);
    assert_int_equal(mirror_rmdir(NULL, p1), 0);
    assert_int_equal(mirror_rmdir(NULL, p1), -1);
    assert_int_equal(errno, ENOENT);
    rm_rf(d);
    free(d);
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* Over SNAP_MAX_FILES (4096) files a snapshot is refused with EMFILE and
 * leaves no descriptor open; paths outside the directory are done but not
 * recorded. */
static void test_limits(void **state)
{
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 4200)
        skip(); /* the snapshot of 4096 files needs as many descriptors */
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 4200) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 8192 ? 8192 : rl.rlim_max;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    pair p;
    pair_open(&p, 1 << 20, 6);
    char path[PATH_MAX], name[32];
    for (int i = 0; i < 4097; i++) {
        snprintf(name, sizeof name, "f%d", i);
        put_file(p.a, name, "", 0);
    }
    int before = open_fds();
    assert_null(mirror_reader_new(p.m, 1, NULL, 0));
    assert_int_equal(errno, EMFILE);
    assert_int_equal(open_fds(), before);
    path_in(path, &p, "f4096");
    assert_int_equal(unlink(path), 0);
    p.rd = mirror_reader_new(p.m, 1, NULL, 0);
    assert_non_null(p.rd);
    assert_int_equal(pump(p.rd, p.rep, 1 << 20, &p.rng), MIRROR_IDLE);
    size_t held = mirror_log_bytes(p.m);
    char *other = tmpdir();
    join(path, other, "x");
    int fd = mirror_open(p.m, path, O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(mirror_unlink(p.m, path), 0);
    assert_int_equal(mirror_log_bytes(p.m), held);
    rm_rf(other);
    free(other);
    assert_same_tree(p.a, p.b, true);
    pair_close(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_no_reader_keeps_nothing),
        cmocka_unit_test(test_slow_reader_cut),
        cmocka_unit_test(test_wait_fd),
        cmocka_unit_test(test_null_mirror),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
