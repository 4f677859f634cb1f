/* codec: errors, field tables and arrays, the writer, and content headers.
 *
 * Field tables are never decoded into a structure. A table stays a slice of
 * its encoded content; amqp_table_validate walks it once (recursively, up to
 * AMQP_TABLE_MAX_DEPTH levels counting the outermost table as 1), and the
 * iterators then walk the validated bytes on demand. The iterators still
 * bounds-check every step, so handing them unvalidated bytes ends the walk
 * early instead of reading out of bounds.
 *
 * Field value encodings (RabbitMQ's set, rabbit_binary_parser):
 *   t bool(u8)  b i8  B u8  s i16  u u16  I i32  i u32  l i64  T u64 seconds
 *   f float32  d float64  D scale(u8) + u32  S longstr  x bytes(longstr)
 *   F table(u32 len + content)  A array(u32 len + values)  V void (no bytes)
 *
 * The writer appends big-endian values into a fixed buffer. Overflow is
 * sticky: once a put does not fit, every later put is a no-op, so a
 * sequence of puts is checked once at the end.
 */
#include <endian.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "amqp.h"
#include "amqp_wire.h"

/* ---- errors ------------------------------------------------------------- */

int amqp_fail_crash(amqp_error *err, uint32_t method_id)
{
    amqp_fail(err, AMQP_INTERNAL_ERROR, method_id, "x");
    if (err)
        snprintf(err->text, sizeof err->text, "%s", amqp_reply_name(AMQP_INTERNAL_ERROR));
    return AMQP_ERROR;
}

int amqp_fail(amqp_error *err, uint16_t code, uint32_t method_id, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (err == NULL)
        return AMQP_ERROR;
    err->code = code;
    err->method_id = method_id;
    err->silent = false;
    err->final = false;
    n = snprintf(err->text, sizeof err->text, "%s - ", amqp_reply_name(code));
    if (n < 0 || (size_t)n >= sizeof err->text)
        return AMQP_ERROR;
    va_start(ap, fmt);
    int k = vsnprintf(err->text + n, sizeof err->text - (size_t)n, fmt, ap);
    va_end(ap);
    /* A reply-text is a shortstr: RabbitMQ keeps 252 octets and adds "...". */
    if (k > 0 && (size_t)n + (size_t)k > 255)
        memcpy(err->text + 252, "...", 4);
    return AMQP_ERROR;
}

/* ---- field values ------------------------------------------------------- */

static bool field_type_known(uint8_t t)
{
    return t != 0 && strchr("tbBsuIilLfdDSATFVx", t) != NULL;
}

static size_t integer_width(uint8_t type)
{
    switch (type) {
    case 't': case 'b': case 'B': return 1;
    case 's': case 'u': return 2;
    case 'I': case 'i': return 4;
    default: return 8; /* 'l', 'L', 'T' */
    }
}

/* Reads a big-endian integer into f->v.i, sign-extending the signed tags
 * (b s I) and zero-extending the rest; 't' becomes 0 or 1. */
static bool read_integer(const uint8_t *buf, size_t len, size_t *off, amqp_field *f)
{
    size_t n = integer_width(f->type);
    uint64_t u = 0;

    if (!wire_has(len, *off, n))
        return false;
    for (size_t i = 0; i < n; i++)
        u = u << 8 | buf[*off + i];
    *off += n;
    switch (f->type) {
    case 't': f->v.i = u != 0; break;
    case 'b': f->v.i = (int8_t)u; break;
    case 's': f->v.i = (int16_t)u; break;
    case 'I': f->v.i = (int32_t)u; break;
    default: f->v.i = (int64_t)u; break;
    }
    return true;
}

/* Reads one tagged value at *off; false (and *off unchanged) when the tag is
 * unknown or the value does not fit in the buffer. Nested F/A content is
 * sliced, not checked; that is amqp_table_validate's job. */
static bool field_read(const uint8_t *buf, size_t len, size_t *off, amqp_field *f)
{
    size_t at = *off;
    uint32_t u32;
    uint64_t u64;
    bool ok;

    memset(f, 0, sizeof *f);
    if (!wire_get_u8(buf, len, &at, &f->type))
        return false;
    switch (f->type) {
    case 't': case 'b': case 'B': case 's': case 'u': case 'I': case 'i': case 'l': case 'L':
    case 'T':
        ok = read_integer(buf, len, &at, f);
        break;
    case 'f':
        if ((ok = wire_get_u32(buf, len, &at, &u32)))
            memcpy(&f->v.f, &u32, sizeof f->v.f);
        break;
    case 'd':
        if ((ok = wire_get_u64(buf, len, &at, &u64)))
            memcpy(&f->v.d, &u64, sizeof f->v.d);
        break;
    case 'D':
        ok = wire_get_u8(buf, len, &at, &f->v.decimal.scale) &&
             wire_get_u32(buf, len, &at, &f->v.decimal.value);
        break;
    case 'S': case 'x': case 'F': case 'A':
        ok = wire_get_longstr(buf, len, &at, &f->v.bytes);
        break;
    case 'V':
        ok = true;
        break;
    default:
        ok = false;
    }
    if (ok)
        *off = at;
    return ok;
}

/* ---- validation --------------------------------------------------------- */

static int table_check(amqp_bytes t, int depth, amqp_error *err);
static int array_check(amqp_bytes a, int depth, amqp_error *err);

/* "NaN", "Infinity" or "-Infinity" for a non-finite float or double; NULL
 * for every other value. */
static const char *non_finite(const amqp_field *f)
{
    double d;

    if (f->type == 'f')
        d = f->v.f;
    else if (f->type == 'd')
        d = f->v.d;
    else
        return NULL;
    if (isnan(d))
        return "NaN";
    if (isinf(d))
        return d < 0 ? "-Infinity" : "Infinity";
    return NULL;
}

/* Reads and checks one value, descending into F and A. `what` names the
 * position for the error text. */
static int value_check(amqp_bytes data, size_t *off, int depth, amqp_error *err,
                       const char *what, amqp_bytes key)
{
    amqp_field f;
    uint8_t tag = data.ptr[*off];

    if (!field_type_known(tag)) {
        amqp_fail(err, AMQP_SYNTAX_ERROR, 0, "unknown field type '%c' (0x%02x) in %s '%.*s'",
                  tag >= 0x20 && tag < 0x7f ? tag : '?', tag, what, (int)key.len,
                  (const char *)key.ptr);
        if (err)
            err->silent = true; /* RabbitMQ's parser has no clause for it */
        return AMQP_ERROR;
    }
    if (!field_read(data.ptr, data.len, off, &f))
        return amqp_fail(err, AMQP_SYNTAX_ERROR, 0, "truncated '%c' value in %s '%.*s'", tag,
                         what, (int)key.len, (const char *)key.ptr);
    if (non_finite(&f) != NULL) {
        amqp_fail(err, AMQP_SYNTAX_ERROR, 0, "non-finite %s value %s in %s '%.*s'",
                  amqp_erl_type_name(f.type), non_finite(&f), what, (int)key.len,
                  (const char *)key.ptr);
        if (err)
            err->final = true;
        return AMQP_ERROR;
    }
    if (f.type == 'F')
        return table_check(f.v.bytes, depth + 1, err);
    if (f.type == 'A')
        return array_check(f.v.bytes, depth + 1, err);
    return AMQP_OK;
}

static int depth_check(int depth, amqp_error *err)
{
    if (depth > AMQP_TABLE_MAX_DEPTH)
        return amqp_fail(err, AMQP_SYNTAX_ERROR, 0, "field tables nested deeper than %d levels",
                         AMQP_TABLE_MAX_DEPTH);
    return AMQP_OK;
}

static int table_check(amqp_bytes t, int depth, amqp_error *err)
{
    size_t off = 0;
    amqp_bytes key;

    if (depth_check(depth, err) != AMQP_OK)
        return AMQP_ERROR;
    while (off < t.len) {
        if (!wire_get_shortstr(t.ptr, t.len, &off, &key))
            return amqp_fail(err, AMQP_SYNTAX_ERROR, 0, "truncated field table key");
        if (off == t.len)
            return amqp_fail(err, AMQP_SYNTAX_ERROR, 0, "no value for table key '%.*s'",
                             (int)key.len, (const char *)key.ptr);
        if (value_check(t, &off, depth, err, "table key", key) != AMQP_OK)
            return AMQP_ERROR;
    }
    return AMQP_OK;
}

static int array_check(amqp_bytes a, int depth, amqp_error *err)
{
    size_t off = 0;

    if (depth_check(depth, err) != AMQP_OK)
        return AMQP_ERROR;
    while (off < a.len) {
        if (value_check(a, &off, depth, err, "array", AMQP_CSTR("")) != AMQP_OK)
            return AMQP_ERROR;
    }
    return AMQP_OK;
}

int amqp_table_validate(amqp_bytes table, amqp_error *err)
{
    return table_check(table, 1, err);
}

int amqp_array_validate(amqp_bytes array, amqp_error *err)
{
    return array_check(array, 1, err);
}

/* ---- iteration ---------------------------------------------------------- */

void amqp_iter_init(amqp_iter *it, amqp_bytes data)
{
    it->data = data;
    it->off = 0;
}

bool amqp_table_next(amqp_iter *it, amqp_bytes *key, amqp_field *value)
{
    size_t off = it->off;

    if (off >= it->data.len)
        return false;
    if (!wire_get_shortstr(it->data.ptr, it->data.len, &off, key) ||
        !field_read(it->data.ptr, it->data.len, &off, value)) {
        it->off = it->data.len; /* unvalidated garbage: stop, never overrun */
        return false;
    }
    it->off = (uint32_t)off;
    return true;
}

bool amqp_array_next(amqp_iter *it, amqp_field *value)
{
    size_t off = it->off;

    if (off >= it->data.len)
        return false;
    if (!field_read(it->data.ptr, it->data.len, &off, value)) {
        it->off = it->data.len;
        return false;
    }
    it->off = (uint32_t)off;
    return true;
}

/* The first occurrence wins, as in RabbitMQ's table_lookup. */
bool amqp_table_get(amqp_bytes table, const char *key, amqp_field *value)
{
    amqp_iter it;
    amqp_bytes k;
    amqp_field v;

    amqp_iter_init(&it, table);
    while (amqp_table_next(&it, &k, &v)) {
        if (amqp_bytes_equal_cstr(k, key)) {
            *value = v;
            return true;
        }
    }
    return false;
}

/* ---- comparison --------------------------------------------------------- */

static bool is_integer_type(uint8_t t)
{
    return t != 0 && strchr("bBsuIilLT", t) != NULL;
}

bool amqp_field_int(const amqp_field *f, int64_t *out)
{
    if (!is_integer_type(f->type))
        return false;
    *out = f->v.i;
    return true;
}

/* T and L are unsigned 64-bit; above INT64_MAX they sit in `i` negative. */
static bool is_huge(const amqp_field *f)
{
    return (f->type == 'T' || f->type == 'L') && f->v.i < 0;
}

static double as_double(const amqp_field *f)
{
    if (f->type == 'f')
        return f->v.f;
    if (f->type == 'd')
        return f->v.d;
    return is_huge(f) ? (double)(uint64_t)f->v.i : (double)f->v.i;
}

/* Erlang `==` on numbers: integers exactly, integer vs float via float. */
static bool numbers_equal(const amqp_field *a, const amqp_field *b)
{
    if (is_integer_type(a->type) && is_integer_type(b->type))
        return is_huge(a) == is_huge(b) && a->v.i == b->v.i;
    return as_double(a) == as_double(b);
}

static bool is_number(uint8_t t)
{
    return is_integer_type(t) || t == 'f' || t == 'd';
}

static bool containers_equal(const amqp_field *a, const amqp_field *b, int depth);

/* Elements inside nested tables and arrays compare as RabbitMQ's {Type,
 * Value} tuples do: the tags must match as well as the values. */
static bool elements_equal(const amqp_field *a, const amqp_field *b, int depth)
{
    if (a->type != b->type)
        return false;
    if (a->type == 'F' || a->type == 'A')
        return containers_equal(a, b, depth + 1);
    return amqp_field_equal(a, b);
}

static bool containers_equal(const amqp_field *a, const amqp_field *b, int depth)
{
    amqp_iter ia, ib;
    amqp_bytes ka, kb;
    amqp_field va, vb;
    bool more_a, more_b;

    if (depth > AMQP_TABLE_MAX_DEPTH)
        return amqp_bytes_equal(a->v.bytes, b->v.bytes);
    amqp_iter_init(&ia, a->v.bytes);
    amqp_iter_init(&ib, b->v.bytes);
    for (;;) {
        if (a->type == 'F') {
            more_a = amqp_table_next(&ia, &ka, &va);
            more_b = amqp_table_next(&ib, &kb, &vb);
        } else {
            more_a = amqp_array_next(&ia, &va);
            more_b = amqp_array_next(&ib, &vb);
            ka = kb = AMQP_CSTR("");
        }
        if (!more_a || !more_b)
            return more_a == more_b;
        if (!amqp_bytes_equal(ka, kb) || !elements_equal(&va, &vb, depth))
            return false;
    }
}

/* RabbitMQ's headers exchange compares values with Erlang `==`, which
 * ignores the tag between numbers (1 == 1.0) and between S and x (both
 * binaries), but not elsewhere. */
bool amqp_field_equal(const amqp_field *a, const amqp_field *b)
{
    if (is_number(a->type) && is_number(b->type))
        return numbers_equal(a, b);
    if ((a->type == 'S' || a->type == 'x') && (b->type == 'S' || b->type == 'x'))
        return amqp_bytes_equal(a->v.bytes, b->v.bytes);
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case 't': return (a->v.i != 0) == (b->v.i != 0);
    case 'D': return a->v.decimal.scale == b->v.decimal.scale &&
                     a->v.decimal.value == b->v.decimal.value;
    case 'V': return true;
    case 'F': case 'A': return containers_equal(a, b, 1);
    default: return false;
    }
}

bool amqp_bytes_equal(amqp_bytes a, amqp_bytes b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

bool amqp_bytes_equal_cstr(amqp_bytes a, const char *s)
{
    return amqp_bytes_equal(a, AMQP_CSTR(s));
}

/* ---- writer ------------------------------------------------------------- */

void amqp_writer_init(amqp_writer *w, uint8_t *buf, size_t cap)
{
    w->buf = buf;
    w->cap = cap;
    w->len = 0;
    w->overflow = false;
}

void amqp_put_raw(amqp_writer *w, const void *p, size_t n)
{
    if (w->overflow || n > w->cap - w->len) {
        w->overflow = true;
        return;
    }
    if (n > 0)
        memcpy(w->buf + w->len, p, n);
    w->len += n;
}

void amqp_put_u8(amqp_writer *w, uint8_t v)
{
    amqp_put_raw(w, &v, 1);
}

/* Network order in one store each (a delivery encodes several). */
void amqp_put_u16(amqp_writer *w, uint16_t v)
{
    uint16_t b = htobe16(v);

    amqp_put_raw(w, &b, sizeof b);
}

void amqp_put_u32(amqp_writer *w, uint32_t v)
{
    uint32_t b = htobe32(v);

    amqp_put_raw(w, &b, sizeof b);
}

void amqp_put_u64(amqp_writer *w, uint64_t v)
{
    uint64_t b = htobe64(v);

    amqp_put_raw(w, &b, sizeof b);
}

void amqp_put_shortstr(amqp_writer *w, amqp_bytes s)
{
    if (s.len > 255) {
        w->overflow = true;
        return;
    }
    amqp_put_u8(w, (uint8_t)s.len);
    amqp_put_raw(w, s.ptr, s.len);
}

void amqp_put_longstr(amqp_writer *w, amqp_bytes s)
{
    amqp_put_u32(w, s.len);
    amqp_put_raw(w, s.ptr, s.len);
}

size_t amqp_table_begin(amqp_writer *w)
{
    size_t mark = w->len;

    amqp_put_u32(w, 0); /* patched by amqp_table_end */
    return mark;
}

void amqp_table_end(amqp_writer *w, size_t mark)
{
    size_t n;
    uint8_t *p;

    if (w->overflow)
        return;
    assert(mark + 4 <= w->len);
    n = w->len - mark - 4;
    if (n > UINT32_MAX) {
        w->overflow = true;
        return;
    }
    p = w->buf + mark;
    p[0] = (uint8_t)(n >> 24);
    p[1] = (uint8_t)(n >> 16);
    p[2] = (uint8_t)(n >> 8);
    p[3] = (uint8_t)n;
}

size_t amqp_put_field_begin(amqp_writer *w, uint8_t type)
{
    if (type != 'F' && type != 'A')
        w->overflow = true;
    amqp_put_u8(w, type);
    return amqp_table_begin(w);
}

void amqp_put_key(amqp_writer *w, const char *key)
{
    amqp_put_shortstr(w, AMQP_CSTR(key));
}

static void put_float_bits(amqp_writer *w, const amqp_field *f)
{
    uint32_t u32;
    uint64_t u64;

    if (f->type == 'f') {
        memcpy(&u32, &f->v.f, sizeof u32);
        amqp_put_u32(w, u32);
    } else {
        memcpy(&u64, &f->v.d, sizeof u64);
        amqp_put_u64(w, u64);
    }
}

void amqp_put_field(amqp_writer *w, const amqp_field *f)
{
    if (!field_type_known(f->type)) {
        w->overflow = true; /* an unknown tag cannot be encoded */
        return;
    }
    amqp_put_u8(w, f->type);
    switch (f->type) {
    case 't': amqp_put_u8(w, f->v.i != 0); break;
    case 'b': case 'B': amqp_put_u8(w, (uint8_t)f->v.i); break;
    case 's': case 'u': amqp_put_u16(w, (uint16_t)f->v.i); break;
    case 'I': case 'i': amqp_put_u32(w, (uint32_t)f->v.i); break;
    case 'l': case 'L': case 'T': amqp_put_u64(w, (uint64_t)f->v.i); break;
    case 'f': case 'd': put_float_bits(w, f); break;
    case 'D':
        amqp_put_u8(w, f->v.decimal.scale);
        amqp_put_u32(w, f->v.decimal.value);
        break;
    case 'V': break;
    default: amqp_put_longstr(w, f->v.bytes); break; /* S x F A */
    }
}

void amqp_put_field_bool(amqp_writer *w, const char *key, bool v)
{
    amqp_put_key(w, key);
    amqp_put_u8(w, 't');
    amqp_put_u8(w, v);
}

void amqp_put_field_str(amqp_writer *w, const char *key, amqp_bytes v)
{
    amqp_put_key(w, key);
    amqp_put_u8(w, 'S');
    amqp_put_longstr(w, v);
}

void amqp_put_field_long(amqp_writer *w, const char *key, int64_t v)
{
    amqp_put_key(w, key);
    amqp_put_u8(w, 'l');
    amqp_put_u64(w, (uint64_t)v);
}

/* ---- content headers ---------------------------------------------------- */

int amqp_content_header_decode(const uint8_t *buf, size_t len, amqp_content_header *out,
                               amqp_error *err)
{
    size_t off = 0;
    uint16_t weight;
    amqp_basic_properties props;

    memset(out, 0, sizeof *out);
    if (!wire_get_u16(buf, len, &off, &out->class_id) || !wire_get_u16(buf, len, &off, &weight) ||
        !wire_get_u64(buf, len, &off, &out->body_size))
        return amqp_fail(err, AMQP_SYNTAX_ERROR, 0, "content header too short (%zu bytes)", len);
    /* Codes and texts as RabbitMQ 3.10's command assembler answers them. */
    if (weight != 0)
        return amqp_fail(err, AMQP_UNEXPECTED_FRAME, 0, "expected content header for class %u, "
                         "got non content header frame instead", AMQP_CLASS_BASIC);
    if (out->class_id != AMQP_CLASS_BASIC)
        return amqp_fail(err, AMQP_UNEXPECTED_FRAME, 0,
                         "expected content header for class %u, got one for class %u instead",
                         AMQP_CLASS_BASIC, out->class_id);
    if (len - off > UINT32_MAX)
        return amqp_fail(err, AMQP_SYNTAX_ERROR, 0, "content header properties too long");
    out->properties.ptr = buf + off;
    out->properties.len = (uint32_t)(len - off);
    return amqp_properties_decode(out->properties, &props, err);
}

void amqp_put_entries_except(amqp_writer *w, amqp_bytes table, const char *skip)
{
    amqp_iter it;
    amqp_bytes key;
    amqp_field f;

    amqp_iter_init(&it, table);
    while (amqp_table_next(&it, &key, &f)) {
        if (amqp_bytes_equal_cstr(key, skip))
            continue;
        amqp_put_shortstr(w, key);
        amqp_put_field(w, &f);
    }
}
