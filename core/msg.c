/* Messages: one allocation holds the header, then exchange name, routing
 * key, raw properties and (usually) the body:
 *
 *   struct msg | exchange (ex_len) | routing key (rk_len) | properties | body
 *
 * Small messages come from per-size-class free lists, so the steady-state
 * hot path does no malloc. The lists are a pool's, one pool per loop, and
 * only that loop's thread touches them, so they need no locking. Ids come
 * from the process-wide msg_ids in blocks of ID_BLOCK: one atomic add per
 * block, none per message.
 *
 * The body is inline (m->body points after the properties) when its room
 * was allocated with the message: msg_new, and msg_new_incoming when asked
 * -- the publisher's choice for a body that arrives in one frame. Otherwise
 * a message being assembled gets its body memory only as bytes arrive: a
 * separate block that msg_append_body grows (doubling, never past
 * body_size), so a content header announcing 128 MiB costs nothing until
 * the bytes come. Memory is counted as allocated (live_bytes, the memory
 * alarm's measure): the block and the body's separate buffer, if any. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

struct msg {
    msg_pool *pool; /* where its block goes back */
    journal_loc loc; /* where the journal keeps it, when journaled */
    bool journaled;
    bool journaled_transient; /* journaled only for quorum queues (not delivery mode 2) */
    uint32_t refs;
    uint32_t props_len;
    uint64_t id;
    uint64_t body_size;
    uint32_t body_len; /* received so far (bodies are below 4 GiB: msg_new_incoming) */
    uint32_t body_cap; /* room allocated for the body so far */
    uint8_t *body;     /* inline (after the properties) or a block of body_cap bytes */
    uint32_t block_bytes; /* the block's size: its class's, or what was malloc'd */
    uint8_t ex_len, rk_len;
    uint8_t size_class; /* index into pools, or NO_CLASS */
    bool body_apart;    /* body is its own block (grown as it arrived) */
    uint8_t data[];
};

#define NO_CLASS 0xff
#define POOL_KEEP 4096 /* free blocks kept per class */
#define GROW_MIN (64 * 1024) /* first room for a body that arrives in pieces */

static const uint32_t class_sizes[] = {128, 256, 512, 1024};
#define NCLASSES (sizeof class_sizes / sizeof class_sizes[0])

typedef struct free_block {
    struct free_block *next;
} free_block;

#define ID_BLOCK 4096

/* Process-wide: every loop's messages are keys of the one journal. */
struct msg_ids {
    _Atomic uint64_t next;
};

struct msg_pool {
    struct {
        free_block *head;
        uint32_t count;
    } free[NCLASSES];
    msg_ids *ids;
    uint64_t next_id, end_id; /* the block of ids being handed out */
    size_t live_bytes;        /* RAM held by live messages, for the memory alarm */
};

msg_ids *msg_ids_new(void)
{
    msg_ids *ids = malloc(sizeof *ids);
    if (ids)
        atomic_init(&ids->next, 1);
    return ids;
}

void msg_ids_free(msg_ids *ids) { free(ids); }

msg_pool *msg_pool_new(msg_ids *ids)
{
    msg_pool *p = calloc(1, sizeof *p);
    if (p)
        p->ids = ids;
    return p;
}

void msg_pool_free(msg_pool *p)
{
    if (!p)
        return;
    invariant(p->live_bytes == 0);
    for (size_t i = 0; i < NCLASSES; i++)
        while (p->free[i].head) {
            free_block *b = p->free[i].head;
            p->free[i].head = b->next;
            free(b);
        }
    free(p);
}

size_t msg_pool_memory(const msg_pool *p) { return p->live_bytes; }

static uint64_t next_id(msg_pool *p)
{
    if (p->next_id == p->end_id) {
        p->next_id = atomic_fetch_add(&p->ids->next, ID_BLOCK);
        p->end_id = p->next_id + ID_BLOCK;
    }
    return p->next_id++;
}

size_t msg_memory(const msg *m);

static msg *alloc_block(msg_pool *pool, size_t total, uint8_t *cls)
{
    for (uint8_t i = 0; i < NCLASSES; i++) {
        if (total > class_sizes[i])
            continue;
        *cls = i;
        if (pool->free[i].head) {
            free_block *b = pool->free[i].head;
            pool->free[i].head = b->next;
            pool->free[i].count--;
            return (msg *)b;
        }
        return malloc(class_sizes[i]);
    }
    *cls = NO_CLASS;
    return malloc(total);
}

/* Out of line: msg_unref stays a small leaf for the common, not-last unref. */
__attribute__((noinline)) static void free_block_of(msg *m)
{
    msg_pool *pool = m->pool;
    pool->live_bytes -= msg_memory(m);
    if (m->body_apart)
        free(m->body);
    uint8_t cls = m->size_class;
    if (cls != NO_CLASS && pool->free[cls].count < POOL_KEEP) {
        free_block *b = (free_block *)m;
        b->next = pool->free[cls].head;
        pool->free[cls].head = b;
        pool->free[cls].count++;
        return;
    }
    free(m);
}

msg *msg_new_incoming(msg_pool *pool, amqp_bytes exchange, amqp_bytes routing_key,
                      amqp_bytes properties, uint64_t body_size, bool inline_body)
{
    /* max_message_size (at most 512 MiB) keeps bodies far below this */
    if (exchange.len > 255 || routing_key.len > 255 || body_size > UINT32_MAX)
        return NULL;
    uint64_t room = inline_body ? body_size : 0;
    size_t total = sizeof(msg) + exchange.len + routing_key.len + properties.len + room;
    uint8_t cls;
    msg *m = alloc_block(pool, total, &cls);
    if (!m)
        return NULL;
    m->pool = pool;
    m->refs = 1;
    m->journaled = false;
    m->journaled_transient = false;
    m->props_len = properties.len;
    m->id = next_id(pool);
    m->body_size = body_size;
    m->body_len = 0;
    m->body_cap = (uint32_t)room;
    m->block_bytes = cls == NO_CLASS ? (uint32_t)(total > UINT32_MAX ? UINT32_MAX : total)
                                     : class_sizes[cls];
    m->body_apart = false;
    m->ex_len = (uint8_t)exchange.len;
    m->rk_len = (uint8_t)routing_key.len;
    m->size_class = cls;
    m->body = m->data + exchange.len + routing_key.len + properties.len;
    pool->live_bytes += msg_memory(m);
    uint8_t *p = m->data;
    if (exchange.len)
        memcpy(p, exchange.ptr, exchange.len);
    p += exchange.len;
    if (routing_key.len)
        memcpy(p, routing_key.ptr, routing_key.len);
    p += routing_key.len;
    if (properties.len)
        memcpy(p, properties.ptr, properties.len);
    return m;
}

msg *msg_new(msg_pool *pool, amqp_bytes exchange, amqp_bytes routing_key, amqp_bytes properties,
             uint64_t body_size)
{
    return msg_new_incoming(pool, exchange, routing_key, properties, body_size, true);
}

void msg_ref(msg *m)
{
    invariant(m->refs > 0); /* a freed message is never shared again */
    m->refs++;
}

void msg_unref(msg *m)
{
    if (m && --m->refs == 0)
        free_block_of(m);
}

/* Room for `need` body bytes in a body that is not inline: at least
 * double what there is (GROW_MIN at first), never more than body_size. */
static bool grow_body(msg *m, uint64_t need)
{
    uint64_t cap = m->body_cap ? m->body_cap * 2 : GROW_MIN;
    if (cap < need)
        cap = need;
    if (cap > m->body_size)
        cap = m->body_size;
    uint8_t *b = realloc(m->body_apart ? m->body : NULL, (size_t)cap);
    if (!b)
        return false;
    m->pool->live_bytes += (size_t)(cap - m->body_cap);
    m->body = b;
    m->body_apart = true;
    m->body_cap = (uint32_t)cap;
    return true;
}

bool msg_append_body(msg *m, const uint8_t *p, size_t n)
{
    if (n > m->body_size - m->body_len)
        return false;
    if (n > m->body_cap - m->body_len && !grow_body(m, m->body_len + n))
        return false;
    if (n)
        memcpy(m->body + m->body_len, p, n);
    m->body_len += (uint32_t)n;
    return true;
}

bool msg_complete(const msg *m) { return m->body_len == m->body_size; }
uint64_t msg_id(const msg *m) { return m->id; }
amqp_bytes msg_exchange(const msg *m) { return (amqp_bytes){m->data, m->ex_len}; }
amqp_bytes msg_routing_key(const msg *m)
{
    return (amqp_bytes){m->data + m->ex_len, m->rk_len};
}
amqp_bytes msg_properties(const msg *m)
{
    return (amqp_bytes){m->data + m->ex_len + m->rk_len, m->props_len};
}
const uint8_t *msg_body(const msg *m) { return m->body; }
uint64_t msg_body_size(const msg *m) { return m->body_size; }
size_t msg_memory(const msg *m)
{
    return m->block_bytes + (m->body_apart ? (size_t)m->body_cap : 0);
}

msg *msg_copy_with(msg_pool *pool, const msg *m, amqp_bytes exchange, amqp_bytes routing_key,
                   amqp_bytes properties)
{
    msg *n = msg_new(pool, exchange, routing_key, properties, m->body_size);
    if (n)
        msg_append_body(n, msg_body(m), m->body_size);
    return n;
}

msg *msg_with_properties(msg_pool *pool, const msg *m, const amqp_basic_properties *p)
{
    size_t cap = m->props_len + 1024; /* room for one changed shortstr and more */
    uint8_t *buf = malloc(cap);
    size_t n = buf ? amqp_properties_encode(p, buf, cap) : 0;
    msg *copy = n ? msg_copy_with(pool, m, msg_exchange(m), msg_routing_key(m),
                                  (amqp_bytes){buf, (uint32_t)n})
                  : NULL;
    free(buf);
    return copy;
}

/* The delivery count header, as RabbitMQ's quorum queues send it: how often
 * the message was returned (requeued, or its channel or connection closed
 * while holding it). The properties and the new headers table each get
 * half of the buffer. */
#define DC_HEADER "x-delivery-count"

size_t msg_delivery_count_properties(const msg *m, uint32_t count, uint8_t *buf, size_t cap,
                                     uint8_t **heap)
{
    amqp_basic_properties p;
    amqp_bytes raw = msg_properties(m);
    if (amqp_properties_decode(raw, &p, NULL) != AMQP_OK)
        return 0;
    size_t need = 2 * ((size_t)raw.len + 64);
    if (need > cap) {
        if (!(*heap = malloc(need)))
            return 0;
        buf = *heap, cap = need;
    }
    uint8_t *hdr = buf + cap / 2;
    amqp_writer w;
    amqp_writer_init(&w, hdr, cap / 2);
    size_t mark = amqp_table_begin(&w);
    if (p.flags & AMQP_BASIC_HEADERS_FLAG)
        amqp_put_entries_except(&w, p.headers, DC_HEADER);
    amqp_put_field_long(&w, DC_HEADER, count);
    amqp_table_end(&w, mark);
    if (w.overflow)
        return 0;
    p.headers = (amqp_bytes){hdr + 4, (uint32_t)w.len - 4};
    p.flags |= AMQP_BASIC_HEADERS_FLAG;
    return amqp_properties_encode(&p, buf, cap / 2);
}

bool msg_persistent(const msg *m)
{
    amqp_bytes raw = msg_properties(m);
    amqp_basic_properties p;
    if (raw.len < 2 || !((raw.ptr[0] << 8 | raw.ptr[1]) & AMQP_BASIC_DELIVERY_MODE_FLAG))
        return false;
    return amqp_properties_decode(raw, &p, NULL) == AMQP_OK && p.delivery_mode == 2;
}

bool msg_journaled(const msg *m) { return m->journaled; }
bool msg_journaled_transient(const msg *m) { return m->journaled_transient; }
void msg_set_journaled_transient(msg *m) { m->journaled_transient = true; }

bool msg_journal_loc(const msg *m, journal_loc *loc)
{
    *loc = m->loc;
    return m->journaled;
}

void msg_set_journal_loc(msg *m, journal_loc loc)
{
    m->loc = loc;
    m->journaled = true;
}

void msg_restore_identity(msg *m, uint64_t id, journal_loc loc)
{
    m->id = id;
    msg_set_journal_loc(m, loc);
}

void msg_reserve_ids(msg_pool *p, uint64_t max_used)
{
    uint64_t next = atomic_load(&p->ids->next);
    while (next <= max_used && !atomic_compare_exchange_weak(&p->ids->next, &next, max_used + 1))
        ;
    if (p->next_id <= max_used) /* the block taken before is below: take a new one */
        p->next_id = p->end_id = 0;
}
