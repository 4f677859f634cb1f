/* AMQP field tables <-> JSON, as RabbitMQ's management API converts them:
 * each AMQP type's JSON form, and each JSON type's AMQP type (checked on
 * the wire bytes), refusals (null, non-objects, depth), and round trips. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_mgmt_util.h"

static void write_table(mgmt_json *w, const void *table) { mgmt_json_table(w, *(const amqp_bytes *)table); }

static char *table_json(amqp_bytes table) { return mgmt_test_render(write_table, &table); }

/* Converts JSON text to a table; returns false with why. */
static bool from_json(const char *text, uint8_t *buf, size_t cap, amqp_bytes *out, char *why)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    assert_non_null(v);
    amqp_writer w;
    amqp_writer_init(&w, buf, cap);
    bool ok = mgmt_table_from_json(v, &w, why, 200);
    json_decref(v);
    if (ok)
        *out = (amqp_bytes){buf + 4, (uint32_t)w.len - 4};
    return ok;
}

static void test_amqp_types_to_json(void **state)
{
    (void)state;
    uint8_t buf[1024];
    amqp_writer w;
    amqp_writer_init(&w, buf, sizeof buf);
    size_t top = amqp_table_begin(&w);
    amqp_put_key(&w, "t"), amqp_put_u8(&w, 't'), amqp_put_u8(&w, 1);
    amqp_put_key(&w, "b"), amqp_put_u8(&w, 'b'), amqp_put_u8(&w, 0xff);           /* -1 */
    amqp_put_key(&w, "B"), amqp_put_u8(&w, 'B'), amqp_put_u8(&w, 0xff);           /* 255 */
    amqp_put_key(&w, "s"), amqp_put_u8(&w, 's'), amqp_put_u16(&w, 0xfffe);        /* -2 */
    amqp_put_key(&w, "u"), amqp_put_u8(&w, 'u'), amqp_put_u16(&w, 65535);
    amqp_put_key(&w, "I"), amqp_put_u8(&w, 'I'), amqp_put_u32(&w, 0xfffffffd);    /* -3 */
    amqp_put_key(&w, "i"), amqp_put_u8(&w, 'i'), amqp_put_u32(&w, 4294967295u);
    amqp_put_key(&w, "l"), amqp_put_u8(&w, 'l'), amqp_put_u64(&w, (uint64_t)-4);
    amqp_put_key(&w, "L"), amqp_put_u8(&w, 'L'), amqp_put_u64(&w, 18446744073709551615ull);
    float f = 0.5f;
    uint32_t fb;
    memcpy(&fb, &f, 4);
    amqp_put_key(&w, "f"), amqp_put_u8(&w, 'f'), amqp_put_u32(&w, fb);
    double d = 2.25;
    uint64_t db;
    memcpy(&db, &d, 8);
    amqp_put_key(&w, "d"), amqp_put_u8(&w, 'd'), amqp_put_u64(&w, db);
    amqp_put_key(&w, "D"), amqp_put_u8(&w, 'D'), amqp_put_u8(&w, 2), amqp_put_u32(&w, 150);
    amqp_put_key(&w, "S"), amqp_put_u8(&w, 'S'), amqp_put_longstr(&w, AMQP_CSTR("str"));
    amqp_put_key(&w, "x"), amqp_put_u8(&w, 'x'), amqp_put_longstr(&w, AMQP_CSTR("raw"));
    amqp_put_key(&w, "T"), amqp_put_u8(&w, 'T'), amqp_put_u64(&w, 1700000000);
    amqp_put_key(&w, "V"), amqp_put_u8(&w, 'V');
    amqp_put_key(&w, "A");
    size_t arr = amqp_put_field_begin(&w, 'A');
    amqp_put_u8(&w, 'I'), amqp_put_u32(&w, 1);
    amqp_put_u8(&w, 'S'), amqp_put_longstr(&w, AMQP_CSTR("a"));
    amqp_table_end(&w, arr);
    amqp_put_key(&w, "F");
    size_t tab = amqp_put_field_begin(&w, 'F');
    amqp_put_field_str(&w, "k", AMQP_CSTR("v"));
    amqp_table_end(&w, tab);
    amqp_table_end(&w, top);
    assert_false(w.overflow);
    amqp_bytes table = {buf + 4, (uint32_t)w.len - 4};
    assert_int_equal(amqp_table_validate(table, NULL), AMQP_OK);
    char *s = table_json(table);
    assert_string_equal(s, "{\"t\":true,\"b\":-1,\"B\":255,\"s\":-2,\"u\":65535,\"I\":-3,"
                           "\"i\":4294967295,\"l\":-4,\"L\":18446744073709551615,\"f\":0.5,"
                           "\"d\":2.25,\"D\":1.5,\"S\":\"str\",\"x\":\"raw\",\"T\":1700000000,"
                           "\"V\":null,\"A\":[1,\"a\"],\"F\":{\"k\":\"v\"}}");
    free(s);
}

/* The wire type each JSON type becomes. */
static void test_json_types_to_amqp(void **state)
{
    (void)state;
    uint8_t buf[1024];
    char why[200];
    amqp_bytes t;
    assert_true(from_json("{\"i\":7,\"neg\":-7,\"r\":1.5,\"yes\":true,\"no\":false,\"s\":\"x\","
                          "\"l\":[1,\"a\",[true]],\"o\":{\"k\":{\"n\":2}}}",
                          buf, sizeof buf, &t, why));
    assert_int_equal(amqp_table_validate(t, NULL), AMQP_OK);
    static const struct { const char *key; uint8_t type; } want[] = {
        {"i", 'l'}, {"neg", 'l'}, {"r", 'd'}, {"yes", 't'}, {"no", 't'},
        {"s", 'S'}, {"l", 'A'}, {"o", 'F'},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        amqp_field f;
        assert_true(amqp_table_get(t, want[i].key, &f));
        if (f.type != want[i].type)
            fail_msg("%s: type %c, want %c", want[i].key, f.type, want[i].type);
    }
    amqp_field f;
    assert_true(amqp_table_get(t, "neg", &f));
    assert_int_equal(f.v.i, -7);
    assert_true(amqp_table_get(t, "r", &f));
    assert_true(f.v.d == 1.5);
    assert_true(amqp_table_get(t, "no", &f));
    assert_int_equal(f.v.i, 0);
    char *s = table_json(t);
    assert_string_equal(s, "{\"i\":7,\"neg\":-7,\"r\":1.5,\"yes\":true,\"no\":false,\"s\":\"x\","
                           "\"l\":[1,\"a\",[true]],\"o\":{\"k\":{\"n\":2}}}");
    free(s);
}

static void test_refusals(void **state)
{
    (void)state;
    uint8_t buf[256];
    char why[200];
    amqp_bytes t;
    static const struct { const char *json, *why; } cases[] = {
        {"{\"a\":null}", "null_not_allowed"},
        {"{\"a\":[1,null]}", "null_not_allowed"},
        {"{\"a\":{\"b\":null}}", "null_not_allowed"},
        {"[1]", "not_a_table"},
        {"\"s\"", "not_a_table"},
        {"{\"a\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
         "xxxxxxxxxxx\"}", "too large"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (from_json(cases[i].json, buf, sizeof buf, &t, why))
            fail_msg("%s accepted", cases[i].json);
        if (!strstr(why, cases[i].why))
            fail_msg("%s: why '%s', want '%s'", cases[i].json, why, cases[i].why);
    }
    /* nesting deeper than a table may be */
    char deep[400] = "{\"a\":";
    for (int i = 0; i < AMQP_TABLE_MAX_DEPTH + 2; i++)
        strcat(deep, "[");
    for (int i = 0; i < AMQP_TABLE_MAX_DEPTH + 2; i++)
        strcat(deep, "]");
    strcat(deep, "}");
    uint8_t big[4096];
    assert_false(from_json(deep, big, sizeof big, &t, why));
    assert_non_null(strstr(why, "nested"));
}

static void test_empty_table(void **state)
{
    (void)state;
    uint8_t buf[64];
    char why[200];
    amqp_bytes t;
    assert_true(from_json("{}", buf, sizeof buf, &t, why));
    assert_int_equal(t.len, 0);
    char *s = table_json(t);
    assert_string_equal(s, "{}");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_amqp_types_to_json),
        cmocka_unit_test(test_json_types_to_amqp),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_empty_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
