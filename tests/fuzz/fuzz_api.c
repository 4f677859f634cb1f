/* The management API end to end: a request to a real broker's HTTP
 * server (mgmt-ui/ on http/), through routing, authentication, body
 * parsing and the handler, and its reply. Most inputs come as the
 * control socket's administrator (every handler is reachable and no
 * input can lock the fuzzer out by deleting guest); some as guest over
 * TCP; some as raw bytes over TCP. A well-formed request
 * ("Connection: close") must be answered -- by its handler, not by the
 * frame's 500 "no reply" -- and its connection closed within 8 s (under
 * the 10 s a single input may take).
 *
 * Input: a byte -- bits 0-1: 0-1 control socket, 2 TCP as guest, 3 raw
 * bytes over TCP; bits 2-3: GET PUT POST DELETE -- then the path up to
 * '\n', then the body (or, raw, the whole request). FUZZ_LOG=1 shows the
 * broker's log and the replies. */
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "../../mgmt-ui/mgmt_int.h"
#include "fuzz_broker.h"

static server *srv;
static mgmt *api;

static void adjust(config *c)
{
    strcpy(c->mgmt_ip, "127.0.0.1");
    c->mgmt_port = 0;
    c->mgmt_port_set = true;
    strcpy(c->prometheus_ip, "127.0.0.1");
    c->prometheus_port = 0;
    c->prometheus_port_set = true;
    /* a raw request left incomplete is closed soon */
    c->mgmt_head_timeout_ms = c->mgmt_body_timeout_ms = c->mgmt_idle_timeout_ms = 200;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int connect_to(bool control)
{
    int fd;
    if (control) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s/warrenctl.sock", fuzz_broker_dir);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
        FUZZ_CHECK(fd >= 0);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS)
            FUZZ_CHECK(!"connect to the control socket");
    } else {
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)mgmt_port(api)),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        FUZZ_CHECK(fd >= 0);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS)
            FUZZ_CHECK(!"connect to the management port");
    }
    return fd;
}

/* The start of the last reply, NUL-terminated. */
static char reply[4096];
static size_t reply_len;

/* Sends req and reads until the server closes, running its loop; false
 * when it is still open after `ms`. */
static bool exchange(int fd, const char *req, size_t len, unsigned ms)
{
    reply_len = 0;
    reply[0] = 0;
    struct event_base *base = loop_base(admin_loop(srv));
    uint64_t end = now_ms() + ms;
    size_t sent = 0;
    char buf[65536];
    while (now_ms() < end) {
        if (sent < len) {
            ssize_t n = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n;
            else if (errno != EAGAIN && errno != EWOULDBLOCK)
                sent = len; /* the server closed early: fine */
        }
        event_base_loop(base, EVLOOP_NONBLOCK);
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n > 0 && getenv("FUZZ_LOG"))
            fprintf(stderr, "reply: %.*s\n", (int)(n < 200 ? n : 200), buf);
        if (n > 0 && reply_len < sizeof reply - 1) {
            size_t room = sizeof reply - 1 - reply_len;
            size_t k = (size_t)n < room ? (size_t)n : room;
            memcpy(reply + reply_len, buf, k);
            reply_len += k;
            reply[reply_len] = 0;
        }
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srv) {
        srv = fuzz_broker_start(adjust);
        api = mgmt_new(srv);
        FUZZ_CHECK(api);
    }
    static const char *const methods[] = {"GET", "PUT", "POST", "DELETE"};
    fuzz_in in = {data, size};
    uint8_t b = fuzz_byte(&in);
    int mode = b & 3;
    if (mode == 3) {
        int fd = connect_to(false);
        (void)exchange(fd, (const char *)in.p, in.len, 300);
        close(fd);
    } else {
        char *path = fuzz_str(&in, '\n');
        char *req = malloc(strlen(path) + in.len + 512);
        FUZZ_CHECK(req);
        int n = sprintf(req,
                        "%s %s HTTP/1.1\r\nHost: localhost\r\n%sContent-Type: application/json\r\n"
                        "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                        methods[b >> 2 & 3], path,
                        mode == 2 ? "Authorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n" : "", in.len);
        memcpy(req + n, in.p, in.len);
        int fd = connect_to(mode < 2);
        bool closed = exchange(fd, req, (size_t)n + in.len, 8000);
        close(fd);
        if (!closed)
            fprintf(stderr, "no whole reply in 8 s to: %s %s\n", methods[b >> 2 & 3], path);
        FUZZ_CHECK(closed);
        /* a handler that sent nothing is answered 500 "no reply" by the frame */
        if (strstr(reply, "\"no reply\""))
            fprintf(stderr, "no reply from the handler of: %s %s\n", methods[b >> 2 & 3], path);
        FUZZ_CHECK(!strstr(reply, "\"no reply\""));
        free(req);
        free(path);
    }
    /* the server sees the client go */
    for (int i = 0; i < 20; i++)
        event_base_loop(loop_base(admin_loop(srv)), EVLOOP_NONBLOCK);
    return 0;
}
