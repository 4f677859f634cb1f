/* Definitions export and import, queue purge and delete, and closing one
 * connection or all of a vhost's (or the node's). Files are read and written here, by warrenctl, not by the
 * broker as rabbitmqctl's node does; "-" is stdout or stdin. */
#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "wctl_internal.h"

static bool is_json_format(const wctl_ctx *c)
{
    return !c->o->format || strcmp(c->o->format, "json") == 0;
}

static int not_json(const wctl_ctx *c)
{
    return wctl_usage_error(c, WCTL_EXIT_DATAERR,
                            "Bad argument: format %s is not supported by warrenctl (json only)",
                            c->o->format);
}

/* ---- definitions -------------------------------------------------------------------------- */

static int write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "w");
    if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0) {
        int e = errno;
        if (e == EACCES || e == EPERM)
            wctl_error("No permissions to write to file %s or its parent directory", path);
        else
            wctl_error("Could not write to file %s: %s", path, strerror(e));
        return WCTL_EXIT_DATAERR;
    }
    return WCTL_EXIT_OK;
}

int wctl_cmd_export_definitions(wctl_ctx *c)
{
    const char *path = c->o->args[0];
    bool to_stdout = strcmp(path, "-") == 0;
    if (!is_json_format(c))
        return not_json(c);
    if (!to_stdout) {
        char *copy = wctl_strndup(path, strlen(path));
        char *dir = dirname(copy);
        struct stat st;
        bool ok = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
        int rc = ok ? 0 : wctl_usage_error(c, WCTL_EXIT_DATAERR,
                                           "Bad argument: Directory %s does not exist", dir);
        free(copy);
        if (rc)
            return rc;
        wctl_info(c, "Exporting definitions in JSON to a file at \"%s\" ...", path);
    }
    json_t *defs;
    int rc = wctl_get_json(c, "/api/definitions", false, &defs, NULL);
    if (rc)
        return rc;
    /* rabbitmqctl writes compact JSON with sorted keys and no newline */
    char *text = json_dumps(defs, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(defs);
    if (to_stdout)
        fputs(text, stdout);
    else
        rc = write_file(path, text, strlen(text));
    free(text);
    return rc;
}

static char *read_all(FILE *f, size_t *len)
{
    wctl_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        wctl_buf_append(&b, chunk, n);
    *len = b.len;
    return b.data ? b.data : wctl_strndup("", 0);
}

static int post_definitions(wctl_ctx *c, const char *text, size_t len)
{
    json_error_t jerr;
    json_t *j = json_loadb(text, len, 0, &jerr);
    if (!j) {
        wctl_error("Failed to deserialise input (format: JSON) (error: %s at line %d, column %d)",
                   jerr.text, jerr.line, jerr.column);
        return WCTL_EXIT_DATAERR;
    }
    json_decref(j);
    wctl_response r;
    int rc = wctl_call(c, "POST", "/api/definitions", text, NULL, NULL, &r);
    if (rc)
        return rc;
    if (r.status >= 200 && r.status < 300) {
        wctl_info(c, "Successfully started definition import. This process is asynchronous and "
                     "can take some time.");
        rc = c->o->json ? wctl_done(c) : WCTL_EXIT_OK;
    } else {
        rc = wctl_http_error(c, &r);
        if (r.status == 400)
            rc = WCTL_EXIT_DATAERR; /* the file is what is wrong */
    }
    wctl_response_free(&r);
    return rc;
}

int wctl_cmd_import_definitions(wctl_ctx *c)
{
    const char *path = c->o->nargs ? c->o->args[0] : "-";
    bool from_stdin = strcmp(path, "-") == 0;
    if (!is_json_format(c))
        return not_json(c);
    FILE *f = stdin;
    if (!from_stdin) {
        f = fopen(path, "r");
        if (!f)
            return wctl_usage_error(c, WCTL_EXIT_DATAERR, errno == ENOENT
                                    ? "Bad argument: File %s does not exist"
                                    : "Bad argument: File %s cannot be read", path);
        wctl_info(c, "Importing definitions in JSON from a file at \"%s\" ...", path);
    } else {
        wctl_info(c, "Importing definitions in JSON from standard input ...");
    }
    size_t len;
    char *text = read_all(f, &len);
    if (!from_stdin)
        fclose(f);
    int rc = post_definitions(c, text, len);
    free(text);
    return rc;
}

/* ---- queues -------------------------------------------------------------------------------- */

static int no_such_queue(wctl_ctx *c, const char *name)
{
    (void)c;
    (void)name;
    wctl_error("not_found");
    return WCTL_EXIT_UNAVAILABLE;
}

int wctl_cmd_purge_queue(wctl_ctx *c)
{
    const char *q = c->o->args[0];
    wctl_info(c, "Purging queue '%s' in vhost '%s' ...", q, c->o->vhost);
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/queues", c->o->vhost, q, (const char *)NULL);
    wctl_buf_puts(&path, "/contents");
    return wctl_change(c, "DELETE", &path, NULL, NULL, no_such_queue, q);
}

static int refused_delete(wctl_ctx *c, const wctl_response *r, const json_t *q)
{
    bool if_empty = c->o->given & WCTL_OPT_IF_EMPTY, if_unused = c->o->given & WCTL_OPT_IF_UNUSED;
    if (r->status != 400)
        return wctl_http_error(c, r);
    if (if_empty && json_integer_value(json_object_get(q, "messages_ready")) > 0)
        wctl_error("Queue is not empty");
    else if (if_unused && json_integer_value(json_object_get(q, "consumers")) > 0)
        wctl_error("Queue is in use");
    else
        return wctl_http_error(c, r);
    return WCTL_EXIT_USAGE; /* rabbitmqctl's code for these refusals */
}

int wctl_cmd_delete_queue(wctl_ctx *c)
{
    const char *name = c->o->args[0];
    bool if_empty = c->o->given & WCTL_OPT_IF_EMPTY, if_unused = c->o->given & WCTL_OPT_IF_UNUSED;
    wctl_info(c, "Deleting queue '%s' on vhost '%s'%s%s%s ...", name, c->o->vhost,
              if_empty ? " if queue is empty" : "", if_empty && if_unused ? " and" : "",
              if_unused ? " if queue is unused" : "");
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/queues", c->o->vhost, name, (const char *)NULL);
    json_t *q;
    int rc = wctl_get_json(c, wctl_buf_str(&path), true, &q, NULL);
    if (rc || !q) {
        wctl_buf_free(&path);
        if (!rc)
            wctl_error("Queue not found");
        return rc ? rc : WCTL_EXIT_USAGE;
    }
    wctl_buf_printf(&path, "%s%s%s", if_empty || if_unused ? "?" : "",
                    if_empty ? "if-empty=true" : "", if_empty && if_unused ? "&if-unused=true"
                                                     : if_unused ? "if-unused=true" : "");
    wctl_response r;
    rc = wctl_call(c, "DELETE", wctl_buf_str(&path), NULL, NULL, NULL, &r);
    wctl_buf_free(&path);
    if (rc == 0) {
        if (r.status == 404) {
            wctl_error("Queue not found");
            rc = WCTL_EXIT_USAGE;
        } else if (r.status >= 300) {
            rc = refused_delete(c, &r, q);
        } else if (c->o->json) {
            rc = wctl_done(c);
        } else {
            printf("Queue was successfully deleted with %lld ready messages\n",
                   (long long)json_integer_value(json_object_get(q, "messages_ready")));
        }
        wctl_response_free(&r);
    }
    json_decref(q);
    return rc;
}

/* ---- connections ------------------------------------------------------------------------------ */

static int no_such_connection(wctl_ctx *c, const char *name)
{
    (void)c;
    wctl_error("Connection \"%s\" not found (see list_connections name)", name);
    return WCTL_EXIT_DATAERR;
}

/* The X-Reason header carrying `why` (one header line: no CR/LF from the user). */
static void reason_header(wctl_buf *h, const char *why)
{
    wctl_buf_puts(h, "X-Reason: ");
    for (const char *p = why; *p; p++)
        wctl_buf_append(h, *p == '\r' || *p == '\n' ? " " : p, 1);
}

int wctl_cmd_close_connection(wctl_ctx *c)
{
    const char *name = c->o->args[0];
    wctl_info(c, "Closing connection %s, reason: %s...", name, c->o->args[1]);
    wctl_buf path = {0}, reason = {0};
    wctl_api_path(&path, "/api/connections", name, (const char *)NULL);
    reason_header(&reason, c->o->args[1]);
    int rc = wctl_change(c, "DELETE", &path, NULL, wctl_buf_str(&reason), no_such_connection, name);
    wctl_buf_free(&reason);
    return rc;
}

/* The connections close_all_connections closes: the vhost's (an unknown
 * vhost has none, as in rabbitmqctl), or with --global the node's. */
static int connections_to_close(wctl_ctx *c, bool global, json_t **answer)
{
    wctl_buf path = {0};
    if (global)
        wctl_buf_puts(&path, "/api/connections");
    else
        wctl_api_path(&path, "/api/vhosts", c->o->vhost, "connections", (const char *)NULL);
    int rc = wctl_get_json(c, wctl_buf_str(&path), true, answer, NULL);
    wctl_buf_free(&path);
    return rc;
}

/* DELETEs each of rows[0..n) with the reason, `delay_ms` apart; a
 * connection gone meanwhile is no error. */
static int close_each(wctl_ctx *c, const json_t *rows, size_t n, int delay_ms)
{
    wctl_buf reason = {0};
    int rc = 0;
    reason_header(&reason, c->o->args[0]);
    for (size_t i = 0; i < n && !rc; i++) {
        const char *name = json_string_value(json_object_get(json_array_get(rows, i), "name"));
        wctl_buf path = {0};
        wctl_response r;
        if (i && delay_ms)
            nanosleep(&(struct timespec){delay_ms / 1000, (delay_ms % 1000) * 1000000L}, NULL);
        wctl_api_path(&path, "/api/connections", name ? name : "", (const char *)NULL);
        rc = wctl_call(c, "DELETE", wctl_buf_str(&path), NULL, wctl_buf_str(&reason), NULL, &r);
        wctl_buf_free(&path);
        if (rc)
            break;
        if (r.status >= 300 && r.status != 404)
            rc = wctl_http_error(c, &r);
        wctl_response_free(&r);
    }
    wctl_buf_free(&reason);
    return rc;
}

int wctl_cmd_close_all_connections(wctl_ctx *c)
{
    const wctl_opts *o = c->o;
    bool global = o->given & WCTL_OPT_GLOBAL;
    if (global)
        wctl_info(c, "Closing all connections to node %s (across all vhosts), reason: %s...",
                  wctl_node_name(c), o->args[0]);
    else if (o->close_limit == 0)
        wctl_info(c, "Closing all connections in vhost %s, reason: %s...", o->vhost, o->args[0]);
    else
        wctl_info(c, "Closing %d connections in vhost %s, reason: %s...", o->close_limit, o->vhost,
                  o->args[0]);
    json_t *answer;
    int rc = connections_to_close(c, global, &answer);
    if (rc)
        return rc;
    const json_t *rows = wctl_rows(answer);
    size_t n = json_array_size(rows);
    if (!global && o->close_limit > 0 && (size_t)o->close_limit < n)
        n = (size_t)o->close_limit;
    rc = close_each(c, rows, n, o->close_delay_ms);
    json_decref(answer);
    if (rc)
        return rc;
    if (o->json)
        printf("{\"node\":\"%s\",\"result\":\"ok\",\"value\":\"Closed %zu connections\"}\n",
               wctl_node_name(c), n);
    else
        printf("Closed %zu connections\n", n);
    return WCTL_EXIT_OK;
}
