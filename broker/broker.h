/* broker: the process -- it builds the server with everything loaded
 * from the store and journal, binds the AMQP listeners, handles signals
 * and runs the loop until SIGTERM/SIGINT. main.c adds the definitions file
 * and the management plane. */
#ifndef WARREN_BROKER_H
#define WARREN_BROKER_H

#include "../admin/admin.h"

typedef struct broker broker;

/* Creates the server from `cfg` (copied), loads it, binds the listeners.
 * `replication`: a cluster leader's replication log (cluster/): the
 * journal, streams and metadata record into it and the journal's confirms
 * wait for the cluster's gate; NULL for a single node. NULL on failure
 * (already logged). */
broker *broker_new(const config *cfg, mirror *replication);
server *broker_server(broker *b);
/* Runs the loop until SIGTERM/SIGINT or a fence; returns the exit status. */
int broker_run(broker *b);
/* What a cluster leader's node needs of the broker (cluster_attach). */
journal *broker_journal(broker *b);
meta *broker_meta(broker *b);
/* The cluster fenced this leader (loop thread): close the listeners and
 * every connection (320 CONNECTION_FORCED) and end the loop as a shutdown
 * does; broker_run then returns BROKER_FENCED. */
#define BROKER_FENCED 3
void broker_fence(void *b, const char *why);
/* Closes every connection, frees the vhosts (durable ones stay in the
 * store) and writes the clean-shutdown marker. */
void broker_free(broker *b);

#endif
