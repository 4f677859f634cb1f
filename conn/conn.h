/* conn: AMQP connections and channels -- the handshake, publishing,
 * declarations, consuming, replies -- and the admin operations the
 * management API runs through the same paths. */
#ifndef WARREN_CONN_H
#define WARREN_CONN_H

#include "../queue/queue.h"

/* ---- connections -------------------------------------------------------- */

/* Takes ownership of an accepted socket ("host:port" of the client in
 * `peer`); the connection runs on loop `l`. */
void conn_accept(server *s, loop *l, int fd, const char *peer);
/* A connection over `t` (not started yet) on loop `l`, which it owns from
 * now on; `peer` names the client in logs and the management API. The
 * client's address, for loopback_users and the login brake, is the
 * transport's (none: not loopback). When out of memory, t is freed. */
void conn_attach(server *s, loop *l, transport *t, const char *peer);
/* The same for a connection made inside the broker (a shovel's in-process
 * link to this broker, RabbitMQ's direct connection): its login is taken
 * without a password and it may do anything in any vhost, as RabbitMQ's
 * direct connections run as the all-permitted user "none". Only code in
 * the process can make one: `t` is an in-memory pipe, no socket. */
void conn_attach_trusted(server *s, loop *l, transport *t, const char *peer);
bool conn_trusted(const conn *c);
/* Closes with connection.close(code, text) -- e.g. 320 on shutdown. */
void conn_close(conn *c, uint16_t code, const char *text, uint32_t method_id);
/* Its vhost is being deleted: closes with 320 and forgets the vhost (its
 * exclusive queues go now), so nothing refers to it afterwards. */
void conn_vhost_deleted(conn *c, const char *text);
/* Called by the server's housekeeping timer: heartbeats and timeouts. */
void conn_tick(conn *c, uint64_t now_ms);
/* The resource alarms in effect changed (`alarms`: SERVER_ALARM_* bits, 0
 * when none): tell clients that asked (connection.blocked with RabbitMQ's
 * reason, "low on memory", "low on disk" or both joined by " & ", once;
 * connection.unblocked when the last clears); while any is on, a
 * connection that publishes is no longer read, as RabbitMQ blocks
 * publishers. */
void conn_set_alarm(conn *c, unsigned alarms);
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
loop *conn_loop(conn *c);
vhost *conn_vhost(conn *c);
const char *conn_user(const conn *c);
/* The client's "host:port", for log lines. */
const char *conn_peer_name(const conn *c);
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
/* The channel a consumer belongs to; NULL for a consumer that is not a
 * channel's (none yet: the stream protocol's subscribers will be). */
chan *consumer_chan(const consumer *cons);
/* Lets the queues this channel consumes from deliver again (capacity or
 * flow came back). */
void chan_resume(chan *ch);
/* When the oldest delivery the channel holds unacked was made
 * (loop_now_ms clock); 0 when none. */
uint64_t chan_oldest_unacked_ms(chan *ch);
/* The housekeeping tick: consumer timeouts (see config.consumer_timeout_ms).
 * May close the channel with an error (conn_raise). */
void chan_tick(chan *ch, uint64_t now_ms);


/* ---- introspection and admin operations (the management API) ---- */

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
    const transport *transport; /* its TLS session: transport_tls_describe */
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
    uint64_t oldest_unacked_ms; /* loop_now_ms clock, 0 = none */
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
/* ---- super streams (superstream.c) ---------------------------------------- */

/* A super stream (RabbitMQ 3.11+'s partitioned stream, by the rules of
 * 3.13's rabbit_stream_manager): a durable direct exchange NAME with
 * arguments {"x-super-stream": true}, bound to one stream per partition
 * -- NAME-0 .. NAME-(n-1) with binding keys "0".."n-1", or NAME-<key> for
 * given binding keys -- each binding with {"x-stream-partition-order": i}.
 * The stream-protocol server (CreateSuperStream, DeleteSuperStream,
 * Partitions, Route), the management API and warrenctl share these. Each
 * caller checks the user's permissions first, as 3.13's
 * check_super_stream_management_permitted: configure on the exchange and
 * on every stream, read on the exchange, write on every stream. */
#define ADMIN_SUPER_PARTITIONS_MAX 1000 /* rabbit_stream_utils' default maximum */
/* What went wrong, rabbit_stream_manager's reasons (the stream protocol
 * answers them with its response codes, the API with {reason,"text"}). */
typedef enum admin_super_status {
    ADMIN_SUPER_OK,
    ADMIN_SUPER_VALIDATION_FAILED,  /* a name, a count, an argument; `text` may be "" */
    ADMIN_SUPER_ALREADY_EXISTS,     /* reference_already_exists: an exchange or a queue */
    ADMIN_SUPER_NOT_FOUND,          /* stream_not_found: no exchange by that name */
    ADMIN_SUPER_INTERNAL,           /* internal_error: out of memory, a step that failed */
} admin_super_status;
typedef struct admin_super_error {
    admin_super_status status;
    char text[512]; /* RabbitMQ's text, "" when its reason is a bare atom */
} admin_super_error;
/* rabbit_stream_manager's name for each status ("validation_failed", ...). */
const char *admin_super_reason(admin_super_status st);
/* A stream argument in the stream protocol's form: "max-age" -> "7D". */
typedef struct admin_stream_arg {
    amqp_bytes key, value;
} admin_stream_arg;
/* The queue arguments of a stream made from the protocol's (3.13's
 * stream_queue_arguments: max-length-bytes, max-age,
 * stream-max-segment-size-bytes, initial-cluster-size, queue-leader-locator,
 * stream-filter-size-bytes; other keys ignored) as the content of an AMQP
 * table with x-queue-type stream, into buf; a super stream's partitions
 * (`super`) get queue-leader-locator balanced unless given. False
 * (validation_failed) for a number that is not one or a value 3.13
 * refuses, or when buf is short. */
bool admin_stream_arguments(const admin_stream_arg *args, size_t n, bool super, uint8_t *buf,
                            size_t cap, amqp_bytes *out);
typedef struct admin_super_spec {
    amqp_bytes name;
    uint32_t partitions;    /* NAME-0 .. NAME-(n-1), when keys is NULL */
    const amqp_bytes *keys; /* binding keys: NAME-<key> each */
    uint32_t nkeys;
    /* the stream protocol's CreateSuperStream names each partition itself:
     * names[i] for keys[i] (NULL: NAME-<key>) */
    const amqp_bytes *names;
    const admin_stream_arg *args; /* the partitions' stream arguments */
    size_t nargs;
} admin_super_spec;
/* The streams a spec makes, in order, NUL-terminated into names[0..n-1];
 * false when one would pass 255 bytes. */
bool admin_super_stream_names(const admin_super_spec *spec, char (*names)[256], uint32_t n);
/* Creates all of it or nothing (what was made is removed again). */
admin_super_status admin_super_stream_create(vhost *v, const admin_super_spec *spec,
                                             admin_super_error *err);
/* Deletes the exchange and the streams bound to it (each whose deletion
 * fails is left, as RabbitMQ logs and goes on). NOT_FOUND without the
 * exchange. */
admin_super_status admin_super_stream_delete(vhost *v, amqp_bytes name, admin_super_error *err);
/* A super stream's partitions in x-stream-partition-order (bindings of
 * exchange NAME to streams; one without the argument comes last). */
typedef struct admin_partition {
    queue *stream;
    amqp_bytes key; /* valid until the routing table changes */
    int64_t order;  /* INT64_MAX when the binding has none */
} admin_partition;
/* Writes up to cap of them into out and returns how many there are; -1
 * when there is no exchange NAME. */
long admin_super_stream_partitions(vhost *v, amqp_bytes name, admin_partition *out, size_t cap);
/* Whether exchange `ex` is a super stream's (x-super-stream true). */
bool admin_is_super_stream(const route_exchange *ex);

/* Routes and enqueues a message in `v` (shared with basic.publish): queues
 * found, whether one refused it, and the journal sequence to confirm at. */
typedef struct vhost_routed {
    size_t queues;
    bool refused;
    journal_seq wait;
} vhost_routed;
vhost_routed vhost_publish(vhost *v, route_exchange *ex, msg *m, amqp_bytes headers,
                           int64_t expiration_ms);

#endif
