/* Federation's pure logic: the names RabbitMQ's plugin gives what it makes
 * upstream, x-received-from on messages (exchange and queue links, the
 * queue link's first-hop headers and visit counts), max-hops and the
 * cluster check, x-bound-from on bindings, and the upstream settings with
 * RabbitMQ's defaults and a set element's overrides.
 *
 * Tables are compared rendered: {k:v,...} with strings quoted, integers
 * with their wire tag (l7, s1), booleans t/f, arrays [...]. The expected
 * texts marked RMQ are what RabbitMQ 3.10.8 wrote (a downstream RabbitMQ
 * federating from another, its headers read with pika; its bindings
 * listed with rabbitmqctl list_bindings).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../federation/fed_int.h"

/* ---- rendering -------------------------------------------------------------------- */

static void render_field(const amqp_field *f, char *out, size_t cap);

static void render_table(amqp_bytes t, char *out, size_t cap, bool array)
{
    amqp_iter it;
    amqp_bytes k;
    amqp_field f;
    size_t n = (size_t)snprintf(out, cap, array ? "[" : "{");
    bool first = true;
    amqp_iter_init(&it, t);
    while (n < cap && (array ? amqp_array_next(&it, &f) : amqp_table_next(&it, &k, &f))) {
        char v[2048];
        render_field(&f, v, sizeof v);
        if (array)
            n += (size_t)snprintf(out + n, cap - n, "%s%s", first ? "" : ",", v);
        else
            n += (size_t)snprintf(out + n, cap - n, "%s%.*s:%s", first ? "" : ",", (int)k.len,
                                  (const char *)k.ptr, v);
        first = false;
    }
    if (n < cap)
        snprintf(out + n, cap - n, array ? "]" : "}");
}

static void render_field(const amqp_field *f, char *out, size_t cap)
{
    switch (f->type) {
    case 'S': snprintf(out, cap, "\"%.*s\"", (int)f->v.bytes.len, (const char *)f->v.bytes.ptr); break;
    case 't': snprintf(out, cap, "%s", f->v.i ? "t" : "f"); break;
    case 'F': render_table(f->v.bytes, out, cap, false); break;
    case 'A': render_table(f->v.bytes, out, cap, true); break;
    default: snprintf(out, cap, "%c%lld", f->type, (long long)f->v.i); break;
    }
}

static const char *render(amqp_bytes t)
{
    static char buf[4096];
    render_table(t, buf, sizeof buf, false);
    return buf;
}

/* A table from a few typed entries: "S" string, "l" long, "A" raw array
 * content, "F" raw table content. */
typedef struct entry {
    const char *key;
    char type;
    const char *s;
    amqp_bytes raw;
    int64_t n;
} entry;

static amqp_bytes table(uint8_t *buf, size_t cap, const entry *e, size_t n)
{
    amqp_writer w;
    amqp_writer_init(&w, buf, cap);
    for (size_t i = 0; i < n; i++) {
        amqp_put_key(&w, e[i].key);
        if (e[i].type == 'S')
            amqp_put_field(&w, &(amqp_field){.type = 'S', .v.bytes = AMQP_CSTR(e[i].s)});
        else if (e[i].type == 'A' || e[i].type == 'F')
            amqp_put_field(&w, &(amqp_field){.type = (uint8_t)e[i].type, .v.bytes = e[i].raw});
        else
            amqp_put_field(&w, &(amqp_field){.type = (uint8_t)e[i].type, .v.i = e[i].n});
    }
    assert_false(w.overflow);
    return (amqp_bytes){buf, (uint32_t)w.len};
}

/* ---- names -------------------------------------------------------------------------- */

static void test_names(void **state)
{
    char out[512];
    (void)state;
    fed_queue_name(out, sizeof out, "fx1", "/", "fd1@vm", "/", "fx1");
    assert_string_equal(out, "federation: fx1 -> fd1@vm"); /* RMQ */
    fed_queue_name(out, sizeof out, "up", "/", "w1", "/", "down");
    assert_string_equal(out, "federation: up -> w1:down");
    fed_queue_name(out, sizeof out, "x", "uv", "w1", "dv", "x");
    assert_string_equal(out, "federation: x -> w1:dv:x");
    fed_exchange_name(out, sizeof out, "federation: fx1 -> fd1@vm", 'B');
    assert_string_equal(out, "federation: fx1 -> fd1@vm B"); /* RMQ */
    fed_connection_name(out, sizeof out, "up1", "fedx");
    assert_string_equal(out, "Federation link (upstream: up1, policy: fedx)"); /* RMQ */
    char a[12], b[12], c[12];
    fed_link_id(a, sizeof a, "/", "queue", "q", "up", "q");
    fed_link_id(b, sizeof b, "/", "queue", "q", "up", "q");
    fed_link_id(c, sizeof c, "/", "queue", "qu", "p", "q");
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    assert_int_equal(strlen(a), 8);
}

/* ---- max-hops and the cluster check ---------------------------------------------------- */

/* x-received-from with `n` hops, hop i from cluster "c<i>" in vhost "/". */
static amqp_bytes received_from(uint8_t *buf, size_t cap, int n)
{
    uint8_t arr[1024];
    amqp_writer w;
    amqp_writer_init(&w, arr, sizeof arr);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        size_t mark = amqp_put_field_begin(&w, 'F');
        amqp_put_field_str(&w, "cluster-name", AMQP_CSTR(name));
        amqp_put_field_str(&w, "vhost", AMQP_CSTR("/"));
        amqp_table_end(&w, mark);
    }
    entry e[] = {{"h", 'l', NULL, {0}, 1}, {"x-received-from", 'A', NULL, {arr, (uint32_t)w.len}, 0}};
    return table(buf, cap, e, 2);
}

static void test_should_forward(void **state)
{
    uint8_t buf[2048];
    (void)state;
    assert_true(fed_should_forward((amqp_bytes){0}, 1, "me", "/"));
    entry odd[] = {{"x-received-from", 'S', "not an array", {0}, 0}};
    assert_true(fed_should_forward(table(buf, sizeof buf, odd, 1), 1, "me", "/"));
    assert_true(fed_should_forward(received_from(buf, sizeof buf, 0), 1, "me", "/"));
    assert_false(fed_should_forward(received_from(buf, sizeof buf, 1), 1, "me", "/"));
    assert_true(fed_should_forward(received_from(buf, sizeof buf, 1), 2, "me", "/"));
    assert_false(fed_should_forward(received_from(buf, sizeof buf, 2), 2, "me", "/"));
    /* it came through this cluster and vhost: a loop, whatever the hops */
    assert_false(fed_should_forward(received_from(buf, sizeof buf, 2), 9, "c1", "/"));
    assert_true(fed_should_forward(received_from(buf, sizeof buf, 2), 9, "c1", "other"));
}

/* ---- x-received-from ------------------------------------------------------------------ */

static const char *hop_headers(amqp_bytes in, const fed_hop *hop, const char *x, const char *key)
{
    static uint8_t out[4096];
    amqp_writer w;
    amqp_writer_init(&w, out, sizeof out);
    fed_hop_headers(&w, in, hop, AMQP_CSTR(x), AMQP_CSTR(key));
    assert_false(w.overflow);
    return render((amqp_bytes){out, (uint32_t)w.len});
}

static void test_exchange_hop(void **state)
{
    uint8_t buf[2048];
    (void)state;
    fed_hop hop = {.uri = "amqp://127.0.0.1:5773", .object = "fx1", .redelivered = false,
                   .cluster = "fd2@vm", .vhost = "/"};
    entry h[] = {{"h", 'l', NULL, {0}, 1}};
    /* RMQ: {'h': 1, 'x-received-from': [{'uri': ..., 'exchange': 'fx1', 'redelivered': False,
     * 'cluster-name': 'fd2@vm', 'vhost': '/'}]} */
    assert_string_equal(hop_headers(table(buf, sizeof buf, h, 1), &hop, "fx1", "a.b"),
                        "{h:l1,x-received-from:[{uri:\"amqp://127.0.0.1:5773\",exchange:\"fx1\","
                        "redelivered:f,cluster-name:\"fd2@vm\",vhost:\"/\"}]}");
    /* no cluster name known: left out, as RabbitMQ leaves it out */
    hop.cluster = NULL;
    hop.redelivered = true;
    assert_string_equal(hop_headers((amqp_bytes){0}, &hop, "fx1", "a.b"),
                        "{x-received-from:[{uri:\"amqp://127.0.0.1:5773\",exchange:\"fx1\","
                        "redelivered:t,vhost:\"/\"}]}");
    /* a second hop goes first, the header keeps its place */
    assert_string_equal(hop_headers(received_from(buf, sizeof buf, 1), &hop, "fx1", "a.b"),
                        "{h:l1,x-received-from:[{uri:\"amqp://127.0.0.1:5773\",exchange:\"fx1\","
                        "redelivered:t,vhost:\"/\"},{cluster-name:\"c0\",vhost:\"/\"}]}");
}

static void test_queue_hop(void **state)
{
    uint8_t buf[2048], arr[64], once[2048];
    (void)state;
    fed_hop hop = {.uri = "amqp://127.0.0.1:5773", .object = "fq1", .queue = true};
    amqp_writer w;
    amqp_writer_init(&w, arr, sizeof arr);
    amqp_put_field(&w, &(amqp_field){.type = 'S', .v.bytes = AMQP_CSTR("zz")});
    entry cc[] = {{"CC", 'A', NULL, {arr, (uint32_t)w.len}, 0}};
    /* RMQ: {'x-original-cc': ['zz'], 'x-original-exchange': '', 'x-original-routing-key': 'fq1',
     * 'x-received-from': [{'uri': ..., 'queue': 'fq1', 'redelivered': False, 'visit-count': 1}]} */
    const char *first = hop_headers(table(buf, sizeof buf, cc, 1), &hop, "", "fq1");
    assert_string_equal(first, "{x-original-cc:[\"zz\"],x-original-exchange:\"\","
                               "x-original-routing-key:\"fq1\",x-received-from:[{uri:\"amqp://"
                               "127.0.0.1:5773\",queue:\"fq1\",redelivered:f,visit-count:l1}]}");
    /* back through the same link: its entry is replaced, visits counted on */
    amqp_writer_init(&w, once, sizeof once);
    fed_hop_headers(&w, table(buf, sizeof buf, cc, 1), &hop, AMQP_CSTR(""), AMQP_CSTR("fq1"));
    hop.redelivered = true;
    assert_string_equal(hop_headers((amqp_bytes){once, (uint32_t)w.len}, &hop, "other", "k"),
                        "{x-original-cc:[\"zz\"],x-original-exchange:\"\","
                        "x-original-routing-key:\"fq1\",x-received-from:[{uri:\"amqp://"
                        "127.0.0.1:5773\",queue:\"fq1\",redelivered:t,visit-count:l2}]}");
}

/* ---- x-bound-from ---------------------------------------------------------------------- */

static const char *bound(amqp_bytes args, const fed_bind_from *b)
{
    static uint8_t out[2048];
    amqp_writer w;
    amqp_writer_init(&w, out, sizeof out);
    if (!fed_binding_args(&w, args, b))
        return "ignore";
    assert_false(w.overflow);
    return render((amqp_bytes){out, (uint32_t)w.len});
}

static void test_bound_from(void **state)
{
    uint8_t buf[2048], arr[512], first[2048];
    (void)state;
    fed_bind_from b = {.max_hops = 1, .upstream_vhost = "/", .cluster = "fd1@vm", .vhost = "/",
                       .exchange = "fx1", .suffix = 'B'};
    /* RMQ: [{"x-bound-from",[[{"cluster-name","fd1@vm"},{"vhost","/"},{"exchange","/:fx1 B"},
     * {"hops",1}]]}] */
    assert_string_equal(bound((amqp_bytes){0}, &b),
                        "{x-bound-from:[{cluster-name:\"fd1@vm\",vhost:\"/\","
                        "exchange:\"/:fx1 B\",hops:s1}]}");
    /* a binding a further downstream made here: one hop fewer */
    amqp_writer w;
    amqp_writer_init(&w, first, sizeof first);
    b.max_hops = 3;
    fed_binding_args(&w, (amqp_bytes){0}, &b);
    amqp_field f;
    assert_true(amqp_table_get((amqp_bytes){first, (uint32_t)w.len}, "x-bound-from", &f));
    memcpy(arr, f.v.bytes.ptr, f.v.bytes.len);
    entry e[] = {{"x-match", 'S', "any", {0}, 0},
                 {"x-bound-from", 'A', NULL, {arr, f.v.bytes.len}, 0}};
    fed_bind_from b2 = {.max_hops = 5, .upstream_vhost = "/", .cluster = "w2", .vhost = "v",
                        .exchange = "x", .suffix = 'A'};
    assert_string_equal(bound(table(buf, sizeof buf, e, 2), &b2),
                        "{x-match:\"any\",x-bound-from:[{cluster-name:\"w2\",vhost:\"v\","
                        "exchange:\"v:x A\",hops:s2},{cluster-name:\"fd1@vm\",vhost:\"/\","
                        "exchange:\"/:fx1 B\",hops:s3}]}");
    /* it came from the upstream itself: not sent back */
    b2.upstream_cluster = "fd1@vm";
    assert_string_equal(bound(table(buf, sizeof buf, e, 2), &b2), "ignore");
    /* no hops left: the binding came with one */
    b.max_hops = 1;
    amqp_writer_init(&w, first, sizeof first);
    fed_binding_args(&w, (amqp_bytes){0}, &b);
    b2.upstream_cluster = NULL;
    assert_string_equal(bound((amqp_bytes){first, (uint32_t)w.len}, &b2), "ignore");
}

/* ---- upstreams ------------------------------------------------------------------------------ */

static void test_upstream(void **state)
{
    fed_upstream u;
    (void)state;
    assert_true(fed_upstream_read("up1", "{\"uri\":\"amqp://h\"}", NULL, "obj", &u));
    assert_int_equal(u.nuris, 1);
    assert_string_equal(u.uris[0], "amqp://h");
    assert_string_equal(u.exchange, "obj");
    assert_string_equal(u.queue, "obj");
    assert_string_equal(u.consumer_tag, "federation-link-up1");
    assert_int_equal(u.prefetch_count, 1000);
    assert_int_equal(u.reconnect_delay_ms, 5000);
    assert_int_equal(u.max_hops, 1);
    assert_int_equal(u.expires, -1);
    assert_int_equal(u.message_ttl, -1);
    assert_false(u.trust_user_id);
    assert_int_equal(u.ack_mode, FED_ON_CONFIRM);
    fed_upstream_clear(&u);

    assert_true(fed_upstream_read(
        "u", "{\"uri\":[\"amqp://a\",\"amqp://b\"],\"prefetch-count\":10,\"reconnect-delay\":1.5,"
             "\"max-hops\":2,\"expires\":3600000,\"message-ttl\":0,\"trust-user-id\":true,"
             "\"ack-mode\":\"on-publish\",\"queue\":\"q\",\"exchange\":\"x\"}",
        "{\"upstream\":\"u\",\"ack-mode\":\"no-ack\",\"queue\":\"setq\"}", "obj", &u));
    assert_int_equal(u.nuris, 2);
    assert_string_equal(u.uris[1], "amqp://b");
    assert_int_equal(u.prefetch_count, 10);
    assert_int_equal(u.reconnect_delay_ms, 1500);
    assert_int_equal(u.max_hops, 2);
    assert_int_equal(u.expires, 3600000);
    assert_int_equal(u.message_ttl, 0);
    assert_true(u.trust_user_id);
    assert_int_equal(u.ack_mode, FED_NO_ACK); /* the set element's */
    assert_string_equal(u.queue, "setq");
    assert_string_equal(u.exchange, "x");
    fed_upstream_clear(&u);

    static const char *const bad[] = {
        "[]", "{}", "{\"uri\":5}", "{\"uri\":\"amqp://h\",\"ack-mode\":\"later\"}",
        "{\"uri\":\"amqp://h\",\"prefetch-count\":\"10\"}", "{\"uri\":\"amqp://h\",\"max-hops\":0}",
        "{\"uri\":\"amqp://h\",\"trust-user-id\":\"yes\"}", "not json"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (fed_upstream_read("u", bad[i], NULL, "obj", &u))
            fail_msg("read: %s", bad[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),         cmocka_unit_test(test_should_forward),
        cmocka_unit_test(test_exchange_hop),  cmocka_unit_test(test_queue_hop),
        cmocka_unit_test(test_bound_from),    cmocka_unit_test(test_upstream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
