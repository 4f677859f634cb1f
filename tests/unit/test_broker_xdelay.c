/* Delayed exchanges' heap (queue/xdelay_heap.c): entries leave by deadline
 * and, on equal deadlines, by message id (publish order), checked against
 * a sorted reference with many ties; the heap gives memory back once a
 * burst is out; the journal ids of durable delayed exchanges; and how a
 * publish's x-opt-delivery-time is read (queue/delayed.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../queue/queue_internal.h"

static int by_due_then_id(const void *a, const void *b)
{
    const xdelay_entry *x = a, *y = b;
    if (x->due != y->due)
        return x->due < y->due ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void test_heap_order(void **state)
{
    (void)state;
    enum { N = 5000 };
    static xdelay_entry ref[N];
    xdelay_heap h = {0};
    srand(11);
    for (int i = 0; i < N; i++) {
        ref[i] = (xdelay_entry){.due = (uint64_t)(rand() % 300), .id = (uint64_t)rand()};
        assert_true(xdelay_heap_push(&h, &ref[i]));
    }
    qsort(ref, N, sizeof ref[0], by_due_then_id);
    for (int i = 0; i < N; i++) {
        assert_int_equal(xdelay_heap_first(&h)->id, ref[i].id);
        xdelay_entry e = xdelay_heap_pop(&h);
        assert_int_equal(e.due, ref[i].due);
        assert_int_equal(e.id, ref[i].id);
    }
    assert_null(xdelay_heap_first(&h));
    assert_true(h.cap <= 2048); /* shrank as it emptied */
    xdelay_heap_free(&h);
    assert_int_equal(h.cap, 0);
}

static void test_interleaved(void **state)
{
    (void)state;
    xdelay_heap h = {0};
    uint64_t last = 0;
    srand(5);
    /* pushes later than what already left, as time goes on */
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 20; i++) {
            xdelay_entry e = {.due = last + (uint64_t)(rand() % 50), .id = (uint64_t)(round * 20 + i)};
            assert_true(xdelay_heap_push(&h, &e));
        }
        for (int i = 0; i < 15; i++) {
            xdelay_entry e = xdelay_heap_pop(&h);
            assert_true(e.due >= last);
            last = e.due;
        }
    }
    assert_int_equal(h.n, 200 * 5);
    xdelay_heap_free(&h);
}

static void test_store_ids(void **state)
{
    (void)state;
    uint64_t a = xdelay_store_id("/", AMQP_CSTR("dx"));
    assert_true(a & XDELAY_ID_BIT);
    assert_int_equal(a, xdelay_store_id("/", AMQP_CSTR("dx")));
    assert_int_not_equal(a, xdelay_store_id("/", AMQP_CSTR("dy")));
    assert_int_not_equal(a, xdelay_store_id("v", AMQP_CSTR("dx")));
    /* the vhost and name do not run together */
    assert_int_not_equal(xdelay_store_id("a", AMQP_CSTR("bc")), xdelay_store_id("ab", AMQP_CSTR("c")));
}

/* Raw properties with one header `key` of type `type` and value v. */
static amqp_bytes props_with(uint8_t *buf, size_t cap, const char *key, uint8_t type, int64_t v)
{
    uint8_t hdr[64];
    amqp_writer w;
    amqp_writer_init(&w, hdr, sizeof hdr);
    size_t mark = amqp_table_begin(&w);
    amqp_put_shortstr(&w, AMQP_CSTR(key));
    amqp_field f = {.type = type};
    if (type == 'S')
        f.v.bytes = AMQP_CSTR("123");
    else
        f.v.i = v;
    amqp_put_field(&w, &f);
    amqp_table_end(&w, mark);
    amqp_basic_properties p = {.flags = AMQP_BASIC_HEADERS_FLAG,
                               .headers = {hdr + 4, (uint32_t)w.len - 4}};
    return (amqp_bytes){buf, (uint32_t)amqp_properties_encode(&p, buf, cap)};
}

static void test_delivery_time(void **state)
{
    (void)state;
    uint8_t buf[128];
    amqp_basic_properties none = {0};
    amqp_bytes empty = {buf, (uint32_t)amqp_properties_encode(&none, buf, sizeof buf)};
    assert_int_equal(queue_delivery_time(empty), 0);
    assert_int_equal(queue_delivery_time(props_with(buf, sizeof buf, "x-opt-delivery-time", 'l',
                                                    1700000000123)), 1700000000123);
    assert_int_equal(queue_delivery_time(props_with(buf, sizeof buf, "x-opt-delivery-time", 'I',
                                                    5000)), 5000);
    assert_int_equal(queue_delivery_time(props_with(buf, sizeof buf, "x-opt-delivery-time", 'l',
                                                    -5)), 0);
    assert_int_equal(queue_delivery_time(props_with(buf, sizeof buf, "x-opt-delivery-time", 'S',
                                                    0)), 0); /* not an integer */
    assert_int_equal(queue_delivery_time(props_with(buf, sizeof buf, "x-delay", 'l', 5000)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_order),
        cmocka_unit_test(test_interleaved),
        cmocka_unit_test(test_store_ids),
        cmocka_unit_test(test_delivery_time),
    };
    return cmocka_run_group_tests_name("broker_xdelay", tests, NULL, NULL);
}
