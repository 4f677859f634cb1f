/* shovel's private parts: a shovel's definition (config.c), one shovel's
 * links and state (link.c), the message it rewrites (props.c) and the set
 * (shovels.c). */
#ifndef WARREN_SHOVEL_INT_H
#define WARREN_SHOVEL_INT_H

#include "../client/client.h"
#include "shovel.h"

struct event;

enum { ACK_ON_CONFIRM, ACK_ON_PUBLISH, ACK_NO_ACK };
#define DELETE_NEVER (-1)
#define DELETE_QUEUE_LENGTH (-2)

/* A parameter's value, read (config.c). Names are at most 255 bytes. */
typedef struct shovel_cfg {
    client_uri src, dest;
    char src_shown[512], dest_shown[512]; /* URIs without credentials */
    char src_queue[256], src_exchange[256], src_exchange_key[256];
    char dest_queue[256], dest_exchange[256], dest_exchange_key[256];
    bool has_src_queue, has_src_exchange;
    bool has_dest_queue, has_dest_exchange, has_dest_exchange_key;
    uint16_t prefetch;      /* 0: no limit */
    int ack_mode;
    int64_t delete_after;   /* DELETE_NEVER, DELETE_QUEUE_LENGTH or a count */
    bool forward_headers, timestamp_header;
    uint32_t reconnect_delay_ms;
    char unsupported[400];  /* why it cannot run (amqp10), "" when it can */
} shovel_cfg;

/* False with the reason when `json` is not a shovel this module can read. */
bool shovel_cfg_parse(const char *json, shovel_cfg *out, char *err, size_t errlen);

/* steps of one end: connect, open channel 1, declare, then its own */
enum { STEP_IDLE, STEP_CONNECTING, STEP_CHANNEL, STEP_PASSIVE, STEP_REOPEN, STEP_DECLARE,
       STEP_BIND, STEP_COUNT, STEP_QOS, STEP_CONSUME, STEP_CONFIRM, STEP_READY };

typedef struct shovel_end {
    client *c;
    int step;
    char queue[256]; /* the queue it uses (the source's server-named one) */
} shovel_end;

/* A message the destination could not take yet (its output was full):
 * kept until `writable`, the source paused meanwhile. */
typedef struct held_msg {
    bool present;
    uint64_t tag;
    uint8_t exchange[256], routing_key[256];
    uint32_t exchange_len, routing_key_len;
    uint8_t *props, *body;
    size_t props_len, body_len, props_cap, body_cap;
} held_msg;

typedef struct shovel shovel;
struct shovel {
    shovels *set;
    shovel *next;
    char vhost[256], name[256];
    char *value;            /* the parameter's JSON, to notice a change */
    shovel_cfg cfg;
    shovel_state state;
    char reason[512];
    int64_t since_s;
    uint64_t seen;          /* shovels_sync's mark */
    bool dead;              /* its parameter went: freed once its links are closed */
    bool restart_now;       /* start again as soon as the links are closed */
    bool stopping;          /* shovel_link_stop: the links are closing */
    shovel_end src, dest;
    struct event *retry;
    unsigned failures;      /* in a row, for the back-off */
    /* on-confirm: the source tag of each destination sequence number in
     * flight, a ring indexed by seq; done marks a seq confirmed out of order */
    uint64_t *ring;
    uint8_t *done;
    size_t ring_cap;        /* a power of two */
    uint64_t head_seq, next_seq;
    int64_t remaining, remaining_unacked; /* delete-after; -1: no limit */
    held_msg held;
    uint8_t *props_buf;     /* rewritten properties */
    size_t props_cap;
    uint64_t forwarded, acked, restarts;
};

/* link.c */
void shovel_link_start(shovel *sh);
/* Closes both links (cleanly when open); when they are gone the shovel is
 * freed (dead), started again (restart_now) or waits for its retry. */
void shovel_link_stop(shovel *sh);
void shovel_set_state(shovel *sh, shovel_state st, const char *reason);
/* Frees what the links hold, clients included (the set is going). */
void shovel_link_free(shovel *sh);

/* props.c: the properties to publish, with the x-shovelled and
 * x-shovelled-timestamp headers when the definition asks; `raw` itself
 * when it does not. Empty on failure (out of memory, too large). */
amqp_bytes shovel_props(shovel *sh, amqp_bytes raw);

/* shovels.c */
server *shovels_server(shovels *set);
struct event_base *shovels_base(shovels *set);
transport_flusher *shovels_flusher(shovels *set);
/* A link to this broker: a pipe whose other end is a trusted connection. */
transport *shovels_local_transport(shovels *set, const char *who);
/* The link ended for good (both clients gone): what comes next. */
void shovels_links_closed(shovel *sh);
/* delete-after reached: the parameter goes, and the shovel with it. */
void shovels_autodelete(shovel *sh);

#endif
