/* Connection tests through rabbitmq-c: login, authentication errors,
 * tuning, capabilities, heartbeats and close. */
#include "harness.h"

static void test_login_plain(void **state)
{
    (void)state;
    amqp_connection_state_t c = itest_connect();
    assert_int_equal(amqp_get_channel_max(c), 2047);
    assert_int_equal(amqp_get_frame_max(c), 131072);
    amqp_rpc_reply_t r = amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    assert_int_equal(r.reply_type, AMQP_RESPONSE_NORMAL);
    itest_drop(c);
}

static void test_login_amqplain_raw(void **state)
{
    (void)state;
    int fd = itest_raw_connect();
    itest_raw_handshake(fd, "AMQPLAIN", "guest", "guest");
    itest_frame *f = malloc(sizeof *f);
    amqp_channel_open_t open = {amqp_empty_bytes};
    itest_raw_send_method(fd, 1, AMQP_CHANNEL_OPEN_METHOD, &open);
    itest_raw_expect_method(fd, f, AMQP_CHANNEL_OPEN_OK_METHOD, 5000);
    assert_int_equal(f->channel, 1);
    free(f);
    close(fd);
}

static void test_bad_password_403(void **state)
{
    (void)state;
    itest_login l = ITEST_DEFAULT_LOGIN;
    l.password = "wrong-password";
    amqp_rpc_reply_t r;
    amqp_connection_state_t c = itest_try_connect(&l, &r);
    assert_non_null(c);
    char text[256];
    itest_expect_connection_close(c, r, ITEST_ACCESS_REFUSED, text, sizeof text);
    assert_string_equal(text, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. "
                              "For details see the broker logfile.");
    itest_drop(c);
}

static void test_unknown_vhost_530(void **state)
{
    (void)state;
    itest_login l = ITEST_DEFAULT_LOGIN;
    l.vhost = "itest-no-such-vhost";
    amqp_rpc_reply_t r;
    amqp_connection_state_t c = itest_try_connect(&l, &r);
    assert_non_null(c);
    char text[256];
    itest_expect_connection_close(c, r, ITEST_NOT_ALLOWED, text, sizeof text);
    assert_string_equal(text, "NOT_ALLOWED - vhost itest-no-such-vhost not found");
    itest_drop(c);
}

static void test_bad_protocol_header(void **state)
{
    (void)state;
    int fd = itest_raw_connect();
    itest_raw_send(fd, "AMQP\x00\x00\x08\x00", 8);
    unsigned char got[8];
    assert_int_equal(itest_raw_read_exact(fd, got, 8, 5000), 8);
    assert_memory_equal(got, "AMQP\x00\x00\x09\x01", 8);
    assert_int_equal(itest_raw_read_exact(fd, got, 1, 5000), 0); /* then EOF */
    close(fd);
}

static const amqp_table_entry_t *find_entry(const amqp_table_t *t, const char *key)
{
    for (int i = 0; i < t->num_entries; i++)
        if (itest_bytes_eq(t->entries[i].key, key))
            return &t->entries[i];
    return NULL;
}

static void test_server_capabilities(void **state)
{
    (void)state;
    static const char *const caps[] = {
        "publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify",
        "connection.blocked", "consumer_priorities", "authentication_failure_close", "per_consumer_qos",
        "direct_reply_to",
    };
    amqp_connection_state_t c = itest_connect();
    const amqp_table_t *props = amqp_get_server_properties(c);
    assert_non_null(props);
    const amqp_table_entry_t *e = find_entry(props, "capabilities");
    assert_non_null(e);
    assert_int_equal(e->value.kind, AMQP_FIELD_KIND_TABLE);
    assert_int_equal(e->value.value.table.num_entries, sizeof caps / sizeof caps[0]);
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        const amqp_table_entry_t *cap = find_entry(&e->value.value.table, caps[i]);
        if (cap == NULL)
            fail_msg("capability %s missing", caps[i]);
        assert_int_equal(cap->value.kind, AMQP_FIELD_KIND_BOOLEAN);
        assert_true(cap->value.value.boolean);
    }
    for (const char *const *k = (const char *const[]){"product", "version", "platform", NULL}; *k; k++)
        assert_non_null(find_entry(props, *k));
    itest_disconnect(c);
}

static void test_tune_lower_limits(void **state)
{
    (void)state;
    itest_login l = ITEST_DEFAULT_LOGIN;
    l.channel_max = 10;
    l.frame_max = 4096;
    amqp_connection_state_t c = itest_connect_with(&l);
    assert_int_equal(amqp_get_channel_max(c), 10);
    assert_int_equal(amqp_get_frame_max(c), 4096);
    char q[128];
    itest_declare_queue(c, 1, q, sizeof q, 1, amqp_empty_table);
    static char body[20000];
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (char)(i * 31);
    assert_int_equal(itest_publish(c, 1, "", q, body, sizeof body, 0, NULL), AMQP_STATUS_OK);
    amqp_message_t msg;
    assert_int_equal(itest_get(c, 1, q, 1, &msg, NULL, NULL), 1);
    assert_int_equal(msg.body.len, sizeof body);
    assert_memory_equal(msg.body.bytes, body, sizeof body);
    amqp_destroy_message(&msg);
    itest_disconnect(c);
}

static void test_channel_max_exceeded_530(void **state)
{
    (void)state;
    itest_login l = ITEST_DEFAULT_LOGIN;
    l.channel_max = 2;
    amqp_connection_state_t c = itest_connect_with(&l); /* channel 1 */
    itest_open_channel(c, 2);
    /* A closed channel frees its slot. (rabbitmq-c refuses numbers above
     * channel_max on its own, so the third channel is opened raw below.) */
    itest_assert_ok(amqp_channel_close(c, 2, AMQP_REPLY_SUCCESS), "channel.close");
    itest_open_channel(c, 2);
    itest_disconnect(c);

    int fd = itest_raw_connect();
    itest_raw_handshake_tuned(fd, "PLAIN", "guest", "guest", 2, 131072, 0);
    amqp_channel_open_t open = {amqp_empty_bytes};
    itest_frame *f = malloc(sizeof *f);
    for (int ch = 1; ch <= 2; ch++) {
        itest_raw_send_method(fd, ch, AMQP_CHANNEL_OPEN_METHOD, &open);
        itest_raw_expect_method(fd, f, AMQP_CHANNEL_OPEN_OK_METHOD, 5000);
    }
    free(f);
    itest_raw_send_method(fd, 3, AMQP_CHANNEL_OPEN_METHOD, &open);
    itest_raw_expect_connection_close(fd, ITEST_NOT_ALLOWED);
    close(fd);
}

static void test_silent_client_disconnected(void **state)
{
    (void)state;
    int fd = itest_raw_connect();
    itest_raw_handshake_tuned(fd, "PLAIN", "guest", "guest", 2047, 131072, 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    itest_frame *f = malloc(sizeof *f);
    int rc;
    /* Read (and ignore) the server's heartbeats; never send ours. */
    while ((rc = itest_raw_read_frame(fd, f, 10000)) == 1)
        assert_int_equal(f->type, AMQP_FRAME_HEARTBEAT);
    free(f);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(rc, 0);
    assert_true(t1.tv_sec - t0.tv_sec >= 1);
    close(fd);
}

static void test_heartbeating_client_stays(void **state)
{
    (void)state;
    itest_login l = ITEST_DEFAULT_LOGIN;
    l.heartbeat = 1;
    amqp_connection_state_t c = itest_connect_with(&l);
    assert_int_equal(amqp_get_heartbeat(c), 1);
    /* Waiting for frames makes rabbitmq-c send its heartbeats. */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        amqp_frame_t frame;
        int rc = itest_wait_frame(c, &frame, 200);
        assert_true(rc == AMQP_STATUS_TIMEOUT || rc == AMQP_STATUS_OK);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - t0.tv_sec < 4);
    itest_assert_ok(itest_sync(c, 1), "rpc after 4 s of heartbeats");
    itest_disconnect(c);
}

static void test_close_then_reconnect(void **state)
{
    (void)state;
    for (int i = 0; i < 5; i++) {
        amqp_connection_state_t c = itest_connect();
        itest_open_channel(c, 2);
        itest_assert_ok(amqp_connection_close(c, AMQP_REPLY_SUCCESS), "connection.close");
        itest_drop(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST(test_login_plain),
        ITEST(test_login_amqplain_raw),
        ITEST(test_bad_password_403),
        ITEST(test_unknown_vhost_530),
        ITEST(test_bad_protocol_header),
        ITEST(test_server_capabilities),
        ITEST(test_tune_lower_limits),
        ITEST(test_channel_max_exceeded_530),
        ITEST(test_silent_client_disconnected),
        ITEST(test_heartbeating_client_stays),
        ITEST(test_close_then_reconnect),
    };
    return cmocka_run_group_tests_name("connection", tests, itest_group_setup, itest_group_teardown);
}
