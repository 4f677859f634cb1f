/* Log lines to stderr: "YYYY-MM-DD hh:mm:ss.mmm [level] text", one write
 * per line so lines from a crash or a kill are never interleaved.
 *
 * Escaping happens here, once, over the whole formatted text of every
 * line. Log texts carry what clients sent -- queue and exchange names,
 * table keys, reply texts quoting them -- and a newline among those bytes
 * would forge a line of its own; escape codes would drive a terminal. A
 * "%s of client bytes" helper at each call site would be one more thing
 * every future log_msg must remember; escaping the finished text cannot be
 * forgotten, and costs nothing our own texts need (they are one line of
 * printable UTF-8). So: control bytes (C0, DEL), C1 controls and the
 * Unicode line and paragraph separators (U+2028, U+2029, which some
 * viewers break lines at), and bytes that are not well-formed UTF-8
 * (overlong forms, surrogates, above U+10FFFF, cut-off sequences) become
 * \xNN; everything else, valid multi-byte UTF-8 included, is kept as is.
 * The line's own newline is added after escaping.
 *
 * log_msg may be called from the journal's sync thread as well as the
 * loop: it uses only its stack. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

#define TEXT_MAX 1024 /* formatted text of one line, before escaping */
#define LINE_MAX_BYTES (64 + 4 * TEXT_MAX) /* prefix + every byte escaped + newline */

/* Process-wide: one setting for every thread, set before the loops run. */
static log_level current_level = LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warning", "error", "none"};

void log_set_level(log_level level) { current_level = level; }

bool log_parse_level(const char *name, log_level *out)
{
    for (int i = 0; i <= LOG_NONE; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (log_level)i;
            return true;
        }
    }
    return false;
}

static bool continuation(uint8_t b) { return (b & 0xc0) == 0x80; }

/* Length of the well-formed UTF-8 sequence at p (n bytes left) that may be
 * logged as is: 1..4, or 0 when p[0] must be escaped. Second-byte ranges
 * per RFC 3629's table exclude overlong forms, surrogates and code points
 * above U+10FFFF. */
static size_t keepable(const uint8_t *p, size_t n)
{
    uint8_t b = p[0];
    size_t len;
    uint8_t lo = 0x80, hi = 0xbf;

    if (b >= 0x20 && b < 0x7f)
        return 1;
    if (b >= 0xc2 && b <= 0xdf)
        len = 2;
    else if (b >= 0xe0 && b <= 0xef)
        len = 3;
    else if (b >= 0xf0 && b <= 0xf4)
        len = 4;
    else
        return 0; /* control, DEL, stray continuation, C0/C1 lead, F5..FF */
    if (b == 0xe0)
        lo = 0xa0;
    else if (b == 0xed)
        hi = 0x9f;
    else if (b == 0xf0)
        lo = 0x90;
    else if (b == 0xf4)
        hi = 0x8f;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (!continuation(p[i]))
            return 0;
    if (b == 0xc2 && p[1] <= 0x9f)
        return 0; /* U+0080..U+009F, the C1 controls */
    if (b == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9))
        return 0; /* U+2028, U+2029 */
    return len;
}

/* Escapes n bytes of `in` into out (cap bytes, cap >= 1), NUL-terminated;
 * stops before a sequence or escape that would not fit. Returns the length. */
static size_t escape(const uint8_t *in, size_t n, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;

    for (size_t i = 0; i < n;) {
        size_t k = keepable(in + i, n - i);
        if (k == 0) {
            if (cap - o < 5)
                break;
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[in[i] >> 4];
            out[o++] = hex[in[i] & 15];
            i++;
            continue;
        }
        if (cap - o < k + 1)
            break;
        memcpy(out + o, in + i, k);
        o += k;
        i += k;
    }
    out[o] = 0;
    return o;
}

void log_msg(log_level level, const char *fmt, ...)
{
    if (level < current_level || level >= LOG_NONE)
        return;
    char text[TEXT_MAX], line[LINE_MAX_BYTES];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    int n = (int)strftime(line, sizeof line, "%Y-%m-%d %H:%M:%S", &tm);
    n += snprintf(line + n, sizeof line - (size_t)n, ".%03d [%s] ", (int)(tv.tv_usec / 1000),
                  level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t len = k < 0 ? 0 : (size_t)k < sizeof text ? (size_t)k : sizeof text - 1;
    /* room for the newline stays after the escaped text */
    n += (int)escape((const uint8_t *)text, len, line + n, sizeof line - (size_t)n - 1);
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}
