/* Channel methods that change topology: exchange.*, queue.* (basic.consume,
 * cancel and get are in consume.c), and the management API's operations
 * through the same paths. Checks and error texts follow RabbitMQ 3.10
 * (rabbit_channel), including the "" shortcuts for the channel's most
 * recently declared queue.
 *
 * Permissions, in rabbit_channel's order relative to the other checks:
 *   exchange.declare   configure on it (after the type and default-exchange
 *                      checks); a new one with alternate-exchange also read
 *                      on it and write on the AE. Passive: none.
 *   exchange.delete    configure (after the default and amq.* checks)
 *   *.bind / *.unbind  write on the destination, then the default-exchange
 *                      check, read on the source, topic read on the key
 *   queue.declare      configure (after amq.* and naming amq.gen-*); a new
 *                      one with x-dead-letter-exchange also read on it and
 *                      write on the DLX. Passive: none.
 *   queue.delete       configure;  queue.purge, basic.consume/get: read --
 *                      each after the "" shortcut, before 404 / 405
 *                      (chan_queue_permitted).
 * basic.publish is in publish.c. A refusal is 403 ACCESS_REFUSED on the
 * channel, with RabbitMQ's texts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dedup/dedup.h"
#include "conn.h"
#include "chan_internal.h"

#define PRINTABLE(b) (int)(b).len, (const char *)(b).ptr

static const char *vname(chan *ch) { return vhost_name(conn_vhost(ch->c)); }

/* ---- permissions -------------------------------------------------------- */

static int expand_queue_name(chan *ch, amqp_bytes *name, uint32_t method_id, amqp_error *err);

chan_access_cache *chan_access(chan *ch)
{
    access_control *a = ch->access.ctl;
    uint64_t gen = access_generation(a);
    if (ch->access.gen != gen) {
        if (ch->access.memo)
            ch->access.memo->write_ok = ch->access.memo->topic_ok = false;
        ch->access.gen = gen;
        amqp_bytes user = AMQP_CSTR(conn_user(ch->c)), vh = AMQP_CSTR(vname(ch));
        ch->access.perms = access_find_perms(a, user, vh);
        ch->access.topics = access_has_topic_perms(a, user, vh);
    }
    return &ch->access;
}

int chan_permitted(chan *ch, access_kind kind, const char *what, amqp_bytes name,
                   uint32_t method_id, amqp_error *err)
{
    const access_perms *p = chan_access(ch)->perms;
    if (conn_trusted(ch->c) || (p && access_allowed(ch->access.ctl, p, kind, name)))
        return AMQP_OK;
    if (name.len == 0)
        name = AMQP_CSTR("amq.default");
    return amqp_fail(err, AMQP_ACCESS_REFUSED, method_id,
                     "access to %s '%.*s' in vhost '%s' refused for user '%s'", what,
                     PRINTABLE(name), vname(ch), conn_user(ch->c));
}

int chan_topic_permitted(chan *ch, const route_exchange *ex, access_kind kind, amqp_bytes key,
                         uint32_t method_id, amqp_error *err)
{
    if (conn_trusted(ch->c) || !chan_access(ch)->topics || route_exchange_type(ex) != ROUTE_TOPIC)
        return AMQP_OK;
    access_control *a = ch->access.ctl;
    const access_topic_perms *t = access_find_topic_perms(a, AMQP_CSTR(conn_user(ch->c)),
                                                          AMQP_CSTR(vname(ch)),
                                                          route_exchange_name(ex));
    if (!t || access_topic_allowed(a, t, kind, key))
        return AMQP_OK;
    return amqp_fail(err, AMQP_ACCESS_REFUSED, method_id,
                     "access to topic '%.*s' in exchange '%.*s' in vhost '%s' refused for user "
                     "'%s'",
                     PRINTABLE(key), PRINTABLE(route_exchange_name(ex)), vname(ch),
                     conn_user(ch->c));
}

static bool amq_name(amqp_bytes name) { return name.len >= 4 && memcmp(name.ptr, "amq.", 4) == 0; }

/* A new object naming another exchange in its arguments (alternate-exchange,
 * x-dead-letter-exchange): read on the object, write on the other. A value
 * of the wrong type is 406 first, in rabbit_misc:r_arg's words. */
static int referenced_exchange_permitted(chan *ch, const char *what, amqp_bytes name,
                                         amqp_bytes args, const char *key, uint32_t method_id,
                                         amqp_error *err)
{
    amqp_field f;
    if (!amqp_table_get(args, key, &f))
        return AMQP_OK;
    if (f.type != 'S')
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, method_id,
                         "invalid type '%s' for arg '%s' in %s '%.*s' in vhost '%s'",
                         amqp_erl_type_name(f.type), key, what, PRINTABLE(name), vname(ch));
    if (chan_permitted(ch, ACCESS_READ, what, name, method_id, err) != AMQP_OK)
        return AMQP_ERROR;
    return chan_permitted(ch, ACCESS_WRITE, "exchange", f.v.bytes, method_id, err);
}

/* The checks before exchange.declare proper. What route_exchange_declare
 * refuses first (an unknown type, the default exchange, then for a new
 * exchange an amq.* name) is left to it. */
static int exchange_declare_permitted(chan *ch, const amqp_exchange_declare *d, bool existed,
                                      amqp_error *err)
{
    if (d->passive || !route_type_known(d->type) || d->exchange.len == 0)
        return AMQP_OK;
    if (chan_permitted(ch, ACCESS_CONFIGURE, "exchange", d->exchange, AMQP_EXCHANGE_DECLARE,
                       err) != AMQP_OK)
        return AMQP_ERROR;
    if (existed || amq_name(d->exchange))
        return AMQP_OK;
    return referenced_exchange_permitted(ch, "exchange", d->exchange, d->arguments,
                                         "alternate-exchange", AMQP_EXCHANGE_DECLARE, err);
}

/* write on the destination; then 403 if the default exchange is at either
 * end (before anything is looked up); read on the source and topic read on
 * the key. */
static int binding_permitted(chan *ch, uint32_t method_id, const char *dest_kind,
                             amqp_bytes dest, amqp_bytes source, amqp_bytes key,
                             amqp_error *err)
{
    if (chan_permitted(ch, ACCESS_WRITE, dest_kind, dest, method_id, err) != AMQP_OK)
        return AMQP_ERROR;
    if (source.len == 0 || (dest.len == 0 && strcmp(dest_kind, "exchange") == 0))
        return amqp_fail(err, AMQP_ACCESS_REFUSED, method_id,
                         "operation not permitted on the default exchange");
    if (chan_permitted(ch, ACCESS_READ, "exchange", source, method_id, err) != AMQP_OK)
        return AMQP_ERROR;
    if (!chan_access(ch)->topics)
        return AMQP_OK; /* no topic permission to check: no need to look the source up */
    route_exchange *src = route_exchange_find(vhost_routes(conn_vhost(ch->c)), source);
    return src ? chan_topic_permitted(ch, src, ACCESS_READ, key, method_id, err) : AMQP_OK;
}

/* The "" shortcut, then `kind` on the queue. */
int chan_queue_permitted(chan *ch, amqp_bytes *name, access_kind kind, uint32_t method_id,
                         amqp_error *err)
{
    if (expand_queue_name(ch, name, method_id, err) != AMQP_OK)
        return AMQP_ERROR;
    return chan_permitted(ch, kind, "queue", *name, method_id, err);
}

static void reply(chan *ch, uint32_t id)
{
    amqp_method ok = {.id = id};
    conn_send_method(ch->c, ch->number, &ok);
}

/* "" means the channel's most recently declared queue. */
static int expand_queue_name(chan *ch, amqp_bytes *name, uint32_t method_id, amqp_error *err)
{
    if (name->len)
        return AMQP_OK;
    if (!ch->last_queue)
        return amqp_fail(err, AMQP_NOT_FOUND, method_id, "no previously declared queue");
    *name = AMQP_CSTR(ch->last_queue);
    return AMQP_OK;
}

static int locked(chan *ch, amqp_bytes name, uint32_t method_id, amqp_error *err)
{
    return amqp_fail(err, AMQP_RESOURCE_LOCKED, method_id,
                     "cannot obtain exclusive access to locked queue '%.*s' in vhost '%s'. It "
                     "could be originally declared on another connection or the exclusive "
                     "property value does not match that of the original declaration.",
                     PRINTABLE(name), vname(ch));
}

/* 405 when another connection owns the (exclusive) queue. */
static int check_exclusive(chan *ch, queue *q, uint32_t method_id, amqp_error *err)
{
    conn *owner = queue_owner(q);
    if (owner && owner != ch->c)
        return locked(ch, queue_name(q), method_id, err);
    return AMQP_OK;
}

/* Looks a queue up by (expanded) name: 404 when missing, 405 when locked. */
queue *chan_find_queue(chan *ch, amqp_bytes *name, uint32_t method_id, amqp_error *err)
{
    if (expand_queue_name(ch, name, method_id, err) != AMQP_OK)
        return NULL;
    queue *q = vhost_queue_find(conn_vhost(ch->c), *name);
    if (!q) {
        amqp_fail(err, AMQP_NOT_FOUND, method_id, "no queue '%.*s' in vhost '%s'",
                  PRINTABLE(*name), vname(ch));
        return NULL;
    }
    return check_exclusive(ch, q, method_id, err) == AMQP_OK ? q : NULL;
}

/* ---- exchanges ---------------------------------------------------------- */

int admin_exchange_declare(vhost *v, const route_exchange_spec *spec, amqp_error *err)
{
    route_table *routes = vhost_routes(v);
    bool existed = route_exchange_find(routes, spec->name) != NULL;
    route_exchange *ex;
    dedup_config dedup;
    bool typed = amqp_bytes_equal_cstr(spec->type, "x-message-deduplication");
    if (!existed && !spec->passive &&
        (typed ? dedup_config_parse_typed(spec->arguments, AMQP_EXCHANGE_DECLARE, &dedup, err)
               : dedup_config_parse(spec->arguments, false, AMQP_EXCHANGE_DECLARE, &dedup,
                                    err)) != AMQP_OK)
        return AMQP_ERROR;
    if (route_exchange_declare(routes, spec, &ex, err) != AMQP_OK)
        return AMQP_ERROR;
    if (!existed)
        durable_exchange_declared(v, ex);
    return AMQP_OK;
}

int admin_exchange_delete(vhost *v, amqp_bytes name, bool if_unused, amqp_error *err)
{
    return route_exchange_delete(vhost_routes(v), name, if_unused, err);
}

static int exchange_declare(chan *ch, const amqp_exchange_declare *d, amqp_error *err)
{
    route_exchange_spec spec = {
        .name = d->exchange,
        .type = d->type,
        .passive = d->passive,
        .durable = d->durable,
        .auto_delete = d->auto_delete,
        .internal = d->internal,
        .arguments = d->arguments,
    };
    route_table *routes = vhost_routes(conn_vhost(ch->c));
    bool existed = route_exchange_find(routes, d->exchange) != NULL;
    if (exchange_declare_permitted(ch, d, existed, err) != AMQP_OK ||
        admin_exchange_declare(conn_vhost(ch->c), &spec, err) != AMQP_OK)
        return AMQP_ERROR;
    if (!d->nowait)
        reply(ch, AMQP_EXCHANGE_DECLARE_OK);
    return AMQP_OK;
}

static int exchange_delete(chan *ch, const amqp_exchange_delete *d, amqp_error *err)
{
    /* route_exchange_delete refuses "" and amq.* before anything else */
    if (d->exchange.len && !amq_name(d->exchange) &&
        chan_permitted(ch, ACCESS_CONFIGURE, "exchange", d->exchange, AMQP_EXCHANGE_DELETE,
                       err) != AMQP_OK)
        return AMQP_ERROR;
    if (route_exchange_delete(vhost_routes(conn_vhost(ch->c)), d->exchange, d->if_unused, err) !=
        AMQP_OK)
        return AMQP_ERROR;
    if (!d->nowait)
        reply(ch, AMQP_EXCHANGE_DELETE_OK);
    return AMQP_OK;
}

/* Binds or unbinds, and records it when durable. */
static int bind_to(vhost *v, amqp_bytes source, route_dest d, amqp_bytes key, amqp_bytes args,
                   bool bind, uint32_t method_id, amqp_error *err)
{
    route_table *routes = vhost_routes(v);
    int r = bind ? route_bind(routes, source, d, key, args, method_id, err)
                 : route_unbind(routes, source, d, key, args, method_id, err);
    if (r != AMQP_OK)
        return AMQP_ERROR;
    route_exchange *src = route_exchange_find(routes, source);
    if (src)
        durable_binding(v, src, d, key, args, bind);
    return AMQP_OK;
}

/* exchange.bind and exchange.unbind share their arguments' layout. */
static int exchange_binding(chan *ch, const amqp_method *m, amqp_error *err)
{
    bool bind = m->id == AMQP_EXCHANGE_BIND;
    const amqp_exchange_bind *b = &m->exchange_bind;
    const amqp_exchange_unbind *u = &m->exchange_unbind;
    amqp_bytes dest_name = bind ? b->destination : u->destination;
    route_table *routes = vhost_routes(conn_vhost(ch->c));
    if (binding_permitted(ch, m->id, "exchange", dest_name, bind ? b->source : u->source,
                          bind ? b->routing_key : u->routing_key, err) != AMQP_OK)
        return AMQP_ERROR;
    route_exchange *dest = route_exchange_lookup(routes, dest_name, m->id, err);
    if (!dest)
        return AMQP_ERROR;
    route_dest d = {.exchange = dest};
    if (bind_to(conn_vhost(ch->c), bind ? b->source : u->source, d,
                bind ? b->routing_key : u->routing_key, bind ? b->arguments : u->arguments, bind,
                m->id, err) != AMQP_OK)
        return AMQP_ERROR;
    if (!(bind ? b->nowait : u->nowait))
        reply(ch, bind ? AMQP_EXCHANGE_BIND_OK : AMQP_EXCHANGE_UNBIND_OK);
    return AMQP_OK;
}

/* ---- queues ------------------------------------------------------------- */

static int check_equivalent(queue *q, const queue_spec *d, amqp_error *err)
{
    const char *flag = NULL, *vhost_text = vhost_name(queue_vhost(q));
    bool received = false;
    if (queue_durable(q) != d->durable)
        flag = "durable", received = d->durable;
    else if (queue_auto_delete(q) != d->auto_delete)
        flag = "auto_delete", received = d->auto_delete;
    if (flag)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_QUEUE_DECLARE,
                         "inequivalent arg '%s' for queue '%.*s' in vhost '%s': received '%s' "
                         "but current is '%s'",
                         flag, PRINTABLE(queue_name(q)), vhost_text, received ? "true" : "false",
                         received ? "false" : "true");
    return queue_args_equivalent(queue_arguments(q), d->arguments, queue_name(q), vhost_text, err);
}

/* Remembers the queue for "" in later methods (as a C string: up to a NUL). */
static void remember_queue(chan *ch, amqp_bytes name)
{
    size_t len = strnlen((const char *)name.ptr, name.len);
    char *copy = realloc(ch->last_queue, len + 1);
    if (!copy) { /* "" then names no queue rather than an older one */
        free(ch->last_queue);
        ch->last_queue = NULL;
        return;
    }
    memcpy(copy, name.ptr, len);
    copy[len] = 0;
    ch->last_queue = copy;
}

static void declare_ok(chan *ch, queue *q, bool nowait)
{
    remember_queue(ch, queue_name(q));
    if (nowait)
        return;
    amqp_method ok = {.id = AMQP_QUEUE_DECLARE_OK};
    ok.queue_declare_ok.queue = queue_name(q);
    ok.queue_declare_ok.message_count = queue_ready_count(q);
    ok.queue_declare_ok.consumer_count = queue_consumer_count(q);
    conn_send_method(ch->c, ch->number, &ok);
}

static int queue_declare(chan *ch, const amqp_queue_declare *d, amqp_error *err)
{
    vhost *v = conn_vhost(ch->c);
    char generated[64];
    amqp_bytes name = d->queue;
    if (chan_is_reply_queue(name)) { /* the pseudo-queue always "exists" */
        amqp_method ok = {.id = AMQP_QUEUE_DECLARE_OK};
        ok.queue_declare_ok.queue = name;
        ok.queue_declare_ok.consumer_count = 1; /* as RabbitMQ reports it */
        if (!d->nowait)
            conn_send_method(ch->c, ch->number, &ok);
        return AMQP_OK;
    }
    if (d->passive) {
        /* no "" shortcut here: RabbitMQ looks for a queue named '' */
        queue *q = vhost_queue_find(v, name);
        if (!q)
            return amqp_fail(err, AMQP_NOT_FOUND, AMQP_QUEUE_DECLARE,
                             "no queue '%.*s' in vhost '%s'", PRINTABLE(name), vname(ch));
        if (check_exclusive(ch, q, AMQP_QUEUE_DECLARE, err) != AMQP_OK)
            return AMQP_ERROR;
        queue_touch(q);
        declare_ok(ch, q, d->nowait);
        return AMQP_OK;
    }
    if (name.len == 0 && !queue_type_of_args(d->arguments)->server_named) {
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_QUEUE_DECLARE,
                         "Cannot declare a server-named queue for type %s",
                         queue_type_of_args(d->arguments)->module);
    } else if (name.len == 0) {
        server_random_name(conn_server(ch->c), "amq.gen-", generated, sizeof generated);
        name = AMQP_CSTR(generated);
    } else if (name.len >= 4 && memcmp(name.ptr, "amq.", 4) == 0) {
        return amqp_fail(err, AMQP_ACCESS_REFUSED, AMQP_QUEUE_DECLARE,
                         "queue name '%.*s' contains reserved prefix 'amq.*'", PRINTABLE(name));
    }
    if (chan_permitted(ch, ACCESS_CONFIGURE, "queue", name, AMQP_QUEUE_DECLARE, err) != AMQP_OK)
        return AMQP_ERROR;
    queue_spec spec = {.name = name,
                       .durable = d->durable,
                       .exclusive = d->exclusive,
                       .auto_delete = d->auto_delete,
                       .arguments = d->arguments,
                       .owner = ch->c};
    queue *q = vhost_queue_find(v, name);
    if (q && queue_owner(q) != (d->exclusive ? ch->c : NULL))
        return locked(ch, name, AMQP_QUEUE_DECLARE, err);
    if (!q && referenced_exchange_permitted(ch, "queue", name, d->arguments,
                                            "x-dead-letter-exchange", AMQP_QUEUE_DECLARE,
                                            err) != AMQP_OK)
        return AMQP_ERROR;
    if (admin_queue_declare(v, &spec, &q, err) != AMQP_OK)
        return AMQP_ERROR;
    declare_ok(ch, q, d->nowait);
    return AMQP_OK;
}

/* Declares a queue, or checks an existing one is equivalent (the caller
 * checked its exclusive owner). The amq. prefix is the caller's check. */
int admin_queue_declare(vhost *v, const queue_spec *spec, queue **out, amqp_error *err)
{
    server_counts *counts = loop_counters(vhost_loop(v));
    counts->queues_declared++;
    queue *q = vhost_queue_find(v, spec->name);
    if (q) {
        if (check_equivalent(q, spec, err) != AMQP_OK)
            return AMQP_ERROR;
        queue_touch(q);
        *out = q;
        return AMQP_OK;
    }
    queue_args args;
    if (queue_args_parse(spec->arguments, spec->name, vhost_name(v), &args, err) != AMQP_OK ||
        queue_type_of_args(spec->arguments)->check_declare(spec, vhost_name(v), err) != AMQP_OK)
        return AMQP_ERROR;
    if (vhost_queue_limit_reached(v)) { /* after the arguments, as RabbitMQ checks */
        long long max = (long long)vhost_max_queues(v);
        loop_refused(vhost_loop(v), REFUSED_QUEUE_VHOST_LIMIT, "queue '%.*s' not declared: vhost "
                     "'%s' queue limit (%lld) reached", PRINTABLE(spec->name), vhost_name(v), max);
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_QUEUE_DECLARE,
                         "cannot declare queue '%.*s': queue limit in vhost '%s' (%lld) is reached",
                         PRINTABLE(spec->name), vhost_name(v), max);
    }
    q = queue_new(v, spec);
    if (!q)
        return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_QUEUE_DECLARE, "out of memory");
    vhost_queue_add(v, q);
    durable_queue_declared(v, q);
    counts->queues_created++;
    *out = q;
    return AMQP_OK;
}

/* queue.bind and queue.unbind; "" for both queue and key means the last
 * declared queue's name for both. RabbitMQ's order of checks: the default
 * exchange (403), the source exchange (404), then the queue (404) -- but
 * unbinding anything missing succeeds. */
static int queue_binding(chan *ch, const amqp_method *m, amqp_error *err)
{
    bool bind = m->id == AMQP_QUEUE_BIND;
    amqp_bytes qname = bind ? m->queue_bind.queue : m->queue_unbind.queue;
    amqp_bytes key = bind ? m->queue_bind.routing_key : m->queue_unbind.routing_key;
    amqp_bytes exchange = bind ? m->queue_bind.exchange : m->queue_unbind.exchange;
    amqp_bytes args = bind ? m->queue_bind.arguments : m->queue_unbind.arguments;
    route_table *routes = vhost_routes(conn_vhost(ch->c));
    bool shortcut_key = qname.len == 0 && key.len == 0;
    if (expand_queue_name(ch, &qname, m->id, err) != AMQP_OK)
        return AMQP_ERROR;
    if (shortcut_key)
        key = qname;
    if (binding_permitted(ch, m->id, "queue", qname, exchange, key, err) != AMQP_OK)
        return AMQP_ERROR;
    if (exchange.len == 0)
        return amqp_fail(err, AMQP_ACCESS_REFUSED, m->id,
                         "operation not permitted on the default exchange");
    queue *q = vhost_queue_find(conn_vhost(ch->c), qname);
    if (bind && !route_exchange_lookup(routes, exchange, m->id, err))
        return AMQP_ERROR;
    if (!q) {
        if (bind)
            return amqp_fail(err, AMQP_NOT_FOUND, m->id, "no queue '%.*s' in vhost '%s'",
                             PRINTABLE(qname), vname(ch));
    } else {
        if (check_exclusive(ch, q, m->id, err) != AMQP_OK)
            return AMQP_ERROR;
        route_dest d = {.queue = q};
        if (bind_to(conn_vhost(ch->c), exchange, d, key, args, bind, m->id, err) != AMQP_OK)
            return AMQP_ERROR;
    }
    if (!bind || !m->queue_bind.nowait)
        reply(ch, bind ? AMQP_QUEUE_BIND_OK : AMQP_QUEUE_UNBIND_OK);
    return AMQP_OK;
}

static int queue_purge_method(chan *ch, const amqp_queue_purge *p, amqp_error *err)
{
    amqp_bytes name = p->queue;
    if (chan_queue_permitted(ch, &name, ACCESS_READ, AMQP_QUEUE_PURGE, err) != AMQP_OK)
        return AMQP_ERROR;
    queue *q = chan_find_queue(ch, &name, AMQP_QUEUE_PURGE, err);
    if (!q)
        return AMQP_ERROR;
    if (queue_type_of(q)->reads_without_taking)
        return chan_not_supported(q, "queue.purge", AMQP_QUEUE_PURGE, err);
    uint32_t n = queue_purge(q);
    if (!p->nowait) {
        amqp_method ok = {.id = AMQP_QUEUE_PURGE_OK};
        ok.queue_purge_ok.message_count = n;
        conn_send_method(ch->c, ch->number, &ok);
    }
    return AMQP_OK;
}

/* queue.delete's conditions, then the deletion. */
static int delete_checked(queue *q, bool if_unused, bool if_empty, amqp_error *err)
{
    amqp_bytes name = queue_name(q);
    const char *vhost_text = vhost_name(queue_vhost(q));
    if (if_unused && queue_consumer_count(q))
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_QUEUE_DELETE,
                         "queue '%.*s' in vhost '%s' in use", PRINTABLE(name), vhost_text);
    if (if_empty && queue_ready_count(q))
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_QUEUE_DELETE,
                         "queue '%.*s' in vhost '%s' not empty", PRINTABLE(name), vhost_text);
    queue_delete(q);
    return AMQP_OK;
}

static int queue_delete_method(chan *ch, const amqp_queue_delete *d, amqp_error *err)
{
    amqp_bytes name = d->queue;
    if (chan_queue_permitted(ch, &name, ACCESS_CONFIGURE, AMQP_QUEUE_DELETE, err) != AMQP_OK)
        return AMQP_ERROR;
    queue *q = vhost_queue_find(conn_vhost(ch->c), name);
    uint32_t n = 0;
    if (q) {
        if (check_exclusive(ch, q, AMQP_QUEUE_DELETE, err) != AMQP_OK)
            return AMQP_ERROR;
        n = queue_ready_count(q);
        if (delete_checked(q, d->if_unused, d->if_empty, err) != AMQP_OK)
            return AMQP_ERROR;
    }
    if (!d->nowait) {
        amqp_method ok = {.id = AMQP_QUEUE_DELETE_OK};
        ok.queue_delete_ok.message_count = n;
        conn_send_method(ch->c, ch->number, &ok);
    }
    return AMQP_OK;
}

int chan_handle_declaration(chan *ch, const amqp_method *m, amqp_error *err)
{
    switch (m->id) {
    case AMQP_EXCHANGE_DECLARE:
        return exchange_declare(ch, &m->exchange_declare, err);
    case AMQP_EXCHANGE_DELETE:
        return exchange_delete(ch, &m->exchange_delete, err);
    case AMQP_EXCHANGE_BIND:
    case AMQP_EXCHANGE_UNBIND:
        return exchange_binding(ch, m, err);
    case AMQP_QUEUE_DECLARE:
        return queue_declare(ch, &m->queue_declare, err);
    case AMQP_QUEUE_BIND:
    case AMQP_QUEUE_UNBIND:
        return queue_binding(ch, m, err);
    case AMQP_QUEUE_PURGE:
        return queue_purge_method(ch, &m->queue_purge, err);
    case AMQP_QUEUE_DELETE:
        return queue_delete_method(ch, &m->queue_delete, err);
    case AMQP_ACCESS_REQUEST: {
        amqp_method ok = {.id = AMQP_ACCESS_REQUEST_OK};
        ok.access_request_ok.ticket = 1;
        conn_send_method(ch->c, ch->number, &ok);
        return AMQP_OK;
    }
    default:
        return amqp_fail(err, AMQP_COMMAND_INVALID, m->id, "unimplemented method");
    }
}

/* ---- the management API's operations ----------------------------------- */

static queue *admin_find(vhost *v, amqp_bytes name, uint32_t method_id, amqp_error *err)
{
    queue *q = vhost_queue_find(v, name);
    if (!q)
        amqp_fail(err, AMQP_NOT_FOUND, method_id, "no queue '%.*s' in vhost '%s'",
                  PRINTABLE(name), vhost_name(v));
    return q;
}

int admin_queue_delete(vhost *v, amqp_bytes name, bool if_unused, bool if_empty, amqp_error *err)
{
    queue *q = admin_find(v, name, AMQP_QUEUE_DELETE, err);
    return q ? delete_checked(q, if_unused, if_empty, err) : AMQP_ERROR;
}

int admin_queue_purge(vhost *v, amqp_bytes name, amqp_error *err)
{
    queue *q = admin_find(v, name, AMQP_QUEUE_PURGE, err);
    if (!q)
        return AMQP_ERROR;
    if (queue_type_of(q)->reads_without_taking) /* the management API's as AMQP's */
        return chan_not_supported(q, "queue.purge", AMQP_QUEUE_PURGE, err);
    queue_purge(q);
    return AMQP_OK;
}

int admin_bind(vhost *v, amqp_bytes source, bool dest_is_queue, amqp_bytes dest, amqp_bytes key,
               amqp_bytes args, bool bind, amqp_error *err)
{
    uint32_t id = dest_is_queue ? (bind ? AMQP_QUEUE_BIND : AMQP_QUEUE_UNBIND)
                                : (bind ? AMQP_EXCHANGE_BIND : AMQP_EXCHANGE_UNBIND);
    route_dest d = {0};
    if (bind && !route_exchange_lookup(vhost_routes(v), source, id, err))
        return AMQP_ERROR;
    if (dest_is_queue)
        d.queue = admin_find(v, dest, id, err);
    else
        d.exchange = route_exchange_lookup(vhost_routes(v), dest, id, err);
    if (!d.queue && !d.exchange)
        return AMQP_ERROR;
    return bind_to(v, source, d, key, args, bind, id, err);
}

/* Shows a message as basic.get would deliver it: with x-delivery-count
 * when it was returned before (or from a quorum queue) and the queue shows
 * the count. */
static void show(admin_get_fn fn, void *arg, queue *q, const queue_item *it)
{
    bool redelivered = it->delivery_count > 0 || it->maybe_delivered;
    uint8_t local[1024], *heap = NULL;
    size_t n = (it->delivery_count || queue_type_of(q)->get_counts_first) &&
                       queue_shows_delivery_count(q)
                   ? msg_delivery_count_properties(it->m, it->delivery_count, local, sizeof local,
                                                   &heap)
                   : 0;
    msg *copy = n ? msg_copy_with(loop_msgs(vhost_loop(queue_vhost(q))), it->m, msg_exchange(it->m), msg_routing_key(it->m),
                                  (amqp_bytes){heap ? heap : local, (uint32_t)n})
                  : NULL;
    free(heap);
    fn(arg, copy ? copy : it->m, redelivered, queue_ready_count(q));
    if (copy)
        msg_unref(copy);
}

/* Takes up to `count` messages, shows each, then settles them all: a
 * requeue puts them back newest first, so they keep their order. */
int admin_get(vhost *v, amqp_bytes name, uint32_t count, admin_ackmode mode, admin_get_fn fn,
              void *arg, amqp_error *err)
{
    queue *q = admin_find(v, name, AMQP_BASIC_GET, err);
    if (!q)
        return -1;
    if (queue_type_of(q)->reads_without_taking)
        return chan_not_supported(q, "basic.get", AMQP_BASIC_GET, err), -1;
    queue_item *taken = calloc(count ? count : 1, sizeof *taken);
    if (!taken)
        return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_GET, "out of memory"), -1;
    uint64_t *n_q = queue_stats(q)->n, *n_v = vhost_stats(v)->n;
    uint32_t n = 0;
    while (n < count && queue_get(q, &taken[n])) { /* counted as RabbitMQ's basic.get */
        queue_item *it = &taken[n++];
        n_q[STAT_GET]++, n_v[STAT_GET]++;
        if (it->delivery_count > 0 || it->maybe_delivered)
            n_q[STAT_REDELIVER]++, n_v[STAT_REDELIVER]++;
        show(fn, arg, q, it);
        it->delivery_count++;
    }
    if (n == 0)
        n_q[STAT_GET_EMPTY]++, n_v[STAT_GET_EMPTY]++;
    for (uint32_t i = n; i-- > 0;) {
        queue_item it = taken[i];
        if (mode == ADMIN_ACK)
            n_q[STAT_ACK]++, n_v[STAT_ACK]++;
        if (mode == ADMIN_REQUEUE) {
            persist_delivered(q, it.m, it.delivery_count);
            queue_requeue(q, it, QUEUE_RETURN_PLAIN);
            msg_unref(it.m);
        } else if (mode == ADMIN_REJECT) {
            queue_dead_letter(q, it, "rejected");
        } else {
            persist_settle(q, it.m, JOURNAL_ACK);
            msg_unref(it.m);
        }
    }
    free(taken);
    queue_dispatch(q);
    return (int)n;
}
