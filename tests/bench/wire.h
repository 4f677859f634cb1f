/* wire -- hand-framed AMQP 0-9-1 for warren-perf's hot paths: encoders that
 * build publish/ack/consume/bind frames once into caller buffers, and a frame
 * parser that walks a large read buffer without copying or allocating.
 *
 * librabbitmq does the handshake and declarations; once a connection is "raw"
 * only these functions touch its socket, so the client library is never the
 * bottleneck of a measurement. */
#ifndef WARREN_PERF_WIRE_H
#define WARREN_PERF_WIRE_H

#include <stddef.h>
#include <stdint.h>

enum {
    WIRE_FRAME_METHOD = 1,
    WIRE_FRAME_HEADER = 2,
    WIRE_FRAME_BODY = 3,
    WIRE_FRAME_HEARTBEAT = 8,
};

#define WIRE_FRAME_END 0xCE
#define WIRE_FRAME_OVERHEAD 8 /* type(1) channel(2) size(4) ... end(1) */

/* (class << 16) | method, as returned by wire_method_id(). */
#define WIRE_METHOD(c, m) (((uint32_t)(c) << 16) | (uint32_t)(m))
#define WIRE_CONNECTION_CLOSE WIRE_METHOD(10, 50)
#define WIRE_CONNECTION_CLOSE_OK WIRE_METHOD(10, 51)
#define WIRE_CONNECTION_BLOCKED WIRE_METHOD(10, 60)
#define WIRE_CONNECTION_UNBLOCKED WIRE_METHOD(10, 61)
#define WIRE_CHANNEL_CLOSE WIRE_METHOD(20, 40)
#define WIRE_QUEUE_BIND_OK WIRE_METHOD(50, 21)
#define WIRE_BASIC_CONSUME_OK WIRE_METHOD(60, 21)
#define WIRE_BASIC_CANCEL WIRE_METHOD(60, 30)
#define WIRE_BASIC_RETURN WIRE_METHOD(60, 50)
#define WIRE_BASIC_DELIVER WIRE_METHOD(60, 60)
#define WIRE_BASIC_ACK WIRE_METHOD(60, 80)
#define WIRE_BASIC_NACK WIRE_METHOD(60, 120)

typedef enum { WIRE_OK = 0, WIRE_MORE = 1, WIRE_ERROR = -1 } wire_status;

/* One frame, its payload a slice of the caller's buffer. */
typedef struct wire_frame {
    uint8_t type;
    uint16_t channel;
    uint32_t size;
    const uint8_t *payload;
} wire_frame;

/* Decodes the frame starting at buf[*off]. Returns WIRE_OK and advances *off
 * past it, WIRE_MORE if buf[*off..len) holds only part of a frame, or
 * WIRE_ERROR for an unknown type, a size over frame_max (0 = unchecked) or a
 * missing frame-end octet. Never reads at or past buf[len]. */
wire_status wire_next_frame(const uint8_t *buf, size_t len, size_t *off,
                            uint32_t frame_max, wire_frame *f);

/* Returns the method id of a method frame, or 0 if it is too short. */
uint32_t wire_method_id(const wire_frame *f);

/* basic.deliver: returns WIRE_OK and the delivery tag, or WIRE_ERROR. */
wire_status wire_parse_deliver(const wire_frame *f, uint64_t *tag);

/* Content header: returns WIRE_OK and the body size, or WIRE_ERROR. */
wire_status wire_parse_body_size(const wire_frame *f, uint64_t *body_size);

/* basic.ack / basic.nack (same leading layout): tag and multiple flag. */
wire_status wire_parse_ack(const wire_frame *f, uint64_t *tag, int *multiple);

/* connection.close / channel.close: writes "CODE text (class.method)" into
 * out (always NUL-terminated). Returns WIRE_OK or WIRE_ERROR. */
wire_status wire_describe_close(const wire_frame *f, char *out, size_t outlen);

/* Encoders. Each writes complete frames into out and returns the number of
 * bytes written, or 0 if cap is too small or a string is over 255 bytes. */

/* basic.publish + content header + body frames (split at frame_max). The
 * body is filled with a pattern; *body_off receives the offset of the first
 * body byte, where the caller may patch a timestamp. persistent sets
 * delivery-mode 2; filter_value (NULL: none) the x-stream-filter-value header. */
size_t wire_encode_publish(uint8_t *out, size_t cap, uint16_t channel,
                           const char *exchange, const char *routing_key,
                           size_t body_size, int persistent, const char *filter_value,
                           uint32_t frame_max, size_t *body_off);

/* basic.deliver + header + body, as a broker would send (for self-tests). */
size_t wire_encode_deliver(uint8_t *out, size_t cap, uint16_t channel,
                           uint64_t tag, const char *routing_key,
                           size_t body_size, uint32_t frame_max);

size_t wire_encode_ack(uint8_t *out, size_t cap, uint16_t channel, uint64_t tag,
                       int multiple);
/* `args`: basic.consume's arguments as longstr key/value pairs, NULL-ended
 * (NULL: none), e.g. x-stream-offset. */
size_t wire_encode_consume(uint8_t *out, size_t cap, uint16_t channel,
                           const char *queue, const char *consumer_tag,
                           int no_ack, const char *const *args);
size_t wire_encode_queue_bind(uint8_t *out, size_t cap, uint16_t channel,
                              const char *queue, const char *exchange,
                              const char *routing_key);
/* connection.close with reply 200; connection.close-ok. */
size_t wire_encode_connection_close(uint8_t *out, size_t cap);
size_t wire_encode_connection_close_ok(uint8_t *out, size_t cap);

#endif
