/* basic.* through rabbitmq-c: publish/get/consume, properties, acks,
 * requeue, qos, returns, large and empty bodies, and tx. */
#include "harness.h"

static void publish_str(const char *body)
{
    assert_int_equal(itest_publish(itest_conn, 1, "", itest_queue, body, strlen(body), 0, NULL), AMQP_STATUS_OK);
}

static void test_get_round_trip_with_properties(void **state)
{
    (void)state;
    amqp_table_entry_t entries[4];
    entries[0].key = amqp_cstring_bytes("str");
    entries[0].value.kind = AMQP_FIELD_KIND_UTF8;
    entries[0].value.value.bytes = amqp_cstring_bytes("value");
    entries[1].key = amqp_cstring_bytes("i32");
    entries[1].value.kind = AMQP_FIELD_KIND_I32;
    entries[1].value.value.i32 = -123456;
    entries[2].key = amqp_cstring_bytes("i64");
    entries[2].value.kind = AMQP_FIELD_KIND_I64;
    entries[2].value.value.i64 = 1LL << 40;
    entries[3].key = amqp_cstring_bytes("bool");
    entries[3].value.kind = AMQP_FIELD_KIND_BOOLEAN;
    entries[3].value.value.boolean = 1;
    amqp_basic_properties_t p = {0};
    p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_HEADERS_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
               AMQP_BASIC_PRIORITY_FLAG | AMQP_BASIC_CORRELATION_ID_FLAG | AMQP_BASIC_REPLY_TO_FLAG |
               AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_TYPE_FLAG |
               AMQP_BASIC_APP_ID_FLAG;
    p.content_type = amqp_cstring_bytes("text/plain");
    p.headers.num_entries = 4;
    p.headers.entries = entries;
    p.delivery_mode = 2;
    p.priority = 3;
    p.correlation_id = amqp_cstring_bytes("corr");
    p.reply_to = amqp_cstring_bytes("reply");
    p.message_id = amqp_cstring_bytes("id-1");
    p.timestamp = 1700000000;
    p.type = amqp_cstring_bytes("kind");
    p.app_id = amqp_cstring_bytes("itest");
    assert_int_equal(itest_publish(itest_conn, 1, "", itest_queue, "hello", 5, 0, &p), AMQP_STATUS_OK);

    amqp_message_t msg;
    uint64_t tag;
    int redelivered;
    assert_int_equal(itest_get(itest_conn, 1, itest_queue, 1, &msg, &tag, &redelivered), 1);
    assert_int_equal(tag, 1);
    assert_false(redelivered);
    assert_int_equal(msg.body.len, 5);
    assert_memory_equal(msg.body.bytes, "hello", 5);
    amqp_basic_properties_t *g = &msg.properties;
    assert_int_equal(g->_flags, p._flags);
    assert_true(itest_bytes_eq(g->content_type, "text/plain"));
    assert_int_equal(g->delivery_mode, 2);
    assert_int_equal(g->priority, 3);
    assert_true(itest_bytes_eq(g->correlation_id, "corr"));
    assert_true(itest_bytes_eq(g->reply_to, "reply"));
    assert_true(itest_bytes_eq(g->message_id, "id-1"));
    assert_int_equal(g->timestamp, 1700000000);
    assert_true(itest_bytes_eq(g->type, "kind"));
    assert_true(itest_bytes_eq(g->app_id, "itest"));
    assert_int_equal(g->headers.num_entries, 4);
    assert_true(itest_bytes_eq(g->headers.entries[0].value.value.bytes, "value"));
    assert_int_equal(g->headers.entries[1].value.kind, AMQP_FIELD_KIND_I32);
    assert_int_equal(g->headers.entries[1].value.value.i32, -123456);
    assert_int_equal(g->headers.entries[2].value.kind, AMQP_FIELD_KIND_I64);
    assert_int_equal(g->headers.entries[2].value.value.i64, 1LL << 40);
    assert_int_equal(g->headers.entries[3].value.kind, AMQP_FIELD_KIND_BOOLEAN);
    amqp_destroy_message(&msg);
}

static void test_get_empty(void **state)
{
    (void)state;
    amqp_message_t msg;
    assert_int_equal(itest_get(itest_conn, 1, itest_queue, 1, &msg, NULL, NULL), 0);
}

static void test_consume_and_ack(void **state)
{
    (void)state;
    publish_str("one");
    publish_str("two");
    amqp_basic_consume_ok_t *ok =
        amqp_basic_consume(itest_conn, 1, amqp_cstring_bytes(itest_queue), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    itest_assert_ok(amqp_get_rpc_reply(itest_conn), "basic.consume");
    char ctag[256];
    snprintf(ctag, sizeof ctag, "%.*s", (int)ok->consumer_tag.len, (char *)ok->consumer_tag.bytes);
    assert_memory_equal(ctag, "amq.ctag-", 9); /* server-generated */
    assert_true(strlen(ctag) > 9);
    const char *expect[2] = {"one", "two"};
    for (int i = 0; i < 2; i++) {
        amqp_envelope_t env;
        struct timeval tv = {5, 0};
        amqp_maybe_release_buffers(itest_conn);
        itest_assert_ok(amqp_consume_message(itest_conn, &env, &tv, 0), "consume_message");
        assert_int_equal(env.delivery_tag, (uint64_t)i + 1);
        assert_true(itest_bytes_eq(env.routing_key, itest_queue));
        assert_true(itest_bytes_eq(env.consumer_tag, ctag));
        assert_int_equal(env.message.body.len, strlen(expect[i]));
        assert_memory_equal(env.message.body.bytes, expect[i], strlen(expect[i]));
        assert_int_equal(amqp_basic_ack(itest_conn, 1, env.delivery_tag, 0), AMQP_STATUS_OK);
        amqp_destroy_envelope(&env);
    }
    amqp_channel_open(itest_conn, 2);
    itest_assert_ok(amqp_get_rpc_reply(itest_conn), "channel.open");
    assert_int_equal(itest_message_count(itest_conn, 2, itest_queue), 0);
}

static void test_nack_requeue_redelivered(void **state)
{
    (void)state;
    publish_str("a");
    publish_str("b");
    amqp_message_t msg;
    uint64_t tag;
    int redelivered;
    assert_int_equal(itest_get(itest_conn, 1, itest_queue, 0, &msg, &tag, &redelivered), 1);
    amqp_destroy_message(&msg);
    assert_int_equal(amqp_basic_nack(itest_conn, 1, tag, 0, 1), AMQP_STATUS_OK);
    assert_int_equal(itest_get(itest_conn, 1, itest_queue, 1, &msg, &tag, &redelivered), 1);
    assert_true(redelivered);
    assert_memory_equal(msg.body.bytes, "a", 1); /* back at the head */
    amqp_destroy_message(&msg);
}

static void test_reject_without_requeue_drops(void **state)
{
    (void)state;
    publish_str("x");
    amqp_message_t msg;
    uint64_t tag;
    assert_int_equal(itest_get(itest_conn, 1, itest_queue, 0, &msg, &tag, NULL), 1);
    amqp_destroy_message(&msg);
    assert_int_equal(amqp_basic_reject(itest_conn, 1, tag, 0), AMQP_STATUS_OK);
    assert_int_equal(itest_message_count(itest_conn, 1, itest_queue), 0);
}

static void test_ack_multiple(void **state)
{
    (void)state;
    for (int i = 0; i < 4; i++)
        publish_str("m");
    amqp_message_t msg;
    uint64_t tag = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(itest_get(itest_conn, 1, itest_queue, 0, &msg, &tag, NULL), 1);
        amqp_destroy_message(&msg);
    }
    assert_int_equal(tag, 4);
    assert_int_equal(amqp_basic_ack(itest_conn, 1, 3, 1), AMQP_STATUS_OK);
    itest_assert_ok(amqp_channel_close(itest_conn, 1, AMQP_REPLY_SUCCESS), "channel.close");
    itest_open_channel(itest_conn, 2);
    assert_int_equal(itest_wait_message_count(itest_conn, 2, itest_queue, 1, 5000), 1); /* only tag 4 went back */
}

static void test_channel_close_requeues_unacked(void **state)
{
    (void)state;
    publish_str("r");
    itest_open_channel(itest_conn, 2);
    amqp_message_t msg;
    assert_int_equal(itest_get(itest_conn, 2, itest_queue, 0, &msg, NULL, NULL), 1);
    amqp_destroy_message(&msg);
    itest_assert_ok(amqp_channel_close(itest_conn, 2, AMQP_REPLY_SUCCESS), "channel.close");
    assert_int_equal(itest_wait_message_count(itest_conn, 1, itest_queue, 1, 5000), 1);
    int redelivered = 0;
    assert_int_equal(itest_get(itest_conn, 1, itest_queue, 1, &msg, NULL, &redelivered), 1);
    assert_true(redelivered);
    amqp_destroy_message(&msg);
}

static void test_large_message_small_frames(void **state)
{
    (void)state;
    itest_login l = ITEST_DEFAULT_LOGIN;
    l.frame_max = 4096;
    amqp_connection_state_t c = itest_connect_with(&l);
    size_t len = 1 << 20;
    unsigned char *body = malloc(len);
    assert_non_null(body);
    for (size_t i = 0; i < len; i++)
        body[i] = (unsigned char)(i * 7 + (i >> 8));
    assert_int_equal(itest_publish(c, 1, "", itest_queue, body, len, 0, NULL), AMQP_STATUS_OK);
    amqp_message_t msg;
    assert_int_equal(itest_get(c, 1, itest_queue, 1, &msg, NULL, NULL), 1);
    assert_int_equal(msg.body.len, len);
    assert_memory_equal(msg.body.bytes, body, len);
    amqp_destroy_message(&msg);
    free(body);
    itest_disconnect(c);
}

static void test_empty_body(void **state)
{
    (void)state;
    assert_int_equal(itest_publish(itest_conn, 1, "", itest_queue, "", 0, 0, NULL), AMQP_STATUS_OK);
    amqp_message_t msg;
    assert_int_equal(itest_get(itest_conn, 1, itest_queue, 1, &msg, NULL, NULL), 1);
    assert_int_equal(msg.body.len, 0);
    amqp_destroy_message(&msg);
}

static void test_mandatory_unroutable_returned(void **state)
{
    (void)state;
    char missing[128];
    itest_name(missing, sizeof missing, "missing");
    assert_int_equal(itest_publish(itest_conn, 1, "", missing, "ret", 3, 1, NULL), AMQP_STATUS_OK);
    amqp_frame_t f;
    assert_int_equal(itest_wait_frame(itest_conn, &f, 5000), AMQP_STATUS_OK);
    assert_int_equal(f.frame_type, AMQP_FRAME_METHOD);
    assert_int_equal(f.payload.method.id, AMQP_BASIC_RETURN_METHOD);
    amqp_basic_return_t *ret = f.payload.method.decoded;
    assert_int_equal(ret->reply_code, ITEST_NO_ROUTE);
    assert_true(itest_bytes_eq(ret->reply_text, "NO_ROUTE"));
    assert_true(itest_bytes_eq(ret->routing_key, missing));
    amqp_message_t msg;
    itest_assert_ok(amqp_read_message(itest_conn, 1, &msg, 0), "read returned message");
    assert_int_equal(msg.body.len, 3);
    assert_memory_equal(msg.body.bytes, "ret", 3);
    amqp_destroy_message(&msg);
}

static void test_prefetch_limits_deliveries(void **state)
{
    (void)state;
    for (int i = 0; i < 5; i++)
        publish_str("p");
    amqp_basic_qos(itest_conn, 1, 0, 2, 0);
    itest_assert_ok(amqp_get_rpc_reply(itest_conn), "basic.qos");
    amqp_basic_consume(itest_conn, 1, amqp_cstring_bytes(itest_queue), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    itest_assert_ok(amqp_get_rpc_reply(itest_conn), "basic.consume");
    uint64_t tags[3];
    int got = 0;
    for (;;) {
        amqp_envelope_t env;
        struct timeval tv = {0, 500 * 1000};
        amqp_maybe_release_buffers(itest_conn);
        amqp_rpc_reply_t r = amqp_consume_message(itest_conn, &env, &tv, 0);
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT)
            break;
        itest_assert_ok(r, "consume_message");
        assert_true(got < 3);
        tags[got++] = env.delivery_tag;
        amqp_destroy_envelope(&env);
    }
    assert_int_equal(got, 2);
    assert_int_equal(amqp_basic_ack(itest_conn, 1, tags[0], 0), AMQP_STATUS_OK);
    amqp_envelope_t env;
    struct timeval tv = {5, 0};
    itest_assert_ok(amqp_consume_message(itest_conn, &env, &tv, 0), "third delivery after ack");
    assert_int_equal(env.delivery_tag, 3);
    amqp_destroy_envelope(&env);
}

static void test_tx_commit_and_rollback(void **state)
{
    (void)state;
    itest_open_channel(itest_conn, 2);
    amqp_tx_select(itest_conn, 2);
    itest_assert_ok(amqp_get_rpc_reply(itest_conn), "tx.select");
    assert_int_equal(itest_publish(itest_conn, 2, "", itest_queue, "rolled-back", 11, 0, NULL), AMQP_STATUS_OK);
    amqp_tx_rollback(itest_conn, 2);
    itest_assert_ok(amqp_get_rpc_reply(itest_conn), "tx.rollback");
    assert_int_equal(itest_message_count(itest_conn, 1, itest_queue), 0);
    assert_int_equal(itest_publish(itest_conn, 2, "", itest_queue, "committed", 9, 0, NULL), AMQP_STATUS_OK);
    amqp_tx_commit(itest_conn, 2);
    itest_assert_ok(amqp_get_rpc_reply(itest_conn), "tx.commit");
    amqp_message_t msg;
    assert_int_equal(itest_get(itest_conn, 1, itest_queue, 1, &msg, NULL, NULL), 1);
    assert_int_equal(msg.body.len, 9);
    assert_memory_equal(msg.body.bytes, "committed", 9);
    amqp_destroy_message(&msg);
}

static void test_tx_rolled_back_ack_leaves_unacked(void **state)
{
    (void)state;
    publish_str("t");
    itest_assert_ok(itest_sync(itest_conn, 1), "sync");
    itest_open_channel(itest_conn, 2);
    amqp_tx_select(itest_conn, 2);
    itest_assert_ok(amqp_get_rpc_reply(itest_conn), "tx.select");
    amqp_message_t msg;
    uint64_t tag;
    assert_int_equal(itest_get(itest_conn, 2, itest_queue, 0, &msg, &tag, NULL), 1);
    amqp_destroy_message(&msg);
    assert_int_equal(amqp_basic_ack(itest_conn, 2, tag, 0), AMQP_STATUS_OK);
    amqp_tx_rollback(itest_conn, 2);
    itest_assert_ok(amqp_get_rpc_reply(itest_conn), "tx.rollback");
    itest_assert_ok(amqp_channel_close(itest_conn, 2, AMQP_REPLY_SUCCESS), "channel.close");
    assert_int_equal(itest_wait_message_count(itest_conn, 1, itest_queue, 1, 5000), 1); /* the ack never happened */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_Q(test_get_round_trip_with_properties),
        ITEST_Q(test_get_empty),
        ITEST_Q(test_consume_and_ack),
        ITEST_Q(test_nack_requeue_redelivered),
        ITEST_Q(test_reject_without_requeue_drops),
        ITEST_Q(test_ack_multiple),
        ITEST_Q(test_channel_close_requeues_unacked),
        ITEST_Q(test_large_message_small_frames),
        ITEST_Q(test_empty_body),
        ITEST_Q(test_mandatory_unroutable_returned),
        ITEST_Q(test_prefetch_limits_deliveries),
        ITEST_Q(test_tx_commit_and_rollback),
        ITEST_Q(test_tx_rolled_back_ack_leaves_unacked),
    };
    return cmocka_run_group_tests_name("basic", tests, itest_group_setup, itest_group_teardown);
}
