/* Identity and access: RabbitMQ's password hashes (hashes exported from a
 * real RabbitMQ 3.10 verify, wrong and blank passwords never do), tags,
 * permission matching (a table of regexes x names, "" and amq.default
 * included), topic permissions with {username}/{vhost}, bad regexes
 * refused with the reason, and logins through a real server: first boot,
 * loopback_users (which integration tests, bound to 127.0.0.1, cannot
 * show), users without a password, and restarts that keep the store's
 * users whatever default_pass says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_broker_start.h"
#include "../../pattern/pattern.h"
#include "test_broker_logcap.h"

/* ---- password hashes ---------------------------------------------------- */

/* From GET /api/users on RabbitMQ 3.10.8 after rabbitmqctl add_user (and
 * the guest user of tests/reference/rabbitmq-3.10/api_users.json). */
static const struct {
    const char *password, *hash;
} rabbitmq_sha256[] = {
    {"guest", "bw/ZenBjZLWyOIVbJ664X1fHMYvmgBAyXqjSfR8tudJZfedy"},
    {"s3cret!", "KAXrzLT0iDqL/0RtexjDyib8eDnH/Ts1Vc3LHvOndR/tf6GN"},
    {"p\xc3\xa4ssw\xc3\xb6rd with spaces", "fjrwgbn/2JxrY4oZM+rMYjY7RNogCcvBCX50QU8go0JNI6K9"},
    {"x", "eGkAEBOxhTXPLxbkIHEJrklVrXpIRngU8f8mecIdIvy4C39g"},
};

/* rabbit_password_hashing_sha512 and _md5 hashes (salt ++ H(salt ++
 * password), base64), computed with Python's hashlib. */
static const struct {
    const char *algorithm, *password, *hash;
} other_algorithms[] = {
    {ACCESS_HASH_SHA512, "guest",
     "mgH+MyEITbOuglSDeH+gDgmbSpwEzykVmK67QQBTxTwhuDBslRp4aYfxjmy8HWgnA5i0pqmV54hKDHn0GTprarIOArs="},
    {ACCESS_HASH_SHA512, "s3cret!",
     "AAAAAHKxTAwCmtnMRcAlAXRHbFmC1lEf61tS5Enpx7L9378P5ig143c3v1jhkqy3zNkumNptUjYNeBHnVisLDTcjQaI="},
    {ACCESS_HASH_MD5, "guest", "mgH+M0sykUXOuvQ+y1GDgFYwfOc="},
    {ACCESS_HASH_MD5, "s3cret!", "AAAAAO3HwqZJBXGR4Jccnyt2Z+k="},
};

static void test_rabbitmq_hashes_verify(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rabbitmq_sha256 / sizeof rabbitmq_sha256[0]; i++) {
        const char *h = rabbitmq_sha256[i].hash;
        assert_true(access_check_password(ACCESS_HASH_SHA256, h,
                                          AMQP_CSTR(rabbitmq_sha256[i].password)));
        assert_false(access_check_password(ACCESS_HASH_SHA256, h, AMQP_CSTR("wrong")));
        assert_false(access_check_password(ACCESS_HASH_SHA256, h, AMQP_CSTR("")));
        /* the same hash read as another algorithm's is malformed */
        assert_false(access_check_password(ACCESS_HASH_SHA512, h,
                                           AMQP_CSTR(rabbitmq_sha256[i].password)));
        assert_false(access_check_password("rabbit_password_hashing_sha1", h,
                                           AMQP_CSTR(rabbitmq_sha256[i].password)));
    }
    for (size_t i = 0; i < sizeof other_algorithms / sizeof other_algorithms[0]; i++) {
        assert_true(access_check_password(other_algorithms[i].algorithm, other_algorithms[i].hash,
                                          AMQP_CSTR(other_algorithms[i].password)));
        assert_false(access_check_password(other_algorithms[i].algorithm,
                                           other_algorithms[i].hash, AMQP_CSTR("guest2")));
    }
    /* a password that is a prefix or an extension of the right one */
    assert_false(access_check_password(ACCESS_HASH_SHA256, rabbitmq_sha256[0].hash,
                                       AMQP_CSTR("gues")));
    assert_false(access_check_password(ACCESS_HASH_SHA256, rabbitmq_sha256[0].hash,
                                       AMQP_CSTR("guestt")));
}

static void test_blank_and_malformed_hashes_never_verify(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",                                                  /* no password */
        "bw/ZenBjZLWyOIVbJ664X1fHMYvmgBAyXqjSfR8tudJZfed",    /* one char short */
        "bw/ZenBjZLWyOIVbJ664X1fHMYvmgBAyXqjSfR8tudJZfedyAAAA", /* 3 bytes too long */
        "bw/ZenBjZLWyOIVbJ664X1fHMYvmgBAyXqjSfR8tudJZfed*",   /* not base64 */
        "Z3Vlc3Q=",                                          /* base64 of "guest" */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(access_check_password(ACCESS_HASH_SHA256, bad[i], AMQP_CSTR("guest")));
        assert_false(access_check_password(ACCESS_HASH_SHA256, bad[i], AMQP_CSTR("")));
    }
    assert_false(access_check_password(ACCESS_HASH_SHA256, NULL, AMQP_CSTR("guest")));
}

/* Our own hashes verify, with a fresh salt each time, in every algorithm. */
static void test_hash_round_trip(void **state)
{
    (void)state;
    static const char *const algorithms[] = {ACCESS_HASH_SHA256, ACCESS_HASH_SHA512,
                                             ACCESS_HASH_MD5};
    for (size_t i = 0; i < 3; i++) {
        char h1[128], h2[128];
        assert_true(access_hash_password(algorithms[i], AMQP_CSTR("pw"), h1, sizeof h1));
        assert_true(access_hash_password(algorithms[i], AMQP_CSTR("pw"), h2, sizeof h2));
        assert_string_not_equal(h1, h2);
        assert_true(access_check_password(algorithms[i], h1, AMQP_CSTR("pw")));
        assert_true(access_check_password(algorithms[i], h2, AMQP_CSTR("pw")));
        assert_false(access_check_password(algorithms[i], h1, AMQP_CSTR("pW")));
    }
    char h[128];
    assert_true(access_hash_password(ACCESS_HASH_SHA256, AMQP_CSTR("pw"), h, sizeof h));
    assert_int_equal(strlen(h), 48); /* as long as RabbitMQ's */
    assert_false(access_hash_password(ACCESS_HASH_SHA256, AMQP_CSTR("pw"), h, 48));
    assert_false(access_hash_password("plain", AMQP_CSTR("pw"), h, sizeof h));
}

static void test_tags(void **state)
{
    (void)state;
    assert_int_equal(access_parse_tags(""), 0);
    assert_int_equal(access_parse_tags(NULL), 0);
    assert_int_equal(access_parse_tags("administrator"), ACCESS_TAG_ADMINISTRATOR);
    assert_int_equal(access_parse_tags("monitoring, policymaker,management,impersonator"),
                     ACCESS_TAG_MONITORING | ACCESS_TAG_POLICYMAKER | ACCESS_TAG_MANAGEMENT |
                         ACCESS_TAG_IMPERSONATOR);
    assert_int_equal(access_parse_tags("team-a,administrators,admin,,management "),
                     ACCESS_TAG_MANAGEMENT);
}

/* ---- a server to hold users and permissions ----------------------------- */

typedef struct fixture {
    char dir[64];
    config cfg;
    server *s;
} fixture;

static void fx_start(fixture *f)
{
    log_set_level(LOG_NONE);
    f->s = test_broker_new(&f->cfg);
    assert_non_null(f->s);
}

static fixture *fx_new(void (*tweak)(config *c))
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    config_defaults(&f->cfg);
    strcpy(f->cfg.listen_host, "127.0.0.1");
    f->cfg.listen_port = 0;
    strcpy(f->dir, "/tmp/warren-unit-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    strcpy(f->cfg.data_dir, f->dir);
    if (tweak)
        tweak(&f->cfg);
    fx_start(f);
    return f;
}

static void fx_restart(fixture *f)
{
    test_broker_free(f->s);
    fx_start(f);
}

static void fx_free(fixture *f)
{
    char cmd[96];
    test_broker_free(f->s);
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
}

static access_control *acc(fixture *f) { return server_access(f->s); }

static bool login(fixture *f, const char *user, const char *pass, bool loopback)
{
    return access_login(acc(f), AMQP_CSTR(user), AMQP_CSTR(pass), loopback, NULL, 0) != NULL;
}

static void put_user(fixture *f, const char *name, const char *password, const char *tags)
{
    char err[300] = "";
    access_user_spec u = {.name = name, .password = password, .tags = tags};
    if (!access_put_user(acc(f), &u, err, sizeof err))
        fail_msg("put user %s: %s", name, err);
}

static void put_perms(fixture *f, const char *user, const char *vh, const char *c,
                      const char *w, const char *r)
{
    char err[300] = "";
    meta_permission p = {user, vh, c, w, r};
    if (!access_put_permission(acc(f), &p, err, sizeof err))
        fail_msg("put permission: %s", err);
}

/* ---- permission matching ------------------------------------------------ */

/* re:run(Name, Regex) semantics: an unanchored search of the bytes; "" is
 * "^$"; the default exchange is "amq.default". */
static const struct {
    const char *re, *name;
    bool match;
} matching[] = {
    {".*", "anything", true},
    {".*", "", true}, /* amq.default */
    {"", "", false},  /* "^$" does not match "amq.default" */
    {"", "x", false},
    {"^$", "x", false},
    {"^amq\\.default$", "", true},
    {"^amq\\.default$", "amq.default", true},
    {"cfg", "my.cfg.queue", true}, /* a search, not a full match */
    {"^cfg", "my.cfg.queue", false},
    {"^cfg", "cfg.queue", true},
    {"^cfg$", "cfg.queue", false},
    {"^(orders|billing)\\.", "billing.eu", true},
    {"^(orders|billing)\\.", "billingeu", false},
    {"^amq\\.gen-", "amq.gen-abc", true},
    {"^a.c$", "a\xc3\xa9" "c", false}, /* bytes, not characters: 'é' is two */
    {"^a..c$", "a\xc3\xa9" "c", true},
    {"q$", "q\n", true}, /* $ also before a final newline, as PCRE */
    {"[[:digit:]]+", "v2", true},
    {"(?i)^ORDERS", "orders", true},
};

static void test_permission_matching(void **state)
{
    (void)state;
    fixture *f = fx_new(NULL);
    put_user(f, "u", "pw", "");
    for (size_t i = 0; i < sizeof matching / sizeof matching[0]; i++) {
        put_perms(f, "u", "/", matching[i].re, matching[i].re, matching[i].re);
        const access_perms *p = access_find_perms(acc(f), AMQP_CSTR("u"), AMQP_CSTR("/"));
        assert_non_null(p);
        for (access_kind k = ACCESS_CONFIGURE; k <= ACCESS_READ; k++)
            if (access_allowed(acc(f), p, k, AMQP_CSTR(matching[i].name)) != matching[i].match)
                fail_msg("regex '%s' on '%s': expected %s", matching[i].re, matching[i].name,
                         matching[i].match ? "a match" : "no match");
    }
    /* The three kinds are independent. */
    put_perms(f, "u", "/", "^c", "^w", "^r");
    const access_perms *p = access_find_perms(acc(f), AMQP_CSTR("u"), AMQP_CSTR("/"));
    assert_true(access_allowed(acc(f), p, ACCESS_CONFIGURE, AMQP_CSTR("c1")));
    assert_false(access_allowed(acc(f), p, ACCESS_CONFIGURE, AMQP_CSTR("w1")));
    assert_true(access_allowed(acc(f), p, ACCESS_WRITE, AMQP_CSTR("w1")));
    assert_false(access_allowed(acc(f), p, ACCESS_WRITE, AMQP_CSTR("r1")));
    assert_true(access_allowed(acc(f), p, ACCESS_READ, AMQP_CSTR("r1")));
    assert_false(access_allowed(acc(f), p, ACCESS_READ, AMQP_CSTR("c1")));
    /* No entry: no access to the vhost; another vhost's entry does not count. */
    assert_null(access_find_perms(acc(f), AMQP_CSTR("u"), AMQP_CSTR("other")));
    assert_null(access_find_perms(acc(f), AMQP_CSTR("nobody"), AMQP_CSTR("/")));
    fx_free(f);
}

static void test_bad_regex_refused_with_reason(void **state)
{
    (void)state;
    fixture *f = fx_new(NULL);
    char err[300] = "";
    uint64_t gen = access_generation(acc(f));
    meta_permission p = {"guest", "/", ".*", "(unclosed", ".*"};

    assert_false(access_validate_permission(&p, err, sizeof err));
    assert_string_equal(err, "invalid regular expression '(unclosed': missing closing "
                             "parenthesis at position 9");
    assert_false(access_put_permission(acc(f), &p, err, sizeof err));
    assert_int_equal(access_generation(acc(f)), gen); /* nothing changed */
    const access_perms *still = access_find_perms(acc(f), AMQP_CSTR("guest"), AMQP_CSTR("/"));
    assert_true(access_allowed(acc(f), still, ACCESS_WRITE, AMQP_CSTR("x")));
    meta_topic_permission t = {"guest", "/", "amq.topic", "[a-", ".*"};
    assert_false(access_put_topic_permission(acc(f), &t, err, sizeof err));
    assert_non_null(strstr(err, "invalid regular expression '[a-'"));
    /* Missing user or vhost. */
    meta_permission nouser = {"nobody", "/", ".*", ".*", ".*"};
    assert_false(access_put_permission(acc(f), &nouser, err, sizeof err));
    assert_string_equal(err, "no user 'nobody'");
    meta_permission novhost = {"guest", "nowhere", ".*", ".*", ".*"};
    assert_false(access_put_permission(acc(f), &novhost, err, sizeof err));
    assert_string_equal(err, "no vhost 'nowhere'");
    fx_free(f);
}

/* Issue 17: catastrophic regexes stop at the match limit, which counts as
 * no match (refused) and is logged once per regex, not per check; a regex
 * over PATTERN_MAX_LEN is refused when set. */
static void test_catastrophic_regexes(void **state)
{
    (void)state;
    fixture *f = fx_new(NULL);
    char err[300], name[256];
    put_user(f, "u", "pw", "");
    put_perms(f, "u", "/", "(a+)+$", "(a|aa)+$", "(.*a){12}$");
    meta_topic_permission t = {"u", "/", "amq.topic", "^{username}\\.(a+)+$", "(a|aa)+$"};
    assert_true(access_put_topic_permission(acc(f), &t, err, sizeof err));
    const access_perms *p = access_find_perms(acc(f), AMQP_CSTR("u"), AMQP_CSTR("/"));
    const access_topic_perms *tp = access_find_topic_perms(
        acc(f), AMQP_CSTR("u"), AMQP_CSTR("/"), AMQP_CSTR("amq.topic"));
    logcap log;
    logcap_begin(&log, LOG_WARNING);
    for (int i = 0; i < 10; i++) {
        memset(name, 'a', 230);
        snprintf(name + 230, sizeof name - 230, "b%05d", i);
        for (access_kind k = ACCESS_CONFIGURE; k <= ACCESS_READ; k++)
            assert_false(access_allowed(acc(f), p, k, AMQP_CSTR(name)));
        char key[264];
        snprintf(key, sizeof key, "u.%s", name);
        assert_false(access_topic_allowed(acc(f), tp, ACCESS_WRITE, AMQP_CSTR(key)));
        assert_false(access_topic_allowed(acc(f), tp, ACCESS_READ, AMQP_CSTR(name)));
    }
    assert_int_equal(logcap_end(&log, "reached the match limit"), 5);
    /* the same regexes still decide ordinary names */
    assert_true(access_allowed(acc(f), p, ACCESS_CONFIGURE, AMQP_CSTR("aaa")));
    assert_false(access_allowed(acc(f), p, ACCESS_CONFIGURE, AMQP_CSTR("aab")));
    assert_true(access_topic_allowed(acc(f), tp, ACCESS_WRITE, AMQP_CSTR("u.aa")));
    /* too long */
    char *big = malloc(PATTERN_MAX_LEN + 2);
    memset(big, 'x', PATTERN_MAX_LEN + 1);
    big[PATTERN_MAX_LEN + 1] = 0;
    meta_permission longer = {"u", "/", big, ".*", ".*"};
    assert_false(access_put_permission(acc(f), &longer, err, sizeof err));
    assert_string_equal(err, "invalid regular expression: pattern longer than 4096 bytes");
    big[PATTERN_MAX_LEN] = 0;
    assert_true(access_put_permission(acc(f), &longer, err, sizeof err));
    free(big);
    fx_free(f);
}

static void test_topic_permissions(void **state)
{
    (void)state;
    fixture *f = fx_new(NULL);
    char err[300];
    meta_topic_permission t = {"guest", "/", "amq.topic", "^{username}\\.{vhost}\\.", ""};
    assert_false(access_has_topic_perms(acc(f), AMQP_CSTR("guest"), AMQP_CSTR("/")));
    assert_true(access_put_topic_permission(acc(f), &t, err, sizeof err));
    assert_true(access_has_topic_perms(acc(f), AMQP_CSTR("guest"), AMQP_CSTR("/")));
    assert_false(access_has_topic_perms(acc(f), AMQP_CSTR("guest"), AMQP_CSTR("/x")));
    assert_false(access_has_topic_perms(acc(f), AMQP_CSTR("gues"), AMQP_CSTR("/")));
    assert_false(access_has_topic_perms(acc(f), AMQP_CSTR("guestt"), AMQP_CSTR("/")));
    const access_topic_perms *tp = access_find_topic_perms(
        acc(f), AMQP_CSTR("guest"), AMQP_CSTR("/"), AMQP_CSTR("amq.topic"));
    assert_non_null(tp);
    assert_true(access_topic_allowed(acc(f), tp, ACCESS_WRITE, AMQP_CSTR("guest./.x")));
    assert_false(access_topic_allowed(acc(f), tp, ACCESS_WRITE, AMQP_CSTR("other./.x")));
    assert_false(access_topic_allowed(acc(f), tp, ACCESS_READ, AMQP_CSTR("guest./.x")));
    assert_true(access_topic_allowed(acc(f), tp, ACCESS_READ, AMQP_CSTR(""))); /* "^$" */
    assert_null(access_find_topic_perms(acc(f), AMQP_CSTR("guest"), AMQP_CSTR("/"),
                                        AMQP_CSTR("amq.direct")));
    /* Cleared: every key allowed again (no entry). */
    assert_true(access_clear_topic_permission(acc(f), "guest", "/", NULL, err, sizeof err));
    assert_null(access_find_topic_perms(acc(f), AMQP_CSTR("guest"), AMQP_CSTR("/"),
                                        AMQP_CSTR("amq.topic")));
    assert_false(access_clear_topic_permission(acc(f), "guest", "/", NULL, err, sizeof err));
    assert_false(access_has_topic_perms(acc(f), AMQP_CSTR("guest"), AMQP_CSTR("/")));
    fx_free(f);
}

/* ---- logins -------------------------------------------------------------- */

static void test_first_boot_default_user(void **state)
{
    (void)state;
    fixture *f = fx_new(NULL);
    const access_user *u = access_find_user(acc(f), "guest");
    assert_non_null(u);
    assert_string_equal(access_user_tags(u), "administrator");
    assert_int_equal(access_user_tag_flags(u), ACCESS_TAG_ADMINISTRATOR);
    assert_string_equal(access_user_hashing_algorithm(u), ACCESS_HASH_SHA256);
    assert_true(login(f, "guest", "guest", true));
    assert_false(login(f, "guest", "guest", false)); /* loopback_users = guest */
    assert_false(login(f, "guest", "wrong", true));
    assert_false(login(f, "nobody", "guest", true));
    const access_perms *p = access_find_perms(acc(f), AMQP_CSTR("guest"), AMQP_CSTR("/"));
    assert_non_null(p);
    assert_true(access_allowed(acc(f), p, ACCESS_CONFIGURE, AMQP_CSTR("anything")));
    assert_non_null(server_vhost(f->s, AMQP_CSTR("/")));
    assert_string_equal(vhost_description(server_vhost(f->s, AMQP_CSTR("/"))),
                        "Default virtual host");
    fx_free(f);
}

/* Only a new store gets the default user: a later start with another
 * default_pass, or after the user was deleted, changes nothing. */
static void test_default_user_only_on_first_boot(void **state)
{
    (void)state;
    fixture *f = fx_new(NULL);
    char err[300];
    put_user(f, "alice", "pw", "monitoring");
    strcpy(f->cfg.default_pass, "changed");
    fx_restart(f);
    assert_true(login(f, "guest", "guest", true));
    assert_false(login(f, "guest", "changed", true));
    assert_true(login(f, "alice", "pw", false));
    assert_string_equal(access_user_tags(access_find_user(acc(f), "alice")), "monitoring");
    assert_true(access_delete_user(acc(f), "guest", err, sizeof err));
    fx_restart(f);
    assert_null(access_find_user(acc(f), "guest"));
    assert_null(access_find_perms(acc(f), AMQP_CSTR("guest"), AMQP_CSTR("/")));
    fx_free(f);
}

static void other_default_user(config *c)
{
    strcpy(c->default_user, "app");
    strcpy(c->default_pass, "s3cret");
    strcpy(c->default_vhost, "apps");
}

static void test_other_default_user(void **state)
{
    (void)state;
    fixture *f = fx_new(other_default_user);
    assert_true(login(f, "app", "s3cret", false)); /* not a loopback user */
    assert_null(access_find_user(acc(f), "guest"));
    assert_non_null(access_find_perms(acc(f), AMQP_CSTR("app"), AMQP_CSTR("apps")));
    assert_null(server_vhost(f->s, AMQP_CSTR("/")));
    fx_free(f);
}

static void loopback_none(config *c) { c->loopback_none = true; }

static void test_loopback_users_none(void **state)
{
    (void)state;
    fixture *f = fx_new(loopback_none);
    assert_true(login(f, "guest", "guest", false));
    fx_free(f);
}

static void loopback_alice(config *c)
{
    char err[300];
    assert_true(config_set(c, "loopback_users.alice", "true", "test", err, sizeof err));
}

/* Any user can be made loopback-only, and the reason names the rule. */
static void test_loopback_other_user(void **state)
{
    (void)state;
    fixture *f = fx_new(loopback_alice);
    char why[300];
    put_user(f, "alice", "pw", "");
    assert_true(login(f, "alice", "pw", true));
    assert_null(access_login(acc(f), AMQP_CSTR("alice"), AMQP_CSTR("pw"), false, why,
                             sizeof why));
    assert_string_equal(why, "user 'alice' can only connect via localhost");
    assert_true(login(f, "guest", "guest", false)); /* the default list was replaced */
    fx_free(f);
}

/* A user with hash "" (RabbitMQ's passwordless user) and a blank password
 * never log in; a pre-hashed password from RabbitMQ does. */
static void test_passwordless_and_imported_users(void **state)
{
    (void)state;
    fixture *f = fx_new(NULL);
    char err[300], why[300];
    access_user_spec nopw = {.name = "svc", .password_hash = "", .tags = "management"};
    access_user_spec imported = {.name = "imp", .password_hash = rabbitmq_sha256[1].hash,
                                 .hashing_algorithm = ACCESS_HASH_SHA256};
    access_user_spec md5 = {.name = "old", .password_hash = other_algorithms[2].hash,
                            .hashing_algorithm = ACCESS_HASH_MD5};
    assert_true(access_put_user(acc(f), &nopw, err, sizeof err));
    assert_true(access_put_user(acc(f), &imported, err, sizeof err));
    assert_true(access_put_user(acc(f), &md5, err, sizeof err));
    assert_false(login(f, "svc", "", true));
    assert_false(login(f, "svc", "anything", true));
    assert_true(login(f, "imp", "s3cret!", false));
    assert_true(login(f, "old", "guest", false));
    assert_null(access_login(acc(f), AMQP_CSTR("imp"), AMQP_CSTR(""), false, why, sizeof why));
    assert_non_null(strstr(why, "blank password"));
    /* Validation refuses what cannot be stored. */
    access_user_spec bad_hash = {.name = "b", .password_hash = "abc"};
    assert_false(access_put_user(acc(f), &bad_hash, err, sizeof err));
    assert_string_equal(err, "user 'b': password_hash is not a rabbit_password_hashing_sha256 hash");
    access_user_spec bad_alg = {.name = "b", .password = "x", .hashing_algorithm = "sha1"};
    assert_false(access_validate_user(&bad_alg, err, sizeof err));
    access_user_spec neither = {.name = "b"};
    assert_false(access_validate_user(&neither, err, sizeof err));
    access_user_spec noname = {.name = "", .password = "x"};
    assert_false(access_validate_user(&noname, err, sizeof err));
    assert_null(access_find_user(acc(f), "b"));
    /* Everything survives a restart. */
    fx_restart(f);
    assert_true(login(f, "imp", "s3cret!", false));
    assert_string_equal(access_user_tags(access_find_user(acc(f), "svc")), "management");
    assert_false(login(f, "svc", "", true));
    fx_free(f);
}

/* Permissions and vhosts survive a restart; deleting a vhost forgets its
 * permissions; generations move on every change. */
static void test_changes_persist_and_bump_generation(void **state)
{
    (void)state;
    fixture *f = fx_new(NULL);
    char err[300];
    meta_vhost v = {"team", "Team A", "prod,eu", "quorum", true};
    uint64_t g0 = access_generation(acc(f));
    assert_true(admin_put_vhost(f->s, &v, err, sizeof err));
    put_user(f, "alice", "pw", "");
    assert_true(access_generation(acc(f)) > g0);
    put_perms(f, "alice", "team", "^a", "^b", "^c");
    meta_topic_permission t = {"alice", "team", "amq.topic", "^k", "^k"};
    assert_true(access_put_topic_permission(acc(f), &t, err, sizeof err));
    fx_restart(f);
    vhost *team = server_vhost(f->s, AMQP_CSTR("team"));
    assert_non_null(team);
    assert_string_equal(vhost_description(team), "Team A");
    assert_string_equal(vhost_tags(team), "prod,eu");
    assert_string_equal(vhost_default_queue_type(team), "quorum");
    assert_true(vhost_tracing(team));
    const access_perms *p = access_find_perms(acc(f), AMQP_CSTR("alice"), AMQP_CSTR("team"));
    assert_non_null(p);
    assert_true(access_allowed(acc(f), p, ACCESS_READ, AMQP_CSTR("c")));
    assert_false(access_allowed(acc(f), p, ACCESS_READ, AMQP_CSTR("a")));
    assert_non_null(access_find_topic_perms(acc(f), AMQP_CSTR("alice"), AMQP_CSTR("team"),
                                            AMQP_CSTR("amq.topic")));
    uint64_t g1 = access_generation(acc(f));
    assert_true(admin_delete_vhost(f->s, "team", err, sizeof err));
    assert_true(access_generation(acc(f)) > g1);
    assert_null(access_find_perms(acc(f), AMQP_CSTR("alice"), AMQP_CSTR("team")));
    assert_false(admin_delete_vhost(f->s, "team", err, sizeof err));
    assert_string_equal(err, "no vhost 'team'");
    fx_restart(f);
    assert_null(server_vhost(f->s, AMQP_CSTR("team")));
    assert_null(access_find_perms(acc(f), AMQP_CSTR("alice"), AMQP_CSTR("team")));
    meta_vhost bad = {"x", "", "", "fast", false};
    assert_false(admin_put_vhost(f->s, &bad, err, sizeof err));
    assert_string_equal(err, "unknown default queue type 'fast' for vhost 'x'");
    fx_free(f);
}

/* A definitions import that applied changes inside meta_begin and then
 * could not commit brings memory back to the store with access_reload. */
static void test_reload_after_a_rolled_back_group(void **state)
{
    (void)state;
    fixture *f = fx_new(NULL);
    put_user(f, "kept", "pw", "");
    assert_true(meta_begin(server_meta(f->s)));
    put_user(f, "lost", "pw", "");
    put_perms(f, "lost", "/", ".*", ".*", ".*");
    put_perms(f, "guest", "/", "^$", "^$", "^$");
    meta_rollback(server_meta(f->s));
    assert_non_null(access_find_user(acc(f), "lost")); /* memory ran ahead */
    uint64_t gen = access_generation(acc(f));
    assert_true(access_reload(acc(f)));
    assert_true(access_generation(acc(f)) > gen);
    assert_null(access_find_user(acc(f), "lost"));
    assert_null(access_find_perms(acc(f), AMQP_CSTR("lost"), AMQP_CSTR("/")));
    assert_non_null(access_find_user(acc(f), "kept"));
    const access_perms *p = access_find_perms(acc(f), AMQP_CSTR("guest"), AMQP_CSTR("/"));
    assert_true(access_allowed(acc(f), p, ACCESS_WRITE, AMQP_CSTR("x")));
    assert_true(login(f, "kept", "pw", false));
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rabbitmq_hashes_verify),
        cmocka_unit_test(test_blank_and_malformed_hashes_never_verify),
        cmocka_unit_test(test_hash_round_trip),
        cmocka_unit_test(test_tags),
        cmocka_unit_test(test_permission_matching),
        cmocka_unit_test(test_bad_regex_refused_with_reason),
        cmocka_unit_test(test_catastrophic_regexes),
        cmocka_unit_test(test_topic_permissions),
        cmocka_unit_test(test_first_boot_default_user),
        cmocka_unit_test(test_default_user_only_on_first_boot),
        cmocka_unit_test(test_other_default_user),
        cmocka_unit_test(test_loopback_users_none),
        cmocka_unit_test(test_loopback_other_user),
        cmocka_unit_test(test_passwordless_and_imported_users),
        cmocka_unit_test(test_changes_persist_and_bump_generation),
        cmocka_unit_test(test_reload_after_a_rolled_back_group),
    };
    return cmocka_run_group_tests_name("broker_access", tests, NULL, NULL);
}
