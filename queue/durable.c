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

/* ---- loading at start --------------------------------------------------- */

static vhost *load_vhost(server *s, const char *name)
{
    vhost *v = server_vhost(s, AMQP_CSTR(name));
    if (!v)
        log_msg(LOG_WARNING, "metadata for unknown vhost '%s' skipped", name);
    return v;
}

static void load_exchange(void *ctx, const meta_exchange *e)
{
    vhost *v = load_vhost(ctx, e->vhost);
    route_exchange_spec spec = {.name = AMQP_CSTR(e->name),
                                .type = AMQP_CSTR(e->type),
                                .durable = true,
                                .auto_delete = e->auto_delete,
                                .internal = e->internal,
                                .arguments = e->arguments};
    amqp_error err;
    if (v && route_exchange_declare(vhost_routes(v), &spec, NULL, &err) != AMQP_OK)
        log_msg(LOG_ERROR, "cannot restore exchange '%s': %s", e->name, err.text);
}

static void load_queue(void *ctx, const meta_queue *row)
{
    vhost *v = load_vhost(ctx, row->vhost);
    queue_spec spec = {.name = AMQP_CSTR(row->name),
                       .durable = true,
                       .auto_delete = row->auto_delete,
                       .arguments = row->arguments};
    queue *q = v ? queue_new(v, &spec) : NULL;
    if (!q)
        return;
    queue_set_store_id(q, row->id);
    vhost_queue_add(v, q);
}

static void load_binding(void *ctx, const meta_binding *b)
{
    vhost *v = load_vhost(ctx, b->vhost);
    if (!v)
        return;
    route_table *routes = vhost_routes(v);
    route_dest dest = {0};
    if (b->destination_is_exchange)
        dest.exchange = route_exchange_find(routes, AMQP_CSTR(b->destination));
    else
        dest.queue = vhost_queue_find(v, AMQP_CSTR(b->destination));
    amqp_error err;
    if ((!dest.exchange && !dest.queue) ||
        route_bind(routes, AMQP_CSTR(b->source), dest, b->routing_key, b->arguments, 0, &err) !=
            AMQP_OK)
        log_msg(LOG_ERROR, "cannot restore binding %s -> %s", b->source, b->destination);
}

static void load_vhost_row(void *ctx, const meta_vhost *v) { server_load_vhost(ctx, v); }

static void load_user(void *ctx, const meta_user *u)
{
    access_load_user(server_access(ctx), u);
}

static void load_permission(void *ctx, const meta_permission *p)
{
    access_load_permission(server_access(ctx), p);
}

static void load_topic_permission(void *ctx, const meta_topic_permission *p)
{
    access_load_topic_permission(server_access(ctx), p);
}

/* Policies load before exchanges and queues, which get them when created. */
static void load_policy(void *ctx, const meta_policy *p)
{
    vhost *v = load_vhost(ctx, p->vhost);
    if (v)
        policy_restore(v, p);
}

/* Global parameters (vhost NULL) and those of a vhost. */
static void load_parameter(void *ctx, const meta_parameter *p)
{
    vhost *v = p->vhost ? load_vhost(ctx, p->vhost) : NULL;
    if (!p->vhost || v)
        param_restore(p->vhost ? vhost_params(v) : server_params(ctx), p);
}

bool durable_load(server *s)
{
    static const meta_load_handlers h = {
        .vhost = load_vhost_row,
        .user = load_user,
        .permission = load_permission,
        .topic_permission = load_topic_permission,
        .policy = load_policy,
        .parameter = load_parameter,
        .exchange = load_exchange,
        .queue = load_queue,
        .binding = load_binding,
    };
    return meta_load(server_meta(s), &h, s);
}
