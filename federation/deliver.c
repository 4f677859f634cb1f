/* What a link does with a delivery: the message is put into the local
 * exchange (exchange link) or queue (queue link, through the default
 * exchange) as a new message with x-received-from added and, unless
 * trust-user-id, no user-id; one that has made max-hops hops or came
 * through this cluster is acked and dropped (exchange links).
 *
 * Acks per ack-mode: on-confirm acks wait in `pending` (a ring in delivery
 * order) until the journal has synced what the local publish wrote; each
 * sync acks the ring's synced head with one multiple ack (a delivery that
 * needs no wait but comes behind waiting ones joins the ring, so acks stay
 * in order). A refused publish (reject-publish) is nacked without requeue,
 * as a downstream nack is in RabbitMQ.
 */
#include <stdlib.h>
#include <string.h>

#include "fed_int.h"

static uint8_t *scratch(fed_link *k, size_t want)
{
    if (want > k->scratch_cap) {
        uint8_t *grown = realloc(k->scratch, want);
        if (!grown)
            return NULL;
        k->scratch = grown;
        k->scratch_cap = want;
    }
    return k->scratch;
}

static int64_t expiration_of(amqp_bytes e)
{
    int64_t n = 0;
    if (e.len == 0 || e.len > 18)
        return -1;
    for (uint32_t i = 0; i < e.len; i++) {
        if (e.ptr[i] < '0' || e.ptr[i] > '9')
            return -1;
        n = n * 10 + (e.ptr[i] - '0');
    }
    return n;
}

/* The message with this hop's headers, as the local publish takes it;
 * NULL when it cannot be made (no memory, properties that do not decode). */
static msg *rewrite(fed_link *k, const client_message *m, amqp_basic_properties *p)
{
    amqp_error err;
    if (amqp_properties_decode(m->properties, p, &err) != AMQP_OK)
        return NULL;
    fed_hop hop = {.uri = k->uri, .object = k->object, .queue = k->queue,
                   .redelivered = m->redelivered, .vhost = k->upstream_vhost, .cluster = NULL};
    size_t room = p->headers.len + 3 * 1024 + 2 * m->exchange.len + m->routing_key.len;
    size_t total = room + m->properties.len + room + 64;
    uint8_t *buf = scratch(k, total);
    if (!buf)
        return NULL;
    amqp_writer w;
    amqp_writer_init(&w, buf, room);
    fed_hop_headers(&w, p->headers, &hop, m->exchange, m->routing_key);
    if (w.overflow)
        return NULL;
    p->headers = (amqp_bytes){buf, (uint32_t)w.len};
    p->flags |= AMQP_BASIC_HEADERS_FLAG;
    if (!k->up.trust_user_id)
        p->flags &= (uint16_t)~AMQP_BASIC_USER_ID_FLAG;
    size_t n = amqp_properties_encode(p, buf + room, total - room);
    if (!n)
        return NULL;
    amqp_bytes exchange = k->queue ? AMQP_CSTR("") : AMQP_CSTR(k->object);
    amqp_bytes key = k->queue ? AMQP_CSTR(k->object) : m->routing_key;
    msg *out = msg_new(loop_msgs(k->f->l), exchange, key, (amqp_bytes){buf + room, (uint32_t)n},
                       m->body.len);
    if (out)
        msg_append_body(out, m->body.ptr, m->body.len);
    return out;
}

static void wait_for_journal(fed_link *k, uint64_t tag, journal_seq wait)
{
    if (k->pending_n == k->pending_cap) {
        size_t cap = k->pending_cap ? 2 * k->pending_cap : 64;
        fed_pending *grown = malloc(cap * sizeof *grown);
        if (!grown) {
            client_ack(k->c, 1, tag, false); /* better early than stuck */
            return;
        }
        for (size_t i = 0; i < k->pending_n; i++)
            grown[i] = k->pending[(k->pending_head + i) % k->pending_cap];
        free(k->pending);
        k->pending = grown;
        k->pending_cap = cap;
        k->pending_head = 0;
    }
    k->pending[(k->pending_head + k->pending_n++) % k->pending_cap] = (fed_pending){tag, wait};
    loop_journal_wait(k->f->l, wait);
}

void fed_link_synced(fed_link *k, journal_seq synced)
{
    uint64_t last = 0;
    while (k->pending_n && k->pending[k->pending_head].wait <= synced) {
        last = k->pending[k->pending_head].tag;
        k->pending_head = (k->pending_head + 1) % k->pending_cap;
        k->pending_n--;
    }
    if (last && k->c)
        client_ack(k->c, 1, last, true);
    if (k->retiring && !k->closing && k->pending_n == 0 && k->c)
        fed_link_finish_retiring(k);
}

/* Acks (or nacks) per ack-mode once the message went where it goes. */
static void settle(fed_link *k, uint64_t tag, const vhost_routed *r)
{
    journal *j = server_journal(k->f->s);
    if (k->up.ack_mode == FED_NO_ACK)
        return;
    if (r->refused)
        client_nack(k->c, 1, tag, false, false); /* as a refused confirm nacks */
    else if (k->up.ack_mode == FED_ON_CONFIRM && r->wait && j && r->wait > journal_synced(j))
        wait_for_journal(k, tag, r->wait);
    else if (k->pending_n)
        wait_for_journal(k, tag, 0); /* behind the ones waiting: acked with them */
    else
        client_ack(k->c, 1, tag, false);
}

void fed_on_deliver(void *ctx, client *c, uint16_t ch, const client_message *m)
{
    fed_link *k = ctx;
    vhost *v = fed_link_vhost(k);
    amqp_error err;
    amqp_basic_properties p;
    (void)c, (void)ch;
    if (k->retiring) { /* what came after the end stays upstream */
        if (k->up.ack_mode != FED_NO_ACK)
            client_nack(k->c, 1, m->delivery_tag, false, true);
        return;
    }
    route_exchange *ex = v ? route_exchange_lookup(vhost_routes(v), k->queue ? AMQP_CSTR("")
                                                   : AMQP_CSTR(k->object), AMQP_BASIC_PUBLISH, &err)
                           : NULL;
    if (!ex) { /* the object went: the manager stops the link soon */
        if (k->up.ack_mode != FED_NO_ACK)
            client_nack(k->c, 1, m->delivery_tag, false, true);
        return;
    }
    if (!k->queue && amqp_properties_decode(m->properties, &p, &err) == AMQP_OK &&
        !fed_should_forward(p.headers, k->up.max_hops, k->f->cluster, k->vhost)) {
        if (k->up.ack_mode != FED_NO_ACK)
            client_ack(k->c, 1, m->delivery_tag, false); /* dropped, but acked */
        return;
    }
    msg *out = rewrite(k, m, &p);
    if (!out) {
        if (k->up.ack_mode != FED_NO_ACK)
            client_reject(k->c, 1, m->delivery_tag, false);
        return;
    }
    vhost_routed r = vhost_publish(v, ex, out, p.headers, expiration_of(p.expiration));
    msg_unref(out);
    settle(k, m->delivery_tag, &r);
}

