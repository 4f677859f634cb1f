/* The list_* commands as tables: for each, rabbitmqctl's column names (with
 * its defaults) mapped to the fields of the management API's objects, the
 * endpoint, the informational line, and how rabbitmqctl lays it out. Where
 * rabbitmqctl shows an Erlang pid the API has none; a pid column shows the
 * object's name instead, which is what close_connection takes here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wctl_internal.h"

enum {
    TAKES_COLUMNS = 1,    /* positional arguments are column names */
    FIXED_ORDER = 2,      /* columns print in the table's order, not the request's (list_consumers) */
    BLANK_WHEN_EMPTY = 4, /* no rows: one empty line, JSON "[]" (rabbitmqctl's non-streaming lists) */
    NO_HEADER = 8,        /* rabbitmqctl prints no header line (list_user_topic_permissions) */
};

struct wctl_listing {
    const char *command;
    const wctl_column *columns;
    const char *defaults; /* space-separated */
    unsigned flags;
};

#define P WCTL_KIND_PLAIN
#define T WCTL_KIND_TABLE

static const wctl_column queue_columns[] = {
    {"arguments", "arguments", T}, {"auto_delete", "auto_delete", P},
    {"consumer_capacity", "consumer_capacity", P}, {"consumer_utilisation", "consumer_utilisation", P},
    {"consumers", "consumers", P}, {"disk_reads", "disk_reads", P}, {"disk_writes", "disk_writes", P},
    {"durable", "durable", P}, {"exclusive", "exclusive", P},
    {"exclusive_consumer_pid", "exclusive_consumer_pid", P},
    {"exclusive_consumer_tag", "exclusive_consumer_tag", P},
    {"head_message_timestamp", "head_message_timestamp", P}, {"leader", "leader", P},
    {"members", "members", P}, {"memory", "memory", P}, {"message_bytes", "message_bytes", P},
    {"message_bytes_persistent", "message_bytes_persistent", P},
    {"message_bytes_ram", "message_bytes_ram", P}, {"message_bytes_ready", "message_bytes_ready", P},
    {"message_bytes_unacknowledged", "message_bytes_unacknowledged", P},
    {"messages", "messages", P}, {"messages_persistent", "messages_persistent", P},
    {"messages_ram", "messages_ram", P}, {"messages_ready", "messages_ready", P},
    {"messages_ready_ram", "messages_ready_ram", P},
    {"messages_unacknowledged", "messages_unacknowledged", P},
    {"messages_unacknowledged_ram", "messages_unacknowledged_ram", P}, {"name", "name", P},
    {"online", "online", P}, {"owner_pid", "owner_pid_details.name", P}, {"pid", "pid", P},
    {"policy", "policy", P}, {"slave_pids", "slave_pids", P},
    {"synchronised_slave_pids", "synchronised_slave_pids", P}, {"state", "state", P},
    {"type", "type", P}, {NULL, NULL, P},
};

static const wctl_column exchange_columns[] = {
    {"arguments", "arguments", T}, {"auto_delete", "auto_delete", P}, {"durable", "durable", P},
    {"internal", "internal", P}, {"name", "name", P}, {"policy", "policy", P},
    {"type", "type", P}, {NULL, NULL, P},
};

static const wctl_column binding_columns[] = {
    {"arguments", "arguments", T}, {"destination_kind", "destination_type", P},
    {"destination_name", "destination", P}, {"routing_key", "routing_key", P},
    {"source_kind", "exchange", WCTL_KIND_CONSTANT}, {"source_name", "source", P},
    {NULL, NULL, P},
};

static const wctl_column connection_columns[] = {
    {"auth_mechanism", "auth_mechanism", P}, {"channel_max", "channel_max", P},
    {"channels", "channels", P}, {"client_properties", "client_properties", T},
    {"connected_at", "connected_at", P}, {"frame_max", "frame_max", P}, {"host", "host", P},
    {"name", "name", P}, {"peer_cert_issuer", "peer_cert_issuer", P},
    {"peer_cert_subject", "peer_cert_subject", P}, {"peer_cert_validity", "peer_cert_validity", P},
    {"peer_host", "peer_host", P}, {"peer_port", "peer_port", P}, {"pid", "name", P},
    {"port", "port", P}, {"protocol", "protocol", WCTL_KIND_PROTOCOL}, {"recv_cnt", "recv_cnt", P},
    {"recv_oct", "recv_oct", P}, {"send_cnt", "send_cnt", P}, {"send_oct", "send_oct", P},
    {"send_pend", "send_pend", P}, {"ssl", "ssl", P}, {"ssl_cipher", "ssl_cipher", P},
    {"ssl_hash", "ssl_hash", P}, {"ssl_key_exchange", "ssl_key_exchange", P},
    {"ssl_protocol", "ssl_protocol", P}, {"state", "state", P}, {"timeout", "timeout", P},
    {"user", "user", P}, {"vhost", "vhost", P}, {NULL, NULL, P},
};

static const wctl_column channel_columns[] = {
    {"acks_uncommitted", "acks_uncommitted", P}, {"confirm", "confirm", P},
    {"connection", "connection_details.name", P}, {"consumer_count", "consumer_count", P},
    {"global_prefetch_count", "global_prefetch_count", P},
    {"messages_unacknowledged", "messages_unacknowledged", P},
    {"messages_uncommitted", "messages_uncommitted", P},
    {"messages_unconfirmed", "messages_unconfirmed", P}, {"name", "name", P},
    {"number", "number", P}, {"pid", "name", P}, {"prefetch_count", "prefetch_count", P},
    {"transactional", "transactional", P}, {"user", "user", P}, {"vhost", "vhost", P},
    {NULL, NULL, P},
};

/* In rabbitmqctl's print order: list_consumers ignores the request's order. */
static const wctl_column consumer_columns[] = {
    {"queue_name", "queue.name", P}, {"channel_pid", "channel_details.name", P},
    {"consumer_tag", "consumer_tag", P}, {"ack_required", "ack_required", P},
    {"prefetch_count", "prefetch_count", P}, {"active", "active", P},
    {"activity_status", "activity_status", P}, {"arguments", "arguments", T},
    {NULL, NULL, P},
};

static const wctl_column user_columns[] = {
    {"user", "name", P}, {"tags", "tags", P}, {NULL, NULL, P},
};

static const wctl_column vhost_columns[] = {
    {"cluster_state", "cluster_state", WCTL_KIND_NODE_MAP},
    {"default_queue_type", "default_queue_type", P}, {"description", "description", P},
    {"name", "name", P}, {"tags", "tags", P}, {"tracing", "tracing", P}, {NULL, NULL, P},
};

static const wctl_column permission_columns[] = {
    {"user", "user", P}, {"configure", "configure", P}, {"write", "write", P},
    {"read", "read", P}, {NULL, NULL, P},
};

static const wctl_column user_permission_columns[] = {
    {"vhost", "vhost", P}, {"configure", "configure", P}, {"write", "write", P},
    {"read", "read", P}, {NULL, NULL, P},
};

static const wctl_column policy_columns[] = {
    {"vhost", "vhost", P}, {"name", "name", P}, {"pattern", "pattern", P},
    {"apply-to", "apply-to", P}, {"definition", "definition", WCTL_KIND_DEFINITION},
    {"priority", "priority", P}, {NULL, NULL, P},
};

static const wctl_column topic_permission_columns[] = {
    {"user", "user", P}, {"exchange", "exchange", P}, {"write", "write", P},
    {"read", "read", P}, {NULL, NULL, P},
};

static const wctl_column user_topic_permission_columns[] = {
    {"vhost", "vhost", P}, {"exchange", "exchange", P}, {"write", "write", P},
    {"read", "read", P}, {NULL, NULL, P},
};

static const wctl_column parameter_columns[] = {
    {"component", "component", P}, {"name", "name", P}, {"value", "value", WCTL_KIND_JSON_TEXT},
    {NULL, NULL, P},
};

static const wctl_column global_parameter_columns[] = {
    {"name", "name", P}, {"value", "value", WCTL_KIND_JSON_TEXT}, {NULL, NULL, P},
};

static const wctl_column feature_flag_columns[] = {
    {"desc", "desc", P}, {"doc_url", "doc_url", P}, {"name", "name", P},
    {"provided_by", "provided_by", P}, {"stability", "stability", P}, {"state", "state", P},
    {NULL, NULL, P},
};

static const wctl_column unresponsive_queue_columns[] = {
    {"arguments", "arguments", T}, {"auto_delete", "auto_delete", P}, {"durable", "durable", P},
    {"name", "name", P}, {"pid", "pid", P}, {"recoverable_slaves", "recoverable_slaves", P},
    {NULL, NULL, P},
};

/* rabbitmq-streams' (3.13's CONSUMER_INFO_ITEMS, PUBLISHER_INFO_ITEMS,
 * GROUP_CONSUMER_INFO_ITEMS) from rabbitmq_stream_management's objects. */
static const wctl_column stream_consumer_columns[] = {
    {"connection_pid", "connection_details.name", P}, {"node", "connection_details.node", P},
    {"subscription_id", "subscription_id", P}, {"stream", "queue.name", P},
    {"messages_consumed", "consumed", P}, {"offset", "offset", P}, {"offset_lag", "offset_lag", P},
    {"credits", "credits", P}, {"active", "active", P}, {"activity_status", "activity_status", P},
    {"properties", "properties", T}, {NULL, NULL, P},
};

static const wctl_column stream_publisher_columns[] = {
    {"connection_pid", "connection_details.name", P}, {"node", "connection_details.node", P},
    {"publisher_id", "publisher_id", P}, {"stream", "queue.name", P},
    {"reference", "reference", P}, {"messages_published", "published", P},
    {"messages_confirmed", "confirmed", P}, {"messages_errored", "errored", P}, {NULL, NULL, P},
};

static const wctl_column group_consumer_columns[] = {
    {"subscription_id", "subscription_id", P}, {"connection_name", "connection_details.name", P},
    {"state", "activity_status", P}, {NULL, NULL, P},
};

#undef P
#undef T

static const wctl_listing listings[] = {
    {"list_queues", queue_columns, "name messages", TAKES_COLUMNS},
    {"list_exchanges", exchange_columns, "name type", TAKES_COLUMNS},
    {"list_bindings", binding_columns,
     "source_name source_kind destination_name destination_kind routing_key arguments",
     TAKES_COLUMNS},
    {"list_connections", connection_columns, "user peer_host peer_port state", TAKES_COLUMNS},
    {"list_channels", channel_columns, "pid user consumer_count messages_unacknowledged",
     TAKES_COLUMNS},
    {"list_consumers", consumer_columns,
     "queue_name channel_pid consumer_tag ack_required prefetch_count active arguments",
     TAKES_COLUMNS | FIXED_ORDER},
    {"list_users", user_columns, "user tags", 0},
    {"list_vhosts", vhost_columns, "name", TAKES_COLUMNS},
    {"list_permissions", permission_columns, "user configure write read", BLANK_WHEN_EMPTY},
    {"list_user_permissions", user_permission_columns, "vhost configure write read",
     BLANK_WHEN_EMPTY},
    {"list_policies", policy_columns, "vhost name pattern apply-to definition priority",
     BLANK_WHEN_EMPTY},
    {"list_operator_policies", policy_columns, "vhost name pattern apply-to definition priority",
     BLANK_WHEN_EMPTY},
    {"list_topic_permissions", topic_permission_columns, "user exchange write read",
     BLANK_WHEN_EMPTY},
    {"list_user_topic_permissions", user_topic_permission_columns, "vhost exchange write read",
     BLANK_WHEN_EMPTY | NO_HEADER},
    {"list_parameters", parameter_columns, "component name value", BLANK_WHEN_EMPTY},
    {"list_global_parameters", global_parameter_columns, "name value", BLANK_WHEN_EMPTY},
    {"list_feature_flags", feature_flag_columns, "name state", TAKES_COLUMNS},
    {"list_unresponsive_queues", unresponsive_queue_columns, "name", TAKES_COLUMNS},
    {"list_stream_consumers", stream_consumer_columns,
     "subscription_id stream messages_consumed offset offset_lag credits active activity_status "
     "properties", TAKES_COLUMNS},
    {"list_stream_publishers", stream_publisher_columns,
     "publisher_id stream reference messages_published messages_confirmed messages_errored",
     TAKES_COLUMNS},
    {"list_stream_group_consumers", group_consumer_columns, "subscription_id connection_name state",
     TAKES_COLUMNS},
};

const wctl_listing *wctl_listing_find(const char *command)
{
    for (size_t i = 0; i < sizeof listings / sizeof listings[0]; i++)
        if (strcmp(listings[i].command, command) == 0)
            return &listings[i];
    return NULL;
}

static const wctl_column *column_named(const wctl_listing *l, const char *name, size_t len)
{
    for (const wctl_column *c = l->columns; c->name; c++)
        if (strlen(c->name) == len && strncmp(c->name, name, len) == 0)
            return c;
    return NULL;
}

static int default_columns(const wctl_listing *l, const wctl_column **cols, int maxcols)
{
    int n = 0;
    for (const char *p = l->defaults; *p && n < maxcols;) {
        size_t len = strcspn(p, " ");
        cols[n++] = column_named(l, p, len);
        p += len + (p[len] == ' ');
    }
    return n;
}

/* list_consumers keeps its own order: the requested columns, sorted by
 * their position in the table. */
static void table_order(const wctl_column **cols, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && cols[j] < cols[j - 1]; j--) {
            const wctl_column *t = cols[j];
            cols[j] = cols[j - 1];
            cols[j - 1] = t;
        }
}

int wctl_listing_columns(const wctl_listing *l, const char *const *names, int nnames,
                         const wctl_column **cols, int maxcols, char *err, size_t errlen)
{
    if (nnames == 0)
        return default_columns(l, cols, maxcols);
    if (!(l->flags & TAKES_COLUMNS)) {
        snprintf(err, errlen, "too many arguments.");
        return 0;
    }
    /* rabbitmqctl also accepts "name,messages" as one argument */
    wctl_buf bad = {0};
    int n = 0;
    for (int i = 0; i < nnames; i++)
        for (const char *p = names[i]; *p;) {
            size_t len = strcspn(p, ",");
            const wctl_column *c = len ? column_named(l, p, len) : NULL;
            if (c && n < maxcols)
                cols[n++] = c;
            else if (len)
                wctl_buf_printf(&bad, "%s%.*s", bad.len ? "," : "", (int)len, p);
            p += len + (p[len] == ',');
        }
    if (bad.len) {
        snprintf(err, errlen, "Info key(s) %s are not supported", wctl_buf_str(&bad));
        wctl_buf_free(&bad);
        return 0;
    }
    if (l->flags & FIXED_ORDER)
        table_order(cols, n);
    return n;
}

const json_t *wctl_column_value(const wctl_column *c, const json_t *object)
{
    if (c->kind == WCTL_KIND_CONSTANT)
        return NULL;
    const json_t *v = object;
    for (const char *p = c->path; v && *p;) {
        size_t len = strcspn(p, ".");
        v = json_is_object(v) ? json_object_getn(v, p, len) : NULL;
        p += len + (p[len] == '.');
    }
    return v;
}

static void render_row(wctl_buf *out, const wctl_column *const *cols, int ncols,
                       const json_t *row, bool json)
{
    for (int i = 0; i < ncols; i++) {
        const json_t *v = wctl_column_value(cols[i], row);
        if (json) {
            json_t *key = json_string(cols[i]->name);
            char *k = json_dumps(key, JSON_ENCODE_ANY);
            wctl_buf_printf(out, "%s%s:", i ? "," : "{", k);
            free(k);
            json_decref(key);
            wctl_format_json(out, v, cols[i]->kind, cols[i]->path);
        } else {
            if (i)
                wctl_buf_puts(out, "\t");
            wctl_format_cell(out, v, cols[i]->kind, cols[i]->path);
        }
    }
    wctl_buf_puts(out, json ? "}\n" : "\n");
}

void wctl_listing_render(wctl_buf *out, const wctl_listing *l, const wctl_column *const *cols,
                         int ncols, const json_t *rows, bool headers, bool json)
{
    size_t nrows = json_array_size(rows);
    if (nrows == 0) {
        if (l->flags & BLANK_WHEN_EMPTY)
            wctl_buf_puts(out, json ? "[]\n" : "\n");
        else if (json)
            wctl_buf_puts(out, "[\n]\n");
        return;
    }
    if (json) {
        wctl_buf_puts(out, "[\n");
    } else if (headers && !(l->flags & NO_HEADER)) {
        for (int i = 0; i < ncols; i++)
            wctl_buf_printf(out, "%s%s", i ? "\t" : "", cols[i]->name);
        wctl_buf_puts(out, "\n");
    }
    for (size_t r = 0; r < nrows; r++) {
        if (json && r)
            wctl_buf_puts(out, ",");
        render_row(out, cols, ncols, json_array_get(rows, r), json);
    }
    if (json)
        wctl_buf_puts(out, "]\n");
}

bool wctl_listing_takes_columns(const wctl_listing *l)
{
    return l->flags & TAKES_COLUMNS;
}

void wctl_listing_print_names(FILE *f, const wctl_listing *l)
{
    const char *last = "";
    for (;;) { /* selection by name: the tables are a few dozen entries */
        const char *next = NULL;
        for (const wctl_column *c = l->columns; c->name; c++)
            if (strcmp(c->name, last) > 0 && (!next || strcmp(c->name, next) < 0))
                next = c->name;
        if (!next)
            return;
        fprintf(f, "%s%s", *last ? ", " : "", next);
        last = next;
    }
}
