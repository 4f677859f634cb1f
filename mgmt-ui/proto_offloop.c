/* MEASUREMENT PROTOTYPE (WARREN_MGMT_OFFLOOP=1): the unpaged queue list
 * rendered off the loop. The loop takes the snapshot -- every listed
 * queue's fields and rates copied into plain structs -- and a thread writes
 * the JSON into its own evbuffer, then hands it back through a pipe. Used
 * only by tests/bench/mgmt_bench.py's p99 comparison with the in-loop
 * sliced writer; a client leaving mid-render is not handled. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mgmt_int.h"

typedef struct qsnap {
    char name[256];
    uint32_t name_len;
    bool durable, auto_delete, exclusive;
    uint32_t ready, unacked, consumers;
    uint64_t bytes, memory;
    uint64_t n[STAT_COUNTERS];
    double rate[STAT_FIELDS];
} qsnap;

typedef struct job {
    struct evhttp_request *req;
    qsnap *q;
    size_t n;
    struct evbuffer *out;
    int pipe[2];
    struct event *done;
    char vhost[64], node[64];
} job;

static void render(job *j)
{
    static const stat_id fields[] = {STAT_ACK, STAT_DELIVER, STAT_DELIVER_NO_ACK, STAT_GET,
                                     STAT_GET_EMPTY, STAT_GET_NO_ACK, STAT_PUBLISH,
                                     STAT_REDELIVER};
    mgmt_json *w = mgmt_json_new(j->out);
    mgmt_json_arr(w);
    for (size_t i = 0; i < j->n; i++) {
        qsnap *q = &j->q[i];
        mgmt_json_obj(w);
        mgmt_json_key(w, "arguments");
        mgmt_json_obj(w);
        mgmt_json_end_obj(w);
        mgmt_json_kbool(w, "auto_delete", q->auto_delete);
        mgmt_json_kuint(w, "consumers", q->consumers);
        mgmt_json_kbool(w, "durable", q->durable);
        mgmt_json_kbool(w, "exclusive", q->exclusive);
        mgmt_json_kuint(w, "memory", q->memory);
        mgmt_json_kuint(w, "message_bytes_ready", q->bytes);
        mgmt_json_key(w, "message_stats");
        mgmt_json_obj(w);
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
            char dk[64];
            mgmt_json_kuint(w, mgmt_stat_name(fields[f]), q->n[fields[f]]);
            strcpy(dk, mgmt_stat_name(fields[f]));
            strcat(dk, "_details");
            mgmt_json_key(w, dk);
            mgmt_json_obj(w);
            mgmt_json_kdouble(w, "rate", q->rate[fields[f]]);
            mgmt_json_end_obj(w);
        }
        mgmt_json_end_obj(w);
        mgmt_json_kuint(w, "messages", q->ready + q->unacked);
        mgmt_json_kuint(w, "messages_ready", q->ready);
        mgmt_json_kuint(w, "messages_unacknowledged", q->unacked);
        mgmt_json_kbytes(w, "name", (amqp_bytes){(const uint8_t *)q->name, q->name_len});
        mgmt_json_kstr(w, "node", j->node);
        mgmt_json_kstr(w, "state", "running");
        mgmt_json_kstr(w, "type", "classic");
        mgmt_json_kstr(w, "vhost", j->vhost);
        mgmt_json_end_obj(w);
    }
    mgmt_json_end_arr(w);
    mgmt_json_free(w);
}

static void *worker(void *arg)
{
    job *j = arg;
    render(j);
    char c = 1;
    if (write(j->pipe[1], &c, 1) != 1)
        abort();
    return NULL;
}

static void finished(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    job *j = arg;
    evhttp_add_header(evhttp_request_get_output_headers(j->req), "Content-Type",
                      "application/json");
    evhttp_send_reply(j->req, 200, "OK", j->out);
    evbuffer_free(j->out);
    event_free(j->done);
    close(j->pipe[0]);
    close(j->pipe[1]);
    free(j->q);
    free(j);
}

bool mgmt_proto_offloop(mgmt_req *r, mgmt_list *l)
{
    static int enabled = -1;
    if (enabled < 0)
        enabled = getenv("WARREN_MGMT_OFFLOOP") && strcmp(getenv("WARREN_MGMT_OFFLOOP"), "1") == 0;
    char why[128];
    if (!enabled || mgmt_list_query_of(l)->paged || !mgmt_list_finish(l, why, sizeof why))
        return false;
    job *j = calloc(1, sizeof *j);
    j->q = calloc(mgmt_list_count(l) + 1, sizeof *j->q);
    j->req = r->req;
    snprintf(j->node, sizeof j->node, "%s", server_node_name(r->s));
    for (size_t i = 0; i < mgmt_list_count(l); i++) {
        const mgmt_list_item *it = mgmt_list_at(l, i);
        vhost *v = server_vhost(r->s, AMQP_CSTR(it->vhost));
        queue *q = v ? vhost_queue_find(v, it->name) : NULL;
        if (!q)
            continue;
        snprintf(j->vhost, sizeof j->vhost, "%s", it->vhost);
        queue_info qi;
        queue_describe(q, &qi);
        qsnap *s = &j->q[j->n++];
        s->name_len = it->name.len < sizeof s->name ? it->name.len : sizeof s->name;
        memcpy(s->name, it->name.ptr, s->name_len);
        s->durable = queue_durable(q), s->auto_delete = queue_auto_delete(q);
        s->exclusive = queue_exclusive(q);
        s->ready = qi.ready, s->unacked = qi.unacked, s->consumers = qi.consumers;
        s->bytes = qi.ready_bytes, s->memory = qi.memory;
        memcpy(s->n, qi.stats->n, sizeof s->n);
        for (int f = 0; f < STAT_FIELDS; f++)
            s->rate[f] = stats_rate(qi.stats, (stat_id)f);
    }
    mgmt_list_free(l);
    j->out = evbuffer_new();
    if (pipe(j->pipe) != 0)
        abort();
    j->done = event_new(server_base(r->s), j->pipe[0], EV_READ, finished, j);
    event_add(j->done, NULL);
    pthread_t t;
    pthread_create(&t, NULL, worker, j);
    pthread_detach(t);
    return true;
}
