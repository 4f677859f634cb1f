/* An upstream's settings, read from its runtime parameter's JSON (the
 * management plane checked the value's shape when it was set; what does
 * not read here is refused again) with a set element's keys over them,
 * as rabbit_federation_upstream:from_upstream_or_set does, and
 * RabbitMQ's defaults. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fed_int.h"

/* The key from the set element first, then the upstream. */
static const json_t *key_of(const json_t *elem, const json_t *up, const char *key)
{
    const json_t *v = elem ? json_object_get(elem, key) : NULL;
    return v ? v : json_object_get(up, key);
}

static bool read_string(const json_t *v, char *out, size_t cap, const char *fallback)
{
    const char *s = v ? json_string_value(v) : fallback;
    if (!s || strlen(s) >= cap)
        return false;
    memcpy(out, s, strlen(s) + 1);
    return true;
}

/* A number within [min, max] (reals are truncated, as Erlang's are not;
 * RabbitMQ takes any number); `fallback` when absent. */
static bool read_number(const json_t *v, double scale, int64_t min, int64_t max, int64_t fallback,
                        int64_t *out)
{
    if (!v) {
        *out = fallback;
        return true;
    }
    if (!json_is_number(v))
        return false;
    double d = json_number_value(v) * scale;
    if (!(d >= (double)min && d <= (double)max))
        return false;
    *out = (int64_t)floor(d);
    return true;
}

static bool read_uris(const json_t *v, fed_upstream *u)
{
    const json_t *e;
    size_t i;
    if (json_is_string(v))
        return (u->uris[u->nuris++] = strdup(json_string_value(v))) != NULL;
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > FED_URIS_MAX)
        return false;
    json_array_foreach(v, i, e) {
        if (!json_is_string(e) || !(u->uris[u->nuris] = strdup(json_string_value(e))))
            return false;
        u->nuris++;
    }
    return true;
}

static bool read_ack_mode(const json_t *v, fed_ack_mode *out)
{
    const char *s = v ? json_string_value(v) : "on-confirm";
    if (!s)
        return false;
    if (strcmp(s, "on-confirm") == 0)
        *out = FED_ON_CONFIRM;
    else if (strcmp(s, "on-publish") == 0)
        *out = FED_ON_PUBLISH;
    else if (strcmp(s, "no-ack") == 0)
        *out = FED_NO_ACK;
    else
        return false;
    return true;
}

static bool read_all(const json_t *up, const json_t *el, const char *name, const char *object,
                     fed_upstream *u)
{
    char tag[FED_NAME_MAX + 32];
    int64_t prefetch, delay;
    const json_t *trust = key_of(el, up, "trust-user-id");
    snprintf(tag, sizeof tag, "federation-link-%s", name);
    if (trust && !json_is_boolean(trust))
        return false;
    u->trust_user_id = json_is_true(trust);
    return read_string(NULL, u->name, sizeof u->name, name) &&
           read_uris(key_of(el, up, "uri"), u) &&
           read_string(key_of(el, up, "exchange"), u->exchange, sizeof u->exchange, object) &&
           read_string(key_of(el, up, "queue"), u->queue, sizeof u->queue, object) &&
           read_string(key_of(el, up, "consumer-tag"), u->consumer_tag, sizeof u->consumer_tag,
                       tag) &&
           read_number(key_of(el, up, "prefetch-count"), 1, 0, 65535, 1000, &prefetch) &&
           read_number(key_of(el, up, "reconnect-delay"), 1000, 0, 86400000, 5000, &delay) &&
           read_number(key_of(el, up, "max-hops"), 1, 1, INT32_MAX, 1, &u->max_hops) &&
           read_number(key_of(el, up, "expires"), 1, 1, INT32_MAX, -1, &u->expires) &&
           read_number(key_of(el, up, "message-ttl"), 1, 0, INT32_MAX, -1, &u->message_ttl) &&
           read_ack_mode(key_of(el, up, "ack-mode"), &u->ack_mode) &&
           ((u->prefetch_count = (uint32_t)prefetch), (u->reconnect_delay_ms = (uint32_t)delay),
            true);
}

bool fed_upstream_read(const char *name, const char *value, const char *set_element,
                       const char *object, fed_upstream *out)
{
    json_t *up = json_loads(value, JSON_DECODE_ANY, NULL);
    json_t *el = set_element ? json_loads(set_element, JSON_DECODE_ANY, NULL) : NULL;
    memset(out, 0, sizeof *out);
    bool ok = json_is_object(up) && (!set_element || json_is_object(el)) &&
              read_all(up, el, name, object, out);
    if (!ok)
        fed_upstream_clear(out);
    json_decref(up);
    json_decref(el);
    return ok;
}

void fed_upstream_clear(fed_upstream *u)
{
    for (size_t i = 0; i < u->nuris; i++)
        free(u->uris[i]);
    u->nuris = 0;
}
