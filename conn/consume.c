/* basic.consume, basic.cancel and basic.get: a channel's consumers and
 * its gets, with RabbitMQ 3.10's checks and texts (read permission after
 * the "" shortcut, 404 / 405 as decl.c's lookups give them). A consumer is
 * linked to its queue with chan_consumer_ops, the channel's side of the
 * consumer seam (chan.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "chan_internal.h"

#define PRINTABLE(b) (int)(b).len, (const char *)(b).ptr

static const char *vname(chan *ch) { return vhost_name(conn_vhost(ch->c)); }

/* consumer_max_per_channel (Warren's key; RabbitMQ 3.12's name and text):
 * a 530 that closes the connection, as RabbitMQ's not_allowed does. The
 * walk stops at the limit, so it costs at most that many steps. */
static int consumers_at_limit(chan *ch, amqp_error *err)
{
    uint32_t max = server_config(conn_server(ch->c))->consumer_max_per_channel, n = 0;
    if (max == 0)
        return AMQP_OK;
    for (const consumer *c = ch->consumers; c && n < max; c = c->ch_next)
        n++;
    if (n < max)
        return AMQP_OK;
    loop_refused(conn_loop(ch->c), REFUSED_CONSUMER_CHAN_LIMIT, "channel %u of connection %s: "
                 "consumer_max_per_channel (%u) reached", ch->number, conn_peer_name(ch->c), max);
    return amqp_fail(err, AMQP_NOT_ALLOWED, AMQP_BASIC_CONSUME,
                     "reached maximum (%u) of consumers per channel", max);
}

int chan_basic_consume(chan *ch, const amqp_basic_consume *b, amqp_error *err)
{
    if (chan_is_reply_queue(b->queue))
        return chan_reply_consume(ch, b, err);
    amqp_bytes name = b->queue;
    if (chan_queue_permitted(ch, &name, ACCESS_READ, AMQP_BASIC_CONSUME, err) != AMQP_OK)
        return AMQP_ERROR;
    queue *q = chan_find_queue(ch, &name, AMQP_BASIC_CONSUME, err);
    if (!q)
        return AMQP_ERROR;
    char tag[256];
    if (b->consumer_tag.len == 0)
        server_random_name(conn_server(ch->c), "amq.ctag-", tag, sizeof tag);
    else
        snprintf(tag, sizeof tag, "%.*s", PRINTABLE(b->consumer_tag));
    if (chan_find_consumer(ch, AMQP_CSTR(tag)))
        return amqp_fail(err, AMQP_NOT_ALLOWED, AMQP_BASIC_CONSUME,
                         "attempt to reuse consumer tag '%s'", tag);
    if (consumers_at_limit(ch, err) != AMQP_OK)
        return AMQP_ERROR;
    if (ch->prefetch_global && !queue_type_of(q)->global_prefetch)
        return amqp_fail(err, AMQP_NOT_IMPLEMENTED, AMQP_BASIC_CONSUME,
                         "queue '%.*s' in vhost '%s' does not support global qos",
                         PRINTABLE(name), vname(ch));
    if (queue_has_exclusive_consumer(q) || (b->exclusive && queue_consumer_count(q)))
        return amqp_fail(err, AMQP_ACCESS_REFUSED, AMQP_BASIC_CONSUME,
                         "queue '%.*s' in vhost '%s' in exclusive use", PRINTABLE(name),
                         vname(ch));
    int64_t priority = 0;
    amqp_field f;
    if (amqp_table_get(b->arguments, "x-priority", &f) && !amqp_field_int(&f, &priority))
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_CONSUME,
                         "invalid arg 'x-priority' for queue '%.*s' in vhost '%s'",
                         PRINTABLE(name), vname(ch));
    int64_t timeout = -1;
    if (amqp_table_get(b->arguments, "x-consumer-timeout", &f) &&
        (!amqp_field_int(&f, &timeout) || timeout < 0))
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_CONSUME,
                         "invalid arg 'x-consumer-timeout' for queue '%.*s' in vhost '%s'",
                         PRINTABLE(name), vname(ch));
    consumer *cons = calloc(1, sizeof *cons);
    if (cons && b->arguments.len && (cons->arguments = malloc(b->arguments.len))) {
        memcpy(cons->arguments, b->arguments.ptr, b->arguments.len);
        cons->arguments_len = b->arguments.len;
    }
    if (!cons || (b->arguments.len && !cons->arguments)) {
        free(cons);
        return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_CONSUME, "out of memory");
    }
    cons->timeout_ms = timeout;
    ch->timeout_check_at = 0; /* its timeout may be the channel's shortest */
    memcpy(cons->tag, tag, strlen(tag) + 1);
    cons->ops = &chan_consumer_ops;
    cons->owner = ch;
    cons->q = q;
    cons->no_ack = b->no_ack;
    cons->exclusive = b->exclusive;
    cons->priority = (int32_t)priority;
    cons->prefetch = ch->prefetch_consumer;
    if (queue_consume_check(q, cons, b->arguments, err) != AMQP_OK) {
        free(cons->arguments);
        free(cons);
        return AMQP_ERROR;
    }
    cons->ch_next = ch->consumers;
    ch->consumers = cons;
    if (!b->nowait) {
        amqp_method ok = {.id = AMQP_BASIC_CONSUME_OK};
        ok.basic_consume_ok.consumer_tag = AMQP_CSTR(cons->tag);
        conn_send_method(ch->c, ch->number, &ok);
    }
    queue_add_consumer(q, cons);
    queue_dispatch(q);
    return AMQP_OK;
}

int chan_basic_cancel(chan *ch, const amqp_basic_cancel *b, amqp_error *err)
{
    (void)err;
    consumer *cons = chan_find_consumer(ch, b->consumer_tag);
    amqp_method ok = {.id = AMQP_BASIC_CANCEL_OK};
    ok.basic_cancel_ok.consumer_tag = b->consumer_tag;
    /* reply first: the cancel may delete an auto-delete queue */
    if (!b->nowait)
        conn_send_method(ch->c, ch->number, &ok);
    if (cons)
        chan_cancel_consumer(ch, cons, false);
    else
        chan_reply_cancel(ch, b->consumer_tag);
    return AMQP_OK;
}

int chan_basic_get(chan *ch, const amqp_basic_get *g, amqp_error *err)
{
    amqp_bytes name = g->queue;
    if (chan_queue_permitted(ch, &name, ACCESS_READ, AMQP_BASIC_GET, err) != AMQP_OK)
        return AMQP_ERROR;
    queue *q = chan_find_queue(ch, &name, AMQP_BASIC_GET, err);
    if (!q)
        return AMQP_ERROR;
    if (queue_type_of(q)->reads_without_taking)
        return chan_not_supported(q, "basic.get", AMQP_BASIC_GET, err);
    queue_item it;
    if (!queue_get(q, &it)) {
        chan_count(ch, q, STAT_GET_EMPTY);
        amqp_method empty = {.id = AMQP_BASIC_GET_EMPTY};
        conn_send_method(ch->c, ch->number, &empty);
        return AMQP_OK;
    }
    chan_deliver_get(ch, q, it, g->no_ack);
    return AMQP_OK;
}

