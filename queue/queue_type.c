/* The queue types: classic and quorum, as two entries of one table. The
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
    "x-initial-cluster-size", "x-queue-leader-locator", NULL};
static const char *const quorum_refuses[] = {
    "x-max-priority", "x-queue-mode", "x-queue-version", "x-queue-master-locator", "x-max-age",
    "x-stream-max-segment-size-bytes", "x-initial-cluster-size", NULL};

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
        .check_declare = durable_shared_only,
        .ops = &queue_core_ops,
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
