/* The TLS and SASL keys of the configuration, RabbitMQ's: AMQPS listeners
 * (listeners.ssl.<name>), ssl_options.*, management.ssl.* and
 * prometheus.ssl.* (a port turns that HTTPS listener on), where EXTERNAL
 * finds the user name (ssl_cert_login_*), and auth_mechanisms.<n>. A
 * certificate or key file that cannot be read is a bad value here, so the
 * start stops at the line that names it; whether the files make a usable
 * context is checked when the listener starts (broker/). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config_int.h"

static bool readable_file(char *dst, size_t cap, const char *v, char *why, size_t n)
{
    if (strlen(v) >= cap || !*v) {
        snprintf(why, n, "value must be 1..%zu characters", cap - 1);
        return false;
    }
    if (access(v, R_OK) != 0) {
        snprintf(why, n, "cannot read %s: %s", v, strerror(errno));
        return false;
    }
    strcpy(dst, v);
    return true;
}

static bool one_of(const char *v, const char *const *names, unsigned count, unsigned *out,
                   char *why, size_t n)
{
    for (unsigned i = 0; i < count; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return true;
        }
    int used = snprintf(why, n, "'%s' is not one of", v);
    for (unsigned i = 0; i < count && used > 0 && (size_t)used < n; i++)
        used += snprintf(why + used, n - (size_t)used, "%s %s", i ? "," : "", names[i]);
    return false;
}

static const char *const versions[] = {"tlsv1", "tlsv1.1", "tlsv1.2", "tlsv1.3"};

/* One ssl_options.<opt> (or management.ssl.<opt>, ...) into `o`. */
static bool set_tls_option(tls_options *o, const char *opt, const char *v, char *why, size_t n)
{
    static const char *const verify[] = {"verify_none", "verify_peer"};
    unsigned i;
    uint64_t x;
    if (strcmp(opt, "certfile") == 0)
        return readable_file(o->certfile, sizeof o->certfile, v, why, n);
    if (strcmp(opt, "keyfile") == 0)
        return readable_file(o->keyfile, sizeof o->keyfile, v, why, n);
    if (strcmp(opt, "cacertfile") == 0)
        return readable_file(o->cacertfile, sizeof o->cacertfile, v, why, n);
    if (strcmp(opt, "password") == 0)
        return copy_str(o->password, sizeof o->password, v, why, n);
    if (strcmp(opt, "verify") == 0 && one_of(v, verify, 2, &i, why, n))
        return o->verify_peer = i == 1, true;
    if (strcmp(opt, "fail_if_no_peer_cert") == 0)
        return parse_bool(v, &o->fail_if_no_peer_cert, why, n);
    if (strcmp(opt, "honor_cipher_order") == 0)
        return parse_bool(v, &o->honor_cipher_order, why, n);
    if (strcmp(opt, "depth") == 0 && parse_uint(v, 0, 100, &x, why, n))
        return o->depth = (int)x, true;
    if (strncmp(opt, "versions.", 9) == 0 && one_of(v, versions, 4, &i, why, n))
        return o->versions |= 1u << i, true;
    if (strncmp(opt, "ciphers.", 8) == 0) {
        size_t used = strlen(o->ciphers);
        if (!*v || strchr(v, ':') || used + strlen(v) + 2 > sizeof o->ciphers) {
            snprintf(why, n, "'%s' is not a cipher name, or the list is too long", v);
            return false;
        }
        snprintf(o->ciphers + used, sizeof o->ciphers - used, "%s%s", used ? ":" : "", v);
        return true;
    }
    if (!*why)
        snprintf(why, n, "unknown TLS option '%s'", opt);
    return false;
}

/* management.ssl.<key>, prometheus.ssl.<key>. */
static bool set_tls_http(config_tls_http *h, const char *opt, const char *v, char *why, size_t n)
{
    uint64_t port;
    if (strcmp(opt, "port") == 0 && parse_uint(v, 0, 65535, &port, why, n))
        return h->port = (int)port, h->on = true;
    if (strcmp(opt, "ip") == 0)
        return copy_str(h->ip, sizeof h->ip, v, why, n);
    if (strcmp(opt, "port") == 0)
        return false;
    return set_tls_option(&h->tls, opt, v, why, n);
}

static bool set_amqps_listener(config *c, const char *name, const char *v, char *why, size_t n)
{
    config_listener l;
    if (!listener_name(name, why, n) || !parse_listener(v, "", &l, why, n))
        return false;
    strcpy(l.name, name);
    return put_listener(&c->amqps, &l, why, n);
}

static const char *const mechanisms[] = {"PLAIN", "AMQPLAIN", "EXTERNAL"};

/* auth_mechanisms.<n>: the first replaces the default list; in key order. */
static bool set_auth_mechanism(config *c, const char *v, char *why, size_t n)
{
    unsigned m;
    if (!one_of(v, mechanisms, CONFIG_MAX_AUTH_MECHS, &m, why, n))
        return false;
    if (!c->auth_mechs_explicit)
        c->nauth_mechs = 0;
    c->auth_mechs_explicit = true;
    for (unsigned i = 0; i < c->nauth_mechs; i++)
        if (c->auth_mechs[i] == (config_auth_mech)m)
            return true;
    c->auth_mechs[c->nauth_mechs++] = (config_auth_mech)m;
    return true;
}

int config_set_tls(config *c, const char *key, const char *v, char *why, size_t n)
{
    static const char *const from[] = {"common_name", "distinguished_name",
                                       "subject_alternative_name"};
    static const char *const san[] = {"dns", "ip", "email", "uri", "other_name"};
    const char *rest;
    unsigned i;
    uint64_t x;
    *why = 0;
    if ((rest = after_prefix(key, "listeners.ssl.")))
        return set_amqps_listener(c, rest, v, why, n);
    if (strcmp(key, "listeners.ssl") == 0 && only_none(v, "listeners.ssl.<name>", why, n))
        return c->amqps.n = 0, true;
    if ((rest = after_prefix(key, "ssl_options.")))
        return set_tls_option(&c->amqp_tls, rest, v, why, n);
    if ((rest = after_prefix(key, "management.ssl.")))
        return set_tls_http(&c->mgmt_tls, rest, v, why, n);
    if ((rest = after_prefix(key, "prometheus.ssl.")))
        return set_tls_http(&c->prometheus_tls, rest, v, why, n);
    if (after_prefix(key, "auth_mechanisms."))
        return set_auth_mechanism(c, v, why, n);
    if (strcmp(key, "ssl_cert_login_from") == 0 && one_of(v, from, 3, &i, why, n))
        return c->cert_login_from = (tls_name_from)i, true;
    if (strcmp(key, "ssl_cert_login_san_type") == 0 && one_of(v, san, 5, &i, why, n))
        return c->cert_login_san_type = (tls_san_type)i, true;
    if (strcmp(key, "ssl_cert_login_san_index") == 0 && parse_uint(v, 0, 1000, &x, why, n))
        return c->cert_login_san_index = (unsigned)x, true;
    if (strcmp(key, "listeners.ssl") == 0 || strncmp(key, "ssl_cert_login_", 15) == 0)
        return false;
    return -1;
}

void config_tls_defaults(config *c)
{
    c->amqp_tls.depth = c->mgmt_tls.tls.depth = c->prometheus_tls.tls.depth = -1;
    c->auth_mechs[0] = AUTH_PLAIN;
    c->auth_mechs[1] = AUTH_AMQPLAIN;
    c->nauth_mechs = 2;
}

const char *config_auth_mech_name(config_auth_mech m) { return mechanisms[m]; }

static void describe_tls(const char *prefix, const tls_options *o,
                         void (*fn)(void *arg, const char *key, const char *value), void *arg)
{
    char key[96], b[32];
    const struct { const char *name, *value; } files[] = {
        {"certfile", o->certfile}, {"keyfile", o->keyfile}, {"cacertfile", o->cacertfile}};
    for (size_t i = 0; i < 3; i++)
        if (*files[i].value) {
            snprintf(key, sizeof key, "%s.%s", prefix, files[i].name);
            fn(arg, key, files[i].value);
        }
    snprintf(key, sizeof key, "%s.verify", prefix);
    fn(arg, key, o->verify_peer ? "verify_peer" : "verify_none");
    snprintf(key, sizeof key, "%s.fail_if_no_peer_cert", prefix);
    fn(arg, key, o->fail_if_no_peer_cert ? "true" : "false");
    snprintf(key, sizeof key, "%s.honor_cipher_order", prefix);
    fn(arg, key, o->honor_cipher_order ? "true" : "false");
    if (o->depth >= 0) {
        snprintf(key, sizeof key, "%s.depth", prefix);
        snprintf(b, sizeof b, "%d", o->depth);
        fn(arg, key, b);
    }
    unsigned v = o->versions ? o->versions : TLS_V1_2 | TLS_V1_3, k = 0;
    for (int i = 3; i >= 0; i--)
        if (v & (1u << i)) {
            snprintf(key, sizeof key, "%s.versions.%u", prefix, ++k);
            fn(arg, key, versions[i]);
        }
    char list[sizeof o->ciphers], *save;
    snprintf(list, sizeof list, "%s", o->ciphers);
    k = 0;
    for (char *c = strtok_r(list, ":", &save); c; c = strtok_r(NULL, ":", &save)) {
        snprintf(key, sizeof key, "%s.ciphers.%u", prefix, ++k);
        fn(arg, key, c);
    }
}

static void describe_http(const char *prefix, const config_tls_http *h,
                          void (*fn)(void *arg, const char *key, const char *value), void *arg)
{
    char key[64], b[16];
    if (!h->on)
        return;
    snprintf(key, sizeof key, "%s.port", prefix);
    snprintf(b, sizeof b, "%d", h->port);
    fn(arg, key, b);
    snprintf(key, sizeof key, "%s.ip", prefix);
    fn(arg, key, *h->ip ? h->ip : "0.0.0.0");
    describe_tls(prefix, &h->tls, fn, arg);
}

void config_describe_tls(const config *c, void (*fn)(void *arg, const char *key, const char *value),
                         void *arg)
{
    static const char *const from[] = {"common_name", "distinguished_name",
                                       "subject_alternative_name"};
    static const char *const san[] = {"dns", "ip", "email", "uri", "other_name"};
    char key[64], b[16];
    describe_more("listeners.ssl", &c->amqps, fn, arg);
    if (c->amqps.n)
        describe_tls("ssl_options", &c->amqp_tls, fn, arg);
    describe_http("management.ssl", &c->mgmt_tls, fn, arg);
    describe_http("prometheus.ssl", &c->prometheus_tls, fn, arg);
    for (unsigned i = 0; i < c->nauth_mechs; i++) {
        snprintf(key, sizeof key, "auth_mechanisms.%u", i + 1);
        fn(arg, key, mechanisms[c->auth_mechs[i]]);
    }
    fn(arg, "ssl_cert_login_from", from[c->cert_login_from]);
    fn(arg, "ssl_cert_login_san_type", san[c->cert_login_san_type]);
    snprintf(b, sizeof b, "%u", c->cert_login_san_index);
    fn(arg, "ssl_cert_login_san_index", b);
}
