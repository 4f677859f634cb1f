/* The server: what the whole process shares -- the configuration, the
 * metadata store and journal, users and permissions, the vhost registry,
 * the alarms and limits, and its loops. The modules above attach their
 * parts (server_set_*); broker/ builds and starts it all.
 *
 * Vhosts live in an array sorted by name (looked up by bisection on
 * connection.open and at load; few, and created rarely). Each entry keeps
 * the vhost's name, so the registry needs nothing of the vhost itself.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

typedef struct vhost_entry {
    const char *name; /* the vhost's own, alive while it is registered */
    vhost *v;
} vhost_entry;

struct server {
    config cfg;
    loop *loops[1]; /* one loop so far */
    size_t nloops;
    msg_ids *ids;
    meta *meta;
    journal *journal;
    struct stream_registry *streams; /* queue/stream_queue.c's */
    access_control *access;
    login_brake *brake;
    param_set *params; /* global runtime parameters */
    sconn_hub *stream_hub; /* the stream protocol's connections (streamconn/) */
    federation *federation; /* the federation links (federation/) */
    vhost_entry *vhosts;
    size_t nvhosts, vhosts_cap;
    size_t next_hint;        /* where server_vhost_next returned its last vhost */
    stats stats;             /* the whole broker's (admin/sampler.c) */
    server_counts summed;    /* the loops' counters added up (server_counters) */
    uint64_t started_at;     /* wall clock ms */
    char node_name[128];
    uint64_t name_seed;
    unsigned alarms;         /* SERVER_ALARM_* in effect */
    bool paging;             /* memory above the paging ratio of the watermark */
    bool journal_lagging;    /* see server_journal_lagging */
    size_t memory_limit;     /* bytes of memory (by the strategy) that raise the alarm */
    size_t paging_limit;     /* memory_limit x vm_memory_high_watermark_paging_ratio */
    size_t memory_used;      /* the last server_measure_memory */
    uint64_t disk_free;      /* the last server_measure_disk; 0 before */
    uint64_t content_limit;  /* budget for unfinished message bodies (conn.c counts them) */
    uint64_t accept_errors;
    _Atomic uint64_t conn_ids; /* every loop numbers its connections from it */
    char listen_ip[CONFIG_MAX_LISTENERS][SERVER_HOST_LEN];
    int listen_port[CONFIG_MAX_LISTENERS];
    char tls_ip[CONFIG_MAX_LISTENERS][SERVER_HOST_LEN]; /* AMQPS */
    int tls_port[CONFIG_MAX_LISTENERS];
    size_t ntls;
    size_t nlisteners;
    struct { server_reloader fn; void *arg; } reloaders[SERVER_MAX_RELOADERS];
    size_t nreloaders;
};

/* The limits that follow from the watermark in s->cfg. The body budget is
 * below the watermark, so bodies still arriving can never raise the alarm
 * by themselves; never below one maximal message. */
static void apply_watermark(server *s)
{
    const config *cfg = &s->cfg;
    s->memory_limit = cfg->memory_high_watermark_abs
                          ? cfg->memory_high_watermark_abs
                          : (size_t)((double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) *
                                     cfg->memory_high_watermark);
    s->paging_limit = (size_t)((double)s->memory_limit * cfg->memory_paging_ratio);
    s->content_limit = s->memory_limit / 2;
    if (s->content_limit < cfg->max_message_size + cfg->frame_max)
        s->content_limit = cfg->max_message_size + cfg->frame_max;
}

server *server_new(const config *cfg)
{
    server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->cfg = *cfg;
    s->started_at = wall_clock_ms();
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    if (cfg->cluster.n_endpoints) /* its name in the cluster (cluster/ defaults to the host name) */
        server_cluster_node_name(*cfg->cluster.node_name ? cfg->cluster.node_name : host,
                                 s->node_name, sizeof s->node_name);
    else
        snprintf(s->node_name, sizeof s->node_name, "warren@%.*s", (int)strcspn(host, "."), host);
    apply_watermark(s);
    s->name_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ monotonic_ms();
    if (!(s->ids = msg_ids_new()) || !(s->loops[0] = loop_new(s->ids))) {
        server_free(s);
        return NULL;
    }
    s->nloops = 1;
    return s;
}

void server_free(server *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nloops; i++)
        loop_free(s->loops[i]);
    msg_ids_free(s->ids);
    stats_free(&s->stats);
    free(s->vhosts);
    free(s);
}

const config *server_config(const server *s) { return &s->cfg; }
size_t server_loop_count(const server *s) { return s->nloops; }
loop *server_loop(server *s, size_t i) { return i < s->nloops ? s->loops[i] : NULL; }

void server_set_meta(server *s, meta *m) { s->meta = m; }
void server_set_journal(server *s, journal *j) { s->journal = j; }
void server_set_access(server *s, access_control *a) { s->access = a; }
void server_set_login_brake(server *s, login_brake *b) { s->brake = b; }
void server_set_params(server *s, param_set *p) { s->params = p; }
void server_set_stream_hub(server *s, sconn_hub *h) { s->stream_hub = h; }
sconn_hub *server_stream_hub(server *s) { return s->stream_hub; }
void server_set_federation(server *s, federation *f) { s->federation = f; }
federation *server_federation(server *s) { return s->federation; }
meta *server_meta(server *s) { return s->meta; }
struct stream_registry **server_streams(server *s) { return &s->streams; }
journal *server_journal(server *s) { return s->journal; }
access_control *server_access(server *s) { return s->access; }
login_brake *server_login_brake(server *s) { return s->brake; }
param_set *server_params(server *s) { return s->params; }

/* ---- vhosts ------------------------------------------------------------- */

static int cmp_name(const char *name, amqp_bytes key)
{
    size_t n = strlen(name);
    int c = memcmp(name, key.ptr, n < key.len ? n : key.len);
    return c ? c : (n < key.len ? -1 : n > key.len ? 1 : 0);
}

/* Index of the first vhost whose name is not below `name`. */
static size_t vhost_slot(const server *s, amqp_bytes name)
{
    size_t lo = 0, hi = s->nvhosts;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_name(s->vhosts[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

vhost *server_vhost(server *s, amqp_bytes name)
{
    size_t i = vhost_slot(s, name);
    return i < s->nvhosts && cmp_name(s->vhosts[i].name, name) == 0 ? s->vhosts[i].v : NULL;
}

void server_foreach_vhost(server *s, void (*fn)(void *arg, vhost *v), void *arg)
{
    for (size_t i = 0; i < s->nvhosts; i++)
        fn(arg, s->vhosts[i].v);
}

vhost *server_vhost_next(server *s, const vhost *prev)
{
    size_t i = 0;
    if (prev) { /* a walk asks for the one after the last it got: try there first */
        i = s->next_hint < s->nvhosts && s->vhosts[s->next_hint].v == prev ? s->next_hint : 0;
        while (i < s->nvhosts && s->vhosts[i].v != prev)
            i++;
        i++;
    }
    s->next_hint = i;
    return i < s->nvhosts ? s->vhosts[i].v : NULL;
}

bool server_vhost_insert(server *s, const char *name, vhost *v)
{
    size_t at = vhost_slot(s, AMQP_CSTR(name));
    invariant(at >= s->nvhosts || strcmp(s->vhosts[at].name, name) != 0);
    if (s->nvhosts == s->vhosts_cap) {
        size_t cap = s->vhosts_cap ? s->vhosts_cap * 2 : 8;
        vhost_entry *n = realloc(s->vhosts, cap * sizeof *n);
        if (!n)
            return false;
        s->vhosts = n;
        s->vhosts_cap = cap;
    }
    memmove(s->vhosts + at + 1, s->vhosts + at, (s->nvhosts - at) * sizeof *s->vhosts);
    s->vhosts[at] = (vhost_entry){name, v};
    s->nvhosts++;
    return true;
}

vhost *server_vhost_remove(server *s, const char *name)
{
    size_t at = vhost_slot(s, AMQP_CSTR(name));
    if (at >= s->nvhosts || strcmp(s->vhosts[at].name, name) != 0)
        return NULL;
    vhost *v = s->vhosts[at].v;
    memmove(s->vhosts + at, s->vhosts + at + 1, (s->nvhosts - at - 1) * sizeof *s->vhosts);
    s->nvhosts--;
    return v;
}

/* ---- names -------------------------------------------------------------- */

uint64_t server_random(server *s)
{
    uint64_t z = (s->name_seed += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* prefix + 22 base64url characters, as RabbitMQ's amq.gen- names. */
void server_random_name(server *s, const char *prefix, char *out, size_t outlen)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint64_t r[2] = {server_random(s), server_random(s)};
    char tail[23];
    for (int i = 0; i < 22; i++)
        tail[i] = alphabet[(r[i / 11] >> ((i % 11) * 6)) & 63];
    tail[22] = 0;
    snprintf(out, outlen, "%s%s", prefix, tail);
}

/* ---- alarms and limits -------------------------------------------------- */

unsigned server_alarms(const server *s) { return s->alarms; }
bool server_memory_alarm(const server *s) { return s->alarms & SERVER_ALARM_MEMORY; }
bool server_disk_alarm(const server *s) { return s->alarms & SERVER_ALARM_DISK; }

void server_set_alarm(server *s, unsigned alarm, bool on)
{
    s->alarms = on ? s->alarms | alarm : s->alarms & ~alarm;
}

size_t server_memory_limit(const server *s) { return s->memory_limit; }
size_t server_paging_limit(const server *s) { return s->paging_limit; }
bool server_paging(const server *s) { return s->paging; }
size_t server_memory_used(const server *s) { return s->memory_used; }
uint64_t server_disk_free(const server *s) { return s->disk_free; }
uint64_t server_content_limit(const server *s) { return s->content_limit; }

uint64_t server_content_share(const server *s)
{
    size_t n = server_socket_count(s);
    return s->content_limit / (n ? n : 1);
}

uint64_t server_new_conn_id(server *s) { return atomic_fetch_add(&s->conn_ids, 1) + 1; }

void server_set_watermark(server *s, double relative, uint64_t absolute)
{
    s->cfg.memory_high_watermark = relative;
    s->cfg.memory_high_watermark_abs = absolute;
    apply_watermark(s);
}

size_t server_message_memory(const server *s)
{
    size_t sum = 0;
    for (size_t i = 0; i < s->nloops; i++)
        sum += msg_pool_memory(loop_msgs(s->loops[i]));
    return sum;
}

/* The resident set: /proc/self/statm's second field, in pages. */
static size_t rss_bytes(void)
{
    char buf[128];
    unsigned long size = 0, rss = 0;
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    if (sscanf(buf, "%lu %lu", &size, &rss) != 2)
        return 0;
    return (size_t)rss * (size_t)sysconf(_SC_PAGESIZE);
}

size_t server_measure_memory(server *s)
{
    switch (s->cfg.memory_strategy) {
    case CONFIG_MEMORY_ALLOCATED: {
        struct mallinfo2 mi = mallinfo2();
        s->memory_used = mi.uordblks + mi.hblkhd; /* in use, in the heap and mmapped */
        break;
    }
    case CONFIG_MEMORY_LEGACY:
        s->memory_used = server_message_memory(s);
        break;
    default:
        s->memory_used = rss_bytes();
    }
    s->paging = s->memory_used > s->paging_limit;
    return s->memory_used;
}

uint64_t server_disk_free_limit(const server *s)
{
    const config *cfg = &s->cfg;
    if (cfg->disk_free_limit_relative > 0)
        return (uint64_t)((double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) *
                          cfg->disk_free_limit_relative);
    return cfg->disk_free_limit;
}

bool server_measure_disk(server *s)
{
    struct statvfs vfs;
    if (statvfs(s->cfg.data_dir, &vfs) != 0)
        return false;
    s->disk_free = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    return true;
}

/* Publishers pause while the journal holds more than this unwritten, and
 * go on once the disk has caught up to below a quarter of it. */
#define JOURNAL_LAG_BYTES (64u << 20)

bool server_journal_lagging(server *s)
{
    if (!s->journal)
        return false;
    uint64_t unwritten = journal_unwritten_bytes(s->journal);
    s->journal_lagging = unwritten > (s->journal_lagging ? JOURNAL_LAG_BYTES / 4 : JOURNAL_LAG_BYTES);
    return s->journal_lagging;
}

/* ---- statistics and introspection --------------------------------------- */

static void add_counts(server_counts *dst, const server_counts *src)
{
    /* every field is a uint64_t (checked below), so the sum goes word by word */
    uint64_t *d = (uint64_t *)dst;
    const uint64_t *x = (const uint64_t *)src;
    for (size_t i = 0; i < sizeof *dst / sizeof(uint64_t); i++)
        d[i] += x[i];
}
_Static_assert(sizeof(server_counts) % sizeof(uint64_t) == 0, "server_counts holds only uint64_t");

const server_counts *server_counters(server *s)
{
    memset(&s->summed, 0, sizeof s->summed);
    for (size_t i = 0; i < s->nloops; i++)
        add_counts(&s->summed, loop_counters(s->loops[i]));
    return &s->summed;
}

stats *server_stats(server *s) { return &s->stats; }
uint64_t server_started_at(const server *s) { return s->started_at; }
const char *server_node_name(const server *s) { return s->node_name; }

void server_cluster_node_name(const char *node, char *out, size_t cap)
{
    snprintf(out, cap, strchr(node, '@') ? "%s" : "warren@%s", node);
}

size_t server_conn_count(const server *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nloops; i++)
        n += loop_conn_count(s->loops[i]);
    return n;
}

size_t server_socket_count(const server *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nloops; i++)
        n += loop_socket_count(s->loops[i]);
    return n;
}

conn *server_conn_at(server *s, size_t i)
{
    for (size_t k = 0; k < s->nloops; k++) {
        size_t n = loop_conn_count(s->loops[k]);
        if (i < n)
            return loop_conn_at(s->loops[k], i);
        i -= n;
    }
    return NULL;
}

void server_count_accept_error(server *s) { s->accept_errors++; }
uint64_t server_accept_errors(const server *s) { return s->accept_errors; }

_Static_assert(SERVER_HOST_LEN >= INET6_ADDRSTRLEN, "room for an IPv6 address");

int server_sockaddr_host(const struct sockaddr *sa, char host[SERVER_HOST_LEN])
{
    strcpy(host, "?");
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, SERVER_HOST_LEN);
        return ntohs(in->sin_port);
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        const uint8_t *a = in6->sin6_addr.s6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            inet_ntop(AF_INET, a + 12, host, SERVER_HOST_LEN);
        else
            inet_ntop(AF_INET6, a, host, SERVER_HOST_LEN);
        return ntohs(in6->sin6_port);
    }
    return 0;
}

bool server_sockaddr_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

/* peer is "host:port", an IPv6 host in brackets as RabbitMQ's names have
 * them ("[::1]:40628 -> [::1]:5672"); peer_host and host go without. */
char *server_conn_names(const transport *t, const char *peer, server_conn_name *out)
{
    struct sockaddr_storage ss;
    char host[SERVER_HOST_LEN] = "?", buf[512];
    out->port = transport_address(t, true, &ss) ? server_sockaddr_host((struct sockaddr *)&ss, host)
                                                : 0;
    const char *colon = strrchr(peer, ':');
    int bracket = peer[0] == '[';
    int peer_host_len = colon ? (int)(colon - peer) - 2 * bracket : 0;
    out->peer_port = colon ? atoi(colon + 1) : 0;
    /* peer, peer_host, host and name, each NUL-terminated */
    int n = snprintf(buf, sizeof buf, strchr(host, ':') ? "%.100s%c%.*s%c%s%c%.100s -> [%s]:%d"
                                                         : "%.100s%c%.*s%c%s%c%.100s -> %s:%d",
                     peer, 0, peer_host_len > 0 ? peer_host_len : 0, peer + bracket, 0, host, 0,
                     peer, host, out->port);
    char *names = n < 0 || (size_t)n >= sizeof buf ? NULL : malloc((size_t)n + 1);
    if (!names)
        return NULL;
    memcpy(names, buf, (size_t)n + 1);
    out->peer = names;
    out->peer_host = out->peer + strlen(out->peer) + 1;
    out->host = out->peer_host + strlen(out->peer_host) + 1;
    out->name = out->host + strlen(out->host) + 1;
    return names;
}

void server_add_reloader(server *s, server_reloader fn, void *arg)
{
    if (s->nreloaders < SERVER_MAX_RELOADERS) {
        s->reloaders[s->nreloaders].fn = fn;
        s->reloaders[s->nreloaders++].arg = arg;
    }
}

/* Every listener is tried, also after one fails; the first error is told. */
bool server_reload_certificates(server *s, char *err, size_t errlen)
{
    bool ok = true;
    for (size_t i = 0; i < s->nreloaders; i++) {
        char why[600];
        if (!s->reloaders[i].fn(s->reloaders[i].arg, why, sizeof why) && ok) {
            snprintf(err, errlen, "%s", why);
            ok = false;
        }
    }
    return ok;
}

void server_add_listener(server *s, const char *ip, int port)
{
    if (s->nlisteners == CONFIG_MAX_LISTENERS)
        return;
    snprintf(s->listen_ip[s->nlisteners], SERVER_HOST_LEN, "%s", ip);
    s->listen_port[s->nlisteners++] = port;
}

void server_add_tls_listener(server *s, const char *ip, int port)
{
    if (s->ntls == CONFIG_MAX_LISTENERS)
        return;
    snprintf(s->tls_ip[s->ntls], SERVER_HOST_LEN, "%s", ip);
    s->tls_port[s->ntls++] = port;
}

size_t server_amqps_listener_count(const server *s) { return s->ntls; }

int server_amqps_listener(const server *s, size_t i, const char **ip)
{
    *ip = s->tls_ip[i];
    return s->tls_port[i];
}

int server_amqp_port(const server *s) { return s->nlisteners ? s->listen_port[0] : 0; }
size_t server_amqp_listener_count(const server *s) { return s->nlisteners; }

int server_amqp_listener(const server *s, size_t i, const char **ip)
{
    *ip = s->listen_ip[i];
    return s->listen_port[i];
}
