/* Scenarios: connection (handshake, login, tuning), channel (open, close,
 * numbering) and heartbeat. The handshake scenarios drive connection.start /
 * start-ok / tune by hand through rabbitmq-c's frame API, so they can see
 * exactly what the broker proposes and how it refuses a login. */
#define _GNU_SOURCE
#include "conf.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#define MANY_CHANNELS 200

/* ------------------------------------------------------------ handshake by hand */

typedef struct handshake {
    amqp_connection_start_t start;   /* pointers valid until the next read */
    amqp_connection_tune_t tune;
    int got_tune;
    int close_code;                  /* connection.close instead of tune */
    char close_text[256];
} handshake;

static int wait_method(amqp_connection_state_t conn, amqp_method_t *out, const char *what)
{
    amqp_frame_t frame;
    struct timeval tv = {CONF_WAIT_MS / 1000, 0};
    int rc = amqp_simple_wait_frame_noblock(conn, &frame, &tv);
    if (rc != AMQP_STATUS_OK)
        return conf_fail("waiting for %s: %s", what, amqp_error_string2(rc));
    if (frame.frame_type != AMQP_FRAME_METHOD)
        return conf_fail("waiting for %s: got frame type %d", what, frame.frame_type);
    *out = frame.payload.method;
    return 0;
}

/* Sends the protocol header and start-ok with PLAIN user/password; fills
 * hs with the start the broker sent and the tune (or close) that followed. */
static int handshake_to_tune(amqp_connection_state_t conn, const char *user, const char *password,
                             handshake *hs)
{
    memset(hs, 0, sizeof *hs);
    CHECK(amqp_send_header(conn) == AMQP_STATUS_OK, "cannot send protocol header");
    amqp_method_t m;
    if (wait_method(conn, &m, "connection.start"))
        return 1;
    CHECK(m.id == AMQP_CONNECTION_START_METHOD, "expected connection.start, got 0x%08x", m.id);
    hs->start = *(amqp_connection_start_t *)m.decoded;

    amqp_table_entry_t caps[] = {
        {amqp_cstring_bytes("authentication_failure_close"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}},
    };
    amqp_table_entry_t props[] = {
        {amqp_cstring_bytes("product"), {AMQP_FIELD_KIND_UTF8, {.bytes = amqp_cstring_bytes("conformance")}}},
        {amqp_cstring_bytes("capabilities"), {AMQP_FIELD_KIND_TABLE, {.table = {1, caps}}}},
    };
    char response[300];
    int rlen = snprintf(response, sizeof response, "%c%s%c%s", 0, user, 0, password);
    amqp_connection_start_ok_t ok = {
        .client_properties = {2, props},
        .mechanism = amqp_cstring_bytes("PLAIN"),
        .response = {(size_t)rlen, response},
        .locale = amqp_cstring_bytes("en_US"),
    };
    CHECK(amqp_send_method(conn, 0, AMQP_CONNECTION_START_OK_METHOD, &ok) == AMQP_STATUS_OK,
          "cannot send start-ok");
    if (wait_method(conn, &m, "connection.tune"))
        return 1;
    if (m.id == AMQP_CONNECTION_TUNE_METHOD) {
        hs->tune = *(amqp_connection_tune_t *)m.decoded;
        hs->got_tune = 1;
    } else if (m.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_t *c = m.decoded;
        hs->close_code = c->reply_code;
        snprintf(hs->close_text, sizeof hs->close_text, "%.*s", (int)c->reply_text.len,
                 (const char *)c->reply_text.bytes);
    } else {
        return conf_fail("expected connection.tune or close, got 0x%08x", m.id);
    }
    return 0;
}

static int table_has_true(amqp_table_t t, const char *key)
{
    for (int i = 0; i < t.num_entries; i++) {
        amqp_table_entry_t *e = &t.entries[i];
        if (e->key.len == strlen(key) && memcmp(e->key.bytes, key, e->key.len) == 0)
            return e->value.kind == AMQP_FIELD_KIND_BOOLEAN && e->value.value.boolean;
    }
    return 0;
}

static const amqp_table_entry_t *table_find(amqp_table_t t, const char *key)
{
    for (int i = 0; i < t.num_entries; i++)
        if (t.entries[i].key.len == strlen(key) && memcmp(t.entries[i].key.bytes, key, strlen(key)) == 0)
            return &t.entries[i];
    return NULL;
}

static int bytes_contain(amqp_bytes_t b, const char *word)
{
    char buf[512];
    snprintf(buf, sizeof buf, " %.*s ", (int)b.len, (const char *)b.bytes);
    char want[128];
    snprintf(want, sizeof want, " %s ", word);
    return strstr(buf, want) != NULL;
}

/* ------------------------------------------------------------ connection */

static int login_plain_ok(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    int frame_max = amqp_get_frame_max(conn);
    int channel_max = amqp_get_channel_max(conn);
    amqp_rpc_reply_t r = amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);
    CHECK(r.reply_type == AMQP_RESPONSE_NORMAL, "connection.close: %s", conf_reply_text(r));
    CHECK(frame_max == AMQP_DEFAULT_FRAME_SIZE, "frame_max %d, expected %d", frame_max,
          AMQP_DEFAULT_FRAME_SIZE);
    conf_note("frame_max=%d channel_max=%d", frame_max, channel_max);
    return 0;
}

static int start_and_tune_defaults(void)
{
    amqp_connection_state_t conn = conf_socket();
    if (conn == NULL)
        return 1;
    handshake hs;
    int rc = handshake_to_tune(conn, "guest", "guest", &hs);
    if (rc == 0) {
        amqp_connection_start_t *s = &hs.start;
        if (s->version_major != 0 || s->version_minor != 9)
            rc = conf_fail("start version %d-%d, expected 0-9", s->version_major, s->version_minor);
        else if (!bytes_contain(s->mechanisms, "PLAIN") || !bytes_contain(s->mechanisms, "AMQPLAIN"))
            rc = conf_fail("mechanisms '%.*s' lack PLAIN/AMQPLAIN", (int)s->mechanisms.len,
                           (const char *)s->mechanisms.bytes);
        else if (!bytes_contain(s->locales, "en_US"))
            rc = conf_fail("locales lack en_US");
        else if (!hs.got_tune)
            rc = conf_fail("login refused: %d %s", hs.close_code, hs.close_text);
        else if (hs.tune.channel_max != 2047 || hs.tune.frame_max != 131072 || hs.tune.heartbeat != 60)
            rc = conf_fail("tune channel_max=%u frame_max=%u heartbeat=%u, expected 2047/131072/60",
                           hs.tune.channel_max, hs.tune.frame_max, hs.tune.heartbeat);
    }
    amqp_destroy_connection(conn);
    return rc;
}

static int server_capabilities(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    const amqp_table_t *props = amqp_get_server_properties(conn);
    const amqp_table_entry_t *caps = table_find(*props, "capabilities");
    static const char *const wanted[] = {
        "publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify",
        "connection.blocked", "consumer_priorities", "authentication_failure_close",
        "per_consumer_qos", "direct_reply_to", NULL,
    };
    int rc = 0;
    if (caps == NULL || caps->value.kind != AMQP_FIELD_KIND_TABLE)
        rc = conf_fail("server properties have no capabilities table");
    for (int i = 0; rc == 0 && wanted[i] != NULL; i++)
        if (!table_has_true(caps->value.value.table, wanted[i]))
            rc = conf_fail("capability %s missing or false", wanted[i]);
    if (rc == 0 && (table_find(*props, "product") == NULL || table_find(*props, "version") == NULL))
        rc = conf_fail("server properties lack product/version");
    conf_close(conn);
    return rc;
}

static int bad_password_403(void)
{
    amqp_connection_state_t conn = conf_socket();
    if (conn == NULL)
        return 1;
    handshake hs;
    int rc = handshake_to_tune(conn, "guest", "definitely-wrong", &hs);
    amqp_destroy_connection(conn);
    if (rc != 0)
        return rc;
    CHECK(!hs.got_tune, "bad password accepted (got connection.tune)");
    CHECK(hs.close_code == CONF_ACCESS_REFUSED, "expected connection.close 403, got %d %s",
          hs.close_code, hs.close_text);
    return 0;
}

static int bad_password_via_login_fails(void)
{
    amqp_connection_state_t conn = conf_socket();
    if (conn == NULL)
        return 1;
    conf_open_opts opts = {.password = "definitely-wrong"};
    amqp_rpc_reply_t r = conf_login(conn, &opts);
    amqp_destroy_connection(conn);
    CHECK(r.reply_type != AMQP_RESPONSE_NORMAL, "login with a bad password succeeded");
    return 0;
}

static int unknown_vhost_530(void)
{
    amqp_connection_state_t conn = conf_socket();
    if (conn == NULL)
        return 1;
    conf_open_opts opts = {.vhost = conf_name("no-such-vhost")};
    amqp_rpc_reply_t r = conf_login(conn, &opts);
    int rc = conf_expect_connection_close(conn, r, CONF_NOT_ALLOWED);
    amqp_destroy_connection(conn);
    return rc;
}

static int frame_max_negotiated(void)
{
    conf_open_opts opts = {.frame_max = 4096};
    amqp_connection_state_t conn = conf_open_with(&opts);
    if (conn == NULL)
        return 1;
    int fm = amqp_get_frame_max(conn);
    int rc = conf_channel_open(conn, 1);
    conf_close(conn);
    CHECK(rc == 0, "channel.open failed with frame_max 4096");
    CHECK(fm == 4096, "frame_max %d, expected 4096", fm);
    return 0;
}

static int channel_max_enforced(void)
{
    conf_open_opts opts = {.channel_max = 10};
    amqp_connection_state_t conn = conf_open_with(&opts);
    if (conn == NULL)
        return 1;
    /* RabbitMQ counts open channels against channel_max: ten fit, not eleven. */
    int rc = 0;
    for (int ch = 1; rc == 0 && ch <= 10; ch++)
        rc = conf_channel_open(conn, (amqp_channel_t)ch);
    if (rc == 0) {
        amqp_channel_open(conn, 11);
        rc = conf_expect_connection_close(conn, amqp_get_rpc_reply(conn), CONF_NOT_ALLOWED);
    }
    conf_close(conn);
    return rc;
}

static int close_handshake(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_rpc_reply_t r = amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS);
    CHECK(r.reply_type == AMQP_RESPONSE_NORMAL, "channel.close: %s", conf_reply_text(r));
    r = amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);
    CHECK(r.reply_type == AMQP_RESPONSE_NORMAL, "connection.close: %s", conf_reply_text(r));
    return 0;
}

/* Two connection.close frames back to back (amqp091-go's TestConcurrentClose
 * does this from several goroutines). RabbitMQ answers each with close-ok
 * and leaves closing the socket to the client. */
static int close_twice_both_acknowledged(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_connection_close_t close = {.reply_code = AMQP_REPLY_SUCCESS, .reply_text = amqp_cstring_bytes("bye")};
    int rc = 0;
    for (int i = 0; rc == 0 && i < 2; i++)
        if (amqp_send_method(conn, 0, AMQP_CONNECTION_CLOSE_METHOD, &close) != AMQP_STATUS_OK)
            rc = conf_fail("cannot send connection.close %d", i + 1);
    for (int i = 0; rc == 0 && i < 2; i++) {
        conf_event ev;
        conf_wait_event(conn, CONF_WAIT_MS, &ev);
        conf_event_free(&ev);
        if (ev.kind != CONF_EV_OTHER || ev.method != AMQP_CONNECTION_CLOSE_OK_METHOD)
            rc = conf_fail("connection.close #%d: expected close-ok, got event %d (%s)", i + 1, ev.kind,
                           ev.kind == CONF_EV_ERROR ? ev.reply_text : "");
    }
    amqp_destroy_connection(conn);
    return rc;
}

/* ------------------------------------------------------------ channel */

static int many_channels(void)
{
    amqp_connection_state_t conn = conf_open_with(NULL);
    if (conn == NULL)
        return 1;
    int rc = 0;
    for (int ch = 1; rc == 0 && ch <= MANY_CHANNELS; ch++)
        rc = conf_channel_open(conn, (amqp_channel_t)ch);
    for (int ch = 1; rc == 0 && ch <= MANY_CHANNELS; ch += 37) {
        amqp_rpc_reply_t r = conf_sync(conn, (amqp_channel_t)ch);
        if (r.reply_type != AMQP_RESPONSE_NORMAL)
            rc = conf_fail("RPC on channel %d: %s", ch, conf_reply_text(r));
    }
    for (int ch = 1; rc == 0 && ch <= MANY_CHANNELS; ch++) {
        amqp_rpc_reply_t r = amqp_channel_close(conn, (amqp_channel_t)ch, AMQP_REPLY_SUCCESS);
        if (r.reply_type != AMQP_RESPONSE_NORMAL)
            rc = conf_fail("channel.close %d: %s", ch, conf_reply_text(r));
    }
    conf_close(conn);
    return rc;
}

static int reuse_numbers(void)
{
    amqp_connection_state_t conn = conf_open_with(NULL);
    if (conn == NULL)
        return 1;
    int rc = 0;
    for (int round = 0; rc == 0 && round < 3; round++) {
        rc = conf_channel_open(conn, 5);
        if (rc == 0) {
            amqp_rpc_reply_t r = conf_sync(conn, 5);
            if (r.reply_type != AMQP_RESPONSE_NORMAL)
                rc = conf_fail("round %d: RPC on reopened channel: %s", round, conf_reply_text(r));
        }
        if (rc == 0) {
            amqp_rpc_reply_t r = amqp_channel_close(conn, 5, AMQP_REPLY_SUCCESS);
            if (r.reply_type != AMQP_RESPONSE_NORMAL)
                rc = conf_fail("round %d: channel.close: %s", round, conf_reply_text(r));
        }
    }
    conf_close(conn);
    return rc;
}

static int reopen_after_channel_error(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_queue_declare(conn, 1, amqp_cstring_bytes(conf_name("missing")), 1, 0, 0, 0, amqp_empty_table);
    int rc = conf_expect_channel_close(conn, 1, amqp_get_rpc_reply(conn), CONF_NOT_FOUND);
    if (rc == 0)
        rc = conf_channel_open(conn, 1);
    if (rc == 0) {
        amqp_rpc_reply_t r = conf_sync(conn, 1);
        if (r.reply_type != AMQP_RESPONSE_NORMAL)
            rc = conf_fail("RPC after reopen: %s", conf_reply_text(r));
    }
    conf_close(conn);
    return rc;
}

static int open_twice_504(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    amqp_channel_open(conn, 1);
    int rc = conf_expect_connection_close(conn, amqp_get_rpc_reply(conn), CONF_CHANNEL_ERROR);
    conf_close(conn);
    return rc;
}

/* The client closes a channel while the broker is closing it for an error
 * (amqp091-go issue 43): both closes cross on the wire. RabbitMQ answers the
 * client's close with close-ok, takes the client's close-ok for its own, and
 * the connection and its other channels carry on. */
static int close_crossing_server_close(void)
{
    amqp_connection_state_t conn = conf_open();
    if (conn == NULL)
        return 1;
    int rc = conf_channel_open(conn, 2);
    if (rc == 0)
        rc = conf_publish(conn, 1, conf_name("missing"), "", "x", NULL);
    amqp_channel_close_t close = {.reply_code = AMQP_REPLY_SUCCESS, .reply_text = amqp_cstring_bytes("bye")};
    if (rc == 0 && amqp_send_method(conn, 1, AMQP_CHANNEL_CLOSE_METHOD, &close) != AMQP_STATUS_OK)
        rc = conf_fail("cannot send channel.close");
    int got_close = 0, got_close_ok = 0;
    while (rc == 0 && !(got_close && got_close_ok)) {
        conf_event ev;
        conf_wait_event(conn, CONF_WAIT_MS, &ev);   /* answers the broker's close with close-ok */
        conf_event_free(&ev);
        if (ev.kind == CONF_EV_CHANNEL_CLOSE && ev.channel == 1 && ev.reply_code == CONF_NOT_FOUND)
            got_close = 1;
        else if (ev.kind == CONF_EV_OTHER && ev.channel == 1 && ev.method == AMQP_CHANNEL_CLOSE_OK_METHOD)
            got_close_ok = 1;
        else if (ev.kind == CONF_EV_CONNECTION_CLOSE)
            rc = conf_fail("broker closed the connection: %d %s", ev.reply_code, ev.reply_text);
        else
            rc = conf_fail("expected channel.close 404 and close-ok on channel 1, got event %d on %d (%s)",
                           ev.kind, ev.channel, ev.reply_text);
    }
    if (rc == 0) {
        amqp_rpc_reply_t r = conf_sync(conn, 2);
        if (r.reply_type != AMQP_RESPONSE_NORMAL)
            rc = conf_fail("channel 2 after the crossing closes: %s", conf_reply_text(r));
    }
    if (rc == 0)
        rc = conf_channel_open(conn, 1);
    conf_close(conn);
    return rc;
}

/* ------------------------------------------------------------ heartbeat */

static int client_heartbeats_keep_connection(void)
{
    conf_open_opts opts = {.heartbeat = 1};
    amqp_connection_state_t conn = conf_open_with(&opts);
    if (conn == NULL)
        return 1;
    int rc = conf_channel_open(conn, 1);
    if (rc == 0 && amqp_get_heartbeat(conn) != 1)
        rc = conf_fail("heartbeat negotiated %d, expected 1", amqp_get_heartbeat(conn));
    /* rabbitmq-c sends heartbeats while it waits for frames. */
    long long until = conf_now_ms() + 3500;
    while (rc == 0 && conf_now_ms() < until) {
        conf_event ev;
        conf_wait_event(conn, 200, &ev);
        conf_event_free(&ev);
        if (ev.kind != CONF_EV_TIMEOUT)
            rc = conf_fail("while idle: got event %d (%s)", ev.kind, ev.reply_text);
    }
    if (rc == 0) {
        amqp_rpc_reply_t r = conf_sync(conn, 1);
        if (r.reply_type != AMQP_RESPONSE_NORMAL)
            rc = conf_fail("RPC after 3.5 s idle with heartbeats: %s", conf_reply_text(r));
    }
    conf_close(conn);
    return rc;
}

/* Reads raw bytes for `ms`; counts heartbeat frames; notes whether the peer closed. */
static int read_raw(int fd, int ms, int *heartbeats, int *closed)
{
    static const unsigned char hb[8] = {8, 0, 0, 0, 0, 0, 0, 0xCE};
    unsigned char buf[4096];
    size_t have = 0;
    long long until = conf_now_ms() + ms;
    *heartbeats = 0;
    *closed = 0;
    while (!*closed && conf_now_ms() < until) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)(until - conf_now_ms())) <= 0)
            continue;
        ssize_t n = recv(fd, buf + have, sizeof buf - have, 0);
        if (n <= 0) {
            *closed = 1;
            break;
        }
        have += (size_t)n;
        while (have >= 8 && memcmp(buf, hb, 8) == 0) {
            (*heartbeats)++;
            memmove(buf, buf + 8, have - 8);
            have -= 8;
        }
        if (have >= sizeof buf)
            return conf_fail("unexpected data from the broker while idle");
    }
    return 0;
}

static int server_sends_heartbeats(void)
{
    conf_open_opts opts = {.heartbeat = 1};
    amqp_connection_state_t conn = conf_open_with(&opts);
    if (conn == NULL)
        return 1;
    int heartbeats, closed;
    int rc = read_raw(amqp_get_sockfd(conn), 2600, &heartbeats, &closed);
    conf_close(conn);
    if (rc != 0)
        return rc;
    CHECK(heartbeats >= 1, "no heartbeat frame from the broker in 2.6 s with heartbeat=1");
    conf_note("%d heartbeats in 2.6 s", heartbeats);
    return 0;
}

static int missed_heartbeats_close_connection(void)
{
    conf_open_opts opts = {.heartbeat = 1};
    amqp_connection_state_t conn = conf_open_with(&opts);
    if (conn == NULL)
        return 1;
    /* Read raw so rabbitmq-c never sends a heartbeat: the broker must give up. */
    int heartbeats, closed;
    long long start = conf_now_ms();
    int rc = read_raw(amqp_get_sockfd(conn), 8000, &heartbeats, &closed);
    long long took = conf_now_ms() - start;
    amqp_destroy_connection(conn);
    if (rc != 0)
        return rc;
    CHECK(closed, "broker kept a silent heartbeat=1 connection open for 8 s");
    conf_note("closed after %lld ms", took);
    return 0;
}

static int heartbeat_zero_disables(void)
{
    conf_open_opts opts = {.heartbeat = 0};
    amqp_connection_state_t conn = conf_open_with(&opts);
    if (conn == NULL)
        return 1;
    int heartbeats, closed;
    int rc = read_raw(amqp_get_sockfd(conn), 1500, &heartbeats, &closed);
    conf_close(conn);
    if (rc != 0)
        return rc;
    CHECK(!closed, "broker closed an idle heartbeat=0 connection");
    CHECK(heartbeats == 0, "broker sent %d heartbeats with heartbeat=0", heartbeats);
    return 0;
}

const conf_scenario conf_connection_scenarios[] = {
    {"connection.login_plain_ok", 1, login_plain_ok},
    {"connection.bad_password_403", 1, bad_password_403},
    {"connection.bad_password_login_fails", 0, bad_password_via_login_fails},
    {"connection.start_and_tune_defaults", 0, start_and_tune_defaults},
    {"connection.server_capabilities", 0, server_capabilities},
    {"connection.unknown_vhost_530", 0, unknown_vhost_530},
    {"connection.frame_max_negotiated", 0, frame_max_negotiated},
    {"connection.channel_max_enforced_530", 0, channel_max_enforced},
    {"connection.close_handshake", 0, close_handshake},
    {"connection.close_twice_both_acknowledged", 0, close_twice_both_acknowledged},
    {"channel.many_channels", 1, many_channels},
    {"channel.reuse_numbers", 0, reuse_numbers},
    {"channel.reopen_after_channel_error", 0, reopen_after_channel_error},
    {"channel.open_twice_504", 0, open_twice_504},
    {"channel.close_crossing_server_close", 0, close_crossing_server_close},
    {"heartbeat.client_heartbeats_keep_connection", 0, client_heartbeats_keep_connection},
    {"heartbeat.server_sends_heartbeats", 0, server_sends_heartbeats},
    {"heartbeat.missed_heartbeats_close_connection", 0, missed_heartbeats_close_connection},
    {"heartbeat.zero_disables", 0, heartbeat_zero_disables},
    {NULL, 0, NULL},
};
