/* The list_* commands: one GET, then the rows rendered through the
 * command's column table. For a vhost that does not exist rabbitmqctl lists
 * nothing and succeeds, so a 404 on a vhost-scoped listing is an empty
 * list; a user that does not exist is its {:no_such_user, ...} error.
 *
 * list_parameters takes the node-wide list and keeps the vhost's rows
 * (the API has no per-vhost path for every component), asking a
 * per-vhost path first whether the vhost exists. list_unresponsive_queues
 * keeps the queues whose state is not "running": every Warren queue
 * answers, so its list is empty; against RabbitMQ it shows the queues the
 * API finds crashed, stopped or down. */
#include <stdio.h>
#include <string.h>

#include "wctl_internal.h"

/* VHOST_CHECKED: rabbitmqctl's non-streaming lists, which say when the
 * vhost does not exist; the streaming ones just list nothing. VHOST_ROWS:
 * a VHOST_CHECKED list made from the node-wide one. */
typedef enum scope { NODE, VHOST, VHOST_CHECKED, USER, VHOST_ROWS } scope;

typedef struct list_spec {
    const char *command;
    const char *api;    /* before the vhost or user segment */
    const char *suffix; /* after it; for VHOST_ROWS, a per-vhost path that is 404 without it */
    scope scope;
    const char *info;   /* its %s is the vhost or the user */
    bool (*keep)(const json_t *row, const char *subject); /* NULL: every row */
} list_spec;

static bool in_vhost(const json_t *row, const char *vhost)
{
    const char *v = json_string_value(json_object_get(row, "vhost"));
    return v && strcmp(v, vhost) == 0;
}

static bool not_running(const json_t *row, const char *vhost)
{
    (void)vhost;
    const char *state = json_string_value(json_object_get(row, "state"));
    return state && strcmp(state, "running") != 0;
}

static const list_spec specs[] = {
    {"list_queues", "/api/queues", "", VHOST, "Listing queues for vhost %s ...", NULL},
    {"list_exchanges", "/api/exchanges", "", VHOST, "Listing exchanges for vhost %s ...", NULL},
    {"list_bindings", "/api/bindings", "", VHOST, "Listing bindings for vhost %s...", NULL},
    {"list_connections", "/api/connections", "", NODE, "Listing connections ...", NULL},
    {"list_channels", "/api/channels", "", NODE, "Listing channels ...", NULL},
    {"list_consumers", "/api/consumers", "", VHOST, "Listing consumers in vhost %s ...", NULL},
    {"list_users", "/api/users", "", NODE, "Listing users ...", NULL},
    {"list_vhosts", "/api/vhosts", "", NODE, "Listing vhosts ...", NULL},
    {"list_permissions", "/api/vhosts", "/permissions", VHOST_CHECKED,
     "Listing permissions for vhost \"%s\" ...", NULL},
    {"list_user_permissions", "/api/users", "/permissions", USER,
     "Listing permissions for user \"%s\" ...", NULL},
    {"list_policies", "/api/policies", "", VHOST_CHECKED, "Listing policies for vhost \"%s\" ...",
     NULL},
    {"list_operator_policies", "/api/operator-policies", "", VHOST_CHECKED,
     "Listing operator policy overrides for vhost \"%s\" ...", NULL},
    {"list_topic_permissions", "/api/vhosts", "/topic-permissions", VHOST_CHECKED,
     "Listing topic permissions for vhost \"%s\" ...", NULL},
    {"list_user_topic_permissions", "/api/users", "/topic-permissions", USER,
     "Listing topic permissions for user \"%s\" ...", NULL},
    {"list_parameters", "/api/parameters", "/api/parameters/operator_policy", VHOST_ROWS,
     "Listing runtime parameters for vhost \"%s\" ...", in_vhost},
    {"list_global_parameters", "/api/global-parameters", "", NODE,
     "Listing global runtime parameters ...", NULL},
    {"list_feature_flags", "/api/feature-flags", "", NODE, "Listing feature flags ...", NULL},
    {"list_unresponsive_queues", "/api/queues", "", VHOST,
     "Listing unresponsive queues for vhost %s ...", not_running},
    /* rabbitmq-streams' (their banners name no vhost) */
    {"list_stream_consumers", "/api/stream/consumers", "", VHOST, "Listing stream consumers ...",
     NULL},
    {"list_stream_publishers", "/api/stream/publishers", "", VHOST,
     "Listing stream publishers ...", NULL},
};

static const list_spec *spec_for(const char *command)
{
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        if (strcmp(specs[i].command, command) == 0)
            return &specs[i];
    return NULL;
}

/* The rows of an answer (wctl_rows); with s->keep only those it keeps (a
 * new array in *kept, else NULL). */
const json_t *wctl_rows(const json_t *answer)
{
    return json_is_object(answer) ? json_object_get(answer, "items") : answer;
}

static const json_t *rows_of(const json_t *j, const list_spec *s, const char *subject,
                             json_t **kept)
{
    const json_t *rows = wctl_rows(j), *row;
    size_t i;
    *kept = NULL;
    if (!s->keep || !json_is_array(rows))
        return rows;
    *kept = json_array();
    json_array_foreach(rows, i, row)
        if (s->keep(row, subject))
            json_array_append(*kept, (json_t *)row);
    return *kept;
}

/* VHOST_ROWS: whether the vhost exists (0), else the exit code. */
static int probe_vhost(wctl_ctx *c, const list_spec *s, const char *vhost)
{
    wctl_buf path = {0};
    json_t *answer;
    int status = 0;
    wctl_api_path(&path, s->suffix, vhost, (const char *)NULL);
    int rc = wctl_get_json(c, wctl_buf_str(&path), true, &answer, &status);
    wctl_buf_free(&path);
    json_decref(answer);
    return rc ? rc : status == 404 ? wctl_no_such_vhost(c, vhost) : 0;
}

static int fetch_rows(wctl_ctx *c, const list_spec *s, const char *subject, json_t **out)
{
    wctl_buf path = {0};
    if (s->scope == VHOST_ROWS) {
        int rc = probe_vhost(c, s, subject);
        if (rc)
            return rc;
    }
    if (s->scope == NODE || s->scope == VHOST_ROWS)
        wctl_buf_puts(&path, s->api);
    else
        wctl_api_path(&path, s->api, subject, (const char *)NULL);
    if (s->scope != VHOST_ROWS)
        wctl_buf_puts(&path, s->suffix);
    int status = 0;
    int rc = wctl_get_json(c, wctl_buf_str(&path), true, out, &status);
    wctl_buf_free(&path);
    if (rc == 0 && status == 404 && s->scope == USER) {
        wctl_error("{:no_such_user, \"%s\"}", subject);
        return WCTL_EXIT_UNAVAILABLE;
    }
    if (rc == 0 && status == 404 && (s->scope == VHOST_CHECKED || s->scope == VHOST_ROWS))
        return wctl_no_such_vhost(c, subject);
    if (rc == 0 && !*out)
        *out = json_array(); /* no such vhost: nothing to list */
    return rc;
}

int wctl_cmd_list(wctl_ctx *c)
{
    const wctl_opts *o = c->o;
    const list_spec *s = spec_for(c->cmd->name);
    const wctl_listing *l = wctl_listing_find(c->cmd->name);
    const char *subject = s->scope == USER ? o->args[0] : o->vhost;
    int skip = s->scope == USER ? 1 : 0;
    const wctl_column *cols[WCTL_MAX_ARGS * 4];
    char err[512];
    int ncols = wctl_listing_columns(l, o->args + skip, o->nargs - skip, cols,
                                     (int)(sizeof cols / sizeof cols[0]), err, sizeof err);
    if (ncols == 0)
        return wctl_usage_error(c, WCTL_EXIT_USAGE, "%s", err);
    if (strcmp(s->command, "list_queues") == 0)
        wctl_info(c, "Timeout: %.1f seconds ...", c->timeout_ms / 1000.0);
    wctl_info(c, s->info, subject);
    json_t *answer;
    int rc = fetch_rows(c, s, subject, &answer);
    if (rc)
        return rc;
    json_t *kept;
    const json_t *rows = rows_of(answer, s, subject, &kept);
    if (!json_is_array(rows)) {
        json_decref(answer);
        wctl_error("the broker's answer to %s is not a list", s->api);
        return WCTL_EXIT_SOFTWARE;
    }
    wctl_buf out = {0};
    wctl_listing_render(&out, l, cols, ncols, rows, !o->silent && !o->no_headers, o->json);
    fwrite(wctl_buf_str(&out), 1, out.len, stdout);
    wctl_buf_free(&out);
    json_decref(kept);
    json_decref(answer);
    return WCTL_EXIT_OK;
}
