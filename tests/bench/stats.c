/* stats -- histogram and clocks (see stats.h).
 *
 * Log-linear buckets, as HdrHistogram: values below 2*SUB land in their own
 * bucket; above that, a value with highest set bit e is shifted right by
 * s = e - SUB_BITS so that its top SUB_BITS+1 bits (64..127) pick one of SUB
 * linear sub-buckets of the power-of-two range, at index s*SUB + mantissa.
 * The index is therefore continuous (127 -> 127, 128 -> 128) and the largest
 * one, for 2^63 <= v, is 57*64 + 127. */
#include "stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SUB_BITS 6
#define SUB (1u << SUB_BITS)
#define BUCKETS ((64 - SUB_BITS) * SUB + 2 * SUB)

struct stats_hist {
    uint64_t count;
    uint64_t max;
    uint64_t bucket[BUCKETS];
};

static unsigned bucket_of(uint64_t v)
{
    if (v < 2 * SUB)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = e - SUB_BITS;
    return shift * SUB + (unsigned)(v >> shift);
}

/* Middle of the range of values that map to bucket b. */
static uint64_t bucket_mid(unsigned b)
{
    if (b < 2 * SUB)
        return b;
    unsigned shift = b / SUB - 1;
    uint64_t mantissa = b % SUB + SUB;
    return (mantissa << shift) + ((1ull << shift) >> 1);
}

stats_hist *stats_hist_new(void) { return calloc(1, sizeof(stats_hist)); }

void stats_hist_free(stats_hist *h) { free(h); }

void stats_hist_record(stats_hist *h, uint64_t value)
{
    h->bucket[bucket_of(value)]++;
    h->count++;
    if (value > h->max)
        h->max = value;
}

void stats_hist_merge(stats_hist *into, const stats_hist *from)
{
    for (unsigned i = 0; i < BUCKETS; i++)
        into->bucket[i] += from->bucket[i];
    into->count += from->count;
    if (from->max > into->max)
        into->max = from->max;
}

uint64_t stats_hist_count(const stats_hist *h) { return h->count; }

uint64_t stats_hist_max(const stats_hist *h) { return h->max; }

uint64_t stats_hist_percentile(const stats_hist *h, double pct)
{
    if (h->count == 0)
        return 0;
    /* rank of the sample at pct, 1-based, rounded up */
    double want = pct / 100.0 * (double)h->count;
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want || rank == 0)
        rank++;
    uint64_t seen = 0;
    for (unsigned i = 0; i < BUCKETS; i++) {
        seen += h->bucket[i];
        if (seen >= rank) {
            uint64_t mid = bucket_mid(i);
            return mid > h->max ? h->max : mid;
        }
    }
    return h->max;
}

uint64_t stats_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t stats_thread_cpu_ns(pthread_t t)
{
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &cid) != 0 || clock_gettime(cid, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t stats_process_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t stats_thread_wait_ns(pid_t tid)
{
    char path[64];
    unsigned long long run_ns = 0, wait_ns = 0;
    if (tid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &run_ns, &wait_ns) != 2)
        wait_ns = 0;
    fclose(f);
    return wait_ns;
}
