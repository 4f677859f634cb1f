/* amqp: the AMQP 0-9-1 wire codec -- frames, methods, content headers and
 * field tables -- with the method tables generated from the spec.
 *
 * Decoding never allocates: strings and tables decode as slices (amqp_bytes)
 * into the caller's buffer, which must outlive the decoded value. Every
 * decode step is bounds-checked and returns one of three outcomes (ok, need
 * more bytes, error); an error carries the AMQP reply code RabbitMQ uses.
 * Encoding writes into a caller-provided buffer and reports overflow.
 */
#ifndef WARREN_AMQP_H
#define WARREN_AMQP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct evbuffer;

/* A byte slice; not NUL-terminated, not owned. */
typedef struct amqp_bytes {
    const uint8_t *ptr;
    uint32_t len;
} amqp_bytes;

#define AMQP_CSTR(s) ((amqp_bytes){(const uint8_t *)(s), (uint32_t)strlen(s)})

enum { AMQP_OK = 0, AMQP_NEED_MORE = 1, AMQP_ERROR = -1 };

/* Why a frame, method or operation was refused. `code` is the AMQP reply
 * code; `method_id` is (class << 16 | method) of the method that failed, or 0.
 * `text` is RabbitMQ-style: "NOT_FOUND - no queue 'q' in vhost '/'". */
typedef struct amqp_error {
    uint16_t code;
    uint32_t method_id;
    bool silent; /* RabbitMQ's decoder crashes here: close the socket, no close frame */
    bool final;  /* the codec's own verdict (a non-finite float in a table): callers pass
                    code and text on, never rewrite them into RabbitMQ's generic errors */
    char text[256];
} amqp_error;

/* Generated from the spec: constants, method ids, method structs, the
 * amqp_method tagged union and amqp_basic_properties. */
#include "amqp_spec.h"

/* Fills `err` (code, method, "CODE_NAME - " + formatted text) and returns
 * AMQP_ERROR, so callers can `return amqp_fail(...)`. `err` may be NULL.
 * A text over 255 octets (a shortstr) is cut to 252 plus "...", as
 * RabbitMQ does. */
int amqp_fail(amqp_error *err, uint16_t code, uint32_t method_id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* What RabbitMQ's client sees where its channel process crashed on the
 * input: 541 with the text "INTERNAL_ERROR" alone. */
int amqp_fail_crash(amqp_error *err, uint32_t method_id);

/* True when `code` is a hard (connection) error in the spec's classification. */
bool amqp_reply_is_hard(uint16_t code);
/* "NOT_FOUND" for 404 and so on; "UNKNOWN" for codes the spec lacks. */
const char *amqp_reply_name(uint16_t code);

/* ---- methods (generated) ------------------------------------------------ */

/* "basic.consume" for AMQP_BASIC_CONSUME; NULL for unknown ids. */
const char *amqp_method_name(uint32_t method_id);
bool amqp_method_has_content(uint32_t method_id);
bool amqp_method_is_synchronous(uint32_t method_id);

/* Decodes a method frame payload into `out`. Slices point into `buf`.
 * Fails as RabbitMQ 3.10 does: 501 FRAME_ERROR "cannot decode <<octets>>"
 * for arguments that are short, have bad lengths, a malformed table or
 * trailing bytes; an unknown class or method (540) or an unknown field type
 * in a table sets err->silent (RabbitMQ drops the connection). */
int amqp_method_decode(const uint8_t *buf, size_t len, amqp_method *out, amqp_error *err);

/* Encodes `m` (class id, method id, arguments) into `buf`. Returns the byte
 * count, or 0 when `cap` is too small. */
size_t amqp_method_encode(const amqp_method *m, uint8_t *buf, size_t cap);

/* ---- content headers ---------------------------------------------------- */

/* A content header frame payload: class id, weight, body size, and the
 * property flags + property list kept raw (so it can be forwarded as is). */
typedef struct amqp_content_header {
    uint16_t class_id;
    uint64_t body_size;
    amqp_bytes properties; /* flags word(s) and property list, raw */
} amqp_content_header;

/* Decodes the fixed part and validates the properties (every present field
 * well formed, tables included). 502 SYNTAX_ERROR when malformed; 505
 * UNEXPECTED_FRAME, as RabbitMQ answers, when the class is not basic or the
 * weight is not 0 (err->method_id is 0: the caller knows the method). */
int amqp_content_header_decode(const uint8_t *buf, size_t len, amqp_content_header *out,
                               amqp_error *err);

/* Decodes raw properties (as in amqp_content_header.properties) into fields.
 * Absent fields are zero / empty; `flags` says which are present. */
int amqp_properties_decode(amqp_bytes raw, amqp_basic_properties *out, amqp_error *err);

/* Encodes the properties whose bit is set in p->flags. 0 on overflow. */
size_t amqp_properties_encode(const amqp_basic_properties *p, uint8_t *buf, size_t cap);

/* ---- field tables and arrays -------------------------------------------- */

/* One decoded field value. `type` is the wire tag, one of
 * t b B s u I i l L f d D S A T F V x ('L', unsigned 64-bit, is RabbitMQ's
 * extension). Integers of every width and t/T are in
 * `i` (B/u/i zero-extended, b/s/I/l sign-extended -- 'I' is signed and 'i'
 * unsigned, as RabbitMQ and pika encode them; t is 0 or 1; T is seconds
 * since the epoch, stored as its 64 bits); S and x are in
 * `bytes`; A and F hold their raw encoded content in `bytes` (without the
 * length prefix), to be walked with the iterators below. */
typedef struct amqp_field {
    uint8_t type;
    union {
        int64_t i;
        float f;
        double d;
        struct {
            uint8_t scale;
            uint32_t value;
        } decimal;
        amqp_bytes bytes;
    } v;
} amqp_field;

#define AMQP_TABLE_MAX_DEPTH 64

/* Checks that `table` (content without the 4-byte length) is well formed,
 * nested tables and arrays to AMQP_TABLE_MAX_DEPTH. 502 when not. A NaN or
 * infinite 'f' or 'd' value is malformed too: RabbitMQ cannot represent one
 * (it drops the connection), and nothing downstream has to print or compare
 * it. That 502 sets err->final, so method arguments and content-header
 * properties alike are refused with it, closing the connection. */
int amqp_table_validate(amqp_bytes table, amqp_error *err);
int amqp_array_validate(amqp_bytes array, amqp_error *err);

/* Iterates a table or array that has been validated. */
typedef struct amqp_iter {
    amqp_bytes data;
    uint32_t off;
} amqp_iter;

void amqp_iter_init(amqp_iter *it, amqp_bytes data);
bool amqp_table_next(amqp_iter *it, amqp_bytes *key, amqp_field *value);
bool amqp_array_next(amqp_iter *it, amqp_field *value);

/* Looks up `key` in a validated table; true and `*value` when present. */
bool amqp_table_get(amqp_bytes table, const char *key, amqp_field *value);

/* Integer value of a numeric field (b B s u I i l T), false if not numeric. */
bool amqp_field_int(const amqp_field *f, int64_t *out);

/* Type-and-value equality, as RabbitMQ's headers exchange compares. */
bool amqp_field_equal(const amqp_field *a, const amqp_field *b);

/* Field values as RabbitMQ's error texts print them (Erlang terms):
 * the type name ("longstr", "signedint", ...), ~p of the value and ~s of it
 * (binaries bare). Each writes at most cap bytes, NUL-terminated, and
 * returns buf. For error paths only. */
const char *amqp_erl_type_name(uint8_t tag);
char *amqp_erl_term(const amqp_field *f, char *buf, size_t cap);
char *amqp_erl_value(const amqp_field *f, char *buf, size_t cap);
/* Whether ~p prints code c (0..255) as a character of a string or binary
 * (printable latin1, or one of its escapes such as \n), rather than a
 * number. */
bool amqp_erl_printable(unsigned c);
/* s as an Erlang string literal, "..." with ~p's escapes; the caller has
 * checked every byte with amqp_erl_printable. Writes at most cap bytes
 * (2 * s.len + 3 always fit), NUL-terminated, and returns buf. */
char *amqp_erl_string(amqp_bytes s, char *buf, size_t cap);

/* Byte-wise helpers. */
bool amqp_bytes_equal(amqp_bytes a, amqp_bytes b);
bool amqp_bytes_equal_cstr(amqp_bytes a, const char *s);

/* ---- writer ------------------------------------------------------------- */

/* Appends wire values to a caller-owned buffer; on overflow it stops writing
 * and sets `overflow`, so a sequence of puts needs one check at the end. */
typedef struct amqp_writer {
    uint8_t *buf;
    size_t cap;
    size_t len;
    bool overflow;
} amqp_writer;

void amqp_writer_init(amqp_writer *w, uint8_t *buf, size_t cap);
void amqp_put_u8(amqp_writer *w, uint8_t v);
void amqp_put_u16(amqp_writer *w, uint16_t v);
void amqp_put_u32(amqp_writer *w, uint32_t v);
void amqp_put_u64(amqp_writer *w, uint64_t v);
void amqp_put_raw(amqp_writer *w, const void *p, size_t n);
void amqp_put_shortstr(amqp_writer *w, amqp_bytes s); /* overflow if > 255 */
void amqp_put_longstr(amqp_writer *w, amqp_bytes s);

/* Tables: begin returns a mark; put key + field pairs; end patches the
 * length. Nested tables/arrays: put_field_begin(w, 'F') ... end. */
size_t amqp_table_begin(amqp_writer *w);
void amqp_table_end(amqp_writer *w, size_t mark);
/* Writes the tag ('F' or 'A', else sets overflow) and a length placeholder;
 * returns the mark to pass to amqp_table_end. Arrays take amqp_put_field
 * values without keys. */
size_t amqp_put_field_begin(amqp_writer *w, uint8_t type);
void amqp_put_key(amqp_writer *w, const char *key);
void amqp_put_field(amqp_writer *w, const amqp_field *f); /* F and A: raw content */
void amqp_put_field_bool(amqp_writer *w, const char *key, bool v);
void amqp_put_field_str(amqp_writer *w, const char *key, amqp_bytes v);
void amqp_put_field_long(amqp_writer *w, const char *key, int64_t v);
/* Copies every entry of a validated table except those keyed `skip`. */
void amqp_put_entries_except(amqp_writer *w, amqp_bytes table, const char *skip);

/* ---- frames ------------------------------------------------------------- */

#define AMQP_FRAME_HEADER_SIZE 7
#define AMQP_FRAME_OVERHEAD 8 /* header + frame-end octet */

typedef struct amqp_frame {
    uint8_t type;
    uint16_t channel;
    uint32_t size;
    const uint8_t *payload;
} amqp_frame;

/* Parses one frame from a contiguous buffer. AMQP_OK sets *f (payload points
 * into buf) and *consumed = size + 8; AMQP_NEED_MORE when buf holds less than
 * a whole frame; AMQP_ERROR with 501 FRAME_ERROR for an unknown frame type,
 * a size over frame_max, or a bad frame-end octet, and 504 CHANNEL_ERROR for
 * a channel over channel_max. The header is checked before the payload is
 * needed, so an oversize frame fails as soon as its 7 header bytes arrive.
 * "Size over frame_max" is RabbitMQ's lax rule: the payload size alone is
 * compared with frame_max (RabbitMQ 3.10 accepts a 4096-byte payload when
 * frame_max is 4096). frame_max 0 and channel_max 0 mean no limit. */
int amqp_frame_parse(const uint8_t *buf, size_t len, uint32_t frame_max, uint16_t channel_max,
                     amqp_frame *f, size_t *consumed, amqp_error *err);

/* The same over a libevent buffer: pulls up only the bytes of one frame.
 * On AMQP_OK the caller evbuffer_drain()s f->size + 8 after using payload. */
int amqp_frame_read(struct evbuffer *in, uint32_t frame_max, uint16_t channel_max,
                    amqp_frame *f, amqp_error *err);

/* Frames read in place: a reader hands out the frames at the front of an
 * evbuffer one by one, parsed where they lie in its first contiguous chunk
 * (no copy, no drain per frame); only a frame that runs past the chunk is
 * made contiguous on its own (amqp_frame_read). A payload stays valid until
 * amqp_frames_drain, which removes the frames handed out so far; call it
 * before the buffer is used otherwise and when done. Results and errors are
 * amqp_frame_parse's. */
typedef struct amqp_frame_reader {
    struct evbuffer *in;
    const uint8_t *chunk; /* the buffer's first contiguous bytes */
    size_t len;           /* of chunk */
    size_t used;          /* bytes of chunk handed out, not yet drained */
} amqp_frame_reader;

void amqp_frames_begin(amqp_frame_reader *r, struct evbuffer *in);
int amqp_frames_next(amqp_frame_reader *r, uint32_t frame_max, uint16_t channel_max,
                     amqp_frame *f, amqp_error *err);
void amqp_frames_drain(amqp_frame_reader *r);

/* The method id (class << 16 | method) a method frame carries; 0 if its
 * payload is shorter than 4 bytes. */
uint32_t amqp_frame_method_id(const amqp_frame *f);

/* Writes a 7-byte frame header. */
void amqp_frame_header_put(uint8_t *buf, uint8_t type, uint16_t channel, uint32_t size);

/* The 8-byte protocol header "AMQP\0\0\x09\x01". */
extern const uint8_t AMQP_PROTOCOL_HEADER[8];

#endif
