/* key: a message's deduplication key and the arguments that configure a
 * cache.
 *
 * A key is SipHash-2-4 (128-bit output) of the header value's bytes in a
 * canonical form, under the cache's secret xor a per-class constant, so
 * values of different classes never meet: integer (every integer type and
 * timestamps, as int64 little-endian), string (longstr and bytes, the
 * bytes), float (float and double, as the double's bits), bool, void,
 * decimal (scale and value).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "dedup_int.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1, v1 = ROTL(v1, 13), v1 ^= v0, v0 = ROTL(v0, 32);                                  \
        v2 += v3, v3 = ROTL(v3, 16), v3 ^= v2;                                                     \
        v0 += v3, v3 = ROTL(v3, 21), v3 ^= v0;                                                     \
        v2 += v1, v1 = ROTL(v1, 17), v1 ^= v2, v2 = ROTL(v2, 32);                                  \
    } while (0)

#define ROUNDS(n)                                                                                  \
    for (int r_ = 0; r_ < (n); r_++)                                                               \
    SIPROUND

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--)
        x = x << 8 | p[i];
    return x;
}

dedup_key dedup_siphash128(const uint64_t secret[2], const uint8_t *p, size_t len)
{
    uint64_t k0 = secret[0], k1 = secret[1];
    uint64_t v0 = 0x736f6d6570736575ull ^ k0, v1 = 0x646f72616e646f6dull ^ k1 ^ 0xee;
    uint64_t v2 = 0x6c7967656e657261ull ^ k0, v3 = 0x7465646279746573ull ^ k1;
    size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = load_le64(p + i);
        v3 ^= m;
        ROUNDS(2);
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    for (size_t i = 0; i < (len & 7); i++)
        b |= (uint64_t)p[whole + i] << (8 * i);
    v3 ^= b;
    ROUNDS(2);
    v0 ^= b;
    v2 ^= 0xee;
    ROUNDS(4);
    dedup_key k = {{v0 ^ v1 ^ v2 ^ v3, 0}};
    v1 ^= 0xdd;
    ROUNDS(4);
    k.h[1] = v0 ^ v1 ^ v2 ^ v3;
    return k;
}

void dedup_secret(uint64_t secret[2])
{
    if (getrandom(secret, 2 * sizeof *secret, 0) != (ssize_t)(2 * sizeof *secret)) {
        /* no entropy: still a working hash, only a predictable one */
        secret[0] = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)secret;
        secret[1] = 0xc2b2ae3d27d4eb4full;
    }
}

/* The class of a header value, 0 when it cannot be a key. */
static uint8_t class_of(uint8_t type)
{
    switch (type) {
    case 'S': case 'x': return 's';
    case 'f': case 'd': return 'f';
    case 't': case 'V': case 'D': return type;
    case 'A': case 'F': return 0;
    default: return 'i'; /* b B s u I i l T */
    }
}

static void put_le64(uint8_t *p, uint64_t x)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(x >> (8 * i));
}

static bool key_of_field(const dedup_cache *c, const amqp_field *f, dedup_key *out)
{
    uint8_t cls = class_of(f->type), buf[8];
    if (!cls)
        return false;
    const uint64_t secret[2] = {c->secret[0] ^ cls, c->secret[1]};
    const uint8_t *p = buf;
    size_t len = 8;
    int64_t i;
    if (cls == 's') {
        p = f->v.bytes.ptr, len = f->v.bytes.len;
    } else if (cls == 'f') {
        double d = f->type == 'f' ? (double)f->v.f : f->v.d;
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        put_le64(buf, bits);
    } else if (cls == 'D') {
        put_le64(buf, (uint64_t)f->v.decimal.scale << 32 | f->v.decimal.value);
    } else if (cls == 'V') {
        len = 0;
    } else if (cls == 't' || !amqp_field_int(f, &i)) {
        put_le64(buf, (uint64_t)f->v.i);
    } else {
        put_le64(buf, (uint64_t)i);
    }
    *out = dedup_siphash128(secret, p, len);
    return true;
}

bool dedup_key_of(const dedup_cache *c, amqp_bytes headers, const char *name, dedup_key *out,
                  int64_t *ttl_ms)
{
    *ttl_ms = -1;
    bool found = false;
    size_t nlen = strlen(name);
    amqp_iter it;
    amqp_bytes k;
    amqp_field v;
    amqp_iter_init(&it, headers);
    while (amqp_table_next(&it, &k, &v)) {
        int64_t ttl;
        if (k.len == nlen && memcmp(k.ptr, name, nlen) == 0)
            found = key_of_field(c, &v, out);
        else if (k.len == 11 && memcmp(k.ptr, "x-cache-ttl", 11) == 0 && v.type != 't' &&
                 amqp_field_int(&v, &ttl) && ttl >= 0)
            *ttl_ms = ttl;
    }
    return found;
}

/* ---- arguments ---------------------------------------------------------- */

/* An integer argument: any integer type, or a longstr of decimal digits
 * (the plugin takes both); false otherwise or past INT64_MAX. */
static bool arg_int(const amqp_field *f, bool strings, int64_t *out)
{
    if (f->type == 'S' && strings) {
        if (f->v.bytes.len == 0 || f->v.bytes.len > 18)
            return false;
        int64_t v = 0;
        for (uint32_t i = 0; i < f->v.bytes.len; i++) {
            uint8_t ch = f->v.bytes.ptr[i];
            if (ch < '0' || ch > '9')
                return false;
            v = v * 10 + (ch - '0');
        }
        *out = v;
        return true;
    }
    return f->type != 't' && f->type != 'T' && amqp_field_int(f, out);
}

static int bad(amqp_error *err, uint32_t method_id, const char *text)
{
    return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id, "%s", text);
}

/* x-cache-size and x-cache-ttl: the plugin's texts on exchanges,
 * LavinMQ's on queues. */
static int parse_numbers(amqp_bytes args, bool for_queue, uint32_t method_id, dedup_config *out,
                         amqp_error *err)
{
    amqp_field f;
    int64_t v;
    if (amqp_table_get(args, "x-cache-size", &f)) {
        if (!arg_int(&f, !for_queue, &v))
            return bad(err, method_id,
                       for_queue ? "x-cache-size header not an integer"
                                 : "Missing or invalid argument, 'x-cache-size' must be an "
                                   "integer greater than 0");
        if (v <= 0)
            return bad(err, method_id,
                       for_queue ? "x-cache-size header less than minimum value 1"
                                 : "Missing or invalid argument, 'x-cache-size' must be an "
                                   "integer greater than 0");
        if (v > DEDUP_MAX_SIZE)
            return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id,
                             "Invalid argument, 'x-cache-size' must be at most %u",
                             DEDUP_MAX_SIZE);
        out->size = (uint32_t)v;
    }
    if (amqp_table_get(args, "x-cache-ttl", &f)) {
        if (!arg_int(&f, !for_queue, &v))
            return bad(err, method_id,
                       for_queue ? "x-cache-ttl header not an integer"
                                 : "Invalid argument, 'x-cache-ttl' must be an integer greater "
                                   "than 0");
        if (v <= 0 && !(for_queue && v == 0))
            return bad(err, method_id,
                       for_queue ? "x-cache-ttl header less than minimum value 0"
                                 : "Invalid argument, 'x-cache-ttl' must be an integer greater "
                                   "than 0");
        out->ttl_ms = v;
    }
    return AMQP_OK;
}

/* The arguments of a cache that is on. */
static int parse_on(amqp_bytes args, bool for_queue, uint32_t method_id, dedup_config *out,
                    amqp_error *err)
{
    amqp_field f;
    if (parse_numbers(args, for_queue, method_id, out, err) != AMQP_OK)
        return AMQP_ERROR;
    if (amqp_table_get(args, "x-cache-persistence", &f)) {
        bool disk = f.type == 'S' && f.v.bytes.len == 4 && memcmp(f.v.bytes.ptr, "disk", 4) == 0;
        if (!disk && !(f.type == 'S' && f.v.bytes.len == 6 &&
                       memcmp(f.v.bytes.ptr, "memory", 6) == 0))
            return bad(err, method_id,
                       "Invalid argument, 'x-cache-persistence' must be either 'disk' or "
                       "'memory'");
        out->disk = disk;
    }
    if (amqp_table_get(args, DEDUP_HEADER, &f)) {
        if (f.type != 'S' || f.v.bytes.len > DEDUP_HEADER_MAX ||
            memchr(f.v.bytes.ptr, 0, f.v.bytes.len))
            return bad(err, method_id, "x-deduplication-header header not a string");
        memcpy(out->header, f.v.bytes.ptr, f.v.bytes.len);
        out->header[f.v.bytes.len] = 0;
        out->header_len = (uint8_t)f.v.bytes.len;
    }
    out->on = true;
    return AMQP_OK;
}

static void defaults(bool for_queue, dedup_config *out)
{
    *out = (dedup_config){.size = for_queue ? DEDUP_MAX_SIZE : DEDUP_DEFAULT_SIZE, .ttl_ms = -1};
    memcpy(out->header, DEDUP_HEADER, sizeof DEDUP_HEADER);
    out->header_len = sizeof DEDUP_HEADER - 1;
}

int dedup_config_parse(amqp_bytes args, bool for_queue, uint32_t method_id, dedup_config *out,
                       amqp_error *err)
{
    defaults(for_queue, out);
    amqp_field f;
    if (!amqp_table_get(args, "x-message-deduplication", &f))
        return AMQP_OK;
    if (f.type != 't') {
        if (for_queue)
            return bad(err, method_id, "x-message-deduplication header not a boolean");
        return AMQP_OK; /* LavinMQ: only true turns it on */
    }
    return f.v.i ? parse_on(args, for_queue, method_id, out, err) : AMQP_OK;
}

int dedup_config_parse_typed(amqp_bytes args, uint32_t method_id, dedup_config *out,
                             amqp_error *err)
{
    amqp_field f;
    defaults(false, out);
    if (!amqp_table_get(args, "x-cache-size", &f))
        return bad(err, method_id,
                   "Missing or invalid argument, 'x-cache-size' must be an integer greater than 0");
    return parse_on(args, false, method_id, out, err);
}
