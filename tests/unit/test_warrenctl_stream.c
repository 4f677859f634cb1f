/* add_super_stream's option values as rabbitmq-streams (RabbitMQ 3.13)
 * reads them: sizes with information units, --max-age as an ISO 8601
 * duration. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "../../warrenctl/wctl_internal.h"

static void test_information_units(void **state)
{
    (void)state;
    static const struct { const char *in; unsigned long long out; } ok[] = {
        {"1000", 1000}, {"100gb", 100000000000ull}, {"50mb", 50000000}, {"2k", 2000},
        {"1GiB", 1073741824ull}, {"3Ki", 3072}, {"1TB", 1000000000000ull}, {"7MiB", 7340032},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        unsigned long long v = 0;
        if (!wctl_information_unit(ok[i].in, &v) || v != ok[i].out)
            fail_msg("%s: %llu", ok[i].in, v);
    }
    static const char *const bad[] = {"", "gb", "10 gb", "10xb", "-5", "1.5gb", "999999999999999TB",
                                      "1234567890123456"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned long long v;
        if (wctl_information_unit(bad[i], &v))
            fail_msg("%s accepted", bad[i]);
    }
}

static void test_durations(void **state)
{
    (void)state;
    static const struct { const char *in; unsigned long long secs; } ok[] = {
        {"PT10M30S", 630}, {"P5DT8H", 5 * 86400 + 8 * 3600}, {"P1Y", 365 * 86400ull},
        {"P1M", 30 * 86400}, {"PT1M", 60}, {"P1DT2H", 93600}, {"PT0S", 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        unsigned long long v = 1;
        if (!wctl_iso_duration(ok[i].in, &v) || v != ok[i].secs)
            fail_msg("%s: %llu", ok[i].in, v);
    }
    static const char *const bad[] = {"", "P", "PT", "10h", "P1H", "PT1D", "P1D2Y", "P1.5D", "PT5", "P1DT"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned long long v;
        if (wctl_iso_duration(bad[i], &v))
            fail_msg("%s accepted", bad[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_information_units),
        cmocka_unit_test(test_durations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
