/* The broker as a whole: /api/overview, /api/nodes, /api/whoami,
 * /api/vhosts, /api/extensions and
 * Warren's /api/environment. Fields RabbitMQ fills from its Erlang VM
 * (processes, reductions, garbage collection) are left out; the others
 * come from the process itself (/proc, statvfs, getrlimit).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "mgmt_int.h"

#define API_VERSION "3.10.8" /* the RabbitMQ management API Warren answers as */
#define WARREN_VERSION "0.1.0"

static const stat_id broker_stats[] = {
    STAT_ACK,     STAT_CONFIRM,     STAT_DELIVER,           STAT_DELIVER_NO_ACK,
    STAT_DROP_UNROUTABLE, STAT_GET, STAT_GET_EMPTY,         STAT_GET_NO_ACK,
    STAT_PUBLISH, STAT_REDELIVER,   STAT_RETURN_UNROUTABLE,
};

/* ---- totals ------------------------------------------------------------- */

typedef struct totals {
    uint64_t ready, unacked, delayed, queues, consumers, exchanges, connections, channels;
    uint64_t recv_oct, send_oct;
} totals;

static void count_queue(void *arg, queue *q)
{
    totals *t = arg;
    uint64_t ready, unacked;
    admin_queue_depth(q, &ready, &unacked);
    t->ready += ready;
    t->unacked += unacked;
    t->delayed += queue_delayed_count(q);
    t->consumers += queue_consumer_count(q);
    t->queues++;
}

static void count_exchange(void *arg, route_exchange *ex)
{
    (void)ex;
    ((totals *)arg)->exchanges++;
}

/* Which vhosts and connections a sum covers: one vhost, or what the
 * overview shows the user (RabbitMQ: everything to administrators and
 * monitoring users, else the vhosts with permissions and the user's own
 * connections). */
typedef struct scope {
    vhost *only;   /* NULL = every vhost in scope */
    mgmt_req *for_user; /* NULL = no filter */
} scope;

static bool vhost_in(const scope *sc, vhost *v)
{
    if (sc->only)
        return v == sc->only;
    return !sc->for_user || mgmt_vhost_allowed(sc->for_user, v);
}

static bool conn_in(const scope *sc, const conn_info *ci)
{
    if (sc->only)
        return strcmp(ci->vhost, vhost_name(sc->only)) == 0;
    return !sc->for_user || strcmp(ci->user, sc->for_user->user.name) == 0;
}

static totals sum_totals(server *s, const scope *sc)
{
    totals t = {0};
    for (vhost *v = server_vhost_next(s, NULL); v; v = server_vhost_next(s, v)) {
        if (!vhost_in(sc, v))
            continue;
        vhost_foreach_queue(v, count_queue, &t);
        route_foreach_exchange(vhost_routes(v), count_exchange, &t);
    }
    for (size_t i = 0; i < server_conn_count(s); i++) {
        conn_info ci;
        conn_describe(server_conn_at(s, i), &ci);
        if (!conn_in(sc, &ci))
            continue;
        t.connections++;
        t.channels += ci.channels;
        t.recv_oct += ci.stats->n[STAT_RECV_OCT];
        t.send_oct += ci.stats->n[STAT_SEND_OCT];
    }
    /* stream connections count too (RabbitMQ 3.10.8's object_totals) */
    sconn_hub *h = server_stream_hub(s);
    for (sconn *c = h ? sconn_hub_next(h, NULL) : NULL; c; c = sconn_hub_next(h, c)) {
        sconn_info si;
        sconn_describe(c, &si);
        conn_info ci = {.vhost = si.vhost, .user = si.user};
        t.connections += conn_in(sc, &ci);
    }
    return t;
}

/* The broker's counters now (the vhosts' sum) with its sampled history. */
static stats live_broker_stats(server *s)
{
    stats st = {.hist = server_stats(s)->hist};
    for (vhost *v = server_vhost_next(s, NULL); v; v = server_vhost_next(s, v))
        stats_add(&st, vhost_stats(v));
    return st;
}

/* The same over the vhosts a user may see: counters only (no history of
 * that sum is kept, so rates read 0). */
static stats visible_stats(mgmt_req *r)
{
    stats st = {0};
    for (vhost *v = server_vhost_next(r->s, NULL); v; v = server_vhost_next(r->s, v))
        if (mgmt_vhost_allowed(r, v))
            stats_add(&st, vhost_stats(v));
    return st;
}

static void exchange_types(mgmt_json *w)
{
    /* By name, as RabbitMQ lists its registry. */
    static const route_type types[] = {ROUTE_DIRECT,          ROUTE_FANOUT,
                                       ROUTE_HEADERS,         ROUTE_TOPIC,
                                       ROUTE_CONSISTENT_HASH, ROUTE_DELAYED,
                                       ROUTE_LOCAL_RANDOM,    ROUTE_DEDUP,
                                       ROUTE_MODULUS_HASH};
    mgmt_json_key(w, "exchange_types");
    mgmt_json_arr(w);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        mgmt_json_obj(w);
        mgmt_json_kstr(w, "name", route_type_name(types[i]));
        mgmt_json_kstr(w, "description", route_type_description(types[i]));
        mgmt_json_kbool(w, "enabled", true);
        mgmt_json_end_obj(w);
    }
    mgmt_json_end_arr(w);
}

static void listener(mgmt_json *w, server *s, const char *protocol, const char *ip, int port)
{
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "node", server_node_name(s));
    mgmt_json_kstr(w, "protocol", protocol);
    mgmt_json_kstr(w, "ip_address", ip);
    mgmt_json_kint(w, "port", port);
    mgmt_json_end_obj(w);
}

static void listeners(mgmt_json *w, server *s, mgmt *m)
{
    const config *cfg = server_config(s);
    mgmt_json_key(w, "listeners");
    mgmt_json_arr(w);
    for (size_t i = 0; i < server_amqp_listener_count(s); i++) {
        const char *ip;
        int port = server_amqp_listener(s, i, &ip);
        listener(w, s, "amqp", ip, port);
    }
    for (size_t i = 0; i < server_amqps_listener_count(s); i++) {
        const char *ip;
        int port = server_amqps_listener(s, i, &ip);
        listener(w, s, "amqp/ssl", ip, port);
    }
    sconn_hub *h = server_stream_hub(s);
    for (size_t i = 0; h && i < sconn_hub_listener_count(h); i++) {
        const char *ip;
        int port = sconn_hub_listener(h, i, &ip);
        listener(w, s, "stream", ip, port);
    }
    if (mgmt_port(m) > 0)
        listener(w, s, "http", cfg->mgmt_ip, mgmt_port(m));
    const mgmt_https *https = mgmt_https_of(m);
    if (https)
        listener(w, s, "https", *https->cfg->ip ? https->cfg->ip : "0.0.0.0", https->port);
    mgmt_prometheus *prom = mgmt_prometheus_of(m);
    if (prom && mgmt_prometheus_port(prom) > 0)
        listener(w, s, "http/prometheus", cfg->prometheus_ip, mgmt_prometheus_port(prom));
    https = prom ? mgmt_prometheus_https(prom) : NULL;
    if (https)
        listener(w, s, "https/prometheus", *https->cfg->ip ? https->cfg->ip : "0.0.0.0",
                 https->port);
    mgmt_json_end_arr(w);
}

/* RabbitMQ counts consumers only for administrators and monitoring users. */
static void object_totals(mgmt_json *w, const totals *t, bool consumers)
{
    mgmt_json_key(w, "object_totals");
    mgmt_json_obj(w);
    mgmt_json_kuint(w, "channels", t->channels);
    mgmt_json_kuint(w, "connections", t->connections);
    if (consumers)
        mgmt_json_kuint(w, "consumers", t->consumers);
    mgmt_json_kuint(w, "exchanges", t->exchanges);
    mgmt_json_kuint(w, "queues", t->queues);
    mgmt_json_end_obj(w);
}

/* ---- /api/overview ------------------------------------------------------ */

static void overview_versions(mgmt_json *w, server *s, mgmt *m)
{
    char name[64];
    mgmt_json_kstr(w, "management_version", API_VERSION);
    mgmt_json_kstr(w, "rates_mode", "basic");
    mgmt_json_key(w, "sample_retention_policies");
    mgmt_json_obj(w);
    static const char *const keys[] = {"global", "basic", "detailed"};
    for (int i = 0; i < 3; i++) {
        mgmt_json_key(w, keys[i]);
        mgmt_json_arr(w);
        mgmt_json_int(w, i == 0 ? 600 : 60);
        mgmt_json_end_arr(w);
    }
    mgmt_json_end_obj(w);
    exchange_types(w);
    mgmt_json_kstr(w, "product_version", WARREN_VERSION);
    mgmt_json_kstr(w, "product_name", "Warren");
    mgmt_json_kstr(w, "rabbitmq_version", API_VERSION);
    mgmt_json_kstr(w, "cluster_name", mgmt_cluster_name(m, s, name, sizeof name));
}

/* The management listener as RabbitMQ describes its web contexts (port
 * as a string; cowboy's options are Erlang's and left out): the HTTPS one
 * when it serves HTTPS alone, with "ssl": "true" as RabbitMQ 3.10.8. */
static void contexts(mgmt_json *w, server *s, mgmt *m)
{
    char port[16];
    const mgmt_https *https = mgmt_port(m) > 0 ? NULL : mgmt_https_of(m);
    snprintf(port, sizeof port, "%d", https ? https->port : mgmt_port(m));
    mgmt_json_key(w, "contexts");
    mgmt_json_arr(w);
    mgmt_json_obj(w);
    mgmt_json_key(w, "ssl_opts");
    mgmt_json_arr(w);
    mgmt_json_end_arr(w);
    mgmt_json_kstr(w, "node", server_node_name(s));
    mgmt_json_kstr(w, "description", "RabbitMQ Management");
    mgmt_json_kstr(w, "path", "/");
    mgmt_json_kstr(w, "port", port);
    if (https)
        mgmt_json_kstr(w, "ssl", "true");
    mgmt_json_end_obj(w);
    mgmt_json_end_arr(w);
}

const char *const mgmt_refusal_names[MGMT_REFUSALS] = {
    [REFUSED_CONN_VHOST_LIMIT] = "connections_refused_vhost_limit",
    [REFUSED_CONN_USER_LIMIT] = "connections_refused_user_limit",
    [REFUSED_CONN_MAX] = "connections_refused_connection_max",
    [REFUSED_QUEUE_VHOST_LIMIT] = "queues_refused_vhost_limit",
    [REFUSED_CHAN_USER_LIMIT] = "channels_refused_user_limit",
    [REFUSED_CHAN_MAX] = "channels_refused_channel_max",
    [REFUSED_CONSUMER_CHAN_LIMIT] = "consumers_refused_channel_limit",
    [REFUSED_FRAME_MAX] = "frames_refused_frame_max",
    [REFUSED_MESSAGE_SIZE] = "messages_refused_max_message_size",
    [REFUSED_LOGIN_BRAKE] = "logins_refused_login_brake",
    [REFUSED_HTTP_BODY_SIZE] = "http_requests_refused_max_body_size",
    [REFUSALS] = "http_connections_refused_max_connections",
    [REFUSALS + 1] = "http_connections_evicted",
    [REFUSALS + 2] = "http_head_timeouts",
    [REFUSALS + 3] = "http_body_timeouts",
};

void mgmt_refusal_counts(const mgmt *m, server *s, uint64_t out[MGMT_REFUSALS])
{
    memcpy(out, server_counters(s)->refused, REFUSALS * sizeof *out);
    mgmt_http_refusals(m, out + REFUSALS);
}

/* Warren's "refused": what each limit refused since start (README
 * "Limits"). */
static void refusals(mgmt_json *w, mgmt_req *r)
{
    uint64_t n[MGMT_REFUSALS];
    mgmt_refusal_counts(r->m, r->s, n);
    mgmt_json_key(w, "refused");
    mgmt_json_obj(w);
    for (int i = 0; i < MGMT_REFUSALS; i++)
        mgmt_json_kuint(w, mgmt_refusal_names[i], n[i]);
    mgmt_json_end_obj(w);
}

/* Administrators and monitoring users see the whole broker, the node and
 * its listeners; anyone else the totals of its own vhosts and
 * connections, as RabbitMQ 3.10 answers. */
static void get_overview(mgmt_req *r)
{
    mgmt_json *w = mgmt_reply(r);
    const char *cols = mgmt_query(r, "columns");
    if (cols)
        mgmt_json_columns(w, cols, 1);
    bool monitor = mgmt_lists_all_vhosts(r);
    scope sc = {NULL, monitor ? NULL : r};
    totals t = sum_totals(r->s, &sc);
    stats st = monitor ? live_broker_stats(r->s) : visible_stats(r);
    uint64_t node[NODE_FIELDS];
    mgmt_node_now(r->s, node);
    mgmt_json_obj(w);
    overview_versions(w, r->s, r->m);
    mgmt_json_kbool(w, "disable_stats", false);
    mgmt_json_kbool(w, "enable_queue_totals", false);
    mgmt_message_stats(r, w, &st, broker_stats, sizeof broker_stats / sizeof broker_stats[0],
                       true);
    mgmt_json_key(w, "churn_rates");
    mgmt_json_obj(w);
    mgmt_churn_json(w, mgmt_sampler_of(r->m), node);
    mgmt_json_end_obj(w);
    mgmt_json_key(w, "queue_totals");
    mgmt_json_obj(w);
    mgmt_queue_totals(r, w, &st, t.ready, t.unacked);
    mgmt_json_kuint(w, "messages_delayed", t.delayed); /* Warren's: delayed retry */
    mgmt_json_end_obj(w);
    object_totals(w, &t, monitor);
    mgmt_json_kint(w, "statistics_db_event_queue", 0);
    if (monitor) {
        refusals(w, r);
        mgmt_json_kstr(w, "node", server_node_name(r->s));
        listeners(w, r->s, r->m);
        contexts(w, r->s, r->m);
    }
    mgmt_json_end_obj(w);
    mgmt_send(r, 200);
}

/* ---- /api/nodes --------------------------------------------------------- */

static void auth_mechanisms(mgmt_json *w)
{
    static const char *const mechs[][2] = {
        {"AMQPLAIN", "QPid AMQPLAIN mechanism"},
        {"PLAIN", "SASL PLAIN authentication mechanism"},
    };
    mgmt_json_key(w, "auth_mechanisms");
    mgmt_json_arr(w);
    for (int i = 0; i < 2; i++) {
        mgmt_json_obj(w);
        mgmt_json_kstr(w, "name", mechs[i][0]);
        mgmt_json_kstr(w, "description", mechs[i][1]);
        mgmt_json_kbool(w, "enabled", true);
        mgmt_json_end_obj(w);
    }
    mgmt_json_end_arr(w);
}

static void empty_list(mgmt_json *w, const char *key)
{
    mgmt_json_key(w, key);
    mgmt_json_arr(w);
    mgmt_json_end_arr(w);
}

/* RabbitMQ 3.10's node object without what only an Erlang VM has
 * (processes, run queue, GC, applications, Mnesia, net_ticktime).
 * Warren has no socket limit of its own: sockets_total is what the
 * descriptor limit leaves after the descriptors in use for other things. */
static const char *const memory_strategies[] = {"rss", "allocated", "legacy"};

static void node_json(mgmt_req *r, mgmt_json *w)
{
    server *s = r->s;
    const mgmt_sampler *sm = mgmt_sampler_of(r->m);
    struct rlimit rl;
    uint64_t now[NODE_FIELDS];
    char pid[24];
    mgmt_node_now(s, now);
    getrlimit(RLIMIT_NOFILE, &rl);
    uint64_t fd_total = (uint64_t)rl.rlim_cur, other_fds = now[NODE_FD_USED] - now[NODE_SOCKETS_USED];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    mgmt_json_obj(w);
    auth_mechanisms(w);
    mgmt_churn_json(w, sm, now);
    empty_list(w, "cluster_links");
    contexts(w, s, r->m);
    mgmt_json_kstr(w, "db_dir", server_config(s)->data_dir);
    mgmt_node_stat(w, sm, "disk_free", now, NODE_DISK_FREE);
    mgmt_json_kbool(w, "disk_free_alarm", server_disk_alarm(s));
    mgmt_json_kuint(w, "disk_free_limit", server_disk_free_limit(s));
    mgmt_node_stat(w, sm, "journal_bytes", now, NODE_JOURNAL_BYTES); /* Warren's */
    exchange_types(w);
    mgmt_json_kuint(w, "fd_total", fd_total);
    mgmt_node_stat(w, sm, "fd_used", now, NODE_FD_USED);
    mgmt_json_kbool(w, "mem_alarm", server_memory_alarm(s));
    mgmt_json_kstr(w, "mem_calculation_strategy", memory_strategies[server_config(s)->memory_strategy]);
    mgmt_json_kuint(w, "mem_limit", server_memory_limit(s));
    mgmt_node_stat(w, sm, "mem_used", now, NODE_MEM_USED);
    mgmt_json_kstr(w, "name", server_node_name(s));
    mgmt_json_kstr(w, "os_pid", pid); /* a string, as RabbitMQ sends it */
    empty_list(w, "partitions");
    mgmt_json_kint(w, "processors", sysconf(_SC_NPROCESSORS_ONLN));
    mgmt_json_kstr(w, "rates_mode", "basic");
    mgmt_json_kbool(w, "running", true);
    mgmt_json_kuint(w, "sockets_total", fd_total > other_fds ? fd_total - other_fds : 0);
    mgmt_node_stat(w, sm, "sockets_used", now, NODE_SOCKETS_USED);
    mgmt_json_kstr(w, "type", "disc");
    mgmt_json_kuint(w, "uptime", wall_clock_ms() - server_started_at(s));
    mgmt_cluster_self_fields(r, w); /* Warren's, in a cluster */
    mgmt_json_end_obj(w);
}

static void get_nodes(mgmt_req *r)
{
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_arr(w);
    node_json(r, w);
    mgmt_cluster_peers_json(r, w);
    mgmt_json_end_arr(w);
    mgmt_send(r, 200);
}

static void get_node(mgmt_req *r)
{
    if (!amqp_bytes_equal_cstr(r->cap[0], server_node_name(r->s))) {
        if (!mgmt_cluster_peer_send(r, r->cap[0]))
            mgmt_not_found(r);
        return;
    }
    node_json(r, mgmt_reply(r));
    mgmt_send(r, 200);
}

static void get_whoami(mgmt_req *r)
{
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "name", r->user.name);
    /* every tag as given, as RabbitMQ 3.10 lists them; the control
     * socket's local administrator is no user */
    const access_user *u = r->user.local ? NULL : access_find_user(server_access(r->s), r->user.name);
    mgmt_tags_json(w, "tags", u ? access_user_tags(u) : "administrator");
    mgmt_json_end_obj(w);
    mgmt_send(r, 200);
}

/* ---- /api/vhosts -------------------------------------------------------- */

static bool render_vhost(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    vhost *v = server_vhost(r->s, it->name);
    if (!v)
        return false;
    scope sc = {v, NULL};
    totals t = sum_totals(r->s, &sc);
    stats *st = vhost_stats(v);
    mgmt_json_obj(w);
    mgmt_json_kbytes(w, "name", it->name);
    mgmt_json_kstr(w, "description", vhost_description(v));
    mgmt_tags_json(w, "tags", vhost_tags(v));
    const char *dqt = vhost_default_queue_type(v);
    mgmt_json_kstr(w, "default_queue_type", *dqt ? dqt : "undefined");
    mgmt_json_key(w, "metadata"); /* RabbitMQ 3.10's copy, with the type only when set */
    mgmt_json_obj(w);
    if (*dqt)
        mgmt_json_kstr(w, "default_queue_type", dqt);
    mgmt_json_kstr(w, "description", vhost_description(v));
    mgmt_tags_json(w, "tags", vhost_tags(v));
    mgmt_json_end_obj(w);
    mgmt_json_kbool(w, "tracing", vhost_tracing(v));
    mgmt_json_key(w, "cluster_state");
    mgmt_json_obj(w);
    mgmt_json_kstr(w, server_node_name(r->s), "running");
    mgmt_json_end_obj(w);
    mgmt_queue_totals(r, w, st, t.ready, t.unacked);
    mgmt_json_kuint(w, "messages_delayed", t.delayed); /* Warren's: delayed retry */
    mgmt_json_kuint(w, "recv_oct", t.recv_oct);
    mgmt_json_kuint(w, "send_oct", t.send_oct);
    mgmt_message_stats(r, w, st, broker_stats, sizeof broker_stats / sizeof broker_stats[0], true);
    mgmt_json_end_obj(w);
    return true;
}

static void get_vhosts(mgmt_req *r)
{
    mgmt_list *l = mgmt_list_begin(r);
    if (!l)
        return;
    bool all = mgmt_lists_all_vhosts(r);
    for (vhost *v = server_vhost_next(r->s, NULL); v; v = server_vhost_next(r->s, v))
        if (all || mgmt_vhost_allowed(r, v))
            mgmt_list_add(l, "", AMQP_CSTR(vhost_name(v)), 0, 0, false);
    mgmt_list_send(r, l, render_vhost);
}

static void get_vhost(mgmt_req *r)
{
    mgmt_list_item it = {.vhost = "", .name = r->cap[0]};
    mgmt_object_send(r, render_vhost, &it);
}

static void get_extensions(mgmt_req *r)
{
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_arr(w);
    mgmt_json_end_arr(w);
    mgmt_send(r, 200);
}

static void env_entry(void *arg, const char *key, const char *value)
{
    mgmt_json_kstr(arg, key, value);
}

/* Warren's: the effective configuration as rabbitmq.conf keys. */
static void get_environment(mgmt_req *r)
{
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_obj(w);
    config_describe(server_config(r->s), env_entry, w);
    mgmt_json_end_obj(w);
    mgmt_send(r, 200);
}

const mgmt_route mgmt_overview_routes[] = {
    {HTTP_GET, "/api/overview", TAG_MANAGEMENT, get_overview},
    {HTTP_GET, "/api/nodes", TAG_MONITORING, get_nodes},
    {HTTP_GET, "/api/nodes/{}", TAG_MONITORING, get_node},
    {HTTP_GET, "/api/whoami", TAG_MANAGEMENT, get_whoami},
    {HTTP_GET, "/api/vhosts", TAG_MANAGEMENT, get_vhosts},
    {HTTP_GET, "/api/vhosts/{}", TAG_ADMINISTRATOR, get_vhost}, /* as RabbitMQ 3.10 */
    {HTTP_GET, "/api/extensions", TAG_MANAGEMENT, get_extensions},
    {HTTP_GET, "/api/environment", TAG_ADMINISTRATOR, get_environment},
    {0},
};
