/* Shared by the amqp10 unit tests: inputs are copied into exactly-sized
 * malloc'd buffers, so under ASan any read past the end fails the test. */
#ifndef TEST_AMQP10_UTIL_H
#define TEST_AMQP10_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "../../amqp10/amqp10.h"

static inline uint8_t *copy(const uint8_t *p, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    assert_non_null(c);
    if (n)
        memcpy(c, p, n);
    return c;
}

#define B(...) ((const uint8_t[]){__VA_ARGS__}), sizeof((const uint8_t[]){__VA_ARGS__})

/* The copy the last read_one read: the value's slices point into it. */
static uint8_t *last_input;

/* Reads exactly one value from the bytes (fully validated): 99 when bytes
 * are left over. */
static inline int read_one(const uint8_t *p, size_t n, amqp10_value *v)
{
    free(last_input);
    last_input = copy(p, n);
    size_t off = 0;
    int rc = amqp10_read_valid(last_input, n, &off, v);
    if (rc == AMQP10_OK && off != n)
        rc = 99;
    return rc;
}

#endif
