/* The replica against frames made by hand: paths outside the directory
 * (.., absolute, empty components, NUL, the metadata's files), bad
 * lengths, truncated fields, frames out of order, mixed metadata parts are
 * refused with MIRROR_BAD_FRAME and touch nothing outside the directory;
 * a frame split anywhere waits for its rest; the lenient cases (a write or
 * rename of a missing file, an existing directory) apply. */
#include "test_mirror_util.h"

typedef struct fb {
    uint8_t b[4096];
    size_t len, start;
} fb;

static void fb_u8(fb *f, uint8_t v)
{
    f->b[f->len++] = v;
}
static void fb_be(fb *f, uint64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--)
        fb_u8(f, (uint8_t)(v >> (8 * i)));
}
static void fb_bytes(fb *f, const void *p, size_t n)
{
    memcpy(f->b + f->len, p, n);
    f->len += n;
}
static void fb_path(fb *f, const char *p, size_t n)
{
    fb_be(f, n, 2);
    fb_bytes(f, p, n);
}
static void fb_begin(fb *f, uint8_t type)
{
    f->start = f->len;
    f->len += 4;
    fb_u8(f, type);
}
static void fb_end(fb *f)
{
    uint32_t n = (uint32_t)(f->len - f->start - 4);
    for (int i = 0; i < 4; i++)
        f->b[f->start + i] = (uint8_t)(n >> (8 * (3 - i)));
}

enum { T_BEGIN = 1, T_FILE, T_IMAGE, T_IMAGE_MORE, T_END, T_CREATE, T_WRITE, T_TRUNCATE,
       T_RENAME, T_UNLINK, T_MKDIR, T_RMDIR, T_SYNCED, T_CHANGES, T_CHANGES_MORE };

static void snap_begin(fb *f)
{
    fb_begin(f, T_BEGIN);
    fb_be(f, 1, 8);
    fb_end(f);
}

static void create(fb *f, const char *path, size_t n)
{
    fb_begin(f, T_CREATE);
    fb_path(f, path, n);
    fb_be(f, 0644, 4);
    fb_end(f);
}

typedef struct world {
    char *top, b[PATH_MAX], outside[PATH_MAX];
    mirror_replica *rep;
    seen s;
} world;

/* top/ holds b/ (the replica's directory), outside/ with a file, and a
 * symlink b/ln -> outside/ (the snapshot must remove, not follow, it). */
static void world_open(world *w)
{
    memset(w, 0, sizeof *w);
    w->top = tmpdir();
    join(w->b, w->top, "b");
    join(w->outside, w->top, "outside");
    assert_int_equal(mkdir(w->b, 0755), 0);
    assert_int_equal(mkdir(w->outside, 0755), 0);
    put_file(w->outside, "keep", "keep", 4);
    char ln[PATH_MAX];
    join(ln, w->b, "ln");
    assert_int_equal(symlink(w->outside, ln), 0);
    w->rep = mirror_replica_new(w->b, &handlers, &w->s);
    assert_non_null(w->rep);
}

/* Nothing outside b/ changed; b/ holds only what `want` names ("" none). */
static void world_close(world *w, const char *want)
{
    struct dirent **l;
    int n = scandir(w->top, &l, no_dots, alphasort);
    assert_int_equal(n, 2);
    assert_string_equal(l[0]->d_name, "b");
    assert_string_equal(l[1]->d_name, "outside");
    free(l[0]);
    free(l[1]);
    free(l);
    n = scandir(w->outside, &l, no_dots, alphasort);
    assert_int_equal(n, 1);
    assert_string_equal(l[0]->d_name, "keep");
    free(l[0]);
    free(l);
    n = scandir(w->b, &l, no_dots, alphasort);
    char names[256] = "";
    for (int i = 0; i < n; i++) {
        strcat(strcat(names, *names ? " " : ""), l[i]->d_name);
        free(l[i]);
    }
    free(l);
    assert_string_equal(names, want);
    mirror_replica_free(w->rep);
    seen_free(&w->s);
    rm_rf(w->top);
    free(w->top);
}

static mirror_apply_status feed(world *w, const fb *f)
{
    return mirror_replica_feed(w->rep, f->b, f->len);
}

static void test_bad_paths(void **state)
{
    static const struct {
        const char *p;
        size_t n;
    } bad[] = {
        {"../x", 4}, {"/tmp/x", 6}, {"a//b", 4}, {"a/", 2}, {"./a", 3}, {"a/..", 4}, {"a/../../x", 9},
        {"", 0}, {"a\0b", 3}, {"metadata.db", 11}, {"metadata.db-wal", 15}, {"metadata.db-shm/x", 17},
        {"..", 2}, {".", 1}, {"/", 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        world w;
        world_open(&w);
        fb f = {0};
        snap_begin(&f);
        create(&f, bad[i].p, bad[i].n);
        assert_int_equal(feed(&w, &f), MIRROR_BAD_FRAME);
        assert_non_null(strstr(mirror_replica_error(w.rep), "path"));
        f.len = 0;
        create(&f, "fine", 4);
        assert_int_equal(feed(&w, &f), MIRROR_BAD_FRAME); /* failed stays failed */
        world_close(&w, "");
    }
}

static void test_bad_frames(void **state)
{
    for (int c = 0; c < 11; c++) {
        world w;
        world_open(&w);
        fb f = {0};
        if (c != 0)
            snap_begin(&f);
        switch (c) {
        case 0: /* before any snapshot */
            create(&f, "a", 1);
            break;
        case 1: /* length 0 */
            fb_be(&f, 0, 4);
            break;
        case 2: /* over the bound: refused from the length alone */
            fb_be(&f, MIRROR_MAX_FRAME, 4);
            fb_u8(&f, T_WRITE);
            break;
        case 3:
            fb_begin(&f, 99);
            fb_end(&f);
            break;
        case 4: /* a path longer than the frame */
            fb_begin(&f, T_CREATE);
            fb_be(&f, 50, 2);
            fb_bytes(&f, "abc", 3);
            fb_end(&f);
            break;
        case 5: /* a write without its offset */
            fb_begin(&f, T_WRITE);
            fb_path(&f, "a", 1);
            fb_be(&f, 1, 4);
            fb_end(&f);
            break;
        case 6: /* a FILE after the snapshot */
            fb_begin(&f, T_END);
            fb_end(&f);
            fb_begin(&f, T_FILE);
            fb_path(&f, "a", 1);
            fb_be(&f, 0644, 4);
            fb_end(&f);
            break;
        case 7: /* bytes after the fields */
            fb_begin(&f, T_SYNCED);
            fb_be(&f, 1, 8);
            fb_u8(&f, 0);
            fb_end(&f);
            break;
        case 8: /* an image's parts ended as a changeset */
            fb_begin(&f, T_IMAGE_MORE);
            fb_bytes(&f, "ab", 2);
            fb_end(&f);
            fb_begin(&f, T_CHANGES);
            fb_end(&f);
            break;
        case 9: /* a file frame between metadata parts */
            fb_begin(&f, T_CHANGES_MORE);
            fb_end(&f);
            create(&f, "a", 1);
            break;
        case 10: /* a write at an offset past off_t */
            fb_begin(&f, T_WRITE);
            fb_path(&f, "a", 1);
            fb_be(&f, UINT64_MAX - 1, 8);
            fb_bytes(&f, "xyz", 3);
            fb_end(&f);
            break;
        }
        mirror_apply_status st = feed(&w, &f);
        if (st != MIRROR_BAD_FRAME)
            fail_msg("case %d: %d (%s)", c, st, mirror_replica_error(&*w.rep));
        world_close(&w, c == 0 ? "ln" : "");
    }
}

/* Every split of a stream applies it the same; a partial frame waits. */
static void test_splits_and_lenient_ops(void **state)
{
    fb f = {0};
    snap_begin(&f);
    fb_begin(&f, T_MKDIR);
    fb_path(&f, "d", 1);
    fb_be(&f, 0755, 4);
    fb_end(&f);
    fb_begin(&f, T_MKDIR); /* exists: fine */
    fb_path(&f, "d", 1);
    fb_be(&f, 0755, 4);
    fb_end(&f);
    fb_begin(&f, T_FILE);
    fb_path(&f, "d/x", 3);
    fb_be(&f, 0644, 4);
    fb_end(&f);
    fb_begin(&f, T_WRITE);
    fb_path(&f, "d/x", 3);
    fb_be(&f, 2, 8);
    fb_bytes(&f, "hello", 5);
    fb_end(&f);
    fb_begin(&f, T_IMAGE);
    fb_end(&f);
    fb_begin(&f, T_END);
    fb_end(&f);
    fb_begin(&f, T_WRITE); /* a missing file: skipped, not created */
    fb_path(&f, "nope", 4);
    fb_be(&f, 0, 8);
    fb_bytes(&f, "zz", 2);
    fb_end(&f);
    fb_begin(&f, T_RENAME); /* a missing source: skipped */
    fb_path(&f, "nope", 4);
    fb_path(&f, "d/y", 3);
    fb_end(&f);
    fb_begin(&f, T_UNLINK);
    fb_path(&f, "nope", 4);
    fb_end(&f);
    fb_begin(&f, T_RMDIR);
    fb_path(&f, "nope", 4);
    fb_end(&f);
    fb_begin(&f, T_TRUNCATE);
    fb_path(&f, "d/x", 3);
    fb_be(&f, 4, 8);
    fb_end(&f);
    fb_begin(&f, T_SYNCED);
    fb_be(&f, 9, 8);
    fb_end(&f);
    for (size_t cut = 0; cut <= f.len; cut += 3) {
        world w;
        world_open(&w);
        assert_int_equal(mirror_replica_feed(w.rep, f.b, cut), MIRROR_APPLIED);
        assert_int_equal(mirror_replica_feed(w.rep, f.b + cut, f.len - cut), MIRROR_APPLIED);
        assert_int_equal(w.s.last_synced, 9);
        assert_int_equal(w.s.ends, 1);
        char p[PATH_MAX], got[16] = {0};
        join(p, w.b, "d/x");
        int fd = open(p, O_RDONLY);
        assert_int_equal(read(fd, got, sizeof got), 4);
        assert_memory_equal(got, "\0\0he", 4);
        close(fd);
        world_close(&w, "d");
    }
    /* a frame cut short: nothing applied until the rest comes */
    world w;
    world_open(&w);
    assert_int_equal(mirror_replica_feed(w.rep, f.b, 10), MIRROR_APPLIED);
    assert_int_equal(w.s.begins, 0);
    assert_int_equal(mirror_replica_feed(w.rep, f.b + 10, 3), MIRROR_APPLIED);
    assert_int_equal(w.s.begins, 1);
    world_close(&w, "");
}

/* A handler that refuses fails the replica. */
static void test_handler_refuses(void **state)
{
    world w;
    world_open(&w);
    w.s.refuse = true;
    fb f = {0};
    snap_begin(&f);
    fb_begin(&f, T_IMAGE);
    fb_bytes(&f, "img", 3);
    fb_end(&f);
    assert_int_equal(feed(&w, &f), MIRROR_APPLY_FAILED);
    assert_non_null(strstr(mirror_replica_error(w.rep), "refused"));
    world_close(&w, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_paths),
        cmocka_unit_test(test_bad_frames),
        cmocka_unit_test(test_splits_and_lenient_ops),
        cmocka_unit_test(test_handler_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
