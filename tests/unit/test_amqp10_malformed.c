/* Unit tests for the AMQP 1.0 type codec (amqp10/types.c) on input it must
 * refuse: truncated values, unknown constructors, lengths past the end,
 * counts that do not fit, odd maps, bad booleans and descriptors, nesting
 * past AMQP10_MAX_DEPTH (lists, and described values in descriptors).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../amqp10/amqp10.h"
#include "test_amqp10_util.h"

/* Every proper prefix of a valid value is malformed. */
static void check_truncations(const uint8_t *p, size_t n)
{
    amqp10_value v;
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(read_one(p, cut, &v), AMQP10_MALFORMED);
}

static void test_malformed(void **state)
{
    (void)state;
    amqp10_value v;
    check_truncations(B(0x80, 1, 2, 3, 4, 5, 6, 7, 8));
    check_truncations(B(0xb1, 0, 0, 0, 2, 'h', 'i'));
    check_truncations(B(0xd1, 0, 0, 0, 0x07, 0, 0, 0, 0x02, 0x43, 0x52, 0x01));
    check_truncations(B(0xf0, 0, 0, 0, 0x07, 0, 0, 0, 0x02, 0x52, 0x00, 0x01));
    check_truncations(B(0x00, 0x53, 0x75, 0xa0, 0x01, 'z'));
    check_truncations(B(0x98, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16));
    static const uint8_t bad_codes[] = {0x01, 0x3f, 0x46, 0x57, 0x62, 0x75, 0x85, 0x90, 0xa2,
                                        0xb2, 0xc2, 0xd2, 0xe1, 0xf1, 0xff};
    for (size_t i = 0; i < sizeof bad_codes; i++) {
        uint8_t in[9] = {bad_codes[i], 0, 0, 0, 0, 0, 0, 0, 0};
        assert_int_equal(read_one(in, sizeof in, &v), AMQP10_MALFORMED);
    }
    /* lengths past the end */
    assert_int_equal(read_one(B(0xa1, 0x05, 'a'), &v), AMQP10_MALFORMED);
    assert_int_equal(read_one(B(0xb0, 0xff, 0xff, 0xff, 0xff, 'a'), &v), AMQP10_MALFORMED);
    assert_int_equal(read_one(B(0xd0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0x40), &v), AMQP10_MALFORMED);
    /* a size too small for its count field */
    assert_int_equal(read_one(B(0xc0, 0x00, 0x00), &v), AMQP10_MALFORMED);
    assert_int_equal(read_one(B(0xd0, 0, 0, 0, 3, 0, 0, 0, 0), &v), AMQP10_MALFORMED);
    /* counts that do not match the items */
    assert_int_equal(read_one(B(0xc0, 0x02, 0x05, 0x40), &v), AMQP10_MALFORMED);
    assert_int_equal(read_one(B(0xc0, 0x03, 0x01, 0x40, 0x40), &v), AMQP10_MALFORMED);
    assert_int_equal(read_one(B(0xd0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x40), &v), AMQP10_MALFORMED);
    assert_int_equal(read_one(B(0xe0, 0x04, 0x03, 0x52, 0x00, 0x01), &v), AMQP10_MALFORMED);
    /* a map with an odd count */
    assert_int_equal(read_one(B(0xc1, 0x02, 0x01, 0x40), &v), AMQP10_MALFORMED);
    /* a boolean byte that is not 0 or 1 */
    assert_int_equal(read_one(B(0x56, 0x02), &v), AMQP10_MALFORMED);
    /* an array without its constructor, or with list0 / described-again */
    assert_int_equal(read_one(B(0xe0, 0x01, 0x00), &v), AMQP10_MALFORMED);
    assert_int_equal(read_one(B(0xe0, 0x02, 0x00, 0x45), &v), AMQP10_MALFORMED);
    assert_int_equal(read_one(B(0xe0, 0x04, 0x00, 0x00, 0x53, 0x00), &v), AMQP10_MALFORMED);
    /* a bad item inside a compound */
    assert_int_equal(read_one(B(0xc0, 0x03, 0x01, 0xa1, 0x05), &v), AMQP10_MALFORMED);
    /* an offset past the end */
    size_t off = 5;
    assert_int_equal(amqp10_read((const uint8_t *)"\x40", 1, &off, &v), AMQP10_MALFORMED);
    assert_int_equal(off, 5);
}

static void test_depth(void **state)
{
    (void)state;
    amqp10_value v;
    /* lists nested n deep: list8 headers, innermost list0 */
    for (int depth = AMQP10_MAX_DEPTH - 1; depth <= AMQP10_MAX_DEPTH + 1; depth++) {
        uint8_t in[3 * (AMQP10_MAX_DEPTH + 2) + 1];
        size_t n = 0;
        for (int i = 0; i < depth; i++) {
            in[n++] = 0xc0;
            in[n++] = (uint8_t)(3 * (depth - i - 1) + 2);
            in[n++] = 0x01;
        }
        in[n++] = 0x45;
        assert_int_equal(read_one(in, n, &v), depth <= AMQP10_MAX_DEPTH ? AMQP10_OK : AMQP10_MALFORMED);
    }
    /* described in described ... and in descriptors: bounded, no stack blow-up */
    static uint8_t deep[100001];
    memset(deep, 0x00, sizeof deep - 1);
    deep[sizeof deep - 1] = 0x40;
    assert_int_equal(read_one(deep, sizeof deep, &v), AMQP10_MALFORMED);
    for (size_t i = 0; i + 2 < sizeof deep; i += 3) {
        deep[i] = 0x00;
        deep[i + 1] = 0x53;
        deep[i + 2] = 0x01;
    }
    assert_int_equal(read_one(deep, sizeof deep, &v), AMQP10_MALFORMED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_depth),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    free(last_input);
    return failed;
}
