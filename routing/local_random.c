/* local_random: the x-local-random exchange type of RabbitMQ 4.0
 * (rabbit_exchange_type_local_random): each message goes to one of the
 * bound queues at random. RabbitMQ picks among the queues whose process
 * runs on the node the message came in on; every Warren queue is local to
 * the broker, so all of them qualify.
 *
 * Its bind checks are RabbitMQ's: the binding key must be empty, the
 * destination must be a queue (an exchange is "Destination not found", as
 * RabbitMQ finds no queue by that name), and a classic one. The state is
 * a route_vec of the bindings; the choice is a xorshift64* draw from the
 * table's state, so routing costs O(1) and allocates nothing.
 */
#include <stdlib.h>

#include "route_int.h"

static int local_random_validate(route_exchange *ex, route_dest dest, amqp_bytes key,
                                 amqp_bytes args, uint32_t method_id, amqp_error *err)
{
    route_table *t = ex->table;
    const char *type;

    if (key.len > 0)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id,
                         "Non empty binding '%.*s' key not permitted", (int)key.len,
                         (const char *)key.ptr);
    if (dest.queue == NULL)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id, "Destination not found");
    type = t->hooks.queue_type ? t->hooks.queue_type(t->ctx, dest.queue) : NULL;
    if (type != NULL)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id,
                         "Queue type %s not valid for this exchange type", type);
    return AMQP_OK;
}

static bool local_random_create(route_exchange *ex)
{
    return (ex->state = calloc(1, sizeof(route_vec))) != NULL;
}

static bool local_random_bind(route_exchange *ex, route_binding *b)
{
    return route_vec_push(ex->state, b);
}

static void local_random_unbind(route_exchange *ex, route_binding *b)
{
    route_vec_remove(ex->state, b);
}

static size_t local_random_route(route_exchange *ex, route_run *run)
{
    route_vec *v = ex->state;

    if (v->count == 0 || run->again)
        return v->count;
    /* The high bits are the better ones; the bias of a 32-bit multiply-
     * shift over at most 2^32 bindings is below 2^-32 per pick. */
    uint32_t i = (uint32_t)(((route_xorshift64s(&run->t->random) >> 32) * v->count) >> 32);
    route_run_collect(run, v->items[i]->target);
    return 1;
}

static void local_random_destroy(route_exchange *ex)
{
    route_vec *v = ex->state;

    assert(v->count == 0);
    route_vec_free(v);
    free(v);
}

const route_type_ops route_local_random_ops = {
    .type = ROUTE_LOCAL_RANDOM,
    .validate = local_random_validate,
    .create = local_random_create,
    .bind = local_random_bind,
    .unbind = local_random_unbind,
    .route = local_random_route,
    .destroy = local_random_destroy,
};
