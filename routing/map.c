/* map: the routing module's containers -- a byte hash, an open-addressing
 * hash map of pointers, an unordered binding vector, and the stable key
 * sort used for header tables.
 *
 * The map stores (hash, item) slots, linear probing, capacity a power of
 * two, load at most 3/4. Deletion shifts later members of the probe run
 * back instead of leaving tombstones, so a lookup only ever scans one run
 * of occupied slots. Items are found by (hash, eq) through route_map_find
 * (inline in route_int.h) and removed by identity.
 */
#include <stdlib.h>
#include <string.h>

#include "route_int.h"

/* ---- hashing ------------------------------------------------------------ */

/* Eight bytes at a time with a multiply-rotate step, finished by mix64.
 * Not keyed: the broker trusts its own binding keys to be many, not
 * adversarial collisions; the mix keeps probe runs short in practice. */
uint64_t route_hash_bytes(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)n * 0xc2b2ae3d27d4eb4fULL);
    uint64_t v;

    while (n >= 8) {
        memcpy(&v, s, 8);
        h ^= v * 0x87c37b91114253d5ULL;
        h = (h << 31 | h >> 33) * 0x4cf5ad432745937fULL;
        s += 8;
        n -= 8;
    }
    v = 0;
    if (n > 0)
        memcpy(&v, s, n);
    h ^= v * 0x87c37b91114253d5ULL;
    return route_mix64(h);
}

/* ---- map ---------------------------------------------------------------- */

static void slot_place(route_slot *slots, size_t mask, uint64_t hash, void *item)
{
    size_t i = hash & mask;

    while (slots[i].item != NULL)
        i = (i + 1) & mask;
    slots[i].hash = hash;
    slots[i].item = item;
}

static bool map_grow(route_map *m)
{
    size_t cap = m->slots ? (m->mask + 1) * 2 : 8;
    route_slot *slots = calloc(cap, sizeof *slots);
    size_t i;

    if (slots == NULL)
        return false;
    for (i = 0; m->slots && i <= m->mask; i++)
        if (m->slots[i].item != NULL)
            slot_place(slots, cap - 1, m->slots[i].hash, m->slots[i].item);
    free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return true;
}

bool route_map_insert(route_map *m, uint64_t hash, void *item)
{
    assert(item != NULL);
    if (m->slots == NULL || (m->count + 1) * 4 > (m->mask + 1) * 3)
        if (!map_grow(m))
            return false;
    slot_place(m->slots, m->mask, hash, item);
    m->count++;
    return true;
}

/* True when `home` lies cyclically in (hole, j]: the entry at j may not
 * move back to the hole without leaving its own probe run. */
static bool stays(size_t home, size_t hole, size_t j)
{
    if (hole <= j)
        return hole < home && home <= j;
    return hole < home || home <= j;
}

void route_map_remove(route_map *m, uint64_t hash, const void *item)
{
    size_t hole = hash & m->mask, j;

    while (m->slots[hole].item != item) {
        assert(m->slots[hole].item != NULL);
        hole = (hole + 1) & m->mask;
    }
    for (j = (hole + 1) & m->mask; m->slots[j].item != NULL; j = (j + 1) & m->mask) {
        if (stays(m->slots[j].hash & m->mask, hole, j))
            continue;
        m->slots[hole] = m->slots[j];
        hole = j;
    }
    m->slots[hole].item = NULL;
    m->count--;
}

void route_map_free(route_map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->mask = 0;
    m->count = 0;
}

/* ---- binding vectors ---------------------------------------------------- */

bool route_vec_push(route_vec *v, route_binding *b)
{
    if (v->count == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 4;
        route_binding **items = realloc(v->items, cap * sizeof *items);
        if (items == NULL)
            return false;
        v->items = items;
        v->cap = cap;
    }
    b->slot = v->count;
    v->items[v->count++] = b;
    return true;
}

void route_vec_remove(route_vec *v, route_binding *b)
{
    route_binding *last;

    assert(b->slot < v->count && v->items[b->slot] == b);
    last = v->items[--v->count];
    v->items[b->slot] = last;
    last->slot = b->slot;
    if (v->count == 0) {
        route_vec_free(v);
    } else if (v->count * 4 <= v->cap && v->cap > 8) {
        /* Shrink so a key that once had many bindings does not pin memory. */
        route_binding **items = realloc(v->items, (v->cap / 2) * sizeof *items);
        if (items != NULL) {
            v->items = items;
            v->cap /= 2;
        }
    }
}

void route_vec_free(route_vec *v)
{
    free(v->items);
    v->items = NULL;
    v->count = v->cap = 0;
}

/* ---- stable sort by key ------------------------------------------------- */

/* Erlang orders binaries bytewise, a proper prefix first. */
int route_key_compare(amqp_bytes a, amqp_bytes b)
{
    uint32_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.ptr, b.ptr, n) : 0;

    if (c != 0)
        return c;
    return (a.len > b.len) - (a.len < b.len);
}

static void insertion_sort(route_header *h, size_t n)
{
    size_t i, j;

    for (i = 1; i < n; i++) {
        route_header x = h[i];
        for (j = i; j > 0 && route_key_compare(h[j - 1].key, x.key) > 0; j--)
            h[j] = h[j - 1];
        h[j] = x;
    }
}

static void merge(const route_header *a, size_t na, const route_header *b, size_t nb,
                  route_header *out)
{
    while (na && nb) {
        if (route_key_compare(b->key, a->key) < 0) {
            *out++ = *b++;
            nb--;
        } else {
            *out++ = *a++; /* ties take the left run first: stable */
            na--;
        }
    }
    memcpy(out, a, na * sizeof *a);
    memcpy(out + na, b, nb * sizeof *b);
}

/* Bottom-up merge sort over runs of 16 sorted by insertion; lists:keysort
 * is stable, and header tables may repeat a key, so this must be too. */
void route_headers_sort(route_header *h, route_header *tmp, size_t n)
{
    size_t run, i;
    route_header *src = h, *dst = tmp;

    for (i = 0; i < n; i += 16)
        insertion_sort(h + i, n - i < 16 ? n - i : 16);
    for (run = 16; run < n; run *= 2) {
        for (i = 0; i < n; i += 2 * run) {
            size_t na = n - i < run ? n - i : run;
            size_t nb = n - i - na < run ? n - i - na : run;
            merge(src + i, na, src + i + na, nb, dst + i);
        }
        route_header *swap = src;
        src = dst;
        dst = swap;
    }
    if (src != h)
        memcpy(h, src, n * sizeof *h);
}
