/* Forwarding, as rabbit_amqp091_shovel does it: each delivery is published
 * to the destination (its exchange and key, or the message's own); with
 * on-confirm its source tag waits in a ring indexed by the publish
 * sequence number until the destination confirms it (basic.ack at the
 * source, `multiple` as the confirm has it) or rejects it (basic.nack,
 * requeued); on-publish acks as it publishes; no-ack consumes without
 * acks. src-delete-after counts what was confirmed (on-confirm) or
 * published; once the count is published, later deliveries are left
 * unacked (requeued when the link closes), as RabbitMQ drops them.
 *
 * Bounds: a delivery the destination's output cannot take, or that finds
 * the ring full (a prefetch of 0, RING_MAX in flight), is held (one
 * message) and the source paused until the output drains or confirms
 * free the ring.
 */
#include <stdlib.h>
#include <string.h>

#include "shovel_int.h"

#define RING_MAX (1u << 20)

static void decr_remaining(shovel *sh, uint64_t n)
{
    if (sh->remaining < 0)
        return;
    sh->remaining -= (int64_t)n;
    if (sh->remaining <= 0)
        shovel_done(sh);
}

static bool ring_room(shovel *sh)
{
    if (sh->next_seq - sh->head_seq < sh->ring_cap)
        return true;
    size_t cap = sh->ring_cap ? sh->ring_cap * 2 : 1024;
    if (cap > RING_MAX)
        return false;
    uint64_t *ring = malloc(cap * sizeof *ring);
    uint8_t *done = malloc(cap);
    if (!ring || !done) {
        free(ring), free(done);
        return false;
    }
    for (uint64_t s = sh->head_seq; s < sh->next_seq; s++) {
        ring[s & (cap - 1)] = sh->ring[s & (sh->ring_cap - 1)];
        done[s & (cap - 1)] = sh->done[s & (sh->ring_cap - 1)];
    }
    free(sh->ring), free(sh->done);
    sh->ring = ring, sh->done = done, sh->ring_cap = cap;
    return true;
}

static void published(shovel *sh, uint64_t tag, uint64_t seq)
{
    sh->forwarded++;
    switch (sh->cfg.ack_mode) {
    case ACK_ON_CONFIRM:
        sh->ring[seq & (sh->ring_cap - 1)] = tag;
        sh->done[seq & (sh->ring_cap - 1)] = 0;
        sh->next_seq = seq + 1;
        if (sh->remaining_unacked > 0)
            sh->remaining_unacked--;
        break;
    case ACK_ON_PUBLISH:
        client_ack(sh->src.c, 1, tag, false);
        sh->acked++;
        decr_remaining(sh, 1);
        break;
    default: decr_remaining(sh, 1); break;
    }
}

static bool keep(uint8_t **buf, size_t *cap, size_t *len, amqp_bytes b)
{
    if (b.len > *cap) {
        uint8_t *p = realloc(*buf, b.len);
        if (!p)
            return false;
        *buf = p, *cap = b.len;
    }
    memcpy(*buf, b.ptr, b.len);
    *len = b.len;
    return true;
}

static void hold(shovel *sh, uint64_t tag, amqp_bytes ex, amqp_bytes rk, amqp_bytes props,
                 amqp_bytes body)
{
    held_msg *h = &sh->held;
    if (!keep(&h->props, &h->props_cap, &h->props_len, props) ||
        !keep(&h->body, &h->body_cap, &h->body_len, body)) {
        shovel_fail(sh, "out of memory");
        return;
    }
    memcpy(h->exchange, ex.ptr, ex.len);
    memcpy(h->routing_key, rk.ptr, rk.len);
    h->exchange_len = ex.len, h->routing_key_len = rk.len;
    h->tag = tag;
    h->present = true;
    client_pause_reading(sh->src.c, true);
}

void shovel_on_deliver(void *ctx, client *c, uint16_t ch, const client_message *m)
{
    shovel *sh = ctx;
    (void)c, (void)ch;
    if (sh->state != SHOVEL_RUNNING || sh->remaining_unacked == 0)
        return; /* left unacked: requeued when the link closes */
    const shovel_cfg *k = &sh->cfg;
    amqp_bytes props = shovel_props(sh, m->properties);
    if ((k->forward_headers || k->timestamp_header) && !props.len) {
        shovel_fail(sh, "cannot add the shovel's headers");
        return;
    }
    amqp_bytes ex = k->has_dest_queue      ? AMQP_CSTR("")
                    : k->has_dest_exchange ? AMQP_CSTR(k->dest_exchange)
                                           : m->exchange;
    amqp_bytes rk = k->has_dest_queue            ? AMQP_CSTR(k->dest_queue)
                    : k->has_dest_exchange_key   ? AMQP_CSTR(k->dest_exchange_key)
                                                 : m->routing_key;
    if (k->ack_mode == ACK_ON_CONFIRM && !ring_room(sh)) {
        hold(sh, m->delivery_tag, ex, rk, props, m->body);
        return;
    }
    uint64_t seq = client_publish(sh->dest.c, 1, ex, rk, false, props, m->body);
    if (!seq)
        hold(sh, m->delivery_tag, ex, rk, props, m->body);
    else
        published(sh, m->delivery_tag, seq);
}

static void release_held(shovel *sh)
{
    held_msg *h = &sh->held;
    if (!h->present || (sh->cfg.ack_mode == ACK_ON_CONFIRM && !ring_room(sh)))
        return;
    uint64_t seq = client_publish(sh->dest.c, 1, (amqp_bytes){h->exchange, h->exchange_len},
                                  (amqp_bytes){h->routing_key, h->routing_key_len},
                                  false, (amqp_bytes){h->props, (uint32_t)h->props_len},
                                  (amqp_bytes){h->body, (uint32_t)h->body_len});
    if (!seq)
        return;
    h->present = false;
    if (sh->src.c)
        client_pause_reading(sh->src.c, false);
    published(sh, h->tag, seq);
}

void shovel_on_writable(void *ctx, client *c)
{
    (void)c;
    release_held(ctx);
}

void shovel_on_confirm(void *ctx, client *c, uint16_t ch, uint64_t seq, bool multiple, bool ack)
{
    shovel *sh = ctx;
    (void)c, (void)ch;
    if (seq < sh->head_seq || seq >= sh->next_seq || !sh->src.c)
        return;
    size_t mask = sh->ring_cap - 1;
    uint64_t tag = sh->ring[seq & mask], n = 0;
    for (uint64_t s = multiple ? sh->head_seq : seq; s <= seq; s++)
        if (!sh->done[s & mask]) {
            sh->done[s & mask] = 1;
            n++;
        }
    if (ack)
        client_ack(sh->src.c, 1, tag, multiple);
    else
        client_nack(sh->src.c, 1, tag, multiple, true);
    while (sh->head_seq < sh->next_seq && sh->done[sh->head_seq & mask])
        sh->head_seq++;
    if (ack)
        sh->acked += n;
    release_held(sh);
    decr_remaining(sh, n);
}
