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

#include <event2/buffer.h>
#include <event2/event.h>

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

/* ---- a client on an in-memory pipe (fuzz_conn, fuzz_streamconn) ---------- */

static inline void fuzz_pipe_on_read(void *ctx) { (void)ctx; }
static inline void fuzz_pipe_on_drained(void *ctx, size_t pending) { (void)ctx, (void)pending; }
static inline void fuzz_pipe_on_closed(void *ctx, int error) { (void)ctx, (void)error; }

/* Runs the broker's loop n turns, dropping what the client received. */
static inline void fuzz_turns(server *s, transport *client, int n)
{
    struct event_base *base = loop_base(admin_loop(s));
    for (int i = 0; i < n; i++) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        if (client) {
            struct evbuffer *in = transport_input(client);
            evbuffer_drain(in, evbuffer_get_length(in));
        }
    }
}

/* One input against a connection the caller attached to ends[0] (input:
 * flags -- bit 0: no prefix --, read size, then the client's bytes): the
 * prefix (a real handshake), then the bytes in reads of the input's size,
 * the loop running between them; then the client goes, and none of the
 * connections `open` counts may be left. */
static inline void fuzz_pipe_session(server *s, transport **ends, const uint8_t *prefix,
                                     size_t prefix_len, const uint8_t *data, size_t size,
                                     size_t (*open)(server *s))
{
    static const transport_handlers client = {fuzz_pipe_on_read, fuzz_pipe_on_drained,
                                              fuzz_pipe_on_closed};
    fuzz_in in = {data, size};
    bool handshake = !(fuzz_byte(&in) & 1);
    uint8_t b = fuzz_byte(&in);
    size_t step = (size_t)((b & 15) + 1) << (b >> 4 & 7);
    transport_start(ends[1], &client, NULL);
    if (handshake) {
        transport_write(ends[1], prefix, prefix_len);
        fuzz_turns(s, ends[1], 4);
    }
    while (in.len) {
        size_t got;
        const uint8_t *p = fuzz_take(&in, step, &got);
        transport_write(ends[1], p, got);
        fuzz_turns(s, ends[1], 2);
    }
    fuzz_turns(s, ends[1], 8);
    transport_free(ends[1]); /* the client goes */
    for (int i = 0; i < 2000 && open(s) > 0; i++) {
        fuzz_turns(s, NULL, 1);
        if (i >= 100)
            usleep(1000); /* a close that waits for a timer (a sync) */
    }
    FUZZ_CHECK(open(s) == 0);
}

#endif
