/* The held messages of one x-delayed-message exchange (xdelay.c): a binary
 * min-heap on (deadline, message id), so messages due in the same
 * millisecond leave in publish order (ids grow with time) and push and pop
 * are O(log n) whatever the number held. An entry is 40 bytes; its body is
 * either in RAM (`m`) or in the journal (`loc`). */
#include <stdlib.h>

#include "queue_internal.h"

static bool before(const xdelay_entry *a, const xdelay_entry *b)
{
    return a->due != b->due ? a->due < b->due : a->id < b->id;
}

static void swap(xdelay_entry *a, xdelay_entry *b)
{
    xdelay_entry t = *a;
    *a = *b;
    *b = t;
}

bool xdelay_heap_push(xdelay_heap *h, const xdelay_entry *e)
{
    if (h->n == h->cap) {
        uint32_t cap = h->cap ? h->cap * 2 : 16;
        xdelay_entry *v = cap > h->cap ? realloc(h->v, (size_t)cap * sizeof *v) : NULL;
        if (!v)
            return false;
        h->v = v, h->cap = cap;
    }
    uint32_t i = h->n++;
    h->v[i] = *e;
    while (i > 0 && before(&h->v[i], &h->v[(i - 1) / 2])) {
        swap(&h->v[(i - 1) / 2], &h->v[i]);
        i = (i - 1) / 2;
    }
    return true;
}

const xdelay_entry *xdelay_heap_first(const xdelay_heap *h) { return h->n ? &h->v[0] : NULL; }

xdelay_entry xdelay_heap_pop(xdelay_heap *h)
{
    xdelay_entry top = h->v[0];
    h->v[0] = h->v[--h->n];
    for (uint32_t i = 0;;) {
        uint32_t l = 2 * i + 1, r = l + 1, min = i;
        if (l < h->n && before(&h->v[l], &h->v[min]))
            min = l;
        if (r < h->n && before(&h->v[r], &h->v[min]))
            min = r;
        if (min == i)
            break;
        swap(&h->v[i], &h->v[min]);
        i = min;
    }
    /* give memory back once it is mostly unused (a burst went out) */
    if (h->cap > 1024 && h->n < h->cap / 4) {
        xdelay_entry *v = realloc(h->v, (size_t)(h->cap / 2) * sizeof *v);
        if (v)
            h->v = v, h->cap /= 2;
    }
    return top;
}

void xdelay_heap_free(xdelay_heap *h)
{
    free(h->v);
    *h = (xdelay_heap){0};
}
