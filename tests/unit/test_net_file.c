/* transport_write_file: over TCP (a socketpair here) the file's bytes go
 * out in order with what was written before and after them -- and the
 * caller's descriptor may be closed at once; the pipe cannot send files
 * (false: its owner sends the bytes itself). */
#include <event2/event.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../net/net.h"

static void on_read(void *ctx) { (void)ctx; }
static void on_drained(void *ctx, size_t pending) { *(size_t *)ctx = pending; }
static void on_closed(void *ctx, int error) { (void)ctx, (void)error; }
static const transport_handlers handlers = {on_read, on_drained, on_closed};

static void test_tcp_sends_file_segments_in_order(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    transport_flusher *fl = transport_flusher_new(base);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    transport *t = transport_new_tcp(fl, base, sv[0]);
    size_t pending = 1;
    transport_start(t, &handlers, &pending);
    assert_true(transport_sends_files(t));

    char path[] = "/tmp/warren-net-file-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(write(fd, "0123456789", 10), 10);
    transport_write(t, "head:", 5);
    assert_true(transport_write_file(t, fd, 2, 5));
    close(fd); /* the transport holds its own descriptor */
    transport_write(t, ":tail", 5);
    for (int turn = 0; turn < 100 && pending; turn++)
        event_base_loop(base, EVLOOP_NONBLOCK);
    assert_int_equal(pending, 0);
    char got[32] = "";
    size_t n = 0;
    while (n < 15) {
        ssize_t r = read(sv[1], got + n, sizeof got - 1 - n);
        assert_true(r > 0);
        n += (size_t)r;
    }
    assert_string_equal(got, "head:23456:tail");
    transport_free(t);
    close(sv[1]);
    transport_flusher_free(fl);
    event_base_free(base);
}

static void test_pipe_sends_no_files(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    transport_flusher *fl = transport_flusher_new(base);
    transport *ends[2];
    assert_true(transport_pipe_pair(fl, base, 0, ends));
    assert_false(transport_sends_files(ends[0]));
    assert_false(transport_write_file(ends[0], 0, 0, 1));
    transport_free(ends[0]);
    transport_free(ends[1]);
    transport_flusher_free(fl);
    event_base_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_sends_file_segments_in_order),
        cmocka_unit_test(test_pipe_sends_no_files),
    };
    return cmocka_run_group_tests_name("net_file", tests, NULL, NULL);
}
