/* AMQP 1.0 type codec: reading one value, walking compounds, validation.
 *
 * A value is a constructor byte and its payload (part 1, 1.6): fixed widths
 * 0/1/2/4/8/16 by the code's high nibble (0x4-0x9), variable widths with an
 * 8- or 32-bit length (0xa/0xb), compounds (list, map) with a size and a
 * count (0xc/0xd), arrays (0xe/0xf) with a size, a count and one shared
 * element constructor, and 0x00 (described: a descriptor value, then the
 * value). Reading checks every length against what is left
 * (`n <= len - off`); compounds are only sliced here, and walked by
 * amqp10_next / validate, so a read never recurses except through
 * descriptors, and those at most AMQP10_MAX_DEPTH deep.
 *
 * Every item takes at least one byte -- in arrays of null, true, false,
 * uint0 or ulong0 too, as RabbitMQ's amqp10_binary_parser reads them (one
 * ignored byte each) -- so a count above the byte size is malformed and no
 * loop runs longer than its input.
 */
#include <math.h>

#include "amqp10_int.h"

static uint64_t be(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

static int read_at(const uint8_t *buf, size_t len, size_t *off, amqp10_value *out, int depth);

/* Fixed-width payloads by constructor: width + 1 (0: not fixed) and type;
 * a table, since every value read looks here. */
static const struct {
    uint8_t width1;
    uint8_t type;
} fixed_codes[256] = {
    [0x40] = {1, AMQP10_NULL},       [0x41] = {1, AMQP10_BOOL},       [0x42] = {1, AMQP10_BOOL},
    [0x43] = {1, AMQP10_UINT},       [0x44] = {1, AMQP10_ULONG},      [0x45] = {1, AMQP10_LIST},
    [0x50] = {2, AMQP10_UBYTE},      [0x51] = {2, AMQP10_BYTE},       [0x52] = {2, AMQP10_UINT},
    [0x53] = {2, AMQP10_ULONG},      [0x54] = {2, AMQP10_INT},        [0x55] = {2, AMQP10_LONG},
    [0x56] = {2, AMQP10_BOOL},       [0x60] = {3, AMQP10_USHORT},     [0x61] = {3, AMQP10_SHORT},
    [0x70] = {5, AMQP10_UINT},       [0x71] = {5, AMQP10_INT},        [0x72] = {5, AMQP10_FLOAT},
    [0x73] = {5, AMQP10_CHAR},       [0x74] = {5, AMQP10_DECIMAL32},  [0x80] = {9, AMQP10_ULONG},
    [0x81] = {9, AMQP10_LONG},       [0x82] = {9, AMQP10_DOUBLE},     [0x83] = {9, AMQP10_TIMESTAMP},
    [0x84] = {9, AMQP10_DECIMAL64},  [0x94] = {17, AMQP10_DECIMAL128}, [0x98] = {17, AMQP10_UUID},
};

/* The payload width of a fixed-width code and its type; -1 for others. */
static int fixed(uint8_t code, amqp10_type *t)
{
    *t = (amqp10_type)fixed_codes[code].type;
    return (int)fixed_codes[code].width1 - 1;
}

/* Sets a fixed-width value from its payload p of `width` bytes. */
static void fixed_value(uint8_t code, const uint8_t *p, int width, amqp10_value *out)
{
    uint64_t u = be(p, (unsigned)width);
    switch (out->type) {
    case AMQP10_NULL:
    case AMQP10_LIST: /* list0 */
        memset(&out->v.compound, 0, sizeof out->v.compound);
        out->v.compound.items.ptr = p;
        break;
    case AMQP10_BOOL:
        out->v.b = code == 0x41 || (code == 0x56 && u != 0);
        break;
    case AMQP10_BYTE:
    case AMQP10_INT:
    case AMQP10_SHORT:
    case AMQP10_LONG:
    case AMQP10_TIMESTAMP: /* sign-extended from the payload's width */
        out->v.i = width == 1 ? (int8_t)u : width == 2 ? (int16_t)u : width == 4 ? (int32_t)u : (int64_t)u;
        break;
    case AMQP10_FLOAT: {
        uint32_t b32 = (uint32_t)u;
        memcpy(&out->v.f, &b32, sizeof out->v.f);
        break;
    }
    case AMQP10_DOUBLE:
        memcpy(&out->v.d, &u, sizeof out->v.d);
        break;
    case AMQP10_CHAR:
    case AMQP10_DECIMAL32:
    case AMQP10_DECIMAL64:
    case AMQP10_DECIMAL128:
    case AMQP10_UUID:
        out->v.bytes = (amqp_bytes){p, (uint32_t)width};
        break;
    default: /* unsigned integers */
        out->v.u = u;
        break;
    }
}

/* A list, map or array payload at *off: size and count of `w` bytes each. */
static int compound(uint8_t code, const uint8_t *buf, size_t len, size_t *off, amqp10_value *out,
                    int depth)
{
    unsigned w = (code & 0x10) ? 4 : 1;
    if (!has(len, *off, 2 * w))
        return AMQP10_MALFORMED;
    uint64_t size = be(buf + *off, w), count = be(buf + *off + w, w);
    if (size < w || !has(len, *off + w, size))
        return AMQP10_MALFORMED;
    size_t start = *off + 2 * w, end = *off + w + size;
    out->v.compound.count = (uint32_t)count;
    out->v.compound.elem_code = 0;
    out->v.compound.elem_descriptor = (amqp_bytes){NULL, 0};
    if ((code & 0xe0) == 0xe0) { /* array: the element constructor */
        if (start < end && buf[start] == 0x00) {
            amqp10_value d;
            size_t at = start + 1;
            if (depth >= AMQP10_MAX_DEPTH || read_at(buf, end, &at, &d, depth + 1) != AMQP10_OK)
                return AMQP10_MALFORMED;
            out->v.compound.elem_descriptor = d.raw;
            start = at;
        }
        if (start >= end || buf[start] == 0x00 || buf[start] == 0x45)
            return AMQP10_MALFORMED;
        out->v.compound.elem_code = buf[start++];
    }
    if (count > end - start)
        return AMQP10_MALFORMED;
    out->v.compound.items = (amqp_bytes){buf + start, (uint32_t)(end - start)};
    *off = end;
    return AMQP10_OK;
}

/* The payload of a value whose constructor is `code` (already consumed). */
static int payload(uint8_t code, const uint8_t *buf, size_t len, size_t *off, amqp10_value *out,
                   int depth)
{
    amqp10_type t;
    int width = fixed(code, &t);
    out->code = code;
    if (width >= 0) {
        out->type = t;
        if (!has(len, *off, (size_t)width))
            return AMQP10_MALFORMED;
        fixed_value(code, buf + *off, width, out);
        *off += (size_t)width;
        return AMQP10_OK;
    }
    switch (code) {
    case 0xa0: case 0xa1: case 0xa3: case 0xb0: case 0xb1: case 0xb3: {
        unsigned w = code >= 0xb0 ? 4 : 1;
        if (!has(len, *off, w))
            return AMQP10_MALFORMED;
        uint64_t n = be(buf + *off, w);
        if (!has(len, *off + w, n))
            return AMQP10_MALFORMED;
        out->type = (code & 0x0f) == 0 ? AMQP10_BINARY : (code & 0x0f) == 1 ? AMQP10_STRING
                                                                            : AMQP10_SYMBOL;
        out->v.bytes = (amqp_bytes){buf + *off + w, (uint32_t)n};
        *off += w + n;
        return AMQP10_OK;
    }
    case 0xc0: case 0xd0: out->type = AMQP10_LIST; break;
    case 0xc1: case 0xd1: out->type = AMQP10_MAP; break;
    case 0xe0: case 0xf0: out->type = AMQP10_ARRAY; break;
    default: return AMQP10_MALFORMED;
    }
    return compound(code, buf, len, off, out, depth);
}

static int read_at(const uint8_t *buf, size_t len, size_t *off, amqp10_value *out, int depth)
{
    size_t at = *off;
    if (!has(len, at, 1))
        return AMQP10_MALFORMED;
    uint8_t code = buf[at++];
    if (code == 0x00) {
        amqp10_value d, v;
        size_t dstart = at;
        if (depth >= AMQP10_MAX_DEPTH || read_at(buf, len, &at, &d, depth + 1) != AMQP10_OK)
            return AMQP10_MALFORMED;
        size_t vstart = at;
        if (read_at(buf, len, &at, &v, depth + 1) != AMQP10_OK)
            return AMQP10_MALFORMED;
        out->type = AMQP10_DESCRIBED;
        out->code = 0;
        out->v.described.descriptor = (amqp_bytes){buf + dstart, (uint32_t)(vstart - dstart)};
        out->v.described.value = (amqp_bytes){buf + vstart, (uint32_t)(at - vstart)};
    } else if (payload(code, buf, len, &at, out, depth) != AMQP10_OK) {
        return AMQP10_MALFORMED;
    }
    out->raw = (amqp_bytes){buf + *off, (uint32_t)(at - *off)};
    *off = at;
    return AMQP10_OK;
}

int amqp10_read(const uint8_t *buf, size_t len, size_t *off, amqp10_value *out)
{
    if (*off > len)
        return AMQP10_MALFORMED;
    return read_at(buf, len, off, out, 0);
}

void amqp10_iter_init(amqp10_iter *it, const amqp10_value *c)
{
    bool walkable = c->type == AMQP10_LIST || c->type == AMQP10_MAP || c->type == AMQP10_ARRAY;
    it->buf = walkable ? c->v.compound.items.ptr : NULL;
    it->len = walkable ? c->v.compound.items.len : 0;
    it->off = 0;
    it->left = walkable ? c->v.compound.count : 0;
    it->elem_code = c->type == AMQP10_ARRAY ? c->v.compound.elem_code : 0;
}

int amqp10_next(amqp10_iter *it, amqp10_value *out)
{
    if (it->left == 0)
        return it->off == it->len ? AMQP10_END : AMQP10_MALFORMED;
    size_t at = it->off;
    if (it->elem_code == 0) {
        if (read_at(it->buf, it->len, &at, out, 0) != AMQP10_OK)
            return AMQP10_MALFORMED;
    } else {
        amqp10_type t;
        /* zero-width elements take a byte each, as RabbitMQ reads them */
        if (fixed(it->elem_code, &t) == 0 && !has(it->len, at++, 1))
            return AMQP10_MALFORMED;
        size_t start = at;
        if (payload(it->elem_code, it->buf, it->len, &at, out, 0) != AMQP10_OK)
            return AMQP10_MALFORMED;
        out->raw = (amqp_bytes){it->buf + start, (uint32_t)(at - start)};
    }
    it->off = at;
    it->left--;
    return AMQP10_OK;
}

static bool is_descriptor(const amqp10_value *d)
{
    return d->type == AMQP10_ULONG || d->type == AMQP10_SYMBOL;
}

static int validate(const amqp10_value *v, int depth)
{
    if (depth > AMQP10_MAX_DEPTH)
        return AMQP10_MALFORMED;
    switch (v->type) {
    case AMQP10_BOOL:
        return v->code != 0x56 || v->raw.ptr[v->raw.len - 1] <= 1 ? AMQP10_OK : AMQP10_MALFORMED;
    case AMQP10_DESCRIBED: {
        amqp10_value d, inner;
        size_t a = 0, b = 0;
        if (amqp10_read(v->v.described.descriptor.ptr, v->v.described.descriptor.len, &a, &d) ||
            !is_descriptor(&d) ||
            amqp10_read(v->v.described.value.ptr, v->v.described.value.len, &b, &inner))
            return AMQP10_MALFORMED;
        return validate(&inner, depth + 1);
    }
    case AMQP10_MAP:
        if (v->v.compound.count % 2)
            return AMQP10_MALFORMED;
        /* fall through */
    case AMQP10_LIST:
    case AMQP10_ARRAY: {
        amqp10_iter it;
        amqp10_value item;
        int rc;
        if (v->type == AMQP10_ARRAY && v->v.compound.elem_descriptor.len) {
            size_t a = 0;
            amqp10_value d;
            if (amqp10_read(v->v.compound.elem_descriptor.ptr, v->v.compound.elem_descriptor.len,
                            &a, &d) || !is_descriptor(&d))
                return AMQP10_MALFORMED;
        }
        amqp10_iter_init(&it, v);
        while ((rc = amqp10_next(&it, &item)) == AMQP10_OK)
            if (validate(&item, depth + 1) != AMQP10_OK)
                return AMQP10_MALFORMED;
        return rc == AMQP10_END ? AMQP10_OK : AMQP10_MALFORMED;
    }
    default:
        return AMQP10_OK;
    }
}

int amqp10_read_valid(const uint8_t *buf, size_t len, size_t *off, amqp10_value *out)
{
    size_t at = *off;
    if (amqp10_read(buf, len, &at, out) != AMQP10_OK || validate(out, 0) != AMQP10_OK)
        return AMQP10_MALFORMED;
    *off = at;
    return AMQP10_OK;
}

bool amqp10_value_is(const amqp10_value *v, const char *s)
{
    size_t n = strlen(s);
    return (v->type == AMQP10_STRING || v->type == AMQP10_SYMBOL || v->type == AMQP10_BINARY) &&
           v->v.bytes.len == n && memcmp(v->v.bytes.ptr, s, n) == 0;
}

bool amqp10_map_get(const amqp10_value *map, const char *key, amqp10_value *value)
{
    amqp10_iter it;
    amqp10_value k;
    if (map->type != AMQP10_MAP)
        return false;
    amqp10_iter_init(&it, map);
    while (amqp10_next(&it, &k) == AMQP10_OK && amqp10_next(&it, value) == AMQP10_OK)
        if (k.type != AMQP10_BINARY && amqp10_value_is(&k, key))
            return true;
    return false;
}

bool amqp10_descriptor_code(const amqp10_value *described, uint64_t *code)
{
    /* the section names of part 3, by code from 0x70 */
    static const char *const names[] = {
        "amqp:header:list", "amqp:delivery-annotations:map", "amqp:message-annotations:map",
        "amqp:properties:list", "amqp:application-properties:map", "amqp:data:binary",
        "amqp:amqp-sequence:list", "amqp:amqp-value:*", "amqp:footer:map",
    };
    amqp10_value d;
    size_t at = 0;
    if (described->type != AMQP10_DESCRIBED ||
        amqp10_read(described->v.described.descriptor.ptr, described->v.described.descriptor.len,
                    &at, &d) != AMQP10_OK)
        return false;
    if (d.type == AMQP10_ULONG) {
        *code = d.v.u;
        return true;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (amqp10_value_is(&d, names[i]) && d.type == AMQP10_SYMBOL) {
            *code = 0x70 + i;
            return true;
        }
    return false;
}
