/* etcd/'s private parts: the HTTP/1.1 response parser, the JSON codec and
 * the connection every request and watch rides on. */
#ifndef WARREN_ETCD_INT_H
#define WARREN_ETCD_INT_H

#include <jansson.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "etcd.h"

struct evbuffer;
struct bufferevent;

/* ---- response parser (resp.c) ----
 * Reads one response: a bounded head, then a body by Content-Length or
 * chunked (trailers skipped). The body is cut into messages at '\n' (a
 * gateway stream is newline-delimited JSON; a unary reply is one message
 * without one); each message is bounded. */
typedef enum resp_state { RESP_HEAD, RESP_LEN, RESP_CHUNK_SIZE, RESP_CHUNK, RESP_CHUNK_END,
                          RESP_TRAILER, RESP_DONE } resp_state;
/* RESP_STOP: a message callback returned false; the parser may be gone. */
typedef enum resp_rc { RESP_MORE, RESP_END, RESP_ERROR, RESP_STOP } resp_rc;

typedef struct resp_parser {
    resp_state state;
    int status;                /* HTTP status */
    bool chunked, close;
    uint64_t left;             /* body (LEN) or chunk bytes still to come */
    size_t max_head, max_message;
    struct evbuffer *msg;      /* the message being gathered */
    const char *error;
} resp_parser;

/* Called per complete message (NUL-terminated copy, `len` bytes);
 * returns false to stop parsing (the owner went away). */
typedef bool (*resp_msg_fn)(void *arg, const char *msg, size_t len);

int resp_init(resp_parser *p, size_t max_head, size_t max_message);
void resp_reset(resp_parser *p);
void resp_fini(resp_parser *p);
/* Consumes what it can of `in`. RESP_END once the response is complete
 * (bytes after it stay in `in`), RESP_ERROR with p->error set. */
resp_rc resp_feed(resp_parser *p, struct evbuffer *in, resp_msg_fn fn, void *arg);

/* ---- JSON codec (codec.c) ---- */
/* base64 of bytes as a JSON string; NULL on OOM. */
json_t *codec_b64(const void *data, size_t len);
/* Decodes base64 `s` into a new buffer (*out, NUL-terminated); -1 if bad. */
int codec_unb64(const char *s, size_t len, uint8_t **out, size_t *out_len);
/* An int64 field sent as a string (or a number); 0 when absent. -1 when
 * present and not an integer. */
int codec_int(const json_t *obj, const char *name, int64_t *out);
/* "range_end" for a prefix: the key with its last byte below 0xff
 * incremented and the rest cut; "\0" (everything) for none. */
json_t *codec_prefix_end(const uint8_t *key, size_t len);
/* Parses one kv object into `kv`, its bytes allocated into `arena` (a json
 * array that owns them as strings of the decoded bytes). */
int codec_kv(const json_t *o, etcd_kv *kv, json_t *arena);
/* Decodes a unary reply message into `r` (kvs allocated, freed by
 * codec_result_free). Sets ETCD_SERVER for {"error":...} bodies. */
void codec_result(const char *msg, size_t len, int http_status, etcd_result *r, json_t **keep);
void codec_result_free(etcd_result *r, json_t *keep);

/* ---- connection (conn.c) ---- */
typedef struct endpoint {
    struct sockaddr_storage addr;
    socklen_t addr_len;
    char host[64]; /* Host header */
    char ip[48];   /* the address alone: what a TLS certificate must name */
} endpoint;

/* One HTTP/1.1 connection to one endpoint with one exchange at a time. */
typedef struct econn econn;
typedef struct econn_ops {
    void (*connected)(void *arg);
    bool (*message)(void *arg, int http_status, const char *msg, size_t len);
    void (*done)(void *arg, int http_status); /* the response ended */
    /* `sent`: the connection was up, so the request may have reached etcd
     * (false: it never left, it can go to another endpoint) */
    void (*failed)(void *arg, etcd_status why, const char *text, bool sent);
} econn_ops;

econn *econn_new(etcd_client *c, const endpoint *ep, const econn_ops *ops, void *arg);
/* Sends POST path with body (a JSON text), with the auth token if any. */
int econn_send(econn *e, const char *path, const char *body, size_t len, const char *token);
void econn_free(econn *e);

struct event_base *etcd_base(etcd_client *c);
const etcd_limits *etcd_limits_of(etcd_client *c);
/* The endpoint to try next after a failure, and the backoff before it. */
const endpoint *etcd_next_endpoint(etcd_client *c, unsigned *delay_ms);
const endpoint *etcd_cur_endpoint(etcd_client *c);
void etcd_endpoint_ok(etcd_client *c);

/* Authentication (auth.c). With credentials set, every connection first
 * sends /v3/auth/authenticate and its requests carry the token it got (a
 * simple token is valid on one member only, so one per connection). */
/* The authenticate body, NULL without credentials (malloc'd). */
char *etcd_auth_body(etcd_client *c);
/* The token of an authenticate reply, malloc'd; NULL if there is none. */
char *codec_token(const char *msg, size_t len);
/* Whether a refusal says the token is no longer valid (expired, or from
 * another member): the request is sent again after a new authenticate. */
bool codec_token_refused(const etcd_result *r);

/* The client's state (client.c), shared with auth.c. Requests wait in
 * `queue` in order; the first is in flight when `inflight` is set. */
struct etcd_req {
    TAILQ_ENTRY(etcd_req) link;
    etcd_client *c;
    const char *path;
    char *body;
    struct event *deadline;
    etcd_cb cb;
    void *arg;
    bool answered, garbled; /* garbled: the reply did not decode */
    bool is_auth;           /* the client's own authenticate */
    bool auth_retried;      /* sent again once after a refused token */
    bool requeue;           /* its token was refused: send it again */
};

struct etcd_client {
    struct event_base *base;
    etcd_limits lim;
    endpoint *eps;
    size_t n_eps, cur;
    unsigned fails_in_row;
    econn *conn;
    TAILQ_HEAD(, etcd_req) queue;
    unsigned n_queued;
    etcd_req *inflight;
    struct event *retry;
    char *user, *password; /* NULL: no authentication */
    char *token;           /* the current connection's, once authenticated */
    struct ssl_ctx_st *tls; /* NULL: plain TCP */
};

/* A request with its deadline armed, not queued yet; `body` is taken. */
etcd_req *etcd_req_new(etcd_client *c, const char *path, char *body, etcd_cb cb, void *arg);
void etcd_req_free(etcd_req *r);
/* The request to send next: the queue's first, or an authenticate put
 * before it when the connection has no token yet. */
etcd_req *etcd_auth_first(etcd_client *c);
/* The authenticate's reply: keeps the token, or fails the requests
 * behind it when etcd refused the credentials. */
void etcd_auth_reply(etcd_client *c, etcd_req *r, const etcd_result *res, const char *msg,
                     size_t len);

/* Queues a unary request with a JSON body (taken). */
etcd_req *etcd_request(etcd_client *c, const char *path, json_t *body, etcd_cb cb, void *arg);

#endif
