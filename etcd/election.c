/* Elections, on the model of etcd's concurrency.Election.
 *
 * A candidate's key is prefix/<lease id in hex>, created by a txn only if
 * absent and attached to the lease, so it dies with the lease. The leader
 * is the key of lowest create_revision under the prefix: read with a
 * linearizable range (sorted by create, limit 1). The election reads it
 * once, then watches the prefix from the revision after that read; every
 * change re-reads it (one read in flight; changes during it ask for one
 * more). If the watch ends (compaction) the election reads and watches
 * anew. The view (leader, epoch, is_me, campaigning) is reported when it
 * changes. A failed read retries after `RETRY_MS`. */
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_int.h"

#define RETRY_MS 250

struct etcd_election {
    etcd_client *c;
    char *prefix;                /* ends in '/' */
    char key[256];
    int64_t my_rev;              /* my key's create_revision; 0: none */
    etcd_watch *watch;
    etcd_req *read, *campaign, *resign;
    bool again;                  /* a change came during the read */
    struct event *retry;
    etcd_election_view last;     /* as last reported (leader not kept) */
    bool reported;
    etcd_election_cb cb;
    void *arg;
    bool *freed;
};

static void read_leader(etcd_election *e);

static bool report(etcd_election *e, const etcd_election_view *v)
{
    if (e->reported && v->status == e->last.status && v->epoch == e->last.epoch &&
        v->is_me == e->last.is_me && v->campaigning == e->last.campaigning)
        return true;
    e->last = *v;
    e->last.leader = NULL;
    e->reported = true;
    bool freed = false;
    e->freed = &freed;
    e->cb(v, e->arg);
    if (freed)
        return false;
    e->freed = NULL;
    return true;
}

static void on_watch(const etcd_watch_result *r, void *arg)
{
    etcd_election *e = arg;
    if (r->status != ETCD_OK) { /* compacted: read and watch again */
        etcd_watch_free(e->watch);
        e->watch = NULL;
    }
    size_t kl = strlen(e->key);
    for (size_t i = 0; i < r->n_events; i++) { /* my key went (lease lapsed) */
        const etcd_kv *kv = &r->events[i].kv;
        if (r->events[i].type == ETCD_EVENT_DELETE && e->my_rev && kv->key_len == kl &&
            memcmp(kv->key, e->key, kl) == 0 && kv->mod_revision > e->my_rev)
            e->my_rev = 0;
    }
    read_leader(e);
}

static void on_leader(const etcd_result *r, void *arg)
{
    etcd_election *e = arg;
    e->read = NULL;
    if (r->status != ETCD_OK) {
        etcd_election_view v = e->last;
        v.status = r->status;
        struct timeval tv = {0, RETRY_MS * 1000};
        evtimer_add(e->retry, &tv);
        report(e, &v);
        return;
    }
    const etcd_kv *lead = r->n_kvs ? &r->kvs[0] : NULL;
    etcd_election_view v = {.status = ETCD_OK, .leader = lead};
    v.epoch = lead ? lead->create_revision : 0;
    /* my key is gone once the lowest key is younger than mine, or none
     * (or when the watch saw it deleted) */
    if (e->my_rev && !e->campaign && (!lead || lead->create_revision > e->my_rev))
        e->my_rev = 0;
    v.campaigning = e->my_rev != 0;
    v.is_me = lead && e->my_rev && lead->create_revision == e->my_rev;
    if (!e->watch)
        e->watch = etcd_watch_start(e->c, e->prefix, strlen(e->prefix), true, r->revision + 1,
                                    on_watch, e);
    if (!report(e, &v))
        return;
    if (!e->watch || e->again) {
        e->again = false;
        struct timeval tv = {0, e->watch ? 0 : RETRY_MS * 1000};
        evtimer_add(e->retry, &tv);
    }
}

static void read_leader(etcd_election *e)
{
    if (e->read) {
        e->again = true;
        return;
    }
    etcd_get_opts o = {.prefix = true, .limit = 1, .sort_by_create = true};
    e->read = etcd_get(e->c, e->prefix, strlen(e->prefix), &o, on_leader, e);
    if (!e->read) {
        struct timeval tv = {0, RETRY_MS * 1000};
        evtimer_add(e->retry, &tv);
    }
}

static void on_retry(evutil_socket_t fd, short what, void *arg) { read_leader(arg); }

etcd_election *etcd_election_new(etcd_client *c, const char *prefix, etcd_election_cb cb,
                                 void *arg)
{
    size_t n = strlen(prefix);
    etcd_election *e = calloc(1, sizeof(*e));
    if (!e || !cb || n == 0 || n + 20 >= sizeof(e->key))
        goto fail;
    e->c = c;
    e->cb = cb;
    e->arg = arg;
    e->prefix = malloc(n + 2);
    e->retry = evtimer_new(etcd_base(c), on_retry, e);
    if (!e->prefix || !e->retry)
        goto fail;
    snprintf(e->prefix, n + 2, "%s%s", prefix, prefix[n - 1] == '/' ? "" : "/");
    read_leader(e);
    return e;
fail:
    etcd_election_free(e);
    return NULL;
}

static void on_campaign(const etcd_result *r, void *arg)
{
    etcd_election *e = arg;
    e->campaign = NULL;
    if (r->status == ETCD_OK && r->succeeded)
        e->my_rev = r->revision; /* the put's revision is the key's creation */
    else if (r->status == ETCD_OK && r->n_kvs)
        e->my_rev = r->kvs[0].create_revision; /* this lease's key already stands */
    if (r->status != ETCD_OK) { /* the caller may campaign again (same lease: same key) */
        etcd_election_view v = e->last;
        v.status = r->status;
        if (!report(e, &v))
            return;
    }
    read_leader(e);
}

int etcd_election_campaign(etcd_election *e, int64_t lease_id, const void *value, size_t value_len)
{
    if (e->my_rev || e->campaign || lease_id == 0)
        return -1;
    snprintf(e->key, sizeof(e->key), "%s%" PRIx64, e->prefix, (uint64_t)lease_id);
    size_t kl = strlen(e->key);
    etcd_cmp cmp = {.target = ETCD_CMP_CREATE, .op = ETCD_EQUAL, .key = e->key, .key_len = kl};
    etcd_op put = {.type = ETCD_OP_PUT, .key = e->key, .key_len = kl, .value = value,
                   .value_len = value_len, .lease = lease_id};
    etcd_op get = {.type = ETCD_OP_GET, .key = e->key, .key_len = kl};
    e->campaign = etcd_txn(e->c, &cmp, 1, &put, 1, &get, 1, on_campaign, e);
    return e->campaign ? 0 : -1;
}

static void on_resigned(const etcd_result *r, void *arg)
{
    etcd_election *e = arg;
    e->resign = NULL;
    read_leader(e);
}

void etcd_election_resign(etcd_election *e)
{
    if (!e->my_rev || e->resign)
        return;
    size_t kl = strlen(e->key);
    etcd_cmp cmp = {.target = ETCD_CMP_CREATE, .op = ETCD_EQUAL, .key = e->key, .key_len = kl,
                    .number = e->my_rev};
    etcd_op del = {.type = ETCD_OP_DELETE, .key = e->key, .key_len = kl};
    e->my_rev = 0;
    e->resign = etcd_txn(e->c, &cmp, 1, &del, 1, NULL, 0, on_resigned, e);
}

void etcd_election_free(etcd_election *e)
{
    if (!e)
        return;
    if (e->freed)
        *e->freed = true;
    etcd_req *reqs[] = {e->read, e->campaign, e->resign};
    for (size_t i = 0; i < 3; i++)
        if (reqs[i])
            etcd_req_cancel(e->c, reqs[i]);
    etcd_watch_free(e->watch);
    if (e->retry)
        event_free(e->retry);
    free(e->prefix);
    free(e);
}
