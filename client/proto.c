/* The client's side of the wire: frames in (read in place, amqp/'s
 * reader), the connection methods of the handshake and the close, and
 * method frames out. Channel frames go to chan.c.
 *
 * Tune follows RabbitMQ's Erlang client: for channel_max, frame_max and
 * heartbeat, when either side says 0 the other's value wins, else the
 * smaller. Frames are bounded by our own proposal until tune, by the
 * negotiated frame_max after.
 */
#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

#include "client_int.h"

#define METHOD_CAP 16384

size_t client_encode_method(uint16_t ch, const amqp_method *m, uint8_t *buf, size_t cap)
{
    if (cap < AMQP_FRAME_OVERHEAD)
        return 0;
    size_t n = amqp_method_encode(m, buf + AMQP_FRAME_HEADER_SIZE, cap - AMQP_FRAME_OVERHEAD);
    if (!n)
        return 0;
    amqp_frame_header_put(buf, AMQP_FRAME_METHOD, ch, (uint32_t)n);
    buf[AMQP_FRAME_HEADER_SIZE + n] = AMQP_FRAME_END;
    return n + AMQP_FRAME_OVERHEAD;
}

void client_send_method(client *c, uint16_t ch, const amqp_method *m)
{
    uint8_t buf[METHOD_CAP];
    size_t n = client_encode_method(ch, m, buf, sizeof buf);
    if (n && c->t)
        transport_write(c->t, buf, n);
}

void client_send_header(client *c) { transport_write(c->t, AMQP_PROTOCOL_HEADER, 8); }

static uint32_t negotiate(uint32_t server, uint32_t ours)
{
    if (!server || !ours)
        return server > ours ? server : ours;
    return server < ours ? server : ours;
}

static void copy_property(amqp_bytes table, const char *key, char *out, size_t cap)
{
    amqp_field f;
    if (amqp_table_get(table, key, &f) && (f.type == 'S' || f.type == 'x'))
        snprintf(out, cap, "%.*s", (int)f.v.bytes.len, (const char *)f.v.bytes.ptr);
    else
        out[0] = '\0';
}

static bool offers(amqp_bytes mechanisms, const char *want)
{
    size_t n = strlen(want), i = 0;
    while (i < mechanisms.len) {
        size_t j = i;
        while (j < mechanisms.len && mechanisms.ptr[j] != ' ')
            j++;
        if (j - i == n && memcmp(mechanisms.ptr + i, want, n) == 0)
            return true;
        i = j + 1;
    }
    return false;
}

static void send_start_ok(client *c)
{
    uint8_t props[1024], resp[520];
    amqp_writer w;
    amqp_writer_init(&w, props, sizeof props);
    size_t top = amqp_table_begin(&w);
    amqp_put_key(&w, "capabilities");
    size_t caps = amqp_put_field_begin(&w, 'F');
    static const char *const capabilities[] = {
        "publisher_confirms", "exchange_exchange_bindings",  "basic.nack",
        "consumer_cancel_notify", "connection.blocked", "authentication_failure_close",
    };
    for (size_t i = 0; i < sizeof capabilities / sizeof capabilities[0]; i++)
        amqp_put_field_bool(&w, capabilities[i], true);
    amqp_table_end(&w, caps);
    amqp_put_field_str(&w, "product", AMQP_CSTR("Warren"));
    amqp_put_field_str(&w, "platform", AMQP_CSTR("C/libevent"));
    amqp_put_field_str(&w, "version", AMQP_CSTR("0.1.0"));
    if (c->name[0])
        amqp_put_field_str(&w, "connection_name", AMQP_CSTR(c->name));
    amqp_table_end(&w, top);
    int rn = snprintf((char *)resp, sizeof resp, "%c%s%c%s", 0, c->uri.user, 0, c->uri.password);
    amqp_method m = {.id = AMQP_CONNECTION_START_OK};
    m.connection_start_ok.client_properties = (amqp_bytes){props + 4, (uint32_t)w.len - 4};
    m.connection_start_ok.mechanism = AMQP_CSTR("PLAIN");
    m.connection_start_ok.response = (amqp_bytes){resp, (uint32_t)rn};
    m.connection_start_ok.locale = AMQP_CSTR("en_US");
    client_send_method(c, 0, &m);
}

static void on_start(client *c, const amqp_connection_start *s)
{
    copy_property(s->server_properties, "product", c->product, sizeof c->product);
    copy_property(s->server_properties, "version", c->version, sizeof c->version);
    if (!offers(s->mechanisms, "PLAIN")) {
        client_fail(c, CLIENT_ERR_UNSUPPORTED, 0, 0, "the server does not offer PLAIN ('%.*s')",
                    (int)s->mechanisms.len, (const char *)s->mechanisms.ptr);
        return;
    }
    send_start_ok(c);
    c->state = C_WAIT_TUNE;
}

static void on_tune(client *c, const amqp_connection_tune *t)
{
    c->channel_max = (uint16_t)negotiate(t->channel_max, c->o.channel_max);
    c->frame_max = negotiate(t->frame_max, c->o.frame_max);
    if (c->frame_max < AMQP_FRAME_MIN_SIZE)
        c->frame_max = AMQP_FRAME_MIN_SIZE;
    c->heartbeat = (uint16_t)negotiate(t->heartbeat, c->o.heartbeat);
    amqp_method m = {.id = AMQP_CONNECTION_TUNE_OK};
    m.connection_tune_ok.channel_max = c->channel_max;
    m.connection_tune_ok.frame_max = c->frame_max;
    m.connection_tune_ok.heartbeat = c->heartbeat;
    client_send_method(c, 0, &m);
    amqp_method open = {.id = AMQP_CONNECTION_OPEN};
    open.connection_open.virtual_host = AMQP_CSTR(c->uri.vhost);
    client_send_method(c, 0, &open);
    c->state = C_WAIT_OPEN_OK;
}

static void on_close(client *c, const amqp_connection_close *cl)
{
    amqp_method ok = {.id = AMQP_CONNECTION_CLOSE_OK};
    client_send_method(c, 0, &ok);
    client_error_kind kind = c->state < C_OPEN && cl->reply_code == AMQP_ACCESS_REFUSED
                                 ? CLIENT_ERR_AUTH
                                 : CLIENT_ERR_SERVER_CLOSE;
    client_fail(c, kind, cl->reply_code,
                (uint32_t)cl->class_id << 16 | cl->method_id, "%.*s", (int)cl->reply_text.len,
                (const char *)cl->reply_text.ptr);
}

/* The state a connection method may arrive in; -1: any. */
static int expected_state(uint32_t id)
{
    switch (id) {
    case AMQP_CONNECTION_START: return C_WAIT_START;
    case AMQP_CONNECTION_TUNE: return C_WAIT_TUNE;
    case AMQP_CONNECTION_OPEN_OK: return C_WAIT_OPEN_OK;
    case AMQP_CONNECTION_CLOSE_OK: return C_CLOSING;
    case AMQP_CONNECTION_CLOSE: return -1;
    case AMQP_CONNECTION_BLOCKED:
    case AMQP_CONNECTION_UNBLOCKED: return C_OPEN;
    default: return -2;
    }
}

static void conn_method(client *c, const amqp_method *m)
{
    int want = expected_state(m->id);
    if (c->state == C_CLOSING && m->id != AMQP_CONNECTION_CLOSE &&
        m->id != AMQP_CONNECTION_CLOSE_OK)
        return; /* after our close only close and close-ok count */
    if (want != -1 && want != c->state) {
        client_protocol_error(c, AMQP_COMMAND_INVALID, m->id, "COMMAND_INVALID - unexpected %s",
                              amqp_method_name(m->id) ? amqp_method_name(m->id) : "method");
        return;
    }
    switch (m->id) {
    case AMQP_CONNECTION_START: on_start(c, &m->connection_start); break;
    case AMQP_CONNECTION_TUNE: on_tune(c, &m->connection_tune); break;
    case AMQP_CONNECTION_OPEN_OK:
        c->state = C_OPEN;
        if (c->h.opened)
            c->h.opened(c->ctx, c);
        break;
    case AMQP_CONNECTION_CLOSE: on_close(c, &m->connection_close); break;
    case AMQP_CONNECTION_CLOSE_OK: client_fail(c, CLIENT_OK, 0, 0, "closed"); break;
    case AMQP_CONNECTION_BLOCKED:
        if (c->h.blocked)
            c->h.blocked(c->ctx, c, true, m->connection_blocked.reason);
        break;
    case AMQP_CONNECTION_UNBLOCKED:
        if (c->h.blocked)
            c->h.blocked(c->ctx, c, false, (amqp_bytes){NULL, 0});
        break;
    }
}

static void dispatch(client *c, const amqp_frame *f)
{
    amqp_method m;
    amqp_error err = {0};
    if (f->type == AMQP_FRAME_HEARTBEAT)
        return;
    if (f->channel && c->state != C_OPEN) {
        if (c->state != C_CLOSING)
            client_protocol_error(c, AMQP_CHANNEL_ERROR, 0, "CHANNEL_ERROR - frame on channel %u before open",
                                  f->channel);
        return;
    }
    if (f->type == AMQP_FRAME_METHOD) {
        if (amqp_method_decode(f->payload, f->size, &m, &err) != AMQP_OK) {
            client_protocol_error(c, err.code ? err.code : AMQP_FRAME_ERROR, err.method_id, "%s",
                                  err.text);
            return;
        }
        if (f->channel == 0)
            conn_method(c, &m);
        else
            client_chan_method(c, f->channel, &m);
    } else if (f->channel == 0) {
        client_protocol_error(c, AMQP_UNEXPECTED_FRAME, 0,
                              "UNEXPECTED_FRAME - content frame on channel 0");
    } else if (f->type == AMQP_FRAME_HEADER) {
        client_chan_header(c, f->channel, f);
    } else {
        client_chan_body(c, f->channel, f);
    }
}

void client_process_input(client *c)
{
    amqp_frame_reader r;
    amqp_frames_begin(&r, transport_input(c->t));
    while (client_live(c) && !c->paused) {
        if (c->state == C_WAIT_START && evbuffer_get_length(r.in) >= 8 && r.used == 0) {
            uint8_t head[8];
            /* a server that refuses our protocol answers with its header */
            if (evbuffer_copyout(r.in, head, 4) == 4 && memcmp(head, "AMQP", 4) == 0) {
                client_fail(c, CLIENT_ERR_UNSUPPORTED, 0, 0, "the server refused AMQP 0-9-1");
                break;
            }
        }
        amqp_frame f;
        amqp_error err = {0};
        uint32_t fmax = c->state >= C_WAIT_OPEN_OK ? c->frame_max : c->o.frame_max;
        int rc = amqp_frames_next(&r, fmax, c->o.channel_max, &f, &err);
        if (rc == AMQP_NEED_MORE)
            break;
        if (rc != AMQP_OK) {
            client_protocol_error(c, err.code, 0, "%s", err.text);
            break;
        }
        dispatch(c, &f);
    }
    amqp_frames_drain(&r);
}
