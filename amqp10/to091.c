/* AMQP 1.0 -> 0-9-1, as RabbitMQ 3.10.8 delivers a stream entry to an AMQP
 * 0-9-1 consumer: rabbit_stream_queue:binary_to_msg (x-exchange and
 * x-routing-key from the message annotations), rabbit_msg_record:to_amqp091,
 * then rabbit_basic:add_header of x-stream-offset, whose set_table_value
 * sorts the headers by key (lists:keysort: stable, byte order).
 *
 *   properties.message-id,    uuid -> "8-4-4-4-12" hex + x-message-id-type
 *   correlation-id               "uuid"; ulong -> decimal + "ulong"; binary ->
 *                                base64 + "binary", or over 256 base64 bytes
 *                                the raw bytes in an x-message-id header
 *                                (x-correlation-id) and no property; utf8 over
 *                                256 bytes the same; else as is
 *   user-id, reply-to, content-type, content-encoding  as is
 *   creation-time             timestamp, ms / 1000 (truncated)
 *   app-props x-basic-type,   type, app-id (the first of each, utf8 keys);
 *     x-basic-app-id          the rest become headers, each type to its
 *                             0-9-1 tag (utf8 S, long l, int I, uint i, ...)
 *   msg-annotations           x-basic-priority, x-basic-delivery-mode,
 *                             x-basic-expiration (symbol keys)
 * Then rabbit_basic:message refuses a delivery-mode other than 1 or 2 and a
 * CC or BCC header that is not an array (none here can be one).
 * Header order before the sort: x-correlation-id*, x-message-id*, then the
 * application properties; x-stream-offset replaces the first header of that
 * name or goes last. Where RabbitMQ crashes (the consumer's connection gets
 * 541), this returns AMQP10_UNSUPPORTED.
 *
 * The sort needs no allocation: the application properties' offsets are
 * heap-sorted in scratch space at the end of the caller's buffer, and the
 * (at most three) made-up headers merged in; every header's position breaks
 * ties, so the order is the stable one RabbitMQ gives.
 */
#include <math.h>
#include <stdio.h>

#include "amqp10_int.h"

#define SHORTSTR_MAX 255
/* RabbitMQ moves an id to a header when it is longer than this */
#define ID_HEADER_OVER 256

static bool is_integer(const amqp10_value *v)
{
    return v->type >= AMQP10_UBYTE && v->type <= AMQP10_LONG;
}

/* An integer or timestamp value's bits (as Erlang's <<V:64>> keeps them). */
static uint64_t integer(const amqp10_value *v)
{
    return v->type >= AMQP10_BYTE ? (uint64_t)v->v.i : v->v.u;
}

/* A shortstr property from a text value: false when it cannot be one. */
static bool shortstr(const amqp10_value *v, uint16_t flag, amqp_bytes *out, uint16_t *flags)
{
    if (v->type == AMQP10_NULL)
        return true;
    if (!is_text(v) || v->v.bytes.len > SHORTSTR_MAX)
        return false;
    *out = v->v.bytes;
    *flags |= flag;
    return true;
}

/* Walks a map for a key of `type` named `name`: its value and the key's
 * offset in the items. `strict`: any non-symbol key met first is
 * unsupported (RabbitMQ's message_annotation/3 search crashes on it). */
static int map_find(const amqp10_value *map, amqp10_type type, const char *name, bool strict,
                    amqp10_value *value, uint32_t *at)
{
    amqp10_iter it;
    amqp10_value k;
    if (map->type != AMQP10_MAP)
        return AMQP10_END;
    amqp10_iter_init(&it, map);
    for (;;) {
        uint32_t off = (uint32_t)it.off;
        if (amqp10_next(&it, &k) != AMQP10_OK || amqp10_next(&it, value) != AMQP10_OK)
            return AMQP10_END;
        if (strict && k.type != AMQP10_SYMBOL)
            return AMQP10_UNSUPPORTED;
        if (k.type == type && amqp10_value_is(&k, name)) {
            if (at)
                *at = off;
            return AMQP10_OK;
        }
    }
}

/* An octet property from an annotation: its integer's bits in *bits (the
 * property is their low byte: RabbitMQ writes <<V:8>>, truncating). */
static int annotation_octet(const amqp10_value *ma, const char *name, uint16_t flag,
                            uint64_t *bits, uint16_t *flags)
{
    amqp10_value v;
    if (map_find(ma, AMQP10_SYMBOL, name, false, &v, NULL) != AMQP10_OK)
        return AMQP10_OK;
    if (!is_integer(&v) && v.type != AMQP10_TIMESTAMP)
        return AMQP10_UNSUPPORTED;
    *bits = integer(&v);
    *flags |= flag;
    return AMQP10_OK;
}

static void base64(amqp_bytes in, char *out)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < in.len; i += 3) {
        uint32_t n = (uint32_t)in.ptr[i] << 16;
        if (i + 1 < in.len)
            n |= (uint32_t)in.ptr[i + 1] << 8;
        if (i + 2 < in.len)
            n |= in.ptr[i + 2];
        out[o++] = abc[n >> 18 & 63];
        out[o++] = abc[n >> 12 & 63];
        out[o++] = i + 1 < in.len ? abc[n >> 6 & 63] : '=';
        out[o++] = i + 2 < in.len ? abc[n & 63] : '=';
    }
    out[o] = 0;
}

/* rabbit_msg_record:message_id/3 for message-id (which 0) or
 * correlation-id (1): the property, or a header in c->syn. */
static int message_id(amqp10_conv *c, const amqp10_value *v, int which)
{
    static const char *const type_key[] = {"x-message-id-type", "x-correlation-id-type"};
    static const char *const raw_key[] = {"x-message-id", "x-correlation-id"};
    static const uint16_t flag[] = {AMQP_BASIC_MESSAGE_ID_FLAG, AMQP_BASIC_CORRELATION_ID_FLAG};
    amqp_bytes *prop = which ? &c->p.correlation_id : &c->p.message_id;
    char *text = c->id_text[which];
    const char *type = NULL;
    if (v->type == AMQP10_UUID) {
        const uint8_t *u = v->v.bytes.ptr;
        snprintf(text, ID_HEADER_OVER, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
                 u[13], u[14], u[15]);
        type = "uuid";
    } else if (v->type == AMQP10_ULONG) {
        snprintf(text, ID_HEADER_OVER, "%llu", (unsigned long long)v->v.u);
        type = "ulong";
    } else if ((v->type == AMQP10_BINARY && (v->v.bytes.len + 2) / 3 * 4 > ID_HEADER_OVER) ||
               (v->type == AMQP10_STRING && v->v.bytes.len > ID_HEADER_OVER)) {
        c->syn[c->nsyn++] = (amqp10_synth){AMQP_CSTR(raw_key[which]), v->v.bytes, (uint64_t)(1 - which)};
        return AMQP10_OK;
    } else if (v->type == AMQP10_BINARY) {
        base64(v->v.bytes, text);
        type = "binary";
    } else {
        return shortstr(v, flag[which], prop, &c->p.flags) ? AMQP10_OK : AMQP10_UNSUPPORTED;
    }
    *prop = AMQP_CSTR(text);
    c->p.flags |= flag[which];
    c->syn[c->nsyn++] = (amqp10_synth){AMQP_CSTR(type_key[which]), AMQP_CSTR(type), (uint64_t)(1 - which)};
    return prop->len <= SHORTSTR_MAX ? AMQP10_OK : AMQP10_UNSUPPORTED;
}

static int properties(amqp10_conv *c, const amqp10_message *m)
{
    const amqp10_value *f = m->property_fields;
    amqp_basic_properties *p = &c->p;
    if (message_id(c, &f[AMQP10_P_CORRELATION_ID], 1) != AMQP10_OK ||
        message_id(c, &f[AMQP10_P_MESSAGE_ID], 0) != AMQP10_OK ||
        !shortstr(&f[AMQP10_P_USER_ID], AMQP_BASIC_USER_ID_FLAG, &p->user_id, &p->flags) ||
        !shortstr(&f[AMQP10_P_REPLY_TO], AMQP_BASIC_REPLY_TO_FLAG, &p->reply_to, &p->flags) ||
        !shortstr(&f[AMQP10_P_CONTENT_TYPE], AMQP_BASIC_CONTENT_TYPE_FLAG, &p->content_type,
                  &p->flags) ||
        !shortstr(&f[AMQP10_P_CONTENT_ENCODING], AMQP_BASIC_CONTENT_ENCODING_FLAG,
                  &p->content_encoding, &p->flags))
        return AMQP10_UNSUPPORTED;
    const amqp10_value *ts = &f[AMQP10_P_CREATION_TIME];
    if (ts->type == AMQP10_TIMESTAMP || is_integer(ts)) {
        /* Erlang's div truncates towards zero, as C's / does */
        p->timestamp = ts->type >= AMQP10_BYTE ? (uint64_t)(ts->v.i / 1000) : ts->v.u / 1000;
        p->flags |= AMQP_BASIC_TIMESTAMP_FLAG;
    } else if (ts->type != AMQP10_NULL) {
        return AMQP10_UNSUPPORTED;
    }
    return AMQP10_OK;
}

/* x-basic-* from the annotations and application properties. */
static int basic_extras(amqp10_conv *c, const amqp10_message *m)
{
    const amqp10_value *ma = &m->message_annotations_map;
    amqp_basic_properties *p = &c->p;
    amqp10_value v = {0};
    uint64_t priority = 0, mode = 0;
    if (annotation_octet(ma, "x-basic-priority", AMQP_BASIC_PRIORITY_FLAG, &priority, &p->flags) ||
        annotation_octet(ma, "x-basic-delivery-mode", AMQP_BASIC_DELIVERY_MODE_FLAG, &mode,
                         &p->flags))
        return AMQP10_UNSUPPORTED;
    /* rabbit_basic:is_message_persistent throws on any mode but 1 and 2 */
    if ((p->flags & AMQP_BASIC_DELIVERY_MODE_FLAG) && mode != 1 && mode != 2)
        return AMQP10_UNSUPPORTED;
    p->priority = (uint8_t)priority;
    p->delivery_mode = (uint8_t)mode;
    if (map_find(ma, AMQP10_SYMBOL, "x-basic-expiration", false, &v, NULL) == AMQP10_OK &&
        (v.type == AMQP10_NULL ||
         !shortstr(&v, AMQP_BASIC_EXPIRATION_FLAG, &p->expiration, &p->flags)))
        return AMQP10_UNSUPPORTED;
    static const char *const keys[] = {"x-basic-type", "x-basic-app-id"};
    static const uint16_t flags[] = {AMQP_BASIC_TYPE_FLAG, AMQP_BASIC_APP_ID_FLAG};
    amqp_bytes *props[] = {&p->type, &p->app_id};
    for (int i = 0; i < 2; i++) {
        c->skip[i] = AMQP10_CONV_NONE;
        if (map_find(&c->ap, AMQP10_STRING, keys[i], false, &v, &c->skip[i]) == AMQP10_OK &&
            (v.type == AMQP10_NULL || !shortstr(&v, flags[i], props[i], &p->flags)))
            return AMQP10_UNSUPPORTED;
    }
    return AMQP10_OK;
}

/* x-exchange or x-routing-key, as rabbit_stream_queue:binary_to_msg reads
 * it ({utf8, V} = message_annotation(...)): *out untouched when absent. */
static int routing_annotation(const amqp10_value *ma, const char *name, amqp_bytes *out)
{
    amqp10_value v;
    int rc = map_find(ma, AMQP10_SYMBOL, name, true, &v, NULL);
    if (rc == AMQP10_OK) {
        if (v.type != AMQP10_STRING)
            return AMQP10_UNSUPPORTED;
        *out = v.v.bytes;
    }
    return rc == AMQP10_UNSUPPORTED ? rc : AMQP10_OK;
}

int amqp10_to_091(const amqp10_message *m, int64_t stream_offset, amqp_writer *w,
                  amqp10_as_091 *out)
{
    amqp10_conv c;
    int rc;
    if (m->body_kind != AMQP10_BODY_DATA || m->header.len || m->delivery_annotations.len ||
        m->footer.len)
        return AMQP10_UNSUPPORTED;
    memset(&c, 0, sizeof c);
    c.ap = m->application_properties_map;
    c.stream_offset = stream_offset;
    out->body = m->data;
    out->exchange = (amqp_bytes){(const uint8_t *)"", 0};
    out->routing_key = (amqp_bytes){NULL, 0};
    if (routing_annotation(&m->message_annotations_map, "x-exchange", &out->exchange) ||
        routing_annotation(&m->message_annotations_map, "x-routing-key", &out->routing_key))
        return AMQP10_UNSUPPORTED;
    if (properties(&c, m) != AMQP10_OK || basic_extras(&c, m) != AMQP10_OK)
        return AMQP10_UNSUPPORTED;
    size_t start = w->len;
    if ((rc = amqp10_conv_write(&c, w)) != AMQP10_OK)
        return rc;
    out->properties = (amqp_bytes){w->buf + start, (uint32_t)(w->len - start)};
    return AMQP10_OK;
}
