/* The management API's streaming JSON writer: escaping of every byte a
 * client may have sent (from a table), structure and commas, the nesting
 * limit, number forms, column selection, and output larger than its
 * staging buffer. Every output is also parsed back with jansson. */
#include <event2/buffer.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../mgmt-ui/mgmt.h"

/* Runs fn on a fresh writer and returns the output (caller frees). */
static char *render(void (*fn)(mgmt_json *w, const void *arg), const void *arg)
{
    struct evbuffer *out = evbuffer_new();
    mgmt_json *w = mgmt_json_new(out);
    fn(w, arg);
    mgmt_json_free(w);
    size_t n = evbuffer_get_length(out);
    char *s = malloc(n + 1);
    evbuffer_remove(out, s, n);
    s[n] = 0;
    evbuffer_free(out);
    return s;
}

static void assert_parses(const char *s)
{
    json_error_t e;
    json_t *v = json_loads(s, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!v)
        fail_msg("not valid JSON (%s): %s", e.text, s);
    json_decref(v);
}

/* ---- escaping ----------------------------------------------------------- */

typedef struct bytes_case {
    const char *what;
    const char *in;
    size_t len;
    const char *out;
} bytes_case;

#define C(what, in, out) {what, in, sizeof in - 1, out}
static const bytes_case escapes[] = {
    C("plain", "orders.q1", "\"orders.q1\""),
    C("empty", "", "\"\""),
    C("quote", "a\"b", "\"a\\\"b\""),
    C("backslash", "a\\b", "\"a\\\\b\""),
    C("newline, return, tab", "\n\r\t", "\"\\n\\r\\t\""),
    C("other controls", "\x01\x1f\b\f", "\"\\u0001\\u001f\\u0008\\u000c\""),
    C("NUL", "a\0b", "\"a\\u0000b\""),
    C("DEL", "\x7f", "\"\\u007f\""),
    C("html", "<img src=x onerror=alert(1)>&", "\"\\u003cimg src=x onerror=alert(1)\\u003e\\u0026\""),
    C("slash stays", "a/b", "\"a/b\""),
    C("2-byte UTF-8", "caf\xc3\xa9", "\"caf\xc3\xa9\""),
    C("3-byte UTF-8", "\xe2\x82\xac", "\"\xe2\x82\xac\""),
    C("4-byte UTF-8", "\xf0\x9f\x90\x87", "\"\xf0\x9f\x90\x87\""),
    C("lone continuation", "a\x80z", "\"a\\ufffdz\""),
    C("0xFF", "\xff\xfe", "\"\\ufffd\\ufffd\""),
    C("overlong 2-byte", "\xc0\xaf", "\"\\ufffd\\ufffd\""),
    C("overlong 3-byte", "\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\""),
    C("surrogate", "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""),
    C("past U+10FFFF", "\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""),
    C("truncated at end", "ok\xe2\x82", "\"ok\\ufffd\\ufffd\""),
    C("truncated before ASCII", "\xe2\x82x", "\"\\ufffd\\ufffdx\""),
};

static void write_bytes(mgmt_json *w, const void *arg)
{
    const bytes_case *c = arg;
    mgmt_json_bytes(w, (amqp_bytes){(const uint8_t *)c->in, (uint32_t)c->len});
}

static void test_escaping(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof escapes / sizeof escapes[0]; i++) {
        char *s = render(write_bytes, &escapes[i]);
        if (strcmp(s, escapes[i].out) != 0)
            fail_msg("%s: got %s, want %s", escapes[i].what, s, escapes[i].out);
        assert_parses(s);
        free(s);
    }
}

/* Every single byte value, and every pair, gives valid JSON. */
static void test_every_byte_gives_valid_json(void **state)
{
    (void)state;
    for (int a = 0; a < 256; a++)
        for (int b = 0; b < 256; b += 7) {
            char in[3] = {(char)a, (char)b, 0};
            bytes_case c = {"pair", in, 2, NULL};
            char *s = render(write_bytes, &c);
            assert_parses(s);
            free(s);
        }
}

/* ---- structure ---------------------------------------------------------- */

static void write_nested(mgmt_json *w, const void *arg)
{
    (void)arg;
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "name", "q");
    mgmt_json_key(w, "list");
    mgmt_json_arr(w);
    mgmt_json_int(w, -1);
    mgmt_json_uint(w, 9223372036854775807ull);
    mgmt_json_bool(w, true);
    mgmt_json_null(w);
    mgmt_json_obj(w);
    mgmt_json_end_obj(w);
    mgmt_json_arr(w);
    mgmt_json_end_arr(w);
    mgmt_json_end_arr(w);
    mgmt_json_kdouble(w, "rate", 0);
    mgmt_json_kdouble(w, "half", 1.5);
    mgmt_json_kdouble(w, "nan", 0.0 / 0.0);
    mgmt_json_kstr(w, "nothing", NULL);
    mgmt_json_end_obj(w);
}

static void test_structure_and_numbers(void **state)
{
    (void)state;
    char *s = render(write_nested, NULL);
    assert_string_equal(s, "{\"name\":\"q\",\"list\":[-1,9223372036854775807,true,null,{},[]],"
                           "\"rate\":0.0,\"half\":1.5,\"nan\":null,\"nothing\":null}");
    assert_parses(s);
    free(s);
}

static void write_extreme_doubles(mgmt_json *w, const void *arg)
{
    (void)arg;
    static const double v[] = {1e308, -1e308, 9.3e18, -9.3e18, 1e15, 5e-324, -0.0};
    mgmt_json_arr(w);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        mgmt_json_double(w, v[i]);
    mgmt_json_end_arr(w);
}

/* Doubles outside int64's range (a client's {"x-arg": 1e308}) are printed,
 * not cast (the cast is undefined; the ASan build traps it). */
static void test_doubles_out_of_int64_range(void **state)
{
    (void)state;
    char *s = render(write_extreme_doubles, NULL);
    assert_string_equal(s, "[1e+308,-1e+308,9.3e+18,-9.3e+18,1e+15,4.94065645841247e-324,0.0]");
    assert_parses(s);
    free(s);
}

static void write_deep(mgmt_json *w, const void *arg)
{
    int n = *(const int *)arg;
    for (int i = 0; i < n; i++)
        mgmt_json_arr(w);
    mgmt_json_int(w, 1);
    for (int i = 0; i < n; i++)
        mgmt_json_end_arr(w);
}

static void test_depth_limit(void **state)
{
    (void)state;
    int n = MGMT_JSON_DEPTH + 10;
    char *s = render(write_deep, &n);
    assert_parses(s);
    /* MGMT_JSON_DEPTH arrays, then null in place of the rest */
    size_t opens = strspn(s, "[");
    assert_int_equal(opens, MGMT_JSON_DEPTH);
    assert_memory_equal(s + opens, "null]", 5);
    free(s);
}

static void write_big(mgmt_json *w, const void *arg)
{
    (void)arg;
    static char big[100000];
    memset(big, 'x', sizeof big);
    big[50000] = '"';
    mgmt_json_arr(w);
    for (int i = 0; i < 3; i++)
        mgmt_json_bytes(w, (amqp_bytes){(const uint8_t *)big, sizeof big});
    mgmt_json_end_arr(w);
    assert_int_equal(mgmt_json_written(w), 3 * (sizeof big + 3) + 2 + 2);
}

static void test_larger_than_the_staging_buffer(void **state)
{
    (void)state;
    char *s = render(write_big, NULL);
    assert_int_equal(strlen(s), 3 * (100000 + 3) + 2 + 2);
    assert_parses(s);
    free(s);
}

/* ---- columns ------------------------------------------------------------ */

static void write_items(mgmt_json *w, const void *arg)
{
    mgmt_json_columns(w, arg, 2);
    mgmt_json_arr(w);
    for (int i = 0; i < 2; i++) {
        mgmt_json_obj(w);
        mgmt_json_kstr(w, "name", i ? "b" : "a");
        mgmt_json_kint(w, "messages", i);
        mgmt_json_key(w, "message_stats");
        mgmt_json_obj(w);
        mgmt_json_kint(w, "publish", 10 + i);
        mgmt_json_key(w, "publish_details");
        mgmt_json_obj(w);
        mgmt_json_kdouble(w, "rate", 0.5);
        mgmt_json_end_obj(w);
        mgmt_json_end_obj(w);
        mgmt_json_key(w, "arguments");
        mgmt_json_obj(w);
        mgmt_json_kint(w, "name", 1); /* same key name one level down */
        mgmt_json_end_obj(w);
        mgmt_json_end_obj(w);
    }
    mgmt_json_end_arr(w);
}

static void test_columns(void **state)
{
    (void)state;
    static const struct { const char *cols, *out; } cases[] = {
        {"name", "[{\"name\":\"a\"},{\"name\":\"b\"}]"},
        {"messages,name", "[{\"name\":\"a\",\"messages\":0},{\"name\":\"b\",\"messages\":1}]"},
        {"message_stats.publish",
         "[{\"message_stats\":{\"publish\":10}},{\"message_stats\":{\"publish\":11}}]"},
        {"message_stats.publish_details",
         "[{\"message_stats\":{\"publish_details\":{\"rate\":0.5}}},"
         "{\"message_stats\":{\"publish_details\":{\"rate\":0.5}}}]"},
        {"arguments", "[{\"arguments\":{\"name\":1}},{\"arguments\":{\"name\":1}}]"},
        {"nosuch", "[{},{}]"},
        {"name,,", "[{\"name\":\"a\"},{\"name\":\"b\"}]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = render(write_items, cases[i].cols);
        if (strcmp(s, cases[i].out) != 0)
            fail_msg("columns=%s: got %s, want %s", cases[i].cols, s, cases[i].out);
        assert_parses(s);
        free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_every_byte_gives_valid_json),
        cmocka_unit_test(test_structure_and_numbers),
        cmocka_unit_test(test_doubles_out_of_int64_range),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_larger_than_the_staging_buffer),
        cmocka_unit_test(test_columns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
