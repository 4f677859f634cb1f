/* warrenctl's -n: the host of a rabbitmqctl node name, and whether it is
 * this machine (then the control socket serves; another host is reached
 * over its management API). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../warrenctl/warrenctl.h"

static void test_host_of_a_node_name(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"rabbit@vm", "vm"},         {"rabbit@h.example.com", "h.example.com"},
        {"rabbit", ""},              {"rabbit@", ""},
        {"a@b@c", "b@c"},            {"@localhost", "localhost"},
    };
    char host[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_true(wctl_node_host(cases[i][0], host, sizeof host));
        assert_string_equal(host, cases[i][1]);
    }
    char tiny[4];
    assert_false(wctl_node_host("rabbit@toolong", tiny, sizeof tiny));
}

static void test_this_machine_or_another(void **state)
{
    (void)state;
    char me[256] = "", upper[256];
    assert_int_equal(gethostname(me, sizeof me - 1), 0);
    for (size_t i = 0; i <= strlen(me); i++)
        upper[i] = (char)(me[i] >= 'a' && me[i] <= 'z' ? me[i] - 32 : me[i]);
    assert_true(wctl_host_is_local(""));
    assert_true(wctl_host_is_local("localhost"));
    assert_true(wctl_host_is_local("LocalHost"));
    assert_true(wctl_host_is_local(me));
    assert_true(wctl_host_is_local(upper));
    assert_true(wctl_host_is_local("127.0.0.1"));
    assert_true(wctl_host_is_local("127.1.2.3"));
    assert_true(wctl_host_is_local("::1"));
    /* documentation addresses and a reserved name: never this machine */
    assert_false(wctl_host_is_local("198.51.100.7"));
    assert_false(wctl_host_is_local("2001:db8::1"));
    assert_false(wctl_host_is_local("rabbit.invalid"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_of_a_node_name),
        cmocka_unit_test(test_this_machine_or_another),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
