/* The stream log: chunks written and read back across segment rolls and a
 * reopen, commit visibility, every start (first, last, next, offset,
 * timestamp), sub-batch entries, tracking chunks, the chunk bytes a
 * stream-protocol Deliver sends, and the builder's limits. */
#include <pthread.h>
#include <zlib.h>

#include "test_stream_util.h"

static void test_round_trip_across_rolls_and_reopen(void **state)
{
    sfx *f = *state;
    stream_config cfg = {.max_segment_bytes = 4096};
    sfx_open(f, &cfg);
    put_chunks(f, 100, 10, 100, 1000, NULL);
    stream_info in;
    stream_get_info(f->log, &in);
    assert_false(in.empty);
    assert_int_equal(in.first_offset, 0);
    assert_int_equal(in.next_offset, 1000);
    assert_int_equal(in.committed_offset, 1000);
    assert_int_equal(in.last_chunk_id, 990);
    assert_int_equal(in.chunks, 100);
    assert_true(in.segments >= 25);
    assert_int_equal(count_files(f, ".segment"), in.segments);
    assert_int_equal(count_files(f, ".index"), in.segments);
    /* each segment but the last passed 4096 bytes by less than one chunk */
    char path[128];
    seg_path(path, sizeof path, f, 0, "segment");
    assert_true(file_size(path) >= 4096 && file_size(path) < 4096 + 1200);
    for (int pass = 0; pass < 2; pass++) {
        uint64_t first;
        stream_reader *r = open_at(f, STREAM_START_FIRST, 0, 0);
        assert_int_equal(read_all(r, &first), 1000);
        assert_int_equal(first, 0);
        assert_int_equal(stream_reader_offset(r), 1000);
        stream_reader_close(r);
        sfx_open(f, &cfg); /* again after a clean reopen */
        stream_info again;
        stream_get_info(f->log, &again);
        assert_memory_equal(&again, &in, sizeof in);
    }
    put_chunks(f, 1, 1, 10, 5000, NULL);
    stream_get_info(f->log, &in);
    assert_int_equal(in.next_offset, 1001);
}

static void test_only_synced_chunks_are_read(void **state)
{
    sfx *f = *state;
    sfx_open(f, NULL);
    stream_reader *r = open_at(f, STREAM_START_FIRST, 0, 0);
    stream_chunk c;
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_END);
    stream_part p = {"x", 1};
    assert_int_equal(stream_builder_add(f->b, &p, 1, NULL, 0), STREAM_OK);
    assert_int_equal(stream_append(f->log, f->b, 1, NULL), STREAM_OK);
    assert_true(stream_builder_empty(f->b));
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_END);
    stream_info in;
    stream_get_info(f->log, &in);
    assert_int_equal(in.next_offset, 1);
    assert_int_equal(in.committed_offset, 0);
    assert_int_equal(stream_sync(f->log), STREAM_OK);
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
    assert_int_equal(c.first_offset, 0);
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_END);
    stream_reader_close(r);
}

/* A reader kept at the tail while chunks keep coming, across rolls: its
 * read-ahead window never serves bytes it read before they were written. */
static void test_tailing_reader(void **state)
{
    sfx *f = *state;
    stream_config cfg = {.max_segment_bytes = 8000};
    sfx_open(f, &cfg);
    stream_reader *r = open_at(f, STREAM_START_NEXT, 0, 0);
    stream_reader *filtered;
    stream_part want = {"odd", 3};
    stream_filter flt = {&want, 1, false};
    stream_start next = {STREAM_START_NEXT, 0, 0};
    assert_int_equal(stream_reader_open(f->log, &next, &flt, &filtered), STREAM_OK);
    uint64_t first, total = 0;
    for (int i = 0; i < 300; i++) {
        put_chunks(f, 1, 3, 30 + i % 7, i, i % 2 ? "odd" : "even");
        assert_int_equal(read_all(r, &first), 3);
        assert_int_equal(first, 3 * (uint64_t)i);
        total += read_all(filtered, &first);
    }
    assert_int_equal(total, 450);
    stream_info in;
    stream_get_info(f->log, &in);
    assert_true(in.segments > 3);
    stream_reader_close(r);
    stream_reader_close(filtered);
}

static void *run_ticket(void *arg)
{
    return stream_sync_run(arg) == STREAM_OK ? arg : NULL;
}

/* Group commit off the loop thread: what prepare saw is committed, what
 * was appended while the sync ran is not, across a roll too. */
static void test_sync_in_three_steps(void **state)
{
    sfx *f = *state;
    stream_config cfg = {.max_segment_bytes = 300};
    sfx_open(f, &cfg);
    put_chunks(f, 1, 2, 50, 1, NULL);
    stream_part p = {"m2..", 4};
    assert_int_equal(stream_builder_add(f->b, &p, 1, NULL, 0), STREAM_OK);
    assert_int_equal(stream_append(f->log, f->b, 2, NULL), STREAM_OK);
    stream_sync_ticket t;
    assert_int_equal(stream_sync_prepare(f->log, &t), STREAM_OK);
    pthread_t syncer; /* the sync runs on its own thread, as a loop would run it */
    assert_int_equal(pthread_create(&syncer, NULL, run_ticket, &t), 0);
    for (uint64_t o = 3; o < 8; o++) { /* meanwhile: more, and a roll */
        char body[4096];
        stream_part q = {body, msg_body(body, 100, o)};
        assert_int_equal(stream_builder_add(f->b, &q, 1, NULL, 0), STREAM_OK);
        assert_int_equal(stream_append(f->log, f->b, (int64_t)o, NULL), STREAM_OK);
    }
    stream_info in;
    stream_get_info(f->log, &in);
    assert_true(in.segments > 1);
    void *res;
    assert_int_equal(pthread_join(syncer, &res), 0);
    assert_ptr_equal(res, &t);
    stream_sync_complete(f->log, &t);
    stream_get_info(f->log, &in);
    assert_int_equal(in.committed_offset, 3);
    assert_int_equal(in.committed_chunk_id, 2);
    stream_reader *r = open_at(f, STREAM_START_FIRST, 0, 0);
    assert_int_equal(read_all(r, NULL), 3);
    assert_int_equal(stream_sync(f->log), STREAM_OK);
    assert_int_equal(read_all(r, NULL), 5);
    stream_reader_close(r);
    /* nothing appended: a ticket with nothing to do */
    assert_int_equal(stream_sync_prepare(f->log, &t), STREAM_OK);
    assert_int_equal(t.fd, -1);
    assert_int_equal(stream_sync_run(&t), STREAM_OK);
    stream_sync_complete(f->log, &t);
}

static uint64_t first_read(sfx *f, stream_start_kind kind, uint64_t o, int64_t ts, uint64_t *count)
{
    stream_reader *r = open_at(f, kind, o, ts);
    uint64_t first;
    *count = read_all(r, &first);
    stream_reader_close(r);
    return first;
}

static void test_every_start(void **state)
{
    sfx *f = *state;
    stream_config cfg = {.max_segment_bytes = 2048};
    sfx_open(f, &cfg);
    put_chunks(f, 50, 10, 50, 1000, NULL); /* offsets 0..499, chunk c at ts 1000+c */
    uint64_t n;
    assert_int_equal(first_read(f, STREAM_START_FIRST, 0, 0, &n), 0);
    assert_int_equal(n, 500);
    assert_int_equal(first_read(f, STREAM_START_LAST, 0, 0, &n), 490);
    assert_int_equal(n, 10);
    assert_int_equal(first_read(f, STREAM_START_NEXT, 0, 0, &n), UINT64_MAX);
    assert_int_equal(n, 0);
    /* an offset inside a chunk: the records before it are skipped */
    assert_int_equal(first_read(f, STREAM_START_OFFSET, 255, 0, &n), 255);
    assert_int_equal(n, 245);
    assert_int_equal(first_read(f, STREAM_START_OFFSET, 260, 0, &n), 260);
    assert_int_equal(n, 240);
    assert_int_equal(first_read(f, STREAM_START_OFFSET, 499, 0, &n), 499);
    assert_int_equal(n, 1);
    assert_int_equal(first_read(f, STREAM_START_OFFSET, 500, 0, &n), UINT64_MAX);
    assert_int_equal(first_read(f, STREAM_START_OFFSET, 1u << 30, 0, &n), UINT64_MAX);
    /* timestamps: the first chunk at or after */
    assert_int_equal(first_read(f, STREAM_START_TIMESTAMP, 0, 1000, &n), 0);
    assert_int_equal(first_read(f, STREAM_START_TIMESTAMP, 0, -5, &n), 0);
    assert_int_equal(first_read(f, STREAM_START_TIMESTAMP, 0, 1017, &n), 170);
    assert_int_equal(n, 330);
    assert_int_equal(first_read(f, STREAM_START_TIMESTAMP, 0, 1049, &n), 490);
    assert_int_equal(first_read(f, STREAM_START_TIMESTAMP, 0, 1050, &n), UINT64_MAX);
    /* "last" is the last committed chunk, not one appended but not synced */
    stream_part p = {"m500", 4};
    assert_int_equal(stream_builder_add(f->b, &p, 1, NULL, 0), STREAM_OK);
    assert_int_equal(stream_append(f->log, f->b, 1100, NULL), STREAM_OK);
    assert_int_equal(first_read(f, STREAM_START_LAST, 0, 0, &n), 490);
    assert_int_equal(n, 10);
    assert_int_equal(stream_sync(f->log), STREAM_OK);
    assert_int_equal(first_read(f, STREAM_START_LAST, 0, 0, &n), 500);
    /* next, then more is written: the reader sees only that */
    stream_reader *r = open_at(f, STREAM_START_NEXT, 0, 0);
    stream_reader *last = open_at(f, STREAM_START_LAST, 0, 0);
    put_chunks(f, 3, 2, 20, 2000, NULL);
    uint64_t first;
    assert_int_equal(read_all(r, &first), 6);
    assert_int_equal(first, 501);
    assert_int_equal(read_all(last, &first), 7);
    assert_int_equal(first, 500);
    stream_reader_close(r);
    stream_reader_close(last);
}

static void test_timestamps_between_chunks_and_segments(void **state)
{
    sfx *f = *state;
    stream_config cfg = {.max_segment_bytes = 1024};
    sfx_open(f, &cfg);
    for (int c = 0; c < 40; c++)
        put_chunks(f, 1, 3, 40, 10000 + c * 100, NULL); /* chunk c = offsets 3c.. at 10000+100c */
    stream_info in;
    stream_get_info(f->log, &in);
    assert_true(in.segments > 5);
    uint64_t n;
    for (int c = 0; c < 40; c++) {
        assert_int_equal(first_read(f, STREAM_START_TIMESTAMP, 0, 10000 + c * 100, &n), 3 * c);
        assert_int_equal(first_read(f, STREAM_START_TIMESTAMP, 0, 10000 + c * 100 - 50, &n), 3 * c);
        assert_int_equal(n, 120 - 3 * c);
    }
}

static void test_sub_batches_count_as_records(void **state)
{
    sfx *f = *state;
    sfx_open(f, NULL);
    const char body[] = "five records, compressed or not";
    assert_int_equal(stream_builder_add_batch(f->b, 1, 5, 100, body, sizeof body, NULL, 0), STREAM_OK);
    stream_part p = {"m5", 2};
    assert_int_equal(stream_builder_add(f->b, &p, 1, NULL, 0), STREAM_OK);
    assert_int_equal(stream_builder_records(f->b), 6);
    assert_int_equal(stream_builder_add_batch(f->b, 8, 1, 1, "x", 1, NULL, 0), STREAM_EINVAL);
    assert_int_equal(stream_builder_add_batch(f->b, 0, 0, 1, "x", 1, NULL, 0), STREAM_EINVAL);
    assert_int_equal(stream_append(f->log, f->b, 7, NULL), STREAM_OK);
    put_chunks(f, 1, 1, 10, 8, NULL);
    stream_reader *r = open_at(f, STREAM_START_FIRST, 0, 0);
    stream_chunk c;
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
    assert_int_equal(c.num_entries, 2);
    assert_int_equal(c.num_records, 6);
    stream_entry_iter it;
    stream_entry e;
    stream_entry_begin(&it, &c);
    assert_int_equal(stream_entry_next(&it, &e), STREAM_OK);
    assert_true(e.batch);
    assert_int_equal(e.offset, 0);
    assert_int_equal(e.records, 5);
    assert_int_equal(e.compression, 1);
    assert_int_equal(e.uncompressed_len, 100);
    assert_int_equal(e.len, sizeof body);
    assert_memory_equal(e.bytes, body, sizeof body);
    assert_int_equal(stream_entry_next(&it, &e), STREAM_OK);
    assert_false(e.batch);
    assert_int_equal(e.offset, 5);
    assert_int_equal(stream_entry_next(&it, &e), STREAM_END);
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
    assert_int_equal(c.first_offset, 6);
    stream_reader_close(r);
    /* a start inside the batch gets the whole batch (it cannot be split) */
    r = open_at(f, STREAM_START_OFFSET, 3, 0);
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
    stream_entry_begin(&it, &c);
    assert_int_equal(stream_entry_next(&it, &e), STREAM_OK);
    assert_int_equal(e.offset, 0);
    assert_int_equal(e.records, 5);
    stream_reader_close(r);
}

/* The stored chunk, byte for byte, as osiris lays it out; what a Deliver
 * frame carries is its header and then its data. */
static void test_chunk_bytes_and_wire_view(void **state)
{
    sfx *f = *state;
    stream_config cfg = {.epoch = 3};
    sfx_open(f, &cfg);
    put_chunks(f, 1, 1, 1, 0, NULL); /* offset 0: "m0" */
    stream_part p = {"hello", 5};
    assert_int_equal(stream_builder_add(f->b, &p, 1, NULL, 0), STREAM_OK);
    assert_int_equal(stream_append(f->log, f->b, 0x0102030405LL, NULL), STREAM_OK);
    assert_int_equal(stream_sync(f->log), STREAM_OK);
    const uint8_t data[] = {0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'};
    uint32_t crc = (uint32_t)crc32(0, data, sizeof data);
    const uint8_t want[48] = {
        0x50, 0, 0, 1,  0, 0, 0, 1,  0, 0, 0, 1, 2, 3, 4, 5,  0, 0, 0, 0, 0, 0, 0, 3,
        0, 0, 0, 0, 0, 0, 0, 1,  (uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8),
        (uint8_t)crc, 0, 0, 0, 9,  0, 0, 0, 0,  0, 0, 0, 0};
    stream_reader *r = open_at(f, STREAM_START_OFFSET, 1, 0);
    stream_chunk c;
    assert_int_equal(stream_reader_next(r, false, &c), STREAM_OK);
    assert_memory_equal(c.header, want, 48);
    assert_null(c.data);
    uint8_t got[9];
    assert_int_equal(pread(c.fd, got, 9, c.data_pos), 9);
    assert_memory_equal(got, data, 9);
    stream_reader_close(r);
    /* the segment file: "OSIL" 1, chunk 0 (48 + 6 bytes), then this one */
    char path[128];
    seg_path(path, sizeof path, f, 0, "segment");
    int fd = open(path, O_RDONLY);
    uint8_t file[8 + 54 + 57];
    assert_int_equal(read(fd, file, sizeof file), sizeof file);
    assert_int_equal(read(fd, got, 1), 0);
    close(fd);
    assert_memory_equal(file, "OSIL\0\0\0\1", 8);
    assert_memory_equal(file + 62, want, 48);
    assert_memory_equal(file + 110, data, 9);
    /* the index: "OSII" 1, then 29 bytes per chunk */
    seg_path(path, sizeof path, f, 0, "index");
    assert_int_equal(file_size(path), 8 + 2 * 29);
    fd = open(path, O_RDONLY);
    uint8_t idx[8 + 58];
    assert_int_equal(read(fd, idx, sizeof idx), sizeof idx);
    close(fd);
    const uint8_t rec1[29] = {0, 0, 0, 0, 0, 0, 0, 1,  0, 0, 0, 1, 2, 3, 4, 5,
                              0, 0, 0, 0, 0, 0, 0, 3,  0, 0, 0, 62,  0};
    assert_memory_equal(idx, "OSII\0\0\0\1", 8);
    assert_memory_equal(idx + 37, rec1, 29);
}

static void test_tracking_chunks_are_passed_over(void **state)
{
    sfx *f = *state;
    sfx_open(f, NULL);
    put_chunks(f, 1, 2, 10, 1, NULL);
    assert_int_equal(stream_append_tracking(f->log, STREAM_CHUNK_TRACKING_SNAPSHOT, "trk", 3, 2), STREAM_OK);
    assert_int_equal(stream_append_tracking(f->log, STREAM_CHUNK_USER, "trk", 3, 2), STREAM_EINVAL);
    put_chunks(f, 1, 2, 10, 3, NULL);
    stream_info in;
    stream_get_info(f->log, &in);
    assert_int_equal(in.next_offset, 5); /* the tracking chunk took offset 2 */
    stream_reader *r = open_at(f, STREAM_START_FIRST, 0, 0);
    stream_chunk c;
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
    assert_int_equal(c.first_offset, 0);
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
    assert_int_equal(c.first_offset, 3);
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_END);
    stream_reader_close(r);
    /* "last" is the last user chunk, even behind a tracking chunk */
    assert_int_equal(stream_append_tracking(f->log, STREAM_CHUNK_TRACKING_DELTA, "d", 1, 4), STREAM_OK);
    assert_int_equal(stream_sync(f->log), STREAM_OK);
    uint64_t n;
    assert_int_equal(first_read(f, STREAM_START_LAST, 0, 0, &n), 3);
    sfx_open(f, NULL); /* tracking chunks survive recovery's checks */
    stream_get_info(f->log, &in);
    assert_int_equal(in.next_offset, 6);
    /* a user chunk's own tracking bytes sit after its filter values */
    stream_part p = {"m6", 2};
    assert_int_equal(stream_builder_add(f->b, &p, 1, "val", 3), STREAM_OK);
    assert_int_equal(stream_builder_set_tracking(f->b, "\0\3pub\0\0\0\0\0\0\0\7", 13), STREAM_OK);
    assert_int_equal(stream_append(f->log, f->b, 5, NULL), STREAM_OK);
    assert_int_equal(stream_sync(f->log), STREAM_OK);
    r = open_at(f, STREAM_START_FIRST, 0, 0);
    stream_reader_include_tracking(r);
    uint64_t ids[] = {0, 2, 3, 5, 6};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
        assert_int_equal(c.first_offset, ids[i]);
    }
    assert_int_equal(c.type, STREAM_CHUNK_USER);
    assert_int_equal(c.tracking_len, 13);
    assert_memory_equal(c.tracking, "\0\3pub", 5);
    assert_int_equal(c.filter_values_len, 5);
    stream_entry_iter it;
    stream_entry e;
    stream_entry_begin(&it, &c);
    assert_int_equal(stream_entry_next(&it, &e), STREAM_OK);
    assert_memory_equal(e.filter, "val", 3);
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_END);
    stream_reader_close(r);
    r = open_at(f, STREAM_START_OFFSET, 2, 0); /* a tracking chunk's entry reads as data */
    stream_reader_include_tracking(r);
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
    assert_int_equal(c.type, STREAM_CHUNK_TRACKING_SNAPSHOT);
    assert_null(c.tracking);
    stream_entry_begin(&it, &c);
    assert_int_equal(stream_entry_next(&it, &e), STREAM_OK);
    assert_int_equal(e.len, 3);
    assert_memory_equal(e.bytes, "trk", 3);
    stream_reader_close(r);
}

static void test_builder_limits(void **state)
{
    sfx *f = *state;
    sfx_open(f, NULL);
    stream_part p = {"", 0};
    for (int i = 0; i < STREAM_MAX_ENTRIES; i++)
        assert_int_equal(stream_builder_add(f->b, &p, 1, NULL, 0), STREAM_OK);
    assert_int_equal(stream_builder_add(f->b, &p, 1, NULL, 0), STREAM_FULL);
    assert_int_equal(stream_append(f->log, f->b, 1, NULL), STREAM_OK);
    assert_int_equal(stream_builder_add(f->b, &p, 1, NULL, 0), STREAM_OK);
    char big[STREAM_FILTER_VALUE_MAX + 1] = {0};
    assert_int_equal(stream_builder_add(f->b, &p, 1, big, sizeof big), STREAM_EINVAL);
    stream_part huge = {big, STREAM_CHUNK_DATA_MAX};
    assert_int_equal(stream_builder_add(f->b, &huge, 1, NULL, 0), STREAM_EINVAL);
    assert_int_equal(stream_append(f->log, f->b, 2, NULL), STREAM_OK);
    assert_int_equal(stream_sync(f->log), STREAM_OK);
    stream_reader *r = open_at(f, STREAM_START_FIRST, 0, 0);
    stream_chunk c;
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
    assert_int_equal(c.num_entries, STREAM_MAX_ENTRIES);
    assert_int_equal(c.data_len, 4 * STREAM_MAX_ENTRIES);
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_OK);
    assert_int_equal(c.first_offset, STREAM_MAX_ENTRIES);
    assert_int_equal(stream_reader_next(r, true, &c), STREAM_END);
    stream_reader_close(r);
    stream_config bad = {.filter_size = 15};
    stream_log *log;
    assert_int_equal(stream_open(f->dir, &bad, &log), STREAM_EINVAL);
    bad = (stream_config){.max_segment_bytes = 1ULL << 33};
    assert_int_equal(stream_open(f->dir, &bad, &log), STREAM_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_across_rolls_and_reopen, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_only_synced_chunks_are_read, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_every_start, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_tailing_reader, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_sync_in_three_steps, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_timestamps_between_chunks_and_segments, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_sub_batches_count_as_records, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_chunk_bytes_and_wire_view, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_tracking_chunks_are_passed_over, sfx_setup, sfx_teardown),
        cmocka_unit_test_setup_teardown(test_builder_limits, sfx_setup, sfx_teardown),
    };
    return cmocka_run_group_tests_name("stream_log", tests, NULL, NULL);
}
