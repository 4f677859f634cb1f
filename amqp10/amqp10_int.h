/* amqp10_int: helpers shared by the amqp10 module's files; not part of its
 * interface. */
#ifndef WARREN_AMQP10_INT_H
#define WARREN_AMQP10_INT_H

#include <string.h>

#include "amqp10.h"

/* n more bytes at off of a len-byte buffer (off <= len is the invariant). */
static inline bool has(size_t len, size_t off, uint64_t n)
{
    return off <= len && n <= len - off;
}

static inline bool is_text(const amqp10_value *v)
{
    return v->type == AMQP10_STRING || v->type == AMQP10_SYMBOL || v->type == AMQP10_BINARY;
}

/* ---- 1.0 -> 0-9-1 (to091.c works the fields out, to091_write.c writes) -- */

#define AMQP10_CONV_NONE UINT32_MAX

/* A header the conversion makes up: a longstr, or (str.ptr NULL) the
 * x-stream-offset long. pos orders headers of the same key. */
typedef struct amqp10_synth {
    amqp_bytes key;
    amqp_bytes str;
    uint64_t pos;
} amqp10_synth;

typedef struct amqp10_conv {
    amqp_basic_properties p; /* every field but headers */
    amqp10_value ap;         /* application-properties map, or a NULL value */
    uint32_t skip[2];        /* offsets of the entries taken as type and app-id */
    int64_t stream_offset;   /* < 0: none */
    amqp10_synth syn[3];
    int nsyn;
    char id_text[2][257];    /* formatted message-id, correlation-id */
} amqp10_conv;

/* Writes c->p with the headers (application properties not skipped, the
 * made-up ones, x-stream-offset) as the content header's properties. */
int amqp10_conv_write(amqp10_conv *c, amqp_writer *w);

#endif
