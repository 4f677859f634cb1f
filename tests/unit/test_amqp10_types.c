/* Unit tests for the AMQP 1.0 type codec (amqp10/types.c, encode.c): every
 * type in every encoding read and written back, compounds walked and
 * looked up, RabbitMQ's encoder choices (test_amqp10_malformed.c has the
 * input it refuses). Encodings are from the spec (AMQP 1.0 part 1, 1.6)
 * and RabbitMQ's amqp10_binary_generator.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../amqp10/amqp10.h"
#include "test_amqp10_util.h"

typedef struct scalar_case {
    const uint8_t *bytes;
    size_t len;
    amqp10_type type;
    uint64_t u; /* expected bits: v.u, or v.i as uint64, or bool */
    bool canonical; /* what RabbitMQ's generator writes for this value */
} scalar_case;

static const scalar_case scalars[] = {
    {B(0x40), AMQP10_NULL, 0, true},
    {B(0x41), AMQP10_BOOL, 1, false},
    {B(0x42), AMQP10_BOOL, 0, false},
    {B(0x56, 0x01), AMQP10_BOOL, 1, true},
    {B(0x56, 0x00), AMQP10_BOOL, 0, true},
    {B(0x50, 0xfe), AMQP10_UBYTE, 0xfe, true},
    {B(0x60, 0xff, 0xfe), AMQP10_USHORT, 0xfffe, true},
    {B(0x43), AMQP10_UINT, 0, true},
    {B(0x52, 0x07), AMQP10_UINT, 7, true},
    {B(0x70, 0xff, 0xff, 0xff, 0xfe), AMQP10_UINT, 0xfffffffe, true},
    {B(0x70, 0x00, 0x00, 0x00, 0x07), AMQP10_UINT, 7, false},
    {B(0x44), AMQP10_ULONG, 0, true},
    {B(0x53, 0x73), AMQP10_ULONG, 0x73, true},
    {B(0x80, 0xff, 0, 0, 0, 0, 0, 0, 1), AMQP10_ULONG, 0xff00000000000001ull, true},
    {B(0x51, 0xfe), AMQP10_BYTE, (uint64_t)-2, true},
    {B(0x61, 0xff, 0xfe), AMQP10_SHORT, (uint64_t)-2, true},
    {B(0x54, 0xf9), AMQP10_INT, (uint64_t)-7, true},
    {B(0x71, 0xff, 0xff, 0xff, 0x7f), AMQP10_INT, (uint64_t)-129, true},
    {B(0x71, 0x00, 0x00, 0x00, 0x05), AMQP10_INT, 5, false},
    {B(0x55, 0x80), AMQP10_LONG, (uint64_t)-128, true},
    {B(0x81, 0x80, 0, 0, 0, 0, 0, 0, 0), AMQP10_LONG, 0x8000000000000000ull, true},
    {B(0x83, 0x00, 0x00, 0x01, 0x74, 0x87, 0x6e, 0x80, 0x00), AMQP10_TIMESTAMP, 1600000000000ull,
     true},
    {B(0x83, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), AMQP10_TIMESTAMP, (uint64_t)-1, true},
};

static void test_scalars(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++) {
        const scalar_case *c = &scalars[i];
        amqp10_value v;
        assert_int_equal(read_one(c->bytes, c->len, &v), AMQP10_OK);
        assert_int_equal(v.type, c->type);
        assert_int_equal(v.raw.len, c->len);
        assert_int_equal(v.code, c->bytes[0]);
        uint64_t got = v.type == AMQP10_BOOL ? v.v.b
                       : (v.type >= AMQP10_BYTE && v.type <= AMQP10_LONG) || v.type == AMQP10_TIMESTAMP
                           ? (uint64_t)v.v.i
                           : v.type == AMQP10_NULL ? 0 : v.v.u;
        assert_int_equal(got, c->u);
        if (!c->canonical)
            continue;
        uint8_t buf[16];
        amqp_writer w;
        amqp_writer_init(&w, buf, sizeof buf);
        switch (v.type) {
        case AMQP10_NULL: amqp10_put_null(&w); break;
        case AMQP10_BOOL: amqp10_put_bool(&w, v.v.b); break;
        case AMQP10_UBYTE: amqp10_put_ubyte(&w, (uint8_t)v.v.u); break;
        case AMQP10_USHORT: amqp10_put_ushort(&w, (uint16_t)v.v.u); break;
        case AMQP10_UINT: amqp10_put_uint(&w, (uint32_t)v.v.u); break;
        case AMQP10_ULONG: amqp10_put_ulong(&w, v.v.u); break;
        case AMQP10_BYTE: amqp10_put_byte(&w, (int8_t)v.v.i); break;
        case AMQP10_SHORT: amqp10_put_short(&w, (int16_t)v.v.i); break;
        case AMQP10_INT: amqp10_put_int(&w, (int32_t)v.v.i); break;
        case AMQP10_LONG: amqp10_put_long(&w, v.v.i); break;
        case AMQP10_TIMESTAMP: amqp10_put_timestamp(&w, v.v.i); break;
        default: fail();
        }
        assert_false(w.overflow);
        assert_int_equal(w.len, c->len);
        assert_memory_equal(buf, c->bytes, c->len);
    }
}

static void test_floats_and_raw_types(void **state)
{
    (void)state;
    amqp10_value v;
    uint8_t buf[32];
    amqp_writer w;
    assert_int_equal(read_one(B(0x72, 0x40, 0x20, 0x00, 0x00), &v), AMQP10_OK);
    assert_int_equal(v.type, AMQP10_FLOAT);
    assert_true(v.v.f == 2.5f);
    assert_int_equal(read_one(B(0x82, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0), &v), AMQP10_OK);
    assert_int_equal(v.type, AMQP10_DOUBLE);
    assert_true(v.v.d == 1.5);
    amqp_writer_init(&w, buf, sizeof buf);
    amqp10_put_float(&w, 2.5f);
    amqp10_put_double(&w, 1.5);
    assert_memory_equal(buf, ((uint8_t[]){0x72, 0x40, 0x20, 0, 0, 0x82, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0}), 14);
    /* NaN reads (it is well formed); converting it is another matter */
    assert_int_equal(read_one(B(0x72, 0x7f, 0xc0, 0x00, 0x00), &v), AMQP10_OK);
    assert_true(isnan(v.v.f));

    static const struct {
        uint8_t code;
        size_t width;
        amqp10_type type;
    } raws[] = {{0x73, 4, AMQP10_CHAR}, {0x74, 4, AMQP10_DECIMAL32}, {0x84, 8, AMQP10_DECIMAL64},
                {0x94, 16, AMQP10_DECIMAL128}, {0x98, 16, AMQP10_UUID}};
    for (size_t i = 0; i < sizeof raws / sizeof raws[0]; i++) {
        uint8_t in[17];
        in[0] = raws[i].code;
        for (size_t j = 1; j <= raws[i].width; j++)
            in[j] = (uint8_t)j;
        assert_int_equal(read_one(in, raws[i].width + 1, &v), AMQP10_OK);
        assert_int_equal(v.type, raws[i].type);
        assert_int_equal(v.v.bytes.len, raws[i].width);
        assert_memory_equal(v.v.bytes.ptr, in + 1, raws[i].width);
        if (raws[i].type == AMQP10_UUID) {
            amqp_writer_init(&w, buf, sizeof buf);
            amqp10_put_uuid(&w, in + 1);
            assert_memory_equal(buf, in, 17);
        }
    }
}

/* Strings, symbols, binaries: 8-bit and 32-bit lengths, RabbitMQ's cut-over
 * (string and binary 32-bit from 255 bytes, symbols 8-bit up to 255). */
static void test_variable(void **state)
{
    (void)state;
    static uint8_t text[300];
    memset(text, 'q', sizeof text);
    static const struct {
        uint8_t code8;
        amqp10_type type;
        void (*put)(amqp_writer *, amqp_bytes);
        size_t limit8;
    } kinds[] = {{0xa0, AMQP10_BINARY, amqp10_put_binary, 255},
                 {0xa1, AMQP10_STRING, amqp10_put_string, 255},
                 {0xa3, AMQP10_SYMBOL, amqp10_put_symbol, 256}};
    static const size_t lens[] = {0, 1, 254, 255, 256, 300};
    for (size_t k = 0; k < 3; k++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            uint8_t buf[400];
            amqp_writer w;
            amqp10_value v;
            amqp_writer_init(&w, buf, sizeof buf);
            kinds[k].put(&w, (amqp_bytes){text, (uint32_t)lens[l]});
            assert_false(w.overflow);
            bool small = lens[l] < kinds[k].limit8;
            assert_int_equal(buf[0], small ? kinds[k].code8 : kinds[k].code8 + 0x10);
            assert_int_equal(w.len, lens[l] + (small ? 2 : 5));
            assert_int_equal(read_one(buf, w.len, &v), AMQP10_OK);
            assert_int_equal(v.type, kinds[k].type);
            assert_int_equal(v.v.bytes.len, lens[l]);
            assert_memory_equal(v.v.bytes.ptr, text, lens[l]);
        }
    amqp10_value v;
    assert_int_equal(read_one(B(0xa1, 0x02, 'h', 'i'), &v), AMQP10_OK);
    assert_true(amqp10_value_is(&v, "hi"));
    assert_false(amqp10_value_is(&v, "h"));
}

/* Items of a compound, each read back as a uint. */
static void expect_uints(const amqp10_value *c, uint32_t n)
{
    amqp10_iter it;
    amqp10_value item;
    amqp10_iter_init(&it, c);
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(amqp10_next(&it, &item), AMQP10_OK);
        assert_int_equal(item.type, AMQP10_UINT);
        assert_int_equal(item.v.u, i);
    }
    assert_int_equal(amqp10_next(&it, &item), AMQP10_END);
}

static void test_compounds(void **state)
{
    (void)state;
    static uint8_t buf[4096];
    amqp_writer w;
    amqp10_value v;
    static const uint32_t counts[] = {1, 2, 84, 85, 254, 255, 300};
    for (int kind = 0; kind < 3; kind++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            uint32_t n = counts[c] * (kind == 1 ? 2 : 1);
            amqp_writer_init(&w, buf, sizeof buf);
            size_t mark = kind == 2 ? amqp10_array_begin(&w, 0x70) : amqp10_compound_begin(&w);
            for (uint32_t i = 0; i < n; i++) {
                if (kind == 2)
                    amqp_put_u32(&w, i);
                else
                    amqp10_put_uint(&w, i);
            }
            if (kind == 0)
                amqp10_list_end(&w, mark, n);
            else if (kind == 1)
                amqp10_map_end(&w, mark, n);
            else
                amqp10_array_end(&w, mark, n);
            assert_false(w.overflow);
            /* 8-bit form while count < 255 and count byte + items < 256 */
            size_t items = kind == 2 ? 1 + 4 * (size_t)n : 0;
            for (uint32_t i = 0; kind != 2 && i < n; i++)
                items += i == 0 ? 1 : i < 256 ? 2 : 5;
            bool small = n < 255 && items + 1 < 256;
            assert_int_equal(w.len, items + (small ? 3 : 9));
            uint8_t code8 = kind == 0 ? 0xc0 : kind == 1 ? 0xc1 : 0xe0;
            assert_int_equal(buf[0], small ? code8 : code8 + 0x10);
            assert_int_equal(read_one(buf, w.len, &v), AMQP10_OK);
            assert_int_equal(v.type, kind == 0 ? AMQP10_LIST : kind == 1 ? AMQP10_MAP : AMQP10_ARRAY);
            assert_int_equal(v.v.compound.count, n);
            expect_uints(&v, n);
        }
    /* hand-encoded: list0, list8, list32, map8, map32, array8, array32 */
    assert_int_equal(read_one(B(0x45), &v), AMQP10_OK);
    expect_uints(&v, 0);
    assert_int_equal(read_one(B(0xc0, 0x03, 0x02, 0x43, 0x43), &v), AMQP10_OK);
    assert_int_equal(read_one(B(0xd0, 0, 0, 0, 0x07, 0, 0, 0, 0x02, 0x43, 0x52, 0x01), &v), AMQP10_OK);
    expect_uints(&v, 2);
    assert_int_equal(read_one(B(0xc1, 0x04, 0x02, 0x43, 0x52, 0x01), &v), AMQP10_OK);
    expect_uints(&v, 2);
    assert_int_equal(read_one(B(0xd1, 0, 0, 0, 0x07, 0, 0, 0, 0x02, 0x43, 0x52, 0x01), &v), AMQP10_OK);
    assert_int_equal(read_one(B(0xe0, 0x04, 0x02, 0x52, 0x00, 0x01), &v), AMQP10_OK);
    expect_uints(&v, 2);
    assert_int_equal(read_one(B(0xf0, 0, 0, 0, 0x07, 0, 0, 0, 0x02, 0x52, 0x00, 0x01), &v), AMQP10_OK);
    expect_uints(&v, 2);
    /* an empty array still has its constructor */
    assert_int_equal(read_one(B(0xe0, 0x02, 0x00, 0xa1), &v), AMQP10_OK);
    /* an array of described symbols; zero-width elements take a byte each (RabbitMQ) */
    assert_int_equal(read_one(B(0xe0, 0x08, 0x01, 0x00, 0x53, 0x01, 0xa3, 0x02, 'a', 'b'), &v), AMQP10_OK);
    assert_int_equal(v.v.compound.elem_code, 0xa3);
    assert_int_equal(v.v.compound.elem_descriptor.len, 2);
    assert_int_equal(read_one(B(0xe0, 0x04, 0x02, 0x40, 0x00, 0x00), &v), AMQP10_OK);
    /* lookups by string or symbol key, the first match */
    assert_int_equal(read_one(B(0xc1, 0x10, 0x06, 0xa0, 0x01, 'k', 0x52, 0x01, 0xa3, 0x01, 'k', 0x52,
                                0x02, 0xa1, 0x01, 'k', 0x52, 0x03), &v), AMQP10_OK);
    amqp10_value found;
    assert_true(amqp10_map_get(&v, "k", &found));
    assert_int_equal(found.v.u, 2);
    assert_false(amqp10_map_get(&v, "x", &found));
    assert_int_equal(read_one(B(0x45), &v), AMQP10_OK);
    assert_false(amqp10_map_get(&v, "k", &found));
    /* an empty list written by the encoder is list0, as RabbitMQ's */
    amqp_writer_init(&w, buf, sizeof buf);
    amqp10_list_end(&w, amqp10_compound_begin(&w), 0);
    assert_int_equal(w.len, 1);
    assert_int_equal(buf[0], 0x45);
}

static void test_described(void **state)
{
    (void)state;
    amqp10_value v;
    uint64_t code;
    assert_int_equal(read_one(B(0x00, 0x53, 0x75, 0xa0, 0x01, 'z'), &v), AMQP10_OK);
    assert_int_equal(v.type, AMQP10_DESCRIBED);
    assert_true(amqp10_descriptor_code(&v, &code));
    assert_int_equal(code, AMQP10_SEC_DATA);
    assert_int_equal(v.v.described.value.len, 3);
    static const char sym[] = "amqp:properties:list";
    uint8_t in[64] = {0x00, 0xa3, sizeof sym - 1};
    memcpy(in + 3, sym, sizeof sym - 1);
    in[3 + sizeof sym - 1] = 0x45;
    assert_int_equal(read_one(in, 4 + sizeof sym - 1, &v), AMQP10_OK);
    assert_true(amqp10_descriptor_code(&v, &code));
    assert_int_equal(code, AMQP10_SEC_PROPERTIES);
    /* a descriptor must be a ulong or a symbol */
    assert_int_equal(read_one(B(0x00, 0xa1, 0x01, 'x', 0x40), &v), AMQP10_MALFORMED);
    uint8_t buf[8];
    amqp_writer w;
    amqp_writer_init(&w, buf, sizeof buf);
    amqp10_put_descriptor(&w, AMQP10_SEC_FOOTER);
    assert_memory_equal(buf, ((uint8_t[]){0x00, 0x53, 0x78}), 3);
}

static void test_writer_overflow(void **state)
{
    (void)state;
    uint8_t buf[64];
    /* the reserved 9-byte header must fit before it shrinks to 3 */
    for (size_t cap = 0; cap < sizeof buf; cap++) {
        amqp_writer w;
        amqp_writer_init(&w, buf, cap);
        size_t mark = amqp10_compound_begin(&w);
        amqp10_put_string(&w, AMQP_CSTR("hello"));
        amqp10_put_ulong(&w, 1000);
        amqp10_list_end(&w, mark, 2);
        assert_int_equal(w.overflow, cap < 9 + 7 + 9);
        if (!w.overflow)
            assert_int_equal(w.len, 3 + 7 + 9);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_floats_and_raw_types),
        cmocka_unit_test(test_variable),
        cmocka_unit_test(test_compounds),
        cmocka_unit_test(test_described),
        cmocka_unit_test(test_writer_overflow),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    free(last_input);
    return failed;
}
