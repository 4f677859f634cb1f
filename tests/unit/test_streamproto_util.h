/* Helpers shared by the streamproto unit tests: hex vectors, exactly-sized
 * copies (so ASan catches any read past a frame) and a builder for client
 * frames over the module's own sp_buf puts. */
#ifndef WARREN_TEST_STREAMPROTO_UTIL_H
#define WARREN_TEST_STREAMPROTO_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../streamproto/streamproto.h"

#define S(lit) ((sp_slice){(const uint8_t *)(lit), sizeof(lit) - 1})

/* Hex (spaces ignored) into a malloc'd buffer of exactly the bytes. */
static inline uint8_t *hex_bytes(const char *hex, size_t *n)
{
    uint8_t *b = malloc(strlen(hex) / 2 + 1);
    size_t k = 0;
    assert_non_null(b);
    for (const char *p = hex; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        unsigned v;
        assert_int_equal(sscanf(p, "%2x", &v), 1);
        b[k++] = (uint8_t)v;
        p += 2;
    }
    *n = k;
    return b;
}

static inline uint8_t *dup_exact(const void *p, size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    assert_non_null(b);
    if (n)
        memcpy(b, p, n);
    return b;
}

static inline void assert_slice(sp_slice s, const char *want)
{
    assert_int_equal(s.len, strlen(want));
    assert_memory_equal(s.ptr, want, s.len);
}

/* Decodes the one whole frame in frame[0..n), from an exactly-sized copy
 * kept in *keep (the command's slices point into it; the caller frees it). */
static inline sp_status decode_bytes(const uint8_t *frame, size_t n, sp_command *c,
                                     uint8_t **keep)
{
    uint8_t *b = dup_exact(frame, n);
    sp_frame f;
    size_t used;
    assert_int_equal(sp_frame_next(b, n, 0, &f, &used), SP_DONE);
    assert_int_equal(used, n);
    *keep = b;
    return sp_command_decode(&f, c);
}

/* Frames the body `body[0..n)` under key/version into out (size field
 * included); returns the frame's length. */
static inline size_t frame_of(uint8_t *out, size_t cap, uint16_t key, uint16_t version,
                              const uint8_t *body, size_t n)
{
    sp_buf b = {out, cap, 0, false};
    size_t start = sp_frame_begin(&b, key, version);
    sp_put_raw(&b, body, n);
    assert_true(sp_frame_end(&b, start));
    return b.len;
}

#endif
