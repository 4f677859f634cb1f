/* Messages for broker unit tests: header-only, like test_broker_util.h. */
#ifndef WARREN_TEST_BROKER_MSGS_H
#define WARREN_TEST_BROKER_MSGS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "test_broker_start.h"

/* A message published to "" with routing key k and no properties. */
static inline msg *util_msg(const char *body)
{
    static const uint8_t no_props[2] = {0, 0};
    msg *m = msg_new(test_msgs(), AMQP_CSTR(""), AMQP_CSTR("k"), (amqp_bytes){no_props, 2}, strlen(body));
    assert_non_null(m);
    assert_true(msg_append_body(m, (const uint8_t *)body, strlen(body)));
    return m;
}

#endif
