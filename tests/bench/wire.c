/* wire -- hand-framed AMQP 0-9-1 (see wire.h).
 *
 * A frame on the wire:
 *   offset size field
 *   0      1    type (1 method, 2 header, 3 body, 8 heartbeat)
 *   1      2    channel
 *   3      4    payload size N
 *   7      N    payload
 *   7+N    1    0xCE
 *
 * Encoding goes through a small writer that remembers overflow instead of
 * checking every put; the caller sees 0 bytes written if anything did not fit.
 * Decoding takes (buffer, length, offset) and compares n <= len - off, so no
 * step can read past the end or overflow an addition. */
#include "wire.h"

#include <stdio.h>
#include <string.h>

typedef struct writer {
    uint8_t *p;
    size_t cap, len;
    int overflow;
} writer;

static void put_bytes(writer *w, const void *src, size_t n)
{
    if (w->overflow || n > w->cap - w->len) {
        w->overflow = 1;
        return;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static void put_u8(writer *w, uint8_t v) { put_bytes(w, &v, 1); }

static void put_u16(writer *w, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    put_bytes(w, b, 2);
}

static void put_u32(writer *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8),
                    (uint8_t)v};
    put_bytes(w, b, 4);
}

static void put_u64(writer *w, uint64_t v)
{
    put_u32(w, (uint32_t)(v >> 32));
    put_u32(w, (uint32_t)v);
}

static void put_shortstr(writer *w, const char *s)
{
    size_t n = strlen(s);
    if (n > 255) {
        w->overflow = 1;
        return;
    }
    put_u8(w, (uint8_t)n);
    put_bytes(w, s, n);
}

/* Starts a frame; returns the offset of its size field for end_frame(). */
static size_t begin_frame(writer *w, uint8_t type, uint16_t channel)
{
    put_u8(w, type);
    put_u16(w, channel);
    size_t at = w->len;
    put_u32(w, 0);
    return at;
}

static void end_frame(writer *w, size_t size_at)
{
    if (w->overflow)
        return;
    uint32_t n = (uint32_t)(w->len - size_at - 4);
    w->p[size_at] = (uint8_t)(n >> 24);
    w->p[size_at + 1] = (uint8_t)(n >> 16);
    w->p[size_at + 2] = (uint8_t)(n >> 8);
    w->p[size_at + 3] = (uint8_t)n;
    put_u8(w, WIRE_FRAME_END);
}

static size_t finish(const writer *w) { return w->overflow ? 0 : w->len; }

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}

wire_status wire_next_frame(const uint8_t *buf, size_t len, size_t *off,
                            uint32_t frame_max, wire_frame *f)
{
    size_t o = *off;
    if (o > len || 7 > len - o)
        return WIRE_MORE;
    uint8_t type = buf[o];
    uint32_t size = get_u32(buf + o + 3);
    if (type != WIRE_FRAME_METHOD && type != WIRE_FRAME_HEADER &&
        type != WIRE_FRAME_BODY && type != WIRE_FRAME_HEARTBEAT)
        return WIRE_ERROR;
    if (frame_max && size > frame_max - WIRE_FRAME_OVERHEAD)
        return WIRE_ERROR;
    if ((uint64_t)size + 1 > len - o - 7)
        return WIRE_MORE;
    if (buf[o + 7 + size] != WIRE_FRAME_END)
        return WIRE_ERROR;
    f->type = type;
    f->channel = get_u16(buf + o + 1);
    f->size = size;
    f->payload = buf + o + 7;
    *off = o + 8 + size;
    return WIRE_OK;
}

uint32_t wire_method_id(const wire_frame *f)
{
    if (f->type != WIRE_FRAME_METHOD || f->size < 4)
        return 0;
    return get_u32(f->payload);
}

wire_status wire_parse_deliver(const wire_frame *f, uint64_t *tag)
{
    /* class, method, consumer-tag shortstr, delivery-tag u64 */
    size_t len = f->size, off = 4;
    if (off >= len)
        return WIRE_ERROR;
    size_t ctag = f->payload[off];
    off += 1;
    if (ctag > len - off || 8 > len - off - ctag)
        return WIRE_ERROR;
    *tag = get_u64(f->payload + off + ctag);
    return WIRE_OK;
}

wire_status wire_parse_body_size(const wire_frame *f, uint64_t *body_size)
{
    /* class u16, weight u16, body size u64, property flags ... */
    if (f->size < 12)
        return WIRE_ERROR;
    *body_size = get_u64(f->payload + 4);
    return WIRE_OK;
}

wire_status wire_parse_ack(const wire_frame *f, uint64_t *tag, int *multiple)
{
    if (f->size < 4 + 8 + 1)
        return WIRE_ERROR;
    *tag = get_u64(f->payload + 4);
    *multiple = f->payload[12] & 1;
    return WIRE_OK;
}

wire_status wire_describe_close(const wire_frame *f, char *out, size_t outlen)
{
    /* class, method, reply-code u16, reply-text shortstr, class u16, method u16 */
    size_t len = f->size, off = 4;
    if (outlen == 0)
        return WIRE_ERROR;
    out[0] = '\0';
    if (off > len || 3 > len - off)
        return WIRE_ERROR;
    uint16_t code = get_u16(f->payload + off);
    size_t tlen = f->payload[off + 2];
    off += 3;
    if (tlen > len - off || 4 > len - off - tlen)
        return WIRE_ERROR;
    const uint8_t *text = f->payload + off;
    off += tlen;
    snprintf(out, outlen, "%u %.*s (%u.%u)", code, (int)tlen, (const char *)text,
             get_u16(f->payload + off), get_u16(f->payload + off + 2));
    return WIRE_OK;
}

/* Body frames of body_size pattern bytes, split to fit frame_max. */
static void put_body(writer *w, uint16_t channel, size_t body_size,
                     uint32_t frame_max, size_t *body_off)
{
    size_t chunk_max = frame_max > WIRE_FRAME_OVERHEAD ? frame_max - WIRE_FRAME_OVERHEAD
                                                      : 4096;
    size_t done = 0;
    if (body_off)
        *body_off = w->len + 7;
    while (done < body_size && !w->overflow) {
        size_t n = body_size - done < chunk_max ? body_size - done : chunk_max;
        size_t at = begin_frame(w, WIRE_FRAME_BODY, channel);
        if (w->overflow || n > w->cap - w->len) {
            w->overflow = 1;
            return;
        }
        for (size_t i = 0; i < n; i++)
            w->p[w->len + i] = (uint8_t)('a' + (done + i) % 26);
        w->len += n;
        end_frame(w, at);
        done += n;
    }
}

/* A table of longstr entries: key, value, key, value, ..., NULL. */
static void put_string_table(writer *w, const char *const *kv)
{
    size_t len = 0;
    for (const char *const *e = kv; e[0]; e += 2)
        len += 1 + strlen(e[0]) + 1 + 4 + strlen(e[1]);
    put_u32(w, (uint32_t)len);
    for (const char *const *e = kv; e[0]; e += 2) {
        put_shortstr(w, e[0]);
        put_u8(w, 'S');
        put_u32(w, (uint32_t)strlen(e[1]));
        put_bytes(w, e[1], strlen(e[1]));
    }
}

static void put_header(writer *w, uint16_t channel, size_t body_size, int persistent,
                       const char *filter_value)
{
    size_t at = begin_frame(w, WIRE_FRAME_HEADER, channel);
    put_u16(w, 60);
    put_u16(w, 0);
    put_u64(w, body_size);
    /* headers, delivery-mode present */
    put_u16(w, (uint16_t)((filter_value ? 0x2000 : 0) | (persistent ? 0x1000 : 0)));
    if (filter_value)
        put_string_table(w, (const char *const[]){"x-stream-filter-value", filter_value, NULL});
    if (persistent)
        put_u8(w, 2);
    end_frame(w, at);
}

size_t wire_encode_publish(uint8_t *out, size_t cap, uint16_t channel,
                           const char *exchange, const char *routing_key,
                           size_t body_size, int persistent, const char *filter_value,
                           uint32_t frame_max, size_t *body_off)
{
    writer w = {out, cap, 0, 0};
    size_t at = begin_frame(&w, WIRE_FRAME_METHOD, channel);
    put_u16(&w, 60);
    put_u16(&w, 40);
    put_u16(&w, 0); /* ticket */
    put_shortstr(&w, exchange);
    put_shortstr(&w, routing_key);
    put_u8(&w, 0); /* mandatory, immediate */
    end_frame(&w, at);
    put_header(&w, channel, body_size, persistent, filter_value);
    put_body(&w, channel, body_size, frame_max, body_off);
    return finish(&w);
}

size_t wire_encode_deliver(uint8_t *out, size_t cap, uint16_t channel,
                           uint64_t tag, const char *routing_key,
                           size_t body_size, uint32_t frame_max)
{
    writer w = {out, cap, 0, 0};
    size_t at = begin_frame(&w, WIRE_FRAME_METHOD, channel);
    put_u16(&w, 60);
    put_u16(&w, 60);
    put_shortstr(&w, "ctag");
    put_u64(&w, tag);
    put_u8(&w, 0); /* redelivered */
    put_shortstr(&w, "x");
    put_shortstr(&w, routing_key);
    end_frame(&w, at);
    put_header(&w, channel, body_size, 0, NULL);
    put_body(&w, channel, body_size, frame_max, NULL);
    return finish(&w);
}

size_t wire_encode_ack(uint8_t *out, size_t cap, uint16_t channel, uint64_t tag,
                       int multiple)
{
    writer w = {out, cap, 0, 0};
    size_t at = begin_frame(&w, WIRE_FRAME_METHOD, channel);
    put_u16(&w, 60);
    put_u16(&w, 80);
    put_u64(&w, tag);
    put_u8(&w, multiple ? 1 : 0);
    end_frame(&w, at);
    return finish(&w);
}

size_t wire_encode_consume(uint8_t *out, size_t cap, uint16_t channel,
                           const char *queue, const char *consumer_tag, int no_ack,
                           const char *const *args)
{
    writer w = {out, cap, 0, 0};
    size_t at = begin_frame(&w, WIRE_FRAME_METHOD, channel);
    put_u16(&w, 60);
    put_u16(&w, 20);
    put_u16(&w, 0); /* ticket */
    put_shortstr(&w, queue);
    put_shortstr(&w, consumer_tag);
    put_u8(&w, no_ack ? 0x02 : 0x00); /* no-local, no-ack, exclusive, no-wait */
    put_string_table(&w, args ? args : (const char *const[]){NULL});
    end_frame(&w, at);
    return finish(&w);
}

size_t wire_encode_queue_bind(uint8_t *out, size_t cap, uint16_t channel,
                              const char *queue, const char *exchange,
                              const char *routing_key)
{
    writer w = {out, cap, 0, 0};
    size_t at = begin_frame(&w, WIRE_FRAME_METHOD, channel);
    put_u16(&w, 50);
    put_u16(&w, 20);
    put_u16(&w, 0); /* ticket */
    put_shortstr(&w, queue);
    put_shortstr(&w, exchange);
    put_shortstr(&w, routing_key);
    put_u8(&w, 0);  /* no-wait off: every bind is answered */
    put_u32(&w, 0); /* empty arguments table */
    end_frame(&w, at);
    return finish(&w);
}

size_t wire_encode_connection_close(uint8_t *out, size_t cap)
{
    writer w = {out, cap, 0, 0};
    size_t at = begin_frame(&w, WIRE_FRAME_METHOD, 0);
    put_u16(&w, 10);
    put_u16(&w, 50);
    put_u16(&w, 200);
    put_shortstr(&w, "warren-perf done");
    put_u16(&w, 0);
    put_u16(&w, 0);
    end_frame(&w, at);
    return finish(&w);
}

size_t wire_encode_connection_close_ok(uint8_t *out, size_t cap)
{
    writer w = {out, cap, 0, 0};
    size_t at = begin_frame(&w, WIRE_FRAME_METHOD, 0);
    put_u16(&w, 10);
    put_u16(&w, 51);
    end_frame(&w, at);
    return finish(&w);
}
