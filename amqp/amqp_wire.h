/* amqp_wire: the codec's private bounds-checked read primitives, shared by
 * codec.c, frame.c and the generated amqp_spec.c. Not part of the module's
 * interface; nothing outside amqp/ includes it.
 *
 * Every reader takes (buf, len, off), reads at *off, and either advances
 * *off and returns true or leaves *off alone and returns false. Checks are
 * written `n <= len - *off` (with *off <= len as the invariant) so that a
 * huge n cannot wrap the comparison the way `*off + n <= len` can.
 */
#ifndef WARREN_AMQP_WIRE_H
#define WARREN_AMQP_WIRE_H

#include <assert.h>

#include "amqp.h"

static inline bool wire_has(size_t len, size_t off, size_t n)
{
    assert(off <= len);
    return n <= len - off;
}

static inline uint16_t wire_be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t wire_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t wire_be64(const uint8_t *p)
{
    return (uint64_t)wire_be32(p) << 32 | wire_be32(p + 4);
}

static inline bool wire_get_u8(const uint8_t *buf, size_t len, size_t *off, uint8_t *v)
{
    if (!wire_has(len, *off, 1))
        return false;
    *v = buf[*off];
    *off += 1;
    return true;
}

static inline bool wire_get_u16(const uint8_t *buf, size_t len, size_t *off, uint16_t *v)
{
    if (!wire_has(len, *off, 2))
        return false;
    *v = wire_be16(buf + *off);
    *off += 2;
    return true;
}

static inline bool wire_get_u32(const uint8_t *buf, size_t len, size_t *off, uint32_t *v)
{
    if (!wire_has(len, *off, 4))
        return false;
    *v = wire_be32(buf + *off);
    *off += 4;
    return true;
}

static inline bool wire_get_u64(const uint8_t *buf, size_t len, size_t *off, uint64_t *v)
{
    if (!wire_has(len, *off, 8))
        return false;
    *v = wire_be64(buf + *off);
    *off += 8;
    return true;
}

/* A slice of n bytes at *off. */
static inline bool wire_get_bytes(const uint8_t *buf, size_t len, size_t *off, uint32_t n,
                                  amqp_bytes *v)
{
    if (!wire_has(len, *off, n))
        return false;
    v->ptr = buf + *off;
    v->len = n;
    *off += n;
    return true;
}

static inline bool wire_get_shortstr(const uint8_t *buf, size_t len, size_t *off, amqp_bytes *v)
{
    size_t at = *off;
    uint8_t n;

    if (!wire_get_u8(buf, len, &at, &n) || !wire_get_bytes(buf, len, &at, n, v))
        return false;
    *off = at;
    return true;
}

static inline bool wire_get_longstr(const uint8_t *buf, size_t len, size_t *off, amqp_bytes *v)
{
    size_t at = *off;
    uint32_t n;

    if (!wire_get_u32(buf, len, &at, &n) || !wire_get_bytes(buf, len, &at, n, v))
        return false;
    *off = at;
    return true;
}

/* A table argument: its content as a slice, checked well formed (`err`
 * says why not, and may be NULL). */
static inline bool wire_get_table(const uint8_t *buf, size_t len, size_t *off, amqp_bytes *v,
                                  amqp_error *err)
{
    size_t at = *off;

    if (!wire_get_longstr(buf, len, &at, v) || amqp_table_validate(*v, err) != AMQP_OK)
        return false;
    *off = at;
    return true;
}

/* Writes a table argument from its content (adds the length prefix). */
static inline void wire_put_table(amqp_writer *w, amqp_bytes content)
{
    amqp_put_longstr(w, content);
}

#endif
