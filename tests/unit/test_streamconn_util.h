/* The stream-protocol unit tests' client: a broker (test_broker_util.h)
 * without listeners, a stream connection attached to one end of an
 * in-memory pipe, frames built with streamproto's puts and read back with
 * its framing, the server's loop run between steps. Header-only. */
#ifndef WARREN_TEST_STREAMCONN_UTIL_H
#define WARREN_TEST_STREAMCONN_UTIL_H

#include <event2/buffer.h>
#include <event2/event.h>
#include <unistd.h>

#include "../../streamconn/streamconn.h"
#include "../../streamproto/streamproto.h"
#include "test_broker_util.h"

static int client_closed = -1; /* the error the client end's on_closed gave; -1 before */

static void sc_on_read(void *ctx) { (void)ctx; }
static void sc_on_drained(void *ctx, size_t pending) { (void)ctx, (void)pending; }
static void sc_on_closed(void *ctx, int error) { (void)ctx, client_closed = error; }
static const transport_handlers sc_client_handlers = {sc_on_read, sc_on_drained, sc_on_closed};

static void run_loop(void) { event_base_loop(loop_base(admin_loop(srv)), EVLOOP_NONBLOCK); }

/* A stream connection on a pipe; the client's end. */
static transport *sc_connect(void)
{
    transport *ends[2];
    client_closed = -1;
    assert_true(transport_pipe_pair(loop_flusher(admin_loop(srv)), loop_base(admin_loop(srv)), 0,
                                    ends));
    sconn_attach(server_stream_hub(srv), admin_loop(srv), ends[0], "pipe:1");
    transport_start(ends[1], &sc_client_handlers, NULL);
    return ends[1];
}

/* Frames to send: begin, put what the command holds, end and write. */
static uint8_t sc_frame_buf[65536];
static sp_buf sc_begin(uint16_t key, uint32_t correlation_id, size_t *start)
{
    sp_buf b = {sc_frame_buf, sizeof sc_frame_buf, 0, false};
    *start = sp_frame_begin(&b, key, 1);
    if (correlation_id)
        sp_put_u32(&b, correlation_id);
    return b;
}

static void sc_send(transport *t, sp_buf *b, size_t start)
{
    assert_true(sp_frame_end(b, start));
    transport_write(t, b->p, b->len);
}

static sp_slice sc_str(const char *s) { return (sp_slice){(const uint8_t *)s, (uint32_t)strlen(s)}; }

/* The next frame from the server, copied (valid until the next call); the
 * loop runs until it is whole, a bounded number of turns (with a pause
 * between them: a confirm waits for the journal's sync thread). False when
 * the server closed the pipe instead. */
static uint8_t sc_in_copy[1 << 20];
static bool sc_recv(transport *t, sp_frame *f)
{
    struct evbuffer *in = transport_input(t);
    for (int turn = 0; turn < 5000; turn++) {
        size_t len = evbuffer_get_length(in), used;
        sp_status st = len ? sp_frame_next(evbuffer_pullup(in, -1), len, 0, f, &used) : SP_NEED_MORE;
        if (st == SP_DONE) {
            assert_true(used <= sizeof sc_in_copy);
            evbuffer_remove(in, sc_in_copy, used);
            f->body = sc_in_copy + SP_SIZE_LEN + SP_HEADER_LEN;
            return true;
        }
        if (client_closed >= 0)
            return false;
        run_loop();
        if (turn > 100)
            usleep(1000);
    }
    fail_msg("no frame from the server");
    return false;
}

static inline uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }
static inline uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

/* The next frame must be `key`; returns a response's code (0 otherwise). */
static uint16_t sc_expect(transport *t, uint16_t key, sp_frame *f)
{
    assert_true(sc_recv(t, f));
    assert_int_equal(f->key, key);
    return (key & SP_RESPONSE) && f->body_len >= 6 ? be16(f->body + 4) : 0;
}

static bool sc_closed(transport *t)
{
    sp_frame f;
    while (sc_recv(t, &f))
        ;
    return client_closed >= 0;
}

static uint16_t sc_authenticate(transport *t, const char *user, const char *password)
{
    size_t start;
    sp_buf b = sc_begin(SP_SASL_AUTHENTICATE, 3, &start);
    uint8_t plain[256];
    int n = snprintf((char *)plain + 1, sizeof plain - 1, "%s%c%s", user, 0, password);
    plain[0] = 0;
    sp_put_str(&b, sc_str("PLAIN"));
    sp_put_bytes(&b, (sp_slice){plain, (uint32_t)n + 1});
    sc_send(t, &b, start);
    sp_frame f;
    return sc_expect(t, SP_SASL_AUTHENTICATE | SP_RESPONSE, &f);
}

/* SASL, Tune and Open as guest in "/". */
static void sc_handshake(transport *t)
{
    assert_int_equal(sc_authenticate(t, "guest", "guest"), SP_OK);
    sp_frame f;
    sc_expect(t, SP_TUNE, &f);
    size_t start;
    sp_buf b = sc_begin(SP_TUNE | SP_RESPONSE, 0, &start);
    sp_put_u32(&b, 1048576);
    sp_put_u32(&b, 0);
    sc_send(t, &b, start);
    b = sc_begin(SP_OPEN, 4, &start);
    sp_put_str(&b, sc_str("/"));
    sc_send(t, &b, start);
    assert_int_equal(sc_expect(t, SP_OPEN | SP_RESPONSE, &f), SP_OK);
}

#endif
