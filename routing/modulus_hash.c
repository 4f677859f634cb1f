/* modulus_hash: the x-modulus-hash exchange type of RabbitMQ 4.3
 * (rabbit_exchange_type_modulus_hash): a message goes to one binding's
 * destination, the one at phash2(RoutingKeys) mod the number of bindings
 * in the bindings' stable order -- destinations sorted as Erlang sorts
 * their resource names: exchanges before queues, then by name bytewise,
 * one entry per binding (a destination bound twice is in it twice). Keys
 * and arguments of bindings take no other part.
 *
 * The state is that sorted array; a binding keeps its index in `slot`.
 * Bind and unbind shift the entries after it (O(n)), routing is one hash
 * and one index. RoutingKeys is RabbitMQ 4.3's list for an AMQP 0-9-1
 * message: the routing key, then the CC and BCC header keys; routing a CC
 * key again (route_message_with's `again`) adds nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "route_int.h"

typedef struct sorted {
    route_binding **items;
    uint32_t count, cap;
} sorted;

static bool modhash_create(route_exchange *ex)
{
    return (ex->state = calloc(1, sizeof(sorted))) != NULL;
}

static amqp_bytes dest_name(const route_table *t, const route_target *tg)
{
    if (tg->exchange != NULL)
        return route_exchange_name(tg->exchange);
    return t->hooks.queue_name ? t->hooks.queue_name(t->ctx, tg->queue) : (amqp_bytes){0};
}

/* Erlang's order of #resource{kind, name}: 'exchange' < 'queue'. */
static int dest_compare(const route_table *t, const route_target *a, const route_target *b)
{
    if ((a->queue != NULL) != (b->queue != NULL))
        return a->queue != NULL ? 1 : -1;
    return route_key_compare(dest_name(t, a), dest_name(t, b));
}

static void renumber(sorted *s, uint32_t from)
{
    for (uint32_t i = from; i < s->count; i++)
        s->items[i]->slot = i;
}

static bool modhash_bind(route_exchange *ex, route_binding *b)
{
    sorted *s = ex->state;
    uint32_t lo = 0, hi = s->count;

    if (s->count == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 8;
        route_binding **items = realloc(s->items, cap * sizeof *items);
        if (items == NULL)
            return false;
        s->items = items;
        s->cap = cap;
    }
    while (lo < hi) { /* the first entry after b's place */
        uint32_t mid = lo + (hi - lo) / 2;
        if (dest_compare(ex->table, s->items[mid]->target, b->target) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(&s->items[lo + 1], &s->items[lo], (s->count - lo) * sizeof *s->items);
    s->items[lo] = b;
    s->count++;
    renumber(s, lo);
    return true;
}

static void modhash_unbind(route_exchange *ex, route_binding *b)
{
    sorted *s = ex->state;
    uint32_t i = b->slot;

    assert(i < s->count && s->items[i] == b);
    memmove(&s->items[i], &s->items[i + 1], (s->count - i - 1) * sizeof *s->items);
    s->count--;
    renumber(s, i);
}

static size_t modhash_route(route_exchange *ex, route_run *run)
{
    sorted *s = ex->state;

    if (s->count == 0 || run->again)
        return s->count;
    uint32_t hash = route_phash2_routing_keys(run->key, run->headers);
    route_run_collect(run, s->items[hash % s->count]->target);
    return 1;
}

static void modhash_destroy(route_exchange *ex)
{
    sorted *s = ex->state;

    assert(s->count == 0);
    free(s->items);
    free(s);
}

const route_type_ops route_modulus_hash_ops = {
    .type = ROUTE_MODULUS_HASH,
    .create = modhash_create,
    .bind = modhash_bind,
    .unbind = modhash_unbind,
    .route = modhash_route,
    .destroy = modhash_destroy,
};
