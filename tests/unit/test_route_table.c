/* Routing table operations: exchanges, bindings, and route_message across
 * exchanges. Error codes and texts are the ones RabbitMQ 3.10.8 sends
 * (recorded with pika against a live broker). */
#include "test_route_util.h"

static route_exchange_spec spec_of(const char *name, const char *type)
{
    return (route_exchange_spec){.name = B(name), .type = B(type), .arguments = NO_ARGS};
}

static void expect_declare_error(fixture *f, const route_exchange_spec *spec, uint16_t code,
                                 const char *text)
{
    amqp_error err;
    route_exchange *ex = NULL;

    assert_int_equal(route_exchange_declare(f->t, spec, &ex, &err), AMQP_ERROR);
    assert_int_equal(err.code, code);
    assert_int_equal(err.method_id, AMQP_EXCHANGE_DECLARE);
    assert_string_equal(err.text, text);
}

static void expect_declare_ok(fixture *f, const route_exchange_spec *spec)
{
    amqp_error err;

    if (route_exchange_declare(f->t, spec, NULL, &err) != AMQP_OK)
        fail_msg("declare %.*s: %s", (int)spec->name.len, spec->name.ptr, err.text);
}

static void count_exchange(void *arg, route_exchange *ex) { ++*(int *)arg; }
static void count_binding(void *arg, const route_binding_view *b) { ++*(int *)arg; }

static int exchange_count(fixture *f)
{
    int n = 0;
    route_foreach_exchange(f->t, count_exchange, &n);
    return n;
}

static int binding_count(fixture *f)
{
    int n = 0;
    route_foreach_binding(f->t, count_binding, &n);
    return n;
}

/* ---- built-in exchanges ------------------------------------------------- */

static void test_builtin_exchanges(void **state)
{
    static const struct {
        const char *name;
        route_type type;
        bool internal;
    } builtin[] = {
        {"", ROUTE_DIRECT, false},           {"amq.direct", ROUTE_DIRECT, false},
        {"amq.fanout", ROUTE_FANOUT, false}, {"amq.topic", ROUTE_TOPIC, false},
        {"amq.headers", ROUTE_HEADERS, false}, {"amq.match", ROUTE_HEADERS, false},
        {"amq.rabbitmq.trace", ROUTE_TOPIC, true},
    };
    fixture *f = fx_new();
    size_t i;

    for (i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
        route_exchange *ex = route_exchange_find(f->t, B(builtin[i].name));
        assert_non_null(ex);
        assert_true(amqp_bytes_equal_cstr(route_exchange_name(ex), builtin[i].name));
        assert_int_equal(route_exchange_type(ex), builtin[i].type);
        assert_true(route_exchange_durable(ex));
        assert_false(route_exchange_auto_delete(ex));
        assert_int_equal(route_exchange_internal(ex), builtin[i].internal);
        assert_int_equal(route_exchange_arguments(ex).len, 0);
    }
    assert_int_equal(exchange_count(f), 7);
    assert_string_equal(route_type_name(ROUTE_HEADERS), "headers");
    fx_free(f);
}

/* ---- declare ------------------------------------------------------------ */

static void test_declare_and_redeclare(void **state)
{
    fixture *f = fx_new();
    route_exchange_spec s = spec_of("x", "direct");
    route_exchange *a = NULL, *b = NULL;
    amqp_error err;

    assert_int_equal(route_exchange_declare(f->t, &s, &a, &err), AMQP_OK);
    assert_int_equal(route_exchange_declare(f->t, &s, &b, &err), AMQP_OK);
    assert_ptr_equal(a, b);
    assert_ptr_equal(route_exchange_find(f->t, B("x")), a);
    s.arguments = B(""); /* other arguments are not compared (RMQ) */
    expect_declare_ok(f, &s);

    s = spec_of("x", "fanout");
    expect_declare_error(f, &s, AMQP_PRECONDITION_FAILED,
                         "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'x' in vhost "
                         "'/': received 'fanout' but current is 'direct'");
    s = spec_of("x", "direct");
    s.durable = true;
    expect_declare_error(f, &s, AMQP_PRECONDITION_FAILED,
                         "PRECONDITION_FAILED - inequivalent arg 'durable' for exchange 'x' in "
                         "vhost '/': received 'true' but current is 'false'");
    s = spec_of("x", "direct");
    s.auto_delete = true;
    expect_declare_error(f, &s, AMQP_PRECONDITION_FAILED,
                         "PRECONDITION_FAILED - inequivalent arg 'auto_delete' for exchange 'x' in "
                         "vhost '/': received 'true' but current is 'false'");
    s = spec_of("x", "direct");
    s.internal = true;
    expect_declare_error(f, &s, AMQP_PRECONDITION_FAILED,
                         "PRECONDITION_FAILED - inequivalent arg 'internal' for exchange 'x' in "
                         "vhost '/': received 'true' but current is 'false'");
    fx_free(f);
}

static void test_declare_refusals(void **state)
{
    fixture *f = fx_new();
    route_exchange_spec s = spec_of("x", "foo");
    route_exchange *ex = NULL;
    amqp_error err;

    /* The type is checked first, even for "" (RMQ); a connection error. */
    expect_declare_error(f, &s, AMQP_COMMAND_INVALID,
                         "COMMAND_INVALID - unknown exchange type 'foo'");
    assert_true(amqp_reply_is_hard(AMQP_COMMAND_INVALID));
    s = spec_of("", "foo");
    expect_declare_error(f, &s, AMQP_COMMAND_INVALID,
                         "COMMAND_INVALID - unknown exchange type 'foo'");
    s = spec_of("x", "");
    expect_declare_error(f, &s, AMQP_COMMAND_INVALID, "COMMAND_INVALID - unknown exchange type ''");
    s = spec_of("", "direct");
    expect_declare_error(f, &s, AMQP_ACCESS_REFUSED,
                         "ACCESS_REFUSED - operation not permitted on the default exchange");
    s.passive = true;
    expect_declare_error(f, &s, AMQP_ACCESS_REFUSED,
                         "ACCESS_REFUSED - operation not permitted on the default exchange");
    s = spec_of("amq.foo", "direct");
    expect_declare_error(f, &s, AMQP_ACCESS_REFUSED,
                         "ACCESS_REFUSED - exchange name 'amq.foo' contains reserved prefix "
                         "'amq.*'");
    s.passive = true;
    expect_declare_error(f, &s, AMQP_NOT_FOUND, "NOT_FOUND - no exchange 'amq.foo' in vhost '/'");
    s = spec_of("missing", "direct");
    s.passive = true;
    expect_declare_error(f, &s, AMQP_NOT_FOUND, "NOT_FOUND - no exchange 'missing' in vhost '/'");
    /* amq.* exchanges may be redeclared when equivalent (RMQ). */
    s = spec_of("amq.direct", "direct");
    s.durable = true;
    expect_declare_ok(f, &s);
    s.durable = false;
    expect_declare_error(f, &s, AMQP_PRECONDITION_FAILED,
                         "PRECONDITION_FAILED - inequivalent arg 'durable' for exchange "
                         "'amq.direct' in vhost '/': received 'false' but current is 'true'");
    /* A passive declare ignores the type, even an unknown one (RMQ). */
    s = spec_of("amq.direct", "foo");
    s.passive = true;
    assert_int_equal(route_exchange_declare(f->t, &s, &ex, &err), AMQP_OK);
    assert_ptr_equal(ex, route_exchange_find(f->t, B("amq.direct")));
    assert_int_equal(exchange_count(f), 7);
    fx_free(f);
}

static void expect_ae_redeclare(fixture *f, const char *name, const char *args, const char *text)
{
    route_exchange_spec s = spec_of(name, "direct");
    tbuf a;

    s.arguments = table(&a, args);
    if (text == NULL)
        expect_declare_ok(f, &s);
    else
        expect_declare_error(f, &s, AMQP_PRECONDITION_FAILED, text);
}

#define INEQ_AE(x) "PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange '" x \
                   "' in vhost '/': "

/* The alternate-exchange argument is the one argument compared, with
 * RabbitMQ's wording for each shape of value (all RMQ). */
static void test_alternate_exchange_equivalence(void **state)
{
    fixture *f = fx_new();
    route_exchange_spec s = spec_of("y", "direct");
    amqp_error err;
    tbuf a;

    s.arguments = table(&a, "alternate-exchange=Sae1");
    expect_declare_ok(f, &s);
    expect_ae_redeclare(f, "y", "alternate-exchange=Sae1 other=I1", NULL);
    expect_ae_redeclare(f, "y", "alternate-exchange=xae1", NULL);
    expect_ae_redeclare(f, "y", "alternate-exchange=Sae1 alternate-exchange=Szz", NULL);
    expect_ae_redeclare(f, "y", "", INEQ_AE("y") "received none but current is the value 'ae1' of type 'longstr'");
    expect_ae_redeclare(f, "y", "alternate-exchange=Sae2", INEQ_AE("y") "received 'ae2' but current is 'ae1'");
    expect_ae_redeclare(f, "y", "alternate-exchange=Szz alternate-exchange=Sae1", INEQ_AE("y") "received 'zz' but current is 'ae1'");
    expect_ae_redeclare(f, "y", "alternate-exchange=I5", INEQ_AE("y") "received '5' but current is 'ae1'");
    expect_ae_redeclare(f, "y", "alternate-exchange=V", INEQ_AE("y") "received none but current is 'ae1'");
    expect_ae_redeclare(f, "y", "alternate-exchange=d1.5", INEQ_AE("y") "received '1.5' but current is 'ae1'");
    expect_ae_redeclare(f, "y", "alternate-exchange=d1e10", INEQ_AE("y") "received '1.0e10' but current is 'ae1'");
    expect_ae_redeclare(f, "y", "alternate-exchange=d0.1", INEQ_AE("y") "received '0.1' but current is 'ae1'");
    expect_ae_redeclare(f, "y", "alternate-exchange=t1", INEQ_AE("y") "received 'true' but current is 'ae1'");
    expect_ae_redeclare(f, "y", "alternate-exchange=T5", INEQ_AE("y") "received '5' but current is 'ae1'");
    expect_ae_redeclare(f, "y", "alternate-exchange=i7", INEQ_AE("y") "received '7' but current is 'ae1'");
    expect_ae_redeclare(f, "y", "alternate-exchange=F[a=I1]", INEQ_AE("y") "received '[{<<\"a\">>,signedint,1}]' but current is 'ae1'");
    expect_ae_redeclare(f, "y", "alternate-exchange=A[I1 Sz]", INEQ_AE("y") "received '[{signedint,1},{longstr,<<\"z\">>}]' but current is 'ae1'");
    /* A decimal crashes RabbitMQ's formatter: a bare 541. */
    s.arguments = table(&a, "alternate-exchange=D2,150");
    assert_int_equal(route_exchange_declare(f->t, &s, NULL, &err), AMQP_ERROR);
    assert_int_equal(err.code, AMQP_INTERNAL_ERROR);
    assert_string_equal(err.text, "INTERNAL_ERROR");

    s = spec_of("n", "direct");
    expect_declare_ok(f, &s);
    expect_ae_redeclare(f, "n", "alternate-exchange=Sae1", INEQ_AE("n") "received the value 'ae1' of type 'longstr' but current is none");
    expect_ae_redeclare(f, "n", "alternate-exchange=V", INEQ_AE("n") "received the value 'undefined' of type 'void' but current is none");
    expect_ae_redeclare(f, "n", "alternate-exchange=d1.5", INEQ_AE("n") "received the value '1.5' of type 'double' but current is none");
    expect_ae_redeclare(f, "n", "alternate-exchange=t1", INEQ_AE("n") "received the value 'true' of type 'bool' but current is none");

    /* A new exchange's alternate-exchange must be a longstr. */
    expect_ae_redeclare(f, "z", "alternate-exchange=I5", "PRECONDITION_FAILED - invalid type 'signedint' for arg 'alternate-exchange' in exchange 'z' in vhost '/'");
    expect_ae_redeclare(f, "z", "alternate-exchange=xae", "PRECONDITION_FAILED - invalid type 'binary' for arg 'alternate-exchange' in exchange 'z' in vhost '/'");
    expect_ae_redeclare(f, "z", "alternate-exchange=V", "PRECONDITION_FAILED - invalid type 'void' for arg 'alternate-exchange' in exchange 'z' in vhost '/'");
    assert_null(route_exchange_find(f->t, B("z")));
    fx_free(f);
}

static void test_exchange_views(void **state)
{
    fixture *f = fx_new();
    route_exchange_spec s = spec_of("v", "topic");
    route_exchange *ex = NULL;
    amqp_error err;
    tbuf a;

    s.durable = s.auto_delete = s.internal = true;
    s.arguments = table(&a, "alternate-exchange=Sae other=I1");
    assert_int_equal(route_exchange_declare(f->t, &s, &ex, &err), AMQP_OK);
    a.n = 0; /* the exchange keeps its own copy */
    assert_true(amqp_bytes_equal_cstr(route_exchange_name(ex), "v"));
    assert_int_equal(route_exchange_type(ex), ROUTE_TOPIC);
    assert_true(route_exchange_durable(ex) && route_exchange_auto_delete(ex) &&
                route_exchange_internal(ex));
    assert_int_equal(route_exchange_arguments(ex).len, s.arguments.len);
    assert_ptr_equal(route_exchange_lookup(f->t, B("v"), AMQP_QUEUE_BIND, &err), ex);
    assert_null(route_exchange_lookup(f->t, B("nope"), AMQP_QUEUE_BIND, &err));
    assert_int_equal(err.code, AMQP_NOT_FOUND);
    assert_int_equal(err.method_id, AMQP_QUEUE_BIND);
    assert_string_equal(err.text, "NOT_FOUND - no exchange 'nope' in vhost '/'");
    fx_free(f);
}

/* ---- delete ------------------------------------------------------------- */

static void expect_delete(fixture *f, const char *name, bool if_unused, uint16_t code,
                          const char *text)
{
    amqp_error err;
    int rc = route_exchange_delete(f->t, B(name), if_unused, &err);

    if (text == NULL) {
        assert_int_equal(rc, AMQP_OK);
        return;
    }
    assert_int_equal(rc, AMQP_ERROR);
    assert_int_equal(err.code, code);
    assert_int_equal(err.method_id, AMQP_EXCHANGE_DELETE);
    assert_string_equal(err.text, text);
}

static void test_delete(void **state)
{
    fixture *f = fx_new();

    expect_delete(f, "", false, AMQP_ACCESS_REFUSED,
                  "ACCESS_REFUSED - operation not permitted on the default exchange");
    expect_delete(f, "amq.direct", false, AMQP_ACCESS_REFUSED,
                  "ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '/' not "
                  "allowed");
    expect_delete(f, "amq.nosuch", false, AMQP_ACCESS_REFUSED,
                  "ACCESS_REFUSED - deletion of system exchange 'amq.nosuch' in vhost '/' not "
                  "allowed");
    expect_delete(f, "missing", false, 0, NULL);
    expect_delete(f, "missing", true, 0, NULL);

    fx_declare(f, "iu", "direct", false, NO_ARGS);
    fx_bind(f, "iu", QD(f, 1), "k", NO_ARGS);
    expect_delete(f, "iu", true, AMQP_PRECONDITION_FAILED,
                  "PRECONDITION_FAILED - exchange 'iu' in vhost '/' in use");
    expect_delete(f, "iu", false, 0, NULL);
    assert_null(route_exchange_find(f->t, B("iu")));
    assert_int_equal(f->deleted, 1);
    assert_string_equal(f->deleted_names[0], "iu");
    assert_int_equal(binding_count(f), 0);

    /* Only bindings as source count for if_unused (RMQ). */
    route_exchange *dst = fx_declare(f, "dst", "direct", false, NO_ARGS);
    fx_bind(f, "amq.direct", XD(dst), "zz", NO_ARGS);
    expect_delete(f, "dst", true, 0, NULL);
    assert_int_equal(route_exchange_binding_count(route_exchange_find(f->t, B("amq.direct"))), 0);
    fx_free(f);
}

/* Deleting an exchange removes the bindings from and to it. */
static void test_delete_removes_both_ends(void **state)
{
    fixture *f = fx_new();
    route_exchange *mid = fx_declare(f, "mid", "fanout", false, NO_ARGS);
    route_exchange *top = route_exchange_find(f->t, B("amq.fanout"));

    fx_bind(f, "amq.fanout", XD(mid), "", NO_ARGS);
    fx_bind(f, "mid", QD(f, 1), "", NO_ARGS);
    fx_bind(f, "mid", QD(f, 2), "", NO_ARGS);
    fx_bind(f, "amq.fanout", QD(f, 3), "", NO_ARGS);
    assert_string_equal(fx_route_str(f, top, "", NO_ARGS), "1,2,3");
    assert_int_equal(binding_count(f), 4);
    expect_delete(f, "mid", false, 0, NULL);
    assert_int_equal(binding_count(f), 1);
    assert_string_equal(fx_route_str(f, top, "", NO_ARGS), "3");
    fx_free(f);
}

/* ---- bind / unbind ------------------------------------------------------ */

static void expect_bind_error(fixture *f, bool unbind, const char *src, route_dest d,
                              uint16_t code, const char *text)
{
    amqp_error err;
    int rc = unbind ? route_unbind(f->t, B(src), d, B("k"), NO_ARGS, AMQP_QUEUE_UNBIND, &err)
                    : route_bind(f->t, B(src), d, B("k"), NO_ARGS, AMQP_EXCHANGE_BIND, &err);

    assert_int_equal(rc, AMQP_ERROR);
    assert_int_equal(err.code, code);
    assert_int_equal(err.method_id, unbind ? AMQP_QUEUE_UNBIND : AMQP_EXCHANGE_BIND);
    assert_string_equal(err.text, text);
}

static void test_bind_refusals(void **state)
{
    fixture *f = fx_new();
    route_exchange *def = route_exchange_find(f->t, B(""));
    route_exchange *direct = route_exchange_find(f->t, B("amq.direct"));

    expect_bind_error(f, false, "", QD(f, 1), AMQP_ACCESS_REFUSED,
                      "ACCESS_REFUSED - operation not permitted on the default exchange");
    expect_bind_error(f, true, "", QD(f, 1), AMQP_ACCESS_REFUSED,
                      "ACCESS_REFUSED - operation not permitted on the default exchange");
    expect_bind_error(f, false, "amq.direct", XD(def), AMQP_ACCESS_REFUSED,
                      "ACCESS_REFUSED - operation not permitted on the default exchange");
    /* The destination is checked before the source exists (RMQ). */
    expect_bind_error(f, false, "nosuch", XD(def), AMQP_ACCESS_REFUSED,
                      "ACCESS_REFUSED - operation not permitted on the default exchange");
    expect_bind_error(f, true, "amq.direct", XD(def), AMQP_ACCESS_REFUSED,
                      "ACCESS_REFUSED - operation not permitted on the default exchange");
    expect_bind_error(f, false, "nosuch", QD(f, 1), AMQP_NOT_FOUND,
                      "NOT_FOUND - no exchange 'nosuch' in vhost '/'");
    expect_bind_error(f, false, "nosuch", XD(direct), AMQP_NOT_FOUND,
                      "NOT_FOUND - no exchange 'nosuch' in vhost '/'");
    /* Unbinding from a missing exchange, or what was never bound, is ok. */
    assert_int_equal(route_unbind(f->t, B("nosuch"), QD(f, 1), B("k"), NO_ARGS,
                                  AMQP_QUEUE_UNBIND, NULL),
                     AMQP_OK);
    assert_int_equal(route_unbind(f->t, B("amq.direct"), QD(f, 1), B("k"), NO_ARGS,
                                  AMQP_QUEUE_UNBIND, NULL),
                     AMQP_OK);
    assert_int_equal(binding_count(f), 0);
    fx_free(f);
}

typedef struct listing {
    int n;
    bool sorted_args_seen;
} listing;

static void check_listed(void *arg, const route_binding_view *b)
{
    listing *l = arg;
    tbuf sorted;

    l->n++;
    if (amqp_bytes_equal(b->args, table(&sorted, "a=I1 b=I2 c=V")))
        l->sorted_args_seen = true;
}

static void test_bind_idempotent(void **state)
{
    fixture *f = fx_new();
    route_exchange *ex = fx_declare(f, "d", "direct", false, NO_ARGS);
    tbuf a;
    listing l = {0, false};

    fx_bind(f, "d", QD(f, 1), "k", NO_ARGS);
    fx_bind(f, "d", QD(f, 1), "k", NO_ARGS);
    assert_int_equal(route_exchange_binding_count(ex), 1);
    /* The same arguments in another order are the same binding (RMQ). */
    fx_bind(f, "d", QD(f, 1), "k", table(&a, "b=I2 c=V a=I1"));
    fx_bind(f, "d", QD(f, 1), "k", table(&a, "a=I1 c=V b=I2"));
    assert_int_equal(route_exchange_binding_count(ex), 2);
    route_foreach_binding(f->t, check_listed, &l);
    assert_int_equal(l.n, 2);
    assert_true(l.sorted_args_seen); /* listed sorted, as RabbitMQ stores them */
    /* Types are part of the arguments' identity; other key, other queue. */
    fx_bind(f, "d", QD(f, 1), "k", table(&a, "a=l1 b=I2 c=V"));
    fx_bind(f, "d", QD(f, 1), "k2", NO_ARGS);
    fx_bind(f, "d", QD(f, 2), "k", NO_ARGS);
    assert_int_equal(route_exchange_binding_count(ex), 5);
    /* A message still reaches queue 1 once. */
    assert_string_equal(fx_route_str(f, ex, "k", NO_ARGS), "1,2");
    /* Unbind with reordered arguments removes that binding. */
    assert_int_equal(route_unbind(f->t, B("d"), QD(f, 1), B("k"), table(&a, "c=V b=I2 a=I1"),
                                  AMQP_QUEUE_UNBIND, NULL),
                     AMQP_OK);
    assert_int_equal(route_exchange_binding_count(ex), 4);
    assert_int_equal(route_unbind(f->t, B("d"), QD(f, 1), B("k"), NO_ARGS, AMQP_QUEUE_UNBIND, NULL),
                     AMQP_OK);
    assert_int_equal(route_unbind(f->t, B("d"), QD(f, 2), B("k"), NO_ARGS, AMQP_QUEUE_UNBIND, NULL),
                     AMQP_OK);
    assert_string_equal(fx_route_str(f, ex, "k", NO_ARGS), "1"); /* via a=l1... */
    assert_int_equal(route_exchange_binding_count(ex), 2);
    fx_free(f);
}

/* ---- routing ------------------------------------------------------------ */

static void test_direct_and_default(void **state)
{
    fixture *f = fx_new();
    route_exchange *d = route_exchange_find(f->t, B("amq.direct"));
    route_exchange *def = route_exchange_find(f->t, B(""));

    fx_bind(f, "amq.direct", QD(f, 1), "a", NO_ARGS);
    fx_bind(f, "amq.direct", QD(f, 2), "a", NO_ARGS);
    fx_bind(f, "amq.direct", QD(f, 3), "b", NO_ARGS);
    fx_bind(f, "amq.direct", QD(f, 4), "", NO_ARGS);
    assert_string_equal(fx_route_str(f, d, "a", NO_ARGS), "1,2");
    assert_string_equal(fx_route_str(f, d, "b", NO_ARGS), "3");
    assert_string_equal(fx_route_str(f, d, "", NO_ARGS), "4");
    assert_string_equal(fx_route_str(f, d, "c", NO_ARGS), "");
    assert_string_equal(fx_route_str(f, def, "q7", NO_ARGS), "7");
    assert_string_equal(fx_route_str(f, def, "q1", NO_ARGS), "1");
    assert_string_equal(fx_route_str(f, def, "nope", NO_ARGS), "");
    assert_string_equal(fx_route_str(f, def, "", NO_ARGS), "");
    fx_free(f);
}

/* A queue reached through several bindings and exchanges goes once;
 * exchange cycles end. */
static void test_exchange_cycle_and_dedup(void **state)
{
    fixture *f = fx_new();
    route_exchange *a = fx_declare(f, "A", "fanout", false, NO_ARGS);
    route_exchange *b = fx_declare(f, "B", "fanout", false, NO_ARGS);
    route_exchange *c = fx_declare(f, "C", "topic", false, NO_ARGS);

    fx_bind(f, "A", XD(b), "", NO_ARGS);
    fx_bind(f, "B", XD(a), "", NO_ARGS);
    fx_bind(f, "B", XD(c), "", NO_ARGS);
    fx_bind(f, "C", XD(a), "#", NO_ARGS);
    fx_bind(f, "A", XD(a), "", NO_ARGS); /* self-binding */
    fx_bind(f, "A", QD(f, 1), "", NO_ARGS);
    fx_bind(f, "B", QD(f, 1), "", NO_ARGS);
    fx_bind(f, "B", QD(f, 1), "other", NO_ARGS);
    fx_bind(f, "C", QD(f, 1), "x.#", NO_ARGS);
    fx_bind(f, "C", QD(f, 2), "x.*", NO_ARGS);
    fx_bind(f, "C", QD(f, 3), "y", NO_ARGS);
    assert_string_equal(fx_route_str(f, a, "x.y", NO_ARGS), "1,2");
    assert_string_equal(fx_route_str(f, b, "y", NO_ARGS), "1,3");
    assert_string_equal(fx_route_str(f, c, "z", NO_ARGS), "1");
    fx_free(f);
}

static route_exchange *declare_with_ae(fixture *f, const char *name, const char *type,
                                       const char *ae)
{
    tbuf a;
    char spec[300];

    snprintf(spec, sizeof spec, "alternate-exchange=S%s", ae);
    return fx_declare(f, name, type, false, table(&a, spec));
}

static void test_alternate_exchange(void **state)
{
    fixture *f = fx_new();
    route_exchange *x = declare_with_ae(f, "X", "direct", "AE");
    route_exchange *ae = fx_declare(f, "AE", "fanout", false, NO_ARGS);
    route_exchange *y = fx_declare(f, "Y", "direct", false, NO_ARGS);

    fx_bind(f, "AE", QD(f, 9), "", NO_ARGS);
    fx_bind(f, "X", QD(f, 1), "k", NO_ARGS);
    assert_string_equal(fx_route_str(f, x, "k", NO_ARGS), "1");
    assert_string_equal(fx_route_str(f, x, "other", NO_ARGS), "9");
    /* A matched binding to an exchange counts, even if it leads nowhere. */
    fx_bind(f, "X", XD(y), "toy", NO_ARGS);
    assert_string_equal(fx_route_str(f, x, "toy", NO_ARGS), "");
    /* An exchange reached through a binding applies its own AE. */
    route_exchange *y2 = declare_with_ae(f, "Y2", "direct", "AE");
    fx_bind(f, "X", XD(y2), "toy2", NO_ARGS);
    assert_string_equal(fx_route_str(f, x, "toy2", NO_ARGS), "9");
    /* A self-binding that matched also counts (RMQ). */
    route_exchange *s = declare_with_ae(f, "S", "direct", "AE");
    fx_bind(f, "S", XD(s), "k", NO_ARGS);
    assert_string_equal(fx_route_str(f, s, "k", NO_ARGS), "");
    assert_string_equal(fx_route_str(f, s, "j", NO_ARGS), "9");
    /* The AE is found by name at routing time: deleted, then recreated. */
    expect_delete(f, "AE", false, 0, NULL);
    assert_string_equal(fx_route_str(f, x, "other", NO_ARGS), "");
    ae = fx_declare(f, "AE", "direct", false, NO_ARGS);
    fx_bind(f, "AE", QD(f, 8), "other", NO_ARGS);
    assert_string_equal(fx_route_str(f, x, "other", NO_ARGS), "8");
    assert_non_null(ae);
    fx_free(f);
}

/* A policy's name and alternate exchange: the name kept for every
 * exchange, the alternate used without an argument, overridden by one,
 * found by name at routing time, never on the default exchange. */
static void test_policy_alternate_exchange(void **state)
{
    fixture *f = fx_new();
    route_exchange *x = fx_declare(f, "X", "direct", false, NO_ARGS);
    route_exchange *own = declare_with_ae(f, "OWN", "direct", "AE2");
    route_exchange *dflt = route_exchange_find(f->t, AMQP_CSTR(""));
    amqp_bytes name;

    fx_declare(f, "AE", "fanout", false, NO_ARGS);
    fx_bind(f, "AE", QD(f, 9), "", NO_ARGS);
    assert_false(route_exchange_alternate(x, &name));
    assert_null(route_exchange_policy(x));
    assert_string_equal(fx_route_str(f, x, "k", NO_ARGS), "");
    assert_true(route_exchange_set_policy(x, "p1", AMQP_CSTR("AE")));
    assert_string_equal(route_exchange_policy(x), "p1");
    assert_true(route_exchange_alternate(x, &name) && amqp_bytes_equal_cstr(name, "AE"));
    assert_string_equal(fx_route_str(f, x, "k", NO_ARGS), "9");
    /* the same again changes nothing; another name alone is kept */
    assert_true(route_exchange_set_policy(x, "p1", AMQP_CSTR("AE")));
    assert_true(route_exchange_set_policy(x, "p2", AMQP_CSTR("AE")));
    assert_string_equal(route_exchange_policy(x), "p2");
    assert_true(route_exchange_set_policy(own, "p1", AMQP_CSTR("AE")));
    assert_true(route_exchange_alternate(own, &name) && amqp_bytes_equal_cstr(name, "AE2"));
    assert_string_equal(fx_route_str(f, own, "k", NO_ARGS), "");
    assert_true(route_exchange_set_policy(dflt, "p1", AMQP_CSTR("AE")));
    assert_false(route_exchange_alternate(dflt, &name));
    assert_string_equal(route_exchange_policy(dflt), "p1");
    /* cleared: nothing again; the argument is untouched */
    assert_true(route_exchange_set_policy(x, NULL, (amqp_bytes){0}));
    assert_false(route_exchange_alternate(x, &name));
    assert_null(route_exchange_policy(x));
    assert_string_equal(fx_route_str(f, x, "k", NO_ARGS), "");
    assert_int_equal(route_exchange_arguments(x).len, 0);
    fx_free(f);
}

static void test_alternate_chains_and_loops(void **state)
{
    fixture *f = fx_new();
    route_exchange *c1 = declare_with_ae(f, "C1", "direct", "C2");
    route_exchange *l1 = declare_with_ae(f, "L1", "direct", "L2");
    route_exchange *m = declare_with_ae(f, "M", "direct", "missing");
    route_exchange *self = declare_with_ae(f, "SELF", "topic", "SELF");
    route_exchange *d = declare_with_ae(f, "D", "direct", "");

    declare_with_ae(f, "C2", "direct", "C3");
    fx_declare(f, "C3", "fanout", false, NO_ARGS);
    fx_bind(f, "C3", QD(f, 3), "", NO_ARGS);
    assert_string_equal(fx_route_str(f, c1, "x", NO_ARGS), "3");
    declare_with_ae(f, "L2", "direct", "L1");
    assert_string_equal(fx_route_str(f, l1, "x", NO_ARGS), "");
    fx_bind(f, "L2", QD(f, 2), "x", NO_ARGS);
    assert_string_equal(fx_route_str(f, l1, "x", NO_ARGS), "2");
    assert_string_equal(fx_route_str(f, m, "x", NO_ARGS), "");
    assert_string_equal(fx_route_str(f, self, "x", NO_ARGS), "");
    /* An AE of "" is the default exchange: the queue named by the key
     * (RMQ), counted once even if also reached through a binding. */
    assert_string_equal(fx_route_str(f, d, "q5", NO_ARGS), "5");
    route_exchange *fan = route_exchange_find(f->t, B("amq.fanout"));
    fx_bind(f, "amq.fanout", XD(d), "", NO_ARGS);
    fx_bind(f, "amq.fanout", QD(f, 5), "", NO_ARGS);
    fx_bind(f, "amq.fanout", QD(f, 6), "", NO_ARGS);
    assert_string_equal(fx_route_str(f, fan, "q5", NO_ARGS), "5,6");
    assert_string_equal(fx_route_str(f, fan, "q7", NO_ARGS), "5,6,7");
    fx_free(f);
}

/* ---- auto-delete and queue removal -------------------------------------- */

static bool exists(fixture *f, const char *name)
{
    return route_exchange_find(f->t, B(name)) != NULL;
}

static void test_auto_delete(void **state)
{
    fixture *f = fx_new();
    route_exchange *dst;

    fx_declare(f, "ad", "direct", true, NO_ARGS);
    assert_true(exists(f, "ad")); /* not at creation */
    fx_bind(f, "ad", QD(f, 1), "a", NO_ARGS);
    fx_bind(f, "ad", QD(f, 1), "b", NO_ARGS);
    assert_int_equal(route_unbind(f->t, B("ad"), QD(f, 1), B("a"), NO_ARGS, AMQP_QUEUE_UNBIND,
                                  NULL),
                     AMQP_OK);
    assert_true(exists(f, "ad"));
    /* Unbinding what is not bound deletes nothing. */
    assert_int_equal(route_unbind(f->t, B("ad"), QD(f, 2), B("b"), NO_ARGS, AMQP_QUEUE_UNBIND,
                                  NULL),
                     AMQP_OK);
    assert_true(exists(f, "ad"));
    assert_int_equal(route_unbind(f->t, B("ad"), QD(f, 1), B("b"), NO_ARGS, AMQP_QUEUE_UNBIND,
                                  NULL),
                     AMQP_OK);
    assert_false(exists(f, "ad"));
    assert_int_equal(f->deleted, 1);
    assert_string_equal(f->deleted_names[0], "ad");

    /* Being only a destination does not keep or delete it (RMQ). */
    dst = fx_declare(f, "ad2", "direct", true, NO_ARGS);
    fx_bind(f, "amq.direct", XD(dst), "k", NO_ARGS);
    assert_int_equal(route_unbind(f->t, B("amq.direct"), XD(dst), B("k"), NO_ARGS,
                                  AMQP_EXCHANGE_UNBIND, NULL),
                     AMQP_OK);
    assert_true(exists(f, "ad2"));

    /* Deleting the destination of an auto-delete source deletes it (RMQ). */
    route_exchange *d = fx_declare(f, "D", "fanout", false, NO_ARGS);
    fx_declare(f, "S", "fanout", true, NO_ARGS);
    fx_bind(f, "S", XD(d), "", NO_ARGS);
    expect_delete(f, "D", false, 0, NULL);
    assert_false(exists(f, "S"));
    assert_int_equal(f->deleted, 3);
    fx_free(f);
}

/* Queue removal cascades through auto-delete exchanges: Y -> X -> q. */
static void test_unbind_queue_cascade(void **state)
{
    fixture *f = fx_new();
    route_exchange *x = fx_declare(f, "X", "fanout", true, NO_ARGS);
    route_exchange *top = route_exchange_find(f->t, B("amq.topic"));

    fx_declare(f, "Y", "fanout", true, NO_ARGS);
    fx_bind(f, "X", QD(f, 1), "", NO_ARGS);
    fx_bind(f, "X", QD(f, 1), "again", NO_ARGS);
    fx_bind(f, "Y", XD(x), "", NO_ARGS);
    fx_bind(f, "amq.topic", QD(f, 1), "#", NO_ARGS);
    fx_bind(f, "amq.topic", QD(f, 2), "#", NO_ARGS);
    assert_string_equal(fx_route_str(f, top, "a", NO_ARGS), "1,2");
    route_unbind_queue(f->t, Q(f, 1));
    assert_false(exists(f, "X"));
    assert_false(exists(f, "Y"));
    assert_int_equal(f->deleted, 2);
    assert_string_equal(fx_route_str(f, top, "a", NO_ARGS), "2");
    assert_int_equal(binding_count(f), 1);
    route_unbind_queue(f->t, Q(f, 1)); /* nothing left: a no-op */
    route_unbind_queue(f->t, Q(f, 2));
    assert_int_equal(binding_count(f), 0);
    assert_int_equal(exchange_count(f), 7);
    fx_free(f);
}

/* Many queues on one fanout: the result array grows with the targets,
 * and survives many routing calls. */
static void test_wide_fanout(void **state)
{
    fixture *f = fx_new();
    route_exchange *fan = route_exchange_find(f->t, B("amq.fanout"));
    void **qs;
    int i, round;

    for (i = 0; i < MAX_QUEUES; i++)
        fx_bind(f, "amq.fanout", QD(f, i), "", NO_ARGS);
    for (round = 0; round < 3; round++)
        assert_int_equal(route_message(f->t, fan, B(""), NO_ARGS, &qs), MAX_QUEUES);
    for (i = 0; i < MAX_QUEUES; i += 2)
        route_unbind_queue(f->t, Q(f, i));
    assert_int_equal(route_message(f->t, fan, B(""), NO_ARGS, &qs), MAX_QUEUES / 2);
    fx_free(f);
}

/* route_table_free does not report exchanges as deleted. */
static void test_free_without_hooks(void **state)
{
    fixture *f = fx_new();
    route_exchange *d = fx_declare(f, "d", "direct", true, NO_ARGS);

    fx_bind(f, "d", QD(f, 1), "k", NO_ARGS);
    fx_bind(f, "amq.direct", XD(d), "k", NO_ARGS);
    route_table_free(f->t);
    f->t = NULL;
    assert_int_equal(f->deleted, 0);
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_exchanges),
        cmocka_unit_test(test_declare_and_redeclare),
        cmocka_unit_test(test_declare_refusals),
        cmocka_unit_test(test_alternate_exchange_equivalence),
        cmocka_unit_test(test_exchange_views),
        cmocka_unit_test(test_delete),
        cmocka_unit_test(test_delete_removes_both_ends),
        cmocka_unit_test(test_bind_refusals),
        cmocka_unit_test(test_bind_idempotent),
        cmocka_unit_test(test_direct_and_default),
        cmocka_unit_test(test_exchange_cycle_and_dedup),
        cmocka_unit_test(test_alternate_exchange),
        cmocka_unit_test(test_policy_alternate_exchange),
        cmocka_unit_test(test_alternate_chains_and_loops),
        cmocka_unit_test(test_auto_delete),
        cmocka_unit_test(test_unbind_queue_cascade),
        cmocka_unit_test(test_wide_fanout),
        cmocka_unit_test(test_free_without_hooks),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
