/* RabbitMQ's own stream files (tests/unit/stream-rabbitmq-3.10, written by
 * RabbitMQ 3.10.8: three segments, 30 one-message chunks with tracking
 * trailers, two tracking snapshot chunks) open here with nothing to recover -- every file byte for byte
 * as it was, so chunk headers, CRCs, entries and index records agree with
 * osiris -- and read back by offset, timestamp, first and last. Run from
 * the repository's root (as make test does). */
#include "test_stream_util.h"

#define FIXTURE "tests/unit/stream-rabbitmq-3.10"

static const uint64_t fixture_segments[] = {0, 14, 29};

static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(in >= 0 && out >= 0);
    char buf[8192];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        assert_int_equal(write(out, buf, (size_t)n), n);
    close(in);
    close(out);
}

static bool same_file(const char *a, const char *b)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

static void for_each_file(sfx *f, bool copy)
{
    static const char *const exts[] = {"segment", "index"};
    for (size_t i = 0; i < 3; i++)
        for (size_t e = 0; e < 2; e++) {
            char from[256], to[128];
            snprintf(from, sizeof from, FIXTURE "/%020" PRIu64 ".%s", fixture_segments[i], exts[e]);
            seg_path(to, sizeof to, f, fixture_segments[i], exts[e]);
            if (copy)
                copy_file(from, to);
            else if (!same_file(from, to))
                fail_msg("%s changed", to);
        }
}

static void test_rabbitmq_stream_reads_unchanged(void **state)
{
    sfx *f = *state;
    for_each_file(f, true);
    sfx_open(f, NULL);
    for_each_file(f, false);
    stream_info in;
    stream_get_info(f->log, &in);
    assert_int_equal(in.first_offset, 0);
    /* 30 messages and the two tracking snapshots that open segments 14
     * and 29 (osiris writes one at the start of a segment) */
    assert_int_equal(in.next_offset, 32);
    assert_int_equal(in.committed_offset, 32);
    assert_int_equal(in.segments, 3);
    assert_int_equal(in.chunks, 32);
    assert_int_equal(in.recovery.bytes_cut, 0);
    assert_int_equal(in.recovery.indexes_rebuilt, 0);
    assert_int_equal(in.recovery.segments_dropped, 0);
    stream_reader *r = open_at(f, STREAM_START_FIRST, 0, 0);
    stream_chunk c;
    uint64_t n = 0, trailers = 0;
    while (stream_reader_next(r, true, &c) == STREAM_OK) {
        assert_int_equal(c.first_offset, n + (n >= 14) + (n >= 28)); /* past the snapshots */
        assert_int_equal(c.epoch, 1);
        trailers += c.trailer_len > 0; /* RabbitMQ's writer tracking */
        assert_null(c.filter_values);  /* ... which is not a value table */
        stream_entry_iter it;
        stream_entry e;
        stream_entry_begin(&it, &c);
        assert_int_equal(stream_entry_next(&it, &e), STREAM_OK);
        char want[32];
        snprintf(want, sizeof want, "hello-%" PRIu64, n);
        assert_non_null(memmem(e.bytes, e.len, want, strlen(want) + 0));
        assert_int_equal(stream_entry_next(&it, &e), STREAM_END);
        n++;
    }
    assert_int_equal(n, 30);
    assert_true(trailers > 0);
    stream_reader_close(r);
    stream_start ts = {STREAM_START_TIMESTAMP, 0, in.first_timestamp + 1};
    assert_int_equal(stream_reader_open(f->log, &ts, NULL, &r), STREAM_OK);
    assert_int_equal(stream_reader_next(r, false, &c), STREAM_OK);
    assert_true(c.first_offset >= 1 && c.timestamp_ms > in.first_timestamp);
    stream_reader_close(r);
    r = open_at(f, STREAM_START_LAST, 0, 0);
    assert_int_equal(stream_reader_next(r, false, &c), STREAM_OK);
    assert_int_equal(c.first_offset, 31);
    stream_reader_close(r);
    r = open_at(f, STREAM_START_OFFSET, 20, 0);
    assert_int_equal(stream_reader_next(r, false, &c), STREAM_OK);
    assert_int_equal(c.first_offset, 20);
    stream_reader_close(r);
    /* and Warren writes on after RabbitMQ's chunks */
    put_chunks(f, 1, 2, 10, in.last_timestamp + 1, NULL);
    sfx_open(f, NULL);
    stream_get_info(f->log, &in);
    assert_int_equal(in.next_offset, 34);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rabbitmq_stream_reads_unchanged, sfx_setup, sfx_teardown),
    };
    return cmocka_run_group_tests_name("stream_compat", tests, NULL, NULL);
}
