/* Private to http/: the server, connection and request structures shared
 * by server.c (connections, limits, reading), reply.c (writing) and
 * parse.c (request heads). */
#ifndef WARREN_HTTP_INT_H
#define WARREN_HTTP_INT_H

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "http.h"

#define HTTP_MAX_HEADERS 100

typedef struct http_header {
    const char *name, *value; /* into the request's head copy */
} http_header;

/* A parsed request head. parse.c fills it from a copy of the head bytes,
 * which it cuts into NUL-terminated strings in place. */
typedef struct http_head {
    http_method method;
    const char *method_name, *target, *path, *query;
    int minor_version; /* HTTP/1.x */
    http_header headers[HTTP_MAX_HEADERS];
    int nheaders;
    int64_t content_length; /* -1 chunked */
    bool keep_alive;
    bool expect_continue;
} http_head;

/* Parses `len` bytes of a head (request line and header lines, each ending
 * in CRLF or LF, the blank line excluded). `buf` has room for 2 * len + 2
 * bytes: a NUL goes at buf[len] and the target's path part after it.
 * 0 on success, else the HTTP status to refuse it with (400, 417, 431, 501,
 * 505) and *why a short reason. */
int http_parse_head(char *buf, size_t len, http_head *h, const char **why);

typedef enum conn_state {
    CONN_HEAD,     /* waiting for (the rest of) a request head */
    CONN_BUDGET,   /* admitted, waiting for room in the body budget */
    CONN_BODY,     /* reading the body */
    CONN_HANDLING, /* the handler has the request; reply not ended */
    CONN_CLOSING,  /* last reply queued: close once written */
    CONN_LINGER,   /* written, write side shut: discarding input briefly */
} conn_state;

typedef struct http_conn http_conn;

struct http_req {
    http_conn *c;
    char *head_buf;
    http_head h;
    struct evbuffer *body;
    size_t reserved;        /* body budget held */
    int64_t chunk_left;     /* chunked: bytes left in this chunk, -1 at a size line */
    bool chunk_trailer;     /* chunked: reading the trailer */
    bool body_complete;     /* the whole body was read */
    bool replying, streaming;
    struct evbuffer *reply_headers; /* "Name: value\r\n" lines */
    void (*drained)(http_req *, void *);
    void *drained_arg;
    void (*abort)(http_req *, void *);
    void *abort_arg;
    void *data;
};

struct http_conn {
    http_server *srv;
    struct bufferevent *bev;
    int fd;
    struct sockaddr_storage peer;
    conn_state state;
    http_req *req;
    struct event *timer;
    size_t scanned;         /* head bytes already searched for the blank line */
    bool head_started;      /* a byte of the next head arrived */
    bool tls_handshaking; /* an HTTPS connection before its handshake is done */
    bool keep_alive;        /* the current reply leaves the connection open */
    bool peer_eof;          /* the client shut its side: close after the reply */
    TAILQ_ENTRY(http_conn) link;   /* all connections, oldest first */
    TAILQ_ENTRY(http_conn) waiting; /* CONN_BUDGET, first come first served */
};

TAILQ_HEAD(conn_list, http_conn);

struct http_server {
    struct event_base *base;
    http_limits lim;
    http_callbacks cb;
    void *arg;
    struct evconnlistener **listeners;
    void **tls; /* per listener: the SSL_CTX * of an HTTPS one (a reference), or NULL */
    size_t nlisteners;
    bool listeners_paused;
    struct conn_list conns, budget_wait;
    http_server_stats st;
};

/* server.c: the reply's last byte is queued; the connection goes on to the
 * next request or closes. Frees r. */
void http_conn_reply_done(http_req *r);
/* server.c: the request is finished with, its body budget returned. */
void http_req_free(http_req *r);

#endif
