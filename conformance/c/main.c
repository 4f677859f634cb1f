/* Runner for the rabbitmq-c conformance scenarios.
 *
 * Reads CONF_URI, CONF_RUN_ID, CONF_QUICK, CONF_ONLY and CONF_TIMEOUT (see
 * conformance/c/run), then runs each selected scenario in a forked child so
 * a crash, a hang or leftover library state cannot affect the next one. The
 * child arms alarm(CONF_TIMEOUT) and reports its detail text through a pipe;
 * the parent also enforces a deadline, so a hung broker is a fail, not a
 * hang. One line per scenario goes to stdout:
 *
 *   RESULT <group> <scenario-id> rabbitmq-c <pass|fail> <millis> <detail...>
 *
 * `--list` prints the ids (quick ones marked) instead of running. */
#define _GNU_SOURCE
#include "conf.h"

#include <errno.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CLEANUP_TIMEOUT_S 5

static const conf_scenario *const all_tables[] = {
    conf_connection_scenarios, conf_exchange_scenarios, conf_queue_scenarios,
    conf_basic_scenarios,      conf_delivery_scenarios, conf_errors_scenarios,
    conf_extensions_scenarios, conf_edges_scenarios, NULL,
};

typedef struct run_options {
    int quick;
    int timeout_s;
    int have_only;
    regex_t only;
} run_options;

static void child_run(const conf_scenario *s, int timeout_s, int out_fd)
{
    signal(SIGPIPE, SIG_IGN);
    alarm((unsigned)timeout_s);
    conf_begin_scenario(s->id);
    int rc = s->fn();
    alarm(CLEANUP_TIMEOUT_S);
    conf_cleanup_scenario();
    const char *detail = conf_detail();
    if (rc != 0 && *detail == '\0')
        detail = "failed without detail";
    ssize_t ignored = write(out_fd, detail, strlen(detail));
    (void)ignored;
    _exit(rc == 0 ? 0 : 1);
}

/* Reads the child's detail until EOF or the deadline; returns 0 at EOF. */
static int read_detail(int fd, char *buf, size_t cap, long long deadline_ms)
{
    size_t used = 0;
    for (;;) {
        long long left = deadline_ms - conf_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd p = {fd, POLLIN, 0};
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        ssize_t got = read(fd, buf + used, cap - 1 - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        used += (size_t)got;
        if (used >= cap - 1)
            break;
    }
    buf[used] = '\0';
    return 0;
}

static void print_result(const char *id, int pass, long long millis, char *detail)
{
    for (char *c = detail; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
    int group_len = (int)strcspn(id, ".");
    printf("RESULT %.*s %s rabbitmq-c %s %lld %s\n", group_len, id, id, pass ? "pass" : "fail",
           millis, *detail ? detail : (pass ? "ok" : "failed"));
    fflush(stdout);
}

static void run_one(const conf_scenario *s, const run_options *opt)
{
    int fds[2];
    char detail[1200] = "";
    long long start = conf_now_ms();
    if (pipe(fds) != 0) {
        snprintf(detail, sizeof detail, "pipe: %s", strerror(errno));
        print_result(s->id, 0, 0, detail);
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        child_run(s, opt->timeout_s, fds[1]);
    }
    close(fds[1]);
    long long deadline = start + (long long)(opt->timeout_s + CLEANUP_TIMEOUT_S + 2) * 1000;
    int timed_out = pid < 0 || read_detail(fds[0], detail, sizeof detail, deadline) != 0;
    close(fds[0]);
    int status = 0;
    if (pid > 0) {
        if (timed_out)
            kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    long long millis = conf_now_ms() - start;
    int pass = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (pid < 0)
        snprintf(detail, sizeof detail, "fork: %s", strerror(errno));
    else if (timed_out || (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM))
        snprintf(detail, sizeof detail, "timeout after %d s (broker did not answer)", opt->timeout_s);
    else if (WIFSIGNALED(status))
        snprintf(detail, sizeof detail, "scenario crashed with signal %d", WTERMSIG(status));
    print_result(s->id, pass, millis, detail);
}

static int selected(const conf_scenario *s, const run_options *opt)
{
    if (opt->quick && !s->quick)
        return 0;
    return !opt->have_only || regexec(&opt->only, s->id, 0, NULL, 0) == 0;
}

static int parse_options(run_options *opt)
{
    memset(opt, 0, sizeof *opt);
    const char *quick = getenv("CONF_QUICK");
    opt->quick = quick != NULL && strcmp(quick, "1") == 0;
    const char *timeout = getenv("CONF_TIMEOUT");
    opt->timeout_s = timeout && atoi(timeout) > 0 ? atoi(timeout) : 20;
    const char *only = getenv("CONF_ONLY");
    if (only != NULL && *only != '\0') {
        if (regcomp(&opt->only, only, REG_EXTENDED | REG_NOSUB) != 0) {
            fprintf(stderr, "conformance/c: bad CONF_ONLY regex: %s\n", only);
            return -1;
        }
        opt->have_only = 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    run_options opt;
    if (parse_options(&opt) != 0 || conf_env_init() != 0)
        return 2;
    int list = argc > 1 && strcmp(argv[1], "--list") == 0;
    for (int t = 0; all_tables[t] != NULL; t++) {
        for (const conf_scenario *s = all_tables[t]; s->id != NULL; s++) {
            if (!selected(s, &opt))
                continue;
            if (list)
                printf("%s%s\n", s->id, s->quick ? " quick" : "");
            else
                run_one(s, &opt);
        }
    }
    return 0;
}
