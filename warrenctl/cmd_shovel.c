/* rabbitmq_shovel's commands: shovel_status (GET /api/shovels), and
 * delete_shovel / restart_shovel (DELETE /api/shovels/vhost/{vh}/{name}
 * [/restart]), with rabbitmqctl 3.10's words.
 *
 * shovel_status prints, per shovel, RabbitMQ's keys sorted (destination,
 * destination_protocol, destination_queue | destination_exchange(_key),
 * last_changed, name, source, source_exchange(_key) | source_queue,
 * source_protocol, state, termination_reason, type, vhost); the header is
 * the first row's keys, as rabbitmqctl prints it. --formatter json gives
 * the rows as a JSON array, one per line. */
#include <stdlib.h>
#include <string.h>

#include "wctl_internal.h"

/* api key -> rabbitmqctl key */
static const char *const renames[][2] = {
    {"dest_uri", "destination"},          {"dest_protocol", "destination_protocol"},
    {"dest_queue", "destination_queue"},  {"dest_exchange", "destination_exchange"},
    {"dest_exchange_key", "destination_exchange_key"},
    {"src_uri", "source"},                {"src_protocol", "source_protocol"},
    {"src_queue", "source_queue"},        {"src_exchange", "source_exchange"},
    {"src_exchange_key", "source_exchange_key"},
    {"name", "name"}, {"state", "state"}, {"type", "type"}, {"vhost", "vhost"},
};

/* "2026-12-07 9:16:48" -> "2026-12-07 09:16:48" */
static json_t *last_changed(const char *ts)
{
    char out[40];
    int y, mo, d, h, mi, s;
    if (!ts || sscanf(ts, "%d-%d-%d %d:%d:%d", &y, &mo, &d, &h, &mi, &s) != 6)
        return json_string("");
    snprintf(out, sizeof out, "%04d-%02d-%02d %02d:%02d:%02d", y, mo, d, h, mi, s);
    return json_string(out);
}

static json_t *row_of(json_t *s)
{
    json_t *row = json_object();
    for (size_t i = 0; i < sizeof renames / sizeof renames[0]; i++) {
        json_t *v = json_object_get(s, renames[i][0]);
        if (v)
            json_object_set(row, renames[i][1], v);
    }
    static const char *const base[] = {"destination", "destination_protocol", "source",
                                       "source_protocol"};
    for (size_t i = 0; i < 4; i++)
        if (!json_object_get(row, base[i]))
            json_object_set_new(row, base[i], json_string(""));
    const char *reason = json_string_value(json_object_get(s, "reason"));
    json_object_set_new(row, "termination_reason", json_string(reason ? reason : ""));
    json_object_set_new(row, "last_changed",
                        last_changed(json_string_value(json_object_get(s, "timestamp"))));
    return row;
}

static int compare_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The row's keys, sorted, into keys[] (at most 32); their count. */
static size_t sorted_keys(json_t *row, const char **keys)
{
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(row, k, v) if (n < 32) keys[n++] = k;
    qsort(keys, n, sizeof *keys, compare_keys);
    return n;
}

static void print_rows(const wctl_ctx *c, json_t *rows)
{
    const char *keys[32];
    size_t i;
    json_t *row;
    if (c->o->json) {
        printf("[\n");
        json_array_foreach(rows, i, row) {
            char *text = json_dumps(row, JSON_COMPACT | JSON_SORT_KEYS);
            printf("%s%s\n", i ? "," : "", text ? text : "{}");
            free(text);
        }
        printf("]\n");
        return;
    }
    json_array_foreach(rows, i, row) {
        size_t n = sorted_keys(row, keys);
        if (i == 0 && !c->o->no_headers)
            for (size_t k = 0; k < n; k++)
                printf("%s%s", keys[k], k + 1 < n ? "\t" : "\n");
        for (size_t k = 0; k < n; k++)
            printf("%s%s", json_string_value(json_object_get(row, keys[k])), k + 1 < n ? "\t" : "\n");
    }
}

int wctl_cmd_shovel_status(wctl_ctx *c)
{
    json_t *list;
    wctl_info(c, "Shovel status on node %s", wctl_node_name(c));
    int rc = wctl_get_json(c, "/api/shovels", false, &list, NULL);
    if (rc)
        return rc;
    json_t *rows = json_array();
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s) json_array_append_new(rows, row_of(s));
    print_rows(c, rows);
    json_decref(rows);
    json_decref(list);
    return WCTL_EXIT_OK;
}

static int not_found(wctl_ctx *c, const char *vhost)
{
    wctl_error("Shovel with the given name was not found on the target node '%s' and / or "
               "virtual host '%s'", wctl_node_name(c), vhost);
    return WCTL_EXIT_UNAVAILABLE;
}

int wctl_cmd_delete_shovel(wctl_ctx *c)
{
    const char *name = c->o->args[0];
    bool restart = strcmp(c->cmd->name, "restart_shovel") == 0;
    wctl_buf path = {0};
    if (restart)
        wctl_info(c, "Restarting dynamic Shovel %s in virtual host %s on node %s", name,
                  c->o->vhost, wctl_node_name(c));
    else
        wctl_info(c, "Deleting shovel %s in vhost %s", name, c->o->vhost);
    wctl_api_path(&path, "/api/shovels/vhost", c->o->vhost, name, restart ? "restart" : NULL,
                  (const char *)NULL);
    return wctl_change(c, "DELETE", &path, NULL, NULL, not_found, c->o->vhost);
}
