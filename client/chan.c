/* Channels of a client connection: open and close, synchronous calls one
 * at a time, publishing (with confirm sequence numbers), acks, and the
 * assembly of delivered and returned messages.
 *
 * Channel states: FREE -> OPENING -> OPEN -> CLOSING -> FREE (also
 * OPEN -> FREE on the server's channel.close).
 *
 * Calls wait in `calls` as records [u32 length][u8 nowait][frame]: the
 * front one goes out when no call is in flight; a nowait call goes out in
 * order and expects no reply.
 *
 * Assembly: deliver/return copies its short strings into the channel, the
 * header its properties; a body that comes in one frame is handed out as
 * a slice of that frame (no copy), a larger one is gathered into the
 * channel's body buffer, sized from the header's body size, which is
 * bounded by max_message_size before anything is allocated.
 */
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"

static cchan *chan_get(const client *c, uint16_t ch)
{
    return ch >= 1 && ch <= CLIENT_MAX_CHANNELS ? c->ch[ch] : NULL;
}

static void reset(cchan *h)
{
    h->state = CH_FREE;
    h->confirms = h->call_in_flight = false;
    h->next_seq = 0;
    h->content = CONTENT_NONE;
    evbuffer_drain(h->calls, evbuffer_get_length(h->calls));
}

void client_chans_free(client *c)
{
    for (int i = 0; i <= CLIENT_MAX_CHANNELS; i++) {
        cchan *h = c->ch[i];
        if (!h)
            continue;
        evbuffer_free(h->calls);
        free(h->props);
        free(h->body);
        free(h);
        c->ch[i] = NULL;
    }
}

bool client_channel_open(client *c, uint16_t ch)
{
    if (!client_is_open(c) || ch < 1 || ch > CLIENT_MAX_CHANNELS ||
        (c->channel_max && ch > c->channel_max))
        return false;
    cchan *h = c->ch[ch];
    if (h && h->state != CH_FREE)
        return false;
    if (!h) {
        h = calloc(1, sizeof *h);
        if (!h || !(h->calls = evbuffer_new())) {
            free(h);
            return false;
        }
        c->ch[ch] = h;
    }
    reset(h);
    h->state = CH_OPENING;
    amqp_method m = {.id = AMQP_CHANNEL_OPEN};
    client_send_method(c, ch, &m);
    return true;
}

bool client_channel_close(client *c, uint16_t ch)
{
    cchan *h = chan_get(c, ch);
    if (!client_is_open(c) || !h || h->state != CH_OPEN)
        return false;
    amqp_method m = {.id = AMQP_CHANNEL_CLOSE};
    m.channel_close.reply_code = AMQP_REPLY_SUCCESS;
    m.channel_close.reply_text = AMQP_CSTR("Goodbye");
    client_send_method(c, ch, &m);
    h->state = CH_CLOSING;
    return true;
}

bool client_channel_is_open(const client *c, uint16_t ch)
{
    const cchan *h = chan_get(c, ch);
    return client_is_open(c) && h && h->state == CH_OPEN;
}

/* ---- calls ----------------------------------------------------------------- */

static bool method_nowait(const amqp_method *m)
{
    switch (m->id) {
    case AMQP_EXCHANGE_DECLARE: return m->exchange_declare.nowait;
    case AMQP_EXCHANGE_DELETE: return m->exchange_delete.nowait;
    case AMQP_EXCHANGE_BIND: return m->exchange_bind.nowait;
    case AMQP_EXCHANGE_UNBIND: return m->exchange_unbind.nowait;
    case AMQP_QUEUE_DECLARE: return m->queue_declare.nowait;
    case AMQP_QUEUE_BIND: return m->queue_bind.nowait;
    case AMQP_QUEUE_PURGE: return m->queue_purge.nowait;
    case AMQP_QUEUE_DELETE: return m->queue_delete.nowait;
    case AMQP_BASIC_CONSUME: return m->basic_consume.nowait;
    case AMQP_BASIC_CANCEL: return m->basic_cancel.nowait;
    case AMQP_CONFIRM_SELECT: return m->confirm_select.nowait;
    default: return false;
    }
}

/* Sends the waiting calls up to the next one that expects a reply. */
static void pump(client *c, uint16_t ch, cchan *h)
{
    while (!h->call_in_flight && evbuffer_get_length(h->calls) >= 5) {
        uint8_t head[5], frame[16384 + AMQP_FRAME_OVERHEAD];
        evbuffer_remove(h->calls, head, 5);
        uint32_t n;
        memcpy(&n, head, 4);
        evbuffer_remove(h->calls, frame, n);
        transport_write(c->t, frame, n);
        if (!head[4])
            h->call_in_flight = true;
        else if (frame[AMQP_FRAME_HEADER_SIZE + 1] == AMQP_CLASS_CONFIRM)
            h->confirms = true, h->next_seq = 1; /* confirm.select nowait */
    }
    (void)ch;
}

bool client_call(client *c, uint16_t ch, const amqp_method *m)
{
    cchan *h = chan_get(c, ch);
    if (!client_is_open(c) || !h || h->state != CH_OPEN)
        return false;
    uint8_t buf[16384 + AMQP_FRAME_OVERHEAD];
    size_t n = client_encode_method(ch, m, buf, sizeof buf);
    if (!n || n > c->frame_max + AMQP_FRAME_OVERHEAD)
        return false;
    uint8_t head[5];
    uint32_t len = (uint32_t)n;
    memcpy(head, &len, 4);
    head[4] = method_nowait(m);
    if (evbuffer_add(h->calls, head, 5) < 0 || evbuffer_add(h->calls, buf, n) < 0)
        return false;
    pump(c, ch, h);
    return true;
}

/* ---- publishing and acks ---------------------------------------------------- */

uint64_t client_publish(client *c, uint16_t ch, amqp_bytes exchange, amqp_bytes routing_key,
                        bool mandatory, amqp_bytes properties, amqp_bytes body)
{
    cchan *h = chan_get(c, ch);
    if (!client_is_open(c) || !h || h->state != CH_OPEN)
        return 0;
    if (!client_writable(c)) {
        c->want_writable = true;
        return 0;
    }
    amqp_method m = {.id = AMQP_BASIC_PUBLISH};
    m.basic_publish.exchange = exchange;
    m.basic_publish.routing_key = routing_key;
    m.basic_publish.mandatory = mandatory;
    static const uint8_t no_props[2] = {0, 0};
    if (!properties.len)
        properties = (amqp_bytes){no_props, 2};
    size_t hlen = 12 + (size_t)properties.len;
    if (hlen > c->frame_max)
        return 0;
    uint8_t *p = transport_reserve(c->t, 600 + hlen + AMQP_FRAME_OVERHEAD);
    if (!p)
        return 0;
    size_t mlen = client_encode_method(ch, &m, p, 600);
    if (!mlen)
        return 0;
    uint8_t *q = p + mlen;
    amqp_frame_header_put(q, AMQP_FRAME_HEADER, ch, (uint32_t)hlen);
    amqp_writer w;
    amqp_writer_init(&w, q + AMQP_FRAME_HEADER_SIZE, hlen + 1);
    amqp_put_u16(&w, AMQP_CLASS_BASIC);
    amqp_put_u16(&w, 0);
    amqp_put_u64(&w, body.len);
    amqp_put_raw(&w, properties.ptr, properties.len);
    amqp_put_u8(&w, AMQP_FRAME_END);
    transport_commit(c->t, mlen + hlen + AMQP_FRAME_OVERHEAD);
    size_t chunk = c->frame_max - AMQP_FRAME_OVERHEAD;
    for (size_t off = 0; off < body.len; off += chunk) {
        size_t n = body.len - off < chunk ? body.len - off : chunk;
        uint8_t *b = transport_reserve(c->t, n + AMQP_FRAME_OVERHEAD);
        if (!b)
            break; /* out of memory: the connection will not survive it */
        amqp_frame_header_put(b, AMQP_FRAME_BODY, ch, (uint32_t)n);
        memcpy(b + AMQP_FRAME_HEADER_SIZE, body.ptr + off, n);
        b[AMQP_FRAME_HEADER_SIZE + n] = AMQP_FRAME_END;
        transport_commit(c->t, n + AMQP_FRAME_OVERHEAD);
    }
    return h->confirms ? h->next_seq++ : 1;
}

static bool send_simple(client *c, uint16_t ch, const amqp_method *m)
{
    cchan *h = chan_get(c, ch);
    if (!client_is_open(c) || !h || h->state != CH_OPEN)
        return false;
    client_send_method(c, ch, m);
    return true;
}

bool client_ack(client *c, uint16_t ch, uint64_t tag, bool multiple)
{
    amqp_method m = {.id = AMQP_BASIC_ACK};
    m.basic_ack.delivery_tag = tag;
    m.basic_ack.multiple = multiple;
    return send_simple(c, ch, &m);
}

bool client_nack(client *c, uint16_t ch, uint64_t tag, bool multiple, bool requeue)
{
    amqp_method m = {.id = AMQP_BASIC_NACK};
    m.basic_nack.delivery_tag = tag;
    m.basic_nack.multiple = multiple;
    m.basic_nack.requeue = requeue;
    return send_simple(c, ch, &m);
}

bool client_reject(client *c, uint16_t ch, uint64_t tag, bool requeue)
{
    amqp_method m = {.id = AMQP_BASIC_REJECT};
    m.basic_reject.delivery_tag = tag;
    m.basic_reject.requeue = requeue;
    return send_simple(c, ch, &m);
}

/* ---- what the server sends --------------------------------------------------- */

static amqp_bytes keep(uint8_t *dst, amqp_bytes s)
{
    memcpy(dst, s.ptr, s.len); /* shortstrs: at most 255 */
    return (amqp_bytes){dst, s.len};
}

static void start_content(cchan *h, int kind, const amqp_method *m)
{
    h->content = (uint8_t)kind;
    h->header_seen = false;
    h->m = (client_message){0};
    if (kind == CONTENT_DELIVER) {
        const amqp_basic_deliver *d = &m->basic_deliver;
        h->m.delivery_tag = d->delivery_tag;
        h->m.redelivered = d->redelivered;
        h->m.consumer_tag = keep(h->tag, d->consumer_tag);
        h->m.exchange = keep(h->exchange, d->exchange);
        h->m.routing_key = keep(h->routing_key, d->routing_key);
    } else {
        const amqp_basic_return *r = &m->basic_return;
        h->m.reply_code = r->reply_code;
        h->m.reply_text = keep(h->text, r->reply_text);
        h->m.exchange = keep(h->exchange, r->exchange);
        h->m.routing_key = keep(h->routing_key, r->routing_key);
    }
}

static void channel_ended(client *c, uint16_t ch, cchan *h, client_error_kind kind,
                          const amqp_channel_close *cl)
{
    client_error why = {.kind = kind};
    if (cl) {
        why.code = cl->reply_code;
        why.method_id = (uint32_t)cl->class_id << 16 | cl->method_id;
        size_t n = cl->reply_text.len < sizeof why.text - 1 ? cl->reply_text.len : sizeof why.text - 1;
        memcpy(why.text, cl->reply_text.ptr, n);
    }
    reset(h);
    if (c->h.channel_closed)
        c->h.channel_closed(c->ctx, c, ch, &why);
}

static void reply(client *c, uint16_t ch, cchan *h, const amqp_method *m)
{
    if (!h->call_in_flight) {
        client_protocol_error(c, AMQP_COMMAND_INVALID, m->id, "COMMAND_INVALID - unexpected %s",
                              amqp_method_name(m->id) ? amqp_method_name(m->id) : "method");
        return;
    }
    h->call_in_flight = false;
    if (m->id == AMQP_CONFIRM_SELECT_OK)
        h->confirms = true, h->next_seq = 1;
    if (c->h.reply)
        c->h.reply(c->ctx, c, ch, m);
    if (client_live(c) && h->state == CH_OPEN)
        pump(c, ch, h);
}

void client_chan_method(client *c, uint16_t ch, const amqp_method *m)
{
    cchan *h = chan_get(c, ch);
    if (!h || h->state == CH_FREE) {
        client_protocol_error(c, AMQP_CHANNEL_ERROR, m->id, "CHANNEL_ERROR - channel %u is not open", ch);
        return;
    }
    if (h->content != CONTENT_NONE) {
        client_protocol_error(c, AMQP_UNEXPECTED_FRAME, m->id,
                              "UNEXPECTED_FRAME - expected content on channel %u", ch);
        return;
    }
    if (h->state == CH_CLOSING && m->id != AMQP_CHANNEL_CLOSE && m->id != AMQP_CHANNEL_CLOSE_OK)
        return; /* what was under way when we closed */
    switch (m->id) {
    case AMQP_CHANNEL_OPEN_OK:
        h->state = CH_OPEN;
        if (c->h.channel_opened)
            c->h.channel_opened(c->ctx, c, ch);
        break;
    case AMQP_CHANNEL_CLOSE: {
        amqp_method ok = {.id = AMQP_CHANNEL_CLOSE_OK};
        client_send_method(c, ch, &ok);
        channel_ended(c, ch, h, CLIENT_ERR_SERVER_CLOSE, &m->channel_close);
        break;
    }
    case AMQP_CHANNEL_CLOSE_OK:
        channel_ended(c, ch, h, CLIENT_OK, NULL);
        break;
    case AMQP_CHANNEL_FLOW: {
        amqp_method ok = {.id = AMQP_CHANNEL_FLOW_OK};
        ok.channel_flow_ok.active = m->channel_flow.active;
        client_send_method(c, ch, &ok);
        break;
    }
    case AMQP_BASIC_DELIVER: start_content(h, CONTENT_DELIVER, m); break;
    case AMQP_BASIC_RETURN: start_content(h, CONTENT_RETURN, m); break;
    case AMQP_BASIC_ACK:
    case AMQP_BASIC_NACK:
        if (h->confirms && c->h.confirm) {
            bool ack = m->id == AMQP_BASIC_ACK;
            c->h.confirm(c->ctx, c, ch, ack ? m->basic_ack.delivery_tag : m->basic_nack.delivery_tag,
                         ack ? m->basic_ack.multiple : m->basic_nack.multiple, ack);
        }
        break;
    case AMQP_BASIC_CANCEL:
        if (c->h.cancelled)
            c->h.cancelled(c->ctx, c, ch, m->basic_cancel.consumer_tag);
        break;
    default: reply(c, ch, h, m);
    }
}

static void complete(client *c, uint16_t ch, cchan *h, amqp_bytes body)
{
    int kind = h->content;
    h->content = CONTENT_NONE;
    h->m.properties = (amqp_bytes){h->props, (uint32_t)h->props_len};
    h->m.body = body;
    if (kind == CONTENT_DELIVER && c->h.deliver)
        c->h.deliver(c->ctx, c, ch, &h->m);
    else if (kind == CONTENT_RETURN && c->h.returned)
        c->h.returned(c->ctx, c, ch, &h->m);
}

static bool grow(uint8_t **buf, size_t *cap, size_t want)
{
    if (want <= *cap)
        return true;
    uint8_t *p = realloc(*buf, want);
    if (!p)
        return false;
    *buf = p, *cap = want;
    return true;
}

void client_chan_header(client *c, uint16_t ch, const amqp_frame *f)
{
    cchan *h = chan_get(c, ch);
    if (!h || h->content == CONTENT_NONE || h->header_seen) {
        client_protocol_error(c, AMQP_UNEXPECTED_FRAME, 0,
                              "UNEXPECTED_FRAME - content header on channel %u", ch);
        return;
    }
    amqp_content_header hd;
    amqp_error err = {0};
    if (amqp_content_header_decode(f->payload, f->size, &hd, &err) != AMQP_OK) {
        client_protocol_error(c, err.code, 0, "%s", err.text);
        return;
    }
    if (hd.body_size > c->o.max_message_size) {
        client_protocol_error(c, AMQP_CONTENT_TOO_LARGE, 0,
                              "CONTENT_TOO_LARGE - message size %llu is larger than %llu",
                              (unsigned long long)hd.body_size,
                              (unsigned long long)c->o.max_message_size);
        return;
    }
    if (!grow(&h->props, &h->props_cap, hd.properties.len ? hd.properties.len : 1)) {
        client_fail(c, CLIENT_ERR_MEMORY, 0, 0, "out of memory");
        return;
    }
    memcpy(h->props, hd.properties.ptr, hd.properties.len);
    h->props_len = hd.properties.len;
    h->header_seen = true;
    h->body_size = hd.body_size;
    h->body_have = 0;
    if (!hd.body_size)
        complete(c, ch, h, (amqp_bytes){(const uint8_t *)"", 0});
}

void client_chan_body(client *c, uint16_t ch, const amqp_frame *f)
{
    cchan *h = chan_get(c, ch);
    if (!h || h->content == CONTENT_NONE || !h->header_seen ||
        f->size > h->body_size - h->body_have) {
        client_protocol_error(c, AMQP_UNEXPECTED_FRAME, 0,
                              "UNEXPECTED_FRAME - content body on channel %u", ch);
        return;
    }
    if (h->body_have == 0 && f->size == h->body_size) {
        complete(c, ch, h, (amqp_bytes){f->payload, f->size});
        return;
    }
    if (!grow(&h->body, &h->body_cap, (size_t)h->body_size)) {
        client_fail(c, CLIENT_ERR_MEMORY, 0, 0, "out of memory");
        return;
    }
    memcpy(h->body + h->body_have, f->payload, f->size);
    h->body_have += f->size;
    if (h->body_have == h->body_size)
        complete(c, ch, h, (amqp_bytes){h->body, (uint32_t)h->body_size});
}
