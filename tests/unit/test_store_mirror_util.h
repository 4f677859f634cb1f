/* Shared by the tests that replicate through a mirror (store, stream):
 * hands what a reader has to a replica, as a follower's connection would,
 * and compares a leader's directory with the follower's. Header-only. */
#ifndef WARREN_TEST_STORE_MIRROR_UTIL_H
#define WARREN_TEST_STORE_MIRROR_UTIL_H

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../mirror/mirror.h"

/* Feeds everything the reader has now (its snapshot, then the log) to the
 * replica; fails the test on anything but data and idle. */
static inline void mirror_pump(mirror_reader *reader, mirror_replica *replica)
{
    for (int i = 0; i < 100000; i++) {
        const uint8_t *out;
        size_t len;
        mirror_read_status st = mirror_reader_next(reader, 256 * 1024, &out, &len);
        if (st == MIRROR_IDLE)
            return;
        assert_int_equal(st, MIRROR_DATA);
        if (mirror_replica_feed(replica, out, len) != MIRROR_APPLIED)
            fail_msg("replica: %s", mirror_replica_error(replica));
    }
    fail_msg("the reader never ran dry");
}

static inline uint8_t *mirror_test_slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        fail_msg("%s: missing", path);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    rewind(fp);
    uint8_t *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return b;
}

/* Every file of directory a (not recursive) is in b with the same bytes,
 * and b has nothing else; returns how many there are. */
static inline int mirror_same_dirs(const char *a, const char *b)
{
    int n = 0, nb = 0;
    DIR *d = opendir(a);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char pa[600], pb[600];
        snprintf(pa, sizeof pa, "%s/%s", a, e->d_name);
        snprintf(pb, sizeof pb, "%s/%s", b, e->d_name);
        size_t la, lb;
        uint8_t *ba = mirror_test_slurp(pa, &la), *bb = mirror_test_slurp(pb, &lb);
        if (la != lb || memcmp(ba, bb, la) != 0)
            fail_msg("%s differs (%zu vs %zu bytes)", e->d_name, la, lb);
        free(ba);
        free(bb);
        n++;
    }
    closedir(d);
    d = opendir(b);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        nb += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(n, nb);
    return n;
}

#endif
