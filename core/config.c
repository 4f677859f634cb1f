/* Configuration in RabbitMQ's rabbitmq.conf style: one "key = value" per
 * line, '#' starts a comment. Every key is listed in `keys` with a parser;
 * an unknown key or a bad value is an error that names the file and line. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

typedef bool (*key_parser)(config *c, const char *value, char *why, size_t whylen);

bool parse_uint(const char *v, uint64_t min, uint64_t max, uint64_t *out, char *why,
                       size_t whylen)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*v)) {
        snprintf(why, whylen, "'%s' is not a non-negative integer", v);
        return false;
    }
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end) {
        snprintf(why, whylen, "'%s' is not a non-negative integer", v);
        return false;
    }
    if (n < min || n > max) {
        snprintf(why, whylen, "%s is out of range %llu..%llu", v, (unsigned long long)min,
                 (unsigned long long)max);
        return false;
    }
    *out = n;
    return true;
}

bool parse_bool(const char *v, bool *out, char *why, size_t whylen)
{
    if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0) {
        *out = v[0] == 't';
        return true;
    }
    snprintf(why, whylen, "'%s' is not true or false", v);
    return false;
}

bool copy_str(char *dst, size_t cap, const char *v, char *why, size_t whylen)
{
    if (strlen(v) >= cap || !*v) {
        snprintf(why, whylen, "value must be 1..%zu characters", cap - 1);
        return false;
    }
    strcpy(dst, v);
    return true;
}

/* A listener's value: "5672" (a port alone: `wildcard` as the host),
 * "127.0.0.1:5672", "::1:5672" (the last colon splits, as RabbitMQ's
 * cuttlefish reads an ip) or "[::1]:5672" (Warren takes brackets too). */
bool parse_listener(const char *v, const char *wildcard, config_listener *out, char *why,
                           size_t whylen)
{
    const char *colon = strrchr(v, ':');
    uint64_t p;
    if (!parse_uint(colon ? colon + 1 : v, 0, 65535, &p, why, whylen))
        return false;
    size_t hl = colon ? (size_t)(colon - v) : strlen(wildcard);
    const char *h = colon ? v : wildcard;
    if (colon && hl >= 2 && v[0] == '[' && v[hl - 1] == ']')
        h++, hl -= 2;
    if (hl >= sizeof out->host) {
        snprintf(why, whylen, "'%s' is not an IPv4 or IPv6 address and port", v);
        return false;
    }
    memcpy(out->host, h, hl);
    out->host[hl] = 0;
    unsigned char addr[sizeof(struct in6_addr)];
    if (colon && inet_pton(AF_INET, out->host, addr) != 1 &&
        inet_pton(AF_INET6, out->host, addr) != 1) {
        snprintf(why, whylen, "'%s' is not an IPv4 or IPv6 address and port", v);
        return false;
    }
    out->port = (int)p;
    return true;
}

bool listener_name(const char *name, char *why, size_t whylen)
{
    if (*name && strlen(name) < sizeof((config_listener *)0)->name && !strchr(name, '.'))
        return true;
    snprintf(why, whylen, "a listener name must be 1..%zu characters without a dot",
             sizeof((config_listener *)0)->name - 1);
    return false;
}

/* Puts `l` in `more`, replacing the listener of the same name. */
bool put_listener(config_listeners *more, const config_listener *l, char *why,
                         size_t whylen)
{
    unsigned i = 0;
    while (i < more->n && strcmp(more->extra[i].name, l->name) != 0)
        i++;
    if (i == CONFIG_MAX_LISTENERS - 1) {
        snprintf(why, whylen, "at most %d listeners", CONFIG_MAX_LISTENERS);
        return false;
    }
    more->extra[i] = *l;
    more->n += i == more->n;
    return true;
}

/* listeners.tcp.<name>: see config.listen_name in core.h. */
static bool set_amqp_listener(config *c, const char *name, const char *v, char *why, size_t n)
{
    config_listener l;
    if (!listener_name(name, why, n) || !parse_listener(v, "", &l, why, n))
        return false;
    strcpy(l.name, name);
    if (c->listeners_explicit && strcmp(c->listen_name, name) != 0)
        return put_listener(&c->amqp_more, &l, why, n);
    c->listeners_explicit = true;
    strcpy(c->listen_name, l.name);
    strcpy(c->listen_host, l.host);
    c->listen_port = l.port;
    return true;
}

/* A "<key> = none" key: true for none, else why names the other form. */
bool only_none(const char *v, const char *other_form, char *why, size_t n)
{
    if (strcmp(v, "none") == 0)
        return true;
    snprintf(why, n, "only 'none' is accepted here; use %s", other_form);
    return false;
}

static bool set_listeners_none(config *c, const char *v, char *why, size_t n)
{
    if (!only_none(v, "listeners.tcp.<name> = [host:]port", why, n))
        return false;
    c->listeners_none = true;
    return true;
}

/* management.listeners.tcp.<name>, prometheus.listeners.tcp.<name>. */
static bool set_more_listener(config_listeners *more, const char *name, const char *v, char *why,
                              size_t n)
{
    config_listener l;
    if (!listener_name(name, why, n) || !parse_listener(v, "0.0.0.0", &l, why, n))
        return false;
    strcpy(l.name, name);
    return put_listener(more, &l, why, n);
}

static bool set_default_user(config *c, const char *v, char *why, size_t n)
{
    return copy_str(c->default_user, sizeof c->default_user, v, why, n);
}
static bool set_default_pass(config *c, const char *v, char *why, size_t n)
{
    return copy_str(c->default_pass, sizeof c->default_pass, v, why, n);
}
static bool set_default_vhost(config *c, const char *v, char *why, size_t n)
{
    return copy_str(c->default_vhost, sizeof c->default_vhost, v, why, n);
}
static bool set_data_dir(config *c, const char *v, char *why, size_t n)
{
    return copy_str(c->data_dir, sizeof c->data_dir, v, why, n);
}
static bool set_load_definitions(config *c, const char *v, char *why, size_t n)
{
    return copy_str(c->load_definitions, sizeof c->load_definitions, v, why, n);
}

/* "loopback_users = none": nobody is loopback-only, whatever else is set. */
static bool set_loopback_users(config *c, const char *v, char *why, size_t n)
{
    if (!only_none(v, "loopback_users.<user> = true|false", why, n))
        return false;
    c->loopback_none = true;
    return true;
}

static int loopback_index(const config *c, const char *user)
{
    for (unsigned i = 0; i < c->nloopback_users; i++)
        if (strcmp(c->loopback_users[i], user) == 0)
            return (int)i;
    return -1;
}

/* "loopback_users.<user> = true|false". The first such key replaces the
 * default list (guest), as RabbitMQ's translation of these keys does. */
static bool set_loopback_user(config *c, const char *user, const char *v, char *why, size_t n)
{
    bool on;
    if (!parse_bool(v, &on, why, n))
        return false;
    if (!*user || strlen(user) >= sizeof c->loopback_users[0]) {
        snprintf(why, n, "user name must be 1..%zu characters", sizeof c->loopback_users[0] - 1);
        return false;
    }
    if (!c->loopback_explicit) {
        c->loopback_explicit = true;
        c->nloopback_users = 0;
    }
    int i = loopback_index(c, user);
    if (!on && i >= 0) {
        memmove(c->loopback_users[i], c->loopback_users[i + 1],
                (c->nloopback_users - (unsigned)i - 1) * sizeof c->loopback_users[0]);
        c->nloopback_users--;
    } else if (on && i < 0) {
        if (c->nloopback_users == CONFIG_MAX_LOOPBACK_USERS) {
            snprintf(why, n, "at most %d loopback users", CONFIG_MAX_LOOPBACK_USERS);
            return false;
        }
        strcpy(c->loopback_users[c->nloopback_users++], user);
    }
    return true;
}

bool config_loopback_only(const config *c, const char *user)
{
    return !c->loopback_none && loopback_index(c, user) >= 0;
}

static bool set_heartbeat(config *c, const char *v, char *why, size_t n)
{
    uint64_t x;
    if (!parse_uint(v, 0, 65535, &x, why, n))
        return false;
    c->heartbeat = (unsigned)x;
    return true;
}

static bool set_frame_max(config *c, const char *v, char *why, size_t n)
{
    uint64_t x;
    if (!parse_uint(v, AMQP_FRAME_MIN_SIZE, 16u << 20, &x, why, n))
        return false;
    c->frame_max = (uint32_t)x;
    return true;
}

static bool set_channel_max(config *c, const char *v, char *why, size_t n)
{
    uint64_t x;
    if (!parse_uint(v, 1, 65535, &x, why, n))
        return false;
    c->channel_max = (uint16_t)x;
    return true;
}

static bool set_max_message_size(config *c, const char *v, char *why, size_t n)
{
    return parse_uint(v, 1, 512u << 20, &c->max_message_size, why, n);
}

/* ---- limits (README "Limits") ---- */

/* A count, or "infinity" (RabbitMQ's default for connection_max) as 0. */
static bool parse_count(const char *v, uint32_t *out, char *why, size_t n)
{
    uint64_t x = 0;
    if (strcmp(v, "infinity") != 0 && !parse_uint(v, 0, UINT32_MAX, &x, why, n))
        return false;
    *out = (uint32_t)x;
    return true;
}

static bool set_connection_max(config *c, const char *v, char *why, size_t n)
{
    return parse_count(v, &c->connection_max, why, n);
}

static bool set_consumer_max_per_channel(config *c, const char *v, char *why, size_t n)
{
    return parse_count(v, &c->consumer_max_per_channel, why, n);
}

static bool set_log_level(config *c, const char *v, char *why, size_t n)
{
    if (log_parse_level(v, &c->log_level))
        return true;
    snprintf(why, n, "'%s' is not one of debug, info, warning, error, none", v);
    return false;
}

static bool set_handshake_timeout(config *c, const char *v, char *why, size_t n)
{
    uint64_t x;
    if (!parse_uint(v, 100, 3600000, &x, why, n))
        return false;
    c->handshake_timeout_ms = (unsigned)x;
    return true;
}

static bool set_watermark_relative(config *c, const char *v, char *why, size_t n)
{
    char *end;
    double x = strtod(v, &end);
    if (*end || !(x > 0 && x <= 1)) {
        snprintf(why, n, "'%s' is not a fraction in (0, 1]", v);
        return false;
    }
    c->memory_high_watermark = x;
    return true;
}

static bool set_watermark_absolute(config *c, const char *v, char *why, size_t n)
{
    return config_parse_bytes(v, 1, UINT64_MAX / 2, &c->memory_high_watermark_abs, why, n);
}

static bool set_journal_sync(config *c, const char *v, char *why, size_t n)
{
    static const char *const modes[] = {"batch", "always", "none"};
    for (int i = 0; i < 3; i++)
        if (strcmp(v, modes[i]) == 0) {
            c->journal_sync = (journal_sync_mode)i;
            return true;
        }
    snprintf(why, n, "'%s' is not one of batch, always, none", v);
    return false;
}

static bool set_segment_size(config *c, const char *v, char *why, size_t n)
{
    return parse_uint(v, 1u << 20, 1u << 30, &c->journal_segment_size, why, n);
}

/* consumer_timeout: ms, 0 = none (RabbitMQ's key, default 30 minutes). */
static bool set_consumer_timeout(config *c, const char *v, char *why, size_t n)
{
    return parse_uint(v, 0, UINT64_MAX / 4, &c->consumer_timeout_ms, why, n);
}

static bool set_consumer_timeout_action(config *c, const char *v, char *why, size_t n)
{
    if (strcmp(v, "cancel_consumer") == 0 || strcmp(v, "close_channel") == 0) {
        c->consumer_timeout_close_channel = v[1] == 'l';
        return true;
    }
    snprintf(why, n, "'%s' is not one of cancel_consumer, close_channel", v);
    return false;
}

static bool set_mgmt_port(config *c, const char *v, char *why, size_t n)
{
    uint64_t x;
    if (!parse_uint(v, 0, 65535, &x, why, n))
        return false;
    c->mgmt_port = (int)x;
    c->mgmt_port_set = true;
    return true;
}

static bool set_mgmt_ip(config *c, const char *v, char *why, size_t n)
{
    return copy_str(c->mgmt_ip, sizeof c->mgmt_ip, v, why, n);
}

static bool set_mgmt_max_body(config *c, const char *v, char *why, size_t n)
{
    return parse_uint(v, 1024, 1u << 30, &c->mgmt_max_body, why, n);
}

/* A count or a time in ms of the management listener (`*out`). */
static bool set_mgmt_unsigned(unsigned *out, uint64_t lo, uint64_t hi, const char *v, char *why,
                              size_t n)
{
    uint64_t x;
    if (!parse_uint(v, lo, hi, &x, why, n))
        return false;
    *out = (unsigned)x;
    return true;
}

static bool set_mgmt_max_connections(config *c, const char *v, char *why, size_t n)
{
    return set_mgmt_unsigned(&c->mgmt_max_connections, 1, 1000000, v, why, n);
}

static bool set_mgmt_head_timeout(config *c, const char *v, char *why, size_t n)
{
    return set_mgmt_unsigned(&c->mgmt_head_timeout_ms, 100, 3600000, v, why, n);
}

static bool set_mgmt_body_timeout(config *c, const char *v, char *why, size_t n)
{
    return set_mgmt_unsigned(&c->mgmt_body_timeout_ms, 100, 3600000, v, why, n);
}

static bool set_mgmt_idle_timeout(config *c, const char *v, char *why, size_t n)
{
    return set_mgmt_unsigned(&c->mgmt_idle_timeout_ms, 100, 86400000, v, why, n);
}

static bool set_prometheus_port(config *c, const char *v, char *why, size_t n)
{
    uint64_t x;
    if (!parse_uint(v, 0, 65535, &x, why, n))
        return false;
    c->prometheus_port = (int)x;
    c->prometheus_port_set = true;
    return true;
}

static bool set_prometheus_ip(config *c, const char *v, char *why, size_t n)
{
    return copy_str(c->prometheus_ip, sizeof c->prometheus_ip, v, why, n);
}

static bool set_prometheus_per_object(config *c, const char *v, char *why, size_t n)
{
    return parse_bool(v, &c->prometheus_per_object, why, n);
}

static bool set_u32(uint32_t *out, const char *v, uint64_t min, uint64_t max, char *why,
                    size_t n)
{
    uint64_t x;
    if (!parse_uint(v, min, max, &x, why, n))
        return false;
    *out = (uint32_t)x;
    return true;
}

static bool set_brake_failures(config *c, const char *v, char *why, size_t n)
{
    return set_u32(&c->login_brake_failures, v, 0, 1000000, why, n);
}
static bool set_brake_window(config *c, const char *v, char *why, size_t n)
{
    return set_u32(&c->login_brake_window_ms, v, 1, 86400000, why, n);
}
static bool set_brake_duration(config *c, const char *v, char *why, size_t n)
{
    return set_u32(&c->login_brake_duration_ms, v, 1, 86400000, why, n);
}
static bool set_brake_max_held(config *c, const char *v, char *why, size_t n)
{
    return set_u32(&c->login_brake_max_held, v, 0, 1000000, why, n);
}
static bool set_brake_loopback(config *c, const char *v, char *why, size_t n)
{
    return parse_bool(v, &c->login_brake_loopback, why, n);
}

static const struct {
    const char *key;
    key_parser parse;
} keys[] = {
    {"login_brake.failures", set_brake_failures},
    {"login_brake.window", set_brake_window},
    {"login_brake.duration", set_brake_duration},
    {"login_brake.max_held", set_brake_max_held},
    {"login_brake.loopback", set_brake_loopback},
    {"management.tcp.port", set_mgmt_port},
    {"management.tcp.ip", set_mgmt_ip},
    {"management.tcp.idle_timeout", set_mgmt_idle_timeout},
    {"management.http.max_body_size", set_mgmt_max_body},
    {"management.http.max_connections", set_mgmt_max_connections},
    {"management.http.head_timeout", set_mgmt_head_timeout},
    {"management.http.body_timeout", set_mgmt_body_timeout},
    {"prometheus.tcp.port", set_prometheus_port},
    {"prometheus.tcp.ip", set_prometheus_ip},
    {"prometheus.return_per_object_metrics", set_prometheus_per_object},
    {"journal.sync", set_journal_sync},
    {"journal.segment_size", set_segment_size},
    {"vm_memory_high_watermark.relative", set_watermark_relative},
    {"vm_memory_high_watermark.absolute", set_watermark_absolute},
    {"listeners.tcp", set_listeners_none},
    {"default_user", set_default_user},
    {"default_pass", set_default_pass},
    {"default_vhost", set_default_vhost},
    {"loopback_users", set_loopback_users},
    {"heartbeat", set_heartbeat},
    {"frame_max", set_frame_max},
    {"channel_max", set_channel_max},
    {"max_message_size", set_max_message_size},
    {"connection_max", set_connection_max},
    {"consumer_max_per_channel", set_consumer_max_per_channel},
    {"log.level", set_log_level},
    {"log.console.level", set_log_level},
    {"data_dir", set_data_dir},
    {"load_definitions", set_load_definitions},
    {"handshake_timeout", set_handshake_timeout},
    {"consumer_timeout", set_consumer_timeout},
    {"consumer_timeout.action", set_consumer_timeout_action},
};

void config_defaults(config *c)
{
    memset(c, 0, sizeof *c);
    strcpy(c->listen_name, "default");
    c->listen_port = 5672;
    strcpy(c->default_user, "guest");
    strcpy(c->default_pass, "guest");
    strcpy(c->default_vhost, "/");
    strcpy(c->loopback_users[0], "guest");
    c->nloopback_users = 1;
    c->heartbeat = 60;
    c->frame_max = 131072;
    c->channel_max = 2047;
    c->max_message_size = 128u << 20;
    c->log_level = LOG_INFO;
    strcpy(c->data_dir, "./var");
    c->handshake_timeout_ms = 10000;
    c->conn_output_limit = 4u << 20;
    c->memory_high_watermark = 0.4;
    c->journal_sync = JOURNAL_SYNC_BATCH;
    c->journal_segment_size = 64u << 20;
    strcpy(c->mgmt_ip, "0.0.0.0");
    c->mgmt_port = 15672;
    c->mgmt_max_body = 8000000; /* RabbitMQ 3.10 refuses 9 MB bodies, takes 7 MB */
    c->mgmt_max_connections = 512;
    c->mgmt_head_timeout_ms = 10000;
    c->mgmt_body_timeout_ms = 60000;
    c->mgmt_idle_timeout_ms = 60000;
    c->consumer_timeout_ms = 1800000;
    strcpy(c->prometheus_ip, "0.0.0.0");
    c->prometheus_port = 15692;
    c->login_brake_failures = 10;
    c->login_brake_window_ms = 60000;
    c->login_brake_duration_ms = 60000;
    c->login_brake_max_held = 1000;
    config_tls_defaults(c);
    config_alarm_defaults(c);
    config_stream_defaults(c);
    config_cluster_defaults(c);
}

static void describe_listener(const char *prefix, const config_listener *l,
                              void (*fn)(void *arg, const char *key, const char *value), void *arg)
{
    char key[128], value[96];
    snprintf(key, sizeof key, "%s.%s", prefix, l->name);
    if (!*l->host)
        snprintf(value, sizeof value, "%d", l->port);
    else
        snprintf(value, sizeof value, strchr(l->host, ':') ? "[%s]:%d" : "%s:%d", l->host, l->port);
    fn(arg, key, value);
}

void describe_more(const char *prefix, const config_listeners *more,
                          void (*fn)(void *arg, const char *key, const char *value), void *arg)
{
    for (unsigned i = 0; i < more->n; i++)
        describe_listener(prefix, &more->extra[i], fn, arg);
}

static void describe_listeners(const config *c,
                               void (*fn)(void *arg, const char *key, const char *value), void *arg)
{
    if (c->listeners_none) {
        fn(arg, "listeners.tcp", "none");
    } else {
        config_listener first = {.port = c->listen_port};
        strcpy(first.name, c->listen_name);
        strcpy(first.host, c->listen_host);
        describe_listener("listeners.tcp", &first, fn, arg);
        describe_more("listeners.tcp", &c->amqp_more, fn, arg);
    }
    describe_more("management.listeners.tcp", &c->mgmt_more, fn, arg);
    describe_more("prometheus.listeners.tcp", &c->prometheus_more, fn, arg);
}

/* Every setting as its rabbitmq.conf key; default_pass is left out. */
void config_describe(const config *c, void (*fn)(void *arg, const char *key, const char *value),
                     void *arg)
{
    static const char *const syncs[] = {"batch", "always", "none"};
    static const char *const levels[] = {"debug", "info", "warning", "error", "none"};
    char b[160];
    describe_listeners(c, fn, arg);
    fn(arg, "default_user", c->default_user);
    fn(arg, "default_vhost", c->default_vhost);
    /* "loopback_users.guest = false" alone leaves nobody loopback-only:
     * that is "none", not the default that saying nothing would mean */
    if (c->loopback_none || (c->loopback_explicit && c->nloopback_users == 0))
        fn(arg, "loopback_users", "none");
    else if (!c->loopback_explicit)
        fn(arg, "loopback_users.guest", "true");
    for (unsigned i = 0; !c->loopback_none && c->loopback_explicit && i < c->nloopback_users; i++) {
        char key[300];
        snprintf(key, sizeof key, "loopback_users.%s", c->loopback_users[i]);
        fn(arg, key, "true");
    }
    const struct { const char *key; uint64_t v; } nums[] = {
        {"heartbeat", c->heartbeat}, {"frame_max", c->frame_max},
        {"channel_max", c->channel_max}, {"handshake_timeout", c->handshake_timeout_ms},
        {"max_message_size", c->max_message_size},
        {"journal.segment_size", c->journal_segment_size},
        {"management.tcp.port", (uint64_t)c->mgmt_port},
        {"management.tcp.idle_timeout", c->mgmt_idle_timeout_ms},
        {"management.http.max_body_size", c->mgmt_max_body},
        {"management.http.max_connections", c->mgmt_max_connections},
        {"management.http.head_timeout", c->mgmt_head_timeout_ms},
        {"management.http.body_timeout", c->mgmt_body_timeout_ms},
        {"consumer_timeout", c->consumer_timeout_ms},
        {"prometheus.tcp.port", (uint64_t)c->prometheus_port},
        {"login_brake.failures", c->login_brake_failures},
        {"login_brake.window", c->login_brake_window_ms},
        {"login_brake.duration", c->login_brake_duration_ms},
        {"login_brake.max_held", c->login_brake_max_held},
        {"connection_max", c->connection_max},
        {"consumer_max_per_channel", c->consumer_max_per_channel},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        snprintf(b, sizeof b, "%llu", (unsigned long long)nums[i].v);
        fn(arg, nums[i].key, b);
    }
    fn(arg, "management.tcp.ip", c->mgmt_ip);
    fn(arg, "prometheus.tcp.ip", c->prometheus_ip);
    fn(arg, "prometheus.return_per_object_metrics", c->prometheus_per_object ? "true" : "false");
    fn(arg, "login_brake.loopback", c->login_brake_loopback ? "true" : "false");
    if (c->memory_high_watermark_abs) {
        snprintf(b, sizeof b, "%llu", (unsigned long long)c->memory_high_watermark_abs);
        fn(arg, "vm_memory_high_watermark.absolute", b);
    } else {
        snprintf(b, sizeof b, "%g", c->memory_high_watermark);
        fn(arg, "vm_memory_high_watermark.relative", b);
    }
    fn(arg, "log.level", levels[c->log_level]);
    fn(arg, "data_dir", c->data_dir);
    if (c->load_definitions[0])
        fn(arg, "load_definitions", c->load_definitions);
    fn(arg, "journal.sync", syncs[c->journal_sync]);
    fn(arg, "consumer_timeout.action",
       c->consumer_timeout_close_channel ? "close_channel" : "cancel_consumer");
    config_describe_tls(c, fn, arg);
    config_describe_alarms(c, fn, arg);
    config_describe_stream(c, fn, arg);
    config_describe_cluster(c, fn, arg);
}

/* The rest of `key` after `prefix`, or NULL when it does not start so. */
const char *after_prefix(const char *key, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(key, prefix, n) == 0 ? key + n : NULL;
}

bool config_set(config *c, const char *key, const char *value, const char *origin, char *err,
                size_t errlen)
{
    char why[300];
    const char *name;
    bool ok = false;
    int alarm_key, stream_key, cluster_key;
    if ((name = after_prefix(key, "loopback_users.")))
        ok = set_loopback_user(c, name, value, why, sizeof why);
    else if ((name = after_prefix(key, "listeners.tcp.")))
        ok = set_amqp_listener(c, name, value, why, sizeof why);
    else if ((name = after_prefix(key, "management.listeners.tcp.")))
        ok = set_more_listener(&c->mgmt_more, name, value, why, sizeof why);
    else if ((name = after_prefix(key, "prometheus.listeners.tcp.")))
        ok = set_more_listener(&c->prometheus_more, name, value, why, sizeof why);
    else if ((alarm_key = config_set_alarm_key(c, key, value, why, sizeof why)) >= 0)
        name = key, ok = alarm_key;
    else if ((stream_key = config_set_stream_key(c, key, value, why, sizeof why)) >= 0)
        name = key, ok = stream_key;
    else if ((cluster_key = config_set_cluster_key(c, key, value, why, sizeof why)) >= 0)
        name = key, ok = cluster_key;
    int tls = name ? -1 : config_set_tls(c, key, value, why, sizeof why);
    if (name || tls >= 0) {
        ok = name ? ok : tls == 1;
        if (!ok)
            snprintf(err, errlen, "%s: bad value for '%s': %s", origin, key, why);
        return ok;
    }
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (strcmp(keys[i].key, key) != 0)
            continue;
        if (keys[i].parse(c, value, why, sizeof why))
            return true;
        snprintf(err, errlen, "%s: bad value for '%s': %s", origin, key, why);
        return false;
    }
    snprintf(err, errlen, "%s: unknown key '%s'", origin, key);
    return false;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

bool config_load_file(config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return false;
    }
    char line[1024], origin[600];
    bool ok = true;
    for (int lineno = 1; ok && fgets(line, sizeof line, f); lineno++) {
        snprintf(origin, sizeof origin, "%s:%d", path, lineno);
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *s = trim(line);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s: expected 'key = value'", origin);
            ok = false;
            break;
        }
        *eq = 0;
        ok = config_set(c, trim(s), trim(eq + 1), origin, err, errlen);
    }
    fclose(f);
    return ok;
}
