/* The names rabbitmq_federation gives what it makes upstream, so that a
 * RabbitMQ operator finds Warren's links where RabbitMQ's would be (and a
 * link that moves from one to the other reuses its queue), and the ids of
 * links in the status. */
#include <stdio.h>
#include <string.h>

#include "fed_int.h"

void fed_queue_name(char *out, size_t cap, const char *upstream_x, const char *upstream_vhost,
                    const char *cluster, const char *down_vhost, const char *down_x)
{
    if (strcmp(down_vhost, upstream_vhost) != 0)
        snprintf(out, cap, "federation: %s -> %s:%s:%s", upstream_x, cluster, down_vhost, down_x);
    else if (strcmp(down_x, upstream_x) != 0)
        snprintf(out, cap, "federation: %s -> %s:%s", upstream_x, cluster, down_x);
    else
        snprintf(out, cap, "federation: %s -> %s", upstream_x, cluster);
}

void fed_exchange_name(char *out, size_t cap, const char *queue_name, char suffix)
{
    snprintf(out, cap, "%s %c", queue_name, suffix);
}

void fed_connection_name(char *out, size_t cap, const char *upstream, const char *policy)
{
    if (upstream && policy)
        snprintf(out, cap, "Federation link (upstream: %s, policy: %s)", upstream, policy);
    else
        snprintf(out, cap, "Federation link");
}

static uint32_t fnv1a(uint32_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return (h ^ 0xff) * 16777619u; /* a separator, so ("ab","c") != ("a","bc") */
}

void fed_link_id(char *out, size_t cap, const char *vh, const char *type, const char *object,
                 const char *upstream, const char *upstream_object)
{
    uint32_t h = 2166136261u;
    const char *parts[] = {vh, type, object, upstream, upstream_object};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        h = fnv1a(h, parts[i]);
    snprintf(out, cap, "%08x", h);
}
