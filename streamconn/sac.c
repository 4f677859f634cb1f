/* Single active consumer (RabbitMQ 3.11+'s rabbit_stream_sac_coordinator,
 * one node): the subscriptions of one stream that share a "name" form a
 * group, on any connection of the hub; the oldest is active and the only
 * one delivered to. The server tells a subscription it became active with
 * ConsumerUpdate(active) and delivers once the client answered with where
 * to start (its offset specification; "none" keeps the reader where it
 * is). When the active one leaves (Unsubscribe, its connection closes),
 * the next oldest is told. On a super stream's partition (the
 * super-stream property) the active one is member (partition index mod
 * group size) instead, so a group subscribed to every partition spreads
 * them over its members, Kafka-style; a join or a leave moves partitions,
 * the member stepping down told with ConsumerUpdate(not active). A group
 * is found by walking the hub's connections: groups are small and change
 * only on (un)subscribe. */
#include <stdlib.h>
#include <string.h>

#include "sconn_int.h"

static bool same_group(const sc_sub *a, const sc_sub *b)
{
    return a != b && b->sac && a->st->q == b->st->q && a->name_len == b->name_len &&
           memcmp(a->name, b->name, a->name_len) == 0;
}

#define GROUP_MAX 1024 /* members looked at; more in one group are never chosen */

typedef struct group {
    sc_sub *sub[GROUP_MAX];
    sconn *owner[GROUP_MAX];
    size_t n;
} group;

/* The group of `s` (with `s` unless it is `leaving`), oldest first. */
static void group_of(sconn_hub *h, sc_sub *s, const sc_sub *leaving, group *g)
{
    g->n = 0;
    for (sconn *c = h->conns; c; c = c->next) {
        if (c->state != SC_OPEN)
            continue;
        for (int i = 0; i < SC_IDS && g->n < GROUP_MAX; i++) {
            sc_sub *o = c->subs[i];
            if (!o || o == leaving || (o != s && !same_group(s, o)))
                continue;
            size_t at = g->n++; /* insertion by sac_seq: groups are small */
            while (at > 0 && g->sub[at - 1]->sac_seq > o->sac_seq) {
                g->sub[at] = g->sub[at - 1];
                g->owner[at] = g->owner[at - 1];
                at--;
            }
            g->sub[at] = o;
            g->owner[at] = c;
        }
    }
}

static void tell(sconn *c, sc_sub *s, bool active)
{
    s->active = active;
    s->awaiting = true;
    s->update_correlation = ++c->correlation;
    sp_buf b = sc_out(c, 16);
    sp_encode_consumer_update(&b, s->update_correlation, s->id, active);
    sc_commit(c, &b);
}

/* Makes the member the group should have active so: the oldest -- or, for
 * a super stream's partition, member (index mod size), so that a group
 * consuming every partition spreads them over its members (RabbitMQ's
 * rabbit_stream_sac_coordinator). The one that steps down is told too. */
static void rebalance(sconn_hub *h, sc_sub *s, const sc_sub *leaving)
{
    group *g = malloc(sizeof *g);
    if (!g)
        return;
    group_of(h, s, leaving, g);
    if (g->n) {
        size_t want = s->partition >= 0 ? (size_t)s->partition % g->n : 0;
        for (size_t i = 0; i < g->n; i++)
            if (g->sub[i]->active && i != want)
                tell(g->owner[i], g->sub[i], false);
        if (!g->sub[want]->active)
            tell(g->owner[want], g->sub[want], true);
    }
    free(g);
}

void sc_sac_joined(sconn *c, sc_sub *s)
{
    s->sac_seq = ++c->hub->sac_seq;
    rebalance(c->hub, s, NULL);
}

void sc_sac_left(sconn *c, sc_sub *s, bool promote)
{
    if (promote && (s->active || s->partition >= 0))
        rebalance(c->hub, s, s);
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
        if (s->active && o.type != SP_OFFSET_NONE && !sc_sub_seek(s, &start))
            log_msg(LOG_WARNING, "stream connection %s: cannot move subscription %u", c->peer,
                    s->id);
        sc_sub_deliver(c, s);
        return;
    }
}
