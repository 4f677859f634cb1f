/* Super streams over the stream protocol (RabbitMQ 3.11+; 3.13's
 * rabbit_stream_reader rules): Route routes the key through the super
 * stream's exchange, Partitions lists its partition bindings (conn/'s
 * admin_super_stream_partitions) -- for one made over AMQP or the API too
 * -- and CreateSuperStream and DeleteSuperStream
 * go through conn/'s admin_super_stream_create / _delete, which the
 * management API and warrenctl share.
 *
 * Permissions, as 3.13: Route needs write on the exchange and on every
 * stream the key routes to; Partitions read or write on the exchange and
 * on every partition; Create and Delete configure on the exchange and on
 * every partition, read on the exchange, write on every partition. A
 * refusal is access_refused with no stream listed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sconn_int.h"

#define PARTITIONS_MAX ADMIN_SUPER_PARTITIONS_MAX

static amqp_bytes bytes_of(sp_slice s) { return (amqp_bytes){s.ptr, s.len}; }
static sp_slice slice_of(amqp_bytes b) { return (sp_slice){b.ptr, b.len}; }

static bool read_or_write(sconn *c, sp_slice name)
{
    return sc_allowed(c, ACCESS_READ, name) || sc_allowed(c, ACCESS_WRITE, name);
}

/* Management of a super stream and the named partitions (3.13's
 * check_super_stream_management_permitted). */
static bool may_manage(sconn *c, sp_slice name, const sp_slice *parts, size_t n)
{
    if (!sc_allowed(c, ACCESS_CONFIGURE, name) || !sc_allowed(c, ACCESS_READ, name))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!sc_allowed(c, ACCESS_CONFIGURE, parts[i]) || !sc_allowed(c, ACCESS_WRITE, parts[i]))
            return false;
    return true;
}

/* Sends a Route or Partitions response. */
static void streams_response(sconn *c, uint16_t key, uint32_t corr, uint16_t code,
                             const sp_slice *names, size_t n)
{
    size_t want = 32; /* size, key, version, correlation, code, count */
    for (size_t i = 0; i < n; i++)
        want += 2 + names[i].len;
    sp_buf b = sc_out(c, want);
    sp_encode_streams_response(&b, key, corr, code, names, n);
    sc_commit(c, &b);
}

static bool may_write(sconn *c, sp_slice name) { return sc_allowed(c, ACCESS_WRITE, name); }

/* Route (`key`: the streams the super stream's exchange routes that key
 * to, as publishing would -- any exchange type, streams only, none is an
 * empty OK, as RabbitMQ 3.10.8 answered) or Partitions (`key` NULL: every
 * partition in x-stream-partition-order): the user must be allowed `may`
 * on the super stream and on every stream answered. */
static void answer_streams(sconn *c, uint16_t cmd_key, uint32_t corr, sp_slice name,
                           const sp_slice *key, bool (*may)(sconn *, sp_slice))
{
    if (!may(c, name)) {
        streams_response(c, cmd_key, corr, SP_ACCESS_REFUSED, NULL, 0);
        return;
    }
    route_table *rt = vhost_routes(c->vh);
    route_exchange *ex = route_exchange_find(rt, bytes_of(name));
    admin_partition *p = malloc(PARTITIONS_MAX * sizeof *p);
    sp_slice *out = malloc(PARTITIONS_MAX * sizeof *out);
    void **routed = NULL;
    long n = !ex || !p || !out ? -1
             : key ? (long)route_message(rt, ex, bytes_of(*key), (amqp_bytes){NULL, 0}, &routed)
                   : admin_super_stream_partitions(c->vh, bytes_of(name), p, PARTITIONS_MAX);
    uint16_t code = !ex ? SP_STREAM_DOES_NOT_EXIST : !p || !out ? SP_INTERNAL_ERROR : SP_OK;
    size_t k = 0;
    for (long i = 0; code == SP_OK && i < n && k < PARTITIONS_MAX; i++) {
        queue *q = key ? routed[i] : p[i].stream;
        if (!queue_is_stream(q))
            continue;
        out[k] = slice_of(queue_name(q));
        if (!may(c, out[k++]))
            code = SP_ACCESS_REFUSED;
    }
    streams_response(c, cmd_key, corr, code, out, code == SP_OK ? k : 0);
    free(p);
    free(out);
}

int32_t sc_partition_index(sconn *c, sp_slice super, const queue *q)
{
    admin_partition *p = malloc(PARTITIONS_MAX * sizeof *p);
    long n = p ? admin_super_stream_partitions(c->vh, bytes_of(super), p, PARTITIONS_MAX) : -1;
    int32_t at = -1;
    for (long i = 0; i < n && i < PARTITIONS_MAX && at < 0; i++)
        if (p[i].stream == q)
            at = (int32_t)i;
    free(p);
    return at;
}

static uint16_t status_code(admin_super_status st)
{
    switch (st) {
    case ADMIN_SUPER_OK: return SP_OK;
    case ADMIN_SUPER_VALIDATION_FAILED: return SP_PRECONDITION_FAILED;
    case ADMIN_SUPER_ALREADY_EXISTS: return SP_STREAM_ALREADY_EXISTS;
    case ADMIN_SUPER_NOT_FOUND: return SP_STREAM_DOES_NOT_EXIST;
    default: return SP_INTERNAL_ERROR;
    }
}

/* The spec a CreateSuperStream asks for: a partition per binding key, each
 * named as the client names it (3.13 takes any names). */
static uint16_t create_spec(const sp_command *cmd, amqp_bytes *keys, amqp_bytes *names,
                            admin_stream_arg *args, admin_super_spec *spec)
{
    sp_list pl = cmd->u.create_super_stream.partitions, kl = cmd->u.create_super_stream.binding_keys;
    sp_list al = cmd->u.create_super_stream.arguments;
    sp_slice part, key, k, v;
    uint32_t n = 0;
    while (sp_string_next(&kl, &key)) {
        if (!sp_string_next(&pl, &part) || n == PARTITIONS_MAX)
            return SP_PRECONDITION_FAILED;
        keys[n] = bytes_of(key);
        names[n++] = bytes_of(part);
    }
    if (n == 0 || sp_string_next(&pl, &part))
        return SP_PRECONDITION_FAILED; /* as many partitions as keys, one at least */
    size_t na = 0;
    while (sp_pair_next(&al, &k, &v) && na < 16)
        args[na++] = (admin_stream_arg){bytes_of(k), bytes_of(v)};
    *spec = (admin_super_spec){.name = bytes_of(cmd->u.create_super_stream.name), .keys = keys,
                               .nkeys = n, .names = names, .args = args, .nargs = na};
    return SP_OK;
}

static uint16_t create(sconn *c, const sp_command *cmd)
{
    sp_slice name = cmd->u.create_super_stream.name;
    if (name.len == 0 || (name.len >= 4 && memcmp(name.ptr, "amq.", 4) == 0))
        return SP_PRECONDITION_FAILED; /* rabbit_stream_utils:enforce_correct_name */
    amqp_bytes *keys = malloc(PARTITIONS_MAX * sizeof *keys);
    amqp_bytes *names = malloc(PARTITIONS_MAX * sizeof *names);
    sp_slice *parts = malloc(PARTITIONS_MAX * sizeof *parts);
    admin_stream_arg args[16];
    admin_super_spec spec;
    uint16_t code = keys && names && parts ? create_spec(cmd, keys, names, args, &spec)
                                           : SP_INTERNAL_ERROR;
    if (code == SP_OK) {
        sp_list pl = cmd->u.create_super_stream.partitions;
        size_t n = 0;
        while (n < spec.nkeys && sp_string_next(&pl, &parts[n]))
            n++;
        if (!may_manage(c, name, parts, n))
            code = SP_ACCESS_REFUSED;
    }
    if (code == SP_OK) {
        admin_super_error err = {0};
        code = status_code(admin_super_stream_create(c->vh, &spec, &err));
        if (code != SP_OK)
            log_msg(LOG_WARNING, "stream connection %s: cannot create super stream '%.*s': %s %s",
                    c->peer, (int)name.len, (const char *)name.ptr, admin_super_reason(err.status),
                    err.text);
    }
    free(keys);
    free(names);
    free(parts);
    return code;
}

static uint16_t delete_super(sconn *c, const sp_command *cmd)
{
    sp_slice name = cmd->u.delete_super_stream.name;
    if (!sc_allowed(c, ACCESS_CONFIGURE, name) || !sc_allowed(c, ACCESS_READ, name))
        return SP_ACCESS_REFUSED;
    admin_partition *p = malloc(PARTITIONS_MAX * sizeof *p);
    sp_slice *parts = malloc(PARTITIONS_MAX * sizeof *parts);
    long n = p && parts ? admin_super_stream_partitions(c->vh, bytes_of(name), p, PARTITIONS_MAX)
                        : -1;
    uint16_t code = !p || !parts ? SP_INTERNAL_ERROR : n < 0 ? SP_STREAM_DOES_NOT_EXIST : SP_OK;
    for (long i = 0; code == SP_OK && i < n && i < PARTITIONS_MAX; i++)
        parts[i] = slice_of(queue_name(p[i].stream));
    if (code == SP_OK && !may_manage(c, name, parts, n < PARTITIONS_MAX ? (size_t)n : PARTITIONS_MAX))
        code = SP_ACCESS_REFUSED;
    free(p);
    free(parts);
    if (code != SP_OK)
        return code;
    admin_super_error err = {0};
    return status_code(admin_super_stream_delete(c->vh, bytes_of(name), &err));
}

bool sc_superstream_command(sconn *c, const sp_command *cmd)
{
    switch (cmd->key) {
    case SP_ROUTE:
        answer_streams(c, SP_ROUTE, cmd->correlation_id, cmd->u.route.super_stream,
                       &cmd->u.route.routing_key, may_write);
        return true;
    case SP_PARTITIONS:
        answer_streams(c, SP_PARTITIONS, cmd->correlation_id, cmd->u.partitions.super_stream,
                       NULL, read_or_write);
        return true;
    case SP_CREATE_SUPER_STREAM:
        sc_response(c, SP_CREATE_SUPER_STREAM, cmd->correlation_id, create(c, cmd));
        return true;
    case SP_DELETE_SUPER_STREAM:
        sc_response(c, SP_DELETE_SUPER_STREAM, cmd->correlation_id, delete_super(c, cmd));
        return true;
    default:
        return false;
    }
}
