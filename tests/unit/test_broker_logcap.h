/* Capturing the broker's log in a unit test: logcap_begin sends stderr to
 * a temp file and sets the level; logcap_end puts stderr back, turns the
 * log off again and returns how many of the lines written meanwhile hold
 * `needle`. Header-only, as test_broker_util.h. */
#ifndef WARREN_TEST_BROKER_LOGCAP_H
#define WARREN_TEST_BROKER_LOGCAP_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../admin/admin.h"

typedef struct logcap {
    char path[40];
    int fd, saved;
} logcap;

static void logcap_begin(logcap *c, log_level level)
{
    strcpy(c->path, "/tmp/warren-unit-log-XXXXXX");
    c->fd = mkstemp(c->path);
    assert_true(c->fd >= 0);
    fflush(stderr);
    c->saved = dup(STDERR_FILENO);
    assert_true(dup2(c->fd, STDERR_FILENO) >= 0);
    log_set_level(level);
}

static int logcap_end(logcap *c, const char *needle)
{
    char line[8192];
    log_set_level(LOG_NONE);
    fflush(stderr);
    dup2(c->saved, STDERR_FILENO);
    close(c->saved);
    close(c->fd);
    FILE *f = fopen(c->path, "r");
    assert_non_null(f);
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    unlink(c->path);
    return n;
}

#endif
