/* queue: virtual hosts and their queues -- arguments, expiry, delayed
 * retry, dead-lettering, moves, policies, runtime parameters, durable
 * topology and persistent messages. */
#ifndef WARREN_QUEUE_H
#define WARREN_QUEUE_H

#include "../access/access.h"
#include "../stream/stream.h"

/* ---- virtual hosts ------------------------------------------------------ */

/* A vhost: its exchanges and bindings (a route_table), its queues by name,
 * its policies and parameters, and the details the management plane shows.
 * The server's registry (core/) finds it by name; admin/ creates and
 * deletes it with all it holds. */
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
/* The loop its queues run on (their timers, clock, messages, counters). */
loop *vhost_loop(vhost *v);
route_table *vhost_routes(vhost *v);
/* The vhost's policies and operator policies (policy.c). */
policy_set *vhost_policies(vhost *v);
queue *vhost_queue_find(vhost *v, amqp_bytes name);
void vhost_queue_add(vhost *v, queue *q);
void vhost_queue_remove(vhost *v, queue *q);
/* Direct reply-to addresses of this vhost's channels. */
bool vhost_reply_register(vhost *v, const char *token, chan *ch);
void vhost_reply_unregister(vhost *v, chan *ch);
chan *vhost_reply_find(vhost *v, amqp_bytes token);

/* Routes a message published to `ex` and copies the queues it goes to into
 * `buf` (cap entries) or, when more, a malloc'd array; *out is whichever,
 * to be freed by the caller when it is not `buf`. A copy, because
 * enqueueing may route again (dead-lettering) and reuse the table's array.
 * The CC and BCC headers (arrays of strings) route the message with those
 * keys too -- RabbitMQ's sender-selected distribution. `m` is the message
 * (x-consistent-hash's hash-property reads its properties; may be NULL). */
size_t vhost_route(vhost *v, route_exchange *ex, amqp_bytes key, amqp_bytes headers,
                   const msg *m, queue **buf, size_t cap, queue ***out);
/* The queue with this store id, or NULL: in `v`, or in any vhost. */
queue *vhost_queue_by_store_id(vhost *v, uint64_t id);
queue *queue_by_store_id(server *s, uint64_t id);
/* Deletes the exclusive queues owned by `c`, whose connection is closing. */
void vhost_drop_exclusive(vhost *v, conn *c);


/* ---- queues ------------------------------------------------------------- */


/* Parsed queue arguments (x-...). Slices point into the table parsed. */
enum { QUEUE_DROP_HEAD, QUEUE_REJECT_PUBLISH, QUEUE_REJECT_PUBLISH_DLX };
/* x-delayed-retry-type: which returns are held back before they are ready
 * again (RabbitMQ 4.3's values, see delayed.c). */
enum { QUEUE_RETRY_DISABLED, QUEUE_RETRY_ALL, QUEUE_RETRY_FAILED, QUEUE_RETRY_RETURNED };
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
    /* streams: x-max-age (ms), x-stream-max-segment-size-bytes, -1 = none;
     * x-stream-filter-size-bytes, 0 = the default */
    int64_t max_age_ms, max_segment_bytes;
    uint8_t filter_size;
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
/* Messages held back by delayed retry or by their delivery time. */
uint32_t queue_delayed_count(const queue *q);
/* A publish's own delay (RabbitMQ's quorum queues from their rabbit_fifo
 * v9): the x-opt-delivery-time header of raw properties, an integer, ms
 * since the epoch; 0 when none. A queue whose type has delays_publish
 * holds a message whose time lies ahead until then. */
uint64_t queue_delivery_time(amqp_bytes properties);
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
/* Whether a returned message from `q` is delivered with x-delivery-count:
 * always from a quorum queue (RabbitMQ 3.10), from a classic queue only
 * when a delivery limit or delayed retry (Warren's extensions there) counts
 * its returns -- a plain classic queue adds nothing, as RabbitMQ's. */
bool queue_shows_delivery_count(const queue *q);
/* "classic" or "quorum", as /api/queues shows the type. */
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
/* When the oldest ready message entered the queue (loop_now_ms clock);
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

/* The consumer seam: a queue hands messages to a consumer only through
 * these operations, never by calling its owner (a channel today; a stream
 * subscriber or a consumer on another loop later) directly. */
typedef struct consumer_ops {
    /* Whether the consumer can take one more delivery now. */
    bool (*can_take)(const consumer *cons);
    /* Takes one message from `q`; the owner settles it later through
     * queue_delivery_settled / queue_requeue. */
    void (*deliver)(consumer *cons, queue *q, queue_item it);
    /* The queue was deleted: the consumer is already unlinked from it. */
    void (*cancelled)(consumer *cons);
    /* A timeout that applies to its deliveries changed (a policy). */
    void (*timeouts_changed)(consumer *cons);
} consumer_ops;

struct consumer {
    const consumer_ops *ops;
    void *owner; /* what ops act on: the channel for AMQP consumers */
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
    struct stream_cursor *cursor; /* a stream's consumer: where it reads (queue/) */
    /* basic.consume's arguments as given (the management API shows them):
     * the owner's malloc'd copy, NULL when empty */
    uint8_t *arguments;
    uint32_t arguments_len;
};

/* Before queue_add_consumer: the queue type's checks of basic.consume's
 * arguments (a stream's x-stream-offset, its filter); it may attach state
 * to `c` (cursor), released when the consumer is removed. AMQP_ERROR with
 * the refusal in `err`. */
int queue_consume_check(queue *q, consumer *c, amqp_bytes args, amqp_error *err);
/* Adds `cons` to its queue (q, ops and owner set). */
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
 * those of components Warren keeps (shovels and federation upstreams,
 * which their links read); operator policies are the policy engine's --
 * and the server's global ones, name -> value. A value is JSON text, which the
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

/* ---- vhost limits (vhost_limits.c) --------------------------------------- */

/* RabbitMQ's vhost limits: the runtime parameter (vhost-limits, limits),
 * its value {"max-connections": N, "max-queues": N} (either may be absent;
 * a negative N is no limit, 0 allows none). param.c tells the vhost when
 * that parameter changes (vhost_limits_changed) and the vhost keeps the
 * numbers, so the checks below read two integers. */
#define VHOST_LIMITS_COMPONENT "vhost-limits"
#define VHOST_LIMITS_NAME "limits"
/* The parameter's value changed to `value` (JSON text as the management
 * plane stores it: compact, no spaces); NULL when it was deleted. */
void vhost_limits_changed(vhost *v, const char *value);
/* The limits in force; -1 = none. */
int64_t vhost_max_connections(const vhost *v);
int64_t vhost_max_queues(const vhost *v);
/* A connection.open into v: true and counted while under max-connections,
 * else false (nothing counted). Every true is released once, when the
 * connection goes (vhost_connection_left). */
bool vhost_connection_take(vhost *v);
void vhost_connection_left(vhost *v);
uint32_t vhost_connection_count(const vhost *v);
/* Whether one more queue would go over max-queues. */
bool vhost_queue_limit_reached(const vhost *v);

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

/* ---- delayed exchanges (xdelay.c) ---------------------------------------- */

/* An x-delayed-message exchange keeps the messages routing held back
 * (route_held) and routes each through itself at its deadline, with
 * x-delay negated. Persistent messages held by a durable exchange are
 * journaled and survive a restart or crash with their deadline. */
typedef struct xdelay xdelay;
/* Holds `m` (takes its own reference, or pages it out to the journal) at
 * delayed exchange `ex` for delay_ms. Returns the journal sequence a
 * confirm waits for (0: none); *ok false when out of memory (not held). */
journal_seq xdelay_hold(vhost *v, route_exchange *ex, msg *m, uint32_t delay_ms, bool *ok);
/* xdelay_hold for each hold of the vhost's last route (route_held): what
 * a caller of vhost_route does with the message it routed. */
journal_seq xdelay_hold_routed(vhost *v, msg *m, bool *ok);
/* The messages `ex` holds now (the API's messages_delayed). */
uint32_t xdelay_count(vhost *v, const route_exchange *ex);
/* `ex` was deleted: what it holds is dropped (and journaled as gone). */
void xdelay_exchange_deleted(vhost *v, const route_exchange *ex);
/* Its vhost is deleted: every delayed exchange's messages are dropped. */
void xdelay_vhost_deleted(vhost *v);
/* `ex` is freed (deleted, or its vhost freed at shutdown): frees its state. */
void xdelay_exchange_freed(vhost *v, const route_exchange *ex);
/* The journal id of a durable delayed exchange's held messages: a hash of
 * its vhost and name with XDELAY_ID_BIT set (queue ids never have it). */
#define XDELAY_ID_BIT (1ull << 62)
uint64_t xdelay_store_id(const char *vhost_name, amqp_bytes exchange);
/* Recovery: the state of the durable delayed exchange whose journal id is
 * `id` (NULL: none), and an entry replay found for it. */
xdelay *xdelay_by_store_id(server *s, uint64_t id);
void xdelay_restore(xdelay *x, const queue_paged *p);

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
 * live entry, in restore order, with the durable queue's store id; the
 * highest message id the journal holds into *max_msg_id (new messages
 * take ids above it: msg_reserve_ids). */
bool persist_replay(journal *j, bool clean,
                    void (*each)(void *ctx, uint64_t queue_id, const queue_paged *p), void *ctx,
                    uint64_t *max_msg_id);


/* ---- introspection ---- */

uint32_t vhost_queue_count(const vhost *v);
stats *vhost_stats(vhost *v);

typedef struct queue_info {
    uint32_t ready, unacked, consumers;
    uint64_t ready_bytes, unacked_bytes;
    uint32_t paged;            /* ready messages paged out: in the journal, not in RAM */
    uint64_t paged_bytes;      /* their body bytes */
    uint32_t persistent;       /* ready and unacked messages the journal holds for the queue */
    uint64_t persistent_bytes; /* their body bytes */
    double consumer_capacity;  /* 0..1, RabbitMQ's; 0 without consumers (queue.c) */
    size_t memory;             /* bytes the queue's own structures use (not bodies) */
    uint64_t oldest_ready_ms;  /* loop_now_ms clock, 0 = none */
    uint32_t delivery_counts[QUEUE_DC_BUCKETS];
    uint64_t delivery_limit_dead; /* messages dead-lettered or dropped by the delivery limit */
    uint64_t consumer_timeouts;   /* consumers cancelled or channels closed by consumer timeouts */
    uint32_t dead_letters_held;   /* at-least-once dead letters waiting for a queue to take them */
    uint64_t dead_letter_bytes_held; /* their body bytes */
    uint32_t delayed;          /* held back by delayed retry (neither ready nor unacked) */
    consumer *active_consumer; /* x-single-active-consumer, or NULL */
    bool stream;               /* a stream queue: the log's figures below */
    stream_info log;
    consumer *exclusive_consumer;
    stats *stats;
} queue_info;
void queue_describe(queue *q, queue_info *out);

/* ---- deduplication (dedup.c) --------------------------------------------- */

/* A deduplication cache as the management API shows it: entries held, the
 * x-cache-size limit, the bytes it takes, duplicates dropped so far. */
typedef struct dedup_info {
    uint32_t entries, size;
    uint64_t bytes, duplicates;
} dedup_info;
/* An exchange was created or restored (the exchange_created hook): with
 * x-message-deduplication true it gets its cache, loaded from data_dir
 * when it is durable with x-cache-persistence disk. */
void dedup_exchange_created(vhost *v, route_exchange *ex);
/* The exchange_freed hook (statistics too): saves a disk cache when the
 * vhost is freed (the broker stops), deletes it when the exchange is
 * deleted; then frees. */
void dedup_exchange_freed(void *ctx, route_exchange *ex);
/* The vhost is being deleted: its exchanges' saved caches go. */
void dedup_vhost_deleted(vhost *v);
/* Whether a message with `headers` published to `ex` is a duplicate
 * (false for an exchange without deduplication); a message that is not is
 * remembered. */
bool dedup_exchange_duplicate(vhost *v, const route_exchange *ex, amqp_bytes headers);
/* false when `ex` (or `q`) does not deduplicate. */
bool dedup_exchange_info(const route_exchange *ex, dedup_info *out);
bool queue_dedup_info(queue *q, dedup_info *out);
/* Its consumers, in round-robin order: NULL prev gives the first. */
consumer *queue_next_consumer(queue *q, consumer *prev);
stats *queue_stats(queue *q);

/* ---- streams (stream_queue.c) ------------------------------------------- */

/* A stream queue (x-queue-type stream) keeps its messages in a stream/ log
 * in data_dir/streams/, not in the queue core's rings: every message gets
 * the next offset and its arrival time, and consumers read it each at its
 * own position without taking anything away. AMQP 0-9-1 publishes are
 * stored as AMQP 1.0 messages (amqp10/), as RabbitMQ stores them, so a
 * stream written over either protocol is read over either.
 *
 * Commit: appends made during a loop turn collect in one chunk, which is
 * written when the journal hands its batch to its sync thread and synced
 * in the same round (store.h's journal_append_sync). An append returns the
 * journal sequence after which it is on disk: a confirm waits for it as for
 * any journaled message, and readers see a chunk once it is synced. */
bool queue_is_stream(const queue *q);
/* The journal sequence the appends to q so far wait for (0: none): an
 * AMQP publish routed to a stream is confirmed once it is synced. */
journal_seq queue_stream_pending(const queue *q);
/* Its log (NULL when q is not a stream): readers are opened on it
 * directly (stream_reader_open); they see what is committed. */
stream_log *queue_stream_log(queue *q);
/* Appends a message -- its AMQP 1.0 bytes in `nparts` pieces -- with its
 * filter value (NULL: none), or a stream-protocol sub-batch entry. Returns
 * the journal sequence to wait for (0: nothing to wait for: no journal,
 * synced at once) or, when it cannot be appended (the disk failed,
 * logged), false in *ok. */
journal_seq queue_stream_append(queue *q, const stream_part *parts, int nparts,
                                const void *filter, size_t filter_len, bool *ok);
journal_seq queue_stream_append_batch(queue *q, uint8_t compression, uint16_t records,
                                      uint32_t uncompressed_len, const void *data, size_t len,
                                      bool *ok);
/* Publisher deduplication: the highest publishing id a writer (the
 * stream protocol's publisher reference) had appended; false when the
 * stream knows no such writer. Set it after each message is appended:
 * every chunk carries the sequences that hold with it, so after a crash
 * they match exactly the messages that survived. */
bool queue_stream_writer_seq(queue *q, amqp_bytes writer, uint64_t *seq);
bool queue_stream_set_writer_seq(queue *q, amqp_bytes writer, uint64_t seq);
/* Server-side offset tracking (StoreOffset / QueryOffset) by consumer
 * name; stored in the stream, so it survives a restart. */
bool queue_stream_query_offset(queue *q, amqp_bytes name, uint64_t *offset);
bool queue_stream_store_offset(queue *q, amqp_bytes name, uint64_t offset);

/* Where an AMQP consumer of a stream reads next (the offset of the next
 * record its cursor returns); false for a consumer of another queue. Its
 * lag is the stream's committed offset less this. */
bool queue_stream_consumer_offset(const consumer *c, uint64_t *offset);
/* Reads up to `count` messages from `offset` (the first one when below it)
 * without consuming anything, each as an AMQP 0-9-1 message (with its
 * x-stream-offset header) passed to fn with its offset and its chunk's
 * timestamp (ms); fn must not keep `m` past the call. Returns how many,
 * -1 when q is not a stream or cannot be read. */
typedef void (*queue_peek_fn)(void *arg, msg *m, uint64_t offset, int64_t timestamp_ms);
int queue_stream_peek(queue *q, uint64_t offset, uint32_t count, queue_peek_fn fn, void *arg);

/* Watchers: told when more of the stream is committed (readers at the end
 * may read on) and when the stream is deleted (after which `q` must not be
 * used; the watcher is already unlinked). A stream-protocol subscription
 * is one; AMQP consumers are served by the queue itself. */
typedef struct stream_watch stream_watch;
struct stream_watch {
    void (*committed)(stream_watch *w);
    void (*deleted)(stream_watch *w);
    stream_watch *next, *prev; /* the queue's */
};
void queue_stream_watch(queue *q, stream_watch *w);
void queue_stream_unwatch(queue *q, stream_watch *w);
/* The journal synced up to `synced` (broker/'s callback): the chunks it
 * covers become visible, their watchers and consumers are told. */
void queue_streams_synced(server *s, journal_seq synced);
/* Start-up, after the durable queues are loaded: removes the folders of
 * streams that were deleted while their files could not be (a crash
 * between the two). */
void queue_streams_collect(server *s);
/* After the journal is closed and every queue freed. */
void queue_streams_free(server *s);

/* ---- queue types (queue_type.c) ------------------------------------------ */

/* How a queue keeps and hands out its messages: the operations behind
 * queue_publish, queue_get, queue_requeue, queue_delivery_settled,
 * queue_purge, queue_delete and queue_describe. Classic and quorum queues
 * share the queue core's (queue.c); a stream queue will bring its own. */
typedef struct queue_ops {
    bool (*publish)(queue *q, msg *m, int64_t expiration_ms);
    bool (*get)(queue *q, queue_item *it);
    void (*requeue)(queue *q, queue_item it, queue_return why);
    void (*settled)(queue *q, uint32_t count, const msg *m);
    uint32_t (*purge)(queue *q);
    void (*delete)(queue *q);
    void (*describe)(queue *q, queue_info *out);
    /* Hands ready messages to consumers that can take them. */
    void (*dispatch)(queue *q);
    /* Optional: a consumer is about to be added (basic.consume with its
     * arguments): AMQP_OK, or AMQP_ERROR with the type's refusal; and it
     * was removed. */
    int (*consume)(queue *q, consumer *c, amqp_bytes args, amqp_error *err);
    void (*consumer_gone)(queue *q, consumer *c);
} queue_ops;

/* A queue type: its operations and the behaviour the queue core and the
 * modules around it ask of it where types differ -- never "is it
 * quorum?". Classic and quorum are two entries; a stream queue will be a
 * third. */
typedef struct queue_type {
    uint8_t id;                      /* QUEUE_TYPE_*: counts by type are indexed by it */
    const char *name;                /* x-queue-type, and the management API's "type" */
    const char *module;              /* RabbitMQ's name for it, in error texts and metrics */
    const queue_ops *ops;
    /* The properties a declare must have (406 with RabbitMQ's text). */
    int (*check_declare)(const queue_spec *spec, const char *vhost, amqp_error *err);
    const char *const *refused_args; /* declare arguments it does not take (NULL-ended) */
    const char *overflow_error;      /* its own reason for a bad x-overflow; NULL: the usual */
    bool any_delivery_limit;         /* x-delivery-limit takes any integer (negative: none) */
    int64_t delivery_limit;          /* the default x-delivery-limit; -1 = none */
    bool server_named;               /* queue.declare with an empty name may create one */
    bool priority_levels;            /* x-max-priority levels; else two, priority 5 up is high */
    bool counts_deliveries;          /* redeliveries carry x-delivery-count, limit or not */
    bool get_counts_first;           /* basic.get shows x-delivery-count 0 on a first delivery */
    bool journals_transient;         /* keeps transient messages in the journal too */
    bool replicated;                 /* has members and a leader (the API shows them) */
    bool refuses_over_limit;         /* reject-publish refuses past the limit, not at it */
    bool reject_publish_dlx;         /* takes x-overflow reject-publish-dlx (else drop-head) */
    bool at_least_once;              /* x-dead-letter-strategy at-least-once */
    bool global_prefetch;            /* basic.qos global applies to its consumers */
    /* Consumers read without taking (a stream): basic.get, basic.nack and
     * basic.reject, queue.purge are refused with 540, as RabbitMQ's
     * "... not supported by <name> queues ...". */
    bool reads_without_taking;
    bool own_log; /* keeps its messages in its own files (a stream's), not the journal */
    bool delays_publish; /* holds a message until its x-opt-delivery-time (queue_delivery_time) */
} queue_type;

const queue_type *queue_type_by_id(uint8_t id);
/* The type an x-queue-type value names; NULL if none does. */
const queue_type *queue_type_named(amqp_bytes name);
/* The type declare arguments ask for: classic when they name none. */
const queue_type *queue_type_of_args(amqp_bytes args);
const queue_type *queue_type_of(const queue *q);

#endif
