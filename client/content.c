/* The messages a channel receives: basic.deliver / basic.return copies its
 * short strings into the channel, the content header its properties; a
 * body that comes in one frame is handed out as a slice of that frame (no
 * copy), a larger one is gathered into the channel's body buffer, sized
 * from the header's body size, which is checked against max_message_size
 * before anything is allocated. Any frame out of that order is the
 * server's protocol error (505). */
#include <stdlib.h>
#include <string.h>

#include "client_int.h"

static amqp_bytes keep(uint8_t *dst, amqp_bytes s)
{
    memcpy(dst, s.ptr, s.len); /* shortstrs: at most 255 */
    return (amqp_bytes){dst, s.len};
}

void client_content_start(cchan *h, int kind, const amqp_method *m)
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
    cchan *h = client_chan_get(c, ch);
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
    cchan *h = client_chan_get(c, ch);
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
