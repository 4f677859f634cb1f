/* Route and Partitions: the streams of a super stream (an exchange whose
 * bindings lead to the partition streams, made over AMQP or the API), as
 * RabbitMQ 3.10.8 answered them live: Route gives the streams the routing
 * key reaches (others are left out, none is an empty OK), Partitions every
 * stream bound, ordered by the bindings' x-stream-partition-order; a
 * missing exchange is stream_does_not_exist (answered under the response
 * key, as 3.13 does; 3.10.8 used the request's). Creating and deleting super
 * streams over the protocol (3.13's commands) is not served. */
#include <stdlib.h>
#include <string.h>

#include "sconn_int.h"

typedef struct partition {
    int64_t order;
    sp_slice name;
} partition;

typedef struct partitions {
    const route_exchange *ex;
    partition *items;
    size_t n, cap;
    bool oom;
} partitions;

static void add_partition(void *arg, const route_binding_view *b)
{
    partitions *ps = arg;
    queue *q = b->dest.queue;
    if (b->source != ps->ex || !q || !queue_is_stream(q) || ps->oom)
        return;
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 8;
        partition *grown = realloc(ps->items, cap * sizeof *grown);
        if (!grown) {
            ps->oom = true;
            return;
        }
        ps->items = grown;
        ps->cap = cap;
    }
    amqp_field f;
    amqp_bytes name = queue_name(q);
    bool ordered = amqp_table_get(b->args, "x-stream-partition-order", &f) &&
                   strchr("bBsuiIlL", f.type);
    ps->items[ps->n++] = (partition){ordered ? f.v.i : INT64_MAX, {name.ptr, name.len}};
}

static int by_order(const void *a, const void *b)
{
    const partition *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

static void send_streams(sconn *c, uint16_t key, uint32_t corr, uint16_t code, const sp_slice *s,
                         size_t n)
{
    size_t want = 32;
    for (size_t i = 0; i < n; i++)
        want += 2 + s[i].len;
    sp_buf b = sc_out(c, want);
    sp_encode_streams_response(&b, key, corr, code, s, n);
    sc_commit(c, &b);
}

static void partitions_of(sconn *c, route_exchange *ex, uint32_t corr)
{
    partitions ps = {.ex = ex};
    route_foreach_binding(vhost_routes(c->vh), add_partition, &ps);
    qsort(ps.items, ps.n, sizeof *ps.items, by_order);
    sp_slice *names = ps.n ? malloc(ps.n * sizeof *names) : NULL;
    for (size_t i = 0; names && i < ps.n; i++)
        names[i] = ps.items[i].name;
    if (ps.oom || (ps.n && !names))
        send_streams(c, SP_PARTITIONS, corr, SP_INTERNAL_ERROR, NULL, 0);
    else
        send_streams(c, SP_PARTITIONS, corr, SP_OK, names, ps.n);
    free(names);
    free(ps.items);
}

static void route(sconn *c, route_exchange *ex, const sp_command *cmd)
{
    void **queues;
    sp_slice key = cmd->u.route.routing_key;
    size_t n = route_message(vhost_routes(c->vh), ex, (amqp_bytes){key.ptr, key.len},
                             (amqp_bytes){NULL, 0}, &queues);
    sp_slice *names = n ? malloc(n * sizeof *names) : NULL;
    size_t found = 0;
    for (size_t i = 0; names && i < n; i++)
        if (queue_is_stream(queues[i])) {
            amqp_bytes name = queue_name(queues[i]);
            names[found++] = (sp_slice){name.ptr, name.len};
        }
    send_streams(c, SP_ROUTE, cmd->correlation_id, n && !names ? SP_INTERNAL_ERROR : SP_OK,
                 names, found);
    free(names);
}

bool sc_superstream_command(sconn *c, const sp_command *cmd)
{
    if (cmd->key != SP_ROUTE && cmd->key != SP_PARTITIONS)
        return false;
    sp_slice name = cmd->key == SP_ROUTE ? cmd->u.route.super_stream : cmd->u.partitions.super_stream;
    route_exchange *ex = route_exchange_find(vhost_routes(c->vh), (amqp_bytes){name.ptr, name.len});
    if (!ex)
        send_streams(c, cmd->key, cmd->correlation_id, SP_STREAM_DOES_NOT_EXIST, NULL, 0);
    else if (cmd->key == SP_ROUTE)
        route(c, ex, cmd);
    else
        partitions_of(c, ex, cmd->correlation_id);
    return true;
}
