/* TLS transports: OpenSSL over a connected TCP socket.
 *
 * Reads: OpenSSL reads the socket itself (a socket BIO with read-ahead, so
 * a few large recv calls rather than two per record), and SSL_read fills
 * the input buffer until the socket has nothing more, up to READ_CHUNK
 * per readiness event, as TCP's readv does. Writes: the records go to one
 * end of a BIO pair, a ring of PAIR_SIZE bytes; the end-of-turn write
 * encrypts the output buffer's blocks (SSL_write over up to 64 KiB at a
 * time, small chains gathered to a record's size first so a frame is never
 * a record of its own) and writes the ring's bytes to the socket. What the
 * ring holds is `pending`: bytes taken from the output, not on the wire.
 * A full ring (socket full) stops SSL_write with WANT_WRITE, retried with
 * the same bytes when the socket drains.
 *
 * A server stream's handshake runs inside the first SSL_read (the server
 * speaks only after the client); a client stream's (client/'s amqps://)
 * starts with its first write, whose hello goes out while the write waits
 * for the handshake's input, and goes on in the reads. The generic part's wishes (read, write) and
 * OpenSSL's (a write that needs the handshake's input, a read whose
 * records wait for the socket) decide together which events are on; the
 * readiness callback runs whichever was waiting. Renegotiation is
 * refused (TLS 1.3 has none). Kernel TLS is not used: it needs OpenSSL
 * to write the socket itself, and this design writes it from the ring.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_int.h"

#define READ_CHUNK (128 * 1024)
#define PAIR_SIZE (128 * 1024)
#define RECORD (16 * 1024)
#define WRITE_CHUNK (64 * 1024)
#define WRITE_BUDGET (1024 * 1024) /* encrypted per write call at most */

struct tls_context {
    SSL_CTX *ctx;
};

typedef struct tls {
    int fd;
    SSL *ssl;
    BIO *net; /* our end of the pair: what OpenSSL wrote for the socket */
    struct event *rev, *wev;
    size_t retry_len;      /* an SSL_write to repeat with these bytes */
    bool owner_read, owner_write;
    bool rev_on, wev_on;   /* whether the events are added */
    bool write_wants_read; /* SSL_write waits for handshake input */
    bool read_wants_write; /* SSL_read waits for the ring to drain */
    bool eof;              /* close_notify seen after data returned */
    char error[200];
} tls;

/* ---- the context ---------------------------------------------------------- */

static void ssl_error(char *err, size_t errlen, const char *what, const char *file)
{
    unsigned long e = ERR_get_error();
    char text[256] = "unknown error";
    if (e)
        ERR_error_string_n(e, text, sizeof text);
    if (ERR_GET_LIB(e) == ERR_LIB_SYS)
        snprintf(text, sizeof text, "%s", strerror(ERR_GET_REASON(e)));
    ERR_clear_error();
    snprintf(err, errlen, "%s%s%s: %s", what, file ? " " : "", file ? file : "", text);
}

static int password_cb(char *buf, int size, int rwflag, void *arg)
{
    (void)rwflag;
    size_t n = strlen(arg);
    if (n >= (size_t)size)
        return 0;
    memcpy(buf, arg, n);
    return (int)n;
}

static int lowest(unsigned v)
{
    return v & TLS_V1 ? TLS1_VERSION : v & TLS_V1_1 ? TLS1_1_VERSION
         : v & TLS_V1_2 ? TLS1_2_VERSION : TLS1_3_VERSION;
}

static int highest(unsigned v)
{
    return v & TLS_V1_3 ? TLS1_3_VERSION : v & TLS_V1_2 ? TLS1_2_VERSION
         : v & TLS_V1_1 ? TLS1_1_VERSION : TLS1_VERSION;
}

/* ciphers: TLS 1.3 suites (TLS_*) and the older ones are set apart. */
static bool set_ciphers(SSL_CTX *ctx, const char *list, char *err, size_t errlen)
{
    char old[2048] = "", v13[1024] = "", copy[2048];
    snprintf(copy, sizeof copy, "%s", list);
    for (char *save, *name = strtok_r(copy, ":", &save); name; name = strtok_r(NULL, ":", &save)) {
        char *dst = strncmp(name, "TLS_", 4) == 0 ? v13 : old;
        size_t cap = dst == v13 ? sizeof v13 : sizeof old, used = strlen(dst);
        snprintf(dst + used, cap - used, "%s%s", used ? ":" : "", name);
    }
    if ((*old && !SSL_CTX_set_cipher_list(ctx, old)) ||
        (*v13 && !SSL_CTX_set_ciphersuites(ctx, v13))) {
        ssl_error(err, errlen, "ciphers", NULL);
        return false;
    }
    if (!*old) /* only 1.3 suites named: no older one either */
        SSL_CTX_set_cipher_list(ctx, "");
    if (!*v13)
        SSL_CTX_set_ciphersuites(ctx, "");
    return true;
}

static bool load_files(SSL_CTX *ctx, const tls_options *o, char *err, size_t errlen)
{
    const char *key = *o->keyfile ? o->keyfile : o->certfile;
    SSL_CTX_set_default_passwd_cb(ctx, password_cb);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, (void *)o->password);
    bool ok = true;
    if (!*o->certfile) {
        snprintf(err, errlen, "no certfile given");
        ok = false;
    } else if (SSL_CTX_use_certificate_chain_file(ctx, o->certfile) != 1) {
        ssl_error(err, errlen, "certfile", o->certfile);
        ok = false;
    } else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        ssl_error(err, errlen, "keyfile", key);
        ok = false;
    } else if (SSL_CTX_check_private_key(ctx) != 1) {
        ssl_error(err, errlen, "keyfile", key);
        ok = false;
    }
    SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL); /* o may go */
    if (!ok || !*o->cacertfile)
        return ok;
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(o->cacertfile);
    if (!names || SSL_CTX_load_verify_locations(ctx, o->cacertfile, NULL) != 1) {
        if (names)
            sk_X509_NAME_pop_free(names, X509_NAME_free);
        ssl_error(err, errlen, "cacertfile", o->cacertfile);
        return false;
    }
    SSL_CTX_set_client_CA_list(ctx, names);
    return true;
}

tls_context *tls_context_new(const tls_options *o, char *err, size_t errlen)
{
    ERR_clear_error();
    tls_context *c = calloc(1, sizeof *c);
    SSL_CTX *ctx = c ? SSL_CTX_new(TLS_server_method()) : NULL;
    if (!ctx) {
        free(c);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->ctx = ctx;
    unsigned v = o->versions ? o->versions : TLS_V1_2 | TLS_V1_3;
    if (v & (TLS_V1 | TLS_V1_1)) /* OpenSSL's default level refuses them */
        SSL_CTX_set_security_level(ctx, 0);
    SSL_CTX_set_min_proto_version(ctx, lowest(v));
    SSL_CTX_set_max_proto_version(ctx, highest(v));
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF |
                                 (o->honor_cipher_order ? SSL_OP_CIPHER_SERVER_PREFERENCE : 0));
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"warren", 6);
    int mode = SSL_VERIFY_NONE;
    if (o->verify_peer)
        mode = SSL_VERIFY_PEER | (o->fail_if_no_peer_cert ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0);
    SSL_CTX_set_verify(ctx, mode, NULL);
    if (o->depth >= 0)
        SSL_CTX_set_verify_depth(ctx, o->depth);
    if (!load_files(ctx, o, err, errlen) ||
        (*o->ciphers && !set_ciphers(ctx, o->ciphers, err, errlen))) {
        tls_context_free(c);
        return NULL;
    }
    return c;
}

tls_context *tls_client_context_new(const tls_options *o, char *err, size_t errlen)
{
    ERR_clear_error();
    tls_context *c = calloc(1, sizeof *c);
    SSL_CTX *ctx = c ? SSL_CTX_new(TLS_client_method()) : NULL;
    if (!ctx) {
        free(c);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->ctx = ctx;
    unsigned v = o->versions ? o->versions : TLS_V1_2 | TLS_V1_3;
    SSL_CTX_set_min_proto_version(ctx, lowest(v));
    SSL_CTX_set_max_proto_version(ctx, highest(v));
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_verify(ctx, o->verify_peer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    if (o->depth >= 0)
        SSL_CTX_set_verify_depth(ctx, o->depth);
    bool ok = true;
    if (*o->cacertfile && SSL_CTX_load_verify_locations(ctx, o->cacertfile, NULL) != 1) {
        ssl_error(err, errlen, "cacertfile", o->cacertfile);
        ok = false;
    } else if (o->verify_peer && !*o->cacertfile && SSL_CTX_set_default_verify_paths(ctx) != 1) {
        ssl_error(err, errlen, "cacertfile", "(the system's)");
        ok = false;
    } else if (*o->certfile && !load_files(ctx, o, err, errlen)) {
        ok = false;
    } else if (*o->ciphers && !set_ciphers(ctx, o->ciphers, err, errlen)) {
        ok = false;
    }
    if (!ok) {
        tls_context_free(c);
        return NULL;
    }
    return c;
}

void tls_context_free(tls_context *c)
{
    if (!c)
        return;
    SSL_CTX_free(c->ctx); /* streams made from it hold their own reference */
    free(c);
}

void *tls_context_ssl_ctx(tls_context *c) { return c->ctx; }

/* ---- the stream ----------------------------------------------------------- */

static bool would_block(void) { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR; }

static void watch(struct event *ev, bool *added, bool on)
{
    if (on == *added)
        return;
    *added = on;
    if (on)
        event_add(ev, NULL);
    else
        event_del(ev);
}

/* The events follow what both the owner and OpenSSL wait for. */
static void update_events(tls *k)
{
    watch(k->rev, &k->rev_on, k->owner_read || k->write_wants_read);
    watch(k->wev, &k->wev_on, k->owner_write || k->read_wants_write || BIO_ctrl_pending(k->net) > 0);
}

/* Writes what the ring holds to the socket: 1 when it is empty, 0 when the
 * socket is full first, -1 (errno) when the peer is gone. */
static int flush_ring(tls *k)
{
    for (int i = 0; i < 64; i++) {
        char *p;
        int n = BIO_nread0(k->net, &p);
        if (n <= 0)
            return 1;
        ssize_t w = send(k->fd, p, (size_t)n, MSG_NOSIGNAL);
        if (w < 0)
            return would_block() ? 0 : -1;
        BIO_nread(k->net, &p, (int)w);
        if (w < n)
            return 0;
    }
    return 0;
}

/* An SSL call failed with `r`: records why, sets errno. */
static void failed(tls *k, int r)
{
    int e = errno;
    unsigned long code = ERR_peek_error();
    if (r == SSL_ERROR_SSL && code) {
        char text[160];
        ERR_error_string_n(code, text, sizeof text);
        snprintf(k->error, sizeof k->error, "TLS error: %s", text);
        errno = EPROTO;
    } else if (r == SSL_ERROR_SYSCALL) {
        errno = e ? e : ECONNRESET;
    } else {
        errno = EPROTO;
    }
    ERR_clear_error();
    flush_ring(k); /* an alert, if OpenSSL made one */
}

static ssize_t tls_read(void *impl, struct evbuffer *in)
{
    tls *k = impl;
    if (k->eof) {
        errno = 0;
        return -1;
    }
    struct evbuffer_iovec v[2];
    int nv = evbuffer_reserve_space(in, READ_CHUNK, v, 2);
    if (nv < 1) {
        errno = ENOMEM;
        return -1;
    }
    size_t got[2] = {0, 0}, total = 0;
    int r = SSL_ERROR_NONE;
    for (int i = 0, spins = 0; i < nv && spins < 256; spins++) {
        size_t n = 0;
        ERR_clear_error();
        if (SSL_read_ex(k->ssl, (char *)v[i].iov_base + got[i], v[i].iov_len - got[i], &n)) {
            got[i] += n, total += n;
            if (got[i] == v[i].iov_len)
                i++;
            continue;
        }
        r = SSL_get_error(k->ssl, 0);
        if (r == SSL_ERROR_WANT_WRITE) { /* the ring is full: drain it and go on */
            int f = flush_ring(k);
            if (f > 0)
                continue;
            if (f == 0)
                k->read_wants_write = true;
            else
                r = SSL_ERROR_SYSCALL;
        }
        break;
    }
    for (int i = 0; i < nv; i++)
        v[i].iov_len = got[i];
    evbuffer_commit_space(in, v, nv);
    bool end = r == SSL_ERROR_ZERO_RETURN;
    bool bad = r != SSL_ERROR_NONE && r != SSL_ERROR_WANT_READ && r != SSL_ERROR_WANT_WRITE && !end;
    if (bad) {
        failed(k, r);
        return -1;
    }
    if (flush_ring(k) < 0) /* the handshake's replies, session tickets */
        return -1;
    if (k->write_wants_read && SSL_is_init_finished(k->ssl)) {
        k->write_wants_read = false;
        event_active(k->wev, EV_WRITE, 0); /* the output that waited */
    }
    update_events(k);
    if (end && total == 0) {
        errno = 0;
        return -1;
    }
    k->eof = end;
    /* records already decrypted, or more to come than one call takes:
     * the socket will not say so, so come back next turn */
    if (end || (r == SSL_ERROR_NONE && SSL_has_pending(k->ssl)))
        event_active(k->rev, EV_READ, 0);
    return (ssize_t)total;
}

/* The next bytes of `out` to encrypt: a retried write's, or up to
 * WRITE_CHUNK, gathered to a record's worth when the first chain is short. */
static const void *next_plain(tls *k, struct evbuffer *out, size_t *len)
{
    size_t have = evbuffer_get_length(out);
    struct evbuffer_iovec v;
    if (k->retry_len) {
        *len = k->retry_len;
        return evbuffer_pullup(out, (ssize_t)k->retry_len);
    }
    evbuffer_peek(out, -1, NULL, &v, 1);
    if (v.iov_len < RECORD && have > v.iov_len) {
        *len = have < RECORD ? have : RECORD;
        return evbuffer_pullup(out, (ssize_t)*len);
    }
    *len = v.iov_len < WRITE_CHUNK ? v.iov_len : WRITE_CHUNK;
    return v.iov_base;
}

static ssize_t tls_write(void *impl, struct evbuffer *out)
{
    tls *k = impl;
    size_t taken = 0;
    int f = flush_ring(k);
    while (f > 0 && !k->write_wants_read && evbuffer_get_length(out) && taken < WRITE_BUDGET) {
        size_t len, n = 0;
        const void *p = next_plain(k, out, &len);
        if (!p) {
            errno = ENOMEM;
            return -1;
        }
        ERR_clear_error();
        if (SSL_write_ex(k->ssl, p, len, &n)) {
            k->retry_len = 0;
            evbuffer_drain(out, n);
            taken += n;
            if (BIO_ctrl_pending(k->net) >= PAIR_SIZE / 2)
                f = flush_ring(k);
            continue;
        }
        int r = SSL_get_error(k->ssl, 0);
        k->retry_len = len;
        if (r == SSL_ERROR_WANT_WRITE) {
            f = flush_ring(k);
        } else if (r == SSL_ERROR_WANT_READ) {
            k->write_wants_read = true; /* the handshake is not done */
        } else {
            failed(k, r);
            return -1;
        }
    }
    if (f >= 0)
        f = flush_ring(k);
    if (f < 0)
        return -1;
    if (k->read_wants_write && BIO_ctrl_pending(k->net) == 0) {
        k->read_wants_write = false;
        event_active(k->rev, EV_READ, 0);
    }
    update_events(k);
    return (ssize_t)taken;
}

static void tls_watch_read(void *impl, bool on)
{
    tls *k = impl;
    k->owner_read = on;
    update_events(k);
    if (on && SSL_has_pending(k->ssl))
        event_active(k->rev, EV_READ, 0);
}

static void tls_watch_write(void *impl, bool on)
{
    tls *k = impl;
    k->owner_write = on;
    update_events(k);
}

static size_t tls_pending(const void *impl) { return BIO_ctrl_pending(((const tls *)impl)->net); }

static bool tls_address(const void *impl, bool local, struct sockaddr_storage *out)
{
    return net_socket_address(((const tls *)impl)->fd, local, out);
}

static void tls_close(void *impl)
{
    tls *k = impl;
    if (k->ssl) {
        if (SSL_is_init_finished(k->ssl)) { /* close_notify, if the socket takes it */
            SSL_shutdown(k->ssl);
            flush_ring(k);
        }
        SSL_free(k->ssl); /* and its BIOs */
    }
    if (k->net)
        BIO_free(k->net);
    net_socket_close(k->rev, k->wev, k->fd);
    ERR_clear_error();
}

static void *tls_session(const void *impl) { return ((const tls *)impl)->ssl; }

static const transport_ops tls_ops = {
    .read = tls_read,
    .write = tls_write,
    .watch_read = tls_watch_read,
    .watch_write = tls_watch_write,
    .pending = tls_pending,
    .address = tls_address,
    .close = tls_close,
    .tls_session = tls_session,
};

/* Readiness: a read OpenSSL parked for want of room runs on writability,
 * a write parked for handshake input on readability. */
static void tls_ready(evutil_socket_t fd, short what, void *arg)
{
    tls *k = transport_impl(arg);
    if (what & EV_WRITE) {
        if (k->read_wants_write && flush_ring(k) != 0) {
            k->read_wants_write = false;
            transport_ready(fd, EV_READ, arg);
        } else {
            transport_ready(fd, EV_WRITE, arg);
        }
    }
    if (what & EV_READ)
        transport_ready(fd, EV_READ, arg);
}

/* A server stream (the handshake waits for the client's hello), or a
 * client one (its first write sends the hello) naming `server_name`. */
static transport *new_stream(transport_flusher *fl, struct event_base *base, int fd,
                             tls_context *ctx, bool client, const char *server_name)
{
    transport *t = transport_new(fl, &tls_ops, sizeof(tls));
    if (!t)
        return NULL;
    tls *k = transport_impl(t);
    k->fd = fd;
    BIO *sock = BIO_new_socket(fd, BIO_NOCLOSE), *inner = NULL;
    k->ssl = SSL_new(ctx->ctx);
    bool ok = sock && k->ssl && BIO_new_bio_pair(&inner, PAIR_SIZE, &k->net, PAIR_SIZE);
    if (ok && client && server_name && *server_name) {
        /* an address is checked as one and sent as no SNI (RFC 6066) */
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(k->ssl), server_name) != 1)
            ok = SSL_set_tlsext_host_name(k->ssl, server_name) == 1 &&
                 SSL_set1_host(k->ssl, server_name) == 1;
    }
    if (ok) {
        SSL_set_bio(k->ssl, sock, inner); /* SSL owns both now */
        sock = NULL;
        if (client)
            SSL_set_connect_state(k->ssl);
        else
            SSL_set_accept_state(k->ssl);
    }
    k->rev = event_new(base, fd, EV_READ | EV_PERSIST, tls_ready, t);
    k->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, tls_ready, t);
    if (!ok || !k->rev || !k->wev) {
        BIO_free(sock);
        k->fd = -1; /* the caller still owns fd on failure */
        transport_free(t);
        return NULL;
    }
    evutil_make_socket_nonblocking(fd);
    return t;
}

transport *transport_new_tls(transport_flusher *fl, struct event_base *base, int fd,
                             tls_context *ctx)
{
    return new_stream(fl, base, fd, ctx, false, NULL);
}

transport *transport_new_tls_client(transport_flusher *fl, struct event_base *base, int fd,
                                    tls_context *ctx, const char *server_name)
{
    return new_stream(fl, base, fd, ctx, true, server_name);
}

const char *transport_tls_error(const transport *t)
{
    return transport_is_tls(t) ? ((const tls *)transport_impl((transport *)t))->error : "";
}
