/* consistent_hash_exchange_ring_state: rabbitmq-diagnostics' command of the
 * consistent-hash plugin over Warren's GET /api/exchanges/{vhost}/{name}/ring.
 * Its output is the plugin's: one "Ring index: N, queue: 'Q'" line per
 * bucket, sorted as strings (the plugin usorts the lines), or with
 * --formatter json {"buckets", "exchange", "message", "node", "result"}; an
 * exchange that is missing or of another type is the plugin's "Exchange
 * does not exist or is of a different type" (exit 65).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wctl_internal.h"

#define NOT_FOUND "Exchange does not exist or is of a different type"

static int compare_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The bucket lines, sorted; NULL on out-of-memory. */
static char **ring_lines(const json_t *ring, size_t *n)
{
    size_t total = 0, i, k = 0;
    json_t *e;
    json_array_foreach(ring, i, e)
        total += (size_t)json_integer_value(json_object_get(e, "weight"));
    char **lines = calloc(total ? total : 1, sizeof *lines);
    json_array_foreach(ring, i, e) {
        json_int_t first = json_integer_value(json_object_get(e, "first_bucket"));
        json_int_t last = json_integer_value(json_object_get(e, "last_bucket"));
        const char *dest = json_string_value(json_object_get(e, "destination"));
        for (json_int_t b = first; lines && b <= last && k < total; b++)
            if (asprintf(&lines[k++], "Ring index: %lld, queue: '%s'", (long long)b,
                         dest ? dest : "") < 0)
                lines[--k] = NULL;
    }
    if (lines)
        qsort(lines, k, sizeof *lines, compare_lines);
    *n = k;
    return lines;
}

static int print_json(wctl_ctx *c, const json_t *answer, const char *exchange)
{
    json_t *out = json_object(), *buckets = json_object(), *e;
    size_t i;
    char key[24], message[600];
    json_array_foreach(json_object_get(answer, "ring"), i, e) {
        json_int_t last = json_integer_value(json_object_get(e, "last_bucket"));
        for (json_int_t b = json_integer_value(json_object_get(e, "first_bucket")); b <= last; b++) {
            snprintf(key, sizeof key, "%lld", (long long)b);
            json_object_set(buckets, key, json_object_get(e, "destination"));
        }
    }
    snprintf(message, sizeof message, "Consistent hashing ring state for exchange '%s' in vhost '%s'",
             exchange, c->o->vhost);
    json_object_set_new(out, "result", json_string("ok"));
    json_object_set_new(out, "node", json_string(wctl_node_name(c)));
    json_object_set_new(out, "exchange", json_string(exchange));
    json_object_set_new(out, "message", json_string(message));
    json_object_set_new(out, "buckets", buckets);
    char *text = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS); /* as RabbitMQ prints them */
    json_decref(out);
    if (!text)
        return WCTL_EXIT_SOFTWARE;
    puts(text);
    free(text);
    return WCTL_EXIT_OK;
}

int wctl_cmd_consistent_hash_exchange_ring_state(wctl_ctx *c)
{
    const char *exchange = c->o->args[0];
    wctl_info(c, "Inspecting consistent hashing ring state for exchange %s in virtual host '%s'...",
              exchange, c->o->vhost);
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/exchanges", c->o->vhost, exchange, "ring", (const char *)NULL);
    wctl_response r;
    int rc = wctl_call(c, "GET", wctl_buf_str(&path), NULL, NULL, NULL, &r);
    wctl_buf_free(&path);
    if (rc)
        return rc;
    json_t *answer = r.status == 200 ? json_loadb(r.body, r.body_len, 0, NULL) : NULL;
    if (r.status == 404 || r.status == 400) {
        wctl_error(NOT_FOUND);
        rc = WCTL_EXIT_DATAERR;
    } else if (r.status != 200 || !answer) {
        rc = wctl_http_error(c, &r);
    } else if (c->o->json) {
        rc = print_json(c, answer, exchange);
    } else {
        size_t n;
        char **lines = ring_lines(json_object_get(answer, "ring"), &n);
        for (size_t i = 0; lines && i < n; i++) {
            puts(lines[i]);
            free(lines[i]);
        }
        if (n > 0) /* each of the plugin's lines ends in ~n, then its formatter adds one */
            putchar('\n');
        free(lines);
        rc = lines ? WCTL_EXIT_OK : WCTL_EXIT_SOFTWARE;
    }
    json_decref(answer);
    wctl_response_free(&r);
    return rc;
}
