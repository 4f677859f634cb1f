/* A stream queue's AMQP 0-9-1 side, RabbitMQ 3.10's rules: publishing
 * converts the message to AMQP 1.0 and appends it; each consumer reads the
 * log through its own cursor (a stream/ reader) from where x-stream-offset
 * says, at its own pace -- acks are credit, nothing is taken away -- and
 * every delivery carries the x-stream-offset header. basic.get, nack,
 * reject and purge are refused by conn/ (queue_type.reads_without_taking).
 *
 * Filtering (RabbitMQ 3.13's x-stream-filter, x-stream-match-unfiltered):
 * chunks whose Bloom filter rules out every wanted value are passed over
 * without reading them, and each message is then matched exactly, so no
 * false positive reaches a consumer (RabbitMQ leaves that to the client).
 *
 * A dispatch delivers at most what each consumer's prefetch allows and
 * passes over at most STREAM_SKIP_MAX chunks per consumer; a consumer with
 * more to skip continues on the next loop turn, so one far behind or
 * filtering most of a long stream never holds the loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../amqp10/amqp10.h"
#include "queue.h"
#include "queue_internal.h"

struct stream_cursor {
    stream_reader *r;
    stream_chunk chunk;
    bool in_chunk;
    stream_entry_iter it;
    /* an uncompressed sub-batch being walked: its records as size + bytes */
    const uint8_t *batch, *batch_end;
    uint64_t batch_offset;
    bool filtered;
    stream_filter filter;
    stream_part *values;
    uint8_t *value_bytes;
    struct event *again; /* more to skip: continue next turn */
    uint64_t skipped_unsupported;
};

#define PRINTABLE(b) (int)(b).len, (const char *)(b).ptr

/* ---- publishing --------------------------------------------------------- */

bool stream_publish(queue *q, msg *m, int64_t expiration_ms)
{
    (void)expiration_ms; /* a stream keeps messages by retention, not TTL */
    amqp_basic_properties p;
    if (amqp_properties_decode(msg_properties(m), &p, NULL) != AMQP_OK)
        return false;
    size_t cap = 0;
    uint8_t *buf = loop_read_buffer(vhost_loop(queue_vhost(q)), msg_properties(m).len * 2 + 512,
                                    &cap);
    amqp_writer w;
    amqp_writer_init(&w, buf, cap);
    if (!buf || amqp10_from_091(&p, msg_exchange(m), msg_routing_key(m), msg_body_size(m), &w) !=
                    AMQP10_OK)
        return false;
    amqp_field f;
    amqp_bytes filter = {0};
    if (amqp_table_get(p.headers, "x-stream-filter-value", &f) && f.type == 'S')
        filter = f.v.bytes;
    stream_part parts[2] = {{w.buf, w.len}, {msg_body(m), msg_body_size(m)}};
    bool ok;
    queue_stream_append(q, parts, 2, filter.ptr, filter.len, &ok); /* see queue_stream_pending */
    return ok;
}

/* Nothing to take: a stream is read by consumers only (conn/ refuses
 * basic.get with RabbitMQ's 540 before this). */
bool stream_get(queue *q, queue_item *it)
{
    (void)q, (void)it;
    return false;
}

/* A delivery came back (its channel closed, its consumer was cancelled):
 * the message stays in the stream where it was; only the credit returns,
 * which the channel counts. */
void stream_requeue(queue *q, queue_item it, queue_return why)
{
    (void)q, (void)it, (void)why;
}

uint32_t stream_purge(queue *q)
{
    (void)q; /* retention removes whole segments; conn/ refuses queue.purge */
    return 0;
}

void stream_describe(queue *q, queue_info *out)
{
    queue_core_describe(q, out);
    out->stream = true;
    stream_queue_info(queue_stream_state(q), &out->log);
}

/* ---- basic.consume ------------------------------------------------------ */

static const char *vname(queue *q) { return vhost_name(queue_vhost(q)); }

/* x-stream-offset as RabbitMQ 3.10 reads it (stream.h's stream_start). */
static int parse_offset(queue *q, amqp_bytes args, stream_start *at, amqp_error *err)
{
    amqp_field f;
    *at = (stream_start){.kind = STREAM_START_NEXT};
    if (!amqp_table_get(args, "x-stream-offset", &f))
        return AMQP_OK;
    amqp_bytes name = queue_name(q);
    int64_t n;
    if (f.type == 'T') {
        *at = (stream_start){.kind = STREAM_START_TIMESTAMP, .timestamp_ms = f.v.i * 1000};
        return AMQP_OK;
    }
    if (amqp_field_int(&f, &n)) { /* a negative offset means the first */
        *at = n < 0 ? (stream_start){.kind = STREAM_START_FIRST}
                    : (stream_start){.kind = STREAM_START_OFFSET, .offset = (uint64_t)n};
        return AMQP_OK;
    }
    if (f.type == 'S') {
        amqp_bytes s = f.v.bytes;
        if (amqp_bytes_equal_cstr(s, "first"))
            at->kind = STREAM_START_FIRST;
        else if (amqp_bytes_equal_cstr(s, "last"))
            at->kind = STREAM_START_LAST;
        else if (amqp_bytes_equal_cstr(s, "next"))
            at->kind = STREAM_START_NEXT;
        else {
            int64_t age;
            stream_age_status st = stream_parse_age((const char *)s.ptr, s.len, &age);
            if (st == STREAM_AGE_NO_NUMBER) /* RabbitMQ 3.10's channel crashes */
                return amqp_fail_crash(err, AMQP_BASIC_CONSUME);
            if (st == STREAM_AGE_INVALID)
                return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_CONSUME,
                                 "invalid arg 'x-stream-offset' for queue '%.*s' in vhost '%s': "
                                 "{invalid_stream_offset_arg,{longstr,<<\"%.*s\">>}}",
                                 PRINTABLE(name), vname(q), (int)(s.len > 64 ? 64 : s.len),
                                 (const char *)s.ptr);
            *at = (stream_start){.kind = STREAM_START_TIMESTAMP,
                                 .timestamp_ms = (int64_t)wall_clock_ms() - age};
        }
        return AMQP_OK;
    }
    return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_CONSUME,
                     "invalid arg 'x-stream-offset' for queue '%.*s' in vhost '%s': "
                     "{invalid_stream_offset_arg,{%s,...}}",
                     PRINTABLE(name), vname(q), amqp_erl_type_name(f.type));
}

/* x-stream-filter: a string or an array of strings, copied. */
static int parse_filter(queue *q, amqp_bytes args, struct stream_cursor *cur, amqp_error *err)
{
    amqp_field f;
    if (!amqp_table_get(args, "x-stream-filter", &f))
        return AMQP_OK;
    amqp_bytes name = queue_name(q);
    size_t n = 0, bytes = 0;
    amqp_bytes one[1] = {{0}};
    amqp_iter it;
    amqp_field e;
    if (f.type == 'S') {
        one[0] = f.v.bytes;
        n = 1, bytes = f.v.bytes.len;
    } else if (f.type == 'A') {
        amqp_iter_init(&it, f.v.bytes);
        while (amqp_array_next(&it, &e)) {
            if (e.type != 'S')
                goto bad;
            n++, bytes += e.v.bytes.len;
        }
    }
    if (n == 0)
        goto bad;
    cur->values = calloc(n, sizeof *cur->values);
    cur->value_bytes = malloc(bytes ? bytes : 1);
    if (!cur->values || !cur->value_bytes)
        return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_CONSUME, "out of memory");
    size_t i = 0, at = 0;
    if (f.type == 'S') {
        memcpy(cur->value_bytes, one[0].ptr, one[0].len);
        cur->values[i++] = (stream_part){cur->value_bytes, one[0].len};
    } else {
        amqp_iter_init(&it, f.v.bytes);
        while (amqp_array_next(&it, &e)) {
            memcpy(cur->value_bytes + at, e.v.bytes.ptr, e.v.bytes.len);
            cur->values[i++] = (stream_part){cur->value_bytes + at, e.v.bytes.len};
            at += e.v.bytes.len;
        }
    }
    cur->filtered = true;
    cur->filter = (stream_filter){.values = cur->values, .count = n};
    cur->filter.match_unfiltered =
        amqp_table_get(args, "x-stream-match-unfiltered", &f) && f.type == 't' && f.v.i;
    return AMQP_OK;
bad:
    return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_CONSUME,
                     "invalid arg 'x-stream-filter' for queue '%.*s' in vhost '%s'",
                     PRINTABLE(name), vname(q));
}

static void cursor_free(struct stream_cursor *cur)
{
    if (!cur)
        return;
    stream_reader_close(cur->r);
    if (cur->again)
        event_free(cur->again);
    free(cur->values);
    free(cur->value_bytes);
    free(cur);
}

int stream_consume(queue *q, consumer *c, amqp_bytes args, amqp_error *err)
{
    amqp_bytes name = queue_name(q);
    /* acks are the credit that paces it (3.10's order and texts) */
    if (c->prefetch == 0)
        return amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_BASIC_CONSUME,
                         "consumer prefetch count is not set for 'queue '%.*s' in vhost '%s''",
                         PRINTABLE(name), vname(q));
    if (c->no_ack)
        return amqp_fail(err, AMQP_NOT_IMPLEMENTED, AMQP_BASIC_CONSUME,
                         "automatic acknowledgement not supported by stream queues queue '%.*s' "
                         "in vhost '%s'", PRINTABLE(name), vname(q));
    stream_start at;
    if (parse_offset(q, args, &at, err) != AMQP_OK)
        return AMQP_ERROR;
    struct stream_cursor *cur = calloc(1, sizeof *cur);
    if (!cur)
        return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_CONSUME, "out of memory");
    if (parse_filter(q, args, cur, err) != AMQP_OK) {
        cursor_free(cur);
        return AMQP_ERROR;
    }
    stream_status st = stream_reader_open(queue_stream_log(q), &at,
                                          cur->filtered ? &cur->filter : NULL, &cur->r);
    if (st != STREAM_OK) {
        cursor_free(cur);
        return amqp_fail(err, AMQP_INTERNAL_ERROR, AMQP_BASIC_CONSUME,
                         "cannot read stream '%.*s': %s", PRINTABLE(name), stream_status_text(st));
    }
    c->cursor = cur;
    return AMQP_OK;
}

void stream_consumer_gone(queue *q, consumer *c)
{
    (void)q;
    cursor_free(c->cursor);
    c->cursor = NULL;
}

/* ---- delivering ----------------------------------------------------------- */

typedef enum { REC_OK, REC_NONE, REC_LATER } rec_status;

/* A record this consumer cannot be given: counted; the first one logged. */
static void passed_over(queue *q, struct stream_cursor *cur, uint64_t offset, uint32_t n)
{
    if (cur->skipped_unsupported == 0) {
        amqp_bytes name = queue_name(q);
        log_msg(LOG_WARNING, "stream '%.*s' in vhost '%s': offset %llu is not an AMQP 0-9-1 "
                "message (or a compressed batch): passed over for an AMQP consumer, and any "
                "more such are not logged", PRINTABLE(name), vname(q), (unsigned long long)offset);
    }
    cur->skipped_unsupported += n;
}

/* The cursor's next record that passes its filter. */
static rec_status next_record(queue *q, struct stream_cursor *cur, amqp_bytes *rec,
                              uint64_t *offset)
{
    for (;;) {
        if (cur->batch && cur->batch + 4 <= cur->batch_end) {
            const uint8_t *p = cur->batch;
            uint32_t len = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
            if (len > (size_t)(cur->batch_end - p - 4)) {
                cur->batch = NULL; /* a bad sub-batch: its rest is passed over */
                continue;
            }
            *rec = (amqp_bytes){p + 4, len};
            *offset = cur->batch_offset++;
            cur->batch = p + 4 + len;
            if (*offset < cur->chunk.skip_below)
                continue;
            return REC_OK;
        }
        cur->batch = NULL;
        if (cur->in_chunk) {
            stream_entry e;
            stream_status st = stream_entry_next(&cur->it, &e);
            if (st == STREAM_OK) {
                if (cur->filtered && !stream_filter_match(&cur->filter, &e))
                    continue;
                if (!e.batch) {
                    *rec = (amqp_bytes){e.bytes, e.len};
                    *offset = e.offset;
                    return REC_OK;
                }
                if (e.compression != 0) { /* AMQP consumers get uncompressed ones */
                    passed_over(q, cur, e.offset, e.records);
                    continue;
                }
                cur->batch = e.bytes;
                cur->batch_end = e.bytes + e.len;
                cur->batch_offset = e.offset;
                continue;
            }
            cur->in_chunk = false; /* its end, or a corrupt entry: the rest is skipped */
        }
        stream_status st = stream_reader_next(cur->r, true, &cur->chunk);
        if (st == STREAM_OK) {
            stream_entry_begin(&cur->it, &cur->chunk);
            cur->in_chunk = true;
            continue;
        }
        if (st == STREAM_AGAIN)
            return REC_LATER;
        if (st != STREAM_END) {
            amqp_bytes n = queue_name(q);
            log_msg(LOG_ERROR, "stream '%.*s' in vhost '%s': reading: %s", PRINTABLE(n), vname(q),
                    stream_status_text(st));
        }
        return REC_NONE;
    }
}

/* The stored message as an AMQP 0-9-1 one; NULL when it cannot be given
 * (not a message RabbitMQ could convert either: counted, passed over). */
static msg *as_091(queue *q, amqp_bytes rec, uint64_t offset)
{
    amqp10_message m;
    if (amqp10_message_parse(rec, &m) != AMQP10_OK)
        return NULL;
    size_t cap = 0;
    uint8_t *buf = loop_read_buffer(vhost_loop(queue_vhost(q)), rec.len + 1024, &cap);
    amqp_writer w;
    amqp_writer_init(&w, buf, cap);
    amqp10_as_091 out;
    if (!buf || amqp10_to_091(&m, (int64_t)offset, &w, &out) != AMQP10_OK)
        return NULL;
    amqp_bytes key = out.routing_key.ptr ? out.routing_key : queue_name(q);
    msg *d = msg_new(loop_msgs(vhost_loop(queue_vhost(q))), out.exchange, key, out.properties,
                     out.body.len);
    if (d && !msg_append_body(d, out.body.ptr, out.body.len)) {
        msg_unref(d);
        d = NULL;
    }
    return d;
}

static void again_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    queue_dispatch(arg);
}

static void come_back(queue *q, struct stream_cursor *cur)
{
    if (!cur->again)
        cur->again = event_new(loop_base(vhost_loop(queue_vhost(q))), -1, 0, again_cb, q);
    if (cur->again)
        event_active(cur->again, EV_TIMEOUT, 0);
}

/* Fills one consumer up to its prefetch. */
static void serve(queue *q, consumer *c)
{
    struct stream_cursor *cur = c->cursor;
    uint64_t now = loop_now_ms(vhost_loop(queue_vhost(q)));
    while (c->ops->can_take(c)) {
        amqp_bytes rec;
        uint64_t offset;
        rec_status st = next_record(q, cur, &rec, &offset);
        if (st == REC_LATER)
            come_back(q, cur);
        if (st != REC_OK)
            return;
        msg *m = as_091(q, rec, offset);
        if (!m) {
            passed_over(q, cur, offset, 1);
            continue;
        }
        c->ops->deliver(c, q, (queue_item){.m = m, .enqueued_at = now});
    }
}

void stream_dispatch(queue *q)
{
    if (queue_is_deleted(q))
        return;
    /* each consumer its share; a consumer cancelled while served (its
     * channel closed on a delivery) is no longer in the ring */
    for (consumer *c = queue_next_consumer(q, NULL), *next; c; c = next) {
        next = queue_next_consumer(q, c);
        if (c->cursor)
            serve(q, c);
    }
}

bool queue_stream_consumer_offset(const consumer *c, uint64_t *offset)
{
    if (!c->cursor)
        return false;
    *offset = stream_reader_offset(c->cursor->r);
    return true;
}

/* Reading without consuming (the management plane's viewer): a reader of
 * its own from `offset`, no cursor kept, records passed over when they
 * cannot be given as AMQP 0-9-1 (at most PEEK_SCAN_MAX of them). */
#define PEEK_SCAN_MAX 4096
int queue_stream_peek(queue *q, uint64_t offset, uint32_t count, queue_peek_fn fn, void *arg)
{
    struct stream_cursor cur = {0};
    stream_start at = {.kind = STREAM_START_OFFSET, .offset = offset};
    if (!queue_is_stream(q) || stream_reader_open(queue_stream_log(q), &at, NULL, &cur.r) != STREAM_OK)
        return -1;
    uint32_t n = 0, passed = 0;
    while (n < count && passed < PEEK_SCAN_MAX) {
        amqp_bytes rec;
        uint64_t off;
        if (next_record(q, &cur, &rec, &off) != REC_OK)
            break;
        msg *m = off < offset ? NULL : as_091(q, rec, off);
        if (!m) {
            passed++;
            continue;
        }
        fn(arg, m, off, cur.chunk.timestamp_ms);
        msg_unref(m);
        n++;
    }
    stream_reader_close(cur.r);
    return (int)n;
}
