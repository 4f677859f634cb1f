/* Configuration parsing: defaults, overrides, and errors that name the file,
 * the line and the reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../broker/broker.h"

static char *write_temp(const char *text)
{
    static char path[64];
    strcpy(path, "/tmp/warren-conf-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_defaults_match_rabbitmq(void **state)
{
    (void)state;
    config c;
    config_defaults(&c);
    assert_int_equal(c.listen_port, 5672);
    assert_string_equal(c.listen_host, "0.0.0.0");
    assert_int_equal(c.heartbeat, 60);
    assert_int_equal(c.frame_max, 131072);
    assert_int_equal(c.channel_max, 2047);
    assert_int_equal(c.max_message_size, 128u << 20);
    assert_string_equal(c.default_user, "guest");
    assert_int_equal(c.consumer_timeout_ms, 1800000);
    assert_false(c.consumer_timeout_close_channel);
    assert_true(config_loopback_only(&c, "guest"));
    assert_false(config_loopback_only(&c, "alice"));
}

static void test_file_is_read(void **state)
{
    (void)state;
    config c;
    char err[256];
    config_defaults(&c);
    char *path = write_temp("# comment\n\nlisteners.tcp.default = 127.0.0.1:0\n"
                            "heartbeat = 5  # trailing comment\nloopback_users = none\n"
                            "log.level = debug\n");
    assert_true(config_load_file(&c, path, err, sizeof err));
    unlink(path);
    assert_string_equal(c.listen_host, "127.0.0.1");
    assert_int_equal(c.listen_port, 0);
    assert_int_equal(c.heartbeat, 5);
    assert_false(config_loopback_only(&c, "guest"));
    assert_int_equal(c.log_level, LOG_DEBUG);
}

static void expect_file_error(const char *text, const char *needle)
{
    config c;
    char err[512], want[600];
    config_defaults(&c);
    char *path = write_temp(text);
    assert_false(config_load_file(&c, path, err, sizeof err));
    snprintf(want, sizeof want, "%s:%s", path, needle);
    unlink(path);
    if (!strstr(err, want))
        fail_msg("error '%s' does not contain '%s'", err, want);
}

static void test_errors_name_file_line_and_reason(void **state)
{
    (void)state;
    expect_file_error("heartbeat = 60\nno_such_key = 1\n", "2: unknown key 'no_such_key'");
    expect_file_error("frame_max = 100\n", "1: bad value for 'frame_max'");
    expect_file_error("\n\nheartbeat = -1\n", "3: bad value for 'heartbeat'");
    expect_file_error("channel_max = 70000\n", "1: bad value for 'channel_max'");
    expect_file_error("log.level = loud\n", "1: bad value for 'log.level'");
    expect_file_error("just words\n", "1: expected 'key = value'");
    expect_file_error("listeners.tcp.default = host:port\n", "1: bad value");
}

static void test_set_overrides(void **state)
{
    (void)state;
    config c;
    char err[256];
    config_defaults(&c);
    assert_true(config_set(&c, "listeners.tcp.default", "[::1]:5673", "--set", err, sizeof err));
    assert_string_equal(c.listen_host, "::1");
    assert_int_equal(c.listen_port, 5673);
    assert_true(config_set(&c, "data_dir", "/tmp/x", "--set", err, sizeof err));
    assert_string_equal(c.data_dir, "/tmp/x");
    assert_false(config_set(&c, "max_message_size", "0", "--set", err, sizeof err));
    assert_non_null(strstr(err, "--set: bad value for 'max_message_size'"));
    assert_true(config_set(&c, "consumer_timeout", "0", "--set", err, sizeof err));
    assert_int_equal(c.consumer_timeout_ms, 0);
    assert_true(config_set(&c, "consumer_timeout.action", "close_channel", "--set", err, sizeof err));
    assert_true(c.consumer_timeout_close_channel);
    assert_true(config_set(&c, "consumer_timeout.action", "cancel_consumer", "--set", err, sizeof err));
    assert_false(c.consumer_timeout_close_channel);
    assert_false(config_set(&c, "consumer_timeout.action", "kill", "--set", err, sizeof err));
}

static bool set(config *c, const char *key, const char *value)
{
    char err[300];
    return config_set(c, key, value, "--set", err, sizeof err);
}

/* RabbitMQ's loopback_users: guest alone by default; the first
 * loopback_users.<name> key replaces that default; "none" empties the list
 * whatever else is set. */
static void test_loopback_users(void **state)
{
    (void)state;
    config c;
    char err[300];

    config_defaults(&c);
    assert_true(set(&c, "loopback_users.alice", "true"));
    assert_true(config_loopback_only(&c, "alice"));
    assert_false(config_loopback_only(&c, "guest")); /* the default was replaced */
    assert_true(set(&c, "loopback_users.guest", "true"));
    assert_true(set(&c, "loopback_users.bob", "true"));
    assert_true(set(&c, "loopback_users.alice", "false"));
    assert_false(config_loopback_only(&c, "alice"));
    assert_true(config_loopback_only(&c, "guest"));
    assert_true(config_loopback_only(&c, "bob"));
    assert_true(set(&c, "loopback_users.bob", "true")); /* twice is once */
    assert_true(set(&c, "loopback_users.bob", "false"));
    assert_false(config_loopback_only(&c, "bob"));

    config_defaults(&c);
    assert_true(set(&c, "loopback_users.guest", "false"));
    assert_false(config_loopback_only(&c, "guest"));

    config_defaults(&c);
    assert_true(set(&c, "loopback_users", "none"));
    assert_true(set(&c, "loopback_users.carol", "true"));
    assert_false(config_loopback_only(&c, "carol"));
    assert_false(config_loopback_only(&c, "guest"));

    config_defaults(&c);
    assert_false(config_set(&c, "loopback_users.dave", "yes", "--set", err, sizeof err));
    assert_non_null(strstr(err, "--set: bad value for 'loopback_users.dave': 'yes' is not true"));
    assert_false(config_set(&c, "loopback_users.", "true", "--set", err, sizeof err));
    assert_false(config_set(&c, "loopback_users", "all", "--set", err, sizeof err));
    assert_true(config_loopback_only(&c, "guest"));
}

static void test_missing_file(void **state)
{
    (void)state;
    config c;
    char err[256];
    config_defaults(&c);
    assert_false(config_load_file(&c, "/nonexistent/warren.conf", err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent/warren.conf: No such file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_match_rabbitmq),
        cmocka_unit_test(test_file_is_read),
        cmocka_unit_test(test_errors_name_file_line_and_reason),
        cmocka_unit_test(test_set_overrides),
        cmocka_unit_test(test_loopback_users),
        cmocka_unit_test(test_missing_file),
    };
    return cmocka_run_group_tests_name("broker_config", tests, NULL, NULL);
}
