/* Permissions and topic permissions: /api/permissions[/{vhost}/{user}]
 * and /api/topic-permissions[/{vhost}/{user}] (GET, PUT 201 / 204,
 * DELETE 204 / 404), and the lists other families show for one user or
 * one vhost (mgmt_permissions_send).
 *
 * As RabbitMQ 3.10.8: a PUT needs every regex field ("[{key_missing,write}]"
 * otherwise) and an existing user and vhost ("vhost_or_user_not_found");
 * topic permissions are one row per exchange, the (vhost, user) resource
 * exists while it has any, and DELETE removes all of them, or with a third
 * segment (.../{user}/{exchange}) that exchange's row only (204 also when
 * it has none). GET and PUT ignore a third segment, as 3.10.8 does.
 */
#include <stdio.h>
#include <string.h>

#include "mgmt_int.h"

typedef struct perm_list {
    mgmt_json *w;
    size_t n;
} perm_list;

static void perm_json(void *arg, const meta_permission *p)
{
    perm_list *pl = arg;
    mgmt_json_obj(pl->w);
    mgmt_json_kstr(pl->w, "user", p->user);
    mgmt_json_kstr(pl->w, "vhost", p->vhost);
    mgmt_json_kstr(pl->w, "configure", p->configure);
    mgmt_json_kstr(pl->w, "write", p->write);
    mgmt_json_kstr(pl->w, "read", p->read);
    mgmt_json_end_obj(pl->w);
    pl->n++;
}

static void topic_perm_json(void *arg, const meta_topic_permission *p)
{
    perm_list *pl = arg;
    mgmt_json_obj(pl->w);
    mgmt_json_kstr(pl->w, "user", p->user);
    mgmt_json_kstr(pl->w, "vhost", p->vhost);
    mgmt_json_kstr(pl->w, "exchange", p->exchange);
    mgmt_json_kstr(pl->w, "write", p->write);
    mgmt_json_kstr(pl->w, "read", p->read);
    mgmt_json_end_obj(pl->w);
    pl->n++;
}

void mgmt_permissions_send(mgmt_req *r, const char *user, const char *vh, bool topic)
{
    perm_list pl = {mgmt_reply(r), 0};
    const char *cols = mgmt_query(r, "columns");
    if (cols)
        mgmt_json_columns(pl.w, cols, 1);
    mgmt_json_arr(pl.w);
    if (topic)
        access_foreach_topic_permission(server_access(r->s), user, vh, topic_perm_json, &pl);
    else
        access_foreach_permission(server_access(r->s), user, vh, perm_json, &pl);
    mgmt_json_end_arr(pl.w);
    mgmt_send(r, 200);
}

static void get_permissions(mgmt_req *r) { mgmt_permissions_send(r, NULL, NULL, false); }
static void get_topic_permissions(mgmt_req *r) { mgmt_permissions_send(r, NULL, NULL, true); }

/* ---- one (vhost, user) -------------------------------------------------------- */

typedef struct target {
    char vhost[256], user[256];
} target;

/* The (vhost, user) of the path; a name that cannot be one is "". */
static void target_of(mgmt_req *r, target *t)
{
    if (!mgmt_cap_name(r, 0, t->vhost, sizeof t->vhost) ||
        !mgmt_cap_name(r, 1, t->user, sizeof t->user))
        t->vhost[0] = t->user[0] = 0;
}

static bool user_and_vhost_exist(mgmt_req *r, const target *t)
{
    return t->user[0] && server_vhost(r->s, AMQP_CSTR(t->vhost)) &&
           access_find_user(server_access(r->s), t->user);
}

/* The regex fields of a PUT body, RabbitMQ's "[{key_missing,F},...]" when
 * some are absent. */
static bool body_regexes(mgmt_req *r, json_t *body, const char *const *keys, const char **out,
                         int n)
{
    char missing[256] = "";
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        json_t *v = json_object_get(body, keys[i]);
        if (!v) {
            len += (size_t)snprintf(missing + len, sizeof missing - len, "%s{key_missing,%s}",
                                    len ? "," : "", keys[i]);
            continue;
        }
        if (!json_is_string(v)) {
            mgmt_bad_value(r, "not_string", v, NULL);
            return false;
        }
        out[i] = json_string_value(v);
    }
    if (len)
        mgmt_errorf(r, 400, "bad_request", "[%s]", missing);
    return len == 0;
}

static bool has_permission(mgmt_req *r, const target *t)
{
    return t->user[0] && access_find_perms(server_access(r->s), AMQP_CSTR(t->user), AMQP_CSTR(t->vhost));
}

static void get_permission(mgmt_req *r)
{
    target t;
    target_of(r, &t);
    if (!has_permission(r, &t)) {
        mgmt_not_found(r);
        return;
    }
    perm_list pl = {mgmt_reply(r), 0};
    access_foreach_permission(server_access(r->s), t.user, t.vhost, perm_json, &pl);
    mgmt_send(r, 200);
}

static void put_permission(mgmt_req *r)
{
    static const char *const keys[] = {"configure", "write", "read"};
    const char *re[3];
    target t;
    char err[512];
    json_t *body = mgmt_body(r);
    if (!body || !body_regexes(r, body, keys, re, 3))
        return;
    target_of(r, &t);
    meta_permission p = {t.user, t.vhost, re[0], re[1], re[2]};
    if (!access_validate_permission(&p, err, sizeof err)) {
        mgmt_error(r, 400, "bad_request", err);
        return;
    }
    if (!user_and_vhost_exist(r, &t)) {
        mgmt_error(r, 400, "bad_request", "vhost_or_user_not_found");
        return;
    }
    bool existed = has_permission(r, &t);
    if (!access_put_permission(server_access(r->s), &p, err, sizeof err)) {
        mgmt_error(r, 500, "internal_error", err);
        return;
    }
    mgmt_send_empty(r, existed ? 204 : 201, NULL);
}

static void delete_permission(mgmt_req *r)
{
    target t;
    char err[256];
    target_of(r, &t);
    if (!has_permission(r, &t)) {
        mgmt_not_found(r);
        return;
    }
    if (!access_clear_permission(server_access(r->s), t.user, t.vhost, err, sizeof err)) {
        mgmt_error(r, 500, "internal_error", err);
        return;
    }
    mgmt_send_empty(r, 204, NULL);
}

/* ---- topic permissions of one (vhost, user) ---------------------------------- */

static void count_row(void *arg, const meta_topic_permission *p)
{
    (void)p;
    (*(size_t *)arg)++;
}

static bool has_topic_permissions(mgmt_req *r, const target *t)
{
    size_t n = 0;
    if (t->user[0])
        access_foreach_topic_permission(server_access(r->s), t->user, t->vhost, count_row, &n);
    return n > 0;
}

static void get_topic_permission(mgmt_req *r)
{
    target t;
    target_of(r, &t);
    if (!has_topic_permissions(r, &t)) {
        mgmt_not_found(r);
        return;
    }
    mgmt_permissions_send(r, t.user, t.vhost, true);
}

static void put_topic_permission(mgmt_req *r)
{
    static const char *const keys[] = {"exchange", "write", "read"};
    const char *f[3];
    target t;
    char err[512];
    json_t *body = mgmt_body(r);
    if (!body)
        return;
    if (!json_object_get(body, "exchange")) { /* RabbitMQ names the exchange alone first */
        mgmt_error(r, 400, "bad_request", "[{key_missing,exchange}]");
        return;
    }
    if (!body_regexes(r, body, keys, f, 3))
        return;
    target_of(r, &t);
    meta_topic_permission p = {t.user, t.vhost, f[0], f[1], f[2]};
    if (!access_validate_topic_permission(&p, err, sizeof err)) {
        mgmt_error(r, 400, "bad_request", err);
        return;
    }
    if (!user_and_vhost_exist(r, &t)) {
        mgmt_error(r, 400, "bad_request", "vhost_or_user_not_found");
        return;
    }
    bool existed = has_topic_permissions(r, &t);
    if (!access_put_topic_permission(server_access(r->s), &p, err, sizeof err)) {
        mgmt_error(r, 500, "internal_error", err);
        return;
    }
    mgmt_send_empty(r, existed ? 204 : 201, NULL);
}

typedef struct exchange_rows {
    const char *exchange;
    size_t n;
} exchange_rows;

static void count_exchange_row(void *arg, const meta_topic_permission *p)
{
    exchange_rows *x = arg;
    x->n += strcmp(p->exchange, x->exchange) == 0;
}

static void delete_topic_permission(mgmt_req *r)
{
    target t;
    char err[256], exchange[256];
    target_of(r, &t);
    if (!has_topic_permissions(r, &t)) {
        mgmt_not_found(r);
        return;
    }
    exchange_rows x = {NULL, 0};
    if (r->ncap > 2) {
        x.exchange = mgmt_cap_str(r, 2, exchange, sizeof exchange);
        access_foreach_topic_permission(server_access(r->s), t.user, t.vhost, count_exchange_row, &x);
        if (x.n == 0) {
            mgmt_send_empty(r, 204, NULL);
            return;
        }
    }
    if (!access_clear_topic_permission(server_access(r->s), t.user, t.vhost, x.exchange, err,
                                       sizeof err)) {
        mgmt_error(r, 500, "internal_error", err);
        return;
    }
    mgmt_send_empty(r, 204, NULL);
}

const mgmt_route mgmt_permission_routes[] = {
    {HTTP_GET, "/api/permissions", TAG_ADMINISTRATOR, get_permissions},
    {HTTP_GET, "/api/permissions/{}/{}", TAG_ADMINISTRATOR, get_permission},
    {HTTP_PUT, "/api/permissions/{}/{}", TAG_ADMINISTRATOR, put_permission},
    {HTTP_DELETE, "/api/permissions/{}/{}", TAG_ADMINISTRATOR, delete_permission},
    {HTTP_GET, "/api/topic-permissions", TAG_ADMINISTRATOR, get_topic_permissions},
    {HTTP_GET, "/api/topic-permissions/{}/{}", TAG_ADMINISTRATOR, get_topic_permission},
    {HTTP_PUT, "/api/topic-permissions/{}/{}", TAG_ADMINISTRATOR, put_topic_permission},
    {HTTP_DELETE, "/api/topic-permissions/{}/{}", TAG_ADMINISTRATOR,
     delete_topic_permission},
    {HTTP_GET, "/api/topic-permissions/{}/{}/{}", TAG_ADMINISTRATOR, get_topic_permission},
    {HTTP_PUT, "/api/topic-permissions/{}/{}/{}", TAG_ADMINISTRATOR, put_topic_permission},
    {HTTP_DELETE, "/api/topic-permissions/{}/{}/{}", TAG_ADMINISTRATOR,
     delete_topic_permission},
    {0},
};
