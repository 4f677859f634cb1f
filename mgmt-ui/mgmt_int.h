/* Private to mgmt-ui/: the request, the route tables of the resource
 * families and the helpers their handlers share. */
#ifndef WARREN_MGMT_INT_H
#define WARREN_MGMT_INT_H

#include <event2/http.h> /* query parsing */
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <sys/queue.h>

#include "../cluster/cluster.h"
#include "../http/http.h"
#include "../shovel/shovel.h"
#include "mgmt.h"

/* User tags; administrator implies the others, monitoring and policymaker
 * imply management. */
enum {
    TAG_MANAGEMENT = 1,
    TAG_POLICYMAKER = 2,
    TAG_MONITORING = 4,
    TAG_ADMINISTRATOR = 8,
};

typedef struct mgmt_user {
    char name[128];
    unsigned tags;
    bool local; /* the control socket's local administrator (no user) */
} mgmt_user;

/* A sampling window from ?msg_rates_age=&msg_rates_incr= (seconds). */
typedef struct mgmt_window {
    uint32_t age_s, incr_s; /* 0 = just the rate */
} mgmt_window;

#define MGMT_PATH_BUF 2048

typedef struct mgmt_route mgmt_route;
typedef struct mgmt_prometheus mgmt_prometheus;

/* ---- the management plane's share of the loop (work.c) --------------------- */

/* A piece of management work, run a step at a time by the scheduler. A
 * step does a bounded amount (a handler, a phase, a slice) and queues the
 * job again when more is ready at once. */
typedef struct mgmt_job mgmt_job;
struct mgmt_job {
    void (*step)(mgmt_job *j); /* may free the job */
    TAILQ_ENTRY(mgmt_job) link;
    bool queued;
};
typedef struct mgmt_work mgmt_work;
/* NULL on OOM. Free it after every job is gone or cancelled. */
mgmt_work *mgmt_work_new(struct event_base *base);
void mgmt_work_free(mgmt_work *w);
/* Runs j's step in a later loop turn (no-op when already queued). */
void mgmt_work_queue(mgmt_work *w, mgmt_job *j);
/* Takes j out of the queue (no-op when not queued). */
void mgmt_work_cancel(mgmt_work *w, mgmt_job *j);
/* The server's scheduler (http.c). */
mgmt_work *mgmt_work_of(const mgmt *m);
/* A monotonic clock in microseconds, for step budgets. */
uint64_t mgmt_now_us(void);

typedef struct mgmt_req {
    mgmt *m;
    server *s;
    http_req *req; /* NULL once the reply is sent (the server frees it) */
    http_method method;
    const mgmt_route *route;
    mgmt_job job; /* the handler's run */
    /* Set by a handler that keeps the request (a list reply): called instead
     * of freeing r when the client goes away first. */
    void (*on_abort)(void *arg);
    void *on_abort_arg;
    bool control; /* came on the control socket */
    bool streaming;
    mgmt_user user;
    amqp_bytes cap[4];
    int ncap;
    char path_buf[MGMT_PATH_BUF];
    struct evkeyvalq query;
    bool disable_stats;
    mgmt_window msg_window, len_window;
    json_t *body; /* parsed by mgmt_body */
    struct mgmt_scratch *scratch; /* mgmt_scratch's blocks */
    struct evbuffer *out; /* the reply being written */
    mgmt_json *w;
} mgmt_req;

/* Frees a request whose reply has been sent (list_reply.c frees its own); one
 * whose handler sent nothing is answered 500 first. */
void mgmt_req_free(mgmt_req *r);

typedef void (*mgmt_handler)(mgmt_req *r);

struct mgmt_route {
    http_method method;
    const char *pattern; /* "/api/queues/{}/{}" */
    unsigned tag;        /* required tag */
    mgmt_handler fn;
};

/* Each resource family's table, ended by a zero row. */
extern const mgmt_route mgmt_overview_routes[];
extern const mgmt_route mgmt_connection_routes[];
extern const mgmt_route mgmt_stream_routes[];      /* res_stream.c */
extern const mgmt_route mgmt_stream_conn_routes[]; /* res_stream_conn.c */
/* Stream connections in /api/connections, as RabbitMQ 3.10 lists them
 * there too (res_stream_conn.c): added to a list (of vhost `only`, NULL:
 * all, those the user sees), rendered by id (false: gone), found by name
 * (its user in *user; NULL when none). */
void mgmt_stream_conns_add(mgmt_req *r, mgmt_list *l, vhost *only);
bool mgmt_stream_conn_render(mgmt_req *r, mgmt_json *w, uint64_t id, bool listed);
sconn *mgmt_stream_conn_named(mgmt_req *r, amqp_bytes name, const char **user);
extern const mgmt_route mgmt_exchange_routes[];
extern const mgmt_route mgmt_ring_routes[]; /* res_ring.c: x-consistent-hash rings */
extern const mgmt_route mgmt_queue_routes[];
extern const mgmt_route mgmt_binding_routes[];
extern const mgmt_route mgmt_vhost_routes[];
extern const mgmt_route mgmt_user_routes[];
extern const mgmt_route mgmt_permission_routes[];
extern const mgmt_route mgmt_policy_routes[];
extern const mgmt_route mgmt_health_routes[];
extern const mgmt_route mgmt_definitions_routes[];
extern const mgmt_route mgmt_move_routes[]; /* res_move.c */
extern const mgmt_route mgmt_parameter_routes[]; /* res_parameter.c */
extern const mgmt_route mgmt_node_routes[];      /* res_node.c */
extern const mgmt_route mgmt_limits_routes[];    /* res_limits.c */
extern const mgmt_route mgmt_federation_routes[]; /* res_federation.c */
extern const mgmt_route mgmt_shovel_routes[];    /* res_shovel.c */
/* The shovels of this node (NULL: none), for res_shovel.c, res_parameter.c
 * (a change of a shovel parameter syncs them) and the metrics. */
shovels *mgmt_shovels_of(const mgmt *m);
extern const mgmt_route mgmt_super_stream_routes[]; /* res_super_stream.c */
extern const mgmt_route mgmt_cluster_routes[];      /* res_cluster.c */

/* ---- the cluster this node leads (res_cluster.c) ------------------------ */

/* NULL for a single node (http.c). */
cluster *mgmt_cluster_of(const mgmt *m);
/* Its status; false for a single node. */
bool mgmt_cluster_status(const mgmt *m, cluster_status *st);
/* The cluster's name for /api/overview and the identity metric: the
 * cluster's, or for a single node its node name (as before clusters). */
const char *mgmt_cluster_name(const mgmt *m, server *s, char *buf, size_t cap);
/* This node's cluster fields inside its /api/nodes object (nothing for a
 * single node), and the other nodes' objects after it. */
void mgmt_cluster_self_fields(mgmt_req *r, mgmt_json *w);
void mgmt_cluster_peers_json(mgmt_req *r, mgmt_json *w);
/* GET /api/nodes/{name} of another node of the cluster: replied, true;
 * false when no node of the cluster has that name. */
bool mgmt_cluster_peer_send(mgmt_req *r, amqp_bytes name);
/* What the limits refused, by kind: the server's counts (server_counts'
 * refused[], REFUSALS of them) and then the management listener's own
 * (connections refused when full and evicted, head and body timeouts),
 * as /api/overview's "refused" and /metrics' warren_refused_total{kind}
 * show them (res_overview.c). */
#define MGMT_HTTP_REFUSALS 4
#define MGMT_REFUSALS (REFUSALS + MGMT_HTTP_REFUSALS)
extern const char *const mgmt_refusal_names[MGMT_REFUSALS];
void mgmt_refusal_counts(const mgmt *m, server *s, uint64_t out[MGMT_REFUSALS]);
/* The management listeners' (TCP and control socket) counts, in the
 * order of mgmt_refusal_names after REFUSALS (http.c). */
void mgmt_http_refusals(const mgmt *m, uint64_t out[MGMT_HTTP_REFUSALS]);

/* The port the HTTP listener bound (http.c). */
int mgmt_port(const mgmt *m);
/* The Prometheus listener, NULL when it is not served (http.c), and the
 * port it bound (prometheus.c). */
mgmt_prometheus *mgmt_prometheus_of(const mgmt *m);
int mgmt_prometheus_port(const mgmt_prometheus *p);
/* Binds `h` to ip:port and logs "WHAT listening on HOST:PORT"; the bound
 * port in *bound. False (logged, errno kept) when it cannot (http.c). */
bool mgmt_http_bind(http_server *h, const char *ip, int port, const char *what, int *bound);
/* Binds the listeners after the first (management.listeners.tcp.*,
 * prometheus.listeners.tcp.*), each logged; false when one cannot be. */
bool mgmt_http_bind_more(http_server *h, const config_listeners *more, const char *what);
/* Whether the plain HTTP listener is served: not when TLS is on and no
 * <prefix>.tcp.port or <prefix>.listeners.tcp.* key was given (RabbitMQ
 * then serves HTTPS alone); the port then reads 0. */
bool mgmt_plain_wanted(bool tls_on, bool tcp_port_set, const config_listeners *more);
/* An HTTPS listener of `h` from `c` (management.ssl.*, prometheus.ssl.*;
 * nothing when its port is not set), logged "<what> over TLS listening on
 * ip:port", its certificates reloaded with the server's others (https.c).
 * False, logged, when its context or socket cannot be made. */
typedef struct mgmt_https {
    http_server *http; /* NULL: none */
    int port;          /* bound */
    const config_tls_http *cfg;
    const char *what;
} mgmt_https;
bool mgmt_https_listen(mgmt_https *t, server *s, http_server *h, const config_tls_http *c,
                       const char *what);
/* The HTTPS listeners (NULL: none). */
const mgmt_https *mgmt_https_of(const mgmt *m);
const mgmt_https *mgmt_prometheus_https(const mgmt_prometheus *p);
/* The HTTP server limits the management settings ask for (http.c). */
http_limits mgmt_http_limits(const config *cfg);
/* HTTP basic logins tried and refused since start (counted by http.c). */
void mgmt_auth_counted(const mgmt *m, uint64_t *attempts, uint64_t *failed);

/* prometheus.c: GET /metrics, /metrics/per-object and /metrics/detailed
 * on prometheus.tcp.ip:port, its own HTTP server on the loop. NULL when
 * the port cannot be bound (logged; fatal only for a configured port, as
 * mgmt_new decides). */
mgmt_prometheus *mgmt_prometheus_new(mgmt *m, server *s);
void mgmt_prometheus_free(mgmt_prometheus *p);

/* prom_metrics.c: what one scrape writes. /metrics: every family, summed
 * over the objects unless per_object; /metrics/per-object: per_object;
 * /metrics/detailed: `detailed`, only the families asked for (RabbitMQ's
 * family= names), per object, named rabbitmq_detailed_ / rabbitmq_cluster_,
 * their queues only those of the vhosts asked for when vhost_filter. */
typedef struct prom_options {
    bool per_object;
    bool detailed;
    uint32_t families;            /* prom_family_bit of each one asked for */
    bool vhost_filter;            /* vhost= was given */
    const char *const *vhosts;    /* its values, read by prom_scrape_new only */
    size_t nvhosts;
} prom_options;
/* The bit of a /metrics/detailed family ("queue_coarse_metrics", ...); 0
 * for a name Warren writes nothing for (unknown, or a RabbitMQ family of
 * what Warren has not: Erlang, Raft, the message store). */
uint32_t prom_family_bit(const char *name);

/* One scrape. new takes the snapshot (aggregated: the sums; per object:
 * the names and ids) and writes nothing; each step writes about `budget`
 * bytes into w and returns true once the scrape is complete. NULL on OOM. */
typedef struct prom_scrape prom_scrape;
prom_scrape *prom_scrape_new(mgmt *m, server *s, const prom_options *o, mgmt_prom *w);
bool prom_scrape_step(prom_scrape *sc, size_t budget);
void prom_scrape_free(prom_scrape *sc);

/* When the oldest delivery from q still unacked was made (loop_now_ms
 * clock), 0 when none (res_queue.c). */
uint64_t mgmt_queue_oldest_unacked(server *s, queue *q);

/* The process as /proc shows it (res_overview.c). */
uint64_t mgmt_rss_bytes(void);
uint64_t mgmt_fds_used(void);

/* ---- node values and their rates (sampler.c) -------------------------------- */

typedef enum node_field {
    NODE_CONNECTION_CREATED, NODE_CONNECTION_CLOSED, NODE_CHANNEL_CREATED, NODE_CHANNEL_CLOSED,
    NODE_QUEUE_DECLARED, NODE_QUEUE_CREATED, NODE_QUEUE_DELETED,
    NODE_MEM_USED, NODE_FD_USED, NODE_SOCKETS_USED, NODE_DISK_FREE, NODE_JOURNAL_BYTES,
    NODE_FIELDS
} node_field;
typedef struct mgmt_sampler mgmt_sampler;
/* Samples every 5 s on the server's loop from now on; NULL on OOM. */
mgmt_sampler *mgmt_sampler_new(server *s);
void mgmt_sampler_free(mgmt_sampler *sm);
/* The server's sampler (http.c); NULL when it could not be set up (rates 0). */
mgmt_sampler *mgmt_sampler_of(const mgmt *m);
/* Every node value now. */
void mgmt_node_now(server *s, uint64_t out[NODE_FIELDS]);
/* Change per second between the last two samples (0 before there are two). */
double mgmt_sampler_rate(const mgmt_sampler *sm, node_field f);
/* "key": now[f], "key_details": {"rate": ...} */
void mgmt_node_stat(mgmt_json *w, const mgmt_sampler *sm, const char *key, const uint64_t *now,
                    node_field f);
/* The churn counters as RabbitMQ names them (channel_closed ...
 * queue_deleted), each with its _details. */
void mgmt_churn_json(mgmt_json *w, const mgmt_sampler *sm, const uint64_t *now);

/* auth.c: fills r->user from the Authorization header (or the control
 * socket's local administrator). False when the request has no valid
 * credentials; *had_credentials says whether it carried any. */
bool mgmt_authenticate(mgmt_req *r, bool *had_credentials);

/* What the user may see, as RabbitMQ decides it (auth.c). An administrator
 * sees every vhost and what is in it; anyone else only the vhosts where it
 * has permissions. The vhost list itself also shows every vhost to a
 * monitoring user, and connections and channels of other users are shown
 * to administrators and monitoring users only. */
bool mgmt_vhost_allowed(mgmt_req *r, vhost *v);
bool mgmt_lists_all_vhosts(mgmt_req *r);
bool mgmt_sees_user(mgmt_req *r, const char *user);
/* Whether v is shown to the user: mgmt_vhost_allowed, or a monitoring
 * user (RabbitMQ's is_authorized_vhost_visible_for_monitoring). */
bool mgmt_vhost_visible(mgmt_req *r, vhost *v);
/* Whether the request may act on a connection or channel of user `owner`,
 * as RabbitMQ's is_authorized_user decides by method: its own always;
 * another user's may be read by administrators and monitoring users
 * (mgmt_sees_user) but closed (DELETE) by administrators only. */
bool mgmt_user_object_allowed(mgmt_req *r, const char *owner);
/* Whether the user's permissions in v allow `kind` on resource `name`
 * ("" = the default exchange): 1 yes, 0 no, -1 no permissions in v at all.
 * RabbitMQ checks them for every change made through the API, an
 * administrator's too; the local administrator is not checked. */
int mgmt_permission(mgmt_req *r, vhost *v, access_kind kind, amqp_bytes name);
/* mgmt_permission, replying 401 "Access refused." (RabbitMQ's words) and
 * returning false unless it is 1. */
bool mgmt_permission_check(mgmt_req *r, vhost *v, access_kind kind, amqp_bytes name);

/* ---- replies (http.c) ---------------------------------------------------- */

/* A JSON reply: write into the returned writer, then mgmt_send. */
mgmt_json *mgmt_reply(mgmt_req *r);
void mgmt_send(mgmt_req *r, int status);
/* An empty reply (201, 204) with optional Location. */
void mgmt_send_empty(mgmt_req *r, int status, const char *location);
/* RabbitMQ's error body {"error": error, "reason": reason}. */
void mgmt_error(mgmt_req *r, int status, const char *error, const char *reason);
void mgmt_errorf(mgmt_req *r, int status, const char *error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 400 {"error":"bad_request","reason":[what, value]}, RabbitMQ's form for a
 * body field of the wrong type: value is `json` (any JSON) or `str`. */
void mgmt_bad_value(mgmt_req *r, const char *what, const json_t *json, const char *str);
/* 400 bad_request with `text` escaped as RabbitMQ escapes every
 * bad_request reason (rabbit_mgmt_format's escape_html_tags: < and >
 * only) -- validation texts that quote Erlang binaries (res_policy.c). */
void mgmt_error_escaped(mgmt_req *r, const char *text);
/* 404 {"error":"Object Not Found","reason":"Not Found"} */
void mgmt_not_found(mgmt_req *r);
/* An AMQP error from the broker as RabbitMQ's API reports it. */
void mgmt_amqp_error(mgmt_req *r, const amqp_error *err);
/* The text of an AMQP error without its "CODE_NAME - " prefix. */
const char *mgmt_error_text(const amqp_error *err);

/* The request body as a JSON object; replies 400 and returns NULL when it
 * is not one. An empty body is {}. */
json_t *mgmt_body(mgmt_req *r);
/* The body's "value" (any JSON, null too; parameters and limits), or NULL
 * with RabbitMQ's 400 "[{key_missing,value}]" (or mgmt_body's) sent. */
json_t *mgmt_body_value(mgmt_req *r);
/* n bytes of working memory for the handler (an argument table, encoded
 * properties), freed with the request: handlers keep no buffers in
 * statics. NULL, with a 500 reply sent, when memory is short. */
void *mgmt_scratch(mgmt_req *r, size_t n);
/* A request header, or NULL. */
const char *mgmt_header(mgmt_req *r, const char *name);
/* Adds a header to the reply. */
void mgmt_add_header(mgmt_req *r, const char *name, const char *value);
/* A query parameter, or NULL. */
const char *mgmt_query(mgmt_req *r, const char *key);
bool mgmt_query_true(mgmt_req *r, const char *key);

/* The vhost named by capture i, or NULL: 404 sent for an unknown one, 401
 * "User not authorised to access virtual host" for one the user may not
 * see (mgmt_vhost_allowed). */
vhost *mgmt_vhost_arg(mgmt_req *r, int i);
/* The same for a declaration (PUT of a queue or exchange), where RabbitMQ
 * answers an unknown vhost with 404 {"error":"not_found","reason":"vhost_not_found"}. */
vhost *mgmt_vhost_arg_declare(mgmt_req *r, int i);
/* The queue named by captures 0 (vhost) and 1, or NULL with the reply
 * sent: mgmt_vhost_arg's, or 404 for an unknown queue (res_queue.c). */
queue *mgmt_queue_arg(mgmt_req *r, vhost **v);
/* A capture as a NUL-terminated string in `buf` (bytes after a NUL cut). */
const char *mgmt_cap_str(mgmt_req *r, int i, char *buf, size_t cap);
/* Capture i as a user or vhost name in `buf`: false when it holds a NUL or
 * does not fit, so it names nothing (a cut name would name another). */
bool mgmt_cap_name(mgmt_req *r, int i, char *buf, size_t cap);

/* ---- lists (list_reply.c) ------------------------------------------------- */

/* The list query from the request; replies 400 and returns NULL when it
 * is invalid. */
mgmt_list *mgmt_list_begin(mgmt_req *r);
/* Renders one listed object; false when it is gone (skipped). */
typedef bool (*mgmt_render_fn)(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it);
/* Sorts and pages `l` (owned from here), then writes the list -- RabbitMQ's
 * paged envelope when ?page= was given -- in slices, yielding to the loop
 * between them. */
void mgmt_list_send(mgmt_req *r, mgmt_list *l, mgmt_render_fn fn);
/* A list of what is in the vhosts the user may see (`only`, when not
 * NULL): `add` adds the objects of one vhost to the list, then it is sent
 * as mgmt_list_send does. */
typedef void (*mgmt_vhost_add_fn)(mgmt_req *r, mgmt_list *l, vhost *v);
void mgmt_vhosts_list_send(mgmt_req *r, vhost *only, mgmt_vhost_add_fn add, mgmt_render_fn fn);
/* Renders one object as the whole reply (columns apply). */
void mgmt_object_send(mgmt_req *r, mgmt_render_fn fn, const mgmt_list_item *it);

/* ---- statistics rendering (stats_json.c) ---------------------------------- */

/* "key": value, "key_details": {"rate": r, samples...}; `f` names the
 * field in st's history (a counter or a gauge). */
void mgmt_stat(mgmt_req *r, mgmt_json *w, const char *key, uint64_t value, const stats *st,
               stat_id f);
/* "message_stats": {...} with the listed counters (deliver_get computed). */
void mgmt_message_stats(mgmt_req *r, mgmt_json *w, const stats *st, const stat_id *fields,
                        size_t n, bool deliver_get);
/* messages, messages_ready, messages_unacknowledged with their details. */
void mgmt_queue_totals(mgmt_req *r, mgmt_json *w, const stats *st, uint64_t ready,
                       uint64_t unacked);
/* A numeric sort key for "message_stats.X" / "message_stats.X_details.rate". */
bool mgmt_stat_sort_key(const stats *st, const char *sort, double *out);
/* Milliseconds to the ISO-ish form RabbitMQ uses ("2026-11-30 04:44:34"). */
void mgmt_format_time(uint64_t wall_ms, char *out, size_t cap);

/* ---- body fields (res_exchange.c) ------------------------------------------ */

/* A boolean field (true/false or "true"/"false"); absent gives dflt.
 * Replies 400 ["not_boolean", value] otherwise. */
bool mgmt_body_bool(mgmt_req *r, json_t *body, const char *key, bool dflt, bool *out);
/* An object field as an AMQP table (content, into buf); absent is empty.
 * Replies 400 with the conversion's reason otherwise. MGMT_TABLE_MAX is
 * the room handlers give an "arguments" table. */
#define MGMT_TABLE_MAX (64 * 1024)
bool mgmt_body_table(mgmt_req *r, json_t *body, const char *key, uint8_t *buf, size_t cap,
                     amqp_bytes *out);

/* ---- users, vhosts, permissions (res_vhost.c, res_perm.c) ------------------- */

/* A user's limits as RabbitMQ shows them: {"max-channels": N,
 * "max-connections": N}, the ones set (res_user.c). */
void mgmt_user_limits_json(mgmt_json *w, const access_user *u);

/* "tags" of a body, a comma-separated string or a list of strings, into
 * out as "a,b" (spaces trimmed, empty tags dropped); absent is "".
 * Replies 400 when it is neither or does not fit. */
bool mgmt_body_tags(mgmt_req *r, json_t *body, char *out, size_t cap);
/* A string field; absent or null gives dflt. Replies 400 otherwise. */
bool mgmt_body_str(mgmt_req *r, json_t *body, const char *key, const char *dflt,
                   const char **out);
/* "key": [tags] of a comma-separated tag list. */
void mgmt_tags_json(mgmt_json *w, const char *key, const char *csv);
/* The permissions (or topic permissions) of `user` and/or `vhost` (NULL =
 * any) as the 200 JSON array reply. */
void mgmt_permissions_send(mgmt_req *r, const char *user, const char *vhost, bool topic);

/* ---- bindings (res_binding.c) ---------------------------------------------- */

typedef struct mgmt_binding_filter {
    const route_exchange *source;        /* NULL = any */
    const queue *dest_queue;             /* NULL = any (unless dest_exchange) */
    const route_exchange *dest_exchange; /* NULL = any (unless dest_queue) */
    bool defaults;      /* include the default exchange's implicit bindings */
    bool only_defaults; /* and nothing else */
} mgmt_binding_filter;
/* The bindings of `v` that pass the filter, as a JSON array reply. */
void mgmt_bindings_send(mgmt_req *r, vhost *v, const mgmt_binding_filter *f);

/* ---- messages (res_message.c) ----------------------------------------------- */

void mgmt_post_publish(mgmt_req *r);
void mgmt_post_get(mgmt_req *r);

/* ---- shared renderers ----------------------------------------------------- */

/* "redrive": {"state", "total", "moved", "skipped", "remaining"} of the
 * running or last move from the queue, or null (res_move.c). */
void mgmt_move_summary(mgmt_json *w, vhost *v, amqp_bytes qname);

/* {"name": ..., "vhost": ...}-style connection, channel and consumer views
 * shared by the connection and queue families (res_conn.c). */
void mgmt_channel_details(mgmt_json *w, conn *c, chan *ch);
void mgmt_consumer_json(mgmt_req *r, mgmt_json *w, conn *c, chan *ch, const consumer *cons);
/* The AMQP 0-9-1 consumers of streams (of vhost `only`, or all) the user
 * sees, added to a stream-protocol consumer list (res_stream_conn.c)
 * with their ids marked MGMT_AMQP_ITEM, and rendered by this. */
#define MGMT_AMQP_ITEM (1ULL << 63)
void mgmt_amqp_stream_consumers_add(mgmt_req *r, mgmt_list *l, vhost *only);
bool mgmt_render_amqp_stream_consumer(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it);

/* ---- streams (res_stream.c) ------------------------------------------------ */

/* A stream queue's fields beside the common ones: messages (its records),
 * readers, and the log's figures (segments, offsets, bytes). */
void mgmt_stream_fields(mgmt_req *r, mgmt_json *w, const queue_info *qi);
/* "deduplication": {bytes, duplicates, entries, size} of an exchange's or
 * queue's cache (res_exchange.c). */
void mgmt_dedup_fields(mgmt_json *w, const dedup_info *di);
/* "offset", "offset_lag" of a stream's consumer; nothing for others. */
void mgmt_stream_consumer_offsets(mgmt_json *w, const consumer *cons);
/* A stream consumer as rabbitmq_stream_management lists it. */
void mgmt_stream_consumer_json(mgmt_req *r, mgmt_json *w, conn *c, chan *ch,
                               const consumer *cons);
/* Message fields as /get shows them: payload_bytes, exchange,
 * routing_key, properties, payload, payload_encoding (res_message.c). */
void mgmt_message_fields(mgmt_json *w, msg *m, bool base64, size_t truncate);

#endif
