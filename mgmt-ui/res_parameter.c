/* Runtime parameters: /api/parameters[/{component}[/{vhost}[/{name}]]] and
 * /api/global-parameters[/{name}] -- GET (lists and one), PUT (201 new,
 * 204 replaced) and DELETE (204, 404 unknown). The definitions module says
 * which components Warren takes and checks values (definitions.h,
 * defs_param_*); this file maps that to HTTP as RabbitMQ 3.10.8 answers.
 *
 * Who may do what (rabbit_mgmt_util:is_authorized_policies): a user
 * without management gets 401 "Not management user"; one without the
 * policymaker tag (or administrator) 401 "User not authorised to access
 * object"; a vhost in the path must be one the user has permissions in
 * (same 401), an unknown one is 404 (vhost_not_found on PUT). Lists show
 * the vhosts the user may see. Beyond RabbitMQ: a change to an
 * operator_policy or vhost-limits parameter needs administrator, as
 * /api/operator-policies and /api/vhost-limits do (RabbitMQ 3.10.8 lets any
 * policymaker set them this way, which defeats their purpose).
 *
 * A one-parameter reply is {"value", "vhost", "component", "name"}; a
 * global one {"value", "name"}, listed as {"name", "value"} -- RabbitMQ's
 * key orders. Lists come by vhost, then name (RabbitMQ's order), unless
 * ?sort= says otherwise, and page like the others. A validation failure is 400 with RabbitMQ's text, escaped.
 */
#include <stdio.h>
#include <string.h>

#include "../definitions/definitions.h"
#include "mgmt_int.h"

#define NAME_MAX_BYTES 256 /* parameter names, as AMQP short strings, with the NUL */

static bool policymaker(mgmt_req *r)
{
    if (r->user.tags & (TAG_POLICYMAKER | TAG_ADMINISTRATOR))
        return true;
    mgmt_error(r, 401, "not_authorised", "User not authorised to access object");
    return false;
}

/* The vhost of capture i for a policymaker, or NULL with the reply sent:
 * 404 (RabbitMQ's vhost_not_found on PUT) or 401 when the user may not
 * use it. */
static vhost *target_vhost(mgmt_req *r, int i, bool declare)
{
    vhost *v = server_vhost(r->s, r->cap[i]);
    if (!policymaker(r))
        return NULL;
    if (v && mgmt_vhost_allowed(r, v))
        return v;
    if (v)
        mgmt_error(r, 401, "not_authorised", "User not authorised to access object");
    else if (declare)
        mgmt_error(r, 404, "not_found", "vhost_not_found");
    else
        mgmt_not_found(r);
    return NULL;
}

/* A change to an operator policy or a vhost's limits needs administrator
 * (see the top). */
static bool may_change(mgmt_req *r, const char *component)
{
    int i = defs_param_component(component);
    if ((i != DEFS_OPERATOR_POLICY && i != DEFS_VHOST_LIMITS) ||
        (r->user.tags & TAG_ADMINISTRATOR))
        return true;
    mgmt_error(r, 401, "not_authorised", "Not administrator user");
    return false;
}

/* ---- a vhost's parameters ----------------------------------------------------- */

static void parameter_json(mgmt_json *w, const char *vh, const char *component, const char *name,
                           const json_t *value)
{
    mgmt_json_obj(w);
    mgmt_json_key(w, "value");
    mgmt_json_jansson(w, value);
    mgmt_json_kstr(w, "vhost", vh);
    mgmt_json_kstr(w, "component", component);
    mgmt_json_kstr(w, "name", name);
    mgmt_json_end_obj(w);
}

typedef struct listing {
    mgmt_list *l;
    const char *vhost;
    double rank;       /* the vhost's place in name order */
    bool by_vhost;     /* no ?sort: RabbitMQ's order, by vhost then name */
} listing;

/* The item's id is the component's index (definitions.h). */
static void list_one(void *arg, int component, const char *name)
{
    listing *ls = arg;
    mgmt_list_add(ls->l, ls->vhost, AMQP_CSTR(name), (uint64_t)component, ls->rank, ls->by_vhost);
}

static bool render_parameter(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    char name[NAME_MAX_BYTES];
    const char *component = defs_param_component_name((int)it->id);
    vhost *v = server_vhost(r->s, AMQP_CSTR(it->vhost));
    if (!v || it->name.len >= sizeof name)
        return false;
    snprintf(name, sizeof name, "%.*s", (int)it->name.len, (const char *)it->name.ptr);
    json_t *value = defs_param_value(v, component, name);
    if (!value)
        return false;
    parameter_json(w, it->vhost, component, name, value);
    json_decref(value);
    return true;
}

/* The parameters of `component` (NULL: all but policies) in `only`, or in
 * every vhost the user may see. */
static void send_list(mgmt_req *r, const char *component, vhost *only)
{
    mgmt_list *l = mgmt_list_begin(r);
    if (!l)
        return;
    listing ls = {l, NULL, 0, !mgmt_query(r, "sort")};
    for (vhost *v = server_vhost_next(r->s, NULL); v; v = server_vhost_next(r->s, v)) {
        if (only ? v != only : !mgmt_vhost_allowed(r, v))
            continue;
        ls.vhost = vhost_name(v);
        ls.rank++;
        defs_param_foreach(v, component, list_one, &ls);
    }
    mgmt_list_send(r, l, render_parameter);
}

static void get_all(mgmt_req *r)
{
    if (policymaker(r))
        send_list(r, NULL, NULL);
}

static void get_component(mgmt_req *r)
{
    char component[NAME_MAX_BYTES];
    if (policymaker(r))
        send_list(r, mgmt_cap_str(r, 0, component, sizeof component), NULL);
}

static void get_vhost_component(mgmt_req *r)
{
    char component[NAME_MAX_BYTES];
    vhost *v = target_vhost(r, 1, false);
    if (v)
        send_list(r, mgmt_cap_str(r, 0, component, sizeof component), v);
}

/* The capture's component and name, or false with the 404 sent (a name
 * too long or holding a NUL names nothing). */
static bool names(mgmt_req *r, char *component, char *name)
{
    if (mgmt_cap_name(r, 0, component, NAME_MAX_BYTES) && mgmt_cap_name(r, 2, name, NAME_MAX_BYTES))
        return true;
    mgmt_not_found(r);
    return false;
}

static void get_one(mgmt_req *r)
{
    char component[NAME_MAX_BYTES], name[NAME_MAX_BYTES];
    vhost *v = target_vhost(r, 1, false);
    if (!v || !names(r, component, name))
        return;
    json_t *value = defs_param_value(v, component, name);
    if (!value) {
        mgmt_not_found(r);
        return;
    }
    mgmt_json *w = mgmt_reply(r);
    const char *cols = mgmt_query(r, "columns");
    if (cols)
        mgmt_json_columns(w, cols, 1);
    parameter_json(w, vhost_name(v), component, name, value);
    json_decref(value);
    mgmt_send(r, 200);
}

/* A shovel parameter changed: the shovels follow now, not at their next tick. */
static void shovels_changed(mgmt_req *r, const char *component)
{
    if (strcmp(component, "shovel") == 0 && mgmt_shovels_of(r->m))
        shovels_sync(mgmt_shovels_of(r->m));
}

static void put_one(mgmt_req *r)
{
    char component[NAME_MAX_BYTES], name[NAME_MAX_BYTES], why[4096];
    bool created;
    vhost *v = target_vhost(r, 1, true);
    json_t *value = v ? mgmt_body_value(r) : NULL;
    if (!value)
        return;
    if (!mgmt_cap_name(r, 0, component, sizeof component) ||
        !mgmt_cap_name(r, 2, name, sizeof name)) {
        mgmt_error(r, 400, "bad_request", "invalid parameter name");
        return;
    }
    if (!may_change(r, component))
        return;
    if (!defs_param_validate(component, name, value, why, sizeof why))
        mgmt_error_escaped(r, why);
    else if (!defs_param_put(v, component, name, value, &created, why, sizeof why))
        mgmt_error(r, 500, "internal_error", why);
    else
        mgmt_send_empty(r, created ? 201 : 204, NULL);
    shovels_changed(r, component);
}

static void delete_one(mgmt_req *r)
{
    char component[NAME_MAX_BYTES], name[NAME_MAX_BYTES];
    vhost *v = target_vhost(r, 1, false);
    if (!v || !names(r, component, name) || !may_change(r, component))
        return;
    if (defs_param_delete(v, component, name))
        mgmt_send_empty(r, 204, NULL);
    else
        mgmt_not_found(r);
    shovels_changed(r, component);
}

/* ---- global parameters -------------------------------------------------------- */

static void list_global(void *arg, const param_spec *p)
{
    mgmt_list_add(arg, "", AMQP_CSTR(p->name), 0, 0, false);
}

static bool render_global(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    char name[NAME_MAX_BYTES];
    if (it->name.len >= sizeof name)
        return false;
    snprintf(name, sizeof name, "%.*s", (int)it->name.len, (const char *)it->name.ptr);
    json_t *value = defs_global_param_value(r->s, name);
    if (!value)
        return false;
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "name", name);
    mgmt_json_key(w, "value");
    mgmt_json_jansson(w, value);
    mgmt_json_end_obj(w);
    json_decref(value);
    return true;
}

static void get_globals(mgmt_req *r)
{
    mgmt_list *l = policymaker(r) ? mgmt_list_begin(r) : NULL;
    if (!l)
        return;
    param_foreach(server_params(r->s), NULL, list_global, l);
    mgmt_list_send(r, l, render_global);
}

/* The global parameter's name, or false with the reply sent. */
static bool global_name(mgmt_req *r, char *name)
{
    if (!policymaker(r))
        return false;
    if (mgmt_cap_name(r, 0, name, NAME_MAX_BYTES))
        return true;
    mgmt_not_found(r);
    return false;
}

static void get_global(mgmt_req *r)
{
    char name[NAME_MAX_BYTES];
    if (!global_name(r, name))
        return;
    json_t *value = defs_global_param_value(r->s, name);
    if (!value) {
        mgmt_not_found(r);
        return;
    }
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_obj(w);
    mgmt_json_key(w, "value");
    mgmt_json_jansson(w, value);
    mgmt_json_kstr(w, "name", name);
    mgmt_json_end_obj(w);
    json_decref(value);
    mgmt_send(r, 200);
}

static void put_global(mgmt_req *r)
{
    char name[NAME_MAX_BYTES];
    bool created;
    json_t *value = global_name(r, name) ? mgmt_body_value(r) : NULL;
    if (!value)
        return;
    if (defs_global_param_put(r->s, name, value, &created))
        mgmt_send_empty(r, created ? 201 : 204, NULL);
    else
        mgmt_error(r, 500, "internal_error", "could not store the parameter (see the log)");
}

static void delete_global(mgmt_req *r)
{
    char name[NAME_MAX_BYTES];
    if (!global_name(r, name))
        return;
    if (param_delete(server_params(r->s), NULL, name))
        mgmt_send_empty(r, 204, NULL);
    else
        mgmt_not_found(r);
}

const mgmt_route mgmt_parameter_routes[] = {
    {HTTP_GET, "/api/parameters", TAG_MANAGEMENT, get_all},
    {HTTP_GET, "/api/parameters/{}", TAG_MANAGEMENT, get_component},
    {HTTP_GET, "/api/parameters/{}/{}", TAG_MANAGEMENT, get_vhost_component},
    {HTTP_GET, "/api/parameters/{}/{}/{}", TAG_MANAGEMENT, get_one},
    {HTTP_PUT, "/api/parameters/{}/{}/{}", TAG_MANAGEMENT, put_one},
    {HTTP_DELETE, "/api/parameters/{}/{}/{}", TAG_MANAGEMENT, delete_one},
    {HTTP_GET, "/api/global-parameters", TAG_MANAGEMENT, get_globals},
    {HTTP_GET, "/api/global-parameters/{}", TAG_MANAGEMENT, get_global},
    {HTTP_PUT, "/api/global-parameters/{}", TAG_MANAGEMENT, put_global},
    {HTTP_DELETE, "/api/global-parameters/{}", TAG_MANAGEMENT, delete_global},
    {0},
};
