/* Private to streamconn/: the connection object and what its files share
 * (sconn.c: the hub, lifecycle, frames, output, closing; handshake.c:
 * PeerProperties to Open; streams.c: Metadata, Create, Delete, offsets,
 * stats and the streams a connection watches; publish.c: publishers and
 * confirms; subscribe.c: subscriptions and Deliver; sac.c: single active
 * consumer; superstream.c: Route, Partitions, super streams; info.c: what
 * the management API reads). */
#ifndef WARREN_SCONN_INT_H
#define WARREN_SCONN_INT_H

#include "../streamproto/streamproto.h"
#include "streamconn.h"

/* RabbitMQ's connection steps (rabbit_stream_reader's states). */
typedef enum sc_state {
    SC_CONNECTED,   /* nothing yet: PeerProperties or SASL expected */
    SC_PEER_PROPS,  /* peer properties exchanged: SASL expected */
    SC_TUNING,      /* authenticated, Tune sent: the client's Tune expected */
    SC_TUNED,       /* Open expected */
    SC_OPEN,
    SC_CLOSE_SENT,  /* we sent Close: only its response matters now */
    SC_CLOSED,      /* flushing output, then freed */
} sc_state;

#define SC_CLOSE_TIMEOUT_MS 3000
#define SC_IDS 256 /* publisher and subscription ids are one byte */

/* A stream this connection publishes to or reads: one watch on the queue
 * for all its publishers and subscriptions here, so a deletion is one
 * MetadataUpdate (RabbitMQ's one per stream and connection). */
typedef struct sc_stream {
    sconn *c;
    queue *q;
    stream_watch watch;
    uint32_t users; /* publishers and subscriptions on it */
    uint16_t name_len;
    struct sc_stream *next;
    char name[]; /* NUL-terminated */
} sc_stream;

typedef struct sc_publisher {
    sc_stream *st;
    uint16_t ref_len;     /* 0: no reference (no deduplication) */
    bool known;           /* the stream knows the reference: sequence holds */
    bool untracked;       /* the stream could not keep its sequence (logged once) */
    uint64_t sequence;    /* with a reference: the highest publishing id taken */
    uint64_t published, confirmed, errored;
    char reference[256];
} sc_publisher;

/* A publish waiting for its journal sequence to be synced. */
typedef struct sc_pending {
    journal_seq seq;
    uint64_t publishing_id;
    uint8_t publisher;
} sc_pending;

/* A subscription (subscribe.c), maybe in a single-active-consumer group
 * (sac.c): the subscriptions of one stream with one name, on any
 * connection; sac.c says which one is active. */
typedef struct sc_sub {
    uint8_t id;
    sc_stream *st;
    stream_reader *r;
    uint32_t credit;
    uint64_t chunks, records; /* delivered */
    bool sac;        /* single active consumer */
    bool active;     /* sac: the group's active one */
    bool awaiting;   /* sac: told it is active, its ConsumerUpdate response not in yet */
    bool stepping_down; /* sac: told it is inactive, its response not in yet */
    uint32_t update_correlation;
    uint64_t sac_seq;
    int32_t partition; /* its stream's index in the super stream it named; -1: none */
    uint16_t name_len;
    char name[256];  /* the "name" property: offset tracking and the sac group */
    stream_filter filter; /* its values point into filter_bytes (both owned) */
    uint8_t *filter_bytes;
} sc_sub;

struct event;

struct sconn_hub {
    server *srv;
    uint64_t sac_seq; /* orders single-active-consumer subscriptions */
    sconn *conns; /* every socket, linked through next/prev */
    size_t count;
    struct {
        char ip[SERVER_HOST_LEN];
        int port;
    } listeners[CONFIG_MAX_LISTENERS];
    size_t nlisteners;
};

struct sconn {
    sconn_hub *hub;
    server *srv;
    loop *loop;
    transport *t;
    sconn *next, *prev;
    sc_state state;
    bool loopback;
    bool free_scheduled;
    bool output_full;     /* past conn_output_limit: deliveries wait for on_drained */
    bool reading_paused;
    bool alarm;           /* a resource alarm is on */
    bool publish_blocked; /* not read: published during an alarm or while the journal lags */
    bool discard_input;   /* after a framing error: no frame boundary any more */
    uint8_t brake_key[16];
    /* names: peer "host:port", peer_host, host, name "peer -> local" */
    char *names;
    const char *peer, *peer_host, *host, *name;
    int peer_port, port;
    char *user;           /* who logged in (NULL before) */
    const char *mechanism;
    uint8_t *client_props; /* PeerProperties' pairs, copied */
    uint32_t client_props_len, client_props_count;
    vhost *vh;
    uint32_t frame_max;   /* input bound: pre-Open's until Tune, then the negotiated one */
    uint32_t heartbeat;   /* seconds, 0 = none */
    uint32_t tuned_frame_max; /* the Tune result, in force from Open on */
    uint64_t id, connected_at;
    uint64_t opened_ms, last_recv_ms, last_send_ms, deadline_ms;
    sc_stream *streams;
    struct event *resume; /* delivers again next turn (a filter passed over many chunks) */
    uint32_t correlation; /* of the requests the server sends (ConsumerUpdate) */
    uint8_t deliver_version; /* 2 once ExchangeCommandVersions says the client takes it */
    bool deleting;        /* in its own Delete: the MetadataUpdate goes after the response */
    bool update_due;      /* ... and one is due */
    sc_publisher *pubs[SC_IDS];
    sc_sub *subs[SC_IDS];
    sc_pending *pending; /* a ring, in sequence order */
    size_t pend_head, pend_count, pend_cap;
};

/* ---- sconn.c ---- */

/* Room for a frame of up to `want` bytes in the output: an sp_buf to
 * encode into, then sc_commit. */
sp_buf sc_out(sconn *c, size_t want);
void sc_commit(sconn *c, sp_buf *b);
void sc_response(sconn *c, uint16_t key, uint32_t correlation_id, uint16_t code);
/* Sends Close(code, reason) and waits for its response (RabbitMQ uses
 * correlation id 1 for its own Close). */
void sc_close(sconn *c, uint16_t code, const char *reason);
/* Ends the connection: the socket closes once the output is written. */
void sc_teardown(sconn *c);
/* What Open and Metadata name as this node: stream.advertised_host (or
 * the node name's host part) and stream.advertised_port (or the first
 * listener's bound port), as text. */
void sc_advertised(const sconn_hub *h, char *host, size_t hostlen, char *port, size_t portlen);

/* ---- handshake.c ---- */

/* A command before Open; false when it is not one the step allows (the
 * caller closes silently, as RabbitMQ does). */
bool sc_handshake_command(sconn *c, const sp_command *cmd);

/* ---- after Open (streams.c, publish.c, subscribe.c) ---- */

/* The stream queue `name` of c's vhost; NULL when there is none (or the
 * queue of that name is not a stream). */
queue *sc_find_stream(sconn *c, sp_slice name);
/* Whether c's user may `kind` the resource `name` in its vhost. */
bool sc_allowed(sconn *c, access_kind kind, sp_slice name);
/* c's entry for stream q (named `name`), made and watched on first use;
 * NULL when out of memory. sc_stream_release drops a user and, with the
 * last, the watch. */
sc_stream *sc_stream_use(sconn *c, queue *q, sp_slice name);
void sc_stream_release(sc_stream *st);
/* publish.c and subscribe.c: drop what uses st, without releasing it
 * (the caller does; or the queue is gone: `gone`, no unwatching and no
 * single-active-consumer hand-over). */
void sc_publishers_drop(sconn *c, sc_stream *st);
void sc_subs_drop(sconn *c, sc_stream *st, bool gone);
/* subscribe.c: more is committed to st (NULL: any), or output drained:
 * deliver. sc_sub_deliver: one subscription. */
void sc_subs_deliver(sconn *c, sc_stream *st);
void sc_sub_deliver(sconn *c, sc_sub *s);
/* subscribe.c: where an offset specification starts a reader. */
stream_start sc_start_of(sp_offset_spec o);
/* subscribe.c: positions s's reader at `start` (a new reader); false
 * when it cannot be opened. */
bool sc_sub_seek(sc_sub *s, const stream_start *start);
/* sac.c: a new sac subscription joins its group (active if it is the
 * first: told so with ConsumerUpdate); one leaving hands the group to the
 * next (`promote`: not when the stream itself is gone). */
void sc_sac_joined(sconn *c, sc_sub *s);
void sc_sac_left(sconn *c, sc_sub *s, bool promote);
/* The client's ConsumerUpdate response: where the active one starts. */
void sc_sac_updated(sconn *c, const sp_command *cmd);
bool sc_publish_command(sconn *c, const sp_command *cmd);
/* streams.c: Create's arguments as queue arguments (x-queue-type stream
 * and the x- forms of those RabbitMQ maps) in buf; false for a bad value.
 * sc_name_ok: a name Create takes (RabbitMQ 3.10.8: not "", not amq.*).
 * sc_code_of: an AMQP refusal as the stream protocol's code. */
bool sc_stream_arguments(sp_list args, uint8_t *buf, size_t cap, amqp_bytes *out);
bool sc_name_ok(sp_slice name);
uint16_t sc_code_of(const amqp_error *err);
/* superstream.c: the index of stream q among the partitions of super
 * stream `super` (the exchange of that name in c's vhost); -1: not one. */
int32_t sc_partition_index(sconn *c, sp_slice super, const queue *q);
/* superstream.c: Route, Partitions, CreateSuperStream, DeleteSuperStream. */
bool sc_superstream_command(sconn *c, const sp_command *cmd);
bool sc_subscribe_command(sconn *c, const sp_command *cmd);

/* A command after Open other than Heartbeat and Close; false for one not
 * served here (the caller answers unknown frame). */
bool sc_command(sconn *c, const sp_command *cmd);
/* Sends the PublishConfirms whose appends the journal has synced. */
void sc_flush_confirms(sconn *c);
/* MetadataUpdate(stream not available) for each stream c uses. */
void sc_streams_unavailable(sconn *c);
/* Drops every publisher and subscription (closing, freeing). */
void sc_forget_streams(sconn *c);

#endif
