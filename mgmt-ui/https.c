/* The HTTPS listeners of the management API and Prometheus
 * (management.ssl.*, prometheus.ssl.*, RabbitMQ's keys): one more listener
 * of the same HTTP server, so its limits (connections, head and body
 * timeouts -- the TLS handshake counts towards the head's) hold over TLS
 * too. A certificate reload makes the context again from the files; when
 * that fails the listener keeps the one it has.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mgmt_int.h"

static bool reload(void *arg, char *err, size_t errlen)
{
    mgmt_https *t = arg;
    char why[500];
    tls_context *ctx = tls_context_new(&t->cfg->tls, why, sizeof why);
    if (!ctx) {
        snprintf(err, errlen, "%s.ssl: %s", t->what, why);
        log_msg(LOG_ERROR, "reloading certificates: %s; the %s TLS listener keeps the previous "
                "ones", err, t->what);
        return false;
    }
    http_server_set_tls(t->http, tls_context_ssl_ctx(ctx));
    tls_context_free(ctx); /* the HTTP server holds its own reference */
    log_msg(LOG_INFO, "reloaded the certificates of the %s TLS listener", t->what);
    return true;
}

bool mgmt_https_listen(mgmt_https *t, server *s, http_server *h, const config_tls_http *c,
                       const char *what)
{
    char err[500], shown[64];
    const char *ip = *c->ip ? c->ip : "0.0.0.0";
    int bound;
    if (!c->on)
        return true;
    *t = (mgmt_https){.http = h, .cfg = c, .what = what};
    tls_context *ctx = tls_context_new(&c->tls, err, sizeof err);
    if (!ctx) {
        log_msg(LOG_ERROR, "%s.ssl: %s", what, err);
        return false;
    }
    bool ok = http_server_listen_tls(h, ip, c->port, &bound, tls_context_ssl_ctx(ctx));
    int e = errno;
    tls_context_free(ctx);
    if (!ok) {
        log_msg(LOG_ERROR, "%s over TLS: cannot listen on %s:%d: %s", what, ip, c->port,
                strerror(e));
        return false;
    }
    t->port = bound;
    snprintf(shown, sizeof shown, strchr(ip, ':') ? "[%s]" : "%s", ip);
    log_msg(LOG_INFO, "%s over TLS listening on %s:%d", what, shown, bound);
    server_add_reloader(s, reload, t);
    return true;
}
