/* The client against a scripted server over an in-memory pipe: the
 * handshake and tune negotiation, calls one at a time, deliveries gathered
 * from several body frames, publishing split to frame_max with confirm
 * sequence numbers, the server's channel and connection closes, our
 * protocol errors (close with the reason kept), bounded output, a free
 * from inside a handler; and real sockets for a refused connect and a
 * handshake that times out. */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../client/client.h"

typedef struct heard {
    int opened, closed, chan_opened, chan_closed, replies, delivers, confirms, writable;
    client_error why, chan_why;
    uint32_t reply_ids[8];
    uint64_t seq;
    bool multiple, ack, free_in_closed;
    uint8_t body[20000];
    size_t body_len;
    uint64_t tag;
    char exchange[64], props_type[64];
} heard;

typedef struct fake {
    struct event_base *base;
    transport_flusher *fl;
    transport *srv;
    client *c;
    heard h;
    uint8_t frame[140000]; /* the last frame the server read */
    amqp_frame f;
    amqp_method m;
} fake;

static void h_opened(void *ctx, client *c) { (void)c, ((heard *)ctx)->opened++; }
static void h_closed(void *ctx, client *c, const client_error *why)
{
    heard *h = ctx;
    h->closed++;
    h->why = *why;
    if (h->free_in_closed)
        client_free(c);
}
static void h_chan_opened(void *ctx, client *c, uint16_t ch) { (void)c, (void)ch, ((heard *)ctx)->chan_opened++; }
static void h_chan_closed(void *ctx, client *c, uint16_t ch, const client_error *why)
{
    (void)c, (void)ch;
    heard *h = ctx;
    h->chan_closed++;
    h->chan_why = *why;
}
static void h_reply(void *ctx, client *c, uint16_t ch, const amqp_method *m)
{
    (void)c, (void)ch;
    heard *h = ctx;
    h->reply_ids[h->replies++ % 8] = m->id;
}
static void h_deliver(void *ctx, client *c, uint16_t ch, const client_message *m)
{
    (void)c, (void)ch;
    heard *h = ctx;
    h->delivers++;
    h->tag = m->delivery_tag;
    assert_true(m->body.len <= sizeof h->body);
    memcpy(h->body, m->body.ptr, m->body.len);
    h->body_len = m->body.len;
    snprintf(h->exchange, sizeof h->exchange, "%.*s", (int)m->exchange.len, m->exchange.ptr);
    amqp_basic_properties p;
    assert_int_equal(amqp_properties_decode(m->properties, &p, NULL), AMQP_OK);
    snprintf(h->props_type, sizeof h->props_type, "%.*s", (int)p.content_type.len,
             p.content_type.ptr);
}
static void h_confirm(void *ctx, client *c, uint16_t ch, uint64_t seq, bool multiple, bool ack)
{
    (void)c, (void)ch;
    heard *h = ctx;
    h->confirms++;
    h->seq = seq, h->multiple = multiple, h->ack = ack;
}
static void h_writable(void *ctx, client *c) { (void)c, ((heard *)ctx)->writable++; }

static const client_handlers handlers = {
    .opened = h_opened, .closed = h_closed, .channel_opened = h_chan_opened,
    .channel_closed = h_chan_closed, .reply = h_reply, .deliver = h_deliver,
    .confirm = h_confirm, .writable = h_writable,
};

static void nothing(void *ctx) { (void)ctx; }
static void nothing_drained(void *ctx, size_t n) { (void)ctx, (void)n; }
static void nothing_closed(void *ctx, int e) { (void)ctx, (void)e; }
static const transport_handlers srv_handlers = {nothing, nothing_drained, nothing_closed};

static void run(fake *f)
{
    for (int i = 0; i < 8; i++)
        event_base_loop(f->base, EVLOOP_NONBLOCK);
}

/* Reads the next frame the client sent; false when none is there. */
static bool srv_read(fake *f)
{
    run(f);
    amqp_error err;
    amqp_frame fr;
    struct evbuffer *in = transport_input(f->srv);
    if (amqp_frame_read(in, 0, 0, &fr, &err) != AMQP_OK)
        return false;
    memcpy(f->frame, fr.payload, fr.size);
    f->f = fr;
    f->f.payload = f->frame;
    evbuffer_drain(in, fr.size + AMQP_FRAME_OVERHEAD);
    if (fr.type == AMQP_FRAME_METHOD)
        assert_int_equal(amqp_method_decode(f->frame, fr.size, &f->m, &err), AMQP_OK);
    return true;
}

static void srv_expect(fake *f, uint32_t id)
{
    assert_true(srv_read(f));
    assert_int_equal(f->f.type, AMQP_FRAME_METHOD);
    if (f->m.id != id)
        fail_msg("expected %s, got %s", amqp_method_name(id), amqp_method_name(f->m.id));
}

static void srv_send(fake *f, uint16_t ch, const amqp_method *m)
{
    uint8_t buf[4096];
    size_t n = amqp_method_encode(m, buf + 7, sizeof buf - 8);
    assert_true(n > 0);
    amqp_frame_header_put(buf, AMQP_FRAME_METHOD, ch, (uint32_t)n);
    buf[7 + n] = AMQP_FRAME_END;
    transport_write(f->srv, buf, n + 8);
}

static void srv_raw(fake *f, uint8_t type, uint16_t ch, const void *p, size_t n)
{
    uint8_t head[7], end = AMQP_FRAME_END;
    amqp_frame_header_put(head, type, ch, (uint32_t)n);
    transport_write(f->srv, head, 7);
    transport_write(f->srv, p, n);
    transport_write(f->srv, &end, 1);
}

static fake *start(const char *uri_text, const client_options *o)
{
    fake *f = calloc(1, sizeof *f);
    transport *ends[2];
    client_uri uri;
    char err[128];
    assert_non_null(f);
    assert_non_null(f->base = event_base_new());
    assert_non_null(f->fl = transport_flusher_new(f->base));
    assert_true(transport_pipe_pair(f->fl, f->base, 0, ends));
    f->srv = ends[1];
    transport_start(f->srv, &srv_handlers, f);
    assert_true(client_uri_parse(uri_text, &uri, err, sizeof err));
    assert_non_null(f->c = client_attach(f->base, ends[0], &uri, o, &handlers, &f->h));
    return f;
}

static void stop(fake *f)
{
    if (f->c)
        client_free(f->c);
    transport_free(f->srv);
    transport_flusher_free(f->fl);
    event_base_free(f->base);
    free(f);
}

/* Protocol header, start, start-ok, tune, tune-ok, open, open-ok. */
static fake *open_conn(const client_options *o, uint32_t frame_max)
{
    fake *f = start("amqp://us%65r:pw@/vh", o);
    run(f);
    uint8_t head[8];
    assert_int_equal(evbuffer_remove(transport_input(f->srv), head, 8), 8);
    assert_memory_equal(head, AMQP_PROTOCOL_HEADER, 8);
    amqp_method m = {.id = AMQP_CONNECTION_START};
    m.connection_start.version_minor = 9;
    m.connection_start.mechanisms = AMQP_CSTR("AMQPLAIN PLAIN");
    m.connection_start.locales = AMQP_CSTR("en_US");
    uint8_t props[128];
    amqp_writer w;
    amqp_writer_init(&w, props, sizeof props);
    size_t mark = amqp_table_begin(&w);
    amqp_put_field_str(&w, "product", AMQP_CSTR("RabbitMQ"));
    amqp_put_field_str(&w, "version", AMQP_CSTR("3.10.8"));
    amqp_table_end(&w, mark);
    m.connection_start.server_properties = (amqp_bytes){props + 4, (uint32_t)w.len - 4};
    srv_send(f, 0, &m);
    srv_expect(f, AMQP_CONNECTION_START_OK);
    assert_true(amqp_bytes_equal_cstr(f->m.connection_start_ok.mechanism, "PLAIN"));
    assert_int_equal(f->m.connection_start_ok.response.len, 8);
    assert_memory_equal(f->m.connection_start_ok.response.ptr, "\0user\0pw", 8);
    assert_string_equal(client_server_product(f->c), "RabbitMQ");
    assert_string_equal(client_server_version(f->c), "3.10.8");
    m = (amqp_method){.id = AMQP_CONNECTION_TUNE};
    m.connection_tune.channel_max = 2047;
    m.connection_tune.frame_max = frame_max;
    m.connection_tune.heartbeat = 30;
    srv_send(f, 0, &m);
    srv_expect(f, AMQP_CONNECTION_TUNE_OK);
    assert_int_equal(f->m.connection_tune_ok.channel_max, CLIENT_MAX_CHANNELS);
    assert_int_equal(f->m.connection_tune_ok.frame_max, frame_max);
    assert_int_equal(f->m.connection_tune_ok.heartbeat, 30); /* ours 60, the smaller */
    srv_expect(f, AMQP_CONNECTION_OPEN);
    assert_true(amqp_bytes_equal_cstr(f->m.connection_open.virtual_host, "vh"));
    m = (amqp_method){.id = AMQP_CONNECTION_OPEN_OK};
    srv_send(f, 0, &m);
    run(f);
    assert_int_equal(f->h.opened, 1);
    assert_true(client_is_open(f->c));
    assert_int_equal(client_frame_max(f->c), frame_max);
    return f;
}

static void open_channel(fake *f, uint16_t ch)
{
    assert_true(client_channel_open(f->c, ch));
    assert_false(client_channel_open(f->c, ch)); /* in use */
    srv_expect(f, AMQP_CHANNEL_OPEN);
    assert_int_equal(f->f.channel, ch);
    amqp_method ok = {.id = AMQP_CHANNEL_OPEN_OK};
    srv_send(f, ch, &ok);
    run(f);
    assert_true(client_channel_is_open(f->c, ch));
}

static void test_handshake_and_calls(void **state)
{
    (void)state;
    fake *f = open_conn(NULL, 131072);
    open_channel(f, 1);
    amqp_method d = {.id = AMQP_QUEUE_DECLARE};
    d.queue_declare.queue = AMQP_CSTR("q");
    amqp_method b = {.id = AMQP_QUEUE_BIND};
    b.queue_bind.queue = AMQP_CSTR("q");
    b.queue_bind.exchange = AMQP_CSTR("x");
    assert_true(client_call(f->c, 1, &d));
    assert_true(client_call(f->c, 1, &b));
    srv_expect(f, AMQP_QUEUE_DECLARE);
    assert_false(srv_read(f)); /* the bind waits for declare-ok */
    amqp_method ok = {.id = AMQP_QUEUE_DECLARE_OK};
    ok.queue_declare_ok.queue = AMQP_CSTR("q");
    srv_send(f, 1, &ok);
    srv_expect(f, AMQP_QUEUE_BIND);
    ok = (amqp_method){.id = AMQP_QUEUE_BIND_OK};
    srv_send(f, 1, &ok);
    run(f);
    assert_int_equal(f->h.replies, 2);
    assert_int_equal(f->h.reply_ids[0], AMQP_QUEUE_DECLARE_OK);
    assert_int_equal(f->h.reply_ids[1], AMQP_QUEUE_BIND_OK);
    /* the server closes the channel */
    amqp_method cl = {.id = AMQP_CHANNEL_CLOSE};
    cl.channel_close.reply_code = 404;
    cl.channel_close.reply_text = AMQP_CSTR("NOT_FOUND - no queue 'q'");
    srv_send(f, 1, &cl);
    srv_expect(f, AMQP_CHANNEL_CLOSE_OK);
    assert_int_equal(f->h.chan_closed, 1);
    assert_int_equal(f->h.chan_why.kind, CLIENT_ERR_SERVER_CLOSE);
    assert_int_equal(f->h.chan_why.code, 404);
    assert_string_equal(f->h.chan_why.text, "NOT_FOUND - no queue 'q'");
    assert_false(client_call(f->c, 1, &d));
    /* a clean close */
    client_close(f->c, 200, "bye");
    srv_expect(f, AMQP_CONNECTION_CLOSE);
    assert_int_equal(f->m.connection_close.reply_code, 200);
    amqp_method cok = {.id = AMQP_CONNECTION_CLOSE_OK};
    srv_send(f, 0, &cok);
    run(f);
    assert_int_equal(f->h.closed, 1);
    assert_int_equal(f->h.why.kind, CLIENT_OK);
    stop(f);
}

static void send_delivery(fake *f, uint64_t tag, const uint8_t *body, size_t len, size_t piece)
{
    amqp_method m = {.id = AMQP_BASIC_DELIVER};
    m.basic_deliver.consumer_tag = AMQP_CSTR("ctag");
    m.basic_deliver.delivery_tag = tag;
    m.basic_deliver.exchange = AMQP_CSTR("ex");
    m.basic_deliver.routing_key = AMQP_CSTR("rk");
    srv_send(f, 1, &m);
    amqp_basic_properties p = {.flags = AMQP_BASIC_CONTENT_TYPE_FLAG,
                               .content_type = AMQP_CSTR("text/plain")};
    uint8_t hdr[256];
    amqp_writer w;
    amqp_writer_init(&w, hdr, sizeof hdr);
    amqp_put_u16(&w, 60);
    amqp_put_u16(&w, 0);
    amqp_put_u64(&w, len);
    w.len += amqp_properties_encode(&p, hdr + w.len, sizeof hdr - w.len);
    srv_raw(f, AMQP_FRAME_HEADER, 1, hdr, w.len);
    for (size_t off = 0; off < len; off += piece)
        srv_raw(f, AMQP_FRAME_BODY, 1, body + off, len - off < piece ? len - off : piece);
}

static void test_deliveries(void **state)
{
    (void)state;
    fake *f = open_conn(NULL, 4096);
    open_channel(f, 1);
    static uint8_t body[10000];
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (uint8_t)(i * 7);
    send_delivery(f, 5, body, sizeof body, 4088); /* three body frames */
    send_delivery(f, 6, body, 100, 4088);         /* one: handed out in place */
    send_delivery(f, 7, body, 0, 4088);           /* none */
    run(f);
    assert_int_equal(f->h.delivers, 3);
    assert_int_equal(f->h.tag, 7);
    assert_int_equal(f->h.body_len, 0);
    assert_string_equal(f->h.exchange, "ex");
    assert_string_equal(f->h.props_type, "text/plain");
    f->h.delivers = 0;
    send_delivery(f, 8, body, sizeof body, 4088);
    run(f);
    assert_int_equal(f->h.body_len, sizeof body);
    assert_memory_equal(f->h.body, body, sizeof body);
    assert_true(client_ack(f->c, 1, 8, false));
    srv_expect(f, AMQP_BASIC_ACK);
    assert_int_equal(f->m.basic_ack.delivery_tag, 8);
    stop(f);
}

static void test_publish_confirms(void **state)
{
    (void)state;
    fake *f = open_conn(NULL, 4096);
    open_channel(f, 1);
    amqp_method sel = {.id = AMQP_CONFIRM_SELECT};
    assert_true(client_call(f->c, 1, &sel));
    srv_expect(f, AMQP_CONFIRM_SELECT);
    amqp_method ok = {.id = AMQP_CONFIRM_SELECT_OK};
    srv_send(f, 1, &ok);
    run(f);
    static uint8_t body[9000];
    memset(body, 'b', sizeof body);
    amqp_bytes none = {NULL, 0};
    assert_int_equal(client_publish(f->c, 1, AMQP_CSTR("x"), AMQP_CSTR("k"), false, none,
                                    (amqp_bytes){body, sizeof body}), 1);
    assert_int_equal(client_publish(f->c, 1, AMQP_CSTR("x"), AMQP_CSTR("k"), true, none,
                                    (amqp_bytes){body, 10}), 2);
    srv_expect(f, AMQP_BASIC_PUBLISH);
    assert_true(amqp_bytes_equal_cstr(f->m.basic_publish.exchange, "x"));
    assert_true(srv_read(f));
    assert_int_equal(f->f.type, AMQP_FRAME_HEADER);
    size_t got = 0;
    while (got < sizeof body) {
        assert_true(srv_read(f));
        assert_int_equal(f->f.type, AMQP_FRAME_BODY);
        assert_true(f->f.size <= 4096 - 8);
        got += f->f.size;
    }
    assert_int_equal(got, sizeof body);
    srv_expect(f, AMQP_BASIC_PUBLISH);
    assert_true(f->m.basic_publish.mandatory);
    amqp_method ack = {.id = AMQP_BASIC_ACK};
    ack.basic_ack.delivery_tag = 2;
    ack.basic_ack.multiple = true;
    srv_send(f, 1, &ack);
    run(f);
    assert_int_equal(f->h.confirms, 1);
    assert_int_equal(f->h.seq, 2);
    assert_true(f->h.multiple && f->h.ack);
    stop(f);
}

/* Output past max_output refuses publishes until the server reads. */
static void test_bounded_output(void **state)
{
    (void)state;
    client_options o = {.max_output = 20000};
    fake *f = open_conn(&o, 131072);
    open_channel(f, 1);
    static uint8_t body[8000];
    int taken = 0;
    while (client_publish(f->c, 1, AMQP_CSTR(""), AMQP_CSTR("q"), false, (amqp_bytes){NULL, 0},
                          (amqp_bytes){body, sizeof body}))
        assert_true(++taken < 10);
    assert_true(taken >= 2);
    assert_false(client_writable(f->c));
    run(f); /* the pipe takes it all: drained */
    assert_int_equal(f->h.writable, 1);
    assert_true(client_writable(f->c));
    stop(f);
}

/* A body without a header: we close with 505 and keep why. */
static void test_protocol_error(void **state)
{
    (void)state;
    fake *f = open_conn(NULL, 4096);
    open_channel(f, 1);
    srv_raw(f, AMQP_FRAME_BODY, 1, "x", 1);
    srv_expect(f, AMQP_CONNECTION_CLOSE);
    assert_int_equal(f->m.connection_close.reply_code, AMQP_UNEXPECTED_FRAME);
    assert_int_equal(f->h.closed, 0);
    amqp_method ok = {.id = AMQP_CONNECTION_CLOSE_OK};
    srv_send(f, 0, &ok);
    f->h.free_in_closed = true;
    run(f);
    assert_int_equal(f->h.closed, 1);
    assert_int_equal(f->h.why.kind, CLIENT_ERR_CLIENT_CLOSE);
    assert_int_equal(f->h.why.code, AMQP_UNEXPECTED_FRAME);
    assert_non_null(strstr(f->h.why.text, "content body"));
    f->c = NULL; /* freed in its handler */
    stop(f);
}

/* A frame over the negotiated frame_max: 501. */
static void test_oversize_frame(void **state)
{
    (void)state;
    fake *f = open_conn(NULL, 4096);
    static uint8_t big[5000];
    srv_raw(f, AMQP_FRAME_BODY, 1, big, sizeof big);
    srv_expect(f, AMQP_CONNECTION_CLOSE);
    assert_int_equal(f->m.connection_close.reply_code, AMQP_FRAME_ERROR);
    stop(f);
}

static void test_server_close_and_auth(void **state)
{
    (void)state;
    fake *f = open_conn(NULL, 4096);
    amqp_method cl = {.id = AMQP_CONNECTION_CLOSE};
    cl.connection_close.reply_code = 320;
    cl.connection_close.reply_text = AMQP_CSTR("CONNECTION_FORCED - shutdown");
    srv_send(f, 0, &cl);
    srv_expect(f, AMQP_CONNECTION_CLOSE_OK);
    assert_int_equal(f->h.closed, 1);
    assert_int_equal(f->h.why.kind, CLIENT_ERR_SERVER_CLOSE);
    assert_int_equal(f->h.why.code, 320);
    assert_string_equal(f->h.why.text, "CONNECTION_FORCED - shutdown");
    assert_false(client_is_open(f->c));
    stop(f);

    f = start("amqp://u:p@/", NULL);
    run(f);
    evbuffer_drain(transport_input(f->srv), 8);
    cl.connection_close.reply_code = 403;
    cl.connection_close.reply_text = AMQP_CSTR("ACCESS_REFUSED - Login was refused");
    srv_send(f, 0, &cl);
    run(f);
    assert_int_equal(f->h.why.kind, CLIENT_ERR_AUTH);
    assert_int_equal(f->h.why.code, 403);
    stop(f);
}

/* The peer vanishes: NETWORK. */
static void test_peer_gone(void **state)
{
    (void)state;
    fake *f = open_conn(NULL, 4096);
    transport_free(f->srv);
    run(f);
    assert_int_equal(f->h.closed, 1);
    assert_int_equal(f->h.why.kind, CLIENT_ERR_NETWORK);
    client_free(f->c);
    transport_flusher_free(f->fl);
    event_base_free(f->base);
    free(f);
}

static int listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void tcp_case(const char *uri_text, client_error_kind want, const char *text)
{
    struct event_base *base = event_base_new();
    transport_flusher *fl = transport_flusher_new(base);
    heard h = {0};
    client_uri uri;
    char err[64];
    assert_true(client_uri_parse(uri_text, &uri, err, sizeof err));
    client *c = client_connect(base, fl, &uri, NULL, &handlers, &h);
    assert_non_null(c);
    assert_int_equal(h.closed, 0); /* never from inside the call */
    for (int i = 0; i < 400 && !h.closed; i++)
        event_base_loop(base, EVLOOP_ONCE);
    assert_int_equal(h.closed, 1);
    assert_int_equal(h.why.kind, want);
    assert_string_equal(h.why.text, text);
    client_free(c);
    transport_flusher_free(fl);
    event_base_free(base);
}

static void test_tcp(void **state)
{
    (void)state;
    uint16_t port;
    int fd = listener(&port);
    char uri[96];
    close(fd); /* nothing listens there now */
    snprintf(uri, sizeof uri, "amqp://127.0.0.1:%u", port);
    tcp_case(uri, CLIENT_ERR_NETWORK, "Connection refused");
    fd = listener(&port); /* accepts (the kernel does) but never speaks */
    snprintf(uri, sizeof uri, "amqp://localhost:%u?connection_timeout=1000", port);
    tcp_case(uri, CLIENT_ERR_TIMEOUT, "handshake timeout");
    close(fd);
    tcp_case("amqps://127.0.0.1", CLIENT_ERR_UNSUPPORTED, "amqps is not supported");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_and_calls),
        cmocka_unit_test(test_deliveries),
        cmocka_unit_test(test_publish_confirms),
        cmocka_unit_test(test_bounded_output),
        cmocka_unit_test(test_protocol_error),
        cmocka_unit_test(test_oversize_frame),
        cmocka_unit_test(test_server_close_and_auth),
        cmocka_unit_test(test_peer_gone),
        cmocka_unit_test(test_tcp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
