/* stream-perf -- a load generator for RabbitMQ's stream protocol in the
 * shape of RabbitMQ's stream-perf-test, small and in C so that on a 2-core
 * machine the broker, not the tool, is what a figure measures.
 *
 * Publishers (one connection and thread each) declare a publisher with a
 * reference (deduplication on), and send Publish frames of --batch
 * messages, each an AMQP 1.0 message of one data section of --size bytes,
 * with increasing publishing ids, keeping at most --window unconfirmed.
 * Consumers subscribe from "first" (or --offset) with --credit chunks of
 * credit, give one credit back per chunk, and count the records of the
 * Deliver frames until --count records came.
 *
 * Output: one line RESULT key=value ... (published, confirmed, consumed
 * per second, bytes per second of the chunks delivered, seconds). Every run
 * ends by itself: sockets have timeouts and --duration bounds a run. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF (4u << 20)

static struct {
    const char *host, *stream, *vhost, *user, *pass;
    int port, publishers, consumers, batch, window, credit;
    size_t size;
    uint64_t count; /* per publisher, or per consumer */
    double duration;
    long offset; /* -1 first */
    int create;
} opt = {"127.0.0.1", "perf-stream", "/", "guest", "guest", 5552, 1, 0, 100, 10000, 10, 12,
         1000000, 600, -1, 1};

static _Atomic uint64_t published, confirmed, consumed, consumed_bytes;
static _Atomic int failed;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- encoding ----------------------------------------------------------- */

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
} wbuf;

static void put(wbuf *w, const void *src, size_t n)
{
    if (w->len + n > w->cap) {
        fprintf(stderr, "stream-perf: frame buffer too small\n");
        exit(2);
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}
static void u8(wbuf *w, uint8_t v) { put(w, &v, 1); }
static void u16(wbuf *w, uint16_t v) { v = htons(v); put(w, &v, 2); }
static void u32(wbuf *w, uint32_t v) { v = htonl(v); put(w, &v, 4); }
static void u64(wbuf *w, uint64_t v) { u32(w, (uint32_t)(v >> 32)); u32(w, (uint32_t)v); }
static void str(wbuf *w, const char *s) { u16(w, (uint16_t)strlen(s)); put(w, s, strlen(s)); }

static size_t begin(wbuf *w, uint16_t key, uint16_t version)
{
    size_t at = w->len;
    u32(w, 0);
    u16(w, key);
    u16(w, version);
    return at;
}
static void end(wbuf *w, size_t at)
{
    uint32_t n = htonl((uint32_t)(w->len - at - 4));
    memcpy(w->p + at, &n, 4);
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) << 32 | rd32(p + 4); }

/* ---- a connection ------------------------------------------------------- */

typedef struct conn {
    int fd;
    uint8_t *in;
    size_t have;
    wbuf out;
    uint32_t corr;
} conn;

static int send_all(conn *c)
{
    size_t off = 0;
    while (off < c->out.len) {
        ssize_t n = send(c->fd, c->out.p + off, c->out.len - off, MSG_NOSIGNAL);
        if (n <= 0)
            return -1;
        off += (size_t)n;
    }
    c->out.len = 0;
    return 0;
}

/* The next whole frame (its body: key onwards) into *f, *n; -1 on error. */
static int next_frame(conn *c, const uint8_t **f, uint32_t *n, size_t *consumed_len)
{
    for (;;) {
        if (c->have >= 4) {
            uint32_t size = rd32(c->in);
            if (size > BUF - 4)
                return -1;
            if (c->have >= 4 + size) {
                *f = c->in + 4;
                *n = size;
                *consumed_len = 4 + size;
                return 0;
            }
        }
        ssize_t r = recv(c->fd, c->in + c->have, BUF - c->have, 0);
        if (r <= 0)
            return -1;
        c->have += (size_t)r;
    }
}

static void drop_frame(conn *c, size_t len)
{
    memmove(c->in, c->in + len, c->have - len);
    c->have -= len;
}

/* Sends the frame in c->out and waits for the response to it (key |
 * 0x8000), passing over other frames; its response code (-1 on error). */
static int rpc(conn *c, uint16_t key)
{
    if (send_all(c))
        return -1;
    for (;;) {
        const uint8_t *f;
        uint32_t n;
        size_t len;
        if (next_frame(c, &f, &n, &len))
            return -1;
        uint16_t k = rd16(f);
        int code = (k == (key | 0x8000) && n >= 10) ? rd16(f + 8) : -1;
        drop_frame(c, len);
        if (k == (key | 0x8000))
            return code;
    }
}

/* The server's Tune after authentication, echoed before Open. */
static int await_tune(conn *c)
{
    const uint8_t *f;
    uint32_t n;
    size_t len;
    if (next_frame(c, &f, &n, &len) || rd16(f) != 0x0014 || n < 12)
        return -1;
    size_t at = begin(&c->out, 0x0014, 1);
    put(&c->out, f + 4, 8);
    end(&c->out, at);
    drop_frame(c, len);
    return send_all(c);
}

static int open_conn(conn *c)
{
    memset(c, 0, sizeof *c);
    c->in = malloc(BUF);
    c->out = (wbuf){malloc(BUF), 0, BUF};
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
    inet_pton(AF_INET, opt.host, &a.sin_addr);
    struct timeval tv = {30, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!c->in || !c->out.p || connect(c->fd, (struct sockaddr *)&a, sizeof a))
        return -1;
    wbuf *w = &c->out;
    size_t at = begin(w, 0x0011, 1); /* PeerProperties */
    u32(w, ++c->corr);
    u32(w, 1);
    str(w, "product");
    str(w, "stream-perf");
    end(w, at);
    if (rpc(c, 0x0011) != 1)
        return -1;
    at = begin(w, 0x0012, 1); /* SaslHandshake */
    u32(w, ++c->corr);
    end(w, at);
    if (rpc(c, 0x0012) != 1)
        return -1;
    at = begin(w, 0x0013, 1); /* SaslAuthenticate PLAIN */
    u32(w, ++c->corr);
    str(w, "PLAIN");
    char plain[600];
    int pl = snprintf(plain, sizeof plain, "%c%s%c%s", 0, opt.user, 0, opt.pass);
    u32(w, (uint32_t)pl);
    put(w, plain, (size_t)pl);
    end(w, at);
    if (rpc(c, 0x0013) != 1 || await_tune(c))
        return -1;
    at = begin(w, 0x0015, 1); /* Open */
    u32(w, ++c->corr);
    str(w, opt.vhost);
    end(w, at);
    return rpc(c, 0x0015) == 1 ? 0 : -1;
}

static void close_conn(conn *c)
{
    close(c->fd);
    free(c->in);
    free(c->out.p);
}

/* ---- publishers --------------------------------------------------------- */

static void *publisher(void *arg)
{
    int id = (int)(intptr_t)arg;
    conn c;
    if (open_conn(&c)) {
        fprintf(stderr, "stream-perf: publisher %d cannot connect\n", id);
        atomic_store(&failed, 1);
        return NULL;
    }
    wbuf *w = &c.out;
    char ref[64];
    snprintf(ref, sizeof ref, "stream-perf-%d-%ld", id, (long)getpid());
    size_t at = begin(w, 0x0001, 1); /* DeclarePublisher */
    u32(w, ++c.corr);
    u8(w, 0);
    str(w, ref);
    str(w, opt.stream);
    end(w, at);
    if (rpc(&c, 0x0001) != 1) {
        fprintf(stderr, "stream-perf: declare publisher refused\n");
        atomic_store(&failed, 1);
        close_conn(&c);
        return NULL;
    }
    /* one AMQP 1.0 data section of opt.size bytes */
    size_t msg_len = 5 + 4 + opt.size;
    uint8_t *msg = calloc(1, msg_len);
    memcpy(msg, "\x00\x53\x75\xb0", 4);
    uint32_t sz = htonl((uint32_t)opt.size);
    memcpy(msg + 4, &sz, 4);
    msg_len = 8 + opt.size;
    uint64_t next_id = 1, done = 0;
    double deadline = now_s() + opt.duration;
    while (done < opt.count && now_s() < deadline && !atomic_load(&failed)) {
        /* publish while the window allows, then read confirms */
        while (next_id - 1 - done < (uint64_t)opt.window && next_id <= opt.count &&
               w->len + (size_t)opt.batch * (12 + msg_len) + 16 < w->cap) {
            int k = (int)(opt.count - next_id + 1 < (uint64_t)opt.batch ? opt.count - next_id + 1
                                                                         : (uint64_t)opt.batch);
            at = begin(w, 0x0002, 1);
            u8(w, 0);
            u32(w, (uint32_t)k);
            for (int i = 0; i < k; i++) {
                u64(w, next_id++);
                u32(w, (uint32_t)msg_len);
                put(w, msg, msg_len);
            }
            end(w, at);
            atomic_fetch_add(&published, (uint64_t)k);
            if (w->len > (1u << 20))
                break;
        }
        if (w->len && send_all(&c))
            break;
        const uint8_t *f;
        uint32_t n;
        size_t len;
        if (next_frame(&c, &f, &n, &len))
            break;
        uint16_t key = rd16(f);
        if (key == 0x0003 && n >= 9) { /* PublishConfirm */
            uint32_t cnt = rd32(f + 5);
            done += cnt;
            atomic_fetch_add(&confirmed, cnt);
        } else if (key == 0x0004) {
            fprintf(stderr, "stream-perf: publish error\n");
            atomic_store(&failed, 1);
        } else if (key == 0x0017) {
            /* heartbeat: answer */
            size_t h = begin(w, 0x0017, 1);
            end(w, h);
        }
        drop_frame(&c, len);
    }
    free(msg);
    close_conn(&c);
    return NULL;
}

/* ---- consumers ---------------------------------------------------------- */

static void *consumer(void *arg)
{
    int id = (int)(intptr_t)arg;
    conn c;
    if (open_conn(&c)) {
        fprintf(stderr, "stream-perf: consumer %d cannot connect\n", id);
        atomic_store(&failed, 1);
        return NULL;
    }
    wbuf *w = &c.out;
    size_t at = begin(w, 0x0007, 1); /* Subscribe */
    u32(w, ++c.corr);
    u8(w, 0);
    str(w, opt.stream);
    if (opt.offset < 0) {
        u16(w, 1); /* first */
    } else {
        u16(w, 4);
        u64(w, (uint64_t)opt.offset);
    }
    u16(w, (uint16_t)opt.credit);
    u32(w, 0); /* no properties */
    end(w, at);
    if (rpc(&c, 0x0007) != 1) {
        fprintf(stderr, "stream-perf: subscribe refused\n");
        atomic_store(&failed, 1);
        close_conn(&c);
        return NULL;
    }
    uint64_t got = 0;
    double deadline = now_s() + opt.duration;
    while (got < opt.count && now_s() < deadline && !atomic_load(&failed)) {
        const uint8_t *f;
        uint32_t n;
        size_t len;
        if (next_frame(&c, &f, &n, &len))
            break;
        uint16_t key = rd16(f), version = rd16(f + 2);
        /* Deliver: key, version, subscription id, (v2: committed offset), chunk */
        size_t chunk = 5 + (version >= 2 ? 8 : 0);
        if (key == 0x0008 && n >= chunk + 52) {
            uint32_t records = rd32(f + chunk + 4);
            got += records;
            atomic_fetch_add(&consumed, records);
            atomic_fetch_add(&consumed_bytes, n);
            size_t cr = begin(w, 0x0009, 1); /* Credit 1 */
            u8(w, 0);
            u16(w, 1);
            end(w, cr);
            (void)rd64;
        } else if (key == 0x0017) {
            size_t h = begin(w, 0x0017, 1);
            end(w, h);
        }
        drop_frame(&c, len);
        if (w->len && send_all(&c))
            break;
    }
    close_conn(&c);
    return NULL;
}

static void create_stream(void)
{
    conn c;
    if (open_conn(&c)) {
        fprintf(stderr, "stream-perf: cannot connect to %s:%d\n", opt.host, opt.port);
        exit(1);
    }
    size_t at = begin(&c.out, 0x000d, 1); /* Create */
    u32(&c.out, ++c.corr);
    str(&c.out, opt.stream);
    u32(&c.out, 0);
    end(&c.out, at);
    int code = rpc(&c, 0x000d);
    if (code != 1 && code != 5) { /* ok, or stream_already_exists */
        fprintf(stderr, "stream-perf: create answered %d\n", code);
        exit(1);
    }
    close_conn(&c);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"host", 1, 0, 'h'}, {"port", 1, 0, 'p'}, {"stream", 1, 0, 's'},
        {"publishers", 1, 0, 'P'}, {"consumers", 1, 0, 'C'}, {"batch", 1, 0, 'b'},
        {"window", 1, 0, 'w'}, {"credit", 1, 0, 'c'}, {"size", 1, 0, 'z'},
        {"count", 1, 0, 'n'}, {"duration", 1, 0, 'd'}, {"offset", 1, 0, 'o'},
        {"no-create", 0, 0, 'N'}, {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'h': opt.host = optarg; break;
        case 'p': opt.port = atoi(optarg); break;
        case 's': opt.stream = optarg; break;
        case 'P': opt.publishers = atoi(optarg); break;
        case 'C': opt.consumers = atoi(optarg); break;
        case 'b': opt.batch = atoi(optarg); break;
        case 'w': opt.window = atoi(optarg); break;
        case 'c': opt.credit = atoi(optarg); break;
        case 'z': opt.size = (size_t)atol(optarg); break;
        case 'n': opt.count = strtoull(optarg, NULL, 10); break;
        case 'd': opt.duration = atof(optarg); break;
        case 'o': opt.offset = atol(optarg); break;
        case 'N': opt.create = 0; break;
        default:
            fprintf(stderr, "usage: stream-perf [--host H] [--port P] [--stream S] [--publishers N] "
                            "[--consumers N] [--batch B] [--window W] [--credit C] [--size BYTES] "
                            "[--count N] [--duration S] [--offset O] [--no-create]\n");
            return 2;
        }
    }
    alarm((unsigned)opt.duration + 60); /* a stuck run ends anyway */
    if (opt.create)
        create_stream();
    int n = opt.publishers + opt.consumers;
    pthread_t *t = calloc((size_t)n, sizeof *t);
    double t0 = now_s();
    for (int i = 0; i < opt.publishers; i++)
        pthread_create(&t[i], NULL, publisher, (void *)(intptr_t)i);
    for (int i = 0; i < opt.consumers; i++)
        pthread_create(&t[opt.publishers + i], NULL, consumer, (void *)(intptr_t)i);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    double s = now_s() - t0;
    printf("RESULT published=%llu confirmed=%llu consumed=%llu seconds=%.3f confirm_rate=%.0f "
           "consume_rate=%.0f consume_mb_s=%.1f errors=%d\n",
           (unsigned long long)published, (unsigned long long)confirmed,
           (unsigned long long)consumed, s, confirmed / s, consumed / s,
           consumed_bytes / s / 1e6, atomic_load(&failed));
    free(t);
    return atomic_load(&failed) ? 1 : 0;
}
