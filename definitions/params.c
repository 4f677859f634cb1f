/* Runtime parameters as JSON, shared by the management API and the
 * definitions: which components Warren takes, how each value is checked
 * (RabbitMQ's texts, as rabbit_runtime_parameters:set answers), and where
 * it goes.
 *
 * - operator_policy: Warren's operator policies (policy.c), the value
 *   {pattern, definition, priority, apply-to} -- how RabbitMQ stores them.
 * - policy: the policies, shown as parameters (read only, as in RabbitMQ).
 * - shovel, federation-upstream, federation-upstream-set: kept (param.c);
 *   the shovels and the federation links (federation/) read them. Their
 *   shape and required keys are checked as RabbitMQ's plugins check them,
 *   an upstream's (and a set element's) keys each by its kind as
 *   rabbitmq_federation's shared_validation does, unknown ones refused.
 * - vhost-limits: a vhost's limits (max-connections, max-queues), name
 *   "limits" as RabbitMQ's rabbit_vhost_limit sets them; the vhost keeps
 *   their numbers (queue/vhost_limits.c). /api/vhost-limits goes through
 *   defs_vhost_limit_set / _clear here.
 * Any other component is refused ("component x not found"), as RabbitMQ
 * refuses one whose plugin is not enabled.
 *
 * A kept value is stored as compact JSON with sorted keys (RabbitMQ shows
 * them sorted, as Erlang maps print).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defs_int.h"

/* ---- Erlang terms and priorities in RabbitMQ's messages ---------------------- */

void defs_erlang_term(const json_t *v, char *out, size_t cap)
{
    if (json_is_string(v))
        snprintf(out, cap, "<<\"%s\">>", json_string_value(v));
    else if (json_is_null(v) || !v)
        snprintf(out, cap, "null");
    else if (json_is_boolean(v))
        snprintf(out, cap, "%s", json_is_true(v) ? "true" : "false");
    else if (json_is_integer(v))
        snprintf(out, cap, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(out, cap, "%g", json_real_value(v));
    else
        snprintf(out, cap, "%s", json_is_array(v) ? "[...]" : "#{...}");
}

bool defs_json_priority(const json_t *v, int32_t *out, char *why, size_t cap)
{
    char term[256];
    *out = 0;
    if (!v)
        return true;
    if (json_is_integer(v) && json_integer_value(v) >= INT32_MIN &&
        json_integer_value(v) <= INT32_MAX) {
        *out = (int32_t)json_integer_value(v);
        return true;
    }
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
        fabs(json_real_value(v)) <= INT32_MAX) {
        *out = (int32_t)json_real_value(v);
        return true;
    }
    defs_erlang_term(v, term, sizeof term);
    snprintf(why, cap, json_is_number(v) ? "priority should be an integer in 32 bits, actually "
                                           "was %s\n"
                                         : "priority should be a number, actually was %s\n",
             term);
    return false;
}

/* ---- validation texts -------------------------------------------------------- */

/* "Validation failed\n\n" and then one line per problem. */
typedef struct lines {
    char *buf;
    size_t cap, len;
} lines;

static void line(lines *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(lines *t, const char *fmt, ...)
{
    va_list ap;
    if (t->len == 0)
        t->len = (size_t)snprintf(t->buf, t->cap, "Validation failed\n\n");
    if (t->len >= t->cap)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += n > 0 ? (size_t)n : 0;
    if (t->len < t->cap)
        t->len += (size_t)snprintf(t->buf + t->len, t->cap - t->len, "\n");
}

/* "Key \"k\" not found in name" for each of keys[] (sorted) absent from v. */
static void required(lines *t, const json_t *v, const char *name, const char *const *keys)
{
    for (; *keys; keys++)
        if (!json_object_get(v, *keys))
            line(t, "Key \"%s\" not found in %s", *keys, name);
}

/* An operator policy's keys; the kept components take any. */
static const char *const OPERATOR_POLICY_KEYS[] = {"apply-to", "definition", "pattern", "priority",
                                                   NULL};

static bool listed(const char *key, const char *const *keys)
{
    for (; keys && *keys; keys++)
        if (strcmp(key, *keys) == 0)
            return true;
    return false;
}

/* A value checked as RabbitMQ's proplist validation takes it: an object
 * (a list of pairs) goes on to its key checks, an array is a list of
 * terms none of which is a pair (all unrecognised; then every key is
 * missing, as for {}), anything else is refused. With `known`, an
 * object's other keys are unrecognised terms. Lines for what is wrong;
 * true when the caller goes on to the keys. */
static bool proplist(lines *t, const json_t *v, const char *name, const char *const *known)
{
    char terms[512] = "", term[256];
    size_t n = 0, i;
    const char *key;
    json_t *e;
    if (!json_is_object(v) && !json_is_array(v)) {
        defs_erlang_term(v, term, sizeof term);
        line(t, "%s not a list %s", name, term);
        return false;
    }
    json_array_foreach(json_is_array(v) ? v : NULL, i, e) {
        defs_erlang_term(e, term, sizeof term);
        if (n < sizeof terms - 1)
            n += (size_t)snprintf(terms + n, sizeof terms - n, "%s%s", n ? "," : "", term);
    }
    json_object_foreach(known && json_is_object(v) ? (json_t *)v : NULL, key, e) {
        if (listed(key, known))
            continue;
        defs_erlang_term(e, term, sizeof term);
        if (n < sizeof terms - 1)
            n += (size_t)snprintf(terms + n, sizeof terms - n, "%s{<<\"%s\">>,%s}", n ? "," : "",
                                  key, term);
    }
    if (n)
        line(t, "Unrecognised terms [%s] in %s", terms, name);
    return true;
}

/* One URI: a string with a scheme. */
static void uri(lines *t, const char *key, const json_t *u)
{
    char term[256];
    if (!json_is_string(u)) {
        defs_erlang_term(u, term, sizeof term);
        line(t, "%s should be list, actually was %s", key, term);
    } else if (!strstr(json_string_value(u), "://")) {
        line(t, "\"%s\" not a valid URI: {{unable_to_parse_uri,no_scheme},\"%s\"}",
             json_string_value(u), json_string_value(u));
    }
}

/* A URI key: a string or a list of them (rabbit_parameter_validation's
 * binary_or_list). */
static void uri_key(lines *t, const json_t *v, const char *key)
{
    const json_t *u = json_object_get(v, key), *e;
    size_t i;
    if (!json_is_array(u)) {
        if (u)
            uri(t, key, u);
        return;
    }
    json_array_foreach(u, i, e)
        uri(t, key, e);
}

/* ---- the components ------------------------------------------------------------ */

/* rabbit_federation_parameters' shared_validation, in its order: each key's
 * kind (binary, number, boolean, or the values of an enum). */
static const struct upstream_key {
    const char *key;
    char kind; /* 'b' binary, 'n' number, 't' boolean, 'e' enum */
    const char *values[4];
} upstream_keys[] = {
    {"exchange", 'b', {0}},         {"queue", 'b', {0}},
    {"consumer-tag", 'b', {0}},     {"prefetch-count", 'n', {0}},
    {"reconnect-delay", 'n', {0}},  {"max-hops", 'n', {0}},
    {"expires", 'n', {0}},          {"message-ttl", 'n', {0}},
    {"trust-user-id", 't', {0}},    {"ack-mode", 'e', {"no-ack", "on-publish", "on-confirm"}},
    {"resource-cleanup-mode", 'e', {"default", "never"}},
    {"ha-policy", 'b', {0}},        {"bind-nowait", 't', {0}},
    {"channel-use-mode", 'e', {"multiple", "single"}},
};

/* One key's check, with RabbitMQ's text (rabbit_parameter_validation). */
static void upstream_value(lines *t, const struct upstream_key *k, const json_t *v)
{
    char term[256], list[128] = "";
    defs_erlang_term(v, term, sizeof term);
    if (k->kind == 'n' && !json_is_number(v))
        line(t, "%s should be a number, actually was %s", k->key, term);
    else if (k->kind == 't' && !json_is_boolean(v))
        line(t, "%s should be boolean, actually was %s", k->key, term);
    else if ((k->kind == 'b' || k->kind == 'e') && !json_is_string(v))
        line(t, "%s should be binary, actually was %s", k->key, term);
    else if (k->kind == 'e') {
        for (int i = 0; i < 4 && k->values[i]; i++)
            if (strcmp(json_string_value(v), k->values[i]) == 0)
                return;
        for (int i = 0; i < 4 && k->values[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s<<\"%s\">>",
                     i ? "," : "", k->values[i]);
        line(t, "%s should be one of [%s], actually was %s", k->key, list, term);
    }
}

/* An upstream (or a set's element, whose `first` key is "upstream"): its
 * problems in the order RabbitMQ lists them -- the last key checked first,
 * the first (`first`, mandatory) last. */
static void upstream_keys_check(lines *t, const char *name, const json_t *v, const char *first)
{
    size_t n = sizeof upstream_keys / sizeof upstream_keys[0];
    for (size_t i = n; i-- > 0;) {
        const json_t *e = json_object_get(v, upstream_keys[i].key);
        if (e)
            upstream_value(t, &upstream_keys[i], e);
    }
    if (!json_object_get(v, first))
        line(t, "Key \"%s\" not found in %s", first, name);
}

#define SHARED_UPSTREAM_KEYS                                                                       \
    "exchange", "queue", "consumer-tag", "prefetch-count", "reconnect-delay", "max-hops",          \
        "expires", "message-ttl", "trust-user-id", "ack-mode", "resource-cleanup-mode",            \
        "ha-policy", "bind-nowait", "channel-use-mode"
static const char *const UPSTREAM_KEYS[] = {"uri", SHARED_UPSTREAM_KEYS, NULL};
static const char *const SET_ELEMENT_KEYS[] = {"upstream", SHARED_UPSTREAM_KEYS, NULL};

static void check_upstream(lines *t, const char *name, const json_t *v)
{
    static const char *const keys[] = {"uri", NULL};
    if (!proplist(t, v, name, UPSTREAM_KEYS))
        return;
    if (!json_is_object(v)) { /* a list of terms: only what is missing */
        required(t, v, name, keys);
        return;
    }
    upstream_keys_check(t, name, v, "uri");
    uri_key(t, v, "uri");
}

static void check_upstream_set(lines *t, const char *name, const json_t *v)
{
    static const char *const keys[] = {"upstream", NULL};
    char term[256];
    size_t i;
    const json_t *e;
    if (!json_is_array(v)) {
        defs_erlang_term(v, term, sizeof term);
        line(t, "%s should be list, actually was %s", name, term);
        return;
    }
    json_array_foreach(v, i, e) {
        if (!proplist(t, e, name, SET_ELEMENT_KEYS))
            continue;
        if (json_is_object(e))
            upstream_keys_check(t, name, e, "upstream");
        else
            required(t, e, name, keys);
        const json_t *up = json_object_get(e, "upstream");
        if (up && !json_is_string(up)) {
            defs_erlang_term(up, term, sizeof term);
            line(t, "upstream should be binary, actually was %s", term);
        }
    }
}

/* A shovel's source (or destination) of its protocol: AMQP 0-9-1 names a
 * queue or exchange, AMQP 1.0 an address. */
static void shovel_end(lines *t, const char *name, const json_t *v, const char *end)
{
    char key[32];
    snprintf(key, sizeof key, "%s-protocol", end);
    const char *proto = json_string_value(json_object_get(v, key));
    if (proto && strcmp(proto, "amqp10") == 0) {
        snprintf(key, sizeof key, "%s-address", end);
        if (!json_object_get(v, key))
            line(t, "Key \"%s\" not found in %s", key, name);
    } else if (strcmp(end, "src") == 0 && !json_object_get(v, "src-exchange") &&
               !json_object_get(v, "src-queue")) {
        line(t, "Must specify 'src-exchange' or 'src-queue'");
    }
}

static void check_shovel(lines *t, const char *name, const json_t *v)
{
    static const char *const keys[] = {"dest-uri", "src-uri", NULL};
    if (!proplist(t, v, name, NULL))
        return;
    shovel_end(t, name, v, "src");
    shovel_end(t, name, v, "dest");
    required(t, v, name, keys);
    uri_key(t, v, "src-uri");
    uri_key(t, v, "dest-uri");
}

/* RabbitMQ's limits (rabbit_vhost_limit, and users' limits): a proplist
 * of `keys`, each an integer (any sign; negative is no limit). */
static void check_limits(lines *t, const char *name, const json_t *v, const char *const *keys)
{
    char term[256];
    if (!proplist(t, v, name, keys) || !json_is_object(v))
        return;
    for (; *keys; keys++) {
        const json_t *n = json_object_get(v, *keys);
        if (n && !json_is_integer(n)) {
            defs_erlang_term(n, term, sizeof term);
            line(t, "%s should be a number, actually was %s", *keys, term);
        }
    }
}

static const char *const VHOST_LIMIT_KEYS[] = {"max-connections", "max-queues", NULL};
static const char *const USER_LIMIT_KEYS[] = {"max-channels", "max-connections", NULL};

/* RabbitMQ reads only the parameter named "limits" (another name it stores
 * and answers with a 500); Warren refuses other names. */
static void check_vhost_limits(lines *t, const char *name, const json_t *v)
{
    if (strcmp(name, VHOST_LIMITS_NAME) != 0)
        line(t, "the vhost-limits parameter is named '%s', not '%s'", VHOST_LIMITS_NAME, name);
    else
        check_limits(t, name, v, VHOST_LIMIT_KEYS);
}

typedef void (*check_fn)(lines *t, const char *name, const json_t *v);

static const struct component {
    const char *name;
    check_fn check; /* NULL: not kept (the policy engine's) */
} components[DEFS_PARAM_COMPONENTS] = {
    [DEFS_OPERATOR_POLICY] = {"operator_policy", NULL},
    [DEFS_POLICY] = {"policy", NULL},
    [DEFS_SHOVEL] = {"shovel", check_shovel},
    [DEFS_FEDERATION_UPSTREAM] = {"federation-upstream", check_upstream},
    [DEFS_FEDERATION_UPSTREAM_SET] = {"federation-upstream-set", check_upstream_set},
    [DEFS_VHOST_LIMITS] = {VHOST_LIMITS_COMPONENT, check_vhost_limits},
};

const char *defs_param_component_name(int i)
{
    return i >= 0 && i < DEFS_PARAM_COMPONENTS ? components[i].name : NULL;
}

int defs_param_component(const char *name)
{
    for (int i = 0; name && i < DEFS_PARAM_COMPONENTS; i++)
        if (strcmp(name, components[i].name) == 0)
            return i;
    return -1;
}

/* ---- operator policies ------------------------------------------------------------ */

/* policy_validate's lines for one part of the spec (its header dropped). */
static void policy_lines(lines *t, const policy_spec *p)
{
    char why[2048];
    if (policy_validate(p, why, sizeof why))
        return;
    for (char *l = why + strlen("Validation failed\n\n"), *nl; *l; l = nl + 1) {
        if (!(nl = strchr(l, '\n')))
            break;
        *nl = 0;
        line(t, "%s", l);
    }
}

/* An operator policy's value, checked as rabbit_policy's proplist
 * validation reports it: terms it does not know, then definition,
 * apply-to, pattern and priority (each bad, or missing where mandatory).
 * Each part is checked alone (the others set to valid stand-ins), so the
 * lines come in that order. *p describes the value when all is well. */
static bool read_operator_policy(const char *name, const json_t *v, uint8_t *buf, size_t cap,
                                 policy_spec *p, char *why, size_t whylen)
{
    lines t = {why, whylen, 0};
    const json_t *def = json_object_get(v, "definition"), *apply_to = json_object_get(v, "apply-to");
    const json_t *pattern = json_object_get(v, "pattern"), *prio = json_object_get(v, "priority");
    char term[256], conv[256];
    uint8_t stand_in[32];
    amqp_writer w;
    amqp_writer_init(&w, stand_in, sizeof stand_in); /* {"max-length": 0}: valid alone */
    size_t mark = amqp_table_begin(&w);
    amqp_put_key(&w, "max-length");
    amqp_put_field(&w, &(amqp_field){.type = 'l'});
    amqp_table_end(&w, mark);
    policy_spec alone = {.name = name, .pattern = "", .apply_to = "all", .operator_policy = true,
                         .definition = {stand_in + 4, (uint32_t)w.len - 4}};
    *p = alone;
    if (!proplist(&t, v, name, OPERATOR_POLICY_KEYS))
        return false;
    if (!def)
        line(&t, "Key \"definition\" not found in %s", name);
    else if (!defs_table_into(def, true, buf, cap, &p->definition, conv, sizeof conv))
        line(&t, "definition %s", conv);
    else
        policy_lines(&t, &(policy_spec){.name = name, .pattern = "", .apply_to = "all",
                                         .operator_policy = true, .definition = p->definition});
    if (apply_to && !json_is_string(apply_to)) {
        defs_erlang_term(apply_to, term, sizeof term);
        line(&t, "apply-to should be a binary but was %s", term);
    } else if (apply_to) {
        p->apply_to = json_string_value(apply_to);
        policy_lines(&t, &(policy_spec){.name = name, .pattern = "", .apply_to = p->apply_to,
                                         .operator_policy = true, .definition = alone.definition});
    }
    if (!pattern) {
        line(&t, "Key \"pattern\" not found in %s", name);
    } else if (!json_is_string(pattern)) {
        defs_erlang_term(pattern, term, sizeof term);
        line(&t, "pattern should be a binary but was %s", term);
    } else {
        p->pattern = json_string_value(pattern);
        policy_lines(&t, &(policy_spec){.name = name, .pattern = p->pattern, .apply_to = "all",
                                         .operator_policy = true, .definition = alone.definition});
    }
    if (!prio)
        line(&t, "Key \"priority\" not found in %s", name);
    else if (!defs_json_priority(prio, &p->priority, term, sizeof term))
        line(&t, "%.*s", (int)strcspn(term, "\n"), term);
    return t.len == 0;
}

bool defs_param_validate(const char *component, const char *name, const json_t *value,
                         char *why, size_t whylen)
{
    uint8_t *buf = malloc(DEFS_TABLE_MAX);
    policy_spec p;
    bool ok = buf && defs_param_check(component, name, value, buf, DEFS_TABLE_MAX, &p, why,
                                      whylen);
    if (!buf)
        snprintf(why, whylen, "out of memory");
    free(buf);
    return ok;
}

bool defs_param_check(const char *component, const char *name, const json_t *value, uint8_t *buf,
                      size_t cap, policy_spec *op, char *why, size_t whylen)
{
    lines t = {why, whylen, 0};
    int i = defs_param_component(component);
    why[0] = 0;
    if (i == DEFS_POLICY) {
        snprintf(why, whylen, "policies may not be set using this method");
        return false;
    }
    if (i < 0) {
        line(&t, "component %s not found", component);
        return false;
    }
    if (i == DEFS_OPERATOR_POLICY)
        return read_operator_policy(name, value, buf, cap, op, why, whylen);
    components[i].check(&t, name, value);
    return t.len == 0;
}

/* ---- setting, reading, listing ---------------------------------------------------- */

/* The JSON text a kept value is stored as; NULL on OOM. */
static char *value_text(const json_t *value)
{
    return json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

bool defs_param_put(vhost *v, const char *component, const char *name, const json_t *value,
                    bool *created, char *why, size_t whylen)
{
    uint8_t *buf = malloc(DEFS_TABLE_MAX);
    policy_spec p, old;
    bool ok = buf && defs_param_check(component, name, value, buf, DEFS_TABLE_MAX, &p, why,
                                      whylen);
    if (!buf)
        snprintf(why, whylen, "out of memory");
    if (ok && defs_param_component(component) == DEFS_OPERATOR_POLICY) {
        *created = !policy_get(v, name, true, &old);
        ok = policy_put(v, &p, why, whylen);
    } else if (ok) {
        char *text = value_text(value);
        param_spec ps = {component, name, text};
        ok = text && param_put(vhost_params(v), &ps, created);
        if (!ok)
            snprintf(why, whylen, "could not store the parameter (see the log)");
        free(text);
    }
    free(buf);
    return ok;
}

bool defs_param_delete(vhost *v, const char *component, const char *name)
{
    switch (defs_param_component(component)) {
    case DEFS_OPERATOR_POLICY: return policy_delete(v, name, true);
    case DEFS_POLICY: return false;
    default: return param_delete(vhost_params(v), component, name);
    }
}

/* {pattern, definition, priority, apply-to}: how RabbitMQ shows a policy
 * as a parameter. */
static json_t *policy_value(const policy_spec *p)
{
    json_t *o = json_object();
    json_object_set_new(o, "pattern", json_string(p->pattern));
    json_object_set_new(o, "definition", defs_table_to_json(p->definition));
    json_object_set_new(o, "priority", json_integer(p->priority));
    json_object_set_new(o, "apply-to", json_string(p->apply_to ? p->apply_to : "all"));
    return o;
}

json_t *defs_param_value(vhost *v, const char *component, const char *name)
{
    int i = defs_param_component(component);
    policy_spec p;
    param_spec kept;
    if (i == DEFS_OPERATOR_POLICY || i == DEFS_POLICY)
        return policy_get(v, name, i == DEFS_OPERATOR_POLICY, &p) ? policy_value(&p) : NULL;
    if (i < 0 || !param_get(vhost_params(v), component, name, &kept))
        return NULL;
    return json_loads(kept.value, JSON_DECODE_ANY, NULL);
}

typedef struct walk {
    int component;
    void (*fn)(void *arg, int component, const char *name);
    void *arg;
} walk;

static void walk_policy(void *arg, const policy_spec *p)
{
    walk *w = arg;
    w->fn(w->arg, w->component, p->name);
}

static void walk_kept(void *arg, const param_spec *p)
{
    walk *w = arg;
    w->fn(w->arg, defs_param_component(p->component), p->name);
}

void defs_param_foreach(vhost *v, const char *component,
                        void (*fn)(void *arg, int component, const char *name), void *arg)
{
    int i = component ? defs_param_component(component) : -1;
    walk w = {i < 0 ? DEFS_OPERATOR_POLICY : i, fn, arg};
    if (component && i < 0)
        return;
    if (i == DEFS_POLICY || i == DEFS_OPERATOR_POLICY || !component)
        policy_foreach(v, i != DEFS_POLICY, walk_policy, &w);
    if (i != DEFS_POLICY && i != DEFS_OPERATOR_POLICY)
        param_foreach(vhost_params(v), component, walk_kept, &w);
}

/* ---- global parameters ------------------------------------------------------------ */

bool defs_global_param_put(server *s, const char *name, const json_t *value, bool *created)
{
    char *text = value_text(value);
    param_spec p = {NULL, name, text};
    bool ok = text && param_put(server_params(s), &p, created);
    free(text);
    return ok;
}

json_t *defs_global_param_value(server *s, const char *name)
{
    param_spec p;
    if (!param_get(server_params(s), NULL, name, &p))
        return NULL;
    return json_loads(p.value, JSON_DECODE_ANY, NULL);
}

/* ---- limits ----------------------------------------------------------------------- */

bool defs_user_limits_validate(const json_t *value, char *why, size_t whylen)
{
    lines t = {why, whylen, 0};
    why[0] = 0;
    check_limits(&t, "user-limits", value, USER_LIMIT_KEYS);
    if (t.len == 0)
        return true;
    /* RabbitMQ's text for users' limits has no "Validation failed" head */
    size_t head = strlen("Validation failed\n\n");
    memmove(why, why + head, strlen(why + head) + 1);
    why[strcspn(why, "\n")] = 0;
    return false;
}

json_t *defs_vhost_limits(vhost *v)
{
    return defs_param_value(v, VHOST_LIMITS_COMPONENT, VHOST_LIMITS_NAME);
}

/* The limits of v with `name` set to `value` (NULL: removed), as a new
 * object; non-object values (RabbitMQ's [] after the last was cleared)
 * count as none. */
static json_t *limits_with(vhost *v, const char *name, json_t *value)
{
    json_t *old = defs_vhost_limits(v);
    json_t *o = json_is_object(old) ? json_copy(old) : json_object();
    json_decref(old);
    if (!o)
        return NULL;
    if (value)
        json_object_set(o, name, value);
    else
        json_object_del(o, name);
    return o;
}

bool defs_vhost_limit_set(vhost *v, const char *name, json_t *value, char *why, size_t whylen)
{
    bool created;
    json_t *o = limits_with(v, name, value);
    bool ok = o && defs_param_put(v, VHOST_LIMITS_COMPONENT, VHOST_LIMITS_NAME, o, &created, why,
                                  whylen);
    if (!o)
        snprintf(why, whylen, "out of memory");
    json_decref(o);
    return ok;
}

bool defs_vhost_limit_clear(vhost *v, const char *name)
{
    param_spec have;
    char why[256];
    bool created;
    if (!param_get(vhost_params(v), VHOST_LIMITS_COMPONENT, VHOST_LIMITS_NAME, &have))
        return true;
    json_t *o = limits_with(v, name, NULL);
    /* RabbitMQ keeps the parameter with [] once its last limit is cleared */
    json_t *kept = o && json_object_size(o) == 0 ? json_array() : json_incref(o);
    bool ok = kept && defs_param_put(v, VHOST_LIMITS_COMPONENT, VHOST_LIMITS_NAME, kept, &created,
                                     why, sizeof why);
    json_decref(kept);
    json_decref(o);
    return ok;
}
