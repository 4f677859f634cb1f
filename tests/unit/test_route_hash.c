/* x-consistent-hash and x-modulus-hash: Erlang's phash2 and the plugin's
 * jump hash against values ERTS 13 (OTP 25) printed, routing against the
 * assignments RabbitMQ 3.10.8 with rabbitmq_consistent_hash_exchange made
 * for the same keys and weights, declare and bind errors in its words, and
 * the ring's upkeep over random binds and unbinds against a plain model. */
#include "test_route_util.h"

#include "../../routing/route_int.h"

/* Queue names for x-modulus-hash's order; queues from q1000 up are quorum. */
static amqp_bytes fx_queue_name(void *ctx, const void *q) { return B((const char *)q); }
static const char *fx_queue_type(void *ctx, const void *q)
{
    return atoi((const char *)q + 1) >= 1000 ? "rabbit_quorum_queue" : NULL;
}

/* A "message" here is its raw properties. */
static amqp_bytes fx_message_properties(void *ctx, const void *msg)
{
    return *(const amqp_bytes *)msg;
}

static fixture *hfx_new(void)
{
    static const route_hooks hooks = {.queue_lookup = fx_lookup, .queue_name = fx_queue_name,
                                      .queue_type = fx_queue_type,
                                      .message_properties = fx_message_properties};
    fixture *f = fx_new();

    route_table_free(f->t);
    f->t = route_table_new("/", &hooks, f);
    assert_non_null(f->t);
    return f;
}

/* The index of the one queue a message reaches, -1 for none. */
static int route_one(fixture *f, route_exchange *ex, const char *key, amqp_bytes headers,
                     amqp_bytes props)
{
    void **qs;
    size_t n = route_message_with(f->t, ex, B(key), headers, &props, false, &qs);

    assert_true(n <= 1);
    return n ? (int)(((char(*)[16])qs[0]) - f->qnames) : -1;
}

static int bind_err(fixture *f, const char *x, route_dest d, const char *key, char *text)
{
    amqp_error err = {0};
    int rc = route_bind(f->t, B(x), d, B(key), NO_ARGS, AMQP_QUEUE_BIND, &err);

    strcpy(text, rc == AMQP_OK ? "ok" : err.text);
    return rc == AMQP_OK ? 0 : err.code;
}

static int declare_err(fixture *f, const char *name, const char *type, amqp_bytes args,
                       char *text)
{
    route_exchange_spec spec = {.name = B(name), .type = B(type), .arguments = args};
    amqp_error err = {0};
    int rc = route_exchange_declare(f->t, &spec, NULL, &err);

    strcpy(text, rc == AMQP_OK ? "ok" : err.text);
    return rc == AMQP_OK ? 0 : err.code;
}

/* ---- Erlang's hashes ---------------------------------------------------- */

static void test_phash2(void **state)
{
    static const struct {
        const char *s;
        uint32_t bin, list;
    } bins[] = {
        {"", 13708901, 38220213},
        {"a", 112802447, 53691870},
        {"abc", 98228475, 63525141},
        {"hello world!", 25699699, 124688779},
        {"0123456789abcdef0123456789", 41478414, 6427458},
    };
    static const struct {
        const char *field;
        uint32_t hash;
    } fields[] = {
        {"v=Sv", 83007481},          {"v=I-5", 39932925},      {"v=I5", 40839585},
        {"v=l1099511627776", 93748608}, {"v=l-1099511627776", 32506873},
        {"v=l-134217728", 13500176}, {"v=l134217728", 117666136},
        {"v=l-9223372036854775808", 112631110},
        {"v=T18446744073709551615", 132064098},
        {"v=t1", 32030443},          {"v=V", 27077197},        {"v=d1.5", 115320697},
        {"v=d-0.0", 28702447},       {"v=f1.0", 11069748},     {"v=D2,256", 69689801},
        {"v=F[a=I1 b=Sz]", 668469},  {"v=A[]", 86211673},      {"v=A[V]", 21606330},
        {"v=F[]", 80606520},
    };
    uint8_t raw[3] = {255, 0, 128};
    tbuf t;
    amqp_field f;

    for (size_t i = 0; i < sizeof bins / sizeof bins[0]; i++) {
        assert_int_equal(route_phash2_binary(B(bins[i].s)), bins[i].bin);
        assert_int_equal(route_phash2_routing_keys(B(bins[i].s), NO_ARGS), bins[i].list);
    }
    assert_int_equal(route_phash2_binary((amqp_bytes){raw, 3}), 70739353);
    assert_int_equal(route_phash2_atom("undefined"), 45914356);
    /* [<<"k1">>, <<"a">>, <<"b">>, <<"c">>] and [<<"k1">>, <<"c">>]: CC, then
     * BCC, their longstrs only */
    assert_int_equal(route_phash2_routing_keys(B("k1"), table(&t, "CC=A[Sa Sb] BCC=A[Sc]")),
                     120149480);
    assert_int_equal(route_phash2_routing_keys(B("k1"), table(&t, "x=I1 BCC=A[Sc I5] CC=Sz")),
                     85539467);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        assert_true(amqp_table_get(table(&t, fields[i].field), "v", &f));
        if (route_phash2_field(&f) != fields[i].hash)
            fail_msg("%s: %u, want %u", fields[i].field, route_phash2_field(&f), fields[i].hash);
    }
}

static void test_jump_hash(void **state)
{
    static const struct {
        const char *key;
        uint64_t buckets, want;
    } v[] = {
        {"k1", 1, 0},          {"k1", 2, 0},          {"k1", 3, 0},        {"k1", 10, 7},
        {"k1", 100, 83},       {"k1", 1000, 913},     {"k1", 12345, 2619}, {"order-17", 2, 1},
        {"order-17", 10, 1},   {"order-17", 100, 11}, {"order-17", 1000, 799},
        {"order-17", 12345, 1165}, {"", 10, 9},       {"", 100, 45},       {"", 12345, 12053},
    };

    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        assert_int_equal(route_jump_hash(route_phash2_binary(B(v[i].key)), v[i].buckets),
                         v[i].want);
}

/* ---- x-consistent-hash -------------------------------------------------- */

/* RabbitMQ 3.10.8: keys k0..k59 over q0 (weight 1), q1 (2), q2 (3). */
static const char rabbit_k60[] = "122112122122111002012221202221121221021021101122211122012121";

static void test_chash_matches_rabbitmq(void **state)
{
    fixture *f = hfx_new();
    route_exchange *x = fx_declare(f, "x", "x-consistent-hash", false, NO_ARGS);
    char key[16];

    assert_int_equal(route_one(f, x, "k0", NO_ARGS, NO_ARGS), -1); /* no ring yet */
    fx_bind(f, "x", QD(f, 0), "1", NO_ARGS);
    fx_bind(f, "x", QD(f, 1), "2", NO_ARGS);
    fx_bind(f, "x", QD(f, 2), "3", NO_ARGS);
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(route_one(f, x, key, NO_ARGS, NO_ARGS), rabbit_k60[i] - '0');
    }
    /* q1 unbound and bound again with weight 4: q0 [0], q2 [1,3], q1 [4,7] */
    assert_int_equal(route_unbind(f->t, B("x"), QD(f, 1), B("2"), NO_ARGS, AMQP_QUEUE_UNBIND, NULL),
                     AMQP_OK);
    fx_bind(f, "x", QD(f, 1), "4", NO_ARGS);
    static const char rabbit_after[] = "111221221211222001021212201212";
    for (int i = 0; i < 30; i++) {
        snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(route_one(f, x, key, NO_ARGS, NO_ARGS), rabbit_after[i] - '0');
    }
    fx_free(f);
}

/* hash-header: values hash as {Type, Value}; RabbitMQ 3.10.8 sent these
 * to q0 (weight 2), q1, q2 (1 each); a message without the header hashes
 * `undefined` (q0), as the plugin's does. */
static void test_chash_header(void **state)
{
    static const struct {
        const char *headers;
        int want;
    } v[] = {
        {"h=Sa", 1}, {"h=Sb", 0}, {"h=I5", 0}, {"h=I-7", 2}, {"h=l1099511627776", 2},
        {"h=t1", 0}, {"h=t0", 1}, {"h=D1,15", 2}, {"h=V", 0}, {"h=A[I1 Sx]", 2},
        {"h=F[n=I1]", 0}, {"h=xbin", 2}, {"h=Szz", 2}, {"h=Sk1", 0}, {"h=I0", 2},
        {"other=Sa", 0}, {"", 0},
    };
    fixture *f = hfx_new();
    tbuf a, t;
    route_exchange *x = fx_declare(f, "x", "x-consistent-hash", false, table(&a, "hash-header=Sh"));

    fx_bind(f, "x", QD(f, 0), "2", NO_ARGS);
    fx_bind(f, "x", QD(f, 1), "1", NO_ARGS);
    fx_bind(f, "x", QD(f, 2), "1", NO_ARGS);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (route_one(f, x, "r", table(&t, v[i].headers), NO_ARGS) != v[i].want)
            fail_msg("%s: not q%d", v[i].headers, v[i].want);
    fx_free(f);
}

static amqp_bytes props(uint8_t *buf, size_t cap, const char *mid, const char *cid, uint64_t ts)
{
    amqp_basic_properties p = {0};
    size_t n;

    if (mid) {
        p.flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
        p.message_id = B(mid);
    }
    if (cid) {
        p.flags |= AMQP_BASIC_CORRELATION_ID_FLAG;
        p.correlation_id = B(cid);
    }
    if (ts) {
        p.flags |= AMQP_BASIC_TIMESTAMP_FLAG;
        p.timestamp = ts;
    }
    n = amqp_properties_encode(&p, buf, cap);
    assert_true(n > 0);
    return (amqp_bytes){buf, (uint32_t)n};
}

/* hash-property, against RabbitMQ 3.10.8's choices for the same values. */
static void test_chash_property(void **state)
{
    static const char mid20[] = "20110001010200220200"; /* id0..id19, three weight-1 queues */
    static const char ts20[] = "11001111210211222012";  /* 1700000000 + i */
    static const char cid12[] = "000000000000";         /* c-0..c-11 over weights 3, 1 */
    fixture *f = hfx_new();
    tbuf a;
    uint8_t buf[256];
    char v[32];
    route_exchange *m = fx_declare(f, "m", "x-consistent-hash", false,
                                   table(&a, "hash-property=Smessage_id"));
    route_exchange *ts = fx_declare(f, "ts", "x-consistent-hash", false,
                                    table(&a, "hash-property=Stimestamp"));
    route_exchange *c = fx_declare(f, "c", "x-consistent-hash", false,
                                   table(&a, "hash-property=Scorrelation_id"));

    for (int i = 0; i < 3; i++) {
        fx_bind(f, "m", QD(f, i), "1", NO_ARGS);
        fx_bind(f, "ts", QD(f, i), "1", NO_ARGS);
    }
    fx_bind(f, "c", QD(f, 0), "3", NO_ARGS);
    fx_bind(f, "c", QD(f, 1), "1", NO_ARGS);
    for (int i = 0; i < 20; i++) {
        snprintf(v, sizeof v, "id%d", i);
        assert_int_equal(route_one(f, m, "r", NO_ARGS, props(buf, sizeof buf, v, NULL, 0)),
                         mid20[i] - '0');
        assert_int_equal(route_one(f, ts, "r", NO_ARGS, props(buf, sizeof buf, NULL, NULL,
                                                              1700000000 + i)),
                         ts20[i] - '0');
    }
    for (int i = 0; i < 12; i++) {
        snprintf(v, sizeof v, "c-%d", i);
        assert_int_equal(route_one(f, c, "r", NO_ARGS, props(buf, sizeof buf, NULL, v, 0)),
                         cid12[i] - '0');
    }
    /* no message_id: `undefined` (q1 on RabbitMQ too), not the routing key */
    assert_int_equal(route_one(f, m, "id0", NO_ARGS, NO_ARGS), 1);
    assert_int_equal(route_one(f, m, "id0", NO_ARGS, props(buf, sizeof buf, NULL, "x", 0)), 1);
    fx_free(f);
}

static void test_chash_errors(void **state)
{
    static const struct {
        const char *args;
        int code;
        const char *text;
    } decl[] = {
        {"hash-header=I5", 541, "INTERNAL_ERROR"},
        {"hash-property=I5", 541, "INTERNAL_ERROR"},
        {"hash-header=xbin", 541, "INTERNAL_ERROR"},
        {"hash-header=Sa hash-property=Smessage_id", 406,
         "PRECONDITION_FAILED - hash-header and hash-property are mutually exclusive"},
        {"hash-header=I1 hash-property=Smessage_id", 541, "INTERNAL_ERROR"},
        {"hash-property=Sapp_id", 406, "PRECONDITION_FAILED - Unsupported property: app_id"},
        {"hash-property=SMessage_id", 406,
         "PRECONDITION_FAILED - Unsupported property: Message_id"},
        {"hash-property=Stimestamp", 0, "ok"},
        {"hash-header=S", 0, "ok"},
    };
    static const struct {
        const char *key;
        const char *text;
    } keys[] = {
        {"abc", "PRECONDITION_FAILED - The binding key must be an integer: <<\"abc\">>"},
        {"", "PRECONDITION_FAILED - The binding key must be an integer: <<>>"},
        {" 5", "PRECONDITION_FAILED - The binding key must be an integer: <<\" 5\">>"},
        {"1.0", "PRECONDITION_FAILED - The binding key must be an integer: <<\"1.0\">>"},
        {"+", "PRECONDITION_FAILED - The binding key must be an integer: <<\"+\">>"},
        {"0", "PRECONDITION_FAILED - The binding key must be greater than 0"},
        {"-1", "PRECONDITION_FAILED - The binding key must be greater than 0"},
        {"1000001", "PRECONDITION_FAILED - The binding key must not exceed 1000000"},
        {"99999999999999999999999", "PRECONDITION_FAILED - The binding key must not exceed 1000000"},
        {"+5", "ok"},
        {"007", "ok"},
        {"1000000", "ok"},
    };
    fixture *f = hfx_new();
    char text[256], name[16];
    tbuf a;

    for (size_t i = 0; i < sizeof decl / sizeof decl[0]; i++) {
        snprintf(name, sizeof name, "d%zu", i);
        assert_int_equal(declare_err(f, name, "x-consistent-hash", table(&a, decl[i].args), text),
                         decl[i].code);
        assert_string_equal(text, decl[i].text);
    }
    fx_declare(f, "x", "x-consistent-hash", false, NO_ARGS);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        bind_err(f, "x", QD(f, (int)i), keys[i].key, text);
        assert_string_equal(text, keys[i].text);
    }
    /* the type atom is quoted twice by RabbitMQ's ~p */
    assert_int_equal(declare_err(f, "x", "direct", NO_ARGS, text), 406);
    assert_string_equal(text, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'x' in "
                              "vhost '/': received 'direct' but current is ''x-consistent-hash''");
    /* other arguments are not compared on redeclare */
    assert_int_equal(declare_err(f, "x", "x-consistent-hash", table(&a, "hash-header=Sh"), text),
                     0);
    fx_free(f);
}

typedef struct ring_walk {
    char buf[512];
    size_t len;
} ring_walk;

static void ring_row(void *arg, const route_ring_entry *e)
{
    ring_walk *w = arg;
    const char *name = e->dest.queue ? (const char *)e->dest.queue
                                     : (const char *)route_exchange_name(e->dest.exchange).ptr;

    w->len += (size_t)snprintf(w->buf + w->len, sizeof w->buf - w->len, "%s%.*s:%llu+%llu",
                               w->len ? " " : "", e->dest.queue ? 8 : 1, name,
                               (unsigned long long)e->first, (unsigned long long)e->weight);
}

static const char *ring_str(route_exchange *x)
{
    static ring_walk w;

    w.len = 0;
    w.buf[0] = 0;
    assert_true(route_exchange_ring(x, ring_row, &w));
    return w.buf;
}

/* The plugin's bucket map: a destination once, renumbered on unbind, and
 * a second binding to it adds nothing while unbinding it drops them all. */
static void test_chash_ring_upkeep(void **state)
{
    fixture *f = hfx_new();
    route_exchange *x = fx_declare(f, "x", "x-consistent-hash", false, NO_ARGS);
    route_exchange *d = fx_declare(f, "d", "fanout", false, NO_ARGS);

    assert_false(route_exchange_ring(d, ring_row, NULL));
    fx_bind(f, "x", QD(f, 1), "3", NO_ARGS);
    fx_bind(f, "x", XD(d), "2", NO_ARGS);
    fx_bind(f, "x", QD(f, 2), "1", NO_ARGS);
    assert_string_equal(ring_str(x), "q1:0+3 d:3+2 q2:5+1");
    fx_bind(f, "x", QD(f, 1), "7", NO_ARGS); /* q1 is in the ring: no buckets */
    assert_string_equal(ring_str(x), "q1:0+3 d:3+2 q2:5+1");
    assert_int_equal(route_exchange_binding_count(x), 4);
    route_unbind(f->t, B("x"), QD(f, 1), B("7"), NO_ARGS, AMQP_QUEUE_UNBIND, NULL);
    assert_string_equal(ring_str(x), "d:0+2 q2:2+1"); /* q1 still bound with "3" */
    fx_bind(f, "x", QD(f, 3), "4", NO_ARGS);
    assert_string_equal(ring_str(x), "d:0+2 q2:2+1 q3:3+4");
    route_unbind_queue(f->t, Q(f, 2));
    assert_string_equal(ring_str(x), "d:0+2 q3:2+4");
    route_exchange_delete(f->t, B("d"), false, NULL);
    assert_string_equal(ring_str(x), "q3:0+4");
    fx_free(f);
}

/* Random binds and unbinds (compactions and growth included) against a
 * list of (queue, weight) in bind order; every key routes as the list says. */
static void test_chash_ring_model(void **state)
{
    enum { NQ = 200 };
    fixture *f = hfx_new();
    route_exchange *x = fx_declare(f, "x", "x-consistent-hash", false, NO_ARGS);
    int order[NQ], weight[NQ], n = 0;
    bool in[NQ] = {0};
    uint64_t rng = 42;
    char key[32];

    for (int step = 0; step < 3000; step++) {
        int q = (int)(route_xorshift64s(&rng) % NQ);
        if (!in[q]) {
            weight[q] = 1 + (int)(route_xorshift64s(&rng) % 5);
            snprintf(key, sizeof key, "%d", weight[q]);
            fx_bind(f, "x", QD(f, q), key, NO_ARGS);
            order[n++] = q;
        } else {
            snprintf(key, sizeof key, "%d", weight[q]);
            route_unbind(f->t, B("x"), QD(f, q), B(key), NO_ARGS, AMQP_QUEUE_UNBIND, NULL);
            int i = 0;
            while (order[i] != q)
                i++;
            memmove(&order[i], &order[i + 1], (size_t)(n - i - 1) * sizeof order[0]);
            n--;
        }
        in[q] = !in[q];
        if (step % 50 != 0 || n == 0)
            continue;
        uint64_t total = 0;
        for (int i = 0; i < n; i++)
            total += (uint64_t)weight[order[i]];
        for (int k = 0; k < 20; k++) {
            snprintf(key, sizeof key, "m%d.%d", step, k);
            uint64_t b = route_jump_hash(route_phash2_binary(B(key)), total);
            int i = 0;
            for (; b >= (uint64_t)weight[order[i]]; i++)
                b -= (uint64_t)weight[order[i]];
            assert_int_equal(route_one(f, x, key, NO_ARGS, NO_ARGS), order[i]);
        }
    }
    fx_free(f);
}

/* A CC key routes again: one-pick types add nothing for it. */
static void test_again_adds_nothing(void **state)
{
    fixture *f = hfx_new();
    route_exchange *x = fx_declare(f, "x", "x-consistent-hash", false, NO_ARGS);
    route_exchange *m = fx_declare(f, "m", "x-modulus-hash", false, NO_ARGS);
    void **qs;

    fx_bind(f, "x", QD(f, 0), "1", NO_ARGS);
    fx_bind(f, "m", QD(f, 0), "", NO_ARGS);
    assert_int_equal(route_message_with(f->t, x, B("k"), NO_ARGS, NULL, true, &qs), 0);
    assert_int_equal(route_message_with(f->t, m, B("k"), NO_ARGS, NULL, true, &qs), 0);
    assert_int_equal(route_message(f->t, x, B("k"), NO_ARGS, &qs), 1);
    fx_free(f);
}

/* ---- x-modulus-hash ----------------------------------------------------- */

static void test_modulus(void **state)
{
    /* phash2([<<"k<i>">>], 2^27) rem 3, i = 0..39, from OTP 25 */
    static const char k40[] = "2000102220012112212220112201020101102010";
    fixture *f = hfx_new();
    route_exchange *m = fx_declare(f, "m", "x-modulus-hash", false, NO_ARGS);
    route_exchange *e = fx_declare(f, "e", "fanout", false, NO_ARGS);
    char key[16];

    assert_int_equal(route_one(f, m, "k", NO_ARGS, NO_ARGS), -1);
    /* bound out of order, with keys and arguments that play no part */
    fx_bind(f, "m", QD(f, 3), "zz", NO_ARGS);
    fx_bind(f, "m", QD(f, 1), "", NO_ARGS);
    fx_bind(f, "m", QD(f, 2), "a", NO_ARGS);
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(route_one(f, m, key, NO_ARGS, NO_ARGS), 1 + (k40[i] - '0'));
    }
    tbuf t; /* RabbitMQ 4.3 hashes the CC keys with the routing key */
    assert_int_equal(route_one(f, m, "k1", table(&t, "CC=A[Sa Sb] BCC=A[Sc]"), NO_ARGS),
                     1 + 120149480 % 3);
    /* an exchange sorts before every queue: 4 destinations, e first */
    fx_bind(f, "m", XD(e), "", NO_ARGS);
    fx_bind(f, "e", QD(f, 9), "", NO_ARGS);
    static const struct {
        const char *key;
        uint32_t hash;
    } h[] = {{"a", 53691870}, {"k1", 21317394}, {"order-17", 120610304}, {"", 38220213}};
    for (size_t i = 0; i < 4; i++) {
        int want = (int[]){9, 1, 2, 3}[h[i].hash % 4];
        assert_int_equal(route_phash2_routing_keys(B(h[i].key), NO_ARGS), h[i].hash);
        assert_int_equal(route_one(f, m, h[i].key, NO_ARGS, NO_ARGS), want);
    }
    /* a destination bound twice counts twice: q1 q1 q2 q3 after e */
    fx_bind(f, "m", QD(f, 1), "again", NO_ARGS);
    for (size_t i = 0; i < 4; i++) {
        int want = (int[]){9, 1, 1, 2, 3}[h[i].hash % 5];
        assert_int_equal(route_one(f, m, h[i].key, NO_ARGS, NO_ARGS), want);
    }
    route_unbind_queue(f->t, Q(f, 1));
    route_exchange_delete(f->t, B("e"), false, NULL);
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "k%d", i);
        int got = route_one(f, m, key, NO_ARGS, NO_ARGS);
        assert_int_equal(got, 2 + (int)(route_phash2_routing_keys(B(key), NO_ARGS) % 2));
    }
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_phash2),
        cmocka_unit_test(test_jump_hash),
        cmocka_unit_test(test_chash_matches_rabbitmq),
        cmocka_unit_test(test_chash_header),
        cmocka_unit_test(test_chash_property),
        cmocka_unit_test(test_chash_errors),
        cmocka_unit_test(test_chash_ring_upkeep),
        cmocka_unit_test(test_chash_ring_model),
        cmocka_unit_test(test_again_adds_nothing),
        cmocka_unit_test(test_modulus),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
