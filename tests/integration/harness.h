/* Shared harness for Warren's C integration tests (rabbitmq-c + cmocka).
 *
 * It finds a broker (starts Warren on 127.0.0.1:0 in a fresh temp dir and
 * reads the port from its log, or uses WARREN_TEST_TARGET=host:port), opens
 * rabbitmq-c connections with bounded timeouts, names and cleans up test
 * queues/exchanges, and offers a tiny raw-socket client for exact bytes.
 * Every expectation was checked against RabbitMQ 3.10; Warren must match.
 *
 * Header-only: every function is static (each test binary links only
 * cmocka, rabbitmq-c and pthread). Usage in a test file:
 *
 *   static const struct CMUnitTest tests[] = { ITEST(test_x), ... };
 *   return cmocka_run_group_tests_name("area", tests, itest_group_setup, itest_group_teardown);
 */
#ifndef WARREN_ITEST_HARNESS_H
#define WARREN_ITEST_HARNESS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <regex.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#if defined(__has_include)
#if __has_include(<rabbitmq-c/amqp.h>)
#define ITEST_NEW_RABBITMQ_C_HEADERS 1
#endif
#endif
#ifdef ITEST_NEW_RABBITMQ_C_HEADERS
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/framing.h>
#include <rabbitmq-c/tcp_socket.h>
#else
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#endif

#define HARNESS_FN static __attribute__((unused))

/* Reply codes used by the tests (amqp-rabbitmq-0.9.1.json). */
enum {
    ITEST_NO_ROUTE = 312,
    ITEST_ACCESS_REFUSED = 403,
    ITEST_NOT_FOUND = 404,
    ITEST_RESOURCE_LOCKED = 405,
    ITEST_PRECONDITION_FAILED = 406,
    ITEST_FRAME_ERROR = 501,
    ITEST_COMMAND_INVALID = 503,
    ITEST_CHANNEL_ERROR = 504,
    ITEST_UNEXPECTED_FRAME = 505,
    ITEST_NOT_ALLOWED = 530,
    ITEST_NOT_IMPLEMENTED = 540,
};

#ifndef ITEST_TEST_TIMEOUT_S
#define ITEST_TEST_TIMEOUT_S 30   /* per test: a hung broker fails the test */
#endif
#define ITEST_RPC_TIMEOUT_S 10    /* per RPC through rabbitmq-c */
#define ITEST_START_TIMEOUT_MS 10000
#define ITEST_STOP_TIMEOUT_MS 10000
#define ITEST_MAX_CONNS 64
#define ITEST_MAX_NAMES 128

/* ------------------------------------------------------------------ broker */

typedef struct itest_broker {
    pid_t pid;            /* 0 when testing WARREN_TEST_TARGET */
    char root[256];       /* temp dir: data/ and warren.log */
    char host[64];
    int port;
    int stream_port;      /* its stream protocol listener (a free port too) */
} itest_broker;

static itest_broker itest_shared;

HARNESS_FN int itest_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

HARNESS_FN void itest_repo_path(char *out, size_t cap, const char *rel)
{
    /* The binary lives in <repo>/build/<variant>/tests/integration/. */
    char exe[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(out, cap, "%s", rel);
        return;
    }
    exe[n] = '\0';
    for (int up = 0; up < 5; up++) {
        char *slash = strrchr(exe, '/');
        if (slash == NULL)
            break;
        *slash = '\0';
    }
    if (snprintf(out, cap, "%s/%s", exe, rel) >= (int)cap)
        snprintf(out, cap, "%s", rel);
}

/* Scans the log for "AMQP listening on <ip>:<port>" (and the stream
 * listener, logged before it). 1 when found. */
HARNESS_FN int itest_scan_log(itest_broker *b, const char *log_path)
{
    char buf[65536];
    FILE *f = fopen(log_path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    regex_t re;
    regmatch_t m[3];
    int found = 0;
    if (regcomp(&re, "AMQP listening on ([0-9.]+):([0-9]+)", REG_EXTENDED) != 0)
        return 0;
    if (regexec(&re, buf, 3, m, 0) == 0) {
        int len = (int)(m[1].rm_eo - m[1].rm_so);
        snprintf(b->host, sizeof b->host, "%.*s", len, buf + m[1].rm_so);
        b->port = atoi(buf + m[2].rm_so);
        found = 1;
    }
    regfree(&re);
    if (found && regcomp(&re, "stream protocol listening on [0-9.]+:([0-9]+)", REG_EXTENDED) == 0) {
        if (regexec(&re, buf, 2, m, 0) == 0)
            b->stream_port = atoi(buf + m[1].rm_so);
        regfree(&re);
    }
    return found;
}

HARNESS_FN void itest_print_log_tail(const itest_broker *b)
{
    char path[300], buf[4096];
    snprintf(path, sizeof path, "%s/warren.log", b->root);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (char *line = strtok(buf, "\n"); line != NULL; line = strtok(NULL, "\n"))
        fprintf(stdout, "# warren: %s\n", line);
}

/* Starts Warren (or adopts WARREN_TEST_TARGET). extra_sets: NULL-terminated
 * "key=value" strings passed as extra --set options. Returns 0 on success. */
HARNESS_FN int itest_broker_start(itest_broker *b, const char *const *extra_sets)
{
    memset(b, 0, sizeof *b);
    const char *target = getenv("WARREN_TEST_TARGET");
    if (target != NULL && *target != '\0') {
        const char *colon = strrchr(target, ':');
        if (colon == NULL)
            return -1;
        snprintf(b->host, sizeof b->host, "%.*s", (int)(colon - target), target);
        b->port = atoi(colon + 1);
        return 0;
    }
    char bin[1024], data[300], log_path[300], listen_set[] = "listeners.tcp.default=127.0.0.1:0";
    char stream_set[] = "stream.listeners.tcp.default=127.0.0.1:0";
    char data_set[320];
    const char *env_bin = getenv("WARREN_BIN");
    if (env_bin != NULL && *env_bin != '\0')
        snprintf(bin, sizeof bin, "%s", env_bin);
    else
        itest_repo_path(bin, sizeof bin, "build/release/warren");
    if (access(bin, X_OK) != 0) {
        fprintf(stdout, "# Warren binary not found: %s (set WARREN_BIN or build it)\n", bin);
        return -1;
    }
    snprintf(b->root, sizeof b->root, "/tmp/warren-itest-XXXXXX");
    if (mkdtemp(b->root) == NULL)
        return -1;
    snprintf(data, sizeof data, "%s/data", b->root);
    snprintf(log_path, sizeof log_path, "%s/warren.log", b->root);
    snprintf(data_set, sizeof data_set, "data_dir=%s", data);
    mkdir(data, 0700);

    const char *argv[64];
    int argc = 0;
    argv[argc++] = bin;
    argv[argc++] = "--set";
    argv[argc++] = listen_set;
    argv[argc++] = "--set";
    argv[argc++] = stream_set;
    argv[argc++] = "--set";
    argv[argc++] = data_set;
    for (int i = 0; extra_sets != NULL && extra_sets[i] != NULL && argc < 60; i++) {
        argv[argc++] = "--set";
        argv[argc++] = extra_sets[i];
    }
    argv[argc] = NULL;

    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* Warren must not outlive a crashed test binary. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int null_fd = open("/dev/null", O_RDWR);
        if (log_fd >= 0)
            dup2(log_fd, 2);
        if (null_fd >= 0) {
            dup2(null_fd, 0);
            dup2(null_fd, 1);
        }
        if (chdir(b->root) != 0)
            _exit(126);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    b->pid = pid;
    for (int waited = 0; waited < ITEST_START_TIMEOUT_MS; waited += 20) {
        if (itest_scan_log(b, log_path))
            return 0;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            b->pid = 0;
            fprintf(stdout, "# Warren exited during startup\n");
            itest_print_log_tail(b);
            return -1;
        }
        usleep(20 * 1000);
    }
    fprintf(stdout, "# Warren did not report 'AMQP listening on' within %d ms\n", ITEST_START_TIMEOUT_MS);
    itest_print_log_tail(b);
    return -1;
}

/* SIGTERM, then SIGKILL after ITEST_STOP_TIMEOUT_MS. Returns the exit code
 * (0 is a clean shutdown), -1 if it had to be killed or died by a signal,
 * and 0 when we did not start a broker. Removes the temp dir. */
HARNESS_FN int itest_broker_stop(itest_broker *b)
{
    int rc = 0;
    if (b->pid > 0) {
        int status = 0;
        kill(b->pid, SIGTERM);
        int waited = 0;
        pid_t got = 0;
        while ((got = waitpid(b->pid, &status, WNOHANG)) == 0 && waited < ITEST_STOP_TIMEOUT_MS) {
            usleep(20 * 1000);
            waited += 20;
        }
        if (got == 0) {
            fprintf(stdout, "# Warren ignored SIGTERM for %d ms; killing it\n", ITEST_STOP_TIMEOUT_MS);
            kill(b->pid, SIGKILL);
            waitpid(b->pid, &status, 0);
            rc = -1;
        } else if (WIFEXITED(status)) {
            rc = WEXITSTATUS(status);
        } else {
            rc = -1;
        }
        if (rc != 0)
            itest_print_log_tail(b);
        b->pid = 0;
    }
    if (b->root[0] != '\0') {
        nftw(b->root, itest_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        b->root[0] = '\0';
    }
    return rc;
}

HARNESS_FN int itest_targeting_external(void)
{
    const char *target = getenv("WARREN_TEST_TARGET");
    return target != NULL && *target != '\0';
}

/* ------------------------------------------------------------------ names */

static char itest_names_q[ITEST_MAX_NAMES][256]; /* a shortstr fits */
static char itest_names_x[ITEST_MAX_NAMES][256];
static int itest_nq, itest_nx;

/* A unique name "itest.c.<kind>.<pid>.<n>" in buf. */
HARNESS_FN const char *itest_name(char *buf, size_t cap, const char *kind)
{
    static unsigned counter;
    static unsigned salt;
    if (salt == 0)
        salt = (unsigned)time(NULL) ^ (unsigned)getpid() << 8;
    snprintf(buf, cap, "itest.c.%s.%x.%x.%u", kind, (unsigned)getpid(), salt & 0xffff, ++counter);
    return buf;
}

HARNESS_FN void itest_copy_name(char dst[256], const char *name)
{
    size_t n = strnlen(name, 255);
    memcpy(dst, name, n);
    dst[n] = '\0';
}

/* Remembers a queue/exchange to delete after the test. */
HARNESS_FN void itest_track_queue(const char *name)
{
    if (itest_nq < ITEST_MAX_NAMES)
        itest_copy_name(itest_names_q[itest_nq++], name);
}

HARNESS_FN void itest_track_exchange(const char *name)
{
    if (itest_nx < ITEST_MAX_NAMES)
        itest_copy_name(itest_names_x[itest_nx++], name);
}

/* -------------------------------------------------------------- connections */

static amqp_connection_state_t itest_conns[ITEST_MAX_CONNS];

HARNESS_FN void itest_forget_conn(amqp_connection_state_t c)
{
    for (int i = 0; i < ITEST_MAX_CONNS; i++)
        if (itest_conns[i] == c)
            itest_conns[i] = NULL;
}

typedef struct itest_login {
    const char *user, *password, *vhost;
    int channel_max, frame_max, heartbeat;
} itest_login;

#define ITEST_DEFAULT_LOGIN {"guest", "guest", "/", 0, 131072, 0}

/* Opens a TCP connection and runs amqp_login. On success *reply is NORMAL.
 * Returns the connection (registered for cleanup) or NULL if TCP failed. */
HARNESS_FN amqp_connection_state_t itest_try_connect(const itest_login *l, amqp_rpc_reply_t *reply)
{
    amqp_connection_state_t c = amqp_new_connection();
    amqp_socket_t *s = amqp_tcp_socket_new(c);
    struct timeval tv = {5, 0};
    if (s == NULL || amqp_socket_open_noblock(s, itest_shared.host, itest_shared.port, &tv) != AMQP_STATUS_OK) {
        amqp_destroy_connection(c);
        return NULL;
    }
    struct timeval hs = {ITEST_RPC_TIMEOUT_S, 0}, rpc = {ITEST_RPC_TIMEOUT_S, 0};
    amqp_set_handshake_timeout(c, &hs);
    amqp_set_rpc_timeout(c, &rpc);
    for (int i = 0; i < ITEST_MAX_CONNS; i++)
        if (itest_conns[i] == NULL) {
            itest_conns[i] = c;
            break;
        }
    *reply = amqp_login(c, l->vhost, l->channel_max, l->frame_max, l->heartbeat, AMQP_SASL_METHOD_PLAIN,
                        l->user, l->password);
    return c;
}

HARNESS_FN void itest_assert_ok(amqp_rpc_reply_t r, const char *what)
{
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION)
        fail_msg("%s: library error %s", what, amqp_error_string2(r.library_error));
    if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = r.reply.decoded;
        fail_msg("%s: channel closed %u %.*s", what, m->reply_code, (int)m->reply_text.len,
                 (char *)m->reply_text.bytes);
    }
    if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_t *m = r.reply.decoded;
        fail_msg("%s: connection closed %u %.*s", what, m->reply_code, (int)m->reply_text.len,
                 (char *)m->reply_text.bytes);
    }
    fail_msg("%s: unexpected reply type %d (method 0x%08x)", what, r.reply_type, r.reply.id);
}

/* Logged-in connection with channel 1 open; fails the test otherwise. */
HARNESS_FN amqp_connection_state_t itest_connect_with(const itest_login *l)
{
    amqp_rpc_reply_t r;
    amqp_connection_state_t c = itest_try_connect(l, &r);
    if (c == NULL)
        fail_msg("cannot connect to %s:%d", itest_shared.host, itest_shared.port);
    itest_assert_ok(r, "amqp_login");
    amqp_channel_open(c, 1);
    itest_assert_ok(amqp_get_rpc_reply(c), "channel.open");
    return c;
}

HARNESS_FN amqp_connection_state_t itest_connect(void)
{
    itest_login l = ITEST_DEFAULT_LOGIN;
    return itest_connect_with(&l);
}

HARNESS_FN void itest_open_channel(amqp_connection_state_t c, amqp_channel_t ch)
{
    amqp_channel_open(c, ch);
    itest_assert_ok(amqp_get_rpc_reply(c), "channel.open");
}

/* Closes cleanly (best effort) and frees the connection. */
HARNESS_FN void itest_disconnect(amqp_connection_state_t c)
{
    if (c == NULL)
        return;
    itest_forget_conn(c);
    struct timeval tv = {2, 0};
    amqp_set_rpc_timeout(c, &tv);
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
}

/* Frees a connection the server already closed (after close-ok was sent). */
HARNESS_FN void itest_drop(amqp_connection_state_t c)
{
    itest_forget_conn(c);
    amqp_destroy_connection(c);
}

/* A harmless RPC: asynchronous errors raised by earlier commands surface here. */
HARNESS_FN amqp_rpc_reply_t itest_sync(amqp_connection_state_t c, amqp_channel_t ch)
{
    amqp_exchange_declare(c, ch, amqp_cstring_bytes("amq.direct"), amqp_cstring_bytes("direct"), 1, 0, 0, 0,
                          amqp_empty_table);
    return amqp_get_rpc_reply(c);
}

/* The reply must be channel.close with `code` (connection still usable):
 * sends close-ok and returns the reply text in text (may be NULL). */
HARNESS_FN void itest_expect_channel_close(amqp_connection_state_t c, amqp_channel_t ch, amqp_rpc_reply_t r,
                                           int code, char *text, size_t cap)
{
    if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION || r.reply.id != AMQP_CHANNEL_CLOSE_METHOD) {
        if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            amqp_connection_close_t *m = r.reply.decoded;
            fail_msg("expected channel.close %d, got connection.close %u %.*s", code, m->reply_code,
                     (int)m->reply_text.len, (char *)m->reply_text.bytes);
        }
        fail_msg("expected channel.close %d, got reply type %d", code, r.reply_type);
    }
    amqp_channel_close_t *m = r.reply.decoded;
    if (text != NULL)
        snprintf(text, cap, "%.*s", (int)m->reply_text.len, (char *)m->reply_text.bytes);
    assert_int_equal(m->reply_code, code);
    amqp_channel_close_ok_t ok = {0};
    assert_int_equal(amqp_send_method(c, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok), AMQP_STATUS_OK);
}

/* The reply must be connection.close with `code`: sends close-ok. The
 * caller then drops the connection with itest_drop(). */
HARNESS_FN void itest_expect_connection_close(amqp_connection_state_t c, amqp_rpc_reply_t r, int code,
                                              char *text, size_t cap)
{
    if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION || r.reply.id != AMQP_CONNECTION_CLOSE_METHOD) {
        if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *m = r.reply.decoded;
            fail_msg("expected connection.close %d, got channel.close %u %.*s", code, m->reply_code,
                     (int)m->reply_text.len, (char *)m->reply_text.bytes);
        }
        fail_msg("expected connection.close %d, got reply type %d (library error %s)", code, r.reply_type,
                 r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION ? amqp_error_string2(r.library_error) : "-");
    }
    amqp_connection_close_t *m = r.reply.decoded;
    if (text != NULL)
        snprintf(text, cap, "%.*s", (int)m->reply_text.len, (char *)m->reply_text.bytes);
    assert_int_equal(m->reply_code, code);
    amqp_connection_close_ok_t ok = {0};
    amqp_send_method(c, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
}

/* Declares a queue (unique name unless given; tracked for deletion) and
 * returns its name in out. */
HARNESS_FN const char *itest_declare_queue(amqp_connection_state_t c, amqp_channel_t ch, char *out, size_t cap,
                                           int exclusive, amqp_table_t args)
{
    char name[128];
    itest_name(name, sizeof name, "q");
    amqp_queue_declare_ok_t *ok =
        amqp_queue_declare(c, ch, amqp_cstring_bytes(name), 0, 0, exclusive, 0, args);
    itest_assert_ok(amqp_get_rpc_reply(c), "queue.declare");
    snprintf(out, cap, "%.*s", (int)ok->queue.len, (char *)ok->queue.bytes);
    itest_track_queue(out);
    return out;
}

HARNESS_FN const char *itest_declare_exchange(amqp_connection_state_t c, amqp_channel_t ch, char *out, size_t cap,
                                              const char *type)
{
    itest_name(out, cap, "x");
    itest_track_exchange(out);
    amqp_exchange_declare(c, ch, amqp_cstring_bytes(out), amqp_cstring_bytes(type), 0, 0, 0, 0, amqp_empty_table);
    itest_assert_ok(amqp_get_rpc_reply(c), "exchange.declare");
    return out;
}

HARNESS_FN int itest_publish(amqp_connection_state_t c, amqp_channel_t ch, const char *exchange, const char *key,
                             const void *body, size_t len, int mandatory, const amqp_basic_properties_t *props)
{
    amqp_bytes_t b = {len, (void *)body};
    return amqp_basic_publish(c, ch, amqp_cstring_bytes(exchange), amqp_cstring_bytes(key), mandatory, 0, props, b);
}

/* Ready-message count of a queue via passive declare (-1 on error). */
HARNESS_FN int itest_message_count(amqp_connection_state_t c, amqp_channel_t ch, const char *queue)
{
    amqp_queue_declare_ok_t *ok = amqp_queue_declare(c, ch, amqp_cstring_bytes(queue), 1, 0, 0, 0, amqp_empty_table);
    return amqp_get_rpc_reply(c).reply_type == AMQP_RESPONSE_NORMAL ? (int)ok->message_count : -1;
}

/* Polls the ready count until it equals want (requeues after a channel
 * close are asynchronous in RabbitMQ) or timeout_ms passes; returns it. */
HARNESS_FN int itest_wait_message_count(amqp_connection_state_t c, amqp_channel_t ch, const char *queue, int want,
                                        int timeout_ms)
{
    int n = itest_message_count(c, ch, queue);
    for (int waited = 0; n != want && waited < timeout_ms; waited += 20) {
        usleep(20 * 1000);
        n = itest_message_count(c, ch, queue);
    }
    return n;
}

/* basic.get + read_message. 1 = got a message into *msg (free with
 * amqp_destroy_message), 0 = get-empty; fails the test on errors. */
HARNESS_FN int itest_get(amqp_connection_state_t c, amqp_channel_t ch, const char *queue, int no_ack,
                         amqp_message_t *msg, uint64_t *tag, int *redelivered)
{
    amqp_rpc_reply_t r = amqp_basic_get(c, ch, amqp_cstring_bytes(queue), no_ack);
    itest_assert_ok(r, "basic.get");
    if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
        return 0;
    assert_int_equal(r.reply.id, AMQP_BASIC_GET_OK_METHOD);
    amqp_basic_get_ok_t *ok = r.reply.decoded;
    if (tag != NULL)
        *tag = ok->delivery_tag;
    if (redelivered != NULL)
        *redelivered = ok->redelivered;
    itest_assert_ok(amqp_read_message(c, ch, msg, 0), "read_message");
    return 1;
}

/* Waits up to timeout_ms for the next frame on any channel. Returns the
 * rabbitmq-c status (AMQP_STATUS_TIMEOUT on silence). */
HARNESS_FN int itest_wait_frame(amqp_connection_state_t c, amqp_frame_t *f, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    return amqp_simple_wait_frame_noblock(c, f, &tv);
}

HARNESS_FN int itest_bytes_eq(amqp_bytes_t b, const char *s)
{
    return b.len == strlen(s) && memcmp(b.bytes, s, b.len) == 0;
}

/* ------------------------------------------------------------ raw sockets */

typedef struct itest_frame {
    int type;
    int channel;
    uint32_t size;
    uint32_t method;            /* class << 16 | method, for method frames */
    unsigned char payload[262144];
} itest_frame;

HARNESS_FN int itest_raw_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)itest_shared.port);
    inet_pton(AF_INET, itest_shared.host, &a.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("raw connect to %s:%d failed: %s", itest_shared.host, itest_shared.port, strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

HARNESS_FN void itest_raw_send(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0)
            fail_msg("raw send failed: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

/* Reads exactly len bytes. Returns len, 0 at EOF, -1 on timeout/error. */
HARNESS_FN ssize_t itest_raw_read_exact(int fd, void *buf, size_t len, int timeout_ms)
{
    size_t got = 0;
    while (got < len) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0)
            return -1;
        ssize_t n = recv(fd, (char *)buf + got, len - got, 0);
        if (n == 0)
            return 0;
        if (n < 0)
            return errno == ECONNRESET ? 0 : -1;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* Next frame. Returns 1, 0 at EOF, -1 on timeout or a broken frame. */
HARNESS_FN int itest_raw_read_frame(int fd, itest_frame *f, int timeout_ms)
{
    unsigned char h[7], end;
    ssize_t n = itest_raw_read_exact(fd, h, 7, timeout_ms);
    if (n <= 0)
        return (int)n;
    f->type = h[0];
    f->channel = h[1] << 8 | h[2];
    f->size = (uint32_t)h[3] << 24 | (uint32_t)h[4] << 16 | (uint32_t)h[5] << 8 | h[6];
    if (f->size > sizeof f->payload)
        return -1;
    if (itest_raw_read_exact(fd, f->payload, f->size, timeout_ms) != (ssize_t)f->size)
        return -1;
    if (itest_raw_read_exact(fd, &end, 1, timeout_ms) != 1 || end != 0xCE)
        return -1;
    f->method = 0;
    if (f->type == AMQP_FRAME_METHOD && f->size >= 4)
        f->method = (uint32_t)f->payload[0] << 24 | (uint32_t)f->payload[1] << 16 | (uint32_t)f->payload[2] << 8 |
                    f->payload[3];
    return 1;
}

/* Sends one frame: type, channel, payload, frame-end octet `end`. */
HARNESS_FN void itest_raw_send_frame(int fd, int type, int channel, const void *payload, uint32_t len,
                                     unsigned char end)
{
    unsigned char *buf = malloc(len + 8);
    assert_non_null(buf);
    buf[0] = (unsigned char)type;
    buf[1] = (unsigned char)(channel >> 8);
    buf[2] = (unsigned char)channel;
    buf[3] = (unsigned char)(len >> 24);
    buf[4] = (unsigned char)(len >> 16);
    buf[5] = (unsigned char)(len >> 8);
    buf[6] = (unsigned char)len;
    memcpy(buf + 7, payload, len);
    buf[7 + len] = end;
    itest_raw_send(fd, buf, len + 8);
    free(buf);
}

/* Encodes a method with rabbitmq-c's codec and sends it as a method frame. */
HARNESS_FN void itest_raw_send_method(int fd, int channel, amqp_method_number_t id, void *decoded)
{
    unsigned char buf[4096];
    buf[0] = (unsigned char)(id >> 24);
    buf[1] = (unsigned char)(id >> 16);
    buf[2] = (unsigned char)(id >> 8);
    buf[3] = (unsigned char)id;
    amqp_bytes_t out = {sizeof buf - 4, buf + 4};
    int n = amqp_encode_method(id, decoded, out);
    assert_true(n >= 0);
    itest_raw_send_frame(fd, AMQP_FRAME_METHOD, channel, buf, (uint32_t)n + 4, 0xCE);
}

/* Reads frames (skipping heartbeats) until a method frame; fails on EOF. */
HARNESS_FN void itest_raw_expect_method(int fd, itest_frame *f, amqp_method_number_t id, int timeout_ms)
{
    int rc;
    while ((rc = itest_raw_read_frame(fd, f, timeout_ms)) == 1 && f->type == AMQP_FRAME_HEARTBEAT)
        ;
    if (rc != 1)
        fail_msg("expected %s, got %s", amqp_method_name(id), rc == 0 ? "EOF" : "timeout");
    if (f->type != AMQP_FRAME_METHOD || f->method != id)
        fail_msg("expected %s, got frame type %d method %s", amqp_method_name(id), f->type,
                 f->type == AMQP_FRAME_METHOD ? amqp_method_name(f->method) : "-");
}

/* The big-endian reply code of a connection.close / channel.close payload. */
HARNESS_FN int itest_raw_close_code(const itest_frame *f)
{
    return f->payload[4] << 8 | f->payload[5];
}

/* Expects connection.close(code), answers close-ok, then EOF within 10 s. */
HARNESS_FN void itest_raw_expect_connection_close(int fd, int code)
{
    itest_frame *f = malloc(sizeof *f);
    assert_non_null(f);
    itest_raw_expect_method(fd, f, AMQP_CONNECTION_CLOSE_METHOD, 10000);
    assert_int_equal(f->channel, 0);
    assert_int_equal(itest_raw_close_code(f), code);
    unsigned char close_ok[4] = {0, 10, 0, 51};
    itest_raw_send_frame(fd, AMQP_FRAME_METHOD, 0, close_ok, 4, 0xCE);
    int rc;
    while ((rc = itest_raw_read_frame(fd, f, 10000)) == 1)
        ;
    free(f);
    assert_int_equal(rc, 0); /* EOF, not a timeout */
}

/* Raw handshake through connection.open-ok with PLAIN or AMQPLAIN and our
 * tune-ok values. */
HARNESS_FN void itest_raw_handshake_tuned(int fd, const char *mechanism, const char *user, const char *password,
                                          uint16_t channel_max, uint32_t frame_max, uint16_t heartbeat)
{
    itest_frame *f = malloc(sizeof *f);
    assert_non_null(f);
    itest_raw_send(fd, "AMQP\x00\x00\x09\x01", 8);
    itest_raw_expect_method(fd, f, AMQP_CONNECTION_START_METHOD, 5000);

    unsigned char resp[512];
    size_t rl = 0;
    if (strcmp(mechanism, "AMQPLAIN") == 0) {
        /* A field table without its length: LOGIN S user, PASSWORD S password. */
        const char *keys[2] = {"LOGIN", "PASSWORD"}, *vals[2] = {user, password};
        for (int i = 0; i < 2; i++) {
            uint32_t vl = (uint32_t)strlen(vals[i]);
            resp[rl++] = (unsigned char)strlen(keys[i]);
            memcpy(resp + rl, keys[i], strlen(keys[i]));
            rl += strlen(keys[i]);
            resp[rl++] = 'S';
            resp[rl++] = (unsigned char)(vl >> 24);
            resp[rl++] = (unsigned char)(vl >> 16);
            resp[rl++] = (unsigned char)(vl >> 8);
            resp[rl++] = (unsigned char)vl;
            memcpy(resp + rl, vals[i], vl);
            rl += vl;
        }
    } else {
        resp[rl++] = 0;
        memcpy(resp + rl, user, strlen(user));
        rl += strlen(user);
        resp[rl++] = 0;
        memcpy(resp + rl, password, strlen(password));
        rl += strlen(password);
    }
    amqp_connection_start_ok_t start_ok = {0};
    start_ok.client_properties = amqp_empty_table;
    start_ok.mechanism = amqp_cstring_bytes(mechanism);
    start_ok.response.bytes = resp;
    start_ok.response.len = rl;
    start_ok.locale = amqp_cstring_bytes("en_US");
    itest_raw_send_method(fd, 0, AMQP_CONNECTION_START_OK_METHOD, &start_ok);
    itest_raw_expect_method(fd, f, AMQP_CONNECTION_TUNE_METHOD, 5000);

    amqp_connection_tune_ok_t tune_ok = {channel_max, frame_max, heartbeat};
    itest_raw_send_method(fd, 0, AMQP_CONNECTION_TUNE_OK_METHOD, &tune_ok);
    amqp_connection_open_t open = {amqp_cstring_bytes("/"), amqp_empty_bytes, 0};
    itest_raw_send_method(fd, 0, AMQP_CONNECTION_OPEN_METHOD, &open);
    itest_raw_expect_method(fd, f, AMQP_CONNECTION_OPEN_OK_METHOD, 5000);
    free(f);
}

HARNESS_FN void itest_raw_handshake(int fd, const char *mechanism, const char *user, const char *password)
{
    itest_raw_handshake_tuned(fd, mechanism, user, password, 2047, 131072, 0);
}

/* ------------------------------------------------------------ test hooks */

static volatile sig_atomic_t itest_timed_out;

HARNESS_FN void itest_on_alarm(int sig)
{
    (void)sig;
    itest_timed_out = 1;
    fail_msg("test exceeded %d s (broker hung?)", ITEST_TEST_TIMEOUT_S);
}

/* Per-test setup: arms the timeout. */
HARNESS_FN int itest_setup(void **state)
{
    (void)state;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = itest_on_alarm;
    sa.sa_flags = SA_NODEFER; /* we leave the handler by longjmp */
    sigaction(SIGALRM, &sa, NULL);
    itest_nq = itest_nx = 0;
    alarm(ITEST_TEST_TIMEOUT_S);
    return 0;
}

/* Per-test teardown: closes leftover connections, deletes tracked names. */
HARNESS_FN int itest_teardown(void **state)
{
    (void)state;
    alarm(ITEST_TEST_TIMEOUT_S);
    for (int i = 0; i < ITEST_MAX_CONNS; i++)
        if (itest_conns[i] != NULL)
            itest_disconnect(itest_conns[i]);
    if (itest_nq > 0 || itest_nx > 0) {
        itest_login l = ITEST_DEFAULT_LOGIN;
        amqp_rpc_reply_t r;
        amqp_connection_state_t c = itest_try_connect(&l, &r);
        if (c != NULL && r.reply_type == AMQP_RESPONSE_NORMAL) {
            amqp_channel_open(c, 1);
            for (int i = 0; i < itest_nq; i++)
                amqp_queue_delete(c, 1, amqp_cstring_bytes(itest_names_q[i]), 0, 0);
            for (int i = 0; i < itest_nx; i++)
                amqp_exchange_delete(c, 1, amqp_cstring_bytes(itest_names_x[i]), 0);
        }
        itest_disconnect(c);
    }
    itest_nq = itest_nx = 0;
    alarm(0);
    return 0;
}

/* Group setup/teardown: start the broker once per binary; on teardown the
 * broker must exit 0 on SIGTERM. */
HARNESS_FN int itest_group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN); /* writes to a socket the broker closed */
    return itest_broker_start(&itest_shared, NULL);
}

HARNESS_FN int itest_group_teardown(void **state)
{
    (void)state;
    int rc = itest_broker_stop(&itest_shared);
    if (rc != 0)
        fprintf(stdout, "# Warren exit status %d after SIGTERM (expected 0)\n", rc);
    return rc == 0 ? 0 : -1;
}

/* Fixtures most tests share: itest_conn (channel 1 open) and, for
 * ITEST_Q, a fresh non-exclusive queue named itest_queue. */
static amqp_connection_state_t itest_conn;
static char itest_queue[256];

HARNESS_FN int itest_setup_conn(void **state)
{
    itest_setup(state);
    itest_conn = itest_connect();
    return 0;
}

HARNESS_FN int itest_setup_conn_queue(void **state)
{
    itest_setup_conn(state);
    itest_declare_queue(itest_conn, 1, itest_queue, sizeof itest_queue, 0, amqp_empty_table);
    return 0;
}

#define ITEST(fn) cmocka_unit_test_setup_teardown(fn, itest_setup, itest_teardown)
#define ITEST_C(fn) cmocka_unit_test_setup_teardown(fn, itest_setup_conn, itest_teardown)
#define ITEST_Q(fn) cmocka_unit_test_setup_teardown(fn, itest_setup_conn_queue, itest_teardown)

#endif /* WARREN_ITEST_HARNESS_H */
