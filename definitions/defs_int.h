/* Private to definitions/: the import context shared by validation and
 * application, and the JSON <-> AMQP field table conversion. */
#ifndef WARREN_DEFS_INT_H
#define WARREN_DEFS_INT_H

#include "definitions.h"

/* Room for one converted argument table or policy definition. */
#define DEFS_TABLE_MAX (64 * 1024)

/* One import: the document, the names it declares (so an item may refer
 * to something the same document creates) and a scratch buffer. The name
 * sets are JSON objects used as hash sets: key "vhost\x1fname". */
typedef struct defs_ctx {
    server *s;
    vhost *only;
    const json_t *doc;
    json_t *vhosts, *users, *exchanges, *queues; /* exchanges map to their type */
    uint8_t table[DEFS_TABLE_MAX];
    defs_error *err;
} defs_ctx;

/* The `key` list of the document; NULL when absent (jansson's array
 * functions treat NULL as empty). defs_check makes sure it is an array. */
const json_t *defs_section(const defs_ctx *c, const char *key);
/* The item's string field, or NULL when absent or not a string. */
const char *defs_str(const json_t *item, const char *key);
/* The vhost an item belongs to: `only`'s name, else its "vhost" field
 * (NULL when missing). */
const char *defs_vhost_of(const defs_ctx *c, const json_t *item);
/* "vhost\x1fname" into buf (cap >= 520). */
const char *defs_key(char *buf, size_t cap, const char *vh, const char *name);
/* Whether vhost `name` exists in the broker or the document. */
bool defs_vhost_known(const defs_ctx *c, const char *name);
/* Fails the import: formats err->reason; always returns false. */
bool defs_fail(defs_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A JSON object as an AMQP table (content without the length prefix) in
 * c->table: integer -> 'l', real -> 'd', string -> 'S', boolean -> 't',
 * array -> 'A', object -> 'F', and null -> 'V' when allow_null (policy
 * definitions; queue and binding arguments refuse it). Absent, null or an
 * empty array is the empty table. false with the reason in `why`. */
bool defs_table_from_json(defs_ctx *c, const json_t *obj, bool allow_null, amqp_bytes *out,
                          char *why, size_t whylen);
/* The same into buf (cap bytes) instead of c->table. */
bool defs_table_into(const json_t *obj, bool allow_null, uint8_t *buf, size_t cap,
                     amqp_bytes *out, char *why, size_t whylen);
/* A validated table as a JSON object, as RabbitMQ exports arguments. New
 * reference; NULL on OOM. */
json_t *defs_table_to_json(amqp_bytes table);
/* A name as a JSON string (bytes that are not UTF-8 become U+FFFD). */
json_t *defs_json_bytes(amqp_bytes b);

/* Readers: item i of its section into the broker's spec struct, checking
 * the JSON types of its fields (defaults as the management API's PUT).
 * `what` receives the item's description for messages ("queue 'q' in
 * vhost 'v'"); strings point into the document, tables into c->table
 * (valid until the next read). false with err set. */
typedef struct defs_binding {
    const char *vhost, *source, *destination, *routing_key;
    bool to_queue;
    amqp_bytes arguments;
} defs_binding;

/* A parameter: vhost NULL and component NULL for a global one. */
typedef struct defs_parameter {
    const char *vhost, *component, *name;
    const json_t *value;
} defs_parameter;

bool defs_read_user(defs_ctx *c, const json_t *it, size_t i, access_user_spec *u, char *tags,
                    size_t cap, char *what, size_t whatlen);
bool defs_read_vhost(defs_ctx *c, const json_t *it, size_t i, meta_vhost *v, char *tags,
                     size_t cap, char *what, size_t whatlen);
bool defs_read_permission(defs_ctx *c, const json_t *it, size_t i, meta_permission *p, char *what,
                          size_t whatlen);
bool defs_read_topic_permission(defs_ctx *c, const json_t *it, size_t i, meta_topic_permission *p,
                                char *what, size_t whatlen);
bool defs_read_policy(defs_ctx *c, const json_t *it, size_t i, policy_spec *p, const char **vh,
                      char *what, size_t whatlen);
bool defs_read_queue(defs_ctx *c, const json_t *it, size_t i, queue_spec *q, const char **vh,
                     char *what, size_t whatlen);
bool defs_read_exchange(defs_ctx *c, const json_t *it, size_t i, route_exchange_spec *x,
                        const char **vh, char *what, size_t whatlen);
bool defs_read_binding(defs_ctx *c, const json_t *it, size_t i, defs_binding *b, char *what,
                       size_t whatlen);
bool defs_read_parameter(defs_ctx *c, const json_t *it, size_t i, defs_parameter *p, char *what,
                         size_t whatlen);
bool defs_read_global_parameter(defs_ctx *c, const json_t *it, size_t i, defs_parameter *p,
                                char *what, size_t whatlen);

/* defs_param_validate with the caller's buffer (cap bytes) for an
 * operator policy's definition, which *op then describes (its strings
 * point into value, its definition into buf). */
bool defs_param_check(const char *component, const char *name, const json_t *value, uint8_t *buf,
                      size_t cap, policy_spec *op, char *why, size_t whylen);

/* The passes of an import (validate.c, apply.c). check: true when every
 * item is valid. apply: false (err set) when the broker or the store
 * refused something, already undone in memory as far as it goes. */
bool defs_check(defs_ctx *c);
bool defs_apply(defs_ctx *c);

#endif
