/* In-memory pipes: two transports joined in one process, for tests and
 * fuzzers that drive a real connection without a socket.
 *
 * Each end has an inbox, the bytes its peer wrote that it has not read:
 * what a socket's receive buffer is to TCP. A write moves the writer's
 * output chains into the peer's inbox (no copy, so a write_reference's
 * cleanup runs when the reader drains them), up to `capacity` unread
 * bytes; a read moves the inbox into the input buffer. Readiness is
 * emulated with two descriptor-less events per end, activated by hand
 * whenever a socket's would be ready (level-triggered, as epoll is for
 * the TCP transport): an inbox that has bytes or an ended peer makes a
 * watching reader ready, room in the peer's inbox or its end a watching
 * writer. An end whose peer was freed reads an orderly end once its inbox
 * is empty, and fails writes with EPIPE.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdlib.h>

#include "net.h"

typedef struct pipe_end pipe_end;
struct pipe_end {
    pipe_end *peer; /* NULL once the other end is freed */
    struct evbuffer *inbox;
    struct event *rev, *wev;
    size_t capacity; /* of the inbox; 0: no limit */
    bool reading, writing;
};

static size_t room(const pipe_end *e)
{
    size_t unread = evbuffer_get_length(e->inbox);
    if (!e->capacity)
        return SIZE_MAX;
    return unread < e->capacity ? e->capacity - unread : 0;
}

static void poke_reader(pipe_end *e)
{
    if (e->reading && (evbuffer_get_length(e->inbox) || !e->peer))
        event_active(e->rev, EV_READ, 0);
}

static void poke_writer(pipe_end *e)
{
    if (e->writing && (!e->peer || room(e->peer)))
        event_active(e->wev, EV_WRITE, 0);
}

static ssize_t pipe_read(void *impl, struct evbuffer *in)
{
    pipe_end *e = impl;
    size_t n = evbuffer_get_length(e->inbox);
    if (n == 0) {
        errno = 0;
        return e->peer ? 0 : -1;
    }
    if (evbuffer_add_buffer(in, e->inbox) != 0) {
        errno = ENOMEM;
        return -1;
    }
    if (e->peer)
        poke_writer(e->peer);
    poke_reader(e); /* the end of an ended peer comes next */
    return (ssize_t)n;
}

static ssize_t pipe_write(void *impl, struct evbuffer *out)
{
    pipe_end *e = impl;
    if (!e->peer) {
        errno = EPIPE;
        return -1;
    }
    size_t n = evbuffer_get_length(out), free_room = room(e->peer);
    n = n < free_room ? n : free_room;
    if (n && evbuffer_remove_buffer(out, e->peer->inbox, n) != (int)n) {
        errno = ENOMEM;
        return -1;
    }
    poke_reader(e->peer);
    return (ssize_t)n;
}

static void pipe_watch_read(void *impl, bool on)
{
    pipe_end *e = impl;
    e->reading = on;
    if (on)
        poke_reader(e);
    else
        event_del(e->rev);
}

static void pipe_watch_write(void *impl, bool on)
{
    pipe_end *e = impl;
    e->writing = on;
    if (on)
        poke_writer(e);
    else
        event_del(e->wev);
}

static bool pipe_address(const void *impl, bool local, struct sockaddr_storage *out)
{
    (void)impl, (void)local, (void)out;
    return false;
}

static void pipe_close(void *impl)
{
    pipe_end *e = impl;
    if (e->peer) {
        e->peer->peer = NULL;
        poke_reader(e->peer);
        poke_writer(e->peer);
    }
    if (e->rev)
        event_free(e->rev);
    if (e->wev)
        event_free(e->wev);
    if (e->inbox)
        evbuffer_free(e->inbox);
}

static const transport_ops pipe_ops = {
    .read = pipe_read,
    .write = pipe_write,
    .watch_read = pipe_watch_read,
    .watch_write = pipe_watch_write,
    .address = pipe_address,
    .close = pipe_close,
};

static pipe_end *end_new(transport_flusher *fl, struct event_base *base, size_t capacity,
                         transport **t)
{
    if (!(*t = transport_new(fl, &pipe_ops, sizeof(pipe_end))))
        return NULL;
    pipe_end *e = transport_impl(*t);
    e->capacity = capacity;
    e->inbox = evbuffer_new();
    e->rev = event_new(base, -1, 0, transport_ready, *t);
    e->wev = event_new(base, -1, 0, transport_ready, *t);
    if (!e->inbox || !e->rev || !e->wev) {
        transport_free(*t);
        return NULL;
    }
    return e;
}

bool transport_pipe_pair(transport_flusher *fl, struct event_base *base, size_t capacity,
                         transport *ends[2])
{
    pipe_end *a = end_new(fl, base, capacity, &ends[0]);
    pipe_end *b = a ? end_new(fl, base, capacity, &ends[1]) : NULL;
    if (!b) {
        if (a)
            transport_free(ends[0]);
        return false;
    }
    a->peer = b;
    b->peer = a;
    return true;
}
