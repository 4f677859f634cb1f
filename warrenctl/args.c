/* Command-line parsing, as rabbitmqctl's: general options anywhere on the
 * line, command options after it, positional words in order, "--opt value"
 * or "--opt=value". The one ambiguity rabbitmqctl does not have: -p is the
 * vhost, but `-u user -p pass` before the command name is the rabbitmqadmin
 * habit for credentials, so -p right after -u (before the command) is the
 * password. After the command name -u is delete_queue's --if-unused. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wctl_internal.h"

enum field {
    F_NODE, F_LONGNAMES, F_QUIET, F_SILENT, F_TIMEOUT, F_VHOST, F_FORMATTER, F_HELP,
    F_URL, F_USERNAME, F_PASSWORD, F_SOCKET, F_DATA_DIR, F_CONFIG, F_MGMT_PORT,
    F_NO_HEADERS, F_PRIORITY, F_APPLY_TO, F_DESCRIPTION, F_TAGS, F_QUEUE_TYPE, F_IF_EMPTY,
    F_IF_UNUSED, F_FORMAT, F_SKIP_UNCHANGED, F_UNIT, F_QUEUE_FILTER, F_TO_QUEUE, F_TO_EXCHANGE,
    F_ROUTING_KEY, F_LIMIT, F_RATE, F_MATCH_HEADER, F_MATCH_VALUE, F_FLAG, F_CLOSE_LIMIT,
    F_CLOSE_DELAY, F_QUEUE_TIMEOUT, F_LIMITS_USER, F_PARTITIONS, F_BINDING_KEYS,
    F_MAX_LENGTH_BYTES, F_MAX_AGE, F_SEGMENT_SIZE, F_LEADER_LOCATOR, F_INITIAL_CLUSTER_SIZE,
    F_STREAM, F_REFERENCE,
};

typedef struct optdef {
    const char *name; /* long form, without "--" */
    char alias;       /* short form, or 0 */
    bool value;       /* takes a value */
    enum field field;
    unsigned bit;     /* WCTL_OPT_* for command options, 0 for general ones */
    bool connection;  /* left out of the "Arguments given" echo */
} optdef;

static const optdef optdefs[] = {
    {"node", 'n', true, F_NODE, 0, false},
    {"longnames", 'l', false, F_LONGNAMES, 0, false},
    {"quiet", 'q', false, F_QUIET, 0, false},
    {"silent", 's', false, F_SILENT, 0, false},
    {"timeout", 't', true, F_TIMEOUT, 0, false},
    {"vhost", 'p', true, F_VHOST, 0, false},
    {"formatter", 0, true, F_FORMATTER, 0, false},
    {"help", '?', false, F_HELP, 0, false},
    {"url", 0, true, F_URL, 0, true},
    {"username", 0, true, F_USERNAME, 0, true},
    {"password", 0, true, F_PASSWORD, 0, true},
    {"socket", 0, true, F_SOCKET, 0, true},
    {"data-dir", 0, true, F_DATA_DIR, 0, true},
    {"config", 0, true, F_CONFIG, 0, true},
    {"management-port", 0, true, F_MGMT_PORT, 0, true},
    {"no-table-headers", 0, false, F_NO_HEADERS, WCTL_OPT_NO_HEADERS, false},
    {"priority", 0, true, F_PRIORITY, WCTL_OPT_PRIORITY, false},
    {"apply-to", 0, true, F_APPLY_TO, WCTL_OPT_APPLY_TO, false},
    {"description", 0, true, F_DESCRIPTION, WCTL_OPT_DESCRIPTION, false},
    {"tags", 0, true, F_TAGS, WCTL_OPT_TAGS, false},
    {"default-queue-type", 0, true, F_QUEUE_TYPE, WCTL_OPT_QUEUE_TYPE, false},
    {"if-empty", 'e', false, F_IF_EMPTY, WCTL_OPT_IF_EMPTY, false},
    {"if-unused", 0, false, F_IF_UNUSED, WCTL_OPT_IF_UNUSED, false},
    {"format", 0, true, F_FORMAT, WCTL_OPT_FORMAT, false},
    {"skip-if-unchanged", 0, false, F_SKIP_UNCHANGED, WCTL_OPT_SKIP_UNCHANGED, false},
    {"unit", 0, true, F_UNIT, WCTL_OPT_UNIT, false},
    {"online", 0, false, F_QUEUE_FILTER, WCTL_OPT_QUEUE_FILTER, false},
    {"offline", 0, false, F_QUEUE_FILTER, WCTL_OPT_QUEUE_FILTER, false},
    {"local", 0, false, F_QUEUE_FILTER, WCTL_OPT_QUEUE_FILTER, false},
    {"to-queue", 0, true, F_TO_QUEUE, WCTL_OPT_TO_QUEUE, false},
    {"to-exchange", 0, true, F_TO_EXCHANGE, WCTL_OPT_TO_EXCHANGE, false},
    {"routing-key", 0, true, F_ROUTING_KEY, WCTL_OPT_ROUTING_KEY, false},
    {"count", 0, true, F_LIMIT, WCTL_OPT_LIMIT, false},
    {"rate", 0, true, F_RATE, WCTL_OPT_RATE, false},
    {"no-wait", 0, false, F_FLAG, WCTL_OPT_NO_WAIT, false},
    {"status", 0, false, F_FLAG, WCTL_OPT_STATUS, false},
    {"cancel", 0, false, F_FLAG, WCTL_OPT_CANCEL, false},
    {"match-header", 0, true, F_MATCH_HEADER, WCTL_OPT_MATCH_HEADER, false},
    {"match-value", 0, true, F_MATCH_VALUE, WCTL_OPT_MATCH_VALUE, false},
    {"limit", 0, true, F_CLOSE_LIMIT, WCTL_OPT_CLOSE_LIMIT, false},
    {"global", 0, false, F_FLAG, WCTL_OPT_GLOBAL, false},
    {"per-connection-delay", 0, true, F_CLOSE_DELAY, WCTL_OPT_CLOSE_DELAY, false},
    {"queue-timeout", 0, true, F_QUEUE_TIMEOUT, WCTL_OPT_QUEUE_TIMEOUT, false},
    {"user", 0, true, F_LIMITS_USER, WCTL_OPT_USER, false},
    {"partitions", 0, true, F_PARTITIONS, WCTL_OPT_SUPER_STREAM, false},
    {"binding-keys", 0, true, F_BINDING_KEYS, WCTL_OPT_SUPER_STREAM, false},
    {"max-length-bytes", 0, true, F_MAX_LENGTH_BYTES, WCTL_OPT_SUPER_STREAM, false},
    {"max-age", 0, true, F_MAX_AGE, WCTL_OPT_SUPER_STREAM, false},
    {"stream-max-segment-size-bytes", 0, true, F_SEGMENT_SIZE, WCTL_OPT_SUPER_STREAM, false},
    {"leader-locator", 0, true, F_LEADER_LOCATOR, WCTL_OPT_SUPER_STREAM, false},
    {"initial-cluster-size", 0, true, F_INITIAL_CLUSTER_SIZE, WCTL_OPT_SUPER_STREAM, false},
    {"stream", 0, true, F_STREAM, WCTL_OPT_GROUP, false},
    {"reference", 0, true, F_REFERENCE, WCTL_OPT_GROUP, false},
};

static const optdef *find_long(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof optdefs / sizeof optdefs[0]; i++)
        if (strlen(optdefs[i].name) == len && strncmp(optdefs[i].name, name, len) == 0)
            return &optdefs[i];
    return NULL;
}

/* A short option, given where it stands and what came before it. */
static const optdef *find_short(char c, const wctl_opts *o)
{
    if (c == 'u')
        return o->command ? find_long("if-unused", 9) : find_long("username", 8);
    if (c == 'p' && !o->command && o->username && !o->password)
        return find_long("password", 8);
    for (size_t i = 0; i < sizeof optdefs / sizeof optdefs[0]; i++)
        if (optdefs[i].alias == c)
            return &optdefs[i];
    return NULL;
}

static bool parse_int(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < -1000000000 || v > 1000000000)
        return false;
    *out = (int)v;
    return true;
}

/* An option no command knows, as rabbitmqctl reports it. */
static bool bad_option(const char *spelled, char *err, size_t errlen)
{
    snprintf(err, errlen, "Invalid options for this command:\n%s : ", spelled);
    return false;
}

static bool store_value(wctl_opts *o, const optdef *d, const char *v)
{
    switch (d->field) {
    case F_TIMEOUT: return parse_int(v, &o->timeout_s) && o->timeout_s >= 0;
    case F_PRIORITY: return parse_int(v, &o->priority);
    case F_VHOST: o->vhost = v; return true;
    case F_FORMATTER:
        if (strcmp(v, "json") != 0 && strcmp(v, "table") != 0)
            return false;
        o->json = strcmp(v, "json") == 0;
        return true;
    case F_URL: o->url = v; return true;
    case F_USERNAME: o->username = v; return true;
    case F_PASSWORD: o->password = v; return true;
    case F_SOCKET: o->socket_path = v; return true;
    case F_DATA_DIR: o->data_dir = v; return true;
    case F_CONFIG: o->config_file = v; return true;
    case F_NODE: o->node = v; return true;
    case F_MGMT_PORT: return parse_int(v, &o->mgmt_port) && o->mgmt_port >= 1 && o->mgmt_port <= 65535;
    case F_APPLY_TO: o->apply_to = v; return true;
    case F_DESCRIPTION: o->description = v; return true;
    case F_TAGS: o->tags = v; return true;
    case F_QUEUE_TYPE: o->queue_type = v; return true;
    case F_FORMAT: o->format = v; return true;
    case F_UNIT: o->unit = v; return true;
    case F_TO_QUEUE: o->to_queue = v; return true;
    case F_TO_EXCHANGE: o->to_exchange = v; return true;
    case F_ROUTING_KEY: o->routing_key = v; return true;
    case F_MATCH_HEADER: o->match_header = v; return true;
    case F_MATCH_VALUE: o->match_value = v; return true;
    case F_LIMIT: return parse_int(v, &o->limit) && o->limit >= 0;
    case F_RATE: return parse_int(v, &o->rate) && o->rate >= 1;
    case F_CLOSE_LIMIT: return parse_int(v, &o->close_limit) && o->close_limit >= 0;
    case F_CLOSE_DELAY: return parse_int(v, &o->close_delay_ms) && o->close_delay_ms >= 0;
    case F_LIMITS_USER: o->limits_user = v; return true;
    case F_PARTITIONS: /* given but < 1: -1, the command's refusal */
        if (!parse_int(v, &o->partitions))
            return false;
        if (o->partitions < 1)
            o->partitions = -1;
        return true;
    case F_BINDING_KEYS: o->binding_keys = v; return true;
    case F_MAX_LENGTH_BYTES: o->max_length_bytes = v; return true;
    case F_MAX_AGE: o->max_age = v; return true;
    case F_SEGMENT_SIZE: o->segment_size = v; return true;
    case F_LEADER_LOCATOR: o->leader_locator = v; return true;
    case F_INITIAL_CLUSTER_SIZE: o->initial_cluster_size = v; return true;
    case F_STREAM: o->stream = v; return true;
    case F_REFERENCE: o->reference = v; return true;
    case F_QUEUE_TIMEOUT: { /* checked, then unused: every queue answers at once */
        int ms;
        return parse_int(v, &ms) && ms >= 0;
    }
    default: return true;
    }
}

static void store_flag(wctl_opts *o, const optdef *d)
{
    switch (d->field) {
    case F_QUIET: o->quiet = true; break;
    case F_SILENT: o->silent = true; break;
    case F_HELP: o->help = true; break;
    case F_NO_HEADERS: o->no_headers = true; break;
    default: break; /* --longnames, --if-empty/--if-unused (in `given`), filters */
    }
}

static void echo(wctl_opts *o, const char *a)
{
    if (o->necho < (int)(sizeof o->echo / sizeof o->echo[0]))
        o->echo[o->necho++] = a;
}

/* Handles the option word argv[*i] (and its value); false on a usage error. */
static bool take_option(int argc, char **argv, int *i, wctl_opts *o, char *err, size_t errlen)
{
    const char *a = argv[*i], *inline_value = NULL, *v;
    const optdef *d;
    if (a[1] == '-') {
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        d = find_long(a + 2, len);
        inline_value = eq ? eq + 1 : NULL;
    } else {
        d = a[2] ? NULL : find_short(a[1], o);
    }
    if (!d || (inline_value && !d->value)) {
        echo(o, a);
        return bad_option(a, err, errlen);
    }
    if (!d->connection)
        echo(o, a);
    if (d->value) {
        v = inline_value;
        if (!v && *i + 1 < argc) {
            v = argv[++*i];
            if (!d->connection)
                echo(o, v);
        }
        if (!v || !store_value(o, d, v)) {
            snprintf(err, errlen, "Invalid options for this command:\n--%s : %s", d->name,
                     v ? v : "");
            return false;
        }
    } else {
        store_flag(o, d);
    }
    if (d->bit) {
        int b = __builtin_ctz(d->bit);
        o->given |= d->bit;
        if (!o->given_as[b])
            o->given_as[b] = d->name;
    }
    return true;
}

bool wctl_parse_args(int argc, char **argv, wctl_opts *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->vhost = "/";
    o->timeout_s = -1;
    bool positional_only = false, ok = true;
    char why[512];
    /* after an error keep going, so the command (and its usage line) is known */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool is_option = !positional_only && a[0] == '-' && a[1] != '\0' &&
                         !(isdigit((unsigned char)a[1]) && o->command);
        if (is_option && strcmp(a, "--") == 0) {
            positional_only = true;
            echo(o, a);
        } else if (is_option) {
            if (!take_option(argc, argv, &i, o, why, sizeof why) && ok) {
                snprintf(err, errlen, "%s", why);
                ok = false;
            }
        } else {
            echo(o, a);
            if (!o->command)
                o->command = a;
            else if (o->nargs < WCTL_MAX_ARGS)
                o->args[o->nargs++] = a;
            else if (ok)
                ok = (snprintf(err, errlen, "too many arguments."), false);
        }
    }
    return ok;
}
