/* client's private parts: the connection and channel structs shared by
 * client.c (lifecycle, I/O, timers), proto.c (frames, handshake) and
 * chan.c (channels, calls, publishing, content assembly). */
#ifndef WARREN_CLIENT_INT_H
#define WARREN_CLIENT_INT_H

#include "client.h"

struct event;
struct evbuffer;
struct evdns_base;
struct evdns_getaddrinfo_request;

/* connection states, in order:
 * RESOLVING -> CONNECTING -> WAIT_START -> WAIT_TUNE -> WAIT_OPEN_OK -> OPEN
 *   -> CLOSING (our connection.close sent) -> DEAD (`closed` reported) */
enum { C_RESOLVING, C_CONNECTING, C_WAIT_START, C_WAIT_TUNE, C_WAIT_OPEN_OK, C_OPEN, C_CLOSING,
       C_DEAD };

/* channel states */
enum { CH_FREE, CH_OPENING, CH_OPEN, CH_CLOSING };

/* what the channel is assembling */
enum { CONTENT_NONE, CONTENT_DELIVER, CONTENT_RETURN, CONTENT_SKIP };

typedef struct cchan {
    uint8_t state;
    bool confirms;       /* confirm.select-ok seen */
    uint64_t next_seq;   /* the next publish's sequence number */
    /* synchronous calls: encoded method frames waiting for the one in flight */
    struct evbuffer *calls;
    bool call_in_flight;
    /* the message being assembled */
    uint8_t content;
    client_message m;
    uint8_t exchange[256], routing_key[256], tag[256], text[256];
    uint8_t *props, *body;
    size_t props_cap, body_cap;
    uint64_t body_size, body_have;
    size_t props_len;
    bool header_seen;
    bool body_sliced; /* body points at a frame payload (one frame, no copy) */
} cchan;

struct client {
    struct event_base *base;
    transport_flusher *fl;
    transport *t;
    client_handlers h;
    void *ctx;
    client_uri uri;
    client_options o;
    int state;
    int fd;                      /* while connecting; then the transport's */
    struct event *conn_ev;       /* connect readiness */
    struct event *timer;         /* 1 s: timeouts and heartbeats */
    struct event *kick;          /* deferred work: reports, resumed input, free */
    struct evdns_base *dns;
    struct evdns_getaddrinfo_request *dns_req;
    uint64_t deadline_ms;        /* connect/handshake or close-ok deadline */
    uint64_t last_in_ms, last_out_ms, seen_in, seen_out;
    uint32_t frame_max;
    uint16_t channel_max, heartbeat;
    int depth;                   /* handler calls on the stack */
    bool free_pending, paused, want_writable, report_pending, why_set;
    client_error why;            /* kept from the first error */
    char product[64], version[64];
    char name[128]; /* connection_name, "" for none */
    cchan *ch[CLIENT_MAX_CHANNELS + 1];
};

/* client.c */
uint64_t client_now_ms(void);
/* Ends the connection with `kind`/`code`/text: the reason is kept (the
 * first one wins), output is flushed where possible, and `closed` is heard
 * from the loop. */
void client_fail(client *c, client_error_kind kind, uint16_t code, uint32_t method_id,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* A protocol error of the server's: connection.close(code, text) is sent
 * and the close-ok awaited (bounded), then `closed` with CLIENT_ERR_CLIENT_CLOSE. */
void client_protocol_error(client *c, uint16_t code, uint32_t method_id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Whether c is still usable after a handler returned. */
static inline bool client_live(const client *c) { return c->state != C_DEAD && !c->free_pending; }

/* proto.c */
/* A method frame on `ch` into buf: its length, 0 when it does not fit. */
size_t client_encode_method(uint16_t ch, const amqp_method *m, uint8_t *buf, size_t cap);
void client_send_method(client *c, uint16_t ch, const amqp_method *m);
void client_send_header(client *c);
/* Handles the frames in the input; stops when paused or dead. */
void client_process_input(client *c);

/* chan.c */
void client_chan_method(client *c, uint16_t ch, const amqp_method *m);
void client_chan_header(client *c, uint16_t ch, const amqp_frame *f);
void client_chan_body(client *c, uint16_t ch, const amqp_frame *f);
void client_chans_free(client *c);

#endif
