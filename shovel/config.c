/* A shovel parameter's value read into a shovel_cfg, with RabbitMQ 3.10's
 * defaults (rabbit_shovel_parameters): ack-mode on-confirm,
 * src-prefetch-count 1000, src-delete-after never, reconnect-delay 5 s,
 * src-exchange-key "", and the pre-3.7 names (prefetch-count,
 * delete-after, add-forward-headers, add-timestamp-header) where the new
 * ones are absent. The management plane checked the shape already
 * (definitions/params.c); what it lets through that cannot run here -- an
 * AMQP 1.0 end -- is kept as `unsupported`, shown as the reason the shovel
 * is terminated. A list of URIs uses its first. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "shovel_int.h"

static const json_t *get2(const json_t *v, const char *key, const char *legacy)
{
    const json_t *x = json_object_get(v, key);
    return x || !legacy ? x : json_object_get(v, legacy);
}

static bool copy_str(const json_t *v, const char *key, char *out, size_t cap, bool *has)
{
    const json_t *x = json_object_get(v, key);
    if (has)
        *has = json_is_string(x);
    if (!json_is_string(x))
        return true;
    if (json_string_length(x) >= cap)
        return false;
    memcpy(out, json_string_value(x), json_string_length(x) + 1);
    return true;
}

static bool read_uri(const json_t *v, const char *key, client_uri *u, char *shown, size_t cap,
                     char *err, size_t errlen)
{
    const json_t *x = json_object_get(v, key);
    if (json_is_array(x))
        x = json_array_get(x, 0);
    if (!json_is_string(x)) {
        snprintf(err, errlen, "%s is missing", key);
        return false;
    }
    char why[256];
    if (!client_uri_parse(json_string_value(x), u, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", key, why);
        return false;
    }
    client_uri_redact(json_string_value(x), shown, cap);
    return true;
}

static void protocol(const json_t *v, const char *key, shovel_cfg *c)
{
    const json_t *x = json_object_get(v, key);
    if (x && !(json_is_string(x) && strcmp(json_string_value(x), "amqp091") == 0) &&
        !c->unsupported[0])
        snprintf(c->unsupported, sizeof c->unsupported, "%s %s is not supported (amqp091 only)",
                 key, json_is_string(x) ? json_string_value(x) : "?");
}

static bool read_modes(const json_t *v, shovel_cfg *c, char *err, size_t errlen)
{
    const char *ack = json_string_value(json_object_get(v, "ack-mode"));
    c->ack_mode = !ack || strcmp(ack, "on-confirm") == 0 ? ACK_ON_CONFIRM
                  : strcmp(ack, "on-publish") == 0   ? ACK_ON_PUBLISH
                  : strcmp(ack, "no-ack") == 0       ? ACK_NO_ACK
                                                     : -1;
    if (c->ack_mode < 0) {
        snprintf(err, errlen, "ack-mode should be one of no-ack, on-publish, on-confirm");
        return false;
    }
    const json_t *d = get2(v, "src-delete-after", "delete-after");
    c->delete_after = DELETE_NEVER;
    if (json_is_integer(d) && json_integer_value(d) >= 0)
        c->delete_after = json_integer_value(d);
    else if (json_is_string(d) && strcmp(json_string_value(d), "queue-length") == 0)
        c->delete_after = DELETE_QUEUE_LENGTH;
    else if (d && !(json_is_string(d) && strcmp(json_string_value(d), "never") == 0)) {
        snprintf(err, errlen, "src-delete-after should be never, queue-length or a count");
        return false;
    }
    const json_t *p = get2(v, "src-prefetch-count", "prefetch-count");
    double pf = p ? json_number_value(p) : 1000;
    c->prefetch = pf <= 0 ? 0 : pf > 65535 ? 65535 : (uint16_t)pf;
    const json_t *r = json_object_get(v, "reconnect-delay");
    double delay = json_is_number(r) ? json_number_value(r) : 5;
    c->reconnect_delay_ms = delay <= 0 ? 0 : delay > 86400 ? 86400000u : (uint32_t)(delay * 1000);
    c->forward_headers = json_is_true(get2(v, "dest-add-forward-headers", "add-forward-headers"));
    c->timestamp_header =
        json_is_true(get2(v, "dest-add-timestamp-header", "add-timestamp-header"));
    return true;
}

bool shovel_cfg_parse(const char *text, shovel_cfg *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    if (!json_is_object(v)) {
        snprintf(err, errlen, "not a JSON object");
        json_decref(v);
        return false;
    }
    bool ok = read_uri(v, "src-uri", &c->src, c->src_shown, sizeof c->src_shown, err, errlen) &&
              read_uri(v, "dest-uri", &c->dest, c->dest_shown, sizeof c->dest_shown, err, errlen) &&
              read_modes(v, c, err, errlen);
    bool has_key = false;
    if (ok && !(copy_str(v, "src-queue", c->src_queue, 256, &c->has_src_queue) &&
                copy_str(v, "src-exchange", c->src_exchange, 256, &c->has_src_exchange) &&
                copy_str(v, "src-exchange-key", c->src_exchange_key, 256, &has_key) &&
                copy_str(v, "dest-queue", c->dest_queue, 256, &c->has_dest_queue) &&
                copy_str(v, "dest-exchange", c->dest_exchange, 256, &c->has_dest_exchange) &&
                copy_str(v, "dest-exchange-key", c->dest_exchange_key, 256,
                         &c->has_dest_exchange_key))) {
        snprintf(err, errlen, "a queue, exchange or key longer than 255 bytes");
        ok = false;
    }
    protocol(v, "src-protocol", c);
    protocol(v, "dest-protocol", c);
    if (ok && !c->unsupported[0] && !c->has_src_queue && !c->has_src_exchange) {
        snprintf(err, errlen, "Must specify 'src-exchange' or 'src-queue'");
        ok = false;
    }
    json_decref(v);
    return ok;
}
