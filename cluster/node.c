/* The node: its thread, etcd (secret, lease, record, election, polls of
 * the node records and the ISR), the choice between following, campaigning
 * and leading, fencing, and the status other threads read.
 *
 * Polling: the node records and the ISR are read every POLL_MS (two
 * linearizable reads) rather than watched: a follower acts on them within
 * that, and a read cannot miss a change the way a broken watch can. The
 * election itself is watched (etcd/). */
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster_int.h"

#define POLL_MS 250
#define VIEW_EVERY_POLLS 4        /* the leader puts its view in etcd every second */
#define VIEW_MAX_AGE_MS 5000      /* a follower shows one no older than this */
#define VIEW_MAX_BYTES 65536

const char *cluster_role_name(cluster_role r)
{
    return r == CLUSTER_LEADER ? "leader" : r == CLUSTER_FENCED ? "fenced" : "follower";
}

static uint64_t now_ms(void) { return etcd_now_ms(); }

static void key_of(const cluster *c, const char *rest, char *out, size_t cap)
{
    snprintf(out, cap, "%s%s", c->prefix, rest);
}

const node_record *cluster_find_node(const cluster *c, const char *name)
{
    for (unsigned i = 0; i < c->n_nodes; i++)
        if (strcmp(c->nodes[i].name, name) == 0)
            return &c->nodes[i];
    return NULL;
}

void cluster_hmac(const cluster *c, const uint8_t nonce[CLUSTER_NONCE_LEN], const char *name,
                  uint8_t out[CLUSTER_MAC_LEN])
{
    uint8_t text[CLUSTER_NONCE_LEN + 64];
    size_t n = strnlen(name, 63);
    memcpy(text, nonce, CLUSTER_NONCE_LEN);
    memcpy(text + CLUSTER_NONCE_LEN, name, n);
    unsigned len = CLUSTER_MAC_LEN;
    HMAC(EVP_sha256(), c->secret, CLUSTER_SECRET_LEN, text, CLUSTER_NONCE_LEN + n, out, &len);
}

/* ---- status ---------------------------------------------------------------- */

void cluster_publish_status(cluster *c)
{
    cluster_status st = {0};
    snprintf(st.cluster_name, sizeof st.cluster_name, "%s", c->cfg.cluster.name);
    snprintf(st.node_name, sizeof st.node_name, "%s", c->node_name);
    st.role = atomic_load(&c->fenced) ? CLUSTER_FENCED : c->lead ? CLUSTER_LEADER : CLUSTER_FOLLOWER;
    snprintf(st.leader, sizeof st.leader, "%s", c->leader_name);
    st.epoch = c->epoch;
    st.min_isr = c->cfg.cluster.min_isr;
    for (unsigned i = 0; i < c->isr.n; i++)
        snprintf(st.isr[i], sizeof st.isr[i], "%s", c->isr.names[i]);
    st.n_isr = c->isr.n;
    for (unsigned i = 0; i < c->n_nodes; i++) {
        cluster_node_status *n = &st.nodes[st.n_nodes++];
        snprintf(n->name, sizeof n->name, "%s", c->nodes[i].name);
        snprintf(n->host, sizeof n->host, "%s", c->nodes[i].host);
        n->replication_port = c->nodes[i].replication_port;
        n->alive = true;
        n->leader = strcmp(n->name, c->leader_name) == 0;
        n->in_isr = isr_has(&c->isr, n->name);
    }
    if (c->fol)
        st.synced_seq = follower_acked(c->fol);
    if (!c->lead && c->view && now_ms() - c->view_ms < VIEW_MAX_AGE_MS)
        cluster_view_decode(c->view, strlen(c->view), &st);
    pthread_mutex_lock(&c->lock);
    if (c->lead)
        leader_fill_status(c->lead, &st);
    c->status = st;
    pthread_mutex_unlock(&c->lock);
}

void cluster_get_status(cluster *c, cluster_status *out)
{
    pthread_mutex_lock(&c->lock);
    *out = c->status;
    pthread_mutex_unlock(&c->lock);
}

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
    key_of(c, "isr", isr_key, sizeof isr_key);
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
        leader_tick(c->lead, now_ms()); /* tells the broker loop */
        leader_fence(c->lead);
    }
    if (c->lease)
        etcd_lease_revoke(c->etcd, c->lease, on_fence_revoked, c);
    cluster_publish_status(c);
}

/* A leader fences; a follower starts over too (cluster_fenced is true and
 * cluster_await_leadership returns): a new lease, record and campaign. */
static void on_lease_lost(etcd_status why, void *arg)
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
    pthread_cond_broadcast(&c->cond);
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
    pthread_cond_broadcast(&c->cond);
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
    key_of(c, "nodes/", key, sizeof key);
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
    key_of(c, "isr", key, sizeof key);
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

static void on_election(const etcd_election_view *v, void *arg)
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
    c->view_ms = now_ms();
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
    key_of(c, "status", key, sizeof key);
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

static void poll_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    cluster *c = arg;
    char key[200];
    etcd_get_opts prefix = {.prefix = true};
    exchange_view(c);
    if (!c->poll_nodes) {
        key_of(c, "nodes/", key, sizeof key);
        c->poll_nodes = etcd_get(c->etcd, key, strlen(key), &prefix, on_nodes, c);
    }
    if (!c->poll_isr && !c->lead) {
        key_of(c, "isr", key, sizeof key);
        c->poll_isr = etcd_get(c->etcd, key, strlen(key), NULL, on_isr, c);
    }
    if (c->lead)
        leader_tick(c->lead, now_ms());
    else if (!c->lead && c->keeper && !etcd_keeper_alive(c->keeper))
        on_lease_lost(ETCD_LEASE_LOST, c);
}

/* ---- start-up: secret, lease, record, election ----------------------------- */

static void boot_retry(cluster *c);

static void on_registered(const etcd_result *r, void *arg)
{
    cluster *c = arg;
    if (r->status != ETCD_OK) {
        boot_retry(c);
        return;
    }
    c->registered = true;
    char prefix[200];
    key_of(c, "election/", prefix, sizeof prefix);
    c->election = etcd_election_new(c->etcd, prefix, on_election, c);
    struct timeval tv = {0, POLL_MS * 1000};
    event_add(c->poll_timer, &tv);
    poll_cb(-1, 0, c);
}

static void on_lease(const etcd_result *r, void *arg)
{
    cluster *c = arg;
    if (r->status != ETCD_OK) {
        boot_retry(c);
        return;
    }
    c->lease = r->lease_id;
    c->keeper = etcd_keeper_start(c->keep_client, c->lease, c->cfg.cluster.lease_ttl_s,
                                  c->lease_granted_ms, on_lease_lost, c);
    json_t *o = json_object();
    char lease[24], key[300];
    snprintf(lease, sizeof lease, "%" PRIx64, (uint64_t)c->lease);
    json_object_set_new(o, "name", json_string(c->node_name));
    json_object_set_new(o, "host", json_string(c->cfg.cluster.advertised_host));
    json_object_set_new(o, "replication_port", json_integer(c->cfg.cluster.replication_port));
    json_object_set_new(o, "amqp_port", json_integer(c->cfg.listen_port));
    json_object_set_new(o, "lease", json_string(lease));
    char *value = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    snprintf(key, sizeof key, "%snodes/%s", c->prefix, c->node_name);
    if (!value || !etcd_put(c->etcd, key, strlen(key), value, strlen(value), c->lease,
                            on_registered, c))
        boot_retry(c);
    free(value);
}

static void on_secret(const etcd_result *r, void *arg)
{
    cluster *c = arg;
    const etcd_kv *kv = r->status == ETCD_OK && r->n_kvs ? &r->kvs[0] : NULL;
    if (r->status != ETCD_OK || (!r->succeeded && (!kv || kv->value_len != CLUSTER_SECRET_LEN))) {
        boot_retry(c);
        return;
    }
    if (!r->succeeded)
        memcpy(c->secret, kv->value, CLUSTER_SECRET_LEN);
    c->have_secret = true;
    c->lease_granted_ms = now_ms();
    if (!etcd_lease_grant(c->etcd, c->cfg.cluster.lease_ttl_s, on_lease, c))
        boot_retry(c);
}

/* The secret, made once by whoever comes first: hex, so it is text. */
static void boot(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    cluster *c = arg;
    static const char hex[] = "0123456789abcdef";
    uint8_t raw[CLUSTER_SECRET_LEN / 2];
    if (RAND_bytes(raw, sizeof raw) != 1) {
        boot_retry(c);
        return;
    }
    for (size_t i = 0; i < sizeof raw; i++) {
        c->secret[2 * i] = (uint8_t)hex[raw[i] >> 4];
        c->secret[2 * i + 1] = (uint8_t)hex[raw[i] & 15];
    }
    char key[200];
    key_of(c, "secret", key, sizeof key);
    size_t kl = strlen(key);
    etcd_cmp absent = {.target = ETCD_CMP_CREATE, .op = ETCD_EQUAL, .key = key, .key_len = kl};
    etcd_op put = {.type = ETCD_OP_PUT, .key = key, .key_len = kl, .value = c->secret,
                   .value_len = CLUSTER_SECRET_LEN};
    etcd_op get = {.type = ETCD_OP_GET, .key = key, .key_len = kl};
    if (!etcd_txn(c->etcd, &absent, 1, &put, 1, &get, 1, on_secret, c))
        boot_retry(c);
}

static void boot_retry(cluster *c)
{
    log_msg(LOG_WARNING, "cluster: etcd is not answering; trying again");
    struct timeval tv = {1, 0};
    event_base_once(c->base, -1, EV_TIMEOUT, boot, c, &tv);
}

/* ---- the thread ------------------------------------------------------------ */

static void on_revoked(const etcd_result *r, void *arg)
{
    (void)r;
    event_base_loopexit(((cluster *)arg)->base, NULL);
}

/* Stopping: the lease is revoked, so that the record and the election key
 * go now and a follower takes over without waiting for the TTL (bounded
 * by the etcd client's request timeout). */
static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    cluster *c = arg;
    uint64_t n;
    if (read(fd, &n, sizeof n) < 0 && errno != EAGAIN)
        return;
    pthread_mutex_lock(&c->lock);
    bool stop = c->stop;
    pthread_mutex_unlock(&c->lock);
    if (!stop)
        return;
    if (c->lease && c->keeper && etcd_keeper_alive(c->keeper) &&
        etcd_lease_revoke(c->etcd, c->lease, on_revoked, c))
        return;
    event_base_loopexit(c->base, NULL);
}

static void *run(void *arg)
{
    cluster *c = arg;
    event_base_dispatch(c->base);
    return NULL;
}

static etcd_client *new_client(cluster *c)
{
    const char *eps[CONFIG_MAX_ETCD];
    size_t n = 0;
    for (unsigned i = 0; i < c->cfg.cluster.n_endpoints; i++) {
        const char *e = c->cfg.cluster.endpoints[i];
        if (!*e)
            continue;
        eps[n++] = strncmp(e, "https://", 8) == 0 ? e + 8 : e + 7;
    }
    etcd_limits lim = etcd_default_limits();
    lim.request_timeout_ms = c->cfg.cluster.lease_ttl_s * 1000 / 3;
    etcd_client *ec = etcd_client_new(c->base, eps, n, &lim);
    if (ec && strncmp(c->cfg.cluster.endpoints[0], "https://", 8) == 0)
        etcd_client_set_tls(ec, c->tls_client);
    if (ec && *c->cfg.cluster.etcd_user &&
        etcd_client_set_auth(ec, c->cfg.cluster.etcd_user, c->cfg.cluster.etcd_password) != 0) {
        etcd_client_free(ec);
        return NULL;
    }
    return ec;
}

cluster *cluster_start(const config *cfg)
{
    cluster *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cfg = *cfg;
    c->wake_fd = -1;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    if (*cfg->cluster.node_name)
        snprintf(c->node_name, sizeof c->node_name, "%s", cfg->cluster.node_name);
    else
        gethostname(c->node_name, sizeof c->node_name - 1);
    snprintf(c->prefix, sizeof c->prefix, "warren/%s/", cfg->cluster.name);
    if (!*c->cfg.cluster.advertised_host)
        snprintf(c->cfg.cluster.advertised_host, sizeof c->cfg.cluster.advertised_host, "%s",
                 c->node_name);
    /* one scheme for every endpoint: the client speaks TLS to all or none */
    bool https = strncmp(cfg->cluster.endpoints[0], "https://", 8) == 0;
    for (unsigned i = 1; i < cfg->cluster.n_endpoints; i++)
        if ((strncmp(cfg->cluster.endpoints[i], "https://", 8) == 0) != https) {
            log_msg(LOG_ERROR, "cluster: cluster.etcd.endpoints mix http:// and https://");
            cluster_stop(c);
            return NULL;
        }
    if (((https || cfg->cluster.replication_ssl) &&
         !(c->tls_client = cluster_tls_context(cfg, false))) ||
        (cfg->cluster.replication_ssl && !(c->tls_server = cluster_tls_context(cfg, true)))) {
        cluster_stop(c);
        return NULL;
    }
    c->base = event_base_new();
    c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!c->base || c->wake_fd < 0 ||
        !(c->wake_ev = event_new(c->base, c->wake_fd, EV_READ | EV_PERSIST, wake_cb, c)) ||
        !(c->poll_timer = event_new(c->base, -1, EV_PERSIST, poll_cb, c)) ||
        !(c->etcd = new_client(c)) || !(c->keep_client = new_client(c))) {
        log_msg(LOG_ERROR, "cluster: cannot start (memory, descriptors or endpoints)");
        cluster_stop(c);
        return NULL;
    }
    event_add(c->wake_ev, NULL);
    c->status_http = status_http_new(c);
    struct timeval now = {0, 0};
    event_base_once(c->base, -1, EV_TIMEOUT, boot, c, &now);
    cluster_publish_status(c);
    if (pthread_create(&c->thread, NULL, run, c) != 0) {
        log_msg(LOG_ERROR, "cluster: cannot start its thread");
        cluster_stop(c);
        return NULL;
    }
    c->thread_started = true;
    log_msg(LOG_INFO, "cluster: node %s of cluster %s, etcd at %s and %u more", c->node_name,
            cfg->cluster.name, cfg->cluster.endpoints[0], cfg->cluster.n_endpoints - 1);
    return c;
}

static void wake(cluster *c)
{
    uint64_t one = 1;
    if (write(c->wake_fd, &one, sizeof one) < 0)
        return; /* the counter is already non-zero */
}

bool cluster_await_leadership(cluster *c)
{
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    bool lead = false;
    for (;;) {
        struct timespec tick = {0, 100 * 1000 * 1000};
        int sig = sigtimedwait(&set, NULL, &tick);
        pthread_mutex_lock(&c->lock);
        lead = c->lead_ready;
        bool stop = c->stop;
        pthread_mutex_unlock(&c->lock);
        if (sig == SIGTERM || sig == SIGINT || stop) {
            log_msg(LOG_INFO, "cluster: stopping while following");
            lead = false;
            break;
        }
        if (lead)
            return true; /* still blocked: the broker unblocks them once it handles them */
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return lead;
}

mirror *cluster_mirror(cluster *c) { return c->mirror; }
bool cluster_fenced(cluster *c) { return atomic_load(&c->fenced); }

bool cluster_attach(cluster *c, const cluster_broker *b)
{
    if (!c->lead)
        return false;
    leader_broker_attached(c->lead, b);
    return true;
}

void cluster_detach(cluster *c)
{
    if (c && c->lead)
        leader_broker_detached(c->lead);
}

void cluster_stop(cluster *c)
{
    if (!c)
        return;
    if (c->thread_started) {
        pthread_mutex_lock(&c->lock);
        c->stop = true;
        pthread_mutex_unlock(&c->lock);
        wake(c);
        pthread_join(c->thread, NULL);
    }
    /* the thread is gone: free on this one, leaving the lease to lapse
     * (revoking it would need the loop; a stopped leader's record and
     * election key go with it within lease_ttl) */
    leader_free(c->lead);
    follower_free(c->fol);
    status_http_free(c->status_http);
    etcd_election_free(c->election);
    etcd_keeper_free(c->keeper);
    etcd_client_free(c->etcd);
    etcd_client_free(c->keep_client);
    if (c->wake_ev)
        event_free(c->wake_ev);
    if (c->poll_timer)
        event_free(c->poll_timer);
    if (c->base)
        event_base_free(c->base);
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    mirror_free(c->mirror);
    free(c->view);
    SSL_CTX_free(c->tls_client);
    SSL_CTX_free(c->tls_server);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
}
