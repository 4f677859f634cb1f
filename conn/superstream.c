/* Super streams: create, delete and list the partitions of RabbitMQ 3.11+'s
 * partitioned streams (conn.h), by the rules of 3.13's rabbit_stream_manager
 * (create_super_stream, delete_super_stream, super_stream_partitions) and
 * rabbit_stream_utils (enforce_correct_name, sort_partitions). Texts are
 * RabbitMQ's; where it formats a list of names with ~ts the names run
 * together, as there. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"

#define PRINTABLE(b) (int)(b).len, (const char *)(b).ptr
#define NAME_MAX_LEN 255

const char *admin_super_reason(admin_super_status st)
{
    static const char *const names[] = {
        [ADMIN_SUPER_OK] = "ok",
        [ADMIN_SUPER_VALIDATION_FAILED] = "validation_failed",
        [ADMIN_SUPER_ALREADY_EXISTS] = "reference_already_exists",
        [ADMIN_SUPER_NOT_FOUND] = "stream_not_found",
        [ADMIN_SUPER_INTERNAL] = "internal_error",
    };
    return st <= ADMIN_SUPER_INTERNAL ? names[st] : "internal_error";
}

static admin_super_status fail(admin_super_error *err, admin_super_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static admin_super_status fail(admin_super_error *err, admin_super_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->text, sizeof err->text, fmt, ap);
    va_end(ap);
    err->status = st;
    return st;
}

/* ---- arguments ------------------------------------------------------------ */

static bool parse_long(amqp_bytes v, int64_t *out)
{
    char buf[32];
    if (v.len == 0 || v.len >= sizeof buf)
        return false;
    memcpy(buf, v.ptr, v.len);
    buf[v.len] = 0;
    char *end;
    errno = 0;
    long long n = strtoll(buf, &end, 10);
    if (*end || errno || (buf[0] != '-' && (buf[0] < '0' || buf[0] > '9')))
        return false;
    *out = n;
    return true;
}

bool admin_stream_arguments(const admin_stream_arg *args, size_t n, bool super, uint8_t *buf,
                            size_t cap, amqp_bytes *out)
{
    /* the protocol's keys, each with its x- argument and whether a number */
    static const struct { const char *key, *arg; bool number; } known[] = {
        {"max-length-bytes", "x-max-length-bytes", true},
        {"max-age", "x-max-age", false},
        {"stream-max-segment-size-bytes", "x-stream-max-segment-size-bytes", true},
        {"initial-cluster-size", "x-initial-cluster-size", true},
        {"queue-leader-locator", "x-queue-leader-locator", false},
        {"stream-filter-size-bytes", "x-stream-filter-size-bytes", true},
    };
    amqp_writer w;
    amqp_writer_init(&w, buf, cap);
    amqp_put_field_str(&w, "x-queue-type", AMQP_CSTR("stream"));
    bool locator = false;
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        const admin_stream_arg *a = NULL;
        for (size_t i = 0; i < n; i++) /* the last one given wins, as in a map */
            if (amqp_bytes_equal_cstr(args[i].key, known[k].key))
                a = &args[i];
        if (!a)
            continue;
        int64_t v = 0;
        if (known[k].number && !parse_long(a->value, &v))
            return false;
        /* validate_stream_queue_arguments */
        if ((k == 3 && v <= 0) || (k == 5 && (v < 16 || v > 255)))
            return false;
        if (k == 4) {
            if (!amqp_bytes_equal_cstr(a->value, "client-local") &&
                !amqp_bytes_equal_cstr(a->value, "balanced"))
                return false;
            locator = true;
        }
        if (known[k].number)
            amqp_put_field_long(&w, known[k].arg, v);
        else
            amqp_put_field_str(&w, known[k].arg, a->value);
    }
    if (super && !locator)
        amqp_put_field_str(&w, "x-queue-leader-locator", AMQP_CSTR("balanced"));
    *out = (amqp_bytes){buf, (uint32_t)w.len};
    return !w.overflow;
}

/* ---- names ---------------------------------------------------------------- */

/* enforce_correct_name: CR and LF removed; not empty, not amq.* */
static bool correct_name(const char *s)
{
    return s[0] && strncmp(s, "amq.", 4) != 0;
}

static size_t strip_cr_lf(amqp_bytes in, char *out, size_t cap)
{
    size_t n = 0;
    for (uint32_t i = 0; i < in.len && n + 1 < cap; i++)
        if (in.ptr[i] != '\r' && in.ptr[i] != '\n')
            out[n++] = (char)in.ptr[i];
    out[n] = 0;
    return n;
}

bool admin_super_stream_names(const admin_super_spec *spec, char (*names)[256], uint32_t n)
{
    char base[NAME_MAX_LEN + 2];
    if (spec->name.len > NAME_MAX_LEN || memchr(spec->name.ptr, 0, spec->name.len))
        return false; /* a NUL would cut the C strings the names are kept as */
    size_t len = strip_cr_lf(spec->name, base, sizeof base);
    for (uint32_t i = 0; i < n; i++) {
        if (spec->names) { /* given, as they are */
            amqp_bytes g = spec->names[i];
            if (g.len == 0 || g.len > NAME_MAX_LEN || memchr(g.ptr, 0, g.len))
                return false;
            memcpy(names[i], g.ptr, g.len);
            names[i][g.len] = 0;
            continue;
        }
        char idx[12];
        amqp_bytes key = spec->keys ? spec->keys[i]
                                    : (amqp_bytes){(const uint8_t *)idx,
                                                   (uint32_t)snprintf(idx, sizeof idx, "%u", i)};
        if (len + 1 + key.len > NAME_MAX_LEN || memchr(key.ptr, 0, key.len))
            return false;
        memcpy(names[i], base, len);
        names[i][len] = '-';
        memcpy(names[i] + len + 1, key.ptr, key.len);
        names[i][len + 1 + key.len] = 0;
    }
    return true;
}

/* The names run together (~ts of a list), bounded. */
static void joined(char (*names)[256], uint32_t from, uint32_t n, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = 0;
    for (uint32_t i = from; i < n && at + 1 < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s", names[i]);
}

static admin_super_status validate(vhost *v, const char *name, char (*names)[256], uint32_t n,
                                   admin_super_error *err)
{
    char list[400];
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = i + 1; j < n; j++)
            if (strcmp(names[i], names[j]) == 0) {
                joined(names, 0, n, list, sizeof list);
                return fail(err, ADMIN_SUPER_VALIDATION_FAILED, "Duplicate partition names found %s",
                            list);
            }
    for (uint32_t i = 0; i < n; i++)
        if (!correct_name(names[i])) {
            joined(names, i, n, list, sizeof list);
            return fail(err, ADMIN_SUPER_VALIDATION_FAILED, "%s is not a correct partition names",
                        list);
        }
    int64_t max = vhost_max_queues(v);
    if (max >= 0 && (int64_t)vhost_queue_count(v) + n > max)
        return fail(err, ADMIN_SUPER_VALIDATION_FAILED,
                    "Cannot declare super stream <<\"%s\">> with %u partition(s) because queue "
                    "limit %" PRId64 " in vhost '<<\"%s\">>' is reached",
                    name, n, max, vhost_name(v));
    if (!correct_name(name))
        return fail(err, ADMIN_SUPER_VALIDATION_FAILED,
                    "%s is not a correct name for a super stream", name);
    if (route_exchange_find(vhost_routes(v), AMQP_CSTR(name)))
        return fail(err, ADMIN_SUPER_ALREADY_EXISTS, "there is already an exchange named %s", name);
    for (uint32_t i = 0; i < n; i++)
        if (vhost_queue_find(v, AMQP_CSTR(names[i])))
            return fail(err, ADMIN_SUPER_ALREADY_EXISTS, "there is already a queue named %s",
                        names[i]);
    return ADMIN_SUPER_OK;
}

/* ---- create, delete ------------------------------------------------------- */

/* Removes what a failed creation made: streams [0, made), the exchange. */
static void roll_back(vhost *v, const char *name, char (*names)[256], uint32_t made)
{
    amqp_error ignored;
    for (uint32_t i = 0; i < made; i++)
        admin_queue_delete(v, AMQP_CSTR(names[i]), false, false, &ignored);
    admin_exchange_delete(v, AMQP_CSTR(name), false, &ignored);
}

static admin_super_status build(vhost *v, const char *name, const admin_super_spec *spec,
                                char (*names)[256], uint32_t n, amqp_bytes args,
                                admin_super_error *err)
{
    uint8_t xargs[64];
    amqp_writer w;
    amqp_writer_init(&w, xargs, sizeof xargs);
    amqp_put_field_bool(&w, "x-super-stream", true);
    route_exchange_spec ex = {.name = AMQP_CSTR(name), .type = AMQP_CSTR("direct"),
                              .durable = true, .arguments = {xargs, (uint32_t)w.len}};
    amqp_error e = {0};
    if (admin_exchange_declare(v, &ex, &e) != AMQP_OK)
        return fail(err, ADMIN_SUPER_VALIDATION_FAILED, "%s", "");
    for (uint32_t i = 0; i < n; i++) {
        queue_spec qs = {.name = AMQP_CSTR(names[i]), .durable = true, .arguments = args};
        queue *q;
        if (admin_queue_declare(v, &qs, &q, &e) != AMQP_OK) {
            roll_back(v, name, names, i);
            return fail(err, ADMIN_SUPER_VALIDATION_FAILED, "%s", ""); /* as do_create_stream */
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        char idx[12];
        snprintf(idx, sizeof idx, "%u", i);
        amqp_bytes key = spec->keys ? spec->keys[i] : AMQP_CSTR(idx);
        uint8_t order[64];
        amqp_writer_init(&w, order, sizeof order);
        amqp_put_field_long(&w, "x-stream-partition-order", i);
        if (admin_bind(v, AMQP_CSTR(name), true, AMQP_CSTR(names[i]), key,
                       (amqp_bytes){order, (uint32_t)w.len}, true, &e) != AMQP_OK) {
            roll_back(v, name, names, n);
            return fail(err, ADMIN_SUPER_INTERNAL, "%s", e.text);
        }
    }
    return ADMIN_SUPER_OK;
}

admin_super_status admin_super_stream_create(vhost *v, const admin_super_spec *spec,
                                             admin_super_error *err)
{
    uint32_t n = spec->keys ? spec->nkeys : spec->partitions;
    err->status = ADMIN_SUPER_OK;
    err->text[0] = 0;
    if (n == 0)
        return fail(err, ADMIN_SUPER_VALIDATION_FAILED,
                    "The partition number must be greater than 0");
    if (n > ADMIN_SUPER_PARTITIONS_MAX)
        return fail(err, ADMIN_SUPER_VALIDATION_FAILED, "The partition number must not exceed %d",
                    ADMIN_SUPER_PARTITIONS_MAX);
    char name[NAME_MAX_LEN + 2];
    if (spec->name.len > NAME_MAX_LEN)
        return fail(err, ADMIN_SUPER_VALIDATION_FAILED,
                    "%.*s is not a correct name for a super stream", PRINTABLE(spec->name));
    strip_cr_lf(spec->name, name, sizeof name);
    char (*names)[256] = malloc((size_t)n * sizeof *names);
    uint8_t *argbuf = malloc(4096);
    amqp_bytes args;
    admin_super_status st = ADMIN_SUPER_OK;
    amqp_error e;
    queue_args parsed;
    if (!names || !argbuf)
        st = fail(err, ADMIN_SUPER_INTERNAL, "out of memory");
    else if (!admin_super_stream_names(spec, names, n))
        st = fail(err, ADMIN_SUPER_VALIDATION_FAILED, "%s is not a correct partition names", name);
    else if ((st = validate(v, name, names, n, err)) != ADMIN_SUPER_OK)
        ;
    else if (!admin_stream_arguments(spec->args, spec->nargs, true, argbuf, 4096, &args) ||
             queue_args_parse(args, AMQP_CSTR(names[0]), vhost_name(v), &parsed, &e) != AMQP_OK)
        st = fail(err, ADMIN_SUPER_VALIDATION_FAILED, "%s", ""); /* checked before anything is made */
    else
        st = build(v, name, spec, names, n, args, err);
    free(names);
    free(argbuf);
    return st;
}

typedef struct partition_walk {
    const route_exchange *ex;
    admin_partition *out;
    size_t cap, n;
} partition_walk;

static int64_t order_of(amqp_bytes args)
{
    amqp_field f;
    int64_t v;
    if (amqp_table_get(args, "x-stream-partition-order", &f) && amqp_field_int(&f, &v))
        return v;
    return INT64_MAX;
}

static void add_partition(void *arg, const route_binding_view *b)
{
    partition_walk *pw = arg;
    queue *q = b->dest.queue;
    if (b->source != pw->ex || !q || !queue_is_stream(q))
        return;
    if (pw->n < pw->cap)
        pw->out[pw->n] = (admin_partition){q, b->key, order_of(b->args)};
    pw->n++;
}

static int by_order(const void *a, const void *b)
{
    const admin_partition *x = a, *y = b;
    if (x->order != y->order)
        return x->order < y->order ? -1 : 1;
    amqp_bytes nx = queue_name(x->stream), ny = queue_name(y->stream);
    int c = memcmp(nx.ptr, ny.ptr, nx.len < ny.len ? nx.len : ny.len);
    return c ? c : (int)nx.len - (int)ny.len;
}

long admin_super_stream_partitions(vhost *v, amqp_bytes name, admin_partition *out, size_t cap)
{
    route_exchange *ex = name.len ? route_exchange_find(vhost_routes(v), name) : NULL;
    if (!ex)
        return -1;
    partition_walk pw = {ex, out, cap, 0};
    route_foreach_binding(vhost_routes(v), add_partition, &pw);
    size_t got = pw.n < cap ? pw.n : cap;
    if (got > 1)
        qsort(out, got, sizeof *out, by_order);
    return (long)pw.n;
}

bool admin_is_super_stream(const route_exchange *ex)
{
    amqp_field f;
    return amqp_table_get(route_exchange_arguments(ex), "x-super-stream", &f) && f.type == 't' &&
           f.v.i;
}

admin_super_status admin_super_stream_delete(vhost *v, amqp_bytes name, admin_super_error *err)
{
    err->status = ADMIN_SUPER_OK;
    err->text[0] = 0;
    long n = admin_super_stream_partitions(v, name, NULL, 0);
    if (n < 0)
        return fail(err, ADMIN_SUPER_NOT_FOUND, "%s", "");
    admin_partition *parts = calloc(n ? (size_t)n : 1, sizeof *parts);
    char (*names)[256] = calloc(n ? (size_t)n : 1, sizeof *names);
    if (!parts || !names) {
        free(parts);
        free(names);
        return fail(err, ADMIN_SUPER_INTERNAL, "out of memory");
    }
    admin_super_stream_partitions(v, name, parts, (size_t)n);
    for (long i = 0; i < n; i++) { /* names kept: the bindings go with the exchange */
        amqp_bytes qn = queue_name(parts[i].stream);
        memcpy(names[i], qn.ptr, qn.len);
        names[i][qn.len] = 0;
    }
    amqp_error e;
    if (admin_exchange_delete(v, name, false, &e) != AMQP_OK)
        log_msg(LOG_WARNING, "super stream '%.*s' in vhost '%s': deleting its exchange: %s",
                PRINTABLE(name), vhost_name(v), e.text);
    for (long i = 0; i < n; i++) {
        queue *q = vhost_queue_find(v, AMQP_CSTR(names[i]));
        if (q && queue_is_stream(q) &&
            admin_queue_delete(v, AMQP_CSTR(names[i]), false, false, &e) != AMQP_OK)
            log_msg(LOG_WARNING, "super stream '%.*s' in vhost '%s': deleting partition %s: %s",
                    PRINTABLE(name), vhost_name(v), names[i], e.text);
    }
    free(parts);
    free(names);
    return ADMIN_SUPER_OK;
}
