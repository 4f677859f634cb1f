/* The queue types: classic, quorum and stream, entries of one table. The
 * queue core (queue.c) and the modules around it ask a queue's type what
 * to do where the types differ -- never "is it quorum?" -- so a stream
 * queue is one more entry with its own operations, not a new set of
 * branches. Classic and quorum share the queue core's operations; what
 * sets them apart is the behaviour below, each as RabbitMQ 3.10 (4.x where
 * noted) shows it. */
#include <stdio.h>

#include "queue.h"
#include "queue_internal.h"

/* Arguments a queue type refuses (RabbitMQ 3.10's queue_arguments
 * capabilities, as the declare of each one shows). */
static const char *const classic_refuses[] = {
    "x-max-in-memory-length", "x-max-in-memory-bytes", "x-dead-letter-strategy",
    "x-quorum-initial-group-size", "x-max-age", "x-stream-max-segment-size-bytes",
    "x-initial-cluster-size", "x-queue-leader-locator", "x-stream-filter-size-bytes", NULL};
/* rabbit_stream_queue's capabilities take only x-max-length-bytes,
 * x-max-age, x-stream-max-segment-size-bytes, x-initial-cluster-size and
 * x-queue-leader-locator (3.13 adds x-stream-filter-size-bytes). */
static const char *const stream_refuses[] = {
    "x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
    "x-max-length", "x-max-in-memory-length", "x-max-in-memory-bytes", "x-max-priority",
    "x-overflow", "x-queue-mode", "x-single-active-consumer", "x-quorum-initial-group-size",
    "x-delivery-limit", "x-dead-letter-strategy", "x-consumer-timeout", "x-delayed-retry-type",
    "x-delayed-retry-min", "x-delayed-retry-max", "x-delayed-retry-multiplier", NULL};
static const char *const quorum_refuses[] = {
    "x-max-priority", "x-queue-mode", "x-queue-version", "x-queue-master-locator", "x-max-age",
    "x-stream-max-segment-size-bytes", "x-initial-cluster-size", "x-stream-filter-size-bytes",
    NULL};

static int any_properties(const queue_spec *spec, const char *vhost_label, amqp_error *err)
{
    (void)spec, (void)vhost_label, (void)err;
    return AMQP_OK;
}

/* A replicated queue outlives its connection and the broker: 406
 * "invalid property 'auto-delete' ..." (or 'exclusive-owner',
 * 'non-durable') as RabbitMQ 3.10 words it. */
static int durable_shared_only(const queue_spec *spec, const char *vhost_label, amqp_error *err)
{
    const char *prop = spec->auto_delete ? "auto-delete"
                       : spec->exclusive ? "exclusive-owner"
                       : !spec->durable  ? "non-durable"
                                         : NULL;
    if (!prop)
        return AMQP_OK;
    return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_QUEUE_DECLARE,
                     "invalid property '%s' for queue '%.*s' in vhost '%s'", prop,
                     (int)spec->name.len, (const char *)spec->name.ptr, vhost_label);
}

/* Messages in the queue core's rings (queue.c). */
static const queue_ops queue_core_ops = {
    .publish = queue_core_publish,
    .get = queue_core_get,
    .requeue = queue_core_requeue,
    .settled = queue_core_settled,
    .purge = queue_core_purge,
    .delete = queue_core_delete,
    .describe = queue_core_describe,
    .dispatch = queue_core_dispatch,
};

/* A stream's log (stream_queue.c, stream_consume.c). */
static const queue_ops stream_ops = {
    .publish = stream_publish,
    .get = stream_get,
    .requeue = stream_requeue,
    .settled = queue_core_settled,
    .purge = stream_purge,
    .delete = queue_core_delete,
    .describe = stream_describe,
    .dispatch = stream_dispatch,
    .consume = stream_consume,
    .consumer_gone = stream_consumer_gone,
};

static const queue_type types[QUEUE_TYPES] = {
    [QUEUE_TYPE_CLASSIC] = {
        .id = QUEUE_TYPE_CLASSIC,
        .name = "classic",
        .module = "rabbit_classic_queue",
        .refused_args = classic_refuses,
        .delivery_limit = -1,
        .server_named = true,
        .priority_levels = true,
        .reject_publish_dlx = true,
        .global_prefetch = true,
        .check_declare = any_properties,
        .ops = &queue_core_ops,
    },
    [QUEUE_TYPE_QUORUM] = {
        .id = QUEUE_TYPE_QUORUM,
        .name = "quorum",
        .module = "rabbit_quorum_queue",
        .refused_args = quorum_refuses,
        .overflow_error = "invalid_overflow",
        .any_delivery_limit = true,
        .delivery_limit = 20, /* RabbitMQ 4.x's default */
        .counts_deliveries = true,
        .get_counts_first = true,
        .journals_transient = true,
        .replicated = true,
        .refuses_over_limit = true,
        .at_least_once = true,
        .delays_publish = true,
        .check_declare = durable_shared_only,
        .ops = &queue_core_ops,
    },
    [QUEUE_TYPE_STREAM] = {
        .id = QUEUE_TYPE_STREAM,
        .name = "stream",
        .module = "rabbit_stream_queue",
        .refused_args = stream_refuses,
        .delivery_limit = -1,
        .replicated = true,
        .global_prefetch = true, /* refused by its consume check, with 3.10's text */
        .reads_without_taking = true,
        .own_log = true,
        .check_declare = durable_shared_only,
        .ops = &stream_ops,
    },
};

const queue_type *queue_type_by_id(uint8_t id)
{
    invariant(id < QUEUE_TYPES);
    return &types[id];
}

const queue_type *queue_type_named(amqp_bytes name)
{
    for (size_t i = 0; i < QUEUE_TYPES; i++)
        if (amqp_bytes_equal_cstr(name, types[i].name))
            return &types[i];
    return NULL;
}

const queue_type *queue_type_of_args(amqp_bytes args)
{
    amqp_field f;
    const queue_type *t = NULL;
    if (amqp_table_get(args, "x-queue-type", &f) && f.type == 'S')
        t = queue_type_named(f.v.bytes);
    return t ? t : &types[QUEUE_TYPE_CLASSIC];
}
