/* Unit tests for the stream protocol's framing and output buffer
 * (streamproto/frame.c): whole frames, every partial length, sizes over
 * frame_max caught from the 4 size bytes alone, sizes near UINT32_MAX,
 * sizes too small to hold a key and version, the 8192-byte cap before Open
 * (RabbitMQ's stream.initial_frame_max), frame_max negotiation (rabbit_stream_
 * reader.erl's negotiate_frame_max), and frames that never land half-written
 * in a buffer too small for them. */
#include "test_streamproto_util.h"

/* A Heartbeat as RabbitMQ sends it. */
static const uint8_t heartbeat[] = {0, 0, 0, 4, 0, 0x17, 0, 1};

static void test_whole_frame(void **state)
{
    uint8_t *b = dup_exact(heartbeat, sizeof heartbeat);
    sp_frame f;
    size_t used;
    assert_int_equal(sp_frame_next(b, sizeof heartbeat, 0, &f, &used), SP_DONE);
    assert_int_equal(used, 8);
    assert_int_equal(f.size, 4);
    assert_int_equal(f.key, SP_HEARTBEAT);
    assert_int_equal(f.version, 1);
    assert_int_equal(f.body_len, 0);
    assert_ptr_equal(f.body, b + 8);
    free(b);
}

static void test_two_frames_and_a_partial(void **state)
{
    uint8_t buf[64];
    uint8_t body[] = {0, 0, 0, 7, 1, 2};
    size_t n = frame_of(buf, sizeof buf, SP_QUERY_OFFSET, 1, body, sizeof body);
    n += frame_of(buf + n, sizeof buf - n, SP_HEARTBEAT, 1, NULL, 0);
    memcpy(buf + n, heartbeat, 5);
    uint8_t *b = dup_exact(buf, n + 5);
    sp_frame f;
    size_t used, off = 0;
    assert_int_equal(sp_frame_next(b, n + 5, 0, &f, &used), SP_DONE);
    assert_int_equal(f.key, SP_QUERY_OFFSET);
    assert_int_equal(f.body_len, 6);
    assert_memory_equal(f.body, body, 6);
    off += used;
    assert_int_equal(sp_frame_next(b + off, n + 5 - off, 0, &f, &used), SP_DONE);
    assert_int_equal(f.key, SP_HEARTBEAT);
    off += used;
    assert_int_equal(off, n);
    assert_int_equal(sp_frame_next(b + off, 5, 0, &f, &used), SP_NEED_MORE);
    assert_int_equal(used, 0);
    assert_int_equal(f.size, 4);
    free(b);
}

/* Every prefix of a frame needs more; from 4 bytes on the size is known. */
static void test_every_partial_length(void **state)
{
    uint8_t buf[300], body[256];
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (uint8_t)i;
    size_t n = frame_of(buf, sizeof buf, SP_PUBLISH, 1, body, sizeof body);
    for (size_t len = 0; len < n; len++) {
        uint8_t *b = dup_exact(buf, len);
        sp_frame f = {0};
        size_t used = 99;
        assert_int_equal(sp_frame_next(b, len, 1024, &f, &used), SP_NEED_MORE);
        assert_int_equal(used, 0);
        if (len >= 4)
            assert_int_equal(f.size, 260);
        free(b);
    }
    uint8_t *b = dup_exact(buf, n);
    sp_frame f;
    size_t used;
    assert_int_equal(sp_frame_next(b, n, 1024, &f, &used), SP_DONE);
    assert_int_equal(used, n);
    free(b);
}

/* Too large is known from the size alone, before any body byte. */
static void test_too_large_from_size_alone(void **state)
{
    static const uint32_t sizes[] = {101, 1000, 0x7FFFFFFF, 0xFFFFFFFF};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t h[4] = {(uint8_t)(sizes[i] >> 24), (uint8_t)(sizes[i] >> 16),
                        (uint8_t)(sizes[i] >> 8), (uint8_t)sizes[i]};
        uint8_t *b = dup_exact(h, 4);
        sp_frame f;
        size_t used;
        assert_int_equal(sp_frame_next(b, 4, 100, &f, &used), SP_TOO_LARGE);
        assert_int_equal(f.size, sizes[i]);
        /* no bound: wait for the body, without overflowing */
        assert_int_equal(sp_frame_next(b, 4, 0, &f, &used), SP_NEED_MORE);
        free(b);
    }
    uint8_t h[4] = {0, 0, 0, 100}; /* exactly frame_max: taken */
    sp_frame f;
    size_t used;
    assert_int_equal(sp_frame_next(h, 4, 100, &f, &used), SP_NEED_MORE);
}

/* Over frame_max at every size around it and every number of bytes in:
 * too large from the 4th byte on, whatever else has arrived. */
static void test_too_large_at_every_length(void **state)
{
    uint8_t buf[4 + 80] = {0};
    for (uint32_t size = 60; size <= 72; size++) {
        buf[3] = (uint8_t)size;
        buf[5] = SP_PUBLISH;
        buf[7] = 1;
        for (size_t have = 0; have <= 4 + size; have++) {
            uint8_t *b = dup_exact(buf, have);
            sp_frame f;
            size_t used;
            sp_status want = have < 4 ? SP_NEED_MORE
                             : size > 64 ? SP_TOO_LARGE
                             : have < 4 + size ? SP_NEED_MORE : SP_DONE;
            assert_int_equal(sp_frame_next(b, have, 64, &f, &used), want);
            free(b);
        }
    }
}

/* A size under 4 cannot hold key and version (RabbitMQ 3.10.8 closes the
 * socket on "00000001 00"). */
static void test_size_too_small(void **state)
{
    for (uint8_t size = 0; size < 4; size++) {
        uint8_t buf[8] = {0, 0, 0, size, 0, 0x11, 0, 1};
        uint8_t *b = dup_exact(buf, 4 + size);
        sp_frame f;
        size_t used;
        assert_int_equal(sp_frame_next(b, 4 + size, 0, &f, &used), SP_MALFORMED);
        free(b);
    }
}

/* Before Open: 8192 bytes after the size field, whatever Tune said. */
static void test_pre_open_cap(void **state)
{
    assert_int_equal(sp_pre_open_frame_max(SP_DEFAULT_FRAME_MAX), 8192);
    assert_int_equal(sp_pre_open_frame_max(0), 8192);
    assert_int_equal(sp_pre_open_frame_max(4096), 4096);

    size_t cap = 8200;
    uint8_t *buf = calloc(1, cap);
    assert_non_null(buf);
    uint32_t max = sp_pre_open_frame_max(SP_DEFAULT_FRAME_MAX);
    for (uint32_t size = 8190; size <= 8194; size++) {
        buf[0] = (uint8_t)(size >> 24);
        buf[1] = (uint8_t)(size >> 16);
        buf[2] = (uint8_t)(size >> 8);
        buf[3] = (uint8_t)size;
        buf[5] = SP_PEER_PROPERTIES;
        sp_frame f;
        size_t used;
        sp_status want = size <= 8192 ? SP_DONE : SP_TOO_LARGE;
        size_t have = size <= 8192 ? 4 + size : 4;
        assert_int_equal(sp_frame_next(buf, have, max, &f, &used), want);
    }
    free(buf);
}

static void test_negotiate(void **state)
{
    assert_int_equal(sp_negotiate_frame_max(0, 0), 0);
    assert_int_equal(sp_negotiate_frame_max(0, 1048576), 1048576);
    assert_int_equal(sp_negotiate_frame_max(65536, 0), 65536);
    assert_int_equal(sp_negotiate_frame_max(65536, 1048576), 65536);
    assert_int_equal(sp_negotiate_frame_max(2097152, 1048576), 1048576);
}

/* A frame that does not fit leaves the buffer as it was, at every size. */
static void test_buf_rollback(void **state)
{
    uint8_t mem[64];
    /* Close(1, unknown frame, "ok") */
    uint8_t full[] = {0, 0, 0, 0x0e, 0, 0x16, 0, 1, 0, 0, 0, 1, 0, 0x0d, 0, 2, 'o', 'k'};
    for (size_t cap = 0; cap < sizeof full; cap++) {
        sp_buf b = {mem, cap, 0, false};
        assert_false(sp_encode_close(&b, 1, SP_UNKNOWN_FRAME, S("ok")));
        assert_int_equal(b.len, 0);
        assert_false(b.full);
    }
    /* after a frame already there */
    sp_buf b = {mem, sizeof mem, 0, false};
    assert_true(sp_encode_heartbeat(&b));
    b.cap = 8 + sizeof full - 1;
    assert_false(sp_encode_close(&b, 1, SP_UNKNOWN_FRAME, S("ok")));
    assert_int_equal(b.len, 8);
    b.cap = 8 + sizeof full;
    assert_true(sp_encode_close(&b, 1, SP_UNKNOWN_FRAME, S("ok")));
    assert_int_equal(b.len, 8 + sizeof full);
    assert_memory_equal(mem + 8, full, sizeof full);
}

/* A string over 65535 bytes cannot be framed: the frame is dropped. */
static void test_long_string(void **state)
{
    size_t n = 70000;
    uint8_t *big = calloc(1, n), *mem = malloc(n + 64);
    assert_non_null(big);
    assert_non_null(mem);
    sp_buf b = {mem, n + 64, 0, false};
    assert_false(sp_encode_metadata_update(&b, SP_STREAM_NOT_AVAILABLE,
                                           (sp_slice){big, 65536}));
    assert_int_equal(b.len, 0);
    assert_true(sp_encode_metadata_update(&b, SP_STREAM_NOT_AVAILABLE,
                                          (sp_slice){big, 65535}));
    assert_int_equal(b.len, 4 + 4 + 2 + 2 + 65535);
    free(big);
    free(mem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_frame),
        cmocka_unit_test(test_two_frames_and_a_partial),
        cmocka_unit_test(test_every_partial_length),
        cmocka_unit_test(test_too_large_from_size_alone),
        cmocka_unit_test(test_too_large_at_every_length),
        cmocka_unit_test(test_size_too_small),
        cmocka_unit_test(test_pre_open_cap),
        cmocka_unit_test(test_negotiate),
        cmocka_unit_test(test_buf_rollback),
        cmocka_unit_test(test_long_string),
    };
    return cmocka_run_group_tests_name("streamproto_frame", tests, NULL, NULL);
}
