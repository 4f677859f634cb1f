/* Virtual host writes: PUT /api/vhosts/{name} (201 created, 204 updated),
 * DELETE (204, 404 unknown), and the vhost's permissions and topic
 * permissions lists. The reads (GET one, the list) are in res_overview.c
 * with the other totals.
 *
 * As RabbitMQ 3.10.8: an update replaces the description and tags (absent
 * = ""), keeps the default queue type (only a create sets it, from
 * "defaultqueuetype" -- 3.10's body key -- or "default_queue_type", the
 * field's name everywhere else), and changes tracing only when given. The
 * user who creates a vhost gets ".*" for configure, write and read on it.
 */
#include <stdio.h>
#include <string.h>

#include "mgmt_int.h"

#define FULL_ACCESS ".*"

/* ---- tags ------------------------------------------------------------------ */

/* Appends one tag (spaces around it trimmed; empty ones dropped). */
static bool append_tag(char *out, size_t cap, size_t *len, const char *tag, size_t n)
{
    while (n && *tag == ' ')
        tag++, n--;
    while (n && tag[n - 1] == ' ')
        n--;
    if (!n)
        return true;
    if (n + 2 > cap - *len)
        return false;
    if (*len)
        out[(*len)++] = ',';
    memcpy(out + *len, tag, n);
    *len += n;
    out[*len] = 0;
    return true;
}

bool mgmt_body_tags(mgmt_req *r, json_t *body, char *out, size_t cap)
{
    json_t *v = json_object_get(body, "tags");
    size_t len = 0, i;
    json_t *e;
    bool ok = true;
    out[0] = 0;
    if (!v || json_is_null(v))
        return true;
    if (json_is_string(v)) {
        for (const char *s = json_string_value(v); ok && *s;) {
            size_t n = strcspn(s, ",");
            ok = append_tag(out, cap, &len, s, n);
            s += n + (s[n] == ',');
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, e) {
            if (!json_is_string(e) || strchr(json_string_value(e), ',')) {
                mgmt_bad_value(r, "invalid_tag", e, NULL);
                return false;
            }
            if (ok)
                ok = append_tag(out, cap, &len, json_string_value(e), json_string_length(e));
        }
    } else {
        mgmt_bad_value(r, "invalid_tags", v, NULL);
        return false;
    }
    if (!ok)
        mgmt_errorf(r, 400, "bad_request", "tags longer than %zu bytes", cap - 1);
    return ok;
}

void mgmt_tags_json(mgmt_json *w, const char *key, const char *csv)
{
    mgmt_json_key(w, key);
    mgmt_json_arr(w);
    for (const char *tag = csv ? csv : ""; *tag;) {
        size_t n = strcspn(tag, ",");
        const char *t = tag;
        size_t len = n;
        while (len && *t == ' ')
            t++, len--;
        while (len && t[len - 1] == ' ')
            len--;
        if (len)
            mgmt_json_bytes(w, (amqp_bytes){(const uint8_t *)t, (uint32_t)len});
        tag += n + (tag[n] == ',');
    }
    mgmt_json_end_arr(w);
}

bool mgmt_body_str(mgmt_req *r, json_t *body, const char *key, const char *dflt, const char **out)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return true;
    }
    if (!json_is_string(v)) {
        mgmt_bad_value(r, "not_string", v, NULL);
        return false;
    }
    *out = json_string_value(v);
    return true;
}

/* ---- PUT / DELETE ---------------------------------------------------------- */

/* RabbitMQ's grant to the creator; the control socket's local
 * administrator is no user, so it gets none. */
static void grant_creator(mgmt_req *r, const char *vh)
{
    if (r->user.local)
        return;
    meta_permission p = {r->user.name, vh, FULL_ACCESS, FULL_ACCESS, FULL_ACCESS};
    char err[256];
    if (!access_put_permission(server_access(r->s), &p, err, sizeof err))
        log_msg(LOG_WARNING, "vhost %s: could not grant its creator %s permissions: %s", vh,
                r->user.name, err);
}

/* Kept on an update; on a create 3.10's "defaultqueuetype", else
 * "default_queue_type", else none. */
static bool body_queue_type(mgmt_req *r, json_t *body, vhost *old, const char **out)
{
    if (old) {
        *out = vhost_default_queue_type(old);
        return true;
    }
    return mgmt_body_str(r, body, "default_queue_type", "", out) &&
           mgmt_body_str(r, body, "defaultqueuetype", *out, out);
}

static void put_vhost(mgmt_req *r)
{
    char name[256], tags[1024], err[256];
    json_t *body = mgmt_body(r);
    if (!body)
        return;
    if (!mgmt_cap_name(r, 0, name, sizeof name)) {
        mgmt_error(r, 400, "bad_request", "invalid vhost name");
        return;
    }
    vhost *old = server_vhost(r->s, AMQP_CSTR(name));
    meta_vhost spec = {.name = name, .tags = tags};
    if (!mgmt_body_str(r, body, "description", "", &spec.description) ||
        !mgmt_body_tags(r, body, tags, sizeof tags) ||
        !body_queue_type(r, body, old, &spec.default_queue_type) ||
        !mgmt_body_bool(r, body, "tracing", old && vhost_tracing(old), &spec.tracing))
        return;
    if (!admin_validate_vhost(&spec, err, sizeof err)) {
        mgmt_error(r, 400, "bad_request", err);
        return;
    }
    if (!admin_put_vhost(r->s, &spec, err, sizeof err)) {
        mgmt_error(r, 500, "internal_error", err);
        return;
    }
    if (!old)
        grant_creator(r, name);
    mgmt_send_empty(r, old ? 204 : 201, NULL);
}

static void delete_vhost(mgmt_req *r)
{
    char name[256], err[256];
    if (!mgmt_cap_name(r, 0, name, sizeof name) || !server_vhost(r->s, r->cap[0])) {
        mgmt_not_found(r);
        return;
    }
    if (!admin_delete_vhost(r->s, name, err, sizeof err)) {
        mgmt_error(r, 500, "internal_error", err);
        return;
    }
    mgmt_send_empty(r, 204, NULL);
}

/* ---- the vhost's permissions ----------------------------------------------- */

static void get_vhost_permissions(mgmt_req *r)
{
    char name[256];
    if (!mgmt_vhost_arg(r, 0))
        return;
    mgmt_permissions_send(r, NULL, mgmt_cap_str(r, 0, name, sizeof name), false);
}

static void get_vhost_topic_permissions(mgmt_req *r)
{
    char name[256];
    if (!mgmt_vhost_arg(r, 0))
        return;
    mgmt_permissions_send(r, NULL, mgmt_cap_str(r, 0, name, sizeof name), true);
}

const mgmt_route mgmt_vhost_routes[] = {
    {HTTP_PUT, "/api/vhosts/{}", TAG_ADMINISTRATOR, put_vhost},
    {HTTP_DELETE, "/api/vhosts/{}", TAG_ADMINISTRATOR, delete_vhost},
    {HTTP_GET, "/api/vhosts/{}/permissions", TAG_ADMINISTRATOR, get_vhost_permissions},
    {HTTP_GET, "/api/vhosts/{}/topic-permissions", TAG_ADMINISTRATOR,
     get_vhost_topic_permissions},
    {0},
};
