/* Validation of a whole import before anything is applied: every item is
 * read (JSON types) and checked with the broker's own validators
 * (access_validate_*, admin_validate_vhost, policy_validate,
 * queue_args_parse, defs_param_check), and every name it refers to -- a
 * permission's user
 * and vhost, an item's vhost, a binding's source and destination -- must
 * exist in the broker or earlier in the same document's sections. The
 * sections are checked in the order they are applied, filling the
 * context's name sets as they go. */
#include <stdio.h>
#include <string.h>

#include "defs_int.h"

#define WHAT 600

static const char *const sections[] = {"users",    "vhosts",    "permissions", "topic_permissions",
                                       "policies", "exchanges", "queues",      "bindings",
                                       "parameters", "global_parameters"};

static bool sections_are_arrays(defs_ctx *c)
{
    if (!json_is_object(c->doc))
        return defs_fail(c, "definitions must be a JSON object");
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
        const json_t *a = json_object_get(c->doc, sections[i]);
        if (a && !json_is_array(a) && !json_is_null(a))
            return defs_fail(c, "%s must be an array", sections[i]);
    }
    return true;
}

static bool need_vhost(defs_ctx *c, const char *what, const char *vh)
{
    return defs_vhost_known(c, vh) || defs_fail(c, "%s: vhost '%s' does not exist", what, vh);
}

static bool need_user(defs_ctx *c, const char *what, const char *user)
{
    return access_find_user(server_access(c->s), user) || json_object_get(c->users, user) ||
           defs_fail(c, "%s: user '%s' does not exist", what, user);
}

static bool check_users(defs_ctx *c)
{
    size_t i;
    json_t *it;
    json_array_foreach(defs_section(c, "users"), i, it) {
        access_user_spec u;
        char tags[1024], what[WHAT], why[512];
        if (!defs_read_user(c, it, i, &u, tags, sizeof tags, what, sizeof what))
            return false;
        if (!access_validate_user(&u, why, sizeof why))
            return defs_fail(c, "%s: %s", what, why);
        json_object_set_new(c->users, u.name, json_true());
    }
    return true;
}

static bool check_vhosts(defs_ctx *c)
{
    size_t i;
    json_t *it;
    json_array_foreach(defs_section(c, "vhosts"), i, it) {
        meta_vhost v;
        char tags[1024], what[WHAT], why[512];
        if (!defs_read_vhost(c, it, i, &v, tags, sizeof tags, what, sizeof what))
            return false;
        if (!admin_validate_vhost(&v, why, sizeof why))
            return defs_fail(c, "%s: %s", what, why);
        json_object_set_new(c->vhosts, v.name, json_true());
    }
    return true;
}

static bool check_permissions(defs_ctx *c)
{
    size_t i;
    json_t *it;
    json_array_foreach(defs_section(c, "permissions"), i, it) {
        meta_permission p;
        char what[WHAT], why[512];
        if (!defs_read_permission(c, it, i, &p, what, sizeof what) ||
            !need_user(c, what, p.user) || !need_vhost(c, what, p.vhost))
            return false;
        if (!access_validate_permission(&p, why, sizeof why))
            return defs_fail(c, "%s: %s", what, why);
    }
    json_array_foreach(defs_section(c, "topic_permissions"), i, it) {
        meta_topic_permission p;
        char what[WHAT], why[512];
        if (!defs_read_topic_permission(c, it, i, &p, what, sizeof what) ||
            !need_user(c, what, p.user) || !need_vhost(c, what, p.vhost))
            return false;
        if (!access_validate_topic_permission(&p, why, sizeof why))
            return defs_fail(c, "%s: %s", what, why);
    }
    return true;
}

/* policy_validate's "Validation failed\n\n<line>\n..." as one line. */
static void one_line(char *s)
{
    const char *head = "Validation failed\n\n";
    if (strncmp(s, head, strlen(head)) == 0)
        memmove(s, s + strlen(head), strlen(s) - strlen(head) + 1);
    for (char *p = s; *p; p++)
        if (*p == '\n')
            *p = p[1] ? ';' : 0;
}

/* Fails the import with a validator's multi-line text as one line. */
static bool refuse(defs_ctx *c, const char *what, char *why)
{
    one_line(why);
    return defs_fail(c, "%s: %s", what, why);
}

static bool check_policies(defs_ctx *c)
{
    size_t i;
    json_t *it;
    json_array_foreach(defs_section(c, "policies"), i, it) {
        policy_spec p;
        const char *vh;
        char what[WHAT], why[512];
        if (!defs_read_policy(c, it, i, &p, &vh, what, sizeof what) || !need_vhost(c, what, vh))
            return false;
        if (!policy_validate(&p, why, sizeof why))
            return refuse(c, what, why);
    }
    return true;
}

static bool check_parameters(defs_ctx *c)
{
    size_t i;
    json_t *it;
    json_array_foreach(defs_section(c, "parameters"), i, it) {
        defs_parameter p;
        policy_spec op;
        char what[WHAT], why[512];
        if (!defs_read_parameter(c, it, i, &p, what, sizeof what) || !need_vhost(c, what, p.vhost))
            return false;
        if (!defs_param_check(p.component, p.name, p.value, c->table, sizeof c->table, &op, why,
                              sizeof why))
            return refuse(c, what, why);
    }
    return true;
}

static bool check_global_parameters(defs_ctx *c)
{
    size_t i;
    json_t *it;
    json_array_foreach(defs_section(c, "global_parameters"), i, it) {
        defs_parameter p;
        char what[WHAT];
        if (!defs_read_global_parameter(c, it, i, &p, what, sizeof what))
            return false;
    }
    return true;
}

static bool check_exchanges(defs_ctx *c)
{
    size_t i;
    json_t *it;
    json_array_foreach(defs_section(c, "exchanges"), i, it) {
        route_exchange_spec x;
        const char *vh;
        char what[WHAT], key[600];
        amqp_field f;
        if (!defs_read_exchange(c, it, i, &x, &vh, what, sizeof what) || !need_vhost(c, what, vh))
            return false;
        if (!route_type_known(x.type))
            return defs_fail(c, "%s: unknown exchange type '%.*s'", what, (int)x.type.len,
                             (const char *)x.type.ptr);
        if (x.name.len == 0)
            return defs_fail(c, "%s: the default exchange cannot be declared", what);
        if (amqp_table_get(x.arguments, "alternate-exchange", &f) && f.type != 'S')
            return defs_fail(c, "%s: alternate-exchange must be a string", what);
        if (amqp_bytes_equal_cstr(x.type, ROUTE_DELAYED_NAME) &&
            (!amqp_table_get(x.arguments, "x-delayed-type", &f) || f.type != 'S' ||
             !route_type_known(f.v.bytes) || amqp_bytes_equal_cstr(f.v.bytes, ROUTE_DELAYED_NAME)))
            return defs_fail(c, "%s: x-delayed-type must name an exchange type other than "
                                "x-delayed-message", what);
        /* the first declaration counts: application skips what exists */
        defs_key(key, sizeof key, vh, (const char *)x.name.ptr);
        if (!json_object_get(c->exchanges, key))
            json_object_set_new(c->exchanges, key,
                                json_stringn((const char *)x.type.ptr, x.type.len));
    }
    return true;
}

/* The JSON type each typed queue argument needs; the values themselves
 * are then checked by queue_args_parse, in RabbitMQ's words. */
static const struct {
    const char *key;
    uint8_t type; /* 'l' integer, 'S' string, 't' boolean */
} arg_types[] = {
    {"x-message-ttl", 'l'},        {"x-expires", 'l'},
    {"x-max-length", 'l'},         {"x-max-length-bytes", 'l'},
    {"x-max-priority", 'l'},       {"x-delivery-limit", 'l'},
    {"x-max-in-memory-length", 'l'}, {"x-max-in-memory-bytes", 'l'},
    {"x-dead-letter-exchange", 'S'}, {"x-dead-letter-routing-key", 'S'},
    {"x-overflow", 'S'},           {"x-queue-mode", 'S'},
    {"x-queue-type", 'S'},         {"x-single-active-consumer", 't'},
    {"x-delayed-retry-type", 'S'}, {"x-delayed-retry-min", 'l'},
    {"x-delayed-retry-max", 'l'},  {"x-delayed-retry-multiplier", 'l'},
};

static bool check_queue_args(defs_ctx *c, const queue_spec *q, const char *vh, const char *what)
{
    static const char *const type_names[] = {['l'] = "an integer", ['S'] = "a string",
                                             ['t'] = "true or false"};
    for (size_t k = 0; k < sizeof arg_types / sizeof arg_types[0]; k++) {
        amqp_field f;
        if (amqp_table_get(q->arguments, arg_types[k].key, &f) && f.type != arg_types[k].type)
            return defs_fail(c, "%s: %s must be %s", what, arg_types[k].key,
                             type_names[arg_types[k].type]);
    }
    queue_args args;
    amqp_error err = {0};
    if (queue_args_parse(q->arguments, q->name, vh, &args, &err) != AMQP_OK) {
        const char *dash = strstr(err.text, " - ");
        return defs_fail(c, "%s: %s", what, dash ? dash + 3 : err.text);
    }
    return true;
}

static bool check_queues(defs_ctx *c)
{
    size_t i;
    json_t *it;
    json_array_foreach(defs_section(c, "queues"), i, it) {
        queue_spec q;
        const char *vh;
        char what[WHAT], key[600];
        if (!defs_read_queue(c, it, i, &q, &vh, what, sizeof what) || !need_vhost(c, what, vh) ||
            !check_queue_args(c, &q, vh, what))
            return false;
        if (q.name.len == 0)
            return defs_fail(c, "%s: name must not be empty", what);
        if (q.name.len >= 4 && memcmp(q.name.ptr, "amq.", 4) == 0)
            return defs_fail(c, "%s: names starting with 'amq.' are reserved", what);
        json_object_set_new(c->queues, defs_key(key, sizeof key, vh, (const char *)q.name.ptr),
                            json_true());
    }
    return true;
}

/* The type exchange `name` in `vh` will have -- the broker's when it
 * exists (an import keeps it), else the document's -- or NULL when it is
 * in neither. */
static const char *exchange_type(defs_ctx *c, const char *vh, const char *name)
{
    char key[600];
    vhost *v = server_vhost(c->s, AMQP_CSTR(vh));
    route_exchange *ex = v ? route_exchange_find(vhost_routes(v), AMQP_CSTR(name)) : NULL;
    if (ex)
        return route_type_name(route_exchange_type(ex));
    return json_string_value(json_object_get(c->exchanges, defs_key(key, sizeof key, vh, name)));
}

static bool check_destination(defs_ctx *c, const defs_binding *b, const char *what)
{
    char key[600];
    if (!b->to_queue) {
        if (!*b->destination)
            return defs_fail(c, "%s: the default exchange cannot be bound", what);
        return exchange_type(c, b->vhost, b->destination) ||
               defs_fail(c, "%s: destination exchange '%s' does not exist", what, b->destination);
    }
    if (json_object_get(c->queues, defs_key(key, sizeof key, b->vhost, b->destination)))
        return true;
    vhost *v = server_vhost(c->s, AMQP_CSTR(b->vhost));
    queue *q = v ? vhost_queue_find(v, AMQP_CSTR(b->destination)) : NULL;
    if (!q)
        return defs_fail(c, "%s: destination queue '%s' does not exist", what, b->destination);
    if (queue_exclusive(q))
        return defs_fail(c, "%s: queue '%s' is exclusive to a connection", what, b->destination);
    return true;
}

static bool check_x_match(defs_ctx *c, const defs_binding *b, const char *what)
{
    static const char *const kinds[] = {"all", "any", "all-with-x", "any-with-x"};
    amqp_field f;
    if (!amqp_table_get(b->arguments, "x-match", &f))
        return true;
    for (size_t k = 0; f.type == 'S' && k < 4; k++)
        if (amqp_bytes_equal_cstr(f.v.bytes, kinds[k]))
            return true;
    return defs_fail(c, "%s: x-match must be all, any, all-with-x or any-with-x", what);
}

static bool check_bindings(defs_ctx *c)
{
    size_t i;
    json_t *it;
    json_array_foreach(defs_section(c, "bindings"), i, it) {
        defs_binding b;
        char what[WHAT];
        if (!defs_read_binding(c, it, i, &b, what, sizeof what) || !need_vhost(c, what, b.vhost))
            return false;
        if (!*b.source)
            return defs_fail(c, "%s: the default exchange cannot be bound", what);
        const char *type = exchange_type(c, b.vhost, b.source);
        if (!type)
            return defs_fail(c, "%s: source exchange '%s' does not exist", what, b.source);
        if (!check_destination(c, &b, what) ||
            (strcmp(type, "headers") == 0 && !check_x_match(c, &b, what)))
            return false;
    }
    return true;
}

bool defs_check(defs_ctx *c)
{
    if (!sections_are_arrays(c))
        return false;
    if (!c->only && (!check_users(c) || !check_vhosts(c) || !check_permissions(c) ||
                     !check_global_parameters(c)))
        return false;
    return check_policies(c) && check_parameters(c) && check_exchanges(c) && check_queues(c) &&
           check_bindings(c);
}
