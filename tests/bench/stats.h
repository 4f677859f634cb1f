/* stats -- what warren-perf measures about itself and the broker: a
 * log-linear latency histogram (fixed size, no allocation per sample) and
 * clocks for wall time and per-thread / per-process CPU. */
#ifndef WARREN_PERF_STATS_H
#define WARREN_PERF_STATS_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct stats_hist stats_hist;

/* Returns a zeroed histogram owned by the caller (free with
 * stats_hist_free), or NULL when out of memory. Values are nanoseconds (any
 * unit works); each bucket is within 1/64 (1.6%) of the values it holds. */
stats_hist *stats_hist_new(void);
void stats_hist_free(stats_hist *h);

/* Counts one value. Not thread-safe: one histogram per thread, merged later. */
void stats_hist_record(stats_hist *h, uint64_t value);

/* Adds every count of from into into. */
void stats_hist_merge(stats_hist *into, const stats_hist *from);

uint64_t stats_hist_count(const stats_hist *h);

/* Returns the value at percentile pct (0..100] as the middle of its bucket,
 * or 0 if the histogram is empty. */
uint64_t stats_hist_percentile(const stats_hist *h, double pct);

/* Returns the largest value recorded exactly, or 0 if empty. */
uint64_t stats_hist_max(const stats_hist *h);

/* CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t stats_now_ns(void);

/* CPU time used so far by thread t / by the whole process, in ns. Returns 0
 * if the clock cannot be read. */
uint64_t stats_thread_cpu_ns(pthread_t t);
uint64_t stats_process_cpu_ns(void);

/* Time thread tid (of this process) spent runnable but waiting for a CPU,
 * in ns, from /proc/self/task/TID/schedstat. Returns 0 if unavailable. On
 * an oversubscribed machine a thread that got 70% of a core and waited 25%
 * wanted 95%: it was the bottleneck even though it never hit 90% CPU. */
uint64_t stats_thread_wait_ns(pid_t tid);

#endif
