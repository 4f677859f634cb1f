/* etcd: a client of etcd's v3 API (its JSON gateway: HTTP/1.1 on the client
 * port) that runs on the caller's libevent loop and never blocks it. It
 * gives the cluster what needs consensus: keys, compare-and-swap, leases
 * kept alive, watches and an election whose epoch is a fencing token.
 *
 * Transport. A client holds a list of endpoints ("127.0.0.1:2379", numeric
 * IPv4/IPv6 only: no DNS on the loop), optionally TLS and credentials.
 * Unary requests go in order over one connection, one in flight at a
 * time; each has a deadline from the moment it is queued (a request that
 * cannot reach any endpoint ends with ETCD_TIMEOUT). A connection that
 * fails, answers nonsense, or holds a request past its deadline is
 * closed; the next request connects to the next endpoint of the list
 * (after a full round of failures, with a backoff of up to a second). A
 * request whose connection never came up moves on to the next endpoint;
 * one in flight on a connection that then fails ends with
 * ETCD_UNAVAILABLE -- it may or may not have been applied. Because
 * requests go one at a time, give a lease keeper a client of its own so a
 * slow request cannot delay its renewals. Every watch has a connection of
 * its own. A response's head and each JSON message of its body are
 * bounded (etcd_limits): a broken or hostile etcd ends a request with
 * ETCD_PROTOCOL, never with unbounded allocation.
 *
 * Callbacks run on the loop, never from inside the call that queued them.
 * Everything a result points at is valid only during its callback.
 */
#ifndef WARREN_ETCD_H
#define WARREN_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

typedef struct etcd_client etcd_client;
typedef struct etcd_req etcd_req;

typedef enum etcd_status {
    ETCD_OK = 0,
    ETCD_UNAVAILABLE, /* no endpoint answered, or the connection broke */
    ETCD_TIMEOUT,     /* the request's deadline passed */
    ETCD_PROTOCOL,    /* a malformed or too large response */
    ETCD_SERVER,      /* etcd refused: grpc_code and message say why */
    ETCD_COMPACTED,   /* a watch's start revision was compacted away */
    ETCD_LEASE_LOST,  /* a lease kept alive expired or was revoked */
} etcd_status;

const char *etcd_status_name(etcd_status s);

typedef struct etcd_limits {
    size_t max_head_bytes;     /* status line and headers of a response */
    size_t max_message_bytes;  /* one JSON message (a whole unary reply) */
    unsigned request_timeout_ms;
    unsigned max_queued;       /* unary requests waiting or in flight */
} etcd_limits;

/* 8 KiB heads, 4 MiB messages, 5 s, 1024 requests. */
etcd_limits etcd_default_limits(void);

/* A client on `base` over `endpoints` (host:port, numeric). NULL when an
 * endpoint does not parse or memory runs out. `lim` NULL: the defaults.
 * Nothing connects until the first request. */
etcd_client *etcd_client_new(struct event_base *base, const char *const *endpoints,
                             size_t n_endpoints, const etcd_limits *lim);
/* Authenticates as `user` (etcd's auth enabled): every connection then
 * first trades the name and password for a token, which its requests
 * carry; a request refused for an expired token is sent once more after a
 * new authenticate. Wrong credentials fail the requests waiting with
 * ETCD_SERVER. Call before the first request. -1: empty user or no memory.
 * Without TLS (etcd_client_set_tls) the password crosses in clear. */
int etcd_client_set_auth(etcd_client *c, const char *user, const char *password);

/* Speaks TLS to every endpoint with `ctx` (an SSL_CTX *: its CA, verify
 * mode and client certificate are the caller's; the client takes a
 * reference). Each endpoint's certificate must name its IP address.
 * Call before the first request. */
struct ssl_ctx_st;
void etcd_client_set_tls(etcd_client *c, struct ssl_ctx_st *ctx);

/* Frees the client; callbacks of requests still pending are not called.
 * Free the leases, watches and elections on it first. */
void etcd_client_free(etcd_client *c);

/* One key-value as etcd stores it. key/value point into the result. */
typedef struct etcd_kv {
    const uint8_t *key, *value;
    size_t key_len, value_len;
    int64_t create_revision; /* revision that created it (0: absent) */
    int64_t mod_revision;    /* revision of its last change */
    int64_t version;         /* changes since created (0: deleted) */
    int64_t lease;           /* lease it is attached to, 0 none */
} etcd_kv;

typedef struct etcd_result {
    etcd_status status;
    int grpc_code;           /* ETCD_SERVER: gRPC code (5 not found, ...) */
    const char *message;     /* ETCD_SERVER / ETCD_PROTOCOL, else "" */
    int64_t revision;        /* the store's revision when etcd answered */
    bool succeeded;          /* txn: the compares held (`then` ran) */
    const etcd_kv *kvs;      /* get; txn: every get op's kvs, in order */
    size_t n_kvs;
    int64_t count;           /* get: keys in range (limit aside) */
    int64_t deleted;         /* delete: keys deleted */
    int64_t lease_id, ttl;   /* lease grant / keepalive */
} etcd_result;

typedef void (*etcd_cb)(const etcd_result *r, void *arg);

/* Every request function queues the request and returns a handle, or NULL
 * (callback never called) when the queue is full or the input is invalid.
 * The callback is called exactly once unless the request is cancelled. */

/* Stops `req`'s callback from being called; a request already sent still
 * completes at etcd. `req` is invalid afterwards. */
void etcd_req_cancel(etcd_client *c, etcd_req *req);

typedef struct etcd_get_opts {
    bool prefix;                 /* every key starting with `key` */
    int64_t limit;               /* 0: no limit */
    int64_t revision;            /* 0: the newest */
    bool sort_by_create;         /* ascending create_revision (else by key) */
    int64_t max_create_revision; /* 0: none */
} etcd_get_opts;

/* Range: `key` alone, or its prefix. opts NULL: one key, newest. */
etcd_req *etcd_get(etcd_client *c, const void *key, size_t key_len, const etcd_get_opts *opts,
                   etcd_cb cb, void *arg);
/* Sets key=value, attached to `lease` (0: none). r->revision is the put's. */
etcd_req *etcd_put(etcd_client *c, const void *key, size_t key_len, const void *value,
                   size_t value_len, int64_t lease, etcd_cb cb, void *arg);
/* Deletes `key` or every key with that prefix; r->deleted counts them. */
etcd_req *etcd_delete(etcd_client *c, const void *key, size_t key_len, bool prefix, etcd_cb cb,
                      void *arg);

/* Transactions: if every compare holds, `then` runs, else `otherwise`;
 * atomically, at one revision. */
typedef enum etcd_cmp_target {
    ETCD_CMP_CREATE, /* create_revision (0: the key does not exist) */
    ETCD_CMP_MOD,    /* mod_revision */
    ETCD_CMP_VERSION,
    ETCD_CMP_VALUE,
} etcd_cmp_target;
typedef enum etcd_cmp_op { ETCD_EQUAL, ETCD_NOT_EQUAL, ETCD_GREATER, ETCD_LESS } etcd_cmp_op;

typedef struct etcd_cmp {
    etcd_cmp_target target;
    etcd_cmp_op op;
    const void *key;
    size_t key_len;
    int64_t number;     /* CREATE, MOD, VERSION */
    const void *value;  /* VALUE */
    size_t value_len;
} etcd_cmp;

typedef enum etcd_op_type { ETCD_OP_GET, ETCD_OP_PUT, ETCD_OP_DELETE } etcd_op_type;
typedef struct etcd_op {
    etcd_op_type type;
    const void *key, *value;
    size_t key_len, value_len;
    int64_t lease; /* PUT */
} etcd_op;

etcd_req *etcd_txn(etcd_client *c, const etcd_cmp *cmps, size_t n_cmps, const etcd_op *then,
                   size_t n_then, const etcd_op *otherwise, size_t n_otherwise, etcd_cb cb,
                   void *arg);

/* Compare-and-swap: puts key=value if the key's mod_revision is
 * `expected_mod` (0: only if the key does not exist). Otherwise gets the
 * key: r->succeeded false and r->kvs the current value (none if absent). */
etcd_req *etcd_cas(etcd_client *c, const void *key, size_t key_len, int64_t expected_mod,
                   const void *value, size_t value_len, int64_t lease, etcd_cb cb, void *arg);

/* Leases. A grant's r->lease_id and r->ttl (seconds, etcd may raise it to
 * its minimum). Revoke deletes every key attached to it. */
etcd_req *etcd_lease_grant(etcd_client *c, int64_t ttl_s, etcd_cb cb, void *arg);
etcd_req *etcd_lease_revoke(etcd_client *c, int64_t lease_id, etcd_cb cb, void *arg);

/* The monotonic clock the client counts in, in ms. */
uint64_t etcd_now_ms(void);

/* Keeps a lease alive: renews it every ttl/3, and calls `lost` once, with
 * ETCD_LEASE_LOST, when etcd says it is gone or when ttl has passed since
 * the send of the last renewal etcd confirmed -- or, before the first one,
 * since `granted_ms` (etcd_now_ms() read before the grant was sent). By
 * the monotonic clock the lease may be gone at etcd by then, never
 * earlier (clock rates aside): a leader stops acting on it at that moment.
 * It stops after `lost`. NULL if ttl_s is not in 1..1000000 or no memory. */
typedef struct etcd_keeper etcd_keeper;
typedef void (*etcd_lost_cb)(etcd_status why, void *arg);
etcd_keeper *etcd_keeper_start(etcd_client *c, int64_t lease_id, int64_t ttl_s,
                               uint64_t granted_ms, etcd_lost_cb lost, void *arg);
/* Whether the keeper still holds the lease by its clock (false once lost). */
bool etcd_keeper_alive(const etcd_keeper *k);
/* When (etcd_now_ms) the lease may lapse at the earliest, as things stand:
 * a leader that must stop before that (self-fencing) arms its own timer
 * at this minus a margin for clock rates and its own shutdown, and moves
 * it as renewals push this later. */
uint64_t etcd_keeper_deadline_ms(const etcd_keeper *k);
/* Stops renewing (the lease then expires at etcd unless revoked). */
void etcd_keeper_free(etcd_keeper *k);

/* Watches: the changes to `key` (or its prefix) from `start_revision` on
 * (0: from now), delivered in revision order, each revision once. When
 * the stream breaks (etcd restarts, an endpoint fails) the watch
 * reconnects -- to the next endpoint -- and resumes after the last
 * revision it delivered. If that revision has been compacted the watch
 * ends with ETCD_COMPACTED (compact_revision set): read the state anew
 * and watch from there. A response over etcd_limits (one revision's
 * events past max_message_bytes) ends it with ETCD_PROTOCOL. */
typedef enum etcd_event_type { ETCD_EVENT_PUT, ETCD_EVENT_DELETE } etcd_event_type;
typedef struct etcd_event {
    etcd_event_type type;
    etcd_kv kv; /* DELETE: key and mod_revision (the deletion's) */
} etcd_event;

typedef struct etcd_watch_result {
    etcd_status status;      /* OK: events; else the watch has ended */
    const etcd_event *events;
    size_t n_events;
    int64_t compact_revision;
} etcd_watch_result;

typedef struct etcd_watch etcd_watch;
typedef void (*etcd_watch_cb)(const etcd_watch_result *r, void *arg);
etcd_watch *etcd_watch_start(etcd_client *c, const void *key, size_t key_len, bool prefix,
                             int64_t start_revision, etcd_watch_cb cb, void *arg);
/* The revision the watch resumes from (the last delivered + 1). */
int64_t etcd_watch_next_revision(const etcd_watch *w);
void etcd_watch_free(etcd_watch *w);

/* Election, as etcd's concurrency.Election: a candidate puts
 * prefix/<lease id in hex> = value attached to its lease; the key with the
 * lowest create_revision under the prefix is the leader, and that
 * create_revision is the leadership's epoch -- it grows with every new
 * leadership, so it fences an old leader's writes. A leader stays leader
 * while its lease lives: when the lease lapses its key goes and the next
 * candidate in creation order leads.
 *
 * The election observes the prefix from its creation (watch + a
 * linearizable read of the lowest key after each change) and calls `cb`
 * whenever the leader or this candidate's role changes. */
typedef struct etcd_election etcd_election;
typedef struct etcd_election_view {
    etcd_status status;   /* not OK: a read or the campaign failed (it is
                             retried / campaign again); the rest is the
                             last view, leader NULL */
    const etcd_kv *leader; /* NULL: nobody leads */
    int64_t epoch;        /* the leader's create_revision, 0 none */
    bool is_me;           /* this candidate leads */
    bool campaigning;     /* this candidate's key exists */
} etcd_election_view;
typedef void (*etcd_election_cb)(const etcd_election_view *v, void *arg);

etcd_election *etcd_election_new(etcd_client *c, const char *prefix, etcd_election_cb cb,
                                 void *arg);
/* Puts this candidate's key (a second campaign on the same lease keeps
 * the first key and its place). Leadership is reported through `cb`; a
 * campaign that failed is reported with its status and campaigning false
 * (campaign again: if the put did land, the same lease finds its key).
 * Returns -1 if already campaigning or out of memory. */
int etcd_election_campaign(etcd_election *e, int64_t lease_id, const void *value,
                           size_t value_len);
/* Deletes this candidate's key (only the one it created). */
void etcd_election_resign(etcd_election *e);
void etcd_election_free(etcd_election *e);

#endif
