/* broker: the AMQP server -- configuration, logging, the listener and event
 * loop, connections (conn_), channels (chan_), queues (queue_), consumers
 * (consumer_), messages (msg_) and virtual hosts (vhost_).
 *
 * Everything runs on one libevent loop thread. Ownership in one line each:
 * the server owns connections and vhosts; a connection owns its channels; a
 * channel owns its consumers and its unacked deliveries; a vhost owns its
 * queues and its route_table; messages are reference counted and shared by
 * every queue entry and delivery that holds them.
 */
#ifndef WARREN_BROKER_H
#define WARREN_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../amqp/amqp.h"
#include "../routing/route.h"
#include "../store/store.h"

struct event_base;
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
    char host[64]; /* an IP literal; "" = every interface (see server.c) */
    int port;      /* 0 binds a free port */
} config_listener;

/* A protocol's listeners after its first, which stays in the config's
 * single fields (listen_host/listen_port, mgmt_ip/mgmt_port,
 * prometheus_ip/prometheus_port). */
typedef struct config_listeners {
    config_listener extra[CONFIG_MAX_LISTENERS - 1];
    unsigned n;
} config_listeners;

typedef struct config {
    /* AMQP listeners, RabbitMQ's listeners.tcp.<name> = [host:]port: the
     * first here, the others in amqp_more. The default is one, named
     * "default", on every interface, port 5672; the first listeners.tcp.*
     * key replaces it (as RabbitMQ's translation builds the list from those
     * keys alone), a name set again replaces its listener.
     * listeners.tcp = none: no AMQP listener at all. */
    char listen_name[48];
    char listen_host[64]; /* "" = every interface, IPv6 and IPv4 (server.c) */
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
} config;

/* Sets RabbitMQ's defaults. */
void config_defaults(config *c);

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

/* Allocates a message able to hold `body_size` bytes; refs = 1. NULL on OOM. */
msg *msg_new(amqp_bytes exchange, amqp_bytes routing_key, amqp_bytes properties,
             uint64_t body_size);
/* A message whose body is still to come (content assembly). With
 * `inline_body` it is msg_new: room for the whole body in the one
 * allocation. Without, the body's memory is allocated as msg_append_body
 * brings bytes, so a declared size costs nothing until it arrives. */
msg *msg_new_incoming(amqp_bytes exchange, amqp_bytes routing_key, amqp_bytes properties,
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
/* New ids start above `max_used`. */
void msg_reserve_ids(uint64_t max_used);
/* Bytes of RAM held by all live messages (the memory alarm's measure). */
size_t msg_total_memory(void);
/* Copies a message with new exchange, routing key and properties (used to
 * dead-letter); NULL on OOM. */
msg *msg_copy_with(const msg *m, amqp_bytes exchange, amqp_bytes routing_key,
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
msg *msg_with_properties(const msg *m, const amqp_basic_properties *p);

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
    uint64_t enqueued_at; /* when it entered the queue (server_now_ms) */
    uint64_t expires_at;  /* its own expiration (server_now_ms clock); 0 = none */
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

#include "../net/net.h" /* transports: the clients' byte streams */

/* ---- server ------------------------------------------------------------- */

/* Creates the listener and vhosts from `cfg` (copied). NULL on failure
 * (already logged). */
server *server_new(const config *cfg);
/* Runs the loop until SIGTERM/SIGINT; returns the exit status. */
int server_run(server *s);
void server_free(server *s);

const config *server_config(const server *s);
struct event_base *server_base(server *s);
/* The loop's event priorities: every event has the default (1); the
 * lowest (SERVER_PRIORITY_IDLE) runs only when nothing else is active. */
#define SERVER_PRIORITIES 3
#define SERVER_PRIORITY_IDLE 2
transport_flusher *server_flusher(server *s);
/* The durable metadata store (data_dir/metadata.db) and message journal. */
meta *server_meta(server *s);
journal *server_journal(server *s);
/* The durable queue the store knows by `id`, or NULL. */
queue *server_queue_by_store_id(server *s, uint64_t id);
/* Milliseconds on a monotonic clock, refreshed per read batch and tick. */
uint64_t server_now_ms(const server *s);
/* Users and permissions (see access_ above). */
access_control *server_access(server *s);
/* Iterates connections: those of `v` (NULL: all), in no set order. fn may
 * close a connection (frees are deferred) but must not open one. */
void server_foreach_conn(server *s, vhost *v, void (*fn)(void *arg, conn *c), void *arg);
/* Closes every connection logged in as `user` with 320 and `text`. */
void server_close_user_connections(server *s, const char *user, const char *text);
/* A new unique id for server-generated names ("amq.gen-…", "amq.ctag-…"). */
void server_random_name(server *s, const char *prefix, char *out, size_t outlen);
void server_conn_opened(server *s, conn *c);
/* c passed connection.open: server_conn_count and the rest list it now. */
void server_conn_listed(server *s, conn *c);
/* A confirm or commit-ok waits for journal sequence `seq` (the loop does
 * not spin while the disk is what it waits for). */
void server_journal_wait(server *s, journal_seq seq);
/* Bytes of message memory that raise the memory alarm. */
size_t server_memory_limit(const server *s);
/* Unfinished message bodies (content still arriving) on all connections
 * together have a budget: half the memory high watermark, and at least one
 * message of max_message_size. Once it is exceeded, a connection holding
 * more than its share (the budget over the number of connections) is
 * closed, never the others (conn_content_held). */
uint64_t server_content_limit(const server *s);
uint64_t server_content_share(const server *s);
/* Whether the memory alarm is on (new connections start blocked too). */
bool server_memory_alarm(const server *s);
/* Sets the memory high watermark while running, as rabbitmqctl
 * set_vm_memory_high_watermark does: `absolute` bytes when it is not 0,
 * else `relative` (0..1) of the RAM. The alarm is checked again at once,
 * and the budget for unfinished bodies follows, on open connections too.
 * The configuration (server_config) shows it; a restart goes back to the
 * file's setting, as RabbitMQ's does. */
void server_set_memory_watermark(server *s, double relative, uint64_t absolute);
/* Whether the journal's unwritten backlog is so large that publishers
 * should wait for the disk (with hysteresis; they resume on a sync). */
bool server_journal_lagging(server *s);
void server_conn_closed(server *s, conn *c);
/* accept() calls that failed since start (EMFILE, ENFILE, ...); each one
 * pauses the listener briefly instead of retrying at once. */
uint64_t server_accept_errors(const server *s);
/* Refreshes the cached clock that server_now_ms returns. */
void server_touch_clock(server *s);


/* ---- identity and access (access.c) ------------------------------------ */

/* The users, permissions and topic permissions of a server, held in memory
 * and written through to the metadata store, which is the truth at start
 * (durable_load fills them). Regular expressions are compiled once (PCRE2
 * with JIT) when set, and a bad one is refused then with the reason. Every
 * change bumps a generation number; a permission object a lookup returned
 * stays valid while access_generation() is unchanged, so channels cache
 * their checks against it and a change applies to open channels at once.
 * (RabbitMQ instead caches allowed checks per channel until it is reopened.)
 *
 * Puts and deletes return false with a one-line reason in `err` and change
 * nothing when the input is invalid, a user or vhost it names is missing,
 * or the store write fails (also logged). Inside meta_begin/meta_commit
 * (a definitions import) they apply to memory at once; if the commit then
 * fails, call access_reload to bring memory back to the store. Strings
 * passed in are copied; strings handed out live until the next change of
 * the same kind. Everything runs on the loop thread. */
typedef struct access_user access_user;
typedef struct access_perms access_perms;
typedef struct access_topic_perms access_topic_perms;

typedef enum access_kind { ACCESS_CONFIGURE, ACCESS_WRITE, ACCESS_READ } access_kind;

/* Tags RabbitMQ knows, as bits; other (free-form) tags stay in the text. */
enum {
    ACCESS_TAG_ADMINISTRATOR = 1 << 0,
    ACCESS_TAG_MONITORING = 1 << 1,
    ACCESS_TAG_POLICYMAKER = 1 << 2,
    ACCESS_TAG_MANAGEMENT = 1 << 3,
    ACCESS_TAG_IMPERSONATOR = 1 << 4,
};

#define ACCESS_HASH_SHA256 "rabbit_password_hashing_sha256"
#define ACCESS_HASH_SHA512 "rabbit_password_hashing_sha512"
#define ACCESS_HASH_MD5 "rabbit_password_hashing_md5"

/* Empty; NULL on OOM. access_free frees everything it holds. */
access_control *access_new(server *s);
void access_free(access_control *a);
uint64_t access_generation(const access_control *a);

/* RabbitMQ's rabbit_password: base64(4-byte random salt ++ H(salt ++
 * password)), H by algorithm (one of the ACCESS_HASH_ names). hash writes a
 * NUL-terminated hash into out (cap >= 96 fits every algorithm); false for
 * an unknown algorithm or too small a buffer. check: whether `password`
 * matches; false for "" (no password), a malformed hash or an unknown
 * algorithm. */
bool access_algorithm_known(const char *algorithm);
bool access_hash_password(const char *algorithm, amqp_bytes password, char *out, size_t cap);
bool access_check_password(const char *algorithm, const char *hash, amqp_bytes password);
/* ACCESS_TAG_ bits of a comma-separated tag list. */
unsigned access_parse_tags(const char *tags);
/* Whether `re` compiles as a permission regex ("" = "^$"); else the reason. */
bool access_regex_check(const char *re, char *err, size_t errlen);

/* ---- users ---- */

/* A user to create or update: either `password` (cleartext, hashed here
 * with hashing_algorithm) or `password_hash` (RabbitMQ's base64, "" = no
 * password, with its hashing_algorithm). hashing_algorithm NULL means
 * rabbit_password_hashing_sha256; tags NULL means none. */
typedef struct access_user_spec {
    const char *name, *password, *password_hash, *hashing_algorithm, *tags;
} access_user_spec;

/* Checks a spec without changing anything: name 1..255 bytes, a known
 * algorithm, a password or a well-formed hash. */
bool access_validate_user(const access_user_spec *u, char *err, size_t errlen);
bool access_put_user(access_control *a, const access_user_spec *u, char *err, size_t errlen);
/* Also deletes the user's permissions and topic permissions and closes
 * their connections with 320 "user 'x' is deleted", as RabbitMQ 3.10
 * does. false if there is no such user. */
bool access_delete_user(access_control *a, const char *name, char *err, size_t errlen);
const access_user *access_find_user(const access_control *a, const char *name);
size_t access_user_count(const access_control *a);
/* In name order; fn must not change users. */
void access_foreach_user(const access_control *a, void (*fn)(void *arg, const access_user *u), void *arg);
const char *access_user_name(const access_user *u);
const char *access_user_password_hash(const access_user *u);
const char *access_user_hashing_algorithm(const access_user *u);
const char *access_user_tags(const access_user *u); /* comma-separated, as given */
unsigned access_user_tag_flags(const access_user *u);

/* The one login check, for AMQP (PLAIN, AMQPLAIN) and HTTP basic auth: the
 * user when the password matches (never for a blank password or a user
 * without one) and loopback_users allows the peer (`loopback`: it came
 * from 127.0.0.0/8 or ::1); else NULL with RabbitMQ's log reason in `why`
 * (may be NULL). The user lives until the next change of users. */
const access_user *access_login(access_control *a, amqp_bytes user, amqp_bytes password, bool loopback,
                                char *why, size_t whylen);

/* ---- permissions ---- */

/* Regexes of a permission compile; user and vhost names are well-formed
 * (not that they exist: an import may create them in the same go). */
bool access_validate_permission(const meta_permission *p, char *err, size_t errlen);
/* Sets (replaces) user's permissions in vhost; both must exist. */
bool access_put_permission(access_control *a, const meta_permission *p, char *err, size_t errlen);
/* false if there were none. */
bool access_clear_permission(access_control *a, const char *user, const char *vhost, char *err,
                             size_t errlen);
/* user / vhost NULL: any. In (user, vhost) order; the row lives during fn. */
void access_foreach_permission(const access_control *a, const char *user, const char *vhost,
                               void (*fn)(void *arg, const meta_permission *p), void *arg);
/* The permissions of `user` in `vhost`; NULL means no access to the vhost. */
const access_perms *access_find_perms(const access_control *a, amqp_bytes user, amqp_bytes vhost);
/* Whether p's `kind` regex matches resource `name` ("" = "amq.default"). */
bool access_allowed(access_control *a, const access_perms *p, access_kind kind, amqp_bytes name);

/* ---- topic permissions (write / read on routing keys of a topic exchange) ---- */

bool access_validate_topic_permission(const meta_topic_permission *p, char *err, size_t errlen);
bool access_put_topic_permission(access_control *a, const meta_topic_permission *p, char *err,
                                 size_t errlen);
/* exchange NULL: all of the user's in the vhost. false if there were none. */
bool access_clear_topic_permission(access_control *a, const char *user, const char *vhost,
                                   const char *exchange, char *err, size_t errlen);
void access_foreach_topic_permission(const access_control *a, const char *user, const char *vhost,
                                     void (*fn)(void *arg, const meta_topic_permission *p),
                                     void *arg);
/* Whether the user has any topic permission in the vhost (if not, every
 * routing key on every topic exchange is allowed). */
bool access_has_topic_perms(const access_control *a, amqp_bytes user, amqp_bytes vhost);
/* NULL: no topic permission for that exchange, so every key is allowed. */
const access_topic_perms *access_find_topic_perms(const access_control *a, amqp_bytes user,
                                                  amqp_bytes vhost, amqp_bytes exchange);
/* kind is ACCESS_WRITE or ACCESS_READ; {username} and {vhost} in the
 * pattern are replaced first. */
bool access_topic_allowed(access_control *a, const access_topic_perms *t, access_kind kind,
                          amqp_bytes key);

/* ---- for the server and durable_load ---- */

/* Loading from the store at start (no write back). */
void access_load_user(access_control *a, const meta_user *u);
void access_load_permission(access_control *a, const meta_permission *p);
void access_load_topic_permission(access_control *a, const meta_topic_permission *p);
/* Forgets the vhost's permissions (the store cascades on its own). */
void access_vhost_deleted(access_control *a, const char *vhost);
/* Throws away what is in memory and loads users and permissions again
 * from the store (after a failed meta_commit). */
bool access_reload(access_control *a);

/* ---- virtual hosts ------------------------------------------------------ */

/* The server's vhosts, by name (server.c). A vhost's description, tags,
 * default queue type and tracing flag are kept in the metadata store with
 * it; put creates or updates one, delete removes it and all it holds. */

/* The vhost named `name`, or NULL. */
vhost *server_vhost(server *s, amqp_bytes name);
size_t server_vhost_count(const server *s);
/* In name order; fn must not create or delete vhosts. */
void server_foreach_vhost(server *s, void (*fn)(void *arg, vhost *v), void *arg);
/* Checks without changing anything: name 1..255 bytes, default_queue_type
 * "", "undefined" (= ""), "classic", "quorum" or "stream". */
bool server_validate_vhost(const meta_vhost *v, char *err, size_t errlen);
/* Creates the vhost (with RabbitMQ's exchanges) or updates its details;
 * NULL fields mean "" (false for tracing). false with `err` when invalid
 * or the store write fails; nothing changes then. */
bool server_put_vhost(server *s, const meta_vhost *v, char *err, size_t errlen);
/* Deletes a vhost as RabbitMQ does: its connections are closed with 320
 * "vhost 'x' is deleted", its queues deleted (their messages settled in the
 * journal), and its exchanges, bindings, policies, permissions and topic
 * permissions removed from the store in one transaction, so nothing of it
 * comes back after a restart. false if there is no such vhost or the store
 * write fails (then the vhost stays, its connections already closed). */
bool server_delete_vhost(server *s, const char *name, char *err, size_t errlen);

vhost *vhost_new(server *s, const char *name);
/* Details, as stored; the strings live until the next vhost_set_details. */
const char *vhost_description(const vhost *v);
const char *vhost_tags(const vhost *v); /* comma-separated */
const char *vhost_default_queue_type(const vhost *v); /* "" = undefined */
bool vhost_tracing(const vhost *v);
/* Copies the details of `d` (its name is not used); false on OOM. */
bool vhost_set_details(vhost *v, const meta_vhost *d);
/* Calls fn for each queue of the vhost; fn may delete the queue it is given. */
void vhost_foreach_queue(vhost *v, void (*fn)(void *arg, queue *q), void *arg);
/* Frees at shutdown: queues are freed, not deleted (durable ones stay). */
void vhost_free(vhost *v);
bool vhost_closing(const vhost *v);
const char *vhost_name(const vhost *v);
server *vhost_server(vhost *v);
route_table *vhost_routes(vhost *v);
/* The vhost's policies and operator policies (policy.c). */
policy_set *vhost_policies(vhost *v);
queue *vhost_queue_find(vhost *v, amqp_bytes name);
void vhost_queue_add(vhost *v, queue *q);
void vhost_queue_remove(vhost *v, queue *q);
/* Direct reply-to addresses of this vhost's channels. */
bool vhost_reply_register(vhost *v, chan *ch);
void vhost_reply_unregister(vhost *v, chan *ch);
chan *vhost_reply_find(vhost *v, amqp_bytes token);
/* The token part of a channel's reply address (reply.c). */
const char *chan_reply_token(const chan *ch);

/* Routes a message published to `ex` and copies the queues it goes to into
 * `buf` (cap entries) or, when more, a malloc'd array; *out is whichever,
 * to be freed by the caller when it is not `buf`. A copy, because
 * enqueueing may route again (dead-lettering) and reuse the table's array.
 * The CC and BCC headers (arrays of strings) route the message with those
 * keys too -- RabbitMQ's sender-selected distribution. */
size_t vhost_route(vhost *v, route_exchange *ex, amqp_bytes key, amqp_bytes headers,
                   queue **buf, size_t cap, queue ***out);
/* The queue with this store id, or NULL. */
queue *vhost_queue_by_store_id(vhost *v, uint64_t id);
/* Deletes the exclusive queues owned by `c`, whose connection is closing. */
void vhost_drop_exclusive(vhost *v, conn *c);

/* ---- login brake (brake.c) ---------------------------------------------- */

/* A connection whose handshake fails before connection.open (a refused
 * login, a malformed login response, a wrong method or frame) is held this
 * long before its socket is closed, as RabbitMQ does (SILENT_CLOSE_DELAY). */
#define LOGIN_HOLD_MS 3000

/* Refused logins per source address, and the number of refused
 * connections held (see brake.c for the rules and the table). */
typedef struct login_brake login_brake;
/* From cfg's login_brake_* settings; `seed` scrambles the table's hash.
 * NULL when out of memory. */
login_brake *login_brake_new(const config *cfg, uint64_t seed);
void login_brake_free(login_brake *b);
/* The key an address is counted under: IPv4 (also IPv4-mapped IPv6) whole,
 * other IPv6 addresses by their /64. */
void login_brake_key(const struct sockaddr *sa, uint8_t key[16]);
/* ms left of the brake on `key`; 0 when it is not braked. */
uint64_t login_brake_left(login_brake *b, const uint8_t key[16], uint64_t now_ms);
/* Counts a refused login from `key`; true when it brakes the address. */
bool login_brake_failed(login_brake *b, const uint8_t key[16], uint64_t now_ms);
/* A refused connection is to be held: false when login_brake_max_held are
 * held already (it is closed at once then); each true is released once. */
bool login_brake_hold(login_brake *b);
void login_brake_release(login_brake *b);
/* Refused connections held now. */
uint32_t login_brake_held(const login_brake *b);
/* The server's brake. */
login_brake *server_login_brake(server *s);

/* ---- connections -------------------------------------------------------- */

/* Takes ownership of a socket accepted from `sa` ("host:port" in `peer`). */
void conn_accept(server *s, int fd, const struct sockaddr *sa, const char *peer);
/* A connection over `t` (not started yet), which it owns from now on;
 * `peer` names the client in logs and the management API. The client's
 * address, for loopback_users and the login brake, is the transport's
 * (none: not loopback). When out of memory, t is freed. */
void conn_attach(server *s, transport *t, const char *peer);
/* Closes with connection.close(code, text) -- e.g. 320 on shutdown. */
void conn_close(conn *c, uint16_t code, const char *text, uint32_t method_id);
/* Its vhost is being deleted: closes with 320 and forgets the vhost (its
 * exclusive queues go now), so nothing refers to it afterwards. */
void conn_vhost_deleted(conn *c, const char *text);
/* Called by the server's housekeeping timer: heartbeats and timeouts. */
void conn_tick(conn *c, uint64_t now_ms);
/* The memory alarm went on or off: tell clients that asked (connection.
 * blocked / unblocked); while on, a connection that publishes is no longer
 * read, as RabbitMQ blocks publishers. */
void conn_set_alarm(conn *c, bool on);
/* Frees at once (server shutdown, after the loop has stopped). */
void conn_free_now(conn *c);
/* The server's budget for unfinished bodies changed (a new watermark):
 * the connection's copy, checked on every growth, follows. */
void conn_content_limit_changed(conn *c);
/* The memory held by messages being assembled on c's channels changed by
 * `delta` bytes. AMQP_ERROR with 506 RESOURCE_ERROR in `err` when a growth
 * leaves the broker over its budget and this connection over its share
 * (server_content_limit); the caller raises it, closing the connection. */
int conn_content_held(conn *c, int64_t delta, amqp_error *err);
/* Whether a body of `body_size` may get its room before its bytes arrive
 * (the one-allocation fast path): it fits one frame, the connection's
 * unfinished bodies stay under 4 MiB with it -- all a client can make the
 * broker reserve ahead of what it sent -- and the broker's budget is not
 * exceeded. If so, body_size + extra bytes are counted as held (as by
 * conn_content_held) and true is returned. */
bool conn_content_reserve(conn *c, uint64_t body_size, uint64_t extra);
/* The journal synced more: confirms waiting for it can go out. */
void conn_journal_synced(conn *c);

server *conn_server(conn *c);
vhost *conn_vhost(conn *c);
const char *conn_user(const conn *c);
uint32_t conn_frame_max(const conn *c);
bool conn_cancel_notify(const conn *c); /* client has consumer_cancel_notify */

/* Output: frames are queued on the connection's buffer and written once
 * per loop turn. */
void conn_send_method(conn *c, uint16_t channel, const amqp_method *m);
/* basic.deliver / get-ok / return: method, header and body frames. */
void conn_send_content(conn *c, uint16_t channel, const amqp_method *m, msg *body);
/* The same with other encoded properties than the message's (the broker
 * added a header to this delivery); `props` need only live during the call. */
void conn_send_content_props(conn *c, uint16_t channel, const amqp_method *m, msg *body,
                             amqp_bytes props);
/* True when the client's output backlog is over the limit: stop delivering. */
bool conn_output_full(const conn *c);

/* Raises an error decoded or produced while handling a method: a soft one
 * closes the channel, a hard one the connection. */
void conn_raise(conn *c, uint16_t channel, const amqp_error *err);

/* ---- channels ----------------------------------------------------------- */

chan *chan_new(conn *c, uint16_t number);
/* Frees after requeueing unacked deliveries and cancelling consumers. */
void chan_free(chan *ch);
uint16_t chan_number(const chan *ch);
conn *chan_conn(chan *ch);

/* Handles one decoded method (content-carrying ones arrive complete via
 * chan_publish). Returns AMQP_OK, or AMQP_ERROR with `err` set. */
int chan_handle(chan *ch, const amqp_method *m, amqp_error *err);
/* A complete basic.publish with its content; takes a reference to `m`. */
int chan_publish(chan *ch, const amqp_basic_publish *p, msg *m, amqp_error *err);
/* Content assembly, driven by the connection's frame loop. */
int chan_content_header(chan *ch, const amqp_content_header *h, amqp_error *err);
int chan_content_body(chan *ch, const uint8_t *p, size_t n, amqp_error *err);
bool chan_expecting_content(const chan *ch);
/* 505 for a frame other than the content the channel is waiting for. */
int chan_content_expected(chan *ch, amqp_error *err);
/* Called once per read batch and after journal syncs: sends the publisher
 * confirms (and tx.commit-ok) whose messages are safe. */
void chan_flush_confirms(chan *ch);
/* Whether this channel can take one more delivery for `cons`. */
bool chan_can_deliver(const chan *ch, const consumer *cons);
/* Delivers one message from `q` to consumer `cons` on this channel. */
void chan_deliver(chan *ch, consumer *cons, queue *q, queue_item it);
/* The queue `cons` consumes from was deleted: tell the client and forget it. */
void chan_consumer_cancelled(chan *ch, consumer *cons);
/* Lets the queues this channel consumes from deliver again (capacity or
 * flow came back). */
void chan_resume(chan *ch);
/* When the oldest delivery the channel holds unacked was made
 * (server_now_ms clock); 0 when none. */
uint64_t chan_oldest_unacked_ms(chan *ch);
/* The housekeeping tick: consumer timeouts (see config.consumer_timeout_ms).
 * May close the channel with an error (conn_raise). */
void chan_tick(chan *ch, uint64_t now_ms);
/* A timeout that applies to the channel's deliveries changed (a policy):
 * the next tick looks at them again. */
void chan_timeouts_changed(chan *ch);

/* ---- queues ------------------------------------------------------------- */


/* Parsed queue arguments (x-...). Slices point into the table parsed. */
enum { QUEUE_DROP_HEAD, QUEUE_REJECT_PUBLISH, QUEUE_REJECT_PUBLISH_DLX };
enum { QUEUE_TYPE_CLASSIC, QUEUE_TYPE_QUORUM, QUEUE_TYPES };
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
/* x-delayed-retry-type: which returns are held back before they are ready
 * again (RabbitMQ 4.3's values, see delayed.c). */
enum { QUEUE_RETRY_DISABLED, QUEUE_RETRY_ALL, QUEUE_RETRY_FAILED, QUEUE_RETRY_RETURNED };
/* RabbitMQ 4.x's default x-delivery-limit of a quorum queue. */
#define QUEUE_QUORUM_DELIVERY_LIMIT 20
typedef struct queue_args {
    int64_t message_ttl, expires, max_length, max_length_bytes; /* -1 = none */
    /* returns (requeues, channel or connection closed) a message may have
     * before it is dead-lettered with reason delivery_limit; -1 = none */
    int64_t delivery_limit;
    int64_t consumer_timeout; /* x-consumer-timeout / consumer-timeout policy, ms; -1 = none */
    /* delayed retry: x-delayed-retry-min / -max (ms) and LavinMQ's
     * x-delayed-retry-multiplier; -1 = none */
    int64_t retry_min, retry_max, retry_multiplier;
    uint8_t retry_type; /* QUEUE_RETRY_ */
    uint8_t type;             /* QUEUE_TYPE_ */
    bool at_least_once;       /* quorum x-dead-letter-strategy at-least-once */
    uint8_t overflow;
    uint8_t max_priority; /* 0 = not a priority queue */
    bool single_active;
    bool has_dlx, has_dlrk;
    amqp_bytes dlx, dlrk;
} queue_args;

/* Validates declare arguments (406 with RabbitMQ's texts) and parses them. */
int queue_args_parse(amqp_bytes args, amqp_bytes qname, const char *vhost, queue_args *out,
                     amqp_error *err);
/* Whether the arguments declare a quorum queue. */
bool queue_args_quorum(amqp_bytes args);
/* Reads arguments already validated (or combined with validated policy
 * values) without checking them again. */
void queue_args_read(amqp_bytes args, queue_args *out);
/* 406 unless the arguments RabbitMQ compares on redeclare are the same. */
int queue_args_equivalent(amqp_bytes current, amqp_bytes received, amqp_bytes qname,
                          const char *vhost, amqp_error *err);

typedef struct queue_spec {
    amqp_bytes name;
    bool durable, exclusive, auto_delete;
    amqp_bytes arguments;
    conn *owner; /* for exclusive queues */
} queue_spec;

/* A quorum queue's properties: 406 "invalid property 'auto-delete' ..."
 * (or 'exclusive-owner', 'non-durable') as RabbitMQ 3.10 words it. */
int queue_type_check(const queue_spec *spec, const char *vhost, amqp_error *err);

queue *queue_new(vhost *v, const queue_spec *spec);
/* Deletes: cancels consumers (notifying them), unbinds, drops ready
 * messages; unacked deliveries keep the queue object alive until settled. */
void queue_delete(queue *q);
amqp_bytes queue_name(const queue *q);
bool queue_durable(const queue *q);
bool queue_exclusive(const queue *q);
bool queue_auto_delete(const queue *q);
conn *queue_owner(const queue *q);
amqp_bytes queue_arguments(const queue *q);
uint32_t queue_ready_count(const queue *q);
uint32_t queue_consumer_count(const queue *q);
bool queue_has_exclusive_consumer(const queue *q);

/* Appends a message (takes a new reference) with the message's own
 * expiration (ms, -1 = none). Delivers at once if a consumer can take it.
 * Returns false when the queue refuses it (x-overflow reject-publish). */
bool queue_publish(queue *q, msg *m, int64_t expiration_ms);
/* Why a delivered message comes back (x-delayed-retry-type selects by it):
 * the consumer said it failed (basic.reject or basic.nack with requeue),
 * or it came back without a verdict (its channel or connection closed, its
 * consumer timed out, basic.recover); PLAIN returns are never delayed (a
 * management basic.get that requeues, a cancelled move, out of memory). */
typedef enum queue_return { QUEUE_RETURN_PLAIN, QUEUE_RETURN_FAILED, QUEUE_RETURN_RETURNED } queue_return;
/* Puts a delivered message back at its place, among the messages that
 * were queued around it (takes a new reference) -- or, past x-delivery-limit,
 * dead-letters it; or, when the queue's delayed retry selects `why`, holds
 * it back until its delay is over (queue_retry_delay_ms) and then puts it
 * back at its place. */
void queue_requeue(queue *q, queue_item it, queue_return why);
/* The delayed retry of a return by `why` of a message delivered `count`
 * times (this delivery included): 0 when none applies, else
 * min(x-delayed-retry-min x count, x-delayed-retry-max) -- or with a
 * multiplier m, min x m^(count-1) -- capped at QUEUE_RETRY_DELAY_MAX. */
#define QUEUE_RETRY_DELAY_MAX 4294967295ull /* ms, about 49.7 days, as LavinMQ */
uint64_t queue_retry_delay_ms(const queue_args *a, queue_return why, uint32_t count);
/* Messages held back by delayed retry. */
uint32_t queue_delayed_count(const queue *q);
/* A message recovery found in the journal, left there until delivered. */
typedef struct queue_paged {
    uint64_t id;
    journal_loc loc;
    uint32_t body_size;
    uint8_t priority;
    uint32_t delivery_count;
    bool maybe_delivered;
    uint64_t delayed_until; /* held back until then (wall clock, ms since the epoch); 0: not */
    int64_t expiration_ms;  /* its expiration property, -1 = none */
} queue_paged;
/* Recovery: appends a message from the journal, in journal order. */
void queue_restore(queue *q, const queue_paged *p);
/* Takes the head for basic.get; false when empty. Caller owns it.m's ref. */
bool queue_get(queue *q, queue_item *it);
/* Dead-letters `it` (reason "rejected", "expired", "maxlen") to the queue's
 * x-dead-letter-exchange, or drops it; takes over it.m's reference. */
void queue_dead_letter(queue *q, queue_item it, const char *reason);
/* At-least-once dead-lettering found no queue for `it`: the queue keeps it
 * (not ready, still in the journal) and dead-letters it again every
 * second until a queue takes it; takes over it.m's reference. */
void queue_hold_dead_letter(queue *q, queue_item it, const char *reason);
/* A held dead letter's next try: as queue_dead_letter, not counted again. */
void queue_retry_dead_letter(queue *q, queue_item it, const char *reason);
/* Counts a death of one of q's messages (server_counts.dead_lettered);
 * queue_dead_letter does, a caller that drops a message itself does too. */
void queue_count_dead_letter(queue *q, dead_reason why, dead_strategy how);
/* Restarts the x-expires idle timer (declare, basic.get). */
void queue_touch(queue *q);
/* The limits in force: the arguments combined with the queue's policies. */
const queue_args *queue_get_args(const queue *q);
/* The policy engine's part (policy.c): what applies to `q` now (names and
 * merged definition, copied) and its effective arguments -- its own
 * arguments with the policy's values combined in (copied; the limits are
 * read from them). Applies the change at once, in RabbitMQ's order: the
 * idle timer restarts, a lower length limit drops or dead-letters the
 * excess (under the previous x-overflow, then the new one), a shorter TTL
 * expires what is older. Unchanged input changes nothing. false on
 * out-of-memory, with everything as it was. */
bool queue_set_policy(queue *q, const policy_applied *applied, amqp_bytes effective_args);
/* The id the store knows a durable queue by (0 = none). */
uint64_t queue_store_id(const queue *q);
void queue_set_store_id(queue *q, uint64_t id);
/* Whether `q` is a quorum queue (x-queue-type quorum). */
bool queue_is_quorum(const queue *q);
/* Whether a returned message from `q` is delivered with x-delivery-count:
 * always from a quorum queue (RabbitMQ 3.10), from a classic queue only
 * when a delivery limit or delayed retry (Warren's extensions there) counts
 * its returns -- a plain classic queue adds nothing, as RabbitMQ's. */
bool queue_shows_delivery_count(const queue *q);
/* "classic" or "quorum", as /api/queues shows the type. */
const char *queue_type_name(const queue *q);
vhost *queue_vhost(queue *q);
/* Drops the ready and the delayed messages (unacked ones stay with their
 * consumers); returns how many went. */
uint32_t queue_purge(queue *q);
/* Tries to deliver ready messages to consumers with capacity. */
void queue_dispatch(queue *q);
/* Keeps a deleted queue alive while deliveries from it are unacked. */
void queue_hold(queue *q);
void queue_release(queue *q);
bool queue_is_deleted(const queue *q);

/* Health of a queue's messages, for the management API. Delivery counts are
 * kept in buckets whose lowest counts are queue_dc_bucket_floor[] (0, 1, 2,
 * 3-4, 5-9, 10-19, 20-49, 50 and more). */
enum { QUEUE_DC_BUCKETS = 8 };
extern const uint32_t queue_dc_bucket_floor[QUEUE_DC_BUCKETS];
/* A channel holds a delivery of `m` from `q`, delivered `count` times in
 * all (this delivery included) -- and later settles it. */
void queue_delivery_held(queue *q, uint32_t count, const msg *m);
void queue_delivery_settled(queue *q, uint32_t count, const msg *m);
/* A delivery from `q` timed out (a consumer timeout), for its statistics. */
void queue_consumer_timed_out(queue *q);
/* Deliveries from `q` not yet acked, rejected or requeued. */
uint32_t queue_unacked_count(const queue *q);
/* How many of its messages -- ready and delayed ones by how often they
 * were delivered before, unacked ones by how often they were delivered
 * including now -- fall in each bucket. */
void queue_delivery_counts(const queue *q, uint32_t out[QUEUE_DC_BUCKETS]);
/* When the oldest ready message entered the queue (server_now_ms clock);
 * 0 when none is ready. */
uint64_t queue_oldest_ready_ms(const queue *q);

/* ---- moving messages: DLQ redrive (move.c) ------------------------------ */

/* Moves the ready messages of a queue, in slices on the loop at a bounded
 * rate, to another queue, to an exchange, or back to the queue each one
 * died in (its x-death history, as SQS's redrive to source). A message is
 * settled in its queue and enqueued in its destination in one atomic group
 * of the journal, so after a crash it is in exactly one of them. It keeps
 * its properties and headers (x-death too: the history stays with it) and
 * starts in its destination with a delivery count of 0. The destination's
 * limits apply: drop-head drops its oldest; a reject-publish destination
 * that is full refuses nothing -- the message stays where it was. One move
 * per source queue at a time; the vhost keeps the last one's report. */
typedef enum move_target { MOVE_TO_SOURCE, MOVE_TO_QUEUE, MOVE_TO_EXCHANGE } move_target;
typedef struct move_spec {
    move_target to;
    amqp_bytes dest;        /* the queue or exchange (MOVE_TO_QUEUE, _EXCHANGE) */
    amqp_bytes routing_key; /* MOVE_TO_EXCHANGE; each message's own if !has_routing_key */
    bool has_routing_key;
    uint64_t count; /* at most this many; 0 = every message ready at the start */
    uint32_t rate;  /* messages per second, >= 1 */
    /* Only messages whose header match_header (empty: no filter) equals
     * match_value -- a string equal to it, a number or boolean spelled so --
     * or, without has_match_value, has that header at all; the others stay. */
    amqp_bytes match_header, match_value;
    bool has_match_value;
} move_spec;

typedef enum move_state { MOVE_RUNNING, MOVE_FINISHED, MOVE_CANCELLED, MOVE_STOPPED } move_state;
/* Why messages stayed where they were. */
typedef enum move_skip {
    MOVE_SKIP_NO_SOURCE, MOVE_SKIP_UNROUTABLE, MOVE_SKIP_FULL, MOVE_SKIP_NO_MATCH, MOVE_SKIPS
} move_skip;
typedef struct move_progress {
    move_state state;
    const char *reason; /* why it stopped (MOVE_STOPPED), else "" */
    move_target to;
    amqp_bytes dest, routing_key; /* as given */
    bool has_routing_key;
    amqp_bytes match_header, match_value;
    bool has_match_value;
    uint32_t rate;
    uint64_t total, moved; /* total: what it set out to move */
    uint64_t skipped[MOVE_SKIPS];
    uint64_t started_at, finished_at; /* wall clock ms; finished 0 while running */
} move_progress;

/* Starts moving from queue `qname` of `v`. AMQP_OK, or AMQP_ERROR with
 * `err`: 404 NOT_FOUND for a missing queue or destination, 406
 * PRECONDITION_FAILED when the destination is the source itself, 405
 * RESOURCE_LOCKED when a move from that queue is running. Names and keys
 * are copied. */
int queue_move_start(vhost *v, amqp_bytes qname, const move_spec *spec, amqp_error *err);
/* The running or last move from `qname`; false when there was none. Slices
 * in *out live until the next move from that queue starts. */
bool queue_move_progress(vhost *v, amqp_bytes qname, move_progress *out);
/* Where the messages went: fn once per destination queue with its count
 * ("" for destinations beyond the first MOVE_REPORT_MAX). */
enum { MOVE_REPORT_MAX = 32 };
void queue_move_report(vhost *v, amqp_bytes qname,
                       void (*fn)(void *arg, amqp_bytes queue, uint64_t n), void *arg);
/* Cancels the running move: what is moved stays moved, the rest stays
 * where it is. false when none is running. */
bool queue_move_cancel(vhost *v, amqp_bytes qname);
/* The vhost is being freed: stops its moves and frees their reports. */
void queue_moves_free(vhost *v);
/* Where a vhost keeps its moves (vhost.c). */
struct move **vhost_moves(vhost *v);

/* ---- consumers ---------------------------------------------------------- */

struct consumer {
    chan *ch;
    queue *q;
    char tag[256];
    bool no_ack;
    bool exclusive;
    int32_t priority;
    uint32_t prefetch; /* 0 = unlimited */
    int64_t timeout_ms; /* x-consumer-timeout of basic.consume; -1 = the queue's or config's */
    uint32_t unacked;
    consumer *q_next, *q_prev;   /* ring in the queue, by priority */
    consumer *ch_next;           /* list in the channel */
};

/* Adds `cons` to its queue (q and ch set). */
void queue_add_consumer(queue *q, consumer *cons);
/* Removes it; an auto-delete queue left without consumers is deleted. */
void queue_remove_consumer(queue *q, consumer *cons);

/* ---- policies (policy.c) ------------------------------------------------ */

/* Policies and operator policies of a vhost, as RabbitMQ 3.10 applies them:
 * each queue and exchange gets the matching policy of highest priority and,
 * separately, the matching operator policy; their definitions merge (the
 * lower of two numeric limits wins) and a queue's own x-arguments win over
 * the result where RabbitMQ says so. Applied when a queue or exchange is
 * declared and, to every queue and exchange of the vhost, after a policy
 * is put or deleted: a slice of ~1 ms per loop turn, so the loop keeps
 * serving every vhost meanwhile (RabbitMQ too applies a change after
 * answering it) -- never per message. Patterns are matched within the
 * limits of pattern/pattern.h; a name on which a pattern reaches them
 * counts as not matching (logged once per policy).
 *
 * A definition is an encoded AMQP field table (content, as queue arguments
 * are kept); the broker knows no JSON. The management API converts a JSON
 * object with: integer -> 'l', float -> 'd', string -> 'S', true/false ->
 * 't', null -> 'V', array -> 'A', object -> 'F'. */
typedef struct policy_spec {
    const char *name;
    const char *pattern;  /* a regular expression over queue / exchange names */
    const char *apply_to; /* "all" (also for NULL), "queues", "exchanges",
                           * "classic_queues", "quorum_queues", "streams" */
    int32_t priority;
    amqp_bytes definition;
    bool operator_policy;
} policy_spec;

/* Checks a policy as RabbitMQ does before setting it, without applying it.
 * true, or false with RabbitMQ's text in `err` -- "Validation failed\n\n"
 * then one line per problem (definition, apply-to, pattern, in that order),
 * e.g. "-1 is not a valid message TTL\n" or "[{<<\"max-priority\">>,5}] are
 * not recognised policy settings\n" -- as the management API returns it for
 * a 400. Always NUL-terminates `err` (truncated to errlen). */
bool policy_validate(const policy_spec *p, char *err, size_t errlen);

/* Adds, or replaces the policy of that name (operator policies are their own
 * name space): validates, writes it to the metadata store, and starts
 * re-evaluating every queue and exchange of `v` (each object's limits are
 * applied when its turn comes: excess dropped or dead-lettered, older
 * messages expired, idle timers restarted); a queue or exchange declared
 * from now on gets it at once. Everything in `p` is copied. false with
 * `err` (as policy_validate, or "out of memory", or "could not store the
 * policy") and nothing changed. */
bool policy_put(vhost *v, const policy_spec *p, char *err, size_t errlen);
/* Deletes it, in the store too, and starts re-evaluating as policy_put
 * does. false when there is no such policy (the API's 404) or the store
 * failed (logged). */
bool policy_delete(vhost *v, const char *name, bool operator_policy);
/* Whether the re-evaluation after the last change in `v` is still under
 * way (some queues and exchanges may hold what applied before it). */
bool policy_reapplying(vhost *v);
/* Calls fn for each policy (or operator policy) of `v`, lowest priority
 * first (RabbitMQ's listing order; equal priorities by name). The spec's
 * strings and definition are valid during the call only; fn must not put
 * or delete policies. */
void policy_foreach(vhost *v, bool operator_policy,
                    void (*fn)(void *arg, const policy_spec *p), void *arg);
/* The policy named `name`; false when none. *out as in policy_foreach,
 * valid until the next policy change in `v`. */
bool policy_get(vhost *v, const char *name, bool operator_policy, policy_spec *out);

/* What applies to one queue or exchange, as /api/queues and /api/exchanges
 * show it: `policy` and `operator_policy` are names or NULL ("none");
 * `definition` is the merged definition without the object's own
 * arguments (empty when neither applies). Valid until the next policy
 * change in the vhost, or until the object is freed. */
struct policy_applied {
    const char *policy, *operator_policy;
    amqp_bytes definition;
};
void policy_of_queue(const queue *q, policy_applied *out);
/* The name of the policy applied to `ex` (exchanges take no operator
 * policy), or NULL; valid until its policy next changes. */
const char *policy_of_exchange(const route_exchange *ex);

/* For the broker itself. A vhost's set (vhost_policies); NULL on OOM. */
policy_set *policy_set_new(void);
void policy_set_free(policy_set *ps);
/* Applies the matching policies to a queue being created (queue_new) or
 * an exchange just created (the route hook). */
void policy_apply_queue(vhost *v, queue *q);
void policy_apply_exchange(vhost *v, route_exchange *ex);
/* Start-up: a stored policy (meta_load's handler); added without writing
 * it back or re-evaluating anything. false when it no longer validates
 * (logged and skipped). */
bool policy_restore(vhost *v, const meta_policy *row);

/* ---- runtime parameters (param.c) ---------------------------------------- */

/* RabbitMQ's runtime parameters: a vhost's (component, name) -> value --
 * those of components Warren keeps for features to come (shovels,
 * federation upstreams); operator policies are the policy engine's -- and
 * the server's global ones, name -> value. A value is JSON text, which the
 * broker keeps as given (the management plane checks it). Puts and
 * deletes go to the metadata store, and a vhost's parameters go with it. */
typedef struct param_spec {
    const char *component; /* ignored (NULL when listed) for a global parameter */
    const char *name;
    const char *value; /* JSON text */
} param_spec;

/* A vhost's set (v) or the server's global one (v NULL); NULL on OOM. */
param_set *param_set_new(server *s, vhost *v);
void param_set_free(param_set *ps);
param_set *vhost_params(vhost *v);
param_set *server_params(server *s);
size_t param_count(const param_set *ps);
/* Adds, or replaces the value of that (component, name); everything is
 * copied. *created (may be NULL) says whether it is new. false, with
 * nothing changed, on out-of-memory or a refused store write (logged). */
bool param_put(param_set *ps, const param_spec *p, bool *created);
/* false when there is no such parameter or the store refused (logged). */
bool param_delete(param_set *ps, const char *component, const char *name);
/* *out's strings are valid until the next change of the set. */
bool param_get(const param_set *ps, const char *component, const char *name, param_spec *out);
/* In (component, name) order; component NULL: all of them. fn must not
 * change the set; the strings are valid during the call. */
void param_foreach(const param_set *ps, const char *component,
                   void (*fn)(void *arg, const param_spec *p), void *arg);
/* Start-up: a stored row, added without writing it back. */
bool param_restore(param_set *ps, const meta_parameter *row);
/* Start-up: gives the server RabbitMQ's global internal_cluster_id
 * ("rabbitmq-cluster-id-" + 22 random characters) unless it has one.
 * false when it cannot be stored (logged). */
bool param_ensure_cluster_id(server *s);

/* ---- durable topology (durable.c) -------------------------------------- */

/* Each writes the change to the metadata store when it concerns durable
 * things; they do nothing while the vhost is closing. */
void durable_exchange_declared(vhost *v, const route_exchange *ex);
void durable_exchange_deleted(vhost *v, const route_exchange *ex);
/* A durable queue that is not exclusive (exclusive ones die with their
 * connection, so RabbitMQ never brings them back). */
bool durable_queue(const queue *q);
void durable_queue_declared(vhost *v, queue *q);
void durable_queue_deleted(vhost *v, queue *q);
void durable_binding(vhost *v, const route_exchange *source, route_dest dest, amqp_bytes key,
                     amqp_bytes args, bool bound);
/* Restores, at start, the vhosts, users, permissions and topic
 * permissions, policies and runtime parameters, then durable exchanges,
 * queues and bindings. */
bool durable_load(server *s);
/* durable_load's vhost rows: registers the vhost (no store write). */
void server_load_vhost(server *s, const meta_vhost *v);

/* ---- persistent messages (persist.c) ----------------------------------- */

/* Journals a persistent message routed to `queues` (once, plus an enqueue
 * per durable queue). Returns the journal sequence to wait for before
 * confirming, or 0 when nothing was journaled. */
journal_seq persist_publish(server *s, msg *m, queue **queues, size_t n);
/* `m` left durable queue `q` (ack, drop or dead-letter). */
void persist_settle(queue *q, const msg *m, journal_settle_kind kind);
/* The same for a message `q` has paged out (id `id` at `loc`), unread. */
void persist_settle_paged(queue *q, uint64_t id, journal_loc loc, journal_settle_kind kind);
/* `m` was delivered from `q`; it has now been delivered `count` times. */
void persist_delivered(queue *q, const msg *m, uint32_t count);
/* `m` in `q` is held back until `until_ms` (wall clock, ms since the epoch;
 * 0: no longer); recovery hands it back in queue_paged.delayed_until. */
void persist_delayed(queue *q, const msg *m, uint64_t until_ms);
/* Moves `m` out of `from` (settled as `kind`, e.g. JOURNAL_DEAD_LETTER, with
 * `reason`) into queues to[0..n) as `copy` -- a message of its own when the
 * properties changed, else `m` itself -- atomically in the journal: after
 * a crash it is in `from` or in every durable target, never in neither or
 * both. Journals only; the caller enqueues the copy (persist_settle it as
 * dropped where a target refuses it). Returns the sequence that makes the
 * move durable, 0 if nothing was journaled. */
journal_seq persist_move(queue *from, const msg *m, journal_settle_kind kind, const char *reason,
                         msg *copy, queue **to, size_t n);
/* Every message left `q`: purged, or the queue deleted. */
void persist_queue_emptied(queue *q, bool deleted);
/* Paging: a queue keeps only the head of its backlog in RAM. A message the
 * journal holds for it is dropped from RAM further back and read again
 * when its turn comes. Whether `q` may page `m` out: */
bool persist_pageable(queue *q, const msg *m);
/* Reads paged-out messages back (ids[i] at locs[i], the queue's next ones):
 * as many as one read of the journal gives, up to PAGE_IN_MAX, into out[].
 * Returns how many; 0 if the first cannot be read (logged, and its entry
 * settled as dropped). */
enum { PAGE_IN_MAX = 64 };
size_t persist_page_in(queue *q, const uint64_t *ids, const journal_loc *locs, size_t n,
                       msg **out);
/* Replays the journal into the (already loaded) durable queues. After an
 * unclean stop (`clean` false) the delivered record of the last moments may
 * be missing, so every recovered message is marked maybe-delivered and goes
 * out with redelivered=true. */
bool persist_recover(server *s, journal *j, bool clean);
/* What persist_recover puts back: replays `j` and calls `each` for every
 * live entry, in restore order, with the durable queue's store id. */
bool persist_replay(journal *j, bool clean,
                    void (*each)(void *ctx, uint64_t queue_id, const queue_paged *p), void *ctx);

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
     * leaves out what is settled after the queue is gone): server_counts_by_type. */
    uint64_t by_queue_type[QUEUE_TYPES][STAT_COUNTERS];
    uint64_t dead_lettered[QUEUE_TYPES][DEAD_STRATEGIES][DEAD_REASONS];
    uint64_t dead_lettered_confirmed; /* at-least-once dead letters a queue took */
} server_counts;
server_counts *server_counters(server *s);
/* The counts by queue type, the deleted queues' and the live ones', into
 * out[QUEUE_TYPES][STAT_COUNTERS] (a walk over every queue). */
void server_counts_by_type(server *s, uint64_t (*out)[STAT_COUNTERS]);

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

/* The server's timer: samples every vhost, queue, exchange, connection and
 * channel, and the whole broker (server_stats). */
void stats_tick(server *s);
stats *server_stats(server *s);
/* An exchange's statistics, allocated at first use; NULL on OOM. */
stats *stats_of_exchange(route_exchange *ex);
/* route hook: the exchange is being freed. */
void stats_exchange_freed(void *ctx, route_exchange *ex);

/* ---- introspection and admin (admin.c; the management API's view) ------ */

/* Vhosts in name order: NULL prev gives the first; NULL after the last. */
vhost *server_vhost_next(server *s, vhost *prev);
/* Connections as RabbitMQ lists them: only those that passed
 * connection.open, not sockets still in the handshake or refused there.
 * The i-th of server_conn_count (the order changes when one opens or
 * closes); by id, NULL when gone or not open yet. */
size_t server_conn_count(const server *s);
conn *server_conn_at(server *s, size_t i);
conn *server_conn_find(server *s, uint64_t id);
/* Every client socket, in the handshake or not (sockets_used). */
size_t server_socket_count(const server *s);
/* Wall-clock ms when the server started; its node name ("warren@host"). */
uint64_t server_started_at(const server *s);
/* Room for an address as text (INET6_ADDRSTRLEN). */
#define SERVER_HOST_LEN 46
/* sa's address as text into host ("?" unless IPv4 or IPv6; an IPv4-mapped
 * IPv6 address as the IPv4 one, as RabbitMQ shows peers of a dual-stack
 * listener); returns its port. */
int server_sockaddr_host(const struct sockaddr *sa, char host[SERVER_HOST_LEN]);
/* The port the first AMQP listener bound (the configured one may be 0);
 * 0 without one (listeners.tcp = none). */
int server_amqp_port(const server *s);
/* The AMQP listeners, in configuration order: the i-th one's port, and in
 * *ip its address as bound ("::" for every interface on a dual-stack
 * socket), valid while the server lives. */
size_t server_amqp_listener_count(const server *s);
int server_amqp_listener(const server *s, size_t i, const char **ip);
const char *server_node_name(const server *s);
uint64_t wall_clock_ms(void);

uint32_t vhost_queue_count(const vhost *v);
stats *vhost_stats(vhost *v);

typedef struct conn_info {
    uint64_t id;
    const char *name;      /* "127.0.0.1:51390 -> 127.0.0.1:5672" */
    const char *peer_host, *host;
    int peer_port, port;
    const char *user, *vhost; /* "" before login / open */
    const char *state;        /* "starting", "tuning", "opening", "running", "blocked", "closing" */
    const char *auth_mechanism;
    amqp_bytes client_properties; /* validated table content, or empty */
    uint16_t channel_max, heartbeat;
    uint32_t frame_max, channels;
    uint64_t connected_at; /* wall clock ms */
    size_t send_pend;
    const stats *stats;
} conn_info;
void conn_describe(const conn *c, conn_info *out);
uint64_t conn_id(const conn *c);
/* Open channels by slot: 0..conn_channel_slots-1, NULL for an empty one. */
uint32_t conn_channel_slots(const conn *c);
chan *conn_channel_at(conn *c, uint32_t slot);
chan *conn_channel_find(conn *c, uint16_t number);
/* The management API closes a connection: 320 CONNECTION_FORCED with the
 * reason RabbitMQ gives ("Closed via management plugin" unless `reason`). */
void conn_force_close(conn *c, const char *reason);

typedef struct chan_info {
    uint16_t number;
    bool confirm, transactional;
    uint32_t prefetch_count, global_prefetch_count;
    uint32_t unacked, unconfirmed, uncommitted_msgs, uncommitted_acks, consumers;
    uint64_t oldest_unacked_ms; /* server_now_ms clock, 0 = none */
    const stats *stats;
} chan_info;
void chan_describe(const chan *ch, chan_info *out);
/* The channel's counters per queue it took messages from (STAT_DELIVER ..
 * STAT_REDELIVER) and per exchange it published to (STAT_PUBLISH,
 * STAT_CONFIRM, STAT_RETURN_UNROUTABLE, STAT_DROP_UNROUTABLE), indexed by
 * stat_id, in first-use order: RabbitMQ's channel_queue_metrics and
 * channel_exchange_metrics. Deleted queues are left out. At most
 * CHAN_OBJECT_STATS_MAX of each; past that, old ones make room. */
#define CHAN_OBJECT_STATS_MAX 64
typedef void (*chan_queue_stats_fn)(void *arg, queue *q, const uint64_t *n);
typedef void (*chan_exchange_stats_fn)(void *arg, amqp_bytes exchange, const uint64_t *n);
void chan_foreach_queue_stats(chan *ch, chan_queue_stats_fn fn, void *arg);
void chan_foreach_exchange_stats(chan *ch, chan_exchange_stats_fn fn, void *arg);
consumer *chan_consumers(chan *ch); /* linked through ch_next */
/* When the oldest delivery from `q` this channel holds was made; 0 = none. */
uint64_t chan_oldest_unacked_from(chan *ch, const queue *q);

typedef struct queue_info {
    uint32_t ready, unacked, consumers;
    uint64_t ready_bytes, unacked_bytes;
    uint32_t paged;            /* ready messages paged out: in the journal, not in RAM */
    uint64_t paged_bytes;      /* their body bytes */
    uint32_t persistent;       /* ready and unacked messages the journal holds for the queue */
    uint64_t persistent_bytes; /* their body bytes */
    double consumer_capacity;  /* 0..1, RabbitMQ's; 0 without consumers (queue.c) */
    size_t memory;             /* bytes the queue's own structures use (not bodies) */
    uint64_t oldest_ready_ms;  /* server_now_ms clock, 0 = none */
    uint32_t delivery_counts[QUEUE_DC_BUCKETS];
    uint64_t delivery_limit_dead; /* messages dead-lettered or dropped by the delivery limit */
    uint64_t consumer_timeouts;   /* consumers cancelled or channels closed by consumer timeouts */
    uint32_t dead_letters_held;   /* at-least-once dead letters waiting for a queue to take them */
    uint64_t dead_letter_bytes_held; /* their body bytes */
    uint32_t delayed;          /* held back by delayed retry (neither ready nor unacked) */
    consumer *active_consumer; /* x-single-active-consumer, or NULL */
    consumer *exclusive_consumer;
    stats *stats;
} queue_info;
void queue_describe(queue *q, queue_info *out);
/* Its consumers, in round-robin order: NULL prev gives the first. */
consumer *queue_next_consumer(queue *q, consumer *prev);
stats *queue_stats(queue *q);

/* Admin operations take the same paths as the AMQP methods (durability in
 * the metadata store, journal settles) and fail with the same AMQP error
 * (code and RabbitMQ's text) for the caller to report. */
int admin_queue_declare(vhost *v, const queue_spec *spec, queue **out, amqp_error *err);
int admin_queue_delete(vhost *v, amqp_bytes name, bool if_unused, bool if_empty, amqp_error *err);
int admin_queue_purge(vhost *v, amqp_bytes name, amqp_error *err);
int admin_exchange_declare(vhost *v, const route_exchange_spec *spec, amqp_error *err);
int admin_exchange_delete(vhost *v, amqp_bytes name, bool if_unused, amqp_error *err);
/* queue.bind / exchange.bind (dest_is_queue says which `dest` names). */
int admin_bind(vhost *v, amqp_bytes source, bool dest_is_queue, amqp_bytes dest, amqp_bytes key,
               amqp_bytes args, bool bind, amqp_error *err);
/* basic.publish as the user `user` (checked against user-id); *routed says
 * whether any queue took it. `props` is encoded properties (flags + list). */
int admin_publish(vhost *v, const char *user, amqp_bytes exchange, amqp_bytes key,
                  amqp_bytes props, amqp_bytes body, bool *routed, amqp_error *err);
/* basic.get of up to `count` messages, each passed to fn as delivered;
 * then each is acked, requeued (in order, redelivered) or rejected
 * (dead-lettered). Returns how many, or -1 with err set. */
typedef enum admin_ackmode { ADMIN_ACK, ADMIN_REQUEUE, ADMIN_REJECT } admin_ackmode;
typedef void (*admin_get_fn)(void *arg, msg *m, bool redelivered, uint32_t remaining);
int admin_get(vhost *v, amqp_bytes name, uint32_t count, admin_ackmode mode, admin_get_fn fn,
              void *arg, amqp_error *err);
/* Routes and enqueues a message in `v` (shared with basic.publish): queues
 * found, whether one refused it, and the journal sequence to confirm at. */
typedef struct vhost_routed {
    size_t queues;
    bool refused;
    journal_seq wait;
} vhost_routed;
vhost_routed vhost_publish(vhost *v, route_exchange *ex, msg *m, amqp_bytes headers,
                           int64_t expiration_ms);

/* The effective configuration as rabbitmq.conf keys and values (no
 * passwords), for GET /api/environment. */
void config_describe(const config *c, void (*fn)(void *arg, const char *key, const char *value),
                     void *arg);

#endif
