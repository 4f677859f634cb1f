/* The streaming JSON writer and the AMQP table <-> JSON conversions.
 *
 * The writer stages output in `buf` and hands it to the evbuffer when full,
 * so a 10,000-queue listing costs a few hundred evbuffer_add calls, not one
 * per token. Per nesting level it remembers whether a value was written
 * (the next one needs a comma). Column selection (?columns=) drops keys
 * while writing: a key that is not selected puts the writer in skipping
 * mode until its value -- scalar or container -- is complete.
 */
#include <event2/buffer.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt.h"

#define STAGE 8192

struct mgmt_json {
    struct evbuffer *out;
    size_t flushed, len;
    int depth;                          /* open containers */
    int over;                           /* containers past MGMT_JSON_DEPTH */
    bool written[MGMT_JSON_DEPTH + 1];  /* a value was written at this depth */
    bool after_key;
    /* columns */
    char **cols;
    size_t ncols;
    int col_depth;
    bool skipping;
    int skip_depth;
    char partial[256]; /* the selected key at col_depth whose value is filtered */
    bool has_partial;
    char buf[STAGE];
};

mgmt_json *mgmt_json_new(struct evbuffer *out)
{
    mgmt_json *w = calloc(1, sizeof *w);
    if (w)
        w->out = out;
    return w;
}

void mgmt_json_flush(mgmt_json *w)
{
    if (w->len)
        evbuffer_add(w->out, w->buf, w->len);
    w->flushed += w->len;
    w->len = 0;
}

void mgmt_json_free(mgmt_json *w)
{
    if (!w)
        return;
    mgmt_json_flush(w);
    for (size_t i = 0; i < w->ncols; i++)
        free(w->cols[i]);
    free(w->cols);
    free(w);
}

size_t mgmt_json_written(const mgmt_json *w) { return w->flushed + w->len; }

static void put(mgmt_json *w, const void *p, size_t n)
{
    if (w->len + n > STAGE) {
        mgmt_json_flush(w);
        if (n > STAGE) {
            evbuffer_add(w->out, p, n);
            w->flushed += n;
            return;
        }
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void putc_(mgmt_json *w, char c)
{
    if (w->len == STAGE)
        mgmt_json_flush(w);
    w->buf[w->len++] = c;
}

bool mgmt_json_columns(mgmt_json *w, const char *csv, int depth)
{
    w->col_depth = depth;
    for (const char *p = csv; *p;) {
        size_t n = strcspn(p, ",");
        if (n) {
            char **grown = realloc(w->cols, (w->ncols + 1) * sizeof *grown);
            if (!grown)
                return false;
            w->cols = grown;
            if (!(w->cols[w->ncols] = strndup(p, n)))
                return false;
            w->ncols++;
        }
        p += n + (p[n] == ',');
    }
    return true;
}

/* ---- structure ---------------------------------------------------------- */

/* Ends a skipped value once the writer is back at the level it began. */
static void skip_value_done(mgmt_json *w)
{
    if (w->depth == w->skip_depth)
        w->skipping = false;
}

/* Before any value or key at the current depth: the comma. Returns false
 * when nothing is to be written (skipping, or too deep). */
static bool begin_value(mgmt_json *w)
{
    if (w->over)
        return false;
    if (w->skipping)
        return false;
    if (w->after_key)
        w->after_key = false;
    else if (w->written[w->depth])
        putc_(w, ',');
    w->written[w->depth] = true;
    return true;
}

static void open_container(mgmt_json *w, char c)
{
    if (w->skipping) {
        w->depth++;
        return;
    }
    if (w->over || w->depth == MGMT_JSON_DEPTH) {
        if (!w->over && begin_value(w))
            put(w, "null", 4);
        w->over++;
        return;
    }
    if (!begin_value(w))
        return;
    putc_(w, c);
    w->written[++w->depth] = false;
}

static void close_container(mgmt_json *w, char c)
{
    if (w->over) {
        w->over--;
        return;
    }
    if (w->skipping) {
        w->depth--;
        skip_value_done(w);
        return;
    }
    putc_(w, c);
    w->depth--;
    if (w->depth < w->col_depth)
        w->has_partial = false;
}

void mgmt_json_obj(mgmt_json *w) { open_container(w, '{'); }
void mgmt_json_end_obj(mgmt_json *w) { close_container(w, '}'); }
void mgmt_json_arr(mgmt_json *w) { open_container(w, '['); }
void mgmt_json_end_arr(mgmt_json *w) { close_container(w, ']'); }

/* 0 = drop, 1 = keep whole value, 2 = keep some of its keys. */
static int column_choice(const mgmt_json *w, const char *key, size_t klen)
{
    int choice = 0;
    for (size_t i = 0; i < w->ncols && choice != 1; i++) {
        const char *c = w->cols[i];
        if (w->depth == w->col_depth) {
            if (strlen(c) == klen && memcmp(c, key, klen) == 0)
                choice = 1;
            else if (strncmp(c, key, klen) == 0 && c[klen] == '.')
                choice = 2;
        } else {
            size_t pl = strlen(w->partial);
            if (strncmp(c, w->partial, pl) == 0 && c[pl] == '.' && strlen(c + pl + 1) == klen &&
                memcmp(c + pl + 1, key, klen) == 0)
                choice = 1;
        }
    }
    return choice;
}

/* Whether the key at the current depth is selected; starts skipping if not. */
static bool key_selected(mgmt_json *w, const char *key, size_t klen)
{
    if (!w->ncols || w->skipping || w->over)
        return !w->skipping && !w->over;
    bool filtered_level = w->depth == w->col_depth ||
                          (w->has_partial && w->depth == w->col_depth + 1);
    if (!filtered_level)
        return true;
    int choice = column_choice(w, key, klen);
    if (w->depth == w->col_depth) {
        w->has_partial = choice == 2;
        if (choice == 2)
            snprintf(w->partial, sizeof w->partial, "%.*s", (int)klen, key);
    }
    if (choice == 0) {
        w->skipping = true;
        w->skip_depth = w->depth;
    }
    return choice != 0;
}

static void put_string(mgmt_json *w, const uint8_t *p, size_t n);

static void write_key(mgmt_json *w, const char *key, size_t klen)
{
    if (!key_selected(w, key, klen) || !begin_value(w))
        return;
    put_string(w, (const uint8_t *)key, klen);
    putc_(w, ':');
    w->after_key = true;
}

void mgmt_json_key(mgmt_json *w, const char *key) { write_key(w, key, strlen(key)); }
void mgmt_json_key_bytes(mgmt_json *w, amqp_bytes k) { write_key(w, (const char *)k.ptr, k.len); }

/* ---- scalars ------------------------------------------------------------ */

/* A scalar: written, or consumed by skipping. */
static bool scalar(mgmt_json *w)
{
    if (w->skipping) {
        skip_value_done(w);
        return false;
    }
    return begin_value(w);
}

/* Length of the valid UTF-8 sequence at p (1..4), 0 if invalid: overlong
 * forms, surrogates and code points past U+10FFFF are invalid. */
size_t mgmt_utf8_len(const uint8_t *p, size_t n)
{
    uint8_t c = p[0];
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (!len || c > 0xF4 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0) || (c == 0xF0 && p[1] < 0x90) ||
        (c == 0xF4 && p[1] >= 0x90))
        return 0;
    return len;
}

static void put_string(mgmt_json *w, const uint8_t *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    putc_(w, '"');
    for (size_t i = 0; i < n;) {
        uint8_t c = p[i];
        if (c >= 0x80) {
            size_t len = mgmt_utf8_len(p + i, n - i);
            if (len)
                put(w, p + i, len);
            else
                put(w, "\\ufffd", 6);
            i += len ? len : 1;
            continue;
        }
        i++;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(w, e, 2);
        } else if (c == '\n') {
            put(w, "\\n", 2);
        } else if (c == '\r') {
            put(w, "\\r", 2);
        } else if (c == '\t') {
            put(w, "\\t", 2);
        } else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(w, e, 6);
        } else {
            putc_(w, (char)c);
        }
    }
    putc_(w, '"');
}

void mgmt_json_bytes(mgmt_json *w, amqp_bytes s)
{
    if (scalar(w))
        put_string(w, s.ptr, s.len);
}

void mgmt_json_str(mgmt_json *w, const char *s)
{
    if (!s)
        mgmt_json_null(w);
    else if (scalar(w))
        put_string(w, (const uint8_t *)s, strlen(s));
}

/* Decimal digits without printf: lists write tens of numbers per object. */
static void put_u64(mgmt_json *w, uint64_t v, bool negative)
{
    char b[24];
    size_t i = sizeof b;
    do {
        b[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (negative)
        b[--i] = '-';
    put(w, b + i, sizeof b - i);
}

void mgmt_json_int(mgmt_json *w, int64_t v)
{
    if (scalar(w))
        put_u64(w, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, v < 0);
}

void mgmt_json_uint(mgmt_json *w, uint64_t v)
{
    if (scalar(w))
        put_u64(w, v, false);
}

/* Shortest round-tripping form; integral values keep a ".0", as RabbitMQ
 * writes its rates. */
void mgmt_json_double(mgmt_json *w, double v)
{
    if (!isfinite(v)) {
        mgmt_json_null(w);
        return;
    }
    if (!scalar(w))
        return;
    /* the common 0.0 and 5.0; the range first, as a cast of a double out
     * of int64's range is undefined */
    if (v > -1e15 && v < 1e15 && v == (double)(int64_t)v) {
        put_u64(w, v < 0 ? (uint64_t)-(int64_t)v : (uint64_t)v, v < 0);
        put(w, ".0", 2);
        return;
    }
    char b[40];
    snprintf(b, sizeof b, "%.15g", v);
    if (strtod(b, NULL) != v)
        snprintf(b, sizeof b, "%.17g", v);
    put(w, b, strlen(b));
    if (!strpbrk(b, ".eE"))
        put(w, ".0", 2);
}

void mgmt_json_bool(mgmt_json *w, bool v)
{
    if (scalar(w))
        put(w, v ? "true" : "false", v ? 4 : 5);
}

void mgmt_json_null(mgmt_json *w)
{
    if (scalar(w))
        put(w, "null", 4);
}

void mgmt_json_kstr(mgmt_json *w, const char *k, const char *v) { mgmt_json_key(w, k), mgmt_json_str(w, v); }
void mgmt_json_kbytes(mgmt_json *w, const char *k, amqp_bytes v) { mgmt_json_key(w, k), mgmt_json_bytes(w, v); }
void mgmt_json_kint(mgmt_json *w, const char *k, int64_t v) { mgmt_json_key(w, k), mgmt_json_int(w, v); }
void mgmt_json_kuint(mgmt_json *w, const char *k, uint64_t v) { mgmt_json_key(w, k), mgmt_json_uint(w, v); }
void mgmt_json_kdouble(mgmt_json *w, const char *k, double v) { mgmt_json_key(w, k), mgmt_json_double(w, v); }
void mgmt_json_kbool(mgmt_json *w, const char *k, bool v) { mgmt_json_key(w, k), mgmt_json_bool(w, v); }
void mgmt_json_knull(mgmt_json *w, const char *k) { mgmt_json_key(w, k), mgmt_json_null(w); }

/* ---- AMQP tables as JSON ------------------------------------------------ */

static void array_json(mgmt_json *w, amqp_bytes content)
{
    amqp_iter it;
    amqp_field f;
    amqp_iter_init(&it, content);
    mgmt_json_arr(w);
    while (amqp_array_next(&it, &f))
        mgmt_json_field(w, &f);
    mgmt_json_end_arr(w);
}

void mgmt_json_field(mgmt_json *w, const amqp_field *f)
{
    switch (f->type) {
    case 't':
        mgmt_json_bool(w, f->v.i != 0);
        break;
    case 'L':
        mgmt_json_uint(w, (uint64_t)f->v.i);
        break;
    case 'b': case 'B': case 's': case 'u': case 'I': case 'i': case 'l': case 'T':
        mgmt_json_int(w, f->v.i);
        break;
    case 'f':
        mgmt_json_double(w, f->v.f);
        break;
    case 'd':
        mgmt_json_double(w, f->v.d);
        break;
    case 'D':
        mgmt_json_double(w, f->v.decimal.value / pow(10, f->v.decimal.scale));
        break;
    case 'S': case 'x':
        mgmt_json_bytes(w, f->v.bytes);
        break;
    case 'A':
        array_json(w, f->v.bytes);
        break;
    case 'F':
        mgmt_json_table(w, f->v.bytes);
        break;
    default:
        mgmt_json_null(w);
    }
}

void mgmt_json_table(mgmt_json *w, amqp_bytes table)
{
    amqp_iter it;
    amqp_bytes key;
    amqp_field f;
    amqp_iter_init(&it, table);
    mgmt_json_obj(w);
    while (amqp_table_next(&it, &key, &f)) {
        mgmt_json_key_bytes(w, key);
        mgmt_json_field(w, &f);
    }
    mgmt_json_end_obj(w);
}

/* ---- jansson values ----------------------------------------------------- */

void mgmt_json_jansson(mgmt_json *w, const json_t *v)
{
    const char *key;
    json_t *e;
    size_t i;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        mgmt_json_obj(w);
        json_object_foreach((json_t *)v, key, e) {
            mgmt_json_key(w, key);
            mgmt_json_jansson(w, e);
        }
        mgmt_json_end_obj(w);
        break;
    case JSON_ARRAY:
        mgmt_json_arr(w);
        json_array_foreach((json_t *)v, i, e) mgmt_json_jansson(w, e);
        mgmt_json_end_arr(w);
        break;
    case JSON_STRING:
        mgmt_json_bytes(w, (amqp_bytes){(const uint8_t *)json_string_value(v),
                                        (uint32_t)json_string_length(v)});
        break;
    case JSON_INTEGER:
        mgmt_json_int(w, json_integer_value(v));
        break;
    case JSON_REAL:
        mgmt_json_double(w, json_real_value(v));
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        mgmt_json_bool(w, json_is_true(v));
        break;
    default:
        mgmt_json_null(w);
    }
}


/* ---- JSON as AMQP tables ------------------------------------------------ */

static bool put_value(const json_t *v, amqp_writer *w, int depth, char *why, size_t whylen);

static bool put_object(const json_t *obj, amqp_writer *w, int depth, char *why, size_t whylen)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        if (strlen(key) > 255) {
            snprintf(why, whylen, "field name too long: %.40s...", key);
            return false;
        }
        amqp_put_key(w, key);
        if (!put_value(v, w, depth, why, whylen))
            return false;
    }
    return true;
}

static bool put_value(const json_t *v, amqp_writer *w, int depth, char *why, size_t whylen)
{
    if (depth >= AMQP_TABLE_MAX_DEPTH) {
        snprintf(why, whylen, "arguments nested too deeply");
        return false;
    }
    size_t mark, i;
    json_t *e;
    switch (json_typeof(v)) {
    case JSON_STRING:
        amqp_put_u8(w, 'S');
        amqp_put_longstr(w, (amqp_bytes){(const uint8_t *)json_string_value(v),
                                         (uint32_t)json_string_length(v)});
        return true;
    case JSON_INTEGER:
        amqp_put_u8(w, 'l');
        amqp_put_u64(w, (uint64_t)json_integer_value(v));
        return true;
    case JSON_REAL: {
        double d = json_real_value(v);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        amqp_put_u8(w, 'd');
        amqp_put_u64(w, bits);
        return true;
    }
    case JSON_TRUE:
    case JSON_FALSE:
        amqp_put_u8(w, 't');
        amqp_put_u8(w, json_is_true(v));
        return true;
    case JSON_ARRAY:
        mark = amqp_put_field_begin(w, 'A');
        json_array_foreach((json_t *)v, i, e) if (!put_value(e, w, depth + 1, why, whylen)) return false;
        amqp_table_end(w, mark);
        return true;
    case JSON_OBJECT:
        mark = amqp_put_field_begin(w, 'F');
        if (!put_object(v, w, depth + 1, why, whylen))
            return false;
        amqp_table_end(w, mark);
        return true;
    default:
        snprintf(why, whylen, "null_not_allowed");
        return false;
    }
}

bool mgmt_table_from_json(const json_t *obj, amqp_writer *w, char *why, size_t whylen)
{
    if (!json_is_object(obj)) {
        snprintf(why, whylen, "not_a_table");
        return false;
    }
    size_t mark = amqp_table_begin(w);
    if (!put_object(obj, w, 1, why, whylen))
        return false;
    amqp_table_end(w, mark);
    if (w->overflow) {
        snprintf(why, whylen, "arguments too large");
        return false;
    }
    return true;
}
