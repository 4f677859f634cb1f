/* Unit tests for decoding client->server commands (streamproto/decode.c).
 *
 * Vectors marked "live" are the frames tests/unit/streamproto_live_client.py
 * sent to RabbitMQ 3.10.8, which took each of them (its replies are in
 * test_streamproto_encode.c); the others are built from PROTOCOL.adoc
 * (v3.13.x) for commands 3.10 lacks. Each vector is decoded whole, then cut
 * at every body length and given a trailing byte: only the cuts a command
 * really allows (a list ending early, Subscribe without properties) decode,
 * everything else is malformed -- never a read past the frame (the copies
 * are exactly sized, for ASan). Then unknown keys, versions and directions.
 */
#include "test_streamproto_vectors.h"

static sp_status decode_hex(const char *hex, sp_command *c, uint8_t **keep)
{
    size_t n;
    uint8_t *b = hex_bytes(hex, &n);
    sp_status st = decode_bytes(b, n, c, keep);
    free(b);
    return st;
}

#define NVECTORS (sizeof vectors / sizeof vectors[0])

static void test_vectors_decode(void **state)
{
    for (size_t i = 0; i < NVECTORS; i++) {
        sp_command c;
        uint8_t *b;
        assert_int_equal(decode_hex(vectors[i].hex, &c, &b), SP_DONE);
        vectors[i].check(&c);
        free(b);
    }
}

static bool has_correlation_id(const sp_command *c)
{
    if (c->response)
        return c->key != SP_TUNE;
    return !(c->key == SP_PUBLISH || c->key == SP_CREDIT || c->key == SP_STORE_OFFSET ||
             c->key == SP_HEARTBEAT || c->key == SP_TUNE);
}

/* Every shorter body is malformed, but for the allowed prefixes; a trailing
 * byte is always malformed. Key, version and correlation id stay known. */
static void test_vectors_cut_and_padded(void **state)
{
    for (size_t i = 0; i < NVECTORS; i++) {
        size_t n;
        uint8_t *whole = hex_bytes(vectors[i].hex, &n);
        uint8_t *buf = malloc(n + 1);
        assert_non_null(buf);
        sp_command full;
        {
            sp_frame f;
            size_t used;
            assert_int_equal(sp_frame_next(whole, n, 0, &f, &used), SP_DONE);
            assert_int_equal(sp_command_decode(&f, &full), SP_DONE);
        }
        uint32_t body_len = (uint32_t)n - 8;
        for (uint32_t cut = 0; cut <= body_len + 1; cut++) {
            if (cut == body_len)
                continue;
            bool allowed = false;
            for (int k = 0; k < 3 && vectors[i].prefixes[k]; k++)
                allowed |= vectors[i].prefixes[k] == cut;
            size_t len = frame_of(buf, n + 1, whole[4] << 8 | whole[5],
                                  (uint16_t)(whole[6] << 8 | whole[7]), whole + 8,
                                  cut <= body_len ? cut : body_len);
            if (cut > body_len)
                buf[len++] = 0, buf[3]++; /* one trailing byte */
            uint8_t *exact = dup_exact(buf, len);
            sp_frame f;
            size_t used;
            sp_command c;
            assert_int_equal(sp_frame_next(exact, len, 0, &f, &used), SP_DONE);
            sp_status st = sp_command_decode(&f, &c);
            if (st != (allowed ? SP_DONE : SP_MALFORMED))
                fail_msg("%s cut at %u: status %d", vectors[i].name, cut, st);
            assert_int_equal(c.key, full.key);
            assert_int_equal(c.response, full.response);
            if (has_correlation_id(&full) && cut >= 4)
                assert_int_equal(c.correlation_id, full.correlation_id);
            free(exact);
        }
        free(buf);
        free(whole);
    }
}

/* What RabbitMQ calls unknown: the key and correlation id stay readable. */
static void test_unknown(void **state)
{
    static const struct {
        const char *hex;
        uint16_t key;
        bool response;
        uint32_t corr;
    } cases[] = {
        {"00000008007f00010000004d", 0x7f, false, 77},          /* live: unknown key */
        {"0000000e000b00090000004d000163000173", 0x0b, false, 77}, /* live: QueryOffset v9 */
        {"0000000e000b00000000004d000163000173", 0x0b, false, 77}, /* version 0 */
        {"0000000900020003010000000000", 0x02, false, 0}, /* Publish v3: no id */
        {"0000000d0008000103" "0000000000000000", 0x08, false, 0x03000000}, /* Deliver */
        {"0000000a001a000100000005" "0201", 0x1a, false, 5},    /* ConsumerUpdate request */
        {"0000000c00030001070000000000", 0x03, false, 0x07000000}, /* PublishConfirm */
        {"0000000a80010001000000090001", 0x01, true, 9},        /* a response to nothing */
        {"0000000a8000000100000009", 0x00, true, 9},            /* key 0 */
        {"0000000600000001", 0x00, false, 0},                   /* key 0, no body */
        {"00000006001f0001", 0x1f, false, 0},                   /* past the last key */
        {"000000060017000200", 0x17, false, 0},                 /* Heartbeat v2 (size 5) */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n, used;
        uint8_t *b = hex_bytes(cases[i].hex, &n);
        b[3] = (uint8_t)(n - 4);
        sp_frame f;
        sp_command c;
        assert_int_equal(sp_frame_next(b, n, 0, &f, &used), SP_DONE);
        if (sp_command_decode(&f, &c) != SP_UNKNOWN)
            fail_msg("case %zu not unknown", i);
        assert_int_equal(c.key, cases[i].key);
        assert_int_equal(c.response, cases[i].response);
        assert_int_equal(c.correlation_id, cases[i].corr);
        free(b);
    }
}

/* Values RabbitMQ's parser cannot take (it crashes, closing the socket). */
static void test_bad_values(void **state)
{
    static const char *cases[] = {
        "000000100007000100000001020001730000" "0001",           /* offset type 0 */
        "000000100007000100000001020001730006" "0001",           /* offset type 6 */
        "0000000c801a000100000005" "0001" "0006",                /* consumer update type 6 */
        /* Publish v2 with a sub-entry batch (v1 only); a batch cut short */
        "00000000000200020100000001" "0000000000000003" "ffff" "90" "0005" "00000064"
        "00000003" "616263",
        "00000000000200010100000001" "0000000000000003" "90" "0005" "00000064" "00000004"
        "616263",
        /* SASL data length over the body */
        "000000170013000100000003" "0005504c41494e" "00000005",
        /* a string length of 0xFFFF (null) asks for 65535 bytes */
        "0000000a001500010000000400ffff",
        /* CreateSuperStream: 3 partitions announced, 2 there */
        "00000037001d000100000001" "00027373" "00000003" "000473732d30" "000473732d31"
        "00000002" "000130" "000131" "00000001" "00076d61782d616765" "00023168",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sp_command c;
        uint8_t *b;
        size_t n;
        uint8_t *raw = hex_bytes(cases[i], &n);
        raw[3] = (uint8_t)(n - 4); /* the size is set here */
        char hex[512] = "";
        for (size_t k = 0; k < n; k++)
            sprintf(hex + 2 * k, "%02x", raw[k]);
        free(raw);
        if (decode_hex(hex, &c, &b) != SP_MALFORMED)
            fail_msg("case %zu not malformed", i);
        free(b);
    }
}

/* As RabbitMQ: a Publish holds the entries its bytes hold; the declared
 * count is passed on (RabbitMQ counts credit with it), not enforced. */
static void test_publish_count_not_enforced(void **state)
{
    sp_command c;
    uint8_t *b;
    assert_int_equal(decode_hex("00000026000200010700000005" "00000000000000010000000361626300000000"
                                "00000002000000026465", &c, &b), SP_DONE);
    assert_int_equal(c.u.publish.declared_count, 5);
    assert_int_equal(c.u.publish.messages.count, 2);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_decode),
        cmocka_unit_test(test_vectors_cut_and_padded),
        cmocka_unit_test(test_unknown),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_publish_count_not_enforced),
    };
    return cmocka_run_group_tests_name("streamproto_decode", tests, NULL, NULL);
}
