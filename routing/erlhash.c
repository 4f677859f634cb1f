/* erlhash: Erlang's portable term hash and the consistent-hash plugin's
 * jump hash, so that Warren's hash exchanges pick the queue RabbitMQ
 * picks for the same key.
 *
 * erlang:phash2/1 is ERTS's make_hash2 masked to 27 bits. make_hash2
 * walks a term in pre-order and folds each node into one 32-bit state
 * with Bob Jenkins' mix; the terms hashed here are binaries, atoms,
 * integers, floats, tuples and proper lists of non-byte elements, for
 * which the walk is: a tuple mixes in its arity, then its elements in
 * order; a list is its elements in order, then [] (whose own step, like
 * an atom's, differs when the state is still 0). A field value hashes as
 * RabbitMQ 3.10's rabbit_binary_parser decodes it: {Type, Value}, a table
 * {table, [{Name, Type, Value}]} and an array {array, [{Type, Value}]}.
 *
 * The jump hash (rabbit_exchange_type_consistent_hash:jump_consistent_hash)
 * seeds OTP's exs1024 generator (xorshift1024*, the state filled by
 * xorshift64* from the key) with {K, K, K} and draws uniform floats V/2^64
 * until the next jump passes the number of buckets. Both are pure
 * functions of their input; unit tests pin them to values ERTS 13 / OTP 25
 * printed.
 */
#include <string.h>

#include "route_int.h"

#define HCONST 0x9e3779b9u
#define HCONST_2 0x3c6ef372u
#define HCONST_3 0xdaa66d2bu
#define HCONST_9 0x8ff34781u
#define HCONST_10 0x2e2ac13au
#define HCONST_11 0xcc623af3u
#define HCONST_12 0x6a99b4acu
#define HCONST_13 0x08d12e65u
#define NIL_DEF 0x2u
#define NIL_FIRST 3468870702u /* [] as the first node */

#define MIX(a, b, c)                                                                              \
    do {                                                                                          \
        a -= b; a -= c; a ^= (c >> 13);                                                           \
        b -= c; b -= a; b ^= (a << 8);                                                            \
        c -= a; c -= b; c ^= (b >> 13);                                                           \
        a -= b; a -= c; a ^= (c >> 12);                                                           \
        b -= c; b -= a; b ^= (a << 16);                                                           \
        c -= a; c -= b; c ^= (b >> 5);                                                            \
        a -= b; a -= c; a ^= (c >> 3);                                                            \
        b -= c; b -= a; b ^= (a << 10);                                                           \
        c -= a; c -= b; c ^= (b >> 15);                                                           \
    } while (0)

static void mix2(uint32_t *h, uint32_t x, uint32_t y, uint32_t k)
{
    uint32_t a = k + x, b = k + y;

    MIX(a, b, *h);
}

static uint32_t le32(const uint8_t *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ERTS's block_hash: Jenkins' lookup2 over the bytes, seeded with c. */
static uint32_t block_hash(const uint8_t *k, uint32_t len, uint32_t c)
{
    uint32_t a = HCONST, b = HCONST, n = len;

    for (; n >= 12; k += 12, n -= 12) {
        a += le32(k);
        b += le32(k + 4);
        c += le32(k + 8);
        MIX(a, b, c);
    }
    c += len;
    switch (n) { /* every case falls through */
    case 11: c += (uint32_t)k[10] << 24; /* fallthrough */
    case 10: c += (uint32_t)k[9] << 16; /* fallthrough */
    case 9: c += (uint32_t)k[8] << 8; /* fallthrough */
    case 8: b += (uint32_t)k[7] << 24; /* fallthrough */
    case 7: b += (uint32_t)k[6] << 16; /* fallthrough */
    case 6: b += (uint32_t)k[5] << 8; /* fallthrough */
    case 5: b += k[4]; /* fallthrough */
    case 4: a += (uint32_t)k[3] << 24; /* fallthrough */
    case 3: a += (uint32_t)k[2] << 16; /* fallthrough */
    case 2: a += (uint32_t)k[1] << 8; /* fallthrough */
    case 1: a += k[0];
    }
    MIX(a, b, c);
    return c;
}

/* ---- one node of the walk ----------------------------------------------- */

static void h_binary(uint32_t *h, amqp_bytes b)
{
    uint32_t con = HCONST_13 + *h;

    *h = b.len == 0 ? con : block_hash(b.ptr, b.len, con);
}

/* The atom table's hash of a (latin-1) atom name: hashpjw. */
static uint32_t atom_value(const char *name)
{
    uint32_t h = 0, g;

    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h = (h << 4) + *p;
        if ((g = h & 0xf0000000u) != 0) {
            h ^= g >> 24;
            h ^= g;
        }
    }
    return h;
}

static void h_atom(uint32_t *h, const char *name)
{
    uint32_t v = atom_value(name);

    if (*h == 0)
        *h = v;
    else
        mix2(h, v, 0, HCONST_3);
}

static void h_nil(uint32_t *h)
{
    if (*h == 0)
        *h = NIL_FIRST;
    else
        mix2(h, NIL_DEF, 0, HCONST_2);
}

static void h_tuple(uint32_t *h, uint32_t arity) { mix2(h, arity, 0, HCONST_9); }

/* Integers up to 64 bits, small or big: the same words either way. */
static void h_int(uint32_t *h, bool negative, uint64_t magnitude)
{
    if (magnitude < (1u << 27) || (negative && magnitude == (1u << 27))) {
        if (negative) /* mixed twice, as ERTS does */
            mix2(h, (uint32_t)magnitude, 0, HCONST);
        mix2(h, negative ? (uint32_t)-(int32_t)magnitude : (uint32_t)magnitude, 0, HCONST);
        return;
    }
    mix2(h, (uint32_t)magnitude, (uint32_t)(magnitude >> 32), negative ? HCONST_10 : HCONST_11);
}

static void h_signed(uint32_t *h, int64_t v)
{
    h_int(h, v < 0, v < 0 ? -(uint64_t)v : (uint64_t)v);
}

static void h_float(uint32_t *h, double d)
{
    uint64_t u;

    if (d == 0.0)
        d = 0.0; /* -0.0 hashes as 0.0 */
    memcpy(&u, &d, sizeof u);
    mix2(h, (uint32_t)(u >> 32), (uint32_t)u, HCONST_12);
}

/* ---- AMQP field values as rabbit_binary_parser decodes them ------------- */

static const char *type_atom(uint8_t tag)
{
    switch (tag) {
    case 'S': return "longstr";
    case 'I': return "signedint";
    case 'D': return "decimal";
    case 'T': return "timestamp";
    case 'F': return "table";
    case 'A': return "array";
    case 'b': return "byte";
    case 'B': return "unsignedbyte";
    case 'd': return "double";
    case 'f': return "float";
    case 'l': return "long";
    case 's': return "short";
    case 'u': return "unsignedshort";
    case 'i': return "unsignedint";
    case 't': return "bool";
    case 'x': return "binary";
    default: return "void";
    }
}

static void h_field(uint32_t *h, const amqp_field *f);

/* A proper list of tuples: the elements, then []. */
static void h_container(uint32_t *h, amqp_bytes content, bool keyed)
{
    amqp_iter it;
    amqp_bytes key;
    amqp_field v;

    amqp_iter_init(&it, content);
    while (keyed ? amqp_table_next(&it, &key, &v) : amqp_array_next(&it, &v)) {
        h_tuple(h, keyed ? 3 : 2);
        if (keyed)
            h_binary(h, key);
        h_atom(h, type_atom(v.type));
        h_field(h, &v);
    }
    h_nil(h);
}

/* The Value of {Type, Value}. */
static void h_field(uint32_t *h, const amqp_field *f)
{
    switch (f->type) {
    case 'S': case 'x': h_binary(h, f->v.bytes); return;
    case 'T': h_int(h, false, (uint64_t)f->v.i); return;
    case 'b': case 'B': case 's': case 'u': case 'I': case 'i': case 'l':
        h_signed(h, f->v.i);
        return;
    case 't': h_atom(h, f->v.i ? "true" : "false"); return;
    case 'f': h_float(h, f->v.f); return;
    case 'd': h_float(h, f->v.d); return;
    case 'D':
        h_tuple(h, 2);
        h_int(h, false, f->v.decimal.scale);
        h_int(h, false, f->v.decimal.value);
        return;
    case 'F': h_container(h, f->v.bytes, true); return;
    case 'A': h_container(h, f->v.bytes, false); return;
    default: h_atom(h, "undefined"); return; /* void */
    }
}

#define PHASH2_MASK ((1u << 27) - 1)

uint32_t route_phash2_binary(amqp_bytes b)
{
    uint32_t h = 0;

    h_binary(&h, b);
    return h & PHASH2_MASK;
}

uint32_t route_phash2_routing_keys(amqp_bytes key, amqp_bytes headers)
{
    static const char *const routing_headers[] = {"CC", "BCC"};
    uint32_t h = 0;
    amqp_field list, v;
    amqp_iter it;

    h_binary(&h, key);
    for (int i = 0; i < 2 && headers.len > 0; i++) {
        if (!amqp_table_get(headers, routing_headers[i], &list) || list.type != 'A')
            continue;
        amqp_iter_init(&it, list.v.bytes);
        while (amqp_array_next(&it, &v))
            if (v.type == 'S')
                h_binary(&h, v.v.bytes);
    }
    h_nil(&h);
    return h & PHASH2_MASK;
}

uint32_t route_phash2_atom(const char *name) { return atom_value(name) & PHASH2_MASK; }

uint32_t route_phash2_field(const amqp_field *f)
{
    uint32_t h = 0;

    h_tuple(&h, 2);
    h_atom(&h, type_atom(f->type));
    h_field(&h, f);
    return h & PHASH2_MASK;
}

/* ---- the jump hash over OTP's exs1024 ----------------------------------- */

typedef struct exs1024 {
    uint64_t s[16];
    unsigned p;
} exs1024;

uint64_t route_xorshift64s(uint64_t *r)
{
    uint64_t x = *r;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *r = x;
    return x * 2685821657736338717ull;
}

/* rand:seed_s(exs1024, {A, A, A}): three 21-bit parts make one xorshift64*
 * seed; its 16 outputs, last first, are the ring. */
static void exs1024_seed(exs1024 *g, uint64_t a)
{
    uint64_t b1 = (((a & 0x1fffff) + 1) * 2097131) & 0x1fffff;
    uint64_t b2 = (((a & 0x1fffff) + 1) * 2097133) & 0x1fffff;
    uint64_t b3 = (((a & 0x1fffff) + 1) * 2097143) & 0x1fffff;
    uint64_t r = b1 << 43 | b2 << 22 | b3 << 1 | 1;

    for (int i = 15; i >= 0; i--)
        g->s[i] = route_xorshift64s(&r);
    g->p = 0;
}

static uint64_t exs1024_next(exs1024 *g)
{
    uint64_t s0 = g->s[g->p];
    unsigned q = (g->p + 1) & 15;
    uint64_t s1 = g->s[q];

    s1 ^= s1 << 31;
    s1 ^= s1 >> 11;
    s0 ^= s0 >> 30;
    g->s[q] = s0 ^ s1;
    g->p = q;
    return g->s[q] * 1181783497276652981ull;
}

uint64_t route_jump_hash(uint32_t key, uint64_t buckets)
{
    exs1024 g;
    uint64_t b, j = 0;

    assert(buckets > 0 && buckets < (1ull << 53));
    if (buckets == 1)
        return 0;
    exs1024_seed(&g, key);
    for (;;) {
        /* rand:uniform_s for exs1024: V / 2^64 as a float. A 0.0 (one in
         * 2^64) would crash RabbitMQ's division; here it keeps b. */
        double r = (double)exs1024_next(&g) / 18446744073709551616.0, q;

        b = j;
        q = r > 0 ? (double)(b + 1) / r : (double)buckets;
        if (q >= (double)buckets) /* trunc(q) >= buckets, as buckets is whole */
            return b;
        j = (uint64_t)q;
    }
}
