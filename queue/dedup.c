/* dedup (queue/): message deduplication on exchanges and queues, over
 * dedup/'s caches (LavinMQ's x-message-deduplication arguments; the
 * rabbitmq-message-deduplication plugin's texts and queue semantics).
 *
 * Exchange: an exchange declared with x-message-deduplication true keeps a
 * `xdedup` in route_exchange_extra; a plain exchange has NULL there, so
 * publishing to it costs one load. vhost_publish asks
 * dedup_exchange_duplicate before routing: a duplicate is routed nowhere
 * (the caller treats it as unroutable: returned when mandatory, confirmed
 * either way, as the plugin's exchange, whose route is empty for it).
 * With x-cache-persistence disk, a durable exchange's cache is written to
 * data_dir/dedup/<vhost+name hash>.cache when the broker stops and read
 * back when the exchange is restored; deleting the exchange (or its vhost)
 * removes it.
 *
 * Queue: a queue declared with x-message-deduplication true keeps a cache
 * tying each key to the id of the message holding it. queue_publish
 * admits a message only when its key is free; the key is released where
 * the message leaves the queue for good -- the journal's settle points
 * (ack, no-ack delivery, drop, dead-letter: persist.c calls
 * queue_dedup_release whether or not the queue journals), a purge (each
 * ready message), and deletion (the whole cache). A requeued message keeps
 * its key. After a restart a queue's cache starts empty, as the plugin's
 * (its queue caches are in RAM and flushed at start).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "queue_internal.h"

typedef struct xdedup {
    dedup_cache *c;
    bool disk;
    char header[DEDUP_HEADER_MAX + 1];
} xdedup;

struct qdedup {
    dedup_cache *c;
    char header[DEDUP_HEADER_MAX + 1];
};

/* ---- exchanges ---------------------------------------------------------- */

/* data_dir/dedup/<16 hex digits>.cache for a durable disk cache; false
 * when there is no data_dir. */
static bool cache_path(vhost *v, const route_exchange *ex, char *out, size_t cap, bool mkdir_too)
{
    const char *dir = server_config(vhost_server(v))->data_dir;
    if (!dir[0])
        return false;
    uint64_t h = 0xcbf29ce484222325ull;
    const char *vn = vhost_name(v);
    for (size_t i = 0, n = strlen(vn); i <= n; i++) /* the NUL separates vhost and name */
        h = (h ^ (uint8_t)vn[i]) * 0x100000001b3ull;
    amqp_bytes name = route_exchange_name(ex);
    for (uint32_t i = 0; i < name.len; i++)
        h = (h ^ name.ptr[i]) * 0x100000001b3ull;
    int n = snprintf(out, cap, "%s/dedup", dir);
    if (n < 0 || (size_t)n >= cap)
        return false;
    if (mkdir_too && mkdir(out, 0750) != 0 && errno != EEXIST)
        return false;
    n = snprintf(out, cap, "%s/dedup/%016llx.cache", dir, (unsigned long long)h);
    return n > 0 && (size_t)n < cap;
}

void dedup_exchange_created(vhost *v, route_exchange *ex)
{
    dedup_config cfg;
    amqp_bytes args = route_exchange_arguments(ex);
    if ((route_exchange_type(ex) == ROUTE_DEDUP ? dedup_config_parse_typed(args, 0, &cfg, NULL)
                                                : dedup_config_parse(args, false, 0, &cfg, NULL)) !=
            AMQP_OK ||
        !cfg.on)
        return;
    xdedup *d = calloc(1, sizeof *d);
    if (d && !(d->c = dedup_cache_new(cfg.size, cfg.ttl_ms, false)))
        free(d), d = NULL;
    if (!d) {
        log_msg(LOG_ERROR, "exchange '%.*s': out of memory, no deduplication",
                (int)route_exchange_name(ex).len, (const char *)route_exchange_name(ex).ptr);
        return;
    }
    d->disk = cfg.disk && route_exchange_durable(ex);
    memcpy(d->header, cfg.header, sizeof d->header);
    char path[1024];
    if (d->disk && cache_path(v, ex, path, sizeof path, false))
        dedup_cache_load(d->c, path, loop_now_ms(vhost_loop(v)), wall_clock_ms());
    route_exchange_set_extra(ex, d);
}

void dedup_exchange_freed(void *ctx, route_exchange *ex)
{
    xdedup *d = route_exchange_extra(ex);
    if (!d)
        return;
    vhost *v = ctx;
    char path[1024];
    /* freed with its vhost: the broker stops (a deleted vhost's caches
     * were forgotten first); otherwise the exchange was deleted */
    if (d->disk && !vhost_closing(v) && cache_path(v, ex, path, sizeof path, false))
        unlink(path);
    else if (d->disk && cache_path(v, ex, path, sizeof path, true) &&
             !dedup_cache_save(d->c, path, loop_now_ms(vhost_loop(v)), wall_clock_ms()))
        log_msg(LOG_WARNING, "exchange '%.*s': could not save its deduplication cache to %s: %s",
                (int)route_exchange_name(ex).len, (const char *)route_exchange_name(ex).ptr, path,
                strerror(errno));
    dedup_cache_free(d->c);
    free(d);
    route_exchange_set_extra(ex, NULL);
}

static void forget(void *arg, route_exchange *ex)
{
    xdedup *d = route_exchange_extra(ex);
    char path[1024];
    if (d && d->disk && cache_path(arg, ex, path, sizeof path, false))
        unlink(path);
    if (d)
        d->disk = false;
}

void dedup_vhost_deleted(vhost *v) { route_foreach_exchange(vhost_routes(v), forget, v); }

bool dedup_exchange_duplicate(vhost *v, const route_exchange *ex, amqp_bytes headers)
{
    xdedup *d = route_exchange_extra(ex);
    dedup_key k;
    int64_t ttl;
    return d && headers.len && dedup_key_of(d->c, headers, d->header, &k, &ttl) &&
           dedup_cache_seen(d->c, k, loop_now_ms(vhost_loop(v)), ttl);
}

static void info_of(const dedup_cache *c, dedup_info *out)
{
    *out = (dedup_info){.entries = dedup_cache_entries(c),
                        .size = dedup_cache_size(c),
                        .bytes = dedup_cache_memory(c),
                        .duplicates = dedup_cache_duplicates(c)};
}

bool dedup_exchange_info(const route_exchange *ex, dedup_info *out)
{
    const xdedup *d = route_exchange_extra(ex);
    if (d)
        info_of(d->c, out);
    return d != NULL;
}

/* ---- queues ------------------------------------------------------------- */

bool queue_dedup_open(queue *q, amqp_bytes args)
{
    dedup_config cfg;
    if (dedup_config_parse(args, true, 0, &cfg, NULL) != AMQP_OK || !cfg.on)
        return true;
    qdedup *d = calloc(1, sizeof *d);
    if (d && !(d->c = dedup_cache_new(cfg.size, -1, true)))
        free(d), d = NULL;
    if (!d)
        return false;
    memcpy(d->header, cfg.header, sizeof d->header);
    *queue_dedup_slot(q) = d;
    return true;
}

void queue_dedup_close(queue *q)
{
    qdedup **d = queue_dedup_slot(q);
    if (!*d)
        return;
    dedup_cache_free((*d)->c);
    free(*d);
    *d = NULL;
}

bool queue_dedup_admit(queue *q, const msg *m)
{
    qdedup *d = *queue_dedup_slot(q);
    amqp_bytes raw = msg_properties(m);
    uint16_t flags = raw.len < 2 ? 0 : (uint16_t)(raw.ptr[0] << 8 | raw.ptr[1]);
    amqp_basic_properties p;
    dedup_key k;
    int64_t ttl;
    if (!d || !(flags & AMQP_BASIC_HEADERS_FLAG) ||
        amqp_properties_decode(raw, &p, NULL) != AMQP_OK ||
        !dedup_key_of(d->c, p.headers, d->header, &k, &ttl))
        return true;
    return dedup_cache_claim(d->c, k, msg_id(m));
}

void queue_dedup_release(queue *q, uint64_t id)
{
    qdedup *d = *queue_dedup_slot(q);
    if (d)
        dedup_cache_release(d->c, id);
}

bool queue_dedup_info(queue *q, dedup_info *out)
{
    const qdedup *d = *queue_dedup_slot(q);
    if (d)
        info_of(d->c, out);
    return d != NULL;
}
