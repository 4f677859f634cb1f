/* The list_* commands: one GET, then the rows rendered through the
 * command's column table. For a vhost that does not exist rabbitmqctl lists
 * nothing and succeeds, so a 404 on a vhost-scoped listing is an empty
 * list; a user that does not exist is its {:no_such_user, ...} error. */
#include <stdio.h>
#include <string.h>

#include "wctl_internal.h"

/* VHOST_CHECKED: rabbitmqctl's non-streaming lists, which say when the
 * vhost does not exist; the streaming ones just list nothing. */
typedef enum scope { NODE, VHOST, VHOST_CHECKED, USER } scope;

typedef struct list_spec {
    const char *command;
    const char *api;    /* before the vhost or user segment */
    const char *suffix; /* after it */
    scope scope;
    const char *info;   /* its %s is the vhost or the user */
} list_spec;

static const list_spec specs[] = {
    {"list_queues", "/api/queues", "", VHOST, "Listing queues for vhost %s ..."},
    {"list_exchanges", "/api/exchanges", "", VHOST, "Listing exchanges for vhost %s ..."},
    {"list_bindings", "/api/bindings", "", VHOST, "Listing bindings for vhost %s..."},
    {"list_connections", "/api/connections", "", NODE, "Listing connections ..."},
    {"list_channels", "/api/channels", "", NODE, "Listing channels ..."},
    {"list_consumers", "/api/consumers", "", VHOST, "Listing consumers in vhost %s ..."},
    {"list_users", "/api/users", "", NODE, "Listing users ..."},
    {"list_vhosts", "/api/vhosts", "", NODE, "Listing vhosts ..."},
    {"list_permissions", "/api/vhosts", "/permissions", VHOST_CHECKED,
     "Listing permissions for vhost \"%s\" ..."},
    {"list_user_permissions", "/api/users", "/permissions", USER,
     "Listing permissions for user \"%s\" ..."},
    {"list_policies", "/api/policies", "", VHOST_CHECKED, "Listing policies for vhost \"%s\" ..."},
    {"list_operator_policies", "/api/operator-policies", "", VHOST_CHECKED,
     "Listing operator policy overrides for vhost \"%s\" ..."},
    {"list_topic_permissions", "/api/vhosts", "/topic-permissions", VHOST_CHECKED,
     "Listing topic permissions for vhost \"%s\" ..."},
    {"list_user_topic_permissions", "/api/users", "/topic-permissions", USER,
     "Listing topic permissions for user \"%s\" ..."},
};

static const list_spec *spec_for(const char *command)
{
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        if (strcmp(specs[i].command, command) == 0)
            return &specs[i];
    return NULL;
}

/* The rows of an answer: a plain array, or the items of a paged envelope. */
static const json_t *rows_of(const json_t *j)
{
    if (json_is_object(j))
        return json_object_get(j, "items");
    return j;
}

static int fetch_rows(wctl_ctx *c, const list_spec *s, const char *subject, json_t **out)
{
    wctl_buf path = {0};
    if (s->scope == NODE)
        wctl_buf_puts(&path, s->api);
    else
        wctl_api_path(&path, s->api, subject, (const char *)NULL);
    wctl_buf_puts(&path, s->suffix);
    int status = 0;
    int rc = wctl_get_json(c, wctl_buf_str(&path), true, out, &status);
    wctl_buf_free(&path);
    if (rc == 0 && status == 404 && s->scope == USER) {
        wctl_error("{:no_such_user, \"%s\"}", subject);
        return WCTL_EXIT_UNAVAILABLE;
    }
    if (rc == 0 && status == 404 && s->scope == VHOST_CHECKED)
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
    const json_t *rows = rows_of(answer);
    if (!json_is_array(rows)) {
        json_decref(answer);
        wctl_error("the broker's answer to %s is not a list", s->api);
        return WCTL_EXIT_SOFTWARE;
    }
    wctl_buf out = {0};
    wctl_listing_render(&out, l, cols, ncols, rows, !o->silent && !o->no_headers, o->json);
    fwrite(wctl_buf_str(&out), 1, out.len, stdout);
    wctl_buf_free(&out);
    json_decref(answer);
    return WCTL_EXIT_OK;
}
