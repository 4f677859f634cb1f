/* Scenarios: consumer (exclusivity, tags, cancel notification, round
 * robin), qos (prefetch per consumer and per channel), ack (ack, nack,
 * reject, recover, requeue on close), confirm (publisher confirms) and tx
 * (select, commit, rollback). */
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

static int publish_n(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue, int n)
{
    for (int i = 0; i < n; i++) {
        char body[32];
        snprintf(body, sizeof body, "m%d", i);
        if (conf_publish(conn, ch, "", queue, body, NULL))
            return 1;
    }
    return 0;
}

/* Receives exactly n deliveries (then nothing more); their tags go to tags[]. */
static int expect_n_deliveries(amqp_connection_state_t conn, int n, uint64_t *tags)
{
    for (int i = 0; i < n; i++) {
        conf_event ev;
        if (conf_expect_delivery(conn, NULL, &ev))
            return conf_fail("delivery %d of %d missing", i + 1, n);
        if (tags != NULL)
            tags[i] = ev.delivery_tag;
        conf_event_free(&ev);
    }
    return conf_expect_quiet(conn);
}

static int check_ack(amqp_connection_state_t conn, int status, const char *what)
{
    if (status != AMQP_STATUS_OK)
        return conf_fail("%s: %s", what, amqp_error_string2(status));
    amqp_rpc_reply_t r = conf_sync(conn, 1);
    if (r.reply_type != AMQP_RESPONSE_NORMAL)
        return conf_fail("%s: %s", what, conf_reply_text(r));
    return 0;
}

/* ------------------------------------------------------------ consumer */

static int exclusive_consumer_403(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_channel_open(conn, 2);
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "excl", 1, 1, NULL);
    if (rc == 0) {
        amqp_basic_consume(conn, 2, amqp_cstring_bytes(q), amqp_empty_bytes, 0, 1, 0, amqp_empty_table);
        rc = conf_expect_channel_close(conn, 2, amqp_get_rpc_reply(conn), CONF_ACCESS_REFUSED);
    }
    if (rc == 0)     /* and the other way round: exclusive while another consumer exists */
        rc = conf_channel_open(conn, 2);
    if (rc == 0) {
        amqp_basic_cancel(conn, 1, amqp_cstring_bytes("excl"));
        rc = conf_rpc_failed(conn, "basic.cancel");
    }
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "shared", 1, 0, NULL);
    if (rc == 0) {
        amqp_basic_consume(conn, 2, amqp_cstring_bytes(q), amqp_empty_bytes, 0, 1, 1, amqp_empty_table);
        rc = conf_expect_channel_close(conn, 2, amqp_get_rpc_reply(conn), CONF_ACCESS_REFUSED);
    }
    conf_close(conn);
    return rc;
}

static int duplicate_tag_530(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_consume(conn, 1, q, "dup", 1, 0, NULL);
    if (rc == 0) {
        amqp_basic_consume(conn, 1, amqp_cstring_bytes(q), amqp_cstring_bytes("dup"), 0, 1, 0,
                           amqp_empty_table);
        rc = conf_expect_connection_close(conn, amqp_get_rpc_reply(conn), CONF_NOT_ALLOWED);
    }
    conf_close(conn);
    return rc;
}

static int cancel_notify_on_queue_delete(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    amqp_connection_state_t other = conf_open();
    int rc = conn == NULL || other == NULL;
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "watched", 1, 0, NULL);
    if (rc == 0) {
        amqp_queue_delete(other, 1, amqp_cstring_bytes(q), 0, 0);
        rc = conf_rpc_failed(other, "queue.delete");
    }
    if (rc == 0) {
        conf_event ev;
        conf_wait_event(conn, CONF_WAIT_MS, &ev);
        if (ev.kind != CONF_EV_CANCEL || strcmp(ev.consumer_tag, "watched") != 0)
            rc = conf_fail("expected basic.cancel for 'watched', got event %d tag '%s'", ev.kind,
                           ev.consumer_tag);
        conf_event_free(&ev);
    }
    if (rc == 0 && conf_sync(conn, 1).reply_type != AMQP_RESPONSE_NORMAL)
        rc = conf_fail("channel closed after the cancel notification");
    conf_close(conn);
    conf_close(other);
    return rc;
}

static int round_robin_two_consumers(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_consume(conn, 1, q, "a", 1, 0, NULL);
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "b", 1, 0, NULL);
    if (rc == 0)
        rc = publish_n(conn, 1, q, 6);
    int count_a = 0, count_b = 0;
    for (int i = 0; rc == 0 && i < 6; i++) {
        conf_event ev;
        rc = conf_expect_delivery(conn, NULL, &ev);
        if (rc == 0) {
            count_a += strcmp(ev.consumer_tag, "a") == 0;
            count_b += strcmp(ev.consumer_tag, "b") == 0;
            conf_event_free(&ev);
        }
    }
    if (rc == 0 && (count_a != 3 || count_b != 3))
        rc = conf_fail("6 messages split %d/%d between two consumers, expected 3/3", count_a, count_b);
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ qos */

static int prefetch_count_limits_unacked(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    amqp_basic_qos(conn, 1, 0, 2, 0);
    int rc = conf_rpc_failed(conn, "basic.qos");
    if (rc == 0)
        rc = publish_n(conn, 1, q, 5);
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "c", 0, 0, NULL);
    uint64_t tags[5];
    if (rc == 0)
        rc = expect_n_deliveries(conn, 2, tags);
    if (rc == 0)
        rc = check_ack(conn, amqp_basic_ack(conn, 1, tags[0], 0), "basic.ack");
    if (rc == 0)
        rc = expect_n_deliveries(conn, 1, tags + 2);
    if (rc == 0)     /* acking two at once frees two slots */
        rc = check_ack(conn, amqp_basic_ack(conn, 1, tags[2], 1), "basic.ack multiple");
    if (rc == 0)
        rc = expect_n_deliveries(conn, 2, tags + 3);
    conf_close(conn);
    return rc;
}

static int prefetch_zero_unlimited(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    amqp_basic_qos(conn, 1, 0, 0, 0);
    int rc = conf_rpc_failed(conn, "basic.qos 0");
    if (rc == 0)
        rc = publish_n(conn, 1, q, 30);
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "c", 0, 0, NULL);
    if (rc == 0)
        rc = expect_n_deliveries(conn, 30, NULL);
    conf_close(conn);
    return rc;
}

/* RabbitMQ: global=0 limits each new consumer, global=1 the whole channel. */
static int prefetch_per_consumer_vs_global(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    amqp_basic_qos(conn, 1, 0, 2, 0);
    int rc = conf_rpc_failed(conn, "basic.qos per consumer");
    if (rc == 0)
        rc = publish_n(conn, 1, q, 10);
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "c1", 0, 0, NULL);
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "c2", 0, 0, NULL);
    if (rc == 0 && expect_n_deliveries(conn, 4, NULL))
        rc = conf_fail("prefetch 2 (global=0) with 2 consumers: expected 4 in flight");
    if (rc == 0)
        rc = conf_channel_open(conn, 2);
    if (rc == 0) {
        amqp_basic_qos(conn, 2, 0, 3, 1);
        rc = conf_rpc_failed(conn, "basic.qos global");
    }
    if (rc == 0)
        rc = conf_consume(conn, 2, q, "g1", 0, 0, NULL);
    if (rc == 0)
        rc = conf_consume(conn, 2, q, "g2", 0, 0, NULL);
    if (rc == 0 && expect_n_deliveries(conn, 3, NULL))
        rc = conf_fail("prefetch 3 (global=1) with 2 consumers: expected 3 in flight on the channel");
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ ack */

static int ack_multiple(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = publish_n(conn, 1, q, 3);
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "c", 0, 0, NULL);
    uint64_t tags[3];
    if (rc == 0)
        rc = expect_n_deliveries(conn, 3, tags);
    if (rc == 0 && (tags[0] != 1 || tags[1] != 2 || tags[2] != 3))
        rc = conf_fail("delivery tags %llu,%llu,%llu, expected 1,2,3", (unsigned long long)tags[0],
                       (unsigned long long)tags[1], (unsigned long long)tags[2]);
    if (rc == 0)
        rc = check_ack(conn, amqp_basic_ack(conn, 1, 3, 1), "basic.ack multiple");
    if (rc == 0) {
        amqp_rpc_reply_t r = amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS);
        if (r.reply_type != AMQP_RESPONSE_NORMAL)
            rc = conf_fail("channel.close: %s", conf_reply_text(r));
    }
    if (rc == 0)
        rc = conf_channel_open(conn, 1);
    if (rc == 0 && conf_queue_count(conn, 1, q) != 0)
        rc = conf_fail("acked messages came back after channel close");
    conf_close(conn);
    return rc;
}

static int nack_requeue_redelivers(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = publish_n(conn, 1, q, 2);
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "c", 0, 0, NULL);
    uint64_t tags[2];
    if (rc == 0)
        rc = expect_n_deliveries(conn, 2, tags);
    if (rc == 0)
        rc = check_ack(conn, amqp_basic_nack(conn, 1, tags[1], 1, 1), "basic.nack multiple requeue");
    for (int i = 0; rc == 0 && i < 2; i++) {
        conf_event ev;
        char body[8];
        snprintf(body, sizeof body, "m%d", i);
        rc = conf_expect_delivery(conn, body, &ev);
        if (rc == 0 && !ev.redelivered)
            rc = conf_fail("requeued message %d not flagged redelivered", i);
        if (rc == 0 && ev.delivery_tag <= tags[1])
            rc = conf_fail("redelivery reused delivery tag %llu", (unsigned long long)ev.delivery_tag);
        if (rc == 0)
            conf_event_free(&ev);
    }
    conf_close(conn);
    return rc;
}

static int reject_requeue_redelivered(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_publish(conn, 1, "", q, "again", NULL);
    conf_event ev;
    if (rc == 0)
        rc = conf_get_one(conn, 1, q, 0, &ev);
    if (rc == 0) {
        conf_event_free(&ev);
        rc = check_ack(conn, amqp_basic_reject(conn, 1, ev.delivery_tag, 1), "basic.reject requeue");
    }
    int got = rc == 0 ? conf_get(conn, 1, q, 1, &ev) : -1;
    if (rc == 0 && got != 1)
        rc = conf_fail("rejected message did not come back");
    if (rc == 0) {
        if (!ev.redelivered || !conf_body_is(&ev.message, "again"))
            rc = conf_fail("requeued message: redelivered=%d", ev.redelivered);
        conf_event_free(&ev);
    }
    conf_close(conn);
    return rc;
}

static int reject_no_requeue_drops(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_publish(conn, 1, "", q, "gone", NULL);
    conf_event ev;
    if (rc == 0)
        rc = conf_get_one(conn, 1, q, 0, &ev);
    if (rc == 0) {
        conf_event_free(&ev);
        rc = check_ack(conn, amqp_basic_reject(conn, 1, ev.delivery_tag, 0), "basic.reject");
    }
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    if (rc == 0 && amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS).reply_type != AMQP_RESPONSE_NORMAL)
        rc = conf_fail("channel.close failed");
    if (rc == 0)
        rc = conf_channel_open(conn, 1);
    if (rc == 0 && conf_queue_count(conn, 1, q) != 0)
        rc = conf_fail("rejected (no requeue) message came back");
    conf_close(conn);
    return rc;
}

static int recover_requeue_redelivers(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = publish_n(conn, 1, q, 2);
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "c", 0, 0, NULL);
    if (rc == 0)
        rc = expect_n_deliveries(conn, 2, NULL);
    if (rc == 0) {
        amqp_basic_recover(conn, 1, 1);
        rc = conf_rpc_failed(conn, "basic.recover");
    }
    for (int i = 0; rc == 0 && i < 2; i++) {
        conf_event ev;
        rc = conf_expect_delivery(conn, NULL, &ev);
        if (rc == 0 && !ev.redelivered)
            rc = conf_fail("recovered message not flagged redelivered");
        if (rc == 0)
            conf_event_free(&ev);
    }
    conf_close(conn);
    return rc;
}

static int unknown_delivery_tag_406(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    int rc = amqp_basic_ack(conn, 1, 99, 0) == AMQP_STATUS_OK ? 0 : conf_fail("cannot send basic.ack");
    if (rc == 0)
        rc = conf_expect_channel_close(conn, 1, conf_sync(conn, 1), CONF_PRECONDITION_FAILED);
    conf_close(conn);
    return rc;
}

static int double_ack_406(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_publish(conn, 1, "", q, "once", NULL);
    conf_event ev;
    if (rc == 0)
        rc = conf_get_one(conn, 1, q, 0, &ev);
    if (rc == 0) {
        conf_event_free(&ev);
        amqp_basic_ack(conn, 1, ev.delivery_tag, 0);
        amqp_basic_ack(conn, 1, ev.delivery_tag, 0);
        rc = conf_expect_channel_close(conn, 1, conf_sync(conn, 1), CONF_PRECONDITION_FAILED);
    }
    conf_close(conn);
    return rc;
}

static int unacked_requeued_on_channel_close(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_channel_open(conn, 2);
    if (rc == 0)    /* same channel as the get, so the publish is surely enqueued */
        rc = conf_publish(conn, 2, "", q, "held", NULL);
    conf_event ev;
    if (rc == 0)
        rc = conf_get_one(conn, 2, q, 0, &ev);
    if (rc == 0)
        conf_event_free(&ev);
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    if (rc == 0 && amqp_channel_close(conn, 2, AMQP_REPLY_SUCCESS).reply_type != AMQP_RESPONSE_NORMAL)
        rc = conf_fail("channel.close failed");
    int got = rc == 0 ? conf_get(conn, 1, q, 1, &ev) : -1;
    if (rc == 0 && got != 1)
        rc = conf_fail("unacked message not requeued when its channel closed");
    if (rc == 0) {
        if (!ev.redelivered)
            rc = conf_fail("requeued message not flagged redelivered");
        conf_event_free(&ev);
    }
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ confirm */

static int confirm_ack_after_publish(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_confirm_select(conn, 1);
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "confirm me", NULL);
    if (rc == 0) {
        conf_event ev;
        conf_wait_event(conn, CONF_WAIT_MS, &ev);
        if (ev.kind != CONF_EV_ACK || ev.delivery_tag != 1 || ev.multiple)
            rc = conf_fail("expected basic.ack tag 1, got event %d tag %llu multiple %d", ev.kind,
                           (unsigned long long)ev.delivery_tag, ev.multiple);
        conf_event_free(&ev);
    }
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "confirm me");
    conf_close(conn);
    return rc;
}

static int confirm_sequential_tags(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_confirm_select(conn, 1);
    if (rc == 0)
        rc = publish_n(conn, 1, q, 50);
    if (rc == 0)
        rc = conf_wait_confirms(conn, 1, 50);
    if (rc == 0)
        rc = conf_expect_quiet(conn);
    conf_close(conn);
    return rc;
}

static int confirm_unroutable_return_then_ack(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *ex = conf_exchange_name("x");
    int rc = conf_declare_exchange(conn, 1, ex, "direct", conf_no_args);
    if (rc == 0)
        rc = conf_confirm_select(conn, 1);
    if (rc == 0)
        rc = conf_publish_bytes(conn, 1, ex, "nowhere", amqp_cstring_bytes("r"), 1, NULL);
    conf_event ev;
    if (rc == 0) {
        conf_wait_event(conn, CONF_WAIT_MS, &ev);
        if (ev.kind != CONF_EV_RETURN)
            rc = conf_fail("expected basic.return first, got event %d", ev.kind);
        conf_event_free(&ev);
    }
    if (rc == 0) {
        conf_wait_event(conn, CONF_WAIT_MS, &ev);
        if (ev.kind != CONF_EV_ACK || ev.delivery_tag != 1)
            rc = conf_fail("expected basic.ack 1 after the return, got event %d", ev.kind);
        conf_event_free(&ev);
    }
    if (rc == 0)    /* unroutable without mandatory: still acked */
        rc = conf_publish(conn, 1, ex, "nowhere", "r2", NULL);
    if (rc == 0)
        rc = conf_wait_confirms(conn, 2, 2);
    conf_close(conn);
    return rc;
}

static int confirm_then_tx_select_406(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    int rc = conf_confirm_select(conn, 1);
    if (rc == 0) {
        amqp_tx_select(conn, 1);
        rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_PRECONDITION_FAILED);
    }
    if (rc == 0)
        rc = conf_channel_open(conn, 1);
    if (rc == 0) {
        amqp_tx_select(conn, 1);
        rc = conf_rpc_failed(conn, "tx.select");
    }
    if (rc == 0) {
        amqp_confirm_select(conn, 1);
        rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_PRECONDITION_FAILED);
    }
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ tx */

static int tx_commit_delivers(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_channel_open(conn, 2);
    if (rc == 0) {
        amqp_tx_select(conn, 2);
        rc = conf_rpc_failed(conn, "tx.select");
    }
    if (rc == 0)
        rc = publish_n(conn, 2, q, 2);
    if (rc == 0)
        rc = conf_expect_quiet(conn);
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    if (rc == 0) {
        amqp_tx_commit(conn, 2);
        rc = conf_rpc_failed(conn, "tx.commit");
    }
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "m0");
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "m1");
    conf_close(conn);
    return rc;
}

static int tx_rollback_discards_publish(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    amqp_tx_select(conn, 1);
    int rc = conf_rpc_failed(conn, "tx.select");
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "discard", NULL);
    if (rc == 0) {
        amqp_tx_rollback(conn, 1);
        rc = conf_rpc_failed(conn, "tx.rollback");
    }
    if (rc == 0) {
        amqp_tx_commit(conn, 1);    /* nothing left to commit */
        rc = conf_rpc_failed(conn, "tx.commit");
    }
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    conf_close(conn);
    return rc;
}

static int tx_ack_rolled_back(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_channel_open(conn, 2);
    if (rc == 0)
        rc = conf_publish(conn, 2, "", q, "keep", NULL);
    if (rc == 0) {
        amqp_tx_select(conn, 2);
        rc = conf_rpc_failed(conn, "tx.select");
    }
    conf_event ev;
    if (rc == 0)
        rc = conf_get_one(conn, 2, q, 0, &ev);
    if (rc == 0) {
        conf_event_free(&ev);
        amqp_basic_ack(conn, 2, ev.delivery_tag, 0);
        amqp_tx_rollback(conn, 2);
        rc = conf_rpc_failed(conn, "tx.rollback");
    }
    if (rc == 0 && amqp_channel_close(conn, 2, AMQP_REPLY_SUCCESS).reply_type != AMQP_RESPONSE_NORMAL)
        rc = conf_fail("channel.close failed");
    if (rc == 0 && conf_queue_count(conn, 1, q) != 1)
        rc = conf_fail("a rolled-back ack still removed the message");
    conf_close(conn);
    return rc;
}

static int tx_commit_without_select_406(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_tx_commit(conn, 1);
    int rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_PRECONDITION_FAILED);
    if (rc == 0)
        rc = conf_channel_open(conn, 1);
    if (rc == 0) {
        amqp_tx_rollback(conn, 1);
        rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_PRECONDITION_FAILED);
    }
    conf_close(conn);
    return rc;
}

const conf_scenario conf_delivery_scenarios[] = {
    {"consumer.exclusive_consumer_403", 0, exclusive_consumer_403},
    {"consumer.duplicate_tag_530", 0, duplicate_tag_530},
    {"consumer.cancel_notify_on_queue_delete", 0, cancel_notify_on_queue_delete},
    {"consumer.round_robin_two_consumers", 0, round_robin_two_consumers},
    {"qos.prefetch_count_limits_unacked", 1, prefetch_count_limits_unacked},
    {"qos.prefetch_zero_unlimited", 0, prefetch_zero_unlimited},
    {"qos.prefetch_per_consumer_vs_global", 0, prefetch_per_consumer_vs_global},
    {"ack.multiple", 1, ack_multiple},
    {"ack.nack_requeue_redelivers", 0, nack_requeue_redelivers},
    {"ack.reject_requeue_redelivered", 0, reject_requeue_redelivered},
    {"ack.reject_no_requeue_drops", 0, reject_no_requeue_drops},
    {"ack.recover_requeue_redelivers", 0, recover_requeue_redelivers},
    {"ack.unknown_delivery_tag_406", 0, unknown_delivery_tag_406},
    {"ack.double_ack_406", 0, double_ack_406},
    {"ack.unacked_requeued_on_channel_close", 0, unacked_requeued_on_channel_close},
    {"confirm.ack_after_publish", 1, confirm_ack_after_publish},
    {"confirm.sequential_tags", 0, confirm_sequential_tags},
    {"confirm.unroutable_return_then_ack", 0, confirm_unroutable_return_then_ack},
    {"confirm.tx_and_confirm_exclusive_406", 0, confirm_then_tx_select_406},
    {"tx.commit_delivers", 1, tx_commit_delivers},
    {"tx.rollback_discards_publish", 0, tx_rollback_discards_publish},
    {"tx.ack_rolled_back", 0, tx_ack_rolled_back},
    {"tx.commit_without_select_406", 0, tx_commit_without_select_406},
    {NULL, 0, NULL},
};
