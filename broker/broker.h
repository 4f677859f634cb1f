/* broker: the process -- it builds the server with everything loaded
 * from the store and journal, binds the AMQP listeners, handles signals
 * and runs the loop until SIGTERM/SIGINT. main.c adds the definitions file
 * and the management plane. */
#ifndef WARREN_BROKER_H
#define WARREN_BROKER_H

#include "../admin/admin.h"

typedef struct broker broker;

/* Creates the server from `cfg` (copied), loads it, binds the listeners.
 * NULL on failure (already logged). */
broker *broker_new(const config *cfg);
server *broker_server(broker *b);
/* Runs the loop until SIGTERM/SIGINT; returns the exit status. */
int broker_run(broker *b);
/* Closes every connection, frees the vhosts (durable ones stay in the
 * store) and writes the clean-shutdown marker. */
void broker_free(broker *b);

#endif
