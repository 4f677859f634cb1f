/* Federation status: GET /api/federation-links[/{vhost}] and
 * /api/federation-links[/{vhost}]/state/down, as
 * rabbitmq_federation_management 3.10 answers them -- one object per link
 * with its fields in RabbitMQ's order: node, exchange + upstream_exchange
 * or queue + upstream_queue + consumer_tag, type, vhost, upstream, id,
 * status, then local_connection (running) or error (error), uri (no
 * credentials) and timestamp (local time, "YYYY-MM-DD H:MM:SS", hours
 * unpadded as Erlang's ~w prints them). "down" lists the links that are
 * neither starting nor running. DELETE
 * /api/federation-links/vhost/{vhost}/{id}/{node}/restart connects a link
 * again (RabbitMQ's restart), 204; an unknown link or node is 404.
 *
 * Who may read it: monitoring and administrator users (RabbitMQ's
 * is_authorized_monitor; others get 401 "Not monitor user"), every vhost
 * they can see. An unknown vhost is 404. RabbitMQ also adds local_channel
 * (its downstream channel's statistics); Warren's links publish without a
 * channel, so there is none, and local_connection names the link's
 * connection to the upstream.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../federation/federation.h"
#include "mgmt_int.h"

typedef struct list_ctx {
    mgmt_req *r;
    mgmt_json *w;
    vhost *only; /* NULL: every visible vhost */
    bool down;
} list_ctx;

static void timestamp(char *out, size_t cap, uint64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    snprintf(out, cap, "%d-%02d-%02d %d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static void link_item(void *arg, const fed_link_info *l)
{
    list_ctx *c = arg;
    vhost *v = server_vhost(c->r->s, AMQP_CSTR(l->vhost));
    char ts[48];
    if (!v || (c->only && v != c->only) || !mgmt_vhost_visible(c->r, v))
        return;
    if (c->down && (strcmp(l->status, "running") == 0 || strcmp(l->status, "starting") == 0))
        return;
    mgmt_json *w = c->w;
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "node", server_node_name(c->r->s));
    mgmt_json_kstr(w, l->queue ? "queue" : "exchange", l->object);
    mgmt_json_kstr(w, l->queue ? "upstream_queue" : "upstream_exchange", l->upstream_object);
    if (l->queue)
        mgmt_json_kstr(w, "consumer_tag", l->consumer_tag);
    mgmt_json_kstr(w, "type", l->queue ? "queue" : "exchange");
    mgmt_json_kstr(w, "vhost", l->vhost);
    mgmt_json_kstr(w, "upstream", l->upstream);
    mgmt_json_kstr(w, "id", l->id);
    mgmt_json_kstr(w, "status", l->status);
    if (l->local_connection[0])
        mgmt_json_kstr(w, "local_connection", l->local_connection);
    if (l->error[0])
        mgmt_json_kstr(w, "error", l->error);
    mgmt_json_kstr(w, "uri", l->uri);
    timestamp(ts, sizeof ts, l->timestamp);
    mgmt_json_kstr(w, "timestamp", ts);
    mgmt_json_end_obj(w);
}

static void list(mgmt_req *r, vhost *only, bool down)
{
    list_ctx c = {.r = r, .w = mgmt_reply(r), .only = only, .down = down};
    mgmt_json_arr(c.w);
    if (server_federation(r->s))
        federation_foreach_link(server_federation(r->s), link_item, &c);
    mgmt_json_end_arr(c.w);
    mgmt_send(r, 200);
}

static void get_links(mgmt_req *r) { list(r, NULL, false); }
static void get_down_links(mgmt_req *r) { list(r, NULL, true); }

static void get_vhost_links(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (v)
        list(r, v, false);
}

static void get_vhost_down_links(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (v)
        list(r, v, true);
}

/* DELETE /api/federation-links/vhost/{vhost}/{id}/{node}/restart: 204,
 * or 404 for a link (or node) that is not there. */
static void restart_link(mgmt_req *r)
{
    char id[16], node[256];
    vhost *v = mgmt_vhost_arg(r, 0);
    if (!v)
        return;
    if (!mgmt_cap_name(r, 1, id, sizeof id) || !mgmt_cap_name(r, 2, node, sizeof node) ||
        strcmp(node, server_node_name(r->s)) != 0 || !server_federation(r->s) ||
        !federation_restart_link(server_federation(r->s), vhost_name(v), id))
        mgmt_not_found(r);
    else
        mgmt_send_empty(r, 204, NULL);
}

const mgmt_route mgmt_federation_routes[] = {
    {HTTP_GET, "/api/federation-links", TAG_MONITORING, get_links},
    {HTTP_GET, "/api/federation-links/state/down", TAG_MONITORING, get_down_links},
    {HTTP_GET, "/api/federation-links/{}", TAG_MONITORING, get_vhost_links},
    {HTTP_GET, "/api/federation-links/{}/state/down", TAG_MONITORING, get_vhost_down_links},
    {HTTP_DELETE, "/api/federation-links/vhost/{}/{}/{}/restart", TAG_MONITORING, restart_link},
    {0},
};
