/* The stream protocol's connections, publishers and consumers, as RabbitMQ
 * 3.10's rabbitmq_stream_management shows them (checked against it live):
 * /api/stream/connections[/{vhost}[/{name}]] (GET; DELETE one closes it),
 * .../{name}/publishers and /consumers, /api/stream/publishers[/{vhost}]
 * and /api/stream/consumers[/{vhost}]. Lists identify a connection by its
 * id and a publisher or consumer by (connection id << 8 | its id). */
#include <stdio.h>
#include <string.h>

#include "mgmt_int.h"

static sconn *stream_conn(mgmt_req *r, uint64_t id)
{
    sconn_hub *h = server_stream_hub(r->s);
    return h ? sconn_hub_find(h, id) : NULL;
}

/* ---- connections -------------------------------------------------------- */

static void sconn_json(mgmt_req *r, mgmt_json *w, sconn *c, bool listed)
{
    sconn_info ci;
    sconn_describe(c, &ci);
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "auth_mechanism", ci.auth_mechanism);
    mgmt_json_kuint(w, "channel_max", 0);
    mgmt_json_key(w, "client_properties");
    mgmt_json_obj(w);
    sp_list it = ci.client_properties;
    sp_slice k, v, provided = {0};
    while (sp_pair_next(&it, &k, &v)) {
        mgmt_json_key_bytes(w, (amqp_bytes){k.ptr, k.len});
        mgmt_json_bytes(w, (amqp_bytes){v.ptr, v.len});
        if (k.len == 15 && memcmp(k.ptr, "connection_name", 15) == 0)
            provided = v;
    }
    mgmt_json_end_obj(w);
    mgmt_json_kuint(w, "connected_at", ci.connected_at);
    mgmt_json_kuint(w, "frame_max", ci.frame_max);
    mgmt_json_kstr(w, "host", ci.host);
    mgmt_json_kstr(w, "name", ci.name);
    mgmt_json_kstr(w, "node", server_node_name(r->s));
    /* RabbitMQ 3.10 writes null in lists, "" for one connection */
    static const char *const tls_keys[] = {"peer_cert_issuer", "peer_cert_subject",
                                           "peer_cert_validity"};
    for (int i = 0; i < 3; i++)
        listed ? mgmt_json_knull(w, tls_keys[i]) : mgmt_json_kstr(w, tls_keys[i], "");
    mgmt_json_kstr(w, "peer_host", ci.peer_host);
    mgmt_json_kint(w, "peer_port", ci.peer_port);
    mgmt_json_kint(w, "port", ci.port);
    mgmt_json_kstr(w, "protocol", "stream");
    mgmt_json_kbool(w, "ssl", false);
    static const char *const ssl_keys[] = {"ssl_cipher", "ssl_hash", "ssl_key_exchange",
                                           "ssl_protocol"};
    for (int i = 0; i < 4; i++)
        listed ? mgmt_json_knull(w, ssl_keys[i]) : mgmt_json_kstr(w, ssl_keys[i], "");
    mgmt_json_kuint(w, "timeout", ci.heartbeat);
    mgmt_json_kstr(w, "user", ci.user);
    if (provided.ptr)
        mgmt_json_kbytes(w, "user_provided_name", (amqp_bytes){provided.ptr, provided.len});
    mgmt_json_kstr(w, "user_who_performed_action", ci.user);
    mgmt_json_kstr(w, "vhost", ci.vhost);
    mgmt_json_end_obj(w);
}

static bool render_listed(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    sconn *c = stream_conn(r, it->id);
    if (c)
        sconn_json(r, w, c, true);
    return c != NULL;
}

bool mgmt_stream_conn_render(mgmt_req *r, mgmt_json *w, uint64_t id, bool listed)
{
    sconn *c = stream_conn(r, id);
    if (c)
        sconn_json(r, w, c, listed);
    return c != NULL;
}

void mgmt_stream_conns_add(mgmt_req *r, mgmt_list *l, vhost *only)
{
    sconn_hub *h = server_stream_hub(r->s);
    for (sconn *c = h ? sconn_hub_next(h, NULL) : NULL; c; c = sconn_hub_next(h, c)) {
        sconn_info ci;
        sconn_describe(c, &ci);
        if ((!only || strcmp(ci.vhost, vhost_name(only)) == 0) && mgmt_sees_user(r, ci.user))
            mgmt_list_add(l, ci.vhost, AMQP_CSTR(ci.name), ci.id, 0, false);
    }
}

sconn *mgmt_stream_conn_named(mgmt_req *r, amqp_bytes name, const char **user)
{
    sconn_hub *h = server_stream_hub(r->s);
    for (sconn *c = h ? sconn_hub_next(h, NULL) : NULL; c; c = sconn_hub_next(h, c)) {
        sconn_info ci;
        sconn_describe(c, &ci);
        if (amqp_bytes_equal_cstr(name, ci.name)) {
            *user = ci.user;
            return c;
        }
    }
    return NULL;
}

static bool render_one(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    sconn *c = stream_conn(r, it->id);
    if (c)
        sconn_json(r, w, c, false);
    return c != NULL;
}

/* The connections the user may see, of vhost `only` (NULL: all). */
static void list_conns(mgmt_req *r, vhost *only)
{
    mgmt_list *l = mgmt_list_begin(r);
    if (!l)
        return;
    mgmt_stream_conns_add(r, l, only);
    mgmt_list_send(r, l, render_listed);
}

static void get_conns(mgmt_req *r) { list_conns(r, NULL); }

static void get_vhost_conns(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (v)
        list_conns(r, v);
}

/* The connection /{vhost}/{name} names, or NULL with 404 (or 401) sent. */
static sconn *named_conn(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    sconn_hub *h = server_stream_hub(r->s);
    if (!v)
        return NULL;
    for (sconn *c = h ? sconn_hub_next(h, NULL) : NULL; c; c = sconn_hub_next(h, c)) {
        sconn_info ci;
        sconn_describe(c, &ci);
        if (strcmp(ci.vhost, vhost_name(v)) != 0 || !amqp_bytes_equal_cstr(r->cap[1], ci.name))
            continue;
        if (mgmt_user_object_allowed(r, ci.user))
            return c;
        mgmt_error(r, 401, "not_authorised", "User not authorised to access object");
        return NULL;
    }
    mgmt_not_found(r);
    return NULL;
}

static void get_conn(mgmt_req *r)
{
    sconn *c = named_conn(r);
    if (!c)
        return;
    sconn_info ci;
    sconn_describe(c, &ci);
    mgmt_list_item it = {.id = ci.id};
    mgmt_object_send(r, render_one, &it);
}

static void delete_conn(mgmt_req *r)
{
    sconn *c = named_conn(r);
    if (!c)
        return;
    sconn_force_close(c, mgmt_header(r, "X-Reason"));
    mgmt_send_empty(r, 204, NULL);
}

/* ---- publishers and consumers -------------------------------------------- */

typedef struct found {
    mgmt_req *r;
    mgmt_json *w;
    sconn *c;
    int want;       /* the id to render, -1: add each to `l` */
    mgmt_list *l;
    const char *stream; /* list only those of this stream (NULL: all) */
    bool consumers, done;
} found;

static void connection_details(found *f)
{
    sconn_info ci;
    sconn_describe(f->c, &ci);
    mgmt_json_key(f->w, "connection_details");
    mgmt_json_obj(f->w);
    mgmt_json_kstr(f->w, "name", ci.name);
    mgmt_json_kstr(f->w, "node", server_node_name(f->r->s));
    mgmt_json_kstr(f->w, "peer_host", ci.peer_host);
    mgmt_json_kint(f->w, "peer_port", ci.peer_port);
    mgmt_json_kstr(f->w, "user", ci.user);
    mgmt_json_end_obj(f->w);
}

static void queue_ref(found *f, const char *stream)
{
    sconn_info ci;
    sconn_describe(f->c, &ci);
    mgmt_json_key(f->w, "queue");
    mgmt_json_obj(f->w);
    mgmt_json_kstr(f->w, "name", stream);
    mgmt_json_kstr(f->w, "vhost", ci.vhost);
    mgmt_json_end_obj(f->w);
}

static uint64_t item_id(found *f, uint8_t id)
{
    sconn_info ci;
    sconn_describe(f->c, &ci);
    return ci.id << 8 | id;
}

static void on_publisher(void *arg, const sconn_publisher_info *p)
{
    found *f = arg;
    if (f->want < 0) {
        sconn_info ci;
        sconn_describe(f->c, &ci);
        if (!f->stream || strcmp(f->stream, p->stream) == 0)
            mgmt_list_add(f->l, ci.vhost, AMQP_CSTR(p->stream), item_id(f, p->id), 0, false);
        return;
    }
    if (p->id != f->want)
        return;
    f->done = true;
    mgmt_json_obj(f->w);
    mgmt_json_kuint(f->w, "confirmed", p->confirmed);
    connection_details(f);
    mgmt_json_kuint(f->w, "errored", p->errored);
    mgmt_json_kuint(f->w, "published", p->published);
    mgmt_json_kuint(f->w, "publisher_id", p->id);
    queue_ref(f, p->stream);
    mgmt_json_kstr(f->w, "reference", p->reference);
    mgmt_json_end_obj(f->w);
}

static void on_consumer(void *arg, const sconn_consumer_info *s)
{
    found *f = arg;
    if (f->want < 0) {
        sconn_info ci;
        sconn_describe(f->c, &ci);
        mgmt_list_add(f->l, ci.vhost, AMQP_CSTR(s->stream), item_id(f, s->id), 0, false);
        return;
    }
    if (s->id != f->want)
        return;
    f->done = true;
    mgmt_json_obj(f->w);
    /* rabbit_stream_reader's consumer activity: a single active consumer
     * is "single_active" or "waiting", any other "up" */
    mgmt_json_kbool(f->w, "active", s->active);
    mgmt_json_kstr(f->w, "activity_status",
                   !s->single_active ? "up" : s->active ? "single_active" : "waiting");
    connection_details(f);
    mgmt_json_kuint(f->w, "consumed", s->consumed);
    mgmt_json_kuint(f->w, "credits", s->credits);
    mgmt_json_kuint(f->w, "offset", s->offset);
    mgmt_json_kuint(f->w, "offset_lag", s->offset_lag);
    mgmt_json_key(f->w, "properties"); /* the Subscribe properties Warren keeps */
    mgmt_json_obj(f->w);
    if (*s->name)
        mgmt_json_kstr(f->w, "name", s->name);
    if (s->single_active)
        mgmt_json_kstr(f->w, "single-active-consumer", "true");
    mgmt_json_end_obj(f->w);
    queue_ref(f, s->stream);
    mgmt_json_kuint(f->w, "subscription_id", s->id);
    mgmt_json_end_obj(f->w);
}

static void visit(found *f)
{
    if (f->consumers)
        sconn_foreach_consumer(f->c, on_consumer, f);
    else
        sconn_foreach_publisher(f->c, on_publisher, f);
}

static bool render_item(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it, bool consumers)
{
    found f = {.r = r, .w = w, .c = stream_conn(r, it->id >> 8), .want = (int)(it->id & 0xff),
               .consumers = consumers};
    if (f.c)
        visit(&f);
    return f.done;
}

static bool render_publisher(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    return render_item(r, w, it, false);
}

/* An AMQP 0-9-1 consumer of a stream (Warren lists them here too, marked
 * "protocol": "amqp091", res_stream.c) or a stream-protocol one. */
static bool render_consumer(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    if (it->id & MGMT_AMQP_ITEM)
        return mgmt_render_amqp_stream_consumer(r, w, it);
    return render_item(r, w, it, true);
}

/* The vhost of capture 0, 404 when unknown: the stream plugin lists any
 * vhost's (filtered by user); it checks no vhost access. */
static vhost *listed_vhost(mgmt_req *r)
{
    vhost *v = server_vhost(r->s, r->cap[0]);
    if (!v)
        mgmt_not_found(r);
    return v;
}

/* rabbit_mgmt_util:disable_stats: the stream lists are statistics. */
static bool stats_enabled(mgmt_req *r)
{
    if (r->disable_stats)
        mgmt_error(r, 400, "bad_request", "Stats in management UI are disabled on this node");
    return !r->disable_stats;
}

/* Publishers or consumers of connection `one`, or of vhost `only`'s
 * connections (NULL: all) the user may see -- only those of `stream` when
 * given; with the AMQP consumers of streams unless for one connection. */
static void list_items(mgmt_req *r, vhost *only, sconn *one, bool consumers, const char *stream)
{
    if (!one && !stats_enabled(r))
        return;
    found f = {.r = r, .want = -1, .consumers = consumers, .l = mgmt_list_begin(r),
               .stream = stream};
    sconn_hub *h = server_stream_hub(r->s);
    if (!f.l)
        return;
    for (sconn *c = one ? one : h ? sconn_hub_next(h, NULL) : NULL; c;
         c = one ? NULL : sconn_hub_next(h, c)) {
        sconn_info ci;
        sconn_describe(c, &ci);
        f.c = c;
        if ((!only || strcmp(ci.vhost, vhost_name(only)) == 0) && mgmt_sees_user(r, ci.user))
            visit(&f);
    }
    if (consumers && !one)
        mgmt_amqp_stream_consumers_add(r, f.l, only);
    mgmt_list_send(r, f.l, consumers ? render_consumer : render_publisher);
}

static void get_publishers(mgmt_req *r) { list_items(r, NULL, NULL, false, NULL); }
static void get_consumers(mgmt_req *r) { list_items(r, NULL, NULL, true, NULL); }

static void get_vhost_publishers(mgmt_req *r)
{
    vhost *v = listed_vhost(r);
    if (v)
        list_items(r, v, NULL, false, NULL);
}

/* rabbitmq_stream_management's /stream/publishers/{vhost}/{stream}. */
static void get_stream_publishers(mgmt_req *r)
{
    vhost *v = listed_vhost(r);
    if (!v)
        return;
    queue *q = vhost_queue_find(v, r->cap[1]);
    if (!q || !queue_is_stream(q)) {
        mgmt_not_found(r);
        return;
    }
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)r->cap[1].len, (const char *)r->cap[1].ptr);
    list_items(r, v, NULL, false, name);
}

static void get_vhost_consumers(mgmt_req *r)
{
    vhost *v = listed_vhost(r);
    if (v)
        list_items(r, v, NULL, true, NULL);
}

static void get_conn_publishers(mgmt_req *r)
{
    sconn *c = named_conn(r);
    if (c)
        list_items(r, NULL, c, false, NULL);
}

static void get_conn_consumers(mgmt_req *r)
{
    sconn *c = named_conn(r);
    if (c)
        list_items(r, NULL, c, true, NULL);
}

const mgmt_route mgmt_stream_conn_routes[] = {
    {HTTP_GET, "/api/stream/connections", TAG_MANAGEMENT, get_conns},
    {HTTP_GET, "/api/stream/connections/{}", TAG_MANAGEMENT, get_vhost_conns},
    {HTTP_GET, "/api/stream/connections/{}/{}", TAG_MANAGEMENT, get_conn},
    {HTTP_DELETE, "/api/stream/connections/{}/{}", TAG_MANAGEMENT, delete_conn},
    {HTTP_GET, "/api/stream/connections/{}/{}/publishers", TAG_MANAGEMENT, get_conn_publishers},
    {HTTP_GET, "/api/stream/connections/{}/{}/consumers", TAG_MANAGEMENT, get_conn_consumers},
    {HTTP_GET, "/api/stream/publishers", TAG_MANAGEMENT, get_publishers},
    {HTTP_GET, "/api/stream/publishers/{}", TAG_MANAGEMENT, get_vhost_publishers},
    {HTTP_GET, "/api/stream/publishers/{}/{}", TAG_MANAGEMENT, get_stream_publishers},
    {HTTP_GET, "/api/stream/consumers", TAG_MANAGEMENT, get_consumers},
    {HTTP_GET, "/api/stream/consumers/{}", TAG_MANAGEMENT, get_vhost_consumers},
    {0},
};
