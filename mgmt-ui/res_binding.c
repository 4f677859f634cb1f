/* Bindings: /api/bindings[/{vhost}], /api/bindings/{vhost}/e/{source}/
 * q|e/{destination} (GET, POST = bind, 201 with a Location of the new
 * binding's properties key) and .../{props} (GET, DELETE = unbind). The
 * default exchange's implicit binding of every queue is listed as
 * RabbitMQ lists it (source "", routing key = the queue's name).
 */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "mgmt_int.h"

static void binding_json(mgmt_json *w, vhost *v, amqp_bytes source, amqp_bytes dest,
                         bool to_queue, amqp_bytes key, amqp_bytes args)
{
    char props[1024];
    mgmt_props_key(key, args, props, sizeof props);
    mgmt_json_obj(w);
    mgmt_json_kbytes(w, "source", source);
    mgmt_json_kstr(w, "vhost", vhost_name(v));
    mgmt_json_kbytes(w, "destination", dest);
    mgmt_json_kstr(w, "destination_type", to_queue ? "queue" : "exchange");
    mgmt_json_kbytes(w, "routing_key", key);
    mgmt_json_key(w, "arguments");
    mgmt_json_table(w, args);
    mgmt_json_kstr(w, "properties_key", props);
    mgmt_json_end_obj(w);
}

typedef struct walk {
    mgmt_json *w;
    vhost *v;
    const mgmt_binding_filter *f;
    const char *props; /* only the binding with this properties key */
    bool found;
} walk;

/* The path names a properties key either as listed ("a.%23", the path
 * segment encoded once) or decoded ("a.#", sent as "a.%23"): RabbitMQ
 * takes both. */
static bool props_match(const walk *k, amqp_bytes key, amqp_bytes args)
{
    char props[1024], decoded[1024];
    amqp_bytes seg;
    if (!k->props)
        return true;
    mgmt_props_key(key, args, props, sizeof props);
    if (strcmp(props, k->props) == 0)
        return true;
    return mgmt_path_decode(props, decoded, sizeof decoded, &seg, 1) == 1 &&
           amqp_bytes_equal_cstr(seg, k->props);
}

static void default_binding(void *arg, queue *q)
{
    walk *k = arg;
    if (k->f->dest_exchange || (k->f->dest_queue && k->f->dest_queue != q) ||
        !props_match(k, queue_name(q), (amqp_bytes){0}))
        return;
    k->found = true;
    if (k->w)
        binding_json(k->w, k->v, AMQP_CSTR(""), queue_name(q), true, queue_name(q),
                     (amqp_bytes){0});
}

static void one_binding(void *arg, const route_binding_view *b)
{
    walk *k = arg;
    const mgmt_binding_filter *f = k->f;
    if (f->only_defaults || (f->source && b->source != f->source) ||
        (f->dest_queue && b->dest.queue != f->dest_queue) ||
        (f->dest_exchange && b->dest.exchange != f->dest_exchange) ||
        (f->dest_queue && !f->dest_exchange && !b->dest.queue) ||
        (f->dest_exchange && !f->dest_queue && !b->dest.exchange) || !props_match(k, b->key, b->args))
        return;
    k->found = true;
    if (!k->w)
        return;
    bool to_queue = b->dest.queue != NULL;
    amqp_bytes dest = to_queue ? queue_name(b->dest.queue) : route_exchange_name(b->dest.exchange);
    binding_json(k->w, k->v, route_exchange_name(b->source), dest, to_queue, b->key, b->args);
}

static void walk_vhost(walk *k)
{
    if (k->f->defaults)
        vhost_foreach_queue(k->v, default_binding, k);
    route_foreach_binding(vhost_routes(k->v), one_binding, k);
}

void mgmt_bindings_send(mgmt_req *r, vhost *v, const mgmt_binding_filter *f)
{
    mgmt_json *w = mgmt_reply(r);
    walk k = {.w = w, .f = f};
    mgmt_json_arr(w);
    for (vhost *each = server_vhost_next(r->s, NULL); each; each = server_vhost_next(r->s, each)) {
        if ((v && each != v) || !mgmt_vhost_allowed(r, each))
            continue;
        k.v = each;
        walk_vhost(&k);
    }
    mgmt_json_end_arr(w);
    mgmt_send(r, 200);
}

static void get_all(mgmt_req *r)
{
    mgmt_binding_filter f = {.defaults = true};
    mgmt_bindings_send(r, NULL, &f);
}

static void get_vhost(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    mgmt_binding_filter f = {.defaults = true};
    if (v)
        mgmt_bindings_send(r, v, &f);
}

/* The filter for /api/bindings/{vhost}/e/{source}/q|e/{dest}; 404 sent
 * when either end is missing. */
static bool pair_filter(mgmt_req *r, vhost **v, bool to_queue, mgmt_binding_filter *f)
{
    if (!(*v = mgmt_vhost_arg(r, 0)))
        return false;
    route_table *routes = vhost_routes(*v);
    amqp_bytes src = amqp_bytes_equal_cstr(r->cap[1], "amq.default") ? AMQP_CSTR("") : r->cap[1];
    *f = (mgmt_binding_filter){.source = route_exchange_find(routes, src)};
    if (to_queue)
        f->dest_queue = vhost_queue_find(*v, r->cap[2]);
    else
        f->dest_exchange = route_exchange_find(routes, r->cap[2]);
    if (!f->source || (!f->dest_queue && !f->dest_exchange)) {
        mgmt_not_found(r);
        return false;
    }
    f->defaults = src.len == 0;
    f->only_defaults = src.len == 0;
    return true;
}

static void get_pair(mgmt_req *r, bool to_queue)
{
    vhost *v;
    mgmt_binding_filter f;
    if (pair_filter(r, &v, to_queue, &f))
        mgmt_bindings_send(r, v, &f);
}

static void get_eq(mgmt_req *r) { get_pair(r, true); }
static void get_ee(mgmt_req *r) { get_pair(r, false); }

/* As queue.bind / exchange.bind: write on the destination, read on the
 * source (replies 401 when refused). */
static bool binding_allowed(mgmt_req *r, vhost *v, amqp_bytes src)
{
    return mgmt_permission_check(r, v, ACCESS_WRITE, r->cap[2]) &&
           mgmt_permission_check(r, v, ACCESS_READ, src);
}

static void post_pair(mgmt_req *r, bool to_queue)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    json_t *body = v ? mgmt_body(r) : NULL;
    if (!body)
        return;
    uint8_t *args_buf = mgmt_scratch(r, MGMT_TABLE_MAX);
    amqp_bytes args;
    json_t *rk = json_object_get(body, "routing_key");
    amqp_bytes key = json_is_string(rk) ? (amqp_bytes){(const uint8_t *)json_string_value(rk),
                                                       (uint32_t)json_string_length(rk)}
                                        : AMQP_CSTR("");
    if (!args_buf || !mgmt_body_table(r, body, "arguments", args_buf, MGMT_TABLE_MAX, &args))
        return;
    amqp_bytes src = amqp_bytes_equal_cstr(r->cap[1], "amq.default") ? AMQP_CSTR("") : r->cap[1];
    amqp_error err = {0};
    if (!binding_allowed(r, v, src))
        return;
    if (admin_bind(v, src, to_queue, r->cap[2], key, args, true, &err) != AMQP_OK) {
        mgmt_amqp_error(r, &err);
        return;
    }
    char props[1024];
    mgmt_props_key(key, args, props, sizeof props);
    /* RabbitMQ's Location: destination/properties_key, both URL-encoded */
    char *dest = evhttp_uriencode((const char *)r->cap[2].ptr, r->cap[2].len, 0);
    char *pk = evhttp_uriencode(props, -1, 0);
    char location[4096];
    snprintf(location, sizeof location, "%s/%s", dest ? dest : "", pk ? pk : "");
    free(dest);
    free(pk);
    mgmt_send_empty(r, 201, location);
}

static void post_eq(mgmt_req *r) { post_pair(r, true); }
static void post_ee(mgmt_req *r) { post_pair(r, false); }

/* The binding named by {props}; NULL-free walk fills *found. */
static bool find_props(mgmt_req *r, bool to_queue, vhost **v, mgmt_binding_filter *f,
                       char *props, size_t cap)
{
    if (!pair_filter(r, v, to_queue, f))
        return false;
    mgmt_cap_str(r, 3, props, cap);
    walk k = {.v = *v, .f = f, .props = props};
    walk_vhost(&k);
    if (!k.found)
        mgmt_not_found(r);
    return k.found;
}

/* The one binding as an object, not a list. */
static void one_binding_json(void *arg, const route_binding_view *b)
{
    walk *k = arg;
    walk probe = *k;
    probe.w = NULL;
    probe.found = false;
    one_binding(&probe, b);
    if (probe.found && !k->found) {
        k->found = true;
        bool to_queue = b->dest.queue != NULL;
        binding_json(k->w, k->v, route_exchange_name(b->source),
                     to_queue ? queue_name(b->dest.queue) : route_exchange_name(b->dest.exchange),
                     to_queue, b->key, b->args);
    }
}

static void get_props(mgmt_req *r, bool to_queue)
{
    vhost *v;
    mgmt_binding_filter f;
    char props[1024];
    if (!find_props(r, to_queue, &v, &f, props, sizeof props))
        return;
    walk k = {.w = mgmt_reply(r), .v = v, .f = &f, .props = props};
    if (f.defaults)
        binding_json(k.w, v, AMQP_CSTR(""), r->cap[2], true, r->cap[2], (amqp_bytes){0});
    else
        route_foreach_binding(vhost_routes(v), one_binding_json, &k);
    mgmt_send(r, 200);
}

static void get_eq_props(mgmt_req *r) { get_props(r, true); }
static void get_ee_props(mgmt_req *r) { get_props(r, false); }

typedef struct unbind_walk {
    walk k;
    mgmt_req *r;
    amqp_bytes key, args; /* copied into the request's scratch: unbinding frees the binding */
    bool copied, oom;
} unbind_walk;

static void pick_binding(void *arg, const route_binding_view *b)
{
    unbind_walk *u = arg;
    walk probe = u->k;
    probe.w = NULL;
    probe.found = false;
    one_binding(&probe, b);
    if (!probe.found || u->copied || u->oom)
        return;
    uint8_t *copy = mgmt_scratch(u->r, (size_t)b->key.len + b->args.len);
    if (!copy) { /* answered 500 */
        u->oom = true;
        return;
    }
    memcpy(copy, b->key.ptr, b->key.len);
    memcpy(copy + b->key.len, b->args.ptr, b->args.len);
    u->key = (amqp_bytes){copy, b->key.len};
    u->args = (amqp_bytes){copy + b->key.len, b->args.len};
    u->copied = true;
}

static void delete_props(mgmt_req *r, bool to_queue)
{
    vhost *v;
    mgmt_binding_filter f;
    char props[1024];
    if (!find_props(r, to_queue, &v, &f, props, sizeof props))
        return;
    amqp_bytes source = amqp_bytes_equal_cstr(r->cap[1], "amq.default") ? AMQP_CSTR("") : r->cap[1];
    if (!binding_allowed(r, v, source))
        return;
    unbind_walk u = {.k = {.v = v, .f = &f, .props = props}, .r = r};
    route_foreach_binding(vhost_routes(v), pick_binding, &u);
    if (u.oom)
        return;
    amqp_error err = {0};
    amqp_bytes src = amqp_bytes_equal_cstr(r->cap[1], "amq.default") ? AMQP_CSTR("") : r->cap[1];
    if (!u.copied) { /* the default exchange's bindings cannot be removed */
        err.code = AMQP_ACCESS_REFUSED;
        mgmt_amqp_error(r, &err);
        return;
    }
    if (admin_bind(v, src, to_queue, r->cap[2], u.key, u.args, false, &err) != AMQP_OK) {
        mgmt_amqp_error(r, &err);
        return;
    }
    mgmt_send_empty(r, 204, NULL);
}

static void delete_eq_props(mgmt_req *r) { delete_props(r, true); }
static void delete_ee_props(mgmt_req *r) { delete_props(r, false); }

const mgmt_route mgmt_binding_routes[] = {
    {HTTP_GET, "/api/bindings", TAG_MANAGEMENT, get_all},
    {HTTP_GET, "/api/bindings/{}", TAG_MANAGEMENT, get_vhost},
    {HTTP_GET, "/api/bindings/{}/e/{}/q/{}", TAG_MANAGEMENT, get_eq},
    {HTTP_POST, "/api/bindings/{}/e/{}/q/{}", TAG_MANAGEMENT, post_eq},
    {HTTP_GET, "/api/bindings/{}/e/{}/e/{}", TAG_MANAGEMENT, get_ee},
    {HTTP_POST, "/api/bindings/{}/e/{}/e/{}", TAG_MANAGEMENT, post_ee},
    {HTTP_GET, "/api/bindings/{}/e/{}/q/{}/{}", TAG_MANAGEMENT, get_eq_props},
    {HTTP_DELETE, "/api/bindings/{}/e/{}/q/{}/{}", TAG_MANAGEMENT, delete_eq_props},
    {HTTP_GET, "/api/bindings/{}/e/{}/e/{}/{}", TAG_MANAGEMENT, get_ee_props},
    {HTTP_DELETE, "/api/bindings/{}/e/{}/e/{}/{}", TAG_MANAGEMENT, delete_ee_props},
    {0},
};
