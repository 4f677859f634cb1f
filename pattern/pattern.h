/* pattern: bounded regular expressions -- PCRE2 patterns compiled once (JIT
 * where the platform has it) and matched under a step limit, a backtracking
 * depth limit and a heap limit, so that a catastrophic pattern such as
 * "(a+)+$" against 'a'*230 + 'b' costs a bounded amount of work and says so
 * (PATTERN_LIMIT) instead of running for minutes. Policy patterns,
 * permission regexes and the management API's list filter all use it.
 *
 * Matching is RabbitMQ's re:run(Subject, Pattern): an unanchored search
 * over bytes, no UTF-8 mode -- any bytes, NUL included, make a valid
 * subject, "." is one byte, and PATTERN_CASELESS folds ASCII letters only.
 *
 * Threads: a compiled pattern is immutable once pattern_compile returns, so
 * several event loops may share one. A match needs a pattern_scratch (match
 * data, the limits, a JIT stack when one is needed), which one caller uses
 * at a time -- keep one per loop or per owner. Nothing here is global.
 *
 * Typical use, a case-insensitive filter over many names:
 *
 *     pattern_error e;
 *     pattern_re *re = pattern_compile(text, strlen(text), PATTERN_CASELESS, &e);
 *     if (!re) refuse(e.text);
 *     pattern_scratch *s = pattern_scratch_new();
 *     for each name:
 *         switch (pattern_match(re, s, name, name_len)) {
 *         case PATTERN_MATCH: keep(name); break;
 *         case PATTERN_NO_MATCH: break;
 *         case PATTERN_LIMIT: refuse("pattern too costly"); -- or skip it
 *         }
 *     pattern_scratch_free(s);
 *     pattern_free(re);
 */
#ifndef WARREN_PATTERN_H
#define WARREN_PATTERN_H

#include <stdbool.h>
#include <stddef.h>

typedef struct pattern_re pattern_re;
typedef struct pattern_scratch pattern_scratch;

enum {
    /* Longest pattern accepted, in bytes. RabbitMQ sets none, but its
     * users' policy and permission patterns are short (a prefix, a
     * suffix, an alternation of a few dozen names); 4 KiB holds an
     * alternation of ~100 names while bounding what one compile costs. */
    PATTERN_MAX_LEN = 4096,
    /* Backtracking steps one match may take. Ordinary patterns need a few
     * hundred against a 255-byte name; the costliest plausible one we
     * found, ".*a.*b.*c$" against "abc-.xabc-.x...", ~2,000 with JIT and
     * ~85,000 interpreted. A match that reaches the limit costs ~0.25 ms
     * with JIT on a 2020s core (~1.5 ms interpreted), where an unbounded
     * one runs for minutes. */
    PATTERN_MATCH_LIMIT = 100000,
    /* Nested backtracking points, and the heap (KiB) they may use, for
     * the interpreter (without JIT). */
    PATTERN_DEPTH_LIMIT = 10000,
    PATTERN_HEAP_LIMIT_KIB = 1024,
};

typedef enum pattern_flags {
    PATTERN_CASELESS = 1, /* ASCII letters match either case (the list filter) */
    PATTERN_NO_JIT = 2,   /* interpret: for a pattern matched once or twice, where
                             JIT compiling would cost more than it saves */
} pattern_flags;

typedef enum pattern_result {
    PATTERN_NO_MATCH = 0,
    PATTERN_MATCH = 1,
    /* Undecided: the match reached a limit (or memory ran out). Callers
     * count it as no match, or refuse the request, and log it once per
     * pattern, naming whose pattern it is. */
    PATTERN_LIMIT = -1,
} pattern_result;

/* Why a pattern did not compile. */
enum { PATTERN_TOO_LONG = 1 }; /* pattern_error.code beside PCRE2's */
typedef struct pattern_error {
    int code;      /* PCRE2's compile error number (101 and up; pcre2_compile's
                      list), PATTERN_TOO_LONG, or 0 when memory ran out */
    size_t offset; /* where in the pattern it was found */
    char text[128]; /* PCRE2's words, or ours for the two cases above */
} pattern_error;

/* Compiles `len` bytes of `source` (NUL not needed) with PATTERN_* flags.
 * Returns the pattern (the caller owns it: pattern_free), or NULL with
 * *err filled when it is longer than PATTERN_MAX_LEN, is not a regular
 * expression, or memory ran out. A pattern JIT compilation fails for is
 * still returned, and interpreted. */
pattern_re *pattern_compile(const char *source, size_t len, unsigned flags, pattern_error *err);
void pattern_free(pattern_re *p); /* NULL is fine */
/* Whether matching runs JIT-compiled code. */
bool pattern_jitted(const pattern_re *p);

/* Match state for one caller; NULL on out-of-memory. */
pattern_scratch *pattern_scratch_new(void);
void pattern_scratch_free(pattern_scratch *s); /* NULL is fine */

/* Searches `len` bytes of `subject` (NULL when len is 0) for `p`, within
 * the limits. A JIT match allocates nothing, except the first time one
 * outgrows the default 32 KiB JIT stack: `s` then gets its own (up to 512
 * KiB) and keeps it. An interpreted match keeps its backtracking frames in
 * `s`, grown as a match needs them up to the heap limit. */
pattern_result pattern_match(const pattern_re *p, pattern_scratch *s, const void *subject,
                             size_t len);

#endif
