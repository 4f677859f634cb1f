/* move_messages: Warren's DLQ redrive through /api/queues/{vh}/{q}/move.
 * Starts a move and, unless --no-wait, polls it until it ends, then prints
 * the report (what moved, what stayed and why, where it went); --status
 * prints the running or last move's report, --cancel stops it. Exit 0 when
 * the move finished, 69 when it was cancelled, stopped or refused, 65 when
 * the queue or its destination does not exist, 75 when it is still running
 * at the timeout. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wctl_internal.h"

#define POLL_MS 200

static void print_report(const wctl_ctx *c, json_t *p)
{
    if (c->o->json) {
        char *text = json_dumps(p, JSON_COMPACT);
        printf("%s\n", text ? text : "{}");
        free(text);
        return;
    }
    json_t *skipped = json_object_get(p, "skipped"), *to = json_object_get(p, "moved_to");
    printf("state\t%s\n", json_string_value(json_object_get(p, "state")));
    const char *reason = json_string_value(json_object_get(p, "reason"));
    if (reason && *reason)
        printf("reason\t%s\n", reason);
    printf("moved\t%lld of %lld\n", (long long)json_integer_value(json_object_get(p, "moved")),
           (long long)json_integer_value(json_object_get(p, "total")));
    const char *key;
    json_t *v;
    json_object_foreach(skipped, key, v) printf("left in place (%s)\t%lld\n", key,
                                                (long long)json_integer_value(v));
    size_t i;
    json_array_foreach(to, i, v) {
        const char *q = json_string_value(json_object_get(v, "queue"));
        printf("moved to\t%s\t%lld\n", q ? q : "(other queues)",
               (long long)json_integer_value(json_object_get(v, "count")));
    }
}

static int exit_for(json_t *p)
{
    const char *state = json_string_value(json_object_get(p, "state"));
    if (state && strcmp(state, "running") == 0)
        return WCTL_EXIT_TEMPFAIL;
    return state && strcmp(state, "finished") == 0 ? WCTL_EXIT_OK : WCTL_EXIT_UNAVAILABLE;
}

/* Polls GET until the move ends or the timeout passes; prints the report. */
static int wait_and_report(wctl_ctx *c, const char *path)
{
    long long deadline = wctl_now_ms() + c->timeout_ms;
    for (;;) {
        json_t *p;
        int rc = wctl_get_json(c, path, false, &p, NULL);
        if (rc)
            return rc;
        const char *state = json_string_value(json_object_get(p, "state"));
        if (!state || strcmp(state, "running") != 0 || wctl_now_ms() >= deadline ||
            (c->o->given & (WCTL_OPT_STATUS | WCTL_OPT_NO_WAIT))) {
            print_report(c, p);
            rc = (c->o->given & (WCTL_OPT_STATUS | WCTL_OPT_NO_WAIT)) ? WCTL_EXIT_OK : exit_for(p);
            json_decref(p);
            return rc;
        }
        json_decref(p);
        struct timespec ts = {0, POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static int no_move(wctl_ctx *c, const char *queue)
{
    (void)c;
    wctl_error("No move from queue '%s' is running (or the queue does not exist)", queue);
    return WCTL_EXIT_DATAERR;
}

/* The queue, or the destination (the broker's text names it), is missing. */
static int not_found(wctl_ctx *c, const wctl_response *r, const char *queue)
{
    wctl_buf reason = {0};
    wctl_error_reason(r, &reason);
    if (strcmp(wctl_buf_str(&reason), "Not Found") == 0)
        wctl_error("Queue '%s' not found in vhost '%s'", queue, c->o->vhost);
    else
        wctl_error("%s", wctl_buf_str(&reason));
    wctl_buf_free(&reason);
    return WCTL_EXIT_DATAERR;
}

static json_t *start_body(const wctl_ctx *c)
{
    json_t *b = json_object();
    if (c->o->to_queue)
        json_object_set_new(b, "dest-queue", json_string(c->o->to_queue));
    if (c->o->to_exchange)
        json_object_set_new(b, "dest-exchange", json_string(c->o->to_exchange));
    if (c->o->routing_key)
        json_object_set_new(b, "dest-routing-key", json_string(c->o->routing_key));
    if (c->o->match_header)
        json_object_set_new(b, "match-header", json_string(c->o->match_header));
    if (c->o->match_value)
        json_object_set_new(b, "match-value", json_string(c->o->match_value));
    if (c->o->given & WCTL_OPT_LIMIT)
        json_object_set_new(b, "count", json_integer(c->o->limit));
    if (c->o->given & WCTL_OPT_RATE)
        json_object_set_new(b, "rate", json_integer(c->o->rate));
    return b;
}

int wctl_cmd_move_messages(wctl_ctx *c)
{
    const char *q = c->o->args[0];
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/queues", c->o->vhost, q, (const char *)NULL);
    wctl_buf_puts(&path, "/move");
    int rc;
    if (c->o->given & WCTL_OPT_CANCEL) {
        wctl_info(c, "Cancelling the move from queue '%s' in vhost '%s' ...", q, c->o->vhost);
        return wctl_change(c, "DELETE", &path, NULL, NULL, no_move, q);
    }
    if (!(c->o->given & WCTL_OPT_STATUS)) {
        wctl_info(c, "Moving messages from queue '%s' in vhost '%s' to %s%s ...", q, c->o->vhost,
                  c->o->to_queue      ? "queue "
                  : c->o->to_exchange ? "exchange "
                                      : "the queue each one died in",
                  c->o->to_queue ? c->o->to_queue : c->o->to_exchange ? c->o->to_exchange : "");
        json_t *b = start_body(c);
        char *body = json_dumps(b, JSON_COMPACT);
        json_decref(b);
        wctl_response r;
        rc = wctl_call(c, "POST", wctl_buf_str(&path), body, NULL, NULL, &r);
        free(body);
        if (rc == 0) {
            rc = r.status == 404 ? not_found(c, &r, q) : r.status != 202 ? wctl_http_error(c, &r) : 0;
            wctl_response_free(&r);
        }
        if (rc) {
            wctl_buf_free(&path);
            return rc;
        }
    }
    rc = wait_and_report(c, wctl_buf_str(&path));
    wctl_buf_free(&path);
    return rc;
}
