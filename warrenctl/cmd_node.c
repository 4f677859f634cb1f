/* The node commands: status (rabbitmqctl's sections, from /api/overview and
 * /api/nodes, each line only where the broker reports the fact), ping,
 * await_startup (polls until the API answers), environment (Warren's
 * /api/environment: its effective configuration) and
 * set_vm_memory_high_watermark (Warren's PUT
 * /api/nodes/{node}/vm-memory-high-watermark; rabbitmqctl's argument
 * checks and texts). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wctl_internal.h"

#define AWAIT_DEFAULT_MS 300000 /* rabbitmqctl await_startup's default */
#define AWAIT_POLL_MS 200

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* ---- status ------------------------------------------------------------------------------ */

typedef struct unit {
    const char *name;
    double divisor;
} unit;

static const unit units[] = {
    {"bytes", 1}, {"kb", 1e3}, {"kib", 1024.0}, {"mb", 1e6}, {"mib", 1048576.0},
    {"gb", 1e9}, {"gib", 1073741824.0}, {"tb", 1e12}, {"tib", 1099511627776.0},
};

static const unit *find_unit(const char *name)
{
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(units[i].name, name) == 0)
            return &units[i];
    return NULL;
}

/* "0.1371 gb": rabbitmqctl rounds to 4 decimals and prints Erlang's float. */
static void amount(wctl_buf *out, const json_t *bytes, const unit *u)
{
    double b = json_number_value(bytes);
    if (u->divisor == 1) {
        wctl_buf_printf(out, "%.0f bytes", b);
        return;
    }
    wctl_format_float(out, round(b / u->divisor * 1e4) / 1e4);
    wctl_buf_printf(out, " %s", u->name);
}

static void line_str(wctl_buf *out, const char *label, const char *v)
{
    if (v)
        wctl_buf_printf(out, "%s: %s\n", label, v);
}

static void line_num(wctl_buf *out, const char *label, const json_t *v)
{
    if (json_is_number(v)) {
        wctl_buf_printf(out, "%s: ", label);
        wctl_format_cell(out, v, WCTL_KIND_PLAIN, NULL);
        wctl_buf_puts(out, "\n");
    }
}

static void list_section(wctl_buf *out, const char *title, const char *intro, const json_t *items)
{
    size_t i;
    const json_t *e;
    if (!json_is_array(items))
        return;
    wctl_buf_printf(out, "\n\033[1m%s\033[0m\n\n%s", title, intro);
    json_array_foreach(items, i, e) {
        wctl_buf_puts(out, " * ");
        wctl_format_cell(out, e, WCTL_KIND_PLAIN, NULL);
        wctl_buf_puts(out, "\n");
    }
}

static void runtime_section(wctl_buf *out, const json_t *ov, const json_t *node)
{
    const char *product = str(ov, "product_name") ? str(ov, "product_name") : "RabbitMQ";
    char label[128];
    wctl_buf_puts(out, "\033[1mRuntime\033[0m\n\n");
    line_str(out, "OS PID", str(node, "os_pid"));
    if (json_is_number(json_object_get(node, "uptime")))
        wctl_buf_printf(out, "Uptime (seconds): %lld\n",
                        (long long)(json_number_value(json_object_get(node, "uptime")) / 1000));
    snprintf(label, sizeof label, "%s version", product);
    line_str(out, label, str(ov, "product_version") ? str(ov, "product_version")
                                                     : str(ov, "rabbitmq_version"));
    line_str(out, "Node name", str(ov, "node"));
    line_str(out, "Erlang configuration", str(ov, "erlang_full_version"));
    json_t *used = json_object_get(node, "proc_used"), *limit = json_object_get(node, "proc_total");
    if (json_is_integer(used) && json_is_integer(limit))
        wctl_buf_printf(out, "Erlang processes: %lld used, %lld limit\n",
                        (long long)json_integer_value(used), (long long)json_integer_value(limit));
    line_num(out, "Scheduler run queue", json_object_get(node, "run_queue"));
    line_num(out, "Cluster heartbeat timeout (net_ticktime)", json_object_get(node, "net_ticktime"));
}

bool wctl_alarm_lines(wctl_buf *out, const json_t *node, const char *name)
{
    bool mem = json_is_true(json_object_get(node, "mem_alarm"));
    bool disk = json_is_true(json_object_get(node, "disk_free_alarm"));
    if (mem)
        wctl_buf_printf(out, "Memory alarm on node %s\n", name);
    if (disk)
        wctl_buf_printf(out, "Free disk space alarm on node %s\n", name);
    return mem || disk;
}

static void alarms_section(wctl_buf *out, const json_t *node, const char *name)
{
    wctl_buf_puts(out, "\n\033[1mAlarms\033[0m\n\n");
    if (!wctl_alarm_lines(out, node, name))
        wctl_buf_puts(out, "(none)\n");
}

static void resources_section(wctl_buf *out, const json_t *node, const unit *u)
{
    json_t *v;
    if ((v = json_object_get(node, "mem_used"))) {
        wctl_buf_puts(out, "\n\033[1mMemory\033[0m\n\nTotal memory used: ");
        amount(out, v, u);
        wctl_buf_puts(out, "\n");
        line_str(out, "Calculation strategy", str(node, "mem_calculation_strategy"));
        if ((v = json_object_get(node, "mem_limit"))) {
            wctl_buf_puts(out, "Memory high watermark setting: computed to: ");
            amount(out, v, u);
            wctl_buf_puts(out, "\n");
        }
    }
    if (json_object_get(node, "fd_used"))
        wctl_buf_printf(out, "\n\033[1mFile Descriptors\033[0m\n\nTotal: %lld, limit: %lld\n"
                             "Sockets: %lld, limit: %lld\n",
                        (long long)json_integer_value(json_object_get(node, "fd_used")),
                        (long long)json_integer_value(json_object_get(node, "fd_total")),
                        (long long)json_integer_value(json_object_get(node, "sockets_used")),
                        (long long)json_integer_value(json_object_get(node, "sockets_total")));
    if ((v = json_object_get(node, "disk_free"))) {
        wctl_buf_puts(out, "\n\033[1mFree Disk Space\033[0m\n\nLow free disk space watermark: ");
        amount(out, json_object_get(node, "disk_free_limit"), u);
        wctl_buf_puts(out, "\nFree disk space: ");
        amount(out, v, u);
        wctl_buf_puts(out, "\n");
    }
}

/* What a listener is for, in rabbitmqctl's words -- and Warren's: it
 * speaks AMQP 0-9-1 only, where RabbitMQ's AMQP port takes 1.0 too. */
static const char *listener_purpose(const char *protocol, const char *product)
{
    bool warren = product && strcmp(product, "Warren") == 0;
    if (warren && protocol && strcmp(protocol, "amqp") == 0)
        return "AMQP 0-9-1";
    if (warren && protocol && strcmp(protocol, "amqp/ssl") == 0)
        return "AMQP 0-9-1 over TLS";
    static const char *const purposes[][2] = {
        {"amqp", "AMQP 0-9-1 and AMQP 1.0"}, {"amqp/ssl", "AMQP 0-9-1 and AMQP 1.0 over TLS"},
        {"http", "HTTP API"}, {"https", "HTTP API over TLS (HTTPS)"},
        {"http/prometheus", "Prometheus exporter API over HTTP"},
        {"clustering", "inter-node and CLI tool communication"}, {"stream", "stream"},
        {"control", "warrenctl over a Unix socket"},
    };
    for (size_t i = 0; i < sizeof purposes / sizeof purposes[0]; i++)
        if (protocol && strcmp(purposes[i][0], protocol) == 0)
            return purposes[i][1];
    return protocol ? protocol : "";
}

void wctl_listener_line(wctl_buf *out, const json_t *l, const char *product, bool with_node)
{
    const char *ip = str(l, "ip_address") ? str(l, "ip_address") : "";
    bool v6 = strchr(ip, ':') != NULL;
    if (with_node)
        wctl_buf_printf(out, "Node: %s, interface: ", str(l, "node") ? str(l, "node") : "");
    else
        wctl_buf_puts(out, "Interface: ");
    wctl_buf_printf(out, "%s%s%s, port: %lld, protocol: %s, purpose: %s\n", v6 ? "[" : "", ip,
                    v6 ? "]" : "", (long long)json_integer_value(json_object_get(l, "port")),
                    str(l, "protocol") ? str(l, "protocol") : "",
                    listener_purpose(str(l, "protocol"), product));
}

static void totals_and_listeners(wctl_buf *out, const json_t *ov, const json_t *vhosts)
{
    const json_t *totals = json_object_get(ov, "object_totals");
    if (totals) {
        wctl_buf_printf(out, "\n\033[1mTotals\033[0m\n\nConnection count: %lld\nQueue count: %lld\n",
                        (long long)json_integer_value(json_object_get(totals, "connections")),
                        (long long)json_integer_value(json_object_get(totals, "queues")));
        if (json_is_array(vhosts))
            wctl_buf_printf(out, "Virtual host count: %zu\n", json_array_size(vhosts));
    }
    const json_t *ls = json_object_get(ov, "listeners"), *l;
    size_t i;
    if (!json_is_array(ls))
        return;
    wctl_buf_puts(out, "\n\033[1mListeners\033[0m\n\n");
    json_array_foreach(ls, i, l)
        wctl_listener_line(out, l, str(ov, "product_name"), false);
}

/* This node's entry of /api/nodes: the one named like the overview's node. */
static const json_t *this_node(const json_t *nodes, const char *name)
{
    size_t i;
    const json_t *n;
    json_array_foreach(nodes, i, n) {
        if (!name || (str(n, "name") && strcmp(str(n, "name"), name) == 0))
            return n;
    }
    return json_array_get(nodes, 0);
}

static int status_json(const json_t *ov, const json_t *node)
{
    json_t *all = json_pack("{s:O, s:O?}", "overview", ov, "node", node);
    char *s = json_dumps(all, JSON_COMPACT);
    puts(s);
    free(s);
    json_decref(all);
    return WCTL_EXIT_OK;
}

int wctl_cmd_status(wctl_ctx *c)
{
    const unit *u = find_unit(c->o->unit ? c->o->unit : "gb");
    if (!u)
        return wctl_usage_error(c, WCTL_EXIT_USAGE, "unit '%s' is not one of bytes, kb, kib, "
                                "mb, mib, gb, gib, tb, tib", c->o->unit);
    json_t *ov, *nodes, *vhosts;
    int rc = wctl_get_json(c, "/api/overview", false, &ov, NULL);
    if (rc)
        return rc;
    if ((rc = wctl_get_json(c, "/api/nodes", false, &nodes, NULL))) {
        json_decref(ov);
        return rc;
    }
    if ((rc = wctl_get_json(c, "/api/vhosts", false, &vhosts, NULL)))
        vhosts = NULL; /* a monitoring user may not list vhosts: leave the count out */
    const char *name = str(ov, "node") ? str(ov, "node") : "unknown";
    const json_t *node = this_node(nodes, str(ov, "node"));
    if (c->o->json) {
        rc = status_json(ov, node);
    } else {
        wctl_buf out = {0};
        wctl_info(c, "Status of node %s ...", name);
        runtime_section(&out, ov, node);
        list_section(&out, "Plugins", "Enabled plugins:\n\n", json_object_get(node, "enabled_plugins"));
        if (str(node, "db_dir"))
            wctl_buf_printf(&out, "\n\033[1mData directory\033[0m\n\nNode data directory: %s\n",
                            str(node, "db_dir"));
        list_section(&out, "Config files", "", json_object_get(node, "config_files"));
        list_section(&out, "Log file(s)", "", json_object_get(node, "log_files"));
        alarms_section(&out, node, name);
        resources_section(&out, node, u);
        totals_and_listeners(&out, ov, vhosts);
        fwrite(wctl_buf_str(&out), 1, out.len, stdout);
        wctl_buf_free(&out);
    }
    json_decref(ov);
    json_decref(nodes);
    json_decref(vhosts);
    return rc;
}

/* ---- ping, await_startup ------------------------------------------------------------------- */

int wctl_cmd_ping(wctl_ctx *c)
{
    wctl_response r;
    int err;
    wctl_net st = wctl_call_quiet(c, "GET", "/api/overview", &r, &err);
    bool ok = st == WCTL_NET_OK && r.status >= 200 && r.status < 300;
    json_t *j = ok ? json_loadb(r.body, r.body_len, 0, NULL) : NULL;
    const char *node = str(j, "node") ? str(j, "node") : c->where;
    wctl_info(c, "Will ping %s. This only checks if the broker's management API answers. "
                 "Timeout: %d ms.", node, c->timeout_ms);
    int rc = WCTL_EXIT_OK;
    if (!ok) {
        wctl_error("Failed to connect and authenticate to %s in %d ms", c->where, c->timeout_ms);
        rc = WCTL_EXIT_UNAVAILABLE;
    } else if (c->o->json) {
        puts("{\"message\":\"Ping succeeded\"}");
    } else {
        puts("Ping succeeded");
    }
    json_decref(j);
    if (st == WCTL_NET_OK)
        wctl_response_free(&r);
    return rc;
}

int wctl_cmd_await_startup(wctl_ctx *c)
{
    long long deadline = wctl_now_ms() + (c->o->timeout_s >= 0 ? c->timeout_ms : AWAIT_DEFAULT_MS);
    for (;;) {
        long long left = deadline - wctl_now_ms();
        c->timeout_ms = left < 1 ? 1 : left > 10000 ? 10000 : (int)left;
        wctl_response r;
        int err;
        wctl_net st = wctl_call_quiet(c, "GET", "/api/overview", &r, &err);
        if (st == WCTL_NET_OK) {
            int status = r.status, rc = 0;
            if (status == 401 || status == 403) /* up, but will not let us in: waiting won't help */
                rc = wctl_http_error(c, &r);
            wctl_response_free(&r);
            if (status < 300 || rc)
                return rc ? rc : wctl_done(c);
        }
        if (wctl_now_ms() + AWAIT_POLL_MS >= deadline) {
            wctl_report_unreachable(c, st == WCTL_NET_OK ? WCTL_NET_IO : st, err);
            return WCTL_EXIT_UNAVAILABLE;
        }
        nanosleep(&(struct timespec){.tv_nsec = AWAIT_POLL_MS * 1000000L}, NULL);
    }
}

/* ---- environment ------------------------------------------------------------------------------- */

/* An Erlang atom: bare when it can be, else in single quotes. */
static void atom(wctl_buf *out, const char *s)
{
    bool bare = *s >= 'a' && *s <= 'z';
    for (const char *p = s; bare && *p; p++)
        bare = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
               *p == '_' || *p == '@';
    if (bare) {
        wctl_buf_puts(out, s);
        return;
    }
    wctl_buf_puts(out, "'");
    for (const char *p = s; *p; p++)
        wctl_buf_puts(out, *p == '\'' ? "\\'" : *p == '\\' ? "\\\\" : (char[]){*p, 0});
    wctl_buf_puts(out, "'");
}

int wctl_cmd_environment(wctl_ctx *c)
{
    json_t *env;
    int status = 0;
    int rc = wctl_get_json(c, "/api/environment", true, &env, &status);
    if (rc)
        return rc;
    if (!env || !json_is_object(env)) {
        json_decref(env);
        wctl_error("the broker at %s does not support 'environment': it has no /api/environment "
                   "(a Warren extension; RabbitMQ's HTTP API has no equivalent, use rabbitmqctl "
                   "environment on its host)", c->where);
        return WCTL_EXIT_UNAVAILABLE;
    }
    char *sorted = json_dumps(env, JSON_COMPACT | JSON_SORT_KEYS);
    if (c->o->json) {
        puts(sorted);
    } else {
        json_t *keys = json_loads(sorted, JSON_PRESERVE_ORDER, NULL);
        wctl_info(c, "Application environment of node %s ...", wctl_node_name(c));
        wctl_buf out = {0};
        const char *k;
        json_t *v;
        bool first = true;
        json_object_foreach(keys, k, v) {
            wctl_buf_puts(&out, first ? "[{" : ",\n {");
            atom(&out, k);
            wctl_buf_puts(&out, ",");
            wctl_format_cell(&out, v, WCTL_KIND_TABLE, NULL);
            wctl_buf_puts(&out, "}");
            first = false;
        }
        wctl_buf_puts(&out, first ? "[]\n" : "]\n");
        fwrite(wctl_buf_str(&out), 1, out.len, stdout);
        wctl_buf_free(&out);
        json_decref(keys);
    }
    free(sorted);
    json_decref(env);
    return WCTL_EXIT_OK;
}

/* ---- set_vm_memory_high_watermark ------------------------------------------------------ */

/* Elixir's Integer.parse: an optional sign and digits; *rest is what follows.
 * False when there are no digits. */
static bool int_prefix(const char *s, long long *out, const char **rest)
{
    char *end;
    const char *p = s + (*s == '-' || *s == '+');
    if (*p < '0' || *p > '9')
        return false;
    *out = strtoll(s, &end, 10);
    *rest = end;
    return true;
}

/* Elixir's Float.parse of the whole text: digits, then optionally a
 * fraction and an exponent; *rest as above. */
static bool float_prefix(const char *s, double *out, const char **rest)
{
    const char *p = s + (*s == '-' || *s == '+');
    if (*p < '0' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == '.' && p[1] >= '0' && p[1] <= '9')
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
    const char *e = p;
    if ((*e == 'e' || *e == 'E') && (e[1] == '-' || e[1] == '+' ? e[2] : e[1]) >= '0' &&
        (e[1] == '-' || e[1] == '+' ? e[2] : e[1]) <= '9')
        for (p = e + 2; *p >= '0' && *p <= '9'; p++)
            ;
    *out = strtod(s, NULL);
    *rest = p;
    return true;
}

/* rabbitmqctl's memory units: a multiplier, 0 for none. */
static unsigned long long memory_unit(const char *u)
{
    static const struct { const char *unit; unsigned long long mult; } memory_units[] = {
        {"", 1}, {"k", 1ull << 10}, {"kiB", 1ull << 10}, {"M", 1ull << 20}, {"MiB", 1ull << 20},
        {"G", 1ull << 30}, {"GiB", 1ull << 30}, {"kB", 1000}, {"MB", 1000000}, {"GB", 1000000000},
    };
    for (size_t i = 0; i < sizeof memory_units / sizeof memory_units[0]; i++)
        if (strcmp(u, memory_units[i].unit) == 0)
            return memory_units[i].mult;
    return 0;
}

/* "absolute <value>": bytes into *bytes, or a usage error's exit code. */
static int absolute_bytes(wctl_ctx *c, const char *arg, unsigned long long *bytes)
{
    long long n;
    double f;
    const char *rest;
    if (!int_prefix(arg, &n, &rest))
        return wctl_usage_error(c, WCTL_EXIT_DATAERR, "Bad argument.");
    unsigned long long mult = memory_unit(rest);
    if (!mult)
        return wctl_usage_error(c, WCTL_EXIT_DATAERR,
                                float_prefix(arg, &f, &rest) && memory_unit(rest)
                                    ? "Bad argument: The threshold should be an integer."
                                    : "Bad argument: Invalid units.");
    if (n <= 0 || (unsigned long long)n > ~0ull / 2 / mult)
        return wctl_usage_error(c, WCTL_EXIT_DATAERR, "Bad argument.");
    *bytes = (unsigned long long)n * mult;
    return 0;
}

/* <fraction>: into *fraction, or a usage error's exit code. */
static int relative_fraction(wctl_ctx *c, const char *arg, double *fraction)
{
    const char *rest;
    if (!float_prefix(arg, fraction, &rest) || *rest)
        return wctl_usage_error(c, WCTL_EXIT_DATAERR, "Bad argument.");
    if (*fraction < 0.0 || *fraction > 1.0)
        return wctl_usage_error(c, WCTL_EXIT_DATAERR,
                                "Bad argument: The threshold should be a fraction between 0.0 and "
                                "1.0");
    return 0;
}

/* The body, after rabbitmqctl's argument checks (in its order); NULL with
 * *rc set when they fail. */
static json_t *watermark_body(wctl_ctx *c, int *rc)
{
    const wctl_opts *o = c->o;
    bool absolute = strcmp(o->args[0], "absolute") == 0;
    unsigned long long bytes = 0;
    double fraction = 0;
    *rc = 0;
    if (absolute && o->nargs < 2)
        *rc = wctl_usage_error(c, WCTL_EXIT_USAGE, "not enough arguments.");
    else if (!absolute && o->nargs > 1)
        *rc = wctl_usage_error(c, WCTL_EXIT_USAGE, "too many arguments.");
    else if (absolute)
        *rc = absolute_bytes(c, o->args[1], &bytes);
    else
        *rc = relative_fraction(c, o->args[0], &fraction);
    if (*rc)
        return NULL;
    return absolute ? json_pack("{s:I}", "absolute", (json_int_t)bytes)
                    : json_pack("{s:f}", "relative", fraction);
}

int wctl_cmd_set_vm_memory_high_watermark(wctl_ctx *c)
{
    int rc;
    json_t *body = watermark_body(c, &rc);
    if (!body)
        return rc;
    bool absolute = c->o->nargs == 2;
    const char *node = wctl_node_name(c);
    wctl_info(c, "Setting memory threshold on %s to %s%s ...", node, c->o->args[absolute ? 1 : 0],
              absolute ? " bytes" : "");
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    wctl_buf path = {0};
    wctl_response r;
    wctl_api_path(&path, "/api/nodes", node, "vm-memory-high-watermark", (const char *)NULL);
    rc = wctl_call(c, "PUT", wctl_buf_str(&path), text, NULL, NULL, &r);
    free(text);
    wctl_buf_free(&path);
    if (rc)
        return rc;
    if (r.status == 404 || r.status == 405) {
        wctl_error("the broker at %s does not support 'set_vm_memory_high_watermark' over its "
                   "HTTP API (Warren's /api/nodes/{node}/vm-memory-high-watermark; for RabbitMQ use "
                   "rabbitmqctl on its host)", c->where);
        rc = WCTL_EXIT_UNAVAILABLE;
    } else {
        rc = r.status < 300 ? wctl_done(c) : wctl_http_error(c, &r);
    }
    wctl_response_free(&r);
    return rc;
}

/* ---- reload_certificates ------------------------------------------------------------------ */

/* Warren's POST /api/nodes/{node}/reload-certificates: new TLS handshakes
 * use certificates and keys read again; open connections are kept. */
int wctl_cmd_reload_certificates(wctl_ctx *c)
{
    const char *node = wctl_node_name(c);
    wctl_info(c, "Reloading TLS certificates on node %s ...", node);
    wctl_buf path = {0};
    wctl_response r;
    wctl_api_path(&path, "/api/nodes", node, "reload-certificates", (const char *)NULL);
    int rc = wctl_call(c, "POST", wctl_buf_str(&path), "", NULL, NULL, &r);
    wctl_buf_free(&path);
    if (rc)
        return rc;
    if (r.status == 404 || r.status == 405) {
        wctl_error("the broker at %s does not support 'reload_certificates' over its HTTP API "
                   "(Warren's /api/nodes/{node}/reload-certificates)", c->where);
        rc = WCTL_EXIT_UNAVAILABLE;
    } else {
        rc = r.status < 300 ? wctl_done(c) : wctl_http_error(c, &r);
    }
    wctl_response_free(&r);
    return rc;
}
