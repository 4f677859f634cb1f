/* mgmt: the management plane -- RabbitMQ's HTTP API (/api/...) served by
 * Warren's http/ server on the broker's own event loop, on management.tcp.ip /
 * management.tcp.port and on the control socket data_dir/warrenctl.sock.
 *
 * The module reads and changes the broker only through admin/admin.h's
 * introspection and admin functions; the broker knows nothing of HTTP or
 * JSON. Besides the server, the header exposes the pieces the server is
 * built from (a streaming JSON writer, AMQP table <-> JSON conversion, path
 * decoding and matching, list paging), so they can be tested alone.
 */
#ifndef WARREN_MGMT_H
#define WARREN_MGMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../admin/admin.h"

struct evbuffer;
struct json_t;

/* ---- the server --------------------------------------------------------- */

typedef struct mgmt mgmt;

/* Starts the HTTP listener (logs "management listening on HOST:PORT") and
 * the control socket (logs "control socket at PATH") on the server's loop.
 * NULL when either cannot be set up (logged). */
mgmt *mgmt_new(server *s);
/* Stops both and removes the control socket. NULL is fine. */
void mgmt_free(mgmt *m);
/* This node leads cluster `c` (cluster/): /api/nodes lists every node of
 * it, /api/overview names it, /api/cluster and /metrics' warren_cluster_*
 * show its status. NULL (the default): a single node, whose responses
 * know nothing of clusters. */
struct cluster;
void mgmt_set_cluster(mgmt *m, struct cluster *c);
/* The dynamic shovels (shovel/) /api/shovels shows and the parameter
 * routes keep in step; NULL: none run here. */
struct shovels;
void mgmt_set_shovels(mgmt *m, struct shovels *sh);

/* ---- JSON writer -------------------------------------------------------- */

/* Writes JSON onto an evbuffer as it is built (through a small staging
 * buffer). Strings are escaped byte by byte: quotes, backslashes, control
 * characters and < > & as \uXXXX escapes, and every byte that is not part
 * of valid UTF-8 as U+FFFD, so any name a client sent yields valid JSON.
 * Commas are placed by the writer. Nesting is limited to MGMT_JSON_DEPTH;
 * deeper values are written as null. */
typedef struct mgmt_json mgmt_json;
#define MGMT_JSON_DEPTH 64

/* NULL on OOM. The writer does not own `out`. */
mgmt_json *mgmt_json_new(struct evbuffer *out);
/* Flushes what is staged and frees the writer. */
void mgmt_json_free(mgmt_json *w);
void mgmt_json_flush(mgmt_json *w);
/* Bytes written so far (staged and flushed). */
size_t mgmt_json_written(const mgmt_json *w);

/* Keeps only the listed fields ("name,messages,message_stats.publish_details.rate")
 * of the objects whose keys sit at nesting `depth` (1 = the top object, 2 =
 * objects in a top-level array), as RabbitMQ does: a field name selects its
 * whole value; a dotted path, of any depth, selects keys of nested objects
 * (and of the objects in a nested array); a path through a scalar keeps the
 * scalar; keys named by no path are left out, so an object none of whose
 * keys is named is written empty. Returns false on OOM. */
bool mgmt_json_columns(mgmt_json *w, const char *csv, int depth);

void mgmt_json_obj(mgmt_json *w);
void mgmt_json_end_obj(mgmt_json *w);
void mgmt_json_arr(mgmt_json *w);
void mgmt_json_end_arr(mgmt_json *w);
void mgmt_json_key(mgmt_json *w, const char *key);
void mgmt_json_key_bytes(mgmt_json *w, amqp_bytes key);
void mgmt_json_str(mgmt_json *w, const char *s); /* NULL writes null */
void mgmt_json_bytes(mgmt_json *w, amqp_bytes s);
void mgmt_json_int(mgmt_json *w, int64_t v);
void mgmt_json_uint(mgmt_json *w, uint64_t v);
void mgmt_json_double(mgmt_json *w, double v); /* NaN and infinities as null */
void mgmt_json_bool(mgmt_json *w, bool v);
void mgmt_json_null(mgmt_json *w);
/* key + value in one call */
void mgmt_json_kstr(mgmt_json *w, const char *key, const char *v);
void mgmt_json_kbytes(mgmt_json *w, const char *key, amqp_bytes v);
void mgmt_json_kint(mgmt_json *w, const char *key, int64_t v);
void mgmt_json_kuint(mgmt_json *w, const char *key, uint64_t v);
void mgmt_json_kdouble(mgmt_json *w, const char *key, double v);
void mgmt_json_kbool(mgmt_json *w, const char *key, bool v);
void mgmt_json_knull(mgmt_json *w, const char *key);

/* A parsed JSON value (jansson's) through the writer: what a client sent,
 * or a stored runtime parameter. */
void mgmt_json_jansson(mgmt_json *w, const struct json_t *v);

/* Length of the valid UTF-8 sequence at p (1..4 bytes), 0 when it is not
 * one (overlong forms and surrogates included). */
size_t mgmt_utf8_len(const uint8_t *p, size_t n);

/* ---- Prometheus text format --------------------------------------------- */

/* Writes Prometheus text exposition format 0.0.4 onto an evbuffer as it is
 * built (through a small staging buffer), as the JSON writer does:
 *
 *   # TYPE name type
 *   # HELP name help
 *   name{key="value",...} value
 *
 * Label values are escaped as the format asks (\\, \", \n) and every byte
 * that is not part of valid UTF-8 becomes U+FFFD, so any queue name a client
 * sent yields a parsable line. Help text escapes \\ and \n. */
typedef struct mgmt_prom mgmt_prom;

/* NULL on OOM. The writer does not own `out`. */
mgmt_prom *mgmt_prom_new(struct evbuffer *out);
/* Flushes what is staged and frees the writer. NULL is fine. */
void mgmt_prom_free(mgmt_prom *p);
void mgmt_prom_flush(mgmt_prom *p);
/* Bytes written so far (staged and flushed). */
size_t mgmt_prom_written(const mgmt_prom *p);

/* The # TYPE and # HELP lines of a family. */
void mgmt_prom_family(mgmt_prom *p, const char *name, const char *type, const char *help);
/* A sample: begin, then any labels, then its value (which ends the line). */
void mgmt_prom_begin(mgmt_prom *p, const char *name);
void mgmt_prom_label(mgmt_prom *p, const char *key, amqp_bytes value);
void mgmt_prom_label_str(mgmt_prom *p, const char *key, const char *value);
void mgmt_prom_uint(mgmt_prom *p, uint64_t v);
/* NaN, +Inf and -Inf as the format spells them. */
void mgmt_prom_double(mgmt_prom *p, double v);

/* ---- AMQP field tables <-> JSON ----------------------------------------- */

/* A validated table (content without its length) as a JSON object, as
 * RabbitMQ shows arguments and headers: integers of every width and
 * timestamps as numbers, float/double as numbers, decimals as their value,
 * booleans, strings and byte arrays as strings, arrays as lists, tables as
 * objects, void as null. Keys repeat as they came. */
void mgmt_json_table(mgmt_json *w, amqp_bytes table);
void mgmt_json_field(mgmt_json *w, const amqp_field *f);

/* A JSON object as an AMQP table, as RabbitMQ converts arguments and
 * headers: integer -> long ('l'), real -> double ('d'), true/false -> 't',
 * string -> longstr ('S'), list -> array ('A'), object -> table ('F');
 * null is refused ("null_not_allowed"). Writes the table with its length
 * prefix. False with the reason when the value cannot be converted or the
 * writer overflows. */
bool mgmt_table_from_json(const struct json_t *obj, amqp_writer *w, char *why, size_t whylen);

/* ---- paths -------------------------------------------------------------- */

#define MGMT_PATH_SEGMENTS 12

/* Splits an URI path ("/api/queues/%2F/q") into percent-decoded segments
 * (decoded bytes are copied into buf). A trailing slash adds no segment.
 * Returns the number of segments, or -1 for a malformed escape, too many
 * segments or a path longer than buf. */
int mgmt_path_decode(const char *path, char *buf, size_t cap, amqp_bytes *segs, int max);
/* Matches segments against a pattern such as "/api/queues/{}/{}/get":
 * literals compare exactly, {} captures one segment into caps[] (*ncaps
 * set). True on a match. */
bool mgmt_path_match(const char *pattern, const amqp_bytes *segs, int n, amqp_bytes *caps,
                     int *ncaps);
/* RabbitMQ's properties_key of a binding: the routing key escaped as
 * quote_plus does (and '~' as %7E), "~" for an empty key without
 * arguments, and "~" + a hash of the arguments when there are any. */
void mgmt_props_key(amqp_bytes key, amqp_bytes args, char *out, size_t cap);

/* ---- lists: filtering, sorting and paging ------------------------------- */

/* RabbitMQ's list query: ?page=&page_size=&name=&use_regex=&sort=&sort_reverse= */
typedef struct mgmt_list_query {
    bool paged;
    uint32_t page, page_size; /* page_size defaults to 100, at most 500 */
    const char *name;         /* filter: substring (case-insensitive) or regex */
    bool use_regex;
    const char *sort;         /* field to sort by; NULL = by name */
    bool sort_reverse;
} mgmt_list_query;

/* One object in a snapshot: how to find it again and the sort key. */
typedef struct mgmt_list_item {
    const char *vhost; /* points into the snapshot */
    amqp_bytes name;   /* likewise */
    uint64_t id;       /* connections: their id; channels: id << 16 | number */
    double num;        /* numeric sort key */
    bool has_num;
} mgmt_list_item;

typedef struct mgmt_list mgmt_list;

/* NULL on OOM or a bad regex (why says which). */
mgmt_list *mgmt_list_new(const mgmt_list_query *q, char *why, size_t whylen);
void mgmt_list_free(mgmt_list *l);
/* Adds an object (counted in the total whatever the filter says). False
 * on OOM. */
bool mgmt_list_add(mgmt_list *l, const char *vh, amqp_bytes name, uint64_t id, double num,
                   bool has_num);
/* Runs the name filter over up to `max` more of the added names; true
 * once every name has been through it. */
bool mgmt_list_filter(mgmt_list *l, size_t max);
/* Filters what is left, sorts (numeric key when set, then vhost and name)
 * and fixes the page. No more adds after it. False with RabbitMQ's error
 * ("page_out_of_range", ...) in why. */
bool mgmt_list_finish(mgmt_list *l, char *why, size_t whylen);
size_t mgmt_list_total(const mgmt_list *l);
size_t mgmt_list_filtered(const mgmt_list *l);
/* The items of the requested page (all of them when not paged). */
size_t mgmt_list_count(const mgmt_list *l);
const mgmt_list_item *mgmt_list_at(const mgmt_list *l, size_t i);
const mgmt_list_query *mgmt_list_query_of(const mgmt_list *l);
/* Page count for the envelope. */
uint32_t mgmt_list_page_count(const mgmt_list *l);

#endif
