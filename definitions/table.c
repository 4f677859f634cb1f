/* JSON <-> AMQP field tables for definitions: queue, exchange and binding
 * arguments and policy definitions. The mapping is the management API's
 * (RabbitMQ's): numbers of every width to JSON numbers, decimals to their
 * value, byte arrays to strings, void to null; back from JSON, integers
 * are longs ('l') and reals doubles ('d'). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defs_int.h"

/* ---- AMQP -> JSON ---------------------------------------------------------- */

json_t *defs_json_bytes(amqp_bytes b)
{
    json_t *j = json_stringn((const char *)b.ptr, b.len);
    if (j || b.len == 0)
        return j;
    /* Not UTF-8: keep ASCII, every other byte becomes U+FFFD. */
    char *s = malloc((size_t)b.len * 3 + 1);
    size_t n = 0;
    if (!s)
        return NULL;
    for (uint32_t i = 0; i < b.len; i++) {
        if (b.ptr[i] < 0x80 && b.ptr[i] != 0) {
            s[n++] = (char)b.ptr[i];
        } else {
            memcpy(s + n, "\xEF\xBF\xBD", 3);
            n += 3;
        }
    }
    j = json_stringn(s, n);
    free(s);
    return j;
}

static json_t *field_json(const amqp_field *f);

static json_t *array_json(amqp_bytes content)
{
    json_t *a = json_array();
    amqp_iter it;
    amqp_field f;
    amqp_iter_init(&it, content);
    while (a && amqp_array_next(&it, &f))
        json_array_append_new(a, field_json(&f));
    return a;
}

static json_t *field_json(const amqp_field *f)
{
    switch (f->type) {
    case 't': return json_boolean(f->v.i != 0);
    case 'L': return json_integer((json_int_t)(uint64_t)f->v.i);
    case 'b': case 'B': case 's': case 'u': case 'I': case 'i': case 'l': case 'T':
        return json_integer(f->v.i);
    case 'f': return json_real(f->v.f);
    case 'd': return json_real(f->v.d);
    case 'D': return json_real(f->v.decimal.value / pow(10, f->v.decimal.scale));
    case 'S': case 'x': return defs_json_bytes(f->v.bytes);
    case 'A': return array_json(f->v.bytes);
    case 'F': return defs_table_to_json(f->v.bytes);
    default: return json_null();
    }
}

json_t *defs_table_to_json(amqp_bytes table)
{
    json_t *o = json_object();
    amqp_iter it;
    amqp_bytes key;
    amqp_field f;
    amqp_iter_init(&it, table);
    while (o && amqp_table_next(&it, &key, &f)) {
        char k[256];
        snprintf(k, sizeof k, "%.*s", (int)key.len, (const char *)key.ptr);
        json_object_set_new(o, k, field_json(&f));
    }
    return o;
}

/* ---- JSON -> AMQP ---------------------------------------------------------- */

static bool put_value(amqp_writer *w, const json_t *v, int depth, bool allow_null, char *why,
                      size_t whylen);

static bool put_object(amqp_writer *w, const json_t *obj, int depth, bool allow_null, char *why,
                       size_t whylen)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        if (strlen(key) > 255) {
            snprintf(why, whylen, "field name too long: %.40s...", key);
            return false;
        }
        amqp_put_key(w, key);
        if (!put_value(w, v, depth + 1, allow_null, why, whylen))
            return false;
    }
    return true;
}

static bool put_nested(amqp_writer *w, const json_t *v, int depth, bool allow_null, char *why,
                       size_t whylen)
{
    size_t mark = amqp_put_field_begin(w, json_is_object(v) ? 'F' : 'A');
    if (json_is_object(v)) {
        if (!put_object(w, v, depth, allow_null, why, whylen))
            return false;
    } else {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
            if (!put_value(w, e, depth + 1, allow_null, why, whylen))
                return false;
    }
    amqp_table_end(w, mark);
    return true;
}

static bool put_value(amqp_writer *w, const json_t *v, int depth, bool allow_null, char *why,
                      size_t whylen)
{
    if (depth >= AMQP_TABLE_MAX_DEPTH) {
        snprintf(why, whylen, "arguments nested too deeply");
        return false;
    }
    amqp_field f = {0};
    switch (json_typeof(v)) {
    case JSON_STRING:
        f.type = 'S';
        f.v.bytes = (amqp_bytes){(const uint8_t *)json_string_value(v),
                                 (uint32_t)json_string_length(v)};
        break;
    case JSON_INTEGER:
        f.type = 'l';
        f.v.i = json_integer_value(v);
        break;
    case JSON_REAL:
        f.type = 'd';
        f.v.d = json_real_value(v);
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        f.type = 't';
        f.v.i = json_is_true(v);
        break;
    case JSON_NULL:
        if (!allow_null) {
            snprintf(why, whylen, "null is not allowed as a value");
            return false;
        }
        f.type = 'V';
        break;
    default:
        return put_nested(w, v, depth, allow_null, why, whylen);
    }
    amqp_put_field(w, &f);
    return true;
}

bool defs_table_into(const json_t *obj, bool allow_null, uint8_t *buf, size_t cap,
                     amqp_bytes *out, char *why, size_t whylen)
{
    if (!obj || json_is_null(obj) || (json_is_array(obj) && json_array_size(obj) == 0)) {
        *out = (amqp_bytes){buf, 0};
        return true;
    }
    if (!json_is_object(obj)) {
        snprintf(why, whylen, "must be an object");
        return false;
    }
    amqp_writer w;
    amqp_writer_init(&w, buf, cap);
    size_t mark = amqp_table_begin(&w);
    if (!put_object(&w, obj, 1, allow_null, why, whylen))
        return false;
    amqp_table_end(&w, mark);
    if (w.overflow) {
        snprintf(why, whylen, "too large (over %zu bytes encoded)", cap);
        return false;
    }
    *out = (amqp_bytes){buf + 4, (uint32_t)w.len - 4};
    return true;
}

bool defs_table_from_json(defs_ctx *c, const json_t *obj, bool allow_null, amqp_bytes *out,
                          char *why, size_t whylen)
{
    return defs_table_into(obj, allow_null, c->table, sizeof c->table, out, why, whylen);
}
