/* Stream queues: a queue whose messages live in a stream/ log (see the
 * streams section of queue.h). This file keeps the log, its appends and
 * their commit with the journal, the writer and offset tracking, and the
 * watchers; stream_consume.c serves AMQP consumers from it.
 *
 * Commit: an append adds to the queue's builder (a chunk being filled).
 * The first append after a commit takes a journal sync task (a sequence
 * number in the journal's fill batch). Just before the journal hands that
 * batch to its sync thread it calls the registry (before_commit), which
 * writes each pending chunk (one writev) and prepares its sync ticket
 * (the descriptors to fdatasync); the sync thread runs the ticket in the
 * same round as the batch, so the task's sequence is synced only once the
 * chunk is on disk. On the journal's synced callback (queue_streams_synced)
 * the tickets up to the synced sequence are completed: readers see the
 * chunks and watchers and consumers are told. A publish waits for its
 * task's sequence like any journaled message: confirms after fsync.
 *
 * Tracking: the highest publishing id per writer (deduplication) and the
 * offsets stored by consumer name are kept in RAM and, when they changed,
 * written whole (a snapshot) in the trailer of the next chunk -- or in a
 * tracking chunk when no message is pending. Recovery reads the last
 * chunk's snapshot, so both survive a restart exactly as far as the chunk
 * that carried them did.
 *
 * Lifetime: a flush handed to the journal may outlive its queue (deleted
 * meanwhile): it then belongs to the registry, which frees it once synced;
 * the registry itself is freed after the journal closes
 * (queue_streams_free). */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "queue.h"
#include "queue_internal.h"

/* Tracking entries a stream keeps (writers and stored offsets each): a
 * client choosing names cannot grow a snapshot past ~270 KB. */
typedef struct stream_registry stream_registry;

#define TRACKING_MAX 1024
#define RETENTION_CHECK_MS 10000
/* A chunk being filled is written (not yet synced: the round's ticket
 * covers it) once it holds this much, so a slow disk does not make a
 * stream hold a whole round of messages in RAM. */
#define CHUNK_WRITE_BYTES (1u << 20)

enum { TRACK_WRITER = 0, TRACK_OFFSET = 1 };

typedef struct tracked {
    uint8_t kind, len;
    char name[256];
    uint64_t value;
} tracked;

typedef struct sq_flush {
    journal_sync_task task; /* first: the journal hands this pointer back */
    stream_sync_ticket ticket;
    journal_seq seq;
    bool prepared; /* the ticket holds what to sync */
    bool failed;   /* the chunk could not be written: its sequence must never sync */
    stream_queue *sq; /* NULL once its queue is gone */
    struct sq_flush *next;
} sq_flush;

struct stream_queue {
    queue *q;
    stream_registry *reg;
    stream_log *log;
    stream_builder *b;
    sq_flush *flush;                  /* the task of the journal's fill batch, or NULL */
    sq_flush *inflight, *inflight_tail; /* handed over, by sequence */
    stream_watch *watchers;
    tracked *track;
    uint32_t ntrack, cap_track, nwriters, noffsets;
    bool track_dirty;
    uint8_t *snapshot; /* encoding scratch */
    size_t snapshot_cap;
    uint64_t segments; /* at the last retention check */
    char dir_name[17]; /* its folder under data_dir/streams */
    stream_queue *next, *prev; /* the registry's */
};

struct stream_registry {
    server *s;
    stream_queue *all;
    sq_flush *orphans; /* flushes of queues gone, until synced */
    struct event *retention_timer;
    bool hooked; /* before_commit set on the journal (opened after the queues load) */
    bool mirrored; /* every stream has the journal's mirror (adopt_mirror) */
};

/* ---- the registry ------------------------------------------------------- */

static void before_commit(void *ctx);

/* Where the stream files' replication log comes from: a cluster leader's
 * mirror is the journal's (journal_config.mirror), so stream files and the
 * journal are recorded in one order. NULL: none, or no journal yet. */
static mirror *streams_mirror(server *s)
{
    journal *j = server_journal(s);
    return j ? journal_mirror(j) : NULL;
}

/* Streams opened before the journal (at boot: queues load first) take its
 * mirror before their first file operation once it is open. */
static void adopt_mirror(stream_registry *reg)
{
    if (reg->mirrored || !server_journal(reg->s))
        return;
    reg->mirrored = true;
    for (stream_queue *sq = reg->all; sq; sq = sq->next)
        stream_set_mirror(sq->log, streams_mirror(reg->s));
}

static void retention_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    stream_registry *reg = arg;
    adopt_mirror(reg);
    for (stream_queue *sq = reg->all; sq; sq = sq->next)
        stream_retain(sq->log, (int64_t)wall_clock_ms(), NULL);
}

static stream_registry *registry_of(server *s, loop *l)
{
    stream_registry **slot = server_streams(s);
    if (*slot)
        return *slot;
    stream_registry *reg = calloc(1, sizeof *reg);
    if (!reg)
        return NULL;
    reg->s = s;
    reg->retention_timer = event_new(loop_base(l), -1, EV_PERSIST, retention_tick, reg);
    if (!reg->retention_timer) {
        free(reg);
        return NULL;
    }
    struct timeval tv = {RETENTION_CHECK_MS / 1000, 0};
    event_add(reg->retention_timer, &tv);
    *slot = reg;
    return reg;
}

static void free_flushes(sq_flush *f)
{
    while (f) {
        sq_flush *next = f->next;
        free(f);
        f = next;
    }
}

void queue_streams_free(server *s)
{
    stream_registry *reg = *server_streams(s);
    if (!reg)
        return;
    invariant(reg->all == NULL); /* queues are freed before */
    free_flushes(reg->orphans);
    event_free(reg->retention_timer);
    free(reg);
    *server_streams(s) = NULL;
}

/* ---- commit ------------------------------------------------------------- */

static bool flush_run(journal_sync_task *t, bool sync)
{
    sq_flush *f = (sq_flush *)t;
    if (!f->prepared)
        return !f->failed;
    if (sync)
        return stream_sync_run(&f->ticket) == STREAM_OK;
    if (f->ticket.fd >= 0)
        close(f->ticket.fd);
    if (f->ticket.idx_fd >= 0)
        close(f->ticket.idx_fd);
    return true;
}

static void log_failure(stream_queue *sq, const char *what, stream_status st)
{
    amqp_bytes n = queue_name(sq->q);
    log_msg(LOG_ERROR, "stream '%.*s' in vhost '%s': %s: %s", (int)n.len, (const char *)n.ptr,
            vhost_name(queue_vhost(sq->q)), what, stream_status_text(st));
}

/* The tracking snapshot: kind, name length, name, value (big-endian). */
static size_t encode_snapshot(stream_queue *sq)
{
    size_t need = (size_t)sq->ntrack * (2 + 255 + 8);
    if (need > sq->snapshot_cap) {
        uint8_t *p = realloc(sq->snapshot, need);
        if (!p)
            return 0;
        sq->snapshot = p;
        sq->snapshot_cap = need;
    }
    size_t n = 0;
    for (uint32_t i = 0; i < sq->ntrack; i++) {
        const tracked *t = &sq->track[i];
        sq->snapshot[n++] = t->kind;
        sq->snapshot[n++] = t->len;
        memcpy(sq->snapshot + n, t->name, t->len);
        n += t->len;
        for (int k = 7; k >= 0; k--)
            sq->snapshot[n++] = (uint8_t)(t->value >> (8 * k));
    }
    return n;
}

/* Writes the chunk being filled with the tracking snapshot in its trailer
 * -- or, when the tracking changed and no message is pending (or there is
 * no room), a tracking chunk: every chunk written while the stream tracks
 * anything carries all of it as it holds with that chunk, so recovery,
 * reading the last whole chunk, gets the writers' sequences and stored
 * offsets of exactly what remains after a torn tail. */
static stream_status append_chunk(stream_queue *sq)
{
    adopt_mirror(sq->reg);
    int64_t now = (int64_t)wall_clock_ms();
    stream_status st = STREAM_OK;
    bool carry = sq->ntrack && !stream_builder_empty(sq->b);
    if (sq->track_dirty || carry) {
        size_t n = encode_snapshot(sq);
        if (stream_builder_empty(sq->b))
            st = stream_append_tracking(sq->log, STREAM_CHUNK_TRACKING_SNAPSHOT, sq->snapshot, n,
                                        now);
        else
            st = stream_builder_set_tracking(sq->b, sq->snapshot, n);
        if (st == STREAM_FULL) { /* no room beside the entries: after them */
            st = stream_append(sq->log, sq->b, now, NULL);
            if (st == STREAM_OK)
                st = stream_append_tracking(sq->log, STREAM_CHUNK_TRACKING_SNAPSHOT,
                                            sq->snapshot, n, now);
        }
        if (st != STREAM_OK)
            return st;
        sq->track_dirty = false;
    }
    if (!stream_builder_empty(sq->b))
        st = stream_append(sq->log, sq->b, now, NULL);
    stream_info info;
    stream_get_info(sq->log, &info);
    if (st == STREAM_OK && info.segments > sq->segments) /* rolled: retention may apply */
        stream_retain(sq->log, now, NULL);
    stream_get_info(sq->log, &info);
    sq->segments = info.segments;
    return st;
}

static void before_commit(void *ctx)
{
    stream_registry *reg = ctx;
    for (stream_queue *sq = reg->all; sq; sq = sq->next) {
        sq_flush *f = sq->flush;
        if (!f)
            continue;
        sq->flush = NULL;
        stream_status st = append_chunk(sq);
        if (st == STREAM_OK)
            st = stream_sync_prepare(sq->log, &f->ticket);
        if (st != STREAM_OK)
            log_failure(sq, "writing a chunk", st); /* never synced: never confirmed */
        f->prepared = st == STREAM_OK;
        f->failed = !f->prepared;
        if (sq->inflight_tail)
            sq->inflight_tail->next = f;
        else
            sq->inflight = f;
        sq->inflight_tail = f;
    }
}

/* Takes the journal task the pending appends wait for; its sequence. */
static journal_seq pending_seq(stream_queue *sq)
{
    journal *j = server_journal(sq->reg->s);
    if (sq->flush)
        return sq->flush->seq;
    if (!sq->reg->hooked) {
        journal_set_before_commit(j, before_commit, sq->reg);
        sq->reg->hooked = true;
    }
    sq_flush *f = calloc(1, sizeof *f);
    if (!f)
        return 0;
    f->task.run = flush_run;
    f->sq = sq;
    f->ticket.fd = f->ticket.idx_fd = -1;
    f->seq = journal_append_sync_task(j, &f->task);
    sq->flush = f;
    return f->seq;
}

static void notify(stream_queue *sq)
{
    for (stream_watch *w = sq->watchers, *next; w; w = next) {
        next = w->next; /* a watcher may leave while told */
        w->committed(w);
    }
    queue_dispatch(sq->q);
}

/* Without a journal (tests of the modules above): each append is written
 * and synced at once. */
static journal_seq commit_now(stream_queue *sq, bool *ok)
{
    stream_status st = append_chunk(sq);
    if (st == STREAM_OK)
        st = stream_sync(sq->log);
    if (st != STREAM_OK) {
        log_failure(sq, "writing a chunk", st);
        *ok = false;
        return 0;
    }
    notify(sq);
    return 0;
}

static journal_seq appended(stream_queue *sq, bool *ok)
{
    if (!server_journal(sq->reg->s))
        return commit_now(sq, ok);
    journal_seq seq = pending_seq(sq);
    if (!seq)
        *ok = false;
    return seq;
}

void queue_streams_synced(server *s, journal_seq synced)
{
    stream_registry *reg = *server_streams(s);
    if (!reg)
        return;
    while (reg->orphans && reg->orphans->seq <= synced) {
        sq_flush *f = reg->orphans;
        reg->orphans = f->next;
        free(f);
    }
    for (stream_queue *sq = reg->all, *next; sq; sq = next) {
        next = sq->next; /* a dispatch may delete a queue (auto-delete: not streams) */
        bool more = false;
        while (sq->inflight && sq->inflight->seq <= synced) {
            sq_flush *f = sq->inflight;
            sq->inflight = f->next;
            if (f->prepared)
                stream_sync_complete(sq->log, &f->ticket), more = true;
            free(f);
        }
        if (!sq->inflight)
            sq->inflight_tail = NULL;
        if (more)
            notify(sq);
    }
}

/* ---- appends ------------------------------------------------------------ */

static stream_status add_or_flush(stream_queue *sq, stream_status (*add)(stream_queue *, const void *),
                                  const void *arg)
{
    /* chunks are written before an entry is added, never after: the
     * tracking the caller sets after each entry then holds with each */
    stream_status st = STREAM_OK;
    if (stream_builder_bytes(sq->b) >= CHUNK_WRITE_BYTES)
        st = append_chunk(sq);
    if (st == STREAM_OK)
        st = add(sq, arg);
    if (st == STREAM_FULL) { /* the chunk is full: write it now, synced with the rest */
        st = append_chunk(sq);
        if (st == STREAM_OK)
            st = add(sq, arg);
    }
    return st;
}

typedef struct simple_entry {
    const stream_part *parts;
    int nparts;
    const void *filter;
    size_t filter_len;
} simple_entry;

static stream_status add_simple(stream_queue *sq, const void *arg)
{
    const simple_entry *e = arg;
    return stream_builder_add(sq->b, e->parts, e->nparts, e->filter, e->filter_len);
}

typedef struct batch_entry {
    uint8_t compression;
    uint16_t records;
    uint32_t uncompressed_len;
    const void *data;
    size_t len;
} batch_entry;

static stream_status add_batch(stream_queue *sq, const void *arg)
{
    const batch_entry *e = arg;
    return stream_builder_add_batch(sq->b, e->compression, e->records, e->uncompressed_len,
                                    e->data, e->len, NULL, 0);
}

static journal_seq append(queue *q, stream_status (*add)(stream_queue *, const void *),
                          const void *arg, bool *ok)
{
    stream_queue *sq = queue_stream_state(q);
    *ok = true;
    stream_status st = sq ? add_or_flush(sq, add, arg) : STREAM_EINVAL;
    if (st != STREAM_OK) {
        if (sq)
            log_failure(sq, "appending", st);
        *ok = false;
        return 0;
    }
    return appended(sq, ok);
}

journal_seq queue_stream_append(queue *q, const stream_part *parts, int nparts,
                                const void *filter, size_t filter_len, bool *ok)
{
    simple_entry e = {parts, nparts, filter, filter_len};
    return append(q, add_simple, &e, ok);
}

journal_seq queue_stream_append_batch(queue *q, uint8_t compression, uint16_t records,
                                      uint32_t uncompressed_len, const void *data, size_t len,
                                      bool *ok)
{
    batch_entry e = {compression, records, uncompressed_len, data, len};
    return append(q, add_batch, &e, ok);
}

journal_seq queue_stream_pending(const queue *q)
{
    stream_queue *sq = queue_stream_state(q);
    return sq && sq->flush ? sq->flush->seq : 0;
}

bool queue_is_stream(const queue *q) { return queue_type_of(q)->id == QUEUE_TYPE_STREAM; }

stream_log *queue_stream_log(queue *q)
{
    stream_queue *sq = queue_stream_state(q);
    return sq ? sq->log : NULL;
}

/* ---- tracking ----------------------------------------------------------- */

static tracked *find_tracked(stream_queue *sq, uint8_t kind, amqp_bytes name)
{
    for (uint32_t i = 0; i < sq->ntrack; i++) {
        tracked *t = &sq->track[i];
        if (t->kind == kind && t->len == name.len && memcmp(t->name, name.ptr, name.len) == 0)
            return t;
    }
    return NULL;
}

static bool set_tracked(stream_queue *sq, uint8_t kind, amqp_bytes name, uint64_t value)
{
    if (name.len == 0 || name.len > 255)
        return false;
    tracked *t = find_tracked(sq, kind, name);
    if (!t) {
        uint32_t *n = kind == TRACK_WRITER ? &sq->nwriters : &sq->noffsets;
        if (*n >= TRACKING_MAX)
            return false;
        if (sq->ntrack == sq->cap_track) {
            uint32_t cap = sq->cap_track ? sq->cap_track * 2 : 8;
            tracked *p = realloc(sq->track, cap * sizeof *p);
            if (!p)
                return false;
            sq->track = p;
            sq->cap_track = cap;
        }
        t = &sq->track[sq->ntrack++];
        (*n)++;
        t->kind = kind;
        t->len = (uint8_t)name.len;
        memcpy(t->name, name.ptr, name.len);
    }
    t->value = value;
    sq->track_dirty = true;
    return true;
}

static bool get_tracked(queue *q, uint8_t kind, amqp_bytes name, uint64_t *value)
{
    stream_queue *sq = queue_stream_state(q);
    tracked *t = sq ? find_tracked(sq, kind, name) : NULL;
    if (t)
        *value = t->value;
    return t != NULL;
}

bool queue_stream_writer_seq(queue *q, amqp_bytes writer, uint64_t *seq)
{
    return get_tracked(q, TRACK_WRITER, writer, seq);
}

bool queue_stream_query_offset(queue *q, amqp_bytes name, uint64_t *offset)
{
    return get_tracked(q, TRACK_OFFSET, name, offset);
}

static bool store_tracked(queue *q, uint8_t kind, amqp_bytes name, uint64_t value)
{
    stream_queue *sq = queue_stream_state(q);
    bool ok = sq && set_tracked(sq, kind, name, value);
    if (ok)
        appended(sq, &ok); /* written with the next chunk */
    return ok;
}

bool queue_stream_set_writer_seq(queue *q, amqp_bytes writer, uint64_t seq)
{
    return store_tracked(q, TRACK_WRITER, writer, seq);
}

bool queue_stream_store_offset(queue *q, amqp_bytes name, uint64_t offset)
{
    return store_tracked(q, TRACK_OFFSET, name, offset);
}

/* Reads a snapshot back (recovery); a malformed one is dropped whole. */
static void decode_snapshot(stream_queue *sq, const uint8_t *p, size_t len)
{
    size_t i = 0;
    while (i + 2 <= len) {
        uint8_t kind = p[i], n = p[i + 1];
        if (kind > TRACK_OFFSET || i + 2 + n + 8 > len)
            break;
        uint64_t v = 0;
        for (int k = 0; k < 8; k++)
            v = v << 8 | p[i + 2 + n + k];
        set_tracked(sq, kind, (amqp_bytes){p + i + 2, n}, v);
        i += 2u + n + 8;
    }
    sq->track_dirty = false;
}

/* The last chunk's snapshot: every chunk written while tracking is not
 * empty carries all of it. */
static void recover_tracking(stream_queue *sq)
{
    stream_info info;
    stream_get_info(sq->log, &info);
    if (info.empty)
        return;
    stream_reader *r;
    stream_start at = {.kind = STREAM_START_OFFSET, .offset = info.last_chunk_id};
    if (stream_reader_open(sq->log, &at, NULL, &r) != STREAM_OK)
        return;
    stream_reader_include_tracking(r);
    stream_chunk c;
    stream_status st;
    while ((st = stream_reader_next(r, true, &c)) == STREAM_OK || st == STREAM_AGAIN) {
        if (st != STREAM_OK)
            continue;
        if (c.type == STREAM_CHUNK_TRACKING_SNAPSHOT && c.data_len >= 4)
            decode_snapshot(sq, c.data + 4, c.data_len - 4);
        else if (c.tracking)
            decode_snapshot(sq, c.tracking, c.tracking_len);
    }
    stream_reader_close(r);
}

/* ---- watchers ----------------------------------------------------------- */

void queue_stream_watch(queue *q, stream_watch *w)
{
    stream_queue *sq = queue_stream_state(q);
    w->prev = NULL;
    w->next = sq->watchers;
    if (sq->watchers)
        sq->watchers->prev = w;
    sq->watchers = w;
}

void queue_stream_unwatch(queue *q, stream_watch *w)
{
    stream_queue *sq = queue_stream_state(q);
    if (w->prev)
        w->prev->next = w->next;
    else if (sq->watchers == w)
        sq->watchers = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->next = w->prev = NULL;
}

/* ---- open, close, delete -------------------------------------------------- */

/* data_dir/streams/<64-bit FNV-1a of vhost NUL name, in hex>: a fixed-size
 * name whatever the characters of either. */
static void stream_dir(queue *q, char *name, char *out, size_t cap)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    const char *v = vhost_name(queue_vhost(q));
    amqp_bytes n = queue_name(q);
    for (size_t i = 0; i <= strlen(v); i++)
        h = (h ^ (uint8_t)v[i]) * 0x100000001b3ULL;
    for (size_t i = 0; i < n.len; i++)
        h = (h ^ n.ptr[i]) * 0x100000001b3ULL;
    snprintf(name, 17, "%016" PRIx64, h);
    snprintf(out, cap, "%s/streams/%s", server_config(vhost_server(queue_vhost(q)))->data_dir,
             name);
}

void queue_stream_config(const queue_args *a, stream_config *out)
{
    *out = (stream_config){
        .max_segment_bytes = a->max_segment_bytes > 0 ? (uint64_t)a->max_segment_bytes : 0,
        .filter_size = a->filter_size,
        .max_bytes = a->max_length_bytes > 0 ? (uint64_t)a->max_length_bytes : 0,
        .max_age_ms = a->max_age_ms > 0 ? a->max_age_ms : 0};
}

stream_queue *stream_queue_open(queue *q)
{
    vhost *v = queue_vhost(q);
    stream_registry *reg = registry_of(vhost_server(v), vhost_loop(v));
    stream_queue *sq = reg ? calloc(1, sizeof *sq) : NULL;
    if (!sq)
        return NULL;
    sq->q = q;
    sq->reg = reg;
    char dir[700];
    snprintf(dir, sizeof dir, "%s/streams", server_config(vhost_server(v))->data_dir);
    mirror *m = streams_mirror(vhost_server(v));
    mirror_mkdir(m, dir, 0755);
    stream_dir(q, sq->dir_name, dir, sizeof dir);
    stream_config cfg;
    queue_stream_config(queue_get_args(q), &cfg);
    cfg.mirror = m;
    stream_status st = stream_open(dir, &cfg, &sq->log);
    if (st != STREAM_OK || !(sq->b = stream_builder_new())) {
        amqp_bytes n = queue_name(q);
        log_msg(LOG_ERROR, "stream '%.*s' in vhost '%s': cannot open %s: %s", (int)n.len,
                (const char *)n.ptr, vhost_name(v), dir, stream_status_text(st));
        stream_close(sq->log);
        free(sq);
        return NULL;
    }
    stream_info info;
    stream_get_info(sq->log, &info);
    sq->segments = info.segments;
    if (info.recovery.bytes_cut || info.recovery.indexes_rebuilt || info.recovery.segments_dropped)
        log_msg(LOG_WARNING, "stream in %s: recovered: %" PRIu64 " torn bytes cut, %u indexes "
                "rebuilt, %u segments dropped", dir, info.recovery.bytes_cut,
                info.recovery.indexes_rebuilt, info.recovery.segments_dropped);
    recover_tracking(sq);
    sq->next = reg->all;
    if (reg->all)
        reg->all->prev = sq;
    reg->all = sq;
    return sq;
}

void stream_queue_set_config(stream_queue *sq, const queue_args *a)
{
    stream_config cfg;
    queue_stream_config(a, &cfg);
    adopt_mirror(sq->reg);
    stream_set_config(sq->log, &cfg);
    stream_retain(sq->log, (int64_t)wall_clock_ms(), NULL);
}

/* Hands the flushes still to be synced to the registry. */
static void orphan_flushes(stream_queue *sq)
{
    stream_registry *reg = sq->reg;
    if (sq->flush) { /* in the fill batch: nothing of it will be written */
        sq->flush->prepared = false;
        sq->inflight_tail ? (sq->inflight_tail->next = sq->flush) : (sq->inflight = sq->flush);
        sq->inflight_tail = sq->flush;
        sq->flush = NULL;
    }
    sq_flush **tail = &reg->orphans;
    while (*tail)
        tail = &(*tail)->next;
    *tail = sq->inflight;
    for (sq_flush *f = sq->inflight; f; f = f->next)
        f->sq = NULL;
    sq->inflight = sq->inflight_tail = NULL;
}

void stream_queue_close(stream_queue *sq, bool remove)
{
    if (!sq)
        return;
    adopt_mirror(sq->reg);
    for (stream_watch *w = sq->watchers, *next; w; w = next) {
        next = w->next;
        w->next = w->prev = NULL;
        if (remove)
            w->deleted(w);
    }
    sq->watchers = NULL;
    if (!remove && (sq->flush || sq->track_dirty || !stream_builder_empty(sq->b))) {
        /* a clean stop: what is pending is written and synced now */
        if (append_chunk(sq) != STREAM_OK || stream_sync(sq->log) != STREAM_OK)
            log_failure(sq, "writing the last chunk", STREAM_EIO);
    }
    orphan_flushes(sq);
    stream_registry *reg = sq->reg;
    if (sq->prev)
        sq->prev->next = sq->next;
    else
        reg->all = sq->next;
    if (sq->next)
        sq->next->prev = sq->prev;
    if (remove)
        stream_delete(sq->log);
    else
        stream_close(sq->log);
    stream_builder_free(sq->b);
    free(sq->track);
    free(sq->snapshot);
    free(sq);
}

void queue_streams_collect(server *s)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/streams", server_config(s)->data_dir);
    DIR *d = opendir(dir);
    if (!d)
        return;
    stream_registry *reg = *server_streams(s);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        bool used = false;
        for (stream_queue *sq = reg ? reg->all : NULL; sq && !used; sq = sq->next)
            used = strcmp(sq->dir_name, e->d_name) == 0;
        char path[900];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        stream_log *log;
        stream_config cfg = {.mirror = streams_mirror(s)};
        if (used || stream_open(path, &cfg, &log) != STREAM_OK)
            continue;
        log_msg(LOG_INFO, "removing %s: the stream it held was deleted", path);
        stream_delete(log);
    }
    closedir(d);
}

void stream_queue_info(stream_queue *sq, stream_info *out) { stream_get_info(sq->log, out); }
