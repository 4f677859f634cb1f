/* Application of a validated import, section by section in dependency
 * order (vhosts, users, permissions, topic permissions, global parameters,
 * policies, parameters, exchanges, queues, bindings), through the broker's
 * own calls, all inside
 * one meta_begin .. meta_commit: the store gets the whole import with one
 * fsync, or -- after a crash or a failed commit -- none of it.
 *
 * Memory changes at once, so a failure after meta_begin is undone by
 * hand: what the import created (vhosts, exchanges, queues, new policies
 * and parameters) is deleted again and users and permissions are reloaded
 * from the store. Bindings between objects that existed before, and
 * policies and parameters it replaced, stay changed in memory until the
 * next restart (logged): only a store error or out-of-memory gets there,
 * validation having passed.
 *
 * A global internal_cluster_id in the document is not applied: the node
 * keeps its own, so an export imported elsewhere does not give two nodes
 * one id. */
#include <stdio.h>
#include <string.h>

#include "defs_int.h"

#define CLUSTER_ID_PARAM "internal_cluster_id"

/* What the import created, for undo: [kind, vhost, name, component]. */
typedef struct applier {
    defs_ctx *c;
    json_t *created;
    size_t counts[10];
    size_t skipped_amq;
} applier;

enum {
    N_USERS, N_VHOSTS, N_PERMS, N_TOPIC, N_GLOBAL, N_POLICIES, N_PARAMS, N_EXCHANGES, N_QUEUES,
    N_BINDINGS
};

static void created_of(applier *a, const char *kind, const char *vh, const char *name,
                       const char *component)
{
    json_array_append_new(a->created, json_pack("[s,s,s,s]", kind, vh, name, component));
}

static void created(applier *a, const char *kind, const char *vh, const char *name)
{
    created_of(a, kind, vh, name, "");
}

static bool apply_vhosts_users(applier *a)
{
    defs_ctx *c = a->c;
    size_t i;
    json_t *it;
    char what[600], tags[1024], err[512];
    json_array_foreach(defs_section(c, "vhosts"), i, it) {
        meta_vhost v;
        defs_read_vhost(c, it, i, &v, tags, sizeof tags, what, sizeof what);
        if (server_vhost(c->s, AMQP_CSTR(v.name)))
            continue;
        if (!admin_put_vhost(c->s, &v, err, sizeof err))
            return defs_fail(c, "%s: %s", what, err);
        created(a, "vhost", v.name, "");
        a->counts[N_VHOSTS]++;
    }
    json_array_foreach(defs_section(c, "users"), i, it) {
        access_user_spec u;
        defs_read_user(c, it, i, &u, tags, sizeof tags, what, sizeof what);
        if (!access_put_user(server_access(c->s), &u, err, sizeof err))
            return defs_fail(c, "%s: %s", what, err);
        a->counts[N_USERS]++;
    }
    return true;
}

static bool apply_permissions(applier *a)
{
    defs_ctx *c = a->c;
    access_control *ac = server_access(c->s);
    size_t i;
    json_t *it;
    char what[600], err[512];
    json_array_foreach(defs_section(c, "permissions"), i, it) {
        meta_permission p;
        defs_read_permission(c, it, i, &p, what, sizeof what);
        if (!access_put_permission(ac, &p, err, sizeof err))
            return defs_fail(c, "%s: %s", what, err);
        a->counts[N_PERMS]++;
    }
    json_array_foreach(defs_section(c, "topic_permissions"), i, it) {
        meta_topic_permission p;
        defs_read_topic_permission(c, it, i, &p, what, sizeof what);
        if (!access_put_topic_permission(ac, &p, err, sizeof err))
            return defs_fail(c, "%s: %s", what, err);
        a->counts[N_TOPIC]++;
    }
    return true;
}

static bool apply_policies(applier *a)
{
    defs_ctx *c = a->c;
    size_t i;
    json_t *it;
    char what[600], err[512];
    json_array_foreach(defs_section(c, "policies"), i, it) {
        policy_spec p, old;
        const char *vh;
        defs_read_policy(c, it, i, &p, &vh, what, sizeof what);
        vhost *v = server_vhost(c->s, AMQP_CSTR(vh));
        bool existed = policy_get(v, p.name, false, &old);
        if (!policy_put(v, &p, err, sizeof err))
            return defs_fail(c, "%s: %s", what, err);
        if (!existed)
            created(a, "policy", vh, p.name);
        a->counts[N_POLICIES]++;
    }
    return true;
}

static bool apply_parameters(applier *a)
{
    defs_ctx *c = a->c;
    size_t i;
    json_t *it;
    char what[600], err[512];
    json_array_foreach(defs_section(c, "parameters"), i, it) {
        defs_parameter p;
        bool made;
        defs_read_parameter(c, it, i, &p, what, sizeof what);
        vhost *v = server_vhost(c->s, AMQP_CSTR(p.vhost));
        if (!defs_param_put(v, p.component, p.name, p.value, &made, err, sizeof err))
            return defs_fail(c, "%s: %s", what, err);
        if (made)
            created_of(a, "parameter", p.vhost, p.name, p.component);
        a->counts[N_PARAMS]++;
    }
    return true;
}

static bool apply_global_parameters(applier *a)
{
    defs_ctx *c = a->c;
    size_t i;
    json_t *it;
    char what[600];
    json_array_foreach(defs_section(c, "global_parameters"), i, it) {
        defs_parameter p;
        bool made;
        defs_read_global_parameter(c, it, i, &p, what, sizeof what);
        if (strcmp(p.name, CLUSTER_ID_PARAM) == 0) {
            log_msg(LOG_INFO, "definitions: kept this node's own %s", CLUSTER_ID_PARAM);
            continue;
        }
        if (!defs_global_param_put(c->s, p.name, p.value, &made))
            return defs_fail(c, "%s: the store refused it (see the log)", what);
        if (made)
            created(a, "global", "", p.name);
        a->counts[N_GLOBAL]++;
    }
    return true;
}

static bool apply_exchanges(applier *a)
{
    defs_ctx *c = a->c;
    size_t i;
    json_t *it;
    char what[600];
    json_array_foreach(defs_section(c, "exchanges"), i, it) {
        route_exchange_spec x;
        const char *vh;
        defs_read_exchange(c, it, i, &x, &vh, what, sizeof what);
        vhost *v = server_vhost(c->s, AMQP_CSTR(vh));
        if (x.name.len >= 4 && memcmp(x.name.ptr, "amq.", 4) == 0) {
            a->skipped_amq++; /* RabbitMQ skips them too: they are the broker's */
            continue;
        }
        if (route_exchange_find(vhost_routes(v), x.name))
            continue;
        amqp_error err = {0};
        if (admin_exchange_declare(v, &x, &err) != AMQP_OK)
            return defs_fail(c, "%s: %s", what, err.text);
        created(a, "exchange", vh, (const char *)x.name.ptr);
        a->counts[N_EXCHANGES]++;
    }
    return true;
}

static bool apply_queues(applier *a)
{
    defs_ctx *c = a->c;
    size_t i;
    json_t *it;
    char what[600];
    json_array_foreach(defs_section(c, "queues"), i, it) {
        queue_spec q;
        const char *vh;
        defs_read_queue(c, it, i, &q, &vh, what, sizeof what);
        vhost *v = server_vhost(c->s, AMQP_CSTR(vh));
        if (vhost_queue_find(v, q.name))
            continue;
        queue *made;
        amqp_error err = {0};
        if (admin_queue_declare(v, &q, &made, &err) != AMQP_OK)
            return defs_fail(c, "%s: %s", what, err.text);
        created(a, "queue", vh, (const char *)q.name.ptr);
        /* the declare logs a refused store write and goes on; an import
         * must not commit without the row */
        if (queue_durable(made) && !queue_store_id(made))
            return defs_fail(c, "%s: the store refused it (see the log)", what);
        a->counts[N_QUEUES]++;
    }
    return true;
}

static bool apply_bindings(applier *a)
{
    defs_ctx *c = a->c;
    size_t i;
    json_t *it;
    char what[600];
    json_array_foreach(defs_section(c, "bindings"), i, it) {
        defs_binding b;
        defs_read_binding(c, it, i, &b, what, sizeof what);
        vhost *v = server_vhost(c->s, AMQP_CSTR(b.vhost));
        amqp_error err = {0};
        if (admin_bind(v, AMQP_CSTR(b.source), b.to_queue, AMQP_CSTR(b.destination),
                       AMQP_CSTR(b.routing_key), b.arguments, true, &err) != AMQP_OK)
            return defs_fail(c, "%s: %s", what, err.text);
        a->counts[N_BINDINGS]++;
    }
    return true;
}

/* Deletes what the failed import created, newest first (queues before
 * their vhost), and reloads users and permissions from the store. */
static void undo(applier *a)
{
    server *s = a->c->s;
    for (size_t i = json_array_size(a->created); i-- > 0;) {
        const char *kind, *vh, *name, *component;
        if (json_unpack(json_array_get(a->created, i), "[ssss]", &kind, &vh, &name,
                        &component) != 0)
            continue;
        if (strcmp(kind, "global") == 0) {
            param_delete(server_params(s), NULL, name);
            continue;
        }
        vhost *v = server_vhost(s, AMQP_CSTR(vh));
        amqp_error err = {0};
        char why[512];
        if (!v)
            continue;
        if (strcmp(kind, "queue") == 0)
            admin_queue_delete(v, AMQP_CSTR(name), false, false, &err);
        else if (strcmp(kind, "exchange") == 0)
            admin_exchange_delete(v, AMQP_CSTR(name), false, &err);
        else if (strcmp(kind, "policy") == 0)
            policy_delete(v, name, false);
        else if (strcmp(kind, "parameter") == 0)
            defs_param_delete(v, component, name);
        else
            admin_delete_vhost(s, vh, why, sizeof why);
    }
    access_reload(server_access(s));
    log_msg(LOG_WARNING, "definitions import undone; bindings, and policies and parameters it "
                         "replaced, stay changed in memory until the next restart");
}

bool defs_apply(defs_ctx *c)
{
    meta *m = server_meta(c->s);
    applier a = {.c = c, .created = json_array()};
    if (!a.created)
        return defs_fail(c, "out of memory");
    if (!meta_begin(m)) {
        json_decref(a.created);
        return defs_fail(c, "the metadata store could not begin a transaction (see the log)");
    }
    log_msg(LOG_INFO, "definitions: validated; applying them in one transaction");
    bool ok = (c->only ||
               (apply_vhosts_users(&a) && apply_permissions(&a) && apply_global_parameters(&a))) &&
              apply_policies(&a) && apply_parameters(&a) && apply_exchanges(&a) &&
              apply_queues(&a) && apply_bindings(&a);
    if (!ok)
        meta_rollback(m);
    else if (!meta_commit(m))
        ok = defs_fail(c, "the metadata store could not commit the import (see the log)");
    if (!ok)
        undo(&a);
    else
        log_msg(LOG_INFO,
                "imported definitions: %zu users, %zu vhosts, %zu permissions, %zu topic "
                "permissions, %zu global parameters, %zu policies, %zu parameters, %zu "
                "exchanges, %zu queues, %zu bindings",
                a.counts[N_USERS], a.counts[N_VHOSTS], a.counts[N_PERMS], a.counts[N_TOPIC],
                a.counts[N_GLOBAL], a.counts[N_POLICIES], a.counts[N_PARAMS],
                a.counts[N_EXCHANGES], a.counts[N_QUEUES], a.counts[N_BINDINGS]);
    if (a.skipped_amq)
        log_msg(LOG_WARNING, "definitions: skipped %zu exchanges named amq.* (reserved)",
                a.skipped_amq);
    json_decref(a.created);
    return ok;
}
