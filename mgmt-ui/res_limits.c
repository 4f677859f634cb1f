/* Limits: /api/vhost-limits[/{vhost}[/{name}]] and /api/user-limits[/{user}
 * [/{name}]], as RabbitMQ 3.10.8 answers them.
 *
 * A vhost's limits are its runtime parameter (vhost-limits, limits), set
 * one limit at a time through definitions.h (defs_vhost_limit_*); a user's
 * are the user's own (access.h). Lists are [{"vhost"|"user", "value"}],
 * not paged (RabbitMQ's are not either); a user's value has its keys in
 * name order, as RabbitMQ's map prints.
 *
 * Who may do what (recorded in conformance/mgmt/authz_table.json): reading
 * needs management -- a vhost's limits then need access to the vhost
 * (monitoring sees every vhost's), while every user's limits are shown to
 * any management user, as RabbitMQ does; PUT and DELETE need administrator
 * (the route's tag). PUT answers 204 (new or not), DELETE 204 (also when
 * there was no such limit). Unknown vhost or user: 404 for GET and DELETE
 * (RabbitMQ answers a DELETE with a 500, its crash), and for PUT
 * RabbitMQ's 404 vhost_not_found / 400 ["no_such_user", name]. A bad value
 * is 400 with RabbitMQ's validation text.
 */
#include <stdio.h>
#include <string.h>

#include "../definitions/definitions.h"
#include "mgmt_int.h"

#define NAME_BYTES 256 /* user and limit names, with the NUL */

/* ---- vhost limits -------------------------------------------------------------- */

/* {"vhost": name, "value": limits} for v when it has limits; `empty` also
 * shows the [] that RabbitMQ keeps once the last limit is cleared (in the
 * all-vhosts list, not the one-vhost one). */
static void vhost_limits_item(mgmt_json *w, vhost *v, bool empty)
{
    json_t *value = defs_vhost_limits(v);
    if (value && (empty || json_is_object(value))) {
        mgmt_json_obj(w);
        mgmt_json_kstr(w, "vhost", vhost_name(v));
        mgmt_json_key(w, "value");
        mgmt_json_jansson(w, value);
        mgmt_json_end_obj(w);
    }
    json_decref(value);
}

static void get_vhost_limits(mgmt_req *r)
{
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_arr(w);
    for (vhost *v = server_vhost_next(r->s, NULL); v; v = server_vhost_next(r->s, v))
        if (mgmt_vhost_visible(r, v))
            vhost_limits_item(w, v, true);
    mgmt_json_end_arr(w);
    mgmt_send(r, 200);
}

/* The vhost of capture 0, or NULL with 404 (unknown; `declare`: RabbitMQ's
 * vhost_not_found of a PUT) or 401 (not visible to the user) sent. */
static vhost *limits_vhost(mgmt_req *r, bool declare)
{
    vhost *v = server_vhost(r->s, r->cap[0]);
    if (v && mgmt_vhost_visible(r, v))
        return v;
    if (v)
        mgmt_error(r, 401, "not_authorised", "User not authorised to access virtual host");
    else if (declare)
        mgmt_error(r, 404, "not_found", "vhost_not_found");
    else
        mgmt_not_found(r);
    return NULL;
}

static void get_one_vhost_limits(mgmt_req *r)
{
    vhost *v = limits_vhost(r, false);
    if (!v)
        return;
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_arr(w);
    vhost_limits_item(w, v, false);
    mgmt_json_end_arr(w);
    mgmt_send(r, 200);
}

static void put_vhost_limit(mgmt_req *r)
{
    char name[NAME_BYTES], why[1024];
    vhost *v = limits_vhost(r, true);
    json_t *value = v ? mgmt_body_value(r) : NULL;
    if (!value)
        return;
    if (!mgmt_cap_name(r, 1, name, sizeof name))
        mgmt_error(r, 400, "bad_request", "invalid limit name");
    else if (!defs_vhost_limit_set(v, name, value, why, sizeof why))
        mgmt_error(r, 400, "bad_request", why); /* RabbitMQ does not escape these */
    else
        mgmt_send_empty(r, 204, NULL);
}

static void delete_vhost_limit(mgmt_req *r)
{
    char name[NAME_BYTES];
    vhost *v = limits_vhost(r, false);
    if (!v)
        return;
    if (!mgmt_cap_name(r, 1, name, sizeof name))
        mgmt_not_found(r);
    else if (!defs_vhost_limit_clear(v, name))
        mgmt_error(r, 500, "internal_error", "could not store the limits (see the log)");
    else
        mgmt_send_empty(r, 204, NULL);
}

/* ---- user limits ----------------------------------------------------------------- */

static bool has_limits(const access_user *u)
{
    return access_user_max_connections(u).set || access_user_max_channels(u).set;
}

/* {"user": name, "value": {"max-channels": N, "max-connections": N}}. */
static void user_limits_item(mgmt_json *w, const access_user *u)
{
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "user", access_user_name(u));
    mgmt_json_key(w, "value");
    mgmt_user_limits_json(w, u);
    mgmt_json_end_obj(w);
}

static void list_user(void *arg, const access_user *u)
{
    if (has_limits(u))
        user_limits_item(arg, u);
}

static void get_user_limits(mgmt_req *r)
{
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_arr(w);
    access_foreach_user(server_access(r->s), list_user, w);
    mgmt_json_end_arr(w);
    mgmt_send(r, 200);
}

/* The user of capture 0, or NULL (unknown, or a name that names none). */
static const access_user *limits_user(mgmt_req *r, char *name)
{
    if (!mgmt_cap_name(r, 0, name, NAME_BYTES))
        return NULL;
    return access_find_user(server_access(r->s), name);
}

static void get_one_user_limits(mgmt_req *r)
{
    char name[NAME_BYTES];
    const access_user *u = limits_user(r, name);
    if (!u) {
        mgmt_not_found(r);
        return;
    }
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_arr(w);
    list_user(w, u);
    mgmt_json_end_arr(w);
    mgmt_send(r, 200);
}

/* Sets (value non-NULL) or clears limit `limit` of the user in capture 0. */
static void change_user_limit(mgmt_req *r, const char *limit, const json_t *value)
{
    char name[NAME_BYTES], why[512];
    const access_user *u = limits_user(r, name);
    if (!u && value) {
        mgmt_bad_value(r, "no_such_user", NULL, name);
        return;
    }
    if (!u) {
        mgmt_not_found(r);
        return;
    }
    meta_limit l = {value != NULL, value ? json_integer_value(value) : 0};
    if (!access_set_user_limit(server_access(r->s), name, limit, l, why, sizeof why))
        mgmt_error(r, 500, "internal_error", why);
    else
        mgmt_send_empty(r, 204, NULL);
}

static void put_user_limit(mgmt_req *r)
{
    char limit[NAME_BYTES], why[512];
    json_t *value = mgmt_body_value(r);
    if (!value)
        return;
    if (!mgmt_cap_name(r, 1, limit, sizeof limit)) {
        mgmt_error(r, 400, "bad_request", "invalid limit name");
        return;
    }
    json_t *one = json_object(); /* checked as RabbitMQ checks {name: value} */
    json_object_set(one, limit, value);
    bool ok = defs_user_limits_validate(one, why, sizeof why);
    json_decref(one);
    if (!ok)
        mgmt_error(r, 400, "bad_request", why); /* RabbitMQ does not escape these */
    else
        change_user_limit(r, limit, value);
}

static void delete_user_limit(mgmt_req *r)
{
    char limit[NAME_BYTES], name[NAME_BYTES];
    if (!mgmt_cap_name(r, 1, limit, sizeof limit) || !limits_user(r, name))
        mgmt_not_found(r);
    else if (strcmp(limit, "max-connections") != 0 && strcmp(limit, "max-channels") != 0)
        mgmt_send_empty(r, 204, NULL); /* nothing of that name to clear */
    else
        change_user_limit(r, limit, NULL);
}

const mgmt_route mgmt_limits_routes[] = {
    {HTTP_GET, "/api/vhost-limits", TAG_MANAGEMENT, get_vhost_limits},
    {HTTP_GET, "/api/vhost-limits/{}", TAG_MANAGEMENT, get_one_vhost_limits},
    {HTTP_PUT, "/api/vhost-limits/{}/{}", TAG_ADMINISTRATOR, put_vhost_limit},
    {HTTP_DELETE, "/api/vhost-limits/{}/{}", TAG_ADMINISTRATOR, delete_vhost_limit},
    {HTTP_GET, "/api/user-limits", TAG_MANAGEMENT, get_user_limits},
    {HTTP_GET, "/api/user-limits/{}", TAG_MANAGEMENT, get_one_user_limits},
    {HTTP_PUT, "/api/user-limits/{}/{}", TAG_ADMINISTRATOR, put_user_limit},
    {HTTP_DELETE, "/api/user-limits/{}/{}", TAG_ADMINISTRATOR, delete_user_limit},
    {0},
};
