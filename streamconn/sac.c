/* Single active consumer (RabbitMQ 3.11+'s rabbit_stream_sac_coordinator,
 * one node): the subscriptions of one stream that share a "name" form a
 * group, on any connection of the hub, and one of them is active, the only
 * one delivered to: the oldest, or for a super stream's partition (the
 * subscription named its super stream) the member at the partition's index
 * modulo the group's size, in subscription order, so a group spread over
 * the partitions gives each member its share (Kafka-style). The server
 * tells a subscription it became active with ConsumerUpdate(active) and
 * delivers once the client answered with where to start (its offset
 * specification; "none" keeps the reader where it is); one that stops
 * being active hears ConsumerUpdate(inactive), and its successor is told
 * only once it answered (RabbitMQ's step-down: it may store its offset
 * first) or left. The choice is made again when a member joins or leaves
 * (Unsubscribe, its connection closes) and after a step-down. A
 * group is found by walking the hub's connections: groups are small and
 * change only on (un)subscribe. */
#include <string.h>

#include "sconn_int.h"

#define GROUP_MAX 64 /* members weighed at once; past it the oldest are */

typedef struct member {
    sconn *c;
    sc_sub *s;
} member;

static bool same_group(const sc_sub *a, const sc_sub *b)
{
    return b->sac && a->st->q == b->st->q && a->name_len == b->name_len &&
           memcmp(a->name, b->name, a->name_len) == 0;
}

/* The group of `s` (s itself only when `with_s`), oldest first. */
static size_t group_of(sconn_hub *h, const sc_sub *s, bool with_s, member *out)
{
    size_t n = 0;
    for (sconn *c = h->conns; c; c = c->next) {
        for (int i = 0; c->state == SC_OPEN && i < SC_IDS; i++) {
            sc_sub *o = c->subs[i];
            if (!o || !same_group(s, o) || (o == s && !with_s))
                continue;
            size_t at = n < GROUP_MAX ? n++ : GROUP_MAX - 1;
            if (at == GROUP_MAX - 1 && out[at].s && out[at].s->sac_seq < o->sac_seq)
                continue; /* full: keep the oldest */
            while (at > 0 && out[at - 1].s->sac_seq > o->sac_seq) {
                out[at] = out[at - 1];
                at--;
            }
            out[at] = (member){c, o};
        }
    }
    return n;
}

static void tell(sconn *c, sc_sub *s, bool active)
{
    s->active = active;
    s->awaiting = active;
    s->stepping_down = !active;
    s->update_correlation = ++c->correlation;
    sp_buf b = sc_out(c, 16);
    sp_encode_consumer_update(&b, s->update_correlation, s->id, active);
    sc_commit(c, &b);
}

/* Makes the group's chosen member the active one, and only it. */
static void rebalance(sconn_hub *h, const sc_sub *s, bool with_s)
{
    member m[GROUP_MAX] = {{0}};
    size_t n = group_of(h, s, with_s, m);
    if (!n)
        return;
    size_t chosen = m[0].s->partition >= 0 ? (size_t)m[0].s->partition % n : 0;
    bool stepping = false;
    for (size_t i = 0; i < n; i++) {
        if (i != chosen && m[i].s->active)
            tell(m[i].c, m[i].s, false);
        stepping |= i != chosen && m[i].s->stepping_down;
    }
    if (!m[chosen].s->active && !stepping)
        tell(m[chosen].c, m[chosen].s, true);
}

void sc_sac_joined(sconn *c, sc_sub *s)
{
    s->sac_seq = ++c->hub->sac_seq;
    rebalance(c->hub, s, true);
}

void sc_sac_left(sconn *c, sc_sub *s, bool promote)
{
    if (promote)
        rebalance(c->hub, s, false);
}

void sc_sac_updated(sconn *c, const sp_command *cmd)
{
    for (int i = 0; i < SC_IDS; i++) {
        sc_sub *s = c->subs[i];
        if (!s || s->update_correlation != cmd->correlation_id)
            continue;
        if (s->stepping_down) { /* it let go: its successor's turn */
            s->stepping_down = false;
            rebalance(c->hub, s, true);
            return;
        }
        if (!s->awaiting)
            return;
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
