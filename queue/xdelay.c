/* Delayed exchanges (x-delayed-message): the messages each one holds until
 * their deadline, then routes through itself (its x-delayed-type's logic,
 * its bindings and alternate exchange at that moment), as RabbitMQ's
 * rabbitmq-delayed-message-exchange plugin does. routing/delay.c decides
 * which messages are held; this keeps them.
 *
 * State: per delayed exchange that held something, an `xdelay` in its
 * vhost's list: a min-heap on (deadline, message id) (xdelay_heap.c) and
 * one timer armed for the earliest entry. Holding and releasing a message
 * are O(log n); releasing is sliced as expiry is (expiry.c: ~1 ms or 1,024
 * messages per loop turn), so a million messages due at once never hold
 * the loop.
 *
 * Durability (the plugin keeps its messages in one node's Mnesia table):
 * a persistent message held by a durable exchange is journaled as if the
 * exchange were a durable queue whose journal id is xdelay_store_id (a hash
 * of vhost and name with XDELAY_ID_BIT set, never a real queue's id): its
 * message, an enqueue and a delayed record (the deadline, wall clock) in
 * one atomic group, so after a restart or crash it is back with its
 * deadline (persist.c hands such entries to xdelay_restore). Its body then
 * leaves RAM at once (40 bytes of heap entry remain) and is read back at
 * its deadline. At the deadline the copy with x-delay negated (the
 * plugin's swap_delay_header) is journaled into its durable queues and
 * the held entry settled, again in one group: the message is in the
 * exchange or in its queues, never in neither. Transient messages, and
 * every message of a non-durable exchange, stay in RAM and die with the
 * broker. Deleting the exchange drops what it holds.
 */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "queue.h"
#include "queue_internal.h"

struct xdelay {
    struct xdelay *next;
    vhost *v;
    route_exchange *ex;
    uint64_t store_id; /* its journal id; 0: nothing journaled (not durable) */
    xdelay_heap heap;
    struct event *timer;
};

static void fired(evutil_socket_t fd, short what, void *arg);

uint64_t xdelay_store_id(const char *vhost_name, amqp_bytes exchange)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a over "vhost\0name" */
    for (const char *p = vhost_name;; p++) {
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
        if (!*p)
            break;
    }
    for (uint32_t i = 0; i < exchange.len; i++)
        h = (h ^ exchange.ptr[i]) * 1099511628211ull;
    return (h & (XDELAY_ID_BIT - 1)) | XDELAY_ID_BIT;
}

static struct xdelay *find(vhost *v, const route_exchange *ex)
{
    for (struct xdelay *x = *vhost_xdelays(v); x; x = x->next)
        if (x->ex == ex)
            return x;
    return NULL;
}

static struct xdelay *state_of(vhost *v, route_exchange *ex)
{
    struct xdelay *x = find(v, ex);
    if (x)
        return x;
    if (!(x = calloc(1, sizeof *x)))
        return NULL;
    x->v = v;
    x->ex = ex;
    if (route_exchange_durable(ex) && server_journal(vhost_server(v)))
        x->store_id = xdelay_store_id(vhost_name(v), route_exchange_name(ex));
    x->next = *vhost_xdelays(v);
    *vhost_xdelays(v) = x;
    return x;
}

static void arm(struct xdelay *x)
{
    const xdelay_entry *first = xdelay_heap_first(&x->heap);
    if (!first)
        return;
    if (!x->timer && !(x->timer = evtimer_new(loop_base(vhost_loop(x->v)), fired, x)))
        return;
    uint64_t now = delayed_wall_ms(), wait = first->due > now ? first->due - now : 0;
    struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)(wait % 1000) * 1000};
    evtimer_add(x->timer, &tv);
}

static bool push(struct xdelay *x, const xdelay_entry *e)
{
    if (!xdelay_heap_push(&x->heap, e))
        return false;
    if (x->heap.v[0].id == e->id && x->heap.v[0].due == e->due)
        arm(x); /* the new earliest */
    return true;
}

/* Journals `m` as held by x until `due`; its location into *loc. */
static journal_seq journal_hold(struct xdelay *x, journal *j, msg *m, uint64_t due,
                                journal_loc *loc)
{
    journal_group_begin(j);
    if (!msg_journal_loc(m, loc) || !journal_message_at(j, msg_id(m), *loc, loc)) {
        journal_append_message(j, msg_id(m), msg_exchange(m), msg_routing_key(m),
                               msg_properties(m),
                               (amqp_bytes){msg_body(m), (uint32_t)msg_body_size(m)}, loc);
        msg_set_journal_loc(m, *loc);
    }
    journal_append_enqueue(j, x->store_id, msg_id(m), *loc);
    journal_append_delayed(j, x->store_id, msg_id(m), due);
    return journal_group_end(j);
}

journal_seq xdelay_hold(vhost *v, route_exchange *ex, msg *m, uint32_t delay_ms, bool *ok)
{
    struct xdelay *x = state_of(v, ex);
    journal *j = server_journal(vhost_server(v));
    xdelay_entry e = {.due = delayed_wall_ms() + delay_ms, .id = msg_id(m), .m = m};
    journal_seq seq = 0;
    *ok = x != NULL;
    if (!x)
        return 0;
    if (x->store_id && msg_persistent(m)) {
        seq = journal_hold(x, j, m, e.due, &e.loc);
        e.m = NULL; /* paged out: read back at the deadline */
    }
    if (!push(x, &e)) {
        if (seq)
            journal_append_settle(j, x->store_id, e.id, e.loc, JOURNAL_DROP, (amqp_bytes){0},
                                  (amqp_bytes){0});
        *ok = false;
        return 0;
    }
    if (e.m)
        msg_ref(m);
    return seq;
}

journal_seq xdelay_hold_routed(vhost *v, msg *m, bool *ok)
{
    size_t n;
    const route_hold *held = route_held(vhost_routes(v), &n);
    journal_seq seq = 0;
    *ok = true;
    for (size_t i = 0; i < n; i++) {
        bool one;
        journal_seq w = xdelay_hold(v, held[i].exchange, m, held[i].delay_ms, &one);
        seq = w > seq ? w : seq;
        *ok &= one;
    }
    return seq;
}

/* ---- the deadline ------------------------------------------------------- */

/* The message of entry e, a reference the caller owns; NULL (logged) when
 * the journal cannot give it back. */
static msg *message_of(struct xdelay *x, const xdelay_entry *e)
{
    if (e->m)
        return e->m;
    loop *l = vhost_loop(x->v);
    size_t cap;
    uint8_t *buf = loop_read_buffer(l, e->loc.length, &cap);
    journal_message jm;
    msg *m = NULL;
    if (buf && journal_read_message(server_journal(vhost_server(x->v)), e->loc, buf, &jm) &&
        (m = msg_new(loop_msgs(l), jm.exchange, jm.routing_key, jm.properties, jm.body.len))) {
        msg_append_body(m, jm.body.ptr, jm.body.len);
        msg_restore_identity(m, e->id, e->loc);
    }
    if (!m)
        log_msg(LOG_ERROR, "exchange '%.*s': delayed message %llu could not be read back; it "
                "is dropped", (int)route_exchange_name(x->ex).len,
                (const char *)route_exchange_name(x->ex).ptr, (unsigned long long)e->id);
    return m;
}

/* A valid expiration property (checked at publish): decimal ms; -1 none. */
static int64_t expiration_of(const amqp_basic_properties *p)
{
    if (!(p->flags & AMQP_BASIC_EXPIRATION_FLAG))
        return -1;
    int64_t ms = 0;
    for (uint32_t i = 0; i < p->expiration.len && ms <= INT64_MAX / 10 - 10; i++)
        ms = ms * 10 + (p->expiration.ptr[i] - '0');
    return ms;
}

/* The copy routed at the deadline: x-delay is now -delay (a signedint, as
 * the plugin sets it), so no delayed exchange holds it again. */
static msg *released_copy(struct xdelay *x, msg *m, int64_t *expiration)
{
    amqp_basic_properties p;
    int64_t d = 0;
    if (amqp_properties_decode(msg_properties(m), &p, NULL) != AMQP_OK)
        return NULL;
    *expiration = expiration_of(&p);
    if (!(p.flags & AMQP_BASIC_HEADERS_FLAG) || !route_delay_of(p.headers, &d)) {
        msg_ref(m);
        return m;
    }
    size_t cap = msg_properties(m).len + 64;
    uint8_t *buf = malloc(2 * cap);
    if (!buf)
        return NULL;
    amqp_writer w;
    amqp_writer_init(&w, buf + cap, cap);
    size_t mark = amqp_table_begin(&w);
    amqp_field f = {.type = -d >= INT32_MIN ? 'I' : 'l', .v.i = -d};
    amqp_put_shortstr(&w, AMQP_CSTR("x-delay"));
    amqp_put_field(&w, &f);
    amqp_put_entries_except(&w, p.headers, "x-delay");
    amqp_table_end(&w, mark);
    p.headers = (amqp_bytes){buf + cap + 4, (uint32_t)w.len - 4};
    size_t n = w.overflow ? 0 : amqp_properties_encode(&p, buf, cap);
    msg *copy = n ? msg_copy_with(loop_msgs(vhost_loop(x->v)), m, msg_exchange(m),
                                  msg_routing_key(m), (amqp_bytes){buf, (uint32_t)n})
                  : NULL;
    free(buf);
    return copy;
}

/* Routes the copy through the exchange and enqueues it; the held entry
 * is settled in the same journal group as the copy's enqueues. */
static void deliver(struct xdelay *x, const xdelay_entry *e, msg *copy, int64_t expiration)
{
    server *s = vhost_server(x->v);
    journal *j = server_journal(s);
    amqp_basic_properties p;
    amqp_properties_decode(msg_properties(copy), &p, NULL);
    amqp_bytes headers = (p.flags & AMQP_BASIC_HEADERS_FLAG) ? p.headers : (amqp_bytes){0};
    queue *local[16], **qs;
    size_t n = vhost_route(x->v, x->ex, msg_routing_key(copy), headers, copy, local, 16, &qs);
    bool held = x->store_id && !e->m;
    if (held)
        journal_group_begin(j);
    persist_publish(s, copy, qs, n);
    if (held) {
        journal_append_settle(j, x->store_id, e->id, e->loc, JOURNAL_MOVE, (amqp_bytes){0},
                              route_exchange_name(x->ex));
        journal_group_end(j);
    }
    for (size_t i = 0; i < n; i++)
        if (!queue_publish(qs[i], copy, expiration))
            persist_settle(qs[i], copy, JOURNAL_DROP);
    if (qs != local)
        free(qs);
    loop_counters(vhost_loop(x->v))->messages_routed += n;
}

static void release(struct xdelay *x, xdelay_entry e)
{
    msg *m = message_of(x, &e);
    int64_t expiration = -1;
    msg *copy = m ? released_copy(x, m, &expiration) : NULL;
    if (copy) {
        deliver(x, &e, copy, expiration);
        msg_unref(copy);
    } else if (x->store_id && !e.m) {
        journal_append_settle(server_journal(vhost_server(x->v)), x->store_id, e.id, e.loc,
                              JOURNAL_DROP, (amqp_bytes){0}, (amqp_bytes){0});
    }
    if (m)
        msg_unref(m);
}

/* Releases what is due, one expiry slice's worth (~1 ms) per loop turn. */
static void fired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct xdelay *x = arg;
    uint64_t now = delayed_wall_ms();
    const xdelay_entry *first;
    expiry_slice sl;
    expiry_slice_begin(&sl);
    while (expiry_slice_more(&sl) && (first = xdelay_heap_first(&x->heap)) && first->due <= now) {
        release(x, xdelay_heap_pop(&x->heap));
        sl.done++;
    }
    arm(x); /* the rest of a big batch: at once, on the next loop turn */
}

/* ---- life cycle ---------------------------------------------------------- */

uint32_t xdelay_count(vhost *v, const route_exchange *ex)
{
    struct xdelay *x = find(v, ex);
    return x ? x->heap.n : 0;
}

static void unlink_state(vhost *v, struct xdelay *x)
{
    for (struct xdelay **p = vhost_xdelays(v); *p; p = &(*p)->next)
        if (*p == x) {
            *p = x->next;
            break;
        }
    while (x->heap.n) {
        xdelay_entry e = xdelay_heap_pop(&x->heap);
        if (e.m)
            msg_unref(e.m);
    }
    xdelay_heap_free(&x->heap);
    if (x->timer)
        event_free(x->timer);
    free(x);
}

void xdelay_exchange_deleted(vhost *v, const route_exchange *ex)
{
    struct xdelay *x = find(v, ex);
    if (!x)
        return;
    if (x->store_id && !vhost_closing(v))
        journal_append_queue_delete(server_journal(vhost_server(v)), x->store_id);
    unlink_state(v, x);
}

void xdelay_vhost_deleted(vhost *v)
{
    while (*vhost_xdelays(v))
        xdelay_exchange_deleted(v, (*vhost_xdelays(v))->ex);
}

void xdelay_exchange_freed(vhost *v, const route_exchange *ex)
{
    struct xdelay *x = find(v, ex);
    if (x)
        unlink_state(v, x);
}

/* ---- recovery ------------------------------------------------------------ */

typedef struct finder {
    uint64_t id;
    vhost *v;
    route_exchange *found;
} finder;

static void match_exchange(void *arg, route_exchange *ex)
{
    finder *f = arg;
    if (!f->found && route_exchange_delayed(ex) && route_exchange_durable(ex) &&
        xdelay_store_id(vhost_name(f->v), route_exchange_name(ex)) == f->id)
        f->found = ex;
}

xdelay *xdelay_by_store_id(server *s, uint64_t id)
{
    finder f = {.id = id};
    for (f.v = server_vhost_next(s, NULL); f.v; f.v = server_vhost_next(s, f.v)) {
        route_foreach_exchange(vhost_routes(f.v), match_exchange, &f);
        if (f.found)
            return state_of(f.v, f.found);
    }
    return NULL;
}

void xdelay_restore(xdelay *x, const queue_paged *p)
{
    xdelay_entry e = {.due = p->delayed_until, .id = p->id, .loc = p->loc};
    if (!x->store_id || !push(x, &e))
        log_msg(LOG_ERROR, "out of memory restoring a delayed message");
}
