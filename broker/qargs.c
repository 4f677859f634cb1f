/* Queue arguments: validated on declare as RabbitMQ 3.10's
 * rabbit_amqqueue:declare_args does, compared on redeclare with its texts,
 * and parsed into queue_args for the queue to act on. */
#include <stdio.h>
#include <string.h>

#include "broker.h"

typedef enum arg_kind { ARG_INT, ARG_NON_NEG, ARG_POSITIVE, ARG_STR, ARG_DLRK, ARG_OVERFLOW,
                        ARG_PRIORITY, ARG_BOOL, ARG_ANY } arg_kind;

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
    {"x-queue-type", ARG_ANY},
    {"x-delivery-limit", ARG_NON_NEG},
};
#define NKNOWN (sizeof known / sizeof known[0])

static const char *const overflow_names[] = {"drop-head", "reject-publish", "reject-publish-dlx"};

static bool is_int_type(uint8_t t) { return t && strchr("bsIlBui", t); }

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
        if (f->type != 'S') {
            snprintf(why, whylen, "{unacceptable_type,%s}", amqp_erl_type_name(f->type));
            return why;
        }
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
        if (f->type == 't')
            return NULL;
        snprintf(why, whylen, "{unacceptable_type,%s}", amqp_erl_type_name(f->type));
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
    for (size_t i = 0; i < NKNOWN; i++) {
        amqp_field f;
        if (!amqp_table_get(args, known[i].key, &f))
            continue;
        if (check_value(known[i].kind, &f, args, why, sizeof why))
            return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_QUEUE_DECLARE,
                             "invalid arg '%s' for queue '%.*s' in vhost '%s': %s", known[i].key,
                             (int)qname.len, (const char *)qname.ptr, vhost_label, why);
    }
    queue_args_read(args, out);
    return AMQP_OK;
}

/* Values of the wrong type are skipped: effective arguments combine a
 * queue's validated arguments with validated policy values, and a
 * dead-letter routing key may come without an exchange there. */
void queue_args_read(amqp_bytes args, queue_args *out)
{
    *out = (queue_args){.message_ttl = -1, .expires = -1, .max_length = -1,
                        .max_length_bytes = -1};
    amqp_field f;
    int64_t n;
    if (amqp_table_get(args, "x-message-ttl", &f) && amqp_field_int(&f, &n))
        out->message_ttl = n;
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
    if (amqp_table_get(args, "x-max-priority", &f) && amqp_field_int(&f, &n) && n > 0 && n < 256)
        out->max_priority = (uint8_t)n;
    out->single_active = amqp_table_get(args, "x-single-active-consumer", &f) && f.v.i;
    out->has_dlx = amqp_table_get(args, "x-dead-letter-exchange", &f) && f.type == 'S';
    if (out->has_dlx)
        out->dlx = f.v.bytes;
    out->has_dlrk = amqp_table_get(args, "x-dead-letter-routing-key", &f) && f.type == 'S';
    if (out->has_dlrk)
        out->dlrk = f.v.bytes;
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
