/* Health checks as RabbitMQ 3.10 answers them: /api/health/checks/...
 * and /api/aliveness-test/{vhost}. A passing check is 200 {"status":"ok"}
 * (some add what they checked); a failing one 503 {"status":"failed",
 * "reason": ...} with RabbitMQ's details; a malformed argument 400.
 *
 * Warren is one node without TLS listeners or mirrored queues, so the
 * cluster checks (quorum-critical, mirror-sync-critical) and the
 * certificate check pass with RabbitMQ's words for that case. The alarms
 * are the resource alarms, memory and disk (admin/alarms.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mgmt_int.h"

static void status_ok(mgmt_req *r, const char *key, const char *value)
{
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "status", "ok");
    if (key)
        mgmt_json_kstr(w, key, value);
    mgmt_json_end_obj(w);
    mgmt_send(r, 200);
}

static void alarms(mgmt_req *r, const char *reason)
{
    static const struct {
        unsigned alarm;
        const char *resource;
    } resources[] = {{SERVER_ALARM_MEMORY, "memory"}, {SERVER_ALARM_DISK, "disk"}};
    unsigned on = server_alarms(r->s);
    if (!on) {
        status_ok(r, NULL, NULL);
        return;
    }
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "status", "failed");
    mgmt_json_kstr(w, "reason", reason);
    mgmt_json_key(w, "alarms");
    mgmt_json_arr(w);
    for (size_t i = 0; i < sizeof resources / sizeof resources[0]; i++) {
        if (!(on & resources[i].alarm))
            continue;
        mgmt_json_obj(w);
        mgmt_json_kstr(w, "node", server_node_name(r->s));
        mgmt_json_kstr(w, "resource", resources[i].resource);
        mgmt_json_end_obj(w);
    }
    mgmt_json_end_arr(w);
    mgmt_json_end_obj(w);
    mgmt_send(r, 503);
}

static void get_alarms(mgmt_req *r) { alarms(r, "There are alarms in effect in the cluster"); }
static void get_local_alarms(mgmt_req *r) { alarms(r, "There are alarms in effect on the node"); }

/* Warren's vhosts have no process that can die: each one that exists runs. */
static void get_vhosts_health(mgmt_req *r) { status_ok(r, NULL, NULL); }

static void get_single_node(mgmt_req *r) { status_ok(r, "reason", "single node cluster"); }

/* ---- listeners ----------------------------------------------------------------- */

typedef struct listener {
    const char *protocol;
    int port;
} listener;

#define MAX_LISTENERS 4

/* The listeners serving now: AMQP, the first AMQP over TLS one, and, when
 * bound, the management API over HTTP and HTTPS. */
static int listeners_of(mgmt_req *r, listener out[MAX_LISTENERS])
{
    int n = 0;
    const char *ip;
    out[n++] = (listener){"amqp", server_amqp_port(r->s)};
    if (server_amqps_listener_count(r->s))
        out[n++] = (listener){"amqp/ssl", server_amqps_listener(r->s, 0, &ip)};
    if (mgmt_port(r->m) > 0)
        out[n++] = (listener){"http", mgmt_port(r->m)};
    if (mgmt_https_of(r->m))
        out[n++] = (listener){"https", mgmt_https_of(r->m)->port};
    return n;
}

static void no_listener(mgmt_req *r, const char *list_key, bool ports, const char *missing,
                        long missing_port)
{
    listener ls[MAX_LISTENERS];
    int n = listeners_of(r, ls);
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "status", "failed");
    mgmt_json_kstr(w, "reason", "No active listener");
    if (ports)
        mgmt_json_kint(w, "missing", missing_port);
    else
        mgmt_json_kstr(w, "missing", missing);
    mgmt_json_key(w, list_key);
    mgmt_json_arr(w);
    for (int i = 0; i < n; i++)
        if (ports)
            mgmt_json_int(w, ls[i].port);
        else
            mgmt_json_str(w, ls[i].protocol);
    mgmt_json_end_arr(w);
    mgmt_json_end_obj(w);
    mgmt_send(r, 503);
}

static void get_port_listener(mgmt_req *r)
{
    char arg[32], *end;
    mgmt_cap_str(r, 0, arg, sizeof arg);
    errno = 0;
    long port = strtol(arg, &end, 10);
    if (!arg[0] || *end || errno || r->cap[0].len >= sizeof arg) {
        mgmt_error(r, 400, "bad_request", "Invalid port");
        return;
    }
    listener ls[MAX_LISTENERS];
    int n = listeners_of(r, ls);
    for (int i = 0; i < n; i++)
        if (ls[i].port == port) {
            mgmt_json *w = mgmt_reply(r);
            mgmt_json_obj(w);
            mgmt_json_kstr(w, "status", "ok");
            mgmt_json_kint(w, "port", port);
            mgmt_json_end_obj(w);
            mgmt_send(r, 200);
            return;
        }
    no_listener(r, "ports", true, NULL, port);
}

/* RabbitMQ's normalisation of a protocol name (its aliases for the ones
 * Warren serves; anything else is compared as given, lower-cased). */
static const char *normal_protocol(char *p)
{
    static const char *const amqp[] = {"amqp091", "amqp0.9.1", "amqp0-9-1", "amqp0_9_1",
                                       "amqp10",  "amqp1.0",   "amqp1-0",   "amqp1_0"};
    static const char *const http[] = {"management", "rabbitmq_management"};
    for (char *c = p; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    for (size_t i = 0; i < sizeof amqp / sizeof amqp[0]; i++)
        if (strcmp(p, amqp[i]) == 0)
            return "amqp";
    for (size_t i = 0; i < sizeof http / sizeof http[0]; i++)
        if (strcmp(p, http[i]) == 0)
            return "http";
    return p;
}

static void get_protocol_listener(mgmt_req *r)
{
    char arg[128];
    const char *proto = normal_protocol((char *)mgmt_cap_str(r, 0, arg, sizeof arg));
    listener ls[MAX_LISTENERS];
    int n = listeners_of(r, ls);
    for (int i = 0; i < n; i++)
        if (strcmp(ls[i].protocol, proto) == 0) {
            status_ok(r, "protocol", proto);
            return;
        }
    no_listener(r, "protocols", false, proto, 0);
}

/* No TLS listener holds a certificate, so none expires; the arguments are
 * still checked as RabbitMQ checks them. */
static void get_certificate_expiration(mgmt_req *r)
{
    static const char *const units[] = {"days", "weeks", "months", "years"};
    char within[32], unit[32], *end;
    mgmt_cap_str(r, 0, within, sizeof within);
    mgmt_cap_str(r, 1, unit, sizeof unit);
    long n = strtol(within, &end, 10);
    if (!within[0] || *end || n < 0) {
        mgmt_error(r, 400, "bad_request", "Invalid expiration value.");
        return;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(unit, units[i]) == 0) {
            status_ok(r, NULL, NULL);
            return;
        }
    mgmt_error(r, 400, "bad_request",
               "Time unit not recognised. Supported units: days, weeks, months, years.");
}

/* ---- aliveness ---------------------------------------------------------------- */

static void discard(void *arg, msg *m, bool redelivered, uint32_t remaining)
{
    (void)m, (void)redelivered, (void)remaining;
    (*(int *)arg)++;
}

/* RabbitMQ runs the test on a channel of the user's own, so the user's
 * permissions apply, an administrator's too: without any in the vhost the
 * channel does not open (401 "Access refused."); each step needs what the
 * AMQP method needs, refused with the channel's text. */
static bool aliveness_allowed(mgmt_req *r, vhost *v, amqp_bytes queue_name)
{
    static const struct {
        access_kind kind;
        const char *what, *name; /* NULL: the queue */
    } steps[] = {
        {ACCESS_CONFIGURE, "queue", NULL},
        {ACCESS_WRITE, "exchange", "amq.default"},
        {ACCESS_READ, "queue", NULL},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int p = mgmt_permission(r, v, steps[i].kind, steps[i].name ? AMQP_CSTR("") : queue_name);
        if (p < 0) {
            mgmt_error(r, 401, "not_authorised", "Access refused.");
            return false;
        }
        if (p == 0) {
            mgmt_errorf(r, 401, "not_authorised",
                        "ACCESS_REFUSED - access to %s '%s' in vhost '%s' refused for user '%s'",
                        steps[i].what, steps[i].name ? steps[i].name : "aliveness-test",
                        vhost_name(v), r->user.name);
            return false;
        }
    }
    return true;
}

/* RabbitMQ's aliveness test: declare "aliveness-test", publish, get. */
static void get_aliveness(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    amqp_bytes name = AMQP_CSTR("aliveness-test");
    if (!v || !aliveness_allowed(r, v, name))
        return;
    queue_spec spec = {.name = name};
    queue *q;
    amqp_error err = {0};
    bool routed = false;
    int got = 0;
    if (admin_queue_declare(v, &spec, &q, &err) != AMQP_OK ||
        admin_publish(v, r->user.name, AMQP_CSTR(""), name, (amqp_bytes){(const uint8_t *)"\0", 2},
                      AMQP_CSTR("test_message"), &routed, &err) != AMQP_OK ||
        admin_get(v, name, 1, ADMIN_ACK, discard, &got, &err) < 0 || got != 1) {
        mgmt_json *w = mgmt_reply(r);
        mgmt_json_obj(w);
        mgmt_json_kstr(w, "status", "failed");
        mgmt_json_kstr(w, "reason", err.text[0] ? mgmt_error_text(&err) : "no message");
        mgmt_json_end_obj(w);
        mgmt_send(r, 503);
        return;
    }
    status_ok(r, NULL, NULL);
}

const mgmt_route mgmt_health_routes[] = {
    {HTTP_GET, "/api/health/checks/alarms", TAG_MANAGEMENT, get_alarms},
    {HTTP_GET, "/api/health/checks/local-alarms", TAG_MANAGEMENT, get_local_alarms},
    {HTTP_GET, "/api/health/checks/virtual-hosts", TAG_MANAGEMENT, get_vhosts_health},
    {HTTP_GET, "/api/health/checks/port-listener/{}", TAG_MANAGEMENT, get_port_listener},
    {HTTP_GET, "/api/health/checks/protocol-listener/{}", TAG_MANAGEMENT,
     get_protocol_listener},
    {HTTP_GET, "/api/health/checks/node-is-quorum-critical", TAG_MANAGEMENT,
     get_single_node},
    {HTTP_GET, "/api/health/checks/node-is-mirror-sync-critical", TAG_MANAGEMENT,
     get_single_node},
    {HTTP_GET, "/api/health/checks/certificate-expiration/{}/{}", TAG_MANAGEMENT,
     get_certificate_expiration},
    {HTTP_GET, "/api/aliveness-test/{}", TAG_MANAGEMENT, get_aliveness},
    {0},
};
