/* Statistics history: no history for an object never active, the first
 * active sample starts from zero, rates over the last interval, the ring
 * keeping the newest `cap` samples, aligned timestamps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "test_broker_start.h"

#define T0 1700000000000ull /* a multiple of the interval */

static void test_idle_object_keeps_no_history(void **state)
{
    (void)state;
    stats st = {0};
    uint64_t g[3] = {0};
    for (int i = 0; i < 5; i++)
        stats_sample_now(&st, g, T0 + i * STATS_INTERVAL_MS, STATS_OBJECT_SAMPLES);
    assert_null(st.hist);
    assert_true(stats_rate(&st, STAT_PUBLISH) == 0);
    assert_null(stats_sample_at(&st, 0));
}

static void test_first_activity_and_rates(void **state)
{
    (void)state;
    stats st = {0};
    st.n[STAT_PUBLISH] = 50;
    uint64_t g[3] = {10, 10, 0};
    stats_sample_now(&st, g, T0 + 1234, STATS_OBJECT_SAMPLES);
    /* a zero sample one interval before, then this one (timestamps aligned) */
    assert_int_equal(stats_sample_at(&st, 0)->ts_ms, T0);
    assert_int_equal(stats_sample_at(&st, 1)->ts_ms, T0 - STATS_INTERVAL_MS);
    assert_int_equal(stats_sample_at(&st, 1)->v[STAT_PUBLISH], 0);
    assert_true(stats_rate(&st, STAT_PUBLISH) == 10.0); /* 50 in 5 s */
    /* gauges start flat: recovered messages are not a burst */
    assert_true(stats_rate(&st, STAT_MESSAGES) == 0);
    st.n[STAT_PUBLISH] = 75;
    g[0] = 0;
    stats_sample_now(&st, g, T0 + STATS_INTERVAL_MS, STATS_OBJECT_SAMPLES);
    assert_true(stats_rate(&st, STAT_PUBLISH) == 5.0);
    assert_true(stats_rate(&st, STAT_MESSAGES) == -2.0);
    stats_free(&st);
    assert_null(st.hist);
}

static void test_ring_keeps_the_newest(void **state)
{
    (void)state;
    stats st = {0};
    for (int i = 1; i <= 40; i++) {
        st.n[STAT_ACK] = (uint64_t)i;
        stats_sample_now(&st, NULL, T0 + (uint64_t)i * STATS_INTERVAL_MS, STATS_OBJECT_SAMPLES);
    }
    const stats_sample *newest;
    assert_int_equal(stats_samples(&st, &newest, 100), STATS_OBJECT_SAMPLES);
    assert_int_equal(newest->v[STAT_ACK], 40);
    const stats_sample *oldest = stats_sample_at(&st, STATS_OBJECT_SAMPLES - 1);
    assert_int_equal(oldest->v[STAT_ACK], 40 - STATS_OBJECT_SAMPLES + 1);
    assert_null(stats_sample_at(&st, STATS_OBJECT_SAMPLES));
    assert_true(stats_rate(&st, STAT_ACK) == 0.2);
    stats_free(&st);
}

static void test_add(void **state)
{
    (void)state;
    stats a = {0}, b = {0};
    a.n[STAT_CONFIRM] = 2, b.n[STAT_CONFIRM] = 3, b.n[STAT_GET] = 1;
    stats_add(&a, &b);
    assert_int_equal(a.n[STAT_CONFIRM], 5);
    assert_int_equal(a.n[STAT_GET], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_object_keeps_no_history),
        cmocka_unit_test(test_first_activity_and_rates),
        cmocka_unit_test(test_ring_keeps_the_newest),
        cmocka_unit_test(test_add),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
