/* binding: queue.bind / exchange.bind and their inverses.
 *
 * A binding is one allocation: the struct, its routing key, and a copy of
 * its arguments with the entries stably sorted by key -- RabbitMQ sorts
 * binding arguments (rabbit_binding sort_args) so that {a,b} and {b,a} are
 * one binding, and the headers exchange relies on the order. Bindings are
 * indexed three ways: in the table's `bindings` map by (source, target,
 * key) for idempotent bind and for unbind; in the source exchange's list
 * and the destination target's list for deleting either end; and in the
 * source type's own index for routing.
 *
 * A queue's route_target exists exactly while the queue has bindings; it
 * carries the routing mark (dedup) and the list of bindings to the queue,
 * so route_unbind_queue is O(bindings of that queue).
 *
 * RabbitMQ 3.10 behaviour (checked against 3.10.8): the default exchange
 * is refused (403) as destination, then as source, before any existence
 * check; unbinding from a missing exchange, or something never bound,
 * succeeds; headers arguments are validated on bind only.
 */
#include <stdlib.h>
#include <string.h>

#include "route_int.h"

/* ---- queue targets ------------------------------------------------------ */

static bool target_queue_eq(const void *item, const void *key)
{
    return ((const route_target *)item)->queue == key;
}

static route_target *queue_target_find(route_table *t, void *queue)
{
    return route_map_find(&t->queues, route_hash_ptr(queue), target_queue_eq, queue);
}

static route_target *queue_target_new(route_table *t, void *queue)
{
    route_target *tg = calloc(1, sizeof *tg);

    if (tg == NULL)
        return NULL;
    tg->queue = queue;
    if (!route_table_reserve(t) || !route_map_insert(&t->queues, route_hash_ptr(queue), tg)) {
        free(tg);
        return NULL;
    }
    return tg;
}

/* Frees a queue target that no binding uses any more. */
static void target_release(route_table *t, route_target *tg)
{
    if (tg->queue == NULL || tg->nbindings > 0)
        return;
    route_map_remove(&t->queues, route_hash_ptr(tg->queue), tg);
    free(tg);
}

void route_run_collect_queue(route_run *run, void *queue)
{
    route_target *tg = queue_target_find(run->t, queue);

    if (tg != NULL) {
        route_run_collect(run, tg);
        return;
    }
    /* Unbound, so no binding can have collected it: only the default
     * exchange finds it, and that is visited once per call. */
    assert(run->nresult < run->t->result_cap);
    run->t->result[run->nresult++] = queue;
}

/* ---- argument canonical form -------------------------------------------- */

/* Writes the entries of `args` to `out` stably sorted by key; *len is the
 * bytes written (args.len for a valid table). false on out-of-memory. */
static bool sort_args(amqp_bytes args, uint8_t *out, uint32_t *len)
{
    route_header *e, *tmp;
    amqp_iter it;
    size_t n = 0, i;
    uint32_t start;

    *len = 0;
    if (args.len == 0)
        return true;
    /* Every entry takes at least 2 bytes (key length, tag). */
    if ((e = malloc(sizeof *e * (args.len / 2 + 1) * 2)) == NULL)
        return false;
    tmp = e + args.len / 2 + 1;
    amqp_iter_init(&it, args);
    for (start = it.off; amqp_table_next(&it, &e[n].key, &e[n].value); start = it.off, n++)
        e[n].value.v.bytes = (amqp_bytes){args.ptr + start, it.off - start}; /* raw entry */
    route_headers_sort(e, tmp, n);
    for (i = 0; i < n; i++) {
        memcpy(out + *len, e[i].value.v.bytes.ptr, e[i].value.v.bytes.len);
        *len += e[i].value.v.bytes.len;
    }
    free(e);
    return true;
}

/* Both sorted. Equal as RabbitMQ's stored binding terms are: same keys in
 * the same order, same tags, equal values. */
static bool args_same(amqp_bytes a, amqp_bytes b)
{
    amqp_iter ia, ib;
    amqp_bytes ka, kb;
    amqp_field fa, fb;

    if (amqp_bytes_equal(a, b))
        return true;
    amqp_iter_init(&ia, a);
    amqp_iter_init(&ib, b);
    for (;;) {
        bool more_a = amqp_table_next(&ia, &ka, &fa);
        bool more_b = amqp_table_next(&ib, &kb, &fb);
        if (!more_a || !more_b)
            return more_a == more_b;
        if (!amqp_bytes_equal(ka, kb) || fa.type != fb.type || !amqp_field_equal(&fa, &fb))
            return false;
    }
}

/* ---- the binding index -------------------------------------------------- */

typedef struct binding_probe {
    const route_exchange *source;
    const route_target *target;
    amqp_bytes key, args;
} binding_probe;

static uint64_t binding_hash(const route_exchange *source, const route_target *target,
                             amqp_bytes key)
{
    uint64_t h = route_hash_bytes(key.ptr, key.len);

    return route_mix64(h ^ route_hash_ptr(source) ^ ((uint64_t)(uintptr_t)target << 1));
}

static bool binding_eq(const void *item, const void *key)
{
    const route_binding *b = item;
    const binding_probe *p = key;

    return b->source == p->source && b->target == p->target &&
           amqp_bytes_equal(route_binding_key(b), p->key) &&
           args_same(route_binding_args(b), p->args);
}

static route_binding *binding_find(route_table *t, const route_exchange *source,
                                   const route_target *target, amqp_bytes key,
                                   amqp_bytes sorted_args)
{
    binding_probe p = {source, target, key, sorted_args};

    return route_map_find(&t->bindings, binding_hash(source, target, key), binding_eq, &p);
}

/* ---- lists -------------------------------------------------------------- */

static void link_binding(route_binding *b)
{
    route_exchange *src = b->source;
    route_target *tg = b->target;

    b->src_next = src->bindings;
    if (src->bindings != NULL)
        src->bindings->src_prev = b;
    src->bindings = b;
    src->nbindings++;
    b->dst_next = tg->bindings;
    if (tg->bindings != NULL)
        tg->bindings->dst_prev = b;
    tg->bindings = b;
    tg->nbindings++;
}

static void unlink_binding(route_binding *b)
{
    route_exchange *src = b->source;
    route_target *tg = b->target;

    if (b->src_prev != NULL)
        b->src_prev->src_next = b->src_next;
    else
        src->bindings = b->src_next;
    if (b->src_next != NULL)
        b->src_next->src_prev = b->src_prev;
    src->nbindings--;
    if (b->dst_prev != NULL)
        b->dst_prev->dst_next = b->dst_next;
    else
        tg->bindings = b->dst_next;
    if (b->dst_next != NULL)
        b->dst_next->dst_prev = b->dst_prev;
    tg->nbindings--;
}

void route_binding_remove(route_table *t, route_binding *b)
{
    route_exchange *src = b->source;
    route_target *tg = b->target;

    src->ops->unbind(src, b);
    route_map_remove(&t->bindings, binding_hash(src, tg, route_binding_key(b)), b);
    unlink_binding(b);
    target_release(t, tg);
    free(b);
}

/* ---- bind / unbind ------------------------------------------------------ */

static int check_not_default(route_table *t, amqp_bytes source, route_dest dest,
                             uint32_t method_id, amqp_error *err)
{
    assert((dest.queue == NULL) != (dest.exchange == NULL));
    if ((dest.exchange != NULL && dest.exchange->is_default) || source.len == 0)
        return amqp_fail(err, AMQP_ACCESS_REFUSED, method_id,
                         "operation not permitted on the default exchange");
    return AMQP_OK;
}

static route_binding *binding_new(amqp_bytes key, amqp_bytes args)
{
    route_binding *b = calloc(1, sizeof *b + key.len + args.len);

    if (b == NULL)
        return NULL;
    b->key_len = key.len;
    if (key.len > 0)
        memcpy(b->data, key.ptr, key.len);
    if (!sort_args(args, b->data + key.len, &b->args_len)) {
        free(b);
        return NULL;
    }
    return b;
}

/* Links a new binding b (key and args set) from src to dest. */
static bool binding_add(route_table *t, route_exchange *src, route_dest dest, route_binding *b)
{
    route_target *tg = dest.exchange ? &dest.exchange->target : queue_target_find(t, dest.queue);
    uint64_t hash;

    if (tg == NULL && (tg = queue_target_new(t, dest.queue)) == NULL)
        return false;
    b->source = src;
    b->target = tg;
    hash = binding_hash(src, tg, route_binding_key(b));
    if (!src->ops->bind(src, b)) {
        target_release(t, tg);
        return false;
    }
    if (!route_map_insert(&t->bindings, hash, b)) {
        src->ops->unbind(src, b);
        target_release(t, tg);
        return false;
    }
    link_binding(b);
    return true;
}

int route_bind(route_table *t, amqp_bytes source, route_dest dest, amqp_bytes key,
               amqp_bytes args, uint32_t method_id, amqp_error *err)
{
    route_exchange *src;
    route_binding *b;
    route_target *tg;

    if (check_not_default(t, source, dest, method_id, err) != AMQP_OK)
        return AMQP_ERROR;
    if ((src = route_exchange_lookup(t, source, method_id, err)) == NULL)
        return AMQP_ERROR;
    if (src->ops->validate != NULL &&
        src->ops->validate(src, dest, key, args, method_id, err) != AMQP_OK)
        return AMQP_ERROR;
    if ((b = binding_new(key, args)) == NULL)
        return amqp_fail(err, AMQP_INTERNAL_ERROR, method_id, "out of memory");
    tg = dest.exchange ? &dest.exchange->target : queue_target_find(t, dest.queue);
    if (tg != NULL && binding_find(t, src, tg, key, route_binding_args(b)) != NULL) {
        free(b); /* already bound: binding is idempotent */
        return AMQP_OK;
    }
    if (!binding_add(t, src, dest, b)) {
        free(b);
        return amqp_fail(err, AMQP_INTERNAL_ERROR, method_id, "out of memory");
    }
    return AMQP_OK;
}

int route_unbind(route_table *t, amqp_bytes source, route_dest dest, amqp_bytes key,
                 amqp_bytes args, uint32_t method_id, amqp_error *err)
{
    route_exchange *src;
    route_target *tg;
    route_binding *b;
    uint8_t *sorted = NULL;
    uint32_t sorted_len;

    if (check_not_default(t, source, dest, method_id, err) != AMQP_OK)
        return AMQP_ERROR;
    if ((src = route_exchange_find_bytes(t, source)) == NULL)
        return AMQP_OK;
    tg = dest.exchange ? &dest.exchange->target : queue_target_find(t, dest.queue);
    if (tg == NULL)
        return AMQP_OK;
    if (args.len > 0 && ((sorted = malloc(args.len)) == NULL || !sort_args(args, sorted, &sorted_len))) {
        free(sorted);
        return amqp_fail(err, AMQP_INTERNAL_ERROR, method_id, "out of memory");
    }
    b = binding_find(t, src, tg, key, sorted ? (amqp_bytes){sorted, sorted_len} : args);
    free(sorted);
    if (b != NULL) {
        route_binding_remove(t, b);
        route_maybe_auto_delete(t, src);
    }
    return AMQP_OK;
}

void route_unbind_queue(route_table *t, void *queue)
{
    route_target *tg;

    /* Found afresh each turn: an auto-delete cascade may remove more of
     * this queue's bindings, and the last one frees the target. */
    while ((tg = queue_target_find(t, queue)) != NULL) {
        route_binding *b = tg->bindings;
        route_exchange *src = b->source;

        route_binding_remove(t, b);
        route_maybe_auto_delete(t, src);
    }
}

void route_foreach_binding(route_table *t, void (*fn)(void *arg, const route_binding_view *b),
                           void *arg)
{
    route_map *m = &t->exchanges;
    size_t i;

    for (i = 0; m->slots && i <= m->mask; i++) {
        route_exchange *ex = m->slots[i].item;
        route_binding *b;

        for (b = ex ? ex->bindings : NULL; b != NULL; b = b->src_next) {
            route_binding_view v = {
                .source = ex,
                .dest = {b->target->queue, b->target->exchange},
                .key = route_binding_key(b),
                .args = route_binding_args(b),
            };
            fn(arg, &v);
        }
    }
}
