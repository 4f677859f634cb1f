/* Retention and deletion: whole segments go, oldest first; and RabbitMQ's
 * age strings, which retention and x-stream-offset's intervals take. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stream_int.h"

stream_status stream_retain(stream_log *log, int64_t now_ms, unsigned *removed)
{
    uint64_t total = 0;
    unsigned n = 0;
    for (size_t i = 0; i < log->nsegs; i++)
        total += log->segs[i].size;
    while (log->nsegs > 1) {
        const segment *s = &log->segs[0];
        bool too_big = log->cfg.max_bytes && total > log->cfg.max_bytes;
        /* older than max_age: now - last_ts > max_age, without overflow */
        bool too_old = log->cfg.max_age_ms && now_ms > s->last_ts &&
                       (uint64_t)now_ms - (uint64_t)s->last_ts > (uint64_t)log->cfg.max_age_ms;
        if (!too_big && !too_old)
            break;
        remove_files(log->cfg.mirror, log->dir, s->first_id);
        total -= s->size;
        memmove(log->segs, log->segs + 1, (log->nsegs - 1) * sizeof *log->segs);
        log->nsegs--;
        n++;
    }
    if (removed)
        *removed = n;
    return STREAM_OK;
}

stream_status stream_delete(stream_log *log)
{
    char *dir = log->dir;
    mirror *m = log->cfg.mirror;
    uint64_t *ids = NULL;
    size_t n = 0;
    log->dir = NULL;
    stream_status st = list_segments(dir, &ids, &n);
    stream_close(log);
    for (size_t i = 0; i < n; i++)
        remove_files(m, dir, ids[i]);
    if (mirror_rmdir(m, dir) != 0 && st == STREAM_OK)
        st = STREAM_EIO;
    free(ids);
    free(dir);
    return st;
}

stream_age_status stream_parse_age(const char *s, size_t len, int64_t *ms)
{
    /* rabbit_amqqueue:check_max_age/1: digits then exactly one unit */
    size_t i = 0;
    int64_t n = 0;
    bool saturated = false;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        if (n > (INT64_MAX - 9) / 10)
            saturated = true;
        else
            n = n * 10 + (s[i] - '0');
    }
    if (i == 0)
        return STREAM_AGE_NO_NUMBER;
    if (i + 1 != len || (n == 0 && !saturated))
        return STREAM_AGE_INVALID;
    int64_t unit;
    switch (s[i]) {
    case 'Y': unit = 365LL * 86400000; break;
    case 'M': unit = 30LL * 86400000; break;
    case 'D': unit = 86400000; break;
    case 'h': unit = 3600000; break;
    case 'm': unit = 60000; break;
    case 's': unit = 1000; break;
    default: return STREAM_AGE_INVALID;
    }
    *ms = saturated || n > INT64_MAX / unit ? INT64_MAX : n * unit;
    return STREAM_AGE_OK;
}
