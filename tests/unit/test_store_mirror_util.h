/* Shared by the store tests that replicate through a mirror: hands what a
 * reader has to a replica, as a follower's connection would. Header-only. */
#ifndef WARREN_TEST_STORE_MIRROR_UTIL_H
#define WARREN_TEST_STORE_MIRROR_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

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

#endif
