/* The HTTP server: two evhttp instances on the broker's loop -- the TCP
 * listener (management.tcp.ip:port) and the control socket
 * (data_dir/warrenctl.sock, mode 0600) -- sharing one dispatcher.
 *
 * On the TCP listener a path outside /api is the web console's
 * (mgmt_console_serve: embedded files, ETag, CSP). An API request goes:
 * decode the path -> find its route in the tables (404 when
 * no pattern matches, 405 with Allow when only the method is wrong) ->
 * authenticate (401) -> check the route's tag (401, as RabbitMQ) -> check the body size
 * (400, as RabbitMQ) -> the handler, which parses, checks, calls the broker and renders.
 * Every error body is built by mgmt_error. A handler that streams (a big
 * list) takes over the request; otherwise it is freed when the handler
 * returns.
 *
 * The control socket refuses a peer (SO_PEERCRED) whose uid is neither the
 * broker's effective uid nor root, on top of the socket file's mode.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    struct evhttp *http, *ctl;
    endpoint tcp_ep, ctl_ep;
    char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int port;
    mgmt_sampler *sampler;
    mgmt_prometheus *prom;
    uint64_t auth_attempts, auth_failed; /* HTTP basic logins (auth.c) */
};

int mgmt_port(const mgmt *m) { return m->port; }
mgmt_sampler *mgmt_sampler_of(const mgmt *m) { return m->sampler; }

void mgmt_http_abandon(struct evhttp_request *req)
{
    if (req && !evhttp_request_get_connection(req))
        evhttp_request_free(req);
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

void mgmt_send(mgmt_req *r, int status)
{
    mgmt_json_flush(mgmt_reply(r));
    struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);
    evhttp_add_header(h, "Content-Type", "application/json");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_send_reply(r->req, status, status_text(status), r->out);
}

void mgmt_send_empty(mgmt_req *r, int status, const char *location)
{
    if (location)
        evhttp_add_header(evhttp_request_get_output_headers(r->req), "Location", location);
    evhttp_send_reply(r->req, status, status_text(status), NULL);
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

/* A jansson value through the writer (echoing what a client sent). */
static void put_jansson(mgmt_json *w, const json_t *v)
{
    const char *key;
    json_t *e;
    size_t i;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        mgmt_json_obj(w);
        json_object_foreach((json_t *)v, key, e) {
            mgmt_json_key(w, key);
            put_jansson(w, e);
        }
        mgmt_json_end_obj(w);
        break;
    case JSON_ARRAY:
        mgmt_json_arr(w);
        json_array_foreach((json_t *)v, i, e) put_jansson(w, e);
        mgmt_json_end_arr(w);
        break;
    case JSON_STRING:
        mgmt_json_bytes(w, (amqp_bytes){(const uint8_t *)json_string_value(v),
                                        (uint32_t)json_string_length(v)});
        break;
    case JSON_INTEGER:
        mgmt_json_int(w, json_integer_value(v));
        break;
    case JSON_REAL:
        mgmt_json_double(w, json_real_value(v));
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        mgmt_json_bool(w, json_is_true(v));
        break;
    default:
        mgmt_json_null(w);
    }
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
        put_jansson(w, json);
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

void mgmt_req_free(mgmt_req *r)
{
    evhttp_clear_headers(&r->query);
    mgmt_json_free(r->w);
    if (r->out)
        evbuffer_free(r->out);
    if (r->body)
        json_decref(r->body);
    free(r);
}

/* ---- request helpers ---------------------------------------------------- */

json_t *mgmt_body(mgmt_req *r)
{
    if (r->body)
        return r->body;
    struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
    size_t n = evbuffer_get_length(in);
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
    enum evhttp_cmd_type method = r->method == EVHTTP_REQ_HEAD ? EVHTTP_REQ_GET : r->method;
    allowed[0] = 0;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const mgmt_route *rt = tables[t]; rt->pattern; rt++) {
            if (!mgmt_path_match(rt->pattern, segs, n, r->cap, &r->ncap))
                continue;
            if (rt->method == method)
                return rt;
            const char *name = rt->method == EVHTTP_REQ_GET      ? "GET, HEAD"
                               : rt->method == EVHTTP_REQ_PUT    ? "PUT"
                               : rt->method == EVHTTP_REQ_POST   ? "POST"
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

static const char *tag_refusal(unsigned tag)
{
    return tag == TAG_ADMINISTRATOR ? "Not administrator user"
           : tag == TAG_MONITORING  ? "Not monitor user"
           : tag == TAG_POLICYMAKER ? "Not policymaker user"
                                    : "Not management user";
}

/* Authentication, tag and body size; replies and returns false on failure. */
static bool admit(mgmt_req *r, const mgmt_route *rt)
{
    bool had = false;
    bool ok = mgmt_authenticate(r, &had);
    if (had) { /* a login tried, as rabbitmq_prometheus counts protocol="http" */
        r->m->auth_attempts++;
        r->m->auth_failed += !ok;
    }
    if (!ok) {
        evhttp_add_header(evhttp_request_get_output_headers(r->req), "WWW-Authenticate",
                          "Basic realm=\"RabbitMQ Management\"");
        mgmt_error(r, 401, "not_authorized", had ? "Login failed" : "Not authorized");
        return false;
    }
    if (!has_tag(&r->user, rt->tag)) { /* 401 (not 403), as RabbitMQ 3.10 answers */
        mgmt_error(r, 401, "not_authorised", tag_refusal(rt->tag));
        return false;
    }
    size_t body = evbuffer_get_length(evhttp_request_get_input_buffer(r->req));
    if (body > MGMT_MAX_BODY) {
        mgmt_error(r, 400, "bad_request", "Exceeded HTTP request body size limit");
        return false;
    }
    return true;
}

/* The control socket's peer must be the broker's own user or root. */
static bool peer_allowed(struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (!bev || getsockopt(bufferevent_getfd(bev), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return false;
    if (cred.uid == geteuid() || cred.uid == 0)
        return true;
    log_msg(LOG_WARNING, "control socket: refused a client running as uid %u (pid %d)",
            (unsigned)cred.uid, (int)cred.pid);
    return false;
}

static void parse_common(mgmt_req *r)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(r->req);
    const char *qs = evhttp_uri_get_query(uri);
    TAILQ_INIT(&r->query);
    if (qs)
        evhttp_parse_query_str(qs, &r->query);
    r->disable_stats = mgmt_query_true(r, "disable_stats");
    parse_window(r, "msg_rates_age", "msg_rates_incr", &r->msg_window);
    parse_window(r, "lengths_age", "lengths_incr", &r->len_window);
}

static void route_request(mgmt_req *r)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(r->req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    amqp_bytes segs[MGMT_PATH_SEGMENTS];
    int n = path ? mgmt_path_decode(path, r->path_buf, sizeof r->path_buf, segs,
                                    MGMT_PATH_SEGMENTS)
                 : -1;
    char allowed[128];
    const mgmt_route *rt = n >= 0 ? find_route(r, segs, n, allowed, sizeof allowed) : NULL;
    if (!rt && n >= 0 && allowed[0]) {
        size_t len = strlen(allowed);
        snprintf(allowed + len, sizeof allowed - len, ", OPTIONS");
        evhttp_add_header(evhttp_request_get_output_headers(r->req), "Allow", allowed);
        if (r->method == EVHTTP_REQ_OPTIONS) /* what a path allows, as RabbitMQ answers it */
            mgmt_send_empty(r, 200, NULL);
        else
            mgmt_error(r, 405, "method_not_allowed", "Method Not Allowed");
    } else if (!rt) {
        mgmt_not_found(r);
    } else {
        /* a debug access log: the route's pattern, never a client's names */
        log_msg(LOG_DEBUG, "management: %s %s", mgmt_method_name(r->method), rt->pattern);
        if (admit(r, rt))
            rt->fn(r);
    }
}

static void dispatch(struct evhttp_request *req, void *arg)
{
    endpoint *ep = arg;
    if (ep->control && !peer_allowed(req)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        evhttp_send_error(req, 403, "Forbidden");
        return;
    }
    if (!ep->control && mgmt_console_serve(req))
        return;
    mgmt_req *r = calloc(1, sizeof *r);
    if (!r) {
        evhttp_send_error(req, 500, "Internal Server Error");
        return;
    }
    r->m = ep->m;
    r->s = ep->m->s;
    r->req = req;
    r->method = evhttp_request_get_command(req);
    r->control = ep->control;
    parse_common(r);
    server_touch_clock(r->s);
    route_request(r);
    if (!r->streaming)
        mgmt_req_free(r);
}

/* ---- listeners ---------------------------------------------------------- */

static struct evhttp *new_http(mgmt *m, endpoint *ep, bool control)
{
    struct evhttp *h = evhttp_new(server_base(m->s));
    if (!h)
        return NULL;
    *ep = (endpoint){m, control};
    evhttp_set_gencb(h, dispatch, ep);
    evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                      EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                                      EVHTTP_REQ_PATCH);
    evhttp_set_max_body_size(h, 4 * (ev_ssize_t)MGMT_MAX_BODY);
    evhttp_set_max_headers_size(h, 64 * 1024);
    evhttp_set_timeout(h, 120);
    return h;
}

bool mgmt_http_bind(struct evhttp *h, const char *ip, int port, const char *what, int *bound)
{
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(h, ip, (ev_uint16_t)port);
    if (!bs) {
        int e = errno;
        log_msg(LOG_ERROR, "%s: cannot listen on %s:%d: %s", what, ip, port, strerror(e));
        errno = e;
        return false;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";
    *bound = 0;
    if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &len) == 0) {
        bool v6 = ss.ss_family == AF_INET6;
        inet_ntop(ss.ss_family,
                  v6 ? (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                     : (void *)&((struct sockaddr_in *)&ss)->sin_addr,
                  host, sizeof host);
        *bound = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                          : ((struct sockaddr_in *)&ss)->sin_port);
    }
    log_msg(LOG_INFO, "%s listening on %s:%d", what, host, *bound);
    return true;
}

static bool listen_tcp(mgmt *m)
{
    const config *cfg = server_config(m->s);
    if (!(m->http = new_http(m, &m->tcp_ep, false)))
        return false;
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
    struct evconnlistener *l = NULL;
    if (rc == 0 && chmod(m->sock_path, 0600) == 0)
        l = evconnlistener_new(server_base(m->s), NULL, NULL,
                               LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 128, fd);
    if (!l || !(m->ctl = new_http(m, &m->ctl_ep, true)) || !evhttp_bind_listener(m->ctl, l)) {
        log_msg(LOG_ERROR, "control socket %s: %s", m->sock_path, strerror(errno));
        if (l && !m->ctl)
            evconnlistener_free(l);
        else if (!l && fd >= 0)
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
    const config *cfg = server_config(s);
    if (!listen_tcp(m)) {
        if (cfg->mgmt_port_set || errno != EADDRINUSE) {
            mgmt_free(m);
            return NULL;
        }
        log_msg(LOG_WARNING, "management: port %d is in use; the HTTP API is not served on "
                             "TCP (set management.tcp.port)", cfg->mgmt_port);
        evhttp_free(m->http);
        m->http = NULL;
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
    if (m->http)
        evhttp_free(m->http);
    if (m->ctl)
        evhttp_free(m->ctl);
    mgmt_prometheus_free(m->prom);
    if (m->sock_path[0])
        unlink(m->sock_path);
    mgmt_sampler_free(m->sampler);
    free(m);
}
