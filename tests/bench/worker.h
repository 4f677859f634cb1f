/* worker -- warren-perf's producer and consumer threads. Each owns one raw
 * AMQP connection (socket already past the handshake, channel open) and
 * drives it with wire.h only: producers write pre-encoded publish batches,
 * consumers parse deliveries out of a large read buffer and send hand-encoded
 * acks. They share a few atomic counters through worker_shared. */
#ifndef WARREN_PERF_WORKER_H
#define WARREN_PERF_WORKER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "stats.h"

/* Counters and flags shared by every worker of a run; zero-initialise, then
 * set the configuration fields before starting any thread. */
typedef struct worker_shared {
    _Atomic uint64_t sent;      /* messages fully written by producers */
    _Atomic uint64_t confirmed; /* basic.ack'd publishes (confirm mode) */
    _Atomic uint64_t nacked;
    _Atomic uint64_t received;  /* deliveries fully read by consumers */
    _Atomic int measuring;      /* consumers record latency while set */
    _Atomic int stop;           /* workers leave their loops when set */
    _Atomic int failed;         /* a worker hit a broker or socket error */
    _Atomic int consumers_ready;
    _Atomic int producers_done;  /* producers that published their count */
    _Atomic uint64_t last_delivery_ns; /* when a consumer last finished one */
    /* in-flight cap: producers wait while (sent * route_factor - received)
     * would exceed inflight_cap * route_factor; consumers wake them once it
     * falls to wake_below. inflight_cap 0 = no cap. */
    uint64_t inflight_cap;
    uint64_t route_factor;
    uint64_t wake_below;
    /* consumers stop reading (ack, then idle until stop) once received
     * reaches it; 0 = no limit */
    uint64_t receive_limit;
    _Atomic uint32_t wake_seq;
    _Atomic int waiters;
} worker_shared;

typedef struct producer_config {
    int fd;                 /* raw socket, channel 1 open */
    uint32_t frame_max;
    const char *exchange;
    const char *const *routing_keys; /* published round-robin */
    size_t n_keys;
    size_t body_size;
    int persistent;
    unsigned batch;         /* publishes per write() */
    double rate;            /* msgs/s for this producer; 0 = unlimited */
    unsigned confirm_window; /* 0 = no confirms (channel not in confirm mode) */
    uint64_t count;         /* publish exactly this many, wait for their
                             * confirms, then stop; 0 = until shared->stop */
    const char *filter_value; /* x-stream-filter-value header of each; NULL: none */
} producer_config;

typedef struct consumer_config {
    int fd;                 /* raw socket, channel 1 open, basic.qos done */
    uint32_t frame_max;
    const char *queue;      /* NULL: do not send basic.consume (self-test) */
    int manual_ack;
    unsigned ack_every;     /* manual: ack (multiple) once this many are due */
    const char *const *args; /* basic.consume's (longstr pairs, NULL-ended); NULL: none */
} consumer_config;

typedef struct producer producer;
typedef struct consumer consumer;

/* Returns a producer that will publish as cfg says, or NULL (with a message
 * on stderr) when the buffers cannot be built. Every publish is encoded here,
 * so cfg's strings and routing_keys array need not outlive the call; the fd
 * stays the caller's. */
producer *producer_new(const producer_config *cfg, worker_shared *shared);
void producer_free(producer *p);
/* Thread body: publishes until shared->stop (or, with cfg->count, until
 * that many are published and confirmed: then it bumps
 * shared->producers_done), then returns NULL. */
void *producer_main(void *arg);
/* Error text after the thread ended ("" if none). */
const char *producer_error(const producer *p);
/* Latency histogram (ns, publish to confirm) filled while measuring. */
const stats_hist *producer_confirm_latency(const producer *p);

consumer *consumer_new(const consumer_config *cfg, worker_shared *shared);
void consumer_free(consumer *c);
/* Thread body: reads deliveries until shared->stop or receive_limit; with
 * manual acks it acknowledges everything it read, then waits for stop. */
void *consumer_main(void *arg);
const char *consumer_error(const consumer *c);
/* Latency histogram (ns, publish to deliver) filled while measuring. */
const stats_hist *consumer_latency(const consumer *c);

/* Sends connection.close on a raw socket and waits (at most timeout_ms) for
 * close-ok, discarding anything else. Returns 0 on close-ok, -1 otherwise. */
int worker_close_raw(int fd, uint32_t frame_max, unsigned timeout_ms);

/* Writes all of buf, retrying on short writes and send timeouts until
 * deadline_ns (CLOCK_MONOTONIC). Returns 0, or -1 on error or deadline. */
int worker_write_all(int fd, const void *buf, size_t len, uint64_t deadline_ns);

#endif
