/* The invocation context: where the broker is, how to authenticate, and the
 * calls every command makes through it -- one HTTP request each, errors
 * reported the way rabbitmqctl reports them (an unreachable broker is exit
 * 69 with a diagnostics block naming the socket or URL tried; a timeout is
 * exit 75).
 *
 * Where: --url; else with -n NAME@HOST a HOST other than this machine is
 * reached through its management API, http://HOST:15672 (or
 * --management-port, or management.tcp.port of --config), as rabbitmqadmin
 * reaches one -- rabbitmqctl's Erlang distribution has no counterpart;
 * otherwise the local broker's control socket, and when -n names this
 * machine but no socket was named (--socket, $WARREN_CTL_SOCKET,
 * --data-dir, --config) and ./var has none, the local management API on
 * that port, so `rabbitmqctl -n rabbit@localhost ...` scripts run from any
 * directory. The node's name part is not checked: Warren's node is
 * warren@host, and scripts say rabbit@host. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wctl_internal.h"

#define DEFAULT_TIMEOUT_MS 60000
#define DEFAULT_MGMT_PORT 15672
#define SOCKET_NAME "warrenctl.sock"

/* ---- configuration ------------------------------------------------------------ */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

bool wctl_config_value(const char *path, const char *key, char *out, size_t outlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[4096];
    out[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        if (strcmp(trim(line), key) == 0)
            snprintf(out, outlen, "%s", trim(eq + 1)); /* the last one wins, as in the broker */
    }
    fclose(f);
    return true;
}

static bool init_unix(wctl_ctx *c, const wctl_opts *o, char *err, size_t errlen)
{
    char dir[4096] = "./var";
    const char *path = o->socket_path ? o->socket_path : getenv("WARREN_CTL_SOCKET");
    char joined[4200];
    if (!path || !*path) {
        if (o->data_dir) {
            snprintf(dir, sizeof dir, "%s", o->data_dir);
        } else if (o->config_file) {
            char from_file[4096];
            if (!wctl_config_value(o->config_file, "data_dir", from_file, sizeof from_file)) {
                snprintf(err, errlen, "cannot read --config %s: %s", o->config_file,
                         strerror(errno));
                return false;
            }
            if (from_file[0])
                snprintf(dir, sizeof dir, "%s", from_file);
        }
        size_t n = strlen(dir);
        snprintf(joined, sizeof joined, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/",
                 SOCKET_NAME);
        path = joined;
    }
    size_t len = strlen(path);
    if (len >= sizeof c->target.unix_path) {
        snprintf(err, errlen, "socket path too long (%zu bytes, at most %zu): %s", len,
                 sizeof c->target.unix_path - 1, path);
        return false;
    }
    c->target.is_unix = true;
    memcpy(c->target.unix_path, path, len + 1); /* both fit: sun_path < where */
    memcpy(c->where, path, len + 1);
    return true;
}

static void set_basic_auth(char *out, size_t outlen, const char *user, const char *pass)
{
    wctl_buf plain = {0}, b64 = {0};
    wctl_buf_printf(&plain, "%s:%s", user, pass ? pass : "");
    wctl_base64(&b64, (const unsigned char *)wctl_buf_str(&plain), plain.len);
    snprintf(out, outlen, "Basic %s", wctl_buf_str(&b64));
    wctl_buf_free(&plain);
    wctl_buf_free(&b64);
}

/* The management port for -n: --management-port, else the --config
 * file's management.tcp.port, else 15672. */
static int node_mgmt_port(const wctl_opts *o)
{
    char v[32] = "";
    int port = o->mgmt_port;
    if (!port && o->config_file && wctl_config_value(o->config_file, "management.tcp.port", v,
                                                     sizeof v))
        port = atoi(v);
    return port > 0 && port <= 65535 ? port : DEFAULT_MGMT_PORT;
}

/* A socket was named (rather than ./var taken by default). */
static bool socket_named(const wctl_opts *o)
{
    const char *env = getenv("WARREN_CTL_SOCKET");
    return o->socket_path || (env && *env) || o->data_dir || o->config_file;
}

/* The URL -n NAME@HOST means, into url; "" when it means the local socket
 * (already set up in c). */
static bool node_url(wctl_ctx *c, const wctl_opts *o, char *url, size_t cap, char *err,
                     size_t errlen)
{
    char host[256];
    url[0] = 0;
    if (!wctl_node_host(o->node, host, sizeof host)) {
        snprintf(err, errlen, "node name too long: %s", o->node);
        return false;
    }
    bool local = wctl_host_is_local(host);
    if (local && (socket_named(o) || access(c->target.unix_path, F_OK) == 0))
        return true;
    bool v6 = strchr(host, ':') != NULL;
    snprintf(url, cap, "http://%s%s%s:%d", v6 ? "[" : "", *host ? host : "localhost",
             v6 ? "]" : "", node_mgmt_port(o));
    return true;
}

bool wctl_ctx_init(wctl_ctx *c, const wctl_opts *o, char *err, size_t errlen)
{
    char node_http[300] = "";
    memset(c, 0, sizeof *c);
    c->o = o;
    c->timeout_ms = o->timeout_s >= 0 ? o->timeout_s * 1000 : DEFAULT_TIMEOUT_MS;
    if (o->username) /* over the socket too: the broker then checks them, as over TCP */
        set_basic_auth(c->auth, sizeof c->auth, o->username, o->password);
    if (!o->url && !init_unix(c, o, err, errlen))
        return false;
    if (!o->url && o->node && !node_url(c, o, node_http, sizeof node_http, err, errlen))
        return false;
    const char *url = o->url ? o->url : node_http;
    if (!*url)
        return true;
    memset(&c->target, 0, sizeof c->target);
    wctl_url u;
    if (!wctl_url_parse(url, &u, err, errlen))
        return false;
    snprintf(c->target.host, sizeof c->target.host, "%s", u.host);
    c->target.port = u.port;
    snprintf(c->prefix, sizeof c->prefix, "%s", u.prefix);
    snprintf(c->where, sizeof c->where, "%s", url);
    if (!o->username) /* rabbitmqadmin's default */
        set_basic_auth(c->auth, sizeof c->auth, "guest", "guest");
    return true;
}

/* ---- output helpers ---------------------------------------------------------------- */

void wctl_info(const wctl_ctx *c, const char *fmt, ...)
{
    if (c->o->quiet || c->o->silent || c->o->json)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

void wctl_error(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("Error:\n", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int wctl_usage_error(const wctl_ctx *c, int code, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("Error (argument validation): ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nArguments given:\n\t", stderr);
    for (int i = 0; i < c->o->necho; i++)
        fprintf(stderr, "%s%s", i ? " " : "", c->o->echo[i]);
    fputs("\n\n\033[1mUsage\033[0m\n\n", stderr);
    if (c->cmd)
        wctl_help_usage_line(stderr, c->cmd);
    return code;
}

int wctl_no_such_vhost(wctl_ctx *c, const char *vhost)
{
    (void)c;
    fflush(stdout);
    fprintf(stderr, "Virtual host '%s' does not exist\n", vhost);
    return WCTL_EXIT_DATAERR;
}

int wctl_done(wctl_ctx *c)
{
    if (c->o->json)
        printf("{\"node\":\"%s\",\"result\":\"ok\"}\n", wctl_node_name(c));
    return WCTL_EXIT_OK;
}

void wctl_api_path(wctl_buf *out, const char *base, ...)
{
    va_list ap;
    wctl_buf_puts(out, base);
    va_start(ap, base);
    for (const char *seg; (seg = va_arg(ap, const char *));) {
        wctl_buf_puts(out, "/");
        wctl_url_encode_segment(out, seg);
    }
    va_end(ap);
}

/* ---- requests ------------------------------------------------------------------------ */

static void build_request(const wctl_ctx *c, wctl_buf *req, const char *method, const char *path,
                          const char *body, const char *extra_header, const char *auth)
{
    wctl_buf_printf(req, "%s %s%s HTTP/1.1\r\n", method, c->prefix, path);
    if (c->target.is_unix)
        wctl_buf_puts(req, "Host: localhost\r\n");
    else if (strchr(c->target.host, ':'))
        wctl_buf_printf(req, "Host: [%s]:%d\r\n", c->target.host, c->target.port);
    else
        wctl_buf_printf(req, "Host: %s:%d\r\n", c->target.host, c->target.port);
    wctl_buf_puts(req, "User-Agent: warrenctl\r\nAccept: */*\r\nConnection: close\r\n");
    if (auth && *auth)
        wctl_buf_printf(req, "Authorization: %s\r\n", auth);
    if (extra_header)
        wctl_buf_printf(req, "%s\r\n", extra_header);
    if (body)
        wctl_buf_printf(req, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                        strlen(body), body);
    else if (strcmp(method, "GET") != 0)
        wctl_buf_puts(req, "Content-Length: 0\r\n\r\n");
    else
        wctl_buf_puts(req, "\r\n");
}

static void unreachable(const wctl_ctx *c, wctl_net st, int err)
{
    fflush(stdout);
    fprintf(stderr,
            "Error: unable to perform an operation on node '%s'. Please see diagnostics "
            "information and suggestions below.\n\n"
            "Most common reasons for this are:\n\n"
            " * Target node is unreachable (e.g. due to hostname resolution, TCP connection or "
            "firewall issues)\n"
            " * CLI tool may not open the broker's control socket (it is only for the broker's "
            "own OS user)\n"
            " * Target node is not running\n\n"
            "DIAGNOSTICS\n===========\n\nattempted to contact: [%s]\n\n%s:\n",
            c->where, c->where, c->where);
    if (st == WCTL_NET_PROTOCOL)
        fprintf(stderr, "  * the answer is not HTTP: is that the management API's address?\n");
    else
        fprintf(stderr, "  * %s %s: %s\n", c->target.is_unix ? "unix socket" : "TCP",
                st == WCTL_NET_CONNECT ? "connect" : "request", strerror(err ? err : EIO));
    fprintf(stderr, "  * suggestion: start the broker, or point warrenctl at it with "
                    "--data-dir DIR, --socket PATH or --url http://HOST:15672\n");
}

wctl_net wctl_call_quiet(wctl_ctx *c, const char *method, const char *path, wctl_response *resp,
                         int *sys_errno)
{
    wctl_buf req = {0};
    build_request(c, &req, method, path, NULL, NULL, c->auth);
    wctl_net st = wctl_http_roundtrip(&c->target, req.data, req.len,
                                      wctl_now_ms() + c->timeout_ms, resp, sys_errno);
    wctl_buf_free(&req);
    return st;
}

void wctl_report_unreachable(const wctl_ctx *c, wctl_net st, int sys_errno)
{
    unreachable(c, st, sys_errno);
}

int wctl_call(wctl_ctx *c, const char *method, const char *path, const char *body,
              const char *extra_header, const char *basic_auth, wctl_response *resp)
{
    wctl_buf req = {0};
    build_request(c, &req, method, path, body, extra_header, basic_auth ? basic_auth : c->auth);
    int err;
    wctl_net st = wctl_http_roundtrip(&c->target, req.data, req.len,
                                      wctl_now_ms() + c->timeout_ms, resp, &err);
    wctl_buf_free(&req);
    if (st == WCTL_NET_OK)
        return 0;
    if (st == WCTL_NET_TIMEOUT) {
        fflush(stdout);
        fprintf(stderr, "Error: operation %s on node %s timed out. Timeout value used: %d\n",
                c->o->command, c->where, c->timeout_ms);
        return WCTL_EXIT_TEMPFAIL;
    }
    unreachable(c, st, err);
    return WCTL_EXIT_UNAVAILABLE;
}

/* &lt; &gt; &amp; &quot; &#39; -- RabbitMQ HTML-escapes its error reasons. */
static void unescape_html(wctl_buf *out, const char *s)
{
    static const struct { const char *ent, *ch; } ents[] = {
        {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}, {"&quot;", "\""}, {"&#39;", "'"}};
    while (*s) {
        size_t i;
        for (i = 0; i < sizeof ents / sizeof ents[0]; i++)
            if (strncmp(s, ents[i].ent, strlen(ents[i].ent)) == 0)
                break;
        if (i < sizeof ents / sizeof ents[0]) {
            wctl_buf_puts(out, ents[i].ch);
            s += strlen(ents[i].ent);
        } else {
            wctl_buf_append(out, s++, 1);
        }
    }
}

void wctl_error_reason(const wctl_response *r, wctl_buf *out)
{
    json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
    json_t *reason = json_is_object(j) ? json_object_get(j, "reason") : NULL;
    if (json_is_string(reason)) {
        unescape_html(out, json_string_value(reason));
    } else if (reason) {
        char *s = json_dumps(reason, JSON_ENCODE_ANY | JSON_COMPACT);
        wctl_buf_puts(out, s);
        free(s);
    } else if (r->body_len) {
        wctl_buf_append(out, r->body, r->body_len);
        while (out->len && isspace((unsigned char)out->data[out->len - 1]))
            out->data[--out->len] = '\0';
    } else {
        wctl_buf_printf(out, "HTTP %d", r->status);
    }
    json_decref(j);
}

int wctl_http_error(wctl_ctx *c, const wctl_response *r)
{
    wctl_buf why = {0};
    wctl_error_reason(r, &why);
    if (r->status == 401)
        wctl_error("%s refused the request (HTTP 401: %s): check the user given with -u and -p "
                   "(before the command name) and its permissions",
                   c->where, wctl_buf_str(&why));
    else if (r->status == 403)
        wctl_error("access refused (HTTP 403): %s", wctl_buf_str(&why));
    else if (r->status >= 500)
        wctl_error("the broker failed (HTTP %d): %s", r->status, wctl_buf_str(&why));
    else
        wctl_error("%s", wctl_buf_str(&why));
    wctl_buf_free(&why);
    return r->status >= 500 ? WCTL_EXIT_SOFTWARE : WCTL_EXIT_UNAVAILABLE;
}

int wctl_change(wctl_ctx *c, const char *method, wctl_buf *path, json_t *body,
                const char *extra_header, wctl_on_404 on_404, const char *subject)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    wctl_response r;
    int rc = wctl_call(c, method, wctl_buf_str(path), text, extra_header, NULL, &r);
    free(text);
    wctl_buf_free(path);
    if (rc)
        return rc;
    if (r.status >= 200 && r.status < 300)
        rc = wctl_done(c);
    else if (r.status == 404 && on_404)
        rc = on_404(c, subject);
    else
        rc = wctl_http_error(c, &r);
    wctl_response_free(&r);
    return rc;
}

int wctl_get_json(wctl_ctx *c, const char *path, bool allow_404, json_t **out, int *status)
{
    wctl_response r;
    *out = NULL;
    int rc = wctl_call(c, "GET", path, NULL, NULL, NULL, &r);
    if (rc)
        return rc;
    if (status)
        *status = r.status;
    if (r.status == 404 && allow_404) {
        wctl_response_free(&r);
        return 0;
    }
    if (r.status < 200 || r.status > 299) {
        rc = wctl_http_error(c, &r);
        wctl_response_free(&r);
        return rc;
    }
    json_error_t jerr;
    *out = json_loadb(r.body, r.body_len, JSON_DECODE_ANY, &jerr);
    if (!*out) {
        wctl_error("the broker's answer to GET %s is not JSON: %s (line %d, column %d)", path,
                   jerr.text, jerr.line, jerr.column);
        rc = WCTL_EXIT_SOFTWARE;
    }
    wctl_response_free(&r);
    return rc;
}

const char *wctl_node_name(wctl_ctx *c)
{
    if (c->node[0])
        return c->node;
    snprintf(c->node, sizeof c->node, "unknown");
    wctl_response r;
    if (wctl_call(c, "GET", "/api/overview", NULL, NULL, NULL, &r) != 0)
        return c->node;
    json_t *j = r.status == 200 ? json_loadb(r.body, r.body_len, 0, NULL) : NULL;
    const char *node = json_string_value(json_object_get(j, "node"));
    if (node)
        snprintf(c->node, sizeof c->node, "%s", node);
    json_decref(j);
    wctl_response_free(&r);
    return c->node;
}
