/* Policy and permission patterns and the list filter (pattern/): PCRE2
 * under step, depth and heap limits. Any bytes compile or are refused with
 * a reason; matching ends within the limits (libFuzzer's -timeout catches
 * a pattern that does not); and JIT and the interpreter agree wherever
 * neither gave up at a limit.
 *
 * Input: flags byte, pattern length (two bytes), the pattern, then
 * subjects, each a length byte and its bytes. */
#include "../../pattern/pattern.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static pattern_scratch *jit_s, *int_s;
    if (!jit_s) {
        jit_s = pattern_scratch_new();
        int_s = pattern_scratch_new();
        FUZZ_CHECK(jit_s && int_s);
    }
    fuzz_in in = {data, size};
    unsigned flags = fuzz_byte(&in) & PATTERN_CASELESS;
    size_t plen = (size_t)(fuzz_byte(&in) << 8 | fuzz_byte(&in)), got;
    const char *src = (const char *)fuzz_take(&in, plen, &got);
    pattern_error e;
    pattern_re *re = pattern_compile(src, got, flags, &e);
    if (!re) {
        FUZZ_CHECK(e.text[0] && memchr(e.text, 0, sizeof e.text));
        FUZZ_CHECK(e.code != PATTERN_TOO_LONG || got > PATTERN_MAX_LEN);
        return 0;
    }
    FUZZ_CHECK(got <= PATTERN_MAX_LEN);
    pattern_re *interp = pattern_compile(src, got, flags | PATTERN_NO_JIT, &e);
    FUZZ_CHECK(interp && !pattern_jitted(interp));
    for (int i = 0; i < 16 && in.len; i++) {
        const uint8_t *subject = fuzz_take(&in, fuzz_byte(&in), &got);
        pattern_result a = pattern_match(re, jit_s, got ? subject : NULL, got);
        pattern_result b = pattern_match(interp, int_s, got ? subject : NULL, got);
        FUZZ_CHECK(a == PATTERN_MATCH || a == PATTERN_NO_MATCH || a == PATTERN_LIMIT);
        FUZZ_CHECK(b == PATTERN_MATCH || b == PATTERN_NO_MATCH || b == PATTERN_LIMIT);
        FUZZ_CHECK(a == PATTERN_LIMIT || b == PATTERN_LIMIT || a == b);
    }
    pattern_free(interp);
    pattern_free(re);
    return 0;
}
