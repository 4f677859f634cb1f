/* The HTTP/1.1 response parser, for replies of etcd's JSON gateway.
 *
 * States: HEAD -> (LEN | CHUNK_SIZE -> CHUNK -> CHUNK_END -> ... ->
 * TRAILER) -> DONE. Each step checks what it reads against a bound before
 * it buffers: the head against max_head (the "\r\n\r\n" must come within
 * it), a chunk-size line against a few bytes, each newline-delimited
 * message against max_message. Chunk data is never buffered whole: it is
 * cut into messages as it arrives, so a huge chunk costs at most one
 * message's bytes. Only Content-Length or chunked bodies are accepted
 * (etcd sends nothing else; a body ended by close would be ambiguous).
 */
#include <ctype.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "etcd_int.h"

#define MAX_SIZE_LINE 64 /* hex size, extensions */

int resp_init(resp_parser *p, size_t max_head, size_t max_message)
{
    memset(p, 0, sizeof(*p));
    p->max_head = max_head;
    p->max_message = max_message;
    p->msg = evbuffer_new();
    return p->msg ? 0 : -1;
}

void resp_reset(resp_parser *p)
{
    evbuffer_drain(p->msg, evbuffer_get_length(p->msg));
    p->state = RESP_HEAD;
    p->status = 0;
    p->chunked = p->close = false;
    p->left = 0;
    p->error = NULL;
}

void resp_fini(resp_parser *p)
{
    if (p->msg)
        evbuffer_free(p->msg);
    p->msg = NULL;
}

static resp_rc fail(resp_parser *p, const char *why)
{
    p->error = why;
    return RESP_ERROR;
}

/* Digits only, no sign, no overflow. */
static bool parse_u64(const char *s, size_t n, int base, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        int d;
        if (isdigit((unsigned char)s[i]))
            d = s[i] - '0';
        else if (base == 16 && isxdigit((unsigned char)s[i]))
            d = tolower((unsigned char)s[i]) - 'a' + 10;
        else
            return false;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            return false;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    *out = v;
    return true;
}

static bool header_is(const char *line, size_t n, const char *name, const char **val, size_t *vlen)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return false;
    const char *v = line + k + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *val = v;
    *vlen = (size_t)(end - v);
    return true;
}

static resp_rc parse_head(resp_parser *p, char *h, size_t n)
{
    /* "HTTP/1.1 200 Reason" */
    if (n < 12 || (strncmp(h, "HTTP/1.1 ", 9) != 0 && strncmp(h, "HTTP/1.0 ", 9) != 0))
        return fail(p, "bad status line");
    uint64_t st;
    if (!parse_u64(h + 9, 3, 10, &st) || st < 100 || (n > 12 && h[12] != ' ' && h[12] != '\r'))
        return fail(p, "bad status code");
    p->status = (int)st;
    p->close = h[7] == '0';
    bool have_len = false;
    char *line = memchr(h, '\n', n);
    while (line && (size_t)(++line - h) < n) {
        char *nl = memchr(line, '\n', n - (size_t)(line - h));
        if (!nl)
            break;
        size_t ln = (size_t)(nl - line);
        if (ln && line[ln - 1] == '\r')
            ln--;
        const char *v;
        size_t vl;
        if (header_is(line, ln, "Content-Length", &v, &vl)) {
            if (have_len || !parse_u64(v, vl, 10, &p->left))
                return fail(p, "bad Content-Length");
            have_len = true;
        } else if (header_is(line, ln, "Transfer-Encoding", &v, &vl)) {
            if (vl != 7 || strncasecmp(v, "chunked", 7) != 0)
                return fail(p, "unsupported Transfer-Encoding");
            p->chunked = true;
        } else if (header_is(line, ln, "Connection", &v, &vl)) {
            p->close = vl == 5 && strncasecmp(v, "close", 5) == 0;
        }
        line = nl;
    }
    if (p->chunked && have_len)
        return fail(p, "both chunked and Content-Length");
    if (!p->chunked && !have_len)
        return fail(p, "no body length");
    p->state = p->chunked ? RESP_CHUNK_SIZE : RESP_LEN;
    return RESP_MORE;
}

static resp_rc read_head(resp_parser *p, struct evbuffer *in)
{
    struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
    if (end.pos < 0)
        return evbuffer_get_length(in) >= p->max_head ? fail(p, "response head too large")
                                                      : RESP_MORE;
    size_t n = (size_t)end.pos + 4;
    if (n > p->max_head)
        return fail(p, "response head too large");
    char *h = malloc(n + 1);
    if (!h)
        return fail(p, "out of memory");
    evbuffer_remove(in, h, n);
    h[n] = '\0';
    resp_rc rc = parse_head(p, h, n);
    free(h);
    return rc;
}

/* Hands the gathered message over. RESP_STOP: the owner went away (and
 * may have freed the parser: nothing touches it after). */
static resp_rc emit(resp_parser *p, resp_msg_fn fn, void *arg)
{
    size_t n = evbuffer_get_length(p->msg);
    char *m = evbuffer_add(p->msg, "", 1) == 0 ? (char *)evbuffer_pullup(p->msg, -1) : NULL;
    if (!m)
        return fail(p, "out of memory");
    if (!fn(arg, m, n))
        return RESP_STOP;
    evbuffer_drain(p->msg, evbuffer_get_length(p->msg));
    return RESP_MORE;
}

/* Moves up to `n` body bytes from `in` into messages. */
static resp_rc take_body(resp_parser *p, struct evbuffer *in, size_t n, resp_msg_fn fn, void *arg)
{
    while (n > 0) {
        struct evbuffer_ptr nl = evbuffer_search_range(in, "\n", 1, NULL, NULL);
        size_t upto = nl.pos >= 0 && (size_t)nl.pos < n ? (size_t)nl.pos : n;
        if (upto > p->max_message - evbuffer_get_length(p->msg))
            return fail(p, "response message too large");
        evbuffer_remove_buffer(in, p->msg, upto);
        n -= upto;
        p->left -= upto;
        if (n > 0) { /* a newline ends the message */
            evbuffer_drain(in, 1);
            n--;
            p->left--;
            resp_rc rc = evbuffer_get_length(p->msg) > 0 ? emit(p, fn, arg) : RESP_MORE;
            if (rc != RESP_MORE)
                return rc;
        }
    }
    return RESP_MORE;
}

static resp_rc finish(resp_parser *p, resp_msg_fn fn, void *arg)
{
    p->state = RESP_DONE;
    resp_rc rc = evbuffer_get_length(p->msg) > 0 ? emit(p, fn, arg) : RESP_MORE;
    return rc == RESP_MORE ? RESP_END : rc;
}

/* One CRLF line of at most cap - 1 bytes into `line` (NULL: length only,
 * for trailers). RESP_END when a line was read. */
static resp_rc read_line(resp_parser *p, struct evbuffer *in, char *line, size_t cap, size_t *n)
{
    struct evbuffer_ptr eol = evbuffer_search_eol(in, NULL, NULL, EVBUFFER_EOL_CRLF_STRICT);
    if (eol.pos < 0)
        return evbuffer_get_length(in) > cap ? fail(p, "chunk line too long") : RESP_MORE;
    if ((size_t)eol.pos >= cap)
        return fail(p, "chunk line too long");
    *n = (size_t)eol.pos;
    if (line) {
        evbuffer_remove(in, line, *n);
        line[*n] = '\0';
    } else {
        evbuffer_drain(in, *n);
    }
    evbuffer_drain(in, 2);
    return RESP_END;
}

static resp_rc step_chunked(resp_parser *p, struct evbuffer *in, resp_msg_fn fn, void *arg)
{
    char line[MAX_SIZE_LINE];
    size_t n;
    resp_rc rc;
    switch (p->state) {
    case RESP_CHUNK_SIZE:
        if ((rc = read_line(p, in, line, sizeof(line), &n)) != RESP_END)
            return rc;
        size_t hex = strcspn(line, "; \t");
        if (!parse_u64(line, hex, 16, &p->left) || p->left > INT64_MAX)
            return fail(p, "bad chunk size");
        p->state = p->left ? RESP_CHUNK : RESP_TRAILER;
        return RESP_MORE;
    case RESP_CHUNK: {
        size_t avail = evbuffer_get_length(in);
        size_t n2 = avail < p->left ? avail : (size_t)p->left;
        if (n2 == 0)
            return RESP_MORE;
        if ((rc = take_body(p, in, n2, fn, arg)) != RESP_MORE)
            return rc;
        if (p->left == 0)
            p->state = RESP_CHUNK_END;
        return RESP_MORE;
    }
    case RESP_CHUNK_END:
        if ((rc = read_line(p, in, line, sizeof(line), &n)) != RESP_END)
            return rc;
        if (n != 0)
            return fail(p, "chunk not followed by CRLF");
        p->state = RESP_CHUNK_SIZE;
        return RESP_MORE;
    default: /* RESP_TRAILER: lines until an empty one, each bounded */
        if ((rc = read_line(p, in, NULL, p->max_head, &n)) != RESP_END)
            return rc;
        return n == 0 ? finish(p, fn, arg) : RESP_MORE;
    }
}

resp_rc resp_feed(resp_parser *p, struct evbuffer *in, resp_msg_fn fn, void *arg)
{
    for (;;) {
        size_t before = evbuffer_get_length(in);
        resp_rc rc;
        resp_state st = p->state;
        if (st == RESP_DONE)
            return RESP_END;
        if (st == RESP_HEAD) {
            rc = read_head(p, in);
        } else if (st == RESP_LEN) {
            size_t avail = evbuffer_get_length(in);
            size_t n = avail < p->left ? avail : (size_t)p->left;
            rc = take_body(p, in, n, fn, arg);
            if (rc == RESP_MORE && p->left == 0)
                return finish(p, fn, arg);
        } else {
            rc = step_chunked(p, in, fn, arg);
        }
        if (rc != RESP_MORE)
            return rc;
        if (p->state == st && evbuffer_get_length(in) == before)
            return RESP_MORE; /* no progress: wait for bytes */
    }
}
