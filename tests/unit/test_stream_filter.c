/* Filtering: the per-chunk Bloom filter lets a reader skip chunks without a
 * wanted value without reading their data (counted), entries keep their
 * exact filter values outside the data a Deliver sends, and
 * match-unfiltered follows osiris_bloom's rules. */
#include "test_stream_util.h"

/* Reads a filtered reader to the end; returns how many entries pass the
 * filter exactly (each checked to be its offset's message). */
static uint64_t read_filtered(stream_reader *r, const stream_filter *flt, uint64_t *unfiltered)
{
    uint64_t n = 0;
    stream_chunk c;
    stream_status st;
    *unfiltered = 0;
    for (int guard = 0; (st = stream_reader_next(r, true, &c)) == STREAM_OK || st == STREAM_AGAIN; guard++) {
        assert_true(guard < 100000);
        if (st == STREAM_AGAIN)
            continue;
        stream_entry_iter it;
        stream_entry e;
        stream_entry_begin(&it, &c);
        while ((st = stream_entry_next(&it, &e)) == STREAM_OK) {
            check_msg(&e, e.offset);
            if (!stream_filter_match(flt, &e))
                continue;
            n++;
            *unfiltered += e.filter == NULL;
        }
        assert_int_equal(st, STREAM_END);
    }
    assert_int_equal(st, STREAM_END);
    return n;
}

static void test_one_percent_reads_few_chunks(void **state)
{
    sfx *f = *state;
    stream_config cfg = {.max_segment_bytes = 64 * 1024};
    sfx_open(f, &cfg);
    char v[16], body[4096];
    for (int c = 0; c < 1000; c++) { /* chunk c: 10 messages with value v<c % 100> */
        snprintf(v, sizeof v, "v%d", c % 100);
        for (int i = 0; i < 10; i++) {
            stream_part p = {body, msg_body(body, 100, (uint64_t)(c * 10 + i))};
            assert_int_equal(stream_builder_add(f->b, &p, 1, v, strlen(v)), STREAM_OK);
        }
        assert_int_equal(stream_append(f->log, f->b, c, NULL), STREAM_OK);
    }
    assert_int_equal(stream_sync(f->log), STREAM_OK);
    stream_part want = {"v7", 2};
    stream_filter flt = {&want, 1, false};
    stream_start first = {STREAM_START_FIRST, 0, 0};
    stream_reader *r;
    assert_int_equal(stream_reader_open(f->log, &first, &flt, &r), STREAM_OK);
    uint64_t unf;
    assert_int_equal(read_filtered(r, &flt, &unf), 100);
    assert_int_equal(unf, 0);
    stream_reader_stats st;
    stream_reader_get_stats(r, &st);
    stream_reader_close(r);
    /* 10 chunks hold v7; a 128-bit filter with two bits set per chunk lets
     * through very few others */
    assert_true(st.chunks_read >= 10 && st.chunks_read <= 15);
    assert_int_equal(st.chunks_read + st.chunks_skipped, 1000);
    assert_true(st.bytes_read <= 15 * 10 * 104);
    assert_true(st.bytes_skipped >= 985 * 10 * 104);
    /* an unfiltered replay reads everything */
    r = open_at(f, STREAM_START_FIRST, 0, 0);
    assert_int_equal(read_all(r, NULL), 10000);
    stream_reader_get_stats(r, &st);
    assert_int_equal(st.chunks_read, 1000);
    assert_int_equal(st.chunks_skipped, 0);
    assert_int_equal(st.bytes_read, 1000 * 10 * 104);
    stream_reader_close(r);
}

static void add(sfx *f, uint64_t o, const char *value)
{
    char body[4096];
    stream_part p = {body, msg_body(body, 20, o)};
    assert_int_equal(stream_builder_add(f->b, &p, 1, value, value ? strlen(value) : 0), STREAM_OK);
}

static void test_exact_values_and_unfiltered(void **state)
{
    sfx *f = *state;
    sfx_open(f, NULL);
    /* chunk 0: a, b, unfiltered, a; chunk 1: only unfiltered; chunk 2: c */
    add(f, 0, "a");
    add(f, 1, "b");
    add(f, 2, NULL);
    add(f, 3, "a");
    assert_int_equal(stream_append(f->log, f->b, 1, NULL), STREAM_OK);
    add(f, 4, NULL);
    add(f, 5, "");
    assert_int_equal(stream_append(f->log, f->b, 2, NULL), STREAM_OK);
    add(f, 6, "c");
    assert_int_equal(stream_append(f->log, f->b, 3, NULL), STREAM_OK);
    assert_int_equal(stream_sync(f->log), STREAM_OK);
    stream_part want = {"a", 1};
    stream_filter only_a = {&want, 1, false}, a_and_none = {&want, 1, true};
    stream_start first = {STREAM_START_FIRST, 0, 0};
    stream_reader *r;
    uint64_t unf;
    assert_int_equal(stream_reader_open(f->log, &first, &only_a, &r), STREAM_OK);
    assert_int_equal(read_filtered(r, &only_a, &unf), 2);
    stream_reader_stats st;
    stream_reader_get_stats(r, &st);
    assert_int_equal(st.chunks_read, 1);
    assert_int_equal(st.chunks_skipped, 2); /* no filter at all, and "c" only */
    stream_reader_close(r);
    assert_int_equal(stream_reader_open(f->log, &first, &a_and_none, &r), STREAM_OK);
    assert_int_equal(read_filtered(r, &a_and_none, &unf), 5);
    assert_int_equal(unf, 3);
    stream_reader_get_stats(r, &st);
    assert_int_equal(st.chunks_read, 2);
    stream_reader_close(r);
    /* only unfiltered entries wanted: an empty value list */
    stream_filter none = {NULL, 0, true};
    assert_int_equal(stream_reader_open(f->log, &first, &none, &r), STREAM_OK);
    assert_int_equal(read_filtered(r, &none, &unf), 3);
    stream_reader_close(r);
    stream_filter nothing = {NULL, 0, false};
    assert_int_equal(stream_reader_open(f->log, &first, &nothing, &r), STREAM_EINVAL);
}

/* The values stay out of the data (what goes to the wire): they live in
 * the trailer, and the header counts the filter's bytes. */
static void test_values_stay_off_the_wire(void **state)
{
    sfx *f = *state;
    stream_config cfg = {.filter_size = 255};
    sfx_open(f, &cfg);
    add(f, 0, "needle-value");
    add(f, 1, NULL);
    assert_int_equal(stream_append(f->log, f->b, 1, NULL), STREAM_OK);
    add(f, 2, NULL);
    assert_int_equal(stream_append(f->log, f->b, 2, NULL), STREAM_OK);
    cfg.filter_size = 16; /* a policy change: later chunks use 16 bytes */
    assert_int_equal(stream_set_config(f->log, &cfg), STREAM_OK);
    add(f, 3, "needle-value");
    assert_int_equal(stream_append(f->log, f->b, 3, NULL), STREAM_OK);
    assert_int_equal(stream_sync(f->log), STREAM_OK);
    stream_reader *r = open_at(f, STREAM_START_FIRST, 0, 0);
    stream_chunk c;
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
    assert_int_equal(c.filter_size, 255);
    assert_int_equal(c.header[44], 255);
    assert_int_equal(c.data_len, 2 * (4 + 20));
    assert_null(memmem(c.data, c.data_len, "needle", 6));
    assert_non_null(c.filter_values);
    stream_entry_iter it;
    stream_entry e;
    stream_entry_begin(&it, &c);
    assert_int_equal(stream_entry_next(&it, &e), STREAM_OK);
    assert_int_equal(e.filter_len, 12);
    assert_memory_equal(e.filter, "needle-value", 12);
    assert_int_equal(stream_entry_next(&it, &e), STREAM_OK);
    assert_null(e.filter);
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
    assert_int_equal(c.filter_size, 0); /* no values: no filter, no trailer (as osiris) */
    assert_int_equal(c.trailer_len, 0);
    assert_null(c.filter_values);
    stream_reader_close(r);
    /* a filtered reader handles both filter sizes */
    stream_part want = {"needle-value", 12};
    stream_filter flt = {&want, 1, false};
    stream_start first = {STREAM_START_FIRST, 0, 0};
    assert_int_equal(stream_reader_open(f->log, &first, &flt, &r), STREAM_OK);
    uint64_t unf;
    assert_int_equal(read_filtered(r, &flt, &unf), 2);
    stream_reader_stats st;
    stream_reader_get_stats(r, &st);
    assert_int_equal(st.chunks_read, 2);
    assert_int_equal(st.chunks_skipped, 1);
    stream_reader_close(r);
}

/* However much the filter skips, one call passes over at most
 * STREAM_SKIP_MAX chunks. */
static void test_long_skips_come_back(void **state)
{
    sfx *f = *state;
    sfx_open(f, NULL);
    char body[4096];
    for (uint64_t o = 0; o < 10001; o++) {
        stream_part p = {body, msg_body(body, 10, o)};
        const char *v = o == 10000 ? "rare" : "common";
        assert_int_equal(stream_builder_add(f->b, &p, 1, v, strlen(v)), STREAM_OK);
        assert_int_equal(stream_append(f->log, f->b, (int64_t)o, NULL), STREAM_OK);
    }
    assert_int_equal(stream_sync(f->log), STREAM_OK);
    stream_part want = {"rare", 4};
    stream_filter flt = {&want, 1, false};
    stream_start first = {STREAM_START_FIRST, 0, 0};
    stream_reader *r;
    assert_int_equal(stream_reader_open(f->log, &first, &flt, &r), STREAM_OK);
    stream_chunk c;
    int again = 0;
    stream_status st;
    while ((st = stream_reader_next(r, false, &c)) == STREAM_AGAIN)
        assert_true(++again < 10);
    assert_int_equal(st, STREAM_OK);
    assert_int_equal(c.first_offset, 10000);
    assert_int_equal(again, 10000 / STREAM_SKIP_MAX);
    stream_reader_stats stats;
    stream_reader_get_stats(r, &stats);
    assert_int_equal(stats.chunks_skipped, 10000);
    assert_int_equal(stats.bytes_read, 0); /* not loaded: a sendfile reader */
    assert_int_equal(stream_reader_next(r, false, &c), STREAM_END);
    stream_reader_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_percent_reads_few_chunks, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_exact_values_and_unfiltered, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_values_stay_off_the_wire, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_long_skips_come_back, sfx_setup, sfx_teardown),
    };
    return cmocka_run_group_tests_name("stream_filter", tests, NULL, NULL);
}
