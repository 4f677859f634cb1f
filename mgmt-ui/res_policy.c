/* Policies and operator policies: /api/policies[/{vhost}[/{name}]] and
 * /api/operator-policies[/{vhost}[/{name}]] -- GET (the lists and one),
 * PUT (201 new, 204 replaced) and DELETE (204, 404 unknown). The broker's
 * policy engine (queue/queue.h policy_*) validates, stores and applies them;
 * this file turns the JSON body into a policy_spec and back.
 *
 * Who may do what, as RabbitMQ 3.10.8 decides it: the lists show the
 * policies of the vhosts the user may see (any management user); one
 * policy -- read, put or delete -- needs the policymaker tag (or
 * administrator) and permissions in its vhost, else 401 "User not
 * authorised to access object"; one operator policy needs administrator.
 *
 * A PUT body needs "pattern" and "definition" ("[{key_missing,pattern}]"),
 * takes "priority" (a number, default 0) and "apply-to" (default "all")
 * and ignores other keys. Validation errors are RabbitMQ's text, with its
 * HTML escaping of < and > (it escapes every bad_request reason).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../definitions/definitions.h"
#include "mgmt_int.h"

#define DEFINITION_MAX (64 * 1024)

static void policy_json(mgmt_json *w, const char *vh, const policy_spec *p)
{
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "vhost", vh);
    mgmt_json_kstr(w, "name", p->name);
    mgmt_json_kstr(w, "pattern", p->pattern);
    mgmt_json_kstr(w, "apply-to", p->apply_to ? p->apply_to : "all");
    mgmt_json_key(w, "definition");
    mgmt_json_table(w, p->definition);
    mgmt_json_kint(w, "priority", p->priority);
    mgmt_json_end_obj(w);
}

typedef struct listing {
    mgmt_list *l;
    const char *vhost;
    bool by_priority;
} listing;

static void list_one(void *arg, const policy_spec *p)
{
    listing *l = arg;
    mgmt_list_add(l->l, l->vhost, AMQP_CSTR(p->name), 0, p->priority, l->by_priority);
}

static bool render(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it, bool op)
{
    char name[256];
    policy_spec p;
    vhost *v = server_vhost(r->s, AMQP_CSTR(it->vhost));
    if (!v || it->name.len >= sizeof name)
        return false;
    memcpy(name, it->name.ptr, it->name.len);
    name[it->name.len] = 0;
    if (!policy_get(v, name, op, &p))
        return false;
    policy_json(w, it->vhost, &p);
    return true;
}

static bool render_policy(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    return render(r, w, it, false);
}

static bool render_operator_policy(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    return render(r, w, it, true);
}

/* The policies of `only` (or of every vhost the user may see) as the
 * reply, by priority unless ?sort= says otherwise (RabbitMQ's order). */
static void send_list(mgmt_req *r, vhost *only, bool op)
{
    const char *sort = mgmt_query(r, "sort");
    mgmt_list *l = mgmt_list_begin(r);
    if (!l)
        return;
    listing ls = {l, NULL, !sort || strcmp(sort, "priority") == 0};
    for (vhost *v = server_vhost_next(r->s, NULL); v; v = server_vhost_next(r->s, v)) {
        if (only ? v != only : !mgmt_vhost_allowed(r, v))
            continue;
        ls.vhost = vhost_name(v);
        policy_foreach(v, op, list_one, &ls);
    }
    mgmt_list_send(r, l, op ? render_operator_policy : render_policy);
}

static void get_policies(mgmt_req *r) { send_list(r, NULL, false); }
static void get_operator_policies(mgmt_req *r) { send_list(r, NULL, true); }

static void get_vhost_policies(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (v)
        send_list(r, v, false);
}

static void get_vhost_operator_policies(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (v)
        send_list(r, v, true);
}

/* ---- one policy ------------------------------------------------------------ */

/* The vhost of /api/[operator-]policies/{vhost}/{name}, or NULL with the
 * reply sent. An operator policy's route already required administrator;
 * a policy needs policymaker and permissions in the vhost (RabbitMQ checks
 * both before it looks the vhost up, and lets an unknown vhost through to
 * its 404). */
static vhost *target_vhost(mgmt_req *r, bool op, bool declare)
{
    bool maker = r->user.tags & (TAG_POLICYMAKER | TAG_ADMINISTRATOR);
    vhost *v = server_vhost(r->s, r->cap[0]);
    if (!op && (!maker || (v && !mgmt_vhost_allowed(r, v)))) {
        mgmt_error(r, 401, "not_authorised", "User not authorised to access object");
        return NULL;
    }
    if (!v) {
        if (declare)
            mgmt_error(r, 404, "not_found", "vhost_not_found");
        else
            mgmt_not_found(r);
    }
    return v;
}

static void get_one(mgmt_req *r, bool op)
{
    char name[256];
    policy_spec p;
    vhost *v = target_vhost(r, op, false);
    if (!v)
        return;
    if (!mgmt_cap_name(r, 1, name, sizeof name) || !policy_get(v, name, op, &p)) {
        mgmt_not_found(r);
        return;
    }
    mgmt_json *w = mgmt_reply(r);
    const char *cols = mgmt_query(r, "columns");
    if (cols)
        mgmt_json_columns(w, cols, 1);
    policy_json(w, vhost_name(v), &p);
    mgmt_send(r, 200);
}

static void delete_one(mgmt_req *r, bool op)
{
    char name[256];
    vhost *v = target_vhost(r, op, false);
    if (!v)
        return;
    if (!mgmt_cap_name(r, 1, name, sizeof name) || !policy_delete(v, name, op)) {
        mgmt_not_found(r);
        return;
    }
    mgmt_send_empty(r, 204, NULL);
}

/* ---- PUT --------------------------------------------------------------------- */

void mgmt_error_escaped(mgmt_req *r, const char *text)
{
    char out[4096];
    size_t n = 0;
    for (const char *c = text; *c && n + 5 < sizeof out; c++) {
        const char *rep = *c == '<' ? "&lt;" : *c == '>' ? "&gt;" : NULL;
        if (rep) {
            memcpy(out + n, rep, 4);
            n += 4;
        } else {
            out[n++] = *c;
        }
    }
    out[n] = 0;
    mgmt_error(r, 400, "bad_request", out);
}

/* "[{key_missing,pattern},{key_missing,definition}]" for absent keys. */
static bool required_keys(mgmt_req *r, json_t *body)
{
    static const char *const keys[] = {"pattern", "definition"};
    char missing[128] = "";
    size_t len = 0;
    for (int i = 0; i < 2; i++)
        if (!json_object_get(body, keys[i]))
            len += (size_t)snprintf(missing + len, sizeof missing - len, "%s{key_missing,%s}",
                                    len ? "," : "", keys[i]);
    if (len)
        mgmt_errorf(r, 400, "bad_request", "[%s]", missing);
    return len == 0;
}

/* Fills spec from the body; replies 400 and returns false on a problem. */
static bool parse_body(mgmt_req *r, json_t *body, policy_spec *spec, uint8_t *buf, size_t cap)
{
    char why[512] = "", term[256], text[4096];
    if (!required_keys(r, body))
        return false;
    json_t *pattern = json_object_get(body, "pattern"), *def = json_object_get(body, "definition");
    if (!json_is_string(pattern)) {
        defs_erlang_term(pattern, term, sizeof term);
        snprintf(text, sizeof text, "Validation failed\n\npattern should be a binary but was %s\n",
                 term);
        mgmt_error_escaped(r, text);
        return false;
    }
    if (!json_is_object(def)) { /* RabbitMQ crashes (500) here */
        mgmt_error(r, 400, "bad_request", "Validation failed\n\ndefinition must be a dictionary\n");
        return false;
    }
    const char *apply_to;
    if (!mgmt_body_str(r, body, "apply-to", "all", &apply_to) ||
        !mgmt_body_table(r, body, "definition", buf, cap, &spec->definition))
        return false;
    /* Warren keeps an integer priority, so a fraction is refused where
     * RabbitMQ keeps it; the message goes after the broker's (RabbitMQ
     * checks priority last) */
    bool prio_ok = defs_json_priority(json_object_get(body, "priority"), &spec->priority, why,
                                      sizeof why);
    spec->pattern = json_string_value(pattern);
    spec->apply_to = apply_to;
    bool valid = policy_validate(spec, text, sizeof text - sizeof why);
    if (valid && prio_ok)
        return true;
    if (valid)
        snprintf(text, sizeof text, "Validation failed\n\n");
    strncat(text, why, sizeof text - strlen(text) - 1);
    mgmt_error_escaped(r, text);
    return false;
}

static void put_one(mgmt_req *r, bool op)
{
    char name[256], err[4096];
    vhost *v = target_vhost(r, op, true);
    json_t *body = v ? mgmt_body(r) : NULL;
    if (!body)
        return;
    if (!mgmt_cap_name(r, 1, name, sizeof name)) {
        mgmt_error(r, 400, "bad_request", "invalid policy name");
        return;
    }
    uint8_t *buf = malloc(DEFINITION_MAX);
    if (!buf) {
        mgmt_error(r, 500, "internal_error", "out of memory");
        return;
    }
    policy_spec spec = {.name = name, .operator_policy = op};
    policy_spec old;
    if (parse_body(r, body, &spec, buf, DEFINITION_MAX)) {
        bool existed = policy_get(v, name, op, &old);
        if (policy_put(v, &spec, err, sizeof err))
            mgmt_send_empty(r, existed ? 204 : 201, NULL);
        else if (strncmp(err, "Validation failed", 17) == 0)
            mgmt_error_escaped(r, err);
        else
            mgmt_error(r, 500, "internal_error", err);
    }
    free(buf);
}

static void get_policy(mgmt_req *r) { get_one(r, false); }
static void put_policy(mgmt_req *r) { put_one(r, false); }
static void delete_policy(mgmt_req *r) { delete_one(r, false); }
static void get_operator_policy(mgmt_req *r) { get_one(r, true); }
static void put_operator_policy(mgmt_req *r) { put_one(r, true); }
static void delete_operator_policy(mgmt_req *r) { delete_one(r, true); }

const mgmt_route mgmt_policy_routes[] = {
    {HTTP_GET, "/api/policies", TAG_MANAGEMENT, get_policies},
    {HTTP_GET, "/api/policies/{}", TAG_MANAGEMENT, get_vhost_policies},
    {HTTP_GET, "/api/policies/{}/{}", TAG_MANAGEMENT, get_policy},
    {HTTP_PUT, "/api/policies/{}/{}", TAG_MANAGEMENT, put_policy},
    {HTTP_DELETE, "/api/policies/{}/{}", TAG_MANAGEMENT, delete_policy},
    {HTTP_GET, "/api/operator-policies", TAG_MANAGEMENT, get_operator_policies},
    {HTTP_GET, "/api/operator-policies/{}", TAG_MANAGEMENT, get_vhost_operator_policies},
    {HTTP_GET, "/api/operator-policies/{}/{}", TAG_ADMINISTRATOR, get_operator_policy},
    {HTTP_PUT, "/api/operator-policies/{}/{}", TAG_ADMINISTRATOR, put_operator_policy},
    {HTTP_DELETE, "/api/operator-policies/{}/{}", TAG_ADMINISTRATOR,
     delete_operator_policy},
    {0},
};
