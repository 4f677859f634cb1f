/* HTTP/1.x response parsing, pure (no I/O) so the unit tests can feed it
 * byte strings. The parser runs over the whole input received so far and
 * either finds a complete response or says it needs more; the client only
 * calls it when the input may be complete (see http.c), so reparsing stays
 * cheap. Every step checks `n <= len - off` before reading n bytes. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "wctl_internal.h"

typedef struct head {
    int status;
    size_t body_off;        /* offset of the first body byte */
    long long content_len;  /* -1: none */
    bool chunked;
    const char *location;   /* into raw; not NUL-terminated */
    size_t location_len;
} head;

/* Finds the end of the line starting at off: returns the offset of the next
 * line and sets *line_len (without CR LF), or 0 if no line end yet. */
static size_t line_end(const char *raw, size_t len, size_t off, size_t *line_len)
{
    const char *nl = memchr(raw + off, '\n', len - off);
    if (!nl)
        return 0;
    size_t n = (size_t)(nl - (raw + off));
    *line_len = (n && raw[off + n - 1] == '\r') ? n - 1 : n;
    return off + n + 1;
}

static bool parse_status_line(const char *s, size_t n, int *status)
{
    if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)s[7]) || s[8] != ' ')
        return false;
    for (int i = 9; i < 12; i++)
        if (!isdigit((unsigned char)s[i]))
            return false;
    if (n > 12 && s[12] != ' ')
        return false;
    *status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
    return *status >= 100;
}

static bool header_is(const char *s, size_t n, const char *name, const char **value, size_t *vlen)
{
    size_t k = strlen(name);
    if (n <= k || s[k] != ':' || strncasecmp(s, name, k) != 0)
        return false;
    const char *v = s + k + 1, *end = s + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *value = v;
    *vlen = (size_t)(end - v);
    return true;
}

static bool parse_length(const char *v, size_t n, long long *out)
{
    if (n == 0 || n > 18)
        return false;
    long long x = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)v[i]))
            return false;
        x = x * 10 + (v[i] - '0');
    }
    *out = x;
    return true;
}

/* "chunked" must be the last transfer coding; anything else we cannot
 * decode is an error rather than a misread body. */
static bool parse_transfer_encoding(const char *v, size_t n, bool *chunked)
{
    const char *last = v;
    for (size_t i = 0; i < n; i++)
        if (v[i] == ',')
            last = v + i + 1;
    while (last < v + n && *last == ' ')
        last++;
    size_t k = (size_t)(v + n - last);
    if (k == 7 && strncasecmp(last, "chunked", 7) == 0) {
        *chunked = true;
        return true;
    }
    return k == 8 && strncasecmp(last, "identity", 8) == 0;
}

static bool parse_header(const char *s, size_t n, head *h)
{
    const char *v;
    size_t vlen;
    if (header_is(s, n, "content-length", &v, &vlen)) {
        long long cl;
        if (!parse_length(v, vlen, &cl) || (h->content_len >= 0 && h->content_len != cl))
            return false;
        h->content_len = cl;
    } else if (header_is(s, n, "transfer-encoding", &v, &vlen)) {
        return parse_transfer_encoding(v, vlen, &h->chunked);
    } else if (header_is(s, n, "location", &v, &vlen)) {
        h->location = v;
        h->location_len = vlen;
    }
    return true;
}

/* Parses the status line and headers of the response starting at off. */
static wctl_parse_status parse_head(const char *raw, size_t len, size_t off, head *h)
{
    memset(h, 0, sizeof *h);
    h->content_len = -1;
    size_t n, next = line_end(raw, len, off, &n);
    if (!next)
        return len - off > 8192 ? WCTL_PARSE_ERROR : WCTL_PARSE_MORE;
    if (!parse_status_line(raw + off, n, &h->status))
        return WCTL_PARSE_ERROR;
    for (;;) {
        off = next;
        next = line_end(raw, len, off, &n);
        if (!next)
            return WCTL_PARSE_MORE;
        if (n == 0)
            break;
        if (!parse_header(raw + off, n, h))
            return WCTL_PARSE_ERROR;
    }
    h->body_off = next;
    return WCTL_PARSE_DONE;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The chunk-size at the start of a chunk line (extensions after ';'). */
static bool parse_chunk_size(const char *s, size_t n, size_t *size)
{
    size_t x = 0, i = 0;
    for (; i < n && hex_digit(s[i]) >= 0; i++) {
        if (x > ((size_t)-1 >> 4))
            return false;
        x = x * 16 + (size_t)hex_digit(s[i]);
    }
    if (i == 0 || (i < n && s[i] != ';' && s[i] != ' ' && s[i] != '\t'))
        return false;
    *size = x;
    return true;
}

/* Decodes a chunked body at off into body; trailers are skipped. */
static wctl_parse_status parse_chunked(const char *raw, size_t len, size_t off, wctl_buf *body)
{
    for (;;) {
        size_t n, size, next = line_end(raw, len, off, &n);
        if (!next)
            return WCTL_PARSE_MORE;
        if (!parse_chunk_size(raw + off, n, &size))
            return WCTL_PARSE_ERROR;
        off = next;
        if (size == 0)
            break;
        if (size > len - off)
            return WCTL_PARSE_MORE;
        wctl_buf_append(body, raw + off, size);
        off += size;
        next = line_end(raw, len, off, &n);
        if (!next)
            return WCTL_PARSE_MORE;
        if (n != 0)
            return WCTL_PARSE_ERROR; /* chunk data longer than its size */
        off = next;
    }
    for (;;) { /* trailer lines up to the empty one */
        size_t n, next = line_end(raw, len, off, &n);
        if (!next)
            return WCTL_PARSE_MORE;
        off = next;
        if (n == 0)
            return WCTL_PARSE_DONE;
    }
}

static wctl_parse_status parse_body(const char *raw, size_t len, bool at_eof, const head *h,
                                    wctl_buf *body)
{
    size_t off = h->body_off;
    if (h->status == 204 || h->status == 304)
        return WCTL_PARSE_DONE;
    if (h->chunked)
        return parse_chunked(raw, len, off, body);
    if (h->content_len >= 0) {
        if ((unsigned long long)h->content_len > len - off)
            return WCTL_PARSE_MORE;
        wctl_buf_append(body, raw + off, (size_t)h->content_len);
        return WCTL_PARSE_DONE;
    }
    if (!at_eof)
        return WCTL_PARSE_MORE;
    wctl_buf_append(body, raw + off, len - off);
    return WCTL_PARSE_DONE;
}

bool wctl_http_may_be_complete(const char *raw, size_t len)
{
    head h;
    size_t off = 0;
    for (;;) {
        if (parse_head(raw, len, off, &h) != WCTL_PARSE_DONE)
            return false;
        if (h.status >= 200)
            break;
        off = h.body_off;
    }
    if (h.status == 204 || h.status == 304)
        return true;
    if (h.chunked) /* the last chunk and the trailers end with an empty line */
        return len - h.body_off >= 3 && raw[len - 1] == '\n' &&
               (raw[len - 2] == '\n' || (raw[len - 2] == '\r' && raw[len - 3] == '\n'));
    return h.content_len >= 0 && (unsigned long long)h.content_len <= len - h.body_off;
}

wctl_parse_status wctl_http_parse(const char *raw, size_t len, bool at_eof, wctl_response *out)
{
    memset(out, 0, sizeof *out);
    size_t off = 0;
    head h;
    for (;;) {
        wctl_parse_status st = parse_head(raw, len, off, &h);
        if (st != WCTL_PARSE_DONE)
            return st == WCTL_PARSE_MORE && at_eof ? WCTL_PARSE_ERROR : st;
        if (h.status >= 200)
            break;
        off = h.body_off; /* 100 Continue and friends carry no body */
    }
    wctl_buf body = {0};
    wctl_parse_status st = parse_body(raw, len, at_eof, &h, &body);
    if (st != WCTL_PARSE_DONE) {
        wctl_buf_free(&body);
        return st == WCTL_PARSE_MORE && at_eof ? WCTL_PARSE_ERROR : st;
    }
    out->status = h.status;
    out->body_len = body.len;
    out->body = body.data ? body.data : wctl_strndup("", 0);
    if (h.location)
        out->location = wctl_strndup(h.location, h.location_len);
    return WCTL_PARSE_DONE;
}

void wctl_response_free(wctl_response *r)
{
    free(r->body);
    free(r->location);
    memset(r, 0, sizeof *r);
}
