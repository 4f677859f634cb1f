/* Statistics as RabbitMQ's API shows them: a value, and beside it
 * "<name>_details": {"rate": r} -- plus, when the request names a window
 * (msg_rates_age/msg_rates_incr for message counters, lengths_age /
 * lengths_incr for queue lengths, in seconds), "samples" (newest first,
 * timestamps on multiples of the increment), "avg" (their mean) and
 * "avg_rate" ((newest - oldest) / their span), as RabbitMQ computes them --
 * but over the samples held only: RabbitMQ keeps ten minutes of every
 * object, Warren a minute of a queue's (core/stats.c), and a window longer
 * than that gets fewer samples, not the oldest repeated.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mgmt_int.h"

/* deliver_get is the sum of four counters. */
#define DELIVER_GET STAT_FIELDS

static const char *const names[STAT_FIELDS + 1] = {
    [STAT_PUBLISH] = "publish",
    [STAT_PUBLISH_IN] = "publish_in",
    [STAT_PUBLISH_OUT] = "publish_out",
    [STAT_CONFIRM] = "confirm",
    [STAT_DELIVER] = "deliver",
    [STAT_DELIVER_NO_ACK] = "deliver_no_ack",
    [STAT_GET] = "get",
    [STAT_GET_NO_ACK] = "get_no_ack",
    [STAT_GET_EMPTY] = "get_empty",
    [STAT_ACK] = "ack",
    [STAT_REDELIVER] = "redeliver",
    [STAT_RETURN_UNROUTABLE] = "return_unroutable",
    [STAT_DROP_UNROUTABLE] = "drop_unroutable",
    [STAT_RECV_OCT] = "recv_oct",
    [STAT_SEND_OCT] = "send_oct",
    [STAT_RECV_CNT] = "recv_cnt",
    [STAT_SEND_CNT] = "send_cnt",
    [STAT_MESSAGES] = "messages",
    [STAT_MESSAGES_READY] = "messages_ready",
    [STAT_MESSAGES_UNACKED] = "messages_unacknowledged",
    [DELIVER_GET] = "deliver_get",
};

static uint64_t field_of(const uint64_t *v, int f)
{
    if (f == DELIVER_GET)
        return v[STAT_DELIVER] + v[STAT_DELIVER_NO_ACK] + v[STAT_GET] + v[STAT_GET_NO_ACK];
    return v[f];
}

static double rate_of(const stats *st, int f)
{
    if (f != DELIVER_GET)
        return stats_rate(st, (stat_id)f);
    return stats_rate(st, STAT_DELIVER) + stats_rate(st, STAT_DELIVER_NO_ACK) +
           stats_rate(st, STAT_GET) + stats_rate(st, STAT_GET_NO_ACK);
}

/* The samples of field f in the window, newest first: on multiples of the
 * increment, from the newest sample held back to the oldest -- a queue
 * holds a minute, the overview ten, and nothing is made up for the time
 * before (an object that never showed activity has none) -- each the
 * value of the newest sample not after its time. "avg" is their mean and
 * "avg_rate" the change per second across them (0 with fewer than two). */
static void samples(mgmt_json *w, const stats *st, int f, mgmt_window win)
{
    uint64_t incr = (uint64_t)win.incr_s * 1000, first = 0, last = 0, sum = 0;
    const stats_sample *s = stats_sample_at(st, 0), *oldest = s;
    size_t n = 0, age = 0;
    for (size_t i = 1; stats_sample_at(st, i); i++)
        oldest = stats_sample_at(st, i);
    mgmt_json_key(w, "samples");
    mgmt_json_arr(w);
    for (uint64_t t = s ? s->ts_ms - s->ts_ms % incr : 0; s && t >= oldest->ts_ms;) {
        while (s->ts_ms > t)
            s = stats_sample_at(st, ++age);
        uint64_t v = field_of(s->v, f);
        first = n ? first : v;
        last = v, sum += v;
        mgmt_json_obj(w);
        mgmt_json_kuint(w, "sample", v);
        mgmt_json_kuint(w, "timestamp", t);
        mgmt_json_end_obj(w);
        if (++n > win.age_s / win.incr_s || t < incr)
            break;
        t -= incr;
    }
    mgmt_json_end_arr(w);
    mgmt_json_kdouble(w, "avg", n ? (double)sum / (double)n : 0.0);
    mgmt_json_kdouble(w, "avg_rate",
                      n > 1 ? ((double)first - (double)last) / (double)((n - 1) * win.incr_s) : 0.0);
}

static void details(mgmt_req *r, mgmt_json *w, const char *key, const stats *st, int f)
{
    char dk[80];
    size_t kl = strlen(key) < sizeof dk - 9 ? strlen(key) : sizeof dk - 9;
    memcpy(dk, key, kl);
    memcpy(dk + kl, "_details", 9);
    mgmt_json_key(w, dk);
    mgmt_json_obj(w);
    mgmt_window win = f >= STAT_COUNTERS && f != DELIVER_GET ? r->len_window : r->msg_window;
    if (win.age_s)
        samples(w, st, f, win);
    mgmt_json_kdouble(w, "rate", rate_of(st, f));
    mgmt_json_end_obj(w);
}

void mgmt_stat(mgmt_req *r, mgmt_json *w, const char *key, uint64_t value, const stats *st,
               stat_id f)
{
    mgmt_json_kuint(w, key, value);
    if (!r->disable_stats)
        details(r, w, key, st, f);
}

void mgmt_message_stats(mgmt_req *r, mgmt_json *w, const stats *st, const stat_id *fields,
                        size_t n, bool deliver_get)
{
    if (r->disable_stats)
        return;
    mgmt_json_key(w, "message_stats");
    mgmt_json_obj(w);
    for (size_t i = 0; i < n; i++) {
        mgmt_json_kuint(w, names[fields[i]], st->n[fields[i]]);
        details(r, w, names[fields[i]], st, fields[i]);
    }
    if (deliver_get) {
        uint64_t v = field_of(st->n, DELIVER_GET);
        mgmt_json_kuint(w, "deliver_get", v);
        details(r, w, "deliver_get", st, DELIVER_GET);
    }
    mgmt_json_end_obj(w);
}

void mgmt_queue_totals(mgmt_req *r, mgmt_json *w, const stats *st, uint64_t ready,
                       uint64_t unacked)
{
    mgmt_stat(r, w, "messages", ready + unacked, st, STAT_MESSAGES);
    mgmt_stat(r, w, "messages_ready", ready, st, STAT_MESSAGES_READY);
    mgmt_stat(r, w, "messages_unacknowledged", unacked, st, STAT_MESSAGES_UNACKED);
}

bool mgmt_stat_sort_key(const stats *st, const char *sort, double *out)
{
    static const char prefix[] = "message_stats.";
    if (strncmp(sort, prefix, sizeof prefix - 1) != 0)
        return false;
    const char *f = sort + sizeof prefix - 1;
    for (int i = 0; i <= DELIVER_GET; i++) {
        size_t len = strlen(names[i]);
        if (i >= STAT_COUNTERS && i != DELIVER_GET)
            continue;
        if (strcmp(f, names[i]) == 0) {
            *out = (double)field_of(st->n, i);
            return true;
        }
        if (strncmp(f, names[i], len) == 0 && strcmp(f + len, "_details.rate") == 0) {
            *out = rate_of(st, i);
            return true;
        }
    }
    return false;
}

void mgmt_format_time(uint64_t wall_ms, char *out, size_t cap)
{
    time_t t = (time_t)(wall_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm);
}
