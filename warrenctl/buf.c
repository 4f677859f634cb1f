/* wctl_buf: a growable NUL-terminated byte string. Capacity doubles, so n
 * appends cost O(total length). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wctl_internal.h"

static void reserve(wctl_buf *b, size_t extra)
{
    if (b->cap - b->len > extra)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len <= extra)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        fputs("warrenctl: out of memory\n", stderr);
        abort();
    }
    b->data = p;
    b->cap = cap;
}

void wctl_buf_append(wctl_buf *b, const char *s, size_t n)
{
    reserve(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void wctl_buf_puts(wctl_buf *b, const char *s)
{
    wctl_buf_append(b, s, strlen(s));
}

void wctl_buf_printf(wctl_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

const char *wctl_buf_str(const wctl_buf *b)
{
    return b->data ? b->data : "";
}

void wctl_buf_free(wctl_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *wctl_strndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) {
        fputs("warrenctl: out of memory\n", stderr);
        abort();
    }
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}
