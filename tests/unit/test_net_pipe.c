/* The in-memory pipe through the generic transport: bytes both ways in
 * one loop, an end freed is an orderly end for the other (after what it
 * wrote), writes to a freed end fail, a full inbox holds the writer's
 * output back (pending) until the reader reads, and memory written by
 * reference is released when the reader drains it or when it is dropped. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "../../net/net.h"

/* What one end's handlers heard. */
typedef struct heard {
    int reads, closes, error;
    size_t drained; /* pending at the last on_drained */
} heard;

static void on_read(void *ctx) { ((heard *)ctx)->reads++; }
static void on_drained(void *ctx, size_t pending) { ((heard *)ctx)->drained = pending; }
static void on_closed(void *ctx, int error)
{
    heard *h = ctx;
    h->closes++;
    h->error = error;
}

static const transport_handlers handlers = {on_read, on_drained, on_closed};

typedef struct fixture {
    struct event_base *base;
    transport_flusher *fl;
    transport *end[2];
    heard heard[2];
} fixture;

static fixture *open_pair(size_t capacity)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_non_null(f->base = event_base_new());
    assert_non_null(f->fl = transport_flusher_new(f->base));
    assert_true(transport_pipe_pair(f->fl, f->base, capacity, f->end));
    for (int i = 0; i < 2; i++)
        transport_start(f->end[i], &handlers, &f->heard[i]);
    return f;
}

static void close_pair(fixture *f)
{
    for (int i = 0; i < 2; i++)
        transport_free(f->end[i]);
    transport_flusher_free(f->fl);
    event_base_free(f->base);
    free(f);
}

/* A few loop turns: enough for any exchange these tests make. */
static void run(fixture *f)
{
    for (int i = 0; i < 8; i++)
        event_base_loop(f->base, EVLOOP_NONBLOCK);
}

/* Takes what `t` has read; asserts it is `want`. */
static void expect_input(transport *t, const char *want)
{
    struct evbuffer *in = transport_input(t);
    size_t n = strlen(want);
    char got[64] = {0};
    assert_int_equal(evbuffer_get_length(in), n);
    evbuffer_remove(in, got, sizeof got - 1);
    assert_string_equal(got, want);
}

static void test_bytes_both_ways(void **state)
{
    (void)state;
    fixture *f = open_pair(0);
    transport_write(f->end[0], "ping", 4);
    event_base_loop(f->base, EVLOOP_NONBLOCK); /* one turn: flushed and read */
    assert_int_equal(f->heard[1].reads, 1);
    expect_input(f->end[1], "ping");
    transport_write(f->end[1], "pong!", 5);
    run(f);
    expect_input(f->end[0], "pong!");
    uint64_t io[4];
    transport_io_counts(f->end[0], io);
    assert_int_equal(io[0], 5); /* bytes read */
    assert_int_equal(io[1], 4); /* bytes written */
    assert_int_equal(io[2], 1);
    assert_int_equal(io[3], 1);
    struct sockaddr_storage ss;
    assert_false(transport_address(f->end[0], false, &ss));
    assert_int_equal(f->heard[0].closes + f->heard[1].closes, 0);
    close_pair(f);
}

/* What an end wrote before it was freed is read first, then the end. */
static void test_free_is_an_orderly_end(void **state)
{
    (void)state;
    fixture *f = open_pair(0);
    transport_pause_reading(f->end[1], true);
    transport_write(f->end[0], "last", 4);
    run(f);
    assert_int_equal(f->heard[0].drained, 0); /* in the peer's inbox */
    transport_free(f->end[0]);
    f->end[0] = NULL;
    run(f);
    assert_int_equal(f->heard[1].closes, 0); /* not reading: nothing seen */
    transport_pause_reading(f->end[1], false);
    run(f);
    expect_input(f->end[1], "last");
    assert_int_equal(f->heard[1].reads, 1);
    assert_int_equal(f->heard[1].closes, 1);
    assert_int_equal(f->heard[1].error, 0);
    close_pair(f);
}

static void test_write_to_a_freed_end_fails(void **state)
{
    (void)state;
    fixture *f = open_pair(0);
    transport_pause_reading(f->end[0], true); /* so the end is not read first */
    transport_free(f->end[1]);
    f->end[1] = NULL;
    transport_write(f->end[0], "lost", 4);
    run(f);
    assert_int_equal(f->heard[0].closes, 1);
    assert_int_equal(f->heard[0].error, EPIPE);
    assert_int_equal(transport_pending(f->end[0]), 0);
    close_pair(f);
}

/* A full inbox: output waits (pending) until the reader reads. */
static void test_pending_while_the_reader_is_full(void **state)
{
    (void)state;
    fixture *f = open_pair(4);
    transport_pause_reading(f->end[1], true);
    transport_write(f->end[0], "0123456789", 10);
    assert_int_equal(transport_pending(f->end[0]), 10);
    run(f);
    assert_int_equal(transport_pending(f->end[0]), 6);
    assert_int_equal(f->heard[0].drained, 6);
    transport_pause_reading(f->end[1], false);
    run(f);
    assert_int_equal(transport_pending(f->end[0]), 0);
    assert_int_equal(f->heard[0].drained, 0);
    expect_input(f->end[1], "0123456789");
    assert_true(f->heard[1].reads >= 3); /* 4 + 4 + 2 */
    close_pair(f);
}

static int released;
static void release(const void *data, size_t len, void *arg)
{
    (void)data, (void)len, (void)arg;
    released++;
}

/* Written by reference: released once the reader drains it (the bytes
 * moved, not copied), or when the output is dropped. */
static void test_write_reference_released(void **state)
{
    (void)state;
    static const char body[] = "by reference";
    fixture *f = open_pair(0);
    released = 0;
    transport_write(f->end[0], "<", 1);
    transport_write_reference(f->end[0], body, strlen(body), release, NULL);
    transport_write(f->end[0], ">", 1);
    run(f);
    assert_int_equal(released, 0);
    expect_input(f->end[1], "<by reference>");
    assert_int_equal(released, 1);

    transport_write_reference(f->end[0], body, strlen(body), release, NULL);
    transport_abort(f->end[0]);
    assert_int_equal(released, 2);
    transport_write_reference(f->end[0], body, strlen(body), release, NULL);
    transport_free(f->end[0]); /* unsent: dropped */
    f->end[0] = NULL;
    assert_int_equal(released, 3);
    close_pair(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_both_ways),
        cmocka_unit_test(test_free_is_an_orderly_end),
        cmocka_unit_test(test_write_to_a_freed_end_fails),
        cmocka_unit_test(test_pending_while_the_reader_is_full),
        cmocka_unit_test(test_write_reference_released),
    };
    return cmocka_run_group_tests_name("net_pipe", tests, NULL, NULL);
}
