/* Runtime parameters, as RabbitMQ's rabbit_runtime_parameters keeps them:
 * per vhost, (component, name) -> value -- the shovels and federation
 * upstreams Warren keeps, which their links read -- and the
 * server's global ones, name -> value (cluster_name, internal_cluster_id).
 * A vhost's limits are one of its parameters (vhost_limits.c keeps their
 * numbers). Operator policies, which RabbitMQ also keeps as parameters, are the
 * policy engine's (policy.c); the management API and definitions show
 * them as parameters.
 *
 * The broker knows no JSON: a value is the JSON text the management plane
 * checked, kept and handed back as it is.
 *
 * A set is an array sorted by (component, name), so a lookup is a binary
 * search and a listing comes in that order; a global set has component ""
 * throughout. Each entry is one allocation holding its three strings.
 * Every put and delete writes the metadata store first (a vhost's rows
 * carry its name, a global one none) and changes memory only once the
 * store took it; a set whose vhost is being freed writes nothing (the
 * store drops the vhost's rows itself).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "queue.h"

typedef struct param {
    const char *component, *name, *value; /* point into text */
    char text[];
} param;

struct param_set {
    server *srv;
    vhost *v; /* NULL: the server's global parameters */
    param **items;
    size_t n, cap;
};

param_set *param_set_new(server *s, vhost *v)
{
    param_set *ps = calloc(1, sizeof *ps);
    if (ps)
        *ps = (param_set){.srv = s, .v = v};
    return ps;
}

void param_set_free(param_set *ps)
{
    if (!ps)
        return;
    for (size_t i = 0; i < ps->n; i++)
        free(ps->items[i]);
    free(ps->items);
    free(ps);
}

size_t param_count(const param_set *ps) { return ps->n; }

static int compare(const char *component, const char *name, const param *p)
{
    int c = strcmp(component, p->component);
    return c ? c : strcmp(name, p->name);
}

/* The index of (component, name), or where it would go; *found says which. */
static size_t slot(const param_set *ps, const char *component, const char *name, bool *found)
{
    size_t lo = 0, hi = ps->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = compare(component, name, ps->items[mid]);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    *found = false;
    return lo;
}

static param *param_new(const char *component, const char *name, const char *value)
{
    size_t lc = strlen(component) + 1, ln = strlen(name) + 1, lv = strlen(value) + 1;
    param *p = malloc(sizeof *p + lc + ln + lv);
    if (!p)
        return NULL;
    memcpy(p->text, component, lc);
    memcpy(p->text + lc, name, ln);
    memcpy(p->text + lc + ln, value, lv);
    p->component = p->text;
    p->name = p->text + lc;
    p->value = p->text + lc + ln;
    return p;
}

static const char *component_of(const param_set *ps, const char *component)
{
    return ps->v && component ? component : "";
}

/* The store, or NULL when nothing is to be written (a vhost being freed). */
static meta *store_of(const param_set *ps)
{
    return ps->v && vhost_closing(ps->v) ? NULL : server_meta(ps->srv);
}

static meta_parameter row_of(const param_set *ps, const param *p)
{
    return (meta_parameter){.vhost = ps->v ? vhost_name(ps->v) : NULL,
                            .component = ps->v ? p->component : NULL,
                            .name = p->name,
                            .value = p->value};
}

/* Room for one more entry, so that an insert after a store write cannot
 * fail; false on out-of-memory. */
static bool reserve(param_set *ps)
{
    if (ps->n < ps->cap)
        return true;
    size_t cap = ps->cap ? ps->cap * 2 : 8;
    param **grown = realloc(ps->items, cap * sizeof *grown);
    if (!grown)
        return false;
    ps->items = grown;
    ps->cap = cap;
    return true;
}

/* A vhost keeps its limits as numbers (vhost_limits.c): tell it when
 * their parameter changes. */
static void limits_changed(param_set *ps, const char *component, const char *name,
                           const char *value)
{
    if (ps->v && strcmp(component, VHOST_LIMITS_COMPONENT) == 0 &&
        strcmp(name, VHOST_LIMITS_NAME) == 0)
        vhost_limits_changed(ps->v, value);
}

/* Adds p, or replaces the entry of its (component, name); room reserved. */
static void insert(param_set *ps, param *p, bool *created)
{
    bool found;
    size_t i = slot(ps, p->component, p->name, &found);
    if (found) {
        free(ps->items[i]);
    } else {
        memmove(ps->items + i + 1, ps->items + i, (ps->n - i) * sizeof *ps->items);
        ps->n++;
    }
    ps->items[i] = p;
    if (created)
        *created = !found;
    limits_changed(ps, p->component, p->name, p->value);
}

bool param_put(param_set *ps, const param_spec *spec, bool *created)
{
    param *p = param_new(component_of(ps, spec->component), spec->name, spec->value);
    if (!p || !reserve(ps)) {
        free(p);
        log_msg(LOG_ERROR, "out of memory setting parameter '%s'", spec->name);
        return false;
    }
    meta *m = store_of(ps);
    meta_parameter row = row_of(ps, p);
    if (m && !meta_put_parameter(m, &row)) {
        free(p);
        return false;
    }
    insert(ps, p, created);
    if (ps->v)
        log_msg(LOG_INFO, "set runtime parameter '%s' of component '%s' in vhost '%s'", p->name,
                p->component, vhost_name(ps->v));
    else
        log_msg(LOG_INFO, "set global runtime parameter '%s'", p->name);
    return true;
}

bool param_delete(param_set *ps, const char *component, const char *name)
{
    bool found;
    size_t i = slot(ps, component_of(ps, component), name, &found);
    meta *m = store_of(ps);
    if (!found)
        return false;
    meta_parameter row = row_of(ps, ps->items[i]);
    if (m && !meta_delete_parameter(m, row.vhost, row.component, row.name))
        return false;
    limits_changed(ps, ps->items[i]->component, ps->items[i]->name, NULL);
    free(ps->items[i]);
    memmove(ps->items + i, ps->items + i + 1, (ps->n - i - 1) * sizeof *ps->items);
    ps->n--;
    return true;
}

static param_spec spec_of(const param *p)
{
    return (param_spec){.component = p->component, .name = p->name, .value = p->value};
}

bool param_get(const param_set *ps, const char *component, const char *name, param_spec *out)
{
    bool found;
    size_t i = slot(ps, component_of(ps, component), name, &found);
    if (found)
        *out = spec_of(ps->items[i]);
    return found;
}

void param_foreach(const param_set *ps, const char *component,
                   void (*fn)(void *arg, const param_spec *p), void *arg)
{
    for (size_t i = 0; i < ps->n; i++)
        if (!component || strcmp(component, ps->items[i]->component) == 0) {
            param_spec s = spec_of(ps->items[i]);
            fn(arg, &s);
        }
}

bool param_restore(param_set *ps, const meta_parameter *row)
{
    param *p = param_new(component_of(ps, row->component), row->name, row->value);
    if (p && reserve(ps)) {
        insert(ps, p, NULL);
        return true;
    }
    free(p);
    log_msg(LOG_ERROR, "parameter '%s' not restored: out of memory", row->name);
    return false;
}

/* ---- the cluster's id -------------------------------------------------------- */

#define CLUSTER_ID_PARAM "internal_cluster_id"

/* RabbitMQ's form: "rabbitmq-cluster-id-" and 16 random bytes in
 * unpadded base64url, as a JSON string. */
static bool new_cluster_id(char *out, size_t cap)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t raw[18] = {0}; /* 16 random bytes, padded to whole 3-byte groups */
    char id[25];
    if (getrandom(raw, 16, 0) != 16)
        return false;
    for (int g = 0; g < 6; g++) {
        uint32_t v = (uint32_t)raw[3 * g] << 16 | (uint32_t)raw[3 * g + 1] << 8 | raw[3 * g + 2];
        for (int k = 0; k < 4; k++)
            id[4 * g + k] = b64[(v >> (18 - 6 * k)) & 63];
    }
    id[22] = 0; /* 16 bytes are 22 characters */
    return snprintf(out, cap, "\"rabbitmq-cluster-id-%s\"", id) < (int)cap;
}

bool param_ensure_cluster_id(server *s)
{
    param_spec have;
    char value[64];
    if (param_get(server_params(s), NULL, CLUSTER_ID_PARAM, &have))
        return true;
    if (!new_cluster_id(value, sizeof value)) {
        log_msg(LOG_ERROR, "cannot draw random bytes for the cluster id");
        return false;
    }
    param_spec id = {.name = CLUSTER_ID_PARAM, .value = value};
    return param_put(server_params(s), &id, NULL);
}
