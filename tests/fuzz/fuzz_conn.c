/* The broker's connection input path (conn/): bytes from a client, over an
 * in-memory pipe, into a real broker (started once; no listener, guest may
 * log in from the pipe). The input follows a real handshake and a
 * channel.open on channel 1 -- or, when the flags say so, replaces them --
 * and arrives in reads of a size the input picks, the server's loop
 * running between reads. Whatever it holds, the client's going away must
 * end the connection: none is left behind (a leak LeakSanitizer would not
 * see, as the server still holds it).
 *
 * Input: flags (bit 0: no handshake), read size, then the client's bytes.
 * FUZZ_LOG=1 shows the broker's log (replaying one input). The broker
 * (fuzz_broker.h) lets a refused handshake close at once. */
#include <event2/buffer.h>
#include <event2/event.h>

#include "../../conn/conn.h"
#include "fuzz_broker.h"

static server *srv;
static uint8_t prefix[1024];
static size_t prefix_len;

static void put_method(const amqp_method *m, uint16_t channel)
{
    size_t n = amqp_method_encode(m, prefix + prefix_len + AMQP_FRAME_HEADER_SIZE,
                                  sizeof prefix - prefix_len - AMQP_FRAME_OVERHEAD);
    FUZZ_CHECK(n > 0);
    amqp_frame_header_put(prefix + prefix_len, AMQP_FRAME_METHOD, channel, (uint32_t)n);
    prefix[prefix_len + AMQP_FRAME_HEADER_SIZE + n] = AMQP_FRAME_END;
    prefix_len += n + AMQP_FRAME_OVERHEAD;
}

static void start_broker(void)
{
    srv = fuzz_broker_start(NULL);
    memcpy(prefix, AMQP_PROTOCOL_HEADER, 8);
    prefix_len = 8;
    static const uint8_t plain[] = "\0guest\0guest";
    put_method(&(amqp_method){.id = AMQP_CONNECTION_START_OK,
                              .connection_start_ok = {.mechanism = AMQP_CSTR("PLAIN"),
                                                      .response = {plain, sizeof plain - 1},
                                                      .locale = AMQP_CSTR("en_US")}},
               0);
    put_method(&(amqp_method){.id = AMQP_CONNECTION_TUNE_OK,
                              .connection_tune_ok = {2047, 131072, 0}},
               0);
    put_method(&(amqp_method){.id = AMQP_CONNECTION_OPEN,
                              .connection_open = {.virtual_host = AMQP_CSTR("/")}},
               0);
    put_method(&(amqp_method){.id = AMQP_CHANNEL_OPEN}, 1);
}

static size_t sockets(server *s) { return server_socket_count(s); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srv)
        start_broker();
    transport *ends[2];
    FUZZ_CHECK(transport_pipe_pair(loop_flusher(admin_loop(srv)), loop_base(admin_loop(srv)), 0,
                                   ends));
    conn_attach(srv, admin_loop(srv), ends[0], "pipe:fuzz");
    fuzz_pipe_session(srv, ends, prefix, prefix_len, data, size, sockets);
    return 0;
}
