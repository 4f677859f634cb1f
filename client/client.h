/* client: an AMQP 0-9-1 client on the caller's libevent loop, for the
 * broker's own outgoing links (shovels, federation). It reuses amqp/'s
 * codec and net/'s transports, never blocks, and knows nothing of the
 * broker's state.
 *
 * One `client` is one connection: connect (non-blocking, with a timeout),
 * SASL PLAIN, tune (frame_max, heartbeats both ways), connection.open, then
 * channels 1..CLIENT_MAX_CHANNELS, each opened with client_channel_open.
 * Synchronous methods (declare, bind, qos, consume, confirm.select, ...)
 * go through client_call: one is on the wire per channel at a time, the
 * others wait in order, and each reply reaches handlers.reply. Deliveries,
 * returns and publisher confirms reach their handlers with whole messages.
 *
 * Everything the owner hears comes through client_handlers, always from
 * the event loop, never from inside the client_* call that caused it (a
 * failed connect is reported from the loop too). `closed` is the last
 * call: the connection is gone (refused, lost, timed out, closed by either
 * side) and the reason is kept (client_error). The owner then calls
 * client_free -- also allowed inside any handler; the memory goes when the
 * handler returns.
 *
 * Bounds: input is read only while the owner lets it (client_pause_reading)
 * and frames over the negotiated frame_max or messages over
 * max_message_size close the connection (501 / 311); output is bounded by
 * max_output: past it client_publish refuses (returns 0) until `writable`
 * is heard.
 *
 * amqps:// connects over TLS (net/'s client streams), checking the
 * server's certificate only with verify=verify_peer, as RabbitMQ's
 * Erlang client does by default.
 */
#ifndef WARREN_CLIENT_H
#define WARREN_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../amqp/amqp.h"
#include "../net/net.h"

struct event_base;

/* ---- URIs (RabbitMQ's amqp_uri rules) ----------------------------------- */

#define CLIENT_PORT 5672
#define CLIENT_TLS_PORT 5671

/* amqp://[user[:pass]@]host[:port][/vhost][?key=value&...], or amqps://.
 * - user, password and vhost are percent-decoded; without userinfo the
 *   user is guest/guest (`user_given` false);
 * - no path: vhost "/"; "/" alone: vhost "" (RabbitMQ's rule); a vhost
 *   with a literal '/' is refused (use %2f);
 * - no host and no port ("amqp://", "amqp:///vh"): `local`, this broker
 *   (RabbitMQ's direct connection); a port without a host is refused;
 * - port 1..65535, default 5672 (amqps 5671); IPv6 hosts in [brackets];
 * - query keys heartbeat (s), connection_timeout (ms), channel_max and
 *   frame_max are integers ({not_an_integer,...} otherwise); amqps's
 *   cacertfile, certfile, keyfile, verify (verify_peer | verify_none, the
 *   default) and server_name_indication (default: the host; "disable")
 *   are taken; the others (auth_mechanism, unknown ones) are ignored: the
 *   client logs in with PLAIN. */
typedef struct client_uri {
    bool tls;   /* amqps:// */
    bool local; /* no host: this broker */
    bool user_given;
    char host[256]; /* without brackets; "" when local */
    uint16_t port;
    char user[256], password[256], vhost[256];
    int64_t heartbeat;          /* -1: not given */
    int64_t connection_timeout; /* ms; -1: not given */
    int64_t channel_max, frame_max; /* -1: not given */
    /* amqps:// only */
    char cacertfile[256], certfile[256], keyfile[256];
    char server_name[256]; /* SNI and the name verified; "" none */
    bool verify_peer;
} client_uri;

/* False with RabbitMQ's reason in `err` ("{unexpected_uri_scheme,\"http\"}",
 * "port_requires_host", "{invalid_vhost,\"a/b\"}", ...) when `s` is not a
 * URI RabbitMQ takes. */
bool client_uri_parse(const char *s, client_uri *out, char *err, size_t errlen);
/* `s` without its credentials ("amqp://host:5672/vh"), as RabbitMQ's
 * remove_credentials shows a URI in logs and status; always NUL-terminated. */
void client_uri_redact(const char *s, char *out, size_t cap);

/* ---- connections -------------------------------------------------------- */

#define CLIENT_MAX_CHANNELS 64

typedef struct client client;

/* Why a connection or channel ended. */
typedef enum client_error_kind {
    CLIENT_OK = 0,           /* closed as asked (client_close, client_channel_close) */
    CLIENT_ERR_SERVER_CLOSE, /* the server sent connection.close / channel.close */
    CLIENT_ERR_CLIENT_CLOSE, /* we closed it over a protocol error of the server's */
    CLIENT_ERR_NETWORK,      /* resolve, connect or socket error; the peer vanished */
    CLIENT_ERR_TIMEOUT,      /* connect / handshake timeout, missed heartbeats */
    CLIENT_ERR_AUTH,         /* the login was refused */
    CLIENT_ERR_UNSUPPORTED,  /* amqps, a mechanism the server lacks */
    CLIENT_ERR_MEMORY,
} client_error_kind;

typedef struct client_error {
    client_error_kind kind;
    uint16_t code;      /* AMQP reply code (SERVER_/CLIENT_CLOSE, AUTH); else 0 */
    uint32_t method_id; /* the method the close names, or 0 */
    char text[256];     /* the reply text, or what happened ("connection refused") */
} client_error;

/* A message as it arrived (basic.deliver, basic.return). Every slice is
 * valid only during the handler call. */
typedef struct client_message {
    uint64_t delivery_tag;     /* deliver */
    bool redelivered;          /* deliver */
    amqp_bytes consumer_tag;   /* deliver */
    uint16_t reply_code;       /* return */
    amqp_bytes reply_text;     /* return */
    amqp_bytes exchange, routing_key;
    amqp_bytes properties;     /* raw, validated (amqp_properties_decode) */
    amqp_bytes body;           /* contiguous */
} client_message;

typedef struct client_handlers {
    /* connection.open-ok: channels may be opened now. */
    void (*opened)(void *ctx, client *c);
    /* The connection ended; `why->kind` CLIENT_OK after client_close. The
     * last call; the owner calls client_free. Required. */
    void (*closed)(void *ctx, client *c, const client_error *why);
    /* channel.open-ok. */
    void (*channel_opened)(void *ctx, client *c, uint16_t ch);
    /* The channel ended (the server's channel.close, or client_channel_close
     * done: CLIENT_OK); its number may be opened again. Not called for the
     * channels of a connection that closed. */
    void (*channel_closed)(void *ctx, client *c, uint16_t ch, const client_error *why);
    /* The reply to a client_call (queue.declare-ok, basic.consume-ok, ...),
     * in the order of the calls; slices valid during the call. */
    void (*reply)(void *ctx, client *c, uint16_t ch, const amqp_method *reply);
    void (*deliver)(void *ctx, client *c, uint16_t ch, const client_message *m);
    void (*returned)(void *ctx, client *c, uint16_t ch, const client_message *m);
    /* Publisher confirms on a channel in confirm mode: `seq` as
     * client_publish returned it, `multiple` covers every seq up to it. */
    void (*confirm)(void *ctx, client *c, uint16_t ch, uint64_t seq, bool multiple, bool ack);
    /* The server cancelled a consumer (basic.cancel: its queue went). */
    void (*cancelled)(void *ctx, client *c, uint16_t ch, amqp_bytes consumer_tag);
    /* Output fell back under max_output after a refused client_publish. */
    void (*writable)(void *ctx, client *c);
    /* connection.blocked (reason) / connection.unblocked. */
    void (*blocked)(void *ctx, client *c, bool blocked, amqp_bytes reason);
} client_handlers;

typedef struct client_options {
    uint32_t frame_max;          /* proposed; 0: 131072 (the URI's wins) */
    uint16_t channel_max;        /* 0: CLIENT_MAX_CHANNELS */
    uint16_t heartbeat;          /* s, proposed; 0: 60 (the URI's wins); both sides 0: none */
    uint32_t connect_timeout_ms; /* TCP connect + handshake; 0: 30000 (the URI's wins) */
    uint64_t max_message_size;   /* bodies received; 0: 128 MiB */
    size_t max_output;           /* bytes queued before publish refuses; 0: 4 MiB */
    const char *connection_name; /* client property connection_name; NULL: none */
} client_options;

/* Starts connecting to `uri` (not `local`: the owner brings a transport
 * with client_attach). NULL only when out of memory; every failure after
 * that is heard as `closed`. `uri` and `o` are copied. */
client *client_connect(struct event_base *base, transport_flusher *fl, const client_uri *uri,
                       const client_options *o, const client_handlers *h, void *ctx);
/* The same over a connected transport the client takes over (an in-memory
 * pipe to this broker: `uri` gives user, password and vhost). NULL when
 * out of memory (t is freed). */
client *client_attach(struct event_base *base, transport *t, const client_uri *uri,
                      const client_options *o, const client_handlers *h, void *ctx);
/* Frees it at once, or when the handler it is called from returns; no
 * handler is called afterwards. A connection still open is dropped without
 * connection.close (use client_close for a clean end). */
void client_free(client *c);
/* Sends connection.close(code, text) and waits for close-ok (bounded by
 * the connect timeout); `closed` follows with CLIENT_OK. */
void client_close(client *c, uint16_t code, const char *text);

bool client_is_open(const client *c); /* connection.open-ok seen, not closing */
uint32_t client_frame_max(const client *c); /* negotiated; 0 before tune */
uint16_t client_heartbeat(const client *c); /* negotiated, s */
/* The server's "product" / "version" properties, "" until connection.start. */
const char *client_server_product(const client *c);
const char *client_server_version(const client *c);
/* Stops (true) or resumes reading the socket: deliveries wait in the
 * kernel, heartbeats sent by us go on. */
void client_pause_reading(client *c, bool paused);
/* Output bytes not written yet; whether client_publish would take more. */
size_t client_output_pending(const client *c);
bool client_writable(const client *c);

/* ---- channels ----------------------------------------------------------- */

/* channel.open on `ch` (1..CLIENT_MAX_CHANNELS, below the negotiated
 * channel_max). False when the connection is not open or `ch` is in use;
 * `channel_opened` or `channel_closed` follows. */
bool client_channel_open(client *c, uint16_t ch);
/* channel.close(200); `channel_closed` with CLIENT_OK follows. */
bool client_channel_close(client *c, uint16_t ch);
bool client_channel_is_open(const client *c, uint16_t ch);

/* Sends a synchronous method (queue.declare, exchange.declare,
 * queue.bind/unbind, basic.qos, basic.consume, basic.cancel,
 * confirm.select, queue.delete, queue.purge, exchange.delete/bind/unbind)
 * built by the caller, once the channel's earlier calls are answered; its
 * reply reaches `reply` (not sent for nowait methods: none is expected).
 * confirm.select-ok puts the channel in confirm mode. Slices in `m` are
 * copied. False when the channel is not open or `m` does not encode. */
bool client_call(client *c, uint16_t ch, const amqp_method *m);

/* basic.publish with `properties` raw (as client_message.properties, or
 * from amqp_properties_encode; empty: none) and the body split to
 * frame_max. Returns the publish sequence number (1, 2, ... on a channel
 * in confirm mode; 1 otherwise), or 0 when refused: the channel is not
 * open or output is past max_output (wait for `writable`). Bytes are
 * copied. */
uint64_t client_publish(client *c, uint16_t ch, amqp_bytes exchange, amqp_bytes routing_key,
                        bool mandatory, amqp_bytes properties, amqp_bytes body);
/* basic.ack / basic.nack / basic.reject of deliveries on `ch`; false when
 * the channel is not open. */
bool client_ack(client *c, uint16_t ch, uint64_t tag, bool multiple);
bool client_nack(client *c, uint16_t ch, uint64_t tag, bool multiple, bool requeue);
bool client_reject(client *c, uint16_t ch, uint64_t tag, bool requeue);

#endif
