/* warren-perf -- a light AMQP 0-9-1 load generator in the manner of
 * RabbitMQ's PerfTest, written so that the broker, not the tool, is what a
 * figure measures on a small (2-core) machine.
 *
 * Design: librabbitmq opens each connection (handshake, channel 1, qos,
 * confirm.select) and declares the topology on a control connection. Then the
 * socket is taken over ("raw"): one thread per producer and per consumer
 * drives it with hand-encoded frames (worker.c, wire.c). The main thread only
 * sleeps, prints a line a second and takes snapshots at the start and end of
 * the measured window, including each worker thread's CPU time, so a figure
 * where the tool itself was saturated is flagged.
 *
 * Modes: throughput/latency (default), --idle-connections N (memory per idle
 * connection: hold N connections, print READY), --declare-bindings N (timed,
 * pipelined queue.bind), --selftest (the tool's own ceiling against an
 * in-process socket sink and source), --check (can we log in?).
 *
 * Backlog and restart (the durability issue): --count N makes a throughput
 * run a fixed amount of work instead of a fixed time: each producer publishes
 * N and the run ends when all are confirmed (and consumed, if there are
 * consumers); with --producers 0 it drains: the consumers stop after N
 * deliveries or once the queues are empty. --queue NAME gives the queues
 * fixed names and keeps them, so one run can fill them, another drain them,
 * and --await-messages N time a restarted broker until it accepts a login and
 * the queues hold N messages again; --delete-queues removes them. These runs
 * sample the broker's RSS (--broker-pid) every 100 ms.
 *
 * Every run ends by itself: the window is bounded by --duration, every socket
 * has send/receive timeouts, and an alarm() watchdog ends a stuck process. */
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"
#include "wire.h"
#include "worker.h"

#define MS 1000000ull
#define FRAME_MAX 131072
#define MAX_WORKERS 512
#define MAX_TOPIC_KEYS 1024
#define MAX_QUEUE_ARGS 8

typedef struct perf_options {
    const char *uri;
    const char *allow_host; /* --allow-host: an address besides 127.0.0.1 */
    unsigned producers, consumers, queues;
    size_t size;
    const char *exchange_type;
    unsigned bindings;
    int persistent;
    unsigned confirm;
    unsigned prefetch;
    int manual_ack;
    unsigned ack_every;
    unsigned batch;
    double rate;
    uint64_t inflight;
    double duration, warmup;
    unsigned fanout_queues;
    unsigned idle_connections;
    unsigned declare_bindings;
    unsigned bind_window;
    int broker_pid;
    uint64_t count;         /* per producer, or a drain's limit (0: none) */
    int drain;              /* --drain: no producers, consume until empty */
    int counted;            /* count or drain: run until done, not timed */
    const char *queue_name; /* fixed, kept queues; NULL = per run, deleted */
    double await_messages;  /* < 0: not that mode */
    int delete_queues;
    int selftest, check, quiet;
    amqp_table_entry_t queue_args[MAX_QUEUE_ARGS]; /* --queue-arg, for queue.declare */
    int n_queue_args;
    const char *filter_value;  /* --filter-value */
    const char *consume_args[5]; /* --stream-offset, --stream-filter: key, value pairs */
} perf_options;

/* A librabbitmq connection with channel 1 open; fd is valid once raw. */
typedef struct perf_conn {
    amqp_connection_state_t amqp;
    int fd;
    uint32_t frame_max;
    int logged_in; /* connection.close is worth sending */
    int raw;
} perf_conn;

/* Snapshot of everything a window's figures are computed from. */
typedef struct perf_snapshot {
    uint64_t ns, sent, received, confirmed, process_cpu, broker_cpu;
    uint64_t thread_cpu[MAX_WORKERS];
    uint64_t thread_wait[MAX_WORKERS]; /* runnable, waiting for a CPU */
} perf_snapshot;

/* A worker thread as started by add_thread: the trampoline records its tid
 * (for /proc/self/task/TID/schedstat) before running fn(arg). */
typedef struct perf_thread_slot {
    void *(*fn)(void *);
    void *arg;
    _Atomic pid_t tid;
} perf_thread_slot;

typedef struct perf_threads {
    pthread_t id[MAX_WORKERS];
    char name[MAX_WORKERS][24];
    perf_thread_slot slot[MAX_WORKERS];
    unsigned n;
} perf_threads;

static struct amqp_connection_info uri_info;
static char uri_copy[512];
static int quiet_connect; /* conn_open failures are expected: say nothing */

static void watchdog_fired(int sig)
{
    (void)sig;
    static const char msg[] = "warren-perf: watchdog expired, giving up\n"
                              "RESULT errors=1 error=watchdog\n";
    if (write(2, msg, sizeof msg - 1) < 0)
        _exit(3);
    _exit(3);
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void describe_reply(amqp_rpc_reply_t r, char *out, size_t n)
{
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
        snprintf(out, n, "%s", amqp_error_string2(r.library_error));
    } else if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
               r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = r.reply.decoded;
        snprintf(out, n, "channel closed: %u %.*s", m->reply_code, (int)m->reply_text.len,
                 (const char *)m->reply_text.bytes);
    } else if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
               r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_t *m = r.reply.decoded;
        snprintf(out, n, "connection closed: %u %.*s", m->reply_code,
                 (int)m->reply_text.len, (const char *)m->reply_text.bytes);
    } else {
        snprintf(out, n, "unexpected reply type %d", r.reply_type);
    }
}

/* Returns 0 if the last RPC on c succeeded, else prints what failed. */
static int check_rpc(perf_conn *c, const char *what)
{
    amqp_rpc_reply_t r = amqp_get_rpc_reply(c->amqp);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return 0;
    char why[300];
    describe_reply(r, why, sizeof why);
    fprintf(stderr, "warren-perf: %s: %s\n", what, why);
    return -1;
}

static int parse_uri(const char *uri, const char *allow_host)
{
    snprintf(uri_copy, sizeof uri_copy, "%s", uri);
    amqp_default_connection_info(&uri_info);
    if (amqp_parse_url(uri_copy, &uri_info) != AMQP_STATUS_OK) {
        fprintf(stderr, "warren-perf: bad --uri %s\n", uri);
        return -1;
    }
    if (strcmp(uri_info.host, "127.0.0.1") != 0 && strcmp(uri_info.host, "localhost") != 0 &&
        !(allow_host && strcmp(uri_info.host, allow_host) == 0)) {
        fprintf(stderr, "warren-perf: only 127.0.0.1 is allowed, not %s\n", uri_info.host);
        return -1;
    }
    return 0;
}

/* Opens a connection and channel 1. Returns 0, or -1 with a message. */
static int conn_open(perf_conn *c)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->amqp = amqp_new_connection();
    amqp_socket_t *sock = c->amqp ? amqp_tcp_socket_new(c->amqp) : NULL;
    struct timeval tmo = {10, 0};
    if (!sock) {
        fprintf(stderr, "warren-perf: out of memory\n");
        return -1;
    }
    int rc = amqp_socket_open_noblock(sock, uri_info.host, uri_info.port, &tmo);
    if (rc != AMQP_STATUS_OK) {
        if (!quiet_connect)
            fprintf(stderr, "warren-perf: connect %s:%d: %s\n", uri_info.host, uri_info.port,
                    amqp_error_string2(rc));
        return -1;
    }
    amqp_set_handshake_timeout(c->amqp, &tmo);
    amqp_set_rpc_timeout(c->amqp, &tmo);
    amqp_rpc_reply_t r = amqp_login(c->amqp, uri_info.vhost, 0, FRAME_MAX, 0,
                                    AMQP_SASL_METHOD_PLAIN, uri_info.user, uri_info.password);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        char why[300];
        describe_reply(r, why, sizeof why);
        if (!quiet_connect)
            fprintf(stderr, "warren-perf: login: %s\n", why);
        return -1;
    }
    c->frame_max = (uint32_t)amqp_get_frame_max(c->amqp);
    c->logged_in = 1;
    amqp_channel_open(c->amqp, 1);
    return check_rpc(c, "channel.open");
}

/* Hands the socket to hand framing: blocking, Nagle off, 100 ms timeouts so
 * loops see the stop flag. Returns 0, or -1 if librabbitmq holds unread data
 * (the raw parser would miss it). */
static int conn_go_raw(perf_conn *c)
{
    if (amqp_data_in_buffer(c->amqp)) {
        fprintf(stderr, "warren-perf: unexpected data buffered by librabbitmq\n");
        return -1;
    }
    c->fd = amqp_get_sockfd(c->amqp);
    int flags = fcntl(c->fd, F_GETFL);
    fcntl(c->fd, F_SETFL, flags & ~O_NONBLOCK);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {0, 100000};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    c->raw = 1;
    return 0;
}

static void conn_close(perf_conn *c)
{
    if (!c->amqp)
        return;
    if (c->raw)
        worker_close_raw(c->fd, c->frame_max, 2000);
    else if (c->logged_in)
        amqp_connection_close(c->amqp, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c->amqp);
    c->amqp = NULL;
}

/* After a channel error on the control connection: acknowledge the close and
 * reopen channel 1 so cleanup can go on. */
static void ctl_recover(perf_conn *c)
{
    amqp_rpc_reply_t r = amqp_get_rpc_reply(c->amqp);
    if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION || r.reply.id != AMQP_CHANNEL_CLOSE_METHOD)
        return;
    amqp_channel_close_ok_t ok = {0};
    amqp_send_method(c->amqp, 1, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
    amqp_channel_open(c->amqp, 1);
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The fields of /proc/PID/stat after the command name, from the state on,
 * read into buf; NULL if unreadable. */
static const char *proc_stat_fields(int pid, char *buf, size_t cap)
{
    char path[64];
    if (pid <= 0)
        return NULL;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p + 2 : NULL;
}

/* utime + stime of another process, in ns; 0 if unreadable. */
static uint64_t broker_cpu_ns(int pid)
{
    char buf[1024];
    const char *p = proc_stat_fields(pid, buf, sizeof buf);
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (ut + st) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
}

/* A "Field:  N kB" line of /proc/PID/status (VmRSS:, VmHWM:), in KiB; 0 if
 * unreadable. VmHWM is the peak over the process's whole life. */
static uint64_t broker_status_kb(int pid, const char *field)
{
    char path[64], line[256];
    unsigned long long kb = 0;
    size_t n = strlen(field);
    if (pid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && sscanf(line + n, "%llu", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* When process pid started, on our CLOCK_MONOTONIC (stats_now_ns), to the
 * kernel's 10 ms tick; 0 if unknown. /proc's starttime counts from boot. */
static uint64_t process_start_ns(int pid)
{
    char buf[1024];
    struct timespec boot;
    if (clock_gettime(CLOCK_BOOTTIME, &boot) != 0)
        return 0;
    const char *p = proc_stat_fields(pid, buf, sizeof buf);
    unsigned long long start = 0;
    if (!p || sscanf(p, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
                        "%*d %*d %*d %*d %llu", &start) != 1)
        return 0;
    uint64_t now = stats_now_ns();
    uint64_t boot_ns = (uint64_t)boot.tv_sec * 1000000000ull + (uint64_t)boot.tv_nsec;
    uint64_t age = boot_ns - start * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
    return age < now ? now - age : 0;
}

/* ---- topology -------------------------------------------------------- */

typedef struct topology {
    char run_id[64];
    char exchange[96];
    char (*queue)[96];
    unsigned n_queues;
    char (*key)[64];    /* producer routing keys (topic: one per pattern sample) */
    unsigned n_keys;
    double bind_seconds; /* topic: time for the pipelined queue.binds */
    int keep;            /* --queue: durable names, left in place at the end */
    uint64_t messages;   /* passive declare (drain): messages found at start */
} topology;

/* Topic patterns: binding i (queue i % Q) has a pattern with * or # that
 * key topic_key(i) matches and no other binding does. Four forms, by i % 4:
 *   pattern   key       why no other binding matches
 *   w.I.*     w.I.a     3 words, "w" first, I unique
 *   w.I.#     w.I.b.c   4 words so no w.J.*; I unique
 *   *.I.w     x.I.w     first word x, last w: not w.J.*, not #.J.z
 *   #.I.z     y.y.I.z   first word y, last z: only #.J.z forms, I unique */
static void topic_pattern(unsigned i, char *out, size_t n)
{
    static const char *const form[4] = {"w.%u.*", "w.%u.#", "*.%u.w", "#.%u.z"};
    snprintf(out, n, form[i % 4], i);
}

static void topic_key(unsigned i, char *out, size_t n)
{
    static const char *const form[4] = {"w.%u.a", "w.%u.b.c", "x.%u.w", "y.y.%u.z"};
    snprintf(out, n, form[i % 4], i);
}

/* Reads what the broker answered to pipelined binds and counts bind-oks in
 * *acked. Returns 0 (also when nothing arrived yet) or -1 on a close/error. */
static int bind_replies(const perf_conn *c, uint8_t *in, size_t cap, size_t *have,
                        unsigned *acked)
{
    ssize_t n = recv(c->fd, in + *have, cap - *have, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (n <= 0)
        return -1;
    *have += (size_t)n;
    size_t off = 0;
    wire_frame f;
    while (wire_next_frame(in, *have, &off, c->frame_max, &f) == WIRE_OK) {
        uint32_t id = wire_method_id(&f);
        char why[300];
        if (id == WIRE_QUEUE_BIND_OK) {
            (*acked)++;
        } else if (id == WIRE_CHANNEL_CLOSE || id == WIRE_CONNECTION_CLOSE) {
            wire_describe_close(&f, why, sizeof why);
            fprintf(stderr, "warren-perf: queue.bind: %s\n", why);
            return -1;
        }
    }
    memmove(in, in + off, *have - off);
    *have -= off;
    return 0;
}

/* Sends n_bind queue.binds of topic patterns on a fresh raw connection, at
 * most window unanswered; binding i goes to queue i % n_queues with
 * topic_pattern(i). Returns the seconds taken, or -1 on error. */
static double bind_pipelined(const topology *t, unsigned n_bind, unsigned window)
{
    perf_conn c;
    if (conn_open(&c) != 0 || conn_go_raw(&c) != 0) {
        conn_close(&c);
        return -1;
    }
    uint8_t *out = malloc((size_t)window * 600), in[65536];
    size_t have = 0;
    unsigned sent = 0, acked = 0;
    uint64_t t0 = stats_now_ns(), deadline = t0 + 600000 * MS;
    int err = out == NULL;
    while (!err && acked < n_bind && stats_now_ns() < deadline) {
        size_t len = 0;
        for (; sent < n_bind && sent - acked < window; sent++) {
            char pattern[64];
            topic_pattern(sent, pattern, sizeof pattern);
            len += wire_encode_queue_bind(out + len, 600, 1, t->queue[sent % t->n_queues],
                                          t->exchange, pattern);
        }
        err = (len && worker_write_all(c.fd, out, len, deadline) != 0) ||
              bind_replies(&c, in, sizeof in, &have, &acked) != 0;
    }
    double secs = (double)(stats_now_ns() - t0) / 1e9;
    free(out);
    conn_close(&c);
    return err || acked < n_bind ? -1 : secs;
}

/* Names a run's exchange and queues: per run (RUN.q0, RUN.q1, ...), or
 * fixed_name (one queue) / fixed_name.0 ... fixed_name.N-1, which are kept.
 * Returns 0 or -1. */
static int topology_names(topology *t, unsigned n_queues, const char *fixed_name)
{
    snprintf(t->run_id, sizeof t->run_id, "warren-perf-%d-%08lx", (int)getpid(),
             (unsigned long)(stats_now_ns() ^ (uint64_t)random()) & 0xffffffffUL);
    snprintf(t->exchange, sizeof t->exchange, "%s.x", t->run_id);
    t->n_queues = n_queues;
    t->keep = fixed_name != NULL;
    t->queue = calloc(n_queues, sizeof *t->queue);
    if (!t->queue)
        return -1;
    for (unsigned i = 0; i < n_queues; i++) {
        if (!fixed_name)
            snprintf(t->queue[i], sizeof t->queue[i], "%s.q%u", t->run_id, i);
        else if (n_queues == 1)
            snprintf(t->queue[i], sizeof t->queue[i], "%s", fixed_name);
        else
            snprintf(t->queue[i], sizeof t->queue[i], "%s.%u", fixed_name, i);
    }
    return 0;
}

/* Routing keys the producers cycle through: direct, one per queue; fanout,
 * ""; topic, up to MAX_TOPIC_KEYS spread over the patterns with key j going
 * to queue j % Q. */
static int topology_keys(topology *t, const perf_options *o, unsigned n_bindings)
{
    int topic = strcmp(o->exchange_type, "topic") == 0;
    int direct = strcmp(o->exchange_type, "direct") == 0;
    t->n_keys = topic ? (n_bindings < MAX_TOPIC_KEYS ? n_bindings : MAX_TOPIC_KEYS)
                      : direct ? t->n_queues : 1;
    t->key = calloc(t->n_keys, sizeof *t->key);
    if (!t->key)
        return -1;
    for (unsigned j = 0; j < t->n_keys; j++) {
        if (topic) {
            unsigned q = t->n_queues;
            unsigned b = (unsigned)((uint64_t)j * n_bindings / t->n_keys) / q * q + j % q;
            if (b >= n_bindings)
                b -= q;
            topic_key(b, t->key[j], sizeof t->key[j]);
        } else if (direct) {
            snprintf(t->key[j], sizeof t->key[j], "%s", t->queue[j]);
        }
    }
    return 0;
}

/* Declares exchange, queues and bindings on the control connection (topic
 * bindings pipelined on their own connection). Kept queues are not
 * auto-delete; without producers (a drain) they must exist already: they
 * are declared passively, their messages summed into t->messages, and no
 * exchange is needed. Returns 0 or -1. */
static int topology_declare(topology *t, perf_conn *ctl, const perf_options *o,
                            unsigned n_bindings)
{
    int passive = t->keep && o->producers == 0;
    amqp_table_t args = {o->n_queue_args, (amqp_table_entry_t *)o->queue_args};
    for (unsigned i = 0; i < t->n_queues; i++) {
        amqp_queue_declare_ok_t *ok = amqp_queue_declare(
            ctl->amqp, 1, amqp_cstring_bytes(t->queue[i]), passive, o->persistent, 0, !t->keep,
            passive ? amqp_empty_table : args);
        if (check_rpc(ctl, "queue.declare") != 0)
            return -1;
        t->messages += ok ? ok->message_count : 0;
    }
    if (o->producers == 0)
        return 0;
    amqp_exchange_declare(ctl->amqp, 1, amqp_cstring_bytes(t->exchange),
                          amqp_cstring_bytes(o->exchange_type), 0, 0, 1, 0, amqp_empty_table);
    if (check_rpc(ctl, "exchange.declare") != 0)
        return -1;
    if (strcmp(o->exchange_type, "topic") == 0) {
        t->bind_seconds = bind_pipelined(t, n_bindings, o->bind_window);
        return t->bind_seconds < 0 ? -1 : 0;
    }
    for (unsigned i = 0; i < t->n_queues; i++) {
        const char *key = strcmp(o->exchange_type, "direct") == 0 ? t->queue[i] : "";
        amqp_queue_bind(ctl->amqp, 1, amqp_cstring_bytes(t->queue[i]),
                        amqp_cstring_bytes(t->exchange), amqp_cstring_bytes(key),
                        amqp_empty_table);
        if (check_rpc(ctl, "queue.bind") != 0)
            return -1;
    }
    return 0;
}

/* Deletes what topology_declare made, except kept queues; auto-delete may
 * already have, so errors only reopen the channel. */
static void topology_delete(topology *t, perf_conn *ctl)
{
    if (!ctl->amqp)
        return;
    amqp_exchange_delete(ctl->amqp, 1, amqp_cstring_bytes(t->exchange), 0);
    ctl_recover(ctl);
    for (unsigned i = 0; i < t->n_queues && !t->keep; i++) {
        amqp_queue_delete(ctl->amqp, 1, amqp_cstring_bytes(t->queue[i]), 0, 0);
        ctl_recover(ctl);
    }
}

/* Passive queue.declare of every queue of t on c: *sum is their ready
 * messages, *missing 1 if one did not exist (the count stops there).
 * Returns 0, or -1 if the connection failed. */
static int topology_depth(const topology *t, perf_conn *c, uint64_t *sum, unsigned *missing)
{
    *sum = 0;
    *missing = 0;
    for (unsigned i = 0; i < t->n_queues; i++) {
        amqp_queue_declare_ok_t *ok = amqp_queue_declare(
            c->amqp, 1, amqp_cstring_bytes(t->queue[i]), 1, 0, 0, 0, amqp_empty_table);
        if (ok) {
            *sum += ok->message_count;
            continue;
        }
        amqp_rpc_reply_t r = amqp_get_rpc_reply(c->amqp);
        if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION ||
            r.reply.id != AMQP_CHANNEL_CLOSE_METHOD)
            return -1;
        ctl_recover(c); /* 404: not (yet) there */
        *missing = 1;
        return 0;
    }
    return 0;
}

static void topology_free(topology *t)
{
    free(t->queue);
    free(t->key);
}

/* ---- measurement ----------------------------------------------------- */

static void snapshot_take(perf_snapshot *s, worker_shared *sh, const perf_threads *th,
                          int broker_pid)
{
    s->ns = stats_now_ns();
    s->sent = atomic_load(&sh->sent);
    s->received = atomic_load(&sh->received);
    s->confirmed = atomic_load(&sh->confirmed);
    s->process_cpu = stats_process_cpu_ns();
    s->broker_cpu = broker_cpu_ns(broker_pid);
    for (unsigned i = 0; i < th->n; i++) {
        s->thread_cpu[i] = stats_thread_cpu_ns(th->id[i]);
        s->thread_wait[i] = stats_thread_wait_ns(atomic_load(&th->slot[i].tid));
    }
}

static void print_progress(uint64_t t, const perf_snapshot *prev, const perf_snapshot *now,
                           uint64_t route_factor)
{
    double dt = (double)(now->ns - prev->ns) / 1e9;
    fprintf(stderr, "  [%3.0fs] sent %10.0f msg/s   received %10.0f msg/s   in flight %lld\n",
            (double)t / 1e9, (double)(now->sent - prev->sent) / dt,
            (double)(now->received - prev->received) / dt,
            (long long)(now->sent * route_factor) - (long long)now->received);
}

/* Sleeps through the warm-up and the measured window, printing a line a
 * second; a and b are taken at the window's edges, while consumers record
 * latency; *stalls counts seconds of the window without a delivery. Returns
 * 0, or -1 as soon as a worker failed. */
static int measure(worker_shared *sh, const perf_threads *th, const perf_options *o,
                   perf_snapshot *a, perf_snapshot *b, unsigned *stalls)
{
    uint64_t start = stats_now_ns();
    uint64_t win_start = start + (uint64_t)(o->warmup * 1e9);
    uint64_t end = win_start + (uint64_t)(o->duration * 1e9), tick = start + 1000 * MS;
    perf_snapshot *last = calloc(2, sizeof *last), *cur = last + 1;
    int in_window = 0;
    if (!last)
        return -1;
    snapshot_take(last, sh, th, 0);
    if (o->warmup <= 0) {
        snapshot_take(a, sh, th, o->broker_pid);
        atomic_store(&sh->measuring, 1);
        in_window = 1;
    }
    for (uint64_t now = start; now < end && !atomic_load(&sh->failed); now = stats_now_ns()) {
        uint64_t next = in_window ? end : win_start;
        if (tick < next)
            next = tick;
        if (next > now)
            sleep_ns(next - now);
        now = stats_now_ns();
        if (!in_window && now >= win_start) {
            snapshot_take(a, sh, th, o->broker_pid);
            atomic_store(&sh->measuring, 1);
            in_window = 1;
        }
        if (now >= tick) {
            snapshot_take(cur, sh, th, 0);
            if (in_window && cur->received == last->received)
                (*stalls)++; /* a whole second without one delivery */
            if (!o->quiet)
                print_progress(now - start, last, cur, sh->route_factor);
            *last = *cur;
            tick += 1000 * MS;
        }
    }
    atomic_store(&sh->measuring, 0);
    snapshot_take(b, sh, th, o->broker_pid);
    if (!in_window)
        *a = *b;
    free(last);
    return atomic_load(&sh->failed) ? -1 : 0;
}

/* The worker thread that wanted the most CPU over the window: its share of
 * a core used (*cpu) and used plus waited for (*demand), in percent. */
static unsigned busiest_thread(const perf_threads *th, const perf_snapshot *a,
                               const perf_snapshot *b, double *cpu, double *demand)
{
    double dt = (double)(b->ns - a->ns);
    unsigned which = 0;
    *cpu = *demand = 0;
    for (unsigned i = 0; i < th->n && dt > 0; i++) {
        double used = 100.0 * (double)(b->thread_cpu[i] - a->thread_cpu[i]) / dt;
        double wanted = used + 100.0 * (double)(b->thread_wait[i] - a->thread_wait[i]) / dt;
        if (wanted > *demand) {
            *demand = wanted;
            which = i;
        }
        if (used > *cpu)
            *cpu = used;
    }
    return which;
}

typedef struct perf_result {
    double sent_rate, recv_rate, confirm_rate;
    double p50_us, p99_us, p999_us, max_us;
    uint64_t samples;
    double confirm_p50_us, confirm_p99_us, confirm_p999_us; /* publish to confirm */
    uint64_t confirm_samples;
    double cpu_max;    /* busiest worker thread's CPU, % of a core */
    double demand_max; /* most CPU a worker wanted: used + waited for, % */
    double cpu_total, broker_cpu, bind_rate;
    char busiest[24]; /* the worker with demand_max */
    int tool_limited;
    unsigned stalls;
    int errors;
    /* --count runs: totals over the whole run, the longest time without
     * progress, the broker's RSS sampled every 100 ms and its VmHWM */
    uint64_t sent, confirmed, received;
    double seconds, max_gap_ms;
    uint64_t broker_rss_start_kb, broker_rss_max_kb, broker_hwm_kb;
} perf_result;

static void result_compute(perf_result *r, const perf_threads *th, const perf_snapshot *a,
                           const perf_snapshot *b, const stats_hist *lat,
                           const stats_hist *clat, int broker_pid)
{
    double dt = (double)(b->ns - a->ns) / 1e9;
    if (dt <= 0)
        dt = 1e-9;
    r->sent = b->sent - a->sent;
    r->received = b->received - a->received;
    r->confirmed = b->confirmed - a->confirmed;
    r->seconds = dt;
    r->sent_rate = (double)r->sent / dt;
    r->recv_rate = (double)r->received / dt;
    r->confirm_rate = (double)r->confirmed / dt;
    r->samples = lat ? stats_hist_count(lat) : 0;
    if (r->samples) {
        r->p50_us = (double)stats_hist_percentile(lat, 50) / 1e3;
        r->p99_us = (double)stats_hist_percentile(lat, 99) / 1e3;
        r->p999_us = (double)stats_hist_percentile(lat, 99.9) / 1e3;
        r->max_us = (double)stats_hist_max(lat) / 1e3;
    }
    r->confirm_samples = clat ? stats_hist_count(clat) : 0;
    if (r->confirm_samples) {
        r->confirm_p50_us = (double)stats_hist_percentile(clat, 50) / 1e3;
        r->confirm_p99_us = (double)stats_hist_percentile(clat, 99) / 1e3;
        r->confirm_p999_us = (double)stats_hist_percentile(clat, 99.9) / 1e3;
    }
    unsigned which = busiest_thread(th, a, b, &r->cpu_max, &r->demand_max);
    r->tool_limited = r->cpu_max > 90.0 || r->demand_max > 90.0;
    r->cpu_total = 100.0 * (double)(b->process_cpu - a->process_cpu) / (dt * 1e9);
    r->broker_cpu = broker_pid > 0
                        ? 100.0 * (double)(b->broker_cpu - a->broker_cpu) / (dt * 1e9) : -1;
    snprintf(r->busiest, sizeof r->busiest, "%s", th->n ? th->name[which] : "-");
}

/* The end of result_print for --count runs: totals, and RESULT mode=count
 * with the throughput keys plus messages, seconds, max_gap_ms and the
 * broker's memory (KiB, 0 without --broker-pid). */
static void result_print_count(const perf_result *r, const perf_options *o)
{
    printf("total     sent %llu, confirmed %llu, received %llu in %.3f s; longest time "
           "without progress %.0f ms\n", (unsigned long long)r->sent,
           (unsigned long long)r->confirmed, (unsigned long long)r->received, r->seconds,
           r->max_gap_ms);
    if (o->broker_pid > 0)
        printf("broker rss %.1f MiB at the start, max %.1f MiB (sampled every 100 ms), VmHWM "
               "%.1f MiB (pid %d)\n", (double)r->broker_rss_start_kb / 1024,
               (double)r->broker_rss_max_kb / 1024, (double)r->broker_hwm_kb / 1024,
               o->broker_pid);
    printf("RESULT mode=count sent_rate=%.0f recv_rate=%.0f confirm_rate=%.0f sent=%llu "
           "confirmed=%llu received=%llu seconds=%.3f max_gap_ms=%.0f broker_rss_start_kb=%llu "
           "broker_rss_max_kb=%llu broker_hwm_kb=%llu p50_us=%.1f p99_us=%.1f tool_cpu_max=%.0f "
           "tool_demand_max=%.0f broker_cpu=%.0f stalls=%u tool_limited=%d errors=%d\n",
           r->sent_rate, r->recv_rate, r->confirm_rate, (unsigned long long)r->sent,
           (unsigned long long)r->confirmed, (unsigned long long)r->received, r->seconds,
           r->max_gap_ms, (unsigned long long)r->broker_rss_start_kb,
           (unsigned long long)r->broker_rss_max_kb,
           (unsigned long long)r->broker_hwm_kb, r->p50_us, r->p99_us, r->cpu_max,
           r->demand_max, r->broker_cpu, r->stalls, r->tool_limited, r->errors);
    fflush(stdout);
}

static void result_print(const perf_result *r, const perf_options *o)
{
    printf("sent      %12.0f msg/s\n", r->sent_rate);
    printf("received  %12.0f msg/s%s\n", r->recv_rate,
           o->fanout_queues ? " (deliveries, all queues)" : "");
    if (o->confirm)
        printf("confirmed %12.0f msg/s\n", r->confirm_rate);
    if (r->samples)
        printf("latency   p50 %.1f us  p99 %.1f us  p99.9 %.1f us  max %.1f us  (%llu samples)\n",
               r->p50_us, r->p99_us, r->p999_us, r->max_us, (unsigned long long)r->samples);
    if (r->confirm_samples)
        printf("confirm   p50 %.1f us  p99 %.1f us  p99.9 %.1f us  (%llu samples, publish to "
               "confirm)\n", r->confirm_p50_us, r->confirm_p99_us, r->confirm_p999_us,
               (unsigned long long)r->confirm_samples);
    if (r->bind_rate > 0)
        printf("bindings  %12.0f /s (pipelined queue.bind)\n", r->bind_rate);
    printf("tool cpu  busiest thread %.0f%% of a core; %s wanted %.0f%% (used + waited "
           "for a CPU); whole process %.0f%%\n", r->cpu_max, r->busiest, r->demand_max,
           r->cpu_total);
    if (r->tool_limited)
        printf("WARNING: tool-limited: %s was busy or runnable %.0f%% of the time; this "
               "figure is a floor set by warren-perf (and this machine), not the broker's "
               "limit\n", r->busiest, r->demand_max);
    if (r->broker_cpu >= 0)
        printf("broker cpu %.0f%% (pid %d)\n", r->broker_cpu, o->broker_pid);
    if (r->stalls)
        printf("WARNING: stalled: %u second(s) of the window had no %s at all\n", r->stalls,
               o->counted && !o->consumers ? (o->confirm ? "confirm" : "publish") : "delivery");
    if (o->counted) {
        result_print_count(r, o);
        return;
    }
    printf("RESULT mode=throughput sent_rate=%.0f recv_rate=%.0f confirm_rate=%.0f "
           "p50_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f lat_samples=%llu "
           "bind_rate=%.0f tool_cpu_max=%.0f tool_demand_max=%.0f tool_cpu_total=%.0f "
           "broker_cpu=%.0f stalls=%u tool_limited=%d errors=%d confirm_p50_us=%.1f "
           "confirm_p99_us=%.1f confirm_p999_us=%.1f\n",
           r->sent_rate, r->recv_rate, r->confirm_rate, r->p50_us, r->p99_us, r->p999_us,
           r->max_us, (unsigned long long)r->samples, r->bind_rate, r->cpu_max,
           r->demand_max, r->cpu_total, r->broker_cpu, r->stalls, r->tool_limited, r->errors,
           r->confirm_p50_us, r->confirm_p99_us, r->confirm_p999_us);
    fflush(stdout);
}

/* ---- throughput / latency run ---------------------------------------- */

typedef struct perf_run {
    const perf_options *o;
    worker_shared shared;
    topology topo;
    perf_conn ctl;
    perf_conn *pconn, *cconn;
    producer **prod;
    consumer **cons;
    unsigned n_prod, n_cons; /* threads started */
    perf_threads threads;
} perf_run;

static void *thread_trampoline(void *arg)
{
    perf_thread_slot *slot = arg;
    atomic_store(&slot->tid, gettid());
    return slot->fn(slot->arg);
}

/* Starts fn(arg) as worker "kind i". Returns 0 or -1. */
static int add_thread(perf_threads *th, void *(*fn)(void *), void *arg, const char *kind,
                      unsigned i)
{
    if (th->n == MAX_WORKERS)
        return -1;
    perf_thread_slot *slot = &th->slot[th->n];
    slot->fn = fn;
    slot->arg = arg;
    atomic_store(&slot->tid, 0);
    if (pthread_create(&th->id[th->n], NULL, thread_trampoline, slot) != 0) {
        fprintf(stderr, "warren-perf: cannot start %s thread\n", kind);
        return -1;
    }
    snprintf(th->name[th->n], sizeof th->name[0], "%s %u", kind, i);
    pthread_setname_np(th->id[th->n], th->name[th->n]);
    th->n++;
    return 0;
}

static int start_consumers(perf_run *run)
{
    const perf_options *o = run->o;
    for (unsigned i = 0; i < o->consumers; i++) {
        perf_conn *c = &run->cconn[i];
        if (conn_open(c) != 0)
            return -1;
        if (o->prefetch) {
            amqp_basic_qos(c->amqp, 1, 0, (uint16_t)o->prefetch, 0);
            if (check_rpc(c, "basic.qos") != 0)
                return -1;
        }
        if (conn_go_raw(c) != 0)
            return -1;
        consumer_config cfg = {c->fd, c->frame_max, run->topo.queue[i % run->topo.n_queues],
                               o->manual_ack, o->ack_every, o->consume_args};
        run->cons[i] = consumer_new(&cfg, &run->shared);
        if (!run->cons[i] || add_thread(&run->threads, consumer_main, run->cons[i],
                                        "consumer", i) != 0)
            return -1;
        run->n_cons++;
    }
    uint64_t deadline = stats_now_ns() + 10000 * MS;
    while (atomic_load(&run->shared.consumers_ready) < (int)o->consumers) {
        if (atomic_load(&run->shared.failed) || stats_now_ns() > deadline) {
            fprintf(stderr, "warren-perf: consumers did not get consume-ok\n");
            return -1;
        }
        sleep_ns(2 * MS);
    }
    return 0;
}

static int start_producers(perf_run *run)
{
    const perf_options *o = run->o;
    for (unsigned i = 0; i < o->producers; i++) {
        perf_conn *c = &run->pconn[i];
        if (conn_open(c) != 0)
            return -1;
        if (o->confirm) {
            amqp_confirm_select(c->amqp, 1);
            if (check_rpc(c, "confirm.select") != 0)
                return -1;
        }
        if (conn_go_raw(c) != 0)
            return -1;
        /* direct: producer i publishes round-robin to queues i, i+P, i+2P...
         * (queue i % Q when P >= Q); topic: every producer cycles all keys,
         * each from its own starting point */
        int direct = strcmp(o->exchange_type, "direct") == 0;
        unsigned n_keys = 0, nk = run->topo.n_keys;
        const char **keys = calloc(nk, sizeof *keys);
        if (!keys)
            return -1;
        if (direct)
            for (unsigned q = i % nk; q < nk; q += o->producers)
                keys[n_keys++] = run->topo.key[q];
        else
            for (; n_keys < nk; n_keys++)
                keys[n_keys] = run->topo.key[(i + n_keys) % nk];
        producer_config cfg = {c->fd, c->frame_max, run->topo.exchange, keys, n_keys,
                               o->size, o->persistent, o->batch, o->rate, o->confirm,
                               o->count, o->filter_value};
        run->prod[i] = producer_new(&cfg, &run->shared);
        free(keys);
        if (!run->prod[i] || add_thread(&run->threads, producer_main, run->prod[i],
                                        "producer", i) != 0)
            return -1;
        run->n_prod++;
    }
    return 0;
}

/* Stops and joins every worker (producers first), closes their connections
 * and prints any worker error. Returns the number of workers that failed. */
static int stop_workers(perf_run *run)
{
    atomic_store(&run->shared.stop, 1);
    int errors = 0;
    for (unsigned i = 0; i < run->threads.n; i++)
        pthread_join(run->threads.id[i], NULL);
    for (unsigned i = 0; i < run->n_prod; i++)
        if (producer_error(run->prod[i])[0] && ++errors)
            fprintf(stderr, "warren-perf: %s\n", producer_error(run->prod[i]));
    for (unsigned i = 0; i < run->n_cons; i++)
        if (consumer_error(run->cons[i])[0] && ++errors)
            fprintf(stderr, "warren-perf: %s\n", consumer_error(run->cons[i]));
    for (unsigned i = 0; i < run->o->producers; i++)
        conn_close(&run->pconn[i]);
    for (unsigned i = 0; i < run->o->consumers; i++)
        conn_close(&run->cconn[i]);
    return errors;
}

static void run_free(perf_run *run)
{
    for (unsigned i = 0; i < run->n_prod; i++)
        producer_free(run->prod[i]);
    for (unsigned i = 0; i < run->n_cons; i++)
        consumer_free(run->cons[i]);
    free(run->prod);
    free(run->cons);
    free(run->pconn);
    free(run->cconn);
    topology_free(&run->topo);
}

static void shared_init(worker_shared *sh, const perf_options *o)
{
    int fanout = strcmp(o->exchange_type, "fanout") == 0;
    sh->route_factor = fanout ? o->queues : 1;
    sh->inflight_cap = o->inflight;
    uint64_t limit = sh->inflight_cap * sh->route_factor;
    uint64_t need = (uint64_t)o->batch * sh->route_factor;
    uint64_t slack = limit / 4 > need ? limit / 4 : need;
    sh->wake_below = limit > slack ? limit - slack : 0;
}

static void print_plan(const perf_options *o, const topology *t)
{
    printf("warren-perf: %s  %u producer(s) -> %s exchange -> %u queue(s) -> %u consumer(s)\n",
           o->uri, o->producers, o->exchange_type, o->queues, o->consumers);
    printf("  %zu-byte %s messages, batch %u, rate %s, in-flight cap %llu, ack %s%s",
           o->size, o->persistent ? "persistent" : "transient", o->batch,
           o->rate > 0 ? "fixed" : "unlimited", (unsigned long long)o->inflight,
           o->manual_ack ? "manual" : "auto", o->confirm ? ", confirms" : "");
    if (o->rate > 0)
        printf(" (%.0f msg/s per producer)", o->rate);
    if (o->prefetch)
        printf(", prefetch %u", o->prefetch);
    if (strcmp(o->exchange_type, "topic") == 0)
        printf(", %u topic bindings", o->bindings);
    if (o->drain)
        printf("\n  run id %s; drain, at most %llu messages (0: all), time limit %.0f s\n",
               t->run_id, (unsigned long long)o->count, o->duration);
    else if (o->count)
        printf("\n  run id %s; %llu messages per producer, time limit %.0f s\n", t->run_id,
               (unsigned long long)o->count, o->duration);
    else
        printf("\n  run id %s; warm-up %.1f s, measured %.1f s\n", t->run_id, o->warmup,
               o->duration);
    if (t->keep)
        printf("  queues %s%s, kept at the end (%s)\n", t->queue[0], t->n_queues > 1 ? " ..." : "",
               o->producers == 0 ? "must exist" : o->persistent ? "durable" : "not durable");
    fflush(stdout);
}

/* --count: what the consumers must receive for the run to be over (0: run
 * until the queues are empty): everything the producers publish, or with
 * none (a drain) --count, else whatever the queues held at the start. */
static uint64_t count_expected(const perf_run *run)
{
    const perf_options *o = run->o;
    if (o->producers)
        return o->count * o->producers * run->shared.route_factor;
    return o->count ? o->count : run->topo.messages;
}

/* --count: one line a second of rates, totals and the broker's RSS. */
static void print_count_progress(uint64_t t, const perf_snapshot *prev, const perf_snapshot *now,
                                 uint64_t rss_kb)
{
    double dt = (double)(now->ns - prev->ns) / 1e9;
    fprintf(stderr, "  [%4.0fs] sent %8.0f/s  confirmed %8.0f/s  received %8.0f/s   totals %llu "
            "%llu %llu", (double)t / 1e9, (double)(now->sent - prev->sent) / dt,
            (double)(now->confirmed - prev->confirmed) / dt,
            (double)(now->received - prev->received) / dt, (unsigned long long)now->sent,
            (unsigned long long)now->confirmed, (unsigned long long)now->received);
    if (rss_kb)
        fprintf(stderr, "   broker rss %.0f MiB", (double)rss_kb / 1024);
    fputc('\n', stderr);
}

/* The counter that shows a --count run moving: deliveries if anyone
 * consumes, else confirms, else publishes. */
static uint64_t count_progress(const perf_run *run)
{
    const worker_shared *sh = &run->shared;
    if (run->o->consumers)
        return atomic_load(&sh->received);
    return run->o->confirm ? atomic_load(&sh->confirmed) : atomic_load(&sh->sent);
}

/* A drain is over when nothing arrived for a second and the queues hold no
 * ready message (unacked ones would have arrived by then). Checked at most
 * once a second; returns 1 when the queues are empty. */
static int count_drained(perf_run *run, uint64_t now, uint64_t start, uint64_t *next_check)
{
    uint64_t last = atomic_load(&run->shared.last_delivery_ns), sum;
    unsigned missing;
    if (run->o->producers || now < *next_check || now < (last > start ? last : start) + 1000 * MS)
        return 0;
    *next_check = now + 1000 * MS;
    return topology_depth(&run->topo, &run->ctl, &sum, &missing) == 0 && sum == 0 && !missing;
}

/* Samples the broker's VmRSS into r (first: also as its start value). */
static void sample_broker_rss(perf_result *r, int pid, int first)
{
    uint64_t rss = broker_status_kb(pid, "VmRSS:");
    if (first)
        r->broker_rss_start_kb = rss;
    if (rss > r->broker_rss_max_kb)
        r->broker_rss_max_kb = rss;
}

/* Whether a --count run is over: every producer done and the consumers
 * have expect (or a drain found the queues empty). */
static int count_done(perf_run *run, uint64_t expect, uint64_t now, uint64_t start,
                      uint64_t *empty_check)
{
    const perf_options *o = run->o;
    if (atomic_load(&run->shared.producers_done) == (int)o->producers &&
        (o->consumers == 0 || (expect && atomic_load(&run->shared.received) >= expect)))
        return 1;
    return count_drained(run, now, start, empty_check);
}

/* Runs a --count run to its end: checks every ms whether it is done,
 * tracks the longest time without progress, samples the broker's RSS every
 * 100 ms, prints a line a second. a was taken before the workers started; b
 * is taken at the end (count_settle corrects it once the workers stopped).
 * Returns 0, or -1 if a worker failed or --duration passed first. */
static int measure_count(perf_run *run, perf_snapshot *a, perf_snapshot *b, perf_result *r)
{
    const perf_options *o = run->o;
    worker_shared *sh = &run->shared;
    uint64_t start = a->ns, deadline = start + (uint64_t)(o->duration * 1e9);
    uint64_t tick = start + 1000 * MS, rss_tick = start, empty_check = start;
    uint64_t expect = count_expected(run), progress = 0, progress_ns = start, max_gap = 0;
    perf_snapshot *last = calloc(2, sizeof *last), *cur = last + 1;
    int done = 0;
    if (!last)
        return -1;
    *last = *a;
    for (uint64_t now = start; !done && now < deadline && !atomic_load(&sh->failed);
         now = stats_now_ns()) {
        uint64_t moved = count_progress(run);
        if (moved != progress) {
            progress = moved;
            progress_ns = now;
        }
        max_gap = now - progress_ns > max_gap ? now - progress_ns : max_gap;
        if (now >= rss_tick) {
            sample_broker_rss(r, o->broker_pid, rss_tick == start);
            rss_tick += 100 * MS;
        }
        done = count_done(run, expect, now, start, &empty_check);
        if (now >= tick) {
            snapshot_take(cur, sh, &run->threads, 0);
            r->stalls += count_progress(run) == progress && now - progress_ns >= 1000 * MS;
            if (!o->quiet)
                print_count_progress(now - start, last, cur,
                                     broker_status_kb(o->broker_pid, "VmRSS:"));
            *last = *cur;
            tick += 1000 * MS;
        }
        if (!done)
            sleep_ns(1 * MS);
    }
    snapshot_take(b, sh, &run->threads, o->broker_pid);
    r->max_gap_ms = (double)max_gap / 1e6;
    r->broker_hwm_kb = broker_status_kb(o->broker_pid, "VmHWM:");
    free(last);
    if (!done && !atomic_load(&sh->failed))
        fprintf(stderr, "warren-perf: --count not reached within --duration %.0f s (sent %llu, "
                "confirmed %llu, received %llu of %llu)\n", o->duration,
                (unsigned long long)b->sent, (unsigned long long)b->confirmed,
                (unsigned long long)b->received, (unsigned long long)expect);
    return done ? 0 : -1;
}

/* --count, once the workers stopped: consumers may have read (and acked)
 * a little after b was taken, so b gets the final count, and a drain's end
 * is its last delivery. */
static void count_settle(const perf_run *run, const perf_snapshot *a, perf_snapshot *b)
{
    uint64_t last_delivery = atomic_load(&run->shared.last_delivery_ns);
    b->received = atomic_load(&run->shared.received);
    if (run->o->producers == 0 && last_delivery > a->ns)
        b->ns = last_delivery;
}

static int run_throughput(const perf_options *o)
{
    perf_run run = {.o = o};
    perf_result r = {0};
    perf_snapshot *snap = calloc(2, sizeof *snap);
    int topic = strcmp(o->exchange_type, "topic") == 0;
    unsigned n_bindings = topic ? (o->bindings > o->queues ? o->bindings : o->queues) : 0;
    shared_init(&run.shared, o);
    run.pconn = calloc(o->producers + 1, sizeof *run.pconn); /* + 1: --producers 0 */
    run.cconn = calloc(o->consumers + 1, sizeof *run.cconn);
    run.prod = calloc(o->producers + 1, sizeof *run.prod);
    run.cons = calloc(o->consumers + 1, sizeof *run.cons);
    int rc = !snap || !run.pconn || !run.cconn || !run.prod || !run.cons ||
             topology_names(&run.topo, o->queues, o->queue_name) != 0 ||
             topology_keys(&run.topo, o, n_bindings) != 0;
    if (!rc) {
        print_plan(o, &run.topo);
        rc = conn_open(&run.ctl) != 0 || topology_declare(&run.topo, &run.ctl, o, n_bindings) != 0;
    }
    if (!rc && topic)
        r.bind_rate = n_bindings / (run.topo.bind_seconds > 0 ? run.topo.bind_seconds : 1e-9);
    if (!rc && o->counted) {
        if (o->producers == 0)
            printf("  draining %llu message(s) found in %u queue(s), stopping after %llu "
                   "or when they are empty\n", (unsigned long long)run.topo.messages,
                   run.topo.n_queues, (unsigned long long)count_expected(&run));
        snapshot_take(&snap[0], &run.shared, &run.threads, o->broker_pid);
        atomic_store(&run.shared.measuring, 1);
        run.shared.receive_limit = o->drain ? count_expected(&run) : 0;
    }
    if (!rc)
        rc = start_consumers(&run) != 0 || start_producers(&run) != 0;
    if (!rc && o->counted)
        rc = measure_count(&run, &snap[0], &snap[1], &r) != 0;
    else if (!rc)
        rc = measure(&run.shared, &run.threads, o, &snap[0], &snap[1], &r.stalls) != 0;
    r.errors = stop_workers(&run) + rc;
    if (o->counted && snap && run.threads.n)
        count_settle(&run, &snap[0], &snap[1]);
    stats_hist *lat = stats_hist_new(), *clat = stats_hist_new();
    for (unsigned i = 0; lat && i < run.n_cons; i++)
        stats_hist_merge(lat, consumer_latency(run.cons[i]));
    for (unsigned i = 0; clat && i < run.n_prod; i++)
        stats_hist_merge(clat, producer_confirm_latency(run.prod[i]));
    if (run.threads.n && snap)
        result_compute(&r, &run.threads, &snap[0], &snap[1], lat, clat, o->broker_pid);
    result_print(&r, o);
    stats_hist_free(lat);
    stats_hist_free(clat);
    topology_delete(&run.topo, &run.ctl);
    conn_close(&run.ctl);
    run_free(&run);
    free(snap);
    return r.errors ? 1 : 0;
}

/* ---- other modes ----------------------------------------------------- */

/* Opens N connections with channel 1 each, prints READY, holds them for
 * --duration, closes them. The caller measures the broker's memory. */
static int run_idle(const perf_options *o)
{
    unsigned n = o->idle_connections, opened = 0;
    perf_conn *c = calloc(n, sizeof *c);
    raise_fd_limit();
    uint64_t t0 = stats_now_ns();
    for (; c && opened < n; opened++) {
        if (conn_open(&c[opened]) != 0) {
            conn_close(&c[opened]);
            fprintf(stderr, "warren-perf: connection %u of %u failed\n", opened + 1, n);
            break;
        }
    }
    double secs = (double)(stats_now_ns() - t0) / 1e9;
    if (opened == n) {
        printf("READY connections=%u open_rate=%.0f\n", n, n / (secs > 0 ? secs : 1e-9));
        fflush(stdout);
        sleep_ns((uint64_t)(o->duration * 1e9));
    }
    for (unsigned i = 0; i < opened; i++)
        conn_close(&c[i]);
    free(c);
    printf("RESULT mode=idle connections=%u opened=%u open_seconds=%.2f errors=%d\n", n,
           opened, secs, opened != n);
    return opened == n ? 0 : 1;
}

/* Times N pipelined queue.binds of topic patterns to one queue. */
static int run_bindings(const perf_options *o)
{
    perf_options topic = *o;
    topic.exchange_type = "topic";
    topology t = {0};
    perf_conn ctl = {0};
    int rc = topology_names(&t, 1, NULL) != 0 || conn_open(&ctl) != 0 ||
             topology_declare(&t, &ctl, &topic, o->declare_bindings) != 0;
    double rate = rc ? 0 : o->declare_bindings / (t.bind_seconds > 0 ? t.bind_seconds : 1e-9);
    if (!rc)
        printf("declared %u topic bindings in %.3f s: %.0f bindings/s (window %u)\n",
               o->declare_bindings, t.bind_seconds, rate, o->bind_window);
    printf("RESULT mode=bindings bindings=%u bind_rate=%.0f seconds=%.3f errors=%d\n",
           o->declare_bindings, rate, rc ? 0 : t.bind_seconds, rc);
    topology_delete(&t, &ctl);
    conn_close(&ctl);
    topology_free(&t);
    return rc;
}

/* --await-messages N: times a (re)starting broker, polling every 10 ms:
 * until a login succeeds, then until the --queue queues (passive declare)
 * hold N messages in all (or more: then errors=1). Times run from the
 * broker's process start with --broker-pid, else from our own. */
static int run_await(const perf_options *o)
{
    uint64_t expected = (uint64_t)o->await_messages, sum = 0, t0 = stats_now_ns();
    uint64_t origin = process_start_ns(o->broker_pid), connect_ns = 0, ready_ns = 0;
    uint64_t deadline = t0 + (uint64_t)(o->duration * 1e9);
    unsigned missing = 1;
    topology t = {0};
    perf_conn c = {0};
    int connected = 0;
    if (topology_names(&t, o->queues, o->queue_name) != 0)
        return 1;
    if (origin == 0 || origin > t0)
        origin = t0;
    quiet_connect = 1;
    for (uint64_t now = t0; now < deadline; now = stats_now_ns()) {
        if (o->broker_pid > 0 && broker_status_kb(o->broker_pid, "VmRSS:") == 0) {
            fprintf(stderr, "warren-perf: broker pid %d exited\n", o->broker_pid);
            break; /* gone, or a zombie: it will not come up */
        }
        if (!connected && conn_open(&c) != 0) {
            conn_close(&c);
            sleep_ns(10 * MS);
            continue;
        }
        if (!connected) {
            connected = 1;
            connect_ns = stats_now_ns() - origin;
        }
        if (topology_depth(&t, &c, &sum, &missing) != 0) {
            conn_close(&c); /* refused or closed mid-way: log in again */
            connected = 0;
        } else if (!missing && sum >= expected) {
            ready_ns = stats_now_ns() - origin;
            break;
        }
        sleep_ns(10 * MS);
    }
    quiet_connect = 0;
    conn_close(&c);
    int err = !ready_ns || sum != expected;
    uint64_t rss = broker_status_kb(o->broker_pid, "VmRSS:");
    printf("await %u queue(s), %llu messages: login after %.3f s, counts after %.3f s, from %s "
           "start; found %llu%s\n", t.n_queues, (unsigned long long)expected,
           (double)connect_ns / 1e9, (double)ready_ns / 1e9,
           origin == t0 ? "our" : "the broker's", (unsigned long long)sum,
           missing ? " (a queue is missing)" : "");
    printf("RESULT mode=await expected=%llu messages=%llu queues=%u missing=%u "
           "connect_seconds=%.3f ready_seconds=%.3f origin=%s broker_rss_kb=%llu errors=%d\n",
           (unsigned long long)expected, (unsigned long long)sum, t.n_queues, missing,
           (double)connect_ns / 1e9, (double)ready_ns / 1e9, origin == t0 ? "tool" : "broker",
           (unsigned long long)rss, err);
    topology_free(&t);
    return err;
}

/* --delete-queues: deletes the --queue queues (not-found is not an error). */
static int run_delete(const perf_options *o)
{
    topology t = {0};
    perf_conn c = {0};
    unsigned deleted = 0;
    uint64_t messages = 0;
    int rc = topology_names(&t, o->queues, o->queue_name) != 0 || conn_open(&c) != 0;
    for (unsigned i = 0; !rc && i < t.n_queues; i++) {
        amqp_queue_delete_ok_t *ok =
            amqp_queue_delete(c.amqp, 1, amqp_cstring_bytes(t.queue[i]), 0, 0);
        if (ok) {
            deleted++;
            messages += ok->message_count;
        } else {
            ctl_recover(&c);
        }
    }
    printf("RESULT mode=delete queues=%u deleted=%u messages=%llu errors=%d\n", t.n_queues,
           deleted, (unsigned long long)messages, rc);
    conn_close(&c);
    topology_free(&t);
    return rc;
}

/* A connected TCP pair on 127.0.0.1 (client in fds[0]), both with the same
 * timeouts as broker sockets. Returns 0 or -1. */
static int tcp_pair(int fds[2])
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    fds[0] = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || fds[0] < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(l, 1) != 0 || getsockname(l, (struct sockaddr *)&sa, &len) != 0 ||
        connect(fds[0], (struct sockaddr *)&sa, sizeof sa) != 0)
        return -1;
    fds[1] = accept(l, NULL, NULL);
    close(l);
    struct timeval tv = {0, 100000};
    for (int i = 0; i < 2; i++) {
        setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fds[i], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    return fds[1] < 0 ? -1 : 0;
}

typedef struct selftest_peer {
    int fd;
    int busy;
    worker_shared *shared;
    uint8_t *data; /* source: deliveries to send round and round */
    size_t len;
} selftest_peer;

/* Reads and discards until the producer closes or stop. A busy sink reads
 * only every 200 us, so the producer's sends find it awake with data queued
 * (no wakeup per packet), as a loaded broker would be. */
static void *sink_main(void *arg)
{
    selftest_peer *s = arg;
    size_t cap = 1 << 20;
    uint8_t *buf = malloc(cap);
    while (buf) {
        ssize_t n = recv(s->fd, buf, cap, 0);
        if (s->busy)
            sleep_ns(200000); /* like a loaded broker: read every 200 us */
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            break;
        if (n < 0 && atomic_load(&s->shared->stop))
            break;
    }
    free(buf);
    return NULL;
}

/* Writes pre-encoded deliveries until stop. */
static void *source_main(void *arg)
{
    selftest_peer *s = arg;
    while (!atomic_load(&s->shared->stop))
        if (send(s->fd, s->data, s->len, MSG_NOSIGNAL) < 0 && errno != EAGAIN && errno != EINTR)
            break;
    return NULL;
}

enum { PUBLISH_TO_IDLE_SINK, PUBLISH_TO_BUSY_SINK, CONSUME_FROM_SOURCE };

/* One self-test phase: n workers of one kind against in-process peers.
 * Returns the worker message rate and sets *cpu to the busiest worker's CPU. */
static double selftest_phase(const perf_options *o, int phase, unsigned n, double *cpu)
{
    int publish = phase != CONSUME_FROM_SOURCE;
    worker_shared sh = {.route_factor = 1};
    perf_threads th = {.n = 0}, peers = {.n = 0};
    selftest_peer peer[64];
    void *worker[64];
    perf_snapshot *snap = calloc(2, sizeof *snap);
    uint8_t *deliveries = malloc(1 << 20);
    size_t dlen = 0;
    const char *key = "perf.key";
    for (uint64_t tag = 1; deliveries && dlen + o->size + 1024 < (1u << 19); tag++)
        dlen += wire_encode_deliver(deliveries + dlen, (1u << 20) - dlen, 1, tag, key,
                                    o->size, FRAME_MAX);
    int fds[64][2], rc = !snap || !deliveries;
    unsigned stalls = 0;
    for (unsigned i = 0; i < n && !rc; i++) {
        rc = tcp_pair(fds[i]);
        peer[i] = (selftest_peer){fds[i][1], phase == PUBLISH_TO_BUSY_SINK, &sh, deliveries, dlen};
        producer_config pc = {fds[i][0], FRAME_MAX, "perf.x", &key, 1, o->size, 0, o->batch,
                              0, 0, 0, NULL};
        consumer_config cc = {fds[i][0], FRAME_MAX, NULL, 0, 1, NULL};
        worker[i] = publish ? (void *)producer_new(&pc, &sh) : (void *)consumer_new(&cc, &sh);
        rc = rc || !worker[i] ||
             add_thread(&peers, publish ? sink_main : source_main, &peer[i], "peer", i) ||
             add_thread(&th, publish ? producer_main : consumer_main, worker[i],
                        publish ? "producer" : "consumer", i);
    }
    if (!rc)
        rc = measure(&sh, &th, o, &snap[0], &snap[1], &stalls);
    atomic_store(&sh.stop, 1);
    for (unsigned i = 0; i < th.n; i++) {
        pthread_join(th.id[i], NULL);
        shutdown(fds[i][0], SHUT_RDWR);
    }
    for (unsigned i = 0; i < peers.n; i++)
        pthread_join(peers.id[i], NULL);
    perf_result r = {0};
    if (!rc)
        result_compute(&r, &th, &snap[0], &snap[1], NULL, NULL, 0);
    for (unsigned i = 0; i < th.n; i++) {
        if (publish)
            producer_free(worker[i]);
        else
            consumer_free(worker[i]);
        close(fds[i][0]);
        close(fds[i][1]);
    }
    free(snap);
    free(deliveries);
    *cpu = r.cpu_max;
    return rc ? -1 : (publish ? r.sent_rate : r.recv_rate);
}

static int run_selftest(const perf_options *o)
{
    unsigned np = o->producers > 64 ? 64 : o->producers;
    unsigned nc = o->consumers > 64 ? 64 : o->consumers;
    double cpu[3] = {0}, rate[3];
    static const char *const what[3] = {
        "publish -> TCP sink blocked in recv (a wakeup per send)",
        "publish -> TCP sink reading every 200 us (like a loaded broker)",
        "TCP source of deliveries -> consume (parse only, autoack)"};
    printf("self-test: %u producer(s) / %u consumer(s), batch %u, %zu-byte bodies, "
           "in-process peers over 127.0.0.1\n", np, nc, o->batch, o->size);
    for (int phase = 0; phase < 3; phase++) {
        rate[phase] = selftest_phase(o, phase, phase == CONSUME_FROM_SOURCE ? nc : np,
                                     &cpu[phase]);
        printf("  %-64s %10.0f msg/s  (busiest thread %.0f%% CPU)\n", what[phase],
               rate[phase], cpu[phase]);
    }
    int err = rate[0] < 0 || rate[1] < 0 || rate[2] < 0;
    printf("RESULT mode=selftest batch=%u publish_rate=%.0f publish_cpu=%.0f "
           "publish_busy_sink_rate=%.0f publish_busy_sink_cpu=%.0f consume_rate=%.0f "
           "consume_cpu=%.0f errors=%d\n", o->batch, rate[0], cpu[0], rate[1], cpu[1],
           rate[2], cpu[2], err);
    return err;
}

static int run_check(void)
{
    perf_conn c;
    int rc = conn_open(&c);
    conn_close(&c);
    printf("RESULT mode=check errors=%d\n", rc != 0);
    return rc != 0;
}

/* ---- options --------------------------------------------------------- */

static void usage(FILE *out)
{
    fputs(
        "usage: warren-perf [options]\n"
        "  --uri URI               amqp://user:pass@127.0.0.1:PORT[/vhost]\n"
        "                          (default amqp://guest:guest@127.0.0.1:5672)\n"
        "  --allow-host ADDR       let --uri name this address too (only 127.0.0.1\n"
        "                          otherwise): a test network's, e.g. a namespace's\n"
        "  --producers N           producer connections, one thread each (1)\n"
        "  --consumers N           consumer connections, one thread each (1)\n"
        "  --queues N              queues, declared per run, auto-delete, deleted at end (1)\n"
        "                          consumer i reads queue i % N; direct: producer i\n"
        "                          publishes round-robin to queues i, i+P, i+2P, ... (P\n"
        "                          producers; queue i % N when P >= N)\n"
        "  --queue NAME            fixed queue names instead: NAME, or NAME.0 .. NAME.N-1\n"
        "                          with --queues N; not auto-delete, kept at the end\n"
        "                          (durable with --persistent)\n"
        "  --queue-arg KEY=VALUE   an argument of the queues declared (up to 8; a\n"
        "                          VALUE of digits is a long, else a string), e.g.\n"
        "                          x-queue-type=quorum (with --queue and --persistent)\n"
        "  --size BYTES            body size; >= 8 carries the send timestamp (16)\n"
        "  --exchange-type T       direct | fanout | topic (direct)\n"
        "  --bindings N            topic: N bindings using * and # patterns, each\n"
        "                          message matching exactly one (default: one per queue)\n"
        "  --fanout-queues N       fanout to N queues, a consumer on each; rates are\n"
        "                          deliveries/s over all queues\n"
        "  --persistent            delivery-mode 2, durable queues\n"
        "  --filter-value V        publish with header x-stream-filter-value V\n"
        "  --stream-offset S       consume with x-stream-offset S (first, last, next, N)\n"
        "  --stream-filter V       consume with x-stream-filter V\n"
        "  --confirm WINDOW        publisher confirms, at most WINDOW unconfirmed; reports\n"
        "                          publish-to-confirm latency too (a --rate producer\n"
        "                          reads confirms while it waits for its next slot)\n"
        "  --prefetch N            basic.qos prefetch-count per consumer (0 = none)\n"
        "  --ack auto|manual       manual: ack with multiple=true every --multi-ack-every\n"
        "  --multi-ack-every N     (default prefetch/2, or 64 without prefetch)\n"
        "  --batch K               publishes per socket write (1)\n"
        "  --rate R                fixed rate, msgs/s PER PRODUCER (0 = unlimited)\n"
        "  --inflight CAP          max published-but-not-consumed messages, all producers\n"
        "                          together (20000; 0 = no cap)\n"
        "  --duration S            measured window in seconds (5); with --count,\n"
        "                          --drain or --await-messages, the time limit (600)\n"
        "  --warmup S              unmeasured seconds before it (1; none with --count)\n"
        "  --count N               a fixed amount of work instead of a window: each\n"
        "                          producer publishes exactly N messages and the run\n"
        "                          ends when all are confirmed (--confirm) and consumed\n"
        "                          (if --consumers > 0); rates are over the whole run.\n"
        "                          With --consumers 0 there is no --inflight cap\n"
        "  --drain                 no producers: consume the --queue queues (which must\n"
        "                          exist) until they are empty, or after --count N\n"
        "                          deliveries; rates are up to the last delivery, and\n"
        "                          manual acks are all sent before the end\n"
        "  --broker-pid PID        also report that process's CPU over the window; with\n"
        "                          --count or --drain also its VmRSS (at the start, and\n"
        "                          the max sampled every 100 ms) and VmHWM (its\n"
        "                          lifetime peak) at the end\n"
        "  --idle-connections N    hold N connections with a channel open each; print\n"
        "                          READY when all are open, hold for --duration\n"
        "  --declare-bindings N    time N pipelined topic queue.binds, report bindings/s\n"
        "  --bind-window W         unanswered queue.binds at a time (256)\n"
        "  --await-messages N      wait for a (re)starting broker: report the seconds\n"
        "                          until a login succeeds and until the --queue queues\n"
        "                          hold N messages in all (passive queue.declare), from\n"
        "                          the start of --broker-pid's process (else from ours)\n"
        "  --delete-queues         delete the --queue queues and exit\n"
        "  --selftest              the tool's own ceiling: publish into an in-process\n"
        "                          socket sink, parse deliveries from a socket source\n"
        "  --check                 log in and out; exit 0 if the broker answers\n"
        "  --quiet                 no per-second lines\n"
        "Output ends with one line: RESULT key=value ...\n",
        out);
}

static int parse_num(const char *name, const char *arg, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "warren-perf: --%s wants a number in [%g, %g], got '%s'\n", name, lo,
                hi, arg);
        return -1;
    }
    *out = v;
    return 0;
}

enum {
    OPT_URI = 256, OPT_PRODUCERS, OPT_CONSUMERS, OPT_QUEUES, OPT_SIZE, OPT_EXTYPE,
    OPT_BINDINGS, OPT_PERSISTENT, OPT_CONFIRM, OPT_PREFETCH, OPT_ACK, OPT_ACK_EVERY,
    OPT_BATCH, OPT_RATE, OPT_INFLIGHT, OPT_DURATION, OPT_WARMUP, OPT_FANOUT, OPT_IDLE,
    OPT_DECLARE, OPT_BIND_WINDOW, OPT_BROKER_PID, OPT_COUNT, OPT_DRAIN, OPT_QUEUE, OPT_AWAIT,
    OPT_DELETE_QUEUES, OPT_SELFTEST, OPT_CHECK, OPT_QUIET, OPT_QUEUE_ARG, OPT_HELP,
    OPT_FILTER_VALUE, OPT_STREAM_OFFSET, OPT_STREAM_FILTER, OPT_ALLOW_HOST,
};

static const struct option long_options[] = {
    {"uri", 1, 0, OPT_URI}, {"producers", 1, 0, OPT_PRODUCERS},
    {"consumers", 1, 0, OPT_CONSUMERS}, {"queues", 1, 0, OPT_QUEUES},
    {"size", 1, 0, OPT_SIZE}, {"exchange-type", 1, 0, OPT_EXTYPE},
    {"bindings", 1, 0, OPT_BINDINGS}, {"persistent", 0, 0, OPT_PERSISTENT},
    {"confirm", 1, 0, OPT_CONFIRM}, {"prefetch", 1, 0, OPT_PREFETCH},
    {"ack", 1, 0, OPT_ACK}, {"multi-ack-every", 1, 0, OPT_ACK_EVERY},
    {"batch", 1, 0, OPT_BATCH}, {"rate", 1, 0, OPT_RATE},
    {"inflight", 1, 0, OPT_INFLIGHT}, {"duration", 1, 0, OPT_DURATION},
    {"warmup", 1, 0, OPT_WARMUP}, {"fanout-queues", 1, 0, OPT_FANOUT},
    {"idle-connections", 1, 0, OPT_IDLE}, {"declare-bindings", 1, 0, OPT_DECLARE},
    {"bind-window", 1, 0, OPT_BIND_WINDOW}, {"broker-pid", 1, 0, OPT_BROKER_PID},
    {"count", 1, 0, OPT_COUNT}, {"drain", 0, 0, OPT_DRAIN}, {"queue", 1, 0, OPT_QUEUE},
    {"await-messages", 1, 0, OPT_AWAIT}, {"delete-queues", 0, 0, OPT_DELETE_QUEUES},
    {"selftest", 0, 0, OPT_SELFTEST}, {"check", 0, 0, OPT_CHECK},
    {"quiet", 0, 0, OPT_QUIET}, {"queue-arg", 1, 0, OPT_QUEUE_ARG},
    {"filter-value", 1, 0, OPT_FILTER_VALUE}, {"stream-offset", 1, 0, OPT_STREAM_OFFSET},
    {"stream-filter", 1, 0, OPT_STREAM_FILTER}, {"allow-host", 1, 0, OPT_ALLOW_HOST},
    {"help", 0, 0, OPT_HELP}, {0, 0, 0, 0},
};

/* Applies one numeric option; returns 0 or -1. */
static int set_numeric(perf_options *o, int opt, const char *arg)
{
    double v;
    const char *name = long_options[opt - OPT_URI].name;
    static const double max[] = {
        [OPT_PRODUCERS - OPT_URI] = 200, [OPT_CONSUMERS - OPT_URI] = 200,
        [OPT_QUEUES - OPT_URI] = 10000, [OPT_SIZE - OPT_URI] = 64 << 20,
        [OPT_BINDINGS - OPT_URI] = 1000000, [OPT_CONFIRM - OPT_URI] = 1 << 20,
        [OPT_PREFETCH - OPT_URI] = 65535, [OPT_ACK_EVERY - OPT_URI] = 65535,
        [OPT_BATCH - OPT_URI] = 4096, [OPT_RATE - OPT_URI] = 1e9,
        [OPT_INFLIGHT - OPT_URI] = 1e9, [OPT_DURATION - OPT_URI] = 3600,
        [OPT_WARMUP - OPT_URI] = 600, [OPT_FANOUT - OPT_URI] = 200,
        [OPT_IDLE - OPT_URI] = 100000, [OPT_DECLARE - OPT_URI] = 1000000,
        [OPT_BIND_WINDOW - OPT_URI] = 4096, [OPT_BROKER_PID - OPT_URI] = 1 << 22,
        [OPT_COUNT - OPT_URI] = 1e12, [OPT_AWAIT - OPT_URI] = 1e12,
    };
    if (parse_num(name, arg, 0, max[opt - OPT_URI], &v) != 0)
        return -1;
    switch (opt) {
    case OPT_PRODUCERS: o->producers = (unsigned)v; break;
    case OPT_CONSUMERS: o->consumers = (unsigned)v; break;
    case OPT_QUEUES: o->queues = (unsigned)v; break;
    case OPT_SIZE: o->size = (size_t)v; break;
    case OPT_BINDINGS: o->bindings = (unsigned)v; break;
    case OPT_CONFIRM: o->confirm = (unsigned)v; break;
    case OPT_PREFETCH: o->prefetch = (unsigned)v; break;
    case OPT_ACK_EVERY: o->ack_every = (unsigned)v; break;
    case OPT_BATCH: o->batch = (unsigned)v; break;
    case OPT_RATE: o->rate = v; break;
    case OPT_INFLIGHT: o->inflight = (uint64_t)v; break;
    case OPT_DURATION: o->duration = v; break;
    case OPT_WARMUP: o->warmup = v; break;
    case OPT_FANOUT: o->fanout_queues = (unsigned)v; break;
    case OPT_IDLE: o->idle_connections = (unsigned)v; break;
    case OPT_DECLARE: o->declare_bindings = (unsigned)v; break;
    case OPT_BIND_WINDOW: o->bind_window = (unsigned)v; break;
    case OPT_BROKER_PID: o->broker_pid = (int)v; break;
    case OPT_COUNT: o->count = (uint64_t)v; break;
    case OPT_AWAIT: o->await_messages = v; break;
    }
    return 0;
}

/* Makes the options consistent (fanout shorthand, batch within the confirm
 * window, cap at least one batch). Returns 0 or -1. */
static int options_settle(perf_options *o)
{
    if (strcmp(o->exchange_type, "direct") && strcmp(o->exchange_type, "fanout") &&
        strcmp(o->exchange_type, "topic")) {
        fprintf(stderr, "warren-perf: --exchange-type is direct, fanout or topic\n");
        return -1;
    }
    if (o->fanout_queues) {
        o->exchange_type = "fanout";
        o->queues = o->consumers = o->fanout_queues;
    }
    if (o->producers + o->consumers > MAX_WORKERS || o->queues == 0 || o->batch == 0 ||
        o->bind_window == 0) {
        fprintf(stderr, "warren-perf: need --queues, --batch, --bind-window >= 1 and at "
                        "most %d workers\n", MAX_WORKERS);
        return -1;
    }
    if ((o->await_messages >= 0 || o->delete_queues) && !o->queue_name) {
        fprintf(stderr, "warren-perf: --await-messages and --delete-queues need --queue\n");
        return -1;
    }
    if (o->drain)
        o->producers = 0;
    o->counted = o->drain || o->count > 0;
    if (o->counted && o->producers == 0 &&
        (!o->drain || !o->queue_name || o->consumers < o->queues)) {
        fprintf(stderr, "warren-perf: --drain needs --queue and a consumer per queue; "
                        "--count needs producers or --drain\n");
        return -1;
    }
    if (o->queue_name && strlen(o->queue_name) > 80) {
        fprintf(stderr, "warren-perf: --queue name too long\n");
        return -1;
    }
    if (o->duration < 0) /* not given */
        o->duration = o->counted || o->await_messages >= 0 ? 600 : 5;
    if (o->counted)
        o->warmup = 0;
    if (o->consumers == 0)
        o->inflight = 0; /* nobody would ever lower the in-flight count */
    if (o->confirm && o->batch > o->confirm)
        o->batch = o->confirm;
    if (o->inflight && o->inflight < o->batch)
        o->inflight = o->batch;
    if (o->ack_every == 0)
        o->ack_every = o->prefetch ? (o->prefetch / 2 ? o->prefetch / 2 : 1) : 64;
    return 0;
}

/* --stream-offset / --stream-filter: basic.consume arguments (strings). */
static void add_consume_arg(perf_options *o, const char *key, const char *value)
{
    int n = 0;
    while (o->consume_args[n] && strcmp(o->consume_args[n], key) != 0)
        n += 2;
    o->consume_args[n] = key;
    o->consume_args[n + 1] = value;
}

/* --queue-arg KEY=VALUE: the entry points into argv. Returns 0 or -1. */
static int add_queue_arg(perf_options *o, char *arg)
{
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg || o->n_queue_args == MAX_QUEUE_ARGS) {
        fprintf(stderr, "warren-perf: --queue-arg wants KEY=VALUE, at most %d of them\n",
                MAX_QUEUE_ARGS);
        return -1;
    }
    *eq = '\0';
    const char *v = eq + 1;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    amqp_table_entry_t *e = &o->queue_args[o->n_queue_args++];
    e->key = amqp_cstring_bytes(arg);
    if (*v && !*end && !errno) {
        e->value.kind = AMQP_FIELD_KIND_I64;
        e->value.value.i64 = n;
    } else {
        e->value.kind = AMQP_FIELD_KIND_UTF8;
        e->value.value.bytes = amqp_cstring_bytes(v);
    }
    return 0;
}

static int options_parse(perf_options *o, int argc, char **argv)
{
    *o = (perf_options){.uri = "amqp://guest:guest@127.0.0.1:5672", .producers = 1,
                        .consumers = 1, .queues = 1, .size = 16, .exchange_type = "direct",
                        .batch = 1, .inflight = 20000, .duration = -1, .warmup = 1,
                        .bind_window = 256, .await_messages = -1};
    int opt;
    while ((opt = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        switch (opt) {
        case OPT_URI: o->uri = optarg; break;
        case OPT_ALLOW_HOST: o->allow_host = optarg; break;
        case OPT_EXTYPE: o->exchange_type = optarg; break;
        case OPT_PERSISTENT: o->persistent = 1; break;
        case OPT_FILTER_VALUE: o->filter_value = optarg; break;
        case OPT_STREAM_OFFSET: add_consume_arg(o, "x-stream-offset", optarg); break;
        case OPT_STREAM_FILTER: add_consume_arg(o, "x-stream-filter", optarg); break;
        case OPT_QUEUE: o->queue_name = optarg; break;
        case OPT_DELETE_QUEUES: o->delete_queues = 1; break;
        case OPT_DRAIN: o->drain = 1; break;
        case OPT_SELFTEST: o->selftest = 1; break;
        case OPT_CHECK: o->check = 1; break;
        case OPT_QUIET: o->quiet = 1; break;
        case OPT_QUEUE_ARG:
            if (add_queue_arg(o, optarg) != 0)
                return -1;
            break;
        case OPT_ACK:
            if (strcmp(optarg, "auto") && strcmp(optarg, "manual")) {
                fprintf(stderr, "warren-perf: --ack is auto or manual\n");
                return -1;
            }
            o->manual_ack = strcmp(optarg, "manual") == 0;
            break;
        case 'h':
        case OPT_HELP: usage(stdout); exit(0);
        default:
            if (opt < OPT_URI || opt >= OPT_HELP || set_numeric(o, opt, optarg) != 0) {
                usage(stderr);
                return -1;
            }
        }
    }
    if (optind < argc) {
        fprintf(stderr, "warren-perf: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return options_settle(o);
}

int main(int argc, char **argv)
{
    perf_options o;
    signal(SIGPIPE, SIG_IGN);
    if (options_parse(&o, argc, argv) != 0)
        return 2;
    /* every mode ends by itself; this only catches a broker that hangs */
    double budget = o.warmup + o.duration + 120 + (o.bindings + o.declare_bindings) / 100.0 +
                    o.idle_connections / 20.0;
    signal(SIGALRM, watchdog_fired);
    alarm((unsigned)budget);
    srandom((unsigned)stats_now_ns() ^ (unsigned)getpid());
    if (o.selftest)
        return run_selftest(&o);
    if (parse_uri(o.uri, o.allow_host) != 0)
        return 2;
    if (o.check)
        return run_check();
    if (o.idle_connections)
        return run_idle(&o);
    if (o.declare_bindings)
        return run_bindings(&o);
    if (o.await_messages >= 0)
        return run_await(&o);
    if (o.delete_queues)
        return run_delete(&o);
    return run_throughput(&o);
}
