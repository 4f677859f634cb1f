/* The headers a shovel adds, as rabbit_shovel_util writes them:
 * x-shovelled, an array whose first element is a table naming this hop
 * (shovelled-by, shovel-type, shovel-name, shovel-vhost, src-uri,
 * dest-uri, then the source's and the destination's queue / exchange /
 * key) before the hops already there; and x-shovelled-timestamp, a long of
 * seconds since the epoch. Other headers keep their order; the two are
 * put last. Properties are rewritten only when the definition asks, into
 * the shovel's own buffer, so a plain shovel forwards them untouched. */
#include <stdlib.h>
#include <time.h>

#include "shovel_int.h"

static void put_str(amqp_writer *w, const char *key, const char *v)
{
    amqp_put_field_str(w, key, AMQP_CSTR(v));
}

static void put_hop(amqp_writer *w, shovel *sh)
{
    const shovel_cfg *c = &sh->cfg;
    amqp_put_u8(w, 'F');
    size_t mark = amqp_table_begin(w);
    put_str(w, "shovelled-by", server_node_name(shovels_server(sh->set)));
    put_str(w, "shovel-type", "dynamic");
    put_str(w, "shovel-name", sh->name);
    put_str(w, "shovel-vhost", sh->vhost);
    put_str(w, "src-uri", c->src_shown);
    put_str(w, "dest-uri", c->dest_shown);
    if (c->has_src_queue) {
        put_str(w, "src-queue", c->src_queue);
    } else {
        put_str(w, "src-exchange", c->src_exchange);
        put_str(w, "src-exchange-key", c->src_exchange_key);
    }
    if (c->has_dest_exchange)
        put_str(w, "dest-exchange", c->dest_exchange);
    if (c->has_dest_exchange_key)
        put_str(w, "dest-exchange-key", c->dest_exchange_key);
    if (c->has_dest_queue)
        put_str(w, "dest-queue", c->dest_queue);
    amqp_table_end(w, mark);
}

/* The new headers table (with its length) into w. */
static void put_headers(amqp_writer *w, shovel *sh, const amqp_basic_properties *p)
{
    size_t top = amqp_table_begin(w);
    amqp_bytes earlier = {NULL, 0}, key;
    amqp_field f;
    amqp_iter it;
    amqp_iter_init(&it, (p->flags & AMQP_BASIC_HEADERS_FLAG) ? p->headers : (amqp_bytes){0});
    while (amqp_table_next(&it, &key, &f)) {
        if (sh->cfg.forward_headers && amqp_bytes_equal_cstr(key, "x-shovelled")) {
            if (f.type == 'A')
                earlier = f.v.bytes;
            continue;
        }
        if (sh->cfg.timestamp_header && amqp_bytes_equal_cstr(key, "x-shovelled-timestamp"))
            continue;
        amqp_put_shortstr(w, key);
        amqp_put_field(w, &f);
    }
    if (sh->cfg.forward_headers) {
        amqp_put_key(w, "x-shovelled");
        size_t arr = amqp_put_field_begin(w, 'A');
        put_hop(w, sh);
        amqp_put_raw(w, earlier.ptr, earlier.len);
        amqp_table_end(w, arr);
    }
    if (sh->cfg.timestamp_header)
        amqp_put_field_long(w, "x-shovelled-timestamp", (int64_t)time(NULL));
    amqp_table_end(w, top);
}

amqp_bytes shovel_props(shovel *sh, amqp_bytes raw)
{
    if (!sh->cfg.forward_headers && !sh->cfg.timestamp_header)
        return raw;
    amqp_basic_properties p;
    if (amqp_properties_decode(raw, &p, NULL) != AMQP_OK)
        return (amqp_bytes){NULL, 0};
    /* headers first, then the properties around them, in one buffer */
    size_t need = 2 * ((size_t)raw.len + 4096);
    if (need > sh->props_cap) {
        uint8_t *b = realloc(sh->props_buf, need);
        if (!b)
            return (amqp_bytes){NULL, 0};
        sh->props_buf = b, sh->props_cap = need;
    }
    size_t half = need / 2;
    amqp_writer w;
    amqp_writer_init(&w, sh->props_buf, half);
    put_headers(&w, sh, &p);
    if (w.overflow)
        return (amqp_bytes){NULL, 0};
    p.flags |= AMQP_BASIC_HEADERS_FLAG;
    p.headers = (amqp_bytes){sh->props_buf + 4, (uint32_t)(w.len - 4)};
    size_t n = amqp_properties_encode(&p, sh->props_buf + half, half);
    return n ? (amqp_bytes){sh->props_buf + half, (uint32_t)n} : (amqp_bytes){NULL, 0};
}
