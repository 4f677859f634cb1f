/* AMQP 1.0 message sections (part 3, 3.2): a bare message is a sequence of
 * described values -- header, delivery-annotations, message-annotations,
 * properties, application-properties, the body (data sections, amqp-sequence
 * sections or one amqp-value), footer -- each descriptor a ulong (0x70 to
 * 0x78) or the section's symbolic name.
 *
 * The parser is as lenient as RabbitMQ 3.10's reader (rabbit_msg_record:init
 * over amqp10_framing:decode_bin) about order -- any order, a repeated
 * section replacing the earlier -- and stricter about form: every value is
 * validated, each section's value has the spec's type, and a header or
 * properties list longer than its fields is refused (RabbitMQ's record fill
 * crashes on it).
 */
#include "amqp10_int.h"

/* Fills fields[0..n) from a header or properties list. */
static int list_fields(const amqp10_value *list, amqp10_value *fields, size_t n)
{
    amqp10_iter it;
    amqp10_value item;
    size_t i = 0;
    int rc;
    if (list->type != AMQP10_LIST)
        return AMQP10_MALFORMED;
    memset(fields, 0, n * sizeof *fields); /* AMQP10_NULL */
    amqp10_iter_init(&it, list);
    while ((rc = amqp10_next(&it, &item)) == AMQP10_OK) {
        if (i == n)
            return AMQP10_MALFORMED;
        fields[i++] = item;
    }
    return rc == AMQP10_END ? AMQP10_OK : AMQP10_MALFORMED;
}

static int map_section(const amqp10_value *v, amqp_bytes whole, amqp_bytes *sec, amqp10_value *map)
{
    if (v->type != AMQP10_MAP)
        return AMQP10_MALFORMED;
    *sec = whole;
    *map = *v;
    return AMQP10_OK;
}

/* A body section: one kind, the sections next to each other. */
static int body_section(amqp10_message *m, amqp10_body_kind kind, amqp_bytes whole)
{
    if (m->body_kind == AMQP10_BODY_NONE) {
        m->body_kind = kind;
        m->body = whole;
    } else if (m->body_kind != kind || kind == AMQP10_BODY_VALUE ||
               m->body.ptr + m->body.len != whole.ptr) {
        return AMQP10_MALFORMED;
    } else {
        m->body.len += whole.len;
    }
    m->body_sections++;
    return AMQP10_OK;
}

static int section(amqp10_message *m, uint64_t code, const amqp10_value *v, amqp_bytes whole)
{
    switch (code) {
    case AMQP10_SEC_HEADER:
        m->header = whole;
        return list_fields(v, m->header_fields, AMQP10_H_COUNT);
    case AMQP10_SEC_DELIVERY_ANNOTATIONS:
        return map_section(v, whole, &m->delivery_annotations, &m->delivery_annotations_map);
    case AMQP10_SEC_MESSAGE_ANNOTATIONS:
        return map_section(v, whole, &m->message_annotations, &m->message_annotations_map);
    case AMQP10_SEC_PROPERTIES:
        m->properties = whole;
        return list_fields(v, m->property_fields, AMQP10_P_COUNT);
    case AMQP10_SEC_APPLICATION_PROPERTIES:
        return map_section(v, whole, &m->application_properties, &m->application_properties_map);
    case AMQP10_SEC_DATA:
        if (v->type != AMQP10_BINARY)
            return AMQP10_MALFORMED;
        m->data = v->v.bytes;
        return body_section(m, AMQP10_BODY_DATA, whole);
    case AMQP10_SEC_AMQP_SEQUENCE:
        if (v->type != AMQP10_LIST)
            return AMQP10_MALFORMED;
        return body_section(m, AMQP10_BODY_SEQUENCE, whole);
    case AMQP10_SEC_AMQP_VALUE:
        return body_section(m, AMQP10_BODY_VALUE, whole);
    case AMQP10_SEC_FOOTER:
        return map_section(v, whole, &m->footer, &m->footer_map);
    default:
        return AMQP10_MALFORMED;
    }
}

int amqp10_message_parse(amqp_bytes in, amqp10_message *m)
{
    size_t off = 0;
    memset(m, 0, sizeof *m);
    while (off < in.len) {
        size_t start = off, at = 0;
        amqp10_value sec, v;
        uint64_t code;
        if (amqp10_read_valid(in.ptr, in.len, &off, &sec) != AMQP10_OK ||
            !amqp10_descriptor_code(&sec, &code) ||
            amqp10_read(sec.v.described.value.ptr, sec.v.described.value.len, &at, &v) != AMQP10_OK)
            return AMQP10_MALFORMED;
        amqp_bytes whole = {in.ptr + start, (uint32_t)(off - start)};
        if (section(m, code, &v, whole) != AMQP10_OK)
            return AMQP10_MALFORMED;
    }
    return AMQP10_OK;
}
