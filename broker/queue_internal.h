/* Private to broker/: the part of a queue the vhost's name index uses, and
 * the ring slot and the delayed set that queue.c and delayed.c share. */
#ifndef WARREN_QUEUE_INTERNAL_H
#define WARREN_QUEUE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "broker.h"

/* First member of struct queue, so the index can link queues by name
 * without another allocation. `name` is NUL-terminated. */
struct queue_link {
    char *name;
    uint32_t name_len;
    struct queue_link *hash_next;
};

/* A ring slot: a message in RAM (paged false), or one the journal holds
 * (paged true: `id`, `loc`). body_size serves x-max-length-bytes either way. */
typedef struct qslot {
    union {
        msg *m;
        uint64_t id;
    };
    uint64_t enqueued_at; /* server_now_ms when it entered this queue */
    uint64_t expires_at;  /* its own expiration (ms, server clock); 0 = none */
    journal_loc loc;
    uint32_t body_size;
    uint32_t seq; /* its place in the queue, see queue.c's "Order" */
    uint32_t delivery_count : 30;
    uint32_t maybe_delivered : 1;
    uint32_t paged : 1;
} qslot;

/* ---- delayed.c: messages held back by delayed retry ---------------------- */

/* A held message: its slot, the priority level it goes back to, and when
 * (server_now_ms clock). */
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

#endif
