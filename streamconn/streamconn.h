/* streamconn: RabbitMQ's stream protocol server inside the broker -- the
 * connections of the stream listeners (stream.listeners.tcp.*): the
 * handshake (PeerProperties, SASL through access/, Tune, Open), streams
 * (Metadata, Create, Delete, StreamStats, offsets), publishers (with
 * deduplication and confirms after the journal sync), subscribers (whole
 * chunks from the log, sendfile over TCP, credit in chunks, filters,
 * single active consumer with ConsumerUpdate) and super streams (Route,
 * Partitions, CreateSuperStream, DeleteSuperStream). A stream is a stream
 * queue (queue/) and a super stream an exchange bound to such queues, so
 * one made either way is usable both ways. The management API lists the
 * connections, publishers and consumers (below).
 *
 * The codec is streamproto/'s; this module owns the connection state.
 * Everything runs on the loop thread, as conn/ does.
 */
#ifndef WARREN_STREAMCONN_H
#define WARREN_STREAMCONN_H

#include "../conn/conn.h"
#include "../streamproto/streamproto.h"

/* The server's stream-protocol connections, as one set: broker/ makes it
 * with the server, hands it accepted sockets, ticks it and tells it about
 * journal syncs. */
typedef struct sconn sconn; /* sconn_hub is core.h's (the server holds it) */

/* NULL when out of memory. sconn_hub_free frees its connections at once
 * (after the loop stopped, or in a test). */
sconn_hub *sconn_hub_new(server *s);
void sconn_hub_free(sconn_hub *h);
/* The stream listeners as bound, in configuration order (broker/ adds
 * them; the first one's port is what Metadata and Open advertise when
 * stream.advertised_port is not set). ip as the API shows it ("::" for
 * every interface). */
void sconn_hub_add_listener(sconn_hub *h, const char *ip, int port);
size_t sconn_hub_listener_count(const sconn_hub *h);
int sconn_hub_listener(const sconn_hub *h, size_t i, const char **ip);

/* Takes an accepted socket ("host:port" of the client in `peer`). */
void sconn_accept(sconn_hub *h, loop *l, int fd, const char *peer);
/* A connection over `t` (not started yet), which it owns from now on
 * (freed when out of memory). The client's address, for loopback_users
 * and the login brake, is the transport's (none: not loopback). */
void sconn_attach(sconn_hub *h, loop *l, transport *t, const char *peer);

/* The housekeeping timer: heartbeats, handshake and close timeouts,
 * refused logins held. */
void sconn_hub_tick(sconn_hub *h, uint64_t now_ms);
/* The journal synced more: PublishConfirms waiting for it go out. */
void sconn_hub_journal_synced(sconn_hub *h);
/* The resource alarms in effect changed (SERVER_ALARM_* bits, 0: none):
 * while any is on, a connection that publishes is no longer read, as
 * RabbitMQ blocks stream publishers. */
void sconn_hub_set_alarm(sconn_hub *h, unsigned alarms);
/* Closes every connection's socket once its output is written (shutdown;
 * no Close frame, as RabbitMQ closes stream sockets). */
void sconn_hub_close_all(sconn_hub *h);
/* Closes the connections of vhost `v` (being deleted: they hear
 * MetadataUpdate for their streams first, and forget the vhost) or of
 * `user` (NULL: any), as RabbitMQ 3.10.8 does; `text` goes to the log. */
void sconn_hub_close_matching(sconn_hub *h, const vhost *v, const char *user, const char *text);
/* Sockets open (in the handshake or not). */
size_t sconn_hub_count(const sconn_hub *h);

/* ---- introspection (the management API) -------------------------------- */

typedef struct sconn_info {
    uint64_t id;
    const char *name;      /* "127.0.0.1:51390 -> 127.0.0.1:5552" */
    const char *peer_host, *host;
    int peer_port, port;
    const char *user, *vhost, *auth_mechanism;
    uint32_t frame_max, heartbeat;
    uint64_t connected_at; /* wall clock ms */
    size_t send_pend;
    sp_list client_properties; /* PeerProperties' pairs (walk a copy with sp_pair_next) */
    const transport *transport;
} sconn_info;

typedef struct sconn_publisher_info {
    uint8_t id;
    const char *stream, *reference; /* reference "" = none */
    uint64_t published, confirmed, errored;
} sconn_publisher_info;

typedef struct sconn_consumer_info {
    uint8_t id;
    const char *stream, *name;   /* name "" = none */
    uint64_t consumed;           /* records delivered */
    uint64_t offset, offset_lag; /* the last delivered offset; committed ones after it */
    uint32_t credits;
    bool single_active, active;
} sconn_consumer_info;

/* Connections past Open, in no set order: NULL prev gives the first. */
sconn *sconn_hub_next(sconn_hub *h, const sconn *prev);
sconn *sconn_hub_find(sconn_hub *h, uint64_t id);
void sconn_describe(const sconn *c, sconn_info *out);
/* Its publishers and subscriptions; the strings live during fn. */
void sconn_foreach_publisher(sconn *c, void (*fn)(void *arg, const sconn_publisher_info *p),
                             void *arg);
void sconn_foreach_consumer(sconn *c, void (*fn)(void *arg, const sconn_consumer_info *s),
                            void *arg);
/* The management API closes it: the socket closes, no Close frame
 * (RabbitMQ 3.10.8's way); the reason goes to the log. */
void sconn_force_close(sconn *c, const char *reason);

#endif
