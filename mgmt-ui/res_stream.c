/* Streams in the management API.
 *
 * A stream queue in /api/queues shows RabbitMQ's stream queue fields
 * (3.10.8's: members, online, readers, messages = its records; 3.13's:
 * leader, committed_offset, segments) and Warren's figures of its log:
 * first_offset, last_offset (osiris's counter names: the first and the
 * last record), chunks and segment_bytes (its files' size); offsets are
 * null while there is none. committed_offset is osiris's: the id of the
 * last committed chunk. Each consumer of a stream shows its "offset" (the
 * next record it reads) and "offset_lag" (committed records it has not
 * read yet), the stream plugin's names.
 *
 * /api/stream/consumers (res_stream_conn.c) lists the AMQP 0-9-1 consumers
 * of streams too, in the stream plugin's form (mgmt_stream_consumer_json,
 * "protocol": "amqp091"). Warren's viewer:
 *   GET /api/streams/{vhost}/{name}/messages?offset=&count=&encoding=&truncate=
 *       up to STREAM_PEEK_MAX messages from `offset` (default: the first)
 *       without consuming them, as /get shows messages plus their offset
 *       and timestamp; read permission on the stream.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt_int.h"

#define STREAM_PEEK_MAX 1000

static void offset_or_null(mgmt_json *w, const char *key, bool has, uint64_t v)
{
    if (has)
        mgmt_json_kuint(w, key, v);
    else
        mgmt_json_knull(w, key);
}

void mgmt_stream_fields(mgmt_req *r, mgmt_json *w, const queue_info *qi)
{
    const stream_info *s = &qi->log;
    bool committed = s->committed_offset > s->first_offset;
    mgmt_json_kuint(w, "chunks", s->chunks);
    offset_or_null(w, "committed_offset", committed, s->committed_chunk_id);
    offset_or_null(w, "first_offset", !s->empty, s->first_offset);
    offset_or_null(w, "last_offset", !s->empty, s->next_offset - 1);
    mgmt_queue_totals(r, w, qi->stats, admin_stream_records(s), 0);
    mgmt_json_key(w, "readers");
    mgmt_json_obj(w);
    mgmt_json_kuint(w, server_node_name(r->s), qi->consumers);
    mgmt_json_end_obj(w);
    mgmt_json_kuint(w, "segment_bytes", s->bytes);
    mgmt_json_kuint(w, "segments", s->segments);
}

void mgmt_stream_consumer_offsets(mgmt_json *w, const consumer *cons)
{
    uint64_t off;
    if (!cons->q || !queue_stream_consumer_offset(cons, &off))
        return;
    queue_info qi;
    queue_describe(cons->q, &qi);
    mgmt_json_kuint(w, "offset", off);
    mgmt_json_kuint(w, "offset_lag",
                    qi.log.committed_offset > off ? qi.log.committed_offset - off : 0);
}

typedef struct delivered {
    queue *q;
    uint64_t n;
} delivered;

static void count_delivered(void *arg, queue *q, const uint64_t *n)
{
    delivered *d = arg;
    if (q == d->q)
        d->n = n[STAT_DELIVER] + n[STAT_DELIVER_NO_ACK];
}

/* rabbit_stream_mgmt_db's consumer: connection_details, queue, and the
 * subscription's figures. An AMQP 0-9-1 consumer has no subscription id
 * (null) but its consumer_tag; `consumed` is what its channel took from
 * the stream; credits what its prefetch still allows. */
void mgmt_stream_consumer_json(mgmt_req *r, mgmt_json *w, conn *c, chan *ch,
                               const consumer *cons)
{
    conn_info ci;
    conn_describe(c, &ci);
    delivered d = {cons->q, 0};
    chan_foreach_queue_stats(ch, count_delivered, &d);
    mgmt_json_obj(w);
    mgmt_json_kbool(w, "active", true);
    mgmt_json_kstr(w, "activity_status", "up");
    mgmt_json_key(w, "connection_details");
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "name", ci.name);
    mgmt_json_kstr(w, "node", server_node_name(r->s));
    mgmt_json_kstr(w, "peer_host", ci.peer_host);
    mgmt_json_kint(w, "peer_port", ci.peer_port);
    mgmt_json_kstr(w, "user", ci.user);
    mgmt_json_end_obj(w);
    mgmt_json_kuint(w, "consumed", d.n);
    mgmt_json_kstr(w, "consumer_tag", cons->tag); /* Warren's: an AMQP consumer's */
    mgmt_json_kuint(w, "credits", cons->prefetch > cons->unacked ? cons->prefetch - cons->unacked : 0);
    mgmt_stream_consumer_offsets(w, cons);
    mgmt_json_key(w, "properties");
    mgmt_json_obj(w);
    mgmt_json_end_obj(w);
    mgmt_json_kstr(w, "protocol", "amqp091"); /* Warren's: which side it reads from */
    mgmt_json_key(w, "queue");
    mgmt_json_obj(w);
    mgmt_json_kbytes(w, "name", queue_name(cons->q));
    mgmt_json_kstr(w, "vhost", vhost_name(queue_vhost(cons->q)));
    mgmt_json_end_obj(w);
    mgmt_json_knull(w, "subscription_id");
    mgmt_json_end_obj(w);
}

/* ---- the viewer ------------------------------------------------------------- */

typedef struct peek_ctx {
    mgmt_json *w;
    bool base64;
    size_t truncate;
} peek_ctx;

static void show_record(void *arg, msg *m, uint64_t offset, int64_t timestamp_ms)
{
    peek_ctx *p = arg;
    mgmt_json_obj(p->w);
    mgmt_json_kuint(p->w, "offset", offset);
    mgmt_json_kint(p->w, "timestamp", timestamp_ms);
    mgmt_message_fields(p->w, m, p->base64, p->truncate);
    mgmt_json_end_obj(p->w);
}

/* A query number in [0, max], or dflt when absent; 400 otherwise. */
static bool query_uint(mgmt_req *r, const char *key, uint64_t dflt, uint64_t max, uint64_t *out)
{
    const char *s = mgmt_query(r, key);
    *out = dflt;
    if (!s)
        return true;
    char *end;
    unsigned long long v = s[0] >= '0' && s[0] <= '9' ? strtoull(s, &end, 10) : 0;
    if (s[0] < '0' || s[0] > '9' || *end || v > max) {
        mgmt_bad_value(r, "not_int", NULL, key);
        return false;
    }
    *out = v;
    return true;
}

static void get_messages(mgmt_req *r)
{
    vhost *v;
    queue *q = mgmt_queue_arg(r, &v);
    if (!q || !mgmt_permission_check(r, v, ACCESS_READ, r->cap[1]))
        return;
    if (!queue_is_stream(q)) {
        mgmt_error(r, 400, "bad_request", "not a stream");
        return;
    }
    queue_info qi;
    queue_describe(q, &qi);
    const char *enc = mgmt_query(r, "encoding");
    uint64_t offset, count, truncate;
    if (enc && strcmp(enc, "auto") != 0 && strcmp(enc, "base64") != 0) {
        mgmt_error(r, 400, "bad_request", "Unsupported encoding. Please use auto or base64.");
        return;
    }
    if (!query_uint(r, "offset", qi.log.first_offset, UINT64_MAX, &offset) ||
        !query_uint(r, "count", 10, STREAM_PEEK_MAX, &count) ||
        !query_uint(r, "truncate", SIZE_MAX, SIZE_MAX, &truncate))
        return;
    peek_ctx p = {mgmt_reply(r), enc && strcmp(enc, "base64") == 0, (size_t)truncate};
    mgmt_json_arr(p.w);
    if (queue_stream_peek(q, offset, (uint32_t)count, show_record, &p) < 0) {
        mgmt_error(r, 500, "internal_error", "the stream cannot be read");
        return;
    }
    mgmt_json_end_arr(p.w);
    mgmt_send(r, 200);
}

const mgmt_route mgmt_stream_routes[] = {
    {HTTP_GET, "/api/streams/{}/{}/messages", TAG_MANAGEMENT, get_messages},
    {0},
};
