/* Unit tests for frame parsing (frame.c), over flat buffers and libevent
 * evbuffers: complete frames, every partial length, header checks that fire
 * before the payload arrives (type, size against frame_max, channel against
 * channel_max), sizes near UINT32_MAX, and the frame-end octet.
 *
 * Inputs are copied into exactly-sized malloc'd buffers, so under ASan any
 * read past the end fails the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "../../amqp/amqp.h"

static uint8_t *dup_exact(const void *p, size_t n)
{
    uint8_t *b = malloc(n ? n : 1);

    assert_non_null(b);
    if (n)
        memcpy(b, p, n);
    return b;
}

/* Builds a frame with `size` payload bytes (payload i = i & 0xFF) in `out`. */
static size_t make_frame(uint8_t *out, uint8_t type, uint16_t channel, uint32_t size, uint8_t end)
{
    amqp_frame_header_put(out, type, channel, size);
    for (uint32_t i = 0; i < size; i++)
        out[7 + i] = (uint8_t)i;
    out[7 + size] = end;
    return (size_t)size + 8;
}

static int parse_exact(const uint8_t *p, size_t n, uint32_t frame_max, uint16_t channel_max,
                       amqp_frame *f, size_t *consumed, amqp_error *err)
{
    uint8_t *b = dup_exact(p, n);
    int rc = amqp_frame_parse(b, n, frame_max, channel_max, f, consumed, err);

    if (rc == AMQP_OK) { /* payload lies inside the buffer, as make_frame wrote it */
        assert_ptr_equal(f->payload, b + 7);
        for (uint32_t i = 0; i < f->size; i++)
            assert_int_equal(f->payload[i], (uint8_t)i);
    }
    free(b);
    f->payload = NULL; /* freed with b */
    return rc;
}

static void test_header_put_and_protocol_header(void **state)
{
    uint8_t h[7];

    amqp_frame_header_put(h, 1, 0x0102, 0x03040506);
    assert_memory_equal(h, "\x01\x01\x02\x03\x04\x05\x06", 7);
    assert_memory_equal(AMQP_PROTOCOL_HEADER, "AMQP\x00\x00\x09\x01", 8);
    assert_int_equal(AMQP_FRAME_HEADER_SIZE, 7);
    assert_int_equal(AMQP_FRAME_OVERHEAD, 8);
}

static void test_parse_complete(void **state)
{
    static const uint8_t types[] = {AMQP_FRAME_METHOD, AMQP_FRAME_HEADER, AMQP_FRAME_BODY,
                                    AMQP_FRAME_HEARTBEAT};
    uint8_t buf[64];
    amqp_frame f;
    size_t consumed, n;

    for (size_t i = 0; i < sizeof types; i++) {
        n = make_frame(buf, types[i], 7, 20, AMQP_FRAME_END);
        assert_int_equal(parse_exact(buf, n, 4096, 0, &f, &consumed, NULL), AMQP_OK);
        assert_int_equal(f.type, types[i]);
        assert_int_equal(f.channel, 7);
        assert_int_equal(f.size, 20);
        assert_int_equal(consumed, 28);
    }
    /* an empty heartbeat */
    n = make_frame(buf, AMQP_FRAME_HEARTBEAT, 0, 0, AMQP_FRAME_END);
    assert_int_equal(parse_exact(buf, n, 4096, 0, &f, &consumed, NULL), AMQP_OK);
    assert_int_equal(consumed, 8);
}

/* Two frames back to back: the first parses and consumes only itself. */
static void test_parse_two_frames(void **state)
{
    uint8_t buf[64];
    amqp_frame f;
    size_t consumed, n;

    n = make_frame(buf, 1, 1, 5, AMQP_FRAME_END);
    n += make_frame(buf + n, 3, 2, 3, AMQP_FRAME_END);
    assert_int_equal(amqp_frame_parse(buf, n, 4096, 0, &f, &consumed, NULL), AMQP_OK);
    assert_int_equal(consumed, 13);
    assert_int_equal(amqp_frame_parse(buf + consumed, n - consumed, 4096, 0, &f, &consumed, NULL),
                     AMQP_OK);
    assert_int_equal(f.channel, 2);
    assert_int_equal(consumed, 11);
}

/* Every partial frame needs more; none reads past what it was given. */
static void test_parse_every_partial_length(void **state)
{
    uint8_t buf[300];
    amqp_frame f;
    size_t consumed, n = make_frame(buf, 1, 3, 200, AMQP_FRAME_END);

    for (size_t cut = 0; cut < n; cut++) {
        consumed = 99;
        assert_int_equal(parse_exact(buf, cut, 4096, 0, &f, &consumed, NULL), AMQP_NEED_MORE);
        assert_int_equal(consumed, 0);
    }
    assert_int_equal(parse_exact(buf, n, 4096, 0, &f, &consumed, NULL), AMQP_OK);
}

static void test_bad_frame_end(void **state)
{
    uint8_t buf[32];
    amqp_frame f;
    size_t consumed, n;
    amqp_error err;

    for (int end = 0; end < 256; end++) {
        if (end == AMQP_FRAME_END)
            continue;
        n = make_frame(buf, 1, 1, 13, (uint8_t)end);
        assert_int_equal(parse_exact(buf, n, 4096, 0, &f, &consumed, &err), AMQP_ERROR);
        assert_int_equal(err.code, AMQP_FRAME_ERROR);
        assert_true(amqp_reply_is_hard(err.code));
    }
    n = make_frame(buf, 1, 1, 13, 0);
    parse_exact(buf, n, 4096, 0, &f, &consumed, &err);
    assert_string_equal(err.text, "FRAME_ERROR - type 1, all octets = "
                                  "<<0,1,2,3,4,5,6,7,8,9,10,11,12>>: {invalid_frame_end_marker,0}");
}

/* Unknown types fail on the 7 header bytes alone (RabbitMQ: 501). */
static void test_unknown_frame_type(void **state)
{
    uint8_t h[7];
    amqp_frame f;
    size_t consumed;
    amqp_error err;

    for (int type = 0; type < 256; type++) {
        bool known = type == 1 || type == 2 || type == 3 || type == 8;
        amqp_frame_header_put(h, (uint8_t)type, 1, 10);
        int rc = parse_exact(h, 7, 4096, 0, &f, &consumed, &err);
        assert_int_equal(rc, known ? AMQP_NEED_MORE : AMQP_ERROR);
        if (!known)
            assert_int_equal(err.code, AMQP_FRAME_ERROR);
    }
    amqp_frame_header_put(h, 5, 1, 3);
    parse_exact(h, 7, 4096, 0, &f, &consumed, &err);
    assert_string_equal(err.text, "FRAME_ERROR - type 5, all octets = <<>>: unknown_frame");
}

/* RabbitMQ 3.10 with frame_max 4096 accepts a 4096-byte payload and refuses
 * 4097 as {frame_too_large,4097,4088}; the check needs only the header. */
static void test_frame_max(void **state)
{
    static const struct { uint32_t frame_max, size; int rc; } cases[] = {
        {4096, 4088, AMQP_NEED_MORE}, {4096, 4089, AMQP_NEED_MORE},
        {4096, 4096, AMQP_NEED_MORE}, {4096, 4097, AMQP_ERROR},
        {4096, 0xFFFFFFFFu, AMQP_ERROR}, {4096, 0xFFFFFFF8u, AMQP_ERROR},
        {131072, 131072, AMQP_NEED_MORE}, {131072, 131073, AMQP_ERROR},
        {0xFFFFFFFFu, 0xFFFFFFFFu, AMQP_NEED_MORE}, /* size + 8 must not wrap */
        {0, 0xFFFFFFFFu, AMQP_NEED_MORE},           /* 0: no limit */
        {0, 0xFFFFFFF8u, AMQP_NEED_MORE},
        {4, 5, AMQP_ERROR}, {4, 4, AMQP_NEED_MORE},
    };
    uint8_t h[7];
    amqp_frame f;
    size_t consumed;
    amqp_error err;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        amqp_frame_header_put(h, AMQP_FRAME_BODY, 1, cases[i].size);
        int rc = parse_exact(h, 7, cases[i].frame_max, 0, &f, &consumed, &err);
        if (rc != cases[i].rc)
            fail_msg("frame_max %u size %u: rc %d", cases[i].frame_max, cases[i].size, rc);
        if (rc == AMQP_ERROR)
            assert_int_equal(err.code, AMQP_FRAME_ERROR);
    }
    amqp_frame_header_put(h, AMQP_FRAME_BODY, 1, 4097);
    parse_exact(h, 7, 4096, 0, &f, &consumed, &err);
    assert_string_equal(err.text,
                        "FRAME_ERROR - type 3, all octets = <<>>: {frame_too_large,4097,4088}");
}

static void test_channel_max(void **state)
{
    static const struct { uint16_t channel_max, channel; int rc; } cases[] = {
        {10, 10, AMQP_NEED_MORE}, {10, 11, AMQP_ERROR}, {10, 0, AMQP_NEED_MORE},
        {0, 65535, AMQP_NEED_MORE}, {65535, 65535, AMQP_NEED_MORE}, {1, 2, AMQP_ERROR},
    };
    uint8_t h[7];
    amqp_frame f;
    size_t consumed;
    amqp_error err;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        amqp_frame_header_put(h, AMQP_FRAME_METHOD, cases[i].channel, 12);
        assert_int_equal(parse_exact(h, 7, 4096, cases[i].channel_max, &f, &consumed, &err),
                         cases[i].rc);
        if (cases[i].rc == AMQP_ERROR) {
            assert_int_equal(err.code, AMQP_CHANNEL_ERROR);
            assert_true(amqp_reply_is_hard(err.code));
        }
    }
}

/* ---- evbuffer ------------------------------------------------------------ */

/* Feeds two frames one byte at a time: NEED_MORE until each is whole. */
static void test_read_byte_by_byte(void **state)
{
    struct evbuffer *in = evbuffer_new();
    uint8_t buf[600];
    amqp_frame f;
    size_t n1 = make_frame(buf, 1, 4, 300, AMQP_FRAME_END);
    size_t n = n1 + make_frame(buf + n1, 8, 0, 0, AMQP_FRAME_END);
    size_t frames = 0;

    assert_non_null(in);
    for (size_t i = 0; i < n; i++) {
        evbuffer_add(in, buf + i, 1); /* one chain per byte: the pullup must join them */
        int rc = amqp_frame_read(in, 4096, 0, &f, NULL);
        if (i + 1 == n1 || i + 1 == n) {
            assert_int_equal(rc, AMQP_OK);
            assert_int_equal(f.type, frames == 0 ? 1 : 8);
            if (frames == 0) {
                assert_int_equal(f.channel, 4);
                assert_int_equal(f.size, 300);
                for (uint32_t j = 0; j < 300; j++)
                    assert_int_equal(f.payload[j], (uint8_t)j);
            }
            evbuffer_drain(in, f.size + 8);
            frames++;
        } else {
            assert_int_equal(rc, AMQP_NEED_MORE);
        }
    }
    assert_int_equal(frames, 2);
    assert_int_equal(evbuffer_get_length(in), 0);
    evbuffer_free(in);
}

/* An oversize frame is refused from its header; nothing waits for 4 GB. */
static void test_read_rejects_from_header(void **state)
{
    struct evbuffer *in = evbuffer_new();
    uint8_t h[7];
    amqp_frame f;
    amqp_error err;

    amqp_frame_header_put(h, AMQP_FRAME_BODY, 1, 0xFFFFFFFFu);
    evbuffer_add(in, h, 6);
    assert_int_equal(amqp_frame_read(in, 131072, 0, &f, &err), AMQP_NEED_MORE);
    evbuffer_add(in, h + 6, 1);
    assert_int_equal(amqp_frame_read(in, 131072, 0, &f, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_FRAME_ERROR);
    evbuffer_drain(in, 7);

    amqp_frame_header_put(h, 9, 1, 1);
    evbuffer_add(in, h, 7);
    assert_int_equal(amqp_frame_read(in, 131072, 0, &f, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_FRAME_ERROR);
    evbuffer_drain(in, 7);

    amqp_frame_header_put(h, 1, 300, 1);
    evbuffer_add(in, h, 7);
    assert_int_equal(amqp_frame_read(in, 131072, 299, &f, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_CHANNEL_ERROR);
    evbuffer_free(in);
}

static void test_read_bad_frame_end(void **state)
{
    struct evbuffer *in = evbuffer_new();
    uint8_t buf[32];
    amqp_frame f;
    amqp_error err;
    size_t n = make_frame(buf, 1, 1, 10, 0xCD);

    evbuffer_add(in, buf, n);
    assert_int_equal(amqp_frame_read(in, 4096, 0, &f, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_FRAME_ERROR);
    evbuffer_free(in);
}

/* The reader over a stream cut into chains at odd places, fed a piece at a
 * time: every frame comes out whole and in order; one that lies inside a
 * chain is read where it is (its payload points into the caller's bytes,
 * which evbuffer_add_reference does not copy); one that spans chains is
 * joined; nothing is left once all is drained. */
static void test_reader_in_place_across_chains(void **state)
{
    enum { FRAMES = 300 };
    static uint8_t stream[FRAMES * 720];
    size_t at[FRAMES + 1], n = 0;
    uint32_t seed = 12345;
    for (size_t i = 0; i < FRAMES; i++) {
        seed = seed * 1103515245u + 12345u;
        static const uint8_t types[] = {1, 2, 3, 8};
        uint8_t type = types[(seed >> 8) % 4];
        uint32_t size = type == 8 ? 0 : (seed >> 12) % 700;
        at[i] = n;
        n += make_frame(stream + n, type, (uint16_t)i, size, AMQP_FRAME_END);
    }
    at[FRAMES] = n;

    struct evbuffer *in = evbuffer_new();
    amqp_frame_reader rd;
    size_t fed = 0, next = 0, in_place = 0, joined = 0;
    while (next < FRAMES) {
        seed = seed * 1103515245u + 12345u;
        size_t piece = 1 + (seed >> 10) % 2000;
        if (piece > n - fed)
            piece = n - fed;
        if (piece)
            evbuffer_add_reference(in, stream + fed, piece, NULL, NULL);
        fed += piece;
        amqp_frames_begin(&rd, in);
        amqp_frame f;
        int rc;
        while ((rc = amqp_frames_next(&rd, 4096, 0, &f, NULL)) == AMQP_OK) {
            assert_int_equal(f.channel, (uint16_t)next);
            assert_int_equal(f.size, at[next + 1] - at[next] - 8);
            for (uint32_t j = 0; j < f.size; j++)
                assert_int_equal(f.payload[j], (uint8_t)j);
            if (f.payload == stream + at[next] + 7)
                in_place++;
            else
                joined++;
            if (++next % 7 == 0)
                amqp_frames_drain(&rd); /* a caller may drain at any point */
        }
        assert_int_equal(rc, AMQP_NEED_MORE);
        amqp_frames_drain(&rd);
        assert_int_equal(evbuffer_get_length(in), fed - at[next]);
    }
    assert_int_equal(fed, n);
    assert_int_equal(evbuffer_get_length(in), 0);
    assert_true(in_place > FRAMES / 2 && joined > 0);
    evbuffer_free(in);
}

/* A bad frame after good ones in the same chain: the good ones come out,
 * then the error. */
static void test_reader_error_after_good_frames(void **state)
{
    uint8_t buf[64];
    size_t n = make_frame(buf, 1, 1, 10, AMQP_FRAME_END);
    n += make_frame(buf + n, 1, 2, 10, 0xCD);
    struct evbuffer *in = evbuffer_new();
    evbuffer_add(in, buf, n);
    amqp_frame_reader rd;
    amqp_frame f;
    amqp_error err;
    amqp_frames_begin(&rd, in);
    assert_int_equal(amqp_frames_next(&rd, 4096, 0, &f, &err), AMQP_OK);
    assert_int_equal(f.channel, 1);
    assert_int_equal(amqp_frames_next(&rd, 4096, 0, &f, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_FRAME_ERROR);
    amqp_frames_drain(&rd);
    assert_int_equal(evbuffer_get_length(in), 18); /* the bad frame is still there */
    evbuffer_free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_put_and_protocol_header),
        cmocka_unit_test(test_reader_in_place_across_chains),
        cmocka_unit_test(test_reader_error_after_good_frames),
        cmocka_unit_test(test_parse_complete),
        cmocka_unit_test(test_parse_two_frames),
        cmocka_unit_test(test_parse_every_partial_length),
        cmocka_unit_test(test_bad_frame_end),
        cmocka_unit_test(test_unknown_frame_type),
        cmocka_unit_test(test_frame_max),
        cmocka_unit_test(test_channel_max),
        cmocka_unit_test(test_read_byte_by_byte),
        cmocka_unit_test(test_read_rejects_from_header),
        cmocka_unit_test(test_read_bad_frame_end),
    };

    return cmocka_run_group_tests_name("amqp_frame", tests, NULL, NULL);
}
