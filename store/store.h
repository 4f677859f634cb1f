/* store: durability -- the append-only message journal (segment files with
 * CRC32C-checked records, group commit by a sync thread, read-back of
 * bodies, segment GC, replay) and the sqlite3 metadata: vhosts, users,
 * permissions, policies, runtime parameters, settings, and durable
 * exchanges, queues and bindings.
 *
 * Threads: every function here is called on the broker's loop thread. The
 * journal owns one sync thread that writes and fdatasyncs batches; it
 * reports progress back to the loop through an event on the loop's base.
 */
#ifndef WARREN_STORE_H
#define WARREN_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../amqp/amqp.h"
#include "../mirror/mirror.h"

struct event_base;

/* ======================================================================
 * Journal
 * ====================================================================== */

typedef struct journal journal;
typedef struct journal_sync_task journal_sync_task;

typedef enum journal_sync_mode {
    JOURNAL_SYNC_BATCH,  /* group commit: one fdatasync per batch (default) */
    JOURNAL_SYNC_ALWAYS, /* one write + fdatasync per record batch of one turn, no batching across turns */
    JOURNAL_SYNC_NONE    /* write, never fdatasync (tests, benchmarks) */
} journal_sync_mode;

typedef struct journal_config {
    const char *dir;        /* data_dir/journal is created inside it */
    uint64_t segment_size;  /* bytes; a segment is closed once it passes this */
    journal_sync_mode sync;
    /* Optional: receives the journal's warnings and errors, one line of text
     * each; level 2 = warning, 3 = error (core/core.h's log_level
     * numbers). May be called from the sync thread. NULL: they go to stderr
     * as "YYYY-MM-DD hh:mm:ss.mmm [warning] journal: text". */
    void (*log)(int level, const char *text);
    /* A cluster leader's replication log (NULL: none): every file
     * operation goes through it -- segment creation, spare renames,
     * truncation, unlinks, the checkpoint -- each batch's bytes are
     * recorded (mirror_wrote) once written, and each sync round marks
     * mirror_synced(the round's last sequence) once its bytes are written
     * and its sync tasks ran, just before its fdatasync (followers sync
     * while the leader does; a confirm waits for both). journal_replay does not
     * go through it (a follower starts from a snapshot taken after). */
    mirror *mirror;
    /* Confirms wait for replication too: journal_synced and on_synced
     * report the lesser of what is on the local disk and the last
     * journal_set_replicated (what replay found counts as replicated). */
    bool gated;
} journal_config;

/* Where a message record lives: segment number, offset of the record in it,
 * and the record's total length. Stable until the segment is deleted. */
typedef struct journal_loc {
    uint32_t segment;
    uint32_t offset;
    uint32_t length;
} journal_loc;

/* Record sequence numbers: every append returns the next one; the journal
 * reports the highest sequence that is on disk. */
typedef uint64_t journal_seq;

typedef enum journal_settle_kind {
    JOURNAL_ACK = 1,         /* consumed and acknowledged */
    JOURNAL_DROP = 2,        /* dropped (expired, max-length, rejected without DLX) */
    JOURNAL_DEAD_LETTER = 3, /* moved to a dead-letter exchange */
    JOURNAL_MOVE = 4,        /* moved to another queue (redrive) */
} journal_settle_kind;

/* Opens (creating if needed) the journal in cfg->dir. Does not replay:
 * call journal_replay before appending (until then nothing is collected).
 * `on_synced` runs on the loop thread whenever the synced sequence advances
 * (it must not call journal_close). NULL with `err` on failure. */
journal *journal_open(const journal_config *cfg, struct event_base *base,
                      void (*on_synced)(void *ctx, journal_seq synced), void *ctx, char *err,
                      size_t errlen);

/* Syncs everything appended, writes a checkpoint (so the next open does not
 * rescan), stops the sync thread and frees. */
void journal_close(journal *j);

/* ---- appends (loop thread; never block on the disk) ---- */

/* A persistent message: stored once however many queues it goes to. *loc
 * says where it will be readable once synced. */
journal_seq journal_append_message(journal *j, uint64_t msg_id, amqp_bytes exchange,
                                   amqp_bytes routing_key, amqp_bytes properties, amqp_bytes body,
                                   journal_loc *loc);
/* The message `loc` (id msg_id) is now in durable queue `queue_id`. Append
 * it in the same loop callback as the message, or while another queue still
 * holds the message (dead-lettering, a redrive): a message no queue holds may
 * be collected at the next journal_tick. `loc` may be where the message was
 * first written: the record names where compaction copied it since. */
journal_seq journal_append_enqueue(journal *j, uint64_t queue_id, uint64_t msg_id,
                                   journal_loc loc);
/* Whether the journal still holds message msg_id, first written at `was`;
 * *now is where (compaction may have copied it). False once no queue held
 * it and its segment was collected: to enqueue it again (a copy that lived
 * on in a non-durable queue, moved into a durable one), append it anew. */
bool journal_message_at(const journal *j, uint64_t msg_id, journal_loc was, journal_loc *now);
/* It left the queue. For a dead-letter, `reason` and `target` (exchange)
 * are recorded; otherwise pass empty slices. */
journal_seq journal_append_settle(journal *j, uint64_t queue_id, uint64_t msg_id,
                                  journal_loc loc, journal_settle_kind kind, amqp_bytes reason,
                                  amqp_bytes target);
/* It was delivered (again): its delivery count is now `count`. */
journal_seq journal_append_delivered(journal *j, uint64_t queue_id, uint64_t msg_id,
                                     uint32_t count);
/* Message msg_id in queue_id is held back until `until_ms` (wall clock, ms
 * since the epoch); 0 clears it. The newest one counts, like a delivery
 * count; replay passes it to the `delayed` handler. */
journal_seq journal_append_delayed(journal *j, uint64_t queue_id, uint64_t msg_id,
                                   uint64_t until_ms);
/* Every message of the queue left it (queue.purge), or the queue is gone. */
journal_seq journal_append_purge(journal *j, uint64_t queue_id);
journal_seq journal_append_queue_delete(journal *j, uint64_t queue_id);

/* Atomic groups: the records appended between journal_group_begin and
 * journal_group_end are replayed all or none -- a crash that tears the
 * journal's tail inside a group drops the whole group (e.g. a message
 * settled in one queue and enqueued in another: it stays in exactly one).
 * Call both in the same loop callback; groups do not nest. A group never
 * spans segments. journal_group_end returns the sequence that makes the
 * whole group durable (the last record's), 0 for an empty group. */
void journal_group_begin(journal *j);
journal_seq journal_group_end(journal *j);

/* Other files synced with the journal (a stream queue's log): a task
 * takes the next sequence number and runs on the sync thread in the round
 * that writes its batch, after the batch's records are written; the
 * sequence counts as synced only once the task returned true (false fails
 * the journal, as a failed write does). `sync` is false with sync = none:
 * the task then only releases what it holds. Before a batch is handed to
 * the sync thread the journal calls `before_commit` (loop thread), so
 * that what the tasks of that batch cover can still be written; a task
 * taken after that goes with the next batch. The task must live until it
 * ran; the journal only calls it. */
struct journal_sync_task {
    bool (*run)(journal_sync_task *t, bool sync);
};
journal_seq journal_append_sync_task(journal *j, journal_sync_task *t);
void journal_set_before_commit(journal *j, void (*fn)(void *ctx), void *ctx);

/* The highest sequence known to be on disk (all of it with sync = none,
 * once written); with cfg.gated, and replicated through the last
 * journal_set_replicated too. */
journal_seq journal_synced(const journal *j);
/* Gated journals: every sequence up to `replicated_through` is on the
 * disks of the followers that count (the cluster's in-sync replicas).
 * on_synced runs from here if journal_synced advances. Ungated: stored,
 * nothing else. */
void journal_set_replicated(journal *j, journal_seq replicated_through);
/* journal_config.mirror (NULL: none), for the files synced with the
 * journal (stream queues) to record through the same log. */
mirror *journal_mirror(const journal *j);
/* How long the sync thread has been in its current round (write and
 * fdatasync), in ms; 0 when idle. Any thread: a cluster leader's watchdog
 * fences the node when its disk stops answering. */
uint64_t journal_round_age_ms(journal *j);
/* Bytes appended that the sync thread has not written yet: what the
 * journal holds in RAM (publishers are slowed down when it grows). */
uint64_t journal_unwritten_bytes(const journal *j);
/* The records in its segments (written or not), live or waiting to be
 * collected: the journal's size on disk, less spare files. */
uint64_t journal_size_bytes(const journal *j);

/* ---- reading back ---- */

/* A message record read back: slices into `buf`, valid while it lives. */
typedef struct journal_message {
    uint64_t msg_id;
    amqp_bytes exchange, routing_key, properties, body;
} journal_message;

/* Reads the message record at `loc` into `buf` (at least loc.length bytes)
 * with pread, checks its CRC, and decodes it. false on I/O error or a bad
 * record (logged). Works for records not yet synced too. */
bool journal_read_message(journal *j, journal_loc loc, uint8_t *buf, journal_message *out);
/* Reads messages ids[i], found at locs[i] when they were appended (a
 * queue's next ones), into `buf` (`cap` bytes): the longest prefix (up to
 * 64) that lies in one written stretch of a segment, in ascending order,
 * within `cap` bytes, with one pread -- else just the first. Compaction may
 * have moved a record since: its new place is found by id. Returns how many
 * were read into out[0..]; 0 if the first could not be (logged). */
size_t journal_read_messages(journal *j, const uint64_t *ids, const journal_loc *locs, size_t n,
                             uint8_t *buf, size_t cap, journal_message *out);

/* ---- recovery ---- */

/* Called for each record, in append order, during replay. Any may be NULL.
 * An enqueue comes only after the message handler had that message; a
 * settle, delivered or delayed only for an entry whose enqueue the handler
 * had (records about collected or damaged data are left out). After a
 * clean close (or a periodic checkpoint) only what is still live is
 * replayed: messages with live entries, their enqueues, delivered counts
 * and delays. The records of an atomic group come all together, once the
 * group is known to be whole, or not at all. A message that ends up in no
 * queue can be dropped by the caller. */
typedef struct journal_replay_handlers {
    /* `m` slices the record, valid during the call */
    void (*message)(void *ctx, uint64_t msg_id, journal_loc loc, const journal_message *m);
    void (*enqueue)(void *ctx, uint64_t queue_id, uint64_t msg_id, journal_loc loc);
    void (*settle)(void *ctx, uint64_t queue_id, uint64_t msg_id, journal_settle_kind kind);
    void (*delivered)(void *ctx, uint64_t queue_id, uint64_t msg_id, uint32_t count);
    void (*purge)(void *ctx, uint64_t queue_id);
    void (*queue_delete)(void *ctx, uint64_t queue_id);
    /* the newest journal_append_delayed of a live entry (0: cleared) */
    void (*delayed)(void *ctx, uint64_t queue_id, uint64_t msg_id, uint64_t until_ms);
} journal_replay_handlers;

typedef struct journal_replay_stats {
    uint64_t records, segments, bytes; /* valid records, files and bytes read */
    uint64_t corrupt_records; /* bad CRC or length in the middle: skipped */
    uint64_t torn_tail_bytes; /* truncated after the last segment's records (a torn
                                 record or group, or a reused file's old bytes) */
    uint64_t incomplete_groups; /* atomic groups missing records (torn at the tail, or
                                   damaged): none of their records was applied */
    bool from_checkpoint;     /* a checkpoint (clean close or periodic) was used */
} journal_replay_stats;

/* Replays the journal, once, before any append. A torn record at the tail
 * is truncated with a warning; a corrupt record in the middle is skipped
 * (error log, counter) and the rest recovered. Never fails because of bad
 * data; false only for I/O errors or misuse (err filled). Afterwards
 * journal_synced() is the last replayed sequence. */
bool journal_replay(journal *j, const journal_replay_handlers *h, void *ctx,
                    journal_replay_stats *stats, char *err, size_t errlen);

/* ---- space ---- */

/* Segment GC is driven by the journal itself from the enqueue and settle
 * records it is given: a segment whose messages are all settled in every
 * queue is deleted (the active one too, once idle and fully settled) -- or
 * kept, two at most, as a spare file that a new segment reuses. A segment
 * also stays while it holds settles that replay would still need; a
 * checkpoint, taken when such segments pile up, makes them unnecessary. */

typedef struct journal_stats {
    uint64_t segments, bytes_on_disk; /* segment files and their records (not spares) */
    uint64_t live_messages; /* live (queue, message) entries */
    uint64_t appended_records;
    uint64_t syncs; /* sync rounds (one write + fdatasync each, except with none) */
} journal_stats;

void journal_get_stats(const journal *j, journal_stats *out);

/* Housekeeping (call every few hundred ms): closes an idle fully-settled
 * active segment, deletes dead segments, takes a checkpoint if needed. */
void journal_tick(journal *j);

/* ======================================================================
 * Spill (spill.c): transient messages paged out while memory is short,
 * in files that do not outlive the process (nothing of them is read at a
 * restart). One per loop; loop thread only.
 * ====================================================================== */

typedef struct spill spill;

/* A spill whose files go to data_dir/spill (made at the first write);
 * `log` takes its errors as journal_config.log does (NULL: stderr). NULL
 * when out of memory. spill_free closes (and so frees) every file. */
spill *spill_new(const char *data_dir, void (*log)(int level, const char *text));
void spill_free(spill *sp);
/* Appends one record, the parts concatenated; *loc says where it is.
 * false when it cannot be written (no space, no memory): the caller keeps
 * the message in RAM. No syscall unless a buffer fills. */
bool spill_write(spill *sp, const amqp_bytes *parts, size_t nparts, journal_loc *loc);
/* Copies the record at `loc` (loc.length bytes) to `out`; false when it
 * cannot be read. The record stays until spill_drop. */
bool spill_read(spill *sp, journal_loc loc, uint8_t *out);
/* The record at `loc` is no longer needed; its space comes back once its
 * segment has no live record. */
void spill_drop(spill *sp, journal_loc loc);
/* Bytes in the spill files now (records not yet reclaimed included). */
uint64_t spill_bytes(const spill *sp);

/* ======================================================================
 * Metadata (sqlite3, WAL mode): vhosts, users, permissions, policies,
 * runtime parameters, the broker's own settings, and durable exchanges,
 * queues and bindings.
 * ====================================================================== */

typedef struct meta meta;

/* Opens data_dir/metadata.db, creating or migrating the schema (it carries a
 * version). NULL with `err` on failure. */
meta *meta_open(const char *dir, char *err, size_t errlen);
void meta_close(meta *m);

typedef struct meta_exchange {
    const char *vhost, *name, *type;
    bool auto_delete, internal;
    amqp_bytes arguments; /* encoded table content */
} meta_exchange;

typedef struct meta_queue {
    uint64_t id; /* assigned by meta_put_queue; the journal's queue_id */
    const char *vhost, *name;
    bool auto_delete;
    amqp_bytes arguments;
} meta_queue;

typedef struct meta_binding {
    const char *vhost, *source, *destination;
    bool destination_is_exchange;
    amqp_bytes routing_key, arguments;
} meta_binding;

/* A user. password_hash is base64 as RabbitMQ exports it ("" = no
 * password); tags are comma-separated, as given. */
/* One of a user's limits (RabbitMQ's user limits): absent unless set. */
typedef struct meta_limit {
    bool set;
    int64_t value; /* negative: no limit; 0: none allowed */
} meta_limit;

typedef struct meta_user {
    const char *name, *password_hash, *hashing_algorithm, *tags;
    meta_limit max_connections, max_channels;
} meta_user;

typedef struct meta_vhost {
    const char *name, *description;
    const char *tags;               /* comma-separated */
    const char *default_queue_type; /* "" = undefined */
    bool tracing;
} meta_vhost;

/* Regular expressions, stored as given ("" is kept as "", meaning "^$"). */
typedef struct meta_permission {
    const char *user, *vhost, *configure, *write, *read;
} meta_permission;

typedef struct meta_topic_permission {
    const char *user, *vhost, *exchange, *write, *read;
} meta_topic_permission;

/* A policy or (operator_policy) an operator policy; the two are separate
 * name spaces. */
typedef struct meta_policy {
    const char *vhost, *name, *pattern, *apply_to;
    int32_t priority;
    amqp_bytes definition; /* an encoded AMQP field table (content) */
    bool operator_policy;
} meta_policy;

/* A runtime parameter of a vhost (RabbitMQ's shovels, federation
 * upstreams, ...), or with vhost and component NULL a global one
 * (cluster_name, ...). The value is JSON text, stored as given. */
typedef struct meta_parameter {
    const char *vhost, *component, *name, *value;
} meta_parameter;

/* Each returns false (and logs) on a database error. Puts insert or update
 * by the row's key; deletes of something absent succeed. Strings are
 * copied by sqlite: nothing is kept after the call. */
bool meta_put_exchange(meta *m, const meta_exchange *e);
/* Also deletes every binding from and to the exchange. */
bool meta_delete_exchange(meta *m, const char *vhost, const char *name);
/* Inserts or updates; sets q->id (a new id for a new queue). */
bool meta_put_queue(meta *m, meta_queue *q);
/* Also deletes every binding to the queue. */
bool meta_delete_queue(meta *m, const char *vhost, const char *name);
bool meta_put_binding(meta *m, const meta_binding *b);
bool meta_delete_binding(meta *m, const meta_binding *b);

bool meta_put_user(meta *m, const meta_user *u);
/* Also deletes the user's permissions and topic permissions. */
bool meta_delete_user(meta *m, const char *name);
bool meta_put_vhost(meta *m, const meta_vhost *v);
/* Also deletes every row of the vhost: exchanges, queues, bindings,
 * permissions, topic permissions, policies and parameters. Queue ids are
 * not reused. */
bool meta_delete_vhost(meta *m, const char *name);
bool meta_put_permission(meta *m, const meta_permission *p);
bool meta_delete_permission(meta *m, const char *user, const char *vhost);
bool meta_put_topic_permission(meta *m, const meta_topic_permission *p);
/* exchange NULL: every topic permission of that user in that vhost. */
bool meta_delete_topic_permission(meta *m, const char *user, const char *vhost,
                                  const char *exchange);
bool meta_put_policy(meta *m, const meta_policy *p);
bool meta_delete_policy(meta *m, const char *vhost, const char *name, bool operator_policy);
/* vhost NULL: the global parameter `name` (component is ignored). */
bool meta_put_parameter(meta *m, const meta_parameter *p);
bool meta_delete_parameter(meta *m, const char *vhost, const char *component, const char *name);

/* A small key/value table for the broker's own facts ("initialized" once
 * the first boot ran). get copies the value into out (cap bytes, NUL
 * included); false when the key is absent, on a database error (logged),
 * or when the value does not fit (logged). */
bool meta_get_setting(meta *m, const char *key, char *out, size_t cap);
bool meta_put_setting(meta *m, const char *key, const char *value);

/* Groups every call until meta_commit into one IMMEDIATE transaction: all
 * or nothing, also after a crash, with one fsync at the commit. Inside it,
 * a call that fails undoes its own part only (a savepoint) and returns
 * false; the caller decides whether to roll back the rest. meta_begin
 * fails (logged) when a transaction is already open; meta_commit fails
 * when the commit does (the transaction is then rolled back) or when
 * sqlite had already rolled it back (after an I/O or full-disk error);
 * meta_rollback discards everything since meta_begin (no-op without one).
 * meta_load inside a transaction sees its uncommitted rows. */
bool meta_begin(meta *m);
bool meta_commit(meta *m);
void meta_rollback(meta *m);
/* Whether a meta_begin group is open (so a caller can join it instead). */
bool meta_grouped(const meta *m);

/* Loads everything, calling the handlers in this order: vhosts, users,
 * permissions, topic permissions, policies, global parameters, parameters,
 * exchanges, queues, bindings; each table in first-insertion order. A NULL handler skips its table.
 * Slices are valid during the call only; handlers must not call meta. */
typedef struct meta_load_handlers {
    void (*exchange)(void *ctx, const meta_exchange *e);
    void (*queue)(void *ctx, const meta_queue *q);
    void (*binding)(void *ctx, const meta_binding *b);
    void (*vhost)(void *ctx, const meta_vhost *v);
    void (*user)(void *ctx, const meta_user *u);
    void (*permission)(void *ctx, const meta_permission *p);
    void (*topic_permission)(void *ctx, const meta_topic_permission *p);
    void (*policy)(void *ctx, const meta_policy *p);
    void (*parameter)(void *ctx, const meta_parameter *p); /* global ones: vhost NULL */
} meta_load_handlers;

bool meta_load(meta *m, const meta_load_handlers *h, void *ctx);

/* ---- replication (a cluster) ---- */

/* From now on every committed change (a meta_commit group, or a single
 * call outside one) is also recorded as one sqlite changeset with
 * mirror_meta_changes (NULL: stop). Rows of every table, queue ids and the
 * id counter included, so a follower's queue ids are the leader's. false
 * (logged) inside a meta_begin group or if a table has no primary key.
 * Cost: each commit then starts a fresh sqlite session and builds its
 * changeset (sqlite prepares its own statements for both: about 0.3 M
 * instructions, ~50 us, per declaration); without a mirror, one branch.
 * Rows that one group inserts into a table may load in another order on a
 * follower (a changeset keeps no insertion order); ids and contents match. */
bool meta_set_mirror(meta *m, mirror *mr);
/* The whole database as one image (malloc'd, *len bytes): what a
 * follower starts from. false (logged) on failure. */
bool meta_serialize(meta *m, uint8_t **image, size_t *len);
/* A follower: applies a changeset the leader recorded, in one transaction
 * (a row already as it says is fine; a conflicting one is replaced -- an
 * update sets the columns the leader changed; a change to a row that is
 * missing is left out; a broken constraint fails it). Then the queue id
 * counter follows the leader's. false (logged) on failure, nothing
 * applied. */
bool meta_apply_changes(meta *m, const void *changeset, size_t len);
/* A follower, with no meta open on `dir`: makes dir/metadata.db the image
 * (written to a temporary file, fsynced, renamed; sqlite's -wal and -shm
 * removed). false with err on failure. */
bool meta_replace_image(const char *dir, const void *image, size_t len, char *err,
                        size_t errlen);

#endif
