/* headers: the headers exchange type, RabbitMQ 3.10 semantics.
 *
 * Each binding's arguments are stored sorted by key (binding.c); on bind
 * they are parsed once into a headers_pattern: the x-match kind and the
 * entries that take part in matching. RabbitMQ skips the binding's
 * "x-match" entry always and every other "x-" entry unless x-match is
 * all-with-x or any-with-x; the skipped entries never change the outcome,
 * so they are dropped here instead of skipped per message.
 *
 * Per message the headers are parsed and stably sorted once (route_run),
 * then each binding is matched by RabbitMQ's merge walk over the two
 * sorted lists (rabbit_exchange_type_headers:headers_match/5), including
 * its behaviour with repeated keys. Values compare as Erlang's `==` does:
 * amqp_field_equal, plus two cases it does not cover at the top level --
 * integers against floats compare exactly (2^53+1 is not 2^53 as a
 * double), and an empty table equals an empty array (both are []). A void
 * ('V') binding value matches on the key's presence alone.
 *
 * Memory: one route_vec of bindings per exchange; one pattern allocation
 * per binding whose entries are slices into the binding's own copy of the
 * arguments.
 */
#include <stdlib.h>
#include <string.h>

#include "route_int.h"

typedef struct headers_pattern {
    bool any;
    uint32_t n;
    route_header e[]; /* sorted by key */
} headers_pattern;

enum { MATCH_NONE, MATCH_ALL, MATCH_ANY, MATCH_ALL_X, MATCH_ANY_X };

static int match_kind(amqp_bytes v)
{
    if (amqp_bytes_equal_cstr(v, "all"))
        return MATCH_ALL;
    if (amqp_bytes_equal_cstr(v, "any"))
        return MATCH_ANY;
    if (amqp_bytes_equal_cstr(v, "all-with-x"))
        return MATCH_ALL_X;
    if (amqp_bytes_equal_cstr(v, "any-with-x"))
        return MATCH_ANY_X;
    return MATCH_NONE;
}

static int headers_validate(route_exchange *ex, route_dest dest, amqp_bytes key, amqp_bytes args,
                            uint32_t method_id, amqp_error *err)
{
    amqp_field f;
    char term[160];

    if (!amqp_table_get(args, "x-match", &f))
        return AMQP_OK;
    if (f.type == 'S' && match_kind(f.v.bytes) != MATCH_NONE)
        return AMQP_OK;
    amqp_erl_term(&f, term, sizeof term);
    if (f.type == 'S')
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id,
                         "Invalid x-match field value %s; expected all, any, all-with-x, or "
                         "any-with-x",
                         term);
    return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id,
                     "Invalid x-match field type %s (value %s); expected longstr",
                     amqp_erl_type_name(f.type), term);
}

static bool is_x_key(amqp_bytes k)
{
    return k.len >= 2 && k.ptr[0] == 'x' && k.ptr[1] == '-';
}

static bool counts(amqp_bytes key, bool with_x)
{
    return !amqp_bytes_equal_cstr(key, "x-match") && (with_x || !is_x_key(key));
}

/* The pattern of sorted `args`; NULL on out-of-memory. */
static headers_pattern *pattern_new(amqp_bytes args)
{
    amqp_field f;
    int kind = amqp_table_get(args, "x-match", &f) && f.type == 'S' ? match_kind(f.v.bytes)
                                                                      : MATCH_ALL;
    bool with_x = kind == MATCH_ALL_X || kind == MATCH_ANY_X;
    headers_pattern *p;
    amqp_iter it;
    amqp_bytes key;
    uint32_t n = 0;

    amqp_iter_init(&it, args);
    while (amqp_table_next(&it, &key, &f))
        n += counts(key, with_x);
    if ((p = malloc(sizeof *p + n * sizeof p->e[0])) == NULL)
        return NULL;
    p->any = kind == MATCH_ANY || kind == MATCH_ANY_X;
    p->n = 0;
    amqp_iter_init(&it, args);
    while (amqp_table_next(&it, &key, &f))
        if (counts(key, with_x))
            p->e[p->n++] = (route_header){key, f};
    assert(p->n == n);
    return p;
}

/* ---- value comparison --------------------------------------------------- */

static bool is_int(uint8_t t) { return t != 0 && strchr("bBsuIilT", t) != NULL; }
static bool is_float(uint8_t t) { return t == 'f' || t == 'd'; }

/* Erlang compares an integer and a float exactly. A 'T' above INT64_MAX
 * is held negative in v.i. */
static bool int_float_equal(const amqp_field *in, const amqp_field *fl)
{
    double d = fl->type == 'f' ? fl->v.f : fl->v.d;
    bool huge = in->type == 'T' && in->v.i < 0;

    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0) {
        int64_t k = (int64_t)d;
        return !huge && (double)k == d && k == in->v.i;
    }
    if (d >= 9223372036854775808.0 && d < 18446744073709551616.0)
        return huge && (uint64_t)d == (uint64_t)in->v.i;
    return false; /* out of range, or NaN */
}

static bool value_equal(const amqp_field *p, const amqp_field *d)
{
    if (is_int(p->type) && is_float(d->type))
        return int_float_equal(p, d);
    if (is_float(p->type) && is_int(d->type))
        return int_float_equal(d, p);
    if ((p->type == 'F' && d->type == 'A') || (p->type == 'A' && d->type == 'F'))
        return p->v.bytes.len == 0 && d->v.bytes.len == 0;
    return amqp_field_equal(p, d);
}

/* ---- matching ----------------------------------------------------------- */

/* headers_match/5: `all` starts true and `any` false; a binding key absent
 * from the data clears `all`; an equal value (or a void binding value)
 * sets `any`, an unequal one clears `all`; each step consumes one entry,
 * or one from each side when the keys are equal. */
static bool headers_match(const headers_pattern *p, const route_header *d, size_t nd)
{
    bool all = true, any = false;
    uint32_t i = 0;
    size_t j = 0;

    while (i < p->n && (p->any ? !any : all)) {
        int c;

        if (j == nd) {
            all = false;
            break;
        }
        c = route_key_compare(p->e[i].key, d[j].key);
        if (c > 0) {
            j++;
            continue;
        }
        if (c < 0) {
            all = false;
            i++;
            continue;
        }
        if (p->e[i].value.type == 'V' || value_equal(&p->e[i].value, &d[j].value))
            any = true;
        else
            all = false;
        i++;
        j++;
    }
    return p->any ? any : all;
}

/* ---- the type's functions ----------------------------------------------- */

static bool headers_create(route_exchange *ex)
{
    return (ex->state = calloc(1, sizeof(route_vec))) != NULL;
}

static bool headers_bind(route_exchange *ex, route_binding *b)
{
    headers_pattern *p = pattern_new(route_binding_args(b));

    if (p == NULL)
        return false;
    if (!route_vec_push(ex->state, b)) {
        free(p);
        return false;
    }
    b->type_data = p;
    return true;
}

static void headers_unbind(route_exchange *ex, route_binding *b)
{
    route_vec_remove(ex->state, b);
    free(b->type_data);
    b->type_data = NULL;
}

static size_t headers_route(route_exchange *ex, route_run *run)
{
    const route_vec *v = ex->state;
    size_t matched = 0;
    uint32_t i;

    if (v->count == 0 || !route_run_headers(run))
        return 0;
    for (i = 0; i < v->count; i++) {
        const route_binding *b = v->items[i];

        /* Once something matched, a destination already collected cannot
         * change the outcome: skip its match. */
        if (matched > 0 && b->target->mark == run->gen)
            continue;
        if (headers_match(b->type_data, run->t->headers, run->nheaders)) {
            matched++;
            route_run_collect(run, b->target);
        }
    }
    return matched;
}

static void headers_destroy(route_exchange *ex)
{
    route_vec *v = ex->state;

    assert(v->count == 0);
    route_vec_free(v);
    free(v);
}

const route_type_ops route_headers_ops = {
    .type = ROUTE_HEADERS,
    .validate = headers_validate,
    .create = headers_create,
    .bind = headers_bind,
    .unbind = headers_unbind,
    .route = headers_route,
    .destroy = headers_destroy,
};
