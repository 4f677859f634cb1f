/* The command table (names, arguments, options, usage lines and help
 * groups as rabbitmqctl 3.10 has them), help output, the "Did you mean"
 * suggestion, and wctl_main's dispatch: parse, validate the way rabbitmqctl
 * does (options, then argument count), then run the handler. */
#include <stdio.h>
#include <string.h>

#include "wctl_internal.h"

#define LIST (WCTL_OPT_NO_HEADERS)
#define POLICY (WCTL_OPT_PRIORITY | WCTL_OPT_APPLY_TO)
#define VHOST_OPTS (WCTL_OPT_DESCRIPTION | WCTL_OPT_TAGS | WCTL_OPT_QUEUE_TYPE)

static const wctl_command commands[] = {
    {"help", "Help", 0, 1, 0, "help (<command> | [--list-commands])",
     "Displays usage information for a command", wctl_cmd_help},
    {"await_startup", "Nodes", 0, 0, 0, "await_startup [--timeout <timeout>]",
     "Waits for the broker to start (its management API to answer)", wctl_cmd_await_startup},
    {"cluster_status", "Cluster", 0, 0, 0, "cluster_status [--timeout <timeout>]",
     "Displays all the nodes in the cluster grouped by node type, together with the currently "
     "running nodes", wctl_cmd_cluster_status},
    {"add_user", "Users", 1, 2, 0, "add_user <username> <password>",
     "Creates a new user in the internal database. This user will have no permissions for any "
     "virtual hosts by default.", wctl_cmd_add_user},
    {"authenticate_user", "Users", 1, 2, 0, "authenticate_user <username> <password>",
     "Attempts to authenticate a user. Exits with a non-zero code if authentication fails.",
     wctl_cmd_authenticate_user},
    {"change_password", "Users", 1, 2, 0, "change_password <username> <password>",
     "Changes the user password", wctl_cmd_change_password},
    {"clear_user_limits", "Users", 2, 2, 0, "clear_user_limits <username> <limit_name> | all",
     "Clears user connection/channel limits", wctl_cmd_clear_user_limits},
    {"delete_user", "Users", 1, 1, 0, "delete_user <username>",
     "Removes a user from the internal database", wctl_cmd_delete_user},
    {"list_user_limits", "Users", 0, 0, WCTL_OPT_USER | WCTL_OPT_GLOBAL | LIST,
     "list_user_limits [--user <username>] [--global]",
     "Displays configured user limits", wctl_cmd_list_user_limits},
    {"list_users", "Users", 0, 0, LIST, "list_users [--no-table-headers] [--timeout <timeout>]",
     "List user names and tags", wctl_cmd_list},
    {"set_user_limits", "Users", 2, 2, 0, "set_user_limits <username> <definition>",
     "Sets user limits", wctl_cmd_set_user_limits},
    {"set_user_tags", "Users", 1, -1, 0, "set_user_tags <username> <tag> [...]",
     "Sets user tags", wctl_cmd_set_user_tags},
    {"clear_permissions", "Access Control", 1, 1, 0,
     "clear_permissions [--vhost <vhost>] <username>", "Revokes user permissions for a vhost",
     wctl_cmd_clear_permissions},
    {"clear_topic_permissions", "Access Control", 1, 2, 0,
     "clear_topic_permissions [--vhost <vhost>] <username> [<exchange>]",
     "Clears user topic permissions for a vhost or exchange", wctl_cmd_clear_topic_permissions},
    {"list_permissions", "Access Control", 0, 0, LIST,
     "list_permissions [--vhost <vhost>] [--no-table-headers] [--timeout <timeout>]",
     "Lists user permissions in a virtual host", wctl_cmd_list},
    {"list_topic_permissions", "Access Control", 0, 0, LIST,
     "list_topic_permissions [--vhost <vhost>] [--no-table-headers] [--timeout <timeout>]",
     "Lists topic permissions in a virtual host", wctl_cmd_list},
    {"list_user_permissions", "Access Control", 1, 1, LIST,
     "list_user_permissions [--no-table-headers] <username> [--timeout <timeout>]",
     "Lists permissions of a user across all virtual hosts", wctl_cmd_list},
    {"list_user_topic_permissions", "Access Control", 1, 1, LIST,
     "list_user_topic_permissions [--no-table-headers] <username> [--timeout <timeout>]",
     "Lists user topic permissions", wctl_cmd_list},
    {"list_vhosts", "Access Control", 0, -1, LIST,
     "list_vhosts [--no-table-headers] [<column> ...] [--timeout <timeout>]",
     "Lists virtual hosts", wctl_cmd_list},
    {"set_permissions", "Access Control", 4, 4, 0,
     "set_permissions [--vhost <vhost>] <username> <conf> <write> <read>",
     "Sets user permissions for a vhost", wctl_cmd_set_permissions},
    {"set_topic_permissions", "Access Control", 4, 4, 0,
     "set_topic_permissions [--vhost <vhost>] <username> <exchange> <write> <read>",
     "Sets user topic permissions for an exchange", wctl_cmd_set_topic_permissions},
    {"list_bindings", "Monitoring, observability and health checks", 0, -1, LIST,
     "list_bindings [--vhost <vhost>] [--no-table-headers] [<column> ...] [--timeout <timeout>]",
     "Lists all bindings on a vhost", wctl_cmd_list},
    {"list_channels", "Monitoring, observability and health checks", 0, -1, LIST,
     "list_channels [--no-table-headers] [<column> ...]", "Lists all channels in the node",
     wctl_cmd_list},
    {"list_connections", "Monitoring, observability and health checks", 0, -1, LIST,
     "list_connections [--no-table-headers] [<column> ...] [--timeout <timeout>]",
     "Lists AMQP 0.9.1 connections for the node", wctl_cmd_list},
    {"list_consumers", "Monitoring, observability and health checks", 0, -1, LIST,
     "list_consumers [--vhost <vhost>] [--no-table-headers] [<column> ...] [--timeout <timeout>]",
     "Lists all consumers for a vhost", wctl_cmd_list},
    {"list_exchanges", "Monitoring, observability and health checks", 0, -1, LIST,
     "list_exchanges [--vhost <vhost>] [--no-table-headers] [<column> ...] [--timeout <timeout>]",
     "Lists exchanges", wctl_cmd_list},
    {"list_queues", "Monitoring, observability and health checks", 0, -1,
     LIST | WCTL_OPT_QUEUE_FILTER,
     "list_queues [--vhost <vhost>] [--online] [--offline] [--local] [--no-table-headers] "
     "[<column>, ...] [--timeout <timeout>]",
     "Lists queues and their properties", wctl_cmd_list},
    {"list_unresponsive_queues", "Monitoring, observability and health checks", 0, -1,
     LIST | WCTL_OPT_QUEUE_FILTER | WCTL_OPT_QUEUE_TIMEOUT,
     "list_unresponsive_queues [--local] [--queue-timeout <milliseconds>] [<column> ...] "
     "[--no-table-headers] [--timeout <timeout>]",
     "Tests queues to respond within timeout. Lists those which did not respond", wctl_cmd_list},
    {"ping", "Monitoring, observability and health checks", 0, 0, 0, "ping [--timeout <timeout>]",
     "Checks that the broker is up and its management API answers", wctl_cmd_ping},
    {"report", "Monitoring, observability and health checks", 0, 0, 0, "report",
     "Generate a server status report containing a concatenation of all server status "
     "information for support purposes", wctl_cmd_report},
    {"status", "Monitoring, observability and health checks", 0, 0, WCTL_OPT_UNIT,
     "status [--unit <unit>] [--timeout <timeout>]", "Displays status of a node",
     wctl_cmd_status},
    {"clear_global_parameter", "Parameters", 1, 1, 0, "clear_global_parameter <name>",
     "Clears a global runtime parameter", wctl_cmd_clear_parameter},
    {"clear_parameter", "Parameters", 2, 2, 0,
     "clear_parameter [--vhost <vhost>] <component_name> <name>", "Clears a runtime parameter.",
     wctl_cmd_clear_parameter},
    {"list_global_parameters", "Parameters", 0, 0, LIST,
     "list_global_parameters [--no-table-headers] [--timeout <timeout>]",
     "Lists global runtime parameters", wctl_cmd_list},
    {"list_parameters", "Parameters", 0, 0, LIST,
     "list_parameters [--vhost <vhost>] [--no-table-headers] [--timeout <timeout>]",
     "Lists runtime parameters for a virtual host", wctl_cmd_list},
    {"set_global_parameter", "Parameters", 2, 2, 0, "set_global_parameter <name> <value>",
     "Sets a runtime parameter.", wctl_cmd_set_parameter},
    {"set_parameter", "Parameters", 3, 3, 0,
     "set_parameter [--vhost <vhost>] <component_name> <name> <value>",
     "Sets a runtime parameter.", wctl_cmd_set_parameter},
    {"clear_operator_policy", "Policies", 1, 1, 0, "clear_operator_policy [--vhost <vhost>] <name>",
     "Clears an operator policy", wctl_cmd_clear_policy},
    {"clear_policy", "Policies", 1, 1, 0, "clear_policy [--vhost <vhost>] <name>",
     "Clears (removes) a policy", wctl_cmd_clear_policy},
    {"list_operator_policies", "Policies", 0, 0, LIST,
     "list_operator_policies [--vhost <vhost>] [--no-table-headers] [--timeout <timeout>]",
     "Lists operator policy overrides for a virtual host", wctl_cmd_list},
    {"list_policies", "Policies", 0, 0, LIST,
     "list_policies [--vhost <vhost>] [--no-table-headers] [--timeout <timeout>]",
     "Lists all policies in a virtual host", wctl_cmd_list},
    {"set_operator_policy", "Policies", 3, 3, POLICY,
     "set_operator_policy [--vhost <vhost>] [--priority <priority>] [--apply-to <apply-to>] "
     "<name> <pattern> <definition>",
     "Sets an operator policy that overrides a subset of arguments in user policies",
     wctl_cmd_set_policy},
    {"set_policy", "Policies", 3, 3, POLICY,
     "set_policy [--vhost <vhost>] [--priority <priority>] [--apply-to <apply-to>] <name> "
     "<pattern> <definition>",
     "Sets or updates a policy", wctl_cmd_set_policy},
    {"add_vhost", "Virtual hosts", 1, 1, VHOST_OPTS,
     "add_vhost <vhost> [--description <description> --tags \"<tag1>,<tag2>,<...>\" "
     "--default-queue-type <quorum|classic|stream>]",
     "Creates a virtual host", wctl_cmd_add_vhost},
    {"clear_vhost_limits", "Virtual hosts", 0, 0, 0, "clear_vhost_limits [--vhost <vhost>]",
     "Clears virtual host limits", wctl_cmd_clear_vhost_limits},
    {"delete_vhost", "Virtual hosts", 1, 1, 0, "delete_vhost <vhost>", "Deletes a virtual host",
     wctl_cmd_delete_vhost},
    {"list_vhost_limits", "Virtual hosts", 0, 0, WCTL_OPT_GLOBAL | LIST,
     "list_vhost_limits [--vhost <vhost>] [--global] [--no-table-headers]",
     "Displays configured virtual host limits", wctl_cmd_list_vhost_limits},
    {"set_vhost_limits", "Virtual hosts", 1, 1, 0, "set_vhost_limits [--vhost <vhost>] <definition>",
     "Sets virtual host limits", wctl_cmd_set_vhost_limits},
    {"environment", "Configuration and Environment", 0, 0, 0, "environment",
     "Displays the name and value of each setting in the broker's effective configuration",
     wctl_cmd_environment},
    {"reload_certificates", "Configuration and Environment", 0, 0, 0, "reload_certificates",
     "Reloads the certificates and keys of every TLS listener (Warren's)",
     wctl_cmd_reload_certificates},
    {"set_vm_memory_high_watermark", "Configuration and Environment", 1, 2, 0,
     "set_vm_memory_high_watermark <fraction> | absolute <value>",
     "Sets the vm_memory_high_watermark setting", wctl_cmd_set_vm_memory_high_watermark},
    {"export_definitions", "Definitions", 1, 1, WCTL_OPT_FORMAT,
     "export_definitions <file_path | \"-\"> [--format <json>] [--timeout <timeout>]",
     "Exports definitions in JSON", wctl_cmd_export_definitions},
    {"import_definitions", "Definitions", 0, 1, WCTL_OPT_FORMAT | WCTL_OPT_SKIP_UNCHANGED,
     "import_definitions <file_path | \"-\"> [--format <json>] [--skip-if-unchanged] "
     "[--timeout <timeout>]",
     "Imports definitions in JSON", wctl_cmd_import_definitions},
    {"list_feature_flags", "Feature flags", 0, -1, LIST,
     "list_feature_flags [<column> ...] [--timeout <timeout>]", "Lists feature flags",
     wctl_cmd_list},
    {"close_all_connections", "Operations", 1, 1,
     WCTL_OPT_CLOSE_LIMIT | WCTL_OPT_GLOBAL | WCTL_OPT_CLOSE_DELAY,
     "close_all_connections [--vhost <vhost> --limit <limit>] [-n <node> --global] "
     "[--per-connection-delay <delay>] <explanation>",
     "Instructs the broker to close all connections for the specified vhost or entire RabbitMQ "
     "node", wctl_cmd_close_all_connections},
    {"close_connection", "Operations", 2, 2, 0, "close_connection <connection name> <explanation>",
     "Instructs the broker to close the connection of that name (see list_connections name)",
     wctl_cmd_close_connection},
    {"delete_queue", "Queues", 1, 1, WCTL_OPT_IF_EMPTY | WCTL_OPT_IF_UNUSED,
     "delete_queue <queue_name> [--if-empty|-e] [--if-unused|-u] [--timeout <timeout>]",
     "Deletes a queue", wctl_cmd_delete_queue},
    {"purge_queue", "Queues", 1, 1, 0, "purge_queue <queue> [--timeout <timeout>]",
     "Purges a queue (removes all messages in it)", wctl_cmd_purge_queue},
    {"move_messages", "Queues", 1, 1,
     WCTL_OPT_TO_QUEUE | WCTL_OPT_TO_EXCHANGE | WCTL_OPT_ROUTING_KEY | WCTL_OPT_LIMIT |
         WCTL_OPT_RATE | WCTL_OPT_NO_WAIT | WCTL_OPT_STATUS | WCTL_OPT_CANCEL |
         WCTL_OPT_MATCH_HEADER | WCTL_OPT_MATCH_VALUE,
     "move_messages <queue> [--to-queue <queue> | --to-exchange <exchange> [--routing-key <key>]] "
     "[--count <n>] [--rate <msg/s>] [--match-header <header> [--match-value <value>]] "
     "[--no-wait] | move_messages <queue> --status | --cancel",
     "Moves a queue's messages (a dead-letter queue's, by default back to the queue each one "
     "died in) and reports where they went (Warren only)",
     wctl_cmd_move_messages},
    /* rabbitmq_shovel's */
    {"delete_shovel", "Shovel plugin", 1, 1, 0, "delete_shovel [--vhost <vhost>] <name>",
     "Deletes a Shovel", wctl_cmd_delete_shovel},
    {"restart_shovel", "Shovel plugin", 1, 1, 0, "restart_shovel [--vhost <vhost>] <name>",
     "Restarts a dynamic Shovel", wctl_cmd_delete_shovel},
    {"shovel_status", "Shovel plugin", 0, 0, 0, "shovel_status [--timeout <timeout>]",
     "Displays status of Shovel on a node", wctl_cmd_shovel_status},
    /* rabbitmq-streams' (RabbitMQ 3.13) */
    {"add_super_stream", "Stream plugin", 1, 1, WCTL_OPT_SUPER_STREAM,
     "add_super_stream <name> [--vhost <vhost>] [--partitions <partitions>] [--binding-keys "
     "<binding-keys>] [--max-length-bytes <max-length-bytes>] [--max-age <max-age>] "
     "[--stream-max-segment-size-bytes <stream-max-segment-size-bytes>] [--leader-locator "
     "<leader-locator>] [--initial-cluster-size <initial-cluster-size>]",
     "Add a super stream", wctl_cmd_add_super_stream},
    {"delete_super_stream", "Stream plugin", 1, 1, 0, "delete_super_stream <name> [--vhost <vhost>]",
     "Delete a super stream", wctl_cmd_delete_super_stream},
    {"list_stream_consumers", "Stream plugin", 0, -1, LIST,
     "list_stream_consumers [--vhost <vhost>] [<column> ...]",
     "Lists all stream consumers for a vhost", wctl_cmd_list},
    {"list_stream_publishers", "Stream plugin", 0, -1, LIST,
     "list_stream_publishers [--vhost <vhost>] [<column> ...]",
     "Lists all stream publishers for a vhost", wctl_cmd_list},
    {"list_stream_group_consumers", "Stream plugin", 0, -1, LIST | WCTL_OPT_GROUP,
     "list_stream_group_consumers --stream <stream> --reference <reference> [--vhost <vhost>] "
     "[<column> ...]",
     "Lists consumers of a stream consumer group in a vhost", wctl_cmd_list_stream_group_consumers},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

const wctl_command *wctl_command_find(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

double wctl_jaro(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la == 0 && lb == 0)
        return 1.0;
    if (la == 0 || lb == 0 || la > 256 || lb > 256)
        return 0.0;
    int window = (la > lb ? la : lb) / 2 - 1;
    bool ma[256] = {false}, mb[256] = {false};
    int m = 0;
    for (int i = 0; i < la; i++)
        for (int j = i - window < 0 ? 0 : i - window; j <= i + window && j < lb; j++)
            if (!mb[j] && a[i] == b[j]) {
                ma[i] = mb[j] = true;
                m++;
                break;
            }
    if (m == 0)
        return 0.0;
    int t = 0;
    for (int i = 0, j = 0; i < la; i++) {
        if (!ma[i])
            continue;
        while (!mb[j])
            j++;
        t += a[i] != b[j++];
    }
    return ((double)m / la + (double)m / lb + (m - t / 2.0) / m) / 3.0;
}

const char *wctl_command_suggest(const char *name)
{
    const char *best = NULL;
    double best_score = 0.0;
    for (size_t i = 0; i < NCOMMANDS; i++) {
        double s = wctl_jaro(name, commands[i].name);
        if (s > best_score) {
            best_score = s;
            best = commands[i].name;
        }
    }
    return best_score >= 0.8 ? best : NULL;
}

/* ---- help ----------------------------------------------------------------------------- */

static const char *const groups[] = {
    "Help", "Nodes", "Cluster", "Users", "Access Control",
    "Monitoring, observability and health checks", "Parameters", "Policies", "Virtual hosts",
    "Configuration and Environment", "Definitions", "Feature flags", "Operations", "Queues",
    "Stream plugin", /* rabbitmq-streams' commands */
};

static void connection_help(FILE *f)
{
    fputs("\033[1mConnecting to the broker\033[0m\n\n"
          "Without --url, warrenctl talks to the broker on this host over the Unix socket\n"
          "<data_dir>/warrenctl.sock, which only the broker's own OS user may open; it needs\n"
          "no password there, as rabbitmqctl needs none. -n <name>@<host> with another host\n"
          "uses that host's management HTTP API (port 15672); with this host, the socket, or\n"
          "when none is found this host's management API. The name part is not checked.\n\n"
          "   --socket <path>               the control socket (else $WARREN_CTL_SOCKET)\n"
          "   --data-dir <dir>              the broker's data_dir (default ./var)\n"
          "   --config <file>               read data_dir (and management.tcp.port) from the\n"
          "                                 broker's warren.conf\n"
          "   --url http://<host>:<port>    use that broker's management HTTP API instead\n"
          "   --management-port <port>      the management API's port for -n (default 15672)\n"
          "   -u, --username <user>         its user (default guest); before the command name\n"
          "   -p, --password <password>     its password: -p right after -u before the command\n"
          "                                 name; elsewhere -p is the vhost, as in rabbitmqctl\n\n",
          f);
}

void wctl_help_all(FILE *f)
{
    fputs("\n\033[1mUsage\033[0m\n\nwarrenctl [--node <node>] [--timeout <timeout>] [--longnames] "
          "[--quiet] <command> [<command options>]\n\nAvailable commands:\n\n",
          f);
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        fprintf(f, "\033[1m%s\033[0m:\n\n", groups[g]);
        for (size_t i = 0; i < NCOMMANDS; i++)
            if (strcmp(commands[i].group, groups[g]) == 0)
                fprintf(f, "   %-29s %s\n", commands[i].name, commands[i].summary);
        fputs("\n", f);
    }
    connection_help(f);
    fputs("Use 'warrenctl help <command>' to learn more about a specific command\n", f);
}

void wctl_help_usage_line(FILE *f, const wctl_command *cmd)
{
    fprintf(f, "warrenctl [--node <node>] [--longnames] [--quiet] %s\n", cmd->usage);
}

static void column_help(FILE *f, const wctl_command *cmd)
{
    const wctl_listing *l = wctl_listing_find(cmd->name);
    if (!l || !wctl_listing_takes_columns(l))
        return;
    fputs("\n\033[1mArguments and Options\033[0m\n\n<column>\n\tmust be one of ", f);
    wctl_listing_print_names(f, l);
    fputs("\n\n", f);
}

void wctl_help_command(FILE *f, const wctl_command *cmd)
{
    fputs("\n\033[1mUsage\033[0m\n\n", f);
    wctl_help_usage_line(f, cmd);
    fprintf(f, "\n%s.\n\n", cmd->summary);
    column_help(f, cmd);
    fputs("\n\033[1mGeneral Options\033[0m\n\n"
          "The following options are accepted by most or all commands.\n\n"
          "short            | long          | description\n"
          "-----------------|---------------|--------------------------------\n"
          "-?               | --help        | displays command help\n"
          "-n <node>        | --node <node> | the node: <name>@<host> (see below)\n"
          "-t               | --timeout <n> | operation timeout in seconds\n"
          "-q               | --quiet       | suppress informational messages\n"
          "-s               | --silent      | suppress informational messages\n"
          "                                 | and table header row\n"
          "-p               | --vhost       | for commands that are scoped to a virtual host,\n"
          "                 |               | virtual host to use\n"
          "                 | --formatter   | alternative result formatter to use: json or table\n\n",
          f);
    connection_help(f);
}

int wctl_cmd_help(wctl_ctx *c)
{
    if (c->o->nargs == 0 || strcmp(c->o->args[0], "--list-commands") == 0) {
        wctl_help_all(stdout);
        return WCTL_EXIT_OK;
    }
    const wctl_command *cmd = wctl_command_find(c->o->args[0]);
    if (!cmd) {
        wctl_error("\nCommand '%s' not found.", c->o->args[0]);
        return WCTL_EXIT_USAGE;
    }
    wctl_help_command(stdout, cmd);
    return WCTL_EXIT_OK;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

static int unknown_command(const char *name)
{
    const char *guess = wctl_command_suggest(name);
    fprintf(stderr, "\nCommand '%s' not found. \n", name);
    if (guess)
        fprintf(stderr, "Did you mean '%s'? \n\n", guess);
    else
        wctl_help_all(stderr);
    return WCTL_EXIT_USAGE;
}

/* rabbitmqctl's checks, in its order: options the command does not take,
 * then the number of positional arguments. */
static int validate(const wctl_ctx *c)
{
    const wctl_opts *o = c->o;
    unsigned bad = o->given & ~c->cmd->options;
    if (bad)
        return wctl_usage_error(c, WCTL_EXIT_USAGE, "Invalid options for this command:\n--%s : ",
                                o->given_as[__builtin_ctz(bad)]);
    if (o->nargs < c->cmd->min_args)
        return wctl_usage_error(c, WCTL_EXIT_USAGE, "not enough arguments.");
    if (c->cmd->max_args >= 0 && o->nargs > c->cmd->max_args)
        return wctl_usage_error(c, WCTL_EXIT_USAGE, "too many arguments.");
    return 0;
}

int wctl_main(int argc, char **argv)
{
    wctl_opts o;
    char err[512];
    bool parsed = wctl_parse_args(argc, argv, &o, err, sizeof err);
    wctl_ctx c;
    memset(&c, 0, sizeof c);
    c.o = &o;
    if (!o.command) {
        wctl_help_all(o.help ? stdout : stderr);
        return o.help ? WCTL_EXIT_OK : WCTL_EXIT_USAGE;
    }
    c.cmd = wctl_command_find(o.command);
    if (!c.cmd)
        return unknown_command(o.command);
    if (o.help) {
        wctl_help_command(stdout, c.cmd);
        return WCTL_EXIT_OK;
    }
    if (!parsed)
        return wctl_usage_error(&c, WCTL_EXIT_USAGE, "%s", err);
    int rc = validate(&c);
    if (rc)
        return rc;
    const wctl_command *cmd = c.cmd;
    if (!wctl_ctx_init(&c, &o, err, sizeof err)) {
        wctl_error("%s", err);
        return WCTL_EXIT_USAGE;
    }
    c.cmd = cmd;
    rc = cmd->run(&c);
    fflush(stdout);
    return rc;
}
