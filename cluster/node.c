/* The node: its thread and life (start, stop, the wait for leadership,
 * the broker attached), start-up in etcd (the secret, the lease, the
 * record, the election), and the status other threads read. What it does
 * in its roles is roles.c. */
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


const char *cluster_role_name(cluster_role r)
{
    return r == CLUSTER_LEADER ? "leader" : r == CLUSTER_FENCED ? "fenced" : "follower";
}

static uint64_t now_ms(void) { return etcd_now_ms(); }

void cluster_key(const cluster *c, const char *rest, char *out, size_t cap)
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
    cluster_key(c, "election/", prefix, sizeof prefix);
    c->election = etcd_election_new(c->etcd, prefix, cluster_on_election, c);
    struct timeval tv = {0, POLL_MS * 1000};
    event_add(c->poll_timer, &tv);
    cluster_poll(-1, 0, c);
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
                                  c->lease_granted_ms, cluster_lease_lost, c);
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
    cluster_key(c, "secret", key, sizeof key);
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
        !(c->poll_timer = event_new(c->base, -1, EV_PERSIST, cluster_poll, c)) ||
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
    free(c);
}
