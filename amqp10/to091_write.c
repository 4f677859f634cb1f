/* AMQP 1.0 -> 0-9-1, second half: the headers table and the content
 * header's property list (to091.c works out the fields).
 *
 * A header is an application-properties entry (named by its offset in the
 * map's items) or one of at most four made-up ones (x-correlation-id*,
 * x-message-id*, x-stream-offset). With x-stream-offset RabbitMQ sorts the
 * table by key, stably (rabbit_misc:set_table_value -> lists:keysort): the
 * entries' offsets are heap-sorted by (key, position) in scratch space at
 * the end of the caller's buffer, then merged with the made-up ones.
 * Without it the order stays: made-up ones first (RabbitMQ prepends them),
 * then the entries.
 */
#include <math.h>

#include "amqp10_int.h"

#define ENTRY_POS_BASE 2 /* after x-correlation-id* (0) and x-message-id* (1) */

typedef struct hdr_ctx {
    amqp10_conv *c;
    bool sorted;
    uint32_t offset_at; /* the entry x-stream-offset replaces, or NONE */
} hdr_ctx;

/* The key and value of the entry at `off` (already checked readable). */
static void entry_at(const amqp10_conv *c, uint32_t off, amqp10_value *key, amqp10_value *val)
{
    amqp10_iter it;
    amqp10_iter_init(&it, &c->ap);
    it.off = off;
    it.left = 2;
    (void)amqp10_next(&it, key);
    (void)amqp10_next(&it, val);
}

/* Order of two headers (key bytes as Erlang compares binaries, then
 * position); an entry is an offset, a made-up one `syn` (off unused). */
static int compare(const hdr_ctx *h, amqp_bytes ka, uint64_t pa, amqp_bytes kb, uint64_t pb)
{
    if (h->sorted) {
        size_t n = ka.len < kb.len ? ka.len : kb.len;
        int d = n ? memcmp(ka.ptr, kb.ptr, n) : 0;
        if (d || ka.len != kb.len)
            return d ? d : (ka.len < kb.len ? -1 : 1);
    }
    return pa < pb ? -1 : pa > pb;
}

static amqp_bytes entry_key(const hdr_ctx *h, uint32_t off)
{
    amqp10_value k, v;
    entry_at(h->c, off, &k, &v);
    return k.v.bytes;
}

static int compare_entries(const hdr_ctx *h, uint32_t a, uint32_t b)
{
    return compare(h, entry_key(h, a), ENTRY_POS_BASE + (uint64_t)a, entry_key(h, b),
                   ENTRY_POS_BASE + (uint64_t)b);
}

static void sift_down(const hdr_ctx *h, uint32_t *a, size_t root, size_t n)
{
    for (size_t child; (child = 2 * root + 1) < n; root = child) {
        if (child + 1 < n && compare_entries(h, a[child], a[child + 1]) < 0)
            child++;
        if (compare_entries(h, a[root], a[child]) >= 0)
            return;
        uint32_t t = a[root];
        a[root] = a[child];
        a[child] = t;
    }
}

static void heap_sort(const hdr_ctx *h, uint32_t *a, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift_down(h, a, i, n);
    for (size_t end = n; end-- > 1;) {
        uint32_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift_down(h, a, 0, end);
    }
}

/* One application property as rabbit_msg_record:to_091 maps it. */
static int put_value(amqp_writer *w, const amqp10_value *v)
{
    switch (v->type) {
    case AMQP10_STRING: amqp_put_u8(w, 'S'); amqp_put_longstr(w, v->v.bytes); break;
    case AMQP10_BINARY: amqp_put_u8(w, 'x'); amqp_put_longstr(w, v->v.bytes); break;
    case AMQP10_LONG: amqp_put_u8(w, 'l'); amqp_put_u64(w, (uint64_t)v->v.i); break;
    case AMQP10_INT: amqp_put_u8(w, 'I'); amqp_put_u32(w, (uint32_t)v->v.i); break;
    case AMQP10_SHORT: amqp_put_u8(w, 's'); amqp_put_u16(w, (uint16_t)v->v.i); break;
    case AMQP10_BYTE: amqp_put_u8(w, 'b'); amqp_put_u8(w, (uint8_t)v->v.i); break;
    case AMQP10_UINT: amqp_put_u8(w, 'i'); amqp_put_u32(w, (uint32_t)v->v.u); break;
    case AMQP10_USHORT: amqp_put_u8(w, 'u'); amqp_put_u16(w, (uint16_t)v->v.u); break;
    case AMQP10_UBYTE: amqp_put_u8(w, 'B'); amqp_put_u8(w, (uint8_t)v->v.u); break;
    case AMQP10_BOOL: amqp_put_u8(w, 't'); amqp_put_u8(w, v->v.b); break;
    case AMQP10_NULL: amqp_put_u8(w, 'V'); break;
    case AMQP10_TIMESTAMP: amqp_put_u8(w, 'T'); amqp_put_u64(w, (uint64_t)(v->v.i / 1000)); break;
    case AMQP10_FLOAT: {
        uint32_t b;
        if (!isfinite(v->v.f)) /* RabbitMQ's parser keeps these as_is: no clause */
            return AMQP10_UNSUPPORTED;
        memcpy(&b, &v->v.f, sizeof b);
        amqp_put_u8(w, 'f');
        amqp_put_u32(w, b);
        break;
    }
    case AMQP10_DOUBLE: {
        uint64_t b;
        if (!isfinite(v->v.d))
            return AMQP10_UNSUPPORTED;
        memcpy(&b, &v->v.d, sizeof b);
        amqp_put_u8(w, 'd');
        amqp_put_u64(w, b);
        break;
    }
    default:
        return AMQP10_UNSUPPORTED;
    }
    return AMQP10_OK;
}

static int put_entry(const hdr_ctx *h, amqp_writer *w, uint32_t off)
{
    amqp10_value k, v;
    entry_at(h->c, off, &k, &v);
    amqp_put_shortstr(w, k.v.bytes);
    if (off == h->offset_at) {
        amqp_put_u8(w, 'l');
        amqp_put_u64(w, (uint64_t)h->c->stream_offset);
        return AMQP10_OK;
    }
    return put_value(w, &v);
}

static void put_synth(const hdr_ctx *h, amqp_writer *w, const amqp10_synth *s)
{
    amqp_put_shortstr(w, s->key);
    if (s->str.ptr) {
        amqp_put_u8(w, 'S');
        amqp_put_longstr(w, s->str);
    } else {
        amqp_put_u8(w, 'l');
        amqp_put_u64(w, (uint64_t)h->c->stream_offset);
    }
}

/* Checks every entry's key, notes the entries that become headers (their
 * offsets, in order, into idx if not NULL) and which one x-stream-offset
 * replaces. Returns their count, or -1 for a key that cannot be one. */
static long scan_entries(hdr_ctx *h, uint32_t *idx)
{
    amqp10_iter it;
    amqp10_value k, v;
    long n = 0;
    h->offset_at = AMQP10_CONV_NONE;
    amqp10_iter_init(&it, &h->c->ap);
    for (;;) {
        uint32_t off = (uint32_t)it.off;
        if (amqp10_next(&it, &k) != AMQP10_OK || amqp10_next(&it, &v) != AMQP10_OK)
            return n;
        if (off == h->c->skip[0] || off == h->c->skip[1])
            continue;
        /* RabbitMQ's header_routes throws on a CC or BCC that is not an array */
        if (!is_text(&k) || k.v.bytes.len > 255 || amqp10_value_is(&k, "CC") ||
            amqp10_value_is(&k, "BCC"))
            return -1;
        if (h->c->stream_offset >= 0 && h->offset_at == AMQP10_CONV_NONE &&
            amqp10_value_is(&k, "x-stream-offset"))
            h->offset_at = off;
        if (idx)
            idx[n] = off;
        n++;
    }
}

static int put_headers(hdr_ctx *h, amqp_writer *w, const uint32_t *idx, size_t n)
{
    amqp10_conv *c = h->c;
    /* made-up headers in order (at most four: insertion sort) */
    for (int i = 1; i < c->nsyn; i++)
        for (int j = i; j > 0 && compare(h, c->syn[j - 1].key, c->syn[j - 1].pos, c->syn[j].key,
                                         c->syn[j].pos) > 0; j--) {
            amqp10_synth t = c->syn[j];
            c->syn[j] = c->syn[j - 1];
            c->syn[j - 1] = t;
        }
    size_t mark = amqp_table_begin(w);
    size_t i = 0;
    int s = 0;
    while (i < n || s < c->nsyn) {
        bool take_entry = s == c->nsyn ||
                          (i < n && compare(h, entry_key(h, idx[i]), ENTRY_POS_BASE + (uint64_t)idx[i],
                                            c->syn[s].key, c->syn[s].pos) < 0);
        if (!take_entry)
            put_synth(h, w, &c->syn[s++]);
        else if (put_entry(h, w, idx[i++]) != AMQP10_OK)
            return AMQP10_UNSUPPORTED;
    }
    amqp_table_end(w, mark);
    return AMQP10_OK;
}

int amqp10_conv_write(amqp10_conv *c, amqp_writer *w)
{
    hdr_ctx h = {c, c->stream_offset >= 0, AMQP10_CONV_NONE};
    long n = scan_entries(&h, NULL);
    if (n < 0)
        return AMQP10_UNSUPPORTED;
    /* scratch: n aligned offsets at the end of the buffer */
    uintptr_t end = (uintptr_t)(w->buf + w->cap) & ~(uintptr_t)(sizeof(uint32_t) - 1);
    if (w->overflow || end < (uintptr_t)(w->buf + w->len) ||
        (size_t)n > (end - (uintptr_t)(w->buf + w->len)) / sizeof(uint32_t))
        return AMQP10_NO_SPACE;
    uint32_t *idx = (uint32_t *)end - n;
    (void)scan_entries(&h, idx);
    if (h.sorted)
        heap_sort(&h, idx, (size_t)n);
    if (c->stream_offset >= 0 && h.offset_at == AMQP10_CONV_NONE)
        c->syn[c->nsyn++] = (amqp10_synth){AMQP_CSTR("x-stream-offset"), {NULL, 0}, UINT64_MAX};
    if (n > 0 || c->nsyn > 0)
        c->p.flags |= AMQP_BASIC_HEADERS_FLAG;

    amqp_writer lw = *w; /* stops short of the scratch */
    lw.cap = (size_t)((uint8_t *)idx - w->buf);
    const amqp_basic_properties *p = &c->p;
    amqp_put_u16(&lw, p->flags);
    if (p->flags & AMQP_BASIC_CONTENT_TYPE_FLAG)
        amqp_put_shortstr(&lw, p->content_type);
    if (p->flags & AMQP_BASIC_CONTENT_ENCODING_FLAG)
        amqp_put_shortstr(&lw, p->content_encoding);
    if ((p->flags & AMQP_BASIC_HEADERS_FLAG) && put_headers(&h, &lw, idx, (size_t)n) != AMQP10_OK)
        return AMQP10_UNSUPPORTED;
    if (p->flags & AMQP_BASIC_DELIVERY_MODE_FLAG)
        amqp_put_u8(&lw, p->delivery_mode);
    if (p->flags & AMQP_BASIC_PRIORITY_FLAG)
        amqp_put_u8(&lw, p->priority);
    if (p->flags & AMQP_BASIC_CORRELATION_ID_FLAG)
        amqp_put_shortstr(&lw, p->correlation_id);
    if (p->flags & AMQP_BASIC_REPLY_TO_FLAG)
        amqp_put_shortstr(&lw, p->reply_to);
    if (p->flags & AMQP_BASIC_EXPIRATION_FLAG)
        amqp_put_shortstr(&lw, p->expiration);
    if (p->flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        amqp_put_shortstr(&lw, p->message_id);
    if (p->flags & AMQP_BASIC_TIMESTAMP_FLAG)
        amqp_put_u64(&lw, p->timestamp);
    if (p->flags & AMQP_BASIC_TYPE_FLAG)
        amqp_put_shortstr(&lw, p->type);
    if (p->flags & AMQP_BASIC_USER_ID_FLAG)
        amqp_put_shortstr(&lw, p->user_id);
    if (p->flags & AMQP_BASIC_APP_ID_FLAG)
        amqp_put_shortstr(&lw, p->app_id);
    w->len = lw.len;
    w->overflow = lw.overflow;
    return w->overflow ? AMQP10_NO_SPACE : AMQP10_OK;
}
