/* worker -- producer and consumer threads (see worker.h).
 *
 * Producer: at setup every publish (method + header + body frames) is encoded
 * once into a ring of n_msgs messages, n_msgs a multiple of the batch size K;
 * batch j is the contiguous bytes of messages [jK, jK+K), so one send() puts K
 * publishes on the wire. Per batch the only work is: pace (fixed rate), wait
 * for the in-flight cap, wait for confirms, stamp CLOCK_MONOTONIC into the
 * first 8 body bytes of each message, send(). With a count, the last batch
 * may be short (the head of a ring batch); the producer then reads until
 * every confirm is in and reports itself done.
 *
 * Consumer: recv() into a 1 MiB buffer, walk whole frames in place, keep the
 * partial tail for the next read. A delivery is method -> header -> body
 * frames; it is counted when its last body byte arrives. Latency is the time
 * of the recv() that brought the first body frame minus the stamped time.
 * Manual acks (multiple) cover the last delivery read whole, and a consumer
 * acks what it read before it stops, so a drain leaves nothing unacked.
 *
 * Confirms: tags 1..published; pending[] is a ring (power of two, at least
 * twice the window) holding each unconfirmed tag's send time (0 once
 * confirmed), lowest is the oldest unconfirmed tag. Invariant: published -
 * lowest < ring size, so two unconfirmed tags never share a slot; the
 * producer waits to keep it. Confirm latency is the time of the recv() that
 * brought the ack minus the send time; a paced producer waits for its next
 * slot in ppoll() on its socket, so acks are read as they arrive, not when
 * the window fills.
 *
 * In-flight cap: producers wait on a futex (wake_seq) while the cap is
 * reached; consumers bump received once per read and wake them when in-flight
 * has fallen to wake_below. waiters is announced before the re-check, and
 * received is published before waiters is read, so no wakeup is lost (both
 * seq_cst); the wait also times out every 10 ms to see stop. */
#include "worker.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "wire.h"

#define MS 1000000ull
#define CONSUMER_BUF (1u << 20)
#define MAX_RING_BYTES (64u << 20)
#define STOP_GRACE_NS (1000 * MS)

struct producer {
    producer_config cfg;
    worker_shared *shared;
    uint8_t *ring;
    size_t *msg_off; /* n_msgs + 1 offsets into ring */
    size_t *ts_off;  /* offset of each message's first body byte */
    size_t n_msgs;
    uint64_t published;
    uint64_t lowest_unconfirmed;
    uint64_t outstanding;
    uint64_t *pending;     /* send time (ns) of an unconfirmed tag, 0 when confirmed */
    uint64_t pending_size; /* power of two */
    uint64_t read_ns;      /* when the bytes being handled arrived */
    stats_hist *confirm_latency;
    uint8_t *rbuf;
    size_t rcap, rlen;
    char error[256];
};

enum { EXPECT_METHOD, EXPECT_HEADER, EXPECT_BODY };

struct consumer {
    consumer_config cfg;
    worker_shared *shared;
    stats_hist *latency;
    uint8_t *buf;
    size_t have;
    int state;
    int first_body;
    uint64_t body_left;
    uint64_t last_tag; /* of the delivery being read */
    uint64_t done_tag; /* of the last delivery read whole: what acks cover */
    uint64_t unacked;
    uint64_t read_ns;
    int measuring;
    char error[256];
};

static void set_error(char *dst, _Atomic int *failed, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, 256, fmt, ap);
    va_end(ap);
    atomic_store(failed, 1);
}

static int stopping(const worker_shared *sh)
{
    return atomic_load_explicit(&sh->stop, memory_order_relaxed);
}

static int would_block(int err)
{
    return err == EAGAIN || err == EWOULDBLOCK || err == EINTR;
}

/* Writes all of buf. Send timeouts (SO_SNDTIMEO) are retried until
 * deadline_ns; once *stop is seen the deadline shrinks to a short grace so a
 * flow-controlled producer still ends. */
static int write_full(int fd, const uint8_t *buf, size_t len, uint64_t deadline_ns,
                      const _Atomic int *stop)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && !would_block(errno))
            return -1;
        uint64_t now = stats_now_ns();
        if (stop && atomic_load(stop) && deadline_ns > now + STOP_GRACE_NS)
            deadline_ns = now + STOP_GRACE_NS;
        if (now >= deadline_ns)
            return -1;
    }
    return 0;
}

int worker_write_all(int fd, const void *buf, size_t len, uint64_t deadline_ns)
{
    return write_full(fd, buf, len, deadline_ns, NULL);
}

static size_t round_up(size_t n, size_t k) { return (n + k - 1) / k * k; }

static int producer_encode_ring(producer *p)
{
    const producer_config *c = &p->cfg;
    size_t chunk = c->frame_max > 4096 ? c->frame_max - WIRE_FRAME_OVERHEAD : 4088;
    size_t per_msg = 600 + c->body_size + (c->body_size / chunk + 1) * WIRE_FRAME_OVERHEAD;
    size_t keys = c->n_keys;
    while (keys > 1 && round_up(keys, c->batch) * per_msg > MAX_RING_BYTES)
        keys /= 2;
    p->n_msgs = round_up(keys, c->batch);
    size_t cap = p->n_msgs * per_msg;
    if (cap / per_msg != p->n_msgs || cap > 4 * (size_t)MAX_RING_BYTES) {
        fprintf(stderr, "warren-perf: batch * size too large\n");
        return -1;
    }
    p->ring = malloc(cap);
    p->msg_off = calloc(p->n_msgs + 1, sizeof(size_t));
    p->ts_off = calloc(p->n_msgs, sizeof(size_t));
    if (!p->ring || !p->msg_off || !p->ts_off)
        return -1;
    size_t len = 0;
    for (size_t i = 0; i < p->n_msgs; i++) {
        size_t body_off = 0;
        size_t n = wire_encode_publish(p->ring + len, cap - len, 1, c->exchange,
                                       c->routing_keys[i % keys], c->body_size,
                                       c->persistent, c->filter_value, c->frame_max,
                                       &body_off);
        if (n == 0) {
            fprintf(stderr, "warren-perf: cannot encode publish (name > 255?)\n");
            return -1;
        }
        p->msg_off[i] = len;
        p->ts_off[i] = len + body_off;
        len += n;
    }
    p->msg_off[p->n_msgs] = len;
    return 0;
}

producer *producer_new(const producer_config *cfg, worker_shared *shared)
{
    producer *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->cfg = *cfg;
    p->shared = shared;
    if (p->cfg.batch == 0)
        p->cfg.batch = 1;
    p->lowest_unconfirmed = 1;
    p->pending_size = 1;
    while (p->pending_size < 2 * (uint64_t)cfg->confirm_window)
        p->pending_size <<= 1;
    p->pending = calloc(p->pending_size, sizeof *p->pending);
    p->rcap = cfg->frame_max + 64 > 65536 ? cfg->frame_max + 64 : 65536;
    p->rbuf = malloc(p->rcap);
    p->confirm_latency = stats_hist_new();
    if (!p->pending || !p->rbuf || !p->confirm_latency || producer_encode_ring(p) != 0) {
        producer_free(p);
        return NULL;
    }
    return p;
}

void producer_free(producer *p)
{
    if (!p)
        return;
    free(p->ring);
    free(p->msg_off);
    free(p->ts_off);
    free(p->pending);
    free(p->rbuf);
    stats_hist_free(p->confirm_latency);
    free(p);
}

const char *producer_error(const producer *p) { return p->error; }

const stats_hist *producer_confirm_latency(const producer *p) { return p->confirm_latency; }

static void confirm_tag(producer *p, uint64_t tag, int measuring)
{
    uint64_t *slot = &p->pending[tag & (p->pending_size - 1)];
    if (*slot) {
        if (measuring)
            stats_hist_record(p->confirm_latency, p->read_ns - *slot);
        *slot = 0;
        p->outstanding--;
    }
}

static void on_confirm(producer *p, uint64_t tag, int multiple, int nack)
{
    uint64_t before = p->outstanding;
    int measuring = !nack && atomic_load_explicit(&p->shared->measuring, memory_order_relaxed);
    if (tag > p->published)
        tag = p->published;
    if (multiple) {
        for (uint64_t t = p->lowest_unconfirmed; t <= tag; t++)
            confirm_tag(p, t, measuring);
    } else if (tag >= p->lowest_unconfirmed) {
        confirm_tag(p, tag, measuring);
    }
    while (p->lowest_unconfirmed <= p->published &&
           !p->pending[p->lowest_unconfirmed & (p->pending_size - 1)])
        p->lowest_unconfirmed++;
    atomic_fetch_add(nack ? &p->shared->nacked : &p->shared->confirmed,
                     before - p->outstanding);
}

/* Handles one frame the broker sent a producer. Returns 0, or -1 after
 * recording an error (the connection is then unusable). */
static int producer_frame(producer *p, const wire_frame *f)
{
    uint32_t id = wire_method_id(f);
    uint64_t tag;
    int multiple;
    char why[300];
    switch (id) {
    case WIRE_BASIC_ACK:
    case WIRE_BASIC_NACK:
        if (wire_parse_ack(f, &tag, &multiple) != WIRE_OK)
            break;
        on_confirm(p, tag, multiple, id == WIRE_BASIC_NACK);
        return 0;
    case WIRE_CONNECTION_CLOSE:
    case WIRE_CHANNEL_CLOSE: {
        wire_describe_close(f, why, sizeof why);
        uint8_t ok[16];
        size_t n = wire_encode_connection_close_ok(ok, sizeof ok);
        if (id == WIRE_CONNECTION_CLOSE)
            write_full(p->cfg.fd, ok, n, stats_now_ns() + 100 * MS, NULL);
        set_error(p->error, &p->shared->failed, "producer: broker closed %s: %s",
                  id == WIRE_CHANNEL_CLOSE ? "channel" : "connection", why);
        return -1;
    }
    case WIRE_CONNECTION_BLOCKED:
        fprintf(stderr, "warren-perf: producer blocked by broker (flow control)\n");
        return 0;
    default:
        return 0; /* returns, unblocked, heartbeats: nothing to do */
    }
    set_error(p->error, &p->shared->failed, "producer: malformed ack");
    return -1;
}

/* Reads what the broker sent (flags: 0 = wait up to SO_RCVTIMEO, or
 * MSG_DONTWAIT) and handles every whole frame. Returns 0 or -1 on error. */
static int producer_read(producer *p, int flags)
{
    ssize_t n = recv(p->cfg.fd, p->rbuf + p->rlen, p->rcap - p->rlen, flags);
    if (n < 0) {
        if (would_block(errno))
            return 0;
        set_error(p->error, &p->shared->failed, "producer: recv: %s", strerror(errno));
        return -1;
    }
    if (n == 0) {
        set_error(p->error, &p->shared->failed, "producer: broker closed the socket");
        return -1;
    }
    p->read_ns = stats_now_ns();
    p->rlen += (size_t)n;
    size_t off = 0;
    wire_frame f;
    wire_status st;
    while ((st = wire_next_frame(p->rbuf, p->rlen, &off, p->cfg.frame_max, &f)) == WIRE_OK)
        if (producer_frame(p, &f) != 0)
            return -1;
    if (st == WIRE_ERROR || (off == 0 && p->rlen == p->rcap)) {
        set_error(p->error, &p->shared->failed, "producer: malformed frame from broker");
        return -1;
    }
    memmove(p->rbuf, p->rbuf + off, p->rlen - off);
    p->rlen -= off;
    return 0;
}

static int64_t inflight_now(const worker_shared *sh)
{
    return (int64_t)(atomic_load(&sh->sent) * sh->route_factor) -
           (int64_t)atomic_load(&sh->received);
}

/* Waits until k more publishes keep in-flight within the cap. Returns 0, or
 * -1 when stopping. */
static int wait_inflight(producer *p, unsigned k)
{
    worker_shared *sh = p->shared;
    if (sh->inflight_cap == 0)
        return 0;
    int64_t limit = (int64_t)(sh->inflight_cap * sh->route_factor);
    int64_t need = (int64_t)(k * sh->route_factor);
    while (inflight_now(sh) + need > limit) {
        if (stopping(sh))
            return -1;
        uint32_t seq = atomic_load(&sh->wake_seq);
        atomic_fetch_add(&sh->waiters, 1);
        if (inflight_now(sh) + need > limit) {
            struct timespec ts = {0, 10 * (long)MS};
            syscall(SYS_futex, (uint32_t *)&sh->wake_seq, FUTEX_WAIT_PRIVATE, seq, &ts,
                    NULL, 0);
        }
        atomic_fetch_sub(&sh->waiters, 1);
    }
    return 0;
}

/* Waits until k more publishes fit the confirm window. Returns 0 or -1. */
static int wait_confirms(producer *p, unsigned k)
{
    while (p->outstanding + k > p->cfg.confirm_window ||
           p->published + k - p->lowest_unconfirmed >= p->pending_size) {
        if (stopping(p->shared) || producer_read(p, 0) != 0)
            return -1;
    }
    return 0;
}

/* Sleeps until the next batch is due at a fixed rate, reading confirms as
 * they arrive meanwhile (confirm mode). Returns 0 or -1. */
static int pace(producer *p, uint64_t *next, uint64_t period)
{
    uint64_t now = stats_now_ns();
    if (*next + 1000 * MS < now)
        *next = now; /* far behind (stalled broker): resume, don't burst */
    while (now < *next) {
        if (stopping(p->shared))
            return -1;
        uint64_t wait = *next - now > 100 * MS ? 100 * MS : *next - now;
        struct timespec ts = {(time_t)(wait / 1000000000ull), (long)(wait % 1000000000ull)};
        if (!p->cfg.confirm_window) {
            nanosleep(&ts, NULL);
        } else {
            struct pollfd pfd = {.fd = p->cfg.fd, .events = POLLIN};
            if (ppoll(&pfd, 1, &ts, NULL) > 0 && producer_read(p, MSG_DONTWAIT) != 0)
                return -1;
        }
        now = stats_now_ns();
    }
    *next += period;
    return 0;
}

static void stamp_batch(producer *p, size_t first, unsigned k, uint64_t now)
{
    if (p->cfg.body_size < 8)
        return;
    for (unsigned i = 0; i < k; i++)
        memcpy(p->ring + p->ts_off[first + i], &now, sizeof now);
}

/* Count mode, after the last publish: reads until every confirm is in.
 * Returns 0, or -1 when stopping or on error. */
static int await_all_confirms(producer *p)
{
    while (p->outstanding > 0)
        if (stopping(p->shared) || producer_read(p, 0) != 0)
            return -1;
    return 0;
}

/* Publishes in this turn: the batch size, or (count mode) what is left. */
static unsigned batch_now(const producer *p)
{
    uint64_t left = p->cfg.count - p->published;
    return p->cfg.count && left < p->cfg.batch ? (unsigned)left : p->cfg.batch;
}

void *producer_main(void *arg)
{
    producer *p = arg;
    worker_shared *sh = p->shared;
    size_t n_batches = p->n_msgs / p->cfg.batch, b = 0;
    uint64_t period = p->cfg.rate > 0 ? (uint64_t)(1e9 * p->cfg.batch / p->cfg.rate) : 0;
    uint64_t next = stats_now_ns(), last_poll = next;
    while (!stopping(sh) && (p->cfg.count == 0 || p->published < p->cfg.count)) {
        unsigned k = batch_now(p);
        if (period && pace(p, &next, period) != 0)
            break;
        if (wait_inflight(p, k) != 0)
            break;
        if (p->cfg.confirm_window && wait_confirms(p, k) != 0)
            break;
        uint64_t now = stats_now_ns();
        size_t first = b * p->cfg.batch; /* a short last batch sends its head */
        stamp_batch(p, first, k, now);
        for (unsigned i = 1; p->cfg.confirm_window && i <= k; i++) {
            p->pending[(p->published + i) & (p->pending_size - 1)] = now;
            p->outstanding++;
        }
        size_t off = p->msg_off[first];
        if (write_full(p->cfg.fd, p->ring + off, p->msg_off[first + k] - off, UINT64_MAX,
                       &sh->stop) != 0) {
            if (!stopping(sh))
                set_error(p->error, &sh->failed, "producer: send: %s", strerror(errno));
            return NULL;
        }
        p->published += k;
        atomic_fetch_add(&sh->sent, k);
        /* errors (channel.close) arrive unasked: look every 20 ms */
        if (now - last_poll > 20 * MS) {
            last_poll = now;
            if (producer_read(p, MSG_DONTWAIT) != 0)
                return NULL;
        }
        if (++b == n_batches)
            b = 0;
    }
    if (p->cfg.count && p->published == p->cfg.count && await_all_confirms(p) == 0) {
        atomic_fetch_add(&sh->producers_done, 1);
        /* stay (seeing any close) until stop: the last snapshot reads our CPU */
        while (!stopping(sh) && producer_read(p, 0) == 0)
            ;
    }
    return NULL;
}

consumer *consumer_new(const consumer_config *cfg, worker_shared *shared)
{
    consumer *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->cfg = *cfg;
    c->shared = shared;
    if (c->cfg.ack_every == 0)
        c->cfg.ack_every = 1;
    c->latency = stats_hist_new();
    c->buf = malloc(CONSUMER_BUF);
    if (!c->latency || !c->buf || cfg->frame_max + 64 > CONSUMER_BUF) {
        consumer_free(c);
        return NULL;
    }
    return c;
}

void consumer_free(consumer *c)
{
    if (!c)
        return;
    stats_hist_free(c->latency);
    free(c->buf);
    free(c);
}

const char *consumer_error(const consumer *c) { return c->error; }

const stats_hist *consumer_latency(const consumer *c) { return c->latency; }

static void message_done(consumer *c, uint64_t *done)
{
    c->state = EXPECT_METHOD;
    c->done_tag = c->last_tag;
    (*done)++;
    if (c->cfg.manual_ack)
        c->unacked++;
}

static int consumer_fail(consumer *c, const char *what)
{
    set_error(c->error, &c->shared->failed, "consumer on %s: %s",
              c->cfg.queue ? c->cfg.queue : "-", what);
    return -1;
}

static int consumer_method(consumer *c, const wire_frame *f)
{
    char why[300];
    switch (wire_method_id(f)) {
    case WIRE_BASIC_DELIVER:
        if (c->state != EXPECT_METHOD || wire_parse_deliver(f, &c->last_tag) != WIRE_OK)
            return consumer_fail(c, "unexpected or malformed basic.deliver");
        c->state = EXPECT_HEADER;
        return 0;
    case WIRE_BASIC_CONSUME_OK:
        atomic_fetch_add(&c->shared->consumers_ready, 1);
        return 0;
    case WIRE_BASIC_CANCEL:
        return consumer_fail(c, "consumer cancelled by the broker");
    case WIRE_CONNECTION_CLOSE:
    case WIRE_CHANNEL_CLOSE:
        wire_describe_close(f, why, sizeof why);
        return consumer_fail(c, why);
    default:
        return 0;
    }
}

static void record_latency(consumer *c, const wire_frame *f)
{
    uint64_t sent;
    memcpy(&sent, f->payload, sizeof sent);
    /* ignore anything not stamped by a producer of ours */
    if (sent <= c->read_ns && c->read_ns - sent < 3600ull * 1000 * MS)
        stats_hist_record(c->latency, c->read_ns - sent);
}

/* Handles one frame; counts finished deliveries in *done. Returns 0 or -1. */
static int consumer_frame(consumer *c, const wire_frame *f, uint64_t *done)
{
    uint64_t size;
    switch (f->type) {
    case WIRE_FRAME_METHOD:
        return consumer_method(c, f);
    case WIRE_FRAME_HEADER:
        if (c->state != EXPECT_HEADER || wire_parse_body_size(f, &size) != WIRE_OK)
            return consumer_fail(c, "unexpected or malformed content header");
        if (size == 0) {
            message_done(c, done);
            return 0;
        }
        c->body_left = size;
        c->first_body = 1;
        c->state = EXPECT_BODY;
        return 0;
    case WIRE_FRAME_BODY:
        if (c->state != EXPECT_BODY || f->size > c->body_left)
            return consumer_fail(c, "unexpected or oversized body frame");
        if (c->first_body && c->measuring && f->size >= 8)
            record_latency(c, f);
        c->first_body = 0;
        c->body_left -= f->size;
        if (c->body_left == 0)
            message_done(c, done);
        return 0;
    default:
        return 0; /* heartbeat */
    }
}

static int send_ack(consumer *c)
{
    uint8_t frame[32];
    size_t n = wire_encode_ack(frame, sizeof frame, 1, c->done_tag, 1);
    c->unacked = 0;
    if (write_full(c->cfg.fd, frame, n, UINT64_MAX, &c->shared->stop) != 0) {
        if (!stopping(c->shared))
            return consumer_fail(c, "send ack failed");
        return -1;
    }
    return 0;
}

static void wake_producers(worker_shared *sh)
{
    if (atomic_load(&sh->waiters) == 0 || inflight_now(sh) > (int64_t)sh->wake_below)
        return;
    atomic_fetch_add(&sh->wake_seq, 1);
    syscall(SYS_futex, (uint32_t *)&sh->wake_seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Parses every whole frame in the buffer and keeps the partial tail.
 * Returns the deliveries finished, or -1 on error. */
static int64_t consumer_parse(consumer *c)
{
    size_t off = 0;
    uint64_t done = 0;
    wire_frame f;
    wire_status st;
    while ((st = wire_next_frame(c->buf, c->have, &off, c->cfg.frame_max, &f)) == WIRE_OK)
        if (consumer_frame(c, &f, &done) != 0)
            return -1;
    if (st == WIRE_ERROR)
        return consumer_fail(c, "malformed frame from broker");
    memmove(c->buf, c->buf + off, c->have - off);
    c->have -= off;
    return (int64_t)done;
}

static int receive_limit_reached(worker_shared *sh)
{
    return sh->receive_limit && atomic_load_explicit(&sh->received, memory_order_relaxed) >=
                                    sh->receive_limit;
}

void *consumer_main(void *arg)
{
    consumer *c = arg;
    worker_shared *sh = c->shared;
    uint8_t frame[600];
    if (c->cfg.queue) {
        size_t n = wire_encode_consume(frame, sizeof frame, 1, c->cfg.queue, "",
                                       !c->cfg.manual_ack, c->cfg.args);
        if (n == 0 || write_full(c->cfg.fd, frame, n, stats_now_ns() + 5000 * MS, NULL)) {
            consumer_fail(c, "cannot send basic.consume");
            return NULL;
        }
    } else {
        atomic_fetch_add(&sh->consumers_ready, 1);
    }
    while (!stopping(sh) && !receive_limit_reached(sh)) {
        ssize_t n = recv(c->cfg.fd, c->buf + c->have, CONSUMER_BUF - c->have, 0);
        if (n <= 0) {
            if (n < 0 && would_block(errno)) {
                if (c->unacked && send_ack(c) != 0)
                    return NULL;
                continue; /* idle: acks flushed, stop flag re-read */
            }
            if (!stopping(sh))
                consumer_fail(c, n == 0 ? "broker closed the socket" : strerror(errno));
            return NULL;
        }
        c->have += (size_t)n;
        c->read_ns = stats_now_ns();
        c->measuring = atomic_load_explicit(&sh->measuring, memory_order_relaxed);
        int64_t done = consumer_parse(c);
        if (done < 0)
            return NULL;
        if (done > 0) {
            atomic_fetch_add(&sh->received, (uint64_t)done);
            atomic_store_explicit(&sh->last_delivery_ns, c->read_ns, memory_order_relaxed);
            wake_producers(sh);
        }
        if (c->unacked >= c->cfg.ack_every && send_ack(c) != 0)
            return NULL;
    }
    /* a drained queue stays empty: ack what was read before the close */
    if (c->unacked && !atomic_load(&sh->failed))
        send_ack(c);
    while (!stopping(sh)) { /* stay: the last snapshot reads our CPU */
        struct timespec ts = {0, 10 * (long)MS};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int worker_close_raw(int fd, uint32_t frame_max, unsigned timeout_ms)
{
    uint64_t deadline = stats_now_ns() + timeout_ms * MS;
    uint8_t out[64];
    size_t n = wire_encode_connection_close(out, sizeof out);
    struct timeval tv = {0, 50000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (write_full(fd, out, n, deadline, NULL) != 0)
        return -1;
    size_t cap = frame_max + 64 > 65536 ? frame_max + 64 : 65536, have = 0;
    uint8_t *buf = malloc(cap);
    int rc = -1;
    while (buf && rc != 0 && stats_now_ns() < deadline) {
        ssize_t got = recv(fd, buf + have, cap - have, 0);
        if (got == 0 || (got < 0 && !would_block(errno)))
            break;
        if (got < 0)
            continue;
        have += (size_t)got;
        size_t off = 0;
        wire_frame f;
        wire_status st = WIRE_MORE;
        while (rc != 0 && (st = wire_next_frame(buf, have, &off, 0, &f)) == WIRE_OK) {
            uint32_t id = wire_method_id(&f);
            if (id == WIRE_CONNECTION_CLOSE) {
                n = wire_encode_connection_close_ok(out, sizeof out);
                write_full(fd, out, n, deadline, NULL);
            }
            if (id == WIRE_CONNECTION_CLOSE || id == WIRE_CONNECTION_CLOSE_OK)
                rc = 0;
        }
        if (rc != 0 && (st == WIRE_ERROR || (off == 0 && have == cap)))
            break;
        memmove(buf, buf + off, have - off);
        have -= off;
    }
    free(buf);
    return rc;
}
