/* Runtime parameters: set_parameter / clear_parameter (a vhost's, PUT and
 * DELETE /api/parameters/{component}/{vhost}/{name}) and
 * set_global_parameter / clear_global_parameter (/api/global-parameters/
 * {name}), with rabbitmqctl's messages. The value is JSON, as rabbitmqctl
 * takes it; the broker checks it and its refusal is printed as the error. */
#include <string.h>

#include "wctl_internal.h"

/* The value argument as JSON, or NULL after rabbitmqctl's error. */
static json_t *value_of(const char *text)
{
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    if (!v)
        wctl_error("JSON decoding error. Reason: badarg");
    return v;
}

int wctl_no_such_parameter(wctl_ctx *c, const char *name)
{
    (void)c;
    (void)name;
    wctl_error("Parameter does not exist");
    return WCTL_EXIT_UNAVAILABLE;
}

int wctl_cmd_set_parameter(wctl_ctx *c)
{
    const char *const *a = c->o->args;
    bool global = strcmp(c->cmd->name, "set_global_parameter") == 0;
    wctl_buf path = {0};
    if (global) {
        wctl_info(c, "Setting global runtime parameter \"%s\" to \"%s\" ...", a[0], a[1]);
        wctl_api_path(&path, "/api/global-parameters", a[0], (const char *)NULL);
    } else {
        wctl_info(c, "Setting runtime parameter \"%s\" for component \"%s\" to \"%s\" in vhost "
                     "\"%s\" ...", a[1], a[0], a[2], c->o->vhost);
        wctl_api_path(&path, "/api/parameters", a[0], c->o->vhost, a[1], (const char *)NULL);
    }
    json_t *value = value_of(a[global ? 1 : 2]);
    if (!value) {
        wctl_buf_free(&path);
        return WCTL_EXIT_UNAVAILABLE;
    }
    return wctl_change(c, "PUT", &path, json_pack("{s:o}", "value", value), NULL,
                       global ? NULL : wctl_no_such_vhost, c->o->vhost);
}

int wctl_cmd_clear_parameter(wctl_ctx *c)
{
    const char *const *a = c->o->args;
    bool global = strcmp(c->cmd->name, "clear_global_parameter") == 0;
    wctl_buf path = {0};
    if (global) {
        wctl_info(c, "Clearing global runtime parameter \"%s\" ...", a[0]);
        wctl_api_path(&path, "/api/global-parameters", a[0], (const char *)NULL);
    } else {
        wctl_info(c, "Clearing runtime parameter \"%s\" for component \"%s\" on vhost \"%s\" ...",
                  a[1], a[0], c->o->vhost);
        wctl_api_path(&path, "/api/parameters", a[0], c->o->vhost, a[1], (const char *)NULL);
    }
    return wctl_change(c, "DELETE", &path, NULL, NULL, wctl_no_such_parameter, a[global ? 0 : 1]);
}
