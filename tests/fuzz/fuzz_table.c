/* Field tables and arrays (amqp/): validation, then everything the broker
 * does with a validated table -- iterate it, look keys up, compare values,
 * print them as RabbitMQ's error texts do, copy it without a key -- and
 * show it as JSON (the management API's mgmt_json_table, which must yield
 * JSON that parses, and the definitions' defs_table_to_json, whose JSON
 * must convert back to a table that validates and shows the same).
 *
 * Input: one byte (bit 0: an array, else a table), then the content
 * (without its length prefix). */
#include <event2/buffer.h>
#include <jansson.h>

#include "../../definitions/defs_int.h"
#include "../../mgmt-ui/mgmt.h"
#include "fuzz.h"

static void walk(amqp_bytes data, bool table, int depth);

static void check_field(const amqp_field *f, int depth)
{
    char text[512];
    int64_t i;
    FUZZ_CHECK(amqp_field_equal(f, f));
    amqp_erl_term(f, text, sizeof text);
    FUZZ_CHECK(strlen(text) < sizeof text);
    amqp_erl_value(f, text, 8); /* a cut-short buffer */
    FUZZ_CHECK(strlen(text) < 8);
    FUZZ_CHECK(amqp_erl_type_name(f->type) != NULL);
    (void)amqp_field_int(f, &i);
    if (f->type == 'F' || f->type == 'A')
        walk(f->v.bytes, f->type == 'F', depth + 1);
}

static void walk(amqp_bytes data, bool table, int depth)
{
    FUZZ_CHECK(depth <= AMQP_TABLE_MAX_DEPTH + 1);
    amqp_iter it;
    amqp_bytes key;
    amqp_field f, again;
    amqp_iter_init(&it, data);
    while (table ? amqp_table_next(&it, &key, &f) : amqp_array_next(&it, &f)) {
        check_field(&f, depth);
        if (table && key.len < 256 && !memchr(key.ptr, 0, key.len)) {
            char k[256];
            memcpy(k, key.ptr, key.len);
            k[key.len] = 0;
            FUZZ_CHECK(amqp_table_get(data, k, &again)); /* the first of that key */
        }
    }
    FUZZ_CHECK(it.off == data.len);
}

/* The management API's rendering is valid JSON. */
static void check_mgmt_json(amqp_bytes table)
{
    struct evbuffer *out = evbuffer_new();
    mgmt_json *w = mgmt_json_new(out);
    FUZZ_CHECK(out && w);
    mgmt_json_table(w, table);
    mgmt_json_free(w);
    size_t n = evbuffer_get_length(out);
    json_error_t je;
    const char *text = (const char *)evbuffer_pullup(out, -1);
    json_t *v = json_loadb(text, n, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);
    /* valid JSON that jansson cannot hold: a key with \u0000 in it */
    bool nul_key = !v && strstr(je.text, "NUL byte in object key");
    if (!v && !nul_key)
        fprintf(stderr, "invalid JSON: %s: %.*s\n", je.text, (int)(n < 400 ? n : 400), text);
    FUZZ_CHECK(nul_key || json_is_object(v));
    json_decref(v);
    evbuffer_free(out);
}

/* The definitions' export form converts back to a table, whose export is
 * the same JSON. */
static void check_defs_json(amqp_bytes table)
{
    static uint8_t buf[DEFS_TABLE_MAX];
    char why[256];
    amqp_bytes back;
    json_t *j = defs_table_to_json(table);
    FUZZ_CHECK(j);
    if (defs_table_into(j, true, buf, sizeof buf, &back, why, sizeof why)) {
        amqp_error err = {0};
        FUZZ_CHECK(amqp_table_validate(back, &err) == AMQP_OK);
        json_t *j2 = defs_table_to_json(back);
        FUZZ_CHECK(j2 && json_equal(j, j2));
        json_decref(j2);
    }
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    bool array = fuzz_byte(&in) & 1;
    amqp_bytes content = {in.p, (uint32_t)in.len};
    amqp_error err = {0};
    int rc = array ? amqp_array_validate(content, &err) : amqp_table_validate(content, &err);
    if (rc != AMQP_OK) {
        FUZZ_CHECK(rc == AMQP_ERROR && err.code != 0);
        return 0;
    }
    walk(content, !array, 1);
    if (array)
        return 0;
    check_mgmt_json(content);
    check_defs_json(content);

    /* a copy without the first key is a valid table */
    amqp_iter it;
    amqp_bytes key;
    amqp_field f;
    amqp_iter_init(&it, content);
    if (amqp_table_next(&it, &key, &f) && key.len < 256 && !memchr(key.ptr, 0, key.len)) {
        char k[256];
        memcpy(k, key.ptr, key.len);
        k[key.len] = 0;
        uint8_t *copy = malloc(content.len + 1);
        amqp_writer w;
        amqp_writer_init(&w, copy, content.len + 1);
        amqp_put_entries_except(&w, content, k);
        FUZZ_CHECK(!w.overflow && w.len < content.len);
        FUZZ_CHECK(amqp_table_validate((amqp_bytes){copy, (uint32_t)w.len}, &err) == AMQP_OK);
        free(copy);
    }
    return 0;
}
