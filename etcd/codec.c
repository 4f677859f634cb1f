/* The JSON of etcd's gateway: base64 keys and values, int64 fields as
 * strings (proto3 JSON), zero values left out. Requests are built with
 * jansson; replies are parsed with jansson from one bounded message (the
 * parser's input is at most max_message bytes, and jansson bounds nesting
 * depth), then copied into an etcd_result whose kvs and bytes live until
 * codec_result_free.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_int.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

json_t *codec_b64(const void *data, size_t len)
{
    const uint8_t *d = data;
    if (len > (SIZE_MAX - 4) / 4 * 3)
        return NULL;
    size_t n = (len + 2) / 3 * 4;
    char *s = malloc(n + 1), *o = s;
    if (!s)
        return NULL;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)d[i + 1] << 8;
        if (i + 2 < len)
            v |= d[i + 2];
        *o++ = b64[v >> 18];
        *o++ = b64[(v >> 12) & 63];
        *o++ = i + 1 < len ? b64[(v >> 6) & 63] : '=';
        *o++ = i + 2 < len ? b64[v & 63] : '=';
    }
    json_t *j = json_stringn(s, n);
    free(s);
    return j;
}

static int b64_val(char c)
{
    const char *p = c ? strchr(b64, c) : NULL;
    return p ? (int)(p - b64) : -1;
}

int codec_unb64(const char *s, size_t len, uint8_t **out, size_t *out_len)
{
    if (len % 4)
        return -1;
    uint8_t *d = malloc(len / 4 * 3 + 1);
    size_t n = 0;
    if (!d)
        return -1;
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        bool last = i + 4 == len;
        for (int k = 0; k < 4; k++)
            v[k] = b64_val(s[i + k]);
        int pad = last && s[i + 3] == '=' ? (s[i + 2] == '=' ? 2 : 1) : 0;
        if (v[0] < 0 || v[1] < 0 || (pad < 2 && v[2] < 0) || (pad < 1 && v[3] < 0)) {
            free(d);
            return -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12;
        w |= (uint32_t)(pad < 2 ? v[2] : 0) << 6 | (uint32_t)(pad < 1 ? v[3] : 0);
        d[n++] = (uint8_t)(w >> 16);
        if (pad < 2)
            d[n++] = (uint8_t)(w >> 8);
        if (pad < 1)
            d[n++] = (uint8_t)w;
    }
    d[n] = 0;
    *out = d;
    *out_len = n;
    return 0;
}

int codec_int(const json_t *obj, const char *name, int64_t *out)
{
    const json_t *v = json_object_get(obj, name);
    *out = 0;
    if (!v)
        return 0;
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 0;
    }
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 20)
        return -1;
    const char *s = json_string_value(v);
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end || (*s != '-' && (*s < '0' || *s > '9')))
        return -1;
    *out = x;
    return 0;
}

json_t *codec_prefix_end(const uint8_t *key, size_t len)
{
    uint8_t *end = malloc(len ? len : 1);
    if (!end)
        return NULL;
    memcpy(end, key, len);
    size_t n = len;
    while (n > 0 && end[n - 1] == 0xff)
        n--;
    json_t *j;
    if (n == 0) { /* every key: "\0" */
        end[0] = 0;
        j = codec_b64(end, 1);
    } else {
        end[n - 1]++;
        j = codec_b64(end, n);
    }
    free(end);
    return j;
}

/* Decodes a base64 field; the bytes are owned by `arena`. */
static int field_bytes(const json_t *o, const char *name, const uint8_t **p, size_t *n,
                       json_t *arena)
{
    const json_t *v = json_object_get(o, name);
    *p = (const uint8_t *)"";
    *n = 0;
    if (!v)
        return 0;
    if (!json_is_string(v))
        return -1;
    uint8_t *d;
    if (codec_unb64(json_string_value(v), json_string_length(v), &d, n) < 0)
        return -1;
    json_t *s = json_stringn_nocheck((const char *)d, *n);
    free(d);
    if (!s || json_array_append_new(arena, s) < 0)
        return -1;
    *p = (const uint8_t *)json_string_value(s);
    return 0;
}

int codec_kv(const json_t *o, etcd_kv *kv, json_t *arena)
{
    memset(kv, 0, sizeof(*kv));
    if (!json_is_object(o))
        return -1;
    if (field_bytes(o, "key", &kv->key, &kv->key_len, arena) < 0 ||
        field_bytes(o, "value", &kv->value, &kv->value_len, arena) < 0)
        return -1;
    if (codec_int(o, "create_revision", &kv->create_revision) < 0 ||
        codec_int(o, "mod_revision", &kv->mod_revision) < 0 ||
        codec_int(o, "version", &kv->version) < 0 || codec_int(o, "lease", &kv->lease) < 0)
        return -1;
    return 0;
}

static int add_kvs(const json_t *arr, etcd_result *r, json_t *arena)
{
    if (!arr)
        return 0;
    if (!json_is_array(arr))
        return -1;
    size_t n = json_array_size(arr);
    if (n == 0)
        return 0;
    etcd_kv *kvs = realloc((void *)r->kvs, (r->n_kvs + n) * sizeof(*kvs));
    if (!kvs)
        return -1;
    r->kvs = kvs;
    for (size_t i = 0; i < n; i++)
        if (codec_kv(json_array_get(arr, i), &kvs[r->n_kvs++], arena) < 0)
            return -1;
    return 0;
}

/* {"error":"text","code":5} (unary) or {"error":{"grpc_code":..,"message":..}} (stream). */
static bool server_error(const json_t *root, int http_status, etcd_result *r, json_t *arena)
{
    const json_t *e = json_object_get(root, "error");
    if (!e && http_status >= 200 && http_status < 300)
        return false;
    const json_t *src = json_is_object(e) ? e : root;
    const json_t *m = json_object_get(src, "message");
    int64_t code;
    if (codec_int(src, json_is_object(e) ? "grpc_code" : "code", &code) < 0)
        code = 0;
    r->status = ETCD_SERVER;
    r->grpc_code = (int)code;
    json_t *text = json_string(json_is_string(m) ? json_string_value(m) : "etcd error");
    if (text && json_array_append_new(arena, text) == 0)
        r->message = json_string_value(text);
    return true;
}

static int decode_body(const json_t *o, etcd_result *r, json_t *arena)
{
    const json_t *hdr = json_object_get(o, "header");
    if (hdr && codec_int(hdr, "revision", &r->revision) < 0)
        return -1;
    const json_t *ok = json_object_get(o, "succeeded");
    r->succeeded = json_is_true(ok);
    if (add_kvs(json_object_get(o, "kvs"), r, arena) < 0 || codec_int(o, "count", &r->count) < 0 ||
        codec_int(o, "deleted", &r->deleted) < 0 || codec_int(o, "ID", &r->lease_id) < 0 ||
        codec_int(o, "TTL", &r->ttl) < 0)
        return -1;
    const json_t *resps = json_object_get(o, "responses");
    if (resps && !json_is_array(resps))
        return -1;
    for (size_t i = 0; i < json_array_size(resps); i++) {
        const json_t *rr = json_object_get(json_array_get(resps, i), "response_range");
        if (rr && add_kvs(json_object_get(rr, "kvs"), r, arena) < 0)
            return -1;
    }
    return 0;
}

void codec_result(const char *msg, size_t len, int http_status, etcd_result *r, json_t **keep)
{
    memset(r, 0, sizeof(*r));
    r->message = "";
    *keep = json_array();
    json_t *root = *keep ? json_loadb(msg, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
    if (!root || !json_is_object(root)) {
        r->status = ETCD_PROTOCOL;
        r->message = "reply is not a JSON object";
    } else if (!server_error(root, http_status, r, *keep)) {
        const json_t *res = json_object_get(root, "result"); /* a stream's message */
        if (decode_body(json_is_object(res) ? res : root, r, *keep) < 0) {
            free((void *)r->kvs); /* nothing half-decoded reaches a caller */
            memset(r, 0, sizeof(*r));
            r->status = ETCD_PROTOCOL;
            r->message = "malformed reply";
        }
    }
    json_decref(root);
}

void codec_result_free(etcd_result *r, json_t *keep)
{
    free((void *)r->kvs);
    r->kvs = NULL;
    r->n_kvs = 0;
    json_decref(keep);
}
