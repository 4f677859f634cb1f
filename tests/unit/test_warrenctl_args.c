/* warrenctl's command line: rabbitmqctl's general options anywhere, command
 * options, the -u/-p credentials rule before the command name, values given
 * as "--opt v" or "--opt=v", and rabbitmqctl's wording for bad options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../warrenctl/warrenctl.h"

/* Parses a NULL-terminated list of words (argv[0] is added). */
static bool parse(wctl_opts *o, char *err, size_t errlen, ...)
{
    static char *argv[64];
    va_list ap;
    int argc = 0;
    argv[argc++] = "warrenctl";
    va_start(ap, errlen);
    for (char *a; (a = va_arg(ap, char *)) && argc < 63;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    return wctl_parse_args(argc, argv, o, err, errlen);
}

/* Parses a NULL-terminated table row of words. */
static bool parse_words(const char *const *words, wctl_opts *o, char *err, size_t errlen)
{
    static char *argv[16];
    int argc = 0;
    argv[argc++] = "warrenctl";
    for (int k = 0; words[k] && argc < 15; k++)
        argv[argc++] = (char *)words[k];
    argv[argc] = NULL;
    return wctl_parse_args(argc, argv, o, err, errlen);
}

static void test_defaults(void **state)
{
    (void)state;
    wctl_opts o;
    char err[256];
    assert_true(parse(&o, err, sizeof err, "list_queues", NULL));
    assert_string_equal(o.command, "list_queues");
    assert_int_equal(o.nargs, 0);
    assert_string_equal(o.vhost, "/");
    assert_int_equal(o.timeout_s, -1);
    assert_false(o.quiet || o.silent || o.json || o.no_headers || o.help);
    assert_null(o.url);
    assert_null(o.username);
    assert_int_equal(o.given, 0);
}

/* Table: an argv and what -p, -u and the positionals become. */
static void test_p_is_vhost_or_password(void **state)
{
    (void)state;
    static const struct {
        const char *words[10];
        const char *vhost, *user, *pass, *arg0;
    } cases[] = {
        {{"-p", "vh", "list_queues"}, "vh", NULL, NULL, NULL},
        {{"list_queues", "-p", "vh", "name"}, "vh", NULL, NULL, "name"},
        {{"--url", "http://h:1", "-u", "guest", "-p", "pw", "list_queues", "-p", "vh"},
         "vh", "guest", "pw", NULL},
        {{"-u", "guest", "-p", "pw", "-p", "vh", "list_queues"}, "vh", "guest", "pw", NULL},
        {{"--username", "a", "--password", "b", "list_users"}, "/", "a", "b", NULL},
        {{"--vhost=x", "list_queues", "--username=u"}, "x", "u", NULL, NULL},
        /* after the command, -p is always the vhost even when no password was given */
        {{"-u", "guest", "list_queues", "-p", "vh"}, "vh", "guest", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wctl_opts o;
        char err[256];
        assert_true(parse_words(cases[i].words, &o, err, sizeof err));
        assert_string_equal(o.vhost, cases[i].vhost);
        if (cases[i].user)
            assert_string_equal(o.username, cases[i].user);
        else
            assert_null(o.username);
        if (cases[i].pass)
            assert_string_equal(o.password, cases[i].pass);
        else
            assert_null(o.password);
        if (cases[i].arg0)
            assert_string_equal(o.args[0], cases[i].arg0);
    }
}

static void test_u_after_command_is_if_unused(void **state)
{
    (void)state;
    wctl_opts o;
    char err[256];
    assert_true(parse(&o, err, sizeof err, "delete_queue", "q1", "-u", "-e", NULL));
    assert_null(o.username);
    assert_true(o.given & WCTL_OPT_IF_UNUSED);
    assert_true(o.given & WCTL_OPT_IF_EMPTY);
    assert_string_equal(o.args[0], "q1");
    assert_string_equal(o.given_as[__builtin_ctz(WCTL_OPT_IF_UNUSED)], "if-unused");
}

static void test_general_options(void **state)
{
    (void)state;
    wctl_opts o;
    char err[256];
    assert_true(parse(&o, err, sizeof err, "-q", "list_queues", "-s", "--no-table-headers",
                      "--formatter", "json", "-t", "5", "-n", "rabbit@h", "-l", NULL));
    assert_true(o.quiet && o.silent && o.no_headers && o.json);
    assert_int_equal(o.timeout_s, 5);
    assert_string_equal(o.node, "rabbit@h");
    assert_true(o.given & WCTL_OPT_NO_HEADERS);
    assert_true(parse(&o, err, sizeof err, "--node=rabbit@x", "--management-port", "15673",
                      "status", NULL));
    assert_string_equal(o.node, "rabbit@x");
    assert_int_equal(o.mgmt_port, 15673);
    assert_int_equal(o.necho, 2); /* the port is a connection option: not echoed */
    assert_true(parse(&o, err, sizeof err, "list_queues", "--formatter=json", "--timeout=7",
                      NULL));
    assert_true(o.json);
    assert_int_equal(o.timeout_s, 7);
    assert_true(parse(&o, err, sizeof err, "--formatter", "table", "list_queues", NULL));
    assert_false(o.json);
    assert_true(parse(&o, err, sizeof err, "list_queues", "-?", NULL));
    assert_true(o.help);
}

static void test_command_options_and_values(void **state)
{
    (void)state;
    wctl_opts o;
    char err[256];
    assert_true(parse(&o, err, sizeof err, "set_policy", "-p", "v", "p1", "^q", "{}",
                      "--priority", "-3", "--apply-to", "queues", NULL));
    assert_int_equal(o.priority, -3);
    assert_string_equal(o.apply_to, "queues");
    assert_int_equal(o.nargs, 3);
    assert_string_equal(o.args[2], "{}");
    assert_true(o.given & WCTL_OPT_PRIORITY);
    assert_true(parse(&o, err, sizeof err, "add_vhost", "v", "--description", "d e",
                      "--tags", "a,b", "--default-queue-type", "quorum", NULL));
    assert_string_equal(o.description, "d e");
    assert_string_equal(o.tags, "a,b");
    assert_string_equal(o.queue_type, "quorum");
    /* "-" is a positional (export_definitions -), and "--" ends the options */
    assert_true(parse(&o, err, sizeof err, "export_definitions", "-", NULL));
    assert_string_equal(o.args[0], "-");
    assert_true(parse(&o, err, sizeof err, "add_user", "--", "-odd", "pw", NULL));
    assert_string_equal(o.args[0], "-odd");
    assert_string_equal(o.args[1], "pw");
    assert_true(parse(&o, err, sizeof err, "close_all_connections", "--limit", "3",
                      "--per-connection-delay", "50", "--global", "why", NULL));
    assert_int_equal(o.close_limit, 3);
    assert_int_equal(o.close_delay_ms, 50);
    assert_int_equal(o.given, WCTL_OPT_CLOSE_LIMIT | WCTL_OPT_CLOSE_DELAY | WCTL_OPT_GLOBAL);
    assert_string_equal(o.args[0], "why");
    assert_true(parse(&o, err, sizeof err, "list_unresponsive_queues", "--queue-timeout", "100",
                      "--local", "name", NULL));
    assert_true(o.given & WCTL_OPT_QUEUE_TIMEOUT);
    assert_int_equal(o.nargs, 1);
}

/* Bad options, in rabbitmqctl's words; the command is still found. */
static void test_bad_options(void **state)
{
    (void)state;
    static const struct {
        const char *words[6];
        const char *err;
    } cases[] = {
        {{"list_queues", "--bogus"}, "Invalid options for this command:\n--bogus : "},
        {{"list_queues", "-x"}, "Invalid options for this command:\n-x : "},
        {{"set_policy", "--priority", "x"}, "Invalid options for this command:\n--priority : x"},
        {{"list_queues", "--timeout", "soon"}, "Invalid options for this command:\n--timeout : soon"},
        {{"list_queues", "--formatter", "xml"}, "Invalid options for this command:\n--formatter : xml"},
        {{"list_queues", "--vhost"}, "Invalid options for this command:\n--vhost : "},
        {{"list_queues", "--quiet=yes"}, "Invalid options for this command:\n--quiet=yes : "},
        {{"close_all_connections", "--limit", "-1"}, "Invalid options for this command:\n--limit : -1"},
        {{"list_unresponsive_queues", "--queue-timeout", "soon"},
         "Invalid options for this command:\n--queue-timeout : soon"},
        {{"status", "--management-port", "70000"},
         "Invalid options for this command:\n--management-port : 70000"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wctl_opts o;
        char err[256];
        assert_false(parse_words(cases[i].words, &o, err, sizeof err));
        assert_string_equal(err, cases[i].err);
        assert_string_equal(o.command, cases[i].words[0]);
    }
}

/* The echo for "Arguments given:" leaves out where the broker is and the
 * credentials, so it reads as the rabbitmqctl command line would. */
static void test_echo_leaves_out_connection_options(void **state)
{
    (void)state;
    wctl_opts o;
    char err[256];
    assert_true(parse(&o, err, sizeof err, "--url", "http://h:1", "-u", "g", "-p", "secret",
                      "-p", "vh", "list_queues", "--socket", "/s", "name", NULL));
    const char *want[] = {"-p", "vh", "list_queues", "name"};
    assert_int_equal(o.necho, 4);
    for (int i = 0; i < 4; i++)
        assert_string_equal(o.echo[i], want[i]);
    assert_string_equal(o.socket_path, "/s");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_p_is_vhost_or_password),
        cmocka_unit_test(test_u_after_command_is_if_unused),
        cmocka_unit_test(test_general_options),
        cmocka_unit_test(test_command_options_and_values),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_echo_leaves_out_connection_options),
    };
    return cmocka_run_group_tests_name("warrenctl_args", tests, NULL, NULL);
}
