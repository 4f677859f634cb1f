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

/* ---- logging ------------------------------------------------------------ */

typedef enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERROR, LOG_NONE } log_level;

/* Writes "YYYY-MM-DD hh:mm:ss.mmm [level] text" to stderr. */
void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_set_level(log_level level);
/* "debug", "info", "warning", "error", "none"; false if unknown. */
bool log_parse_level(const char *name, log_level *out);

/* ---- configuration ------------------------------------------------------ */

#define CONFIG_MAX_USERS 16

typedef struct config_user {
    char name[64];
    char pass[64];
} config_user;

typedef struct config {
    char listen_host[64]; /* listeners.tcp.default, host part ("0.0.0.0") */
    int listen_port;      /* 0 binds a free port */
    char default_user[64];
    char default_pass[64];
    char default_vhost[64];
    bool guest_loopback_only; /* loopback_users includes the default user */
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
} config;

/* Sets RabbitMQ's defaults. */
void config_defaults(config *c);

/* Reads `path` (RabbitMQ's "key = value" format, # comments). On failure
 * writes "path:line: reason" to `err` and returns false. */
bool config_load_file(config *c, const char *path, char *err, size_t errlen);

/* Applies one "key=value" override; `origin` names it in errors. */
bool config_set(config *c, const char *key, const char *value, const char *origin, char *err,
                size_t errlen);

/* ---- messages ----------------------------------------------------------- */

/* A published message, stored once and shared by reference. Everything the
 * delivery needs (exchange, routing key, raw properties, body) lives in one
 * allocation; the body sits behind msg_body() so a journal-backed store can
 * supply it later without changing callers. */
typedef struct msg msg;

/* Allocates a message able to hold `body_size` bytes; refs = 1. NULL on OOM. */
msg *msg_new(amqp_bytes exchange, amqp_bytes routing_key, amqp_bytes properties,
             uint64_t body_size);
void msg_ref(msg *m);
void msg_unref(msg *m);
/* Appends a body fragment; returns false if it would exceed body_size. */
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

/* ---- transports --------------------------------------------------------- */

/* A client socket with input and output buffers (transport.c). Output is
 * appended during a loop turn and written once at its end, one writev per
 * socket; the owner hears about input, drained output and a vanished peer
 * through these handlers. A future TLS or in-memory transport keeps the
 * same interface. */
typedef struct transport transport;
typedef struct transport_flusher transport_flusher;
typedef struct transport_handlers {
    void (*on_read)(void *ctx);                   /* new bytes in transport_input */
    void (*on_drained)(void *ctx, size_t pending); /* a write happened; bytes left */
    void (*on_closed)(void *ctx);                 /* EOF or error: peer gone */
} transport_handlers;

transport_flusher *transport_flusher_new(struct event_base *base);
void transport_flusher_free(transport_flusher *fl);
/* Takes over `fd` (closed by transport_free); NULL on failure, fd untouched. */
transport *transport_new(transport_flusher *fl, struct event_base *base, int fd,
                         const transport_handlers *h, void *ctx);
void transport_free(transport *t);
struct evbuffer *transport_input(transport *t);
/* Output. reserve: room for n contiguous bytes (NULL on OOM), valid until
 * the next output call; commit: n of them were written. write: copies.
 * write_reference: appends memory that stays owned by the caller until
 * cleanup runs. Each queues the end-of-turn write. */
uint8_t *transport_reserve(transport *t, size_t n);
void transport_commit(transport *t, size_t n);
void transport_write(transport *t, const void *p, size_t n);
void transport_write_reference(transport *t, const void *p, size_t n,
                               void (*cleanup)(const void *data, size_t len, void *arg),
                               void *arg);
/* Queues the output for the end-of-turn write. */
void transport_flush_later(transport *t);
size_t transport_pending(const transport *t);
void transport_pause_reading(transport *t, bool paused);
/* Drops unsent output and stops reading (the peer is gone or too slow). */
void transport_abort(transport *t);

/* ---- server ------------------------------------------------------------- */

/* Creates the listener and vhosts from `cfg` (copied). NULL on failure
 * (already logged). */
server *server_new(const config *cfg);
/* Runs the loop until SIGTERM/SIGINT; returns the exit status. */
int server_run(server *s);
void server_free(server *s);

const config *server_config(const server *s);
struct event_base *server_base(server *s);
transport_flusher *server_flusher(server *s);
/* The durable metadata store (data_dir/metadata.db) and message journal. */
meta *server_meta(server *s);
journal *server_journal(server *s);
/* The durable queue the store knows by `id`, or NULL. */
queue *server_queue_by_store_id(server *s, uint64_t id);
/* Milliseconds on a monotonic clock, refreshed per read batch and tick. */
uint64_t server_now_ms(const server *s);
vhost *server_vhost(server *s, amqp_bytes name);
/* Checks a user's password; false when unknown or wrong. */
bool server_authenticate(server *s, amqp_bytes user, amqp_bytes pass, bool loopback);
/* A new unique id for server-generated names ("amq.gen-…", "amq.ctag-…"). */
void server_random_name(server *s, const char *prefix, char *out, size_t outlen);
void server_conn_opened(server *s, conn *c);
/* A confirm or commit-ok waits for journal sequence `seq` (the loop does
 * not spin while the disk is what it waits for). */
void server_journal_wait(server *s, journal_seq seq);
/* Whether the memory alarm is on (new connections start blocked too). */
bool server_memory_alarm(const server *s);
/* Whether the journal's unwritten backlog is so large that publishers
 * should wait for the disk (with hysteresis; they resume on a sync). */
bool server_journal_lagging(server *s);
void server_conn_closed(server *s, conn *c);
/* Refreshes the cached clock that server_now_ms returns. */
void server_touch_clock(server *s);

/* ---- virtual hosts ------------------------------------------------------ */

vhost *vhost_new(server *s, const char *name);
/* Frees at shutdown: queues are freed, not deleted (durable ones stay). */
void vhost_free(vhost *v);
bool vhost_closing(const vhost *v);
const char *vhost_name(const vhost *v);
server *vhost_server(vhost *v);
route_table *vhost_routes(vhost *v);
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

/* ---- connections -------------------------------------------------------- */

/* Takes ownership of an accepted socket. */
void conn_accept(server *s, int fd, bool loopback, const char *peer);
/* Closes with connection.close(code, text) -- e.g. 320 on shutdown. */
void conn_close(conn *c, uint16_t code, const char *text, uint32_t method_id);
/* Called by the server's housekeeping timer: heartbeats and timeouts. */
void conn_tick(conn *c, uint64_t now_ms);
/* The memory alarm went on or off: tell clients that asked (connection.
 * blocked / unblocked); while on, a connection that publishes is no longer
 * read, as RabbitMQ blocks publishers. */
void conn_set_alarm(conn *c, bool on);
/* Frees at once (server shutdown, after the loop has stopped). */
void conn_free_now(conn *c);
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

/* ---- queues ------------------------------------------------------------- */


/* Parsed queue arguments (x-...). Slices point into the table parsed. */
enum { QUEUE_DROP_HEAD, QUEUE_REJECT_PUBLISH, QUEUE_REJECT_PUBLISH_DLX };
typedef struct queue_args {
    int64_t message_ttl, expires, max_length, max_length_bytes; /* -1 = none */
    uint8_t overflow;
    uint8_t max_priority; /* 0 = not a priority queue */
    bool single_active;
    bool has_dlx, has_dlrk;
    amqp_bytes dlx, dlrk;
} queue_args;

/* Validates declare arguments (406 with RabbitMQ's texts) and parses them. */
int queue_args_parse(amqp_bytes args, amqp_bytes qname, const char *vhost, queue_args *out,
                     amqp_error *err);
/* 406 unless the arguments RabbitMQ compares on redeclare are the same. */
int queue_args_equivalent(amqp_bytes current, amqp_bytes received, amqp_bytes qname,
                          const char *vhost, amqp_error *err);

typedef struct queue_spec {
    amqp_bytes name;
    bool durable, exclusive, auto_delete;
    amqp_bytes arguments;
    conn *owner; /* for exclusive queues */
} queue_spec;

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
/* Puts a delivered message back at its place, among the messages that
 * were queued around it (takes a new reference). */
void queue_requeue(queue *q, queue_item it);
/* A message recovery found in the journal, left there until delivered. */
typedef struct queue_paged {
    uint64_t id;
    journal_loc loc;
    uint32_t body_size;
    uint8_t priority;
    uint32_t delivery_count;
    bool maybe_delivered;
    uint64_t delayed_until; /* held back until then (wall clock, ms since the epoch); 0: not */
} queue_paged;
/* Recovery: appends a message from the journal, in journal order. */
void queue_restore(queue *q, const queue_paged *p);
/* Takes the head for basic.get; false when empty. Caller owns it.m's ref. */
bool queue_get(queue *q, queue_item *it);
/* Dead-letters `it` (reason "rejected", "expired", "maxlen") to the queue's
 * x-dead-letter-exchange, or drops it; takes over it.m's reference. */
void queue_dead_letter(queue *q, queue_item it, const char *reason);
/* Restarts the x-expires idle timer (declare, basic.get). */
void queue_touch(queue *q);
const queue_args *queue_get_args(const queue *q);
/* The id the store knows a durable queue by (0 = none). */
uint64_t queue_store_id(const queue *q);
void queue_set_store_id(queue *q, uint64_t id);
vhost *queue_vhost(queue *q);
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
/* A channel holds a delivery from `q`, delivered `count` times in all
 * (this delivery included) -- and later settles it. */
void queue_delivery_held(queue *q, uint32_t count);
void queue_delivery_settled(queue *q, uint32_t count);
/* Deliveries from `q` not yet acked, rejected or requeued. */
uint32_t queue_unacked_count(const queue *q);
/* How many of its messages -- ready ones by how often they were delivered
 * before, unacked ones by how often they were delivered including now --
 * fall in each bucket. */
void queue_delivery_counts(const queue *q, uint32_t out[QUEUE_DC_BUCKETS]);
/* When the oldest ready message entered the queue (server_now_ms clock);
 * 0 when none is ready. */
uint64_t queue_oldest_ready_ms(const queue *q);

/* ---- consumers ---------------------------------------------------------- */

struct consumer {
    chan *ch;
    queue *q;
    char tag[256];
    bool no_ack;
    bool exclusive;
    int32_t priority;
    uint32_t prefetch; /* 0 = unlimited */
    uint32_t unacked;
    consumer *q_next, *q_prev;   /* ring in the queue, by priority */
    consumer *ch_next;           /* list in the channel */
};

/* Adds `cons` to its queue (q and ch set). */
void queue_add_consumer(queue *q, consumer *cons);
/* Removes it; an auto-delete queue left without consumers is deleted. */
void queue_remove_consumer(queue *q, consumer *cons);

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
/* Restores durable exchanges, queues and bindings at start. */
bool durable_load(server *s);

/* ---- persistent messages (persist.c) ----------------------------------- */

/* Journals a persistent message routed to `queues` (once, plus an enqueue
 * per durable queue). Returns the journal sequence to wait for before
 * confirming, or 0 when nothing was journaled. */
journal_seq persist_publish(server *s, msg *m, queue **queues, size_t n);
/* `m` left durable queue `q` (ack, drop or dead-letter). */
void persist_settle(queue *q, const msg *m, journal_settle_kind kind);
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

#endif
