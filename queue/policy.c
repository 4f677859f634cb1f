/* Policies and operator policies, as RabbitMQ 3.10's rabbit_policy applies
 * them.
 *
 * Data: each vhost has a policy_set, a list of policies of both kinds, each
 * with its pattern compiled once (pattern/, PCRE2 with JIT; RabbitMQ's re is
 * PCRE too) and its definition kept as an encoded field table. The keys a definition may hold
 * are one table, `keys` below: how a value is checked, whether operator
 * policies may set it and how two values merge, how it combines with a
 * queue's own x-argument, which queue types a policy holding it skips, and
 * whether Warren acts on it.
 *
 * Which policy applies (rabbit_policy:match): among the policies whose
 * apply-to covers the object, whose definition suits its queue type
 * (is_policy_applicable: a classic queue skips a policy holding, say,
 * dead-letter-strategy) and whose pattern matches the name, the highest priority
 * wins. RabbitMQ breaks a tie by the order its parameter table returns
 * them in -- an ETS hash order, so no rule a user can rely on; Warren
 * takes the policy whose name sorts first (byte-wise), so the choice is
 * the same on every start. Operator policies are matched the same way on
 * their own.
 *
 * Merging (rabbit_policy:merge_operator_definitions): every key of either
 * definition; a key in both (only the numeric limits an operator policy
 * may set) takes the lower value. Merged definitions are cached per pair
 * of policies and the cache is dropped on every change.
 *
 * Effect: a queue gets "effective arguments" -- its own arguments with
 * each policy value combined in as rabbit_amqqueue_process's
 * process_args_policy does (the lower of the two for expires, message-ttl,
 * max-length, max-length-bytes; the argument's for dead-letter-exchange,
 * dead-letter-routing-key, overflow, delayed-retry-*) -- from which it
 * reads the queue_args its hot path uses. An exchange gets the policy's alternate-exchange,
 * which its own argument overrides (rabbit_policy:get_arg).
 *
 * Matching is bounded: each match runs under pattern/'s step, depth and
 * heap limits, so a catastrophic pattern ("(a+)+$" against 'a'*230 + 'b')
 * costs ~0.25 ms per name, not minutes. A name on which a pattern reaches
 * a limit counts as not matching; the first time for each policy is
 * logged, naming the policy and the name.
 *
 * Re-evaluation after a change (put, delete) is a job of the vhost's set,
 * run a slice per loop turn (a zero timer, so the loop serves its sockets
 * between slices): the first slice snapshots the names of the vhost's
 * exchanges and queues, then each slice looks names up again (one deleted
 * meanwhile is skipped) and applies what matches now, for ~1 ms. Every
 * change bumps the set's generation; a job that finds the generation moved
 * takes a new snapshot and goes round it once more from the same index, so
 * a change made mid-way reaches every object, and a stream of changes
 * cannot keep the objects at the end of the list from ever being visited.
 * Objects declared meanwhile are matched at declare against the current
 * set, and being visited again changes nothing for them.
 *
 * Invariant: when no job is pending (policy_reapplying false), every queue
 * and exchange of the vhost holds what its current best match gives; the
 * management API reads that (policy_of_queue, policy_of_exchange), never
 * matching again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "../pattern/pattern.h"
#include "queue.h"
#include "policy_internal.h"

/* ---- the keys ------------------------------------------------------------ */

typedef enum value_kind {
    V_NON_NEG, V_POSITIVE, V_STRING, V_CHOICE, V_QUEUE_VERSION, V_MAX_AGE, V_SEGMENT_SIZE,
    V_HA /* checked together, by check_ha */
} value_kind;

enum { ON_QUEUE = 1, ON_EXCHANGE = 2 };                 /* where Warren acts on it */
enum { NOT_CLASSIC = 1, NOT_QUORUM = 2, NOT_STREAM = 4 }; /* unsupported_policies */
typedef enum arg_rule { ARG_NONE, ARG_MIN, ARG_WINS } arg_rule;

typedef struct policy_key {
    const char *key;
    const char *what;    /* "~p is not a valid <what>" (NULL: checked elsewhere) */
    value_kind kind;
    const char *choices; /* V_CHOICE: the accepted strings, '|'-separated */
    bool operator_min;   /* operator policies may set it; the lower value wins */
    arg_rule arg;        /* against the queue's x-<key> argument */
    uint8_t unsupported; /* queue types a policy holding it does not apply to */
    uint8_t acts_on;     /* 0: accepted and ignored */
} policy_key;

/* RabbitMQ 3.10's rabbit_policies, in key order (validation goes in it);
 * then the mirroring keys of rabbit_mirror_queue_misc and
 * rabbit_queue_location_validator, which a single node accepts and
 * ignores as Warren does -- a definitions file exported from a mirrored
 * cluster loads. */
static const policy_key keys[] = {
    {"alternate-exchange", "alternate exchange name", V_STRING, NULL, false, ARG_NONE, 0,
     ON_EXCHANGE},
    /* RabbitMQ 3.12's; the lower of it and x-consumer-timeout applies */
    {"consumer-timeout", "consumer timeout", V_NON_NEG, NULL, false, ARG_MIN, NOT_STREAM,
     ON_QUEUE},
    {"dead-letter-exchange", "dead letter exchange name", V_STRING, NULL, false, ARG_WINS,
     NOT_STREAM, ON_QUEUE},
    {"dead-letter-routing-key", "dead letter routing key", V_STRING, NULL, false, ARG_WINS,
     NOT_STREAM, ON_QUEUE},
    {"dead-letter-strategy", "dead letter strategy", V_CHOICE, "at-most-once|at-least-once",
     false, ARG_WINS, NOT_CLASSIC | NOT_STREAM, ON_QUEUE},
    /* RabbitMQ 4.3's delayed retry (on quorum queues; Warren's on every
     * type), LavinMQ's multiplier; the queue's own argument wins */
    {"delayed-retry-max", "delayed retry max", V_NON_NEG, NULL, false, ARG_WINS, NOT_STREAM,
     ON_QUEUE},
    {"delayed-retry-min", "delayed retry min", V_NON_NEG, NULL, false, ARG_WINS, NOT_STREAM,
     ON_QUEUE},
    {"delayed-retry-multiplier", "delayed retry multiplier", V_POSITIVE, NULL, false, ARG_WINS,
     NOT_STREAM, ON_QUEUE},
    {"delayed-retry-type", "delayed retry type", V_CHOICE, "disabled|all|failed|returned", false,
     ARG_WINS, NOT_STREAM, ON_QUEUE},
    /* RabbitMQ 3.10 skips classic queues here; Warren limits them too */
    {"delivery-limit", "delivery limit", V_NON_NEG, NULL, true, ARG_MIN, NOT_STREAM, ON_QUEUE},
    {"expires", "queue expiry", V_POSITIVE, NULL, true, ARG_MIN, NOT_STREAM, ON_QUEUE},
    /* rabbitmq_federation's: which upstreams federate the object (one of
     * the three; federation/ reads them from the applied definition) */
    {"federation-upstream", "federation upstream name", V_STRING, NULL, false, ARG_NONE, 0,
     ON_QUEUE | ON_EXCHANGE},
    {"federation-upstream-pattern", "federation upstream pattern name", V_STRING, NULL, false,
     ARG_NONE, 0, ON_QUEUE | ON_EXCHANGE},
    {"federation-upstream-set", "federation upstream set name", V_STRING, NULL, false, ARG_NONE,
     0, ON_QUEUE | ON_EXCHANGE},
    {"ha-mode", NULL, V_HA, NULL, false, ARG_NONE, NOT_QUORUM | NOT_STREAM, 0},
    {"ha-params", NULL, V_HA, NULL, false, ARG_NONE, NOT_QUORUM | NOT_STREAM, 0},
    {"ha-promote-on-failure", NULL, V_HA, NULL, false, ARG_NONE, NOT_QUORUM | NOT_STREAM, 0},
    {"ha-promote-on-shutdown", NULL, V_HA, NULL, false, ARG_NONE, NOT_QUORUM | NOT_STREAM, 0},
    {"ha-sync-batch-size", NULL, V_HA, NULL, false, ARG_NONE, NOT_QUORUM | NOT_STREAM, 0},
    {"ha-sync-mode", NULL, V_HA, NULL, false, ARG_NONE, NOT_QUORUM | NOT_STREAM, 0},
    {"initial-cluster-size", "cluster size", V_NON_NEG, NULL, false, ARG_NONE,
     NOT_CLASSIC | NOT_QUORUM, 0},
    /* streams: the queue's own x-max-age and segment size win, as
     * rabbit_stream_queue's args_policy_lookup has it */
    {"max-age", "max age", V_MAX_AGE, NULL, false, ARG_WINS, NOT_CLASSIC | NOT_QUORUM, ON_QUEUE},
    {"max-in-memory-bytes", "maximum memory in bytes", V_NON_NEG, NULL, true, ARG_NONE,
     NOT_STREAM, 0},
    {"max-in-memory-length", "maximum memory in bytes", V_NON_NEG, NULL, true, ARG_NONE,
     NOT_STREAM, 0},
    {"max-length", "maximum length", V_NON_NEG, NULL, true, ARG_MIN, NOT_STREAM, ON_QUEUE},
    {"max-length-bytes", "maximum length in bytes", V_NON_NEG, NULL, true, ARG_MIN, 0,
     ON_QUEUE},
    {"message-ttl", "message TTL", V_NON_NEG, NULL, true, ARG_MIN, NOT_STREAM, ON_QUEUE},
    {"overflow", "overflow value", V_CHOICE, "drop-head|reject-publish|reject-publish-dlx",
     false, ARG_WINS, NOT_STREAM, ON_QUEUE},
    {"queue-leader-locator", "queue leader locator value", V_CHOICE,
     "client-local|balanced|random|least-leaders", false, ARG_NONE, NOT_CLASSIC, 0},
    {"queue-master-locator", NULL, V_CHOICE,
     "client-local|min-masters|random", false, ARG_NONE, NOT_QUORUM | NOT_STREAM, 0},
    {"queue-mode", "queue-mode value", V_CHOICE, "default|lazy", false, ARG_NONE,
     NOT_QUORUM | NOT_STREAM, 0},
    {"queue-version", "queue-version value", V_QUEUE_VERSION, NULL, false, ARG_NONE, 0, 0},
    {"stream-max-segment-size-bytes", "segment size", V_SEGMENT_SIZE, NULL, false, ARG_WINS,
     NOT_CLASSIC | NOT_QUORUM, ON_QUEUE},
};
#define NKEYS (sizeof keys / sizeof keys[0])

static const policy_key *key_of(amqp_bytes name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (amqp_bytes_equal_cstr(name, keys[i].key))
            return &keys[i];
    return NULL;
}

/* ---- the set ------------------------------------------------------------- */

enum { TO_QUEUES = 1, TO_EXCHANGES = 2, TO_CLASSIC = 4, TO_QUORUM = 8, TO_STREAMS = 16 };

static const struct {
    const char *name;
    uint8_t covers;
} apply_names[] = {
    {"all", TO_QUEUES | TO_EXCHANGES}, {"queues", TO_QUEUES},
    {"exchanges", TO_EXCHANGES},       {"classic_queues", TO_CLASSIC},
    {"quorum_queues", TO_QUORUM},      {"streams", TO_STREAMS},
};

typedef struct policy {
    struct policy *next;
    char *name, *pattern, *apply_to;
    int32_t priority;
    bool operator_policy;
    bool limit_logged; /* a match reached the limits; logged, not again */
    uint8_t covers;
    pattern_re *re;
    uint32_t def_len;
    uint8_t def[]; /* the definition */
} policy;

/* A merged definition for one (policy, operator policy) pair. */
typedef struct merged {
    struct merged *next;
    const policy *p, *op;
    uint32_t len;
    uint8_t def[];
} merged;

typedef struct reapply reapply;

struct policy_set {
    policy *all;
    merged *cache;
    pattern_scratch *scratch; /* every match of this vhost's policies */
    uint64_t generation;      /* bumped by every change */
    reapply *job;             /* the re-evaluation under way, or NULL */
};

static void job_free(reapply *r);

policy_set *policy_set_new(void)
{
    policy_set *ps = calloc(1, sizeof *ps);
    if (ps && !(ps->scratch = pattern_scratch_new())) {
        free(ps);
        return NULL;
    }
    return ps;
}

static void drop_cache(policy_set *ps)
{
    while (ps->cache) {
        merged *m = ps->cache;
        ps->cache = m->next;
        free(m);
    }
}

static void policy_free(policy *p)
{
    pattern_free(p->re);
    free(p->name);
    free(p->pattern);
    free(p->apply_to);
    free(p);
}

void policy_set_free(policy_set *ps)
{
    if (!ps)
        return;
    job_free(ps->job);
    drop_cache(ps);
    while (ps->all) {
        policy *p = ps->all;
        ps->all = p->next;
        policy_free(p);
    }
    pattern_scratch_free(ps->scratch);
    free(ps);
}

static policy **find_link(policy_set *ps, const char *name, bool op)
{
    policy **pp = &ps->all;
    while (*pp && !((*pp)->operator_policy == op && strcmp((*pp)->name, name) == 0))
        pp = &(*pp)->next;
    return pp;
}

static uint8_t covers_of(const char *apply_to)
{
    for (size_t i = 0; i < sizeof apply_names / sizeof apply_names[0]; i++)
        if (strcmp(apply_to ? apply_to : "all", apply_names[i].name) == 0)
            return apply_names[i].covers;
    return 0;
}

/* ---- regular expressions -------------------------------------------------- */

/* Erlang's re is PCRE 8.x, so RabbitMQ reports compile errors in PCRE1's
 * words; PCRE2 numbers and words them differently. The usual ones: */
static const struct {
    int code;
    const char *text;
    int offset_delta;
} pcre1_words[] = {
    {101, "\\ at end of pattern", 0},
    {102, "\\c at end of pattern", 0},
    {103, "unrecognized character follows \\", 0},
    {104, "numbers out of order in {} quantifier", 0},
    {105, "number too big in {} quantifier", 0},
    {106, "missing terminating ] for character class", 0},
    {108, "range out of order in character class", 0},
    {109, "nothing to repeat", 0},
    {114, "missing )", 0},
    {115, "reference to non-existent subpattern", 0},
    {122, "unmatched parentheses", 0},
    {125, "lookbehind assertion is not fixed length", 0},
    {130, "unknown POSIX class name", 0},
    {142, "syntax error in subpattern name (missing terminator)", 0},
    {143, "two named subpatterns have the same name", -1},
    {144, "group name must start with a non-digit", 0},
    {150, "invalid range in character class", 0},
    {160, "(*VERB) not recognized or malformed", 0},
    {169, "\\k is not followed by a braced, angle-bracketed, or quoted name", -1},
};

/* Compiles `source` as re:run(Name, Pattern) does (bytes, no options),
 * with pattern_compile's `flags`. NULL with RabbitMQ's reason in err when
 * it is not a regular expression (or is longer than PATTERN_MAX_LEN). */
static pattern_re *compile(const char *source, unsigned flags, char *err, size_t errlen)
{
    pattern_error e;
    pattern_re *re = pattern_compile(source, strlen(source), flags, &e);
    if (re || !err)
        return re;
    char text[sizeof e.text];
    long at = (long)e.offset;
    snprintf(text, sizeof text, "%s", e.text);
    for (size_t i = 0; i < sizeof pcre1_words / sizeof pcre1_words[0]; i++)
        if (pcre1_words[i].code == e.code) {
            snprintf(text, sizeof text, "%s", pcre1_words[i].text);
            at += pcre1_words[i].offset_delta;
        }
    static const char lead[] = "pattern should be regular expression but is invalid: ";
    pt_arena a = {0};
    pt *kids[2] = {pt_string(&a, text), pt_int(&a, at)};
    size_t n = (size_t)snprintf(err, errlen, "%s", lead);
    if (n < errlen)
        pt_print(pt_tuple(&a, kids, 2), sizeof lead - 1, err + n, errlen - n);
    pt_arena_free(&a);
    return NULL;
}

/* Does `p`'s pattern match `name`? A match that reaches the limits does
 * not: said once per policy. */
static bool name_matches(vhost *v, policy *p, amqp_bytes name)
{
    pattern_result r = pattern_match(p->re, vhost_policies(v)->scratch, name.ptr, name.len);
    if (r == PATTERN_LIMIT && !p->limit_logged) {
        p->limit_logged = true;
        log_msg(LOG_WARNING,
                "%spolicy '%s' in vhost '%s': pattern '%s' reached the match limit on the "
                "name '%.*s', which counts as not matching; this is said once per policy",
                p->operator_policy ? "operator " : "", p->name, vhost_name(v), p->pattern,
                (int)name.len, (const char *)name.ptr);
    }
    return r == PATTERN_MATCH;
}

/* ---- validation ---------------------------------------------------------- */

typedef struct text {
    char *buf;
    size_t cap, len;
} text;

static void add(text *t, const char *s)
{
    size_t n = strlen(s);
    if (t->len + 1 >= t->cap)
        return;
    if (n > t->cap - t->len - 1)
        n = t->cap - t->len - 1;
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = 0;
}

/* Appends `lead`, ~p of `term` after it, then `tail`. */
static void add_term(text *t, const char *lead, pt *term, const char *tail)
{
    add(t, lead);
    if (t->len + 1 < t->cap)
        t->len += pt_print(term, strlen(lead), t->buf + t->len, t->cap - t->len);
    add(t, tail);
}

static bool in_choices(amqp_bytes v, const char *choices)
{
    for (const char *c = choices; c && *c;) {
        size_t n = strcspn(c, "|");
        if (v.len == n && memcmp(v.ptr, c, n) == 0)
            return true;
        c += n + (c[n] == '|');
    }
    return false;
}

/* rabbit_amqqueue:check_max_age: digits, a positive number, one unit. */
static bool max_age_ok(amqp_bytes v)
{
    uint32_t i = 0;
    uint64_t n = 0;
    while (i < v.len && v.ptr[i] >= '0' && v.ptr[i] <= '9' && n < (1ull << 40))
        n = n * 10 + (v.ptr[i++] - '0');
    return n > 0 && v.len == i + 1 && strchr("YMDhms", v.ptr[i]) && v.ptr[i];
}

static bool value_ok(const policy_key *k, const amqp_field *f)
{
    int64_t n = 0;
    bool is_int = f->type != 't' && f->type != 'T' && amqp_field_int(f, &n);
    switch (k->kind) {
    case V_NON_NEG: return is_int && n >= 0;
    case V_POSITIVE: return is_int && n >= 1;
    case V_STRING: return f->type == 'S';
    case V_CHOICE: return f->type == 'S' && in_choices(f->v.bytes, k->choices);
    case V_QUEUE_VERSION: return is_int && (n == 1 || n == 2);
    case V_MAX_AGE: return f->type == 'S' && max_age_ok(f->v.bytes);
    case V_SEGMENT_SIZE: return is_int && n >= 0 && n <= 3000000000LL;
    case V_HA: return true;
    }
    return false;
}

/* Validated by rabbit_mirror_queue_misc and rabbit_queue_location_validator,
 * which come after rabbit_policies. */
static bool other_module(const policy_key *k)
{
    return k->kind == V_HA || strcmp(k->key, "queue-master-locator") == 0;
}

/* A string among `choices`, else "<lead>~p" added; none (absent) passes. */
static bool ha_choice(text *t, pt_arena *a, const amqp_field *f, const char *choices,
                      const char *lead)
{
    if (!f || (f->type == 'S' && in_choices(f->v.bytes, choices)))
        return true;
    add_term(t, lead, pt_json(a, f), "\n");
    return false;
}

/* rabbit_mirror_queue_mode_nodes:validate_policy. */
static bool check_ha_nodes(text *t, pt_arena *a, const amqp_field *p, pt *none)
{
    if (!p || p->type != 'A') {
        add_term(t, "ha-mode=\"nodes\" takes a list, ", p ? pt_json(a, p) : none, " given\n");
        return false;
    }
    amqp_iter it;
    amqp_field e;
    size_t n = 0, bad = 0;
    amqp_iter_init(&it, p->v.bytes);
    while (amqp_array_next(&it, &e))
        n++;
    pt **kids = calloc(n + 1, sizeof *kids);
    if (!kids) {
        add(t, "out of memory\n");
        return false;
    }
    amqp_iter_init(&it, p->v.bytes);
    while (amqp_array_next(&it, &e))
        if (e.type != 'S')
            kids[bad++] = pt_json(a, &e);
    if (n == 0)
        add(t, "ha-mode=\"nodes\" list must be non-empty\n");
    else if (bad)
        add_term(t, "ha-mode=\"nodes\" takes a list of strings, ", pt_list(a, kids, bad),
                 " was not a string\n");
    free(kids);
    return n > 0 && bad == 0;
}

/* The ha-mode's own check of ha-params (rabbit_mirror_queue_mode_*). */
static bool check_ha_params(text *t, pt_arena *a, amqp_bytes mode, const amqp_field *params)
{
    int64_t n;
    bool is_int = params && params->type != 't' && amqp_field_int(params, &n);
    pt *none = pt_atom(a, "none");
    if (amqp_bytes_equal_cstr(mode, "all") && params) {
        add(t, "ha-mode=\"all\" does not take parameters\n");
        return false;
    }
    if (amqp_bytes_equal_cstr(mode, "exactly") && !(is_int && n > 0)) {
        add_term(t, "ha-mode=\"exactly\" takes an integer, ", params ? pt_json(a, params) : none,
                 " given\n");
        return false;
    }
    return !amqp_bytes_equal_cstr(mode, "nodes") || check_ha_nodes(t, a, params, none);
}

/* rabbit_mirror_queue_misc:validate_policy: ha-mode first, then its
 * ha-params, then the sync and promotion settings. */
static bool check_ha(amqp_bytes def, text *t, pt_arena *a)
{
    static const char *const names[] = {"ha-mode", "ha-params", "ha-sync-mode",
                                        "ha-sync-batch-size", "ha-promote-on-shutdown",
                                        "ha-promote-on-failure"};
    amqp_field v[6], *f[6];
    for (int i = 0; i < 6; i++)
        f[i] = amqp_table_get(def, names[i], &v[i]) ? &v[i] : NULL;
    if (!f[0] && !f[1] && !f[2] && !f[3] && !f[4] && !f[5])
        return true;
    if (!f[0]) {
        add(t, "ha-mode must be specified to specify ha-params, ha-sync-mode or "
               "ha-promote-on-shutdown\n");
        return false;
    }
    if (!(f[0]->type == 'S' && in_choices(f[0]->v.bytes, "all|exactly|nodes"))) {
        add_term(t, "", pt_json(a, f[0]), " is not a valid ha-mode value\n");
        return false;
    }
    if (!check_ha_params(t, a, f[0]->v.bytes, f[1]))
        return false;
    int64_t n;
    bool is_int;
    if (!ha_choice(t, a, f[2], "automatic|manual",
                   "ha-sync-mode must be \"manual\" or \"automatic\", got "))
        return false;
    is_int = f[3] && f[3]->type != 't' && amqp_field_int(f[3], &n);
    if (f[3] && !(is_int && n > 0)) {
        add_term(t, "ha-sync-batch-size takes an integer greater than 0, ", pt_json(a, f[3]),
                 " given\n");
        return false;
    }
    return ha_choice(t, a, f[4], "always|when-synced",
                     "ha-promote-on-shutdown must be \"always\" or \"when-synced\", got ") &&
           ha_choice(t, a, f[5], "always|when-synced",
                     "ha-promote-on-failure must be \"always\" or \"when-synced\", got ");
}

/* The definition's keys, sorted as an Erlang map lists them; *n entries
 * (0 and NULL when empty or out of memory -- *oom says which). */
static amqp_bytes *sorted_keys(amqp_bytes def, size_t *n, bool *oom)
{
    amqp_iter it;
    amqp_bytes k;
    amqp_field v;
    *n = 0;
    *oom = false;
    amqp_iter_init(&it, def);
    while (amqp_table_next(&it, &k, &v))
        (*n)++;
    amqp_bytes *out = *n ? malloc(*n * sizeof *out) : NULL;
    if (*n && !out) {
        *oom = true;
        *n = 0;
        return NULL;
    }
    amqp_iter_init(&it, def);
    for (size_t i = 0; i < *n && amqp_table_next(&it, &k, &v); i++)
        out[i] = k;
    if (*n)
        qsort(out, *n, sizeof *out, pt_bytes_order);
    return out;
}

/* The value of the first entry keyed `k`. */
static void value_of(amqp_bytes def, amqp_bytes k, amqp_field *v)
{
    amqp_iter it;
    amqp_bytes key;
    amqp_iter_init(&it, def);
    while (amqp_table_next(&it, &key, v))
        if (amqp_bytes_equal(key, k))
            return;
}

/* "~p duplicate keys not allowed"; false when there are some. */
static bool no_duplicates(const amqp_bytes *ks, size_t n, pt **terms, text *t, pt_arena *a)
{
    size_t dups = 0;
    for (size_t i = 1; i < n; i++)
        if (amqp_bytes_equal(ks[i], ks[i - 1]) && (i < 2 || !amqp_bytes_equal(ks[i], ks[i - 2])))
            terms[dups++] = pt_binary(a, ks[i]);
    if (dups)
        add_term(t, "", pt_list(a, terms, dups), " duplicate keys not allowed\n");
    return dups == 0;
}

/* How many of rabbitmq_federation's three keys `def` holds. */
static int federation_keys(amqp_bytes def)
{
    amqp_field f;
    return amqp_table_get(def, "federation-upstream", &f) +
           amqp_table_get(def, "federation-upstream-pattern", &f) +
           amqp_table_get(def, "federation-upstream-set", &f);
}

/* rabbit_federation_parameters' check of federation-upstream-pattern: a
 * regular expression (its value's type was checked with the keys). */
static bool federation_pattern_ok(amqp_bytes def, text *t)
{
    amqp_field f;
    char source[PATTERN_MAX_LEN + 1], err[512];
    static const char lead[] = "pattern should be regular expression but is invalid: ";
    if (!amqp_table_get(def, "federation-upstream-pattern", &f) || f.type != 'S')
        return true;
    snprintf(source, sizeof source, "%.*s", (int)f.v.bytes.len, (const char *)f.v.bytes.ptr);
    pattern_re *re = compile(source, PATTERN_NO_JIT, err, sizeof err);
    if (re) {
        pattern_free(re);
        return true;
    }
    add(t, "could not compile pattern ");
    add(t, source);
    add(t, " to a regular expression. Error: ");
    add(t, strncmp(err, lead, sizeof lead - 1) == 0 ? err + sizeof lead - 1 : err);
    add(t, "\n");
    return false;
}

/* rabbit_policies:validate_policy (the first bad value in key order), then
 * the mirroring validators, then the keys nobody recognised. */
static void check_keys(amqp_bytes def, bool op, const amqp_bytes *ks, size_t n, pt **terms,
                       text *t, pt_arena *a)
{
    size_t unknown = 0;
    amqp_field v, qml;
    for (size_t i = 0; i < n; i++) {
        const policy_key *k = key_of(ks[i]);
        value_of(def, ks[i], &v);
        if (!k || (op && !k->operator_min)) {
            pt *kv[2] = {pt_binary(a, ks[i]), pt_json(a, &v)};
            terms[unknown++] = pt_tuple(a, kv, 2);
        } else if (!other_module(k) && !value_ok(k, &v)) {
            char tail[96];
            snprintf(tail, sizeof tail, " is not a valid %s\n", k->what);
            add_term(t, "", pt_json(a, &v), tail);
            return;
        }
    }
    if (!op && !check_ha(def, t, a))
        return;
    if (!op && amqp_table_get(def, "queue-master-locator", &qml) &&
        !value_ok(key_of(AMQP_CSTR("queue-master-locator")), &qml)) {
        add_term(t, "", pt_json(a, &qml), " invalid queue-master-locator value\n");
        return;
    }
    if (!op && federation_keys(def) > 1) {
        add(t, "cannot specify federation-upstream, federation-upstream-set or "
               "federation-upstream-pattern together\n");
        return;
    }
    if (!op && !federation_pattern_ok(def, t))
        return;
    if (unknown)
        add_term(t, "", pt_list(a, terms, unknown), " are not recognised policy settings\n");
}

/* rabbit_policy:validation/3. */
static void check_definition(amqp_bytes def, bool op, text *t)
{
    size_t n;
    bool oom;
    amqp_bytes *ks = sorted_keys(def, &n, &oom);
    pt_arena a = {0};
    pt **terms = n ? calloc(n, sizeof *terms) : NULL;
    if (oom || (n && !terms))
        add(t, "out of memory\n");
    else if (n == 0)
        add(t, "no policy provided\n");
    else if (no_duplicates(ks, n, terms, t, &a))
        check_keys(def, op, ks, n, terms, t, &a);
    if (a.oom)
        add(t, "out of memory\n");
    pt_arena_free(&a);
    free(terms);
    free(ks);
}

bool policy_validate(const policy_spec *p, char *err, size_t errlen)
{
    char line[1024];
    text t = {err, errlen, 0};
    if (errlen)
        err[0] = 0;
    add(&t, "Validation failed\n\n");
    size_t before = t.len;
    amqp_error bad;
    if (amqp_table_validate(p->definition, &bad) != AMQP_OK) {
        add(&t, "definition must be a dictionary\n"); /* not a field table at all */
        return false;
    }
    /* RabbitMQ lists every failed check, the last checked first */
    check_definition(p->definition, p->operator_policy, &t);
    if (!covers_of(p->apply_to)) {
        snprintf(line, sizeof line,
                 "apply-to '%s' unrecognised; should be one of: 'queues', 'classic_queues',  "
                 "'quorum_queues', 'streams', 'exchanges', or 'all'\n",
                 p->apply_to);
        add(&t, line);
    }
    /* checked only: interpreting is cheaper than JIT compiling */
    pattern_re *re = compile(p->pattern ? p->pattern : "", PATTERN_NO_JIT, line, sizeof line - 1);
    if (re)
        pattern_free(re);
    else
        add(&t, strcat(line, "\n"));
    if (t.len > before)
        return false;
    if (errlen)
        err[0] = 0;
    return true;
}

/* ---- matching and merging ------------------------------------------------ */

typedef enum kind { QUEUE_CLASSIC, QUEUE_QUORUM, QUEUE_STREAM, EXCHANGE } kind;

/* A queue's type by its x-queue-type argument (classic when absent). */
static kind kind_of_queue(const queue *q)
{
    amqp_field f;
    if (amqp_table_get(queue_arguments(q), "x-queue-type", &f) && f.type == 'S') {
        if (amqp_bytes_equal_cstr(f.v.bytes, "quorum"))
            return QUEUE_QUORUM;
        if (amqp_bytes_equal_cstr(f.v.bytes, "stream"))
            return QUEUE_STREAM;
    }
    return QUEUE_CLASSIC;
}

static bool covers(const policy *p, kind k)
{
    static const uint8_t need[] = {TO_CLASSIC, TO_QUORUM, TO_STREAMS, TO_EXCHANGES};
    return (p->covers & need[k]) || (k != EXCHANGE && (p->covers & TO_QUEUES));
}

/* rabbit_queue_type:is_policy_applicable. */
static bool applicable(const policy *p, kind k)
{
    static const uint8_t flag[] = {NOT_CLASSIC, NOT_QUORUM, NOT_STREAM, 0};
    amqp_iter it;
    amqp_bytes key;
    amqp_field v;
    amqp_iter_init(&it, (amqp_bytes){p->def, p->def_len});
    while (amqp_table_next(&it, &key, &v)) {
        const policy_key *pk = key_of(key);
        if (pk && (pk->unsupported & flag[k]))
            return false;
    }
    return true;
}

/* The policy (or operator policy) of `v` that applies to `name`, or NULL. */
static const policy *best(vhost *v, bool op, amqp_bytes name, kind k)
{
    const policy *win = NULL;
    for (policy *p = vhost_policies(v)->all; p; p = p->next) {
        if (p->operator_policy != op || !covers(p, k))
            continue;
        if (win && (p->priority < win->priority ||
                    (p->priority == win->priority && strcmp(p->name, win->name) > 0)))
            continue;
        if (applicable(p, k) && name_matches(v, p, name))
            win = p;
    }
    return win;
}

static bool field_less(const amqp_field *a, const amqp_field *b)
{
    int64_t x, y;
    return amqp_field_int(a, &x) && amqp_field_int(b, &y) && x < y;
}

/* Writes the union of both definitions, sorted by key, the lower value of
 * a key in both. */
static void write_merged(amqp_writer *w, amqp_bytes pd, amqp_bytes od)
{
    size_t np, no;
    bool oom1, oom2;
    amqp_bytes *pk = sorted_keys(pd, &np, &oom1), *ok = sorted_keys(od, &no, &oom2);
    size_t i = 0, j = 0;
    w->overflow |= oom1 || oom2;
    while (i < np || j < no) {
        int c = i == np ? 1 : j == no ? -1 : pt_bytes_order(&pk[i], &ok[j]);
        amqp_field a, b;
        amqp_bytes key = c <= 0 ? pk[i] : ok[j];
        if (c <= 0)
            value_of(pd, pk[i++], &a);
        if (c >= 0)
            value_of(od, ok[j++], &b);
        amqp_put_shortstr(w, key);
        amqp_put_field(w, c < 0 || (c == 0 && !field_less(&b, &a)) ? &a : &b);
    }
    free(pk);
    free(ok);
}

/* The merged definition of a pair, cached until the next change. */
static const merged *merge(policy_set *ps, const policy *p, const policy *op)
{
    for (merged *m = ps->cache; m; m = m->next)
        if (m->p == p && m->op == op)
            return m;
    uint32_t cap = (p ? p->def_len : 0) + (op ? op->def_len : 0);
    merged *m = malloc(sizeof *m + cap);
    if (!m)
        return NULL;
    amqp_writer w;
    amqp_writer_init(&w, m->def, cap);
    write_merged(&w, p ? (amqp_bytes){p->def, p->def_len} : (amqp_bytes){0},
                 op ? (amqp_bytes){op->def, op->def_len} : (amqp_bytes){0});
    if (w.overflow) {
        free(m);
        return NULL;
    }
    *m = (merged){.next = ps->cache, .p = p, .op = op, .len = (uint32_t)w.len};
    ps->cache = m;
    return m;
}

static bool applied_for(vhost *v, amqp_bytes name, kind k, policy_applied *out)
{
    /* no operator policy key acts on an exchange, and the API shows none */
    const policy *p = best(v, false, name, k), *op = k == EXCHANGE ? NULL : best(v, true, name, k);
    *out = (policy_applied){0};
    if (!p && !op)
        return true;
    const merged *m = merge(vhost_policies(v), p, op);
    if (!m)
        return false;
    *out = (policy_applied){.policy = p ? p->name : NULL,
                            .operator_policy = op ? op->name : NULL,
                            .definition = {m->def, m->len}};
    return true;
}

/* ---- applying ------------------------------------------------------------ */

static bool is_x_key(amqp_bytes k, const policy_key *pk)
{
    return k.len == strlen(pk->key) + 2 && memcmp(k.ptr, "x-", 2) == 0 &&
           memcmp(k.ptr + 2, pk->key, k.len - 2) == 0;
}

/* Does the definition set a key that is combined with `arg`? */
static const policy_key *combined_key(amqp_bytes arg, amqp_bytes def)
{
    amqp_field v;
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].arg != ARG_NONE && is_x_key(arg, &keys[i]) &&
            amqp_table_get(def, keys[i].key, &v))
            return &keys[i];
    return NULL;
}

/* The queue's arguments with the definition's values combined in. */
static void write_effective(amqp_writer *w, amqp_bytes args, amqp_bytes def)
{
    amqp_iter it;
    amqp_bytes k;
    amqp_field v, a;
    amqp_iter_init(&it, args);
    while (amqp_table_next(&it, &k, &v))
        if (!combined_key(k, def)) {
            amqp_put_shortstr(w, k);
            amqp_put_field(w, &v);
        }
    for (size_t i = 0; i < NKEYS; i++) {
        char xk[64];
        if (keys[i].arg == ARG_NONE || !amqp_table_get(def, keys[i].key, &v))
            continue;
        snprintf(xk, sizeof xk, "x-%s", keys[i].key);
        bool has_arg = amqp_table_get(args, xk, &a);
        amqp_put_key(w, xk);
        if (has_arg && (keys[i].arg == ARG_WINS || field_less(&a, &v)))
            amqp_put_field(w, &a);
        else
            amqp_put_field(w, &v);
    }
}

void policy_apply_queue(vhost *v, queue *q)
{
    policy_applied ap;
    if (!applied_for(v, queue_name(q), kind_of_queue(q), &ap))
        goto oom;
    amqp_bytes args = queue_arguments(q);
    if (!ap.policy && !ap.operator_policy) {
        if (!queue_set_policy(q, &ap, args))
            goto oom;
        return;
    }
    size_t cap = (size_t)args.len + ap.definition.len + 64 * NKEYS;
    uint8_t *buf = malloc(cap);
    amqp_writer w;
    amqp_writer_init(&w, buf, buf ? cap : 0);
    write_effective(&w, args, ap.definition);
    bool ok = buf && !w.overflow && queue_set_policy(q, &ap, (amqp_bytes){buf, (uint32_t)w.len});
    free(buf);
    if (ok)
        return;
oom:
    log_msg(LOG_ERROR, "queue '%.*s': out of memory applying its policy", (int)queue_name(q).len,
            (const char *)queue_name(q).ptr);
}

void policy_apply_exchange(vhost *v, route_exchange *ex)
{
    policy_applied ap;
    amqp_field ae = {0};
    bool ok = applied_for(v, route_exchange_name(ex), EXCHANGE, &ap);
    if (ok && !(amqp_table_get(ap.definition, "alternate-exchange", &ae) && ae.type == 'S'))
        ae.v.bytes = (amqp_bytes){0};
    if (!ok || !route_exchange_set_policy(ex, ap.policy, ae.v.bytes))
        log_msg(LOG_ERROR, "exchange '%.*s': out of memory applying its policy",
                (int)route_exchange_name(ex).len, (const char *)route_exchange_name(ex).ptr);
}

const char *policy_of_exchange(const route_exchange *ex) { return route_exchange_policy(ex); }

static void exchange_fn(void *arg, route_exchange *ex) { policy_apply_exchange(arg, ex); }

/* ---- re-evaluating after a change ------------------------------------------ */

enum { SLICE_US = 1000 }; /* work per loop turn */

/* The names of the vhost's exchanges and queues when the job last saw a
 * change: entries of a type byte ('e', 'q'), a 4-byte length and the
 * name. */
struct reapply {
    struct event *ev;
    uint64_t generation; /* of the set the snapshot is for; 0 before the first */
    uint8_t *names;
    size_t len, cap;
    size_t count;        /* entries */
    size_t at, index;    /* the next entry's offset and index */
    size_t left;         /* entries this lap has yet to visit */
    bool oom;
};

static void job_free(reapply *r)
{
    if (!r)
        return;
    if (r->ev)
        event_free(r->ev);
    free(r->names);
    free(r);
}

static void add_entry(reapply *r, uint8_t type, amqp_bytes name)
{
    size_t need = r->len + 5 + name.len;
    if (need > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < need)
            cap *= 2;
        uint8_t *grown = r->oom ? NULL : realloc(r->names, cap);
        if (!grown) {
            r->oom = true;
            return;
        }
        r->names = grown;
        r->cap = cap;
    }
    if (r->count == r->index) /* resume where the last snapshot was left */
        r->at = r->len;
    r->names[r->len] = type;
    memcpy(r->names + r->len + 1, &name.len, 4);
    if (name.len)
        memcpy(r->names + r->len + 5, name.ptr, name.len);
    r->len = need;
    r->count++;
}

static void snap_exchange(void *arg, route_exchange *ex)
{
    add_entry(arg, 'e', route_exchange_name(ex));
}
static void snap_queue(void *arg, queue *q) { add_entry(arg, 'q', queue_name(q)); }

/* A new snapshot for the set's current generation; false on OOM. */
static bool snapshot(vhost *v, reapply *r)
{
    r->len = r->count = r->at = 0;
    route_foreach_exchange(vhost_routes(v), snap_exchange, r);
    vhost_foreach_queue(v, snap_queue, r);
    if (r->index >= r->count)
        r->index = r->at = 0;
    r->left = r->count;
    r->generation = vhost_policies(v)->generation;
    return !r->oom;
}

/* Applies what matches now to the next entry's object, if it still exists. */
static void visit(vhost *v, reapply *r)
{
    uint8_t type = r->names[r->at];
    amqp_bytes name = {r->names + r->at + 5, 0};
    memcpy(&name.len, r->names + r->at + 1, 4);
    r->at += 5 + name.len;
    r->index++;
    if (r->at == r->len)
        r->at = r->index = 0;
    r->left--;
    if (type == 'q') {
        queue *q = vhost_queue_find(v, name);
        if (q)
            policy_apply_queue(v, q);
    } else {
        route_exchange *ex = route_exchange_find(vhost_routes(v), name);
        if (ex)
            policy_apply_exchange(v, ex);
    }
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* The next slice runs on a later loop turn, after the sockets are served:
 * a zero timer, not event_active, which would run it in this pass. */
static void schedule(reapply *r)
{
    static const struct timeval now = {0, 0};
    evtimer_add(r->ev, &now);
}

static void slice(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    vhost *v = arg;
    policy_set *ps = vhost_policies(v);
    reapply *r = ps->job;
    if (r->generation != ps->generation && !snapshot(v, r)) {
        log_msg(LOG_ERROR, "vhost '%s': out of memory re-applying policies; existing queues "
                "and exchanges keep what applied before", vhost_name(v));
        r->left = 0;
    }
    uint64_t began = now_us();
    while (r->left > 0 && now_us() - began < SLICE_US)
        visit(v, r);
    if (r->left > 0) {
        schedule(r);
        return;
    }
    ps->job = NULL;
    job_free(r);
}

/* After a change: the cache goes, and every queue and exchange is visited
 * by the job (started now, or already running and told by the generation). */
static void reapply_all(vhost *v)
{
    policy_set *ps = vhost_policies(v);
    drop_cache(ps);
    ps->generation++;
    if (ps->job)
        return;
    reapply *r = calloc(1, sizeof *r);
    if (r && !(r->ev = evtimer_new(loop_base(vhost_loop(v)), slice, v))) {
        free(r);
        r = NULL;
    }
    if (!r) {
        log_msg(LOG_ERROR, "vhost '%s': out of memory re-applying policies; existing queues "
                "and exchanges keep what applied before", vhost_name(v));
        return;
    }
    ps->job = r;
    schedule(r);
}

bool policy_reapplying(vhost *v) { return vhost_policies(v)->job != NULL; }

/* ---- changes --------------------------------------------------------------- */

static char *dup_or_null(const char *s, bool *oom)
{
    char *d = s ? strdup(s) : NULL;
    *oom |= s && !d;
    return d;
}

/* A new policy from a validated spec; NULL on out-of-memory. */
static policy *policy_new(const policy_spec *s)
{
    policy *p = calloc(1, sizeof *p + s->definition.len);
    bool oom = !p;
    if (oom)
        return NULL;
    p->name = dup_or_null(s->name ? s->name : "", &oom);
    p->pattern = dup_or_null(s->pattern ? s->pattern : "", &oom);
    p->apply_to = dup_or_null(s->apply_to ? s->apply_to : "all", &oom);
    p->priority = s->priority;
    p->operator_policy = s->operator_policy;
    p->covers = covers_of(s->apply_to);
    p->re = oom ? NULL : compile(p->pattern, 0, NULL, 0);
    p->def_len = s->definition.len;
    if (s->definition.len)
        memcpy(p->def, s->definition.ptr, s->definition.len);
    if (oom || !p->re) {
        policy_free(p);
        return NULL;
    }
    return p;
}

/* Replaces the policy of that name (or adds it) in the list. */
static void link_policy(policy_set *ps, policy *p)
{
    policy **pp = find_link(ps, p->name, p->operator_policy);
    if (*pp) {
        p->next = (*pp)->next;
        policy_free(*pp);
    } else {
        p->next = NULL;
    }
    *pp = p;
    drop_cache(ps); /* it may point at the policy just freed */
}

static meta *store_of(vhost *v) { return vhost_closing(v) ? NULL : server_meta(vhost_server(v)); }

static meta_policy row_of(vhost *v, const policy *p)
{
    return (meta_policy){.vhost = vhost_name(v),
                         .name = p->name,
                         .pattern = p->pattern,
                         .apply_to = p->apply_to,
                         .priority = p->priority,
                         .definition = {p->def, p->def_len},
                         .operator_policy = p->operator_policy};
}

bool policy_put(vhost *v, const policy_spec *s, char *err, size_t errlen)
{
    if (!policy_validate(s, err, errlen))
        return false;
    policy *p = policy_new(s);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    meta *m = store_of(v);
    meta_policy row = row_of(v, p);
    if (m && !meta_put_policy(m, &row)) {
        policy_free(p);
        snprintf(err, errlen, "could not store the policy");
        return false;
    }
    link_policy(vhost_policies(v), p);
    log_msg(LOG_INFO, "Successfully set %spolicy '%s' matching %s names in virtual host '%s' "
            "using pattern '%s'", p->operator_policy ? "operator " : "", p->name, p->apply_to,
            vhost_name(v), p->pattern);
    reapply_all(v);
    return true;
}

bool policy_delete(vhost *v, const char *name, bool operator_policy)
{
    policy_set *ps = vhost_policies(v);
    policy **pp = find_link(ps, name, operator_policy), *p = *pp;
    meta *m = store_of(v);
    if (!p || (m && !meta_delete_policy(m, vhost_name(v), name, operator_policy)))
        return false;
    *pp = p->next;
    policy_free(p);
    reapply_all(v);
    return true;
}

bool policy_restore(vhost *v, const meta_policy *row)
{
    char err[512];
    policy_spec s = {.name = row->name,
                     .pattern = row->pattern,
                     .apply_to = row->apply_to,
                     .priority = row->priority,
                     .definition = row->definition,
                     .operator_policy = row->operator_policy};
    policy *p = policy_validate(&s, err, sizeof err) ? policy_new(&s) : NULL;
    if (!p) {
        log_msg(LOG_ERROR, "policy '%s' in vhost '%s' not restored: %s", row->name,
                vhost_name(v), err[0] ? err : "out of memory");
        return false;
    }
    link_policy(vhost_policies(v), p);
    /* queues and exchanges restored later get it when created; the
     * built-in exchanges exist already */
    route_foreach_exchange(vhost_routes(v), exchange_fn, v);
    return true;
}

/* ---- listing --------------------------------------------------------------- */

static policy_spec spec_of(const policy *p)
{
    return (policy_spec){.name = p->name,
                         .pattern = p->pattern,
                         .apply_to = p->apply_to,
                         .priority = p->priority,
                         .definition = {p->def, p->def_len},
                         .operator_policy = p->operator_policy};
}

static int listing_order(const void *x, const void *y)
{
    const policy *a = *(const policy *const *)x, *b = *(const policy *const *)y;
    if (a->priority != b->priority)
        return a->priority < b->priority ? -1 : 1;
    return strcmp(a->name, b->name);
}

void policy_foreach(vhost *v, bool operator_policy,
                    void (*fn)(void *arg, const policy_spec *p), void *arg)
{
    size_t n = 0, i = 0;
    for (policy *p = vhost_policies(v)->all; p; p = p->next)
        n += p->operator_policy == operator_policy;
    policy **list = n ? malloc(n * sizeof *list) : NULL;
    if (n && !list) {
        log_msg(LOG_ERROR, "out of memory listing policies");
        return;
    }
    for (policy *p = vhost_policies(v)->all; p; p = p->next)
        if (p->operator_policy == operator_policy)
            list[i++] = p;
    if (n) /* qsort(NULL, 0, ...) is undefined */
        qsort(list, n, sizeof *list, listing_order);
    for (i = 0; i < n; i++) {
        policy_spec s = spec_of(list[i]);
        fn(arg, &s);
    }
    free(list);
}

bool policy_get(vhost *v, const char *name, bool operator_policy, policy_spec *out)
{
    policy *p = *find_link(vhost_policies(v), name, operator_policy);
    if (p)
        *out = spec_of(p);
    return p != NULL;
}
