/* consistent_hash: the x-consistent-hash exchange type, as RabbitMQ 3.10's
 * rabbitmq_consistent_hash_exchange plugin routes.
 *
 * The plugin's "ring" is a bucket map: each destination bound gets
 * `weight` buckets (its binding key, an integer), numbered on from the
 * last one bound; a message goes to the owner of bucket
 * jump_consistent_hash(phash2(value), total weight), where the value is
 * the routing key, or the `hash-header` header, or the `hash-property`
 * property (message_id, correlation_id, or timestamp as decimal digits).
 * A message without that header or property hashes Erlang's `undefined`,
 * so it still goes to one queue, as the plugin's does. A destination is
 * in the map once: binding it again (another key) adds no buckets, and
 * unbinding any of its bindings removes all of its buckets, renumbering
 * the ones after it -- both as the plugin does, so the same keys reach the
 * same queues as on RabbitMQ (erlhash.c computes its hashes).
 *
 * Here the map is a list of segments in bind order, (member, weight), with
 * a Fenwick tree of the weights over it: routing finds the bucket's
 * segment in O(log n); a bind appends in O(log n); an unbind zeroes its
 * segment's weight in O(log n) -- the renumbering is implicit, as buckets
 * are prefix sums. Removed segments are compacted away (O(n)) once they
 * are half of the list, and the list grows by doubling, so each bind and
 * unbind costs O(log n) amortised whatever the weight. Members (one per
 * destination in the ring) are found by target in a route_map.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "route_int.h"

/* RabbitMQ 3.10 has no cap (and builds a map entry per bucket); 4.3 caps
 * at 10,000 with this text. Warren's buckets cost nothing, so its cap only
 * keeps the total exact in the jump hash's doubles: 10^6 * 2^32 < 2^53. */
#define MAX_WEIGHT 1000000

enum { HASH_KEY, HASH_HEADER, HASH_PROPERTY };
enum { PROP_CORRELATION_ID, PROP_MESSAGE_ID, PROP_TIMESTAMP };

static const char *const properties[] = {"correlation_id", "message_id", "timestamp"};

typedef struct member {
    route_target *target;
    uint32_t slot; /* its segment */
} member;

typedef struct segment {
    member *m; /* NULL once removed */
    uint64_t weight;
} segment;

typedef struct ring {
    int hash_on, property;
    amqp_bytes header;  /* slice of the exchange's arguments */
    route_map members;  /* member by target pointer */
    segment *segs;      /* bind order */
    uint64_t *fen;      /* Fenwick tree of the weights, 1-based, cap + 1 */
    uint32_t nsegs, cap, dead;
    uint64_t total;     /* buckets */
} ring;

/* ---- the Fenwick tree --------------------------------------------------- */

static void fen_add(ring *r, uint32_t slot, uint64_t delta)
{
    for (uint32_t i = slot + 1; i <= r->cap; i += i & -i)
        r->fen[i] += delta; /* wraps for a negative delta, as intended */
}

/* The segment holding `bucket` (< total): the least slot whose prefix sum
 * exceeds it. */
static uint32_t fen_find(const ring *r, uint64_t bucket)
{
    uint32_t pos = 0, step = 1;

    while (step * 2 <= r->cap)
        step *= 2;
    for (; step > 0; step /= 2)
        if (pos + step <= r->cap && r->fen[pos + step] <= bucket) {
            pos += step;
            bucket -= r->fen[pos];
        }
    assert(pos < r->nsegs && r->segs[pos].m != NULL);
    return pos;
}

/* Drops removed segments and rebuilds the tree for capacity `cap`. */
static bool rebuild(ring *r, uint32_t cap)
{
    uint64_t *fen = calloc((size_t)cap + 1, sizeof *fen);
    segment *segs = fen ? malloc((size_t)cap * sizeof *segs) : NULL;
    uint32_t n = 0;

    if (segs == NULL) {
        free(fen);
        return false;
    }
    for (uint32_t i = 0; i < r->nsegs; i++)
        if (r->segs[i].m != NULL) {
            segs[n] = r->segs[i];
            segs[n].m->slot = n;
            fen[n + 1] = segs[n].weight;
            n++;
        }
    for (uint32_t i = 1; i <= cap; i++) /* O(n) build: push each sum up */
        if (i + (i & -i) <= cap)
            fen[i + (i & -i)] += fen[i];
    free(r->segs);
    free(r->fen);
    r->segs = segs;
    r->fen = fen;
    r->cap = cap;
    r->nsegs = n;
    r->dead = 0;
    return true;
}

/* ---- declare and bind checks -------------------------------------------- */

/* RabbitMQ's hash_args/1 matches {longstr, V} only: another type is a
 * case_clause crash, which the client sees as a bare 541. */
static int crash(amqp_error *err)
{
    amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_EXCHANGE_DECLARE, "x");
    if (err != NULL)
        snprintf(err->text, sizeof err->text, "INTERNAL_ERROR");
    return AMQP_ERROR;
}

static int property_index(amqp_bytes name)
{
    for (int i = 0; i < 3; i++)
        if (amqp_bytes_equal_cstr(name, properties[i]))
            return i;
    return -1;
}

static int chash_declare(route_table *t, const route_exchange_spec *spec, amqp_error *err)
{
    amqp_field h, p;
    bool has_h = amqp_table_get(spec->arguments, "hash-header", &h);
    bool has_p = amqp_table_get(spec->arguments, "hash-property", &p);

    if ((has_h && h.type != 'S') || (has_p && p.type != 'S'))
        return crash(err);
    if (has_h && has_p)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_EXCHANGE_DECLARE,
                         "hash-header and hash-property are mutually exclusive");
    if (has_p && property_index(p.v.bytes) < 0)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_EXCHANGE_DECLARE,
                         "Unsupported property: %.*s", (int)p.v.bytes.len,
                         (const char *)p.v.bytes.ptr);
    return AMQP_OK;
}

/* list_to_integer/1's syntax: a sign, then at least one digit. Values past
 * the cap saturate (they are refused anyway). */
static bool parse_weight(amqp_bytes k, int64_t *out)
{
    uint32_t i = k.len > 0 && (k.ptr[0] == '+' || k.ptr[0] == '-');
    bool negative = i == 1 && k.ptr[0] == '-';
    int64_t v = 0;

    if (i == k.len)
        return false;
    for (; i < k.len; i++) {
        if (k.ptr[i] < '0' || k.ptr[i] > '9')
            return false;
        if (v <= MAX_WEIGHT)
            v = v * 10 + (k.ptr[i] - '0');
    }
    *out = negative ? -v : v;
    return true;
}

static int chash_validate(route_exchange *ex, route_dest dest, amqp_bytes key, amqp_bytes args,
                          uint32_t method_id, amqp_error *err)
{
    int64_t w;

    if (!parse_weight(key, &w)) {
        amqp_field f = {.type = 'S', .v.bytes = key};
        char term[200];
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id,
                         "The binding key must be an integer: %s",
                         amqp_erl_term(&f, term, sizeof term));
    }
    if (w < 1)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id,
                         "The binding key must be greater than 0");
    if (w > MAX_WEIGHT)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id,
                         "The binding key must not exceed %d", MAX_WEIGHT);
    return AMQP_OK;
}

/* ---- the type ----------------------------------------------------------- */

static bool chash_create(route_exchange *ex)
{
    ring *r = calloc(1, sizeof *r);
    amqp_field f;
    amqp_bytes args = route_exchange_arguments(ex);

    if (r == NULL)
        return false;
    if (amqp_table_get(args, "hash-header", &f) && f.type == 'S') {
        r->hash_on = HASH_HEADER;
        r->header = f.v.bytes;
    } else if (amqp_table_get(args, "hash-property", &f) && f.type == 'S' &&
               property_index(f.v.bytes) >= 0) {
        r->hash_on = HASH_PROPERTY;
        r->property = property_index(f.v.bytes);
    }
    ex->state = r;
    return true;
}

static bool member_eq(const void *item, const void *key)
{
    return ((const member *)item)->target == key;
}

static member *member_find(const ring *r, const route_target *tg)
{
    return route_map_find(&r->members, route_hash_ptr(tg), member_eq, tg);
}

static bool chash_bind(route_exchange *ex, route_binding *b)
{
    ring *r = ex->state;
    int64_t w = 0;
    member *m;

    if (member_find(r, b->target) != NULL)
        return true; /* in the ring already, by another binding */
    if (r->nsegs == r->cap) { /* full: compact if half is removed, else grow */
        uint32_t cap = r->cap == 0 ? 8 : r->dead >= r->cap / 2 ? r->cap : r->cap * 2;
        if (!rebuild(r, cap))
            return false;
    }
    if ((m = malloc(sizeof *m)) == NULL)
        return false;
    *m = (member){b->target, r->nsegs};
    if (!route_map_insert(&r->members, route_hash_ptr(b->target), m)) {
        free(m);
        return false;
    }
    parse_weight(route_binding_key(b), &w); /* validated on bind */
    assert(w >= 1 && w <= MAX_WEIGHT);
    r->segs[r->nsegs++] = (segment){m, (uint64_t)w};
    fen_add(r, m->slot, (uint64_t)w);
    r->total += (uint64_t)w;
    return true;
}

static void chash_unbind(route_exchange *ex, route_binding *b)
{
    ring *r = ex->state;
    member *m = member_find(r, b->target);
    segment *s;

    if (m == NULL)
        return;
    s = &r->segs[m->slot];
    fen_add(r, m->slot, -s->weight);
    r->total -= s->weight;
    *s = (segment){NULL, 0};
    r->dead++;
    route_map_remove(&r->members, route_hash_ptr(m->target), m);
    free(m);
    /* Compaction cannot fail worse than keeping the dead segments. */
    if (r->dead > 16 && r->dead * 2 > r->nsegs)
        (void)rebuild(r, r->cap);
}

/* The first entry named `name`, as rabbit_misc:table_lookup finds it. */
static bool header_get(amqp_bytes headers, amqp_bytes name, amqp_field *out)
{
    amqp_iter it;
    amqp_bytes k;

    amqp_iter_init(&it, headers);
    while (amqp_table_next(&it, &k, out))
        if (amqp_bytes_equal(k, name))
            return true;
    return false;
}

/* The message's properties, decoded; false when there are none. */
static bool message_properties(const route_run *run, amqp_basic_properties *p)
{
    const route_hooks *hk = &run->t->hooks;
    amqp_error err;
    amqp_bytes raw;

    if (run->msg == NULL || hk->message_properties == NULL)
        return false;
    raw = hk->message_properties(run->t->ctx, run->msg);
    return raw.len > 0 && amqp_properties_decode(raw, p, &err) == AMQP_OK;
}

/* phash2 of what the message is hashed on. */
static uint32_t message_hash(const ring *r, route_run *run)
{
    amqp_basic_properties p;
    amqp_field f;
    char digits[24];

    switch (r->hash_on) {
    case HASH_HEADER:
        if (header_get(run->headers, r->header, &f))
            return route_phash2_field(&f);
        break;
    case HASH_PROPERTY:
        if (!message_properties(run, &p))
            break;
        if (r->property == PROP_CORRELATION_ID && (p.flags & AMQP_BASIC_CORRELATION_ID_FLAG))
            return route_phash2_binary(p.correlation_id);
        if (r->property == PROP_MESSAGE_ID && (p.flags & AMQP_BASIC_MESSAGE_ID_FLAG))
            return route_phash2_binary(p.message_id);
        if (r->property == PROP_TIMESTAMP && (p.flags & AMQP_BASIC_TIMESTAMP_FLAG)) {
            int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)p.timestamp);
            return route_phash2_binary((amqp_bytes){(const uint8_t *)digits, (uint32_t)n});
        }
        break;
    default:
        return route_phash2_binary(run->key);
    }
    return route_phash2_atom("undefined");
}

static size_t chash_route(route_exchange *ex, route_run *run)
{
    ring *r = ex->state;

    if (r->total == 0)
        return 0;
    if (run->again)
        return 1;
    uint64_t bucket = route_jump_hash(message_hash(r, run), r->total);
    route_run_collect(run, r->segs[fen_find(r, bucket)].m->target);
    return 1;
}

static void chash_destroy(route_exchange *ex)
{
    ring *r = ex->state;

    assert(r->members.count == 0);
    route_map_free(&r->members);
    free(r->segs);
    free(r->fen);
    free(r);
}

bool route_exchange_ring(const route_exchange *ex,
                         void (*fn)(void *arg, const route_ring_entry *e), void *arg)
{
    const ring *r = ex->state;
    uint64_t first = 0;

    if (ex->ops != &route_consistent_hash_ops)
        return false;
    for (uint32_t i = 0; i < r->nsegs; i++) {
        const segment *s = &r->segs[i];
        if (s->m == NULL)
            continue;
        route_ring_entry e = {first, s->weight, {s->m->target->queue, s->m->target->exchange}};
        fn(arg, &e);
        first += s->weight;
    }
    return true;
}

const route_type_ops route_consistent_hash_ops = {
    .type = ROUTE_CONSISTENT_HASH,
    .declare = chash_declare,
    .validate = chash_validate,
    .create = chash_create,
    .bind = chash_bind,
    .unbind = chash_unbind,
    .route = chash_route,
    .destroy = chash_destroy,
};
