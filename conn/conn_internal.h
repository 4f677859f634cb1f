/* Private to conn/: the connection object, shared by conn.c (frame loop,
 * errors, output, lifecycle) and handshake.c (protocol header, login,
 * tuning, the connection class). */
#ifndef WARREN_CONN_INTERNAL_H
#define WARREN_CONN_INTERNAL_H

#include "conn.h"

typedef enum conn_state {
    S_HEADER,
    S_START_OK,
    S_TUNE_OK,
    S_OPEN_WAIT,
    S_OPEN,
    S_CLOSING,
    S_LINGER,
    S_HELD, /* the handshake failed: silent, not reading, closed at close_deadline_ms */
    S_CLOSED
} conn_state;

#define CHAN_CLOSING ((chan *)1)

/* A channel numbered 256 or more (conn.c's table); ch NULL: an empty slot. */
typedef struct chan_entry {
    uint16_t number;
    chan *ch;
} chan_entry;
#define CLOSE_OK_TIMEOUT_MS 3000
#define LINGER_TIMEOUT_MS 10000

struct conn {
    server *srv;
    loop *loop; /* the loop it runs on: its socket, clock, messages, counters */
    transport *t;
    conn_state state;
    bool loopback;
    bool trusted;            /* conn_attach_trusted: no password, every permission */
    bool held;               /* a refused connection, counted by login_brake_hold */
    bool cancel_notify;
    bool auth_failure_close; /* client asked for connection.close on bad login */
    bool blocked_capable;    /* client handles connection.blocked */
    bool alarm;              /* a resource alarm is on */
    bool blocked_sent;       /* connection.blocked sent, unblocked not yet */
    bool reading_blocked;    /* stopped reading: published during the alarm */
    bool journal_blocked;    /* stopped reading: published while the journal lags */
    bool reading_paused;
    bool output_blocked;
    bool free_scheduled;
    /* its names, in one block (`names`): peer is the client's "host:port",
     * name "peer -> local" as RabbitMQ names connections */
    char *names;
    const char *peer, *peer_host, *host, *name;
    char *user; /* who logged in (NULL before) */
    uint8_t brake_key[16]; /* the peer's address as the login brake counts it */
    vhost *vh;
    uint16_t channel_max;
    uint32_t frame_max;
    uint16_t heartbeat;
    uint64_t opened_ms, last_recv_ms, last_send_ms, close_deadline_ms;
    chan **chans; /* channels 0..nchans-1, nchans <= 256 */
    uint32_t nchans;
    chan_entry *high; /* channels from 256 up: open addressing, high_cap a power of 2 */
    uint32_t nhigh, high_cap;
    uint32_t nopen; /* channels open, against channel_max */
    /* for the management API */
    uint64_t id;
    uint64_t connected_at; /* wall clock ms */
    int peer_port;
    int port;                 /* the local one */
    const char *mechanism;    /* PLAIN, AMQPLAIN or EXTERNAL (a literal) */
    uint8_t *client_props; /* copy of start-ok's client_properties */
    uint32_t client_props_len;
    stats stats;
    uint64_t content_held;  /* bytes of messages being assembled on its channels */
    uint64_t content_limit; /* server_content_limit, for the check on every growth */
};

/* Keeps who logged in, and start-ok's client properties and mechanism for
 * the management API. False when out of memory. */
bool conn_logged_in(conn *c, amqp_bytes user, amqp_bytes props, config_auth_mech mechanism);

/* The connections past connection.open of `user`, and their open
 * channels, on every loop: a walk over the connections, made only for a
 * user who has that limit. */
uint64_t conn_user_connections(server *s, const char *user);
uint64_t conn_user_channels(server *s, const char *user);

/* The protocol header has arrived (or part of it): answer connection.start,
 * or send our header back and close on a wrong one. */
void handshake_header(conn *c);
/* A method on channel 0: the handshake's, in the order it allows them,
 * then close and update-secret. */
int handshake_method(conn *c, const amqp_method *m, amqp_error *err);
/* The client closed: close-ok sent, wait for it to close the socket. */
void conn_linger(conn *c);
/* Marks the connection CLOSED; it is freed from a zero-delay event. */
void conn_teardown(conn *c);

#endif
