/* x-local-random: one random bound queue per message, spread evenly; its
 * bind checks in RabbitMQ 4.0's words (empty key, queues only, classic
 * queues only); unbinding and queue deletion leave the pick to the rest. */
#include "test_route_util.h"

/* Queues from q1000 up are quorum queues. */
static const char *fx_queue_type(void *ctx, const void *q)
{
    return atoi((const char *)q + 1) >= 1000 ? "rabbit_quorum_queue" : NULL;
}

static fixture *rfx_new(void)
{
    static const route_hooks hooks = {.queue_lookup = fx_lookup, .queue_type = fx_queue_type};
    fixture *f = fx_new();

    route_table_free(f->t);
    f->t = route_table_new("/", &hooks, f);
    assert_non_null(f->t);
    return f;
}

static void test_spread(void **state)
{
    enum { N = 4, MSGS = 8000 };
    fixture *f = rfx_new();
    route_exchange *x = fx_declare(f, "x", "x-local-random", false, NO_ARGS);
    int idx[MAX_QUEUES], counts[N] = {0};

    assert_int_equal(fx_route(f, x, "k", NO_ARGS, idx), 0);
    fx_bind(f, "x", QD(f, 7), "", NO_ARGS);
    for (int i = 0; i < 10; i++) { /* one binding: always that queue */
        assert_int_equal(fx_route(f, x, "k", NO_ARGS, idx), 1);
        assert_int_equal(idx[0], 7);
    }
    route_unbind_queue(f->t, Q(f, 7));
    for (int q = 0; q < N; q++)
        fx_bind(f, "x", QD(f, q), "", NO_ARGS);
    for (int i = 0; i < MSGS; i++) {
        assert_int_equal(fx_route(f, x, "same key", NO_ARGS, idx), 1);
        assert_true(idx[0] >= 0 && idx[0] < N);
        counts[idx[0]]++;
    }
    /* expected 2000 each; 1700 is over 7 standard deviations away */
    for (int q = 0; q < N; q++)
        assert_true(counts[q] > 1700 && counts[q] < 2300);
    /* unbound and deleted queues are no longer picked */
    route_unbind(f->t, B("x"), QD(f, 0), B(""), NO_ARGS, AMQP_QUEUE_UNBIND, NULL);
    route_unbind_queue(f->t, Q(f, 1));
    for (int i = 0; i < 200; i++) {
        assert_int_equal(fx_route(f, x, "k", NO_ARGS, idx), 1);
        assert_true(idx[0] == 2 || idx[0] == 3);
    }
    void **qs; /* a CC key routes again: nothing more */
    assert_int_equal(route_message_with(f->t, x, B("cc"), NO_ARGS, NULL, true, &qs), 0);
    fx_free(f);
}

static void test_bind_checks(void **state)
{
    fixture *f = rfx_new();
    route_exchange *d = fx_declare(f, "d", "direct", false, NO_ARGS);
    amqp_error err = {0};

    fx_declare(f, "x", "x-local-random", false, NO_ARGS);
    assert_int_equal(route_bind(f->t, B("x"), QD(f, 1), B("rk"), NO_ARGS, AMQP_QUEUE_BIND, &err),
                     AMQP_ERROR);
    assert_int_equal(err.code, AMQP_PRECONDITION_FAILED);
    assert_string_equal(err.text, "PRECONDITION_FAILED - Non empty binding 'rk' key not permitted");
    assert_int_equal(route_bind(f->t, B("x"), XD(d), B(""), NO_ARGS, AMQP_EXCHANGE_BIND, &err),
                     AMQP_ERROR);
    assert_string_equal(err.text, "PRECONDITION_FAILED - Destination not found");
    assert_int_equal(route_bind(f->t, B("x"), QD(f, 1001), B(""), NO_ARGS, AMQP_QUEUE_BIND, &err),
                     AMQP_ERROR);
    assert_string_equal(err.text, "PRECONDITION_FAILED - Queue type rabbit_quorum_queue not valid "
                                  "for this exchange type");
    assert_int_equal(route_exchange_binding_count(route_exchange_find(f->t, B("x"))), 0);
    tbuf a;
    fx_bind(f, "x", QD(f, 1), "", table(&a, "any=Sthing")); /* arguments are free */
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_bind_checks),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
