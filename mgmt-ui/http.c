/* The management plane's HTTP front: the listeners (management.tcp.ip:port
 * and the control socket data_dir/warrenctl.sock, mode 0600), both served
 * by http/'s server on the broker's loop, and one dispatcher.
 *
 * Everything that can refuse a request is decided on its head, before a
 * byte of its body is read (admit): a path outside /api is the web
 * console's (mgmt_console_serve: embedded files, ETag, CSP); an API
 * request goes: decode the path -> find its route (404 when no pattern
 * matches, 405 with Allow when only the method is wrong) -> authenticate
 * (401) -> check the route's tag (401, as RabbitMQ) -> for a change (PUT,
 * POST, DELETE): an Origin other than this server's is refused (403), and
 * so is a body that is not JSON (415; the definitions upload form too,
 * from the console's own origin only) -> the body's declared size (400,
 * as RabbitMQ). Only then is the body read, within the server's limits,
 * and the handler runs (handle): it parses, checks, calls the broker and
 * renders. Every error body is built by mgmt_error. A handler that streams
 * (a big list) takes over the request; otherwise it is freed when the
 * handler returns.
 *
 * Why the Origin and Content-Type rules: a browser holding Basic
 * credentials for this server sends them with any cross-site form or
 * "simple" fetch (text/plain, form-encoded, multipart) without asking the
 * server first; such a request carries the attacker's Origin, and a JSON
 * body cannot be sent cross-site without a CORS preflight, which is never
 * granted here.
 *
 * The control socket refuses a peer (SO_PEERCRED) whose uid is neither the
 * broker's effective uid nor root, on top of the socket file's mode.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/queue.h>
#include <sys/un.h>
#include <unistd.h>

#include "mgmt_console.h"
#include "mgmt_int.h"

typedef struct endpoint {
    mgmt *m;
    bool control;
} endpoint;

struct mgmt {
    server *s;
    http_server *http, *ctl;
    endpoint tcp_ep, ctl_ep;
    char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int port;
    mgmt_sampler *sampler;
    mgmt_work *work;
    mgmt_prometheus *prom;
    mgmt_https https;
    uint64_t auth_attempts, auth_failed; /* HTTP basic logins (auth.c) */
    uint64_t cross_origin_refused, media_type_refused;
    cluster *cluster; /* NULL: a single node */
    shovels *shovels; /* NULL: none */
};

void mgmt_set_cluster(mgmt *m, cluster *c) { m->cluster = c; }
cluster *mgmt_cluster_of(const mgmt *m) { return m->cluster; }
void mgmt_set_shovels(mgmt *m, shovels *sh) { m->shovels = sh; }
shovels *mgmt_shovels_of(const mgmt *m) { return m->shovels; }

int mgmt_port(const mgmt *m) { return m->port; }
const mgmt_https *mgmt_https_of(const mgmt *m) { return m->https.http ? &m->https : NULL; }
mgmt_sampler *mgmt_sampler_of(const mgmt *m) { return m->sampler; }
mgmt_prometheus *mgmt_prometheus_of(const mgmt *m) { return m->prom; }
mgmt_work *mgmt_work_of(const mgmt *m) { return m->work; }

void mgmt_http_refusals(const mgmt *m, uint64_t out[MGMT_HTTP_REFUSALS])
{
    memset(out, 0, MGMT_HTTP_REFUSALS * sizeof *out);
    for (int i = 0; i < 2; i++) {
        const http_server *h = i ? m->ctl : m->http;
        if (!h)
            continue;
        http_server_stats st = http_server_stats_of(h);
        out[0] += st.refused;
        out[1] += st.evicted;
        out[2] += st.head_timeouts;
        out[3] += st.body_timeouts;
    }
}

void mgmt_auth_counted(const mgmt *m, uint64_t *attempts, uint64_t *failed)
{
    *attempts = m->auth_attempts;
    *failed = m->auth_failed;
}

static const mgmt_route *const tables[] = {
    mgmt_overview_routes, mgmt_connection_routes, mgmt_exchange_routes,
    mgmt_queue_routes,    mgmt_binding_routes,    mgmt_vhost_routes,
    mgmt_user_routes,     mgmt_permission_routes, mgmt_policy_routes,
    mgmt_health_routes,   mgmt_definitions_routes, mgmt_move_routes,
    mgmt_parameter_routes, mgmt_node_routes, mgmt_limits_routes, mgmt_cluster_routes,
    mgmt_stream_routes, mgmt_stream_conn_routes, mgmt_super_stream_routes,
    mgmt_ring_routes, mgmt_shovel_routes, mgmt_federation_routes,
};

/* ---- replies ------------------------------------------------------------ */

static const char *status_text(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
    }
}

mgmt_json *mgmt_reply(mgmt_req *r)
{
    if (!r->out)
        r->out = evbuffer_new();
    if (r->out && !r->w)
        r->w = mgmt_json_new(r->out);
    if (!r->w) /* out of memory: a writer on nothing would crash; fail loudly */
        abort();
    return r->w;
}

const char *mgmt_header(mgmt_req *r, const char *name)
{
    return r->req ? http_req_header(r->req, name) : NULL;
}

void mgmt_add_header(mgmt_req *r, const char *name, const char *value)
{
    if (r->req)
        http_reply_header(r->req, name, value);
}

/* Sends r->out (or nothing) and lets go of the HTTP request, which the
 * server frees. */
static void send_out(mgmt_req *r, int status, struct evbuffer *body)
{
    http_reply(r->req, status, status_text(status), body);
    r->req = NULL;
}

void mgmt_send(mgmt_req *r, int status)
{
    mgmt_json_flush(mgmt_reply(r));
    mgmt_add_header(r, "Content-Type", "application/json");
    mgmt_add_header(r, "Cache-Control", "no-cache");
    send_out(r, status, r->out);
}

void mgmt_send_empty(mgmt_req *r, int status, const char *location)
{
    if (location)
        mgmt_add_header(r, "Location", location);
    send_out(r, status, NULL);
}

/* Throws away what a handler wrote before it failed; the writer flushes
 * its buffer when freed, so it goes first. */
static void reset_reply(mgmt_req *r)
{
    mgmt_json_free(r->w);
    r->w = NULL;
    if (r->out)
        evbuffer_drain(r->out, evbuffer_get_length(r->out));
}

void mgmt_error(mgmt_req *r, int status, const char *error, const char *reason)
{
    reset_reply(r);
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "error", error);
    mgmt_json_kstr(w, "reason", reason);
    mgmt_json_end_obj(w);
    mgmt_send(r, status);
}

void mgmt_errorf(mgmt_req *r, int status, const char *error, const char *fmt, ...)
{
    char reason[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    mgmt_error(r, status, error, reason);
}

void mgmt_bad_value(mgmt_req *r, const char *what, const json_t *json, const char *str)
{
    reset_reply(r);
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "error", "bad_request");
    mgmt_json_key(w, "reason");
    mgmt_json_arr(w);
    mgmt_json_str(w, what);
    if (json)
        mgmt_json_jansson(w, json);
    else
        mgmt_json_str(w, str);
    mgmt_json_end_arr(w);
    mgmt_json_end_obj(w);
    mgmt_send(r, 400);
}

void mgmt_not_found(mgmt_req *r) { mgmt_error(r, 404, "Object Not Found", "Not Found"); }

const char *mgmt_error_text(const amqp_error *err)
{
    const char *dash = strstr(err->text, " - ");
    return dash ? dash + 3 : err->text;
}

/* RabbitMQ's mapping: a missing object is 404, a refused resource (amq.
 * names, the default exchange) 401 "Access refused.", anything else 400
 * with the broker's text. */
void mgmt_amqp_error(mgmt_req *r, const amqp_error *err)
{
    if (err->code == AMQP_NOT_FOUND)
        mgmt_error(r, 404, "not_found", mgmt_error_text(err));
    else if (err->code == AMQP_ACCESS_REFUSED)
        mgmt_error(r, 401, "not_authorised", "Access refused.");
    else
        mgmt_error(r, 400, "bad_request", mgmt_error_text(err));
}

/* One mgmt_scratch block; a request keeps its blocks in a list. */
struct mgmt_scratch {
    struct mgmt_scratch *next;
    max_align_t data[];
};

void mgmt_req_free(mgmt_req *r)
{
    if (r->req) /* a handler that sent nothing: a bug, but not the client's wait */
        mgmt_error(r, 500, "internal_error", "no reply");
    evhttp_clear_headers(&r->query);
    mgmt_json_free(r->w);
    if (r->out)
        evbuffer_free(r->out);
    if (r->body)
        json_decref(r->body);
    while (r->scratch) {
        struct mgmt_scratch *next = r->scratch->next;
        free(r->scratch);
        r->scratch = next;
    }
    free(r);
}

/* ---- request helpers ---------------------------------------------------- */

void *mgmt_scratch(mgmt_req *r, size_t n)
{
    struct mgmt_scratch *b = n < SIZE_MAX - sizeof *b ? malloc(sizeof *b + n) : NULL;
    if (!b) {
        mgmt_error(r, 500, "internal_error", "out of memory");
        return NULL;
    }
    b->next = r->scratch;
    r->scratch = b;
    return b->data;
}

json_t *mgmt_body_value(mgmt_req *r)
{
    json_t *body = mgmt_body(r), *value = body ? json_object_get(body, "value") : NULL;
    if (body && !value)
        mgmt_error(r, 400, "bad_request", "[{key_missing,value}]");
    return value;
}

json_t *mgmt_body(mgmt_req *r)
{
    if (r->body)
        return r->body;
    struct evbuffer *in = http_req_body(r->req);
    size_t n = in ? evbuffer_get_length(in) : 0;
    if (n == 0)
        return r->body = json_object();
    json_error_t e;
    r->body = json_loadb((const char *)evbuffer_pullup(in, -1), n, JSON_DECODE_ANY, &e);
    if (!r->body) {
        mgmt_errorf(r, 400, "bad_request", "not_json: %s (line %d, column %d)", e.text, e.line,
                    e.column);
        return NULL;
    }
    if (json_is_string(r->body)) { /* RabbitMQ's own words for this mistake */
        mgmt_error(r, 400, "bad_request", "invalid payload: the request body JSON-decoded to a "
                                          "string. Is the input doubly-JSON-encoded?");
        return NULL;
    }
    if (!json_is_object(r->body)) {
        mgmt_error(r, 400, "bad_request", "not_json: expected a JSON object");
        return NULL;
    }
    return r->body;
}

const char *mgmt_query(mgmt_req *r, const char *key) { return evhttp_find_header(&r->query, key); }

bool mgmt_query_true(mgmt_req *r, const char *key)
{
    const char *v = mgmt_query(r, key);
    return v && strcmp(v, "true") == 0;
}

const char *mgmt_cap_str(mgmt_req *r, int i, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.*s", (int)r->cap[i].len, (const char *)r->cap[i].ptr);
    return buf;
}

bool mgmt_cap_name(mgmt_req *r, int i, char *buf, size_t cap)
{
    if (r->cap[i].len >= cap || memchr(r->cap[i].ptr, 0, r->cap[i].len))
        return false;
    mgmt_cap_str(r, i, buf, cap);
    return true;
}

vhost *mgmt_vhost_arg(mgmt_req *r, int i)
{
    vhost *v = server_vhost(r->s, r->cap[i]);
    if (!v) {
        mgmt_not_found(r);
    } else if (!mgmt_vhost_allowed(r, v)) {
        mgmt_error(r, 401, "not_authorised", "User not authorised to access virtual host");
        v = NULL;
    }
    return v;
}

vhost *mgmt_vhost_arg_declare(mgmt_req *r, int i)
{
    if (server_vhost(r->s, r->cap[i]))
        return mgmt_vhost_arg(r, i);
    mgmt_error(r, 404, "not_found", "vhost_not_found");
    return NULL;
}

/* ?msg_rates_age=60&msg_rates_incr=5 (seconds; RabbitMQ caps samples). */
static void parse_window(mgmt_req *r, const char *age_key, const char *incr_key, mgmt_window *w)
{
    const char *age = mgmt_query(r, age_key), *incr = mgmt_query(r, incr_key);
    long a = age ? strtol(age, NULL, 10) : 0, i = incr ? strtol(incr, NULL, 10) : 0;
    if (a > 0 && i > 0 && a / i <= 1000)
        *w = (mgmt_window){(uint32_t)a, (uint32_t)i};
}

/* ---- dispatch ----------------------------------------------------------- */

/* The route for (method, path); *allowed collects the methods of routes
 * whose pattern matches, for a 405. */
static const mgmt_route *find_route(mgmt_req *r, const amqp_bytes *segs, int n, char *allowed,
                                    size_t cap)
{
    http_method method = r->method == HTTP_HEAD ? HTTP_GET : r->method;
    allowed[0] = 0;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const mgmt_route *rt = tables[t]; rt->pattern; rt++) {
            if (!mgmt_path_match(rt->pattern, segs, n, r->cap, &r->ncap))
                continue;
            if (rt->method == method)
                return rt;
            const char *name = rt->method == HTTP_GET      ? "GET, HEAD"
                               : rt->method == HTTP_PUT    ? "PUT"
                               : rt->method == HTTP_POST   ? "POST"
                                                                 : "DELETE";
            size_t len = strlen(allowed);
            snprintf(allowed + len, cap - len, "%s%s", len ? ", " : "", name);
        }
    return NULL;
}

static bool has_tag(const mgmt_user *u, unsigned tag)
{
    if (u->tags & TAG_ADMINISTRATOR)
        return true;
    if (tag == TAG_MANAGEMENT)
        return u->tags & (TAG_MANAGEMENT | TAG_MONITORING | TAG_POLICYMAKER);
    return u->tags & tag;
}

/* RabbitMQ's words: a user without any management tag hears of that
 * first, whatever the route needs. */
static const char *tag_refusal(const mgmt_user *u, unsigned tag)
{
    if (!has_tag(u, TAG_MANAGEMENT))
        return "Not management user";
    return tag == TAG_ADMINISTRATOR ? "Not administrator user" : "Not monitor user";
}

static bool changes_state(const mgmt_req *r)
{
    return r->method == HTTP_PUT || r->method == HTTP_POST ||
           r->method == HTTP_DELETE || r->method == HTTP_PATCH;
}

/* Whether the request's Origin (when a browser sent one) is this server:
 * "http://" + the Host it was sent to. A request without Origin is not
 * from a cross-site page (browsers send it with every cross-site POST,
 * PUT and DELETE), unless Sec-Fetch-Site says it is. */
static bool same_origin(mgmt_req *r)
{
    const char *origin = mgmt_header(r, "Origin");
    if (!origin) {
        const char *site = mgmt_header(r, "Sec-Fetch-Site");
        return !site || strcmp(site, "same-origin") == 0 || strcmp(site, "none") == 0;
    }
    const char *host = mgmt_header(r, "Host");
    return host && strncasecmp(origin, "http://", 7) == 0 && strcasecmp(origin + 7, host) == 0;
}

/* A media type's name without its parameters equals `want`. */
static bool media_type_is(const char *ct, const char *want)
{
    size_t n = strlen(want);
    return ct && strncasecmp(ct, want, n) == 0 && (ct[n] == 0 || ct[n] == ';' || ct[n] == ' ');
}

/* The console's definitions upload may also come as a form. */
static bool takes_form_upload(const mgmt_route *rt)
{
    return rt->method == HTTP_POST && strncmp(rt->pattern, "/api/definitions", 16) == 0;
}

/* Checks of a state-changing request against cross-site use; replies and
 * returns false when refused. */
static bool check_change(mgmt_req *r, const mgmt_route *rt)
{
    bool same = same_origin(r);
    if (!same) {
        r->m->cross_origin_refused++;
        log_msg(LOG_WARNING, "management: refused a %s %s from another origin",
                http_req_method_name(r->req), rt->pattern);
        mgmt_error(r, 403, "forbidden", "Cross-origin requests that change state are refused.");
        return false;
    }
    if (!http_req_has_body(r->req))
        return true;
    const char *ct = mgmt_header(r, "Content-Type");
    if (media_type_is(ct, "application/json") ||
        (takes_form_upload(rt) && media_type_is(ct, "multipart/form-data") &&
         mgmt_header(r, "Origin")))
        return true;
    r->m->media_type_refused++;
    mgmt_error(r, 415, "unsupported_media_type",
               "Request bodies must be JSON (Content-Type: application/json).");
    return false;
}

/* Authentication, tag, origin, media type and body size; replies and
 * returns false on failure. */
static bool admit_api(mgmt_req *r, const mgmt_route *rt)
{
    bool had = false;
    bool ok = mgmt_authenticate(r, &had);
    if (had) { /* a login tried, as rabbitmq_prometheus counts protocol="http" */
        r->m->auth_attempts++;
        r->m->auth_failed += !ok;
    }
    if (!ok) {
        mgmt_add_header(r, "WWW-Authenticate", "Basic realm=\"RabbitMQ Management\"");
        mgmt_error(r, 401, "not_authorized", had ? "Login failed" : "Not authorized");
        return false;
    }
    if (!has_tag(&r->user, rt->tag)) { /* 401 (not 403), as RabbitMQ 3.10 answers */
        mgmt_error(r, 401, "not_authorised", tag_refusal(&r->user, rt->tag));
        return false;
    }
    if (changes_state(r) && !r->control && !check_change(r, rt))
        return false;
    int64_t len = http_req_content_length(r->req);
    if (len > 0 && (uint64_t)len > server_config(r->s)->mgmt_max_body) {
        loop_refused(admin_loop(r->s), REFUSED_HTTP_BODY_SIZE, "management: request to %.200s "
                     "refused: a body of %lld bytes is over management.http.max_body_size (%llu)",
                     http_req_path(r->req), (long long)len,
                     (unsigned long long)server_config(r->s)->mgmt_max_body);
        mgmt_error(r, 400, "bad_request", "Exceeded HTTP request body size limit");
        return false;
    }
    return true;
}

static void parse_common(mgmt_req *r)
{
    const char *qs = http_req_query(r->req);
    TAILQ_INIT(&r->query);
    if (qs)
        evhttp_parse_query_str(qs, &r->query);
    r->disable_stats = mgmt_query_true(r, "disable_stats");
    parse_window(r, "msg_rates_age", "msg_rates_incr", &r->msg_window);
    parse_window(r, "lengths_age", "lengths_incr", &r->len_window);
}

/* Decides on the head; true when the handler is to run once the body is in. */
static bool route_request(mgmt_req *r)
{
    amqp_bytes segs[MGMT_PATH_SEGMENTS];
    int n = mgmt_path_decode(http_req_path(r->req), r->path_buf, sizeof r->path_buf, segs,
                             MGMT_PATH_SEGMENTS);
    char allowed[128];
    const mgmt_route *rt = n >= 0 ? find_route(r, segs, n, allowed, sizeof allowed) : NULL;
    if (!rt && n >= 0 && allowed[0]) {
        size_t len = strlen(allowed);
        snprintf(allowed + len, sizeof allowed - len, ", OPTIONS");
        mgmt_add_header(r, "Allow", allowed);
        if (r->method == HTTP_OPTIONS) /* what a path allows, as RabbitMQ answers it */
            mgmt_send_empty(r, 200, NULL);
        else
            mgmt_error(r, 405, "method_not_allowed", "Method Not Allowed");
        return false;
    }
    if (!rt) {
        mgmt_not_found(r);
        return false;
    }
    /* a debug access log: the route's pattern, never a client's names */
    log_msg(LOG_DEBUG, "management: %s %s", http_req_method_name(r->req), rt->pattern);
    r->route = rt;
    return admit_api(r, rt);
}

/* The control socket's peer must be the broker's own user or root. */
static bool peer_allowed(http_req *req)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(http_req_fd(req), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return false;
    if (cred.uid == geteuid() || cred.uid == 0)
        return true;
    log_msg(LOG_WARNING, "control socket: refused a client running as uid %u (pid %d)",
            (unsigned)cred.uid, (int)cred.pid);
    return false;
}

/* The client went away before the reply ended (the server frees req). */
static void aborted(http_req *req, void *arg)
{
    (void)req;
    mgmt_req *r = arg;
    r->req = NULL;
    mgmt_work_cancel(r->m->work, &r->job);
    if (r->on_abort)
        r->on_abort(r->on_abort_arg);
    else
        mgmt_req_free(r);
}

static bool admit(http_req *req, void *arg)
{
    endpoint *ep = arg;
    if (ep->control && !peer_allowed(req)) {
        http_reply(req, 403, "Forbidden", NULL);
        return false;
    }
    if (!ep->control && mgmt_console_serve(req))
        return false;
    mgmt_req *r = calloc(1, sizeof *r);
    if (!r) {
        http_reply(req, 500, "Internal Server Error", NULL);
        return false;
    }
    r->m = ep->m;
    r->s = ep->m->s;
    r->req = req;
    r->method = http_req_method(req);
    r->control = ep->control;
    parse_common(r);
    loop_touch_clock(admin_loop(r->s));
    if (!route_request(r)) {
        mgmt_req_free(r);
        return false;
    }
    http_req_set_data(req, r);
    http_req_on_abort(req, aborted, r);
    return true;
}

static void run_handler(mgmt_job *j)
{
    mgmt_req *r = (mgmt_req *)((char *)j - offsetof(mgmt_req, job));
    loop_touch_clock(admin_loop(r->s));
    r->route->fn(r);
    if (!r->streaming)
        mgmt_req_free(r);
}

/* The body is in: the handler runs in the scheduler's turn. */
static void handle(http_req *req, void *arg)
{
    (void)arg;
    mgmt_req *r = http_req_data(req);
    r->job.step = run_handler;
    mgmt_work_queue(r->m->work, &r->job);
}

/* ---- listeners ---------------------------------------------------------- */

http_limits mgmt_http_limits(const config *cfg)
{
    http_limits lim = http_default_limits();
    lim.max_connections = cfg->mgmt_max_connections;
    lim.max_body_bytes = cfg->mgmt_max_body;
    if (lim.body_budget_bytes < 2 * lim.max_body_bytes)
        lim.body_budget_bytes = 2 * lim.max_body_bytes;
    lim.head_timeout_ms = cfg->mgmt_head_timeout_ms;
    lim.body_timeout_ms = cfg->mgmt_body_timeout_ms;
    lim.idle_timeout_ms = cfg->mgmt_idle_timeout_ms;
    return lim;
}

static http_server *new_http(mgmt *m, endpoint *ep, bool control)
{
    *ep = (endpoint){m, control};
    http_limits lim = mgmt_http_limits(server_config(m->s));
    static const http_callbacks cb = {.admit = admit, .handle = handle};
    return http_server_new(loop_base(admin_loop(m->s)), &lim, &cb, ep);
}

bool mgmt_http_bind(http_server *h, const char *ip, int port, const char *what, int *bound)
{
    if (!http_server_listen(h, ip, port, bound)) {
        int e = errno;
        log_msg(LOG_ERROR, "%s: cannot listen on %s:%d: %s", what, ip, port, strerror(e));
        errno = e;
        return false;
    }
    bool v6 = strchr(ip, ':') != NULL;
    log_msg(LOG_INFO, "%s listening on %s%s%s:%d", what, v6 ? "[" : "", ip, v6 ? "]" : "", *bound);
    return true;
}

bool mgmt_plain_wanted(bool tls_on, bool tcp_port_set, const config_listeners *more)
{
    return !tls_on || tcp_port_set || more->n > 0;
}

bool mgmt_http_bind_more(http_server *h, const config_listeners *more, const char *what)
{
    for (unsigned i = 0; i < more->n; i++) {
        int bound;
        const config_listener *l = &more->extra[i];
        if (!mgmt_http_bind(h, l->host, l->port, what, &bound))
            return false;
    }
    return true;
}

/* With management.ssl.* and no management.tcp.* key RabbitMQ serves the
 * API over HTTPS alone (seen on 3.10.8): no plain listener then (port 0). */
static bool listen_tcp(mgmt *m)
{
    const config *cfg = server_config(m->s);
    if (!(m->http = new_http(m, &m->tcp_ep, false)))
        return false;
    if (!mgmt_plain_wanted(cfg->mgmt_tls.on, cfg->mgmt_port_set, &cfg->mgmt_more))
        return true;
    return mgmt_http_bind(m->http, cfg->mgmt_ip, cfg->mgmt_port, "management", &m->port);
}

/* data_dir/warrenctl.sock, created with mode 0600 (umask held around bind
 * so it is never reachable with wider permissions). */
static bool listen_control(mgmt *m)
{
    const char *dir = server_config(m->s)->data_dir;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(m->sock_path, sizeof m->sock_path, "%s/warrenctl.sock", dir) >=
        sizeof m->sock_path) {
        log_msg(LOG_ERROR, "control socket: path %s/warrenctl.sock is too long", dir);
        m->sock_path[0] = 0;
        return false;
    }
    memcpy(sa.sun_path, m->sock_path, sizeof sa.sun_path);
    unlink(m->sock_path); /* a stale one from a killed broker */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    mode_t old = umask(0177);
    int rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc == 0)
        rc = chmod(m->sock_path, 0600);
    if (rc != 0 || !(m->ctl = new_http(m, &m->ctl_ep, true)) ||
        !http_server_listen_fd(m->ctl, fd)) {
        log_msg(LOG_ERROR, "control socket %s: %s", m->sock_path, strerror(errno));
        if (rc != 0 && fd >= 0)
            close(fd);
        return false;
    }
    log_msg(LOG_INFO, "control socket at %s", m->sock_path);
    return true;
}

/* A configured port that cannot be bound stops start-up; the default one
 * (15672) taken by another broker on a development machine does not: the
 * AMQP side and the control socket still serve. Neither does a control
 * socket path too long for a Unix socket (data_dir nested deeply). */
mgmt *mgmt_new(server *s)
{
    mgmt *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->s = s;
    m->sampler = mgmt_sampler_new(s); /* without it rates read 0 */
    if (!(m->work = mgmt_work_new(loop_base(admin_loop(s))))) {
        mgmt_free(m);
        return NULL;
    }
    const config *cfg = server_config(s);
    if (!listen_tcp(m)) {
        if (cfg->mgmt_port_set || errno != EADDRINUSE) {
            mgmt_free(m);
            return NULL;
        }
        log_msg(LOG_WARNING, "management: port %d is in use; the HTTP API is not served on "
                             "TCP (set management.tcp.port)", cfg->mgmt_port);
        http_server_free(m->http);
        m->http = NULL;
    } else if (!mgmt_http_bind_more(m->http, &cfg->mgmt_more, "management") ||
               !mgmt_https_listen(&m->https, s, m->http, &cfg->mgmt_tls, "management")) {
        mgmt_free(m); /* a listener named in the configuration */
        return NULL;
    }
    listen_control(m);
    m->prom = mgmt_prometheus_new(m, s);
    if (!m->prom && (cfg->prometheus_port_set || errno != EADDRINUSE)) {
        mgmt_free(m);
        return NULL;
    }
    if (!m->prom)
        log_msg(LOG_WARNING, "prometheus: port %d is in use; /metrics is not served (set "
                             "prometheus.tcp.port)", cfg->prometheus_port);
    return m;
}

void mgmt_free(mgmt *m)
{
    if (!m)
        return;
    http_server_free(m->http);
    http_server_free(m->ctl);
    mgmt_prometheus_free(m->prom);
    mgmt_work_free(m->work); /* every job went with its connection */
    if (m->sock_path[0])
        unlink(m->sock_path);
    mgmt_sampler_free(m->sampler);
    free(m);
}
