/* The stream protocol's frame reader and command decoder (streamproto/):
 * bytes as a client sends them, cut into frames under a frame_max the input
 * picks, each frame decoded. Beyond "no crash": a frame never exceeds
 * frame_max or the input, a prefix of a whole frame always needs more, every
 * slice a decode hands out lies inside its frame body, every list walks to
 * exactly its count and bytes, and an encoder given a decoded string either
 * writes a whole frame or leaves the buffer as it was.
 *
 * Input: frame_max choice, prefix choice, then the stream. Seeds
 * (tests/fuzz/corpus/streamproto/) are the frames a raw client sent to
 * RabbitMQ 3.10.8 (tests/unit/streamproto_live_client.py) and the
 * vectors of tests/unit/test_streamproto_vectors.h. */
#include "../../streamproto/streamproto.h"
#include "fuzz.h"

typedef struct body {
    const uint8_t *p;
    size_t n;
} body;

static void in_body(const body *b, sp_slice s)
{
    FUZZ_CHECK(s.len == 0 || (s.ptr >= b->p && s.len <= b->n - (size_t)(s.ptr - b->p)));
}

static void walk_pairs(const body *b, sp_list l)
{
    uint32_t count = l.count, seen = 0;
    sp_slice k, v;
    while (sp_pair_next(&l, &k, &v)) {
        in_body(b, k);
        in_body(b, v);
        seen++;
    }
    FUZZ_CHECK(seen == count && l.len == 0);
}

static void walk_strings(const body *b, sp_list l)
{
    uint32_t count = l.count, seen = 0;
    sp_slice s;
    while (sp_string_next(&l, &s)) {
        in_body(b, s);
        seen++;
    }
    FUZZ_CHECK(seen == count && l.len == 0);
}

static void walk_messages(const body *b, sp_list l, bool filtered)
{
    uint32_t count = l.count, seen = 0;
    sp_message m;
    while (sp_message_next(&l, filtered, &m)) {
        in_body(b, m.filter);
        in_body(b, m.data);
        FUZZ_CHECK(filtered || m.filter.ptr == NULL);
        FUZZ_CHECK(!filtered || !m.batch); /* batches are v1's */
        seen++;
    }
    FUZZ_CHECK(seen == count && l.len == 0);
}

static void walk_versions(sp_list l)
{
    uint32_t count = l.count, seen = 0;
    sp_command_version v;
    while (sp_version_next(&l, &v))
        seen++;
    FUZZ_CHECK(seen == count && l.len == 0);
}

/* A decoded string goes back out in a Close: whole or not at all. */
static void echo(sp_slice s, uint8_t room)
{
    uint8_t out[512];
    sp_buf b = {out, room, 0, false};
    bool ok = sp_encode_close(&b, 1, SP_UNKNOWN_FRAME, s);
    FUZZ_CHECK(!b.full);
    FUZZ_CHECK(ok ? b.len == 16 + (size_t)s.len : b.len == 0);
    FUZZ_CHECK(ok == (16 + (size_t)s.len <= room));
}

static void check_command(const sp_frame *f, const sp_command *c, uint8_t room)
{
    body b = {f->body, f->body_len};
    switch (c->key) {
    case SP_PUBLISH:
        walk_messages(&b, c->u.publish.messages, c->u.publish.filtered);
        break;
    case SP_SUBSCRIBE:
        in_body(&b, c->u.subscribe.stream);
        walk_pairs(&b, c->u.subscribe.properties);
        echo(c->u.subscribe.stream, room);
        break;
    case SP_CREATE:
        walk_pairs(&b, c->u.create.arguments);
        break;
    case SP_METADATA:
        walk_strings(&b, c->u.metadata.streams);
        break;
    case SP_PEER_PROPERTIES:
        walk_pairs(&b, c->u.peer_properties.properties);
        break;
    case SP_SASL_AUTHENTICATE:
        in_body(&b, c->u.sasl_authenticate.mechanism);
        in_body(&b, c->u.sasl_authenticate.data);
        break;
    case SP_OPEN:
        in_body(&b, c->u.open.vhost);
        echo(c->u.open.vhost, room);
        break;
    case SP_EXCHANGE_COMMAND_VERSIONS:
        walk_versions(c->u.exchange_command_versions.commands);
        break;
    case SP_CREATE_SUPER_STREAM:
        walk_strings(&b, c->u.create_super_stream.partitions);
        walk_strings(&b, c->u.create_super_stream.binding_keys);
        walk_pairs(&b, c->u.create_super_stream.arguments);
        break;
    case SP_STORE_OFFSET:
        in_body(&b, c->u.store_offset.reference);
        in_body(&b, c->u.store_offset.stream);
        break;
    default:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t frame_maxes[] = {0, SP_PRE_OPEN_FRAME_MAX, 64, SP_DEFAULT_FRAME_MAX};
    fuzz_in in = {data, size};
    uint32_t frame_max = frame_maxes[fuzz_byte(&in) & 3];
    uint8_t cut = fuzz_byte(&in);
    const uint8_t *p = in.p;
    size_t left = in.len;
    for (;;) {
        sp_frame f;
        size_t used;
        sp_status st = sp_frame_next(p, left, frame_max, &f, &used);
        if (st != SP_DONE) {
            FUZZ_CHECK(used == 0);
            FUZZ_CHECK(st != SP_TOO_LARGE || (frame_max && f.size > frame_max));
            break;
        }
        FUZZ_CHECK(used == (size_t)f.size + SP_SIZE_LEN && used <= left);
        FUZZ_CHECK(!frame_max || f.size <= frame_max);
        FUZZ_CHECK(f.body == p + 8 && f.body_len == f.size - SP_HEADER_LEN);
        sp_frame g; /* any prefix of a whole frame needs more */
        size_t g_used;
        FUZZ_CHECK(sp_frame_next(p, cut % used, frame_max, &g, &g_used) == SP_NEED_MORE);
        sp_command c;
        st = sp_command_decode(&f, &c);
        FUZZ_CHECK(st == SP_DONE || st == SP_MALFORMED || st == SP_UNKNOWN);
        FUZZ_CHECK(c.key == (f.key & 0x7FFF) && c.version == f.version);
        if (st == SP_DONE)
            check_command(&f, &c, cut);
        p += used;
        left -= used;
    }
    return 0;
}
