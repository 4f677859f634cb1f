/* warrenctl's private interface between its own files: the invocation
 * context, the HTTP transport, the command table and the command handlers.
 * Nothing outside warrenctl/ includes this header. */
#ifndef WARREN_WCTL_INTERNAL_H
#define WARREN_WCTL_INTERNAL_H

#include <stdio.h>

#include "warrenctl.h"

/* malloc'd copy of s[0..n) plus a NUL; aborts when memory runs out. */
char *wctl_strndup(const char *s, size_t n);

/* ---- transport ------------------------------------------------------------ */

typedef struct wctl_target {
    bool is_unix;
    char unix_path[108]; /* sizeof sun_path */
    char host[256];
    int port;
} wctl_target;

typedef enum wctl_net {
    WCTL_NET_OK,
    WCTL_NET_CONNECT, /* nothing listens there (errno says why) */
    WCTL_NET_TIMEOUT, /* the deadline passed */
    WCTL_NET_IO,      /* the connection broke mid-request */
    WCTL_NET_PROTOCOL /* the peer's answer is not HTTP */
} wctl_net;

/* True once raw[0..len) may hold a whole response, so the client parses
 * only then (a chunked body is complete only after an empty line). */
bool wctl_http_may_be_complete(const char *raw, size_t len);

/* Sends request[0..len) to t and reads one response (the request asks for
 * Connection: close). deadline_ms is on CLOCK_MONOTONIC. On WCTL_NET_OK
 * *resp owns the response; otherwise *sys_errno tells why (0 if none). */
wctl_net wctl_http_roundtrip(const wctl_target *t, const char *request, size_t len,
                             long long deadline_ms, wctl_response *resp, int *sys_errno);

long long wctl_now_ms(void);

/* ---- invocation context --------------------------------------------------- */

typedef struct wctl_command wctl_command;

typedef struct wctl_ctx {
    const wctl_opts *o;
    const wctl_command *cmd;
    wctl_target target;
    char prefix[512];   /* URL path before /api */
    char auth[600];     /* "Basic ..." when --url came with credentials, else "" */
    char where[700];    /* "socket /x/warrenctl.sock" or "http://h:p", for messages */
    int timeout_ms;     /* per request */
    char node[256];     /* the broker's node name, fetched on first use */
} wctl_ctx;

/* Resolves where the broker is: --url, else --socket, WARREN_CTL_SOCKET,
 * <data_dir>/warrenctl.sock with data_dir from --data-dir, the data_dir key
 * of --config, or ./var -- unless -n names another host, or this one
 * without a socket to be found, whose management API is used then
 * (client.c's top comment). False with the reason in err for a bad --url
 * or node name or an unreadable --config. */
bool wctl_ctx_init(wctl_ctx *c, const wctl_opts *o, char *err, size_t errlen);

/* Reads `key` (data_dir, management.tcp.port) of a RabbitMQ-style "key =
 * value" file into out ("" when the file has none). False if the file
 * cannot be read. */
bool wctl_config_value(const char *path, const char *key, char *out, size_t outlen);

/* One API call. path starts with "/api" and is already percent-encoded;
 * body (JSON) may be NULL; extra_header is one "Name: value" line or NULL;
 * basic_auth overrides the context's credentials when not NULL. Returns 0
 * with *resp filled for any HTTP answer; otherwise prints rabbitmqctl's
 * "unable to perform an operation" or timeout error and returns the exit
 * code (69 or 75). */
int wctl_call(wctl_ctx *c, const char *method, const char *path, const char *body,
              const char *extra_header, const char *basic_auth, wctl_response *resp);

/* A change (PUT, POST, DELETE) that ends the command: sends body (JSON,
 * consumed; may be NULL) to path (freed), then returns wctl_done() on 2xx,
 * on_404(c, subject) on 404 when given (it reports what is missing in
 * rabbitmqctl's words), else wctl_http_error(). */
typedef int (*wctl_on_404)(wctl_ctx *c, const char *subject);
int wctl_change(wctl_ctx *c, const char *method, wctl_buf *path, json_t *body,
                const char *extra_header, wctl_on_404 on_404, const char *subject);

/* GET path without printing anything on failure (ping, await_startup). */
wctl_net wctl_call_quiet(wctl_ctx *c, const char *method, const char *path, wctl_response *resp,
                         int *sys_errno);
/* The "unable to perform an operation on node" block for a failed call. */
void wctl_report_unreachable(const wctl_ctx *c, wctl_net st, int sys_errno);

/* GETs path and parses the JSON body into *out (caller owns it). Returns 0,
 * or an exit code after printing the error: transport errors as wctl_call,
 * a non-2xx status through wctl_http_error. *status gets the HTTP status
 * when it is not NULL; with `allow_404` a 404 returns 0 and *out NULL. */
int wctl_get_json(wctl_ctx *c, const char *path, bool allow_404, json_t **out, int *status);

/* Prints "Error:\n<the API's reason>" for an unexpected answer and returns
 * its exit code: 401/403 and other 4xx 69, 5xx 70. */
int wctl_http_error(wctl_ctx *c, const wctl_response *r);

/* The "reason" of an API error body, HTML entities undone, into out. */
void wctl_error_reason(const wctl_response *r, wctl_buf *out);

/* The broker's node name ("rabbit@host", "warren@host"), from /api/overview;
 * "unknown" when it cannot be had. */
const char *wctl_node_name(wctl_ctx *c);

/* An informational line (suppressed by -q, -s and --formatter json). */
void wctl_info(const wctl_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "Error:\n<text>\n" on stderr. */
void wctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* rabbitmqctl's argument-validation block on stderr; returns `code`. */
int wctl_usage_error(const wctl_ctx *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Success of a command with no output of its own: nothing, or with
 * --formatter json {"node":...,"result":"ok"}. Returns 0. */
int wctl_done(wctl_ctx *c);

/* rabbitmqctl's "Virtual host 'x' does not exist" (no "Error:" line); 65. */
int wctl_no_such_vhost(wctl_ctx *c, const char *vhost);

/* Appends "/api/<a>/<seg1>/<seg2>..." with each segment percent-encoded;
 * the list ends with NULL. */
void wctl_api_path(wctl_buf *out, const char *base, ...) __attribute__((sentinel));

/* ---- listings (columns.c) ---------------------------------------------------- */

bool wctl_listing_takes_columns(const wctl_listing *l);
/* Its column names, sorted, comma-separated, as rabbitmqctl's help lists them. */
void wctl_listing_print_names(FILE *f, const wctl_listing *l);

/* ---- node facts shared by status and cluster_status (cmd_node.c) ------------- */

/* "Interface: IP, port: N, protocol: P, purpose: ..." for one of
 * /api/overview's listeners ("Node: NAME, interface: ..." with_node); the
 * purpose in rabbitmqctl's words, Warren's AMQP listener as AMQP 0-9-1
 * only (product is the overview's product_name). */
void wctl_listener_line(wctl_buf *out, const json_t *listener, const char *product, bool with_node);
/* The alarm lines of one /api/nodes object; false when it has none. */
bool wctl_alarm_lines(wctl_buf *out, const json_t *node, const char *name);
/* A list endpoint's rows: a plain array, or the items of a paged envelope. */
const json_t *wctl_rows(const json_t *answer);
/* "Parameter does not exist" (69), rabbitmqctl's answer for a parameter or
 * policy that is not there. */
int wctl_no_such_parameter(wctl_ctx *c, const char *name);

/* ---- commands ---------------------------------------------------------------- */

typedef int (*wctl_handler)(wctl_ctx *c);

struct wctl_command {
    const char *name;
    const char *group;   /* help section */
    int min_args, max_args; /* positional arguments; max -1 = any number */
    unsigned options;    /* WCTL_OPT_* accepted */
    const char *usage;   /* after "warrenctl [--node <node>] [--longnames] [--quiet] " */
    const char *summary;
    wctl_handler run;
};

const wctl_command *wctl_command_find(const char *name);
/* The closest known command name (Jaro similarity), or NULL if none is close. */
const char *wctl_command_suggest(const char *name);
/* Jaro similarity in [0, 1], as Elixir's String.jaro_distance. */
double wctl_jaro(const char *a, const char *b);
void wctl_help_all(FILE *f);
void wctl_help_command(FILE *f, const wctl_command *cmd);
/* "warrenctl [--node <node>] [--longnames] [--quiet] <usage>\n" */
void wctl_help_usage_line(FILE *f, const wctl_command *cmd);

/* Handlers (cmd_*.c). */
int wctl_cmd_list(wctl_ctx *c);
int wctl_cmd_add_user(wctl_ctx *c);
int wctl_cmd_delete_user(wctl_ctx *c);
int wctl_cmd_change_password(wctl_ctx *c);
int wctl_cmd_authenticate_user(wctl_ctx *c);
int wctl_cmd_set_user_tags(wctl_ctx *c);
int wctl_cmd_add_vhost(wctl_ctx *c);
int wctl_cmd_delete_vhost(wctl_ctx *c);
int wctl_cmd_set_permissions(wctl_ctx *c);
int wctl_cmd_clear_permissions(wctl_ctx *c);
int wctl_cmd_set_topic_permissions(wctl_ctx *c);
int wctl_cmd_clear_topic_permissions(wctl_ctx *c);
int wctl_cmd_set_policy(wctl_ctx *c);
int wctl_cmd_clear_policy(wctl_ctx *c);
int wctl_cmd_export_definitions(wctl_ctx *c);
int wctl_cmd_import_definitions(wctl_ctx *c);
int wctl_cmd_close_connection(wctl_ctx *c);
int wctl_cmd_purge_queue(wctl_ctx *c);
int wctl_cmd_delete_queue(wctl_ctx *c);
int wctl_cmd_status(wctl_ctx *c);
int wctl_cmd_await_startup(wctl_ctx *c);
int wctl_cmd_ping(wctl_ctx *c);
int wctl_cmd_environment(wctl_ctx *c);
int wctl_cmd_help(wctl_ctx *c);
int wctl_cmd_move_messages(wctl_ctx *c); /* cmd_move.c */
int wctl_cmd_shovel_status(wctl_ctx *c); /* cmd_shovel.c */
int wctl_cmd_delete_shovel(wctl_ctx *c);  /* also restart_shovel */
/* rabbitmq-streams' option values (cmd_stream.c): a size with an
 * information unit ("100gb", "50MiB", "1000"; RabbitMQ 3.13's
 * parse_information_unit), an ISO 8601 duration ("P1DT2H30M") in seconds
 * (a year 365 days, a month 30). False when s is neither or overflows. */
bool wctl_information_unit(const char *s, unsigned long long *out);
bool wctl_iso_duration(const char *s, unsigned long long *out);
int wctl_cmd_add_super_stream(wctl_ctx *c); /* cmd_stream.c */
int wctl_cmd_delete_super_stream(wctl_ctx *c);
int wctl_cmd_list_stream_group_consumers(wctl_ctx *c);
int wctl_cmd_set_parameter(wctl_ctx *c);  /* cmd_params.c, also set_global_parameter */
int wctl_cmd_clear_parameter(wctl_ctx *c);
int wctl_cmd_close_all_connections(wctl_ctx *c);
int wctl_cmd_set_vm_memory_high_watermark(wctl_ctx *c);
int wctl_cmd_reload_certificates(wctl_ctx *c);
int wctl_cmd_cluster_status(wctl_ctx *c); /* cmd_cluster.c */
int wctl_cmd_report(wctl_ctx *c);
int wctl_cmd_set_vhost_limits(wctl_ctx *c); /* cmd_limits.c */
int wctl_cmd_clear_vhost_limits(wctl_ctx *c);
int wctl_cmd_list_vhost_limits(wctl_ctx *c);
int wctl_cmd_set_user_limits(wctl_ctx *c);
int wctl_cmd_clear_user_limits(wctl_ctx *c);
int wctl_cmd_list_user_limits(wctl_ctx *c);

#endif
