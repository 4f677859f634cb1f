/* table: a virtual host's exchanges -- declare, delete, look up, list.
 *
 * Exchanges live in a hash map by name (route_map, keyed by the name's
 * hash). Each exchange is one allocation holding its name and its declared
 * arguments; `ops` is its type's function table and `state` that type's
 * index of the bindings whose source it is.
 *
 * Deletion is a cascade with a work list, not recursion: deleting X
 * removes the bindings from X and to X; a source left without bindings
 * that is auto-delete is unlinked too (marked `dying`, so it is queued
 * once) and processed the same way. The hook exchange_deleted runs for
 * each before it is freed. route_table_free frees without the hook: the
 * broker is shutting down, and durable exchanges must stay in the store.
 *
 * Error texts follow RabbitMQ 3.10 (checked against a live 3.10.8):
 * an unknown type is 503 "unknown exchange type 'bogus'" (a connection
 * error, checked before anything else and ignored by passive declares),
 * "" is 403 for declare (passive too) and delete, deleting any "amq."
 * name is 403 even when it does not exist, deleting a missing exchange
 * succeeds, and a redeclare compares type, durable, auto_delete, internal
 * and the alternate-exchange argument, in that order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "route_int.h"

#define DEFAULT_EXCHANGE_TEXT "operation not permitted on the default exchange"

/* Indexed by route_type. */
static const struct {
    const char *name;
    const route_type_ops *ops;
    const char *description;
} types[] = {
    [ROUTE_DIRECT] = {"direct", &route_direct_ops,
                      "AMQP direct exchange, as per the AMQP specification"},
    [ROUTE_FANOUT] = {"fanout", &route_fanout_ops,
                      "AMQP fanout exchange, as per the AMQP specification"},
    [ROUTE_TOPIC] = {"topic", &route_topic_ops,
                     "AMQP topic exchange, as per the AMQP specification"},
    [ROUTE_HEADERS] = {"headers", &route_headers_ops,
                       "AMQP headers exchange, as per the AMQP specification"},
    [ROUTE_CONSISTENT_HASH] = {"x-consistent-hash", &route_consistent_hash_ops,
                               "Consistent Hashing Exchange"},
    [ROUTE_MODULUS_HASH] = {"x-modulus-hash", &route_modulus_hash_ops,
                            "Modulus Hashing Exchange"},
    [ROUTE_LOCAL_RANDOM] = {"x-local-random", &route_local_random_ops,
                            "Picks one random local binding (queue) to route via (to)."},
    /* no ops of its own: those of its x-delayed-type (delay.c) */
    [ROUTE_DELAYED] = {ROUTE_DELAYED_NAME, NULL, "Delayed Message Exchange."},
    [ROUTE_DEDUP] = {"x-message-deduplication", &route_dedup_ops,
                     "Message Deduplication Exchange."},
};

#define NTYPES (sizeof types / sizeof types[0])

const char *route_type_name(route_type type)
{
    return (size_t)type < NTYPES ? types[type].name : "unknown";
}

const char *route_type_description(route_type type)
{
    return (size_t)type < NTYPES ? types[type].description : "";
}

static const route_type_ops *type_ops(amqp_bytes name)
{
    size_t i;

    for (i = 0; i < NTYPES; i++)
        if (amqp_bytes_equal_cstr(name, types[i].name))
            return types[i].ops;
    return NULL;
}

bool route_type_known(amqp_bytes name)
{
    return type_ops(name) != NULL || amqp_bytes_equal_cstr(name, ROUTE_DELAYED_NAME);
}

static bool has_amq_prefix(amqp_bytes name)
{
    return name.len >= 4 && memcmp(name.ptr, "amq.", 4) == 0;
}

/* ---- lookup ------------------------------------------------------------- */

static bool name_eq(const void *item, const void *key)
{
    const route_exchange *ex = item;
    const amqp_bytes *name = key;

    return ex->name_len == name->len &&
           (name->len == 0 || memcmp(ex->data, name->ptr, name->len) == 0);
}

route_exchange *route_exchange_find_bytes(route_table *t, amqp_bytes name)
{
    return route_map_find(&t->exchanges, route_hash_bytes(name.ptr, name.len), name_eq, &name);
}

route_exchange *route_exchange_find(route_table *t, amqp_bytes name)
{
    return route_exchange_find_bytes(t, name);
}

route_exchange *route_exchange_lookup(route_table *t, amqp_bytes name, uint32_t method_id,
                                      amqp_error *err)
{
    route_exchange *ex = route_exchange_find_bytes(t, name);

    if (ex == NULL)
        amqp_fail(err, AMQP_NOT_FOUND, method_id, "no exchange '%.*s' in vhost '%s'",
                  (int)name.len, (const char *)name.ptr, t->vhost);
    return ex;
}

uint64_t route_exchanges_version(const route_table *t) { return t->ex_version; }

/* ---- views -------------------------------------------------------------- */

amqp_bytes route_exchange_name(const route_exchange *ex)
{
    return (amqp_bytes){ex->data, ex->name_len};
}

route_type route_exchange_type(const route_exchange *ex)
{
    return ex->delayed ? ROUTE_DELAYED : ex->ops->type;
}
bool route_exchange_durable(const route_exchange *ex) { return ex->durable; }
bool route_exchange_auto_delete(const route_exchange *ex) { return ex->auto_delete; }
bool route_exchange_internal(const route_exchange *ex) { return ex->internal; }
size_t route_exchange_binding_count(const route_exchange *ex) { return ex->nbindings; }

amqp_bytes route_exchange_arguments(const route_exchange *ex)
{
    return (amqp_bytes){ex->data + ex->name_len, ex->args_len};
}

void route_foreach_exchange(route_table *t, void (*fn)(void *arg, route_exchange *ex), void *arg)
{
    size_t i;

    for (i = 0; t->exchanges.slots && i <= t->exchanges.mask; i++)
        if (t->exchanges.slots[i].item != NULL)
            fn(arg, t->exchanges.slots[i].item);
}

/* ---- creation ----------------------------------------------------------- */

static bool grow_array(void **arr, size_t *cap, size_t need, size_t size)
{
    size_t n = *cap ? *cap : 16;
    void *p;

    while (n < need)
        n *= 2;
    if ((p = realloc(*arr, n * size)) == NULL)
        return false;
    *arr = p;
    *cap = n;
    return true;
}

/* The result holds every queue target plus the one queue the default
 * exchange may find without a binding; the work list every exchange. The
 * +2 and +1 leave room for the target or exchange about to be added. */
bool route_table_reserve(route_table *t)
{
    if (t->queues.count + 2 > t->result_cap &&
        !grow_array((void **)&t->result, &t->result_cap, t->queues.count + 2, sizeof(void *)))
        return false;
    if (t->exchanges.count + 1 > t->work_cap &&
        !grow_array((void **)&t->work, &t->work_cap, t->exchanges.count + 1, sizeof(void *)))
        return false;
    return true;
}

/* The argument wins; a policy's name applies only without one. */
static void set_alternate(route_exchange *ex)
{
    amqp_field f;

    ex->has_ae = false;
    ex->ae_name = (amqp_bytes){0};
    ex->ae = NULL;
    ex->ae_version = ex->table->ex_version - 1; /* look the name up again */
    if (amqp_table_get(route_exchange_arguments(ex), "alternate-exchange", &f) &&
        (f.type == 'S' || f.type == 'x')) {
        ex->has_ae = true;
        ex->ae_name = f.v.bytes;
    } else if (ex->policy_ae != NULL) {
        ex->has_ae = true;
        ex->ae_name = (amqp_bytes){ex->policy_ae, ex->policy_ae_len};
    }
}

static bool same_policy(const route_exchange *ex, const char *policy, amqp_bytes alternate)
{
    bool same_name = ex->policy == policy || (ex->policy && policy && !strcmp(ex->policy, policy));
    return same_name && ex->policy_ae_len == alternate.len &&
           (alternate.len == 0 || memcmp(ex->policy_ae, alternate.ptr, alternate.len) == 0);
}

bool route_exchange_set_policy(route_exchange *ex, const char *policy, amqp_bytes alternate)
{
    if (ex->is_default)
        alternate = (amqp_bytes){0};
    if (same_policy(ex, policy, alternate)) /* re-applying every policy is common */
        return true;
    uint8_t *ae = alternate.len > 0 ? malloc(alternate.len) : NULL;
    char *name = policy ? strdup(policy) : NULL;
    if ((alternate.len > 0 && ae == NULL) || (policy && name == NULL)) {
        free(ae);
        free(name);
        return false;
    }
    if (alternate.len > 0)
        memcpy(ae, alternate.ptr, alternate.len);
    free(ex->policy_ae);
    free(ex->policy);
    ex->policy_ae = ae;
    ex->policy_ae_len = alternate.len;
    ex->policy = name;
    set_alternate(ex);
    return true;
}

const char *route_exchange_policy(const route_exchange *ex) { return ex->policy; }

bool route_exchange_alternate(const route_exchange *ex, amqp_bytes *name)
{
    if (ex->has_ae)
        *name = ex->ae_name;
    return ex->has_ae;
}

/* A new exchange, linked into the table; NULL on out-of-memory. */
static route_exchange *exchange_new(route_table *t, amqp_bytes name, const route_type_ops *ops,
                                    const route_exchange_spec *spec)
{
    route_exchange *ex = calloc(1, sizeof *ex + name.len + spec->arguments.len);

    if (ex == NULL)
        return NULL;
    ex->target.exchange = ex;
    ex->table = t;
    ex->ops = ops;
    ex->durable = spec->durable;
    ex->auto_delete = spec->auto_delete;
    ex->internal = spec->internal;
    ex->name_len = name.len;
    ex->args_len = spec->arguments.len;
    if (name.len > 0)
        memcpy(ex->data, name.ptr, name.len);
    if (spec->arguments.len > 0)
        memcpy(ex->data + name.len, spec->arguments.ptr, spec->arguments.len);
    ex->name_hash = route_hash_bytes(name.ptr, name.len);
    set_alternate(ex);
    if (!route_table_reserve(t) || !ops->create(ex)) {
        free(ex);
        return NULL;
    }
    if (!route_map_insert(&t->exchanges, ex->name_hash, ex)) {
        ops->destroy(ex);
        free(ex);
        return NULL;
    }
    t->ex_version++;
    return ex;
}

static bool add_builtin(route_table *t, const char *name, const route_type_ops *ops,
                        bool internal)
{
    route_exchange_spec spec = {.name = AMQP_CSTR(name), .durable = true, .internal = internal};

    return exchange_new(t, spec.name, ops, &spec) != NULL;
}

/* RabbitMQ's rabbit_vhost creates these in every vhost, amq.rabbitmq.trace
 * (internal, for the firehose tracer) included. */
static bool add_builtins(route_table *t)
{
    if (!add_builtin(t, "", &route_default_ops, false))
        return false;
    t->default_exchange = route_exchange_find_bytes(t, AMQP_CSTR(""));
    t->default_exchange->is_default = true;
    return add_builtin(t, "amq.direct", &route_direct_ops, false) &&
           add_builtin(t, "amq.fanout", &route_fanout_ops, false) &&
           add_builtin(t, "amq.topic", &route_topic_ops, false) &&
           add_builtin(t, "amq.headers", &route_headers_ops, false) &&
           add_builtin(t, "amq.match", &route_headers_ops, false) &&
           add_builtin(t, "amq.rabbitmq.trace", &route_topic_ops, true);
}

route_table *route_table_new(const char *vhost, const route_hooks *hooks, void *ctx)
{
    route_table *t = calloc(1, sizeof *t);

    if (t == NULL)
        return NULL;
    if (hooks != NULL)
        t->hooks = *hooks;
    t->ctx = ctx;
    /* x-local-random's choices need no quality beyond spread; any seed
     * but 0 will do. */
    t->random = route_mix64((uint64_t)(uintptr_t)t ^ (uint64_t)time(NULL)) | 1;
    if ((t->vhost = strdup(vhost)) == NULL || !add_builtins(t)) {
        route_table_free(t);
        return NULL;
    }
    return t;
}

/* ---- declare ------------------------------------------------------------ */

static int create_checked(route_table *t, const route_exchange_spec *spec,
                          const route_type_ops *ops, route_exchange **out, amqp_error *err)
{
    bool delayed = ops == NULL;
    amqp_field ae;

    if (has_amq_prefix(spec->name))
        return amqp_fail(err, AMQP_ACCESS_REFUSED, AMQP_EXCHANGE_DECLARE,
                         "exchange name '%.*s' contains reserved prefix 'amq.*'",
                         (int)spec->name.len, (const char *)spec->name.ptr);
    if (amqp_table_get(spec->arguments, "alternate-exchange", &ae) && ae.type != 'S')
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_EXCHANGE_DECLARE,
                         "invalid type '%s' for arg 'alternate-exchange' in exchange '%.*s' in "
                         "vhost '%s'",
                         amqp_erl_type_name(ae.type), (int)spec->name.len,
                         (const char *)spec->name.ptr, t->vhost);
    if (delayed && (ops = route_delayed_base(t, spec, type_ops, err)) == NULL)
        return AMQP_ERROR;
    if (ops->declare != NULL && ops->declare(t, spec, err) != AMQP_OK)
        return AMQP_ERROR;
    if ((*out = exchange_new(t, spec->name, ops, spec)) == NULL)
        return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_EXCHANGE_DECLARE, "out of memory");
    (*out)->delayed = delayed;
    if (t->hooks.exchange_created != NULL)
        t->hooks.exchange_created(t->ctx, *out);
    return AMQP_OK;
}

static int inequivalent(route_table *t, const route_exchange *ex, const char *field,
                        const char *received, const char *current, amqp_error *err)
{
    return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_EXCHANGE_DECLARE,
                     "inequivalent arg '%s' for exchange '%.*s' in vhost '%s': received %s but "
                     "current is %s",
                     field, (int)ex->name_len, (const char *)ex->data, t->vhost, received,
                     current);
}

static int check_flag(route_table *t, const route_exchange *ex, const char *field, bool current,
                      bool received, amqp_error *err)
{
    if (current == received)
        return AMQP_OK;
    return inequivalent(t, ex, field, received ? "'true'" : "'false'",
                        current ? "'true'" : "'false'", err);
}

/* RabbitMQ's val/1: "none" for a missing (or void) value, the value quoted
 * when both sides have one, "the value 'v' of type 't'" when only one has. */
static const char *describe_arg(const amqp_field *f, bool with_type, char *buf, size_t cap)
{
    char value[160];

    if (f == NULL || (!with_type && f->type == 'V'))
        return "none";
    amqp_erl_value(f, value, sizeof value);
    if (with_type)
        snprintf(buf, cap, "the value '%s' of type '%s'", value, amqp_erl_type_name(f->type));
    else
        snprintf(buf, cap, "'%s'", value);
    return buf;
}

static char type_class(uint8_t tag)
{
    if (strchr("bBsuIilD", tag) != NULL)
        return 'I';
    if (tag == 'f' || tag == 'd')
        return 'F';
    if (tag == 'S' || tag == 'x')
        return 'S';
    return (char)tag;
}

/* rabbit_misc:assert_args_equivalence for the one argument exchanges
 * compare. The current value, when present, is always a longstr. */
static int check_alternate(route_table *t, const route_exchange *ex, amqp_bytes args,
                           amqp_error *err)
{
    amqp_field cur, req;
    bool has_cur = amqp_table_get(route_exchange_arguments(ex), "alternate-exchange", &cur);
    bool has_req = amqp_table_get(args, "alternate-exchange", &req);
    bool both = has_cur && has_req;
    char rbuf[200], cbuf[200];

    if (!has_cur && !has_req)
        return AMQP_OK;
    if (both && type_class(cur.type) == type_class(req.type) && amqp_field_equal(&cur, &req))
        return AMQP_OK;
    if (both && req.type == 'D') {
        /* RabbitMQ's val/1 takes {Before, After} for a {Type, Value} pair
         * and crashes formatting it: the client sees a bare 541. */
        amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_EXCHANGE_DECLARE, "x");
        if (err != NULL)
            snprintf(err->text, sizeof err->text, "INTERNAL_ERROR");
        return AMQP_ERROR;
    }
    return inequivalent(t, ex, "alternate-exchange",
                        describe_arg(has_req ? &req : NULL, !both, rbuf, sizeof rbuf),
                        describe_arg(has_cur ? &cur : NULL, !both, cbuf, sizeof cbuf), err);
}

/* RabbitMQ quotes the type atom, printed with ~p, which quotes it again
 * when it is not a bare atom: ''x-consistent-hash''. */
static const char *type_term(route_type type, char *buf, size_t cap)
{
    const char *name = route_type_name(type);
    bool bare = strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_@") == strlen(name);

    snprintf(buf, cap, bare ? "'%s'" : "''%s''", name);
    return buf;
}

static int check_equivalent(route_table *t, const route_exchange *ex,
                            const route_exchange_spec *spec, const route_type_ops *ops,
                            amqp_error *err)
{
    char received[32], current[32];
    route_type type = ops ? ops->type : ROUTE_DELAYED;

    /* a delayed exchange's x-delayed-type is not compared (the plugin
     * leaves equivalence to that type, which compares alternate-exchange) */
    if (type != route_exchange_type(ex))
        return inequivalent(t, ex, "type", type_term(type, received, sizeof received),
                            type_term(route_exchange_type(ex), current, sizeof current), err);
    if (check_flag(t, ex, "durable", ex->durable, spec->durable, err) != AMQP_OK ||
        check_flag(t, ex, "auto_delete", ex->auto_delete, spec->auto_delete, err) != AMQP_OK ||
        check_flag(t, ex, "internal", ex->internal, spec->internal, err) != AMQP_OK)
        return AMQP_ERROR;
    return check_alternate(t, ex, spec->arguments, err);
}

int route_exchange_declare(route_table *t, const route_exchange_spec *spec, route_exchange **out,
                           amqp_error *err)
{
    const route_type_ops *ops = NULL;
    route_exchange *ex;

    bool delayed = amqp_bytes_equal_cstr(spec->type, ROUTE_DELAYED_NAME);

    /* a delayed exchange's ops come from its x-delayed-type (create_checked) */
    if (!spec->passive && !delayed && (ops = type_ops(spec->type)) == NULL)
        return amqp_fail(err, AMQP_COMMAND_INVALID, AMQP_EXCHANGE_DECLARE,
                         "unknown exchange type '%.*s'", (int)spec->type.len,
                         (const char *)spec->type.ptr);
    if (spec->name.len == 0)
        return amqp_fail(err, AMQP_ACCESS_REFUSED, AMQP_EXCHANGE_DECLARE, DEFAULT_EXCHANGE_TEXT);
    ex = route_exchange_find_bytes(t, spec->name);
    if (spec->passive) {
        if (ex == NULL)
            return amqp_fail(err, AMQP_NOT_FOUND, AMQP_EXCHANGE_DECLARE,
                             "no exchange '%.*s' in vhost '%s'", (int)spec->name.len,
                             (const char *)spec->name.ptr, t->vhost);
    } else if (ex == NULL) {
        if (create_checked(t, spec, ops, &ex, err) != AMQP_OK)
            return AMQP_ERROR;
    } else if (check_equivalent(t, ex, spec, ops, err) != AMQP_OK) {
        return AMQP_ERROR;
    }
    if (out != NULL)
        *out = ex;
    return AMQP_OK;
}

/* ---- delete ------------------------------------------------------------- */

static void exchange_free(route_exchange *ex)
{
    assert(ex->bindings == NULL && ex->target.bindings == NULL);
    if (ex->table->hooks.exchange_freed != NULL)
        ex->table->hooks.exchange_freed(ex->table->ctx, ex);
    ex->ops->destroy(ex);
    free(ex->policy_ae);
    free(ex->policy);
    free(ex);
}

static void unlink_exchange(route_table *t, route_exchange *ex, route_exchange **dying)
{
    assert(!ex->dying && !ex->is_default);
    ex->dying = true;
    route_map_remove(&t->exchanges, ex->name_hash, ex);
    t->ex_version++;
    ex->next_dying = *dying;
    *dying = ex;
}

/* Removes the bindings to x; queues sources that become auto-deleted. */
static void unbind_destination(route_table *t, route_exchange *x, route_exchange **dying)
{
    while (x->target.bindings != NULL) {
        route_binding *b = x->target.bindings;
        route_exchange *src = b->source;

        route_binding_remove(t, b);
        if (src->auto_delete && src->nbindings == 0 && !src->dying && !src->is_default)
            unlink_exchange(t, src, dying);
    }
}

void route_exchange_remove(route_table *t, route_exchange *ex)
{
    route_exchange *dying = NULL;

    unlink_exchange(t, ex, &dying);
    while (dying != NULL) {
        route_exchange *x = dying;

        dying = x->next_dying;
        if (t->hooks.exchange_deleted != NULL)
            t->hooks.exchange_deleted(t->ctx, x);
        while (x->bindings != NULL)
            route_binding_remove(t, x->bindings);
        unbind_destination(t, x, &dying);
        exchange_free(x);
    }
}

void route_maybe_auto_delete(route_table *t, route_exchange *ex)
{
    if (ex->auto_delete && ex->nbindings == 0 && !ex->dying && !ex->is_default)
        route_exchange_remove(t, ex);
}

int route_exchange_delete(route_table *t, amqp_bytes name, bool if_unused, amqp_error *err)
{
    route_exchange *ex;

    if (name.len == 0)
        return amqp_fail(err, AMQP_ACCESS_REFUSED, AMQP_EXCHANGE_DELETE, DEFAULT_EXCHANGE_TEXT);
    if (has_amq_prefix(name))
        return amqp_fail(err, AMQP_ACCESS_REFUSED, AMQP_EXCHANGE_DELETE,
                         "deletion of system exchange '%.*s' in vhost '%s' not allowed",
                         (int)name.len, (const char *)name.ptr, t->vhost);
    if ((ex = route_exchange_find_bytes(t, name)) == NULL)
        return AMQP_OK;
    if (if_unused && ex->nbindings > 0)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_EXCHANGE_DELETE,
                         "exchange '%.*s' in vhost '%s' in use", (int)name.len,
                         (const char *)name.ptr, t->vhost);
    route_exchange_remove(t, ex);
    return AMQP_OK;
}

/* ---- free --------------------------------------------------------------- */

/* Bindings first (every one has a live source and destination), then the
 * exchanges. No hooks: the vhost is going away, not its exchanges. */
void route_table_free(route_table *t)
{
    route_map *m;
    size_t i;

    if (t == NULL)
        return;
    m = &t->exchanges;
    for (i = 0; m->slots && i <= m->mask; i++) {
        route_exchange *ex = m->slots[i].item;
        while (ex != NULL && ex->bindings != NULL)
            route_binding_remove(t, ex->bindings);
    }
    for (i = 0; m->slots && i <= m->mask; i++)
        if (m->slots[i].item != NULL)
            exchange_free(m->slots[i].item);
    assert(t->queues.count == 0 && t->bindings.count == 0);
    route_map_free(&t->exchanges);
    route_map_free(&t->queues);
    route_map_free(&t->bindings);
    free(t->result);
    free(t->work);
    free(t->words);
    free(t->headers);
    free(t->held);
    free(t->vhost);
    free(t);
}

void *route_exchange_user(const route_exchange *ex) { return ex->user; }
void route_exchange_set_user(route_exchange *ex, void *user) { ex->user = user; }
void *route_exchange_extra(const route_exchange *ex) { return ex->extra; }
void route_exchange_set_extra(route_exchange *ex, void *extra) { ex->extra = extra; }
