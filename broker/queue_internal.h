/* Private to broker/: the part of a queue the vhost's name index uses. */
#ifndef WARREN_QUEUE_INTERNAL_H
#define WARREN_QUEUE_INTERNAL_H

#include <stdint.h>

/* First member of struct queue, so the index can link queues by name
 * without another allocation. `name` is NUL-terminated. */
struct queue_link {
    char *name;
    uint32_t name_len;
    struct queue_link *hash_next;
};

#endif
