/* net: the byte streams client connections run over -- TCP, TLS over TCP
 * (OpenSSL) and an in-memory pipe for tests -- each with an input and an output buffer
 * whose output is written once at the end of the loop turn.
 *
 * A transport is a generic part (transport.c: the buffers, the output
 * staging block, the end-of-turn flusher, the byte counts) over a table of
 * operations that moves the bytes (tcp.c, pipe.c). The table is called
 * once per read and once per write batch, never per frame. The transport's
 * owner hears about input, drained output and a vanished peer through its
 * handlers. The module logs nothing: errors reach the owner as errno
 * values. Everything runs on one event loop thread.
 */
#ifndef WARREN_NET_H
#define WARREN_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct evbuffer;
struct sockaddr;
struct sockaddr_storage;

typedef struct transport transport;
/* The end-of-turn writer shared by the transports of one loop. */
typedef struct transport_flusher transport_flusher;

/* What an implementation does; `impl` is its state. The generic part
 * calls watch_read and watch_write only when what it wants changes. */
typedef struct transport_ops {
    /* Moves the bytes that have arrived into `in`: how many, 0 when none
     * are there yet, -1 when the peer is gone, errno saying why (0 for an
     * orderly end, ENOMEM when there is no room for them). */
    ssize_t (*read)(void *impl, struct evbuffer *in);
    /* Sends what it can of `out` (TCP: one writev) and drains what went:
     * how many bytes, 0 when none could go now, -1 (errno set) when the
     * peer is gone. */
    ssize_t (*write)(void *impl, struct evbuffer *out);
    /* Whether to report readiness (transport_ready). */
    void (*watch_read)(void *impl, bool on);
    void (*watch_write)(void *impl, bool on);
    /* Bytes taken from `out` that are not on the wire yet (a TLS layer's
     * records); NULL for an implementation that never holds any. */
    size_t (*pending)(const void *impl);
    /* The peer's address, or ours when `local`; false when it has none. */
    bool (*address)(const void *impl, bool local, struct sockaddr_storage *out);
    /* Ends the stream (a socket is closed); impl's memory is the transport's. */
    void (*close)(void *impl);
    /* The OpenSSL session (an SSL *) of a TLS stream; NULL for the others. */
    void *(*tls_session)(const void *impl);
    /* Whether `write` sends file segments of `out` itself (TCP: sendfile),
     * so transport_write_file may queue them. */
    bool sends_files;
} transport_ops;

typedef struct transport_handlers {
    void (*on_read)(void *ctx);                    /* new bytes in transport_input */
    void (*on_drained)(void *ctx, size_t pending); /* a write happened; bytes left */
    /* The peer is gone: `error` is 0 when it ended the stream, else an
     * errno (ENOMEM: no memory for its input). Output is dropped and
     * nothing more is read; the owner frees the transport. */
    void (*on_closed)(void *ctx, int error);
} transport_handlers;

/* NULL when out of memory. Free it after every transport that uses it. */
transport_flusher *transport_flusher_new(struct event_base *base);
void transport_flusher_free(transport_flusher *fl);

/* A transport with `impl_size` zeroed bytes for its implementation's state
 * in the same allocation (one per connection), at transport_impl(t);
 * ops->close releases what that state holds, not its memory. NULL when
 * out of memory. Nothing is read before transport_start. */
transport *transport_new(transport_flusher *fl, const transport_ops *ops, size_t impl_size);
void *transport_impl(transport *t);
/* The callback of an implementation's readiness events (libevent's), with
 * the transport as their argument: EV_READ reads, EV_WRITE writes. */
void transport_ready(int fd, short what, void *t);

/* A connected TCP socket, made non-blocking. Takes over fd (closed by
 * transport_free); NULL on failure, fd untouched. */
transport *transport_new_tcp(transport_flusher *fl, struct event_base *base, int fd);
/* Two connected in-memory ends: what one writes is the other's input in
 * the same loop, up to `capacity` bytes unread (0: no limit; past it the
 * writer's output waits as a full socket's does). Freeing one end is an
 * orderly end for the other. They have no address. False when out of
 * memory. */
bool transport_pipe_pair(transport_flusher *fl, struct event_base *base, size_t capacity,
                         transport *ends[2]);

/* Starts reading; from now on `h` hears about it with `ctx`. */
void transport_start(transport *t, const transport_handlers *h, void *ctx);
/* Closes it, dropping unsent output. */
void transport_free(transport *t);
struct evbuffer *transport_input(transport *t);
/* The peer's address, or ours when `local`; false when it has none. */
bool transport_address(const transport *t, bool local, struct sockaddr_storage *out);
/* Output. reserve: room for n contiguous bytes (NULL on OOM), valid until
 * the next output call; commit: n of them were written. write: copies.
 * write_reference: appends memory that stays owned by the caller until
 * cleanup runs (also when it is dropped). Each queues the end-of-turn
 * write. */
uint8_t *transport_reserve(transport *t, size_t n);
void transport_commit(transport *t, size_t n);
void transport_write(transport *t, const void *p, size_t n);
void transport_write_reference(transport *t, const void *p, size_t n,
                               void (*cleanup)(const void *data, size_t len, void *arg),
                               void *arg);
/* Appends `len` bytes of file `fd` from `offset`, sent from the file
 * (sendfile) without passing through memory, when the transport can (plain
 * TCP); fd is duplicated, so the caller may close its own at once. False
 * when it cannot (TLS, pipes) or dup fails: the caller sends the bytes
 * itself. */
bool transport_write_file(transport *t, int fd, off_t offset, size_t len);
/* Whether transport_write_file can be used on t at all. */
bool transport_sends_files(const transport *t);
/* Queues the output for the end-of-turn write. */
void transport_flush_later(transport *t);
/* Output bytes not written yet. */
size_t transport_pending(const transport *t);
void transport_pause_reading(transport *t, bool paused);
/* Drops unsent output and stops reading (the peer is gone or too slow). */
void transport_abort(transport *t);
/* Bytes read, bytes written, reads and writes so far (statistics). */
void transport_io_counts(const transport *t, uint64_t out[4]);

/* ---- TLS ---------------------------------------------------------------- */

/* Protocol versions a TLS listener accepts (tls_options.versions). */
enum { TLS_V1 = 1, TLS_V1_1 = 2, TLS_V1_2 = 4, TLS_V1_3 = 8 };

/* A TLS listener's settings, RabbitMQ's ssl_options.* keys. */
typedef struct tls_options {
    char certfile[512], keyfile[512], cacertfile[512]; /* PEM; cacertfile "" = none */
    char password[128];       /* of an encrypted keyfile; "" = none */
    bool verify_peer;         /* verify = verify_peer (else verify_none: no cert asked) */
    bool fail_if_no_peer_cert;
    int depth;                /* of the client's chain; -1: OpenSSL's default */
    unsigned versions;        /* TLS_V* bits; 0: TLS 1.2 and 1.3 */
    char ciphers[2048];       /* OpenSSL names, ':'-joined (TLS_* are 1.3 suites); "" = default */
    bool honor_cipher_order;
} tls_options;

/* A server side TLS context: what new handshakes use. Each stream holds
 * its own reference, so freeing (or replacing) a context leaves the
 * streams made from it working. Session resumption (a session cache and
 * tickets) is on. */
typedef struct tls_context tls_context;
/* NULL with the reason in `err` ("certfile /x: No such file ...") when a
 * file cannot be read or the settings do not fit together. */
tls_context *tls_context_new(const tls_options *o, char *err, size_t errlen);
void tls_context_free(tls_context *c);
/* Its OpenSSL SSL_CTX *, for servers that run TLS themselves (HTTP). */
void *tls_context_ssl_ctx(tls_context *c);

/* A TLS server stream over a connected TCP socket: the handshake happens
 * as the client's first bytes arrive. Takes over fd as transport_new_tcp.
 * Whole output blocks are encrypted at the end-of-turn write (records of
 * 16 KiB), and reads take what the socket has, as TCP's do. */
transport *transport_new_tls(transport_flusher *fl, struct event_base *base, int fd,
                             tls_context *ctx);
/* The client side (client/'s amqps:// links): a context whose streams check
 * the server's certificate against `cacertfile` (and its name against the
 * server name) when `verify_peer`, and present `certfile` / `keyfile` when
 * given; versions and ciphers as above. NULL with the reason in err. */
tls_context *tls_client_context_new(const tls_options *o, char *err, size_t errlen);
/* A TLS client stream over a TCP socket (connected): the handshake starts
 * with the first write. `server_name` is sent as SNI and, with
 * verify_peer, checked against the certificate; NULL or "": none. Takes
 * over fd as transport_new_tcp. */
transport *transport_new_tls_client(transport_flusher *fl, struct event_base *base, int fd,
                                    tls_context *ctx, const char *server_name);
/* Why the last TLS stream error happened (a failed handshake): text for a
 * log, "" when none or not TLS. */
const char *transport_tls_error(const transport *t);

/* A TLS stream's session as RabbitMQ's management API shows it. */
typedef struct tls_description {
    char protocol[16];     /* "tlsv1.3", "tlsv1.2" */
    char cipher[32];       /* Erlang's names: "aes_256_gcm" */
    char key_exchange[24]; /* "ecdhe_rsa"; "any" for TLS 1.3 */
    char hash[16];         /* the MAC: "aead", "sha384" */
    bool peer_cert;        /* the fields below are "" without one */
    char peer_subject[512], peer_issuer[512]; /* RFC 4514 as rabbit_cert_info writes it */
    char peer_validity[80]; /* "2026-12-06T19:59:18Z - 2036-12-04T19:59:18Z" */
} tls_description;
/* False for a stream that is not TLS or has not finished its handshake. */
bool transport_tls_describe(const transport *t, tls_description *out);
bool transport_is_tls(const transport *t);

/* Where SASL EXTERNAL takes the user name from (ssl_cert_login_from). */
typedef enum tls_name_from { TLS_NAME_CN, TLS_NAME_DN, TLS_NAME_SAN } tls_name_from;
typedef enum tls_san_type {
    TLS_SAN_DNS, TLS_SAN_IP, TLS_SAN_EMAIL, TLS_SAN_URI, TLS_SAN_OTHER_NAME
} tls_san_type;
/* The user name in a verified client certificate, as RabbitMQ's
 * rabbit_auth_mechanism_ssl takes it; false with the reason in `why`
 * (RabbitMQ's words) when there is none. */
bool transport_tls_peer_name(const transport *t, tls_name_from from, tls_san_type san,
                             unsigned san_index, char *out, size_t outlen, char *why,
                             size_t whylen);

#endif
