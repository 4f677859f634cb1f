/* Scenarios: errors (which reply code, and whether the channel or the whole
 * connection closes) and malformed input (exact bytes written on the socket
 * of a logged-in rabbitmq-c connection, or on a bare TCP socket for the
 * protocol header). rabbitmq-c then reads the broker's connection.close. */
#define _GNU_SOURCE
#include "conf.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FRAME_END 0xCE

/* ------------------------------------------------------------ errors */

static int expect_channel_error(amqp_connection_state_t conn, int code)
{
    if (conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), code))
        return 1;
    /* A channel error leaves the connection usable. */
    if (conf_channel_open(conn, 1))
        return 1;
    amqp_rpc_reply_t r = conf_sync(conn, 1);
    if (r.reply_type != AMQP_RESPONSE_NORMAL)
        return conf_fail("connection unusable after a channel error: %s", conf_reply_text(r));
    return 0;
}

static int passive_declare_missing_queue_404(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_queue_declare(conn, 1, amqp_cstring_bytes(conf_name("missing")), 1, 0, 0, 0, amqp_empty_table);
    int rc = expect_channel_error(conn, CONF_NOT_FOUND);
    conf_close(conn);
    return rc;
}

static int passive_declare_missing_exchange_404(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_exchange_declare(conn, 1, amqp_cstring_bytes(conf_name("missing")), amqp_cstring_bytes("direct"),
                          1, 0, 0, 0, amqp_empty_table);
    int rc = expect_channel_error(conn, CONF_NOT_FOUND);
    conf_close(conn);
    return rc;
}

static int publish_missing_exchange_404(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    int rc = conf_publish(conn, 1, conf_name("missing"), "k", "lost", NULL);
    if (rc == 0)
        rc = conf_expect_channel_close(conn, 1, conf_sync(conn, 1), CONF_NOT_FOUND);
    conf_close(conn);
    return rc;
}

static int bind_missing_queue_or_exchange_404(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("q");
    int rc = conf_declare_queue(conn, 1, q, 0, 0, 0, conf_no_args);
    if (rc == 0) {
        amqp_queue_bind(conn, 1, amqp_cstring_bytes(conf_name("missing-q")), amqp_cstring_bytes("amq.direct"),
                        amqp_cstring_bytes("k"), amqp_empty_table);
        rc = expect_channel_error(conn, CONF_NOT_FOUND);
    }
    if (rc == 0) {
        amqp_queue_bind(conn, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(conf_name("missing-x")),
                        amqp_cstring_bytes("k"), amqp_empty_table);
        rc = expect_channel_error(conn, CONF_NOT_FOUND);
    }
    conf_close(conn);
    return rc;
}

static int get_missing_queue_404(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_rpc_reply_t r = amqp_basic_get(conn, 1, amqp_cstring_bytes(conf_name("missing")), 1);
    int rc = conf_expect_channel_close(conn, 1, r, CONF_NOT_FOUND);
    conf_close(conn);
    return rc;
}

static int consume_missing_queue_404(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_basic_consume(conn, 1, amqp_cstring_bytes(conf_name("missing")), amqp_empty_bytes, 0, 1, 0,
                       amqp_empty_table);
    int rc = expect_channel_error(conn, CONF_NOT_FOUND);
    conf_close(conn);
    return rc;
}

static int channel_error_isolated(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const char *q = conf_queue_name("q");
    int rc = conf_channel_open(conn, 2);
    if (rc == 0)
        rc = conf_declare_queue(conn, 2, q, 0, 0, 0, conf_no_args);
    if (rc == 0)
        rc = conf_consume(conn, 2, q, "survivor", 1, 0, NULL);
    if (rc == 0) {
        amqp_queue_declare(conn, 1, amqp_cstring_bytes(conf_name("missing")), 1, 0, 0, 0, amqp_empty_table);
        rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_NOT_FOUND);
    }
    if (rc == 0)
        rc = conf_publish(conn, 2, "", q, "still-here", NULL);
    if (rc == 0)
        rc = conf_expect_delivery(conn, "still-here", NULL);
    conf_close(conn);
    return rc;
}

static int method_on_unopened_channel_504(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_queue_declare(conn, 7, amqp_cstring_bytes(conf_name("q")), 0, 0, 1, 1, amqp_empty_table);
    int rc = conf_expect_connection_close(conn, amqp_get_rpc_reply(conn), CONF_CHANNEL_ERROR);
    conf_close(conn);
    return rc;
}

static int immediate_flag_540(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    int status = amqp_basic_publish(conn, 1, amqp_cstring_bytes(""), amqp_cstring_bytes("nowhere"), 0,
                                    1, NULL, amqp_cstring_bytes("now"));
    int rc = status == AMQP_STATUS_OK ? 0 : conf_fail("cannot publish: %s", amqp_error_string2(status));
    if (rc == 0)
        rc = conf_expect_connection_close(conn, conf_sync(conn, 1), CONF_NOT_IMPLEMENTED);
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ malformed */

/* A frame: type, channel, payload of len bytes, then the given end byte. */
static int send_frame(amqp_connection_state_t conn, uint8_t type, uint16_t channel,
                      const void *payload, uint32_t len, uint8_t end)
{
    unsigned char *buf = malloc(8 + (size_t)len);
    if (buf == NULL)
        return conf_fail("out of memory");
    buf[0] = type;
    buf[1] = (unsigned char)(channel >> 8);
    buf[2] = (unsigned char)channel;
    buf[3] = (unsigned char)(len >> 24);
    buf[4] = (unsigned char)(len >> 16);
    buf[5] = (unsigned char)(len >> 8);
    buf[6] = (unsigned char)len;
    if (len)
        memcpy(buf + 7, payload, len);
    buf[7 + len] = end;
    int rc = conf_send_raw(conn, buf, 8 + (size_t)len);
    free(buf);
    return rc;
}

/* Waits for the broker's connection.close and checks its code. */
static int expect_close_code(amqp_connection_state_t conn, int code)
{
    conf_event ev;
    conf_wait_event(conn, CONF_WAIT_MS, &ev);
    conf_event_free(&ev);
    if (ev.kind != CONF_EV_CONNECTION_CLOSE)
        return conf_fail("expected connection.close %d, got event %d (%s)", code, ev.kind, ev.reply_text);
    if (ev.reply_code != code)
        return conf_fail("expected connection.close %d, got %d %s", code, ev.reply_code, ev.reply_text);
    return 0;
}

typedef struct raw_case {
    int frame_max;          /* 0 = default */
    uint8_t type;
    uint16_t channel;
    const unsigned char *payload;
    uint32_t len;
    uint8_t end;
    int expect_code;
} raw_case;

static int run_raw_case(const raw_case *c)
{
    conf_open_opts opts = {.frame_max = c->frame_max};
    amqp_connection_state_t conn = conf_open_with(&opts);
    if (conn == NULL)
        return 1;
    int rc = conf_channel_open(conn, 1);
    if (rc == 0)
        rc = send_frame(conn, c->type, c->channel, c->payload, c->len, c->end);
    if (rc == 0)
        rc = expect_close_code(conn, c->expect_code);
    conf_close(conn);
    return rc;
}

static const unsigned char channel_open_2[] = {0x00, 0x14, 0x00, 0x0A, 0x00};

static int frame_end_byte_wrong_501(void)
{
    raw_case c = {0, AMQP_FRAME_METHOD, 2, channel_open_2, sizeof channel_open_2, 0x00, CONF_FRAME_ERROR};
    return run_raw_case(&c);
}

static int unknown_frame_type_501(void)
{
    raw_case c = {0, 9, 0, NULL, 0, FRAME_END, CONF_FRAME_ERROR};
    return run_raw_case(&c);
}

static int oversized_frame_501(void)
{
    static unsigned char junk[5000];
    junk[1] = 60;   /* looks like a basic method */
    junk[3] = 40;
    raw_case c = {4096, AMQP_FRAME_METHOD, 1, junk, sizeof junk, FRAME_END, CONF_FRAME_ERROR};
    return run_raw_case(&c);
}

static int body_without_header_505(void)
{
    static const unsigned char body[] = "abc";
    raw_case c = {0, AMQP_FRAME_BODY, 1, body, 3, FRAME_END, CONF_UNEXPECTED_FRAME};
    return run_raw_case(&c);
}

static int header_without_method_505(void)
{
    /* basic content header: class 60, weight 0, body size 3, no properties */
    static const unsigned char hdr[] = {0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0};
    raw_case c = {0, AMQP_FRAME_HEADER, 1, hdr, sizeof hdr, FRAME_END, CONF_UNEXPECTED_FRAME};
    return run_raw_case(&c);
}

static int method_during_content_505(void)
{
    conf_open_opts opts = {0};
    amqp_connection_state_t conn = conf_open_with(&opts);
    if (conn == NULL)
        return 1;
    /* basic.publish to "" key "q", then a method where the header must come */
    static const unsigned char publish[] = {0, 60, 0, 40, 0, 0, 0, 1, 'q', 0};
    int rc = conf_channel_open(conn, 1);
    if (rc == 0)
        rc = send_frame(conn, AMQP_FRAME_METHOD, 1, publish, sizeof publish, FRAME_END);
    if (rc == 0)
        rc = send_frame(conn, AMQP_FRAME_METHOD, 1, publish, sizeof publish, FRAME_END);
    if (rc == 0)
        rc = expect_close_code(conn, CONF_UNEXPECTED_FRAME);
    conf_close(conn);
    return rc;
}

/* RabbitMQ 3.10 drops the connection on a method id it does not know (the
 * socket is reset, any connection.close is lost), so either a
 * connection.close 540 or a closed socket is accepted; staying open is not. */
static int expect_dropped(const unsigned char *method, uint32_t len)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    int rc = send_frame(conn, AMQP_FRAME_METHOD, 1, method, len, FRAME_END);
    conf_event ev;
    if (rc == 0) {
        conf_wait_event(conn, CONF_WAIT_MS, &ev);
        conf_event_free(&ev);
        if (ev.kind == CONF_EV_CONNECTION_CLOSE && ev.reply_code != CONF_NOT_IMPLEMENTED)
            rc = conf_fail("expected the connection dropped or closed with 540, got %d %s",
                           ev.reply_code, ev.reply_text);
        else if (ev.kind != CONF_EV_CONNECTION_CLOSE && ev.kind != CONF_EV_ERROR)
            rc = conf_fail("expected the connection dropped, got event %d", ev.kind);
        else
            conf_note("%s", ev.kind == CONF_EV_ERROR ? "socket closed" : "connection.close 540");
    }
    conf_close(conn);
    return rc;
}

static int unknown_method_drops_connection(void)
{
    static const unsigned char m[] = {0x00, 0x3C, 0x03, 0xE7};   /* class 60, method 999 */
    return expect_dropped(m, sizeof m);
}

static int unknown_class_drops_connection(void)
{
    static const unsigned char m[] = {0x03, 0xE7, 0x00, 0x0A};   /* class 999, method 10 */
    return expect_dropped(m, sizeof m);
}

static int truncated_method_args_501(void)
{
    static const unsigned char m[] = {0x00, 0x32, 0x00, 0x0A, 0x00};   /* queue.declare, cut short */
    raw_case c = {0, AMQP_FRAME_METHOD, 1, m, sizeof m, FRAME_END, CONF_FRAME_ERROR};
    return run_raw_case(&c);
}

static int channel_method_on_channel_zero_504(void)
{
    static const unsigned char publish[] = {0, 60, 0, 40, 0, 0, 0, 1, 'q', 0};
    raw_case c = {0, AMQP_FRAME_METHOD, 0, publish, sizeof publish, FRAME_END, CONF_CHANNEL_ERROR};
    return run_raw_case(&c);
}

static int heartbeat_on_nonzero_channel_505(void)
{
    raw_case c = {0, AMQP_FRAME_HEARTBEAT, 1, NULL, 0, FRAME_END, CONF_UNEXPECTED_FRAME};
    return run_raw_case(&c);
}

/* Connects a bare TCP socket to the broker; -1 (failure recorded) on error. */
static int bare_socket(void)
{
    const char *uri = getenv("CONF_URI");
    struct amqp_connection_info info;
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", uri && *uri ? uri : "amqp://guest:guest@127.0.0.1:5672");
    amqp_default_connection_info(&info);
    if (amqp_parse_url(copy, &info) != AMQP_STATUS_OK)
        return conf_fail("bad CONF_URI"), -1;
    char port[16];
    snprintf(port, sizeof port, "%d", info.port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(info.host, port, &hints, &res) != 0 || res == NULL)
        return conf_fail("cannot resolve %s", info.host), -1;
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        freeaddrinfo(res);
        if (fd >= 0)
            close(fd);
        return conf_fail("connect: %s", strerror(errno)), -1;
    }
    freeaddrinfo(res);
    return fd;
}

/* Sends `hello`, then expects exactly the AMQP 0-9-1 header back and EOF. */
static int header_rejected(const void *hello, size_t len)
{
    static const unsigned char want[8] = {'A', 'M', 'Q', 'P', 0, 0, 9, 1};
    int fd = bare_socket();
    if (fd < 0)
        return 1;
    if (write(fd, hello, len) != (ssize_t)len) {
        close(fd);
        return conf_fail("write: %s", strerror(errno));
    }
    unsigned char got[64];
    size_t have = 0;
    int eof = 0;
    long long until = conf_now_ms() + CONF_WAIT_MS;
    while (!eof && have < sizeof got && conf_now_ms() < until) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)(until - conf_now_ms())) <= 0)
            continue;
        ssize_t n = recv(fd, got + have, sizeof got - have, 0);
        if (n <= 0)
            eof = 1;
        else
            have += (size_t)n;
    }
    close(fd);
    CHECK(have == 8 && memcmp(got, want, 8) == 0,
          "expected the AMQP 0-9-1 header back, got %zu bytes", have);
    CHECK(eof, "broker kept the socket open after refusing the header");
    return 0;
}

static int protocol_header_wrong_version(void)
{
    static const unsigned char hello[8] = {'A', 'M', 'Q', 'P', 0, 0, 10, 0};   /* 0-10 */
    return header_rejected(hello, sizeof hello);
}

static int protocol_header_garbage(void)
{
    static const char hello[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    return header_rejected(hello, sizeof hello - 1);
}

const conf_scenario conf_errors_scenarios[] = {
    {"errors.passive_declare_missing_queue_404", 1, passive_declare_missing_queue_404},
    {"errors.passive_declare_missing_exchange_404", 0, passive_declare_missing_exchange_404},
    {"errors.publish_missing_exchange_404", 0, publish_missing_exchange_404},
    {"errors.bind_missing_queue_or_exchange_404", 0, bind_missing_queue_or_exchange_404},
    {"errors.get_missing_queue_404", 0, get_missing_queue_404},
    {"errors.consume_missing_queue_404", 0, consume_missing_queue_404},
    {"errors.channel_error_isolated", 0, channel_error_isolated},
    {"errors.method_on_unopened_channel_504", 0, method_on_unopened_channel_504},
    {"errors.immediate_flag_540", 0, immediate_flag_540},
    {"malformed.frame_end_byte_wrong_501", 0, frame_end_byte_wrong_501},
    {"malformed.unknown_frame_type_501", 0, unknown_frame_type_501},
    {"malformed.oversized_frame_501", 0, oversized_frame_501},
    {"malformed.body_without_header_505", 0, body_without_header_505},
    {"malformed.header_without_method_505", 0, header_without_method_505},
    {"malformed.method_during_content_505", 0, method_during_content_505},
    {"malformed.unknown_method_drops_connection", 0, unknown_method_drops_connection},
    {"malformed.unknown_class_drops_connection", 0, unknown_class_drops_connection},
    {"malformed.truncated_method_args_501", 0, truncated_method_args_501},
    {"malformed.channel_method_on_channel_zero_504", 0, channel_method_on_channel_zero_504},
    {"malformed.heartbeat_on_nonzero_channel_505", 0, heartbeat_on_nonzero_channel_505},
    {"malformed.protocol_header_wrong_version", 0, protocol_header_wrong_version},
    {"malformed.protocol_header_garbage", 0, protocol_header_garbage},
    {NULL, 0, NULL},
};
