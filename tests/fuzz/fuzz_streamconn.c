/* The stream-protocol connection's input path (streamconn/): bytes from a
 * client, over an in-memory pipe, into a real broker (fuzz_broker.h). The
 * input follows a real handshake (PeerProperties, SASL PLAIN as guest,
 * Tune, Open "/") and the creation of a stream, a publisher and a
 * subscription on it -- or, when the flags say so, replaces them -- and
 * arrives in reads of a size the input picks, the server's loop running
 * between reads. Whatever it holds, the client's going away must end the
 * connection: none is left behind.
 *
 * Input: flags (bit 0: no handshake), read size, then the client's bytes.
 * FUZZ_LOG=1 shows the broker's log (replaying one input). */
#include <event2/buffer.h>
#include <event2/event.h>

#include "../../streamconn/streamconn.h"
#include "../../streamproto/streamproto.h"
#include "fuzz_broker.h"

static server *srv;
static uint8_t prefix[4096];
static sp_buf pre = {prefix, sizeof prefix, 0, false};

static sp_slice s(const char *str) { return (sp_slice){(const uint8_t *)str, (uint32_t)strlen(str)}; }

static size_t begin(uint16_t key, uint32_t correlation_id)
{
    size_t at = sp_frame_begin(&pre, key, 1);
    if (correlation_id)
        sp_put_u32(&pre, correlation_id);
    return at;
}

static void end(size_t at) { FUZZ_CHECK(sp_frame_end(&pre, at)); }

static void start_broker(void)
{
    srv = fuzz_broker_start(NULL);
    size_t at = begin(SP_PEER_PROPERTIES, 1);
    sp_put_u32(&pre, 1);
    sp_put_str(&pre, s("product"));
    sp_put_str(&pre, s("fuzz"));
    end(at);
    at = begin(SP_SASL_HANDSHAKE, 2);
    end(at);
    at = begin(SP_SASL_AUTHENTICATE, 3);
    sp_put_str(&pre, s("PLAIN"));
    sp_put_bytes(&pre, (sp_slice){(const uint8_t *)"\0guest\0guest", 12});
    end(at);
    at = begin(SP_TUNE, 0);
    sp_put_u32(&pre, 1048576);
    sp_put_u32(&pre, 0);
    end(at);
    at = begin(SP_OPEN, 4);
    sp_put_str(&pre, s("/"));
    end(at);
    at = begin(SP_CREATE, 5);
    sp_put_str(&pre, s("fuzz-stream"));
    sp_put_u32(&pre, 0);
    end(at);
    at = begin(SP_DECLARE_PUBLISHER, 6);
    sp_put_u8(&pre, 1);
    sp_put_str(&pre, s("fuzz-ref"));
    sp_put_str(&pre, s("fuzz-stream"));
    end(at);
    at = begin(SP_SUBSCRIBE, 7);
    sp_put_u8(&pre, 1);
    sp_put_str(&pre, s("fuzz-stream"));
    sp_put_u16(&pre, 1); /* first */
    sp_put_u16(&pre, 10);
    sp_put_u32(&pre, 0);
    end(at);
    FUZZ_CHECK(!pre.full);
}

static void on_read(void *ctx) { (void)ctx; }
static void on_drained(void *ctx, size_t pending) { (void)ctx, (void)pending; }
static void on_closed(void *ctx, int error) { (void)ctx, (void)error; }
static const transport_handlers client_handlers = {on_read, on_drained, on_closed};

/* Runs the server's loop a few turns, dropping what the client received. */
static void turns(transport *client, int n)
{
    struct event_base *base = loop_base(admin_loop(srv));
    for (int i = 0; i < n; i++) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        if (client) {
            struct evbuffer *in = transport_input(client);
            evbuffer_drain(in, evbuffer_get_length(in));
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srv)
        start_broker();
    fuzz_in in = {data, size};
    bool handshake = !(fuzz_byte(&in) & 1);
    uint8_t b = fuzz_byte(&in);
    size_t step = (size_t)((b & 15) + 1) << (b >> 4 & 7);

    transport *ends[2];
    FUZZ_CHECK(transport_pipe_pair(loop_flusher(admin_loop(srv)), loop_base(admin_loop(srv)), 0,
                                   ends));
    sconn_attach(server_stream_hub(srv), admin_loop(srv), ends[0], "pipe:fuzz");
    transport_start(ends[1], &client_handlers, NULL);
    if (handshake) {
        transport_write(ends[1], prefix, pre.len);
        turns(ends[1], 6);
    }
    while (in.len) {
        size_t got;
        const uint8_t *p = fuzz_take(&in, step, &got);
        transport_write(ends[1], p, got);
        turns(ends[1], 2);
    }
    turns(ends[1], 8);
    transport_free(ends[1]); /* the client goes */
    sconn_hub *hub = server_stream_hub(srv);
    for (int i = 0; i < 2000 && sconn_hub_count(hub) > 0; i++) {
        turns(NULL, 1);
        if (i >= 100)
            usleep(1000); /* a close that waits for a timer (a sync) */
    }
    FUZZ_CHECK(sconn_hub_count(hub) == 0);
    return 0;
}
