/* Policies: validation texts (checked against RabbitMQ 3.10.8's management
 * API), which policy applies (priority, apply-to, pattern, ties, queue
 * types), merging with operator policies and queue arguments, and the
 * re-evaluation of live queues and exchanges when policies change -- run
 * in slices on the server's loop, which the tests turn -- with a real
 * server but no network; catastrophic patterns (issue 17). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <event2/event.h>

#include "test_broker_start.h"
#include "../../pattern/pattern.h"
#include "test_broker_logcap.h"
#include "test_broker_msgs.h"

static server *srv;
static vhost *vh;
static char dir[64];

static server *start(void)
{
    config c;
    config_defaults(&c);
    strcpy(c.listen_host, "127.0.0.1");
    c.listen_port = 0;
    strcpy(c.data_dir, dir);
    return test_broker_new(&c);
}

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/warren-unit-XXXXXX");
    assert_non_null(mkdtemp(dir));
    log_set_level(LOG_NONE);
    srv = start();
    vh = srv ? server_vhost(srv, AMQP_CSTR("/")) : NULL;
    return vh ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[96];
    test_broker_free(srv);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

/* ---- building tables ------------------------------------------------------ */

/* A table from "key=value" items: value 123 is a long, "s:x" a string,
 * "b:true" a bool, "n:" null, "d:1.5" a double, "a:1,2" an array of longs,
 * "f:k=1" a table of one long. Returns content in a static buffer ring. */
static amqp_bytes table(const char *const *items, size_t n)
{
    static uint8_t bufs[64][4096];
    static int next;
    uint8_t *buf = bufs[next++ % 64];
    amqp_writer w;
    amqp_writer_init(&w, buf, 4096);
    size_t mark = amqp_table_begin(&w);
    for (size_t i = 0; i < n; i++) {
        char key[256];
        const char *eq = strchr(items[i], '=');
        snprintf(key, sizeof key, "%.*s", (int)(eq - items[i]), items[i]);
        const char *v = eq + 1;
        if (strncmp(v, "s:", 2) == 0) {
            amqp_put_field_str(&w, key, AMQP_CSTR(v + 2));
        } else if (strncmp(v, "b:", 2) == 0) {
            amqp_put_field_bool(&w, key, strcmp(v + 2, "true") == 0);
        } else if (strncmp(v, "n:", 2) == 0) {
            amqp_put_key(&w, key);
            amqp_put_u8(&w, 'V');
        } else if (strncmp(v, "d:", 2) == 0) {
            amqp_field f = {.type = 'd', .v.d = strtod(v + 2, NULL)};
            amqp_put_key(&w, key);
            amqp_put_field(&w, &f);
        } else if (strncmp(v, "a:", 2) == 0) {
            amqp_put_key(&w, key);
            size_t arr = amqp_put_field_begin(&w, 'A');
            for (const char *p = v + 2; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
                amqp_put_u8(&w, 'l');
                amqp_put_u64(&w, (uint64_t)strtoll(p, NULL, 10));
            }
            amqp_table_end(&w, arr);
        } else if (strncmp(v, "f:", 2) == 0) {
            amqp_put_key(&w, key);
            size_t sub = amqp_put_field_begin(&w, 'F');
            char k2[64];
            const char *eq2 = strchr(v + 2, '=');
            snprintf(k2, sizeof k2, "%.*s", (int)(eq2 - v - 2), v + 2);
            amqp_put_field_long(&w, k2, strtoll(eq2 + 1, NULL, 10));
            amqp_table_end(&w, sub);
        } else {
            amqp_put_field_long(&w, key, strtoll(v, NULL, 10));
        }
    }
    amqp_table_end(&w, mark);
    assert_false(w.overflow);
    return (amqp_bytes){buf + 4, (uint32_t)w.len - 4};
}
#define TABLE(...) table((const char *const[]){__VA_ARGS__}, \
                         sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

/* Turns the loop until the re-evaluation after the last change is done;
 * the number of turns it took. */
static int settle(void)
{
    int turns = 0;
    while (policy_reapplying(vh) && turns < 1000000) {
        event_base_loop(loop_base(admin_loop(srv)), EVLOOP_ONCE | EVLOOP_NONBLOCK);
        turns++;
    }
    assert_false(policy_reapplying(vh));
    return turns;
}

static void put_only(const char *name, const char *pattern, const char *apply_to, int prio,
                     amqp_bytes def, bool op)
{
    char err[512];
    policy_spec s = {name, pattern, apply_to, prio, def, op};
    if (!policy_put(vh, &s, err, sizeof err))
        fail_msg("policy_put %s: %s", name, err);
}

static void put(const char *name, const char *pattern, const char *apply_to, int prio,
                amqp_bytes def, bool op)
{
    put_only(name, pattern, apply_to, prio, def, op);
    settle();
}

static void del(const char *name, bool op)
{
    assert_true(policy_delete(vh, name, op));
    settle();
}

static queue *make_queue(const char *name, amqp_bytes args)
{
    queue_spec spec = {.name = AMQP_CSTR(name), .arguments = args};
    queue *q = queue_new(vh, &spec);
    assert_non_null(q);
    vhost_queue_add(vh, q);
    return q;
}

static void publish_n(queue *q, int n)
{
    for (int i = 0; i < n; i++) {
        char body[16];
        snprintf(body, sizeof body, "m%d", i);
        msg *m = util_msg(body);
        queue_publish(q, m, -1);
        msg_unref(m);
    }
}

/* The body of the head message, consumed. */
static void expect_head(queue *q, const char *body)
{
    queue_item it;
    assert_true(queue_get(q, &it));
    assert_int_equal(msg_body_size(it.m), strlen(body));
    assert_memory_equal(msg_body(it.m), body, strlen(body));
    msg_unref(it.m);
}

/* ---- validation ------------------------------------------------------------ */

static const char *validate(const char *pattern, const char *apply_to, amqp_bytes def, bool op)
{
    static char err[1024];
    policy_spec s = {"p", pattern, apply_to, 0, def, op};
    return policy_validate(&s, err, sizeof err) ? NULL : err;
}

#define VF "Validation failed\n\n"

static void test_validation_texts(void **state)
{
    (void)state;
    static const struct {
        const char *pattern, *apply_to;
        amqp_bytes def;
        bool op;
        const char *want; /* NULL: valid */
    } *c, cases[] = {
        {"^a", NULL, {0}, false, VF "no policy provided\n"},
        {"^a", "all", {(const uint8_t *)"", 0}, false, VF "no policy provided\n"},
        {"^a", "all", {(const uint8_t *)"\003abcl", 5}, false,
         VF "definition must be a dictionary\n"},
    };
    for (c = cases; c < cases + sizeof cases / sizeof cases[0]; c++)
        assert_string_equal(validate(c->pattern, c->apply_to, c->def, c->op), c->want);

    struct {
        amqp_bytes def;
        bool op;
        const char *want;
    } defs[] = {
        {TABLE("max-priority=5"), false,
         VF "[{<<\"max-priority\">>,5}] are not recognised policy settings\n"},
        {TABLE("foo=1"), false, VF "[{<<\"foo\">>,1}] are not recognised policy settings\n"},
        {TABLE("message-ttl=-1"), false, VF "-1 is not a valid message TTL\n"},
        {TABLE("message-ttl=s:abc"), false, VF "<<\"abc\">> is not a valid message TTL\n"},
        {TABLE("message-ttl=d:1.5"), false, VF "1.5 is not a valid message TTL\n"},
        {TABLE("expires=0"), false, VF "0 is not a valid queue expiry\n"},
        {TABLE("overflow=s:bogus"), false, VF "<<\"bogus\">> is not a valid overflow value\n"},
        {TABLE("queue-mode=s:fast"), false, VF "<<\"fast\">> is not a valid queue-mode value\n"},
        {TABLE("dead-letter-exchange=5"), false,
         VF "5 is not a valid dead letter exchange name\n"},
        {TABLE("max-length=b:true"), false, VF "true is not a valid maximum length\n"},
        {TABLE("max-length=n:"), false, VF "null is not a valid maximum length\n"},
        {TABLE("alternate-exchange=a:1,2"), false,
         VF "[1,2] is not a valid alternate exchange name\n"},
        {TABLE("message-ttl=a:9,10"), false, VF "\"\\t\\n\" is not a valid message TTL\n"},
        {TABLE("alternate-exchange=f:a=1"), false,
         VF "#{<<\"a\">> => 1} is not a valid alternate exchange name\n"},
        /* a bad value is reported before unknown keys, keys in sorted order */
        {TABLE("message-ttl=5", "max-length=-1"), false,
         VF "-1 is not a valid maximum length\n"},
        {TABLE("message-ttl=5", "foo=1", "bar=s:x"), false,
         VF "[{<<\"bar\">>,<<\"x\">>},{<<\"foo\">>,1}] are not recognised policy settings\n"},
        {TABLE("message-ttl=5", "max-length=s:x", "foo=2"), false,
         VF "<<\"x\">> is not a valid maximum length\n"},
        /* operator policies take only the numeric limits */
        {TABLE("overflow=s:drop-head", "message-ttl=1"), true,
         VF "[{<<\"overflow\">>,<<\"drop-head\">>}] are not recognised policy settings\n"},
        {TABLE("alternate-exchange=s:x"), true,
         VF "[{<<\"alternate-exchange\">>,<<\"x\">>}] are not recognised policy settings\n"},
        {TABLE("max-length=s:5"), true, VF "<<\"5\">> is not a valid maximum length\n"},
        {TABLE("message-ttl=1", "delivery-limit=3", "max-in-memory-length=3"), true, NULL},
        /* mirroring: accepted (and ignored) with RabbitMQ's checks */
        {TABLE("ha-mode=s:all", "ha-sync-mode=s:automatic", "queue-master-locator=s:min-masters"),
         false, NULL},
        {TABLE("ha-mode=s:exactly", "ha-params=2", "ha-sync-batch-size=5",
               "ha-promote-on-shutdown=s:always", "ha-promote-on-failure=s:when-synced"),
         false, NULL},
        {TABLE("ha-mode=s:all"), true,
         VF "[{<<\"ha-mode\">>,<<\"all\">>}] are not recognised policy settings\n"},
        {TABLE("ha-mode=s:bogus", "message-ttl=-1"), false, VF "-1 is not a valid message TTL\n"},
        {TABLE("ha-mode=s:bogus"), false, VF "<<\"bogus\">> is not a valid ha-mode value\n"},
        {TABLE("ha-params=2"), false,
         VF "ha-mode must be specified to specify ha-params, ha-sync-mode or "
            "ha-promote-on-shutdown\n"},
        {TABLE("ha-mode=s:exactly"), false,
         VF "ha-mode=\"exactly\" takes an integer, none given\n"},
        {TABLE("ha-mode=s:all", "ha-params=1"), false,
         VF "ha-mode=\"all\" does not take parameters\n"},
        {TABLE("ha-mode=s:exactly", "ha-params=s:a"), false,
         VF "ha-mode=\"exactly\" takes an integer, <<\"a\">> given\n"},
        {TABLE("ha-mode=s:nodes", "ha-params=a:"), false,
         VF "ha-mode=\"nodes\" list must be non-empty\n"},
        {TABLE("ha-mode=s:nodes", "ha-params=a:1"), false,
         VF "ha-mode=\"nodes\" takes a list of strings, [1] was not a string\n"},
        {TABLE("ha-mode=s:all", "ha-sync-mode=s:x"), false,
         VF "ha-sync-mode must be \"manual\" or \"automatic\", got <<\"x\">>\n"},
        {TABLE("ha-mode=s:all", "ha-sync-batch-size=0"), false,
         VF "ha-sync-batch-size takes an integer greater than 0, 0 given\n"},
        {TABLE("ha-mode=s:all", "ha-promote-on-shutdown=s:x"), false,
         VF "ha-promote-on-shutdown must be \"always\" or \"when-synced\", got <<\"x\">>\n"},
        {TABLE("ha-mode=s:all", "ha-promote-on-failure=s:x"), false,
         VF "ha-promote-on-failure must be \"always\" or \"when-synced\", got <<\"x\">>\n"},
        {TABLE("queue-master-locator=s:x"), false,
         VF "<<\"x\">> invalid queue-master-locator value\n"},
        {TABLE("ha-mode=s:all", "foo=1"), false,
         VF "[{<<\"foo\">>,1}] are not recognised policy settings\n"},
        {TABLE("max-length-bytes=1048576", "queue-mode=s:lazy", "dead-letter-routing-key=s:k",
               "alternate-exchange=s:ae", "dead-letter-exchange=s:dlx", "expires=1",
               "overflow=s:reject-publish-dlx", "message-ttl=0", "max-length=0"),
         false, NULL},
        {TABLE("max-age=s:7D", "queue-version=2", "dead-letter-strategy=s:at-least-once"),
         false, NULL},
        {TABLE("max-age=s:7W"), false, VF "<<\"7W\">> is not a valid max age\n"},
        {TABLE("queue-version=3"), false, VF "3 is not a valid queue-version value\n"},
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        const char *got = validate("^policy-x", NULL, defs[i].def, defs[i].op);
        if (defs[i].want)
            assert_string_equal(got, defs[i].want);
        else
            assert_null(got);
    }
}

/* ~p breaks what does not fit in 80 columns, as RabbitMQ printed these. */
static void test_validation_line_breaks(void **state)
{
    (void)state;
    char k66[80], k67[80], item[100];
    memset(k66, 'k', 66), k66[66] = 0;
    memset(k67, 'k', 67), k67[67] = 0;
    snprintf(item, sizeof item, "%s=1", k66);
    char want[400];
    snprintf(want, sizeof want, VF "[{<<\"%s\">>,1}] are not recognised policy settings\n", k66);
    assert_string_equal(validate("x", NULL, TABLE(item), false), want);
    snprintf(item, sizeof item, "%s=1", k67);
    snprintf(want, sizeof want, VF "[{<<\"%s\">>,\n  1}] are not recognised policy settings\n",
             k67);
    assert_string_equal(validate("x", NULL, TABLE(item), false), want);
    assert_string_equal(
        validate("x", NULL,
                 TABLE("aaaaaaaaaaaaaa=1", "bbbbbbbbbbbbbbbbbbbbbbbbbbbb=s:ccccccccccccccccccccc",
                       "dddd=a:1,2,3"),
                 false),
        VF "[{<<\"aaaaaaaaaaaaaa\">>,1},\n"
           " {<<\"bbbbbbbbbbbbbbbbbbbbbbbbbbbb\">>,<<\"ccccccccccccccccccccc\">>},\n"
           " {<<\"dddd\">>,[1,2,3]}] are not recognised policy settings\n");
    assert_string_equal(
        validate("x", NULL,
                 TABLE("message-ttl=a:1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,"
                       "23,24,25,26,27,28,29,30"),
                 false),
        VF "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,\n"
           " 29,30] is not a valid message TTL\n");
    assert_string_equal(
        validate("x", NULL,
                 TABLE("a1=1", "a2=1", "a3=1", "a4=1", "a5=1", "a6=1", "a7=1", "a8=1", "a9=1",
                       "b1=1", "b2=1", "b3=1"),
                 false),
        VF "[{<<\"a1\">>,1},\n {<<\"a2\">>,1},\n {<<\"a3\">>,1},\n {<<\"a4\">>,1},\n"
           " {<<\"a5\">>,1},\n {<<\"a6\">>,1},\n {<<\"a7\">>,1},\n {<<\"a8\">>,1},\n"
           " {<<\"a9\">>,1},\n {<<\"b1\">>,1},\n {<<\"b2\">>,1},\n {<<\"b3\">>,1}] are not "
           "recognised policy settings\n");
}

static void test_validation_patterns_and_apply_to(void **state)
{
    (void)state;
    amqp_bytes ok = TABLE("message-ttl=5");
    static const struct {
        const char *pattern, *want;
    } pats[] = {
        {"(", "{\"missing )\",1}"},
        {")", "{\"unmatched parentheses\",\n                                                      0}"},
        {"*", "{\"nothing to repeat\",0}"},
        {"ab(", "{\"missing )\",3}"},
        {"a{2,1}", "{\"numbers out of order in {} quantifier\",\n"
                   "                                                      5}"},
        {"[z-a]", "{\"range out of order in character class\",\n"
                  "                                                      3}"},
        {"\\k", "{\"\\\\k is not followed by a braced, angle-bracketed, or quoted name\",\n"
                "                                                      1}"},
        {"x\\", "{\"\\\\ at end of pattern\",\n                                                      2}"},
    };
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
        char want[512];
        snprintf(want, sizeof want,
                 VF "pattern should be regular expression but is invalid: %s\n", pats[i].want);
        assert_string_equal(validate(pats[i].pattern, NULL, ok, false), want);
    }
    /* Warren's cap (RabbitMQ has none), said in RabbitMQ's form */
    static char big[PATTERN_MAX_LEN + 2];
    memset(big, 'a', PATTERN_MAX_LEN + 1);
    assert_string_equal(validate(big, NULL, ok, false),
                        VF "pattern should be regular expression but is invalid: "
                           "{\"pattern longer than 4096 bytes\",\n"
                           "                                                      4096}\n");
    big[PATTERN_MAX_LEN] = 0;
    assert_null(validate(big, NULL, ok, false));
    assert_null(validate("^a", "classic_queues", ok, false));
    assert_null(validate("^a", "exchanges", ok, false));
    /* every failed check, the definition's first */
    assert_string_equal(validate("(", "bogus", TABLE("message-ttl=-1"), false),
                        VF "-1 is not a valid message TTL\n"
                           "apply-to 'bogus' unrecognised; should be one of: 'queues', "
                           "'classic_queues',  'quorum_queues', 'streams', 'exchanges', or "
                           "'all'\n"
                           "pattern should be regular expression but is invalid: "
                           "{\"missing )\",1}\n");
    /* nothing was set by validating or by a refused put */
    char err[256];
    policy_spec bad = {"refused", "(", NULL, 0, ok, false};
    assert_false(policy_put(vh, &bad, err, sizeof err));
    policy_spec got;
    assert_false(policy_get(vh, "refused", false, &got));
}

/* ---- selection --------------------------------------------------------------- */

static const char *policy_name_of(queue *q)
{
    policy_applied a;
    policy_of_queue(q, &a);
    return a.policy ? a.policy : "none";
}

typedef struct order_check {
    const char *const *want;
    int i;
} order_check;

static void check_order(void *arg, const policy_spec *p)
{
    order_check *it = arg;
    assert_string_equal(p->name, it->want[it->i]);
    it->i++;
}

static void test_selection(void **state)
{
    (void)state;
    queue *q = make_queue("sel.orders", (amqp_bytes){0});
    assert_string_equal(policy_name_of(q), "none");
    put("low", "^sel\\.", "queues", 1, TABLE("max-length=100"), false);
    assert_string_equal(policy_name_of(q), "low");
    put("high", "orders$", "all", 5, TABLE("max-length=50"), false);
    assert_string_equal(policy_name_of(q), "high");
    assert_int_equal(queue_get_args(q)->max_length, 50);
    /* apply-to: a higher priority for exchanges only does not apply */
    put("xonly", ".*", "exchanges", 9, TABLE("alternate-exchange=s:ae"), false);
    assert_string_equal(policy_name_of(q), "high");
    put("classic", "^sel", "classic_queues", 6, TABLE("max-length=40"), false);
    assert_string_equal(policy_name_of(q), "classic");
    put("quorum", "^sel", "quorum_queues", 7, TABLE("max-length=30"), false);
    assert_string_equal(policy_name_of(q), "classic");
    /* a policy holding a key classic queues do not support skips them */
    put("dl", "^sel", "queues", 8, TABLE("max-length=20", "dead-letter-strategy=s:at-least-once"),
        false);
    assert_string_equal(policy_name_of(q), "classic");
    /* ties: the name that sorts first */
    put("b-tie", "^sel", "queues", 6, TABLE("max-length=10"), false);
    assert_string_equal(policy_name_of(q), "b-tie");
    put("a-tie", "^sel", "queues", 6, TABLE("max-length=11"), false);
    assert_string_equal(policy_name_of(q), "a-tie");
    assert_int_equal(queue_get_args(q)->max_length, 11);
    /* a replaced pattern that no longer matches */
    put("a-tie", "^nomatch", "queues", 6, TABLE("max-length=11"), false);
    assert_string_equal(policy_name_of(q), "b-tie");
    /* a new queue gets its policy at declare */
    queue *q2 = make_queue("sel.other", (amqp_bytes){0});
    assert_string_equal(policy_name_of(q2), "b-tie");
    queue *q3 = make_queue("unrelated", (amqp_bytes){0});
    assert_string_equal(policy_name_of(q3), "none");
    /* listing: ascending priority, then name */
    const char *order[] = {"low", "high", "a-tie", "b-tie", "classic", "quorum", "dl", "xonly"};
    order_check it = {order, 0};
    policy_foreach(vh, false, check_order, &it);
    assert_int_equal(it.i, 8);
    for (size_t i = 0; i < 8; i++)
        del(order[i], false);
    assert_false(policy_delete(vh, "low", false));
    assert_string_equal(policy_name_of(q), "none");
    assert_int_equal(queue_get_args(q)->max_length, -1);
    queue_delete(q);
    queue_delete(q2);
    queue_delete(q3);
}

/* ---- merging --------------------------------------------------------------- */

static void expect_definition(amqp_bytes got, amqp_bytes want)
{
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.ptr, want.ptr, want.len);
}

static void test_operator_merge(void **state)
{
    (void)state;
    queue *q = make_queue("merge.q", (amqp_bytes){0});
    put("p", "^merge", "queues", 0,
        TABLE("max-length=10", "dead-letter-exchange=s:dlx", "expires=100000"), false);
    put("op", "^merge", "queues", 0,
        TABLE("max-length=5", "message-ttl=1000", "expires=900000"), true);
    policy_applied a;
    policy_of_queue(q, &a);
    assert_string_equal(a.policy, "p");
    assert_string_equal(a.operator_policy, "op");
    /* as RabbitMQ showed it: keys sorted, the lower of two limits */
    expect_definition(a.definition, TABLE("dead-letter-exchange=s:dlx", "expires=100000",
                                          "max-length=5", "message-ttl=1000"));
    const queue_args *l = queue_get_args(q);
    assert_int_equal(l->max_length, 5);
    assert_int_equal(l->message_ttl, 1000);
    assert_int_equal(l->expires, 100000);
    assert_true(l->has_dlx);
    assert_true(amqp_bytes_equal_cstr(l->dlx, "dlx"));
    /* the operator policy alone */
    del("p", false);
    policy_of_queue(q, &a);
    assert_null(a.policy);
    expect_definition(a.definition,
                      TABLE("expires=900000", "max-length=5", "message-ttl=1000"));
    assert_false(queue_get_args(q)->has_dlx);
    del("op", true);
    policy_of_queue(q, &a);
    assert_null(a.operator_policy);
    assert_int_equal(a.definition.len, 0);
    queue_delete(q);
}

static void test_arguments_against_policy(void **state)
{
    (void)state;
    queue *q = make_queue("args.q", TABLE("x-max-length=3", "x-message-ttl=60000",
                                          "x-dead-letter-exchange=s:own", "x-overflow=s:reject-publish",
                                          "x-expires=5000"));
    put("p", "^args", "queues", 0,
        TABLE("max-length=10", "message-ttl=1000", "dead-letter-exchange=s:pol",
              "dead-letter-routing-key=s:rk", "overflow=s:drop-head", "expires=900000"),
        false);
    const queue_args *l = queue_get_args(q);
    assert_int_equal(l->max_length, 3);    /* the lower: the argument */
    assert_int_equal(l->message_ttl, 1000); /* the lower: the policy */
    assert_int_equal(l->expires, 5000);
    assert_true(amqp_bytes_equal_cstr(l->dlx, "own")); /* the argument wins */
    assert_true(l->has_dlrk && amqp_bytes_equal_cstr(l->dlrk, "rk")); /* no argument: policy */
    assert_int_equal(l->overflow, QUEUE_REJECT_PUBLISH);
    /* the queue's declared arguments are unchanged */
    amqp_field f;
    assert_false(amqp_table_get(queue_arguments(q), "x-dead-letter-routing-key", &f));
    del("p", false);
    assert_int_equal(queue_get_args(q)->message_ttl, 60000);
    assert_false(queue_get_args(q)->has_dlrk);
    queue_delete(q);
}

/* ---- re-evaluation of live queues ------------------------------------------ */

static void test_max_length_drops_excess_now(void **state)
{
    (void)state;
    queue *q = make_queue("len.q", (amqp_bytes){0});
    publish_n(q, 10);
    put("len", "^len\\.", "queues", 0, TABLE("max-length=3"), false);
    assert_int_equal(queue_ready_count(q), 3);
    expect_head(q, "m7"); /* drop-head: the oldest went */
    /* a removed policy restores the argument-only behaviour */
    del("len", false);
    publish_n(q, 5);
    assert_int_equal(queue_ready_count(q), 7);
    queue_delete(q);
}

static void test_max_length_dead_letters_excess(void **state)
{
    (void)state;
    route_table *rt = vhost_routes(vh);
    route_exchange_spec ex = {.name = AMQP_CSTR("pol.dlx"), .type = AMQP_CSTR("fanout")};
    amqp_error err;
    assert_int_equal(route_exchange_declare(rt, &ex, NULL, &err), AMQP_OK);
    queue *dlq = make_queue("pol.dlq", (amqp_bytes){0});
    assert_int_equal(route_bind(rt, AMQP_CSTR("pol.dlx"), (route_dest){.queue = dlq},
                                AMQP_CSTR(""), (amqp_bytes){0}, AMQP_QUEUE_BIND, &err),
                     AMQP_OK);
    queue *q = make_queue("dl.q", (amqp_bytes){0});
    publish_n(q, 6);
    put("dl", "^dl\\.", "queues", 0, TABLE("max-length=2", "dead-letter-exchange=s:pol.dlx"),
        false);
    assert_int_equal(queue_ready_count(q), 2);
    assert_int_equal(queue_ready_count(dlq), 4);
    expect_head(dlq, "m0");
    /* reject-publish keeps the excess, as RabbitMQ's maybe_drop_head does */
    queue *r = make_queue("rp.q", TABLE("x-overflow=s:reject-publish"));
    publish_n(r, 5);
    put("rp", "^rp\\.", "queues", 0, TABLE("max-length=2"), false);
    assert_int_equal(queue_ready_count(r), 5);
    msg *m = util_msg("refused");
    assert_false(queue_publish(r, m, -1));
    msg_unref(m);
    /* max-length applies under the old overflow (drop-head) before the new
     * reject-publish does, as on RabbitMQ */
    queue *of = make_queue("of.q", (amqp_bytes){0});
    publish_n(of, 5);
    put("of", "^of\\.", "queues", 0, TABLE("max-length=2", "overflow=s:reject-publish"), false);
    assert_int_equal(queue_ready_count(of), 2);
    assert_int_equal(queue_get_args(of)->overflow, QUEUE_REJECT_PUBLISH);
    del("of", false);
    assert_int_equal(queue_get_args(of)->overflow, QUEUE_DROP_HEAD);
    queue_delete(of);
    del("dl", false);
    del("rp", false);
    queue_delete(q);
    queue_delete(r);
    queue_delete(dlq);
    assert_int_equal(route_exchange_delete(rt, AMQP_CSTR("pol.dlx"), false, &err), AMQP_OK);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_message_ttl_expires_older(void **state)
{
    (void)state;
    queue *q = make_queue("ttl.q", (amqp_bytes){0});
    publish_n(q, 3);
    sleep_ms(60);
    loop_touch_clock(admin_loop(srv));
    publish_n(q, 1); /* "m0" again, but young */
    /* beyond RabbitMQ, which keeps the expiry each message got when queued */
    put("ttl", "^ttl\\.", "queues", 0, TABLE("message-ttl=40"), false);
    assert_int_equal(queue_ready_count(q), 1);
    assert_int_equal(queue_get_args(q)->message_ttl, 40);
    del("ttl", false);
    assert_int_equal(queue_get_args(q)->message_ttl, -1);
    queue_delete(q);
}

static void test_expires_and_queue_mode(void **state)
{
    (void)state;
    queue *q = make_queue("exp.q", (amqp_bytes){0});
    put("exp", "^exp\\.", "queues", 0, TABLE("expires=60000", "queue-mode=s:lazy"), false);
    assert_int_equal(queue_get_args(q)->expires, 60000);
    del("exp", false);
    assert_int_equal(queue_get_args(q)->expires, -1);
    queue_delete(q);
}

/* ---- exchanges ------------------------------------------------------------- */

static void test_alternate_exchange(void **state)
{
    (void)state;
    route_table *rt = vhost_routes(vh);
    amqp_error err;
    route_exchange_spec ae = {.name = AMQP_CSTR("pol.ae"), .type = AMQP_CSTR("fanout")};
    route_exchange_spec main_ex = {.name = AMQP_CSTR("pol.main"), .type = AMQP_CSTR("direct")};
    route_exchange_spec own = {.name = AMQP_CSTR("pol.own"),
                               .type = AMQP_CSTR("direct"),
                               .arguments = TABLE("alternate-exchange=s:pol.ae2")};
    route_exchange *x, *o;
    assert_int_equal(route_exchange_declare(rt, &ae, NULL, &err), AMQP_OK);
    assert_int_equal(route_exchange_declare(rt, &main_ex, &x, &err), AMQP_OK);
    assert_int_equal(route_exchange_declare(rt, &own, &o, &err), AMQP_OK);
    queue *unrouted = make_queue("pol.unrouted", (amqp_bytes){0});
    assert_int_equal(route_bind(rt, AMQP_CSTR("pol.ae"), (route_dest){.queue = unrouted},
                                AMQP_CSTR(""), (amqp_bytes){0}, AMQP_QUEUE_BIND, &err),
                     AMQP_OK);
    void **found;
    assert_int_equal(route_message(rt, x, AMQP_CSTR("nobody"), (amqp_bytes){0}, &found), 0);
    put("ae", "^pol\\.", "exchanges", 0, TABLE("alternate-exchange=s:pol.ae"), false);
    assert_int_equal(route_message(rt, x, AMQP_CSTR("nobody"), (amqp_bytes){0}, &found), 1);
    assert_ptr_equal(found[0], unrouted);
    /* the exchange's own argument wins (pol.ae2 does not exist) */
    assert_int_equal(route_message(rt, o, AMQP_CSTR("nobody"), (amqp_bytes){0}, &found), 0);
    assert_string_equal(policy_of_exchange(x), "ae");
    assert_string_equal(policy_of_exchange(o), "ae"); /* it applies; the argument wins */
    /* a new exchange gets it at declare */
    route_exchange_spec later = {.name = AMQP_CSTR("pol.later"), .type = AMQP_CSTR("topic")};
    route_exchange *l;
    assert_int_equal(route_exchange_declare(rt, &later, &l, &err), AMQP_OK);
    assert_int_equal(route_message(rt, l, AMQP_CSTR("x"), (amqp_bytes){0}, &found), 1);
    /* removed: unroutable again */
    del("ae", false);
    assert_int_equal(route_message(rt, x, AMQP_CSTR("nobody"), (amqp_bytes){0}, &found), 0);
    assert_null(policy_of_exchange(x));
    queue_delete(unrouted);
    const char *names[] = {"pol.ae", "pol.main", "pol.own", "pol.later"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(route_exchange_delete(rt, AMQP_CSTR(names[i]), false, &err), AMQP_OK);
}

/* What the API shows is what was applied, read, not matched again: until
 * the re-evaluation reaches an object it keeps showing what it had. */
static void test_api_reads_what_was_applied(void **state)
{
    (void)state;
    route_table *rt = vhost_routes(vh);
    amqp_error err;
    route_exchange_spec spec = {.name = AMQP_CSTR("st.x"), .type = AMQP_CSTR("direct")};
    route_exchange *x;
    assert_int_equal(route_exchange_declare(rt, &spec, &x, &err), AMQP_OK);
    queue *q = make_queue("st.q", (amqp_bytes){0});
    put("st", "^st\\.", "all", 0, TABLE("max-length=5"), false);
    assert_string_equal(policy_of_exchange(x), "st");
    assert_string_equal(policy_name_of(q), "st");
    assert_true(policy_delete(vh, "st", false));
    assert_true(policy_reapplying(vh));
    assert_string_equal(policy_of_exchange(x), "st");
    assert_string_equal(policy_name_of(q), "st");
    settle();
    assert_null(policy_of_exchange(x));
    assert_string_equal(policy_name_of(q), "none");
    queue_delete(q);
    assert_int_equal(route_exchange_delete(rt, AMQP_CSTR("st.x"), false, &err), AMQP_OK);
}

/* ---- catastrophic patterns (issue 17) ---------------------------------------- */

enum { NLONG = 300 };

/* The queues: 'a' * 230 + "b%05d". */
static void make_long_queues(queue **qs)
{
    for (int i = 0; i < NLONG; i++) {
        char name[256];
        memset(name, 'a', 230);
        snprintf(name + 230, sizeof name - 230, "b%05d", i);
        qs[i] = make_queue(name, (amqp_bytes){0});
    }
}

static void delete_all(queue **qs)
{
    for (int i = 0; i < NLONG; i++)
        if (qs[i])
            queue_delete(qs[i]);
}

static void put_catastrophic(queue **qs)
{
    static const char *const pats[] = {"(a+)+$", "(a|aa)+$", "(.*a){12}$"};
    for (size_t i = 0; i < 3; i++) {
        put_only("p1", pats[i], "queues", 1, TABLE("max-length=100"), false);
        /* the put returned with the work still to do, which then took
         * more than one loop turn: ~0.1-0.25 ms a name, 1 ms a turn */
        assert_true(policy_reapplying(vh));
        assert_true(settle() > 1);
        for (int j = 0; j < NLONG; j++) /* the limit: not a match */
            assert_string_equal(policy_name_of(qs[j]), "none");
    }
}

/* The reproduction: each pattern stops at the match limit on every
 * name, which counts as no match, is logged once per policy (not per
 * queue), and is worked through in slices; patterns that match still
 * apply where they should. */
static void test_catastrophic_patterns(void **state)
{
    (void)state;
    static queue *qs[NLONG];
    make_long_queues(qs);
    logcap log;
    logcap_begin(&log, LOG_WARNING);
    put_catastrophic(qs);
    assert_int_equal(logcap_end(&log, "reached the match limit"), 3);
    put("p1", "b0000[0-4]$", "queues", 1, TABLE("max-length=100"), false);
    put("p2", "^a+b", "queues", 0, TABLE("max-length=200"), false);
    for (int i = 0; i < NLONG; i++) {
        assert_string_equal(policy_name_of(qs[i]), i < 5 ? "p1" : "p2");
        assert_int_equal(queue_get_args(qs[i])->max_length, i < 5 ? 100 : 200);
    }
    del("p1", false);
    del("p2", false);
    delete_all(qs);
}

static bool all_show(queue **qs, const char *policy)
{
    for (int i = 0; i < NLONG; i++)
        if (qs[i] && strcmp(policy_name_of(qs[i]), policy) != 0)
            return false;
    return true;
}

/* A change made while the last one is still being applied: the newest
 * wins everywhere, objects declared meanwhile get it at once, objects
 * deleted meanwhile are skipped; and a stream of changes, one per loop
 * turn, still reaches every object (each change resumes where the last
 * left off, instead of starting the list again). */
static void test_a_change_supersedes_the_one_under_way(void **state)
{
    (void)state;
    static queue *qs[NLONG];
    make_long_queues(qs);
    /* every visit costs a limit hit, so a pass takes many turns */
    put("slow", "(a+)+$", "queues", 9, TABLE("max-length=1"), false);
    put_only("first", "^a+b", "queues", 1, TABLE("max-length=10"), false);
    int turns = 0;
    while (turns < 100000 && !strcmp(policy_name_of(qs[NLONG - 1]), "none")) {
        event_base_loop(loop_base(admin_loop(srv)), EVLOOP_ONCE | EVLOOP_NONBLOCK);
        turns++;
        if (turns == 2) { /* partly through, superseded */
            put_only("second", "^a+b", "queues", 2, TABLE("max-length=20"), false);
            queue_delete(qs[NLONG / 2]);
            qs[NLONG / 2] = NULL;
            queue *late = make_queue("aab-late", (amqp_bytes){0});
            assert_string_equal(policy_name_of(late), "second");
            queue_delete(late);
        }
    }
    settle();
    assert_true(all_show(qs, "second"));
    assert_int_equal(queue_get_args(qs[0])->max_length, 20);
    /* a change every turn: every queue still gets "third" */
    for (turns = 0; turns < 5000 && !all_show(qs, "third"); turns++) {
        put_only("third", "^a+b", "queues", 3, TABLE("max-length=30", turns % 2 ? "expires=99000"
                                                                                : "expires=98000"),
                 false);
        event_base_loop(loop_base(admin_loop(srv)), EVLOOP_ONCE | EVLOOP_NONBLOCK);
    }
    assert_true(all_show(qs, "third"));
    settle();
    del("third", false);
    del("second", false);
    assert_true(policy_delete(vh, "first", false)); /* two changes, one job */
    del("slow", false);
    assert_true(all_show(qs, "none"));
    delete_all(qs);
}

/* A vhost deleted while its policies are being re-applied takes the work
 * with it: the loop turns on without touching what was freed (ASan builds
 * would say so). */
static void test_vhost_deleted_mid_way(void **state)
{
    (void)state;
    char err[256];
    meta_vhost mv = {.name = "mid"};
    assert_true(admin_put_vhost(srv, &mv, err, sizeof err));
    vhost *mid = server_vhost(srv, AMQP_CSTR("mid"));
    for (int i = 0; i < NLONG; i++) {
        char name[256];
        memset(name, 'a', 230);
        snprintf(name + 230, sizeof name - 230, "b%05d", i);
        queue_spec spec = {.name = AMQP_CSTR(name)};
        queue *q = queue_new(mid, &spec);
        assert_non_null(q);
        vhost_queue_add(mid, q);
    }
    policy_spec slow = {"slow", "(a+)+$", "queues", 0, TABLE("max-length=1"), false};
    assert_true(policy_put(mid, &slow, err, sizeof err));
    event_base_loop(loop_base(admin_loop(srv)), EVLOOP_ONCE | EVLOOP_NONBLOCK);
    assert_true(policy_reapplying(mid));
    assert_true(admin_delete_vhost(srv, "mid", err, sizeof err));
    for (int i = 0; i < 10; i++)
        event_base_loop(loop_base(admin_loop(srv)), EVLOOP_ONCE | EVLOOP_NONBLOCK);
    assert_null(server_vhost(srv, AMQP_CSTR("mid")));
}

/* ---- persistence ----------------------------------------------------------- */

static void test_survives_restart(void **state)
{
    (void)state;
    queue_spec spec = {.name = AMQP_CSTR("dur.q"), .durable = true};
    queue *q = queue_new(vh, &spec);
    assert_non_null(q);
    vhost_queue_add(vh, q);
    durable_queue_declared(vh, q);
    put("dur", "^dur\\.", "queues", 3, TABLE("max-length=7"), false);
    put("dur-op", "^dur\\.", "queues", 1, TABLE("max-length=4"), true);
    put_only("pending", "^nothing", "queues", 0, TABLE("max-length=9"), false);
    assert_true(policy_reapplying(vh)); /* freed with the server, unfinished */
    test_broker_free(srv);
    srv = start();
    assert_non_null(srv);
    vh = server_vhost(srv, AMQP_CSTR("/"));
    q = vhost_queue_find(vh, AMQP_CSTR("dur.q"));
    assert_non_null(q);
    policy_applied a;
    policy_of_queue(q, &a);
    assert_string_equal(a.policy, "dur");
    assert_string_equal(a.operator_policy, "dur-op");
    assert_int_equal(queue_get_args(q)->max_length, 4);
    policy_spec got;
    assert_true(policy_get(vh, "dur", false, &got));
    assert_int_equal(got.priority, 3);
    assert_string_equal(got.apply_to, "queues");
    del("dur", false);
    del("dur-op", true);
    del("pending", false);
    test_broker_free(srv);
    srv = start();
    vh = server_vhost(srv, AMQP_CSTR("/"));
    assert_false(policy_get(vh, "dur", false, &got));
    q = vhost_queue_find(vh, AMQP_CSTR("dur.q"));
    assert_string_equal(policy_name_of(q), "none");
    queue_delete(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validation_texts),
        cmocka_unit_test(test_validation_line_breaks),
        cmocka_unit_test(test_validation_patterns_and_apply_to),
        cmocka_unit_test(test_selection),
        cmocka_unit_test(test_operator_merge),
        cmocka_unit_test(test_arguments_against_policy),
        cmocka_unit_test(test_max_length_drops_excess_now),
        cmocka_unit_test(test_max_length_dead_letters_excess),
        cmocka_unit_test(test_message_ttl_expires_older),
        cmocka_unit_test(test_expires_and_queue_mode),
        cmocka_unit_test(test_alternate_exchange),
        cmocka_unit_test(test_api_reads_what_was_applied),
        cmocka_unit_test(test_catastrophic_patterns),
        cmocka_unit_test(test_a_change_supersedes_the_one_under_way),
        cmocka_unit_test(test_vhost_deleted_mid_way),
        cmocka_unit_test(test_survives_restart),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
