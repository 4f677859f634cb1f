/* Limits: set_vhost_limits / clear_vhost_limits / list_vhost_limits (a
 * vhost's limits, the runtime parameter vhost-limits/limits, through
 * /api/parameters and /api/vhost-limits) and set_user_limits /
 * clear_user_limits / list_user_limits (/api/user-limits), with
 * rabbitmqctl 3.10's messages and output: a limits object is printed as
 * compact JSON with its keys sorted; --global lists every vhost's (user's)
 * as a "vhost<TAB>limits" table.
 *
 * set_vhost_limits replaces the vhost's limits, as rabbitmqctl does;
 * set_user_limits sets the limits it names and keeps the others (checked
 * here first, so a bad one changes nothing), as rabbitmqctl does.
 */
#include <stdlib.h>
#include <string.h>

#include "wctl_internal.h"

/* The definition argument as a JSON object, or NULL after rabbitmqctl's
 * error. */
static json_t *definition_of(const char *text)
{
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    if (!v)
        wctl_error("JSON decoding error. Reason: badarg");
    return v;
}

/* One limits value as rabbitmqctl prints it: compact JSON, keys sorted;
 * RabbitMQ's [] (no limits left) as {}. */
static void print_limits(const json_t *value)
{
    char *text = json_is_object(value) ? json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    puts(text ? text : "{}");
    free(text);
}

/* A --global listing: "<key>\tlimits" and a row per item of `rows`. */
static void print_table(const wctl_ctx *c, const json_t *rows, const char *key)
{
    size_t i;
    const json_t *row;
    if (!c->o->no_headers && !c->o->silent)
        printf("%s\tlimits\n", key);
    json_array_foreach(rows, i, row) {
        printf("%s\t", json_string_value(json_object_get(row, key)));
        print_limits(json_object_get(row, "value"));
    }
}

/* GETs a limits list; the list (caller owns it), NULL with *rc set (0 and
 * NULL: a 404, the vhost or user is not there). */
static json_t *get_list(wctl_ctx *c, wctl_buf *path, int *rc)
{
    json_t *j = NULL;
    *rc = wctl_get_json(c, wctl_buf_str(path), true, &j, NULL);
    wctl_buf_free(path);
    return j;
}

/* The limits of `who` (a vhost or user, `kind`), or of all with --global:
 * the API's list, as get_list returns it. */
static json_t *list_limits(wctl_ctx *c, const char *kind, const char *who, int *rc)
{
    wctl_buf path = {0}, base = {0};
    wctl_buf_printf(&base, "/api/%s-limits", kind);
    if (c->o->given & WCTL_OPT_GLOBAL) {
        wctl_info(c, "Listing limits for all %ss ...", kind);
        wctl_api_path(&path, wctl_buf_str(&base), (const char *)NULL);
    } else {
        wctl_info(c, "Listing limits for %s \"%s\" ...", kind, who);
        wctl_api_path(&path, wctl_buf_str(&base), who, (const char *)NULL);
    }
    wctl_buf_free(&base);
    return get_list(c, &path, rc);
}

/* ---- vhost limits ----------------------------------------------------------------- */

int wctl_cmd_set_vhost_limits(wctl_ctx *c)
{
    const char *text = c->o->args[0];
    wctl_info(c, "Setting vhost limits to \"%s\" for vhost \"%s\" ...", text, c->o->vhost);
    json_t *value = definition_of(text);
    if (!value)
        return WCTL_EXIT_UNAVAILABLE;
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/parameters", "vhost-limits", c->o->vhost, "limits",
                  (const char *)NULL);
    return wctl_change(c, "PUT", &path, json_pack("{s:o}", "value", value), NULL,
                       wctl_no_such_vhost, c->o->vhost);
}

int wctl_cmd_clear_vhost_limits(wctl_ctx *c)
{
    wctl_info(c, "Clearing vhost \"%s\" limits ...", c->o->vhost);
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/parameters", "vhost-limits", c->o->vhost, "limits",
                  (const char *)NULL);
    return wctl_change(c, "DELETE", &path, NULL, NULL, wctl_no_such_parameter, "limits");
}

int wctl_cmd_list_vhost_limits(wctl_ctx *c)
{
    bool global = c->o->given & WCTL_OPT_GLOBAL;
    int rc;
    json_t *rows = list_limits(c, "vhost", c->o->vhost, &rc);
    if (!rows)
        return rc ? rc : wctl_no_such_vhost(c, c->o->vhost);
    if (global)
        print_table(c, rows, "vhost");
    else if (json_array_size(rows))
        print_limits(json_object_get(json_array_get(rows, 0), "value"));
    else
        putchar('\n'); /* rabbitmqctl's answer for a vhost without limits */
    json_decref(rows);
    return 0;
}

/* ---- user limits ------------------------------------------------------------------ */

static const char *const USER_LIMITS[] = {"max-channels", "max-connections"};

/* 0 when the user exists, else an exit code (rabbitmqctl's error printed
 * for a user that does not). */
static int require_user(wctl_ctx *c, const char *user)
{
    wctl_buf path = {0};
    int rc;
    wctl_api_path(&path, "/api/users", user, (const char *)NULL);
    json_t *u = get_list(c, &path, &rc);
    json_decref(u);
    if (!rc && !u) {
        wctl_error("{:no_such_user, \"%s\"}", user);
        rc = WCTL_EXIT_UNAVAILABLE;
    }
    return rc;
}

/* The definition's keys and values checked as RabbitMQ checks them (its
 * texts); false after the error. */
static bool user_limits_valid(const json_t *def)
{
    const char *key;
    json_t *v;
    if (!json_is_object(def)) {
        wctl_error("JSON decoding error. Reason: badarg");
        return false;
    }
    json_object_foreach((json_t *)def, key, v) {
        if (strcmp(key, USER_LIMITS[0]) != 0 && strcmp(key, USER_LIMITS[1]) != 0) {
            char *term = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            wctl_error("Unrecognised terms [{<<\"%s\">>,%s}] in user-limits", key,
                       term ? term : "");
            free(term);
            return false;
        }
        if (!json_is_integer(v)) {
            wctl_error("%s should be a number", key);
            return false;
        }
    }
    return true;
}

/* PUT (value) or DELETE (NULL) /api/user-limits/<user>/<name>; 0 or an exit code. */
static int change_user_limit(wctl_ctx *c, const char *user, const char *name, json_t *value)
{
    wctl_buf path = {0};
    wctl_response r = {0};
    wctl_api_path(&path, "/api/user-limits", user, name, (const char *)NULL);
    json_t *body = value ? json_pack("{s:O}", "value", value) : NULL;
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    int rc = wctl_call(c, value ? "PUT" : "DELETE", wctl_buf_str(&path), text, NULL, NULL, &r);
    if (!rc && (r.status < 200 || r.status > 299))
        rc = wctl_http_error(c, &r);
    free(text);
    json_decref(body);
    wctl_response_free(&r);
    wctl_buf_free(&path);
    return rc;
}

int wctl_cmd_set_user_limits(wctl_ctx *c)
{
    const char *user = c->o->args[0], *text = c->o->args[1];
    wctl_info(c, "Setting user limits to \"%s\" for user \"%s\" ...", text, user);
    json_t *def = definition_of(text);
    int rc = def && user_limits_valid(def) ? require_user(c, user) : WCTL_EXIT_UNAVAILABLE;
    for (size_t i = 0; !rc && i < 2; i++) { /* in name order, as the API lists them */
        json_t *v = json_object_get(def, USER_LIMITS[i]);
        if (v)
            rc = change_user_limit(c, user, USER_LIMITS[i], v);
    }
    json_decref(def);
    return rc ? rc : wctl_done(c);
}

int wctl_cmd_clear_user_limits(wctl_ctx *c)
{
    const char *user = c->o->args[0], *name = c->o->args[1];
    bool all = strcmp(name, "all") == 0;
    if (all)
        wctl_info(c, "Clearing all limits for user \"%s\" ...", user);
    else
        wctl_info(c, "Clearing \"%s\" limit for user \"%s\" ...", name, user);
    int rc = require_user(c, user);
    for (size_t i = 0; !rc && i < 2; i++)
        if (all || strcmp(name, USER_LIMITS[i]) == 0)
            rc = change_user_limit(c, user, USER_LIMITS[i], NULL);
    return rc ? rc : wctl_done(c);
}

int wctl_cmd_list_user_limits(wctl_ctx *c)
{
    bool global = c->o->given & WCTL_OPT_GLOBAL;
    const char *user = c->o->limits_user ? c->o->limits_user : "guest"; /* rabbitmqctl's default */
    int rc;
    json_t *rows = list_limits(c, "user", user, &rc);
    if (!rows && !rc) {
        wctl_error("{:no_such_user, \"%s\"}", user);
        rc = WCTL_EXIT_UNAVAILABLE;
    }
    if (rc)
        return rc;
    if (global)
        print_table(c, rows, "user");
    else
        print_limits(json_array_size(rows) ? json_object_get(json_array_get(rows, 0), "value")
                                           : NULL);
    json_decref(rows);
    return 0;
}
