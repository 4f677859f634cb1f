/* Resource alarms: their configuration keys (RabbitMQ's information units,
 * the strategies, what is refused), the memory measures, and the disk
 * check's alarm and pacing against a real statvfs of the data dir. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../admin/admin.h"

static void test_information_units(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint64_t bytes;
    } ok[] = {
        {"0", 0},
        {"50000000", 50000000},
        {"50MB", 50000000},
        {"50mb", 50000000},
        {"2GB", 2000000000},
        {"700kB", 700000},
        {"1k", 1024},
        {"1K", 1024},
        {"512MiB", 512ull << 20},
        {"512M", 512ull << 20},
        {"2GiB", 2ull << 30},
        {"2G", 2ull << 30},
    };
    char why[200];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 1;
        assert_true(config_parse_bytes(ok[i].text, 0, UINT64_MAX / 2, &v, why, sizeof why));
        assert_int_equal(v, ok[i].bytes);
    }
    static const char *const bad[] = {"", "MB", "-1", "1.5GB", "10 MB", "10TB", "10XB", "0x10",
                                      "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 7;
        assert_false(config_parse_bytes(bad[i], 0, UINT64_MAX / 2, &v, why, sizeof why));
        assert_int_equal(v, 7);
        assert_true(why[0]);
    }
    uint64_t v;
    assert_false(config_parse_bytes("10000000000GB", 0, UINT64_MAX / 2, &v, why, sizeof why));
    assert_false(config_parse_bytes("0", 1, 100, &v, why, sizeof why));
}

static void test_keys_and_defaults(void **state)
{
    (void)state;
    config c;
    char err[300];
    config_defaults(&c);
    assert_int_equal(c.memory_strategy, CONFIG_MEMORY_RSS);
    assert_true(c.memory_paging_ratio == 0.5);
    assert_int_equal(c.disk_free_limit, 50000000);
    assert_true(c.disk_free_limit_relative == 0);
    assert_true(config_set(&c, "disk_free_limit.absolute", "1GB", "t", err, sizeof err));
    assert_int_equal(c.disk_free_limit, 1000000000);
    assert_true(config_set(&c, "disk_free_limit.relative", "1.5", "t", err, sizeof err));
    assert_true(c.disk_free_limit_relative == 1.5);
    assert_true(config_set(&c, "disk_free_limit.absolute", "2GB", "t", err, sizeof err));
    assert_true(c.disk_free_limit_relative == 1.5); /* RabbitMQ: .relative wins when given */
    assert_true(config_set(&c, "vm_memory_calculation_strategy", "allocated", "t", err, sizeof err));
    assert_int_equal(c.memory_strategy, CONFIG_MEMORY_ALLOCATED);
    assert_true(config_set(&c, "vm_memory_calculation_strategy", "erlang", "t", err, sizeof err));
    assert_int_equal(c.memory_strategy, CONFIG_MEMORY_LEGACY);
    assert_true(config_set(&c, "vm_memory_high_watermark_paging_ratio", "0.75", "t", err,
                           sizeof err));
    assert_true(c.memory_paging_ratio == 0.75);
    assert_true(config_set(&c, "vm_memory_high_watermark.absolute", "200MB", "t", err, sizeof err));
    assert_int_equal(c.memory_high_watermark_abs, 200000000);
    assert_true(config_set(&c, "disk_monitor.max_interval", "500", "t", err, sizeof err));
    assert_int_equal(c.disk_check_max_interval_ms, 500);
    static const char *const refused[][2] = {
        {"vm_memory_calculation_strategy", "heap"},
        {"vm_memory_high_watermark_paging_ratio", "1"},
        {"vm_memory_high_watermark_paging_ratio", "0"},
        {"disk_free_limit.absolute", "lots"},
        {"disk_free_limit.relative", "-1"},
        {"disk_monitor.max_interval", "5"},
        {"disk_monitor.max_interval", "1s"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        assert_false(config_set(&c, refused[i][0], refused[i][1], "f.conf:3", err, sizeof err));
        assert_non_null(strstr(err, "f.conf:3: bad value for"));
    }
}

typedef struct seen {
    char strategy[32], paging[32], disk[64];
} seen;

static void collect(void *arg, const char *key, const char *value)
{
    seen *s = arg;
    if (strcmp(key, "vm_memory_calculation_strategy") == 0)
        snprintf(s->strategy, sizeof s->strategy, "%s", value);
    if (strcmp(key, "vm_memory_high_watermark_paging_ratio") == 0)
        snprintf(s->paging, sizeof s->paging, "%s", value);
    if (strncmp(key, "disk_free_limit.", 16) == 0)
        snprintf(s->disk, sizeof s->disk, "%s=%s", key, value);
}

static void test_described(void **state)
{
    (void)state;
    config c;
    char err[300];
    seen s = {0};
    config_defaults(&c);
    config_describe(&c, collect, &s);
    assert_string_equal(s.strategy, "rss");
    assert_string_equal(s.paging, "0.5");
    assert_string_equal(s.disk, "disk_free_limit.absolute=50000000");
    assert_true(config_set(&c, "disk_free_limit.relative", "2", "t", err, sizeof err));
    config_describe(&c, collect, &s);
    assert_string_equal(s.disk, "disk_free_limit.relative=2");
}

static server *server_with(const char *key, const char *value, char *dir)
{
    config c;
    char err[300];
    config_defaults(&c);
    snprintf(c.data_dir, sizeof c.data_dir, "%s", dir);
    if (key)
        assert_true(config_set(&c, key, value, "t", err, sizeof err));
    server *s = server_new(&c);
    assert_non_null(s);
    return s;
}

static void test_memory_measures(void **state)
{
    (void)state;
    char dir[] = "/tmp/warren-alarms-XXXXXX";
    assert_non_null(mkdtemp(dir));
    server *s = server_with(NULL, NULL, dir);
    size_t rss = server_measure_memory(s);
    assert_true(rss > 1u << 20); /* a process with libevent and a loop */
    assert_int_equal(server_memory_used(s), rss);
    assert_false(server_paging(s));
    server_free(s);
    s = server_with("vm_memory_calculation_strategy", "allocated", dir);
    void *volatile big = malloc(8u << 20); /* volatile: the pair is not optimised away */
    memset(big, 1, 8u << 20);
#ifndef __SANITIZE_ADDRESS__ /* mallinfo2 is glibc's; AddressSanitizer's allocator is its own */
    assert_true(server_measure_memory(s) >= 8u << 20);
#else
    server_measure_memory(s);
#endif
    free(big);
    server_free(s);
    s = server_with("vm_memory_calculation_strategy", "legacy", dir);
    assert_int_equal(server_measure_memory(s), 0); /* no message held */
    server_free(s);
    /* below the paging share of the watermark, paging is on; above it the alarm */
    s = server_with("vm_memory_high_watermark.absolute", "1MB", dir);
    assert_int_equal(server_paging_limit(s), 500000);
    server_measure_memory(s);
    assert_true(server_paging(s));
    admin_check_memory(s);
    assert_true(server_memory_alarm(s));
    assert_int_equal(server_alarms(s), SERVER_ALARM_MEMORY);
    server_free(s);
    rmdir(dir);
}

static void test_disk_check(void **state)
{
    (void)state;
    char dir[] = "/tmp/warren-alarms-XXXXXX";
    assert_non_null(mkdtemp(dir));
    server *s = server_with("disk_free_limit.absolute", "0", dir);
    assert_int_equal(admin_check_disk(s), 10000); /* far from the limit: the longest wait */
    assert_true(server_disk_free(s) > 0);
    assert_false(server_disk_alarm(s));
    server_free(s);
    s = server_with("disk_free_limit.absolute", "4000000000GB", dir);
    assert_int_equal(admin_check_disk(s), 100); /* under the limit: soon again */
    assert_true(server_disk_alarm(s));
    assert_int_equal(server_alarms(s), SERVER_ALARM_DISK);
    server_free(s);
    s = server_with("disk_free_limit.relative", "1.0", dir);
    uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    assert_int_equal(server_disk_free_limit(s), ram);
    server_free(s);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_information_units),
        cmocka_unit_test(test_keys_and_defaults),
        cmocka_unit_test(test_described),
        cmocka_unit_test(test_memory_measures),
        cmocka_unit_test(test_disk_check),
    };
    return cmocka_run_group_tests_name("broker_alarms", tests, NULL, NULL);
}
