/* Scenarios: RabbitMQ extensions that clients rely on -- message and queue
 * TTL, dead-lettering (with the x-death header), max-length with both
 * overflow modes, queue priorities, direct reply-to and sender-selected
 * distribution (CC/BCC headers). */
#define _GNU_SOURCE
#include "conf.h"

#include <stdio.h>
#include <string.h>

#define TTL_MS 100
#define AFTER_TTL_MS 400

static amqp_table_entry_t i32_arg(const char *key, int32_t v)
{
    return (amqp_table_entry_t){amqp_cstring_bytes(key), {AMQP_FIELD_KIND_I32, {.i32 = v}}};
}

static amqp_table_entry_t str_arg(const char *key, const char *v)
{
    return (amqp_table_entry_t){amqp_cstring_bytes(key), {AMQP_FIELD_KIND_UTF8, {.bytes = amqp_cstring_bytes(v)}}};
}

static const amqp_field_value_t *find(const amqp_table_t *t, const char *key)
{
    for (int i = 0; i < t->num_entries; i++)
        if (t->entries[i].key.len == strlen(key) && memcmp(t->entries[i].key.bytes, key, strlen(key)) == 0)
            return &t->entries[i].value;
    return NULL;
}

static int str_is(const amqp_field_value_t *v, const char *s)
{
    return v != NULL && (v->kind == AMQP_FIELD_KIND_UTF8 || v->kind == AMQP_FIELD_KIND_BYTES) &&
           v->value.bytes.len == strlen(s) && memcmp(v->value.bytes.bytes, s, strlen(s)) == 0;
}

/* Opens a connection and declares `queue` with the given arguments. */
static amqp_connection_state_t open_queue_with_args(const char *queue, amqp_table_entry_t *args, int n)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return NULL;
    if (conf_declare_queue(conn, 1, queue, 0, 0, 0, (amqp_table_t){n, args}) != 0) {
        conf_close(conn);
        return NULL;
    }
    return conn;
}

/* ------------------------------------------------------------ TTL */

static int queue_message_ttl_expires(void)
{
    const char *q = conf_queue_name("ttl");
    amqp_table_entry_t args[] = {i32_arg("x-message-ttl", TTL_MS)};
    amqp_connection_state_t conn = open_queue_with_args(q, args, 1);
    if (conn == NULL)
        return 1;
    int rc = conf_publish(conn, 1, "", q, "short-lived", NULL);
    if (rc == 0)
        conf_sleep_ms(AFTER_TTL_MS);
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    if (rc == 0)    /* a fresh message is still there before the TTL */
        rc = conf_publish(conn, 1, "", q, "fresh", NULL);
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "fresh");
    conf_close(conn);
    return rc;
}

static int per_message_expiration(void)
{
    const char *q = conf_queue_name("q");
    amqp_connection_state_t conn = open_queue_with_args(q, NULL, 0);
    if (conn == NULL)
        return 1;
    amqp_basic_properties_t short_p = {._flags = AMQP_BASIC_EXPIRATION_FLAG,
                                       .expiration = amqp_cstring_bytes("100")};
    amqp_basic_properties_t long_p = {._flags = AMQP_BASIC_EXPIRATION_FLAG,
                                      .expiration = amqp_cstring_bytes("600000")};
    int rc = conf_publish(conn, 1, "", q, "expires", &short_p);
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "stays", &long_p);
    if (rc == 0)
        conf_sleep_ms(AFTER_TTL_MS);
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "stays");
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    conf_close(conn);
    return rc;
}

static int invalid_expiration_406(void)
{
    const char *q = conf_queue_name("q");
    amqp_connection_state_t conn = open_queue_with_args(q, NULL, 0);
    if (conn == NULL)
        return 1;
    amqp_basic_properties_t p = {._flags = AMQP_BASIC_EXPIRATION_FLAG,
                                 .expiration = amqp_cstring_bytes("soon")};
    int rc = conf_publish(conn, 1, "", q, "bad", &p);
    if (rc == 0)
        rc = conf_expect_channel_close(conn, 1, conf_sync(conn, 1), CONF_PRECONDITION_FAILED);
    conf_close(conn);
    return rc;
}

static int queue_expires(void)
{
    const char *q = conf_queue_name("exp");
    amqp_table_entry_t args[] = {i32_arg("x-expires", 200)};
    amqp_connection_state_t conn = open_queue_with_args(q, args, 1);
    if (conn == NULL)
        return 1;
    /* Any declare, even passive, counts as use and restarts the timer, so
     * look only once, well after the expiry. */
    conf_sleep_ms(800);
    amqp_queue_declare(conn, 1, amqp_cstring_bytes(q), 1, 0, 0, 0, amqp_empty_table);
    amqp_rpc_reply_t r = amqp_get_rpc_reply(conn);
    int rc = r.reply_type == AMQP_RESPONSE_NORMAL
                 ? conf_fail("queue with x-expires=200 still exists after 800 ms")
                 : conf_expect_channel_close(conn, 1, r, CONF_NOT_FOUND);
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ dead-lettering */

/* Gets one message from dlq and checks x-death[0] reason and queue. */
static int expect_dead_lettered(amqp_connection_state_t conn, const char *dlq, const char *body,
                                const char *reason, const char *from_queue)
{
    conf_event ev;
    int got = conf_get(conn, 1, dlq, 1, &ev);
    if (got != 1)
        return conf_fail("dead-letter queue: %s", got == 0 ? "empty" : ev.reply_text);
    int rc = 0;
    const amqp_field_value_t *death = find(&ev.message.properties.headers, "x-death");
    if (!conf_body_is(&ev.message, body))
        rc = conf_fail("dead-lettered body differs");
    else if (death == NULL || death->kind != AMQP_FIELD_KIND_ARRAY || death->value.array.num_entries < 1 ||
             death->value.array.entries[0].kind != AMQP_FIELD_KIND_TABLE)
        rc = conf_fail("dead-lettered message lacks an x-death array of tables");
    else {
        const amqp_table_t *d = &death->value.array.entries[0].value.table;
        const amqp_field_value_t *count = find(d, "count");
        if (!str_is(find(d, "reason"), reason) || !str_is(find(d, "queue"), from_queue))
            rc = conf_fail("x-death reason/queue differ (expected %s from %s)", reason, from_queue);
        else if (count == NULL || count->kind != AMQP_FIELD_KIND_I64 || count->value.i64 != 1)
            rc = conf_fail("x-death count missing or not long 1");
        else if (find(d, "time") == NULL || find(d, "exchange") == NULL || find(d, "routing-keys") == NULL)
            rc = conf_fail("x-death lacks time/exchange/routing-keys");
    }
    conf_event_free(&ev);
    return rc;
}

static int dead_letter_on_reject(void)
{
    const char *q = conf_queue_name("src");
    const char *dlq = conf_queue_name("dlq");
    amqp_table_entry_t args[] = {str_arg("x-dead-letter-exchange", ""),
                                 str_arg("x-dead-letter-routing-key", dlq)};
    amqp_connection_state_t conn = open_queue_with_args(q, args, 2);
    if (conn == NULL)
        return 1;
    int rc = conf_declare_queue(conn, 1, dlq, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "doomed", NULL);
    conf_event ev;
    if (rc == 0)
        rc = conf_get_one(conn, 1, q, 0, &ev);
    if (rc == 0) {
        conf_event_free(&ev);
        if (amqp_basic_reject(conn, 1, ev.delivery_tag, 0) != AMQP_STATUS_OK)
            rc = conf_fail("cannot send basic.reject");
    }
    if (rc == 0)
        conf_sleep_ms(100);
    if (rc == 0)
        rc = expect_dead_lettered(conn, dlq, "doomed", "rejected", q);
    conf_close(conn);
    return rc;
}

static int dead_letter_on_ttl(void)
{
    const char *q = conf_queue_name("src");
    const char *dlx = conf_exchange_name("dlx");
    const char *dlq = conf_queue_name("dlq");
    amqp_table_entry_t args[] = {i32_arg("x-message-ttl", TTL_MS), str_arg("x-dead-letter-exchange", dlx)};
    amqp_connection_state_t conn = open_queue_with_args(q, args, 2);
    if (conn == NULL)
        return 1;
    int rc = conf_declare_exchange(conn, 1, dlx, "fanout", conf_no_args);
    if (rc == 0)
        rc = conf_declare_queue(conn, 1, dlq, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_bind(conn, 1, dlq, dlx, "", conf_no_args);
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "expired", NULL);
    if (rc == 0)
        conf_sleep_ms(AFTER_TTL_MS);
    if (rc == 0)
        rc = expect_dead_lettered(conn, dlq, "expired", "expired", q);
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ max-length */

static int max_length_drops_head(void)
{
    const char *q = conf_queue_name("ml");
    amqp_table_entry_t args[] = {i32_arg("x-max-length", 2)};
    amqp_connection_state_t conn = open_queue_with_args(q, args, 1);
    if (conn == NULL)
        return 1;
    int rc = 0;
    for (int i = 1; rc == 0 && i <= 3; i++) {
        char body[8];
        snprintf(body, sizeof body, "m%d", i);
        rc = conf_publish(conn, 1, "", q, body, NULL);
    }
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "m2");
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "m3");
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    conf_close(conn);
    return rc;
}

static int max_length_reject_publish_nacks(void)
{
    const char *q = conf_queue_name("ml");
    amqp_table_entry_t args[] = {i32_arg("x-max-length", 1), str_arg("x-overflow", "reject-publish")};
    amqp_connection_state_t conn = open_queue_with_args(q, args, 2);
    if (conn == NULL)
        return 1;
    int rc = conf_confirm_select(conn, 1);
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "first", NULL);
    if (rc == 0)
        rc = conf_wait_confirms(conn, 1, 1);
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "second", NULL);
    if (rc == 0) {
        conf_event ev;
        conf_wait_event(conn, CONF_WAIT_MS, &ev);
        if (ev.kind != CONF_EV_NACK || ev.delivery_tag != 2)
            rc = conf_fail("expected basic.nack 2 for the overflowing publish, got event %d tag %llu",
                           ev.kind, (unsigned long long)ev.delivery_tag);
        conf_event_free(&ev);
    }
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "first");
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    conf_close(conn);
    return rc;
}

static int max_length_bytes(void)
{
    const char *q = conf_queue_name("mlb");
    amqp_table_entry_t args[] = {i32_arg("x-max-length-bytes", 10)};
    amqp_connection_state_t conn = open_queue_with_args(q, args, 1);
    if (conn == NULL)
        return 1;
    int rc = conf_publish(conn, 1, "", q, "aaaaaa", NULL);         /* 6 bytes */
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "bbbbbb", NULL);         /* 12 > 10: drop the head */
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "bbbbbb");
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    conf_close(conn);
    return rc;
}

static int invalid_queue_argument_406(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_table_entry_t bad = str_arg("x-max-length", "lots");
    amqp_queue_declare(conn, 1, amqp_cstring_bytes(conf_queue_name("bad")), 0, 0, 0, 0, (amqp_table_t){1, &bad});
    int rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_PRECONDITION_FAILED);
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ others */

static int priority_queue_orders(void)
{
    const char *q = conf_queue_name("prio");
    amqp_table_entry_t args[] = {i32_arg("x-max-priority", 10)};
    amqp_connection_state_t conn = open_queue_with_args(q, args, 1);
    if (conn == NULL)
        return 1;
    static const struct { uint8_t prio; const char *body; } msgs[] = {{1, "low"}, {9, "high"}, {5, "mid"}};
    int rc = 0;
    for (int i = 0; rc == 0 && i < 3; i++) {
        amqp_basic_properties_t p = {._flags = AMQP_BASIC_PRIORITY_FLAG, .priority = msgs[i].prio};
        rc = conf_publish(conn, 1, "", q, msgs[i].body, &p);
    }
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "high");
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "mid");
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "low");
    conf_close(conn);
    return rc;
}

static int direct_reply_to(void)
{
    const char *q = conf_queue_name("rpc");
    amqp_connection_state_t client = open_queue_with_args(q, NULL, 0);
    amqp_connection_state_t server = conf_open();
    int rc = client == NULL || server == NULL;
    if (rc == 0)
        rc = conf_consume(client, 1, "amq.rabbitmq.reply-to", NULL, 1, 0, NULL);
    amqp_basic_properties_t p = {._flags = AMQP_BASIC_REPLY_TO_FLAG,
                                 .reply_to = amqp_cstring_bytes("amq.rabbitmq.reply-to")};
    if (rc == 0)
        rc = conf_publish(client, 1, "", q, "request", &p);
    conf_event ev;
    char reply_to[256] = "";
    if (rc == 0)
        rc = conf_consume(server, 1, q, NULL, 1, 0, NULL);
    if (rc == 0)
        rc = conf_expect_delivery(server, "request", &ev);
    if (rc == 0) {
        amqp_bytes_t r = ev.message.properties.reply_to;
        snprintf(reply_to, sizeof reply_to, "%.*s", (int)r.len, (const char *)r.bytes);
        conf_event_free(&ev);
        if (strncmp(reply_to, "amq.rabbitmq.reply-to.", 22) != 0)
            rc = conf_fail("reply_to rewritten to '%s', expected amq.rabbitmq.reply-to.<token>", reply_to);
    }
    if (rc == 0)
        rc = conf_publish(server, 1, "", reply_to, "response", NULL);
    if (rc == 0)
        rc = conf_expect_delivery(client, "response", NULL);
    conf_close(client);
    conf_close(server);
    return rc;
}

static int sender_selected_cc_bcc(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *ex = conf_exchange_name("x");
    const char *qa = conf_queue_name("a");
    const char *qb = conf_queue_name("b");
    const char *qc = conf_queue_name("c");
    int rc = conf_declare_exchange(conn, 1, ex, "direct", conf_no_args);
    const char *queues[] = {qa, qb, qc};
    const char *keys[] = {"ka", "kb", "kc"};
    for (int i = 0; rc == 0 && i < 3; i++) {
        rc = conf_declare_queue(conn, 1, queues[i], 0, 0, 0, conf_no_args);
        if (rc == 0)
            rc = conf_bind(conn, 1, queues[i], ex, keys[i], conf_no_args);
    }
    amqp_field_value_t cc_items[] = {{AMQP_FIELD_KIND_UTF8, {.bytes = amqp_cstring_bytes("kb")}}};
    amqp_field_value_t bcc_items[] = {{AMQP_FIELD_KIND_UTF8, {.bytes = amqp_cstring_bytes("kc")}}};
    amqp_table_entry_t h[] = {
        {amqp_cstring_bytes("CC"), {AMQP_FIELD_KIND_ARRAY, {.array = {1, cc_items}}}},
        {amqp_cstring_bytes("BCC"), {AMQP_FIELD_KIND_ARRAY, {.array = {1, bcc_items}}}},
    };
    amqp_basic_properties_t p = {._flags = AMQP_BASIC_HEADERS_FLAG, .headers = {2, h}};
    if (rc == 0)
        rc = conf_publish(conn, 1, ex, "ka", "fan", &p);
    /* Routing first (all three queues), then the header rewriting. */
    int routed[3] = {0}, has_cc[3] = {0}, has_bcc[3] = {0};
    for (int i = 0; rc == 0 && i < 3; i++) {
        conf_event ev;
        int got = conf_get(conn, 1, queues[i], 1, &ev);
        if (got < 0)
            rc = conf_fail("%s", ev.reply_text);
        if (got != 1)
            continue;
        routed[i] = 1;
        has_cc[i] = find(&ev.message.properties.headers, "CC") != NULL;
        has_bcc[i] = find(&ev.message.properties.headers, "BCC") != NULL;
        conf_event_free(&ev);
    }
    for (int i = 0; rc == 0 && i < 3; i++)
        if (!routed[i])
            rc = conf_fail("not routed to the queue bound to %s (%s)", keys[i],
                           i == 0 ? "routing key" : i == 1 ? "CC header" : "BCC header");
    for (int i = 0; rc == 0 && i < 3; i++)
        if (has_bcc[i] || !has_cc[i])
            rc = conf_fail("copy for %s: BCC header %s, CC header %s (expected BCC removed, CC kept)",
                           keys[i], has_bcc[i] ? "present" : "removed", has_cc[i] ? "kept" : "removed");
    conf_close(conn);
    return rc;
}

const conf_scenario conf_extensions_scenarios[] = {
    {"extensions.queue_message_ttl_expires", 0, queue_message_ttl_expires},
    {"extensions.per_message_expiration", 0, per_message_expiration},
    {"extensions.invalid_expiration_406", 0, invalid_expiration_406},
    {"extensions.queue_expires", 0, queue_expires},
    {"extensions.dead_letter_on_reject", 0, dead_letter_on_reject},
    {"extensions.dead_letter_on_ttl", 0, dead_letter_on_ttl},
    {"extensions.max_length_drops_head", 0, max_length_drops_head},
    {"extensions.max_length_reject_publish_nacks", 0, max_length_reject_publish_nacks},
    {"extensions.max_length_bytes", 0, max_length_bytes},
    {"extensions.invalid_queue_argument_406", 0, invalid_queue_argument_406},
    {"extensions.priority_queue_orders", 0, priority_queue_orders},
    {"extensions.direct_reply_to", 0, direct_reply_to},
    {"extensions.sender_selected_cc_bcc", 0, sender_selected_cc_bcc},
    {NULL, 0, NULL},
};
