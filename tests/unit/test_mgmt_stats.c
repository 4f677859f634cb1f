/* Statistics as the API writes them (stats_json.c): "samples" are the
 * history the object holds, on the increment's grid, and nothing older --
 * a window longer than the history gets fewer samples, not the oldest one
 * repeated; "avg" and "avg_rate" are over those samples; and the newest
 * two samples give the same rate as "rate" while the sampling is regular,
 * so a chart's latest point and the number beside it agree. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../mgmt-ui/mgmt_int.h"
#include "test_mgmt_util.h"

#define T0 1700000000000ull /* a multiple of the interval */
#define STEP STATS_INTERVAL_MS

typedef struct stat_arg {
    const stats *st;
    uint32_t age_s, incr_s;
} stat_arg;

static void write_stat(mgmt_json *w, const void *arg)
{
    const stat_arg *a = arg;
    mgmt_req r = {.msg_window = {a->age_s, a->incr_s}};
    mgmt_json_obj(w);
    mgmt_stat(&r, w, "publish", a->st->n[STAT_PUBLISH], a->st, STAT_PUBLISH);
    mgmt_json_end_obj(w);
}

/* "publish_details" for the window, parsed; the caller frees it. */
static json_t *render_stat(const stats *st, uint32_t age_s, uint32_t incr_s)
{
    stat_arg a = {st, age_s, incr_s};
    char *s = mgmt_test_render(write_stat, &a);
    json_error_t e;
    json_t *v = json_loads(s, 0, &e);
    if (!v)
        fail_msg("not JSON (%s): %s", e.text, s);
    free(s);
    json_t *d = json_incref(json_object_get(v, "publish_details"));
    json_decref(v);
    assert_non_null(d);
    return d;
}

/* Ticks with the publish counter at each of values[] (oldest first), the
 * first at T0, one interval apart. */
static void tick(stats *st, const uint64_t *values, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        st->n[STAT_PUBLISH] = values[i];
        stats_sample_now(st, NULL, T0 + i * STEP, STATS_OBJECT_SAMPLES);
    }
}

static void assert_samples(const json_t *d, const uint64_t *want, const uint64_t *ts, size_t n)
{
    const json_t *samples = json_object_get(d, "samples");
    char *text = json_dumps(samples, JSON_COMPACT);
    if (json_array_size(samples) != n)
        fail_msg("want %zu samples, got %s", n, text);
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(samples, i);
        if ((uint64_t)json_integer_value(json_object_get(s, "sample")) != want[i] ||
            (uint64_t)json_integer_value(json_object_get(s, "timestamp")) != ts[i])
            fail_msg("sample %zu: want %llu at %llu, got %s", i, (unsigned long long)want[i],
                     (unsigned long long)ts[i], text);
    }
    free(text);
}

static double num(const json_t *d, const char *key)
{
    const json_t *v = json_object_get(d, key);
    assert_true(json_is_number(v));
    return json_number_value(v);
}

static void test_never_active_has_no_samples(void **state)
{
    (void)state;
    stats st = {0};
    json_t *d = render_stat(&st, 600, 5);
    assert_samples(d, NULL, NULL, 0);
    assert_true(num(d, "avg") == 0 && num(d, "avg_rate") == 0 && num(d, "rate") == 0);
    json_decref(d);
}

/* Ten minutes asked, fifteen seconds held: four samples (the zero before
 * the first activity, then three ticks), not 121. */
static void test_a_long_window_gets_only_the_samples_held(void **state)
{
    (void)state;
    stats st = {0};
    tick(&st, (const uint64_t[]){8, 48, 88}, 3);
    json_t *d = render_stat(&st, 600, 5);
    assert_samples(d, (const uint64_t[]){88, 48, 8, 0},
                   (const uint64_t[]){T0 + 2 * STEP, T0 + STEP, T0, T0 - STEP}, 4);
    assert_true(num(d, "avg") == (88 + 48 + 8 + 0) / 4.0);
    assert_true(num(d, "avg_rate") == 88 / 15.0);
    json_decref(d);
    stats_free(&st);
}

/* A full ring: a window of a minute or more gets its 13 samples; a shorter
 * one its own length. */
static void test_window_shorter_and_longer_than_the_ring(void **state)
{
    (void)state;
    stats st = {0};
    uint64_t v[40];
    for (size_t i = 0; i < 40; i++)
        v[i] = 10 * (i + 1);
    tick(&st, v, 40);
    uint64_t want[13], ts[13];
    for (size_t i = 0; i < 13; i++)
        want[i] = v[39 - i], ts[i] = T0 + (39 - i) * STEP;
    json_t *d = render_stat(&st, 600, 5);
    assert_samples(d, want, ts, 13);
    json_decref(d);
    d = render_stat(&st, 60, 5);
    assert_samples(d, want, ts, 13);
    json_decref(d);
    d = render_stat(&st, 20, 5);
    assert_samples(d, want, ts, 5);
    assert_true(num(d, "avg_rate") == (double)(want[0] - want[4]) / 20.0);
    json_decref(d);
    /* an increment of 10 s: every other sample, still only those held */
    d = render_stat(&st, 600, 10);
    uint64_t want10[6], ts10[6];
    size_t n10 = 0;
    for (size_t i = 0; i < 13; i++)
        if (ts[i] % 10000 == 0)
            want10[n10] = want[i], ts10[n10++] = ts[i];
    assert_samples(d, want10, ts10, n10);
    json_decref(d);
    stats_free(&st);
}

/* The newest two samples of a steady flow give "rate": the chart's latest
 * point is the tile's number. */
static void test_newest_samples_agree_with_the_rate(void **state)
{
    (void)state;
    stats st = {0};
    tick(&st, (const uint64_t[]){40, 80, 120, 160}, 4);
    json_t *d = render_stat(&st, 600, 5);
    const json_t *s = json_object_get(d, "samples");
    double a = (double)json_integer_value(json_object_get(json_array_get(s, 0), "sample"));
    double b = (double)json_integer_value(json_object_get(json_array_get(s, 1), "sample"));
    assert_true(num(d, "rate") == 8.0);
    assert_true((a - b) / 5.0 == num(d, "rate"));
    json_decref(d);
    stats_free(&st);
}

/* A tick that missed its slot (the loop was busy): the grid point keeps the
 * newest value not after it, and no timestamp is invented past the ends. */
static void test_a_missed_tick(void **state)
{
    (void)state;
    stats st = {0};
    st.n[STAT_PUBLISH] = 5;
    stats_sample_now(&st, NULL, T0, STATS_OBJECT_SAMPLES);
    st.n[STAT_PUBLISH] = 25;
    stats_sample_now(&st, NULL, T0 + 2 * STEP + 1, STATS_OBJECT_SAMPLES);
    json_t *d = render_stat(&st, 600, 5);
    assert_samples(d, (const uint64_t[]){25, 5, 5, 0},
                   (const uint64_t[]){T0 + 2 * STEP, T0 + STEP, T0, T0 - STEP}, 4);
    json_decref(d);
    stats_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_never_active_has_no_samples),
        cmocka_unit_test(test_a_long_window_gets_only_the_samples_held),
        cmocka_unit_test(test_window_shorter_and_longer_than_the_ring),
        cmocka_unit_test(test_newest_samples_agree_with_the_rate),
        cmocka_unit_test(test_a_missed_tick),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
