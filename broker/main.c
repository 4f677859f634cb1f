/* bin/warren: parses the command line, loads the configuration and runs the
 * server.  Usage: warren [--config FILE] [--set key=value]... [--definitions FILE] */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker.h"
#include "../cluster/cluster.h"
#include "../definitions/definitions.h"
#include "../mgmt-ui/mgmt.h"
#include "../shovel/shovel.h"

static void usage(void)
{
    fprintf(stderr, "usage: warren [--config FILE] [--set key=value]... [--definitions FILE]\n"
                    "  --config FILE       read settings from FILE (rabbitmq.conf style)\n"
                    "  --set key=value     override one setting, e.g. --set "
                    "listeners.tcp.default=127.0.0.1:0\n"
                    "  --definitions FILE  import a definitions file at start "
                    "(load_definitions = FILE)\n");
}

/* load_definitions: the file (or a directory's *.json files) is imported
 * before any client is served; one that cannot be read, parsed or
 * validated stops the start. */
static bool load_definitions(server *s, const char *path)
{
    defs_error err;
    char file[1024];
    if (!*path || defs_import_file(s, path, &err, file, sizeof file))
        return true;
    if (err.line)
        log_msg(LOG_ERROR, "load_definitions %s:%d:%d: %s", file, err.line, err.column,
                err.reason);
    else
        log_msg(LOG_ERROR, "load_definitions %s: %s", file, err.reason);
    return false;
}

/* Creates the data directory (one level) so a bad path fails at start. */
static bool prepare_data_dir(const char *dir)
{
    if (mkdir(dir, 0750) == 0 || errno == EEXIST)
        return true;
    log_msg(LOG_ERROR, "data_dir %s: %s", dir, strerror(errno));
    return false;
}

/* glibc gives the top of the heap back to the kernel as soon as 128 KiB
 * there are free: each batch of deliveries, written and drained, then
 * shrank the heap and the next one grew it again (a brk call and fresh
 * zeroed pages every few thousand messages). Keep up to 16 MiB for reuse.
 * Setting this stops glibc from raising the mmap threshold as it goes, so
 * it is set too: blocks up to 4 MiB (message bodies) come from the heap,
 * not from an mmap and munmap each. */
static void tune_malloc(void)
{
    mallopt(M_TRIM_THRESHOLD, 16 << 20);
    mallopt(M_TOP_PAD, 1 << 20);
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
}

/* Loads the broker (a cluster leader's with its replication log), its
 * definitions and management plane, and runs it. */
static int serve(const config *cfg, cluster *cl, mirror *replication)
{
    broker *b = broker_new(cfg, replication);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &stop, NULL); /* a cluster leader's came blocked */
    if (!b)
        return 1;
    server *s = broker_server(b);
    if (!load_definitions(s, cfg->load_definitions)) {
        broker_free(b);
        return 1;
    }
    mgmt *m = mgmt_new(s);
    if (!m) {
        broker_free(b);
        return 1;
    }
    mgmt_set_cluster(m, cl);
    shovels *sh = shovels_new(s); /* only where the broker runs: a cluster's leader */
    mgmt_set_shovels(m, sh);
    cluster_broker hooks = {loop_base(server_loop(s, 0)), broker_journal(b), broker_meta(b),
                            broker_fence, b};
    if (cl && !cluster_attach(cl, &hooks)) {
        mgmt_free(m);
        shovels_free(sh);
        broker_free(b);
        return 1;
    }
    int status = broker_run(b);
    cluster_detach(cl);
    mgmt_free(m);
    shovels_free(sh); /* before the loop and its connections go */
    broker_free(b);
    return status;
}

/* A cluster node follows until it leads, then serves; a leader that fenced
 * itself, or a follower that lost its lease, starts over as a new process
 * (a follower with nothing of its old state in memory). */
static int run_cluster_node(const config *cfg, char **argv)
{
    cluster *c = cluster_start(cfg);
    if (!c)
        return 1;
    int status = cluster_await_leadership(c) ? serve(cfg, c, cluster_mirror(c)) : 0;
    bool again = cluster_fenced(c);
    cluster_stop(c);
    if (!again)
        return status;
    log_msg(LOG_INFO, "restarting as a follower");
    execv("/proc/self/exe", argv);
    log_msg(LOG_ERROR, "cannot restart: %s", strerror(errno));
    return 1;
}

int main(int argc, char **argv)
{
    tune_malloc();
    /* a peer that went away must fail the write, not end the process (a
     * cluster follower writes to its leader before any broker exists) */
    signal(SIGPIPE, SIG_IGN);
    config cfg;
    config_defaults(&cfg);
    char err[1024];
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool takes_value = strcmp(arg, "--config") == 0 || strcmp(arg, "--set") == 0 ||
                           strcmp(arg, "--definitions") == 0;
        if (takes_value && i + 1 == argc) {
            fprintf(stderr, "warren: %s needs a value\n", arg);
            return 2;
        }
        if (strcmp(arg, "--config") == 0) {
            if (!config_load_file(&cfg, argv[++i], err, sizeof err)) {
                fprintf(stderr, "warren: %s\n", err);
                return 1;
            }
        } else if (strcmp(arg, "--definitions") == 0) {
            if (!config_set(&cfg, "load_definitions", argv[++i], "--definitions", err,
                            sizeof err)) {
                fprintf(stderr, "warren: %s\n", err);
                return 1;
            }
        } else if (strcmp(arg, "--set") == 0) {
            char kv[1024];
            snprintf(kv, sizeof kv, "%s", argv[++i]);
            char *eq = strchr(kv, '=');
            if (!eq) {
                fprintf(stderr, "warren: --set %s: expected key=value\n", kv);
                return 1;
            }
            *eq = 0;
            if (!config_set(&cfg, kv, eq + 1, "--set", err, sizeof err)) {
                fprintf(stderr, "warren: %s\n", err);
                return 1;
            }
        } else {
            usage();
            return strcmp(arg, "--help") == 0 ? 0 : 2;
        }
    }
    log_set_level(cfg.log_level);
    if (!prepare_data_dir(cfg.data_dir))
        return 1;
    if (cfg.cluster.n_endpoints)
        return run_cluster_node(&cfg, argv);
    return serve(&cfg, NULL, NULL);
}
