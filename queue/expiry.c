/* Expiry bookkeeping for queues (queue.c uses it; see its "Expiry" note):
 * a binary min-heap of (at, seq, level) ordered by time, then by sequence
 * number so messages due together leave in queue order, and the slices
 * that bound how much expiry work one loop turn does.
 *
 * Invariant: e[i] is no later than its children e[2i+1], e[2i+2]. */
#include <stdlib.h>
#include <time.h>

#include "queue_internal.h"

static bool earlier(const expiry_entry *a, const expiry_entry *b)
{
    if (a->at != b->at)
        return a->at < b->at;
    return (int32_t)(a->seq - b->seq) < 0; /* serial order, as queue.c's seq_before */
}

static void swap(expiry_entry *a, expiry_entry *b)
{
    expiry_entry t = *a;
    *a = *b;
    *b = t;
}

static void sift_up(expiry_heap *h, uint32_t i)
{
    while (i > 0 && earlier(&h->e[i], &h->e[(i - 1) / 2])) {
        swap(&h->e[i], &h->e[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
}

static void sift_down(expiry_heap *h, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, min = i;
        if (l < h->n && earlier(&h->e[l], &h->e[min]))
            min = l;
        if (r < h->n && earlier(&h->e[r], &h->e[min]))
            min = r;
        if (min == i)
            return;
        swap(&h->e[i], &h->e[min]);
        i = min;
    }
}

bool expiry_heap_push(expiry_heap *h, expiry_entry e)
{
    if (h->n == h->cap) {
        uint32_t cap = h->cap ? h->cap * 2 : 64;
        expiry_entry *grown = realloc(h->e, (size_t)cap * sizeof *grown);
        if (!grown)
            return false;
        h->e = grown;
        h->cap = cap;
    }
    h->e[h->n] = e;
    sift_up(h, h->n++);
    return true;
}

const expiry_entry *expiry_heap_top(const expiry_heap *h) { return h->n ? &h->e[0] : NULL; }

void expiry_heap_pop(expiry_heap *h)
{
    h->e[0] = h->e[--h->n];
    sift_down(h, 0);
}

void expiry_heap_filter(expiry_heap *h, bool (*keep)(void *ctx, const expiry_entry *e),
                        void *ctx)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < h->n; i++)
        if (keep(ctx, &h->e[i]))
            h->e[kept++] = h->e[i];
    h->n = kept;
    for (uint32_t i = kept / 2; i-- > 0;) /* Floyd's heap construction */
        sift_down(h, i);
}

void expiry_heap_clear(expiry_heap *h) { h->n = 0; }

void expiry_heap_free(expiry_heap *h)
{
    free(h->e);
    *h = (expiry_heap){0};
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

void expiry_slice_begin(expiry_slice *s) { *s = (expiry_slice){.started_us = now_us()}; }

bool expiry_slice_more(const expiry_slice *s)
{
    if (s->done >= EXPIRY_SLICE_MAX)
        return false;
    return s->done % 64 || now_us() - s->started_us < EXPIRY_SLICE_US;
}
