/* Direct reply-to (RabbitMQ's amq.rabbitmq.reply-to): an RPC client
 * consumes from the pseudo-queue "amq.rabbitmq.reply-to" with no-ack; a
 * request it publishes with reply_to = "amq.rabbitmq.reply-to" gets that
 * property rewritten to "amq.rabbitmq.reply-to.<token>", and a reply
 * published to the default exchange with that routing key goes straight to
 * the client's reply consumer -- no queue, no ack. Tokens are random and
 * registered in the vhost while the consumer exists. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "chan_internal.h"

#define REPLY_QUEUE "amq.rabbitmq.reply-to"
#define REPLY_PREFIX "amq.rabbitmq.reply-to."

/* A channel's reply consumer, while it has one. */
struct chan_reply {
    char tag[256];  /* its consumer tag */
    char token[32]; /* its address: REPLY_PREFIX token */
};

bool chan_is_reply_queue(amqp_bytes name) { return amqp_bytes_equal_cstr(name, REPLY_QUEUE); }

int chan_reply_consume(chan *ch, const amqp_basic_consume *b, amqp_error *err)
{
    if (!b->no_ack)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_CONSUME,
                         "reply consumer cannot acknowledge");
    if (ch->reply)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_CONSUME,
                         "reply consumer already set");
    struct chan_reply *r = malloc(sizeof *r);
    if (!r)
        return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_CONSUME, "out of memory");
    server *s = conn_server(ch->c);
    if (b->consumer_tag.len)
        snprintf(r->tag, sizeof r->tag, "%.*s", (int)b->consumer_tag.len,
                 (const char *)b->consumer_tag.ptr);
    else
        server_random_name(s, "amq.ctag-", r->tag, sizeof r->tag);
    server_random_name(s, "", r->token, sizeof r->token);
    ch->reply = r;
    if (!vhost_reply_register(conn_vhost(ch->c), r->token, ch)) {
        ch->reply = NULL;
        free(r);
        return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_CONSUME, "out of memory");
    }
    if (!b->nowait) {
        amqp_method ok = {.id = AMQP_BASIC_CONSUME_OK};
        ok.basic_consume_ok.consumer_tag = AMQP_CSTR(r->tag);
        conn_send_method(ch->c, ch->number, &ok);
    }
    return AMQP_OK;
}

bool chan_reply_cancel(chan *ch, amqp_bytes tag)
{
    if (!ch->reply || (tag.ptr && !amqp_bytes_equal_cstr(tag, ch->reply->tag)))
        return false;
    vhost_reply_unregister(conn_vhost(ch->c), ch);
    free(ch->reply);
    ch->reply = NULL;
    return true;
}

/* A request asking for a direct reply: a copy with reply_to rewritten.
 * Returns the copy (new reference), or NULL with 406 when this channel has
 * no reply consumer. */
msg *chan_reply_rewrite(chan *ch, msg *m, amqp_error *err)
{
    if (!ch->reply) {
        amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_PUBLISH,
                  "fast reply consumer does not exist");
        return NULL;
    }
    amqp_basic_properties p;
    amqp_properties_decode(msg_properties(m), &p, NULL);
    char reply_to[96];
    snprintf(reply_to, sizeof reply_to, REPLY_PREFIX "%s", ch->reply->token);
    p.reply_to = AMQP_CSTR(reply_to);
    msg *copy = msg_with_properties(loop_msgs(conn_loop(ch->c)), m, &p);
    if (!copy)
        amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_PUBLISH, "out of memory");
    return copy;
}

/* A reply published to the default exchange: delivered to the requesting
 * channel's reply consumer. Returns false when the key is not a live
 * reply address (the message is then unroutable). */
bool chan_reply_route(vhost *v, amqp_bytes key, msg *m)
{
    size_t plen = strlen(REPLY_PREFIX);
    if (key.len <= plen || memcmp(key.ptr, REPLY_PREFIX, plen) != 0)
        return false;
    chan *ch = vhost_reply_find(v, (amqp_bytes){key.ptr + plen, key.len - (uint32_t)plen});
    if (!ch)
        return false;
    amqp_method d = {.id = AMQP_BASIC_DELIVER};
    d.basic_deliver.consumer_tag = AMQP_CSTR(ch->reply->tag);
    d.basic_deliver.delivery_tag = ++ch->delivery_tag;
    d.basic_deliver.exchange = msg_exchange(m);
    d.basic_deliver.routing_key = msg_routing_key(m);
    conn_send_content(ch->c, ch->number, &d, m);
    return true;
}
