/* definitions: RabbitMQ's definitions document -- users, vhosts,
 * permissions, topic permissions, policies, exchanges, queues and bindings
 * as one JSON object -- exported from the broker and imported into it, as
 * GET/POST /api/definitions[/{vhost}] and `load_definitions` do in
 * RabbitMQ 3.10.
 *
 * An import is validated in full against the document and the broker
 * before anything changes; then it is applied inside one metadata
 * transaction (meta_begin .. meta_commit), so a crash half-way leaves the
 * store with all of it or none. The module uses only broker.h (and
 * store.h's transaction calls) and jansson; it knows nothing of HTTP.
 * Everything runs on the broker's loop thread (or before it starts).
 */
#ifndef WARREN_DEFINITIONS_H
#define WARREN_DEFINITIONS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "../broker/broker.h"

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
 * fields (except in policies, as RabbitMQ has it). Built-in exchanges
 * (amq.*, the default one), exclusive queues and the default exchange's
 * implicit bindings are left out. Returns a new reference (json_decref
 * it), NULL on out-of-memory. */
json_t *defs_export(server *s, vhost *only);

/* Imports `doc` (a JSON object) into the whole broker, or into `only`:
 * then the items' "vhost" fields are ignored and users, vhosts and
 * permissions are not imported. Objects that exist are kept as they are
 * (queues, exchanges, vhosts); users, permissions and policies are set.
 * "parameters" and "global_parameters" are accepted and ignored with one
 * warning. false with `err` and nothing changed when any item is invalid
 * or the store refuses the transaction. */
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

/* Only checks: what defs_import would refuse, without changing anything. */
bool defs_validate(server *s, const json_t *doc, vhost *only, defs_error *err);

#endif
