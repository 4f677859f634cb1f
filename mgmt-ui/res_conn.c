/* Connections, channels and consumers: /api/connections (GET, GET one,
 * DELETE = close with 320 and the X-Reason header), .../channels,
 * /api/channels, /api/consumers. Lists identify a connection by its id
 * and a channel by (connection id << 16 | number), so rendering finds
 * them again or skips them if they closed meanwhile.
 */
#include <stdio.h>
#include <string.h>

#include "mgmt_int.h"

#define CHAN_ID(c, n) (conn_id(c) << 16 | (n))

static const stat_id chan_stats[] = {
    STAT_ACK, STAT_CONFIRM, STAT_DELIVER, STAT_DELIVER_NO_ACK, STAT_DROP_UNROUTABLE, STAT_GET,
    STAT_GET_EMPTY, STAT_GET_NO_ACK, STAT_PUBLISH, STAT_REDELIVER, STAT_RETURN_UNROUTABLE,
};

static void chan_name(conn *c, chan *ch, char *out, size_t cap)
{
    conn_info ci;
    conn_describe(c, &ci);
    snprintf(out, cap, "%s (%u)", ci.name, chan_number(ch));
}

/* ---- connections -------------------------------------------------------- */

static void user_provided_name(mgmt_json *w, amqp_bytes props)
{
    amqp_field f;
    if (props.len && amqp_table_get(props, "connection_name", &f) && f.type == 'S')
        mgmt_json_kbytes(w, "user_provided_name", f.v.bytes);
}

static void conn_json(mgmt_req *r, mgmt_json *w, conn *c)
{
    conn_info ci;
    tls_description tls; /* all "" for a plain connection, as RabbitMQ writes them */
    conn_describe(c, &ci);
    bool ssl = transport_is_tls(ci.transport);
    transport_tls_describe(ci.transport, &tls);
    /* over TLS without a client certificate, RabbitMQ 3.10 writes null */
    bool no_cert = ssl && !tls.peer_cert;
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "auth_mechanism", ci.auth_mechanism);
    mgmt_json_kuint(w, "channel_max", ci.channel_max);
    mgmt_json_kuint(w, "channels", ci.channels);
    mgmt_json_key(w, "client_properties");
    mgmt_json_table(w, ci.client_properties);
    mgmt_json_kuint(w, "connected_at", ci.connected_at);
    mgmt_json_kuint(w, "frame_max", ci.frame_max);
    mgmt_json_kstr(w, "host", ci.host);
    mgmt_json_kstr(w, "name", ci.name);
    mgmt_json_kstr(w, "node", server_node_name(r->s));
    static const char *const cert_keys[] = {"peer_cert_issuer", "peer_cert_subject",
                                            "peer_cert_validity"};
    const char *cert_values[] = {tls.peer_issuer, tls.peer_subject, tls.peer_validity};
    for (int i = 0; i < 3; i++)
        if (no_cert)
            mgmt_json_knull(w, cert_keys[i]);
        else
            mgmt_json_kstr(w, cert_keys[i], cert_values[i]);
    mgmt_json_kstr(w, "peer_host", ci.peer_host);
    mgmt_json_kint(w, "peer_port", ci.peer_port);
    mgmt_json_kint(w, "port", ci.port);
    mgmt_json_kstr(w, "protocol", "AMQP 0-9-1");
    mgmt_stat(r, w, "recv_cnt", ci.stats->n[STAT_RECV_CNT], ci.stats, STAT_RECV_CNT);
    mgmt_stat(r, w, "recv_oct", ci.stats->n[STAT_RECV_OCT], ci.stats, STAT_RECV_OCT);
    mgmt_stat(r, w, "send_cnt", ci.stats->n[STAT_SEND_CNT], ci.stats, STAT_SEND_CNT);
    mgmt_stat(r, w, "send_oct", ci.stats->n[STAT_SEND_OCT], ci.stats, STAT_SEND_OCT);
    mgmt_json_kuint(w, "send_pend", ci.send_pend);
    mgmt_json_kbool(w, "ssl", ssl);
    mgmt_json_kstr(w, "ssl_cipher", tls.cipher);
    mgmt_json_kstr(w, "ssl_hash", tls.hash);
    mgmt_json_kstr(w, "ssl_key_exchange", tls.key_exchange);
    mgmt_json_kstr(w, "ssl_protocol", tls.protocol);
    mgmt_json_kstr(w, "state", ci.state);
    mgmt_json_kuint(w, "timeout", ci.heartbeat);
    mgmt_json_kstr(w, "type", ci.trusted ? "direct" : "network");
    mgmt_json_kstr(w, "user", ci.user);
    user_provided_name(w, ci.client_properties);
    mgmt_json_kstr(w, "user_who_performed_action", ci.user);
    mgmt_json_kstr(w, "vhost", ci.vhost);
    mgmt_json_end_obj(w);
}

static bool render_conn(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    conn *c = admin_conn_find(r->s, it->id);
    if (!c)
        return mgmt_stream_conn_render(r, w, it->id, true);
    conn_json(r, w, c);
    return true;
}

static bool render_one_conn(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    conn *c = admin_conn_find(r->s, it->id);
    if (!c)
        return mgmt_stream_conn_render(r, w, it->id, false);
    conn_json(r, w, c);
    return true;
}

/* Numeric sort keys a connection list may ask for. */
static bool conn_sort_key(const conn_info *ci, const char *sort, double *out)
{
    const struct { const char *key; stat_id f; } io[] = {
        {"recv_oct", STAT_RECV_OCT}, {"send_oct", STAT_SEND_OCT},
        {"recv_cnt", STAT_RECV_CNT}, {"send_cnt", STAT_SEND_CNT},
    };
    if (!sort)
        return false;
    for (size_t i = 0; i < 4; i++)
        if (strcmp(sort, io[i].key) == 0)
            return *out = (double)ci->stats->n[io[i].f], true;
    if (strcmp(sort, "channels") == 0)
        return *out = ci->channels, true;
    if (strcmp(sort, "connected_at") == 0)
        return *out = (double)ci->connected_at, true;
    return false;
}

/* Open connections (of vhost `only`, or all). */
static void list_conns(mgmt_req *r, vhost *only)
{
    mgmt_list *l = mgmt_list_begin(r);
    if (!l)
        return;
    const char *sort = mgmt_list_query_of(l)->sort;
    for (size_t i = 0; i < server_conn_count(r->s); i++) {
        conn_info ci;
        double key = 0;
        conn_describe(server_conn_at(r->s, i), &ci);
        if ((only && strcmp(ci.vhost, vhost_name(only)) != 0) || !mgmt_sees_user(r, ci.user))
            continue;
        bool has = conn_sort_key(&ci, sort, &key);
        mgmt_list_add(l, ci.vhost, AMQP_CSTR(ci.name), ci.id, key, has);
    }
    mgmt_stream_conns_add(r, l, only);
    mgmt_list_send(r, l, render_conn);
}

static void get_conns(mgmt_req *r) { list_conns(r, NULL); }

static void get_vhost_conns(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (v)
        list_conns(r, v);
}

static conn *find_conn(mgmt_req *r, amqp_bytes name)
{
    for (size_t i = 0; i < server_conn_count(r->s); i++) {
        conn_info ci;
        conn_describe(server_conn_at(r->s, i), &ci);
        if (amqp_bytes_equal_cstr(name, ci.name))
            return server_conn_at(r->s, i);
    }
    return NULL;
}

/* Another user's connection (or its channel) for a user who may not see
 * it, or not close it: 401 sent. */
static bool conn_refused(mgmt_req *r, conn *c)
{
    conn_info ci;
    if (!c)
        return false;
    conn_describe(c, &ci);
    if (mgmt_user_object_allowed(r, ci.user))
        return false;
    mgmt_error(r, 401, "not_authorised", "User not authorised to access object");
    return true;
}

/* A stream connection by that name (RabbitMQ 3.10 serves them here too):
 * true when there was one and the reply is sent. */
static bool stream_conn_named(mgmt_req *r, bool delete)
{
    const char *user;
    sconn *c = mgmt_stream_conn_named(r, r->cap[0], &user);
    if (!c)
        return false;
    if (!mgmt_user_object_allowed(r, user)) {
        mgmt_error(r, 401, "not_authorised", "User not authorised to access object");
    } else if (delete) {
        sconn_force_close(c, mgmt_header(r, "X-Reason"));
        mgmt_send_empty(r, 204, NULL);
    } else {
        sconn_info ci;
        sconn_describe(c, &ci);
        mgmt_list_item it = {.id = ci.id};
        mgmt_object_send(r, render_one_conn, &it);
    }
    return true;
}

static void get_conn(mgmt_req *r)
{
    conn *c = find_conn(r, r->cap[0]);
    mgmt_list_item it = {.id = c ? conn_id(c) : 0};
    if (!c && stream_conn_named(r, false))
        return;
    if (!conn_refused(r, c))
        mgmt_object_send(r, render_one_conn, &it);
}

static void delete_conn(mgmt_req *r)
{
    conn *c = find_conn(r, r->cap[0]);
    if (!c && stream_conn_named(r, true))
        return;
    if (!c) {
        mgmt_not_found(r);
        return;
    }
    if (conn_refused(r, c))
        return;
    conn_force_close(c, mgmt_header(r, "X-Reason"));
    mgmt_send_empty(r, 204, NULL);
}

/* ---- channels ----------------------------------------------------------- */

void mgmt_channel_details(mgmt_json *w, conn *c, chan *ch)
{
    conn_info ci;
    char name[200];
    conn_describe(c, &ci);
    chan_name(c, ch, name, sizeof name);
    mgmt_json_kstr(w, "connection_name", ci.name);
    mgmt_json_kstr(w, "name", name);
    mgmt_json_kint(w, "number", chan_number(ch));
    mgmt_json_kstr(w, "peer_host", ci.peer_host);
    mgmt_json_kint(w, "peer_port", ci.peer_port);
    mgmt_json_kstr(w, "user", ci.user);
}

static void conn_details(mgmt_json *w, const conn_info *ci)
{
    mgmt_json_key(w, "connection_details");
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "name", ci->name);
    mgmt_json_kstr(w, "peer_host", ci->peer_host);
    mgmt_json_kint(w, "peer_port", ci->peer_port);
    mgmt_json_end_obj(w);
}

static void chan_json(mgmt_req *r, mgmt_json *w, conn *c, chan *ch)
{
    conn_info ci;
    chan_info info;
    char name[200];
    conn_describe(c, &ci);
    chan_describe(ch, &info);
    chan_name(c, ch, name, sizeof name);
    mgmt_json_obj(w);
    mgmt_json_kuint(w, "acks_uncommitted", info.uncommitted_acks);
    mgmt_json_kbool(w, "confirm", info.confirm);
    conn_details(w, &ci);
    mgmt_json_kuint(w, "consumer_count", info.consumers);
    mgmt_json_kuint(w, "global_prefetch_count", info.global_prefetch_count);
    mgmt_message_stats(r, w, info.stats, chan_stats, sizeof chan_stats / sizeof chan_stats[0],
                       true);
    mgmt_json_kuint(w, "messages_unacknowledged", info.unacked);
    mgmt_json_kuint(w, "messages_uncommitted", info.uncommitted_msgs);
    mgmt_json_kuint(w, "messages_unconfirmed", info.unconfirmed);
    mgmt_json_kstr(w, "name", name);
    mgmt_json_kstr(w, "node", server_node_name(r->s));
    mgmt_json_kuint(w, "number", info.number);
    if (info.oldest_unacked_ms)
        mgmt_json_kuint(w, "oldest_unacked_age_ms", loop_now_ms(admin_loop(r->s)) - info.oldest_unacked_ms);
    mgmt_json_kuint(w, "prefetch_count", info.prefetch_count);
    mgmt_json_kstr(w, "state", "running");
    mgmt_json_kbool(w, "transactional", info.transactional);
    mgmt_json_kstr(w, "user", ci.user);
    mgmt_json_kstr(w, "user_who_performed_action", ci.user);
    mgmt_json_kstr(w, "vhost", ci.vhost);
    mgmt_json_end_obj(w);
}

static chan *chan_by_id(mgmt_req *r, uint64_t id, conn **c)
{
    *c = admin_conn_find(r->s, id >> 16);
    return *c ? conn_channel_find(*c, (uint16_t)(id & 0xffff)) : NULL;
}

static bool render_chan(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    conn *c;
    chan *ch = chan_by_id(r, it->id, &c);
    if (!ch)
        return false;
    chan_json(r, w, c, ch);
    return true;
}

static void add_channels(mgmt_list *l, conn *c)
{
    conn_info ci;
    conn_describe(c, &ci);
    const char *sort = mgmt_list_query_of(l)->sort;
    for (uint32_t slot = 0; slot < conn_channel_slots(c); slot++) {
        chan *ch = conn_channel_at(c, slot);
        if (!ch)
            continue;
        char name[200];
        chan_info info;
        double key = 0;
        chan_describe(ch, &info);
        chan_name(c, ch, name, sizeof name);
        bool has = sort && mgmt_stat_sort_key(info.stats, sort, &key);
        if (sort && strcmp(sort, "messages_unacknowledged") == 0)
            key = info.unacked, has = true;
        mgmt_list_add(l, ci.vhost, AMQP_CSTR(name), CHAN_ID(c, chan_number(ch)), key, has);
    }
}

static void list_chans(mgmt_req *r, vhost *only, conn *of)
{
    mgmt_list *l = mgmt_list_begin(r);
    if (!l)
        return;
    for (size_t i = 0; i < server_conn_count(r->s); i++) {
        conn *c = server_conn_at(r->s, i);
        conn_info ci;
        conn_describe(c, &ci);
        if ((of && c != of) || (only && strcmp(ci.vhost, vhost_name(only)) != 0) ||
            !mgmt_sees_user(r, ci.user))
            continue;
        add_channels(l, c);
    }
    mgmt_list_send(r, l, render_chan);
}

static void get_chans(mgmt_req *r) { list_chans(r, NULL, NULL); }

static void get_vhost_chans(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (v)
        list_chans(r, v, NULL);
}

static void get_conn_chans(mgmt_req *r)
{
    conn *c = find_conn(r, r->cap[0]);
    if (!c)
        mgmt_not_found(r);
    else if (!conn_refused(r, c))
        list_chans(r, NULL, c);
}

static void get_chan(mgmt_req *r)
{
    mgmt_list_item it = {0};
    conn *of = NULL;
    for (size_t i = 0; i < server_conn_count(r->s) && !it.id; i++) {
        conn *c = server_conn_at(r->s, i);
        for (uint32_t slot = 0; slot < conn_channel_slots(c) && !it.id; slot++) {
            chan *ch = conn_channel_at(c, slot);
            char name[200];
            if (ch && (chan_name(c, ch, name, sizeof name), amqp_bytes_equal_cstr(r->cap[0], name)))
                it.id = CHAN_ID(c, chan_number(ch)), of = c;
        }
    }
    if (!conn_refused(r, of))
        mgmt_object_send(r, render_chan, &it);
}

/* ---- consumers ---------------------------------------------------------- */

void mgmt_consumer_json(mgmt_req *r, mgmt_json *w, conn *c, chan *ch, const consumer *cons)
{
    (void)r;
    mgmt_json_obj(w);
    mgmt_json_key(w, "arguments"); /* as basic.consume gave them */
    mgmt_json_table(w, (amqp_bytes){cons->arguments, cons->arguments_len});
    mgmt_json_kbool(w, "ack_required", !cons->no_ack);
    mgmt_json_kbool(w, "active", true);
    mgmt_json_kstr(w, "activity_status", "up");
    mgmt_json_key(w, "channel_details");
    mgmt_json_obj(w);
    mgmt_channel_details(w, c, ch);
    mgmt_json_kstr(w, "node", server_node_name(r->s));
    mgmt_json_end_obj(w);
    mgmt_json_kstr(w, "consumer_tag", cons->tag);
    mgmt_json_kbool(w, "exclusive", cons->exclusive);
    mgmt_stream_consumer_offsets(w, cons); /* a stream's consumer: where it reads */
    mgmt_json_kuint(w, "prefetch_count", cons->prefetch);
    mgmt_json_key(w, "queue");
    mgmt_json_obj(w);
    mgmt_json_kbytes(w, "name", queue_name(cons->q));
    mgmt_json_kstr(w, "vhost", vhost_name(queue_vhost(cons->q)));
    mgmt_json_end_obj(w);
    mgmt_json_end_obj(w);
}

static bool render_with(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it,
                        void (*render)(mgmt_req *, mgmt_json *, conn *, chan *, const consumer *))
{
    conn *c;
    chan *ch = chan_by_id(r, it->id, &c);
    for (consumer *cons = ch ? chan_consumers(ch) : NULL; cons; cons = cons->ch_next)
        if (cons->q && amqp_bytes_equal_cstr(it->name, cons->tag)) {
            render(r, w, c, ch, cons);
            return true;
        }
    return false;
}

static bool render_consumer(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    return render_with(r, w, it, mgmt_consumer_json);
}

bool mgmt_render_amqp_stream_consumer(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    mgmt_list_item plain = *it;
    plain.id &= ~MGMT_AMQP_ITEM;
    return render_with(r, w, &plain, mgmt_stream_consumer_json);
}

/* Consumers of vhost `only` (or all) on connections the user sees into
 * `l`: its own (every one for administrators and monitoring users), as
 * RabbitMQ filters this list by user; with `streams`, only consumers of
 * streams, their ids marked with MGMT_AMQP_ITEM. */
static void add_consumers(mgmt_req *r, mgmt_list *l, vhost *only, bool streams)
{
    for (size_t i = 0; i < server_conn_count(r->s); i++) {
        conn *c = server_conn_at(r->s, i);
        conn_info ci;
        conn_describe(c, &ci);
        if ((only && strcmp(ci.vhost, vhost_name(only)) != 0) || !mgmt_sees_user(r, ci.user))
            continue;
        for (uint32_t slot = 0; slot < conn_channel_slots(c); slot++) {
            chan *ch = conn_channel_at(c, slot);
            for (consumer *cons = ch ? chan_consumers(ch) : NULL; cons; cons = cons->ch_next)
                if (cons->q && (!streams || queue_is_stream(cons->q)))
                    mgmt_list_add(l, ci.vhost, AMQP_CSTR(cons->tag),
                                  CHAN_ID(c, chan_number(ch)) | (streams ? MGMT_AMQP_ITEM : 0), 0,
                                  false);
        }
    }
}

void mgmt_amqp_stream_consumers_add(mgmt_req *r, mgmt_list *l, vhost *only)
{
    add_consumers(r, l, only, true);
}

static void consumers_send(mgmt_req *r, vhost *only)
{
    mgmt_list *l = mgmt_list_begin(r);
    if (!l)
        return;
    add_consumers(r, l, only, false);
    mgmt_list_send(r, l, render_consumer);
}

static void get_consumers(mgmt_req *r) { consumers_send(r, NULL); }

/* A vhost the user may not see is refused as the other per-vhost lists
 * refuse it. RabbitMQ 3.10.8 alone does not check the vhost here and
 * answers 200 [] (the list shows a non-monitoring user only its own
 * consumers, and it has none there). */
static void get_vhost_consumers(mgmt_req *r)
{
    vhost *v = server_vhost(r->s, r->cap[0]);
    if (!v)
        mgmt_not_found(r);
    else if (!mgmt_vhost_visible(r, v))
        mgmt_error(r, 401, "not_authorised", "User not authorised to access virtual host");
    else
        consumers_send(r, v);
}

const mgmt_route mgmt_connection_routes[] = {
    {HTTP_GET, "/api/connections", TAG_MANAGEMENT, get_conns},
    {HTTP_GET, "/api/connections/{}", TAG_MANAGEMENT, get_conn},
    {HTTP_DELETE, "/api/connections/{}", TAG_MANAGEMENT, delete_conn},
    {HTTP_GET, "/api/connections/{}/channels", TAG_MANAGEMENT, get_conn_chans},
    {HTTP_GET, "/api/vhosts/{}/connections", TAG_MANAGEMENT, get_vhost_conns},
    {HTTP_GET, "/api/channels", TAG_MANAGEMENT, get_chans},
    {HTTP_GET, "/api/channels/{}", TAG_MANAGEMENT, get_chan},
    {HTTP_GET, "/api/vhosts/{}/channels", TAG_MANAGEMENT, get_vhost_chans},
    {HTTP_GET, "/api/consumers", TAG_MANAGEMENT, get_consumers},
    {HTTP_GET, "/api/consumers/{}", TAG_MANAGEMENT, get_vhost_consumers},
    {0},
};
