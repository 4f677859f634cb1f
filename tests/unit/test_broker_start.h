/* Broker unit tests hold the server (core/), as the modules they test do;
 * this starts the whole broker around it (broker/: store, journal,
 * listeners) and finds it again to free it. test_msgs() is the pool new
 * test messages come from: the last started server's loop's, or one of
 * the test's own before any. Header-only, like test_broker_util.h. */
#ifndef WARREN_TEST_BROKER_START_H
#define WARREN_TEST_BROKER_START_H

#include <stdlib.h>

#include "../../broker/broker.h"

static broker *test_brokers[8];
static msg_pool *test_own_pool;
static server *test_last_server;

/* Without a stream listener unless the test set one (config_defaults'
 * 5552 would clash between tests run at once). */
static inline server *test_broker_new(const config *c)
{
    config *own = malloc(sizeof *own);
    if (!own)
        return NULL;
    *own = *c;
    own->stream_listeners_none |= !c->stream_listeners_explicit;
    for (size_t i = 0; i < sizeof test_brokers / sizeof test_brokers[0]; i++)
        if (!test_brokers[i]) {
            test_brokers[i] = broker_new(own, NULL);
            free(own);
            test_last_server = test_brokers[i] ? broker_server(test_brokers[i]) : NULL;
            return test_last_server;
        }
    free(own);
    return NULL;
}

static inline void test_broker_free(server *s)
{
    for (size_t i = 0; s && i < sizeof test_brokers / sizeof test_brokers[0]; i++)
        if (test_brokers[i] && broker_server(test_brokers[i]) == s) {
            broker_free(test_brokers[i]);
            test_brokers[i] = NULL;
        }
    if (s == test_last_server)
        test_last_server = NULL;
}

static inline msg_pool *test_msgs(void)
{
    if (test_last_server)
        return loop_msgs(admin_loop(test_last_server));
    if (!test_own_pool)
        test_own_pool = msg_pool_new(msg_ids_new());
    return test_own_pool;
}

#endif
