/* Definitions: GET /api/definitions[/{vhost}] (export) and POST (import,
 * a JSON body or the console's multipart/form-data upload with a "file"
 * part), administrators only as in RabbitMQ. The work is the definitions
 * module's; this file maps it to HTTP: 204 on success, 400 bad_request
 * with the module's reason (which names the item) when refused. An
 * unknown vhost is 400 vhost_not_found on GET and 404 on POST, RabbitMQ's
 * answers.
 */
#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

#include "../definitions/definitions.h"
#include "mgmt_int.h"

static int to_evbuffer(const char *p, size_t n, void *arg)
{
    return evbuffer_add(arg, p, n);
}

static void export(mgmt_req *r, vhost *only)
{
    json_t *doc = defs_export(r->s, only);
    if (!r->out)
        r->out = evbuffer_new();
    if (!doc || !r->out || json_dump_callback(doc, to_evbuffer, r->out, JSON_COMPACT) != 0) {
        json_decref(doc);
        mgmt_error(r, 500, "internal_error", "out of memory");
        return;
    }
    json_decref(doc);
    const char *download = mgmt_query(r, "download");
    if (download && *download && !strpbrk(download, "\"\r\n")) {
        char disp[300];
        snprintf(disp, sizeof disp, "attachment; filename=\"%.250s\"", download);
        mgmt_add_header(r, "Content-Disposition", disp);
    }
    mgmt_send(r, 200);
}

static void get_definitions(mgmt_req *r) { export(r, NULL); }

static void get_vhost_definitions(mgmt_req *r)
{
    vhost *v = server_vhost(r->s, r->cap[0]);
    if (!v)
        mgmt_error(r, 400, "bad_request", "vhost_not_found");
    else
        export(r, v);
}

/* The "file" part of a multipart/form-data body, or NULL (then *n = 0). */
static const char *form_file(mgmt_req *r, const char *body, size_t len, size_t *n)
{
    const char *ct = mgmt_header(r, "Content-Type");
    const char *b = ct ? strstr(ct, "boundary=") : NULL;
    char delim[200];
    *n = 0;
    if (!b)
        return NULL;
    b += 9;
    size_t blen = *b == '"' ? strcspn(++b, "\"") : strcspn(b, "; \t");
    if (!blen || blen > 150)
        return NULL;
    snprintf(delim, sizeof delim, "\r\n--%.*s", (int)blen, b);
    /* Parts start after "--boundary"; the first has no CRLF before it. */
    for (const char *p = memmem(body, len, delim + 2, strlen(delim + 2)); p;) {
        const char *head = p + strlen(delim + 2);
        const char *end_head = memmem(head, len - (size_t)(head - body), "\r\n\r\n", 4);
        if (!end_head)
            return NULL;
        const char *data = end_head + 4;
        const char *next = memmem(data, len - (size_t)(data - body), delim, strlen(delim));
        if (!next)
            return NULL;
        if (memmem(head, (size_t)(end_head - head), "name=\"file\"", 11)) {
            *n = (size_t)(next - data);
            return data;
        }
        p = next + 2;
    }
    return NULL;
}

static void import(mgmt_req *r, vhost *only)
{
    struct evbuffer *in = http_req_body(r->req);
    size_t len = evbuffer_get_length(in);
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "{}";
    const char *ct = mgmt_header(r, "Content-Type");
    if (!len)
        len = 2;
    if (ct && strncmp(ct, "multipart/form-data", 19) == 0) {
        body = form_file(r, body, len, &len);
        if (!body) {
            mgmt_error(r, 400, "bad_request", "no \"file\" part in the form");
            return;
        }
    }
    defs_error err;
    if (defs_import_text(r->s, body, len, only, &err)) {
        mgmt_send_empty(r, 204, NULL);
        return;
    }
    if (err.line)
        mgmt_errorf(r, 400, "bad_request", "%s (line %d, column %d)", err.reason, err.line,
                    err.column);
    else
        mgmt_error(r, 400, "bad_request", err.reason);
}

static void post_definitions(mgmt_req *r) { import(r, NULL); }

static void post_vhost_definitions(mgmt_req *r)
{
    vhost *v = server_vhost(r->s, r->cap[0]);
    if (!v)
        mgmt_error(r, 404, "not_found", "vhost_not_found");
    else
        import(r, v);
}

const mgmt_route mgmt_definitions_routes[] = {
    {HTTP_GET, "/api/definitions", TAG_ADMINISTRATOR, get_definitions},
    {HTTP_POST, "/api/definitions", TAG_ADMINISTRATOR, post_definitions},
    {HTTP_GET, "/api/definitions/{}", TAG_ADMINISTRATOR, get_vhost_definitions},
    {HTTP_POST, "/api/definitions/{}", TAG_ADMINISTRATOR, post_vhost_definitions},
    {0},
};
