/* Bounded regular expressions over PCRE2 (see pattern.h).
 *
 * A pattern is PCRE2's compiled code plus whether it was JIT compiled; it
 * is never written after pattern_compile, which is what lets loops share
 * it. A scratch holds what a match writes: the match data (one ovector
 * pair -- callers only ask whether it matched -- and, for the interpreter,
 * its retained backtracking frames), a match context carrying the limits,
 * and a JIT stack made the first time the default one is too small.
 *
 * The limits live in the scratch's match context, not in the pattern, so
 * a pattern cannot raise them: PCRE2 lets a "(*LIMIT_MATCH=n)" at the start
 * of a pattern lower the caller's limit, never raise it.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>

#include "pattern.h"

struct pattern_re {
    pcre2_code *code;
    bool jit;
};

struct pattern_scratch {
    pcre2_match_data *data;
    pcre2_match_context *limits;
    pcre2_jit_stack *jit_stack; /* NULL until a match outgrows 32 KiB */
};

enum { JIT_STACK_START = 32 * 1024, JIT_STACK_MAX = 512 * 1024 };

static void fail(pattern_error *err, int code, size_t offset, const char *text)
{
    err->code = code;
    err->offset = offset;
    snprintf(err->text, sizeof err->text, "%s", text);
}

pattern_re *pattern_compile(const char *source, size_t len, unsigned flags, pattern_error *err)
{
    if (len > PATTERN_MAX_LEN) {
        char text[sizeof err->text];
        snprintf(text, sizeof text, "pattern longer than %d bytes", PATTERN_MAX_LEN);
        fail(err, PATTERN_TOO_LONG, PATTERN_MAX_LEN, text);
        return NULL;
    }
    pattern_re *p = malloc(sizeof *p);
    if (!p) {
        fail(err, 0, 0, "out of memory");
        return NULL;
    }
    int code;
    PCRE2_SIZE offset;
    uint32_t options = flags & PATTERN_CASELESS ? PCRE2_CASELESS : 0;
    p->code = pcre2_compile((PCRE2_SPTR)(source ? source : ""), len, options, &code, &offset,
                            NULL);
    if (!p->code) {
        PCRE2_UCHAR text[sizeof err->text];
        pcre2_get_error_message(code, text, sizeof text);
        fail(err, code, offset, (const char *)text);
        free(p);
        return NULL;
    }
    /* Without JIT (no support, no executable memory) pcre2_match
     * interprets, under the same limits. */
    p->jit = !(flags & PATTERN_NO_JIT) && pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE) == 0;
    return p;
}

void pattern_free(pattern_re *p)
{
    if (!p)
        return;
    pcre2_code_free(p->code);
    free(p);
}

bool pattern_jitted(const pattern_re *p) { return p->jit; }

pattern_scratch *pattern_scratch_new(void)
{
    pattern_scratch *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->data = pcre2_match_data_create(1, NULL);
    s->limits = pcre2_match_context_create(NULL);
    if (!s->data || !s->limits) {
        pattern_scratch_free(s);
        return NULL;
    }
    pcre2_set_match_limit(s->limits, PATTERN_MATCH_LIMIT);
    pcre2_set_depth_limit(s->limits, PATTERN_DEPTH_LIMIT);
    pcre2_set_heap_limit(s->limits, PATTERN_HEAP_LIMIT_KIB);
    return s;
}

void pattern_scratch_free(pattern_scratch *s)
{
    if (!s)
        return;
    pcre2_match_data_free(s->data);
    pcre2_match_context_free(s->limits);
    pcre2_jit_stack_free(s->jit_stack);
    free(s);
}

/* Gives `s` a JIT stack larger than the default; false if it has one. */
static bool grow_jit_stack(pattern_scratch *s)
{
    if (s->jit_stack)
        return false;
    s->jit_stack = pcre2_jit_stack_create(JIT_STACK_START, JIT_STACK_MAX, NULL);
    if (!s->jit_stack)
        return false;
    pcre2_jit_stack_assign(s->limits, NULL, s->jit_stack);
    return true;
}

static int run(const pattern_re *p, pattern_scratch *s, const void *subject, size_t len)
{
    PCRE2_SPTR at = subject ? subject : (PCRE2_SPTR) "";
    return pcre2_match(p->code, at, len, 0, 0, s->data, s->limits);
}

pattern_result pattern_match(const pattern_re *p, pattern_scratch *s, const void *subject,
                             size_t len)
{
    int rc = run(p, s, subject, len);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && grow_jit_stack(s))
        rc = run(p, s, subject, len);
    if (rc >= 0) /* 0: matched, with more groups than the one ovector pair */
        return PATTERN_MATCH;
    switch (rc) {
    case PCRE2_ERROR_MATCHLIMIT:
    case PCRE2_ERROR_DEPTHLIMIT:
    case PCRE2_ERROR_HEAPLIMIT:
    case PCRE2_ERROR_JIT_STACKLIMIT:
    case PCRE2_ERROR_NOMEMORY:
        return PATTERN_LIMIT;
    default: /* no match; or a "(*UTF)" pattern and a subject that is not UTF-8 */
        return PATTERN_NO_MATCH;
    }
}
