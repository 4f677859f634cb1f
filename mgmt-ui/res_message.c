/* Messages over HTTP: POST /api/exchanges/{vhost}/{name}/publish and
 * POST /api/queues/{vhost}/{name}/get, with RabbitMQ's body fields,
 * property names, payload encodings and error texts. Properties go
 * between JSON and AMQP through one table of string properties plus the
 * few numeric ones; headers use the table conversion.
 */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt_int.h"

#define PROP_OFF(f) offsetof(amqp_basic_properties, f)
/* Encoded properties: a headers table of up to MGMT_TABLE_MAX and the rest. */
#define PROPS_MAX (MGMT_TABLE_MAX + 6 * 1024)

static const struct {
    const char *name;
    uint16_t flag;
    size_t off;
} str_props[] = {
    {"content_type", AMQP_BASIC_CONTENT_TYPE_FLAG, PROP_OFF(content_type)},
    {"content_encoding", AMQP_BASIC_CONTENT_ENCODING_FLAG, PROP_OFF(content_encoding)},
    {"correlation_id", AMQP_BASIC_CORRELATION_ID_FLAG, PROP_OFF(correlation_id)},
    {"reply_to", AMQP_BASIC_REPLY_TO_FLAG, PROP_OFF(reply_to)},
    {"expiration", AMQP_BASIC_EXPIRATION_FLAG, PROP_OFF(expiration)},
    {"message_id", AMQP_BASIC_MESSAGE_ID_FLAG, PROP_OFF(message_id)},
    {"type", AMQP_BASIC_TYPE_FLAG, PROP_OFF(type)},
    {"user_id", AMQP_BASIC_USER_ID_FLAG, PROP_OFF(user_id)},
    {"app_id", AMQP_BASIC_APP_ID_FLAG, PROP_OFF(app_id)},
    {"cluster_id", AMQP_BASIC_CLUSTER_ID_FLAG, PROP_OFF(cluster_id)},
};
#define NSTR (sizeof str_props / sizeof str_props[0])

/* ---- JSON -> properties ------------------------------------------------- */

static bool int_prop(mgmt_req *r, json_t *props, const char *key, uint64_t max, uint64_t *out,
                     bool *present)
{
    json_t *v = json_object_get(props, key);
    *present = v != NULL;
    if (!v)
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max) {
        mgmt_bad_value(r, "not_int", NULL, key);
        return false;
    }
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static bool string_props(mgmt_req *r, json_t *props, amqp_basic_properties *p)
{
    for (size_t i = 0; i < NSTR; i++) {
        json_t *v = json_object_get(props, str_props[i].name);
        if (!v)
            continue;
        if (!json_is_string(v) || json_string_length(v) > 255) {
            mgmt_bad_value(r, "not_string", NULL, str_props[i].name);
            return false;
        }
        *(amqp_bytes *)((char *)p + str_props[i].off) =
            (amqp_bytes){(const uint8_t *)json_string_value(v), (uint32_t)json_string_length(v)};
        p->flags |= str_props[i].flag;
    }
    return true;
}

/* Encodes the "properties" object; replies 400 and returns 0 on error. */
static size_t encode_props(mgmt_req *r, json_t *props, uint8_t *buf, size_t cap, uint8_t *hbuf,
                           size_t hcap)
{
    amqp_basic_properties p = {0};
    uint64_t dm = 0, prio = 0, ts = 0;
    bool has_dm, has_prio, has_ts;
    if (!int_prop(r, props, "delivery_mode", 255, &dm, &has_dm) ||
        !int_prop(r, props, "priority", 255, &prio, &has_prio) ||
        !int_prop(r, props, "timestamp", UINT64_MAX, &ts, &has_ts) || !string_props(r, props, &p))
        return 0;
    p.flags |= (has_dm ? AMQP_BASIC_DELIVERY_MODE_FLAG : 0) |
               (has_prio ? AMQP_BASIC_PRIORITY_FLAG : 0) | (has_ts ? AMQP_BASIC_TIMESTAMP_FLAG : 0);
    p.delivery_mode = (uint8_t)dm, p.priority = (uint8_t)prio, p.timestamp = ts;
    if (json_object_get(props, "headers")) {
        if (!mgmt_body_table(r, props, "headers", hbuf, hcap, &p.headers))
            return 0;
        p.flags |= AMQP_BASIC_HEADERS_FLAG;
    }
    size_t n = amqp_properties_encode(&p, buf, cap);
    if (!n)
        mgmt_error(r, 400, "bad_request", "properties too large");
    return n;
}

/* ---- publish ------------------------------------------------------------ */

/* RabbitMQ lists every missing key: "[{key_missing,properties},...]". */
static bool keys_present(mgmt_req *r, json_t *body, const char *const *keys, size_t n)
{
    char reason[256] = "[";
    for (size_t i = 0; i < n; i++)
        if (!json_object_get(body, keys[i])) {
            size_t len = strlen(reason);
            snprintf(reason + len, sizeof reason - len, "%s{key_missing,%s}", len > 1 ? "," : "",
                     keys[i]);
        }
    if (reason[1] == 0)
        return true;
    strcat(reason, "]");
    mgmt_error(r, 400, "bad_request", reason);
    return false;
}

static int b64val(char c)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c ? strchr(a, c) : NULL;
    return p ? (int)(p - a) : -1;
}

/* Strict base64 (padding required as RabbitMQ's decoder wants it). */
static long base64_decode(const char *in, size_t n, uint8_t *out)
{
    if (n % 4)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++)
            v[j] = in[i + j] == '=' && i + 4 == n && j >= 2 ? 0 : b64val(in[i + j]);
        if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0 || (in[i + 2] == '=' && in[i + 3] != '='))
            return -1;
        uint32_t x = (uint32_t)(v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3]);
        out[o++] = (uint8_t)(x >> 16);
        if (in[i + 2] != '=')
            out[o++] = (uint8_t)(x >> 8);
        if (in[i + 3] != '=')
            out[o++] = (uint8_t)x;
    }
    return (long)o;
}

/* The payload as bytes; base64 ones decoded into *owned. */
static bool payload_of(mgmt_req *r, json_t *body, amqp_bytes *out, uint8_t **owned)
{
    json_t *pl = json_object_get(body, "payload"), *enc = json_object_get(body, "payload_encoding");
    const char *e = json_is_string(enc) ? json_string_value(enc) : "";
    if (!json_is_string(pl)) {
        mgmt_bad_value(r, "not_string", NULL, "payload");
        return false;
    }
    const char *s = json_string_value(pl);
    size_t n = json_string_length(pl);
    if (strcmp(e, "string") == 0) {
        *out = (amqp_bytes){(const uint8_t *)s, (uint32_t)n};
        return true;
    }
    long len = -1;
    if (strcmp(e, "base64") == 0 && (*owned = malloc(n / 4 * 3 + 3)))
        len = base64_decode(s, n, *owned);
    if (len < 0) {
        free(*owned);
        *owned = NULL;
        if (strcmp(e, "base64") == 0)
            mgmt_bad_value(r, "not_base64", pl, NULL);
        else
            mgmt_bad_value(r, "unknown_payload_encoding", enc, NULL);
        return false;
    }
    *out = (amqp_bytes){*owned, (uint32_t)len};
    return true;
}

/* Write on the exchange; refused as RabbitMQ's channel refuses it (400
 * with the AMQP text), or 401 "Access refused." without any permission in
 * the vhost (its connection would not open). */
static bool publish_allowed(mgmt_req *r, vhost *v, amqp_bytes ex)
{
    int p = mgmt_permission(r, v, ACCESS_WRITE, ex);
    if (p < 0)
        mgmt_error(r, 401, "not_authorised", "Access refused.");
    amqp_bytes shown = ex.len ? ex : AMQP_CSTR("amq.default");
    if (!p)
        mgmt_errorf(r, 400, "bad_request",
                    "403 ACCESS_REFUSED - access to exchange '%.*s' in vhost '%s' refused for "
                    "user '%s'", (int)shown.len, (const char *)shown.ptr, vhost_name(v),
                    r->user.name);
    return p > 0;
}

/* Read on the queue; RabbitMQ refuses it with 401 either way, with the
 * channel's text when the user has permissions in the vhost. */
static bool get_allowed(mgmt_req *r, vhost *v, amqp_bytes q)
{
    if (!vhost_queue_find(v, q)) { /* RabbitMQ keeps the code name in this one's reason */
        mgmt_errorf(r, 404, "not_found", "NOT_FOUND - no queue '%.*s' in vhost '%s'", (int)q.len,
                    (const char *)q.ptr, vhost_name(v));
        return false;
    }
    int p = mgmt_permission(r, v, ACCESS_READ, q);
    if (p < 0)
        mgmt_error(r, 401, "not_authorised", "Access refused.");
    else if (!p)
        mgmt_errorf(r, 401, "not_authorised",
                    "ACCESS_REFUSED - access to queue '%.*s' in vhost '%s' refused for user '%s'",
                    (int)q.len, (const char *)q.ptr, vhost_name(v), r->user.name);
    return p > 0;
}

void mgmt_post_publish(mgmt_req *r)
{
    static const char *const keys[] = {"properties", "routing_key", "payload", "payload_encoding"};
    vhost *v = mgmt_vhost_arg(r, 0);
    json_t *body = v ? mgmt_body(r) : NULL;
    if (!body || !keys_present(r, body, keys, 4))
        return;
    json_t *props = json_object_get(body, "properties"), *rk = json_object_get(body, "routing_key");
    uint8_t *pbuf = mgmt_scratch(r, PROPS_MAX + MGMT_TABLE_MAX);
    if (!pbuf)
        return;
    uint8_t *hbuf = pbuf + PROPS_MAX;
    size_t plen = json_is_object(props) ? encode_props(r, props, pbuf, PROPS_MAX, hbuf, MGMT_TABLE_MAX)
                                        : (mgmt_bad_value(r, "not_object", NULL, "properties"), 0);
    amqp_bytes payload;
    uint8_t *owned = NULL;
    if (!plen || !payload_of(r, body, &payload, &owned))
        return;
    amqp_bytes key = json_is_string(rk) ? (amqp_bytes){(const uint8_t *)json_string_value(rk),
                                                       (uint32_t)json_string_length(rk)}
                                        : AMQP_CSTR("");
    amqp_bytes ex = amqp_bytes_equal_cstr(r->cap[1], "amq.default") ? AMQP_CSTR("") : r->cap[1];
    if (!publish_allowed(r, v, ex)) {
        free(owned);
        return;
    }
    bool routed = false;
    amqp_error err = {0};
    int rc = key.len > 255 ? amqp_fail(&err, AMQP_PRECONDITION_FAILED, 0, "routing key too long")
                           : admin_publish(v, r->user.name, ex, key, (amqp_bytes){pbuf, (uint32_t)plen},
                                           payload, &routed, &err);
    free(owned);
    if (rc != AMQP_OK) {
        mgmt_errorf(r, 400, "bad_request", "%u %s", err.code, err.text);
        return;
    }
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_obj(w);
    mgmt_json_kbool(w, "routed", routed);
    mgmt_json_end_obj(w);
    mgmt_send(r, 200);
}

/* ---- get ---------------------------------------------------------------- */

static void props_json(mgmt_json *w, amqp_bytes raw)
{
    amqp_basic_properties p;
    mgmt_json_obj(w);
    if (raw.len >= 2 && amqp_properties_decode(raw, &p, NULL) == AMQP_OK) {
        for (size_t i = 0; i < NSTR; i++)
            if (p.flags & str_props[i].flag)
                mgmt_json_kbytes(w, str_props[i].name,
                                 *(const amqp_bytes *)((const char *)&p + str_props[i].off));
        if (p.flags & AMQP_BASIC_PRIORITY_FLAG)
            mgmt_json_kuint(w, "priority", p.priority);
        if (p.flags & AMQP_BASIC_DELIVERY_MODE_FLAG)
            mgmt_json_kuint(w, "delivery_mode", p.delivery_mode);
        if (p.flags & AMQP_BASIC_TIMESTAMP_FLAG)
            mgmt_json_kuint(w, "timestamp", p.timestamp);
        if (p.flags & AMQP_BASIC_HEADERS_FLAG) {
            mgmt_json_key(w, "headers");
            mgmt_json_table(w, p.headers);
        }
    }
    mgmt_json_end_obj(w);
}

static bool valid_utf8(const uint8_t *p, size_t n)
{
    json_t *s = json_stringn((const char *)p, n); /* jansson checks UTF-8 */
    if (s)
        json_decref(s);
    return s != NULL;
}

static void base64_json(mgmt_json *w, const uint8_t *p, size_t n)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc(n / 3 * 4 + 5);
    size_t o = 0;
    for (size_t i = 0; out && i < n; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16 | (i + 1 < n ? p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        out[o++] = a[x >> 18];
        out[o++] = a[(x >> 12) & 63];
        out[o++] = i + 1 < n ? a[(x >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? a[x & 63] : '=';
    }
    mgmt_json_bytes(w, (amqp_bytes){(const uint8_t *)(out ? out : ""), (uint32_t)o});
    free(out);
}

typedef struct get_ctx {
    mgmt_json *w;
    bool base64;
    size_t truncate; /* SIZE_MAX = none */
} get_ctx;

void mgmt_message_fields(mgmt_json *w, msg *m, bool base64, size_t truncate)
{
    uint64_t size = msg_body_size(m);
    size_t shown = size < truncate ? (size_t)size : truncate;
    bool as_string = !base64 && valid_utf8(msg_body(m), shown);
    mgmt_json_kuint(w, "payload_bytes", size);
    mgmt_json_kbytes(w, "exchange", msg_exchange(m));
    mgmt_json_kbytes(w, "routing_key", msg_routing_key(m));
    mgmt_json_key(w, "properties");
    props_json(w, msg_properties(m));
    mgmt_json_key(w, "payload");
    if (as_string)
        mgmt_json_bytes(w, (amqp_bytes){msg_body(m), (uint32_t)shown});
    else
        base64_json(w, msg_body(m), shown);
    mgmt_json_kstr(w, "payload_encoding", as_string ? "string" : "base64");
}

static void show_message(void *arg, msg *m, bool redelivered, uint32_t remaining)
{
    get_ctx *g = arg;
    mgmt_json_obj(g->w);
    mgmt_json_kbool(g->w, "redelivered", redelivered);
    mgmt_json_kuint(g->w, "message_count", remaining);
    mgmt_message_fields(g->w, m, g->base64, g->truncate);
    mgmt_json_end_obj(g->w);
}

static bool ackmode_of(mgmt_req *r, const char *s, admin_ackmode *mode)
{
    static const struct { const char *name; admin_ackmode mode; } modes[] = {
        {"ack_requeue_true", ADMIN_REQUEUE}, {"reject_requeue_true", ADMIN_REQUEUE},
        {"ack_requeue_false", ADMIN_ACK},    {"reject_requeue_false", ADMIN_REJECT},
    };
    for (size_t i = 0; s && i < 4; i++)
        if (strcmp(s, modes[i].name) == 0)
            return *mode = modes[i].mode, true;
    mgmt_error(r, 400, "bad_request",
               "Unsupported ackmode. Please use ack_requeue_true, ack_requeue_false, "
               "reject_requeue_true or reject_requeue_false.");
    return false;
}

void mgmt_post_get(mgmt_req *r)
{
    static const char *const keys[] = {"count", "ackmode", "encoding"};
    vhost *v = mgmt_vhost_arg(r, 0);
    json_t *body = v ? mgmt_body(r) : NULL;
    if (!body || !keys_present(r, body, keys, 3))
        return;
    const char *enc = json_string_value(json_object_get(body, "encoding"));
    json_t *count = json_object_get(body, "count"), *trunc = json_object_get(body, "truncate");
    admin_ackmode mode;
    if (!enc || (strcmp(enc, "auto") != 0 && strcmp(enc, "base64") != 0)) {
        mgmt_error(r, 400, "bad_request", "Unsupported encoding. Please use auto or base64.");
        return;
    }
    if (!ackmode_of(r, json_string_value(json_object_get(body, "ackmode")), &mode) ||
        !get_allowed(r, v, r->cap[1]))
        return;
    json_int_t n = json_is_integer(count) ? json_integer_value(count)
                   : json_is_string(count) ? strtoll(json_string_value(count), NULL, 10) : -1;
    if (n < 0 || n > 100000) {
        mgmt_bad_value(r, "not_int", NULL, "count");
        return;
    }
    get_ctx g = {.w = mgmt_reply(r), .base64 = strcmp(enc, "base64") == 0, .truncate = SIZE_MAX};
    if (json_is_integer(trunc) && json_integer_value(trunc) >= 0)
        g.truncate = (size_t)json_integer_value(trunc);
    mgmt_json_arr(g.w);
    amqp_error err = {0};
    if (admin_get(v, r->cap[1], (uint32_t)n, mode, show_message, &g, &err) < 0) {
        if (err.code == AMQP_NOT_IMPLEMENTED) /* a stream: RabbitMQ shows its channel's close */
            mgmt_errorf(r, 400, "bad_request", "%d %s", err.code, mgmt_error_text(&err));
        else
            mgmt_amqp_error(r, &err);
        return;
    }
    mgmt_json_end_arr(g.w);
    mgmt_send(r, 200);
}
