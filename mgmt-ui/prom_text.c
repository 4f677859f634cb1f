/* The Prometheus text format writer (exposition format 0.0.4).
 *
 * Output is staged in `buf` and handed to the evbuffer when full, so a
 * 10,000-queue scrape costs a few thousand evbuffer_add calls, not one per
 * sample. A sample is written in three steps -- name, labels, value -- and
 * `labels` says whether the opening brace has been written, so the value
 * knows whether to close it. Numbers are formatted by hand: snprintf per
 * sample is most of the cost of a large scrape.
 */
#include <event2/buffer.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt.h"

#define STAGE 8192

struct mgmt_prom {
    struct evbuffer *out;
    size_t flushed, len;
    bool labels; /* the current sample has its '{' */
    char buf[STAGE];
};

mgmt_prom *mgmt_prom_new(struct evbuffer *out)
{
    mgmt_prom *p = calloc(1, sizeof *p);
    if (p)
        p->out = out;
    return p;
}

void mgmt_prom_flush(mgmt_prom *p)
{
    if (p->len)
        evbuffer_add(p->out, p->buf, p->len);
    p->flushed += p->len;
    p->len = 0;
}

void mgmt_prom_free(mgmt_prom *p)
{
    if (!p)
        return;
    mgmt_prom_flush(p);
    free(p);
}

size_t mgmt_prom_written(const mgmt_prom *p) { return p->flushed + p->len; }

static void put(mgmt_prom *p, const void *s, size_t n)
{
    if (p->len + n > STAGE) {
        mgmt_prom_flush(p);
        if (n > STAGE) {
            evbuffer_add(p->out, s, n);
            p->flushed += n;
            return;
        }
    }
    memcpy(p->buf + p->len, s, n);
    p->len += n;
}

static void putc_(mgmt_prom *p, char c)
{
    if (p->len == STAGE)
        mgmt_prom_flush(p);
    p->buf[p->len++] = c;
}

static void puts_(mgmt_prom *p, const char *s) { put(p, s, strlen(s)); }

/* Escapes backslash and newline, and (in label values) the double quote;
 * invalid UTF-8 becomes U+FFFD. */
static void put_escaped(mgmt_prom *p, const uint8_t *s, size_t n, bool quote)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        if (c >= 0x80) {
            size_t len = mgmt_utf8_len(s + i, n - i);
            if (len)
                put(p, s + i, len);
            else
                put(p, "\xEF\xBF\xBD", 3);
            i += len ? len : 1;
            continue;
        }
        i++;
        if (c == '\\')
            put(p, "\\\\", 2);
        else if (c == '\n')
            put(p, "\\n", 2);
        else if (c == '"' && quote)
            put(p, "\\\"", 2);
        else
            putc_(p, (char)c);
    }
}

void mgmt_prom_family(mgmt_prom *p, const char *name, const char *type, const char *help)
{
    puts_(p, "# TYPE ");
    puts_(p, name);
    putc_(p, ' ');
    puts_(p, type);
    puts_(p, "\n# HELP ");
    puts_(p, name);
    putc_(p, ' ');
    put_escaped(p, (const uint8_t *)help, strlen(help), false);
    putc_(p, '\n');
}

void mgmt_prom_begin(mgmt_prom *p, const char *name)
{
    puts_(p, name);
    p->labels = false;
}

void mgmt_prom_label(mgmt_prom *p, const char *key, amqp_bytes value)
{
    putc_(p, p->labels ? ',' : '{');
    p->labels = true;
    puts_(p, key);
    put(p, "=\"", 2);
    put_escaped(p, value.ptr, value.len, true);
    putc_(p, '"');
}

void mgmt_prom_label_str(mgmt_prom *p, const char *key, const char *value)
{
    mgmt_prom_label(p, key, AMQP_CSTR(value));
}

static void end_labels(mgmt_prom *p)
{
    if (p->labels)
        putc_(p, '}');
    p->labels = false;
    putc_(p, ' ');
}

void mgmt_prom_uint(mgmt_prom *p, uint64_t v)
{
    char digits[24];
    size_t n = sizeof digits;
    do {
        digits[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    end_labels(p);
    put(p, digits + n, sizeof digits - n);
    putc_(p, '\n');
}

void mgmt_prom_double(mgmt_prom *p, double v)
{
    char b[40];
    if (isnan(v))
        strcpy(b, "NaN");
    else if (isinf(v))
        strcpy(b, v > 0 ? "+Inf" : "-Inf");
    else if (snprintf(b, sizeof b, "%.15g", v), strtod(b, NULL) != v)
        snprintf(b, sizeof b, "%.17g", v); /* the shortest that reads back exactly */
    end_labels(p);
    puts_(p, b);
    putc_(p, '\n');
}
