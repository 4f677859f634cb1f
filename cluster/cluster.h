/* cluster: a node of a Warren cluster on etcd -- one leader for the whole
 * broker, followers that keep a byte-for-byte copy of its data directory,
 * confirms that wait for every in-sync replica, and a leader that fences
 * itself before its lease can lapse.
 *
 * What needs consensus is in etcd, under warren/<cluster.name>/:
 *   nodes/<node>    each live node's record (host, ports, lease), on its lease
 *   election/<lease> the candidates (etcd/'s election): the oldest key
 *                   leads; its create revision is the leadership's epoch
 *   isr             the in-sync replica set {"epoch": E, "nodes": [...]},
 *                   changed only by the leader with a compare-and-swap that
 *                   also requires its own election key (a deposed leader's
 *                   change fails)
 *   status          the leader's view of its followers (lag), for any node's API
 *   secret          random bytes made once: the replication handshake's key
 *
 * Roles. A node starts as a follower: it connects to the leader's
 * replication port, proves it knows the secret, and receives a snapshot of
 * the data directory and then every file operation (mirror/); it fsyncs at
 * each sync mark and acknowledges it. A follower campaigns only while it
 * is in the ISR and its copy is whole (no snapshot half applied). When it
 * wins, it stops following and the process loads the broker from its data
 * directory -- the crash recovery every node has -- and leads. Followers
 * do not serve AMQP: their AMQP listeners are not open, so a client with a
 * host list moves to the next host at once (a proxy would add a hop and a
 * second failure point to every message; RabbitMQ's clients all take a
 * list of hosts).
 *
 * Leading. The journal's confirms are gated (journal_set_replicated): a
 * sequence counts as synced once the leader and every other ISR member
 * synced it, and only while the ISR has at least min_isr members. A
 * follower that does not acknowledge within isr_timeout leaves the ISR
 * (its election key is deleted in the same transaction) before the leader
 * confirms without it; one that caught up joins it. A follower that
 * connects while in the ISR leaves it first (its snapshot empties its copy).
 * The leader fences itself -- no more confirms, every client connection
 * closed, the process restarts as a follower -- when its lease may lapse
 * within a margin (etcd_keeper_deadline_ms), when its election key is
 * gone, or when a journal sync round stalls past lease_ttl / 2.
 *
 * Threads: the cluster runs on a thread of its own (its event base: etcd,
 * replication sockets, snapshot reads). The broker's loop thread is reached
 * through an eventfd: gates, snapshot requests (sqlite is read there) and
 * the fence. Status is read under a lock from any thread.
 */
#ifndef WARREN_CLUSTER_H
#define WARREN_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/core.h"
#include "../mirror/mirror.h"
#include "../store/store.h"

struct event_base;

typedef struct cluster cluster;

/* Starts this node (cfg->cluster.n_endpoints > 0): its thread, the etcd
 * client, lease, node record and election. NULL (logged) on failure. */
cluster *cluster_start(const config *cfg);
/* Stops following or leading: resigns, revokes the lease, joins the
 * thread. After the broker (if any) was freed. */
void cluster_stop(cluster *c);

/* The follower phase, on the main thread: returns true once this node
 * leads (its data directory is whole and it may load it), false when
 * SIGTERM or SIGINT arrived. Both are blocked meanwhile; on false the old
 * mask is back, on true they stay blocked so that one sent while the
 * broker loads waits for its handlers (the caller unblocks them). */
bool cluster_await_leadership(cluster *c);

/* The leader's replication log, for broker_new (journal, streams, meta).
 * Valid from cluster_await_leadership's true until cluster_stop. */
mirror *cluster_mirror(cluster *c);

/* The broker is loaded: its loop thread takes the cluster's gates,
 * snapshot requests and the fence from now on. `fence` closes every
 * client connection and the listeners and ends the loop (the process then
 * restarts as a follower); it runs on the loop thread, once. */
typedef struct cluster_broker {
    struct event_base *base; /* the broker loop's */
    journal *journal;
    meta *meta;
    void (*fence)(void *arg, const char *why);
    void *arg;
} cluster_broker;
bool cluster_attach(cluster *c, const cluster_broker *b);
/* Before the broker is freed (its loop thread): the cluster lets go of
 * its loop, journal and meta. */
void cluster_detach(cluster *c);
/* Whether this node fenced itself as a leader, or lost its lease as a
 * follower: the process should start over. */
bool cluster_fenced(cluster *c);

/* ---- status (any thread) ---- */

#define CLUSTER_MAX_NODES 9

typedef enum cluster_role { CLUSTER_FOLLOWER, CLUSTER_LEADER, CLUSTER_FENCED } cluster_role;

typedef struct cluster_node_status {
    char name[64];
    char host[256];
    int replication_port;
    bool alive;   /* its record is in etcd (its lease holds) */
    bool leader;
    bool in_isr;
    bool connected;         /* leader's view: a replication session is open */
    bool snapshot_done;     /* leader's view: its snapshot was handed out */
    uint64_t acked_seq;     /* leader's view: the last sequence it synced */
    uint64_t lag_bytes;     /* leader's view: bytes sent and not yet acknowledged */
    uint64_t lag_ms;        /* leader's view: age of the oldest sync it has not acknowledged */
} cluster_node_status;

typedef struct cluster_status {
    char cluster_name[64], node_name[64];
    cluster_role role;
    char leader[64];     /* "" when nobody leads */
    int64_t epoch;       /* the leadership's (0: none) */
    unsigned min_isr;
    /* The leader's view is known: the node fields marked "leader's view",
     * confirms_held and replicated_seq are filled -- on the leader, and on
     * a follower from the status the leader puts in etcd every second
     * (at most a few seconds old). */
    bool leader_view;
    bool confirms_held;  /* the ISR is below min_isr */
    uint64_t synced_seq; /* leader: locally synced; follower: last acknowledged */
    uint64_t replicated_seq; /* the leader's gate (what confirms may cover) */
    unsigned n_nodes;
    cluster_node_status nodes[CLUSTER_MAX_NODES];
    char isr[CLUSTER_MAX_NODES][64];
    unsigned n_isr;
} cluster_status;

void cluster_get_status(cluster *c, cluster_status *out);
const char *cluster_role_name(cluster_role r);

/* ---- status as the management API shows it (status_json.c) ---- */

/* Node names are server_cluster_node_name's ("warren@<node>"). Lag is the
 * leader's view: null where this node does not know it (a follower's).
 * New references; NULL on OOM. A follower serves both itself on the
 * management port (GET /api/cluster, /api/nodes, /api/nodes/{node},
 * /api/healthchecks/node, to administrators and monitoring users of its
 * replicated metadata; anything else 503 not_leader), until it leads. */
struct json_t;
/* GET /api/cluster: cluster_name, node, role, leader, epoch, min_isr,
 * isr_size, confirms_held, synced_sequence, replicated_sequence, isr
 * [names], nodes [{name, host, replication_port, alive, role, in_sync,
 * connected, snapshot_done (leader's view), acked_sequence, lag_bytes,
 * lag_ms}] -- every live node and every ISR member. */
struct json_t *cluster_status_json(const cluster_status *st);
/* The nodes as /api/nodes lists them, this one first when its record is
 * not read yet: name, type "disc", running, and Warren's cluster_role,
 * in_sync, replication_lag_bytes, replication_lag_ms, acked_sequence. */
struct json_t *cluster_nodes_json(const cluster_status *st);
/* The leader's view as it goes to etcd (warren/<name>/status; malloc'd
 * text), and read back into a follower's status (false: not a view). */
char *cluster_view_encode(const cluster_status *st);
bool cluster_view_decode(const void *text, size_t len, cluster_status *st);

#endif
