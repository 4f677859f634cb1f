/* Publisher confirms through rabbitmq-c. */
#include "harness.h"

static void select_confirms(amqp_channel_t ch)
{
    amqp_confirm_select(itest_conn, ch);
    itest_assert_ok(amqp_get_rpc_reply(itest_conn), "confirm.select");
}

/* Reads acks/nacks until every tag <= upto is confirmed; marks each
 * confirmed tag in seen[] (1 ack, 2 nack) and fails on duplicates.
 * Returns how many confirm frames had multiple=true. */
static int read_confirms(uint64_t upto, unsigned char *seen)
{
    uint64_t covered = 0;
    int multiples = 0;
    while (covered < upto) {
        amqp_frame_t f;
        int rc = itest_wait_frame(itest_conn, &f, 5000);
        if (rc != AMQP_STATUS_OK)
            fail_msg("waiting for confirms up to %llu (have %llu): %s", (unsigned long long)upto,
                     (unsigned long long)covered, amqp_error_string2(rc));
        if (f.frame_type != AMQP_FRAME_METHOD)
            continue;
        uint64_t tag = 0;
        int multiple = 0, kind = 0;
        if (f.payload.method.id == AMQP_BASIC_ACK_METHOD) {
            amqp_basic_ack_t *a = f.payload.method.decoded;
            tag = a->delivery_tag, multiple = a->multiple, kind = 1;
        } else if (f.payload.method.id == AMQP_BASIC_NACK_METHOD) {
            amqp_basic_nack_t *n = f.payload.method.decoded;
            tag = n->delivery_tag, multiple = n->multiple, kind = 2;
        } else {
            fail_msg("unexpected method %s while waiting for confirms", amqp_method_name(f.payload.method.id));
        }
        assert_true(tag > covered && tag <= upto);
        for (uint64_t t = multiple ? covered + 1 : tag; t <= tag; t++) {
            assert_int_equal(seen[t], 0);
            seen[t] = (unsigned char)kind;
        }
        multiples += multiple;
        covered = tag;
    }
    return multiples;
}

static void test_acks_sequential_tags(void **state)
{
    (void)state;
    select_confirms(1);
    unsigned char seen[4] = {0};
    for (int i = 1; i <= 3; i++) {
        assert_int_equal(itest_publish(itest_conn, 1, "", itest_queue, "m", 1, 0, NULL), AMQP_STATUS_OK);
        read_confirms((uint64_t)i, seen);
        assert_int_equal(seen[i], 1);
    }
}

static void test_burst_each_tag_acked_once(void **state)
{
    (void)state;
    enum { N = 1000 };
    static unsigned char seen[N + 1];
    memset(seen, 0, sizeof seen);
    select_confirms(1);
    for (int i = 0; i < N; i++)
        assert_int_equal(itest_publish(itest_conn, 1, "", itest_queue, "b", 1, 0, NULL), AMQP_STATUS_OK);
    int multiples = read_confirms(N, seen);
    for (int i = 1; i <= N; i++)
        assert_int_equal(seen[i], 1);
    assert_true(multiples > 0); /* RabbitMQ batches the confirms of a burst */
    assert_int_equal(itest_message_count(itest_conn, 1, itest_queue), N);
}

static void test_unroutable_mandatory_return_then_ack(void **state)
{
    (void)state;
    char missing[128];
    itest_name(missing, sizeof missing, "missing");
    select_confirms(1);
    assert_int_equal(itest_publish(itest_conn, 1, "", missing, "m", 1, 1, NULL), AMQP_STATUS_OK);
    amqp_frame_t f;
    assert_int_equal(itest_wait_frame(itest_conn, &f, 5000), AMQP_STATUS_OK);
    assert_int_equal(f.payload.method.id, AMQP_BASIC_RETURN_METHOD);
    amqp_message_t msg;
    itest_assert_ok(amqp_read_message(itest_conn, 1, &msg, 0), "returned content");
    amqp_destroy_message(&msg);
    unsigned char seen[2] = {0};
    read_confirms(1, seen);
    assert_int_equal(seen[1], 1);
}

static void test_publish_before_select_not_counted(void **state)
{
    (void)state;
    assert_int_equal(itest_publish(itest_conn, 1, "", itest_queue, "early", 5, 0, NULL), AMQP_STATUS_OK);
    select_confirms(1);
    assert_int_equal(itest_publish(itest_conn, 1, "", itest_queue, "late", 4, 0, NULL), AMQP_STATUS_OK);
    unsigned char seen[2] = {0};
    read_confirms(1, seen); /* the first confirmed publish has tag 1 */
    assert_int_equal(seen[1], 1);
    assert_int_equal(itest_message_count(itest_conn, 1, itest_queue), 2);
}

static void test_reject_publish_nacked(void **state)
{
    (void)state;
    char q[128];
    amqp_table_entry_t args[2];
    args[0].key = amqp_cstring_bytes("x-max-length");
    args[0].value.kind = AMQP_FIELD_KIND_I32;
    args[0].value.value.i32 = 1;
    args[1].key = amqp_cstring_bytes("x-overflow");
    args[1].value.kind = AMQP_FIELD_KIND_UTF8;
    args[1].value.value.bytes = amqp_cstring_bytes("reject-publish");
    amqp_table_t table = {2, args};
    itest_declare_queue(itest_conn, 1, q, sizeof q, 0, table);
    select_confirms(1);
    for (int i = 0; i < 2; i++)
        assert_int_equal(itest_publish(itest_conn, 1, "", q, "x", 1, 0, NULL), AMQP_STATUS_OK);
    unsigned char seen[3] = {0};
    read_confirms(2, seen);
    assert_int_equal(seen[1], 1);
    assert_int_equal(seen[2], 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_Q(test_acks_sequential_tags),
        ITEST_Q(test_burst_each_tag_acked_once),
        ITEST_Q(test_unroutable_mandatory_return_then_ack),
        ITEST_Q(test_publish_before_select_not_counted),
        ITEST_Q(test_reject_publish_nacked),
    };
    return cmocka_run_group_tests_name("confirm", tests, itest_group_setup, itest_group_teardown);
}
