/* JSON bodies to field tables: a management API body (parsed as
 * mgmt-ui/http.c parses one) converted by mgmt_table_from_json, as PUT
 * arguments and published headers are, and by the definitions' converter
 * (defs_table_into, with and without null). What converts is a valid
 * table, and shown as JSON again (mgmt_json_table, defs_table_to_json) it
 * is the same value, numbers compared as numbers.
 *
 * Input: a flags byte (bit 0: allow null), then the body. */
#include <event2/buffer.h>
#include <jansson.h>
#include <math.h>

#include "../../definitions/defs_int.h"
#include "../../mgmt-ui/mgmt.h"
#include "fuzz.h"

static bool same(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    if (json_typeof(a) != json_typeof(b))
        return false;
    const char *key;
    size_t i;
    json_t *v;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b))
            return false;
        json_array_foreach((json_t *)a, i, v) if (!same(v, json_array_get(b, i))) return false;
        return true;
    case JSON_OBJECT:
        if (json_object_size(a) != json_object_size(b))
            return false;
        json_object_foreach((json_t *)a, key, v) {
            const json_t *w = json_object_get(b, key);
            if (!w || !same(v, w))
                return false;
        }
        return true;
    default:
        return true; /* true, false, null */
    }
}

static void check_mgmt(const json_t *obj)
{
    static uint8_t buf[64 * 1024];
    char why[256];
    amqp_writer w;
    amqp_writer_init(&w, buf, sizeof buf);
    if (!mgmt_table_from_json(obj, &w, why, sizeof why)) {
        FUZZ_CHECK(why[0]);
        return;
    }
    FUZZ_CHECK(!w.overflow && w.len >= 4);
    amqp_bytes content = {buf + 4, (uint32_t)(w.len - 4)};
    amqp_error err = {0};
    FUZZ_CHECK(amqp_table_validate(content, &err) == AMQP_OK);
    struct evbuffer *out = evbuffer_new();
    mgmt_json *jw = mgmt_json_new(out);
    FUZZ_CHECK(out && jw);
    mgmt_json_table(jw, content);
    mgmt_json_free(jw);
    json_error_t je;
    json_t *back = json_loadb((const char *)evbuffer_pullup(out, -1), evbuffer_get_length(out),
                              0, &je);
    FUZZ_CHECK(back && same(obj, back));
    json_decref(back);
    evbuffer_free(out);
}

static void check_defs(const json_t *obj, bool allow_null)
{
    static uint8_t buf[DEFS_TABLE_MAX];
    char why[256];
    amqp_bytes table;
    if (!defs_table_into(obj, allow_null, buf, sizeof buf, &table, why, sizeof why)) {
        FUZZ_CHECK(why[0]);
        return;
    }
    amqp_error err = {0};
    FUZZ_CHECK(amqp_table_validate(table, &err) == AMQP_OK);
    json_t *back = defs_table_to_json(table);
    /* absent, null or [] is the empty table */
    FUZZ_CHECK(back && (same(obj, back) || (table.len == 0 && json_object_size(back) == 0)));
    json_decref(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    bool allow_null = fuzz_byte(&in) & 1;
    json_error_t je;
    json_t *body = json_loadb((const char *)in.p, in.len, JSON_DECODE_ANY, &je);
    if (!body)
        return 0;
    check_mgmt(body);
    check_defs(body, allow_null);
    json_t *args = json_object_get(body, "arguments");
    if (args) {
        check_mgmt(args);
        check_defs(args, allow_null);
    }
    json_decref(body);
    return 0;
}
