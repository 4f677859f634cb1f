/* Reading one item of a definitions document into the broker's spec
 * structs, checking the JSON types of its fields. Validation and
 * application read items the same way; the structs point into the
 * document (and into c->table for arguments), valid while both live. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "defs_int.h"

bool defs_fail(defs_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err->reason, sizeof c->err->reason, fmt, ap);
    va_end(ap);
    return false;
}

const json_t *defs_section(const defs_ctx *c, const char *key)
{
    return json_object_get(c->doc, key);
}

const char *defs_str(const json_t *item, const char *key)
{
    return json_string_value(json_object_get(item, key));
}

const char *defs_vhost_of(const defs_ctx *c, const json_t *item)
{
    return c->only ? vhost_name(c->only) : defs_str(item, "vhost");
}

const char *defs_key(char *buf, size_t cap, const char *vh, const char *name)
{
    snprintf(buf, cap, "%s\x1f%s", vh, name);
    return buf;
}

bool defs_vhost_known(const defs_ctx *c, const char *name)
{
    return server_vhost(c->s, AMQP_CSTR(name)) || json_object_get(c->vhosts, name);
}

/* A boolean field; absent or null gives dflt. */
static bool read_bool(defs_ctx *c, const json_t *it, const char *key, bool dflt, bool *out,
                      const char *what)
{
    const json_t *v = json_object_get(it, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return true;
    }
    if (!json_is_boolean(v))
        return defs_fail(c, "%s: %s must be true or false", what, key);
    *out = json_is_true(v);
    return true;
}

/* A string field; absent gives dflt (NULL: required). */
static bool read_str(defs_ctx *c, const json_t *it, const char *key, const char *dflt,
                     const char **out, const char *what)
{
    const json_t *v = json_object_get(it, key);
    if (!v && dflt) {
        *out = dflt;
        return true;
    }
    if (!json_is_string(v))
        return defs_fail(c, "%s: %s must be a string", what, key);
    *out = json_string_value(v);
    return true;
}

/* "users[2]" for an item without a usable name. */
static const char *position(char *buf, size_t cap, const char *section, size_t i)
{
    snprintf(buf, cap, "%s[%zu]", section, i);
    return buf;
}

/* The item must be an object with a string "name" (or other key). */
static bool named(defs_ctx *c, const json_t *it, const char *section, size_t i, const char *key,
                  const char **name)
{
    char where[64];
    if (!json_is_object(it))
        return defs_fail(c, "%s: must be an object", position(where, sizeof where, section, i));
    if (!json_is_string(json_object_get(it, key)))
        return defs_fail(c, "%s: %s must be a string", position(where, sizeof where, section, i),
                         key);
    *name = json_string_value(json_object_get(it, key));
    /* AMQP names are short strings; the store and messages rely on it */
    if (json_string_length(json_object_get(it, key)) > 255)
        return defs_fail(c, "%s: %s '%.40s...' is longer than 255 bytes",
                         position(where, sizeof where, section, i), key, *name);
    return true;
}

static bool item_vhost(defs_ctx *c, const json_t *it, const char *what, const char **vh)
{
    *vh = defs_vhost_of(c, it);
    if (!*vh)
        return defs_fail(c, "%s: vhost must be a string", what);
    return true;
}

/* Tags as an array of strings or a comma-separated string. */
static bool read_tags(defs_ctx *c, const json_t *v, char *out, size_t cap, const char *what)
{
    out[0] = 0;
    if (!v || json_is_null(v))
        return true;
    if (json_is_string(v)) {
        if (json_string_length(v) >= cap)
            return defs_fail(c, "%s: tags too long", what);
        snprintf(out, cap, "%s", json_string_value(v));
        return true;
    }
    if (!json_is_array(v))
        return defs_fail(c, "%s: tags must be an array of strings", what);
    size_t i, n = 0;
    json_t *t;
    json_array_foreach(v, i, t) {
        if (!json_is_string(t))
            return defs_fail(c, "%s: tags must be an array of strings", what);
        int k = snprintf(out + n, cap - n, "%s%s", i ? "," : "", json_string_value(t));
        if (k < 0 || (size_t)k >= cap - n)
            return defs_fail(c, "%s: tags too long", what);
        n += (size_t)k;
    }
    return true;
}

/* A user's "limits" (RabbitMQ 3.10 exports them with each user), checked
 * as the API checks them: the ones given are set, the others kept, as
 * RabbitMQ's import does. */
static bool read_user_limits(defs_ctx *c, const json_t *v, access_user_spec *u, const char *what)
{
    char why[512];
    if (!v || json_is_null(v))
        return true;
    if (!defs_user_limits_validate(v, why, sizeof why))
        return defs_fail(c, "%s: %s", what, why);
    const json_t *conns = json_object_get(v, "max-connections");
    const json_t *chans = json_object_get(v, "max-channels");
    u->set_max_connections = conns != NULL;
    u->set_max_channels = chans != NULL;
    u->max_connections = (meta_limit){true, json_integer_value(conns)};
    u->max_channels = (meta_limit){true, json_integer_value(chans)};
    return true;
}

bool defs_read_user(defs_ctx *c, const json_t *it, size_t i, access_user_spec *u, char *tags,
                    size_t cap, char *what, size_t whatlen)
{
    memset(u, 0, sizeof *u);
    if (!named(c, it, "users", i, "name", &u->name))
        return false;
    snprintf(what, whatlen, "user '%s'", u->name);
    const json_t *pw = json_object_get(it, "password");
    if (pw && !json_is_string(pw))
        return defs_fail(c, "%s: password must be a string", what);
    u->password = json_string_value(pw);
    if (!u->password && !read_str(c, it, "password_hash", "", &u->password_hash, what))
        return false;
    u->tags = tags;
    return read_str(c, it, "hashing_algorithm", ACCESS_HASH_SHA256, &u->hashing_algorithm,
                    what) &&
           read_tags(c, json_object_get(it, "tags"), tags, cap, what) &&
           read_user_limits(c, json_object_get(it, "limits"), u, what);
}

bool defs_read_vhost(defs_ctx *c, const json_t *it, size_t i, meta_vhost *v, char *tags,
                     size_t cap, char *what, size_t whatlen)
{
    memset(v, 0, sizeof *v);
    if (!named(c, it, "vhosts", i, "name", &v->name))
        return false;
    snprintf(what, whatlen, "vhost '%s'", v->name);
    /* RabbitMQ 3.10 exports the name only; later versions nest details in
     * "metadata". Both forms are read. */
    const json_t *md = json_object_get(it, "metadata");
    const json_t *src = json_is_object(md) ? md : it;
    v->tags = tags;
    return read_str(c, src, "description", "", &v->description, what) &&
           read_tags(c, json_object_get(src, "tags"), tags, cap, what) &&
           read_str(c, src, "default_queue_type", "", &v->default_queue_type, what) &&
           read_bool(c, it, "tracing", false, &v->tracing, what);
}

bool defs_read_permission(defs_ctx *c, const json_t *it, size_t i, meta_permission *p, char *what,
                          size_t whatlen)
{
    memset(p, 0, sizeof *p);
    if (!named(c, it, "permissions", i, "user", &p->user) ||
        !named(c, it, "permissions", i, "vhost", &p->vhost))
        return false;
    snprintf(what, whatlen, "permission of user '%s' in vhost '%s'", p->user, p->vhost);
    return read_str(c, it, "configure", NULL, &p->configure, what) &&
           read_str(c, it, "write", NULL, &p->write, what) &&
           read_str(c, it, "read", NULL, &p->read, what);
}

bool defs_read_topic_permission(defs_ctx *c, const json_t *it, size_t i, meta_topic_permission *p,
                                char *what, size_t whatlen)
{
    memset(p, 0, sizeof *p);
    if (!named(c, it, "topic_permissions", i, "user", &p->user) ||
        !named(c, it, "topic_permissions", i, "vhost", &p->vhost) ||
        !named(c, it, "topic_permissions", i, "exchange", &p->exchange))
        return false;
    snprintf(what, whatlen, "topic permission of user '%s' in vhost '%s' on exchange '%s'",
             p->user, p->vhost, p->exchange);
    return read_str(c, it, "write", NULL, &p->write, what) &&
           read_str(c, it, "read", NULL, &p->read, what);
}

/* An "arguments" (or "definition") object into c->table. */
static bool read_table(defs_ctx *c, const json_t *it, const char *key, bool allow_null,
                       amqp_bytes *out, const char *what)
{
    char why[256];
    if (!defs_table_from_json(c, json_object_get(it, key), allow_null, out, why, sizeof why))
        return defs_fail(c, "%s: %s %s", what, key, why);
    return true;
}

bool defs_read_policy(defs_ctx *c, const json_t *it, size_t i, policy_spec *p, const char **vh,
                      char *what, size_t whatlen)
{
    memset(p, 0, sizeof *p);
    if (!named(c, it, "policies", i, "name", &p->name))
        return false;
    snprintf(what, whatlen, "policy '%s'", p->name);
    if (!item_vhost(c, it, what, vh))
        return false;
    snprintf(what, whatlen, "policy '%s' in vhost '%s'", p->name, *vh);
    const json_t *prio = json_object_get(it, "priority");
    if (prio && !json_is_integer(prio))
        return defs_fail(c, "%s: priority must be an integer", what);
    json_int_t n = prio ? json_integer_value(prio) : 0;
    if (n < INT32_MIN || n > INT32_MAX)
        return defs_fail(c, "%s: priority out of range", what);
    p->priority = (int32_t)n;
    const json_t *def = json_object_get(it, "definition");
    if (!json_is_object(def))
        return defs_fail(c, "%s: definition must be an object", what);
    return read_str(c, it, "pattern", NULL, &p->pattern, what) &&
           read_str(c, it, "apply-to", "all", &p->apply_to, what) &&
           read_table(c, it, "definition", true, &p->definition, what);
}

bool defs_read_queue(defs_ctx *c, const json_t *it, size_t i, queue_spec *q, const char **vh,
                     char *what, size_t whatlen)
{
    memset(q, 0, sizeof *q);
    const char *name;
    if (!named(c, it, "queues", i, "name", &name))
        return false;
    q->name = (amqp_bytes){(const uint8_t *)name, (uint32_t)strlen(name)};
    snprintf(what, whatlen, "queue '%s'", name);
    if (!item_vhost(c, it, what, vh))
        return false;
    snprintf(what, whatlen, "queue '%s' in vhost '%s'", name, *vh);
    return read_bool(c, it, "durable", false, &q->durable, what) &&
           read_bool(c, it, "auto_delete", false, &q->auto_delete, what) &&
           read_table(c, it, "arguments", false, &q->arguments, what);
}

bool defs_read_exchange(defs_ctx *c, const json_t *it, size_t i, route_exchange_spec *x,
                        const char **vh, char *what, size_t whatlen)
{
    memset(x, 0, sizeof *x);
    const char *name, *type;
    if (!named(c, it, "exchanges", i, "name", &name))
        return false;
    x->name = (amqp_bytes){(const uint8_t *)name, (uint32_t)strlen(name)};
    snprintf(what, whatlen, "exchange '%s'", name);
    if (!item_vhost(c, it, what, vh))
        return false;
    snprintf(what, whatlen, "exchange '%s' in vhost '%s'", name, *vh);
    if (!read_str(c, it, "type", NULL, &type, what))
        return false;
    x->type = AMQP_CSTR(type);
    return read_bool(c, it, "durable", false, &x->durable, what) &&
           read_bool(c, it, "auto_delete", false, &x->auto_delete, what) &&
           read_bool(c, it, "internal", false, &x->internal, what) &&
           read_table(c, it, "arguments", false, &x->arguments, what);
}

bool defs_read_binding(defs_ctx *c, const json_t *it, size_t i, defs_binding *b, char *what,
                       size_t whatlen)
{
    memset(b, 0, sizeof *b);
    const char *type;
    if (!named(c, it, "bindings", i, "source", &b->source) ||
        !named(c, it, "bindings", i, "destination", &b->destination))
        return false;
    snprintf(what, whatlen, "binding of '%s' to '%s'", b->source, b->destination);
    if (!item_vhost(c, it, what, &b->vhost) ||
        !read_str(c, it, "destination_type", NULL, &type, what))
        return false;
    if (strcmp(type, "queue") != 0 && strcmp(type, "exchange") != 0)
        return defs_fail(c, "%s: destination_type must be \"queue\" or \"exchange\"", what);
    b->to_queue = type[0] == 'q';
    snprintf(what, whatlen, "binding of exchange '%s' to %s '%s' in vhost '%s'", b->source, type,
             b->destination, b->vhost);
    return read_str(c, it, "routing_key", "", &b->routing_key, what) &&
           read_table(c, it, "arguments", false, &b->arguments, what);
}

bool defs_read_parameter(defs_ctx *c, const json_t *it, size_t i, defs_parameter *p, char *what,
                         size_t whatlen)
{
    memset(p, 0, sizeof *p);
    if (!named(c, it, "parameters", i, "name", &p->name) ||
        !named(c, it, "parameters", i, "component", &p->component))
        return false;
    snprintf(what, whatlen, "parameter '%s' of component '%s'", p->name, p->component);
    if (!item_vhost(c, it, what, &p->vhost))
        return false;
    snprintf(what, whatlen, "parameter '%s' of component '%s' in vhost '%s'", p->name,
             p->component, p->vhost);
    p->value = json_object_get(it, "value");
    return p->value || defs_fail(c, "%s: value is missing", what);
}

bool defs_read_global_parameter(defs_ctx *c, const json_t *it, size_t i, defs_parameter *p,
                                char *what, size_t whatlen)
{
    memset(p, 0, sizeof *p);
    if (!named(c, it, "global_parameters", i, "name", &p->name))
        return false;
    snprintf(what, whatlen, "global parameter '%s'", p->name);
    p->value = json_object_get(it, "value");
    return p->value || defs_fail(c, "%s: value is missing", what);
}
