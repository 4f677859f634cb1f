/* Decoding client->server commands (rabbit_stream_core.erl's parse_request
 * and parse_response, v3.13.x, whose binary patterns fix what is taken).
 *
 * A command is read field by field with a reader (streamproto_int.h) over
 * the frame body; it is well formed only when every field was there and the
 * body ends exactly after the last (RabbitMQ's patterns match whole frames:
 * trailing bytes make them unknown). Lists are checked item by item here, so
 * the iterators that walk them later cannot fail. List counts declared on
 * the wire are read but, as in RabbitMQ, the items are what the bytes hold
 * (Publish's messages too) -- except CreateSuperStream's partitions and
 * binding keys, whose counts delimit them.
 *
 * Stricter than RabbitMQ in two corners no client reaches: 1-3 stray bytes
 * after Subscribe's credit (it logs and ignores them) and bytes after a
 * ConsumerUpdate response's offset type 0-3 (ignored) are malformed here.
 */
#include "streamproto_int.h"

/* ---- lists: check at decode, walk later ------------------------------- */

enum item { PAIR, STRING, VERSION, MESSAGE_V1, MESSAGE_V2 };

/* A Publish entry: publishing id, in v2 a filter value (length -1: none),
 * then a uint32 size with the high bit clear, or in v1 a sub-entry batch:
 *   1 bit set, 3 bits compression, 4 unused, uint16 message count,
 *   uint32 uncompressed size, uint32 size, the batch. */
static void read_message(rd *r, bool filtered, sp_message *m)
{
    *m = (sp_message){.publishing_id = rd_u64(r)};
    if (filtered) {
        uint16_t n = rd_u16(r);
        if (n != 0xFFFF)
            m->filter = (sp_slice){rd_take(r, n), n};
    }
    const uint8_t *head = rd_take(r, 1);
    if (!head)
        return;
    if (!(head[0] & 0x80)) {
        const uint8_t *low = rd_take(r, 3);
        uint32_t n = low ? (uint32_t)head[0] << 24 | (uint32_t)low[0] << 16 | low[1] << 8 | low[2]
                         : 0;
        m->data = (sp_slice){rd_take(r, n), n};
        return;
    }
    if (filtered) /* RabbitMQ takes batches in v1 only */
        r->bad = true;
    m->batch = true;
    m->compression = head[0] >> 4 & 7;
    m->batch_count = rd_u16(r);
    m->uncompressed_size = rd_u32(r);
    uint32_t n = rd_u32(r);
    m->data = (sp_slice){rd_take(r, n), n};
}

/* Reads one item of a list; the reader flags a short one. */
static void skip_item(rd *r, enum item kind)
{
    sp_message m;

    switch (kind) {
    case PAIR:
        rd_str(r);
        rd_str(r);
        break;
    case STRING:
        rd_str(r);
        break;
    case VERSION:
        rd_take(r, 6);
        break;
    case MESSAGE_V1:
    case MESSAGE_V2:
        read_message(r, kind == MESSAGE_V2, &m);
        break;
    }
}

#define ALL_LEFT (-1)

/* `count` items (ALL_LEFT: as many as the rest holds) from r; the list
 * covers exactly the bytes they took. Each item takes at least 2 bytes or
 * flags the reader, so the loop ends. */
static sp_list take_list(rd *r, enum item kind, int64_t count)
{
    sp_list l = {r->p, 0, 0};
    size_t before = r->left;
    while (!r->bad && (count == ALL_LEFT ? r->left > 0 : l.count < count)) {
        skip_item(r, kind);
        l.count++;
    }
    l.len = (uint32_t)(before - r->left);
    return l;
}

static bool list_next(sp_list *it, rd *r)
{
    if (!it->count)
        return false;
    *r = (rd){it->p, it->len, false};
    return true;
}

static void list_advance(sp_list *it, const rd *r)
{
    it->count--;
    it->len = (uint32_t)r->left;
    it->p = r->p;
}

bool sp_pair_next(sp_list *it, sp_slice *key, sp_slice *value)
{
    rd r;
    if (!list_next(it, &r))
        return false;
    *key = rd_str(&r);
    *value = rd_str(&r);
    list_advance(it, &r);
    return true;
}

bool sp_string_next(sp_list *it, sp_slice *s)
{
    rd r;
    if (!list_next(it, &r))
        return false;
    *s = rd_str(&r);
    list_advance(it, &r);
    return true;
}

bool sp_version_next(sp_list *it, sp_command_version *v)
{
    rd r;
    if (!list_next(it, &r))
        return false;
    v->key = rd_u16(&r);
    v->min_version = rd_u16(&r);
    v->max_version = rd_u16(&r);
    list_advance(it, &r);
    return true;
}

bool sp_message_next(sp_list *it, bool filtered, sp_message *m)
{
    rd r;
    if (!list_next(it, &r))
        return false;
    read_message(&r, filtered, m);
    list_advance(it, &r);
    return true;
}

/* ---- the commands a server takes, and their versions -------------------- */

/* 3.13's rabbit_stream_utils:command_versions(), filtering on. */
static const sp_command_version server_versions[] = {
    {SP_DECLARE_PUBLISHER, 1, 1}, {SP_PUBLISH, 1, 2},
    {SP_QUERY_PUBLISHER_SEQUENCE, 1, 1}, {SP_DELETE_PUBLISHER, 1, 1},
    {SP_SUBSCRIBE, 1, 1}, {SP_CREDIT, 1, 1}, {SP_STORE_OFFSET, 1, 1},
    {SP_QUERY_OFFSET, 1, 1}, {SP_UNSUBSCRIBE, 1, 1}, {SP_CREATE, 1, 1},
    {SP_DELETE, 1, 1}, {SP_METADATA, 1, 1}, {SP_CLOSE, 1, 1}, {SP_HEARTBEAT, 1, 1},
    {SP_ROUTE, 1, 1}, {SP_PARTITIONS, 1, 1}, {SP_STREAM_STATS, 1, 1},
    {SP_CREATE_SUPER_STREAM, 1, 1}, {SP_DELETE_SUPER_STREAM, 1, 1},
};

const sp_command_version *sp_server_versions(size_t *n)
{
    *n = sizeof server_versions / sizeof server_versions[0];
    return server_versions;
}

/* Whether a client may send this key in this direction, and whether it
 * starts with a correlation id. */
static bool taken(uint16_t key, bool response, bool *has_corr)
{
    *has_corr = key != SP_TUNE;
    if (response) /* the server's requests that a client answers */
        return key == SP_CLOSE || key == SP_CONSUMER_UPDATE || key == SP_TUNE;
    switch (key) {
    case SP_PUBLISH: case SP_CREDIT: case SP_STORE_OFFSET: case SP_HEARTBEAT: case SP_TUNE:
        *has_corr = false; /* RabbitMQ takes Tune as a request too */
        return true;
    case SP_PUBLISH_CONFIRM: case SP_PUBLISH_ERROR: case SP_DELIVER: case SP_METADATA_UPDATE:
    case SP_CONSUMER_UPDATE:
        return false;
    default:
        return key >= SP_DECLARE_PUBLISHER && key <= SP_DELETE_SUPER_STREAM;
    }
}

/* An offset specification; false for a type RabbitMQ does not know (its
 * parser crashes there). `none_ok`: type 0, for ConsumerUpdate. */
static bool offset_spec(rd *r, sp_offset_spec *o, bool none_ok)
{
    o->type = rd_u16(r);
    o->value = 0;
    if (o->type == SP_OFFSET_OFFSET || o->type == SP_OFFSET_TIMESTAMP)
        o->value = rd_u64(r);
    return (o->type >= SP_OFFSET_FIRST || none_ok) && o->type <= SP_OFFSET_TIMESTAMP;
}

static bool decode_subscribe(rd *r, sp_command *c)
{
    c->u.subscribe.subscription_id = rd_u8(r);
    c->u.subscribe.stream = rd_str(r);
    bool ok = offset_spec(r, &c->u.subscribe.offset, false);
    c->u.subscribe.credit = rd_u16(r);
    c->u.subscribe.properties = (sp_list){r->p, 0, 0};
    if (!r->bad && r->left) { /* properties are optional */
        rd_u32(r);
        c->u.subscribe.properties = take_list(r, PAIR, ALL_LEFT);
    }
    return ok;
}

static bool decode_sasl_authenticate(rd *r, sp_command *c)
{
    c->u.sasl_authenticate.mechanism = rd_str(r);
    uint32_t n = rd_u32(r);
    if (n == UINT32_MAX) { /* -1: no data */
        c->u.sasl_authenticate.data = (sp_slice){r->p, 0};
        return true;
    }
    c->u.sasl_authenticate.data = (sp_slice){rd_take(r, n), n};
    return true;
}

static bool decode_publish(rd *r, sp_command *c)
{
    c->u.publish.publisher_id = rd_u8(r);
    c->u.publish.filtered = c->version == 2;
    c->u.publish.declared_count = rd_u32(r);
    c->u.publish.messages = take_list(r, c->u.publish.filtered ? MESSAGE_V2 : MESSAGE_V1,
                                      ALL_LEFT);
    return true;
}

static bool decode_super_stream(rd *r, sp_command *c)
{
    c->u.create_super_stream.name = rd_str(r);
    uint32_t n = rd_u32(r);
    c->u.create_super_stream.partitions = take_list(r, STRING, n);
    n = rd_u32(r);
    c->u.create_super_stream.binding_keys = take_list(r, STRING, n);
    rd_u32(r);
    c->u.create_super_stream.arguments = take_list(r, PAIR, ALL_LEFT);
    return true;
}

/* The body after the correlation id; false for a bad value. */
static bool decode_body(rd *r, sp_command *c)
{
    switch (c->key | (c->response ? SP_RESPONSE : 0)) {
    case SP_DECLARE_PUBLISHER:
        c->u.declare_publisher.publisher_id = rd_u8(r);
        c->u.declare_publisher.reference = rd_str(r);
        c->u.declare_publisher.stream = rd_str(r);
        return true;
    case SP_PUBLISH:
        return decode_publish(r, c);
    case SP_QUERY_PUBLISHER_SEQUENCE:
        c->u.query_publisher_sequence.reference = rd_str(r);
        c->u.query_publisher_sequence.stream = rd_str(r);
        return true;
    case SP_DELETE_PUBLISHER:
        c->u.delete_publisher.publisher_id = rd_u8(r);
        return true;
    case SP_SUBSCRIBE:
        return decode_subscribe(r, c);
    case SP_CREDIT:
        c->u.credit.subscription_id = rd_u8(r);
        c->u.credit.credit = rd_u16(r);
        return true;
    case SP_STORE_OFFSET:
        c->u.store_offset.reference = rd_str(r);
        c->u.store_offset.stream = rd_str(r);
        c->u.store_offset.offset = rd_u64(r);
        return true;
    case SP_QUERY_OFFSET:
        c->u.query_offset.reference = rd_str(r);
        c->u.query_offset.stream = rd_str(r);
        return true;
    case SP_UNSUBSCRIBE:
        c->u.unsubscribe.subscription_id = rd_u8(r);
        return true;
    case SP_CREATE:
        c->u.create.stream = rd_str(r);
        rd_u32(r);
        c->u.create.arguments = take_list(r, PAIR, ALL_LEFT);
        return true;
    case SP_DELETE:
        c->u.delete_stream.stream = rd_str(r);
        return true;
    case SP_METADATA:
        rd_u32(r);
        c->u.metadata.streams = take_list(r, STRING, ALL_LEFT);
        return true;
    case SP_PEER_PROPERTIES:
        rd_u32(r);
        c->u.peer_properties.properties = take_list(r, PAIR, ALL_LEFT);
        return true;
    case SP_SASL_HANDSHAKE:
    case SP_HEARTBEAT:
        return true;
    case SP_SASL_AUTHENTICATE:
        return decode_sasl_authenticate(r, c);
    case SP_TUNE:
    case SP_TUNE | SP_RESPONSE:
        c->u.tune.frame_max = rd_u32(r);
        c->u.tune.heartbeat = rd_u32(r);
        return true;
    case SP_OPEN:
        c->u.open.vhost = rd_str(r);
        return true;
    case SP_CLOSE:
        c->u.close.code = rd_u16(r);
        c->u.close.reason = rd_str(r);
        return true;
    case SP_CLOSE | SP_RESPONSE:
        c->u.close_ok.code = rd_u16(r);
        return true;
    case SP_ROUTE:
        c->u.route.routing_key = rd_str(r);
        c->u.route.super_stream = rd_str(r);
        return true;
    case SP_PARTITIONS:
        c->u.partitions.super_stream = rd_str(r);
        return true;
    case SP_CONSUMER_UPDATE | SP_RESPONSE:
        c->u.consumer_update.code = rd_u16(r);
        c->u.consumer_update.offset = (sp_offset_spec){SP_OFFSET_NONE, 0};
        /* RabbitMQ also takes the bare generic response (no offset spec) */
        return r->bad || !r->left || offset_spec(r, &c->u.consumer_update.offset, true);
    case SP_EXCHANGE_COMMAND_VERSIONS:
        rd_u32(r);
        c->u.exchange_command_versions.commands = take_list(r, VERSION, ALL_LEFT);
        return true;
    case SP_STREAM_STATS:
        c->u.stream_stats.stream = rd_str(r);
        return true;
    case SP_CREATE_SUPER_STREAM:
        return decode_super_stream(r, c);
    case SP_DELETE_SUPER_STREAM:
        c->u.delete_super_stream.name = rd_str(r);
        return true;
    }
    return false; /* not reached: taken() admits only the keys above */
}

sp_status sp_command_decode(const sp_frame *f, sp_command *c)
{
    bool has_corr;
    *c = (sp_command){.key = f->key & ~SP_RESPONSE, .response = (f->key & SP_RESPONSE) != 0,
                      .version = f->version};
    bool known = taken(c->key, c->response, &has_corr);
    rd r = {f->body, f->body_len, false};
    if (!known) { /* the first 4 bytes, in case it is a request with an id */
        if (f->body_len >= 4)
            c->correlation_id = sp_be32(f->body);
        return SP_UNKNOWN;
    }
    if (has_corr)
        c->correlation_id = rd_u32(&r);
    uint16_t max = c->key == SP_PUBLISH && !c->response ? 2 : 1;
    if (c->version < 1 || c->version > max)
        return SP_UNKNOWN;
    bool ok = decode_body(&r, c);
    return ok && !r.bad && r.left == 0 ? SP_DONE : SP_MALFORMED;
}
