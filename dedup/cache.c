/* cache: the bounded key set behind dedup.h.
 *
 * Entries live in one array `e`. The live ones form a doubly linked list
 * from `oldest` to `newest` (insertion order: eviction takes `oldest`);
 * the free ones a singly linked list through `next`. Links are array
 * positions, NONE ends a list. An index is a power-of-two array of slots
 * (an entry's 32-bit hash and its position + 1; 0 = empty), probed
 * linearly from the hash and never more than half full, so a miss ends
 * soon and touches no entry; removal shifts the following run back (no
 * tombstones). `by_key` hashes the key (already a keyed hash: its low word
 * is uniform), `by_id` a mix of the message id. An entry is 32 bytes; the
 * index 16 to 32 bytes per entry of the size (an exchange's is made for
 * its size at once, a queue's grows with its array and is rebuilt then).
 *
 * Invariants: n live entries, n <= cap <= size; each live entry is in
 * by_key once (and in by_id once when there is one); v is the expiry
 * (ms on the caller's clock, 0 = never) in an exchange's cache, the
 * message id in a queue's.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dedup_int.h"

#define NONE UINT32_MAX
#define FIRST_CAP 64u
#define HUGE_BYTES (2u << 20)

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27, x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint32_t hash_of(const dedup_cache *c, uint32_t pos, bool id)
{
    return (uint32_t)(id ? mix64(c->e[pos].v) : c->e[pos].k.h[0]);
}

static bool key_eq(dedup_key a, dedup_key b) { return a.h[0] == b.h[0] && a.h[1] == b.h[1]; }

/* An index slot: the entry's 32-bit hash above its position + 1, so a
 * probe and a removal's shift read the index alone; 0 is empty. */
static uint64_t slot_of(uint32_t hash, uint32_t pos) { return (uint64_t)hash << 32 | (pos + 1); }
static uint32_t slot_pos(uint64_t s) { return (uint32_t)s - 1; }
static uint32_t slot_home(const dedup_cache *c, uint64_t s) { return (uint32_t)(s >> 32) & c->mask; }

static void index_put(dedup_cache *c, uint64_t *ix, uint32_t pos, bool id)
{
    uint32_t h = hash_of(c, pos, id), i = h & c->mask;
    while (ix[i])
        i = (i + 1) & c->mask;
    ix[i] = slot_of(h, pos);
}

/* Removes position `pos` from `ix`; the run after it shifts back so every
 * entry stays reachable from its home slot. */
static void index_del(dedup_cache *c, uint64_t *ix, uint32_t pos, bool id)
{
    uint64_t want = slot_of(hash_of(c, pos, id), pos);
    uint32_t i = (uint32_t)(want >> 32) & c->mask;
    while (ix[i] != want)
        i = (i + 1) & c->mask;
    for (uint32_t j = (i + 1) & c->mask; ix[j]; j = (j + 1) & c->mask) {
        uint32_t home = slot_home(c, ix[j]);
        /* j's entry may move to i when its home is not in (i, j] */
        if (((j - home) & c->mask) >= ((j - i) & c->mask)) {
            ix[i] = ix[j];
            i = j;
        }
    }
    ix[i] = 0;
}

static uint32_t find_key(const dedup_cache *c, dedup_key k)
{
    uint32_t h = (uint32_t)k.h[0];
    for (uint32_t i = h & c->mask; c->by_key[i]; i = (i + 1) & c->mask)
        if ((uint32_t)(c->by_key[i] >> 32) == h && key_eq(c->e[slot_pos(c->by_key[i])].k, k))
            return slot_pos(c->by_key[i]);
    return NONE;
}

static uint32_t find_id(const dedup_cache *c, uint64_t id)
{
    uint32_t h = (uint32_t)mix64(id);
    for (uint32_t i = h & c->mask; c->by_id[i]; i = (i + 1) & c->mask)
        if ((uint32_t)(c->by_id[i] >> 32) == h && c->e[slot_pos(c->by_id[i])].v == id)
            return slot_pos(c->by_id[i]);
    return NONE;
}

/* An index of `slots` zeroed slots. Past 2 MiB it is its own mapping,
 * with transparent huge pages asked for: a probe in a big cache is a
 * random access, and a TLB miss costs as much as the cache miss. */
static uint64_t *ix_new(uint32_t slots)
{
    size_t bytes = (size_t)slots * sizeof(uint64_t);
    if (bytes < HUGE_BYTES)
        return calloc(slots, sizeof(uint64_t));
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, bytes, MADV_HUGEPAGE); /* advice: fine if refused */
    return p;
}

static void ix_free(uint64_t *ix, uint32_t slots)
{
    size_t bytes = (size_t)slots * sizeof(uint64_t);
    if (ix && bytes >= HUGE_BYTES)
        munmap(ix, bytes);
    else
        free(ix);
}

/* New indexes of at least twice `entries` slots, refilled. */
static bool rebuild(dedup_cache *c, uint32_t entries)
{
    uint32_t p2 = 1;
    while (p2 < 2 * entries)
        p2 <<= 1;
    uint64_t *k = ix_new(p2), *i = c->has_id ? ix_new(p2) : NULL;
    if (!k || (c->has_id && !i)) {
        ix_free(k, p2), ix_free(i, p2);
        return false;
    }
    ix_free(c->by_key, c->mask + 1), ix_free(c->by_id, c->mask + 1);
    c->by_key = k, c->by_id = i, c->mask = p2 - 1;
    for (uint32_t p = c->oldest; p != NONE; p = c->e[p].next) {
        index_put(c, c->by_key, p, false);
        if (c->by_id)
            index_put(c, c->by_id, p, true);
    }
    return true;
}

/* Doubles the array (up to size); false when it cannot. An exchange's
 * index was made for its size: the positions stay, nothing is rehashed. */
static bool grow(dedup_cache *c)
{
    uint32_t ncap = c->cap * 2 < c->size ? c->cap * 2 : c->size;
    dedup_entry *e = realloc(c->e, (size_t)ncap * sizeof *e);
    if (!e)
        return false;
    c->e = e;
    if (2 * (uint64_t)ncap > (uint64_t)c->mask + 1 && !rebuild(c, ncap))
        return false; /* keep the bigger array, unused past cap */
    for (uint32_t p = ncap; p-- > c->cap;)
        c->e[p].next = c->free, c->free = p;
    c->cap = ncap;
    return true;
}

dedup_cache *dedup_cache_new(uint32_t size, int64_t ttl_ms, bool by_id)
{
    if (size == 0 || size > DEDUP_MAX_SIZE)
        return NULL;
    dedup_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->size = size;
    c->ttl_ms = ttl_ms;
    c->has_id = by_id;
    c->oldest = c->newest = c->free = NONE;
    c->cap = size < FIRST_CAP ? size : FIRST_CAP;
    c->e = malloc((size_t)c->cap * sizeof *c->e);
    /* an exchange's index is made for its size at once, as LavinMQ sizes
     * its hash: growing it would rehash every entry in one loop turn */
    if (!c->e || !rebuild(c, by_id ? c->cap : size)) {
        dedup_cache_free(c);
        return NULL;
    }
    for (uint32_t p = c->cap; p-- > 0;)
        c->e[p].next = c->free, c->free = p;
    dedup_secret(c->secret);
    return c;
}

void dedup_cache_free(dedup_cache *c)
{
    if (!c)
        return;
    free(c->e);
    ix_free(c->by_key, c->mask + 1), ix_free(c->by_id, c->mask + 1);
    free(c);
}

static void unlink_entry(dedup_cache *c, uint32_t p)
{
    dedup_entry *x = &c->e[p];
    index_del(c, c->by_key, p, false);
    if (c->by_id)
        index_del(c, c->by_id, p, true);
    if (x->prev != NONE)
        c->e[x->prev].next = x->next;
    else
        c->oldest = x->next;
    if (x->next != NONE)
        c->e[x->next].prev = x->prev;
    else
        c->newest = x->prev;
    x->next = c->free;
    c->free = p;
    c->n--;
}

/* Appends an entry as the newest; the oldest goes when the cache is full. */
void dedup_add(dedup_cache *c, dedup_key k, uint64_t v)
{
    if (c->free == NONE && !(c->cap < c->size && grow(c)))
        unlink_entry(c, c->oldest); /* full (or out of memory): evict */
    uint32_t p = c->free;
    c->free = c->e[p].next;
    c->e[p] = (dedup_entry){.k = k, .v = v, .prev = c->newest, .next = NONE};
    if (c->newest != NONE)
        c->e[c->newest].next = p;
    else
        c->oldest = p;
    c->newest = p;
    c->n++;
    index_put(c, c->by_key, p, false);
    if (c->by_id)
        index_put(c, c->by_id, p, true);
}

static bool expired(const dedup_cache *c, uint32_t p, uint64_t now)
{
    return !c->has_id && c->e[p].v && c->e[p].v <= now;
}

bool dedup_cache_seen(dedup_cache *c, dedup_key k, uint64_t now_ms, int64_t ttl_ms)
{
    uint32_t p = find_key(c, k);
    if (p != NONE) {
        if (!expired(c, p, now_ms)) {
            c->duplicates++;
            return true;
        }
        unlink_entry(c, p);
    }
    dedup_cache_sweep(c, now_ms, 2);
    int64_t ttl = ttl_ms >= 0 ? ttl_ms : c->ttl_ms;
    /* now_ms + ttl is never 0 for a real clock; ttl 0 lives for no time, a
     * TTL of millions of years for ever */
    dedup_add(c, k, ttl >= 0 && ttl < INT64_MAX / 4 ? now_ms + (uint64_t)ttl : 0);
    return false;
}

bool dedup_cache_claim(dedup_cache *c, dedup_key k, uint64_t id)
{
    if (find_key(c, k) != NONE) {
        c->duplicates++;
        return false;
    }
    dedup_add(c, k, id);
    return true;
}

void dedup_cache_release(dedup_cache *c, uint64_t id)
{
    uint32_t p = find_id(c, id);
    if (p != NONE)
        unlink_entry(c, p);
}

void dedup_cache_clear(dedup_cache *c)
{
    while (c->oldest != NONE)
        unlink_entry(c, c->oldest);
}

uint32_t dedup_cache_sweep(dedup_cache *c, uint64_t now_ms, uint32_t budget)
{
    uint32_t n = 0;
    for (uint32_t p = c->oldest; n < budget && p != NONE;) {
        uint32_t next = c->e[p].next;
        if (!expired(c, p, now_ms))
            break;
        unlink_entry(c, p);
        n++;
        p = next;
    }
    return n;
}

uint32_t dedup_cache_entries(const dedup_cache *c) { return c->n; }
uint64_t dedup_cache_duplicates(const dedup_cache *c) { return c->duplicates; }
uint32_t dedup_cache_size(const dedup_cache *c) { return c->size; }

size_t dedup_cache_memory(const dedup_cache *c)
{
    size_t ix = (size_t)(c->mask + 1) * sizeof(uint64_t);
    return sizeof *c + (size_t)c->cap * sizeof *c->e + ix + (c->by_id ? ix : 0);
}
