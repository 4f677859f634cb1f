/* Unit tests for the server->client encoders (streamproto/encode.c).
 *
 * Byte vectors marked "live" are what RabbitMQ 3.10.8 (rabbitmq_stream, on
 * this machine) sent to a raw client, tests/unit/streamproto_live_client.py,
 * on 2026-12-06; the others are built from PROTOCOL.adoc (v3.13.x) and
 * rabbit_stream_core.erl's frame/1, for commands 3.10 lacks. Every encoder
 * is also run at every smaller buffer size: it must fail and leave nothing.
 */
#include "test_streamproto_util.h"

/* Runs `call` (which encodes into `b`) with every capacity up to the
 * vector's length: false and an empty buffer below it, the exact bytes at it. */
#define ENCODES(hex, call)                                                   \
    do {                                                                     \
        size_t want_n;                                                       \
        uint8_t *want = hex_bytes(hex, &want_n);                             \
        uint8_t *enc_mem = malloc(want_n + 1);                               \
        assert_non_null(enc_mem);                                            \
        for (size_t cap = 0; cap <= want_n; cap++) {                         \
            sp_buf b = {enc_mem, cap, 0, false};                             \
            bool ok = (call);                                                \
            assert_int_equal(ok, cap == want_n);                             \
            assert_int_equal(b.len, ok ? want_n : 0);                        \
            assert_false(b.full);                                            \
        }                                                                    \
        assert_memory_equal(enc_mem, want, want_n);                          \
        free(enc_mem);                                                       \
        free(want);                                                          \
    } while (0)

static void test_handshake_live(void **state)
{
    static const sp_pair props[] = {
        {S("cluster_name"), S("h20c@vm")},
        {S("copyright"), S("Copyright (c) 2007-2022 VMware, Inc. or its affiliates.")},
        {S("information"), S("Licensed under the MPL 2.0. Website: https://rabbitmq.com")},
        {S("platform"), S("Erlang/OTP 25.2.3")},
        {S("product"), S("RabbitMQ")},
        {S("version"), S("3.10.8")},
    };
    ENCODES("000000f28011000100000001000100000006000c636c75737465725f6e616d6500076832306340766d"
            "0009636f707972696768740037436f707972696768742028632920323030372d3230323220564d7761"
            "72652c20496e632e206f722069747320616666696c69617465732e000b696e666f726d6174696f6e"
            "00394c6963656e73656420756e64657220746865204d504c20322e302e20576562736974653a2068"
            "747470733a2f2f7261626269746d712e636f6d0008706c6174666f726d001145726c616e672f4f54"
            "502032352e322e33000770726f6475637400085261626269744d51000776657273696f6e0006332e"
            "31302e38",
            sp_encode_peer_properties_response(&b, 1, SP_OK, props, 6));
    static const sp_slice mechs[] = {S("PLAIN"), S("AMQPLAIN")};
    ENCODES("0000001f80120001000000020001000000020005504c41494e0008414d51504c41494e",
            sp_encode_sasl_handshake_response(&b, 2, SP_OK, mechs, 2));
    ENCODES("0000000a80130001000000030001", sp_encode_response(&b, SP_SASL_AUTHENTICATE, 3, SP_OK));
    ENCODES("0000000a80130001000000030008",
            sp_encode_response(&b, SP_SASL_AUTHENTICATE, 3, SP_AUTHENTICATION_FAILURE));
    ENCODES("0000000a80130001000000030007",
            sp_encode_response(&b, SP_SASL_AUTHENTICATE, 3, SP_SASL_MECHANISM_NOT_SUPPORTED));
    ENCODES("0000000c00140001001000000000003c", sp_encode_tune(&b, 1048576, 60));
    static const sp_pair conn[] = {
        {S("advertised_port"), S("25812")},
        {S("advertised_host"), S("localhost")},
    };
    ENCODES("000000428015000100000004000100000002000f616476657274697365645f706f72740005323538"
            "3132000f616476657274697365645f686f737400096c6f63616c686f7374",
            sp_encode_open_response(&b, 4, SP_OK, conn, 2));
    /* refused: no property count (rabbit_stream_core's open with #{}) */
    ENCODES("0000000a8015000100000004000c",
            sp_encode_open_response(&b, 4, SP_VHOST_ACCESS_FAILURE, NULL, 0));
}

static void test_responses_live(void **state)
{
    ENCODES("0000000a800e0001000000050002", sp_encode_response(&b, SP_DELETE, 5,
                                                              SP_STREAM_DOES_NOT_EXIST));
    ENCODES("0000000a800d0001000000060001", sp_encode_response(&b, SP_CREATE, 6, SP_OK));
    ENCODES("0000000a800d0001000000070005",
            sp_encode_response(&b, SP_CREATE, 7, SP_STREAM_ALREADY_EXISTS));
    ENCODES("0000000a80010001000000090001", sp_encode_response(&b, SP_DECLARE_PUBLISHER, 9, SP_OK));
    ENCODES("00000012800500010000000a00010000000000000002",
            sp_encode_query_publisher_sequence_response(&b, 10, SP_OK, 2));
    ENCODES("00000012800b00010000000b00130000000000000000",
            sp_encode_query_offset_response(&b, 11, SP_NO_OFFSET, 0));
    ENCODES("00000012800b00010000000c00010000000000000001",
            sp_encode_query_offset_response(&b, 12, SP_OK, 1));
    ENCODES("0000000a800700010000000d0001", sp_encode_response(&b, SP_SUBSCRIBE, 13, SP_OK));
    ENCODES("0000000a800700010000000e0002",
            sp_encode_response(&b, SP_SUBSCRIBE, 14, SP_STREAM_DOES_NOT_EXIST));
    ENCODES("0000000780090001000409",
            sp_encode_credit_response(&b, SP_SUBSCRIPTION_ID_DOES_NOT_EXIST, 9));
    ENCODES("0000000a800c00010000000f0001", sp_encode_response(&b, SP_UNSUBSCRIBE, 15, SP_OK));
    ENCODES("0000000a80060001000000100001", sp_encode_response(&b, SP_DELETE_PUBLISHER, 16, SP_OK));
    ENCODES("0000000a80160001000000140001", sp_encode_response(&b, SP_CLOSE, 20, SP_OK));
    /* after an unknown key, a wrong version, a truncated body or a trailing
     * byte, once open: Close(1, unknown frame) */
    ENCODES("000000190016000100000001000d000d756e6b6e6f776e206672616d65",
            sp_encode_close(&b, 1, SP_UNKNOWN_FRAME, S("unknown frame")));
}

static void test_publish_live(void **state)
{
    static const uint64_t ids[] = {1, 2};
    ENCODES("0000001900030001070000000200000000000000010000000000000002",
            sp_encode_publish_confirm(&b, 7, ids, 2));
    static const uint64_t bad[] = {5};
    ENCODES("0000001300040001080000000100000000000000050012",
            sp_encode_publish_error(&b, 8, SP_PUBLISHER_DOES_NOT_EXIST, bad, 1));
    ENCODES("000000090003000107" "00000000", sp_encode_publish_confirm(&b, 7, NULL, 0));
}

/* Brokers, then streams: "nope" missing (leader 0xFFFF, no replicas), then
 * "cap-s" led by broker 0. */
static bool metadata(sp_buf *b)
{
    size_t start = sp_metadata_begin(b, 8, 1);
    sp_metadata_broker(b, 0, S("localhost"), 25812);
    sp_metadata_streams(b, 2);
    sp_metadata_stream_put(b, &(sp_metadata_stream){S("nope"), SP_STREAM_DOES_NOT_EXIST, 0,
                                                    NULL, 0});
    sp_metadata_stream_put(b, &(sp_metadata_stream){S("cap-s"), SP_OK, 0, NULL, 0});
    return sp_frame_end(b, start);
}

static bool metadata_replicas(sp_buf *b)
{
    static const uint16_t replicas[] = {1, 2};
    size_t start = sp_metadata_begin(b, 3, 0);
    sp_metadata_streams(b, 1);
    sp_metadata_stream_put(b, &(sp_metadata_stream){S("s"), SP_OK, 0, replicas, 2});
    return sp_frame_end(b, start);
}

static void test_metadata(void **state)
{
    ENCODES("0000003e800f00010000000800000001000000096c6f63616c686f7374000064d400000002000"
            "46e6f70650002ffff0000000000056361702d730001000000000000",
            metadata(&b));
    ENCODES("0000001f800f000100000003" "00000000" "00000001" "000173" "0001" "0000"
            "00000002" "0001" "0002",
            metadata_replicas(&b));
    ENCODES("0000000c0010000100060004" "6e6f7065",
            sp_encode_metadata_update(&b, SP_STREAM_NOT_AVAILABLE, S("nope")));
}

/* The header of the live Deliver (v1) of a 2-entry chunk: 0x42 bytes after
 * the size, of which 9 + 4 are size and header; the chunk follows. */
static void test_deliver_header(void **state)
{
    size_t n;
    uint8_t *live = hex_bytes("0000004200080001035000000200000002000001a24dc06cfd0000000000000001"
                              "0000000000000000b80676c20000000d0000000e00000000000000036162630000"
                              "00026465", &n);
    uint64_t chunk_len = n - 9;
    uint8_t mem[SP_DELIVER_HEADER_MAX];
    for (size_t cap = 0; cap <= 9; cap++) {
        sp_buf b = {mem, cap, 0, false};
        bool ok = sp_encode_deliver_header(&b, 1, 3, 0, chunk_len);
        assert_int_equal(ok, cap == 9);
        assert_int_equal(b.len, ok ? 9 : 0);
    }
    assert_memory_equal(mem, live, 9);
    free(live);
    /* v2 carries the committed chunk id before the chunk (PROTOCOL.adoc) */
    ENCODES("000000110008000203" "0000000000000064",
            sp_encode_deliver_header(&b, 2, 3, 100, 4));
    sp_buf b = {mem, sizeof mem, 0, false};
    assert_false(sp_encode_deliver_header(&b, 1, 0, 0, UINT32_MAX - 4));
    assert_false(sp_encode_deliver_header(&b, 3, 0, 0, 10));
    assert_int_equal(b.len, 0);
    assert_true(sp_encode_deliver_header(&b, 1, 0, 0, UINT32_MAX - 5));
    assert_memory_equal(mem, "\xff\xff\xff\xff", 4);
}

/* Commands RabbitMQ 3.10 lacks, from PROTOCOL.adoc (3.13). */
static void test_spec_only(void **state)
{
    ENCODES("0000000a001a000100000005" "0201", sp_encode_consumer_update(&b, 5, 2, true));
    ENCODES("0000000a001a000100000005" "0200", sp_encode_consumer_update(&b, 5, 2, false));
    static const sp_command_version v[] = {{SP_PUBLISH, 1, 2}, {SP_SUBSCRIBE, 1, 1}};
    ENCODES("0000001a801b000100000006" "0001" "00000002" "000200010002" "000700010001",
            sp_encode_exchange_command_versions_response(&b, 6, SP_OK, v, 2));
    static const sp_stat stats[] = {{S("first_chunk_id"), 0},
                                    {S("committed_chunk_id"), -1}};
    ENCODES("00000042801c000100000007" "0001" "00000002"
            "000e" "66697273745f6368756e6b5f6964" "0000000000000000"
            "0012" "636f6d6d69747465645f6368756e6b5f6964" "ffffffffffffffff",
            sp_encode_stream_stats_response(&b, 7, SP_OK, stats, 2));
    static const sp_slice parts[] = {S("ss-0"), S("ss-1")};
    ENCODES("0000001a8019000100000008" "0001" "00000002" "000473732d30" "000473732d31",
            sp_encode_streams_response(&b, SP_PARTITIONS, 8, SP_OK, parts, 2));
    /* 3.10.8 answered Route/Partitions under the request's key (0x0018, a
     * bug 3.13 fixed); Warren answers as 3.13 does */
    ENCODES("0000000e8018000100000011" "0002" "00000000",
            sp_encode_streams_response(&b, SP_ROUTE, 17, SP_STREAM_DOES_NOT_EXIST, NULL, 0));
    ENCODES("0000000a801d000100000009" "0011",
            sp_encode_response(&b, SP_CREATE_SUPER_STREAM, 9, SP_PRECONDITION_FAILED));
    ENCODES("0000000400170001", sp_encode_heartbeat(&b));
}

/* What ExchangeCommandVersions advertises: 3.13's list. */
static void test_server_versions(void **state)
{
    size_t n;
    const sp_command_version *v = sp_server_versions(&n);
    assert_int_equal(n, 19);
    bool publish = false;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(v[i].min_version, 1);
        assert_int_equal(v[i].max_version, v[i].key == SP_PUBLISH ? 2 : 1);
        publish |= v[i].key == SP_PUBLISH;
        assert_true(v[i].key != SP_DELIVER && v[i].key != SP_PEER_PROPERTIES);
    }
    assert_true(publish);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_live),
        cmocka_unit_test(test_responses_live),
        cmocka_unit_test(test_publish_live),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_deliver_header),
        cmocka_unit_test(test_spec_only),
        cmocka_unit_test(test_server_versions),
    };
    return cmocka_run_group_tests_name("streamproto_encode", tests, NULL, NULL);
}
