/* Scenarios: queue semantics -- server-named, exclusive, auto-delete,
 * passive declare, the counts declare-ok / purge-ok / delete-ok report,
 * conditional deletes, argument equivalence and unbinding. */
#define _GNU_SOURCE
#include "conf.h"

#include <stdio.h>
#include <string.h>

static int publish_n(amqp_connection_state_t conn, const char *queue, int n)
{
    for (int i = 0; i < n; i++) {
        char body[32];
        snprintf(body, sizeof body, "m%d", i);
        if (conf_publish(conn, 1, "", queue, body, NULL))
            return 1;
    }
    return 0;
}

/* Polls a passive declare until it fails with 404 (the queue is gone) or
 * `ms` elapse; deletion after the last consumer or owner can lag a little. */
static int wait_queue_gone(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue, int ms)
{
    long long until = conf_now_ms() + ms;
    for (;;) {
        amqp_queue_declare(conn, ch, amqp_cstring_bytes(queue), 1, 0, 0, 0, amqp_empty_table);
        amqp_rpc_reply_t r = amqp_get_rpc_reply(conn);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            if (conf_expect_channel_close(conn, ch, r, CONF_NOT_FOUND))
                return 1;
            return conf_channel_open(conn, ch);
        }
        if (conf_now_ms() >= until)
            return conf_fail("queue %s still exists after %d ms", queue, ms);
        conf_sleep_ms(50);
    }
}

static int declare_server_named(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_queue_declare_ok_t *ok =
        amqp_queue_declare(conn, 1, amqp_empty_bytes, 0, 0, 1, 1, amqp_empty_table);
    if (ok == NULL) {
        conf_rpc_failed(conn, "queue.declare ''");
        conf_close(conn);
        return 1;
    }
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)ok->queue.len, (const char *)ok->queue.bytes);
    int rc = 0;
    if (strncmp(name, "amq.gen-", 8) != 0 || strlen(name) < 20)
        rc = conf_fail("server-named queue '%s' does not look like amq.gen-...", name);
    if (rc == 0 && (ok->message_count != 0 || ok->consumer_count != 0))
        rc = conf_fail("fresh queue reports %u messages %u consumers", ok->message_count, ok->consumer_count);
    if (rc == 0)
        rc = conf_publish(conn, 1, "", name, "hello", NULL);
    if (rc == 0)
        rc = conf_get_expect(conn, 1, name, "hello");
    conf_close(conn);
    return rc;
}

static int exclusive_other_connection_405(void)
{
    amqp_connection_state_t owner = conf_open();
    amqp_connection_state_t other = conf_open();
    if (owner == NULL || other == NULL) {
        conf_close(owner);
        conf_close(other);
        return 1;
    }
    const char *q = conf_queue_name("excl");
    int rc = conf_declare_queue(owner, 1, q, 0, 1, 0, conf_no_args);
    if (rc == 0) {
        amqp_queue_declare(other, 1, amqp_cstring_bytes(q), 1, 0, 0, 0, amqp_empty_table);
        rc = conf_expect_channel_close(other, 1, amqp_get_rpc_reply(other), CONF_RESOURCE_LOCKED);
    }
    if (rc == 0)
        rc = conf_channel_open(other, 1);
    if (rc == 0) {
        amqp_basic_consume(other, 1, amqp_cstring_bytes(q), amqp_empty_bytes, 0, 1, 0, amqp_empty_table);
        rc = conf_expect_channel_close(other, 1, amqp_get_rpc_reply(other), CONF_RESOURCE_LOCKED);
    }
    if (rc == 0)   /* the owner still uses it on another channel */
        rc = conf_channel_open(owner, 2);
    if (rc == 0)
        rc = conf_publish(owner, 2, "", q, "mine", NULL);
    if (rc == 0)
        rc = conf_get_expect(owner, 2, q, "mine");
    conf_close(owner);
    conf_close(other);
    return rc;
}

static int exclusive_deleted_on_close(void)
{
    amqp_connection_state_t owner = conf_open();
    if (owner == NULL)
        return 1;
    const char *q = conf_queue_name("excl");
    int rc = conf_declare_queue(owner, 1, q, 0, 1, 0, conf_no_args);
    conf_close(owner);
    if (rc != 0)
        return rc;
    amqp_connection_state_t other = conf_open();
    if (other == NULL)
        return 1;
    rc = wait_queue_gone(other, 1, q, 2000);
    conf_close(other);
    return rc;
}

static int auto_delete_after_last_consumer(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("ad");
    int rc = conf_declare_queue(conn, 1, q, 0, 0, 1, conf_no_args);
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "c1", 1, 0, NULL);
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "c2", 1, 0, NULL);
    if (rc == 0) {
        amqp_basic_cancel(conn, 1, amqp_cstring_bytes("c1"));
        rc = conf_rpc_failed(conn, "basic.cancel c1");
    }
    if (rc == 0 && conf_queue_count(conn, 1, q) < 0)    /* one consumer left: still there */
        rc = conf_fail("auto-delete queue vanished while a consumer remained");
    if (rc == 0) {
        amqp_basic_cancel(conn, 1, amqp_cstring_bytes("c2"));
        rc = conf_rpc_failed(conn, "basic.cancel c2");
    }
    if (rc == 0)
        rc = wait_queue_gone(conn, 1, q, 2000);
    conf_close(conn);
    return rc;
}

static int auto_delete_without_consumers_stays(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("ad");
    int rc = conf_declare_queue(conn, 1, q, 0, 0, 1, conf_no_args);
    conf_close(conn);
    if (rc != 0)
        return rc;
    conn = conf_open();
    if (conn == NULL)
        return 1;
    if (conf_queue_count(conn, 1, q) != 0)
        rc = conf_fail("never-consumed auto-delete queue is gone after its declarer left");
    conf_close(conn);
    return rc;
}

static int declare_ok_counts(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("q");
    int rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)    /* confirms make sure the messages are in the queue */
        rc = conf_confirm_select(conn, 1);
    if (rc == 0)
        rc = publish_n(conn, q, 3);
    if (rc == 0)
        rc = conf_wait_confirms(conn, 1, 3);
    amqp_queue_declare_ok_t *ok = NULL;
    if (rc == 0) {
        ok = amqp_queue_declare(conn, 1, amqp_cstring_bytes(q), 1, 0, 0, 0, amqp_empty_table);
        rc = conf_rpc_failed(conn, "passive declare");
    }
    if (rc == 0 && (ok->message_count != 3 || ok->consumer_count != 0))
        rc = conf_fail("passive declare: %u messages %u consumers, expected 3/0", ok->message_count,
                       ok->consumer_count);
    if (rc == 0)
        rc = conf_channel_open(conn, 2);
    if (rc == 0)
        rc = conf_consume(conn, 2, q, NULL, 0, 0, NULL);     /* takes all 3, unacked */
    if (rc == 0) {
        conf_sleep_ms(100);
        ok = amqp_queue_declare(conn, 1, amqp_cstring_bytes(q), 0, 0, 0, 0, amqp_empty_table);
        rc = conf_rpc_failed(conn, "redeclare");
    }
    if (rc == 0 && (ok->message_count != 0 || ok->consumer_count != 1))
        rc = conf_fail("with consumer: %u ready %u consumers, expected 0/1", ok->message_count,
                       ok->consumer_count);
    conf_close(conn);
    return rc;
}

static int purge_returns_count(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("q");
    int rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = publish_n(conn, q, 4);
    amqp_queue_purge_ok_t *ok = NULL;
    if (rc == 0) {
        ok = amqp_queue_purge(conn, 1, amqp_cstring_bytes(q));
        rc = conf_rpc_failed(conn, "queue.purge");
    }
    if (rc == 0 && ok->message_count != 4)
        rc = conf_fail("purge-ok message_count %u, expected 4", ok->message_count);
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    if (rc == 0) {
        ok = amqp_queue_purge(conn, 1, amqp_cstring_bytes(q));
        rc = conf_rpc_failed(conn, "second queue.purge");
    }
    if (rc == 0 && ok->message_count != 0)
        rc = conf_fail("second purge-ok message_count %u, expected 0", ok->message_count);
    conf_close(conn);
    return rc;
}

static int delete_returns_count(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("q");
    int rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = publish_n(conn, q, 5);
    amqp_queue_delete_ok_t *ok = NULL;
    if (rc == 0) {
        ok = amqp_queue_delete(conn, 1, amqp_cstring_bytes(q), 0, 0);
        rc = conf_rpc_failed(conn, "queue.delete");
    }
    if (rc == 0 && ok->message_count != 5)
        rc = conf_fail("delete-ok message_count %u, expected 5", ok->message_count);
    if (rc == 0)
        rc = wait_queue_gone(conn, 1, q, 0);
    conf_close(conn);
    return rc;
}

static int delete_missing_ok(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_queue_delete_ok_t *ok = amqp_queue_delete(conn, 1, amqp_cstring_bytes(conf_name("never")), 0, 0);
    int rc = conf_rpc_failed(conn, "queue.delete of a missing queue");
    if (rc == 0 && ok->message_count != 0)
        rc = conf_fail("delete-ok message_count %u, expected 0", ok->message_count);
    conf_close(conn);
    return rc;
}

static int delete_if_empty_406(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("q");
    int rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = publish_n(conn, q, 1);
    if (rc == 0) {
        amqp_queue_delete(conn, 1, amqp_cstring_bytes(q), 0, 1);
        rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_PRECONDITION_FAILED);
    }
    if (rc == 0)
        rc = conf_channel_open(conn, 1);
    if (rc == 0 && conf_queue_count(conn, 1, q) != 1)
        rc = conf_fail("queue lost its message after a refused if_empty delete");
    conf_close(conn);
    return rc;
}

static int delete_if_unused_406(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("q");
    int rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_channel_open(conn, 2);
    if (rc == 0)
        rc = conf_consume(conn, 2, q, NULL, 1, 0, NULL);
    if (rc == 0) {
        amqp_queue_delete(conn, 1, amqp_cstring_bytes(q), 1, 0);
        rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_PRECONDITION_FAILED);
    }
    conf_close(conn);
    return rc;
}

static int redeclare_different_args_406(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("q");
    amqp_table_entry_t a = {amqp_cstring_bytes("x-max-length"), {AMQP_FIELD_KIND_I32, {.i32 = 10}}};
    amqp_table_entry_t b = {amqp_cstring_bytes("x-max-length"), {AMQP_FIELD_KIND_I32, {.i32 = 20}}};
    int rc = conf_declare_queue(conn, 1, q, 0, 0, 0, (amqp_table_t){1, &a});
    if (rc == 0)    /* the same arguments again: fine */
        rc = conf_declare_queue(conn, 1, q, 0, 0, 0, (amqp_table_t){1, &a});
    if (rc == 0) {
        amqp_queue_declare(conn, 1, amqp_cstring_bytes(q), 0, 0, 0, 0, (amqp_table_t){1, &b});
        rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_PRECONDITION_FAILED);
    }
    if (rc == 0)
        rc = conf_channel_open(conn, 1);
    if (rc == 0) {   /* durable differs */
        amqp_queue_declare(conn, 1, amqp_cstring_bytes(q), 0, 1, 0, 0, (amqp_table_t){1, &a});
        rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_PRECONDITION_FAILED);
    }
    conf_close(conn);
    return rc;
}

static int reserved_amq_prefix_403(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    char name[256];
    snprintf(name, sizeof name, "amq.%s", conf_queue_name("q"));
    amqp_queue_declare(conn, 1, amqp_cstring_bytes(name), 0, 0, 0, 0, amqp_empty_table);
    int rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_ACCESS_REFUSED);
    conf_close(conn);
    return rc;
}

static int unbind_stops_routing(void)
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
    if (rc == 0)
        rc = conf_bind(conn, 1, q, ex, "k", conf_no_args);   /* idempotent */
    if (rc == 0)
        rc = conf_publish(conn, 1, ex, "k", "bound", NULL);
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "bound");
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    if (rc == 0) {
        amqp_queue_unbind(conn, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(ex),
                          amqp_cstring_bytes("k"), amqp_empty_table);
        rc = conf_rpc_failed(conn, "queue.unbind");
    }
    if (rc == 0)
        rc = conf_publish(conn, 1, ex, "k", "unbound", NULL);
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    conf_close(conn);
    return rc;
}

const conf_scenario conf_queue_scenarios[] = {
    {"queue.declare_server_named", 1, declare_server_named},
    {"queue.exclusive_other_connection_405", 0, exclusive_other_connection_405},
    {"queue.exclusive_deleted_on_close", 0, exclusive_deleted_on_close},
    {"queue.auto_delete_after_last_consumer", 0, auto_delete_after_last_consumer},
    {"queue.auto_delete_never_consumed_stays", 0, auto_delete_without_consumers_stays},
    {"queue.declare_ok_counts", 0, declare_ok_counts},
    {"queue.purge_returns_count", 0, purge_returns_count},
    {"queue.delete_returns_count", 0, delete_returns_count},
    {"queue.delete_missing_ok", 0, delete_missing_ok},
    {"queue.delete_if_empty_406", 0, delete_if_empty_406},
    {"queue.delete_if_unused_406", 0, delete_if_unused_406},
    {"queue.redeclare_different_args_406", 0, redeclare_different_args_406},
    {"queue.reserved_amq_prefix_403", 0, reserved_amq_prefix_403},
    {"queue.unbind_stops_routing", 0, unbind_stops_routing},
    {NULL, 0, NULL},
};
