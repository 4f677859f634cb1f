/* Request heads (RFC 9112), parsed strictly where laxness is a risk.
 *
 * The head arrives as one copied block; lines are cut in place and every
 * name and value points into it. Refused: a malformed request line, a
 * version other than HTTP/1.0 and 1.1 (505), a header name with spaces
 * before its colon or a folded line (both are request-smuggling vectors),
 * control bytes in values, Content-Length values that are not plain digits
 * or disagree, a transfer coding other than chunked (501), and chunked
 * together with Content-Length (400), as a proxy in front of us could read
 * such a request differently.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_int.h"

static const struct {
    const char *name;
    http_method m;
} methods[] = {
    {"GET", HTTP_GET},       {"HEAD", HTTP_HEAD},       {"POST", HTTP_POST},
    {"PUT", HTTP_PUT},       {"DELETE", HTTP_DELETE},   {"OPTIONS", HTTP_OPTIONS},
    {"PATCH", HTTP_PATCH},
};

/* RFC 9110's tchar. */
static bool is_tchar(unsigned char c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The next line (without CR LF), NUL-terminated in place; NULL at the end. */
static char *next_line(char **p, char *end)
{
    if (*p >= end)
        return NULL;
    char *line = *p;
    char *nl = memchr(line, '\n', (size_t)(end - line));
    char *stop = nl ? nl : end;
    *p = nl ? nl + 1 : end;
    if (stop > line && stop[-1] == '\r')
        stop--;
    *stop = 0;
    return line;
}

static int parse_request_line(char *line, http_head *h, const char **why)
{
    char *sp1 = strchr(line, ' ');
    char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp1 || !sp2 || strchr(sp2 + 1, ' ')) {
        *why = "malformed request line";
        return 400;
    }
    *sp1 = *sp2 = 0;
    h->method_name = line;
    h->target = sp1 + 1;
    for (const char *c = line; *c; c++)
        if (!is_tchar((unsigned char)*c)) {
            *why = "malformed method";
            return 400;
        }
    h->method = HTTP_OTHER;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(line, methods[i].name) == 0)
            h->method = methods[i].m;
    const char *v = sp2 + 1;
    if (strncmp(v, "HTTP/1.", 7) != 0 || (v[7] != '0' && v[7] != '1') || v[8]) {
        *why = "unsupported HTTP version";
        return strncmp(v, "HTTP/", 5) == 0 ? 505 : 400;
    }
    h->minor_version = v[7] - '0';
    if (!*h->target || (h->target[0] != '/' && strcmp(h->target, "*") != 0)) {
        *why = "the target must be a path";
        return 400;
    }
    for (const unsigned char *c = (const unsigned char *)h->target; *c; c++)
        if (*c <= 0x20 || *c == 0x7f) {
            *why = "control byte in the target";
            return 400;
        }
    return 0;
}

/* Trims optional whitespace around a value, in place. */
static char *trim(char *v)
{
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        v[--n] = 0;
    return v;
}

static int parse_header(char *line, http_head *h, const char **why)
{
    if (*line == ' ' || *line == '\t') {
        *why = "folded header line";
        return 400;
    }
    char *colon = strchr(line, ':');
    if (!colon || colon == line) {
        *why = "malformed header line";
        return 400;
    }
    *colon = 0;
    for (const char *c = line; *c; c++)
        if (!is_tchar((unsigned char)*c)) {
            *why = "malformed header name";
            return 400;
        }
    char *value = trim(colon + 1);
    for (const unsigned char *c = (const unsigned char *)value; *c; c++)
        if ((*c < 0x20 && *c != '\t') || *c == 0x7f) {
            *why = "control byte in a header value";
            return 400;
        }
    if (h->nheaders == HTTP_MAX_HEADERS) {
        *why = "too many header lines";
        return 431;
    }
    h->headers[h->nheaders++] = (http_header){line, value};
    return 0;
}

/* Whether comma-separated `list` holds `token` (case-insensitive). */
static bool has_token(const char *list, const char *token)
{
    size_t n = strlen(token);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        size_t len = strcspn(p, ",");
        size_t t = len;
        while (t && (p[t - 1] == ' ' || p[t - 1] == '\t'))
            t--;
        if (t == n && strncasecmp(p, token, n) == 0)
            return true;
        p += len;
    }
    return false;
}

/* Content-Length, Transfer-Encoding, Connection and Expect. */
static int parse_framing(http_head *h, const char **why)
{
    bool chunked = false, have_length = false;
    h->content_length = 0;
    h->keep_alive = h->minor_version == 1;
    for (int i = 0; i < h->nheaders; i++) {
        const char *n = h->headers[i].name, *v = h->headers[i].value;
        if (strcasecmp(n, "Content-Length") == 0) {
            size_t len = strlen(v);
            if (!len || len > 18 || strspn(v, "0123456789") != len) {
                *why = "bad Content-Length";
                return 400;
            }
            int64_t cl = strtoll(v, NULL, 10);
            if (have_length && cl != h->content_length) {
                *why = "conflicting Content-Length";
                return 400;
            }
            have_length = true;
            h->content_length = cl;
        } else if (strcasecmp(n, "Transfer-Encoding") == 0) {
            if (strcasecmp(v, "chunked") != 0 || chunked) {
                *why = "unsupported transfer coding";
                return 501;
            }
            chunked = true;
        } else if (strcasecmp(n, "Connection") == 0) {
            if (has_token(v, "close"))
                h->keep_alive = false;
            else if (has_token(v, "keep-alive"))
                h->keep_alive = true;
        } else if (strcasecmp(n, "Expect") == 0) {
            if (strcasecmp(v, "100-continue") != 0) {
                *why = "unsupported expectation";
                return 417;
            }
            h->expect_continue = h->minor_version == 1;
        }
    }
    if (chunked && (have_length || h->minor_version == 0)) {
        *why = "chunked with Content-Length, or on HTTP/1.0";
        return 400;
    }
    if (chunked)
        h->content_length = -1;
    return 0;
}

int http_parse_head(char *buf, size_t len, http_head *h, const char **why)
{
    char *p = buf, *end = buf + len;
    memset(h, 0, sizeof *h);
    buf[len] = 0;
    while (p < end && (*p == '\r' || *p == '\n')) /* blank lines before it are allowed */
        p++;
    char *line = next_line(&p, end);
    if (!line) {
        *why = "empty request";
        return 400;
    }
    int rc = parse_request_line(line, h, why);
    while (!rc && (line = next_line(&p, end)) && *line)
        rc = parse_header(line, h, why);
    if (rc)
        return rc;
    char *q = strchr((char *)h->target, '?');
    if (q) {
        /* path and query as separate strings, the target kept whole */
        size_t plen = (size_t)(q - h->target);
        char *copy = end + 1; /* room reserved by the caller: see server.c */
        memcpy(copy, h->target, plen);
        copy[plen] = 0;
        h->path = copy;
        h->query = q + 1;
    } else {
        h->path = h->target;
    }
    return parse_framing(h, why);
}
