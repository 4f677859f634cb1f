/* direct: the direct exchange type, and the default exchange.
 *
 * A direct exchange is a hash map from routing key to a bucket holding the
 * bindings with that key (route_vec), so routing is one hash of the key,
 * one probe, and a walk over exactly the matching bindings. A bucket owns a
 * copy of its key and is freed with its last binding. Binding arguments
 * take no part in routing (they only make bindings distinct).
 *
 * The default exchange ("") has no bindings: it routes to the queue named
 * by the routing key, found through the broker's queue_lookup hook.
 */
#include <stdlib.h>
#include <string.h>

#include "route_int.h"

typedef struct direct_bucket {
    uint64_t hash;
    route_vec bindings;
    uint32_t key_len;
    uint8_t key[];
} direct_bucket;

static bool bucket_eq(const void *item, const void *key)
{
    const direct_bucket *bk = item;
    const amqp_bytes *k = key;

    return bk->key_len == k->len && (k->len == 0 || memcmp(bk->key, k->ptr, k->len) == 0);
}

static bool direct_create(route_exchange *ex)
{
    return (ex->state = calloc(1, sizeof(route_map))) != NULL;
}

static direct_bucket *bucket_new(route_map *m, amqp_bytes key, uint64_t hash)
{
    direct_bucket *bk = calloc(1, sizeof *bk + key.len);

    if (bk == NULL)
        return NULL;
    bk->hash = hash;
    bk->key_len = key.len;
    if (key.len > 0)
        memcpy(bk->key, key.ptr, key.len);
    if (!route_map_insert(m, hash, bk)) {
        free(bk);
        return NULL;
    }
    return bk;
}

static void bucket_release(route_map *m, direct_bucket *bk)
{
    if (bk->bindings.count > 0)
        return;
    route_map_remove(m, bk->hash, bk);
    route_vec_free(&bk->bindings);
    free(bk);
}

static bool direct_bind(route_exchange *ex, route_binding *b)
{
    route_map *m = ex->state;
    amqp_bytes key = route_binding_key(b);
    uint64_t hash = route_hash_bytes(key.ptr, key.len);
    direct_bucket *bk = route_map_find(m, hash, bucket_eq, &key);

    if (bk == NULL && (bk = bucket_new(m, key, hash)) == NULL)
        return false;
    if (!route_vec_push(&bk->bindings, b)) {
        bucket_release(m, bk);
        return false;
    }
    b->type_data = bk;
    return true;
}

static void direct_unbind(route_exchange *ex, route_binding *b)
{
    direct_bucket *bk = b->type_data;

    route_vec_remove(&bk->bindings, b);
    bucket_release(ex->state, bk);
}

static size_t direct_route(route_exchange *ex, route_run *run)
{
    uint64_t hash = route_hash_bytes(run->key.ptr, run->key.len);
    const direct_bucket *bk = route_map_find(ex->state, hash, bucket_eq, &run->key);

    return bk ? route_run_collect_vec(run, &bk->bindings) : 0;
}

static void direct_destroy(route_exchange *ex)
{
    route_map *m = ex->state;

    assert(m->count == 0); /* every binding was unbound first */
    route_map_free(m);
    free(m);
}

const route_type_ops route_direct_ops = {
    .type = ROUTE_DIRECT,
    .validate = NULL,
    .create = direct_create,
    .bind = direct_bind,
    .unbind = direct_unbind,
    .route = direct_route,
    .destroy = direct_destroy,
};

/* ---- the default exchange ----------------------------------------------- */

static bool default_create(route_exchange *ex)
{
    ex->state = NULL;
    return true;
}

/* route_bind refuses the default exchange before any type is asked. */
static bool default_bind(route_exchange *ex, route_binding *b)
{
    assert(!"bind to the default exchange");
    return false;
}

static void default_unbind(route_exchange *ex, route_binding *b)
{
    assert(!"unbind from the default exchange");
}

static size_t default_route(route_exchange *ex, route_run *run)
{
    route_table *t = ex->table;
    void *queue;

    if (t->hooks.queue_lookup == NULL)
        return 0;
    if ((queue = t->hooks.queue_lookup(t->ctx, run->key)) == NULL)
        return 0;
    route_run_collect_queue(run, queue);
    return 1;
}

static void default_destroy(route_exchange *ex)
{
}

const route_type_ops route_default_ops = {
    .type = ROUTE_DIRECT,
    .validate = NULL,
    .create = default_create,
    .bind = default_bind,
    .unbind = default_unbind,
    .route = default_route,
    .destroy = default_destroy,
};
