/* route: the exchanges of one virtual host, their bindings, and the routing
 * of a message to the set of queues it goes to.
 *
 * Queues belong to the broker; to this module a queue is an opaque pointer,
 * found by name through a hook (for the default exchange) and passed in on
 * bind. Each exchange type (direct, fanout, topic, headers, and
 * x-consistent-hash, x-modulus-hash, x-local-random) is a small table of
 * functions; route_message follows exchange-to-exchange bindings with a
 * work list and a seen set, and applies alternate exchanges only when
 * nothing matched. Errors are reported as AMQP errors with RabbitMQ's codes
 * and texts.
 */
#ifndef WARREN_ROUTE_H
#define WARREN_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "../amqp/amqp.h"

typedef struct route_table route_table;
typedef struct route_exchange route_exchange;

/* ROUTE_DELAYED is x-delayed-message (delay.c): an exchange of its
 * x-delayed-type that holds messages with an x-delay header back. */
typedef enum route_type {
    ROUTE_DIRECT,
    ROUTE_FANOUT,
    ROUTE_TOPIC,
    ROUTE_HEADERS,
    ROUTE_CONSISTENT_HASH, /* "x-consistent-hash", the 3.10 plugin's */
    ROUTE_MODULUS_HASH,    /* "x-modulus-hash", RabbitMQ 4.3 */
    ROUTE_LOCAL_RANDOM,    /* "x-local-random", RabbitMQ 4.0 */
    ROUTE_DELAYED,         /* "x-delayed-message", the plugin's (delay.c) */
    ROUTE_DEDUP,           /* "x-message-deduplication", the dedup plugin's: a fanout whose
                            * messages the broker deduplicates (queue/dedup.c) */
} route_type;
#define ROUTE_DELAYED_NAME "x-delayed-message"
/* The longest x-delay held, ms (2^32-1, as the plugin); longer ones route at once. */
#define ROUTE_DELAY_MAX 4294967295LL

/* Callbacks into the broker. */
typedef struct route_hooks {
    /* The queue named `name` in this vhost, or NULL. */
    void *(*queue_lookup)(void *ctx, amqp_bytes name);
    /* An exchange is about to be freed (deleted, or auto-deleted when its
     * last binding went); lets the store forget a durable one. May be NULL.
     * Must not call back into the table. Not called by route_table_free. */
    void (*exchange_deleted)(void *ctx, const route_exchange *ex);
    /* An exchange is being freed (deleted, or with its table): lets the
     * broker free what it keeps in route_exchange_user. May be NULL. */
    void (*exchange_freed)(void *ctx, route_exchange *ex);
    /* An exchange.declare (or a restore) created `ex`: lets the broker
     * apply its policies. May be NULL. Must not declare or delete
     * exchanges. Not called for the built-in exchanges of a new table. */
    void (*exchange_created)(void *ctx, route_exchange *ex);
    /* The name of a queue (x-modulus-hash orders its bindings by it), and
     * its type as RabbitMQ's module names it ("rabbit_quorum_queue"; NULL
     * for a classic queue: x-local-random takes classic queues only).
     * Either may be NULL: every queue is then "" and classic. */
    amqp_bytes (*queue_name)(void *ctx, const void *queue);
    const char *(*queue_type)(void *ctx, const void *queue);
    /* The raw content-header properties (flags first) of the message given
     * to route_message_with; asked only by x-consistent-hash with
     * hash-property, so other routing never computes them. May be NULL. */
    amqp_bytes (*message_properties)(void *ctx, const void *msg);
} route_hooks;

/* What exchange.declare asks for. `arguments` is a validated table. */
typedef struct route_exchange_spec {
    amqp_bytes name;
    amqp_bytes type; /* "direct", "fanout", "topic", "headers", or an x- type above */
    bool passive, durable, auto_delete, internal;
    amqp_bytes arguments;
} route_exchange_spec;

/* Creates the table with the default exchange "" and amq.direct,
 * amq.fanout, amq.topic, amq.headers, amq.match and amq.rabbitmq.trace
 * (topic, internal), all durable, as RabbitMQ creates them in every vhost.
 * `vhost` is used in error texts and copied. Returns NULL only on
 * out-of-memory. route_table_free frees every exchange and binding without
 * calling exchange_deleted. */
route_table *route_table_new(const char *vhost, const route_hooks *hooks, void *ctx);
void route_table_free(route_table *t);

/* ---- exchanges ---------------------------------------------------------- */

/* exchange.declare. On success *out (may be NULL) is the new or existing
 * exchange. Fails with 503 COMMAND_INVALID (connection) "invalid exchange
 * type 'foo'" for an unknown type (checked first; passive declares ignore
 * the type), 403 for "" (passive too) or a new "amq." name, 404 for a
 * passive declare of a missing exchange, 406 for a new exchange whose
 * alternate-exchange is not a longstr, and 406 when an existing exchange
 * differs in type, durable, auto_delete, internal or alternate-exchange. */
int route_exchange_declare(route_table *t, const route_exchange_spec *spec, route_exchange **out,
                           amqp_error *err);

/* exchange.delete. 403 for the default exchange and any amq.* name (even a
 * missing one), 406 with if_unused when the exchange is the source of any
 * binding. Deleting a missing exchange succeeds, as in RabbitMQ 3.x.
 * Removes every binding to and from it, then auto-deletes sources left
 * without bindings. */
int route_exchange_delete(route_table *t, amqp_bytes name, bool if_unused, amqp_error *err);

/* The exchange named `name`, or NULL. The default exchange is "". */
route_exchange *route_exchange_find(route_table *t, amqp_bytes name);

/* 404 "no exchange 'x' in vhost '/'" when missing. */
route_exchange *route_exchange_lookup(route_table *t, amqp_bytes name, uint32_t method_id,
                                      amqp_error *err);
/* Bumped whenever an exchange is added or removed: a route_exchange
 * pointer found while it had a value is valid while it keeps it. */
uint64_t route_exchanges_version(const route_table *t);

/* Read-only views of an exchange; the slices live as long as the exchange. */
amqp_bytes route_exchange_name(const route_exchange *ex);
route_type route_exchange_type(const route_exchange *ex);
const char *route_type_name(route_type type);
/* Whether `name` is an exchange type this module implements. */
bool route_type_known(amqp_bytes name);
/* RabbitMQ's description of a type, as /api/overview lists it. */
const char *route_type_description(route_type type);
bool route_exchange_durable(const route_exchange *ex);
bool route_exchange_auto_delete(const route_exchange *ex);
bool route_exchange_internal(const route_exchange *ex);
amqp_bytes route_exchange_arguments(const route_exchange *ex);
/* A pointer the broker keeps with the exchange (its statistics); NULL
 * until set. The exchange_freed hook frees it. */
void *route_exchange_user(const route_exchange *ex);
void route_exchange_set_user(route_exchange *ex, void *user);
/* What the broker adds to an exchange beyond its statistics (a
 * deduplication cache): NULL for a plain exchange, so publishing to one
 * costs a load. The exchange_freed hook frees it. */
void *route_exchange_extra(const route_exchange *ex);
void route_exchange_set_extra(route_exchange *ex, void *extra);
/* What a policy gives `ex`: the policy's name (NULL = none), kept for the
 * management API, and its alternate exchange (len 0 = none); both copied.
 * The exchange's own alternate-exchange argument wins over the policy's,
 * as RabbitMQ's rabbit_policy:get_arg has it; the default exchange never
 * has one. route_exchange_arguments is unchanged. false on out-of-memory,
 * the previous ones kept. */
bool route_exchange_set_policy(route_exchange *ex, const char *policy, amqp_bytes alternate);
/* The name given by route_exchange_set_policy, or NULL; valid until the
 * next call. */
const char *route_exchange_policy(const route_exchange *ex);
/* The alternate exchange in force: the argument's, else the policy's;
 * false when none. The slice lives until the next change of either. */
bool route_exchange_alternate(const route_exchange *ex, amqp_bytes *name);
/* Number of bindings whose source is this exchange. */
size_t route_exchange_binding_count(const route_exchange *ex);

/* Calls fn for every exchange (the default one included), in no set order.
 * fn must not declare or delete exchanges. */
void route_foreach_exchange(route_table *t, void (*fn)(void *arg, route_exchange *ex), void *arg);

/* ---- bindings ----------------------------------------------------------- */

/* A binding destination: exactly one of the two is set. */
typedef struct route_dest {
    void *queue;
    route_exchange *exchange;
} route_dest;

/* queue.bind / exchange.bind. Idempotent: binding twice with the same key
 * and arguments (in any order) keeps one binding. 403 when the source or
 * the destination is the default exchange (checked before existence), 404
 * when the source is missing, 406 for invalid headers-exchange arguments
 * (x-match not all/any/all-with-x/any-with-x). `args` is a validated table;
 * the binding keeps its own copy of key and args. RabbitMQ reports a
 * missing source before a missing destination queue. */
int route_bind(route_table *t, amqp_bytes source, route_dest dest, amqp_bytes key,
               amqp_bytes args, uint32_t method_id, amqp_error *err);

/* queue.unbind / exchange.unbind. Unbinding something not bound succeeds,
 * and so does unbinding from a missing source exchange (RabbitMQ 3.10 does
 * not 404 there, nor for a missing queue). An auto-delete source exchange
 * left with no bindings is deleted. 403 for the default exchange as source
 * or destination. */
int route_unbind(route_table *t, amqp_bytes source, route_dest dest, amqp_bytes key,
                 amqp_bytes args, uint32_t method_id, amqp_error *err);

/* Removes every binding whose destination is `queue` (the queue is being
 * deleted); auto-deletes source exchanges left with no bindings. */
void route_unbind_queue(route_table *t, void *queue);

/* One binding, for listings (management API, definitions export). `args`
 * has its entries sorted by key, as RabbitMQ stores binding arguments. */
typedef struct route_binding_view {
    const route_exchange *source;
    route_dest dest;
    amqp_bytes key;
    amqp_bytes args;
} route_binding_view;

/* Calls fn for every binding (not the implicit default-exchange ones). */
void route_foreach_binding(route_table *t, void (*fn)(void *arg, const route_binding_view *b),
                           void *arg);

/* The ring of an x-consistent-hash exchange (the plugin's bucket map): each
 * destination in it owns the buckets [first, first + weight), in the order
 * they were bound. Calls fn once per destination in bucket order; false
 * (fn not called) when `ex` is not of that type. */
typedef struct route_ring_entry {
    uint64_t first, weight;
    route_dest dest;
} route_ring_entry;
bool route_exchange_ring(const route_exchange *ex,
                         void (*fn)(void *arg, const route_ring_entry *e), void *arg);

/* ---- routing ------------------------------------------------------------ */

/* Routes a message published to `ex` with `key` and message `headers` (a
 * validated table, possibly empty). Returns the number of distinct queues;
 * *queues points at an array owned by the table, valid until the next call.
 * Follows exchange-to-exchange bindings (each exchange visited once, so
 * cycles are safe) and an exchange's alternate exchange (its argument, else
 * its policy's) when the exchange itself matched nothing. */
size_t route_message(route_table *t, route_exchange *ex, amqp_bytes key, amqp_bytes headers,
                     void ***queues);
/* The same, with the broker's message (`msg`, opaque here and may be
 * NULL: handed to the message_properties hook if a type needs the
 * properties), and `again` set when `key` is one of the message's CC or
 * BCC keys rather than its routing key: the types that pick one
 * destination per message (x-consistent-hash, x-modulus-hash,
 * x-local-random) add nothing then, as RabbitMQ routes a message to them
 * once. */
size_t route_message_with(route_table *t, route_exchange *ex, amqp_bytes key,
                           amqp_bytes headers, const void *msg, bool again, void ***queues);

/* ---- delayed exchanges (delay.c) ---------------------------------------- */

/* A delayed exchange a route_message reached held the message back for
 * delay_ms instead of routing it (its x-delay header): the caller keeps the
 * message and routes it through `exchange` again at its deadline. */
typedef struct route_hold {
    route_exchange *exchange;
    uint32_t delay_ms;
} route_hold;
/* The holds of the route_message calls since route_held_clear (*n of
 * them, usually 0; one per exchange however many calls -- the CC and BCC
 * keys -- reached it); valid until the next call. */
const route_hold *route_held(const route_table *t, size_t *n);
void route_held_clear(route_table *t);
/* Whether ex is an x-delayed-message exchange (route_exchange_type says
 * ROUTE_DELAYED; it routes as its x-delayed-type). */
bool route_exchange_delayed(const route_exchange *ex);
/* The x-delay of a message's headers as the plugin reads it (an integer,
 * a decimal string, a float truncated); false when it has none it reads. */
bool route_delay_of(amqp_bytes headers, int64_t *delay);
/* Whether that delay holds the message back (0 < delay <= ROUTE_DELAY_MAX). */
bool route_delay_holds(int64_t delay);

#endif
