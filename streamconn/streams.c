/* Commands on streams after Open: Metadata, Create, Delete, StoreOffset,
 * QueryOffset, StreamStats, ExchangeCommandVersions -- and the streams a
 * connection uses (one watch each), told when one is deleted.
 *
 * A stream is a stream queue of the connection's vhost, so Create and
 * Delete go through admin_queue_declare / admin_queue_delete, the AMQP
 * paths: a stream made either way is the same queue. Permissions as
 * RabbitMQ 3.10.8 checks them (live): Create and Delete configure,
 * QueryOffset and StoreOffset read, Metadata none. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sconn_int.h"

#define SLICE(s) ((sp_slice){(const uint8_t *)(s), (uint32_t)strlen(s)})

static amqp_bytes bytes_of(sp_slice s) { return (amqp_bytes){s.ptr, s.len}; }

queue *sc_find_stream(sconn *c, sp_slice name)
{
    queue *q = c->vh ? vhost_queue_find(c->vh, bytes_of(name)) : NULL;
    return q && queue_is_stream(q) ? q : NULL;
}

bool sc_allowed(sconn *c, access_kind kind, sp_slice name)
{
    access_control *a = server_access(c->srv);
    const access_perms *p = access_find_perms(a, AMQP_CSTR(c->user), AMQP_CSTR(vhost_name(c->vh)));
    return p && access_allowed(a, p, kind, bytes_of(name));
}

/* ---- the streams a connection uses -------------------------------------- */

static void on_committed(stream_watch *w)
{
    sc_stream *st = (sc_stream *)((char *)w - offsetof(sc_stream, watch));
    sc_subs_deliver(st->c, st);
}

static void unlink_stream(sc_stream *st)
{
    sc_stream **pp = &st->c->streams;
    while (*pp != st)
        pp = &(*pp)->next;
    *pp = st->next;
    free(st);
}

static void metadata_update(sconn *c, sp_slice name)
{
    if (c->state != SC_OPEN)
        return;
    sp_buf b = sc_out(c, 16 + name.len);
    sp_encode_metadata_update(&b, SP_STREAM_NOT_AVAILABLE, name);
    sc_commit(c, &b);
}

/* The queue is gone (already unwatched): RabbitMQ's MetadataUpdate with
 * stream_not_available, then its publishers and subscriptions here go. */
static void on_deleted(stream_watch *w)
{
    sc_stream *st = (sc_stream *)((char *)w - offsetof(sc_stream, watch));
    sconn *c = st->c;
    st->q = NULL;
    if (c->deleting)
        c->update_due = true;
    else
        metadata_update(c, (sp_slice){(const uint8_t *)st->name, st->name_len});
    sc_publishers_drop(c, st);
    sc_subs_drop(c, st, true);
    unlink_stream(st);
}

void sc_streams_unavailable(sconn *c)
{
    for (sc_stream *st = c->streams; st; st = st->next)
        metadata_update(c, (sp_slice){(const uint8_t *)st->name, st->name_len});
}

sc_stream *sc_stream_use(sconn *c, queue *q, sp_slice name)
{
    for (sc_stream *st = c->streams; st; st = st->next)
        if (st->q == q) {
            st->users++;
            return st;
        }
    sc_stream *st = calloc(1, sizeof *st + name.len + 1);
    if (!st)
        return NULL;
    st->c = c;
    st->q = q;
    st->users = 1;
    st->name_len = (uint16_t)name.len;
    memcpy(st->name, name.ptr, name.len);
    st->watch.committed = on_committed;
    st->watch.deleted = on_deleted;
    queue_stream_watch(q, &st->watch);
    st->next = c->streams;
    c->streams = st;
    return st;
}

void sc_stream_release(sc_stream *st)
{
    if (--st->users)
        return;
    queue_stream_unwatch(st->q, &st->watch);
    unlink_stream(st);
}

void sc_forget_streams(sconn *c)
{
    while (c->streams) {
        sc_stream *st = c->streams;
        st->users = 1; /* whatever was left: the last release unwatches */
        sc_publishers_drop(c, st);
        sc_subs_drop(c, st, false);
        sc_stream_release(st);
    }
}

/* ---- Metadata ------------------------------------------------------------ */

/* One broker, this node, leading every stream found (no replicas); a
 * missing one gets stream_does_not_exist, as RabbitMQ's. */
static void metadata(sconn *c, const sp_command *cmd)
{
    char host[300], port[16];
    sc_advertised(c->hub, host, sizeof host, port, sizeof port);
    size_t want = 64 + strlen(host);
    sp_list it = cmd->u.metadata.streams;
    sp_slice name;
    while (sp_string_next(&it, &name))
        want += 12 + name.len;
    sp_buf b = sc_out(c, want);
    size_t start = sp_metadata_begin(&b, cmd->correlation_id, 1);
    sp_metadata_broker(&b, 0, SLICE(host), (uint32_t)atoi(port));
    sp_metadata_streams(&b, cmd->u.metadata.streams.count);
    for (it = cmd->u.metadata.streams; sp_string_next(&it, &name);) {
        bool found = sc_find_stream(c, name) != NULL;
        sp_metadata_stream s = {.name = name,
                                .code = found ? SP_OK : SP_STREAM_DOES_NOT_EXIST,
                                .leader = found ? 0 : 0xFFFF};
        sp_metadata_stream_put(&b, &s);
    }
    sp_frame_end(&b, start);
    sc_commit(c, &b);
}

/* ---- Create and Delete --------------------------------------------------- */

/* Create's arguments as RabbitMQ's stream manager turns them into queue
 * arguments (others are ignored): numbers as longs, strings as longstrs.
 * False for a number that is not one (RabbitMQ's manager crashes there;
 * Warren answers precondition_failed) or a leader locator 3.10 refuses. */
bool sc_stream_arguments(sp_list args, uint8_t *buf, size_t cap, amqp_bytes *out)
{
    static const struct { const char *key, *arg; bool number; } map[] = {
        {"max-length-bytes", "x-max-length-bytes", true},
        {"max-age", "x-max-age", false},
        {"stream-max-segment-size-bytes", "x-stream-max-segment-size-bytes", true},
        {"initial-cluster-size", "x-initial-cluster-size", true},
        {"queue-leader-locator", "x-queue-leader-locator", false},
    };
    static const char *const locators[] = {"client-local", "random", "least-leaders", "balanced"};
    amqp_writer w;
    amqp_writer_init(&w, buf, cap);
    size_t top = amqp_table_begin(&w);
    amqp_put_field_str(&w, "x-queue-type", AMQP_CSTR("stream"));
    sp_slice k, v;
    while (sp_pair_next(&args, &k, &v)) {
        size_t i = 0;
        while (i < sizeof map / sizeof map[0] &&
               !(strlen(map[i].key) == k.len && memcmp(map[i].key, k.ptr, k.len) == 0))
            i++;
        if (i == sizeof map / sizeof map[0])
            continue;
        char text[32];
        if (map[i].number) {
            char *end;
            if (v.len == 0 || v.len >= sizeof text)
                return false;
            memcpy(text, v.ptr, v.len);
            text[v.len] = 0;
            long long n = strtoll(text, &end, 10);
            if (*end || text[0] == ' ' || text[0] == '+')
                return false;
            amqp_put_field_long(&w, map[i].arg, n);
            continue;
        }
        if (i == 4) {
            size_t j = 0;
            while (j < 4 && !(strlen(locators[j]) == v.len && memcmp(locators[j], v.ptr, v.len) == 0))
                j++;
            if (j == 4)
                return false;
        }
        amqp_put_field_str(&w, map[i].arg, bytes_of(v));
    }
    amqp_table_end(&w, top);
    if (w.overflow)
        return false;
    *out = (amqp_bytes){buf + 4, (uint32_t)w.len - 4};
    return true;
}

bool sc_name_ok(sp_slice name)
{
    return name.len && !(name.len >= 4 && memcmp(name.ptr, "amq.", 4) == 0);
}

/* An AMQP refusal as the stream protocol's code. */
uint16_t sc_code_of(const amqp_error *err)
{
    return err->code == AMQP_PRECONDITION_FAILED ? SP_PRECONDITION_FAILED
           : err->code == AMQP_ACCESS_REFUSED    ? SP_ACCESS_REFUSED
                                                 : SP_INTERNAL_ERROR;
}

static uint16_t create(sconn *c, const sp_command *cmd)
{
    sp_slice name = cmd->u.create.stream;
    /* RabbitMQ 3.10.8 (live): "" and amq.* are precondition_failed */
    if (!sc_name_ok(name))
        return SP_PRECONDITION_FAILED;
    if (!sc_allowed(c, ACCESS_CONFIGURE, name))
        return SP_ACCESS_REFUSED;
    if (vhost_queue_find(c->vh, bytes_of(name)))
        return SP_STREAM_ALREADY_EXISTS;
    uint8_t args[4096];
    queue_spec spec = {.name = bytes_of(name), .durable = true};
    if (!sc_stream_arguments(cmd->u.create.arguments, args, sizeof args, &spec.arguments))
        return SP_PRECONDITION_FAILED;
    amqp_error err = {0};
    queue *q;
    if (admin_queue_declare(c->vh, &spec, &q, &err) != AMQP_OK) {
        log_msg(LOG_WARNING, "stream connection %s: cannot create stream '%.*s': %s", c->peer,
                (int)name.len, (const char *)name.ptr, err.text);
        return sc_code_of(&err);
    }
    return SP_OK;
}

static uint16_t delete_stream(sconn *c, const sp_command *cmd)
{
    sp_slice name = cmd->u.delete_stream.stream;
    if (!sc_allowed(c, ACCESS_CONFIGURE, name))
        return SP_ACCESS_REFUSED;
    if (!sc_find_stream(c, name))
        return SP_STREAM_DOES_NOT_EXIST;
    amqp_error err = {0};
    c->deleting = true;
    int r = admin_queue_delete(c->vh, bytes_of(name), false, false, &err);
    c->deleting = false;
    return r == AMQP_OK ? SP_OK : sc_code_of(&err);
}

/* ---- offsets and statistics ---------------------------------------------- */

static void query_offset(sconn *c, const sp_command *cmd)
{
    sp_slice name = cmd->u.query_offset.stream;
    uint64_t offset = 0;
    queue *q = sc_find_stream(c, name);
    uint16_t code = !sc_allowed(c, ACCESS_READ, name) ? SP_ACCESS_REFUSED
                    : !q ? SP_STREAM_DOES_NOT_EXIST
                    : queue_stream_query_offset(q, bytes_of(cmd->u.query_offset.reference), &offset)
                        ? SP_OK
                        : SP_NO_OFFSET;
    sp_buf b = sc_out(c, 32);
    sp_encode_query_offset_response(&b, cmd->correlation_id, code, code == SP_OK ? offset : 0);
    sc_commit(c, &b);
}

/* No response, whatever happens (RabbitMQ's StoreOffset has none). */
static void store_offset(sconn *c, const sp_command *cmd)
{
    sp_slice name = cmd->u.store_offset.stream;
    queue *q = sc_find_stream(c, name);
    if (q && sc_allowed(c, ACCESS_READ, name) && cmd->u.store_offset.reference.len &&
        !queue_stream_store_offset(q, bytes_of(cmd->u.store_offset.reference),
                                   cmd->u.store_offset.offset))
        log_msg(LOG_WARNING, "stream connection %s: cannot store an offset in '%.*s'", c->peer,
                (int)name.len, (const char *)name.ptr);
}

/* 3.13's StreamStats: the first and committed chunk ids, -1 when none. */
static void stream_stats(sconn *c, const sp_command *cmd)
{
    sp_slice name = cmd->u.stream_stats.stream;
    queue *q = sc_find_stream(c, name);
    uint16_t code = !sc_allowed(c, ACCESS_READ, name) ? SP_ACCESS_REFUSED
                    : !q ? SP_STREAM_DOES_NOT_EXIST : SP_OK;
    sp_stat figures[2] = {{SLICE("first_chunk_id"), -1}, {SLICE("committed_chunk_id"), -1}};
    if (q) {
        stream_info info;
        stream_get_info(queue_stream_log(q), &info);
        if (!info.empty)
            figures[0].value = (int64_t)info.first_offset;
        if (!info.empty && info.committed_offset > info.first_offset)
            figures[1].value = (int64_t)info.committed_chunk_id;
    }
    sp_buf b = sc_out(c, 96);
    sp_encode_stream_stats_response(&b, cmd->correlation_id, code, figures, code == SP_OK ? 2 : 0);
    sc_commit(c, &b);
}

/* A client that takes Deliver v2 (with the committed chunk id) gets it,
 * as RabbitMQ 3.13 does; rabbitmq-stream-js-client applies a consumer's
 * post-filter only to v2 deliveries. */
static void exchange_versions(sconn *c, const sp_command *cmd)
{
    sp_list it = cmd->u.exchange_command_versions.commands;
    sp_command_version cv;
    while (sp_version_next(&it, &cv))
        if (cv.key == SP_DELIVER && cv.min_version <= 2 && cv.max_version >= 2)
            c->deliver_version = 2;
    size_t n;
    const sp_command_version *v = sp_server_versions(&n);
    sp_buf b = sc_out(c, 32 + 6 * n);
    sp_encode_exchange_command_versions_response(&b, cmd->correlation_id, SP_OK, v, n);
    sc_commit(c, &b);
}

bool sc_command(sconn *c, const sp_command *cmd)
{
    switch (cmd->key) {
    case SP_METADATA:
        metadata(c, cmd);
        return true;
    case SP_CREATE:
        sc_response(c, SP_CREATE, cmd->correlation_id, create(c, cmd));
        return true;
    case SP_DELETE:
        /* RabbitMQ answers first, then tells this connection's users */
        sc_response(c, SP_DELETE, cmd->correlation_id, delete_stream(c, cmd));
        if (c->update_due)
            metadata_update(c, cmd->u.delete_stream.stream);
        c->update_due = false;
        return true;
    case SP_QUERY_OFFSET:
        query_offset(c, cmd);
        return true;
    case SP_STORE_OFFSET:
        store_offset(c, cmd);
        return true;
    case SP_STREAM_STATS:
        stream_stats(c, cmd);
        return true;
    case SP_EXCHANGE_COMMAND_VERSIONS:
        exchange_versions(c, cmd);
        return true;
    default:
        return sc_publish_command(c, cmd) || sc_subscribe_command(c, cmd) ||
               sc_superstream_command(c, cmd);
    }
}
