/* Keys, transactions and lease grants: each builds the gateway's JSON
 * request and queues it (client.c). Zero-valued fields are left out, as
 * the gateway does; int64s are sent as strings. */
#include <stdio.h>

#include "etcd_int.h"

static int set_bytes(json_t *o, const char *name, const void *p, size_t n)
{
    return json_object_set_new(o, name, codec_b64(p ? p : "", n));
}

static int set_int(json_t *o, const char *name, int64_t v)
{
    char s[24];
    snprintf(s, sizeof(s), "%lld", (long long)v);
    return v ? json_object_set_new(o, name, json_string(s)) : 0;
}

static json_t *range_req(const void *key, size_t key_len, const etcd_get_opts *o)
{
    json_t *j = json_object();
    int bad = !j || set_bytes(j, "key", key, key_len) < 0;
    if (!bad && o) {
        if (o->prefix)
            bad |= json_object_set_new(j, "range_end", codec_prefix_end(key, key_len)) < 0;
        bad |= set_int(j, "limit", o->limit) < 0 || set_int(j, "revision", o->revision) < 0 ||
               set_int(j, "max_create_revision", o->max_create_revision) < 0;
        if (o->sort_by_create)
            bad |= json_object_set_new(j, "sort_order", json_string("ASCEND")) < 0 ||
                   json_object_set_new(j, "sort_target", json_string("CREATE")) < 0;
    }
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static json_t *put_req(const void *key, size_t key_len, const void *value, size_t value_len,
                       int64_t lease)
{
    json_t *j = json_object();
    if (!j || set_bytes(j, "key", key, key_len) < 0 || set_bytes(j, "value", value, value_len) < 0 ||
        set_int(j, "lease", lease) < 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static json_t *delete_req(const void *key, size_t key_len, bool prefix)
{
    json_t *j = json_object();
    if (!j || set_bytes(j, "key", key, key_len) < 0 ||
        (prefix && json_object_set_new(j, "range_end", codec_prefix_end(key, key_len)) < 0)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

etcd_req *etcd_get(etcd_client *c, const void *key, size_t key_len, const etcd_get_opts *opts,
                   etcd_cb cb, void *arg)
{
    return etcd_request(c, "/v3/kv/range", range_req(key, key_len, opts), cb, arg);
}

etcd_req *etcd_put(etcd_client *c, const void *key, size_t key_len, const void *value,
                   size_t value_len, int64_t lease, etcd_cb cb, void *arg)
{
    return etcd_request(c, "/v3/kv/put", put_req(key, key_len, value, value_len, lease), cb, arg);
}

etcd_req *etcd_delete(etcd_client *c, const void *key, size_t key_len, bool prefix, etcd_cb cb,
                      void *arg)
{
    return etcd_request(c, "/v3/kv/deleterange", delete_req(key, key_len, prefix), cb, arg);
}

static json_t *cmp_json(const etcd_cmp *m)
{
    static const char *targets[] = {"CREATE", "MOD", "VERSION", "VALUE"};
    static const char *fields[] = {"create_revision", "mod_revision", "version", "value"};
    static const char *ops[] = {"EQUAL", "NOT_EQUAL", "GREATER", "LESS"};
    if ((unsigned)m->target > ETCD_CMP_VALUE || (unsigned)m->op > ETCD_LESS)
        return NULL;
    json_t *j = json_object();
    int bad = !j || set_bytes(j, "key", m->key, m->key_len) < 0 ||
              json_object_set_new(j, "target", json_string(targets[m->target])) < 0 ||
              json_object_set_new(j, "result", json_string(ops[m->op])) < 0;
    if (m->target == ETCD_CMP_VALUE)
        bad = bad || set_bytes(j, fields[m->target], m->value, m->value_len) < 0;
    else /* "0" explicitly: a zero compare is the point of CREATE == 0 */
        bad = bad || json_object_set_new(j, fields[m->target],
                                         json_integer((json_int_t)m->number)) < 0;
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static json_t *op_json(const etcd_op *o)
{
    json_t *inner = NULL;
    const char *name = NULL;
    switch (o->type) {
    case ETCD_OP_GET: inner = range_req(o->key, o->key_len, NULL); name = "request_range"; break;
    case ETCD_OP_PUT:
        inner = put_req(o->key, o->key_len, o->value, o->value_len, o->lease);
        name = "request_put";
        break;
    case ETCD_OP_DELETE:
        inner = delete_req(o->key, o->key_len, false);
        name = "request_delete_range";
        break;
    }
    return inner ? json_pack("{so}", name, inner) : NULL;
}

static int add_all(json_t *arr, const void *items, size_t n, size_t size, json_t *(*fn)(const void *))
{
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(arr, fn((const char *)items + i * size)) < 0)
            return -1;
    return 0;
}

static json_t *cmp_any(const void *p) { return cmp_json(p); }
static json_t *op_any(const void *p) { return op_json(p); }

etcd_req *etcd_txn(etcd_client *c, const etcd_cmp *cmps, size_t n_cmps, const etcd_op *then,
                   size_t n_then, const etcd_op *otherwise, size_t n_otherwise, etcd_cb cb,
                   void *arg)
{
    json_t *j = json_pack("{s[]s[]s[]}", "compare", "success", "failure");
    if (j && (add_all(json_object_get(j, "compare"), cmps, n_cmps, sizeof(*cmps), cmp_any) < 0 ||
              add_all(json_object_get(j, "success"), then, n_then, sizeof(*then), op_any) < 0 ||
              add_all(json_object_get(j, "failure"), otherwise, n_otherwise, sizeof(*otherwise),
                      op_any) < 0)) {
        json_decref(j);
        j = NULL;
    }
    return etcd_request(c, "/v3/kv/txn", j, cb, arg);
}

etcd_req *etcd_cas(etcd_client *c, const void *key, size_t key_len, int64_t expected_mod,
                   const void *value, size_t value_len, int64_t lease, etcd_cb cb, void *arg)
{
    etcd_cmp cmp = {.target = expected_mod ? ETCD_CMP_MOD : ETCD_CMP_CREATE, .op = ETCD_EQUAL,
                    .key = key, .key_len = key_len, .number = expected_mod};
    etcd_op put = {.type = ETCD_OP_PUT, .key = key, .key_len = key_len, .value = value,
                   .value_len = value_len, .lease = lease};
    etcd_op get = {.type = ETCD_OP_GET, .key = key, .key_len = key_len};
    return etcd_txn(c, &cmp, 1, &put, 1, &get, 1, cb, arg);
}

etcd_req *etcd_lease_grant(etcd_client *c, int64_t ttl_s, etcd_cb cb, void *arg)
{
    json_t *j = json_object();
    if (j && (ttl_s <= 0 || set_int(j, "TTL", ttl_s) < 0)) {
        json_decref(j);
        j = NULL;
    }
    return etcd_request(c, "/v3/lease/grant", j, cb, arg);
}

etcd_req *etcd_lease_revoke(etcd_client *c, int64_t lease_id, etcd_cb cb, void *arg)
{
    json_t *j = json_object();
    if (j && set_int(j, "ID", lease_id) < 0) {
        json_decref(j);
        j = NULL;
    }
    return etcd_request(c, "/v3/lease/revoke", j, cb, arg);
}
