/* net: the byte streams client connections run over -- TCP, an in-memory
 * pipe for tests, and later TLS -- each with an input and an output buffer
 * whose output is written once at the end of the loop turn.
 *
 * A transport is a generic part (transport.c: the buffers, the output
 * staging block, the end-of-turn flusher, the byte counts) over a table of
 * operations that moves the bytes (tcp.c, pipe.c). The table is called
 * once per read and once per write batch, never per frame. The transport's
 * owner hears about input, drained output and a vanished peer through its
 * handlers. The module logs nothing: errors reach the owner as errno
 * values. Everything runs on one event loop thread.
 */
#ifndef WARREN_NET_H
#define WARREN_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct evbuffer;
struct sockaddr;
struct sockaddr_storage;

typedef struct transport transport;
/* The end-of-turn writer shared by the transports of one loop. */
typedef struct transport_flusher transport_flusher;

/* What an implementation does; `impl` is its state. The generic part
 * calls watch_read and watch_write only when what it wants changes. */
typedef struct transport_ops {
    /* Moves the bytes that have arrived into `in`: how many, 0 when none
     * are there yet, -1 when the peer is gone, errno saying why (0 for an
     * orderly end, ENOMEM when there is no room for them). */
    ssize_t (*read)(void *impl, struct evbuffer *in);
    /* Sends what it can of `out` (TCP: one writev) and drains what went:
     * how many bytes, 0 when none could go now, -1 (errno set) when the
     * peer is gone. */
    ssize_t (*write)(void *impl, struct evbuffer *out);
    /* Whether to report readiness (transport_ready). */
    void (*watch_read)(void *impl, bool on);
    void (*watch_write)(void *impl, bool on);
    /* Bytes taken from `out` that are not on the wire yet (a TLS layer's
     * records); NULL for an implementation that never holds any. */
    size_t (*pending)(const void *impl);
    /* The peer's address, or ours when `local`; false when it has none. */
    bool (*address)(const void *impl, bool local, struct sockaddr_storage *out);
    /* Ends the stream (a socket is closed); impl's memory is the transport's. */
    void (*close)(void *impl);
} transport_ops;

typedef struct transport_handlers {
    void (*on_read)(void *ctx);                    /* new bytes in transport_input */
    void (*on_drained)(void *ctx, size_t pending); /* a write happened; bytes left */
    /* The peer is gone: `error` is 0 when it ended the stream, else an
     * errno (ENOMEM: no memory for its input). Output is dropped and
     * nothing more is read; the owner frees the transport. */
    void (*on_closed)(void *ctx, int error);
} transport_handlers;

/* NULL when out of memory. Free it after every transport that uses it. */
transport_flusher *transport_flusher_new(struct event_base *base);
void transport_flusher_free(transport_flusher *fl);

/* A transport with `impl_size` zeroed bytes for its implementation's state
 * in the same allocation (one per connection), at transport_impl(t);
 * ops->close releases what that state holds, not its memory. NULL when
 * out of memory. Nothing is read before transport_start. */
transport *transport_new(transport_flusher *fl, const transport_ops *ops, size_t impl_size);
void *transport_impl(transport *t);
/* The callback of an implementation's readiness events (libevent's), with
 * the transport as their argument: EV_READ reads, EV_WRITE writes. */
void transport_ready(int fd, short what, void *t);

/* A connected TCP socket, made non-blocking. Takes over fd (closed by
 * transport_free); NULL on failure, fd untouched. */
transport *transport_new_tcp(transport_flusher *fl, struct event_base *base, int fd);
/* Two connected in-memory ends: what one writes is the other's input in
 * the same loop, up to `capacity` bytes unread (0: no limit; past it the
 * writer's output waits as a full socket's does). Freeing one end is an
 * orderly end for the other. They have no address. False when out of
 * memory. */
bool transport_pipe_pair(transport_flusher *fl, struct event_base *base, size_t capacity,
                         transport *ends[2]);

/* Starts reading; from now on `h` hears about it with `ctx`. */
void transport_start(transport *t, const transport_handlers *h, void *ctx);
/* Closes it, dropping unsent output. */
void transport_free(transport *t);
struct evbuffer *transport_input(transport *t);
/* The peer's address, or ours when `local`; false when it has none. */
bool transport_address(const transport *t, bool local, struct sockaddr_storage *out);
/* Output. reserve: room for n contiguous bytes (NULL on OOM), valid until
 * the next output call; commit: n of them were written. write: copies.
 * write_reference: appends memory that stays owned by the caller until
 * cleanup runs (also when it is dropped). Each queues the end-of-turn
 * write. */
uint8_t *transport_reserve(transport *t, size_t n);
void transport_commit(transport *t, size_t n);
void transport_write(transport *t, const void *p, size_t n);
void transport_write_reference(transport *t, const void *p, size_t n,
                               void (*cleanup)(const void *data, size_t len, void *arg),
                               void *arg);
/* Queues the output for the end-of-turn write. */
void transport_flush_later(transport *t);
/* Output bytes not written yet. */
size_t transport_pending(const transport *t);
void transport_pause_reading(transport *t, bool paused);
/* Drops unsent output and stops reading (the peer is gone or too slow). */
void transport_abort(transport *t);
/* Bytes read, bytes written, reads and writes so far (statistics). */
void transport_io_counts(const transport *t, uint64_t out[4]);

#endif
