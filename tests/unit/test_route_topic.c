/* Topic exchange: the trie against RabbitMQ's matching.
 *
 * Three layers: a table of single cases (edge cases of "*", "#" and empty
 * words); a pattern x key matrix recorded from a live RabbitMQ 3.10.8
 * (pika, one queue per pattern on one topic exchange); and a randomized
 * comparison with a tiny recursive reference matcher, with bindings added
 * and removed as it goes. Plus a pathological "#" pattern that must not
 * take exponential time, and a 10,000-binding timing.
 */
#include <time.h>

#include "test_route_util.h"

/* ---- reference matcher -------------------------------------------------- */

#define MAXW 300

/* split_topic_key: "" is no words, else dots separate words. */
static int split(const char *s, const char **w, int *len)
{
    int n = 0;
    const char *start = s;

    if (*s == 0)
        return 0;
    for (;; s++) {
        if (*s == '.' || *s == 0) {
            w[n] = start;
            len[n++] = (int)(s - start);
            if (*s == 0)
                return n;
            start = s + 1;
        }
    }
}

static bool word_is(const char *w, int len, const char *lit)
{
    return len == (int)strlen(lit) && memcmp(w, lit, (size_t)len) == 0;
}

static bool ref_match_words(const char **pw, const int *pl, int np, const char **kw,
                            const int *kl, int nk)
{
    if (np == 0)
        return nk == 0;
    if (word_is(pw[0], pl[0], "#"))
        return ref_match_words(pw + 1, pl + 1, np - 1, kw, kl, nk) ||
               (nk > 0 && ref_match_words(pw, pl, np, kw + 1, kl + 1, nk - 1));
    if (nk == 0)
        return false;
    if (!word_is(pw[0], pl[0], "*") && (pl[0] != kl[0] || memcmp(pw[0], kw[0], (size_t)pl[0])))
        return false;
    return ref_match_words(pw + 1, pl + 1, np - 1, kw + 1, kl + 1, nk - 1);
}

static bool ref_match(const char *pattern, const char *key)
{
    const char *pw[MAXW], *kw[MAXW];
    int pl[MAXW], kl[MAXW];
    int np = split(pattern, pw, pl), nk = split(key, kw, kl);

    return ref_match_words(pw, pl, np, kw, kl, nk);
}

/* ---- single cases ------------------------------------------------------- */

static const struct {
    const char *pattern, *key;
    bool match;
} cases[] = {
    {"a.b.c", "a.b.c", true},
    {"a.b.c", "a.b", false},
    {"a.b", "a.b.c", false},
    {"a.*.c", "a.b.c", true},
    {"a.*.c", "a.c", false},
    {"a.*.c", "a..c", true},       /* "*" matches one empty word */
    {"*", "a", true},
    {"*", "", false},              /* "" is zero words, not one empty word */
    {"*", ".", false},             /* "." is two empty words */
    {"*.*", ".", true},
    {"*", "a.b", false},
    {"#", "", true},
    {"#", "a", true},
    {"#", "a.b.c", true},
    {"#", ".", true},
    {"#", "..", true},
    {"", "", true},
    {"", "a", false},
    {".", ".", true},
    {".", "", false},
    {"a.#", "a", true},            /* "#" matches zero words */
    {"a.#", "a.b", true},
    {"a.#", "a.b.c", true},
    {"a.#", "b.a", false},
    {"a.#", "a.", true},
    {"#.a", "a", true},
    {"#.a", "b.a", true},
    {"#.a", "a.b", false},
    {"#.a", ".a", true},
    {"a.#.b", "a.b", true},
    {"a.#.b", "a.x.b", true},
    {"a.#.b", "a.x.y.b", true},
    {"a.#.b", "a..b", true},
    {"a.#.b", "a.b.c", false},
    {"a.#.b", "a.b.b", true},
    {"#.#", "", true},
    {"#.#", "a.b", true},
    {"#.#.#", "x", true},
    {"#.*", "", false},            /* needs at least one word */
    {"#.*", "a", true},
    {"#.*", "a.b.c", true},
    {"*.#", "", false},
    {"*.#", "a", true},
    {"*.#.*", "a", false},
    {"*.#.*", "a.b", true},
    {"*.#.*", "a.b.c", true},
    {"#.b.#", "b", true},
    {"#.b.#", "a.b.c", true},
    {"#.b.#", "a.c", false},
    {"a..b", "a..b", true},
    {"a..b", "a.b", false},
    {"a.", "a.", true},
    {"a.", "a", false},
    {".a", ".a", true},
    {".a", "a", false},
    {"#.", "a.", true},
    {"#.", "a", false},
    {".#", ".a.b", true},
    {"#..#", "a..b", true},
    {"#..#", "a.b", false},
    {"a.*.#", "a", false},
    {"a.*.#", "a.b", true},
    {"a.*.*.#", "a.b.c.d", true},
    {"a.*.*.#", "a.b", false},
    {"*", "#", true},              /* a "#" or "*" in the key is a plain word */
    {"*", "*", true},
    {"a.#", "a.#", true},
    {"#", "*.b", true},
    {"a.#.#.b", "a.b", true},
    {"a.#.#.b", "a.x.y.z.b", true},
};

static void test_cases(void **state)
{
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fixture *f = fx_new();
        route_exchange *ex = fx_declare(f, "t", "topic", false, NO_ARGS);
        int out[4];

        /* The reference agrees with the table, so the random test's
         * oracle is itself checked against RabbitMQ's answers. */
        if (ref_match(cases[i].pattern, cases[i].key) != cases[i].match)
            fail_msg("reference: '%s' vs '%s'", cases[i].pattern, cases[i].key);
        fx_bind(f, "t", QD(f, 1), cases[i].pattern, NO_ARGS);
        if ((fx_route(f, ex, cases[i].key, NO_ARGS, out) == 1) != cases[i].match)
            fail_msg("trie: '%s' vs '%s' should %smatch", cases[i].pattern, cases[i].key,
                     cases[i].match ? "" : "not ");
        fx_free(f);
    }
}

/* ---- the matrix recorded from RabbitMQ 3.10.8 --------------------------- */

static const char *const matrix_patterns[] = {"", "#", "*", "#.#", "#.*", "*.#", "a.#", "#.a", "a.#.b", "a.*", "*.a", "a..b", "a.*.b", ".", "*.*", "#.#.#", "a", "a.", ".a", "#.", ".#", "*.", ".*", "*.*.*", "a.#.#.b", "#.b.#", "#.#.*", "*.#.*", "a.#.*", "..", "#..#", "a.*.#", "b", "#.*.#", "*.#.#.*", "a.b.c", "#.c", "a.*.*.#"};
static const char *const matrix_keys[] = {"", ".", "a", "a.", ".a", "a..b", "a.b", "a.b.c", "a.x.b", "a.x.y.b", "#", "*", "..", "a.b.b", "b", "x.b.y", "a.a", "...", "a.b.c.d", "c", "x.c", "a.#", "*.b"};
/* matrix_expect[k]: the patterns (indexes) RabbitMQ 3.10.8 matched for key k. */
static const char *const matrix_expect[] = {
    "0,1,3,15", /* "" */
    "1,3,4,5,13,14,15,19,20,21,22,26,27,30,33,34", /* "." */
    "1,2,3,4,5,6,7,15,16,26,33", /* "a" */
    "1,3,4,5,6,9,14,15,17,19,21,26,27,28,30,31,33,34", /* "a." */
    "1,3,4,5,7,10,14,15,18,20,22,26,27,30,33,34", /* ".a" */
    "1,3,4,5,6,8,11,12,15,23,24,25,26,27,28,30,31,33,34,37", /* "a..b" */
    "1,3,4,5,6,8,9,14,15,24,25,26,27,28,31,33,34", /* "a.b" */
    "1,3,4,5,6,15,23,25,26,27,28,31,33,34,35,36,37", /* "a.b.c" */
    "1,3,4,5,6,8,12,15,23,24,25,26,27,28,31,33,34,37", /* "a.x.b" */
    "1,3,4,5,6,8,15,24,25,26,27,28,31,33,34,37", /* "a.x.y.b" */
    "1,2,3,4,5,15,26,33", /* "#" */
    "1,2,3,4,5,15,26,33", /* "*" */
    "1,3,4,5,15,19,20,23,26,27,29,30,33,34", /* ".." */
    "1,3,4,5,6,8,12,15,23,24,25,26,27,28,31,33,34,37", /* "a.b.b" */
    "1,2,3,4,5,15,25,26,32,33", /* "b" */
    "1,3,4,5,15,23,25,26,27,33,34", /* "x.b.y" */
    "1,3,4,5,6,7,9,10,14,15,26,27,28,31,33,34", /* "a.a" */
    "1,3,4,5,15,19,20,26,27,30,33,34", /* "..." */
    "1,3,4,5,6,15,25,26,27,28,31,33,34,37", /* "a.b.c.d" */
    "1,2,3,4,5,15,26,33,36", /* "c" */
    "1,3,4,5,14,15,26,27,33,34,36", /* "x.c" */
    "1,3,4,5,6,9,14,15,26,27,28,31,33,34", /* "a.#" */
    "1,3,4,5,14,15,25,26,27,33,34", /* "*.b" */
};

#define NPAT (sizeof matrix_patterns / sizeof matrix_patterns[0])
#define NKEY (sizeof matrix_keys / sizeof matrix_keys[0])

static void test_rabbitmq_matrix(void **state)
{
    fixture *f = fx_new();
    route_exchange *ex = fx_declare(f, "t", "topic", false, NO_ARGS);
    size_t p, k;
    char ref[1024];

    for (p = 0; p < NPAT; p++)
        fx_bind(f, "t", QD(f, (int)p), matrix_patterns[p], NO_ARGS);
    for (k = 0; k < NKEY; k++) {
        size_t len = 0;

        assert_string_equal(fx_route_str(f, ex, matrix_keys[k], NO_ARGS), matrix_expect[k]);
        ref[0] = 0;
        for (p = 0; p < NPAT; p++)
            if (ref_match(matrix_patterns[p], matrix_keys[k]))
                len += (size_t)snprintf(ref + len, sizeof ref - len, len ? ",%zu" : "%zu", p);
        assert_string_equal(ref, matrix_expect[k]);
    }
    /* Unbinding everything leaves the trie empty again. */
    for (p = 0; p < NPAT; p++)
        assert_int_equal(route_unbind(f->t, B("t"), QD(f, (int)p), B(matrix_patterns[p]),
                                      NO_ARGS, AMQP_QUEUE_UNBIND, NULL),
                         AMQP_OK);
    assert_int_equal(route_exchange_binding_count(ex), 0);
    for (k = 0; k < NKEY; k++)
        assert_string_equal(fx_route_str(f, ex, matrix_keys[k], NO_ARGS), "");
    fx_free(f);
}

/* ---- randomized against the reference ----------------------------------- */

static uint64_t rng = 0x2545f4914f6cdd1dULL;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static void random_words(char *buf, size_t cap, const char *const *alphabet, int nalpha,
                         int maxwords)
{
    int n = (int)rnd((uint32_t)maxwords + 1), i;
    size_t len = 0;

    buf[0] = 0;
    for (i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? "." : "",
                                alphabet[rnd((uint32_t)nalpha)]);
}

#define RPAT 300

static void test_random_against_reference(void **state)
{
    static const char *const pat_words[] = {"a", "b", "", "*", "#", "a", "*", "#", "cd"};
    static const char *const key_words[] = {"a", "b", "", "cd", "*", "#"};
    static char patterns[RPAT][64];
    static bool bound[RPAT];
    fixture *f = fx_new();
    route_exchange *ex = fx_declare(f, "t", "topic", false, NO_ARGS);
    int round, p, checked = 0, nonempty = 0;

    for (round = 0; round < 4000; round++) {
        char key[64], want[4096];
        size_t len = 0;

        /* Churn: replace a random pattern every round. */
        p = (int)rnd(RPAT);
        if (bound[p])
            assert_int_equal(route_unbind(f->t, B("t"), QD(f, p), B(patterns[p]), NO_ARGS,
                                          AMQP_QUEUE_UNBIND, NULL),
                             AMQP_OK);
        random_words(patterns[p], sizeof patterns[p], pat_words, 9, 6);
        fx_bind(f, "t", QD(f, p), patterns[p], NO_ARGS);
        bound[p] = true;

        random_words(key, sizeof key, key_words, 6, 7);
        want[0] = 0;
        for (p = 0; p < RPAT; p++)
            if (bound[p] && ref_match(patterns[p], key))
                len += (size_t)snprintf(want + len, sizeof want - len, len ? ",%d" : "%d", p);
        if (strcmp(fx_route_str(f, ex, key, NO_ARGS), want) != 0)
            fail_msg("key '%s': trie %s, reference %s", key, fx_route_str(f, ex, key, NO_ARGS),
                     want);
        checked++;
        nonempty += want[0] != 0;
    }
    assert_int_equal(checked, 4000);
    assert_true(nonempty > 2000); /* the check is not vacuous */
    fx_free(f);
}

/* ---- cost ---------------------------------------------------------------- */

/* Interleaved "#"s against a long key: exponential for a naive walk (and
 * for RabbitMQ's own trie_match); linear-ish with the per-node memo. */
static void test_hash_pattern_is_not_exponential(void **state)
{
    fixture *f = fx_new();
    route_exchange *ex = fx_declare(f, "t", "topic", false, NO_ARGS);
    char pattern[256] = "", key[256] = "";
    int i, out[4];
    clock_t start;

    for (i = 0; i < 40; i++)
        strcat(pattern, i ? ".#.a" : "#.a");
    strcat(pattern, ".b");
    for (i = 0; i < 120; i++)
        strcat(key, i ? ".a" : "a");
    fx_bind(f, "t", QD(f, 1), pattern, NO_ARGS);
    start = clock();
    assert_int_equal(fx_route(f, ex, key, NO_ARGS, out), 0); /* no final "b" */
    strcat(key, ".b");
    assert_int_equal(fx_route(f, ex, key, NO_ARGS, out), 1);
    assert_true((double)(clock() - start) / CLOCKS_PER_SEC < 1.0);
    fx_free(f);
}

static double now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 10,000 bindings "<region>.<service>.<level>" with a share of wildcards;
 * routing a key visits only the matching paths. */
static void test_ten_thousand_bindings(void **state)
{
    fixture *f = fx_new();
    route_exchange *ex = fx_declare(f, "t", "topic", false, NO_ARGS);
    char key[64];
    int i, n = 0, rounds = 200000;
    double start, ns;

    for (i = 0; i < 10000; i++) {
        if (i % 10 == 0)
            snprintf(key, sizeof key, "r%d.*.%s", i % 50, i % 20 ? "error" : "#");
        else
            snprintf(key, sizeof key, "r%d.svc%d.l%d", i % 50, i / 50, i % 7);
        fx_bind(f, "t", QD(f, i % MAX_QUEUES), key, NO_ARGS);
    }
    start = now_sec();
    for (i = 0; i < rounds; i++) {
        void **qs;
        snprintf(key, sizeof key, "r%d.svc%d.l%d", i % 50, (i / 50) % 200, i % 7);
        n += (int)route_message(f->t, ex, B(key), NO_ARGS, &qs);
    }
    ns = (now_sec() - start) * 1e9 / rounds;
    print_message("topic, 10,000 bindings: %.0f ns per message (%d deliveries)\n", ns, n);
    assert_true(n > 0);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_rabbitmq_matrix),
        cmocka_unit_test(test_random_against_reference),
        cmocka_unit_test(test_hash_pattern_is_not_exponential),
        cmocka_unit_test(test_ten_thousand_bindings),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
