/* Replies: the request's accessors and the writing of a whole or a
 * streamed reply onto the connection's output.
 *
 * A whole reply goes out with Content-Length. A streamed one uses chunked
 * transfer coding on HTTP/1.1; an HTTP/1.0 client gets the bytes as they
 * come and the end of the connection as the end of the reply. A HEAD
 * request gets the head alone. Connection: close is sent when the
 * connection will end after the reply (asked for, HTTP/1.0, or a body that
 * was never read).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "http_int.h"

http_method http_req_method(const http_req *r) { return r->h.method; }
const char *http_req_method_name(const http_req *r) { return r->h.method_name; }
const char *http_req_target(const http_req *r) { return r->h.target; }
const char *http_req_path(const http_req *r) { return r->h.path; }
const char *http_req_query(const http_req *r) { return r->h.query; }
int64_t http_req_content_length(const http_req *r) { return r->h.content_length; }
bool http_req_has_body(const http_req *r) { return r->h.content_length != 0; }
const struct sockaddr *http_req_peer(const http_req *r) { return (const struct sockaddr *)&r->c->peer; }
int http_req_fd(const http_req *r) { return r->c->fd; }
void http_req_set_data(http_req *r, void *data) { r->data = data; }
void *http_req_data(const http_req *r) { return r->data; }

const char *http_req_header(const http_req *r, const char *name)
{
    for (int i = 0; i < r->h.nheaders; i++)
        if (strcasecmp(r->h.headers[i].name, name) == 0)
            return r->h.headers[i].value;
    return NULL;
}

struct evbuffer *http_req_body(http_req *r)
{
    if (!r->body)
        r->body = evbuffer_new();
    return r->body;
}

void http_req_on_abort(http_req *r, void (*abort)(http_req *r, void *arg), void *arg)
{
    r->abort = abort;
    r->abort_arg = arg;
}

void http_reply_header(http_req *r, const char *name, const char *value)
{
    if (!r->reply_headers && !(r->reply_headers = evbuffer_new()))
        return;
    /* a CR or LF in a value would start a header of the caller's choosing */
    if (strpbrk(name, "\r\n:") || strpbrk(value, "\r\n"))
        return;
    evbuffer_add_printf(r->reply_headers, "%s: %s\r\n", name, value);
}

/* Whether the connection stays open after this reply. */
static bool keeps_alive(const http_req *r)
{
    const http_conn *c = r->c;
    return c->keep_alive && !c->peer_eof && (!http_req_has_body(r) || r->body_complete);
}

static void write_head(http_req *r, int status, const char *reason, const char *framing)
{
    struct evbuffer *out = bufferevent_get_output(r->c->bev);
    char date[64];
    time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&now, &tm));
    /* the version we speak, whatever the client's (RFC 9110 6.2) */
    evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nDate: %s\r\n%s", status, reason, date, framing);
    if (!keeps_alive(r))
        evbuffer_add_printf(out, "Connection: close\r\n");
    else if (r->h.minor_version == 0)
        evbuffer_add_printf(out, "Connection: keep-alive\r\n");
    if (r->reply_headers)
        evbuffer_add_buffer(out, r->reply_headers);
    evbuffer_add(out, "\r\n", 2);
}

void http_reply(http_req *r, int status, const char *reason, struct evbuffer *body)
{
    assert(!r->replying);
    r->replying = true;
    size_t len = body ? evbuffer_get_length(body) : 0;
    char framing[48];
    snprintf(framing, sizeof framing, "Content-Length: %zu\r\n", len);
    /* 1xx, 204 and 304 replies carry no body and no length */
    bool bodiless = status == 204 || status == 304 || status < 200;
    write_head(r, status, reason, bodiless ? "" : framing);
    if (body && !bodiless && r->h.method != HTTP_HEAD)
        evbuffer_add_buffer(bufferevent_get_output(r->c->bev), body);
    else if (body)
        evbuffer_drain(body, len);
    r->c->keep_alive = keeps_alive(r);
    http_conn_reply_done(r);
}

void http_reply_start(http_req *r, int status, const char *reason)
{
    assert(!r->replying);
    r->replying = r->streaming = true;
    if (r->h.minor_version == 0)
        r->c->keep_alive = false; /* the end of the connection ends the reply */
    write_head(r, status, reason,
               r->h.minor_version == 1 && r->h.method != HTTP_HEAD
                   ? "Transfer-Encoding: chunked\r\n" : "");
}

void http_reply_chunk(http_req *r, struct evbuffer *data,
                      void (*drained)(http_req *r, void *arg), void *arg)
{
    assert(r->streaming);
    struct evbuffer *out = bufferevent_get_output(r->c->bev);
    size_t len = evbuffer_get_length(data);
    if (r->h.method == HTTP_HEAD) {
        evbuffer_drain(data, len);
    } else if (len && r->h.minor_version == 1) {
        evbuffer_add_printf(out, "%zx\r\n", len);
        evbuffer_add_buffer(out, data);
        evbuffer_add(out, "\r\n", 2);
    } else {
        evbuffer_add_buffer(out, data);
    }
    r->drained = drained;
    r->drained_arg = arg;
    if (drained && evbuffer_get_length(out) == 0) /* nothing to wait for */
        bufferevent_trigger(r->c->bev, EV_WRITE, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

void http_reply_end(http_req *r)
{
    assert(r->streaming);
    if (r->h.minor_version == 1 && r->h.method != HTTP_HEAD)
        evbuffer_add(bufferevent_get_output(r->c->bev), "0\r\n\r\n", 5);
    r->c->keep_alive = keeps_alive(r);
    http_conn_reply_done(r);
}
