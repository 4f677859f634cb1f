/* Unit tests for erl_format.c: field values printed as RabbitMQ's error
 * texts print them (Erlang's ~p). Floats are the risky part -- the printer
 * must be safe for every double, NaN and infinities included, although the
 * codec refuses tables holding those -- and must match Erlang's shortest
 * round-trip form. Expected texts were printed by `erl` (OTP 25) with ~p.
 *
 * Each result is written into an exactly-sized malloc'd buffer, so under
 * ASan a write past the caller's capacity fails the test.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../amqp/amqp.h"

static amqp_field fd(double d) { return (amqp_field){.type = 'd', .v.d = d}; }
static amqp_field ff(float f) { return (amqp_field){.type = 'f', .v.f = f}; }

static double from_bits(uint64_t bits)
{
    double d;

    memcpy(&d, &bits, sizeof d);
    return d;
}

/* amqp_erl_term into a malloc'd buffer of exactly `cap` bytes; the result
 * is copied to `out` (which has room for any float's text). */
static void term_exact(const amqp_field *f, size_t cap, char *out, size_t outcap)
{
    char *buf = malloc(cap);

    assert_non_null(buf);
    assert_ptr_equal(amqp_erl_term(f, buf, cap), buf);
    assert_true(strlen(buf) < cap);
    snprintf(out, outcap, "%s", buf);
    free(buf);
}

static void assert_term(amqp_field f, const char *expected)
{
    char got[128];

    term_exact(&f, sizeof got, got, sizeof got);
    assert_string_equal(got, expected);
}

static void test_floats_as_erlang_prints_them(void **state)
{
    static const struct { uint64_t bits; const char *text; } cases[] = {
        {0x0000000000000001ull, "5.0e-324"},                /* smallest subnormal */
        {0x8000000000000001ull, "-5.0e-324"},
        {0x000fffffffffffffull, "2.225073858507201e-308"},  /* largest subnormal */
        {0x0010000000000000ull, "2.2250738585072014e-308"}, /* DBL_MIN */
        {0x7fefffffffffffffull, "1.7976931348623157e308"},  /* DBL_MAX */
        {0xffefffffffffffffull, "-1.7976931348623157e308"},
        {0x3fb999999999999aull, "0.1"},
        {0x4340000000000000ull, "9.007199254740992e15"}, /* 2^53 */
        {0x433ffffffffffffeull, "9007199254740990.0"},
        {0x3ff0000000000000ull, "1.0"},
        {0x0000000000000000ull, "0.0"},
        {0x8000000000000000ull, "-0.0"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_term(fd(from_bits(cases[i].bits)), cases[i].text);
    assert_term(fd(1.5), "1.5");
    assert_term(fd(100.0), "100.0");
    assert_term(fd(1.0e10), "1.0e10");
    assert_term(fd(1.2345e-7), "1.2345e-7");
    assert_term(fd(123456789012345680.0), "1.2345678901234568e17");
    assert_term(fd(-1.2345678901234567e-300), "-1.2345678901234568e-300");
    /* a float is widened to a double first, as rabbit_binary_parser does */
    assert_term(ff(0.1f), "0.10000000149011612");
    assert_term(ff(FLT_MAX), "3.4028234663852886e38");
    assert_term(ff(FLT_MIN), "1.1754943508222875e-38");
}

static void test_non_finite_values_are_safe(void **state)
{
    assert_term(fd(NAN), "nan");
    assert_term(fd(-NAN), "nan");
    assert_term(fd(from_bits(0x7ff0000000000001ull)), "nan"); /* signalling */
    assert_term(fd(from_bits(0xfff8000000000123ull)), "nan");
    assert_term(fd(INFINITY), "inf");
    assert_term(fd(-INFINITY), "-inf");
    assert_term(ff(NAN), "nan");
    assert_term(ff(-INFINITY), "-inf");
    /* and as ~s, which qargs' texts use */
    char buf[16];
    amqp_field nan = fd(NAN);
    assert_string_equal(amqp_erl_value(&nan, buf, sizeof buf), "nan");
}

/* Every capacity from 1 up, for the longest texts: always NUL-terminated,
 * a prefix of the full text, never past `cap` (ASan checks the buffer). */
static void test_small_buffers(void **state)
{
    const amqp_field fields[] = {fd(-DBL_MAX), fd(-1.2345678901234567e-300), fd(-INFINITY),
                                 fd(NAN), fd(-0.0), ff(-FLT_MIN)};
    char full[128], got[128];

    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        term_exact(&fields[i], sizeof full, full, sizeof full);
        for (size_t cap = 1; cap <= strlen(full) + 1; cap++) {
            term_exact(&fields[i], cap, got, sizeof got);
            assert_int_equal(strlen(got), cap - 1 < strlen(full) ? cap - 1 : strlen(full));
            assert_memory_equal(got, full, strlen(got));
        }
    }
}

/* Random bit patterns: whatever the double, the text is short and ends
 * inside the buffer; finite ones read back as the same value. */
static void test_random_doubles(void **state)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    char got[128];

    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double d = from_bits(x);
        amqp_field f = fd(d);
        term_exact(&f, 40, got, sizeof got);
        assert_true(strlen(got) <= 24);
        if (isfinite(d))
            assert_true(strtod(got, NULL) == d);
    }
}

static void test_other_terms(void **state)
{
    amqp_field s = {.type = 'S', .v.bytes = AMQP_CSTR("a\"b\n")};
    amqp_field bin = {.type = 'x', .v.bytes = {(const uint8_t *)"\x01\xff", 2}};
    amqp_field dec = {.type = 'D', .v.decimal = {2, 314}};
    amqp_field big = {.type = 'T', .v.i = -1};
    char buf[64];

    assert_string_equal(amqp_erl_term(&s, buf, sizeof buf), "<<\"a\\\"b\\n\">>");
    assert_string_equal(amqp_erl_term(&bin, buf, sizeof buf), "<<1,255>>");
    assert_string_equal(amqp_erl_term(&dec, buf, sizeof buf), "{2,314}");
    assert_string_equal(amqp_erl_term(&big, buf, sizeof buf), "18446744073709551615");
    assert_string_equal(amqp_erl_value(&s, buf, sizeof buf), "a\"b\n");
}

/* ~p prints a binary as a string when each byte is printable latin1
 * (160..255 included) or has an escape; 127 and 128..159 are not. */
static void test_latin1_binaries(void **state)
{
    amqp_field utf8_e = {.type = 'S', .v.bytes = AMQP_CSTR("\xc3\xa9")};         /* é */
    amqp_field euro = {.type = 'S', .v.bytes = AMQP_CSTR("\xe2\x82\xac")};       /* € */
    amqp_field del = {.type = 'S', .v.bytes = AMQP_CSTR("a\nb\"\\\x1b\x7f")}; /* DEL */
    amqp_field esc = {.type = 'S', .v.bytes = AMQP_CSTR("a\nb\"\\\x1b")};
    amqp_field empty = {.type = 'x', .v.bytes = {(const uint8_t *)"", 0}};
    char buf[64];

    assert_string_equal(amqp_erl_term(&utf8_e, buf, sizeof buf), "<<\"\xc3\xa9\">>");
    assert_string_equal(amqp_erl_term(&euro, buf, sizeof buf), "<<226,130,172>>");
    assert_string_equal(amqp_erl_term(&del, buf, sizeof buf), "<<97,10,98,34,92,27,127>>");
    assert_string_equal(amqp_erl_term(&esc, buf, sizeof buf), "<<\"a\\nb\\\"\\\\\\e\">>");
    assert_string_equal(amqp_erl_term(&empty, buf, sizeof buf), "<<>>");
    assert_string_equal(amqp_erl_string(esc.v.bytes, buf, sizeof buf), "\"a\\nb\\\"\\\\\\e\"");
    assert_true(amqp_erl_printable(160) && amqp_erl_printable(255) && amqp_erl_printable('\t'));
    assert_false(amqp_erl_printable(127) || amqp_erl_printable(159) || amqp_erl_printable(0));
}

/* A frame's worth of client bytes printed into an error text's buffer:
 * the work is bounded by the buffer, not by the value (a 16 MiB payload
 * took 16 million vsnprintf calls). Shown without a clock: only the first
 * page of the 16 MiB is readable, so reading further faults the test. */
static void test_big_values_cost_what_fits(void **state)
{
    enum { BIG = 16 << 20 };
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *b = mmap(NULL, BIG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char buf[160];

    assert_true(b != MAP_FAILED);
    assert_int_equal(mprotect(b, (size_t)page, PROT_READ | PROT_WRITE), 0);
    memset(b, 1, (size_t)page); /* not printable: ",1" per byte */
    amqp_field bin = {.type = 'x', .v.bytes = {b, BIG}};
    amqp_erl_term(&bin, buf, sizeof buf);
    assert_int_equal(strlen(buf), sizeof buf - 1);
    assert_memory_equal(buf, "<<1,1,1,", 8);
    memset(b, 'V', (size_t)page); /* an array of 16M voids */
    amqp_field arr = {.type = 'A', .v.bytes = {b, BIG}};
    amqp_erl_term(&arr, buf, sizeof buf);
    assert_memory_equal(buf, "[{void,undefined},{void,", 24);
    munmap(b, BIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_floats_as_erlang_prints_them),
        cmocka_unit_test(test_non_finite_values_are_safe),
        cmocka_unit_test(test_small_buffers),
        cmocka_unit_test(test_random_doubles),
        cmocka_unit_test(test_other_terms),
        cmocka_unit_test(test_latin1_binaries),
        cmocka_unit_test(test_big_values_cost_what_fits),
    };

    return cmocka_run_group_tests_name("amqp_erl_format", tests, NULL, NULL);
}
