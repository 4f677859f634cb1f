/* streamconn: RabbitMQ's stream protocol server inside the broker -- the
 * connections of the stream listeners (stream.listeners.tcp.*): the
 * handshake (PeerProperties, SASL through access/, Tune, Open), streams
 * (Metadata, Create, Delete, StreamStats, offsets), publishers (with
 * deduplication and confirms after the journal sync) and subscribers
 * (whole chunks from the log, credit in chunks). A stream is a stream
 * queue (queue/), so one made either way is usable both ways.
 *
 * The codec is streamproto/'s; this module owns the connection state.
 * Everything runs on the loop thread, as conn/ does.
 */
#ifndef WARREN_STREAMCONN_H
#define WARREN_STREAMCONN_H

#include "../conn/conn.h"

/* The server's stream-protocol connections, as one set: broker/ makes it
 * with the server, hands it accepted sockets, ticks it and tells it about
 * journal syncs. */
typedef struct sconn sconn; /* sconn_hub is core.h's (the server holds it) */

/* NULL when out of memory. sconn_hub_free frees its connections at once
 * (after the loop stopped, or in a test). */
sconn_hub *sconn_hub_new(server *s);
void sconn_hub_free(sconn_hub *h);
/* The port Metadata and Open advertise when stream.advertised_port is not
 * set: the first stream listener's, as bound (broker/ tells it). */
void sconn_hub_set_port(sconn_hub *h, int port);

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
/* Closes every connection: an open one with Close(OK, reason), waiting
 * for its response (shutdown), the others at once. */
void sconn_hub_close_all(sconn_hub *h, const char *reason);
/* Closes the connections of vhost `v` (being deleted) or of `user` (NULL:
 * any) with Close(OK, text), and forgets the vhost. */
void sconn_hub_close_matching(sconn_hub *h, const vhost *v, const char *user, const char *text);
/* Sockets open (in the handshake or not). */
size_t sconn_hub_count(const sconn_hub *h);

#endif
