/* Route and Partitions: the streams of a super stream (an exchange whose
 * bindings lead to the partition streams, made over AMQP or the API), as
 * RabbitMQ 3.10.8 answered them live: Route gives the streams the routing
 * key reaches (others are left out, none is an empty OK), Partitions every
 * stream bound, ordered by the bindings' x-stream-partition-order; a
 * missing exchange is stream_does_not_exist (answered under the response
 * key, as 3.13 does; 3.10.8 used the request's).
 *
 * CreateSuperStream and DeleteSuperStream (3.13's, which 3.10 lacks) make
 * and remove that shape through the AMQP paths: a durable direct exchange
 * with x-super-stream, one stream per partition (Create's arguments) bound
 * with its binding key and x-stream-partition-order, as 3.13's stream
 * manager does; a creation that fails midway is undone. Permissions as
 * 3.13 checks them: configure and read on the exchange, configure and
 * write on each partition. */
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

int32_t sc_partition_index(sconn *c, sp_slice super, const queue *q)
{
    route_exchange *ex = route_exchange_find(vhost_routes(c->vh), (amqp_bytes){super.ptr, super.len});
    partitions ps = {.ex = ex};
    if (!ex)
        return -1;
    route_foreach_binding(vhost_routes(c->vh), add_partition, &ps);
    qsort(ps.items, ps.n, sizeof *ps.items, by_order);
    amqp_bytes name = queue_name(q);
    int32_t index = -1;
    for (size_t i = 0; i < ps.n && index < 0; i++)
        if (ps.items[i].name.len == name.len && memcmp(ps.items[i].name.ptr, name.ptr, name.len) == 0)
            index = (int32_t)i;
    free(ps.items);
    return index;
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

static amqp_bytes bytes_of(sp_slice s) { return (amqp_bytes){s.ptr, s.len}; }

/* Undoes a creation: the partitions made so far, then the exchange. */
static void undo(sconn *c, sp_slice name, sp_list parts, size_t made)
{
    amqp_error err;
    sp_slice p;
    for (size_t i = 0; i < made && sp_string_next(&parts, &p); i++)
        admin_queue_delete(c->vh, bytes_of(p), false, false, &err);
    admin_exchange_delete(c->vh, bytes_of(name), false, &err);
}

/* Names, permissions and room for every part, before anything is made. */
static uint16_t check_create(sconn *c, const sp_command *cmd)
{
    sp_slice name = cmd->u.create_super_stream.name, p, k;
    sp_list parts = cmd->u.create_super_stream.partitions;
    sp_list keys = cmd->u.create_super_stream.binding_keys;
    if (!sc_name_ok(name) || !parts.count || parts.count != keys.count)
        return SP_PRECONDITION_FAILED;
    if (!sc_allowed(c, ACCESS_CONFIGURE, name) || !sc_allowed(c, ACCESS_READ, name))
        return SP_ACCESS_REFUSED;
    bool exists = route_exchange_find(vhost_routes(c->vh), bytes_of(name)) != NULL;
    while (sp_string_next(&parts, &p) && sp_string_next(&keys, &k)) {
        if (!sc_name_ok(p))
            return SP_PRECONDITION_FAILED;
        if (!sc_allowed(c, ACCESS_CONFIGURE, p) || !sc_allowed(c, ACCESS_WRITE, p))
            return SP_ACCESS_REFUSED;
        exists |= vhost_queue_find(c->vh, bytes_of(p)) != NULL;
    }
    return exists ? SP_STREAM_ALREADY_EXISTS : SP_OK;
}

static uint16_t create_super(sconn *c, const sp_command *cmd)
{
    uint16_t code = check_create(c, cmd);
    uint8_t qargs[4096], xargs[64], bargs[64];
    queue_spec spec = {.durable = true};
    if (code == SP_OK &&
        !sc_stream_arguments(cmd->u.create_super_stream.arguments, qargs, sizeof qargs,
                             &spec.arguments))
        code = SP_PRECONDITION_FAILED;
    if (code != SP_OK)
        return code;
    amqp_writer w;
    amqp_writer_init(&w, xargs, sizeof xargs);
    size_t top = amqp_table_begin(&w);
    amqp_put_field_bool(&w, "x-super-stream", true);
    amqp_table_end(&w, top);
    sp_slice name = cmd->u.create_super_stream.name, p, k;
    route_exchange_spec ex = {.name = bytes_of(name), .type = AMQP_CSTR("direct"), .durable = true,
                              .arguments = {xargs + 4, (uint32_t)w.len - 4}};
    amqp_error err = {0};
    if (admin_exchange_declare(c->vh, &ex, &err) != AMQP_OK)
        return sc_code_of(&err);
    sp_list parts = cmd->u.create_super_stream.partitions;
    sp_list keys = cmd->u.create_super_stream.binding_keys;
    for (size_t i = 0; sp_string_next(&parts, &p) && sp_string_next(&keys, &k); i++) {
        queue *q;
        spec.name = bytes_of(p);
        amqp_writer_init(&w, bargs, sizeof bargs);
        top = amqp_table_begin(&w);
        amqp_put_field_long(&w, "x-stream-partition-order", (int64_t)i);
        amqp_table_end(&w, top);
        if (admin_queue_declare(c->vh, &spec, &q, &err) != AMQP_OK ||
            admin_bind(c->vh, bytes_of(name), true, bytes_of(p), bytes_of(k),
                       (amqp_bytes){bargs + 4, (uint32_t)w.len - 4}, true, &err) != AMQP_OK) {
            log_msg(LOG_WARNING, "stream connection %s: cannot create super stream '%.*s': %s",
                    c->peer, (int)name.len, (const char *)name.ptr, err.text);
            undo(c, name, cmd->u.create_super_stream.partitions, i + 1);
            return sc_code_of(&err);
        }
    }
    return SP_OK;
}

/* Its partitions (every stream bound), then the exchange. */
static uint16_t delete_super(sconn *c, const sp_command *cmd)
{
    sp_slice name = cmd->u.delete_super_stream.name;
    route_exchange *ex = route_exchange_find(vhost_routes(c->vh), bytes_of(name));
    if (!sc_allowed(c, ACCESS_CONFIGURE, name))
        return SP_ACCESS_REFUSED;
    if (!ex)
        return SP_STREAM_DOES_NOT_EXIST;
    partitions ps = {.ex = ex};
    route_foreach_binding(vhost_routes(c->vh), add_partition, &ps);
    uint16_t code = ps.oom ? SP_INTERNAL_ERROR : SP_OK;
    for (size_t i = 0; code == SP_OK && i < ps.n; i++)
        if (!sc_allowed(c, ACCESS_CONFIGURE, ps.items[i].name))
            code = SP_ACCESS_REFUSED;
    /* the names are the queues' own: copy each before its queue goes */
    amqp_error err = {0};
    for (size_t i = 0; code == SP_OK && i < ps.n; i++) {
        char part[256];
        size_t n = ps.items[i].name.len < sizeof part ? ps.items[i].name.len : sizeof part - 1;
        memcpy(part, ps.items[i].name.ptr, n);
        if (admin_queue_delete(c->vh, (amqp_bytes){(const uint8_t *)part, (uint32_t)n}, false,
                               false, &err) != AMQP_OK)
            code = sc_code_of(&err);
    }
    free(ps.items);
    if (code == SP_OK && admin_exchange_delete(c->vh, bytes_of(name), false, &err) != AMQP_OK)
        code = sc_code_of(&err);
    return code;
}

bool sc_superstream_command(sconn *c, const sp_command *cmd)
{
    if (cmd->key == SP_CREATE_SUPER_STREAM || cmd->key == SP_DELETE_SUPER_STREAM) {
        uint16_t code = cmd->key == SP_CREATE_SUPER_STREAM ? create_super(c, cmd)
                                                            : delete_super(c, cmd);
        sc_response(c, cmd->key, cmd->correlation_id, code);
        return true;
    }
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
