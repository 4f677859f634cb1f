/* meta: the broker's metadata in sqlite3 (<dir>/metadata.db): vhosts,
 * users, permissions, topic permissions, policies, runtime parameters, the
 * broker's own settings, and durable exchanges, queues and bindings.
 *
 * Durability. The database is in WAL mode with synchronous=FULL: every
 * commit appends to the WAL and fsyncs it before sqlite3_step returns, so
 * once a put or delete has returned true the change survives a crash or a
 * power loss, and the broker may send declare-ok / bind-ok / delete-ok.
 * (synchronous=NORMAL in WAL mode syncs only at checkpoints: a process crash
 * loses nothing, but a power loss may roll back the last commits -- a
 * durable queue the client was told exists would be gone, which RabbitMQ
 * never allows.) The cost is one fsync per declaration on the loop thread;
 * declarations are rare next to publishes, which go to the journal. SQLite
 * also fsyncs the directory when it creates the WAL, so a new database's
 * directory entry is durable too.
 *
 * Schema (version 5, kept in PRAGMA user_version). Every row of a vhost
 * carries its vhost; names are TEXT, routing keys and encoded argument
 * tables are BLOBs (never NULL: an empty table is a zero-length blob).
 * Tables are STRICT, so a value of the wrong type is an error rather than a
 * silent conversion.
 *
 *   exchanges (vhost, name, type, auto_delete, internal, arguments)
 *             PRIMARY KEY (vhost, name)
 *   queues    (id INTEGER PRIMARY KEY AUTOINCREMENT, vhost, name,
 *             auto_delete, arguments)  UNIQUE (vhost, name)
 *   bindings  (vhost, source, destination, destination_is_exchange,
 *             routing_key, arguments)  UNIQUE over all six columns
 *             + index (vhost, destination, destination_is_exchange)
 *   -- version 2:
 *   vhosts    (name PRIMARY KEY, description, tags, default_queue_type,
 *             tracing)
 *   users     (name PRIMARY KEY, password_hash, hashing_algorithm, tags)
 *   permissions (user, vhost, configure, write, read)
 *             PRIMARY KEY (user, vhost) + index (vhost)
 *   topic_permissions (user, vhost, exchange, write, read)
 *             PRIMARY KEY (user, vhost, exchange) + index (vhost)
 *   policies  (vhost, name, operator_policy, pattern, apply_to, priority,
 *             definition)  PRIMARY KEY (vhost, name, operator_policy)
 *   settings  (key PRIMARY KEY, value)
 *   -- version 3:
 *   parameters (vhost, component, name, value)
 *             PRIMARY KEY (vhost, component, name)
 *   global_parameters (name PRIMARY KEY, value)
 *   (a parameter's value is JSON text, kept as given)
 *   -- version 4:
 *   users gains max_connections, max_channels (a user's limits; NULL:
 *             not set)
 *   -- version 5 (replication):
 *   bindings' UNIQUE becomes its PRIMARY KEY (same six columns)
 *   counters  (name PRIMARY KEY, value): 'queues' = the highest queue id
 *             ever handed out, kept by a trigger on queues (sqlite's own
 *             counter, in sqlite_sequence, has no key: see Replication)
 *
 * Invariants:
 * - A queue's id is the journal's queue_id. Puts are upserts (INSERT ... ON
 *   CONFLICT DO UPDATE), which keep the row and so the id; AUTOINCREMENT
 *   means an id is never handed out again, even after the queue with the
 *   highest id is deleted, so old journal records can never be mistaken for
 *   a new queue's.
 * - Upserts also keep each row's rowid, so meta_load's "ORDER BY rowid" is
 *   first-insertion order. (VACUUM may renumber rowids; we never run it.)
 * - No binding outlives its source or destination: deleting an exchange or
 *   a queue deletes the bindings that name it (as source, or as destination
 *   of the right kind) and the row itself in one transaction. Likewise no
 *   permission outlives its user, and nothing of a vhost outlives it.
 *   There are no foreign keys: the broker validates references, and a
 *   definitions import may put a permission before its user in one
 *   transaction.
 * - Puts and deletes are idempotent: a repeated put changes nothing, a
 *   delete of something absent succeeds.
 *
 * Transactions. A call that runs several statements (the cascading deletes)
 * opens a transaction of its own -- or, inside meta_begin/meta_commit, a
 * savepoint in the caller's, so a failed call undoes just its own part.
 * sqlite rolls a whole transaction back by itself after some errors (I/O,
 * full disk); every write checks for that (`writable`) so that later calls
 * fail too rather than autocommit one by one outside the caller's group.
 *
 * Migrations. migrations[v] takes a database from version v to v + 1; each
 * step runs in its own IMMEDIATE transaction together with the bump of
 * user_version, so a failed step leaves the database at version v. Version 0
 * is a database Warren has never written (a new or empty file). Version 1
 * to 2 adds the tables above and a vhosts row for every vhost the old rows
 * name, so they load as before. Version 2 to 3 adds the two parameter
 * tables, empty. Version 3 to 4 adds the users' limit columns, NULL
 * (not set) in every row. A database newer than this broker is refused.
 *
 * Replication (meta_set_mirror). sqlite's session extension records the
 * rows every write changes; after each commit (a meta_commit group, or a
 * single call outside one) the session's changeset goes to
 * mirror_meta_changes and a fresh session starts. Sessions see only tables
 * with a PRIMARY KEY -- every table has one since version 5, which
 * meta_set_mirror checks -- and not sqlite_sequence: the counters row
 * carries the queue id counter instead, and a follower's apply
 * (meta_apply_changes) raises sqlite_sequence to it in the same
 * transaction, so a queue declared after a failover never takes an id the
 * leader handed out (even one whose queue was created and deleted within a
 * single changeset). Without a mirror, a write pays one branch.
 *
 * Known difference: within one changeset, rows of a table come in the
 * session's hash order, so rows inserted in one group may get rowids in
 * another order on a follower: meta_load's first-insertion order can differ
 * there for rows a single group inserted (ids, keys and contents do not).
 *
 * Every statement is prepared once at open and kept in m->st; each call
 * binds, steps to the end and resets. All calls are on the loop thread.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* sqlite3session_* and sqlite3changeset_* (Debian's libsqlite3 has them) */
#define SQLITE_ENABLE_SESSION 1
#define SQLITE_ENABLE_PREUPDATE_HOOK 1
#include <sqlite3.h>

#include "store.h"

/* STRICT tables need 3.37, RETURNING 3.35. */
#define META_MIN_SQLITE 3037000
#if SQLITE_VERSION_NUMBER < META_MIN_SQLITE
#error "store/meta.c needs sqlite 3.37 or newer"
#endif

/* How long a statement waits for a lock held by another process (say, the
 * sqlite3 shell reading the file) before failing. It blocks the loop. */
#define META_BUSY_TIMEOUT_MS 1000

enum {
    ST_BEGIN,
    ST_BEGIN_READ,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_SAVEPOINT,
    ST_RELEASE,
    ST_ROLLBACK_TO,
    ST_PUT_EXCHANGE,
    ST_DELETE_EXCHANGE,
    ST_UNBIND_EXCHANGE,
    ST_PUT_QUEUE,
    ST_DELETE_QUEUE,
    ST_UNBIND_QUEUE,
    ST_PUT_BINDING,
    ST_DELETE_BINDING,
    ST_PUT_USER,
    ST_DELETE_USER,
    ST_DELETE_USER_PERMISSIONS,
    ST_DELETE_USER_TOPIC_PERMISSIONS,
    ST_PUT_VHOST,
    ST_DELETE_VHOST,
    ST_DELETE_VHOST_EXCHANGES,
    ST_DELETE_VHOST_QUEUES,
    ST_DELETE_VHOST_BINDINGS,
    ST_DELETE_VHOST_PERMISSIONS,
    ST_DELETE_VHOST_TOPIC_PERMISSIONS,
    ST_DELETE_VHOST_POLICIES,
    ST_DELETE_VHOST_PARAMETERS,
    ST_PUT_PERMISSION,
    ST_DELETE_PERMISSION,
    ST_PUT_TOPIC_PERMISSION,
    ST_DELETE_TOPIC_PERMISSION,
    ST_DELETE_TOPIC_PERMISSIONS,
    ST_PUT_POLICY,
    ST_DELETE_POLICY,
    ST_PUT_PARAMETER,
    ST_DELETE_PARAMETER,
    ST_PUT_GLOBAL_PARAMETER,
    ST_DELETE_GLOBAL_PARAMETER,
    ST_GET_SETTING,
    ST_PUT_SETTING,
    ST_LOAD_VHOSTS,
    ST_LOAD_USERS,
    ST_LOAD_PERMISSIONS,
    ST_LOAD_TOPIC_PERMISSIONS,
    ST_LOAD_POLICIES,
    ST_LOAD_PARAMETERS,
    ST_LOAD_GLOBAL_PARAMETERS,
    ST_LOAD_EXCHANGES,
    ST_LOAD_QUEUES,
    ST_LOAD_BINDINGS,
    ST_COUNT
};

/* The delete statements share their parameters: ?1 vhost (or user), ?2
 * name (or vhost), ?3 the third key column where there is one. */
static const char *const statement_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_BEGIN_READ] = "BEGIN",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_SAVEPOINT] = "SAVEPOINT meta_call",
    [ST_RELEASE] = "RELEASE meta_call",
    [ST_ROLLBACK_TO] = "ROLLBACK TO meta_call",
    [ST_PUT_EXCHANGE] =
        "INSERT INTO exchanges (vhost, name, type, auto_delete, internal, arguments)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        " ON CONFLICT (vhost, name) DO UPDATE SET type = excluded.type,"
        " auto_delete = excluded.auto_delete, internal = excluded.internal,"
        " arguments = excluded.arguments",
    [ST_DELETE_EXCHANGE] = "DELETE FROM exchanges WHERE vhost = ?1 AND name = ?2",
    /* Written as two index searches: with "source = ?2 OR destination = ?2"
     * the planner scans the whole vhost. */
    [ST_UNBIND_EXCHANGE] =
        "DELETE FROM bindings WHERE rowid IN ("
        " SELECT rowid FROM bindings WHERE vhost = ?1 AND source = ?2"
        " UNION ALL SELECT rowid FROM bindings"
        " WHERE vhost = ?1 AND destination = ?2 AND destination_is_exchange = 1)",
    [ST_PUT_QUEUE] =
        "INSERT INTO queues (vhost, name, auto_delete, arguments) VALUES (?1, ?2, ?3, ?4)"
        " ON CONFLICT (vhost, name) DO UPDATE SET auto_delete = excluded.auto_delete,"
        " arguments = excluded.arguments"
        " RETURNING id",
    [ST_DELETE_QUEUE] = "DELETE FROM queues WHERE vhost = ?1 AND name = ?2",
    [ST_UNBIND_QUEUE] =
        "DELETE FROM bindings WHERE vhost = ?1 AND destination = ?2"
        " AND destination_is_exchange = 0",
    /* DO NOTHING, not OR IGNORE: OR IGNORE would also swallow a NOT NULL
     * or CHECK failure and report success. */
    [ST_PUT_BINDING] =
        "INSERT INTO bindings (vhost, source, destination, destination_is_exchange,"
        " routing_key, arguments) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        " ON CONFLICT DO NOTHING",
    [ST_DELETE_BINDING] =
        "DELETE FROM bindings WHERE vhost = ?1 AND source = ?2 AND destination = ?3"
        " AND destination_is_exchange = ?4 AND routing_key = ?5 AND arguments = ?6",
    [ST_PUT_USER] =
        "INSERT INTO users (name, password_hash, hashing_algorithm, tags, max_connections,"
        " max_channels) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        " ON CONFLICT (name) DO UPDATE SET password_hash = excluded.password_hash,"
        " hashing_algorithm = excluded.hashing_algorithm, tags = excluded.tags,"
        " max_connections = excluded.max_connections, max_channels = excluded.max_channels",
    [ST_DELETE_USER] = "DELETE FROM users WHERE name = ?1",
    [ST_DELETE_USER_PERMISSIONS] = "DELETE FROM permissions WHERE user = ?1",
    [ST_DELETE_USER_TOPIC_PERMISSIONS] = "DELETE FROM topic_permissions WHERE user = ?1",
    [ST_PUT_VHOST] =
        "INSERT INTO vhosts (name, description, tags, default_queue_type, tracing)"
        " VALUES (?1, ?2, ?3, ?4, ?5)"
        " ON CONFLICT (name) DO UPDATE SET description = excluded.description,"
        " tags = excluded.tags, default_queue_type = excluded.default_queue_type,"
        " tracing = excluded.tracing",
    [ST_DELETE_VHOST] = "DELETE FROM vhosts WHERE name = ?1",
    [ST_DELETE_VHOST_EXCHANGES] = "DELETE FROM exchanges WHERE vhost = ?1",
    [ST_DELETE_VHOST_QUEUES] = "DELETE FROM queues WHERE vhost = ?1",
    [ST_DELETE_VHOST_BINDINGS] = "DELETE FROM bindings WHERE vhost = ?1",
    [ST_DELETE_VHOST_PERMISSIONS] = "DELETE FROM permissions WHERE vhost = ?1",
    [ST_DELETE_VHOST_TOPIC_PERMISSIONS] = "DELETE FROM topic_permissions WHERE vhost = ?1",
    [ST_DELETE_VHOST_POLICIES] = "DELETE FROM policies WHERE vhost = ?1",
    [ST_DELETE_VHOST_PARAMETERS] = "DELETE FROM parameters WHERE vhost = ?1",
    [ST_PUT_PERMISSION] =
        "INSERT INTO permissions (user, vhost, configure, write, read)"
        " VALUES (?1, ?2, ?3, ?4, ?5)"
        " ON CONFLICT (user, vhost) DO UPDATE SET configure = excluded.configure,"
        " write = excluded.write, read = excluded.read",
    [ST_DELETE_PERMISSION] = "DELETE FROM permissions WHERE user = ?1 AND vhost = ?2",
    [ST_PUT_TOPIC_PERMISSION] =
        "INSERT INTO topic_permissions (user, vhost, exchange, write, read)"
        " VALUES (?1, ?2, ?3, ?4, ?5)"
        " ON CONFLICT (user, vhost, exchange) DO UPDATE SET write = excluded.write,"
        " read = excluded.read",
    [ST_DELETE_TOPIC_PERMISSION] =
        "DELETE FROM topic_permissions WHERE user = ?1 AND vhost = ?2 AND exchange = ?3",
    [ST_DELETE_TOPIC_PERMISSIONS] =
        "DELETE FROM topic_permissions WHERE user = ?1 AND vhost = ?2",
    [ST_PUT_POLICY] =
        "INSERT INTO policies (vhost, name, operator_policy, pattern, apply_to, priority,"
        " definition) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
        " ON CONFLICT (vhost, name, operator_policy) DO UPDATE SET pattern = excluded.pattern,"
        " apply_to = excluded.apply_to, priority = excluded.priority,"
        " definition = excluded.definition",
    [ST_DELETE_POLICY] =
        "DELETE FROM policies WHERE vhost = ?1 AND name = ?2 AND operator_policy = ?3",
    [ST_PUT_PARAMETER] =
        "INSERT INTO parameters (vhost, component, name, value) VALUES (?1, ?2, ?3, ?4)"
        " ON CONFLICT (vhost, component, name) DO UPDATE SET value = excluded.value",
    [ST_DELETE_PARAMETER] =
        "DELETE FROM parameters WHERE vhost = ?1 AND component = ?2 AND name = ?3",
    [ST_PUT_GLOBAL_PARAMETER] =
        "INSERT INTO global_parameters (name, value) VALUES (?1, ?2)"
        " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
    [ST_DELETE_GLOBAL_PARAMETER] = "DELETE FROM global_parameters WHERE name = ?1",
    [ST_GET_SETTING] = "SELECT value FROM settings WHERE key = ?1",
    [ST_PUT_SETTING] =
        "INSERT INTO settings (key, value) VALUES (?1, ?2)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    [ST_LOAD_VHOSTS] =
        "SELECT name, description, tags, default_queue_type, tracing FROM vhosts ORDER BY rowid",
    [ST_LOAD_USERS] =
        "SELECT name, password_hash, hashing_algorithm, tags, max_connections, max_channels"
        " FROM users ORDER BY rowid",
    [ST_LOAD_PERMISSIONS] =
        "SELECT user, vhost, configure, write, read FROM permissions ORDER BY rowid",
    [ST_LOAD_TOPIC_PERMISSIONS] =
        "SELECT user, vhost, exchange, write, read FROM topic_permissions ORDER BY rowid",
    [ST_LOAD_POLICIES] =
        "SELECT vhost, name, pattern, apply_to, priority, definition, operator_policy"
        " FROM policies ORDER BY rowid",
    [ST_LOAD_PARAMETERS] =
        "SELECT vhost, component, name, value FROM parameters ORDER BY rowid",
    [ST_LOAD_GLOBAL_PARAMETERS] = "SELECT name, value FROM global_parameters ORDER BY rowid",
    [ST_LOAD_EXCHANGES] =
        "SELECT vhost, name, type, auto_delete, internal, arguments"
        " FROM exchanges ORDER BY rowid",
    [ST_LOAD_QUEUES] =
        "SELECT id, vhost, name, auto_delete, arguments FROM queues ORDER BY id",
    [ST_LOAD_BINDINGS] =
        "SELECT vhost, source, destination, destination_is_exchange, routing_key, arguments"
        " FROM bindings ORDER BY rowid",
};

struct meta {
    sqlite3 *db;
    bool loading; /* inside meta_load: handlers must not call back into meta */
    bool grouped; /* between meta_begin and meta_commit / meta_rollback */
    sqlite3_stmt *st[ST_COUNT];
    mirror *mirror;           /* meta_set_mirror */
    sqlite3_session *session; /* records the changes since the last commit */
};

/* ---- logging ------------------------------------------------------------ */

/* The broker's log format, "YYYY-MM-DD hh:mm:ss.mmm [error] text", written
 * with one write(2) so lines never interleave. store does not link the
 * broker, hence its own copy. */
static void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_error(const char *fmt, ...)
{
    char line[1024];
    struct timeval tv;
    struct tm tm;
    va_list ap;

    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    int n = (int)strftime(line, sizeof line, "%Y-%m-%d %H:%M:%S", &tm);
    n += snprintf(line + n, sizeof line - (size_t)n, ".%03d [error] ", (int)(tv.tv_usec / 1000));
    va_start(ap, fmt);
    int k = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = (k < 0) ? n : (n + k < (int)sizeof line - 1 ? n + k : (int)sizeof line - 2);
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}

/* Logs "meta: <what>: <sqlite message>" and returns false. */
static bool db_error(meta *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool db_error(meta *m, const char *fmt, ...)
{
    char what[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    log_error("meta: %s: %s", what, sqlite3_errmsg(m->db));
    return false;
}

static const char *str(const char *s) { return s ? s : "(null)"; }

/* ---- replication: the session of the changes since the last commit ----- */

static bool new_session(meta *m)
{
    if (sqlite3session_create(m->db, "main", &m->session) != SQLITE_OK)
        return db_error(m, "replication: creating a session");
    if (sqlite3session_attach(m->session, NULL) != SQLITE_OK) { /* every table */
        sqlite3session_delete(m->session);
        m->session = NULL;
        return db_error(m, "replication: attaching the session");
    }
    return true;
}

/* A commit: its changes go to the mirror, and the next commit's start from
 * nothing (a session has no reset). Changes rolled back since the last
 * commit were recorded too, but a changeset holds the difference to the
 * database as it is now, so they leave nothing in it. */
static void publish(meta *m)
{
    int n = 0;
    void *cs = NULL;
    if (sqlite3session_changeset(m->session, &n, &cs) != SQLITE_OK)
        db_error(m, "replication: the changeset of a commit (followers miss it)");
    else if (n > 0)
        mirror_meta_changes(m->mirror, cs, (size_t)n);
    sqlite3_free(cs);
    sqlite3session_delete(m->session);
    m->session = NULL;
    if (!new_session(m))
        log_error("meta: replication stopped: followers miss every change from now on");
}

/* After a write: a commit (a call outside a group) goes to the mirror. */
static bool done(meta *m, bool ok)
{
    if (ok && m->session && !m->grouped)
        publish(m);
    return ok;
}

/* ---- statements --------------------------------------------------------- */

/* A NULL string binds SQL NULL, which every NOT NULL column refuses: a
 * logged error, not a crash. */
static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
    sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

/* Always a blob, never NULL: a NULL pointer would bind SQL NULL. */
static void bind_bytes(sqlite3_stmt *st, int i, amqp_bytes b)
{
    assert(b.ptr != NULL || b.len == 0);
    sqlite3_bind_blob64(st, i, b.ptr ? (const void *)b.ptr : "", b.len, SQLITE_STATIC);
}

static void bind_names(sqlite3_stmt *st, const char *vhost, const char *name)
{
    bind_text(st, 1, vhost);
    bind_text(st, 2, name);
}

/* Steps a bound statement to its end, then resets it and drops its bindings
 * (they point at the caller's memory). Returns SQLITE_DONE on success, else
 * the error code; sqlite3_errmsg still describes the error afterwards. */
static int run(sqlite3_stmt *st)
{
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

static void rollback(meta *m)
{
    if (!sqlite3_get_autocommit(m->db) && run(m->st[ST_ROLLBACK]) != SQLITE_DONE)
        db_error(m, "rollback");
}

/* Whether a write may go ahead: not from a load handler, and not inside a
 * meta_begin group that sqlite has already rolled back (after an I/O or
 * full-disk error): the write would autocommit on its own. */
static bool writable(meta *m)
{
    assert(!m->loading);
    if (m->grouped && sqlite3_get_autocommit(m->db)) {
        log_error("meta: write refused: the transaction begun by meta_begin was already "
                  "rolled back by an earlier error");
        return false;
    }
    return true;
}

/* The transaction of one call: its own, or a savepoint in the group. */
static bool call_begin(meta *m)
{
    return run(m->st[m->grouped ? ST_SAVEPOINT : ST_BEGIN]) == SQLITE_DONE;
}

/* Ends call_begin's transaction: commits (releases) when ok and that
 * works, else undoes the call's own part. The caller has logged already
 * when !ok; a failed commit is logged here. */
static bool call_end(meta *m, bool ok)
{
    if (ok && run(m->st[m->grouped ? ST_RELEASE : ST_COMMIT]) == SQLITE_DONE)
        return done(m, true);
    if (ok)
        db_error(m, "commit");
    if (!m->grouped)
        rollback(m);
    else if (!sqlite3_get_autocommit(m->db) &&
             (run(m->st[ST_ROLLBACK_TO]) != SQLITE_DONE ||
              run(m->st[ST_RELEASE]) != SQLITE_DONE))
        db_error(m, "rollback to savepoint");
    return false;
}

/* Runs statements steps[0..n) with the same two key parameters in one
 * transaction, so a crash cannot leave half of a cascade. */
static bool run_cascade(meta *m, const int *steps, size_t n, const char *a, const char *b)
{
    bool ok = call_begin(m);
    for (size_t i = 0; ok && i < n; i++) {
        bind_names(m->st[steps[i]], a, b);
        ok = run(m->st[steps[i]]) == SQLITE_DONE;
    }
    return ok;
}

/* Deletes the bindings naming an exchange or queue, then its row. */
static bool delete_with_bindings(meta *m, int unbind, int remove, const char *kind,
                                 const char *vhost, const char *name)
{
    const int steps[] = {unbind, remove};

    if (!writable(m))
        return false;
    bool ok = run_cascade(m, steps, 2, vhost, name);
    if (!ok)
        db_error(m, "delete %s '%s' in vhost '%s'", kind, str(name), str(vhost));
    return call_end(m, ok);
}

/* ---- schema ------------------------------------------------------------- */

static int migrate_0_to_1(sqlite3 *db)
{
    static const char sql[] =
        "CREATE TABLE exchanges ("
        "  vhost       TEXT    NOT NULL,"
        "  name        TEXT    NOT NULL,"
        "  type        TEXT    NOT NULL,"
        "  auto_delete INTEGER NOT NULL CHECK (auto_delete IN (0, 1)),"
        "  internal    INTEGER NOT NULL CHECK (internal IN (0, 1)),"
        "  arguments   BLOB    NOT NULL,"
        "  PRIMARY KEY (vhost, name)"
        ") STRICT;"
        "CREATE TABLE queues ("
        "  id          INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  vhost       TEXT    NOT NULL,"
        "  name        TEXT    NOT NULL,"
        "  auto_delete INTEGER NOT NULL CHECK (auto_delete IN (0, 1)),"
        "  arguments   BLOB    NOT NULL,"
        "  UNIQUE (vhost, name)"
        ") STRICT;"
        "CREATE TABLE bindings ("
        "  vhost                   TEXT    NOT NULL,"
        "  source                  TEXT    NOT NULL,"
        "  destination             TEXT    NOT NULL,"
        "  destination_is_exchange INTEGER NOT NULL CHECK (destination_is_exchange IN (0, 1)),"
        "  routing_key             BLOB    NOT NULL,"
        "  arguments               BLOB    NOT NULL,"
        "  UNIQUE (vhost, source, destination, destination_is_exchange, routing_key, arguments)"
        ") STRICT;"
        /* The unique index serves lookups by source; this one the cascades
         * by destination. */
        "CREATE INDEX bindings_by_destination"
        "  ON bindings (vhost, destination, destination_is_exchange);";
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Identity, access, policies and settings. The vhosts that version-1 rows
 * name become vhost rows (with no description or tags), so nothing that
 * was stored stops loading. */
static int migrate_1_to_2(sqlite3 *db)
{
    static const char sql[] =
        "CREATE TABLE vhosts ("
        "  name               TEXT    NOT NULL PRIMARY KEY,"
        "  description        TEXT    NOT NULL,"
        "  tags               TEXT    NOT NULL,"
        "  default_queue_type TEXT    NOT NULL,"
        "  tracing            INTEGER NOT NULL CHECK (tracing IN (0, 1))"
        ") STRICT;"
        "CREATE TABLE users ("
        "  name              TEXT NOT NULL PRIMARY KEY,"
        "  password_hash     TEXT NOT NULL,"
        "  hashing_algorithm TEXT NOT NULL,"
        "  tags              TEXT NOT NULL"
        ") STRICT;"
        "CREATE TABLE permissions ("
        "  user      TEXT NOT NULL,"
        "  vhost     TEXT NOT NULL,"
        "  configure TEXT NOT NULL,"
        "  write     TEXT NOT NULL,"
        "  read      TEXT NOT NULL,"
        "  PRIMARY KEY (user, vhost)"
        ") STRICT;"
        "CREATE INDEX permissions_by_vhost ON permissions (vhost);"
        "CREATE TABLE topic_permissions ("
        "  user     TEXT NOT NULL,"
        "  vhost    TEXT NOT NULL,"
        "  exchange TEXT NOT NULL,"
        "  write    TEXT NOT NULL,"
        "  read     TEXT NOT NULL,"
        "  PRIMARY KEY (user, vhost, exchange)"
        ") STRICT;"
        "CREATE INDEX topic_permissions_by_vhost ON topic_permissions (vhost);"
        "CREATE TABLE policies ("
        "  vhost           TEXT    NOT NULL,"
        "  name            TEXT    NOT NULL,"
        "  operator_policy INTEGER NOT NULL CHECK (operator_policy IN (0, 1)),"
        "  pattern         TEXT    NOT NULL,"
        "  apply_to        TEXT    NOT NULL,"
        "  priority        INTEGER NOT NULL,"
        "  definition      BLOB    NOT NULL,"
        "  PRIMARY KEY (vhost, name, operator_policy)"
        ") STRICT;"
        "CREATE TABLE settings ("
        "  key   TEXT NOT NULL PRIMARY KEY,"
        "  value TEXT NOT NULL"
        ") STRICT;"
        "INSERT INTO vhosts (name, description, tags, default_queue_type, tracing)"
        "  SELECT vhost, '', '', '', 0 FROM ("
        "    SELECT vhost FROM exchanges UNION SELECT vhost FROM queues"
        "    UNION SELECT vhost FROM bindings) ORDER BY vhost;";
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Runtime parameters: per vhost (shovels, federation upstreams, ...) and
 * global ones (cluster_name, internal_cluster_id, ...). */
static int migrate_2_to_3(sqlite3 *db)
{
    static const char sql[] =
        "CREATE TABLE parameters ("
        "  vhost     TEXT NOT NULL,"
        "  component TEXT NOT NULL,"
        "  name      TEXT NOT NULL,"
        "  value     TEXT NOT NULL,"
        "  PRIMARY KEY (vhost, component, name)"
        ") STRICT;"
        "CREATE TABLE global_parameters ("
        "  name  TEXT NOT NULL PRIMARY KEY,"
        "  value TEXT NOT NULL"
        ") STRICT;";
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* The users' limits (max-connections, max-channels), not set. */
static int migrate_3_to_4(sqlite3 *db)
{
    static const char sql[] = "ALTER TABLE users ADD COLUMN max_connections INTEGER;"
                              "ALTER TABLE users ADD COLUMN max_channels INTEGER;";
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Replication: sessions record only tables with a PRIMARY KEY, so the
 * bindings table is rebuilt with its unique columns as the key (rows copied
 * in rowid order: first-insertion order stays), and the queue id counter
 * gets a keyed row of its own (see Replication at the top). */
static int migrate_4_to_5(sqlite3 *db)
{
    static const char sql[] =
        "CREATE TABLE bindings_v5 ("
        "  vhost                   TEXT    NOT NULL,"
        "  source                  TEXT    NOT NULL,"
        "  destination             TEXT    NOT NULL,"
        "  destination_is_exchange INTEGER NOT NULL CHECK (destination_is_exchange IN (0, 1)),"
        "  routing_key             BLOB    NOT NULL,"
        "  arguments               BLOB    NOT NULL,"
        "  PRIMARY KEY (vhost, source, destination, destination_is_exchange, routing_key,"
        "               arguments)"
        ") STRICT;"
        "INSERT INTO bindings_v5 SELECT vhost, source, destination, destination_is_exchange,"
        "  routing_key, arguments FROM bindings ORDER BY rowid;"
        "DROP TABLE bindings;"
        "ALTER TABLE bindings_v5 RENAME TO bindings;"
        "CREATE INDEX bindings_by_destination"
        "  ON bindings (vhost, destination, destination_is_exchange);"
        "CREATE TABLE counters ("
        "  name  TEXT    NOT NULL PRIMARY KEY,"
        "  value INTEGER NOT NULL"
        ") STRICT;"
        "INSERT INTO counters SELECT name, seq FROM sqlite_sequence WHERE name = 'queues';"
        "CREATE TRIGGER queues_counter AFTER INSERT ON queues BEGIN"
        "  INSERT INTO counters (name, value) VALUES ('queues', NEW.id)"
        "  ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value);"
        " END;";
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* migrations[v] takes the schema from version v to v + 1, inside a
 * transaction the caller opens and commits. Returns an sqlite result code. */
static int (*const migrations[])(sqlite3 *db) = {
    migrate_0_to_1,
    migrate_1_to_2,
    migrate_2_to_3,
    migrate_3_to_4,
    migrate_4_to_5,
};

#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof migrations[0]))

static void set_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    char reason[512];
    va_list ap;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: %s", path, reason);
}

/* The single integer a pragma returns, or -1 on error. */
static int pragma_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    int v = -1;

    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    if (sqlite3_finalize(st) != SQLITE_OK)
        v = -1;
    return v;
}

/* Runs one migration step, reading the version inside the transaction so
 * two processes opening at once cannot both migrate. *version is where the
 * database is afterwards; a version at or past SCHEMA_VERSION is left
 * alone (the caller refuses a newer one). */
static bool migrate_step(sqlite3 *db, const char *path, int *version, char *err, size_t errlen)
{
    char bump[64];
    int from = *version;
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);

    if (rc == SQLITE_OK) {
        from = pragma_int(db, "PRAGMA user_version");
        rc = from < 0 ? SQLITE_ERROR : SQLITE_OK;
    }
    if (rc == SQLITE_OK && from < SCHEMA_VERSION) {
        rc = migrations[from](db);
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", from + 1);
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(db, bump, NULL, NULL, NULL);
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        set_err(err, errlen, path, "migrating schema from version %d to %d: %s", from, from + 1,
                sqlite3_errmsg(db));
        if (!sqlite3_get_autocommit(db))
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return false;
    }
    *version = from < SCHEMA_VERSION ? from + 1 : from;
    return true;
}

static bool migrate(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    int version = pragma_int(db, "PRAGMA user_version");

    if (version < 0) {
        set_err(err, errlen, path, "reading schema version: %s", sqlite3_errmsg(db));
        return false;
    }
    while (version < SCHEMA_VERSION)
        if (!migrate_step(db, path, &version, err, errlen))
            return false;
    if (version > SCHEMA_VERSION) {
        set_err(err, errlen, path,
                "schema version %d is newer than this broker's (%d); refusing to open", version,
                SCHEMA_VERSION);
        return false;
    }
    return true;
}

/* ---- open / close ------------------------------------------------------- */

/* WAL with synchronous=FULL (see the top of the file). The journal_mode
 * pragma is the first read of the file, so a file that is not a database
 * fails here with "file is not a database". */
static bool configure(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    char mode[16] = "";

    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, META_BUSY_TIMEOUT_MS);
    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, &st, NULL) != SQLITE_OK) {
        set_err(err, errlen, path, "%s", sqlite3_errmsg(db));
        return false;
    }
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != NULL)
        snprintf(mode, sizeof mode, "%s", (const char *)sqlite3_column_text(st, 0));
    if (sqlite3_finalize(st) != SQLITE_OK) {
        set_err(err, errlen, path, "%s", sqlite3_errmsg(db));
        return false;
    }
    if (strcmp(mode, "wal") != 0) {
        set_err(err, errlen, path, "cannot use WAL mode (journal mode is '%s')", mode);
        return false;
    }
    if (sqlite3_exec(db, "PRAGMA synchronous = FULL", NULL, NULL, NULL) != SQLITE_OK) {
        set_err(err, errlen, path, "%s", sqlite3_errmsg(db));
        return false;
    }
    return true;
}

/* PRAGMA quick_check reads every page once (O(size), milliseconds for
 * metadata) so a damaged file is refused at open, not mid-declaration. */
static bool check_integrity(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    char first[256] = "";
    int rc;

    if (sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &st, NULL) != SQLITE_OK) {
        set_err(err, errlen, path, "%s", sqlite3_errmsg(db));
        return false;
    }
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_text(st, 0) != NULL)
        snprintf(first, sizeof first, "%s", (const char *)sqlite3_column_text(st, 0));
    if (sqlite3_finalize(st) != SQLITE_OK) {
        set_err(err, errlen, path, "%s", sqlite3_errmsg(db));
        return false;
    }
    if (strcmp(first, "ok") != 0) {
        for (char *c = first; *c; c++) /* sqlite's report is multi-line */
            if (*c == '\n')
                *c = ' ';
        set_err(err, errlen, path, "database is corrupt: %s", first);
        return false;
    }
    return true;
}

static bool prepare_all(meta *m, const char *path, char *err, size_t errlen)
{
    for (int i = 0; i < ST_COUNT; i++) {
        assert(statement_sql[i] != NULL);
        if (sqlite3_prepare_v3(m->db, statement_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &m->st[i],
                               NULL) != SQLITE_OK) {
            set_err(err, errlen, path, "preparing \"%s\": %s", statement_sql[i],
                    sqlite3_errmsg(m->db));
            return false;
        }
    }
    return true;
}

/* Returns a handle the caller owns (meta_close), or NULL with err set to
 * "<path>: <reason>" when the file cannot be opened, is not a database, is
 * corrupt, is newer than this broker, or cannot be migrated. */
meta *meta_open(const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX];
    meta *m;

    if ((size_t)snprintf(path, sizeof path, "%s/metadata.db", dir) >= sizeof path) {
        set_err(err, errlen, dir, "path too long");
        return NULL;
    }
    if (sqlite3_libversion_number() < META_MIN_SQLITE) {
        set_err(err, errlen, path, "sqlite %s is too old (3.37 or newer needed)",
                sqlite3_libversion());
        return NULL;
    }
    m = calloc(1, sizeof *m);
    if (m == NULL) {
        set_err(err, errlen, path, "out of memory");
        return NULL;
    }
    if (sqlite3_open_v2(path, &m->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        set_err(err, errlen, path, "%s", m->db ? sqlite3_errmsg(m->db) : "out of memory");
        meta_close(m);
        return NULL;
    }
    if (!configure(m->db, path, err, errlen) || !check_integrity(m->db, path, err, errlen) ||
        !migrate(m->db, path, err, errlen) || !prepare_all(m, path, err, errlen)) {
        meta_close(m);
        return NULL;
    }
    return m;
}

/* Finalizes the statements and closes the database, which checkpoints the
 * WAL into the main file; a meta_begin group still open is rolled back.
 * NULL is a no-op. */
void meta_close(meta *m)
{
    if (m == NULL)
        return;
    assert(!m->loading);
    if (m->session)
        sqlite3session_delete(m->session);
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(m->st[i]);
    if (m->db != NULL && sqlite3_close(m->db) != SQLITE_OK)
        log_error("meta: close: %s", sqlite3_errmsg(m->db));
    free(m);
}

/* ---- writes ------------------------------------------------------------- */

/* Inserts or updates (type, flags, arguments) by (vhost, name). */
bool meta_put_exchange(meta *m, const meta_exchange *e)
{
    sqlite3_stmt *st = m->st[ST_PUT_EXCHANGE];

    if (!writable(m))
        return false;
    bind_names(st, e->vhost, e->name);
    bind_text(st, 3, e->type);
    sqlite3_bind_int(st, 4, e->auto_delete);
    sqlite3_bind_int(st, 5, e->internal);
    bind_bytes(st, 6, e->arguments);
    if (run(st) != SQLITE_DONE)
        return db_error(m, "put exchange '%s' in vhost '%s'", str(e->name), str(e->vhost));
    return done(m, true);
}

/* Also deletes every binding from the exchange and to it. */
bool meta_delete_exchange(meta *m, const char *vhost, const char *name)
{
    return delete_with_bindings(m, ST_UNBIND_EXCHANGE, ST_DELETE_EXCHANGE, "exchange", vhost,
                                name);
}

/* One statement (an upsert with RETURNING id): a new queue gets a fresh id,
 * an existing one keeps its id and takes the new flags and arguments.
 * q->id is written only on success. */
bool meta_put_queue(meta *m, meta_queue *q)
{
    sqlite3_stmt *st = m->st[ST_PUT_QUEUE];
    sqlite3_int64 id = 0;
    int rc;

    if (!writable(m))
        return false;
    bind_names(st, q->vhost, q->name);
    sqlite3_bind_int(st, 3, q->auto_delete);
    bind_bytes(st, 4, q->arguments);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        id = sqlite3_column_int64(st, 0);
        rc = sqlite3_step(st); /* the autocommit (if any) happens on this step */
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE)
        return db_error(m, "put queue '%s' in vhost '%s'", str(q->name), str(q->vhost));
    assert(id > 0);
    q->id = (uint64_t)id;
    return done(m, true);
}

/* Also deletes every binding to the queue. Its id is never reused. */
bool meta_delete_queue(meta *m, const char *vhost, const char *name)
{
    return delete_with_bindings(m, ST_UNBIND_QUEUE, ST_DELETE_QUEUE, "queue", vhost, name);
}

static void bind_binding(sqlite3_stmt *st, const meta_binding *b)
{
    bind_names(st, b->vhost, b->source);
    bind_text(st, 3, b->destination);
    sqlite3_bind_int(st, 4, b->destination_is_exchange);
    bind_bytes(st, 5, b->routing_key);
    bind_bytes(st, 6, b->arguments);
}

/* A binding equal in all six fields to a stored one is not added again. */
bool meta_put_binding(meta *m, const meta_binding *b)
{
    if (!writable(m))
        return false;
    bind_binding(m->st[ST_PUT_BINDING], b);
    if (run(m->st[ST_PUT_BINDING]) != SQLITE_DONE)
        return db_error(m, "put binding from '%s' to %s '%s' in vhost '%s'", str(b->source),
                        b->destination_is_exchange ? "exchange" : "queue", str(b->destination),
                        str(b->vhost));
    return done(m, true);
}

/* Deletes the binding equal in all six fields, if there is one. */
bool meta_delete_binding(meta *m, const meta_binding *b)
{
    if (!writable(m))
        return false;
    bind_binding(m->st[ST_DELETE_BINDING], b);
    if (run(m->st[ST_DELETE_BINDING]) != SQLITE_DONE)
        return db_error(m, "delete binding from '%s' to %s '%s' in vhost '%s'", str(b->source),
                        b->destination_is_exchange ? "exchange" : "queue", str(b->destination),
                        str(b->vhost));
    return done(m, true);
}

/* ---- users, vhosts, permissions, policies ------------------------------- */

/* Binds texts to ?1..?n. */
static void bind_texts(sqlite3_stmt *st, const char *const *texts, int n)
{
    for (int i = 0; i < n; i++)
        bind_text(st, i + 1, texts[i]);
}

/* Runs a bound single-statement write; logs "<kind> '<a>'[ in '<b>']". */
static bool write_row(meta *m, int which, const char *verb, const char *kind, const char *a,
                      const char *b)
{
    if (run(m->st[which]) == SQLITE_DONE)
        return done(m, true);
    if (b)
        return db_error(m, "%s %s of '%s' in vhost '%s'", verb, kind, str(a), str(b));
    return db_error(m, "%s %s '%s'", verb, kind, str(a));
}

static void bind_limit(sqlite3_stmt *st, int i, meta_limit l)
{
    if (l.set)
        sqlite3_bind_int64(st, i, l.value);
    else
        sqlite3_bind_null(st, i);
}

bool meta_put_user(meta *m, const meta_user *u)
{
    const char *texts[] = {u->name, u->password_hash, u->hashing_algorithm, u->tags};

    if (!writable(m))
        return false;
    bind_texts(m->st[ST_PUT_USER], texts, 4);
    bind_limit(m->st[ST_PUT_USER], 5, u->max_connections);
    bind_limit(m->st[ST_PUT_USER], 6, u->max_channels);
    return write_row(m, ST_PUT_USER, "put", "user", u->name, NULL);
}

bool meta_delete_user(meta *m, const char *name)
{
    static const int steps[] = {ST_DELETE_USER_TOPIC_PERMISSIONS, ST_DELETE_USER_PERMISSIONS,
                                ST_DELETE_USER};

    if (!writable(m))
        return false;
    bool ok = run_cascade(m, steps, sizeof steps / sizeof steps[0], name, NULL);
    if (!ok)
        db_error(m, "delete user '%s'", str(name));
    return call_end(m, ok);
}

bool meta_put_vhost(meta *m, const meta_vhost *v)
{
    const char *texts[] = {v->name, v->description, v->tags, v->default_queue_type};

    if (!writable(m))
        return false;
    bind_texts(m->st[ST_PUT_VHOST], texts, 4);
    sqlite3_bind_int(m->st[ST_PUT_VHOST], 5, v->tracing);
    return write_row(m, ST_PUT_VHOST, "put", "vhost", v->name, NULL);
}

bool meta_delete_vhost(meta *m, const char *name)
{
    static const int steps[] = {
        ST_DELETE_VHOST_BINDINGS,    ST_DELETE_VHOST_QUEUES,
        ST_DELETE_VHOST_EXCHANGES,   ST_DELETE_VHOST_TOPIC_PERMISSIONS,
        ST_DELETE_VHOST_PERMISSIONS, ST_DELETE_VHOST_POLICIES,
        ST_DELETE_VHOST_PARAMETERS,  ST_DELETE_VHOST,
    };

    if (!writable(m))
        return false;
    bool ok = run_cascade(m, steps, sizeof steps / sizeof steps[0], name, NULL);
    if (!ok)
        db_error(m, "delete vhost '%s'", str(name));
    return call_end(m, ok);
}

bool meta_put_permission(meta *m, const meta_permission *p)
{
    const char *texts[] = {p->user, p->vhost, p->configure, p->write, p->read};

    if (!writable(m))
        return false;
    bind_texts(m->st[ST_PUT_PERMISSION], texts, 5);
    return write_row(m, ST_PUT_PERMISSION, "put", "permissions", p->user, p->vhost);
}

bool meta_delete_permission(meta *m, const char *user, const char *vhost)
{
    if (!writable(m))
        return false;
    bind_names(m->st[ST_DELETE_PERMISSION], user, vhost);
    return write_row(m, ST_DELETE_PERMISSION, "delete", "permissions", user, vhost);
}

bool meta_put_topic_permission(meta *m, const meta_topic_permission *p)
{
    const char *texts[] = {p->user, p->vhost, p->exchange, p->write, p->read};

    if (!writable(m))
        return false;
    bind_texts(m->st[ST_PUT_TOPIC_PERMISSION], texts, 5);
    return write_row(m, ST_PUT_TOPIC_PERMISSION, "put", "topic permissions", p->user, p->vhost);
}

bool meta_delete_topic_permission(meta *m, const char *user, const char *vhost,
                                  const char *exchange)
{
    int which = exchange ? ST_DELETE_TOPIC_PERMISSION : ST_DELETE_TOPIC_PERMISSIONS;
    const char *texts[] = {user, vhost, exchange};

    if (!writable(m))
        return false;
    bind_texts(m->st[which], texts, exchange ? 3 : 2);
    return write_row(m, which, "delete", "topic permissions", user, vhost);
}

bool meta_put_policy(meta *m, const meta_policy *p)
{
    sqlite3_stmt *st = m->st[ST_PUT_POLICY];

    if (!writable(m))
        return false;
    bind_names(st, p->vhost, p->name);
    sqlite3_bind_int(st, 3, p->operator_policy);
    bind_text(st, 4, p->pattern);
    bind_text(st, 5, p->apply_to);
    sqlite3_bind_int(st, 6, p->priority);
    bind_bytes(st, 7, p->definition);
    if (run(st) != SQLITE_DONE)
        return db_error(m, "put %s '%s' in vhost '%s'",
                        p->operator_policy ? "operator policy" : "policy", str(p->name),
                        str(p->vhost));
    return done(m, true);
}

bool meta_delete_policy(meta *m, const char *vhost, const char *name, bool operator_policy)
{
    sqlite3_stmt *st = m->st[ST_DELETE_POLICY];

    if (!writable(m))
        return false;
    bind_names(st, vhost, name);
    sqlite3_bind_int(st, 3, operator_policy);
    if (run(st) != SQLITE_DONE)
        return db_error(m, "delete %s '%s' in vhost '%s'",
                        operator_policy ? "operator policy" : "policy", str(name), str(vhost));
    return done(m, true);
}

bool meta_put_parameter(meta *m, const meta_parameter *p)
{
    bool global = p->vhost == NULL;
    int which = global ? ST_PUT_GLOBAL_PARAMETER : ST_PUT_PARAMETER;
    const char *texts[] = {p->vhost, p->component, p->name, p->value};

    if (!writable(m))
        return false;
    if (global)
        bind_texts(m->st[which], texts + 2, 2);
    else
        bind_texts(m->st[which], texts, 4);
    if (run(m->st[which]) == SQLITE_DONE)
        return done(m, true);
    if (global)
        return db_error(m, "put global parameter '%s'", str(p->name));
    return db_error(m, "put parameter '%s' of component '%s' in vhost '%s'", str(p->name),
                    str(p->component), str(p->vhost));
}

bool meta_delete_parameter(meta *m, const char *vhost, const char *component, const char *name)
{
    bool global = vhost == NULL;
    int which = global ? ST_DELETE_GLOBAL_PARAMETER : ST_DELETE_PARAMETER;
    const char *texts[] = {vhost, component, name};

    if (!writable(m))
        return false;
    if (global)
        bind_texts(m->st[which], texts + 2, 1);
    else
        bind_texts(m->st[which], texts, 3);
    if (run(m->st[which]) == SQLITE_DONE)
        return done(m, true);
    if (global)
        return db_error(m, "delete global parameter '%s'", str(name));
    return db_error(m, "delete parameter '%s' of component '%s' in vhost '%s'", str(name),
                    str(component), str(vhost));
}

/* ---- settings ----------------------------------------------------------- */

bool meta_get_setting(meta *m, const char *key, char *out, size_t cap)
{
    sqlite3_stmt *st = m->st[ST_GET_SETTING];
    bool found = false;
    int rc;

    assert(!m->loading && cap > 0);
    bind_text(st, 1, key);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        size_t len = v ? strlen(v) : 0;
        found = v != NULL && len < cap;
        if (found)
            memcpy(out, v, len + 1);
        else
            log_error("meta: get setting '%s': %s", str(key),
                      v ? "value does not fit" : "out of memory");
        rc = sqlite3_step(st);
    }
    if (rc != SQLITE_DONE) {
        db_error(m, "get setting '%s'", str(key));
        found = false;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return found;
}

bool meta_put_setting(meta *m, const char *key, const char *value)
{
    const char *texts[] = {key, value};

    if (!writable(m))
        return false;
    bind_texts(m->st[ST_PUT_SETTING], texts, 2);
    return write_row(m, ST_PUT_SETTING, "put", "setting", key, NULL);
}

/* ---- grouping calls into one transaction -------------------------------- */

bool meta_begin(meta *m)
{
    assert(!m->loading);
    if (m->grouped) {
        log_error("meta: begin: a transaction is already open");
        return false;
    }
    if (run(m->st[ST_BEGIN]) != SQLITE_DONE)
        return db_error(m, "begin");
    m->grouped = true;
    return true;
}

bool meta_commit(meta *m)
{
    bool ok;

    assert(!m->loading);
    if (!m->grouped) {
        log_error("meta: commit: no transaction is open");
        return false;
    }
    m->grouped = false;
    if (sqlite3_get_autocommit(m->db)) {
        log_error("meta: commit: the transaction was already rolled back by an earlier error");
        return false;
    }
    ok = run(m->st[ST_COMMIT]) == SQLITE_DONE;
    if (!ok) {
        db_error(m, "commit");
        rollback(m);
    }
    return done(m, ok);
}

bool meta_grouped(const meta *m) { return m->grouped; }

void meta_rollback(meta *m)
{
    assert(!m->loading);
    if (!m->grouped)
        return;
    m->grouped = false;
    rollback(m);
}

/* ---- load --------------------------------------------------------------- */

static amqp_bytes col_bytes(sqlite3_stmt *st, int i)
{
    const void *p = sqlite3_column_blob(st, i); /* before _bytes, as sqlite asks */
    return (amqp_bytes){p, (uint32_t)sqlite3_column_bytes(st, i)};
}

#define COL_TEXT(st, i) ((const char *)sqlite3_column_text((st), (i)))

/* Each hands one row to its handler. false only when sqlite could not
 * produce a column (out of memory): every text column is NOT NULL. */
typedef bool (*emit_fn)(sqlite3_stmt *st, const meta_load_handlers *h, void *ctx);

static bool emit_vhost(sqlite3_stmt *st, const meta_load_handlers *h, void *ctx)
{
    meta_vhost v = {COL_TEXT(st, 0), COL_TEXT(st, 1), COL_TEXT(st, 2), COL_TEXT(st, 3),
                    sqlite3_column_int(st, 4) != 0};
    if (!v.name || !v.description || !v.tags || !v.default_queue_type)
        return false;
    h->vhost(ctx, &v);
    return true;
}

static meta_limit column_limit(sqlite3_stmt *st, int col)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL)
        return (meta_limit){0};
    return (meta_limit){true, sqlite3_column_int64(st, col)};
}

static bool emit_user(sqlite3_stmt *st, const meta_load_handlers *h, void *ctx)
{
    meta_user u = {COL_TEXT(st, 0), COL_TEXT(st, 1), COL_TEXT(st, 2), COL_TEXT(st, 3),
                   column_limit(st, 4), column_limit(st, 5)};
    if (!u.name || !u.password_hash || !u.hashing_algorithm || !u.tags)
        return false;
    h->user(ctx, &u);
    return true;
}

static bool emit_permission(sqlite3_stmt *st, const meta_load_handlers *h, void *ctx)
{
    meta_permission p = {COL_TEXT(st, 0), COL_TEXT(st, 1), COL_TEXT(st, 2), COL_TEXT(st, 3),
                         COL_TEXT(st, 4)};
    if (!p.user || !p.vhost || !p.configure || !p.write || !p.read)
        return false;
    h->permission(ctx, &p);
    return true;
}

static bool emit_topic_permission(sqlite3_stmt *st, const meta_load_handlers *h, void *ctx)
{
    meta_topic_permission p = {COL_TEXT(st, 0), COL_TEXT(st, 1), COL_TEXT(st, 2),
                               COL_TEXT(st, 3), COL_TEXT(st, 4)};
    if (!p.user || !p.vhost || !p.exchange || !p.write || !p.read)
        return false;
    h->topic_permission(ctx, &p);
    return true;
}

static bool emit_policy(sqlite3_stmt *st, const meta_load_handlers *h, void *ctx)
{
    meta_policy p = {COL_TEXT(st, 0), COL_TEXT(st, 1), COL_TEXT(st, 2), COL_TEXT(st, 3),
                     sqlite3_column_int(st, 4), col_bytes(st, 5),
                     sqlite3_column_int(st, 6) != 0};
    if (!p.vhost || !p.name || !p.pattern || !p.apply_to)
        return false;
    h->policy(ctx, &p);
    return true;
}

static bool emit_parameter(sqlite3_stmt *st, const meta_load_handlers *h, void *ctx)
{
    meta_parameter p = {COL_TEXT(st, 0), COL_TEXT(st, 1), COL_TEXT(st, 2), COL_TEXT(st, 3)};
    if (!p.vhost || !p.component || !p.name || !p.value)
        return false;
    h->parameter(ctx, &p);
    return true;
}

static bool emit_global_parameter(sqlite3_stmt *st, const meta_load_handlers *h, void *ctx)
{
    meta_parameter p = {NULL, NULL, COL_TEXT(st, 0), COL_TEXT(st, 1)};
    if (!p.name || !p.value)
        return false;
    h->parameter(ctx, &p);
    return true;
}

static bool emit_exchange(sqlite3_stmt *st, const meta_load_handlers *h, void *ctx)
{
    meta_exchange e = {COL_TEXT(st, 0), COL_TEXT(st, 1), COL_TEXT(st, 2),
                       sqlite3_column_int(st, 3) != 0, sqlite3_column_int(st, 4) != 0,
                       col_bytes(st, 5)};
    if (!e.vhost || !e.name || !e.type)
        return false;
    h->exchange(ctx, &e);
    return true;
}

static bool emit_queue(sqlite3_stmt *st, const meta_load_handlers *h, void *ctx)
{
    meta_queue q = {(uint64_t)sqlite3_column_int64(st, 0), COL_TEXT(st, 1), COL_TEXT(st, 2),
                    sqlite3_column_int(st, 3) != 0, col_bytes(st, 4)};
    if (!q.vhost || !q.name)
        return false;
    h->queue(ctx, &q);
    return true;
}

static bool emit_binding(sqlite3_stmt *st, const meta_load_handlers *h, void *ctx)
{
    meta_binding b = {COL_TEXT(st, 0), COL_TEXT(st, 1), COL_TEXT(st, 2),
                      sqlite3_column_int(st, 3) != 0, col_bytes(st, 4), col_bytes(st, 5)};
    if (!b.vhost || !b.source || !b.destination)
        return false;
    h->binding(ctx, &b);
    return true;
}

static bool load_table(meta *m, int which, const char *table, emit_fn emit,
                       const meta_load_handlers *h, void *ctx)
{
    sqlite3_stmt *st = m->st[which];
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        if (!emit(st, h, ctx)) {
            rc = SQLITE_NOMEM;
            break;
        }
    sqlite3_reset(st);
    if (rc == SQLITE_NOMEM)
        return db_error(m, "load %s: reading a row", table);
    if (rc != SQLITE_DONE)
        return db_error(m, "load %s", table);
    return true;
}

/* The tables in load order: what the rows of later tables name comes first. */
static bool load_all(meta *m, const meta_load_handlers *h, void *ctx)
{
    const struct {
        bool wanted;
        int which;
        const char *table;
        emit_fn emit;
    } tables[] = {
        {h->vhost != NULL, ST_LOAD_VHOSTS, "vhosts", emit_vhost},
        {h->user != NULL, ST_LOAD_USERS, "users", emit_user},
        {h->permission != NULL, ST_LOAD_PERMISSIONS, "permissions", emit_permission},
        {h->topic_permission != NULL, ST_LOAD_TOPIC_PERMISSIONS, "topic permissions",
         emit_topic_permission},
        {h->policy != NULL, ST_LOAD_POLICIES, "policies", emit_policy},
        {h->parameter != NULL, ST_LOAD_GLOBAL_PARAMETERS, "global parameters",
         emit_global_parameter},
        {h->parameter != NULL, ST_LOAD_PARAMETERS, "parameters", emit_parameter},
        {h->exchange != NULL, ST_LOAD_EXCHANGES, "exchanges", emit_exchange},
        {h->queue != NULL, ST_LOAD_QUEUES, "queues", emit_queue},
        {h->binding != NULL, ST_LOAD_BINDINGS, "bindings", emit_binding},
    };

    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (tables[i].wanted &&
            !load_table(m, tables[i].which, tables[i].table, tables[i].emit, h, ctx))
            return false;
    return true;
}

/* One read transaction, so the tables are one snapshot (inside a meta_begin
 * group, the group's own transaction). Handlers must not call meta. */
bool meta_load(meta *m, const meta_load_handlers *h, void *ctx)
{
    bool own = !m->grouped;
    bool ok;

    assert(!m->loading);
    if (own && run(m->st[ST_BEGIN_READ]) != SQLITE_DONE)
        return db_error(m, "load: begin");
    m->loading = true;
    ok = load_all(m, h, ctx);
    m->loading = false;
    if (own && ok && run(m->st[ST_COMMIT]) != SQLITE_DONE)
        ok = db_error(m, "load: commit");
    if (own && !ok)
        rollback(m);
    return ok;
}

/* ---- replication -------------------------------------------------------- */

/* Sessions skip a table without a PRIMARY KEY silently: refuse to mirror
 * one (a new table must declare a key). */
static bool every_table_keyed(meta *m)
{
    sqlite3_stmt *st;
    bool ok = true;
    if (sqlite3_prepare_v2(m->db,
                           "SELECT s.name FROM sqlite_schema AS s WHERE s.type = 'table'"
                           " AND s.name NOT LIKE 'sqlite_%' AND NOT EXISTS"
                           " (SELECT 1 FROM pragma_table_info(s.name) WHERE pk > 0)",
                           -1, &st, NULL) != SQLITE_OK)
        return db_error(m, "replication: listing the tables");
    while (sqlite3_step(st) == SQLITE_ROW) {
        log_error("meta: replication: table '%s' has no primary key",
                  (const char *)sqlite3_column_text(st, 0));
        ok = false;
    }
    sqlite3_finalize(st);
    return ok;
}

bool meta_set_mirror(meta *m, mirror *mr)
{
    if (m->grouped) {
        log_error("meta: set mirror: inside a transaction");
        return false;
    }
    if (m->session)
        sqlite3session_delete(m->session);
    m->session = NULL;
    m->mirror = mr;
    if (mr == NULL)
        return true;
    if (!every_table_keyed(m) || !new_session(m)) {
        m->mirror = NULL;
        return false;
    }
    return true;
}

bool meta_serialize(meta *m, uint8_t **image, size_t *len)
{
    if (m->grouped) {
        log_error("meta: serialize: inside a transaction");
        return false;
    }
    sqlite3_int64 n = 0;
    unsigned char *p = sqlite3_serialize(m->db, "main", &n, 0);
    *image = p && n > 0 ? malloc((size_t)n) : NULL;
    if (*image == NULL) {
        sqlite3_free(p);
        return db_error(m, "serialize");
    }
    memcpy(*image, p, (size_t)n);
    *len = (size_t)n;
    sqlite3_free(p);
    return true;
}

/* The leader's row wins: a row already there in another state is replaced,
 * a change to a row that is gone is left out. A constraint the row breaks
 * (a follower that diverged) fails the apply. */
static int on_conflict(void *ctx, int type, sqlite3_changeset_iter *it)
{
    (void)ctx;
    (void)it;
    switch (type) {
    case SQLITE_CHANGESET_DATA:
    case SQLITE_CHANGESET_CONFLICT:
        return SQLITE_CHANGESET_REPLACE;
    case SQLITE_CHANGESET_NOTFOUND:
        return SQLITE_CHANGESET_OMIT;
    default:
        return SQLITE_CHANGESET_ABORT;
    }
}

/* sqlite_sequence is no part of a changeset: the queue id counter comes as
 * the counters row, and the next id handed out here follows it. */
static const char raise_sequence_sql[] =
    "INSERT INTO sqlite_sequence (name, seq) SELECT 'queues', 0"
    "  WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'queues');"
    "UPDATE sqlite_sequence SET seq = (SELECT value FROM counters WHERE name = 'queues')"
    "  WHERE name = 'queues' AND seq < (SELECT value FROM counters WHERE name = 'queues');";

bool meta_apply_changes(meta *m, const void *changeset, size_t len)
{
    if (m->grouped || m->session || len > INT_MAX) {
        log_error("meta: apply changes: %s",
                  len > INT_MAX ? "changeset too large" : "not on a follower's idle meta");
        return false;
    }
    if (run(m->st[ST_BEGIN]) != SQLITE_DONE)
        return db_error(m, "apply changes: begin");
    bool ok = sqlite3changeset_apply(m->db, (int)len, (void *)changeset, NULL, on_conflict,
                                     NULL) == SQLITE_OK;
    if (!ok)
        db_error(m, "apply changes");
    else if (!(ok = sqlite3_exec(m->db, raise_sequence_sql, NULL, NULL, NULL) == SQLITE_OK))
        db_error(m, "apply changes: the queue id counter");
    else if (!(ok = run(m->st[ST_COMMIT]) == SQLITE_DONE))
        db_error(m, "apply changes: commit");
    if (!ok)
        rollback(m);
    return ok;
}

static bool image_fail(char *err, size_t errlen, const char *what, const char *path)
{
    if (err && errlen)
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
    return false;
}

/* The old -wal goes before the rename: sqlite would apply an old WAL's
 * frames to the new file (nothing ties a WAL to its database's contents).
 * A crash in between leaves the old file without its WAL: a follower in
 * the middle of a snapshot is started again from a new one anyway. */
bool meta_replace_image(const char *dir, const void *image, size_t len, char *err,
                        size_t errlen)
{
    char tmp[PATH_MAX], path[PATH_MAX], side[PATH_MAX + 8];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/metadata.db.tmp", dir) >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return image_fail(err, errlen, "replacing the metadata in", dir);
    }
    snprintf(path, sizeof path, "%s/metadata.db", dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return image_fail(err, errlen, "creating", tmp);
    const uint8_t *p = image;
    for (size_t done = 0; done < len;) {
        ssize_t k = write(fd, p + done, len - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            close(fd);
            unlink(tmp);
            return image_fail(err, errlen, "writing", tmp);
        }
        done += (size_t)k;
    }
    if (fsync(fd) != 0) {
        close(fd);
        unlink(tmp);
        return image_fail(err, errlen, "fsync of", tmp);
    }
    close(fd);
    static const char *const sides[] = {"-wal", "-shm"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(side, sizeof side, "%s%s", path, sides[i]);
        if (unlink(side) != 0 && errno != ENOENT)
            return image_fail(err, errlen, "removing", side);
    }
    if (rename(tmp, path) != 0)
        return image_fail(err, errlen, "renaming over", path);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    bool synced = dfd >= 0 && fsync(dfd) == 0;
    if (dfd >= 0)
        close(dfd);
    return synced || image_fail(err, errlen, "fsync of", dir);
}
