/* Framing and the output buffer of the stream protocol.
 *
 * A frame on the wire (PROTOCOL.adoc, "Frame Structure"):
 *
 *   offset size      field
 *   0      4         size: the bytes that follow (not counting these 4)
 *   4      2         key: command id, high bit set on a response
 *   6      2         version
 *   8      size - 4  body
 *
 * Reading checks `size` against frame_max as soon as the 4 bytes are in,
 * before waiting for (or buffering) any body, as RabbitMQ's
 * rabbit_stream_core:incoming_data does with its frame_max.
 *
 * Writing: sp_frame_begin reserves the size field; puts append and, when one
 * does not fit, set b->full and write nothing more; sp_frame_end patches the
 * size or, when full, rewinds b->len to the frame's start. So a frame is in
 * the buffer whole or not at all.
 */
#include <string.h>

#include "streamproto_int.h"

sp_status sp_frame_next(const uint8_t *buf, size_t len, uint32_t frame_max, sp_frame *f,
                        size_t *used)
{
    *used = 0;
    if (len < SP_SIZE_LEN)
        return SP_NEED_MORE;
    uint32_t size = sp_be32(buf);
    f->size = size;
    if (frame_max && size > frame_max)
        return SP_TOO_LARGE;
    if (size < SP_HEADER_LEN)
        return SP_MALFORMED;
    if (size > len - SP_SIZE_LEN)
        return SP_NEED_MORE;
    f->key = sp_be16(buf + 4);
    f->version = sp_be16(buf + 6);
    f->body = buf + SP_SIZE_LEN + SP_HEADER_LEN;
    f->body_len = size - SP_HEADER_LEN;
    *used = (size_t)size + SP_SIZE_LEN;
    return SP_DONE;
}

uint32_t sp_negotiate_frame_max(uint32_t client, uint32_t configured)
{
    if (client == 0)
        return configured;
    if (configured == 0)
        return client;
    return client < configured ? client : configured;
}

/* Room for n more bytes; marks the buffer full when there is none. */
static uint8_t *room(sp_buf *b, size_t n)
{
    if (b->full || n > b->cap - b->len) {
        b->full = true;
        return NULL;
    }
    uint8_t *p = b->p + b->len;
    b->len += n;
    return p;
}

void sp_put_raw(sp_buf *b, const void *src, size_t n)
{
    uint8_t *p = room(b, n);
    if (p && n)
        memcpy(p, src, n);
}

void sp_put_u8(sp_buf *b, uint8_t v)
{
    sp_put_raw(b, &v, 1);
}

void sp_put_u16(sp_buf *b, uint16_t v)
{
    uint8_t x[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    sp_put_raw(b, x, 2);
}

void sp_put_u32(sp_buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    sp_put_raw(b, x, 4);
}

void sp_put_u64(sp_buf *b, uint64_t v)
{
    sp_put_u32(b, (uint32_t)(v >> 32));
    sp_put_u32(b, (uint32_t)v);
}

void sp_put_str(sp_buf *b, sp_slice s)
{
    if (s.len > UINT16_MAX) { /* not encodable: drop the frame as if full */
        b->full = true;
        return;
    }
    sp_put_u16(b, (uint16_t)s.len);
    sp_put_raw(b, s.ptr, s.len);
}

void sp_put_bytes(sp_buf *b, sp_slice s)
{
    sp_put_u32(b, s.len);
    sp_put_raw(b, s.ptr, s.len);
}

size_t sp_frame_begin(sp_buf *b, uint16_t key, uint16_t version)
{
    size_t start = b->len;
    sp_put_u32(b, 0);
    sp_put_u16(b, key);
    sp_put_u16(b, version);
    return start;
}

bool sp_frame_end(sp_buf *b, size_t start)
{
    size_t size = b->len - start - SP_SIZE_LEN;
    if (b->full || size > UINT32_MAX) {
        b->len = start;
        b->full = false;
        return false;
    }
    uint8_t *p = b->p + start;
    p[0] = (uint8_t)(size >> 24);
    p[1] = (uint8_t)(size >> 16);
    p[2] = (uint8_t)(size >> 8);
    p[3] = (uint8_t)size;
    return true;
}
