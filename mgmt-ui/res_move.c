/* /api/queues/{vhost}/{name}/move: moving a queue's messages elsewhere (DLQ
 * redrive, queue/queue.h's queue_move_*). A Warren extension; RabbitMQ needs a
 * shovel for it.
 *
 *   POST   {"dest-queue": q} | {"dest-exchange": x[, "dest-routing-key": k]}
 *          | {} (back to the queue each message died in, from x-death),
 *          with optional "count" (0 = all ready now), "rate" (msg/s) and
 *          "match-header" [+ "match-value"] (only messages with that header):
 *          202 and the move's progress; 404 unknown queue, exchange or
 *          destination; 400 bad body or destination = source; 409 running.
 *   GET    the running or last move's progress and report; 404 if none.
 *   DELETE cancels the running move: 204; 404 if none runs.
 * Permissions, as the AMQP way would need them: read on the source queue
 * (basic.get), write on the destination exchange -- the default exchange
 * ("") for a queue destination or back to the source, as RabbitMQ checks a
 * publish straight to a queue -- else 401 "Access refused.". */
#include <stdio.h>
#include <string.h>

#include "mgmt_int.h"

#define DEFAULT_RATE 1000
#define MAX_RATE 1000000

static const char *const state_names[] = {"running", "finished", "cancelled", "stopped"};
static const char *const target_names[] = {"source", "queue", "exchange"};
static const char *const skip_names[MOVE_SKIPS] = {"no_source", "unroutable",
                                                   "destination_full", "no_match"};

static void report_row(void *arg, amqp_bytes qname, uint64_t n)
{
    mgmt_json *w = arg;
    mgmt_json_obj(w);
    if (qname.len)
        mgmt_json_kbytes(w, "queue", qname);
    else
        mgmt_json_knull(w, "queue"); /* beyond the report's table */
    mgmt_json_kuint(w, "count", n);
    mgmt_json_end_obj(w);
}

static void time_field(mgmt_json *w, const char *key, uint64_t ms)
{
    char buf[32];
    if (!ms) {
        mgmt_json_knull(w, key);
        return;
    }
    mgmt_format_time(ms, buf, sizeof buf);
    mgmt_json_kstr(w, key, buf);
}

static void send_progress(mgmt_req *r, vhost *v, const move_progress *p, int status)
{
    mgmt_json *w = mgmt_reply(r);
    uint64_t skipped = 0;
    mgmt_json_obj(w);
    mgmt_json_kbytes(w, "queue", r->cap[1]);
    mgmt_json_kstr(w, "vhost", vhost_name(v));
    mgmt_json_kstr(w, "state", state_names[p->state]);
    mgmt_json_kstr(w, "reason", p->reason);
    mgmt_json_key(w, "destination");
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "type", target_names[p->to]);
    if (p->to != MOVE_TO_SOURCE)
        mgmt_json_kbytes(w, "name", p->dest);
    if (p->has_routing_key)
        mgmt_json_kbytes(w, "routing_key", p->routing_key);
    mgmt_json_end_obj(w);
    if (p->match_header.len) {
        mgmt_json_key(w, "match");
        mgmt_json_obj(w);
        mgmt_json_kbytes(w, "header", p->match_header);
        if (p->has_match_value)
            mgmt_json_kbytes(w, "value", p->match_value);
        mgmt_json_end_obj(w);
    }
    mgmt_json_kuint(w, "rate", p->rate);
    mgmt_json_kuint(w, "total", p->total);
    mgmt_json_kuint(w, "moved", p->moved);
    mgmt_json_key(w, "skipped");
    mgmt_json_obj(w);
    for (int i = 0; i < MOVE_SKIPS; i++) {
        mgmt_json_kuint(w, skip_names[i], p->skipped[i]);
        skipped += p->skipped[i];
    }
    mgmt_json_end_obj(w);
    mgmt_json_kuint(w, "remaining", p->state == MOVE_RUNNING ? p->total - p->moved - skipped : 0);
    mgmt_json_key(w, "moved_to");
    mgmt_json_arr(w);
    queue_move_report(v, r->cap[1], report_row, w);
    mgmt_json_end_arr(w);
    time_field(w, "started_at", p->started_at);
    time_field(w, "finished_at", p->finished_at);
    mgmt_json_end_obj(w);
    mgmt_send(r, status);
}

void mgmt_move_summary(mgmt_json *w, vhost *v, amqp_bytes qname)
{
    move_progress p;
    if (!queue_move_progress(v, qname, &p)) {
        mgmt_json_knull(w, "redrive");
        return;
    }
    uint64_t skipped = 0;
    for (int i = 0; i < MOVE_SKIPS; i++)
        skipped += p.skipped[i];
    mgmt_json_key(w, "redrive");
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "state", state_names[p.state]);
    mgmt_json_kuint(w, "total", p.total);
    mgmt_json_kuint(w, "moved", p.moved);
    mgmt_json_kuint(w, "skipped", skipped);
    mgmt_json_kuint(w, "remaining", p.state == MOVE_RUNNING ? p.total - p.moved - skipped : 0);
    mgmt_json_end_obj(w);
}

/* A string field: absent leaves *out empty and *has false. */
static bool str_field(mgmt_req *r, json_t *body, const char *key, amqp_bytes *out, bool *has)
{
    json_t *f = json_object_get(body, key);
    *has = f != NULL;
    if (!f)
        return true;
    if (!json_is_string(f)) {
        mgmt_bad_value(r, "not_string", f, NULL);
        return false;
    }
    *out = (amqp_bytes){(const uint8_t *)json_string_value(f), (uint32_t)json_string_length(f)};
    return true;
}

static bool int_field(mgmt_req *r, json_t *body, const char *key, json_int_t lo, json_int_t hi,
                      json_int_t dflt, json_int_t *out)
{
    json_t *f = json_object_get(body, key);
    *out = dflt;
    if (!f)
        return true;
    if (!json_is_integer(f) || json_integer_value(f) < lo || json_integer_value(f) > hi) {
        mgmt_errorf(r, 400, "bad_request", "%s must be an integer from %lld to %lld", key,
                    (long long)lo, (long long)hi);
        return false;
    }
    *out = json_integer_value(f);
    return true;
}

/* "match-value": a string, or a number or boolean compared as its text. */
static bool match_value(mgmt_req *r, json_t *body, move_spec *spec, char *text, size_t cap)
{
    json_t *f = json_object_get(body, "match-value");
    spec->has_match_value = f != NULL;
    if (!f)
        return true;
    if (json_is_integer(f))
        snprintf(text, cap, "%lld", (long long)json_integer_value(f));
    else if (json_is_boolean(f))
        snprintf(text, cap, "%s", json_is_true(f) ? "true" : "false");
    else if (!json_is_string(f)) {
        mgmt_bad_value(r, "not_string", f, NULL);
        return false;
    }
    spec->match_value = json_is_string(f) ? (amqp_bytes){(const uint8_t *)json_string_value(f),
                                                         (uint32_t)json_string_length(f)}
                                          : AMQP_CSTR(text);
    return true;
}

/* Fills `spec` from the body (a number match-value spelled into `text`);
 * false when a 400 was sent. */
static bool parse_spec(mgmt_req *r, json_t *body, move_spec *spec, char *text, size_t cap)
{
    static const char *const known[] = {"dest-queue",   "dest-exchange", "dest-routing-key",
                                        "count",        "rate",          "match-header",
                                        "match-value"};
    const char *key;
    json_t *val;
    json_object_foreach(body, key, val) {
        size_t i = 0;
        while (i < sizeof known / sizeof *known && strcmp(key, known[i]) != 0)
            i++;
        if (i == sizeof known / sizeof *known) {
            mgmt_errorf(r, 400, "bad_request", "unknown field '%s'", key);
            return false;
        }
    }
    bool has_q, has_x, has_header;
    amqp_bytes dq = {0}, dx = {0};
    json_int_t count, rate;
    if (!str_field(r, body, "dest-queue", &dq, &has_q) ||
        !str_field(r, body, "dest-exchange", &dx, &has_x) ||
        !str_field(r, body, "dest-routing-key", &spec->routing_key, &spec->has_routing_key) ||
        !str_field(r, body, "match-header", &spec->match_header, &has_header) ||
        !match_value(r, body, spec, text, cap) || !int_field(r, body, "count", 0, UINT32_MAX, 0, &count) ||
        !int_field(r, body, "rate", 1, MAX_RATE, DEFAULT_RATE, &rate))
        return false;
    if ((spec->has_match_value && !has_header) || (has_header && !spec->match_header.len)) {
        mgmt_error(r, 400, "bad_request", "match-value needs a non-empty match-header");
        return false;
    }
    if ((has_q && has_x) || (spec->has_routing_key && !has_x)) {
        mgmt_error(r, 400, "bad_request",
                   "give dest-queue, or dest-exchange with an optional dest-routing-key, or "
                   "neither (back to each message's source)");
        return false;
    }
    spec->to = has_q ? MOVE_TO_QUEUE : has_x ? MOVE_TO_EXCHANGE : MOVE_TO_SOURCE;
    spec->dest = has_q ? dq : dx;
    spec->count = (uint64_t)count;
    spec->rate = (uint32_t)rate;
    return true;
}

static void post_move(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    json_t *body = v ? mgmt_body(r) : NULL;
    move_spec spec = {0};
    char text[32];
    if (!body || !parse_spec(r, body, &spec, text, sizeof text))
        return;
    if (!vhost_queue_find(v, r->cap[1])) {
        mgmt_not_found(r);
        return;
    }
    amqp_bytes via = spec.to == MOVE_TO_EXCHANGE ? spec.dest : (amqp_bytes){0};
    if (!mgmt_permission_check(r, v, ACCESS_READ, r->cap[1]) ||
        !mgmt_permission_check(r, v, ACCESS_WRITE, via))
        return;
    amqp_error err = {0};
    move_progress p;
    if (queue_move_start(v, r->cap[1], &spec, &err) != AMQP_OK) {
        if (err.code == AMQP_RESOURCE_LOCKED)
            mgmt_error(r, 409, "conflict", mgmt_error_text(&err));
        else
            mgmt_amqp_error(r, &err);
        return;
    }
    queue_move_progress(v, r->cap[1], &p);
    send_progress(r, v, &p, 202);
}

static void get_move(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    move_progress p;
    if (!v)
        return;
    if (!queue_move_progress(v, r->cap[1], &p))
        mgmt_not_found(r);
    else
        send_progress(r, v, &p, 200);
}

static void delete_move(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (!v || !mgmt_permission_check(r, v, ACCESS_READ, r->cap[1]))
        return;
    if (!queue_move_cancel(v, r->cap[1]))
        mgmt_not_found(r);
    else
        mgmt_send_empty(r, 204, NULL);
}

const mgmt_route mgmt_move_routes[] = {
    {HTTP_POST, "/api/queues/{}/{}/move", TAG_MANAGEMENT, post_move},
    {HTTP_GET, "/api/queues/{}/{}/move", TAG_MANAGEMENT, get_move},
    {HTTP_DELETE, "/api/queues/{}/{}/move", TAG_MANAGEMENT, delete_move},
    {0},
};
