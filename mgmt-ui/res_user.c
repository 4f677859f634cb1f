/* Users: /api/users (GET, paged like the other lists), /api/users/{name}
 * (GET, PUT 201 / 204, DELETE 204 / 404), /api/users/without-permissions,
 * POST /api/users/bulk-delete, and a user's permissions and topic
 * permissions.
 *
 * A PUT as RabbitMQ 3.10.8 takes it: "tags" is required (string or list);
 * "password" is hashed with the default algorithm (SHA-256; a
 * hashing_algorithm beside it is ignored), "password_hash" is kept as given
 * with its hashing_algorithm, both is an error, neither makes a user
 * without a password (who cannot log in). Unlike RabbitMQ, an unknown
 * algorithm and a bulk-delete naming an unknown user change nothing.
 */
#include <stdio.h>
#include <string.h>

#include "mgmt_int.h"

static void user_json(mgmt_json *w, const access_user *u)
{
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "name", access_user_name(u));
    mgmt_json_kstr(w, "password_hash", access_user_password_hash(u));
    mgmt_json_kstr(w, "hashing_algorithm", access_user_hashing_algorithm(u));
    mgmt_tags_json(w, "tags", access_user_tags(u));
    mgmt_json_key(w, "limits");
    mgmt_user_limits_json(w, u);
    mgmt_json_end_obj(w);
}

void mgmt_user_limits_json(mgmt_json *w, const access_user *u)
{
    meta_limit chans = access_user_max_channels(u), conns = access_user_max_connections(u);
    mgmt_json_obj(w);
    if (chans.set)
        mgmt_json_kint(w, "max-channels", chans.value);
    if (conns.set)
        mgmt_json_kint(w, "max-connections", conns.value);
    mgmt_json_end_obj(w);
}

static const access_user *find_user(mgmt_req *r, amqp_bytes name)
{
    char buf[256];
    if (name.len >= sizeof buf || memchr(name.ptr, 0, name.len))
        return NULL;
    snprintf(buf, sizeof buf, "%.*s", (int)name.len, (const char *)name.ptr);
    return access_find_user(server_access(r->s), buf);
}

static bool render_user(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    const access_user *u = find_user(r, it->name);
    if (!u)
        return false;
    user_json(w, u);
    return true;
}

/* ---- lists ------------------------------------------------------------------ */

typedef struct user_walk {
    mgmt_req *r;
    mgmt_list *l;
    bool only_without_permissions;
} user_walk;

static void count_perm(void *arg, const meta_permission *p)
{
    (void)p;
    (*(size_t *)arg)++;
}

static void add_user(void *arg, const access_user *u)
{
    user_walk *uw = arg;
    if (uw->only_without_permissions) {
        size_t n = 0;
        access_foreach_permission(server_access(uw->r->s), access_user_name(u), NULL, count_perm,
                                  &n);
        if (n)
            return;
    }
    mgmt_list_add(uw->l, "", AMQP_CSTR(access_user_name(u)), 0, 0, false);
}

static void list_users(mgmt_req *r, bool only_without_permissions)
{
    user_walk uw = {r, mgmt_list_begin(r), only_without_permissions};
    if (!uw.l)
        return;
    access_foreach_user(server_access(r->s), add_user, &uw);
    mgmt_list_send(r, uw.l, render_user);
}

static void get_users(mgmt_req *r) { list_users(r, false); }
static void get_users_without_permissions(mgmt_req *r) { list_users(r, true); }

/* ---- one user --------------------------------------------------------------- */

static void get_user(mgmt_req *r)
{
    mgmt_list_item it = {.vhost = "", .name = r->cap[0]};
    mgmt_object_send(r, render_user, &it);
}

/* The password fields of a PUT body into `spec`; replies 400 when wrong. */
static bool body_password(mgmt_req *r, json_t *body, access_user_spec *spec)
{
    bool has_pw = json_object_get(body, "password"), has_hash = json_object_get(body, "password_hash");
    if (has_pw && has_hash) {
        mgmt_error(r, 400, "bad_request", "both_password_and_password_hash_are_provided");
        return false;
    }
    if (has_pw)
        return mgmt_body_str(r, body, "password", "", &spec->password);
    spec->password_hash = "";
    if (!has_hash)
        return true;
    if (!mgmt_body_str(r, body, "password_hash", "", &spec->password_hash) ||
        !mgmt_body_str(r, body, "hashing_algorithm", NULL, &spec->hashing_algorithm))
        return false;
    /* RabbitMQ's first check of a hash, before any algorithm's */
    const char *h = spec->password_hash;
    size_t n = strlen(h);
    if (n % 4 || strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != n) {
        mgmt_bad_value(r, "not_base64", json_object_get(body, "password_hash"), NULL);
        return false;
    }
    return true;
}

static void put_user(mgmt_req *r)
{
    char name[256], tags[1024], err[256];
    json_t *body = mgmt_body(r);
    if (!body)
        return;
    if (!json_object_get(body, "tags")) {
        mgmt_error(r, 400, "bad_request", "tags_not_present");
        return;
    }
    access_user_spec spec = {.name = name, .tags = tags};
    if (!mgmt_body_tags(r, body, tags, sizeof tags) || !body_password(r, body, &spec))
        return;
    bool named = mgmt_cap_name(r, 0, name, sizeof name);
    if (!named || !access_validate_user(&spec, err, sizeof err)) {
        mgmt_error(r, 400, "bad_request", named ? err : "invalid user name");
        return;
    }
    bool existed = access_find_user(server_access(r->s), name) != NULL;
    if (!access_put_user(server_access(r->s), &spec, err, sizeof err)) {
        mgmt_error(r, 500, "internal_error", err);
        return;
    }
    mgmt_send_empty(r, existed ? 204 : 201, NULL);
}

static void delete_user(mgmt_req *r)
{
    char name[256], err[256];
    if (!find_user(r, r->cap[0]) || !mgmt_cap_name(r, 0, name, sizeof name)) {
        mgmt_not_found(r);
        return;
    }
    if (!access_delete_user(server_access(r->s), name, err, sizeof err)) {
        mgmt_error(r, 500, "internal_error", err);
        return;
    }
    mgmt_send_empty(r, 204, NULL);
}

/* {"users": [names]}: every name is checked before any is deleted. */
static void post_bulk_delete(mgmt_req *r)
{
    json_t *body = mgmt_body(r), *users, *e;
    size_t i;
    char err[256];
    if (!body)
        return;
    if (!(users = json_object_get(body, "users"))) {
        mgmt_error(r, 400, "bad_request", "[{key_missing,users}]");
        return;
    }
    if (!json_is_array(users)) {
        mgmt_bad_value(r, "not_a_list", users, NULL);
        return;
    }
    json_array_foreach(users, i, e) {
        if (!json_is_string(e) || !access_find_user(server_access(r->s), json_string_value(e))) {
            mgmt_bad_value(r, "no_such_user", e, NULL);
            return;
        }
    }
    json_array_foreach(users, i, e) {
        if (access_find_user(server_access(r->s), json_string_value(e)) && /* listed twice */
            !access_delete_user(server_access(r->s), json_string_value(e), err, sizeof err)) {
            mgmt_error(r, 500, "internal_error", err);
            return;
        }
    }
    mgmt_send_empty(r, 204, NULL);
}

static void send_user_permissions(mgmt_req *r, bool topic)
{
    const access_user *u = find_user(r, r->cap[0]);
    if (!u) {
        mgmt_not_found(r);
        return;
    }
    mgmt_permissions_send(r, access_user_name(u), NULL, topic);
}

static void get_user_permissions(mgmt_req *r) { send_user_permissions(r, false); }
static void get_user_topic_permissions(mgmt_req *r) { send_user_permissions(r, true); }

/* Patterns without a capture first: /api/users/{} would take them. */
const mgmt_route mgmt_user_routes[] = {
    {HTTP_GET, "/api/users", TAG_ADMINISTRATOR, get_users},
    {HTTP_GET, "/api/users/without-permissions", TAG_ADMINISTRATOR,
     get_users_without_permissions},
    {HTTP_POST, "/api/users/bulk-delete", TAG_ADMINISTRATOR, post_bulk_delete},
    {HTTP_GET, "/api/users/{}", TAG_ADMINISTRATOR, get_user},
    {HTTP_PUT, "/api/users/{}", TAG_ADMINISTRATOR, put_user},
    {HTTP_DELETE, "/api/users/{}", TAG_ADMINISTRATOR, delete_user},
    {HTTP_GET, "/api/users/{}/permissions", TAG_ADMINISTRATOR, get_user_permissions},
    {HTTP_GET, "/api/users/{}/topic-permissions", TAG_ADMINISTRATOR,
     get_user_topic_permissions},
    {0},
};
