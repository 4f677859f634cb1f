/* List snapshots: the name filter (substring, case-insensitive, or regex),
 * sorting (by name, by a numeric key, reversed, by vhost), paging and
 * RabbitMQ's page errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../mgmt-ui/mgmt.h"

static mgmt_list *list_of(mgmt_list_query q, const char *const *names, const double *keys,
                          size_t n)
{
    char why[256];
    mgmt_list *l = mgmt_list_new(&q, why, sizeof why);
    assert_non_null(l);
    for (size_t i = 0; i < n; i++)
        assert_true(mgmt_list_add(l, "/", AMQP_CSTR(names[i]), i, keys ? keys[i] : 0, keys != NULL));
    return l;
}

static void assert_names(mgmt_list *l, const char *const *want, size_t n)
{
    assert_int_equal(mgmt_list_count(l), n);
    for (size_t i = 0; i < n; i++)
        if (!amqp_bytes_equal_cstr(mgmt_list_at(l, i)->name, want[i]))
            fail_msg("item %zu: got %.*s, want %s", i, (int)mgmt_list_at(l, i)->name.len,
                     (const char *)mgmt_list_at(l, i)->name.ptr, want[i]);
}

static const char *const names[] = {"q2", "Orders.b", "q1", "orders.a", "q 3/weird", "mgmt-q1"};

static void test_sort_by_name_and_reverse(void **state)
{
    (void)state;
    char why[256];
    mgmt_list *l = list_of((mgmt_list_query){0}, names, NULL, 6);
    assert_true(mgmt_list_finish(l, why, sizeof why));
    static const char *const want[] = {"Orders.b", "mgmt-q1", "orders.a", "q 3/weird", "q1", "q2"};
    assert_names(l, want, 6);
    assert_int_equal(mgmt_list_total(l), 6);
    mgmt_list_free(l);
    l = list_of((mgmt_list_query){.sort = "name", .sort_reverse = true}, names, NULL, 6);
    assert_true(mgmt_list_finish(l, why, sizeof why));
    static const char *const rev[] = {"q2", "q1", "q 3/weird", "orders.a", "mgmt-q1", "Orders.b"};
    assert_names(l, rev, 6);
    mgmt_list_free(l);
}

static void test_sort_by_number_ties_by_name(void **state)
{
    (void)state;
    char why[256];
    static const double keys[] = {5, 1, 5, 0, 2, 1};
    mgmt_list *l = list_of((mgmt_list_query){.sort = "messages"}, names, keys, 6);
    assert_true(mgmt_list_finish(l, why, sizeof why));
    static const char *const want[] = {"orders.a", "Orders.b", "mgmt-q1", "q 3/weird", "q1", "q2"};
    assert_names(l, want, 6);
    mgmt_list_free(l);
    l = list_of((mgmt_list_query){.sort = "messages", .sort_reverse = true}, names, keys, 6);
    assert_true(mgmt_list_finish(l, why, sizeof why));
    static const char *const rev[] = {"q2", "q1", "q 3/weird", "mgmt-q1", "Orders.b", "orders.a"};
    assert_names(l, rev, 6);
    mgmt_list_free(l);
}

static void test_filters(void **state)
{
    (void)state;
    char why[256];
    mgmt_list *l = list_of((mgmt_list_query){.name = "ORDERS"}, names, NULL, 6);
    assert_true(mgmt_list_finish(l, why, sizeof why));
    static const char *const sub[] = {"Orders.b", "orders.a"};
    assert_names(l, sub, 2);
    assert_int_equal(mgmt_list_total(l), 6);
    assert_int_equal(mgmt_list_filtered(l), 2);
    mgmt_list_free(l);
    l = list_of((mgmt_list_query){.name = "^q[0-9]$", .use_regex = true}, names, NULL, 6);
    assert_true(mgmt_list_finish(l, why, sizeof why));
    static const char *const re[] = {"q1", "q2"};
    assert_names(l, re, 2);
    mgmt_list_free(l);
    /* without use_regex the pattern is plain text */
    l = list_of((mgmt_list_query){.name = "^q"}, names, NULL, 6);
    assert_true(mgmt_list_finish(l, why, sizeof why));
    assert_int_equal(mgmt_list_count(l), 0);
    mgmt_list_free(l);
    mgmt_list_query bad = {.name = "(", .use_regex = true};
    assert_null(mgmt_list_new(&bad, why, sizeof why));
    assert_true(strlen(why) > 0);
}

static void test_paging(void **state)
{
    (void)state;
    char why[256], buf[25][16];
    const char *many[25];
    for (int i = 0; i < 25; i++) {
        snprintf(buf[i], sizeof buf[i], "n%02d", i);
        many[i] = buf[i];
    }
    mgmt_list *l = list_of((mgmt_list_query){.paged = true, .page = 2, .page_size = 10}, many,
                           NULL, 25);
    assert_true(mgmt_list_finish(l, why, sizeof why));
    assert_names(l, many + 10, 10);
    assert_int_equal(mgmt_list_page_count(l), 3);
    mgmt_list_free(l);
    l = list_of((mgmt_list_query){.paged = true, .page = 3, .page_size = 10}, many, NULL, 25);
    assert_true(mgmt_list_finish(l, why, sizeof why));
    assert_names(l, many + 20, 5);
    mgmt_list_free(l);
    l = list_of((mgmt_list_query){.paged = true, .page = 4, .page_size = 10}, many, NULL, 25);
    assert_false(mgmt_list_finish(l, why, sizeof why));
    assert_string_equal(why, "Page out of range, page: 4 page size: 10, len: 25");
    mgmt_list_free(l);
    /* the first page of nothing is an empty page, not an error */
    l = list_of((mgmt_list_query){.paged = true, .page = 1, .page_size = 10}, many, NULL, 0);
    assert_true(mgmt_list_finish(l, why, sizeof why));
    assert_int_equal(mgmt_list_count(l), 0);
    assert_int_equal(mgmt_list_page_count(l), 0);
    mgmt_list_free(l);
}

static void test_vhost_sort_and_odd_names(void **state)
{
    (void)state;
    char why[256];
    mgmt_list_query q = {.sort = "vhost"};
    mgmt_list *l = mgmt_list_new(&q, why, sizeof why);
    static const uint8_t nul_name[] = {'a', 0, 'b'};
    assert_true(mgmt_list_add(l, "/z", AMQP_CSTR("a"), 0, 0, false));
    assert_true(mgmt_list_add(l, "/a", AMQP_CSTR("b"), 0, 0, false));
    assert_true(mgmt_list_add(l, "/a", (amqp_bytes){nul_name, 3}, 0, 0, false));
    assert_true(mgmt_list_finish(l, why, sizeof why));
    assert_string_equal(mgmt_list_at(l, 0)->vhost, "/a");
    assert_int_equal(mgmt_list_at(l, 0)->name.len, 3); /* "a\0b" < "b" */
    assert_memory_equal(mgmt_list_at(l, 0)->name.ptr, nul_name, 3);
    assert_string_equal(mgmt_list_at(l, 2)->vhost, "/z");
    mgmt_list_free(l);
}

/* Every page of a paged list is the same slice a full sort gives, for
 * random names and keys, both directions (pages are selected, not sorted
 * whole). */
static void test_pages_match_the_full_sort(void **state)
{
    (void)state;
    enum { N = 1000 };
    static char buf[N][16];
    static const char *rnd[N];
    static double keys[N];
    uint32_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        snprintf(buf[i], sizeof buf[i], "q%u", (x >> 8) % 100000);
        rnd[i] = buf[i];
        keys[i] = (double)((x >> 4) % 7);
    }
    char why[256];
    for (int variant = 0; variant < 4; variant++) {
        mgmt_list_query all = {.sort = variant & 1 ? "messages" : NULL, .sort_reverse = variant & 2};
        mgmt_list *full = list_of(all, rnd, variant & 1 ? keys : NULL, N);
        assert_true(mgmt_list_finish(full, why, sizeof why));
        for (uint32_t size = 7; size <= 100; size += 93) {
            for (uint32_t page = 1; (page - 1) * size < N; page++) {
                mgmt_list_query q = all;
                q.paged = true, q.page = page, q.page_size = size;
                mgmt_list *l = list_of(q, rnd, variant & 1 ? keys : NULL, N);
                assert_true(mgmt_list_finish(l, why, sizeof why));
                for (size_t i = 0; i < mgmt_list_count(l); i++) {
                    const mgmt_list_item *a = mgmt_list_at(l, i);
                    const mgmt_list_item *b = mgmt_list_at(full, (page - 1) * size + i);
                    if (a->id != b->id)
                        fail_msg("variant %d page %u size %u item %zu differs", variant, page,
                                 size, i);
                }
                mgmt_list_free(l);
            }
        }
        mgmt_list_free(full);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sort_by_name_and_reverse),
        cmocka_unit_test(test_sort_by_number_ties_by_name),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_paging),
        cmocka_unit_test(test_vhost_sort_and_odd_names),
        cmocka_unit_test(test_pages_match_the_full_sort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
