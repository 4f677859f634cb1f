/* warrenctl: rabbitmqctl's commands, arguments, output and exit codes, carried
 * out over a broker's management HTTP API -- Warren's own through the Unix
 * socket in its data_dir (no password, as rabbitmqctl needs none on the
 * broker's host), or any RabbitMQ-compatible API through --url with basic
 * auth. A script written for rabbitmqctl runs unchanged against warrenctl.
 *
 * This header is the module's whole interface: wctl_main() for bin/warrenctl,
 * and the pure pieces it is built from (argument parsing, column mapping,
 * value formatting, URLs and percent-encoding, HTTP response parsing), which
 * the unit tests drive directly.
 */
#ifndef WARREN_WARRENCTL_H
#define WARREN_WARRENCTL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* Exit codes, rabbitmqctl's (BSD sysexits). */
enum {
    WCTL_EXIT_OK = 0,
    WCTL_EXIT_USAGE = 64,       /* bad command line */
    WCTL_EXIT_DATAERR = 65,     /* bad input data, refused authentication, no such vhost */
    WCTL_EXIT_NOUSER = 67,      /* no such user */
    WCTL_EXIT_UNAVAILABLE = 69, /* broker not running, or it refused the operation */
    WCTL_EXIT_SOFTWARE = 70,    /* the broker failed (5xx), or an object already exists */
    WCTL_EXIT_TEMPFAIL = 75,    /* the operation timed out */
};

/* Runs one warrenctl invocation: parses argv, talks to the broker, writes
 * the command's output to stdout and its errors to stderr. Returns the exit
 * status. */
int wctl_main(int argc, char **argv);

/* ---- growable byte buffer ------------------------------------------------ */

/* A NUL-terminated string that grows as it is appended to. It is a plain
 * value (callers keep it on their stack), hence not opaque. Allocation
 * failure aborts: warrenctl is a short-lived tool with nothing to unwind. */
typedef struct wctl_buf {
    char *data; /* NULL until the first append; always NUL-terminated after */
    size_t len;
    size_t cap;
} wctl_buf;

void wctl_buf_append(wctl_buf *b, const char *s, size_t n);
void wctl_buf_puts(wctl_buf *b, const char *s);
void wctl_buf_printf(wctl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The contents ("" when empty); valid until the next append or free. */
const char *wctl_buf_str(const wctl_buf *b);
void wctl_buf_free(wctl_buf *b);

/* ---- command line ---------------------------------------------------------- */

#define WCTL_MAX_ARGS 64

/* Command-specific options; a command lists the ones it accepts and any
 * other is rabbitmqctl's "Invalid options for this command". (The general
 * ones -- -p, -q, -s, -t, -n, -l, --formatter and warrenctl's connection
 * options -- are accepted by every command.) */
enum {
    WCTL_OPT_NO_HEADERS = 1u << 0,     /* --no-table-headers */
    WCTL_OPT_PRIORITY = 1u << 1,       /* --priority N */
    WCTL_OPT_APPLY_TO = 1u << 2,       /* --apply-to WHAT */
    WCTL_OPT_DESCRIPTION = 1u << 3,    /* --description TEXT */
    WCTL_OPT_TAGS = 1u << 4,           /* --tags a,b */
    WCTL_OPT_QUEUE_TYPE = 1u << 5,     /* --default-queue-type T */
    WCTL_OPT_IF_EMPTY = 1u << 6,       /* -e / --if-empty */
    WCTL_OPT_IF_UNUSED = 1u << 7,      /* -u / --if-unused (after the command name) */
    WCTL_OPT_FORMAT = 1u << 8,         /* --format json */
    WCTL_OPT_SKIP_UNCHANGED = 1u << 9, /* --skip-if-unchanged */
    WCTL_OPT_UNIT = 1u << 10,          /* --unit gb */
    WCTL_OPT_QUEUE_FILTER = 1u << 11,  /* --online / --offline / --local (no effect) */
    WCTL_OPT_TO_QUEUE = 1u << 12,      /* move_messages --to-queue Q */
    WCTL_OPT_TO_EXCHANGE = 1u << 13,   /* --to-exchange X */
    WCTL_OPT_ROUTING_KEY = 1u << 14,   /* --routing-key K */
    WCTL_OPT_LIMIT = 1u << 15,         /* --count N */
    WCTL_OPT_RATE = 1u << 16,          /* --rate N (messages per second) */
    WCTL_OPT_NO_WAIT = 1u << 17,       /* --no-wait: start it and return */
    WCTL_OPT_STATUS = 1u << 18,        /* --status: the move's progress */
    WCTL_OPT_CANCEL = 1u << 19,        /* --cancel: stop the running move */
    WCTL_OPT_MATCH_HEADER = 1u << 20,  /* --match-header H: only messages with it */
    WCTL_OPT_MATCH_VALUE = 1u << 21,   /* --match-value V: ... equal to V */
    WCTL_OPT_CLOSE_LIMIT = 1u << 22,   /* close_all_connections --limit N */
    WCTL_OPT_GLOBAL = 1u << 23,        /* --global: every vhost's */
    WCTL_OPT_CLOSE_DELAY = 1u << 24,   /* --per-connection-delay MS */
    WCTL_OPT_QUEUE_TIMEOUT = 1u << 25, /* list_unresponsive_queues --queue-timeout MS */
    WCTL_OPT_USER = 1u << 26,          /* list_user_limits --user NAME */
    /* add_super_stream's --partitions, --binding-keys, --max-length-bytes,
     * --max-age, --stream-max-segment-size-bytes, --leader-locator,
     * --initial-cluster-size (rabbitmq-streams' names) */
    WCTL_OPT_SUPER_STREAM = 1u << 27,
    WCTL_OPT_GROUP = 1u << 28,         /* list_stream_group_consumers --stream S --reference R */
    WCTL_OPT_COUNT = 29
};

/* The parsed command line. A plain record of what was given (the unit tests
 * inspect it field by field), hence not opaque. Strings point into argv. */
typedef struct wctl_opts {
    const char *command; /* first non-option word; NULL if none */
    const char *args[WCTL_MAX_ARGS];
    int nargs;
    /* where the broker is */
    const char *url;         /* --url http://host:port[/prefix] */
    const char *username;    /* -u / --username (before the command name) */
    const char *password;    /* --password, or -p right after -u (see wctl_parse_args) */
    const char *socket_path; /* --socket */
    const char *data_dir;    /* --data-dir */
    const char *config_file; /* --config */
    const char *node;        /* -n / --node: rabbitmqctl's node name ("rabbit@host") */
    int mgmt_port;           /* --management-port, for a node's HTTP API; 0 when not given */
    /* rabbitmqctl's general options */
    const char *vhost; /* "/" unless -p / --vhost */
    bool quiet;        /* -q: no informational lines */
    bool silent;       /* -s: no informational lines, no table header */
    bool json;         /* --formatter json */
    bool help;         /* -? / --help */
    int timeout_s;     /* -t / --timeout; -1 when not given */
    /* command-specific options (see WCTL_OPT_*) */
    unsigned given;    /* which WCTL_OPT_* options were given */
    const char *given_as[WCTL_OPT_COUNT]; /* each one's long name ("priority") */
    bool no_headers;
    int priority;
    const char *apply_to, *description, *tags, *queue_type, *format, *unit;
    const char *to_queue, *to_exchange, *routing_key, *match_header, *match_value; /* move_messages */
    int limit, rate;
    int close_limit, close_delay_ms; /* close_all_connections */
    const char *limits_user;         /* list_user_limits --user */
    /* add_super_stream (partitions 0 when not given, -1 when given < 1) */
    int partitions;
    const char *binding_keys, *max_length_bytes, *max_age, *segment_size, *leader_locator,
        *initial_cluster_size;
    const char *stream, *reference; /* list_stream_group_consumers */
    /* argv without the connection options, for "Arguments given:" lines */
    const char *echo[WCTL_MAX_ARGS * 2];
    int necho;
} wctl_opts;

/* Parses argv[1..argc). rabbitmqctl's general options may stand anywhere;
 * -p is the vhost as in rabbitmqctl, except before the command name right
 * after -u, where it is the password (`--url U -u guest -p guest list_queues
 * -p vh`). On a usage error returns false and writes rabbitmqctl's wording
 * ("Invalid options for this command:\n--bogus : ") to err. */
bool wctl_parse_args(int argc, char **argv, wctl_opts *o, char *err, size_t errlen);

/* ---- node names ---------------------------------------------------------------- */

/* The host of a rabbitmqctl node name: "rabbit@host" -> "host"; a name
 * without '@' (or with nothing after it) is a node on this machine, as
 * rabbitmqctl completes it: "" then. False when the host does not fit. */
bool wctl_node_host(const char *node, char *host, size_t cap);

/* Whether `host` is this machine: "" or "localhost", this machine's host
 * name (short or full), or a name or address that resolves to loopback
 * addresses only. */
bool wctl_host_is_local(const char *host);

/* ---- URLs ------------------------------------------------------------------ */

typedef struct wctl_url {
    char host[256];
    int port;
    char prefix[512]; /* path before /api, without a trailing '/'; "" for none */
} wctl_url;

/* Parses "http://host[:port][/prefix]" (port 80 when absent, IPv6 hosts in
 * brackets). Returns false with the reason in err for anything else,
 * https:// included. */
bool wctl_url_parse(const char *text, wctl_url *out, char *err, size_t errlen);

/* Appends s percent-encoded as one path segment: every byte but RFC 3986's
 * unreserved ones (A-Z a-z 0-9 - . _ ~) becomes %XX, so "/" is %2F. */
void wctl_url_encode_segment(wctl_buf *out, const char *s);

/* Appends the standard base64 of data[0..n). */
void wctl_base64(wctl_buf *out, const unsigned char *data, size_t n);

/* ---- HTTP ---------------------------------------------------------------- */

typedef enum wctl_parse_status {
    WCTL_PARSE_DONE,  /* a whole response; status and body filled */
    WCTL_PARSE_MORE,  /* input ends before the response does */
    WCTL_PARSE_ERROR, /* not an HTTP/1.x response, or bad framing */
} wctl_parse_status;

/* One response. A result record filled by the parser, hence not opaque. */
typedef struct wctl_response {
    int status;      /* 200, 404, ... */
    char *body;      /* malloc'd, NUL-terminated (chunks joined); owned by the record */
    size_t body_len;
    char *location;  /* Location header if any, malloc'd */
} wctl_response;

/* Parses raw[0..len) as one HTTP/1.x response: status line, headers, and a
 * body framed by Transfer-Encoding: chunked, Content-Length, or the end of
 * the input when `at_eof` (no framing). A 1xx response before the final one
 * is skipped. On DONE, *out owns a fresh body; on MORE or ERROR, *out is
 * left empty. */
wctl_parse_status wctl_http_parse(const char *raw, size_t len, bool at_eof, wctl_response *out);
void wctl_response_free(wctl_response *r);

/* ---- listings: rabbitmqctl columns over the API's JSON ---------------------- */

/* How one column's JSON value is shown. */
typedef enum wctl_kind {
    WCTL_KIND_PLAIN,      /* strings bare, lists "[a, b]", null empty */
    WCTL_KIND_TABLE,      /* an AMQP field table: [{"k",v},...]; JSON [[k,type,v],...] */
    WCTL_KIND_PROTOCOL,   /* "AMQP 0-9-1" -> {0,9,1}; JSON [0,9,1] */
    WCTL_KIND_NODE_MAP,   /* {"rabbit@h":"running"} -> [{rabbit@h, running}] */
    WCTL_KIND_DEFINITION, /* a policy definition: compact JSON text with sorted keys */
    WCTL_KIND_JSON_TEXT,  /* any value as compact JSON text, keys as given; JSON: that text as a string */
    WCTL_KIND_CONSTANT,   /* not in the API object: the column's fixed text */
} wctl_kind;

typedef struct wctl_column {
    const char *name; /* rabbitmqctl's column name */
    const char *path; /* the API field, dotted for nested objects; for CONSTANT its text */
    wctl_kind kind;
} wctl_column;

typedef struct wctl_listing wctl_listing; /* one list_* command's table; opaque */

/* The listing of a list_* command, or NULL if `command` is none. */
const wctl_listing *wctl_listing_find(const char *command);

/* Resolves the requested column names (or the command's defaults when
 * nnames is 0) into cols[], in the order rabbitmqctl prints them. Returns
 * the number of columns; 0 with rabbitmqctl's message in err ("Info key(s)
 * a,b are not supported", "too many arguments.") when a name is unknown or
 * the listing takes no column names. */
int wctl_listing_columns(const wctl_listing *l, const char *const *names, int nnames,
                         const wctl_column **cols, int maxcols, char *err, size_t errlen);

/* The JSON value of column c in one API object (NULL if absent). */
const json_t *wctl_column_value(const wctl_column *c, const json_t *object);

/* Appends a value as rabbitmqctl's table formatter prints it. */
void wctl_format_cell(wctl_buf *out, const json_t *v, wctl_kind kind, const char *constant);
/* Appends a value as rabbitmqctl's JSON formatter prints it. */
void wctl_format_json(wctl_buf *out, const json_t *v, wctl_kind kind, const char *constant);
/* Appends a double as Erlang prints it: the shortest text that reads back
 * exactly, fixed or scientific, whichever is shorter (1.5, 1.0e10, 1.2e-4). */
void wctl_format_float(wctl_buf *out, double d);

/* Renders rows (a JSON array of API objects) as rabbitmqctl prints a table:
 * a header line unless `headers` is false, then one tab-separated line per
 * row; with no rows nothing at all, or one empty line for the commands that
 * print one (list_policies, list_permissions, ...). As JSON: "[", one object
 * per line with ',' before all but the first, "]". */
void wctl_listing_render(wctl_buf *out, const wctl_listing *l, const wctl_column *const *cols,
                         int ncols, const json_t *rows, bool headers, bool json);

#endif
