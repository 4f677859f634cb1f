/* What the management API shows of stream connections, their publishers
 * and their subscriptions (RabbitMQ 3.10's rabbitmq_stream_management). */
#include <string.h>

#include "sconn_int.h"

sconn *sconn_hub_next(sconn_hub *h, const sconn *prev)
{
    sconn *c = prev ? prev->next : h->conns;
    while (c && c->state != SC_OPEN)
        c = c->next;
    return c;
}

sconn *sconn_hub_find(sconn_hub *h, uint64_t id)
{
    for (sconn *c = sconn_hub_next(h, NULL); c; c = sconn_hub_next(h, c))
        if (c->id == id)
            return c;
    return NULL;
}

void sconn_describe(const sconn *c, sconn_info *out)
{
    *out = (sconn_info){.id = c->id,
                        .name = c->name,
                        .peer_host = c->peer_host,
                        .host = c->host,
                        .peer_port = c->peer_port,
                        .port = c->port,
                        .user = c->user ? c->user : "",
                        .vhost = c->vh ? vhost_name(c->vh) : "",
                        .auth_mechanism = c->mechanism,
                        .frame_max = c->frame_max,
                        .heartbeat = c->heartbeat,
                        .connected_at = c->connected_at,
                        .send_pend = transport_pending(c->t),
                        .client_properties = {c->client_props, c->client_props_len,
                                              c->client_props_count},
                        .transport = c->t};
}

void sconn_foreach_publisher(sconn *c, void (*fn)(void *arg, const sconn_publisher_info *p),
                             void *arg)
{
    for (int i = 0; i < SC_IDS; i++) {
        sc_publisher *p = c->pubs[i];
        if (!p)
            continue;
        char ref[sizeof p->reference + 1];
        memcpy(ref, p->reference, p->ref_len);
        ref[p->ref_len] = 0;
        sconn_publisher_info info = {(uint8_t)i, p->st->name, ref, p->published, p->confirmed,
                                     p->errored};
        fn(arg, &info);
    }
}

void sconn_foreach_consumer(sconn *c, void (*fn)(void *arg, const sconn_consumer_info *s),
                            void *arg)
{
    for (int i = 0; i < SC_IDS; i++) {
        sc_sub *s = c->subs[i];
        if (!s)
            continue;
        char name[sizeof s->name + 1];
        memcpy(name, s->name, s->name_len);
        name[s->name_len] = 0;
        stream_info log;
        stream_get_info(queue_stream_log(s->st->q), &log);
        uint64_t next = stream_reader_offset(s->r);
        uint64_t offset = s->records && next ? next - 1 : 0;
        uint64_t last = log.committed_offset ? log.committed_offset - 1 : 0;
        sconn_consumer_info info = {.id = (uint8_t)i,
                                    .stream = s->st->name,
                                    .name = name,
                                    .consumed = s->records,
                                    .offset = offset,
                                    .offset_lag = last > offset ? last - offset : 0,
                                    .credits = s->credit,
                                    .single_active = s->sac,
                                    .active = !s->sac || s->active};
        fn(arg, &info);
    }
}

/* RabbitMQ 3.10.8 (live) closes the socket without a Close frame. */
void sconn_force_close(sconn *c, const char *reason)
{
    log_msg(LOG_INFO, "stream connection %s closed via the management API: %s", c->peer,
            reason && *reason ? reason : "Closed via management plugin");
    sc_teardown(c);
}
