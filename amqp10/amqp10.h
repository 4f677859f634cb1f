/* amqp10: the AMQP 1.0 message format that streams store -- the type codec,
 * the message sections, and RabbitMQ 3.10's conversion to and from an AMQP
 * 0-9-1 message (rabbit_msg_record.erl, rabbit_stream_queue.erl).
 *
 * RabbitMQ keeps every stream entry as the bytes of an AMQP 1.0 bare message
 * (sections, not a transfer frame); the stream protocol's Publish carries
 * them and Deliver hands them back, and an AMQP 0-9-1 publish or consume
 * converts. This module is that format, standalone: the stream queue type,
 * the stream-protocol listener and the console's viewer call it.
 *
 * Decoding never allocates and never copies: values decode as slices into
 * the caller's buffer, which must outlive them. Every read is bounds-checked
 * (`n <= len - off`); nesting is bounded by AMQP10_MAX_DEPTH. Encoding
 * writes into a caller-owned amqp_writer (amqp/amqp.h), which reports
 * overflow once at the end.
 */
#ifndef WARREN_AMQP10_H
#define WARREN_AMQP10_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../amqp/amqp.h"

/* Results. AMQP10_UNSUPPORTED: well formed, but RabbitMQ 3.10.8 cannot
 * convert it to AMQP 0-9-1 (its channel crashes and the consumer's
 * connection is closed with 541 INTERNAL_ERROR). */
enum {
    AMQP10_OK = 0,
    AMQP10_END = 1,            /* an iterator has no more items */
    AMQP10_MALFORMED = -1,     /* truncated, bad constructor, bad length, too deep */
    AMQP10_UNSUPPORTED = -2,
    AMQP10_NO_SPACE = -3,      /* the caller's buffer is too small */
};

/* Compounds nest at most this deep (a section's own list or map is 1). */
#define AMQP10_MAX_DEPTH 32

/* The spec's types (AMQP 1.0 part 1, "types"). */
typedef enum amqp10_type {
    AMQP10_NULL,
    AMQP10_BOOL,
    AMQP10_UBYTE,
    AMQP10_USHORT,
    AMQP10_UINT,
    AMQP10_ULONG,
    AMQP10_BYTE,
    AMQP10_SHORT,
    AMQP10_INT,
    AMQP10_LONG,
    AMQP10_FLOAT,
    AMQP10_DOUBLE,
    AMQP10_DECIMAL32,  /* decimals and char: kept raw in v.bytes */
    AMQP10_DECIMAL64,
    AMQP10_DECIMAL128,
    AMQP10_CHAR,
    AMQP10_TIMESTAMP,  /* ms since the epoch, in v.i */
    AMQP10_UUID,       /* 16 bytes in v.bytes */
    AMQP10_BINARY,
    AMQP10_STRING,     /* utf8 (not checked: RabbitMQ does not check either) */
    AMQP10_SYMBOL,
    AMQP10_LIST,
    AMQP10_MAP,
    AMQP10_ARRAY,
    AMQP10_DESCRIBED,
} amqp10_type;

/* One decoded value. Integers: unsigned types in v.u, signed ones and
 * timestamps in v.i, bool in v.b. Variable-width values (binary, string,
 * symbol) and fixed raw ones (uuid, decimals, char) in v.bytes. A list or
 * map: its items, encoded, and their count (a map counts keys and values);
 * an array: its items without their shared constructor, their count, and
 * that constructor (elem_code; elem_descriptor too when the elements are
 * described). Described: descriptor and value, each one encoded value.
 * `raw` is the whole encoding, constructor included; `code` the
 * constructor byte (0 for described). */
typedef struct amqp10_value {
    amqp10_type type;
    uint8_t code;
    amqp_bytes raw;
    union {
        bool b;
        uint64_t u;
        int64_t i;
        float f;
        double d;
        amqp_bytes bytes;
        struct {
            amqp_bytes items;
            uint32_t count;
            uint8_t elem_code;
            amqp_bytes elem_descriptor;
        } compound;
        struct {
            amqp_bytes descriptor;
            amqp_bytes value;
        } described;
    } v;
} amqp10_value;

/* Reads one value at *off of buf[0..len): on AMQP10_OK fills *out and
 * advances *off past it. A compound's length and count are checked against
 * the buffer but its items are not walked (amqp10_validate does that).
 * AMQP10_MALFORMED (and *off unchanged) when truncated or the constructor is
 * unknown. */
int amqp10_read(const uint8_t *buf, size_t len, size_t *off, amqp10_value *out);

/* Reads one value and checks all of it: every item of every compound (to
 * AMQP10_MAX_DEPTH), item counts matching lengths exactly, maps with an
 * even count, booleans 0 or 1, descriptors that are ulong or symbol. */
int amqp10_read_valid(const uint8_t *buf, size_t len, size_t *off, amqp10_value *out);

/* Walks the items of a list, map or array value (read by amqp10_read).
 * amqp10_next gives AMQP10_OK and the next item, AMQP10_END after the
 * last, or AMQP10_MALFORMED. Array items are decoded with the array's
 * constructor; an array of described values yields the primitive values
 * (their descriptor is the array's elem_descriptor). */
typedef struct amqp10_iter {
    const uint8_t *buf;
    size_t len;
    size_t off;
    uint32_t left;
    uint8_t elem_code; /* 0: every item has its own constructor */
} amqp10_iter;

void amqp10_iter_init(amqp10_iter *it, const amqp10_value *compound);
int amqp10_next(amqp10_iter *it, amqp10_value *out);

/* A string, symbol or binary value's bytes equal `s`. */
bool amqp10_value_is(const amqp10_value *v, const char *s);
/* The value of the first key in a validated map that is a string or symbol
 * equal to `key` (application properties, annotations: what a filter or the
 * console looks up). False when absent or `map` is not a map. */
bool amqp10_map_get(const amqp10_value *map, const char *key, amqp10_value *value);
/* The descriptor of a described value as a ulong code: true and *code for
 * a ulong descriptor, or a symbol descriptor the spec names (for the
 * message sections, "amqp:properties:list" is 0x73 and so on). */
bool amqp10_descriptor_code(const amqp10_value *described, uint64_t *code);

/* ---- encoding ------------------------------------------------------------ */

/* Each writes one value in the encoding RabbitMQ's amqp10_binary_generator
 * picks (so converted messages are byte-identical to RabbitMQ 3.10's): uint
 * 0 as 0x43 and < 256 as 0x52, int and long in -128..127 as 0x54 / 0x55,
 * string and binary under 255 bytes with an 8-bit length, symbols always
 * 0xa3 (longer than 255 bytes: 0xb3). amqp10_put_bool writes RabbitMQ's
 * {boolean, V} form, 0x56 and a byte. */
void amqp10_put_null(amqp_writer *w);
void amqp10_put_bool(amqp_writer *w, bool v);
void amqp10_put_ubyte(amqp_writer *w, uint8_t v);
void amqp10_put_ushort(amqp_writer *w, uint16_t v);
void amqp10_put_uint(amqp_writer *w, uint32_t v);
void amqp10_put_ulong(amqp_writer *w, uint64_t v);
void amqp10_put_byte(amqp_writer *w, int8_t v);
void amqp10_put_short(amqp_writer *w, int16_t v);
void amqp10_put_int(amqp_writer *w, int32_t v);
void amqp10_put_long(amqp_writer *w, int64_t v);
void amqp10_put_float(amqp_writer *w, float v);
void amqp10_put_double(amqp_writer *w, double v);
void amqp10_put_timestamp(amqp_writer *w, int64_t ms);
void amqp10_put_uuid(amqp_writer *w, const uint8_t uuid[16]);
void amqp10_put_binary(amqp_writer *w, amqp_bytes v);
void amqp10_put_string(amqp_writer *w, amqp_bytes v);
void amqp10_put_symbol(amqp_writer *w, amqp_bytes v);
/* The descriptor prefix of a described value: 0x00 and a ulong code. */
void amqp10_put_descriptor(amqp_writer *w, uint64_t code);

/* A list or map: begin reserves room for the largest header and returns a
 * mark; put the items; end writes the header -- the 8-bit form when the
 * count is under 255 and the size under 255 bytes, as RabbitMQ does -- and
 * closes the gap. `count` is the number of items (a map: keys + values). An
 * empty list is list0 (0x45), as RabbitMQ writes it. */
size_t amqp10_compound_begin(amqp_writer *w);
void amqp10_list_end(amqp_writer *w, size_t mark, uint32_t count);
void amqp10_map_end(amqp_writer *w, size_t mark, uint32_t count);
/* An array: begin reserves the header and writes the element constructor
 * (a primitive code); put each element's payload without a constructor
 * (amqp_put_u32 ...); end writes array8 or array32 by the same rule. */
size_t amqp10_array_begin(amqp_writer *w, uint8_t elem_code);
void amqp10_array_end(amqp_writer *w, size_t mark, uint32_t count);

/* ---- the message --------------------------------------------------------- */

/* Section descriptor codes (part 3, "messaging"). */
enum {
    AMQP10_SEC_HEADER = 0x70,
    AMQP10_SEC_DELIVERY_ANNOTATIONS = 0x71,
    AMQP10_SEC_MESSAGE_ANNOTATIONS = 0x72,
    AMQP10_SEC_PROPERTIES = 0x73,
    AMQP10_SEC_APPLICATION_PROPERTIES = 0x74,
    AMQP10_SEC_DATA = 0x75,
    AMQP10_SEC_AMQP_SEQUENCE = 0x76,
    AMQP10_SEC_AMQP_VALUE = 0x77,
    AMQP10_SEC_FOOTER = 0x78,
};

/* The header's and the properties' fields, by position in their list. */
enum {
    AMQP10_H_DURABLE,
    AMQP10_H_PRIORITY,
    AMQP10_H_TTL,
    AMQP10_H_FIRST_ACQUIRER,
    AMQP10_H_DELIVERY_COUNT,
    AMQP10_H_COUNT
};
enum {
    AMQP10_P_MESSAGE_ID,
    AMQP10_P_USER_ID,
    AMQP10_P_TO,
    AMQP10_P_SUBJECT,
    AMQP10_P_REPLY_TO,
    AMQP10_P_CORRELATION_ID,
    AMQP10_P_CONTENT_TYPE,
    AMQP10_P_CONTENT_ENCODING,
    AMQP10_P_ABSOLUTE_EXPIRY_TIME,
    AMQP10_P_CREATION_TIME,
    AMQP10_P_GROUP_ID,
    AMQP10_P_GROUP_SEQUENCE,
    AMQP10_P_REPLY_TO_GROUP_ID,
    AMQP10_P_COUNT
};

typedef enum amqp10_body_kind {
    AMQP10_BODY_NONE,
    AMQP10_BODY_DATA,
    AMQP10_BODY_SEQUENCE,
    AMQP10_BODY_VALUE,
} amqp10_body_kind;

/* A validated message. Each section is its whole encoding (descriptor
 * included; len 0 when absent) and, for the maps, its map value; header and
 * properties as their fields (past the end of the list, or null: type
 * AMQP10_NULL). As RabbitMQ 3.10 reads a message, sections may come in any
 * order and a repeated one replaces the earlier; the body is the data,
 * amqp-sequence or amqp-value sections, of one kind and one after another,
 * and `data` is the last data section's bytes (the payload RabbitMQ gives
 * an AMQP 0-9-1 consumer). */
typedef struct amqp10_message {
    amqp_bytes header, delivery_annotations, message_annotations, properties,
        application_properties, footer;
    amqp10_value delivery_annotations_map, message_annotations_map, application_properties_map,
        footer_map;
    amqp10_value header_fields[AMQP10_H_COUNT];
    amqp10_value property_fields[AMQP10_P_COUNT];
    amqp10_body_kind body_kind;
    uint32_t body_sections;
    amqp_bytes body; /* from the first body section's start to the last's end */
    amqp_bytes data;
} amqp10_message;

/* Parses and validates `in` as a sequence of message sections: every value
 * well formed (amqp10_read_valid), each section's descriptor known and its
 * value of the spec's type (a list for header, properties and
 * amqp-sequence, a map for annotations, application-properties and footer,
 * binary for data), lists no longer than their field count, body sections
 * of one kind. No bytes, or nothing but a header, is valid (no body).
 * AMQP10_MALFORMED otherwise; *m is then unspecified. */
int amqp10_message_parse(amqp_bytes in, amqp10_message *m);

/* ---- AMQP 0-9-1 <-> 1.0, as RabbitMQ 3.10 ------------------------------ */

/* The bytes RabbitMQ 3.10 stores for an AMQP 0-9-1 message published to a
 * stream (rabbit_msg_record:from_amqp091 + rabbit_stream_queue's x-exchange
 * and x-routing-key annotations), without its body: message-annotations
 * (x-routing-key, x-exchange, x-basic-priority, x-basic-delivery-mode,
 * x-basic-expiration), properties (message-id, user-id, reply-to,
 * correlation-id, content-type, content-encoding, creation-time = timestamp
 * * 1000; omitted when all are absent), application-properties
 * (x-basic-type, x-basic-app-id, then the headers in order: tables and
 * arrays dropped; omitted when empty), and the data section's header. The
 * body's `body_size` bytes follow, written by the caller (no copy here).
 * cluster-id is dropped, as RabbitMQ does. `p` is decoded properties whose
 * headers table was validated. Returns AMQP10_OK; AMQP10_NO_SPACE when w
 * overflowed; AMQP10_UNSUPPORTED for a decimal header, which RabbitMQ 3.10
 * cannot convert (its channel crashes), or a body over 4 GiB. */
int amqp10_from_091(const amqp_basic_properties *p, amqp_bytes exchange, amqp_bytes routing_key,
                    uint64_t body_size, amqp_writer *w);

/* What an AMQP 0-9-1 consumer of a stream gets for a stored message, as
 * RabbitMQ 3.10 gives it (rabbit_msg_record:to_amqp091, then the
 * x-stream-offset header): `properties` is the content header's property
 * flags and list, written into w (headers sorted by key, as RabbitMQ's
 * set_table_value leaves them); `body` the last data section (in m's
 * buffer); `exchange` the x-exchange annotation ("" without one) and
 * `routing_key` the x-routing-key annotation (ptr NULL without one: the
 * caller uses the stream's name, as RabbitMQ does). */
typedef struct amqp10_as_091 {
    amqp_bytes properties;
    amqp_bytes body;
    amqp_bytes exchange;
    amqp_bytes routing_key;
} amqp10_as_091;

/* Converts a parsed message; stream_offset < 0 leaves out x-stream-offset
 * (and the headers keep their order). w needs room for the properties and,
 * at its end, 4 bytes per application property (scratch for the sort; no
 * allocation here). Returns AMQP10_OK; AMQP10_NO_SPACE when w overflowed
 * (out is then unusable); AMQP10_UNSUPPORTED where RabbitMQ 3.10.8 fails to
 * convert and closes the consumer's connection with 541: no data section,
 * a header, delivery-annotations or footer section, an application
 * property whose type has no 0-9-1 counterpart (ulong, symbol, uuid, char,
 * decimals, list, map, array, described, a NaN or infinite float), a key
 * that is not a string, symbol or binary, an application property named CC
 * or BCC, an
 * x-exchange or x-routing-key that is not a string, an
 * x-basic-delivery-mode other than 1 or 2, or a value too long for its
 * shortstr property (RabbitMQ's own off-by-one included: a 256-byte
 * message-id). */
int amqp10_to_091(const amqp10_message *m, int64_t stream_offset, amqp_writer *w,
                  amqp10_as_091 *out);

#endif
