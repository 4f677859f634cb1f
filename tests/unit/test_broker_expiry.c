/* Expiry: the heap of early expirations against a sorted reference, its
 * filter and slices (expiry.c), and through a real queue the tombstones
 * that messages expiring from the middle of a ring leave: counts drop at
 * once, order holds, requeues find their place, and a full ring compacts
 * instead of growing, or grows keeping its order when it wraps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <event2/event.h>

#include "test_broker_start.h"
#include "../../queue/queue_internal.h"
#include "test_broker_util.h"

static bool before(const expiry_entry *a, const expiry_entry *b)
{
    return a->at != b->at ? a->at < b->at : (int32_t)(a->seq - b->seq) < 0;
}

static int by_time_then_seq(const void *x, const void *y)
{
    const expiry_entry *a = x, *b = y;
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* Random times with many ties and sequence numbers across the wrap. */
static void test_heap_pops_in_time_then_seq_order(void **state)
{
    (void)state;
    srand(7);
    for (int round = 0; round < 20; round++) {
        expiry_heap h = {0};
        uint32_t n = 1 + (uint32_t)rand() % 3000;
        expiry_entry *ref = malloc(n * sizeof *ref);
        assert_non_null(ref);
        for (uint32_t i = 0; i < n; i++) {
            ref[i] = (expiry_entry){.at = 1000 + (uint64_t)(rand() % 50),
                                    .seq = 0xfffff000u + i, /* wraps to 0 midway */
                                    .level = (uint32_t)rand() % 3};
            assert_true(expiry_heap_push(&h, ref[i]));
            /* interleaved pops: the top is the earliest of what is left */
            if (rand() % 4 == 0) {
                const expiry_entry *top = expiry_heap_top(&h);
                for (uint32_t k = 0; k < h.n; k++)
                    assert_false(before(&h.e[k], top));
            }
        }
        qsort(ref, n, sizeof *ref, by_time_then_seq);
        for (uint32_t i = 0; i < n; i++) {
            const expiry_entry *top = expiry_heap_top(&h);
            assert_non_null(top);
            assert_int_equal(top->at, ref[i].at);
            assert_int_equal(top->seq, ref[i].seq);
            expiry_heap_pop(&h);
        }
        assert_null(expiry_heap_top(&h));
        expiry_heap_free(&h);
        free(ref);
    }
}

static bool even_seq(void *ctx, const expiry_entry *e)
{
    (*(int *)ctx)++;
    return e->seq % 2 == 0;
}

static void test_heap_filter_keeps_order(void **state)
{
    (void)state;
    expiry_heap h = {0};
    for (uint32_t i = 0; i < 1000; i++)
        assert_true(expiry_heap_push(&h, (expiry_entry){.at = (i * 7919u) % 1000, .seq = i}));
    int asked = 0;
    expiry_heap_filter(&h, even_seq, &asked);
    assert_int_equal(asked, 1000);
    assert_int_equal(h.n, 500);
    expiry_entry last = {0};
    for (uint32_t i = 0; i < 500; i++) {
        const expiry_entry *top = expiry_heap_top(&h);
        assert_int_equal(top->seq % 2, 0);
        assert_false(before(top, &last));
        last = *top;
        expiry_heap_pop(&h);
    }
    expiry_heap_clear(&h);
    assert_null(expiry_heap_top(&h));
    expiry_heap_free(&h);
}

static void test_slice_is_bounded(void **state)
{
    (void)state;
    expiry_slice s;
    expiry_slice_begin(&s);
    uint32_t taken = 0;
    while (expiry_slice_more(&s) && taken < 100000)
        s.done = ++taken;
    assert_true(taken <= EXPIRY_SLICE_MAX);
    assert_true(taken >= 64); /* the clock is read only every 64 */
}

/* ---- through a queue ----------------------------------------------------- */

static queue *make_queue(const char *name)
{
    queue_spec spec = {.name = AMQP_CSTR(name)};
    vhost *v = server_vhost(srv, AMQP_CSTR("/"));
    queue *q = queue_new(v, &spec);
    assert_non_null(q);
    vhost_queue_add(v, q);
    return q;
}

static void publish(queue *q, int i, int64_t expiration_ms)
{
    static const uint8_t no_props[2] = {0, 0};
    char body[16];
    int len = snprintf(body, sizeof body, "%d", i);
    msg *m = msg_new(test_msgs(), AMQP_CSTR(""), AMQP_CSTR("k"), (amqp_bytes){no_props, 2}, (size_t)len);
    assert_non_null(m);
    assert_true(msg_append_body(m, (const uint8_t *)body, (size_t)len));
    assert_true(queue_publish(q, m, expiration_ms));
    msg_unref(m);
}

static int body_of(const queue_item *it)
{
    char buf[16] = {0};
    memcpy(buf, msg_body(it->m), msg_body_size(it->m));
    return atoi(buf);
}

/* Runs the loop (the queue's expiry timer) until `q` has `ready` messages. */
static void expire_until(queue *q, uint32_t ready)
{
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 500 && queue_ready_count(q) != ready; i++) {
        nanosleep(&ms, NULL);
        loop_touch_clock(admin_loop(srv));
        event_base_loop(loop_base(admin_loop(srv)), EVLOOP_NONBLOCK);
    }
    assert_int_equal(queue_ready_count(q), ready);
}

static size_t ring_memory(queue *q)
{
    queue_info info;
    queue_describe(q, &info);
    return info.memory;
}

static void expect_bodies(queue *q, const int *want, int n)
{
    for (int i = 0; i < n; i++) {
        queue_item it;
        assert_true(queue_get(q, &it));
        assert_int_equal(body_of(&it), want[i]);
        msg_unref(it.m);
    }
    queue_item it;
    assert_false(queue_get(q, &it));
}

static void test_middle_expiries_leave_tombstones_that_compact(void **state)
{
    (void)state;
    queue *q = make_queue("ex.tomb");
    loop_touch_clock(admin_loop(srv));
    /* 256 slots, every odd one expiring soon (the last too: a dead tail) */
    for (int i = 0; i < 256; i++)
        publish(q, i, i % 2 ? 1 : -1);
    size_t full = ring_memory(q);
    expire_until(q, 128);
    /* the ring is full with tombstones: it compacts rather than doubles */
    for (int i = 256; i < 300; i++)
        publish(q, i, -1);
    assert_int_equal(ring_memory(q), full);
    assert_int_equal(queue_ready_count(q), 128 + 44);
    /* requeues find their place among the compacted slots */
    queue_item a, b;
    assert_true(queue_get(q, &a));
    assert_true(queue_get(q, &b));
    a.delivery_count = b.delivery_count = 1;
    queue_requeue(q, b, QUEUE_RETURN_FAILED);
    queue_requeue(q, a, QUEUE_RETURN_FAILED);
    msg_unref(a.m);
    msg_unref(b.m);
    int want[172];
    for (int i = 0; i < 128; i++)
        want[i] = 2 * i;
    for (int i = 0; i < 44; i++)
        want[128 + i] = 256 + i;
    expect_bodies(q, want, 172);
    queue_delete(q);
}

/* Tombstones at the head are skipped; a message taken before its time
 * leaves a stale heap entry that expires nothing; a requeued one expires
 * from its place in the middle. */
static void test_stale_entries_and_requeued_expiries(void **state)
{
    (void)state;
    queue *q = make_queue("ex.stale");
    loop_touch_clock(admin_loop(srv));
    publish(q, 0, 30);  /* taken before its time, then requeued */
    publish(q, 1, 1);   /* expires behind 0 */
    publish(q, 2, -1);
    publish(q, 3, 1);   /* behind 2 */
    publish(q, 4, 20);  /* taken before its time, settled */
    publish(q, 5, -1);
    queue_item first;
    assert_true(queue_get(q, &first));
    assert_int_equal(body_of(&first), 0);
    expire_until(q, 3); /* 1 and 3: the head (2) and the tail (5) are live */
    queue_item it;
    assert_true(queue_get(q, &it));
    assert_int_equal(body_of(&it), 2);
    msg_unref(it.m);
    assert_true(queue_get(q, &it));
    assert_int_equal(body_of(&it), 4);
    msg_unref(it.m);
    first.delivery_count = 1;
    queue_requeue(q, first, QUEUE_RETURN_FAILED); /* back before 5, still expiring at 30 ms */
    msg_unref(first.m);
    assert_int_equal(queue_ready_count(q), 2);
    expire_until(q, 1);
    int want[] = {5};
    expect_bodies(q, want, 1);
    queue_delete(q);
}

/* A full ring that wraps doubles keeping its order, whichever part moves. */
static void test_ring_grows_when_wrapped(void **state)
{
    (void)state;
    for (int taken = 0; taken <= 15; taken++) {
        queue *q = make_queue("ex.wrap");
        int next = 0, first = taken;
        for (; next < 16; next++)
            publish(q, next, -1);
        for (int i = 0; i < taken; i++) { /* the head moves on */
            queue_item it;
            assert_true(queue_get(q, &it));
            msg_unref(it.m);
        }
        for (; next < 16 + taken + 3; next++) /* wraps, fills, then grows */
            publish(q, next, -1);
        int want[64];
        for (int i = first; i < next; i++)
            want[i - first] = i;
        expect_bodies(q, want, next - first);
        queue_delete(q);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_pops_in_time_then_seq_order),
        cmocka_unit_test(test_heap_filter_keeps_order),
        cmocka_unit_test(test_slice_is_bounded),
        cmocka_unit_test(test_middle_expiries_leave_tombstones_that_compact),
        cmocka_unit_test(test_stale_entries_and_requeued_expiries),
        cmocka_unit_test(test_ring_grows_when_wrapped),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
