/* Queue arguments: validated on declare as RabbitMQ 3.10's
 * rabbit_amqqueue:declare_args does, compared on redeclare with its texts,
 * and parsed into queue_args for the queue to act on.
 *
 * Queue types (x-queue-type, queue_type.c's table): classic (also when
 * absent; the two are equivalent on redeclare) and quorum. Each type
 * refuses the arguments of the other types as RabbitMQ 3.10 does ("invalid
 * arg ... of queue type rabbit_quorum_queue"), except that x-delivery-limit
 * works on classic queues too (Warren's choice, see README). A stream
 * takes x-max-length-bytes, x-max-age, x-stream-max-segment-size-bytes,
 * x-initial-cluster-size, x-queue-leader-locator and (3.13's)
 * x-stream-filter-size-bytes. */
#include <stdio.h>
#include <string.h>

#include "queue.h"
#include "queue_internal.h"

typedef enum arg_kind { ARG_INT, ARG_NON_NEG, ARG_POSITIVE, ARG_STR, ARG_DLRK, ARG_OVERFLOW,
                        ARG_PRIORITY, ARG_BOOL, ARG_TYPE, ARG_DLS, ARG_LIMIT, ARG_RETRY_TYPE,
                        ARG_AGE, ARG_FILTER_SIZE, ARG_ANY } arg_kind;

/* The keys RabbitMQ validates and compares, in its order. */
static const struct {
    const char *key;
    arg_kind kind;
} known[] = {
    {"x-expires", ARG_POSITIVE},
    {"x-message-ttl", ARG_NON_NEG},
    {"x-dead-letter-exchange", ARG_STR},
    {"x-dead-letter-routing-key", ARG_DLRK},
    {"x-max-length", ARG_NON_NEG},
    {"x-max-length-bytes", ARG_NON_NEG},
    {"x-max-in-memory-length", ARG_NON_NEG},
    {"x-max-in-memory-bytes", ARG_NON_NEG},
    {"x-max-priority", ARG_PRIORITY},
    {"x-overflow", ARG_OVERFLOW},
    {"x-queue-mode", ARG_ANY},
    {"x-single-active-consumer", ARG_BOOL},
    {"x-queue-type", ARG_TYPE},
    {"x-quorum-initial-group-size", ARG_NON_NEG},
    {"x-delivery-limit", ARG_LIMIT},
    {"x-dead-letter-strategy", ARG_DLS},
    {"x-consumer-timeout", ARG_NON_NEG},
    /* RabbitMQ 4.3's delayed retry, and LavinMQ's multiplier */
    {"x-delayed-retry-type", ARG_RETRY_TYPE},
    {"x-delayed-retry-min", ARG_NON_NEG},
    {"x-delayed-retry-max", ARG_NON_NEG},
    {"x-delayed-retry-multiplier", ARG_POSITIVE},
    /* streams */
    {"x-max-age", ARG_AGE},
    {"x-stream-max-segment-size-bytes", ARG_NON_NEG},
    {"x-stream-filter-size-bytes", ARG_FILTER_SIZE},
    {"x-initial-cluster-size", ARG_ANY},
    {"x-queue-leader-locator", ARG_ANY},
};
#define NKNOWN (sizeof known / sizeof known[0])

/* An x-max-age without a leading number crashes RabbitMQ 3.10's channel
 * (list_to_integer): the connection closes with 541. */
#define AGE_CRASH "crash"

static const char *const overflow_names[] = {"drop-head", "reject-publish", "reject-publish-dlx"};
/* by QUEUE_RETRY_ */
static const char *const retry_type_names[] = {"disabled", "all", "failed", "returned"};

/* The type the arguments name: classic when they name none, NULL when
 * they name one Warren does not know. */
static const queue_type *named_type(amqp_bytes args)
{
    amqp_field f;
    if (!amqp_table_get(args, "x-queue-type", &f))
        return queue_type_by_id(QUEUE_TYPE_CLASSIC);
    return f.type == 'S' ? queue_type_named(f.v.bytes) : NULL;
}

static bool is_int_type(uint8_t t) { return t && strchr("bsIlBui", t); }

static const char *unacceptable(const amqp_field *f, char *why, size_t whylen)
{
    snprintf(why, whylen, "{unacceptable_type,%s}", amqp_erl_type_name(f->type));
    return why;
}

/* The Erlang term RabbitMQ prints for a rejected value, or NULL if fine. */
static const char *check_value(arg_kind kind, const amqp_field *f, amqp_bytes args, char *why,
                               size_t whylen)
{
    char v[64];
    switch (kind) {
    case ARG_INT:
    case ARG_NON_NEG:
    case ARG_POSITIVE:
    case ARG_PRIORITY:
        if (!is_int_type(f->type)) {
            snprintf(why, whylen, "\"expected integer, got %s\"", amqp_erl_type_name(f->type));
            return why;
        }
        amqp_erl_term(f, v, sizeof v);
        if (kind != ARG_INT && f->v.i < 0)
            snprintf(why, whylen, "{value_negative,%s}", v);
        else if (kind == ARG_POSITIVE && f->v.i == 0)
            snprintf(why, whylen, "{value_zero,%s}", v);
        else if (kind == ARG_PRIORITY && f->v.i > 255)
            snprintf(why, whylen, "{value_too_big,%s}", v);
        else
            return NULL;
        return why;
    case ARG_STR:
    case ARG_DLRK:
        if (f->type != 'S')
            return unacceptable(f, why, whylen);
        if (kind == ARG_DLRK && !amqp_table_get(args, "x-dead-letter-exchange", &(amqp_field){0})) {
            snprintf(why, whylen, "routing_key_but_no_dlx_defined");
            return why;
        }
        return NULL;
    case ARG_OVERFLOW:
        for (size_t i = 0; f->type == 'S' && i < 3; i++)
            if (amqp_bytes_equal_cstr(f->v.bytes, overflow_names[i]))
                return NULL;
        amqp_erl_term(f, v, sizeof v);
        snprintf(why, whylen, "{invalid_overflow_value,%s}", v);
        return why;
    case ARG_BOOL:
        return f->type == 't' ? NULL : unacceptable(f, why, whylen);
    case ARG_TYPE:
        if (f->type != 'S')
            return unacceptable(f, why, whylen);
        if (queue_type_named(f->v.bytes))
            return NULL;
        snprintf(why, whylen, "\"unsupported queue type '%.*s'\"",
                     (int)(f->v.bytes.len > 64 ? 64 : f->v.bytes.len), (const char *)f->v.bytes.ptr);
        return why;
    case ARG_DLS:
        if (f->type != 'S')
            return unacceptable(f, why, whylen);
        if (amqp_bytes_equal_cstr(f->v.bytes, "at-most-once") ||
            amqp_bytes_equal_cstr(f->v.bytes, "at-least-once"))
            return NULL;
        snprintf(why, whylen, "invalid_dlx_strategy");
        return why;
    case ARG_LIMIT: /* RabbitMQ 3.10 takes any value on a quorum queue */
        return queue_type_of_args(args)->any_delivery_limit
                   ? NULL
                   : check_value(ARG_NON_NEG, f, args, why, whylen);
    case ARG_RETRY_TYPE:
        for (size_t i = 0; f->type == 'S' && i < 4; i++)
            if (amqp_bytes_equal_cstr(f->v.bytes, retry_type_names[i]))
                return NULL;
        amqp_erl_term(f, v, sizeof v);
        snprintf(why, whylen, "{invalid_delayed_retry_type,%s}", v);
        return why;
    case ARG_AGE: {
        int64_t ms;
        if (f->type != 'S')
            return unacceptable(f, why, whylen);
        stream_age_status st = stream_parse_age((const char *)f->v.bytes.ptr, f->v.bytes.len, &ms);
        if (st == STREAM_AGE_OK)
            return NULL;
        snprintf(why, whylen, "%s", st == STREAM_AGE_NO_NUMBER ? AGE_CRASH : "invalid_max_age");
        return why;
    }
    case ARG_FILTER_SIZE:
        if (!is_int_type(f->type))
            return check_value(ARG_INT, f, args, why, whylen);
        if (f->v.i >= STREAM_FILTER_SIZE_MIN && f->v.i <= STREAM_FILTER_SIZE_MAX)
            return NULL;
        amqp_erl_term(f, v, sizeof v);
        snprintf(why, whylen, "{value_out_of_range,%s}", v);
        return why;
    case ARG_ANY:
        return NULL;
    }
    return NULL;
}

int queue_args_parse(amqp_bytes args, amqp_bytes qname, const char *vhost_label, queue_args *out,
                     amqp_error *err)
{
    char why[160];
    const queue_type *t = queue_type_of_args(args);
    for (size_t i = 0; i < NKNOWN; i++) {
        amqp_field f;
        if (!amqp_table_get(args, known[i].key, &f))
            continue;
        if (t->overflow_error && known[i].kind == ARG_OVERFLOW &&
            check_value(ARG_OVERFLOW, &f, args, why, sizeof why))
            snprintf(why, sizeof why, "%s", t->overflow_error); /* the type's own check */
        else if (!check_value(known[i].kind, &f, args, why, sizeof why))
            continue;
        if (known[i].kind == ARG_AGE && strcmp(why, AGE_CRASH) == 0)
            return amqp_fail_crash(err, AMQP_QUEUE_DECLARE);
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_QUEUE_DECLARE,
                         "invalid arg '%s' for queue '%.*s' in vhost '%s': %s", known[i].key,
                         (int)qname.len, (const char *)qname.ptr, vhost_label, why);
    }
    amqp_field f;
    for (const char *const *k = t->refused_args; *k; k++)
        if (amqp_table_get(args, *k, &f))
            return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_QUEUE_DECLARE,
                             "invalid arg '%s' for queue '%.*s' in vhost '%s' of queue type %s", *k,
                             (int)qname.len, (const char *)qname.ptr, vhost_label,
                             t->module);
    dedup_config dedup;
    if (dedup_config_parse(args, true, AMQP_QUEUE_DECLARE, &dedup, err) != AMQP_OK)
        return AMQP_ERROR;
    queue_args_read(args, out);
    return AMQP_OK;
}

/* x-delayed-retry-*: without a type, a min alone means "failed" (LavinMQ's
 * way of enabling it); see delayed.c. */
static void read_retry(amqp_bytes args, queue_args *out)
{
    amqp_field f;
    int64_t n;
    out->retry_min = out->retry_max = out->retry_multiplier = -1;
    if (amqp_table_get(args, "x-delayed-retry-min", &f) && amqp_field_int(&f, &n) && n >= 0)
        out->retry_min = n;
    if (amqp_table_get(args, "x-delayed-retry-max", &f) && amqp_field_int(&f, &n) && n >= 0)
        out->retry_max = n;
    if (amqp_table_get(args, "x-delayed-retry-multiplier", &f) && amqp_field_int(&f, &n) && n > 0)
        out->retry_multiplier = n;
    out->retry_type = out->retry_min > 0 ? QUEUE_RETRY_FAILED : QUEUE_RETRY_DISABLED;
    if (amqp_table_get(args, "x-delayed-retry-type", &f) && f.type == 'S')
        for (uint8_t i = 0; i < 4; i++)
            if (amqp_bytes_equal_cstr(f.v.bytes, retry_type_names[i]))
                out->retry_type = i;
}

/* Values of the wrong type are skipped: effective arguments combine a
 * queue's validated arguments with validated policy values, and a
 * dead-letter routing key may come without an exchange there. */
void queue_args_read(amqp_bytes args, queue_args *out)
{
    *out = (queue_args){.message_ttl = -1, .expires = -1, .max_length = -1,
                        .max_length_bytes = -1, .delivery_limit = -1, .consumer_timeout = -1};
    amqp_field f;
    int64_t n;
    const queue_type *t = queue_type_of_args(args);
    out->type = t->id;
    /* the type's default (a quorum queue's 20, RabbitMQ 4.x's); a negative
     * x-delivery-limit means none */
    out->delivery_limit = t->delivery_limit;
    if (amqp_table_get(args, "x-delivery-limit", &f) && amqp_field_int(&f, &n))
        out->delivery_limit = n < 0 ? -1 : n;
    if (amqp_table_get(args, "x-consumer-timeout", &f) && amqp_field_int(&f, &n) && n >= 0)
        out->consumer_timeout = n;
    if (amqp_table_get(args, "x-message-ttl", &f) && amqp_field_int(&f, &n))
        out->message_ttl = n;
    read_retry(args, out);
    if (amqp_table_get(args, "x-expires", &f) && amqp_field_int(&f, &n))
        out->expires = n;
    if (amqp_table_get(args, "x-max-length", &f) && amqp_field_int(&f, &n))
        out->max_length = n;
    if (amqp_table_get(args, "x-max-length-bytes", &f) && amqp_field_int(&f, &n))
        out->max_length_bytes = n;
    if (amqp_table_get(args, "x-overflow", &f) && f.type == 'S')
        for (uint8_t i = 0; i < 3; i++)
            if (amqp_bytes_equal_cstr(f.v.bytes, overflow_names[i]))
                out->overflow = i;
    /* a type without reject-publish-dlx takes its default, drop-head */
    if (!t->reject_publish_dlx && out->overflow == QUEUE_REJECT_PUBLISH_DLX)
        out->overflow = QUEUE_DROP_HEAD;
    if (amqp_table_get(args, "x-max-priority", &f) && amqp_field_int(&f, &n) && n > 0 && n < 256)
        out->max_priority = (uint8_t)n;
    out->single_active = amqp_table_get(args, "x-single-active-consumer", &f) && f.v.i;
    out->max_age_ms = out->max_segment_bytes = -1;
    if (amqp_table_get(args, "x-max-age", &f) && f.type == 'S' &&
        stream_parse_age((const char *)f.v.bytes.ptr, f.v.bytes.len, &n) == STREAM_AGE_OK)
        out->max_age_ms = n;
    if (amqp_table_get(args, "x-stream-max-segment-size-bytes", &f) && amqp_field_int(&f, &n) &&
        n > 0)
        out->max_segment_bytes = n;
    if (amqp_table_get(args, "x-stream-filter-size-bytes", &f) && amqp_field_int(&f, &n) &&
        n >= STREAM_FILTER_SIZE_MIN && n <= STREAM_FILTER_SIZE_MAX)
        out->filter_size = (uint8_t)n;
    out->has_dlx = amqp_table_get(args, "x-dead-letter-exchange", &f) && f.type == 'S';
    if (out->has_dlx)
        out->dlx = f.v.bytes;
    out->has_dlrk = amqp_table_get(args, "x-dead-letter-routing-key", &f) && f.type == 'S';
    if (out->has_dlrk)
        out->dlrk = f.v.bytes;
    /* RabbitMQ 3.10 keeps at-least-once only with reject-publish (else
     * it falls back to at-most-once) and a dead-letter exchange */
    out->at_least_once = t->at_least_once && out->has_dlx &&
                         out->overflow == QUEUE_REJECT_PUBLISH &&
                         amqp_table_get(args, "x-dead-letter-strategy", &f) && f.type == 'S' &&
                         amqp_bytes_equal_cstr(f.v.bytes, "at-least-once");
}

/* As RabbitMQ words it: "'1000'" when both sides have the argument, else
 * "the value '1000' of type 'signedint'" for the side that has it and
 * "none" for the other. */
static void describe(const amqp_field *f, bool present, bool both, char *out, size_t cap)
{
    char v[96];
    if (!present)
        snprintf(out, cap, "none");
    else if (both)
        snprintf(out, cap, "'%s'", amqp_erl_value(f, v, sizeof v));
    else
        snprintf(out, cap, "the value '%s' of type '%s'", amqp_erl_value(f, v, sizeof v),
                 amqp_erl_type_name(f->type));
}

int queue_args_equivalent(amqp_bytes current, amqp_bytes received, amqp_bytes qname,
                          const char *vhost_label, amqp_error *err)
{
    for (size_t i = 0; i < NKNOWN; i++) {
        amqp_field a, b;
        bool has_a = amqp_table_get(current, known[i].key, &a);
        bool has_b = amqp_table_get(received, known[i].key, &b);
        if (known[i].kind == ARG_TYPE && named_type(current) &&
            named_type(current) == named_type(received))
            continue; /* "classic" is what no type means, both ways */
        /* RabbitMQ compares by value: 5 as a byte equals 5 as a signed int */
        if (has_a == has_b && (!has_a || amqp_field_equal(&a, &b)))
            continue;
        char cur[128], rec[128];
        describe(&a, has_a, has_a && has_b, cur, sizeof cur);
        describe(&b, has_b, has_a && has_b, rec, sizeof rec);
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_QUEUE_DECLARE,
                         "inequivalent arg '%s' for queue '%.*s' in vhost '%s': received %s but "
                         "current is %s",
                         known[i].key, (int)qname.len, (const char *)qname.ptr, vhost_label, rec, cur);
    }
    return AMQP_OK;
}
