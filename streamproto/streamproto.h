/* streamproto: RabbitMQ's stream protocol on the wire -- the framing, the
 * decoding of every client->server command and the encoding of every
 * server->client one. A stream-protocol listener reads bytes, cuts frames
 * with sp_frame_next, decodes them with sp_command_decode and answers with
 * the sp_encode_* functions; it owns the connection state, this module none.
 *
 * The formats are those of deps/rabbitmq_stream/docs/PROTOCOL.adoc and
 * rabbit_stream_core.erl (rabbitmq-server v3.13.x), checked against a live
 * RabbitMQ 3.10.8 (tests/unit/test_streamproto_encode.c has its bytes).
 *
 * Decoding never allocates or copies: strings, SASL data, message bodies and
 * lists are slices of the caller's read buffer, which must outlive them.
 * Lists (properties, stream names, messages) are checked whole by the decode
 * and then walked with the sp_*_next iterators. Encoding writes into a
 * caller-provided buffer (sp_buf) and never leaves half a frame in it.
 *
 * What RabbitMQ does with bad input, and so what a caller should do:
 * - SP_TOO_LARGE (size over frame_max): before Open, close the socket
 *   silently; after, send Close(SP_FRAME_TOO_LARGE, "frame too large")
 *   (rabbit_stream_reader.erl on main; 3.10 and 3.13 check no size).
 * - SP_UNKNOWN (a key or version RabbitMQ does not take) and SP_MALFORMED (a
 *   known command whose body is truncated, has trailing bytes or a bad
 *   value; RabbitMQ calls a failed binary match unknown, and where its
 *   parser crashes instead the socket just closes): before Open, close
 *   silently; after, send Close(SP_UNKNOWN_FRAME, "unknown frame") with
 *   correlation id 1 and ignore what follows until the client's close
 *   response. RabbitMQ 3.10.8 did exactly that, live, for an unknown key,
 *   version 9, a truncated and a padded QueryOffset after Open, and closed
 *   the socket on an unknown key, a size of 1 and a 100000-byte frame
 *   before it.
 */
#ifndef WARREN_STREAMPROTO_H
#define WARREN_STREAMPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- constants (rabbit_stream.hrl) -------------------------------------- */

/* Command keys; a response carries the request's key | SP_RESPONSE. */
enum sp_key {
    SP_DECLARE_PUBLISHER = 0x01,
    SP_PUBLISH = 0x02,
    SP_PUBLISH_CONFIRM = 0x03,
    SP_PUBLISH_ERROR = 0x04,
    SP_QUERY_PUBLISHER_SEQUENCE = 0x05,
    SP_DELETE_PUBLISHER = 0x06,
    SP_SUBSCRIBE = 0x07,
    SP_DELIVER = 0x08,
    SP_CREDIT = 0x09,
    SP_STORE_OFFSET = 0x0a,
    SP_QUERY_OFFSET = 0x0b,
    SP_UNSUBSCRIBE = 0x0c,
    SP_CREATE = 0x0d,
    SP_DELETE = 0x0e,
    SP_METADATA = 0x0f,
    SP_METADATA_UPDATE = 0x10,
    SP_PEER_PROPERTIES = 0x11,
    SP_SASL_HANDSHAKE = 0x12,
    SP_SASL_AUTHENTICATE = 0x13,
    SP_TUNE = 0x14,
    SP_OPEN = 0x15,
    SP_CLOSE = 0x16,
    SP_HEARTBEAT = 0x17,
    SP_ROUTE = 0x18,
    SP_PARTITIONS = 0x19,
    SP_CONSUMER_UPDATE = 0x1a,
    SP_EXCHANGE_COMMAND_VERSIONS = 0x1b,
    SP_STREAM_STATS = 0x1c,
    SP_CREATE_SUPER_STREAM = 0x1d,
    SP_DELETE_SUPER_STREAM = 0x1e,
};
#define SP_RESPONSE 0x8000u

/* Response codes (PROTOCOL.adoc, "Response Codes"). */
enum sp_code {
    SP_OK = 0x01,
    SP_STREAM_DOES_NOT_EXIST = 0x02,
    SP_SUBSCRIPTION_ID_ALREADY_EXISTS = 0x03,
    SP_SUBSCRIPTION_ID_DOES_NOT_EXIST = 0x04,
    SP_STREAM_ALREADY_EXISTS = 0x05,
    SP_STREAM_NOT_AVAILABLE = 0x06,
    SP_SASL_MECHANISM_NOT_SUPPORTED = 0x07,
    SP_AUTHENTICATION_FAILURE = 0x08,
    SP_SASL_ERROR = 0x09,
    SP_SASL_CHALLENGE = 0x0a,
    SP_SASL_AUTHENTICATION_FAILURE_LOOPBACK = 0x0b,
    SP_VHOST_ACCESS_FAILURE = 0x0c,
    SP_UNKNOWN_FRAME = 0x0d,
    SP_FRAME_TOO_LARGE = 0x0e,
    SP_INTERNAL_ERROR = 0x0f,
    SP_ACCESS_REFUSED = 0x10,
    SP_PRECONDITION_FAILED = 0x11,
    SP_PUBLISHER_DOES_NOT_EXIST = 0x12,
    SP_NO_OFFSET = 0x13,
};

/* Offset specification types (Subscribe, ConsumerUpdate's response). */
enum sp_offset_type {
    SP_OFFSET_NONE = 0, /* ConsumerUpdate response only */
    SP_OFFSET_FIRST = 1,
    SP_OFFSET_LAST = 2,
    SP_OFFSET_NEXT = 3,
    SP_OFFSET_OFFSET = 4,
    SP_OFFSET_TIMESTAMP = 5, /* milliseconds since the epoch, signed */
};

/* Subscribe property names the server reads (rabbit_stream_reader.erl and
 * rabbit_stream_utils.erl, v3.13.x): "filter.<anything>" holds one filter
 * value each, "match-unfiltered" = "true" also delivers messages without
 * one; "name" is the consumer's name for single active consumer and offset
 * tracking. */
#define SP_PROP_SINGLE_ACTIVE_CONSUMER "single-active-consumer"
#define SP_PROP_SUPER_STREAM "super-stream"
#define SP_PROP_NAME "name"
#define SP_PROP_FILTER_PREFIX "filter."
#define SP_PROP_MATCH_UNFILTERED "match-unfiltered"

#define SP_SIZE_LEN 4            /* the uint32 before every frame */
#define SP_HEADER_LEN 4          /* key + version, counted in the size */
#define SP_PRE_OPEN_FRAME_MAX 8192 /* RabbitMQ's stream.initial_frame_max */
#define SP_DEFAULT_FRAME_MAX 1048576 /* rabbit_stream.hrl's DEFAULT_FRAME_MAX */
#define SP_DEFAULT_HEARTBEAT 60

/* ---- framing ------------------------------------------------------------- */

typedef enum sp_status {
    SP_DONE = 0,      /* a whole frame or command */
    SP_NEED_MORE,     /* not enough bytes yet: read more, call again */
    SP_TOO_LARGE,     /* the size is over frame_max (known from 4 bytes) */
    SP_MALFORMED,     /* a frame or known command that does not parse */
    SP_UNKNOWN,       /* a key or version not taken from a client */
} sp_status;

/* One frame, in place in the read buffer. */
typedef struct sp_frame {
    uint32_t size;        /* bytes after the size field (key, version, body) */
    uint16_t key;         /* as sent, with SP_RESPONSE */
    uint16_t version;
    const uint8_t *body;  /* after the version */
    uint32_t body_len;    /* size - SP_HEADER_LEN */
} sp_frame;

/* Cuts the frame at buf[0..len). frame_max bounds `size` (0: no bound, as
 * Tune's 0 means); it is checked as soon as the 4 size bytes are there.
 * Returns SP_DONE (f filled, *used = SP_SIZE_LEN + size), SP_NEED_MORE
 * (f->size filled once known), SP_TOO_LARGE (f->size filled) or
 * SP_MALFORMED (a size under SP_HEADER_LEN: RabbitMQ's parser crashes
 * there and the socket closes). */
sp_status sp_frame_next(const uint8_t *buf, size_t len, uint32_t frame_max, sp_frame *f,
                        size_t *used);

/* RabbitMQ's negotiate_frame_max: 0 is "no limit" on either side. */
uint32_t sp_negotiate_frame_max(uint32_t client, uint32_t configured);

/* The bound on frames before Open succeeds: 8192 or the configured frame
 * max if lower, so an unauthenticated peer cannot make the server buffer
 * more (RabbitMQ's pre-auth frame_max). After Open, the Tune result. */
static inline uint32_t sp_pre_open_frame_max(uint32_t configured)
{
    return sp_negotiate_frame_max(SP_PRE_OPEN_FRAME_MAX, configured);
}

/* ---- decoded commands ---------------------------------------------------- */

/* A byte slice of the read buffer; not NUL-terminated, not owned. */
typedef struct sp_slice {
    const uint8_t *ptr;
    uint32_t len;
} sp_slice;

/* A checked list still in wire form, walked by the sp_*_next iterators
 * below: copy it and call the iterator until it returns false. */
typedef struct sp_list {
    const uint8_t *p;
    uint32_t len;   /* bytes left */
    uint32_t count; /* items left */
} sp_list;

typedef struct sp_offset_spec {
    uint16_t type;  /* enum sp_offset_type */
    uint64_t value; /* the offset, or the timestamp as int64 bits; 0 otherwise */
} sp_offset_spec;

typedef struct sp_command_version {
    uint16_t key;
    uint16_t min_version;
    uint16_t max_version;
} sp_command_version;

/* One entry of a Publish (rabbit_stream_utils:write_messages): a message,
 * or in v1 a sub-entry batch -- several messages in one entry, maybe
 * compressed, which the log stores as they are (osiris's sub-batch). */
typedef struct sp_message {
    uint64_t publishing_id;
    sp_slice filter;      /* v2: the filter value; ptr NULL when none (v1, length -1) */
    sp_slice data;        /* the message, or the batch's bytes */
    bool batch;
    uint8_t compression;  /* batch: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd */
    uint16_t batch_count; /* batch: messages in it */
    uint32_t uncompressed_size; /* batch */
} sp_message;

/* A client->server command. Which union member is set follows `key` (and
 * `response` for Tune, Close and ConsumerUpdate, which clients answer). */
typedef struct sp_command {
    uint16_t key; /* without SP_RESPONSE */
    bool response;
    uint16_t version;
    uint32_t correlation_id; /* 0 when the command has none */
    union {
        struct { uint8_t publisher_id; sp_slice reference, stream; } declare_publisher;
        struct {
            uint8_t publisher_id;
            bool filtered;           /* v2 */
            uint32_t declared_count; /* the frame's count: RabbitMQ's credit unit */
            sp_list messages;        /* the entries the bytes hold, whatever the count */
        } publish;
        struct { sp_slice reference, stream; } query_publisher_sequence;
        struct { uint8_t publisher_id; } delete_publisher;
        struct {
            uint8_t subscription_id;
            sp_slice stream;
            sp_offset_spec offset;
            uint16_t credit;
            sp_list properties; /* pairs */
        } subscribe;
        struct { uint8_t subscription_id; uint16_t credit; } credit;
        struct { sp_slice reference, stream; uint64_t offset; } store_offset;
        struct { sp_slice reference, stream; } query_offset;
        struct { uint8_t subscription_id; } unsubscribe;
        struct { sp_slice stream; sp_list arguments; /* pairs */ } create;
        struct { sp_slice stream; } delete_stream;
        struct { sp_list streams; /* strings */ } metadata;
        struct { sp_list properties; /* pairs */ } peer_properties;
        struct { sp_slice mechanism, data; } sasl_authenticate; /* data: -1 reads empty */
        struct { uint32_t frame_max, heartbeat; } tune; /* response (RabbitMQ takes a request too) */
        struct { sp_slice vhost; } open;
        struct { uint16_t code; sp_slice reason; } close;      /* request */
        struct { uint16_t code; } close_ok;                    /* response */
        struct { sp_slice routing_key, super_stream; } route;
        struct { sp_slice super_stream; } partitions;
        struct { uint16_t code; sp_offset_spec offset; } consumer_update; /* response */
        struct { sp_list commands; /* versions */ } exchange_command_versions;
        struct { sp_slice stream; } stream_stats;
        struct {
            sp_slice name;
            sp_list partitions, binding_keys; /* strings */
            sp_list arguments;                /* pairs */
        } create_super_stream;
        struct { sp_slice name; } delete_super_stream;
    } u;
} sp_command;

/* Decodes a client->server frame. SP_DONE: `c` is filled, its slices point
 * into the frame. SP_UNKNOWN: a key or version not taken (a server-only
 * command, a response other than Tune/Close/ConsumerUpdate, Publish above v2,
 * anything else above v1). SP_MALFORMED: a known command whose body does not
 * parse exactly. On both, c->key, response and version are set, and
 * c->correlation_id when the body holds it: a known command's, or for an
 * unknown key the first 4 body bytes (RabbitMQ's Close uses id 1 anyway). */
sp_status sp_command_decode(const sp_frame *f, sp_command *c);

/* Iterators over a list from sp_command_decode; each returns false at the
 * end. Lists were checked whole, so they cannot fail midway. */
bool sp_pair_next(sp_list *it, sp_slice *key, sp_slice *value);
bool sp_string_next(sp_list *it, sp_slice *s);
bool sp_version_next(sp_list *it, sp_command_version *v);
bool sp_message_next(sp_list *it, bool filtered, sp_message *m);

/* What ExchangeCommandVersions advertises (3.13's list: publish up to v2
 * for filter values, every other client command v1). *n gets the count. */
const sp_command_version *sp_server_versions(size_t *n);

/* ---- encoding ------------------------------------------------------------ */

/* Output space owned by the caller (e.g. evbuffer_reserve_space). */
typedef struct sp_buf {
    uint8_t *p;
    size_t cap;
    size_t len;
    bool full; /* set by a put that did not fit; cleared by sp_frame_end */
} sp_buf;

/* A key/value pair to encode (peer and connection properties). */
typedef struct sp_pair {
    sp_slice key, value;
} sp_pair;

/* A StreamStats entry. */
typedef struct sp_stat {
    sp_slice key;
    int64_t value;
} sp_stat;

/* Every encoder returns true with the whole frame appended to b, or false
 * with b as it was: no room, or a string over 65535 bytes. */

/* Building blocks, for frames the encoders below do not cover: begin writes
 * the size placeholder, key and version and returns where the frame starts;
 * the puts append (a put that does not fit sets b->full); end patches the
 * size, or drops the frame when b->full and clears it. */
size_t sp_frame_begin(sp_buf *b, uint16_t key, uint16_t version);
bool sp_frame_end(sp_buf *b, size_t start);
void sp_put_u8(sp_buf *b, uint8_t v);
void sp_put_u16(sp_buf *b, uint16_t v);
void sp_put_u32(sp_buf *b, uint32_t v);
void sp_put_u64(sp_buf *b, uint64_t v);
void sp_put_str(sp_buf *b, sp_slice s);   /* int16 length + bytes */
void sp_put_bytes(sp_buf *b, sp_slice s); /* int32 length + bytes */
void sp_put_raw(sp_buf *b, const void *p, size_t n);

/* The generic response: key | SP_RESPONSE, correlation id, code
 * (DeclarePublisher, DeletePublisher, Subscribe, Unsubscribe, Create,
 * Delete, Close, SaslAuthenticate, CreateSuperStream, DeleteSuperStream).
 * A SaslAuthenticate response carrying a challenge (SP_SASL_CHALLENGE) has
 * no encoder: PLAIN and EXTERNAL need none. */
bool sp_encode_response(sp_buf *b, uint16_t key, uint32_t correlation_id, uint16_t code);
bool sp_encode_peer_properties_response(sp_buf *b, uint32_t correlation_id, uint16_t code,
                                        const sp_pair *props, size_t n);
bool sp_encode_sasl_handshake_response(sp_buf *b, uint32_t correlation_id, uint16_t code,
                                       const sp_slice *mechanisms, size_t n);
/* The server's Tune (a request; the client answers with a Tune response). */
bool sp_encode_tune(sp_buf *b, uint32_t frame_max, uint32_t heartbeat);
/* With n == 0 no property count is written, as RabbitMQ does on failure. */
bool sp_encode_open_response(sp_buf *b, uint32_t correlation_id, uint16_t code,
                             const sp_pair *props, size_t n);
/* The server closing (a request; RabbitMQ uses correlation id 1). */
bool sp_encode_close(sp_buf *b, uint32_t correlation_id, uint16_t code, sp_slice reason);
bool sp_encode_heartbeat(sp_buf *b);
bool sp_encode_publish_confirm(sp_buf *b, uint8_t publisher_id, const uint64_t *ids, size_t n);
/* One code for every id, as RabbitMQ sends them. */
bool sp_encode_publish_error(sp_buf *b, uint8_t publisher_id, uint16_t code,
                             const uint64_t *ids, size_t n);
bool sp_encode_query_publisher_sequence_response(sp_buf *b, uint32_t correlation_id,
                                                 uint16_t code, uint64_t sequence);
bool sp_encode_query_offset_response(sp_buf *b, uint32_t correlation_id, uint16_t code,
                                     uint64_t offset);
/* Deliver's header only: size, key, version, subscription id (and for v2
 * the committed chunk id), counting chunk_len bytes that the caller sends
 * right after it -- the osiris chunk as the log holds it (header, entries,
 * trailer), from memory or with sendfile. False also when the size would
 * not fit a uint32. */
bool sp_encode_deliver_header(sp_buf *b, uint16_t version, uint8_t subscription_id,
                              uint64_t committed_chunk_id, uint64_t chunk_len);
#define SP_DELIVER_HEADER_MAX (SP_SIZE_LEN + SP_HEADER_LEN + 1 + 8)
/* Credit's response, sent only on an error; it has no correlation id. */
bool sp_encode_credit_response(sp_buf *b, uint16_t code, uint8_t subscription_id);
bool sp_encode_metadata_update(sp_buf *b, uint16_t code, sp_slice stream);
/* Route and Partitions responses: a code and stream names. */
bool sp_encode_streams_response(sp_buf *b, uint16_t key, uint32_t correlation_id, uint16_t code,
                                const sp_slice *streams, size_t n);
bool sp_encode_consumer_update(sp_buf *b, uint32_t correlation_id, uint8_t subscription_id,
                               bool active);
bool sp_encode_exchange_command_versions_response(sp_buf *b, uint32_t correlation_id,
                                                  uint16_t code, const sp_command_version *v,
                                                  size_t n);
bool sp_encode_stream_stats_response(sp_buf *b, uint32_t correlation_id, uint16_t code,
                                     const sp_stat *stats, size_t n);

/* The Metadata response, built in steps: begin (then one broker per
 * broker_count), streams (then one stream per stream_count), end. A stream
 * that is not found or not available gets leader 0xFFFF and no replicas,
 * as RabbitMQ writes it. */
typedef struct sp_metadata_stream {
    sp_slice name;
    uint16_t code;
    uint16_t leader; /* a broker reference */
    const uint16_t *replicas;
    uint32_t replica_count;
} sp_metadata_stream;

size_t sp_metadata_begin(sp_buf *b, uint32_t correlation_id, uint32_t broker_count);
void sp_metadata_broker(sp_buf *b, uint16_t reference, sp_slice host, uint32_t port);
void sp_metadata_streams(sp_buf *b, uint32_t stream_count);
void sp_metadata_stream_put(sp_buf *b, const sp_metadata_stream *s);
/* sp_frame_end(b, start) finishes it. */

#endif
