/* Delayed retry without a network: the delay rule from a table (types,
 * linear, multiplier, caps, overflow), the deadline heap against a sorted
 * reference, and a queue that holds a returned message back -- neither
 * ready nor lost -- until the loop's timer gives it back at its place. */
#include <event2/event.h>

#include "../../queue/queue_internal.h"
#include "test_broker_msgs.h"
#include "test_broker_util.h"

static queue_args retry(int type, int64_t min, int64_t max, int64_t mult)
{
    return (queue_args){.retry_type = (uint8_t)type, .retry_min = min, .retry_max = max,
                        .retry_multiplier = mult};
}

static void test_delay_rule(void **state)
{
    (void)state;
    const struct {
        queue_args a;
        queue_return why;
        uint32_t count;
        uint64_t want;
    } cases[] = {
        /* types select returns */
        {retry(QUEUE_RETRY_DISABLED, 100, -1, -1), QUEUE_RETURN_FAILED, 1, 0},
        {retry(QUEUE_RETRY_FAILED, 100, -1, -1), QUEUE_RETURN_FAILED, 1, 100},
        {retry(QUEUE_RETRY_FAILED, 100, -1, -1), QUEUE_RETURN_RETURNED, 1, 0},
        {retry(QUEUE_RETRY_RETURNED, 100, -1, -1), QUEUE_RETURN_RETURNED, 1, 100},
        {retry(QUEUE_RETRY_RETURNED, 100, -1, -1), QUEUE_RETURN_FAILED, 1, 0},
        {retry(QUEUE_RETRY_ALL, 100, -1, -1), QUEUE_RETURN_FAILED, 1, 100},
        {retry(QUEUE_RETRY_ALL, 100, -1, -1), QUEUE_RETURN_RETURNED, 1, 100},
        {retry(QUEUE_RETRY_ALL, 100, -1, -1), QUEUE_RETURN_PLAIN, 1, 0},
        /* no min, a zero min, a count of 0: nothing */
        {retry(QUEUE_RETRY_ALL, -1, 500, -1), QUEUE_RETURN_FAILED, 3, 0},
        {retry(QUEUE_RETRY_ALL, 0, 500, -1), QUEUE_RETURN_FAILED, 3, 0},
        {retry(QUEUE_RETRY_ALL, 100, 500, -1), QUEUE_RETURN_FAILED, 0, 0},
        /* linear: min x count, then max */
        {retry(QUEUE_RETRY_ALL, 100, 500, -1), QUEUE_RETURN_FAILED, 3, 300},
        {retry(QUEUE_RETRY_ALL, 100, 500, -1), QUEUE_RETURN_FAILED, 5, 500},
        {retry(QUEUE_RETRY_ALL, 100, 500, -1), QUEUE_RETURN_FAILED, 9, 500},
        {retry(QUEUE_RETRY_ALL, 100, 50, -1), QUEUE_RETURN_FAILED, 1, 50},
        {retry(QUEUE_RETRY_ALL, 100, 0, -1), QUEUE_RETURN_FAILED, 1, 0},
        /* multiplier: constant, exponential, capped */
        {retry(QUEUE_RETRY_ALL, 100, -1, 1), QUEUE_RETURN_FAILED, 7, 100},
        {retry(QUEUE_RETRY_ALL, 100, -1, 2), QUEUE_RETURN_FAILED, 1, 100},
        {retry(QUEUE_RETRY_ALL, 100, -1, 2), QUEUE_RETURN_FAILED, 4, 800},
        {retry(QUEUE_RETRY_ALL, 100, 1000, 3), QUEUE_RETURN_FAILED, 3, 900},
        {retry(QUEUE_RETRY_ALL, 100, 1000, 3), QUEUE_RETURN_FAILED, 4, 1000},
        /* never past QUEUE_RETRY_DELAY_MAX, whatever overflows */
        {retry(QUEUE_RETRY_ALL, 1000000, -1, -1), QUEUE_RETURN_FAILED, 0x3fffffff,
         QUEUE_RETRY_DELAY_MAX},
        {retry(QUEUE_RETRY_ALL, 2, -1, 2147483647), QUEUE_RETURN_FAILED, 0x3fffffff,
         QUEUE_RETRY_DELAY_MAX},
        {retry(QUEUE_RETRY_ALL, INT64_MAX, INT64_MAX, -1), QUEUE_RETURN_FAILED, 1,
         QUEUE_RETRY_DELAY_MAX},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t got = queue_retry_delay_ms(&cases[i].a, cases[i].why, cases[i].count);
        if (got != cases[i].want)
            fail_msg("case %zu: got %llu, want %llu", i, (unsigned long long)got,
                     (unsigned long long)cases[i].want);
    }
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_heap_order(void **state)
{
    (void)state;
    enum { N = 1000 };
    uint64_t ref[N];
    delayed_set d = {0};
    srand(7);
    for (int i = 0; i < N; i++) {
        ref[i] = (uint64_t)(rand() % 200); /* many ties */
        delayed_entry e = {.due = ref[i], .s = {.seq = (uint32_t)i}};
        assert_true(delayed_push(&d, &e));
    }
    qsort(ref, N, sizeof ref[0], by_u64);
    for (int i = 0; i < N; i++) {
        assert_int_equal(delayed_first(&d)->due, ref[i]);
        assert_int_equal(delayed_pop(&d).due, ref[i]);
    }
    assert_null(delayed_first(&d));
    delayed_free(&d);
}

static queue *retry_queue(vhost *v, const char *name, uint8_t *buf, size_t cap)
{
    amqp_writer w;
    amqp_writer_init(&w, buf, cap);
    size_t mark = amqp_table_begin(&w);
    amqp_put_field_str(&w, "x-delayed-retry-type", AMQP_CSTR("failed"));
    amqp_put_field_long(&w, "x-delayed-retry-min", 50);
    amqp_table_end(&w, mark);
    queue_spec spec = {.name = AMQP_CSTR(name), .arguments = {buf + 4, (uint32_t)w.len - 4}};
    queue *q = queue_new(v, &spec);
    assert_non_null(q);
    vhost_queue_add(v, q);
    return q;
}

/* Takes the head (its body `want`) as a first delivery and returns it. */
static void take_and_return(queue *q, const char *want, queue_return why)
{
    queue_item it;
    assert_true(queue_get(q, &it));
    assert_memory_equal(msg_body(it.m), want, strlen(want));
    it.delivery_count = 1;
    queue_requeue(q, it, why);
    msg_unref(it.m);
}

/* a, b, c published; a fails and waits 50 ms while b and c are taken; then
 * a is back, first again, with its count. */
static void test_queue_holds_then_gives_back(void **state)
{
    (void)state;
    vhost *v = server_vhost(srv, AMQP_CSTR("/"));
    uint8_t buf[128];
    queue *q = retry_queue(v, "retry", buf, sizeof buf);
    const char *bodies[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        msg *m = util_msg(bodies[i]);
        assert_true(queue_publish(q, m, -1));
        msg_unref(m);
    }
    queue_item it;
    take_and_return(q, "a", QUEUE_RETURN_FAILED);
    assert_int_equal(queue_ready_count(q), 2);
    assert_int_equal(queue_delayed_count(q), 1);
    queue_info qi;
    queue_describe(q, &qi);
    assert_int_equal(qi.delayed, 1);
    assert_int_equal(qi.delivery_counts[1], 1); /* held, with its count */
    /* a return that the type does not select is ready at once */
    take_and_return(q, "b", QUEUE_RETURN_RETURNED);
    assert_int_equal(queue_ready_count(q), 2);
    struct timeval wait = {0, 120 * 1000};
    event_base_loopexit(loop_base(admin_loop(srv)), &wait);
    event_base_dispatch(loop_base(admin_loop(srv)));
    assert_int_equal(queue_delayed_count(q), 0);
    assert_int_equal(queue_ready_count(q), 3);
    assert_true(queue_get(q, &it));
    assert_memory_equal(msg_body(it.m), "a", 1);
    assert_int_equal(it.delivery_count, 1);
    msg_unref(it.m);
    /* purge takes the delayed ones too, and counts them */
    take_and_return(q, "b", QUEUE_RETURN_FAILED);
    assert_int_equal(queue_purge(q), 2);
    assert_int_equal(queue_delayed_count(q), 0);
    queue_delete(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delay_rule),
        cmocka_unit_test(test_heap_order),
        cmocka_unit_test(test_queue_holds_then_gives_back),
    };
    return cmocka_run_group_tests_name("broker_delayed", tests, setup, teardown);
}
