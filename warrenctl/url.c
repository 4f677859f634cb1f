/* URLs for --url, percent-encoding of path segments (a vhost "/" travels as
 * %2F, as the management API expects), and base64 for basic auth. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "warrenctl.h"

static bool parse_port(const char *s, size_t n, int *out)
{
    if (n == 0 || n > 5)
        return false;
    int port = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return false;
        port = port * 10 + (s[i] - '0');
    }
    if (port < 1 || port > 65535)
        return false;
    *out = port;
    return true;
}

/* Splits "host[:port]" or "[v6]:port" in authority[0..n) into out. */
static bool parse_authority(const char *a, size_t n, wctl_url *out)
{
    const char *host = a, *port = NULL;
    size_t host_len = n;
    if (n && a[0] == '[') {
        const char *close = memchr(a, ']', n);
        if (!close)
            return false;
        host = a + 1;
        host_len = (size_t)(close - a) - 1;
        if (close + 1 < a + n) {
            if (close[1] != ':')
                return false;
            port = close + 2;
        }
    } else {
        const char *colon = memchr(a, ':', n);
        if (colon) {
            host_len = (size_t)(colon - a);
            port = colon + 1;
        }
    }
    if (host_len == 0 || host_len >= sizeof out->host)
        return false;
    memcpy(out->host, host, host_len);
    out->host[host_len] = '\0';
    out->port = 80;
    return !port || parse_port(port, (size_t)(a + n - port), &out->port);
}

bool wctl_url_parse(const char *text, wctl_url *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (strncmp(text, "https://", 8) == 0) {
        snprintf(err, errlen, "%s: https is not supported; use http:// (or the local socket)", text);
        return false;
    }
    if (strncmp(text, "http://", 7) != 0) {
        snprintf(err, errlen, "%s: the URL must start with http://", text);
        return false;
    }
    const char *a = text + 7;
    size_t n = strcspn(a, "/?#");
    if (!parse_authority(a, n, out)) {
        snprintf(err, errlen, "%s: bad host or port", text);
        return false;
    }
    const char *path = a + n;
    size_t plen = strcspn(path, "?#");
    while (plen && path[plen - 1] == '/')
        plen--;
    if (plen >= sizeof out->prefix) {
        snprintf(err, errlen, "%s: path too long", text);
        return false;
    }
    memcpy(out->prefix, path, plen);
    out->prefix[plen] = '\0';
    return true;
}

void wctl_url_encode_segment(wctl_buf *out, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            wctl_buf_append(out, (const char *)p, 1);
        } else {
            char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            wctl_buf_append(out, e, 3);
        }
    }
}

void wctl_base64(wctl_buf *out, const unsigned char *d, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)d[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)d[i + 1] << 8;
        if (i + 2 < n)
            v |= d[i + 2];
        char q[4] = {tab[v >> 18], tab[(v >> 12) & 63], i + 1 < n ? tab[(v >> 6) & 63] : '=',
                     i + 2 < n ? tab[v & 63] : '='};
        wctl_buf_append(out, q, 4);
    }
}
