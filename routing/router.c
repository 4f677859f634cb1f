/* router: route_message, the broker's hot path.
 *
 * One call is a walk over exchanges with a work list (table-owned array,
 * sized to the number of exchanges) and a seen set that is not a set: each
 * target (queue or exchange) carries `mark`, and the call's generation
 * number in it means "already collected". So dedup and cycle safety cost
 * one compare per matched binding, and nothing is cleared between calls.
 * The result array is table-owned too, sized to the number of queue
 * targets plus one, so a call allocates nothing once the per-message
 * scratch (key words for topic, sorted headers for headers exchanges) has
 * grown to the largest message seen.
 *
 * As RabbitMQ's rabbit_exchange:route1: every exchange taken off the work
 * list routes by its type; if none of its bindings matched (bindings to
 * exchanges count, even ones that lead nowhere), its alternate exchange,
 * if it exists, joins the work list unless already seen. AE chains and
 * loops need nothing more than the marks.
 */
#include <stdlib.h>

#include "route_int.h"

static void follow_alternate(route_run *run, route_exchange *x)
{
    route_table *t = run->t;

    /* Cached per exchange; any exchange added or removed invalidates it. */
    if (x->ae_version != t->ex_version) {
        x->ae = route_exchange_find_bytes(t, x->ae_name);
        x->ae_version = t->ex_version;
    }
    if (x->ae != NULL)
        route_run_collect(run, &x->ae->target);
}

size_t route_message(route_table *t, route_exchange *ex, amqp_bytes key, amqp_bytes headers,
                     void ***queues)
{
    return route_message_with(t, ex, key, headers, NULL, false, queues);
}

size_t route_message_with(route_table *t, route_exchange *ex, amqp_bytes key,
                           amqp_bytes headers, const void *msg, bool again, void ***queues)
{
    route_run run = {.t = t, .gen = ++t->generation, .key = key, .headers = headers,
                     .msg = msg, .again = again};

    assert(ex != NULL && !ex->dying && t->work_cap > 0);
    ex->target.mark = run.gen;
    t->work[run.nwork++] = ex;
    while (run.nwork > 0) {
        route_exchange *x = t->work[--run.nwork];

        if (x->delayed && route_run_hold(&run, x))
            continue; /* routed at its deadline instead, alternate exchange too */
        if (x->ops->route(x, &run) == 0 && x->has_ae)
            follow_alternate(&run, x);
    }
    *queues = t->result;
    return run.nresult;
}

/* ---- per-message scratch ------------------------------------------------ */

static bool reserve(void **arr, size_t *cap, size_t need, size_t size)
{
    size_t n = *cap ? *cap : 64;
    void *p;

    if (need <= *cap)
        return true;
    while (n < need)
        n *= 2;
    if ((p = realloc(*arr, n * size)) == NULL)
        return false;
    *arr = p;
    *cap = n;
    return true;
}

/* RabbitMQ's split_topic_key: "" is no words at all; otherwise every dot
 * separates two words, so "a..b" is three and "." two empty ones. */
bool route_run_words(route_run *run)
{
    route_table *t = run->t;
    amqp_bytes k = run->key;
    uint32_t i, start = 0;
    size_t n = 0;

    if (run->words_state != 0)
        return run->words_state > 0;
    if (!reserve((void **)&t->words, &t->words_cap, (size_t)k.len + 1, sizeof *t->words)) {
        run->words_state = -1;
        return false;
    }
    for (i = 0; k.len > 0 && i <= k.len; i++) {
        if (i < k.len && k.ptr[i] != '.')
            continue;
        t->words[n].word = (amqp_bytes){k.ptr + start, i - start};
        t->words[n].hash = route_hash_bytes(k.ptr + start, i - start);
        n++;
        start = i + 1;
    }
    run->nwords = n;
    run->words_state = 1;
    return true;
}

/* The message headers as rabbit_misc:sort_field_table leaves them: all
 * entries, duplicates kept, stably sorted by key. */
bool route_run_headers(route_run *run)
{
    route_table *t = run->t;
    amqp_iter it;
    amqp_bytes key;
    amqp_field value;
    size_t n = 0;

    if (run->headers_state != 0)
        return run->headers_state > 0;
    amqp_iter_init(&it, run->headers);
    while (amqp_table_next(&it, &key, &value))
        n++;
    run->nheaders = 0;
    run->headers_state = 1;
    if (n == 0)
        return true;
    /* One buffer: the entries, then as many slots for the merge sort. */
    if (!reserve((void **)&t->headers, &t->headers_cap, 2 * n, sizeof *t->headers)) {
        run->headers_state = -1; /* the headers exchanges match nothing */
        return false;
    }
    amqp_iter_init(&it, run->headers);
    for (n = 0; amqp_table_next(&it, &t->headers[n].key, &t->headers[n].value); n++)
        ;
    route_headers_sort(t->headers, t->headers + n, n);
    run->nheaders = n;
    return true;
}
