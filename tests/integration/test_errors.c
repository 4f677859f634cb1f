/* Error codes through rabbitmq-c: each checks the reply code and whether
 * RabbitMQ closes the channel (connection survives) or the connection. */
#include "harness.h"

/* After a channel error: channel 1 is closed, the connection works. */
static void assert_connection_alive(void)
{
    itest_open_channel(itest_conn, 1);
    itest_assert_ok(itest_sync(itest_conn, 1), "connection still usable");
}

static void test_passive_missing_queue_404(void **state)
{
    (void)state;
    char name[128], text[256], want[256];
    itest_name(name, sizeof name, "missing");
    amqp_queue_declare(itest_conn, 1, amqp_cstring_bytes(name), 1, 0, 0, 0, amqp_empty_table);
    itest_expect_channel_close(itest_conn, 1, amqp_get_rpc_reply(itest_conn), ITEST_NOT_FOUND, text, sizeof text);
    snprintf(want, sizeof want, "NOT_FOUND - no queue '%s' in vhost '/'", name);
    assert_string_equal(text, want);
    assert_connection_alive();
}

static void test_exchange_redeclare_other_type_406(void **state)
{
    (void)state;
    char x[128];
    itest_declare_exchange(itest_conn, 1, x, sizeof x, "direct");
    amqp_exchange_declare(itest_conn, 1, amqp_cstring_bytes(x), amqp_cstring_bytes("fanout"), 0, 0, 0, 0,
                          amqp_empty_table);
    itest_expect_channel_close(itest_conn, 1, amqp_get_rpc_reply(itest_conn), ITEST_PRECONDITION_FAILED, NULL, 0);
    assert_connection_alive();
}

static void test_unknown_exchange_type_503(void **state)
{
    (void)state;
    char x[128], text[256];
    itest_name(x, sizeof x, "x");
    itest_track_exchange(x);
    amqp_exchange_declare(itest_conn, 1, amqp_cstring_bytes(x), amqp_cstring_bytes("bogus"), 0, 0, 0, 0,
                          amqp_empty_table);
    itest_expect_connection_close(itest_conn, amqp_get_rpc_reply(itest_conn), ITEST_COMMAND_INVALID, text, sizeof text);
    assert_string_equal(text, "COMMAND_INVALID - unknown exchange type 'bogus'");
    itest_drop(itest_conn);
}

static void test_exclusive_queue_other_connection_405(void **state)
{
    (void)state;
    char q[128];
    itest_declare_queue(itest_conn, 1, q, sizeof q, 1, amqp_empty_table);
    amqp_connection_state_t other = itest_connect();
    amqp_basic_consume(other, 1, amqp_cstring_bytes(q), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    itest_expect_channel_close(other, 1, amqp_get_rpc_reply(other), ITEST_RESOURCE_LOCKED, NULL, 0);
    itest_open_channel(other, 1);
    itest_assert_ok(itest_sync(other, 1), "other connection still usable");
}

static void test_unknown_delivery_tag_406(void **state)
{
    (void)state;
    char text[256];
    assert_int_equal(amqp_basic_ack(itest_conn, 1, 99, 0), AMQP_STATUS_OK);
    itest_expect_channel_close(itest_conn, 1, itest_sync(itest_conn, 1), ITEST_PRECONDITION_FAILED, text, sizeof text);
    assert_string_equal(text, "PRECONDITION_FAILED - unknown delivery tag 99");
    assert_connection_alive();
}

static void test_immediate_540_connection_close(void **state)
{
    (void)state;
    amqp_bytes_t body = {1, "x"};
    assert_int_equal(amqp_basic_publish(itest_conn, 1, amqp_cstring_bytes(""), amqp_cstring_bytes("q"), 0, 1, NULL, body),
                     AMQP_STATUS_OK);
    char text[256];
    itest_expect_connection_close(itest_conn, itest_sync(itest_conn, 1), ITEST_NOT_IMPLEMENTED, text, sizeof text);
    assert_string_equal(text, "NOT_IMPLEMENTED - immediate=true");
    itest_drop(itest_conn);
}

static void test_internal_exchange_publish_403(void **state)
{
    (void)state;
    char x[128];
    itest_name(x, sizeof x, "internal");
    itest_track_exchange(x);
    amqp_exchange_declare(itest_conn, 1, amqp_cstring_bytes(x), amqp_cstring_bytes("fanout"), 0, 0, 0, 1,
                          amqp_empty_table);
    itest_assert_ok(amqp_get_rpc_reply(itest_conn), "exchange.declare internal");
    assert_int_equal(itest_publish(itest_conn, 1, x, "", "x", 1, 0, NULL), AMQP_STATUS_OK);
    itest_expect_channel_close(itest_conn, 1, itest_sync(itest_conn, 1), ITEST_ACCESS_REFUSED, NULL, 0);
    assert_connection_alive();
}

static void test_tx_commit_without_select_406(void **state)
{
    (void)state;
    char text[256];
    amqp_tx_commit(itest_conn, 1);
    itest_expect_channel_close(itest_conn, 1, amqp_get_rpc_reply(itest_conn), ITEST_PRECONDITION_FAILED, text, sizeof text);
    assert_string_equal(text, "PRECONDITION_FAILED - channel is not transactional");
    assert_connection_alive();
}

static void test_duplicate_consumer_tag_530(void **state)
{
    (void)state;
    char q[128];
    itest_declare_queue(itest_conn, 1, q, sizeof q, 0, amqp_empty_table);
    amqp_basic_consume(itest_conn, 1, amqp_cstring_bytes(q), amqp_cstring_bytes("dup"), 0, 0, 0, amqp_empty_table);
    itest_assert_ok(amqp_get_rpc_reply(itest_conn), "first consume");
    amqp_basic_consume(itest_conn, 1, amqp_cstring_bytes(q), amqp_cstring_bytes("dup"), 0, 0, 0, amqp_empty_table);
    itest_expect_connection_close(itest_conn, amqp_get_rpc_reply(itest_conn), ITEST_NOT_ALLOWED, NULL, 0);
    itest_drop(itest_conn);
}

static void test_reserved_amq_prefix_403(void **state)
{
    (void)state;
    char name[160], text[256];
    snprintf(name, sizeof name, "amq.itest-%x", (unsigned)getpid());
    itest_track_exchange(name);
    amqp_exchange_declare(itest_conn, 1, amqp_cstring_bytes(name), amqp_cstring_bytes("direct"), 0, 0, 0, 0,
                          amqp_empty_table);
    itest_expect_channel_close(itest_conn, 1, amqp_get_rpc_reply(itest_conn), ITEST_ACCESS_REFUSED, text, sizeof text);
    assert_non_null(strstr(text, "contains reserved prefix 'amq.*'"));
    assert_connection_alive();
}

static void test_raw_bad_frame_end_501(void **state)
{
    (void)state;
    int fd = itest_raw_connect();
    itest_raw_handshake(fd, "PLAIN", "guest", "guest");
    /* basic.qos(prefetch 1) on channel 0 with frame-end 0x00 instead of 0xCE */
    unsigned char qos[] = {0, 60, 0, 10, 0, 0, 0, 0, 0, 1, 0};
    itest_raw_send_frame(fd, AMQP_FRAME_METHOD, 1, qos, sizeof qos, 0x00);
    itest_raw_expect_connection_close(fd, ITEST_FRAME_ERROR);
    close(fd);
}

static void test_raw_body_without_header_505(void **state)
{
    (void)state;
    int fd = itest_raw_connect();
    itest_raw_handshake(fd, "PLAIN", "guest", "guest");
    amqp_channel_open_t open = {amqp_empty_bytes};
    itest_raw_send_method(fd, 1, AMQP_CHANNEL_OPEN_METHOD, &open);
    itest_frame *f = malloc(sizeof *f);
    itest_raw_expect_method(fd, f, AMQP_CHANNEL_OPEN_OK_METHOD, 5000);
    free(f);
    itest_raw_send_frame(fd, AMQP_FRAME_BODY, 1, "hello", 5, 0xCE);
    itest_raw_expect_connection_close(fd, ITEST_UNEXPECTED_FRAME);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_C(test_passive_missing_queue_404),
        ITEST_C(test_exchange_redeclare_other_type_406),
        ITEST_C(test_unknown_exchange_type_503),
        ITEST_C(test_exclusive_queue_other_connection_405),
        ITEST_C(test_unknown_delivery_tag_406),
        ITEST_C(test_immediate_540_connection_close),
        ITEST_C(test_internal_exchange_publish_403),
        ITEST_C(test_tx_commit_without_select_406),
        ITEST_C(test_duplicate_consumer_tag_530),
        ITEST_C(test_reserved_amq_prefix_403),
        ITEST_C(test_raw_bad_frame_end_501),
        ITEST_C(test_raw_body_without_header_505),
    };
    return cmocka_run_group_tests_name("errors", tests, itest_group_setup, itest_group_teardown);
}
