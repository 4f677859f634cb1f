/* The cluster's status as the management API shows it: /api/cluster's
 * object and the node objects /api/nodes lists, built here once so that
 * the leader's management plane (mgmt-ui/) and a follower's own status
 * server (status_http.c) give the same shape. Names are the API's
 * (server_cluster_node_name). Lag is the leader's view: a follower does
 * not know the others' (null there), nor whether confirms are held.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cluster_int.h"

static json_t *api_name(const char *node)
{
    char name[160];
    server_cluster_node_name(node, name, sizeof name);
    return json_string(name);
}

static bool listed(const cluster_status *st, const char *name)
{
    for (unsigned i = 0; i < st->n_nodes; i++)
        if (strcmp(st->nodes[i].name, name) == 0)
            return true;
    return false;
}

static bool in_isr(const cluster_status *st, const char *name)
{
    for (unsigned i = 0; i < st->n_isr; i++)
        if (strcmp(st->isr[i], name) == 0)
            return true;
    return false;
}

/* The lag fields of node `n` (NULL: an ISR member without a record), as
 * far as this node knows them. */
static void lag_fields(json_t *o, const cluster_status *st, const cluster_node_status *n,
                       const char *name, const char *bytes_key, const char *ms_key)
{
    bool me = strcmp(name, st->node_name) == 0;
    bool leads = strcmp(name, st->leader) == 0;
    bool view = st->leader_view && n && n->connected;
    json_object_set_new(o, "acked_sequence", me     ? json_integer((json_int_t)st->synced_seq)
                                             : view ? json_integer((json_int_t)n->acked_seq)
                                                    : json_null());
    bool known = (leads && st->leader_view) || view;
    json_object_set_new(o, bytes_key, !known ? json_null()
                                      : json_integer(leads ? 0 : (json_int_t)n->lag_bytes));
    json_object_set_new(o, ms_key, !known ? json_null()
                                   : json_integer(leads ? 0 : (json_int_t)n->lag_ms));
}

static const char *role_of(const cluster_status *st, const char *name)
{
    if (strcmp(name, st->node_name) == 0)
        return cluster_role_name(st->role);
    return strcmp(name, st->leader) == 0 ? "leader" : "follower";
}

static json_t *cluster_node(const cluster_status *st, const cluster_node_status *n,
                            const char *name)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", api_name(name));
    json_object_set_new(o, "host", n ? json_string(n->host) : json_null());
    json_object_set_new(o, "replication_port", n ? json_integer(n->replication_port) : json_null());
    json_object_set_new(o, "alive", json_boolean(n && n->alive));
    json_object_set_new(o, "role", json_string(role_of(st, name)));
    json_object_set_new(o, "in_sync", json_boolean(in_isr(st, name)));
    if (st->leader_view && strcmp(name, st->leader) != 0) {
        json_object_set_new(o, "connected", json_boolean(n && n->connected));
        json_object_set_new(o, "snapshot_done", json_boolean(n && n->snapshot_done));
    }
    lag_fields(o, st, n, name, "lag_bytes", "lag_ms");
    return o;
}

json_t *cluster_status_json(const cluster_status *st)
{
    json_t *o = json_object(), *isr = json_array(), *nodes = json_array();
    json_object_set_new(o, "cluster_name", json_string(st->cluster_name));
    json_object_set_new(o, "node", api_name(st->node_name));
    json_object_set_new(o, "role", json_string(cluster_role_name(st->role)));
    json_object_set_new(o, "leader", *st->leader ? api_name(st->leader) : json_null());
    json_object_set_new(o, "epoch", json_integer(st->epoch));
    json_object_set_new(o, "min_isr", json_integer(st->min_isr));
    json_object_set_new(o, "isr_size", json_integer(st->n_isr));
    bool view = st->leader_view;
    json_object_set_new(o, "confirms_held", view ? json_boolean(st->confirms_held) : json_null());
    json_object_set_new(o, "synced_sequence", json_integer((json_int_t)st->synced_seq));
    json_object_set_new(o, "replicated_sequence",
                        view ? json_integer((json_int_t)st->replicated_seq) : json_null());
    for (unsigned i = 0; i < st->n_isr; i++)
        json_array_append_new(isr, api_name(st->isr[i]));
    json_object_set_new(o, "isr", isr);
    for (unsigned i = 0; i < st->n_nodes; i++)
        json_array_append_new(nodes, cluster_node(st, &st->nodes[i], st->nodes[i].name));
    for (unsigned i = 0; i < st->n_isr; i++)
        if (!listed(st, st->isr[i]))
            json_array_append_new(nodes, cluster_node(st, NULL, st->isr[i]));
    json_object_set_new(o, "nodes", nodes);
    return o;
}

/* A node as /api/nodes shows it: RabbitMQ's name, type and running, and
 * Warren's cluster fields. */
static json_t *api_node(const cluster_status *st, const cluster_node_status *n, const char *name)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", api_name(name));
    json_object_set_new(o, "type", json_string("disc"));
    json_object_set_new(o, "running", json_boolean((n && n->alive) ||
                                                   strcmp(name, st->node_name) == 0));
    json_object_set_new(o, "cluster_role", json_string(role_of(st, name)));
    json_object_set_new(o, "in_sync", json_boolean(in_isr(st, name)));
    lag_fields(o, st, n, name, "replication_lag_bytes", "replication_lag_ms");
    return o;
}

json_t *cluster_nodes_json(const cluster_status *st)
{
    json_t *a = json_array();
    bool me_listed = listed(st, st->node_name);
    if (!me_listed) /* its record is not read back yet */
        json_array_append_new(a, api_node(st, NULL, st->node_name));
    for (unsigned i = 0; i < st->n_nodes; i++)
        json_array_append_new(a, api_node(st, &st->nodes[i], st->nodes[i].name));
    for (unsigned i = 0; i < st->n_isr; i++)
        if (!listed(st, st->isr[i]) && strcmp(st->isr[i], st->node_name) != 0)
            json_array_append_new(a, api_node(st, NULL, st->isr[i]));
    return a;
}

/* ---- the leader's view through etcd ---------------------------------------- */

char *cluster_view_encode(const cluster_status *st)
{
    json_t *o = json_object(), *nodes = json_object();
    json_object_set_new(o, "epoch", json_integer(st->epoch));
    json_object_set_new(o, "confirms_held", json_boolean(st->confirms_held));
    json_object_set_new(o, "synced", json_integer((json_int_t)st->synced_seq));
    json_object_set_new(o, "replicated", json_integer((json_int_t)st->replicated_seq));
    for (unsigned i = 0; i < st->n_nodes; i++) {
        const cluster_node_status *n = &st->nodes[i];
        if (!n->connected)
            continue;
        json_t *v = json_object();
        json_object_set_new(v, "snapshot_done", json_boolean(n->snapshot_done));
        json_object_set_new(v, "acked", json_integer((json_int_t)n->acked_seq));
        json_object_set_new(v, "lag_bytes", json_integer((json_int_t)n->lag_bytes));
        json_object_set_new(v, "lag_ms", json_integer((json_int_t)n->lag_ms));
        json_object_set_new(nodes, n->name, v);
    }
    json_object_set_new(o, "nodes", nodes);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

static uint64_t count(const json_t *o, const char *key)
{
    json_int_t v = json_integer_value(json_object_get(o, key));
    return v > 0 ? (uint64_t)v : 0;
}

bool cluster_view_decode(const void *text, size_t len, cluster_status *st)
{
    json_error_t e;
    json_t *o = json_loadb(text, len, 0, &e), *nodes = json_object_get(o, "nodes");
    bool ok = json_is_object(nodes) && json_integer_value(json_object_get(o, "epoch")) == st->epoch;
    if (ok) {
        st->leader_view = true;
        st->confirms_held = json_is_true(json_object_get(o, "confirms_held"));
        st->replicated_seq = count(o, "replicated");
        for (unsigned i = 0; i < st->n_nodes; i++) {
            cluster_node_status *n = &st->nodes[i];
            const json_t *v = json_object_get(nodes, n->name);
            if (!json_is_object(v))
                continue;
            n->connected = true;
            n->snapshot_done = json_is_true(json_object_get(v, "snapshot_done"));
            n->acked_seq = count(v, "acked");
            n->lag_bytes = count(v, "lag_bytes");
            n->lag_ms = count(v, "lag_ms");
        }
    }
    json_decref(o);
    return ok;
}
