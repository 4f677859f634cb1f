/* TCP transports: a connected socket with a read and a write event.
 *
 * Reads: one readv into the input buffer per readiness event (no FIONREAD
 * ioctl, unlike evbuffer_read). Writes: evbuffer_write, one writev of the
 * whole output. The write event is added only while the socket is full
 * (transport.c asks for it), so a client that keeps up costs no epoll_ctl
 * per turn. Addresses are asked of the socket when wanted (at accept, for
 * the connection's name and loopback check), not kept.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "net_int.h"

#define READ_CHUNK (128 * 1024)

typedef struct tcp {
    int fd;
    struct event *rev, *wev;
} tcp;

static bool would_block(void) { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR; }

static ssize_t tcp_read(void *impl, struct evbuffer *in)
{
    tcp *k = impl;
    struct evbuffer_iovec v[2];
    int nv = evbuffer_reserve_space(in, READ_CHUNK, v, 2);
    if (nv < 1) {
        /* Returning 0 would leave the socket readable and the loop would
         * call us again at once, forever: the connection goes instead. */
        errno = ENOMEM;
        return -1;
    }
    struct iovec iov[2];
    for (int i = 0; i < nv; i++)
        iov[i] = (struct iovec){v[i].iov_base, v[i].iov_len};
    ssize_t n = readv(k->fd, iov, nv);
    if (n <= 0) {
        int error = n == 0 ? 0 : errno;
        evbuffer_commit_space(in, v, 0);
        errno = error;
        return n < 0 && would_block() ? 0 : -1;
    }
    size_t left = (size_t)n;
    for (int i = 0; i < nv; i++) {
        v[i].iov_len = left < v[i].iov_len ? left : v[i].iov_len;
        left -= v[i].iov_len;
    }
    evbuffer_commit_space(in, v, nv);
    return n;
}

static ssize_t tcp_write(void *impl, struct evbuffer *out)
{
    tcp *k = impl;
    int r = evbuffer_write(out, k->fd);
    return r < 0 && would_block() ? 0 : r;
}

static void watch(struct event *ev, bool on)
{
    if (on)
        event_add(ev, NULL);
    else
        event_del(ev);
}

static void tcp_watch_read(void *impl, bool on) { watch(((tcp *)impl)->rev, on); }
static void tcp_watch_write(void *impl, bool on) { watch(((tcp *)impl)->wev, on); }

bool net_socket_address(int fd, bool local, struct sockaddr_storage *out)
{
    socklen_t len = sizeof *out;
    int r = local ? getsockname(fd, (struct sockaddr *)out, &len)
                  : getpeername(fd, (struct sockaddr *)out, &len);
    return r == 0 && out->ss_family != AF_UNSPEC;
}

static bool tcp_address(const void *impl, bool local, struct sockaddr_storage *out)
{
    return net_socket_address(((const tcp *)impl)->fd, local, out);
}

void net_socket_close(struct event *rev, struct event *wev, int fd)
{
    if (rev)
        event_free(rev);
    if (wev)
        event_free(wev);
    if (fd >= 0)
        close(fd);
}

static void tcp_close(void *impl)
{
    tcp *k = impl;
    net_socket_close(k->rev, k->wev, k->fd);
}

static const transport_ops tcp_ops = {
    .read = tcp_read,
    .write = tcp_write,
    .watch_read = tcp_watch_read,
    .watch_write = tcp_watch_write,
    .address = tcp_address,
    .close = tcp_close,
    .sends_files = true, /* evbuffer_write sends file segments with sendfile */
};

transport *transport_new_tcp(transport_flusher *fl, struct event_base *base, int fd)
{
    transport *t = transport_new(fl, &tcp_ops, sizeof(tcp));
    if (!t)
        return NULL;
    tcp *k = transport_impl(t);
    k->fd = fd;
    k->rev = event_new(base, fd, EV_READ | EV_PERSIST, transport_ready, t);
    k->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, transport_ready, t);
    if (!k->rev || !k->wev) {
        k->fd = -1; /* the caller still owns fd on failure */
        transport_free(t);
        return NULL;
    }
    evutil_make_socket_nonblocking(fd);
    return t;
}
