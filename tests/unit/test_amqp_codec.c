/* Unit tests for the method and content-header codec (amqp_spec.c, codec.c).
 *
 * Every method of the spec is round-tripped with generated sample values
 * (walking AMQP_METHOD_FIELDS), truncated at every length and given a
 * trailing byte. Because a round trip through our own encoder and decoder
 * cannot catch a mistake both share (bit order, field order), a set of
 * golden payloads produced by an independent encoder (pika 1.2's spec
 * module) is decoded and re-encoded byte for byte.
 *
 * Inputs are copied into exactly-sized malloc'd buffers, so under ASan any
 * read past the end of a payload fails the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../amqp/amqp.h"

/* ---- golden payloads (pika 1.2 spec encoders) ---------------------------- */

static const uint8_t gold_basic_consume[] = {
    0x00, 0x3c, 0x00, 0x14, 0x00, 0x00, 0x02, 0x71, 0x31, 0x04, 0x63, 0x74, 0x61, 0x67, 0x05,
    0x00, 0x00, 0x00, 0x10, 0x0a, 0x78, 0x2d, 0x70, 0x72, 0x69, 0x6f, 0x72, 0x69, 0x74, 0x79,
    0x49, 0x00, 0x00, 0x00, 0x05,
};
static const uint8_t gold_queue_declare[] = {
    0x00, 0x32, 0x00, 0x0a, 0x00, 0x00, 0x06, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x73, 0x1a, 0x00,
    0x00, 0x00, 0x00,
};
static const uint8_t gold_exchange_declare[] = {
    0x00, 0x28, 0x00, 0x0a, 0x00, 0x00, 0x02, 0x65, 0x78, 0x05, 0x74, 0x6f, 0x70, 0x69, 0x63,
    0x15, 0x00, 0x00, 0x00, 0x1a, 0x12, 0x61, 0x6c, 0x74, 0x65, 0x72, 0x6e, 0x61, 0x74, 0x65,
    0x2d, 0x65, 0x78, 0x63, 0x68, 0x61, 0x6e, 0x67, 0x65, 0x53, 0x00, 0x00, 0x00, 0x02, 0x61,
    0x65,
};
static const uint8_t gold_access_request[] = {
    0x00, 0x1e, 0x00, 0x0a, 0x05, 0x2f, 0x64, 0x61, 0x74, 0x61, 0x0a,
};
static const uint8_t gold_basic_nack[] = {
    0x00, 0x3c, 0x00, 0x78, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x02,
};
static const uint8_t gold_basic_deliver[] = {
    0x00, 0x3c, 0x00, 0x3c, 0x01, 0x63, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x01,
    0x0a, 0x61, 0x6d, 0x71, 0x2e, 0x64, 0x69, 0x72, 0x65, 0x63, 0x74, 0x02, 0x72, 0x6b,
};
static const uint8_t gold_connection_tune[] = {
    0x00, 0x0a, 0x00, 0x1e, 0x07, 0xff, 0x00, 0x02, 0x00, 0x00, 0x00, 0x3c,
};
static const uint8_t gold_connection_close[] = {
    0x00, 0x0a, 0x00, 0x32, 0x01, 0x94, 0x09, 0x4e, 0x4f, 0x54, 0x5f, 0x46, 0x4f, 0x55, 0x4e,
    0x44, 0x00, 0x32, 0x00, 0x0a,
};
static const uint8_t gold_properties[] = {
    0xff, 0xfc, 0x0a, 0x74, 0x65, 0x78, 0x74, 0x2f, 0x70, 0x6c, 0x61, 0x69, 0x6e, 0x04, 0x67,
    0x7a, 0x69, 0x70, 0x00, 0x00, 0x00, 0x08, 0x01, 0x68, 0x53, 0x00, 0x00, 0x00, 0x01, 0x76,
    0x02, 0x07, 0x04, 0x63, 0x6f, 0x72, 0x72, 0x02, 0x72, 0x71, 0x05, 0x36, 0x30, 0x30, 0x30,
    0x30, 0x03, 0x6d, 0x69, 0x64, 0x00, 0x00, 0x00, 0x00, 0x65, 0x53, 0xf1, 0x00, 0x01, 0x74,
    0x05, 0x67, 0x75, 0x65, 0x73, 0x74, 0x03, 0x61, 0x70, 0x70, 0x02, 0x63, 0x6c,
};
static const uint8_t gold_content_header[] = {
    0x00, 0x3c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0xff, 0xfc, 0x0a,
    0x74, 0x65, 0x78, 0x74, 0x2f, 0x70, 0x6c, 0x61, 0x69, 0x6e, 0x04, 0x67, 0x7a, 0x69, 0x70,
    0x00, 0x00, 0x00, 0x08, 0x01, 0x68, 0x53, 0x00, 0x00, 0x00, 0x01, 0x76, 0x02, 0x07, 0x04,
    0x63, 0x6f, 0x72, 0x72, 0x02, 0x72, 0x71, 0x05, 0x36, 0x30, 0x30, 0x30, 0x30, 0x03, 0x6d,
    0x69, 0x64, 0x00, 0x00, 0x00, 0x00, 0x65, 0x53, 0xf1, 0x00, 0x01, 0x74, 0x05, 0x67, 0x75,
    0x65, 0x73, 0x74, 0x03, 0x61, 0x70, 0x70, 0x02, 0x63, 0x6c,
};

/* ---- helpers ------------------------------------------------------------- */

/* A copy of `p` in a buffer of exactly `n` bytes, so ASan sees overreads. */
static uint8_t *dup_exact(const void *p, size_t n)
{
    uint8_t *b = malloc(n ? n : 1);

    assert_non_null(b);
    if (n)
        memcpy(b, p, n);
    return b;
}

/* Decodes `len` bytes from an exact-size copy. */
static int decode_exact(const uint8_t *p, size_t len, amqp_method *m, amqp_error *err)
{
    uint8_t *b = dup_exact(p, len);
    int rc = amqp_method_decode(b, len, m, err);

    free(b);
    return rc;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- every method, from the generated field lists ------------------------ */

enum kind { K_octet, K_short, K_long, K_longlong, K_timestamp, K_bit, K_shortstr, K_longstr, K_table };

typedef struct field_desc {
    uint32_t id;
    const char *name;
    size_t offset;
    enum kind kind;
} field_desc;

#define FIELD_DESC(member, id, field, kind) \
    {id, #member "." #field, offsetof(amqp_method, member.field), K_##kind},
static const field_desc FIELDS[] = {AMQP_METHOD_FIELDS(FIELD_DESC)};
#define N_FIELDS (sizeof FIELDS / sizeof FIELDS[0])

#define METHOD_ID(member, id) id,
static const uint32_t METHODS[] = {AMQP_METHODS(METHOD_ID)};
#define N_METHODS (sizeof METHODS / sizeof METHODS[0])

/* Strings with awkward bytes (NUL, 0xFF) and the longest shortstr. */
static uint8_t long_short[255];
static uint8_t long_long[70000];
static uint8_t sample_table[512];
static amqp_bytes sample_table_bytes;

static void build_samples(void)
{
    amqp_writer w;
    size_t mark;

    memset(long_short, 0xFF, sizeof long_short);
    for (size_t i = 0; i < sizeof long_long; i++)
        long_long[i] = (uint8_t)(i * 7);
    amqp_writer_init(&w, sample_table, sizeof sample_table);
    amqp_put_field_long(&w, "x-message-ttl", 60000);
    amqp_put_field_str(&w, "x-dead-letter-exchange", AMQP_CSTR("dlx"));
    amqp_put_field_bool(&w, "flag", true);
    amqp_put_key(&w, "nested");
    mark = amqp_put_field_begin(&w, 'F');
    amqp_put_field_long(&w, "n", -1);
    amqp_table_end(&w, mark);
    assert_false(w.overflow);
    sample_table_bytes = (amqp_bytes){sample_table, (uint32_t)w.len};
}

/* Sample value of the k-th field of a method under variant `v`:
 * v 0 is all zeros / empty, v 1 all ones / longest, others mixed. Bits take
 * bit k of a pattern so neighbouring bits differ. */
static void fill_field(amqp_method *m, const field_desc *f, unsigned k, unsigned v)
{
    static const uint8_t bit_patterns[] = {0x00, 0xFF, 0x55, 0xAA, 0x01, 0x80, 0x0F};
    uint8_t *p = (uint8_t *)m + f->offset;
    uint64_t x = v == 0 ? 0 : v == 1 ? UINT64_MAX : 0x8123456789ABCDEFull + k * 0x0101 + v;
    amqp_bytes s = {(const uint8_t *)f->name, (uint32_t)strlen(f->name)};

    switch (f->kind) {
    case K_octet: *p = (uint8_t)x; break;
    case K_short: { uint16_t u = (uint16_t)x; memcpy(p, &u, sizeof u); break; }
    case K_long: { uint32_t u = (uint32_t)x; memcpy(p, &u, sizeof u); break; }
    case K_longlong: case K_timestamp: memcpy(p, &x, sizeof x); break;
    case K_bit: *(bool *)p = (bit_patterns[v % sizeof bit_patterns] >> (k % 8)) & 1; break;
    case K_shortstr:
        if (v == 0) s.len = 0;
        if (v == 1) s = (amqp_bytes){long_short, sizeof long_short};
        memcpy(p, &s, sizeof s);
        break;
    case K_longstr:
        if (v == 0) s.len = 0;
        if (v == 1) s = (amqp_bytes){long_long, sizeof long_long};
        memcpy(p, &s, sizeof s);
        break;
    case K_table:
        s = v == 0 ? (amqp_bytes){NULL, 0} : sample_table_bytes;
        memcpy(p, &s, sizeof s);
        break;
    }
}

static void fill_method(amqp_method *m, uint32_t id, unsigned v)
{
    unsigned k = 0;

    memset(m, 0, sizeof *m);
    m->id = id;
    for (size_t i = 0; i < N_FIELDS; i++)
        if (FIELDS[i].id == id)
            fill_field(m, &FIELDS[i], k++, v);
}

static size_t field_size(enum kind kind)
{
    switch (kind) {
    case K_octet: return 1;
    case K_short: return 2;
    case K_long: return 4;
    case K_longlong: case K_timestamp: return 8;
    case K_bit: return sizeof(bool);
    default: return sizeof(amqp_bytes);
    }
}

/* Field-by-field equality; slices compare by content, and decoded slices
 * must point into the decoded buffer [lo, hi). */
static void assert_fields_equal(const amqp_method *a, const amqp_method *b, const uint8_t *lo,
                                const uint8_t *hi)
{
    assert_int_equal(a->id, b->id);
    for (size_t i = 0; i < N_FIELDS; i++) {
        const field_desc *f = &FIELDS[i];
        const uint8_t *pa = (const uint8_t *)a + f->offset, *pb = (const uint8_t *)b + f->offset;
        amqp_bytes sa, sb;

        if (f->id != a->id)
            continue;
        if (f->kind < K_shortstr) {
            if (memcmp(pa, pb, field_size(f->kind)) != 0)
                fail_msg("%s differs", f->name);
            continue;
        }
        memcpy(&sa, pa, sizeof sa);
        memcpy(&sb, pb, sizeof sb);
        if (!amqp_bytes_equal(sa, sb))
            fail_msg("%s differs (%u vs %u bytes)", f->name, sa.len, sb.len);
        if (sb.len > 0 && (sb.ptr < lo || sb.ptr + sb.len > hi))
            fail_msg("%s does not point into the frame", f->name);
    }
}

static uint8_t enc[300000], enc2[300000];

static void round_trip_one(uint32_t id, unsigned v)
{
    amqp_method m, d;
    amqp_error err;
    size_t n, n2;
    uint8_t *b;

    fill_method(&m, id, v);
    n = amqp_method_encode(&m, enc, sizeof enc);
    if (n == 0)
        fail_msg("%s variant %u did not encode", amqp_method_name(id), v);
    assert_int_equal(amqp_method_encode(&m, enc2, n - 1), 0); /* one byte short */
    b = dup_exact(enc, n);
    if (amqp_method_decode(b, n, &d, &err) != AMQP_OK)
        fail_msg("%s variant %u: %s", amqp_method_name(id), v, err.text);
    assert_fields_equal(&m, &d, b, b + n);
    n2 = amqp_method_encode(&d, enc2, sizeof enc2);
    assert_int_equal(n2, n);
    assert_memory_equal(enc2, enc, n);
    free(b);
}

static void test_round_trip_every_method(void **state)
{
    unsigned classes_seen = 0;

    build_samples();
    for (size_t i = 0; i < N_METHODS; i++) {
        for (unsigned v = 0; v < 7; v++)
            round_trip_one(METHODS[i], v);
        classes_seen |= 1u << ((METHODS[i] >> 16) / 10 % 32);
    }
    /* connection 10, channel 20, access 30, exchange 40, queue 50, basic 60,
     * confirm 85 (-> 8), tx 90. */
    assert_int_equal(N_METHODS, 66); /* 14 + 6 + 2 + 8 + 10 + 18 + 2 + 6 */
    assert_true(classes_seen & (1u << 1) && classes_seen & (1u << 2) && classes_seen & (1u << 3));
    assert_true(classes_seen & (1u << 4) && classes_seen & (1u << 5) && classes_seen & (1u << 6));
    assert_true(classes_seen & (1u << 8) && classes_seen & (1u << 9));
}

/* A payload cut short anywhere is a 501 (as RabbitMQ), never an overread. */
static void test_truncated_every_method(void **state)
{
    amqp_method m, d;
    amqp_error err;

    build_samples();
    for (size_t i = 0; i < N_METHODS; i++) {
        fill_method(&m, METHODS[i], 2);
        size_t n = amqp_method_encode(&m, enc, sizeof enc);
        assert_true(n >= 4);
        for (size_t cut = 0; cut < n; cut++) {
            memset(&err, 0, sizeof err);
            if (decode_exact(enc, cut, &d, &err) != AMQP_ERROR)
                fail_msg("%s cut to %zu of %zu bytes decoded", amqp_method_name(METHODS[i]), cut, n);
            assert_int_equal(err.code, AMQP_FRAME_ERROR);
            assert_true(has_prefix(err.text, "FRAME_ERROR - "));
            assert_int_equal(err.method_id, cut < 4 ? 0 : METHODS[i]);
        }
    }
}

static void test_trailing_bytes_every_method(void **state)
{
    amqp_method m, d;
    amqp_error err;

    build_samples();
    for (size_t i = 0; i < N_METHODS; i++) {
        fill_method(&m, METHODS[i], 3);
        size_t n = amqp_method_encode(&m, enc, sizeof enc);
        enc[n] = 0;
        assert_int_equal(decode_exact(enc, n + 1, &d, &err), AMQP_ERROR);
        assert_int_equal(err.code, AMQP_FRAME_ERROR);
        assert_int_equal(err.method_id, METHODS[i]);
        assert_non_null(strstr(err.text, "FRAME_ERROR - cannot decode <<"));
    }
}

static void test_unknown_methods(void **state)
{
    static const uint32_t unknown[] = {0x003C0063u, 0x00630001u, 0, 0x000A000Cu, 0x0014000Bu + 1,
                                       0x00550000u, 0xFFFFFFFFu, 0x005A0028u};
    uint8_t b[4];
    amqp_method d;
    amqp_error err;
    amqp_method m = {.id = 0x003C0063u};

    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        b[0] = (uint8_t)(unknown[i] >> 24);
        b[1] = (uint8_t)(unknown[i] >> 16);
        b[2] = (uint8_t)(unknown[i] >> 8);
        b[3] = (uint8_t)unknown[i];
        assert_null(amqp_method_name(unknown[i]));
        assert_int_equal(decode_exact(b, 4, &d, &err), AMQP_ERROR);
        assert_int_equal(err.code, AMQP_NOT_IMPLEMENTED);
        assert_int_equal(err.method_id, unknown[i]);
        assert_true(has_prefix(err.text, "NOT_IMPLEMENTED - unknown method "));
        assert_true(err.silent); /* RabbitMQ drops the connection without a close */
        assert_true(amqp_reply_is_hard(err.code));
    }
    assert_int_equal(amqp_method_encode(&m, enc, sizeof enc), 0);
}

/* Error reporting may be switched off with err == NULL. */
static void test_decode_null_err(void **state)
{
    amqp_method d;

    assert_int_equal(decode_exact(gold_queue_declare, 3, &d, NULL), AMQP_ERROR);
    assert_int_equal(decode_exact((const uint8_t *)"\0\x63\0\1", 4, &d, NULL), AMQP_ERROR);
    assert_int_equal(decode_exact(gold_queue_declare, sizeof gold_queue_declare, &d, NULL), AMQP_OK);
}

static void test_encode_refuses_long_shortstr(void **state)
{
    uint8_t big[256] = {0};
    amqp_method m = {.id = AMQP_QUEUE_DECLARE};

    m.queue_declare.queue = (amqp_bytes){big, 256};
    assert_int_equal(amqp_method_encode(&m, enc, sizeof enc), 0);
    m.queue_declare.queue.len = 255;
    assert_int_equal(amqp_method_encode(&m, enc, sizeof enc), 4 + 2 + 256 + 1 + 4);
}

/* ---- golden payloads ----------------------------------------------------- */

static void decode_gold(const uint8_t *p, size_t n, amqp_method *m)
{
    amqp_error err;
    size_t n2;

    /* Decoded in place: the slices must stay valid for the re-encode, and
     * ASan puts redzones around these arrays too. */
    if (amqp_method_decode(p, n, m, &err) != AMQP_OK)
        fail_msg("%s", err.text);
    n2 = amqp_method_encode(m, enc2, sizeof enc2);
    assert_int_equal(n2, n);
    assert_memory_equal(enc2, p, n);
}

static void test_gold_basic_consume(void **state)
{
    amqp_method m;
    amqp_field f;

    decode_gold(gold_basic_consume, sizeof gold_basic_consume, &m);
    assert_int_equal(m.id, AMQP_BASIC_CONSUME);
    assert_true(amqp_bytes_equal_cstr(m.basic_consume.queue, "q1"));
    assert_true(amqp_bytes_equal_cstr(m.basic_consume.consumer_tag, "ctag"));
    assert_true(m.basic_consume.no_local);
    assert_false(m.basic_consume.no_ack);
    assert_true(m.basic_consume.exclusive);
    assert_false(m.basic_consume.nowait);
    assert_true(amqp_table_get(m.basic_consume.arguments, "x-priority", &f));
    assert_int_equal(f.type, 'I');
    assert_int_equal(f.v.i, 5);
}

static void test_gold_declares(void **state)
{
    amqp_method m;
    amqp_field f;

    decode_gold(gold_queue_declare, sizeof gold_queue_declare, &m);
    assert_int_equal(m.id, AMQP_QUEUE_DECLARE);
    assert_true(amqp_bytes_equal_cstr(m.queue_declare.queue, "orders"));
    assert_false(m.queue_declare.passive);
    assert_true(m.queue_declare.durable);
    assert_false(m.queue_declare.exclusive);
    assert_true(m.queue_declare.auto_delete);
    assert_true(m.queue_declare.nowait);
    assert_int_equal(m.queue_declare.arguments.len, 0);

    decode_gold(gold_exchange_declare, sizeof gold_exchange_declare, &m);
    assert_true(amqp_bytes_equal_cstr(m.exchange_declare.exchange, "ex"));
    assert_true(amqp_bytes_equal_cstr(m.exchange_declare.type, "topic"));
    assert_true(m.exchange_declare.passive);
    assert_false(m.exchange_declare.durable);
    assert_true(m.exchange_declare.auto_delete);
    assert_false(m.exchange_declare.internal);
    assert_true(m.exchange_declare.nowait);
    assert_true(amqp_table_get(m.exchange_declare.arguments, "alternate-exchange", &f));
    assert_int_equal(f.type, 'S');
    assert_true(amqp_bytes_equal_cstr(f.v.bytes, "ae"));

    decode_gold(gold_access_request, sizeof gold_access_request, &m);
    assert_true(amqp_bytes_equal_cstr(m.access_request.realm, "/data"));
    assert_false(m.access_request.exclusive);
    assert_true(m.access_request.passive);
    assert_false(m.access_request.active);
    assert_true(m.access_request.write);
    assert_false(m.access_request.read);
}

static void test_gold_basic_and_connection(void **state)
{
    amqp_method m;

    decode_gold(gold_basic_nack, sizeof gold_basic_nack, &m);
    assert_int_equal(m.basic_nack.delivery_tag, 0x0102030405060708ull);
    assert_false(m.basic_nack.multiple);
    assert_true(m.basic_nack.requeue);

    decode_gold(gold_basic_deliver, sizeof gold_basic_deliver, &m);
    assert_true(amqp_bytes_equal_cstr(m.basic_deliver.consumer_tag, "c"));
    assert_int_equal(m.basic_deliver.delivery_tag, 42);
    assert_true(m.basic_deliver.redelivered);
    assert_true(amqp_bytes_equal_cstr(m.basic_deliver.exchange, "amq.direct"));
    assert_true(amqp_bytes_equal_cstr(m.basic_deliver.routing_key, "rk"));

    decode_gold(gold_connection_tune, sizeof gold_connection_tune, &m);
    assert_int_equal(m.connection_tune.channel_max, 2047);
    assert_int_equal(m.connection_tune.frame_max, 131072);
    assert_int_equal(m.connection_tune.heartbeat, 60);

    decode_gold(gold_connection_close, sizeof gold_connection_close, &m);
    assert_int_equal(m.connection_close.reply_code, 404);
    assert_true(amqp_bytes_equal_cstr(m.connection_close.reply_text, "NOT_FOUND"));
    assert_int_equal(m.connection_close.class_id, 50);
    assert_int_equal(m.connection_close.method_id, 10);
}

/* A table argument with a bad inner length fails the whole method. */
static void test_method_with_bad_table(void **state)
{
    /* queue.declare, queue "q", bits 0, arguments {"k": S len 0xFFFFFFF0 "ab"} */
    static const uint8_t bad[] = {0x00, 0x32, 0x00, 0x0a, 0x00, 0x00, 0x01, 'q', 0x00,
                                  0x00, 0x00, 0x00, 0x09, 0x01, 'k', 'S', 0xff, 0xff,
                                  0xff, 0xf0, 'a', 'b'};
    /* the same with an unknown field type 'Z' */
    static const uint8_t unknown_type[] = {0x00, 0x32, 0x00, 0x0a, 0x00, 0x00, 0x01, 'q', 0x00,
                                           0x00, 0x00, 0x00, 0x03, 0x01, 'k', 'Z'};
    /* arguments length 0xFFFFFFFF, far past the frame */
    static const uint8_t huge[] = {0x00, 0x32, 0x00, 0x0a, 0x00, 0x00, 0x01, 'q', 0x00,
                                   0xff, 0xff, 0xff, 0xff, 0x01, 'k', 'V'};
    amqp_method m;
    amqp_error err;

    assert_int_equal(decode_exact(bad, sizeof bad, &m, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_FRAME_ERROR);
    assert_int_equal(err.method_id, AMQP_QUEUE_DECLARE);
    /* RabbitMQ prints the argument octets as an Erlang binary */
    assert_string_equal(err.text, "FRAME_ERROR - cannot decode "
                                  "<<0,0,1,113,0,0,0,0,9,1,107,83,255,255,255,240,97,98>>");
    assert_false(err.silent);
    /* an unknown field type crashes RabbitMQ's parser: a bare TCP close */
    assert_int_equal(decode_exact(unknown_type, sizeof unknown_type, &m, &err), AMQP_ERROR);
    assert_true(err.silent);
    assert_int_equal(decode_exact(huge, sizeof huge, &m, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_FRAME_ERROR);
}

/* A shortstr or longstr length beyond the payload, including lengths near
 * UINT32_MAX that would wrap an `off + n <= len` check. */
static void test_string_lengths_beyond_buffer(void **state)
{
    static const uint32_t lens[] = {0xFFFFFFFFu, 0xFFFFFFFEu, 0xFFFFFFF9u, 0x80000000u,
                                    0x7FFFFFFFu, 5, 4};
    uint8_t p[16] = {0x00, 0x0a, 0x00, 0x15}; /* connection.secure-ok: response longstr */
    amqp_method m;
    amqp_error err;

    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        p[4] = (uint8_t)(lens[i] >> 24);
        p[5] = (uint8_t)(lens[i] >> 16);
        p[6] = (uint8_t)(lens[i] >> 8);
        p[7] = (uint8_t)lens[i];
        memcpy(p + 8, "abc", 3);
        assert_int_equal(decode_exact(p, 11, &m, &err), AMQP_ERROR);
        assert_int_equal(err.code, AMQP_FRAME_ERROR);
    }
    /* shortstr length 255 with 3 bytes present: basic.consume-ok */
    static const uint8_t s[] = {0x00, 0x3c, 0x00, 0x15, 0xff, 'a', 'b', 'c'};
    assert_int_equal(decode_exact(s, sizeof s, &m, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_FRAME_ERROR);
}

/* Bits share an octet: unused high bits are ignored, as RabbitMQ does; a
 * ninth bit would start a new octet (no method has more than five). */
static void test_bits_ignore_unused_high_bits(void **state)
{
    uint8_t p[sizeof gold_basic_nack];
    amqp_method m;

    memcpy(p, gold_basic_nack, sizeof p);
    p[sizeof p - 1] = 0xFE; /* multiple=0, requeue=1, junk above */
    assert_int_equal(decode_exact(p, sizeof p, &m, NULL), AMQP_OK);
    assert_false(m.basic_nack.multiple);
    assert_true(m.basic_nack.requeue);
}

/* ---- method table lookups ------------------------------------------------ */

static void test_method_info(void **state)
{
    unsigned content = 0;

    assert_string_equal(amqp_method_name(AMQP_BASIC_CONSUME), "basic.consume");
    assert_string_equal(amqp_method_name(AMQP_CONNECTION_START_OK), "connection.start-ok");
    assert_string_equal(amqp_method_name(AMQP_CONFIRM_SELECT_OK), "confirm.select-ok");
    assert_int_equal(AMQP_BASIC_CONSUME, 0x003C0014u);
    assert_int_equal(AMQP_CONNECTION_START_OK, (10u << 16) | 11);
    assert_int_equal(AMQP_CLASS_BASIC, 60);
    assert_int_equal(AMQP_CLASS_CONFIRM, 85);
    assert_int_equal(AMQP_FRAME_END, 206);
    assert_int_equal(AMQP_FRAME_MIN_SIZE, 4096);
    for (size_t i = 0; i < N_METHODS; i++) {
        assert_non_null(amqp_method_name(METHODS[i]));
        content += amqp_method_has_content(METHODS[i]);
    }
    assert_int_equal(content, 4);
    assert_true(amqp_method_has_content(AMQP_BASIC_PUBLISH));
    assert_true(amqp_method_has_content(AMQP_BASIC_RETURN));
    assert_true(amqp_method_has_content(AMQP_BASIC_DELIVER));
    assert_true(amqp_method_has_content(AMQP_BASIC_GET_OK));
    assert_false(amqp_method_has_content(AMQP_BASIC_GET));
    assert_true(amqp_method_is_synchronous(AMQP_BASIC_CONSUME));
    assert_true(amqp_method_is_synchronous(AMQP_QUEUE_DECLARE));
    assert_true(amqp_method_is_synchronous(AMQP_CONFIRM_SELECT));
    assert_true(amqp_method_is_synchronous(AMQP_TX_COMMIT));
    assert_false(amqp_method_is_synchronous(AMQP_BASIC_PUBLISH));
    assert_false(amqp_method_is_synchronous(AMQP_BASIC_ACK));
    assert_false(amqp_method_is_synchronous(AMQP_QUEUE_DECLARE_OK));
    assert_false(amqp_method_is_synchronous(0xFFFFFFFFu));
    assert_false(amqp_method_has_content(0xFFFFFFFFu));
}

static void test_reply_codes(void **state)
{
    static const struct { uint16_t code; const char *name; bool hard; } cases[] = {
        {200, "REPLY_SUCCESS", false}, {311, "CONTENT_TOO_LARGE", false},
        {312, "NO_ROUTE", false}, {313, "NO_CONSUMERS", false},
        {320, "CONNECTION_FORCED", true}, {402, "INVALID_PATH", true},
        {403, "ACCESS_REFUSED", false}, {404, "NOT_FOUND", false},
        {405, "RESOURCE_LOCKED", false}, {406, "PRECONDITION_FAILED", false},
        {501, "FRAME_ERROR", true}, {502, "SYNTAX_ERROR", true},
        {503, "COMMAND_INVALID", true}, {504, "CHANNEL_ERROR", true},
        {505, "UNEXPECTED_FRAME", true}, {506, "RESOURCE_ERROR", true},
        {530, "NOT_ALLOWED", true}, {540, "NOT_IMPLEMENTED", true},
        {541, "INTERNAL_ERROR", true}, {0, "UNKNOWN", false}, {1, "UNKNOWN", false},
        {206, "UNKNOWN", false}, {4096, "UNKNOWN", false}, {65535, "UNKNOWN", false},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_string_equal(amqp_reply_name(cases[i].code), cases[i].name);
        assert_int_equal(amqp_reply_is_hard(cases[i].code), cases[i].hard);
    }
}

static void test_amqp_fail(void **state)
{
    amqp_error err;
    char longname[600];

    memset(&err, 0x55, sizeof err);
    assert_int_equal(amqp_fail(&err, AMQP_NOT_FOUND, AMQP_QUEUE_DECLARE,
                               "no queue '%s' in vhost '%s'", "q", "/"), AMQP_ERROR);
    assert_int_equal(err.code, 404);
    assert_int_equal(err.method_id, AMQP_QUEUE_DECLARE);
    assert_string_equal(err.text, "NOT_FOUND - no queue 'q' in vhost '/'");
    assert_int_equal(amqp_fail(NULL, AMQP_NOT_FOUND, 0, "x"), AMQP_ERROR);
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    amqp_fail(&err, AMQP_PRECONDITION_FAILED, 0, "%s", longname);
    assert_int_equal(strlen(err.text), sizeof err.text - 1);
    assert_true(has_prefix(err.text, "PRECONDITION_FAILED - aaa"));
    amqp_fail(&err, 999, 0, "odd");
    assert_string_equal(err.text, "UNKNOWN - odd");
}

/* ---- properties and content headers --------------------------------------- */

static void fill_properties(amqp_basic_properties *p)
{
    memset(p, 0, sizeof *p);
    p->flags = 0xFFFC;
    p->content_type = AMQP_CSTR("application/json");
    p->content_encoding = AMQP_CSTR("utf-8");
    p->headers = sample_table_bytes;
    p->delivery_mode = 2;
    p->priority = 9;
    p->correlation_id = AMQP_CSTR("corr-1");
    p->reply_to = AMQP_CSTR("amq.rabbitmq.reply-to");
    p->expiration = AMQP_CSTR("60000");
    p->message_id = (amqp_bytes){long_short, 255};
    p->timestamp = 0xFEDCBA9876543210ull;
    p->type = AMQP_CSTR("order.created");
    p->user_id = AMQP_CSTR("guest");
    p->app_id = AMQP_CSTR("warren-test");
    p->cluster_id = AMQP_CSTR("");
}

static void assert_properties_equal(const amqp_basic_properties *a, const amqp_basic_properties *b)
{
    assert_int_equal(a->flags, b->flags);
#define CHECK_PROPERTY(field, flag, kind) \
    if (a->flags & (flag)) \
        assert_true(CHECK_##kind(a->field, b->field));
#define CHECK_shortstr(x, y) amqp_bytes_equal(x, y)
#define CHECK_table(x, y) amqp_bytes_equal(x, y)
#define CHECK_octet(x, y) ((x) == (y))
#define CHECK_timestamp(x, y) ((x) == (y))
    AMQP_BASIC_PROPERTY_FIELDS(CHECK_PROPERTY)
}

/* Every subset that is a single property, all of them, and none. */
static void test_properties_round_trip(void **state)
{
    amqp_basic_properties p, d;
    uint8_t *b;
    size_t n;

    build_samples();
    for (int bit = -2; bit < 14; bit++) {
        fill_properties(&p);
        p.flags = bit == -2 ? 0xFFFC : bit == -1 ? 0 : (uint16_t)(0x8000u >> bit);
        n = amqp_properties_encode(&p, enc, sizeof enc);
        assert_true(n >= 2);
        assert_int_equal(amqp_properties_encode(&p, enc2, n - 1), 0);
        b = dup_exact(enc, n);
        assert_int_equal(amqp_properties_decode((amqp_bytes){b, (uint32_t)n}, &d, NULL), AMQP_OK);
        assert_properties_equal(&p, &d);
        assert_int_equal(amqp_properties_encode(&d, enc2, sizeof enc2), n);
        assert_memory_equal(enc2, enc, n);
        for (size_t cut = 0; cut < n; cut++)
            assert_int_equal(amqp_properties_decode((amqp_bytes){b, (uint32_t)cut}, &d, NULL),
                             cut == 0 || cut == 1 || n > 2 ? AMQP_ERROR : AMQP_OK);
        free(b);
    }
}

static void test_properties_gold(void **state)
{
    amqp_basic_properties p;
    amqp_field f;
    uint8_t *b = dup_exact(gold_properties, sizeof gold_properties);

    assert_int_equal(amqp_properties_decode((amqp_bytes){b, sizeof gold_properties}, &p, NULL),
                     AMQP_OK);
    assert_int_equal(p.flags, 0xFFFC);
    assert_true(amqp_bytes_equal_cstr(p.content_type, "text/plain"));
    assert_true(amqp_bytes_equal_cstr(p.content_encoding, "gzip"));
    assert_true(amqp_table_get(p.headers, "h", &f));
    assert_true(amqp_bytes_equal_cstr(f.v.bytes, "v"));
    assert_int_equal(p.delivery_mode, 2);
    assert_int_equal(p.priority, 7);
    assert_true(amqp_bytes_equal_cstr(p.correlation_id, "corr"));
    assert_true(amqp_bytes_equal_cstr(p.reply_to, "rq"));
    assert_true(amqp_bytes_equal_cstr(p.expiration, "60000"));
    assert_true(amqp_bytes_equal_cstr(p.message_id, "mid"));
    assert_int_equal(p.timestamp, 1700000000);
    assert_true(amqp_bytes_equal_cstr(p.type, "t"));
    assert_true(amqp_bytes_equal_cstr(p.user_id, "guest"));
    assert_true(amqp_bytes_equal_cstr(p.app_id, "app"));
    assert_true(amqp_bytes_equal_cstr(p.cluster_id, "cl"));
    assert_int_equal(amqp_properties_encode(&p, enc, sizeof enc), sizeof gold_properties);
    assert_memory_equal(enc, gold_properties, sizeof gold_properties);
    free(b);
}

static void test_properties_flags(void **state)
{
    uint8_t p[2];
    amqp_basic_properties d;
    amqp_error err;

    /* continuation bit: refused */
    p[0] = 0x00; p[1] = 0x01;
    assert_int_equal(amqp_properties_decode((amqp_bytes){p, 2}, &d, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_SYNTAX_ERROR);
    /* unused bit 1: ignored, as RabbitMQ does */
    p[1] = 0x02;
    assert_int_equal(amqp_properties_decode((amqp_bytes){p, 2}, &d, &err), AMQP_OK);
    assert_int_equal(d.flags, 0);
    /* encode refuses flags it has no property for */
    memset(&d, 0, sizeof d);
    d.flags = 0x0001;
    assert_int_equal(amqp_properties_encode(&d, enc, sizeof enc), 0);
}

static int decode_header_exact(const uint8_t *p, size_t n, amqp_content_header *h, amqp_error *err)
{
    uint8_t *b = dup_exact(p, n);
    int rc = amqp_content_header_decode(b, n, h, err);

    if (rc == AMQP_OK) /* the raw slice must lie inside the payload */
        assert_true(h->properties.ptr >= b && h->properties.ptr + h->properties.len == b + n);
    free(b);
    return rc;
}

static void test_content_header(void **state)
{
    amqp_content_header h;
    amqp_error err;
    uint8_t p[sizeof gold_content_header + 1];

    assert_int_equal(decode_header_exact(gold_content_header, sizeof gold_content_header, &h, &err),
                     AMQP_OK);
    assert_int_equal(h.class_id, 60);
    assert_int_equal(h.body_size, 5);
    assert_int_equal(h.properties.len, sizeof gold_properties);
    for (size_t cut = 0; cut < sizeof gold_content_header; cut++) {
        assert_int_equal(decode_header_exact(gold_content_header, cut, &h, &err), AMQP_ERROR);
        assert_int_equal(err.code, AMQP_SYNTAX_ERROR);
    }
    memcpy(p, gold_content_header, sizeof gold_content_header);
    p[sizeof gold_content_header] = 0;
    assert_int_equal(decode_header_exact(p, sizeof p, &h, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_SYNTAX_ERROR);

    /* weight and class: RabbitMQ answers 505 */
    memcpy(p, gold_content_header, sizeof gold_content_header);
    p[3] = 1;
    assert_int_equal(decode_header_exact(p, sizeof gold_content_header, &h, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_UNEXPECTED_FRAME);
    assert_string_equal(err.text, "UNEXPECTED_FRAME - expected content header for class 60, "
                                  "got non content header frame instead");
    memcpy(p, gold_content_header, sizeof gold_content_header);
    p[1] = 50;
    assert_int_equal(decode_header_exact(p, sizeof gold_content_header, &h, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_UNEXPECTED_FRAME);
    assert_string_equal(err.text, "UNEXPECTED_FRAME - expected content header for class 60, "
                                  "got one for class 50 instead");
}

static void test_content_header_body_size_and_bad_headers(void **state)
{
    /* body size 2^64-1, no properties */
    static const uint8_t big[] = {0, 60, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0};
    /* headers flag with a table whose value type is unknown */
    static const uint8_t bad[] = {0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20, 0x00,
                                  0, 0, 0, 3, 1, 'k', 'Z'};
    /* content-type length 50 with 2 bytes present */
    static const uint8_t short_ct[] = {0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x00, 50, 'a', 'b'};
    amqp_content_header h;
    amqp_error err;

    assert_int_equal(decode_header_exact(big, sizeof big, &h, &err), AMQP_OK);
    assert_int_equal(h.body_size, UINT64_MAX);
    assert_int_equal(decode_header_exact(bad, sizeof bad, &h, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_SYNTAX_ERROR);
    assert_int_equal(decode_header_exact(short_ct, sizeof short_ct, &h, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_SYNTAX_ERROR);
}

/* The frames: a NaN double in queue.declare's and queue.bind's
 * arguments, and one nested in a content header's headers. The table's 502
 * stands on every path (RabbitMQ's generic 501 / 541 would hide it). */
static void test_non_finite_on_every_path(void **state)
{
    /* queue.declare "qq", arguments {x-overflow: d NaN} */
    static const uint8_t declare[] = {0x00, 0x32, 0x00, 0x0a, 0x00, 0x00, 0x02, 'q', 'q', 0x00,
                                      0x00, 0x00, 0x00, 0x14, 0x0a, 'x', '-', 'o', 'v', 'e',
                                      'r', 'f', 'l', 'o', 'w', 'd', 0x7f, 0xf8, 0, 0, 0, 0, 0, 0};
    /* queue.bind "q" to amq.headers, key "", arguments {x-match: d NaN} */
    static const uint8_t bind[] = {0x00, 0x32, 0x00, 0x14, 0x00, 0x00, 0x01, 'q', 0x0b, 'a',
                                   'm', 'q', '.', 'h', 'e', 'a', 'd', 'e', 'r', 's', 0x00,
                                   0x00, 0x00, 0x00, 0x00, 0x11, 0x07, 'x', '-', 'm', 'a',
                                   't', 'c', 'h', 'd', 0x7f, 0xf8, 0, 0, 0, 0, 0, 0};
    /* content header, headers = {t: {k: f +Inf}} */
    static const uint8_t header[] = {0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20, 0x00,
                                     0, 0, 0, 14, 1, 't', 'F', 0, 0, 0, 7, 1, 'k', 'f',
                                     0x7f, 0x80, 0, 0};
    amqp_method m;
    amqp_content_header h;
    amqp_basic_properties p;
    amqp_error err;

    assert_int_equal(decode_exact(declare, sizeof declare, &m, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_SYNTAX_ERROR);
    assert_int_equal(err.method_id, AMQP_QUEUE_DECLARE);
    assert_true(err.final);
    assert_false(err.silent);
    assert_true(amqp_reply_is_hard(err.code));
    assert_string_equal(err.text,
                        "SYNTAX_ERROR - non-finite double value NaN in table key 'x-overflow'");

    assert_int_equal(decode_exact(bind, sizeof bind, &m, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_SYNTAX_ERROR);
    assert_int_equal(err.method_id, AMQP_QUEUE_BIND);
    assert_string_equal(err.text,
                        "SYNTAX_ERROR - non-finite double value NaN in table key 'x-match'");

    assert_int_equal(decode_header_exact(header, sizeof header, &h, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_SYNTAX_ERROR);
    assert_true(err.final);
    assert_string_equal(err.text,
                        "SYNTAX_ERROR - non-finite float value Infinity in table key 'k'");
    amqp_bytes raw = {header + 12, sizeof header - 12};
    assert_int_equal(amqp_properties_decode(raw, &p, NULL), AMQP_ERROR);
    /* another malformed property list is still the generic error */
    static const uint8_t short_ct[] = {0x80, 0x00, 50, 'a'};
    assert_int_equal(amqp_properties_decode((amqp_bytes){short_ct, 4}, &p, &err), AMQP_ERROR);
    assert_false(err.final);
    assert_string_equal(err.text, "SYNTAX_ERROR - malformed basic properties");
}

/* ---- mutation fuzz -------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)rng_state;
}

/* Valid encodings of every method with a few bytes changed, or cut: each
 * decode must succeed or fail cleanly (ASan watches the bounds). Decoded
 * slices must lie inside the input. */
static void test_mutations(void **state)
{
    static uint8_t m_buf[4096];
    amqp_method m, d;
    amqp_error err;

    build_samples();
    for (unsigned round = 0; round < 40; round++) {
        for (size_t i = 0; i < N_METHODS; i++) {
            fill_method(&m, METHODS[i], 2 + round % 5);
            size_t n = amqp_method_encode(&m, m_buf, sizeof m_buf);
            assert_true(n >= 4);
            for (unsigned k = 1 + rng() % 3; k > 0; k--) {
                size_t at = 4 + rng() % (n > 4 ? n - 4 : 1);
                if (at < n)
                    m_buf[at] = (uint8_t)(rng() % 4 == 0 ? 0xFF : rng());
            }
            size_t len = rng() % 4 == 0 ? rng() % (n + 1) : n;
            uint8_t *b = dup_exact(m_buf, len);
            if (amqp_method_decode(b, len, &d, &err) == AMQP_OK)
                assert_fields_equal(&d, &d, b, b + len);
            else
                assert_true(err.code == AMQP_FRAME_ERROR || err.silent);
            free(b);
        }
    }
}

static void test_header_mutations(void **state)
{
    amqp_content_header h;
    amqp_basic_properties p;
    amqp_error err;
    uint8_t m_buf[sizeof gold_content_header];

    for (unsigned round = 0; round < 20000; round++) {
        memcpy(m_buf, gold_content_header, sizeof m_buf);
        for (unsigned k = 1 + rng() % 3; k > 0; k--)
            m_buf[12 + rng() % (sizeof m_buf - 12)] = (uint8_t)rng();
        size_t len = rng() % 4 == 0 ? rng() % (sizeof m_buf + 1) : sizeof m_buf;
        uint8_t *b = dup_exact(m_buf, len);
        if (amqp_content_header_decode(b, len, &h, &err) == AMQP_OK) {
            assert_int_equal(amqp_properties_decode(h.properties, &p, NULL), AMQP_OK);
            size_t n = amqp_properties_encode(&p, enc, sizeof enc);
            assert_int_equal(n, h.properties.len); /* canonical again, bit 1 aside */
        }
        free(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_method),
        cmocka_unit_test(test_truncated_every_method),
        cmocka_unit_test(test_trailing_bytes_every_method),
        cmocka_unit_test(test_unknown_methods),
        cmocka_unit_test(test_decode_null_err),
        cmocka_unit_test(test_encode_refuses_long_shortstr),
        cmocka_unit_test(test_gold_basic_consume),
        cmocka_unit_test(test_gold_declares),
        cmocka_unit_test(test_gold_basic_and_connection),
        cmocka_unit_test(test_method_with_bad_table),
        cmocka_unit_test(test_string_lengths_beyond_buffer),
        cmocka_unit_test(test_bits_ignore_unused_high_bits),
        cmocka_unit_test(test_method_info),
        cmocka_unit_test(test_reply_codes),
        cmocka_unit_test(test_amqp_fail),
        cmocka_unit_test(test_properties_round_trip),
        cmocka_unit_test(test_properties_gold),
        cmocka_unit_test(test_properties_flags),
        cmocka_unit_test(test_content_header),
        cmocka_unit_test(test_content_header_body_size_and_bad_headers),
        cmocka_unit_test(test_non_finite_on_every_path),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_header_mutations),
    };

    return cmocka_run_group_tests_name("amqp_codec", tests, NULL, NULL);
}
