/* The management API's lists (mgmt-ui/list.c): a snapshot of names filtered
 * by ?name= (a case-insensitive substring, or a bounded regex with
 * use_regex), sorted (by a numeric key, ?sort=vhost, reversed) and cut to
 * ?page=&page_size=. Checks: counts agree; every item shown passes the
 * filter; a page holds what the same slice of the whole sorted list holds
 * (when the sort keys are a total order: no NaN, all or none numeric).
 *
 * Input: a flags byte, page, page size (two bytes), the filter up to '\n',
 * then items: a byte (vhost, numeric or not, key width), the key, the name
 * up to '\n'. */
#include <math.h>

#include "../../mgmt-ui/mgmt.h"
#include "fuzz.h"

#define MAX_ITEMS 2000

static const char *const vhosts[] = {"/", "a", "B", "vhost-with-a-longer-name"};

typedef struct item {
    const char *vhost;
    char *name;
    size_t len;
    double num;
    bool has_num;
} item;

static mgmt_list *build(const mgmt_list_query *q, const item *it, size_t n)
{
    char why[256];
    mgmt_list *l = mgmt_list_new(q, why, sizeof why);
    if (!l)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(mgmt_list_add(l, it[i].vhost, (amqp_bytes){(const uint8_t *)it[i].name,
                                                                (uint32_t)it[i].len},
                                 i, it[i].num, it[i].has_num));
        if (i % 7 == 0)
            mgmt_list_filter(l, 3); /* filtering spread over turns, as the API does */
    }
    if (!mgmt_list_finish(l, why, sizeof why)) {
        FUZZ_CHECK(strstr(why, "Page out of range"));
        mgmt_list_free(l);
        return NULL;
    }
    return l;
}

static bool same_item(const mgmt_list_item *a, const mgmt_list_item *b)
{
    return a->id == b->id && strcmp(a->vhost, b->vhost) == 0 && amqp_bytes_equal(a->name, b->name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    uint8_t flags = fuzz_byte(&in);
    mgmt_list_query q = {0};
    q.paged = flags & 1;
    q.use_regex = flags & 2;
    q.sort = flags & 4 ? "vhost" : flags & 8 ? "messages" : NULL;
    q.sort_reverse = flags & 16;
    /* the API refuses pages under 1 and sizes outside 1..500 before here */
    q.page = fuzz_byte(&in) % 8 + 1;
    q.page_size = (uint32_t)((fuzz_byte(&in) << 8 | fuzz_byte(&in)) % 500 + 1);
    char *filter = fuzz_str(&in, '\n');
    q.name = *filter || flags & 32 ? filter : NULL;

    static item items[MAX_ITEMS];
    size_t n = 0;
    bool total_order = true, some_num = false, some_not = false;
    while (in.len && n < MAX_ITEMS) {
        uint8_t b = fuzz_byte(&in);
        item *it = &items[n++];
        it->vhost = vhosts[b & 3];
        it->has_num = b & 4;
        if (b & 8) { /* any 8 bytes, NaN and infinities included */
            uint64_t bits = 0;
            for (int i = 0; i < 8; i++)
                bits = bits << 8 | fuzz_byte(&in);
            memcpy(&it->num, &bits, sizeof bits);
        } else {
            it->num = fuzz_byte(&in) % 4; /* few values: many ties */
        }
        it->name = fuzz_str(&in, '\n');
        it->len = strlen(it->name);
        total_order &= !(it->has_num && isnan(it->num));
        some_num |= it->has_num;
        some_not |= !it->has_num;
    }
    total_order &= !(some_num && some_not);

    mgmt_list *l = build(&q, items, n);
    if (l) {
        FUZZ_CHECK(mgmt_list_total(l) == n);
        FUZZ_CHECK(mgmt_list_filtered(l) <= n);
        FUZZ_CHECK(mgmt_list_count(l) <= mgmt_list_filtered(l));
        FUZZ_CHECK(!q.paged || mgmt_list_count(l) <= q.page_size);
        for (size_t i = 0; i < mgmt_list_count(l); i++) {
            const mgmt_list_item *it = mgmt_list_at(l, i);
            FUZZ_CHECK(it->id < n && strcmp(it->vhost, items[it->id].vhost) == 0);
            if (q.name && !q.use_regex)
                FUZZ_CHECK(strcasestr(items[it->id].name, q.name)); /* names hold no NUL */
        }
        if (q.paged && total_order) {
            mgmt_list_query all = q;
            all.paged = false;
            mgmt_list *whole = build(&all, items, n);
            FUZZ_CHECK(whole && mgmt_list_count(whole) == mgmt_list_filtered(l));
            size_t first = (size_t)(q.page - 1) * q.page_size;
            for (size_t i = 0; i < mgmt_list_count(l); i++)
                FUZZ_CHECK(same_item(mgmt_list_at(l, i), mgmt_list_at(whole, first + i)));
            mgmt_list_free(whole);
        }
        mgmt_list_free(l);
    }
    for (size_t i = 0; i < n; i++)
        free(items[i].name);
    free(filter);
    return 0;
}
