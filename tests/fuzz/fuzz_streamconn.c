/* The stream protocol's connection input path (streamconn/): bytes from a
 * client, over an in-memory pipe, into a real broker (started once; no
 * listener, guest may log in from the pipe). The input follows a real
 * handshake (SaslAuthenticate, Tune, Open), the creation of stream "fz", a
 * publisher and a subscription on it -- or, when the flags say so,
 * replaces them -- and arrives in reads of a size the input picks, the
 * server's loop running between reads. Whatever it holds, the client's
 * going away must end the connection: none is left behind.
 *
 * Input: flags (bit 0: no handshake), read size, then the client's bytes.
 * FUZZ_LOG=1 shows the broker's log (replaying one input). */
#include <event2/buffer.h>
#include <event2/event.h>

#include "../../streamconn/streamconn.h"
#include "fuzz_broker.h"

static server *srv;
static uint8_t prefix[1024];
static size_t prefix_len;

/* Appends one frame: begin, fill with fn, end. */
static sp_buf out(void) { return (sp_buf){prefix + prefix_len, sizeof prefix - prefix_len, 0, false}; }
static void done(sp_buf *b, size_t start)
{
    FUZZ_CHECK(sp_frame_end(b, start));
    prefix_len += b->len;
}

static sp_slice str(const char *s) { return (sp_slice){(const uint8_t *)s, (uint32_t)strlen(s)}; }

static void start_broker(void)
{
    srv = fuzz_broker_start(NULL);
    sp_buf b = out();
    size_t st = sp_frame_begin(&b, SP_SASL_AUTHENTICATE, 1);
    sp_put_u32(&b, 1);
    sp_put_str(&b, str("PLAIN"));
    sp_put_bytes(&b, (sp_slice){(const uint8_t *)"\0guest\0guest", 12});
    done(&b, st);
    b = out();
    st = sp_frame_begin(&b, SP_TUNE | SP_RESPONSE, 1);
    sp_put_u32(&b, 1048576);
    sp_put_u32(&b, 0);
    done(&b, st);
    b = out();
    st = sp_frame_begin(&b, SP_OPEN, 1);
    sp_put_u32(&b, 2);
    sp_put_str(&b, str("/"));
    done(&b, st);
    b = out();
    st = sp_frame_begin(&b, SP_CREATE, 1);
    sp_put_u32(&b, 3);
    sp_put_str(&b, str("fz"));
    sp_put_u32(&b, 0);
    done(&b, st);
    b = out();
    st = sp_frame_begin(&b, SP_DECLARE_PUBLISHER, 1);
    sp_put_u32(&b, 4);
    sp_put_u8(&b, 1);
    sp_put_str(&b, str("ref"));
    sp_put_str(&b, str("fz"));
    done(&b, st);
    b = out();
    st = sp_frame_begin(&b, SP_SUBSCRIBE, 1);
    sp_put_u32(&b, 5);
    sp_put_u8(&b, 1);
    sp_put_str(&b, str("fz"));
    sp_put_u16(&b, SP_OFFSET_FIRST);
    sp_put_u16(&b, 10);
    done(&b, st);
}

static size_t stream_sockets(server *s) { return sconn_hub_count(server_stream_hub(s)); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srv)
        start_broker();
    transport *ends[2];
    FUZZ_CHECK(transport_pipe_pair(loop_flusher(admin_loop(srv)), loop_base(admin_loop(srv)), 0,
                                   ends));
    sconn_attach(server_stream_hub(srv), admin_loop(srv), ends[0], "pipe:fuzz");
    fuzz_pipe_session(srv, ends, prefix, prefix_len, data, size, stream_sockets);
    return 0;
}
