/* A follower's own small HTTP server for its status.
 *
 * Followers have no broker and so no management plane; their management
 * port (management.tcp.ip:port) answers GET /api/cluster, /api/nodes,
 * /api/nodes/{node} and /api/healthchecks/node from this node's
 * cluster_status (status_json.c's JSON, as the leader's API gives it), to
 * administrators and monitoring users of the replicated metadata (HTTP
 * basic; the password checked by access_check_password, as the broker
 * checks it; refusals in RabbitMQ's words); "/" is a page that shows the
 * cluster from /api/cluster (status_page.c); anything else is 503
 * not_leader, naming the leader. Every request is answered on its head
 * (admit): no body is ever read, heads are small and time out, so the
 * cluster thread never waits on a client. It runs on the cluster thread's
 * event base and is freed before this node leads, so the broker's
 * management plane can bind the same port.
 */
#include <event2/buffer.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../access/access.h"
#include "../http/http.h"
#include "cluster_int.h"

struct status_http {
    cluster *c;
    http_server *http;
};

static void reply_json(http_req *req, int status, const char *reason, json_t *body)
{
    struct evbuffer *out = evbuffer_new();
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (out && text)
        evbuffer_add(out, text, strlen(text));
    free(text);
    http_reply_header(req, "Content-Type", "application/json");
    http_reply_header(req, "Cache-Control", "no-cache");
    http_reply(req, out && text ? status : 500, out && text ? reason : "Internal Server Error",
               out);
    if (out)
        evbuffer_free(out);
}

static void reply_error(http_req *req, int status, const char *reason, const char *error,
                        const char *why)
{
    reply_json(req, status, reason, json_pack("{s:s,s:s}", "error", error, "reason", why));
}

/* The user's record from the replicated metadata. */
typedef struct user_row {
    const char *want;
    bool found;
    char hash[256], algorithm[64], tags[512];
} user_row;

static void take_user(void *ctx, const meta_user *u)
{
    user_row *row = ctx;
    if (row->found || strcmp(u->name, row->want) != 0)
        return;
    row->found = true;
    snprintf(row->hash, sizeof row->hash, "%s", u->password_hash ? u->password_hash : "");
    snprintf(row->algorithm, sizeof row->algorithm, "%s",
             u->hashing_algorithm && *u->hashing_algorithm ? u->hashing_algorithm
                                                           : ACCESS_HASH_SHA256);
    snprintf(row->tags, sizeof row->tags, "%s", u->tags ? u->tags : "");
}

typedef enum login { LOGIN_OK, LOGIN_NONE, LOGIN_FAILED, LOGIN_NOT_MANAGEMENT, LOGIN_NOT_MONITOR,
                     LOGIN_NO_USERS } login;

/* "Basic base64(user:password)" (padding optional, as the management
 * plane takes it) -> user and password (NUL-free). */
static bool basic_credentials(const char *h, char *user, size_t ucap, char *pass, size_t pcap)
{
    uint8_t raw[400];
    char padded[536];
    if (strncasecmp(h, "Basic ", 6) != 0)
        return false;
    size_t n = strlen(h + 6);
    if (n == 0 || n % 4 == 1 || n + 3 >= sizeof padded)
        return false;
    memcpy(padded, h + 6, n);
    while (n % 4)
        padded[n++] = '=';
    int len = EVP_DecodeBlock(raw, (const unsigned char *)padded, (int)n);
    if (len < 0)
        return false;
    len -= (padded[n - 1] == '=') + (padded[n - 2] == '=');
    const uint8_t *colon = memchr(raw, ':', (size_t)len);
    if (!colon || memchr(raw, 0, (size_t)len))
        return false;
    size_t ul = (size_t)(colon - raw), pl = (size_t)len - ul - 1;
    if (ul >= ucap || pl >= pcap)
        return false;
    memcpy(user, raw, ul);
    user[ul] = 0;
    memcpy(pass, colon + 1, pl);
    pass[pl] = 0;
    return true;
}

static login authenticate(status_http *sh, http_req *req)
{
    const char *h = http_req_header(req, "Authorization");
    char user[128], pass[256];
    if (!h)
        return LOGIN_NONE;
    if (!basic_credentials(h, user, sizeof user, pass, sizeof pass))
        return LOGIN_FAILED;
    meta *m = sh->c->fol ? follower_meta(sh->c->fol) : NULL;
    if (!m)
        return LOGIN_NO_USERS;
    user_row row = {.want = user};
    meta_load_handlers handlers = {.user = take_user};
    if (!meta_load(m, &handlers, &row) || !row.found || !*pass ||
        !access_check_password(row.algorithm, row.hash, AMQP_CSTR(pass)) ||
        (config_loopback_only(&sh->c->cfg, user) && !server_sockaddr_loopback(http_req_peer(req)))) {
        log_msg(LOG_WARNING, "cluster: HTTP access to the follower status denied for '%s'", user);
        return LOGIN_FAILED;
    }
    unsigned tags = access_parse_tags(row.tags);
    if (tags & (ACCESS_TAG_ADMINISTRATOR | ACCESS_TAG_MONITORING))
        return LOGIN_OK;
    return tags & (ACCESS_TAG_MANAGEMENT | ACCESS_TAG_POLICYMAKER) ? LOGIN_NOT_MONITOR
                                                                   : LOGIN_NOT_MANAGEMENT;
}

/* The path without its query, percent-decoded into buf; false when
 * malformed or too long. */
static bool decode_path(const char *path, char *buf, size_t cap)
{
    size_t n = 0;
    for (const char *p = path; *p && *p != '?'; p++) {
        int ch = (unsigned char)*p;
        if (ch == '%') {
            char hex[3] = {p[1], p[1] ? p[2] : 0, 0};
            char *end;
            long v = strtol(hex, &end, 16);
            if (!hex[0] || !hex[1] || *end || v == 0)
                return false;
            ch = (int)v;
            p += 2;
        }
        if (n + 1 >= cap)
            return false;
        buf[n++] = (char)ch;
    }
    buf[n] = 0;
    if (n > 1 && buf[n - 1] == '/') /* a trailing slash adds nothing */
        buf[n - 1] = 0;
    return true;
}

static bool refuse_login(http_req *req, login l)
{
    switch (l) {
    case LOGIN_OK:
        return false;
    case LOGIN_NONE:
    case LOGIN_FAILED:
        http_reply_header(req, "WWW-Authenticate", "Basic realm=\"RabbitMQ Management\"");
        reply_error(req, 401, "Unauthorized", "not_authorized",
                    l == LOGIN_NONE ? "Not authorized" : "Login failed");
        return true;
    case LOGIN_NOT_MANAGEMENT:
    case LOGIN_NOT_MONITOR: /* 401, not 403, as RabbitMQ 3.10 answers */
        reply_error(req, 401, "Unauthorized", "not_authorised",
                    l == LOGIN_NOT_MONITOR ? "Not monitor user" : "Not management user");
        return true;
    case LOGIN_NO_USERS:
        reply_error(req, 503, "Service Unavailable", "not_ready",
                    "this follower has no copy of the users yet (its snapshot has not arrived)");
        return true;
    }
    return true;
}

static void not_leader(http_req *req, const cluster_status *st)
{
    char why[256];
    char who[160] = "nobody yet";
    if (*st->leader)
        server_cluster_node_name(st->leader, who, sizeof who);
    snprintf(why, sizeof why, "this node follows %s; use the leader's management API", who);
    reply_error(req, 503, "Service Unavailable", "not_leader", why);
}

static void serve_status(http_req *req, const char *path, const cluster_status *st)
{
    const char *node = strncmp(path, "/api/nodes/", 11) == 0 ? path + 11 : NULL;
    if (strcmp(path, "/api/cluster") == 0) {
        reply_json(req, 200, "OK", cluster_status_json(st));
    } else if (strcmp(path, "/api/healthchecks/node") == 0) {
        reply_json(req, 200, "OK", json_pack("{s:s}", "status", "ok"));
    } else if (strcmp(path, "/api/nodes") == 0) {
        reply_json(req, 200, "OK", cluster_nodes_json(st));
    } else {
        json_t *nodes = cluster_nodes_json(st), *n, *found = NULL;
        size_t i;
        json_array_foreach(nodes, i, n)
            if (!found && strcmp(json_string_value(json_object_get(n, "name")), node) == 0)
                found = json_incref(n);
        json_decref(nodes);
        if (found)
            reply_json(req, 200, "OK", found);
        else
            reply_error(req, 404, "Not Found", "Object Not Found", "Not Found");
    }
}

static bool status_path(const char *path)
{
    return strcmp(path, "/api/cluster") == 0 || strcmp(path, "/api/nodes") == 0 ||
           strcmp(path, "/api/healthchecks/node") == 0 ||
           (strncmp(path, "/api/nodes/", 11) == 0 && path[11] && !strchr(path + 11, '/'));
}

/* Everything is answered here, on the head: no body is read. */
static bool admit(http_req *req, void *arg)
{
    status_http *sh = arg;
    cluster_status st;
    char path[512];
    cluster_get_status(sh->c, &st);
    bool ok = decode_path(http_req_path(req), path, sizeof path);
    bool page = ok && status_page_path(path);
    if (!ok || (!status_path(path) && !page)) {
        not_leader(req, &st);
        return false;
    }
    http_method m = http_req_method(req);
    if (m != HTTP_GET && m != HTTP_HEAD) {
        http_reply_header(req, "Allow", "GET, HEAD");
        reply_error(req, 405, "Method Not Allowed", "method_not_allowed", "Method Not Allowed");
        return false;
    }
    if (page) {
        status_page_serve(req, path);
        return false;
    }
    if (!refuse_login(req, authenticate(sh, req)))
        serve_status(req, path, &st);
    return false;
}

static void handle(http_req *req, void *arg)
{
    (void)arg; /* admit answers every request */
    http_reply(req, 500, "Internal Server Error", NULL);
}

status_http *status_http_new(cluster *c)
{
    const config *cfg = &c->cfg;
    if (cfg->mgmt_tls.on && !cfg->mgmt_port_set && !cfg->mgmt_more.n) {
        log_msg(LOG_INFO, "cluster: the management plane serves HTTPS alone; a follower's "
                          "status is not served");
        return NULL;
    }
    status_http *sh = calloc(1, sizeof *sh);
    if (!sh)
        return NULL;
    sh->c = c;
    http_limits lim = http_default_limits();
    lim.max_connections = 32;
    lim.max_head_bytes = 8192;
    lim.max_body_bytes = 0;
    lim.body_budget_bytes = 0;
    lim.head_timeout_ms = 5000;
    lim.idle_timeout_ms = 10000;
    http_callbacks cb = {admit, handle};
    int bound = 0;
    if (!(sh->http = http_server_new(c->base, &lim, &cb, sh)) ||
        !http_server_listen(sh->http, cfg->mgmt_ip, cfg->mgmt_port, &bound)) {
        log_msg(LOG_WARNING, "cluster: the follower's status is not served on %s:%d", cfg->mgmt_ip,
                cfg->mgmt_port);
        status_http_free(sh);
        return NULL;
    }
    log_msg(LOG_INFO, "cluster: follower status listening on %s:%d", cfg->mgmt_ip, bound);
    return sh;
}

void status_http_free(status_http *sh)
{
    if (!sh)
        return;
    http_server_free(sh->http);
    free(sh);
}
