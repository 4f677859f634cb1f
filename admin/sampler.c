/* The server's statistics timer: every STATS_INTERVAL_MS it samples every
 * vhost, queue, exchange, connection and channel (core/stats.c keeps the
 * rings), and the broker's counts by queue type for the management API.
 * The whole broker's counters are the sum of its vhosts', recomputed at
 * each tick; its gauges sum every queue's. */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"

/* ---- counts by queue type ----------------------------------------------- */

static void add_by_type(void *arg, queue *q)
{
    uint64_t (*out)[STAT_COUNTERS] = arg;
    const uint64_t *n = queue_stats(q)->n;
    uint64_t *sum = out[queue_get_args(q)->type];
    for (int f = STAT_DELIVER; f <= STAT_REDELIVER; f++)
        sum[f] += n[f];
}

void admin_counts_by_type(server *s, uint64_t (*out)[STAT_COUNTERS])
{
    memcpy(out, server_counters(s)->by_queue_type, sizeof server_counters(s)->by_queue_type);
    for (vhost *v = server_vhost_next(s, NULL); v; v = server_vhost_next(s, v))
        vhost_foreach_queue(v, add_by_type, out);
}

/* ---- the timer ---------------------------------------------------------- */

typedef struct tick_walk {
    uint64_t now;
    uint64_t gauges[3]; /* summed over the vhost's queues */
} tick_walk;

uint64_t admin_stream_records(const stream_info *s)
{
    return s->committed_offset > s->first_offset ? s->committed_offset - s->first_offset : 0;
}

void admin_queue_depth(queue *q, uint64_t *ready, uint64_t *unacked)
{
    if (!queue_is_stream(q)) {
        *ready = queue_ready_count(q);
        *unacked = queue_unacked_count(q);
        return;
    }
    queue_info qi;
    queue_describe(q, &qi);
    *ready = admin_stream_records(&qi.log);
    *unacked = 0;
}

static void sample_queue(void *arg, queue *q)
{
    tick_walk *w = arg;
    uint64_t ready, unacked;
    admin_queue_depth(q, &ready, &unacked);
    uint64_t g[3] = {ready + unacked, ready, unacked};
    for (int i = 0; i < 3; i++)
        w->gauges[i] += g[i];
    stats_sample_now(queue_stats(q), g, w->now, STATS_OBJECT_SAMPLES);
}

static void sample_exchange(void *arg, route_exchange *ex)
{
    tick_walk *w = arg;
    stats *st = route_exchange_user(ex);
    if (st)
        stats_sample_now(st, NULL, w->now, STATS_OBJECT_SAMPLES);
}

static void sample_connections(server *s, uint64_t now)
{
    for (size_t i = 0; i < server_conn_count(s); i++) {
        conn *c = server_conn_at(s, i);
        conn_info ci;
        conn_describe(c, &ci); /* brings the byte counters up to date */
        stats_sample_now((stats *)ci.stats, NULL, now, STATS_RATE_SAMPLES);
        for (uint32_t slot = 0; slot < conn_channel_slots(c); slot++) {
            chan *ch = conn_channel_at(c, slot);
            chan_info info;
            if (!ch)
                continue;
            chan_describe(ch, &info);
            uint64_t g[3] = {info.unacked, 0, info.unacked};
            stats_sample_now((stats *)info.stats, g, now, STATS_RATE_SAMPLES);
        }
    }
}

void admin_stats_tick(server *s)
{
    uint64_t now = wall_clock_ms();
    stats *total = server_stats(s);
    uint64_t gauges[3] = {0};
    memset(total->n, 0, sizeof total->n);
    for (vhost *v = server_vhost_next(s, NULL); v; v = server_vhost_next(s, v)) {
        tick_walk w = {.now = now};
        vhost_foreach_queue(v, sample_queue, &w);
        route_foreach_exchange(vhost_routes(v), sample_exchange, &w);
        stats_sample_now(vhost_stats(v), w.gauges, now, STATS_GLOBAL_SAMPLES);
        stats_add(total, vhost_stats(v));
        for (int i = 0; i < 3; i++)
            gauges[i] += w.gauges[i];
    }
    stats_sample_now(total, gauges, now, STATS_GLOBAL_SAMPLES);
    sample_connections(s, now);
}
