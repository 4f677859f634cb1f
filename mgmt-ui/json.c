/* The streaming JSON writer and the AMQP table <-> JSON conversions.
 *
 * The writer stages output in `buf` and hands it to the evbuffer when full,
 * so a 10,000-queue listing costs a few hundred evbuffer_add calls, not one
 * per token. Per nesting level it remembers whether a value was written
 * (the next one needs a comma). Column selection (?columns=) drops keys
 * while writing: a key that is not selected puts the writer in skipping
 * mode until its value -- scalar or container -- is complete.
 *
 * Columns are dotted paths of any depth ("message_stats.publish_details.rate"),
 * kept sorted segment by segment, so the paths below any key are a
 * contiguous run of them: each open container holds its selection as such
 * a run and the length of the prefix its paths share (the keys above), or
 * "all". A key is looked up in its container's run by binary search; the
 * run of paths under it becomes the selection of its value. A path naming
 * a key exactly keeps the key's whole value, whatever else is listed under
 * it; a scalar is kept whole wherever a path goes deeper; an array passes
 * its selection to its elements -- RabbitMQ's semantics.
 */
#include <event2/buffer.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt.h"

#define STAGE 8192

/* The columns a container's keys are checked against: cols[lo, hi), whose
 * first `plen` bytes are the path down to it; or all of its keys. */
typedef struct col_sel {
    uint32_t lo, hi, plen;
    bool all;
} col_sel;

struct mgmt_json {
    struct evbuffer *out;
    size_t flushed, len;
    int depth;                          /* open containers */
    int over;                           /* containers past MGMT_JSON_DEPTH */
    bool written[MGMT_JSON_DEPTH + 1];  /* a value was written at this depth */
    bool after_key;
    /* columns */
    bool filtered; /* ?columns= given, perhaps empty: then every object is */
    char **cols;   /* normalised paths, sorted by path_cmp */
    size_t ncols;
    int col_depth;
    col_sel sel[MGMT_JSON_DEPTH + 1]; /* of the container open at each depth */
    col_sel next;                     /* for the value of the key just written */
    bool skipping;
    int skip_depth;
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

/* Orders paths segment by segment: the end of a path first, then '.',
 * then any other byte; so "a" < "a.b" < "a-b", and the paths under one key
 * are contiguous. */
static int path_cmp(const void *a, const void *b)
{
    const unsigned char *x = *(const unsigned char *const *)a, *y = *(const unsigned char *const *)b;
    for (;; x++, y++) {
        int cx = !*x ? -1 : *x == '.' ? 0 : *x + 1, cy = !*y ? -1 : *y == '.' ? 0 : *y + 1;
        if (cx != cy)
            return cx - cy;
        if (!*x)
            return 0;
    }
}

/* One column of the list without its empty segments ("a..b." is "a.b", as
 * RabbitMQ reads it); NULL when nothing is left or on OOM (*oom set). */
static char *normalise(const char *p, size_t n, bool *oom)
{
    char *out = malloc(n + 1);
    size_t len = 0;
    if (!out) {
        *oom = true;
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (p[i] != '.' || (len && out[len - 1] != '.'))
            out[len++] = p[i];
    if (len && out[len - 1] == '.')
        len--;
    out[len] = 0;
    if (!len) {
        free(out);
        return NULL;
    }
    return out;
}

bool mgmt_json_columns(mgmt_json *w, const char *csv, int depth)
{
    bool oom = false;
    w->filtered = true;
    w->col_depth = depth;
    w->sel[0].all = true;
    for (const char *p = csv; *p && !oom;) {
        size_t n = strcspn(p, ",");
        char *col = normalise(p, n, &oom);
        p += n + (p[n] == ',');
        if (!col)
            continue;
        char **grown = realloc(w->cols, (w->ncols + 1) * sizeof *grown);
        if (!grown) {
            free(col);
            return false;
        }
        w->cols = grown;
        w->cols[w->ncols++] = col;
    }
    if (w->ncols) /* cols is NULL for an empty list */
        qsort(w->cols, w->ncols, sizeof *w->cols, path_cmp);
    return !oom;
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
    bool keyed = w->after_key;
    if (!begin_value(w))
        return;
    putc_(w, c);
    w->written[++w->depth] = false;
    if (!w->filtered)
        return;
    if (w->depth == w->col_depth)
        w->sel[w->depth] = (col_sel){0, (uint32_t)w->ncols, 0, false};
    else
        w->sel[w->depth] = keyed ? w->next : w->sel[w->depth - 1];
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
}

void mgmt_json_obj(mgmt_json *w) { open_container(w, '{'); }
void mgmt_json_end_obj(mgmt_json *w) { close_container(w, '}'); }
void mgmt_json_arr(mgmt_json *w) { open_container(w, '['); }
void mgmt_json_end_arr(mgmt_json *w) { close_container(w, ']'); }

/* The segment of `col` after its first `plen` bytes against `key`. */
static int seg_cmp(const char *col, uint32_t plen, const char *key, size_t klen)
{
    const char *seg = col + plen;
    size_t n = strcspn(seg, ".");
    int c = memcmp(seg, key, n < klen ? n : klen);
    return c ? c : (n > klen) - (n < klen);
}

/* The first column in [lo, hi) whose segment at plen is above `key` (or at
 * or above, when `above_equal`). */
static uint32_t seg_bound(const mgmt_json *w, col_sel s, const char *key, size_t klen,
                          bool above_equal)
{
    while (s.lo < s.hi) {
        uint32_t mid = s.lo + (s.hi - s.lo) / 2;
        int c = seg_cmp(w->cols[mid], s.plen, key, klen);
        if (c > 0 || (above_equal && c == 0))
            s.hi = mid;
        else
            s.lo = mid + 1;
    }
    return s.lo;
}

/* Whether the key at the current depth is selected; starts skipping if not,
 * and sets the selection of its value. */
static bool key_selected(mgmt_json *w, const char *key, size_t klen)
{
    if (!w->filtered || w->skipping || w->over)
        return !w->skipping && !w->over;
    col_sel s = w->sel[w->depth];
    if (!s.all) {
        uint32_t lo = seg_bound(w, s, key, klen, true), hi = seg_bound(w, s, key, klen, false);
        if (lo == hi) {
            w->skipping = true;
            w->skip_depth = w->depth;
            return false;
        }
        uint32_t plen = s.plen + (uint32_t)klen;
        /* the path naming the key exactly sorts first */
        s = w->cols[lo][plen] ? (col_sel){lo, hi, plen + 1, false} : (col_sel){.all = true};
    }
    w->next = s;
    return true;
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
