/* Publishers: DeclarePublisher, Publish (v1, and v2 with filter values),
 * PublishConfirm once the journal synced the append, PublishError,
 * QueryPublisherSequence and DeletePublisher -- RabbitMQ's codes.
 *
 * Deduplication (RabbitMQ's, osiris's writer sequences): a publisher
 * declared with a reference carries the highest publishing id the stream
 * took from that reference (queue_stream_writer_seq: it survives a
 * restart). A message at or below it is confirmed without being stored
 * again; the others are appended and raise it, written back after the
 * batch so that it lands in the same chunk as the batch.
 *
 * Confirms wait in a ring in journal order (appends get rising journal
 * sequences); sc_flush_confirms sends those the journal has synced, one
 * PublishConfirm per run of one publisher. */
#include <stdlib.h>
#include <string.h>

#include "sconn_int.h"

static amqp_bytes bytes_of(sp_slice s) { return (amqp_bytes){s.ptr, s.len}; }

/* ---- confirms ------------------------------------------------------------ */

static bool pend(sconn *c, uint8_t publisher, uint64_t publishing_id, journal_seq seq)
{
    if (c->pend_count == c->pend_cap) {
        size_t cap = c->pend_cap ? 2 * c->pend_cap : 64;
        sc_pending *grown = malloc(cap * sizeof *grown);
        if (!grown)
            return false;
        for (size_t i = 0; i < c->pend_count; i++) /* unwrapped into the new ring */
            grown[i] = c->pending[(c->pend_head + i) % c->pend_cap];
        free(c->pending);
        c->pending = grown;
        c->pend_cap = cap;
        c->pend_head = 0;
    }
    c->pending[(c->pend_head + c->pend_count++) % c->pend_cap] =
        (sc_pending){seq, publishing_id, publisher};
    return true;
}

#define CONFIRM_BATCH 512

static void send_confirms(sconn *c, uint8_t publisher, const uint64_t *ids, size_t n)
{
    sc_publisher *p = c->pubs[publisher];
    if (!n || !p) /* a publisher deleted meanwhile hears nothing more */
        return;
    sp_buf b = sc_out(c, 16 + 8 * n);
    sp_encode_publish_confirm(&b, publisher, ids, n);
    sc_commit(c, &b);
    p->confirmed += n;
}

void sc_flush_confirms(sconn *c)
{
    journal *j = server_journal(c->srv);
    journal_seq synced = j ? journal_synced(j) : ~(journal_seq)0;
    uint64_t ids[CONFIRM_BATCH];
    size_t n = 0;
    uint8_t publisher = 0;
    while (c->pend_count) {
        sc_pending *e = &c->pending[c->pend_head];
        if (e->seq > synced)
            break;
        if (n && (n == CONFIRM_BATCH || e->publisher != publisher)) {
            send_confirms(c, publisher, ids, n);
            n = 0;
        }
        publisher = e->publisher;
        ids[n++] = e->publishing_id;
        c->pend_head = (c->pend_head + 1) % c->pend_cap;
        c->pend_count--;
    }
    send_confirms(c, publisher, ids, n);
    if (c->pend_count == 0)
        c->pend_head = 0;
}

/* PublishError for `ids` with one code, as RabbitMQ sends them. */
static void send_errors(sconn *c, uint8_t publisher, uint16_t code, const uint64_t *ids, size_t n)
{
    if (!n)
        return;
    sp_buf b = sc_out(c, 16 + 10 * n); /* id and code each */
    sp_encode_publish_error(&b, publisher, code, ids, n);
    sc_commit(c, &b);
}

/* ---- commands ------------------------------------------------------------ */

static uint16_t declare(sconn *c, const sp_command *cmd)
{
    uint8_t id = cmd->u.declare_publisher.publisher_id;
    sp_slice ref = cmd->u.declare_publisher.reference, name = cmd->u.declare_publisher.stream;
    if (!sc_allowed(c, ACCESS_WRITE, name))
        return SP_ACCESS_REFUSED;
    queue *q = sc_find_stream(c, name);
    if (!q)
        return SP_STREAM_DOES_NOT_EXIST;
    if (c->pubs[id] || ref.len > 255)
        return SP_PRECONDITION_FAILED;
    for (int i = 0; ref.len && i < SC_IDS; i++) { /* a reference once per stream here */
        sc_publisher *o = c->pubs[i];
        if (o && o->st->q == q && o->ref_len == ref.len && memcmp(o->reference, ref.ptr, ref.len) == 0)
            return SP_PRECONDITION_FAILED;
    }
    sc_publisher *p = calloc(1, sizeof *p);
    if (!p || !(p->st = sc_stream_use(c, q, name))) {
        free(p);
        return SP_INTERNAL_ERROR;
    }
    p->ref_len = (uint16_t)ref.len;
    memcpy(p->reference, ref.ptr, ref.len);
    p->known = ref.len && queue_stream_writer_seq(q, bytes_of(ref), &p->sequence);
    c->pubs[id] = p;
    return SP_OK;
}

static void release(sconn *c, uint8_t id)
{
    sc_publisher *p = c->pubs[id];
    c->pubs[id] = NULL;
    sc_stream_release(p->st);
    free(p);
}

void sc_publishers_drop(sconn *c, sc_stream *st)
{
    for (int i = 0; i < SC_IDS; i++)
        if (c->pubs[i] && c->pubs[i]->st == st) {
            free(c->pubs[i]);
            c->pubs[i] = NULL;
        }
}

/* One entry: a duplicate is confirmed as it is, the others appended. */
static bool publish_one(sconn *c, uint8_t id, sc_publisher *p, const sp_message *m)
{
    queue *q = p->st->q;
    if (p->ref_len && p->known && m->publishing_id <= p->sequence)
        return pend(c, id, m->publishing_id, 0);
    bool ok = true;
    journal_seq seq;
    if (m->batch) {
        seq = queue_stream_append_batch(q, m->compression, m->batch_count, m->uncompressed_size,
                                        m->data.ptr, m->data.len, &ok);
    } else {
        stream_part part = {m->data.ptr, m->data.len};
        seq = queue_stream_append(q, &part, 1, m->filter.ptr, m->filter.ptr ? m->filter.len : 0, &ok);
    }
    if (!ok)
        return false;
    p->published++;
    if (p->ref_len) {
        p->sequence = m->publishing_id > p->sequence || !p->known ? m->publishing_id : p->sequence;
        p->known = true;
        /* after each entry: a chunk written in the middle of a frame then
         * carries the sequence of what it holds (see queue.h) */
        if (!queue_stream_set_writer_seq(q, (amqp_bytes){(const uint8_t *)p->reference, p->ref_len},
                                         p->sequence) && !p->untracked) {
            p->untracked = true;
            log_msg(LOG_WARNING, "stream connection %s: cannot keep the sequence of publisher "
                    "'%.*s' (the stream tracks 1024 at most)", c->peer, (int)p->ref_len,
                    p->reference);
        }
    }
    loop_journal_wait(c->loop, seq);
    return pend(c, id, m->publishing_id, seq);
}

static void publish(sconn *c, const sp_command *cmd)
{
    uint8_t id = cmd->u.publish.publisher_id;
    sc_publisher *p = c->pubs[id];
    sp_list it = cmd->u.publish.messages;
    sp_message m;
    uint64_t refused[CONFIRM_BATCH];
    size_t n = 0;
    while (sp_message_next(&it, cmd->u.publish.filtered, &m)) {
        if (p && publish_one(c, id, p, &m))
            continue;
        if (p)
            p->errored++;
        refused[n++] = m.publishing_id;
        if (n == CONFIRM_BATCH) {
            send_errors(c, id, p ? SP_INTERNAL_ERROR : SP_PUBLISHER_DOES_NOT_EXIST, refused, n);
            n = 0;
        }
    }
    send_errors(c, id, p ? SP_INTERNAL_ERROR : SP_PUBLISHER_DOES_NOT_EXIST, refused, n);
}

static void query_sequence(sconn *c, const sp_command *cmd)
{
    sp_slice name = cmd->u.query_publisher_sequence.stream;
    queue *q = sc_find_stream(c, name);
    uint64_t seq = 0;
    uint16_t code = !sc_allowed(c, ACCESS_READ, name) ? SP_ACCESS_REFUSED
                    : !q ? SP_STREAM_DOES_NOT_EXIST : SP_OK;
    if (code == SP_OK)
        queue_stream_writer_seq(q, bytes_of(cmd->u.query_publisher_sequence.reference), &seq);
    sp_buf b = sc_out(c, 32);
    sp_encode_query_publisher_sequence_response(&b, cmd->correlation_id, code, seq);
    sc_commit(c, &b);
}

bool sc_publish_command(sconn *c, const sp_command *cmd)
{
    switch (cmd->key) {
    case SP_DECLARE_PUBLISHER:
        sc_response(c, SP_DECLARE_PUBLISHER, cmd->correlation_id, declare(c, cmd));
        return true;
    case SP_PUBLISH:
        publish(c, cmd);
        return true;
    case SP_QUERY_PUBLISHER_SEQUENCE:
        query_sequence(c, cmd);
        return true;
    case SP_DELETE_PUBLISHER: {
        uint8_t id = cmd->u.delete_publisher.publisher_id;
        bool found = c->pubs[id] != NULL;
        if (found)
            release(c, id);
        sc_response(c, SP_DELETE_PUBLISHER, cmd->correlation_id,
                    found ? SP_OK : SP_PUBLISHER_DOES_NOT_EXIST);
        return true;
    }
    default:
        return false;
    }
}
