/* The server: the libevent loop, the AMQP listeners, signals, the
 * housekeeping timer, the set of connections, and the vhost registry.
 *
 * Vhosts live in an array sorted by name (looked up by bisection on
 * connection.open and at load; few, and created rarely). Users and
 * permissions are the access module's (access.c); the server owns it.
 * First boot (RabbitMQ's rule: only when the database is new, marked by
 * the "initialized" setting) creates default_vhost and default_user with
 * full permissions there; later starts change neither, whatever the
 * configuration says then.
 *
 * Housekeeping runs every TICK_MS on a monotonic clock and visits every
 * connection for heartbeats and timeouts; everything else is event driven.
 * Shutdown (SIGTERM/SIGINT): stop accepting, close every connection with
 * 320 CONNECTION_FORCED as RabbitMQ does, give clients a moment to read it,
 * then leave the loop.
 *
 * Listeners: one per configured address (listeners.tcp.<name>), each
 * logged "AMQP listening on host:port" in configuration order. A port alone
 * binds "::" with IPV6_V6ONLY off, so one socket takes IPv6 and IPv4 as
 * RabbitMQ's listener does, or "0.0.0.0" where the system has no IPv6; an
 * IPv6 address given is bound IPv6 only, so "0.0.0.0" and "::" can both be
 * listed. Any listener that cannot be bound stops the start.
 *
 * Accept failures: an accept() that fails for lack of descriptors (EMFILE,
 * ENFILE) or memory leaves the connection in the backlog, so the listening
 * socket stays readable and a listener left enabled would retry at once,
 * forever. Any failure libevent does not retry by itself therefore
 * disables every listener for ACCEPT_PAUSE_MS, or until a connection
 * closes and gives a descriptor back; the backlogs are served then. Failures are
 * counted (server_accept_errors) and logged at most once per
 * ACCEPT_LOG_MS, with how many there were.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"

#define TICK_MS 250
#define SHUTDOWN_GRACE_MS 1000
#define ACCEPT_PAUSE_MS 100
#define ACCEPT_LOG_MS 10000

struct server {
    config cfg;
    struct event_base *base;
    /* the AMQP listeners, in configuration order, and where each is bound */
    struct evconnlistener *listeners[CONFIG_MAX_LISTENERS];
    char listen_ip[CONFIG_MAX_LISTENERS][SERVER_HOST_LEN];
    int listen_port[CONFIG_MAX_LISTENERS];
    size_t nlisteners;
    struct event *sigterm, *sigint, *tick, *shutdown_timer, *stats_timer;
    stats stats;         /* the whole broker's (stats.c) */
    server_counts counts;
    uint64_t started_at; /* wall clock ms */
    char node_name[128];
    struct event *accept_timer; /* re-enables the listener after a failed accept */
    bool accept_paused;
    uint64_t accept_errors;        /* failed accept() calls since start */
    uint64_t accept_errors_logged; /* accept_errors when the last one was logged */
    uint64_t accept_logged_ms;     /* when that was (0: never) */
    transport_flusher *flusher;
    meta *meta;
    journal *journal;
    access_control *access;
    login_brake *brake;
    param_set *params; /* global runtime parameters */
    vhost **vhosts; /* sorted by name */
    size_t nvhosts, vhosts_cap;
    /* every connection; the first nlisted passed connection.open (the
     * management API lists those), the rest are in the handshake or
     * failed it */
    conn **conns;
    size_t nconns, conns_cap, nlisted;
    uint64_t now_ms;
    uint64_t name_seed;
    bool shutting_down;
    bool memory_alarm;
    bool journal_lagging; /* see server_journal_lagging */
    uint64_t activity; /* bumped by each read, for the loop's polling window */
    journal_seq journal_wait; /* highest sequence a confirm or commit waits for */
    size_t memory_limit; /* bytes of message memory that raise the alarm */
    uint64_t content_limit; /* budget for unfinished message bodies (conn.c counts them) */
};

static void accept_resume(server *s);
static void close_listeners(server *s);

static uint64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

const config *server_config(const server *s) { return &s->cfg; }
struct event_base *server_base(server *s) { return s->base; }
transport_flusher *server_flusher(server *s) { return s->flusher; }
meta *server_meta(server *s) { return s->meta; }
journal *server_journal(server *s) { return s->journal; }

access_control *server_access(server *s) { return s->access; }
login_brake *server_login_brake(server *s) { return s->brake; }
param_set *server_params(server *s) { return s->params; }

queue *server_queue_by_store_id(server *s, uint64_t id)
{
    for (size_t i = 0; i < s->nvhosts; i++) {
        queue *q = vhost_queue_by_store_id(s->vhosts[i], id);
        if (q)
            return q;
    }
    return NULL;
}

/* Confirms and commit-oks waiting for the disk can go now. */
static void journal_synced_cb(void *ctx, journal_seq synced)
{
    (void)synced;
    server *s = ctx;
    for (size_t i = 0; i < s->nconns; i++)
        conn_journal_synced(s->conns[i]);
}

static void journal_log(int level, const char *text)
{
    log_msg(level >= LOG_ERROR ? LOG_ERROR : (log_level)level, "journal: %s", text);
}

/* A file written after a clean stop, removed at start: its absence means
 * the last run was killed. */
static bool take_clean_marker(const config *cfg)
{
    char path[600];
    snprintf(path, sizeof path, "%s/clean-shutdown", cfg->data_dir);
    return unlink(path) == 0;
}

static void leave_clean_marker(const config *cfg)
{
    char path[600];
    snprintf(path, sizeof path, "%s/clean-shutdown", cfg->data_dir);
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
}

static bool open_journal(server *s)
{
    char err[600];
    bool clean = take_clean_marker(&s->cfg);
    journal_config jc = {.dir = s->cfg.data_dir,
                         .segment_size = s->cfg.journal_segment_size,
                         .sync = s->cfg.journal_sync,
                         .log = journal_log};
    s->journal = journal_open(&jc, s->base, journal_synced_cb, s, err, sizeof err);
    if (!s->journal) {
        log_msg(LOG_ERROR, "cannot open the journal: %s", err);
        return false;
    }
    return persist_recover(s, s->journal, clean);
}
uint64_t server_now_ms(const server *s) { return s->now_ms; }
void server_touch_clock(server *s)
{
    s->now_ms = monotonic_ms();
    s->activity++;
}
bool server_memory_alarm(const server *s) { return s->memory_alarm; }

uint64_t server_content_limit(const server *s) { return s->content_limit; }
uint64_t server_content_share(const server *s)
{
    return s->content_limit / (s->nconns ? s->nconns : 1);
}

/* Publishers pause while the journal holds more than this unwritten, and
 * go on once the disk has caught up to below a quarter of it. */
#define JOURNAL_LAG_BYTES (64u << 20)

bool server_journal_lagging(server *s)
{
    if (!s->journal)
        return false;
    uint64_t unwritten = journal_unwritten_bytes(s->journal);
    s->journal_lagging = unwritten > (s->journal_lagging ? JOURNAL_LAG_BYTES / 4 : JOURNAL_LAG_BYTES);
    return s->journal_lagging;
}

void server_journal_wait(server *s, journal_seq seq)
{
    if (seq > s->journal_wait)
        s->journal_wait = seq;
}

/* ---- vhosts ------------------------------------------------------------- */

static int cmp_name(const char *name, amqp_bytes key)
{
    size_t n = strlen(name);
    int c = memcmp(name, key.ptr, n < key.len ? n : key.len);
    return c ? c : (n < key.len ? -1 : n > key.len ? 1 : 0);
}

/* Index of the first vhost whose name is not below `name`. */
static size_t vhost_slot(const server *s, amqp_bytes name)
{
    size_t lo = 0, hi = s->nvhosts;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_name(vhost_name(s->vhosts[mid]), name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

vhost *server_vhost(server *s, amqp_bytes name)
{
    size_t i = vhost_slot(s, name);
    return i < s->nvhosts && cmp_name(vhost_name(s->vhosts[i]), name) == 0 ? s->vhosts[i] : NULL;
}

void server_foreach_vhost(server *s, void (*fn)(void *arg, vhost *v), void *arg)
{
    for (size_t i = 0; i < s->nvhosts; i++)
        fn(arg, s->vhosts[i]);
}

static const char *const queue_types[] = {"", "undefined", "classic", "quorum", "stream"};

bool server_validate_vhost(const meta_vhost *v, char *err, size_t errlen)
{
    if (!v->name || !*v->name || strlen(v->name) > 255) {
        snprintf(err, errlen, "vhost name must be 1 to 255 bytes");
        return false;
    }
    const char *type = v->default_queue_type ? v->default_queue_type : "";
    for (size_t i = 0; i < sizeof queue_types / sizeof queue_types[0]; i++)
        if (strcmp(type, queue_types[i]) == 0)
            return true;
    snprintf(err, errlen, "unknown default queue type '%s' for vhost '%s'", type, v->name);
    return false;
}

/* A new vhost object in the registry (nothing written). */
static vhost *add_vhost(server *s, const meta_vhost *d)
{
    size_t at = vhost_slot(s, AMQP_CSTR(d->name));
    if (s->nvhosts == s->vhosts_cap) {
        size_t cap = s->vhosts_cap ? s->vhosts_cap * 2 : 8;
        vhost **n = realloc(s->vhosts, cap * sizeof *n);
        if (!n)
            return NULL;
        s->vhosts = n;
        s->vhosts_cap = cap;
    }
    vhost *v = vhost_new(s, d->name);
    if (!v || !vhost_set_details(v, d)) {
        vhost_free(v);
        return NULL;
    }
    memmove(s->vhosts + at + 1, s->vhosts + at, (s->nvhosts - at) * sizeof *s->vhosts);
    s->vhosts[at] = v;
    s->nvhosts++;
    return v;
}

/* durable_load: a vhost row from the store. */
void server_load_vhost(server *s, const meta_vhost *d)
{
    if (server_vhost(s, AMQP_CSTR(d->name)))
        return;
    if (!add_vhost(s, d))
        log_msg(LOG_ERROR, "out of memory restoring vhost '%s'", d->name);
}

bool server_put_vhost(server *s, const meta_vhost *v, char *err, size_t errlen)
{
    if (!server_validate_vhost(v, err, errlen))
        return false;
    const char *type = v->default_queue_type ? v->default_queue_type : "";
    meta_vhost row = {v->name, v->description ? v->description : "", v->tags ? v->tags : "",
                      strcmp(type, "undefined") == 0 ? "" : type, v->tracing};
    if (!meta_put_vhost(s->meta, &row)) {
        snprintf(err, errlen, "cannot store vhost '%s' (see the log)", v->name);
        return false;
    }
    vhost *found = server_vhost(s, AMQP_CSTR(v->name));
    if (found ? !vhost_set_details(found, &row) : !add_vhost(s, &row)) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    return true;
}

static void close_for_vhost(void *arg, conn *c) { conn_vhost_deleted(c, arg); }
static void delete_queue_cb(void *arg, queue *q) { (void)arg, queue_delete(q); }

/* Queues are deleted one by one (journal records settle their messages;
 * the store rows go in the same transaction as the vhost's cascade). */
bool server_delete_vhost(server *s, const char *name, char *err, size_t errlen)
{
    size_t at = vhost_slot(s, AMQP_CSTR(name));
    if (at >= s->nvhosts || strcmp(vhost_name(s->vhosts[at]), name) != 0) {
        snprintf(err, errlen, "no vhost '%s'", name);
        return false;
    }
    vhost *v = s->vhosts[at];
    char text[400];
    snprintf(text, sizeof text, "CONNECTION_FORCED - vhost '%s' is deleted", name);
    server_foreach_conn(s, v, close_for_vhost, text);
    bool grouped = !meta_grouped(s->meta) && meta_begin(s->meta); /* or join the caller's */
    vhost_foreach_queue(v, delete_queue_cb, NULL);
    if (!meta_delete_vhost(s->meta, name) || (grouped && !meta_commit(s->meta))) {
        if (grouped)
            meta_rollback(s->meta);
        snprintf(err, errlen, "cannot delete vhost '%s' from the store (see the log)", name);
        return false;
    }
    memmove(s->vhosts + at, s->vhosts + at + 1, (s->nvhosts - at - 1) * sizeof *s->vhosts);
    s->nvhosts--;
    access_vhost_deleted(s->access, name);
    log_msg(LOG_INFO, "deleted vhost '%s'", name);
    vhost_free(v);
    return true;
}

/* RabbitMQ's first boot: the default vhost, the default user (an
 * administrator) and its full permissions there, in one transaction with
 * the "initialized" mark, only if the store was never initialized. */
static bool first_boot(server *s)
{
    char mark[8], err[300] = "the store failed (see the log)";
    if (meta_get_setting(s->meta, "initialized", mark, sizeof mark))
        return true;
    const config *c = &s->cfg;
    meta_vhost v = {c->default_vhost, "Default virtual host", "", "", false};
    access_user_spec u = {.name = c->default_user, .password = c->default_pass,
                          .tags = "administrator"};
    meta_permission p = {c->default_user, c->default_vhost, ".*", ".*", ".*"};
    bool ok = meta_begin(s->meta);
    ok = ok && (server_vhost(s, AMQP_CSTR(v.name)) || server_put_vhost(s, &v, err, sizeof err));
    ok = ok && (access_find_user(s->access, u.name) ||
                access_put_user(s->access, &u, err, sizeof err));
    ok = ok && access_put_permission(s->access, &p, err, sizeof err) &&
         meta_put_setting(s->meta, "initialized", "1") && meta_commit(s->meta);
    if (!ok) {
        meta_rollback(s->meta);
        log_msg(LOG_ERROR, "first boot: cannot create the default user and vhost: %s", err);
        return false;
    }
    log_msg(LOG_INFO, "first boot: created vhost '%s' and user '%s'", v.name, u.name);
    return true;
}

/* splitmix64: names need to be unique and unguessable enough, not secret. */
static uint64_t next_random(server *s)
{
    uint64_t z = (s->name_seed += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* prefix + 22 base64url characters, as RabbitMQ's amq.gen- names. */
void server_random_name(server *s, const char *prefix, char *out, size_t outlen)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint64_t r[2] = {next_random(s), next_random(s)};
    char tail[23];
    for (int i = 0; i < 22; i++)
        tail[i] = alphabet[(r[i / 11] >> ((i % 11) * 6)) & 63];
    tail[22] = 0;
    snprintf(out, outlen, "%s%s", prefix, tail);
}

/* ---- connections -------------------------------------------------------- */

void server_conn_opened(server *s, conn *c)
{
    if (s->nconns == s->conns_cap) {
        size_t cap = s->conns_cap ? s->conns_cap * 2 : 64;
        conn **n = realloc(s->conns, cap * sizeof *n);
        if (!n) {
            conn_close(c, AMQP_INTERNAL_ERROR, "INTERNAL_ERROR - out of memory", 0);
            return;
        }
        s->conns = n;
        s->conns_cap = cap;
    }
    s->conns[s->nconns++] = c;
}

void server_foreach_conn(server *s, vhost *v, void (*fn)(void *arg, conn *c), void *arg)
{
    /* conn_close frees nothing synchronously, so the array is stable. */
    for (size_t i = 0; i < s->nconns; i++)
        if (!v || conn_vhost(s->conns[i]) == v)
            fn(arg, s->conns[i]);
}

void server_close_user_connections(server *s, const char *user, const char *text)
{
    for (size_t i = 0; i < s->nconns; i++)
        if (strcmp(conn_user(s->conns[i]), user) == 0)
            conn_close(s->conns[i], AMQP_CONNECTION_FORCED, text, 0);
}

server_counts *server_counters(server *s) { return &s->counts; }

static size_t conn_index(const server *s, const conn *c)
{
    size_t i = 0;
    while (i < s->nconns && s->conns[i] != c)
        i++;
    return i;
}

void server_conn_listed(server *s, conn *c)
{
    size_t i = conn_index(s, c);
    assert(i < s->nconns && i >= s->nlisted);
    s->conns[i] = s->conns[s->nlisted];
    s->conns[s->nlisted++] = c;
}

void server_conn_closed(server *s, conn *c)
{
    s->counts.connections_closed++;
    size_t i = conn_index(s, c);
    if (i < s->nlisted) { /* the last listed one fills its slot */
        s->conns[i] = s->conns[--s->nlisted];
        i = s->nlisted;
    }
    if (i < s->nconns)
        s->conns[i] = s->conns[--s->nconns];
    if (s->shutting_down && s->nconns == 0)
        event_base_loopexit(s->base, NULL);
    accept_resume(s); /* its descriptor is about to be free */
}

_Static_assert(SERVER_HOST_LEN >= INET6_ADDRSTRLEN, "room for an IPv6 address");

int server_sockaddr_host(const struct sockaddr *sa, char host[SERVER_HOST_LEN])
{
    strcpy(host, "?");
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, SERVER_HOST_LEN);
        return ntohs(in->sin_port);
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        const uint8_t *a = in6->sin6_addr.s6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            inet_ntop(AF_INET, a + 12, host, SERVER_HOST_LEN);
        else
            inet_ntop(AF_INET6, a, host, SERVER_HOST_LEN);
        return ntohs(in6->sin6_port);
    }
    return 0;
}

/* "host:port", an IPv6 host in brackets, as RabbitMQ writes addresses. */
static void format_addr(const struct sockaddr *sa, char *out, size_t outlen)
{
    char host[SERVER_HOST_LEN];
    int port = server_sockaddr_host(sa, host);
    snprintf(out, outlen, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    (void)l, (void)salen;
    server *s = arg;
    if (s->shutting_down) {
        evutil_closesocket(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char peer[64];
    format_addr(sa, peer, sizeof peer);
    s->now_ms = monotonic_ms();
    conn_accept(s, fd, sa, peer);
}

static void accept_resume(server *s)
{
    if (!s->accept_paused)
        return;
    s->accept_paused = false;
    evtimer_del(s->accept_timer);
    for (size_t i = 0; i < s->nlisteners; i++)
        evconnlistener_enable(s->listeners[i]);
}

static void accept_resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    accept_resume(arg);
}

/* libevent calls this for accept() errors it does not retry by itself
 * (it retries EAGAIN, EINTR and ECONNABORTED); errno is accept's. */
static void accept_error_cb(struct evconnlistener *l, void *arg)
{
    server *s = arg;
    int e = EVUTIL_SOCKET_ERROR();
    s->accept_errors++;
    s->now_ms = monotonic_ms();
    if (s->accept_logged_ms == 0 || s->now_ms - s->accept_logged_ms >= ACCEPT_LOG_MS) {
        uint64_t n = s->accept_errors - s->accept_errors_logged;
        log_msg(LOG_ERROR, "accept() failed: %s (%llu time%s %s); not accepting for %d ms "
                "or until a connection closes", evutil_socket_error_to_string(e),
                (unsigned long long)n, n == 1 ? "" : "s",
                s->accept_logged_ms ? "since the last report" : "so far", ACCEPT_PAUSE_MS);
        s->accept_logged_ms = s->now_ms;
        s->accept_errors_logged = s->accept_errors;
    }
    (void)l; /* every listener: the descriptors are the whole process's */
    for (size_t i = 0; i < s->nlisteners; i++)
        evconnlistener_disable(s->listeners[i]);
    s->accept_paused = true;
    struct timeval pause = {0, ACCEPT_PAUSE_MS * 1000};
    evtimer_add(s->accept_timer, &pause);
}

uint64_t server_accept_errors(const server *s) { return s->accept_errors; }

/* ---- timers and signals ------------------------------------------------- */

/* RabbitMQ's memory alarm, measured as the RAM messages hold. */
static void check_memory(server *s)
{
    size_t used = msg_total_memory();
    bool alarm = used > s->memory_limit;
    if (alarm == s->memory_alarm)
        return;
    s->memory_alarm = alarm;
    log_msg(LOG_WARNING, "memory resource limit alarm %s (messages use %zu bytes, limit %zu)",
            alarm ? "set" : "cleared", used, s->memory_limit);
    for (size_t i = 0; i < s->nconns; i++)
        conn_set_alarm(s->conns[i], alarm);
}

/* The limits that follow from the watermark in s->cfg. The body budget is
 * below the watermark, so bodies still arriving can never raise the alarm
 * by themselves; never below one maximal message. */
static void apply_watermark(server *s)
{
    const config *cfg = &s->cfg;
    s->memory_limit = cfg->memory_high_watermark_abs
                          ? cfg->memory_high_watermark_abs
                          : (size_t)((double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) *
                                     cfg->memory_high_watermark);
    s->content_limit = s->memory_limit / 2;
    if (s->content_limit < cfg->max_message_size + cfg->frame_max)
        s->content_limit = cfg->max_message_size + cfg->frame_max;
}

void server_set_memory_watermark(server *s, double relative, uint64_t absolute)
{
    s->cfg.memory_high_watermark = relative;
    s->cfg.memory_high_watermark_abs = absolute;
    apply_watermark(s);
    log_msg(LOG_INFO, "memory high watermark set to %zu bytes (%s)", s->memory_limit,
            absolute ? "absolute" : "relative to the RAM");
    for (size_t i = 0; i < s->nconns; i++)
        conn_content_limit_changed(s->conns[i]);
    check_memory(s);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    server *s = arg;
    s->now_ms = monotonic_ms();
    /* conn_tick may free nothing synchronously (frees are deferred), so the
     * array is stable during the walk. */
    for (size_t i = 0; i < s->nconns; i++)
        conn_tick(s->conns[i], s->now_ms);
    check_memory(s);
    if (s->journal)
        journal_tick(s->journal);
}

static void stats_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    stats_tick(arg);
}

static void shutdown_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    server *s = arg;
    event_base_loopexit(s->base, NULL);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    server *s = arg;
    if (s->shutting_down)
        return;
    log_msg(LOG_INFO, "received signal %d, shutting down", (int)sig);
    s->shutting_down = true;
    close_listeners(s);
    for (size_t i = 0; i < s->nconns; i++)
        conn_close(s->conns[i], AMQP_CONNECTION_FORCED,
                   "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'",
                   0);
    if (s->nconns == 0) {
        event_base_loopexit(s->base, NULL);
        return;
    }
    struct timeval grace = {SHUTDOWN_GRACE_MS / 1000, (SHUTDOWN_GRACE_MS % 1000) * 1000};
    s->shutdown_timer = evtimer_new(s->base, shutdown_timeout_cb, s);
    evtimer_add(s->shutdown_timer, &grace);
}

/* ---- lifecycle ---------------------------------------------------------- */

/* A listening socket on host:port (an IPv4 or IPv6 literal; "::" with
 * v6only off for a dual-stack wildcard); -1 with errno set on failure. */
static evutil_socket_t open_listener(const char *host, int port, bool v6only)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    socklen_t len = sizeof *in;
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        len = sizeof *in6;
    } else {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1, v6 = v6only;
    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        (ss.ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6, sizeof v6) != 0) ||
        bind(fd, (struct sockaddr *)&ss, len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Binds one AMQP listener ("" = every interface) and logs where. */
static bool listen_one(server *s, const char *host, int port)
{
    evutil_socket_t fd = *host ? open_listener(host, port, true) : open_listener("::", port, false);
    if (fd < 0 && !*host && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL))
        fd = open_listener("0.0.0.0", port, false); /* no IPv6 here */
    struct evconnlistener *l =
        fd < 0 ? NULL
               : evconnlistener_new(s->base, accept_cb, s, LEV_OPT_CLOSE_ON_FREE, 1024, fd);
    if (!l) {
        const char *shown = *host ? host : "::";
        log_msg(LOG_ERROR, strchr(shown, ':') ? "cannot listen on [%s]:%d: %s"
                                              : "cannot listen on %s:%d: %s",
                shown, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    evconnlistener_set_error_cb(l, accept_error_cb);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char addr[SERVER_HOST_LEN + 16];
    getsockname(fd, (struct sockaddr *)&ss, &len);
    size_t i = s->nlisteners++;
    s->listeners[i] = l;
    s->listen_port[i] = server_sockaddr_host((struct sockaddr *)&ss, s->listen_ip[i]);
    format_addr((struct sockaddr *)&ss, addr, sizeof addr);
    log_msg(LOG_INFO, "AMQP listening on %s", addr);
    return true;
}

/* Every configured AMQP listener, in order; listeners.tcp = none: none. */
static bool listen_on(server *s)
{
    const config *c = &s->cfg;
    if (c->listeners_none) {
        log_msg(LOG_INFO, "no AMQP listener (listeners.tcp = none)");
        return true;
    }
    if (!listen_one(s, c->listen_host, c->listen_port))
        return false;
    for (unsigned i = 0; i < c->amqp_more.n; i++)
        if (!listen_one(s, c->amqp_more.extra[i].host, c->amqp_more.extra[i].port))
            return false;
    return true;
}

static void close_listeners(server *s)
{
    for (size_t i = 0; i < s->nlisteners; i++)
        evconnlistener_free(s->listeners[i]);
    s->nlisteners = 0;
}

/* Raises the soft descriptor limit to the hard one (every connection is a
 * descriptor; 1024 is a common default soft limit) and logs what we got,
 * as RabbitMQ reports its file handle limit. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        log_msg(LOG_WARNING, "cannot read the file descriptor limit: %s", strerror(errno));
        return;
    }
    rlim_t was = rl.rlim_cur;
    const char *why = NULL;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            why = strerror(errno);
            rl.rlim_cur = was;
        }
    }
    log_msg(why ? LOG_WARNING : LOG_INFO, "file descriptor limit %llu (soft limit was %llu, "
            "hard limit %llu%s%s)", (unsigned long long)rl.rlim_cur, (unsigned long long)was,
            (unsigned long long)rl.rlim_max, why ? "; cannot raise it: " : "", why ? why : "");
}

server *server_new(const config *cfg)
{
    server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->cfg = *cfg;
    s->now_ms = monotonic_ms();
    s->started_at = wall_clock_ms();
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    host[strcspn(host, ".")] = 0;
    snprintf(s->node_name, sizeof s->node_name, "warren@%s", host);
    apply_watermark(s);
    s->name_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ s->now_ms;
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    s->base = event_base_new();
    char err[600];
    /* Three priorities: everything runs at the default (1); background
     * work that must never delay clients (the management plane's turns)
     * takes 2, and runs only in loop turns with nothing else to do. */
    if (!s->base || event_base_priority_init(s->base, SERVER_PRIORITIES) != 0 ||
        !(s->flusher = transport_flusher_new(s->base)) ||
        !(s->accept_timer = evtimer_new(s->base, accept_resume_cb, s)) ||
        !(s->access = access_new(s)) || !(s->brake = login_brake_new(cfg, next_random(s))) ||
        !(s->params = param_set_new(s, NULL))) {
        server_free(s);
        return NULL;
    }
    if (!(s->meta = meta_open(cfg->data_dir, err, sizeof err))) {
        log_msg(LOG_ERROR, "cannot open the metadata store: %s", err);
        server_free(s);
        return NULL;
    }
    /* Signals first: a SIGTERM sent as soon as "AMQP listening" is logged
     * must already find its handler (tests stop a broker right away). */
    struct timeval tick = {0, TICK_MS * 1000};
    s->tick = event_new(s->base, -1, EV_PERSIST, tick_cb, s);
    s->sigterm = evsignal_new(s->base, SIGTERM, signal_cb, s);
    s->sigint = evsignal_new(s->base, SIGINT, signal_cb, s);
    event_add(s->tick, &tick);
    struct timeval every = {STATS_INTERVAL_MS / 1000, (STATS_INTERVAL_MS % 1000) * 1000};
    s->stats_timer = event_new(s->base, -1, EV_PERSIST, stats_cb, s);
    event_add(s->stats_timer, &every);
    event_add(s->sigterm, NULL);
    event_add(s->sigint, NULL);
    if (!durable_load(s) || !first_boot(s) || !param_ensure_cluster_id(s) || !open_journal(s) ||
        !listen_on(s)) {
        server_free(s);
        return NULL;
    }
    return s;
}

/* After traffic the loop polls without sleeping for a short while: a
 * client that answers within that window is served without the wake-up
 * latency of a sleeping thread (the p99 of a request/response flow). When
 * the window passes quietly, the loop sleeps in epoll_wait as usual. */
#define SPIN_NS 60000

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int server_run(server *s)
{
    uint64_t seen = 0, quiet_since = 0;
    while (!event_base_got_exit(s->base) && !event_base_got_break(s->base)) {
        if (s->activity != seen) {
            seen = s->activity;
            quiet_since = monotonic_ns();
        }
        /* waiting for the disk: the answer comes after an fdatasync, far
         * beyond the window, and spinning would take the CPU it needs */
        bool disk_wait = s->journal && journal_synced(s->journal) < s->journal_wait;
        bool spin = !disk_wait && monotonic_ns() - quiet_since < SPIN_NS;
        if (event_base_loop(s->base, EVLOOP_ONCE | (spin ? EVLOOP_NONBLOCK : 0)) < 0)
            break;
    }
    log_msg(LOG_INFO, "stopped");
    return 0;
}

void server_free(server *s)
{
    if (!s)
        return;
    close_listeners(s);
    while (s->nconns)
        conn_free_now(s->conns[s->nconns - 1]);
    for (size_t i = 0; i < s->nvhosts; i++)
        vhost_free(s->vhosts[i]);
    free(s->vhosts);
    access_free(s->access);
    login_brake_free(s->brake);
    param_set_free(s->params);
    if (s->journal) {
        journal_close(s->journal);
        leave_clean_marker(&s->cfg);
    }
    meta_close(s->meta);
    if (s->tick)
        event_free(s->tick);
    if (s->sigterm)
        event_free(s->sigterm);
    if (s->sigint)
        event_free(s->sigint);
    if (s->shutdown_timer)
        event_free(s->shutdown_timer);
    if (s->stats_timer)
        event_free(s->stats_timer);
    stats_free(&s->stats);
    if (s->accept_timer)
        event_free(s->accept_timer);
    transport_flusher_free(s->flusher);
    if (s->base)
        event_base_free(s->base);
    free(s->conns);
    free(s);
}

/* ---- introspection (management API) ------------------------------------ */

vhost *server_vhost_next(server *s, vhost *prev)
{
    size_t i = prev ? vhost_slot(s, AMQP_CSTR(vhost_name(prev))) + 1 : 0;
    return i < s->nvhosts ? s->vhosts[i] : NULL;
}
size_t server_conn_count(const server *s) { return s->nlisted; }
size_t server_socket_count(const server *s) { return s->nconns; }
conn *server_conn_at(server *s, size_t i) { return i < s->nlisted ? s->conns[i] : NULL; }

conn *server_conn_find(server *s, uint64_t id)
{
    for (size_t i = 0; i < s->nlisted; i++)
        if (conn_id(s->conns[i]) == id)
            return s->conns[i];
    return NULL;
}

uint64_t server_started_at(const server *s) { return s->started_at; }
const char *server_node_name(const server *s) { return s->node_name; }
stats *server_stats(server *s) { return &s->stats; }
size_t server_memory_limit(const server *s) { return s->memory_limit; }
int server_amqp_port(const server *s) { return s->nlisteners ? s->listen_port[0] : 0; }
size_t server_amqp_listener_count(const server *s) { return s->nlisteners; }

int server_amqp_listener(const server *s, size_t i, const char **ip)
{
    *ip = s->listen_ip[i];
    return s->listen_port[i];
}
