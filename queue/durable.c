/* Durable topology: durable exchanges, durable (non-exclusive) queues and
 * the bindings between durable ends are written to the sqlite metadata
 * (store/meta) when declared or deleted, and loaded back at start, so they
 * survive a restart as in RabbitMQ. Each write commits before the method's
 * -ok goes out. Redeclaring something that exists writes nothing.
 *
 * At start the store hands out vhosts, users, permissions and topic
 * permissions first, then exchanges, queues and bindings, so every row
 * finds its vhost (a row naming a vhost the store does not have is
 * skipped with a warning).
 *
 * While a vhost is being torn down at shutdown nothing is written: its
 * queues are freed, not deleted.
 */
#include <stdio.h>
#include <string.h>

#include "queue.h"

/* Names are at most 255 bytes on the wire; meta takes C strings. */
typedef char name_buf[256];

static const char *cstr(amqp_bytes b, name_buf out)
{
    snprintf(out, sizeof(name_buf), "%.*s", (int)b.len, (const char *)b.ptr);
    return out;
}

static meta *store_of(vhost *v)
{
    return vhost_closing(v) ? NULL : server_meta(vhost_server(v));
}

void durable_exchange_declared(vhost *v, const route_exchange *ex)
{
    meta *m = store_of(v);
    if (!m || !route_exchange_durable(ex))
        return;
    name_buf name;
    meta_exchange e = {
        .vhost = vhost_name(v),
        .name = cstr(route_exchange_name(ex), name),
        .type = route_type_name(route_exchange_type(ex)),
        .auto_delete = route_exchange_auto_delete(ex),
        .internal = route_exchange_internal(ex),
        .arguments = route_exchange_arguments(ex),
    };
    meta_put_exchange(m, &e);
}

/* Also the route_hooks callback for auto-deleted exchanges. */
void durable_exchange_deleted(vhost *v, const route_exchange *ex)
{
    meta *m = store_of(v);
    name_buf name;
    if (m && route_exchange_durable(ex))
        meta_delete_exchange(m, vhost_name(v), cstr(route_exchange_name(ex), name));
}

bool durable_queue(const queue *q) { return queue_durable(q) && !queue_exclusive(q); }

void durable_queue_declared(vhost *v, queue *q)
{
    meta *m = store_of(v);
    if (!m || !durable_queue(q))
        return;
    name_buf name;
    meta_queue row = {
        .vhost = vhost_name(v),
        .name = cstr(queue_name(q), name),
        .auto_delete = queue_auto_delete(q),
        .arguments = queue_arguments(q),
    };
    if (meta_put_queue(m, &row))
        queue_set_store_id(q, row.id);
}

/* Deleting the queue row deletes its bindings too (meta cascades). */
void durable_queue_deleted(vhost *v, queue *q)
{
    meta *m = store_of(v);
    name_buf name;
    if (m && durable_queue(q))
        meta_delete_queue(m, vhost_name(v), cstr(queue_name(q), name));
}

/* A binding is durable when both its ends are. */
void durable_binding(vhost *v, const route_exchange *source, route_dest dest, amqp_bytes key,
                     amqp_bytes args, bool bound)
{
    meta *m = store_of(v);
    if (!m || !route_exchange_durable(source))
        return;
    if (dest.queue ? !durable_queue(dest.queue) : !route_exchange_durable(dest.exchange))
        return;
    name_buf src, dst;
    meta_binding b = {
        .vhost = vhost_name(v),
        .source = cstr(route_exchange_name(source), src),
        .destination = cstr(dest.queue ? queue_name(dest.queue)
                                       : route_exchange_name(dest.exchange),
                            dst),
        .destination_is_exchange = dest.exchange != NULL,
        .routing_key = key,
        .arguments = args,
    };
    if (bound)
        meta_put_binding(m, &b);
    else
        meta_delete_binding(m, &b);
}
