/* Vhost limits (max-connections, max-queues), as RabbitMQ's
 * rabbit_vhost_limit keeps them: one runtime parameter per vhost,
 * component "vhost-limits", name "limits", whose value is a JSON object of
 * the two integers. The management plane validates it (only those keys,
 * integers only) and stores it compact, so reading a limit here is finding
 * "key": in the text -- the broker knows no JSON. The numbers and the
 * count of open connections live in the vhost (vhost_limits_of), so the
 * checks at connection.open and queue.declare read integers.
 *
 * RabbitMQ's meaning: absent or negative, no limit; 0, none allowed. The
 * count of connections is of those past connection.open into the vhost;
 * the count of queues is every queue of the vhost, exclusive ones too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queue_internal.h"

/* The value of "key": in compact JSON text; -1 when absent or negative. */
static int64_t limit_in(const char *json, const char *key)
{
    char pattern[40];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *at = json ? strstr(json, pattern) : NULL;
    if (!at)
        return -1;
    long long n = strtoll(at + strlen(pattern), NULL, 10);
    return n < 0 ? -1 : (int64_t)n;
}

void vhost_limits_changed(vhost *v, const char *value)
{
    vhost_limits *l = vhost_limits_of(v);
    l->max_connections = limit_in(value, "max-connections");
    l->max_queues = limit_in(value, "max-queues");
}

int64_t vhost_max_connections(const vhost *v)
{
    return vhost_limits_of((vhost *)v)->max_connections;
}

int64_t vhost_max_queues(const vhost *v) { return vhost_limits_of((vhost *)v)->max_queues; }

bool vhost_connection_take(vhost *v)
{
    vhost_limits *l = vhost_limits_of(v);
    if (l->max_connections >= 0 && l->connections >= (uint64_t)l->max_connections)
        return false;
    l->connections++;
    return true;
}

void vhost_connection_left(vhost *v)
{
    vhost_limits *l = vhost_limits_of(v);
    invariant(l->connections > 0);
    l->connections--;
}

uint32_t vhost_connection_count(const vhost *v) { return vhost_limits_of((vhost *)v)->connections; }

bool vhost_queue_limit_reached(const vhost *v)
{
    int64_t max = vhost_max_queues(v);
    return max >= 0 && vhost_queue_count(v) >= (uint64_t)max;
}
