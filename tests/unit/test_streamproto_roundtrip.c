/* Round trips of the commands whose shape varies most -- Publish v1 and v2,
 * (messages, sub-entry batches, filter values or none), Subscribe with
 * every offset specification and properties, Create,
 * CreateSuperStream, Metadata, PeerProperties, ExchangeCommandVersions --
 * built from random fields with the module's own puts, decoded, and
 * compared field by field. A fixed-seed generator keeps runs identical. */
#include "test_streamproto_util.h"

#define ROUNDS 300
#define MAX_ITEMS 12

typedef struct rng {
    uint64_t s;
} rng;

static uint32_t next(rng *r, uint32_t bound)
{
    r->s = r->s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(r->s >> 33) % bound;
}

/* Random bytes in a pool that outlives the frame. */
static sp_slice text(rng *r, uint8_t *pool, size_t *used, uint32_t max)
{
    uint32_t n = next(r, max + 1);
    uint8_t *p = pool + *used;
    for (uint32_t i = 0; i < n; i++)
        p[i] = (uint8_t)next(r, 256);
    *used += n;
    return (sp_slice){p, n};
}

static void assert_same(sp_slice a, sp_slice b)
{
    assert_int_equal(a.len, b.len);
    if (a.len)
        assert_memory_equal(a.ptr, b.ptr, a.len);
}

static sp_command decode_exact(const uint8_t *frame, size_t n, uint8_t **keep)
{
    sp_command c;
    assert_int_equal(decode_bytes(frame, n, &c, keep), SP_DONE);
    return c;
}

static void test_publish(void **state)
{
    static uint8_t pool[1 << 16], out[1 << 17];
    rng r = {1};
    for (int round = 0; round < ROUNDS; round++) {
        size_t used = 0;
        bool v2 = next(&r, 2);
        uint32_t n = next(&r, MAX_ITEMS + 1);
        sp_message m[MAX_ITEMS];
        sp_buf b = {out, sizeof out, 0, false};
        size_t start = sp_frame_begin(&b, SP_PUBLISH, v2 ? 2 : 1);
        sp_put_u8(&b, (uint8_t)round);
        sp_put_u32(&b, n);
        for (uint32_t i = 0; i < n; i++) {
            m[i] = (sp_message){.publishing_id = (uint64_t)next(&r, UINT32_MAX) << 32 |
                                                 next(&r, UINT32_MAX)};
            sp_put_u64(&b, m[i].publishing_id);
            if (v2 && next(&r, 4)) {
                m[i].filter = text(&r, pool, &used, 20);
                sp_put_str(&b, m[i].filter);
            } else if (v2) {
                sp_put_u16(&b, 0xFFFF); /* no filter value */
            }
            m[i].data = text(&r, pool, &used, 300);
            m[i].batch = !v2 && !next(&r, 3);
            if (m[i].batch) { /* a sub-entry batch */
                m[i].compression = (uint8_t)next(&r, 5);
                m[i].batch_count = (uint16_t)next(&r, 65536);
                m[i].uncompressed_size = next(&r, UINT32_MAX);
                sp_put_u8(&b, (uint8_t)(0x80 | m[i].compression << 4));
                sp_put_u16(&b, m[i].batch_count);
                sp_put_u32(&b, m[i].uncompressed_size);
            }
            sp_put_bytes(&b, m[i].data);
        }
        assert_true(sp_frame_end(&b, start));
        uint8_t *keep;
        sp_command c = decode_exact(out, b.len, &keep);
        assert_int_equal(c.u.publish.publisher_id, (uint8_t)round);
        assert_int_equal(c.u.publish.filtered, v2);
        sp_list it = c.u.publish.messages;
        assert_int_equal(it.count, n);
        sp_message got;
        for (uint32_t i = 0; i < n; i++) {
            assert_true(sp_message_next(&it, v2, &got));
            assert_int_equal(got.publishing_id, m[i].publishing_id);
            assert_int_equal(got.filter.ptr == NULL, m[i].filter.ptr == NULL);
            assert_same(got.filter, m[i].filter);
            assert_same(got.data, m[i].data);
            assert_int_equal(got.batch, m[i].batch);
            assert_int_equal(got.compression, m[i].compression);
            assert_int_equal(got.batch_count, m[i].batch_count);
            assert_int_equal(got.uncompressed_size, m[i].uncompressed_size);
        }
        assert_false(sp_message_next(&it, v2, &got));
        free(keep);
    }
}

static void put_pairs(sp_buf *b, rng *r, uint8_t *pool, size_t *used, sp_pair *p, uint32_t n)
{
    sp_put_u32(b, n);
    for (uint32_t i = 0; i < n; i++) {
        p[i].key = text(r, pool, used, 30);
        p[i].value = text(r, pool, used, 30);
        sp_put_str(b, p[i].key);
        sp_put_str(b, p[i].value);
    }
}

static void same_pairs(sp_list it, const sp_pair *p, uint32_t n)
{
    sp_slice k, v;
    assert_int_equal(it.count, n);
    for (uint32_t i = 0; i < n; i++) {
        assert_true(sp_pair_next(&it, &k, &v));
        assert_same(k, p[i].key);
        assert_same(v, p[i].value);
    }
    assert_false(sp_pair_next(&it, &k, &v));
}

static void put_strings(sp_buf *b, rng *r, uint8_t *pool, size_t *used, sp_slice *s, uint32_t n)
{
    sp_put_u32(b, n);
    for (uint32_t i = 0; i < n; i++) {
        s[i] = text(r, pool, used, 40);
        sp_put_str(b, s[i]);
    }
}

static void same_strings(sp_list it, const sp_slice *s, uint32_t n)
{
    sp_slice got;
    assert_int_equal(it.count, n);
    for (uint32_t i = 0; i < n; i++) {
        assert_true(sp_string_next(&it, &got));
        assert_same(got, s[i]);
    }
    assert_false(sp_string_next(&it, &got));
}

static void test_subscribe(void **state)
{
    static uint8_t pool[1 << 14], out[1 << 14];
    rng r = {2};
    for (int round = 0; round < ROUNDS; round++) {
        size_t used = 0;
        sp_pair props[MAX_ITEMS];
        uint32_t nprops = next(&r, MAX_ITEMS + 1);
        bool with_props = nprops || next(&r, 2); /* the count may be left out when 0 */
        sp_offset_spec o = {(uint16_t)(1 + next(&r, 5)), 0};
        if (o.type == SP_OFFSET_OFFSET || o.type == SP_OFFSET_TIMESTAMP)
            o.value = (uint64_t)next(&r, UINT32_MAX) << 32 | next(&r, UINT32_MAX);
        sp_buf b = {out, sizeof out, 0, false};
        size_t start = sp_frame_begin(&b, SP_SUBSCRIBE, 1);
        sp_put_u32(&b, (uint32_t)round);
        sp_put_u8(&b, (uint8_t)(round * 7));
        sp_slice stream = text(&r, pool, &used, 50);
        sp_put_str(&b, stream);
        sp_put_u16(&b, o.type);
        if (o.type >= SP_OFFSET_OFFSET)
            sp_put_u64(&b, o.value);
        sp_put_u16(&b, (uint16_t)(round * 3));
        if (with_props)
            put_pairs(&b, &r, pool, &used, props, nprops);
        assert_true(sp_frame_end(&b, start));
        uint8_t *keep;
        sp_command c = decode_exact(out, b.len, &keep);
        assert_int_equal(c.correlation_id, (uint32_t)round);
        assert_int_equal(c.u.subscribe.subscription_id, (uint8_t)(round * 7));
        assert_same(c.u.subscribe.stream, stream);
        assert_int_equal(c.u.subscribe.offset.type, o.type);
        assert_int_equal(c.u.subscribe.offset.value, o.value);
        assert_int_equal(c.u.subscribe.credit, (uint16_t)(round * 3));
        same_pairs(c.u.subscribe.properties, props, nprops);
        free(keep);
    }
}

/* Create, CreateSuperStream, Metadata, PeerProperties and
 * ExchangeCommandVersions: lists of strings, pairs and triples. */
static void test_lists(void **state)
{
    static uint8_t pool[1 << 15], out[1 << 15];
    rng r = {3};
    for (int round = 0; round < ROUNDS; round++) {
        size_t used = 0;
        sp_slice parts[MAX_ITEMS], keys[MAX_ITEMS], name = text(&r, pool, &used, 20);
        sp_pair args[MAX_ITEMS];
        uint32_t np = next(&r, MAX_ITEMS + 1), nk = next(&r, MAX_ITEMS + 1),
                 na = next(&r, MAX_ITEMS + 1);
        uint16_t key = (uint16_t[]){SP_CREATE_SUPER_STREAM, SP_CREATE, SP_METADATA,
                                    SP_PEER_PROPERTIES}[round % 4];
        sp_buf b = {out, sizeof out, 0, false};
        size_t start = sp_frame_begin(&b, key, 1);
        sp_put_u32(&b, (uint32_t)round);
        if (key == SP_CREATE_SUPER_STREAM || key == SP_CREATE)
            sp_put_str(&b, name);
        if (key == SP_CREATE_SUPER_STREAM) {
            put_strings(&b, &r, pool, &used, parts, np);
            put_strings(&b, &r, pool, &used, keys, nk);
        }
        if (key == SP_METADATA)
            put_strings(&b, &r, pool, &used, parts, np);
        else
            put_pairs(&b, &r, pool, &used, args, na);
        assert_true(sp_frame_end(&b, start));
        uint8_t *keep;
        sp_command c = decode_exact(out, b.len, &keep);
        assert_int_equal(c.correlation_id, (uint32_t)round);
        if (key == SP_CREATE_SUPER_STREAM) {
            assert_same(c.u.create_super_stream.name, name);
            same_strings(c.u.create_super_stream.partitions, parts, np);
            same_strings(c.u.create_super_stream.binding_keys, keys, nk);
            same_pairs(c.u.create_super_stream.arguments, args, na);
        } else if (key == SP_CREATE) {
            assert_same(c.u.create.stream, name);
            same_pairs(c.u.create.arguments, args, na);
        } else if (key == SP_METADATA) {
            same_strings(c.u.metadata.streams, parts, np);
        } else {
            same_pairs(c.u.peer_properties.properties, args, na);
        }
        free(keep);
    }
}

static void test_command_versions(void **state)
{
    static uint8_t out[256];
    size_t n;
    const sp_command_version *v = sp_server_versions(&n);
    sp_buf b = {out, sizeof out, 0, false};
    size_t start = sp_frame_begin(&b, SP_EXCHANGE_COMMAND_VERSIONS, 1);
    sp_put_u32(&b, 42);
    sp_put_u32(&b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        sp_put_u16(&b, v[i].key);
        sp_put_u16(&b, v[i].min_version);
        sp_put_u16(&b, v[i].max_version);
    }
    assert_true(sp_frame_end(&b, start));
    uint8_t *keep;
    sp_command c = decode_exact(out, b.len, &keep);
    sp_list it = c.u.exchange_command_versions.commands;
    sp_command_version got;
    for (size_t i = 0; i < n; i++) {
        assert_true(sp_version_next(&it, &got));
        assert_memory_equal(&got, &v[i], sizeof got);
    }
    assert_false(sp_version_next(&it, &got));
    free(keep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_publish),
        cmocka_unit_test(test_subscribe),
        cmocka_unit_test(test_lists),
        cmocka_unit_test(test_command_versions),
    };
    return cmocka_run_group_tests_name("streamproto_roundtrip", tests, NULL, NULL);
}
