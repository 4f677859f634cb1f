/* admin: the management plane's and the definitions' one view of the
 * broker. It includes the module headers below it (their public parts:
 * opaque objects, introspection, the admin operations conn/ runs through
 * the AMQP paths) and adds what spans modules: vhosts created and deleted
 * with all they hold, the connections of every loop as one set, the memory
 * alarm, and the statistics timer. mgmt-ui/ and definitions/ include this
 * header and no other broker header. */
#ifndef WARREN_ADMIN_H
#define WARREN_ADMIN_H

#include "../conn/conn.h"
#include "../streamconn/streamconn.h"

/* ---- vhosts (vhosts.c) --------------------------------------------------- */

/* A vhost's description, tags, default queue type and tracing flag are
 * kept in the metadata store with it. validate: without changing anything,
 * name 1..255 bytes, default_queue_type "", "undefined" (= ""), "classic",
 * "quorum" or "stream". put: creates the vhost (with RabbitMQ's exchanges)
 * or updates its details; NULL fields mean "" (false for tracing). false
 * with `err` when invalid or the store write fails; nothing changes then. */
bool admin_validate_vhost(const meta_vhost *v, char *err, size_t errlen);
bool admin_put_vhost(server *s, const meta_vhost *v, char *err, size_t errlen);
/* Deletes a vhost as RabbitMQ does: its connections are closed with 320
 * "vhost 'x' is deleted", its queues deleted (their messages settled in the
 * journal), and its exchanges, bindings, policies, permissions and topic
 * permissions removed from the store in one transaction, so nothing of it
 * comes back after a restart. false if there is no such vhost or the store
 * write fails (then the vhost stays, its connections already closed). */
bool admin_delete_vhost(server *s, const char *name, char *err, size_t errlen);
/* At start: a vhost row from the store (nothing written). */
void admin_load_vhost(server *s, const meta_vhost *d);

/* ---- loading at start (load.c) ------------------------------------------- */

/* Everything the metadata store holds, in dependency order; false when
 * the store cannot be read (logged). */
bool admin_load(server *s);

/* ---- connections (conns.c) ----------------------------------------------- */

/* Iterates the connections of every loop: those of `v` (NULL: all), in no
 * set order. fn may close a connection (frees are deferred) but must not
 * open one. */
void admin_foreach_conn(server *s, vhost *v, void (*fn)(void *arg, conn *c), void *arg);
/* Closes every connection logged in as `user` with 320 and `text`; the
 * access module's user_deleted hook (server_ptr is the server). */
void admin_close_user_connections(void *server_ptr, const char *user, const char *text);
/* A listed connection by id, NULL when gone or not open yet. */
conn *admin_conn_find(server *s, uint64_t id);
/* RabbitMQ's resource alarms (alarms.c), checked on the housekeeping
 * timer. check_memory: measures the memory (server_measure_memory) and
 * sets or clears the memory alarm; under pressure the allocator gives
 * freed pages back first (malloc_trim), so RSS can fall when queues drain.
 * check_disk: measures data_dir's free space against disk_free_limit and
 * sets or clears the disk alarm; returns the ms until it should run again
 * -- as RabbitMQ's disk monitor, sooner the nearer the limit (the time the
 * space left would take to fill at 250 MB/s), at most
 * disk_monitor.max_interval. A change of either alarm is logged with
 * RabbitMQ's words and every connection is told (conn_set_alarm). */
void admin_check_memory(server *s);
uint64_t admin_check_disk(server *s);
/* Sets the memory high watermark while running, as rabbitmqctl
 * set_vm_memory_high_watermark does: `absolute` bytes when it is not 0,
 * else `relative` (0..1) of the RAM. The alarm is checked again at once,
 * and the budget for unfinished bodies follows, on open connections too.
 * The configuration (server_config) shows it; a restart goes back to the
 * file's setting, as RabbitMQ's does. */
void admin_set_memory_watermark(server *s, double relative, uint64_t absolute);

/* The loop the management plane runs on (its clock, timers, HTTP). */
loop *admin_loop(server *s);

/* ---- statistics (sampler.c) ---------------------------------------------- */

/* The counts by queue type, the deleted queues' and the live ones', into
 * out[QUEUE_TYPES][STAT_COUNTERS] (a walk over every queue). */
void admin_counts_by_type(server *s, uint64_t (*out)[STAT_COUNTERS]);
/* A queue's depth as RabbitMQ reports it: its ready and unacked messages;
 * a stream's records (committed, not yet removed by retention) as ready
 * and nothing unacked (a delivery takes nothing from a stream). */
void admin_queue_depth(queue *q, uint64_t *ready, uint64_t *unacked);
uint64_t admin_stream_records(const stream_info *s);
/* The server's timer: samples every vhost, queue, exchange, connection and
 * channel, and the whole broker (server_stats). */
void admin_stats_tick(server *s);

#endif
