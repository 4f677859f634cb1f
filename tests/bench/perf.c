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
 * Every run ends by itself: the window is bounded by --duration, every socket
 * has send/receive timeouts, and an alarm() watchdog ends a stuck process. */
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
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

typedef struct perf_options {
    const char *uri;
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
    int selftest, check, quiet;
} perf_options;

/* A librabbitmq connection with channel 1 open; fd is valid once raw. */
typedef struct perf_conn {
    amqp_connection_state_t amqp;
    int fd;
    uint32_t frame_max;
    int raw;
} perf_conn;

/* Snapshot of everything a window's figures are computed from. */
typedef struct perf_snapshot {
    uint64_t ns, sent, received, confirmed, process_cpu, broker_cpu;
    uint64_t thread_cpu[MAX_WORKERS];
} perf_snapshot;

typedef struct perf_threads {
    pthread_t id[MAX_WORKERS];
    char name[MAX_WORKERS][24];
    unsigned n;
} perf_threads;

static struct amqp_connection_info uri_info;
static char uri_copy[512];

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

static int parse_uri(const char *uri)
{
    snprintf(uri_copy, sizeof uri_copy, "%s", uri);
    amqp_default_connection_info(&uri_info);
    if (amqp_parse_url(uri_copy, &uri_info) != AMQP_STATUS_OK) {
        fprintf(stderr, "warren-perf: bad --uri %s\n", uri);
        return -1;
    }
    if (strcmp(uri_info.host, "127.0.0.1") != 0 && strcmp(uri_info.host, "localhost") != 0) {
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
        fprintf(stderr, "warren-perf: login: %s\n", why);
        return -1;
    }
    c->frame_max = (uint32_t)amqp_get_frame_max(c->amqp);
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
    else
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

/* utime + stime of another process, in ns; 0 if unreadable. */
static uint64_t broker_cpu_ns(int pid)
{
    char path[64], buf[1024];
    if (pid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                     &ut, &st) != 2)
        return 0;
    return (ut + st) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
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

/* Sends n_bind queue.binds on a fresh raw connection, at most window
 * unanswered. Binding i: queue i % n_queues, topic_pattern(i) (fanout and
 * direct callers pass their own key through key_of). Returns seconds taken,
 * or -1 on error. */
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
        if (len && worker_write_all(c.fd, out, len, deadline) != 0)
            err = 1;
        ssize_t n = err ? -1 : recv(c.fd, in + have, sizeof in - have, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            err = 1;
        if (n <= 0)
            continue;
        have += (size_t)n;
        size_t off = 0;
        wire_frame f;
        while (!err && wire_next_frame(in, have, &off, c.frame_max, &f) == WIRE_OK) {
            uint32_t id = wire_method_id(&f);
            char why[300];
            if (id == WIRE_QUEUE_BIND_OK) {
                acked++;
            } else if (id == WIRE_CHANNEL_CLOSE || id == WIRE_CONNECTION_CLOSE) {
                wire_describe_close(&f, why, sizeof why);
                fprintf(stderr, "warren-perf: queue.bind: %s\n", why);
                err = 1;
            }
        }
        memmove(in, in + off, have - off);
        have -= off;
    }
    double secs = (double)(stats_now_ns() - t0) / 1e9;
    free(out);
    conn_close(&c);
    return err || acked < n_bind ? -1 : secs;
}

static int topology_names(topology *t, unsigned n_queues)
{
    snprintf(t->run_id, sizeof t->run_id, "warren-perf-%d-%08lx", (int)getpid(),
             (unsigned long)(stats_now_ns() ^ (uint64_t)random()) & 0xffffffffUL);
    snprintf(t->exchange, sizeof t->exchange, "%s.x", t->run_id);
    t->n_queues = n_queues;
    t->queue = calloc(n_queues, sizeof *t->queue);
    if (!t->queue)
        return -1;
    for (unsigned i = 0; i < n_queues; i++)
        snprintf(t->queue[i], sizeof t->queue[i], "%s.q%u", t->run_id, i);
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
 * bindings pipelined on their own connection). Returns 0 or -1. */
static int topology_declare(topology *t, perf_conn *ctl, const perf_options *o,
                            unsigned n_bindings)
{
    amqp_exchange_declare(ctl->amqp, 1, amqp_cstring_bytes(t->exchange),
                          amqp_cstring_bytes(o->exchange_type), 0, 0, 1, 0, amqp_empty_table);
    if (check_rpc(ctl, "exchange.declare") != 0)
        return -1;
    for (unsigned i = 0; i < t->n_queues; i++) {
        amqp_queue_declare(ctl->amqp, 1, amqp_cstring_bytes(t->queue[i]), 0, o->persistent,
                           0, 1, amqp_empty_table);
        if (check_rpc(ctl, "queue.declare") != 0)
            return -1;
    }
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

/* Deletes what topology_declare made; auto-delete may already have, so
 * errors only reopen the channel. */
static void topology_delete(topology *t, perf_conn *ctl)
{
    if (!ctl->amqp)
        return;
    amqp_exchange_delete(ctl->amqp, 1, amqp_cstring_bytes(t->exchange), 0);
    ctl_recover(ctl);
    for (unsigned i = 0; i < t->n_queues; i++) {
        amqp_queue_delete(ctl->amqp, 1, amqp_cstring_bytes(t->queue[i]), 0, 0);
        ctl_recover(ctl);
    }
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
    for (unsigned i = 0; i < th->n; i++)
        s->thread_cpu[i] = stats_thread_cpu_ns(th->id[i]);
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
 * latency. Returns 0, or -1 as soon as a worker failed. */
static int measure(worker_shared *sh, const perf_threads *th, const perf_options *o,
                   perf_snapshot *a, perf_snapshot *b)
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
        sleep_ns((tick < next ? tick : next) - now);
        now = stats_now_ns();
        if (!in_window && now >= win_start) {
            snapshot_take(a, sh, th, o->broker_pid);
            atomic_store(&sh->measuring, 1);
            in_window = 1;
        }
        if (now >= tick) {
            snapshot_take(cur, sh, th, 0);
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

/* Busiest worker thread's CPU share over the window, in percent. */
static double busiest_thread(const perf_threads *th, const perf_snapshot *a,
                             const perf_snapshot *b, unsigned *which)
{
    double dt = (double)(b->ns - a->ns), best = 0;
    *which = 0;
    for (unsigned i = 0; i < th->n && dt > 0; i++) {
        double pct = 100.0 * (double)(b->thread_cpu[i] - a->thread_cpu[i]) / dt;
        if (pct > best) {
            best = pct;
            *which = i;
        }
    }
    return best;
}

typedef struct perf_result {
    double sent_rate, recv_rate, confirm_rate;
    double p50_us, p99_us, p999_us, max_us;
    uint64_t samples;
    double cpu_max, cpu_total, broker_cpu, bind_rate;
    int errors;
} perf_result;

static void result_compute(perf_result *r, const perf_threads *th, const perf_snapshot *a,
                           const perf_snapshot *b, const stats_hist *lat, int broker_pid)
{
    double dt = (double)(b->ns - a->ns) / 1e9;
    unsigned which;
    if (dt <= 0)
        dt = 1e-9;
    r->sent_rate = (double)(b->sent - a->sent) / dt;
    r->recv_rate = (double)(b->received - a->received) / dt;
    r->confirm_rate = (double)(b->confirmed - a->confirmed) / dt;
    r->samples = lat ? stats_hist_count(lat) : 0;
    if (r->samples) {
        r->p50_us = (double)stats_hist_percentile(lat, 50) / 1e3;
        r->p99_us = (double)stats_hist_percentile(lat, 99) / 1e3;
        r->p999_us = (double)stats_hist_percentile(lat, 99.9) / 1e3;
        r->max_us = (double)stats_hist_max(lat) / 1e3;
    }
    r->cpu_max = busiest_thread(th, a, b, &which);
    r->cpu_total = 100.0 * (double)(b->process_cpu - a->process_cpu) / (dt * 1e9);
    r->broker_cpu = broker_pid > 0
                        ? 100.0 * (double)(b->broker_cpu - a->broker_cpu) / (dt * 1e9) : -1;
    if (th->n && r->cpu_max > 90.0)
        fprintf(stderr, "WARNING: tool-limited: %s used %.0f%% CPU; this figure measures "
                        "warren-perf, not the broker\n", th->name[which], r->cpu_max);
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
    if (r->bind_rate > 0)
        printf("bindings  %12.0f /s (pipelined queue.bind)\n", r->bind_rate);
    printf("tool cpu  busiest thread %.0f%%, whole process %.0f%%%s\n", r->cpu_max,
           r->cpu_total, r->cpu_max > 90.0 ? "  WARNING: tool-limited" : "");
    if (r->broker_cpu >= 0)
        printf("broker cpu %.0f%% (pid %d)\n", r->broker_cpu, o->broker_pid);
    printf("RESULT mode=throughput sent_rate=%.0f recv_rate=%.0f confirm_rate=%.0f "
           "p50_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f lat_samples=%llu "
           "bind_rate=%.0f tool_cpu_max=%.0f tool_cpu_total=%.0f broker_cpu=%.0f "
           "tool_limited=%d errors=%d\n",
           r->sent_rate, r->recv_rate, r->confirm_rate, r->p50_us, r->p99_us, r->p999_us,
           r->max_us, (unsigned long long)r->samples, r->bind_rate, r->cpu_max, r->cpu_total,
           r->broker_cpu, r->cpu_max > 90.0, r->errors);
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

static int add_thread(perf_threads *th, void *(*fn)(void *), void *arg, const char *kind,
                      unsigned i)
{
    if (th->n == MAX_WORKERS || pthread_create(&th->id[th->n], NULL, fn, arg) != 0) {
        fprintf(stderr, "warren-perf: cannot start %s thread\n", kind);
        return -1;
    }
    snprintf(th->name[th->n], sizeof th->name[0], "%s %u", kind, i);
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
                               o->manual_ack, o->ack_every};
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
        /* direct: producer i publishes to queue i % Q; topic: every producer
         * cycles all keys, each from its own starting point */
        int direct = strcmp(o->exchange_type, "direct") == 0;
        unsigned n_keys = direct ? 1 : run->topo.n_keys;
        const char *keys[MAX_TOPIC_KEYS];
        for (unsigned k = 0; k < n_keys; k++)
            keys[k] = run->topo.key[(i + k) % run->topo.n_keys];
        producer_config cfg = {c->fd, c->frame_max, run->topo.exchange, keys, n_keys,
                               o->size, o->persistent, o->batch, o->rate, o->confirm};
        run->prod[i] = producer_new(&cfg, &run->shared);
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
    printf("\n  run id %s; warm-up %.1f s, measured %.1f s\n", t->run_id, o->warmup,
           o->duration);
    fflush(stdout);
}

static int run_throughput(const perf_options *o)
{
    perf_run run = {.o = o};
    perf_result r = {0};
    perf_snapshot *snap = calloc(2, sizeof *snap);
    int topic = strcmp(o->exchange_type, "topic") == 0;
    unsigned n_bindings = topic ? (o->bindings > o->queues ? o->bindings : o->queues) : 0;
    shared_init(&run.shared, o);
    run.pconn = calloc(o->producers, sizeof *run.pconn);
    run.cconn = calloc(o->consumers, sizeof *run.cconn);
    run.prod = calloc(o->producers, sizeof *run.prod);
    run.cons = calloc(o->consumers, sizeof *run.cons);
    int rc = !snap || !run.pconn || !run.cconn || !run.prod || !run.cons ||
             topology_names(&run.topo, o->queues) != 0 ||
             topology_keys(&run.topo, o, n_bindings) != 0;
    if (!rc) {
        print_plan(o, &run.topo);
        rc = conn_open(&run.ctl) != 0 || topology_declare(&run.topo, &run.ctl, o, n_bindings) != 0;
    }
    if (!rc && topic)
        r.bind_rate = n_bindings / (run.topo.bind_seconds > 0 ? run.topo.bind_seconds : 1e-9);
    if (!rc)
        rc = start_consumers(&run) != 0 || start_producers(&run) != 0;
    if (!rc)
        rc = measure(&run.shared, &run.threads, o, &snap[0], &snap[1]) != 0;
    r.errors = stop_workers(&run) + rc;
    stats_hist *lat = stats_hist_new();
    for (unsigned i = 0; lat && i < run.n_cons; i++)
        stats_hist_merge(lat, consumer_latency(run.cons[i]));
    if (run.threads.n && snap)
        result_compute(&r, &run.threads, &snap[0], &snap[1], lat, o->broker_pid);
    result_print(&r, o);
    stats_hist_free(lat);
    topology_delete(&run.topo, &run.ctl);
    conn_close(&run.ctl);
    run_free(&run);
    free(snap);
    return r.errors ? 1 : 0;
}
