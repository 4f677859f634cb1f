/* Queues and messages without a network: a message routed to N queues is
 * stored once, and queue ordering, requeue and limits behave. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../broker/broker.h"
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
    msg *m = msg_new(AMQP_CSTR("fan"), AMQP_CSTR("k"), (amqp_bytes){no_props, 2}, strlen(body));
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
    size_t before = msg_total_memory();
    msg *m = make_msg("one body, ten queues");
    queue *local[16], **targets;
    size_t n = vhost_route(v, fan, AMQP_CSTR("k"), (amqp_bytes){0}, local, 16, &targets);
    assert_int_equal(n, 10);
    for (size_t i = 0; i < n; i++)
        assert_true(queue_publish(targets[i], m, -1));
    msg_unref(m);
    /* ten queue entries, one stored message */
    assert_int_equal(msg_total_memory() - before, msg_memory(m));
    for (int i = 0; i < 10; i++) {
        assert_int_equal(queue_ready_count(qs[i]), 1);
        queue_item it;
        assert_true(queue_get(qs[i], &it));
        assert_ptr_equal(it.m, m);
        msg_unref(it.m);
        queue_delete(qs[i]);
    }
    assert_int_equal(msg_total_memory(), before);
}

static void test_requeue_goes_to_head_in_order(void **state)
{
    (void)state;
    vhost *v = server_vhost(srv, AMQP_CSTR("/"));
    queue *q = make_queue(v, "order", (amqp_bytes){0});
    msg *ms[3] = {make_msg("1"), make_msg("2"), make_msg("3")};
    for (int i = 0; i < 3; i++) {
        queue_publish(q, ms[i], -1);
        msg_unref(ms[i]);
    }
    queue_item a, b;
    assert_true(queue_get(q, &a));
    assert_true(queue_get(q, &b));
    /* a channel requeues newest first so the old order comes back */
    b.delivery_count = a.delivery_count = 1;
    queue_requeue(q, b);
    queue_requeue(q, a);
    msg_unref(a.m);
    msg_unref(b.m);
    const char *want[3] = {"1", "2", "3"};
    for (int i = 0; i < 3; i++) {
        queue_item it;
        assert_true(queue_get(q, &it));
        assert_memory_equal(msg_body(it.m), want[i], 1);
        assert_int_equal(it.delivery_count, i < 2 ? 1 : 0);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fanout_stores_body_once),
        cmocka_unit_test(test_requeue_goes_to_head_in_order),
        cmocka_unit_test(test_max_length_drop_head_and_reject),
    };
    return cmocka_run_group_tests_name("broker_queue", tests, setup, teardown);
}
