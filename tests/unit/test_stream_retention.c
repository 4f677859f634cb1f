/* Retention: by size and by age, whole segments, oldest first, never the
 * active one; readers whose segment goes move to the new first chunk; an
 * offset below the first is clamped to it; orphan indexes and deleting a
 * stream. And RabbitMQ's age strings. */
#include "test_stream_util.h"

/* 30 chunks of 3 x 100-byte messages (360 bytes each) at ts 1000 + 10c,
 * in segments of 5 chunks: 0, 15, 30, 45, 60, 75. */
static void fill(sfx *f, stream_config *cfg)
{
    cfg->max_segment_bytes = 1500;
    sfx_open(f, cfg);
    for (int c = 0; c < 30; c++)
        put_chunks(f, 1, 3, 100, 1000 + 10 * c, NULL);
    stream_info in;
    stream_get_info(f->log, &in);
    assert_int_equal(in.segments, 6);
    assert_int_equal(in.bytes, 6 * (8 + 5 * 360));
}

static void test_by_bytes(void **state)
{
    sfx *f = *state;
    stream_config cfg = {0};
    fill(f, &cfg);
    unsigned removed;
    assert_int_equal(stream_retain(f->log, 0, &removed), STREAM_OK);
    assert_int_equal(removed, 0); /* no limit set */
    cfg.max_bytes = 3 * 1808 + 1;
    assert_int_equal(stream_set_config(f->log, &cfg), STREAM_OK);
    assert_int_equal(stream_retain(f->log, 0, &removed), STREAM_OK);
    assert_int_equal(removed, 3);
    stream_info in;
    stream_get_info(f->log, &in);
    assert_int_equal(in.segments, 3);
    assert_int_equal(in.first_offset, 45);
    assert_int_equal(in.first_timestamp, 1150);
    assert_int_equal(count_files(f, ".segment"), 3);
    assert_int_equal(count_files(f, ".index"), 3);
    char path[128];
    seg_path(path, sizeof path, f, 30, "segment");
    assert_int_equal(file_size(path), -1);
    stream_reader *r = open_at(f, STREAM_START_OFFSET, 3, 0); /* clamped to the first */
    uint64_t first;
    assert_int_equal(read_all(r, &first), 45);
    assert_int_equal(first, 45);
    stream_reader_close(r);
    /* a limit below one segment still keeps the active one */
    cfg.max_bytes = 1;
    assert_int_equal(stream_set_config(f->log, &cfg), STREAM_OK);
    assert_int_equal(stream_retain(f->log, 0, &removed), STREAM_OK);
    assert_int_equal(removed, 2);
    stream_get_info(f->log, &in);
    assert_int_equal(in.segments, 1);
    assert_int_equal(in.first_offset, 75);
    /* an index whose segment went (a crash between the two unlinks) is
     * removed at open; and reopening agrees */
    seg_path(path, sizeof path, f, 0, "index");
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    close(fd);
    sfx_open(f, &cfg);
    assert_int_equal(file_size(path), -1);
    stream_info again;
    stream_get_info(f->log, &again);
    assert_memory_equal(&again, &in, sizeof in);
    /* deleting the stream leaves nothing */
    assert_int_equal(stream_delete(f->log), STREAM_OK);
    f->log = NULL;
    struct stat sb;
    assert_int_equal(stat(f->dir, &sb), -1);
}

static void test_by_age(void **state)
{
    sfx *f = *state;
    stream_config cfg = {.max_age_ms = 100};
    fill(f, &cfg);
    /* segment 0's newest chunk is at 1040, segment 15's at 1090: older
     * than 100 ms at 1141 and 1191 */
    unsigned removed;
    assert_int_equal(stream_retain(f->log, 1190, &removed), STREAM_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(stream_retain(f->log, 1191, &removed), STREAM_OK);
    assert_int_equal(removed, 1);
    stream_info in;
    stream_get_info(f->log, &in);
    assert_int_equal(in.first_offset, 30);
    assert_int_equal(in.first_timestamp, 1100);
    assert_int_equal(stream_retain(f->log, 1000000, &removed), STREAM_OK);
    assert_int_equal(removed, 3); /* never the active one */
    stream_get_info(f->log, &in);
    assert_int_equal(in.first_offset, 75);
    assert_int_equal(in.segments, 1);
    /* writing and reading go on */
    put_chunks(f, 1, 1, 10, 2000, NULL);
    stream_reader *r = open_at(f, STREAM_START_FIRST, 0, 0);
    assert_int_equal(read_all(r, NULL), 16);
    stream_reader_close(r);
}

static void test_readers_survive_removal(void **state)
{
    sfx *f = *state;
    stream_config cfg = {0};
    fill(f, &cfg);
    stream_reader *r = open_at(f, STREAM_START_FIRST, 0, 0);
    stream_reader *later = open_at(f, STREAM_START_TIMESTAMP, 0, 1020); /* chunk 2, segment 0 */
    stream_chunk c;
    for (int i = 0; i < 7; i++) /* into segment 15 */
        assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
    assert_int_equal(c.first_offset, 18);
    cfg.max_bytes = 3 * 1808;
    assert_int_equal(stream_set_config(f->log, &cfg), STREAM_OK);
    unsigned removed;
    assert_int_equal(stream_retain(f->log, 0, &removed), STREAM_OK);
    assert_int_equal(removed, 3);
    uint64_t first;
    assert_int_equal(read_all(r, &first), 45);
    assert_int_equal(first, 45);
    assert_int_equal(read_all(later, &first), 45);
    assert_int_equal(first, 45);
    stream_reader_close(r);
    stream_reader_close(later);
}

/* Outcomes as RabbitMQ 3.10.8 gave them to pika: ok, 406 invalid_max_age
 * (INV), or a crashed channel, 541 (NUM: no leading digit). */
static void test_age_strings(void **state)
{
    enum { INV = -1, NUM = -2 };
    static const struct {
        const char *s;
        int64_t ms;
    } cases[] = {
        {"7D", 7LL * 86400000}, {"12h", 12LL * 3600000}, {"30m", 30LL * 60000},
        {"10s", 10000},         {"1Y", 365LL * 86400000}, {"1M", 30LL * 86400000},
        {"007s", 7000},         {"99999999999999999999Y", INT64_MAX},
        {"10000000000000Y", INT64_MAX},
        {"0h", INV}, {"00s", INV}, {"10", INV},  {"10x", INV}, {"1.5h", INV}, {"1h ", INV},
        {"1hh", INV}, {"10S", INV}, {"1d", INV}, {"1H", INV},
        {"", NUM},  {"h", NUM},  {"-1h", NUM}, {"+1h", NUM}, {" 1h", NUM},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int64_t ms = 0;
        stream_age_status st = stream_parse_age(cases[i].s, strlen(cases[i].s), &ms);
        stream_age_status want = cases[i].ms == INV   ? STREAM_AGE_INVALID
                                 : cases[i].ms == NUM ? STREAM_AGE_NO_NUMBER
                                                      : STREAM_AGE_OK;
        if (st != want)
            fail_msg("\"%s\": %d, want %d", cases[i].s, st, want);
        if (want == STREAM_AGE_OK)
            assert_int_equal(ms, cases[i].ms);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_by_bytes, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_by_age, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_readers_survive_removal, sfx_setup, sfx_teardown),
        cmocka_unit_test(test_age_strings),
    };
    return cmocka_run_group_tests_name("stream_retention", tests, NULL, NULL);
}
