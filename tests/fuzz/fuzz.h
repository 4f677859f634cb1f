/* Shared by the libFuzzer harnesses in tests/fuzz/ (one fuzz_<name>.c per
 * harness; see README.md there). A harness checks what a module promises
 * beyond "no crash": FUZZ_CHECK aborts, so libFuzzer keeps the input. */
#ifndef WARREN_FUZZ_H
#define WARREN_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond)                                                            \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                \
        }                                                                           \
    } while (0)

/* Reads the input a byte or a slice at a time; past the end it yields 0s
 * and empty slices, so harnesses need no length checks of their own. */
typedef struct fuzz_in {
    const uint8_t *p;
    size_t len;
} fuzz_in;

static inline uint8_t fuzz_byte(fuzz_in *in)
{
    if (!in->len)
        return 0;
    in->len--;
    return *in->p++;
}

/* Up to n bytes (fewer at the end). */
static inline const uint8_t *fuzz_take(fuzz_in *in, size_t n, size_t *got)
{
    const uint8_t *p = in->p;
    *got = n < in->len ? n : in->len;
    in->p += *got;
    in->len -= *got;
    return p;
}

/* The input up to the next `sep` byte (or the end) as a malloc'd
 * NUL-terminated string; the separator is consumed. */
static inline char *fuzz_str(fuzz_in *in, uint8_t sep)
{
    const uint8_t *end = memchr(in->p, sep, in->len);
    size_t n = end ? (size_t)(end - in->p) : in->len;
    char *s = malloc(n + 1);
    if (!s)
        abort();
    memcpy(s, in->p, n);
    s[n] = 0;
    in->p += n + (end != NULL);
    in->len -= n + (end != NULL);
    return s;
}

#endif
