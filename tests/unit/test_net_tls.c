/* The TLS transport over a socketpair, against an OpenSSL client on a
 * thread (blocking): the handshake and an echo both ways, a bulk transfer
 * larger than every buffer, TLS 1.1 refused (the server end hears of it
 * with the reason), client certificates (required, verified, the names
 * EXTERNAL takes from them, the session described as RabbitMQ does),
 * session resumption, and the context's errors for bad files. The test
 * PKI is tests/tls (tests/tls/gen.sh made it). Run from the repository's
 * root, as make test does. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../net/net.h"

#define PKI "tests/tls/"

/* ---- the server end: echoes what it reads -------------------------------- */

typedef struct server_end {
    transport *t;
    int closes, error;
} server_end;

static void on_read(void *ctx)
{
    server_end *s = ctx;
    struct evbuffer *in = transport_input(s->t);
    size_t n = evbuffer_get_length(in);
    uint8_t *p = transport_reserve(s->t, n);
    assert_non_null(p);
    evbuffer_remove(in, p, n);
    transport_commit(s->t, n);
}
static void on_drained(void *ctx, size_t pending) { (void)ctx, (void)pending; }
static void on_closed(void *ctx, int error)
{
    server_end *s = ctx;
    s->closes++;
    s->error = error;
}
static const transport_handlers handlers = {on_read, on_drained, on_closed};

/* ---- the client: a thread with a blocking socket ------------------------- */

typedef struct client {
    int fd;
    int max_version;       /* 0: any */
    const char *cert, *key; /* a client certificate, or NULL */
    size_t bulk;           /* bytes to echo */
    SSL_SESSION *resume;   /* in: a session to offer; out: the one made */
    bool handshake_ok, echoed, reused;
    atomic_bool done;
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx, PKI "ca.pem", NULL);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (c->max_version) {
        SSL_CTX_set_security_level(ctx, 0);
        SSL_CTX_set_min_proto_version(ctx, TLS1_VERSION);
        SSL_CTX_set_max_proto_version(ctx, c->max_version);
    }
    if (c->cert) {
        SSL_CTX_use_certificate_file(ctx, c->cert, SSL_FILETYPE_PEM);
        SSL_CTX_use_PrivateKey_file(ctx, c->key, SSL_FILETYPE_PEM);
    }
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, c->fd);
    SSL_set_tlsext_host_name(ssl, "localhost");
    if (c->resume)
        SSL_set_session(ssl, c->resume);
    c->handshake_ok = SSL_connect(ssl) == 1;
    size_t sent = 0, got = 0, size = c->bulk ? c->bulk : 5;
    char *out = malloc(size), *back = malloc(size);
    for (size_t i = 0; i < size; i++)
        out[i] = (char)(i * 7 + i / 251);
    /* chunk by chunk, each read back before the next: no deadlock */
    while (c->handshake_ok && got < size) {
        size_t chunk = size - sent < 100000 ? size - sent : 100000, n;
        if (!SSL_write_ex(ssl, out + sent, chunk, &n))
            break;
        sent += n;
        while (got < sent && SSL_read_ex(ssl, back + got, sent - got, &n))
            got += n;
        if (got < sent)
            break;
    }
    c->echoed = c->handshake_ok && got == size && memcmp(out, back, size) == 0;
    if (c->handshake_ok) {
        /* TLS 1.3 sends its tickets after the handshake: read them in */
        c->reused = SSL_session_reused(ssl);
        if (c->resume)
            SSL_SESSION_free(c->resume);
        c->resume = SSL_get1_session(ssl);
        SSL_shutdown(ssl);
    }
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    free(out);
    free(back);
    shutdown(c->fd, SHUT_WR);
    atomic_store(&c->done, true);
    return NULL;
}

typedef struct run {
    struct event_base *base;
    transport_flusher *fl;
    server_end s;
    tls_description desc;
    bool described;
    char peer_cn[256], peer_dn[512], peer_email[256], peer_dns[256];
    char why[256];
} run;

/* One connection: the server's loop runs until the client is done. */
static void exchange(tls_context *ctx, client *c, run *r)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    memset(r, 0, sizeof *r);
    assert_non_null(r->base = event_base_new());
    assert_non_null(r->fl = transport_flusher_new(r->base));
    assert_non_null(r->s.t = transport_new_tls(r->fl, r->base, sv[0], ctx));
    transport_start(r->s.t, &handlers, &r->s);
    c->fd = sv[1];
    atomic_store(&c->done, false);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, client_main, c), 0);
    time_t until = time(NULL) + 30;
    while (!atomic_load(&c->done) && time(NULL) < until) {
        event_base_loop(r->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        if (!r->described)
            r->described = transport_tls_describe(r->s.t, &r->desc);
        if (r->described && !*r->peer_cn && r->desc.peer_cert) {
            transport_tls_peer_name(r->s.t, TLS_NAME_CN, 0, 0, r->peer_cn, sizeof r->peer_cn,
                                    r->why, sizeof r->why);
            transport_tls_peer_name(r->s.t, TLS_NAME_DN, 0, 0, r->peer_dn, sizeof r->peer_dn,
                                    r->why, sizeof r->why);
            transport_tls_peer_name(r->s.t, TLS_NAME_SAN, TLS_SAN_EMAIL, 0, r->peer_email,
                                    sizeof r->peer_email, r->why, sizeof r->why);
            transport_tls_peer_name(r->s.t, TLS_NAME_SAN, TLS_SAN_DNS, 0, r->peer_dns,
                                    sizeof r->peer_dns, r->why, sizeof r->why);
        } else if (r->described && !r->desc.peer_cert && !*r->why) {
            assert_false(transport_tls_peer_name(r->s.t, TLS_NAME_CN, 0, 0, r->peer_cn,
                                                 sizeof r->peer_cn, r->why, sizeof r->why));
        }
    }
    assert_true(atomic_load(&c->done));
    pthread_join(th, NULL);
    /* the client's end: the server hears it */
    for (int i = 0; i < 100 && !r->s.closes; i++)
        event_base_loop(r->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    close(sv[1]);
}

static void finish(run *r)
{
    transport_free(r->s.t);
    transport_flusher_free(r->fl);
    event_base_free(r->base);
}

static tls_options server_options(void)
{
    tls_options o = {.depth = -1};
    strcpy(o.certfile, PKI "server.pem");
    strcpy(o.keyfile, PKI "server.key");
    strcpy(o.cacertfile, PKI "ca.pem");
    return o;
}

static tls_context *context(const tls_options *o)
{
    char err[300] = "";
    tls_context *ctx = tls_context_new(o, err, sizeof err);
    if (!ctx)
        fail_msg("%s", err);
    return ctx;
}

static void test_handshake_and_echo(void **state)
{
    (void)state;
    tls_options o = server_options();
    tls_context *ctx = context(&o);
    client c = {0};
    run r;
    exchange(ctx, &c, &r);
    assert_true(c.handshake_ok);
    assert_true(c.echoed);
    assert_true(r.described);
    assert_string_equal(r.desc.protocol, "tlsv1.3");
    assert_string_equal(r.desc.cipher, "aes_256_gcm");
    assert_string_equal(r.desc.key_exchange, "any");
    assert_string_equal(r.desc.hash, "aead");
    assert_false(r.desc.peer_cert);
    assert_string_equal(r.why, "connection peer presented no TLS (x.509) certificate");
    assert_int_equal(r.s.closes, 1);
    assert_int_equal(r.s.error, 0); /* close_notify: an orderly end */
    assert_true(transport_is_tls(r.s.t));
    finish(&r);
    /* the session again: resumed */
    client again = {.resume = c.resume};
    exchange(ctx, &again, &r);
    assert_true(again.echoed);
    assert_true(again.reused);
    SSL_SESSION_free(again.resume);
    finish(&r);
    tls_context_free(ctx);
}

static void test_bulk_transfer(void **state)
{
    (void)state;
    tls_options o = server_options();
    tls_context *ctx = context(&o);
    client c = {.bulk = 8u << 20, .max_version = TLS1_2_VERSION};
    run r;
    exchange(ctx, &c, &r);
    assert_true(c.echoed);
    assert_string_equal(r.desc.protocol, "tlsv1.2");
    assert_string_equal(r.desc.key_exchange, "ecdhe_rsa");
    uint64_t io[4];
    transport_io_counts(r.s.t, io);
    assert_int_equal(io[0], 8u << 20);
    assert_int_equal(io[1], 8u << 20);
    SSL_SESSION_free(c.resume);
    finish(&r);
    tls_context_free(ctx);
}

static void test_tls_1_1_refused(void **state)
{
    (void)state;
    tls_options o = server_options();
    tls_context *ctx = context(&o);
    client c = {.max_version = TLS1_1_VERSION};
    run r;
    exchange(ctx, &c, &r);
    assert_false(c.handshake_ok);
    assert_false(r.described);
    assert_int_equal(r.s.closes, 1);
    assert_int_equal(r.s.error, EPROTO);
    assert_non_null(strstr(transport_tls_error(r.s.t), "protocol"));
    finish(&r);
    tls_context_free(ctx);
}

static void test_client_certificate(void **state)
{
    (void)state;
    tls_options o = server_options();
    o.verify_peer = o.fail_if_no_peer_cert = true;
    tls_context *ctx = context(&o);
    client none = {0};
    run r;
    exchange(ctx, &none, &r);
    assert_false(none.echoed); /* TLS 1.3: refused after the client's Finished */
    assert_int_equal(r.s.error, EPROTO);
    SSL_SESSION_free(none.resume); /* the client's side finished first */
    finish(&r);
    client untrusted = {.cert = PKI "other_client.pem", .key = PKI "other_client.key"};
    exchange(ctx, &untrusted, &r);
    assert_false(untrusted.echoed);
    SSL_SESSION_free(untrusted.resume);
    finish(&r);
    client c = {.cert = PKI "client.pem", .key = PKI "client.key"};
    exchange(ctx, &c, &r);
    assert_true(c.echoed);
    assert_true(r.desc.peer_cert);
    assert_string_equal(r.desc.peer_subject, "CN=warren-client,O=Warren Tests,C=GB");
    assert_string_equal(r.desc.peer_issuer, "CN=Warren Test CA,O=Warren Tests");
    /* not after 2049: a GeneralizedTime, written as RabbitMQ 3.10 does */
    assert_int_equal(strlen(r.desc.peer_validity),
                     strlen("2026-12-06T19:59:18Z - {generalTime,\"21261112195918Z\"}"));
    assert_non_null(strstr(r.desc.peer_validity, "Z - {generalTime,\"2126"));
    assert_string_equal(r.peer_cn, "warren-client");
    assert_string_equal(r.peer_dn, "CN=warren-client,O=Warren Tests,C=GB");
    assert_string_equal(r.peer_email, "client@example.com");
    assert_string_equal(r.peer_dns, "client.example");
    SSL_SESSION_free(c.resume);
    finish(&r);
    tls_context_free(ctx);
}

/* Each bad setting: no context, and the reason names the file. */
static void expect_refused(const tls_options *o, const char *words)
{
    char err[300] = "";
    tls_context *ctx = tls_context_new(o, err, sizeof err);
    assert_null(ctx);
    if (!strstr(err, words))
        fail_msg("'%s' does not say '%s'", err, words);
}

static void test_bad_files(void **state)
{
    (void)state;
    tls_options o = server_options();
    strcpy(o.certfile, PKI "missing.pem");
    expect_refused(&o, "certfile " PKI "missing.pem: No such file");
    o = server_options();
    strcpy(o.keyfile, PKI "server2.key");
    expect_refused(&o, "keyfile " PKI "server2.key");
    o = server_options();
    strcpy(o.keyfile, PKI "server_enc.key");
    expect_refused(&o, "keyfile " PKI "server_enc.key");
    strcpy(o.password, "wrong");
    expect_refused(&o, "keyfile");
    strcpy(o.password, "warren");
    tls_context_free(context(&o));
    o = server_options();
    strcpy(o.cacertfile, PKI "gen.sh");
    expect_refused(&o, "cacertfile");
    o = server_options();
    strcpy(o.ciphers, "NO-SUCH-CIPHER");
    expect_refused(&o, "ciphers");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_and_echo),
        cmocka_unit_test(test_bulk_transfer),
        cmocka_unit_test(test_tls_1_1_refused),
        cmocka_unit_test(test_client_certificate),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
