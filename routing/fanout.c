/* fanout: the fanout exchange type -- every binding matches.
 *
 * The state is one route_vec of the exchange's bindings; routing walks it
 * once. Keys and arguments take no part in routing.
 */
#include <stdlib.h>

#include "route_int.h"

static bool fanout_create(route_exchange *ex)
{
    return (ex->state = calloc(1, sizeof(route_vec))) != NULL;
}

static bool fanout_bind(route_exchange *ex, route_binding *b)
{
    return route_vec_push(ex->state, b);
}

static void fanout_unbind(route_exchange *ex, route_binding *b)
{
    route_vec_remove(ex->state, b);
}

static size_t fanout_route(route_exchange *ex, route_run *run)
{
    return route_run_collect_vec(run, ex->state);
}

static void fanout_destroy(route_exchange *ex)
{
    route_vec *v = ex->state;

    assert(v->count == 0);
    route_vec_free(v);
    free(v);
}

const route_type_ops route_fanout_ops = {
    .type = ROUTE_FANOUT,
    .validate = NULL,
    .create = fanout_create,
    .bind = fanout_bind,
    .unbind = fanout_unbind,
    .route = fanout_route,
    .destroy = fanout_destroy,
};

/* The message-deduplication plugin's type routes as fanout; the broker
 * drops duplicates before routing (queue/dedup.c). */
const route_type_ops route_dedup_ops = {
    .type = ROUTE_DEDUP,
    .validate = NULL,
    .create = fanout_create,
    .bind = fanout_bind,
    .unbind = fanout_unbind,
    .route = fanout_route,
    .destroy = fanout_destroy,
};
