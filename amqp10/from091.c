/* AMQP 0-9-1 -> 1.0, as RabbitMQ 3.10.8 stores a 0-9-1 message in a stream:
 * rabbit_msg_record:from_amqp091 and to_iodata, after rabbit_stream_queue's
 * msg_to_iodata has added the x-exchange and x-routing-key annotations.
 * The output is checked byte for byte against RabbitMQ's own (the test
 * vectors in tests/unit/test_amqp10_rabbit.c).
 *
 *   message-annotations  x-routing-key, x-exchange (utf8; first because
 *                        RabbitMQ prepends them, in maps:fold's key order),
 *                        x-basic-priority, x-basic-delivery-mode (ubyte),
 *                        x-basic-expiration (utf8); keys are symbols
 *   properties           message-id, user-id (binary), reply-to,
 *                        correlation-id (utf8), content-type,
 *                        content-encoding (symbol), creation-time (timestamp
 *                        * 1000): all 13 fields, absent ones null; the
 *                        section is left out when all are absent
 *   application-props    x-basic-type, x-basic-app-id, then the headers in
 *                        their order (tables and arrays dropped); keys utf8;
 *                        left out when empty
 *   data                 the body
 * cluster-id has no place and is dropped, as RabbitMQ drops it.
 */
#include "amqp10_int.h"

static amqp_bytes sym(const char *s)
{
    return AMQP_CSTR(s);
}

static void message_annotations(const amqp_basic_properties *p, amqp_bytes exchange,
                                amqp_bytes routing_key, amqp_writer *w)
{
    uint32_t n = 4;
    amqp10_put_descriptor(w, AMQP10_SEC_MESSAGE_ANNOTATIONS);
    size_t mark = amqp10_compound_begin(w);
    amqp10_put_symbol(w, sym("x-routing-key"));
    amqp10_put_string(w, routing_key);
    amqp10_put_symbol(w, sym("x-exchange"));
    amqp10_put_string(w, exchange);
    if (p->flags & AMQP_BASIC_PRIORITY_FLAG) {
        amqp10_put_symbol(w, sym("x-basic-priority"));
        amqp10_put_ubyte(w, p->priority);
        n += 2;
    }
    if (p->flags & AMQP_BASIC_DELIVERY_MODE_FLAG) {
        amqp10_put_symbol(w, sym("x-basic-delivery-mode"));
        amqp10_put_ubyte(w, p->delivery_mode);
        n += 2;
    }
    if (p->flags & AMQP_BASIC_EXPIRATION_FLAG) {
        amqp10_put_symbol(w, sym("x-basic-expiration"));
        amqp10_put_string(w, p->expiration);
        n += 2;
    }
    amqp10_map_end(w, mark, n);
}

static void put_or_null(amqp_writer *w, uint16_t flags, uint16_t flag, amqp_bytes v,
                        void (*put)(amqp_writer *, amqp_bytes))
{
    if (flags & flag)
        put(w, v);
    else
        amqp10_put_null(w);
}

static void properties(const amqp_basic_properties *p, amqp_writer *w)
{
    const uint16_t mapped = AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_USER_ID_FLAG |
                            AMQP_BASIC_REPLY_TO_FLAG | AMQP_BASIC_CORRELATION_ID_FLAG |
                            AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_CONTENT_ENCODING_FLAG |
                            AMQP_BASIC_TIMESTAMP_FLAG;
    if (!(p->flags & mapped))
        return;
    amqp10_put_descriptor(w, AMQP10_SEC_PROPERTIES);
    size_t mark = amqp10_compound_begin(w);
    put_or_null(w, p->flags, AMQP_BASIC_MESSAGE_ID_FLAG, p->message_id, amqp10_put_string);
    put_or_null(w, p->flags, AMQP_BASIC_USER_ID_FLAG, p->user_id, amqp10_put_binary);
    amqp10_put_null(w); /* to */
    amqp10_put_null(w); /* subject */
    put_or_null(w, p->flags, AMQP_BASIC_REPLY_TO_FLAG, p->reply_to, amqp10_put_string);
    put_or_null(w, p->flags, AMQP_BASIC_CORRELATION_ID_FLAG, p->correlation_id, amqp10_put_string);
    put_or_null(w, p->flags, AMQP_BASIC_CONTENT_TYPE_FLAG, p->content_type, amqp10_put_symbol);
    put_or_null(w, p->flags, AMQP_BASIC_CONTENT_ENCODING_FLAG, p->content_encoding,
                amqp10_put_symbol);
    amqp10_put_null(w); /* absolute-expiry-time */
    if (p->flags & AMQP_BASIC_TIMESTAMP_FLAG)
        amqp10_put_timestamp(w, (int64_t)(p->timestamp * 1000)); /* wraps as RabbitMQ's <<V:64>> */
    else
        amqp10_put_null(w);
    for (int i = 0; i < 3; i++) /* group-id, group-sequence, reply-to-group-id */
        amqp10_put_null(w);
    amqp10_list_end(w, mark, AMQP10_P_COUNT);
}

/* One header value as rabbit_msg_record:from_091 maps it: AMQP10_OK when
 * written, AMQP10_END when RabbitMQ drops it (a table or an array),
 * AMQP10_UNSUPPORTED where RabbitMQ has no clause (a decimal). */
static int header_value(const amqp_field *f, amqp_writer *w)
{
    switch (f->type) {
    case 'S': amqp10_put_string(w, f->v.bytes); break;
    case 'x': amqp10_put_binary(w, f->v.bytes); break;
    case 't': amqp10_put_bool(w, f->v.i != 0); break;
    case 'b': amqp10_put_byte(w, (int8_t)f->v.i); break;
    case 'B': amqp10_put_ubyte(w, (uint8_t)f->v.i); break;
    case 's': amqp10_put_short(w, (int16_t)f->v.i); break;
    case 'u': amqp10_put_ushort(w, (uint16_t)f->v.i); break;
    case 'I': amqp10_put_int(w, (int32_t)f->v.i); break;
    case 'i': amqp10_put_uint(w, (uint32_t)f->v.i); break;
    case 'l':
    case 'L': amqp10_put_long(w, f->v.i); break; /* RabbitMQ reads 'L' as signed too */
    case 'f': amqp10_put_float(w, f->v.f); break;
    case 'd': amqp10_put_double(w, f->v.d); break;
    case 'T': amqp10_put_timestamp(w, (int64_t)((uint64_t)f->v.i * 1000)); break;
    case 'V': amqp10_put_null(w); break;
    case 'F':
    case 'A': return AMQP10_END;
    default: return AMQP10_UNSUPPORTED;
    }
    return AMQP10_OK;
}

static int application_properties(const amqp_basic_properties *p, amqp_writer *w)
{
    size_t start = w->len;
    uint32_t n = 0;
    amqp10_put_descriptor(w, AMQP10_SEC_APPLICATION_PROPERTIES);
    size_t mark = amqp10_compound_begin(w);
    if (p->flags & AMQP_BASIC_TYPE_FLAG) {
        amqp10_put_string(w, AMQP_CSTR("x-basic-type"));
        amqp10_put_string(w, p->type);
        n += 2;
    }
    if (p->flags & AMQP_BASIC_APP_ID_FLAG) {
        amqp10_put_string(w, AMQP_CSTR("x-basic-app-id"));
        amqp10_put_string(w, p->app_id);
        n += 2;
    }
    if (p->flags & AMQP_BASIC_HEADERS_FLAG) {
        amqp_iter it;
        amqp_bytes key;
        amqp_field f;
        amqp_iter_init(&it, p->headers);
        while (amqp_table_next(&it, &key, &f)) {
            size_t before = w->len;
            amqp10_put_string(w, key);
            int rc = header_value(&f, w);
            if (rc == AMQP10_UNSUPPORTED)
                return rc;
            if (rc == AMQP10_END && !w->overflow)
                w->len = before; /* dropped: take the key back */
            else
                n += 2;
        }
    }
    if (n == 0 && !w->overflow)
        w->len = start; /* an empty map is left out */
    else
        amqp10_map_end(w, mark, n);
    return AMQP10_OK;
}

int amqp10_from_091(const amqp_basic_properties *p, amqp_bytes exchange, amqp_bytes routing_key,
                    uint64_t body_size, amqp_writer *w)
{
    if (body_size > UINT32_MAX)
        return AMQP10_UNSUPPORTED;
    message_annotations(p, exchange, routing_key, w);
    properties(p, w);
    if (application_properties(p, w) != AMQP10_OK)
        return AMQP10_UNSUPPORTED;
    amqp10_put_descriptor(w, AMQP10_SEC_DATA);
    if (body_size < 255) { /* the data section's binary header; the body follows */
        amqp_put_u8(w, 0xa0);
        amqp_put_u8(w, (uint8_t)body_size);
    } else {
        amqp_put_u8(w, 0xb0);
        amqp_put_u32(w, (uint32_t)body_size);
    }
    return w->overflow ? AMQP10_NO_SPACE : AMQP10_OK;
}
