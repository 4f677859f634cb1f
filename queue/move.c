/* Moving messages out of a queue (DLQ redrive): see queue.h's "moving
 * messages". A move is a record in its vhost's list (vhost_moves), one per
 * source queue, kept after it ends so its report can still be read:
 *
 *   running --(every message examined, or count reached)--> finished
 *      |  \--(DELETE)--> cancelled
 *       \---(source or destination gone, too much left in place)--> stopped
 *
 * While running it holds a reference on the source queue (queue_hold) and a
 * timer on the loop. Every TICK_MS the timer adds rate * elapsed to a
 * credit and moves that many messages, at most SLICE_MAX, so AMQP traffic
 * keeps the loop between slices; while the journal lags behind the disk or
 * the memory alarm is on the slice is skipped, as publishers wait then.
 *
 * Each message is taken from the head of the source (queue_get, which reads
 * paged-out messages back) and, in the same callback, persist_move settles
 * it there and enqueues it in its destination as one atomic journal group,
 * then queue_publish puts it in. The message itself moves (same properties,
 * same journal record) unless an exchange destination gives it a new
 * routing key. A message that cannot go (no x-death source, unroutable, a
 * full reject-publish destination) or is filtered out is held aside and put back at its place
 * (queue_requeue) when the move ends: until then the journal still has it
 * in the source, so a crash brings it back there. At most HOLD_MAX are held.
 *
 * `total` is fixed at the start (the ready count, or the count asked for),
 * so messages arriving during the move, or routed back to the source by an
 * exchange, are not moved twice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "queue.h"

#define TICK_MS 10
#define SLICE_MAX 256
#define HOLD_MAX 100000

typedef struct move_dest_count {
    char *queue; /* NULL: the "other" row */
    uint64_t n;
} move_dest_count;

struct move {
    struct move *next;
    vhost *v;
    amqp_bytes source; /* owned copy of the name */
    queue *q;          /* held while running, else NULL */
    struct event *timer;
    move_progress p; /* p.dest, p.routing_key point into `names` */
    uint8_t *names;
    uint64_t examined, last_ms;
    double credit;
    queue_item *held;
    size_t nheld, held_cap;
    move_dest_count report[MOVE_REPORT_MAX + 1];
    size_t nreport;
};

static struct move *find(vhost *v, amqp_bytes name)
{
    for (struct move *mv = *vhost_moves(v); mv; mv = mv->next)
        if (amqp_bytes_equal(mv->source, name))
            return mv;
    return NULL;
}

static void free_report(struct move *mv)
{
    for (size_t i = 0; i < mv->nreport; i++)
        free(mv->report[i].queue);
    memset(mv->report, 0, sizeof mv->report);
    mv->nreport = 0;
}

/* Counts one message gone to `q` in the report. */
static void tally(struct move *mv, queue *q)
{
    amqp_bytes name = queue_name(q);
    size_t i = 0;
    while (i < mv->nreport && mv->report[i].queue && !amqp_bytes_equal_cstr(name, mv->report[i].queue))
        i++;
    if (i == mv->nreport && i < MOVE_REPORT_MAX) {
        char *copy = malloc(name.len + 1);
        if (copy) {
            memcpy(copy, name.ptr, name.len);
            copy[name.len] = 0;
        }
        mv->report[mv->nreport++] = (move_dest_count){.queue = copy};
    } else if (i == mv->nreport) { /* beyond the table: the "other" row */
        i = MOVE_REPORT_MAX;
        mv->nreport = MOVE_REPORT_MAX + 1;
    }
    mv->report[i].n++;
}

/* Puts the held messages back at their places (or drops them with a
 * deleted queue, whose journal records were settled with it). */
static void put_back(struct move *mv)
{
    for (size_t i = mv->nheld; i-- > 0;) {
        if (!queue_is_deleted(mv->q))
            queue_requeue(mv->q, mv->held[i], QUEUE_RETURN_PLAIN);
        msg_unref(mv->held[i].m);
    }
    mv->nheld = 0;
    free(mv->held);
    mv->held = NULL;
    mv->held_cap = 0;
    if (!queue_is_deleted(mv->q))
        queue_dispatch(mv->q);
}

static void end(struct move *mv, move_state state, const char *reason)
{
    if (mv->p.state != MOVE_RUNNING)
        return;
    mv->p.state = state;
    mv->p.reason = reason;
    mv->p.finished_at = wall_clock_ms();
    event_free(mv->timer);
    mv->timer = NULL;
    put_back(mv);
    queue_release(mv->q);
    mv->q = NULL;
}

static bool hold(struct move *mv, queue_item it, move_skip why)
{
    if (mv->nheld == mv->held_cap) {
        size_t cap = mv->held_cap ? mv->held_cap * 2 : 64;
        queue_item *h = cap <= HOLD_MAX ? realloc(mv->held, cap * sizeof *h) : NULL;
        if (!h)
            return false;
        mv->held = h;
        mv->held_cap = cap;
    }
    mv->held[mv->nheld++] = it;
    mv->p.skipped[why]++;
    return true;
}

static bool field_str(amqp_bytes table, const char *key, amqp_bytes *out)
{
    amqp_field f;
    if (!amqp_table_get(table, key, &f) || f.type != 'S')
        return false;
    *out = f.v.bytes;
    return true;
}

/* The queue `m` last died in before reaching `from`: the newest x-death
 * entry naming another queue, else x-first-death-queue. NULL if none or
 * that queue is gone. */
static queue *source_of(vhost *v, queue *from, const msg *m)
{
    amqp_basic_properties p;
    if (amqp_properties_decode(msg_properties(m), &p, NULL) != AMQP_OK ||
        !(p.flags & AMQP_BASIC_HEADERS_FLAG))
        return NULL;
    amqp_field deaths, e;
    amqp_bytes name;
    if (amqp_table_get(p.headers, "x-death", &deaths) && deaths.type == 'A') {
        amqp_iter it;
        amqp_iter_init(&it, deaths.v.bytes);
        while (amqp_array_next(&it, &e))
            if (e.type == 'F' && field_str(e.v.bytes, "queue", &name) &&
                !amqp_bytes_equal(name, queue_name(from)))
                return vhost_queue_find(v, name);
    }
    if (field_str(p.headers, "x-first-death-queue", &name) &&
        !amqp_bytes_equal(name, queue_name(from)))
        return vhost_queue_find(v, name);
    return NULL;
}

/* Whether a reject-publish destination would refuse `m` now. */
static bool would_refuse(queue *q, const msg *m)
{
    const queue_args *a = queue_get_args(q);
    if (a->overflow == QUEUE_DROP_HEAD)
        return false;
    queue_info qi;
    queue_describe(q, &qi);
    return (a->max_length >= 0 && (uint64_t)qi.ready + 1 > (uint64_t)a->max_length) ||
           (a->max_length_bytes >= 0 &&
            qi.ready_bytes + msg_body_size(m) > (uint64_t)a->max_length_bytes);
}

/* Settles `it` in the source and enqueues `copy` in targets[0..n). */
static void deliver(struct move *mv, queue_item it, msg *copy, queue **targets, size_t n)
{
    uint64_t now = loop_now_ms(vhost_loop(mv->v));
    int64_t ttl = it.expires_at ? (it.expires_at > now ? (int64_t)(it.expires_at - now) : 0) : -1;
    persist_move(mv->q, it.m, JOURNAL_MOVE, "redrive", copy, targets, n);
    for (size_t i = 0; i < n; i++) {
        if (!queue_publish(targets[i], copy, ttl)) /* out of memory only: checked above */
            persist_settle(targets[i], copy, JOURNAL_DROP);
        tally(mv, targets[i]);
    }
    mv->p.moved++;
}

/* Moves `it` to one queue, or says in *why why it stays. */
static void to_queue(struct move *mv, queue_item it, queue *dest, move_skip *why)
{
    if (!dest) {
        *why = MOVE_SKIP_NO_SOURCE;
        return;
    }
    if (would_refuse(dest, it.m)) {
        *why = MOVE_SKIP_FULL;
        return;
    }
    deliver(mv, it, it.m, &dest, 1);
    msg_unref(it.m);
    *why = MOVE_SKIPS;
}

/* Routes `it` through `ex`, or says in *why why it stays. */
static void to_exchange(struct move *mv, queue_item it, route_exchange *ex, move_skip *why)
{
    amqp_bytes key = mv->p.has_routing_key ? mv->p.routing_key : msg_routing_key(it.m);
    msg *copy = it.m;
    if (!amqp_bytes_equal(key, msg_routing_key(it.m)) ||
        !amqp_bytes_equal(mv->p.dest, msg_exchange(it.m)))
        copy = msg_copy_with(loop_msgs(vhost_loop(mv->v)), it.m, mv->p.dest, key, msg_properties(it.m));
    else
        msg_ref(copy);
    amqp_basic_properties p;
    queue *local[16], **targets = local;
    size_t n = 0;
    if (copy && amqp_properties_decode(msg_properties(copy), &p, NULL) == AMQP_OK)
        n = vhost_route(mv->v, ex, key, p.headers, copy, local, 16, &targets);
    *why = MOVE_SKIP_UNROUTABLE;
    bool full = false;
    for (size_t i = 0; i < n; i++)
        full |= would_refuse(targets[i], copy);
    if (n && !full) {
        deliver(mv, it, copy, targets, n);
        msg_unref(it.m);
        *why = MOVE_SKIPS;
    } else if (full) {
        *why = MOVE_SKIP_FULL;
    }
    if (targets != local)
        free(targets);
    if (copy)
        msg_unref(copy);
}

/* Whether `m` passes the header filter. */
static bool matches(const struct move *mv, const msg *m)
{
    if (!mv->p.match_header.len)
        return true;
    amqp_basic_properties p;
    amqp_field f;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)mv->p.match_header.len,
             (const char *)mv->p.match_header.ptr);
    if (amqp_properties_decode(msg_properties(m), &p, NULL) != AMQP_OK ||
        !(p.flags & AMQP_BASIC_HEADERS_FLAG) || !amqp_table_get(p.headers, name, &f))
        return false;
    if (!mv->p.has_match_value)
        return true;
    amqp_bytes want = mv->p.match_value;
    char text[32];
    int64_t i;
    if (f.type == 'S')
        return amqp_bytes_equal(f.v.bytes, want);
    if (f.type == 't')
        return amqp_bytes_equal_cstr(want, f.v.i ? "true" : "false");
    if (!amqp_field_int(&f, &i))
        return false;
    snprintf(text, sizeof text, "%lld", (long long)i);
    return amqp_bytes_equal_cstr(want, text);
}

/* Moves one message; false when the move must end (*state says how). */
static bool step(struct move *mv, move_state *state, const char **reason)
{
    queue_item it;
    if (mv->examined >= mv->p.total || !queue_get(mv->q, &it)) {
        *state = MOVE_FINISHED;
        return false;
    }
    mv->examined++;
    move_skip why = MOVE_SKIPS;
    if (!matches(mv, it.m)) {
        why = MOVE_SKIP_NO_MATCH;
    } else if (mv->p.to == MOVE_TO_EXCHANGE) {
        route_exchange *ex = route_exchange_find(vhost_routes(mv->v), mv->p.dest);
        if (ex) {
            to_exchange(mv, it, ex, &why);
        } else {
            queue_requeue(mv->q, it, QUEUE_RETURN_PLAIN);
            msg_unref(it.m);
            *state = MOVE_STOPPED;
            *reason = "the destination exchange was deleted";
            return false;
        }
    } else {
        queue *dest = mv->p.to == MOVE_TO_QUEUE ? vhost_queue_find(mv->v, mv->p.dest)
                                                : source_of(mv->v, mv->q, it.m);
        if (dest == mv->q)
            dest = NULL;
        if (!dest && mv->p.to == MOVE_TO_QUEUE) {
            queue_requeue(mv->q, it, QUEUE_RETURN_PLAIN);
            msg_unref(it.m);
            *state = MOVE_STOPPED;
            *reason = "the destination queue was deleted";
            return false;
        }
        to_queue(mv, it, dest, &why);
    }
    if (why != MOVE_SKIPS && !hold(mv, it, why)) {
        queue_requeue(mv->q, it, QUEUE_RETURN_PLAIN);
        msg_unref(it.m);
        *state = MOVE_STOPPED;
        *reason = "too many messages left in place";
        return false;
    }
    return true;
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct move *mv = arg;
    loop *l = vhost_loop(mv->v);
    loop_touch_clock(l);
    uint64_t now = loop_now_ms(l);
    double cap = mv->p.rate / 10.0 + 1; /* at most 100 ms worth saved up */
    mv->credit += (double)mv->p.rate * (double)(now - mv->last_ms) / 1000.0;
    if (mv->credit > cap)
        mv->credit = cap;
    mv->last_ms = now;
    if (queue_is_deleted(mv->q)) {
        end(mv, MOVE_STOPPED, "the source queue was deleted");
        return;
    }
    server *s = vhost_server(mv->v);
    if (server_journal_lagging(s) || server_alarms(s))
        return;
    move_state state = MOVE_FINISHED;
    const char *reason = "";
    for (int i = 0; i < SLICE_MAX && mv->credit >= 1; i++, mv->credit -= 1)
        if (!step(mv, &state, &reason)) {
            end(mv, state, reason);
            return;
        }
    if (mv->examined >= mv->p.total)
        end(mv, MOVE_FINISHED, "");
}

/* Checks the spec against `v`; AMQP_OK or the error. */
static int check(vhost *v, queue *q, const move_spec *spec, amqp_error *err)
{
    if (spec->to == MOVE_TO_QUEUE) {
        queue *d = vhost_queue_find(v, spec->dest);
        if (!d)
            return amqp_fail(err, AMQP_NOT_FOUND, 0, "no queue '%.*s' in vhost '%s'",
                             (int)spec->dest.len, (const char *)spec->dest.ptr, vhost_name(v));
        if (d == q)
            return amqp_fail(err, AMQP_PRECONDITION_FAILED, 0,
                             "the destination is the source queue itself");
    }
    if (spec->to == MOVE_TO_EXCHANGE && !route_exchange_find(vhost_routes(v), spec->dest))
        return amqp_fail(err, AMQP_NOT_FOUND, 0, "no exchange '%.*s' in vhost '%s'",
                         (int)spec->dest.len, (const char *)spec->dest.ptr, vhost_name(v));
    return AMQP_OK;
}

/* The move record for `q`, reset for a new run; NULL on OOM. */
static struct move *record(vhost *v, queue *q, const move_spec *spec)
{
    struct move *mv = find(v, queue_name(q));
    if (!mv) {
        mv = calloc(1, sizeof *mv);
        uint8_t *name = malloc(queue_name(q).len + 1);
        if (!mv || !name) {
            free(mv);
            free(name);
            return NULL;
        }
        memcpy(name, queue_name(q).ptr, queue_name(q).len);
        mv->source = (amqp_bytes){name, queue_name(q).len};
        mv->v = v;
        mv->next = *vhost_moves(v);
        *vhost_moves(v) = mv;
    }
    const amqp_bytes *parts[] = {&spec->dest, &spec->routing_key, &spec->match_header,
                                 &spec->match_value};
    size_t len = 1;
    for (size_t i = 0; i < 4; i++)
        len += parts[i]->len;
    uint8_t *names = malloc(len), *at = names;
    if (!names)
        return NULL;
    for (size_t i = 0; i < 4; i++) {
        if (parts[i]->len) /* an absent part may be {NULL, 0} */
            memcpy(at, parts[i]->ptr, parts[i]->len);
        at += parts[i]->len;
    }
    free(mv->names);
    mv->names = names;
    free_report(mv);
    return mv;
}

int queue_move_start(vhost *v, amqp_bytes qname, const move_spec *spec, amqp_error *err)
{
    queue *q = vhost_queue_find(v, qname);
    if (!q)
        return amqp_fail(err, AMQP_NOT_FOUND, 0, "no queue '%.*s' in vhost '%s'", (int)qname.len,
                         (const char *)qname.ptr, vhost_name(v));
    struct move *old = find(v, qname);
    if (old && old->p.state == MOVE_RUNNING)
        return amqp_fail(err, AMQP_RESOURCE_LOCKED, 0, "a move from queue '%.*s' is running",
                         (int)qname.len, (const char *)qname.ptr);
    if (check(v, q, spec, err) != AMQP_OK)
        return AMQP_ERROR;
    struct move *mv = record(v, q, spec);
    struct event *timer =
        mv ? event_new(loop_base(vhost_loop(v)), -1, EV_PERSIST, tick, mv) : NULL;
    if (!timer)
        return amqp_fail(err, AMQP_INTERNAL_ERROR, 0, "out of memory");
    uint64_t ready = queue_ready_count(q);
    const uint8_t *rk = mv->names + spec->dest.len, *mh = rk + spec->routing_key.len,
                  *mval = mh + spec->match_header.len;
    mv->p = (move_progress){.state = MOVE_RUNNING,
                            .reason = "",
                            .to = spec->to,
                            .dest = {mv->names, spec->dest.len},
                            .routing_key = {rk, spec->routing_key.len},
                            .has_routing_key = spec->has_routing_key,
                            .match_header = {mh, spec->match_header.len},
                            .match_value = {mval, spec->match_value.len},
                            .has_match_value = spec->has_match_value,
                            .rate = spec->rate ? spec->rate : 1,
                            .total = spec->count && spec->count < ready ? spec->count : ready,
                            .started_at = wall_clock_ms()};
    mv->q = q;
    mv->timer = timer;
    mv->examined = 0;
    mv->credit = 1; /* the first tick moves at once */
    mv->last_ms = loop_now_ms(vhost_loop(v));
    queue_hold(q);
    struct timeval tv = {0, TICK_MS * 1000};
    event_add(timer, &tv);
    log_msg(LOG_INFO, "queue '%.*s' in vhost '%s': moving %llu messages", (int)qname.len,
            (const char *)qname.ptr, vhost_name(v), (unsigned long long)mv->p.total);
    return AMQP_OK;
}

bool queue_move_progress(vhost *v, amqp_bytes qname, move_progress *out)
{
    struct move *mv = find(v, qname);
    if (mv)
        *out = mv->p;
    return mv != NULL;
}

void queue_move_report(vhost *v, amqp_bytes qname,
                       void (*fn)(void *arg, amqp_bytes queue, uint64_t n), void *arg)
{
    struct move *mv = find(v, qname);
    for (size_t i = 0; mv && i < mv->nreport; i++)
        if (mv->report[i].n)
            fn(arg, AMQP_CSTR(mv->report[i].queue ? mv->report[i].queue : ""), mv->report[i].n);
}

bool queue_move_cancel(vhost *v, amqp_bytes qname)
{
    struct move *mv = find(v, qname);
    if (!mv || mv->p.state != MOVE_RUNNING)
        return false;
    end(mv, MOVE_CANCELLED, "");
    return true;
}

void queue_moves_free(vhost *v)
{
    struct move **list = vhost_moves(v);
    while (*list) {
        struct move *mv = *list;
        *list = mv->next;
        end(mv, MOVE_STOPPED, "the broker is stopping");
        free_report(mv);
        free(mv->names);
        free((void *)mv->source.ptr);
        free(mv);
    }
}
