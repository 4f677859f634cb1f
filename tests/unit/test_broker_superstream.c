/* conn/superstream.c's pure parts: the stream protocol's arguments as a
 * stream's queue arguments (3.13's stream_queue_arguments and
 * validate_stream_queue_arguments) and the partition names of a super
 * stream (NAME-i or NAME-key, CR and LF removed as enforce_correct_name). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "../../conn/conn.h"

#define B(s) AMQP_CSTR(s)

static bool build(const admin_stream_arg *a, size_t n, bool super, amqp_bytes *out)
{
    static uint8_t buf[512]; /* a test's own, read before the next call */
    return admin_stream_arguments(a, n, super, buf, sizeof buf, out);
}

static void test_arguments_converted(void **state)
{
    (void)state;
    admin_stream_arg a[] = {{B("max-age"), B("7D")}, {B("max-length-bytes"), B("1000")},
                            {B("unknown"), B("x")}, {B("stream-max-segment-size-bytes"), B("500")}};
    amqp_bytes t;
    assert_true(build(a, 4, true, &t));
    amqp_field f;
    int64_t n;
    assert_true(amqp_table_get(t, "x-queue-type", &f) && amqp_bytes_equal_cstr(f.v.bytes, "stream"));
    assert_true(amqp_table_get(t, "x-max-age", &f) && f.type == 'S' && amqp_bytes_equal_cstr(f.v.bytes, "7D"));
    assert_true(amqp_table_get(t, "x-max-length-bytes", &f) && amqp_field_int(&f, &n));
    assert_int_equal(n, 1000);
    assert_true(amqp_table_get(t, "x-stream-max-segment-size-bytes", &f) && amqp_field_int(&f, &n));
    assert_int_equal(n, 500);
    assert_true(amqp_table_get(t, "x-queue-leader-locator", &f) &&
                amqp_bytes_equal_cstr(f.v.bytes, "balanced")); /* a partition's default */
    assert_false(amqp_table_get(t, "unknown", &f) || amqp_table_get(t, "x-unknown", &f));
    /* not a partition: no default locator; a given one stays */
    assert_true(build(a, 1, false, &t));
    assert_false(amqp_table_get(t, "x-queue-leader-locator", &f));
    admin_stream_arg l[] = {{B("queue-leader-locator"), B("client-local")}};
    assert_true(build(l, 1, true, &t));
    assert_true(amqp_table_get(t, "x-queue-leader-locator", &f) &&
                amqp_bytes_equal_cstr(f.v.bytes, "client-local"));
}

static void test_arguments_refused(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"max-length-bytes", "lots"}, {"max-length-bytes", ""}, {"max-length-bytes", "12x"},
        {"max-length-bytes", "99999999999999999999999999999999"},
        {"max-length-bytes", "99999999999999999999"}, {"initial-cluster-size", "0"},
        {"stream-filter-size-bytes", "15"}, {"stream-filter-size-bytes", "256"},
        {"queue-leader-locator", "random"},
    };
    amqp_bytes t;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        admin_stream_arg a = {B(bad[i][0]), B(bad[i][1])};
        if (build(&a, 1, true, &t))
            fail_msg("%s=%s accepted", bad[i][0], bad[i][1]);
    }
    admin_stream_arg ok = {B("stream-filter-size-bytes"), B("16")};
    assert_true(build(&ok, 1, true, &t));
    uint8_t small[8];
    assert_false(admin_stream_arguments(&ok, 1, true, small, sizeof small, &t));
}

static void test_partition_names(void **state)
{
    (void)state;
    char names[3][256];
    admin_super_spec s = {.name = B("orders"), .partitions = 3};
    assert_true(admin_super_stream_names(&s, names, 3));
    assert_string_equal(names[0], "orders-0");
    assert_string_equal(names[2], "orders-2");
    amqp_bytes keys[] = {B("amer"), B("emea")};
    admin_super_spec k = {.name = B("a\r\nb"), .keys = keys, .nkeys = 2};
    assert_true(admin_super_stream_names(&k, names, 2));
    assert_string_equal(names[0], "ab-amer");
    assert_string_equal(names[1], "ab-emea");
    char longname[256];
    memset(longname, 'n', 253);
    longname[253] = 0;
    admin_super_spec l = {.name = B(longname), .partitions = 1};
    assert_true(admin_super_stream_names(&l, names, 1)); /* 253 + "-0" = 255 */
    assert_int_equal(strlen(names[0]), 255);
    amqp_bytes nul[] = {{(const uint8_t *)"a\0b", 3}};
    admin_super_spec n1 = {.name = B("s"), .keys = nul, .nkeys = 1};
    assert_false(admin_super_stream_names(&n1, names, 1));
    admin_super_spec n2 = {.name = {(const uint8_t *)"s\0t", 3}, .partitions = 1};
    assert_false(admin_super_stream_names(&n2, names, 1));
    admin_super_spec l2 = {.name = B(longname), .partitions = 11};
    char many[11][256];
    assert_false(admin_super_stream_names(&l2, many, 11)); /* "-10" passes 255 */
}

static void test_reasons(void **state)
{
    (void)state;
    assert_string_equal(admin_super_reason(ADMIN_SUPER_VALIDATION_FAILED), "validation_failed");
    assert_string_equal(admin_super_reason(ADMIN_SUPER_ALREADY_EXISTS), "reference_already_exists");
    assert_string_equal(admin_super_reason(ADMIN_SUPER_NOT_FOUND), "stream_not_found");
    assert_string_equal(admin_super_reason(ADMIN_SUPER_INTERNAL), "internal_error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arguments_converted),
        cmocka_unit_test(test_arguments_refused),
        cmocka_unit_test(test_partition_names),
        cmocka_unit_test(test_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
