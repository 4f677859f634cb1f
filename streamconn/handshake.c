/* The stream protocol's handshake: PeerProperties, SaslHandshake,
 * SaslAuthenticate (PLAIN and AMQPLAIN through access/, with the login
 * brake), Tune and Open (vhost access), as rabbit_stream_reader takes
 * them: PeerProperties is optional (RabbitMQ 3.10.8 takes SaslAuthenticate
 * first), a refusal is answered and the socket closed at once, anything
 * out of order closes it silently. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sconn_int.h"

#define SLICE(s) ((sp_slice){(const uint8_t *)(s), (uint32_t)strlen(s)})

/* Server properties, as the AMQP side names Warren (conn/handshake.c),
 * except the version: stream clients gate protocol features on it
 * (rabbitmq-stream-js-client turns filtering and Publish v2 on from
 * 3.13.0, by semver), so it names the RabbitMQ stream protocol level
 * Warren speaks, then Warren's own. */
static void peer_properties(sconn *c, const sp_command *cmd)
{
    const sp_pair props[] = {
        {SLICE("cluster_name"), SLICE(server_node_name(c->srv))},
        {SLICE("copyright"), SLICE("Copyright (c) Warren authors")},
        {SLICE("information"), SLICE("Warren AMQP 0-9-1 broker")},
        {SLICE("platform"), SLICE("C/libevent")},
        {SLICE("product"), SLICE("Warren")},
        {SLICE("version"), SLICE("3.13.0-warren.0.1.0")},
    };
    sp_list in = cmd->u.peer_properties.properties;
    uint8_t *copy = in.len ? malloc(in.len) : NULL;
    if (copy || !in.len) { /* kept for the management API; lost if memory is short */
        free(c->client_props);
        if (copy)
            memcpy(copy, in.p, in.len);
        c->client_props = copy;
        c->client_props_len = in.len;
        c->client_props_count = in.count;
    }
    sp_buf b = sc_out(c, 512);
    sp_encode_peer_properties_response(&b, cmd->correlation_id, SP_OK, props,
                                       sizeof props / sizeof props[0]);
    sc_commit(c, &b);
    if (c->state == SC_CONNECTED)
        c->state = SC_PEER_PROPS;
}

/* The mechanisms auth_mechanisms offers; EXTERNAL needs TLS, which the
 * stream listener does not have. */
static size_t mechanisms(const sconn *c, sp_slice *out)
{
    const config *cfg = server_config(c->srv);
    size_t n = 0;
    for (unsigned i = 0; i < cfg->nauth_mechs; i++)
        if (cfg->auth_mechs[i] != AUTH_EXTERNAL)
            out[n++] = SLICE(config_auth_mech_name(cfg->auth_mechs[i]));
    return n;
}

static void sasl_handshake(sconn *c, const sp_command *cmd)
{
    sp_slice mechs[CONFIG_MAX_AUTH_MECHS];
    size_t n = mechanisms(c, mechs);
    sp_buf b = sc_out(c, 128);
    sp_encode_sasl_handshake_response(&b, cmd->correlation_id, SP_OK, mechs, n);
    sc_commit(c, &b);
}

/* PLAIN exactly "\0user\0pass" (rabbit_auth_mechanism_plain), AMQPLAIN a
 * field table with LOGIN and PASSWORD strings. */
static bool credentials(sp_slice mech, sp_slice data, amqp_bytes *user, amqp_bytes *pass)
{
    amqp_bytes resp = {data.ptr, data.len};
    if (mech.len == 5 && memcmp(mech.ptr, "PLAIN", 5) == 0) {
        if (resp.len == 0 || resp.ptr[0] != 0)
            return false;
        const uint8_t *u = resp.ptr + 1, *z = memchr(u, 0, resp.len - 1);
        if (!z || memchr(z + 1, 0, resp.len - (size_t)(z + 1 - resp.ptr)))
            return false;
        *user = (amqp_bytes){u, (uint32_t)(z - u)};
        *pass = (amqp_bytes){z + 1, (uint32_t)(resp.len - (size_t)(z + 1 - resp.ptr))};
        return true;
    }
    amqp_field login, password;
    if (amqp_table_validate(resp, NULL) != AMQP_OK || !amqp_table_get(resp, "LOGIN", &login) ||
        !amqp_table_get(resp, "PASSWORD", &password) || login.type != 'S' ||
        password.type != 'S')
        return false;
    *user = login.v.bytes;
    *pass = password.v.bytes;
    return true;
}

/* The login brake first (a braked address is refused without a look at
 * the password), then the password, then loopback_users: RabbitMQ checks
 * the loopback rule after a good password and answers it with its own
 * code. A refusal counts towards the brake. */
static uint16_t check_login(sconn *c, amqp_bytes user, amqp_bytes pass)
{
    login_brake *b = server_login_brake(c->srv);
    const config *cfg = server_config(c->srv);
    bool braking = !c->loopback || cfg->login_brake_loopback;
    uint64_t now = loop_now_ms(c->loop);
    char why[400];
    if (braking && login_brake_left(b, c->brake_key, now)) {
        loop_refused(c->loop, REFUSED_LOGIN_BRAKE, "stream connection %s: login refused, %s is "
                     "braked", c->peer, c->peer_host);
        return SP_AUTHENTICATION_FAILURE;
    }
    if (access_login(server_access(c->srv), user, pass, true, why, sizeof why)) {
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)user.len, (const char *)user.ptr);
        if (c->loopback || !config_loopback_only(cfg, name))
            return SP_OK;
        snprintf(why, sizeof why, "user '%s' can only connect via localhost", name);
    }
    log_msg(LOG_WARNING, "stream connection %s: login refused: %s", c->peer, why);
    if (braking && login_brake_failed(b, c->brake_key, now))
        log_msg(LOG_WARNING, "login brake: %u failed logins from %s within %u ms; its logins are "
                "refused for %u ms", cfg->login_brake_failures, c->peer_host,
                cfg->login_brake_window_ms, cfg->login_brake_duration_ms);
    return strstr(why, "only connect via localhost") ? SP_SASL_AUTHENTICATION_FAILURE_LOOPBACK
                                                      : SP_AUTHENTICATION_FAILURE;
}

static bool logged_in(sconn *c, amqp_bytes user, sp_slice mech)
{
    char *name = malloc(user.len + 1);
    if (!name)
        return false;
    memcpy(name, user.ptr, user.len);
    name[user.len] = 0;
    c->user = name;
    c->mechanism = mech.len == 5 ? "PLAIN" : "AMQPLAIN";
    return true;
}

static void sasl_authenticate(sconn *c, const sp_command *cmd)
{
    sp_slice mechs[CONFIG_MAX_AUTH_MECHS], mech = cmd->u.sasl_authenticate.mechanism;
    size_t n = mechanisms(c, mechs), i = 0;
    while (i < n && !(mechs[i].len == mech.len && memcmp(mechs[i].ptr, mech.ptr, mech.len) == 0))
        i++;
    uint16_t code = SP_OK;
    amqp_bytes user, pass;
    server_counts *counts = loop_counters(c->loop);
    if (i == n) {
        code = SP_SASL_MECHANISM_NOT_SUPPORTED;
    } else {
        counts->auth_attempts++;
        if (!credentials(mech, cmd->u.sasl_authenticate.data, &user, &pass))
            code = SP_SASL_ERROR;
        else
            code = check_login(c, user, pass);
        if (code == SP_OK && !logged_in(c, user, mech))
            code = SP_INTERNAL_ERROR;
        counts->auth_failed += code != SP_OK;
    }
    sc_response(c, SP_SASL_AUTHENTICATE, cmd->correlation_id, code);
    if (code != SP_OK) {
        sc_teardown(c);
        return;
    }
    const config *cfg = server_config(c->srv);
    sp_buf b = sc_out(c, 32);
    sp_encode_tune(&b, cfg->stream_frame_max, cfg->stream_heartbeat);
    sc_commit(c, &b);
    c->state = SC_TUNING;
}

/* The client's Tune answers ours: each value is the lower, 0 meaning no
 * limit on that side (rabbit_stream_reader's negotiation). */
static void tuned(sconn *c, const sp_command *cmd)
{
    const config *cfg = server_config(c->srv);
    c->tuned_frame_max = sp_negotiate_frame_max(cmd->u.tune.frame_max, cfg->stream_frame_max);
    c->heartbeat = sp_negotiate_frame_max(cmd->u.tune.heartbeat, cfg->stream_heartbeat);
    c->state = SC_TUNED;
}

/* Open: the vhost must exist, have room under its connection limit, and
 * the user needs a permission entry there; else vhost access failure and
 * the socket closes. The response names this node for the client's
 * further connections (advertised_host and _port). */
static void open_vhost(sconn *c, const sp_command *cmd)
{
    amqp_bytes name = {cmd->u.open.vhost.ptr, cmd->u.open.vhost.len};
    vhost *v = server_vhost(c->srv, name);
    int64_t max = v ? vhost_max_connections(v) : -1;
    bool room = !v || max < 0 || vhost_connection_count(v) < (uint64_t)max;
    if (!v || !room || !access_find_perms(server_access(c->srv), AMQP_CSTR(c->user), name)) {
        log_msg(LOG_WARNING, "stream connection %s: access to vhost '%.*s' refused for user "
                "'%s'%s", c->peer, (int)name.len, (const char *)name.ptr, c->user,
                !v ? ": no such vhost" : !room ? ": connection limit reached" : "");
        sp_buf b = sc_out(c, 16);
        sp_encode_open_response(&b, cmd->correlation_id, SP_VHOST_ACCESS_FAILURE, NULL, 0);
        sc_commit(c, &b);
        sc_teardown(c);
        return;
    }
    vhost_connection_take(v);
    c->vh = v;
    c->state = SC_OPEN;
    c->frame_max = c->tuned_frame_max;
    loop_counters(c->loop)->connections_opened++;
    char host[300], port[16];
    sc_advertised(c->hub, host, sizeof host, port, sizeof port);
    const sp_pair props[] = {{SLICE("advertised_port"), SLICE(port)},
                             {SLICE("advertised_host"), SLICE(host)}};
    sp_buf b = sc_out(c, 64 + strlen(host));
    sp_encode_open_response(&b, cmd->correlation_id, SP_OK, props, 2);
    sc_commit(c, &b);
    log_msg(LOG_INFO, "stream connection %s: user '%s' authenticated, vhost '%s'", c->peer,
            c->user, vhost_name(v));
}

bool sc_handshake_command(sconn *c, const sp_command *cmd)
{
    bool authenticated = c->state >= SC_TUNING;
    switch (cmd->key) {
    case SP_PEER_PROPERTIES:
        if (authenticated)
            return false;
        peer_properties(c, cmd);
        return true;
    case SP_SASL_HANDSHAKE:
        if (authenticated)
            return false;
        sasl_handshake(c, cmd);
        return true;
    case SP_SASL_AUTHENTICATE:
        if (authenticated)
            return false;
        sasl_authenticate(c, cmd);
        return true;
    case SP_TUNE: /* a response, or as some clients send it a request: both taken */
        if (c->state != SC_TUNING)
            return false;
        tuned(c, cmd);
        return true;
    case SP_OPEN:
        if (c->state != SC_TUNED)
            return false;
        open_vhost(c, cmd);
        return true;
    case SP_HEARTBEAT:
        return true;
    case SP_CLOSE:
        if (!cmd->response)
            sc_response(c, SP_CLOSE, cmd->correlation_id, SP_OK);
        sc_teardown(c);
        return true;
    default:
        return false;
    }
}
