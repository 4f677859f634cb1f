/* Loading the metadata store at start: vhosts, users, permissions,
 * policies and parameters, then exchanges, queues and bindings, each
 * handed to the module that owns it. Messages come afterwards, from the
 * journal (persist_recover). */
#include "admin.h"

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

static void load_vhost_row(void *ctx, const meta_vhost *v) { admin_load_vhost(ctx, v); }

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

bool admin_load(server *s)
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
