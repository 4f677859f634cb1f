/* Queues and messages without a network: a message routed to N queues is
 * stored once, and queue ordering, requeue and limits behave. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_broker_start.h"
#include "test_broker_util.h"

static queue *make_queue(vhost *v, const char *name, amqp_bytes args)
{
    queue_spec spec = {.name = AMQP_CSTR(name), .arguments = args};
    queue *q = queue_new(v, &spec);
    assert_non_null(q);
    vhost_queue_add(v, q);
    return q;
}

static msg *make_msg(const char *body)
{
    static const uint8_t no_props[2] = {0, 0};
    msg *m = msg_new(test_msgs(), AMQP_CSTR("fan"), AMQP_CSTR("k"), (amqp_bytes){no_props, 2}, strlen(body));
    assert_non_null(m);
    assert_true(msg_append_body(m, (const uint8_t *)body, strlen(body)));
    return m;
}

static void test_fanout_stores_body_once(void **state)
{
    (void)state;
    vhost *v = server_vhost(srv, AMQP_CSTR("/"));
    route_table *rt = vhost_routes(v);
    route_exchange_spec ex = {.name = AMQP_CSTR("fan"), .type = AMQP_CSTR("fanout")};
    amqp_error err;
    route_exchange *fan;
    assert_int_equal(route_exchange_declare(rt, &ex, &fan, &err), AMQP_OK);
    queue *qs[10];
    for (int i = 0; i < 10; i++) {
        char name[16];
        snprintf(name, sizeof name, "fq%d", i);
        qs[i] = make_queue(v, name, (amqp_bytes){0});
        route_dest d = {.queue = qs[i]};
        assert_int_equal(route_bind(rt, AMQP_CSTR("fan"), d, AMQP_CSTR(""), (amqp_bytes){0},
                                    AMQP_QUEUE_BIND, &err),
                         AMQP_OK);
    }
    size_t before = msg_pool_memory(test_msgs());
    msg *m = make_msg("one body, ten queues");
    queue *local[16], **targets;
    size_t n = vhost_route(v, fan, AMQP_CSTR("k"), (amqp_bytes){0}, NULL, local, 16, &targets);
    assert_int_equal(n, 10);
    for (size_t i = 0; i < n; i++)
        assert_true(queue_publish(targets[i], m, -1));
    msg_unref(m);
    /* ten queue entries, one stored message */
    assert_int_equal(msg_pool_memory(test_msgs()) - before, msg_memory(m));
    for (int i = 0; i < 10; i++) {
        assert_int_equal(queue_ready_count(qs[i]), 1);
        queue_item it;
        assert_true(queue_get(qs[i], &it));
        assert_ptr_equal(it.m, m);
        msg_unref(it.m);
        queue_delete(qs[i]);
    }
    assert_int_equal(msg_pool_memory(test_msgs()), before);
}

static void test_requeue_returns_to_its_place(void **state)
{
    (void)state;
    vhost *v = server_vhost(srv, AMQP_CSTR("/"));
    queue *q = make_queue(v, "order", (amqp_bytes){0});
    msg *ms[3] = {make_msg("1"), make_msg("2"), make_msg("3")};
    for (int i = 0; i < 3; i++) {
        queue_publish(q, ms[i], -1);
        msg_unref(ms[i]);
    }
    queue_item a, b, c;
    assert_true(queue_get(q, &a));
    assert_true(queue_get(q, &b));
    assert_true(queue_get(q, &c));
    /* whatever order they come back in, each returns to its place */
    a.delivery_count = b.delivery_count = c.delivery_count = 1;
    queue_requeue(q, b, QUEUE_RETURN_FAILED);
    queue_requeue(q, c, QUEUE_RETURN_FAILED);
    queue_requeue(q, a, QUEUE_RETURN_FAILED);
    msg_unref(a.m);
    msg_unref(b.m);
    msg_unref(c.m);
    msg *m4 = make_msg("4");
    queue_publish(q, m4, -1);
    msg_unref(m4);
    assert_true(queue_get(q, &b)); /* "1" out again, "2" back in front of it */
    assert_true(queue_get(q, &a));
    queue_requeue(q, a, QUEUE_RETURN_FAILED);
    queue_requeue(q, b, QUEUE_RETURN_FAILED);
    msg_unref(a.m);
    msg_unref(b.m);
    const char *want[4] = {"1", "2", "3", "4"};
    for (int i = 0; i < 4; i++) {
        queue_item it;
        assert_true(queue_get(q, &it));
        assert_memory_equal(msg_body(it.m), want[i], 1);
        assert_int_equal(it.delivery_count, i < 3 ? 1 : 0);
        msg_unref(it.m);
    }
    queue_delete(q);
}

static void test_max_length_drop_head_and_reject(void **state)
{
    (void)state;
    vhost *v = server_vhost(srv, AMQP_CSTR("/"));
    uint8_t buf[128];
    amqp_writer w;
    amqp_writer_init(&w, buf, sizeof buf);
    size_t mark = amqp_table_begin(&w);
    amqp_put_field_long(&w, "x-max-length", 2);
    amqp_table_end(&w, mark);
    queue *drop = make_queue(v, "drop", (amqp_bytes){buf + 4, (uint32_t)w.len - 4});
    amqp_put_field_str(&w, "x-overflow", AMQP_CSTR("reject-publish"));
    amqp_table_end(&w, mark);
    queue *reject = make_queue(v, "reject", (amqp_bytes){buf + 4, (uint32_t)w.len - 4});
    for (int i = 0; i < 3; i++) {
        msg *m = make_msg(i == 0 ? "a" : i == 1 ? "b" : "c");
        assert_true(queue_publish(drop, m, -1));
        assert_int_equal(queue_publish(reject, m, -1), i < 2);
        msg_unref(m);
    }
    assert_int_equal(queue_ready_count(drop), 2);
    assert_int_equal(queue_ready_count(reject), 2);
    queue_item it;
    assert_true(queue_get(drop, &it));
    assert_memory_equal(msg_body(it.m), "b", 1); /* "a" was dropped from the head */
    msg_unref(it.m);
    assert_true(queue_get(reject, &it));
    assert_memory_equal(msg_body(it.m), "a", 1); /* "c" was refused */
    msg_unref(it.m);
    queue_delete(drop);
    queue_delete(reject);
}

/* The oldest ready message's enqueue time survives a requeue; the
 * delivery-count buckets follow messages as they are delivered, held,
 * requeued and settled. */
static void test_health_counts(void **state)
{
    (void)state;
    vhost *v = server_vhost(srv, AMQP_CSTR("/"));
    queue *q = make_queue(v, "health", (amqp_bytes){0});
    uint32_t counts[QUEUE_DC_BUCKETS];
    assert_int_equal(queue_oldest_ready_ms(q), 0);
    loop_touch_clock(admin_loop(srv));
    uint64_t t0 = loop_now_ms(admin_loop(srv));
    for (int i = 0; i < 3; i++) {
        msg *m = make_msg("x");
        queue_publish(q, m, -1);
        msg_unref(m);
    }
    uint64_t oldest = queue_oldest_ready_ms(q);
    assert_true(oldest >= t0 && oldest <= loop_now_ms(admin_loop(srv)));
    queue_delivery_counts(q, counts);
    assert_int_equal(counts[0], 3);

    /* delivered twice in all: a requeue after the first, held on the second */
    queue_item it;
    assert_true(queue_get(q, &it));
    assert_int_equal(it.enqueued_at, oldest);
    it.delivery_count = 1;
    queue_requeue(q, it, QUEUE_RETURN_FAILED);
    msg_unref(it.m);
    assert_int_equal(queue_oldest_ready_ms(q), oldest); /* its place and age kept */
    assert_true(queue_get(q, &it));
    it.delivery_count = 2;
    queue_delivery_held(q, it.delivery_count, it.m);
    queue_delivery_counts(q, counts);
    assert_int_equal(counts[0], 2);
    assert_int_equal(counts[2], 1);
    assert_int_equal(queue_unacked_count(q), 1);
    for (uint32_t n = 3; n <= 60; n++) { /* a poison message keeps coming back */
        queue_delivery_settled(q, n - 1, it.m);
        queue_delivery_held(q, n, it.m);
    }
    queue_delivery_counts(q, counts);
    assert_int_equal(counts[QUEUE_DC_BUCKETS - 1], 1);
    assert_int_equal(counts[0] + counts[QUEUE_DC_BUCKETS - 1], 3);
    queue_delivery_settled(q, 60, it.m);
    msg_unref(it.m);
    assert_int_equal(queue_unacked_count(q), 0);
    queue_delivery_counts(q, counts);
    assert_int_equal(counts[QUEUE_DC_BUCKETS - 1], 0);
    queue_delete(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fanout_stores_body_once),
        cmocka_unit_test(test_requeue_returns_to_its_place),
        cmocka_unit_test(test_max_length_drop_head_and_reject),
        cmocka_unit_test(test_health_counts),
    };
    return cmocka_run_group_tests_name("broker_queue", tests, setup, teardown);
}
