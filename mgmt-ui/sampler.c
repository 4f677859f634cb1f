/* Node-wide values for /api/overview's churn_rates and /api/nodes: the
 * broker's churn counters (server_counters) and the process's gauges
 * (memory, descriptors, sockets, disk), read now and sampled every 5 s
 * (RabbitMQ's collect_statistics_interval) so each has a `_details.rate`:
 * the change per second between the last two samples, as RabbitMQ
 * reports it. Two samples are kept; nothing else is stored.
 */
#include <dirent.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "mgmt_int.h"

#define SAMPLE_INTERVAL_MS 5000

struct mgmt_sampler {
    server *s;
    struct event *timer;
    uint64_t prev[NODE_FIELDS], cur[NODE_FIELDS];
    uint64_t prev_ms, cur_ms; /* monotonic; 0 = no sample yet */
};

uint64_t mgmt_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

uint64_t mgmt_fds_used(void)
{
    DIR *d = opendir("/proc/self/fd");
    uint64_t n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n > 0 ? n - 1 : 0; /* the directory's own fd */
}

void mgmt_node_now(server *s, uint64_t out[NODE_FIELDS])
{
    const server_counts *c = server_counters(s);
    struct statvfs vfs;
    out[NODE_CONNECTION_CREATED] = c->connections_opened;
    out[NODE_CONNECTION_CLOSED] = c->connections_closed;
    out[NODE_CHANNEL_CREATED] = c->channels_opened;
    out[NODE_CHANNEL_CLOSED] = c->channels_closed;
    out[NODE_QUEUE_DECLARED] = c->queues_declared;
    out[NODE_QUEUE_CREATED] = c->queues_created;
    out[NODE_QUEUE_DELETED] = c->queues_deleted;
    out[NODE_MEM_USED] = server_memory_used(s); /* the memory alarm's figure */
    out[NODE_FD_USED] = mgmt_fds_used();
    out[NODE_SOCKETS_USED] = server_socket_count(s);
    out[NODE_DISK_FREE] = statvfs(server_config(s)->data_dir, &vfs) == 0
                              ? (uint64_t)vfs.f_bavail * vfs.f_frsize
                              : 0;
    out[NODE_JOURNAL_BYTES] = server_journal(s) ? journal_size_bytes(server_journal(s)) : 0;
}

static void sample(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    mgmt_sampler *sm = arg;
    for (int i = 0; i < NODE_FIELDS; i++)
        sm->prev[i] = sm->cur[i];
    sm->prev_ms = sm->cur_ms;
    loop_touch_clock(admin_loop(sm->s));
    mgmt_node_now(sm->s, sm->cur);
    sm->cur_ms = loop_now_ms(admin_loop(sm->s));
}

mgmt_sampler *mgmt_sampler_new(server *s)
{
    mgmt_sampler *sm = calloc(1, sizeof *sm);
    if (!sm)
        return NULL;
    sm->s = s;
    sm->timer = event_new(loop_base(admin_loop(s)), -1, EV_PERSIST, sample, sm);
    struct timeval every = {SAMPLE_INTERVAL_MS / 1000, 0};
    if (!sm->timer || event_add(sm->timer, &every) != 0) {
        mgmt_sampler_free(sm);
        return NULL;
    }
    sample(-1, 0, sm);
    return sm;
}

void mgmt_sampler_free(mgmt_sampler *sm)
{
    if (!sm)
        return;
    if (sm->timer)
        event_free(sm->timer);
    free(sm);
}

double mgmt_sampler_rate(const mgmt_sampler *sm, node_field f)
{
    if (!sm || !sm->prev_ms || sm->cur_ms <= sm->prev_ms)
        return 0;
    double d = (double)sm->cur[f] - (double)sm->prev[f];
    return d * 1000.0 / (double)(sm->cur_ms - sm->prev_ms);
}

void mgmt_node_stat(mgmt_json *w, const mgmt_sampler *sm, const char *key, const uint64_t *now,
                    node_field f)
{
    char details[96];
    snprintf(details, sizeof details, "%s_details", key);
    mgmt_json_kuint(w, key, now[f]);
    mgmt_json_key(w, details);
    mgmt_json_obj(w);
    mgmt_json_kdouble(w, "rate", mgmt_sampler_rate(sm, f));
    mgmt_json_end_obj(w);
}

void mgmt_churn_json(mgmt_json *w, const mgmt_sampler *sm, const uint64_t *now)
{
    static const struct {
        const char *key;
        node_field f;
    } churn[] = {
        {"channel_closed", NODE_CHANNEL_CLOSED},       {"channel_created", NODE_CHANNEL_CREATED},
        {"connection_closed", NODE_CONNECTION_CLOSED}, {"connection_created", NODE_CONNECTION_CREATED},
        {"queue_created", NODE_QUEUE_CREATED},         {"queue_declared", NODE_QUEUE_DECLARED},
        {"queue_deleted", NODE_QUEUE_DELETED},
    };
    for (size_t i = 0; i < sizeof churn / sizeof churn[0]; i++)
        mgmt_node_stat(w, sm, churn[i].key, now, churn[i].f);
}
