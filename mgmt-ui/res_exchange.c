/* Exchanges: /api/exchanges[/{vhost}[/{name}]] GET, PUT (declare, 201 new
 * or 204 existing), DELETE (?if-unused=true), .../bindings/source and
 * .../bindings/destination, and .../publish. The default exchange is ""
 * in listings and "amq.default" in paths, as in RabbitMQ.
 */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt_int.h"

static const stat_id exchange_stats[] = {STAT_PUBLISH_IN, STAT_PUBLISH_OUT};

/* The exchange a path names ("amq.default" is ""). */
static amqp_bytes path_name(amqp_bytes name)
{
    return amqp_bytes_equal_cstr(name, "amq.default") ? AMQP_CSTR("") : name;
}

void mgmt_dedup_fields(mgmt_json *w, const dedup_info *di)
{
    mgmt_json_key(w, "deduplication");
    mgmt_json_obj(w);
    mgmt_json_kuint(w, "bytes", di->bytes);
    mgmt_json_kuint(w, "duplicates", di->duplicates);
    mgmt_json_kuint(w, "entries", di->entries);
    mgmt_json_kuint(w, "size", di->size);
    mgmt_json_end_obj(w);
}

static void exchange_json(mgmt_req *r, mgmt_json *w, vhost *v, route_exchange *ex, bool one)
{
    mgmt_json_obj(w);
    mgmt_json_key(w, "arguments");
    mgmt_json_table(w, route_exchange_arguments(ex));
    mgmt_json_kbool(w, "auto_delete", route_exchange_auto_delete(ex));
    dedup_info di;
    if (dedup_exchange_info(ex, &di))
        mgmt_dedup_fields(w, &di);
    mgmt_json_kbool(w, "durable", route_exchange_durable(ex));
    if (one) {
        mgmt_json_key(w, "incoming");
        mgmt_json_arr(w);
        mgmt_json_end_arr(w);
    }
    mgmt_json_kbool(w, "internal", route_exchange_internal(ex));
    stats *st = route_exchange_user(ex);
    if (st)
        mgmt_message_stats(r, w, st, exchange_stats, 2, false);
    if (route_exchange_delayed(ex)) /* the plugin's info item, as its API shows it */
        mgmt_json_kuint(w, "messages_delayed", xdelay_count(v, ex));
    mgmt_json_kbytes(w, "name", route_exchange_name(ex));
    if (one) {
        mgmt_json_key(w, "outgoing");
        mgmt_json_arr(w);
        mgmt_json_end_arr(w);
    }
    const char *policy = policy_of_exchange(ex); /* listed only when one applies */
    if (policy)
        mgmt_json_kstr(w, "policy", policy);
    mgmt_json_kstr(w, "type", route_type_name(route_exchange_type(ex)));
    mgmt_json_kstr(w, "user_who_performed_action", "rmq-internal");
    mgmt_json_kstr(w, "vhost", vhost_name(v));
    mgmt_json_end_obj(w);
}

static bool render_exchange(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it, bool one)
{
    vhost *v = server_vhost(r->s, AMQP_CSTR(it->vhost));
    route_exchange *ex = v ? route_exchange_find(vhost_routes(v), it->name) : NULL;
    if (!ex)
        return false;
    exchange_json(r, w, v, ex, one);
    return true;
}

static bool render_listed(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    return render_exchange(r, w, it, false);
}

static bool render_one(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    return render_exchange(r, w, it, true);
}

typedef struct collect {
    mgmt_list *l;
    const char *vhost, *sort;
} collect;

static void add_exchange(void *arg, route_exchange *ex)
{
    collect *c = arg;
    double key = 0;
    stats *st = route_exchange_user(ex);
    stats zero = {0};
    bool has = c->sort && mgmt_stat_sort_key(st ? st : &zero, c->sort, &key);
    mgmt_list_add(c->l, c->vhost, route_exchange_name(ex), 0, key, has);
}

static void add_exchanges(mgmt_req *r, mgmt_list *l, vhost *v)
{
    (void)r;
    collect c = {l, vhost_name(v), mgmt_list_query_of(l)->sort};
    route_foreach_exchange(vhost_routes(v), add_exchange, &c);
}

static void list_exchanges(mgmt_req *r, vhost *only)
{
    mgmt_vhosts_list_send(r, only, add_exchanges, render_listed);
}

static void get_exchanges(mgmt_req *r) { list_exchanges(r, NULL); }

static void get_vhost_exchanges(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (v)
        list_exchanges(r, v);
}

static void get_exchange(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (!v)
        return;
    mgmt_list_item it = {.vhost = vhost_name(v), .name = path_name(r->cap[1])};
    mgmt_object_send(r, render_one, &it);
}

/* A boolean body field: absent gives `dflt`; RabbitMQ refuses others. */
bool mgmt_body_bool(mgmt_req *r, json_t *body, const char *key, bool dflt, bool *out)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return true;
    }
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return true;
    }
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
        *out = s[0] == 't';
        return true;
    }
    mgmt_bad_value(r, "not_boolean", v, NULL);
    return false;
}

/* "arguments" of a body as an AMQP table in `buf`; replies 400 on error. */
bool mgmt_body_table(mgmt_req *r, json_t *body, const char *key, uint8_t *buf, size_t cap,
                     amqp_bytes *out)
{
    json_t *v = json_object_get(body, key);
    char why[256];
    amqp_writer aw;
    amqp_writer_init(&aw, buf, cap);
    if (!v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0)) {
        *out = (amqp_bytes){buf, 0};
        return true;
    }
    if (!mgmt_table_from_json(v, &aw, why, sizeof why)) {
        mgmt_error(r, 400, "bad_request", why);
        return false;
    }
    *out = (amqp_bytes){buf + 4, (uint32_t)aw.len - 4};
    return true;
}

static void put_exchange(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg_declare(r, 0);
    json_t *body = v ? mgmt_body(r) : NULL;
    if (!body)
        return;
    uint8_t *args = mgmt_scratch(r, MGMT_TABLE_MAX);
    if (!args)
        return;
    route_exchange_spec spec = {.name = path_name(r->cap[1])};
    json_t *type = json_object_get(body, "type");
    spec.type = AMQP_CSTR(json_is_string(type) ? json_string_value(type) : "direct");
    if (!mgmt_body_bool(r, body, "durable", false, &spec.durable) ||
        !mgmt_body_bool(r, body, "auto_delete", false, &spec.auto_delete) ||
        !mgmt_body_bool(r, body, "internal", false, &spec.internal) ||
        !mgmt_body_table(r, body, "arguments", args, MGMT_TABLE_MAX, &spec.arguments))
        return;
    if (!mgmt_permission_check(r, v, ACCESS_CONFIGURE, spec.name))
        return;
    bool existed = route_exchange_find(vhost_routes(v), spec.name) != NULL;
    amqp_error err = {0};
    if (spec.name.len == 0 || admin_exchange_declare(v, &spec, &err) != AMQP_OK) {
        if (spec.name.len == 0)
            err.code = AMQP_ACCESS_REFUSED;
        mgmt_amqp_error(r, &err);
        return;
    }
    mgmt_send_empty(r, existed ? 204 : 201, NULL);
}

static void delete_exchange(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (!v)
        return;
    amqp_bytes name = path_name(r->cap[1]);
    amqp_error err = {0};
    bool exists = route_exchange_find(vhost_routes(v), name) != NULL;
    if (exists && !mgmt_permission_check(r, v, ACCESS_CONFIGURE, name))
        return;
    if (exists || name.len == 0 || (name.len >= 4 && memcmp(name.ptr, "amq.", 4) == 0)) {
        if (admin_exchange_delete(v, name, mgmt_query_true(r, "if-unused"), &err) != AMQP_OK) {
            mgmt_amqp_error(r, &err);
            return;
        }
    }
    if (!exists)
        mgmt_not_found(r);
    else
        mgmt_send_empty(r, 204, NULL);
}

static void exchange_bindings(mgmt_req *r, bool as_source)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (!v)
        return;
    route_exchange *ex = route_exchange_find(vhost_routes(v), path_name(r->cap[1]));
    if (!ex) {
        mgmt_not_found(r);
        return;
    }
    mgmt_binding_filter f = {.source = as_source ? ex : NULL,
                             .dest_exchange = as_source ? NULL : ex,
                             .defaults = as_source && route_exchange_name(ex).len == 0,
                             .only_defaults = route_exchange_name(ex).len == 0};
    mgmt_bindings_send(r, v, &f);
}

static void get_source_bindings(mgmt_req *r) { exchange_bindings(r, true); }
static void get_destination_bindings(mgmt_req *r) { exchange_bindings(r, false); }

const mgmt_route mgmt_exchange_routes[] = {
    {HTTP_GET, "/api/exchanges", TAG_MANAGEMENT, get_exchanges},
    {HTTP_GET, "/api/exchanges/{}", TAG_MANAGEMENT, get_vhost_exchanges},
    {HTTP_GET, "/api/exchanges/{}/{}", TAG_MANAGEMENT, get_exchange},
    {HTTP_PUT, "/api/exchanges/{}/{}", TAG_MANAGEMENT, put_exchange},
    {HTTP_DELETE, "/api/exchanges/{}/{}", TAG_MANAGEMENT, delete_exchange},
    {HTTP_GET, "/api/exchanges/{}/{}/bindings/source", TAG_MANAGEMENT, get_source_bindings},
    {HTTP_GET, "/api/exchanges/{}/{}/bindings/destination", TAG_MANAGEMENT,
     get_destination_bindings},
    {HTTP_POST, "/api/exchanges/{}/{}/publish", TAG_MANAGEMENT, mgmt_post_publish},
    {0},
};
