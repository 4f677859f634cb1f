/* Headers exchange: matching and validation, RabbitMQ 3.10 semantics.
 *
 * Tables are written in the notation of test_route_util.h's table().
 *
 * Every case marked RMQ was run against RabbitMQ 3.10.8 (pika with a raw
 * field encoder: bind with the arguments, publish with the headers, see
 * whether the queue got the message); the rest follow from its
 * headers_match/5 and are marked derived.
 */
#include "test_route_util.h"

/* ---- matching cases ----------------------------------------------------- */

static const struct {
    const char *what, *binding, *headers;
    bool match;
} cases[] = {
    /* values compare as Erlang ==: numbers across integer and float types */
    {"RMQ I1 vs l1", "x-match=Sall k=I1", "k=l1", true},
    {"RMQ I1 vs d1.0", "k=I1", "k=d1.0", true},
    {"RMQ I1 vs f1.0", "k=I1", "k=f1.0", true},
    {"RMQ I1 vs T1", "k=I1", "k=T1", true},
    {"RMQ T5 vs l5", "k=T5", "k=l5", true},
    {"RMQ b-1 vs l-1", "k=b-1", "k=l-1", true},
    {"RMQ B255 vs b-1", "k=B255", "k=b-1", false},
    {"RMQ i4294967295 vs l", "k=i4294967295", "k=l4294967295", true},
    {"RMQ I-1 vs i4294967295", "k=I-1", "k=i4294967295", false},
    {"RMQ u7 vs s7", "k=u7", "k=s7", true},
    {"RMQ f1.5 vs d1.5", "k=f1.5", "k=d1.5", true},
    {"RMQ d0.0 vs d-0.0", "k=d0.0", "k=d-0.0", true},
    {"RMQ l2^53+1 vs d2^53 (exact)", "k=l9007199254740993", "k=d9007199254740992.0", false},
    {"derived l2^53 vs d2^53", "k=l9007199254740992", "k=d9007199254740992.0", true},
    {"derived I1 vs d1.5", "k=I1", "k=d1.5", false},
    /* strings, booleans, decimals */
    {"RMQ I1 vs S'1'", "k=I1", "k=S1", false},
    {"RMQ S abc vs x abc", "k=Sabc", "k=xabc", true},
    {"derived S abc vs S abd", "k=Sabc", "k=Sabd", false},
    {"RMQ t1 vs I1", "k=t1", "k=I1", false},
    {"RMQ t1 vs t2 (both true)", "k=t1", "k=t2", true},
    {"RMQ t0 vs t0", "k=t0", "k=t0", true},
    {"derived t0 vs t1", "k=t0", "k=t1", false},
    {"RMQ D2,150 vs D2,150", "k=D2,150", "k=D2,150", true},
    {"RMQ D2,150 vs D1,15", "k=D2,150", "k=D1,15", false},
    {"RMQ D0,1 vs I1", "k=D0,1", "k=I1", false},
    /* void: presence only */
    {"RMQ V vs I5", "k=V", "k=I5", true},
    {"RMQ V vs missing", "k=V", "j=I5", false},
    {"RMQ I1 vs V", "k=I1", "k=V", false},
    {"RMQ V vs V", "k=V", "k=V", true},
    /* nested tables and arrays: element types must match too */
    {"RMQ F[] vs A[]", "k=F[]", "k=A[]", true},
    {"derived F[a=I1] vs A[I1]", "k=F[a=I1]", "k=A[I1]", false},
    {"RMQ F[a=I1] vs F[a=l1]", "k=F[a=I1]", "k=F[a=l1]", false},
    {"RMQ F[a=I1] vs F[a=I1]", "k=F[a=I1]", "k=F[a=I1]", true},
    {"RMQ F[a b] vs F[b a] (not sorted)", "k=F[a=I1 b=I2]", "k=F[b=I2 a=I1]", false},
    {"RMQ A[I1] vs A[l1]", "k=A[I1]", "k=A[l1]", false},
    {"RMQ A[I1] vs A[I1]", "k=A[I1]", "k=A[I1]", true},
    {"RMQ F[a=t1] vs F[a=t2]", "k=F[a=t1]", "k=F[a=t2]", true},
    /* all / any */
    {"RMQ any a1 b2 vs b2", "x-match=Sany a=I1 b=I2", "b=I2", true},
    {"RMQ all a1 b2 vs b2", "x-match=Sall a=I1 b=I2", "b=I2", false},
    {"derived all a1 b2 vs a1 b2 c3", "a=I1 b=I2", "c=I3 b=I2 a=I1", true},
    {"derived any a1 b2 vs a9 b9", "x-match=Sany a=I1 b=I2", "a=I9 b=I9", false},
    {"derived default is all", "a=I1 b=I2", "a=I1", false},
    {"RMQ all, no keys, empty headers", "", "", true},
    {"derived all, no keys, any headers", "x-match=Sall", "a=I1", true},
    {"RMQ any, no keys", "x-match=Sany", "a=I1", false},
    /* x- keys: ignored unless the -with-x variants */
    {"RMQ all x-foo vs empty", "x-match=Sall x-foo=I1", "", true},
    {"RMQ all-with-x x-foo vs empty", "x-match=Sall-with-x x-foo=I1", "", false},
    {"RMQ all-with-x x-foo vs x-foo", "x-match=Sall-with-x x-foo=I1", "x-foo=I1", true},
    {"RMQ any x-foo vs x-foo", "x-match=Sany x-foo=I1", "x-foo=I1", false},
    {"RMQ any-with-x x-foo vs x-foo", "x-match=Sany-with-x x-foo=I1", "x-foo=I1", true},
    {"RMQ any-with-x never matches x-match", "x-match=Sany-with-x", "x-match=Sany-with-x", false},
    {"RMQ x-match in headers ignored", "x-match=Sall a=I1", "x-match=Sany a=I1", true},
    {"derived any-with-x, x- key differs", "x-match=Sany-with-x x-foo=I1", "x-foo=I2", false},
    /* ordering: Erlang binary order, shorter prefix first */
    {"RMQ order a vs ab", "ab=I1 a=I1", "a=I1 ab=I1", true},
    /* repeated keys: the merge walk, with stable sorts */
    {"RMQ dup headers k1 k2, bind k2 all", "k=I2", "k=I1 k=I2", false},
    {"RMQ dup headers k1 k2, bind k1 all", "k=I1", "k=I1 k=I2", true},
    {"RMQ dup headers k1 k2, bind k2 any", "x-match=Sany k=I2", "k=I1 k=I2", false},
    {"RMQ dup headers k2 k1, bind k2 all", "k=I2", "k=I2 k=I1", true},
    {"RMQ dup binding k1 k1, headers k1", "k=I1 k=I1", "k=I1", false},
    {"RMQ dup binding k1 k1, headers k1 k1", "k=I1 k=I1", "k=I1 k=I1", true},
    {"RMQ dup binding k2 k1 any, headers k1", "x-match=Sany k=I2 k=I1", "k=I1", false},
};

static void test_matching_cases(void **state)
{
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fixture *f = fx_new();
        route_exchange *ex = fx_declare(f, "h", "headers", false, NO_ARGS);
        tbuf args, headers;
        int out[4];

        fx_bind(f, "h", QD(f, 1), "", table(&args, cases[i].binding));
        if ((fx_route(f, ex, "", table(&headers, cases[i].headers), out) == 1) != cases[i].match)
            fail_msg("%s: binding {%s} headers {%s} should %smatch", cases[i].what,
                     cases[i].binding, cases[i].headers, cases[i].match ? "" : "not ");
        fx_free(f);
    }
}

/* An absent headers property routes like an empty table (RMQ). */
static void test_absent_headers(void **state)
{
    fixture *f = fx_new();
    route_exchange *ex = fx_declare(f, "h", "headers", false, NO_ARGS);
    tbuf args;

    fx_bind(f, "h", QD(f, 1), "", NO_ARGS);
    fx_bind(f, "h", QD(f, 2), "", table(&args, "x-match=Sany a=V"));
    assert_string_equal(fx_route_str(f, ex, "", (amqp_bytes){NULL, 0}), "1");
    fx_free(f);
}

/* Many bindings on one exchange, several to the same queue; the routing
 * key plays no part. */
static void test_many_bindings_dedup(void **state)
{
    fixture *f = fx_new();
    route_exchange *ex = fx_declare(f, "h", "headers", false, NO_ARGS);
    tbuf args, headers;
    char spec[64];
    int i;

    for (i = 0; i < 100; i++) {
        snprintf(spec, sizeof spec, "x-match=Sany n=I%d m=I%d", i, i % 10);
        fx_bind(f, "h", QD(f, i % 20), "ignored", table(&args, spec));
    }
    /* n=5 matches binding 5; m=5 matches 5,15,...,95 -> queues 5 and 15. */
    assert_string_equal(fx_route_str(f, ex, "key", table(&headers, "n=I5 m=I5")), "5,15");
    assert_string_equal(fx_route_str(f, ex, "", table(&headers, "m=l7 zz=V")), "7,17");
    assert_string_equal(fx_route_str(f, ex, "", table(&headers, "q=I1")), "");
    fx_free(f);
}

/* A headers exchange that matches nothing uses its alternate exchange. */
static void test_unmatched_goes_to_alternate(void **state)
{
    fixture *f = fx_new();
    tbuf args, headers, xargs;
    route_exchange *ex;

    ex = fx_declare(f, "h", "headers", false, table(&xargs, "alternate-exchange=Samq.fanout"));
    fx_bind(f, "h", QD(f, 1), "", table(&args, "a=I1"));
    fx_bind(f, "amq.fanout", QD(f, 2), "", NO_ARGS);
    assert_string_equal(fx_route_str(f, ex, "", table(&headers, "a=I1")), "1");
    assert_string_equal(fx_route_str(f, ex, "", table(&headers, "a=I2")), "2");
    fx_free(f);
}

/* ---- validation --------------------------------------------------------- */

static void expect_bind_error(fixture *f, const char *exchange, const char *spec,
                              const char *text)
{
    tbuf args;
    amqp_error err;

    assert_int_equal(route_bind(f->t, B(exchange), QD(f, 1), B(""), table(&args, spec),
                                AMQP_QUEUE_BIND, &err),
                     AMQP_ERROR);
    assert_int_equal(err.code, AMQP_PRECONDITION_FAILED);
    assert_int_equal(err.method_id, AMQP_QUEUE_BIND);
    assert_string_equal(err.text, text);
}

/* Texts as RabbitMQ 3.10.8 sends them. */
static void test_invalid_x_match(void **state)
{
    fixture *f = fx_new();
    tbuf args;

    expect_bind_error(f, "amq.headers", "x-match=Sfoo",
                      "PRECONDITION_FAILED - Invalid x-match field value <<\"foo\">>; expected "
                      "all, any, all-with-x, or any-with-x");
    expect_bind_error(f, "amq.headers", "x-match=I5",
                      "PRECONDITION_FAILED - Invalid x-match field type signedint (value 5); "
                      "expected longstr");
    expect_bind_error(f, "amq.match", "x-match=xall",
                      "PRECONDITION_FAILED - Invalid x-match field type binary (value "
                      "<<\"all\">>); expected longstr");
    expect_bind_error(f, "amq.headers", "x-match=S",
                      "PRECONDITION_FAILED - Invalid x-match field value <<>>; expected all, "
                      "any, all-with-x, or any-with-x");
    assert_int_equal(route_exchange_binding_count(route_exchange_find(f->t, B("amq.headers"))), 0);
    /* Every valid kind binds; other types do not look at x-match; unbind
     * does not validate (RMQ). */
    fx_bind(f, "amq.headers", QD(f, 1), "", table(&args, "x-match=Sall"));
    fx_bind(f, "amq.headers", QD(f, 1), "", table(&args, "x-match=Sany"));
    fx_bind(f, "amq.headers", QD(f, 1), "", table(&args, "x-match=Sall-with-x"));
    fx_bind(f, "amq.headers", QD(f, 1), "", table(&args, "x-match=Sany-with-x"));
    fx_bind(f, "amq.direct", QD(f, 1), "", table(&args, "x-match=Sfoo"));
    assert_int_equal(route_unbind(f->t, B("amq.headers"), QD(f, 1), B(""),
                                  table(&args, "x-match=Sfoo"), AMQP_QUEUE_UNBIND, NULL),
                     AMQP_OK);
    assert_int_equal(route_exchange_binding_count(route_exchange_find(f->t, B("amq.headers"))), 4);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matching_cases),
        cmocka_unit_test(test_absent_headers),
        cmocka_unit_test(test_many_bindings_dedup),
        cmocka_unit_test(test_unmatched_goes_to_alternate),
        cmocka_unit_test(test_invalid_x_match),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
