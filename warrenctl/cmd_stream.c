/* rabbitmq-streams' commands (RabbitMQ 3.13's AddSuperStreamCommand,
 * DeleteSuperStreamCommand, ListStreamGroupConsumersCommand) over the
 * management API: add_super_stream and delete_super_stream through
 * PUT / DELETE /api/stream/super-streams/{vhost}/{name}, the group's
 * consumers from /api/stream/consumers/{vhost} (list_stream_consumers and
 * list_stream_publishers are plain lists, cmd_list.c). Option values are
 * checked and converted as rabbitmq-streams does: sizes with information
 * units (100gb, 50mb, 1GiB), --max-age as an ISO 8601 duration sent as
 * seconds ("PT10M30S" -> "630s"). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wctl_internal.h"

/* rabbit_resource_monitor_misc:parse_information_unit (3.13): digits and
 * an optional unit, 1000-based (k, MB, gb...) or 1024-based (Ki, MiB...). */
bool wctl_information_unit(const char *s, unsigned long long *out)
{
    /* each multiplier's unit spellings, space-separated */
    static const struct { const char *names; unsigned long long mult; } units[] = {
        {"kiB KIB kib ki Ki", 1024ull},          {"MiB MIB mib mi Mi", 1024ull << 10},
        {"GiB GIB gib gi Gi", 1024ull << 20},    {"TiB TIB tib ti Ti", 1024ull << 30},
        {"k K KB kB kb Kb", 1000ull},            {"m M MB mB mb Mb", 1000000ull},
        {"g G GB gB gb Gb", 1000000000ull},      {"t T TB tB tb Tb", 1000000000000ull},
    };
    size_t digits = strspn(s, "0123456789"), ulen = strlen(s + digits);
    if (!digits || digits > 15)
        return false;
    unsigned long long n = strtoull(s, NULL, 10), mult = ulen ? 0 : 1;
    for (size_t u = 0; !mult && u < sizeof units / sizeof units[0]; u++)
        for (const char *p = units[u].names; *p; p += strcspn(p, " "), p += *p == ' ')
            if (strcspn(p, " ") == ulen && strncmp(p, s + digits, ulen) == 0)
                mult = units[u].mult;
    if (!mult || n > ~0ull / mult)
        return false;
    *out = n * mult;
    return true;
}

/* An ISO 8601 duration (rabbit_date_time:parse_duration: PnYnMnDTnHnMnS,
 * whole numbers) in seconds, a year 365 days and a month 30 as
 * AddSuperStreamCommand counts them. */
bool wctl_iso_duration(const char *s, unsigned long long *out)
{
    static const char date_units[] = "YMD", time_units[] = "HMS";
    static const unsigned long long date_secs[] = {365 * 86400ull, 30 * 86400ull, 86400ull};
    static const unsigned long long time_secs[] = {3600ull, 60ull, 1ull};
    if (*s++ != 'P' || !*s)
        return false;
    bool in_time = false, any = false, timed = false; /* a T needs a part after it */
    size_t next = 0; /* units must come in order */
    unsigned long long total = 0;
    while (*s) {
        if (*s == 'T' && !in_time) {
            in_time = true, next = 0, s++;
            continue;
        }
        size_t digits = strspn(s, "0123456789");
        if (!digits || digits > 9)
            return false;
        unsigned long long n = strtoull(s, NULL, 10);
        const char *units = in_time ? time_units : date_units, *u = strchr(units, s[digits]);
        if (!s[digits] || !u || (size_t)(u - units) < next)
            return false;
        next = (size_t)(u - units) + 1;
        total += n * (in_time ? time_secs : date_secs)[u - units];
        any = true, timed = in_time;
        s += digits + 1;
    }
    *out = total;
    return any && (!in_time || timed);
}

static void put_size(json_t *args, const char *key, unsigned long long v)
{
    char text[32];
    snprintf(text, sizeof text, "%llu", v);
    json_object_set_new(args, key, json_string(text));
}

/* validate_stream_arguments, then the arguments as the API takes them. */
static int stream_arguments(wctl_ctx *c, json_t *args)
{
    const wctl_opts *o = c->o;
    unsigned long long v;
    if (o->max_length_bytes) {
        if (!wctl_information_unit(o->max_length_bytes, &v))
            return wctl_usage_error(c, WCTL_EXIT_USAGE, "Invalid value for --max-length-bytes, "
                                    "valid example values: 100gb, 50mb");
        put_size(args, "max-length-bytes", v);
    }
    if (o->max_age) {
        char text[32];
        if (!wctl_iso_duration(o->max_age, &v))
            return wctl_usage_error(c, WCTL_EXIT_USAGE,
                                    "Invalid value for --max-age, the value must a ISO 8601 "
                                    "duration, e.g. e.g. PT10M30S for 10 minutes 30 seconds, "
                                    "P5DT8H for 5 days 8 hours.");
        snprintf(text, sizeof text, "%llus", v);
        json_object_set_new(args, "max-age", json_string(text));
    }
    if (o->segment_size) {
        if (!wctl_information_unit(o->segment_size, &v))
            return wctl_usage_error(c, WCTL_EXIT_USAGE, "Invalid value for "
                                    "--stream-max-segment-size-bytes, valid example values: "
                                    "100gb, 50mb");
        put_size(args, "stream-max-segment-size-bytes", v);
    }
    if (o->leader_locator) {
        static const char *const ok[] = {"client-local", "balanced", "random", "least-leaders"};
        size_t i = 0;
        while (i < 4 && strcmp(o->leader_locator, ok[i]) != 0)
            i++;
        if (i == 4)
            return wctl_usage_error(c, WCTL_EXIT_USAGE, "Invalid value for --leader-locator, "
                                    "valid values are client-local, balanced.");
        /* the deprecated two are balanced since 3.13 */
        json_object_set_new(args, "queue-leader-locator", json_string(i < 2 ? ok[i] : "balanced"));
    }
    if (o->initial_cluster_size) {
        char *end;
        long n = strtol(o->initial_cluster_size, &end, 10);
        if (*end || end == o->initial_cluster_size)
            return wctl_usage_error(c, WCTL_EXIT_USAGE, "Invalid value for "
                                    "--initial-cluster-size, the value must be a positive integer.");
        if (n <= 0)
            return wctl_usage_error(c, WCTL_EXIT_USAGE, "Invalid value for "
                                    "--initial-cluster-size, the value must be positive.");
        json_object_set_new(args, "initial-cluster-size", json_string(o->initial_cluster_size));
    }
    return 0;
}

/* The manager's refusal as rabbitmq-streams prints it (exit 70). */
static int refused(const wctl_response *r)
{
    wctl_buf reason = {0};
    wctl_error_reason(r, &reason);
    wctl_error("%s", wctl_buf_str(&reason));
    wctl_buf_free(&reason);
    return WCTL_EXIT_SOFTWARE;
}

static int send(wctl_ctx *c, const char *method, json_t *body, const char *done_fmt)
{
    const char *name = c->o->args[0];
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/stream/super-streams", c->o->vhost, name, (const char *)NULL);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    wctl_response r;
    int rc = wctl_call(c, method, wctl_buf_str(&path), text, NULL, NULL, &r);
    free(text);
    wctl_buf_free(&path);
    if (rc)
        return rc;
    if (r.status == 404 && strcmp(method, "DELETE") == 0) {
        wctl_error("stream_not_found"); /* delete_super_stream's {error, stream_not_found} */
        rc = WCTL_EXIT_SOFTWARE;
    } else if (r.status == 400) {
        rc = refused(&r);
    } else if (r.status >= 300) {
        rc = wctl_http_error(c, &r);
    } else if (c->o->json) {
        rc = wctl_done(c);
    } else {
        printf(done_fmt, name);
        putchar('\n');
    }
    wctl_response_free(&r);
    return rc;
}

int wctl_cmd_add_super_stream(wctl_ctx *c)
{
    const wctl_opts *o = c->o;
    if (o->partitions && o->binding_keys)
        return wctl_usage_error(c, WCTL_EXIT_USAGE,
                                "Specify --partitions or --binding-keys, not both.");
    if (o->partitions < 0)
        return wctl_usage_error(c, WCTL_EXIT_USAGE, "The partition number must be greater than 0");
    json_t *body = json_object(), *args = json_object();
    int rc = stream_arguments(c, args);
    if (rc) {
        json_decref(args);
        json_decref(body);
        return rc;
    }
    if (o->binding_keys)
        json_object_set_new(body, "binding-keys", json_string(o->binding_keys));
    else
        json_object_set_new(body, "partitions", json_integer(o->partitions ? o->partitions : 3));
    json_object_set_new(body, "arguments", args);
    wctl_info(c, "Adding a super stream...");
    return send(c, "PUT", body, "Super stream %s has been created");
}

int wctl_cmd_delete_super_stream(wctl_ctx *c)
{
    wctl_info(c, "Deleting a super stream...");
    return send(c, "DELETE", NULL, "Super stream %s has been deleted");
}

/* list_stream_group_consumers: the consumers of --stream whose consumer
 * name (their properties' "name", the stream protocol's reference) is
 * --reference, with single active consumer on. */
static bool in_group(const json_t *row, const char *stream, const char *reference)
{
    const json_t *props = json_object_get(row, "properties");
    const char *s = json_string_value(json_object_get(json_object_get(row, "queue"), "name"));
    const char *ref = json_string_value(json_object_get(props, "name"));
    const char *sac = json_string_value(json_object_get(props, "single-active-consumer"));
    return s && ref && sac && strcmp(s, stream) == 0 && strcmp(ref, reference) == 0 &&
           strcmp(sac, "true") == 0;
}

int wctl_cmd_list_stream_group_consumers(wctl_ctx *c)
{
    const wctl_opts *o = c->o;
    if (!o->stream || !o->reference)
        return wctl_usage_error(c, WCTL_EXIT_USAGE, "not enough arguments.");
    const wctl_listing *l = wctl_listing_find(c->cmd->name);
    const wctl_column *cols[WCTL_MAX_ARGS * 4];
    char err[512];
    int ncols = wctl_listing_columns(l, o->args, o->nargs, cols, (int)(sizeof cols / sizeof cols[0]),
                                     err, sizeof err);
    if (ncols == 0)
        return wctl_usage_error(c, WCTL_EXIT_USAGE, "%s", err);
    wctl_info(c, "Listing group consumers ...");
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/stream/consumers", o->vhost, (const char *)NULL);
    json_t *answer;
    int rc = wctl_get_json(c, wctl_buf_str(&path), true, &answer, NULL);
    wctl_buf_free(&path);
    if (rc)
        return rc;
    json_t *group = json_array(), *row;
    size_t i;
    json_array_foreach(wctl_rows(answer), i, row)
        if (in_group(row, o->stream, o->reference))
            json_array_append(group, row);
    json_decref(answer);
    if (json_array_size(group) == 0) {
        json_decref(group);
        wctl_error("The group does not exist");
        return WCTL_EXIT_SOFTWARE;
    }
    wctl_buf out = {0};
    wctl_listing_render(&out, l, cols, ncols, group, !o->silent && !o->no_headers, o->json);
    fwrite(wctl_buf_str(&out), 1, out.len, stdout);
    wctl_buf_free(&out);
    json_decref(group);
    return WCTL_EXIT_OK;
}
