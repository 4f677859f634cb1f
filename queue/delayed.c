/* Delayed retry: how long a returned message is held back, and the set of
 * held messages of one queue.
 *
 * Rules (RabbitMQ 4.3's x-delayed-retry-type / -min / -max, LavinMQ's
 * x-delayed-retry-multiplier):
 *   type     disabled: never; failed: returns the consumer asked for
 *            (basic.reject / basic.nack with requeue); returned: returns
 *            without a verdict (channel or connection closed, consumer
 *            timed out, basic.recover); all: both. Absent with a min set:
 *            failed, as LavinMQ enables retries by x-delayed-retry-min alone.
 *   delay    min x count (linear, RabbitMQ 4.3 and LavinMQ without a
 *            multiplier), or min x multiplier^(count-1) (LavinMQ), then at
 *            most max, and never above QUEUE_RETRY_DELAY_MAX. `count` is the
 *            message's delivery count with this delivery, so its first
 *            return waits min.
 *
 * The set is a binary min-heap on the deadline, so the queue arms one timer
 * for its earliest entry whatever the number held; push and pop are
 * O(log n), and nothing is done per message on the normal path.
 */
#include <stdlib.h>
#include <time.h>

#include "queue.h"
#include "queue_internal.h"

static bool selects(uint8_t type, queue_return why)
{
    switch (type) {
    case QUEUE_RETRY_ALL: return why != QUEUE_RETURN_PLAIN;
    case QUEUE_RETRY_FAILED: return why == QUEUE_RETURN_FAILED;
    case QUEUE_RETRY_RETURNED: return why == QUEUE_RETURN_RETURNED;
    default: return false;
    }
}

uint64_t queue_retry_delay_ms(const queue_args *a, queue_return why, uint32_t count)
{
    if (a->retry_min <= 0 || count == 0 || !selects(a->retry_type, why))
        return 0;
    uint64_t cap = a->retry_max >= 0 && (uint64_t)a->retry_max < QUEUE_RETRY_DELAY_MAX
                       ? (uint64_t)a->retry_max
                       : QUEUE_RETRY_DELAY_MAX;
    uint64_t d = (uint64_t)a->retry_min, m = (uint64_t)a->retry_multiplier;
    if (a->retry_multiplier < 0) /* linear */
        d = d >= cap || count >= cap / d ? cap : d * count;
    else if (m > 1) /* d at least doubles, so this ends within 33 turns */
        for (uint32_t i = 1; i < count && d < cap; i++)
            d = d > cap / m ? cap : d * m;
    return d < cap ? d : cap;
}

uint64_t delayed_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* RabbitMQ's quorum queues on their qq-vNext branch (rabbit_fifo v9,
 * "QQ: implement message delays"): an AMQP 0-9-1 header
 * x-opt-delivery-time, an integer (ms since the epoch), holds a new message
 * until then when it lies ahead. */
uint64_t queue_delivery_time(amqp_bytes properties)
{
    amqp_basic_properties p;
    amqp_field f;
    if (properties.len < 2 || !((properties.ptr[0] << 8 | properties.ptr[1]) &
                                AMQP_BASIC_HEADERS_FLAG) ||
        amqp_properties_decode(properties, &p, NULL) != AMQP_OK ||
        !amqp_table_get(p.headers, "x-opt-delivery-time", &f))
        return 0;
    switch (f.type) {
    case 'b': case 'B': case 's': case 'u': case 'I': case 'i': case 'l':
        return f.v.i > 0 ? (uint64_t)f.v.i : 0;
    default: return 0;
    }
}

/* ---- the heap ------------------------------------------------------------ */

static void swap(delayed_entry *a, delayed_entry *b)
{
    delayed_entry t = *a;
    *a = *b;
    *b = t;
}

bool delayed_push(delayed_set *d, const delayed_entry *e)
{
    if (d->n == d->cap) {
        uint32_t cap = d->cap ? d->cap * 2 : 8;
        delayed_entry *v = realloc(d->v, cap * sizeof *v);
        if (!v)
            return false;
        d->v = v, d->cap = cap;
    }
    uint32_t i = d->n++;
    d->v[i] = *e;
    while (i > 0 && d->v[(i - 1) / 2].due > d->v[i].due) {
        swap(&d->v[(i - 1) / 2], &d->v[i]);
        i = (i - 1) / 2;
    }
    return true;
}

const delayed_entry *delayed_first(const delayed_set *d) { return d->n ? &d->v[0] : NULL; }

delayed_entry delayed_pop(delayed_set *d)
{
    delayed_entry top = d->v[0];
    d->v[0] = d->v[--d->n];
    for (uint32_t i = 0;;) {
        uint32_t l = 2 * i + 1, r = l + 1, min = i;
        if (l < d->n && d->v[l].due < d->v[min].due)
            min = l;
        if (r < d->n && d->v[r].due < d->v[min].due)
            min = r;
        if (min == i)
            break;
        swap(&d->v[i], &d->v[min]);
        i = min;
    }
    return top;
}

void delayed_free(delayed_set *d)
{
    free(d->v);
    *d = (delayed_set){0};
}
