/* The broker as a whole: /api/overview, /api/nodes, /api/whoami,
 * /api/vhosts, the health checks, /api/aliveness-test, /api/extensions and
 * Warren's /api/environment. Fields RabbitMQ fills from its Erlang VM
 * (processes, reductions, garbage collection) are left out; the others
 * come from the process itself (/proc, statvfs, getrlimit).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
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
    uint64_t ready, unacked, queues, consumers, exchanges, connections, channels;
    uint64_t recv_oct, send_oct;
} totals;

static void count_queue(void *arg, queue *q)
{
    totals *t = arg;
    t->ready += queue_ready_count(q);
    t->unacked += queue_unacked_count(q);
    t->consumers += queue_consumer_count(q);
    t->queues++;
}

static void count_exchange(void *arg, route_exchange *ex)
{
    (void)ex;
    ((totals *)arg)->exchanges++;
}

/* Sums over one vhost, or all when v is NULL. */
static totals sum_totals(server *s, vhost *only)
{
    totals t = {0};
    for (vhost *v = server_vhost_next(s, NULL); v; v = server_vhost_next(s, v)) {
        if (only && v != only)
            continue;
        vhost_foreach_queue(v, count_queue, &t);
        route_foreach_exchange(vhost_routes(v), count_exchange, &t);
    }
    for (size_t i = 0; i < server_conn_count(s); i++) {
        conn_info ci;
        conn_describe(server_conn_at(s, i), &ci);
        if (only && strcmp(ci.vhost, vhost_name(only)) != 0)
            continue;
        t.connections++;
        t.channels += ci.channels;
        t.recv_oct += ci.stats->n[STAT_RECV_OCT];
        t.send_oct += ci.stats->n[STAT_SEND_OCT];
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

static void exchange_types(mgmt_json *w)
{
    static const char *const types[] = {"direct", "fanout", "headers", "topic"};
    mgmt_json_key(w, "exchange_types");
    mgmt_json_arr(w);
    for (int i = 0; i < 4; i++) {
        char desc[80];
        snprintf(desc, sizeof desc, "AMQP %s exchange, as per the AMQP specification", types[i]);
        mgmt_json_obj(w);
        mgmt_json_kstr(w, "name", types[i]);
        mgmt_json_kstr(w, "description", desc);
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
    listener(w, s, "amqp", cfg->listen_host, server_amqp_port(s));
    listener(w, s, "http", cfg->mgmt_ip, mgmt_port(m));
    mgmt_json_end_arr(w);
}

static void object_totals(mgmt_json *w, const totals *t)
{
    mgmt_json_key(w, "object_totals");
    mgmt_json_obj(w);
    mgmt_json_kuint(w, "channels", t->channels);
    mgmt_json_kuint(w, "connections", t->connections);
    mgmt_json_kuint(w, "consumers", t->consumers);
    mgmt_json_kuint(w, "exchanges", t->exchanges);
    mgmt_json_kuint(w, "queues", t->queues);
    mgmt_json_end_obj(w);
}

/* ---- /api/overview ------------------------------------------------------ */

static void overview_versions(mgmt_json *w, server *s)
{
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
    mgmt_json_kstr(w, "cluster_name", server_node_name(s));
}

static void get_overview(mgmt_req *r)
{
    mgmt_json *w = mgmt_reply(r);
    const char *cols = mgmt_query(r, "columns");
    if (cols)
        mgmt_json_columns(w, cols, 1);
    totals t = sum_totals(r->s, NULL);
    stats st = live_broker_stats(r->s);
    mgmt_json_obj(w);
    overview_versions(w, r->s);
    mgmt_json_kbool(w, "disable_stats", false);
    mgmt_json_kbool(w, "enable_queue_totals", false);
    mgmt_message_stats(r, w, &st, broker_stats, sizeof broker_stats / sizeof broker_stats[0],
                       true);
    mgmt_json_key(w, "queue_totals");
    mgmt_json_obj(w);
    mgmt_queue_totals(r, w, &st, t.ready, t.unacked);
    mgmt_json_end_obj(w);
    object_totals(w, &t);
    mgmt_json_kint(w, "statistics_db_event_queue", 0);
    mgmt_json_kstr(w, "node", server_node_name(r->s));
    listeners(w, r->s, r->m);
    mgmt_json_end_obj(w);
    mgmt_send(r, 200);
}

/* ---- /api/nodes --------------------------------------------------------- */

uint64_t mgmt_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

uint64_t mgmt_fds_used(void)
{
    DIR *d = opendir("/proc/self/fd");
    uint64_t n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n > 0 ? n - 1 : 0; /* the directory's own fd */
}

static void node_json(mgmt_req *r, mgmt_json *w)
{
    server *s = r->s;
    struct statvfs vfs;
    struct rlimit rl;
    uint64_t disk_free = statvfs(server_config(s)->data_dir, &vfs) == 0
                             ? (uint64_t)vfs.f_bavail * vfs.f_frsize : 0;
    getrlimit(RLIMIT_NOFILE, &rl);
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "name", server_node_name(s));
    mgmt_json_kstr(w, "type", "disc");
    mgmt_json_kbool(w, "running", true);
    mgmt_json_kbool(w, "being_drained", false);
    mgmt_json_kint(w, "os_pid", getpid());
    mgmt_json_kuint(w, "uptime", wall_clock_ms() - server_started_at(s));
    mgmt_json_kuint(w, "mem_used", mgmt_rss_bytes());
    mgmt_json_kuint(w, "mem_limit", server_memory_limit(s));
    mgmt_json_kbool(w, "mem_alarm", server_memory_alarm(s));
    mgmt_json_kuint(w, "disk_free", disk_free);
    mgmt_json_kuint(w, "disk_free_limit", 50000000);
    mgmt_json_kbool(w, "disk_free_alarm", false);
    mgmt_json_kuint(w, "fd_used", mgmt_fds_used());
    mgmt_json_kuint(w, "fd_total", (uint64_t)rl.rlim_cur);
    mgmt_json_kint(w, "processors", sysconf(_SC_NPROCESSORS_ONLN));
    mgmt_json_kstr(w, "rates_mode", "basic");
    mgmt_json_key(w, "partitions");
    mgmt_json_arr(w);
    mgmt_json_end_arr(w);
    exchange_types(w);
    mgmt_json_end_obj(w);
}

static void get_nodes(mgmt_req *r)
{
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_arr(w);
    node_json(r, w);
    mgmt_json_end_arr(w);
    mgmt_send(r, 200);
}

static void get_node(mgmt_req *r)
{
    if (!amqp_bytes_equal_cstr(r->cap[0], server_node_name(r->s))) {
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
    mgmt_json_key(w, "tags");
    mgmt_json_arr(w);
    static const char *const names[] = {"management", "policymaker", "monitoring",
                                        "administrator"};
    for (int i = 0; i < 4; i++)
        if (r->user.tags & (1u << i))
            mgmt_json_str(w, names[i]);
    mgmt_json_end_arr(w);
    mgmt_json_end_obj(w);
    mgmt_send(r, 200);
}

/* ---- /api/vhosts -------------------------------------------------------- */

static bool render_vhost(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    vhost *v = server_vhost(r->s, it->name);
    if (!v)
        return false;
    totals t = sum_totals(r->s, v);
    stats *st = vhost_stats(v);
    mgmt_json_obj(w);
    mgmt_json_kbytes(w, "name", it->name);
    mgmt_json_kstr(w, "description", vhost_description(v));
    mgmt_json_key(w, "tags");
    mgmt_json_arr(w);
    for (const char *tag = vhost_tags(v); *tag;) {
        size_t n = strcspn(tag, ",");
        if (n)
            mgmt_json_bytes(w, (amqp_bytes){(const uint8_t *)tag, (uint32_t)n});
        tag += n + (tag[n] == ',');
    }
    mgmt_json_end_arr(w);
    const char *dqt = vhost_default_queue_type(v);
    mgmt_json_kstr(w, "default_queue_type", *dqt ? dqt : "undefined");
    mgmt_json_kbool(w, "tracing", vhost_tracing(v));
    mgmt_json_key(w, "cluster_state");
    mgmt_json_obj(w);
    mgmt_json_kstr(w, server_node_name(r->s), "running");
    mgmt_json_end_obj(w);
    mgmt_queue_totals(r, w, st, t.ready, t.unacked);
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
    for (vhost *v = server_vhost_next(r->s, NULL); v; v = server_vhost_next(r->s, v))
        mgmt_list_add(l, "", AMQP_CSTR(vhost_name(v)), 0, 0, false);
    mgmt_list_send(r, l, render_vhost);
}

static void get_vhost(mgmt_req *r)
{
    mgmt_list_item it = {.vhost = "", .name = r->cap[0]};
    mgmt_object_send(r, render_vhost, &it);
}

/* ---- health ------------------------------------------------------------- */

static void status_ok(mgmt_req *r)
{
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "status", "ok");
    mgmt_json_end_obj(w);
    mgmt_send(r, 200);
}

static void get_alarms(mgmt_req *r)
{
    if (!server_memory_alarm(r->s)) {
        status_ok(r);
        return;
    }
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "status", "failed");
    mgmt_json_kstr(w, "reason", "There are alarms in effect in the cluster");
    mgmt_json_key(w, "alarms");
    mgmt_json_arr(w);
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "node", server_node_name(r->s));
    mgmt_json_kstr(w, "resource", "memory");
    mgmt_json_end_obj(w);
    mgmt_json_end_arr(w);
    mgmt_json_end_obj(w);
    mgmt_send(r, 503);
}

static void get_vhosts_health(mgmt_req *r) { status_ok(r); }

static void discard(void *arg, msg *m, bool redelivered, uint32_t remaining)
{
    (void)m, (void)redelivered, (void)remaining;
    (*(int *)arg)++;
}

/* RabbitMQ's aliveness test: declare "aliveness-test", publish, get. */
static void get_aliveness(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (!v)
        return;
    amqp_bytes name = AMQP_CSTR("aliveness-test");
    queue_spec spec = {.name = name};
    queue *q;
    amqp_error err = {0};
    bool routed = false;
    int got = 0;
    if (admin_queue_declare(v, &spec, &q, &err) != AMQP_OK ||
        admin_publish(v, r->user.name, AMQP_CSTR(""), name, (amqp_bytes){(const uint8_t *)"\0", 2},
                      AMQP_CSTR("test_message"), &routed, &err) != AMQP_OK ||
        admin_get(v, name, 1, ADMIN_ACK, discard, &got, &err) < 0 || got != 1) {
        mgmt_json *w = mgmt_reply(r);
        mgmt_json_obj(w);
        mgmt_json_kstr(w, "status", "failed");
        mgmt_json_kstr(w, "reason", err.text[0] ? mgmt_error_text(&err) : "no message");
        mgmt_json_end_obj(w);
        mgmt_send(r, 503);
        return;
    }
    status_ok(r);
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
    {EVHTTP_REQ_GET, "/api/overview", TAG_MANAGEMENT, get_overview},
    {EVHTTP_REQ_GET, "/api/nodes", TAG_MONITORING, get_nodes},
    {EVHTTP_REQ_GET, "/api/nodes/{}", TAG_MONITORING, get_node},
    {EVHTTP_REQ_GET, "/api/whoami", TAG_MANAGEMENT, get_whoami},
    {EVHTTP_REQ_GET, "/api/vhosts", TAG_MANAGEMENT, get_vhosts},
    {EVHTTP_REQ_GET, "/api/vhosts/{}", TAG_MANAGEMENT, get_vhost},
    {EVHTTP_REQ_GET, "/api/health/checks/alarms", TAG_MANAGEMENT, get_alarms},
    {EVHTTP_REQ_GET, "/api/health/checks/local-alarms", TAG_MANAGEMENT, get_alarms},
    {EVHTTP_REQ_GET, "/api/health/checks/virtual-hosts", TAG_MANAGEMENT, get_vhosts_health},
    {EVHTTP_REQ_GET, "/api/aliveness-test/{}", TAG_MANAGEMENT, get_aliveness},
    {EVHTTP_REQ_GET, "/api/extensions", TAG_MANAGEMENT, get_extensions},
    {EVHTTP_REQ_GET, "/api/environment", TAG_ADMINISTRATOR, get_environment},
    {0},
};
