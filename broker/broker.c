/* The broker: the process as it starts and stops -- the server (core/)
 * with its store, journal, users and vhosts loaded, the AMQP listeners,
 * signals, the housekeeping and statistics timers, and the loop run.
 *
 * First boot (RabbitMQ's rule: only when the database is new, marked by
 * the "initialized" setting) creates default_vhost and default_user with
 * full permissions there; later starts change neither, whatever the
 * configuration says then.
 *
 * Housekeeping runs every TICK_MS on a monotonic clock and visits every
 * connection for heartbeats and timeouts, measures the memory for its
 * alarm, and the free disk space when the disk monitor asks (admin/
 * alarms.c: from every tick near the limit to disk_monitor.max_interval);
 * everything else is event driven.
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
 * AMQPS listeners (listeners.ssl.<name>) are bound the same way and logged
 * "AMQP over TLS listening on host:port"; their connections run over a TLS
 * transport made from ssl_options (a context that cannot be made stops
 * the start). The TLS handshake counts towards handshake_timeout, as the
 * AMQP one does. SIGHUP (and warrenctl reload_certificates, through the
 * server's reloaders) makes a new context from the same files for new
 * handshakes; open connections keep theirs; a context that cannot be made
 * is logged and the old one kept.
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

#include "../federation/federation.h"
#include "broker.h"

#define TICK_MS 250
#define SHUTDOWN_GRACE_MS 1000
#define ACCEPT_PAUSE_MS 100
#define ACCEPT_LOG_MS 10000

struct broker {
    server *s;
    loop *loop; /* the one loop: it accepts and runs everything */
    struct evconnlistener *listeners[3 * CONFIG_MAX_LISTENERS]; /* TCP, TLS, stream */
    size_t nlisteners;
    tls_context *amqp_tls; /* new AMQPS handshakes' context; NULL: no AMQPS */
    struct event *sighup;
    struct event *sigterm, *sigint, *tick, *shutdown_timer, *stats_timer;
    struct event *accept_timer; /* re-enables the listener after a failed accept */
    bool accept_paused;
    bool shutting_down;
    bool fenced;
    mirror *replication; /* a cluster leader's; NULL: a single node */
    uint64_t accept_errors_logged; /* server_accept_errors when the last one was logged */
    uint64_t accept_logged_ms;     /* when that was (0: never) */
    uint64_t disk_check_due;       /* loop_now_ms of the next free-space check */
    access_control *access;
    login_brake *brake;
    param_set *params;
    meta *meta;
    journal *journal;
    spill *spill; /* the loop's (freed after its queues) */
    sconn_hub *streams; /* the stream protocol's connections */
    federation *federation; /* links to federation upstreams */
};

static void accept_resume(broker *b);
static void close_listeners(broker *b);

static void synced_conn(void *arg, conn *c) { (void)arg, conn_journal_synced(c); }

/* Confirms and commit-oks waiting for the disk can go now. */
static void journal_synced_cb(void *ctx, journal_seq synced)
{
    queue_streams_synced(ctx, synced); /* chunks visible before their confirms go */
    admin_foreach_conn(ctx, NULL, synced_conn, NULL);
    if (server_stream_hub(ctx))
        sconn_hub_journal_synced(server_stream_hub(ctx));
    if (server_federation(ctx))
        federation_journal_synced(server_federation(ctx), synced);
}

static void store_log(const char *who, int level, const char *text)
{
    log_msg(level >= LOG_ERROR ? LOG_ERROR : (log_level)level, "%s: %s", who, text);
}
static void journal_log(int level, const char *text) { store_log("journal", level, text); }
static void spill_log(int level, const char *text) { store_log("spill", level, text); }

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

static bool open_journal(broker *b)
{
    char err[600];
    const config *cfg = server_config(b->s);
    bool clean = take_clean_marker(cfg);
    journal_config jc = {.dir = cfg->data_dir,
                         .segment_size = cfg->journal_segment_size,
                         .sync = cfg->journal_sync,
                         .log = journal_log,
                         .mirror = b->replication,
                         .gated = b->replication != NULL};
    b->journal = journal_open(&jc, loop_base(b->loop), journal_synced_cb, b->s, err, sizeof err);
    if (!b->journal) {
        log_msg(LOG_ERROR, "cannot open the journal: %s", err);
        return false;
    }
    server_set_journal(b->s, b->journal);
    return persist_recover(b->s, b->journal, clean);
}
/* RabbitMQ's first boot: the default vhost, the default user (an
 * administrator) and its full permissions there, in one transaction with
 * the "initialized" mark, only if the store was never initialized. */
static bool first_boot(server *s)
{
    char mark[8], err[300] = "the store failed (see the log)";
    if (meta_get_setting(server_meta(s), "initialized", mark, sizeof mark))
        return true;
    const config *c = server_config(s);
    meta *m = server_meta(s);
    access_control *a = server_access(s);
    meta_vhost v = {c->default_vhost, "Default virtual host", "", "", false};
    access_user_spec u = {.name = c->default_user, .password = c->default_pass,
                          .tags = "administrator"};
    meta_permission p = {c->default_user, c->default_vhost, ".*", ".*", ".*"};
    bool ok = meta_begin(m);
    ok = ok && (server_vhost(s, AMQP_CSTR(v.name)) || admin_put_vhost(s, &v, err, sizeof err));
    ok = ok && (access_find_user(a, u.name) ||
                access_put_user(a, &u, err, sizeof err));
    ok = ok && access_put_permission(a, &p, err, sizeof err) &&
         meta_put_setting(m, "initialized", "1") && meta_commit(m);
    if (!ok) {
        meta_rollback(m);
        log_msg(LOG_ERROR, "first boot: cannot create the default user and vhost: %s", err);
        return false;
    }
    log_msg(LOG_INFO, "first boot: created vhost '%s' and user '%s'", v.name, u.name);
    return true;
}

/* splitmix64: names need to be unique and unguessable enough, not secret. */
/* "host:port", an IPv6 host in brackets, as RabbitMQ writes addresses. */
static void format_addr(const struct sockaddr *sa, char *out, size_t outlen)
{
    char host[SERVER_HOST_LEN];
    int port = server_sockaddr_host(sa, host);
    snprintf(out, outlen, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

enum listener_kind { L_AMQP, L_AMQPS, L_STREAM };

static void accept_on(broker *b, evutil_socket_t fd, struct sockaddr *sa, enum listener_kind kind)
{
    if (b->shutting_down) {
        evutil_closesocket(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char peer[64];
    format_addr(sa, peer, sizeof peer);
    loop_touch_clock(b->loop);
    if (kind == L_STREAM) {
        sconn_accept(b->streams, b->loop, fd, peer);
        return;
    }
    if (kind == L_AMQP) {
        conn_accept(b->s, b->loop, fd, peer);
        return;
    }
    transport *t = transport_new_tls(loop_flusher(b->loop), loop_base(b->loop), fd, b->amqp_tls);
    if (t)
        conn_attach(b->s, b->loop, t, peer);
    else
        evutil_closesocket(fd);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    (void)l, (void)salen;
    accept_on(arg, fd, sa, L_AMQP);
}

static void accept_tls_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                          int salen, void *arg)
{
    (void)l, (void)salen;
    accept_on(arg, fd, sa, L_AMQPS);
}

static void accept_stream_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                             int salen, void *arg)
{
    (void)l, (void)salen;
    accept_on(arg, fd, sa, L_STREAM);
}

static void accept_resume(broker *b)
{
    if (!b->accept_paused)
        return;
    b->accept_paused = false;
    evtimer_del(b->accept_timer);
    for (size_t i = 0; i < b->nlisteners; i++)
        evconnlistener_enable(b->listeners[i]);
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
    broker *b = arg;
    int e = EVUTIL_SOCKET_ERROR();
    server_count_accept_error(b->s);
    loop_touch_clock(b->loop);
    uint64_t now = loop_now_ms(b->loop), errors = server_accept_errors(b->s);
    if (b->accept_logged_ms == 0 || now - b->accept_logged_ms >= ACCEPT_LOG_MS) {
        uint64_t n = errors - b->accept_errors_logged;
        log_msg(LOG_ERROR, "accept() failed: %s (%llu time%s %s); not accepting for %d ms "
                "or until a connection closes", evutil_socket_error_to_string(e),
                (unsigned long long)n, n == 1 ? "" : "s",
                b->accept_logged_ms ? "since the last report" : "so far", ACCEPT_PAUSE_MS);
        b->accept_logged_ms = now;
        b->accept_errors_logged = errors;
    }
    (void)l; /* every listener: the descriptors are the whole process's */
    for (size_t i = 0; i < b->nlisteners; i++)
        evconnlistener_disable(b->listeners[i]);
    b->accept_paused = true;
    struct timeval pause = {0, ACCEPT_PAUSE_MS * 1000};
    evtimer_add(b->accept_timer, &pause);
}

/* ---- timers and signals ------------------------------------------------- */

static void tick_conn(void *arg, conn *c) { conn_tick(c, *(uint64_t *)arg); }

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    broker *b = arg;
    loop_touch_clock(b->loop);
    uint64_t now = loop_now_ms(b->loop);
    /* conn_tick frees nothing synchronously (frees are deferred), so the
     * arrays are stable during the walk. */
    admin_foreach_conn(b->s, NULL, tick_conn, &now);
    sconn_hub_tick(b->streams, now);
    admin_check_memory(b->s);
    if (now >= b->disk_check_due)
        b->disk_check_due = now + admin_check_disk(b->s);
    if (b->journal)
        journal_tick(b->journal);
}

static void stats_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    admin_stats_tick(arg);
}

static void shutdown_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    broker *b = arg;
    event_base_loopexit(loop_base(b->loop), NULL);
}

static void close_for_shutdown(void *arg, conn *c)
{
    conn_close(c, AMQP_CONNECTION_FORCED, arg, 0);
}

/* Stops accepting, closes every connection with `reason`, and leaves the
 * loop once they are gone (or after the grace period). */
static void shut_down(broker *b, const char *reason)
{
    if (b->shutting_down)
        return;
    b->shutting_down = true;
    close_listeners(b);
    admin_foreach_conn(b->s, NULL, close_for_shutdown, (void *)reason);
    sconn_hub_close_all(b->streams);
    if (server_socket_count(b->s) + sconn_hub_count(b->streams) == 0) {
        event_base_loopexit(loop_base(b->loop), NULL);
        return;
    }
    struct timeval grace = {SHUTDOWN_GRACE_MS / 1000, (SHUTDOWN_GRACE_MS % 1000) * 1000};
    b->shutdown_timer = evtimer_new(loop_base(b->loop), shutdown_timeout_cb, b);
    evtimer_add(b->shutdown_timer, &grace);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    broker *b = arg;
    if (b->shutting_down)
        return;
    log_msg(LOG_INFO, "received signal %d, shutting down", (int)sig);
    shut_down(b, "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'");
}

void broker_fence(void *arg, const char *why)
{
    broker *b = arg;
    log_msg(LOG_ERROR, "fenced (%s): closing every connection", why);
    b->fenced = true;
    shut_down(b, "CONNECTION_FORCED - this node is no longer the cluster's leader");
}

/* SIGHUP: every TLS listener's certificates again (failures are logged). */
static void sighup_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)sig, (void)what;
    broker *b = arg;
    char err[600];
    log_msg(LOG_INFO, "received SIGHUP, reloading certificates");
    server_reload_certificates(b->s, err, sizeof err);
}

/* A connection closed: during shutdown the last one ends the loop; else
 * its descriptor is about to be free for a paused listener. */
static void conn_closed_cb(void *arg)
{
    broker *b = arg;
    if (b->shutting_down && server_socket_count(b->s) == 0)
        event_base_loopexit(loop_base(b->loop), NULL);
    accept_resume(b);
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

/* Binds one listener ("" = every interface) and logs where. */
static bool listen_one(broker *b, const char *host, int port, enum listener_kind kind)
{
    static evconnlistener_cb const accepts[] = {accept_cb, accept_tls_cb, accept_stream_cb};
    static const char *const what[] = {"AMQP", "AMQP over TLS", "stream protocol"};
    evutil_socket_t fd = *host ? open_listener(host, port, true) : open_listener("::", port, false);
    if (fd < 0 && !*host && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL))
        fd = open_listener("0.0.0.0", port, false); /* no IPv6 here */
    struct evconnlistener *l =
        fd < 0 ? NULL
               : evconnlistener_new(loop_base(b->loop), accepts[kind], b,
                                    LEV_OPT_CLOSE_ON_FREE, 1024, fd);
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
    char addr[SERVER_HOST_LEN + 16], ip[SERVER_HOST_LEN];
    getsockname(fd, (struct sockaddr *)&ss, &len);
    b->listeners[b->nlisteners++] = l;
    int bound = server_sockaddr_host((struct sockaddr *)&ss, ip);
    if (kind == L_STREAM) {
        sconn_hub_add_listener(b->streams, ip, bound);
    } else {
        (kind == L_AMQPS ? server_add_tls_listener : server_add_listener)(b->s, ip, bound);
    }
    format_addr((struct sockaddr *)&ss, addr, sizeof addr);
    log_msg(LOG_INFO, "%s listening on %s", what[kind], addr);
    return true;
}

/* The AMQPS context again from ssl_options' files: new handshakes use it,
 * open connections keep the one they began with. */
static bool reload_amqp_tls(void *arg, char *err, size_t errlen)
{
    broker *b = arg;
    char why[500];
    tls_context *fresh = tls_context_new(&server_config(b->s)->amqp_tls, why, sizeof why);
    if (!fresh) {
        snprintf(err, errlen, "ssl_options: %s", why);
        log_msg(LOG_ERROR, "reloading certificates: %s; the AMQP over TLS listeners keep "
                "the previous ones", err);
        return false;
    }
    tls_context_free(b->amqp_tls);
    b->amqp_tls = fresh;
    log_msg(LOG_INFO, "reloaded the certificates of the AMQP over TLS listeners");
    return true;
}

static bool listen_tls(broker *b)
{
    const config *c = server_config(b->s);
    char err[500];
    if (!c->amqps.n)
        return true;
    if (!(b->amqp_tls = tls_context_new(&c->amqp_tls, err, sizeof err))) {
        log_msg(LOG_ERROR, "ssl_options: %s", err);
        return false;
    }
    server_add_reloader(b->s, reload_amqp_tls, b);
    for (unsigned i = 0; i < c->amqps.n; i++)
        if (!listen_one(b, c->amqps.extra[i].host, c->amqps.extra[i].port, L_AMQPS))
            return false;
    return true;
}

/* The stream listeners, bound before the AMQP ones so that the log names
 * them before "AMQP listening" (what test harnesses wait for). */
static bool listen_stream(broker *b)
{
    const config *c = server_config(b->s);
    if (c->stream_listeners_none || !c->stream_listeners.n) {
        log_msg(LOG_INFO, "no stream protocol listener (stream.listeners.tcp = none)");
        return true;
    }
    for (unsigned i = 0; i < c->stream_listeners.n; i++)
        if (!listen_one(b, c->stream_listeners.extra[i].host, c->stream_listeners.extra[i].port,
                        L_STREAM))
            return false;
    return true;
}

/* Every configured AMQP listener, in order; listeners.tcp = none: none. */
static bool listen_on(broker *b)
{
    const config *c = server_config(b->s);
    if (!listen_stream(b))
        return false;
    if (c->listeners_none) {
        log_msg(LOG_INFO, "no AMQP listener (listeners.tcp = none)");
        return listen_tls(b);
    }
    if (!listen_one(b, c->listen_host, c->listen_port, L_AMQP))
        return false;
    for (unsigned i = 0; i < c->amqp_more.n; i++)
        if (!listen_one(b, c->amqp_more.extra[i].host, c->amqp_more.extra[i].port, L_AMQP))
            return false;
    return listen_tls(b);
}

static void close_listeners(broker *b)
{
    for (size_t i = 0; i < b->nlisteners; i++)
        evconnlistener_free(b->listeners[i]);
    b->nlisteners = 0;
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

broker *broker_new(const config *cfg, mirror *replication)
{
    broker *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->replication = replication;
    raise_fd_limit();
    char err[600];
    if (!(b->s = server_new(cfg))) {
        free(b);
        return NULL;
    }
    server *s = b->s;
    b->loop = server_loop(s, 0);
    struct event_base *base = loop_base(b->loop);
    loop_on_conn_closed(b->loop, conn_closed_cb, b);
    if (!(b->accept_timer = evtimer_new(base, accept_resume_cb, b)) ||
        !(b->access = access_new(s, admin_close_user_connections, s)) ||
        !(b->brake = login_brake_new(cfg, server_random(s))) ||
        !(b->params = param_set_new(s, NULL)) || !(b->streams = sconn_hub_new(s))) {
        broker_free(b);
        return NULL;
    }
    server_set_stream_hub(s, b->streams);
    server_set_access(s, b->access);
    server_set_login_brake(s, b->brake);
    server_set_params(s, b->params);
    if (!(b->meta = meta_open(cfg->data_dir, err, sizeof err))) {
        log_msg(LOG_ERROR, "cannot open the metadata store: %s", err);
        broker_free(b);
        return NULL;
    }
    server_set_meta(s, b->meta);
    if (replication && !meta_set_mirror(b->meta, replication)) {
        broker_free(b);
        return NULL;
    }
    if ((b->spill = spill_new(cfg->data_dir, spill_log)))
        loop_set_spill(b->loop, b->spill);
    /* Signals first: a SIGTERM sent as soon as "AMQP listening" is logged
     * must already find its handler (tests stop a broker right away). */
    struct timeval tick = {0, TICK_MS * 1000};
    b->tick = event_new(base, -1, EV_PERSIST, tick_cb, b);
    b->sigterm = evsignal_new(base, SIGTERM, signal_cb, b);
    b->sigint = evsignal_new(base, SIGINT, signal_cb, b);
    b->sighup = evsignal_new(base, SIGHUP, sighup_cb, b);
    event_add(b->sighup, NULL);
    event_add(b->tick, &tick);
    struct timeval every = {STATS_INTERVAL_MS / 1000, (STATS_INTERVAL_MS % 1000) * 1000};
    b->stats_timer = event_new(base, -1, EV_PERSIST, stats_cb, s);
    event_add(b->stats_timer, &every);
    event_add(b->sigterm, NULL);
    event_add(b->sigint, NULL);
    admin_check_memory(s); /* the alarms hold from the first connection on */
    b->disk_check_due = loop_now_ms(b->loop) + admin_check_disk(s);
    bool loaded = admin_load(s);
    if (loaded)
        queue_streams_collect(s); /* the folders of streams deleted before a crash */
    if (!loaded || !first_boot(s) || !param_ensure_cluster_id(s) || !open_journal(b) ||
        !listen_on(b) || !(b->federation = federation_new(s))) {
        broker_free(b);
        return NULL;
    }
    server_set_federation(s, b->federation);
    return b;
}

server *broker_server(broker *b) { return b->s; }

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

int broker_run(broker *b)
{
    struct event_base *base = loop_base(b->loop);
    uint64_t seen = 0, quiet_since = 0;
    while (!event_base_got_exit(base) && !event_base_got_break(base)) {
        if (loop_activity(b->loop) != seen) {
            seen = loop_activity(b->loop);
            quiet_since = monotonic_ns();
        }
        /* waiting for the disk: the answer comes after an fdatasync, far
         * beyond the window, and spinning would take the CPU it needs */
        bool disk_wait = b->journal && journal_synced(b->journal) < loop_journal_waited(b->loop);
        bool spin = !disk_wait && monotonic_ns() - quiet_since < SPIN_NS;
        if (event_base_loop(base, EVLOOP_ONCE | (spin ? EVLOOP_NONBLOCK : 0)) < 0)
            break;
    }
    log_msg(LOG_INFO, "stopped");
    return b->fenced ? BROKER_FENCED : 0;
}

journal *broker_journal(broker *b) { return b->journal; }
meta *broker_meta(broker *b) { return b->meta; }

static void free_vhost(void *arg, vhost *v) { (void)arg, vhost_free(v); }

void broker_free(broker *b)
{
    if (!b)
        return;
    server *s = b->s;
    close_listeners(b);
    while (loop_socket_count(b->loop))
        conn_free_now(loop_conn_at(b->loop, loop_socket_count(b->loop) - 1));
    federation_free(b->federation); /* its links publish into the vhosts */
    server_set_federation(s, NULL);
    sconn_hub_free(b->streams); /* its readers go before the queues' logs */
    server_set_stream_hub(s, NULL);
    server_foreach_vhost(s, free_vhost, NULL);
    access_free(b->access);
    login_brake_free(b->brake);
    param_set_free(b->params);
    if (b->journal) {
        journal_close(b->journal);
        leave_clean_marker(server_config(s));
    }
    queue_streams_free(s); /* after the journal: its last round ran their syncs */
    meta_close(b->meta);
    tls_context_free(b->amqp_tls);
    struct event *events[] = {b->tick, b->sigterm, b->sigint, b->sighup, b->shutdown_timer,
                              b->stats_timer, b->accept_timer};
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
        if (events[i])
            event_free(events[i]);
    server_free(s);
    spill_free(b->spill);
    free(b);
}
