/* The cluster's TLS contexts (cluster.ssl.*): one to connect (etcd over
 * https, a follower to its leader) and one to accept (the leader's
 * replication listener). Both verify the peer against the cluster's CA
 * and present this node's certificate, so replication is mutual TLS; the
 * name checked on a connection is the peer's IP (a node's advertised
 * host, an etcd endpoint's address), set per connection by the caller. */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>

#include "cluster_int.h"

static SSL_CTX *fail(SSL_CTX *ctx, const char *what, const char *file)
{
    char e[256];
    ERR_error_string_n(ERR_get_error(), e, sizeof e);
    log_msg(LOG_ERROR, "cluster: TLS: %s %s: %s", what, file, e);
    SSL_CTX_free(ctx);
    return NULL;
}

SSL_CTX *cluster_tls_context(const config *cfg, bool accepting)
{
    const char *ca = cfg->cluster.ssl_cacertfile, *cert = cfg->cluster.ssl_certfile,
               *key = cfg->cluster.ssl_keyfile;
    SSL_CTX *ctx = SSL_CTX_new(accepting ? TLS_server_method() : TLS_client_method());
    if (!ctx)
        return fail(NULL, "context", "");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (!*ca)
        return fail(ctx, "cluster.ssl.cacertfile is needed", "");
    if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
        return fail(ctx, "cannot read the CA", ca);
    if (*cert && SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
        return fail(ctx, "cannot read the certificate", cert);
    if (*key && (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
                 SSL_CTX_check_private_key(ctx) != 1))
        return fail(ctx, "cannot use the key", key);
    if (accepting && (!*cert || !*key))
        return fail(ctx, "replication over TLS needs cluster.ssl.certfile and keyfile", "");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (accepting ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
                       NULL);
    return ctx;
}

SSL *cluster_tls_client(SSL_CTX *ctx, const char *peer_ip)
{
    SSL *ssl = SSL_new(ctx);
    if (ssl && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), peer_ip) != 1) {
        SSL_free(ssl);
        return NULL;
    }
    return ssl;
}
