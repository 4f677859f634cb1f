/* dedup's private parts: the cache's layout and the key hash. */
#ifndef WARREN_DEDUP_INT_H
#define WARREN_DEDUP_INT_H

#include "dedup.h"

typedef struct dedup_entry {
    dedup_key k;
    uint64_t v; /* expiry (exchange) or message id (queue) */
    uint32_t prev, next;
} dedup_entry;

struct dedup_cache {
    dedup_entry *e;
    uint64_t *by_key, *by_id; /* hash << 32 | position + 1; by_id only in a queue's cache */
    uint32_t mask;            /* index slots - 1 */
    uint32_t cap, size, n;    /* array length, limit, live entries */
    uint32_t oldest, newest, free;
    bool has_id;
    int64_t ttl_ms;
    uint64_t duplicates;
    uint64_t secret[2]; /* the key hash's SipHash key */
};

/* Appends k as the newest entry with value v (no lookup: k must be
 * absent), evicting the oldest when full. */
void dedup_add(dedup_cache *c, dedup_key k, uint64_t v);

/* Fills a fresh random SipHash key. */
void dedup_secret(uint64_t secret[2]);

/* SipHash-2-4 with 128-bit output of `len` bytes at `p`. */
dedup_key dedup_siphash128(const uint64_t secret[2], const uint8_t *p, size_t len);

#endif
