/* The headers federation reads and writes, as rabbitmq_federation 3.10
 * does: x-received-from on messages (one table per hop, newest first; its
 * length against max-hops and its cluster names stop loops) and
 * x-bound-from on the bindings an exchange link makes upstream.
 *
 * Tables are rewritten in one pass in RabbitMQ's order: a header that is
 * there keeps its place (rabbit_misc:set_table_value is a keystore), a
 * new one goes at the end. Input tables are validated already (they came
 * in through the codec), so the iterators cannot run past them.
 */
#include <stdio.h>
#include <string.h>

#include "fed_int.h"

#define RECEIVED_FROM "x-received-from"
#define BOUND_FROM "x-bound-from"

static bool field_is(const amqp_field *f, const char *s)
{
    return f->type == 'S' && s && amqp_bytes_equal_cstr(f->v.bytes, s);
}

/* Does a hop table name `cluster` in `vhost` (already_seen)? */
static bool names_us(amqp_bytes table, const char *cluster, const char *vh)
{
    amqp_field c, v;
    return amqp_table_get(table, "cluster-name", &c) && field_is(&c, cluster) &&
           amqp_table_get(table, "vhost", &v) && field_is(&v, vh);
}

static bool seen_in(amqp_bytes array, const char *cluster, const char *vh)
{
    amqp_iter it;
    amqp_field e;
    amqp_iter_init(&it, array);
    while (amqp_array_next(&it, &e))
        if (e.type == 'F' && names_us(e.v.bytes, cluster, vh))
            return true;
    return false;
}

static size_t array_length(amqp_bytes array)
{
    amqp_iter it;
    amqp_field e;
    size_t n = 0;
    amqp_iter_init(&it, array);
    while (amqp_array_next(&it, &e))
        n++;
    return n;
}

bool fed_should_forward(amqp_bytes headers, int64_t max_hops, const char *cluster,
                        const char *vh)
{
    amqp_field f;
    if (!amqp_table_get(headers, RECEIVED_FROM, &f) || f.type != 'A')
        return true;
    return (int64_t)array_length(f.v.bytes) < max_hops && !seen_in(f.v.bytes, cluster, vh);
}

/* ---- x-received-from -------------------------------------------------------- */

/* Whether an earlier hop's table is this queue link's (visit_match: uri
 * and queue equal; RabbitMQ also compares a virtual_host key that no
 * table has). */
static bool same_visit(amqp_bytes table, const fed_hop *hop)
{
    amqp_field u, q, vh;
    return amqp_table_get(table, "uri", &u) && field_is(&u, hop->uri) &&
           amqp_table_get(table, "queue", &q) && field_is(&q, hop->object) &&
           !amqp_table_get(table, "virtual_host", &vh);
}

static void put_hop(amqp_writer *w, const fed_hop *hop, int64_t visits)
{
    size_t mark = amqp_put_field_begin(w, 'F');
    amqp_put_field_str(w, "uri", AMQP_CSTR(hop->uri));
    amqp_put_field_str(w, hop->queue ? "queue" : "exchange", AMQP_CSTR(hop->object));
    amqp_put_field_bool(w, "redelivered", hop->redelivered);
    if (hop->queue) {
        amqp_put_field_long(w, "visit-count", visits);
    } else {
        if (hop->cluster)
            amqp_put_field_str(w, "cluster-name", AMQP_CSTR(hop->cluster));
        if (hop->vhost)
            amqp_put_field_str(w, "vhost", AMQP_CSTR(hop->vhost));
    }
    amqp_table_end(w, mark);
}

/* The visits an earlier pass through this queue link counted (0: none). */
static int64_t earlier_visits(amqp_bytes prior, const fed_hop *hop)
{
    amqp_iter it;
    amqp_field e, n;
    int64_t visits = 0;
    amqp_iter_init(&it, prior);
    while (amqp_array_next(&it, &e))
        if (hop->queue && e.type == 'F' && same_visit(e.v.bytes, hop) &&
            amqp_table_get(e.v.bytes, "visit-count", &n) && n.type != 't' &&
            amqp_field_int(&n, &visits))
            break;
    return visits;
}

/* x-received-from's new array: this hop, then the earlier ones (a queue
 * link's earlier visit dropped). */
static void put_received_from(amqp_writer *w, amqp_bytes prior, const fed_hop *hop)
{
    amqp_iter it;
    amqp_field e;
    amqp_put_key(w, RECEIVED_FROM);
    size_t mark = amqp_put_field_begin(w, 'A');
    put_hop(w, hop, earlier_visits(prior, hop) + 1);
    amqp_iter_init(&it, prior);
    while (amqp_array_next(&it, &e))
        if (!(hop->queue && e.type == 'F' && same_visit(e.v.bytes, hop)))
            amqp_put_field(w, &e);
    amqp_table_end(w, mark);
}

void fed_hop_headers(amqp_writer *w, amqp_bytes headers, const fed_hop *hop,
                     amqp_bytes exchange, amqp_bytes routing_key)
{
    amqp_field rf;
    bool has_rf = amqp_table_get(headers, RECEIVED_FROM, &rf);
    amqp_bytes prior = has_rf && rf.type == 'A' ? rf.v.bytes : (amqp_bytes){0};
    /* a queue link's first hop records where the message was published */
    bool origin = hop->queue && !(has_rf && rf.type == 'A');
    bool put_x = false, put_k = false, put_rf = false;
    amqp_iter it;
    amqp_bytes key;
    amqp_field f;
    amqp_iter_init(&it, headers);
    while (amqp_table_next(&it, &key, &f)) {
        if (amqp_bytes_equal_cstr(key, RECEIVED_FROM)) {
            if (!put_rf)
                put_received_from(w, prior, hop);
            put_rf = true;
        } else if (origin && amqp_bytes_equal_cstr(key, "x-original-exchange")) {
            if (!put_x)
                amqp_put_field_str(w, "x-original-exchange", exchange);
            put_x = true;
        } else if (origin && amqp_bytes_equal_cstr(key, "x-original-routing-key")) {
            if (!put_k)
                amqp_put_field_str(w, "x-original-routing-key", routing_key);
            put_k = true;
        } else {
            bool cc = hop->queue && amqp_bytes_equal_cstr(key, "CC");
            amqp_put_shortstr(w, cc ? AMQP_CSTR("x-original-cc") : key);
            amqp_put_field(w, &f);
        }
    }
    if (origin && !put_x)
        amqp_put_field_str(w, "x-original-exchange", exchange);
    if (origin && !put_k)
        amqp_put_field_str(w, "x-original-routing-key", routing_key);
    if (!put_rf)
        put_received_from(w, prior, hop);
}

/* ---- x-bound-from --------------------------------------------------------------- */

/* The hops an earlier downstream left in its x-bound-from entry. */
static int64_t hops_of(amqp_bytes table)
{
    amqp_field h;
    int64_t n = 0;
    if (amqp_table_get(table, "hops", &h) && h.type != 't')
        amqp_field_int(&h, &n);
    return n;
}

/* x-bound-from's new array: this downstream's entry, then `prior`'s. */
static void put_bound_from(amqp_writer *w, amqp_bytes prior, const fed_bind_from *b, int64_t hops)
{
    char down[2 * FED_NAME_MAX + 4];
    int n = snprintf(down, sizeof down, "%s:%s %c", b->vhost, b->exchange, b->suffix);
    amqp_put_key(w, BOUND_FROM);
    size_t arr = amqp_put_field_begin(w, 'A');
    size_t tab = amqp_put_field_begin(w, 'F');
    amqp_put_field_str(w, "cluster-name", AMQP_CSTR(b->cluster));
    amqp_put_field_str(w, "vhost", AMQP_CSTR(b->vhost));
    amqp_put_field_str(w, "exchange", (amqp_bytes){(const uint8_t *)down,
                                                   (uint32_t)(n < (int)sizeof down ? n : 0)});
    amqp_put_key(w, "hops");
    amqp_put_field(w, &(amqp_field){.type = 's', .v.i = hops});
    amqp_table_end(w, tab);
    amqp_put_raw(w, prior.ptr, prior.len);
    amqp_table_end(w, arr);
}

bool fed_binding_args(amqp_writer *w, amqp_bytes args, const fed_bind_from *b)
{
    amqp_field bf, first;
    int64_t hops = b->max_hops;
    bool has_bf = amqp_table_get(args, BOUND_FROM, &bf) && bf.type == 'A';
    amqp_bytes prior = has_bf ? bf.v.bytes : (amqp_bytes){0};
    if (has_bf) {
        amqp_iter it;
        amqp_iter_init(&it, prior);
        int64_t prev = amqp_array_next(&it, &first) && first.type == 'F' ? hops_of(first.v.bytes) : 0;
        hops = prev - 1 < b->max_hops ? prev - 1 : b->max_hops;
        if (b->upstream_cluster && seen_in(prior, b->upstream_cluster, b->upstream_vhost))
            hops = 0;
    }
    if (hops <= 0)
        return false;
    amqp_iter it;
    amqp_bytes key;
    amqp_field f;
    bool put = false;
    amqp_iter_init(&it, args);
    while (amqp_table_next(&it, &key, &f)) {
        if (!amqp_bytes_equal_cstr(key, BOUND_FROM)) {
            amqp_put_shortstr(w, key);
            amqp_put_field(w, &f);
        } else if (!put) {
            put_bound_from(w, prior, b, hops);
            put = true;
        }
    }
    if (!put)
        put_bound_from(w, prior, b, hops);
    return true;
}
