/* What /metrics says: rabbitmq_prometheus's families (names, types, HELP
 * lines and labels as RabbitMQ 3.10.8 writes them) for what Warren has,
 * then Warren's queue health families (warren_ prefix).
 *
 * `families` is a table, in RabbitMQ's order. Each family belongs to a
 * scope: the node (one value, or a few with fixed labels), or queues,
 * channels, connections, vhosts or exchanges, whose values come from one
 * function per scope (queue_values, chan_values, conn_values) indexed by
 * the family's `value`; and, for /metrics/detailed, to one of RabbitMQ's
 * metric groups there ("queue_coarse_metrics", ...), by which a detailed
 * scrape picks its families.
 *
 * Aggregated (/metrics): a scope's families are the sum over its objects
 * (the max for ages), computed in one pass per scope when the scrape
 * starts; the reply is a few kilobytes whatever the number of queues.
 * Per object (/metrics/per-object, /metrics/detailed): the scrape takes a
 * snapshot of the queue and exchange names, channel and connection ids
 * (mgmt_list) and writes family by family, object by object, looking each
 * object up again: prom_scrape_step stops after about `budget` bytes and
 * resumes at (family, object), so the caller can yield to the loop between
 * slices; an object gone meanwhile is skipped.
 *
 * Label keys are RabbitMQ's: queues {vhost, queue}; channels {channel}, the
 * channel's management API name ("127.0.0.1:5555 -> 127.0.0.1:5672 (1)")
 * where RabbitMQ shows a pid; the channel's publish counters per exchange
 * {channel, vhost, exchange} and its delivery counters per queue {channel,
 * vhost, queue} (chan_foreach_exchange_stats / _queue_stats); connections
 * {channel} too (RabbitMQ 3.10 labels connection metrics with "channel"),
 * with the connection's name. queue_messages_published_total is counted by
 * the queue, not per channel and exchange as RabbitMQ does, so it carries
 * RabbitMQ's {queue_vhost, queue} without its channel and exchange labels.
 *
 * The global counters are the server's (server_counters): they never go
 * down, whatever is deleted. Those by queue type have one sample per type
 * Warren has (classic, quorum); the dead-letter ones one per (queue type,
 * dead_letter_strategy) RabbitMQ 3.10 keeps, plus classic queues' delivery
 * limit, which RabbitMQ's classic queues do not have.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include "../federation/federation.h"
#include "mgmt_int.h"

#define PROM_VERSION "3.10.8" /* the rabbitmq_prometheus Warren answers as */
#define WARREN_VERSION "0.1.0"

enum scope { NODE, QUEUE, CHAN, CONN, VHOSTS, EXCHANGES, SCOPES };
enum {
    F_SECONDS = 1,       /* value in ms shown as s */
    F_MAX = 2,           /* aggregated as the max */
    F_BUCKETS = 4,       /* one sample per delivery-count bucket */
    F_WARREN = 8,        /* Warren's own: warren_ prefix, not on /metrics/detailed */
    F_PER_EXCHANGE = 16, /* per object: one sample per (channel, exchange) */
    F_PER_QUEUE = 32,    /* per object: one sample per (channel, queue) */
    F_QUEUE_KEYS = 64,   /* queue labels queue_vhost, queue */
    F_ALWAYS = 128,      /* on /metrics/detailed whatever was asked (identity) */
    F_WORK = 256,        /* classic and quorum queues only (not streams) */
    F_STREAM = 512,      /* stream queues only */
    F_PER_OBJECT = 1024, /* not on /metrics (a sum would mean nothing: offsets) */
    F_CLUSTER = 2048,    /* a cluster's leader only (mgmt_set_cluster) */
    F_SHOVEL = 4096,     /* where shovels run (mgmt_set_shovels) */
};
enum labels { L_NONE, L_PROTO, L_PROTO_QT, L_DEAD, L_AUTH, L_BUILD, L_IDENTITY, L_REFUSED,
              L_DELAYED, L_CLUSTER, L_FEDERATION, L_SHOVEL };
/* Warren's shovel families, one sample per shovel (vhost, name labels). */
enum shovel_value { SH_RUNNING, SH_FORWARDED, SH_ACKED, SH_UNCONFIRMED, SH_RESTARTS };

/* Warren's cluster families: the value says which (cluster_value). */
enum cluster_value {
    CL_LEADER, CL_EPOCH, CL_ISR, CL_MIN_ISR, CL_HELD,
    CL_LAG_BYTES, CL_LAG_SECONDS, CL_IN_SYNC, /* per follower {node} */
};

/* RabbitMQ 3.10's /metrics/detailed groups, in its order. */
enum group {
    G_NONE, /* not on /metrics/detailed */
    G_CHURN, G_NODE_COARSE, G_NODE, G_AUTH, G_QUEUE_COARSE, G_QUEUE_CONSUMER_COUNT, G_QUEUE,
    G_CHANNEL, G_CHANNEL_EXCHANGE, G_CHANNEL_QUEUE, G_CONNECTION_COARSE, G_CONNECTION,
    G_CHANNEL_QUEUE_EXCHANGE, G_VHOST_STATUS, G_EXCHANGE_BINDINGS, G_EXCHANGE_NAMES,
    G_COUNT
};

static const char *const group_names[G_COUNT] = {
    [G_CHURN] = "connection_churn_metrics",
    [G_NODE_COARSE] = "node_coarse_metrics",
    [G_NODE] = "node_metrics",
    [G_AUTH] = "auth_attempt_metrics",
    [G_QUEUE_COARSE] = "queue_coarse_metrics",
    [G_QUEUE_CONSUMER_COUNT] = "queue_consumer_count",
    [G_QUEUE] = "queue_metrics",
    [G_CHANNEL] = "channel_metrics",
    [G_CHANNEL_EXCHANGE] = "channel_exchange_metrics",
    [G_CHANNEL_QUEUE] = "channel_queue_metrics",
    [G_CONNECTION_COARSE] = "connection_coarse_metrics",
    [G_CONNECTION] = "connection_metrics",
    [G_CHANNEL_QUEUE_EXCHANGE] = "channel_queue_exchange_metrics",
    [G_VHOST_STATUS] = "vhost_status",
    [G_EXCHANGE_BINDINGS] = "exchange_bindings",
    [G_EXCHANGE_NAMES] = "exchange_names",
};
#define BIT(g) (1u << (g))
#define CLUSTER_GROUPS (BIT(G_VHOST_STATUS) | BIT(G_EXCHANGE_BINDINGS) | BIT(G_EXCHANGE_NAMES))

enum node_value {
    NV_ALARM_DISK, NV_ALARM_MEM, NV_CONN_OPENED, NV_CONN_CLOSED, NV_CHAN_OPENED, NV_CHAN_CLOSED,
    NV_Q_DECLARED, NV_Q_CREATED, NV_Q_DELETED, NV_OPEN_FDS, NV_OPEN_SOCKETS, NV_RSS, NV_DISK,
    NV_MAX_FDS, NV_MEM_LIMIT, NV_DISK_LIMIT,
    NV_AUTH_HTTP, NV_AUTH_AMQP, NV_AUTH_OK_HTTP, NV_AUTH_OK_AMQP, NV_AUTH_BAD_HTTP,
    NV_AUTH_BAD_AMQP,
    NV_CONNECTIONS, NV_CHANNELS, NV_CONSUMERS, NV_QUEUES,
    NV_CONFIRM, NV_RECEIVED_CONFIRM, NV_RECEIVED, NV_ROUTED, NV_DROPPED, NV_RETURNED,
    NV_DEDUP_ENTRIES, NV_DEDUP_DUPLICATES,
    NV_COUNT
};

/* Counters by queue type: the value is the stat_id counted, or QT_DELIVERED
 * for the four kinds of delivery together. */
#define QT_DELIVERED STAT_COUNTERS
/* Dead-letter counters: the value is the dead_reason, or DEAD_CONFIRMED. */
#define DEAD_CONFIRMED DEAD_REASONS

enum queue_value {
    QV_READY, QV_UNACKED, QV_MESSAGES, QV_CONSUMERS, QV_MEMORY, QV_READY_BYTES, QV_UNACKED_BYTES,
    QV_BYTES, QV_PUBLISHED,
    QV_OLDEST_READY, QV_OLDEST_UNACKED, QV_DELAYED, QV_LIMIT_DEAD, QV_TIMEOUTS,
    QV_MOVED, QV_MOVE_LEFT, QV_DEDUP_ENTRIES, QV_DEDUP_DUPLICATES,
    QV_SEGMENTS, QV_SEGMENT_BYTES, QV_CHUNKS, QV_FIRST_OFFSET, QV_LAST_OFFSET,
    QV_COMMITTED_OFFSET, QV_MAX_LAG,
    QV_DC, /* QUEUE_DC_BUCKETS of them */
    QV_COUNT = QV_DC + QUEUE_DC_BUCKETS
};

enum chan_value {
    CV_CONSUMERS, CV_UNACKED, CV_UNCONFIRMED, CV_UNCOMMITTED, CV_ACKS_UNCOMMITTED, CV_PREFETCH,
    CV_GLOBAL_PREFETCH, CV_PUBLISHED, CV_CONFIRMED, CV_RETURNED, CV_DROPPED, CV_GET_ACK, CV_GET,
    CV_DELIVERED_ACK, CV_DELIVERED, CV_REDELIVERED, CV_ACKED, CV_GET_EMPTY,
    CV_COUNT
};

/* The stat_id behind each per-exchange and per-queue channel family. */
static const stat_id chan_stat[CV_COUNT] = {
    [CV_PUBLISHED] = STAT_PUBLISH,       [CV_CONFIRMED] = STAT_CONFIRM,
    [CV_RETURNED] = STAT_RETURN_UNROUTABLE, [CV_DROPPED] = STAT_DROP_UNROUTABLE,
    [CV_GET_ACK] = STAT_GET,             [CV_GET] = STAT_GET_NO_ACK,
    [CV_DELIVERED_ACK] = STAT_DELIVER,   [CV_DELIVERED] = STAT_DELIVER_NO_ACK,
    [CV_REDELIVERED] = STAT_REDELIVER,   [CV_ACKED] = STAT_ACK,
    [CV_GET_EMPTY] = STAT_GET_EMPTY,
};

enum conn_value { XV_RECV_OCT, XV_SEND_OCT, XV_RECV_CNT, XV_SEND_CNT, XV_CHANNELS, XV_COUNT };

enum exchange_value { EV_NAME, EV_BINDINGS };

typedef struct family {
    const char *name, *type, *help; /* name without the prefix */
    uint8_t scope, value, group, labels;
    uint16_t flags;
} family;
/* A stream's offset it does not have yet (empty, nothing committed): no sample. */
#define NO_OFFSET UINT64_MAX

#define N(g, name, type, help, v) {name, type, help, NODE, v, g, L_NONE, 0}
#define NL(g, name, type, help, v, l) {name, type, help, NODE, v, g, l, 0}
#define Q(g, name, type, help, v) {name, type, help, QUEUE, v, g, 0, 0}
#define QW(g, name, type, help, v) {name, type, help, QUEUE, v, g, 0, F_WORK}
#define C(g, name, type, help, v, fl) {name, type, help, CHAN, v, g, 0, fl}
#define X(g, name, type, help, v) {name, type, help, CONN, v, g, 0, 0}
#define W(name, type, help, v, fl) {name, type, help, QUEUE, v, G_NONE, 0, F_WARREN | (fl)}
#define NW(name, type, help, v) {name, type, help, NODE, v, G_NONE, L_NONE, F_WARREN}
#define CL(name, help, v) {name, "gauge", help, NODE, v, G_NONE, L_CLUSTER, F_WARREN | F_CLUSTER}
#define SH(name, type, help, v) {name, type, help, NODE, v, G_NONE, L_SHOVEL, F_WARREN | F_SHOVEL}
#define HELP_QUEUE_CONSUMERS "Consumers on a queue"

static const family families[] = {
    N(G_NONE, "alarms_free_disk_space_watermark", "untyped",
      "is 1 if free disk space watermark alarm is in effect", NV_ALARM_DISK),
    N(G_NONE, "alarms_memory_used_watermark", "untyped",
      "is 1 if VM memory watermark alarm is in effect", NV_ALARM_MEM),
    N(G_CHURN, "connections_opened_total", "counter", "Total number of connections opened",
      NV_CONN_OPENED),
    N(G_CHURN, "connections_closed_total", "counter",
      "Total number of connections closed or terminated", NV_CONN_CLOSED),
    N(G_CHURN, "channels_opened_total", "counter", "Total number of channels opened",
      NV_CHAN_OPENED),
    N(G_CHURN, "channels_closed_total", "counter", "Total number of channels closed",
      NV_CHAN_CLOSED),
    N(G_CHURN, "queues_declared_total", "counter", "Total number of queues declared",
      NV_Q_DECLARED),
    N(G_CHURN, "queues_created_total", "counter", "Total number of queues created", NV_Q_CREATED),
    N(G_CHURN, "queues_deleted_total", "counter", "Total number of queues deleted", NV_Q_DELETED),
    N(G_NODE_COARSE, "process_open_fds", "gauge", "Open file descriptors", NV_OPEN_FDS),
    N(G_NODE_COARSE, "process_open_tcp_sockets", "gauge", "Open TCP sockets", NV_OPEN_SOCKETS),
    N(G_NODE_COARSE, "process_resident_memory_bytes", "gauge", "Memory used in bytes", NV_RSS),
    N(G_NODE_COARSE, "disk_space_available_bytes", "gauge", "Disk space available in bytes",
      NV_DISK),
    N(G_NODE, "process_max_fds", "gauge", "Open file descriptors limit", NV_MAX_FDS),
    N(G_NODE, "resident_memory_limit_bytes", "gauge", "Memory high watermark in bytes",
      NV_MEM_LIMIT),
    N(G_NODE, "disk_space_available_limit_bytes", "gauge", "Free disk space low watermark in bytes",
      NV_DISK_LIMIT),
    NL(G_AUTH, "auth_attempts_total", "counter", "Total number of authorization attempts",
       NV_AUTH_HTTP, L_AUTH),
    NL(G_AUTH, "auth_attempts_succeeded_total", "counter",
       "Total number of successful authentication attempts", NV_AUTH_OK_HTTP, L_AUTH),
    NL(G_AUTH, "auth_attempts_failed_total", "counter",
       "Total number of failed authentication attempts", NV_AUTH_BAD_HTTP, L_AUTH),
    Q(G_QUEUE_COARSE, "queue_messages_ready", "gauge",
      "Messages ready to be delivered to consumers", QV_READY),
    Q(G_QUEUE_COARSE, "queue_messages_unacked", "gauge",
      "Messages delivered to consumers but not yet acknowledged", QV_UNACKED),
    Q(G_QUEUE_COARSE, "queue_messages", "gauge",
      "Sum of ready and unacknowledged messages - total queue depth", QV_MESSAGES),
    /* queue_consumer_count is a subset of queue_metrics (detailed only) */
    Q(G_QUEUE_CONSUMER_COUNT, "queue_consumers", "gauge", HELP_QUEUE_CONSUMERS, QV_CONSUMERS),
    Q(G_QUEUE, "queue_consumers", "gauge", HELP_QUEUE_CONSUMERS, QV_CONSUMERS),
    Q(G_QUEUE, "queue_process_memory_bytes", "gauge",
      "Memory in bytes used by the Erlang queue process", QV_MEMORY),
    QW(G_QUEUE, "queue_messages_bytes", "gauge",
      "Size in bytes of ready and unacknowledged messages", QV_BYTES),
    QW(G_QUEUE, "queue_messages_ready_bytes", "gauge", "Size in bytes of ready messages",
      QV_READY_BYTES),
    QW(G_QUEUE, "queue_messages_unacked_bytes", "gauge",
      "Size in bytes of all unacknowledged messages", QV_UNACKED_BYTES),
    C(G_CHANNEL, "channel_consumers", "gauge", "Consumers on a channel", CV_CONSUMERS, 0),
    C(G_CHANNEL, "channel_messages_unacked", "gauge",
      "Delivered but not yet acknowledged messages", CV_UNACKED, 0),
    C(G_CHANNEL, "channel_messages_unconfirmed", "gauge",
      "Published but not yet confirmed messages", CV_UNCONFIRMED, 0),
    C(G_CHANNEL, "channel_messages_uncommitted", "gauge",
      "Messages received in a transaction but not yet committed", CV_UNCOMMITTED, 0),
    C(G_CHANNEL, "channel_acks_uncommitted", "gauge",
      "Message acknowledgements in a transaction not yet committed", CV_ACKS_UNCOMMITTED, 0),
    C(G_CHANNEL, "consumer_prefetch", "gauge",
      "Limit of unacknowledged messages for each consumer", CV_PREFETCH, 0),
    C(G_CHANNEL, "channel_prefetch", "gauge",
      "Total limit of unacknowledged messages for all consumers on a channel",
      CV_GLOBAL_PREFETCH, 0),
    C(G_CHANNEL_EXCHANGE, "channel_messages_published_total", "counter",
      "Total number of messages published into an exchange on a channel", CV_PUBLISHED,
      F_PER_EXCHANGE),
    C(G_CHANNEL_EXCHANGE, "channel_messages_confirmed_total", "counter",
      "Total number of messages published into an exchange and confirmed on the channel",
      CV_CONFIRMED, F_PER_EXCHANGE),
    C(G_CHANNEL_EXCHANGE, "channel_messages_unroutable_returned_total", "counter",
      "Total number of messages published as mandatory into an exchange and returned to the "
      "publisher as unroutable",
      CV_RETURNED, F_PER_EXCHANGE),
    C(G_CHANNEL_EXCHANGE, "channel_messages_unroutable_dropped_total", "counter",
      "Total number of messages published as non-mandatory into an exchange and dropped as "
      "unroutable",
      CV_DROPPED, F_PER_EXCHANGE),
    C(G_CHANNEL_QUEUE, "channel_get_ack_total", "counter",
      "Total number of messages fetched with basic.get in manual acknowledgement mode",
      CV_GET_ACK, F_PER_QUEUE),
    C(G_CHANNEL_QUEUE, "channel_get_total", "counter",
      "Total number of messages fetched with basic.get in automatic acknowledgement mode", CV_GET,
      F_PER_QUEUE),
    C(G_CHANNEL_QUEUE, "channel_messages_delivered_ack_total", "counter",
      "Total number of messages delivered to consumers in manual acknowledgement mode",
      CV_DELIVERED_ACK, F_PER_QUEUE),
    C(G_CHANNEL_QUEUE, "channel_messages_delivered_total", "counter",
      "Total number of messages delivered to consumers in automatic acknowledgement mode",
      CV_DELIVERED, F_PER_QUEUE),
    C(G_CHANNEL_QUEUE, "channel_messages_redelivered_total", "counter",
      "Total number of messages redelivered to consumers", CV_REDELIVERED, F_PER_QUEUE),
    C(G_CHANNEL_QUEUE, "channel_messages_acked_total", "counter",
      "Total number of messages acknowledged by consumers", CV_ACKED, F_PER_QUEUE),
    C(G_CHANNEL_QUEUE, "channel_get_empty_total", "counter",
      "Total number of times basic.get operations fetched no message", CV_GET_EMPTY,
      F_PER_QUEUE),
    X(G_CONNECTION_COARSE, "connection_incoming_bytes_total", "counter",
      "Total number of bytes received on a connection", XV_RECV_OCT),
    X(G_CONNECTION_COARSE, "connection_outgoing_bytes_total", "counter",
      "Total number of bytes sent on a connection", XV_SEND_OCT),
    X(G_CONNECTION, "connection_incoming_packets_total", "counter",
      "Total number of packets received on a connection", XV_RECV_CNT),
    X(G_CONNECTION, "connection_outgoing_packets_total", "counter",
      "Total number of packets sent on a connection", XV_SEND_CNT),
    X(G_CONNECTION, "connection_channels", "gauge", "Channels on a connection", XV_CHANNELS),
    {"queue_messages_published_total", "counter", "Total number of messages published to queues",
     QUEUE, QV_PUBLISHED, G_CHANNEL_QUEUE_EXCHANGE, 0, F_QUEUE_KEYS},
    N(G_NONE, "connections", "gauge", "Connections currently open", NV_CONNECTIONS),
    N(G_NONE, "channels", "gauge", "Channels currently open", NV_CHANNELS),
    N(G_NONE, "consumers", "gauge", "Consumers currently connected", NV_CONSUMERS),
    N(G_NONE, "queues", "gauge", "Queues available", NV_QUEUES),
    {"build_info", "untyped", "RabbitMQ & Erlang/OTP version info", NODE, 0, G_NONE, L_BUILD,
     F_ALWAYS},
    {"identity_info", "untyped", "RabbitMQ node & cluster identity info", NODE, 0, G_NONE,
     L_IDENTITY, F_ALWAYS},
    NL(G_NONE, "global_consumers", "gauge", "Current number of consumers", NV_CONSUMERS,
       L_PROTO),
    NL(G_NONE, "global_messages_acknowledged_total", "counter",
       "Total number of messages acknowledged by consumers", STAT_ACK, L_PROTO_QT),
    NL(G_NONE, "global_messages_confirmed_total", "counter",
       "Total number of messages confirmed to publishers", NV_CONFIRM, L_PROTO),
    NL(G_NONE, "global_messages_delivered_consume_auto_ack_total", "counter",
       "Total number of messages delivered to consumers using basic.consume with automatic "
       "acknowledgment",
       STAT_DELIVER_NO_ACK, L_PROTO_QT),
    NL(G_NONE, "global_messages_delivered_consume_manual_ack_total", "counter",
       "Total number of messages delivered to consumers using basic.consume with manual "
       "acknowledgment",
       STAT_DELIVER, L_PROTO_QT),
    NL(G_NONE, "global_messages_delivered_get_auto_ack_total", "counter",
       "Total number of messages delivered to consumers using basic.get with automatic "
       "acknowledgment",
       STAT_GET_NO_ACK, L_PROTO_QT),
    NL(G_NONE, "global_messages_delivered_get_manual_ack_total", "counter",
       "Total number of messages delivered to consumers using basic.get with manual "
       "acknowledgment",
       STAT_GET, L_PROTO_QT),
    NL(G_NONE, "global_messages_delivered_total", "counter",
       "Total number of messages delivered to consumers", QT_DELIVERED, L_PROTO_QT),
    NL(G_NONE, "global_messages_get_empty_total", "counter",
       "Total number of times basic.get operations fetched no message", STAT_GET_EMPTY,
       L_PROTO_QT),
    NL(G_NONE, "global_messages_received_confirm_total", "counter",
       "Total number of messages received from publishers expecting confirmations",
       NV_RECEIVED_CONFIRM, L_PROTO),
    NL(G_NONE, "global_messages_received_total", "counter",
       "Total number of messages received from publishers", NV_RECEIVED, L_PROTO),
    NL(G_NONE, "global_messages_redelivered_total", "counter",
       "Total number of messages redelivered to consumers", STAT_REDELIVER, L_PROTO_QT),
    NL(G_NONE, "global_messages_routed_total", "counter",
       "Total number of messages routed to queues or streams", NV_ROUTED, L_PROTO),
    NL(G_NONE, "global_messages_unroutable_dropped_total", "counter",
       "Total number of messages published as non-mandatory into an exchange and dropped as "
       "unroutable",
       NV_DROPPED, L_PROTO),
    NL(G_NONE, "global_messages_unroutable_returned_total", "counter",
       "Total number of messages published as mandatory into an exchange and returned to the "
       "publisher as unroutable",
       NV_RETURNED, L_PROTO),
    NL(G_NONE, "global_messages_dead_lettered_confirmed_total", "counter",
       "Total number of messages dead-lettered and confirmed by target queues", DEAD_CONFIRMED,
       L_DEAD),
    NL(G_NONE, "global_messages_dead_lettered_delivery_limit_total", "counter",
       "Total number of messages dead-lettered due to delivery-limit exceeded",
       DEAD_DELIVERY_LIMIT, L_DEAD),
    NL(G_NONE, "global_messages_dead_lettered_expired_total", "counter",
       "Total number of messages dead-lettered due to message TTL exceeded", DEAD_EXPIRED, L_DEAD),
    NL(G_NONE, "global_messages_dead_lettered_maxlen_total", "counter",
       "Total number of messages dead-lettered due to overflow drop-head or reject-publish-dlx",
       DEAD_MAXLEN, L_DEAD),
    NL(G_NONE, "global_messages_dead_lettered_rejected_total", "counter",
       "Total number of messages dead-lettered due to basic.reject or basic.nack", DEAD_REJECTED,
       L_DEAD),
    /* /metrics/detailed only (rabbitmq_cluster_ prefix) */
    {"vhost_status", "gauge", "Whether a given vhost is running", VHOSTS, 0, G_VHOST_STATUS, 0,
     0},
    {"exchange_bindings", "gauge",
     "Number of bindings for an exchange. This value is cluster-wide.", EXCHANGES, EV_BINDINGS,
     G_EXCHANGE_BINDINGS, 0, 0},
    {"exchange_name", "gauge",
     "Enumerates exchanges without any additional info. This value is cluster-wide. A cheaper "
     "alternative to `exchange_bindings`",
     EXCHANGES, EV_NAME, G_EXCHANGE_NAMES, 0, 0},
    /* Warren's: what each limit refused, by kind (README "Limits") */
    {"refused_total", "counter", "Requests a limit refused since start, by kind", NODE, 0,
     G_NONE, L_REFUSED, F_WARREN},
    /* Warren's: federation links by status (GET /api/federation-links) */
    {"federation_links", "gauge", "Federation links, by status", NODE, 0, G_NONE, L_FEDERATION,
     F_WARREN},
    /* Warren's: messages each x-delayed-message exchange holds (the API's messages_delayed) */
    {"exchange_messages_delayed", "gauge",
     "Messages an x-delayed-message exchange holds until their delay is over", NODE, 0, G_NONE,
     L_DELAYED, F_WARREN},
    /* Warren's cluster (GET /api/cluster), on a cluster's leader only */
    CL("cluster_leader", "1 when this node leads its cluster", CL_LEADER),
    CL("cluster_epoch", "The leadership's epoch (etcd's fencing token)", CL_EPOCH),
    CL("cluster_isr_members", "Nodes in the in-sync replica set, the leader included", CL_ISR),
    CL("cluster_min_isr", "In-sync replicas the leader needs to confirm (cluster.min_isr)",
       CL_MIN_ISR),
    CL("cluster_confirms_held", "1 while confirms are held: the ISR is below min_isr", CL_HELD),
    CL("cluster_follower_lag_bytes",
       "Bytes sent to a connected follower and not yet acknowledged", CL_LAG_BYTES),
    CL("cluster_follower_lag_seconds",
       "Age of the oldest sync a connected follower has not acknowledged", CL_LAG_SECONDS),
    CL("cluster_follower_in_sync", "1 when the follower is in the in-sync replica set",
       CL_IN_SYNC),
    /* Warren's shovels (GET /api/shovels) */
    SH("shovel_running", "gauge", "1 while the shovel runs (0: starting or terminated)", SH_RUNNING),
    SH("shovel_messages_forwarded_total", "counter", "Messages the shovel published to its destination",
       SH_FORWARDED),
    SH("shovel_messages_acked_total", "counter", "Messages the shovel acknowledged at its source",
       SH_ACKED),
    SH("shovel_messages_unconfirmed", "gauge",
       "Messages published to the destination and not confirmed yet (on-confirm)", SH_UNCONFIRMED),
    SH("shovel_restarts_total", "counter", "Times the shovel started again after a failure",
       SH_RESTARTS),
    /* Warren's queue health (the queue JSON's oldest_ready_age_ms, ...) */
    W("queue_oldest_ready_age_seconds", "gauge",
      "Seconds since the oldest ready message entered the queue, 0 when none is ready "
      "(aggregated: the oldest of any queue)",
      QV_OLDEST_READY, F_SECONDS | F_MAX | F_WORK),
    W("queue_oldest_unacked_age_seconds", "gauge",
      "Seconds since the oldest delivery from the queue that is still unacknowledged was made, "
      "0 when none (aggregated: the oldest of any queue)",
      QV_OLDEST_UNACKED, F_SECONDS | F_MAX | F_WORK),
    W("queue_messages_by_deliveries", "gauge",
      "Queued messages by how many times they were delivered (ready: so far; unacked: including "
      "the current delivery)",
      QV_DC, F_BUCKETS | F_WORK),
    W("queue_messages_delayed", "gauge",
      "Messages held back by delayed retry until their deadline (neither ready nor "
      "unacknowledged)",
      QV_DELAYED, 0 | F_WORK),
    W("queue_delivery_limit_dead_lettered_total", "counter",
      "Messages the queue's delivery limit dead-lettered or dropped since the queue was declared "
      "(not kept across restarts)",
      QV_LIMIT_DEAD, 0 | F_WORK),
    W("queue_consumer_timeouts_total", "counter",
      "Deliveries from the queue whose consumer timeout fired since the queue was declared "
      "(not kept across restarts)",
      QV_TIMEOUTS, 0 | F_WORK),
    W("queue_redrive_moved", "gauge",
      "Messages the queue's running or last move (redrive) has moved so far", QV_MOVED, 0 | F_WORK),
    W("queue_redrive_remaining", "gauge",
      "Messages the queue's running move (redrive) has still to move, 0 when none runs",
      QV_MOVE_LEFT, 0 | F_WORK),
    /* Warren's deduplication (the JSON's "deduplication" object) */
    W("queue_deduplication_entries", "gauge",
      "Keys held by the queue's deduplication cache (x-message-deduplication): one per message "
      "with a key in the queue",
      QV_DEDUP_ENTRIES, F_WORK),
    W("queue_deduplication_duplicates_total", "counter",
      "Messages the queue's deduplication dropped since the queue was declared (not kept "
      "across restarts)",
      QV_DEDUP_DUPLICATES, F_WORK),
    NW("exchange_deduplication_entries", "gauge",
       "Keys held by the exchanges' deduplication caches, summed (expired ones not yet dropped "
       "included)",
       NV_DEDUP_ENTRIES),
    NW("exchange_deduplication_duplicates_total", "counter",
       "Messages the exchanges' deduplication dropped, summed over the exchanges there are (not "
       "kept across restarts)",
       NV_DEDUP_DUPLICATES),
    /* Warren's stream figures (the queue JSON's segments, first_offset, ...) */
    W("stream_segments", "gauge", "Segment files of the stream's log", QV_SEGMENTS, F_STREAM),
    W("stream_segment_bytes", "gauge", "Size in bytes of the stream's segment files",
      QV_SEGMENT_BYTES, F_STREAM),
    W("stream_chunks", "gauge", "Chunks in the stream's log", QV_CHUNKS, F_STREAM),
    W("stream_first_offset", "gauge",
      "Offset of the stream's first record (none while the stream is empty)", QV_FIRST_OFFSET,
      F_STREAM | F_PER_OBJECT),
    W("stream_last_offset", "gauge",
      "Offset of the stream's last record (none while the stream is empty)", QV_LAST_OFFSET,
      F_STREAM | F_PER_OBJECT),
    W("stream_committed_offset", "gauge",
      "Id of the stream's last committed chunk, osiris's committed_offset (none before one)",
      QV_COMMITTED_OFFSET, F_STREAM | F_PER_OBJECT),
    W("stream_consumer_lag_max", "gauge",
      "Committed records the furthest-behind consumer of the stream has not read, 0 without "
      "consumers (aggregated: the largest of any stream)",
      QV_MAX_LAG, F_STREAM | F_MAX),
};
#define NFAMILIES (sizeof families / sizeof families[0])

struct prom_scrape {
    mgmt *m;
    server *s;
    mgmt_prom *w;
    bool per_object, detailed;
    bool on[NFAMILIES];   /* the families this scrape writes */
    server_counts counts; /* the global counters as the scrape started */
    uint64_t by_type[QUEUE_TYPES][STAT_COUNTERS]; /* the same by queue type */
    uint64_t node[NV_COUNT];
    uint64_t queues[QV_COUNT], chans[CV_COUNT], conns[XV_COUNT]; /* aggregated */
    mgmt_list *lists[SCOPES];                                    /* per object */
    size_t fam, item;
    bool started;   /* the current family's header is written */
    char name[128]; /* the current family's full name */
};

uint32_t prom_family_bit(const char *name)
{
    for (int g = G_NONE + 1; g < G_COUNT; g++)
        if (strcmp(name, group_names[g]) == 0)
            return BIT(g);
    return 0;
}

/* ---- which families ----------------------------------------------------------- */

static bool family_on(const family *f, const prom_options *o)
{
    if (f->flags & F_PER_OBJECT && !o->per_object && !o->detailed)
        return false;
    if (!o->detailed)
        return f->group != G_QUEUE_CONSUMER_COUNT && f->scope != VHOSTS &&
               f->scope != EXCHANGES;
    if (f->flags & F_ALWAYS)
        return true;
    /* queue_consumer_count adds nothing to queue_metrics (RabbitMQ's
     * mutually_exclusive_mf) */
    if (f->group == G_QUEUE_CONSUMER_COUNT && (o->families & BIT(G_QUEUE)))
        return false;
    return f->group != G_NONE && (o->families & BIT(f->group));
}

static void family_name(prom_scrape *sc, const family *f)
{
    const char *prefix = f->flags & F_WARREN                 ? "warren_"
                         : !sc->detailed || f->flags & F_ALWAYS ? "rabbitmq_"
                         : BIT(f->group) & CLUSTER_GROUPS        ? "rabbitmq_cluster_"
                                                                 : "rabbitmq_detailed_";
    snprintf(sc->name, sizeof sc->name, "%s%s", prefix, f->name);
}

static bool scope_on(const prom_scrape *sc, int scope)
{
    for (size_t i = 0; i < NFAMILIES; i++)
        if (sc->on[i] && families[i].scope == scope)
            return true;
    return false;
}

/* ---- values --------------------------------------------------------------- */

/* A stream's log figures and its consumers' largest lag. */
static void stream_values(queue *q, const queue_info *qi, uint64_t *v)
{
    const stream_info *s = &qi->log;
    if (!qi->stream)
        return;
    v[QV_SEGMENTS] = s->segments;
    v[QV_SEGMENT_BYTES] = s->bytes;
    v[QV_CHUNKS] = s->chunks;
    v[QV_FIRST_OFFSET] = s->empty ? NO_OFFSET : s->first_offset;
    v[QV_LAST_OFFSET] = s->empty ? NO_OFFSET : s->next_offset - 1;
    v[QV_COMMITTED_OFFSET] = s->committed_offset > s->first_offset ? s->committed_chunk_id
                                                                   : NO_OFFSET;
    for (consumer *c = queue_next_consumer(q, NULL); c; c = queue_next_consumer(q, c)) {
        uint64_t off;
        if (queue_stream_consumer_offset(c, &off) && s->committed_offset > off &&
            s->committed_offset - off > v[QV_MAX_LAG])
            v[QV_MAX_LAG] = s->committed_offset - off;
    }
}

static void queue_values(server *s, queue *q, bool unacked_age, uint64_t *v)
{
    queue_info qi;
    queue_describe(q, &qi);
    uint64_t now = loop_now_ms(admin_loop(s));
    uint64_t oldest = unacked_age && qi.unacked ? mgmt_queue_oldest_unacked(s, q) : 0;
    memset(v, 0, QV_COUNT * sizeof *v);
    stream_values(q, &qi, v);
    /* a stream's messages are its records; a delivery takes none (RabbitMQ's) */
    v[QV_READY] = qi.stream ? admin_stream_records(&qi.log) : qi.ready;
    v[QV_UNACKED] = qi.stream ? 0 : qi.unacked;
    v[QV_MESSAGES] = v[QV_READY] + v[QV_UNACKED];
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
    dedup_info di;
    if (queue_dedup_info(q, &di))
        v[QV_DEDUP_ENTRIES] = di.entries, v[QV_DEDUP_DUPLICATES] = di.duplicates;
}

static void chan_values(chan *ch, uint64_t *v)
{
    chan_info ci;
    chan_describe(ch, &ci);
    uint64_t vals[CV_COUNT] = {
        [CV_CONSUMERS] = ci.consumers,          [CV_UNACKED] = ci.unacked,
        [CV_UNCONFIRMED] = ci.unconfirmed,      [CV_UNCOMMITTED] = ci.uncommitted_msgs,
        [CV_ACKS_UNCOMMITTED] = ci.uncommitted_acks, [CV_PREFETCH] = ci.prefetch_count,
        [CV_GLOBAL_PREFETCH] = ci.global_prefetch_count,
    };
    for (int i = CV_PUBLISHED; i < CV_COUNT; i++)
        vals[i] = ci.stats->n[chan_stat[i]];
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
    static const uint8_t is_max[QV_COUNT] = {[QV_OLDEST_READY] = 1, [QV_OLDEST_UNACKED] = 1,
                                             [QV_MAX_LAG] = 1};
    uint64_t v[QV_COUNT];
    queue_values(sc->s, q, true, v);
    add_values(sc->queues, v, QV_COUNT, is_max);
}

/* Connections, channels and consumers: summed, and listed per object. */
static bool walk_connections(prom_scrape *sc)
{
    server *s = sc->s;
    mgmt_list *chans = sc->lists[CHAN], *conns = sc->lists[CONN];
    for (size_t i = 0; i < server_conn_count(s); i++) {
        conn *c = server_conn_at(s, i);
        conn_info ci;
        conn_describe(c, &ci);
        uint64_t xv[XV_COUNT];
        conn_values(&ci, xv);
        add_values(sc->conns, xv, XV_COUNT, NULL);
        if (conns && !mgmt_list_add(conns, "", AMQP_CSTR(ci.name), ci.id, 0, false))
            return false;
        for (uint32_t slot = 0; slot < conn_channel_slots(c); slot++) {
            chan *ch = conn_channel_at(c, slot);
            if (!ch)
                continue;
            uint64_t cv[CV_COUNT];
            chan_values(ch, cv);
            add_values(sc->chans, cv, CV_COUNT, NULL);
            if (chans && !mgmt_list_add(chans, "", AMQP_CSTR(ci.name),
                                        ci.id << 16 | chan_number(ch), 0, false))
                return false;
        }
    }
    return true;
}

static void add_dedup(void *arg, route_exchange *ex)
{
    uint64_t *v = arg;
    dedup_info di;
    if (dedup_exchange_info(ex, &di))
        v[0] += di.entries, v[1] += di.duplicates;
}

static void node_values(prom_scrape *sc)
{
    server *s = sc->s;
    uint64_t *v = sc->node;
    const server_counts *k = &sc->counts;
    uint64_t dedup[2] = {0, 0};
    for (vhost *vh = server_vhost_next(s, NULL); vh; vh = server_vhost_next(s, vh)) {
        v[NV_QUEUES] += vhost_queue_count(vh);
        route_foreach_exchange(vhost_routes(vh), add_dedup, dedup);
    }
    struct statvfs vfs;
    struct rlimit rl;
    uint64_t http_attempts, http_failed;
    mgmt_auth_counted(sc->m, &http_attempts, &http_failed);
    uint64_t vals[NV_COUNT] = {
        [NV_ALARM_DISK] = server_disk_alarm(s),   [NV_ALARM_MEM] = server_memory_alarm(s),
        [NV_CONN_OPENED] = k->connections_opened, [NV_CONN_CLOSED] = k->connections_closed,
        [NV_CHAN_OPENED] = k->channels_opened,    [NV_CHAN_CLOSED] = k->channels_closed,
        [NV_Q_DECLARED] = k->queues_declared,     [NV_Q_CREATED] = k->queues_created,
        [NV_Q_DELETED] = k->queues_deleted,       [NV_OPEN_FDS] = mgmt_fds_used(),
        [NV_OPEN_SOCKETS] = server_socket_count(s), [NV_RSS] = mgmt_rss_bytes(),
        [NV_DISK] = statvfs(server_config(s)->data_dir, &vfs) == 0
                        ? (uint64_t)vfs.f_bavail * vfs.f_frsize : 0,
        [NV_MAX_FDS] = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (uint64_t)rl.rlim_cur : 0,
        [NV_MEM_LIMIT] = server_memory_limit(s),  [NV_DISK_LIMIT] = server_disk_free_limit(s),
        [NV_AUTH_HTTP] = http_attempts,           [NV_AUTH_AMQP] = k->auth_attempts,
        [NV_AUTH_OK_HTTP] = http_attempts - http_failed,
        [NV_AUTH_OK_AMQP] = k->auth_attempts - k->auth_failed,
        [NV_AUTH_BAD_HTTP] = http_failed,         [NV_AUTH_BAD_AMQP] = k->auth_failed,
        [NV_CONNECTIONS] = server_conn_count(s),  [NV_CHANNELS] = sc->conns[XV_CHANNELS],
        [NV_CONSUMERS] = sc->chans[CV_CONSUMERS], [NV_QUEUES] = v[NV_QUEUES],
        [NV_CONFIRM] = k->messages_confirmed,     [NV_RECEIVED] = k->messages_received,
        [NV_RECEIVED_CONFIRM] = k->messages_received_confirm,
        [NV_ROUTED] = k->messages_routed,         [NV_DROPPED] = k->messages_dropped,
        [NV_RETURNED] = k->messages_returned,
        [NV_DEDUP_ENTRIES] = dedup[0],            [NV_DEDUP_DUPLICATES] = dedup[1],
    };
    memcpy(v, vals, sizeof vals);
}

/* ---- snapshots (per object) ----------------------------------------------------- */

typedef struct snapshot {
    mgmt_list *list;
    const char *vhost;
    bool ok;
} snapshot;

static void add_queue_name(void *arg, queue *q)
{
    snapshot *sn = arg;
    sn->ok = sn->ok && mgmt_list_add(sn->list, sn->vhost, queue_name(q), 0, 0, false);
}

/* RabbitMQ leaves out the default exchange and internal ones. */
static void add_exchange_name(void *arg, route_exchange *ex)
{
    snapshot *sn = arg;
    if (route_exchange_name(ex).len == 0 || route_exchange_internal(ex))
        return;
    sn->ok = sn->ok && mgmt_list_add(sn->list, sn->vhost, route_exchange_name(ex), 0, 0, false);
}

static bool vhost_asked(const prom_options *o, const char *name)
{
    if (!o->vhost_filter)
        return true;
    for (size_t i = 0; i < o->nvhosts; i++)
        if (strcmp(o->vhosts[i], name) == 0)
            return true;
    return false;
}

/* The queue names (of the vhosts asked for) and exchange names. */
static bool list_names(prom_scrape *sc, const prom_options *o)
{
    for (vhost *v = server_vhost_next(sc->s, NULL); v; v = server_vhost_next(sc->s, v)) {
        snapshot q = {sc->lists[QUEUE], vhost_name(v), true};
        snapshot x = {sc->lists[EXCHANGES], vhost_name(v), true};
        if (q.list && vhost_asked(o, q.vhost))
            vhost_foreach_queue(v, add_queue_name, &q);
        if (x.list)
            route_foreach_exchange(vhost_routes(v), add_exchange_name, &x);
        if (!q.ok || !x.ok)
            return false;
    }
    return true;
}

static mgmt_list *new_list(void)
{
    mgmt_list_query q = {.page_size = 100};
    char why[64];
    return mgmt_list_new(&q, why, sizeof why);
}

/* The lists a per-object scrape walks, for the scopes it writes, filled
 * and sorted. */
static bool snapshot_lists(prom_scrape *sc, const prom_options *o)
{
    static const int listed[] = {QUEUE, CHAN, CONN, EXCHANGES};
    for (size_t i = 0; i < sizeof listed / sizeof listed[0]; i++)
        if (scope_on(sc, listed[i]) && !(sc->lists[listed[i]] = new_list()))
            return false;
    if (!list_names(sc, o) || !walk_connections(sc))
        return false;
    char why[64];
    for (int i = 0; i < SCOPES; i++)
        if (sc->lists[i] && !mgmt_list_finish(sc->lists[i], why, sizeof why))
            return false;
    return true;
}

prom_scrape *prom_scrape_new(mgmt *m, server *s, const prom_options *o, mgmt_prom *w)
{
    prom_scrape *sc = calloc(1, sizeof *sc);
    if (!sc)
        return NULL;
    *sc = (prom_scrape){.m = m, .s = s, .w = w, .counts = *server_counters(s),
                        .per_object = o->per_object || o->detailed, .detailed = o->detailed};
    for (size_t i = 0; i < NFAMILIES; i++)
        sc->on[i] = family_on(&families[i], o) &&
                    (!(families[i].flags & F_CLUSTER) || mgmt_cluster_of(m)) &&
                    (!(families[i].flags & F_SHOVEL) || mgmt_shovels_of(m));
    if (sc->per_object && !snapshot_lists(sc, o)) {
        prom_scrape_free(sc);
        return NULL;
    }
    if (!sc->per_object) {
        for (vhost *v = server_vhost_next(s, NULL); v; v = server_vhost_next(s, v))
            vhost_foreach_queue(v, sum_queue, sc);
        walk_connections(sc); /* lists none: cannot fail */
    }
    node_values(sc);
    if (!sc->detailed) /* where the global families are */
        admin_counts_by_type(s, sc->by_type);
    return sc;
}

void prom_scrape_free(prom_scrape *sc)
{
    if (!sc)
        return;
    for (int i = 0; i < SCOPES; i++)
        mgmt_list_free(sc->lists[i]);
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
        mgmt_prom_begin(sc->w, sc->name);
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

static uint64_t by_queue_type(const prom_scrape *sc, int type, int what)
{
    const uint64_t *n = sc->by_type[type];
    if (what != QT_DELIVERED)
        return n[what];
    return n[STAT_DELIVER] + n[STAT_DELIVER_NO_ACK] + n[STAT_GET] + n[STAT_GET_NO_ACK];
}

static void protocol_queue_type(prom_scrape *sc, const family *f)
{
    for (int t = 0; t < QUEUE_TYPES; t++) {
        mgmt_prom_begin(sc->w, sc->name);
        mgmt_prom_label_str(sc->w, "protocol", "amqp091");
        mgmt_prom_label_str(sc->w, "queue_type", queue_type_by_id((uint8_t)t)->module);
        mgmt_prom_uint(sc->w, by_queue_type(sc, t, f->value));
    }
}

/* The (queue type, strategy) pairs RabbitMQ 3.10 counts a reason under
 * (classic and quorum queues'):
 * at-least-once is quorum's and never drops for length (it refuses); only
 * quorum queues have a delivery limit there (Warren's classic queues have
 * one too); "confirmed" is at-least-once's alone. */
static bool dead_pair(int reason, int type, int strategy)
{
    if (queue_type_by_id((uint8_t)type)->reads_without_taking)
        return false; /* a stream never dead-letters: RabbitMQ lists no stream pair */
    if (reason == DEAD_CONFIRMED)
        return queue_type_by_id((uint8_t)type)->at_least_once && strategy == DEAD_AT_LEAST_ONCE;
    if (strategy == DEAD_AT_LEAST_ONCE)
        return queue_type_by_id((uint8_t)type)->at_least_once && reason != DEAD_MAXLEN;
    return true;
}

static void dead_lettered(prom_scrape *sc, const family *f)
{
    static const char *const strategy[DEAD_STRATEGIES] = {
        [DEAD_DISABLED] = "disabled", [DEAD_AT_MOST_ONCE] = "at_most_once",
        [DEAD_AT_LEAST_ONCE] = "at_least_once"};
    static const int order[] = {DEAD_AT_LEAST_ONCE, DEAD_AT_MOST_ONCE, DEAD_DISABLED};
    const server_counts *k = &sc->counts;
    for (int t = 0; t < QUEUE_TYPES; t++)
        for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
            int how = order[i];
            if (!dead_pair(f->value, t, how))
                continue;
            mgmt_prom_begin(sc->w, sc->name);
            mgmt_prom_label_str(sc->w, "queue_type", queue_type_by_id((uint8_t)t)->module);
            mgmt_prom_label_str(sc->w, "dead_letter_strategy", strategy[how]);
            mgmt_prom_uint(sc->w, f->value == DEAD_CONFIRMED ? k->dead_lettered_confirmed
                                                             : k->dead_lettered[t][how][f->value]);
        }
}

static void info_family(prom_scrape *sc, const family *f)
{
    mgmt_prom *w = sc->w;
    mgmt_prom_begin(w, sc->name);
    if (f->labels == L_BUILD) {
        mgmt_prom_label_str(w, "rabbitmq_version", PROM_VERSION);
        mgmt_prom_label_str(w, "prometheus_plugin_version", PROM_VERSION);
        mgmt_prom_label_str(w, "product_name", "Warren");
        mgmt_prom_label_str(w, "product_version", WARREN_VERSION);
    } else {
        char name[64];
        mgmt_prom_label_str(w, "rabbitmq_node", server_node_name(sc->s));
        mgmt_prom_label_str(w, "rabbitmq_cluster", mgmt_cluster_name(sc->m, sc->s, name,
                                                                     sizeof name));
    }
    mgmt_prom_uint(w, 1);
}

/* One sample per follower (every other node with a record): in_sync
 * always, lag only while its replication session is open. */
static void follower_samples(prom_scrape *sc, const family *f, const cluster_status *st)
{
    for (unsigned i = 0; i < st->n_nodes; i++) {
        const cluster_node_status *n = &st->nodes[i];
        char name[160];
        if (strcmp(n->name, st->node_name) == 0 || (f->value != CL_IN_SYNC && !n->connected))
            continue;
        server_cluster_node_name(n->name, name, sizeof name);
        mgmt_prom_begin(sc->w, sc->name);
        mgmt_prom_label_str(sc->w, "node", name);
        if (f->value == CL_LAG_SECONDS)
            mgmt_prom_double(sc->w, (double)n->lag_ms / 1000.0);
        else
            mgmt_prom_uint(sc->w, f->value == CL_LAG_BYTES ? n->lag_bytes : n->in_isr);
    }
}

static void cluster_family(prom_scrape *sc, const family *f)
{
    cluster_status st;
    if (!mgmt_cluster_status(sc->m, &st))
        return;
    if (f->value >= CL_LAG_BYTES) {
        follower_samples(sc, f, &st);
        return;
    }
    uint64_t v[] = {[CL_LEADER] = st.role == CLUSTER_LEADER,
                    [CL_EPOCH] = st.epoch > 0 ? (uint64_t)st.epoch : 0,
                    [CL_ISR] = st.n_isr, [CL_MIN_ISR] = st.min_isr,
                    [CL_HELD] = st.confirms_held};
    mgmt_prom_begin(sc->w, sc->name);
    mgmt_prom_uint(sc->w, v[f->value]);
}

static void count_link(void *arg, const fed_link_info *l)
{
    uint64_t *n = arg;
    n[strcmp(l->status, "running") == 0 ? 0 : strcmp(l->status, "starting") == 0 ? 1 : 2]++;
}

/* warren_federation_links{status}: running, starting, error. */
static void federation_family(prom_scrape *sc)
{
    static const char *const names[] = {"running", "starting", "error"};
    uint64_t n[3] = {0};
    if (server_federation(sc->s))
        federation_foreach_link(server_federation(sc->s), count_link, n);
    for (int i = 0; i < 3; i++) {
        mgmt_prom_begin(sc->w, sc->name);
        mgmt_prom_label_str(sc->w, "status", names[i]);
        mgmt_prom_uint(sc->w, n[i]);
    }
}

typedef struct shovel_scrape {
    prom_scrape *sc;
    const family *f;
} shovel_scrape;

static void shovel_sample(void *arg, const shovel_status *st)
{
    shovel_scrape *x = arg;
    uint64_t v[] = {[SH_RUNNING] = st->state == SHOVEL_RUNNING, [SH_FORWARDED] = st->forwarded,
                    [SH_ACKED] = st->acked, [SH_UNCONFIRMED] = st->unconfirmed,
                    [SH_RESTARTS] = st->restarts};
    mgmt_prom_begin(x->sc->w, x->sc->name);
    mgmt_prom_label_str(x->sc->w, "vhost", st->vhost);
    mgmt_prom_label_str(x->sc->w, "name", st->name);
    mgmt_prom_uint(x->sc->w, v[x->f->value]);
}

typedef struct delayed_writer {
    prom_scrape *sc;
    vhost *v;
} delayed_writer;

static void delayed_sample(void *arg, route_exchange *ex)
{
    delayed_writer *d = arg;
    if (!route_exchange_delayed(ex))
        return;
    mgmt_prom_begin(d->sc->w, d->sc->name);
    mgmt_prom_label_str(d->sc->w, "vhost", vhost_name(d->v));
    mgmt_prom_label(d->sc->w, "exchange", route_exchange_name(ex));
    mgmt_prom_uint(d->sc->w, xdelay_count(d->v, ex));
}

/* Delayed exchanges are few: written in one step. */
static void delayed_family(prom_scrape *sc)
{
    delayed_writer d = {sc, NULL};
    for (d.v = server_vhost_next(sc->s, NULL); d.v; d.v = server_vhost_next(sc->s, d.v))
        route_foreach_exchange(vhost_routes(d.v), delayed_sample, &d);
}

static void node_family(prom_scrape *sc, const family *f)
{
    mgmt_prom *w = sc->w;
    switch (f->labels) {
    case L_AUTH:
        for (int i = 0; i < 2; i++) {
            mgmt_prom_begin(w, sc->name);
            mgmt_prom_label_str(w, "protocol", i ? "amqp091" : "http");
            mgmt_prom_uint(w, sc->node[f->value + i]);
        }
        return;
    case L_BUILD:
    case L_IDENTITY:
        info_family(sc, f);
        return;
    case L_CLUSTER:
        cluster_family(sc, f);
        return;
    case L_FEDERATION:
        federation_family(sc);
        return;
    case L_SHOVEL: {
        shovel_scrape x = {sc, f};
        shovels_foreach(mgmt_shovels_of(sc->m), NULL, shovel_sample, &x);
        return;
    }
    case L_PROTO_QT:
        protocol_queue_type(sc, f);
        return;
    case L_DEAD:
        dead_lettered(sc, f);
        return;
    case L_DELAYED:
        delayed_family(sc);
        return;
    case L_REFUSED: {
        uint64_t n[MGMT_REFUSALS];
        mgmt_refusal_counts(sc->m, sc->s, n);
        for (int i = 0; i < MGMT_REFUSALS; i++) {
            mgmt_prom_begin(w, sc->name);
            mgmt_prom_label_str(w, "kind", mgmt_refusal_names[i]);
            mgmt_prom_uint(w, n[i]);
        }
        return;
    }
    default:
        mgmt_prom_begin(w, sc->name);
        if (f->labels == L_PROTO)
            mgmt_prom_label_str(w, "protocol", "amqp091");
        mgmt_prom_uint(w, sc->node[f->value]);
    }
}

static void vhost_family(prom_scrape *sc)
{
    for (vhost *v = server_vhost_next(sc->s, NULL); v; v = server_vhost_next(sc->s, v)) {
        mgmt_prom_begin(sc->w, sc->name);
        mgmt_prom_label_str(sc->w, "vhost", vhost_name(v));
        mgmt_prom_uint(sc->w, !vhost_closing(v));
    }
}

static void queue_labels(mgmt_prom *w, const void *arg)
{
    const mgmt_list_item *it = arg;
    mgmt_prom_label_str(w, "vhost", it->vhost);
    mgmt_prom_label(w, "queue", it->name);
}

static void queue_keys(mgmt_prom *w, const void *arg)
{
    const mgmt_list_item *it = arg;
    mgmt_prom_label_str(w, "queue_vhost", it->vhost);
    mgmt_prom_label(w, "queue", it->name);
}

static void named_labels(mgmt_prom *w, const void *arg) { mgmt_prom_label_str(w, "channel", arg); }

static bool queue_sample(prom_scrape *sc, const family *f, const mgmt_list_item *it)
{
    vhost *vh = server_vhost(sc->s, AMQP_CSTR(it->vhost));
    queue *q = vh ? vhost_queue_find(vh, it->name) : NULL;
    if (!q)
        return false;
    uint64_t v[QV_COUNT];
    bool stream = queue_is_stream(q);
    if ((f->flags & F_STREAM && !stream) || (f->flags & F_WORK && stream))
        return true; /* not this kind of queue's */
    queue_values(sc->s, q, f->value == QV_OLDEST_UNACKED, v);
    if (v[f->value] != NO_OFFSET)
        samples(sc, f, v, f->flags & F_QUEUE_KEYS ? queue_keys : queue_labels, it);
    return true;
}

static bool exchange_sample(prom_scrape *sc, const family *f, const mgmt_list_item *it)
{
    vhost *vh = server_vhost(sc->s, AMQP_CSTR(it->vhost));
    route_exchange *ex = vh ? route_exchange_find(vhost_routes(vh), it->name) : NULL;
    if (!ex)
        return false;
    mgmt_prom_begin(sc->w, sc->name);
    mgmt_prom_label_str(sc->w, "vhost", it->vhost);
    mgmt_prom_label(sc->w, "exchange", it->name);
    mgmt_prom_label_str(sc->w, "type", route_type_name(route_exchange_type(ex)));
    mgmt_prom_uint(sc->w, f->value == EV_NAME ? 1 : route_exchange_binding_count(ex));
    return true;
}

/* One channel's samples of a per-exchange or per-queue family. */
typedef struct slot_writer {
    prom_scrape *sc;
    const char *channel, *vhost;
    stat_id stat;
} slot_writer;

static void slot_sample(slot_writer *sw, const char *key, amqp_bytes name, const uint64_t *n)
{
    mgmt_prom *w = sw->sc->w;
    mgmt_prom_begin(w, sw->sc->name);
    mgmt_prom_label_str(w, "channel", sw->channel);
    mgmt_prom_label_str(w, "vhost", sw->vhost);
    mgmt_prom_label(w, key, name);
    mgmt_prom_uint(w, n[sw->stat]);
}

static void exchange_slot(void *arg, amqp_bytes exchange, const uint64_t *n)
{
    slot_sample(arg, "exchange", exchange, n);
}

static void queue_slot(void *arg, queue *q, const uint64_t *n)
{
    slot_sample(arg, "queue", queue_name(q), n);
}

static bool chan_sample(prom_scrape *sc, const family *f, const mgmt_list_item *it)
{
    conn *c = admin_conn_find(sc->s, f->scope == CHAN ? it->id >> 16 : it->id);
    chan *ch = c && f->scope == CHAN ? conn_channel_find(c, (uint16_t)(it->id & 0xffff)) : NULL;
    if (!c || (f->scope == CHAN && !ch))
        return false;
    conn_info ci;
    conn_describe(c, &ci);
    char name[512];
    uint64_t v[(int)CV_COUNT > (int)XV_COUNT ? (int)CV_COUNT : (int)XV_COUNT];
    if (!ch) {
        conn_values(&ci, v);
        samples(sc, f, v, named_labels, ci.name);
        return true;
    }
    snprintf(name, sizeof name, "%s (%u)", ci.name, chan_number(ch));
    slot_writer sw = {sc, name, ci.vhost, chan_stat[f->value]};
    if (f->flags & F_PER_EXCHANGE)
        chan_foreach_exchange_stats(ch, exchange_slot, &sw);
    else if (f->flags & F_PER_QUEUE)
        chan_foreach_queue_stats(ch, queue_slot, &sw);
    else
        chan_values(ch, v), samples(sc, f, v, named_labels, name);
    return true;
}

/* One object of f's scope, looked up again; false when it is gone. */
static bool object_sample(prom_scrape *sc, const family *f, const mgmt_list_item *it)
{
    if (f->scope == QUEUE)
        return queue_sample(sc, f, it);
    if (f->scope == EXCHANGES)
        return exchange_sample(sc, f, it);
    return chan_sample(sc, f, it);
}

static const uint64_t *sums_of(prom_scrape *sc, int scope)
{
    return scope == QUEUE ? sc->queues : scope == CHAN ? sc->chans : sc->conns;
}

/* Writes what it can of family f within the budget; false when it stopped
 * before the family's end (sc->item says where to resume). */
static bool write_family(prom_scrape *sc, const family *f, size_t start, size_t budget)
{
    if (f->scope == NODE) {
        node_family(sc, f);
    } else if (f->scope == VHOSTS) {
        vhost_family(sc);
    } else if (!sc->per_object) {
        samples(sc, f, sums_of(sc, f->scope), NULL, NULL);
    } else {
        mgmt_list *l = sc->lists[f->scope];
        while (sc->item < mgmt_list_count(l) && mgmt_prom_written(sc->w) - start < budget)
            object_sample(sc, f, mgmt_list_at(l, sc->item++));
        return sc->item == mgmt_list_count(l);
    }
    return true;
}

bool prom_scrape_step(prom_scrape *sc, size_t budget)
{
    size_t start = mgmt_prom_written(sc->w);
    loop_touch_clock(admin_loop(sc->s));
    while (sc->fam < NFAMILIES && mgmt_prom_written(sc->w) - start < budget) {
        const family *f = &families[sc->fam];
        if (sc->on[sc->fam]) {
            if (!sc->started) {
                family_name(sc, f);
                mgmt_prom_family(sc->w, sc->name, f->type, f->help);
            }
            sc->started = true;
            if (!write_family(sc, f, start, budget))
                return false;
        }
        sc->fam++;
        sc->item = 0;
        sc->started = false;
    }
    return sc->fam == NFAMILIES;
}
