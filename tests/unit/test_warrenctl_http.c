/* HTTP response parsing (Content-Length, chunked, no framing, 1xx, bad
 * input), URLs, percent-encoding of path segments and base64, from tables.
 * Every complete response is also fed cut short at each length, which must
 * never be DONE early nor read past the input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../warrenctl/warrenctl.h"

typedef struct parse_case {
    const char *raw;
    bool at_eof;
    wctl_parse_status want;
    int status;
    const char *body;
} parse_case;

static const parse_case cases[] = {
    {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]", false, WCTL_PARSE_DONE, 200, "[]"},
    {"HTTP/1.1 200 OK\r\ncontent-length:2\r\n\r\n[]", false, WCTL_PARSE_DONE, 200, "[]"},
    {"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n", false, WCTL_PARSE_DONE, 404, ""},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n[{\"a\r\n5\r\n\":1}]\r\n0\r\n\r\n",
     false, WCTL_PARSE_DONE, 200, "[{\"a\":1}]"},
    /* chunk extensions, upper-case hex, trailers */
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA;x=y\r\n0123456789\r\n0\r\n"
     "X-Trailer: 1\r\n\r\n", false, WCTL_PARSE_DONE, 200, "0123456789"},
    /* chunked wins over Content-Length (RFC 9112) */
    {"HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
     false, WCTL_PARSE_DONE, 200, "x"},
    {"HTTP/1.1 204 No Content\r\n\r\n", false, WCTL_PARSE_DONE, 204, ""},
    {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx", false,
     WCTL_PARSE_DONE, 201, "x"},
    /* bare LF line ends */
    {"HTTP/1.1 200 OK\nContent-Length: 1\n\nx", false, WCTL_PARSE_DONE, 200, "x"},
    /* no framing: the body runs to the end of the connection */
    {"HTTP/1.1 200 OK\r\n\r\nall of it", true, WCTL_PARSE_DONE, 200, "all of it"},
    {"HTTP/1.1 200 OK\r\n\r\nall of it", false, WCTL_PARSE_MORE, 0, NULL},
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", false, WCTL_PARSE_MORE, 0, NULL},
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", true, WCTL_PARSE_ERROR, 0, NULL},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", false, WCTL_PARSE_MORE, 0, NULL},
    {"", true, WCTL_PARSE_ERROR, 0, NULL},
    {"AMQP\x00\x00\x09\x01", true, WCTL_PARSE_ERROR, 0, NULL},
    {"HTTP/1.1 2x0 OK\r\n\r\n", true, WCTL_PARSE_ERROR, 0, NULL},
    {"HTTP/2 200\r\n\r\n", true, WCTL_PARSE_ERROR, 0, NULL},
    {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy", false, WCTL_PARSE_ERROR, 0, NULL},
    {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false, WCTL_PARSE_ERROR, 0, NULL},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx", true, WCTL_PARSE_ERROR, 0, NULL},
    /* a chunk longer than its size, and a size that is not hex */
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n0\r\n\r\n", false, WCTL_PARSE_ERROR, 0, NULL},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false, WCTL_PARSE_ERROR, 0, NULL},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFF\r\n", false, WCTL_PARSE_ERROR, 0, NULL},
};

static void test_parse_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const parse_case *c = &cases[i];
        size_t len = strlen(c->raw) + (c->raw[0] == 'A' ? 4 : 0);
        wctl_response r;
        assert_int_equal(wctl_http_parse(c->raw, len, c->at_eof, &r), c->want);
        if (c->want == WCTL_PARSE_DONE) {
            assert_int_equal(r.status, c->status);
            assert_int_equal(r.body_len, strlen(c->body));
            assert_string_equal(r.body, c->body);
        } else {
            assert_null(r.body);
        }
        wctl_response_free(&r);
    }
}

/* Every proper prefix of a complete response needs more (or is an error at
 * the end of input); copied to its own allocation so a read past the end
 * shows under ASan. */
static void test_prefixes_never_done(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const parse_case *c = &cases[i];
        if (c->want != WCTL_PARSE_DONE || c->at_eof)
            continue;
        size_t len = strlen(c->raw);
        for (size_t n = 0; n < len; n++) {
            char *copy = malloc(n ? n : 1);
            memcpy(copy, c->raw, n);
            wctl_response r;
            wctl_parse_status st = wctl_http_parse(copy, n, false, &r);
            /* a 204 or a 100 + response can be complete before the input ends */
            if (st == WCTL_PARSE_DONE)
                assert_true(c->status == 204 || strstr(c->raw, "100 Continue"));
            else
                assert_int_equal(st, WCTL_PARSE_MORE);
            wctl_response_free(&r);
            free(copy);
        }
    }
}

static void test_location_header(void **state)
{
    (void)state;
    const char *raw = "HTTP/1.1 201 Created\r\nLocation: /api/bindings/%2F/e/x/q/q/~\r\n"
                      "Content-Length: 0\r\n\r\n";
    wctl_response r;
    assert_int_equal(wctl_http_parse(raw, strlen(raw), false, &r), WCTL_PARSE_DONE);
    assert_string_equal(r.location, "/api/bindings/%2F/e/x/q/q/~");
    wctl_response_free(&r);
}

static void test_urls(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bool ok;
        const char *host;
        int port;
        const char *prefix;
    } urls[] = {
        {"http://127.0.0.1:15672", true, "127.0.0.1", 15672, ""},
        {"http://127.0.0.1:15672/", true, "127.0.0.1", 15672, ""},
        {"http://broker.example/rabbit/", true, "broker.example", 80, "/rabbit"},
        {"http://[::1]:15672/x?y", true, "::1", 15672, "/x"},
        {"https://h:15671", false, NULL, 0, NULL},
        {"ftp://h", false, NULL, 0, NULL},
        {"http://:15672", false, NULL, 0, NULL},
        {"http://h:0", false, NULL, 0, NULL},
        {"http://h:65536", false, NULL, 0, NULL},
        {"http://h:12ab", false, NULL, 0, NULL},
        {"http://[::1", false, NULL, 0, NULL},
    };
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        wctl_url u;
        char err[256];
        assert_int_equal(wctl_url_parse(urls[i].text, &u, err, sizeof err), urls[i].ok);
        if (!urls[i].ok) {
            assert_non_null(strstr(err, urls[i].text));
            continue;
        }
        assert_string_equal(u.host, urls[i].host);
        assert_int_equal(u.port, urls[i].port);
        assert_string_equal(u.prefix, urls[i].prefix);
    }
}

static void test_percent_encoding(void **state)
{
    (void)state;
    static const char *const pairs[][2] = {
        {"/", "%2F"}, {"my vhost", "my%20vhost"}, {"q 3/weird", "q%203%2Fweird"},
        {"a-b.c_d~e", "a-b.c_d~e"}, {"%", "%25"}, {"x?y#z&", "x%3Fy%23z%26"},
        {"\xc3\xa9", "%C3%A9"}, {"", ""}, {"127.0.0.1:5 -> 127.0.0.1:5672", "127.0.0.1%3A5%20-%3E%20127.0.0.1%3A5672"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        wctl_buf b = {0};
        wctl_url_encode_segment(&b, pairs[i][0]);
        assert_string_equal(wctl_buf_str(&b), pairs[i][1]);
        wctl_buf_free(&b);
    }
}

static void test_base64(void **state)
{
    (void)state;
    static const char *const pairs[][2] = { /* RFC 4648's vectors */
        {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="},
        {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}, {"guest:guest", "Z3Vlc3Q6Z3Vlc3Q="},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        wctl_buf b = {0};
        wctl_base64(&b, (const unsigned char *)pairs[i][0], strlen(pairs[i][0]));
        assert_string_equal(wctl_buf_str(&b), pairs[i][1]);
        wctl_buf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_table),
        cmocka_unit_test(test_prefixes_never_done),
        cmocka_unit_test(test_location_header),
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_percent_encoding),
        cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests_name("warrenctl_http", tests, NULL, NULL);
}
