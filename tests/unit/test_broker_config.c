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

#include "test_broker_start.h"

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
    assert_string_equal(c.listen_host, ""); /* every interface, as RabbitMQ's 5672 */
    assert_string_equal(c.listen_name, "default");
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
    /* limits: a count or infinity (0) */
    assert_int_equal(c.connection_max, 0);
    assert_int_equal(c.consumer_max_per_channel, 0);
    assert_true(config_set(&c, "connection_max", "1000", "--set", err, sizeof err));
    assert_int_equal(c.connection_max, 1000);
    assert_true(config_set(&c, "connection_max", "infinity", "--set", err, sizeof err));
    assert_int_equal(c.connection_max, 0);
    assert_true(config_set(&c, "consumer_max_per_channel", "64", "--set", err, sizeof err));
    assert_int_equal(c.consumer_max_per_channel, 64);
    assert_false(config_set(&c, "connection_max", "lots", "--set", err, sizeof err));
    assert_false(config_set(&c, "consumer_max_per_channel", "-1", "--set", err, sizeof err));
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

/* RabbitMQ's listeners.tcp.<name> = [host:]port: the first such key
 * replaces the default listener, a name set again replaces its own, and
 * "listeners.tcp = none" leaves none. */
static void test_amqp_listeners(void **state)
{
    (void)state;
    config c;
    config_defaults(&c);
    assert_true(set(&c, "listeners.tcp.1", "127.0.0.1:5672"));
    assert_true(set(&c, "listeners.tcp.2", "::1:5672"));        /* cuttlefish's form */
    assert_true(set(&c, "listeners.tcp.local", "[::1]:5673"));  /* and with brackets */
    assert_true(set(&c, "listeners.tcp.all", "5674"));          /* a port alone */
    assert_true(set(&c, "listeners.tcp.v6any", ":::5675"));
    assert_string_equal(c.listen_name, "1"); /* the default listener is gone */
    assert_string_equal(c.listen_host, "127.0.0.1");
    assert_int_equal(c.listen_port, 5672);
    assert_int_equal(c.amqp_more.n, 4);
    const struct { const char *name, *host; int port; } want[] = {
        {"2", "::1", 5672}, {"local", "::1", 5673}, {"all", "", 5674}, {"v6any", "::", 5675}};
    for (unsigned i = 0; i < 4; i++) {
        assert_string_equal(c.amqp_more.extra[i].name, want[i].name);
        assert_string_equal(c.amqp_more.extra[i].host, want[i].host);
        assert_int_equal(c.amqp_more.extra[i].port, want[i].port);
    }
    assert_true(set(&c, "listeners.tcp.2", "127.0.0.2:6000")); /* replaced in place */
    assert_true(set(&c, "listeners.tcp.1", "0"));
    assert_int_equal(c.amqp_more.n, 4);
    assert_string_equal(c.amqp_more.extra[0].host, "127.0.0.2");
    assert_string_equal(c.listen_host, "");
    assert_int_equal(c.listen_port, 0);
    assert_false(c.listeners_none);
    assert_true(set(&c, "listeners.tcp", "none"));
    assert_true(c.listeners_none);

    config_defaults(&c); /* --set listeners.tcp.default after a file's default: one listener */
    assert_true(set(&c, "listeners.tcp.default", "5672"));
    assert_true(set(&c, "listeners.tcp.default", "127.0.0.1:0"));
    assert_int_equal(c.amqp_more.n, 0);
    assert_string_equal(c.listen_host, "127.0.0.1");

    config_defaults(&c);
    char key[32];
    for (int i = 0; i < CONFIG_MAX_LISTENERS; i++) {
        snprintf(key, sizeof key, "listeners.tcp.n%d", i);
        assert_true(set(&c, key, "5672"));
    }
    assert_false(set(&c, "listeners.tcp.one_too_many", "5672"));
}

static void test_more_listeners_of_management_and_prometheus(void **state)
{
    (void)state;
    config c;
    config_defaults(&c);
    assert_true(set(&c, "management.tcp.ip", "127.0.0.1"));
    assert_true(set(&c, "management.listeners.tcp.v6", "::1:15672"));
    assert_true(set(&c, "management.listeners.tcp.other", "15673"));
    assert_true(set(&c, "prometheus.listeners.tcp.v6", "[::1]:15692"));
    assert_string_equal(c.mgmt_ip, "127.0.0.1"); /* the first stays where it was */
    assert_int_equal(c.mgmt_port, 15672);
    assert_int_equal(c.mgmt_more.n, 2);
    assert_string_equal(c.mgmt_more.extra[0].host, "::1");
    assert_int_equal(c.mgmt_more.extra[0].port, 15672);
    assert_string_equal(c.mgmt_more.extra[1].host, "0.0.0.0"); /* as management.tcp.port alone */
    assert_int_equal(c.mgmt_more.extra[1].port, 15673);
    assert_int_equal(c.prometheus_more.n, 1);
    assert_string_equal(c.prometheus_more.extra[0].host, "::1");
    assert_int_equal(c.prometheus_more.extra[0].port, 15692);
    assert_int_equal(c.amqp_more.n, 0);
}

static void test_bad_listeners_name_file_line_and_reason(void **state)
{
    (void)state;
    expect_file_error("heartbeat = 5\nlisteners.tcp.1 = localhost:5672\n",
                      "2: bad value for 'listeners.tcp.1': 'localhost:5672' is not an IPv4 or "
                      "IPv6 address and port");
    expect_file_error("listeners.tcp.1 = 127.0.0.1\n",
                      "1: bad value for 'listeners.tcp.1': '127.0.0.1' is not a non-negative integer");
    expect_file_error("listeners.tcp.1 = 127.0.0.1:70000\n",
                      "1: bad value for 'listeners.tcp.1': 70000 is out of range 0..65535");
    expect_file_error("listeners.tcp.1 = 127.0.0.256:5672\n", "1: bad value for 'listeners.tcp.1'");
    expect_file_error("listeners.tcp.1 = :5672\n", "1: bad value for 'listeners.tcp.1'");
    expect_file_error("listeners.tcp.1 = [::1:5672\n", "1: bad value for 'listeners.tcp.1'");
    expect_file_error("listeners.tcp.a.b = 5672\n",
                      "1: bad value for 'listeners.tcp.a.b': a listener name must be");
    expect_file_error("listeners.tcp. = 5672\n", "1: bad value for 'listeners.tcp.'");
    expect_file_error("listeners.tcp = all\n", "1: bad value for 'listeners.tcp': only 'none'");
    expect_file_error("\nmanagement.listeners.tcp.x = 1.2.3:15672\n",
                      "2: bad value for 'management.listeners.tcp.x'");
    expect_file_error("prometheus.listeners.tcp.x = ::1\n",
                      "1: bad value for 'prometheus.listeners.tcp.x'");
}

static void describe_into(void *arg, const char *key, const char *value)
{
    char *out = arg;
    size_t n = strlen(out);
    snprintf(out + n, 2048 - n, "%s=%s;", key, value);
}

static void test_listeners_described_as_keys(void **state)
{
    (void)state;
    config c;
    char out[2048] = "";
    config_defaults(&c);
    config_describe(&c, describe_into, out);
    assert_non_null(strstr(out, "listeners.tcp.default=5672;"));
    config_defaults(&c);
    assert_true(set(&c, "listeners.tcp.1", "127.0.0.1:5672"));
    assert_true(set(&c, "listeners.tcp.2", "::1:5672"));
    assert_true(set(&c, "management.listeners.tcp.v6", "::1:15672"));
    out[0] = 0;
    config_describe(&c, describe_into, out);
    assert_non_null(strstr(out, "listeners.tcp.1=127.0.0.1:5672;listeners.tcp.2=[::1]:5672;"
                                "management.listeners.tcp.v6=[::1]:15672;"));
    assert_null(strstr(out, ";listeners.tcp.default"));
    assert_int_not_equal(strncmp(out, "listeners.tcp.default", 21), 0);
    assert_true(set(&c, "listeners.tcp", "none"));
    out[0] = 0;
    config_describe(&c, describe_into, out);
    assert_non_null(strstr(out, "listeners.tcp=none;"));
}

/* RabbitMQ's TLS and SASL keys (core/config_tls.c); run from the
 * repository's root (tests/tls holds the certificates). */
static void test_tls_keys(void **state)
{
    (void)state;
    config c;
    char out[4096] = "";
    config_defaults(&c);
    assert_int_equal(c.amqps.n, 0);
    assert_int_equal(c.nauth_mechs, 2);
    assert_int_equal(c.auth_mechs[0], AUTH_PLAIN);
    assert_true(set(&c, "listeners.ssl.default", "5671"));
    assert_true(set(&c, "listeners.ssl.local", "127.0.0.1:5681"));
    assert_true(set(&c, "ssl_options.certfile", "tests/tls/server.pem"));
    assert_true(set(&c, "ssl_options.keyfile", "tests/tls/server_enc.key"));
    assert_true(set(&c, "ssl_options.password", "warren"));
    assert_true(set(&c, "ssl_options.verify", "verify_peer"));
    assert_true(set(&c, "ssl_options.fail_if_no_peer_cert", "true"));
    assert_true(set(&c, "ssl_options.depth", "3"));
    assert_true(set(&c, "ssl_options.versions.1", "tlsv1.3"));
    assert_true(set(&c, "ssl_options.ciphers.1", "TLS_AES_256_GCM_SHA384"));
    assert_true(set(&c, "ssl_options.ciphers.2", "ECDHE-RSA-AES256-GCM-SHA384"));
    assert_true(set(&c, "management.ssl.port", "15671"));
    assert_true(set(&c, "management.ssl.certfile", "tests/tls/server.pem"));
    assert_true(set(&c, "prometheus.ssl.port", "15691"));
    assert_true(set(&c, "ssl_cert_login_from", "subject_alternative_name"));
    assert_true(set(&c, "ssl_cert_login_san_type", "email"));
    assert_true(set(&c, "ssl_cert_login_san_index", "1"));
    assert_true(set(&c, "auth_mechanisms.1", "EXTERNAL"));
    assert_true(set(&c, "auth_mechanisms.2", "PLAIN"));
    assert_int_equal(c.amqps.n, 2);
    assert_int_equal(c.amqps.extra[1].port, 5681);
    assert_true(c.amqp_tls.verify_peer && c.amqp_tls.fail_if_no_peer_cert);
    assert_int_equal(c.amqp_tls.depth, 3);
    assert_int_equal(c.amqp_tls.versions, TLS_V1_3);
    assert_string_equal(c.amqp_tls.ciphers, "TLS_AES_256_GCM_SHA384:ECDHE-RSA-AES256-GCM-SHA384");
    assert_true(c.mgmt_tls.on && c.prometheus_tls.on);
    assert_int_equal(c.cert_login_from, TLS_NAME_SAN);
    assert_int_equal(c.cert_login_san_type, TLS_SAN_EMAIL);
    assert_int_equal(c.nauth_mechs, 2);
    assert_int_equal(c.auth_mechs[0], AUTH_EXTERNAL);
    config_describe(&c, describe_into, out);
    assert_non_null(strstr(out, "listeners.ssl.default=5671;listeners.ssl.local=127.0.0.1:5681;"
                                "ssl_options.certfile=tests/tls/server.pem;"));
    assert_non_null(strstr(out, "ssl_options.versions.1=tlsv1.3;ssl_options.ciphers.1="
                                "TLS_AES_256_GCM_SHA384;ssl_options.ciphers.2="));
    assert_non_null(strstr(out, "management.ssl.port=15671;management.ssl.ip=0.0.0.0;"));
    assert_non_null(strstr(out, "auth_mechanisms.1=EXTERNAL;auth_mechanisms.2=PLAIN;"
                                "ssl_cert_login_from=subject_alternative_name;"));
    assert_null(strstr(out, "warren")); /* no password shown */
}

static void test_bad_tls_keys_name_file_line_and_reason(void **state)
{
    (void)state;
    expect_file_error("heartbeat = 5\nssl_options.certfile = /nonexistent/cert.pem\n",
                      "2: bad value for 'ssl_options.certfile': cannot read /nonexistent/cert.pem: "
                      "No such file or directory");
    expect_file_error("ssl_options.verify = verify_maybe\n",
                      "1: bad value for 'ssl_options.verify': 'verify_maybe' is not one of "
                      "verify_none, verify_peer");
    expect_file_error("ssl_options.versions.1 = sslv3\n", "1: bad value for 'ssl_options.versions.1'");
    expect_file_error("ssl_options.depth = -1\n", "1: bad value for 'ssl_options.depth'");
    expect_file_error("ssl_options.sni = x\n",
                      "1: bad value for 'ssl_options.sni': unknown TLS option 'sni'");
    expect_file_error("listeners.ssl.default = nowhere\n", "1: bad value for 'listeners.ssl.default'");
    expect_file_error("management.ssl.port = 99999\n", "1: bad value for 'management.ssl.port'");
    expect_file_error("prometheus.ssl.keyfile = /nonexistent\n",
                      "1: bad value for 'prometheus.ssl.keyfile': cannot read");
    expect_file_error("ssl_cert_login_from = email\n", "1: bad value for 'ssl_cert_login_from'");
    expect_file_error("ssl_cert_login_san_type = x400\n",
                      "1: bad value for 'ssl_cert_login_san_type'");
    expect_file_error("auth_mechanisms.1 = CRAM-MD5\n",
                      "1: bad value for 'auth_mechanisms.1': 'CRAM-MD5' is not one of PLAIN, "
                      "AMQPLAIN, EXTERNAL");
}

/* Taking guest off the loopback-only list leaves nobody on it: described
 * as "none", not left out (which would read as the default, guest). The
 * config fuzzer found the description setting back to another config. */
static void test_empty_loopback_list_described_as_none(void **state)
{
    (void)state;
    config c;
    char out[2048] = "";
    config_defaults(&c);
    assert_true(set(&c, "loopback_users.guest", "false"));
    assert_false(config_loopback_only(&c, "guest"));
    config_describe(&c, describe_into, out);
    assert_non_null(strstr(out, "loopback_users=none;"));
    config_defaults(&c);
    out[0] = 0;
    config_describe(&c, describe_into, out);
    assert_non_null(strstr(out, "loopback_users.guest=true;"));
}

/* RabbitMQ's stream plugin keys (core/config_stream.c). */
static void test_stream_keys(void **state)
{
    (void)state;
    config c;
    char out[2048] = "";
    config_defaults(&c);
    assert_int_equal(c.stream_listeners.n, 1);
    assert_int_equal(c.stream_listeners.extra[0].port, 5552); /* the plugin's default */
    assert_int_equal(c.stream_frame_max, 1048576);
    assert_int_equal(c.stream_heartbeat, 60);
    assert_true(set(&c, "stream.listeners.tcp.1", "127.0.0.1:5553"));
    assert_true(set(&c, "stream.listeners.tcp.2", "5554"));
    assert_int_equal(c.stream_listeners.n, 2); /* the first key replaced the default */
    assert_string_equal(c.stream_listeners.extra[0].host, "127.0.0.1");
    assert_true(set(&c, "stream.advertised_host", "streams.example"));
    assert_true(set(&c, "stream.advertised_port", "6000"));
    assert_true(set(&c, "stream.frame_max", "65536"));
    assert_true(set(&c, "stream.heartbeat", "0"));
    config_describe(&c, describe_into, out);
    assert_non_null(strstr(out, "stream.listeners.tcp.1=127.0.0.1:5553;stream.listeners.tcp.2=5554;"
                                "stream.advertised_host=streams.example;stream.advertised_port=6000;"
                                "stream.frame_max=65536;stream.heartbeat=0;"));
    assert_true(set(&c, "stream.listeners.tcp", "none"));
    assert_true(c.stream_listeners_none);
    expect_file_error("stream.frame_max = 100\n", "1: bad value for 'stream.frame_max': 100 is out "
                      "of range 8192..1073741824");
    expect_file_error("\nstream.listeners.tcp = 5552\n", "2: bad value for 'stream.listeners.tcp'");
    expect_file_error("stream.advertised_port = 0\n", "1: bad value for 'stream.advertised_port'");
    expect_file_error("stream.heartbeat = x\n", "1: bad value for 'stream.heartbeat'");
    expect_file_error("stream.nope = 1\n", "1: unknown key 'stream.nope'");
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
        cmocka_unit_test(test_amqp_listeners),
        cmocka_unit_test(test_more_listeners_of_management_and_prometheus),
        cmocka_unit_test(test_bad_listeners_name_file_line_and_reason),
        cmocka_unit_test(test_listeners_described_as_keys),
        cmocka_unit_test(test_tls_keys),
        cmocka_unit_test(test_bad_tls_keys_name_file_line_and_reason),
        cmocka_unit_test(test_empty_loopback_list_described_as_none),
        cmocka_unit_test(test_stream_keys),
        cmocka_unit_test(test_missing_file),
    };
    return cmocka_run_group_tests_name("broker_config", tests, NULL, NULL);
}
