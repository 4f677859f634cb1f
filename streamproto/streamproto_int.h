/* streamproto_int: the module's private bounds-checked readers, shared by
 * frame.c and decode.c. Nothing outside streamproto/ includes it.
 *
 * A reader (struct rd) walks [p, end); each get checks `n <= left` before
 * it reads and, on a short input, sets `bad` and yields zeros, so a decode
 * reads every field in order and checks `bad` once at the end. */
#ifndef WARREN_STREAMPROTO_INT_H
#define WARREN_STREAMPROTO_INT_H

#include "streamproto.h"

typedef struct rd {
    const uint8_t *p;
    size_t left;
    bool bad;
} rd;

static inline uint16_t sp_be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t sp_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t sp_be64(const uint8_t *p)
{
    return (uint64_t)sp_be32(p) << 32 | sp_be32(p + 4);
}

/* n bytes at the cursor, or NULL (and bad) when fewer are left. */
static inline const uint8_t *rd_take(rd *r, size_t n)
{
    if (r->bad || n > r->left) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

static inline uint8_t rd_u8(rd *r)
{
    const uint8_t *p = rd_take(r, 1);
    return p ? p[0] : 0;
}

static inline uint16_t rd_u16(rd *r)
{
    const uint8_t *p = rd_take(r, 2);
    return p ? sp_be16(p) : 0;
}

static inline uint32_t rd_u32(rd *r)
{
    const uint8_t *p = rd_take(r, 4);
    return p ? sp_be32(p) : 0;
}

static inline uint64_t rd_u64(rd *r)
{
    const uint8_t *p = rd_take(r, 8);
    return p ? sp_be64(p) : 0;
}

/* A string: uint16 length and bytes. RabbitMQ reads the length unsigned, so
 * -1 (null) asks for 65535 bytes, and so does this. */
static inline sp_slice rd_str(rd *r)
{
    uint16_t n = rd_u16(r);
    const uint8_t *p = rd_take(r, n);
    return (sp_slice){p, p ? n : 0};
}

#endif
