/* The embedded console: the generated asset table (every file of
 * mgmt-ui/www/ is there, byte for byte, with the right content type),
 * the reply decisions (index, ETag and 304, 404, 405, /api left alone,
 * security headers on every reply), and the evhttp adapter end to end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "../../mgmt-ui/mgmt_console.h"

static const char *header(const mgmt_console_reply *r, const char *name)
{
    for (size_t i = 0; i < r->header_count; i++)
        if (strcmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}

static void assert_security_headers(const mgmt_console_reply *r)
{
    const char *csp = header(r, "Content-Security-Policy");
    assert_non_null(csp);
    assert_non_null(strstr(csp, "script-src 'self';"));
    assert_non_null(strstr(csp, "frame-ancestors 'none'"));
    assert_null(strstr(csp, "unsafe-inline"));
    assert_null(strstr(csp, "unsafe-eval"));
    assert_string_equal(header(r, "X-Content-Type-Options"), "nosniff");
    assert_string_equal(header(r, "X-Frame-Options"), "DENY");
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Each embedded file equals its source (the test runs from the repo root). */
static void test_assets_match_sources(void **state)
{
    (void)state;
    assert_true(mgmt_asset_count() >= 10);
    const char *prev = "";
    for (size_t i = 0; i < mgmt_asset_count(); i++) {
        const mgmt_asset *a = mgmt_asset_at(i);
        assert_true(strcmp(prev, a->path) < 0); /* sorted, so the search works */
        prev = a->path;
        assert_ptr_equal(mgmt_asset_find(a->path), a);
        char path[512];
        snprintf(path, sizeof path, "mgmt-ui/www%s", a->path);
        size_t len;
        unsigned char *src = read_file(path, &len);
        assert_int_equal(len, a->length);
        assert_memory_equal(src, a->body, len);
        free(src);
        assert_int_equal(a->etag[0], '"');
        assert_int_equal(a->etag[strlen(a->etag) - 1], '"');
    }
    assert_null(mgmt_asset_at(mgmt_asset_count()));
    assert_null(mgmt_asset_find("/nope.js"));
    assert_null(mgmt_asset_find("/../Makefile"));
}

static void test_content_types(void **state)
{
    (void)state;
    static const struct { const char *path, *type; } cases[] = {
        {"/index.html", "text/html; charset=utf-8"},
        {"/js/app.js", "text/javascript; charset=utf-8"},
        {"/css/console.css", "text/css; charset=utf-8"},
        {"/icons.svg", "image/svg+xml"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const mgmt_asset *a = mgmt_asset_find(cases[i].path);
        assert_non_null(a);
        assert_string_equal(a->content_type, cases[i].type);
    }
}

static void test_root_is_index(void **state)
{
    (void)state;
    mgmt_console_reply r;
    const mgmt_asset *index = mgmt_asset_find("/index.html");
    const char *uris[] = {"/", "/?x=1", "/index.html", "/index.html?v=2"};
    for (size_t i = 0; i < 4; i++) {
        assert_true(mgmt_console_reply_to("GET", uris[i], NULL, &r));
        assert_int_equal(r.status, 200);
        assert_ptr_equal(r.body, index->body);
        assert_int_equal(r.length, index->length);
        assert_string_equal(header(&r, "Content-Type"), "text/html; charset=utf-8");
        assert_string_equal(header(&r, "ETag"), index->etag);
        assert_string_equal(header(&r, "Cache-Control"), "no-cache");
        assert_security_headers(&r);
    }
}

static void test_etag_revalidation(void **state)
{
    (void)state;
    const mgmt_asset *a = mgmt_asset_find("/js/app.js");
    char list[128], weak[128];
    snprintf(list, sizeof list, "\"other\", %s", a->etag);
    snprintf(weak, sizeof weak, "W/%s", a->etag);
    const char *hits[] = {a->etag, list, weak, "*"};
    mgmt_console_reply r;
    for (size_t i = 0; i < 4; i++) {
        assert_true(mgmt_console_reply_to("GET", "/js/app.js", hits[i], &r));
        assert_int_equal(r.status, 304);
        assert_null(r.body);
        assert_string_equal(header(&r, "ETag"), a->etag);
        assert_security_headers(&r);
    }
    assert_true(mgmt_console_reply_to("GET", "/js/app.js", "\"stale\"", &r));
    assert_int_equal(r.status, 200);
    assert_ptr_equal(r.body, a->body);
}

static void test_not_found_and_methods(void **state)
{
    (void)state;
    mgmt_console_reply r;
    assert_true(mgmt_console_reply_to("GET", "/no/such/file.js", NULL, &r));
    assert_int_equal(r.status, 404);
    assert_security_headers(&r);
    char longuri[600];
    memset(longuri, 'a', sizeof longuri - 1);
    longuri[0] = '/';
    longuri[sizeof longuri - 1] = '\0';
    assert_true(mgmt_console_reply_to("GET", longuri, NULL, &r));
    assert_int_equal(r.status, 404);
    assert_true(mgmt_console_reply_to("POST", "/index.html", NULL, &r));
    assert_int_equal(r.status, 405);
    assert_string_equal(header(&r, "Allow"), "GET, HEAD");
    assert_security_headers(&r);
    assert_true(mgmt_console_reply_to("HEAD", "/index.html", NULL, &r));
    assert_int_equal(r.status, 200);
    assert_ptr_equal(r.body, mgmt_asset_find("/index.html")->body);
    assert_int_equal(r.length, mgmt_asset_find("/index.html")->length);
}

static void test_api_is_not_the_consoles(void **state)
{
    (void)state;
    mgmt_console_reply r;
    r.status = -1;
    assert_false(mgmt_console_reply_to("GET", "/api/overview", NULL, &r));
    assert_false(mgmt_console_reply_to("GET", "/api", NULL, &r));
    assert_false(mgmt_console_reply_to("DELETE", "/api/queues/%2F/q", NULL, &r));
    assert_false(mgmt_console_reply_to("GET", "/api?x", NULL, &r));
    assert_int_equal(r.status, -1);
    /* A file that merely starts with "api" is the console's. */
    assert_true(mgmt_console_reply_to("GET", "/apis.js", NULL, &r));
    assert_int_equal(r.status, 404);
}

/* ---- the adapter to the HTTP server, over a real socket on 127.0.0.1 ---- */

struct fetch {
    struct event_base *base;
    int status;
    char etag[64];
    char csp[512];
    size_t length;
    unsigned char body[8];
};

static bool serve_cb(http_req *req, void *arg)
{
    (void)arg;
    if (!mgmt_console_serve(req))
        http_reply(req, 418, "api", NULL);
    return false;
}

static void never_cb(http_req *req, void *arg)
{
    (void)req, (void)arg;
    fail_msg("every request is answered on its head");
}

static void done_cb(struct evhttp_request *req, void *arg)
{
    struct fetch *f = arg;
    f->status = req ? evhttp_request_get_response_code(req) : -1;
    if (req) {
        struct evkeyvalq *h = evhttp_request_get_input_headers(req);
        const char *e = evhttp_find_header(h, "ETag");
        const char *c = evhttp_find_header(h, "Content-Security-Policy");
        snprintf(f->etag, sizeof f->etag, "%s", e ? e : "");
        snprintf(f->csp, sizeof f->csp, "%s", c ? c : "");
        struct evbuffer *b = evhttp_request_get_input_buffer(req);
        f->length = evbuffer_get_length(b);
        evbuffer_copyout(b, f->body, sizeof f->body);
    }
    event_base_loopexit(f->base, NULL);
}

static void fetch(struct event_base *base, int port, const char *uri, const char *inm, struct fetch *f)
{
    memset(f, 0, sizeof *f);
    f->base = base;
    struct evhttp_connection *c = evhttp_connection_base_new(base, NULL, "127.0.0.1", (unsigned short)port);
    struct evhttp_request *req = evhttp_request_new(done_cb, f);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host", "127.0.0.1");
    if (inm)
        evhttp_add_header(evhttp_request_get_output_headers(req), "If-None-Match", inm);
    assert_int_equal(evhttp_make_request(c, req, EVHTTP_REQ_GET, uri), 0);
    struct timeval limit = {5, 0};
    event_base_loopexit(base, &limit);
    event_base_dispatch(base);
    evhttp_connection_free(c);
}

static void test_server_adapter(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    http_limits lim = http_default_limits();
    static const http_callbacks cb = {.admit = serve_cb, .handle = never_cb};
    http_server *http = http_server_new(base, &lim, &cb, NULL);
    int port;
    assert_true(http_server_listen(http, "127.0.0.1", 0, &port));

    struct fetch f;
    const mgmt_asset *index = mgmt_asset_find("/index.html");
    fetch(base, port, "/", NULL, &f);
    assert_int_equal(f.status, 200);
    assert_int_equal(f.length, index->length);
    assert_memory_equal(f.body, index->body, sizeof f.body);
    assert_string_equal(f.etag, index->etag);
    assert_non_null(strstr(f.csp, "script-src 'self'"));

    fetch(base, port, "/", index->etag, &f);
    assert_int_equal(f.status, 304);
    assert_int_equal(f.length, 0);

    fetch(base, port, "/api/overview", NULL, &f);
    assert_int_equal(f.status, 418); /* left to the API */

    http_server_free(http);
    event_base_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_assets_match_sources),
        cmocka_unit_test(test_content_types),
        cmocka_unit_test(test_root_is_index),
        cmocka_unit_test(test_etag_revalidation),
        cmocka_unit_test(test_not_found_and_methods),
        cmocka_unit_test(test_api_is_not_the_consoles),
        cmocka_unit_test(test_server_adapter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
