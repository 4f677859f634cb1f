/* The AMQP frame reader: bytes as a connection receives them, arriving in
 * reads of a size the input picks, read in place by amqp_frames_next over
 * the evbuffer's chunks (conn/conn.c's read_frames) -- which must hand out
 * the same frames, and fail at the same one with the same code, as
 * amqp_frame_parse over the bytes made contiguous. Each frame's payload is
 * then decoded as its type says.
 *
 * Input: frame_max choice, channel_max choice, read size, then the stream. */
#include <event2/buffer.h>

#include "fuzz_codec.h"

#define MAX_FRAMES 4096

typedef struct seen {
    uint8_t type;
    uint16_t channel;
    uint32_t size;
    const uint8_t *payload;
} seen;

static void decode_payload(const amqp_frame *f)
{
    if (f->type == AMQP_FRAME_METHOD)
        fuzz_check_method(f->payload, f->size);
    else if (f->type == AMQP_FRAME_HEADER)
        fuzz_check_header(f->payload, f->size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t frame_maxes[] = {0, 4096, 131072, 16};
    fuzz_in in = {data, size};
    uint32_t frame_max = frame_maxes[fuzz_byte(&in) & 3];
    uint16_t channel_max = fuzz_byte(&in) & 1 ? 2047 : 0;
    uint8_t b = fuzz_byte(&in);
    size_t step = (size_t)((b & 15) + 1) << (b >> 4 & 7); /* 1 .. 2048 bytes a read */
    const uint8_t *stream = in.p;
    size_t slen = in.len;

    /* the contiguous parse */
    static seen ref[MAX_FRAMES];
    size_t nref = 0, off = 0;
    int ref_rc;
    uint16_t ref_code = 0;
    for (;;) {
        amqp_frame f;
        size_t used;
        amqp_error err = {0};
        ref_rc = amqp_frame_parse(stream + off, slen - off, frame_max, channel_max, &f, &used,
                                  &err);
        if (ref_rc != AMQP_OK || nref == MAX_FRAMES) {
            ref_code = err.code;
            break;
        }
        FUZZ_CHECK(used == (size_t)f.size + AMQP_FRAME_OVERHEAD && used <= slen - off);
        FUZZ_CHECK(frame_max == 0 || f.size <= frame_max);
        ref[nref++] = (seen){f.type, f.channel, f.size, f.payload};
        off += used;
    }

    /* the reader, fed a read at a time; odd reads are referenced, not
     * copied, so frames straddle chunks */
    struct evbuffer *buf = evbuffer_new();
    FUZZ_CHECK(buf);
    size_t fed = 0, n = 0;
    int rc = AMQP_NEED_MORE;
    uint16_t code = 0;
    for (unsigned reads = 0; n < nref || rc == AMQP_NEED_MORE; reads++) {
        amqp_frame_reader rd;
        amqp_frames_begin(&rd, buf);
        for (;;) {
            amqp_frame f;
            amqp_error err = {0};
            if (n == nref && nref == MAX_FRAMES)
                break;
            rc = amqp_frames_next(&rd, frame_max, channel_max, &f, &err);
            if (rc != AMQP_OK) {
                code = err.code;
                break;
            }
            FUZZ_CHECK(n < nref);
            FUZZ_CHECK(f.type == ref[n].type && f.channel == ref[n].channel &&
                       f.size == ref[n].size && memcmp(f.payload, ref[n].payload, f.size) == 0);
            decode_payload(&f);
            n++;
        }
        amqp_frames_drain(&rd);
        if (rc == AMQP_ERROR || fed == slen || (n == nref && nref == MAX_FRAMES))
            break;
        size_t k = step < slen - fed ? step : slen - fed;
        if (reads & 1)
            evbuffer_add_reference(buf, stream + fed, k, NULL, NULL);
        else
            evbuffer_add(buf, stream + fed, k);
        fed += k;
    }
    if (nref < MAX_FRAMES) {
        FUZZ_CHECK(n == nref);
        FUZZ_CHECK(rc == ref_rc);
        FUZZ_CHECK(rc != AMQP_ERROR || code == ref_code);
    }
    evbuffer_free(buf);
    return 0;
}
