/* Bounded regular expressions: catastrophic patterns stop at the step
 * limit (the issue's three, and ones that try to raise the limit from
 * inside the pattern), ordinary ones answer as unbounded PCRE2 does (a
 * table, and random patterns), with and without JIT; the length cap;
 * compile errors; bytes, UTF-8 and NUL in subjects and patterns; the
 * empty pattern; the JIT stack a scratch grows; two threads sharing one
 * pattern. PCRE2 itself is the reference.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../pattern/pattern.h"

static const unsigned modes[] = {0, PATTERN_NO_JIT};

static pattern_re *must_compile(const char *src, unsigned flags)
{
    pattern_error e;
    pattern_re *p = pattern_compile(src, strlen(src), flags, &e);
    if (!p)
        fail_msg("'%s' did not compile: %s", src, e.text);
    return p;
}

static pattern_result match_once(const char *src, unsigned flags, const void *subj, size_t len)
{
    pattern_re *p = must_compile(src, flags);
    pattern_scratch *s = pattern_scratch_new();
    assert_non_null(s);
    pattern_result r = pattern_match(p, s, subj, len);
    pattern_scratch_free(s);
    pattern_free(p);
    return r;
}

/* PCRE2 with no limits of ours: what the answer would have been. rc as
 * pcre2_match returns it, with `limit` steps (0: PCRE2's default). */
static int unbounded(const char *src, const char *subj, size_t len, uint32_t limit)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)src, PCRE2_ZERO_TERMINATED, 0, &code, &off, NULL);
    assert_non_null(re);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    if (limit)
        pcre2_set_match_limit(mc, limit);
    int rc = pcre2_match(re, (PCRE2_SPTR)subj, len, 0, 0, md, mc);
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc;
}

/* The issue's queue names: 'a' * 230 + "b%05d". */
static const char *long_name(int i)
{
    static char name[240];
    memset(name, 'a', 230);
    snprintf(name + 230, sizeof name - 230, "b%05d", i);
    return name;
}

/* ---- catastrophic patterns ------------------------------------------------ */

static const char *const catastrophic[] = {
    "(a+)+$", "(a|aa)+$", "(.*a){12}$", "^(([a-z])+.)+[A-Z]([a-z])+$",
    /* a pattern may lower the limit, never raise it */
    "(*LIMIT_MATCH=4000000000)(a+)+$", "(*LIMIT_DEPTH=4000000000)(*LIMIT_HEAP=4000000000)(a|aa)+$",
    "(*NO_JIT)(.*a){12}$",
};

static void test_catastrophic_patterns_hit_the_limit(void **state)
{
    (void)state;
    const char *name = long_name(1);
    for (size_t m = 0; m < 2; m++)
        for (size_t i = 0; i < sizeof catastrophic / sizeof *catastrophic; i++) {
            pattern_result r = match_once(catastrophic[i], modes[m], name, strlen(name));
            if (r != PATTERN_LIMIT)
                fail_msg("%s (mode %u): %d, not PATTERN_LIMIT", catastrophic[i], modes[m], r);
        }
}

/* What stops them is the step count: PCRE2 alone, given the same number of
 * steps, stops too, and ten times as many are not enough either -- these
 * are not near the line. */
static void test_the_limit_is_steps(void **state)
{
    (void)state;
    const char *name = long_name(2);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(unbounded(catastrophic[i], name, strlen(name), PATTERN_MATCH_LIMIT),
                         PCRE2_ERROR_MATCHLIMIT);
        assert_int_equal(unbounded(catastrophic[i], name, strlen(name), 10 * PATTERN_MATCH_LIMIT),
                         PCRE2_ERROR_MATCHLIMIT);
    }
}

/* ---- ordinary patterns ------------------------------------------------------ */

static const char *const ordinary[] = {
    "", "^$", ".*", "^amq\\.", "\\.dlq$", "^orders\\.(eu|us)\\.", "^(?:(?!tmp).)*$",
    "(.*)-(.*)-(.*)$", ".*a.*b.*c$", "(\\w+\\.)*\\w+$", "^([a-z0-9]+[-._])*[a-z0-9]+$",
    "b0000[1-3]$", "[[:digit:]]{5}$", "^a{230}b", "(?i)^AAA", "x|y|z",
};

static void subjects(char out[][300], size_t *lens)
{
    strcpy(out[0], long_name(1));
    strcpy(out[1], "orders.eu.dlq");
    strcpy(out[2], "amq.gen-JzTY20BRgKO-HjmUJj0wLg");
    strcpy(out[3], "my-tmp-queue");
    strcpy(out[4], "");
    for (int i = 0; i < 254; i++) /* ".*a.*b.*c$" backtracks most on this */
        out[5][i] = "abc-.x"[i % 6];
    out[5][254] = 0;
    strcpy(out[6], "a-b-c");
    strcpy(out[7], long_name(3));
    for (size_t i = 0; i < 8; i++)
        lens[i] = strlen(out[i]);
}

static void test_ordinary_patterns_answer_as_pcre2(void **state)
{
    (void)state;
    char subj[8][300];
    size_t lens[8];
    subjects(subj, lens);
    pattern_scratch *s = pattern_scratch_new();
    for (size_t m = 0; m < 2; m++)
        for (size_t i = 0; i < sizeof ordinary / sizeof *ordinary; i++) {
            pattern_re *p = must_compile(ordinary[i], modes[m]);
            for (size_t j = 0; j < 8; j++) {
                bool want = unbounded(ordinary[i], subj[j], lens[j], 0) >= 0;
                pattern_result got = pattern_match(p, s, subj[j], lens[j]);
                if (got != (want ? PATTERN_MATCH : PATTERN_NO_MATCH))
                    fail_msg("'%s' on subject %zu (mode %u): %d, want %d", ordinary[i], j,
                             modes[m], got, want);
            }
            pattern_free(p);
        }
    pattern_scratch_free(s);
}

/* Random small patterns over a small alphabet: wherever the bounded match
 * decides, it says what PCRE2 says; where it does not, PCRE2 given the
 * same steps does not either. */
static void random_pattern(char *out, size_t cap, unsigned *seed)
{
    static const char *const atoms[] = {"a", "b", ".", "[ab]", "(a|b)", "(a+)", "\\d", "x"};
    static const char *const quants[] = {"", "", "*", "+", "?", "{2}", "*?"};
    size_t n = 1 + (size_t)rand_r(seed) % 6, len = 0;
    out[0] = 0;
    if (rand_r(seed) % 3 == 0)
        len += (size_t)snprintf(out + len, cap - len, "^");
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", atoms[rand_r(seed) % 8],
                                quants[rand_r(seed) % 7]);
    if (len < cap && rand_r(seed) % 3 == 0)
        snprintf(out + len, cap - len, "$");
}

static void test_random_patterns_answer_as_pcre2(void **state)
{
    (void)state;
    unsigned seed = 17;
    pattern_scratch *s = pattern_scratch_new();
    size_t decided = 0;
    for (int k = 0; k < 3000; k++) {
        char src[128], subj[64];
        random_pattern(src, sizeof src, &seed);
        size_t len = (size_t)rand_r(&seed) % 40;
        for (size_t i = 0; i < len; i++)
            subj[i] = "ab1x"[rand_r(&seed) % 4];
        subj[len] = 0;
        pattern_re *p = must_compile(src, modes[k % 2]);
        pattern_result got = pattern_match(p, s, subj, len);
        int rc = unbounded(src, subj, len, PATTERN_MATCH_LIMIT);
        if (got == PATTERN_LIMIT)
            assert_int_equal(rc, PCRE2_ERROR_MATCHLIMIT);
        else if (got != (rc >= 0 ? PATTERN_MATCH : PATTERN_NO_MATCH))
            fail_msg("'%s' on '%s': %d, PCRE2 %d", src, subj, got, rc);
        decided += got != PATTERN_LIMIT;
        pattern_free(p);
    }
    assert_true(decided > 2900);
    pattern_scratch_free(s);
}

/* ---- compiling ---------------------------------------------------------------- */

static void test_length_cap(void **state)
{
    (void)state;
    char *src = malloc(PATTERN_MAX_LEN + 2);
    memset(src, 'a', PATTERN_MAX_LEN + 1);
    src[PATTERN_MAX_LEN + 1] = 0;
    pattern_error e;
    pattern_re *p = pattern_compile(src, PATTERN_MAX_LEN, 0, &e);
    assert_non_null(p); /* exactly the cap: accepted */
    pattern_scratch *s = pattern_scratch_new();
    assert_int_equal(pattern_match(p, s, src, PATTERN_MAX_LEN), PATTERN_MATCH);
    pattern_scratch_free(s);
    pattern_free(p);
    assert_null(pattern_compile(src, PATTERN_MAX_LEN + 1, 0, &e));
    assert_int_equal(e.code, PATTERN_TOO_LONG);
    assert_string_equal(e.text, "pattern longer than 4096 bytes");
    free(src);
}

static void test_compile_errors(void **state)
{
    (void)state;
    static const struct {
        const char *src;
        int code;
        size_t offset;
    } cases[] = {
        {"(", 114, 1},      /* missing closing parenthesis */
        {"a{2,1}", 104, 5}, /* numbers out of order */
        {"*", 109, 0},      /* quantifier does not follow a repeatable item */
        {"[a", 106, 2},     /* missing terminating ] */
        {"\\", 101, 1},     /* \ at end of pattern_re */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pattern_error e = {0};
        assert_null(pattern_compile(cases[i].src, strlen(cases[i].src), 0, &e));
        assert_int_equal(e.code, cases[i].code);
        assert_int_equal(e.offset, cases[i].offset);
        assert_true(strlen(e.text) > 5);
    }
}

static void test_jit_by_default(void **state)
{
    (void)state;
    uint32_t has_jit = 0;
    pcre2_config(PCRE2_CONFIG_JIT, &has_jit);
    pattern_re *p = must_compile("^amq\\.", 0), *q = must_compile("^amq\\.", PATTERN_NO_JIT);
    assert_int_equal(pattern_jitted(p), has_jit != 0);
    assert_false(pattern_jitted(q));
    pattern_free(p);
    pattern_free(q);
}

/* ---- subjects ------------------------------------------------------------------ */

static void test_bytes_utf8_and_nul(void **state)
{
    (void)state;
    for (size_t m = 0; m < 2; m++) {
        unsigned f = modes[m];
        assert_int_equal(match_once("a.b", f, "a\0b", 3), PATTERN_MATCH);
        assert_int_equal(match_once("^.$", f, "\xff", 1), PATTERN_MATCH);
        /* bytes, not characters: "é" is two */
        assert_int_equal(match_once("^.$", f, "\xc3\xa9", 2), PATTERN_NO_MATCH);
        assert_int_equal(match_once("^..$", f, "\xc3\xa9", 2), PATTERN_MATCH);
        assert_int_equal(match_once("caf\xc3\xa9$", f, "le caf\xc3\xa9", 8), PATTERN_MATCH);
        /* not UTF-8 at all */
        assert_int_equal(match_once("\\($", f, "\xc3(", 2), PATTERN_MATCH);
        /* the pattern may hold a NUL when its length is given */
        pattern_error e;
        pattern_re *p = pattern_compile("x\0y", 3, f, &e);
        assert_non_null(p);
        pattern_scratch *s = pattern_scratch_new();
        assert_int_equal(pattern_match(p, s, "ax\0yb", 5), PATTERN_MATCH);
        assert_int_equal(pattern_match(p, s, "axyb", 4), PATTERN_NO_MATCH);
        pattern_scratch_free(s);
        pattern_free(p);
        /* a "(*UTF)" pattern and a subject that is not UTF-8: no match */
        assert_int_equal(match_once("(*UTF)a", f, "a\xff", 2), PATTERN_NO_MATCH);
    }
}

static void test_caseless(void **state)
{
    (void)state;
    assert_int_equal(match_once("QUEUE", PATTERN_CASELESS, "my-queue-1", 10), PATTERN_MATCH);
    assert_int_equal(match_once("QUEUE", 0, "my-queue-1", 10), PATTERN_NO_MATCH);
    assert_int_equal(match_once("^Q.*1$", PATTERN_CASELESS | PATTERN_NO_JIT, "q-1", 3),
                     PATTERN_MATCH);
    /* ASCII only: "É" (C3 89) and "é" (C3 A9) stay apart */
    assert_int_equal(match_once("\xc3\x89", PATTERN_CASELESS, "\xc3\xa9", 2), PATTERN_NO_MATCH);
}

static void test_empty_pattern_and_subject(void **state)
{
    (void)state;
    for (size_t m = 0; m < 2; m++) {
        assert_int_equal(match_once("", modes[m], "anything", 8), PATTERN_MATCH);
        assert_int_equal(match_once("", modes[m], NULL, 0), PATTERN_MATCH);
        assert_int_equal(match_once("^$", modes[m], NULL, 0), PATTERN_MATCH);
        assert_int_equal(match_once("^$", modes[m], "x", 1), PATTERN_NO_MATCH);
        assert_int_equal(match_once("a", modes[m], NULL, 0), PATTERN_NO_MATCH);
    }
}

/* ---- scratch --------------------------------------------------------------------- */

/* A JIT match deeper than the default 32 KiB stack: the scratch gets its
 * own and the match is decided; the same scratch then serves other
 * patterns and the interpreter. */
static void test_scratch_grows_its_jit_stack(void **state)
{
    (void)state;
    char subj[1021];
    memset(subj, 'a', 1020);
    subj[1020] = 0;
    pattern_re *deep = must_compile("((((.))))*$", 0), *plain = must_compile("a$", PATTERN_NO_JIT);
    pattern_scratch *s = pattern_scratch_new();
    if (pattern_jitted(deep)) { /* PCRE2 alone, on its default stack, runs out */
        int code;
        PCRE2_SIZE off;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR) "((((.))))*$", PCRE2_ZERO_TERMINATED, 0,
                                       &code, &off, NULL);
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
        pcre2_match_data *md = pcre2_match_data_create(1, NULL);
        assert_int_equal(pcre2_match(re, (PCRE2_SPTR)subj, 1020, 0, 0, md, NULL),
                         PCRE2_ERROR_JIT_STACKLIMIT);
        pcre2_match_data_free(md);
        pcre2_code_free(re);
    }
    assert_int_equal(pattern_match(deep, s, subj, 1020), PATTERN_MATCH);
    assert_int_equal(pattern_match(deep, s, subj, 1020), PATTERN_MATCH);
    assert_int_equal(pattern_match(plain, s, subj, 1020), PATTERN_MATCH);
    assert_int_equal(pattern_match(deep, s, "", 0), PATTERN_MATCH);
    pattern_scratch_free(s);
    pattern_free(deep);
    pattern_free(plain);
}

/* Two threads, one pattern, a scratch each: each gets every answer right. */
typedef struct worker {
    const pattern_re *p;
    int wrong;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    pattern_scratch *s = pattern_scratch_new();
    for (int i = 0; i < 20000; i++) {
        char name[32];
        int n = snprintf(name, sizeof name, "orders.%d.dlq", i);
        pattern_result want = i % 5 == 0 ? PATTERN_MATCH : PATTERN_NO_MATCH;
        w->wrong += pattern_match(w->p, s, name, (size_t)n) != want;
    }
    pattern_scratch_free(s);
    return NULL;
}

static void test_threads_share_a_pattern(void **state)
{
    (void)state;
    pattern_re *p = must_compile("^orders\\.[0-9]*[05]\\.dlq$", 0);
    worker ws[2] = {{p, 0}, {p, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, work, &ws[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(ws[0].wrong, 0);
    assert_int_equal(ws[1].wrong, 0);
    pattern_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catastrophic_patterns_hit_the_limit),
        cmocka_unit_test(test_the_limit_is_steps),
        cmocka_unit_test(test_ordinary_patterns_answer_as_pcre2),
        cmocka_unit_test(test_random_patterns_answer_as_pcre2),
        cmocka_unit_test(test_length_cap),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_jit_by_default),
        cmocka_unit_test(test_bytes_utf8_and_nul),
        cmocka_unit_test(test_caseless),
        cmocka_unit_test(test_empty_pattern_and_subject),
        cmocka_unit_test(test_scratch_grows_its_jit_stack),
        cmocka_unit_test(test_threads_share_a_pattern),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
