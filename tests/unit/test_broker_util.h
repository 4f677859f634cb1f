/* The fixture shared by broker unit tests that need a real server: one
 * started on 127.0.0.1:0 with a fresh data directory (the server opens its
 * stores there) and the log off, freed and removed afterwards. Header-only,
 * so each test_broker_*.c stays one translation unit. */
#ifndef WARREN_TEST_BROKER_UTIL_H
#define WARREN_TEST_BROKER_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_broker_start.h"

static server *srv;
static char dir[64];
/* Set by a test that wants other settings than these. */
static void (*adjust_config)(config *c);

/* A server on `dir` (a restart when the directory holds one's stores). */
static server *start_server(void)
{
    config c;
    config_defaults(&c);
    strcpy(c.listen_host, "127.0.0.1");
    c.listen_port = 0;
    strcpy(c.data_dir, dir);
    if (adjust_config)
        adjust_config(&c);
    return test_broker_new(&c);
}

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/warren-unit-XXXXXX");
    assert_non_null(mkdtemp(dir));
    log_set_level(LOG_NONE);
    srv = start_server();
    return srv ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[96];
    test_broker_free(srv);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

#endif
