/* core: what every broker module needs -- logging, configuration, messages,
 * statistics counters, and the server object (the process: configuration,
 * metadata store, journal, alarms) with its event loop.
 *
 * Everything runs on one libevent loop thread. Ownership in one line each:
 * the server owns connections and vhosts; a connection owns its channels; a
 * channel owns its consumers and its unacked deliveries; a vhost owns its
 * queues and its route_table; messages are reference counted and shared by
 * every queue entry and delivery that holds them.
 */
#ifndef WARREN_CORE_H
#define WARREN_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../amqp/amqp.h"
#include "../net/net.h" /* transports: the clients' byte streams */
#include "../routing/route.h"
#include "../store/store.h"

struct event_base;

/* Invariants the design notes state, checked in the ASan variant (make
 * test builds it with WARREN_INVARIANTS) and free in the release build. */
#ifdef WARREN_INVARIANTS
#include <assert.h>
#define invariant(cond) assert(cond)
#else
#define invariant(cond) ((void)sizeof(cond))
#endif
struct evbuffer;
struct sockaddr;

/* ---- logging ------------------------------------------------------------ */

typedef enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERROR, LOG_NONE } log_level;

/* Writes "YYYY-MM-DD hh:mm:ss.mmm [level] text" to stderr. */
void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_set_level(log_level level);
/* "debug", "info", "warning", "error", "none"; false if unknown. */
bool log_parse_level(const char *name, log_level *out);

/* ---- configuration ------------------------------------------------------ */

#define CONFIG_MAX_LOOPBACK_USERS 16
/* listeners per protocol (AMQP, management, Prometheus), the first included */
#define CONFIG_MAX_LISTENERS 16

/* One listener from a "<prefix>.<name> = [host:]port" key. */
typedef struct config_listener {
    char name[48]; /* the key's <name>: "default", "1", "local", ... */
    char host[64]; /* an IP literal; "" = every interface (see broker/broker.c) */
    int port;      /* 0 binds a free port */
} config_listener;

/* A protocol's listeners after its first, which stays in the config's
 * single fields (listen_host/listen_port, mgmt_ip/mgmt_port,
 * prometheus_ip/prometheus_port). */
typedef struct config_listeners {
    config_listener extra[CONFIG_MAX_LISTENERS - 1];
    unsigned n;
} config_listeners;

/* A TLS listener of the management API or Prometheus (management.ssl.*,
 * prometheus.ssl.*): on when its port is set. */
typedef struct config_tls_http {
    bool on;
    char ip[64]; /* "" = 0.0.0.0 */
    int port;
    tls_options tls;
} config_tls_http;

/* SASL mechanisms connection.start offers (auth_mechanisms.<n>). */
typedef enum config_auth_mech { AUTH_PLAIN, AUTH_AMQPLAIN, AUTH_EXTERNAL } config_auth_mech;
#define CONFIG_MAX_AUTH_MECHS 3
const char *config_auth_mech_name(config_auth_mech m);
/* What the memory alarm measures (vm_memory_calculation_strategy): the
 * process's resident set (rss, RabbitMQ's default), what the allocator
 * holds (allocated: mallinfo2), or only the bytes messages hold (legacy,
 * Warren's measure before; "erlang" is RabbitMQ's alias of legacy). */
typedef enum config_memory_strategy {
    CONFIG_MEMORY_RSS,
    CONFIG_MEMORY_ALLOCATED,
    CONFIG_MEMORY_LEGACY,
} config_memory_strategy;

#define CONFIG_MAX_ETCD 9

typedef struct config {
    /* AMQP listeners, RabbitMQ's listeners.tcp.<name> = [host:]port: the
     * first here, the others in amqp_more. The default is one, named
     * "default", on every interface, port 5672; the first listeners.tcp.*
     * key replaces it (as RabbitMQ's translation builds the list from those
     * keys alone), a name set again replaces its listener.
     * listeners.tcp = none: no AMQP listener at all. */
    char listen_name[48];
    char listen_host[64]; /* "" = every interface, IPv6 and IPv4 (broker/broker.c) */
    int listen_port;      /* 0 binds a free port */
    bool listeners_explicit; /* a listeners.tcp.<name> key replaced the default */
    bool listeners_none;     /* listeners.tcp = none */
    config_listeners amqp_more;
    char default_user[64];
    char default_pass[64];
    char default_vhost[64];
    /* loopback_users: users who may log in only from 127.0.0.0/8 or ::1.
     * RabbitMQ's rule: with no loopback_users key it is guest alone; the
     * first loopback_users.<name> key replaces that default (the users set
     * to true are the list); "loopback_users = none" empties it whatever
     * else is set. See config_loopback_only. */
    char loopback_users[CONFIG_MAX_LOOPBACK_USERS][256];
    unsigned nloopback_users;
    bool loopback_explicit; /* a loopback_users.<name> key replaced the default */
    bool loopback_none;     /* loopback_users = none */
    unsigned heartbeat;      /* seconds; 0 disables */
    uint32_t frame_max;
    uint16_t channel_max;
    uint64_t max_message_size;
    log_level log_level;
    char data_dir[512];
    unsigned handshake_timeout_ms;
    size_t conn_output_limit; /* bytes queued for a client before we stop delivering */
    double memory_high_watermark;      /* vm_memory_high_watermark.relative */
    uint64_t memory_high_watermark_abs; /* .absolute, bytes; 0 = use relative */
    journal_sync_mode journal_sync;     /* journal.sync */
    uint64_t journal_segment_size;      /* journal.segment_size */
    char mgmt_ip[64];                   /* management.tcp.ip */
    int mgmt_port;                      /* management.tcp.port; 0 = a free port */
    bool mgmt_port_set;                 /* given in the file or --set, not the default */
    /* The management listener's limits (http/http.h): a request's body
     * (management.http.max_body_size, RabbitMQ's key), connections open at
     * once (management.http.max_connections), the time a request head and
     * a body may take to arrive (management.http.head_timeout,
     * .body_timeout, ms) and the time a connection may sit idle between
     * requests or not read a reply (management.tcp.idle_timeout, ms). */
    uint64_t mgmt_max_body;
    unsigned mgmt_max_connections;
    unsigned mgmt_head_timeout_ms, mgmt_body_timeout_ms, mgmt_idle_timeout_ms;
    /* consumer_timeout: ms a delivery may stay unacked, 0 = no limit. What
     * happens then (consumer_timeout.action): cancel_consumer (default:
     * only that consumer is cancelled and its unacked deliveries requeued,
     * as RabbitMQ 4.3's quorum queues do) or close_channel (RabbitMQ 3.x:
     * 406 on the channel). */
    uint64_t consumer_timeout_ms;
    bool consumer_timeout_close_channel;
    char prometheus_ip[64];             /* prometheus.tcp.ip */
    int prometheus_port;                /* prometheus.tcp.port; 0 = a free port */
    bool prometheus_port_set;
    /* management.listeners.tcp.<name> = [host:]port (Warren's; RabbitMQ
     * has one management TCP listener): more listeners of the API, after
     * the one of management.tcp.ip/port; a port alone means 0.0.0.0, as
     * management.tcp.port alone does */
    config_listeners mgmt_more;
    config_listeners prometheus_more;   /* prometheus.listeners.tcp.<name>, as mgmt_more */
    bool prometheus_per_object;         /* prometheus.return_per_object_metrics */
    char load_definitions[512];         /* a definitions file imported at every start; "" = none */
    /* login_brake.* (Warren's, see brake.c): `failures` refused logins
     * (0 = no brake) from one address within `window` ms brake it for
     * `duration` ms; loopback addresses only with login_brake.loopback;
     * at most `max_held` refused connections held at once */
    uint32_t login_brake_failures, login_brake_window_ms, login_brake_duration_ms;
    uint32_t login_brake_max_held;
    bool login_brake_loopback;
    /* limits (README "Limits"): AMQP sockets open at once, RabbitMQ's
     * connection_max (0 = infinity); consumers per channel, Warren's
     * consumer_max_per_channel (RabbitMQ 3.12's key; 0 = infinity) */
    uint32_t connection_max;
    uint32_t consumer_max_per_channel;
    /* TLS (RabbitMQ's keys): AMQPS listeners listeners.ssl.<name> =
     * [host:]port (none by default) with ssl_options.*; the HTTPS
     * listeners of the management API and Prometheus; where SASL EXTERNAL
     * takes the user name (ssl_cert_login_from, _san_type, _san_index);
     * the mechanisms offered, in order (default PLAIN, AMQPLAIN). */
    config_listeners amqps;
    tls_options amqp_tls;
    config_tls_http mgmt_tls, prometheus_tls;
    tls_name_from cert_login_from;
    tls_san_type cert_login_san_type;
    unsigned cert_login_san_index;
    config_auth_mech auth_mechs[CONFIG_MAX_AUTH_MECHS];
    unsigned nauth_mechs;
    bool auth_mechs_explicit; /* an auth_mechanisms.<n> key replaced the default */
    /* Resource alarms (core/config_alarms.c): vm_memory_calculation_strategy,
     * vm_memory_high_watermark_paging_ratio, disk_free_limit.absolute (bytes,
     * RabbitMQ's units taken) or .relative (to the RAM; 0 = absolute), and
     * Warren's disk_monitor.max_interval (ms): the longest wait between two
     * free-space checks -- nearer the limit they come faster, as RabbitMQ's. */
    config_memory_strategy memory_strategy;
    double memory_paging_ratio;
    uint64_t disk_free_limit;
    double disk_free_limit_relative;
    uint32_t disk_check_max_interval_ms;
    /* The stream protocol (streamconn/; core/config_stream.c), RabbitMQ's
     * stream plugin's keys: its listeners, stream.listeners.tcp.<name> =
     * [host:]port, all in stream_listeners (the default: "default" on
     * every interface, 5552; the first key replaces it; = none: none);
     * what Metadata and Open name as this node (stream.advertised_host,
     * "" = the node's host name; stream.advertised_port, 0 = the first
     * listener's bound port); what Tune offers (stream.frame_max, 8192..1
     * GiB, and stream.heartbeat, seconds, 0 = none). */
    config_listeners stream_listeners;
    bool stream_listeners_explicit, stream_listeners_none;
    char stream_advertised_host[256];
    int stream_advertised_port;
    uint32_t stream_frame_max;
    uint32_t stream_heartbeat;
    /* A cluster (cluster/; core/config_cluster.c): on when any
     * cluster.etcd.endpoints.<n> is set. etcd's client URLs (http:// or
     * https://ip:port), this cluster's and node's names (keys under
     * warren/<name>/ in etcd; the node name defaults to the host name),
     * the address followers and peers reach this node at, the replication
     * listener's port, the in-sync replica minimum counting the leader
     * (confirms wait below it), the leader lease's TTL (s), how long a
     * follower may go without acknowledging before it leaves the ISR (ms),
     * and etcd credentials. */
    struct {
        char endpoints[CONFIG_MAX_ETCD][128];
        unsigned n_endpoints;
        char name[64], node_name[64];
        char advertised_host[256];
        int replication_port;
        unsigned min_isr;
        unsigned lease_ttl_s;
        unsigned isr_timeout_ms;
        char etcd_user[64], etcd_password[128];
        /* TLS (cluster.ssl.*): the CA that signs every node's and etcd's
         * certificate, this node's certificate and key; https:// etcd
         * endpoints use them, and so does replication when
         * cluster.replication.ssl is true (both ends present certificates). */
        char ssl_cacertfile[512], ssl_certfile[512], ssl_keyfile[512];
        bool replication_ssl;
    } cluster;
} config;

/* Sets RabbitMQ's defaults. */
void config_defaults(config *c);

/* A number of bytes with RabbitMQ's information units ("50000000", "50MB",
 * "1GB" -- powers of 1000 --, "512MiB", "512M", "2GiB", "k" -- powers of
 * 1024); false when it is not one or out of min..max (reason in `why`). */
bool config_parse_bytes(const char *v, uint64_t min, uint64_t max, uint64_t *out, char *why,
                        size_t whylen);

/* Reads `path` (RabbitMQ's "key = value" format, # comments). On failure
 * writes "path:line: reason" to `err` and returns false. */
bool config_load_file(config *c, const char *path, char *err, size_t errlen);

/* Applies one "key=value" override; `origin` names it in errors. */
bool config_set(config *c, const char *key, const char *value, const char *origin, char *err,
                size_t errlen);

/* Whether loopback_users makes `user` a loopback-only user. */
bool config_loopback_only(const config *c, const char *user);

/* ---- messages ----------------------------------------------------------- */

/* A published message, stored once and shared by reference. Everything the
 * delivery needs (exchange, routing key, raw properties, body) lives in one
 * allocation; the body sits behind msg_body() so a journal-backed store can
 * supply it later without changing callers. */
typedef struct msg msg;

/* Message ids: unique in the process (the journal's key), so one source
 * for every loop; a pool takes them from it in blocks. The pool (one per
 * loop) keeps freed blocks for reuse and counts the RAM its messages hold.
 * A message goes back to the pool it came from. */
typedef struct msg_ids msg_ids;
typedef struct msg_pool msg_pool;
msg_ids *msg_ids_new(void);
void msg_ids_free(msg_ids *ids);
msg_pool *msg_pool_new(msg_ids *ids);
/* After every message of the pool was freed. */
void msg_pool_free(msg_pool *p);
/* Bytes of RAM held by the pool's live messages (the memory alarm's measure). */
size_t msg_pool_memory(const msg_pool *p);
/* New ids start above `max_used` (recovery, before any traffic). */
void msg_reserve_ids(msg_pool *p, uint64_t max_used);

/* Allocates a message able to hold `body_size` bytes; refs = 1. NULL on OOM. */
msg *msg_new(msg_pool *pool, amqp_bytes exchange, amqp_bytes routing_key, amqp_bytes properties,
             uint64_t body_size);
/* A message whose body is still to come (content assembly). With
 * `inline_body` it is msg_new: room for the whole body in the one
 * allocation. Without, the body's memory is allocated as msg_append_body
 * brings bytes, so a declared size costs nothing until it arrives. */
msg *msg_new_incoming(msg_pool *pool, amqp_bytes exchange, amqp_bytes routing_key, amqp_bytes properties,
                      uint64_t body_size, bool inline_body);
void msg_ref(msg *m);
void msg_unref(msg *m);
/* Appends a body fragment; returns false if it would exceed body_size, or
 * when memory for it cannot be had (the message is unchanged then). */
bool msg_append_body(msg *m, const uint8_t *p, size_t n);
bool msg_complete(const msg *m);
uint64_t msg_id(const msg *m);
amqp_bytes msg_exchange(const msg *m);
amqp_bytes msg_routing_key(const msg *m);
amqp_bytes msg_properties(const msg *m);
const uint8_t *msg_body(const msg *m);
uint64_t msg_body_size(const msg *m);
/* Bytes of RAM the message holds (for statistics and limits). */
size_t msg_memory(const msg *m);
/* delivery-mode 2 */
bool msg_persistent(const msg *m);
/* Journal location of a journaled message; false (and *loc unset) if not. */
bool msg_journaled(const msg *m);
bool msg_journal_loc(const msg *m, journal_loc *loc);
void msg_set_journal_loc(msg *m, journal_loc loc);
/* A message that is not persistent (delivery mode 2) but was journaled
 * because a quorum queue took it: only quorum queues keep it there. */
bool msg_journaled_transient(const msg *m);
void msg_set_journaled_transient(msg *m);
/* Recovery: the message keeps the id and location it had before. */
void msg_restore_identity(msg *m, uint64_t id, journal_loc loc);
/* Copies a message with new exchange, routing key and properties (used to
 * dead-letter); NULL on OOM. */
msg *msg_copy_with(msg_pool *pool, const msg *m, amqp_bytes exchange, amqp_bytes routing_key,
                   amqp_bytes properties);
/* m's properties with the header x-delivery-count = count (RabbitMQ's
 * quorum queue header: how often the message was returned), replacing one
 * the publisher set, encoded into buf (cap bytes) or, when they do not
 * fit, into *heap (malloc'd, the caller frees it). Returns their length, 0
 * when they cannot be had. */
size_t msg_delivery_count_properties(const msg *m, uint32_t count, uint8_t *buf, size_t cap,
                                     uint8_t **heap);
/* The same message with other properties (headers changed by the broker);
 * NULL on OOM. Properties slices need only live during the call. */
msg *msg_with_properties(msg_pool *pool, const msg *m, const amqp_basic_properties *p);

/* ---- objects ------------------------------------------------------------ */

/* One message in a queue, or delivered from it: the shared message, how
 * often it was delivered before, when it entered the queue and when it
 * expires by its own expiration (ms on the server's monotonic clock; the
 * queue's x-message-ttl counts from enqueued_at). Requeueing keeps both, as
 * RabbitMQ keeps a message's expiry. */
typedef struct queue_item {
    msg *m;
    uint32_t seq; /* its place in the queue: a requeue puts it back there */
    uint32_t delivery_count;
    bool maybe_delivered; /* recovered after a crash: delivered or not, we can't tell */
    uint64_t enqueued_at; /* when it entered the queue (loop_now_ms) */
    uint64_t expires_at;  /* its own expiration (loop_now_ms clock); 0 = none */
} queue_item;


typedef struct server server;
typedef struct vhost vhost;
typedef struct conn conn;
typedef struct chan chan;
typedef struct queue queue;
typedef struct consumer consumer;
typedef struct access_control access_control; /* users and permissions (access.c) */
typedef struct policy_set policy_set;
typedef struct policy_applied policy_applied;
typedef struct param_set param_set;
typedef struct login_brake login_brake; /* access/brake.c */
typedef struct sconn_hub sconn_hub;     /* stream-protocol connections (streamconn/) */
typedef struct federation federation;   /* the federation links (federation/) */


/* ---- queue types and dead-letter reasons (counted by server_counts) ---- */

enum { QUEUE_TYPE_CLASSIC, QUEUE_TYPE_QUORUM, QUEUE_TYPE_STREAM, QUEUE_TYPES };
/* Why a message was dead-lettered (x-death's reason), for the counts. */
typedef enum dead_reason {
    DEAD_MAXLEN, DEAD_EXPIRED, DEAD_REJECTED, DEAD_DELIVERY_LIMIT, DEAD_REASONS
} dead_reason;
/* What the queue did with a dead letter, RabbitMQ's dead_letter_strategy
 * label: no dead-letter exchange (or a missing one), at-most-once (to the
 * exchange, whether a queue took it or not), at-least-once (quorum). */
typedef enum dead_strategy {
    DEAD_DISABLED, DEAD_AT_MOST_ONCE, DEAD_AT_LEAST_ONCE, DEAD_STRATEGIES
} dead_strategy;

/* ---- statistics (stats.c) ----------------------------------------------- */

/* Message and byte counters kept per queue, exchange, channel, connection
 * and vhost for the management API. The hot path only increments them
 * (st->n[STAT_PUBLISH]++); one timer every STATS_INTERVAL_MS samples every
 * object into a short history, from which rates are computed when asked. */
typedef enum stat_id {
    STAT_PUBLISH, STAT_PUBLISH_IN, STAT_PUBLISH_OUT, STAT_CONFIRM,
    STAT_DELIVER, STAT_DELIVER_NO_ACK, STAT_GET, STAT_GET_NO_ACK, STAT_GET_EMPTY,
    STAT_ACK, STAT_REDELIVER, STAT_RETURN_UNROUTABLE, STAT_DROP_UNROUTABLE,
    STAT_RECV_OCT, STAT_SEND_OCT, STAT_RECV_CNT, STAT_SEND_CNT,
    STAT_COUNTERS,
    /* gauges, sampled by the timer only */
    STAT_MESSAGES = STAT_COUNTERS, STAT_MESSAGES_READY, STAT_MESSAGES_UNACKED,
    STAT_FIELDS
} stat_id;

/* What a limit refused (README "Limits"), counted by kind. */
typedef enum refusal {
    REFUSED_CONN_VHOST_LIMIT,   /* connection.open over the vhost's max-connections */
    REFUSED_CONN_USER_LIMIT,    /* connection.open over the user's max-connections */
    REFUSED_CONN_MAX,           /* a socket over connection_max, closed at accept */
    REFUSED_QUEUE_VHOST_LIMIT,  /* queue.declare over the vhost's max-queues */
    REFUSED_CHAN_USER_LIMIT,    /* channel.open over the user's max-channels */
    REFUSED_CHAN_MAX,           /* channel.open over the negotiated channel_max */
    REFUSED_CONSUMER_CHAN_LIMIT, /* basic.consume over consumer_max_per_channel */
    REFUSED_FRAME_MAX,          /* a frame over the negotiated frame_max */
    REFUSED_MESSAGE_SIZE,       /* a body over max_message_size */
    REFUSED_LOGIN_BRAKE,        /* a login from a braked address */
    REFUSED_HTTP_BODY_SIZE,     /* an API request over management.http.max_body_size */
    REFUSALS
} refusal;

/* Counts since start that no single object keeps, for the management
 * plane's /metrics (rabbitmq_prometheus's churn and global counters). The
 * broker only increments them; none goes down when a vhost, queue or
 * channel goes away, as RabbitMQ's rabbit_global_counters. */
typedef struct server_counts {
    uint64_t connections_opened; /* connection.open accepted */
    uint64_t connections_closed; /* every closed client socket, handshake or not */
    uint64_t channels_opened, channels_closed;
    uint64_t queues_declared; /* non-passive declarations, refused ones too */
    uint64_t queues_created, queues_deleted;
    uint64_t auth_attempts, auth_failed; /* AMQP logins */
    /* basic.publish complete (before any check) and those on confirm or tx
     * channels, as RabbitMQ counts them; the management API's publish too */
    uint64_t messages_received, messages_received_confirm;
    uint64_t messages_routed;   /* queue copies: a message two queues took counts 2 */
    uint64_t messages_confirmed; /* basic.ack to publishers */
    uint64_t messages_dropped, messages_returned; /* unroutable */
    /* deliveries, gets, empty gets, acks, redeliveries (the STAT_DELIVER ..
     * STAT_REDELIVER slots) of the queues deleted so far, by queue type; a
     * live queue's are its own (queue_stats), so the hot path counts them
     * once. Their sum is RabbitMQ's count by queue type (which, like this,
     * leaves out what is settled after the queue is gone): admin_counts_by_type. */
    uint64_t by_queue_type[QUEUE_TYPES][STAT_COUNTERS];
    uint64_t dead_lettered[QUEUE_TYPES][DEAD_STRATEGIES][DEAD_REASONS];
    uint64_t dead_lettered_confirmed; /* at-least-once dead letters a queue took */
    uint64_t refused[REFUSALS]; /* by a limit (loop_refused), by kind */
} server_counts;

#define STATS_INTERVAL_MS 5000 /* RabbitMQ's collect_statistics_interval */
#define STATS_OBJECT_SAMPLES 13  /* one minute of 5 s samples, both ends */
#define STATS_RATE_SAMPLES 2     /* connections and channels: enough for a rate */
#define STATS_GLOBAL_SAMPLES 121 /* ten minutes, for the overview and vhosts */

typedef struct stats_hist stats_hist;
typedef struct stats {
    uint64_t n[STAT_COUNTERS];
    stats_hist *hist; /* NULL until the object first shows activity */
} stats;

/* One sampled value: the value at `ts_ms` (wall clock, ms). */
typedef struct stats_sample {
    uint64_t ts_ms;
    uint64_t v[STAT_FIELDS];
} stats_sample;

/* Records the counters and `gauges` (messages, ready, unacked; NULL = none)
 * as the sample at `now_wall_ms`, keeping `cap` samples. An object never
 * active costs no history. */
void stats_sample_now(stats *st, const uint64_t *gauges, uint64_t now_wall_ms, uint32_t cap);
/* Samples held, newest first: out[0] is the latest. Returns how many (at
 * most `max`). */
size_t stats_samples(const stats *st, const stats_sample **newest, size_t max);
/* The sample `age` back (0 = newest), or NULL. */
const stats_sample *stats_sample_at(const stats *st, size_t age);
/* Change per second of field `f` over the last sampling interval (0 when
 * fewer than two samples). */
double stats_rate(const stats *st, stat_id f);
void stats_free(stats *st);
/* Adds `src`'s counters to `dst`'s (no history). */
void stats_add(stats *dst, const stats *src);

/* An exchange's statistics, allocated at first use; NULL on OOM. */
stats *stats_of_exchange(route_exchange *ex);
/* route hook: the exchange is being freed. */
void stats_exchange_freed(void *ctx, route_exchange *ex);

/* ---- the loop (loop.c) --------------------------------------------------- */

/* What belongs to one event loop thread: its libevent base, the cached
 * clock, the end-of-turn flush list, the message pool, the statistics
 * counters and its connections. Objects reach their loop through their own
 * pointer (conn_loop, vhost_loop); nothing assumes there is only one. */
typedef struct loop loop;

/* The loop's event priorities: every event has the default (1); the
 * lowest (LOOP_PRIORITY_IDLE) runs only when nothing else is active. */
#define LOOP_PRIORITIES 3
#define LOOP_PRIORITY_IDLE 2

/* A loop with its own event base; its messages take ids from `ids`. NULL
 * on failure. loop_free: after its connections are gone. */
loop *loop_new(msg_ids *ids);
void loop_free(loop *l);
struct event_base *loop_base(loop *l);
transport_flusher *loop_flusher(loop *l);
msg_pool *loop_msgs(loop *l);
/* Counts this loop's connections, channels and messages add to (the
 * server's are the sum: server_counters). */
server_counts *loop_counters(loop *l);
/* Milliseconds on a monotonic clock, refreshed per read batch and tick. */
uint64_t loop_now_ms(const loop *l);
/* Refreshes the cached clock and counts activity (the polling window). */
void loop_touch_clock(loop *l);
uint64_t loop_activity(const loop *l);
/* A confirm or commit-ok waits for journal sequence `seq` (the loop does
 * not spin while the disk is what it waits for); the highest so far. */
void loop_journal_wait(loop *l, journal_seq seq);
journal_seq loop_journal_waited(const loop *l);
/* Bytes the unfinished message bodies of its connections hold (conn.c
 * keeps it against their share of server_content_limit). */
uint64_t *loop_content_held(loop *l);
/* A buffer of at least `want` bytes if it can be had (else what there is,
 * its size in *cap; NULL at first), reused by every read on the loop that
 * is done with it before the loop turns (paging messages in). */
uint8_t *loop_read_buffer(loop *l, size_t want, size_t *cap);
/* Where its queues page transient messages out while memory is short
 * (store's spill; broker/ sets it and frees it after the loop); NULL:
 * they stay in RAM. */
spill *loop_spill(loop *l);
void loop_set_spill(loop *l, spill *sp);
/* Its connections: opened (false when out of memory), listed once they
 * passed connection.open, closed. loop_conn_at(i) for i below
 * loop_socket_count; the first loop_conn_count of them are the listed. */
bool loop_conn_opened(loop *l, conn *c);
void loop_conn_listed(loop *l, conn *c);
void loop_conn_closed(loop *l, conn *c);
/* fn runs after each connection closed (the listener may accept again). */
void loop_on_conn_closed(loop *l, void (*fn)(void *ctx), void *ctx);
size_t loop_conn_count(const loop *l);
size_t loop_socket_count(const loop *l);
conn *loop_conn_at(loop *l, size_t i);
/* CLOCK_MONOTONIC_COARSE in ms. */
uint64_t monotonic_ms(void);
/* Counts a refusal of kind k and logs the line (a warning) -- at most one
 * line per kind per second, the next saying how many were not logged, so a
 * client repeating a refused request cannot flood the log. */
void loop_refused(loop *l, refusal k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- the server (server.c) ----------------------------------------------- */

/* What the whole process shares: the configuration, the metadata store and
 * journal, users and permissions, the login brake, the global runtime
 * parameters, the vhost registry, the alarms and limits, its loops and
 * what the management plane shows of the node. The modules above attach
 * their parts (server_set_*); broker/ builds and starts it all. */

/* The configuration (copied), one loop, the limits the watermark gives.
 * NULL when out of memory. server_free frees what it made; what was
 * attached is its owner's to free first. */
server *server_new(const config *cfg);
void server_free(server *s);

const config *server_config(const server *s);
size_t server_loop_count(const server *s);
loop *server_loop(server *s, size_t i);

void server_set_meta(server *s, meta *m);
void server_set_journal(server *s, journal *j);
void server_set_access(server *s, access_control *a);
void server_set_login_brake(server *s, login_brake *b);
void server_set_params(server *s, param_set *p);
/* The stream protocol's connections (streamconn/; NULL: none), for the
 * modules above it that reach every connection (vhost deletion, users,
 * the management API). */
void server_set_stream_hub(server *s, sconn_hub *h);
sconn_hub *server_stream_hub(server *s);
/* The federation links (federation/; NULL: none), for the management API. */
void server_set_federation(server *s, federation *f);
federation *server_federation(server *s);
/* Where queue/ keeps its stream queues' registry (what their commits
 * share with the journal); NULL until the first stream. */
struct stream_registry **server_streams(server *s);
/* The durable metadata store (data_dir/metadata.db) and message journal. */
meta *server_meta(server *s);
journal *server_journal(server *s);
/* Users and permissions (access/), the login brake, global parameters. */
access_control *server_access(server *s);
login_brake *server_login_brake(server *s);
param_set *server_params(server *s);

/* The vhost registry, by name. server_vhost: the one named `name`, or
 * NULL. foreach: in name order; fn must not create or delete vhosts.
 * next: in name order, NULL prev gives the first, NULL after the last.
 * insert: `name` must stay alive while registered (the vhost's own);
 * false when out of memory. remove: the vhost, or NULL if none. */
vhost *server_vhost(server *s, amqp_bytes name);
void server_foreach_vhost(server *s, void (*fn)(void *arg, vhost *v), void *arg);
vhost *server_vhost_next(server *s, const vhost *prev);
bool server_vhost_insert(server *s, const char *name, vhost *v);
vhost *server_vhost_remove(server *s, const char *name);

/* A new unique id for server-generated names ("amq.gen-…", "amq.ctag-…"). */
void server_random_name(server *s, const char *prefix, char *out, size_t outlen);
uint64_t server_random(server *s);

/* Resource alarms, as RabbitMQ's: memory (what the configured strategy
 * measures, server_measure_memory, above the high watermark) and disk
 * (data_dir's filesystem with less free space than disk_free_limit). While
 * any is on, publishing connections are blocked (admin/ sets them). */
enum { SERVER_ALARM_MEMORY = 1, SERVER_ALARM_DISK = 2 };
unsigned server_alarms(const server *s);
void server_set_alarm(server *s, unsigned alarm, bool on);
bool server_memory_alarm(const server *s);
bool server_disk_alarm(const server *s);
/* Bytes of memory (by vm_memory_calculation_strategy) that raise the
 * memory alarm, and the paging ratio's share of them. */
size_t server_memory_limit(const server *s);
size_t server_paging_limit(const server *s);
/* Measures the memory by the strategy now (RSS: /proc/self/statm;
 * allocated: mallinfo2; legacy: server_message_memory) and keeps it;
 * called on a timer, never per message. server_memory_used: the last
 * figure. server_paging: whether it was above server_paging_limit, when
 * queues page even transient messages of deep backlogs out (a field
 * read, for the hot path). */
size_t server_measure_memory(server *s);
size_t server_memory_used(const server *s);
bool server_paging(const server *s);
/* RAM the messages of every loop hold (the legacy strategy's measure). */
size_t server_message_memory(const server *s);
/* disk_free_limit in bytes (a .relative one times the RAM); the free space
 * of data_dir's filesystem as last measured (statvfs: what an unprivileged
 * writer has, df's "available"); false when statvfs fails (kept as it was). */
uint64_t server_disk_free_limit(const server *s);
bool server_measure_disk(server *s);
uint64_t server_disk_free(const server *s);
/* Unfinished message bodies (content still arriving) on all connections
 * together have a budget: half the memory high watermark, and at least one
 * message of max_message_size. Once it is exceeded, a connection holding
 * more than its share (the budget over the number of connections) is
 * closed, never the others (conn_content_held). */
uint64_t server_content_limit(const server *s);
uint64_t server_content_share(const server *s);
/* A new id for a connection, unique in the process (the API names them). */
uint64_t server_new_conn_id(server *s);
/* A new memory high watermark: `absolute` bytes when not 0, else
 * `relative` (0..1) of the RAM; the configuration shows it and the limits
 * follow (admin_set_memory_watermark tells the connections). */
void server_set_watermark(server *s, double relative, uint64_t absolute);
/* Whether the journal's unwritten backlog is so large that publishers
 * should wait for the disk (with hysteresis; they resume on a sync). */
bool server_journal_lagging(server *s);

/* The loops' counters added up (valid until the next call). */
const server_counts *server_counters(server *s);
/* The whole broker's statistics (sampled by admin/sampler.c). */
stats *server_stats(server *s);
/* Connections as RabbitMQ lists them: only those that passed
 * connection.open, not sockets still in the handshake or refused there.
 * The i-th of server_conn_count (the order changes when one opens or
 * closes). */
size_t server_conn_count(const server *s);
conn *server_conn_at(server *s, size_t i);
/* Every client socket, in the handshake or not (sockets_used). */
size_t server_socket_count(const server *s);
/* Wall-clock ms when the server started; its node name: "warren@host"
 * (the short host name), or in a cluster server_cluster_node_name of
 * cluster.node_name (or of the full host name, as cluster/ names it). */
uint64_t server_started_at(const server *s);
const char *server_node_name(const server *s);
/* The name the management API gives cluster node `node` (cluster/'s
 * name): RabbitMQ's name@host form, "warren@<node>", or `node` itself
 * when it has an '@' already. */
void server_cluster_node_name(const char *node, char *out, size_t cap);
uint64_t wall_clock_ms(void);
/* accept() calls that failed since start (EMFILE, ENFILE, ...); each one
 * pauses the listener briefly instead of retrying at once. */
void server_count_accept_error(server *s);
uint64_t server_accept_errors(const server *s);
/* Room for an address as text (INET6_ADDRSTRLEN). */
#define SERVER_HOST_LEN 46
/* The AMQP listeners as bound, in configuration order (broker/ adds them):
 * the i-th one's port, and in *ip its address ("::" for every interface on
 * a dual-stack socket). server_amqp_port: the first one's, 0 without one
 * (listeners.tcp = none). */
void server_add_listener(server *s, const char *ip, int port);
/* Certificate reloading (warrenctl reload_certificates, SIGHUP): the owner
 * of each TLS listener registers a reloader, which builds a new context
 * from the configuration's files for new handshakes and keeps the old one
 * when that fails (false, the reason in err, already logged). */
#define SERVER_MAX_RELOADERS 4
typedef bool (*server_reloader)(void *arg, char *err, size_t errlen);
void server_add_reloader(server *s, server_reloader fn, void *arg);
/* Runs every reloader; false with the first failure's reason. */
bool server_reload_certificates(server *s, char *err, size_t errlen);
int server_amqp_port(const server *s);
size_t server_amqp_listener_count(const server *s);
int server_amqp_listener(const server *s, size_t i, const char **ip);
/* The AMQP over TLS listeners, the same way. */
void server_add_tls_listener(server *s, const char *ip, int port);
size_t server_amqps_listener_count(const server *s);
int server_amqps_listener(const server *s, size_t i, const char **ip);
/* sa's address as text into host ("?" unless IPv4 or IPv6; an IPv4-mapped
 * IPv6 address as the IPv4 one, as RabbitMQ shows peers of a dual-stack
 * listener); returns its port. */
int server_sockaddr_host(const struct sockaddr *sa, char host[SERVER_HOST_LEN]);
/* Whether sa is 127.0.0.0/8 or ::1 (an IPv4-mapped one too). */
bool server_sockaddr_loopback(const struct sockaddr *sa);
/* A client connection's names as RabbitMQ gives them: peer "host:port"
 * (as accepted), its host and port, ours, and the connection's name
 * "peer -> local". */
typedef struct server_conn_name {
    const char *peer, *peer_host, *host, *name;
    int peer_port, port;
} server_conn_name;
/* Fills `out` for a connection over t from `peer`; the strings live in
 * the returned block (the caller frees it). NULL when out of memory. */
char *server_conn_names(const transport *t, const char *peer, server_conn_name *out);

/* The effective configuration as rabbitmq.conf keys and values (no
 * passwords), for GET /api/environment. */
void config_describe(const config *c, void (*fn)(void *arg, const char *key, const char *value),
                     void *arg);

#endif
