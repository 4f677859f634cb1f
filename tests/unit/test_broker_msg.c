/* Messages (msg.c): a message being assembled holds memory for the body
 * bytes that arrived, not for the size its header declared; a body that
 * comes in one frame keeps the one-allocation fast path; msg_pool_memory
 * (the memory alarm's measure) counts what is really allocated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_broker_start.h"

static const uint8_t no_props[2] = {0, 0};

static msg *incoming(uint64_t body_size, bool inline_body)
{
    msg *m = msg_new_incoming(test_msgs(), AMQP_CSTR("ex"), AMQP_CSTR("key"), (amqp_bytes){no_props, 2},
                              body_size, inline_body);
    assert_non_null(m);
    return m;
}

/* The content header: 128 MiB declared, nothing sent yet. */
static void test_declared_size_costs_nothing_until_it_arrives(void **state)
{
    (void)state;
    size_t before = msg_pool_memory(test_msgs());
    msg *m = incoming(128u << 20, false);
    assert_true(msg_memory(m) <= 1024);
    assert_int_equal(msg_pool_memory(test_msgs()) - before, msg_memory(m));
    assert_int_equal(msg_body_size(m), 128u << 20);
    assert_false(msg_complete(m));
    msg_unref(m);
    assert_int_equal(msg_pool_memory(test_msgs()), before);
}

/* Memory follows the bytes: at most twice what arrived (plus the first
 * 64 KiB), and the body reads back whole. */
static void test_body_grows_as_bytes_arrive(void **state)
{
    (void)state;
    enum { SIZE = 3000000, FRAME = 131064 };
    static uint8_t data[SIZE];
    for (size_t i = 0; i < SIZE; i++)
        data[i] = (uint8_t)(i * 7 + i / 251);
    size_t before = msg_pool_memory(test_msgs());
    msg *m = incoming(SIZE, false);
    size_t block = msg_memory(m);
    for (size_t off = 0; off < SIZE; off += FRAME) {
        size_t n = SIZE - off < FRAME ? SIZE - off : FRAME;
        assert_true(msg_append_body(m, data + off, n));
        size_t body_mem = msg_memory(m) - block;
        assert_true(body_mem >= off + n);
        assert_true(body_mem <= 2 * (off + n) + 64 * 1024);
        assert_int_equal(msg_pool_memory(test_msgs()) - before, msg_memory(m));
    }
    assert_true(msg_complete(m));
    assert_int_equal(msg_memory(m) - block, SIZE); /* never more room than the body */
    assert_memory_equal(msg_body(m), data, SIZE);
    assert_false(msg_append_body(m, data, 1)); /* past body_size */
    msg_unref(m);
    assert_int_equal(msg_pool_memory(test_msgs()), before);
}

/* One frame, inline: the body is in the message's own (pooled) block, and
 * appending allocates nothing more. */
static void test_one_frame_body_is_inline(void **state)
{
    (void)state;
    msg *m = incoming(100, true);
    size_t mem = msg_memory(m);
    assert_true(mem <= 256);
    assert_ptr_equal(msg_body(m), msg_properties(m).ptr + msg_properties(m).len);
    assert_true(msg_append_body(m, (const uint8_t *)"0123456789", 10));
    assert_true(msg_append_body(m, (const uint8_t *)"x", 0));
    uint8_t rest[90];
    memset(rest, 'r', sizeof rest);
    assert_true(msg_append_body(m, rest, sizeof rest));
    assert_true(msg_complete(m));
    assert_int_equal(msg_memory(m), mem);
    assert_memory_equal(msg_body(m), "0123456789rrr", 13);
    assert_true(amqp_bytes_equal_cstr(msg_exchange(m), "ex"));
    assert_true(amqp_bytes_equal_cstr(msg_routing_key(m), "key"));
    msg_unref(m);
}

/* A message that grew its body can be copied (dead-lettering) and shared. */
static void test_grown_body_copies(void **state)
{
    (void)state;
    msg *m = incoming(5, false);
    assert_true(msg_append_body(m, (const uint8_t *)"he", 2));
    assert_true(msg_append_body(m, (const uint8_t *)"llo", 3));
    msg *c = msg_copy_with(test_msgs(), m, AMQP_CSTR("dlx"), AMQP_CSTR("k2"), (amqp_bytes){no_props, 2});
    assert_non_null(c);
    assert_true(msg_complete(c));
    assert_memory_equal(msg_body(c), "hello", 5);
    msg_ref(m);
    msg_unref(m);
    assert_memory_equal(msg_body(m), "hello", 5);
    msg_unref(m);
    msg_unref(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_declared_size_costs_nothing_until_it_arrives),
        cmocka_unit_test(test_body_grows_as_bytes_arrive),
        cmocka_unit_test(test_one_frame_body_is_inline),
        cmocka_unit_test(test_grown_body_copies),
    };
    return cmocka_run_group_tests_name("broker_msg", tests, NULL, NULL);
}
