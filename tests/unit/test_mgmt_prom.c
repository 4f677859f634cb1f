/* The Prometheus text format writer: label value escaping (quote,
 * backslash, newline, invalid UTF-8 as U+FFFD, valid UTF-8 kept, every
 * byte value), the TYPE/HELP lines, samples with and without labels,
 * number forms, and output larger than the staging buffer. */
#include <event2/buffer.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "../../mgmt-ui/mgmt.h"

typedef struct out {
    struct evbuffer *buf;
    mgmt_prom *w;
} out;

static out open_out(void)
{
    out o = {evbuffer_new(), NULL};
    o.w = mgmt_prom_new(o.buf);
    assert_non_null(o.w);
    return o;
}

/* Frees the writer and returns what it wrote (caller frees). */
static char *close_out(out o)
{
    mgmt_prom_free(o.w);
    size_t n = evbuffer_get_length(o.buf);
    char *s = malloc(n + 1);
    evbuffer_remove(o.buf, s, n);
    s[n] = 0;
    evbuffer_free(o.buf);
    return s;
}

static char *one_label(const char *value, size_t len)
{
    out o = open_out();
    mgmt_prom_begin(o.w, "m");
    mgmt_prom_label(o.w, "queue", (amqp_bytes){(const uint8_t *)value, (uint32_t)len});
    mgmt_prom_uint(o.w, 1);
    return close_out(o);
}

static void test_label_escaping(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t len;
        const char *want;
    } cases[] = {
        {"plain", 5, "m{queue=\"plain\"} 1\n"},
        {"", 0, "m{queue=\"\"} 1\n"},
        {"a\"b", 3, "m{queue=\"a\\\"b\"} 1\n"},
        {"a\\b", 3, "m{queue=\"a\\\\b\"} 1\n"},
        {"a\nb", 3, "m{queue=\"a\\nb\"} 1\n"},
        {"\\n", 2, "m{queue=\"\\\\n\"} 1\n"},      /* a backslash then n, not a newline */
        {"a\tb\r", 4, "m{queue=\"a\tb\r\"} 1\n"},  /* the format escapes only three */
        {"caf\xC3\xA9", 5, "m{queue=\"caf\xC3\xA9\"} 1\n"},
        {"\xF0\x9F\x90\x87", 4, "m{queue=\"\xF0\x9F\x90\x87\"} 1\n"},
        {"\xFF", 1, "m{queue=\"\xEF\xBF\xBD\"} 1\n"},
        {"\xC3", 1, "m{queue=\"\xEF\xBF\xBD\"} 1\n"},         /* truncated sequence */
        {"\xC0\xAF", 2, "m{queue=\"\xEF\xBF\xBD\xEF\xBF\xBD\"} 1\n"}, /* overlong */
        {"\xED\xA0\x80", 3, "m{queue=\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"} 1\n"}, /* surrogate */
        {"a\0b", 3, "m{queue=\"a\0b\"} 1\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = one_label(cases[i].in, cases[i].len);
        size_t want_len = strlen(cases[i].want);
        if (cases[i].len == 3 && cases[i].in[1] == 0) /* the NUL case */
            want_len = sizeof "m{queue=\"a\0b\"} 1\n" - 1;
        if (memcmp(got, cases[i].want, want_len) != 0)
            fail_msg("case %zu: got %s", i, got);
        free(got);
    }
}

/* Every byte value in a label gives a line a parser can split: the value
 * ends at the first unescaped quote and holds no raw newline. */
static void test_every_byte(void **state)
{
    (void)state;
    for (int b = 1; b < 256; b++) { /* NUL: in the table above */
        char in[3] = {'x', (char)b, 'y'};
        char *got = one_label(in, 3);
        const char *v = strchr(got, '"') + 1;
        const char *p = v;
        while (*p && *p != '"')
            p += *p == '\\' ? 2 : 1;
        assert_int_equal(*p, '"');
        assert_string_equal(p, "\"} 1\n");
        assert_null(memchr(v, '\n', (size_t)(p - v)));
        free(got);
    }
}

static void test_lines(void **state)
{
    (void)state;
    out o = open_out();
    mgmt_prom_family(o.w, "rabbitmq_queues", "gauge", "Queues available");
    mgmt_prom_begin(o.w, "rabbitmq_queues");
    mgmt_prom_uint(o.w, 0);
    mgmt_prom_family(o.w, "x", "counter", "back\\slash\nnewline \"quoted\"");
    mgmt_prom_begin(o.w, "x");
    mgmt_prom_label_str(o.w, "protocol", "amqp091");
    mgmt_prom_label_str(o.w, "queue_type", "rabbit_classic_queue");
    mgmt_prom_uint(o.w, UINT64_MAX);
    char *got = close_out(o);
    assert_string_equal(got, "# TYPE rabbitmq_queues gauge\n"
                             "# HELP rabbitmq_queues Queues available\n"
                             "rabbitmq_queues 0\n"
                             "# TYPE x counter\n"
                             "# HELP x back\\\\slash\\nnewline \"quoted\"\n"
                             "x{protocol=\"amqp091\",queue_type=\"rabbit_classic_queue\"} "
                             "18446744073709551615\n");
    free(got);
}

static void test_doubles(void **state)
{
    (void)state;
    static const struct {
        double v;
        const char *want;
    } cases[] = {
        {0.0, "d 0\n"},       {0.312, "d 0.312\n"},  {1.5, "d 1.5\n"},
        {1e-4, "d 0.0001\n"}, {123456.789, "d 123456.789\n"},
        {NAN, "d NaN\n"},     {INFINITY, "d +Inf\n"}, {-INFINITY, "d -Inf\n"},
        {0.1 + 0.2, "d 0.30000000000000004\n"}, /* exact: reads back the same */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        out o = open_out();
        mgmt_prom_begin(o.w, "d");
        mgmt_prom_double(o.w, cases[i].v);
        char *got = close_out(o);
        assert_string_equal(got, cases[i].want);
        free(got);
    }
}

static void test_larger_than_staging(void **state)
{
    (void)state;
    out o = open_out();
    char big[20000];
    memset(big, 'q', sizeof big);
    size_t lines = 3000;
    for (size_t i = 0; i < lines; i++) {
        mgmt_prom_begin(o.w, "rabbitmq_queue_messages");
        mgmt_prom_label(o.w, "queue", (amqp_bytes){(const uint8_t *)big, i == 7 ? sizeof big : 3});
        mgmt_prom_uint(o.w, i);
    }
    size_t written = mgmt_prom_written(o.w);
    char *got = close_out(o);
    assert_int_equal(strlen(got), written);
    size_t n = 0;
    for (const char *p = got; (p = strchr(p, '\n')); p++)
        n++;
    assert_int_equal(n, lines);
    assert_non_null(strstr(got, "rabbitmq_queue_messages{queue=\"qqq\"} 2999\n"));
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label_escaping),
        cmocka_unit_test(test_every_byte),
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_doubles),
        cmocka_unit_test(test_larger_than_staging),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
