/* Virtual hosts: a route_table, a name index of queues (a chained hash
 * table whose buckets double when the load passes 1), and the details the
 * management plane shows (description, tags, default queue type, tracing),
 * kept in the metadata store (admin_put_vhost). */
#include <stdlib.h>
#include <string.h>

#include "queue.h"
#include "queue_internal.h"

/* A channel with a direct reply-to consumer, by its token. */
typedef struct reply_entry {
    const char *token; /* the channel's own, alive while registered */
    chan *ch;
} reply_entry;

struct vhost {
    server *srv;
    loop *loop; /* the loop its queues run on */
    char *name;
    route_table *routes;
    policy_set *policies;
    param_set *params;
    struct queue_link **buckets;
    uint32_t nbuckets, nqueues;
    bool closing;   /* being freed at shutdown */
    reply_entry *replies;
    size_t nreplies, replies_cap;
    stats stats; /* management counters */
    char *description, *tags, *default_queue_type;
    bool tracing;
    struct move *moves; /* move.c's list of moves from this vhost's queues */
    vhost_limits limits; /* vhost_limits.c's */
    xdelay *xdelays;     /* xdelay.c's: its delayed exchanges holding messages */
};

static uint32_t hash_name(amqp_bytes name)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < name.len; i++)
        h = (h ^ name.ptr[i]) * 16777619u;
    return h;
}

static void *lookup_hook(void *ctx, amqp_bytes name) { return vhost_queue_find(ctx, name); }
static amqp_bytes queue_name_hook(void *ctx, const void *q) { return queue_name(q); }
static amqp_bytes msg_properties_hook(void *ctx, const void *m) { return msg_properties(m); }

static const char *queue_type_hook(void *ctx, const void *q)
{
    const queue_type *t = queue_type_of(q);
    return t->id == QUEUE_TYPE_CLASSIC ? NULL : t->module;
}

static void exchange_deleted_hook(void *ctx, const route_exchange *ex)
{
    durable_exchange_deleted(ctx, ex);
    xdelay_exchange_deleted(ctx, ex);
}

static void exchange_freed_hook(void *ctx, route_exchange *ex)
{
    xdelay_exchange_freed(ctx, ex);
    dedup_exchange_freed(ctx, ex);
    stats_exchange_freed(ctx, ex);
}

static void exchange_created_hook(void *ctx, route_exchange *ex)
{
    policy_apply_exchange(ctx, ex);
    dedup_exchange_created(ctx, ex);
}

vhost *vhost_new(server *s, const char *name)
{
    vhost *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    static const route_hooks hooks = {.queue_lookup = lookup_hook,
                                      .exchange_deleted = exchange_deleted_hook,
                                      .exchange_freed = exchange_freed_hook,
                                      .exchange_created = exchange_created_hook,
                                      .queue_name = queue_name_hook,
                                      .queue_type = queue_type_hook,
                                      .message_properties = msg_properties_hook};
    v->srv = s;
    v->loop = server_loop(s, 0); /* one loop so far: every vhost's queues run on it */
    v->name = strdup(name);
    v->nbuckets = 64;
    v->buckets = calloc(v->nbuckets, sizeof *v->buckets);
    v->policies = policy_set_new();
    v->params = param_set_new(s, v);
    v->routes = route_table_new(name, &hooks, v);
    v->description = strdup("");
    v->tags = strdup("");
    v->default_queue_type = strdup("");
    v->limits = (vhost_limits){.max_connections = -1, .max_queues = -1};
    if (!v->name || !v->buckets || !v->policies || !v->params || !v->routes || !v->description ||
        !v->tags || !v->default_queue_type) {
        vhost_free(v);
        return NULL;
    }
    return v;
}

void vhost_free(vhost *v)
{
    if (!v)
        return;
    v->closing = true;
    queue_moves_free(v);
    for (uint32_t i = 0; i < v->nbuckets && v->buckets; i++) {
        while (v->buckets[i]) {
            queue *q = (queue *)v->buckets[i];
            queue_delete(q); /* unlinks it from the bucket */
        }
    }
    if (v->routes)
        route_table_free(v->routes);
    policy_set_free(v->policies);
    param_set_free(v->params);
    free(v->buckets);
    free(v->replies);
    stats_free(&v->stats);
    free(v->name);
    free(v->description);
    free(v->tags);
    free(v->default_queue_type);
    free(v);
}

struct move **vhost_moves(vhost *v) { return &v->moves; }
xdelay **vhost_xdelays(vhost *v) { return &v->xdelays; }
vhost_limits *vhost_limits_of(vhost *v) { return &v->limits; }
param_set *vhost_params(vhost *v) { return v->params; }

const char *vhost_description(const vhost *v) { return v->description; }
const char *vhost_tags(const vhost *v) { return v->tags; }
const char *vhost_default_queue_type(const vhost *v) { return v->default_queue_type; }
bool vhost_tracing(const vhost *v) { return v->tracing; }

bool vhost_set_details(vhost *v, const meta_vhost *d)
{
    char *description = strdup(d->description ? d->description : "");
    char *tags = strdup(d->tags ? d->tags : "");
    char *type = strdup(d->default_queue_type ? d->default_queue_type : "");
    if (!description || !tags || !type) {
        free(description);
        free(tags);
        free(type);
        return false;
    }
    free(v->description);
    free(v->tags);
    free(v->default_queue_type);
    v->description = description;
    v->tags = tags;
    v->default_queue_type = type;
    v->tracing = d->tracing;
    return true;
}

void vhost_foreach_queue(vhost *v, void (*fn)(void *arg, queue *q), void *arg)
{
    for (uint32_t i = 0; i < v->nbuckets; i++) {
        struct queue_link *l = v->buckets[i];
        while (l) {
            struct queue_link *next = l->hash_next; /* fn may unlink l */
            fn(arg, (queue *)l);
            l = next;
        }
    }
}

const char *vhost_name(const vhost *v) { return v->name; }
bool vhost_closing(const vhost *v) { return v->closing; }
route_table *vhost_routes(vhost *v) { return v->routes; }
policy_set *vhost_policies(vhost *v) { return v->policies; }

server *vhost_server(vhost *v) { return v->srv; }

queue *vhost_queue_find(vhost *v, amqp_bytes name)
{
    struct queue_link *l = v->buckets[hash_name(name) & (v->nbuckets - 1)];
    for (; l; l = l->hash_next)
        if (l->name_len == name.len && memcmp(l->name, name.ptr, name.len) == 0)
            return (queue *)l;
    return NULL;
}

static void rehash(vhost *v)
{
    uint32_t n = v->nbuckets * 2;
    struct queue_link **b = calloc(n, sizeof *b);
    if (!b)
        return; /* keep the longer chains */
    for (uint32_t i = 0; i < v->nbuckets; i++) {
        struct queue_link *l = v->buckets[i];
        while (l) {
            struct queue_link *next = l->hash_next;
            uint32_t h = hash_name((amqp_bytes){(uint8_t *)l->name, l->name_len}) & (n - 1);
            l->hash_next = b[h];
            b[h] = l;
            l = next;
        }
    }
    free(v->buckets);
    v->buckets = b;
    v->nbuckets = n;
}

void vhost_queue_add(vhost *v, queue *q)
{
    struct queue_link *l = (struct queue_link *)q;
    if (v->nqueues >= v->nbuckets)
        rehash(v);
    uint32_t h = hash_name((amqp_bytes){(uint8_t *)l->name, l->name_len}) & (v->nbuckets - 1);
    l->hash_next = v->buckets[h];
    v->buckets[h] = l;
    v->nqueues++;
}

void vhost_queue_remove(vhost *v, queue *q)
{
    struct queue_link *l = (struct queue_link *)q;
    uint32_t h = hash_name((amqp_bytes){(uint8_t *)l->name, l->name_len}) & (v->nbuckets - 1);
    for (struct queue_link **pp = &v->buckets[h]; *pp; pp = &(*pp)->hash_next) {
        if (*pp == l) {
            *pp = l->hash_next;
            v->nqueues--;
            return;
        }
    }
}

/* Deletes the exclusive queues `c` owns (its connection is closing). */
void vhost_drop_exclusive(vhost *v, conn *c)
{
    for (uint32_t i = 0; i < v->nbuckets; i++) {
        struct queue_link *l = v->buckets[i];
        while (l) {
            struct queue_link *next = l->hash_next;
            if (queue_owner((queue *)l) == c)
                queue_delete((queue *)l);
            l = next;
        }
    }
}

/* Adds `found` to the result; with `dedup`, leaves out queues already in it
 * (route_message's own result has no duplicates). */
static bool add_targets(void **found, size_t n, bool dedup, queue ***dst, size_t *len,
                        size_t *cap, queue **buf)
{
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t j = 0; dedup && j < *len && !dup; j++)
            dup = (*dst)[j] == found[i];
        if (dup)
            continue;
        if (*len == *cap) {
            size_t ncap = *cap * 2 + 16;
            queue **grown = malloc(ncap * sizeof *grown);
            if (!grown)
                return false;
            memcpy(grown, *dst, *len * sizeof *grown);
            if (*dst != buf)
                free(*dst);
            *dst = grown;
            *cap = ncap;
        }
        (*dst)[(*len)++] = found[i];
    }
    return true;
}

/* Routes again with each string of the CC and BCC header arrays. */
static void route_cc(vhost *v, route_exchange *ex, amqp_bytes headers, const msg *m,
                     queue ***dst, size_t *len, size_t *cap, queue **buf)
{
    static const char *const keys[] = {"CC", "BCC"};
    for (int k = 0; k < 2; k++) {
        amqp_field list, key;
        if (!amqp_table_get(headers, keys[k], &list) || list.type != 'A')
            continue;
        amqp_iter it;
        amqp_iter_init(&it, list.v.bytes);
        while (amqp_array_next(&it, &key)) {
            void **found;
            if (key.type != 'S')
                continue;
            size_t n = route_message_with(v->routes, ex, key.v.bytes, headers, m, true, &found);
            if (!add_targets(found, n, true, dst, len, cap, buf))
                return;
        }
    }
}

size_t vhost_route(vhost *v, route_exchange *ex, amqp_bytes key, amqp_bytes headers,
                   const msg *m, queue **buf, size_t cap, queue ***out)
{
    void **found;
    route_held_clear(v->routes); /* the holds of this message's routes (xdelay.c) */
    size_t n = route_message_with(v->routes, ex, key, headers, m, false, &found);
    queue **dst = buf;
    size_t len = 0;
    if (!add_targets(found, n, false, &dst, &len, &cap, buf))
        log_msg(LOG_ERROR, "out of memory routing a message to %zu queues", n);
    if (headers.len)
        route_cc(v, ex, headers, m, &dst, &len, &cap, buf);
    *out = dst;
    return len;
}
bool vhost_reply_register(vhost *v, const char *token, chan *ch)
{
    if (v->nreplies == v->replies_cap) {
        size_t cap = v->replies_cap ? v->replies_cap * 2 : 16;
        reply_entry *n = realloc(v->replies, cap * sizeof *n);
        if (!n)
            return false;
        v->replies = n;
        v->replies_cap = cap;
    }
    v->replies[v->nreplies++] = (reply_entry){token, ch};
    return true;
}

void vhost_reply_unregister(vhost *v, chan *ch)
{
    for (size_t i = 0; i < v->nreplies; i++)
        if (v->replies[i].ch == ch) {
            v->replies[i] = v->replies[--v->nreplies];
            return;
        }
}

/* A linear scan: reply consumers are few (one per RPC client channel). */
chan *vhost_reply_find(vhost *v, amqp_bytes token)
{
    for (size_t i = 0; i < v->nreplies; i++)
        if (amqp_bytes_equal_cstr(token, v->replies[i].token))
            return v->replies[i].ch;
    return NULL;
}

/* A scan: recovery looks each queue up once per run of its messages. */
queue *vhost_queue_by_store_id(vhost *v, uint64_t id)
{
    for (uint32_t i = 0; i < v->nbuckets; i++)
        for (struct queue_link *l = v->buckets[i]; l; l = l->hash_next)
            if (queue_store_id((queue *)l) == id)
                return (queue *)l;
    return NULL;
}

queue *queue_by_store_id(server *s, uint64_t id)
{
    for (vhost *v = server_vhost_next(s, NULL); v; v = server_vhost_next(s, v)) {
        queue *q = vhost_queue_by_store_id(v, id);
        if (q)
            return q;
    }
    return NULL;
}

loop *vhost_loop(vhost *v) { return v->loop; }

/* ---- introspection (management API) ------------------------------------ */

stats *vhost_stats(vhost *v) { return &v->stats; }
uint32_t vhost_queue_count(const vhost *v) { return v->nqueues; }

