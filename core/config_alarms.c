/* The resource alarms' configuration keys, as RabbitMQ 3.10 reads them
 * (rabbit.schema): vm_memory_calculation_strategy, vm_memory_high_watermark_
 * paging_ratio, disk_free_limit.absolute / .relative; and Warren's
 * disk_monitor.max_interval. Kept apart from config.c so the keys of one
 * concern are read in one place. The watermark keys themselves stay in
 * config.c's table; their absolute value takes the units parsed here. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

/* RabbitMQ's information units (rabbit_resource_monitor_misc): k/K/kiB/
 * KiB/kib/KIB and the same for M and G are powers of 1024; kB/KB/kb/Kb,
 * MB/mB/mb/Mb, GB/gB/gb/Gb powers of 1000. */
static const struct {
    const char *unit;
    uint64_t factor;
} units[] = {
    {"k", 1ull << 10},   {"K", 1ull << 10},   {"kiB", 1ull << 10}, {"KiB", 1ull << 10},
    {"kib", 1ull << 10}, {"KIB", 1ull << 10}, {"m", 1ull << 20},   {"M", 1ull << 20},
    {"MiB", 1ull << 20}, {"mib", 1ull << 20}, {"MIB", 1ull << 20}, {"g", 1ull << 30},
    {"G", 1ull << 30},   {"GiB", 1ull << 30}, {"gib", 1ull << 30}, {"GIB", 1ull << 30},
    {"kB", 1000},        {"KB", 1000},        {"kb", 1000},        {"Kb", 1000},
    {"MB", 1000000},     {"mB", 1000000},     {"mb", 1000000},     {"Mb", 1000000},
    {"GB", 1000000000},  {"gB", 1000000000},  {"gb", 1000000000},  {"Gb", 1000000000},
};

bool config_parse_bytes(const char *v, uint64_t min, uint64_t max, uint64_t *out, char *why,
                        size_t whylen)
{
    char *end;
    errno = 0;
    unsigned long long n = isdigit((unsigned char)*v) ? strtoull(v, &end, 10) : 0;
    uint64_t factor = 0;
    if (isdigit((unsigned char)*v) && !errno) {
        if (!*end)
            factor = 1;
        for (size_t i = 0; !factor && i < sizeof units / sizeof units[0]; i++)
            if (strcmp(end, units[i].unit) == 0)
                factor = units[i].factor;
    }
    if (!factor) {
        snprintf(why, whylen, "'%s' is not a number of bytes (units: kB MB GB, k M G, kiB MiB GiB)",
                 v);
        return false;
    }
    if (n > max / factor || n * factor < min) {
        snprintf(why, whylen, "%s is out of range %llu..%llu bytes", v, (unsigned long long)min,
                 (unsigned long long)max);
        return false;
    }
    *out = n * factor;
    return true;
}

/* A float in (lo, hi) -- `hi_included` says whether hi itself is taken. */
static bool parse_ratio(const char *v, double lo, double hi, bool hi_included, double *out,
                        char *why, size_t whylen)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x > lo && (x < hi || (hi_included && x == hi)))) {
        snprintf(why, whylen, "'%s' is not a number in (%g, %g%c", v, lo, hi,
                 hi_included ? ']' : ')');
        return false;
    }
    *out = x;
    return true;
}

static const char *const strategies[] = {"rss", "allocated", "legacy"};

static bool set_strategy(config *c, const char *v, char *why, size_t n)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(v, strategies[i]) == 0) {
            c->memory_strategy = (config_memory_strategy)i;
            return true;
        }
    if (strcmp(v, "erlang") == 0) { /* RabbitMQ's alias of legacy */
        c->memory_strategy = CONFIG_MEMORY_LEGACY;
        return true;
    }
    snprintf(why, n, "'%s' is not one of rss, allocated, legacy, erlang", v);
    return false;
}

int config_set_alarm_key(config *c, const char *key, const char *value, char *why, size_t n)
{
    if (strcmp(key, "vm_memory_calculation_strategy") == 0)
        return set_strategy(c, value, why, n);
    if (strcmp(key, "vm_memory_high_watermark_paging_ratio") == 0) /* RabbitMQ: below 1 */
        return parse_ratio(value, 0, 1, false, &c->memory_paging_ratio, why, n);
    if (strcmp(key, "disk_free_limit.absolute") == 0)
        return config_parse_bytes(value, 0, UINT64_MAX / 2, &c->disk_free_limit, why, n);
    if (strcmp(key, "disk_free_limit.relative") == 0) /* RabbitMQ: .relative wins when given */
        return parse_ratio(value, 0, 100, true, &c->disk_free_limit_relative, why, n);
    if (strcmp(key, "disk_monitor.max_interval") == 0) {
        char *end;
        errno = 0;
        unsigned long long ms = isdigit((unsigned char)*value) ? strtoull(value, &end, 10) : 0;
        if (!ms || errno || *end || ms < 10 || ms > 3600000) {
            snprintf(why, n, "'%s' is not a number of milliseconds in 10..3600000", value);
            return 0;
        }
        c->disk_check_max_interval_ms = (uint32_t)ms;
        return 1;
    }
    return -1;
}

void config_alarm_defaults(config *c)
{
    c->memory_strategy = CONFIG_MEMORY_RSS;
    c->memory_paging_ratio = 0.5;
    c->disk_free_limit = 50000000; /* RabbitMQ's 50 MB */
    c->disk_check_max_interval_ms = 10000;
}

void config_describe_alarms(const config *c,
                            void (*fn)(void *arg, const char *key, const char *value), void *arg)
{
    char b[64];
    fn(arg, "vm_memory_calculation_strategy", strategies[c->memory_strategy]);
    snprintf(b, sizeof b, "%g", c->memory_paging_ratio);
    fn(arg, "vm_memory_high_watermark_paging_ratio", b);
    if (c->disk_free_limit_relative > 0) {
        snprintf(b, sizeof b, "%g", c->disk_free_limit_relative);
        fn(arg, "disk_free_limit.relative", b);
    } else {
        snprintf(b, sizeof b, "%llu", (unsigned long long)c->disk_free_limit);
        fn(arg, "disk_free_limit.absolute", b);
    }
    snprintf(b, sizeof b, "%u", c->disk_check_max_interval_ms);
    fn(arg, "disk_monitor.max_interval", b);
}
