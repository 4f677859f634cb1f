/* The link manager: which links should run, from the policies and the
 * upstream parameters, and the timer that drives them.
 *
 * Data: one list of links in status order (vhost, exchanges before
 * queues, name, upstream). Each link is keyed by (vhost, kind, object,
 * upstream) and remembers the JSON it was made from (the upstream's value
 * and its set element's); a link whose JSON changed is made again, as
 * RabbitMQ restarts links when an upstream changes.
 *
 * Reconcile (once a second): every exchange and queue of a vhost that has
 * upstreams is looked at -- its applied policy's federation-upstream,
 * -set ("all": every upstream of the vhost) or -pattern key names the
 * upstreams -- and each (object, upstream) pair gets its link (mark); the
 * links left unmarked stop (sweep). Objects RabbitMQ's plugin declared for
 * its own use (x-internal-purpose) are never federated, nor is the default
 * exchange.
 *
 * The timer runs every 100 ms while there are links (reconnects, queue
 * links' demand; bindings and reconcile once a second), every 10 ms while
 * a queue link waits for its local consumers to take what is there (so
 * that it consumes again as soon as they have, as RabbitMQ's queue tells
 * its link at once), and once a second when there are no links.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>

#include "../pattern/pattern.h"
#include "fed_int.h"

#define UPSTREAM "federation-upstream"
#define UPSTREAM_SET "federation-upstream-set"
#define EAGER_MS 10 /* a queue link waits for its local consumers to empty the queue */
#define TICK_MS 100
#define IDLE_MS 1000 /* and how often policies and bindings are looked at */

typedef struct want {
    federation *f;
    vhost *v;
    bool queue;
    const char *object, *policy;
    pattern_re *re;
    pattern_scratch *scratch;
} want;

static int order(const fed_link *a, bool is_queue, const char *vh, const char *object,
                 const char *upstream)
{
    int c = strcmp(a->vhost, vh);
    if (!c)
        c = (int)a->queue - (int)is_queue;
    if (!c)
        c = strcmp(a->object, object);
    return c ? c : strcmp(a->up.name, upstream);
}

/* The link for (w's object, upstream `name`) with `element` over it. */
static void desire(want *w, const char *name, const char *element)
{
    param_spec p;
    if (!param_get(vhost_params(w->v), UPSTREAM, name, &p))
        return; /* a set may name upstreams that do not exist (yet) */
    size_t n = strlen(p.value) + (element ? strlen(element) : 0) + 2;
    char *json = malloc(n);
    if (!json)
        return;
    snprintf(json, n, "%s\n%s", p.value, element ? element : "");
    fed_link **pp = &w->f->links;
    int c = 1;
    while (*pp && (c = order(*pp, w->queue, vhost_name(w->v), w->object, name)) < 0)
        pp = &(*pp)->next;
    if (*pp && c == 0 && strcmp((*pp)->config, json) == 0) {
        (*pp)->seen = true;
    } else {
        if (*pp && c == 0) { /* its upstream changed: made again */
            fed_link *old = *pp;
            *pp = old->next;
            fed_link_retire(old);
        }
        fed_upstream up;
        fed_link *k = NULL;
        if (fed_upstream_read(name, p.value, element, w->object, &up))
            k = fed_link_new(w->f, w->queue, vhost_name(w->v), w->object, w->policy, json, &up);
        if (k) {
            k->seen = true;
            k->next = *pp;
            *pp = k;
        }
    }
    free(json);
}

static void each_upstream(void *arg, const param_spec *p)
{
    want *w = arg;
    if (!w->re || pattern_match(w->re, w->scratch, p->name, strlen(p->name)) == PATTERN_MATCH)
        desire(w, p->name, NULL);
}

/* The elements of the set named `name` (a JSON array of objects). */
static void set_members(want *w, const char *name)
{
    param_spec p;
    json_t *set, *e;
    size_t i;
    if (!param_get(vhost_params(w->v), UPSTREAM_SET, name, &p) ||
        !(set = json_loads(p.value, JSON_DECODE_ANY, NULL)))
        return;
    json_array_foreach(set, i, e) {
        const char *up = json_string_value(json_object_get(e, "upstream"));
        char *text = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
        if (up && text)
            desire(w, up, text);
        free(text);
    }
    json_decref(set);
}

/* The upstreams a policy definition names for w's object. */
static void object_wants(want *w, amqp_bytes def)
{
    amqp_field f;
    char name[FED_NAME_MAX];
    if (amqp_table_get(def, UPSTREAM, &f) && f.type == 'S') {
        snprintf(name, sizeof name, "%.*s", (int)f.v.bytes.len, (const char *)f.v.bytes.ptr);
        desire(w, name, NULL);
    } else if (amqp_table_get(def, UPSTREAM_SET, &f) && f.type == 'S') {
        snprintf(name, sizeof name, "%.*s", (int)f.v.bytes.len, (const char *)f.v.bytes.ptr);
        if (strcmp(name, "all") == 0)
            param_foreach(vhost_params(w->v), UPSTREAM, each_upstream, w);
        else
            set_members(w, name);
    } else if (amqp_table_get(def, "federation-upstream-pattern", &f) && f.type == 'S') {
        pattern_error e;
        w->re = pattern_compile((const char *)f.v.bytes.ptr, f.v.bytes.len, 0, &e);
        if (w->re && (w->scratch = pattern_scratch_new()))
            param_foreach(vhost_params(w->v), UPSTREAM, each_upstream, w);
        pattern_free(w->re);
        pattern_scratch_free(w->scratch);
        w->re = NULL;
        w->scratch = NULL;
    }
}

static bool internal_purpose(amqp_bytes args)
{
    amqp_field f;
    return amqp_table_get(args, "x-internal-purpose", &f);
}

static void each_queue(void *arg, queue *q)
{
    want *w = arg;
    policy_applied ap;
    char name[FED_NAME_MAX];
    policy_of_queue(q, &ap);
    if (!ap.policy || internal_purpose(queue_arguments(q)))
        return;
    amqp_bytes qn = queue_name(q);
    snprintf(name, sizeof name, "%.*s", (int)qn.len, (const char *)qn.ptr);
    w->queue = true;
    w->object = name;
    w->policy = ap.policy;
    object_wants(w, ap.definition);
}

static void each_exchange(void *arg, route_exchange *ex)
{
    want *w = arg;
    policy_spec p;
    char name[FED_NAME_MAX];
    amqp_bytes xn = route_exchange_name(ex);
    const char *policy = route_exchange_policy(ex);
    if (!policy || xn.len == 0 || internal_purpose(route_exchange_arguments(ex)) ||
        !policy_get(w->v, policy, false, &p))
        return;
    snprintf(name, sizeof name, "%.*s", (int)xn.len, (const char *)xn.ptr);
    w->queue = false;
    w->object = name;
    w->policy = policy;
    object_wants(w, p.definition);
}

static void count_one(void *arg, const param_spec *p) { (void)p, ++*(size_t *)arg; }

/* The name this broker goes by in x-received-from and x-bound-from: the
 * global parameter cluster_name (a JSON string, as RabbitMQ's
 * set_cluster_name stores it), else the node's name. */
static void read_cluster_name(federation *f)
{
    param_spec p;
    json_t *v = param_get(server_params(f->s), NULL, "cluster_name", &p)
                    ? json_loads(p.value, JSON_DECODE_ANY, NULL) : NULL;
    snprintf(f->cluster, sizeof f->cluster, "%s",
             json_is_string(v) ? json_string_value(v) : server_node_name(f->s));
    json_decref(v);
}

static void reconcile(federation *f)
{
    read_cluster_name(f);
    for (fed_link *k = f->links; k; k = k->next)
        k->seen = false;
    for (vhost *v = server_vhost_next(f->s, NULL); v; v = server_vhost_next(f->s, v)) {
        size_t upstreams = 0;
        param_foreach(vhost_params(v), UPSTREAM, count_one, &upstreams);
        if (!upstreams || vhost_closing(v))
            continue;
        want w = {.f = f, .v = v};
        route_foreach_exchange(vhost_routes(v), each_exchange, &w);
        vhost_foreach_queue(v, each_queue, &w);
    }
    for (fed_link **pp = &f->links; *pp;) {
        fed_link *k = *pp;
        if (k->seen) {
            pp = &k->next;
            continue;
        }
        *pp = k->next;
        fed_link_retire(k);
    }
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
    federation *f = arg;
    (void)fd, (void)what;
    loop_touch_clock(f->l);
    uint64_t now = loop_now_ms(f->l);
    bool whole = !f->links || now >= f->reconcile_at;
    if (whole) {
        reconcile(f);
        f->reconcile_at = now + IDLE_MS;
    }
    bool alarm = server_alarms(f->s) != 0, eager = false;
    for (fed_link *k = f->links; k; k = k->next)
        eager |= fed_link_tick(k, now, whole, alarm);
    uint32_t ms = eager ? EAGER_MS : f->links ? TICK_MS : IDLE_MS;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(f->timer, &tv);
}

federation *federation_new(server *s)
{
    federation *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->s = s;
    f->l = server_loop(s, 0);
    if (!(f->timer = evtimer_new(loop_base(f->l), tick_cb, f))) {
        free(f);
        return NULL;
    }
    struct timeval tv = {IDLE_MS / 1000, 0};
    evtimer_add(f->timer, &tv);
    return f;
}

void federation_free(federation *f)
{
    if (!f)
        return;
    for (fed_link **list = &f->links; list; list = list == &f->links ? &f->retired : NULL)
        while (*list) {
            fed_link *k = *list;
            *list = k->next;
            fed_link_free(k);
        }
    event_free(f->timer);
    free(f);
}

void federation_journal_synced(federation *f, journal_seq synced)
{
    for (fed_link *k = f->links; k; k = k->next)
        fed_link_synced(k, synced);
    for (fed_link *k = f->retired, *next; k; k = next) {
        next = k->next; /* a retired link may finish and close here */
        fed_link_synced(k, synced);
    }
}

bool federation_restart_link(federation *f, const char *vhost_name, const char *id)
{
    for (fed_link *k = f->links; k; k = k->next)
        if (strcmp(k->vhost, vhost_name) == 0 && strcmp(k->id, id) == 0) {
            log_msg(LOG_INFO, "federation link for %s '%s' in vhost '%s' (upstream '%s') restarted",
                    k->queue ? "queue" : "exchange", k->object, k->vhost, k->up.name);
            fed_link_restart(k);
            return true;
        }
    return false;
}

void federation_foreach_link(federation *f, void (*fn)(void *arg, const fed_link_info *l),
                             void *arg)
{
    static const char *const names[] = {"starting", "running", "error"};
    for (fed_link *k = f->links; k; k = k->next) {
        fed_link_info i = {
            .queue = k->queue, .vhost = k->vhost, .object = k->object,
            .upstream_object = k->queue ? k->up.queue : k->up.exchange, .upstream = k->up.name,
            .consumer_tag = k->up.consumer_tag, .id = k->id, .status = names[k->status],
            .error = k->status == FED_ERROR ? k->error : "",
            .local_connection = k->status == FED_RUNNING ? k->conn_name : "", .uri = k->uri,
            .timestamp = k->changed_at};
        fn(arg, &i);
    }
}
