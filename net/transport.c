/* Transports, the generic part: input and output buffers over an
 * implementation's operations (tcp.c, pipe.c).
 *
 * Reads: on readiness the implementation's read moves what arrived into the
 * input buffer, then the owner's on_read parses what is there. Writes:
 * frames are encoded straight into a staging block (64 KiB, malloc'd when a
 * turn first writes); a full block, or the last one at flush time, is
 * handed to the output evbuffer by reference, so output costs one malloc
 * per block rather than one evbuffer chain per frame. Output is only
 * appended to while the loop turn runs; the flusher, one event activated
 * when the first transport of a turn has output, then has each pending
 * transport's implementation write it (one writev for TCP). Readiness for
 * writing is watched only while output is left over, so a client that
 * keeps up costs nothing per turn but the write.
 *
 * States: started (reading unless paused) --peer gone--> closed (no
 * reading, output dropped, on_closed told once) --transport_free--> freed.
 */
#include <assert.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net_int.h"

#define BLOCK_SIZE (64 * 1024)

struct transport_flusher {
    struct event *ev;
    transport **pending; /* NULL entries are freed transports */
    size_t n, cap;
};

struct transport {
    const transport_ops *ops; /* the implementation's state follows (IMPL_OFFSET) */
    transport_flusher *fl;
    struct evbuffer *in, *out;
    const transport_handlers *h; /* NULL before transport_start */
    void *ctx;
    uint8_t *block; /* staging block, not yet in `out` */
    size_t block_used, block_cap;
    bool reading, writing, paused, flush_queued, closed;
    uint64_t io[4]; /* statistics: recv_oct, send_oct, recv_cnt, send_cnt */
};

/* The implementation's state: after the struct, aligned as malloc's. */
#define IMPL_OFFSET \
    ((sizeof(transport) + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1))

static void *impl_of(const transport *t) { return (char *)t + IMPL_OFFSET; }

static void write_now(transport *t);
static void seal(transport *t, bool keep);

static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    transport_flusher *fl = arg;
    /* on_drained may queue more transports: the array can grow meanwhile */
    for (size_t i = 0; i < fl->n; i++) {
        transport *t = fl->pending[i];
        if (!t)
            continue;
        t->flush_queued = false;
        write_now(t);
    }
    fl->n = 0;
}

transport_flusher *transport_flusher_new(struct event_base *base)
{
    transport_flusher *fl = calloc(1, sizeof *fl);
    if (fl && !(fl->ev = event_new(base, -1, 0, flush_cb, fl))) {
        free(fl);
        fl = NULL;
    }
    return fl;
}

void transport_flusher_free(transport_flusher *fl)
{
    if (!fl)
        return;
    event_free(fl->ev);
    free(fl->pending);
    free(fl);
}

void transport_flush_later(transport *t)
{
    transport_flusher *fl = t->fl;
    if (t->flush_queued || t->closed)
        return;
    if (fl->n == fl->cap) {
        size_t cap = fl->cap ? fl->cap * 2 : 64;
        transport **n = realloc(fl->pending, cap * sizeof *n);
        if (!n) {
            write_now(t); /* no room to defer: write at once */
            return;
        }
        fl->pending = n;
        fl->cap = cap;
    }
    fl->pending[fl->n++] = t;
    t->flush_queued = true;
    if (fl->n == 1)
        event_active(fl->ev, EV_WRITE, 0);
}

/* ---- reading ------------------------------------------------------------ */

static void update_reading(transport *t)
{
    bool want = t->h && !t->paused && !t->closed;
    if (want == t->reading)
        return;
    t->reading = want;
    t->ops->watch_read(impl_of(t), want);
}

static void watch_writing(transport *t, bool want)
{
    if (want == t->writing)
        return;
    t->writing = want;
    t->ops->watch_write(impl_of(t), want);
}

static void peer_gone(transport *t, int error)
{
    if (t->closed)
        return;
    t->closed = true;
    update_reading(t);
    watch_writing(t, false);
    seal(t, false);
    evbuffer_drain(t->out, evbuffer_get_length(t->out));
    if (t->h)
        t->h->on_closed(t->ctx, error);
}

static void read_now(transport *t)
{
    if (!t->reading)
        return;
    ssize_t n = t->ops->read(impl_of(t), t->in);
    if (n < 0) {
        peer_gone(t, errno);
        return;
    }
    if (n == 0)
        return;
    t->io[0] += (uint64_t)n, t->io[2]++;
    t->h->on_read(t->ctx);
}

/* ---- writing ------------------------------------------------------------ */

static void free_block(const void *data, size_t len, void *arg)
{
    (void)data, (void)len;
    free(arg);
}

/* Hands what the staging block holds to the output buffer: a well-filled
 * block by reference; a few bytes by copy, keeping the block for more when
 * `keep` (frame headers between bodies sent by reference). */
static void seal(transport *t, bool keep)
{
    if (!t->block)
        return;
    if (t->block_used * 4 < t->block_cap) {
        evbuffer_add(t->out, t->block, t->block_used);
        t->block_used = 0;
        if (keep)
            return;
        free(t->block);
    } else if (evbuffer_add_reference(t->out, t->block, t->block_used, free_block, t->block) !=
               0) {
        free(t->block);
    }
    t->block = NULL;
    t->block_used = t->block_cap = 0;
}

uint8_t *transport_reserve(transport *t, size_t n)
{
    if (t->block && t->block_cap - t->block_used >= n)
        return t->block + t->block_used;
    seal(t, false);
    size_t cap = n > BLOCK_SIZE ? n : BLOCK_SIZE;
    if (!(t->block = malloc(cap)))
        return NULL;
    t->block_cap = cap;
    return t->block;
}

void transport_commit(transport *t, size_t used)
{
    t->block_used += used;
    transport_flush_later(t);
}

void transport_write(transport *t, const void *p, size_t n)
{
    uint8_t *dst = transport_reserve(t, n);
    if (dst) {
        memcpy(dst, p, n);
        transport_commit(t, n);
    }
}

void transport_write_reference(transport *t, const void *p, size_t n,
                               void (*cleanup)(const void *data, size_t len, void *arg),
                               void *arg)
{
    seal(t, true);
    if (evbuffer_add_reference(t->out, p, n, cleanup, arg) != 0)
        cleanup(p, n, arg);
    transport_flush_later(t);
}

bool transport_sends_files(const transport *t) { return t->ops->sends_files; }

bool transport_write_file(transport *t, int fd, off_t offset, size_t len)
{
    if (!t->ops->sends_files)
        return false;
    int own = dup(fd); /* the segment outlives the caller's descriptor */
    struct evbuffer_file_segment *seg =
        own < 0 ? NULL : evbuffer_file_segment_new(own, offset, (ev_off_t)len, EVBUF_FS_CLOSE_ON_FREE);
    if (!seg) {
        if (own >= 0)
            close(own);
        return false;
    }
    seal(t, true);
    /* only written to the socket, never read back: what lets libevent
     * send file segments with sendfile instead of mapping them */
    evbuffer_set_flags(t->out, EVBUFFER_FLAG_DRAINS_TO_FD);
    int r = evbuffer_add_file_segment(t->out, seg, 0, (ev_off_t)len);
    evbuffer_file_segment_free(seg); /* the buffer holds its own reference */
    if (r != 0)
        return false;
    transport_flush_later(t);
    return true;
}

/* What the implementation holds past `out`: a call only for those that can. */
static size_t held(const transport *t)
{
    return t->ops->pending ? t->ops->pending(impl_of(t)) : 0;
}

static void write_now(transport *t)
{
    if (t->closed)
        return;
    seal(t, false);
    if (evbuffer_get_length(t->out) || held(t)) {
        ssize_t r = t->ops->write(impl_of(t), t->out);
        if (r < 0) {
            peer_gone(t, errno);
            return;
        }
        if (r > 0)
            t->io[1] += (uint64_t)r, t->io[3]++;
    }
    size_t pending = evbuffer_get_length(t->out) + held(t);
    watch_writing(t, pending > 0);
    if (t->h)
        t->h->on_drained(t->ctx, pending);
}

void transport_ready(int fd, short what, void *arg)
{
    (void)fd;
    if (what & EV_READ)
        read_now(arg);
    else
        write_now(arg);
}

/* ---- lifecycle ---------------------------------------------------------- */

transport *transport_new(transport_flusher *fl, const transport_ops *ops, size_t impl_size)
{
    transport *t = calloc(1, IMPL_OFFSET + impl_size);
    if (!t)
        return NULL;
    t->ops = ops;
    t->fl = fl;
    t->in = evbuffer_new();
    t->out = evbuffer_new();
    if (!t->in || !t->out) {
        if (t->in)
            evbuffer_free(t->in);
        if (t->out)
            evbuffer_free(t->out);
        free(t);
        return NULL;
    }
    return t;
}

void *transport_impl(transport *t) { return (char *)t + IMPL_OFFSET; }

void transport_start(transport *t, const transport_handlers *h, void *ctx)
{
    assert(!t->h); /* started once */
    t->h = h;
    t->ctx = ctx;
    update_reading(t);
}

void transport_free(transport *t)
{
    if (!t)
        return;
    if (t->flush_queued)
        for (size_t i = 0; i < t->fl->n; i++)
            if (t->fl->pending[i] == t)
                t->fl->pending[i] = NULL;
    t->ops->close(impl_of(t));
    evbuffer_free(t->in);
    evbuffer_free(t->out);
    free(t->block);
    free(t);
}

struct evbuffer *transport_input(transport *t) { return t->in; }

bool transport_address(const transport *t, bool local, struct sockaddr_storage *out)
{
    return t->ops->address(impl_of(t), local, out);
}

size_t transport_pending(const transport *t)
{
    return evbuffer_get_length(t->out) + t->block_used + held(t);
}

void transport_pause_reading(transport *t, bool paused)
{
    t->paused = paused;
    update_reading(t);
}

/* Drops unsent output and stops reading; the owner frees later. */
void transport_abort(transport *t)
{
    t->paused = true;
    update_reading(t);
    seal(t, false);
    evbuffer_drain(t->out, evbuffer_get_length(t->out));
}

void *transport_tls_session(const transport *t)
{
    return t->ops->tls_session ? t->ops->tls_session(impl_of(t)) : NULL;
}

bool transport_is_tls(const transport *t) { return t->ops->tls_session != NULL; }

void transport_io_counts(const transport *t, uint64_t out[4]) { memcpy(out, t->io, sizeof t->io); }
