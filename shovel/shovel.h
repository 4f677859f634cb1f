/* shovel: dynamic shovels, as RabbitMQ's rabbitmq_shovel runs them -- each
 * runtime parameter of component "shovel" is a link that consumes from a
 * source (a queue, or an exchange through a server-named queue bound to
 * it) and publishes to a destination (a queue or an exchange), over two
 * AMQP 0-9-1 client connections (client/) on the broker's loop.
 *
 * The set follows the parameters: shovels_sync (and a 1 s timer, for
 * parameters that change another way: definitions, a vhost deleted)
 * starts a shovel for each new parameter, restarts one whose value
 * changed and stops one whose parameter went. A URI without host is this
 * broker: the link is an in-process connection (an in-memory pipe to a
 * trusted conn/ connection, RabbitMQ's direct connection), so no socket,
 * listener or credential is involved and nothing outside the process can
 * open such a connection.
 *
 * States as RabbitMQ shows them: starting (connecting, declaring),
 * running, terminated (with the reason; it starts again after
 * reconnect-delay seconds, doubling on each failure in a row up to 60 s;
 * reconnect-delay 0 leaves it terminated). With ack-mode on-confirm a
 * message is acked at the source only once the destination confirmed it.
 */
#ifndef WARREN_SHOVEL_H
#define WARREN_SHOVEL_H

#include "../conn/conn.h"

typedef struct shovels shovels;

/* The set of server `s`, on its first loop; starts the shovels the
 * parameters hold. NULL when out of memory. */
shovels *shovels_new(server *s);
/* Stops every shovel (their connections are dropped) and frees the set. */
void shovels_free(shovels *set);
/* Brings the running shovels in line with the parameters now. */
void shovels_sync(shovels *set);
/* Stops and starts again the shovel `name` of `vhost` (RabbitMQ's
 * restart_shovel); false when there is none. */
bool shovels_restart(shovels *set, const char *vhost, const char *name);

typedef enum shovel_state { SHOVEL_STARTING, SHOVEL_RUNNING, SHOVEL_TERMINATED } shovel_state;
/* "starting", "running", "terminated" */
const char *shovel_state_name(shovel_state st);

/* What GET /api/shovels shows of one shovel. Strings are valid until the
 * set next runs; an endpoint field is NULL when the definition has none. */
typedef struct shovel_status {
    const char *vhost, *name;
    shovel_state state;
    const char *reason;    /* terminated: why */
    int64_t since_s;       /* wall clock of the last state change (epoch seconds) */
    const char *src_uri, *dest_uri; /* without credentials */
    const char *src_queue, *src_exchange, *src_exchange_key;
    const char *dest_queue, *dest_exchange, *dest_exchange_key;
    uint64_t forwarded;    /* published to the destination */
    uint64_t acked;        /* acknowledged at the source */
    uint64_t unconfirmed;  /* published, not confirmed yet (on-confirm) */
    uint64_t restarts;     /* times it started again after a failure */
} shovel_status;

/* Calls fn for each shovel of `vhost` (NULL: all), by vhost then name. */
void shovels_foreach(shovels *set, const char *vhost,
                     void (*fn)(void *arg, const shovel_status *st), void *arg);
/* Whether the shovel exists. */
bool shovels_has(shovels *set, const char *vhost, const char *name);

#endif
