/* The cluster this node leads, in the management API: Warren's GET
 * /api/cluster (cluster/'s status object), the other nodes in /api/nodes
 * and /api/nodes/{node}, and this node's own cluster fields. The JSON is
 * cluster/'s (cluster_status_json, cluster_nodes_json), so a follower's
 * own status server answers in the same shape. A single node has no
 * /api/cluster (404) and its other responses are as before clusters.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "mgmt_int.h"

bool mgmt_cluster_status(const mgmt *m, cluster_status *st)
{
    cluster *c = mgmt_cluster_of(m);
    if (!c)
        return false;
    cluster_get_status(c, st);
    return true;
}

const char *mgmt_cluster_name(const mgmt *m, server *s, char *buf, size_t cap)
{
    cluster_status st;
    if (!mgmt_cluster_status(m, &st))
        return server_node_name(s);
    snprintf(buf, cap, "%s", st.cluster_name);
    return buf;
}

/* The node objects of the cluster (NULL for a single node). */
static json_t *cluster_nodes(mgmt_req *r)
{
    cluster_status st;
    return mgmt_cluster_status(r->m, &st) ? cluster_nodes_json(&st) : NULL;
}

static bool is_self(mgmt_req *r, const json_t *node)
{
    const char *name = json_string_value(json_object_get(node, "name"));
    return name && strcmp(name, server_node_name(r->s)) == 0;
}

/* The fields of a node object RabbitMQ's own object does not have. */
static bool warren_field(const char *key)
{
    return strcmp(key, "name") != 0 && strcmp(key, "type") != 0 && strcmp(key, "running") != 0;
}

void mgmt_cluster_self_fields(mgmt_req *r, mgmt_json *w)
{
    json_t *nodes = cluster_nodes(r), *n, *v;
    size_t i;
    const char *key;
    json_array_foreach(nodes, i, n) {
        if (!is_self(r, n))
            continue;
        json_object_foreach(n, key, v)
            if (warren_field(key)) {
                mgmt_json_key(w, key);
                mgmt_json_jansson(w, v);
            }
    }
    json_decref(nodes);
}

void mgmt_cluster_peers_json(mgmt_req *r, mgmt_json *w)
{
    json_t *nodes = cluster_nodes(r), *n;
    size_t i;
    json_array_foreach(nodes, i, n)
        if (!is_self(r, n))
            mgmt_json_jansson(w, n);
    json_decref(nodes);
}

bool mgmt_cluster_peer_send(mgmt_req *r, amqp_bytes name)
{
    json_t *nodes = cluster_nodes(r), *n;
    size_t i;
    bool found = false;
    json_array_foreach(nodes, i, n) {
        const char *nm = json_string_value(json_object_get(n, "name"));
        if (found || is_self(r, n) || !nm || !amqp_bytes_equal_cstr(name, nm))
            continue;
        mgmt_json_jansson(mgmt_reply(r), n);
        mgmt_send(r, 200);
        found = true;
    }
    json_decref(nodes);
    return found;
}

/* Warren's: the whole cluster status. */
static void get_cluster(mgmt_req *r)
{
    cluster_status st;
    if (!mgmt_cluster_status(r->m, &st)) {
        mgmt_not_found(r);
        return;
    }
    json_t *o = cluster_status_json(&st);
    if (!o) {
        mgmt_error(r, 500, "internal_error", "out of memory");
        return;
    }
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_jansson(w, o);
    json_decref(o);
    mgmt_send(r, 200);
}

const mgmt_route mgmt_cluster_routes[] = {
    {HTTP_GET, "/api/cluster", TAG_MONITORING, get_cluster}, /* as /api/nodes */
    {0},
};
