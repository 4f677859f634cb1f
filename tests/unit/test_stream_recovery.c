/* Recovery on open: a torn last chunk (cut at every byte) is dropped and the
 * index ahead of it trimmed; a lost, shortened or lagging index is rebuilt
 * byte for byte; a bad CRC cuts the tail at open and is an error for a
 * reader of an older segment; damaged headers never crash; an append the
 * disk refuses half-way leaves no partial chunk. */
#include <signal.h>
#include <sys/resource.h>

#include "test_stream_util.h"

typedef struct saved {
    uint8_t *bytes;
    off_t len;
} saved;

static saved slurp(const char *path)
{
    saved s = {NULL, file_size(path)};
    assert_true(s.len >= 0);
    s.bytes = malloc((size_t)s.len + 1);
    int fd = open(path, O_RDONLY);
    assert_int_equal(read(fd, s.bytes, (size_t)s.len), s.len);
    close(fd);
    return s;
}

static void spill(const char *path, const saved *s, off_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_int_equal(write(fd, s->bytes, (size_t)len), len);
    close(fd);
}

static void check_same(const char *path, const saved *s)
{
    saved now = slurp(path);
    assert_int_equal(now.len, s->len);
    assert_memory_equal(now.bytes, s->bytes, (size_t)s->len);
    free(now.bytes);
}

static uint64_t records(sfx *f)
{
    stream_reader *r = open_at(f, STREAM_START_FIRST, 0, 0);
    uint64_t first, n = read_all(r, &first);
    stream_reader_close(r);
    return n;
}

static void test_torn_tail_at_every_byte(void **state)
{
    sfx *f = *state;
    stream_config cfg = {.max_segment_bytes = 2000};
    sfx_open(f, &cfg);
    put_chunks(f, 6, 4, 60, 100, "v"); /* 6 chunks of 337 bytes: segment 0 */
    put_chunks(f, 2, 5, 60, 200, NULL);  /* 2 of 368: segment 24 */
    stream_info in;
    stream_get_info(f->log, &in);
    assert_int_equal(in.segments, 2);
    char seg[128], idx[128];
    seg_path(seg, sizeof seg, f, 24, "segment");
    seg_path(idx, sizeof idx, f, 24, "index");
    assert_true(file_size(seg) > 0);
    stream_close(f->log);
    f->log = NULL;
    saved s = slurp(seg), x = slurp(idx);
    off_t whole = s.len - (48 + 5 * 64); /* the last chunk: no filter, 5 x (4+60) */
    for (off_t cut = whole; cut < s.len; cut++) {
        spill(seg, &s, cut);
        spill(idx, &x, x.len); /* the index still lists the torn chunk */
        sfx_open(f, &cfg);
        stream_get_info(f->log, &in);
        assert_int_equal(in.next_offset, 29);
        assert_int_equal(in.committed_offset, 29);
        assert_int_equal(file_size(seg), whole);
        assert_int_equal(file_size(idx), x.len - 29);
        assert_int_equal(in.recovery.bytes_cut, cut - whole);
        assert_int_equal(in.recovery.indexes_rebuilt, 1);
        assert_int_equal(records(f), 29);
    }
    /* writing goes on from there */
    put_chunks(f, 1, 2, 60, 300, NULL);
    assert_int_equal(records(f), 31);
    free(s.bytes);
    free(x.bytes);
}

static void test_lost_short_and_lagging_index_rebuilt(void **state)
{
    sfx *f = *state;
    stream_config cfg = {.max_segment_bytes = 1500};
    sfx_open(f, &cfg);
    put_chunks(f, 12, 3, 100, 100, NULL);
    stream_info in;
    stream_get_info(f->log, &in);
    assert_true(in.segments >= 3);
    stream_close(f->log);
    f->log = NULL;
    char old_idx[128], last_idx[128];
    seg_path(old_idx, sizeof old_idx, f, 0, "index");
    /* the last segment's name is its first chunk id */
    uint64_t last_first = in.first_offset;
    for (uint64_t id = 0; id < in.next_offset; id += 3) {
        char p[128];
        seg_path(p, sizeof p, f, id, "segment");
        if (file_size(p) >= 0)
            last_first = id;
    }
    seg_path(last_idx, sizeof last_idx, f, last_first, "index");
    saved o = slurp(old_idx), l = slurp(last_idx);
    const off_t cuts[] = {0, 8, 8 + 29 - 1, o.len - 29, o.len - 10};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        spill(old_idx, &o, cuts[i]);
        spill(last_idx, &l, cuts[i] < l.len ? cuts[i] : l.len - 1);
        sfx_open(f, &cfg);
        check_same(old_idx, &o);
        check_same(last_idx, &l);
        stream_info again;
        stream_get_info(f->log, &again);
        assert_int_equal(again.recovery.indexes_rebuilt, 2);
        assert_int_equal(again.recovery.bytes_cut, 0);
        again.recovery = in.recovery;
        assert_memory_equal(&again, &in, sizeof in);
        assert_int_equal(records(f), 36);
        stream_close(f->log);
        f->log = NULL;
    }
    unlink(old_idx); /* lost altogether */
    unlink(last_idx);
    sfx_open(f, &cfg);
    check_same(old_idx, &o);
    check_same(last_idx, &l);
    assert_int_equal(records(f), 36);
    free(o.bytes);
    free(l.bytes);
}

static void flip(const char *path, off_t at)
{
    int fd = open(path, O_RDWR);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x5a;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

static void test_bad_crc(void **state)
{
    sfx *f = *state;
    stream_config cfg = {.max_segment_bytes = 1000};
    sfx_open(f, &cfg);
    put_chunks(f, 10, 2, 100, 100, NULL); /* chunks of 48 + 208 bytes, 4 per segment */
    stream_info in;
    stream_get_info(f->log, &in);
    assert_int_equal(in.segments, 3);
    stream_close(f->log);
    f->log = NULL;
    char old[128], last[128];
    seg_path(old, sizeof old, f, 0, "segment");
    seg_path(last, sizeof last, f, 16, "segment");
    flip(last, 8 + 48 + 50);       /* the last segment's first chunk: cut there at open */
    flip(old, 8 + 256 + 48 + 100); /* an older segment's second chunk: found by a reader */
    sfx_open(f, &cfg);
    stream_get_info(f->log, &in);
    assert_int_equal(in.next_offset, 16);
    assert_int_equal(file_size(last), 8);
    stream_reader *r = open_at(f, STREAM_START_FIRST, 0, 0);
    stream_chunk c;
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_ECORRUPT);
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_ECORRUPT); /* stays put */
    stream_reader_close(r);
    /* without loading (a sendfile) the header is all that is checked */
    r = open_at(f, STREAM_START_OFFSET, 2, 0);
    assert_int_equal(stream_reader_next(r, false, &c), STREAM_OK);
    assert_int_equal(c.first_offset, 2);
    stream_reader_close(r);
    put_chunks(f, 1, 1, 10, 500, NULL);
    stream_get_info(f->log, &in);
    assert_int_equal(in.next_offset, 17);
}

static void test_damaged_headers_never_crash(void **state)
{
    sfx *f = *state;
    sfx_open(f, NULL);
    put_chunks(f, 5, 3, 30, 100, "x");
    stream_close(f->log);
    f->log = NULL;
    char seg[128];
    seg_path(seg, sizeof seg, f, 0, "segment");
    saved s = slurp(seg);
    off_t last = s.len - (48 + 16 + 3 * 34 + 5 + 3 * 3);
    for (off_t at = last; at < last + 48; at++) {
        spill(seg, &s, s.len);
        flip(seg, at);
        sfx_open(f, NULL);
        stream_info in;
        stream_get_info(f->log, &in);
        /* either the damage made the chunk invalid (dropped) or it hit a
         * field nothing checks (timestamp, epoch) */
        assert_true(in.next_offset == 12 || in.next_offset == 15);
        assert_int_equal(records(f), in.next_offset);
    }
    /* a segment that is not one */
    spill(seg, &s, s.len);
    flip(seg, 0);
    stream_close(f->log);
    f->log = NULL;
    stream_config none = {0};
    assert_int_equal(stream_open(f->dir, &none, &f->log), STREAM_ECORRUPT);
    assert_null(f->log);
    free(s.bytes);
}

/* A write the disk refuses half-way (a file size limit stands in for a
 * full disk): the append fails, the files are cut back, the builder keeps
 * its entries, and the next append and a reopen find a whole log. */
static void test_failed_append_leaves_no_partial_chunk(void **state)
{
    sfx *f = *state;
    sfx_open(f, NULL);
    put_chunks(f, 3, 2, 50, 100, NULL);
    char seg[128], idx[128];
    seg_path(seg, sizeof seg, f, 0, "segment");
    seg_path(idx, sizeof idx, f, 0, "index");
    off_t seg_size = file_size(seg), idx_size = file_size(idx);
    char body[4096];
    for (int i = 0; i < 5; i++) {
        stream_part p = {body, msg_body(body, 200, 6 + (uint64_t)i)};
        assert_int_equal(stream_builder_add(f->b, &p, 1, "v", 1), STREAM_OK);
    }
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)seg_size + 300; /* the chunk is ~1.1 KB */
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    assert_int_equal(stream_append(f->log, f->b, 200, NULL), STREAM_EIO);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_DFL);
    assert_int_equal(file_size(seg), seg_size);
    assert_int_equal(file_size(idx), idx_size);
    assert_int_equal(stream_builder_records(f->b), 5);
    stream_info in;
    stream_get_info(f->log, &in);
    assert_int_equal(in.next_offset, 6);
    uint64_t first;
    assert_int_equal(stream_append(f->log, f->b, 200, &first), STREAM_OK);
    assert_int_equal(first, 6);
    assert_int_equal(stream_sync(f->log), STREAM_OK);
    assert_int_equal(records(f), 11);
    sfx_open(f, NULL);
    assert_int_equal(records(f), 11);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_torn_tail_at_every_byte, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_lost_short_and_lagging_index_rebuilt, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_bad_crc, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_damaged_headers_never_crash, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_failed_append_leaves_no_partial_chunk, sfx_setup, sfx_teardown),
    };
    return cmocka_run_group_tests_name("stream_recovery", tests, NULL, NULL);
}
