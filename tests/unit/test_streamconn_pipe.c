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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_handshake_and_close, setup_any_guest, teardown),
        cmocka_unit_test_setup_teardown(test_pre_open_frame_cap, setup_any_guest, teardown),
        cmocka_unit_test_setup_teardown(test_login_brake, setup_any_guest, teardown),
        cmocka_unit_test_setup_teardown(test_loopback_only_user, setup_loopback_guest, teardown),
    };
    return cmocka_run_group_tests_name("streamconn_pipe", tests, NULL, NULL);
}
