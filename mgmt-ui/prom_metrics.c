/* What /metrics says: rabbitmq_prometheus's families (names, types, HELP
 * lines and labels as RabbitMQ 3.10.8 writes them) for what Warren has,
 * then Warren's queue health families (warren_ prefix).
 *
 * `families` is a table, in RabbitMQ's order. Each family belongs to a
 * scope: the node (one value, or a few with fixed labels), or queues,
 * channels or connections, whose values come from one function per scope
 * (queue_values, chan_values, conn_values) indexed by the family's `value`.
 *
 * Aggregated (/metrics): a scope's families are the sum over its objects
 * (the max for ages), computed in one pass per scope when the scrape
 * starts; the reply is a few kilobytes whatever the number of queues.
 * Per object (/metrics/per-object): the scrape takes a snapshot of the
 * queue names, channel and connection ids (mgmt_list) and writes family by
 * family, object by object, looking each object up again: prom_scrape_step
 * stops after about `budget` bytes and resumes at (family, object), so the
 * caller can yield to the loop between slices; an object gone meanwhile is
 * skipped.
 *
 * Label keys are RabbitMQ's: queues {vhost, queue}; channels {channel}, the
 * channel's management API name ("127.0.0.1:5555 -> 127.0.0.1:5672 (1)")
 * where RabbitMQ shows a pid; connections {channel} too (RabbitMQ 3.10
 * labels connection metrics with "channel"), with the connection's name.
 * RabbitMQ counts publishes per (channel, exchange) and deliveries per
 * (channel, queue); Warren counts them per channel, so those families carry
 * the channel label only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include "mgmt_int.h"

#define PROM_VERSION "3.10.8" /* the rabbitmq_prometheus Warren answers as */
#define WARREN_VERSION "0.1.0"

enum scope { NODE, QUEUE, CHAN, CONN };
enum { F_SECONDS = 1, F_MAX = 2, F_BUCKETS = 4 }; /* value in ms shown as s; aggregated as max */
enum labels { L_NONE, L_PROTO, L_PROTO_QT, L_AUTH, L_BUILD, L_IDENTITY };

enum node_value {
    NV_ALARM_MEM, NV_CONN_OPENED, NV_CONN_CLOSED, NV_CHAN_OPENED, NV_CHAN_CLOSED,
    NV_Q_DECLARED, NV_Q_CREATED, NV_Q_DELETED, NV_OPEN_FDS, NV_OPEN_SOCKETS, NV_RSS, NV_DISK,
    NV_MAX_FDS, NV_MEM_LIMIT,
    NV_AUTH_HTTP, NV_AUTH_AMQP, NV_AUTH_OK_HTTP, NV_AUTH_OK_AMQP, NV_AUTH_BAD_HTTP,
    NV_AUTH_BAD_AMQP,
    NV_CONNECTIONS, NV_CHANNELS, NV_CONSUMERS, NV_QUEUES,
    NV_ACK, NV_CONFIRM, NV_CONSUME_AUTO, NV_CONSUME_MANUAL, NV_GET_AUTO, NV_GET_MANUAL,
    NV_DELIVERED, NV_GET_EMPTY, NV_RECEIVED_CONFIRM, NV_RECEIVED, NV_REDELIVERED, NV_ROUTED,
    NV_DROPPED, NV_RETURNED,
    NV_COUNT
};

enum queue_value {
    QV_READY, QV_UNACKED, QV_MESSAGES, QV_CONSUMERS, QV_MEMORY, QV_READY_BYTES, QV_UNACKED_BYTES,
    QV_BYTES, QV_PUBLISHED,
    QV_OLDEST_READY, QV_OLDEST_UNACKED, QV_DELAYED, QV_LIMIT_DEAD, QV_TIMEOUTS,
    QV_MOVED, QV_MOVE_LEFT,
    QV_DC, /* QUEUE_DC_BUCKETS of them */
    QV_COUNT = QV_DC + QUEUE_DC_BUCKETS
};

enum chan_value {
    CV_CONSUMERS, CV_UNACKED, CV_UNCONFIRMED, CV_UNCOMMITTED, CV_ACKS_UNCOMMITTED, CV_PREFETCH,
    CV_GLOBAL_PREFETCH, CV_PUBLISHED, CV_CONFIRMED, CV_RETURNED, CV_DROPPED, CV_GET_ACK, CV_GET,
    CV_DELIVERED_ACK, CV_DELIVERED, CV_REDELIVERED, CV_ACKED, CV_GET_EMPTY,
    CV_COUNT
};

enum conn_value { XV_RECV_OCT, XV_SEND_OCT, XV_RECV_CNT, XV_SEND_CNT, XV_CHANNELS, XV_COUNT };

typedef struct family {
    const char *name, *type, *help;
    uint8_t scope, value, flags, labels;
} family;

#define N(name, type, help, v) {"rabbitmq_" name, type, help, NODE, v, 0, L_NONE}
#define NL(name, type, help, v, l) {"rabbitmq_" name, type, help, NODE, v, 0, l}
#define Q(name, type, help, v) {"rabbitmq_" name, type, help, QUEUE, v, 0, 0}
#define C(name, type, help, v) {"rabbitmq_" name, type, help, CHAN, v, 0, 0}
#define X(name, type, help, v) {"rabbitmq_" name, type, help, CONN, v, 0, 0}

static const family families[] = {
    N("alarms_memory_used_watermark", "untyped",
      "is 1 if VM memory watermark alarm is in effect", NV_ALARM_MEM),
    N("connections_opened_total", "counter", "Total number of connections opened", NV_CONN_OPENED),
    N("connections_closed_total", "counter", "Total number of connections closed or terminated",
      NV_CONN_CLOSED),
    N("channels_opened_total", "counter", "Total number of channels opened", NV_CHAN_OPENED),
    N("channels_closed_total", "counter", "Total number of channels closed", NV_CHAN_CLOSED),
    N("queues_declared_total", "counter", "Total number of queues declared", NV_Q_DECLARED),
    N("queues_created_total", "counter", "Total number of queues created", NV_Q_CREATED),
    N("queues_deleted_total", "counter", "Total number of queues deleted", NV_Q_DELETED),
    N("process_open_fds", "gauge", "Open file descriptors", NV_OPEN_FDS),
    N("process_open_tcp_sockets", "gauge", "Open TCP sockets", NV_OPEN_SOCKETS),
    N("process_resident_memory_bytes", "gauge", "Memory used in bytes", NV_RSS),
    N("disk_space_available_bytes", "gauge", "Disk space available in bytes", NV_DISK),
    N("process_max_fds", "gauge", "Open file descriptors limit", NV_MAX_FDS),
    N("resident_memory_limit_bytes", "gauge", "Memory high watermark in bytes", NV_MEM_LIMIT),
    NL("auth_attempts_total", "counter", "Total number of authorization attempts", NV_AUTH_HTTP,
       L_AUTH),
    NL("auth_attempts_succeeded_total", "counter",
       "Total number of successful authentication attempts", NV_AUTH_OK_HTTP, L_AUTH),
    NL("auth_attempts_failed_total", "counter", "Total number of failed authentication attempts",
       NV_AUTH_BAD_HTTP, L_AUTH),
    Q("queue_messages_ready", "gauge", "Messages ready to be delivered to consumers", QV_READY),
    Q("queue_messages_unacked", "gauge",
      "Messages delivered to consumers but not yet acknowledged", QV_UNACKED),
    Q("queue_messages", "gauge", "Sum of ready and unacknowledged messages - total queue depth",
      QV_MESSAGES),
    Q("queue_consumers", "gauge", "Consumers on a queue", QV_CONSUMERS),
    Q("queue_process_memory_bytes", "gauge", "Memory in bytes used by the Erlang queue process",
      QV_MEMORY),
    Q("queue_messages_ready_bytes", "gauge", "Size in bytes of ready messages", QV_READY_BYTES),
    Q("queue_messages_unacked_bytes", "gauge", "Size in bytes of all unacknowledged messages",
      QV_UNACKED_BYTES),
    Q("queue_messages_bytes", "gauge", "Size in bytes of ready and unacknowledged messages",
      QV_BYTES),
    C("channel_consumers", "gauge", "Consumers on a channel", CV_CONSUMERS),
    C("channel_messages_unacked", "gauge", "Delivered but not yet acknowledged messages",
      CV_UNACKED),
    C("channel_messages_unconfirmed", "gauge", "Published but not yet confirmed messages",
      CV_UNCONFIRMED),
    C("channel_messages_uncommitted", "gauge",
      "Messages received in a transaction but not yet committed", CV_UNCOMMITTED),
    C("channel_acks_uncommitted", "gauge",
      "Message acknowledgements in a transaction not yet committed", CV_ACKS_UNCOMMITTED),
    C("consumer_prefetch", "gauge", "Limit of unacknowledged messages for each consumer",
      CV_PREFETCH),
    C("channel_prefetch", "gauge",
      "Total limit of unacknowledged messages for all consumers on a channel",
      CV_GLOBAL_PREFETCH),
    C("channel_messages_published_total", "counter",
      "Total number of messages published into an exchange on a channel", CV_PUBLISHED),
    C("channel_messages_confirmed_total", "counter",
      "Total number of messages published into an exchange and confirmed on the channel",
      CV_CONFIRMED),
    C("channel_messages_unroutable_returned_total", "counter",
      "Total number of messages published as mandatory into an exchange and returned to the "
      "publisher as unroutable",
      CV_RETURNED),
    C("channel_messages_unroutable_dropped_total", "counter",
      "Total number of messages published as non-mandatory into an exchange and dropped as "
      "unroutable",
      CV_DROPPED),
    C("channel_get_ack_total", "counter",
      "Total number of messages fetched with basic.get in manual acknowledgement mode",
      CV_GET_ACK),
    C("channel_get_total", "counter",
      "Total number of messages fetched with basic.get in automatic acknowledgement mode", CV_GET),
    C("channel_messages_delivered_ack_total", "counter",
      "Total number of messages delivered to consumers in manual acknowledgement mode",
      CV_DELIVERED_ACK),
    C("channel_messages_delivered_total", "counter",
      "Total number of messages delivered to consumers in automatic acknowledgement mode",
      CV_DELIVERED),
    C("channel_messages_redelivered_total", "counter",
      "Total number of messages redelivered to consumers", CV_REDELIVERED),
    C("channel_messages_acked_total", "counter",
      "Total number of messages acknowledged by consumers", CV_ACKED),
    C("channel_get_empty_total", "counter",
      "Total number of times basic.get operations fetched no message", CV_GET_EMPTY),
    X("connection_incoming_bytes_total", "counter",
      "Total number of bytes received on a connection", XV_RECV_OCT),
    X("connection_outgoing_bytes_total", "counter", "Total number of bytes sent on a connection",
      XV_SEND_OCT),
    X("connection_incoming_packets_total", "counter",
      "Total number of packets received on a connection", XV_RECV_CNT),
    X("connection_outgoing_packets_total", "counter",
      "Total number of packets sent on a connection", XV_SEND_CNT),
    X("connection_channels", "gauge", "Channels on a connection", XV_CHANNELS),
    Q("queue_messages_published_total", "counter", "Total number of messages published to queues",
      QV_PUBLISHED),
    N("connections", "gauge", "Connections currently open", NV_CONNECTIONS),
    N("channels", "gauge", "Channels currently open", NV_CHANNELS),
    N("consumers", "gauge", "Consumers currently connected", NV_CONSUMERS),
    N("queues", "gauge", "Queues available", NV_QUEUES),
    NL("build_info", "untyped", "RabbitMQ & Erlang/OTP version info", 0, L_BUILD),
    NL("identity_info", "untyped", "RabbitMQ node & cluster identity info", 0, L_IDENTITY),
    NL("global_consumers", "gauge", "Current number of consumers", NV_CONSUMERS, L_PROTO),
    NL("global_messages_acknowledged_total", "counter",
       "Total number of messages acknowledged by consumers", NV_ACK, L_PROTO_QT),
    NL("global_messages_confirmed_total", "counter",
       "Total number of messages confirmed to publishers", NV_CONFIRM, L_PROTO),
    NL("global_messages_delivered_consume_auto_ack_total", "counter",
       "Total number of messages delivered to consumers using basic.consume with automatic "
       "acknowledgment",
       NV_CONSUME_AUTO, L_PROTO_QT),
    NL("global_messages_delivered_consume_manual_ack_total", "counter",
       "Total number of messages delivered to consumers using basic.consume with manual "
       "acknowledgment",
       NV_CONSUME_MANUAL, L_PROTO_QT),
    NL("global_messages_delivered_get_auto_ack_total", "counter",
       "Total number of messages delivered to consumers using basic.get with automatic "
       "acknowledgment",
       NV_GET_AUTO, L_PROTO_QT),
    NL("global_messages_delivered_get_manual_ack_total", "counter",
       "Total number of messages delivered to consumers using basic.get with manual "
       "acknowledgment",
       NV_GET_MANUAL, L_PROTO_QT),
    NL("global_messages_delivered_total", "counter",
       "Total number of messages delivered to consumers", NV_DELIVERED, L_PROTO_QT),
    NL("global_messages_get_empty_total", "counter",
       "Total number of times basic.get operations fetched no message", NV_GET_EMPTY, L_PROTO_QT),
    NL("global_messages_received_confirm_total", "counter",
       "Total number of messages received from publishers expecting confirmations",
       NV_RECEIVED_CONFIRM, L_PROTO),
    NL("global_messages_received_total", "counter",
       "Total number of messages received from publishers", NV_RECEIVED, L_PROTO),
    NL("global_messages_redelivered_total", "counter",
       "Total number of messages redelivered to consumers", NV_REDELIVERED, L_PROTO_QT),
    NL("global_messages_routed_total", "counter",
       "Total number of messages routed to queues or streams", NV_ROUTED, L_PROTO),
    NL("global_messages_unroutable_dropped_total", "counter",
       "Total number of messages published as non-mandatory into an exchange and dropped as "
       "unroutable",
       NV_DROPPED, L_PROTO),
    NL("global_messages_unroutable_returned_total", "counter",
       "Total number of messages published as mandatory into an exchange and returned to the "
       "publisher as unroutable",
       NV_RETURNED, L_PROTO),
    /* Warren's queue health (the queue JSON's oldest_ready_age_ms, ...) */
    {"warren_queue_oldest_ready_age_seconds", "gauge",
     "Seconds since the oldest ready message entered the queue, 0 when none is ready "
     "(aggregated: the oldest of any queue)",
     QUEUE, QV_OLDEST_READY, F_SECONDS | F_MAX, 0},
    {"warren_queue_oldest_unacked_age_seconds", "gauge",
     "Seconds since the oldest delivery from the queue that is still unacknowledged was made, "
     "0 when none (aggregated: the oldest of any queue)",
     QUEUE, QV_OLDEST_UNACKED, F_SECONDS | F_MAX, 0},
    {"warren_queue_messages_by_delivery_count", "gauge",
     "Queued messages by how many times they were delivered (ready: so far; unacked: including "
     "the current delivery)",
     QUEUE, QV_DC, F_BUCKETS, 0},
    {"warren_queue_messages_delayed", "gauge",
     "Messages held back by delayed retry until their deadline (neither ready nor unacknowledged)",
     QUEUE, QV_DELAYED, 0, 0},
    {"warren_queue_delivery_limit_dead_lettered_total", "counter",
     "Messages the queue's delivery limit dead-lettered or dropped since the queue was declared "
     "(not kept across restarts)",
     QUEUE, QV_LIMIT_DEAD, 0, 0},
    {"warren_queue_consumer_timeouts_total", "counter",
     "Deliveries from the queue whose consumer timeout fired since the queue was declared "
     "(not kept across restarts)",
     QUEUE, QV_TIMEOUTS, 0, 0},
    {"warren_queue_redrive_moved", "gauge",
     "Messages the queue's running or last move (redrive) has moved so far", QUEUE, QV_MOVED, 0, 0},
    {"warren_queue_redrive_remaining", "gauge",
     "Messages the queue's running move (redrive) has still to move, 0 when none runs",
     QUEUE, QV_MOVE_LEFT, 0, 0},
};
#define NFAMILIES (sizeof families / sizeof families[0])

struct prom_scrape {
    mgmt *m;
    server *s;
    mgmt_prom *w;
    bool per_object;
    uint64_t node[NV_COUNT];
    uint64_t queues[QV_COUNT], chans[CV_COUNT], conns[XV_COUNT]; /* aggregated */
    mgmt_list *qlist, *clist, *xlist;                              /* per object */
    size_t fam, item;
    bool started; /* the current family's header is written */
};

/* ---- values --------------------------------------------------------------- */

static void queue_values(server *s, queue *q, bool unacked_age, uint64_t *v)
{
    queue_info qi;
    queue_describe(q, &qi);
    uint64_t now = server_now_ms(s);
    uint64_t oldest = unacked_age && qi.unacked ? mgmt_queue_oldest_unacked(s, q) : 0;
    v[QV_READY] = qi.ready;
    v[QV_UNACKED] = qi.unacked;
    v[QV_MESSAGES] = (uint64_t)qi.ready + qi.unacked;
    v[QV_CONSUMERS] = qi.consumers;
    v[QV_MEMORY] = qi.memory;
    v[QV_READY_BYTES] = qi.ready_bytes;
    v[QV_UNACKED_BYTES] = qi.unacked_bytes;
    v[QV_BYTES] = qi.ready_bytes + qi.unacked_bytes;
    v[QV_PUBLISHED] = qi.stats->n[STAT_PUBLISH];
    v[QV_OLDEST_READY] = qi.oldest_ready_ms ? now - qi.oldest_ready_ms : 0;
    v[QV_OLDEST_UNACKED] = oldest ? now - oldest : 0;
    v[QV_DELAYED] = qi.delayed;
    v[QV_LIMIT_DEAD] = qi.delivery_limit_dead;
    v[QV_TIMEOUTS] = qi.consumer_timeouts;
    move_progress mp;
    v[QV_MOVED] = v[QV_MOVE_LEFT] = 0;
    if (queue_move_progress(queue_vhost(q), queue_name(q), &mp)) {
        uint64_t skipped = 0;
        for (int i = 0; i < MOVE_SKIPS; i++)
            skipped += mp.skipped[i];
        v[QV_MOVED] = mp.moved;
        v[QV_MOVE_LEFT] = mp.state == MOVE_RUNNING ? mp.total - mp.moved - skipped : 0;
    }
    for (int i = 0; i < QUEUE_DC_BUCKETS; i++)
        v[QV_DC + i] = qi.delivery_counts[i];
}

static void chan_values(chan *ch, uint64_t *v)
{
    chan_info ci;
    chan_describe(ch, &ci);
    const uint64_t *n = ci.stats->n;
    uint64_t vals[CV_COUNT] = {
        [CV_CONSUMERS] = ci.consumers,          [CV_UNACKED] = ci.unacked,
        [CV_UNCONFIRMED] = ci.unconfirmed,      [CV_UNCOMMITTED] = ci.uncommitted_msgs,
        [CV_ACKS_UNCOMMITTED] = ci.uncommitted_acks, [CV_PREFETCH] = ci.prefetch_count,
        [CV_GLOBAL_PREFETCH] = ci.global_prefetch_count, [CV_PUBLISHED] = n[STAT_PUBLISH],
        [CV_CONFIRMED] = n[STAT_CONFIRM],       [CV_RETURNED] = n[STAT_RETURN_UNROUTABLE],
        [CV_DROPPED] = n[STAT_DROP_UNROUTABLE], [CV_GET_ACK] = n[STAT_GET],
        [CV_GET] = n[STAT_GET_NO_ACK],          [CV_DELIVERED_ACK] = n[STAT_DELIVER],
        [CV_DELIVERED] = n[STAT_DELIVER_NO_ACK], [CV_REDELIVERED] = n[STAT_REDELIVER],
        [CV_ACKED] = n[STAT_ACK],               [CV_GET_EMPTY] = n[STAT_GET_EMPTY],
    };
    memcpy(v, vals, sizeof vals);
}

static void conn_values(const conn_info *ci, uint64_t *v)
{
    v[XV_RECV_OCT] = ci->stats->n[STAT_RECV_OCT];
    v[XV_SEND_OCT] = ci->stats->n[STAT_SEND_OCT];
    v[XV_RECV_CNT] = ci->stats->n[STAT_RECV_CNT];
    v[XV_SEND_CNT] = ci->stats->n[STAT_SEND_CNT];
    v[XV_CHANNELS] = ci->channels;
}

static void add_values(uint64_t *sum, const uint64_t *v, size_t n, const uint8_t *is_max)
{
    for (size_t i = 0; i < n; i++)
        sum[i] = is_max && is_max[i] ? (v[i] > sum[i] ? v[i] : sum[i]) : sum[i] + v[i];
}

static void sum_queue(void *arg, queue *q)
{
    prom_scrape *sc = arg;
    static const uint8_t is_max[QV_COUNT] = {[QV_OLDEST_READY] = 1, [QV_OLDEST_UNACKED] = 1};
    uint64_t v[QV_COUNT];
    queue_values(sc->s, q, true, v);
    add_values(sc->queues, v, QV_COUNT, is_max);
}

/* Connections, channels and consumers: summed (aggregated) or listed. */
static bool walk_connections(prom_scrape *sc)
{
    server *s = sc->s;
    for (size_t i = 0; i < server_conn_count(s); i++) {
        conn *c = server_conn_at(s, i);
        conn_info ci;
        conn_describe(c, &ci);
        uint64_t xv[XV_COUNT];
        conn_values(&ci, xv);
        add_values(sc->conns, xv, XV_COUNT, NULL);
        if (sc->xlist && !mgmt_list_add(sc->xlist, "", AMQP_CSTR(ci.name), ci.id, 0, false))
            return false;
        for (uint32_t slot = 0; slot < conn_channel_slots(c); slot++) {
            chan *ch = conn_channel_at(c, slot);
            if (!ch)
                continue;
            uint64_t cv[CV_COUNT];
            chan_values(ch, cv);
            add_values(sc->chans, cv, CV_COUNT, NULL);
            if (sc->clist && !mgmt_list_add(sc->clist, "", AMQP_CSTR(ci.name),
                                            ci.id << 16 | chan_number(ch), 0, false))
                return false;
        }
    }
    return true;
}

static void node_values(prom_scrape *sc)
{
    server *s = sc->s;
    uint64_t *v = sc->node;
    const server_counts *k = server_counters(s);
    stats st = {0};
    for (vhost *vh = server_vhost_next(s, NULL); vh; vh = server_vhost_next(s, vh)) {
        stats_add(&st, vhost_stats(vh));
        v[NV_QUEUES] += vhost_queue_count(vh);
    }
    struct statvfs vfs;
    struct rlimit rl;
    uint64_t http_attempts, http_failed;
    mgmt_auth_counted(sc->m, &http_attempts, &http_failed);
    const uint64_t *n = st.n;
    uint64_t vals[NV_COUNT] = {
        [NV_ALARM_MEM] = server_memory_alarm(s),
        [NV_CONN_OPENED] = k->connections_opened, [NV_CONN_CLOSED] = k->connections_closed,
        [NV_CHAN_OPENED] = k->channels_opened,    [NV_CHAN_CLOSED] = k->channels_closed,
        [NV_Q_DECLARED] = k->queues_declared,     [NV_Q_CREATED] = k->queues_created,
        [NV_Q_DELETED] = k->queues_deleted,       [NV_OPEN_FDS] = mgmt_fds_used(),
        [NV_OPEN_SOCKETS] = server_socket_count(s), [NV_RSS] = mgmt_rss_bytes(),
        [NV_DISK] = statvfs(server_config(s)->data_dir, &vfs) == 0
                        ? (uint64_t)vfs.f_bavail * vfs.f_frsize : 0,
        [NV_MAX_FDS] = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (uint64_t)rl.rlim_cur : 0,
        [NV_MEM_LIMIT] = server_memory_limit(s),
        [NV_AUTH_HTTP] = http_attempts,           [NV_AUTH_AMQP] = k->auth_attempts,
        [NV_AUTH_OK_HTTP] = http_attempts - http_failed,
        [NV_AUTH_OK_AMQP] = k->auth_attempts - k->auth_failed,
        [NV_AUTH_BAD_HTTP] = http_failed,         [NV_AUTH_BAD_AMQP] = k->auth_failed,
        [NV_CONNECTIONS] = server_conn_count(s),  [NV_CHANNELS] = sc->conns[XV_CHANNELS],
        [NV_CONSUMERS] = sc->chans[CV_CONSUMERS], [NV_QUEUES] = v[NV_QUEUES],
        [NV_ACK] = n[STAT_ACK],                   [NV_CONFIRM] = n[STAT_CONFIRM],
        [NV_CONSUME_AUTO] = n[STAT_DELIVER_NO_ACK], [NV_CONSUME_MANUAL] = n[STAT_DELIVER],
        [NV_GET_AUTO] = n[STAT_GET_NO_ACK],       [NV_GET_MANUAL] = n[STAT_GET],
        [NV_DELIVERED] = n[STAT_DELIVER_NO_ACK] + n[STAT_DELIVER] + n[STAT_GET_NO_ACK] +
                         n[STAT_GET],
        [NV_GET_EMPTY] = n[STAT_GET_EMPTY],       [NV_RECEIVED_CONFIRM] = k->messages_received_confirm,
        [NV_RECEIVED] = n[STAT_PUBLISH],          [NV_REDELIVERED] = n[STAT_REDELIVER],
        [NV_ROUTED] = k->messages_routed,         [NV_DROPPED] = n[STAT_DROP_UNROUTABLE],
        [NV_RETURNED] = n[STAT_RETURN_UNROUTABLE],
    };
    memcpy(v, vals, sizeof vals);
}

static void add_queue_name(void *arg, queue *q)
{
    prom_scrape *sc = arg;
    if (sc->qlist)
        mgmt_list_add(sc->qlist, vhost_name(queue_vhost(q)), queue_name(q), 0, 0, false);
}

static mgmt_list *new_list(void)
{
    mgmt_list_query q = {.page_size = 100};
    char why[64];
    return mgmt_list_new(&q, why, sizeof why);
}

prom_scrape *prom_scrape_new(mgmt *m, server *s, bool per_object, mgmt_prom *w)
{
    prom_scrape *sc = calloc(1, sizeof *sc);
    if (!sc)
        return NULL;
    *sc = (prom_scrape){.m = m, .s = s, .w = w, .per_object = per_object};
    char why[64];
    if (per_object && (!(sc->qlist = new_list()) || !(sc->clist = new_list()) ||
                       !(sc->xlist = new_list()))) {
        prom_scrape_free(sc);
        return NULL;
    }
    for (vhost *v = server_vhost_next(s, NULL); v; v = server_vhost_next(s, v))
        vhost_foreach_queue(v, per_object ? add_queue_name : sum_queue, sc);
    if (!walk_connections(sc) ||
        (per_object && (!mgmt_list_finish(sc->qlist, why, sizeof why) ||
                        !mgmt_list_finish(sc->clist, why, sizeof why) ||
                        !mgmt_list_finish(sc->xlist, why, sizeof why)))) {
        prom_scrape_free(sc);
        return NULL;
    }
    node_values(sc);
    return sc;
}

void prom_scrape_free(prom_scrape *sc)
{
    if (!sc)
        return;
    mgmt_list_free(sc->qlist);
    mgmt_list_free(sc->clist);
    mgmt_list_free(sc->xlist);
    free(sc);
}

/* ---- writing ---------------------------------------------------------------- */

static void value(mgmt_prom *w, const family *f, uint64_t v)
{
    if (f->flags & F_SECONDS)
        mgmt_prom_double(w, (double)v / 1000.0);
    else
        mgmt_prom_uint(w, v);
}

/* The bucket names of the queue JSON's delivery_count_histogram. */
static void bucket_name(int i, char *out, size_t cap)
{
    uint32_t lo = queue_dc_bucket_floor[i];
    if (i + 1 == QUEUE_DC_BUCKETS)
        snprintf(out, cap, "%u+", lo);
    else if (queue_dc_bucket_floor[i + 1] == lo + 1)
        snprintf(out, cap, "%u", lo);
    else
        snprintf(out, cap, "%u-%u", lo, queue_dc_bucket_floor[i + 1] - 1);
}

/* One object's sample(s) of f; `labels` writes the object's labels. */
static void samples(prom_scrape *sc, const family *f, const uint64_t *v,
                    void (*labels)(mgmt_prom *w, const void *arg), const void *arg)
{
    int n = f->flags & F_BUCKETS ? QUEUE_DC_BUCKETS : 1;
    for (int i = 0; i < n; i++) {
        mgmt_prom_begin(sc->w, f->name);
        if (labels)
            labels(sc->w, arg);
        if (f->flags & F_BUCKETS) {
            char b[24];
            bucket_name(i, b, sizeof b);
            mgmt_prom_label_str(sc->w, "delivery_count", b);
        }
        value(sc->w, f, v[f->value + i]);
    }
}

static void node_family(prom_scrape *sc, const family *f)
{
    mgmt_prom *w = sc->w;
    switch (f->labels) {
    case L_AUTH:
        for (int i = 0; i < 2; i++) {
            mgmt_prom_begin(w, f->name);
            mgmt_prom_label_str(w, "protocol", i ? "amqp091" : "http");
            mgmt_prom_uint(w, sc->node[f->value + i]);
        }
        return;
    case L_BUILD:
        mgmt_prom_begin(w, f->name);
        mgmt_prom_label_str(w, "rabbitmq_version", PROM_VERSION);
        mgmt_prom_label_str(w, "prometheus_plugin_version", PROM_VERSION);
        mgmt_prom_label_str(w, "product_name", "Warren");
        mgmt_prom_label_str(w, "product_version", WARREN_VERSION);
        mgmt_prom_uint(w, 1);
        return;
    case L_IDENTITY:
        mgmt_prom_begin(w, f->name);
        mgmt_prom_label_str(w, "rabbitmq_node", server_node_name(sc->s));
        mgmt_prom_label_str(w, "rabbitmq_cluster", server_node_name(sc->s));
        mgmt_prom_uint(w, 1);
        return;
    default:
        mgmt_prom_begin(w, f->name);
        if (f->labels != L_NONE)
            mgmt_prom_label_str(w, "protocol", "amqp091");
        if (f->labels == L_PROTO_QT) /* every Warren queue is a classic queue */
            mgmt_prom_label_str(w, "queue_type", "rabbit_classic_queue");
        mgmt_prom_uint(w, sc->node[f->value]);
    }
}

static void queue_labels(mgmt_prom *w, const void *arg)
{
    const mgmt_list_item *it = arg;
    mgmt_prom_label_str(w, "vhost", it->vhost);
    mgmt_prom_label(w, "queue", it->name);
}

static void named_labels(mgmt_prom *w, const void *arg) { mgmt_prom_label_str(w, "channel", arg); }

/* One object of f's scope, looked up again; false when it is gone. */
static bool object_sample(prom_scrape *sc, const family *f, const mgmt_list_item *it)
{
    uint64_t v[(int)QV_COUNT > (int)CV_COUNT ? (int)QV_COUNT : (int)CV_COUNT];
    if (f->scope == QUEUE) {
        vhost *vh = server_vhost(sc->s, AMQP_CSTR(it->vhost));
        queue *q = vh ? vhost_queue_find(vh, it->name) : NULL;
        if (!q)
            return false;
        queue_values(sc->s, q, f->value == QV_OLDEST_UNACKED, v);
        samples(sc, f, v, queue_labels, it);
        return true;
    }
    conn *c = server_conn_find(sc->s, f->scope == CHAN ? it->id >> 16 : it->id);
    chan *ch = c && f->scope == CHAN ? conn_channel_find(c, (uint16_t)(it->id & 0xffff)) : NULL;
    if (!c || (f->scope == CHAN && !ch))
        return false;
    conn_info ci;
    conn_describe(c, &ci);
    char name[512];
    if (ch) {
        snprintf(name, sizeof name, "%s (%u)", ci.name, chan_number(ch));
        chan_values(ch, v);
    } else {
        snprintf(name, sizeof name, "%s", ci.name);
        conn_values(&ci, v);
    }
    samples(sc, f, v, named_labels, name);
    return true;
}

static mgmt_list *list_of(prom_scrape *sc, int scope)
{
    return scope == QUEUE ? sc->qlist : scope == CHAN ? sc->clist : sc->xlist;
}

static const uint64_t *sums_of(prom_scrape *sc, int scope)
{
    return scope == QUEUE ? sc->queues : scope == CHAN ? sc->chans : sc->conns;
}

bool prom_scrape_step(prom_scrape *sc, size_t budget)
{
    size_t start = mgmt_prom_written(sc->w);
    server_touch_clock(sc->s);
    while (sc->fam < NFAMILIES && mgmt_prom_written(sc->w) - start < budget) {
        const family *f = &families[sc->fam];
        if (!sc->started)
            mgmt_prom_family(sc->w, f->name, f->type, f->help);
        sc->started = true;
        if (f->scope == NODE) {
            node_family(sc, f);
        } else if (!sc->per_object) {
            samples(sc, f, sums_of(sc, f->scope), NULL, NULL);
        } else {
            mgmt_list *l = list_of(sc, f->scope);
            while (sc->item < mgmt_list_count(l) && mgmt_prom_written(sc->w) - start < budget)
                object_sample(sc, f, mgmt_list_at(l, sc->item++));
            if (sc->item < mgmt_list_count(l))
                return false;
        }
        sc->fam++;
        sc->item = 0;
        sc->started = false;
    }
    return sc->fam == NFAMILIES;
}
