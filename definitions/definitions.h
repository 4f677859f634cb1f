/* definitions: RabbitMQ's definitions document -- users, vhosts,
 * permissions, topic permissions, runtime parameters (global and per
 * vhost), policies, exchanges, queues and bindings as one JSON object --
 * exported from the broker and imported into it, as GET/POST
 * /api/definitions[/{vhost}] and `load_definitions` do in RabbitMQ 3.10;
 * and the runtime parameters as JSON for the management API.
 *
 * An import is validated in full against the document and the broker
 * before anything changes; then it is applied inside one metadata
 * transaction (meta_begin .. meta_commit), so a crash half-way leaves the
 * store with all of it or none. The module uses only admin/admin.h (and
 * store.h's transaction calls) and jansson; it knows nothing of HTTP.
 * Everything runs on the broker's loop thread (or before it starts).
 */
#ifndef WARREN_DEFINITIONS_H
#define WARREN_DEFINITIONS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "../admin/admin.h"

/* Why an import was refused. `line` and `column` locate a JSON syntax
 * error (0 when the reason is not about syntax); `reason` is one line that
 * names the item, e.g. "queue 'orders' in vhost '/': x-message-ttl must
 * be an integer". */
typedef struct defs_error {
    int line, column;
    char reason[512];
} defs_error;

/* The definitions of the whole broker (only NULL) or of one vhost, in
 * RabbitMQ 3.10's shape and key order: the whole form has rabbit_version,
 * rabbitmq_version, product_name, product_version, users, vhosts,
 * permissions, topic_permissions, parameters, global_parameters, policies,
 * queues, exchanges, bindings; the per-vhost form has rabbit_version,
 * parameters, policies, queues, exchanges, bindings, without "vhost"
 * fields (except in parameters and policies, as RabbitMQ has it).
 * Parameters include the operator policies (component operator_policy);
 * global_parameters include internal_cluster_id, as 3.10.8's. Built-in exchanges
 * (amq.*, the default one), exclusive queues and the default exchange's
 * implicit bindings are left out. Returns a new reference (json_decref
 * it), NULL on out-of-memory. */
json_t *defs_export(server *s, vhost *only);

/* Imports `doc` (a JSON object) into the whole broker, or into `only`:
 * then the items' "vhost" fields are ignored and users, vhosts,
 * permissions and global parameters are not imported. Objects that exist
 * are kept as they are (queues, exchanges, vhosts); users, permissions,
 * policies and parameters are set (the node's own internal_cluster_id is
 * kept). false with `err` and nothing changed when any item is invalid or
 * the store refuses the transaction. */
bool defs_import(server *s, const json_t *doc, vhost *only, defs_error *err);

/* The same for a document in text: a syntax error fills err's line and
 * column (reason "JSON syntax error: ..."). */
bool defs_import_text(server *s, const char *text, size_t len, vhost *only, defs_error *err);

/* Start-up (`load_definitions`, `--definitions`): reads and imports the
 * file -- or, for a directory, each of its *.json files in name order, each
 * in its own transaction, stopping at the first that fails. false with the
 * reason in `err` when one cannot be read, does not parse (line and column
 * set) or does not validate; `failed` (failedlen bytes) then names that
 * file. */
bool defs_import_file(server *s, const char *path, defs_error *err, char *failed,
                      size_t failedlen);

/* ---- runtime parameters (params.c) ------------------------------------------ */

/* RabbitMQ's runtime parameters of a vhost, as the management API and the
 * definitions show them: component, name and a JSON value. Warren takes
 * operator_policy (its operator policies, value {pattern, definition,
 * priority, apply-to}), shows policy (the policies, read only), and keeps
 * shovel, federation-upstream and federation-upstream-set (the shovels and
 * federation links read them), and vhost-limits (a vhost's limits, name "limits",
 * enforced -- see queue.h); any other component is refused, as RabbitMQ refuses one
 * whose plugin is not enabled. Global parameters are any name -> any JSON
 * value. */
enum {
    DEFS_OPERATOR_POLICY,
    DEFS_POLICY,
    DEFS_SHOVEL,
    DEFS_FEDERATION_UPSTREAM,
    DEFS_FEDERATION_UPSTREAM_SET,
    DEFS_VHOST_LIMITS,
    DEFS_PARAM_COMPONENTS
};
/* A component's name by index (NULL out of range), and back (-1: not one
 * Warren takes). */
const char *defs_param_component_name(int i);
int defs_param_component(const char *name);

/* Checks a value as RabbitMQ's rabbit_runtime_parameters:set does for that
 * component, without changing anything: true, or false with RabbitMQ's
 * text in why -- "Validation failed\n\n" and a line per problem ("component
 * x not found", "Key \"uri\" not found in up1", ...), or "policies may not
 * be set using this method". */
bool defs_param_validate(const char *component, const char *name, const json_t *value,
                         char *why, size_t whylen);
/* Validates, then sets it (an operator policy through the policy engine,
 * applied at once). *created says whether it is new. false with why
 * (validation, or the store refused). */
bool defs_param_put(vhost *v, const char *component, const char *name, const json_t *value,
                    bool *created, char *why, size_t whylen);
/* false when there is none (policies are never deleted here) or the store
 * refused. */
bool defs_param_delete(vhost *v, const char *component, const char *name);
/* The value (a new reference), NULL when there is no such parameter. */
json_t *defs_param_value(vhost *v, const char *component, const char *name);
/* fn(arg, component index, name) for the parameters of v of `component`,
 * or with NULL of every component but policy (RabbitMQ's /api/parameters);
 * an unknown component has none. fn must not change them. */
void defs_param_foreach(vhost *v, const char *component,
                        void (*fn)(void *arg, int component, const char *name), void *arg);
/* A global parameter: set (false: the store refused or out of memory) and
 * read (a new reference; NULL when none). Delete with param_delete on
 * server_params. */
bool defs_global_param_put(server *s, const char *name, const json_t *value, bool *created);
json_t *defs_global_param_value(server *s, const char *name);

/* ---- limits (params.c) ------------------------------------------------------ */

/* A vhost's limits, RabbitMQ's /api/vhost-limits: the value of its
 * (vhost-limits, limits) parameter (a new reference; NULL when it has
 * none; [] once its last limit was cleared, as RabbitMQ keeps it). set
 * puts one limit (`name` max-connections or max-queues) into it, checked
 * as the parameter is (false with RabbitMQ's text in why); clear takes one
 * out (true when there was none; false when the store refused). */
json_t *defs_vhost_limits(vhost *v);
bool defs_vhost_limit_set(vhost *v, const char *name, json_t *value, char *why, size_t whylen);
bool defs_vhost_limit_clear(vhost *v, const char *name);
/* A user's limits {"max-connections": N, "max-channels": N} checked as
 * RabbitMQ checks them: false with its text ("Unrecognised terms [...] in
 * user-limits", "max-channels should be a number, actually was ..."). */
bool defs_user_limits_validate(const json_t *value, char *why, size_t whylen);

/* A JSON value as Erlang prints it in RabbitMQ's messages: a string is a
 * binary <<"...">>, null the atom null; lists and objects abridged. */
void defs_erlang_term(const json_t *v, char *out, size_t cap);
/* A policy's "priority" (absent: 0) as Warren keeps it, an integer in 32
 * bits (RabbitMQ also takes a fraction): false with RabbitMQ's form of
 * the message, ending in a newline. */
bool defs_json_priority(const json_t *v, int32_t *out, char *why, size_t cap);

#endif
