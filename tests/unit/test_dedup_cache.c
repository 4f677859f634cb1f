/* The deduplication cache: exchange semantics (TTL, per-message TTL,
 * eviction of the oldest, the size cap), queue semantics (claim and
 * release by message id), keys from headers, argument checks with the
 * plugin's and LavinMQ's texts, and saving and loading. */
#include <unistd.h>

#include "test_route_util.h"

#include "../../dedup/dedup.h"

static dedup_key K(uint64_t i) { return (dedup_key){{i * 0x9e3779b97f4a7c15ull, i}}; }

static void test_seen_and_ttl(void **state)
{
    (void)state;
    dedup_cache *c = dedup_cache_new(10, 1000, false);
    assert_non_null(c);
    assert_false(dedup_cache_seen(c, K(1), 5000, -1));
    assert_true(dedup_cache_seen(c, K(1), 5999, -1));
    assert_int_equal(dedup_cache_duplicates(c), 1);
    /* at its expiry it is gone: routed again, cached anew */
    assert_false(dedup_cache_seen(c, K(1), 6000, -1));
    assert_true(dedup_cache_seen(c, K(1), 6999, -1));
    assert_int_equal(dedup_cache_entries(c), 1);
    dedup_cache_free(c);
}

static void test_per_message_ttl(void **state)
{
    (void)state;
    dedup_cache *c = dedup_cache_new(10, -1, false); /* no default TTL: kept until evicted */
    assert_false(dedup_cache_seen(c, K(1), 100, -1));
    assert_false(dedup_cache_seen(c, K(2), 100, 50)); /* the message's own x-cache-ttl */
    assert_true(dedup_cache_seen(c, K(2), 149, -1));
    assert_false(dedup_cache_seen(c, K(2), 150, -1));
    assert_true(dedup_cache_seen(c, K(1), 1000000000, -1));
    /* a message TTL wins over the cache's in both directions */
    dedup_cache *d = dedup_cache_new(10, 10, false);
    assert_false(dedup_cache_seen(d, K(3), 0 + 1, 1000));
    assert_true(dedup_cache_seen(d, K(3), 500, -1));
    assert_false(dedup_cache_seen(d, K(4), 1, 0)); /* TTL 0: not remembered at all */
    assert_false(dedup_cache_seen(d, K(4), 1, -1));
    dedup_cache_free(c);
    dedup_cache_free(d);
}

static void test_eviction_oldest_first(void **state)
{
    (void)state;
    dedup_cache *c = dedup_cache_new(3, -1, false);
    for (uint64_t i = 1; i <= 4; i++)
        assert_false(dedup_cache_seen(c, K(i), 1, -1));
    assert_int_equal(dedup_cache_entries(c), 3);
    assert_true(dedup_cache_seen(c, K(4), 1, -1));
    assert_true(dedup_cache_seen(c, K(2), 1, -1));
    assert_false(dedup_cache_seen(c, K(1), 1, -1)); /* the oldest went; now 2 goes */
    assert_false(dedup_cache_seen(c, K(2), 1, -1));
    dedup_cache_free(c);
}

static void test_size_cap_and_growth(void **state)
{
    (void)state;
    assert_null(dedup_cache_new(0, -1, false));
    assert_null(dedup_cache_new(DEDUP_MAX_SIZE + 1, -1, false));
    enum { N = 200000 };
    /* a queue's cache grows as used; an exchange's index is made for its
     * size at once, its entries grow */
    dedup_cache *q = dedup_cache_new(N, -1, true);
    assert_true(dedup_cache_memory(q) < 8192);
    dedup_cache_free(q);
    dedup_cache *c = dedup_cache_new(N, -1, false);
    assert_true(dedup_cache_memory(c) <= (size_t)N * 32 + 4096);
    for (uint64_t i = 0; i < N; i++)
        assert_false(dedup_cache_seen(c, K(i), 1, -1));
    for (uint64_t i = 0; i < N; i++)
        assert_true(dedup_cache_seen(c, K(i), 1, -1));
    assert_int_equal(dedup_cache_entries(c), N);
    assert_true(dedup_cache_memory(c) <= (size_t)N * 64 + 4096);
    assert_false(dedup_cache_seen(c, K(N), 1, -1));
    assert_int_equal(dedup_cache_entries(c), N);
    assert_false(dedup_cache_seen(c, K(0), 1, -1)); /* evicted */
    dedup_cache_free(c);
}

static void test_sweep(void **state)
{
    (void)state;
    dedup_cache *c = dedup_cache_new(100, 10, false);
    for (uint64_t i = 0; i < 50; i++)
        dedup_cache_seen(c, K(i), 100, 10 + (int64_t)i);
    assert_int_equal(dedup_cache_sweep(c, 120, 1000), 11); /* expiries 110..120 */
    assert_int_equal(dedup_cache_entries(c), 39);
    /* each insertion drops up to two expired ones from the oldest end */
    dedup_cache_seen(c, K(1000), 1000, -1);
    assert_int_equal(dedup_cache_entries(c), 38);
    dedup_cache_free(c);
}

static void test_queue_claim_release(void **state)
{
    (void)state;
    dedup_cache *c = dedup_cache_new(DEDUP_MAX_SIZE, -1, true);
    assert_true(dedup_cache_claim(c, K(1), 101));
    assert_false(dedup_cache_claim(c, K(1), 102));
    assert_true(dedup_cache_claim(c, K(2), 102));
    assert_int_equal(dedup_cache_duplicates(c), 1);
    dedup_cache_release(c, 999); /* a message without a key */
    dedup_cache_release(c, 101);
    assert_int_equal(dedup_cache_entries(c), 1);
    assert_true(dedup_cache_claim(c, K(1), 103));
    assert_false(dedup_cache_claim(c, K(2), 104));
    dedup_cache_clear(c);
    assert_int_equal(dedup_cache_entries(c), 0);
    assert_true(dedup_cache_claim(c, K(2), 104));
    dedup_cache_free(c);
}

/* Random claims and releases against a plain array: exercises the
 * indexes' removal (runs shifted back) and the free list. */
static void test_random_against_model(void **state)
{
    (void)state;
    enum { KEYS = 512, OPS = 200000 };
    static uint64_t owner[KEYS]; /* message id holding the key, 0 = none */
    memset(owner, 0, sizeof owner);
    dedup_cache *c = dedup_cache_new(DEDUP_MAX_SIZE, -1, true);
    uint64_t rng = 42, next_id = 1;
    uint32_t live = 0;
    for (int op = 0; op < OPS; op++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t k = (uint32_t)(rng >> 33) % KEYS;
        if ((rng >> 20) & 1) {
            bool fresh = dedup_cache_claim(c, K(k), next_id);
            assert_int_equal(fresh, owner[k] == 0);
            if (fresh)
                owner[k] = next_id, live++;
            next_id++;
        } else if (owner[k]) {
            dedup_cache_release(c, owner[k]);
            owner[k] = 0, live--;
        }
        assert_int_equal(dedup_cache_entries(c), live);
    }
    dedup_cache_free(c);
}

static void test_keys_from_headers(void **state)
{
    (void)state;
    dedup_cache *c = dedup_cache_new(10, -1, false);
    tbuf t;
    dedup_key a, b;
    int64_t ttl;
    const char *h = DEDUP_HEADER;
    assert_true(dedup_key_of(c, table(&t, "x-deduplication-header=I7 x-cache-ttl=l250"), h, &a,
                             &ttl));
    assert_int_equal(ttl, 250);
    /* integers compare by value whatever their width, as Erlang terms do */
    assert_true(dedup_key_of(c, table(&t, "x-deduplication-header=b7"), h, &b, &ttl));
    assert_int_equal(ttl, -1);
    assert_memory_equal(&a, &b, sizeof a);
    assert_true(dedup_key_of(c, table(&t, "x-deduplication-header=S7"), h, &b, &ttl));
    assert_memory_not_equal(&a, &b, sizeof a);
    assert_true(dedup_key_of(c, table(&t, "x-deduplication-header=d7"), h, &b, &ttl));
    assert_memory_not_equal(&a, &b, sizeof a);
    /* longstr and bytes are both binaries */
    assert_true(dedup_key_of(c, table(&t, "x-deduplication-header=Sabc"), h, &a, &ttl));
    assert_true(dedup_key_of(c, table(&t, "x-deduplication-header=xabc"), h, &b, &ttl));
    assert_memory_equal(&a, &b, sizeof a);
    assert_true(dedup_key_of(c, table(&t, "x-deduplication-header=Sabd"), h, &b, &ttl));
    assert_memory_not_equal(&a, &b, sizeof a);
    /* no header, or an array or table: no key */
    assert_false(dedup_key_of(c, table(&t, "other=S1"), h, &a, &ttl));
    assert_false(dedup_key_of(c, table(&t, "x-deduplication-header=A[I1]"), h, &a, &ttl));
    assert_false(dedup_key_of(c, NO_ARGS, h, &a, &ttl));
    /* a header named by x-deduplication-header; a bad x-cache-ttl is ignored */
    assert_true(dedup_key_of(c, table(&t, "msg-id=S1 x-cache-ttl=Sx"), "msg-id", &a, &ttl));
    assert_int_equal(ttl, -1);
    assert_true(dedup_key_of(c, table(&t, "x-deduplication-header=V x-cache-ttl=I-5"), h, &a,
                             &ttl));
    assert_int_equal(ttl, -1);
    /* another cache has another secret */
    dedup_cache *d = dedup_cache_new(10, -1, false);
    assert_true(dedup_key_of(c, table(&t, "x-deduplication-header=Sabc"), h, &a, &ttl));
    assert_true(dedup_key_of(d, table(&t, "x-deduplication-header=Sabc"), h, &b, &ttl));
    assert_memory_not_equal(&a, &b, sizeof a);
    dedup_cache_free(c);
    dedup_cache_free(d);
}

static void expect_config_error(const char *args, bool queue, const char *text)
{
    tbuf t;
    dedup_config cfg;
    amqp_error err;
    assert_int_equal(dedup_config_parse(table(&t, args), queue, AMQP_EXCHANGE_DECLARE, &cfg, &err),
                     AMQP_ERROR);
    assert_int_equal(err.code, AMQP_PRECONDITION_FAILED);
    assert_string_equal(err.text, text);
}

static void test_config(void **state)
{
    (void)state;
    tbuf t;
    dedup_config cfg;
    amqp_error err;
    assert_int_equal(dedup_config_parse(NO_ARGS, false, 0, &cfg, &err), AMQP_OK);
    assert_false(cfg.on);
    assert_int_equal(
        dedup_config_parse(table(&t, "x-message-deduplication=t1"), false, 0, &cfg, &err),
        AMQP_OK);
    assert_true(cfg.on);
    assert_int_equal(cfg.size, DEDUP_DEFAULT_SIZE);
    assert_int_equal(cfg.ttl_ms, -1);
    assert_false(cfg.disk);
    assert_string_equal(cfg.header, DEDUP_HEADER);
    assert_int_equal(dedup_config_parse(table(&t, "x-message-deduplication=t1 x-cache-size=S1000 "
                                                  "x-cache-ttl=I60000 x-cache-persistence=Sdisk "
                                                  "x-deduplication-header=Smsg-id"),
                                        false, 0, &cfg, &err),
                     AMQP_OK);
    assert_int_equal(cfg.size, 1000);
    assert_int_equal(cfg.ttl_ms, 60000);
    assert_true(cfg.disk);
    assert_string_equal(cfg.header, "msg-id");
    /* off: nothing else is looked at */
    assert_int_equal(dedup_config_parse(table(&t, "x-message-deduplication=t0 x-cache-size=Sx"),
                                        false, 0, &cfg, &err),
                     AMQP_OK);
    assert_false(cfg.on);
    const char *size = "PRECONDITION_FAILED - Missing or invalid argument, 'x-cache-size' must be "
                       "an integer greater than 0";
    const char *ttl = "PRECONDITION_FAILED - Invalid argument, 'x-cache-ttl' must be an integer "
                      "greater than 0";
    expect_config_error("x-message-deduplication=t1 x-cache-size=I0", false, size);
    expect_config_error("x-message-deduplication=t1 x-cache-size=Sabc", false, size);
    expect_config_error("x-message-deduplication=t1 x-cache-size=d1.5", false, size);
    expect_config_error("x-message-deduplication=t1 x-cache-size=l16777217", false,
                        "PRECONDITION_FAILED - Invalid argument, 'x-cache-size' must be at most "
                        "16777216");
    expect_config_error("x-message-deduplication=t1 x-cache-ttl=I0", false, ttl);
    expect_config_error("x-message-deduplication=t1 x-cache-ttl=t1", false, ttl);
    expect_config_error("x-message-deduplication=t1 x-cache-persistence=Sram", false,
                        "PRECONDITION_FAILED - Invalid argument, 'x-cache-persistence' must be "
                        "either 'disk' or 'memory'");
    expect_config_error("x-message-deduplication=t1 x-deduplication-header=I1", false,
                        "PRECONDITION_FAILED - x-deduplication-header header not a string");
    expect_config_error("x-message-deduplication=S1", true,
                        "PRECONDITION_FAILED - x-message-deduplication header not a boolean");
    expect_config_error("x-message-deduplication=t1 x-cache-size=S10", true,
                        "PRECONDITION_FAILED - x-cache-size header not an integer");
    expect_config_error("x-message-deduplication=t1 x-cache-ttl=I-1", true,
                        "PRECONDITION_FAILED - x-cache-ttl header less than minimum value 0");
    assert_int_equal(dedup_config_parse(table(&t, "x-message-deduplication=t1"), true, 0, &cfg,
                                        &err),
                     AMQP_OK);
    assert_int_equal(cfg.size, DEDUP_MAX_SIZE);
}

static void test_save_and_load(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_dedup_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/cache", dir);
    dedup_cache *c = dedup_cache_new(100, 1000, false);
    tbuf t;
    dedup_key k;
    int64_t ttl;
    assert_true(dedup_key_of(c, table(&t, "x-deduplication-header=Sa"), DEDUP_HEADER, &k, &ttl));
    dedup_cache_seen(c, k, 50, -1);            /* expires at 1050: wall 1,001,000 */
    dedup_cache_seen(c, K(2), 50, 100000);     /* wall 1,100,000 */
    dedup_cache_seen(c, K(3), 50, INT64_MAX);  /* never */
    assert_true(dedup_cache_save(c, path, 50, 1000000));
    /* a later boot: loop clock 7, wall 1,050,000 -- the first has expired */
    dedup_cache *d = dedup_cache_new(100, 1000, false);
    assert_true(dedup_cache_load(d, path, 7, 1050000));
    assert_int_equal(dedup_cache_entries(d), 2);
    assert_true(dedup_cache_seen(d, K(2), 7 + 49999, -1));
    assert_false(dedup_cache_seen(d, K(2), 7 + 50000, -1));
    assert_true(dedup_cache_seen(d, K(3), 1ull << 40, -1));
    /* the key hash is the saved one: the same header is the same key */
    dedup_key k2;
    assert_true(dedup_key_of(d, table(&t, "x-deduplication-header=Sa"), DEDUP_HEADER, &k2, &ttl));
    assert_memory_equal(&k, &k2, sizeof k);
    /* a smaller cache keeps the newest */
    dedup_cache *e = dedup_cache_new(1, 1000, false);
    assert_true(dedup_cache_load(e, path, 7, 1050000));
    assert_int_equal(dedup_cache_entries(e), 1);
    assert_true(dedup_cache_seen(e, K(3), 8, -1));
    assert_false(dedup_cache_load(e, "/nonexistent/x", 7, 1050000));
    FILE *f = fopen(path, "wb");
    fputs("garbage", f);
    fclose(f);
    assert_false(dedup_cache_load(e, path, 7, 1050000));
    assert_int_equal(dedup_cache_entries(e), 1);
    unlink(path);
    rmdir(dir);
    dedup_cache_free(c);
    dedup_cache_free(d);
    dedup_cache_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seen_and_ttl),
        cmocka_unit_test(test_per_message_ttl),
        cmocka_unit_test(test_eviction_oldest_first),
        cmocka_unit_test(test_size_cap_and_growth),
        cmocka_unit_test(test_sweep),
        cmocka_unit_test(test_queue_claim_release),
        cmocka_unit_test(test_random_against_model),
        cmocka_unit_test(test_keys_from_headers),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_save_and_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
