/* Shared by the amqp10 unit tests: inputs are copied into exactly-sized
 * malloc'd buffers, so under ASan any read past the end fails the test. */
#ifndef TEST_AMQP10_UTIL_H
#define TEST_AMQP10_UTIL_H

#include <stdlib.h>
#include <string.h>

static uint8_t *copy(const uint8_t *p, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    assert_non_null(c);
    if (n)
        memcpy(c, p, n);
    return c;
}

#endif
