/* Private to conn/: the channel structure shared by chan.c (deliveries,
 * acks, basic.* methods), publish.c (publishing, confirms, transactions),
 * decl.c (exchange, queue and consumer methods) and reply.c. */
#ifndef WARREN_CHAN_INTERNAL_H
#define WARREN_CHAN_INTERNAL_H

#include "conn.h"

typedef struct unacked {
    uint64_t tag;
    uint64_t delivered_at; /* loop_now_ms */
    queue_item it; /* it.m is NULL once settled (a hole) */
    queue *q;
    consumer *cons; /* NULL for basic.get or once the consumer is cancelled */
} unacked;

/* How a delivery is settled: REQUEUE is the client's basic.reject or
 * basic.nack with requeue (a failed delivery), RETURN puts it back without
 * a verdict (channel closed, consumer timed out, basic.recover). */
typedef enum settle_mode { SETTLE_ACK, SETTLE_REQUEUE, SETTLE_RETURN, SETTLE_REJECT } settle_mode;

typedef struct pending_confirm {
    uint64_t seq;
    journal_seq wait; /* 0 for a nack */
} pending_confirm;

typedef struct tx_publish {
    msg *m;
    bool mandatory;
    int64_t expiration_ms;
} tx_publish;

typedef struct tx_ack {
    uint64_t tag;
    bool multiple;
    settle_mode mode;
    uint32_t method_id;
} tx_ack;

/* The channel's permission cache (decl.c, publish.c): the connection
 * user's permissions in its vhost, and the last exchange and routing key a
 * publish was allowed, all valid while the access generation is `gen`.
 * RabbitMQ keeps allowed checks per channel until the channel is closed,
 * so a revoked permission still works on open channels there; Warren drops
 * the cache on any change of users or permissions, so a change applies to
 * open channels at once. */
typedef struct chan_publish_memo {
    bool write_ok, topic_ok;
    uint32_t stats_slot; /* write_exchange's exchange_stats slot + 1; 0 = not looked up */
    uint8_t write_len, topic_len;
    route_exchange *ex;  /* write_exchange, found while the table's exchanges */
    uint64_t ex_version; /* had this version (route_exchanges_version); NULL: look up */
    uint8_t write_exchange[255]; /* write allowed on this exchange */
    uint8_t topic_key[255];      /* and topic write on this key (topic exchanges) */
} chan_publish_memo;

typedef struct chan_access_cache {
    access_control *ctl;       /* the server's */
    uint64_t gen;              /* 0: nothing cached */
    const access_perms *perms; /* NULL: no permissions in the vhost */
    bool topics;               /* the user has topic permissions in the vhost */
    /* allocated at the channel's first publish, so a channel that never
     * publishes (most consumers, idle clients) does not carry it */
    chan_publish_memo *memo;
} chan_access_cache;

/* chanstats.c: counters per exchange and per queue (see there) */
typedef struct chan_objslot {
    queue *q;      /* a queue's slot: the queue, held */
    uint8_t *name; /* an exchange's slot: its name (owned) */
    uint32_t len;
    uint64_t n[STAT_COUNTERS];
} chan_objslot;
typedef struct chan_objstats { /* at most 64 slots: 16-bit indexes keep the channel small */
    chan_objslot *slots;
    uint16_t n, cap;
    uint16_t last;   /* the slot found last */
    uint16_t victim; /* the next slot to reuse when full */
} chan_objstats;

enum { CONTENT_IDLE, CONTENT_HEADER, CONTENT_BODY };
enum { MODE_NONE, MODE_CONFIRM, MODE_TX };

struct chan {
    conn *c;
    stats stats; /* management counters */
    chan_objstats exchange_stats, queue_stats; /* the same, per exchange and queue */
    server_counts *counts;                     /* the server's */
    uint16_t number;
    uint8_t mode;
    uint8_t content;
    uint64_t delivery_tag; /* last one issued */
    /* unacked ring, capacity a power of two */
    unacked *ua;
    uint32_t ua_head, ua_count, ua_cap, ua_live;
    consumer *consumers;
    uint32_t prefetch_consumer; /* basic.qos global=false: for new consumers */
    uint32_t prefetch_global;   /* basic.qos global=true: the whole channel */
    /* consumer timeouts: no delivery can time out before this (chan_tick) */
    uint64_t timeout_check_at;
    /* the publish being assembled; pub_msg is NULL while an oversize body
     * is being dropped */
    msg *pub_msg;
    uint64_t pub_held; /* bytes of pub_msg reported to the connection as unfinished */
    uint64_t body_size, body_left;
    bool pub_mandatory, pub_immediate;
    struct chan_pub_names *pub_names; /* its exchange and key (at the first publish) */
    /* publisher confirms: confirm_seq numbers publishes; those that must
     * wait for the journal, or be nacked, queue up in `pending` (a ring) */
    uint64_t confirm_seq, confirm_sent;
    struct pending_confirm *pending;
    uint32_t pending_head, pending_n, pending_cap;
    journal_seq commit_wait; /* tx.commit-ok waits for this journal sequence */
    /* transactions */
    tx_publish *tx_pubs;
    size_t tx_npubs, tx_pubs_cap;
    tx_ack *tx_acks;
    size_t tx_nacks, tx_acks_cap;
    /* the last queue declared, for "" shortcuts in later methods (NULL: none) */
    char *last_queue;
    /* direct reply-to: the reply consumer's tag and address (NULL: none) */
    struct chan_reply *reply;
    chan_access_cache access;
};

void chan_cancel_consumer(chan *ch, consumer *cons, bool notify);
/* Its consumers act for the channel through these (the consumer seam). */
extern const consumer_ops chan_consumer_ops;
void chan_requeue_all(chan *ch);
consumer *chan_find_consumer(chan *ch, amqp_bytes tag);
void chan_deliver_get(chan *ch, queue *q, queue_item it, bool no_ack);
/* Settles tag (or all up to it), as basic.ack / nack / reject do. */
int chan_settle(chan *ch, uint64_t tag, bool multiple, settle_mode mode, uint32_t method_id,
                amqp_error *err);
/* Index of the unacked delivery `tag` in the ring, -1 if unknown. */
int64_t chan_ua_find(chan *ch, uint64_t tag);
void chan_tx_clear(chan *ch);

/* The counters (indexed by stat_id) of the channel with `q` and with the
 * exchange named `exchange`, created at first use; NULL on out-of-memory.
 * The queue used last is found inline: a delivery or ack costs a compare. */
uint64_t *chan_queue_counts_find(chan *ch, queue *q);
static inline uint64_t *chan_queue_counts(chan *ch, queue *q)
{
    chan_objstats *s = &ch->queue_stats;
    return s->n && s->slots[s->last].q == q ? s->slots[s->last].n : chan_queue_counts_find(ch, q);
}
uint64_t *chan_exchange_counts(chan *ch, amqp_bytes exchange);

/* Counts one event of kind `f` (STAT_DELIVER .. STAT_REDELIVER) on the
 * channel (in all and for `q`), the queue and the vhost (the server's count
 * for the queue's type is the queue's: see server_counts). Inline: it runs
 * for every delivery and ack. */
static inline void chan_count(chan *ch, queue *q, stat_id f)
{
    uint64_t *per_queue = chan_queue_counts(ch, q);
    if (per_queue)
        per_queue[f]++;
    ch->stats.n[f]++;
    queue_stats(q)->n[f]++;
    vhost_stats(conn_vhost(ch->c))->n[f]++;
}

/* The same for the exchange a publish was just allowed on (the publish
 * memo's): looked up once per change of exchange, not per message. */
uint64_t *chan_publish_counts(chan *ch, amqp_bytes exchange);
void chan_objstats_free(chan_objstats *s);

/* publish.c: publishing, confirms and transactions */
int chan_begin_publish(chan *ch, const amqp_basic_publish *p, amqp_error *err);
/* Drops the message being assembled, if any (the channel is going away). */
void chan_content_release(chan *ch);
int chan_tx_add_publish(chan *ch, const tx_publish *p, amqp_error *err);
int chan_tx_add_ack(chan *ch, const tx_ack *a, amqp_error *err);
/* Publishes and settles what the transaction holds; returns the journal
 * sequence commit-ok must wait for (0: none). */
journal_seq chan_tx_commit(chan *ch);
/* How far the journal has synced (everything, without a journal). */
journal_seq chan_synced_seq(chan *ch);

/* reply.c: direct reply-to */
bool chan_is_reply_queue(amqp_bytes name);
int chan_reply_consume(chan *ch, const amqp_basic_consume *b, amqp_error *err);
/* Cancels the reply consumer if `tag` is its tag (any tag if tag.ptr is NULL). */
bool chan_reply_cancel(chan *ch, amqp_bytes tag);
msg *chan_reply_rewrite(chan *ch, msg *m, amqp_error *err);
bool chan_reply_route(vhost *v, amqp_bytes key, msg *m);

/* decl.c: permission checks, as RabbitMQ's rabbit_channel makes them */
/* 403 unless the user may `kind` the `what` ("exchange" or "queue") named
 * `name` ("" as an exchange is "amq.default"). */
int chan_permitted(chan *ch, access_kind kind, const char *what, amqp_bytes name,
                   uint32_t method_id, amqp_error *err);
/* 403 unless the user's topic permission `kind` on `ex` allows `key`; only
 * topic exchanges are checked, and no topic permission allows everything. */
int chan_topic_permitted(chan *ch, const route_exchange *ex, access_kind kind, amqp_bytes key,
                         uint32_t method_id, amqp_error *err);
/* The cache, refreshed when the access generation moved on. */
chan_access_cache *chan_access(chan *ch);
/* exchange.* and queue.* (decl.c). */
int chan_handle_declaration(chan *ch, const amqp_method *m, amqp_error *err);
/* The "" shortcut (the channel's last declared queue), then `kind` on the
 * queue; and a queue by that name: 404 when missing, 405 when locked. */
int chan_queue_permitted(chan *ch, amqp_bytes *name, access_kind kind, uint32_t method_id,
                         amqp_error *err);
queue *chan_find_queue(chan *ch, amqp_bytes *name, uint32_t method_id, amqp_error *err);
/* basic.consume, basic.cancel, basic.get (consume.c). */
int chan_basic_consume(chan *ch, const amqp_basic_consume *c, amqp_error *err);
int chan_basic_cancel(chan *ch, const amqp_basic_cancel *c, amqp_error *err);
int chan_basic_get(chan *ch, const amqp_basic_get *g, amqp_error *err);

/* 540 "<what> not supported by <type> queues queue 'Q' in vhost 'V'":
 * RabbitMQ's refusal of what a stream does not do. */
int chan_not_supported(queue *q, const char *what, uint32_t method_id, amqp_error *err);

#endif
