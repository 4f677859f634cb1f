/* The set of shovels: a list sorted by (vhost, name) that follows the
 * runtime parameters of component "shovel".
 *
 * shovels_sync compares the list with the parameters of every vhost: a new
 * parameter starts a shovel, a changed value restarts it with the new
 * definition, a parameter gone (deleted, its vhost deleted) marks it dead.
 * It runs after each change the management API makes and every second,
 * for the changes that come another way. A shovel is never freed from
 * inside one of its clients' handlers: a dead one is freed by its own
 * event once both links are closed.
 *
 * Links to this broker (a URI without host) are in-memory pipes whose far
 * end is a trusted conn/ connection (conn_attach_trusted) on the same
 * loop, bounded as a socket is (PIPE_CAPACITY unread bytes).
 */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "shovel_int.h"

#define SYNC_MS 1000
#define PIPE_CAPACITY (4u << 20)
#define MAX_BACKOFF_MS 60000u

struct shovels {
    server *srv;
    loop *l;
    shovel *list;
    struct event *timer;
};

const char *shovel_state_name(shovel_state st)
{
    static const char *const names[] = {"starting", "running", "terminated"};
    return names[st];
}

server *shovels_server(shovels *set) { return set->srv; }
struct event_base *shovels_base(shovels *set) { return loop_base(set->l); }
transport_flusher *shovels_flusher(shovels *set) { return loop_flusher(set->l); }

transport *shovels_local_transport(shovels *set, const char *who)
{
    transport *ends[2];
    if (!transport_pipe_pair(loop_flusher(set->l), loop_base(set->l), PIPE_CAPACITY, ends))
        return NULL;
    conn_attach_trusted(set->srv, set->l, ends[1], who);
    return ends[0];
}

static void unlink_shovel(shovels *set, shovel *sh)
{
    for (shovel **p = &set->list; *p; p = &(*p)->next)
        if (*p == sh) {
            *p = sh->next;
            return;
        }
}

static void free_shovel(shovel *sh)
{
    shovel_link_free(sh);
    event_free(sh->retry);
    free(sh->value);
    free(sh);
}

/* The retry timer: start again, or free a dead shovel. */
static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
    shovel *sh = arg;
    (void)fd, (void)what;
    if (sh->dead) {
        unlink_shovel(sh->set, sh);
        free_shovel(sh);
        return;
    }
    sh->restarts++;
    shovel_link_start(sh);
}

void shovels_links_closed(shovel *sh)
{
    if (sh->dead) {
        event_del(sh->retry);
        event_active(sh->retry, 0, 0);
    } else if (sh->restart_now) {
        sh->restart_now = false;
        shovel_link_start(sh);
    } else if (sh->state == SHOVEL_TERMINATED && sh->cfg.reconnect_delay_ms &&
               !sh->cfg.unsupported[0]) {
        uint64_t delay = sh->cfg.reconnect_delay_ms;
        uint64_t cap = delay > MAX_BACKOFF_MS ? delay : MAX_BACKOFF_MS;
        for (unsigned i = 1; i < sh->failures && delay < cap; i++)
            delay *= 2;
        delay = delay < cap ? delay : cap;
        struct timeval tv = {(time_t)(delay / 1000), (suseconds_t)(delay % 1000) * 1000};
        evtimer_add(sh->retry, &tv);
    }
}

static void kill_shovel(shovel *sh)
{
    sh->dead = true;
    event_del(sh->retry);
    shovel_link_stop(sh);
}

void shovels_autodelete(shovel *sh)
{
    vhost *v = server_vhost(sh->set->srv, AMQP_CSTR(sh->vhost));
    if (v)
        param_delete(vhost_params(v), "shovel", sh->name);
    kill_shovel(sh);
}

static shovel *find(shovels *set, const char *vh, const char *name)
{
    for (shovel *sh = set->list; sh; sh = sh->next)
        if (!sh->dead && strcmp(sh->vhost, vh) == 0 && strcmp(sh->name, name) == 0)
            return sh;
    return NULL;
}

/* Reads the definition; one that cannot be read is a terminated shovel
 * with the reason, as a shovel whose start fails. */
static void configure(shovel *sh, const char *value)
{
    char err[256];
    free(sh->value);
    sh->value = strdup(value);
    if (!shovel_cfg_parse(value, &sh->cfg, err, sizeof err))
        snprintf(sh->cfg.unsupported, sizeof sh->cfg.unsupported, "%s", err);
}

static void add(shovels *set, const char *vh, const param_spec *p)
{
    shovel *sh = calloc(1, sizeof *sh);
    if (!sh || strlen(vh) >= sizeof sh->vhost || strlen(p->name) >= sizeof sh->name) {
        free(sh);
        return;
    }
    sh->set = set;
    strcpy(sh->vhost, vh);
    strcpy(sh->name, p->name);
    sh->retry = evtimer_new(loop_base(set->l), retry_cb, sh);
    if (!sh->retry) {
        free(sh);
        return;
    }
    configure(sh, p->value);
    shovel **at = &set->list;
    while (*at && (strcmp((*at)->vhost, vh) < 0 ||
                   (strcmp((*at)->vhost, vh) == 0 && strcmp((*at)->name, p->name) < 0)))
        at = &(*at)->next;
    sh->next = *at;
    *at = sh;
    shovel_link_start(sh);
}

typedef struct sync_ctx {
    shovels *set;
    const char *vhost;
    uint64_t seen; /* a mark per pass */
} sync_ctx;

static void sync_param(void *arg, const param_spec *p)
{
    sync_ctx *x = arg;
    shovel *sh = find(x->set, x->vhost, p->name);
    if (!sh) {
        add(x->set, x->vhost, p);
        sh = find(x->set, x->vhost, p->name);
    } else if (!sh->value || strcmp(sh->value, p->value) != 0) {
        configure(sh, p->value);
        sh->restart_now = true;
        event_del(sh->retry);
        shovel_set_state(sh, SHOVEL_STARTING, NULL);
        shovel_link_stop(sh);
    }
    if (sh)
        sh->seen = x->seen;
}

static void sync_vhost(void *arg, vhost *v)
{
    sync_ctx *x = arg;
    x->vhost = vhost_name(v);
    param_foreach(vhost_params(v), "shovel", sync_param, x);
}

void shovels_sync(shovels *set)
{
    static const uint64_t unseen = 0;
    sync_ctx x = {.set = set, .seen = 1};
    for (shovel *sh = set->list; sh; sh = sh->next)
        sh->seen = unseen;
    server_foreach_vhost(set->srv, sync_vhost, &x);
    for (shovel *sh = set->list; sh; sh = sh->next)
        if (!sh->dead && sh->seen == unseen)
            kill_shovel(sh);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    shovels_sync(arg);
}

shovels *shovels_new(server *s)
{
    shovels *set = calloc(1, sizeof *set);
    if (!set)
        return NULL;
    set->srv = s;
    set->l = server_loop(s, 0);
    set->timer = event_new(loop_base(set->l), -1, EV_PERSIST, timer_cb, set);
    struct timeval tv = {SYNC_MS / 1000, (SYNC_MS % 1000) * 1000};
    if (!set->timer || event_add(set->timer, &tv) < 0) {
        if (set->timer)
            event_free(set->timer);
        free(set);
        return NULL;
    }
    shovels_sync(set);
    return set;
}

void shovels_free(shovels *set)
{
    if (!set)
        return;
    event_free(set->timer);
    while (set->list) {
        shovel *sh = set->list;
        set->list = sh->next;
        free_shovel(sh);
    }
    free(set);
}

bool shovels_restart(shovels *set, const char *vh, const char *name)
{
    shovel *sh = find(set, vh, name);
    if (!sh)
        return false;
    log_msg(LOG_INFO, "shovel '%s' in vhost '%s' will be restarted", name, vh);
    sh->restart_now = true;
    event_del(sh->retry);
    shovel_set_state(sh, SHOVEL_STARTING, NULL);
    shovel_link_stop(sh);
    return true;
}

bool shovels_has(shovels *set, const char *vh, const char *name)
{
    return find(set, vh, name) != NULL;
}

void shovels_foreach(shovels *set, const char *vh,
                     void (*fn)(void *arg, const shovel_status *st), void *arg)
{
    for (shovel *sh = set->list; sh; sh = sh->next) {
        if (sh->dead || (vh && strcmp(vh, sh->vhost) != 0))
            continue;
        const shovel_cfg *c = &sh->cfg;
        bool src_q = c->has_src_queue, dest_x = c->has_dest_exchange;
        shovel_status st = {
            .vhost = sh->vhost, .name = sh->name, .state = sh->state, .reason = sh->reason,
            .since_s = sh->since_s, .src_uri = c->src_shown, .dest_uri = c->dest_shown,
            .src_queue = src_q ? c->src_queue : NULL,
            .src_exchange = src_q ? NULL : c->src_exchange,
            .src_exchange_key = src_q ? NULL : c->src_exchange_key,
            .dest_queue = c->has_dest_queue ? c->dest_queue : NULL,
            .dest_exchange = dest_x ? c->dest_exchange : NULL,
            .dest_exchange_key = c->has_dest_exchange_key ? c->dest_exchange_key : NULL,
            .forwarded = sh->forwarded, .acked = sh->acked,
            .unconfirmed = sh->next_seq - sh->head_seq, .restarts = sh->restarts,
        };
        fn(arg, &st);
    }
}
