/* Helpers shared by the management unit tests. Header-only, so each
 * test_mgmt_*.c stays one translation unit. */
#ifndef WARREN_TEST_MGMT_UTIL_H
#define WARREN_TEST_MGMT_UTIL_H

#include <event2/buffer.h>
#include <stdlib.h>

#include "../../mgmt-ui/mgmt.h"

typedef void (*mgmt_test_write_fn)(mgmt_json *w, const void *arg);

/* Runs fn on a fresh writer and returns what it wrote, NUL-terminated
 * (the caller frees it). */
static inline char *mgmt_test_render(mgmt_test_write_fn fn, const void *arg)
{
    struct evbuffer *out = evbuffer_new();
    mgmt_json *w = mgmt_json_new(out);
    fn(w, arg);
    mgmt_json_free(w);
    size_t n = evbuffer_get_length(out);
    char *s = malloc(n + 1);
    evbuffer_remove(out, s, n);
    s[n] = 0;
    evbuffer_free(out);
    return s;
}

#endif
