/* The node's roles: the choice between following, campaigning and
 * leading after every change (cluster_evaluate), the election's reports,
 * taking the leadership (a fresh ISR read and a CAS), ISR writes, fencing,
 * and the polls of the node records, the ISR and the leader's view.
 *
 * Polling: the node records and the ISR are read every POLL_MS (two
 * linearizable reads) rather than watched: a follower acts on them within
 * that, and a read cannot miss a change the way a broken watch can. The
 * election itself is watched (etcd/). */
#include <event2/event.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_int.h"

#define VIEW_EVERY_POLLS 4        /* the leader puts its view in etcd every second */
#define VIEW_MAX_BYTES 65536

/* ---- ISR writes --------------------------------------------------------- */

typedef struct isr_write {
    cluster *c;
    isr_set next;
    void (*done)(cluster *c, bool ok, void *arg);
    void *arg;
} isr_write;

static void on_isr_written(const etcd_result *r, void *arg)
{
    isr_write *w = arg;
    cluster *c = w->c;
    c->pending_cas = NULL;
    bool ok = r->status == ETCD_OK && r->succeeded;
    if (ok) {
        w->next.mod_revision = r->revision;
        c->isr = w->next;
        log_msg(LOG_INFO, "cluster: in-sync replicas now %u of min %u (epoch %" PRId64 ")",
                c->isr.n, c->cfg.cluster.min_isr, c->epoch);
    } else {
        log_msg(LOG_WARNING, "cluster: ISR update refused (%s): re-reading it",
                r->status == ETCD_OK ? "changed meanwhile or leadership lost"
                                     : etcd_status_name(r->status));
        c->isr.mod_revision = -1; /* unknown until the next poll */
    }
    if (w->done)
        w->done(c, ok, w->arg);
    free(w);
    cluster_publish_status(c);
}

bool cluster_write_isr(cluster *c, const isr_set *next, int64_t drop_lease,
                       void (*done)(cluster *c, bool ok, void *arg), void *arg)
{
    if (c->pending_cas || c->isr.mod_revision < 0 || !c->lead)
        return false;
    isr_write *w = calloc(1, sizeof *w);
    char isr_key[200], my_key[200], drop_key[200];
    if (!w)
        return false;
    *w = (isr_write){c, *next, done, arg};
    w->next.epoch = c->epoch;
    cluster_key(c, "isr", isr_key, sizeof isr_key);
    snprintf(my_key, sizeof my_key, "%selection/%" PRIx64, c->prefix, (uint64_t)c->lease);
    snprintf(drop_key, sizeof drop_key, "%selection/%" PRIx64, c->prefix, (uint64_t)drop_lease);
    char *value = isr_encode(&w->next);
    etcd_cmp cmps[2] = {
        {.target = ETCD_CMP_MOD, .op = ETCD_EQUAL, .key = isr_key, .key_len = strlen(isr_key),
         .number = c->isr.mod_revision},
        {.target = ETCD_CMP_CREATE, .op = ETCD_EQUAL, .key = my_key, .key_len = strlen(my_key),
         .number = c->epoch}};
    etcd_op ops[2] = {
        {.type = ETCD_OP_PUT, .key = isr_key, .key_len = strlen(isr_key), .value = value,
         .value_len = value ? strlen(value) : 0},
        {.type = ETCD_OP_DELETE, .key = drop_key, .key_len = strlen(drop_key)}};
    c->pending_cas = value ? etcd_txn(c->etcd, cmps, 2, ops, drop_lease ? 2 : 1, NULL, 0,
                                      on_isr_written, w)
                           : NULL;
    free(value);
    if (!c->pending_cas)
        free(w);
    return c->pending_cas != NULL;
}

/* ---- fencing and leading ------------------------------------------------ */

static void on_fence_revoked(const etcd_result *r, void *arg)
{
    (void)r, (void)arg; /* revoked, or it lapses by itself */
}

/* Fencing also gives the leadership up at once: the followers are cut off
 * (nothing more reaches them from here) and the lease is revoked, so that
 * the next ISR member is elected without waiting for the TTL -- the old
 * process may take a while to close (a disk that does not answer). */
void cluster_fence(cluster *c, const char *why)
{
    if (atomic_exchange(&c->fenced, true))
        return;
    log_msg(LOG_ERROR, "cluster: fencing this leader: %s; no more confirms, closing every "
            "connection, restarting as a follower", why);
    if (c->lead) {
        leader_tick(c->lead, etcd_now_ms()); /* tells the broker loop */
        leader_fence(c->lead);
    }
    if (c->lease)
        etcd_lease_revoke(c->etcd, c->lease, on_fence_revoked, c);
    cluster_publish_status(c);
}

/* A leader fences; a follower starts over too (cluster_fenced is true and
 * cluster_await_leadership returns): a new lease, record and campaign. */
void cluster_lease_lost(etcd_status why, void *arg)
{
    cluster *c = arg;
    char text[120];
    snprintf(text, sizeof text, "the lease is lost (%s)", etcd_status_name(why));
    if (c->lead) {
        cluster_fence(c, text);
        return;
    }
    if (atomic_exchange(&c->fenced, true))
        return;
    log_msg(LOG_ERROR, "cluster: %s; starting over", text);
    pthread_mutex_lock(&c->lock);
    c->stop = true;
    pthread_mutex_unlock(&c->lock);
}

static void start_leading(cluster *c, bool ok, void *arg)
{
    (void)arg;
    if (!ok) { /* not the leader after all, or the ISR moved: look again */
        leader_free(c->lead);
        c->lead = NULL;
        cluster_evaluate(c);
        return;
    }
    follower_free(c->fol);
    c->fol = NULL;
    status_http_free(c->status_http); /* before the broker's management binds its port */
    c->status_http = NULL;
    log_msg(LOG_INFO, "cluster: leading %s, epoch %" PRId64, c->cfg.cluster.name, c->epoch);
    pthread_mutex_lock(&c->lock);
    c->lead_ready = true;
    pthread_mutex_unlock(&c->lock);
}

/* Won the election: take the ISR -- this node plus the members whose
 * records still stand (a dead leader's record went with its lease) -- by
 * a CAS that holds only while this leadership does. The ISR and the
 * records are read afresh first: the last poll may predate the previous
 * leader's last change, and a CAS on a stale revision would only fail.
 * pending_cas keeps other ISR writes (and a second win) out meanwhile. */
static bool decode_node(const etcd_kv *kv, node_record *out);

static void lead_failed(cluster *c)
{
    leader_free(c->lead);
    c->lead = NULL; /* the next election report or poll tries again */
}

static void take_isr(const etcd_result *r, void *arg)
{
    cluster *c = arg;
    c->pending_cas = NULL;
    if (r->status != ETCD_OK || !c->lead) {
        lead_failed(c);
        return;
    }
    c->n_nodes = 0;
    for (size_t i = 0; i < r->n_kvs && c->n_nodes < CLUSTER_MAX_NODES; i++)
        if (decode_node(&r->kvs[i], &c->nodes[c->n_nodes]))
            c->n_nodes++;
    isr_set next = {0};
    isr_add(&next, c->node_name);
    for (unsigned i = 0; i < c->isr.n; i++)
        if (cluster_find_node(c, c->isr.names[i]))
            isr_add(&next, c->isr.names[i]);
    if (!cluster_write_isr(c, &next, 0, start_leading, NULL))
        lead_failed(c);
}

static void read_isr_to_lead(const etcd_result *r, void *arg)
{
    cluster *c = arg;
    c->pending_cas = NULL;
    isr_set s = {.mod_revision = r->status == ETCD_OK && r->n_kvs ? r->kvs[0].mod_revision : 0};
    if (r->status != ETCD_OK || !c->lead ||
        (r->n_kvs && !isr_decode(r->kvs[0].value, r->kvs[0].value_len, &s))) {
        lead_failed(c);
        return;
    }
    c->isr = s;
    if (s.mod_revision > 0 && !isr_has(&s, c->node_name)) {
        log_msg(LOG_WARNING, "cluster: elected while out of the in-sync replicas: resigning");
        lead_failed(c);
        etcd_election_resign(c->election);
        return;
    }
    char key[200];
    cluster_key(c, "nodes/", key, sizeof key);
    etcd_get_opts prefix = {.prefix = true};
    c->pending_cas = etcd_get(c->etcd, key, strlen(key), &prefix, take_isr, c);
    if (!c->pending_cas)
        lead_failed(c);
}

static void become_leader(cluster *c)
{
    if (!(c->lead = leader_new(c)))
        return;
    char key[200];
    cluster_key(c, "isr", key, sizeof key);
    c->pending_cas = etcd_get(c->etcd, key, strlen(key), NULL, read_isr_to_lead, c);
    if (!c->pending_cas)
        lead_failed(c);
}

static bool copy_whole(const cluster *c)
{
    if (c->fol)
        return follower_copy_whole(c->fol);
    char path[700];
    snprintf(path, sizeof path, "%s/%s", c->cfg.data_dir, CLUSTER_SYNCING_FILE);
    return access(path, F_OK) != 0;
}

void cluster_evaluate(cluster *c)
{
    if (atomic_load(&c->fenced) || !c->registered || !c->election)
        return;
    if (c->lead) {
        if (!c->is_me && c->lead_ready)
            cluster_fence(c, "this node's election key is gone");
        return;
    }
    if (c->is_me && !c->pending_cas) {
        become_leader(c);
        return;
    }
    if (*c->leader_name && !c->is_me) {
        if (!c->fol)
            c->fol = follower_new(c);
        if (c->fol)
            follower_follow(c->fol, c->leader_name, c->epoch);
    }
    /* who may lead: an ISR member with a whole copy, or anyone while the
     * cluster has no ISR yet (its first start) */
    bool fresh = c->isr.mod_revision == 0 && !*c->leader_name;
    bool want = copy_whole(c) && (fresh || (c->isr.mod_revision > 0 && isr_has(&c->isr, c->node_name)));
    if (want && !c->campaigning && !c->campaign_asked) {
        c->campaign_asked = etcd_election_campaign(c->election, c->lease, c->node_name,
                                                   strlen(c->node_name)) == 0;
    } else if (!want && c->campaigning) {
        etcd_election_resign(c->election);
    }
}

void cluster_on_election(const etcd_election_view *v, void *arg)
{
    cluster *c = arg;
    if (v->status != ETCD_OK)
        c->campaign_asked = false;
    if (v->status == ETCD_OK) {
        c->campaign_asked = c->campaign_asked && !v->campaigning ? c->campaign_asked : false;
        c->campaigning = v->campaigning;
        c->is_me = v->is_me;
        c->epoch = v->epoch;
        if (v->leader)
            snprintf(c->leader_name, sizeof c->leader_name, "%.*s",
                     (int)(v->leader->value_len < 63 ? v->leader->value_len : 63),
                     (const char *)v->leader->value);
        else
            c->leader_name[0] = 0;
    }
    cluster_evaluate(c);
    cluster_publish_status(c);
}

/* ---- polls of the records and the ISR -------------------------------------- */

static bool decode_node(const etcd_kv *kv, node_record *out)
{
    json_error_t e;
    json_t *o = json_loadb((const char *)kv->value, kv->value_len, 0, &e);
    const char *name = json_string_value(json_object_get(o, "name"));
    const char *host = json_string_value(json_object_get(o, "host"));
    json_t *port = json_object_get(o, "replication_port");
    bool ok = name && host && json_is_integer(port) && strlen(name) < sizeof out->name &&
              strlen(host) < sizeof out->host;
    if (ok) {
        snprintf(out->name, sizeof out->name, "%s", name);
        snprintf(out->host, sizeof out->host, "%s", host);
        out->replication_port = (int)json_integer_value(port);
        out->lease = kv->lease;
    }
    json_decref(o);
    return ok;
}

static void on_nodes(const etcd_result *r, void *arg)
{
    cluster *c = arg;
    c->poll_nodes = NULL;
    if (r->status != ETCD_OK)
        return;
    c->n_nodes = 0;
    for (size_t i = 0; i < r->n_kvs && c->n_nodes < CLUSTER_MAX_NODES; i++)
        if (decode_node(&r->kvs[i], &c->nodes[c->n_nodes]))
            c->n_nodes++;
    cluster_evaluate(c);
    cluster_publish_status(c);
}

static void on_isr(const etcd_result *r, void *arg)
{
    cluster *c = arg;
    c->poll_isr = NULL;
    if (r->status != ETCD_OK || c->pending_cas)
        return;
    if (r->n_kvs == 0) {
        c->isr = (isr_set){0};
    } else {
        isr_set s = {.mod_revision = r->kvs[0].mod_revision};
        if (isr_decode(r->kvs[0].value, r->kvs[0].value_len, &s))
            c->isr = s;
    }
    if (c->lead)
        leader_isr_changed(c->lead);
    cluster_evaluate(c);
    cluster_publish_status(c);
}

static void on_view(const etcd_result *r, void *arg)
{
    cluster *c = arg;
    c->poll_view = NULL;
    if (r->status != ETCD_OK || r->n_kvs == 0 || r->kvs[0].value_len > VIEW_MAX_BYTES)
        return;
    char *copy = malloc(r->kvs[0].value_len + 1);
    if (!copy)
        return;
    memcpy(copy, r->kvs[0].value, r->kvs[0].value_len);
    copy[r->kvs[0].value_len] = 0;
    free(c->view);
    c->view = copy;
    c->view_ms = etcd_now_ms();
    cluster_publish_status(c);
}

static void on_view_put(const etcd_result *r, void *arg)
{
    (void)r;
    ((cluster *)arg)->poll_view = NULL;
}

/* The leader's view of its followers (lag) for every node's API: put on
 * the lease every VIEW_EVERY_POLLS polls; followers read it at each. */
static void exchange_view(cluster *c)
{
    char key[200];
    cluster_key(c, "status", key, sizeof key);
    if (c->poll_view)
        return;
    if (!c->lead) {
        c->poll_view = etcd_get(c->etcd, key, strlen(key), NULL, on_view, c);
        return;
    }
    if (!c->lead_ready || ++c->view_polls % VIEW_EVERY_POLLS)
        return;
    cluster_status st;
    cluster_get_status(c, &st);
    char *text = cluster_view_encode(&st);
    if (text)
        c->poll_view = etcd_put(c->etcd, key, strlen(key), text, strlen(text), c->lease,
                                on_view_put, c);
    free(text);
}

void cluster_poll(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    cluster *c = arg;
    char key[200];
    etcd_get_opts prefix = {.prefix = true};
    exchange_view(c);
    if (!c->poll_nodes) {
        cluster_key(c, "nodes/", key, sizeof key);
        c->poll_nodes = etcd_get(c->etcd, key, strlen(key), &prefix, on_nodes, c);
    }
    /* a leader writes the ISR itself, so it reads it only after a refused
     * write left it unknown (or it could never change it again) */
    if (!c->poll_isr && (!c->lead || c->isr.mod_revision < 0)) {
        cluster_key(c, "isr", key, sizeof key);
        c->poll_isr = etcd_get(c->etcd, key, strlen(key), NULL, on_isr, c);
    }
    if (c->lead)
        leader_tick(c->lead, etcd_now_ms());
    else if (!c->lead && c->keeper && !etcd_keeper_alive(c->keeper))
        cluster_lease_lost(ETCD_LEASE_LOST, c);
}
