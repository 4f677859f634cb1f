/* Permissions through rabbitmq-c: publish (write, amq.default, topic
 * write), consume and get (read), queue and exchange declare (configure),
 * and bind (write on the queue, read on the exchange), each refused with
 * RabbitMQ's 403 text on the channel while the connection lives on.
 *
 * The users and the vhost come from py/permissions_fixture.py: written into
 * a stopped Warren's metadata.db before the broker used here starts, or
 * made with rabbitmqctl when WARREN_TEST_TARGET points at RabbitMQ (that is
 * how these expectations were checked against RabbitMQ 3.10.8). */
#include "harness.h"

static char suffix[32], vhost[64], narrow[96], topical[96], data_dir[256];
static char fixture_script[1024];

static int run_fixture(const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s", fixture_script, args);
    int rc = system(cmd);
    if (rc != 0)
        fprintf(stdout, "# fixture failed (%d): %s\n", rc, cmd);
    return rc == 0 ? 0 : -1;
}

static amqp_connection_state_t login_as(const char *user, const char *password)
{
    itest_login l = {user, password, vhost, 0, 131072, 0};
    return itest_connect_with(&l);
}

/* The objects the tests act on, made by guest (names chosen against the
 * users' regexes: NARROW configures ^cfg, writes ^wr, reads ^rd). */
static int make_objects(void)
{
    static const char *const exchanges[][2] = {{"rd.x", "topic"}, {"wr.x", "fanout"},
                                               {"x.x", "topic"}};
    static const char *const queues[] = {"rd.q", "wr.q", "x.q"};
    amqp_connection_state_t c = login_as("guest", "guest");
    for (size_t i = 0; i < 3; i++) {
        amqp_exchange_declare(c, 1, amqp_cstring_bytes(exchanges[i][0]),
                              amqp_cstring_bytes(exchanges[i][1]), 0, 0, 0, 0, amqp_empty_table);
        itest_assert_ok(amqp_get_rpc_reply(c), "exchange.declare");
        amqp_queue_declare(c, 1, amqp_cstring_bytes(queues[i]), 0, 0, 0, 0, amqp_empty_table);
        itest_assert_ok(amqp_get_rpc_reply(c), "queue.declare");
    }
    itest_disconnect(c);
    return 0;
}

static void delete_objects(void)
{
    static const char *const names[] = {"rd.x", "wr.x", "x.x", "rd.q", "wr.q", "x.q", "cfg.q"};
    amqp_rpc_reply_t r;
    itest_login l = {"guest", "guest", vhost, 0, 131072, 0};
    amqp_connection_state_t c = itest_try_connect(&l, &r);
    if (!c || r.reply_type != AMQP_RESPONSE_NORMAL || !amqp_channel_open(c, 1))
        return;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (names[i][strlen(names[i]) - 1] == 'x')
            amqp_exchange_delete(c, 1, amqp_cstring_bytes(names[i]), 0);
        else
            amqp_queue_delete(c, 1, amqp_cstring_bytes(names[i]), 0, 0);
        amqp_get_rpc_reply(c);
    }
    itest_disconnect(c);
}

static int group_setup(void **state)
{
    (void)state;
    char args[600], set_data[300];
    signal(SIGPIPE, SIG_IGN);
    snprintf(suffix, sizeof suffix, "c%x", (unsigned)getpid());
    snprintf(vhost, sizeof vhost, "access-itest-%s", suffix);
    snprintf(narrow, sizeof narrow, "access-itest-narrow-%s", suffix);
    snprintf(topical, sizeof topical, "access-itest-topical-%s", suffix);
    itest_repo_path(fixture_script, sizeof fixture_script,
                    "tests/integration/py/permissions_fixture.py");
    if (itest_targeting_external()) {
        snprintf(args, sizeof args, "rabbitmq-setup %s", suffix);
        if (run_fixture(args) || itest_broker_start(&itest_shared, NULL))
            return -1;
        return make_objects();
    }
    snprintf(data_dir, sizeof data_dir, "/tmp/warren-perm-c-XXXXXX");
    if (!mkdtemp(data_dir))
        return -1;
    snprintf(set_data, sizeof set_data, "data_dir=%s", data_dir);
    const char *sets[] = {set_data, NULL};
    /* first boot makes the schema, guest and "/"; then the fixture's rows */
    if (itest_broker_start(&itest_shared, sets) || itest_broker_stop(&itest_shared))
        return -1;
    snprintf(args, sizeof args, "seed %s %s", data_dir, suffix);
    if (run_fixture(args) || itest_broker_start(&itest_shared, sets))
        return -1;
    return make_objects();
}

static int group_teardown(void **state)
{
    (void)state;
    char args[300];
    delete_objects();
    int rc = itest_broker_stop(&itest_shared);
    if (itest_targeting_external()) {
        snprintf(args, sizeof args, "rabbitmq-teardown %s", suffix);
        run_fixture(args);
    } else if (data_dir[0]) {
        nftw(data_dir, itest_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    if (rc != 0)
        fprintf(stdout, "# Warren exit status %d after SIGTERM (expected 0)\n", rc);
    return rc == 0 ? 0 : -1;
}

/* The channel was closed with 403 and RabbitMQ's text for `what`; the
 * connection still works. */
static void expect_refused(amqp_connection_state_t c, amqp_rpc_reply_t r, const char *user,
                           const char *what)
{
    char text[512], want[512];
    itest_expect_channel_close(c, 1, r, ITEST_ACCESS_REFUSED, text, sizeof text);
    snprintf(want, sizeof want, "ACCESS_REFUSED - access to %s in vhost '%s' refused for user '%s'",
             what, vhost, user);
    assert_string_equal(text, want);
    itest_open_channel(c, 1);
    itest_assert_ok(itest_sync(c, 1), "connection still usable");
}

static void test_publish_needs_write(void **state)
{
    (void)state;
    amqp_connection_state_t c = login_as(narrow, "pw");
    for (int i = 0; i < 20; i++) /* the channel's cached check */
        assert_int_equal(itest_publish(c, 1, "wr.x", "k", "m", 1, 0, NULL), AMQP_STATUS_OK);
    itest_assert_ok(itest_sync(c, 1), "publish to wr.x");
    assert_int_equal(itest_publish(c, 1, "x.x", "k", "m", 1, 0, NULL), AMQP_STATUS_OK);
    expect_refused(c, itest_sync(c, 1), narrow, "exchange 'x.x'");
    assert_int_equal(itest_publish(c, 1, "", "rd.q", "m", 1, 0, NULL), AMQP_STATUS_OK);
    expect_refused(c, itest_sync(c, 1), narrow, "exchange 'amq.default'");
    itest_disconnect(c);
}

static void test_publish_topic_write(void **state)
{
    (void)state;
    char text[512], want[512];
    amqp_connection_state_t c = login_as(topical, "pw");
    assert_int_equal(itest_publish(c, 1, "amq.topic", "allowed.a", "m", 1, 0, NULL),
                     AMQP_STATUS_OK);
    itest_assert_ok(itest_sync(c, 1), "allowed key");
    assert_int_equal(itest_publish(c, 1, "amq.topic", "denied.a", "m", 1, 0, NULL), AMQP_STATUS_OK);
    itest_expect_channel_close(c, 1, itest_sync(c, 1), ITEST_ACCESS_REFUSED, text, sizeof text);
    snprintf(want, sizeof want,
             "ACCESS_REFUSED - access to topic 'denied.a' in exchange 'amq.topic' in vhost '%s' "
             "refused for user '%s'",
             vhost, topical);
    assert_string_equal(text, want);
    itest_disconnect(c);
}

static void test_consume_and_get_need_read(void **state)
{
    (void)state;
    amqp_message_t m;
    amqp_connection_state_t c = login_as(narrow, "pw");
    assert_int_equal(itest_get(c, 1, "rd.q", 1, &m, NULL, NULL), 0);
    amqp_basic_consume(c, 1, amqp_cstring_bytes("rd.q"), amqp_empty_bytes, 0, 1, 0,
                       amqp_empty_table);
    itest_assert_ok(amqp_get_rpc_reply(c), "consume rd.q");
    amqp_basic_consume(c, 1, amqp_cstring_bytes("x.q"), amqp_empty_bytes, 0, 1, 0,
                       amqp_empty_table);
    expect_refused(c, amqp_get_rpc_reply(c), narrow, "queue 'x.q'");
    expect_refused(c, amqp_basic_get(c, 1, amqp_cstring_bytes("x.q"), 1), narrow, "queue 'x.q'");
    /* read is checked before the queue is looked up */
    expect_refused(c, amqp_basic_get(c, 1, amqp_cstring_bytes("nope.q"), 1), narrow,
                   "queue 'nope.q'");
    itest_disconnect(c);
}

static void test_declare_needs_configure(void **state)
{
    (void)state;
    amqp_connection_state_t c = login_as(narrow, "pw");
    amqp_queue_declare(c, 1, amqp_cstring_bytes("cfg.q"), 0, 0, 0, 1, amqp_empty_table);
    itest_assert_ok(amqp_get_rpc_reply(c), "declare cfg.q");
    amqp_queue_declare(c, 1, amqp_cstring_bytes("x.q"), 0, 0, 0, 0, amqp_empty_table);
    expect_refused(c, amqp_get_rpc_reply(c), narrow, "queue 'x.q'");
    amqp_queue_declare(c, 1, amqp_cstring_bytes("x.q"), 1, 0, 0, 0, amqp_empty_table);
    itest_assert_ok(amqp_get_rpc_reply(c), "a passive declare needs no permission");
    amqp_exchange_declare(c, 1, amqp_cstring_bytes("no.x"), amqp_cstring_bytes("direct"), 0, 0,
                          0, 0, amqp_empty_table);
    expect_refused(c, amqp_get_rpc_reply(c), narrow, "exchange 'no.x'");
    itest_disconnect(c);
}

static void test_bind_needs_write_on_queue_and_read_on_exchange(void **state)
{
    (void)state;
    amqp_connection_state_t c = login_as(narrow, "pw");
    amqp_queue_bind(c, 1, amqp_cstring_bytes("wr.q"), amqp_cstring_bytes("rd.x"),
                    amqp_cstring_bytes("k"), amqp_empty_table);
    itest_assert_ok(amqp_get_rpc_reply(c), "bind wr.q to rd.x");
    amqp_queue_bind(c, 1, amqp_cstring_bytes("rd.q"), amqp_cstring_bytes("rd.x"),
                    amqp_cstring_bytes("k"), amqp_empty_table);
    expect_refused(c, amqp_get_rpc_reply(c), narrow, "queue 'rd.q'");
    amqp_queue_bind(c, 1, amqp_cstring_bytes("wr.q"), amqp_cstring_bytes("x.x"),
                    amqp_cstring_bytes("k"), amqp_empty_table);
    expect_refused(c, amqp_get_rpc_reply(c), narrow, "exchange 'x.x'");
    amqp_queue_unbind(c, 1, amqp_cstring_bytes("wr.q"), amqp_cstring_bytes("rd.x"),
                      amqp_cstring_bytes("k"), amqp_empty_table);
    itest_assert_ok(amqp_get_rpc_reply(c), "unbind");
    itest_disconnect(c);
}

static void test_vhost_without_permissions_530(void **state)
{
    (void)state;
    char user[96], text[512], want[512];
    amqp_rpc_reply_t r;
    snprintf(user, sizeof user, "access-itest-noperm-%s", suffix);
    itest_login l = {user, "pw", vhost, 0, 131072, 0};
    amqp_connection_state_t c = itest_try_connect(&l, &r);
    assert_non_null(c);
    itest_expect_connection_close(c, r, ITEST_NOT_ALLOWED, text, sizeof text);
    snprintf(want, sizeof want, "NOT_ALLOWED - access to vhost '%s' refused for user '%s'", vhost,
             user);
    assert_string_equal(text, want);
    itest_drop(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST(test_publish_needs_write),
        ITEST(test_publish_topic_write),
        ITEST(test_consume_and_get_need_read),
        ITEST(test_declare_needs_configure),
        ITEST(test_bind_needs_write_on_queue_and_read_on_exchange),
        ITEST(test_vhost_without_permissions_530),
    };
    return cmocka_run_group_tests_name("permissions", tests, group_setup, group_teardown);
}
