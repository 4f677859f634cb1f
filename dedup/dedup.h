/* dedup: message deduplication caches, as LavinMQ and the
 * rabbitmq-message-deduplication plugin offer them.
 *
 * A cache is a bounded set of keys. An exchange's cache remembers the keys
 * of the messages it routed, each until its TTL (the message's x-cache-ttl
 * header, else the cache's) and at most `size` of them, the oldest evicted
 * first: a message whose key is in it is a duplicate. A queue's cache
 * holds the key of each message in the queue, tied to the message's id,
 * until that message leaves the queue.
 *
 * A key is the value of one message header (x-deduplication-header, or
 * the header the x-deduplication-header argument names), kept as a 128-bit
 * SipHash of its value under the cache's own random secret: entries are
 * fixed-size and nothing is allocated per message. Values compare as
 * Erlang terms do in the plugin: integers of any width (and timestamps)
 * are equal when their values are, longstr and bytes likewise; arrays and
 * tables are not keys. Two different keys collide with probability about
 * n^2 / 2^129 for n keys.
 *
 * Storage: entries in one array, linked oldest to newest, with open
 * addressing (linear probing, at most half full) over the key's hash --
 * and, for a queue's cache, a second index over the message id. The array
 * grows by doubling up to `size`; every operation is O(1) expected.
 */
#ifndef WARREN_DEDUP_H
#define WARREN_DEDUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../amqp/amqp.h"

#define DEDUP_DEFAULT_SIZE 128u     /* LavinMQ's x-cache-size default */
#define DEDUP_MAX_SIZE 16777216u    /* the hard cap: 2^24 entries, at most 1 GiB */
#define DEDUP_HEADER "x-deduplication-header"
#define DEDUP_HEADER_MAX 255 /* a header name is a shortstr */

typedef struct dedup_key {
    uint64_t h[2];
} dedup_key;

typedef struct dedup_cache dedup_cache;

/* What an exchange's or queue's arguments ask for. */
typedef struct dedup_config {
    bool on;         /* x-message-deduplication true */
    bool disk;       /* x-cache-persistence disk */
    uint32_t size;   /* x-cache-size, else DEDUP_DEFAULT_SIZE (exchanges) or DEDUP_MAX_SIZE */
    int64_t ttl_ms;  /* x-cache-ttl; -1 = none */
    uint8_t header_len;
    char header[DEDUP_HEADER_MAX + 1]; /* the key's header name, NUL-terminated */
} dedup_config;

/* Reads the deduplication arguments of a validated table. For an
 * exchange with x-message-deduplication true: 406 PRECONDITION_FAILED
 * with the plugin's texts for an x-cache-size that is not an integer
 * (or a string of digits) above 0 ("Missing or invalid argument,
 * 'x-cache-size' must be an integer greater than 0"), nor at most
 * DEDUP_MAX_SIZE, the same for x-cache-ttl ("Invalid argument, ..."), an
 * x-cache-persistence other than "disk" or "memory", and LavinMQ's for an
 * x-deduplication-header that is not a string. For queues the same, but
 * x-message-deduplication must be a bool when present (LavinMQ). Without
 * x-message-deduplication true, out->on is false and nothing else is
 * checked. `method_id` goes into err. */
int dedup_config_parse(amqp_bytes args, bool for_queue, uint32_t method_id, dedup_config *out,
                       amqp_error *err);
/* The same for an exchange of the plugin's type x-message-deduplication:
 * always on, and x-cache-size is required (the plugin's text when it is
 * missing). */
int dedup_config_parse_typed(amqp_bytes args, uint32_t method_id, dedup_config *out,
                             amqp_error *err);

/* A cache of at most `size` entries (1..DEDUP_MAX_SIZE) whose entries
 * live `ttl_ms` (-1 = until evicted) unless a message says otherwise;
 * `by_id` adds the message-id index a queue's cache needs. NULL on
 * out-of-memory. */
dedup_cache *dedup_cache_new(uint32_t size, int64_t ttl_ms, bool by_id);
void dedup_cache_free(dedup_cache *c);

/* The key of a message with `headers` (a validated table): the value of
 * header `name`, and its x-cache-ttl header (ms; -1 when absent or not a
 * non-negative integer) in *ttl_ms. false when the message has no key. */
bool dedup_key_of(const dedup_cache *c, amqp_bytes headers, const char *name, dedup_key *out,
                  int64_t *ttl_ms);

/* Exchanges: true when `k` is in the cache and not expired at `now_ms`
 * (counted as a duplicate). Otherwise adds it, expiring at now_ms + ttl_ms
 * (ttl_ms -1: the cache's TTL), evicting the oldest entry when full, and
 * returns false. Takes no memory beyond the array's growth. */
bool dedup_cache_seen(dedup_cache *c, dedup_key k, uint64_t now_ms, int64_t ttl_ms);

/* Queues: false (a duplicate, counted) when a message with `k` is in the
 * queue; else ties `k` to message `id` and returns true. A full cache
 * evicts its oldest entry (that message's key no longer blocks). */
bool dedup_cache_claim(dedup_cache *c, dedup_key k, uint64_t id);
/* Message `id` left the queue: its key no longer blocks. No-op when it
 * had none. */
void dedup_cache_release(dedup_cache *c, uint64_t id);

/* Drops every entry (a purge of a queue's cache keeps unacked keys: use
 * dedup_cache_release per message instead). */
void dedup_cache_clear(dedup_cache *c);

/* Entries held (expired ones not yet dropped included), duplicates seen
 * since creation, the limit, and the bytes the cache holds. */
uint32_t dedup_cache_entries(const dedup_cache *c);
uint64_t dedup_cache_duplicates(const dedup_cache *c);
uint32_t dedup_cache_size(const dedup_cache *c);
size_t dedup_cache_memory(const dedup_cache *c);

/* Drops up to `budget` expired entries from the oldest end (entries
 * expire lazily otherwise: on lookup, and two per insertion); returns how
 * many went. */
uint32_t dedup_cache_sweep(dedup_cache *c, uint64_t now_ms, uint32_t budget);

/* ---- persistence (x-cache-persistence disk) ---------------------------- */

/* Writes an exchange's cache to `path` (via path.tmp, renamed), with each
 * entry's expiry turned into wall-clock time (now_ms on the loop's clock
 * is wall_ms). false with errno on failure. */
bool dedup_cache_save(const dedup_cache *c, const char *path, uint64_t now_ms, uint64_t wall_ms);
/* Loads a cache saved by dedup_cache_save into `c` (made with the same
 * or a larger size), dropping the entries that expired meanwhile and the
 * oldest ones past c's size. false (c unchanged) when the file is missing
 * or malformed. */
bool dedup_cache_load(dedup_cache *c, const char *path, uint64_t now_ms, uint64_t wall_ms);

#endif
