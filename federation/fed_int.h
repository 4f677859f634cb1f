/* federation's private parts: the upstream settings, the names RabbitMQ's
 * plugin gives what it declares upstream, and the headers it adds -- pure
 * functions, unit tested on their own (tests/unit/test_federation_*.c) --
 * and the links the manager (links.c) runs. */
#ifndef WARREN_FED_INT_H
#define WARREN_FED_INT_H

#include "../client/client.h"
#include "federation.h"

/* ---- upstreams (upstream.c) ---------------------------------------------- */

typedef enum fed_ack_mode { FED_ON_CONFIRM, FED_ON_PUBLISH, FED_NO_ACK } fed_ack_mode;

#define FED_NAME_MAX 256 /* names: 255 bytes and the NUL */
#define FED_URIS_MAX 16

/* One upstream as it applies to one object: the federation-upstream
 * parameter with its set element's keys over it (rabbit_federation_upstream's
 * bget), RabbitMQ's defaults where neither has a key. */
typedef struct fed_upstream {
    char name[FED_NAME_MAX];
    char *uris[FED_URIS_MAX]; /* malloc'd; fed_upstream_clear frees them */
    size_t nuris;
    char exchange[FED_NAME_MAX], queue[FED_NAME_MAX]; /* default: the object's name */
    char consumer_tag[FED_NAME_MAX];                  /* "federation-link-" + name */
    uint32_t prefetch_count;                          /* 1000 */
    uint32_t reconnect_delay_ms;                      /* 5 s */
    int64_t max_hops;                                 /* 1 */
    int64_t expires, message_ttl;                     /* ms; -1 = none */
    bool trust_user_id;
    fed_ack_mode ack_mode; /* on-confirm */
} fed_upstream;

/* Reads upstream `name` (its parameter's JSON `value`) for the object
 * named `object`, with the keys of `set_element` (JSON of one element of a
 * federation-upstream-set, or NULL) taking precedence. False when the
 * JSON is not what the parameter's validation let through (logged by the
 * caller) or memory ran out. */
bool fed_upstream_read(const char *name, const char *value, const char *set_element,
                       const char *object, fed_upstream *out);
void fed_upstream_clear(fed_upstream *u);

/* ---- names (names.c) ------------------------------------------------------ */

/* The exchange link's queue on the upstream (upstream_queue_name):
 * "federation: X -> CLUSTER" with ":DOWNX" when the downstream exchange
 * has another name, or ":DOWNVHOST:DOWNX" when the vhosts differ. */
void fed_queue_name(char *out, size_t cap, const char *upstream_x, const char *upstream_vhost,
                    const char *cluster, const char *down_vhost, const char *down_x);
/* Its internal exchange: the queue's name, a space, the suffix "A" or "B". */
void fed_exchange_name(char *out, size_t cap, const char *queue_name, char suffix);
/* "Federation link (upstream: U, policy: P)", the connection's name. */
void fed_connection_name(char *out, size_t cap, const char *upstream, const char *policy);
/* The link's id in the status: 8 hex digits of a hash of its key, as
 * rabbit_federation_status shows one (the hash is Warren's, FNV-1a). */
void fed_link_id(char *out, size_t cap, const char *vh, const char *type, const char *object,
                 const char *upstream, const char *upstream_object);

/* ---- headers (headers.c) --------------------------------------------------- */

/* What one hop adds to x-received-from. `cluster` NULL: not known (the
 * upstream did not say), left out as RabbitMQ leaves it out. */
typedef struct fed_hop {
    const char *uri;          /* without credentials */
    const char *object;       /* the downstream exchange or queue */
    bool queue;               /* a queue link: "queue" and visit-count */
    bool redelivered;
    const char *cluster;      /* the upstream's cluster_name (exchange links) */
    const char *vhost;        /* the upstream's vhost (exchange links) */
} fed_hop;

/* Whether a message with `headers` (a validated table's content) goes on
 * to a downstream named `cluster` in `vhost` (should_forward): yes unless
 * x-received-from is an array of max_hops entries or more, or one entry
 * names this cluster and vhost. */
bool fed_should_forward(amqp_bytes headers, int64_t max_hops, const char *cluster,
                        const char *vh);

/* The headers of a message an exchange link republishes: `headers` with
 * the hop's table first in x-received-from (rabbit_basic's
 * prepend_table_header). A queue link also records, on the first hop, the
 * original exchange and routing key and renames CC to x-original-cc, and
 * counts its visits (visit-count, the entry of an earlier visit through
 * the same uri and queue replaced). Writes the table's content into `w`;
 * w->overflow when it does not fit. */
void fed_hop_headers(amqp_writer *w, amqp_bytes headers, const fed_hop *hop,
                     amqp_bytes exchange, amqp_bytes routing_key);

/* The arguments the exchange link binds with upstream for a local binding
 * with `args` (update_binding): `args` with x-bound-from headed by this
 * downstream's entry (cluster-name, vhost, exchange "VHOST:X SUFFIX",
 * hops). False (nothing written) when the binding must not go upstream:
 * it came from there (the upstream's cluster and vhost in its
 * x-bound-from) or has no hops left. */
typedef struct fed_bind_from {
    int64_t max_hops;
    const char *upstream_cluster, *upstream_vhost; /* NULL: not known */
    const char *cluster, *vhost, *exchange;        /* this downstream */
    char suffix;
} fed_bind_from;
bool fed_binding_args(amqp_writer *w, amqp_bytes args, const fed_bind_from *b);

/* ---- links (link.c, deliver.c, link_setup.c, links.c) -------------------------- */

/* An upstream delivery waiting for the journal before its ack. */
typedef struct fed_pending {
    uint64_t tag;
    journal_seq wait;
} fed_pending;

/* A binding the exchange link made upstream: key and arguments (with
 * x-bound-from), one allocation. */
typedef struct fed_bound {
    struct fed_bound *next;
    amqp_bytes key, args;
    bool wanted; /* still among the local bindings (binding upkeep's mark) */
    uint8_t data[];
} fed_bound;

typedef enum fed_status { FED_STARTING, FED_RUNNING, FED_ERROR } fed_status;

typedef struct fed_link fed_link;
struct fed_link {
    federation *f;
    fed_link *next;
    bool queue; /* a queue link, else an exchange link */
    char vhost[FED_NAME_MAX], object[FED_NAME_MAX], policy[FED_NAME_MAX];
    char *config; /* the upstream's JSON and its set element's: a change restarts the link */
    fed_upstream up;
    char uri[1024]; /* without credentials */
    char upstream_vhost[FED_NAME_MAX]; /* the URI's */
    char id[12], conn_name[2 * FED_NAME_MAX + 48];
    fed_status status;
    char error[300];
    uint64_t changed_at; /* wall clock ms */
    bool seen;           /* the manager's mark */
    bool retiring;       /* no longer wanted: closing, freed once closed (f->retired) */
    bool closing;        /* retiring, its acks done: deleting upstream objects, closing */
    client *c;
    uint64_t retry_at; /* loop_now_ms when an errored link connects again */
    size_t calls;      /* setup calls still unanswered; running when 0 */
    bool consuming;    /* queue link: a basic.consume is in force */
    bool paused;       /* not reading: a resource alarm is on */
    /* exchange link */
    char upstream_queue[3 * FED_NAME_MAX], internal_x[3 * FED_NAME_MAX + 4];
    char suffix;
    fed_bound *bound;
    /* on-confirm acks waiting for the journal, a ring */
    fed_pending *pending;
    size_t pending_head, pending_n, pending_cap;
    uint8_t *scratch; /* headers and properties being rewritten */
    size_t scratch_cap;
};

struct federation {
    server *s;
    loop *l;
    struct event *timer;
    fed_link *links;   /* in status order */
    fed_link *retired; /* closing their connections */
    uint64_t reconcile_at; /* loop_now_ms of the next look at policies and bindings */
    char cluster[FED_NAME_MAX]; /* this broker's cluster name */
};

/* link.c: a link for (object, upstream) and its connection. link_new takes
 * `up` over (cleared on failure) and starts connecting; NULL on OOM. */
fed_link *fed_link_new(federation *f, bool queue, const char *vh, const char *object,
                       const char *policy, const char *config, fed_upstream *up);
/* Closes its connection (deliveries not acked go back upstream), frees. */
void fed_link_free(fed_link *k);
/* The link is no longer wanted (its policy or upstream went): deliveries
 * from now on go back upstream, those published here are acked once the
 * journal has them, then an exchange link deletes its upstream queue and
 * exchange, as RabbitMQ's does on a normal stop, the connection closes
 * cleanly and the link is freed (it waits in f->retired meanwhile). */
void fed_link_retire(fed_link *k);
/* The manager's periodic turn: reconnect after the delay, stop reading
 * while a resource `alarm` is on, queue links start or stop consuming,
 * exchange links keep their bindings (`bindings`: once a second). True
 * when a queue link waits for its local consumers (fed_queue_demand). */
bool fed_link_tick(fed_link *k, uint64_t now, bool bindings, bool alarm);
/* Connects again now (the API's restart): deliveries not acked go back. */
void fed_link_restart(fed_link *k);
void fed_link_synced(fed_link *k, journal_seq synced);
void fed_link_set_status(fed_link *k, fed_status st, const char *error);

/* A retired link whose acks are done: deletes its upstream objects, closes. */
void fed_link_finish_retiring(fed_link *k);
/* deliver.c: the client's deliver handler of every link (ctx: the link). */
void fed_on_deliver(void *ctx, client *c, uint16_t ch, const client_message *m);

/* link_setup.c: what a link declares upstream once connected, and the
 * exchange link's bindings. */
void fed_setup_start(fed_link *k);
/* The passive check of the upstream object came back: it exists (`found`)
 * or not (404). */
void fed_setup_checked(fed_link *k, bool found);
void fed_bindings_sync(fed_link *k);
/* A running queue link consumes or cancels as the local queue's demand
 * says. True when it does not consume while the local queue has
 * consumers: they will want more soon. */
bool fed_queue_demand(fed_link *k);
void fed_bindings_free(fed_link *k);
/* The local vhost of a link, or NULL when it went. */
vhost *fed_link_vhost(fed_link *k);

#endif
