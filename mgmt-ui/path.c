/* Request paths: percent-decoding into segments, matching them against the
 * route table's patterns, and RabbitMQ's binding properties keys.
 *
 * Segments are split on the raw '/' before decoding, so "%2F" (the default
 * vhost) is one segment "/" and a queue named "a/b" arrives as "a%2Fb".
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "mgmt.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int mgmt_path_decode(const char *path, char *buf, size_t cap, amqp_bytes *segs, int max)
{
    size_t used = 0;
    int n = 0;
    const char *p = path;
    if (*p == '/')
        p++;
    while (*p) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (n == max)
            return -1;
        size_t start = used;
        for (size_t i = 0; i < len; i++) {
            char c = p[i];
            if (c == '%') {
                if (len - i < 3 || hexval(p[i + 1]) < 0 || hexval(p[i + 2]) < 0)
                    return -1;
                c = (char)(hexval(p[i + 1]) << 4 | hexval(p[i + 2]));
                i += 2;
            }
            if (used == cap)
                return -1;
            buf[used++] = c;
        }
        segs[n++] = (amqp_bytes){(const uint8_t *)buf + start, (uint32_t)(used - start)};
        if (!end)
            break;
        p = end + 1;
    }
    return n;
}

bool mgmt_path_match(const char *pattern, const amqp_bytes *segs, int n, amqp_bytes *caps,
                     int *ncaps)
{
    int i = 0, c = 0;
    const char *p = pattern;
    if (*p == '/')
        p++;
    while (*p) {
        size_t len = strcspn(p, "/");
        if (i == n)
            return false;
        if (len == 2 && p[0] == '{' && p[1] == '}')
            caps[c++] = segs[i];
        else if (segs[i].len != len || memcmp(segs[i].ptr, p, len) != 0)
            return false;
        i++;
        p += len + (p[len] == '/');
    }
    *ncaps = c;
    return i == n;
}

/* mochiweb's quote_plus: letters, digits and "-._~" stay, space is '+',
 * everything else %XX; then RabbitMQ writes '~' as %7E. */
static size_t quote_binding(amqp_bytes s, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (uint32_t i = 0; i < s.len && n + 4 < cap; i++) {
        uint8_t c = s.ptr[i];
        if (isalnum(c) || c == '-' || c == '.' || c == '_') {
            out[n++] = (char)c;
        } else if (c == ' ') {
            out[n++] = '+';
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = 0;
    return n;
}

/* RabbitMQ hashes the Erlang term of the arguments (erlang:phash2), which
 * only an Erlang VM reproduces; Warren hashes their encoded bytes (FNV-1a)
 * the same way into 4 bytes of base64url. Clients take the key from the
 * listing, so only its shape matters. */
void mgmt_props_key(amqp_bytes key, amqp_bytes args, char *out, size_t cap)
{
    size_t n = quote_binding(key, out, cap);
    if (args.len == 0) {
        if (n == 0 && cap > 1)
            snprintf(out, cap, "~");
        return;
    }
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < args.len; i++)
        h = (h ^ args.ptr[i]) * 16777619u;
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t b[4] = {(uint8_t)(h >> 24), (uint8_t)(h >> 16), (uint8_t)(h >> 8), (uint8_t)h};
    char enc[7] = {b64[b[0] >> 2],
                   b64[(b[0] & 3) << 4 | b[1] >> 4],
                   b64[(b[1] & 15) << 2 | b[2] >> 6],
                   b64[b[2] & 63],
                   b64[b[3] >> 2],
                   b64[(b[3] & 3) << 4],
                   0};
    snprintf(out + n, cap > n ? cap - n : 0, "~%s", enc);
}
