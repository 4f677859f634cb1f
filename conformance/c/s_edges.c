/* Scenarios: smaller RabbitMQ behaviours that existing clients depend on
 * without knowing it -- the empty queue name meaning "last declared", the
 * predeclared amq.* exchanges, idempotent deletes and cancels, unsupported
 * method options, exchange-binding cycles, consumer priorities and single
 * active consumer. */
#define _GNU_SOURCE
#include "conf.h"

#include <stdio.h>
#include <string.h>

static amqp_connection_state_t open_with_queue(const char *suffix, const char **queue)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return NULL;
    *queue = conf_queue_name(suffix);
    if (conf_declare_queue(conn, 1, *queue, 0, 0, 0, conf_no_args) != 0) {
        conf_close(conn);
        return NULL;
    }
    return conn;
}

/* ------------------------------------------------------------ queue */

static int empty_name_means_last_declared(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    /* bind, publish via the binding, get and purge all with queue "" */
    amqp_queue_bind(conn, 1, amqp_empty_bytes, amqp_cstring_bytes("amq.direct"), amqp_cstring_bytes(q),
                    amqp_empty_table);
    int rc = conf_rpc_failed(conn, "queue.bind with queue ''");
    if (rc == 0)
        rc = conf_publish(conn, 1, "amq.direct", q, "via-empty-name", NULL);
    if (rc == 0)
        rc = conf_get_expect(conn, 1, "", "via-empty-name");
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "to-purge", NULL);
    amqp_queue_purge_ok_t *ok = NULL;
    if (rc == 0) {
        ok = amqp_queue_purge(conn, 1, amqp_empty_bytes);
        rc = conf_rpc_failed(conn, "queue.purge ''");
    }
    if (rc == 0 && ok->message_count != 1)
        rc = conf_fail("purge '' removed %u messages, expected 1", ok->message_count);
    conf_close(conn);
    return rc;
}

static int empty_name_without_declare_404(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_rpc_reply_t r = amqp_basic_get(conn, 1, amqp_empty_bytes, 1);
    int rc = conf_expect_channel_close(conn, 1, r, CONF_NOT_FOUND);
    conf_close(conn);
    return rc;
}

static int exclusive_survives_channel_close(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("excl");
    int rc = conf_channel_open(conn, 2);
    if (rc == 0)
        rc = conf_declare_queue(conn, 2, q, 0, 1, 0, conf_no_args);
    if (rc == 0 && amqp_channel_close(conn, 2, AMQP_REPLY_SUCCESS).reply_type != AMQP_RESPONSE_NORMAL)
        rc = conf_fail("channel.close failed");
    if (rc == 0 && conf_queue_count(conn, 1, q) != 0)
        rc = conf_fail("exclusive queue went away with its declaring channel");
    conf_close(conn);
    return rc;
}

static int exclusive_get_delete_other_connection_405(void)
{
    amqp_connection_state_t owner = conf_open();
    amqp_connection_state_t other = conf_open();
    const char *q = conf_queue_name("excl");
    int rc = owner == NULL || other == NULL;
    if (rc == 0)
        rc = conf_declare_queue(owner, 1, q, 0, 1, 0, conf_no_args);
    if (rc == 0)
        rc = conf_expect_channel_close(other, 1, amqp_basic_get(other, 1, amqp_cstring_bytes(q), 1),
                                       CONF_RESOURCE_LOCKED);
    if (rc == 0)
        rc = conf_channel_open(other, 1);
    if (rc == 0) {
        amqp_queue_delete(other, 1, amqp_cstring_bytes(q), 0, 0);
        rc = conf_expect_channel_close(other, 1, amqp_get_rpc_reply(other), CONF_RESOURCE_LOCKED);
    }
    if (rc == 0 && conf_queue_count(owner, 1, q) != 0)
        rc = conf_fail("owner lost its exclusive queue");
    conf_close(owner);
    conf_close(other);
    return rc;
}

static int dlx_routing_key_without_exchange_406(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_table_entry_t arg = {amqp_cstring_bytes("x-dead-letter-routing-key"),
                              {AMQP_FIELD_KIND_UTF8, {.bytes = amqp_cstring_bytes("k")}}};
    amqp_queue_declare(conn, 1, amqp_cstring_bytes(conf_queue_name("q")), 0, 0, 0, 0, (amqp_table_t){1, &arg});
    int rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_PRECONDITION_FAILED);
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ exchange */

static int predeclared_amq_exchanges(void)
{
    static const struct { const char *name, *type; } ex[] = {
        {"amq.direct", "direct"}, {"amq.fanout", "fanout"}, {"amq.topic", "topic"},
        {"amq.headers", "headers"}, {"amq.match", "headers"}, {NULL, NULL},
    };
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    int rc = 0;
    for (int i = 0; rc == 0 && ex[i].name != NULL; i++) {
        amqp_exchange_declare(conn, 1, amqp_cstring_bytes(ex[i].name), amqp_cstring_bytes(ex[i].type), 1,
                              0, 0, 0, amqp_empty_table);
        if (conf_rpc_failed(conn, ex[i].name))
            rc = 1;
    }
    conf_close(conn);
    return rc;
}

static int passive_declare_ignores_type(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_exchange_declare(conn, 1, amqp_cstring_bytes("amq.direct"), amqp_cstring_bytes("fanout"), 1, 0,
                          0, 0, amqp_empty_table);
    int rc = conf_rpc_failed(conn, "passive exchange.declare with another type");
    conf_close(conn);
    return rc;
}

static int delete_missing_exchange_ok(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_exchange_delete(conn, 1, amqp_cstring_bytes(conf_name("never")), 0);
    int rc = conf_rpc_failed(conn, "exchange.delete of a missing exchange");
    conf_close(conn);
    return rc;
}

static int e2e_cycle_single_copy(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *a = conf_exchange_name("a");
    const char *b = conf_exchange_name("b");
    const char *q = conf_queue_name("q");
    int rc = conf_declare_exchange(conn, 1, a, "fanout", conf_no_args);
    if (rc == 0)
        rc = conf_declare_exchange(conn, 1, b, "fanout", conf_no_args);
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q, b, "", conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, q, a, "", conf_no_args);
    for (int i = 0; rc == 0 && i < 2; i++) {
        amqp_exchange_bind(conn, 1, amqp_cstring_bytes(i ? a : b), amqp_cstring_bytes(i ? b : a),
                           amqp_empty_bytes, amqp_empty_table);
        rc = conf_rpc_failed(conn, "exchange.bind");
    }
    if (rc == 0)
        rc = conf_publish(conn, 1, a, "", "loop", NULL);
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "loop");
    if (rc == 0 && conf_get_empty(conn, 1, q))
        rc = conf_fail("a cycle of exchange bindings delivered more than one copy");
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ unsupported options */

static int prefetch_size_540(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_basic_qos(conn, 1, 4096, 0, 0);
    int rc = conf_expect_connection_close(conn, amqp_get_rpc_reply(conn), CONF_NOT_IMPLEMENTED);
    conf_close(conn);
    return rc;
}

static int recover_without_requeue_540(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_basic_recover(conn, 1, 0);
    int rc = conf_expect_connection_close(conn, amqp_get_rpc_reply(conn), CONF_NOT_IMPLEMENTED);
    conf_close(conn);
    return rc;
}

static int channel_flow_active(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_channel_flow_ok_t *ok = amqp_channel_flow(conn, 1, 1);
    int rc = conf_rpc_failed(conn, "channel.flow active=true");
    if (rc == 0 && !ok->active)
        rc = conf_fail("flow-ok active=false, expected true");
    conf_close(conn);
    return rc;
}

static int cancel_unknown_tag_ok(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_basic_cancel_ok_t *ok = amqp_basic_cancel(conn, 1, amqp_cstring_bytes("never-consumed"));
    int rc = conf_rpc_failed(conn, "basic.cancel of an unknown tag");
    if (rc == 0 && (ok->consumer_tag.len != 14 || memcmp(ok->consumer_tag.bytes, "never-consumed", 14) != 0))
        rc = conf_fail("cancel-ok carries another tag");
    conf_close(conn);
    return rc;
}

static int ack_tag_zero_multiple_acks_all(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = 0;
    for (int i = 0; rc == 0 && i < 3; i++)
        rc = conf_publish(conn, 1, "", q, "m", NULL);
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "c", 0, 0, NULL);
    for (int i = 0; rc == 0 && i < 3; i++)
        rc = conf_expect_delivery(conn, "m", NULL);
    if (rc == 0 && amqp_basic_ack(conn, 1, 0, 1) != AMQP_STATUS_OK)
        rc = conf_fail("cannot send basic.ack");
    if (rc == 0 && conf_sync(conn, 1).reply_type != AMQP_RESPONSE_NORMAL)
        rc = conf_fail("basic.ack tag 0 multiple=1 was refused");
    if (rc == 0 && amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS).reply_type != AMQP_RESPONSE_NORMAL)
        rc = conf_fail("channel.close failed");
    if (rc == 0)
        rc = conf_channel_open(conn, 1);
    if (rc == 0 && conf_queue_count(conn, 1, q) != 0)
        rc = conf_fail("ack of tag 0 with multiple=1 did not ack everything");
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ consumers */

static int consume_with_args(amqp_connection_state_t conn, const char *q, const char *tag,
                             amqp_table_entry_t *args, int n)
{
    amqp_basic_consume(conn, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(tag), 0, 0, 0,
                       (amqp_table_t){n, args});
    return conf_rpc_failed(conn, "basic.consume");
}

static int consumer_priority(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    amqp_table_entry_t high = {amqp_cstring_bytes("x-priority"), {AMQP_FIELD_KIND_I32, {.i32 = 10}}};
    int rc = consume_with_args(conn, q, "low", NULL, 0);
    if (rc == 0)
        rc = consume_with_args(conn, q, "high", &high, 1);
    for (int i = 0; rc == 0 && i < 4; i++)
        rc = conf_publish(conn, 1, "", q, "m", NULL);
    for (int i = 0; rc == 0 && i < 4; i++) {
        conf_event ev;
        rc = conf_expect_delivery(conn, "m", &ev);
        if (rc == 0 && strcmp(ev.consumer_tag, "high") != 0)
            rc = conf_fail("delivery %d went to '%s' while the x-priority 10 consumer had room", i,
                           ev.consumer_tag);
        if (rc == 0)
            conf_event_free(&ev);
    }
    conf_close(conn);
    return rc;
}

static int single_active_consumer(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("sac");
    amqp_table_entry_t arg = {amqp_cstring_bytes("x-single-active-consumer"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}};
    int rc = conf_declare_queue(conn, 1, q, 0, 0, 0, (amqp_table_t){1, &arg});
    if (rc == 0)
        rc = consume_with_args(conn, q, "first", NULL, 0);
    if (rc == 0)
        rc = consume_with_args(conn, q, "second", NULL, 0);
    for (int i = 0; rc == 0 && i < 4; i++)
        rc = conf_publish(conn, 1, "", q, "m", NULL);
    for (int i = 0; rc == 0 && i < 4; i++) {
        conf_event ev;
        rc = conf_expect_delivery(conn, "m", &ev);
        if (rc == 0 && strcmp(ev.consumer_tag, "first") != 0)
            rc = conf_fail("delivery %d went to '%s', expected the single active consumer 'first'", i,
                           ev.consumer_tag);
        if (rc == 0)
            conf_event_free(&ev);
    }
    if (rc == 0) {   /* cancel the active one: the other takes over */
        amqp_basic_cancel(conn, 1, amqp_cstring_bytes("first"));
        rc = conf_rpc_failed(conn, "basic.cancel");
    }
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "next", NULL);
    conf_event ev;
    while (rc == 0) {   /* the unacked four come back first, redelivered */
        rc = conf_expect_delivery(conn, NULL, &ev);
        if (rc != 0)
            break;
        int last = conf_body_is(&ev.message, "next");
        if (strcmp(ev.consumer_tag, "second") != 0)
            rc = conf_fail("after cancel, delivery went to '%s', expected 'second'", ev.consumer_tag);
        conf_event_free(&ev);
        if (last)
            break;
    }
    conf_close(conn);
    return rc;
}

const conf_scenario conf_edges_scenarios[] = {
    {"queue.empty_name_means_last_declared", 0, empty_name_means_last_declared},
    {"queue.empty_name_without_declare_404", 0, empty_name_without_declare_404},
    {"queue.exclusive_survives_channel_close", 0, exclusive_survives_channel_close},
    {"queue.exclusive_get_delete_other_connection_405", 0, exclusive_get_delete_other_connection_405},
    {"queue.dlx_routing_key_without_exchange_406", 0, dlx_routing_key_without_exchange_406},
    {"exchange.predeclared_amq_exchanges", 0, predeclared_amq_exchanges},
    {"exchange.passive_declare_ignores_type", 0, passive_declare_ignores_type},
    {"exchange.delete_missing_ok", 0, delete_missing_exchange_ok},
    {"routing.e2e_cycle_single_copy", 0, e2e_cycle_single_copy},
    {"qos.prefetch_size_540", 0, prefetch_size_540},
    {"ack.recover_without_requeue_540", 0, recover_without_requeue_540},
    {"channel.flow_active_ok", 0, channel_flow_active},
    {"consumer.cancel_unknown_tag_ok", 0, cancel_unknown_tag_ok},
    {"ack.tag_zero_multiple_acks_all", 0, ack_tag_zero_multiple_acks_all},
    {"consumer.priority_x_priority", 0, consumer_priority},
    {"consumer.single_active_consumer", 0, single_active_consumer},
    {NULL, 0, NULL},
};
