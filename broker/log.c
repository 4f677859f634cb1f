/* Log lines to stderr: "YYYY-MM-DD hh:mm:ss.mmm [level] text", one write
 * per line so lines from a crash or a kill are never interleaved. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"

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

void log_msg(log_level level, const char *fmt, ...)
{
    if (level < current_level || level >= LOG_NONE)
        return;
    char line[1024];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    int n = (int)strftime(line, sizeof line, "%Y-%m-%d %H:%M:%S", &tm);
    n += snprintf(line + n, sizeof line - (size_t)n, ".%03d [%s] ", (int)(tv.tv_usec / 1000),
                  level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = (k < 0) ? n : (n + k < (int)sizeof line - 1 ? n + k : (int)sizeof line - 2);
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}
