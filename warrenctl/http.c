/* A small blocking HTTP/1.1 client over TCP or AF_UNIX: one request per
 * connection (Connection: close), every wait bounded by one deadline. The
 * socket is non-blocking and each connect, write and read waits in poll()
 * for at most the time left, so a broker that accepts and then hangs cannot
 * hold warrenctl past --timeout. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "wctl_internal.h"

#define MAX_RESPONSE (512u << 20) /* a definitions export of a very big broker fits */

long long wctl_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for `events`; false on timeout (errno ETIMEDOUT). */
static bool wait_fd(int fd, short events, long long deadline_ms)
{
    for (;;) {
        long long left = deadline_ms - wctl_now_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return false;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
        if (n > 0)
            return true;
        if (n < 0 && errno != EINTR)
            return false;
    }
}

/* Connects a non-blocking socket to addr; returns the fd or -1 with errno. */
static int connect_addr(int family, const struct sockaddr *addr, socklen_t alen,
                        long long deadline_ms)
{
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int rc;
    /* A Unix socket whose backlog is full says EAGAIN, not EINPROGRESS:
     * retry until the broker accepts or the deadline passes. */
    while ((rc = connect(fd, addr, alen)) < 0 && errno == EAGAIN && family == AF_UNIX &&
           wctl_now_ms() < deadline_ms)
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000000}, NULL);
    if (rc == 0)
        return fd;
    if (errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (!wait_fd(fd, POLLOUT, deadline_ms) || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) ||
        soerr) {
        int e = soerr ? soerr : errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int connect_target(const wctl_target *t, long long deadline_ms)
{
    if (t->is_unix) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(t->unix_path) >= sizeof sa.sun_path) {
            errno = ENAMETOOLONG;
            return -1;
        }
        strcpy(sa.sun_path, t->unix_path);
        return connect_addr(AF_UNIX, (struct sockaddr *)&sa, sizeof sa, deadline_ms);
    }
    char port[16];
    snprintf(port, sizeof port, "%d", t->port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(t->host, port, &hints, &res) != 0) {
        errno = EHOSTUNREACH;
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next)
        fd = connect_addr(a->ai_family, a->ai_addr, a->ai_addrlen, deadline_ms);
    int e = errno;
    freeaddrinfo(res);
    errno = e;
    return fd;
}

static wctl_net send_all(int fd, const char *p, size_t len, long long deadline_ms)
{
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_fd(fd, POLLOUT, deadline_ms))
                return errno == ETIMEDOUT ? WCTL_NET_TIMEOUT : WCTL_NET_IO;
        } else {
            return WCTL_NET_IO;
        }
    }
    return WCTL_NET_OK;
}

/* Reads until a whole response is parsed or the peer closes. */
static wctl_net read_response(int fd, long long deadline_ms, wctl_response *resp)
{
    wctl_buf in = {0};
    char chunk[65536];
    wctl_net st = WCTL_NET_PROTOCOL;
    for (;;) {
        ssize_t n = recv(fd, chunk, sizeof chunk, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_fd(fd, POLLIN, deadline_ms)) {
                st = errno == ETIMEDOUT ? WCTL_NET_TIMEOUT : WCTL_NET_IO;
                break;
            }
            continue;
        }
        if (n < 0) {
            st = in.len ? WCTL_NET_IO : WCTL_NET_CONNECT; /* reset before any answer */
            break;
        }
        if (n > 0)
            wctl_buf_append(&in, chunk, (size_t)n);
        if (in.len > MAX_RESPONSE)
            break;
        bool eof = n == 0;
        if (eof || wctl_http_may_be_complete(in.data, in.len)) {
            wctl_parse_status ps = wctl_http_parse(in.data, in.len, eof, resp);
            if (ps == WCTL_PARSE_DONE) {
                st = WCTL_NET_OK;
                break;
            }
            if (ps == WCTL_PARSE_ERROR || eof) {
                st = eof && in.len == 0 ? WCTL_NET_IO : WCTL_NET_PROTOCOL;
                break;
            }
        }
    }
    wctl_buf_free(&in);
    return st;
}

wctl_net wctl_http_roundtrip(const wctl_target *t, const char *request, size_t len,
                             long long deadline_ms, wctl_response *resp, int *sys_errno)
{
    memset(resp, 0, sizeof *resp);
    *sys_errno = 0;
    int fd = connect_target(t, deadline_ms);
    if (fd < 0) {
        *sys_errno = errno;
        return errno == ETIMEDOUT ? WCTL_NET_TIMEOUT : WCTL_NET_CONNECT;
    }
    wctl_net st = send_all(fd, request, len, deadline_ms);
    if (st == WCTL_NET_OK)
        st = read_response(fd, deadline_ms, resp);
    *sys_errno = st == WCTL_NET_OK ? 0 : errno;
    close(fd);
    return st;
}
