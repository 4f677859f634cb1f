/* AMQP URIs as RabbitMQ's amqp_uri parses them: defaults, percent-decoding,
 * the vhost rules, a URI without host (this broker), IPv6, the query keys,
 * and the refusals with RabbitMQ's reasons; credentials redacted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../client/client.h"

typedef struct good {
    const char *uri;
    bool local, tls;
    const char *host;
    unsigned port;
    const char *user, *password, *vhost;
    long long heartbeat;
} good;

static const good goods[] = {
    {"amqp://", true, false, "", 0, "", "", "/", -1},
    {"amqp:///vh", true, false, "", 0, "", "", "vh", -1},
    {"amqp://u:p@/%2f", true, false, "", 0, "u", "p", "/", -1},
    {"amqp://host", false, false, "host", 5672, "guest", "guest", "/", -1},
    {"amqp://host/", false, false, "host", 5672, "guest", "guest", "", -1},
    {"AMQP://host:5673/%2F", false, false, "host", 5673, "guest", "guest", "/", -1},
    {"amqps://host", false, true, "host", 5671, "guest", "guest", "/", -1},
    {"amqp://us%40er:p%3Aa%2Fss@h:1/v%20h", false, false, "h", 1, "us@er", "p:a/ss", "v h", -1},
    {"amqp://user@h", false, false, "h", 5672, "user", "", "/", -1},
    {"amqp://u:p:x@h", false, false, "h", 5672, "u", "p", "/", -1},
    {"amqp://[::1]:5700/vh", false, false, "::1", 5700, "guest", "guest", "vh", -1},
    {"amqp://[::1]", false, false, "::1", 5672, "guest", "guest", "/", -1},
    {"amqp://h/vh?heartbeat=5&connection_timeout=1000", false, false, "h", 5672, "guest", "guest",
     "vh", 5},
    {"amqp://h?heartbeat=0&foo=bar&flag", false, false, "h", 5672, "guest", "guest", "/", 0},
    {"amqp://127.0.0.1:65535", false, false, "127.0.0.1", 65535, "guest", "guest", "/", -1},
};

static void test_good(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof goods / sizeof goods[0]; i++) {
        const good *g = &goods[i];
        client_uri u;
        char err[256] = "";
        if (!client_uri_parse(g->uri, &u, err, sizeof err))
            fail_msg("%s: %s", g->uri, err);
        assert_int_equal(u.local, g->local);
        assert_int_equal(u.tls, g->tls);
        assert_string_equal(u.host, g->host);
        assert_int_equal(u.port, g->port);
        assert_string_equal(u.user, g->user);
        assert_string_equal(u.password, g->password);
        assert_string_equal(u.vhost, g->vhost);
        assert_int_equal(u.heartbeat, g->heartbeat);
    }
    client_uri u;
    char err[256];
    assert_true(client_uri_parse("amqp://h?connection_timeout=1500&channel_max=7&frame_max=8192",
                                 &u, err, sizeof err));
    assert_int_equal(u.connection_timeout, 1500);
    assert_int_equal(u.channel_max, 7);
    assert_int_equal(u.frame_max, 8192);
}

typedef struct bad {
    const char *uri, *why;
} bad;

static const bad bads[] = {
    {"http://h", "{unexpected_uri_scheme,\"http\"}"},
    {"nothing", "{unable_to_parse_uri,\"nothing\"}"},
    {"amqp://:5672", "port_requires_host"},
    {"amqp://h:0", "{port_out_of_range,0}"},
    {"amqp://h:65536", "{port_out_of_range,65536}"},
    {"amqp://h:12x", "{unable_to_parse_uri,\"h:12x\"}"},
    {"amqp://h/a/b", "{invalid_vhost,\"a/b\"}"},
    {"amqp://h/a%zz", "{invalid_entitiy,\"%zz\"}"},
    {"amqp://h/a%2", "{unterminated_entity,\"%2\"}"},
    {"amqp://h?heartbeat=x",
     "{invalid_amqp_params_parameter,heartbeat,\"x\",{not_an_integer,\"x\"}}"},
    {"amqp://[::1", "{unable_to_parse_uri,\"[::1\"}"},
};

static void test_bad(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        client_uri u;
        char err[256] = "";
        if (client_uri_parse(bads[i].uri, &u, err, sizeof err))
            fail_msg("%s parsed", bads[i].uri);
        assert_string_equal(err, bads[i].why);
    }
}

/* Fields are bounded: a longer value is refused, never cut or overrun. */
static void test_long(void **state)
{
    (void)state;
    char uri[1200], err[256];
    client_uri u;
    int n = snprintf(uri, sizeof uri, "amqp://h/");
    memset(uri + n, 'v', 600);
    uri[n + 600] = '\0';
    assert_false(client_uri_parse(uri, &u, err, sizeof err));
    assert_non_null(strstr(err, "too_long"));
    memset(uri + n, 'v', 255);
    uri[n + 255] = '\0';
    assert_true(client_uri_parse(uri, &u, err, sizeof err));
    assert_int_equal(strlen(u.vhost), 255);
}

static void test_redact(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"amqp://u:p@host:5673/%2f?heartbeat=5", "amqp://host:5673/%2f"},
        {"amqp://", "amqp://"},
        {"amqp://host", "amqp://host"},
        {"amqps://a@b@host/vh", "amqps://host/vh"},
        {"nothing", "nothing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[128];
        client_uri_redact(cases[i][0], out, sizeof out);
        assert_string_equal(out, cases[i][1]);
    }
    char tiny[6];
    client_uri_redact("amqp://u:p@host", tiny, sizeof tiny);
    assert_string_equal(tiny, "amqp:");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_long),
        cmocka_unit_test(test_redact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
