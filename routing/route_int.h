/* route_int: the routing module's private structures, shared by its .c
 * files and by nothing outside routing/ (route.h is the interface).
 *
 * Ownership: the table owns its exchanges (by name in `exchanges`), the
 * queue targets (by queue pointer in `queues`) and the bindings (indexed by
 * source, destination and key in `bindings`, and linked into two lists:
 * the source exchange's and the destination target's). Each exchange type
 * keeps its own index of the bindings whose source is that exchange, in the
 * exchange's `state`; a binding's `type_data` and `slot` locate it there.
 */
#ifndef WARREN_ROUTE_INT_H
#define WARREN_ROUTE_INT_H

#include <assert.h>
#include <stdint.h>

#include "route.h"

typedef struct route_binding route_binding;
typedef struct route_target route_target;
typedef struct route_run route_run;

/* ---- hashing and the open-addressing map -------------------------------- */

uint64_t route_hash_bytes(const void *p, size_t n);

static inline uint64_t route_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t route_hash_ptr(const void *p)
{
    return route_mix64((uint64_t)(uintptr_t)p);
}

/* Linear probing with backward-shift deletion (no tombstones). A slot is
 * empty when item is NULL; the full hash is kept so that probes compare it
 * before calling eq, and so that deletion and growth need no rehash. The
 * load stays at or below 3/4, so every probe ends at an empty slot. */
typedef struct route_slot {
    uint64_t hash;
    void *item;
} route_slot;

typedef struct route_map {
    route_slot *slots;
    size_t mask; /* capacity - 1; capacity is a power of two */
    size_t count;
} route_map;

/* Adds `item` (not already present). false on out-of-memory, map unchanged. */
bool route_map_insert(route_map *m, uint64_t hash, void *item);
/* Removes the slot holding exactly `item`, which must be present. */
void route_map_remove(route_map *m, uint64_t hash, const void *item);
void route_map_free(route_map *m);

/* The item with `hash` for which eq(item, key) holds, or NULL. Inline so
 * that a constant eq is inlined on the hot path. */
static inline void *route_map_find(const route_map *m, uint64_t hash,
                                   bool (*eq)(const void *item, const void *key), const void *key)
{
    size_t i;

    if (m->count == 0)
        return NULL;
    for (i = hash & m->mask;; i = (i + 1) & m->mask) {
        const route_slot *s = &m->slots[i];
        if (s->item == NULL)
            return NULL;
        if (s->hash == hash && eq(s->item, key))
            return s->item;
    }
}

/* Iteration: for (i = 0; m->slots && i <= m->mask; i++) if (m->slots[i].item) ... */

/* ---- binding vectors ---------------------------------------------------- */

/* An unordered array of bindings; each binding knows its index (`slot`), so
 * removal is a swap with the last element. */
typedef struct route_vec {
    route_binding **items;
    uint32_t count, cap;
} route_vec;

bool route_vec_push(route_vec *v, route_binding *b);
void route_vec_remove(route_vec *v, route_binding *b);
void route_vec_free(route_vec *v);

/* ---- targets, bindings, exchanges, the table ---------------------------- */

/* A binding destination. For a queue it is allocated while the queue has
 * bindings; for an exchange it is embedded in the exchange. `mark` equals
 * the table's generation once the target was collected by the current
 * route_message call: that is the dedup and the seen set. */
struct route_target {
    void *queue;
    route_exchange *exchange;
    uint64_t mark;
    route_binding *bindings; /* linked through dst_prev/dst_next */
    size_t nbindings;
};

struct route_binding {
    route_exchange *source;
    route_target *target;
    route_binding *src_prev, *src_next;
    route_binding *dst_prev, *dst_next;
    void *type_data; /* the type's record: direct bucket, topic node, headers pattern */
    uint32_t slot;   /* index in the type's route_vec (x-modulus-hash: its sorted array) */
    uint32_t key_len;
    uint32_t args_len;
    uint8_t data[]; /* key bytes, then args (sorted by key, as RabbitMQ stores them) */
};

static inline amqp_bytes route_binding_key(const route_binding *b)
{
    return (amqp_bytes){b->data, b->key_len};
}

static inline amqp_bytes route_binding_args(const route_binding *b)
{
    return (amqp_bytes){b->data + b->key_len, b->args_len};
}

/* One exchange type: a small table of functions, as RabbitMQ models them.
 * declare checks a new exchange's arguments (RabbitMQ's validate/1) and
 * validate a new binding (validate_binding/2); either may be NULL (all
 * accepted). bind returns false on out-of-memory with nothing changed. route calls route_run_collect for
 * each matching binding and returns how many matched (0 sends the message
 * to the alternate exchange). destroy runs after every binding is gone. */
typedef struct route_type_ops {
    route_type type;
    int (*declare)(route_table *t, const route_exchange_spec *spec, amqp_error *err);
    int (*validate)(route_exchange *ex, route_dest dest, amqp_bytes key, amqp_bytes args,
                    uint32_t method_id, amqp_error *err);
    bool (*create)(route_exchange *ex);
    bool (*bind)(route_exchange *ex, route_binding *b);
    void (*unbind)(route_exchange *ex, route_binding *b);
    size_t (*route)(route_exchange *ex, route_run *run);
    void (*destroy)(route_exchange *ex);
} route_type_ops;

extern const route_type_ops route_default_ops; /* "": the queue named by the key */
extern const route_type_ops route_direct_ops;
extern const route_type_ops route_fanout_ops;
extern const route_type_ops route_dedup_ops;
extern const route_type_ops route_topic_ops;
extern const route_type_ops route_headers_ops;
extern const route_type_ops route_consistent_hash_ops;
extern const route_type_ops route_modulus_hash_ops;
extern const route_type_ops route_local_random_ops;

struct route_exchange {
    route_target target; /* as a destination; target.exchange == this */
    route_table *table;
    const route_type_ops *ops;
    void *state; /* owned by ops */
    bool durable, auto_delete, internal, is_default;
    bool dying;             /* unlinked from the table, waiting to be freed */
    bool delayed;           /* x-delayed-message; ops are its x-delayed-type's (delay.c) */
    bool has_ae;            /* arguments carry an alternate-exchange */
    amqp_bytes ae_name;     /* slice of `arguments`, else of policy_ae */
    uint8_t *policy_ae;     /* a policy's alternate-exchange (owned), or NULL */
    uint32_t policy_ae_len;
    route_exchange *ae;     /* cached lookup of ae_name, valid at ae_version */
    uint64_t ae_version;
    route_binding *bindings; /* as source, linked through src_prev/src_next */
    size_t nbindings;
    route_exchange *next_dying;
    uint64_t name_hash;
    void *user;   /* route_exchange_user */
    void *extra;  /* route_exchange_extra */
    char *policy; /* the applied policy's name (owned), or NULL; cold: the API's */
    uint32_t name_len, args_len;
    uint8_t data[]; /* name bytes, then arguments */
};

/* Message headers parsed once per route_message call, sorted by key. */
typedef struct route_header {
    amqp_bytes key;
    amqp_field value;
} route_header;

typedef struct route_word {
    amqp_bytes word;
    uint64_t hash;
} route_word;

struct route_table {
    char *vhost;
    route_hooks hooks;
    void *ctx;
    route_map exchanges; /* route_exchange by name */
    route_map queues;    /* route_target by queue pointer */
    route_map bindings;  /* route_binding by (source, target, key) */
    route_exchange *default_exchange;
    uint64_t generation;  /* bumped per route_message call */
    uint64_t ex_version;  /* bumped when an exchange is added or removed */
    /* Routing scratch, owned and reused. result and work are sized when
     * targets and exchanges are added, so routing never allocates them. */
    void **result;
    size_t result_cap;
    route_exchange **work;
    size_t work_cap;
    route_word *words;
    size_t words_cap;
    route_header *headers; /* sorted message headers, then sort scratch */
    size_t headers_cap;
    uint64_t random; /* xorshift64* state for x-local-random */
    route_hold *held; /* delay.c: the last call's holds */
    size_t nheld, held_cap;
};

/* The state of one route_message call. */
struct route_run {
    route_table *t;
    uint64_t gen;
    amqp_bytes key;
    amqp_bytes headers;
    const void *msg;  /* the broker's message, for hooks.message_properties; may be NULL */
    bool again;       /* routing a CC/BCC key: one-pick types add nothing */
    size_t nresult, nwork;
    int words_state;   /* 0 not split yet, 1 split, -1 could not allocate */
    size_t nwords;
    int headers_state; /* same, for the sorted headers */
    size_t nheaders;
};

/* Adds a matched destination unless this call already has it: a queue
 * goes to the result, an exchange onto the work list. Capacity is
 * guaranteed by route_table_reserve. */
static inline void route_run_collect(route_run *run, route_target *tg)
{
    if (tg->mark == run->gen)
        return;
    tg->mark = run->gen;
    if (tg->queue != NULL) {
        assert(run->nresult < run->t->result_cap);
        run->t->result[run->nresult++] = tg->queue;
    } else {
        assert(run->nwork < run->t->work_cap);
        run->t->work[run->nwork++] = tg->exchange;
    }
}

static inline size_t route_run_collect_vec(route_run *run, const route_vec *v)
{
    uint32_t i;

    for (i = 0; i < v->count; i++)
        route_run_collect(run, v->items[i]->target);
    return v->count;
}

/* For the default exchange: a queue that may have no bindings at all. */
void route_run_collect_queue(route_run *run, void *queue);

/* Splits run->key into words once per call (topic); false on OOM. */
bool route_run_words(route_run *run);
/* Parses and sorts run->headers once per call (headers); false on OOM. */
bool route_run_headers(route_run *run);

/* delay.c: holds the message at delayed exchange x when its x-delay asks
 * for it (true: x routes nothing now). */
bool route_run_hold(route_run *run, route_exchange *x);
/* The ops an x-delayed-message declare routes by (its x-delayed-type,
 * found with `lookup`), or NULL with the plugin's error. */
const route_type_ops *route_delayed_base(route_table *t, const route_exchange_spec *spec,
                                         const route_type_ops *(*lookup)(amqp_bytes),
                                         amqp_error *err);

/* ---- shared helpers ----------------------------------------------------- */

route_exchange *route_exchange_find_bytes(route_table *t, amqp_bytes name);
/* Deletes `ex` (already checked) and every auto-delete exchange that its
 * removal leaves without bindings. */
void route_exchange_remove(route_table *t, route_exchange *ex);
/* Deletes `ex` if it is auto-delete and no longer the source of a binding. */
void route_maybe_auto_delete(route_table *t, route_exchange *ex);
/* Removes one binding from every index; frees a queue target left unused.
 * Does not auto-delete the source. */
void route_binding_remove(route_table *t, route_binding *b);
/* Grows the routing scratch for one more exchange / queue target. */
bool route_table_reserve(route_table *t);

/* ---- Erlang's hashing, as RabbitMQ's hash exchanges use it (erlhash.c) -- */

/* erlang:phash2/1 of <<B>>, of an atom, and of a field value as
 * rabbit_binary_parser decodes it ({Type, Value}). */
uint32_t route_phash2_binary(amqp_bytes b);
uint32_t route_phash2_atom(const char *name);
/* phash2 of a message's routing keys as RabbitMQ 4.x lists them: [Key |
 * the longstrs of the CC array header ++ those of BCC]. */
uint32_t route_phash2_routing_keys(amqp_bytes key, amqp_bytes headers);
uint32_t route_phash2_field(const amqp_field *f);
/* The consistent-hash plugin's jump_consistent_hash(Key, Buckets) for an
 * integer key: a bucket in [0, buckets). buckets in [1, 2^53). */
uint64_t route_jump_hash(uint32_t key, uint64_t buckets);
/* One step of xorshift64* (OTP's exs64): the next output; *state != 0. */
uint64_t route_xorshift64s(uint64_t *state);

/* Stable sort of entries by key, bytewise as Erlang compares binaries. */
void route_headers_sort(route_header *h, route_header *tmp, size_t n);
int route_key_compare(amqp_bytes a, amqp_bytes b);

#endif
