/* frame: splitting the byte stream into AMQP frames.
 *
 *   offset  size  field
 *   0       1     type (1 method, 2 header, 3 body, 8 heartbeat)
 *   1       2     channel
 *   3       4     size (payload bytes)
 *   7       size  payload
 *   7+size  1     frame-end, 206
 *
 * The 7-byte header is checked on its own, before the payload is waited for
 * or copied, so a peer announcing a 4 GB frame is refused after 7 bytes and
 * nothing is ever sized from an unchecked length.
 *
 * The size limit is RabbitMQ's, measured against RabbitMQ 3.10: the spec
 * says the whole frame (size + 8) must fit in frame_max, but rabbit_reader
 * adds an 8-byte fudge "to deal with clients that didn't interpret frame_max
 * correctly", so it refuses only payloads larger than frame_max (4096 passes
 * with frame_max 4096, 4097 fails as {frame_too_large,4097,4088}). We accept
 * the same frames. frame_max 0 means unlimited; channel_max 0 means any
 * channel. (RabbitMQ itself never checks the channel number against
 * channel_max -- it limits the count of open channels, 530 -- so a broker
 * that wants its behaviour passes channel_max 0 here.)
 */
#include <event2/buffer.h>

#include "amqp.h"
#include "amqp_wire.h"

/* size + 8 is computed in size_t; on a 32-bit size_t it could wrap. */
_Static_assert(SIZE_MAX > UINT32_MAX, "frame sizes need a 64-bit size_t");

const uint8_t AMQP_PROTOCOL_HEADER[8] = {'A', 'M', 'Q', 'P', 0, 0, 9, 1};

static bool frame_type_known(uint8_t type)
{
    return type == AMQP_FRAME_METHOD || type == AMQP_FRAME_HEADER || type == AMQP_FRAME_BODY ||
           type == AMQP_FRAME_HEARTBEAT;
}

/* Fills f's type, channel and size from the 7 header bytes and checks them. */
static int header_check(const uint8_t *h, uint32_t frame_max, uint16_t channel_max, amqp_frame *f,
                        amqp_error *err)
{
    f->type = h[0];
    f->channel = wire_be16(h + 1);
    f->size = wire_be32(h + 3);
    f->payload = NULL;
    /* Texts follow rabbit_reader's, minus the payload octets we refuse to
     * wait for. */
    if (!frame_type_known(f->type))
        return amqp_fail(err, AMQP_FRAME_ERROR, 0, "type %u, all octets = <<>>: unknown_frame",
                         f->type);
    if (frame_max != 0 && f->size > frame_max)
        return amqp_fail(err, AMQP_FRAME_ERROR, 0,
                         "type %u, all octets = <<>>: {frame_too_large,%u,%u}", f->type, f->size,
                         frame_max > AMQP_FRAME_OVERHEAD ? frame_max - AMQP_FRAME_OVERHEAD : 0);
    if (channel_max != 0 && f->channel > channel_max)
        return amqp_fail(err, AMQP_CHANNEL_ERROR, 0, "channel %u exceeds channel_max %u",
                         f->channel, channel_max);
    return AMQP_OK;
}

/* `frame` is the whole frame, header to end octet. */
static int end_check(const amqp_frame *f, const uint8_t *frame, amqp_error *err)
{
    uint8_t end = frame[AMQP_FRAME_HEADER_SIZE + f->size];
    char octets[160];
    amqp_field payload = {.type = 'x', .v.bytes = {frame + AMQP_FRAME_HEADER_SIZE, f->size}};

    if (end == AMQP_FRAME_END)
        return AMQP_OK;
    return amqp_fail(err, AMQP_FRAME_ERROR, 0,
                     "type %u, all octets = %s: {invalid_frame_end_marker,%u}", f->type,
                     amqp_erl_term(&payload, octets, sizeof octets), end);
}

int amqp_frame_parse(const uint8_t *buf, size_t len, uint32_t frame_max, uint16_t channel_max,
                     amqp_frame *f, size_t *consumed, amqp_error *err)
{
    size_t whole;

    *consumed = 0;
    if (len < AMQP_FRAME_HEADER_SIZE)
        return AMQP_NEED_MORE;
    if (header_check(buf, frame_max, channel_max, f, err) != AMQP_OK)
        return AMQP_ERROR;
    whole = (size_t)f->size + AMQP_FRAME_OVERHEAD;
    if (!wire_has(len, 0, whole))
        return AMQP_NEED_MORE;
    if (end_check(f, buf, err) != AMQP_OK)
        return AMQP_ERROR;
    f->payload = buf + AMQP_FRAME_HEADER_SIZE;
    *consumed = whole;
    return AMQP_OK;
}

int amqp_frame_read(struct evbuffer *in, uint32_t frame_max, uint16_t channel_max,
                    amqp_frame *f, amqp_error *err)
{
    uint8_t header[AMQP_FRAME_HEADER_SIZE];
    size_t avail = evbuffer_get_length(in);
    size_t whole;
    const uint8_t *p;

    if (avail < sizeof header)
        return AMQP_NEED_MORE;
    if (evbuffer_copyout(in, header, sizeof header) != (ssize_t)sizeof header)
        return AMQP_NEED_MORE;
    if (header_check(header, frame_max, channel_max, f, err) != AMQP_OK)
        return AMQP_ERROR;
    whole = (size_t)f->size + AMQP_FRAME_OVERHEAD;
    if (avail < whole)
        return AMQP_NEED_MORE;
    /* Only now, with the header checked and the frame complete, make its
     * bytes contiguous; the pullup is bounded by frame_max. */
    p = evbuffer_pullup(in, (ssize_t)whole);
    if (p == NULL)
        return amqp_fail(err, AMQP_INTERNAL_ERROR, 0, "out of memory reading a %zu byte frame",
                         whole);
    if (end_check(f, p, err) != AMQP_OK)
        return AMQP_ERROR;
    f->payload = p + AMQP_FRAME_HEADER_SIZE;
    return AMQP_OK;
}

/* Looks at the buffer's first contiguous chunk. */
static void take_chunk(amqp_frame_reader *r)
{
    struct evbuffer_iovec v;
    bool any = evbuffer_peek(r->in, -1, NULL, &v, 1) >= 1;
    r->chunk = any ? v.iov_base : (const uint8_t *)""; /* never NULL + 0 */
    r->len = any ? v.iov_len : 0;
    r->used = 0;
}

void amqp_frames_begin(amqp_frame_reader *r, struct evbuffer *in)
{
    r->in = in;
    take_chunk(r);
}

void amqp_frames_drain(amqp_frame_reader *r)
{
    if (r->used)
        evbuffer_drain(r->in, r->used);
    take_chunk(r);
}

/* inline: a hint that keeps it inlined in the broker's frame reader now
 * that client/ calls it too (one caller had been reason enough for GCC) */
inline int amqp_frames_next(amqp_frame_reader *r, uint32_t frame_max, uint16_t channel_max,
                            amqp_frame *f, amqp_error *err)
{
    size_t whole;
    int rc = amqp_frame_parse(r->chunk + r->used, r->len - r->used, frame_max, channel_max, f,
                              &whole, err);
    if (rc == AMQP_NEED_MORE) { /* it runs past the chunk, or is not all here */
        amqp_frames_drain(r);
        rc = amqp_frame_read(r->in, frame_max, channel_max, f, err);
        if (rc != AMQP_OK)
            return rc;
        take_chunk(r); /* the frame is now the start of the first chunk */
        whole = (size_t)f->size + AMQP_FRAME_OVERHEAD;
    }
    if (rc == AMQP_OK)
        r->used += whole;
    return rc;
}

void amqp_frame_header_put(uint8_t *buf, uint8_t type, uint16_t channel, uint32_t size)
{
    buf[0] = type;
    buf[1] = (uint8_t)(channel >> 8);
    buf[2] = (uint8_t)channel;
    buf[3] = (uint8_t)(size >> 24);
    buf[4] = (uint8_t)(size >> 16);
    buf[5] = (uint8_t)(size >> 8);
    buf[6] = (uint8_t)size;
}

uint32_t amqp_frame_method_id(const amqp_frame *f)
{
    if (f->type != AMQP_FRAME_METHOD || f->size < 4)
        return 0;
    const uint8_t *p = f->payload;
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
