/* AMQP URIs as RabbitMQ's amqp_uri reads them (client.h has the rules).
 *
 * The URI is cut into scheme, authority (userinfo@host:port), path and
 * query without copying, then each part is checked and percent-decoded
 * into the fixed fields of client_uri; anything longer than a field is
 * refused rather than cut.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client.h"

typedef struct span {
    const char *p;
    size_t n;
} span;

static bool fail(char *err, size_t errlen, const char *fmt, span s)
{
    snprintf(err, errlen, fmt, (int)s.n, s.p);
    return false;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decodes `s` into out (cap bytes with the NUL). */
static bool unescape(span s, char *out, size_t cap, char *err, size_t errlen)
{
    size_t o = 0;
    for (size_t i = 0; i < s.n; i++) {
        char c = s.p[i];
        if (c == '%') {
            if (s.n - i < 3)
                return fail(err, errlen, "{unterminated_entity,\"%.*s\"}",
                            (span){s.p + i, s.n - i});
            int hi = hexval(s.p[i + 1]), lo = hexval(s.p[i + 2]);
            if (hi < 0 || lo < 0)
                return fail(err, errlen, "{invalid_entitiy,\"%.*s\"}", (span){s.p + i, 3});
            c = (char)(hi << 4 | lo);
            i += 2;
        }
        if (o + 1 >= cap)
            return fail(err, errlen, "{too_long,\"%.*s\"}", s);
        out[o++] = c;
    }
    out[o] = '\0';
    return true;
}

static bool integer(span v, int64_t *out)
{
    char buf[24];
    if (v.n == 0 || v.n >= sizeof buf)
        return false;
    memcpy(buf, v.p, v.n);
    buf[v.n] = '\0';
    char *end;
    errno = 0;
    long long n = strtoll(buf, &end, 10);
    if (*end || errno || isspace((unsigned char)buf[0]))
        return false;
    *out = n;
    return true;
}

static bool query_pair(client_uri *u, span k, span v, char *err, size_t errlen)
{
    static const char *const ints[] = {"heartbeat", "connection_timeout", "channel_max",
                                       "frame_max"};
    int64_t *const dest[] = {&u->heartbeat, &u->connection_timeout, &u->channel_max,
                             &u->frame_max};
    for (size_t i = 0; i < 4; i++) {
        if (k.n != strlen(ints[i]) || memcmp(k.p, ints[i], k.n) != 0)
            continue;
        if (!integer(v, dest[i])) {
            snprintf(err, errlen, "{invalid_amqp_params_parameter,%s,\"%.*s\",{not_an_integer,\"%.*s\"}}",
                     ints[i], (int)v.n, v.p, (int)v.n, v.p);
            return false;
        }
    }
    return true;
}

static bool parse_query(client_uri *u, span q, char *err, size_t errlen)
{
    while (q.n) {
        const char *amp = memchr(q.p, '&', q.n);
        span pair = {q.p, amp ? (size_t)(amp - q.p) : q.n};
        const char *eq = memchr(pair.p, '=', pair.n);
        /* a key without '=' is proplists' short form: ignored, as RabbitMQ does */
        if (eq && !query_pair(u, (span){pair.p, (size_t)(eq - pair.p)},
                              (span){eq + 1, pair.n - (size_t)(eq - pair.p) - 1}, err, errlen))
            return false;
        q.p += pair.n + (amp ? 1 : 0);
        q.n -= pair.n + (amp ? 1 : 0);
    }
    return true;
}

static bool parse_userinfo(client_uri *u, span ui, char *err, size_t errlen)
{
    const char *colon = memchr(ui.p, ':', ui.n);
    span user = {ui.p, colon ? (size_t)(colon - ui.p) : ui.n};
    u->user_given = true;
    if (!unescape(user, u->user, sizeof u->user, err, errlen))
        return false;
    if (!colon) {
        u->password[0] = '\0';
        return true;
    }
    span pass = {colon + 1, ui.n - user.n - 1};
    const char *more = memchr(pass.p, ':', pass.n); /* [U, P | _]: the rest is dropped */
    if (more)
        pass.n = (size_t)(more - pass.p);
    return unescape(pass, u->password, sizeof u->password, err, errlen);
}

/* host[:port] or [v6]:port; an empty host and no port is `local`. */
static bool parse_hostport(client_uri *u, span hp, char *err, size_t errlen)
{
    span host = hp, port = {NULL, 0};
    if (hp.n && hp.p[0] == '[') {
        const char *close = memchr(hp.p, ']', hp.n);
        if (!close)
            return fail(err, errlen, "{unable_to_parse_uri,\"%.*s\"}", hp);
        host = (span){hp.p + 1, (size_t)(close - hp.p) - 1};
        span rest = {close + 1, hp.n - (size_t)(close - hp.p) - 1};
        if (rest.n && rest.p[0] != ':')
            return fail(err, errlen, "{unable_to_parse_uri,\"%.*s\"}", hp);
        if (rest.n)
            port = (span){rest.p + 1, rest.n - 1};
    } else {
        const char *colon = memchr(hp.p, ':', hp.n);
        if (colon) {
            host.n = (size_t)(colon - hp.p);
            port = (span){colon + 1, hp.n - host.n - 1};
        }
    }
    int64_t n = 0;
    if (port.n) {
        for (size_t i = 0; i < port.n; i++)
            if (!isdigit((unsigned char)port.p[i]))
                return fail(err, errlen, "{unable_to_parse_uri,\"%.*s\"}", hp);
        if (!integer(port, &n) || n < 1 || n > 65535)
            return fail(err, errlen, "{port_out_of_range,%.*s}", port);
    }
    if (!unescape(host, u->host, sizeof u->host, err, errlen))
        return false;
    if (!host.n && port.n) {
        snprintf(err, errlen, "port_requires_host");
        return false;
    }
    u->local = !host.n;
    u->port = port.n ? (uint16_t)n : u->local ? 0 : u->tls ? CLIENT_TLS_PORT : CLIENT_PORT;
    return true;
}

bool client_uri_parse(const char *s, client_uri *u, char *err, size_t errlen)
{
    memset(u, 0, sizeof *u);
    u->heartbeat = u->connection_timeout = u->channel_max = u->frame_max = -1;
    const char *sep = strstr(s, "://");
    if (!sep)
        return fail(err, errlen, "{unable_to_parse_uri,\"%.*s\"}", (span){s, strlen(s)});
    span scheme = {s, (size_t)(sep - s)};
    if (scheme.n == 5 && strncasecmp(s, "amqps", 5) == 0)
        u->tls = true;
    else if (scheme.n != 4 || strncasecmp(s, "amqp", 4) != 0)
        return fail(err, errlen, "{unexpected_uri_scheme,\"%.*s\"}", scheme);
    const char *a = sep + 3;
    size_t alen = strcspn(a, "/?#");
    span auth = {a, alen};
    const char *at = NULL;
    for (size_t i = 0; i < alen; i++)
        if (a[i] == '@')
            at = a + i;
    if (at && !parse_userinfo(u, (span){a, (size_t)(at - a)}, err, errlen))
        return false;
    if (at)
        auth = (span){at + 1, alen - (size_t)(at - a) - 1};
    if (!parse_hostport(u, auth, err, errlen))
        return false;
    if (!u->user_given && !u->local) {
        strcpy(u->user, "guest");
        strcpy(u->password, "guest");
    }
    const char *p = a + alen;
    span path = {p, strcspn(p, "?#")};
    if (!path.n) {
        strcpy(u->vhost, "/");
    } else {
        span vh = {path.p + 1, path.n - 1};
        if (memchr(vh.p, '/', vh.n))
            return fail(err, errlen, "{invalid_vhost,\"%.*s\"}", vh);
        if (!unescape(vh, u->vhost, sizeof u->vhost, err, errlen))
            return false;
    }
    p += path.n;
    if (*p == '?')
        return parse_query(u, (span){p + 1, strcspn(p + 1, "#")}, err, errlen);
    return true;
}

void client_uri_redact(const char *s, char *out, size_t cap)
{
    if (!cap)
        return;
    const char *sep = strstr(s, "://");
    if (!sep) {
        snprintf(out, cap, "%s", s);
        return;
    }
    const char *a = sep + 3;
    size_t alen = strcspn(a, "/?#");
    const char *host = a;
    for (size_t i = 0; i < alen; i++)
        if (a[i] == '@')
            host = a + i + 1;
    size_t plen = strcspn(a + alen, "?#");
    snprintf(out, cap, "%.*s%.*s%.*s", (int)(a - s), s, (int)(a + alen - host), host, (int)plen,
             a + alen);
}
