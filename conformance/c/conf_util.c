/* Helpers shared by the rabbitmq-c conformance scenarios (interface: conf.h).
 *
 * State is per process: main.c forks one child per scenario, so the parsed
 * URI, the failure detail and the list of names to clean up are plain
 * globals. Names registered with conf_queue_name()/conf_exchange_name() are
 * deleted on a fresh connection when the scenario ends, whether it passed or
 * not. Connections that the broker closed are remembered so conf_close()
 * does not wait for a close-ok that will never come. */
#define _GNU_SOURCE
#include "conf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_S 5
#define RPC_TIMEOUT_S 8
#define MAX_NAMES 64
#define MAX_DEAD 64

const amqp_table_t conf_no_args = {0, NULL};

static struct {
    char uri[1024];
    struct amqp_connection_info info;
    const char *run_id;
} env;

static struct {
    const char *id;
    char detail[1024];
    int failed;
    int quiet;                  /* cleanup: do not record failures */
    char names[MAX_NAMES][256];
    char is_exchange[MAX_NAMES];
    int n_names;
    amqp_connection_state_t dead[MAX_DEAD];
    int n_dead;
} scen;

/* ------------------------------------------------------------ failing */

int conf_fail(const char *fmt, ...)
{
    if (scen.quiet || scen.failed)
        return 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(scen.detail, sizeof scen.detail, fmt, ap);
    va_end(ap);
    scen.failed = 1;
    return 1;
}

void conf_note(const char *fmt, ...)
{
    if (scen.failed)
        return;
    size_t used = strlen(scen.detail);
    if (used > 0 && used < sizeof scen.detail - 2) {
        scen.detail[used++] = ' ';
        scen.detail[used] = '\0';
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(scen.detail + used, sizeof scen.detail - used, fmt, ap);
    va_end(ap);
}

const char *conf_detail(void)
{
    return scen.detail;
}

/* ------------------------------------------------------------ environment */

int conf_env_init(void)
{
    const char *uri = getenv("CONF_URI");
    if (uri == NULL || *uri == '\0')
        uri = "amqp://guest:guest@127.0.0.1:5672";
    snprintf(env.uri, sizeof env.uri, "%s", uri);
    amqp_default_connection_info(&env.info);
    if (amqp_parse_url(env.uri, &env.info) != AMQP_STATUS_OK) {
        fprintf(stderr, "conformance/c: cannot parse CONF_URI %s\n", uri);
        return -1;
    }
    env.run_id = getenv("CONF_RUN_ID");
    if (env.run_id == NULL || *env.run_id == '\0')
        env.run_id = "local";
    return 0;
}

void conf_begin_scenario(const char *scenario_id)
{
    memset(&scen, 0, sizeof scen);
    scen.id = scenario_id;
}

static const char *remember_name(const char *suffix, int is_exchange)
{
    if (scen.n_names >= MAX_NAMES)
        return "conf.too-many-names";
    char *slot = scen.names[scen.n_names];
    snprintf(slot, sizeof scen.names[0], "conf.%s.%s.%s", env.run_id, scen.id, suffix);
    scen.is_exchange[scen.n_names] = (char)is_exchange;
    scen.n_names++;
    return slot;
}

const char *conf_name(const char *suffix)
{
    return remember_name(suffix, -1);
}

const char *conf_queue_name(const char *suffix)
{
    return remember_name(suffix, 0);
}

const char *conf_exchange_name(const char *suffix)
{
    return remember_name(suffix, 1);
}

/* After a channel error: acknowledge the close and reopen the channel. */
static void reset_channel(amqp_connection_state_t conn, amqp_rpc_reply_t reply)
{
    if (reply.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_ok_t ok = {0};
        amqp_send_method(conn, 1, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
        amqp_channel_open(conn, 1);
    }
}

void conf_cleanup_scenario(void)
{
    if (scen.n_names == 0)
        return;
    scen.quiet = 1;
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < scen.n_names; i++) {
            if (scen.is_exchange[i] == (pass == 0))     /* queues first */
                continue;
            amqp_bytes_t name = amqp_cstring_bytes(scen.names[i]);
            if (pass == 0)
                amqp_queue_delete(conn, 1, name, 0, 0);
            else
                amqp_exchange_delete(conn, 1, name, 0);
            reset_channel(conn, amqp_get_rpc_reply(conn));
        }
    }
    conf_close(conn);
}

/* ------------------------------------------------------------ connections */

static void mark_dead(amqp_connection_state_t conn)
{
    for (int i = 0; i < scen.n_dead; i++)
        if (scen.dead[i] == conn)
            return;
    if (scen.n_dead < MAX_DEAD)
        scen.dead[scen.n_dead++] = conn;
}

static int is_dead(amqp_connection_state_t conn)
{
    for (int i = 0; i < scen.n_dead; i++)
        if (scen.dead[i] == conn)
            return 1;
    return 0;
}

amqp_connection_state_t conf_socket(void)
{
    amqp_connection_state_t conn = amqp_new_connection();
    amqp_socket_t *sock = amqp_tcp_socket_new(conn);
    if (sock == NULL) {
        amqp_destroy_connection(conn);
        conf_fail("cannot create socket");
        return NULL;
    }
    struct timeval connect_tv = {CONNECT_TIMEOUT_S, 0};
    int rc = amqp_socket_open_noblock(sock, env.info.host, env.info.port, &connect_tv);
    if (rc != AMQP_STATUS_OK) {
        amqp_destroy_connection(conn);
        conf_fail("connect %s:%d: %s", env.info.host, env.info.port, amqp_error_string2(rc));
        return NULL;
    }
    struct timeval rpc_tv = {RPC_TIMEOUT_S, 0};
    amqp_set_rpc_timeout(conn, &rpc_tv);
    amqp_set_handshake_timeout(conn, &rpc_tv);
    return conn;
}

amqp_rpc_reply_t conf_login(amqp_connection_state_t conn, const conf_open_opts *opts)
{
    static const conf_open_opts defaults = {0};
    if (opts == NULL)
        opts = &defaults;
    /* Advertise the capabilities every modern client sends, so the broker
     * enables consumer cancel notifications and basic.nack. */
    amqp_table_entry_t caps[] = {
        {amqp_cstring_bytes("consumer_cancel_notify"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}},
        {amqp_cstring_bytes("basic.nack"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}},
        {amqp_cstring_bytes("publisher_confirms"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}},
        {amqp_cstring_bytes("exchange_exchange_bindings"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}},
        {amqp_cstring_bytes("connection.blocked"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}},
    };
    amqp_table_entry_t props[1];
    props[0].key = amqp_cstring_bytes("capabilities");
    props[0].value.kind = AMQP_FIELD_KIND_TABLE;
    props[0].value.value.table.num_entries = (int)(sizeof caps / sizeof caps[0]);
    props[0].value.value.table.entries = caps;
    amqp_table_t client_props = {1, props};
    return amqp_login_with_properties(
        conn, opts->vhost ? opts->vhost : env.info.vhost, opts->channel_max,
        opts->frame_max ? opts->frame_max : AMQP_DEFAULT_FRAME_SIZE, opts->heartbeat,
        &client_props, AMQP_SASL_METHOD_PLAIN, opts->user ? opts->user : env.info.user,
        opts->password ? opts->password : env.info.password);
}

amqp_connection_state_t conf_open_with(const conf_open_opts *opts)
{
    amqp_connection_state_t conn = conf_socket();
    if (conn == NULL)
        return NULL;
    amqp_rpc_reply_t r = conf_login(conn, opts);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        conf_fail("login: %s", conf_reply_text(r));
        amqp_destroy_connection(conn);
        return NULL;
    }
    return conn;
}

amqp_connection_state_t conf_open(void)
{
    amqp_connection_state_t conn = conf_open_with(NULL);
    if (conn != NULL && conf_channel_open(conn, 1) != 0) {
        amqp_destroy_connection(conn);
        return NULL;
    }
    return conn;
}

int conf_channel_open(amqp_connection_state_t conn, amqp_channel_t ch)
{
    amqp_channel_open(conn, ch);
    return conf_rpc_failed(conn, "channel.open");
}

void conf_close(amqp_connection_state_t conn)
{
    if (conn == NULL)
        return;
    if (!is_dead(conn))
        amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);
}

const char *conf_reply_text(amqp_rpc_reply_t reply)
{
    static char buf[512];
    switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        return "ok";
    case AMQP_RESPONSE_NONE:
        return "no reply";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        snprintf(buf, sizeof buf, "library error: %s", amqp_error_string2(reply.library_error));
        return buf;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        break;
    }
    if (reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        const amqp_channel_close_t *m = reply.reply.decoded;
        snprintf(buf, sizeof buf, "channel.close %u %.*s", m->reply_code,
                 (int)m->reply_text.len, (const char *)m->reply_text.bytes);
    } else if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        const amqp_connection_close_t *m = reply.reply.decoded;
        snprintf(buf, sizeof buf, "connection.close %u %.*s", m->reply_code,
                 (int)m->reply_text.len, (const char *)m->reply_text.bytes);
    } else {
        snprintf(buf, sizeof buf, "unexpected method 0x%08x", reply.reply.id);
    }
    return buf;
}

int conf_rpc_failed(amqp_connection_state_t conn, const char *what)
{
    amqp_rpc_reply_t r = amqp_get_rpc_reply(conn);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return 0;
    if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CONNECTION_CLOSE_METHOD)
        mark_dead(conn);
    return conf_fail("%s: %s", what, conf_reply_text(r));
}

int conf_expect_channel_close(amqp_connection_state_t conn, amqp_channel_t ch,
                              amqp_rpc_reply_t reply, int code)
{
    if (reply.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION ||
        reply.reply.id != AMQP_CHANNEL_CLOSE_METHOD) {
        if (reply.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
            reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD)
            mark_dead(conn);
        return conf_fail("expected channel.close %d, got %s", code, conf_reply_text(reply));
    }
    const amqp_channel_close_t *m = reply.reply.decoded;
    int got = m->reply_code;
    char text[300];
    snprintf(text, sizeof text, "%s", conf_reply_text(reply));
    amqp_channel_close_ok_t ok = {0};
    amqp_send_method(conn, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
    if (got != code)
        return conf_fail("expected channel.close %d, got %s", code, text);
    return 0;
}

int conf_expect_connection_close(amqp_connection_state_t conn, amqp_rpc_reply_t reply, int code)
{
    if (reply.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION ||
        reply.reply.id != AMQP_CONNECTION_CLOSE_METHOD) {
        return conf_fail("expected connection.close %d, got %s", code, conf_reply_text(reply));
    }
    mark_dead(conn);
    const amqp_connection_close_t *m = reply.reply.decoded;
    int got = m->reply_code;
    char text[300];
    snprintf(text, sizeof text, "%s", conf_reply_text(reply));
    amqp_connection_close_ok_t ok = {0};
    amqp_send_method(conn, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
    if (got != code)
        return conf_fail("expected connection.close %d, got %s", code, text);
    return 0;
}

amqp_rpc_reply_t conf_sync(amqp_connection_state_t conn, amqp_channel_t ch)
{
    amqp_exchange_declare(conn, ch, amqp_cstring_bytes("amq.direct"), amqp_cstring_bytes("direct"),
                          1, 0, 0, 0, amqp_empty_table);
    amqp_rpc_reply_t r = amqp_get_rpc_reply(conn);
    if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CONNECTION_CLOSE_METHOD)
        mark_dead(conn);
    return r;
}

/* ------------------------------------------------------------ declare helpers */

int conf_declare_queue(amqp_connection_state_t conn, amqp_channel_t ch, const char *name,
                       int durable, int exclusive, int auto_delete, amqp_table_t args)
{
    amqp_queue_declare(conn, ch, amqp_cstring_bytes(name), 0, durable, exclusive, auto_delete, args);
    return conf_rpc_failed(conn, "queue.declare");
}

int conf_declare_exchange(amqp_connection_state_t conn, amqp_channel_t ch, const char *name,
                          const char *type, amqp_table_t args)
{
    amqp_exchange_declare(conn, ch, amqp_cstring_bytes(name), amqp_cstring_bytes(type), 0, 0, 0, 0,
                          args);
    return conf_rpc_failed(conn, "exchange.declare");
}

int conf_bind(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue,
              const char *exchange, const char *key, amqp_table_t args)
{
    amqp_queue_bind(conn, ch, amqp_cstring_bytes(queue), amqp_cstring_bytes(exchange),
                    amqp_cstring_bytes(key), args);
    return conf_rpc_failed(conn, "queue.bind");
}

int conf_queue_count(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue)
{
    amqp_queue_declare_ok_t *ok = amqp_queue_declare(conn, ch, amqp_cstring_bytes(queue), 1, 0, 0,
                                                     0, amqp_empty_table);
    if (ok == NULL) {
        conf_rpc_failed(conn, "queue.declare passive");
        return -1;
    }
    return (int)ok->message_count;
}

/* ------------------------------------------------------------ messages */

int conf_publish_bytes(amqp_connection_state_t conn, amqp_channel_t ch, const char *exchange,
                       const char *key, amqp_bytes_t body, int mandatory,
                       const amqp_basic_properties_t *props)
{
    int rc = amqp_basic_publish(conn, ch, amqp_cstring_bytes(exchange), amqp_cstring_bytes(key),
                                mandatory, 0, props, body);
    if (rc != AMQP_STATUS_OK)
        return conf_fail("basic.publish: %s", amqp_error_string2(rc));
    return 0;
}

int conf_publish(amqp_connection_state_t conn, amqp_channel_t ch, const char *exchange,
                 const char *key, const char *body, const amqp_basic_properties_t *props)
{
    return conf_publish_bytes(conn, ch, exchange, key, amqp_cstring_bytes(body), 0, props);
}

static void copy_bytes(char *dst, size_t cap, amqp_bytes_t src)
{
    size_t n = src.len < cap - 1 ? src.len : cap - 1;
    if (n > 0)
        memcpy(dst, src.bytes, n);
    dst[n] = '\0';
}

static conf_event_kind read_content(amqp_connection_state_t conn, conf_event *ev)
{
    amqp_rpc_reply_t r = amqp_read_message(conn, ev->channel, &ev->message, 0);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        snprintf(ev->reply_text, sizeof ev->reply_text, "reading content: %s", conf_reply_text(r));
        return ev->kind = CONF_EV_ERROR;
    }
    ev->has_message = 1;
    return ev->kind;
}

static conf_event_kind decode_method(amqp_connection_state_t conn, const amqp_frame_t *frame,
                                     conf_event *ev)
{
    void *d = frame->payload.method.decoded;
    ev->method = frame->payload.method.id;
    switch (ev->method) {
    case AMQP_BASIC_DELIVER_METHOD: {
        const amqp_basic_deliver_t *m = d;
        ev->kind = CONF_EV_DELIVER;
        ev->delivery_tag = m->delivery_tag;
        ev->redelivered = m->redelivered;
        copy_bytes(ev->consumer_tag, sizeof ev->consumer_tag, m->consumer_tag);
        copy_bytes(ev->exchange, sizeof ev->exchange, m->exchange);
        copy_bytes(ev->routing_key, sizeof ev->routing_key, m->routing_key);
        return read_content(conn, ev);
    }
    case AMQP_BASIC_RETURN_METHOD: {
        const amqp_basic_return_t *m = d;
        ev->kind = CONF_EV_RETURN;
        ev->reply_code = m->reply_code;
        copy_bytes(ev->reply_text, sizeof ev->reply_text, m->reply_text);
        copy_bytes(ev->exchange, sizeof ev->exchange, m->exchange);
        copy_bytes(ev->routing_key, sizeof ev->routing_key, m->routing_key);
        return read_content(conn, ev);
    }
    case AMQP_BASIC_ACK_METHOD: {
        const amqp_basic_ack_t *m = d;
        ev->delivery_tag = m->delivery_tag;
        ev->multiple = m->multiple;
        return ev->kind = CONF_EV_ACK;
    }
    case AMQP_BASIC_NACK_METHOD: {
        const amqp_basic_nack_t *m = d;
        ev->delivery_tag = m->delivery_tag;
        ev->multiple = m->multiple;
        return ev->kind = CONF_EV_NACK;
    }
    case AMQP_BASIC_CANCEL_METHOD: {
        const amqp_basic_cancel_t *m = d;
        copy_bytes(ev->consumer_tag, sizeof ev->consumer_tag, m->consumer_tag);
        return ev->kind = CONF_EV_CANCEL;
    }
    case AMQP_CHANNEL_CLOSE_METHOD: {
        const amqp_channel_close_t *m = d;
        ev->reply_code = m->reply_code;
        copy_bytes(ev->reply_text, sizeof ev->reply_text, m->reply_text);
        amqp_channel_close_ok_t ok = {0};
        amqp_send_method(conn, ev->channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
        return ev->kind = CONF_EV_CHANNEL_CLOSE;
    }
    case AMQP_CONNECTION_CLOSE_METHOD: {
        const amqp_connection_close_t *m = d;
        ev->reply_code = m->reply_code;
        copy_bytes(ev->reply_text, sizeof ev->reply_text, m->reply_text);
        amqp_connection_close_ok_t ok = {0};
        amqp_send_method(conn, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        mark_dead(conn);
        return ev->kind = CONF_EV_CONNECTION_CLOSE;
    }
    default:
        return ev->kind = CONF_EV_OTHER;
    }
}

conf_event_kind conf_wait_event(amqp_connection_state_t conn, int timeout_ms, conf_event *ev)
{
    memset(ev, 0, sizeof *ev);
    if (!amqp_frames_enqueued(conn) && !amqp_data_in_buffer(conn))
        amqp_maybe_release_buffers(conn);
    amqp_frame_t frame;
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    int rc = amqp_simple_wait_frame_noblock(conn, &frame, &tv);
    if (rc == AMQP_STATUS_TIMEOUT)
        return ev->kind = CONF_EV_TIMEOUT;
    if (rc != AMQP_STATUS_OK) {
        snprintf(ev->reply_text, sizeof ev->reply_text, "%s", amqp_error_string2(rc));
        mark_dead(conn);
        return ev->kind = CONF_EV_ERROR;
    }
    ev->channel = frame.channel;
    if (frame.frame_type != AMQP_FRAME_METHOD) {
        snprintf(ev->reply_text, sizeof ev->reply_text, "frame type %d", frame.frame_type);
        return ev->kind = CONF_EV_OTHER;
    }
    return decode_method(conn, &frame, ev);
}

static const char *event_name(const conf_event *ev)
{
    static char buf[400];
    switch (ev->kind) {
    case CONF_EV_TIMEOUT: return "nothing (timeout)";
    case CONF_EV_ERROR: snprintf(buf, sizeof buf, "error: %s", ev->reply_text); return buf;
    case CONF_EV_DELIVER: return "basic.deliver";
    case CONF_EV_RETURN: snprintf(buf, sizeof buf, "basic.return %d", ev->reply_code); return buf;
    case CONF_EV_ACK: return "basic.ack";
    case CONF_EV_NACK: return "basic.nack";
    case CONF_EV_CANCEL: return "basic.cancel";
    case CONF_EV_CHANNEL_CLOSE:
    case CONF_EV_CONNECTION_CLOSE:
        snprintf(buf, sizeof buf, "%s %d %s",
                 ev->kind == CONF_EV_CHANNEL_CLOSE ? "channel.close" : "connection.close",
                 ev->reply_code, ev->reply_text);
        return buf;
    case CONF_EV_OTHER: break;
    }
    snprintf(buf, sizeof buf, "method 0x%08x", ev->method);
    return buf;
}

int conf_expect_delivery(amqp_connection_state_t conn, const char *body, conf_event *out)
{
    conf_event ev;
    conf_wait_event(conn, CONF_WAIT_MS, &ev);
    if (ev.kind != CONF_EV_DELIVER) {
        conf_event_free(&ev);
        return conf_fail("expected delivery of '%s', got %s", body ? body : "*", event_name(&ev));
    }
    if (body != NULL && !conf_body_is(&ev.message, body)) {
        int rc = conf_fail("expected body '%s', got '%.*s'", body, (int)ev.message.body.len,
                           (const char *)ev.message.body.bytes);
        conf_event_free(&ev);
        return rc;
    }
    if (out != NULL)
        *out = ev;
    else
        conf_event_free(&ev);
    return 0;
}

int conf_expect_quiet(amqp_connection_state_t conn)
{
    conf_event ev;
    conf_wait_event(conn, CONF_QUIET_MS, &ev);
    conf_event_free(&ev);
    if (ev.kind != CONF_EV_TIMEOUT)
        return conf_fail("expected nothing, got %s", event_name(&ev));
    return 0;
}

void conf_event_free(conf_event *ev)
{
    if (ev->has_message)
        amqp_destroy_message(&ev->message);
    ev->has_message = 0;
}

int conf_get(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue, int no_ack,
             conf_event *ev)
{
    memset(ev, 0, sizeof *ev);
    amqp_rpc_reply_t r = amqp_basic_get(conn, ch, amqp_cstring_bytes(queue), no_ack);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
            r.reply.id == AMQP_CONNECTION_CLOSE_METHOD)
            mark_dead(conn);
        snprintf(ev->reply_text, sizeof ev->reply_text, "basic.get: %s", conf_reply_text(r));
        return -1;
    }
    if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
        return 0;
    const amqp_basic_get_ok_t *m = r.reply.decoded;
    ev->kind = CONF_EV_DELIVER;
    ev->channel = ch;
    ev->delivery_tag = m->delivery_tag;
    ev->redelivered = m->redelivered;
    ev->message_count = m->message_count;
    copy_bytes(ev->exchange, sizeof ev->exchange, m->exchange);
    copy_bytes(ev->routing_key, sizeof ev->routing_key, m->routing_key);
    return read_content(conn, ev) == CONF_EV_ERROR ? -1 : 1;
}

int conf_get_one(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue, int no_ack,
                 conf_event *ev)
{
    int got = conf_get(conn, ch, queue, no_ack, ev);
    return got == 1 ? 0 : conf_fail("basic.get: %s", got == 0 ? "empty" : ev->reply_text);
}

int conf_get_expect(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue,
                    const char *body)
{
    conf_event ev;
    int got = conf_get(conn, ch, queue, 1, &ev);
    if (got < 0)
        return conf_fail("%s", ev.reply_text);
    if (got == 0)
        return conf_fail("basic.get on %s: empty, expected '%s'", queue, body);
    int same = conf_body_is(&ev.message, body);
    int rc = same ? 0 : conf_fail("basic.get: expected '%s', got '%.*s'", body,
                                  (int)ev.message.body.len, (const char *)ev.message.body.bytes);
    conf_event_free(&ev);
    return rc;
}

int conf_get_empty(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue)
{
    conf_event ev;
    int got = conf_get(conn, ch, queue, 1, &ev);
    if (got < 0)
        return conf_fail("%s", ev.reply_text);
    if (got == 1) {
        int rc = conf_fail("basic.get on %s: expected empty, got '%.*s'", queue,
                           (int)ev.message.body.len, (const char *)ev.message.body.bytes);
        conf_event_free(&ev);
        return rc;
    }
    return 0;
}

int conf_body_is(const amqp_message_t *m, const char *text)
{
    size_t n = strlen(text);
    return m->body.len == n && (n == 0 || memcmp(m->body.bytes, text, n) == 0);
}

int conf_confirm_select(amqp_connection_state_t conn, amqp_channel_t ch)
{
    amqp_confirm_select(conn, ch);
    return conf_rpc_failed(conn, "confirm.select");
}

int conf_wait_confirms(amqp_connection_state_t conn, uint64_t first_tag, uint64_t last_tag)
{
    uint64_t acked = first_tag - 1;
    while (acked < last_tag) {
        conf_event ev;
        conf_wait_event(conn, CONF_WAIT_MS, &ev);
        conf_event_free(&ev);
        if (ev.kind != CONF_EV_ACK)
            return conf_fail("waiting for confirm of tag %llu: got %s",
                             (unsigned long long)last_tag, event_name(&ev));
        if (ev.delivery_tag <= acked || (!ev.multiple && ev.delivery_tag != acked + 1))
            return conf_fail("confirm tags out of order: ack %llu (multiple=%d) after %llu",
                             (unsigned long long)ev.delivery_tag, ev.multiple, (unsigned long long)acked);
        acked = ev.delivery_tag;
    }
    return 0;
}

int conf_consume(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue,
                 const char *tag, int no_ack, int exclusive, char *tag_out)
{
    amqp_basic_consume_ok_t *ok = amqp_basic_consume(
        conn, ch, amqp_cstring_bytes(queue), tag ? amqp_cstring_bytes(tag) : amqp_empty_bytes, 0,
        no_ack, exclusive, amqp_empty_table);
    if (ok == NULL)
        return conf_rpc_failed(conn, "basic.consume");
    if (tag_out != NULL)
        copy_bytes(tag_out, 256, ok->consumer_tag);
    return 0;
}

int conf_send_raw(amqp_connection_state_t conn, const void *bytes, size_t len)
{
    int fd = amqp_get_sockfd(conn);
    const char *p = bytes;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return conf_fail("raw write: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

long long conf_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void conf_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
