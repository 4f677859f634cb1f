/* Request paths: percent-decoding into segments (%2F vhosts, names with
 * odd bytes), matching against route patterns, and RabbitMQ's binding
 * properties keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "../../mgmt-ui/mgmt.h"

static const struct {
    const char *path;
    int n;              /* -1: refused */
    const char *segs[6]; /* decoded, compared with their lengths below */
    int lens[6];
} decode_cases[] = {
    {"/api/queues/%2F/q", 4, {"api", "queues", "/", "q"}, {3, 6, 1, 1}},
    {"/api/queues/%2f/q", 4, {"api", "queues", "/", "q"}, {3, 6, 1, 1}},
    {"/api/queues/", 2, {"api", "queues"}, {3, 6}},
    {"/api", 1, {"api"}, {3}},
    {"/", 0, {0}, {0}},
    {"", 0, {0}, {0}},
    {"/api/queues/%2F/a%2Fb%20c%25d", 4, {"api", "queues", "/", "a/b c%d"}, {3, 6, 1, 7}},
    {"/api/queues/%2F/a%00b", 4, {"api", "queues", "/", "a\0b"}, {3, 6, 1, 3}},
    {"/api/queues/%2F/%C3%A9%FF", 4, {"api", "queues", "/", "\xc3\xa9\xff"}, {3, 6, 1, 3}},
    {"/api//x", 3, {"api", "", "x"}, {3, 0, 1}},
    {"/api/a+b", 2, {"api", "a+b"}, {3, 3}}, /* '+' is not a space in a path */
    {"/api/%zz", -1, {0}, {0}},
    {"/api/%2", -1, {0}, {0}},
    {"/api/%", -1, {0}, {0}},
    {"/a/b/c/d/e/f/g/h/i/j/k/l/m", -1, {0}, {0}}, /* more than MGMT_PATH_SEGMENTS */
};

static void test_decode(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof decode_cases / sizeof decode_cases[0]; i++) {
        char buf[256];
        amqp_bytes segs[MGMT_PATH_SEGMENTS];
        int n = mgmt_path_decode(decode_cases[i].path, buf, sizeof buf, segs, MGMT_PATH_SEGMENTS);
        if (n != decode_cases[i].n)
            fail_msg("%s: %d segments, want %d", decode_cases[i].path, n, decode_cases[i].n);
        for (int s = 0; s < n; s++) {
            assert_int_equal(segs[s].len, decode_cases[i].lens[s]);
            assert_memory_equal(segs[s].ptr, decode_cases[i].segs[s], segs[s].len);
        }
    }
}

static void test_decode_buffer_limit(void **state)
{
    (void)state;
    char buf[8];
    amqp_bytes segs[4];
    assert_int_equal(mgmt_path_decode("/abcd/efgh", buf, sizeof buf, segs, 4), 2);
    assert_int_equal(mgmt_path_decode("/abcd/efghi", buf, sizeof buf, segs, 4), -1);
}

static void test_match(void **state)
{
    (void)state;
    char buf[256];
    amqp_bytes segs[MGMT_PATH_SEGMENTS], caps[4];
    int ncaps = -1;
    int n = mgmt_path_decode("/api/queues/%2F/my%2Fq/get", buf, sizeof buf, segs, 12);
    assert_true(mgmt_path_match("/api/queues/{}/{}/get", segs, n, caps, &ncaps));
    assert_int_equal(ncaps, 2);
    assert_true(amqp_bytes_equal_cstr(caps[0], "/"));
    assert_true(amqp_bytes_equal_cstr(caps[1], "my/q"));
    assert_false(mgmt_path_match("/api/queues/{}/{}", segs, n, caps, &ncaps));
    assert_false(mgmt_path_match("/api/queues/{}/{}/get/x", segs, n, caps, &ncaps));
    assert_false(mgmt_path_match("/api/exchanges/{}/{}/get", segs, n, caps, &ncaps));
    n = mgmt_path_decode("/api/overview", buf, sizeof buf, segs, 12);
    assert_true(mgmt_path_match("/api/overview", segs, n, caps, &ncaps));
    assert_int_equal(ncaps, 0);
    assert_false(mgmt_path_match("/api/overvie", segs, n, caps, &ncaps));
    /* a literal segment is not a capture: "{}" only as a whole segment */
    n = mgmt_path_decode("/api/%7B%7D", buf, sizeof buf, segs, 12);
    assert_true(mgmt_path_match("/api/{}", segs, n, caps, &ncaps));
    assert_true(amqp_bytes_equal_cstr(caps[0], "{}"));
}

static void test_props_key(void **state)
{
    (void)state;
    static const struct { const char *key, *want; } plain[] = {
        {"", "~"}, {"a.b", "a.b"}, {"a c", "a+c"}, {"a~b", "a%7Eb"}, {"a/b", "a%2Fb"},
        {"orders.#", "orders.%23"}, {"x_y-z", "x_y-z"}, {"\xc3\xa9", "%C3%A9"},
    };
    char out[256];
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        mgmt_props_key(AMQP_CSTR(plain[i].key), (amqp_bytes){0}, out, sizeof out);
        if (strcmp(out, plain[i].want) != 0)
            fail_msg("'%s': got %s, want %s", plain[i].key, out, plain[i].want);
    }
    /* with arguments: "key~" + 6 base64url characters, stable, argument-dependent */
    uint8_t a1[] = {1, 'x', 'l', 0, 0, 0, 0, 0, 0, 0, 1};
    uint8_t a2[] = {1, 'x', 'l', 0, 0, 0, 0, 0, 0, 0, 2};
    char k1[64], k2[64], k1b[64];
    mgmt_props_key(AMQP_CSTR("a.b"), (amqp_bytes){a1, sizeof a1}, k1, sizeof k1);
    mgmt_props_key(AMQP_CSTR("a.b"), (amqp_bytes){a1, sizeof a1}, k1b, sizeof k1b);
    mgmt_props_key(AMQP_CSTR("a.b"), (amqp_bytes){a2, sizeof a2}, k2, sizeof k2);
    assert_string_equal(k1, k1b);
    assert_string_not_equal(k1, k2);
    assert_int_equal(strlen(k1), strlen("a.b~") + 6);
    assert_memory_equal(k1, "a.b~", 4);
    assert_int_equal(strspn(k1 + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"), 6);
    mgmt_props_key(AMQP_CSTR(""), (amqp_bytes){a1, sizeof a1}, out, sizeof out);
    assert_int_equal(out[0], '~');
    assert_int_equal(strlen(out), 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_decode_buffer_limit),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_props_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
