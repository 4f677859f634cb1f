/* policy_term: Erlang's ~p for the terms in RabbitMQ's policy validation
 * texts (see policy_internal.h).
 *
 * A term is a tree: atomic nodes hold their flat text; lists, tuples and
 * maps hold their children; a map's children are key => value pairs. Each
 * node knows its flat length, as io_lib_pretty's "intermediate format"
 * does. pt_print then follows io_lib_pretty:print with a line length of 80
 * and no depth limit: a term that fits on the rest of the line is written
 * flat; otherwise a list or tuple puts atomic elements on the line while
 * they fit and every other element on a line of its own, indented one past
 * the opening bracket; a map puts each pair that does not fit on its own
 * line, indented two past "#{", and breaks a pair after " =>" with the
 * value four further in. Tagged tuples and records never occur here.
 *
 * Binaries and strings are printed as ~p does without the t modifier:
 * latin1, so a UTF-8 "é" (two bytes in 160..255) prints as it is and one
 * with a byte in 128..159 ("€") prints as <<226,130,172>>.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_internal.h"

enum { PT_ATOM, PT_LIST, PT_TUPLE, PT_MAP, PT_PAIR };

struct pt {
    pt *next_alloc;
    int kind;
    long len; /* characters when written flat */
    char *text;
    pt **kids;
    size_t n;
};

#define LINE 80

static pt *node(pt_arena *a, int kind, size_t nkids)
{
    pt *t = calloc(1, sizeof *t);
    if (t && nkids && !(t->kids = calloc(nkids, sizeof *t->kids))) {
        free(t);
        t = NULL;
    }
    if (!t) {
        a->oom = true;
        return NULL;
    }
    t->kind = kind;
    t->n = nkids;
    t->next_alloc = a->all;
    a->all = t;
    return t;
}

void pt_arena_free(pt_arena *a)
{
    while (a->all) {
        pt *t = a->all;
        a->all = t->next_alloc;
        free(t->kids);
        free(t->text);
        free(t);
    }
}

/* ---- atomic terms -------------------------------------------------------- */

static pt *atom_text(pt_arena *a, const char *text, size_t n)
{
    pt *t = node(a, PT_ATOM, 0);
    if (t && !(t->text = malloc(n + 1)))
        a->oom = true;
    if (!t || !t->text)
        return NULL;
    memcpy(t->text, text, n);
    t->text[n] = 0;
    t->len = (long)n;
    return t;
}

/* ~p of a binary is amqp_erl_term's: the two printers share one rule for
 * what prints as a character. */
pt *pt_binary(pt_arena *a, amqp_bytes b)
{
    size_t cap = (size_t)b.len * 4 + 8;
    char *buf = malloc(cap);
    pt *t = NULL;
    if (buf) {
        amqp_field f = {.type = 'x', .v.bytes = b};
        t = atom_text(a, buf, strlen(amqp_erl_term(&f, buf, cap)));
    } else {
        a->oom = true;
    }
    free(buf);
    return t;
}

/* An Erlang string of n printable latin1 codes. */
static pt *string_term(pt_arena *a, const uint8_t *codes, size_t n)
{
    char *buf = malloc(n * 2 + 3);
    pt *t = NULL;
    if (buf) {
        amqp_erl_string((amqp_bytes){codes, (uint32_t)n}, buf, n * 2 + 3);
        t = atom_text(a, buf, strlen(buf));
    } else {
        a->oom = true;
    }
    free(buf);
    return t;
}

pt *pt_string(pt_arena *a, const char *s)
{
    return string_term(a, (const uint8_t *)s, strlen(s));
}

pt *pt_atom(pt_arena *a, const char *name) { return atom_text(a, name, strlen(name)); }

pt *pt_int(pt_arena *a, long long v)
{
    char buf[24];
    return atom_text(a, buf, (size_t)snprintf(buf, sizeof buf, "%lld", v));
}

/* ---- containers ---------------------------------------------------------- */

static pt *container(pt_arena *a, int kind, pt *const *kids, size_t n, long brackets)
{
    pt *t = node(a, kind, n);
    if (!t)
        return NULL;
    t->len = brackets + (n ? (long)n - 1 : 0);
    for (size_t i = 0; i < n; i++) {
        if (!kids[i])
            return NULL; /* an allocation failed below */
        t->kids[i] = kids[i];
        t->len += kids[i]->len;
    }
    return t;
}

pt *pt_tuple(pt_arena *a, pt *const *kids, size_t n)
{
    return n ? container(a, PT_TUPLE, kids, n, 2) : atom_text(a, "{}", 2);
}

pt *pt_list(pt_arena *a, pt *const *kids, size_t n)
{
    return n ? container(a, PT_LIST, kids, n, 2) : atom_text(a, "[]", 2);
}

/* A JSON array whose elements are all printable latin1 codes is, to
 * Erlang, a string. */
static pt *json_list(pt_arena *a, amqp_bytes content)
{
    amqp_iter it;
    amqp_field e;
    size_t n = 0;
    bool codes = true;
    amqp_iter_init(&it, content);
    for (int64_t v; amqp_array_next(&it, &e); n++)
        codes = codes && e.type != 'T' && amqp_field_int(&e, &v) && v >= 0 && v < 256 &&
                amqp_erl_printable((unsigned)v);
    pt **kids = calloc(n + 1, sizeof *kids);
    uint8_t *chars = calloc(n + 1, sizeof *chars);
    pt *t = NULL;
    if (kids && chars) {
        amqp_iter_init(&it, content);
        for (size_t i = 0; amqp_array_next(&it, &e); i++) {
            int64_t v = 0;
            if (codes && amqp_field_int(&e, &v))
                chars[i] = (uint8_t)v;
            else
                kids[i] = pt_json(a, &e);
        }
        t = codes && n ? string_term(a, chars, n) : pt_list(a, kids, n);
    } else {
        a->oom = true;
    }
    free(kids);
    free(chars);
    return t;
}

int pt_bytes_order(const void *x, const void *y)
{
    const amqp_bytes *a = x, *b = y;
    uint32_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->ptr, b->ptr, n) : 0;
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* An Erlang map prints its (binary) keys in term order. */
static pt *json_map(pt_arena *a, amqp_bytes content)
{
    amqp_iter it;
    amqp_bytes key;
    amqp_field v;
    size_t n = 0;
    amqp_iter_init(&it, content);
    while (amqp_table_next(&it, &key, &v))
        n++;
    if (n == 0)
        return atom_text(a, "#{}", 3);
    amqp_bytes *keys = calloc(n, sizeof *keys);
    pt **pairs = calloc(n, sizeof *pairs);
    pt *t = NULL;
    if (keys && pairs) {
        amqp_iter_init(&it, content);
        for (size_t i = 0; i < n && amqp_table_next(&it, &key, &v); i++)
            keys[i] = key;
        qsort(keys, n, sizeof *keys, pt_bytes_order);
        for (size_t i = 0; i < n; i++) {
            char k[256];
            snprintf(k, sizeof k, "%.*s", (int)keys[i].len, (const char *)keys[i].ptr);
            amqp_table_get(content, k, &v);
            pt *kv[2] = {pt_binary(a, keys[i]), pt_json(a, &v)};
            if ((pairs[i] = container(a, PT_PAIR, kv, 2, 4)))
                pairs[i]->len -= 1; /* " => " is 4, not 2 brackets and a comma */
        }
        t = container(a, PT_MAP, pairs, n, 3);
    } else {
        a->oom = true;
    }
    free(keys);
    free(pairs);
    return t;
}

pt *pt_json(pt_arena *a, const amqp_field *f)
{
    char buf[64];
    switch (f->type) {
    case 'S': case 'x': return pt_binary(a, f->v.bytes);
    case 't': return atom_text(a, f->v.i ? "true" : "false", f->v.i ? 4 : 5);
    case 'V': return atom_text(a, "null", 4);
    case 'A': return json_list(a, f->v.bytes);
    case 'F': return json_map(a, f->v.bytes);
    default:
        amqp_erl_term(f, buf, sizeof buf);
        return atom_text(a, buf, strlen(buf));
    }
}

/* ---- printing ------------------------------------------------------------ */

typedef struct out {
    char *buf;
    size_t cap, len;
} out;

static void put(out *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n && o->len + 1 < o->cap; i++)
        o->buf[o->len++] = s[i];
    o->buf[o->len] = 0;
}

static void newline(out *o, long ind)
{
    put(o, "\n", 1);
    for (long i = 0; i < ind; i++)
        put(o, " ", 1);
}

static void write_flat(out *o, const pt *t)
{
    static const char *const open[] = {"", "[", "{", "#{", ""};
    static const char *const close[] = {"", "]", "}", "}", ""};
    if (t->kind == PT_ATOM) {
        put(o, t->text, strlen(t->text));
        return;
    }
    put(o, open[t->kind], strlen(open[t->kind]));
    for (size_t i = 0; i < t->n; i++) {
        if (i)
            put(o, t->kind == PT_PAIR ? " => " : ",", t->kind == PT_PAIR ? 4 : 1);
        write_flat(o, t->kids[i]);
    }
    put(o, close[t->kind], strlen(close[t->kind]));
}

/* Atomic for io_lib_pretty's ?ATM: flat text, or a pair of two. */
static bool atomic(const pt *t)
{
    return t->kind == PT_ATOM ||
           (t->kind == PT_PAIR && t->kids[0]->kind == PT_ATOM && t->kids[1]->kind == PT_ATOM);
}

typedef struct ctx {
    out *o;
    long m; /* io_lib_pretty's M: the whole term's length */
} ctx;

static void pp(ctx *c, const pt *t, long col, long ind, long ld, long w);

static bool fits(ctx *c, const pt *t, long col, long ld, long w)
{
    return t->len < LINE - col - ld && t->len + w + ld <= c->m;
}

/* pp_element and pp_pair: the width used, or LINE to force a new line. */
static long element(ctx *c, const pt *t, long col, long ind, long ld, long w)
{
    if (fits(c, t, col, ld, w) && (atomic(t) || t->kind == PT_PAIR)) {
        write_flat(c->o, t);
        return atomic(t) ? t->len : LINE;
    }
    if (t->kind != PT_PAIR) {
        pp(c, t, col, ind, ld, w);
        return LINE;
    }
    pp(c, t->kids[0], col, ind, ld, w);
    put(c->o, " =>", 3);
    newline(c->o, ind + 4);
    pp(c, t->kids[1], col + 4, ind + 4, ld, 0);
    return LINE;
}

/* pp_list / pp_tail, and pp_map / pp_pairs_tail (whose first width counts
 * from 0, not from what the opening bracket took). */
static void elements(ctx *c, const pt *t, long col0, long ind, long ld, long w)
{
    bool map = t->kind == PT_MAP;
    long we = element(c, t->kids[0], col0, ind, t->n > 1 ? 0 : ld + 1, w);
    long col = col0 + we;
    w = map ? we : w + we;
    for (size_t i = 1; i < t->n; i++) {
        const pt *e = t->kids[i];
        long ld1 = i + 1 < t->n ? 0 : ld + 1, elen = 1 + e->len;
        bool room = ld1 == 0 ? elen + 1 < LINE - col && w + elen + 1 <= c->m
                             : elen < LINE - col - ld1 && w + elen + ld1 <= c->m;
        if (room && atomic(e)) {
            put(c->o, ",", 1);
            write_flat(c->o, e);
            col += elen;
            w += elen;
        } else {
            put(c->o, ",", 1);
            newline(c->o, ind);
            we = element(c, e, col0, ind, ld1, 0);
            col = col0 + we;
            w = we;
        }
    }
}

static void pp(ctx *c, const pt *t, long col, long ind, long ld, long w)
{
    if (fits(c, t, col, ld, w) || t->kind == PT_ATOM || t->kind == PT_PAIR) {
        write_flat(c->o, t);
        return;
    }
    long open = t->kind == PT_MAP ? 2 : 1;
    put(c->o, t->kind == PT_LIST ? "[" : t->kind == PT_TUPLE ? "{" : "#{", (size_t)open);
    elements(c, t, col + open, ind + open, ld, w + 1);
    put(c->o, t->kind == PT_LIST ? "]" : "}", 1);
}

size_t pt_print(const pt *t, size_t col, char *buf, size_t cap)
{
    out o = {buf, cap, 0};
    if (cap)
        buf[0] = 0;
    if (!t || !cap)
        return 0;
    ctx c = {&o, t->len};
    long column = (long)col + 1;
    if (t->kind == PT_ATOM || t->len < LINE - column)
        write_flat(&o, t);
    else
        pp(&c, t, column, column - 1, 0, 0);
    return o.len;
}
