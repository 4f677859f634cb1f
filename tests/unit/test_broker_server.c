/* Persistent errors in the server's callbacks, with the real server's loop
 * run in this process: without descriptors to spare, accept() failures are
 * counted and back off (the listener pauses) instead of being retried in a
 * busy loop, and the backlog is served once descriptors are back (the
 * test lowers its own soft RLIMIT_NOFILE to the descriptors already open);
 * without memory for a client's input, that connection is dropped; the
 * memory watermark set while running. */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_broker_start.h"
#include "test_broker_util.h"

static bool fcntl_ok(int fd) { return fcntl(fd, F_GETFD) != -1; }

/* The port of the server's listening socket (the one descriptor that
 * accepts); *highest_fd is the highest descriptor open. */
static int listener_port(int *highest_fd)
{
    int port = -1;
    *highest_fd = 0;
    for (int fd = 0; fd < 1024; fd++) {
        int on = 0;
        socklen_t len = sizeof on;
        struct sockaddr_in sa;
        socklen_t salen = sizeof sa;
        if (fcntl_ok(fd))
            *highest_fd = fd;
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on &&
            getsockname(fd, (struct sockaddr *)&sa, &salen) == 0 && sa.sin_family == AF_INET)
            port = ntohs(sa.sin_port);
    }
    return port;
}

static void run_loop_ms(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_base_loopexit(loop_base(admin_loop(srv)), &tv);
    event_base_dispatch(loop_base(admin_loop(srv)));
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

static void test_accept_pauses_while_out_of_descriptors(void **state)
{
    (void)state;
    int highest, clients[8];
    int port = listener_port(&highest);
    assert_true(port > 0);
    for (int i = 0; i < 8; i++) /* the kernel completes them into the backlog */
        clients[i] = connect_to(port);
    for (int i = 0; i < 8; i++)
        highest = clients[i] > highest ? clients[i] : highest;
    struct rlimit saved, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    low = saved;
    low.rlim_cur = (rlim_t)highest + 1;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int holes[1024], nholes = 0; /* fill the free numbers below the limit too */
    while (nholes < 1024 && (holes[nholes] = dup(clients[0])) >= 0)
        nholes++;
    assert_true(nholes < 1024);

    run_loop_ms(500);
    uint64_t errors = server_accept_errors(srv);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    while (nholes > 0)
        close(holes[--nholes]);
    /* a pause of 100 ms after each failure: a handful, not a busy loop */
    assert_true(errors >= 1);
    assert_true(errors <= 10);

    /* descriptors are back: the next retry accepts the backlog */
    run_loop_ms(300);
    assert_int_equal(server_accept_errors(srv), errors);
    static const uint8_t header[8] = {'A', 'M', 'Q', 'P', 0, 0, 9, 1};
    assert_int_equal(write(clients[0], header, sizeof header), (ssize_t)sizeof header);
    run_loop_ms(100);
    uint8_t reply[7];
    assert_int_equal(recv(clients[0], reply, sizeof reply, MSG_DONTWAIT), (ssize_t)sizeof reply);
    assert_int_equal(reply[0], AMQP_FRAME_METHOD); /* connection.start */
    for (int i = 0; i < 8; i++)
        close(clients[i]);
}

/* libevent's allocations go through these, so a test can refuse the large
 * ones (an input buffer's 128 KiB chain) as if memory had run out. */
static bool refuse_big;

static void *refusing_malloc(size_t n) { return refuse_big && n >= 65536 ? NULL : malloc(n); }
static void *refusing_realloc(void *p, size_t n)
{
    return refuse_big && n >= 65536 ? NULL : realloc(p, n);
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* No memory for a client's input: the connection is dropped, not retried
 * by a read callback that fires again at once, forever. */
static void test_no_memory_for_input_drops_the_connection(void **state)
{
    (void)state;
    int highest;
    int fd = connect_to(listener_port(&highest));
    run_loop_ms(50); /* accepted */
    static const uint8_t header[8] = {'A', 'M', 'Q', 'P', 0, 0, 9, 1};
    assert_int_equal(write(fd, header, sizeof header), (ssize_t)sizeof header);
    refuse_big = true;
    double t0 = cpu_seconds();
    run_loop_ms(300);
    double used = cpu_seconds() - t0;
    refuse_big = false;
    uint8_t b[16];
    ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
    /* closed, nothing sent (a reset: the header it could not read is unread) */
    assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
    assert_true(used < 0.1);
    close(fd);
}

/* The watermark set while running: the limits, the budget for bodies
 * still arriving and the configuration follow. */
static void test_watermark_at_runtime(void **state)
{
    (void)state;
    const config *cfg = server_config(srv);
    uint64_t floor = cfg->max_message_size + cfg->frame_max;
    admin_set_memory_watermark(srv, 0.4, 4 * floor);
    assert_int_equal(server_memory_limit(srv), 4 * floor);
    assert_int_equal(server_content_limit(srv), 2 * floor);
    assert_int_equal(cfg->memory_high_watermark_abs, 4 * floor);
    admin_set_memory_watermark(srv, 0.4, 100);
    assert_int_equal(server_content_limit(srv), floor); /* never below one message */
    admin_set_memory_watermark(srv, 0.25, 0);
    uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    assert_true(server_memory_limit(srv) >= ram / 4 - 4096 && server_memory_limit(srv) <= ram / 4);
    assert_int_equal(cfg->memory_high_watermark_abs, 0);
    assert_false(server_memory_alarm(srv));
}

int main(void)
{
    event_set_mem_functions(refusing_malloc, refusing_realloc, free);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_pauses_while_out_of_descriptors),
        cmocka_unit_test(test_no_memory_for_input_drops_the_connection),
        cmocka_unit_test(test_watermark_at_runtime),
    };
    return cmocka_run_group_tests_name("broker_server", tests, setup, teardown);
}
