/* Scenarios: basic (publish, get, consume, cancel, returns), properties
 * (all 14 basic properties and every header field type rabbitmq-c encodes)
 * and content (empty, frame-boundary and 16 MiB bodies with a small
 * frame_max). */
#define _GNU_SOURCE
#include "conf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG_BODY (16u * 1024u * 1024u)
#define SMALL_FRAME_MAX 4096

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

/* ------------------------------------------------------------ basic */

static int publish_get_round_trip(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_publish(conn, 1, "", q, "first", NULL);
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "second", NULL);
    conf_event ev;
    if (rc == 0)
        rc = conf_get_one(conn, 1, q, 1, &ev);
    if (rc == 0) {
        if (!conf_body_is(&ev.message, "first"))
            rc = conf_fail("first get returned the wrong body");
        else if (ev.message_count != 1)
            rc = conf_fail("get-ok message_count %u, expected 1", ev.message_count);
        else if (ev.exchange[0] != '\0' || strcmp(ev.routing_key, q) != 0 || ev.redelivered)
            rc = conf_fail("get-ok exchange '%s' key '%s' redelivered %d", ev.exchange,
                           ev.routing_key, ev.redelivered);
        conf_event_free(&ev);
    }
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "second");
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    conf_close(conn);
    return rc;
}

static int mandatory_unroutable_returned(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *ex = conf_exchange_name("x");
    int rc = conf_declare_exchange(conn, 1, ex, "direct", conf_no_args);
    if (rc == 0)
        rc = conf_publish_bytes(conn, 1, ex, "nowhere", amqp_cstring_bytes("bounce"), 1, NULL);
    conf_event ev;
    if (rc == 0) {
        conf_wait_event(conn, CONF_WAIT_MS, &ev);
        if (ev.kind != CONF_EV_RETURN)
            rc = conf_fail("expected basic.return, got event %d", ev.kind);
        else if (ev.reply_code != CONF_NO_ROUTE || strcmp(ev.reply_text, "NO_ROUTE") != 0)
            rc = conf_fail("basic.return %d '%s', expected 312 NO_ROUTE", ev.reply_code, ev.reply_text);
        else if (strcmp(ev.exchange, ex) != 0 || strcmp(ev.routing_key, "nowhere") != 0)
            rc = conf_fail("basic.return names exchange '%s' key '%s'", ev.exchange, ev.routing_key);
        else if (!conf_body_is(&ev.message, "bounce"))
            rc = conf_fail("returned body differs");
        conf_event_free(&ev);
    }
    if (rc == 0)   /* without mandatory the same publish is dropped silently */
        rc = conf_publish_bytes(conn, 1, ex, "nowhere", amqp_cstring_bytes("drop"), 0, NULL);
    if (rc == 0)
        rc = conf_expect_quiet(conn);
    if (rc == 0 && conf_sync(conn, 1).reply_type != AMQP_RESPONSE_NORMAL)
        rc = conf_fail("channel unusable after an unroutable publish");
    conf_close(conn);
    return rc;
}

static int mandatory_routed_not_returned(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_publish_bytes(conn, 1, "", q, amqp_cstring_bytes("ok"), 1, NULL);
    if (rc == 0)
        rc = conf_expect_quiet(conn);
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "ok");
    conf_close(conn);
    return rc;
}

static int consume_delivers_in_order(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = 0;
    char body[32];
    for (int i = 0; rc == 0 && i < 20; i++) {
        snprintf(body, sizeof body, "m%02d", i);
        rc = conf_publish(conn, 1, "", q, body, NULL);
    }
    char tag[256];
    if (rc == 0)
        rc = conf_consume(conn, 1, q, "conf-tag", 1, 0, tag);
    for (int i = 0; rc == 0 && i < 20; i++) {
        conf_event ev;
        snprintf(body, sizeof body, "m%02d", i);
        rc = conf_expect_delivery(conn, body, &ev);
        if (rc == 0 && (strcmp(ev.consumer_tag, "conf-tag") != 0 || strcmp(ev.routing_key, q) != 0 ||
                        ev.delivery_tag != (uint64_t)i + 1))
            rc = conf_fail("delivery %d: tag '%s' key '%s' delivery_tag %llu", i, ev.consumer_tag,
                           ev.routing_key, (unsigned long long)ev.delivery_tag);
        if (rc == 0)
            conf_event_free(&ev);
    }
    if (rc == 0 && strcmp(tag, "conf-tag") != 0)
        rc = conf_fail("consume-ok tag '%s', expected conf-tag", tag);
    conf_close(conn);
    return rc;
}

static int consumer_tag_server_generated(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    char t1[256], t2[256];
    int rc = conf_consume(conn, 1, q, NULL, 1, 0, t1);
    if (rc == 0)
        rc = conf_consume(conn, 1, q, NULL, 1, 0, t2);
    if (rc == 0 && (strncmp(t1, "amq.ctag-", 9) != 0 || strcmp(t1, t2) == 0))
        rc = conf_fail("server tags '%s' and '%s': expected distinct amq.ctag-...", t1, t2);
    conf_close(conn);
    return rc;
}

static int cancel_stops_delivery(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = conf_consume(conn, 1, q, "c", 1, 0, NULL);
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "before", NULL);
    if (rc == 0)
        rc = conf_expect_delivery(conn, "before", NULL);
    amqp_basic_cancel_ok_t *ok = NULL;
    if (rc == 0) {
        ok = amqp_basic_cancel(conn, 1, amqp_cstring_bytes("c"));
        rc = conf_rpc_failed(conn, "basic.cancel");
    }
    if (rc == 0 && (ok->consumer_tag.len != 1 || memcmp(ok->consumer_tag.bytes, "c", 1) != 0))
        rc = conf_fail("cancel-ok carries a different consumer tag");
    if (rc == 0)
        rc = conf_publish(conn, 1, "", q, "after", NULL);
    if (rc == 0)
        rc = conf_expect_quiet(conn);
    if (rc == 0)
        rc = conf_get_expect(conn, 1, q, "after");
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ properties */

static int bytes_eq(amqp_bytes_t a, amqp_bytes_t b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.bytes, b.bytes, a.len) == 0);
}

static int field_eq(const amqp_field_value_t *a, const amqp_field_value_t *b);

static int table_eq(const amqp_table_t *a, const amqp_table_t *b)
{
    if (a->num_entries != b->num_entries)
        return 0;
    for (int i = 0; i < a->num_entries; i++)
        if (!bytes_eq(a->entries[i].key, b->entries[i].key) ||
            !field_eq(&a->entries[i].value, &b->entries[i].value))
            return 0;
    return 1;
}

static int field_eq(const amqp_field_value_t *a, const amqp_field_value_t *b)
{
    if (a->kind != b->kind)
        return 0;
    const amqp_field_value_t *x = a, *y = b;
    switch (a->kind) {
    case AMQP_FIELD_KIND_BOOLEAN: return !x->value.boolean == !y->value.boolean;
    case AMQP_FIELD_KIND_I8: return x->value.i8 == y->value.i8;
    case AMQP_FIELD_KIND_U8: return x->value.u8 == y->value.u8;
    case AMQP_FIELD_KIND_I16: return x->value.i16 == y->value.i16;
    case AMQP_FIELD_KIND_U16: return x->value.u16 == y->value.u16;
    case AMQP_FIELD_KIND_I32: return x->value.i32 == y->value.i32;
    case AMQP_FIELD_KIND_U32: return x->value.u32 == y->value.u32;
    case AMQP_FIELD_KIND_I64: return x->value.i64 == y->value.i64;
    case AMQP_FIELD_KIND_U64:
    case AMQP_FIELD_KIND_TIMESTAMP: return x->value.u64 == y->value.u64;
    case AMQP_FIELD_KIND_F32: return memcmp(&x->value.f32, &y->value.f32, sizeof(float)) == 0;
    case AMQP_FIELD_KIND_F64: return memcmp(&x->value.f64, &y->value.f64, sizeof(double)) == 0;
    case AMQP_FIELD_KIND_DECIMAL:
        return x->value.decimal.decimals == y->value.decimal.decimals &&
               x->value.decimal.value == y->value.decimal.value;
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES: return bytes_eq(x->value.bytes, y->value.bytes);
    case AMQP_FIELD_KIND_VOID: return 1;
    case AMQP_FIELD_KIND_TABLE: return table_eq(&x->value.table, &y->value.table);
    case AMQP_FIELD_KIND_ARRAY:
        if (x->value.array.num_entries != y->value.array.num_entries)
            return 0;
        for (int i = 0; i < x->value.array.num_entries; i++)
            if (!field_eq(&x->value.array.entries[i], &y->value.array.entries[i]))
                return 0;
        return 1;
    }
    return 0;
}

/* Publishes with props to a fresh queue and gets it back into *ev. */
static int round_trip(amqp_connection_state_t conn, const char *q, const amqp_basic_properties_t *props,
                      conf_event *ev)
{
    if (conf_publish(conn, 1, "", q, "props", props))
        return 1;
    return conf_get_one(conn, 1, q, 1, ev);
}

#define SET_STR(p, field, flag, text) do { (p).field = amqp_cstring_bytes(text); (p)._flags |= (flag); } while (0)

static int all_basic_properties_round_trip(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    amqp_table_entry_t hdr = {amqp_cstring_bytes("h"), {AMQP_FIELD_KIND_UTF8, {.bytes = amqp_cstring_bytes("v")}}};
    amqp_basic_properties_t p = {0};
    SET_STR(p, content_type, AMQP_BASIC_CONTENT_TYPE_FLAG, "application/json");
    SET_STR(p, content_encoding, AMQP_BASIC_CONTENT_ENCODING_FLAG, "gzip");
    p.headers = (amqp_table_t){1, &hdr};
    p._flags |= AMQP_BASIC_HEADERS_FLAG;
    p.delivery_mode = 2;
    p.priority = 7;
    p._flags |= AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_PRIORITY_FLAG;
    SET_STR(p, correlation_id, AMQP_BASIC_CORRELATION_ID_FLAG, "corr-1");
    SET_STR(p, reply_to, AMQP_BASIC_REPLY_TO_FLAG, "reply.queue");
    SET_STR(p, expiration, AMQP_BASIC_EXPIRATION_FLAG, "60000");
    SET_STR(p, message_id, AMQP_BASIC_MESSAGE_ID_FLAG, "msg-1");
    p.timestamp = 1700000000;
    p._flags |= AMQP_BASIC_TIMESTAMP_FLAG;
    SET_STR(p, type, AMQP_BASIC_TYPE_FLAG, "conf.type");
    SET_STR(p, user_id, AMQP_BASIC_USER_ID_FLAG, "guest");
    SET_STR(p, app_id, AMQP_BASIC_APP_ID_FLAG, "conformance");
    SET_STR(p, cluster_id, AMQP_BASIC_CLUSTER_ID_FLAG, "cluster-1");
    conf_event ev;
    int rc = round_trip(conn, q, &p, &ev);
    if (rc == 0) {
        const amqp_basic_properties_t *g = &ev.message.properties;
        if (g->_flags != p._flags)
            rc = conf_fail("property flags 0x%04x, sent 0x%04x", g->_flags, p._flags);
        else if (!bytes_eq(g->content_type, p.content_type) || !bytes_eq(g->content_encoding, p.content_encoding) ||
                 !bytes_eq(g->correlation_id, p.correlation_id) || !bytes_eq(g->reply_to, p.reply_to) ||
                 !bytes_eq(g->expiration, p.expiration) || !bytes_eq(g->message_id, p.message_id) ||
                 !bytes_eq(g->type, p.type) || !bytes_eq(g->user_id, p.user_id) ||
                 !bytes_eq(g->app_id, p.app_id) || !bytes_eq(g->cluster_id, p.cluster_id))
            rc = conf_fail("a string property changed in transit");
        else if (g->delivery_mode != 2 || g->priority != 7 || g->timestamp != p.timestamp)
            rc = conf_fail("delivery_mode %u priority %u timestamp %llu changed", g->delivery_mode,
                           g->priority, (unsigned long long)g->timestamp);
        else if (!table_eq(&g->headers, &p.headers))
            rc = conf_fail("headers changed in transit");
        conf_event_free(&ev);
    }
    conf_close(conn);
    return rc;
}

static int no_properties_round_trip(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    amqp_basic_properties_t p = {0};
    conf_event ev;
    int rc = round_trip(conn, q, &p, &ev);
    if (rc == 0) {
        if (ev.message.properties._flags != 0)
            rc = conf_fail("property flags 0x%04x, sent none", ev.message.properties._flags);
        conf_event_free(&ev);
    }
    conf_close(conn);
    return rc;
}

static int header_table_field_types(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    amqp_field_value_t array_items[] = {
        {AMQP_FIELD_KIND_I32, {.i32 = 1}},
        {AMQP_FIELD_KIND_UTF8, {.bytes = amqp_cstring_bytes("two")}},
        {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}},
    };
    amqp_table_entry_t inner[] = {
        {amqp_cstring_bytes("deep"), {AMQP_FIELD_KIND_UTF8, {.bytes = amqp_cstring_bytes("value")}}},
    };
    static const unsigned char raw[] = {0, 1, 2, 0xCE, 0xFF};
    amqp_table_entry_t h[] = {
        {amqp_cstring_bytes("bool"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}},
        {amqp_cstring_bytes("i8"), {AMQP_FIELD_KIND_I8, {.i8 = -8}}},
        {amqp_cstring_bytes("u8"), {AMQP_FIELD_KIND_U8, {.u8 = 200}}},
        {amqp_cstring_bytes("i16"), {AMQP_FIELD_KIND_I16, {.i16 = -1600}}},
        {amqp_cstring_bytes("u16"), {AMQP_FIELD_KIND_U16, {.u16 = 60000}}},
        {amqp_cstring_bytes("i32"), {AMQP_FIELD_KIND_I32, {.i32 = -320000}}},
        {amqp_cstring_bytes("u32"), {AMQP_FIELD_KIND_U32, {.u32 = 4000000000u}}},
        {amqp_cstring_bytes("i64"), {AMQP_FIELD_KIND_I64, {.i64 = -6400000000LL}}},
        {amqp_cstring_bytes("f32"), {AMQP_FIELD_KIND_F32, {.f32 = 1.5f}}},
        {amqp_cstring_bytes("f64"), {AMQP_FIELD_KIND_F64, {.f64 = -2.25}}},
        {amqp_cstring_bytes("dec"), {AMQP_FIELD_KIND_DECIMAL, {.decimal = {2, 12345}}}},
        {amqp_cstring_bytes("str"), {AMQP_FIELD_KIND_UTF8, {.bytes = amqp_cstring_bytes("h\xc3\xa9llo")}}},
        {amqp_cstring_bytes("bytes"), {AMQP_FIELD_KIND_BYTES, {.bytes = {sizeof raw, (void *)raw}}}},
        {amqp_cstring_bytes("ts"), {AMQP_FIELD_KIND_TIMESTAMP, {.u64 = 1700000000}}},
        {amqp_cstring_bytes("void"), {AMQP_FIELD_KIND_VOID, {.i32 = 0}}},
        {amqp_cstring_bytes("array"), {AMQP_FIELD_KIND_ARRAY, {.array = {3, array_items}}}},
        {amqp_cstring_bytes("table"), {AMQP_FIELD_KIND_TABLE, {.table = {1, inner}}}},
        {amqp_cstring_bytes("empty"), {AMQP_FIELD_KIND_UTF8, {.bytes = {0, NULL}}}},
    };
    amqp_basic_properties_t p = {._flags = AMQP_BASIC_HEADERS_FLAG,
                                 .headers = {(int)(sizeof h / sizeof h[0]), h}};
    conf_event ev;
    int rc = round_trip(conn, q, &p, &ev);
    if (rc == 0) {
        const amqp_table_t *g = &ev.message.properties.headers;
        if (g->num_entries != p.headers.num_entries)
            rc = conf_fail("%d header entries came back, sent %d", g->num_entries, p.headers.num_entries);
        for (int i = 0; rc == 0 && i < p.headers.num_entries; i++)
            if (!bytes_eq(g->entries[i].key, h[i].key) || !field_eq(&g->entries[i].value, &h[i].value))
                rc = conf_fail("header '%.*s' (type '%c') changed: came back as type '%c'",
                               (int)h[i].key.len, (const char *)h[i].key.bytes, h[i].value.kind,
                               g->entries[i].value.kind);
        conf_event_free(&ev);
    }
    conf_close(conn);
    return rc;
}

static int user_id_mismatch_406(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    amqp_basic_properties_t p = {0};
    SET_STR(p, user_id, AMQP_BASIC_USER_ID_FLAG, "not-the-logged-in-user");
    int rc = conf_publish(conn, 1, "", q, "spoof", &p);
    if (rc == 0)
        rc = conf_expect_channel_close(conn, 1, conf_sync(conn, 1), CONF_PRECONDITION_FAILED);
    if (rc == 0)
        rc = conf_channel_open(conn, 1);
    if (rc == 0)
        rc = conf_get_empty(conn, 1, q);
    conf_close(conn);
    return rc;
}

static int long_shortstr_properties(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    char longest[256];
    memset(longest, 'x', 255);
    longest[255] = '\0';
    amqp_basic_properties_t p = {0};
    SET_STR(p, message_id, AMQP_BASIC_MESSAGE_ID_FLAG, longest);
    SET_STR(p, correlation_id, AMQP_BASIC_CORRELATION_ID_FLAG, longest);
    conf_event ev;
    int rc = round_trip(conn, q, &p, &ev);
    if (rc == 0) {
        if (!bytes_eq(ev.message.properties.message_id, p.message_id) ||
            !bytes_eq(ev.message.properties.correlation_id, p.correlation_id))
            rc = conf_fail("255-byte shortstr properties changed in transit");
        conf_event_free(&ev);
    }
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ content */

static void fill_pattern(amqp_bytes_t b, unsigned seed)
{
    unsigned char *p = b.bytes;
    for (size_t i = 0; i < b.len; i++)
        p[i] = (unsigned char)((i * 31u + seed + (i >> 13)) & 0xff);
}

/* Publishes a patterned body of `size` bytes and gets it back intact. */
static int body_round_trip(amqp_connection_state_t conn, const char *q, size_t size)
{
    amqp_bytes_t body = size ? amqp_bytes_malloc(size) : amqp_empty_bytes;
    if (size && body.bytes == NULL)
        return conf_fail("out of memory for a %zu-byte body", size);
    fill_pattern(body, (unsigned)size);
    int rc = conf_publish_bytes(conn, 1, "", q, body, 0, NULL);
    conf_event ev;
    int got = rc == 0 ? conf_get(conn, 1, q, 1, &ev) : -1;
    if (rc == 0 && got != 1)
        rc = conf_fail("%zu-byte body: basic.get %s", size, got == 0 ? "empty" : ev.reply_text);
    if (rc == 0) {
        if (ev.message.body.len != size)
            rc = conf_fail("%zu-byte body came back as %zu bytes", size, ev.message.body.len);
        else if (size && memcmp(ev.message.body.bytes, body.bytes, size) != 0)
            rc = conf_fail("%zu-byte body came back corrupted", size);
        conf_event_free(&ev);
    }
    if (size)
        amqp_bytes_free(body);
    return rc;
}

static amqp_connection_state_t open_small_frames(const char **queue)
{
    conf_open_opts opts = {.frame_max = SMALL_FRAME_MAX};
    amqp_connection_state_t conn = conf_open_with(&opts);
    if (conn == NULL)
        return NULL;
    *queue = conf_queue_name("q");
    if (conf_channel_open(conn, 1) || conf_declare_queue(conn, 1, *queue, 0, 0, 0, conf_no_args)) {
        conf_close(conn);
        return NULL;
    }
    return conn;
}

static int body_empty(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    int rc = body_round_trip(conn, q, 0);
    conf_close(conn);
    return rc;
}

static int body_frame_boundaries(void)
{
    const char *q;
    amqp_connection_state_t conn = open_small_frames(&q);
    if (conn == NULL)
        return 1;
    const size_t per_frame = SMALL_FRAME_MAX - 8;
    const size_t sizes[] = {1, per_frame - 1, per_frame, per_frame + 1, 2 * per_frame,
                            2 * per_frame + 1, 65536, 131073};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof sizes / sizeof sizes[0]; i++)
        rc = body_round_trip(conn, q, sizes[i]);
    conf_close(conn);
    return rc;
}

static int body_16mib(void)
{
    const char *q;
    amqp_connection_state_t conn = open_small_frames(&q);
    if (conn == NULL)
        return 1;
    long long start = conf_now_ms();
    int rc = body_round_trip(conn, q, BIG_BODY);
    if (rc == 0)
        conf_note("16 MiB in %d-byte frames round trip %lld ms", SMALL_FRAME_MAX, conf_now_ms() - start);
    conf_close(conn);
    return rc;
}

static int body_all_byte_values(void)
{
    const char *q;
    amqp_connection_state_t conn = open_with_queue("q", &q);
    if (conn == NULL)
        return 1;
    unsigned char all[512];
    for (int i = 0; i < 512; i++)
        all[i] = (unsigned char)(i & 0xff);
    int rc = conf_publish_bytes(conn, 1, "", q, (amqp_bytes_t){sizeof all, all}, 0, NULL);
    conf_event ev;
    if (rc == 0)
        rc = conf_get_one(conn, 1, q, 1, &ev);
    if (rc == 0) {
        if (ev.message.body.len != sizeof all || memcmp(ev.message.body.bytes, all, sizeof all) != 0)
            rc = conf_fail("binary body (NUL, 0xCE frame-end bytes) changed in transit");
        conf_event_free(&ev);
    }
    conf_close(conn);
    return rc;
}

const conf_scenario conf_basic_scenarios[] = {
    {"basic.publish_get_round_trip", 1, publish_get_round_trip},
    {"basic.mandatory_unroutable_returned", 1, mandatory_unroutable_returned},
    {"basic.mandatory_routed_not_returned", 0, mandatory_routed_not_returned},
    {"basic.consume_delivers_in_order", 0, consume_delivers_in_order},
    {"basic.consumer_tag_server_generated", 0, consumer_tag_server_generated},
    {"basic.cancel_stops_delivery", 0, cancel_stops_delivery},
    {"properties.all_basic_properties_round_trip", 1, all_basic_properties_round_trip},
    {"properties.no_properties_round_trip", 0, no_properties_round_trip},
    {"properties.header_table_field_types", 0, header_table_field_types},
    {"properties.user_id_mismatch_406", 0, user_id_mismatch_406},
    {"properties.shortstr_255_bytes", 0, long_shortstr_properties},
    {"content.body_empty", 1, body_empty},
    {"content.body_frame_boundaries", 0, body_frame_boundaries},
    {"content.body_16mib", 0, body_16mib},
    {"content.body_all_byte_values", 0, body_all_byte_values},
    {NULL, 0, NULL},
};
