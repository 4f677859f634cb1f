/* The web console's part of the management module: the console's files
 * (mgmt-ui/www/, embedded at build time by gen_assets.py into
 * assets_gen.c) and the replies that serve them, with caching and the
 * security headers. The HTTP server asks mgmt_console_serve() first for
 * every request that is not under /api/. */
#ifndef WARREN_MGMT_CONSOLE_H
#define WARREN_MGMT_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>

#include "../http/http.h"

/* One embedded file. Everything points at static, read-only data. */
typedef struct mgmt_asset {
    const char *path;          /* "/index.html", "/js/app.js" */
    const char *content_type;  /* "text/javascript; charset=utf-8" */
    const unsigned char *body;
    size_t length;
    const char *etag;          /* quoted strong ETag: "\"9f86d081884c7d659a2f\"" */
} mgmt_asset;

/* The file at `path` (exact, with the leading slash, no query), or NULL. */
const mgmt_asset *mgmt_asset_find(const char *path);
/* How many files are embedded, and the i-th in path order (NULL past the end). */
size_t mgmt_asset_count(void);
const mgmt_asset *mgmt_asset_at(size_t i);

enum { MGMT_CONSOLE_MAX_HEADERS = 10 };

typedef struct mgmt_http_header {
    const char *name;
    const char *value;
} mgmt_http_header;

/* A reply decided by mgmt_console_reply_to(); every pointer is static. */
typedef struct mgmt_console_reply {
    int status;                 /* 200, 304, 404 or 405 */
    const char *reason;         /* "OK", "Not Modified", ... */
    const unsigned char *body;  /* NULL for 304 and HEAD */
    size_t length;              /* Content-Length (also for HEAD) */
    size_t header_count;
    mgmt_http_header headers[MGMT_CONSOLE_MAX_HEADERS];
} mgmt_console_reply;

/* Decides the reply to `method` `uri` (path with optional ?query) given the
 * request's If-None-Match header (NULL when absent): "/" is index.html; an
 * embedded file is 200 with its Content-Type, ETag and Cache-Control:
 * no-cache, or 304 when If-None-Match names its ETag (or "*"); other paths
 * 404; methods other than GET and HEAD 405. HEAD gets GET's reply (the
 * HTTP server sends its head only). Every reply carries the
 * Content-Security-Policy (no inline script: script-src 'self';
 * frame-ancestors 'none'), X-Content-Type-Options: nosniff,
 * X-Frame-Options: DENY and Referrer-Policy: no-referrer.
 * Returns false, leaving *out untouched, for /api and /api/... (not the
 * console's). Never allocates. */
bool mgmt_console_reply_to(const char *method, const char *uri, const char *if_none_match,
                           mgmt_console_reply *out);

/* Sends the console's reply to `req` (the body by reference, not copied;
 * the server leaves it out for HEAD). Returns false, sending nothing, for
 * /api paths. */
bool mgmt_console_serve(http_req *req);

#endif
