/* One federation link: its connection to the upstream and what arrives on
 * it.
 *
 * States (the status RabbitMQ shows): starting (connecting, declaring:
 * `calls` replies still due) -> running -> error (the connection or a
 * channel ended: the reason is kept, the connection freed, and after
 * reconnect-delay the link starts again). Channel 1 carries the setup,
 * the consumer and acks; channel 2 only the passive check of the upstream
 * object, whose 404 closes it (link_setup.c).
 *
 * What arrives is deliver.c's. A link no longer wanted retires: it sends
 * new deliveries back, acks what it published once the journal has it,
 * deletes what it made upstream (exchange links) and closes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <event2/event.h>

#include "fed_int.h"

/* An upstream in this broker is reached through an in-memory pipe,
 * bounded as a socket's buffers are. */
#define LOCAL_PIPE_BYTES (4u << 20)

static uint64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

void fed_link_set_status(fed_link *k, fed_status st, const char *error)
{
    if (st == FED_ERROR && k->status != FED_ERROR)
        log_msg(LOG_WARNING, "federation link for %s '%s' in vhost '%s' (upstream '%s'): %s",
                k->queue ? "queue" : "exchange", k->object, k->vhost, k->up.name, error);
    k->status = st;
    snprintf(k->error, sizeof k->error, "%s", error ? error : "");
    k->changed_at = wall_ms();
}

vhost *fed_link_vhost(fed_link *k) { return server_vhost(k->f->s, AMQP_CSTR(k->vhost)); }

/* ---- the connection ----------------------------------------------------------- */

/* Ends the connection after a failure: the status says why, and the tick
 * connects again after reconnect-delay. */
static void retired_closed(fed_link *k);

static void fail(fed_link *k, const char *why)
{
    if (k->retiring) {
        retired_closed(k); /* frees the client too */
        return;
    }
    fed_link_set_status(k, FED_ERROR, why);
    if (k->c)
        client_free(k->c);
    k->c = NULL;
    k->consuming = false;
    k->pending_n = 0; /* their deliveries go back upstream with the connection */
    k->retry_at = loop_now_ms(k->f->l) + k->up.reconnect_delay_ms;
}

/* Socket errors by the names Erlang gives them, as RabbitMQ's status shows them. */
static const struct {
    const char *text, *name;
} posix_names[] = {
    {"Connection refused", "econnrefused"}, {"No route to host", "ehostunreach"},
    {"Network is unreachable", "enetunreach"}, {"Connection timed out", "etimedout"},
    {"Connection reset by peer", "econnreset"}, {"cannot resolve", "unknown_host"},
};

/* Why a connection ended, in the words of RabbitMQ's status: an atom for
 * a socket error, {auth_failure,...}, {shutdown,{server_initiated_close,
 * Code,<<"Text">>}} for the server's close. */
static void describe(const client_error *e, char *out, size_t cap)
{
    if (e->kind == CLIENT_ERR_AUTH) {
        snprintf(out, cap, "{auth_failure,\"%.200s\"}", e->text);
        return;
    }
    if (e->code) {
        snprintf(out, cap, "{shutdown,{server_initiated_close,%u,<<\"%.200s\">>}}", e->code,
                 e->text);
        return;
    }
    for (size_t i = 0; i < sizeof posix_names / sizeof posix_names[0]; i++)
        if (strstr(e->text, posix_names[i].text)) {
            snprintf(out, cap, "%s", posix_names[i].name);
            return;
        }
    snprintf(out, cap, "%s", e->kind == CLIENT_ERR_TIMEOUT ? "timeout" : e->text);
}

static void on_opened(void *ctx, client *c)
{
    fed_link *k = ctx;
    if (!client_channel_open(c, 1) || !client_channel_open(c, 2))
        fail(k, "cannot open a channel");
}

/* A retired link's connection is gone: it leaves f->retired and is freed. */
static void retired_closed(fed_link *k)
{
    fed_link **pp = &k->f->retired;
    while (*pp && *pp != k)
        pp = &(*pp)->next;
    if (*pp)
        *pp = k->next;
    fed_link_free(k);
}

static void on_closed(void *ctx, client *c, const client_error *why)
{
    fed_link *k = ctx;
    char text[300];
    (void)c;
    if (k->retiring) {
        retired_closed(k);
        return;
    }
    describe(why, text, sizeof text);
    fail(k, text[0] ? text : "connection closed");
}

static void on_channel_opened(void *ctx, client *c, uint16_t ch)
{
    fed_link *k = ctx;
    (void)c;
    if (ch == 2)
        fed_setup_start(k);
}

static void on_channel_closed(void *ctx, client *c, uint16_t ch, const client_error *why)
{
    fed_link *k = ctx;
    char text[300];
    (void)c;
    if (ch == 2 && why->code == AMQP_NOT_FOUND && k->status == FED_STARTING) {
        fed_setup_checked(k, false);
        return;
    }
    if (ch == 2 && why->kind == CLIENT_OK)
        return;
    describe(why, text, sizeof text);
    fail(k, text);
}

static void on_reply(void *ctx, client *c, uint16_t ch, const amqp_method *m)
{
    fed_link *k = ctx;
    (void)m;
    if (ch == 2) {
        client_channel_close(c, 2);
        fed_setup_checked(k, true);
    } else if (k->calls && --k->calls == 0 && k->closing) {
        client_close(c, AMQP_REPLY_SUCCESS, "Goodbye"); /* its upstream objects are gone */
    } else if (k->calls == 0 && k->status == FED_STARTING) {
        fed_link_set_status(k, FED_RUNNING, NULL);
        log_msg(LOG_INFO, "federation link for %s '%s' in vhost '%s' connected to %s",
                k->queue ? "queue" : "exchange", k->object, k->vhost, k->uri);
    }
}

static void on_cancelled(void *ctx, client *c, uint16_t ch, amqp_bytes tag)
{
    (void)c, (void)ch, (void)tag;
    fail(ctx, "basic_cancel");
}

static const client_handlers handlers = {
    .opened = on_opened,
    .closed = on_closed,
    .channel_opened = on_channel_opened,
    .channel_closed = on_channel_closed,
    .reply = on_reply,
    .deliver = fed_on_deliver,
    .cancelled = on_cancelled,
};

/* ---- life -------------------------------------------------------------------------- */

/* Connects to one of its URIs, picked anew for each attempt (RabbitMQ
 * picks at random). */
static void start(fed_link *k)
{
    client_uri uri;
    char err[256];
    const char *s = k->up.uris[k->changed_at % k->up.nuris];
    client_uri_redact(s, k->uri, sizeof k->uri);
    k->calls = 0;
    k->consuming = k->paused = false;
    fed_link_set_status(k, FED_STARTING, NULL);
    if (!client_uri_parse(s, &uri, err, sizeof err)) {
        fail(k, err);
        return;
    }
    snprintf(k->upstream_vhost, sizeof k->upstream_vhost, "%s", uri.vhost);
    client_options o = {.connection_name = k->conn_name};
    loop *l = k->f->l;
    if (uri.local) { /* this broker (another vhost), as RabbitMQ's direct connection */
        transport *ends[2];
        if (!uri.user_given)
            snprintf(uri.user, sizeof uri.user, "none");
        if (transport_pipe_pair(loop_flusher(l), loop_base(l), LOCAL_PIPE_BYTES, ends)) {
            conn_attach_trusted(k->f->s, l, ends[1], k->conn_name);
            k->c = client_attach(loop_base(l), ends[0], &uri, &o, &handlers, k);
        }
    } else {
        k->c = client_connect(loop_base(l), loop_flusher(l), &uri, &o, &handlers, k);
    }
    if (!k->c)
        fail(k, "out of memory");
}

fed_link *fed_link_new(federation *f, bool is_queue, const char *vh, const char *object,
                       const char *policy, const char *json, fed_upstream *up)
{
    fed_link *k = calloc(1, sizeof *k);
    if (!k || !(k->config = strdup(json))) {
        free(k);
        fed_upstream_clear(up);
        return NULL;
    }
    k->f = f;
    k->queue = is_queue;
    k->up = *up;
    k->suffix = 'A';
    snprintf(k->vhost, sizeof k->vhost, "%s", vh);
    snprintf(k->object, sizeof k->object, "%s", object);
    snprintf(k->policy, sizeof k->policy, "%s", policy);
    fed_connection_name(k->conn_name, sizeof k->conn_name, up->name, policy);
    fed_link_id(k->id, sizeof k->id, vh, is_queue ? "queue" : "exchange", object, up->name,
                is_queue ? up->queue : up->exchange);
    start(k);
    return k;
}

void fed_link_restart(fed_link *k)
{
    if (k->c)
        client_free(k->c); /* its unacked deliveries go back upstream */
    k->c = NULL;
    k->pending_n = 0;
    start(k);
}

bool fed_link_tick(fed_link *k, uint64_t now, bool bindings, bool alarm)
{
    if (!k->c && k->status == FED_ERROR && now >= k->retry_at)
        start(k);
    if (k->c && alarm != k->paused) /* a resource alarm blocks links as it blocks publishers */
        client_pause_reading(k->c, k->paused = alarm);
    if (k->status == FED_RUNNING && k->c && k->queue)
        return fed_queue_demand(k);
    if (k->status == FED_RUNNING && k->c && bindings)
        fed_bindings_sync(k);
    return false;
}

void fed_link_finish_retiring(fed_link *k)
{
    k->closing = true;
    k->calls = 0;
    if (!k->queue && k->status == FED_RUNNING) {
        amqp_method m = {.id = AMQP_QUEUE_DELETE};
        m.queue_delete = (amqp_queue_delete){.queue = AMQP_CSTR(k->upstream_queue)};
        k->calls += client_call(k->c, 1, &m);
        m = (amqp_method){.id = AMQP_EXCHANGE_DELETE};
        m.exchange_delete = (amqp_exchange_delete){.exchange = AMQP_CSTR(k->internal_x)};
        k->calls += client_call(k->c, 1, &m);
    }
    if (k->calls == 0) /* else once the deletes are answered (on_reply) */
        client_close(k->c, AMQP_REPLY_SUCCESS, "Goodbye");
}

void fed_link_retire(fed_link *k)
{
    k->next = k->f->retired;
    k->f->retired = k;
    k->retiring = true;
    if (!k->c || !client_is_open(k->c))
        retired_closed(k);
    else if (k->pending_n == 0) /* else once the journal let them be acked */
        fed_link_finish_retiring(k);
}

void fed_link_free(fed_link *k)
{
    if (!k)
        return;
    if (k->c)
        client_free(k->c); /* unacked deliveries go back upstream */
    fed_bindings_free(k);
    fed_upstream_clear(&k->up);
    free(k->pending);
    free(k->scratch);
    free(k->config);
    free(k);
}
