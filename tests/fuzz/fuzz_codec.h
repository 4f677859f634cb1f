/* The codec checks shared by the frame, method and content-header
 * harnesses: what decodes must encode, and its encoding must decode and
 * encode to the same bytes again (the broker forwards and re-encodes what
 * it decoded). */
#ifndef WARREN_FUZZ_CODEC_H
#define WARREN_FUZZ_CODEC_H

#include "../../amqp/amqp.h"
#include "fuzz.h"

/* A method frame's payload. */
static inline void fuzz_check_method(const uint8_t *buf, size_t len)
{
    amqp_method m, m2;
    amqp_error err = {0};
    if (amqp_method_decode(buf, len, &m, &err) != AMQP_OK) {
        FUZZ_CHECK(err.code != 0 && memchr(err.text, 0, sizeof err.text));
        return;
    }
    FUZZ_CHECK(amqp_method_name(m.id) != NULL);
    /* a decoded method encodes in no more room than it came in, plus the
     * bit octets' padding */
    size_t cap = len + 16;
    uint8_t *a = malloc(cap), *b = malloc(cap);
    FUZZ_CHECK(a && b);
    size_t na = amqp_method_encode(&m, a, cap);
    FUZZ_CHECK(na > 0);
    FUZZ_CHECK(amqp_method_decode(a, na, &m2, &err) == AMQP_OK && m2.id == m.id);
    size_t nb = amqp_method_encode(&m2, b, cap);
    FUZZ_CHECK(nb == na && memcmp(a, b, na) == 0);
    free(a);
    free(b);
}

/* A content header frame's payload. */
static inline void fuzz_check_header(const uint8_t *buf, size_t len)
{
    amqp_content_header h;
    amqp_basic_properties p, p2;
    amqp_error err = {0};
    if (amqp_content_header_decode(buf, len, &h, &err) != AMQP_OK) {
        FUZZ_CHECK(err.code != 0);
        return;
    }
    /* the header decoder validated the properties: they decode */
    FUZZ_CHECK(amqp_properties_decode(h.properties, &p, &err) == AMQP_OK);
    size_t cap = h.properties.len + 16;
    uint8_t *a = malloc(cap), *b = malloc(cap);
    FUZZ_CHECK(a && b);
    size_t na = amqp_properties_encode(&p, a, cap);
    FUZZ_CHECK(na > 0);
    FUZZ_CHECK(amqp_properties_decode((amqp_bytes){a, (uint32_t)na}, &p2, &err) == AMQP_OK);
    FUZZ_CHECK(p2.flags == p.flags);
    size_t nb = amqp_properties_encode(&p2, b, cap);
    FUZZ_CHECK(nb == na && memcmp(a, b, na) == 0);
    free(a);
    free(b);
}

#endif
