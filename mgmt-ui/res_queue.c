/* Queues: /api/queues[/{vhost}[/{name}]] GET, PUT (declare: 201 new, 204
 * existing), DELETE (?if-unused=true, ?if-empty=true), .../bindings,
 * .../contents (DELETE = purge) and .../get.
 *
 * Beyond RabbitMQ's fields each queue shows its health:
 * oldest_ready_age_ms (how long the head has waited), oldest_unacked_age_ms
 * (the oldest delivery still unsettled) and delivery_count_histogram (how
 * many queued messages -- ready or unacked -- were delivered 0, 1, 2, 3-4,
 * 5-9, 10-19, 20-49, 50+ times: poison messages show up in the high
 * buckets before they loop for long), and `redrive`, the progress of the
 * running or last move from it (res_move.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt_int.h"

static const stat_id queue_stats_fields[] = {
    STAT_ACK,     STAT_DELIVER,   STAT_DELIVER_NO_ACK, STAT_GET, STAT_GET_EMPTY, STAT_GET_NO_ACK,
    STAT_PUBLISH, STAT_REDELIVER,
};

/* The oldest unsettled delivery from q: its consumers' channels first,
 * then (basic.get deliveries) every channel. 0 = none. */
uint64_t mgmt_queue_oldest_unacked(server *s, queue *q)
{
    uint64_t best = 0;
    if (!queue_unacked_count(q))
        return 0;
    for (consumer *c = queue_next_consumer(q, NULL); c; c = queue_next_consumer(q, c)) {
        uint64_t t = chan_oldest_unacked_from(consumer_chan(c), q);
        if (t && (!best || t < best))
            best = t;
    }
    for (size_t i = 0; !best && i < server_conn_count(s); i++) {
        conn *cn = server_conn_at(s, i);
        for (uint32_t slot = 0; slot < conn_channel_slots(cn); slot++) {
            chan *ch = conn_channel_at(cn, slot);
            uint64_t t = ch ? chan_oldest_unacked_from(ch, q) : 0;
            if (t && (!best || t < best))
                best = t;
        }
    }
    return best;
}

static void histogram(mgmt_json *w, const uint32_t *counts)
{
    mgmt_json_key(w, "delivery_count_histogram");
    mgmt_json_obj(w);
    for (int i = 0; i < QUEUE_DC_BUCKETS; i++) {
        char key[24];
        uint32_t lo = queue_dc_bucket_floor[i];
        if (i + 1 == QUEUE_DC_BUCKETS)
            snprintf(key, sizeof key, "%u+", lo);
        else if (queue_dc_bucket_floor[i + 1] == lo + 1)
            snprintf(key, sizeof key, "%u", lo);
        else
            snprintf(key, sizeof key, "%u-%u", lo, queue_dc_bucket_floor[i + 1] - 1);
        mgmt_json_kuint(w, key, counts[i]);
    }
    mgmt_json_end_obj(w);
}

static void health(mgmt_req *r, mgmt_json *w, queue *q, const queue_info *qi)
{
    uint64_t now = loop_now_ms(admin_loop(r->s)), unacked = mgmt_queue_oldest_unacked(r->s, q);
    if (qi->oldest_ready_ms)
        mgmt_json_kuint(w, "oldest_ready_age_ms", now - qi->oldest_ready_ms);
    else
        mgmt_json_knull(w, "oldest_ready_age_ms");
    if (unacked)
        mgmt_json_kuint(w, "oldest_unacked_age_ms", now - unacked);
    else
        mgmt_json_knull(w, "oldest_unacked_age_ms");
    histogram(w, qi->delivery_counts);
    mgmt_move_summary(w, queue_vhost(q), queue_name(q));
}

static void consumer_details(mgmt_req *r, mgmt_json *w, queue *q)
{
    mgmt_json_key(w, "consumer_details");
    mgmt_json_arr(w);
    for (consumer *c = queue_next_consumer(q, NULL); c; c = queue_next_consumer(q, c)) {
        chan *ch = consumer_chan(c); /* every consumer is a channel's so far */
        mgmt_consumer_json(r, w, chan_conn(ch), ch, c);
    }
    mgmt_json_end_arr(w);
}

static void tag_or_null(mgmt_json *w, const char *key, const consumer *c)
{
    if (c)
        mgmt_json_kstr(w, key, c->tag);
    else
        mgmt_json_knull(w, key);
}

/* ?disable_stats=true: the declaration only, as RabbitMQ shows it. */
static void queue_basics(mgmt_req *r, mgmt_json *w, queue *q)
{
    mgmt_json_obj(w);
    mgmt_json_key(w, "arguments");
    mgmt_json_table(w, queue_arguments(q));
    mgmt_json_kbool(w, "auto_delete", queue_auto_delete(q));
    mgmt_json_kbool(w, "durable", queue_durable(q));
    mgmt_json_kbool(w, "exclusive", queue_exclusive(q));
    mgmt_json_kbytes(w, "name", queue_name(q));
    mgmt_json_kstr(w, "node", server_node_name(r->s));
    mgmt_json_kstr(w, "state", "running");
    mgmt_json_kstr(w, "type", queue_type_of(q)->name);
    mgmt_json_kstr(w, "vhost", vhost_name(queue_vhost(q)));
    mgmt_json_end_obj(w);
}

/* A replicated queue's members (this node alone: its leader, online);
 * a quorum queue's at-least-once dead letters not yet taken by a queue. */
static void member_fields(mgmt_req *r, mgmt_json *w, queue *q, const queue_info *qi)
{
    if (!queue_type_of(q)->replicated)
        return;
    mgmt_json_kstr(w, "leader", server_node_name(r->s));
    if (!qi->stream) {
        mgmt_json_kuint(w, "message_bytes_dlx", qi->dead_letter_bytes_held);
        mgmt_json_kuint(w, "messages_dlx", qi->dead_letters_held);
    }
    const char *keys[] = {"members", "online"};
    for (int i = 0; i < 2; i++) {
        mgmt_json_key(w, keys[i]);
        mgmt_json_arr(w);
        mgmt_json_str(w, server_node_name(r->s));
        mgmt_json_end_arr(w);
    }
}

/* Where the messages are, as RabbitMQ's classic queues say it: in RAM
 * (ready ones not paged out, and every unacked one: a delivery holds its
 * message), paged out (in the journal only), persistent (the journal holds
 * them for this queue, whether in RAM too or not). */
static void message_bytes(mgmt_json *w, const queue_info *qi)
{
    uint64_t ram_bytes = qi->ready_bytes - qi->paged_bytes + qi->unacked_bytes;
    mgmt_json_kuint(w, "message_bytes", qi->ready_bytes + qi->unacked_bytes);
    mgmt_json_kuint(w, "message_bytes_paged_out", qi->paged_bytes);
    mgmt_json_kuint(w, "message_bytes_persistent", qi->persistent_bytes);
    mgmt_json_kuint(w, "message_bytes_ram", ram_bytes);
    mgmt_json_kuint(w, "message_bytes_ready", qi->ready_bytes);
    mgmt_json_kuint(w, "message_bytes_unacknowledged", qi->unacked_bytes);
}

static void message_counts(mgmt_json *w, const queue_info *qi)
{
    mgmt_json_kuint(w, "messages_paged_out", qi->paged);
    mgmt_json_kuint(w, "messages_persistent", qi->persistent);
    mgmt_json_kuint(w, "messages_ram", (uint64_t)qi->ready - qi->paged + qi->unacked);
    mgmt_json_kuint(w, "messages_ready_ram", qi->ready - qi->paged);
    mgmt_json_kuint(w, "messages_unacknowledged_ram", qi->unacked);
}

/* What classic and quorum queues show beside the common fields: the
 * consumer figures, where the messages are, delayed retry and health. */
static void work_queue_fields(mgmt_req *r, mgmt_json *w, queue *q, const queue_info *qi)
{
    mgmt_json_kdouble(w, "consumer_capacity", qi->consumer_capacity);
    mgmt_json_kuint(w, "consumer_timeouts", qi->consumer_timeouts); /* Warren's */
    mgmt_json_kdouble(w, "consumer_utilisation", qi->consumer_capacity); /* the older name */
    /* Warren's: messages the delivery limit dead-lettered or dropped */
    mgmt_json_kuint(w, "delivery_limit_dead_letters", qi->delivery_limit_dead);
    tag_or_null(w, "exclusive_consumer_tag", qi->exclusive_consumer);
    mgmt_json_knull(w, "head_message_timestamp");
    message_bytes(w, qi);
    mgmt_queue_totals(r, w, qi->stats, qi->ready, qi->unacked);
    mgmt_json_kuint(w, "messages_delayed", qi->delayed); /* Warren's: delayed retry */
    message_counts(w, qi);
    tag_or_null(w, "single_active_consumer_tag", qi->active_consumer);
    health(r, w, q, qi);
}

static void queue_json(mgmt_req *r, mgmt_json *w, queue *q, bool one)
{
    if (r->disable_stats) {
        queue_basics(r, w, q);
        return;
    }
    queue_info qi;
    queue_describe(q, &qi);
    mgmt_json_obj(w);
    mgmt_json_key(w, "arguments");
    mgmt_json_table(w, queue_arguments(q));
    mgmt_json_kbool(w, "auto_delete", queue_auto_delete(q));
    if (one) {
        consumer_details(r, w, q);
        const char *empty[] = {"deliveries", "incoming"};
        for (int i = 0; i < 2; i++) {
            mgmt_json_key(w, empty[i]);
            mgmt_json_arr(w);
            mgmt_json_end_arr(w);
        }
    }
    mgmt_json_kuint(w, "consumers", qi.consumers);
    dedup_info di;
    if (queue_dedup_info(q, &di))
        mgmt_dedup_fields(w, &di);
    mgmt_json_kbool(w, "durable", queue_durable(q));
    policy_applied pa;
    policy_of_queue(q, &pa);
    mgmt_json_key(w, "effective_policy_definition");
    mgmt_json_table(w, pa.definition);
    mgmt_json_kbool(w, "exclusive", queue_exclusive(q));
    member_fields(r, w, q, &qi);
    mgmt_json_kuint(w, "memory", qi.memory);
    mgmt_message_stats(r, w, qi.stats, queue_stats_fields,
                       sizeof queue_stats_fields / sizeof queue_stats_fields[0], true);
    mgmt_json_kbytes(w, "name", queue_name(q));
    mgmt_json_kstr(w, "node", server_node_name(r->s));
    mgmt_json_kstr(w, "operator_policy", pa.operator_policy); /* NULL writes null */
    mgmt_json_kstr(w, "policy", pa.policy);
    mgmt_json_kstr(w, "state", "running");
    mgmt_json_kstr(w, "type", queue_type_of(q)->name);
    mgmt_json_kstr(w, "vhost", vhost_name(queue_vhost(q)));
    if (qi.stream)
        mgmt_stream_fields(r, w, &qi);
    else
        work_queue_fields(r, w, q, &qi);
    mgmt_json_end_obj(w);
}

static queue *lookup(mgmt_req *r, const mgmt_list_item *it)
{
    vhost *v = server_vhost(r->s, AMQP_CSTR(it->vhost));
    return v ? vhost_queue_find(v, it->name) : NULL;
}

static bool render_listed(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    queue *q = lookup(r, it);
    if (q)
        queue_json(r, w, q, false);
    return q != NULL;
}

static bool render_one(mgmt_req *r, mgmt_json *w, const mgmt_list_item *it)
{
    queue *q = lookup(r, it);
    if (q)
        queue_json(r, w, q, true);
    return q != NULL;
}

/* ---- lists -------------------------------------------------------------- */

/* A numeric sort key, when `sort` names one. */
static bool sort_key(mgmt_req *r, queue *q, const char *sort, double *out)
{
    if (!sort)
        return false;
    queue_info qi;
    queue_describe(q, &qi);
    double ready = qi.stream ? (double)admin_stream_records(&qi.log) : qi.ready;
    const struct { const char *name; double v; } keys[] = {
        {"messages", ready + qi.unacked},
        {"messages_ready", ready},
        {"messages_unacknowledged", qi.unacked},
        {"messages_delayed", qi.delayed},
        {"consumers", qi.consumers},
        {"memory", (double)qi.memory},
        {"message_bytes", (double)(qi.ready_bytes + qi.unacked_bytes)},
        {"message_bytes_ready", (double)qi.ready_bytes},
        {"message_bytes_unacknowledged", (double)qi.unacked_bytes},
        {"message_bytes_ram", (double)(qi.ready_bytes - qi.paged_bytes + qi.unacked_bytes)},
        {"message_bytes_paged_out", (double)qi.paged_bytes},
        {"message_bytes_persistent", (double)qi.persistent_bytes},
        {"messages_ram", (double)qi.ready - qi.paged + qi.unacked},
        {"messages_paged_out", qi.paged},
        {"messages_persistent", qi.persistent},
        {"consumer_capacity", qi.consumer_capacity},
        {"oldest_ready_age_ms",
         qi.oldest_ready_ms ? (double)(loop_now_ms(admin_loop(r->s)) - qi.oldest_ready_ms) : 0},
        {"messages_details.rate", stats_rate(qi.stats, STAT_MESSAGES)},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(sort, keys[i].name) == 0)
            return *out = keys[i].v, true;
    return mgmt_stat_sort_key(qi.stats, sort, out);
}

typedef struct collect {
    mgmt_req *r;
    mgmt_list *l;
    const char *vhost, *sort;
} collect;

static void add_queue(void *arg, queue *q)
{
    collect *c = arg;
    double key = 0;
    bool has = sort_key(c->r, q, c->sort, &key);
    mgmt_list_add(c->l, c->vhost, queue_name(q), 0, key, has);
}

static void add_queues(mgmt_req *r, mgmt_list *l, vhost *v)
{
    collect c = {r, l, vhost_name(v), mgmt_list_query_of(l)->sort};
    vhost_foreach_queue(v, add_queue, &c);
}

static void list_queues(mgmt_req *r, vhost *only)
{
    mgmt_vhosts_list_send(r, only, add_queues, render_listed);
}

static void get_queues(mgmt_req *r) { list_queues(r, NULL); }

static void get_vhost_queues(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (v)
        list_queues(r, v);
}

static void get_queue(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (!v)
        return;
    mgmt_list_item it = {.vhost = vhost_name(v), .name = r->cap[1]};
    mgmt_object_send(r, render_one, &it);
}

/* ---- changes ------------------------------------------------------------ */

static void put_queue(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg_declare(r, 0);
    json_t *body = v ? mgmt_body(r) : NULL;
    if (!body)
        return;
    uint8_t *args = mgmt_scratch(r, MGMT_TABLE_MAX);
    if (!args)
        return;
    queue_spec spec = {.name = r->cap[1]};
    if (!mgmt_body_bool(r, body, "durable", false, &spec.durable) ||
        !mgmt_body_bool(r, body, "auto_delete", false, &spec.auto_delete) ||
        !mgmt_body_table(r, body, "arguments", args, MGMT_TABLE_MAX, &spec.arguments))
        return;
    amqp_error err = {0};
    if (spec.name.len == 0 || spec.name.len > 255 ||
        (spec.name.len >= 4 && memcmp(spec.name.ptr, "amq.", 4) == 0)) {
        err.code = spec.name.len > 255 ? AMQP_PRECONDITION_FAILED : AMQP_ACCESS_REFUSED;
        snprintf(err.text, sizeof err.text, "queue name too long");
        mgmt_amqp_error(r, &err);
        return;
    }
    if (!mgmt_permission_check(r, v, ACCESS_CONFIGURE, spec.name))
        return;
    queue *q = vhost_queue_find(v, spec.name);
    bool existed = q != NULL;
    if (q && queue_owner(q)) {
        amqp_fail(&err, AMQP_RESOURCE_LOCKED, AMQP_QUEUE_DECLARE,
                  "cannot obtain exclusive access to locked queue '%.*s' in vhost '%s'",
                  (int)spec.name.len, (const char *)spec.name.ptr, vhost_name(v));
        mgmt_amqp_error(r, &err);
        return;
    }
    if (admin_queue_declare(v, &spec, &q, &err) != AMQP_OK) {
        mgmt_amqp_error(r, &err);
        return;
    }
    mgmt_send_empty(r, existed ? 204 : 201, NULL);
}

static void delete_queue(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (!v)
        return;
    if (!vhost_queue_find(v, r->cap[1])) {
        mgmt_not_found(r);
        return;
    }
    if (!mgmt_permission_check(r, v, ACCESS_CONFIGURE, r->cap[1]))
        return;
    amqp_error err = {0};
    if (admin_queue_delete(v, r->cap[1], mgmt_query_true(r, "if-unused"),
                           mgmt_query_true(r, "if-empty"), &err) != AMQP_OK) {
        mgmt_amqp_error(r, &err);
        return;
    }
    mgmt_send_empty(r, 204, NULL);
}

static void purge_queue(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    if (!v)
        return;
    if (!vhost_queue_find(v, r->cap[1])) {
        mgmt_not_found(r);
        return;
    }
    if (!mgmt_permission_check(r, v, ACCESS_READ, r->cap[1]))
        return;
    amqp_error err = {0};
    if (admin_queue_purge(v, r->cap[1], &err) != AMQP_OK)
        mgmt_amqp_error(r, &err);
    else
        mgmt_send_empty(r, 204, NULL);
}

queue *mgmt_queue_arg(mgmt_req *r, vhost **v)
{
    *v = mgmt_vhost_arg(r, 0);
    queue *q = *v ? vhost_queue_find(*v, r->cap[1]) : NULL;
    if (*v && !q)
        mgmt_not_found(r);
    return q;
}

static void get_queue_bindings(mgmt_req *r)
{
    vhost *v;
    queue *q = mgmt_queue_arg(r, &v);
    if (!q)
        return;
    mgmt_binding_filter f = {.dest_queue = q, .defaults = true};
    mgmt_bindings_send(r, v, &f);
}

const mgmt_route mgmt_queue_routes[] = {
    {HTTP_GET, "/api/queues", TAG_MANAGEMENT, get_queues},
    {HTTP_GET, "/api/queues/{}", TAG_MANAGEMENT, get_vhost_queues},
    {HTTP_GET, "/api/queues/{}/{}", TAG_MANAGEMENT, get_queue},
    {HTTP_PUT, "/api/queues/{}/{}", TAG_MANAGEMENT, put_queue},
    {HTTP_DELETE, "/api/queues/{}/{}", TAG_MANAGEMENT, delete_queue},
    {HTTP_GET, "/api/queues/{}/{}/bindings", TAG_MANAGEMENT, get_queue_bindings},
    {HTTP_DELETE, "/api/queues/{}/{}/contents", TAG_MANAGEMENT, purge_queue},
    {HTTP_POST, "/api/queues/{}/{}/get", TAG_MANAGEMENT, mgmt_post_get},
    {0},
};
