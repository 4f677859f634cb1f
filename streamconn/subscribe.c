/* Subscriptions: Subscribe (every offset specification; filter values and
 * match-unfiltered as 3.13 takes them), Deliver of whole chunks, Credit
 * (one credit = one chunk), Unsubscribe.
 *
 * A subscription is a stream/ reader opened on the stream queue's log.
 * A chunk goes out as RabbitMQ's send_file sends it: the Deliver header,
 * the 48-byte chunk header as stored, then the data (no filter bytes, no
 * trailer). The data is read from the segment straight into the
 * transport's output block (one pread, no buffer of our own), so memory
 * is bounded by the output limit -- past conn_output_limit delivering
 * stops until the client has read -- however long the stream. A reader
 * at the end waits for the queue's committed notification (the stream's
 * watch). A filter makes the reader skip chunks whose Bloom filter has no
 * wanted value; the chunks sent may still hold other messages, which the
 * client filters, as with RabbitMQ. */
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sconn_int.h"

/* Filter values a Subscribe may carry (each a "filter.<n>" property). */
#define SUB_FILTER_MAX 32

/* With `release`, its hold on the stream goes too; with `gone`, the
 * stream itself is gone (its group with it). */
static void close_sub(sconn *c, uint8_t id, bool release, bool gone)
{
    sc_sub *s = c->subs[id];
    c->subs[id] = NULL;
    if (s->sac)
        sc_sac_left(c, s, !gone);
    stream_reader_close(s->r);
    if (release)
        sc_stream_release(s->st);
    free(s->filter_bytes);
    free((void *)s->filter.values);
    free(s);
}

void sc_subs_drop(sconn *c, sc_stream *st, bool gone)
{
    for (int i = 0; i < SC_IDS; i++)
        if (c->subs[i] && c->subs[i]->st == st)
            close_sub(c, (uint8_t)i, false, gone);
}

/* The Deliver frame's header and the stored chunk header. */
static bool put_headers(sconn *c, sc_sub *s, const stream_chunk *ch, sp_buf *b)
{
    uint64_t len = STREAM_CHUNK_HEADER_SIZE + (uint64_t)ch->data_len;
    bool v2 = c->deliver_version == 2;
    stream_info info;
    if (v2)
        stream_get_info(queue_stream_log(s->st->q), &info);
    if (!b->p || !sp_encode_deliver_header(b, v2 ? 2 : 1, s->id, v2 ? info.committed_chunk_id : 0,
                                           len))
        return false;
    sp_put_raw(b, ch->header, STREAM_CHUNK_HEADER_SIZE);
    return true;
}

/* The data read from the segment straight into the output block. */
static bool read_data(sconn *c, sc_sub *s, const stream_chunk *ch, uint8_t *to)
{
    for (size_t done = 0; done < ch->data_len;) {
        ssize_t n = pread(ch->fd, to + done, ch->data_len - done, ch->data_pos + (off_t)done);
        if (n <= 0) {
            log_msg(LOG_ERROR, "stream connection %s: reading stream '%s': %s", c->peer,
                    s->st->name, n ? strerror(errno) : "unexpected end of segment");
            return false;
        }
        done += (size_t)n;
    }
    return true;
}

/* One chunk as a Deliver frame: headers, then the data -- over plain TCP
 * sent from the segment file by sendfile (never in memory), otherwise
 * read into the output block. False when it cannot be had (the
 * subscription stops; after a half-sent frame the connection closes). */
static bool send_chunk(sconn *c, sc_sub *s, const stream_chunk *ch)
{
    bool from_file = transport_sends_files(c->t);
    sp_buf b = sc_out(c, SP_DELIVER_HEADER_MAX + STREAM_CHUNK_HEADER_SIZE +
                             (from_file ? 0 : ch->data_len));
    if (!put_headers(c, s, ch, &b))
        return false;
    if (!from_file && !read_data(c, s, ch, b.p + b.len))
        return false;
    b.len += from_file ? 0 : ch->data_len;
    sc_commit(c, &b);
    if (from_file && !transport_write_file(c->t, ch->fd, ch->data_pos, ch->data_len)) {
        log_msg(LOG_ERROR, "stream connection %s: cannot send from stream '%s': %s", c->peer,
                s->st->name, strerror(errno));
        sc_teardown(c);
        return false;
    }
    s->chunks++;
    s->records += ch->num_records;
    if (transport_pending(c->t) > server_config(c->srv)->conn_output_limit)
        c->output_full = true;
    return true;
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    sc_subs_deliver(arg, NULL);
}

/* A filter passed over STREAM_SKIP_MAX chunks: go on in the next turn, so
 * one turn stays short however long the stream. */
static void resume_later(sconn *c)
{
    if (!c->resume)
        c->resume = event_new(loop_base(c->loop), -1, 0, resume_cb, c);
    if (c->resume)
        event_active(c->resume, EV_TIMEOUT, 0);
}

static void deliver(sconn *c, sc_sub *s)
{
    if (s->sac && (!s->active || s->awaiting))
        return;
    while (s->credit && !c->output_full && c->state == SC_OPEN) {
        stream_chunk ch;
        stream_status st = stream_reader_next(s->r, false, &ch);
        if (st == STREAM_AGAIN) {
            resume_later(c);
            return;
        }
        if (st == STREAM_END)
            return;
        if (st != STREAM_OK || !send_chunk(c, s, &ch)) {
            if (st != STREAM_OK)
                log_msg(LOG_ERROR, "stream connection %s: reading stream '%s': %s", c->peer,
                        s->st->name, stream_status_text(st));
            s->credit = 0; /* stuck on a bad chunk: deliver nothing more */
            return;
        }
        s->credit--;
    }
}

void sc_sub_deliver(sconn *c, sc_sub *s) { deliver(c, s); }

void sc_subs_deliver(sconn *c, sc_stream *st)
{
    for (int i = 0; i < SC_IDS; i++)
        if (c->subs[i] && (!st || c->subs[i]->st == st))
            deliver(c, c->subs[i]);
}

bool sc_sub_seek(sc_sub *s, const stream_start *start)
{
    stream_reader *r;
    if (stream_reader_open(queue_stream_log(s->st->q), start, s->filter.count ? &s->filter : NULL,
                           &r) != STREAM_OK)
        return false;
    stream_reader_close(s->r);
    s->r = r;
    return true;
}

/* ---- Subscribe ----------------------------------------------------------- */

stream_start sc_start_of(sp_offset_spec o)
{
    switch (o.type) {
    case SP_OFFSET_FIRST:
        return (stream_start){.kind = STREAM_START_FIRST};
    case SP_OFFSET_LAST:
        return (stream_start){.kind = STREAM_START_LAST};
    case SP_OFFSET_OFFSET:
        return (stream_start){.kind = STREAM_START_OFFSET, .offset = o.value};
    case SP_OFFSET_TIMESTAMP:
        return (stream_start){.kind = STREAM_START_TIMESTAMP, .timestamp_ms = (int64_t)o.value};
    default:
        return (stream_start){.kind = STREAM_START_NEXT};
    }
}

static bool prefixed(sp_slice s, const char *prefix)
{
    size_t n = strlen(prefix);
    return s.len >= n && memcmp(s.ptr, prefix, n) == 0;
}

static bool equals(sp_slice s, const char *text)
{
    return s.len == strlen(text) && memcmp(s.ptr, text, s.len) == 0;
}

/* The properties Warren reads: filter.* values and match-unfiltered
 * (3.13), name and single-active-consumer (which needs a name: RabbitMQ's
 * precondition_failed), super-stream (the partition's index then chooses
 * the active member, sac.c). */
static uint16_t read_properties(sconn *c, queue *q, sp_list props, stream_part *values,
                                stream_filter *f, sc_sub *s)
{
    sp_slice k, v;
    s->partition = -1;
    *f = (stream_filter){.values = values};
    while (sp_pair_next(&props, &k, &v)) {
        if (prefixed(k, SP_PROP_FILTER_PREFIX)) {
            if (f->count == SUB_FILTER_MAX)
                return SP_PRECONDITION_FAILED;
            values[f->count++] = (stream_part){v.ptr, v.len};
        } else if (equals(k, SP_PROP_MATCH_UNFILTERED)) {
            f->match_unfiltered = equals(v, "true");
        } else if (equals(k, SP_PROP_SINGLE_ACTIVE_CONSUMER)) {
            s->sac = equals(v, "true");
        } else if (equals(k, SP_PROP_SUPER_STREAM)) {
            s->partition = sc_partition_index(c, v, q);
        } else if (equals(k, SP_PROP_NAME)) {
            if (v.len >= sizeof s->name)
                return SP_PRECONDITION_FAILED;
            memcpy(s->name, v.ptr, v.len);
            s->name_len = (uint16_t)v.len;
        }
    }
    return s->sac && !s->name_len ? SP_PRECONDITION_FAILED : SP_OK;
}

/* A single active consumer's filter, kept for when it is moved to where
 * ConsumerUpdate says (its values point into the frame until then). */
static bool keep_filter(sc_sub *s, const stream_filter *f)
{
    size_t total = 0;
    for (size_t i = 0; i < f->count; i++)
        total += f->values[i].len;
    stream_part *parts = malloc(f->count * sizeof *parts);
    uint8_t *bytes = malloc(total ? total : 1);
    if (!parts || !bytes) {
        free(parts);
        free(bytes);
        return false;
    }
    for (size_t i = 0, at = 0; i < f->count; at += f->values[i].len, i++) {
        memcpy(bytes + at, f->values[i].bytes, f->values[i].len);
        parts[i] = (stream_part){bytes + at, f->values[i].len};
    }
    s->filter = (stream_filter){parts, f->count, f->match_unfiltered};
    s->filter_bytes = bytes;
    return true;
}

static uint16_t subscribe(sconn *c, const sp_command *cmd)
{
    uint8_t id = cmd->u.subscribe.subscription_id;
    sp_slice name = cmd->u.subscribe.stream;
    if (!sc_allowed(c, ACCESS_READ, name))
        return SP_ACCESS_REFUSED;
    queue *q = sc_find_stream(c, name);
    if (!q)
        return SP_STREAM_DOES_NOT_EXIST;
    if (c->subs[id])
        return SP_SUBSCRIPTION_ID_ALREADY_EXISTS;
    stream_part values[SUB_FILTER_MAX];
    stream_filter filter;
    sc_sub *s = calloc(1, sizeof *s);
    if (!s)
        return SP_INTERNAL_ERROR;
    uint16_t code = read_properties(c, q, cmd->u.subscribe.properties, values, &filter, s);
    stream_start start = sc_start_of(cmd->u.subscribe.offset);
    if (code == SP_OK &&
        stream_reader_open(queue_stream_log(q), &start, filter.count ? &filter : NULL, &s->r) !=
            STREAM_OK)
        code = SP_INTERNAL_ERROR;
    if (code == SP_OK && s->sac && filter.count && !keep_filter(s, &filter))
        code = SP_INTERNAL_ERROR;
    if (code != SP_OK) {
        stream_reader_close(s->r);
        free(s);
        return code;
    }
    if (!(s->st = sc_stream_use(c, q, name))) {
        stream_reader_close(s->r);
        free(s->filter_bytes);
        free((void *)s->filter.values);
        free(s);
        return SP_INTERNAL_ERROR;
    }
    s->id = id;
    s->credit = cmd->u.subscribe.credit;
    c->subs[id] = s;
    return SP_OK;
}

bool sc_subscribe_command(sconn *c, const sp_command *cmd)
{
    uint8_t id;
    uint16_t code;
    switch (cmd->key) {
    case SP_SUBSCRIBE: {
        code = subscribe(c, cmd);
        sc_response(c, SP_SUBSCRIBE, cmd->correlation_id, code);
        sc_sub *s = code == SP_OK ? c->subs[cmd->u.subscribe.subscription_id] : NULL;
        if (s && s->sac) /* after the response, as RabbitMQ's coordinator */
            sc_sac_joined(c, s);
        if (s)
            deliver(c, s);
        return true;
    }
    case SP_CONSUMER_UPDATE:
        if (!cmd->response)
            return false;
        sc_sac_updated(c, cmd);
        return true;
    case SP_CREDIT:
        id = cmd->u.credit.subscription_id;
        if (!c->subs[id]) { /* the only Credit response: an error */
            sp_buf b = sc_out(c, 16);
            sp_encode_credit_response(&b, SP_SUBSCRIPTION_ID_DOES_NOT_EXIST, id);
            sc_commit(c, &b);
            return true;
        }
        /* credit adds up (RabbitMQ's too), bounded so it cannot wrap */
        c->subs[id]->credit = c->subs[id]->credit + cmd->u.credit.credit > (1u << 30)
                                  ? 1u << 30 : c->subs[id]->credit + cmd->u.credit.credit;
        deliver(c, c->subs[id]);
        return true;
    case SP_UNSUBSCRIBE:
        id = cmd->u.unsubscribe.subscription_id;
        code = c->subs[id] ? SP_OK : SP_SUBSCRIPTION_ID_DOES_NOT_EXIST;
        if (code == SP_OK)
            close_sub(c, id, true, false);
        sc_response(c, SP_UNSUBSCRIBE, cmd->correlation_id, code);
        return true;
    default:
        return false;
    }
}
