/* AMQP 1.0 messages as a stream stores them (amqp10/): the type codec, the
 * section parser and the conversion to AMQP 0-9-1 and back.
 *
 * Input: one byte (bit 0 set: no x-stream-offset; else the offset is the
 * byte >> 1), then the stored entry's bytes. Checked beyond "no crash":
 * every value the validator accepts walks to its end; a message converted
 * for a 0-9-1 consumer is valid 0-9-1 (properties decode, headers
 * validate); and converting that back to 1.0 and to 0-9-1 again gives the
 * same properties and body (RabbitMQ's mapping is stable after one pass),
 * unless a header named x-basic-type or x-basic-app-id would turn into a
 * property on the second pass, as it does in RabbitMQ.
 */
#include "../../amqp10/amqp10.h"
#include "fuzz.h"

/* Walks every item of a validated value. */
static void walk(const amqp10_value *v, int depth)
{
    FUZZ_CHECK(depth <= AMQP10_MAX_DEPTH + 1);
    if (v->type == AMQP10_DESCRIBED) {
        amqp10_value inner;
        size_t off = 0;
        FUZZ_CHECK(amqp10_read(v->v.described.value.ptr, v->v.described.value.len, &off, &inner) ==
                   AMQP10_OK);
        FUZZ_CHECK(off == v->v.described.value.len);
        walk(&inner, depth + 1);
        return;
    }
    if (v->type != AMQP10_LIST && v->type != AMQP10_MAP && v->type != AMQP10_ARRAY)
        return;
    amqp10_iter it;
    amqp10_value item;
    uint32_t n = 0;
    int rc;
    amqp10_iter_init(&it, v);
    while ((rc = amqp10_next(&it, &item)) == AMQP10_OK) {
        walk(&item, depth + 1);
        n++;
    }
    FUZZ_CHECK(rc == AMQP10_END && n == v->v.compound.count);
}

static void check_values(const uint8_t *p, size_t len)
{
    size_t off = 0;
    amqp10_value v;
    while (off < len && amqp10_read_valid(p, len, &off, &v) == AMQP10_OK) {
        FUZZ_CHECK(v.raw.ptr + v.raw.len == p + off);
        walk(&v, 0);
    }
}

static bool has_header(amqp_bytes headers, const char *key)
{
    amqp_field f;
    return amqp_table_get(headers, key, &f);
}

/* 0-9-1 properties + body -> 1.0 -> 0-9-1 must give the same again. */
static void check_stable(const amqp10_as_091 *first, int64_t offset)
{
    amqp_basic_properties p;
    amqp_error err;
    FUZZ_CHECK(amqp_properties_decode(first->properties, &p, &err) == AMQP_OK);
    /* a timestamp whose milliseconds do not fit 64 bits (an unsigned
     * creation-time over 2^63 ms) wraps on the way back, as RabbitMQ's
     * <<V:64>> does: not a round trip */
    if ((p.flags & AMQP_BASIC_TIMESTAMP_FLAG) &&
        ((int64_t)p.timestamp > INT64_MAX / 1000 || (int64_t)p.timestamp < INT64_MIN / 1000))
        return;
    if ((p.flags & AMQP_BASIC_HEADERS_FLAG) &&
        (has_header(p.headers, "x-basic-type") || has_header(p.headers, "x-basic-app-id")))
        return;
    size_t cap = first->properties.len * 2 + first->body.len + 4096;
    uint8_t *entry = malloc(cap), *out = malloc(cap);
    FUZZ_CHECK(entry && out);
    amqp_writer w;
    amqp_writer_init(&w, entry, cap);
    amqp_bytes rk = first->routing_key.ptr ? first->routing_key : AMQP_CSTR("q");
    FUZZ_CHECK(amqp10_from_091(&p, first->exchange, rk, first->body.len, &w) == AMQP10_OK);
    amqp_put_raw(&w, first->body.ptr, first->body.len);
    FUZZ_CHECK(!w.overflow);
    amqp10_message m;
    FUZZ_CHECK(amqp10_message_parse((amqp_bytes){entry, (uint32_t)w.len}, &m) == AMQP10_OK);
    amqp10_as_091 again;
    amqp_writer_init(&w, out, cap);
    FUZZ_CHECK(amqp10_to_091(&m, offset, &w, &again) == AMQP10_OK);
    FUZZ_CHECK(amqp_bytes_equal(again.properties, first->properties));
    FUZZ_CHECK(amqp_bytes_equal(again.body, first->body));
    FUZZ_CHECK(amqp_bytes_equal(again.exchange, first->exchange));
    FUZZ_CHECK(amqp_bytes_equal(again.routing_key, rk));
    free(entry);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    uint8_t flags = fuzz_byte(&in);
    int64_t offset = (flags & 1) ? -1 : flags >> 1;
    check_values(in.p, in.len);

    amqp10_message m;
    if (amqp10_message_parse((amqp_bytes){in.p, (uint32_t)in.len}, &m) != AMQP10_OK)
        return 0;
    size_t cap = in.len * 4 + 4096;
    uint8_t *out = malloc(cap);
    FUZZ_CHECK(out);
    amqp_writer w;
    amqp_writer_init(&w, out, cap);
    amqp10_as_091 as;
    int rc = amqp10_to_091(&m, offset, &w, &as);
    FUZZ_CHECK(rc == AMQP10_OK || rc == AMQP10_UNSUPPORTED);
    if (rc == AMQP10_OK) {
        amqp_basic_properties p;
        amqp_error err;
        FUZZ_CHECK(amqp_properties_decode(as.properties, &p, &err) == AMQP_OK);
        FUZZ_CHECK(as.body.ptr >= in.p && as.body.ptr + as.body.len <= in.p + in.len);
        check_stable(&as, offset);
    }
    free(out);
    return 0;
}
