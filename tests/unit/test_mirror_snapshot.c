/* The fuzzy snapshot: a writer thread creates, writes, truncates, renames
 * and unlinks files and directories in dir A through the mirror while a
 * reader's snapshot of A is taken and streamed (in small pieces, so the
 * writer runs between them) into a replica on dir B. Once the writer has
 * stopped and the reader is drained, B holds A's tree byte for byte. Many
 * seeds, each starting the reader after a different number of writes,
 * a second follower later still, and with odd seeds a log bound small
 * enough that followers are cut and start again from a new snapshot. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "test_mirror_util.h"

#define OPS 1500
#define SEEDS 40

typedef struct writer {
    mirror *m;
    const char *dir;
    uint64_t rng;
    atomic_int done_ops;
    atomic_bool done;
} writer;

static const char *const names[] = {"f0", "f1", "f2", "d0/f3", "d0/f4", "d1/f5", "d1/d2/f6", "f7.tmp"};
#define N_NAMES (sizeof names / sizeof names[0])
static const char *const dirs[] = {"d0", "d1", "d1/d2"};

static void pick(writer *w, char *out, bool dir)
{
    join(out, w->dir, dir ? dirs[rnd(&w->rng) % 3] : names[rnd(&w->rng) % N_NAMES]);
}

static void write_some(writer *w, const char *path)
{
    int fd = open(path, O_RDWR);
    if (fd < 0)
        return;
    size_t n = 1 + rnd(&w->rng) % (rnd(&w->rng) % 8 ? 3000 : 70000);
    uint64_t off = rnd(&w->rng) % 200000;
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)rnd(&w->rng);
    /* two pieces, as the journal writes a header and a body */
    struct iovec iov[2] = {{b, n / 3}, {b + n / 3, n - n / 3}};
    ssize_t got = pwritev(fd, iov, 2, (off_t)off);
    assert_int_equal(got, (ssize_t)n);
    mirror_wrote(w->m, path, off, iov, 2);
    free(b);
    close(fd);
}

static void one_op(writer *w, uint64_t seq)
{
    char p[PATH_MAX], q[PATH_MAX];
    unsigned op = rnd(&w->rng) % 100;
    int fd;
    if (op < 40) {
        pick(w, p, false);
        write_some(w, p);
    } else if (op < 55) {
        pick(w, p, false);
        fd = mirror_open(w->m, p, O_RDWR | O_CREAT | (rnd(&w->rng) % 4 ? 0 : O_TRUNC), 0644);
        if (fd >= 0)
            close(fd);
    } else if (op < 63) {
        pick(w, p, false);
        fd = open(p, O_RDWR);
        if (fd >= 0) {
            assert_int_equal(mirror_ftruncate(w->m, fd, p, rnd(&w->rng) % 250000), 0);
            close(fd);
        }
    } else if (op < 73) {
        pick(w, p, false);
        pick(w, q, false);
        mirror_rename(w->m, p, q);
    } else if (op < 78) {
        pick(w, p, true);
        pick(w, q, true);
        mirror_rename(w->m, p, q); /* a directory: often refused (not empty, inside itself) */
    } else if (op < 85) {
        pick(w, p, false);
        mirror_unlink(w->m, p);
    } else if (op < 92) {
        pick(w, p, true);
        mirror_mkdir(w->m, p, 0755);
    } else if (op < 95) {
        pick(w, p, true);
        mirror_rmdir(w->m, p);
    } else {
        mirror_synced(w->m, seq);
    }
}

static void *writer_main(void *arg)
{
    writer *w = arg;
    for (int i = 0; i < OPS; i++) {
        one_op(w, (uint64_t)i + 1);
        atomic_store(&w->done_ops, i + 1);
        if (i % 64 == 0)
            sched_yield();
    }
    atomic_store(&w->done, true);
    return NULL;
}

/* A follower: a reader on the leader's mirror and a replica on `dir`;
 * when cut, both start again from a new snapshot, as the cluster does. */
typedef struct follower {
    const char *dir;
    mirror_reader *rd;
    mirror_replica *rep;
    seen s;
    int cuts;
} follower;

static void follower_start(follower *f, mirror *m, uint64_t epoch)
{
    mirror_reader_free(f->rd);
    mirror_replica_free(f->rep);
    seen_free(&f->s);
    memset(&f->s, 0, sizeof f->s);
    f->rd = mirror_reader_new(m, epoch, "img", 3);
    assert_non_null(f->rd);
    f->rep = mirror_replica_new(f->dir, &handlers, &f->s);
    assert_non_null(f->rep);
}

/* Moves what there is; false when cut (and started again). */
static bool follower_pump(follower *f, mirror *m, size_t max, uint64_t *rng)
{
    mirror_read_status st = pump(f->rd, f->rep, max, rng);
    if (st == MIRROR_CUT) {
        f->cuts++;
        follower_start(f, m, (uint64_t)f->cuts + 100);
        return false;
    }
    assert_int_equal(st, MIRROR_IDLE);
    return true;
}

static void follower_check(follower *f, const char *leader)
{
    assert_true(mirror_reader_caught_up(f->rd));
    assert_int_equal(f->s.begins, 1);
    assert_int_equal(f->s.ends, 1);
    assert_int_equal(f->s.image_len, 3);
    assert_same_tree(leader, f->dir, true);
    mirror_reader_free(f->rd);
    mirror_replica_free(f->rep);
    seen_free(&f->s);
}

/* Odd seeds bound the log at 256 KiB: followers are cut and start over. */
static void run_seed(uint64_t seed, int *cuts)
{
    char *a = tmpdir(), *b = tmpdir(), *c = tmpdir(), p[PATH_MAX];
    join(p, a, "d0");
    mkdir(p, 0755);
    put_file(a, "f0", "before the mirror", 17);
    put_file(a, "d0/f3", "also before", 11);
    mirror *m = mirror_new(a, seed % 2 ? 256u << 10 : 256u << 20);
    writer w = {.m = m, .dir = a, .rng = seed * 7919};
    atomic_init(&w.done_ops, 0);
    atomic_init(&w.done, false);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, writer_main, &w), 0);
    uint64_t rng = seed;
    int start = (int)(rnd(&rng) % (OPS / 2)), start2 = start + (int)(rnd(&rng) % (OPS / 2));
    while (atomic_load(&w.done_ops) < start) /* ends: the writer always gets there */
        sched_yield();
    follower f1 = {.dir = b}, f2 = {.dir = c};
    follower_start(&f1, m, seed);
    size_t max = 1 + rnd(&rng) % 8192;
    for (;;) {
        bool done = atomic_load(&w.done);
        if (!f2.rd && (done || atomic_load(&w.done_ops) >= start2))
            follower_start(&f2, m, seed);
        bool whole = follower_pump(&f1, m, max, &rng);
        if (f2.rd)
            whole = follower_pump(&f2, m, 1 << 20, &rng) && whole;
        if (done && whole)
            break;
        sched_yield();
    }
    pthread_join(t, NULL);
    follower_check(&f1, a);
    follower_check(&f2, a);
    *cuts += f1.cuts + f2.cuts;
    mirror_free(m);
    rm_rf(a);
    rm_rf(b);
    rm_rf(c);
    free(a);
    free(b);
    free(c);
}

static void test_fuzzy_snapshot(void **state)
{
    int cuts = 0;
    for (uint64_t seed = 1; seed <= SEEDS; seed++)
        run_seed(seed, &cuts);
    printf("# %d seeds, followers cut and restarted %d times\n", SEEDS, cuts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzzy_snapshot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
