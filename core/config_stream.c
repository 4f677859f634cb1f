/* The stream protocol's keys, RabbitMQ's rabbitmq_stream plugin's names
 * (its priv/schema/rabbitmq_stream.schema): stream.listeners.tcp.<name>,
 * stream.listeners.tcp = none, stream.advertised_host, _port,
 * stream.frame_max and stream.heartbeat. */
#include <stdio.h>
#include <string.h>

#include "config_int.h"

void config_stream_defaults(config *c)
{
    c->stream_listeners.n = 1;
    strcpy(c->stream_listeners.extra[0].name, "default");
    c->stream_listeners.extra[0].port = 5552;
    c->stream_frame_max = 1048576; /* rabbit_stream.hrl's DEFAULT_FRAME_MAX */
    c->stream_heartbeat = 60;
}

/* stream.listeners.tcp.<name>: the first such key replaces the default
 * listener, as listeners.tcp.<name> does for AMQP. */
static bool set_listener(config *c, const char *name, const char *v, char *why, size_t n)
{
    config_listener l;
    if (!listener_name(name, why, n) || !parse_listener(v, "", &l, why, n))
        return false;
    strcpy(l.name, name);
    if (!c->stream_listeners_explicit)
        c->stream_listeners.n = 0;
    c->stream_listeners_explicit = true;
    return put_listener(&c->stream_listeners, &l, why, n);
}

int config_set_stream_key(config *c, const char *key, const char *v, char *why, size_t n)
{
    const char *name = after_prefix(key, "stream.listeners.tcp.");
    uint64_t u;
    if (name)
        return set_listener(c, name, v, why, n);
    if (strcmp(key, "stream.listeners.tcp") == 0) {
        if (!only_none(v, "stream.listeners.tcp.<name> = [host:]port", why, n))
            return 0;
        c->stream_listeners_none = true;
        return 1;
    }
    if (strcmp(key, "stream.advertised_host") == 0)
        return copy_str(c->stream_advertised_host, sizeof c->stream_advertised_host, v, why, n);
    if (strcmp(key, "stream.advertised_port") == 0) {
        if (!parse_uint(v, 1, 65535, &u, why, n))
            return 0;
        c->stream_advertised_port = (int)u;
        return 1;
    }
    /* Warren refuses 0 ("no limit" in RabbitMQ): a frame is read whole,
     * so a bound is what keeps one client from making the broker buffer
     * gigabytes; 8192 is the protocol's pre-Open bound */
    if (strcmp(key, "stream.frame_max") == 0) {
        if (!parse_uint(v, 8192, 1u << 30, &u, why, n))
            return 0;
        c->stream_frame_max = (uint32_t)u;
        return 1;
    }
    if (strcmp(key, "stream.heartbeat") == 0) {
        if (!parse_uint(v, 0, 86400, &u, why, n))
            return 0;
        c->stream_heartbeat = (uint32_t)u;
        return 1;
    }
    return -1;
}

void config_describe_stream(const config *c,
                            void (*fn)(void *arg, const char *key, const char *value), void *arg)
{
    char b[32];
    if (c->stream_listeners_none)
        fn(arg, "stream.listeners.tcp", "none");
    else
        describe_more("stream.listeners.tcp", &c->stream_listeners, fn, arg);
    if (*c->stream_advertised_host)
        fn(arg, "stream.advertised_host", c->stream_advertised_host);
    if (c->stream_advertised_port) {
        snprintf(b, sizeof b, "%d", c->stream_advertised_port);
        fn(arg, "stream.advertised_port", b);
    }
    snprintf(b, sizeof b, "%u", c->stream_frame_max);
    fn(arg, "stream.frame_max", b);
    snprintf(b, sizeof b, "%u", c->stream_heartbeat);
    fn(arg, "stream.heartbeat", b);
}
