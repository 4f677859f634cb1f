/* The login brake (brake.c) without a network: which addresses count as
 * one, failures within a window tripping the brake and only then, its
 * end, a fixed table that keeps braked addresses while others churn
 * through it, and the cap on held connections. Times are plain numbers. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "test_broker_start.h"

static void key_of(const char *addr, uint8_t key[16])
{
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(1234)};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(1234)};
    if (inet_pton(AF_INET, addr, &in.sin_addr) == 1) {
        login_brake_key((struct sockaddr *)&in, key);
        return;
    }
    assert_int_equal(inet_pton(AF_INET6, addr, &in6.sin6_addr), 1);
    login_brake_key((struct sockaddr *)&in6, key);
}

static bool same_key(const char *a, const char *b)
{
    uint8_t ka[16], kb[16];
    key_of(a, ka);
    key_of(b, kb);
    return memcmp(ka, kb, 16) == 0;
}

static void test_keys(void **state)
{
    (void)state;
    assert_true(same_key("192.0.2.7", "::ffff:192.0.2.7")); /* a dual-stack listener */
    assert_false(same_key("192.0.2.7", "192.0.2.8"));
    assert_true(same_key("2001:db8:1:2::1", "2001:db8:1:2:ffff::9")); /* one /64 */
    assert_false(same_key("2001:db8:1:2::1", "2001:db8:1:3::1"));
    assert_false(same_key("::ffff:192.0.2.7", "::ffff:192.0.2.8")); /* mapped: whole */
}

static login_brake *brake(uint32_t failures, uint32_t window, uint32_t duration, uint32_t held)
{
    config c;
    config_defaults(&c);
    c.login_brake_failures = failures;
    c.login_brake_window_ms = window;
    c.login_brake_duration_ms = duration;
    c.login_brake_max_held = held;
    login_brake *b = login_brake_new(&c, 42);
    assert_non_null(b);
    return b;
}

static void test_trips_within_the_window(void **state)
{
    (void)state;
    login_brake *b = brake(3, 1000, 5000, 10);
    uint8_t k[16], other[16];
    key_of("198.51.100.1", k);
    key_of("198.51.100.2", other);
    assert_false(login_brake_failed(b, k, 100));
    assert_false(login_brake_failed(b, k, 600));
    assert_false(login_brake_failed(b, other, 700)); /* another address counts apart */
    assert_int_equal(login_brake_left(b, k, 700), 0);
    assert_true(login_brake_failed(b, k, 1099)); /* the third within 1000 ms of the first */
    assert_int_equal(login_brake_left(b, k, 1099), 5000);
    assert_int_equal(login_brake_left(b, k, 6000), 99);
    assert_int_equal(login_brake_left(b, k, 6099), 0); /* over */
    assert_int_equal(login_brake_left(b, other, 2000), 0);
    /* spread out, failures never trip it: each window starts afresh */
    for (uint64_t t = 10000; t < 20000; t += 600)
        assert_false(login_brake_failed(b, other, t));
    login_brake_free(b);
}

static void test_after_a_brake_counting_starts_again(void **state)
{
    (void)state;
    login_brake *b = brake(2, 60000, 1000, 10);
    uint8_t k[16];
    key_of("2001:db8::5", k);
    assert_false(login_brake_failed(b, k, 0));
    assert_true(login_brake_failed(b, k, 10));
    assert_false(login_brake_failed(b, k, 2000)); /* the brake's failures are gone */
    assert_int_equal(login_brake_left(b, k, 2000), 0);
    assert_true(login_brake_failed(b, k, 2001));
    login_brake_free(b);
}

static void test_off(void **state)
{
    (void)state;
    login_brake *b = brake(0, 60000, 60000, 10);
    uint8_t k[16];
    key_of("203.0.113.9", k);
    for (int i = 0; i < 100; i++)
        assert_false(login_brake_failed(b, k, (uint64_t)i));
    assert_int_equal(login_brake_left(b, k, 100), 0);
    login_brake_free(b);
}

/* 100,000 other addresses failing once each go through the fixed table;
 * the braked ones stay braked (unbraked slots give way first). */
static void test_braked_addresses_survive_churn(void **state)
{
    (void)state;
    login_brake *b = brake(2, 60000, 60000, 10);
    uint8_t braked[4][16];
    for (int i = 0; i < 4; i++) {
        char a[32];
        snprintf(a, sizeof a, "192.0.2.%d", 10 + i);
        key_of(a, braked[i]);
        assert_false(login_brake_failed(b, braked[i], 1));
        assert_true(login_brake_failed(b, braked[i], 2));
    }
    for (uint32_t i = 0; i < 100000; i++) {
        struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a000000u + i)};
        uint8_t k[16];
        login_brake_key((struct sockaddr *)&in, k);
        assert_false(login_brake_failed(b, k, 3 + i / 1000));
    }
    for (int i = 0; i < 4; i++)
        assert_true(login_brake_left(b, braked[i], 1000) > 0);
    login_brake_free(b);
}

static void test_held_cap(void **state)
{
    (void)state;
    login_brake *b = brake(10, 60000, 60000, 2);
    assert_true(login_brake_hold(b));
    assert_true(login_brake_hold(b));
    assert_false(login_brake_hold(b));
    assert_int_equal(login_brake_held(b), 2);
    login_brake_release(b);
    assert_true(login_brake_hold(b));
    login_brake_release(b);
    login_brake_release(b);
    assert_int_equal(login_brake_held(b), 0);
    login_brake_free(b);
}

static void test_settings(void **state)
{
    (void)state;
    config c;
    char err[300];
    config_defaults(&c);
    assert_int_equal(c.login_brake_failures, 10);
    assert_int_equal(c.login_brake_window_ms, 60000);
    assert_int_equal(c.login_brake_duration_ms, 60000);
    assert_int_equal(c.login_brake_max_held, 1000);
    assert_false(c.login_brake_loopback);
    assert_true(config_set(&c, "login_brake.failures", "0", "--set", err, sizeof err));
    assert_true(config_set(&c, "login_brake.loopback", "true", "--set", err, sizeof err));
    assert_true(c.login_brake_loopback);
    assert_false(config_set(&c, "login_brake.window", "0", "x.conf:3", err, sizeof err));
    assert_string_equal(err, "x.conf:3: bad value for 'login_brake.window': 0 is out of range "
                             "1..86400000");
    assert_false(config_set(&c, "login_brake.max_held", "-1", "x.conf:4", err, sizeof err));
    assert_string_equal(err, "x.conf:4: bad value for 'login_brake.max_held': '-1' is not a "
                             "non-negative integer");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_trips_within_the_window),
        cmocka_unit_test(test_after_a_brake_counting_starts_again),
        cmocka_unit_test(test_off),
        cmocka_unit_test(test_braked_addresses_survive_churn),
        cmocka_unit_test(test_held_cap),
        cmocka_unit_test(test_settings),
    };
    return cmocka_run_group_tests_name("broker_brake", tests, NULL, NULL);
}
