/* etcd/ without an etcd: the response parser (fed whole and byte by byte),
 * its bounds, base64, the int64-as-string fields, prefix ends and the
 * decoding of replies, errors and garbage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "../../etcd/etcd_int.h"

typedef struct got {
    char msgs[8][256];
    int n;
} got;

static bool collect(void *arg, const char *msg, size_t len)
{
    got *g = arg;
    assert_true(g->n < 8 && len < 256);
    assert_int_equal(strlen(msg), len); /* NUL-terminated copy */
    memcpy(g->msgs[g->n++], msg, len + 1);
    return true;
}

/* Feeds `text` whole (step 0) or `step` bytes at a time. */
static resp_rc feed(resp_parser *p, const char *text, size_t step, got *g)
{
    struct evbuffer *in = evbuffer_new();
    size_t n = strlen(text), off = 0;
    resp_rc rc = RESP_MORE;
    memset(g, 0, sizeof(*g));
    while (rc == RESP_MORE && off < n) {
        size_t k = step && step < n - off ? step : n - off;
        evbuffer_add(in, text + off, k);
        off += k;
        rc = resp_feed(p, in, collect, g);
    }
    evbuffer_free(in);
    return rc;
}

static const char *CHUNKED = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             "Transfer-Encoding: chunked\r\n\r\n"
                             "8\r\n{\"a\":1}\n\r\n"
                             "3;ext=1\r\n{\"b\r\n"
                             "5\r\n\":2}\n\r\n"
                             "0\r\nGrpc-Trailer-Content-Type: application/grpc\r\n\r\n";

static void test_resp_chunked_any_split(void **s)
{
    for (size_t step = 0; step < 12; step++) {
        resp_parser p;
        got g;
        assert_int_equal(resp_init(&p, 8192, 1024), 0);
        assert_int_equal(feed(&p, CHUNKED, step, &g), RESP_END);
        assert_int_equal(p.status, 200);
        assert_int_equal(g.n, 2);
        assert_string_equal(g.msgs[0], "{\"a\":1}");
        assert_string_equal(g.msgs[1], "{\"b\":2}");
        resp_fini(&p);
    }
}

static void test_resp_content_length_and_reuse(void **s)
{
    const char *r = "HTTP/1.1 404 Not Found\r\nContent-Length: 7\r\n\r\n{\"e\":1}"
                    "HTTP/1.1 200 OK\r\ncontent-length:  2 \r\n\r\n{}";
    resp_parser p;
    got g;
    struct evbuffer *in = evbuffer_new();
    evbuffer_add(in, r, strlen(r));
    assert_int_equal(resp_init(&p, 8192, 1024), 0);
    memset(&g, 0, sizeof(g));
    assert_int_equal(resp_feed(&p, in, collect, &g), RESP_END);
    assert_int_equal(p.status, 404);
    assert_string_equal(g.msgs[0], "{\"e\":1}");
    resp_reset(&p);
    assert_int_equal(resp_feed(&p, in, collect, &g), RESP_END);
    assert_int_equal(p.status, 200);
    assert_string_equal(g.msgs[1], "{}");
    assert_int_equal(evbuffer_get_length(in), 0);
    evbuffer_free(in);
    resp_fini(&p);
}

static void test_resp_refusals(void **s)
{
    static const struct {
        const char *text;
        const char *why;
    } cases[] = {
        {"HTTP/2 200\r\n\r\n", "bad status line"},
        {"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", "bad status code"},
        {"HTTP/1.1 200 OK\r\n\r\n", "no body length"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", "bad Content-Length"},
        {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
         "bad Content-Length"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "unsupported Transfer-Encoding"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
         "both chunked and Content-Length"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n",
         "bad chunk size"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
         "chunk not followed by CRLF"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        resp_parser p;
        got g;
        assert_int_equal(resp_init(&p, 8192, 1024), 0);
        assert_int_equal(feed(&p, cases[i].text, 0, &g), RESP_ERROR);
        assert_string_equal(p.error, cases[i].why);
        resp_fini(&p);
    }
}

/* A peer that never ends its head, its chunk-size line or a message is cut
 * off at the bound, whatever it sends. */
static void test_resp_bounds(void **s)
{
    resp_parser p;
    struct evbuffer *in = evbuffer_new();
    got g = {0};
    assert_int_equal(resp_init(&p, 256, 100), 0);
    for (int i = 0; i < 100 && resp_feed(&p, in, collect, &g) == RESP_MORE; i++)
        evbuffer_add(in, "X-Header: aaaaaaa\r\n", 19);
    assert_string_equal(p.error, "response head too large");
    evbuffer_drain(in, evbuffer_get_length(in));

    resp_reset(&p);
    evbuffer_add_printf(in, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 100 && resp_feed(&p, in, collect, &g) == RESP_MORE; i++)
        evbuffer_add(in, "0000000000", 10);
    assert_string_equal(p.error, "chunk line too long");
    evbuffer_drain(in, evbuffer_get_length(in));

    /* one chunk of 1 GiB announced: read as it comes, cut at the message bound */
    resp_reset(&p);
    evbuffer_add_printf(in, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40000000\r\n");
    resp_rc rc = RESP_MORE;
    for (int i = 0; i < 100 && rc == RESP_MORE; i++) {
        evbuffer_add(in, "{\"aaaaaaa\"", 10);
        rc = resp_feed(&p, in, collect, &g);
        assert_true(evbuffer_get_length(p.msg) <= 100);
    }
    assert_int_equal(rc, RESP_ERROR);
    assert_string_equal(p.error, "response message too large");
    assert_int_equal(g.n, 0);
    evbuffer_free(in);
    resp_fini(&p);
}

static bool stop_at_first(void *arg, const char *msg, size_t len)
{
    (*(int *)arg)++;
    return false;
}

static void test_resp_owner_stops(void **s)
{
    resp_parser p;
    int calls = 0;
    struct evbuffer *in = evbuffer_new();
    evbuffer_add(in, CHUNKED, strlen(CHUNKED));
    assert_int_equal(resp_init(&p, 8192, 1024), 0);
    assert_int_equal(resp_feed(&p, in, stop_at_first, &calls), RESP_STOP);
    assert_int_equal(calls, 1);
    evbuffer_free(in);
    resp_fini(&p);
}

static void test_base64(void **s)
{
    static const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        json_t *j = codec_b64(plain[i], strlen(plain[i]));
        assert_string_equal(json_string_value(j), enc[i]);
        uint8_t *d;
        size_t n;
        assert_int_equal(codec_unb64(enc[i], strlen(enc[i]), &d, &n), 0);
        assert_int_equal(n, strlen(plain[i]));
        assert_memory_equal(d, plain[i], n);
        free(d);
        json_decref(j);
    }
    uint8_t bin[256];
    for (int i = 0; i < 256; i++)
        bin[i] = (uint8_t)i;
    json_t *j = codec_b64(bin, sizeof(bin));
    uint8_t *d;
    size_t n;
    assert_int_equal(codec_unb64(json_string_value(j), json_string_length(j), &d, &n), 0);
    assert_int_equal(n, 256);
    assert_memory_equal(d, bin, 256);
    free(d);
    json_decref(j);
    static const char *bad[] = {"Zg=", "Z===", "Zm9v!A==", "=m9v", "Zg==Zg==", "Zm\x00v"};
    for (int i = 0; i < 6; i++)
        assert_int_equal(codec_unb64(bad[i], i == 5 ? 4 : strlen(bad[i]), &d, &n), -1);
}

static void test_ints_and_prefix(void **s)
{
    json_t *o = json_pack("{sssIsssssss[]}", "a", "9223372036854775807", "b", (json_int_t)7, "c",
                          "12x", "d", "", "e", "99999999999999999999", "f");
    int64_t v;
    assert_int_equal(codec_int(o, "a", &v), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(codec_int(o, "b", &v), 0);
    assert_int_equal(v, 7);
    assert_int_equal(codec_int(o, "missing", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(codec_int(o, "c", &v), -1);
    assert_int_equal(codec_int(o, "d", &v), -1);
    assert_int_equal(codec_int(o, "e", &v), -1);
    assert_int_equal(codec_int(o, "f", &v), -1);
    json_decref(o);

    json_t *e = codec_prefix_end((const uint8_t *)"ab", 2);
    assert_string_equal(json_string_value(e), "YWM="); /* "ac" */
    json_decref(e);
    e = codec_prefix_end((const uint8_t *)"a\xff\xff", 3);
    assert_string_equal(json_string_value(e), "Yg=="); /* "b" */
    json_decref(e);
    e = codec_prefix_end((const uint8_t *)"\xff", 1);
    assert_string_equal(json_string_value(e), "AA=="); /* "\0": to the end */
    json_decref(e);
}

static void decode(const char *msg, int http, etcd_result *r, json_t **keep)
{
    codec_result(msg, strlen(msg), http, r, keep);
}

static void test_results(void **s)
{
    etcd_result r;
    json_t *keep;
    decode("{\"header\":{\"revision\":\"12\"},\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"4\","
           "\"mod_revision\":\"11\",\"version\":\"3\",\"value\":\"AGI=\",\"lease\":\"77\"}],"
           "\"count\":\"1\"}",
           200, &r, &keep);
    assert_int_equal(r.status, ETCD_OK);
    assert_int_equal(r.revision, 12);
    assert_int_equal(r.n_kvs, 1);
    assert_int_equal(r.count, 1);
    assert_int_equal(r.kvs[0].key_len, 3);
    assert_memory_equal(r.kvs[0].key, "foo", 3);
    assert_int_equal(r.kvs[0].value_len, 2);
    assert_memory_equal(r.kvs[0].value, "\0b", 2);
    assert_int_equal(r.kvs[0].create_revision, 4);
    assert_int_equal(r.kvs[0].mod_revision, 11);
    assert_int_equal(r.kvs[0].version, 3);
    assert_int_equal(r.kvs[0].lease, 77);
    codec_result_free(&r, keep);

    decode("{\"header\":{\"revision\":\"5\"},\"responses\":[{\"response_range\":{\"kvs\":[{\"key\":"
           "\"YQ==\"}]}},{\"response_put\":{}},{\"response_range\":{\"kvs\":[{\"key\":\"Yg==\"}]}}]}",
           200, &r, &keep);
    assert_int_equal(r.status, ETCD_OK);
    assert_false(r.succeeded);
    assert_int_equal(r.n_kvs, 2);
    assert_memory_equal(r.kvs[1].key, "b", 1);
    codec_result_free(&r, keep);

    decode("{\"result\":{\"header\":{\"revision\":\"2\"},\"ID\":\"9\",\"TTL\":\"3\"}}", 200, &r,
           &keep);
    assert_int_equal(r.lease_id, 9);
    assert_int_equal(r.ttl, 3);
    codec_result_free(&r, keep);

    decode("{\"error\":\"etcdserver: requested lease not found\",\"code\":5,\"message\":"
           "\"etcdserver: requested lease not found\"}",
           404, &r, &keep);
    assert_int_equal(r.status, ETCD_SERVER);
    assert_int_equal(r.grpc_code, 5);
    assert_string_equal(r.message, "etcdserver: requested lease not found");
    codec_result_free(&r, keep);

    decode("{\"error\":{\"grpc_code\":14,\"message\":\"unavailable\"}}", 200, &r, &keep);
    assert_int_equal(r.status, ETCD_SERVER);
    assert_int_equal(r.grpc_code, 14);
    codec_result_free(&r, keep);

    static const char *bad[] = {"", "[]", "{", "{\"kvs\":{}}", "{\"kvs\":[{\"key\":\"!!\"}]}",
                                "{\"kvs\":[1]}", "{\"count\":\"x\"}", "{\"a\":1,\"a\":2}",
                                "{\"responses\":7}", "{\"header\":{\"revision\":[]}}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        decode(bad[i], 200, &r, &keep);
        assert_int_equal(r.status, ETCD_PROTOCOL);
        assert_int_equal(r.n_kvs, 0);
        codec_result_free(&r, keep);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resp_chunked_any_split),
        cmocka_unit_test(test_resp_content_length_and_reuse),
        cmocka_unit_test(test_resp_refusals),
        cmocka_unit_test(test_resp_bounds),
        cmocka_unit_test(test_resp_owner_stops),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_ints_and_prefix),
        cmocka_unit_test(test_results),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
