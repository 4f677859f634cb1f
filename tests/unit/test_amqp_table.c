/* Unit tests for field tables and arrays (codec.c): every value type
 * RabbitMQ accepts, nesting and the depth limit, malformed lengths, the
 * iterators, lookups, RabbitMQ-style value equality, and the writer.
 *
 * Inputs are copied into exactly-sized malloc'd buffers, so under ASan any
 * read past the end fails the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../amqp/amqp.h"

/* A table with every type pika 1.2 emits (S x t I l D T F A V), nested as
 * {'tab': {'a': {'b': [1, 'two', None]}}}, encoded by pika's encode_table
 * (content only, without the 4-byte length). */
static const uint8_t gold_table[] = {
    0x03, 0x73, 0x74, 0x72, 0x53, 0x00, 0x00, 0x00, 0x05, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x03,
    0x62, 0x69, 0x6e, 0x78, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01, 0x04, 0x62, 0x6f, 0x6f, 0x6c,
    0x74, 0x01, 0x03, 0x69, 0x6e, 0x74, 0x49, 0xff, 0xff, 0xff, 0xf9, 0x03, 0x62, 0x69, 0x67,
    0x6c, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x64, 0x65, 0x63, 0x44, 0x02,
    0x00, 0x00, 0x01, 0x3a, 0x02, 0x74, 0x73, 0x54, 0x00, 0x00, 0x00, 0x00, 0x65, 0x53, 0xf1,
    0x00, 0x03, 0x74, 0x61, 0x62, 0x46, 0x00, 0x00, 0x00, 0x1c, 0x01, 0x61, 0x46, 0x00, 0x00,
    0x00, 0x15, 0x01, 0x62, 0x41, 0x00, 0x00, 0x00, 0x0e, 0x49, 0x00, 0x00, 0x00, 0x01, 0x53,
    0x00, 0x00, 0x00, 0x03, 0x74, 0x77, 0x6f, 0x56, 0x03, 0x61, 0x72, 0x72, 0x41, 0x00, 0x00,
    0x00, 0x04, 0x74, 0x01, 0x74, 0x00, 0x04, 0x76, 0x6f, 0x69, 0x64, 0x56,
};

/* Every type, hand-encoded from the spec and RabbitMQ's parser
 * (rabbit_binary_parser): 'I' signed 32, 'i' unsigned 32. */
static const uint8_t every_type[] = {
    1, 't', 't', 1,
    1, 'b', 'b', 0xFF,
    1, 'B', 'B', 0xFF,
    1, 's', 's', 0xFF, 0xFE,
    1, 'u', 'u', 0xFF, 0xFF,
    1, 'I', 'I', 0xFF, 0xFF, 0xFF, 0xFD,
    1, 'i', 'i', 0xFF, 0xFF, 0xFF, 0xFF,
    1, 'l', 'l', 0x80, 0, 0, 0, 0, 0, 0, 0,
    1, 'f', 'f', 0x3F, 0xC0, 0, 0,                        /* 1.5f */
    1, 'd', 'd', 0xC0, 0x02, 0, 0, 0, 0, 0, 0,           /* -2.25 */
    1, 'D', 'D', 2, 0, 0, 0x01, 0x3A,                     /* 3.14 */
    1, 'S', 'S', 0, 0, 0, 3, 'a', 0, 'b',
    1, 'A', 'A', 0, 0, 0, 7, 'b', 5, 'S', 0, 0, 0, 0,
    1, 'T', 'T', 0, 0, 0, 0, 0x65, 0x53, 0xF1, 0x00,      /* 1700000000 */
    1, 'F', 'F', 0, 0, 0, 3, 1, 'k', 'V',
    1, 'V', 'V',
    1, 'x', 'x', 0, 0, 0, 2, 0xDE, 0xAD,
};

static uint8_t *dup_exact(const void *p, size_t n)
{
    uint8_t *b = malloc(n ? n : 1);

    assert_non_null(b);
    if (n)
        memcpy(b, p, n);
    return b;
}

static int validate_exact(const void *p, size_t n, amqp_error *err)
{
    uint8_t *b = dup_exact(p, n);
    int rc = amqp_table_validate((amqp_bytes){b, (uint32_t)n}, err);

    free(b);
    return rc;
}

static int validate_array_exact(const void *p, size_t n, amqp_error *err)
{
    uint8_t *b = dup_exact(p, n);
    int rc = amqp_array_validate((amqp_bytes){b, (uint32_t)n}, err);

    free(b);
    return rc;
}

/* ---- every type ---------------------------------------------------------- */

static void test_every_type_decodes(void **state)
{
    amqp_bytes t = {every_type, sizeof every_type};
    amqp_field f, e;
    amqp_iter it;
    amqp_bytes key;
    int64_t n;
    unsigned count = 0;

    assert_int_equal(validate_exact(every_type, sizeof every_type, NULL), AMQP_OK);
    amqp_iter_init(&it, t);
    while (amqp_table_next(&it, &key, &f)) {
        assert_int_equal(key.len, 1);
        assert_int_equal(key.ptr[0], f.type);
        count++;
    }
    assert_int_equal(count, 17);

    assert_true(amqp_table_get(t, "t", &f) && f.v.i == 1);
    assert_true(amqp_table_get(t, "b", &f) && f.v.i == -1);
    assert_true(amqp_table_get(t, "B", &f) && f.v.i == 255);
    assert_true(amqp_table_get(t, "s", &f) && f.v.i == -2);
    assert_true(amqp_table_get(t, "u", &f) && f.v.i == 65535);
    assert_true(amqp_table_get(t, "I", &f) && f.v.i == -3);
    assert_true(amqp_table_get(t, "i", &f) && f.v.i == 4294967295);
    assert_true(amqp_table_get(t, "l", &f) && f.v.i == INT64_MIN);
    assert_true(amqp_table_get(t, "f", &f) && f.v.f == 1.5f);
    assert_true(amqp_table_get(t, "d", &f) && f.v.d == -2.25);
    assert_true(amqp_table_get(t, "D", &f));
    assert_int_equal(f.v.decimal.scale, 2);
    assert_int_equal(f.v.decimal.value, 314);
    assert_true(amqp_table_get(t, "S", &f));
    assert_int_equal(f.v.bytes.len, 3);
    assert_memory_equal(f.v.bytes.ptr, "a\0b", 3);
    assert_true(amqp_table_get(t, "T", &f) && f.v.i == 1700000000);
    assert_true(amqp_table_get(t, "x", &f));
    assert_memory_equal(f.v.bytes.ptr, "\xDE\xAD", 2);
    assert_true(amqp_table_get(t, "V", &f) && f.type == 'V');

    /* A holds raw values: b 5, S "" */
    assert_true(amqp_table_get(t, "A", &f));
    assert_int_equal(amqp_array_validate(f.v.bytes, NULL), AMQP_OK);
    amqp_iter_init(&it, f.v.bytes);
    assert_true(amqp_array_next(&it, &e) && e.type == 'b' && e.v.i == 5);
    assert_true(amqp_array_next(&it, &e) && e.type == 'S' && e.v.bytes.len == 0);
    assert_false(amqp_array_next(&it, &e));
    assert_false(amqp_array_next(&it, &e)); /* stays finished */

    /* F holds a table: {k: V} */
    assert_true(amqp_table_get(t, "F", &f));
    assert_true(amqp_table_get(f.v.bytes, "k", &e) && e.type == 'V');

    /* integer view */
    assert_true(amqp_table_get(t, "i", &f) && amqp_field_int(&f, &n) && n == 4294967295);
    assert_true(amqp_table_get(t, "T", &f) && amqp_field_int(&f, &n) && n == 1700000000);
    assert_true(amqp_table_get(t, "b", &f) && amqp_field_int(&f, &n) && n == -1);
    assert_true(amqp_table_get(t, "S", &f) && !amqp_field_int(&f, &n));
    assert_true(amqp_table_get(t, "f", &f) && !amqp_field_int(&f, &n));
    assert_true(amqp_table_get(t, "d", &f) && !amqp_field_int(&f, &n));
    assert_true(amqp_table_get(t, "t", &f) && !amqp_field_int(&f, &n));
    assert_true(amqp_table_get(t, "D", &f) && !amqp_field_int(&f, &n));
    assert_false(amqp_table_get(t, "missing", &f));
    assert_false(amqp_table_get(t, "", &f));
}

/* The writer reproduces the hand encoding byte for byte. */
static void test_every_type_writes(void **state)
{
    uint8_t out[sizeof every_type];
    amqp_writer w;
    amqp_iter it;
    amqp_bytes key;
    amqp_field f;
    char k[2] = {0};

    amqp_writer_init(&w, out, sizeof out);
    amqp_iter_init(&it, (amqp_bytes){every_type, sizeof every_type});
    while (amqp_table_next(&it, &key, &f)) {
        k[0] = (char)key.ptr[0];
        amqp_put_key(&w, k);
        amqp_put_field(&w, &f);
    }
    assert_false(w.overflow);
    assert_int_equal(w.len, sizeof every_type);
    assert_memory_equal(out, every_type, sizeof every_type);
}

static void test_pika_table(void **state)
{
    amqp_bytes t = {gold_table, sizeof gold_table};
    amqp_field f, a, b, e;
    amqp_iter it;

    assert_int_equal(validate_exact(gold_table, sizeof gold_table, NULL), AMQP_OK);
    assert_true(amqp_table_get(t, "str", &f) && f.type == 'S');
    assert_true(amqp_bytes_equal_cstr(f.v.bytes, "hello"));
    assert_true(amqp_table_get(t, "bin", &f) && f.type == 'x' && f.v.bytes.len == 2);
    assert_true(amqp_table_get(t, "bool", &f) && f.type == 't' && f.v.i == 1);
    assert_true(amqp_table_get(t, "int", &f) && f.type == 'I' && f.v.i == -7);
    assert_true(amqp_table_get(t, "big", &f) && f.type == 'l' && f.v.i == (int64_t)1 << 40);
    assert_true(amqp_table_get(t, "dec", &f) && f.type == 'D');
    assert_true(f.v.decimal.scale == 2 && f.v.decimal.value == 314);
    assert_true(amqp_table_get(t, "ts", &f) && f.type == 'T' && f.v.i == 1700000000);
    assert_true(amqp_table_get(t, "void", &f) && f.type == 'V');
    assert_true(amqp_table_get(t, "arr", &f) && f.type == 'A');
    amqp_iter_init(&it, f.v.bytes);
    assert_true(amqp_array_next(&it, &e) && e.type == 't' && e.v.i == 1);
    assert_true(amqp_array_next(&it, &e) && e.type == 't' && e.v.i == 0);
    assert_false(amqp_array_next(&it, &e));
    /* tab.a.b = [1, "two", void] */
    assert_true(amqp_table_get(t, "tab", &f) && f.type == 'F');
    assert_true(amqp_table_get(f.v.bytes, "a", &a) && a.type == 'F');
    assert_true(amqp_table_get(a.v.bytes, "b", &b) && b.type == 'A');
    amqp_iter_init(&it, b.v.bytes);
    assert_true(amqp_array_next(&it, &e) && e.type == 'I' && e.v.i == 1);
    assert_true(amqp_array_next(&it, &e) && e.type == 'S' && amqp_bytes_equal_cstr(e.v.bytes, "two"));
    assert_true(amqp_array_next(&it, &e) && e.type == 'V');
    assert_false(amqp_array_next(&it, &e));
}

static void test_empty_and_duplicates(void **state)
{
    static const uint8_t dup[] = {1, 'k', 'b', 1, 1, 'k', 'b', 2, 0, 'V'}; /* k=1, k=2, ""=V */
    amqp_field f;

    assert_int_equal(amqp_table_validate((amqp_bytes){NULL, 0}, NULL), AMQP_OK);
    assert_int_equal(amqp_array_validate((amqp_bytes){NULL, 0}, NULL), AMQP_OK);
    assert_false(amqp_table_get((amqp_bytes){NULL, 0}, "k", &f));
    assert_int_equal(validate_exact(dup, sizeof dup, NULL), AMQP_OK);
    assert_true(amqp_table_get((amqp_bytes){dup, sizeof dup}, "k", &f));
    assert_int_equal(f.v.i, 1); /* the first wins, as in RabbitMQ */
    assert_true(amqp_table_get((amqp_bytes){dup, sizeof dup}, "", &f) && f.type == 'V');
}

/* ---- nesting and the depth limit ----------------------------------------- */

/* Writes `levels` containers nested in each other, alternating F and A when
 * `mixed`, innermost holding one long value. Returns the content length of
 * the outermost (which is a table). */
static size_t write_nested(uint8_t *buf, size_t cap, int levels, bool mixed)
{
    amqp_writer w;
    size_t marks[200];
    bool in_array[200];

    assert_true(levels <= 200);
    amqp_writer_init(&w, buf, cap);
    in_array[0] = false;
    for (int i = 1; i < levels; i++) { /* level 0 is the outer table, unwritten prefix */
        bool arr = mixed && i % 2 == 1;
        if (!in_array[i - 1])
            amqp_put_key(&w, "n");
        marks[i] = amqp_put_field_begin(&w, arr ? 'A' : 'F');
        in_array[i] = arr;
    }
    if (in_array[levels - 1]) {
        amqp_field v = {.type = 'l', .v.i = 42};
        amqp_put_field(&w, &v);
    } else {
        amqp_put_field_long(&w, "leaf", 42);
    }
    for (int i = levels - 1; i >= 1; i--)
        amqp_table_end(&w, marks[i]);
    assert_false(w.overflow);
    return w.len;
}

static void test_depth_limit(void **state)
{
    static uint8_t buf[8192];
    amqp_error err;

    for (int mixed = 0; mixed < 2; mixed++) {
        for (int levels = 1; levels <= AMQP_TABLE_MAX_DEPTH + 3; levels++) {
            size_t n = write_nested(buf, sizeof buf, levels, mixed);
            int rc = validate_exact(buf, n, &err);

            if (levels <= AMQP_TABLE_MAX_DEPTH) {
                if (rc != AMQP_OK)
                    fail_msg("%d levels refused: %s", levels, err.text);
            } else {
                assert_int_equal(rc, AMQP_ERROR);
                assert_int_equal(err.code, AMQP_SYNTAX_ERROR);
                assert_string_equal(err.text,
                                    "SYNTAX_ERROR - field tables nested deeper than 64 levels");
            }
        }
    }
}

/* A megabyte of nested array headers: refused at the limit, no stack blowup. */
static void test_deep_nesting_attack(void **state)
{
    size_t n = 1 << 20;
    uint8_t *b = malloc(n);
    size_t off = 0;
    amqp_error err;

    assert_non_null(b);
    b[off++] = 1;
    b[off++] = 'k';
    while (n - off >= 5) {
        uint32_t rest = (uint32_t)(n - off - 5);
        b[off++] = 'A';
        b[off++] = (uint8_t)(rest >> 24);
        b[off++] = (uint8_t)(rest >> 16);
        b[off++] = (uint8_t)(rest >> 8);
        b[off++] = (uint8_t)rest;
    }
    n = off;
    assert_int_equal(amqp_table_validate((amqp_bytes){b, (uint32_t)n}, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_SYNTAX_ERROR);
    free(b);
}

/* ---- malformed input ----------------------------------------------------- */

/* Every prefix of a valid table is either a valid table (cut at an entry
 * boundary) or an error -- and never an overread. */
static void test_every_prefix(void **state)
{
    static const struct { const uint8_t *p; size_t n; } tables[] = {
        {every_type, sizeof every_type}, {gold_table, sizeof gold_table}};

    for (size_t t = 0; t < 2; t++) {
        bool boundary[512] = {false};
        amqp_iter it;
        amqp_bytes key;
        amqp_field f;

        boundary[0] = true;
        amqp_iter_init(&it, (amqp_bytes){tables[t].p, (uint32_t)tables[t].n});
        while (amqp_table_next(&it, &key, &f))
            boundary[it.off] = true;
        for (size_t cut = 0; cut <= tables[t].n; cut++) {
            int rc = validate_exact(tables[t].p, cut, NULL);
            if (rc != (boundary[cut] ? AMQP_OK : AMQP_ERROR))
                fail_msg("table %zu cut at %zu: rc %d", t, cut, rc);
        }
    }
}

/* Every prefix walked by the iterators without validation: they stop
 * cleanly, never overrun. */
static void test_iterators_on_garbage(void **state)
{
    for (size_t cut = 0; cut <= sizeof every_type; cut++) {
        uint8_t *b = dup_exact(every_type, cut);
        amqp_iter it;
        amqp_bytes key;
        amqp_field f;
        unsigned n = 0;

        amqp_iter_init(&it, (amqp_bytes){b, (uint32_t)cut});
        while (amqp_table_next(&it, &key, &f))
            n++;
        assert_true(n <= 17);
        assert_true(it.off <= cut);
        amqp_iter_init(&it, (amqp_bytes){b, (uint32_t)cut});
        while (amqp_array_next(&it, &f))
            n++;
        amqp_table_get((amqp_bytes){b, (uint32_t)cut}, "x", &f);
        free(b);
    }
}

/* Lengths far beyond the buffer, near UINT32_MAX (where `off + n` wraps). */
static void test_bad_lengths(void **state)
{
    static const uint32_t lens[] = {0xFFFFFFFFu, 0xFFFFFFFEu, 0xFFFFFFFCu, 0xFFFFFFF9u, 0xFFFFFFF0u,
                                    0x80000000u, 0x7FFFFFFFu, 3, 2};
    static const uint8_t tags[] = {'S', 'x', 'F', 'A'};
    uint8_t b[16];
    amqp_error err;

    for (size_t t = 0; t < sizeof tags; t++) {
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            b[0] = 1;
            b[1] = 'k';
            b[2] = tags[t];
            b[3] = (uint8_t)(lens[i] >> 24);
            b[4] = (uint8_t)(lens[i] >> 16);
            b[5] = (uint8_t)(lens[i] >> 8);
            b[6] = (uint8_t)lens[i];
            b[7] = 'V';
            assert_int_equal(validate_exact(b, 8, &err), AMQP_ERROR);
            assert_int_equal(err.code, AMQP_SYNTAX_ERROR);
            /* same value inside an array */
            assert_int_equal(validate_array_exact(b + 2, 6, &err), AMQP_ERROR);
        }
    }
}

static void test_malformed_cases(void **state)
{
    static const struct { const char *what; uint8_t b[12]; size_t n; const char *text; } cases[] = {
        {"key longer than table", {5, 'k'}, 2, "SYNTAX_ERROR - truncated field table key"},
        {"key 255 with nothing", {255}, 1, NULL},
        {"key without value", {1, 'k'}, 2, "SYNTAX_ERROR - no value for table key 'k'"},
        {"unknown type Z", {1, 'k', 'Z', 0}, 4,
         "SYNTAX_ERROR - unknown field type 'Z' (0x5a) in table key 'k'"},
        {"short L (RabbitMQ's unsigned 64-bit)", {1, 'k', 'L', 0, 0, 0, 0, 0, 0, 0}, 10, NULL},
        {"type U is not RabbitMQ's", {1, 'k', 'U', 0, 1}, 5, NULL},
        {"type 0", {1, 'k', 0}, 3, NULL},
        {"short b", {1, 'k', 'b'}, 3, "SYNTAX_ERROR - truncated 'b' value in table key 'k'"},
        {"short s", {1, 'k', 's', 1}, 4, NULL},
        {"short I", {1, 'k', 'I', 1, 2, 3}, 6, NULL},
        {"short l", {1, 'k', 'l', 1, 2, 3, 4, 5, 6, 7}, 10, NULL},
        {"short T", {1, 'k', 'T', 1, 2, 3, 4, 5, 6, 7}, 10, NULL},
        {"short f", {1, 'k', 'f', 1, 2, 3}, 6, NULL},
        {"short d", {1, 'k', 'd', 1, 2, 3, 4, 5, 6, 7}, 10, NULL},
        {"short D", {1, 'k', 'D', 2, 0, 0, 1}, 7, NULL},
        {"short S length", {1, 'k', 'S', 0, 0, 0}, 6, NULL},
        {"bad nested table", {1, 'k', 'F', 0, 0, 0, 2, 1, 'j'}, 9, NULL},
        {"bad nested array", {1, 'k', 'A', 0, 0, 0, 1, 'Q'}, 8, NULL},
    };
    amqp_error err;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&err, 0, sizeof err);
        if (validate_exact(cases[i].b, cases[i].n, &err) != AMQP_ERROR)
            fail_msg("%s: accepted", cases[i].what);
        assert_int_equal(err.code, AMQP_SYNTAX_ERROR);
        assert_int_equal(err.method_id, 0);
        if (cases[i].text)
            assert_string_equal(err.text, cases[i].text);
    }
    /* arrays: unknown type, truncated value */
    assert_int_equal(validate_array_exact("Z", 1, &err), AMQP_ERROR);
    assert_int_equal(validate_array_exact("I\0\0", 3, &err), AMQP_ERROR);
    assert_int_equal(validate_array_exact("V", 1, &err), AMQP_OK);
}

/* ---- non-finite floats ---------------------------------------------------- */

/* RabbitMQ cannot represent NaN or infinity (it drops the connection); to
 * Warren such a value makes the table malformed, at any depth, with a 502
 * that callers must not rewrite (err.final). */
static void test_non_finite_floats(void **state)
{
    static const struct { const char *what; uint8_t b[40]; size_t n; const char *text; } bad[] = {
        {"d NaN", {1, 'k', 'd', 0x7f, 0xf8, 0, 0, 0, 0, 0, 0}, 11,
         "SYNTAX_ERROR - non-finite double value NaN in table key 'k'"},
        {"d NaN, other payload and sign", {1, 'k', 'd', 0xff, 0xf0, 0, 0, 0, 0, 0, 1}, 11, NULL},
        {"d +Inf", {1, 'k', 'd', 0x7f, 0xf0, 0, 0, 0, 0, 0, 0}, 11,
         "SYNTAX_ERROR - non-finite double value Infinity in table key 'k'"},
        {"d -Inf", {1, 'k', 'd', 0xff, 0xf0, 0, 0, 0, 0, 0, 0}, 11,
         "SYNTAX_ERROR - non-finite double value -Infinity in table key 'k'"},
        {"f NaN", {1, 'k', 'f', 0x7f, 0xc0, 0, 0}, 7,
         "SYNTAX_ERROR - non-finite float value NaN in table key 'k'"},
        {"f +Inf", {1, 'k', 'f', 0x7f, 0x80, 0, 0}, 7, NULL},
        {"f -Inf", {1, 'k', 'f', 0xff, 0x80, 0, 0}, 7,
         "SYNTAX_ERROR - non-finite float value -Infinity in table key 'k'"},
        {"after a good entry", {1, 'a', 'V', 1, 'k', 'f', 0x7f, 0x80, 0, 0}, 10, NULL},
        {"nested table", {1, 't', 'F', 0, 0, 0, 7, 1, 'k', 'f', 0x7f, 0xc0, 0, 0}, 14,
         "SYNTAX_ERROR - non-finite float value NaN in table key 'k'"},
        {"in an array", {1, 'a', 'A', 0, 0, 0, 6, 'V', 'f', 0x7f, 0xc0, 0, 0}, 13,
         "SYNTAX_ERROR - non-finite float value NaN in array ''"},
    };
    /* the most extreme finite values stay acceptable */
    static const struct { uint8_t b[12]; size_t n; } good[] = {
        {{1, 'k', 'd', 0x7f, 0xef, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 11}, /* DBL_MAX */
        {{1, 'k', 'd', 0x80, 0, 0, 0, 0, 0, 0, 1}, 11},                      /* -min subnormal */
        {{1, 'k', 'd', 0x80, 0, 0, 0, 0, 0, 0, 0}, 11},                      /* -0.0 */
        {{1, 'k', 'f', 0x7f, 0x7f, 0xff, 0xff}, 7},                          /* FLT_MAX */
        {{1, 'k', 'f', 0, 0, 0, 1}, 7},                                      /* float subnormal */
    };
    amqp_error err;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        if (validate_exact(bad[i].b, bad[i].n, &err) != AMQP_ERROR)
            fail_msg("%s: accepted", bad[i].what);
        assert_int_equal(err.code, AMQP_SYNTAX_ERROR);
        assert_true(err.final);
        assert_false(err.silent);
        if (bad[i].text)
            assert_string_equal(err.text, bad[i].text);
    }
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_int_equal(validate_exact(good[i].b, good[i].n, &err), AMQP_OK);
    assert_int_equal(validate_array_exact("d\x7f\xf0\0\0\0\0\0\0", 9, &err), AMQP_ERROR);
    assert_true(err.final);
    /* NULL err is allowed */
    assert_int_equal(validate_exact(bad[0].b, bad[0].n, NULL), AMQP_ERROR);
    /* a later, unrelated failure does not inherit the flag */
    assert_int_equal(validate_exact("\x01k", 2, &err), AMQP_ERROR);
    assert_false(err.final);
}

/* ---- equality ------------------------------------------------------------ */

static amqp_field fi(uint8_t type, int64_t i) { return (amqp_field){.type = type, .v.i = i}; }
static amqp_field ff(float f) { return (amqp_field){.type = 'f', .v.f = f}; }
static amqp_field fd(double d) { return (amqp_field){.type = 'd', .v.d = d}; }
static amqp_field fs(uint8_t type, const char *s)
{
    return (amqp_field){.type = type, .v.bytes = AMQP_CSTR(s)};
}
static amqp_field fdec(uint8_t scale, uint32_t value)
{
    return (amqp_field){.type = 'D', .v.decimal = {scale, value}};
}

static void test_field_equal(void **state)
{
    /* RabbitMQ's headers exchange compares with Erlang ==. */
    const struct { amqp_field a, b; bool eq; } cases[] = {
        {fi('I', 1), fi('l', 1), true},          /* 1 == 1 across widths */
        {fi('b', -1), fi('B', 255), false},
        {fi('b', -1), fi('l', -1), true},
        {fi('i', 4294967295), fi('l', 4294967295), true},
        {fi('I', 1), fd(1.0), true},             /* 1 == 1.0 */
        {fi('I', 1), fd(1.5), false},
        {ff(1.5f), fd(1.5), true},
        {ff(0.1f), fd(0.1), false},              /* float precision differs */
        {fi('T', 5), fi('l', 5), true},          /* timestamps are integers */
        {fi('T', -1), fi('l', -1), false},       /* T 2^64-1 is not -1 */
        {fi('T', -1), fi('T', -1), true},
        {fs('S', "a"), fs('x', "a"), true},      /* both binaries */
        {fs('S', "a"), fs('S', "b"), false},
        {fs('S', "a"), fs('S', "ab"), false},
        {fs('S', ""), fs('S', ""), true},
        {fs('S', "1"), fi('I', 1), false},
        {fi('t', 1), fi('t', 1), true},
        {fi('t', 1), fi('t', 0), false},
        {fi('t', 1), fi('I', 1), false},         /* true is an atom, not 1 */
        {fi('V', 0), fi('V', 0), true},
        {fi('V', 0), fs('S', ""), false},
        {fdec(2, 314), fdec(2, 314), true},
        {fdec(2, 314), fdec(3, 314), false},
        {fdec(0, 1), fi('I', 1), false},         /* a decimal is a tuple */
        {fd(0.0), fd(-0.0), true},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (amqp_field_equal(&cases[i].a, &cases[i].b) != cases[i].eq)
            fail_msg("case %zu: '%c' vs '%c' expected %s", i, cases[i].a.type, cases[i].b.type,
                     cases[i].eq ? "equal" : "different");
        if (amqp_field_equal(&cases[i].b, &cases[i].a) != cases[i].eq)
            fail_msg("case %zu is not symmetric", i);
    }
}

/* Nested containers compare element by element with tags: {k: b 1} differs
 * from {k: l 1}, as RabbitMQ's {Key, Type, Value} tuples do. */
static void test_field_equal_nested(void **state)
{
    static const uint8_t t1[] = {1, 'k', 'b', 1};
    static const uint8_t t2[] = {1, 'k', 'l', 0, 0, 0, 0, 0, 0, 0, 1};
    static const uint8_t t3[] = {1, 'k', 'b', 1, 1, 'j', 'V'};
    static const uint8_t t4[] = {1, 'j', 'b', 1};
    static const uint8_t a1[] = {'t', 1, 'F', 0, 0, 0, 4, 1, 'k', 'b', 1};
    static const uint8_t a2[] = {'t', 2, 'F', 0, 0, 0, 4, 1, 'k', 'b', 1}; /* t 2 is true too */
    static const uint8_t a3[] = {'t', 1, 'F', 0, 0, 0, 4, 1, 'k', 'b', 2};
    amqp_field x = {.type = 'F', .v.bytes = {t1, sizeof t1}};
    amqp_field y = x;

    assert_true(amqp_field_equal(&x, &y));
    y.v.bytes = (amqp_bytes){t2, sizeof t2};
    assert_false(amqp_field_equal(&x, &y));
    y.v.bytes = (amqp_bytes){t3, sizeof t3};
    assert_false(amqp_field_equal(&x, &y));
    assert_false(amqp_field_equal(&y, &x));
    y.v.bytes = (amqp_bytes){t4, sizeof t4};
    assert_false(amqp_field_equal(&x, &y));
    y.type = 'A';
    y.v.bytes = (amqp_bytes){t1, sizeof t1};
    assert_false(amqp_field_equal(&x, &y)); /* a table is not an array */

    x = (amqp_field){.type = 'A', .v.bytes = {a1, sizeof a1}};
    y = (amqp_field){.type = 'A', .v.bytes = {a2, sizeof a2}};
    assert_true(amqp_field_equal(&x, &y));
    y.v.bytes = (amqp_bytes){a3, sizeof a3};
    assert_false(amqp_field_equal(&x, &y));
    y.v.bytes = (amqp_bytes){a1, 2};
    assert_false(amqp_field_equal(&x, &y)); /* shorter array */
}

static void test_bytes_equal(void **state)
{
    assert_true(amqp_bytes_equal(AMQP_CSTR(""), (amqp_bytes){NULL, 0}));
    assert_true(amqp_bytes_equal(AMQP_CSTR("abc"), AMQP_CSTR("abc")));
    assert_false(amqp_bytes_equal(AMQP_CSTR("abc"), AMQP_CSTR("abd")));
    assert_false(amqp_bytes_equal(AMQP_CSTR("abc"), AMQP_CSTR("ab")));
    assert_true(amqp_bytes_equal_cstr((amqp_bytes){(const uint8_t *)"abcdef", 3}, "abc"));
    assert_false(amqp_bytes_equal_cstr((amqp_bytes){(const uint8_t *)"a\0c", 3}, "a"));
}

/* ---- writer -------------------------------------------------------------- */

static void test_writer_overflow_is_sticky(void **state)
{
    uint8_t b[8];
    amqp_writer w;

    amqp_writer_init(&w, b, sizeof b);
    amqp_put_u32(&w, 0x01020304);
    amqp_put_u16(&w, 0x0506);
    assert_false(w.overflow);
    amqp_put_u32(&w, 0x0708090A); /* does not fit */
    assert_true(w.overflow);
    assert_int_equal(w.len, 6);
    amqp_put_u8(&w, 1); /* would fit, but overflow is sticky */
    assert_int_equal(w.len, 6);
    assert_memory_equal(b, "\x01\x02\x03\x04\x05\x06", 6);

    amqp_writer_init(&w, NULL, 0);
    amqp_put_raw(&w, "", 0);
    assert_false(w.overflow);
    amqp_put_u8(&w, 1);
    assert_true(w.overflow);
}

static void test_writer_values(void **state)
{
    uint8_t b[64], big[256] = {0};
    amqp_writer w;

    amqp_writer_init(&w, b, sizeof b);
    amqp_put_u64(&w, 0x0102030405060708ull);
    amqp_put_shortstr(&w, AMQP_CSTR("ab"));
    amqp_put_longstr(&w, AMQP_CSTR("cd"));
    assert_false(w.overflow);
    assert_int_equal(w.len, 8 + 3 + 6);
    assert_memory_equal(b, "\1\2\3\4\5\6\7\x08\x02" "ab\0\0\0\x02" "cd", 17);

    amqp_writer_init(&w, big, sizeof big);
    amqp_put_shortstr(&w, (amqp_bytes){big, 256}); /* too long for a shortstr */
    assert_true(w.overflow);

    amqp_writer_init(&w, b, sizeof b);
    amqp_put_field_begin(&w, 'S'); /* only F and A nest */
    assert_true(w.overflow);
    amqp_writer_init(&w, b, sizeof b);
    amqp_put_field(&w, &(amqp_field){.type = 'Q'});
    assert_true(w.overflow);
}

static void test_writer_tables(void **state)
{
    uint8_t b[128];
    amqp_writer w;
    size_t outer, inner;
    amqp_field f, e;
    amqp_bytes content;
    amqp_iter it;

    amqp_writer_init(&w, b, sizeof b);
    outer = amqp_table_begin(&w);
    amqp_put_field_bool(&w, "durable", true);
    amqp_put_field_str(&w, "name", AMQP_CSTR("q"));
    amqp_put_field_long(&w, "ttl", -5);
    amqp_put_key(&w, "list");
    inner = amqp_put_field_begin(&w, 'A');
    amqp_put_field(&w, &(amqp_field){.type = 'V'});
    amqp_put_field(&w, &(amqp_field){.type = 'u', .v.i = 65535});
    amqp_table_end(&w, inner);
    amqp_table_end(&w, outer);
    assert_false(w.overflow);
    assert_int_equal(b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3], w.len - 4);

    content = (amqp_bytes){b + 4, (uint32_t)(w.len - 4)};
    assert_int_equal(amqp_table_validate(content, NULL), AMQP_OK);
    assert_true(amqp_table_get(content, "durable", &f) && f.type == 't' && f.v.i == 1);
    assert_true(amqp_table_get(content, "name", &f) && amqp_bytes_equal_cstr(f.v.bytes, "q"));
    assert_true(amqp_table_get(content, "ttl", &f) && f.type == 'l' && f.v.i == -5);
    assert_true(amqp_table_get(content, "list", &f) && f.type == 'A');
    amqp_iter_init(&it, f.v.bytes);
    assert_true(amqp_array_next(&it, &e) && e.type == 'V');
    assert_true(amqp_array_next(&it, &e) && e.type == 'u' && e.v.i == 65535);
    assert_false(amqp_array_next(&it, &e));

    /* overflow inside a table: end leaves the buffer alone */
    amqp_writer_init(&w, b, 10);
    outer = amqp_table_begin(&w);
    amqp_put_field_str(&w, "name", AMQP_CSTR("too long for ten bytes"));
    amqp_table_end(&w, outer);
    assert_true(w.overflow);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type_decodes),
        cmocka_unit_test(test_every_type_writes),
        cmocka_unit_test(test_pika_table),
        cmocka_unit_test(test_empty_and_duplicates),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_deep_nesting_attack),
        cmocka_unit_test(test_every_prefix),
        cmocka_unit_test(test_iterators_on_garbage),
        cmocka_unit_test(test_bad_lengths),
        cmocka_unit_test(test_malformed_cases),
        cmocka_unit_test(test_non_finite_floats),
        cmocka_unit_test(test_field_equal),
        cmocka_unit_test(test_field_equal_nested),
        cmocka_unit_test(test_bytes_equal),
        cmocka_unit_test(test_writer_overflow_is_sticky),
        cmocka_unit_test(test_writer_values),
        cmocka_unit_test(test_writer_tables),
    };

    return cmocka_run_group_tests_name("amqp_table", tests, NULL, NULL);
}
