/* Scenarios: exchange (declare, delete, e2e bindings, alternate exchanges,
 * reserved names) and routing (direct, fanout, topic and headers matching).
 * Routing checks publish a message per key and read each bound queue with
 * basic.get, so a missing and an extra copy are both caught. */
#define _GNU_SOURCE
#include "conf.h"

#include <stdio.h>
#include <string.h>

static amqp_table_entry_t str_entry(const char *key, const char *value)
{
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes(key);
    e.value.kind = AMQP_FIELD_KIND_UTF8;
    e.value.value.bytes = amqp_cstring_bytes(value);
    return e;
}

static amqp_table_entry_t int_entry(const char *key, int32_t value)
{
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes(key);
    e.value.kind = AMQP_FIELD_KIND_I32;
    e.value.value.i32 = value;
    return e;
}

/* Publishes `key` as both routing key and body to `exchange`, then checks
 * that `queue` holds exactly that message (expect=1) or nothing (expect=0). */
static int route_check(amqp_connection_state_t conn, const char *exchange, const char *queue,
                       const char *key, int expect)
{
    if (conf_publish(conn, 1, exchange, key, key, NULL))
        return 1;
    if (expect) {
        if (conf_get_expect(conn, 1, queue, key))
            return conf_fail("key '%s' should reach %s", key, queue);
        return conf_get_empty(conn, 1, queue);
    }
    if (conf_get_empty(conn, 1, queue))
        return conf_fail("key '%s' should not reach %s", key, queue);
    return 0;
}

typedef struct topic_case {
    const char *key;
    int expect;
} topic_case;

/* One queue bound with `pattern` on a fresh topic exchange; each case's key
 * must or must not reach it. */
static int topic_cases(const char *pattern, const topic_case *cases)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *ex = conf_exchange_name("topic");
    const char *q = conf_queue_name("q");
    int rc = conf_declare_exchange(conn, 1, ex, "topic", conf_no_args);
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q, ex, pattern, conf_no_args);
    for (const topic_case *c = cases; rc == 0 && c->key != NULL; c++)
        if (route_check(conn, ex, q, c->key, c->expect))
            rc = conf_fail("pattern '%s' key '%s': expected %s", pattern, c->key,
                           c->expect ? "match" : "no match");
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ exchange */

static int declare_all_types(void)
{
    static const char *const types[] = {"direct", "fanout", "topic", "headers", NULL};
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    int rc = 0;
    for (int i = 0; rc == 0 && types[i] != NULL; i++) {
        const char *name = conf_exchange_name(types[i]);
        rc = conf_declare_exchange(conn, 1, name, types[i], conf_no_args);
        if (rc == 0) {
            amqp_exchange_declare(conn, 1, amqp_cstring_bytes(name), amqp_cstring_bytes(types[i]),
                                  1, 0, 0, 0, amqp_empty_table);
            rc = conf_rpc_failed(conn, "passive exchange.declare");
        }
        if (rc == 0) {
            amqp_exchange_delete(conn, 1, amqp_cstring_bytes(name), 0);
            rc = conf_rpc_failed(conn, "exchange.delete");
        }
        if (rc == 0) {
            amqp_exchange_declare(conn, 1, amqp_cstring_bytes(name), amqp_cstring_bytes(types[i]),
                                  1, 0, 0, 0, amqp_empty_table);
            rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_NOT_FOUND);
            if (rc == 0)
                rc = conf_channel_open(conn, 1);
        }
    }
    conf_close(conn);
    return rc;
}

static int redeclare_different_type_406(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *ex = conf_exchange_name("x");
    int rc = conf_declare_exchange(conn, 1, ex, "direct", conf_no_args);
    if (rc == 0) {
        amqp_exchange_declare(conn, 1, amqp_cstring_bytes(ex), amqp_cstring_bytes("fanout"), 0, 0,
                              0, 0, amqp_empty_table);
        rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_PRECONDITION_FAILED);
    }
    conf_close(conn);
    return rc;
}

static int unknown_type_503(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_exchange_declare(conn, 1, amqp_cstring_bytes(conf_exchange_name("x")),
                          amqp_cstring_bytes("x-no-such-type"), 0, 0, 0, 0, amqp_empty_table);
    int rc = conf_expect_connection_close(conn, amqp_get_rpc_reply(conn), CONF_COMMAND_INVALID);
    conf_close(conn);
    return rc;
}

static int reserved_amq_prefix_403(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    char name[256];
    snprintf(name, sizeof name, "amq.%s", conf_exchange_name("x"));
    amqp_exchange_declare(conn, 1, amqp_cstring_bytes(name), amqp_cstring_bytes("direct"), 0, 0, 0,
                          0, amqp_empty_table);
    int rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_ACCESS_REFUSED);
    conf_close(conn);
    return rc;
}

static int delete_if_unused_406(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *ex = conf_exchange_name("x");
    const char *q = conf_queue_name("q");
    int rc = conf_declare_exchange(conn, 1, ex, "direct", conf_no_args);
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q, ex, "k", conf_no_args);
    if (rc == 0) {
        amqp_exchange_delete(conn, 1, amqp_cstring_bytes(ex), 1);
        rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_PRECONDITION_FAILED);
    }
    if (rc == 0)
        rc = conf_channel_open(conn, 1);
    if (rc == 0)
        rc = route_check(conn, ex, q, "k", 1);      /* still there, still bound */
    conf_close(conn);
    return rc;
}

static int internal_publish_403(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *ex = conf_exchange_name("internal");
    amqp_exchange_declare(conn, 1, amqp_cstring_bytes(ex), amqp_cstring_bytes("fanout"), 0, 0, 0, 1,
                          amqp_empty_table);
    int rc = conf_rpc_failed(conn, "exchange.declare internal");
    if (rc == 0)
        rc = conf_publish(conn, 1, ex, "", "x", NULL);
    if (rc == 0)
        rc = conf_expect_channel_close(conn, 1, conf_sync(conn, 1), CONF_ACCESS_REFUSED);
    conf_close(conn);
    return rc;
}

static int exchange_to_exchange_binding(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *src = conf_exchange_name("src");
    const char *dst = conf_exchange_name("dst");
    const char *q = conf_queue_name("q");
    int rc = conf_declare_exchange(conn, 1, src, "direct", conf_no_args);
    if (rc == 0)
        rc = conf_declare_exchange(conn, 1, dst, "fanout", conf_no_args);
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q, dst, "", conf_no_args);
    if (rc == 0) {
        amqp_exchange_bind(conn, 1, amqp_cstring_bytes(dst), amqp_cstring_bytes(src),
                           amqp_cstring_bytes("k"), amqp_empty_table);
        rc = conf_rpc_failed(conn, "exchange.bind");
    }
    if (rc == 0)
        rc = route_check(conn, src, q, "k", 1);
    if (rc == 0)
        rc = route_check(conn, src, q, "other", 0);
    if (rc == 0) {
        amqp_exchange_unbind(conn, 1, amqp_cstring_bytes(dst), amqp_cstring_bytes(src),
                             amqp_cstring_bytes("k"), amqp_empty_table);
        rc = conf_rpc_failed(conn, "exchange.unbind");
    }
    if (rc == 0)
        rc = route_check(conn, src, q, "k", 0);
    conf_close(conn);
    return rc;
}

static int alternate_exchange(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *ex = conf_exchange_name("main");
    const char *ae = conf_exchange_name("ae");
    const char *q = conf_queue_name("q");
    const char *q_ae = conf_queue_name("q-ae");
    amqp_table_entry_t arg = str_entry("alternate-exchange", ae);
    amqp_table_t args = {1, &arg};
    int rc = conf_declare_exchange(conn, 1, ae, "fanout", conf_no_args);
    if (rc == 0)
        rc = conf_declare_exchange(conn, 1, ex, "direct", args);
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, q_ae, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q, ex, "k", conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q_ae, ae, "", conf_no_args);
    if (rc == 0)
        rc = route_check(conn, ex, q, "k", 1);
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q_ae);
    if (rc == 0)
        rc = route_check(conn, ex, q_ae, "unrouted", 1);
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    conf_close(conn);
    return rc;
}

static int auto_delete_after_last_unbind(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *ex = conf_exchange_name("ad");
    const char *q = conf_queue_name("q");
    amqp_exchange_declare(conn, 1, amqp_cstring_bytes(ex), amqp_cstring_bytes("direct"), 0, 0, 1, 0,
                          amqp_empty_table);
    int rc = conf_rpc_failed(conn, "exchange.declare auto_delete");
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q, ex, "k", conf_no_args);
    if (rc == 0) {
        amqp_queue_unbind(conn, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(ex),
                          amqp_cstring_bytes("k"), amqp_empty_table);
        rc = conf_rpc_failed(conn, "queue.unbind");
    }
    if (rc == 0) {
        amqp_exchange_declare(conn, 1, amqp_cstring_bytes(ex), amqp_cstring_bytes("direct"), 1, 0,
                              0, 0, amqp_empty_table);
        rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_NOT_FOUND);
    }
    conf_close(conn);
    return rc;
}

static int default_exchange_bind_403(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("q");
    int rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0) {
        amqp_queue_bind(conn, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(""),
                        amqp_cstring_bytes("k"), amqp_empty_table);
        rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_ACCESS_REFUSED);
    }
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ routing */

static int direct_exact_key(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *ex = conf_exchange_name("d");
    const char *q = conf_queue_name("q");
    int rc = conf_declare_exchange(conn, 1, ex, "direct", conf_no_args);
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q, ex, "a.b", conf_no_args);
    static const topic_case cases[] = {
        {"a.b", 1}, {"A.B", 0}, {"a.b ", 0}, {"a", 0}, {"a.b.c", 0}, {"", 0}, {NULL, 0},
    };
    for (const topic_case *c = cases; rc == 0 && c->key != NULL; c++)
        rc = route_check(conn, ex, q, c->key, c->expect);
    conf_close(conn);
    return rc;
}

static int fanout_ignores_key(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *ex = conf_exchange_name("f");
    const char *q1 = conf_queue_name("q1");
    const char *q2 = conf_queue_name("q2");
    int rc = conf_declare_exchange(conn, 1, ex, "fanout", conf_no_args);
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, q1, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, q2, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q1, ex, "x", conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q2, ex, "", conf_no_args);
    if (rc == 0)
        rc = conf_publish(conn, 1, ex, "anything", "m", NULL);
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q1, "m");
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q2, "m");
    conf_close(conn);
    return rc;
}

static int topic_hash_zero_words(void)
{
    static const topic_case cases[] = {
        {"a", 1}, {"a.b", 1}, {"a.b.c", 1}, {"b.a", 0}, {"", 0}, {"ab", 0}, {NULL, 0},
    };
    return topic_cases("a.#", cases);
}

static int topic_hash_middle(void)
{
    static const topic_case cases[] = {
        {"a.z", 1}, {"a.b.z", 1}, {"a.b.c.z", 1}, {"a.z.q", 0}, {"z", 0}, {NULL, 0},
    };
    return topic_cases("a.#.z", cases);
}

static int topic_star_exactly_one(void)
{
    static const topic_case cases[] = {
        {"a.b", 1}, {"a.", 1}, {"a", 0}, {"a.b.c", 0}, {"b.a", 0}, {NULL, 0},
    };
    return topic_cases("a.*", cases);
}

static int topic_hash_matches_everything(void)
{
    static const topic_case cases[] = {
        {"", 1}, {"a", 1}, {"a.b.c", 1}, {"..", 1}, {NULL, 0},
    };
    return topic_cases("#", cases);
}

static int topic_empty_words(void)
{
    static const topic_case cases[] = {
        {"a..b", 1}, {"a.x.b", 1}, {"a.b", 0}, {"a...b", 0}, {NULL, 0},
    };
    return topic_cases("a.*.b", cases);
}

static int topic_star_hash_combo(void)
{
    static const topic_case cases[] = {
        {"x", 1}, {"x.y", 1}, {"x.y.z", 1}, {"", 0}, {NULL, 0},
    };
    return topic_cases("*.#", cases);
}

static int headers_match_all_any(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *ex = conf_exchange_name("h");
    const char *q_all = conf_queue_name("all");
    const char *q_any = conf_queue_name("any");
    amqp_table_entry_t all_args[] = {str_entry("x-match", "all"), int_entry("a", 1), str_entry("b", "x")};
    amqp_table_entry_t any_args[] = {str_entry("x-match", "any"), int_entry("a", 1), str_entry("b", "x")};
    int rc = conf_declare_exchange(conn, 1, ex, "headers", conf_no_args);
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, q_all, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, q_any, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q_all, ex, "", (amqp_table_t){3, all_args});
    if (rc == 0)
        rc = conf_bind(conn, 1, q_any, ex, "", (amqp_table_t){3, any_args});

    amqp_table_entry_t both[] = {int_entry("a", 1), str_entry("b", "x"), str_entry("c", "extra")};
    amqp_table_entry_t only_a[] = {int_entry("a", 1)};
    amqp_table_entry_t wrong[] = {int_entry("a", 2), str_entry("b", "y")};
    struct { amqp_table_t headers; const char *body; int to_all, to_any; } cases[] = {
        {{3, both}, "both", 1, 1},
        {{1, only_a}, "only-a", 0, 1},
        {{2, wrong}, "wrong", 0, 0},
        {{0, NULL}, "none", 0, 0},
    };
    for (size_t i = 0; rc == 0 && i < sizeof cases / sizeof cases[0]; i++) {
        amqp_basic_properties_t props = {._flags = AMQP_BASIC_HEADERS_FLAG, .headers = cases[i].headers};
        rc = conf_publish(conn, 1, ex, "", cases[i].body, &props);
        if (rc == 0)
            rc = cases[i].to_all ? conf_get_expect(conn, 1, q_all, cases[i].body) : conf_get_empty(conn, 1, q_all);
        if (rc == 0)
            rc = cases[i].to_any ? conf_get_expect(conn, 1, q_any, cases[i].body) : conf_get_empty(conn, 1, q_any);
        if (rc != 0)
            conf_fail("headers case '%s'", cases[i].body);
    }
    conf_close(conn);
    return rc;
}

static int default_exchange_by_queue_name(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("q");
    int rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "via-default", NULL);
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "via-default");
    if (rc == 0)
        rc = conf_publish(conn, 1, "amq.direct", q, "not-bound", NULL);
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    conf_close(conn);
    return rc;
}

static int multiple_matching_bindings_one_copy(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *ex = conf_exchange_name("t");
    const char *q = conf_queue_name("q");
    int rc = conf_declare_exchange(conn, 1, ex, "topic", conf_no_args);
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q, ex, "a.*", conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q, ex, "#", conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q, ex, "a.b", conf_no_args);
    if (rc == 0)
        rc = route_check(conn, ex, q, "a.b", 1);    /* route_check also wants exactly one */
    conf_close(conn);
    return rc;
}

const conf_scenario conf_exchange_scenarios[] = {
    {"exchange.declare_all_types", 1, declare_all_types},
    {"exchange.redeclare_different_type_406", 0, redeclare_different_type_406},
    {"exchange.unknown_type_503", 0, unknown_type_503},
    {"exchange.reserved_amq_prefix_403", 0, reserved_amq_prefix_403},
    {"exchange.delete_if_unused_406", 0, delete_if_unused_406},
    {"exchange.internal_publish_403", 0, internal_publish_403},
    {"exchange.exchange_to_exchange_binding", 0, exchange_to_exchange_binding},
    {"exchange.alternate_exchange", 0, alternate_exchange},
    {"exchange.auto_delete_after_last_unbind", 0, auto_delete_after_last_unbind},
    {"exchange.default_exchange_bind_403", 0, default_exchange_bind_403},
    {"routing.direct_exact_key", 1, direct_exact_key},
    {"routing.fanout_ignores_key", 0, fanout_ignores_key},
    {"routing.topic_hash_zero_words", 1, topic_hash_zero_words},
    {"routing.topic_hash_middle", 0, topic_hash_middle},
    {"routing.topic_star_exactly_one", 0, topic_star_exactly_one},
    {"routing.topic_hash_matches_everything", 0, topic_hash_matches_everything},
    {"routing.topic_empty_words", 0, topic_empty_words},
    {"routing.topic_star_hash_combo", 0, topic_star_hash_combo},
    {"routing.headers_match_all_any", 0, headers_match_all_any},
    {"routing.default_exchange_by_queue_name", 0, default_exchange_by_queue_name},
    {"routing.multiple_matching_bindings_one_copy", 0, multiple_matching_bindings_one_copy},
    {NULL, 0, NULL},
};
