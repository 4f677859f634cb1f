/* Super streams over HTTP (conn/superstream.c does the work):
 *
 *   PUT /api/stream/super-streams/{vhost}/{name}: RabbitMQ 4's
 *       rabbit_stream_super_stream_mgmt: body {"partitions": N} or
 *       {"binding-keys": "a,b"} (also Warren's {"binding_keys": ["a","b"]}),
 *       "arguments": {"max-age": "7D", ...} (the stream protocol's keys);
 *       204, or 400 with its texts, or rabbit_stream_manager's reason as
 *       Erlang prints it ({reference_already_exists,"..."});
 *   DELETE the same (Warren's; 204, 404 when NAME is not a super stream);
 *   GET /api/stream/super-streams[/{vhost}[/{name}]] (Warren's): each
 *       super stream with its partitions in order and their binding keys.
 *
 * Permissions as RabbitMQ's stream manager checks them: configure on the
 * exchange and on every stream, read on the exchange, write on every
 * stream (401 "Access refused.").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt_int.h"

#define ARGS_MAX 16

/* ---- the body --------------------------------------------------------------- */

typedef struct super_body {
    admin_super_spec spec;
    amqp_bytes keys[ADMIN_SUPER_PARTITIONS_MAX];
    admin_stream_arg args[ARGS_MAX];
    char values[ARGS_MAX][32]; /* numbers given as JSON numbers, as text */
} super_body;

static bool bad(mgmt_req *r, const char *text)
{
    mgmt_error(r, 400, "bad_request", text);
    return false;
}

/* "a, b,,c" -> a, b, c (trimmed, empty ones dropped: RabbitMQ 4's binding_keys) */
static bool split_keys(mgmt_req *r, const char *s, super_body *b)
{
    b->spec.nkeys = 0;
    for (const char *p = s; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *k = p;
        while (len && (*k == ' ' || *k == '\t'))
            k++, len--;
        while (len && (k[len - 1] == ' ' || k[len - 1] == '\t'))
            len--;
        if (len) {
            if (b->spec.nkeys == ADMIN_SUPER_PARTITIONS_MAX)
                return bad(r, "The number of binding keys must not exceed 1000");
            b->keys[b->spec.nkeys++] = (amqp_bytes){(const uint8_t *)k, (uint32_t)len};
        }
        p = end ? end + 1 : p + strlen(p);
    }
    return b->spec.nkeys ? true : bad(r, "The number of binding keys must be greater than 0");
}

static bool key_list(mgmt_req *r, json_t *list, super_body *b)
{
    size_t i;
    json_t *k;
    if (json_array_size(list) > ADMIN_SUPER_PARTITIONS_MAX)
        return bad(r, "The number of binding keys must not exceed 1000");
    json_array_foreach(list, i, k) {
        if (!json_is_string(k) || json_string_length(k) == 0)
            return bad(r, "binding_keys must be non-empty strings");
        b->keys[i] = (amqp_bytes){(const uint8_t *)json_string_value(k),
                                  (uint32_t)json_string_length(k)};
    }
    b->spec.nkeys = (uint32_t)i;
    return i ? true : bad(r, "The number of binding keys must be greater than 0");
}

static bool partitions(mgmt_req *r, json_t *p, super_body *b)
{
    long long n;
    char *end = NULL;
    if (json_is_integer(p))
        n = json_integer_value(p);
    else if (json_is_string(p) && json_string_length(p))
        n = strtoll(json_string_value(p), &end, 10);
    else
        return bad(r, "The partitions must be a number");
    if (end && *end)
        return bad(r, "The partitions must be a number");
    if (n < 1)
        return bad(r, "The partition number must be greater than 0");
    if (n > ADMIN_SUPER_PARTITIONS_MAX)
        return bad(r, "The partition number must not exceed 1000");
    b->spec.partitions = (uint32_t)n;
    return true;
}

static bool arguments(mgmt_req *r, json_t *args, super_body *b)
{
    const char *key;
    json_t *v;
    if (args && !json_is_object(args))
        return bad(r, "arguments must be an object");
    json_object_foreach(args, key, v) {
        if (b->spec.nargs == ARGS_MAX)
            return bad(r, "too many arguments");
        admin_stream_arg *a = &b->args[b->spec.nargs];
        a->key = AMQP_CSTR(key);
        if (json_is_string(v))
            a->value = (amqp_bytes){(const uint8_t *)json_string_value(v),
                                    (uint32_t)json_string_length(v)};
        else if (json_is_integer(v)) {
            char *text = b->values[b->spec.nargs];
            int len = snprintf(text, sizeof b->values[0], "%lld", (long long)json_integer_value(v));
            a->value = (amqp_bytes){(const uint8_t *)text, (uint32_t)len};
        } else
            return bad(r, "argument values must be strings or integers");
        b->spec.nargs++;
    }
    return true;
}

/* rabbit_stream_super_stream_mgmt's checks, in its order. */
static bool parse_body(mgmt_req *r, json_t *body, super_body *b)
{
    json_t *p = json_object_get(body, "partitions");
    json_t *keys = json_object_get(body, "binding-keys");
    json_t *list = json_object_get(body, "binding_keys");
    if (!p && !keys && !list)
        return bad(r, "Must specify partitions or binding keys");
    if ((p != NULL) + (keys != NULL) + (list != NULL) > 1)
        return bad(r, "Specify partitions or binding keys, not both");
    b->spec.name = r->cap[1];
    b->spec.args = b->args;
    b->spec.keys = p ? NULL : b->keys;
    if (keys && !json_is_string(keys))
        return bad(r, "binding-keys must be a string");
    return (p ? partitions(r, p, b) : keys ? split_keys(r, json_string_value(keys), b)
                                           : key_list(r, list, b)) &&
           arguments(r, json_object_get(body, "arguments"), b);
}

/* ---- permissions -------------------------------------------------------------- */

static bool permitted(mgmt_req *r, vhost *v, char (*names)[256], uint32_t n)
{
    if (!mgmt_permission_check(r, v, ACCESS_CONFIGURE, r->cap[1]))
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (!mgmt_permission_check(r, v, ACCESS_CONFIGURE, AMQP_CSTR(names[i])))
            return false;
    if (!mgmt_permission_check(r, v, ACCESS_READ, r->cap[1]))
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (!mgmt_permission_check(r, v, ACCESS_WRITE, AMQP_CSTR(names[i])))
            return false;
    return true;
}

/* rabbit_mgmt_util:bad_request(io_lib:format("~p", [Reason])): a
 * {reason, "text"} tuple, the string's quotes and backslashes escaped. */
static void failed(mgmt_req *r, const admin_super_error *e)
{
    char text[2 * sizeof e->text];
    size_t n = 0;
    for (const char *p = e->text; *p; p++) {
        if (*p == '"' || *p == '\\')
            text[n++] = '\\';
        text[n++] = *p;
    }
    text[n] = 0;
    if (n)
        mgmt_errorf(r, 400, "bad_request", "{%s,\"%s\"}", admin_super_reason(e->status), text);
    else
        mgmt_error(r, 400, "bad_request", admin_super_reason(e->status));
}

static void put_super_stream(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    json_t *body = v ? mgmt_body(r) : NULL;
    super_body *b = body ? mgmt_scratch(r, sizeof *b) : NULL;
    if (!b)
        return;
    memset(b, 0, sizeof *b);
    if (!parse_body(r, body, b))
        return;
    uint32_t n = b->spec.keys ? b->spec.nkeys : b->spec.partitions;
    char (*names)[256] = mgmt_scratch(r, (size_t)n * sizeof *names);
    if (!names)
        return;
    admin_super_error e = {0};
    if (!admin_super_stream_names(&b->spec, names, n)) {
        e.status = ADMIN_SUPER_VALIDATION_FAILED;
        snprintf(e.text, sizeof e.text, "%.*s is not a correct partition names",
                 (int)r->cap[1].len, (const char *)r->cap[1].ptr);
        failed(r, &e);
        return;
    }
    if (!permitted(r, v, names, n))
        return;
    if (admin_super_stream_create(v, &b->spec, &e) != ADMIN_SUPER_OK)
        failed(r, &e);
    else
        mgmt_send_empty(r, 204, NULL);
}

/* The super stream's exchange, or NULL with 404 sent. */
static route_exchange *super_exchange(mgmt_req *r, vhost *v, amqp_bytes name)
{
    route_exchange *ex = name.len ? route_exchange_find(vhost_routes(v), name) : NULL;
    if (!ex || !admin_is_super_stream(ex)) {
        mgmt_not_found(r);
        return NULL;
    }
    return ex;
}

/* Its partitions in order, malloc'd into *out; -1 when out of memory or
 * gone. */
static long partitions_of(vhost *v, amqp_bytes name, admin_partition **out)
{
    long n = admin_super_stream_partitions(v, name, NULL, 0);
    *out = n >= 0 ? malloc((size_t)(n > 0 ? n : 1) * sizeof **out) : NULL;
    return *out ? admin_super_stream_partitions(v, name, *out, (size_t)n) : -1;
}

static void delete_super_stream(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    admin_partition *parts;
    if (!v || !super_exchange(r, v, r->cap[1]))
        return;
    long n = partitions_of(v, r->cap[1], &parts);
    char (*names)[256] = n >= 0 ? mgmt_scratch(r, (size_t)(n ? n : 1) * sizeof *names) : NULL;
    for (long i = 0; names && i < n; i++) {
        amqp_bytes qn = queue_name(parts[i].stream);
        snprintf(names[i], sizeof names[i], "%.*s", (int)qn.len, (const char *)qn.ptr);
    }
    free(parts);
    if (n < 0)
        mgmt_error(r, 500, "internal_error", "out of memory");
    if (!names || !permitted(r, v, names, (uint32_t)n))
        return;
    admin_super_error e;
    if (admin_super_stream_delete(v, r->cap[1], &e) != ADMIN_SUPER_OK)
        failed(r, &e);
    else
        mgmt_send_empty(r, 204, NULL);
}

/* ---- listing ------------------------------------------------------------------ */

static bool render(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    vhost *v = server_vhost(r->s, AMQP_CSTR(it->vhost));
    route_exchange *ex = v ? route_exchange_find(vhost_routes(v), it->name) : NULL;
    admin_partition *parts;
    if (!ex || !admin_is_super_stream(ex))
        return false;
    long n = partitions_of(v, it->name, &parts);
    if (n < 0)
        return false;
    mgmt_json_obj(w);
    mgmt_json_key(w, "arguments");
    mgmt_json_table(w, route_exchange_arguments(ex));
    mgmt_json_key(w, "binding_keys");
    mgmt_json_arr(w);
    for (long i = 0; i < n; i++)
        mgmt_json_bytes(w, parts[i].key);
    mgmt_json_end_arr(w);
    mgmt_json_kbytes(w, "name", it->name);
    mgmt_json_key(w, "partitions");
    mgmt_json_arr(w);
    for (long i = 0; i < n; i++)
        mgmt_json_bytes(w, queue_name(parts[i].stream));
    mgmt_json_end_arr(w);
    mgmt_json_kstr(w, "vhost", it->vhost);
    mgmt_json_end_obj(w);
    free(parts);
    return true;
}

typedef struct collect {
    mgmt_list *l;
    const char *vhost;
} collect;

static void add_super(void *arg, route_exchange *ex)
{
    collect *c = arg;
    if (admin_is_super_stream(ex))
        mgmt_list_add(c->l, c->vhost, route_exchange_name(ex), 0, 0, false);
}

static void add_supers(mgmt_req *r, mgmt_list *l, vhost *v)
{
    (void)r;
    collect c = {l, vhost_name(v)};
    route_foreach_exchange(vhost_routes(v), add_super, &c);
}

static void list(mgmt_req *r, vhost *only) { mgmt_vhosts_list_send(r, only, add_supers, render); }

static void get_all(mgmt_req *r) { list(r, NULL); }

static void get_vhost(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (v)
        list(r, v);
}

static void get_one(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (!v || !super_exchange(r, v, r->cap[1]))
        return;
    mgmt_list_item it = {.vhost = vhost_name(v), .name = r->cap[1]};
    mgmt_object_send(r, render, &it);
}

const mgmt_route mgmt_super_stream_routes[] = {
    {HTTP_GET, "/api/stream/super-streams", TAG_MANAGEMENT, get_all},
    {HTTP_GET, "/api/stream/super-streams/{}", TAG_MANAGEMENT, get_vhost},
    {HTTP_GET, "/api/stream/super-streams/{}/{}", TAG_MANAGEMENT, get_one},
    {HTTP_PUT, "/api/stream/super-streams/{}/{}", TAG_MANAGEMENT, put_super_stream},
    {HTTP_DELETE, "/api/stream/super-streams/{}/{}", TAG_MANAGEMENT, delete_super_stream},
    {0},
};
