/* Helpers shared by the routing unit tests: a field-table builder that
 * writes wire bytes (table content, without the 4-byte length) from a
 * compact notation, a route_table with fake queues, and result-set
 * checks. Header-only, so each test_route_*.c stays one translation unit. */
#ifndef WARREN_TEST_ROUTE_UTIL_H
#define WARREN_TEST_ROUTE_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../routing/route.h"

/* ---- table builder ------------------------------------------------------ */

typedef struct tbuf {
    uint8_t b[4096];
    uint32_t n;
} tbuf;

static inline void tb_u8(tbuf *t, uint8_t v) { assert_true(t->n < sizeof t->b); t->b[t->n++] = v; }
static inline void tb_be(tbuf *t, uint64_t v, int bytes)
{
    while (bytes-- > 0)
        tb_u8(t, (uint8_t)(v >> (8 * bytes)));
}
static inline void tb_raw(tbuf *t, const void *p, size_t n)
{
    assert_true(n <= sizeof t->b - t->n);
    memcpy(t->b + t->n, p, n);
    t->n += (uint32_t)n;
}
static inline amqp_bytes tb_bytes(const tbuf *t) { return (amqp_bytes){t->b, t->n}; }

#define B(s) AMQP_CSTR(s)
#define NO_ARGS ((amqp_bytes){(const uint8_t *)"", 0})

/* ---- table notation ----------------------------------------------------- */

/* table(&buf, "x-match=Sany a=I1 b=xabc c=V k=F[a=I1 b=t1] l=A[I1 Sz]"):
 * entries "key=<tag><value>" separated by spaces; S and x take the rest
 * of the word, D is "scale,value", F and A nest in brackets. */

static inline const char *parse_entries(tbuf *t, const char *s, bool keyed);

static inline const char *token_end(const char *s)
{
    while (*s && *s != ' ' && *s != ']')
        s++;
    return s;
}

static inline const char *parse_value(tbuf *t, const char *s)
{
    char tag = *s++, tok[128];
    const char *end = *s == '[' ? s : token_end(s);
    tbuf inner = {.n = 0};

    snprintf(tok, sizeof tok, "%.*s", (int)(end - s), s);
    tb_u8(t, (uint8_t)tag);
    switch (tag) {
    case 'S': case 'x':
        tb_be(t, strlen(tok), 4);
        tb_raw(t, tok, strlen(tok));
        return end;
    case 'b': case 'B': tb_be(t, (uint64_t)strtoll(tok, NULL, 10), 1); return end;
    case 's': case 'u': tb_be(t, (uint64_t)strtoll(tok, NULL, 10), 2); return end;
    case 'I': case 'i': tb_be(t, (uint64_t)strtoll(tok, NULL, 10), 4); return end;
    case 'l': tb_be(t, (uint64_t)strtoll(tok, NULL, 10), 8); return end;
    case 'T': tb_be(t, strtoull(tok, NULL, 10), 8); return end;
    case 't': tb_u8(t, (uint8_t)atoi(tok)); return end;
    case 'V': return end;
    case 'd': {
        double d = strtod(tok, NULL);
        uint64_t u;
        memcpy(&u, &d, 8);
        tb_be(t, u, 8);
        return end;
    }
    case 'f': {
        float fl = strtof(tok, NULL);
        uint32_t u;
        memcpy(&u, &fl, 4);
        tb_be(t, u, 4);
        return end;
    }
    case 'D': {
        char *comma;
        tb_u8(t, (uint8_t)strtoul(tok, &comma, 10));
        tb_be(t, strtoul(comma + 1, NULL, 10), 4);
        return end;
    }
    case 'F': case 'A':
        assert_true(*s == '[');
        s = parse_entries(&inner, s + 1, tag == 'F');
        assert_true(*s == ']');
        tb_be(t, inner.n, 4);
        tb_raw(t, inner.b, inner.n);
        return s + 1;
    default:
        fail_msg("bad tag %c", tag);
        return end;
    }
}

static inline const char *parse_entries(tbuf *t, const char *s, bool keyed)
{
    for (;;) {
        while (*s == ' ')
            s++;
        if (*s == 0 || *s == ']')
            return s;
        if (keyed) {
            const char *eq = strchr(s, '=');
            assert_non_null(eq);
            tb_u8(t, (uint8_t)(eq - s));
            tb_raw(t, s, (size_t)(eq - s));
            s = eq + 1;
        }
        s = parse_value(t, s);
    }
}

static inline amqp_bytes table(tbuf *t, const char *spec)
{
    amqp_error err;

    t->n = 0;
    parse_entries(t, spec, true);
    assert_int_equal(amqp_table_validate(tb_bytes(t), &err), AMQP_OK);
    return tb_bytes(t);
}

/* ---- a table with fake queues ------------------------------------------- */

#define MAX_QUEUES 4096

typedef struct fixture {
    route_table *t;
    char qnames[MAX_QUEUES][16]; /* queue i is &f->qnames[i], named "q<i>" */
    int deleted;                 /* exchange_deleted calls */
    char deleted_names[64][64];
} fixture;

/* The queue named by `name` when it is "q<i>" for an i in range. */
static inline void *fx_lookup(void *ctx, amqp_bytes name)
{
    fixture *f = ctx;
    char buf[16];
    int i;

    if (name.len < 2 || name.len >= sizeof buf || name.ptr[0] != 'q')
        return NULL;
    memcpy(buf, name.ptr, name.len);
    buf[name.len] = 0;
    i = atoi(buf + 1);
    if (i < 0 || i >= MAX_QUEUES || strcmp(buf, f->qnames[i]) != 0)
        return NULL;
    return f->qnames[i];
}

static inline void fx_deleted(void *ctx, const route_exchange *ex)
{
    fixture *f = ctx;
    amqp_bytes n = route_exchange_name(ex);

    if (f->deleted < 64)
        snprintf(f->deleted_names[f->deleted], 64, "%.*s", (int)n.len, (const char *)n.ptr);
    f->deleted++;
}

static inline fixture *fx_new(void)
{
    static const route_hooks hooks = {.queue_lookup = fx_lookup, .exchange_deleted = fx_deleted};
    fixture *f = calloc(1, sizeof *f);
    int i;

    assert_non_null(f);
    for (i = 0; i < MAX_QUEUES; i++)
        snprintf(f->qnames[i], sizeof f->qnames[i], "q%d", i);
    f->t = route_table_new("/", &hooks, f);
    assert_non_null(f->t);
    return f;
}

static inline void fx_free(fixture *f)
{
    route_table_free(f->t);
    free(f);
}

static inline void *Q(fixture *f, int i) { return f->qnames[i]; }
static inline route_dest QD(fixture *f, int i) { return (route_dest){f->qnames[i], NULL}; }
static inline route_dest XD(route_exchange *ex) { return (route_dest){NULL, ex}; }

static inline route_exchange *fx_declare(fixture *f, const char *name, const char *type,
                                         bool auto_delete, amqp_bytes args)
{
    route_exchange_spec spec = {.name = B(name), .type = B(type), .auto_delete = auto_delete,
                                .arguments = args};
    route_exchange *ex = NULL;
    amqp_error err;

    assert_int_equal(route_exchange_declare(f->t, &spec, &ex, &err), AMQP_OK);
    assert_non_null(ex);
    return ex;
}

static inline void fx_bind(fixture *f, const char *src, route_dest d, const char *key,
                           amqp_bytes args)
{
    amqp_error err;
    int rc = route_bind(f->t, B(src), d, B(key), args, AMQP_QUEUE_BIND, &err);
    if (rc != AMQP_OK)
        fail_msg("bind %s -> %s: %s", src, key, err.text);
}

/* Routes and returns the sorted queue indexes, written to out; the count. */
static inline int fx_route(fixture *f, route_exchange *ex, const char *key, amqp_bytes headers,
                           int *out)
{
    void **qs;
    size_t n = route_message(f->t, ex, B(key), headers, &qs), i, j;

    for (i = 0; i < n; i++) {
        int idx = (int)(((char(*)[16])qs[i]) - f->qnames);
        for (j = i; j > 0 && out[j - 1] > idx; j--)
            out[j] = out[j - 1];
        out[j] = idx;
    }
    for (i = 1; i < n; i++)
        assert_true(out[i - 1] != out[i]); /* deduplicated */
    return (int)n;
}

/* "1,3,7" for the sorted set of queues a message reaches. */
static inline const char *fx_route_str(fixture *f, route_exchange *ex, const char *key,
                                       amqp_bytes headers)
{
    static char buf[4096];
    static int idx[MAX_QUEUES + 1];
    int n = fx_route(f, ex, key, headers, idx), i;
    size_t len = 0;

    buf[0] = 0;
    for (i = 0; i < n && len < sizeof buf - 16; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, i ? ",%d" : "%d", idx[i]);
    return buf;
}

#endif
