/* The loop: what belongs to one event loop thread -- its libevent base,
 * the cached clock, the end-of-turn flush list, the message pool, the
 * statistics counters, and its connections.
 *
 * Nothing here is shared between loops, so nothing here is locked. There
 * is one loop today (server_loop(s, 0)); code reaches its loop through the
 * object it works on (conn_loop, vhost_loop), never through a global, so a
 * second loop is a second loop_new.
 *
 * Connections: an array whose first nlisted entries passed connection.open
 * (the management API lists those); the rest are in the handshake or failed
 * it. Order is not kept: a removal fills the hole with the last entry.
 */
#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"

struct loop {
    struct event_base *base;
    transport_flusher *flusher;
    msg_pool *msgs;
    uint64_t now_ms;
    uint64_t activity;        /* bumped by each read, for the polling window */
    journal_seq journal_wait; /* highest sequence a confirm or commit waits for */
    uint64_t content_held;    /* unfinished message bodies of its connections */
    server_counts counts;
    spill *spill;      /* not owned */
    uint8_t *read_buf; /* loop_read_buffer's */
    size_t read_cap;
    conn **conns;
    size_t nconns, conns_cap, nlisted;
    void (*conn_closed)(void *ctx);
    void *conn_closed_ctx;
    uint64_t refused_logged_ms[REFUSALS]; /* loop_refused's last line of each kind */
    uint64_t refused_unlogged[REFUSALS];  /* refusals since then not logged */
};

uint64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

loop *loop_new(msg_ids *ids)
{
    loop *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->now_ms = monotonic_ms();
    l->base = event_base_new();
    /* Three priorities: everything runs at the default (1); background
     * work that must never delay clients (the management plane's turns)
     * takes 2, and runs only in loop turns with nothing else to do. */
    if (!l->base || event_base_priority_init(l->base, LOOP_PRIORITIES) != 0 ||
        !(l->flusher = transport_flusher_new(l->base)) || !(l->msgs = msg_pool_new(ids))) {
        loop_free(l);
        return NULL;
    }
    return l;
}

void loop_free(loop *l)
{
    if (!l)
        return;
    invariant(l->nconns == 0); /* the owner freed its connections first */
    msg_pool_free(l->msgs);
    transport_flusher_free(l->flusher);
    if (l->base)
        event_base_free(l->base);
    free(l->read_buf);
    free(l->conns);
    free(l);
}

struct event_base *loop_base(loop *l) { return l->base; }
transport_flusher *loop_flusher(loop *l) { return l->flusher; }
msg_pool *loop_msgs(loop *l) { return l->msgs; }
spill *loop_spill(loop *l) { return l->spill; }
void loop_set_spill(loop *l, spill *sp) { l->spill = sp; }
server_counts *loop_counters(loop *l) { return &l->counts; }
uint64_t loop_now_ms(const loop *l) { return l->now_ms; }
uint64_t loop_activity(const loop *l) { return l->activity; }

void loop_touch_clock(loop *l)
{
    l->now_ms = monotonic_ms();
    l->activity++;
}

void loop_journal_wait(loop *l, journal_seq seq)
{
    if (seq > l->journal_wait)
        l->journal_wait = seq;
}

journal_seq loop_journal_waited(const loop *l) { return l->journal_wait; }
uint64_t *loop_content_held(loop *l) { return &l->content_held; }

uint8_t *loop_read_buffer(loop *l, size_t want, size_t *cap)
{
    if (want > l->read_cap) {
        uint8_t *b = realloc(l->read_buf, want);
        if (b) {
            l->read_buf = b;
            l->read_cap = want;
        }
    }
    *cap = l->read_cap;
    return l->read_buf;
}

/* ---- connections -------------------------------------------------------- */

bool loop_conn_opened(loop *l, conn *c)
{
    if (l->nconns == l->conns_cap) {
        size_t cap = l->conns_cap ? l->conns_cap * 2 : 64;
        conn **n = realloc(l->conns, cap * sizeof *n);
        if (!n)
            return false;
        l->conns = n;
        l->conns_cap = cap;
    }
    l->conns[l->nconns++] = c;
    return true;
}

static size_t conn_index(const loop *l, const conn *c)
{
    size_t i = 0;
    while (i < l->nconns && l->conns[i] != c)
        i++;
    return i;
}

void loop_conn_listed(loop *l, conn *c)
{
    size_t i = conn_index(l, c);
    invariant(i < l->nconns && i >= l->nlisted);
    l->conns[i] = l->conns[l->nlisted];
    l->conns[l->nlisted++] = c;
}

void loop_conn_closed(loop *l, conn *c)
{
    l->counts.connections_closed++;
    size_t i = conn_index(l, c);
    invariant(i < l->nconns); /* every connection was opened here */
    if (i < l->nlisted) { /* the last listed one fills its slot */
        l->conns[i] = l->conns[--l->nlisted];
        i = l->nlisted;
    }
    l->conns[i] = l->conns[--l->nconns];
    if (l->conn_closed)
        l->conn_closed(l->conn_closed_ctx);
}

void loop_on_conn_closed(loop *l, void (*fn)(void *ctx), void *ctx)
{
    l->conn_closed = fn;
    l->conn_closed_ctx = ctx;
}

size_t loop_conn_count(const loop *l) { return l->nlisted; }
size_t loop_socket_count(const loop *l) { return l->nconns; }
conn *loop_conn_at(loop *l, size_t i) { return i < l->nconns ? l->conns[i] : NULL; }

void loop_refused(loop *l, refusal k, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    l->counts.refused[k]++;
    uint64_t now = loop_now_ms(l);
    if (l->refused_logged_ms[k] && now - l->refused_logged_ms[k] < 1000) {
        l->refused_unlogged[k]++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (l->refused_unlogged[k])
        log_msg(LOG_WARNING, "%s (and %llu more like it not logged)", line,
                (unsigned long long)l->refused_unlogged[k]);
    else
        log_msg(LOG_WARNING, "%s", line);
    l->refused_logged_ms[k] = now ? now : 1;
    l->refused_unlogged[k] = 0;
}
