/* Private to streamconn/: the connection object and what its files share
 * (sconn.c: lifecycle, frames, output; handshake.c: PeerProperties to
 * Open; streams.c: Metadata, Create, Delete, offsets, stats; publish.c and
 * subscribe.c: publishers and subscriptions). */
#ifndef WARREN_SCONN_INT_H
#define WARREN_SCONN_INT_H

#include "../streamproto/streamproto.h"
#include "streamconn.h"

/* RabbitMQ's connection steps (rabbit_stream_reader's states). */
typedef enum sc_state {
    SC_CONNECTED,   /* nothing yet: PeerProperties expected */
    SC_PEER_PROPS,  /* peer properties exchanged: SASL */
    SC_TUNING,      /* authenticated, Tune sent: the client's Tune expected */
    SC_TUNED,       /* Open expected */
    SC_OPEN,
    SC_CLOSE_SENT,  /* we sent Close: only its response matters now */
    SC_CLOSED,      /* flushing output, then freed */
} sc_state;

#define SC_CLOSE_TIMEOUT_MS 3000

struct sconn_hub {
    server *srv;
    sconn *conns; /* every socket, linked through next/prev */
    size_t count;
    int port;     /* the first listener's bound port */
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
    bool discard_input;   /* after a framing error: no frame boundary any more */
    uint8_t brake_key[16];
    /* names: peer "host:port", peer_host, host, name "peer -> local" */
    char *names;
    const char *peer, *peer_host, *host, *name;
    int peer_port, port;
    char *user;           /* who logged in (NULL before) */
    const char *mechanism;
    vhost *vh;
    uint32_t frame_max;   /* input bound: pre-Open's until Tune, then the negotiated one */
    uint32_t heartbeat;   /* seconds, 0 = none */
    uint32_t tuned_frame_max; /* the Tune result, in force from Open on */
    uint64_t id, connected_at;
    uint64_t opened_ms, last_recv_ms, last_send_ms, deadline_ms;
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

/* A command after Open other than Heartbeat and Close; false for one not
 * served here (the caller answers unknown frame). */
bool sc_command(sconn *c, const sp_command *cmd);
/* Sends the PublishConfirms whose appends the journal has synced. */
void sc_flush_confirms(sconn *c);
/* Drops every publisher and subscription (closing, freeing). */
void sc_forget_streams(sconn *c);

#endif
