/* Values as rabbitmqctl 3.10 prints them, from tables: every expected text
 * below was printed by rabbitmqctl for the same object (list_queues
 * arguments, list_connections client_properties and protocol, list_vhosts
 * cluster_state, list_policies definition, list_users tags), or, for floats,
 * by Erlang's io:format("~p"). The input is the management API's JSON of
 * that object. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "../../warrenctl/warrenctl.h"

typedef struct value_case {
    const char *json; /* the API's value */
    wctl_kind kind;
    const char *cell; /* rabbitmqctl's table formatter */
    const char *js;   /* rabbitmqctl's JSON formatter */
} value_case;

static const value_case values[] = {
    /* plain values */
    {"\"running\"", WCTL_KIND_PLAIN, "running", "\"running\""},
    {"\"\"", WCTL_KIND_PLAIN, "", "\"\""},
    {"null", WCTL_KIND_PLAIN, "", "\"\""},
    {"true", WCTL_KIND_PLAIN, "true", "true"},
    {"false", WCTL_KIND_PLAIN, "false", "false"},
    {"55568", WCTL_KIND_PLAIN, "55568", "55568"},
    {"0.9999999177703098", WCTL_KIND_PLAIN, "0.9999999177703098", "0.9999999177703098"},
    {"[\"administrator\"]", WCTL_KIND_PLAIN, "[administrator]", "[\"administrator\"]"},
    {"[\"a\",\"b\"]", WCTL_KIND_PLAIN, "[a, b]", "[\"a\",\"b\"]"},
    {"[]", WCTL_KIND_PLAIN, "[]", "[]"},
    {"\"q 3/weird\"", WCTL_KIND_PLAIN, "q 3/weird", "\"q 3/weird\""},
    /* AMQP tables: list_queues arguments */
    {"{}", WCTL_KIND_TABLE, "[]", "[]"},
    {"[]", WCTL_KIND_TABLE, "[]", "[]"},
    {"{\"x-message-ttl\":1000,\"x-max-length\":5,\"x-dead-letter-exchange\":\"dlx\"}",
     WCTL_KIND_TABLE, "[{\"x-message-ttl\",1000},{\"x-max-length\",5},{\"x-dead-letter-exchange\",\"dlx\"}]",
     "[[\"x-message-ttl\",\"signedint\",1000],[\"x-max-length\",\"signedint\",5],"
     "[\"x-dead-letter-exchange\",\"longstr\",\"dlx\"]]"},
    {"{\"x-s\":\"str \\\"q\\\" \\\\ \xc3\xa9\",\"x-b\":true,\"x-l\":1099511627776,\"x-neg\":-3}",
     WCTL_KIND_TABLE, "[{\"x-s\",\"str \\\"q\\\" \\\\ \xc3\xa9\"},{\"x-b\",true},{\"x-l\",1099511627776},{\"x-neg\",-3}]",
     "[[\"x-s\",\"longstr\",\"str \\\"q\\\" \\\\ \xc3\xa9\"],[\"x-b\",\"bool\",true],"
     "[\"x-l\",\"long\",1099511627776],[\"x-neg\",\"signedint\",-3]]"},
    {"{\"x-t\":{\"a\":1,\"b\":{\"c\":\"d\"}},\"x-e\":\"\",\"x-n\":null}", WCTL_KIND_TABLE,
     "[{\"x-t\",[{\"a\",1},{\"b\",[{\"c\",\"d\"}]}]},{\"x-e\",[]},{\"x-n\",undefined}]",
     "[[\"x-t\",\"table\",[[\"a\",\"signedint\",1],[\"b\",\"table\",[[\"c\",\"longstr\",\"d\"]]]]],"
     "[\"x-e\",\"longstr\",\"\"],[\"x-n\",\"void\",\"undefined\"]]"},
    /* an AMQP array: rabbitmqctl's JSON turns its {Type, Value} list into an object */
    {"{\"x-a\":[1,\"two\",{\"k\":\"v\"},[3]]}", WCTL_KIND_TABLE,
     "[{\"x-a\",[1,\"two\",[{\"k\",\"v\"}],[3]]}]",
     "[[\"x-a\",\"array\",{\"signedint\":1,\"longstr\":\"two\",\"table\":[[\"k\",\"longstr\",\"v\"]],"
     "\"array\":{\"signedint\":3}}]]"},
    /* Erlang strings: escapes, and a non-printable one as a list of code points */
    {"{\"k\":\"a\\tb\\nc\"}", WCTL_KIND_TABLE, "[{\"k\",\"a\\tb\\nc\"}]",
     "[[\"k\",\"longstr\",\"a\\tb\\nc\"]]"},
    {"{\"k\":\"a\\u0001b\"}", WCTL_KIND_TABLE, "[{\"k\",[97,1,98]}]",
     "[[\"k\",\"longstr\",\"a\\u0001b\"]]"},
    {"{\"x-d\":1.5}", WCTL_KIND_TABLE, "[{\"x-d\",1.5}]", "[[\"x-d\",\"double\",1.5]]"},
    /* list_connections client_properties, nested capabilities */
    {"{\"product\":\"Pika Python Client Library\",\"capabilities\":{\"basic.nack\":true,"
     "\"publisher_confirms\":true},\"connection_name\":\"wctl-conn\"}",
     WCTL_KIND_TABLE,
     "[{\"product\",\"Pika Python Client Library\"},{\"capabilities\",[{\"basic.nack\",true},"
     "{\"publisher_confirms\",true}]},{\"connection_name\",\"wctl-conn\"}]",
     "[[\"product\",\"longstr\",\"Pika Python Client Library\"],[\"capabilities\",\"table\","
     "[[\"basic.nack\",\"bool\",true],[\"publisher_confirms\",\"bool\",true]]],"
     "[\"connection_name\",\"longstr\",\"wctl-conn\"]]"},
    /* the other kinds */
    {"\"AMQP 0-9-1\"", WCTL_KIND_PROTOCOL, "{0,9,1}", "[0,9,1]"},
    {"\"MQTT 3.1\"", WCTL_KIND_PROTOCOL, "MQTT 3.1", "\"MQTT 3.1\""},
    {"{\"rabbit@vm\":\"running\"}", WCTL_KIND_NODE_MAP, "[{rabbit@vm, running}]",
     "{\"rabbit@vm\":\"running\"}"},
    {"{\"max-length\":10,\"dead-letter-exchange\":\"dlx\"}", WCTL_KIND_DEFINITION,
     "{\"dead-letter-exchange\":\"dlx\",\"max-length\":10}",
     "\"{\\\"dead-letter-exchange\\\":\\\"dlx\\\",\\\"max-length\\\":10}\""},
    /* a runtime parameter's value: JSON text as the API gives it, any type */
    {"{\"pattern\":\"^x\",\"priority\":3}", WCTL_KIND_JSON_TEXT, "{\"pattern\":\"^x\",\"priority\":3}",
     "\"{\\\"pattern\\\":\\\"^x\\\",\\\"priority\\\":3}\""},
    {"\"rabbitmq-cluster-id-x\"", WCTL_KIND_JSON_TEXT, "\"rabbitmq-cluster-id-x\"",
     "\"\\\"rabbitmq-cluster-id-x\\\"\""},
    {"[{\"upstream\":\"u\"}]", WCTL_KIND_JSON_TEXT, "[{\"upstream\":\"u\"}]",
     "\"[{\\\"upstream\\\":\\\"u\\\"}]\""},
};

static void test_values(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        json_error_t e;
        json_t *v = json_loads(values[i].json, JSON_DECODE_ANY, &e);
        assert_non_null(v);
        wctl_buf cell = {0}, js = {0};
        wctl_format_cell(&cell, v, values[i].kind, NULL);
        wctl_format_json(&js, v, values[i].kind, NULL);
        assert_string_equal(wctl_buf_str(&cell), values[i].cell);
        assert_string_equal(wctl_buf_str(&js), values[i].js);
        wctl_buf_free(&cell);
        wctl_buf_free(&js);
        json_decref(v);
    }
}

static void test_absent_and_constant(void **state)
{
    (void)state;
    wctl_buf b = {0};
    wctl_format_cell(&b, NULL, WCTL_KIND_PLAIN, NULL);
    assert_string_equal(wctl_buf_str(&b), "");
    wctl_format_json(&b, NULL, WCTL_KIND_PLAIN, NULL);
    assert_string_equal(wctl_buf_str(&b), "\"\"");
    wctl_buf_free(&b);
    wctl_format_cell(&b, NULL, WCTL_KIND_CONSTANT, "exchange");
    wctl_format_json(&b, NULL, WCTL_KIND_CONSTANT, "exchange");
    assert_string_equal(wctl_buf_str(&b), "exchange\"exchange\"");
    wctl_buf_free(&b);
}

/* io:format("~p", [F]) in Erlang/OTP 25 for each F. */
static void test_floats_as_erlang(void **state)
{
    (void)state;
    static const struct {
        double d;
        const char *text;
    } floats[] = {
        {0.1, "0.1"}, {1.0, "1.0"}, {1.5, "1.5"}, {-2.5, "-2.5"}, {0.0, "0.0"}, {-0.0, "-0.0"},
        {0.0001, "0.0001"}, {0.001, "0.001"}, {0.00012, "1.2e-4"}, {0.000123, "1.23e-4"},
        {0.00123, "0.00123"}, {0.0015, "0.0015"}, {1.5e-4, "1.5e-4"}, {1.0e-5, "1.0e-5"},
        {3.0e-10, "3.0e-10"}, {100.0, "100.0"}, {1.0e3, "1.0e3"}, {1.0e4, "1.0e4"},
        {120000.0, "1.2e5"}, {123456789.0, "123456789.0"}, {12345678901.5, "12345678901.5"},
        {1.0e10, "1.0e10"}, {1.5e15, "1.5e15"}, {1234567890123456.0, "1234567890123456.0"},
        {12345678901234567.0, "1.2345678901234568e16"}, {1.0e16, "1.0e16"}, {1.0e22, "1.0e22"},
        {0.9999999177703098, "0.9999999177703098"}, {5.0e-324, "5.0e-324"},
        {1.7976931348623157e308, "1.7976931348623157e308"},
    };
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        wctl_buf b = {0};
        wctl_format_float(&b, floats[i].d);
        assert_string_equal(wctl_buf_str(&b), floats[i].text);
        wctl_buf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_absent_and_constant),
        cmocka_unit_test(test_floats_as_erlang),
    };
    return cmocka_run_group_tests_name("warrenctl_format", tests, NULL, NULL);
}
