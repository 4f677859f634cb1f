/* Changes to users, permissions and vhosts while clients are connected: a
 * revoked permission applies to an open channel at once (Warren drops the
 * channel's cached check; RabbitMQ would keep it until the channel is
 * reopened), a deleted user's connections are closed with 320 "user 'x' is
 * deleted", and a deleted vhost's with 320 "vhost 'x' is deleted" -- its
 * durable queue and persistent messages gone, also after a restart; and
 * those of a vhost that stays come back after one.
 *
 * The server's loop runs in this process, as in the broker; a pika client
 * (access_live_client.py) runs in a child process and asks for each change
 * at a set point ("want n" / "done n" over pipes), which this process
 * makes between loop turns. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "test_broker_start.h"

typedef struct live {
    char dir[64];
    config cfg;
    server *s;
    void (*step)(struct live *l, int n); /* the change the client's "want n" asks for */
} live;

static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void live_start(live *l)
{
    log_set_level(LOG_NONE);
    l->s = test_broker_new(&l->cfg);
    assert_non_null(l->s);
}

static live *live_new(void)
{
    live *l = calloc(1, sizeof *l);
    assert_non_null(l);
    config_defaults(&l->cfg);
    strcpy(l->cfg.listen_host, "127.0.0.1");
    l->cfg.listen_port = free_port();
    strcpy(l->dir, "/tmp/warren-unit-XXXXXX");
    assert_non_null(mkdtemp(l->dir));
    strcpy(l->cfg.data_dir, l->dir);
    l->cfg.journal_sync = JOURNAL_SYNC_NONE;
    live_start(l);
    return l;
}

static void live_free(live *l)
{
    char cmd[96];
    test_broker_free(l->s);
    snprintf(cmd, sizeof cmd, "rm -rf %s", l->dir);
    assert_int_equal(system(cmd), 0);
    free(l);
}

/* <repo>/tests/unit/access_live_client.py, from build/<variant>/tests/unit/<bin>. */
static void client_path(char *out, size_t cap)
{
    char exe[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = 0;
    for (int up = 0; up < 5; up++)
        *strrchr(exe, '/') = 0;
    snprintf(out, cap, "%s/tests/unit/access_live_client.py", exe);
}

/* Starts the client with its stdout on *from (non-blocking) and its stdin
 * on *to. */
static pid_t client_start(live *l, const char *scenario, int *from, int *to)
{
    char script[1200], port[16];
    int up[2], down[2];
    client_path(script, sizeof script);
    snprintf(port, sizeof port, "%d", l->cfg.listen_port);
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(down), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(down[0], 0);
        dup2(up[1], 1);
        close(up[0]), close(down[1]);
        execl("/usr/bin/python3", "python3", script, port, scenario, (char *)NULL);
        _exit(127);
    }
    close(up[1]), close(down[0]);
    fcntl(up[0], F_SETFL, O_NONBLOCK);
    *from = up[0];
    *to = down[1];
    return pid;
}

/* Runs the loop while the client works (30 s at most), making each change
 * it asks for; fails with the client's report unless it says ok. */
static void live_run(live *l, const char *scenario)
{
    int from, to;
    char buf[2048];
    size_t len = 0;
    pid_t pid = client_start(l, scenario, &from, &to);
    time_t deadline = time(NULL) + 30;
    const char *result = NULL;
    signal(SIGPIPE, SIG_IGN);
    while (!result && time(NULL) < deadline) {
        event_base_loop(loop_base(admin_loop(l->s)), EVLOOP_NONBLOCK);
        ssize_t n = read(from, buf + len, sizeof buf - 1 - len);
        if (n > 0)
            len += (size_t)n;
        buf[len] = 0;
        char *nl;
        while (!result && (nl = strchr(buf, '\n'))) {
            *nl = 0;
            int want;
            if (sscanf(buf, "want %d", &want) == 1) {
                l->step(l, want);
                dprintf(to, "done %d\n", want);
            } else if (strncmp(buf, "result ", 7) == 0) {
                result = strdup(buf + 7);
            }
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len + 1);
        }
        if (n <= 0)
            usleep(200);
    }
    for (int i = 0; i < 200; i++) /* let closes and frees run */
        event_base_loop(loop_base(admin_loop(l->s)), EVLOOP_NONBLOCK);
    close(to);
    close(from);
    if (!result)
        kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (!result || strcmp(result, "ok") != 0)
        fail_msg("client (%s): %s", scenario, result ? result : "no result within 30 s");
    free((void *)result);
}

/* ---- the changes --------------------------------------------------------- */

static void put_user(live *l, const char *name)
{
    char err[300];
    access_user_spec u = {.name = name, .password = "pw"};
    assert_true(access_put_user(server_access(l->s), &u, err, sizeof err));
}

static void put_perms(live *l, const char *user, const char *vh, const char *write)
{
    char err[300];
    meta_permission p = {user, vh, ".*", write, ".*"};
    assert_true(access_put_permission(server_access(l->s), &p, err, sizeof err));
}

/* ---- a permission change applies to an open channel at once -------------- */

static void revoke_steps(live *l, int n)
{
    put_perms(l, "alice", "/", n == 1 ? "^$" : ".*"); /* 1 revokes write, 2 gives it back */
}


static void test_permission_change_applies_to_open_channels(void **state)
{
    (void)state;
    live *l = live_new();
    put_user(l, "alice");
    put_perms(l, "alice", "/", ".*");
    l->step = revoke_steps;
    live_run(l, "revoke");
    live_free(l);
}

/* ---- deleting a user closes their connections ---------------------------- */

static void delete_user_step(live *l, int n)
{
    char err[300];
    (void)n;
    assert_true(access_delete_user(server_access(l->s), "bob", err, sizeof err));
}


static void test_deleting_a_user_closes_their_connections(void **state)
{
    (void)state;
    live *l = live_new();
    put_user(l, "bob");
    put_perms(l, "bob", "/", ".*");
    l->step = delete_user_step;
    live_run(l, "delete-user");
    assert_null(access_find_user(server_access(l->s), "bob"));
    live_free(l);
}

/* ---- deleting a vhost ---------------------------------------------------- */

static void delete_vhost_step(live *l, int n)
{
    char err[300];
    (void)n;
    assert_true(admin_delete_vhost(l->s, "team", err, sizeof err));
}

/* A server with vhost "team" where carol may do everything. */
static live *live_with_team(void)
{
    live *l = live_new();
    char err[300];
    meta_vhost v = {"team", "", "", "", false};
    assert_true(admin_put_vhost(l->s, &v, err, sizeof err));
    put_user(l, "carol");
    put_perms(l, "carol", "team", ".*");
    return l;
}

static void count_queue(void *arg, queue *q) { (void)q, ++*(int *)arg; }

static void test_deleting_a_vhost(void **state)
{
    (void)state;
    live *l = live_with_team();
    char err[300];
    meta_vhost v = {"team", "", "", "", false};
    l->step = delete_vhost_step;
    live_run(l, "delete-vhost");
    assert_null(server_vhost(l->s, AMQP_CSTR("team")));
    assert_null(access_find_perms(server_access(l->s), AMQP_CSTR("carol"), AMQP_CSTR("team")));
    journal_stats js;
    journal_get_stats(server_journal(l->s), &js);
    assert_int_equal(js.live_messages, 0); /* settled in the journal */
    /* After a restart: no vhost, no queue, no messages. */
    test_broker_free(l->s);
    live_start(l);
    assert_null(server_vhost(l->s, AMQP_CSTR("team")));
    assert_true(admin_put_vhost(l->s, &v, err, sizeof err)); /* re-created: empty */
    int queues = 0;
    vhost_foreach_queue(server_vhost(l->s, AMQP_CSTR("team")), count_queue, &queues);
    assert_int_equal(queues, 0);
    journal_get_stats(server_journal(l->s), &js);
    assert_int_equal(js.live_messages, 0);
    assert_null(access_find_perms(server_access(l->s), AMQP_CSTR("carol"), AMQP_CSTR("team")));
    live_free(l);
}

static void no_steps(live *l, int n) { (void)l, (void)n; }

/* Durable queues and persistent messages of a vhost other than the default
 * one come back after a restart (the store's load and the journal's
 * recovery find queues in every vhost). */
static void test_durable_queue_in_another_vhost_survives_restart(void **state)
{
    (void)state;
    live *l = live_with_team();
    l->step = no_steps;
    live_run(l, "persist-vhost");
    test_broker_free(l->s);
    live_start(l);
    vhost *team = server_vhost(l->s, AMQP_CSTR("team"));
    assert_non_null(team);
    queue *q = vhost_queue_find(team, AMQP_CSTR("kept"));
    assert_non_null(q);
    assert_int_equal(queue_ready_count(q), 7);
    assert_null(vhost_queue_find(server_vhost(l->s, AMQP_CSTR("/")), AMQP_CSTR("kept")));
    live_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permission_change_applies_to_open_channels),
        cmocka_unit_test(test_deleting_a_user_closes_their_connections),
        cmocka_unit_test(test_deleting_a_vhost),
        cmocka_unit_test(test_durable_queue_in_another_vhost_survives_restart),
    };
    return cmocka_run_group_tests_name("broker_access_live", tests, NULL, NULL);
}
