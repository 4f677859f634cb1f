/* Single active consumer (RabbitMQ 3.11+'s rabbit_stream_sac_coordinator,
 * one node): the subscriptions of one stream that share a "name" form a
 * group, on any connection of the hub; the oldest is active and the only
 * one delivered to. The server tells a subscription it became active with
 * ConsumerUpdate(active) and delivers once the client answered with where
 * to start (its offset specification; "none" keeps the reader where it
 * is). When the active one leaves (Unsubscribe, its connection closes),
 * the next oldest is told. A group is found by walking the hub's
 * connections: groups are small and change only on (un)subscribe. */
#include <string.h>

#include "sconn_int.h"

static bool same_group(const sc_sub *a, const sc_sub *b)
{
    return a != b && b->sac && a->st->q == b->st->q && a->name_len == b->name_len &&
           memcmp(a->name, b->name, a->name_len) == 0;
}

/* The group's member with the lowest sequence other than `s` (and, with
 * `active_only`, only an active one); its connection in *owner. */
static sc_sub *member(sconn_hub *h, const sc_sub *s, bool active_only, sconn **owner)
{
    sc_sub *best = NULL;
    for (sconn *c = h->conns; c; c = c->next) {
        if (c->state != SC_OPEN)
            continue;
        for (int i = 0; i < SC_IDS; i++) {
            sc_sub *o = c->subs[i];
            if (o && same_group(s, o) && (!active_only || o->active) &&
                (!best || o->sac_seq < best->sac_seq)) {
                best = o;
                *owner = c;
            }
        }
    }
    return best;
}

static void make_active(sconn *c, sc_sub *s)
{
    s->active = true;
    s->awaiting = true;
    s->update_correlation = ++c->correlation;
    sp_buf b = sc_out(c, 16);
    sp_encode_consumer_update(&b, s->update_correlation, s->id, true);
    sc_commit(c, &b);
}

void sc_sac_joined(sconn *c, sc_sub *s)
{
    sconn *owner = NULL;
    s->sac_seq = ++c->hub->sac_seq;
    if (!member(c->hub, s, true, &owner))
        make_active(c, s);
}

void sc_sac_left(sconn *c, sc_sub *s, bool promote)
{
    sconn *owner = NULL;
    if (!s->active || !promote)
        return;
    sc_sub *next = member(c->hub, s, false, &owner);
    if (next)
        make_active(owner, next);
}

void sc_sac_updated(sconn *c, const sp_command *cmd)
{
    for (int i = 0; i < SC_IDS; i++) {
        sc_sub *s = c->subs[i];
        if (!s || !s->awaiting || s->update_correlation != cmd->correlation_id)
            continue;
        s->awaiting = false;
        sp_offset_spec o = cmd->u.consumer_update.offset;
        stream_start start = sc_start_of(o);
        if (o.type != SP_OFFSET_NONE && !sc_sub_seek(s, &start))
            log_msg(LOG_WARNING, "stream connection %s: cannot move subscription %u", c->peer,
                    s->id);
        sc_sub_deliver(c, s);
        return;
    }
}
