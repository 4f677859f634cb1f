/* The configuration parser's helpers, shared by config.c and
 * config_tls.c. Each writes why a value is bad to `why`. */
#ifndef WARREN_CONFIG_INT_H
#define WARREN_CONFIG_INT_H

#include "core.h"

bool parse_uint(const char *v, uint64_t min, uint64_t max, uint64_t *out, char *why,
                size_t whylen);
bool parse_bool(const char *v, bool *out, char *why, size_t whylen);
bool copy_str(char *dst, size_t cap, const char *v, char *why, size_t whylen);
bool parse_listener(const char *v, const char *wildcard, config_listener *out, char *why,
                    size_t whylen);
bool listener_name(const char *name, char *why, size_t whylen);
bool put_listener(config_listeners *more, const config_listener *l, char *why, size_t whylen);
bool only_none(const char *v, const char *other_form, char *why, size_t n);
const char *after_prefix(const char *key, const char *prefix);
void describe_more(const char *prefix, const config_listeners *more,
                   void (*fn)(void *arg, const char *key, const char *value), void *arg);

/* A TLS or SASL key (config_tls.c): 1 set, 0 a bad value, -1 not one. */
int config_set_tls(config *c, const char *key, const char *v, char *why, size_t n);
void config_tls_defaults(config *c);
void config_describe_tls(const config *c, void (*fn)(void *arg, const char *key, const char *value),
                         void *arg);

/* The resource alarms' keys (core/config_alarms.c): their defaults; one
 * key applied (1), refused with the reason in `why` (0), or not one of
 * them (-1); and described for config_describe. */
void config_alarm_defaults(config *c);
int config_set_alarm_key(config *c, const char *key, const char *value, char *why, size_t whylen);
void config_describe_alarms(const config *c,
                            void (*fn)(void *arg, const char *key, const char *value), void *arg);

/* The stream protocol's keys (core/config_stream.c), the same way. */
void config_stream_defaults(config *c);
int config_set_stream_key(config *c, const char *key, const char *value, char *why, size_t whylen);
void config_describe_stream(const config *c,
                            void (*fn)(void *arg, const char *key, const char *value), void *arg);

/* The cluster's keys (core/config_cluster.c), the same way. */
void config_cluster_defaults(config *c);
int config_set_cluster_key(config *c, const char *key, const char *value, char *why,
                           size_t whylen);
void config_describe_cluster(const config *c,
                             void (*fn)(void *arg, const char *key, const char *value),
                             void *arg);

#endif
