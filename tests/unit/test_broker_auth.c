/* Logins: the default user, and RabbitMQ's loopback_users rule that the
 * guest user may only connect from loopback (which integration tests,
 * bound to 127.0.0.1, cannot show). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../broker/broker.h"

static char dir[64];

static void stop(server *s)
{
    char cmd[96];
    server_free(s);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static server *start(const char *user, bool loopback_only)
{
    config c;
    config_defaults(&c);
    strcpy(c.listen_host, "127.0.0.1");
    c.listen_port = 0;
    strcpy(c.default_user, user);
    c.guest_loopback_only = loopback_only;
    /* a fresh data directory: the server opens its stores there */
    strcpy(dir, "/tmp/warren-unit-XXXXXX");
    assert_non_null(mkdtemp(dir));
    strcpy(c.data_dir, dir);
    log_set_level(LOG_NONE);
    server *s = server_new(&c);
    assert_non_null(s);
    return s;
}

static void test_guest_only_from_loopback(void **state)
{
    (void)state;
    server *s = start("guest", true);
    assert_true(server_authenticate(s, AMQP_CSTR("guest"), AMQP_CSTR("guest"), true));
    assert_false(server_authenticate(s, AMQP_CSTR("guest"), AMQP_CSTR("guest"), false));
    assert_false(server_authenticate(s, AMQP_CSTR("guest"), AMQP_CSTR("wrong"), true));
    assert_false(server_authenticate(s, AMQP_CSTR("nobody"), AMQP_CSTR("guest"), true));
    stop(s);
}

static void test_loopback_users_none(void **state)
{
    (void)state;
    server *s = start("guest", false);
    assert_true(server_authenticate(s, AMQP_CSTR("guest"), AMQP_CSTR("guest"), false));
    stop(s);
}

static void test_other_users_from_anywhere(void **state)
{
    (void)state;
    server *s = start("app", true);
    assert_true(server_authenticate(s, AMQP_CSTR("app"), AMQP_CSTR("guest"), false));
    assert_false(server_authenticate(s, AMQP_CSTR("guest"), AMQP_CSTR("guest"), true));
    stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guest_only_from_loopback),
        cmocka_unit_test(test_loopback_users_none),
        cmocka_unit_test(test_other_users_from_anywhere),
    };
    return cmocka_run_group_tests_name("broker_auth", tests, NULL, NULL);
}
