/* cluster_status and report.
 *
 * cluster_status prints rabbitmqctl 3.10's sections from what the API says
 * of every node: /api/nodes (disk and RAM nodes by type, running ones,
 * alarms, partitions), /api/overview (cluster name, product and version,
 * every node's listeners) and /api/feature-flags (administrators; without
 * it "(none)"). The sections are built per node, so a cluster's nodes fill
 * them. A Warren cluster's leader also answers GET /api/cluster: its
 * status follows as a section of Warren's own, "Replication" (leader,
 * epoch, ISR against min_isr, whether confirms are held, each node's role,
 * ISR membership and lag), and as "warren_cluster" in the JSON; a single
 * node (404) or RabbitMQ prints exactly what rabbitmqctl prints.
 *
 * report concatenates, as rabbitmqctl's does, status, cluster_status,
 * environment (where the broker has it), the connections and channels with
 * every column, and for each vhost its queues, exchanges, bindings,
 * permissions, policies, global and vhost parameters -- each section the
 * command itself, run with rabbitmqctl's report columns. Left out: the
 * Erlang VM's command line and environment variables.
 */
#include <stdlib.h>
#include <string.h>

#include "wctl_internal.h"

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static void title(wctl_buf *out, const char *name, bool first)
{
    wctl_buf_printf(out, "%s\033[1m%s\033[0m\n\n", first ? "" : "\n", name);
}

/* The names of the nodes that pass `keep`, sorted (rabbitmqctl sorts them). */
static json_t *node_names(const json_t *nodes, bool (*keep)(const json_t *node))
{
    json_t *names = json_array();
    size_t i;
    const json_t *n;
    json_array_foreach(nodes, i, n)
        if (str(n, "name") && keep(n))
            json_array_append_new(names, json_string(str(n, "name")));
    for (size_t a = 1; a < json_array_size(names); a++) /* a handful: insertion sort */
        for (size_t b = a; b > 0 && strcmp(json_string_value(json_array_get(names, b - 1)),
                                           json_string_value(json_array_get(names, b))) > 0;
             b--) {
            json_t *t = json_incref(json_array_get(names, b));
            json_array_set(names, b, json_array_get(names, b - 1));
            json_array_set_new(names, b - 1, t);
        }
    return names;
}

static bool disc(const json_t *n) { return !str(n, "type") || strcmp(str(n, "type"), "ram") != 0; }
static bool ram(const json_t *n) { return !disc(n); }
static bool running(const json_t *n) { return !json_is_false(json_object_get(n, "running")); }

typedef struct cluster {
    json_t *ov, *nodes, *flags; /* flags NULL when the API did not give them */
    json_t *warren;             /* GET /api/cluster, NULL when not a Warren cluster */
    const char *product, *version, *erlang;
} cluster;

static void names_section(wctl_buf *out, const char *name, const json_t *names, bool always)
{
    size_t i;
    const json_t *n;
    if (!always && json_array_size(names) == 0)
        return;
    title(out, name, false);
    json_array_foreach(names, i, n)
        wctl_buf_printf(out, "%s\n", json_string_value(n));
}

static void nodes_sections(wctl_buf *out, const cluster *cl)
{
    json_t *disk = node_names(cl->nodes, disc), *rams = node_names(cl->nodes, ram);
    json_t *up = node_names(cl->nodes, running);
    size_t i;
    const json_t *n;
    names_section(out, "Disk Nodes", disk, true);
    names_section(out, "RAM Nodes", rams, false);
    names_section(out, "Running Nodes", up, true);
    title(out, "Versions", false);
    json_array_foreach(up, i, n) {
        wctl_buf_printf(out, "%s: %s %s", json_string_value(n), cl->product, cl->version);
        if (cl->erlang)
            wctl_buf_printf(out, " on Erlang %s", cl->erlang);
        wctl_buf_puts(out, "\n");
    }
    title(out, "Maintenance status", false);
    json_array_foreach(up, i, n)
        wctl_buf_printf(out, "Node: %s, status: not under maintenance\n", json_string_value(n));
    json_decref(disk);
    json_decref(rams);
    json_decref(up);
}

static void alarms_and_partitions(wctl_buf *out, const cluster *cl)
{
    size_t i, k;
    const json_t *n, *peer;
    bool any = false;
    title(out, "Alarms", false);
    json_array_foreach(cl->nodes, i, n)
        any = wctl_alarm_lines(out, n, str(n, "name") ? str(n, "name") : "") || any;
    if (!any)
        wctl_buf_puts(out, "(none)\n");
    title(out, "Network Partitions", false);
    any = false;
    json_array_foreach(cl->nodes, i, n) {
        const json_t *parts = json_object_get(n, "partitions");
        if (!json_array_size(parts))
            continue;
        wctl_buf_printf(out, "Node %s cannot communicate with ", str(n, "name"));
        json_array_foreach(parts, k, peer)
            wctl_buf_printf(out, "%s%s", k ? ", " : "", json_string_value(peer));
        wctl_buf_puts(out, "\n");
        any = true;
    }
    if (!any)
        wctl_buf_puts(out, "(none)\n");
}

static void listeners_and_flags(wctl_buf *out, const cluster *cl)
{
    size_t i;
    const json_t *l, *ls = json_object_get(cl->ov, "listeners");
    title(out, "Listeners", false);
    json_array_foreach(ls, i, l)
        wctl_listener_line(out, l, cl->product, true);
    if (!json_array_size(ls))
        wctl_buf_puts(out, "(none)\n");
    title(out, "Feature flags", false);
    json_array_foreach(cl->flags, i, l)
        wctl_buf_printf(out, "Flag: %s, state: %s\n", str(l, "name"), str(l, "state"));
    if (!json_array_size(cl->flags))
        wctl_buf_puts(out, "(none)\n");
}

/* Warren's cluster: who leads, the ISR, each node's role and lag. */
static void replication_section(wctl_buf *out, const json_t *w)
{
    const char *leader = str(w, "leader");
    const json_t *held = json_object_get(w, "confirms_held");
    size_t i;
    const json_t *n;
    title(out, "Replication (Warren)", false);
    wctl_buf_printf(out, "Leader: %s, epoch: %lld\n", leader ? leader : "(none)",
                    (long long)json_integer_value(json_object_get(w, "epoch")));
    wctl_buf_printf(out, "In-sync replicas: %lld, min_isr: %lld, confirms: %s\n",
                    (long long)json_integer_value(json_object_get(w, "isr_size")),
                    (long long)json_integer_value(json_object_get(w, "min_isr")),
                    json_is_true(held) ? "held (the ISR is below min_isr)"
                    : json_is_false(held) ? "flowing" : "(the leader knows)");
    json_array_foreach(json_object_get(w, "nodes"), i, n) {
        const json_t *lb = json_object_get(n, "lag_bytes"), *lm = json_object_get(n, "lag_ms");
        wctl_buf_printf(out, "Node: %s, role: %s, in sync: %s, alive: %s", str(n, "name"),
                        str(n, "role") ? str(n, "role") : "", json_is_true(json_object_get(n, "in_sync"))
                        ? "yes" : "no", json_is_true(json_object_get(n, "alive")) ? "yes" : "no");
        if (json_is_integer(lb) && json_is_integer(lm))
            wctl_buf_printf(out, ", lag: %lld bytes, %lld ms", (long long)json_integer_value(lb),
                            (long long)json_integer_value(lm));
        wctl_buf_puts(out, "\n");
    }
}

/* ---- JSON -------------------------------------------------------------------------- */

/* rabbitmqctl's JSON for cluster_status (its keys sorted). */
static json_t *cluster_json(const cluster *cl)
{
    json_t *alarms = json_array(), *listeners = json_object(), *maint = json_object();
    json_t *parts = json_object(), *versions = json_object(), *flags = json_array();
    size_t i;
    const json_t *n, *l;
    json_array_foreach(cl->nodes, i, n) {
        const char *name = str(n, "name") ? str(n, "name") : "";
        static const char *const kinds[][2] = {{"mem_alarm", "memory"}, {"disk_free_alarm", "disk"}};
        for (int k = 0; k < 2; k++)
            if (json_is_true(json_object_get(n, kinds[k][0])))
                json_array_append_new(alarms, json_pack("{s:s,s:s,s:s}", "node", name, "resource",
                                                        kinds[k][1], "type", "resource_limit"));
        json_object_set_new(listeners, name, json_array());
        json_object_set_new(maint, name, json_string("not under maintenance"));
        if (json_array_size(json_object_get(n, "partitions")))
            json_object_set(parts, name, json_object_get(n, "partitions"));
        json_t *v = json_pack("{s:s,s:s}", "rabbitmq_name", cl->product, "rabbitmq_version",
                              cl->version);
        if (cl->erlang)
            json_object_set_new(v, "erlang_version", json_string(cl->erlang));
        json_object_set_new(versions, name, v);
    }
    json_array_foreach(json_object_get(cl->ov, "listeners"), i, l) {
        wctl_buf line = {0};
        wctl_listener_line(&line, l, cl->product, false);
        const char *purpose = strstr(wctl_buf_str(&line), "purpose: ");
        json_t *into = json_object_get(listeners, str(l, "node") ? str(l, "node") : "");
        const char *ip = str(l, "ip_address") ? str(l, "ip_address") : "";
        wctl_buf iface = {0};
        wctl_buf_printf(&iface, strchr(ip, ':') ? "[%s]" : "%s", ip);
        if (into)
            json_array_append_new(into, json_pack("{s:s,s:s,s:O,s:s,s:s%}", "interface",
                                                  wctl_buf_str(&iface), "node", str(l, "node"),
                                                  "port", json_object_get(l, "port"), "protocol",
                                                  str(l, "protocol") ? str(l, "protocol") : "",
                                                  "purpose", purpose + 9,
                                                  strcspn(purpose + 9, "\n")));
        wctl_buf_free(&iface);
        wctl_buf_free(&line);
    }
    json_array_foreach(cl->flags, i, l)
        json_array_append(flags, (json_t *)l);
    json_t *disk = node_names(cl->nodes, disc), *rams = node_names(cl->nodes, ram);
    json_t *up = node_names(cl->nodes, running);
    return json_pack("{s:o,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "alarms", alarms, "cluster_name",
                     str(cl->ov, "cluster_name") ? str(cl->ov, "cluster_name") : "", "disk_nodes",
                     disk, "feature_flags", flags, "listeners", listeners, "maintenance_status",
                     maint, "partitions", parts, "ram_nodes", rams, "running_nodes", up,
                     "versions", versions);
}

/* rabbitmqctl's keys, and a Warren cluster's status as "warren_cluster". */
static json_t *status_json(const cluster *cl)
{
    json_t *j = cluster_json(cl);
    if (cl->warren)
        json_object_set(j, "warren_cluster", cl->warren);
    return j;
}

/* ---- cluster_status ----------------------------------------------------------------- */

/* Feature flags when the API gives them (administrators), else NULL. */
static json_t *feature_flags(wctl_ctx *c)
{
    wctl_response r;
    int err;
    json_t *flags = NULL;
    if (wctl_call_quiet(c, "GET", "/api/feature-flags", &r, &err) != WCTL_NET_OK)
        return NULL;
    if (r.status == 200)
        flags = json_loadb(r.body, r.body_len, 0, NULL);
    wctl_response_free(&r);
    return json_is_array(flags) ? flags : (json_decref(flags), NULL);
}

/* A Warren cluster's status, else NULL (a single node answers 404,
 * RabbitMQ has no such path). */
static json_t *warren_cluster(wctl_ctx *c)
{
    wctl_response r;
    int err;
    json_t *w = NULL;
    if (wctl_call_quiet(c, "GET", "/api/cluster", &r, &err) != WCTL_NET_OK)
        return NULL;
    if (r.status == 200)
        w = json_loadb(r.body, r.body_len, 0, NULL);
    wctl_response_free(&r);
    return json_is_object(w) ? w : (json_decref(w), NULL);
}

/* A follower of a Warren cluster: it has no broker and serves only its
 * status (cluster/status_http.c). */
static bool follower(const cluster *cl)
{
    return cl->warren && str(cl->warren, "role") && strcmp(str(cl->warren, "role"), "leader") != 0;
}

static int fetch(wctl_ctx *c, cluster *cl)
{
    memset(cl, 0, sizeof *cl);
    cl->warren = warren_cluster(c);
    if (follower(cl))
        return 0;
    int rc = wctl_get_json(c, "/api/overview", false, &cl->ov, NULL);
    if (!rc)
        rc = wctl_get_json(c, "/api/nodes", false, &cl->nodes, NULL);
    if (rc)
        return rc;
    cl->flags = feature_flags(c);
    cl->product = str(cl->ov, "product_name") ? str(cl->ov, "product_name") : "RabbitMQ";
    cl->version = str(cl->ov, "product_version") ? str(cl->ov, "product_version")
                  : str(cl->ov, "rabbitmq_version") ? str(cl->ov, "rabbitmq_version")
                                                     : "";
    cl->erlang = str(cl->ov, "erlang_version");
    return 0;
}

static void cluster_free(cluster *cl)
{
    json_decref(cl->ov);
    json_decref(cl->nodes);
    json_decref(cl->flags);
    json_decref(cl->warren);
}

int wctl_cmd_cluster_status(wctl_ctx *c)
{
    cluster cl;
    int rc = fetch(c, &cl);
    if (rc) {
        cluster_free(&cl);
        return rc;
    }
    const json_t *about = follower(&cl) ? cl.warren : cl.ov;
    wctl_info(c, "Cluster status of node %s ...", str(about, "node") ? str(about, "node") : "");
    wctl_buf out = {0};
    if (follower(&cl)) { /* what it knows: the cluster's name and replication */
        if (c->o->json) {
            json_t *j = json_pack("{s:s?,s:O}", "cluster_name", str(cl.warren, "cluster_name"),
                                  "warren_cluster", cl.warren);
            char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
            wctl_buf_printf(&out, "%s\n", text);
            free(text);
            json_decref(j);
        } else {
            title(&out, "Basics", true);
            wctl_buf_printf(&out, "Cluster name: %s\n", str(cl.warren, "cluster_name"));
            replication_section(&out, cl.warren);
        }
    } else if (c->o->json) {
        json_t *j = status_json(&cl);
        char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        wctl_buf_printf(&out, "%s\n", text);
        free(text);
        json_decref(j);
    } else {
        title(&out, "Basics", true);
        wctl_buf_printf(&out, "Cluster name: %s\n", str(cl.ov, "cluster_name") ? str(cl.ov, "cluster_name")
                                                                               : "");
        nodes_sections(&out, &cl);
        alarms_and_partitions(&out, &cl);
        listeners_and_flags(&out, &cl);
        if (cl.warren)
            replication_section(&out, cl.warren);
    }
    fwrite(wctl_buf_str(&out), 1, out.len, stdout);
    wctl_buf_free(&out);
    cluster_free(&cl);
    return WCTL_EXIT_OK;
}

/* ---- report --------------------------------------------------------------------------- */

#define QUEUE_COLUMNS                                                                              \
    "name durable auto_delete arguments policy pid owner_pid exclusive exclusive_consumer_pid "  \
    "exclusive_consumer_tag messages_ready messages_unacknowledged messages messages_ready_ram "  \
    "messages_unacknowledged_ram messages_ram messages_persistent message_bytes "                \
    "message_bytes_ready message_bytes_unacknowledged message_bytes_ram "                        \
    "message_bytes_persistent head_message_timestamp disk_reads disk_writes consumers "          \
    "consumer_utilisation consumer_capacity memory slave_pids synchronised_slave_pids state "    \
    "type leader members online"
#define CONNECTION_COLUMNS                                                                         \
    "pid name port host peer_port peer_host ssl ssl_protocol ssl_key_exchange ssl_cipher "       \
    "ssl_hash peer_cert_subject peer_cert_issuer peer_cert_validity state channels protocol "     \
    "auth_mechanism user vhost timeout frame_max channel_max client_properties recv_oct "        \
    "recv_cnt send_oct send_cnt send_pend connected_at"
#define CHANNEL_COLUMNS                                                                            \
    "pid connection name number user vhost transactional confirm consumer_count "                \
    "messages_unacknowledged messages_uncommitted acks_uncommitted messages_unconfirmed "         \
    "prefetch_count global_prefetch_count"

/* Runs `command` as its own invocation would (vhost NULL: the given one),
 * with `columns` (space-separated, or NULL) as its arguments, then the
 * blank line that ends a report section. */
static int section(wctl_ctx *c, const char *command, const char *vhost, const char *columns)
{
    char words[1024];
    wctl_opts o = *c->o;
    wctl_ctx sub = *c;
    o.command = command;
    o.vhost = vhost ? vhost : c->o->vhost;
    o.nargs = 0;
    snprintf(words, sizeof words, "%s", columns ? columns : "");
    for (char *w = strtok(words, " "); w && o.nargs < WCTL_MAX_ARGS; w = strtok(NULL, " "))
        o.args[o.nargs++] = w;
    sub.o = &o;
    sub.cmd = wctl_command_find(command);
    int rc = sub.cmd->run(&sub);
    memcpy(c->node, sub.node, sizeof c->node); /* the node's name, fetched once */
    fflush(stdout);
    puts("");
    return rc;
}

/* Whether the broker serves /api/environment (Warren does, RabbitMQ not). */
static bool has_environment(wctl_ctx *c)
{
    wctl_response r;
    int err;
    if (wctl_call_quiet(c, "GET", "/api/environment", &r, &err) != WCTL_NET_OK)
        return false;
    bool ok = r.status == 200;
    wctl_response_free(&r);
    return ok;
}

static int vhost_sections(wctl_ctx *c, const char *vh)
{
    static const char *const per_vhost[][2] = {
        {"list_queues", QUEUE_COLUMNS},
        {"list_exchanges", "name type durable auto_delete internal arguments policy"},
        {"list_bindings", NULL},
        {"list_permissions", NULL},
        {"list_policies", NULL},
        {"list_global_parameters", NULL},
        {"list_parameters", NULL},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof per_vhost / sizeof per_vhost[0]; i++) {
        int r = section(c, per_vhost[i][0], vh, per_vhost[i][1]);
        rc = rc ? rc : r;
    }
    return rc;
}

int wctl_cmd_report(wctl_ctx *c)
{
    if (c->o->json)
        return wctl_usage_error(c, WCTL_EXIT_USAGE, "\"Only report formatter is supported\"");
    json_t *vhosts;
    int rc = wctl_get_json(c, "/api/vhosts", false, &vhosts, NULL);
    if (rc)
        return rc;
    wctl_info(c, "Reporting server status of node %s ...\n", wctl_node_name(c));
    int first = section(c, "status", NULL, NULL);
    rc = first;
    int r = section(c, "cluster_status", NULL, NULL);
    rc = rc ? rc : r;
    if (has_environment(c) && (r = section(c, "environment", NULL, NULL)))
        rc = rc ? rc : r;
    r = section(c, "list_connections", NULL, CONNECTION_COLUMNS);
    rc = rc ? rc : r;
    r = section(c, "list_channels", NULL, CHANNEL_COLUMNS);
    rc = rc ? rc : r;
    size_t i;
    const json_t *v;
    json_array_foreach(wctl_rows(vhosts), i, v) {
        if ((r = vhost_sections(c, str(v, "name") ? str(v, "name") : "/")))
            rc = rc ? rc : r;
    }
    json_decref(vhosts);
    return rc;
}
