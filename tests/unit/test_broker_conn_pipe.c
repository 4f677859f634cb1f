/* A real broker connection over an in-memory pipe, no socket: the test
 * holds the client's end, speaks AMQP on it frame by frame with the codec
 * (handshake, a channel, a queue, a publish and a get), and runs the
 * server's loop between steps. The server has no AMQP listener, and guest
 * may log in from a pipe, which has no (loopback) address. */
#include <event2/buffer.h>
#include <event2/event.h>

#include "../../amqp/amqp_wire.h"
#include "test_broker_util.h"

static void no_listener_any_guest(config *c)
{
    c->listeners_none = true;
    c->loopback_none = true;
}

/* What the client's end heard. */
static int client_closed = -1; /* the error on_closed gave; -1 before */

static void on_read(void *ctx) { (void)ctx; }
static void on_drained(void *ctx, size_t pending) { (void)ctx, (void)pending; }
static void on_closed(void *ctx, int error)
{
    (void)ctx;
    client_closed = error;
}

static const transport_handlers client_handlers = {on_read, on_drained, on_closed};

/* A connection attached to one end of a pipe; the client's end. */
static transport *connect_pipe(void)
{
    transport *ends[2];
    assert_true(transport_pipe_pair(loop_flusher(admin_loop(srv)), loop_base(admin_loop(srv)), 0, ends));
    conn_attach(srv, admin_loop(srv), ends[0], "pipe:1");
    transport_start(ends[1], &client_handlers, NULL);
    return ends[1];
}

static void send_method(transport *t, uint16_t channel, const amqp_method *m)
{
    uint8_t buf[AMQP_FRAME_OVERHEAD + 1024];
    size_t n = amqp_method_encode(m, buf + AMQP_FRAME_HEADER_SIZE, 1024);
    assert_true(n > 0);
    amqp_frame_header_put(buf, AMQP_FRAME_METHOD, channel, (uint32_t)n);
    buf[AMQP_FRAME_HEADER_SIZE + n] = AMQP_FRAME_END;
    transport_write(t, buf, n + AMQP_FRAME_OVERHEAD);
}

/* A content header (no properties) and one body frame. */
static void send_content(transport *t, uint16_t channel, const char *body)
{
    size_t len = strlen(body);
    uint8_t buf[AMQP_FRAME_OVERHEAD + 14];
    amqp_writer w;
    amqp_frame_header_put(buf, AMQP_FRAME_HEADER, channel, 14);
    amqp_writer_init(&w, buf + AMQP_FRAME_HEADER_SIZE, 14);
    amqp_put_u16(&w, AMQP_CLASS_BASIC);
    amqp_put_u16(&w, 0); /* weight */
    amqp_put_u64(&w, len);
    amqp_put_u16(&w, 0); /* property flags: none */
    buf[sizeof buf - 1] = AMQP_FRAME_END;
    transport_write(t, buf, sizeof buf);
    amqp_frame_header_put(buf, AMQP_FRAME_BODY, channel, (uint32_t)len);
    transport_write(t, buf, AMQP_FRAME_HEADER_SIZE);
    transport_write(t, body, len);
    transport_write(t, (const uint8_t[]){AMQP_FRAME_END}, 1);
}

/* The next frame from the server, of `type` on `channel`, its payload
 * copied to `payload` (valid until the next call); the loop runs until it
 * is whole, a bounded number of turns. */
static uint32_t expect_frame(transport *t, uint8_t type, uint16_t channel, uint8_t **payload)
{
    static uint8_t copy[AMQP_FRAME_MIN_SIZE];
    struct evbuffer *in = transport_input(t);
    amqp_frame f;
    amqp_error err;
    int r = AMQP_NEED_MORE;
    for (int turn = 0; turn < 100 && r == AMQP_NEED_MORE; turn++) {
        r = amqp_frame_read(in, sizeof copy, 0, &f, &err);
        if (r == AMQP_NEED_MORE)
            event_base_loop(loop_base(admin_loop(srv)), EVLOOP_NONBLOCK);
    }
    assert_int_equal(r, AMQP_OK);
    assert_int_equal(f.type, type);
    assert_int_equal(f.channel, channel);
    uint32_t size = f.size;
    memcpy(copy, f.payload, size);
    evbuffer_drain(in, size + AMQP_FRAME_OVERHEAD);
    *payload = copy;
    return size;
}

/* The next method, which must be `id` on `channel`; slices point into the
 * frame (valid until the next expect_). */
static amqp_method expect_method(transport *t, uint16_t channel, uint32_t id)
{
    uint8_t *p;
    uint32_t size = expect_frame(t, AMQP_FRAME_METHOD, channel, &p);
    amqp_method m;
    amqp_error err;
    assert_int_equal(amqp_method_decode(p, size, &m, &err), AMQP_OK);
    assert_string_equal(amqp_method_name(m.id), amqp_method_name(id));
    return m;
}

static void handshake(transport *t)
{
    transport_write(t, AMQP_PROTOCOL_HEADER, 8);
    amqp_method m = expect_method(t, 0, AMQP_CONNECTION_START);
    assert_non_null(memmem(m.connection_start.mechanisms.ptr, m.connection_start.mechanisms.len,
                           "PLAIN", 5));
    static const uint8_t plain[] = "\0guest\0guest";
    send_method(t, 0, &(amqp_method){.id = AMQP_CONNECTION_START_OK,
                                     .connection_start_ok = {
                                         .mechanism = AMQP_CSTR("PLAIN"),
                                         .response = {plain, sizeof plain - 1},
                                         .locale = AMQP_CSTR("en_US"),
                                     }});
    m = expect_method(t, 0, AMQP_CONNECTION_TUNE);
    amqp_connection_tune tune = m.connection_tune;
    assert_true(tune.frame_max >= AMQP_FRAME_MIN_SIZE);
    send_method(t, 0, &(amqp_method){.id = AMQP_CONNECTION_TUNE_OK,
                                     .connection_tune_ok = {tune.channel_max, AMQP_FRAME_MIN_SIZE,
                                                            0}});
    send_method(t, 0, &(amqp_method){.id = AMQP_CONNECTION_OPEN,
                                     .connection_open = {.virtual_host = AMQP_CSTR("/")}});
    expect_method(t, 0, AMQP_CONNECTION_OPEN_OK);
}

static void test_publish_and_get_over_a_pipe(void **state)
{
    (void)state;
    transport *t = connect_pipe();
    assert_int_equal(server_socket_count(srv), 1);
    handshake(t);
    assert_int_equal(server_conn_count(srv), 1); /* listed once open */

    send_method(t, 1, &(amqp_method){.id = AMQP_CHANNEL_OPEN});
    expect_method(t, 1, AMQP_CHANNEL_OPEN_OK);
    send_method(t, 1, &(amqp_method){.id = AMQP_QUEUE_DECLARE,
                                     .queue_declare = {.queue = AMQP_CSTR("piped")}});
    amqp_method m = expect_method(t, 1, AMQP_QUEUE_DECLARE_OK);
    assert_true(amqp_bytes_equal_cstr(m.queue_declare_ok.queue, "piped"));
    assert_int_equal(m.queue_declare_ok.message_count, 0);

    send_method(t, 1, &(amqp_method){.id = AMQP_BASIC_PUBLISH,
                                     .basic_publish = {.routing_key = AMQP_CSTR("piped")}});
    send_content(t, 1, "through the pipe");
    send_method(t, 1, &(amqp_method){.id = AMQP_BASIC_GET,
                                     .basic_get = {.queue = AMQP_CSTR("piped"), .no_ack = true}});
    m = expect_method(t, 1, AMQP_BASIC_GET_OK);
    assert_true(amqp_bytes_equal_cstr(m.basic_get_ok.routing_key, "piped"));
    assert_int_equal(m.basic_get_ok.message_count, 0);
    uint8_t *p;
    uint32_t size = expect_frame(t, AMQP_FRAME_HEADER, 1, &p);
    assert_true(size >= 12);
    assert_int_equal(wire_be64(p + 4), strlen("through the pipe"));
    size = expect_frame(t, AMQP_FRAME_BODY, 1, &p);
    assert_int_equal(size, strlen("through the pipe"));
    assert_memory_equal(p, "through the pipe", size);

    send_method(t, 0, &(amqp_method){.id = AMQP_CONNECTION_CLOSE,
                                     .connection_close = {.reply_code = 200,
                                                          .reply_text = AMQP_CSTR("bye")}});
    expect_method(t, 0, AMQP_CONNECTION_CLOSE_OK);
    transport_free(t); /* the client closes its end: the server's sees the end */
    for (int turn = 0; turn < 100 && server_socket_count(srv) > 0; turn++)
        event_base_loop(loop_base(admin_loop(srv)), EVLOOP_NONBLOCK);
    assert_int_equal(server_socket_count(srv), 0);
}

/* The server ends a connection (a bad protocol header): the client's end
 * reads what was sent, then an orderly end. */
static void test_server_close_seen_by_the_client(void **state)
{
    (void)state;
    transport *t = connect_pipe();
    client_closed = -1;
    transport_write(t, "HTTP/1.1", 8);
    for (int turn = 0; turn < 100 && client_closed < 0; turn++)
        event_base_loop(loop_base(admin_loop(srv)), EVLOOP_NONBLOCK);
    assert_int_equal(client_closed, 0);
    struct evbuffer *in = transport_input(t);
    assert_int_equal(evbuffer_get_length(in), 8);
    assert_memory_equal(evbuffer_pullup(in, 8), AMQP_PROTOCOL_HEADER, 8);
    assert_int_equal(server_socket_count(srv), 0);
    transport_free(t);
}

int main(void)
{
    adjust_config = no_listener_any_guest;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_publish_and_get_over_a_pipe),
        cmocka_unit_test(test_server_close_seen_by_the_client),
    };
    return cmocka_run_group_tests_name("broker_conn_pipe", tests, setup, teardown);
}
