/* Shovel status and control, as rabbitmq_shovel_management 3.10 serves it:
 *
 *   GET    /api/shovels, /api/shovels/{vhost}: the shovels of the vhosts the
 *          user may see (an administrator: all); an unknown vhost is 404.
 *   GET    /api/shovels/vhost/{vhost}/{name}: 404 unless it exists, else
 *          the vhost's list (RabbitMQ answers this route with the list).
 *   DELETE /api/shovels/vhost/{vhost}/{name}: deletes its parameter, 204.
 *   DELETE /api/shovels/vhost/{vhost}/{name}/restart: restarts it, 204.
 * Every route needs the monitoring tag (RabbitMQ's is_authorized_monitor:
 * 401 "Not monitor user", or "Not management user" without management).
 *
 * An entry: node, timestamp (local time, "2026-12-07 9:16:48" as Erlang's
 * ~w prints the hour), name, vhost, type "dynamic", state; when running
 * src_uri, src_protocol, dest_protocol, dest_uri and the endpoints
 * (src_queue | src_exchange + src_exchange_key, then dest_exchange,
 * dest_exchange_key, dest_queue as given); when terminated its reason.
 * Warren adds forwarded, acked, unconfirmed and restarts to each.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../definitions/definitions.h"
#include "mgmt_int.h"

typedef struct list_ctx {
    mgmt_req *r;
    mgmt_json *w;
} list_ctx;

static void kopt(mgmt_json *w, const char *key, const char *v)
{
    if (v)
        mgmt_json_kstr(w, key, v);
}

static void entry(void *arg, const shovel_status *st)
{
    list_ctx *x = arg;
    mgmt_json *w = x->w;
    vhost *v = server_vhost(x->r->s, AMQP_CSTR(st->vhost));
    if (!v || !mgmt_vhost_allowed(x->r, v))
        return;
    char ts[40];
    struct tm tm;
    time_t t = (time_t)st->since_s;
    localtime_r(&t, &tm);
    snprintf(ts, sizeof ts, "%d-%02d-%02d %d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "node", server_node_name(x->r->s));
    mgmt_json_kstr(w, "timestamp", ts);
    mgmt_json_kstr(w, "name", st->name);
    mgmt_json_kstr(w, "vhost", st->vhost);
    mgmt_json_kstr(w, "type", "dynamic");
    mgmt_json_kstr(w, "state", shovel_state_name(st->state));
    if (st->state == SHOVEL_RUNNING) {
        mgmt_json_kstr(w, "src_uri", st->src_uri);
        mgmt_json_kstr(w, "src_protocol", "amqp091");
        mgmt_json_kstr(w, "dest_protocol", "amqp091");
        mgmt_json_kstr(w, "dest_uri", st->dest_uri);
        kopt(w, "src_queue", st->src_queue);
        kopt(w, "src_exchange", st->src_exchange);
        kopt(w, "src_exchange_key", st->src_exchange_key);
        kopt(w, "dest_exchange", st->dest_exchange);
        kopt(w, "dest_exchange_key", st->dest_exchange_key);
        kopt(w, "dest_queue", st->dest_queue);
    } else if (st->state == SHOVEL_TERMINATED) {
        mgmt_json_kstr(w, "reason", st->reason);
    }
    mgmt_json_kuint(w, "forwarded", st->forwarded);
    mgmt_json_kuint(w, "acked", st->acked);
    mgmt_json_kuint(w, "unconfirmed", st->unconfirmed);
    mgmt_json_kuint(w, "restarts", st->restarts);
    mgmt_json_end_obj(w);
}

static void send_list(mgmt_req *r, const char *vh)
{
    list_ctx x = {r, mgmt_reply(r)};
    shovels *set = mgmt_shovels_of(r->m);
    mgmt_json_arr(x.w);
    if (set)
        shovels_foreach(set, vh, entry, &x);
    mgmt_json_end_arr(x.w);
    mgmt_send(r, 200);
}

static void get_all(mgmt_req *r) { send_list(r, NULL); }

static bool vhost_of(mgmt_req *r, char *vh, size_t cap)
{
    if (!mgmt_cap_name(r, 0, vh, cap) || !server_vhost(r->s, AMQP_CSTR(vh))) {
        mgmt_not_found(r);
        return false;
    }
    return true;
}

static void get_vhost(mgmt_req *r)
{
    char vh[256];
    if (vhost_of(r, vh, sizeof vh))
        send_list(r, vh);
}

/* The shovel of captures 0 and 1, as the user sees it; 404 sent when none. */
static bool shovel_of(mgmt_req *r, char *vh, char *name, size_t cap)
{
    shovels *set = mgmt_shovels_of(r->m);
    if (!vhost_of(r, vh, cap))
        return false;
    vhost *v = server_vhost(r->s, AMQP_CSTR(vh));
    if (!set || !mgmt_cap_name(r, 1, name, cap) || !mgmt_vhost_allowed(r, v) ||
        !shovels_has(set, vh, name)) {
        mgmt_not_found(r);
        return false;
    }
    return true;
}

static void get_one(mgmt_req *r)
{
    char vh[256], name[256];
    if (shovel_of(r, vh, name, sizeof vh))
        send_list(r, vh);
}

static void delete_one(mgmt_req *r)
{
    char vh[256], name[256];
    if (!shovel_of(r, vh, name, sizeof vh))
        return;
    if (!defs_param_delete(server_vhost(r->s, AMQP_CSTR(vh)), "shovel", name)) {
        mgmt_not_found(r);
        return;
    }
    shovels_sync(mgmt_shovels_of(r->m));
    mgmt_send_empty(r, 204, NULL);
}

static void restart_one(mgmt_req *r)
{
    char vh[256], name[256];
    if (!shovel_of(r, vh, name, sizeof vh))
        return;
    shovels_restart(mgmt_shovels_of(r->m), vh, name);
    mgmt_send_empty(r, 204, NULL);
}

const mgmt_route mgmt_shovel_routes[] = {
    {HTTP_GET, "/api/shovels", TAG_MONITORING, get_all},
    {HTTP_GET, "/api/shovels/{}", TAG_MONITORING, get_vhost},
    {HTTP_GET, "/api/shovels/vhost/{}/{}", TAG_MONITORING, get_one},
    {HTTP_DELETE, "/api/shovels/vhost/{}/{}", TAG_MONITORING, delete_one},
    {HTTP_DELETE, "/api/shovels/vhost/{}/{}/restart", TAG_MONITORING, restart_one},
    {0},
};
