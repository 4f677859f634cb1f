/* Private to queue/: the part of a queue the vhost's name index uses, and
 * the ring slot, the delayed set (delayed.c) and the expiry bookkeeping
 * (expiry.c) that queue.c shares with them. */
#ifndef WARREN_QUEUE_INTERNAL_H
#define WARREN_QUEUE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "../dedup/dedup.h"
#include "queue.h"

/* First member of struct queue, so the index can link queues by name
 * without another allocation. `name` is NUL-terminated. */
struct queue_link {
    char *name;
    uint32_t name_len;
    struct queue_link *hash_next;
};

/* A ring slot: a message in RAM (paged false), or one the journal holds
 * (paged true: `id`, `loc`), or -- paged and spilled -- a transient one
 * the loop's spill file holds (`loc` there). body_size serves
 * x-max-length-bytes either way. */
typedef struct qslot {
    union {
        msg *m;
        uint64_t id;
    };
    uint64_t enqueued_at; /* loop_now_ms when it entered this queue */
    uint64_t expires_at;  /* its own expiration (ms, server clock); 0 = none */
    journal_loc loc;
    uint32_t body_size;
    uint32_t seq; /* its place in the queue, see queue.c's "Order" */
    uint32_t delivery_count : 29;
    uint32_t maybe_delivered : 1;
    uint32_t paged : 1;
    uint32_t spilled : 1;
} qslot;

/* ---- deduplication (dedup.c) -------------------------------------------- */

typedef struct qdedup qdedup;
/* Where a queue keeps its deduplication state (NULL: none). */
qdedup **queue_dedup_slot(queue *q);
/* Reads x-message-deduplication (validated) from a new queue's arguments;
 * false on out-of-memory. */
bool queue_dedup_open(queue *q, amqp_bytes args);
void queue_dedup_close(queue *q);
/* false when a message with m's key is in the queue (a duplicate, not to
 * be enqueued); else m's key (if any) is held for it. */
bool queue_dedup_admit(queue *q, const msg *m);
/* Message `id` left the queue for good. */
void queue_dedup_release(queue *q, uint64_t id);

/* ---- vhost limits (vhost_limits.c, kept in the vhost) -------------------- */

typedef struct vhost_limits {
    int64_t max_connections, max_queues; /* -1 = none */
    uint32_t connections;                /* connection.open accepted, not yet gone */
} vhost_limits;
vhost_limits *vhost_limits_of(vhost *v);

/* ---- the queue core's operations (queue.c) ------------------------------ */

/* What queue_publish, queue_get, ... do for the types that keep messages
 * in the queue core's rings (classic and quorum): queue_type.c's entries
 * point at them. */
bool queue_core_publish(queue *q, msg *m, int64_t expiration_ms);
bool queue_core_get(queue *q, queue_item *it);
void queue_core_requeue(queue *q, queue_item it, queue_return why);
void queue_core_settled(queue *q, uint32_t count, const msg *m);
uint32_t queue_core_purge(queue *q);
void queue_core_delete(queue *q);
void queue_core_describe(queue *q, queue_info *out);
void queue_core_dispatch(queue *q);

/* ---- delayed.c: messages held back by delayed retry ---------------------- */

/* A held message: its slot, the priority level it goes back to, and when
 * (loop_now_ms clock). */
typedef struct delayed_entry {
    uint64_t due;
    qslot s;
    uint8_t level;
} delayed_entry;

/* A binary min-heap by `due`: the earliest is v[0]. Zeroed is empty. */
typedef struct delayed_set {
    delayed_entry *v;
    uint32_t n, cap;
} delayed_set;

/* Adds `e`; false on out-of-memory (nothing changed). */
bool delayed_push(delayed_set *d, const delayed_entry *e);
/* The earliest entry, or NULL when empty. */
const delayed_entry *delayed_first(const delayed_set *d);
/* Removes and returns the earliest entry; the set must not be empty. */
delayed_entry delayed_pop(delayed_set *d);
/* Frees the heap's memory (not the entries' messages). */
void delayed_free(delayed_set *d);
/* Wall clock, ms since the epoch: what the journal keeps a deadline in. */
uint64_t delayed_wall_ms(void);

/* ---- xdelay_heap.c: the messages an x-delayed-message exchange holds ---- */

/* A held message: due at `due` (wall clock, ms since the epoch); its body
 * in RAM (m, a reference) or, m NULL, in the journal at `loc`. */
typedef struct xdelay_entry {
    uint64_t due;
    uint64_t id; /* the message id: the tie-break, and the journal's key */
    msg *m;
    journal_loc loc;
} xdelay_entry;

/* A binary min-heap by (due, id). Zeroed is empty. */
typedef struct xdelay_heap {
    xdelay_entry *v;
    uint32_t n, cap;
} xdelay_heap;

/* Adds `e`; false on out-of-memory (nothing changed). */
bool xdelay_heap_push(xdelay_heap *h, const xdelay_entry *e);
/* The earliest entry, or NULL when empty; valid until the next change. */
const xdelay_entry *xdelay_heap_first(const xdelay_heap *h);
/* Removes and returns the earliest; the heap must not be empty. */
xdelay_entry xdelay_heap_pop(xdelay_heap *h);
/* Frees the heap's memory (not the entries' messages). */
void xdelay_heap_free(xdelay_heap *h);
/* vhost.c keeps the list of its delayed exchanges' states (xdelay.c). */
xdelay **vhost_xdelays(vhost *v);

/* ---- expiry (expiry.c) ---------------------------------------------------
 * A min-heap of the ring slots whose own expiration comes before the
 * queue's TTL would expire them, so they can be found deep in a backlog.
 * An entry names the slot by (level, seq); it goes stale when the slot
 * leaves the ring another way, and is then skipped when it comes up. */
typedef struct expiry_entry {
    uint64_t at;    /* when the slot expires (loop_now_ms clock) */
    uint32_t seq;   /* the slot's sequence number in its ring */
    uint32_t level; /* its priority ring */
} expiry_entry;

typedef struct expiry_heap {
    expiry_entry *e;
    uint32_t n, cap;
} expiry_heap;

/* Adds `e`; false (nothing changed) when out of memory. */
bool expiry_heap_push(expiry_heap *h, expiry_entry e);
/* The earliest entry (ties: the lowest seq first), NULL when empty. The
 * pointer lives until the next change. */
const expiry_entry *expiry_heap_top(const expiry_heap *h);
/* Removes the earliest entry; the heap must not be empty. */
void expiry_heap_pop(expiry_heap *h);
/* Keeps only the entries `keep` returns true for, in O(n). */
void expiry_heap_filter(expiry_heap *h, bool (*keep)(void *ctx, const expiry_entry *e),
                        void *ctx);
/* Empties the heap, keeping its memory; expiry_heap_free releases it. */
void expiry_heap_clear(expiry_heap *h);
void expiry_heap_free(expiry_heap *h);

/* One slice of expiry work: at most EXPIRY_SLICE_MAX messages or about
 * EXPIRY_SLICE_US of time, so expiring a million messages never holds the
 * loop; the rest continues on the next loop turn. */
enum { EXPIRY_SLICE_MAX = 1024, EXPIRY_SLICE_US = 1000 };
typedef struct expiry_slice {
    uint64_t started_us;
    uint32_t done; /* messages expired so far; the caller counts them */
} expiry_slice;

void expiry_slice_begin(expiry_slice *s);
/* Whether the slice may take another message (the clock is read every 64). */
bool expiry_slice_more(const expiry_slice *s);

/* ---- stream queues (stream_queue.c, stream_consume.c) -------------------- */

typedef struct stream_queue stream_queue;
/* The stream state of q (NULL unless a stream whose log is open). */
stream_queue *queue_stream_state(const queue *q);
/* Opens the log of a new or recovered stream queue (data_dir/streams/);
 * NULL, logged, when it cannot be. */
stream_queue *stream_queue_open(queue *q);
/* Closes it; with `remove` (the queue is deleted) its files go, and its
 * watchers are told. Without, what is pending is written and synced. */
void stream_queue_close(stream_queue *sq, bool remove);
/* Retention and segment size changed (a policy). */
void stream_queue_set_config(stream_queue *sq, const queue_args *a);
void stream_queue_info(stream_queue *sq, stream_info *out);
/* The stream/ configuration the arguments ask for. */
void queue_stream_config(const queue_args *a, stream_config *out);

/* The stream type's operations (queue_type.c's table). */
bool stream_publish(queue *q, msg *m, int64_t expiration_ms);
bool stream_get(queue *q, queue_item *it);
void stream_requeue(queue *q, queue_item it, queue_return why);
uint32_t stream_purge(queue *q);
void stream_describe(queue *q, queue_info *out);
void stream_dispatch(queue *q);
int stream_consume(queue *q, consumer *c, amqp_bytes args, amqp_error *err);
void stream_consumer_gone(queue *q, consumer *c);

#endif
