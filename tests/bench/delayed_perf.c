/* delayed-perf: the client of tests/bench/delayed.sh (rabbitmq-c).
 *
 *   delayed-perf setup   HOST PORT MODE SPREAD_MS LEVELS
 *   delayed-perf publish HOST PORT MODE N SPREAD_MS LEVELS SIZE
 *   delayed-perf consume HOST PORT N IDLE_S [WINDOW_FILE]
 *
 * MODE exchange: an x-delayed-message exchange bench.dx (x-delayed-type
 * direct, durable) bound to the durable queue bench.dq; each message has
 * x-delay, uniform in 1..SPREAD_MS. MODE ttl (RabbitMQ without the plugin):
 * per-message TTL and dead-lettering -- LEVELS durable queues bench.lvl.<i>
 * dead-letter into bench.out, bound to bench.dq; a delay is rounded up to
 * the next of LEVELS steps (a queue per step, as the emulation must: a
 * queue expires messages only at its head) and sent as the expiration of a
 * message to that step's queue. Messages are persistent, SIZE bytes, and
 * carry their id and deadline (the publisher's wall clock + the delay
 * asked for). publish uses confirms, 1000 in flight, and prints the rate.
 *
 * consume takes bench.dq (manual acks, prefetch 2000), reconnecting when
 * the broker goes away (a restart), until it has N distinct ids or nothing
 * came for IDLE_S seconds; it prints what it got, duplicates, and the
 * lateness (arrival - deadline) p50/p99/max in ms -- of all messages, and
 * when WINDOW_FILE (written meanwhile: "START_MS END_MS", wall clock) names
 * a restart, of those due before, during and after it. */
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die_on(amqp_rpc_reply_t r, const char *what)
{
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return;
    fprintf(stderr, "delayed-perf: %s failed (reply type %d)\n", what, r.reply_type);
    exit(1);
}

static amqp_connection_state_t open_conn(const char *host, int port, int quiet)
{
    amqp_connection_state_t c = amqp_new_connection();
    amqp_socket_t *s = amqp_tcp_socket_new(c);
    if (!s || amqp_socket_open(s, host, port) != AMQP_STATUS_OK) {
        if (!quiet)
            fprintf(stderr, "delayed-perf: cannot connect to %s:%d\n", host, port);
        amqp_destroy_connection(c);
        return NULL;
    }
    amqp_rpc_reply_t r = amqp_login(c, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest");
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        amqp_destroy_connection(c);
        return NULL;
    }
    amqp_channel_open(c, 1);
    if (amqp_get_rpc_reply(c).reply_type != AMQP_RESPONSE_NORMAL) {
        amqp_destroy_connection(c);
        return NULL;
    }
    return c;
}

static void close_conn(amqp_connection_state_t c)
{
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
}

static amqp_table_entry_t str_arg(const char *k, const char *v)
{
    amqp_table_entry_t e = {.key = amqp_cstring_bytes(k)};
    e.value.kind = AMQP_FIELD_KIND_UTF8;
    e.value.value.bytes = amqp_cstring_bytes(v);
    return e;
}

static void setup(const char *host, int port, const char *mode, int spread, int levels)
{
    amqp_connection_state_t c = open_conn(host, port, 0);
    if (!c)
        exit(1);
    amqp_queue_declare(c, 1, amqp_cstring_bytes("bench.dq"), 0, 1, 0, 0, amqp_empty_table);
    die_on(amqp_get_rpc_reply(c), "queue.declare bench.dq");
    const char *x = strcmp(mode, "ttl") == 0 ? "bench.out" : "bench.dx";
    if (strcmp(mode, "ttl") == 0) {
        amqp_exchange_declare(c, 1, amqp_cstring_bytes(x), amqp_cstring_bytes("direct"), 0, 1, 0,
                              0, amqp_empty_table);
        die_on(amqp_get_rpc_reply(c), "exchange.declare bench.out");
        for (int i = 1; i <= levels; i++) {
            char name[64];
            snprintf(name, sizeof name, "bench.lvl.%d", i);
            amqp_table_entry_t e[2] = {str_arg("x-dead-letter-exchange", x),
                                       str_arg("x-dead-letter-routing-key", "k")};
            amqp_table_t args = {2, e};
            amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 1, 0, 0, args);
            die_on(amqp_get_rpc_reply(c), "queue.declare level");
        }
    } else {
        amqp_table_entry_t e = str_arg("x-delayed-type", "direct");
        amqp_table_t args = {1, &e};
        amqp_exchange_declare(c, 1, amqp_cstring_bytes(x), amqp_cstring_bytes("x-delayed-message"),
                              0, 1, 0, 0, args);
        die_on(amqp_get_rpc_reply(c), "exchange.declare bench.dx");
    }
    amqp_queue_bind(c, 1, amqp_cstring_bytes("bench.dq"), amqp_cstring_bytes(x),
                    amqp_cstring_bytes("k"), amqp_empty_table);
    die_on(amqp_get_rpc_reply(c), "queue.bind");
    (void)spread;
    close_conn(c);
}

/* Reads frames until basic.ack covers `seq`. */
static void await_confirms(amqp_connection_state_t c, uint64_t seq)
{
    for (;;) {
        amqp_frame_t f;
        if (amqp_simple_wait_frame(c, &f) != AMQP_STATUS_OK) {
            fprintf(stderr, "delayed-perf: connection lost waiting for confirms\n");
            exit(1);
        }
        if (f.frame_type != AMQP_FRAME_METHOD)
            continue;
        if (f.payload.method.id == AMQP_BASIC_ACK_METHOD) {
            amqp_basic_ack_t *a = f.payload.method.decoded;
            if (a->delivery_tag >= seq)
                return;
        } else if (f.payload.method.id == AMQP_BASIC_NACK_METHOD) {
            fprintf(stderr, "delayed-perf: a publish was nacked\n");
            exit(1);
        } else if (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
            fprintf(stderr, "delayed-perf: channel closed by the broker\n");
            exit(1);
        }
    }
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void publish(const char *host, int port, const char *mode, long n, int spread, int levels,
                    int size)
{
    amqp_connection_state_t c = open_conn(host, port, 0);
    if (!c)
        exit(1);
    amqp_confirm_select(c, 1);
    die_on(amqp_get_rpc_reply(c), "confirm.select");
    int ttl = strcmp(mode, "ttl") == 0;
    int step = (spread + levels - 1) / levels;
    uint8_t *body = calloc(1, (size_t)(size < 16 ? 16 : size));
    double t0 = mono_s();
    uint64_t seq = 0;
    for (long i = 0; i < n; i++) {
        int delay = 1 + (int)(next_rand() % (uint64_t)spread);
        char rk[64], exp[32];
        amqp_basic_properties_t p = {0};
        amqp_table_entry_t h;
        p._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
        p.delivery_mode = 2;
        if (ttl) {
            int level = (delay + step - 1) / step;
            delay = level * step;
            snprintf(rk, sizeof rk, "bench.lvl.%d", level);
            snprintf(exp, sizeof exp, "%d", delay);
            p._flags |= AMQP_BASIC_EXPIRATION_FLAG;
            p.expiration = amqp_cstring_bytes(exp);
        } else {
            snprintf(rk, sizeof rk, "k");
            h.key = amqp_cstring_bytes("x-delay");
            h.value.kind = AMQP_FIELD_KIND_I32;
            h.value.value.i32 = delay;
            p._flags |= AMQP_BASIC_HEADERS_FLAG;
            p.headers = (amqp_table_t){1, &h};
        }
        int64_t id = i, deadline = wall_ms() + delay;
        memcpy(body, &id, 8);
        memcpy(body + 8, &deadline, 8);
        amqp_bytes_t b = {(size_t)(size < 16 ? 16 : size), body};
        if (amqp_basic_publish(c, 1, amqp_cstring_bytes(ttl ? "" : "bench.dx"),
                               amqp_cstring_bytes(rk), 0, 0, &p, b) != AMQP_STATUS_OK) {
            fprintf(stderr, "delayed-perf: publish failed\n");
            exit(1);
        }
        if (++seq % 1000 == 0 || i == n - 1)
            await_confirms(c, seq);
    }
    double t = mono_s() - t0;
    printf("published %ld in %.1f s: %.0f msg/s\n", n, t, (double)n / t);
    free(body);
    close_conn(c);
}

static int by_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static amqp_connection_state_t consumer(const char *host, int port)
{
    amqp_connection_state_t c = open_conn(host, port, 1);
    if (!c)
        return NULL;
    amqp_basic_qos(c, 1, 0, 2000, 0);
    amqp_basic_consume(c, 1, amqp_cstring_bytes("bench.dq"), amqp_empty_bytes, 0, 0, 0,
                       amqp_empty_table);
    if (amqp_get_rpc_reply(c).reply_type != AMQP_RESPONSE_NORMAL) {
        amqp_destroy_connection(c);
        return NULL;
    }
    return c;
}

static void report(const char *what, int *late, long got)
{
    if (!got)
        return;
    qsort(late, (size_t)got, sizeof *late, by_int);
    long early = 0;
    for (long i = 0; i < got; i++)
        early += late[i] < 0;
    printf("lateness ms%s: p50 %d  p99 %d  max %d  (early: %ld)\n", what, late[got / 2],
           late[(long)((double)got * 0.99)], late[got - 1], early);
}

/* Reads the restart window ("START_MS END_MS"); false without one. */
static bool read_window(const char *file, int64_t *a, int64_t *b)
{
    FILE *f = file ? fopen(file, "r") : NULL;
    long long x = 0, y = 0;
    bool ok = f && fscanf(f, "%lld %lld", &x, &y) == 2;
    if (f)
        fclose(f);
    *a = x, *b = y;
    return ok;
}

/* Copies into out[] the lateness of the messages due in [from, to]. */
static long due_within(const int *late, const int64_t *due, long got, int64_t from, int64_t to,
                       int *out)
{
    long kept = 0;
    for (long i = 0; i < got; i++)
        if (due[i] >= from && due[i] <= to)
            out[kept++] = late[i];
    return kept;
}

static void consume(const char *host, int port, long n, int idle_s, const char *window)
{
    uint8_t *seen = calloc((size_t)n / 8 + 1, 1);
    int *late = malloc((size_t)n * sizeof *late);
    int64_t *due = malloc((size_t)n * sizeof *due);
    long got = 0, dups = 0, reconnects = 0;
    double last = mono_s();
    amqp_connection_state_t c = NULL;
    while (got < n && mono_s() - last < idle_s) {
        if (!c && !(c = consumer(host, port))) {
            usleep(100000);
            continue;
        }
        amqp_envelope_t env;
        struct timeval tv = {1, 0};
        amqp_maybe_release_buffers(c);
        amqp_rpc_reply_t r = amqp_consume_message(c, &env, &tv, 0);
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            r.library_error == AMQP_STATUS_TIMEOUT)
            continue;
        if (r.reply_type != AMQP_RESPONSE_NORMAL) { /* the broker went away */
            amqp_destroy_connection(c);
            c = NULL;
            reconnects++;
            continue;
        }
        int64_t now = wall_ms(), id = -1, deadline = 0;
        if (env.message.body.len >= 16) {
            memcpy(&id, env.message.body.bytes, 8);
            memcpy(&deadline, (uint8_t *)env.message.body.bytes + 8, 8);
        }
        if (id >= 0 && id < n && !(seen[id / 8] & (1 << (id % 8)))) {
            seen[id / 8] |= (uint8_t)(1 << (id % 8));
            due[got] = deadline;
            late[got++] = (int)(now - deadline);
        } else {
            dups++;
        }
        if (got % 500 == 0 || got == n)
            amqp_basic_ack(c, 1, env.delivery_tag, 1);
        amqp_destroy_envelope(&env);
        last = mono_s();
    }
    if (c)
        close_conn(c);
    printf("received %ld of %ld (%ld lost), %ld duplicates, %ld reconnects\n", got, n, n - got,
           dups, reconnects);
    int *part = malloc((size_t)got * sizeof *part + 1);
    int64_t a, b;
    if (read_window(window, &a, &b)) {
        report(", due before the restart", part, due_within(late, due, got, INT64_MIN, a - 1, part));
        report(", due during it", part, due_within(late, due, got, a, b, part));
        report(", due after it", part, due_within(late, due, got, b + 1, INT64_MAX, part));
    }
    report("", late, got);
    free(part);
    free(seen);
    free(late);
    free(due);
}

int main(int argc, char **argv)
{
    if (argc >= 6 && strcmp(argv[1], "setup") == 0 && argc == 7)
        setup(argv[2], atoi(argv[3]), argv[4], atoi(argv[5]), atoi(argv[6]));
    else if (argc == 9 && strcmp(argv[1], "publish") == 0)
        publish(argv[2], atoi(argv[3]), argv[4], atol(argv[5]), atoi(argv[6]), atoi(argv[7]),
                atoi(argv[8]));
    else if ((argc == 6 || argc == 7) && strcmp(argv[1], "consume") == 0)
        consume(argv[2], atoi(argv[3]), atol(argv[4]), atoi(argv[5]), argc == 7 ? argv[6] : NULL);
    else {
        fprintf(stderr, "usage: delayed-perf setup HOST PORT MODE SPREAD_MS LEVELS\n"
                        "       delayed-perf publish HOST PORT MODE N SPREAD_MS LEVELS SIZE\n"
                        "       delayed-perf consume HOST PORT N IDLE_S [WINDOW_FILE]\n");
        return 2;
    }
    return 0;
}
