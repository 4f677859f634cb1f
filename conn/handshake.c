/* The connection handshake: protocol header, connection.start / start-ok
 * (SASL PLAIN, AMQPLAIN and, over TLS, EXTERNAL, as auth_mechanisms
 * offers them), tune / tune-ok (RabbitMQ's limits), open, and the
 * connection class's other methods on channel 0. */
#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

#include "conn_internal.h"

/* Whether connection.start offers `m` to c: configured, and EXTERNAL
 * only over TLS (rabbit_auth_mechanism_ssl's should_offer). */
static bool offered(const conn *c, config_auth_mech m)
{
    const config *cfg = server_config(c->srv);
    for (unsigned i = 0; i < cfg->nauth_mechs; i++)
        if (cfg->auth_mechs[i] == m)
            return m != AUTH_EXTERNAL || transport_is_tls(c->t);
    return false;
}

static void send_start(conn *c)
{
    uint8_t props[1024];
    amqp_writer w;
    amqp_writer_init(&w, props, sizeof props);
    size_t top = amqp_table_begin(&w);
    amqp_put_key(&w, "capabilities");
    amqp_put_u8(&w, 'F');
    size_t caps = amqp_table_begin(&w);
    static const char *const capabilities[] = {
        "publisher_confirms",     "exchange_exchange_bindings",   "basic.nack",
        "consumer_cancel_notify", "connection.blocked",           "consumer_priorities",
        "authentication_failure_close", "per_consumer_qos",      "direct_reply_to",
    };
    for (size_t i = 0; i < sizeof capabilities / sizeof capabilities[0]; i++)
        amqp_put_field_bool(&w, capabilities[i], true);
    amqp_table_end(&w, caps);
    amqp_put_field_str(&w, "cluster_name", AMQP_CSTR("warren@localhost"));
    amqp_put_field_str(&w, "copyright", AMQP_CSTR("Copyright (c) Warren authors"));
    amqp_put_field_str(&w, "information", AMQP_CSTR("Warren AMQP 0-9-1 broker"));
    amqp_put_field_str(&w, "platform", AMQP_CSTR("C/libevent"));
    amqp_put_field_str(&w, "product", AMQP_CSTR("Warren"));
    amqp_put_field_str(&w, "version", AMQP_CSTR("0.1.0"));
    amqp_table_end(&w, top);
    amqp_method m = {.id = AMQP_CONNECTION_START};
    m.connection_start.version_major = 0;
    m.connection_start.version_minor = 9;
    /* the table content, without the length prefix the writer put first */
    m.connection_start.server_properties = (amqp_bytes){props + 4, (uint32_t)w.len - 4};
    char mechs[64] = "";
    const config *cfg = server_config(c->srv);
    for (unsigned i = 0, used = 0; i < cfg->nauth_mechs; i++)
        if (offered(c, cfg->auth_mechs[i]))
            used += (unsigned)snprintf(mechs + used, sizeof mechs - used, "%s%s", used ? " " : "",
                                       config_auth_mech_name(cfg->auth_mechs[i]));
    m.connection_start.mechanisms = AMQP_CSTR(mechs);
    m.connection_start.locales = AMQP_CSTR("en_US");
    conn_send_method(c, 0, &m);
}

void handshake_header(conn *c)
{
    struct evbuffer *in = transport_input(c->t);
    if (evbuffer_get_length(in) < 8)
        return;
    uint8_t hdr[8];
    evbuffer_remove(in, hdr, 8);
    if (memcmp(hdr, AMQP_PROTOCOL_HEADER, 8) != 0) {
        transport_write(c->t, AMQP_PROTOCOL_HEADER, 8);
        log_msg(LOG_WARNING, "connection %s: bad protocol header, closing", c->peer);
        conn_teardown(c);
        return;
    }
    send_start(c);
    c->state = S_START_OK;
}

/* Extracts user and password from a PLAIN or AMQPLAIN (LOGIN and
 * PASSWORD in a table) response. PLAIN as RabbitMQ's
 * rabbit_auth_mechanism_plain reads it: exactly "\0user\0pass" -- no
 * authorization identity before the first NUL, no NUL in the password. */
static bool parse_credentials(amqp_bytes mech, amqp_bytes resp, amqp_bytes *user, amqp_bytes *pass)
{
    if (amqp_bytes_equal_cstr(mech, "PLAIN")) {
        if (resp.len == 0 || resp.ptr[0] != 0)
            return false;
        const uint8_t *u = resp.ptr + 1;
        const uint8_t *z = memchr(u, 0, resp.len - 1);
        if (!z || memchr(z + 1, 0, resp.len - (size_t)(z + 1 - resp.ptr)))
            return false;
        *user = (amqp_bytes){u, (uint32_t)(z - u)};
        *pass = (amqp_bytes){z + 1, (uint32_t)(resp.len - (size_t)(z + 1 - resp.ptr))};
        return true;
    }
    if (amqp_bytes_equal_cstr(mech, "AMQPLAIN")) {
        amqp_field login, password;
        if (amqp_table_validate(resp, NULL) != AMQP_OK ||
            !amqp_table_get(resp, "LOGIN", &login) || !amqp_table_get(resp, "PASSWORD", &password) ||
            login.type != 'S' || password.type != 'S')
            return false;
        *user = login.v.bytes;
        *pass = password.v.bytes;
        return true;
    }
    return false;
}

/* The login brake first (a braked address is refused without a look at
 * the password, so guessing gains nothing there), then the password; a
 * refusal counts towards the brake. Loopback clients are not braked unless
 * login_brake.loopback says so. */
static bool check_login(conn *c, amqp_bytes user, const amqp_bytes *pass, char *why,
                        size_t whylen)
{
    if (c->trusted)
        return true;
    login_brake *b = server_login_brake(c->srv);
    const config *cfg = server_config(c->srv);
    bool braking = !c->loopback || cfg->login_brake_loopback;
    uint64_t now = loop_now_ms(c->loop);
    uint64_t left = braking ? login_brake_left(b, c->brake_key, now) : 0;
    if (left) {
        loop_refused(c->loop, REFUSED_LOGIN_BRAKE, "connection %s: login refused, %s is braked",
                     c->peer, c->peer_host);
        snprintf(why, whylen, "too many failed logins from %s, refused for %llu s more",
                 c->peer_host, (unsigned long long)(left + 999) / 1000);
        return false;
    }
    access_control *a = server_access(c->srv);
    if (pass ? access_login(a, user, *pass, c->loopback, why, whylen) != NULL
             : access_login_external(a, user, c->loopback, why, whylen) != NULL)
        return true;
    if (braking && login_brake_failed(b, c->brake_key, now))
        log_msg(LOG_WARNING, "login brake: %u failed logins from %s within %u ms; its logins are "
                "refused for %u ms", cfg->login_brake_failures, c->peer_host,
                cfg->login_brake_window_ms, cfg->login_brake_duration_ms);
    return false;
}

static int handle_start_ok(conn *c, const amqp_connection_start_ok *s, amqp_error *err)
{
    amqp_field caps, f;
    if (amqp_table_get(s->client_properties, "capabilities", &caps) && caps.type == 'F') {
        c->cancel_notify = amqp_table_get(caps.v.bytes, "consumer_cancel_notify", &f) &&
                           f.type == 't' && f.v.i;
        c->auth_failure_close = amqp_table_get(caps.v.bytes, "authentication_failure_close",
                                               &f) && f.type == 't' && f.v.i;
        c->blocked_capable = amqp_table_get(caps.v.bytes, "connection.blocked", &f) &&
                             f.type == 't' && f.v.i;
    }
    /* RabbitMQ's errors here: a wrong mechanism or a malformed response
     * is a handshake error (silence, then the socket closes), only a
     * refused login is 403 (conn_raise) */
    config_auth_mech mech = AUTH_PLAIN;
    while (mech <= AUTH_EXTERNAL &&
           !amqp_bytes_equal_cstr(s->mechanism, config_auth_mech_name(mech)))
        mech++;
    if (mech > AUTH_EXTERNAL || !offered(c, mech))
        return amqp_fail(err, AMQP_COMMAND_INVALID, AMQP_CONNECTION_START_OK,
                         "unknown authentication mechanism '%.*s'", (int)s->mechanism.len,
                         (const char *)s->mechanism.ptr);
    amqp_bytes user, pass;
    server_counts *counts = loop_counters(c->loop);
    counts->auth_attempts++;
    char why[400], cert_name[512];
    bool named = true;
    if (mech == AUTH_EXTERNAL) { /* the certificate names the user; the response is not read */
        const config *cfg = server_config(c->srv);
        named = transport_tls_peer_name(c->t, cfg->cert_login_from, cfg->cert_login_san_type,
                                        cfg->cert_login_san_index, cert_name, sizeof cert_name,
                                        why, sizeof why);
        user = AMQP_CSTR(cert_name);
    } else if (!parse_credentials(s->mechanism, s->response, &user, &pass)) {
        counts->auth_failed++;
        return amqp_fail(err, AMQP_SYNTAX_ERROR, AMQP_CONNECTION_START_OK,
                         "%.*s response invalid", (int)s->mechanism.len,
                         (const char *)s->mechanism.ptr);
    }
    if (!named || !check_login(c, user, mech == AUTH_EXTERNAL ? NULL : &pass, why, sizeof why)) {
        counts->auth_failed++;
        log_msg(LOG_WARNING, "connection %s: login refused: %s", c->peer, why);
        return amqp_fail(err, AMQP_ACCESS_REFUSED, 0,
                         "Login was refused using authentication mechanism %.*s. For details "
                         "see the broker logfile.",
                         (int)s->mechanism.len, (const char *)s->mechanism.ptr);
    }
    if (!conn_logged_in(c, user, s->client_properties, mech))
        return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_CONNECTION_START_OK, "out of memory");
    const config *cfg = server_config(c->srv);
    amqp_method m = {.id = AMQP_CONNECTION_TUNE};
    m.connection_tune.channel_max = cfg->channel_max;
    m.connection_tune.frame_max = cfg->frame_max;
    m.connection_tune.heartbeat = (uint16_t)cfg->heartbeat;
    conn_send_method(c, 0, &m);
    c->state = S_TUNE_OK;
    return AMQP_OK;
}

/* RabbitMQ's rule for each tune-ok value: at least `min` unless 0, and not
 * above the server's value -- 0 meaning "no limit" is above it too. */
static int check_tuned(const char *field, uint32_t min, uint32_t server_value,
                       uint32_t client_value, amqp_error *err)
{
    if (client_value != 0 && client_value < min)
        return amqp_fail(err, AMQP_NOT_ALLOWED, AMQP_CONNECTION_TUNE_OK,
                         "negotiated %s = %u is lower than the minimum allowed value (%u)", field,
                         client_value, min);
    if (server_value != 0 && (client_value == 0 || client_value > server_value))
        return amqp_fail(err, AMQP_NOT_ALLOWED, AMQP_CONNECTION_TUNE_OK,
                         "negotiated %s = %u is higher than the maximum allowed value (%u)", field,
                         client_value, server_value);
    return AMQP_OK;
}

static int handle_tune_ok(conn *c, const amqp_connection_tune_ok *t, amqp_error *err)
{
    const config *cfg = server_config(c->srv);
    if (check_tuned("frame_max", AMQP_FRAME_MIN_SIZE, cfg->frame_max, t->frame_max, err) ||
        check_tuned("channel_max", 1, cfg->channel_max, t->channel_max, err))
        return AMQP_ERROR;
    c->frame_max = t->frame_max;
    c->channel_max = t->channel_max;
    c->heartbeat = t->heartbeat;
    c->state = S_OPEN_WAIT;
    return AMQP_OK;
}

/* ---- limits at connection.open ----
 * RabbitMQ's order (rabbit_reader): the vhost's max-connections, then the
 * user's, before the vhost access check; each a 530 with its text. */
static int check_open_limits(conn *c, vhost *v, amqp_error *err)
{
    int64_t max = vhost_max_connections(v);
    if (max >= 0 && vhost_connection_count(v) >= (uint64_t)max) {
        loop_refused(c->loop, REFUSED_CONN_VHOST_LIMIT, "connection %s: vhost '%s' connection "
                     "limit (%lld) reached, user '%s' refused", c->peer, vhost_name(v),
                     (long long)max, c->user);
        return amqp_fail(err, AMQP_NOT_ALLOWED, AMQP_CONNECTION_OPEN,
                         "access to vhost '%s' refused for user '%s': connection limit (%lld) is "
                         "reached", vhost_name(v), c->user, (long long)max);
    }
    const access_user *u = access_find_user(server_access(c->srv), c->user);
    meta_limit user_max = u ? access_user_max_connections(u) : (meta_limit){0};
    if (user_max.set && user_max.value >= 0 &&
        conn_user_connections(c->srv, c->user) >= (uint64_t)user_max.value) {
        loop_refused(c->loop, REFUSED_CONN_USER_LIMIT, "connection %s: user '%s' connection "
                     "limit (%lld) reached", c->peer, c->user, (long long)user_max.value);
        return amqp_fail(err, AMQP_NOT_ALLOWED, AMQP_CONNECTION_OPEN,
                         "connection refused for user '%s': user connection limit (%lld) is "
                         "reached", c->user, (long long)user_max.value);
    }
    return AMQP_OK;
}

/* RabbitMQ's check_vhost_access: the vhost must exist, and the user needs
 * a permission entry there (any, even all ""). */
static int handle_open(conn *c, const amqp_connection_open *o, amqp_error *err)
{
    vhost *v = server_vhost(c->srv, o->virtual_host);
    if (!v)
        return amqp_fail(err, AMQP_NOT_ALLOWED, AMQP_CONNECTION_OPEN, "vhost %.*s not found",
                         (int)o->virtual_host.len, (const char *)o->virtual_host.ptr);
    if (check_open_limits(c, v, err) != AMQP_OK)
        return AMQP_ERROR;
    if (!c->trusted && !access_find_perms(server_access(c->srv), AMQP_CSTR(c->user), o->virtual_host))
        return amqp_fail(err, AMQP_NOT_ALLOWED, AMQP_CONNECTION_OPEN,
                         "access to vhost '%s' refused for user '%s'", vhost_name(v), c->user);
    vhost_connection_take(v); /* counted: check_open_limits found room */
    c->vh = v;
    c->state = S_OPEN;
    loop_counters(c->loop)->connections_opened++;
    loop_conn_listed(c->loop, c);
    amqp_method m = {.id = AMQP_CONNECTION_OPEN_OK};
    conn_send_method(c, 0, &m);
    log_msg(LOG_INFO, "connection %s: user '%s' authenticated, vhost '%s'", c->peer, c->user,
            vhost_name(v));
    conn_set_alarm(c, server_alarms(c->srv));
    return AMQP_OK;
}

void conn_vhost_deleted(conn *c, const char *text)
{
    conn_close(c, AMQP_CONNECTION_FORCED, text, 0);
    if (c->vh)
        vhost_drop_exclusive(c->vh, c);
    c->vh = NULL;
}

/* Methods on channel 0: the connection class, in the order the handshake
 * allows them. */
int handshake_method(conn *c, const amqp_method *m, amqp_error *err)
{
    static const uint32_t expected[] = {
        [S_START_OK] = AMQP_CONNECTION_START_OK,
        [S_TUNE_OK] = AMQP_CONNECTION_TUNE_OK,
        [S_OPEN_WAIT] = AMQP_CONNECTION_OPEN,
    };
    if (c->state < S_OPEN && m->id != expected[c->state] && m->id != AMQP_CONNECTION_CLOSE)
        return amqp_fail(err, AMQP_COMMAND_INVALID, m->id, "expected '%s', got '%s'",
                         amqp_method_name(expected[c->state]), amqp_method_name(m->id));
    switch (m->id) {
    case AMQP_CONNECTION_START_OK:
        if (c->state == S_START_OK)
            return handle_start_ok(c, &m->connection_start_ok, err);
        break;
    case AMQP_CONNECTION_TUNE_OK:
        if (c->state == S_TUNE_OK)
            return handle_tune_ok(c, &m->connection_tune_ok, err);
        break;
    case AMQP_CONNECTION_OPEN:
        if (c->state == S_OPEN_WAIT)
            return handle_open(c, &m->connection_open, err);
        break;
    case AMQP_CONNECTION_CLOSE:
        conn_linger(c);
        return AMQP_OK;
    case AMQP_CONNECTION_UPDATE_SECRET: {
        amqp_method ok = {.id = AMQP_CONNECTION_UPDATE_SECRET_OK};
        conn_send_method(c, 0, &ok);
        return AMQP_OK;
    }
    }
    /* the handshake's methods again, or another class on channel 0 */
    return amqp_fail(err, AMQP_CHANNEL_ERROR, m->id,
                     "unexpected method in connection state running");
}
