/* rabbitmqctl's column names mapped to the management API's fields, each
 * listing's defaults and its refusals, and the table as rabbitmqctl lays it
 * out (header, tabs, empty lists, JSON one object per line). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "../../warrenctl/warrenctl.h"

#define MAXCOLS 64

static int columns(const char *command, const char *const *names, int n,
                   const wctl_column **cols, char *err)
{
    const wctl_listing *l = wctl_listing_find(command);
    assert_non_null(l);
    return wctl_listing_columns(l, names, n, cols, MAXCOLS, err, 256);
}

/* Default columns, as `rabbitmqctl list_x` prints them in 3.10. */
static void test_defaults(void **state)
{
    (void)state;
    static const struct {
        const char *command, *header;
    } cases[] = {
        {"list_queues", "name messages"},
        {"list_exchanges", "name type"},
        {"list_bindings", "source_name source_kind destination_name destination_kind routing_key arguments"},
        {"list_connections", "user peer_host peer_port state"},
        {"list_channels", "pid user consumer_count messages_unacknowledged"},
        {"list_consumers", "queue_name channel_pid consumer_tag ack_required prefetch_count active arguments"},
        {"list_users", "user tags"},
        {"list_vhosts", "name"},
        {"list_permissions", "user configure write read"},
        {"list_user_permissions", "vhost configure write read"},
        {"list_policies", "vhost name pattern apply-to definition priority"},
        {"list_operator_policies", "vhost name pattern apply-to definition priority"},
        {"list_topic_permissions", "user exchange write read"},
        {"list_parameters", "component name value"},
        {"list_global_parameters", "name value"},
        {"list_feature_flags", "name state"},
        {"list_unresponsive_queues", "name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const wctl_column *cols[MAXCOLS];
        char err[256];
        int n = columns(cases[i].command, NULL, 0, cols, err);
        wctl_buf got = {0};
        for (int k = 0; k < n; k++)
            wctl_buf_printf(&got, "%s%s", k ? " " : "", cols[k]->name);
        assert_string_equal(wctl_buf_str(&got), cases[i].header);
        wctl_buf_free(&got);
    }
    assert_null(wctl_listing_find("list_nothing"));
}

/* A rabbitmqctl column and the API field it reads. */
static void test_mapping(void **state)
{
    (void)state;
    static const struct {
        const char *command, *column, *path;
        wctl_kind kind;
    } cases[] = {
        {"list_queues", "messages_unacknowledged", "messages_unacknowledged", WCTL_KIND_PLAIN},
        {"list_queues", "arguments", "arguments", WCTL_KIND_TABLE},
        {"list_queues", "owner_pid", "owner_pid_details.name", WCTL_KIND_PLAIN},
        {"list_bindings", "source_name", "source", WCTL_KIND_PLAIN},
        {"list_bindings", "destination_kind", "destination_type", WCTL_KIND_PLAIN},
        {"list_bindings", "source_kind", "exchange", WCTL_KIND_CONSTANT},
        {"list_connections", "pid", "name", WCTL_KIND_PLAIN},
        {"list_connections", "protocol", "protocol", WCTL_KIND_PROTOCOL},
        {"list_connections", "client_properties", "client_properties", WCTL_KIND_TABLE},
        {"list_channels", "connection", "connection_details.name", WCTL_KIND_PLAIN},
        {"list_consumers", "queue_name", "queue.name", WCTL_KIND_PLAIN},
        {"list_consumers", "channel_pid", "channel_details.name", WCTL_KIND_PLAIN},
        {"list_vhosts", "cluster_state", "cluster_state", WCTL_KIND_NODE_MAP},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const wctl_column *cols[MAXCOLS];
        char err[256];
        const char *names[] = {cases[i].column};
        assert_int_equal(columns(cases[i].command, names, 1, cols, err), 1);
        assert_string_equal(cols[0]->name, cases[i].column);
        assert_string_equal(cols[0]->path, cases[i].path);
        assert_int_equal(cols[0]->kind, cases[i].kind);
    }
}

static void test_requested_order_and_refusals(void **state)
{
    (void)state;
    const wctl_column *cols[MAXCOLS];
    char err[256];
    const char *q[] = {"messages", "name", "durable,policy"};
    assert_int_equal(columns("list_queues", q, 3, cols, err), 4);
    assert_string_equal(cols[0]->name, "messages");
    assert_string_equal(cols[1]->name, "name");
    assert_string_equal(cols[2]->name, "durable");
    assert_string_equal(cols[3]->name, "policy");
    /* list_consumers prints its own order whatever was asked */
    const char *c[] = {"arguments", "consumer_tag", "queue_name"};
    assert_int_equal(columns("list_consumers", c, 3, cols, err), 3);
    assert_string_equal(cols[0]->name, "queue_name");
    assert_string_equal(cols[1]->name, "consumer_tag");
    assert_string_equal(cols[2]->name, "arguments");
    const char *bad[] = {"name", "bogus", "other"};
    assert_int_equal(columns("list_queues", bad, 3, cols, err), 0);
    assert_string_equal(err, "Info key(s) bogus,other are not supported");
    const char *u[] = {"user"};
    assert_int_equal(columns("list_users", u, 1, cols, err), 0);
    assert_string_equal(err, "too many arguments.");
    assert_int_equal(columns("list_policies", u, 1, cols, err), 0);
}

static void test_nested_values(void **state)
{
    (void)state;
    const wctl_column *cols[MAXCOLS];
    char err[256];
    const char *names[] = {"queue_name", "channel_pid", "consumer_tag"};
    assert_int_equal(columns("list_consumers", names, 3, cols, err), 3);
    json_t *row = json_loads("{\"queue\":{\"name\":\"q1\",\"vhost\":\"/\"},\"channel_details\":"
                             "{\"name\":\"c (1)\"},\"consumer_tag\":\"t\"}", 0, NULL);
    assert_string_equal(json_string_value(wctl_column_value(cols[0], row)), "q1");
    assert_string_equal(json_string_value(wctl_column_value(cols[1], row)), "c (1)");
    json_t *flat = json_loads("{\"queue\":\"q1\"}", 0, NULL);
    assert_null(wctl_column_value(cols[0], flat)); /* not an object: no value, no crash */
    json_decref(row);
    json_decref(flat);
}

static char *render(const char *command, const char *rows_json, const char *const *names, int n,
                    bool headers, bool json)
{
    const wctl_listing *l = wctl_listing_find(command);
    const wctl_column *cols[MAXCOLS];
    char err[256];
    int ncols = wctl_listing_columns(l, names, n, cols, MAXCOLS, err, sizeof err);
    json_t *rows = json_loads(rows_json, 0, NULL);
    wctl_buf out = {0};
    wctl_listing_render(&out, l, cols, ncols, rows, headers, json);
    json_decref(rows);
    static char text[4096];
    snprintf(text, sizeof text, "%s", wctl_buf_str(&out));
    wctl_buf_free(&out);
    return text;
}

static void test_render(void **state)
{
    (void)state;
    const char *rows = "[{\"name\":\"q1\",\"messages\":3,\"durable\":true},"
                       "{\"name\":\"q 2\",\"messages\":0,\"durable\":false}]";
    assert_string_equal(render("list_queues", rows, NULL, 0, true, false),
                        "name\tmessages\nq1\t3\nq 2\t0\n");
    assert_string_equal(render("list_queues", rows, NULL, 0, false, false), "q1\t3\nq 2\t0\n");
    const char *names[] = {"name", "durable"};
    assert_string_equal(render("list_queues", rows, names, 2, true, true),
                        "[\n{\"name\":\"q1\",\"durable\":true}\n,{\"name\":\"q 2\",\"durable\":false}\n]\n");
    /* no rows: streaming lists print nothing, the others one empty line */
    assert_string_equal(render("list_queues", "[]", NULL, 0, true, false), "");
    assert_string_equal(render("list_queues", "[]", NULL, 0, true, true), "[\n]\n");
    assert_string_equal(render("list_policies", "[]", NULL, 0, true, false), "\n");
    assert_string_equal(render("list_policies", "[]", NULL, 0, true, true), "[]\n");
    /* list_user_topic_permissions has no header line in rabbitmqctl */
    assert_string_equal(render("list_user_topic_permissions",
                               "[{\"vhost\":\"v\",\"exchange\":\"amq.topic\",\"write\":\"^a\","
                               "\"read\":\"^b\"}]", NULL, 0, true, false),
                        "v\tamq.topic\t^a\t^b\n");
    assert_string_equal(render("list_bindings",
                               "[{\"source\":\"\",\"destination\":\"q1\",\"destination_type\":"
                               "\"queue\",\"routing_key\":\"q1\",\"arguments\":{}}]",
                               NULL, 0, false, false),
                        "\texchange\tq1\tqueue\tq1\t[]\n");
    assert_string_equal(render("list_policies",
                               "[{\"vhost\":\"v\",\"name\":\"p1\",\"pattern\":\"^q\",\"apply-to\":"
                               "\"queues\",\"definition\":{\"max-length\":10,\"dead-letter-exchange\":"
                               "\"dlx\"},\"priority\":2}]", NULL, 0, true, false),
                        "vhost\tname\tpattern\tapply-to\tdefinition\tpriority\n"
                        "v\tp1\t^q\tqueues\t{\"dead-letter-exchange\":\"dlx\",\"max-length\":10}\t2\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_mapping),
        cmocka_unit_test(test_requested_order_and_refusals),
        cmocka_unit_test(test_nested_values),
        cmocka_unit_test(test_render),
    };
    return cmocka_run_group_tests_name("warrenctl_columns", tests, NULL, NULL);
}
