/* Export: the broker's state as a definitions document. Each section is
 * one array built from the broker's iterators; objects keep RabbitMQ
 * 3.10's key order (jansson keeps insertion order), so a diff against a
 * RabbitMQ export lines up. */
#include <stdio.h>
#include <string.h>

#include "defs_int.h"

#define RABBIT_VERSION "3.10.8" /* the RabbitMQ whose format this is */
#define PRODUCT_VERSION "0.1.0"

typedef struct exporter {
    server *s;
    vhost *only; /* per-vhost form: no "vhost" fields */
    vhost *v;    /* the vhost being walked */
    json_t *arr;
} exporter;

static void add_vhost_field(exporter *e, json_t *o, const char *vh)
{
    if (!e->only)
        json_object_set_new(o, "vhost", json_string(vh));
}

static json_t *tags_array(const char *csv)
{
    json_t *a = json_array();
    while (a && csv && *csv) {
        const char *end = strchr(csv, ',');
        size_t n = end ? (size_t)(end - csv) : strlen(csv);
        while (n && csv[0] == ' ')
            csv++, n--;
        while (n && csv[n - 1] == ' ')
            n--;
        if (n)
            json_array_append_new(a, json_stringn(csv, n));
        csv = end ? end + 1 : NULL;
    }
    return a;
}

/* {"max-channels": N, "max-connections": N}: the ones set. */
static json_t *limits_object(const access_user *u)
{
    json_t *o = json_object();
    meta_limit chans = access_user_max_channels(u), conns = access_user_max_connections(u);
    if (chans.set)
        json_object_set_new(o, "max-channels", json_integer(chans.value));
    if (conns.set)
        json_object_set_new(o, "max-connections", json_integer(conns.value));
    return o;
}

static void user_row(void *arg, const access_user *u)
{
    exporter *e = arg;
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(access_user_name(u)));
    json_object_set_new(o, "password_hash", json_string(access_user_password_hash(u)));
    json_object_set_new(o, "hashing_algorithm", json_string(access_user_hashing_algorithm(u)));
    json_object_set_new(o, "tags", tags_array(access_user_tags(u)));
    json_object_set_new(o, "limits", limits_object(u));
    json_array_append_new(e->arr, o);
}

static void vhost_row(void *arg, vhost *v)
{
    exporter *e = arg;
    json_array_append_new(e->arr, json_pack("{s:s}", "name", vhost_name(v)));
}

static void permission_row(void *arg, const meta_permission *p)
{
    exporter *e = arg;
    json_array_append_new(e->arr, json_pack("{s:s,s:s,s:s,s:s,s:s}", "user", p->user, "vhost",
                                            p->vhost, "configure", p->configure, "write",
                                            p->write, "read", p->read));
}

static void topic_permission_row(void *arg, const meta_topic_permission *p)
{
    exporter *e = arg;
    json_array_append_new(e->arr, json_pack("{s:s,s:s,s:s,s:s,s:s}", "user", p->user, "vhost",
                                            p->vhost, "exchange", p->exchange, "write", p->write,
                                            "read", p->read));
}

static void policy_row(void *arg, const policy_spec *p)
{
    exporter *e = arg;
    json_t *o = json_object();
    /* RabbitMQ keeps a policy's vhost in the per-vhost form too */
    json_object_set_new(o, "vhost", json_string(vhost_name(e->v)));
    json_object_set_new(o, "name", json_string(p->name));
    json_object_set_new(o, "pattern", json_string(p->pattern));
    json_object_set_new(o, "apply-to", json_string(p->apply_to ? p->apply_to : "all"));
    json_object_set_new(o, "definition", defs_table_to_json(p->definition));
    json_object_set_new(o, "priority", json_integer(p->priority));
    json_array_append_new(e->arr, o);
}

/* {"value", "vhost", "component", "name"}, RabbitMQ's order; the vhost
 * stays in the per-vhost form too, as RabbitMQ has it. */
static void parameter_row(void *arg, int component, const char *name)
{
    exporter *e = arg;
    const char *cname = defs_param_component_name(component);
    json_t *o = json_object();
    json_object_set_new(o, "value", defs_param_value(e->v, cname, name));
    json_object_set_new(o, "vhost", json_string(vhost_name(e->v)));
    json_object_set_new(o, "component", json_string(cname));
    json_object_set_new(o, "name", json_string(name));
    json_array_append_new(e->arr, o);
}

static void global_parameter_row(void *arg, const param_spec *p)
{
    exporter *e = arg;
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(p->name));
    json_object_set_new(o, "value", json_loads(p->value, JSON_DECODE_ANY, NULL));
    json_array_append_new(e->arr, o);
}

static void queue_row(void *arg, queue *q)
{
    exporter *e = arg;
    if (queue_exclusive(q))
        return;
    json_t *o = json_object();
    json_object_set_new(o, "name", defs_json_bytes(queue_name(q)));
    add_vhost_field(e, o, vhost_name(e->v));
    json_object_set_new(o, "durable", json_boolean(queue_durable(q)));
    json_object_set_new(o, "auto_delete", json_boolean(queue_auto_delete(q)));
    json_object_set_new(o, "arguments", defs_table_to_json(queue_arguments(q)));
    json_array_append_new(e->arr, o);
}

static bool builtin_exchange(amqp_bytes name)
{
    return name.len == 0 || (name.len >= 4 && memcmp(name.ptr, "amq.", 4) == 0);
}

static void exchange_row(void *arg, route_exchange *ex)
{
    exporter *e = arg;
    if (builtin_exchange(route_exchange_name(ex)))
        return;
    json_t *o = json_object();
    json_object_set_new(o, "name", defs_json_bytes(route_exchange_name(ex)));
    add_vhost_field(e, o, vhost_name(e->v));
    json_object_set_new(o, "type", json_string(route_type_name(route_exchange_type(ex))));
    json_object_set_new(o, "durable", json_boolean(route_exchange_durable(ex)));
    json_object_set_new(o, "auto_delete", json_boolean(route_exchange_auto_delete(ex)));
    json_object_set_new(o, "internal", json_boolean(route_exchange_internal(ex)));
    json_object_set_new(o, "arguments", defs_table_to_json(route_exchange_arguments(ex)));
    json_array_append_new(e->arr, o);
}

static void binding_row(void *arg, const route_binding_view *b)
{
    exporter *e = arg;
    bool to_queue = b->dest.queue != NULL;
    if (to_queue && queue_exclusive(b->dest.queue))
        return;
    json_t *o = json_object();
    json_object_set_new(o, "source", defs_json_bytes(route_exchange_name(b->source)));
    add_vhost_field(e, o, vhost_name(e->v));
    json_object_set_new(o, "destination",
                        defs_json_bytes(to_queue ? queue_name(b->dest.queue)
                                                 : route_exchange_name(b->dest.exchange)));
    json_object_set_new(o, "destination_type", json_string(to_queue ? "queue" : "exchange"));
    json_object_set_new(o, "routing_key", defs_json_bytes(b->key));
    json_object_set_new(o, "arguments", defs_table_to_json(b->args));
    json_array_append_new(e->arr, o);
}

/* Adds section `key`: fn(e, v) for each exported vhost fills e->arr. */
static void per_vhost(exporter *e, json_t *doc, const char *key, void (*fn)(exporter *, vhost *))
{
    e->arr = json_array();
    for (vhost *v = server_vhost_next(e->s, NULL); v; v = server_vhost_next(e->s, v))
        if (!e->only || v == e->only) {
            e->v = v;
            fn(e, v);
        }
    json_object_set_new(doc, key, e->arr);
}

static void policies_of(exporter *e, vhost *v) { policy_foreach(v, false, policy_row, e); }
static void parameters_of(exporter *e, vhost *v) { defs_param_foreach(v, NULL, parameter_row, e); }
static void queues_of(exporter *e, vhost *v) { vhost_foreach_queue(v, queue_row, e); }
static void exchanges_of(exporter *e, vhost *v)
{
    route_foreach_exchange(vhost_routes(v), exchange_row, e);
}
static void bindings_of(exporter *e, vhost *v)
{
    route_foreach_binding(vhost_routes(v), binding_row, e);
}

static void access_sections(exporter *e, json_t *doc)
{
    access_control *a = server_access(e->s);
    e->arr = json_array();
    access_foreach_user(a, user_row, e);
    json_object_set_new(doc, "users", e->arr);
    e->arr = json_array();
    server_foreach_vhost(e->s, vhost_row, e);
    json_object_set_new(doc, "vhosts", e->arr);
    e->arr = json_array();
    access_foreach_permission(a, NULL, NULL, permission_row, e);
    json_object_set_new(doc, "permissions", e->arr);
    e->arr = json_array();
    access_foreach_topic_permission(a, NULL, NULL, topic_permission_row, e);
    json_object_set_new(doc, "topic_permissions", e->arr);
}

json_t *defs_export(server *s, vhost *only)
{
    exporter e = {.s = s, .only = only};
    json_t *doc = json_object();
    if (!doc)
        return NULL;
    json_object_set_new(doc, "rabbit_version", json_string(RABBIT_VERSION));
    if (!only) {
        json_object_set_new(doc, "rabbitmq_version", json_string(RABBIT_VERSION));
        json_object_set_new(doc, "product_name", json_string("Warren"));
        json_object_set_new(doc, "product_version", json_string(PRODUCT_VERSION));
        access_sections(&e, doc);
    }
    per_vhost(&e, doc, "parameters", parameters_of);
    if (!only) {
        e.arr = json_array();
        param_foreach(server_params(s), NULL, global_parameter_row, &e);
        json_object_set_new(doc, "global_parameters", e.arr);
    }
    per_vhost(&e, doc, "policies", policies_of);
    per_vhost(&e, doc, "queues", queues_of);
    per_vhost(&e, doc, "exchanges", exchanges_of);
    per_vhost(&e, doc, "bindings", bindings_of);
    return doc;
}
