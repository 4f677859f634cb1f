/* Users, vhosts, permissions, topic permissions and policies. The API's
 * PUT both creates and replaces, where rabbitmqctl's commands each do one
 * thing, so a command reads first where rabbitmqctl's meaning needs it:
 * add_user refuses an existing user, change_password keeps the tags,
 * set_user_tags keeps the password hash. The API answers "vhost or user not
 * found" in one breath; rabbitmqctl names which, so on such an error the
 * two are looked up to say so. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wctl_internal.h"

/* The request's answer status, or -exit_code when there was none. */
static int request(wctl_ctx *c, const char *method, const wctl_buf *path, json_t *body,
                   wctl_response *r)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    int rc = wctl_call(c, method, wctl_buf_str(path), text, NULL, NULL, r);
    free(text);
    return rc ? -rc : r->status;
}

/* 1 if GET base/name answers 200, 0 if 404, -exit_code otherwise. */
static int exists(wctl_ctx *c, const char *base, const char *name)
{
    wctl_buf path = {0};
    wctl_api_path(&path, base, name, (const char *)NULL);
    json_t *j;
    int status = 0;
    int rc = wctl_get_json(c, wctl_buf_str(&path), true, &j, &status);
    wctl_buf_free(&path);
    json_decref(j);
    return rc ? -rc : status != 404;
}

/* After a refused permission change: which of vhost and user is missing,
 * in rabbitmqctl's words; 0 if both exist. */
static int missing_vhost_or_user(wctl_ctx *c, const char *vhost, const char *user)
{
    int e = exists(c, "/api/vhosts", vhost);
    if (e < 0)
        return -e;
    if (e == 0) {
        wctl_error("Virtual host %s does not exist", vhost);
        return WCTL_EXIT_UNAVAILABLE;
    }
    e = exists(c, "/api/users", user);
    if (e < 0)
        return -e;
    if (e == 0) {
        wctl_error("User %s does not exist", user);
        return WCTL_EXIT_NOUSER;
    }
    return 0;
}

static int no_such_user(wctl_ctx *c, const char *user)
{
    (void)c;
    wctl_error("User \"%s\" does not exist", user);
    return WCTL_EXIT_NOUSER;
}

/* The password argument, or one line of stdin as rabbitmqctl reads it;
 * NULL (reported) when there is neither. */
static const char *password_arg(wctl_ctx *c, char *buf, size_t len)
{
    if (c->o->nargs > 1)
        return c->o->args[1];
    if (!c->o->quiet && !c->o->silent)
        fputs("Password: ", stdout);
    fflush(stdout);
    bool got = fgets(buf, (int)len, stdin) != NULL;
    if (!isatty(STDIN_FILENO)) /* no echo of the typed line to end the prompt's */
        putchar('\n');
    if (!got) {
        wctl_error("Password is not provided via argument or stdin");
        return NULL;
    }
    buf[strcspn(buf, "\r\n")] = '\0';
    return buf;
}

/* GET /api/users/<name>; NULL with *rc = 0 when there is no such user. */
static json_t *get_user(wctl_ctx *c, const char *name, int *rc)
{
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/users", name, (const char *)NULL);
    json_t *j;
    *rc = wctl_get_json(c, wctl_buf_str(&path), true, &j, NULL);
    wctl_buf_free(&path);
    return j;
}

/* A user's tags as the API's PUT takes them: "a,b". */
static void tags_text(const json_t *tags, wctl_buf *out)
{
    size_t i;
    const json_t *t;
    if (json_is_string(tags))
        wctl_buf_puts(out, json_string_value(tags));
    json_array_foreach(tags, i, t) {
        wctl_buf_printf(out, "%s%s", i ? "," : "", json_string_value(t) ? json_string_value(t) : "");
    }
}

/* ---- users ----------------------------------------------------------------------------- */

int wctl_cmd_add_user(wctl_ctx *c)
{
    const char *user = c->o->args[0];
    char buf[1024];
    wctl_info(c, "Adding user \"%s\" ...", user);
    const char *pass = password_arg(c, buf, sizeof buf);
    if (!pass)
        return WCTL_EXIT_DATAERR;
    int e = exists(c, "/api/users", user);
    if (e < 0)
        return -e;
    if (e) {
        wctl_error("User \"%s\" already exists", user);
        return WCTL_EXIT_SOFTWARE;
    }
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/users", user, (const char *)NULL);
    json_t *body = json_pack("{s:s, s:s}", "password", pass, "tags", "");
    int rc = wctl_change(c, "PUT", &path, body, NULL, NULL, NULL);
    if (rc == 0)
        wctl_info(c, "Done. Don't forget to grant the user permissions to some virtual hosts! "
                     "See 'warrenctl help set_permissions' to learn more.");
    return rc;
}

int wctl_cmd_delete_user(wctl_ctx *c)
{
    const char *user = c->o->args[0];
    wctl_info(c, "Deleting user \"%s\" ...", user);
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/users", user, (const char *)NULL);
    return wctl_change(c, "DELETE", &path, NULL, NULL, no_such_user, user);
}

int wctl_cmd_change_password(wctl_ctx *c)
{
    const char *user = c->o->args[0];
    char buf[1024];
    wctl_info(c, "Changing password for user \"%s\" ...", user);
    const char *pass = password_arg(c, buf, sizeof buf);
    if (!pass)
        return WCTL_EXIT_DATAERR;
    int rc;
    json_t *u = get_user(c, user, &rc);
    if (rc || !u)
        return rc ? rc : no_such_user(c, user);
    wctl_buf tags = {0}, path = {0};
    tags_text(json_object_get(u, "tags"), &tags);
    wctl_api_path(&path, "/api/users", user, (const char *)NULL);
    json_t *body = json_pack("{s:s, s:s}", "password", pass, "tags", wctl_buf_str(&tags));
    rc = wctl_change(c, "PUT", &path, body, NULL, NULL, NULL);
    wctl_buf_free(&tags);
    json_decref(u);
    return rc;
}

/* RabbitMQ answers /api/whoami with 401 "Not management user" to a user
 * whose password is right but who has no management tag: authenticated. */
static bool credentials_accepted(const wctl_response *r)
{
    if (r->status >= 200 && r->status < 300)
        return true;
    wctl_buf why = {0};
    wctl_error_reason(r, &why);
    bool ok = r->status == 401 && strstr(wctl_buf_str(&why), "Not management user");
    wctl_buf_free(&why);
    return ok;
}

int wctl_cmd_authenticate_user(wctl_ctx *c)
{
    const char *user = c->o->args[0];
    char buf[1024], auth[1200];
    wctl_info(c, "Authenticating user \"%s\" ...", user);
    const char *pass = password_arg(c, buf, sizeof buf);
    if (!pass)
        return WCTL_EXIT_DATAERR;
    wctl_buf plain = {0}, b64 = {0};
    wctl_buf_printf(&plain, "%s:%s", user, pass);
    wctl_base64(&b64, (const unsigned char *)wctl_buf_str(&plain), plain.len);
    snprintf(auth, sizeof auth, "Basic %s", wctl_buf_str(&b64));
    wctl_buf_free(&plain);
    wctl_buf_free(&b64);
    wctl_response r;
    int rc = wctl_call(c, "GET", "/api/whoami", NULL, NULL, auth, &r);
    if (rc)
        return rc;
    if (credentials_accepted(&r)) {
        rc = c->o->json ? wctl_done(c) : (puts("Success"), WCTL_EXIT_OK);
    } else if (r.status == 401) {
        wctl_error("Error: failed to authenticate user \"%s\"\nuser '%s' - invalid credentials",
                   user, user);
        rc = WCTL_EXIT_DATAERR;
    } else {
        rc = wctl_http_error(c, &r);
    }
    wctl_response_free(&r);
    return rc;
}

int wctl_cmd_set_user_tags(wctl_ctx *c)
{
    const char *user = c->o->args[0];
    wctl_buf shown = {0}, tags = {0}, path = {0};
    for (int i = 1; i < c->o->nargs; i++) {
        wctl_buf_printf(&shown, "%s%s", i > 1 ? ", " : "", c->o->args[i]);
        wctl_buf_printf(&tags, "%s%s", i > 1 ? "," : "", c->o->args[i]);
    }
    wctl_info(c, "Setting tags for user \"%s\" to [%s] ...", user, wctl_buf_str(&shown));
    wctl_buf_free(&shown);
    int rc;
    json_t *u = get_user(c, user, &rc);
    if (rc || !u) {
        wctl_buf_free(&tags);
        return rc ? rc : no_such_user(c, user);
    }
    /* the stored hash goes back unchanged, so the password stays */
    json_t *body = json_pack("{s:O?, s:s}", "password_hash", json_object_get(u, "password_hash"),
                             "tags", wctl_buf_str(&tags));
    json_t *alg = json_object_get(u, "hashing_algorithm");
    if (json_is_string(alg))
        json_object_set(body, "hashing_algorithm", alg);
    wctl_api_path(&path, "/api/users", user, (const char *)NULL);
    rc = wctl_change(c, "PUT", &path, body, NULL, NULL, NULL);
    wctl_buf_free(&tags);
    json_decref(u);
    return rc;
}

/* ---- vhosts -------------------------------------------------------------------------- */

int wctl_cmd_add_vhost(wctl_ctx *c)
{
    const wctl_opts *o = c->o;
    const char *vhost = o->args[0];
    wctl_info(c, "Adding vhost \"%s\" ...", vhost);
    int e = exists(c, "/api/vhosts", vhost);
    if (e < 0)
        return -e;
    if (e) /* rabbitmqctl: adding an existing vhost is not an error */
        return wctl_done(c);
    json_t *body = json_object();
    if (o->description)
        json_object_set_new(body, "description", json_string(o->description));
    if (o->tags)
        json_object_set_new(body, "tags", json_string(o->tags));
    if (o->queue_type)
        json_object_set_new(body, "default_queue_type", json_string(o->queue_type));
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/vhosts", vhost, (const char *)NULL);
    return wctl_change(c, "PUT", &path, body, NULL, NULL, NULL);
}

int wctl_cmd_delete_vhost(wctl_ctx *c)
{
    const char *vhost = c->o->args[0];
    wctl_info(c, "Deleting vhost \"%s\" ...", vhost);
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/vhosts", vhost, (const char *)NULL);
    return wctl_change(c, "DELETE", &path, NULL, NULL, wctl_no_such_vhost, vhost);
}

/* ---- permissions ----------------------------------------------------------------------- */

/* PUT or DELETE of a permission resource; a refusal names what is missing.
 * A DELETE of a permission that is not there is fine, as in rabbitmqctl. */
static int permission_change(wctl_ctx *c, const char *method, wctl_buf *path, json_t *body,
                             const char *user)
{
    wctl_response r;
    int st = request(c, method, path, body, &r);
    wctl_buf_free(path);
    if (st < 0)
        return -st;
    int rc;
    if (st >= 200 && st < 300) {
        rc = wctl_done(c);
    } else if (st == 400 || st == 404) {
        rc = missing_vhost_or_user(c, c->o->vhost, user);
        if (rc == 0)
            rc = st == 404 && strcmp(method, "DELETE") == 0 ? wctl_done(c) : wctl_http_error(c, &r);
    } else {
        rc = wctl_http_error(c, &r);
    }
    wctl_response_free(&r);
    return rc;
}

int wctl_cmd_set_permissions(wctl_ctx *c)
{
    const char *const *a = c->o->args;
    wctl_info(c, "Setting permissions for user \"%s\" in vhost \"%s\" ...", a[0], c->o->vhost);
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/permissions", c->o->vhost, a[0], (const char *)NULL);
    return permission_change(c, "PUT", &path,
                             json_pack("{s:s, s:s, s:s}", "configure", a[1], "write", a[2],
                                       "read", a[3]),
                             a[0]);
}

int wctl_cmd_clear_permissions(wctl_ctx *c)
{
    const char *user = c->o->args[0];
    wctl_info(c, "Clearing permissions for user \"%s\" in vhost \"%s\" ...", user, c->o->vhost);
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/permissions", c->o->vhost, user, (const char *)NULL);
    return permission_change(c, "DELETE", &path, NULL, user);
}

int wctl_cmd_set_topic_permissions(wctl_ctx *c)
{
    const char *const *a = c->o->args;
    wctl_info(c, "Setting topic permissions on \"%s\" for user \"%s\" in vhost \"%s\" ...", a[1],
              a[0], c->o->vhost);
    wctl_buf path = {0};
    wctl_api_path(&path, "/api/topic-permissions", c->o->vhost, a[0], (const char *)NULL);
    return permission_change(c, "PUT", &path,
                             json_pack("{s:s, s:s, s:s}", "exchange", a[1], "write", a[2],
                                       "read", a[3]),
                             a[0]);
}

int wctl_cmd_clear_topic_permissions(wctl_ctx *c)
{
    const char *user = c->o->args[0];
    const char *exchange = c->o->nargs > 1 ? c->o->args[1] : NULL;
    wctl_buf path = {0};
    if (exchange)
        wctl_info(c, "Clearing topic permissions on \"%s\" for user \"%s\" in vhost \"%s\" ...",
                  exchange, user, c->o->vhost);
    else
        wctl_info(c, "Clearing topic permissions for user \"%s\" in vhost \"%s\" ...", user,
                  c->o->vhost);
    wctl_api_path(&path, "/api/topic-permissions", c->o->vhost, user, exchange,
                  (const char *)NULL);
    return permission_change(c, "DELETE", &path, NULL, user);
}

/* ---- policies ------------------------------------------------------------------------------ */

int wctl_cmd_set_policy(wctl_ctx *c)
{
    const wctl_opts *o = c->o;
    bool op = strcmp(c->cmd->name, "set_operator_policy") == 0;
    const char *const *a = o->args;
    wctl_info(c, "Setting %s \"%s\" for pattern \"%s\" to \"%s\" with priority \"%d\" for vhost \"%s\" ...",
              op ? "operator policy override" : "policy", a[0], a[1], a[2], o->priority, o->vhost);
    json_t *definition = json_loads(a[2], 0, NULL);
    if (!definition) {
        wctl_error("JSON decoding error. Reason: badarg");
        return WCTL_EXIT_UNAVAILABLE;
    }
    json_t *body = json_pack("{s:s, s:o, s:i, s:s}", "pattern", a[1], "definition", definition,
                             "priority", o->priority, "apply-to", o->apply_to ? o->apply_to : "all");
    wctl_buf path = {0};
    wctl_api_path(&path, op ? "/api/operator-policies" : "/api/policies", o->vhost, a[0],
                  (const char *)NULL);
    return wctl_change(c, "PUT", &path, body, NULL, wctl_no_such_vhost, o->vhost);
}

int wctl_cmd_clear_policy(wctl_ctx *c)
{
    bool op = strcmp(c->cmd->name, "clear_operator_policy") == 0;
    const char *name = c->o->args[0];
    wctl_info(c, "Clearing %s \"%s\" on vhost \"%s\" ...", op ? "operator policy" : "policy", name,
              c->o->vhost);
    wctl_buf path = {0};
    wctl_api_path(&path, op ? "/api/operator-policies" : "/api/policies", c->o->vhost, name,
                  (const char *)NULL);
    return wctl_change(c, "DELETE", &path, NULL, NULL, wctl_no_such_parameter, name);
}
