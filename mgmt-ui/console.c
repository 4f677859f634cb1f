/* Serving the embedded web console.
 *
 * The files live in assets_gen.c (generated from mgmt-ui/www/ by
 * gen_assets.py), sorted by path, each with a content type and a strong
 * ETag computed from its bytes. A reply is decided by a pure function over
 * (method, uri, If-None-Match) that fills a struct of static pointers, so
 * it is tested without a server and costs no allocation; the HTTP
 * adapter below only copies headers and hands the body over by reference.
 *
 * Caching: assets are not fingerprinted, so every reply says no-cache and
 * the browser revalidates with If-None-Match; an unchanged file costs a
 * 304 with no body, and a new binary's console is seen at once.
 *
 * Security: the CSP forbids inline script and any other origin (the
 * console's modules, styles and icons are all 'self'), framing is refused
 * twice (frame-ancestors and X-Frame-Options, for old browsers), and
 * nosniff keeps a JSON or text body from being run as script. */
#include "mgmt_console.h"

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#define CSP "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
            "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "   \
            "frame-ancestors 'none'"

static void add_header(mgmt_console_reply *r, const char *name, const char *value)
{
    if (r->header_count < MGMT_CONSOLE_MAX_HEADERS) {
        r->headers[r->header_count].name = name;
        r->headers[r->header_count].value = value;
        r->header_count++;
    }
}

static void start_reply(mgmt_console_reply *r, int status, const char *reason)
{
    memset(r, 0, sizeof *r);
    r->status = status;
    r->reason = reason;
    add_header(r, "Content-Security-Policy", CSP);
    add_header(r, "X-Content-Type-Options", "nosniff");
    add_header(r, "X-Frame-Options", "DENY");
    add_header(r, "Referrer-Policy", "no-referrer");
}

static void text_body(mgmt_console_reply *r, const char *text)
{
    add_header(r, "Content-Type", "text/plain; charset=utf-8");
    r->body = (const unsigned char *)text;
    r->length = strlen(text);
}

/* True when the If-None-Match list names `etag` (weak or strong) or is "*".
 * ETags are quoted and cannot contain quotes, so a substring match on the
 * quoted form is exact. */
static bool etag_matches(const char *if_none_match, const char *etag)
{
    if (!if_none_match)
        return false;
    const char *p = if_none_match;
    while (*p == ' ' || *p == '\t')
        p++;
    if (p[0] == '*' && (p[1] == '\0' || p[1] == ' '))
        return true;
    return strstr(if_none_match, etag) != NULL;
}

static bool is_api_path(const char *uri)
{
    return strncmp(uri, "/api", 4) == 0 && (uri[4] == '\0' || uri[4] == '/' || uri[4] == '?');
}

bool mgmt_console_reply_to(const char *method, const char *uri, const char *if_none_match,
                           mgmt_console_reply *out)
{
    if (is_api_path(uri))
        return false;
    bool head = strcmp(method, "HEAD") == 0; /* the server drops its body */
    if (!head && strcmp(method, "GET") != 0) {
        start_reply(out, 405, "Method Not Allowed");
        add_header(out, "Allow", "GET, HEAD");
        text_body(out, "method not allowed\n");
        return true;
    }
    char path[256];
    size_t n = strcspn(uri, "?#");
    if (n >= sizeof path) {
        start_reply(out, 404, "Not Found");
        text_body(out, "not found\n");
        return true;
    }
    memcpy(path, uri, n);
    path[n] = '\0';
    const mgmt_asset *a = mgmt_asset_find(n <= 1 ? "/index.html" : path);
    if (!a) {
        start_reply(out, 404, "Not Found");
        text_body(out, "not found\n");
    } else if (etag_matches(if_none_match, a->etag)) {
        start_reply(out, 304, "Not Modified");
        add_header(out, "ETag", a->etag);
        add_header(out, "Cache-Control", "no-cache");
    } else {
        start_reply(out, 200, "OK");
        add_header(out, "Content-Type", a->content_type);
        add_header(out, "ETag", a->etag);
        add_header(out, "Cache-Control", "no-cache");
        out->body = a->body;
        out->length = a->length;
    }
    return true;
}

bool mgmt_console_serve(http_req *req)
{
    const char *inm = http_req_header(req, "If-None-Match");
    mgmt_console_reply r;
    if (!mgmt_console_reply_to(http_req_method_name(req), http_req_target(req), inm, &r))
        return false;
    for (size_t i = 0; i < r.header_count; i++)
        http_reply_header(req, r.headers[i].name, r.headers[i].value);
    struct evbuffer *body = evbuffer_new();
    if (body && r.length) /* by reference: the assets are static */
        evbuffer_add_reference(body, r.body, r.length, NULL, NULL);
    http_reply(req, r.status, r.reason, body);
    if (body)
        evbuffer_free(body);
    return true;
}
