/* Stream-protocol connections over an in-memory pipe (no socket, so no
 * address: the client is not loopback): the handshake, loopback_users'
 * own refusal code, the login brake and the pre-Open frame cap. */
#include "test_streamconn_util.h"

static void any_guest(config *c)
{
    c->listeners_none = true;
    c->loopback_none = true;
    c->login_brake_failures = 2; /* not loopback: braked after two refusals */
}

static void guest_loopback_only(config *c) { c->listeners_none = true; }

static int setup_any_guest(void **state)
{
    adjust_config = any_guest;
    return setup(state);
}

static int setup_loopback_guest(void **state)
{
    adjust_config = guest_loopback_only;
    return setup(state);
}

static void test_handshake_and_close(void **state)
{
    (void)state;
    transport *t = sc_connect();
    assert_int_equal(sconn_hub_count(server_stream_hub(srv)), 1);
    sc_handshake(t);
    size_t start;
    sp_buf b = sc_begin(SP_CLOSE, 5, &start);
    sp_put_u16(&b, SP_OK);
    sp_put_str(&b, sc_str("bye"));
    sc_send(t, &b, start);
    sp_frame f;
    assert_int_equal(sc_expect(t, SP_CLOSE | SP_RESPONSE, &f), SP_OK);
    assert_true(sc_closed(t));
    transport_free(t);
    for (int turn = 0; turn < 100 && sconn_hub_count(server_stream_hub(srv)); turn++)
        run_loop();
    assert_int_equal(sconn_hub_count(server_stream_hub(srv)), 0);
}

/* A loopback-only user from elsewhere: RabbitMQ's own code for it. */
static void test_loopback_only_user(void **state)
{
    (void)state;
    transport *t = sc_connect();
    assert_int_equal(sc_authenticate(t, "guest", "guest"), SP_SASL_AUTHENTICATION_FAILURE_LOOPBACK);
    assert_true(sc_closed(t));
    transport_free(t);
}

static void test_login_brake(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) {
        transport *t = sc_connect();
        assert_int_equal(sc_authenticate(t, "guest", "wrong"), SP_AUTHENTICATION_FAILURE);
        assert_true(sc_closed(t));
        transport_free(t);
    }
    transport *t = sc_connect(); /* braked: refused whatever the password */
    assert_int_equal(sc_authenticate(t, "guest", "guest"), SP_AUTHENTICATION_FAILURE);
    transport_free(t);
}

static void test_pre_open_frame_cap(void **state)
{
    (void)state;
    transport *t = sc_connect();
    uint8_t big[SP_SIZE_LEN + SP_PRE_OPEN_FRAME_MAX + 1] = {0, 0, 0x20, 0x01, 0, 0x11, 0, 1};
    transport_write(t, big, 8); /* the size alone is enough to refuse it */
    assert_true(sc_closed(t));
    transport_free(t);
}

static uint16_t request_stream(transport *t, uint16_t key, uint32_t corr, const char *stream)
{
    size_t start;
    sp_buf b = sc_begin(key, corr, &start);
    sp_put_str(&b, sc_str(stream));
    if (key == SP_CREATE)
        sp_put_u32(&b, 0); /* no arguments */
    sc_send(t, &b, start);
    sp_frame f;
    return sc_expect(t, key | SP_RESPONSE, &f);
}

/* Create, a publisher, a confirmed publish, a subscription that gets the
 * chunk as stored, Delete: the whole path over the pipe. */
static void test_publish_and_subscribe(void **state)
{
    (void)state;
    transport *t = sc_connect();
    sc_handshake(t);
    assert_int_equal(request_stream(t, SP_CREATE, 10, "piped"), SP_OK);
    assert_int_equal(request_stream(t, SP_CREATE, 11, "piped"), SP_STREAM_ALREADY_EXISTS);
    size_t start;
    sp_buf b = sc_begin(SP_DECLARE_PUBLISHER, 12, &start);
    sp_put_u8(&b, 3);
    sp_put_str(&b, sc_str("ref"));
    sp_put_str(&b, sc_str("piped"));
    sc_send(t, &b, start);
    sp_frame f;
    assert_int_equal(sc_expect(t, SP_DECLARE_PUBLISHER | SP_RESPONSE, &f), SP_OK);
    b = sc_begin(SP_PUBLISH, 0, &start);
    sp_put_u8(&b, 3);
    sp_put_u32(&b, 2);
    for (uint64_t id = 1; id <= 2; id++) {
        sp_put_u64(&b, id);
        sp_put_bytes(&b, sc_str(id == 1 ? "one" : "two"));
    }
    sc_send(t, &b, start);
    sc_expect(t, SP_PUBLISH_CONFIRM, &f);
    assert_int_equal(f.body[0], 3);
    assert_int_equal(be32(f.body + 1), 2);

    b = sc_begin(SP_SUBSCRIBE, 13, &start);
    sp_put_u8(&b, 1);
    sp_put_str(&b, sc_str("piped"));
    sp_put_u16(&b, SP_OFFSET_FIRST);
    sp_put_u16(&b, 1);
    sc_send(t, &b, start);
    assert_int_equal(sc_expect(t, SP_SUBSCRIBE | SP_RESPONSE, &f), SP_OK);
    sc_expect(t, SP_DELIVER, &f);
    assert_int_equal(f.body[0], 1);
    const uint8_t *chunk = f.body + 1;
    assert_int_equal(be16(chunk + 2), 2);              /* entries */
    assert_int_equal(be32(chunk + 36), 2 * (4 + 3));   /* data length */
    assert_int_equal(f.body_len, 1 + STREAM_CHUNK_HEADER_SIZE + 14);
    assert_memory_equal(chunk + STREAM_CHUNK_HEADER_SIZE, "\0\0\0\3one\0\0\0\3two", 14);

    assert_int_equal(request_stream(t, SP_DELETE, 14, "piped"), SP_OK);
    sc_expect(t, SP_METADATA_UPDATE, &f);
    assert_int_equal(be16(f.body), SP_STREAM_NOT_AVAILABLE);
    transport_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_handshake_and_close, setup_any_guest, teardown),
        cmocka_unit_test_setup_teardown(test_pre_open_frame_cap, setup_any_guest, teardown),
        cmocka_unit_test_setup_teardown(test_login_brake, setup_any_guest, teardown),
        cmocka_unit_test_setup_teardown(test_loopback_only_user, setup_loopback_guest, teardown),
        cmocka_unit_test_setup_teardown(test_publish_and_subscribe, setup_any_guest, teardown),
    };
    return cmocka_run_group_tests_name("streamconn_pipe", tests, NULL, NULL);
}
