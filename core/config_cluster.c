/* The cluster's keys: cluster.etcd.endpoints.<n> (RabbitMQ's list style,
 * as cluster_formation.etcd.endpoints.<n>), cluster.name,
 * cluster.node_name, cluster.advertised_host, cluster.replication.port,
 * cluster.min_isr, cluster.lease_ttl (s), cluster.isr_timeout (s, may
 * have a fraction), cluster.etcd.username / .password, cluster.ssl.
 * cacertfile / certfile / keyfile and cluster.replication.ssl. A node is
 * in a cluster when it has an endpoint. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

void config_cluster_defaults(config *c)
{
    strcpy(c->cluster.name, "warren");
    c->cluster.replication_port = 5680;
    c->cluster.min_isr = 2;
    c->cluster.lease_ttl_s = 3;
    c->cluster.isr_timeout_ms = 5000;
}

static bool set_endpoint(config *c, const char *n, const char *v, char *why, size_t whylen)
{
    uint64_t i;
    if (!parse_uint(n, 1, CONFIG_MAX_ETCD, &i, why, whylen))
        return false;
    if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) {
        snprintf(why, whylen, "expected http://ip:port or https://ip:port");
        return false;
    }
    if (!copy_str(c->cluster.endpoints[i - 1], sizeof c->cluster.endpoints[0], v, why, whylen))
        return false;
    if (i > c->cluster.n_endpoints)
        c->cluster.n_endpoints = (unsigned)i;
    return true;
}

/* Seconds with an optional fraction, e.g. "1.5", into milliseconds. */
static bool parse_seconds_ms(const char *v, unsigned *ms, char *why, size_t whylen)
{
    char *end;
    double s = strtod(v, &end);
    if (end == v || *end || !(s >= 0.1 && s <= 3600)) {
        snprintf(why, whylen, "expected seconds from 0.1 to 3600");
        return false;
    }
    *ms = (unsigned)(s * 1000 + 0.5);
    return true;
}

int config_set_cluster_key(config *c, const char *key, const char *v, char *why, size_t n)
{
    const char *rest = after_prefix(key, "cluster.");
    uint64_t u;
    if (!rest)
        return -1;
    const char *i = after_prefix(rest, "etcd.endpoints.");
    if (i)
        return set_endpoint(c, i, v, why, n);
    if ((strcmp(rest, "name") == 0 || strcmp(rest, "node_name") == 0) && !*v) {
        snprintf(why, n, "a name cannot be empty");
        return 0;
    }
    if (strcmp(rest, "name") == 0)
        return copy_str(c->cluster.name, sizeof c->cluster.name, v, why, n);
    if (strcmp(rest, "node_name") == 0)
        return copy_str(c->cluster.node_name, sizeof c->cluster.node_name, v, why, n);
    if (strcmp(rest, "advertised_host") == 0)
        return copy_str(c->cluster.advertised_host, sizeof c->cluster.advertised_host, v, why, n);
    if (strcmp(rest, "etcd.username") == 0)
        return copy_str(c->cluster.etcd_user, sizeof c->cluster.etcd_user, v, why, n);
    if (strcmp(rest, "etcd.password") == 0)
        return copy_str(c->cluster.etcd_password, sizeof c->cluster.etcd_password, v, why, n);
    if (strcmp(rest, "replication.port") == 0) {
        if (!parse_uint(v, 1, 65535, &u, why, n))
            return 0;
        c->cluster.replication_port = (int)u;
        return 1;
    }
    if (strcmp(rest, "min_isr") == 0) {
        if (!parse_uint(v, 1, 9, &u, why, n))
            return 0;
        c->cluster.min_isr = (unsigned)u;
        return 1;
    }
    if (strcmp(rest, "lease_ttl") == 0) {
        if (!parse_uint(v, 2, 600, &u, why, n))
            return 0;
        c->cluster.lease_ttl_s = (unsigned)u;
        return 1;
    }
    if (strcmp(rest, "isr_timeout") == 0)
        return parse_seconds_ms(v, &c->cluster.isr_timeout_ms, why, n);
    if (strcmp(rest, "ssl.cacertfile") == 0)
        return copy_str(c->cluster.ssl_cacertfile, sizeof c->cluster.ssl_cacertfile, v, why, n);
    if (strcmp(rest, "ssl.certfile") == 0)
        return copy_str(c->cluster.ssl_certfile, sizeof c->cluster.ssl_certfile, v, why, n);
    if (strcmp(rest, "ssl.keyfile") == 0)
        return copy_str(c->cluster.ssl_keyfile, sizeof c->cluster.ssl_keyfile, v, why, n);
    if (strcmp(rest, "replication.ssl") == 0)
        return parse_bool(v, &c->cluster.replication_ssl, why, n);
    return -1;
}

void config_describe_cluster(const config *c,
                             void (*fn)(void *arg, const char *key, const char *value), void *arg)
{
    char b[48];
    if (!c->cluster.n_endpoints)
        return;
    for (unsigned i = 0; i < c->cluster.n_endpoints; i++) {
        snprintf(b, sizeof b, "cluster.etcd.endpoints.%u", i + 1);
        if (*c->cluster.endpoints[i])
            fn(arg, b, c->cluster.endpoints[i]);
    }
    fn(arg, "cluster.name", c->cluster.name);
    fn(arg, "cluster.node_name", c->cluster.node_name);
    fn(arg, "cluster.advertised_host", c->cluster.advertised_host);
    snprintf(b, sizeof b, "%d", c->cluster.replication_port);
    fn(arg, "cluster.replication.port", b);
    snprintf(b, sizeof b, "%u", c->cluster.min_isr);
    fn(arg, "cluster.min_isr", b);
    snprintf(b, sizeof b, "%u", c->cluster.lease_ttl_s);
    fn(arg, "cluster.lease_ttl", b);
    snprintf(b, sizeof b, "%.3g", c->cluster.isr_timeout_ms / 1000.0);
    fn(arg, "cluster.isr_timeout", b);
    if (*c->cluster.etcd_user)
        fn(arg, "cluster.etcd.username", c->cluster.etcd_user);
    if (*c->cluster.ssl_cacertfile)
        fn(arg, "cluster.ssl.cacertfile", c->cluster.ssl_cacertfile);
    if (*c->cluster.ssl_certfile)
        fn(arg, "cluster.ssl.certfile", c->cluster.ssl_certfile);
    if (*c->cluster.ssl_keyfile)
        fn(arg, "cluster.ssl.keyfile", c->cluster.ssl_keyfile);
    fn(arg, "cluster.replication.ssl", c->cluster.replication_ssl ? "true" : "false");
}
