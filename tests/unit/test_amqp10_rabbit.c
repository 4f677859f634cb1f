/* Unit tests for the AMQP 0-9-1 <-> 1.0 conversion (amqp10/from091.c,
 * to091.c) against what RabbitMQ 3.10.8 does (test_amqp10_vectors.h,
 * captured from a real broker): the entry it stores for a pika publish, the
 * properties pika receives for a stored entry (or the 541 where RabbitMQ
 * fails), and the whole round trip; then the message-section parser and
 * small buffers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../amqp10/amqp10.h"
#include "test_amqp10_util.h"
#include "test_amqp10_vectors.h"

#define NVEC (sizeof amqp10_vectors / sizeof amqp10_vectors[0])

static char *stream_name(const amqp10_vector *v)
{
    static char name[64];
    snprintf(name, sizeof name, "s-%s", v->name);
    return name;
}

/* The entry from_091 makes for the properties and body: header + body. */
static size_t stored_entry(const uint8_t *props, size_t props_len, amqp_bytes body,
                           amqp_bytes exchange, amqp_bytes routing_key, uint8_t *out, size_t cap)
{
    amqp_basic_properties p;
    amqp_error err;
    amqp_writer w;
    assert_int_equal(amqp_properties_decode((amqp_bytes){props, (uint32_t)props_len}, &p, &err),
                     AMQP_OK);
    amqp_writer_init(&w, out, cap);
    assert_int_equal(amqp10_from_091(&p, exchange, routing_key, body.len, &w), AMQP10_OK);
    amqp_put_raw(&w, body.ptr, body.len);
    assert_false(w.overflow);
    return w.len;
}

/* pika's publish becomes the very bytes RabbitMQ stored. */
static void test_from_091_as_rabbitmq(void **state)
{
    (void)state;
    static uint8_t out[8192];
    int checked = 0;
    for (size_t i = 0; i < NVEC; i++) {
        const amqp10_vector *v = &amqp10_vectors[i];
        if (!v->props_in)
            continue;
        uint8_t *props = copy(v->props_in, v->props_in_len);
        size_t n = stored_entry(props, v->props_in_len, (amqp_bytes){v->body_in, (uint32_t)v->body_in_len},
                                AMQP_CSTR(""), AMQP_CSTR(stream_name(v)), out, sizeof out);
        assert_int_equal(n, v->amqp10_len);
        assert_memory_equal(out, v->amqp10, n);
        free(props);
        checked++;
    }
    assert_int_equal(checked, 3);
}

/* Converts a stored entry for a consumer at offset 0 (as captured). */
static int to_091(const uint8_t *entry, size_t len, int64_t offset, uint8_t *out, size_t cap,
                  amqp10_as_091 *as)
{
    amqp10_message m;
    amqp_writer w;
    assert_int_equal(amqp10_message_parse((amqp_bytes){entry, (uint32_t)len}, &m), AMQP10_OK);
    amqp_writer_init(&w, out, cap);
    return amqp10_to_091(&m, offset, &w, as);
}

static void check_delivery(const amqp10_vector *v, const amqp10_as_091 *as)
{
    assert_int_equal(as->properties.len, v->props_out_len);
    assert_memory_equal(as->properties.ptr, v->props_out, v->props_out_len);
    assert_int_equal(as->body.len, v->body_out_len);
    if (v->body_out_len)
        assert_memory_equal(as->body.ptr, v->body_out, v->body_out_len);
    assert_true(amqp_bytes_equal_cstr(as->exchange, v->exchange_out));
    amqp_bytes rk = as->routing_key.ptr ? as->routing_key : AMQP_CSTR(stream_name(v));
    assert_true(amqp_bytes_equal_cstr(rk, v->routing_key_out));
}

/* A stored entry reaches pika as RabbitMQ delivers it, or is refused where
 * RabbitMQ closes the connection with 541. */
static void test_to_091_as_rabbitmq(void **state)
{
    (void)state;
    static uint8_t out[8192];
    int delivered = 0, refused = 0;
    for (size_t i = 0; i < NVEC; i++) {
        const amqp10_vector *v = &amqp10_vectors[i];
        uint8_t *entry = copy(v->amqp10, v->amqp10_len);
        amqp10_as_091 as;
        int rc = to_091(entry, v->amqp10_len, 0, out, sizeof out, &as);
        if (v->props_out) {
            assert_int_equal(rc, AMQP10_OK);
            check_delivery(v, &as);
            delivered++;
        } else {
            assert_int_equal(rc, AMQP10_UNSUPPORTED);
            refused++;
        }
        free(entry);
    }
    assert_int_equal(delivered, 12);
    assert_int_equal(refused, 10);
}

/* 0-9-1 -> 1.0 -> 0-9-1: every property, a rich and a nested header table,
 * come out as RabbitMQ shows them (tables and arrays gone, cluster-id
 * gone, headers sorted, x-stream-offset added). */
static void test_round_trip(void **state)
{
    (void)state;
    static uint8_t entry[8192], out[8192];
    for (size_t i = 0; i < NVEC; i++) {
        const amqp10_vector *v = &amqp10_vectors[i];
        if (!v->props_in)
            continue;
        amqp_bytes body = {v->body_in, (uint32_t)v->body_in_len};
        size_t n = stored_entry(v->props_in, v->props_in_len, body, AMQP_CSTR(""),
                                AMQP_CSTR(stream_name(v)), entry, sizeof entry);
        amqp10_as_091 as;
        assert_int_equal(to_091(entry, n, 0, out, sizeof out, &as), AMQP10_OK);
        check_delivery(v, &as);
        /* and what Warren sends decodes as 0-9-1 properties */
        amqp_basic_properties p;
        amqp_error err;
        assert_int_equal(amqp_properties_decode(as.properties, &p, &err), AMQP_OK);
        assert_true(p.flags & AMQP_BASIC_HEADERS_FLAG);
        amqp_field f;
        assert_true(amqp_table_get(p.headers, "x-stream-offset", &f));
        assert_int_equal(f.type, 'l');
    }
}

/* Without x-stream-offset nothing is sorted: the made-up id headers first,
 * then the application properties in their order. */
static void test_unsorted_without_offset(void **state)
{
    (void)state;
    static uint8_t out[8192];
    const amqp10_vector *v = NULL;
    for (size_t i = 0; i < NVEC; i++)
        if (strcmp(amqp10_vectors[i].name, "p10_all") == 0)
            v = &amqp10_vectors[i];
    assert_non_null(v);
    amqp10_as_091 as;
    assert_int_equal(to_091(v->amqp10, v->amqp10_len, -1, out, sizeof out, &as), AMQP10_OK);
    amqp_basic_properties p;
    amqp_error err;
    assert_int_equal(amqp_properties_decode(as.properties, &p, &err), AMQP_OK);
    static const char *const order[] = {"x-correlation-id-type", "x-message-id-type", "s", "l",
                                        "ls", "i", "is", "sh", "by", "ub", "us", "ui", "ui0",
                                        "uis", "d", "f", "ts", "bin", "t", "fa", "b1", "nul"};
    amqp_iter it;
    amqp_bytes key;
    amqp_field f;
    size_t n = 0;
    amqp_iter_init(&it, p.headers);
    while (amqp_table_next(&it, &key, &f)) {
        assert_true(n < sizeof order / sizeof order[0]);
        assert_true(amqp_bytes_equal_cstr(key, order[n]));
        n++;
    }
    assert_int_equal(n, sizeof order / sizeof order[0]);
    assert_true(amqp_bytes_equal_cstr(p.type, "bt"));
    assert_true(amqp_bytes_equal_cstr(p.app_id, "ba"));
}

/* A decimal header: RabbitMQ 3.10 has no 1.0 form for it (541). */
static void test_decimal_header_unsupported(void **state)
{
    (void)state;
    static const uint8_t table[] = {3, 'd', 'e', 'c', 'D', 1, 0, 0, 0, 15};
    amqp_basic_properties p = {0};
    p.flags = AMQP_BASIC_HEADERS_FLAG;
    p.headers = (amqp_bytes){table, sizeof table};
    uint8_t out[256];
    amqp_writer w;
    amqp_writer_init(&w, out, sizeof out);
    assert_int_equal(amqp10_from_091(&p, AMQP_CSTR(""), AMQP_CSTR("q"), 0, &w), AMQP10_UNSUPPORTED);
}

/* Every buffer size: AMQP10_NO_SPACE until it fits, then the same bytes. */
static void test_small_buffers(void **state)
{
    (void)state;
    static uint8_t full[8192];
    for (size_t i = 0; i < NVEC; i++) {
        const amqp10_vector *v = &amqp10_vectors[i];
        if (!v->props_out)
            continue;
        amqp10_as_091 as;
        assert_int_equal(to_091(v->amqp10, v->amqp10_len, 0, full, sizeof full, &as), AMQP10_OK);
        size_t need = as.properties.len;
        bool fitted = false;
        for (size_t cap = 0; cap <= need + 4 * 1024 && !fitted; cap++) {
            uint8_t *buf = malloc(cap ? cap : 1);
            int rc = to_091(v->amqp10, v->amqp10_len, 0, buf, cap, &as);
            if (rc == AMQP10_OK) {
                assert_int_equal(as.properties.len, need);
                assert_memory_equal(as.properties.ptr, full, need);
                fitted = true;
            } else {
                assert_int_equal(rc, AMQP10_NO_SPACE);
            }
            free(buf);
        }
        assert_true(fitted);
    }
    amqp_basic_properties p;
    amqp_error err;
    const amqp10_vector *v = &amqp10_vectors[0];
    assert_int_equal(amqp_properties_decode((amqp_bytes){v->props_in, (uint32_t)v->props_in_len}, &p, &err),
                     AMQP_OK);
    for (size_t cap = 0; cap < v->amqp10_len; cap++) {
        uint8_t *buf = malloc(cap ? cap : 1);
        amqp_writer w;
        amqp_writer_init(&w, buf, cap);
        int rc = amqp10_from_091(&p, AMQP_CSTR(""), AMQP_CSTR("s-p091_all"), v->body_in_len, &w);
        assert_true(rc == AMQP10_NO_SPACE || (rc == AMQP10_OK && w.len == v->amqp10_len - v->body_in_len));
        free(buf);
    }
}

/* Parses a copy of exactly n bytes; m's slices point into it until the
 * next call. */
static int parse(const uint8_t *p, size_t n, amqp10_message *m)
{
    static uint8_t *last;
    free(last);
    last = copy(p, n);
    return amqp10_message_parse((amqp_bytes){last, (uint32_t)n}, m);
}


static void test_sections(void **state)
{
    (void)state;
    amqp10_message m;
    /* every section, descriptors as codes */
    assert_int_equal(parse(B(0x00, 0x53, 0x70, 0xc0, 0x04, 0x02, 0x41, 0x50, 0x07,   /* header */
                             0x00, 0x53, 0x71, 0xc1, 0x01, 0x00,                     /* delivery-ann. */
                             0x00, 0x53, 0x72, 0xc1, 0x01, 0x00,                     /* message-ann. */
                             0x00, 0x53, 0x73, 0xc0, 0x03, 0x01, 0xa1, 0x00,         /* properties */
                             0x00, 0x53, 0x74, 0xc1, 0x01, 0x00,                     /* app-props */
                             0x00, 0x53, 0x75, 0xa0, 0x01, 'a',                      /* data */
                             0x00, 0x53, 0x75, 0xa0, 0x01, 'b',                      /* data */
                             0x00, 0x53, 0x78, 0xc1, 0x01, 0x00),                    /* footer */
                           &m),
                     AMQP10_OK);
    assert_int_equal(m.header_fields[AMQP10_H_DURABLE].type, AMQP10_BOOL);
    assert_true(m.header_fields[AMQP10_H_DURABLE].v.b);
    assert_int_equal(m.header_fields[AMQP10_H_PRIORITY].v.u, 7);
    assert_int_equal(m.header_fields[AMQP10_H_TTL].type, AMQP10_NULL);
    assert_int_equal(m.property_fields[AMQP10_P_MESSAGE_ID].type, AMQP10_STRING);
    assert_int_equal(m.body_kind, AMQP10_BODY_DATA);
    assert_int_equal(m.body_sections, 2);
    assert_int_equal(m.body.len, 12);
    assert_int_equal(m.data.len, 1);
    assert_int_equal(m.data.ptr[0], 'b');
    assert_int_equal(m.footer.len, 6);
    assert_int_equal(m.delivery_annotations.len, 6);
    /* amqp-value and amqp-sequence bodies */
    assert_int_equal(parse(B(0x00, 0x53, 0x77, 0x54, 0x01), &m), AMQP10_OK);
    assert_int_equal(m.body_kind, AMQP10_BODY_VALUE);
    assert_int_equal(parse(B(0x00, 0x53, 0x76, 0x45, 0x00, 0x53, 0x76, 0x45), &m), AMQP10_OK);
    assert_int_equal(m.body_sections, 2);
    /* no bytes: no sections, no body */
    assert_int_equal(parse((const uint8_t *)"", 0, &m), AMQP10_OK);
    assert_int_equal(m.body_kind, AMQP10_BODY_NONE);

    /* refused: not a section, an unknown descriptor, the wrong value type,
     * too many fields, body kinds mixed, split or two values, a bad value */
    assert_int_equal(parse(B(0x40), &m), AMQP10_MALFORMED);
    assert_int_equal(parse(B(0x00, 0x53, 0x79, 0x40), &m), AMQP10_MALFORMED);
    assert_int_equal(parse(B(0x00, 0xa3, 0x01, 'x', 0x40), &m), AMQP10_MALFORMED);
    assert_int_equal(parse(B(0x00, 0x53, 0x73, 0xc1, 0x01, 0x00), &m), AMQP10_MALFORMED);
    assert_int_equal(parse(B(0x00, 0x53, 0x74, 0x45), &m), AMQP10_MALFORMED);
    assert_int_equal(parse(B(0x00, 0x53, 0x75, 0xa1, 0x00), &m), AMQP10_MALFORMED);
    assert_int_equal(parse(B(0x00, 0x53, 0x70, 0xc0, 0x07, 0x06, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40),
                           &m),
                     AMQP10_MALFORMED);
    assert_int_equal(parse(B(0x00, 0x53, 0x75, 0xa0, 0x00, 0x00, 0x53, 0x77, 0x40), &m), AMQP10_MALFORMED);
    assert_int_equal(parse(B(0x00, 0x53, 0x77, 0x40, 0x00, 0x53, 0x77, 0x40), &m), AMQP10_MALFORMED);
    assert_int_equal(parse(B(0x00, 0x53, 0x75, 0xa0, 0x00, 0x00, 0x53, 0x74, 0xc1, 0x01, 0x00,
                             0x00, 0x53, 0x75, 0xa0, 0x00), &m),
                     AMQP10_MALFORMED);
    assert_int_equal(parse(B(0x00, 0x53, 0x75, 0xa0, 0x05, 'a'), &m), AMQP10_MALFORMED);
    /* the vectors all parse, and none of their prefixes crash */
    for (size_t i = 0; i < NVEC; i++) {
        const amqp10_vector *v = &amqp10_vectors[i];
        assert_int_equal(parse(v->amqp10, v->amqp10_len, &m), AMQP10_OK);
        for (size_t cut = 0; cut < v->amqp10_len; cut++)
            (void)parse(v->amqp10, cut, &m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_from_091_as_rabbitmq),
        cmocka_unit_test(test_to_091_as_rabbitmq),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_unsorted_without_offset),
        cmocka_unit_test(test_decimal_header_unsupported),
        cmocka_unit_test(test_small_buffers),
        cmocka_unit_test(test_sections),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
