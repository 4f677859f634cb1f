/* x-delayed-message (routing/delay.c): how x-delay is read (the plugin's
 * rabbit_delayed_message_utils:get_delay), which delays hold a message,
 * the declare errors of the plugin's validate/1, and the router's holds:
 * a held message routes nowhere now and does not go to the alternate
 * exchange; one that is not held routes as the x-delayed-type does.
 *
 * Tables are written in the notation of test_route_util.h's table(). */
#include "test_route_util.h"

static const struct {
    const char *headers;
    bool read;
    int64_t delay;
    bool holds;
} delays[] = {
    {"", false, 0, false},
    {"other=I5", false, 0, false},
    {"x-delay=I5000", true, 5000, true},
    {"x-delay=b-1", true, -1, false},
    {"x-delay=B200", true, 200, true},
    {"x-delay=s300", true, 300, true},
    {"x-delay=u300", true, 300, true},
    {"x-delay=i4294967295", true, 4294967295LL, true},
    {"x-delay=l4294967296", true, 4294967296LL, false}, /* past Erlang's longest timer */
    {"x-delay=l0", true, 0, false},
    {"x-delay=l-20", true, -20, false},
    {"x-delay=S1500", true, 1500, true},  /* binary_to_integer */
    {"x-delay=S-7", true, -7, false},
    {"x-delay=S+7", true, 7, true},
    {"x-delay=S", false, 0, false},       /* the plugin crashes: routed here */
    {"x-delay=S12a", false, 0, false},
    {"x-delay=S1.5", false, 0, false},
    {"x-delay=d250.9", true, 250, true},  /* trunc */
    {"x-delay=d-0.5", true, 0, false},
    {"x-delay=f99.99", true, 99, true},
    {"x-delay=t1", false, 0, false},
    {"x-delay=xabc", false, 0, false},
    {"x-delay=D1,15", false, 0, false},   /* trunc of a decimal crashes the plugin */
    {"x-delay=V", false, 0, false},
    {"x-delay=T5", false, 0, false},      /* timestamp: not an integer type of the plugin's */
    {"x-delay=I10 x-delay=I20", true, 10, true}, /* the first, as table_lookup */
};

static void test_delay_of(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof delays / sizeof delays[0]; i++) {
        tbuf t;
        int64_t d = 0;
        amqp_bytes h = table(&t, delays[i].headers);
        bool read = route_delay_of(h, &d);
        if (read != delays[i].read || (read && d != delays[i].delay))
            fail_msg("%s: read %d delay %lld", delays[i].headers, read, (long long)d);
        if (read && route_delay_holds(d) != delays[i].holds)
            fail_msg("%s: holds %d", delays[i].headers, !delays[i].holds);
    }
}

static int declare(fixture *f, const char *name, const char *type, const char *args,
                   amqp_error *err)
{
    tbuf t;
    route_exchange_spec spec = {.name = B(name), .type = B(type), .arguments = table(&t, args)};
    return route_exchange_declare(f->t, &spec, NULL, err);
}

static void test_declare_errors(void **state)
{
    (void)state;
    static const struct {
        const char *args;
        uint16_t code;
        const char *text;
    } cases[] = {
        {"", AMQP_PRECONDITION_FAILED,
         "PRECONDITION_FAILED - Invalid argument, 'x-delayed-type' must be an existing exchange "
         "type"},
        {"x-delayed-type=I1", AMQP_PRECONDITION_FAILED,
         "PRECONDITION_FAILED - Invalid argument, 'x-delayed-type' must be an existing exchange "
         "type"},
        {"x-delayed-type=Sx-delayed-message", AMQP_PRECONDITION_FAILED,
         "PRECONDITION_FAILED - Invalid argument, 'x-delayed-message' can't be used for "
         "'x-delayed-type'"},
        {"x-delayed-type=Sbogus", AMQP_COMMAND_INVALID,
         "COMMAND_INVALID - unknown exchange type 'bogus'"},
    };
    fixture *f = fx_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        amqp_error err;
        assert_int_equal(declare(f, "dx", ROUTE_DELAYED_NAME, cases[i].args, &err), AMQP_ERROR);
        assert_int_equal(err.code, cases[i].code);
        assert_string_equal(err.text, cases[i].text);
        assert_null(route_exchange_find(f->t, B("dx")));
    }
    fx_free(f);
}

static void test_declare_and_redeclare(void **state)
{
    (void)state;
    fixture *f = fx_new();
    amqp_error err;
    assert_int_equal(declare(f, "dx", ROUTE_DELAYED_NAME, "x-delayed-type=Stopic", &err), AMQP_OK);
    route_exchange *ex = route_exchange_find(f->t, B("dx"));
    assert_true(route_exchange_delayed(ex));
    assert_int_equal(route_exchange_type(ex), ROUTE_DELAYED);
    assert_string_equal(route_type_name(route_exchange_type(ex)), "x-delayed-message");
    /* x-delayed-type is not compared; the type is */
    assert_int_equal(declare(f, "dx", ROUTE_DELAYED_NAME, "x-delayed-type=Sdirect", &err), AMQP_OK);
    assert_int_equal(declare(f, "dx", "topic", "", &err), AMQP_ERROR);
    assert_string_equal(err.text, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange "
                                  "'dx' in vhost '/': received 'topic' but current is "
                                  "''x-delayed-message''");
    assert_int_equal(declare(f, "t", "topic", "", &err), AMQP_OK);
    assert_int_equal(declare(f, "t", ROUTE_DELAYED_NAME, "x-delayed-type=Stopic", &err),
                     AMQP_ERROR);
    assert_false(route_exchange_delayed(route_exchange_find(f->t, B("t"))));
    fx_free(f);
}

static void test_router_holds(void **state)
{
    (void)state;
    fixture *f = fx_new();
    amqp_error err;
    tbuf t;
    void **qs;
    size_t n;
    assert_int_equal(declare(f, "ae", "fanout", "", &err), AMQP_OK);
    assert_int_equal(route_bind(f->t, B("ae"), QD(f, 9), B(""), NO_ARGS, 0, &err), AMQP_OK);
    assert_int_equal(declare(f, "dx", ROUTE_DELAYED_NAME,
                             "x-delayed-type=Stopic alternate-exchange=Sae", &err), AMQP_OK);
    route_exchange *dx = route_exchange_find(f->t, B("dx"));
    assert_int_equal(route_bind(f->t, B("dx"), QD(f, 1), B("a.*"), NO_ARGS, 0, &err), AMQP_OK);
    /* a message it holds: no queue, no alternate exchange, one hold */
    assert_int_equal(route_message(f->t, dx, B("a.b"), table(&t, "x-delay=I700"), &qs), 0);
    const route_hold *h = route_held(f->t, &n);
    assert_int_equal(n, 1);
    assert_ptr_equal(h[0].exchange, dx);
    assert_int_equal(h[0].delay_ms, 700);
    /* held once however many routes (CC keys) reach it */
    assert_int_equal(route_message(f->t, dx, B("a.c"), table(&t, "x-delay=I700"), &qs), 0);
    route_held(f->t, &n);
    assert_int_equal(n, 1);
    route_held_clear(f->t);
    /* not held: routed as a topic exchange */
    assert_int_equal(route_message(f->t, dx, B("a.b"), table(&t, "x-delay=I-700"), &qs), 1);
    assert_ptr_equal(qs[0], Q(f, 1));
    route_held(f->t, &n);
    assert_int_equal(n, 0);
    assert_int_equal(route_message(f->t, dx, B("b.a"), NO_ARGS, &qs), 1);
    assert_ptr_equal(qs[0], Q(f, 9)); /* nothing matched: the alternate exchange */
    /* held when reached through an exchange-to-exchange binding too */
    assert_int_equal(declare(f, "src", "direct", "", &err), AMQP_OK);
    assert_int_equal(route_bind(f->t, B("src"), XD(dx), B("k"), NO_ARGS, 0, &err), AMQP_OK);
    assert_int_equal(route_bind(f->t, B("src"), QD(f, 2), B("k"), NO_ARGS, 0, &err), AMQP_OK);
    route_held_clear(f->t);
    assert_int_equal(route_message(f->t, route_exchange_find(f->t, B("src")), B("k"),
                                   table(&t, "x-delay=S50"), &qs), 1);
    assert_ptr_equal(qs[0], Q(f, 2));
    h = route_held(f->t, &n);
    assert_int_equal(n, 1);
    assert_ptr_equal(h[0].exchange, dx);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delay_of),
        cmocka_unit_test(test_declare_errors),
        cmocka_unit_test(test_declare_and_redeclare),
        cmocka_unit_test(test_router_holds),
    };
    return cmocka_run_group_tests_name("route_delay", tests, NULL, NULL);
}
