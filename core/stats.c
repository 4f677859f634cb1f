/* Statistics for the management API: counters and their short history.
 *
 * Every queue, exchange, channel, connection and vhost embeds a `stats`:
 * STAT_COUNTERS plain 64-bit counters that the hot path increments, and a
 * pointer to its history. Nothing else happens per message. One timer,
 * every STATS_INTERVAL_MS (RabbitMQ's collect_statistics_interval), walks
 * every object and appends a sample -- the counters and the gauges
 * (messages, ready, unacked) at that moment -- to the object's history, a
 * ring of `cap` samples:
 *
 *   stats_hist: cap, count, head (index of the newest), s[cap]
 *   stats_sample: ts_ms (wall clock, aligned to the interval), v[STAT_FIELDS]
 *
 * Rates and RabbitMQ's `samples`/`avg`/`avg_rate` are computed from the
 * ring when a request asks. An object that never showed activity has no
 * ring (its rates are 0 and its samples all 0), so 10,000 idle queues cost
 * no history; one that was active keeps its ring (STATS_OBJECT_SAMPLES,
 * about 2.2 KiB) until it is freed. Connections and channels keep only
 * STATS_RATE_SAMPLES, enough for their rates: a thousand idle clients that
 * once sent a handshake would otherwise hold 2.2 KiB each. The overview
 * and the vhosts keep STATS_GLOBAL_SAMPLES (ten minutes).
 */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"

struct stats_hist {
    uint32_t cap, count, head;
    stats_sample s[];
};

uint64_t wall_clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool all_zero(const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i])
            return false;
    return true;
}

static stats_hist *hist_new(uint32_t cap)
{
    stats_hist *h = calloc(1, sizeof *h + cap * sizeof h->s[0]);
    if (h)
        h->cap = cap;
    return h;
}

static void hist_push(stats_hist *h, const stats_sample *s)
{
    h->head = h->count ? (h->head + 1) % h->cap : 0;
    h->s[h->head] = *s;
    if (h->count < h->cap)
        h->count++;
}

void stats_sample_now(stats *st, const uint64_t *gauges, uint64_t now_wall_ms, uint32_t cap)
{
    stats_sample s = {.ts_ms = now_wall_ms - now_wall_ms % STATS_INTERVAL_MS};
    memcpy(s.v, st->n, sizeof st->n);
    if (gauges)
        memcpy(s.v + STAT_COUNTERS, gauges, (STAT_FIELDS - STAT_COUNTERS) * sizeof *gauges);
    if (!st->hist) {
        if (all_zero(s.v, STAT_FIELDS) || !(st->hist = hist_new(cap)))
            return;
        /* Before its first activity every counter was 0; the gauges may
         * have been set by recovery, so they start flat. */
        stats_sample before = {.ts_ms = s.ts_ms - STATS_INTERVAL_MS};
        memcpy(before.v + STAT_COUNTERS, s.v + STAT_COUNTERS,
               (STAT_FIELDS - STAT_COUNTERS) * sizeof s.v[0]);
        hist_push(st->hist, &before);
    }
    hist_push(st->hist, &s);
}

const stats_sample *stats_sample_at(const stats *st, size_t age)
{
    const stats_hist *h = st->hist;
    if (!h || age >= h->count)
        return NULL;
    return &h->s[(h->head + h->cap - age) % h->cap];
}

size_t stats_samples(const stats *st, const stats_sample **newest, size_t max)
{
    size_t n = st->hist ? st->hist->count : 0;
    *newest = stats_sample_at(st, 0);
    return n < max ? n : max;
}

double stats_rate(const stats *st, stat_id f)
{
    const stats_sample *a = stats_sample_at(st, 0), *b = stats_sample_at(st, 1);
    if (!a || !b || a->ts_ms <= b->ts_ms)
        return 0;
    return ((double)a->v[f] - (double)b->v[f]) * 1000.0 / (double)(a->ts_ms - b->ts_ms);
}

void stats_free(stats *st)
{
    free(st->hist);
    st->hist = NULL;
}

void stats_add(stats *dst, const stats *src)
{
    for (int i = 0; i < STAT_COUNTERS; i++)
        dst->n[i] += src->n[i];
}

/* ---- exchanges ---------------------------------------------------------- */

stats *stats_of_exchange(route_exchange *ex)
{
    stats *st = route_exchange_user(ex);
    if (!st && (st = calloc(1, sizeof *st)))
        route_exchange_set_user(ex, st);
    return st;
}

void stats_exchange_freed(void *ctx, route_exchange *ex)
{
    (void)ctx;
    stats *st = route_exchange_user(ex);
    if (st) {
        stats_free(st);
        free(st);
    }
}

