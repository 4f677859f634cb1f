/* A real broker for the harnesses that need one (conn, definitions, api):
 * started once per process on a fresh data directory (in /dev/shm when
 * there is one: the stores' syncs cost less), its log off unless FUZZ_LOG
 * is set, the directory removed at exit. No AMQP listener; guest may log
 * in from anywhere (a pipe has no loopback address); a refused handshake
 * closes at once rather than after the hold that slows password guessing,
 * so each input starts afresh. `adjust` may change more settings. */
#ifndef WARREN_FUZZ_BROKER_H
#define WARREN_FUZZ_BROKER_H

#include <unistd.h>

#include "../unit/test_broker_start.h"
#include "fuzz.h"

static char fuzz_broker_dir[64];

static void fuzz_broker_cleanup(void)
{
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", fuzz_broker_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", fuzz_broker_dir);
}

static inline server *fuzz_broker_start(void (*adjust)(config *c))
{
    strcpy(fuzz_broker_dir, access("/dev/shm", W_OK) == 0 ? "/dev/shm/warren-fuzz-XXXXXX"
                                                           : "/tmp/warren-fuzz-XXXXXX");
    FUZZ_CHECK(mkdtemp(fuzz_broker_dir));
    atexit(fuzz_broker_cleanup);
    config c;
    config_defaults(&c);
    c.listeners_none = true;
    c.stream_listeners_none = true;
    c.loopback_none = true;
    c.login_brake_failures = 0;
    c.login_brake_max_held = 0;
    strcpy(c.data_dir, fuzz_broker_dir);
    if (adjust)
        adjust(&c);
    log_set_level(getenv("FUZZ_LOG") ? LOG_DEBUG : LOG_NONE);
    server *s = test_broker_new(&c);
    FUZZ_CHECK(s);
    return s;
}

#endif
