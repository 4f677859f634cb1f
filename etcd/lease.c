/* Keeping a lease alive. A timer fires every ttl/3; each tick sends one
 * keepalive (the gateway's stream, one request per POST) unless one is in
 * flight, and checks the local expiry: `expires` is the send time of the
 * last renewal etcd confirmed plus the TTL it granted, on the monotonic
 * clock, so the local view of the lease never outlives etcd's. States:
 * alive -> lost (callback once, timer stopped). */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>

#include "etcd_int.h"

struct etcd_keeper {
    etcd_client *c;
    int64_t id, ttl_s;
    uint64_t expires, sent_at;
    struct event *tick;
    etcd_req *inflight;
    etcd_lost_cb lost;
    void *arg;
    bool done;
};

static void lose(etcd_keeper *k, etcd_status why)
{
    if (k->done)
        return;
    k->done = true;
    evtimer_del(k->tick);
    if (k->inflight)
        etcd_req_cancel(k->c, k->inflight);
    k->inflight = NULL;
    k->lost(why, k->arg);
}

static void on_renewed(const etcd_result *r, void *arg)
{
    etcd_keeper *k = arg;
    k->inflight = NULL;
    if (r->status == ETCD_OK && r->ttl > 0)
        k->expires = k->sent_at + (uint64_t)r->ttl * 1000;
    else if (r->status == ETCD_OK || (r->status == ETCD_SERVER && r->grpc_code == 5))
        lose(k, ETCD_LEASE_LOST); /* TTL 0 or "not found": etcd dropped it */
    /* other failures: the next tick retries while time remains */
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    etcd_keeper *k = arg;
    uint64_t now = etcd_now_ms();
    if (now >= k->expires) {
        lose(k, ETCD_LEASE_LOST);
        return;
    }
    if (!k->inflight) {
        char id[24];
        snprintf(id, sizeof(id), "%lld", (long long)k->id);
        json_t *j = json_pack("{ss}", "ID", id);
        k->sent_at = now;
        k->inflight = etcd_request(k->c, "/v3/lease/keepalive", j, on_renewed, k);
    }
    /* tick again at ttl/3, or at the expiry if sooner */
    uint64_t step = (uint64_t)k->ttl_s * 1000 / 3, left = k->expires - now;
    if (step > left)
        step = left;
    struct timeval tv = {(time_t)(step / 1000), (suseconds_t)(step % 1000) * 1000};
    evtimer_add(k->tick, &tv);
}

etcd_keeper *etcd_keeper_start(etcd_client *c, int64_t lease_id, int64_t ttl_s,
                               uint64_t granted_ms, etcd_lost_cb lost, void *arg)
{
    if (ttl_s <= 0 || ttl_s > 1000000 || !lost)
        return NULL;
    etcd_keeper *k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->c = c;
    k->id = lease_id;
    k->ttl_s = ttl_s;
    k->lost = lost;
    k->arg = arg;
    k->expires = granted_ms + (uint64_t)ttl_s * 1000; /* the first tick renews at once */
    k->tick = evtimer_new(etcd_base(c), on_tick, k);
    if (!k->tick) {
        free(k);
        return NULL;
    }
    struct timeval now = {0, 0};
    evtimer_add(k->tick, &now);
    return k;
}

bool etcd_keeper_alive(const etcd_keeper *k)
{
    return !k->done && etcd_now_ms() < k->expires;
}

uint64_t etcd_keeper_deadline_ms(const etcd_keeper *k) { return k->expires; }

void etcd_keeper_free(etcd_keeper *k)
{
    if (!k)
        return;
    if (k->inflight)
        etcd_req_cancel(k->c, k->inflight);
    event_free(k->tick);
    free(k);
}
