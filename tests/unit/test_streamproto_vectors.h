/* The client frames test_streamproto_decode.c decodes, with what each must
 * decode to. "live": frames tests/unit/streamproto_live_client.py sent to
 * RabbitMQ 3.10.8, which took each of them; the rest are built from
 * PROTOCOL.adoc (v3.13.x) for commands 3.10 lacks. */
#ifndef WARREN_TEST_STREAMPROTO_VECTORS_H
#define WARREN_TEST_STREAMPROTO_VECTORS_H

#include "test_streamproto_util.h"

typedef void (*check_fn)(const sp_command *c);

typedef struct vector {
    const char *name;
    const char *hex;       /* the whole frame, size first */
    check_fn check;
    uint32_t prefixes[3];  /* shorter body lengths that decode too (0-terminated) */
} vector;

/* The next item of a list is this pair / string. */
static void next_pair(sp_list *it, const char *key, const char *value)
{
    sp_slice k, v;
    assert_true(sp_pair_next(it, &k, &v));
    assert_slice(k, key);
    assert_slice(v, value);
}

static void next_string(sp_list *it, const char *want)
{
    sp_slice s;
    assert_true(sp_string_next(it, &s));
    assert_slice(s, want);
}

static void check_peer_properties(const sp_command *c)
{
    assert_int_equal(c->correlation_id, 1);
    sp_list it = c->u.peer_properties.properties;
    sp_slice k, v;
    next_pair(&it, "product", "raw");
    assert_false(sp_pair_next(&it, &k, &v));
}

static void check_sasl_handshake(const sp_command *c)
{
    assert_int_equal(c->key, SP_SASL_HANDSHAKE);
    assert_int_equal(c->correlation_id, 2);
}

static void check_sasl_authenticate(const sp_command *c)
{
    assert_slice(c->u.sasl_authenticate.mechanism, "PLAIN");
    assert_int_equal(c->u.sasl_authenticate.data.len, 12);
    assert_memory_equal(c->u.sasl_authenticate.data.ptr, "\0guest\0guest", 12);
}

static void check_sasl_no_data(const sp_command *c)
{
    assert_slice(c->u.sasl_authenticate.mechanism, "PLAIN");
    assert_int_equal(c->u.sasl_authenticate.data.len, 0);
}

static void check_tune(const sp_command *c)
{
    assert_true(c->key == SP_TUNE && c->response);
    assert_int_equal(c->correlation_id, 0);
    assert_int_equal(c->u.tune.frame_max, 1048576);
    assert_int_equal(c->u.tune.heartbeat, 60);
}

static void check_tune_request(const sp_command *c)
{
    assert_true(c->key == SP_TUNE && !c->response); /* RabbitMQ takes both */
    assert_int_equal(c->u.tune.frame_max, 1048576);
}

static void check_open(const sp_command *c)
{
    assert_int_equal(c->correlation_id, 4);
    assert_slice(c->u.open.vhost, "/");
}

static void check_delete(const sp_command *c)
{
    assert_int_equal(c->key, SP_DELETE);
    assert_slice(c->u.delete_stream.stream, "cap-s");
}

static void check_create(const sp_command *c)
{
    assert_slice(c->u.create.stream, "cap-s");
    assert_int_equal(c->u.create.arguments.count, 0);
}

static void check_metadata(const sp_command *c)
{
    sp_list it = c->u.metadata.streams;
    sp_slice s;
    assert_int_equal(it.count, 2);
    next_string(&it, "cap-s");
    next_string(&it, "nope");
    assert_false(sp_string_next(&it, &s));
}

static void check_declare_publisher(const sp_command *c)
{
    assert_int_equal(c->correlation_id, 9);
    assert_int_equal(c->u.declare_publisher.publisher_id, 7);
    assert_slice(c->u.declare_publisher.reference, "ref1");
    assert_slice(c->u.declare_publisher.stream, "cap-s");
}

static void check_publish(const sp_command *c)
{
    assert_int_equal(c->correlation_id, 0);
    assert_int_equal(c->u.publish.publisher_id, 7);
    assert_int_equal(c->u.publish.declared_count, 2);
    assert_false(c->u.publish.filtered);
    sp_list it = c->u.publish.messages;
    sp_message m;
    assert_true(sp_message_next(&it, false, &m));
    assert_int_equal(m.publishing_id, 1);
    assert_slice(m.data, "abc");
    assert_null(m.filter.ptr);
    assert_false(m.batch);
    assert_true(sp_message_next(&it, false, &m));
    assert_int_equal(m.publishing_id, 2);
    assert_slice(m.data, "de");
    assert_false(sp_message_next(&it, false, &m));
}

static void check_publish_v2(const sp_command *c)
{
    assert_true(c->u.publish.filtered);
    sp_list it = c->u.publish.messages;
    sp_message m;
    assert_true(sp_message_next(&it, true, &m));
    assert_int_equal(m.publishing_id, 1);
    assert_slice(m.filter, "a");
    assert_slice(m.data, "x");
    assert_true(sp_message_next(&it, true, &m));
    assert_int_equal(m.publishing_id, 0x0102030405060708ULL);
    assert_non_null(m.filter.ptr); /* an empty filter value is one */
    assert_slice(m.filter, "");
    assert_slice(m.data, "yz");
    assert_false(sp_message_next(&it, true, &m));
}

static void check_publish_batch(const sp_command *c)
{
    sp_list it = c->u.publish.messages;
    sp_message m;
    assert_true(sp_message_next(&it, false, &m));
    assert_int_equal(m.publishing_id, 3);
    assert_true(m.batch);
    assert_int_equal(m.compression, 1);
    assert_int_equal(m.batch_count, 5);
    assert_int_equal(m.uncompressed_size, 100);
    assert_slice(m.data, "abc");
    assert_null(m.filter.ptr);
    assert_false(sp_message_next(&it, false, &m));
}

static void check_publish_v2_no_filter(const sp_command *c)
{
    sp_list it = c->u.publish.messages;
    sp_message m;
    assert_true(sp_message_next(&it, true, &m));
    assert_int_equal(m.publishing_id, 9);
    assert_null(m.filter.ptr); /* length -1: no filter value */
    assert_false(m.batch);
    assert_slice(m.data, "A");
}

static void check_query_publisher_sequence(const sp_command *c)
{
    assert_slice(c->u.query_publisher_sequence.reference, "ref1");
    assert_slice(c->u.query_publisher_sequence.stream, "cap-s");
}

static void check_query_offset(const sp_command *c)
{
    assert_int_equal(c->correlation_id, 11);
    assert_slice(c->u.query_offset.reference, "cons");
    assert_slice(c->u.query_offset.stream, "cap-s");
}

static void check_store_offset(const sp_command *c)
{
    assert_slice(c->u.store_offset.reference, "cons");
    assert_slice(c->u.store_offset.stream, "cap-s");
    assert_int_equal(c->u.store_offset.offset, 1);
}

static void check_subscribe_first(const sp_command *c)
{
    assert_int_equal(c->u.subscribe.subscription_id, 3);
    assert_slice(c->u.subscribe.stream, "cap-s");
    assert_int_equal(c->u.subscribe.offset.type, SP_OFFSET_FIRST);
    assert_int_equal(c->u.subscribe.credit, 10);
    sp_list it = c->u.subscribe.properties;
    sp_slice k, v;
    next_pair(&it, "x", "y");
    assert_false(sp_pair_next(&it, &k, &v));
}

static void check_subscribe_offset(const sp_command *c)
{
    assert_int_equal(c->u.subscribe.subscription_id, 4);
    assert_int_equal(c->u.subscribe.offset.type, SP_OFFSET_OFFSET);
    assert_int_equal(c->u.subscribe.offset.value, 0);
    assert_int_equal(c->u.subscribe.properties.count, 0);
}

static void check_subscribe_timestamp(const sp_command *c)
{
    assert_int_equal(c->u.subscribe.offset.type, SP_OFFSET_TIMESTAMP);
    assert_int_equal((int64_t)c->u.subscribe.offset.value, -2);
    assert_int_equal(c->u.subscribe.credit, 1);
}

static void check_subscribe_next(const sp_command *c)
{
    assert_int_equal(c->u.subscribe.offset.type, SP_OFFSET_NEXT);
    sp_list it = c->u.subscribe.properties;
    sp_slice k, v;
    next_pair(&it, "single-active-consumer", "true");
    next_pair(&it, "filter.0", "a");
    assert_false(sp_pair_next(&it, &k, &v));
}

static void check_subscribe_last(const sp_command *c)
{
    assert_int_equal(c->u.subscribe.offset.type, SP_OFFSET_LAST);
}

static void check_credit(const sp_command *c)
{
    assert_int_equal(c->u.credit.subscription_id, 9);
    assert_int_equal(c->u.credit.credit, 1);
}

static void check_unsubscribe(const sp_command *c)
{
    assert_int_equal(c->correlation_id, 15);
    assert_int_equal(c->u.unsubscribe.subscription_id, 3);
}

static void check_delete_publisher(const sp_command *c)
{
    assert_int_equal(c->u.delete_publisher.publisher_id, 7);
}

static void check_route(const sp_command *c)
{
    assert_slice(c->u.route.routing_key, "rk");
    assert_slice(c->u.route.super_stream, "nosuper");
}

static void check_partitions(const sp_command *c)
{
    assert_slice(c->u.partitions.super_stream, "nosuper");
}

static void check_heartbeat(const sp_command *c)
{
    assert_int_equal(c->key, SP_HEARTBEAT);
}

static void check_close(const sp_command *c)
{
    assert_false(c->response);
    assert_int_equal(c->correlation_id, 20);
    assert_int_equal(c->u.close.code, 1);
    assert_slice(c->u.close.reason, "bye");
}

static void check_close_ok(const sp_command *c)
{
    assert_true(c->key == SP_CLOSE && c->response);
    assert_int_equal(c->correlation_id, 1);
    assert_int_equal(c->u.close_ok.code, SP_OK);
}

static void check_exchange_command_versions(const sp_command *c)
{
    sp_list it = c->u.exchange_command_versions.commands;
    sp_command_version v;
    assert_true(sp_version_next(&it, &v));
    assert_int_equal(v.key, SP_DELIVER);
    assert_int_equal(v.min_version, 1);
    assert_int_equal(v.max_version, 2);
    assert_false(sp_version_next(&it, &v));
}

static void check_consumer_update_offset(const sp_command *c)
{
    assert_true(c->key == SP_CONSUMER_UPDATE && c->response);
    assert_int_equal(c->correlation_id, 5);
    assert_int_equal(c->u.consumer_update.code, SP_OK);
    assert_int_equal(c->u.consumer_update.offset.type, SP_OFFSET_OFFSET);
    assert_int_equal(c->u.consumer_update.offset.value, 42);
}

static void check_consumer_update_none(const sp_command *c)
{
    assert_int_equal(c->u.consumer_update.offset.type, SP_OFFSET_NONE);
}

static void check_stream_stats(const sp_command *c)
{
    assert_slice(c->u.stream_stats.stream, "s");
}

static void check_create_super_stream(const sp_command *c)
{
    sp_slice s, k, v;
    assert_slice(c->u.create_super_stream.name, "ss");
    sp_list it = c->u.create_super_stream.partitions;
    next_string(&it, "ss-0");
    next_string(&it, "ss-1");
    assert_false(sp_string_next(&it, &s));
    it = c->u.create_super_stream.binding_keys;
    next_string(&it, "0");
    next_string(&it, "1");
    assert_false(sp_string_next(&it, &s));
    it = c->u.create_super_stream.arguments;
    next_pair(&it, "max-age", "1h");
    assert_false(sp_pair_next(&it, &k, &v));
}

static void check_delete_super_stream(const sp_command *c)
{
    assert_slice(c->u.delete_super_stream.name, "ss");
}

static const vector vectors[] = {
    /* live */
    {"peer_properties", "0000001a001100010000000100000001000770726f647563740003726177",
     check_peer_properties, {8}},
    {"sasl_handshake", "000000080012000100000002", check_sasl_handshake, {0}},
    {"sasl_authenticate",
     "0000001f00130001000000030005504c41494e0000000c006775657374006775657374",
     check_sasl_authenticate, {0}},
    {"tune", "0000000c80140001001000000000003c", check_tune, {0}},
    {"open", "0000000b001500010000000400012f", check_open, {0}},
    {"delete", "0000000f000e00010000000500056361702d73", check_delete, {0}},
    {"create", "00000013000d00010000000600056361702d7300000000", check_create, {0}},
    {"metadata", "00000019000f0001000000080000000200056361702d7300046e6f7065", check_metadata,
     {8, 15}},
    {"declare_publisher", "0000001600010001000000090700047265663100056361702d73",
     check_declare_publisher, {0}},
    {"publish",
     "000000260002000107000000020000000000000001000000036162630000000000000002000000026465",
     check_publish, {5, 20}},
    {"query_publisher_sequence", "00000015000500010000000a00047265663100056361702d73",
     check_query_publisher_sequence, {0}},
    {"query_offset", "00000015000b00010000000b0004636f6e7300056361702d73", check_query_offset,
     {0}},
    {"store_offset", "00000019000a00010004636f6e7300056361702d730000000000000001",
     check_store_offset, {0}},
    {"subscribe first",
     "0000001e000700010000000d0300056361702d730001000a00000001000178000179",
     check_subscribe_first, {16, 20}},
    {"subscribe offset", "0000001b000700010000000e0400046e6f706500040000000000000000000a",
     check_subscribe_offset, {0}},
    {"credit", "0000000700090001090001", check_credit, {0}},
    {"unsubscribe", "00000009000c00010000000f03", check_unsubscribe, {0}},
    {"delete_publisher", "00000009000600010000001007", check_delete_publisher, {0}},
    {"route", "0000001500180001000000110002726b00076e6f7375706572", check_route, {0}},
    {"partitions", "00000011001900010000001200076e6f7375706572", check_partitions, {0}},
    {"heartbeat", "0000000400170001", check_heartbeat, {0}},
    {"close", "0000000f001600010000001400010003627965", check_close, {0}},
    /* PROTOCOL.adoc */
    {"publish v2",
     "00000029000200020100000002" "0000000000000001" "000161" "0000000178"
     "0102030405060708" "0000" "00000002797a",
     check_publish_v2, {5, 21}},
    {"publish batch", "0000001f000200010100000001" "0000000000000003" "90" "0005" "00000064"
     "00000003" "616263", check_publish_batch, {5}},
    {"publish v2 no filter", "00000018000200020100000001" "0000000000000009" "ffff" "00000001"
     "41", check_publish_v2_no_filter, {5}},
    {"sasl_authenticate -1", "000000130013000100000003" "0005504c41494e" "ffffffff",
     check_sasl_no_data, {0}},
    {"subscribe timestamp", "000000180007000100000001" "02" "000173" "0005" "fffffffffffffffe"
     "0001", check_subscribe_timestamp, {0}},
    {"subscribe next",
     "0000003f000700010000000102000173000300010000000200" "1673696e676c652d6163746976652d"
     "636f6e73756d6572" "000474727565" "000866696c7465722e30" "000161",
     check_subscribe_next, {12, 16, 46}},
    {"subscribe last", "000000100007000100000001020001730002" "0001", check_subscribe_last, {0}},
    {"tune request", "0000000c00140001001000000000003c", check_tune_request, {0}},
    {"close response", "0000000a80160001000000010001", check_close_ok, {0}},
    {"exchange_command_versions", "00000012001b00010000004d00000001000800010002",
     check_exchange_command_versions, {8}},
    {"consumer_update response", "00000014801a000100000005" "0001" "0004" "000000000000002a",
     check_consumer_update_offset, {6}},
    {"consumer_update response none", "0000000c801a000100000005" "0001" "0000",
     check_consumer_update_none, {6}},
    {"stream_stats", "0000000b001c000100000001" "000173", check_stream_stats, {0}},
    {"create_super_stream",
     "00000037001d000100000001" "00027373" "00000002" "000473732d30" "000473732d31"
     "00000002" "000130" "000131" "00000001" "00076d61782d616765" "00023168",
     check_create_super_stream, {38}},
    {"delete_super_stream", "0000000c001e000100000001" "00027373", check_delete_super_stream,
     {0}},
};

#endif
