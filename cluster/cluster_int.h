/* cluster's private parts: the node's life, start-up and status
 * (node.c), its roles -- following, campaigning, leading, fencing, the
 * polls (roles.c) --, the ISR record (isr.c), the leader's replication
 * sessions, gate and broker mailbox (leader.c), the follower's replica
 * (follower.c), the status JSON (status_json.c), a follower's status
 * server (status_http.c) and TLS (tls.c). Everything here runs on the
 * cluster thread unless it says otherwise. */
#ifndef WARREN_CLUSTER_INT_H
#define WARREN_CLUSTER_INT_H

#include <event2/util.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "../etcd/etcd.h"
#include "cluster.h"

#define CLUSTER_SECRET_LEN 32
#define CLUSTER_NONCE_LEN 16
#define CLUSTER_MAC_LEN 32
/* The handshake's magic words: "WRNL" leader hello, "WRNF" follower answer. */
#define CLUSTER_HELLO_LEADER 0x57524e4cu
#define CLUSTER_HELLO_FOLLOWER 0x57524e46u
/* A follower's acknowledgement: 'A', u64 sequence, u64 bytes applied. */
#define CLUSTER_ACK_LEN 17
/* A follower's marker: a snapshot is half applied, its copy is not whole. */
#define CLUSTER_SYNCING_FILE "cluster-syncing"

typedef struct leader leader;
typedef struct follower follower;
typedef struct status_http status_http;

/* A node's record in etcd (nodes/<name>). */
typedef struct node_record {
    char name[64], host[256];
    int replication_port;
    int64_t lease;
} node_record;

/* The ISR as read from etcd; mod_revision 0 = the key is absent. */
typedef struct isr_set {
    char names[CLUSTER_MAX_NODES][64];
    unsigned n;
    int64_t epoch;
    int64_t mod_revision;
} isr_set;

bool isr_has(const isr_set *s, const char *name);
bool isr_add(isr_set *s, const char *name);
void isr_remove(isr_set *s, const char *name);
/* JSON {"epoch":E,"nodes":[...]} to and from etcd's value. */
char *isr_encode(const isr_set *s);
bool isr_decode(const void *value, size_t len, isr_set *out);

struct cluster {
    config cfg; /* a copy */
    char prefix[160]; /* "warren/<name>/" */
    char node_name[64];
    pthread_t thread;
    bool thread_started;
    struct event_base *base;
    int wake_fd; /* other threads -> the cluster thread */
    struct event *wake_ev, *poll_timer;
    etcd_client *etcd, *keep_client;
    int64_t lease;
    uint64_t lease_granted_ms;
    etcd_keeper *keeper;
    etcd_election *election;
    etcd_req *poll_nodes, *poll_isr, *poll_view, *pending_cas;
    char *view;       /* a follower: the leader's view as last read (status key) */
    uint64_t view_ms; /* when it was read */
    unsigned view_polls;
    uint8_t secret[CLUSTER_SECRET_LEN];
    bool have_secret, registered;

    /* the election as last seen */
    int64_t epoch;
    char leader_name[64];
    bool is_me, campaigning, campaign_asked;
    isr_set isr;
    node_record nodes[CLUSTER_MAX_NODES];
    unsigned n_nodes;

    follower *fol;
    leader *lead;
    status_http *status_http; /* while following */
    mirror *mirror;
    SSL_CTX *tls_client; /* etcd over https, a follower's replication (tls.c) */
    SSL_CTX *tls_server; /* the leader's replication listener, with cluster.replication.ssl */

    /* shared with other threads, under `lock` */
    pthread_mutex_t lock;
    bool lead_ready; /* the main thread may load the broker */
    bool stop;       /* cluster_stop asked */
    atomic_bool fenced;
    cluster_status status;
};

#define POLL_MS 250          /* the node records, the ISR and the leader's view are read this often */
#define VIEW_MAX_AGE_MS 5000 /* a follower shows a leader's view no older than this */

/* node.c */
void cluster_publish_status(cluster *c);
/* "warren/<cluster>/" + rest */
void cluster_key(const cluster *c, const char *rest, char *out, size_t cap);
const node_record *cluster_find_node(const cluster *c, const char *name);

/* roles.c */
/* Re-evaluates campaign / follow / lead after any change. */
void cluster_evaluate(cluster *c);
/* The election's reports; the lease lost (a leader fences, a follower
 * starts over); the POLL_MS timer. */
void cluster_on_election(const etcd_election_view *v, void *arg);
void cluster_lease_lost(etcd_status why, void *arg);
void cluster_poll(evutil_socket_t fd, short what, void *arg);
/* The leader steps down (fences): logs why, stops confirming, asks the broker loop to close everything. */
void cluster_fence(cluster *c, const char *why);
/* Writes the ISR with a compare-and-swap guarded by this leader's election key; `drop_lease`
 * (0 none) is a removed follower's lease whose election key goes in the same transaction. */
bool cluster_write_isr(cluster *c, const isr_set *next, int64_t drop_lease,
                       void (*done)(cluster *c, bool ok, void *arg), void *arg);
void cluster_hmac(const cluster *c, const uint8_t nonce[CLUSTER_NONCE_LEN], const char *name,
                  uint8_t out[CLUSTER_MAC_LEN]);

/* tls.c: a context from cluster.ssl.* (NULL, logged, on failure); a
 * connection's SSL that checks the peer's certificate names `peer_ip`. */
SSL_CTX *cluster_tls_context(const config *cfg, bool accepting);
SSL *cluster_tls_client(SSL_CTX *ctx, const char *peer_ip);

/* leader.c */
leader *leader_new(cluster *c);
void leader_free(leader *l);
/* The broker attached: the gate and snapshot requests can flow. */
void leader_broker_attached(leader *l, const cluster_broker *b);
void leader_broker_detached(leader *l);
/* Fills the nodes' leader's-view fields of `st` (under the status lock). */
void leader_fill_status(leader *l, cluster_status *st);
/* The ISR changed (after a CAS by this leader): recompute the gate. */
void leader_isr_changed(leader *l);
void leader_tick(leader *l, uint64_t now_ms);
/* Fenced: every follower session and the listener closed. */
void leader_fence(leader *l);

/* follower.c */
follower *follower_new(cluster *c);
void follower_free(follower *f);
/* Follow `leader_name` at epoch (connects or reconnects as needed). */
void follower_follow(follower *f, const char *leader_name, int64_t epoch);
/* Whether the copy is whole (no snapshot half applied). */
bool follower_copy_whole(const follower *f);
uint64_t follower_acked(const follower *f);
bool follower_connected(const follower *f);
/* The replicated metadata once a snapshot arrived, else NULL. */
meta *follower_meta(const follower *f);

/* status_http.c: the follower's status on the management port, on the
 * cluster's base; NULL (logged) when it cannot be bound. Freed before
 * the node leads. */
status_http *status_http_new(cluster *c);
/* status_page.c: the follower's page ("/") and its script ("/cluster.js"). */
struct http_req;
bool status_page_path(const char *path);
void status_page_serve(struct http_req *req, const char *path);
void status_http_free(status_http *sh);

#endif
