/* Lists: a snapshot of the objects a list endpoint shows -- each one's
 * vhost, name or id and sort key, nothing else -- filtered by name, sorted
 * and cut to the requested page. The endpoint then renders only the page,
 * looking each object up again (one deleted meanwhile is skipped), so a
 * page of 100 out of 10,000 queues costs one pass over the names plus
 * 100 renders. Adding costs a copy of the name; the name filter (a regex
 * among them) runs afterwards, a given number of names at a time
 * (mgmt_list_filter), so the caller can spread it over loop turns.
 *
 * Names live in `arena` (offsets, since it grows); items point into it once
 * the snapshot is finished.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../pattern/pattern.h"
#include "mgmt.h"

typedef struct entry {
    size_t vhost_off, name_off;
    uint32_t name_len;
    uint64_t id;
    double num;
    bool has_num;
} entry;

struct mgmt_list {
    mgmt_list_query q;
    pattern_re *re; /* ?use_regex=true: the bounded engine, case-insensitive */
    pattern_scratch *scratch;
    bool limit_logged;
    char *arena;
    size_t arena_len, arena_cap;
    entry *e;
    size_t n, cap;   /* added */
    size_t filtered; /* e[0, filtered) passed; e[filtered, scanned) are done */
    size_t scanned;
    mgmt_list_item *items; /* all filtered items, sorted */
    size_t first, count;   /* the page */
    /* the last vhost added, to store each vhost name once */
    size_t last_vhost_off;
    const char *last_vhost;
};

mgmt_list *mgmt_list_new(const mgmt_list_query *q, char *why, size_t whylen)
{
    mgmt_list *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->q = *q;
    if (q->name && *q->name && q->use_regex) {
        pattern_error e;
        l->re = pattern_compile(q->name, strlen(q->name), PATTERN_CASELESS, &e);
        l->scratch = l->re ? pattern_scratch_new() : NULL;
        if (!l->scratch) {
            snprintf(why, whylen, "%s", l->re ? "out of memory" : e.text);
            mgmt_list_free(l);
            return NULL;
        }
    }
    return l;
}

void mgmt_list_free(mgmt_list *l)
{
    if (!l)
        return;
    pattern_free(l->re);
    pattern_scratch_free(l->scratch);
    free(l->arena);
    free(l->e);
    free(l->items);
    free(l);
}

/* Case-insensitive substring search over bytes. */
static bool contains_icase(amqp_bytes hay, const char *needle)
{
    size_t n = strlen(needle);
    if (n == 0)
        return true;
    for (size_t i = 0; i + n <= hay.len; i++) {
        size_t j = 0;
        while (j < n && tolower(hay.ptr[i + j]) == tolower((unsigned char)needle[j]))
            j++;
        if (j == n)
            return true;
    }
    return false;
}

static bool name_passes(mgmt_list *l, amqp_bytes name)
{
    if (!l->q.name || !*l->q.name)
        return true;
    if (!l->re)
        return contains_icase(name, l->q.name);
    pattern_result m = pattern_match(l->re, l->scratch, name.ptr, name.len);
    if (m == PATTERN_LIMIT && !l->limit_logged) {
        l->limit_logged = true;
        log_msg(LOG_WARNING, "management: the list filter /%.100s/ reached its match limit; "
                             "names it could not decide are left out", l->q.name);
    }
    return m == PATTERN_MATCH;
}

/* Copies n bytes plus a NUL into the arena; returns the offset or -1. */
static ssize_t arena_put(mgmt_list *l, const void *p, size_t n)
{
    if (l->arena_len + n + 1 > l->arena_cap) {
        size_t cap = l->arena_cap ? l->arena_cap : 4096;
        while (cap < l->arena_len + n + 1)
            cap *= 2;
        char *grown = realloc(l->arena, cap);
        if (!grown)
            return -1;
        l->arena = grown;
        l->arena_cap = cap;
    }
    size_t off = l->arena_len;
    memcpy(l->arena + off, p, n);
    l->arena[off + n] = 0;
    l->arena_len += n + 1;
    return (ssize_t)off;
}

bool mgmt_list_add(mgmt_list *l, const char *vh, amqp_bytes name, uint64_t id, double num,
                   bool has_num)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        entry *grown = realloc(l->e, cap * sizeof *grown);
        if (!grown)
            return false;
        l->e = grown;
        l->cap = cap;
    }
    if (vh != l->last_vhost) {
        ssize_t off = arena_put(l, vh, strlen(vh));
        if (off < 0)
            return false;
        l->last_vhost_off = (size_t)off;
        l->last_vhost = vh;
    }
    ssize_t noff = arena_put(l, name.ptr, name.len);
    if (noff < 0)
        return false;
    l->e[l->n++] = (entry){.vhost_off = l->last_vhost_off,
                           .name_off = (size_t)noff,
                           .name_len = name.len,
                           .id = id,
                           .num = num,
                           .has_num = has_num};
    return true;
}

bool mgmt_list_filter(mgmt_list *l, size_t max)
{
    for (; l->scanned < l->n && max; l->scanned++, max--) {
        const entry *e = &l->e[l->scanned];
        amqp_bytes name = {(const uint8_t *)l->arena + e->name_off, e->name_len};
        if (name_passes(l, name))
            l->e[l->filtered++] = *e;
    }
    return l->scanned == l->n;
}

static int cmp_bytes(amqp_bytes a, amqp_bytes b)
{
    int c = memcmp(a.ptr, b.ptr, a.len < b.len ? a.len : b.len);
    return c ? c : (a.len > b.len) - (a.len < b.len);
}

/* How items compare: ?sort=vhost puts the vhost before the name. */
typedef struct order {
    bool by_vhost_first, reverse;
} order;

static int cmp_items(const void *pa, const void *pb, void *arg)
{
    const mgmt_list_item *a = pa, *b = pb;
    const order *o = arg;
    int c = 0;
    if (a->has_num && b->has_num)
        c = (a->num > b->num) - (a->num < b->num);
    if (!c && o->by_vhost_first)
        c = strcmp(a->vhost, b->vhost);
    if (!c)
        c = cmp_bytes(a->name, b->name);
    if (!c)
        c = strcmp(a->vhost, b->vhost);
    if (!c)
        c = (a->id > b->id) - (a->id < b->id);
    return o->reverse ? -c : c;
}

static void swap_items(mgmt_list_item *a, mgmt_list_item *b)
{
    mgmt_list_item t = *a;
    *a = *b;
    *b = t;
}

/* Quickselect: puts the item of rank k at v[k], the smaller ones before it
 * and the larger after, in about 2n comparisons -- a page of 100 out of
 * 10,000 needs no full sort. Gives up (false) after too many rounds, so a
 * hostile order of names costs at most a full sort. */
static bool select_nth(mgmt_list_item *v, size_t n, size_t k, order *o)
{
    size_t lo = 0, hi = n;
    for (int rounds = 0; hi - lo > 1; rounds++) {
        if (rounds > 64)
            return false;
        swap_items(&v[lo + (hi - lo) / 2], &v[hi - 1]);
        size_t store = lo;
        for (size_t i = lo; i + 1 < hi; i++)
            if (cmp_items(&v[i], &v[hi - 1], o) < 0)
                swap_items(&v[i], &v[store++]);
        swap_items(&v[store], &v[hi - 1]);
        if (k == store)
            return true;
        if (k < store)
            hi = store;
        else
            lo = store + 1;
    }
    return true;
}

/* Orders items[first, first + count) as a full sort would. */
static void sort_range(mgmt_list_item *v, size_t n, size_t first, size_t count, order *o)
{
    bool ok = (first == 0 || select_nth(v, n, first, o)) &&
              (first + count >= n || select_nth(v + first, n - first, count, o));
    if (!ok) {
        qsort_r(v, n, sizeof *v, cmp_items, o);
        return;
    }
    qsort_r(v + first, count, sizeof *v, cmp_items, o);
}

bool mgmt_list_finish(mgmt_list *l, char *why, size_t whylen)
{
    mgmt_list_filter(l, SIZE_MAX);
    size_t n = l->filtered;
    l->items = calloc(n ? n : 1, sizeof *l->items);
    if (!l->items) {
        snprintf(why, whylen, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++)
        l->items[i] = (mgmt_list_item){
            .vhost = l->arena + l->e[i].vhost_off,
            .name = {(const uint8_t *)l->arena + l->e[i].name_off, l->e[i].name_len},
            .id = l->e[i].id,
            .num = l->e[i].num,
            .has_num = l->e[i].has_num};
    order o = {l->q.sort && strcmp(l->q.sort, "vhost") == 0, l->q.sort_reverse};
    l->first = 0;
    l->count = n;
    if (!l->q.paged) {
        qsort_r(l->items, n, sizeof *l->items, cmp_items, &o);
        return true;
    }
    size_t size = l->q.page_size;
    if (l->q.page > 1 && (size_t)(l->q.page - 1) * size >= n) {
        snprintf(why, whylen, "Page out of range, page: %u page size: %u, len: %zu", l->q.page,
                 l->q.page_size, n);
        return false;
    }
    l->first = (size_t)(l->q.page - 1) * size;
    l->count = n - l->first < size ? n - l->first : size;
    sort_range(l->items, n, l->first, l->count, &o);
    return true;
}

size_t mgmt_list_total(const mgmt_list *l) { return l->n; }
size_t mgmt_list_filtered(const mgmt_list *l) { return l->filtered; }
size_t mgmt_list_count(const mgmt_list *l) { return l->count; }
const mgmt_list_item *mgmt_list_at(const mgmt_list *l, size_t i) { return &l->items[l->first + i]; }
const mgmt_list_query *mgmt_list_query_of(const mgmt_list *l) { return &l->q; }

uint32_t mgmt_list_page_count(const mgmt_list *l)
{
    return l->q.page_size ? (uint32_t)((l->filtered + l->q.page_size - 1) / l->q.page_size) : 1;
}
