/* What a link makes on its upstream once connected, as rabbitmq_federation
 * 3.10 makes it, and what it keeps in step afterwards.
 *
 * Both kinds first ask on channel 2 whether the upstream exchange or queue
 * exists (a passive declare, whose 404 closes only that channel); when it
 * does not, channel 1 declares it as the local one is. Then:
 * - queue link: basic.qos prefetch-count (not with no-ack); it consumes
 *   only while fed_queue_demand says the local consumers want more, with
 *   x-priority -1 so that consumers on the upstream go first;
 * - exchange link: the queue "federation: X -> CLUSTER" (durable,
 *   x-expires / x-message-ttl from the upstream, x-internal-purpose), qos,
 *   a new internal fanout exchange "<queue> A" or "B" (the other of the
 *   two, so the old one keeps the flow until the new one is bound, then
 *   goes) bound to the queue and from the upstream exchange with each
 *   local binding's key and arguments plus x-bound-from, and the consumer.
 * The setup's calls are counted (`calls`); the link runs when each got its
 * reply. Bindings: once a second the local exchange's bindings are
 * compared with those made upstream (a list of key and arguments, one
 * entry per distinct pair, as RabbitMQ binds a pair once) and the
 * difference bound or unbound.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fed_int.h"

/* Sends `m` on channel 1; while starting, its reply is one the setup waits for. */
static void call(fed_link *k, amqp_method *m)
{
    if (!client_call(k->c, 1, m))
        return;
    if (k->status == FED_STARTING)
        k->calls++;
}

void fed_setup_start(fed_link *k)
{
    amqp_method m = {0};
    fed_bindings_free(k); /* a new connection binds a new exchange */
    if (k->queue) {
        m.id = AMQP_QUEUE_DECLARE;
        m.queue_declare = (amqp_queue_declare){.queue = AMQP_CSTR(k->up.queue), .passive = true};
    } else {
        m.id = AMQP_EXCHANGE_DECLARE;
        m.exchange_declare =
            (amqp_exchange_declare){.exchange = AMQP_CSTR(k->up.exchange), .passive = true};
    }
    client_call(k->c, 2, &m);
}

/* Declares the upstream queue (or exchange) as the local one is. */
static void declare_like_local(fed_link *k)
{
    vhost *v = fed_link_vhost(k);
    amqp_method m = {0};
    if (k->queue) {
        queue *q = v ? vhost_queue_find(v, AMQP_CSTR(k->object)) : NULL;
        m.id = AMQP_QUEUE_DECLARE;
        m.queue_declare = (amqp_queue_declare){
            .queue = AMQP_CSTR(k->up.queue), .durable = !q || queue_durable(q),
            .auto_delete = q && queue_auto_delete(q), .arguments = q ? queue_arguments(q) : (amqp_bytes){0}};
    } else {
        route_exchange *ex = v ? route_exchange_find(vhost_routes(v), AMQP_CSTR(k->object)) : NULL;
        if (!ex)
            return;
        m.id = AMQP_EXCHANGE_DECLARE;
        m.exchange_declare = (amqp_exchange_declare){
            .exchange = AMQP_CSTR(k->up.exchange),
            .type = AMQP_CSTR(route_type_name(route_exchange_type(ex))),
            .durable = route_exchange_durable(ex), .auto_delete = route_exchange_auto_delete(ex),
            .internal = route_exchange_internal(ex), .arguments = route_exchange_arguments(ex)};
    }
    call(k, &m);
}

static void qos(fed_link *k)
{
    if (k->up.ack_mode == FED_NO_ACK)
        return;
    amqp_method m = {.id = AMQP_BASIC_QOS};
    m.basic_qos.prefetch_count = (uint16_t)k->up.prefetch_count;
    call(k, &m);
}

static void exchange_op(fed_link *k, uint32_t id, const char *name)
{
    amqp_method m = {.id = id};
    uint8_t args[64]; /* client_call encodes it: alive until then */
    if (id == AMQP_EXCHANGE_DELETE) {
        m.exchange_delete = (amqp_exchange_delete){.exchange = AMQP_CSTR(name)};
    } else {
        amqp_writer w;
        amqp_writer_init(&w, args, sizeof args);
        amqp_put_field_str(&w, "x-internal-purpose", AMQP_CSTR("federation"));
        m.exchange_declare = (amqp_exchange_declare){
            .exchange = AMQP_CSTR(name), .type = AMQP_CSTR("fanout"), .durable = true,
            .auto_delete = true, .internal = true, .arguments = {args, (uint32_t)w.len}};
    }
    call(k, &m);
}

/* The exchange link's queue, exchange and consumer upstream. */
static void exchange_setup(fed_link *k)
{
    char old_x[sizeof k->internal_x];
    uint8_t args[128];
    amqp_writer w;
    amqp_method m = {.id = AMQP_QUEUE_DECLARE};
    fed_queue_name(k->upstream_queue, sizeof k->upstream_queue, k->up.exchange, k->upstream_vhost,
                   k->f->cluster, k->vhost, k->object);
    amqp_writer_init(&w, args, sizeof args);
    if (k->up.expires >= 0)
        amqp_put_field_long(&w, "x-expires", k->up.expires);
    if (k->up.message_ttl >= 0)
        amqp_put_field_long(&w, "x-message-ttl", k->up.message_ttl);
    amqp_put_field_str(&w, "x-internal-purpose", AMQP_CSTR("federation"));
    m.queue_declare = (amqp_queue_declare){.queue = AMQP_CSTR(k->upstream_queue),
                                             .durable = true, .arguments = {args, (uint32_t)w.len}};
    call(k, &m);
    qos(k);
    fed_exchange_name(old_x, sizeof old_x, k->upstream_queue, k->suffix);
    k->suffix = k->suffix == 'A' ? 'B' : 'A';
    fed_exchange_name(k->internal_x, sizeof k->internal_x, k->upstream_queue, k->suffix);
    exchange_op(k, AMQP_EXCHANGE_DELETE, k->internal_x);
    exchange_op(k, AMQP_EXCHANGE_DECLARE, k->internal_x);
    m = (amqp_method){.id = AMQP_QUEUE_BIND};
    m.queue_bind = (amqp_queue_bind){.queue = AMQP_CSTR(k->upstream_queue),
                                       .exchange = AMQP_CSTR(k->internal_x)};
    call(k, &m);
    fed_bindings_sync(k);
    exchange_op(k, AMQP_EXCHANGE_DELETE, old_x);
    m = (amqp_method){.id = AMQP_BASIC_CONSUME};
    m.basic_consume = (amqp_basic_consume){.queue = AMQP_CSTR(k->upstream_queue),
                                             .no_ack = k->up.ack_mode == FED_NO_ACK};
    call(k, &m);
}

void fed_setup_checked(fed_link *k, bool found)
{
    if (!found)
        declare_like_local(k);
    if (k->queue)
        qos(k);
    else
        exchange_setup(k);
    if (k->calls == 0)
        fed_link_set_status(k, FED_RUNNING, NULL);
}

/* ---- queue links: consuming while the local consumers want more ------------------------ */

/* rabbit_federation_queue's consumer_state_changed: the local queue is
 * empty and one of its consumers (of priority 0 or more) can take more. */
static bool local_demand(queue *q)
{
    if (queue_ready_count(q) > 0)
        return false;
    for (consumer *c = queue_next_consumer(q, NULL); c; c = queue_next_consumer(q, c))
        if (c->priority >= 0 && c->ops->can_take(c))
            return true;
    return false;
}

bool fed_queue_demand(fed_link *k)
{
    vhost *v = fed_link_vhost(k);
    queue *q = v ? vhost_queue_find(v, AMQP_CSTR(k->object)) : NULL;
    bool want = q && local_demand(q);
    amqp_method m = {0};
    uint8_t args[32]; /* client_call encodes it: alive until then */
    bool waiting = !want && q && queue_consumer_count(q) > 0;
    if (want == k->consuming)
        return waiting;
    if (want) {
        amqp_writer w;
        amqp_writer_init(&w, args, sizeof args);
        amqp_put_field_long(&w, "x-priority", -1);
        m.id = AMQP_BASIC_CONSUME;
        m.basic_consume = (amqp_basic_consume){
            .queue = AMQP_CSTR(k->up.queue), .consumer_tag = AMQP_CSTR(k->up.consumer_tag),
            .no_ack = k->up.ack_mode == FED_NO_ACK, .arguments = {args, (uint32_t)w.len}};
    } else {
        m.id = AMQP_BASIC_CANCEL;
        m.basic_cancel = (amqp_basic_cancel){.consumer_tag = AMQP_CSTR(k->up.consumer_tag)};
    }
    if (client_call(k->c, 1, &m))
        k->consuming = want;
    return waiting;
}

/* ---- exchange links: bindings ------------------------------------------------------------ */

typedef struct sync_ctx {
    fed_link *k;
    const route_exchange *ex;
    fed_bind_from from;
    uint8_t *buf;
    size_t cap;
} sync_ctx;

static void bind_op(fed_link *k, fed_bound *b, bool bind)
{
    amqp_method m = {.id = bind ? AMQP_EXCHANGE_BIND : AMQP_EXCHANGE_UNBIND};
    m.exchange_bind = (amqp_exchange_bind){.destination = AMQP_CSTR(k->internal_x),
                                             .source = AMQP_CSTR(k->up.exchange),
                                             .routing_key = b->key, .arguments = b->args};
    call(k, &m);
}

static void want_binding(void *arg, const route_binding_view *b)
{
    sync_ctx *s = arg;
    amqp_writer w;
    if (b->source != s->ex)
        return;
    amqp_writer_init(&w, s->buf, s->cap);
    if (!fed_binding_args(&w, b->args, &s->from) || w.overflow)
        return;
    for (fed_bound *have = s->k->bound; have; have = have->next)
        if (amqp_bytes_equal(have->key, b->key) &&
            amqp_bytes_equal(have->args, (amqp_bytes){s->buf, (uint32_t)w.len})) {
            have->wanted = true;
            return;
        }
    fed_bound *n = malloc(sizeof *n + b->key.len + w.len);
    if (!n)
        return;
    memcpy(n->data, b->key.ptr, b->key.len);
    memcpy(n->data + b->key.len, s->buf, w.len);
    n->key = (amqp_bytes){n->data, b->key.len};
    n->args = (amqp_bytes){n->data + b->key.len, (uint32_t)w.len};
    n->wanted = true;
    n->next = s->k->bound;
    s->k->bound = n;
    bind_op(s->k, n, true);
}

void fed_bindings_sync(fed_link *k)
{
    vhost *v = fed_link_vhost(k);
    route_exchange *ex = v ? route_exchange_find(vhost_routes(v), AMQP_CSTR(k->object)) : NULL;
    if (!ex)
        return;
    sync_ctx s = {.k = k, .ex = ex, .cap = 65536};
    s.from = (fed_bind_from){.max_hops = k->up.max_hops, .upstream_vhost = k->upstream_vhost,
                             .cluster = k->f->cluster, .vhost = k->vhost,
                             .exchange = k->object, .suffix = k->suffix};
    if (!(s.buf = malloc(s.cap)))
        return;
    for (fed_bound *b = k->bound; b; b = b->next)
        b->wanted = false;
    route_foreach_binding(vhost_routes(v), want_binding, &s);
    free(s.buf);
    for (fed_bound **pp = &k->bound; *pp;) {
        fed_bound *b = *pp;
        if (b->wanted) {
            pp = &b->next;
            continue;
        }
        bind_op(k, b, false);
        *pp = b->next;
        free(b);
    }
}

void fed_bindings_free(fed_link *k)
{
    while (k->bound) {
        fed_bound *b = k->bound;
        k->bound = b->next;
        free(b);
    }
}
