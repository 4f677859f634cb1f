/* The follower: one replication connection to the leader the election
 * names, checked by its epoch and the handshake; the mirror frames it
 * sends applied to the data directory (mirror_replica), the metadata
 * through store's meta, and an acknowledgement for every sync mark once it
 * is on this disk.
 *
 * While a snapshot is half applied the data directory holds the marker
 * CLUSTER_SYNCING_FILE (made and synced before the first file is
 * removed, removed once the snapshot and the sync after it are on disk):
 * a node that restarts with it does not campaign. */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_int.h"

#define RETRY_MS 200

struct follower {
    cluster *c;
    struct bufferevent *bev;
    char leader[64];
    int64_t epoch;
    bool hello_done;
    mirror_replica *replica;
    meta *meta;
    bool snapshot_ended, whole;
    bool quiet; /* a failure was logged: the next ones are not, until a session works */
    uint64_t acked, applied_bytes;
    uint64_t next_try_ms;
};

static void marker_path(const follower *f, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", f->c->cfg.data_dir, CLUSTER_SYNCING_FILE);
}

static void disconnect(follower *f, const char *why)
{
    if (why && !f->quiet)
        log_msg(LOG_WARNING, "cluster: replication from %s stopped: %s%s", f->leader, why,
                f->hello_done ? "" : " (retrying quietly)");
    f->quiet = why && !f->hello_done;
    if (f->bev)
        bufferevent_free(f->bev);
    f->bev = NULL;
    mirror_replica_free(f->replica);
    f->replica = NULL;
    f->hello_done = false;
    if (!f->snapshot_ended)
        f->whole = false;
    f->next_try_ms = etcd_now_ms() + RETRY_MS;
}

/* ---- the replica's handlers ------------------------------------------------ */

static void snapshot_begin(void *ctx, uint64_t epoch)
{
    follower *f = ctx;
    char path[700];
    log_msg(LOG_INFO, "cluster: receiving a snapshot from %s (epoch %" PRIu64 ")", f->leader,
            epoch);
    meta_close(f->meta);
    f->meta = NULL;
    f->whole = f->snapshot_ended = false;
    marker_path(f, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static bool meta_image(void *ctx, const void *image, size_t len)
{
    follower *f = ctx;
    char err[300];
    meta_close(f->meta);
    f->meta = NULL;
    if (!meta_replace_image(f->c->cfg.data_dir, image, len, err, sizeof err) ||
        !(f->meta = meta_open(f->c->cfg.data_dir, err, sizeof err))) {
        log_msg(LOG_ERROR, "cluster: the metadata snapshot: %s", err);
        return false;
    }
    return true;
}

static bool meta_changes(void *ctx, const void *cs, size_t len)
{
    follower *f = ctx;
    return f->meta && meta_apply_changes(f->meta, cs, len);
}

static void snapshot_end(void *ctx)
{
    follower *f = ctx;
    f->snapshot_ended = true;
}

static void synced(void *ctx, uint64_t seq)
{
    follower *f = ctx;
    if (f->snapshot_ended && !f->whole) {
        char path[700];
        marker_path(f, path, sizeof path);
        unlink(path);
        f->whole = true;
        log_msg(LOG_INFO, "cluster: the snapshot from %s is on disk; following", f->leader);
    }
    f->acked = seq;
    if (!f->bev)
        return;
    uint8_t ack[CLUSTER_ACK_LEN];
    uint64_t s = htobe64(seq), b = htobe64(f->applied_bytes);
    ack[0] = 'A';
    memcpy(ack + 1, &s, 8);
    memcpy(ack + 9, &b, 8);
    bufferevent_write(f->bev, ack, sizeof ack);
}

static const mirror_replica_handlers handlers = {snapshot_begin, meta_image, meta_changes,
                                                 snapshot_end, synced};

/* ---- the connection -------------------------------------------------------- */

static bool read_hello(follower *f, struct evbuffer *in)
{
    uint8_t head[29 + 255];
    if (evbuffer_copyout(in, head, 29) < 29)
        return true;
    size_t nl = head[28];
    if (evbuffer_get_length(in) < 29 + nl)
        return true;
    evbuffer_remove(in, head, 29 + nl);
    uint32_t magic;
    uint64_t epoch;
    memcpy(&magic, head, 4);
    memcpy(&epoch, head + 4, 8);
    if (ntohl(magic) != CLUSTER_HELLO_LEADER || (int64_t)be64toh(epoch) != f->epoch ||
        nl != strlen(f->leader) || memcmp(head + 29, f->leader, nl) != 0) {
        disconnect(f, "the peer is not this epoch's leader");
        return false;
    }
    uint8_t answer[5 + 64 + CLUSTER_MAC_LEN];
    const char *me = f->c->node_name;
    size_t ml = strlen(me);
    uint32_t m = htonl(CLUSTER_HELLO_FOLLOWER);
    memcpy(answer, &m, 4);
    answer[4] = (uint8_t)ml;
    memcpy(answer + 5, me, ml);
    cluster_hmac(f->c, head + 12, me, answer + 5 + ml);
    bufferevent_write(f->bev, answer, 5 + ml + CLUSTER_MAC_LEN);
    if (!(f->replica = mirror_replica_new(f->c->cfg.data_dir, &handlers, f))) {
        disconnect(f, "out of memory");
        return false;
    }
    f->hello_done = true;
    return true;
}

static void on_read(struct bufferevent *bev, void *arg)
{
    follower *f = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    if (!f->hello_done && (!read_hello(f, in) || !f->hello_done))
        return;
    /* all that arrived in one feed: its sync marks cost one fdatasync */
    size_t n = evbuffer_get_length(in);
    const uint8_t *p = n ? evbuffer_pullup(in, (ssize_t)n) : NULL;
    if (!n)
        return;
    f->applied_bytes += n; /* before the feed: its ack reports them */
    if (!p || mirror_replica_feed(f->replica, p, n) != MIRROR_APPLIED) {
        char why[300];
        snprintf(why, sizeof why, "%s", p ? mirror_replica_error(f->replica) : "out of memory");
        disconnect(f, why);
        return;
    }
    evbuffer_drain(in, n);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    follower *f = arg;
    if (what & BEV_EVENT_CONNECTED)
        return;
    disconnect(f, what & BEV_EVENT_EOF ? "the leader closed the connection"
                                       : "the connection failed");
}

static void connect_to(follower *f)
{
    const node_record *n = cluster_find_node(f->c, f->leader);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    if (!n || inet_pton(AF_INET, n->host, &sin.sin_addr) != 1)
        return; /* its record is not read yet (the next poll) */
    sin.sin_port = htons((uint16_t)n->replication_port);
    if (f->c->cfg.cluster.replication_ssl) {
        SSL *ssl = cluster_tls_client(f->c->tls_client, n->host);
        f->bev = ssl ? bufferevent_openssl_socket_new(f->c->base, -1, ssl,
                                                      BUFFEREVENT_SSL_CONNECTING,
                                                      BEV_OPT_CLOSE_ON_FREE)
                     : NULL;
        if (ssl && !f->bev)
            SSL_free(ssl);
    } else {
        f->bev = bufferevent_socket_new(f->c->base, -1, BEV_OPT_CLOSE_ON_FREE);
    }
    if (!f->bev)
        return;
    bufferevent_setcb(f->bev, on_read, NULL, on_event, f);
    bufferevent_enable(f->bev, EV_READ | EV_WRITE);
    if (bufferevent_socket_connect(f->bev, (struct sockaddr *)&sin, sizeof sin) != 0) {
        disconnect(f, NULL);
        return;
    }
    int one = 1;
    setsockopt(bufferevent_getfd(f->bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void follower_follow(follower *f, const char *leader_name, int64_t epoch)
{
    if (f->bev && epoch == f->epoch && strcmp(leader_name, f->leader) == 0)
        return;
    if (f->bev)
        disconnect(f, "a new leader was elected");
    if (etcd_now_ms() < f->next_try_ms)
        return;
    snprintf(f->leader, sizeof f->leader, "%s", leader_name);
    f->epoch = epoch;
    connect_to(f);
}

follower *follower_new(cluster *c)
{
    follower *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->c = c;
    char path[700];
    marker_path(f, path, sizeof path);
    f->whole = access(path, F_OK) != 0; /* what is on disk, until a snapshot begins */
    f->snapshot_ended = f->whole;
    return f;
}

void follower_free(follower *f)
{
    if (!f)
        return;
    disconnect(f, NULL);
    meta_close(f->meta);
    free(f);
}

bool follower_copy_whole(const follower *f) { return f->whole; }
uint64_t follower_acked(const follower *f) { return f->acked; }
bool follower_connected(const follower *f) { return f->hello_done; }
meta *follower_meta(const follower *f) { return f->meta; }
