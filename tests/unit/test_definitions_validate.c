/* definitions: every kind of refusal names the item and changes nothing;
 * a valid document applies, exports back in RabbitMQ's shape, and imports
 * again without change; runtime parameters' validation texts (RabbitMQ
 * 3.10.8's). Runs against a real server (fresh data dir). */
#include "test_broker_util.h"

#include <sqlite3.h>

#include "../../definitions/definitions.h"

/* A document with one of everything, in vhost "dv". */
static const char *const base_doc =
    "{\"users\":[{\"name\":\"du\",\"password_hash\":\"bw/ZenBjZLWyOIVbJ664X1fHMYvmgBAyXqjSfR8tudJZfedy\","
    "\"hashing_algorithm\":\"rabbit_password_hashing_sha256\",\"tags\":[\"management\"]}],"
    "\"vhosts\":[{\"name\":\"dv\"}],"
    "\"permissions\":[{\"user\":\"du\",\"vhost\":\"dv\",\"configure\":\".*\",\"write\":\".*\",\"read\":\".*\"}],"
    "\"topic_permissions\":[{\"user\":\"du\",\"vhost\":\"dv\",\"exchange\":\"amq.topic\",\"write\":\"^a\","
    "\"read\":\".*\"}],"
    "\"policies\":[{\"vhost\":\"dv\",\"name\":\"pol\",\"pattern\":\"^q\",\"apply-to\":\"queues\","
    "\"definition\":{\"max-length\":5},\"priority\":1}],"
    "\"parameters\":[{\"value\":{\"pattern\":\"^q\",\"definition\":{\"max-length\":3},\"priority\":0,"
    "\"apply-to\":\"queues\"},\"vhost\":\"dv\",\"component\":\"operator_policy\",\"name\":\"op\"},"
    "{\"value\":{\"uri\":\"amqp://up\"},\"vhost\":\"dv\",\"component\":\"federation-upstream\","
    "\"name\":\"up\"}],"
    "\"global_parameters\":[{\"name\":\"dg\",\"value\":[1,\"two\"]}],"
    "\"exchanges\":[{\"name\":\"ex\",\"vhost\":\"dv\",\"type\":\"topic\",\"durable\":true,"
    "\"auto_delete\":false,\"internal\":false,\"arguments\":{}}],"
    "\"queues\":[{\"name\":\"q1\",\"vhost\":\"dv\",\"durable\":true,\"auto_delete\":false,"
    "\"arguments\":{\"x-message-ttl\":1000}}],"
    "\"bindings\":[{\"source\":\"ex\",\"vhost\":\"dv\",\"destination\":\"q1\","
    "\"destination_type\":\"queue\",\"routing_key\":\"a.#\",\"arguments\":{}}]}";

static json_t *doc(void)
{
    json_t *d = json_loads(base_doc, 0, NULL);
    assert_non_null(d);
    return d;
}

static json_t *item(json_t *d, const char *section)
{
    return json_array_get(json_object_get(d, section), 0);
}

/* Imports `d` (consumed), expecting a refusal whose reason contains `want`;
 * the broker must be as before. */
static void refused(json_t *d, const char *want)
{
    json_t *before_doc = defs_export(srv, NULL);
    char *before = json_dumps(before_doc, JSON_SORT_KEYS);
    defs_error err;
    assert_false(defs_import(srv, d, NULL, &err));
    json_decref(d);
    if (!strstr(err.reason, want))
        fail_msg("reason %s lacks %s", err.reason, want);
    json_t *after_doc = defs_export(srv, NULL);
    char *after = json_dumps(after_doc, JSON_SORT_KEYS);
    assert_string_equal(before, after);
    assert_null(server_vhost(srv, AMQP_CSTR("dv")));
    free(before);
    free(after);
    json_decref(before_doc);
    json_decref(after_doc);
}

static void test_syntax_error_line_column(void **state)
{
    (void)state;
    const char *text = "{\"queues\": [\n  {\"name\": \"a\",}\n]}";
    defs_error err;
    assert_false(defs_import_text(srv, text, strlen(text), NULL, &err));
    assert_int_equal(err.line, 2);
    assert_int_equal(err.column, 16);
    assert_non_null(strstr(err.reason, "JSON syntax error"));
}

static void test_not_an_object(void **state)
{
    (void)state;
    refused(json_array(), "definitions must be a JSON object");
    refused(json_pack("{s:s}", "queues", "no"), "queues must be an array");
}

static void test_unknown_exchange_type(void **state)
{
    (void)state;
    json_t *d = doc();
    json_object_set_new(item(d, "exchanges"), "type", json_string("x-bogus"));
    refused(d, "exchange 'ex' in vhost 'dv': unknown exchange type 'x-bogus'");
}

static void test_binding_source_missing(void **state)
{
    (void)state;
    json_t *d = doc();
    json_object_set_new(item(d, "bindings"), "source", json_string("nowhere"));
    refused(d, "binding of exchange 'nowhere' to queue 'q1' in vhost 'dv': source exchange "
               "'nowhere' does not exist");
}

static void test_binding_destination_missing(void **state)
{
    (void)state;
    json_t *d = doc();
    json_object_set_new(item(d, "bindings"), "destination", json_string("noq"));
    refused(d, "destination queue 'noq' does not exist");
    d = doc();
    json_object_set_new(item(d, "bindings"), "destination_type", json_string("exchange"));
    refused(d, "destination exchange 'q1' does not exist");
}

static void test_argument_wrong_type(void **state)
{
    (void)state;
    json_t *d = doc();
    json_object_set_new(json_object_get(item(d, "queues"), "arguments"), "x-message-ttl",
                        json_string("1000"));
    refused(d, "queue 'q1' in vhost 'dv': x-message-ttl must be an integer");
    d = doc();
    json_object_set_new(json_object_get(item(d, "queues"), "arguments"), "x-max-length",
                        json_integer(-1));
    refused(d, "queue 'q1' in vhost 'dv': invalid arg 'x-max-length'");
    d = doc();
    json_object_set_new(item(d, "queues"), "durable", json_string("yes"));
    refused(d, "queue 'q1' in vhost 'dv': durable must be true or false");
}

static void test_policy_bad_regex(void **state)
{
    (void)state;
    json_t *d = doc();
    json_object_set_new(item(d, "policies"), "pattern", json_string("(unclosed"));
    refused(d, "policy 'pol' in vhost 'dv': pattern should be regular expression");
    d = doc();
    json_object_set_new(item(d, "policies"), "definition", json_pack("{s:i}", "message-ttl", -1));
    refused(d, "policy 'pol' in vhost 'dv': -1 is not a valid message TTL");
}

static void test_bad_hash_algorithm(void **state)
{
    (void)state;
    json_t *d = doc();
    json_object_set_new(item(d, "users"), "hashing_algorithm", json_string("md4"));
    refused(d, "user 'du': unknown hashing algorithm 'md4'");
}

static void test_unknown_vhost(void **state)
{
    (void)state;
    json_t *d = doc();
    json_object_set_new(item(d, "queues"), "vhost", json_string("nv"));
    refused(d, "queue 'q1' in vhost 'nv': vhost 'nv' does not exist");
    d = doc();
    json_object_set_new(item(d, "permissions"), "user", json_string("ghost"));
    refused(d, "permission of user 'ghost' in vhost 'dv': user 'ghost' does not exist");
}

static void test_reserved_names(void **state)
{
    (void)state;
    json_t *d = doc();
    json_object_set_new(item(d, "queues"), "name", json_string("amq.mine"));
    refused(d, "names starting with 'amq.' are reserved");
    char longname[300];
    memset(longname, 'n', 256);
    longname[256] = 0;
    d = doc();
    json_object_set_new(item(d, "exchanges"), "name", json_string(longname));
    refused(d, "exchanges[0]: name 'nnnn");
}

/* Valid: applies; the export shows it; a second import changes nothing. */
static void test_apply_export_reimport(void **state)
{
    (void)state;
    json_t *d = doc();
    defs_error err;
    assert_true(defs_import(srv, d, NULL, &err));
    json_decref(d);
    vhost *v = server_vhost(srv, AMQP_CSTR("dv"));
    assert_non_null(v);
    assert_non_null(vhost_queue_find(v, AMQP_CSTR("q1")));
    assert_non_null(access_find_user(server_access(srv), "du"));
    policy_spec op;
    assert_true(policy_get(v, "op", true, &op));
    assert_int_equal(queue_get_args(vhost_queue_find(v, AMQP_CSTR("q1")))->max_length, 3);
    param_spec kept;
    assert_true(param_get(vhost_params(v), "federation-upstream", "up", &kept));
    assert_string_equal(kept.value, "{\"uri\":\"amqp://up\"}");
    assert_true(param_get(server_params(srv), NULL, "dg", &kept));
    assert_string_equal(kept.value, "[1,\"two\"]");
    json_t *once = defs_export(srv, NULL);
    assert_true(defs_import(srv, once, NULL, &err));
    json_t *twice = defs_export(srv, NULL);
    assert_true(json_equal(once, twice));
    json_t *per = defs_export(srv, v);
    assert_null(json_object_get(per, "users"));
    assert_null(json_object_get(item(per, "queues"), "vhost"));
    assert_string_equal(json_string_value(json_object_get(item(per, "bindings"), "routing_key")),
                        "a.#");
    assert_true(defs_import(srv, per, v, &err));
    json_decref(once);
    json_decref(twice);
    json_decref(per);
    char why[300];
    assert_true(admin_delete_vhost(srv, "dv", why, sizeof why));
    assert_true(access_delete_user(server_access(srv), "du", why, sizeof why));
    assert_true(param_delete(server_params(srv), NULL, "dg"));
}

/* The store refuses a parameter half-way: the operator policy, the global
 * parameter and the vhost the import made are gone again. */
static void test_parameter_store_failure_undone(void **state)
{
    (void)state;
    char path[128], *why = NULL;
    sqlite3 *db;
    snprintf(path, sizeof path, "%s/metadata.db", dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TRIGGER boom BEFORE INSERT ON parameters WHEN "
                                      "NEW.name = 'up' BEGIN SELECT RAISE(ABORT, 'boom'); END;",
                                  NULL, NULL, &why),
                     SQLITE_OK);
    refused(doc(), "parameter 'up' of component 'federation-upstream' in vhost 'dv': could not "
                   "store the parameter");
    param_spec kept;
    assert_false(param_get(server_params(srv), NULL, "dg", &kept));
    assert_int_equal(sqlite3_exec(db, "DROP TRIGGER boom", NULL, NULL, &why), SQLITE_OK);
    sqlite3_close(db);
}

/* A value's check, as RabbitMQ 3.10.8's API words it. */
static void expect_text(const char *component, const char *value, const char *want)
{
    char why[1024];
    json_t *v = json_loads(value, JSON_DECODE_ANY, NULL);
    assert_non_null(v);
    bool ok = defs_param_validate(component, "p", v, why, sizeof why);
    json_decref(v);
    if (!want) {
        if (!ok)
            fail_msg("%s %s refused: %s", component, value, why);
        return;
    }
    assert_false(ok);
    assert_string_equal(why, want);
}

static void test_parameter_texts(void **state)
{
    (void)state;
    expect_text("federation-upstream", "{\"uri\":[\"amqp://a\",\"amqps://b\"]}", NULL);
    /* rabbitmq_federation's shared_validation: unknown keys, then each key
     * by its kind, the last checked first, the mandatory uri last */
    expect_text("federation-upstream", "{\"uri\":[\"amqp://a\",\"amqps://b\"],\"x\":1}",
                "Validation failed\n\nUnrecognised terms [{<<\"x\">>,1}] in p\n");
    expect_text("federation-upstream", "{\"prefetch-count\":\"x\",\"y\":2}",
                "Validation failed\n\nUnrecognised terms [{<<\"y\">>,2}] in p\n"
                "prefetch-count should be a number, actually was <<\"x\">>\n"
                "Key \"uri\" not found in p\n");
    expect_text("federation-upstream-set", "[{\"upstream\":\"a\",\"z\":1}]",
                "Validation failed\n\nUnrecognised terms [{<<\"z\">>,1}] in p\n");
    expect_text("federation-upstream-set", "[]", NULL);
    expect_text("shovel", "{\"src-protocol\":\"amqp10\",\"src-address\":\"a\",\"src-uri\":\"amqp://\","
                          "\"dest-uri\":\"amqp://\",\"dest-queue\":\"q\"}", NULL);
    expect_text("operator_policy", "{\"pattern\":\"x\",\"definition\":{\"max-length\":1},"
                                   "\"priority\":2.0}", NULL);
    expect_text("nosuchcomp", "{}", "Validation failed\n\ncomponent nosuchcomp not found\n");
    expect_text("policy", "{}", "policies may not be set using this method");
    expect_text("federation-upstream", "[1]",
                "Validation failed\n\nUnrecognised terms [1] in p\nKey \"uri\" not found in p\n");
    expect_text("shovel", "{\"src-protocol\":\"amqp10\",\"dest-protocol\":\"amqp10\","
                          "\"src-uri\":\"amqp://\",\"dest-uri\":\"amqp://\"}",
                "Validation failed\n\nKey \"src-address\" not found in p\n"
                "Key \"dest-address\" not found in p\n");
    expect_text("shovel", "7", "Validation failed\n\np not a list 7\n");
    expect_text("operator_policy", "{\"pattern\":\"(\",\"definition\":{\"bogus\":1},\"priority\":\"x\","
                                   "\"apply-to\":\"nope\",\"z\":null}",
                "Validation failed\n\nUnrecognised terms [{<<\"z\">>,null}] in p\n"
                "[{<<\"bogus\">>,1}] are not recognised policy settings\n"
                "apply-to 'nope' unrecognised; should be one of: 'queues', 'classic_queues',  "
                "'quorum_queues', 'streams', 'exchanges', or 'all'\n"
                "pattern should be regular expression but is invalid: {\"missing )\",1}\n"
                "priority should be a number, actually was <<\"x\">>\n");
}

/* Validation passes but the store refuses a row half-way (a trigger
 * stands in for a store error): the import fails and what it had done is
 * undone -- in memory and in the store. */
static void test_store_failure_undone(void **state)
{
    (void)state;
    char path[128], *why = NULL;
    sqlite3 *db;
    snprintf(path, sizeof path, "%s/metadata.db", dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TRIGGER boom BEFORE INSERT ON queues WHEN "
                                      "NEW.name = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END;",
                                  NULL, NULL, &why),
                     SQLITE_OK);
    json_t *d = doc();
    json_array_append_new(json_object_get(d, "queues"),
                          json_pack("{s:s,s:s,s:b}", "name", "boom", "vhost", "dv", "durable", 1));
    refused(d, "queue 'boom' in vhost 'dv': the store refused it");
    assert_null(access_find_user(server_access(srv), "du"));
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM vhosts WHERE name = 'dv') "
                                            "+ (SELECT count(*) FROM queues WHERE vhost = 'dv') "
                                            "+ (SELECT count(*) FROM users WHERE name = 'du')",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 0);
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_exec(db, "DROP TRIGGER boom", NULL, NULL, &why), SQLITE_OK);
    sqlite3_close(db);
}

/* An exchange the broker has keeps its type: a binding is checked against
 * that one, not the document's redeclaration. */
static void test_existing_exchange_type_counts(void **state)
{
    (void)state;
    json_t *d = json_loads("{\"exchanges\":[{\"name\":\"hx\",\"vhost\":\"/\",\"type\":"
                           "\"headers\"}]}", 0, NULL);
    defs_error err;
    assert_true(defs_import(srv, d, NULL, &err));
    json_decref(d);
    d = json_loads("{\"exchanges\":[{\"name\":\"hx\",\"vhost\":\"/\",\"type\":\"direct\"}],"
                   "\"queues\":[{\"name\":\"hq\",\"vhost\":\"/\"}],"
                   "\"bindings\":[{\"source\":\"hx\",\"vhost\":\"/\",\"destination\":\"hq\","
                   "\"destination_type\":\"queue\",\"arguments\":{\"x-match\":\"some\"}}]}",
                   0, NULL);
    assert_false(defs_import(srv, d, NULL, &err));
    json_decref(d);
    assert_non_null(strstr(err.reason, "x-match must be all, any"));
    amqp_error aerr;
    assert_int_equal(admin_exchange_delete(server_vhost(srv, AMQP_CSTR("/")), AMQP_CSTR("hx"), false,
                                           &aerr),
                     AMQP_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_syntax_error_line_column),
        cmocka_unit_test(test_not_an_object),
        cmocka_unit_test(test_unknown_exchange_type),
        cmocka_unit_test(test_binding_source_missing),
        cmocka_unit_test(test_binding_destination_missing),
        cmocka_unit_test(test_argument_wrong_type),
        cmocka_unit_test(test_policy_bad_regex),
        cmocka_unit_test(test_bad_hash_algorithm),
        cmocka_unit_test(test_unknown_vhost),
        cmocka_unit_test(test_reserved_names),
        cmocka_unit_test(test_apply_export_reimport),
        cmocka_unit_test(test_store_failure_undone),
        cmocka_unit_test(test_existing_exchange_type_counts),
        cmocka_unit_test(test_parameter_store_failure_undone),
        cmocka_unit_test(test_parameter_texts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
