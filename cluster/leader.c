/* The leader: the replication listener, a session per follower (handshake,
 * a mirror reader's frames out, acknowledgements in), the ISR's growth and
 * shrinking, the confirm gate, self-fencing, and the mailbox to the broker
 * loop (gates, snapshot requests, the fence).
 *
 * Handshake: the leader sends u32 "WRNL", u64 epoch, a 16-byte nonce and
 * its name (u8 length + bytes); the follower answers u32 "WRNF", its name
 * and HMAC-SHA256(secret, nonce || name). Then the leader sends mirror
 * frames and the follower sends acknowledgements ('A', u64 sequence, u64
 * bytes applied).
 *
 * A session's reader is made on the broker loop (the metadata image and
 * the reader's start must fall in one loop callback), handed back here
 * through the mailbox, and then read on this thread: snapshot files are
 * read here, never on the broker loop. */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cluster_int.h"

#define MAX_SESSIONS 16
#define SEND_HIGH (4u << 20)  /* stop reading the log past this much unsent */
#define SEND_SLICE (1u << 20) /* bytes asked of a reader at a time */
#define LOG_BOUND ((size_t)256 << 20)
#define MAX_REQUESTS 16

typedef struct session {
    leader *l;
    uint64_t id;
    struct bufferevent *bev;
    char peer[64];
    char name[64]; /* "" until the handshake */
    uint8_t nonce[CLUSTER_NONCE_LEN];
    mirror_reader *reader;
    bool reader_asked, dropping_from_isr;
    uint64_t acked, applied_bytes, sent_bytes;
    bool snapshot_handed, acked_since; /* the snapshot is out; an ack came after it */
    uint64_t catch_up_target; /* the leader's synced sequence when the snapshot was out */
    uint64_t last_progress_ms; /* when its acknowledged sequence last moved */
    uint64_t last_ack_ms;      /* when any acknowledgement last came */
} session;

/* What the leader knows of an ISR member without a session. */
typedef struct absent_member {
    char name[64];
    uint64_t since_ms;
} absent_member;

struct leader {
    cluster *c;
    struct evconnlistener *listener;
    session *sessions[MAX_SESSIONS];
    unsigned n_sessions;
    uint64_t next_id;
    struct event *log_ev; /* the mirror's wait fd */
    absent_member absent[CLUSTER_MAX_NODES];
    unsigned n_absent;
    uint64_t lead_since_ms;
    uint64_t gate;        /* last posted to the broker */
    bool held;            /* the ISR is below min_isr */

    /* the mailbox, both ways, under `mlock` */
    pthread_mutex_t mlock;
    int to_broker_fd, to_leader_fd;
    struct event *broker_ev, *leader_ev;
    cluster_broker b;
    bool attached, fence_sent;
    uint64_t post_gate;
    char fence_why[160];
    uint64_t requests[MAX_REQUESTS];
    unsigned n_requests;
    struct { uint64_t id; mirror_reader *r; } results[MAX_REQUESTS];
    unsigned n_results;
};

static void poke(int fd)
{
    uint64_t one = 1;
    if (write(fd, &one, sizeof one) < 0)
        return; /* already signalled */
}

static void drain(int fd)
{
    uint64_t n;
    if (read(fd, &n, sizeof n) < 0)
        return;
}

/* ---- the broker loop's side of the mailbox (runs on the broker loop) ---- */

static void broker_mail(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    leader *l = arg;
    drain(fd);
    pthread_mutex_lock(&l->mlock);
    uint64_t gate = l->post_gate;
    bool fence = l->fence_why[0] && !l->fence_sent;
    char why[160];
    snprintf(why, sizeof why, "%s", l->fence_why);
    l->fence_sent = l->fence_sent || fence;
    uint64_t req[MAX_REQUESTS];
    unsigned n = l->n_requests;
    memcpy(req, l->requests, n * sizeof req[0]);
    l->n_requests = 0;
    pthread_mutex_unlock(&l->mlock);
    if (fence) {
        l->b.fence(l->b.arg, why);
        return;
    }
    journal_set_replicated(l->b.journal, gate);
    for (unsigned i = 0; i < n; i++) {
        uint8_t *image = NULL;
        size_t len = 0;
        mirror_reader *r = NULL;
        if (meta_serialize(l->b.meta, &image, &len))
            r = mirror_reader_new(l->c->mirror, (uint64_t)l->c->epoch, image, len);
        free(image);
        pthread_mutex_lock(&l->mlock);
        l->results[l->n_results].id = req[i];
        l->results[l->n_results++].r = r;
        pthread_mutex_unlock(&l->mlock);
    }
    if (n)
        poke(l->to_leader_fd);
}

/* The broker is about to be freed (its loop thread): nothing of it may be
 * touched from here on, its event included. */
void leader_broker_detached(leader *l)
{
    pthread_mutex_lock(&l->mlock);
    if (l->broker_ev)
        event_free(l->broker_ev);
    l->broker_ev = NULL;
    l->attached = false;
    l->b = (cluster_broker){0};
    pthread_mutex_unlock(&l->mlock);
}

void leader_broker_attached(leader *l, const cluster_broker *b)
{
    pthread_mutex_lock(&l->mlock);
    l->b = *b;
    l->broker_ev = event_new(b->base, l->to_broker_fd, EV_READ | EV_PERSIST, broker_mail, l);
    if (l->broker_ev)
        event_add(l->broker_ev, NULL);
    l->attached = l->broker_ev != NULL;
    pthread_mutex_unlock(&l->mlock);
    poke(l->to_broker_fd); /* the current gate, and requests that waited */
}

/* ---- sessions -------------------------------------------------------------- */

static session *find_session(leader *l, const char *name)
{
    for (unsigned i = 0; i < l->n_sessions; i++)
        if (strcmp(l->sessions[i]->name, name) == 0)
            return l->sessions[i];
    return NULL;
}

static void note_absent(leader *l, const char *name)
{
    for (unsigned i = 0; i < l->n_absent; i++)
        if (strcmp(l->absent[i].name, name) == 0)
            return;
    if (l->n_absent < CLUSTER_MAX_NODES) {
        snprintf(l->absent[l->n_absent].name, sizeof l->absent[0].name, "%s", name);
        l->absent[l->n_absent++].since_ms = etcd_now_ms();
    }
}

static void forget_absent(leader *l, const char *name)
{
    for (unsigned i = 0; i < l->n_absent; i++)
        if (strcmp(l->absent[i].name, name) == 0) {
            l->absent[i] = l->absent[--l->n_absent];
            return;
        }
}

static void session_free(session *s)
{
    leader *l = s->l;
    for (unsigned i = 0; i < l->n_sessions; i++)
        if (l->sessions[i] == s) {
            l->sessions[i] = l->sessions[--l->n_sessions];
            break;
        }
    if (*s->name) {
        log_msg(LOG_INFO, "cluster: follower %s (%s) disconnected", s->name, s->peer);
        if (isr_has(&l->c->isr, s->name))
            note_absent(l, s->name);
    }
    bufferevent_free(s->bev);
    mirror_reader_free(s->reader);
    free(s);
}

static void recompute_gate(leader *l);

static void pump(session *s)
{
    struct evbuffer *out = bufferevent_get_output(s->bev);
    while (s->reader && evbuffer_get_length(out) < SEND_HIGH) {
        const uint8_t *p;
        size_t n;
        mirror_read_status st = mirror_reader_next(s->reader, SEND_SLICE, &p, &n);
        if (st == MIRROR_DATA) {
            evbuffer_add(out, p, n);
            s->sent_bytes += n;
            continue;
        }
        if (st == MIRROR_CUT || st == MIRROR_ERROR) {
            log_msg(LOG_WARNING, "cluster: follower %s %s; it starts over with a new snapshot",
                    s->name, st == MIRROR_CUT ? "fell too far behind" : "could not be sent a file");
            session_free(s);
            return;
        }
        break;
    }
    if (s->reader && !s->snapshot_handed && mirror_reader_caught_up(s->reader)) {
        s->snapshot_handed = true;
        s->catch_up_target = mirror_last_synced(s->l->c->mirror);
    }
}

static void pump_all(leader *l)
{
    for (unsigned i = l->n_sessions; i-- > 0;)
        pump(l->sessions[i]);
}

static void log_ready(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    drain(fd);
    pump_all(arg);
}

static void ask_reader(session *s)
{
    leader *l = s->l;
    pthread_mutex_lock(&l->mlock);
    if (l->n_requests < MAX_REQUESTS && !s->reader_asked) {
        l->requests[l->n_requests++] = s->id;
        s->reader_asked = true;
    }
    bool attached = l->attached;
    pthread_mutex_unlock(&l->mlock);
    if (attached && s->reader_asked)
        poke(l->to_broker_fd);
}

/* Readers made on the broker loop, handed to their sessions (or freed if
 * the session went meanwhile). */
static void leader_mail(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    leader *l = arg;
    drain(fd);
    pthread_mutex_lock(&l->mlock);
    unsigned n = l->n_results;
    __typeof__(l->results) res;
    memcpy(res, l->results, sizeof res);
    l->n_results = 0;
    pthread_mutex_unlock(&l->mlock);
    for (unsigned i = 0; i < n; i++) {
        session *s = NULL;
        for (unsigned j = 0; j < l->n_sessions; j++)
            if (l->sessions[j]->id == res[i].id)
                s = l->sessions[j];
        if (!s || !res[i].r) {
            if (s) {
                log_msg(LOG_ERROR, "cluster: cannot make a snapshot for %s", s->name);
                session_free(s);
            }
            mirror_reader_free(res[i].r);
            continue;
        }
        s->reader = res[i].r;
        log_msg(LOG_INFO, "cluster: sending follower %s a snapshot", s->name);
        pump(s);
    }
}

static void dropped_for_resync(cluster *c, bool ok, void *arg)
{
    leader *l = c->lead;
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (unsigned i = 0; l && i < l->n_sessions; i++)
        if (l->sessions[i]->id == id) {
            l->sessions[i]->dropping_from_isr = false;
            if (ok)
                ask_reader(l->sessions[i]);
        }
    if (l)
        recompute_gate(l);
}

/* The follower proved itself: it leaves the ISR first if it is in it (its
 * snapshot empties its copy), then gets a reader. */
static void start_streaming(session *s)
{
    leader *l = s->l;
    cluster *c = l->c;
    session *old = find_session(l, s->name);
    if (old && old != s)
        session_free(old);
    forget_absent(l, s->name);
    log_msg(LOG_INFO, "cluster: follower %s connected from %s", s->name, s->peer);
    if (!isr_has(&c->isr, s->name)) {
        ask_reader(s);
        return;
    }
    isr_set next = c->isr;
    isr_remove(&next, s->name);
    const node_record *n = cluster_find_node(c, s->name);
    s->dropping_from_isr = true;
    if (!cluster_write_isr(c, &next, n ? n->lease : 0, dropped_for_resync,
                           (void *)(uintptr_t)s->id))
        s->dropping_from_isr = false; /* tried again at the next tick */
}

static void on_read(struct bufferevent *bev, void *arg)
{
    session *s = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    if (!*s->name) {
        uint8_t head[5];
        if (evbuffer_copyout(in, head, 5) < 5)
            return;
        size_t nl = head[4];
        if (evbuffer_get_length(in) < 5 + nl + CLUSTER_MAC_LEN)
            return;
        uint8_t buf[5 + 255 + CLUSTER_MAC_LEN], mac[CLUSTER_MAC_LEN];
        evbuffer_remove(in, buf, 5 + nl + CLUSTER_MAC_LEN);
        uint32_t magic;
        memcpy(&magic, buf, 4);
        char name[64];
        bool ok = ntohl(magic) == CLUSTER_HELLO_FOLLOWER && nl > 0 && nl < sizeof name &&
                  !memchr(buf + 5, 0, nl);
        if (ok) {
            memcpy(name, buf + 5, nl);
            name[nl] = 0;
            cluster_hmac(s->l->c, s->nonce, name, mac);
            ok = CRYPTO_memcmp(mac, buf + 5 + nl, CLUSTER_MAC_LEN) == 0 &&
                 strcmp(name, s->l->c->node_name) != 0;
        }
        if (!ok) {
            log_msg(LOG_WARNING, "cluster: refused a replication connection from %s (bad "
                    "handshake or secret)", s->peer);
            session_free(s);
            return;
        }
        snprintf(s->name, sizeof s->name, "%s", name);
        s->last_progress_ms = etcd_now_ms();
        start_streaming(s);
        return;
    }
    uint8_t ack[CLUSTER_ACK_LEN];
    bool moved = false;
    while (evbuffer_get_length(in) >= CLUSTER_ACK_LEN) {
        evbuffer_remove(in, ack, CLUSTER_ACK_LEN);
        uint64_t seq, bytes;
        memcpy(&seq, ack + 1, 8);
        memcpy(&bytes, ack + 9, 8);
        if (ack[0] != 'A') {
            session_free(s);
            return;
        }
        seq = be64toh(seq);
        s->applied_bytes = be64toh(bytes);
        /* a mark comes after the whole snapshot in the stream */
        s->acked_since = s->acked_since || s->snapshot_handed;
        if (seq > s->acked) {
            s->acked = seq;
            moved = true;
        }
    }
    s->last_ack_ms = etcd_now_ms();
    if (moved) {
        s->last_progress_ms = s->last_ack_ms;
        recompute_gate(s->l);
    }
}

static void on_write(struct bufferevent *bev, void *arg)
{
    (void)bev;
    pump(arg);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
        session *s = arg;
        leader *l = s->l;
        session_free(s);
        recompute_gate(l);
    }
}

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    (void)lis, (void)salen;
    leader *l = arg;
    session *s = l->n_sessions < MAX_SESSIONS ? calloc(1, sizeof *s) : NULL;
    if (!s) {
        evutil_closesocket(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    s->l = l;
    s->id = ++l->next_id;
    char host[64] = "?";
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, host, sizeof host);
    snprintf(s->peer, sizeof s->peer, "%s", host);
    SSL *ssl = l->c->tls_server ? SSL_new(l->c->tls_server) : NULL;
    if (l->c->tls_server && !ssl) {
        evutil_closesocket(fd);
        free(s);
        return;
    }
    s->bev = ssl ? bufferevent_openssl_socket_new(l->c->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                  BEV_OPT_CLOSE_ON_FREE)
                 : bufferevent_socket_new(l->c->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!s->bev || RAND_bytes(s->nonce, sizeof s->nonce) != 1) {
        if (s->bev)
            bufferevent_free(s->bev);
        else
            evutil_closesocket(fd);
        free(s);
        return;
    }
    l->sessions[l->n_sessions++] = s;
    bufferevent_setcb(s->bev, on_read, on_write, on_event, s);
    bufferevent_setwatermark(s->bev, EV_WRITE, SEND_HIGH / 2, 0);
    bufferevent_setwatermark(s->bev, EV_READ, 0, 4096);
    struct timeval hello = {10, 0};
    bufferevent_set_timeouts(s->bev, &hello, NULL);
    bufferevent_enable(s->bev, EV_READ | EV_WRITE);
    uint8_t head[4 + 8 + CLUSTER_NONCE_LEN + 1 + 64];
    uint32_t magic = htonl(CLUSTER_HELLO_LEADER);
    uint64_t epoch = htobe64((uint64_t)l->c->epoch);
    size_t nl = strlen(l->c->node_name);
    memcpy(head, &magic, 4);
    memcpy(head + 4, &epoch, 8);
    memcpy(head + 12, s->nonce, CLUSTER_NONCE_LEN);
    head[28] = (uint8_t)nl;
    memcpy(head + 29, l->c->node_name, nl);
    bufferevent_write(s->bev, head, 29 + nl);
}

/* ---- the ISR and the gate ------------------------------------------------ */

/* What confirms may cover now: every other ISR member's acknowledged
 * sequence (a member without a session holds it until it leaves the
 * ISR); nothing new while the ISR is below min_isr. */
static void recompute_gate(leader *l)
{
    cluster *c = l->c;
    if (atomic_load(&c->fenced))
        return;
    bool held = c->isr.n < c->cfg.cluster.min_isr || !isr_has(&c->isr, c->node_name);
    uint64_t gate = UINT64_MAX;
    for (unsigned i = 0; i < c->isr.n; i++) {
        if (strcmp(c->isr.names[i], c->node_name) == 0)
            continue;
        session *s = find_session(l, c->isr.names[i]);
        uint64_t acked = s ? s->acked : 0;
        gate = acked < gate ? acked : gate;
    }
    if (held != l->held) {
        l->held = held;
        if (held)
            log_msg(LOG_WARNING, "cluster: %u in-sync replicas, below min_isr %u: confirms "
                    "are held", c->isr.n, c->cfg.cluster.min_isr);
        else
            log_msg(LOG_INFO, "cluster: %u in-sync replicas (min_isr %u): confirming",
                    c->isr.n, c->cfg.cluster.min_isr);
    }
    if (held || gate <= l->gate)
        return;
    l->gate = gate;
    pthread_mutex_lock(&l->mlock);
    l->post_gate = gate;
    bool attached = l->attached;
    pthread_mutex_unlock(&l->mlock);
    if (attached)
        poke(l->to_broker_fd);
}

void leader_isr_changed(leader *l) { recompute_gate(l); }

void leader_fence(leader *l)
{
    while (l->n_sessions)
        session_free(l->sessions[0]);
    if (l->listener)
        evconnlistener_free(l->listener);
    l->listener = NULL;
}

static void joined_isr(cluster *c, bool ok, void *arg)
{
    (void)arg, (void)ok;
    if (c->lead)
        recompute_gate(c->lead);
}

static void dropped(cluster *c, bool ok, void *arg)
{
    (void)arg;
    if (c->lead && ok)
        recompute_gate(c->lead);
}

/* One ISR change at a time (a CAS in flight blocks the next): joins of
 * followers that caught up, leaves of members that stopped acknowledging. */
static void review_isr(leader *l, uint64_t now)
{
    cluster *c = l->c;
    uint64_t last = mirror_last_synced(c->mirror);
    uint64_t timeout = c->cfg.cluster.isr_timeout_ms;
    for (unsigned i = 0; i < c->isr.n; i++) {
        const char *name = c->isr.names[i];
        if (strcmp(name, c->node_name) == 0)
            continue;
        session *s = find_session(l, name);
        bool late;
        if (s && !s->dropping_from_isr) {
            if (s->acked >= last)
                s->last_progress_ms = now;
            late = now - s->last_progress_ms > timeout;
        } else if (!s) {
            note_absent(l, name);
            uint64_t since = l->lead_since_ms;
            for (unsigned j = 0; j < l->n_absent; j++)
                if (strcmp(l->absent[j].name, name) == 0)
                    since = l->absent[j].since_ms > since ? l->absent[j].since_ms : since;
            late = now - since > timeout;
        } else {
            continue;
        }
        if (!late)
            continue;
        isr_set next = c->isr;
        isr_remove(&next, name);
        const node_record *n = cluster_find_node(c, name);
        log_msg(LOG_WARNING, "cluster: follower %s has not acknowledged for %" PRIu64
                " ms: leaving the in-sync replicas", name, timeout);
        cluster_write_isr(c, &next, n ? n->lease : 0, dropped, NULL);
        return;
    }
    for (unsigned i = 0; i < l->n_sessions; i++) {
        session *s = l->sessions[i];
        /* caught up, and acknowledging now (not one that stopped after):
         * an idle leader repeats its last mark every tick, so a live
         * follower acknowledges without its sequence moving */
        if (!*s->name || isr_has(&c->isr, s->name) || !s->acked_since ||
            s->acked < s->catch_up_target || now - s->last_ack_ms > timeout / 2)
            continue;
        isr_set next = c->isr;
        if (!isr_add(&next, s->name))
            continue;
        log_msg(LOG_INFO, "cluster: follower %s caught up (sequence %" PRIu64
                "): joining the in-sync replicas", s->name, s->acked);
        cluster_write_isr(c, &next, 0, joined_isr, NULL);
        return;
    }
}

void leader_tick(leader *l, uint64_t now)
{
    cluster *c = l->c;
    if (atomic_load(&c->fenced)) {
        pthread_mutex_lock(&l->mlock);
        if (!l->fence_why[0])
            snprintf(l->fence_why, sizeof l->fence_why, "fenced");
        bool attached = l->attached;
        pthread_mutex_unlock(&l->mlock);
        if (attached)
            poke(l->to_broker_fd);
        return;
    }
    /* fence before the lease can lapse: a third of its TTL is the margin
     * for a slow loop and clocks that run apart */
    uint64_t margin = c->cfg.cluster.lease_ttl_s * 1000 / 3;
    if (c->keeper && (!etcd_keeper_alive(c->keeper) ||
                      now + margin >= etcd_keeper_deadline_ms(c->keeper))) {
        pthread_mutex_lock(&l->mlock);
        snprintf(l->fence_why, sizeof l->fence_why, "the lease could not be renewed in time");
        pthread_mutex_unlock(&l->mlock);
        cluster_fence(c, "the lease could not be renewed in time");
        return;
    }
    /* the disk watchdog: a sync round stuck past half the lease means the
     * disk stopped answering; confirms would stop anyway, but clients and
     * followers must move to a node that can serve */
    pthread_mutex_lock(&l->mlock);
    uint64_t stuck = l->b.journal ? journal_round_age_ms(l->b.journal) : 0;
    pthread_mutex_unlock(&l->mlock);
    if (stuck > c->cfg.cluster.lease_ttl_s * 1000 / 2) {
        char why[120];
        snprintf(why, sizeof why, "the disk has not finished a sync for %" PRIu64 " ms", stuck);
        pthread_mutex_lock(&l->mlock);
        snprintf(l->fence_why, sizeof l->fence_why, "%s", why);
        pthread_mutex_unlock(&l->mlock);
        cluster_fence(c, why);
        return;
    }
    for (unsigned i = 0; i < l->n_sessions; i++) {
        session *s = l->sessions[i];
        if (*s->name && !s->reader && !s->reader_asked && !s->dropping_from_isr)
            start_streaming(s);
    }
    if (!c->pending_cas && c->isr.mod_revision > 0)
        review_isr(l, now);
    /* an idle journal makes no sync marks: repeat the last one, so that
     * followers acknowledge (and join) without traffic */
    if (l->n_sessions)
        mirror_synced(c->mirror, mirror_last_synced(c->mirror));
    recompute_gate(l);
    pump_all(l);
}

void leader_fill_status(leader *l, cluster_status *st)
{
    st->leader_view = true;
    st->confirms_held = l->held;
    st->replicated_seq = l->gate;
    st->synced_seq = mirror_last_synced(l->c->mirror);
    uint64_t now = etcd_now_ms();
    for (unsigned i = 0; i < st->n_nodes; i++) {
        cluster_node_status *n = &st->nodes[i];
        session *s = find_session(l, n->name);
        if (!s)
            continue;
        n->connected = true;
        n->snapshot_done = s->snapshot_handed;
        n->acked_seq = s->acked;
        n->lag_bytes = s->sent_bytes > s->applied_bytes ? s->sent_bytes - s->applied_bytes : 0;
        n->lag_ms = s->acked >= st->synced_seq ? 0 : now - s->last_progress_ms;
    }
}

/* ---- life ------------------------------------------------------------------ */

leader *leader_new(cluster *c)
{
    leader *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->c = c;
    l->to_broker_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    l->to_leader_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&l->mlock, NULL);
    l->lead_since_ms = etcd_now_ms();
    if (!c->mirror)
        c->mirror = mirror_new(c->cfg.data_dir, LOG_BOUND);
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)c->cfg.cluster.replication_port)};
    if (inet_pton(AF_INET, c->cfg.cluster.advertised_host, &sin.sin_addr) != 1)
        sin.sin_addr.s_addr = htonl(INADDR_ANY);
    if (l->to_broker_fd < 0 || l->to_leader_fd < 0 || !c->mirror ||
        !(l->leader_ev = event_new(c->base, l->to_leader_fd, EV_READ | EV_PERSIST, leader_mail, l)) ||
        !(l->log_ev = event_new(c->base, mirror_wait_fd(c->mirror), EV_READ | EV_PERSIST,
                                log_ready, l)) ||
        !(l->listener = evconnlistener_new_bind(c->base, on_accept, l,
                                                LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16,
                                                (struct sockaddr *)&sin, sizeof sin))) {
        log_msg(LOG_ERROR, "cluster: cannot listen for followers on port %d: %s",
                c->cfg.cluster.replication_port, strerror(errno));
        leader_free(l);
        return NULL;
    }
    event_add(l->leader_ev, NULL);
    event_add(l->log_ev, NULL);
    log_msg(LOG_INFO, "cluster: replication listening on %s:%d", c->cfg.cluster.advertised_host,
            c->cfg.cluster.replication_port);
    return l;
}

void leader_free(leader *l)
{
    if (!l)
        return;
    while (l->n_sessions)
        session_free(l->sessions[0]);
    for (unsigned i = 0; i < l->n_results; i++)
        mirror_reader_free(l->results[i].r);
    if (l->listener)
        evconnlistener_free(l->listener);
    if (l->log_ev)
        event_free(l->log_ev);
    if (l->leader_ev)
        event_free(l->leader_ev);
    if (l->to_broker_fd >= 0)
        close(l->to_broker_fd);
    if (l->to_leader_fd >= 0)
        close(l->to_leader_fd);
    pthread_mutex_destroy(&l->mlock);
    free(l);
}
