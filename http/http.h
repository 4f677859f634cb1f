/* http: a small HTTP/1.1 server on libevent bufferevents, for the
 * management plane (the API, the console, /metrics, the control socket).
 *
 * Built for clients that may be hostile. Each request is decided on its
 * head, before any byte of its body is read: the `admit` callback sees the
 * method, target and headers (credentials, Content-Type, Origin,
 * Content-Length) and either lets the body in or replies at once -- then
 * the body is never read and the connection closes after the reply. A body
 * is read only up to the limit, and only while the server's budget for
 * bodies in flight has room (past it the connection waits unread). Every
 * connection has a deadline for its request head, one for its body and an
 * idle limit between requests; a reply the client does not read is
 * dropped after the idle limit. At most `max_connections` are open: a new
 * one evicts the oldest connection still waiting for a request head, or
 * waits in the kernel's backlog when none is.
 *
 * One request at a time per connection (pipelined requests wait, their
 * bytes bounded by the head limit). A reply is whole (Content-Length) or
 * streamed (chunked), with a callback when the client has read what was
 * sent so far, so a big reply is built only as fast as it is read.
 *
 * The server never logs; it counts (http_server_stats). Everything runs on
 * the event base it was created on.
 */
#ifndef WARREN_HTTP_H
#define WARREN_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct event_base;
struct evbuffer;

typedef struct http_server http_server;
typedef struct http_req http_req;

typedef enum http_method {
    HTTP_GET, HTTP_HEAD, HTTP_POST, HTTP_PUT, HTTP_DELETE, HTTP_OPTIONS, HTTP_PATCH,
    HTTP_OTHER /* any other token: handlers answer 405 */
} http_method;

typedef struct http_limits {
    unsigned max_connections;   /* open at once (evicting, then waiting) */
    size_t max_head_bytes;      /* request line and headers */
    size_t max_body_bytes;      /* one request's body */
    size_t body_budget_bytes;   /* all bodies being read at once */
    unsigned head_timeout_ms;   /* first byte (or accept) -> head complete */
    unsigned body_timeout_ms;   /* head complete -> body complete */
    unsigned idle_timeout_ms;   /* between requests; a reply not being read */
} http_limits;

/* The limits a management listener starts from. */
http_limits http_default_limits(void);

typedef struct http_callbacks {
    /* The head is complete. Return true to read the body (then `handle`
     * is called); false after replying (the body is not read). */
    bool (*admit)(http_req *req, void *arg);
    /* The whole request is in: reply now, or keep `req` and reply later
     * (a stream). */
    void (*handle)(http_req *req, void *arg);
} http_callbacks;

/* NULL on OOM. Serves nothing until a listener is added. */
http_server *http_server_new(struct event_base *base, const http_limits *lim,
                             const http_callbacks *cb, void *arg);
/* Closes every connection (a stream's abort callback runs) and listener. */
void http_server_free(http_server *s);

/* Listens on fd (bound, not yet listening; the server owns it from here).
 * False (errno set) when it cannot; the fd is then closed. */
bool http_server_listen_fd(http_server *s, int fd);
/* Binds ip:port (port 0: a free one; IPv6 literals without brackets) and
 * listens. The bound port in *bound. False (errno set) on failure. */
bool http_server_listen(http_server *s, const char *ip, int port, int *bound);

/* http_server_listen over TLS: `ssl_ctx` (an OpenSSL SSL_CTX *, a
 * reference taken) makes each connection's session; the handshake counts
 * towards head_timeout_ms. */
bool http_server_listen_tls(http_server *s, const char *ip, int port, int *bound, void *ssl_ctx);
/* New connections of every TLS listener use `ssl_ctx` from now on (a
 * certificate reload); open ones keep theirs. */
void http_server_set_tls(http_server *s, void *ssl_ctx);

typedef struct http_server_stats {
    uint64_t accepted, evicted;
    uint64_t refused;         /* closed at accept: full, none to evict */
    uint64_t head_timeouts, body_timeouts, idle_timeouts;
    uint64_t bad_requests;    /* malformed heads, answered 400/431/501 */
    uint64_t requests;        /* heads admitted or refused by admit */
    unsigned open, waiting_for_budget;
    size_t body_bytes;        /* in bodies being read now */
} http_server_stats;
http_server_stats http_server_stats_of(const http_server *s);

/* ---- the request --------------------------------------------------------- */

http_method http_req_method(const http_req *r);
const char *http_req_method_name(const http_req *r);
/* The target as sent ("/api/queues?page=1"), its path part (not decoded)
 * and its query after '?' (NULL when none). */
const char *http_req_target(const http_req *r);
const char *http_req_path(const http_req *r);
const char *http_req_query(const http_req *r);
/* A header's value (name compared case-insensitively; the first of
 * repeated ones), NULL when absent. Valid until the request is freed. */
const char *http_req_header(const http_req *r, const char *name);
/* The declared body length; -1 with chunked transfer coding, 0 when none. */
int64_t http_req_content_length(const http_req *r);
bool http_req_has_body(const http_req *r);
/* The body, complete when `handle` runs (empty in `admit`). */
struct evbuffer *http_req_body(http_req *r);
/* The peer's address (AF_UNIX for the control socket) and socket. */
const struct sockaddr *http_req_peer(const http_req *r);
int http_req_fd(const http_req *r);
/* A pointer the caller keeps with the request. */
void http_req_set_data(http_req *r, void *data);
void *http_req_data(const http_req *r);

/* ---- the reply ------------------------------------------------------------ */

/* Adds a reply header (copied; one with CR or LF is dropped).
 * Content-Length, Transfer-Encoding, Date and Connection are the
 * server's. */
void http_reply_header(http_req *r, const char *name, const char *value);
/* The whole reply; `body` (NULL = empty) is drained into the output. The
 * request is freed: do not use it afterwards. A HEAD request gets the
 * headers with the body's Content-Length and no body. */
void http_reply(http_req *r, int status, const char *reason, struct evbuffer *body);

/* A streamed reply: start, any number of chunks, end (which frees the
 * request). */
void http_reply_start(http_req *r, int status, const char *reason);
/* Sends what `data` holds as one chunk (drained). With `drained`, it is
 * called once the client has read everything sent so far. */
void http_reply_chunk(http_req *r, struct evbuffer *data,
                      void (*drained)(http_req *r, void *arg), void *arg);
void http_reply_end(http_req *r);
/* Called (then the request is freed) when the request ends before its
 * reply does: the client went away or did not read for idle_timeout, or
 * (set in `admit`) the server refused its body -- over the limit,
 * malformed chunks, not in before body_timeout. */
void http_req_on_abort(http_req *r, void (*abort)(http_req *r, void *arg), void *arg);

#endif
