/* federation: Warren as the downstream of RabbitMQ's federation
 * (rabbitmq_federation 3.10). Upstreams are the vhost's runtime parameters
 * (federation-upstream, federation-upstream-set); the policy keys
 * federation-upstream, federation-upstream-set and
 * federation-upstream-pattern pick the upstreams of an exchange or queue,
 * and for every (object, upstream) pair a link runs on the broker's loop
 * as an AMQP 0-9-1 client (client/) of the upstream:
 *
 * - an exchange link declares on the upstream the queue "federation: X ->
 *   CLUSTER" (x-expires / x-message-ttl from the upstream's expires /
 *   message-ttl), an internal fanout exchange bound to the upstream
 *   exchange with the local exchange's bindings (kept in step with them),
 *   consumes the queue and publishes into the local exchange with
 *   x-received-from, dropping messages that have made max-hops hops or
 *   came through this cluster;
 * - a queue link consumes from the upstream queue of the same name (or the
 *   upstream's `queue`) only while the local queue has nothing ready and a
 *   consumer that could take more, with basic.qos prefetch-count, and puts
 *   what it gets into the local queue.
 * Upstream deliveries are acked per ack-mode: on-confirm once the local
 * copy is safe (journaled where it must be), on-publish once enqueued,
 * no-ack not at all. A link whose connection fails says why in its status
 * and tries again after reconnect-delay.
 *
 * Policies and parameters are looked at once a second, so a change starts
 * or stops links within a second; binding changes go upstream as fast.
 * Nothing runs while no vhost has an upstream. */
#ifndef WARREN_FEDERATION_H
#define WARREN_FEDERATION_H

#include "../conn/conn.h"

/* Runs the links of every vhost of `s` on its first loop; NULL when out
 * of memory. federation_free closes the links' connections (their
 * unacked deliveries go back to the upstreams). */
federation *federation_new(server *s);
void federation_free(federation *f);

/* The journal synced up to `synced`: on-confirm links ack what it covers. */
void federation_journal_synced(federation *f, journal_seq synced);

/* One link, as GET /api/federation-links shows it (rabbit_federation_status
 * and rabbitmq_federation_mgmt's fields). Strings are valid during the
 * callback; error and local_connection are "" when they do not apply. */
typedef struct fed_link_info {
    bool queue; /* a queue link, else an exchange link */
    const char *vhost, *object, *upstream_object, *upstream, *consumer_tag;
    const char *id;     /* 8 hex digits */
    const char *status; /* "starting", "running", "error" */
    const char *error, *local_connection;
    const char *uri;    /* without credentials */
    uint64_t timestamp; /* wall clock ms of the last status change */
} fed_link_info;
/* Calls fn for each link, in (vhost, type, name, upstream) order; fn must
 * not change policies or parameters. */
void federation_foreach_link(federation *f, void (*fn)(void *arg, const fed_link_info *l),
                             void *arg);

/* Connects the link `id` of vhost `vhost_name` again now, as RabbitMQ's
 * restart (its unacked deliveries go back upstream); false when there is
 * no such link. */
bool federation_restart_link(federation *f, const char *vhost_name, const char *id);

#endif
