/* Identity and access: users (RabbitMQ's salted password hashes, tags),
 * permissions (configure / write / read regular expressions per user and
 * vhost) and topic permissions (write / read regular expressions on the
 * routing keys of one topic exchange, per user and vhost), and login.
 *
 * Data structures. Three arrays of pointers, each sorted by its key and
 * searched by bisection: users by name, permissions by (user, vhost), topic
 * permissions by (user, vhost, exchange). Listings come out in key order;
 * a change is an insert or a removal in one array (management operations
 * are rare next to the lookups).
 *
 * Invariants:
 * - What is in memory is what the metadata store holds: every change is
 *   written to meta first and applied here only if that write succeeded;
 *   at start admin_load fills the arrays from meta.
 * - Every regular expression is compiled (pattern/: PCRE2, JIT when
 *   available) when it is set; one that does not compile, or is longer than
 *   PATTERN_MAX_LEN, is refused then, with the reason. "" means "^$", as in
 *   RabbitMQ; ".*" is marked match-all and never runs.
 * - Every change to users or permissions bumps `generation`. A permission
 *   or topic permission object found by a lookup stays valid while the
 *   generation is unchanged, which is what lets channels cache the result
 *   of a check (see chan_permitted in decl.c).
 *
 * Matching is RabbitMQ's: re:run(Name, Regex) with no options, i.e. an
 * unanchored search over the bytes of the name (no UTF-8 mode), the
 * default exchange counting as "amq.default". Topic patterns may contain
 * {username} and {vhost}, replaced before matching as rabbit_auth_backend_
 * internal does (plain text replacement, no escaping); such a pattern is
 * compiled again (interpreted, not JIT compiled: it runs once) for each
 * check that is not already cached by the channel. Every match runs under
 * pattern/'s limits: one that reaches them counts as not matching -- access
 * refused -- and the first time for each regex is logged, naming the user,
 * vhost and permission.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../pattern/pattern.h"
#include "access.h"

typedef struct regex {
    char *source; /* as given: "" stays "" */
    pattern_re *code;
    bool all;          /* ".*": matches every name */
    bool has_vars;     /* {username} / {vhost}: expanded per check (topics) */
    bool limit_logged; /* a match reached the limits; logged, not again */
} regex;

struct access_user {
    char *name, *password_hash, *hashing_algorithm, *tags;
    unsigned tag_flags;
    meta_limit max_connections, max_channels; /* RabbitMQ's user limits */
};

struct access_perms {
    char *user, *vhost;
    regex re[3]; /* indexed by access_kind */
};

struct access_topic_perms {
    char *user, *vhost, *exchange;
    regex write, read;
};

typedef struct ptr_array {
    void **items;
    size_t n, cap;
} ptr_array;

struct access_control {
    server *srv;
    void (*user_deleted)(void *ctx, const char *user, const char *text);
    void *user_deleted_ctx;
    ptr_array users, perms, topics;
    uint64_t generation;
    pattern_scratch *scratch; /* for every match: all on the loop thread */
};

/* ---- small helpers ------------------------------------------------------ */

static int cmp_bytes(const char *s, amqp_bytes b)
{
    size_t n = strlen(s);
    int c = memcmp(s, b.ptr, n < b.len ? n : b.len);
    return c ? c : (n < b.len ? -1 : n > b.len ? 1 : 0);
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

static bool insert_at(ptr_array *a, size_t i, void *item)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        void **n = realloc(a->items, cap * sizeof *n);
        if (!n)
            return false;
        a->items = n;
        a->cap = cap;
    }
    memmove(a->items + i + 1, a->items + i, (a->n - i) * sizeof *a->items);
    a->items[i] = item;
    a->n++;
    return true;
}

static void remove_at(ptr_array *a, size_t i)
{
    memmove(a->items + i, a->items + i + 1, (a->n - i - 1) * sizeof *a->items);
    a->n--;
}

/* Bisection: the index of the first item not below the key (by `cmp`,
 * negative when the item sorts before the key); *found if it is equal. */
static size_t search(const ptr_array *a, int (*cmp)(const void *item, const void *key),
                     const void *key, bool *found)
{
    size_t lo = 0, hi = a->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp(a->items[mid], key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < a->n && cmp(a->items[lo], key) == 0;
    return lo;
}

/* ---- password hashing (rabbit_password) --------------------------------- */

static const EVP_MD *hashing_md(const char *algorithm)
{
    if (!algorithm)
        return NULL;
    if (strcmp(algorithm, ACCESS_HASH_SHA256) == 0)
        return EVP_sha256();
    if (strcmp(algorithm, ACCESS_HASH_SHA512) == 0)
        return EVP_sha512();
    if (strcmp(algorithm, ACCESS_HASH_MD5) == 0)
        return EVP_md5();
    return NULL;
}

bool access_algorithm_known(const char *algorithm) { return hashing_md(algorithm) != NULL; }

/* H(salt ++ password) into out; its length, or 0 on an OpenSSL failure. */
static unsigned salted_digest(const EVP_MD *md, const uint8_t salt[4], amqp_bytes password,
                              uint8_t *out)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned n = 0;
    bool ok = ctx && EVP_DigestInit_ex(ctx, md, NULL) && EVP_DigestUpdate(ctx, salt, 4) &&
              EVP_DigestUpdate(ctx, password.ptr, password.len) &&
              EVP_DigestFinal_ex(ctx, out, &n);
    EVP_MD_CTX_free(ctx);
    return ok ? n : 0;
}

bool access_hash_password(const char *algorithm, amqp_bytes password, char *out, size_t cap)
{
    const EVP_MD *md = hashing_md(algorithm);
    uint8_t raw[4 + EVP_MAX_MD_SIZE];
    if (!md || RAND_bytes(raw, 4) != 1)
        return false;
    unsigned n = salted_digest(md, raw, password, raw + 4);
    if (n == 0 || cap < 4 * ((4 + n + 2) / 3) + 1)
        return false;
    EVP_EncodeBlock((unsigned char *)out, raw, (int)(4 + n));
    return true;
}

/* Decodes RabbitMQ's base64 (with padding); the byte count or -1. */
static int decode_base64(const char *text, uint8_t *out, size_t cap)
{
    size_t len = strlen(text);
    if (len == 0 || len % 4 || len / 4 * 3 > cap)
        return -1;
    int n = EVP_DecodeBlock(out, (const unsigned char *)text, (int)len);
    if (n < 0)
        return -1;
    return n - (text[len - 1] == '=') - (text[len - 2] == '=');
}

bool access_check_password(const char *algorithm, const char *hash, amqp_bytes password)
{
    const EVP_MD *md = hashing_md(algorithm);
    uint8_t raw[4 + EVP_MAX_MD_SIZE + 3], digest[EVP_MAX_MD_SIZE];
    if (!md || !hash || !*hash)
        return false;
    int n = decode_base64(hash, raw, sizeof raw);
    if (n != 4 + EVP_MD_size(md))
        return false;
    unsigned dn = salted_digest(md, raw, password, digest);
    return dn == (unsigned)(n - 4) && CRYPTO_memcmp(digest, raw + 4, dn) == 0;
}

/* A stored hash must decode to salt + digest of its algorithm ("" = no
 * password). */
static bool hash_well_formed(const char *algorithm, const char *hash)
{
    uint8_t raw[4 + EVP_MAX_MD_SIZE + 3];
    const EVP_MD *md = hashing_md(algorithm);
    return md && (!*hash || decode_base64(hash, raw, sizeof raw) == 4 + EVP_MD_size(md));
}

/* ---- tags --------------------------------------------------------------- */

static const char *const known_tags[] = {"administrator", "monitoring", "policymaker",
                                         "management", "impersonator"};

/* The ACCESS_TAG_* bits of a comma-separated list (spaces around names are
 * ignored; unknown tags are kept in the text, not in the bits). */
unsigned access_parse_tags(const char *tags)
{
    unsigned flags = 0;
    const char *p = tags ? tags : "";
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *end = p;
        while (*end && *end != ',')
            end++;
        size_t len = (size_t)(end - p);
        while (len && p[len - 1] == ' ')
            len--;
        for (unsigned i = 0; i < sizeof known_tags / sizeof known_tags[0]; i++)
            if (strlen(known_tags[i]) == len && memcmp(known_tags[i], p, len) == 0)
                flags |= 1u << i;
        p = end;
    }
    return flags;
}

/* ---- regular expressions ------------------------------------------------ */

static void regex_free(regex *r)
{
    free(r->source);
    pattern_free(r->code);
    memset(r, 0, sizeof *r);
}

/* `flags` as pattern_compile's. */
static pattern_re *compile(const char *source, unsigned flags, char *err, size_t errlen)
{
    pattern_error e;
    pattern_re *re = pattern_compile(source, strlen(source), flags, &e);
    if (!re && err && e.code == PATTERN_TOO_LONG) /* not worth repeating */
        snprintf(err, errlen, "invalid regular expression: %s", e.text);
    else if (!re && err)
        snprintf(err, errlen, "invalid regular expression '%s': %s at position %zu", source,
                 e.text, e.offset);
    return re;
}

static bool regex_set(regex *r, const char *source, char *err, size_t errlen)
{
    const char *src = source && *source ? source : "^$";
    pattern_re *code = compile(src, 0, err, errlen);
    char *copy = dup_or_empty(source);
    if (!code || !copy) {
        pattern_free(code);
        free(copy);
        if (code && err)
            snprintf(err, errlen, "out of memory");
        return false;
    }
    regex_free(r);
    r->source = copy;
    r->code = code;
    r->all = strcmp(src, ".*") == 0;
    r->has_vars = strstr(src, "{username}") || strstr(src, "{vhost}");
    return true;
}

bool access_regex_check(const char *source, char *err, size_t errlen)
{
    /* checked only: interpreting is cheaper than JIT compiling */
    pattern_re *code = compile(source && *source ? source : "^$", PATTERN_NO_JIT, err, errlen);
    pattern_free(code);
    return code != NULL;
}

/* Whose regex a match runs, for the log. */
typedef struct whose {
    const char *user, *vhost, *exchange; /* exchange: topic permissions only */
    access_kind kind;
} whose;

/* Does `code` (r's, or r's expanded) match `subject`? A match that reaches
 * the limits does not; the first time for `r` is logged, naming whose
 * permission it is. */
static bool run_match(access_control *a, const regex *r, const pattern_re *code,
                      amqp_bytes subject, const whose *w)
{
    static const char *const kinds[] = {"configure", "write", "read"};
    pattern_result m = pattern_match(code, a->scratch, subject.ptr, subject.len);
    if (m == PATTERN_LIMIT && !r->limit_logged) {
        ((regex *)r)->limit_logged = true; /* logging state, not what the permission says */
        log_msg(LOG_WARNING,
                "%s%s permission of user '%s' in vhost '%s'%s%s%s: regex '%s' reached the match "
                "limit on '%.*s', which counts as not matching (refused); this is said once per "
                "regex", w->exchange ? "topic " : "", kinds[w->kind], w->user, w->vhost,
                w->exchange ? " for exchange '" : "", w->exchange ? w->exchange : "",
                w->exchange ? "'" : "", r->source, (int)subject.len, (const char *)subject.ptr);
    }
    return m == PATTERN_MATCH;
}

/* ---- lifecycle ---------------------------------------------------------- */

access_control *access_new(server *s, void (*user_deleted)(void *ctx, const char *user,
                                                          const char *text),
                           void *ctx)
{
    access_control *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->srv = s;
    a->user_deleted = user_deleted;
    a->user_deleted_ctx = ctx;
    a->generation = 1;
    a->scratch = pattern_scratch_new();
    if (!a->scratch) {
        free(a);
        return NULL;
    }
    return a;
}

static void user_free(access_user *u)
{
    if (!u)
        return;
    free(u->name);
    free(u->password_hash);
    free(u->hashing_algorithm);
    free(u->tags);
    free(u);
}

static void perms_free(access_perms *p)
{
    if (!p)
        return;
    for (int i = 0; i < 3; i++)
        regex_free(&p->re[i]);
    free(p->user);
    free(p->vhost);
    free(p);
}

static void topic_free(access_topic_perms *t)
{
    if (!t)
        return;
    regex_free(&t->write);
    regex_free(&t->read);
    free(t->user);
    free(t->vhost);
    free(t->exchange);
    free(t);
}

static void clear_all(access_control *a)
{
    for (size_t i = 0; i < a->users.n; i++)
        user_free(a->users.items[i]);
    for (size_t i = 0; i < a->perms.n; i++)
        perms_free(a->perms.items[i]);
    for (size_t i = 0; i < a->topics.n; i++)
        topic_free(a->topics.items[i]);
    a->users.n = a->perms.n = a->topics.n = 0;
    a->generation++;
}

void access_free(access_control *a)
{
    if (!a)
        return;
    clear_all(a);
    free(a->users.items);
    free(a->perms.items);
    free(a->topics.items);
    pattern_scratch_free(a->scratch);
    free(a);
}

uint64_t access_generation(const access_control *a) { return a->generation; }

/* ---- users -------------------------------------------------------------- */

static int cmp_user(const void *item, const void *key)
{
    return cmp_bytes(((const access_user *)item)->name, *(const amqp_bytes *)key);
}

static access_user *find_user(const access_control *a, amqp_bytes name, size_t *at)
{
    bool found;
    size_t i = search(&a->users, cmp_user, &name, &found);
    if (at)
        *at = i;
    return found ? a->users.items[i] : NULL;
}

const access_user *access_find_user(const access_control *a, const char *name)
{
    return find_user(a, AMQP_CSTR(name), NULL);
}

const char *access_user_name(const access_user *u) { return u->name; }
const char *access_user_password_hash(const access_user *u) { return u->password_hash; }
const char *access_user_hashing_algorithm(const access_user *u) { return u->hashing_algorithm; }
const char *access_user_tags(const access_user *u) { return u->tags; }
unsigned access_user_tag_flags(const access_user *u) { return u->tag_flags; }

void access_foreach_user(const access_control *a, void (*fn)(void *arg, const access_user *u), void *arg)
{
    for (size_t i = 0; i < a->users.n; i++)
        fn(arg, a->users.items[i]);
}

/* A name fit for a user, vhost or exchange: 1..255 bytes (shortstr). */
static bool check_name(const char *what, const char *name, char *err, size_t errlen)
{
    if (name && *name && strlen(name) <= 255)
        return true;
    snprintf(err, errlen, "%s name must be 1 to 255 bytes", what);
    return false;
}

bool access_validate_user(const access_user_spec *u, char *err, size_t errlen)
{
    const char *alg = u->hashing_algorithm ? u->hashing_algorithm : ACCESS_HASH_SHA256;
    if (!check_name("user", u->name, err, errlen))
        return false;
    if (!access_algorithm_known(alg)) {
        snprintf(err, errlen, "unknown hashing algorithm '%s' for user '%s'", alg, u->name);
        return false;
    }
    if (!u->password && !u->password_hash) {
        snprintf(err, errlen, "user '%s': password or password_hash must be set", u->name);
        return false;
    }
    if (!u->password && !hash_well_formed(alg, u->password_hash)) {
        snprintf(err, errlen, "user '%s': password_hash is not a %s hash", u->name, alg);
        return false;
    }
    return true;
}

/* A user object from a meta row (copies every string). */
static access_user *user_new(const meta_user *row)
{
    access_user *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->name = dup_or_empty(row->name);
    u->password_hash = dup_or_empty(row->password_hash);
    u->hashing_algorithm = dup_or_empty(row->hashing_algorithm);
    u->tags = dup_or_empty(row->tags);
    u->tag_flags = access_parse_tags(row->tags);
    u->max_connections = row->max_connections;
    u->max_channels = row->max_channels;
    if (!u->name || !u->password_hash || !u->hashing_algorithm || !u->tags) {
        user_free(u);
        return NULL;
    }
    return u;
}

/* Puts a user object in place of the one of the same name, or inserts it. */
static bool install_user(access_control *a, const meta_user *row)
{
    size_t at;
    access_user *old = find_user(a, AMQP_CSTR(row->name), &at);
    access_user *u = user_new(row);
    if (!u || (!old && !insert_at(&a->users, at, u))) {
        user_free(u);
        return false;
    }
    if (old) {
        a->users.items[at] = u;
        user_free(old);
    }
    a->generation++;
    return true;
}

void access_load_user(access_control *a, const meta_user *u)
{
    if (!install_user(a, u))
        log_msg(LOG_ERROR, "out of memory loading user '%s'", u->name);
}

bool access_put_user(access_control *a, const access_user_spec *u, char *err, size_t errlen)
{
    char hash[128];
    if (!access_validate_user(u, err, errlen))
        return false;
    const access_user *old = find_user(a, AMQP_CSTR(u->name), NULL);
    meta_user row = {u->name, u->password_hash,
                     u->hashing_algorithm ? u->hashing_algorithm : ACCESS_HASH_SHA256,
                     u->tags ? u->tags : "", {0}, {0}};
    if (old) { /* a change of password or tags keeps them */
        row.max_connections = old->max_connections;
        row.max_channels = old->max_channels;
    }
    if (u->set_max_connections)
        row.max_connections = u->max_connections;
    if (u->set_max_channels)
        row.max_channels = u->max_channels;
    if (u->password) {
        if (!access_hash_password(row.hashing_algorithm, AMQP_CSTR(u->password), hash,
                                  sizeof hash)) {
            snprintf(err, errlen, "cannot hash the password of user '%s'", u->name);
            return false;
        }
        row.password_hash = hash;
    }
    if (!meta_put_user(server_meta(a->srv), &row)) {
        snprintf(err, errlen, "cannot store user '%s' (see the log)", u->name);
        return false;
    }
    if (!install_user(a, &row)) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    return true;
}

meta_limit access_user_max_connections(const access_user *u) { return u->max_connections; }
meta_limit access_user_max_channels(const access_user *u) { return u->max_channels; }

bool access_set_user_limit(access_control *a, const char *name, const char *limit,
                           meta_limit value, char *err, size_t errlen)
{
    const access_user *u = find_user(a, AMQP_CSTR(name), NULL);
    bool conns = strcmp(limit, "max-connections") == 0;
    if (!u) {
        snprintf(err, errlen, "no_such_user");
        return false;
    }
    if (!conns && strcmp(limit, "max-channels") != 0) {
        snprintf(err, errlen, "unknown limit '%s'", limit);
        return false;
    }
    meta_user row = {u->name, u->password_hash, u->hashing_algorithm, u->tags,
                     conns ? value : u->max_connections, conns ? u->max_channels : value};
    if (!meta_put_user(server_meta(a->srv), &row)) {
        snprintf(err, errlen, "cannot store user '%s' (see the log)", name);
        return false;
    }
    if (!install_user(a, &row)) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    return true;
}

/* Removes from memory the permissions whose user (or vhost) is `name`. */
static void drop_perms_of(access_control *a, const char *user, const char *vh)
{
    size_t keep = 0;
    for (size_t i = 0; i < a->perms.n; i++) {
        access_perms *p = a->perms.items[i];
        if ((user && strcmp(p->user, user) == 0) || (vh && strcmp(p->vhost, vh) == 0))
            perms_free(p);
        else
            a->perms.items[keep++] = p;
    }
    a->perms.n = keep;
    keep = 0;
    for (size_t i = 0; i < a->topics.n; i++) {
        access_topic_perms *t = a->topics.items[i];
        if ((user && strcmp(t->user, user) == 0) || (vh && strcmp(t->vhost, vh) == 0))
            topic_free(t);
        else
            a->topics.items[keep++] = t;
    }
    a->topics.n = keep;
    a->generation++;
}

bool access_delete_user(access_control *a, const char *name, char *err, size_t errlen)
{
    size_t at;
    access_user *u = find_user(a, AMQP_CSTR(name ? name : ""), &at);
    if (!u) {
        snprintf(err, errlen, "no user '%s'", name ? name : "");
        return false;
    }
    if (!meta_delete_user(server_meta(a->srv), name)) {
        snprintf(err, errlen, "cannot delete user '%s' (see the log)", name);
        return false;
    }
    remove_at(&a->users, at);
    drop_perms_of(a, u->name, NULL);
    char text[400];
    snprintf(text, sizeof text, "CONNECTION_FORCED - user '%s' is deleted", u->name);
    if (a->user_deleted)
        a->user_deleted(a->user_deleted_ctx, u->name, text);
    user_free(u);
    return true;
}

/* RabbitMQ's internal backend: unknown user, blank password, wrong
 * password; then rabbit_reader's loopback rule. */
/* A login with `password`, or with none to check (NULL: EXTERNAL). */
static const access_user *login(access_control *a, amqp_bytes name, const amqp_bytes *password,
                                bool loopback, char *why, size_t whylen)
{
    char tmp[8];
    if (!why)
        why = tmp, whylen = sizeof tmp;
    const access_user *u = find_user(a, name, NULL);
    if (!u) {
        snprintf(why, whylen, "user '%.*s' - invalid credentials", (int)name.len,
                 (const char *)name.ptr);
        return NULL;
    }
    if (password && password->len == 0) {
        snprintf(why, whylen,
                 "user '%s' attempted to log in with a blank password, which is prohibited by "
                 "the internal authN backend.",
                 u->name);
        return NULL;
    }
    if (password && !access_check_password(u->hashing_algorithm, u->password_hash, *password)) {
        snprintf(why, whylen, "user '%s' - invalid credentials", u->name);
        return NULL;
    }
    if (!loopback && config_loopback_only(server_config(a->srv), u->name)) {
        snprintf(why, whylen, "user '%s' can only connect via localhost", u->name);
        return NULL;
    }
    return u;
}

const access_user *access_login(access_control *a, amqp_bytes name, amqp_bytes password, bool loopback,
                                char *why, size_t whylen)
{
    return login(a, name, &password, loopback, why, whylen);
}

const access_user *access_login_external(access_control *a, amqp_bytes name, bool loopback,
                                         char *why, size_t whylen)
{
    return login(a, name, NULL, loopback, why, whylen);
}

/* ---- permissions -------------------------------------------------------- */

typedef struct perm_key {
    amqp_bytes user, vhost, exchange;
} perm_key;

static int cmp_keys(const char *user, const char *vh, const char *exchange, const perm_key *k)
{
    int c = cmp_bytes(user, k->user);
    if (!c)
        c = cmp_bytes(vh, k->vhost);
    if (!c && exchange)
        c = cmp_bytes(exchange, k->exchange);
    return c;
}

static int cmp_perms(const void *item, const void *key)
{
    const access_perms *p = item;
    return cmp_keys(p->user, p->vhost, NULL, key);
}

static int cmp_topic(const void *item, const void *key)
{
    const access_topic_perms *t = item;
    return cmp_keys(t->user, t->vhost, t->exchange, key);
}

const access_perms *access_find_perms(const access_control *a, amqp_bytes user, amqp_bytes vh)
{
    perm_key k = {user, vh, {0}};
    bool found;
    size_t i = search(&a->perms, cmp_perms, &k, &found);
    return found ? a->perms.items[i] : NULL;
}

bool access_allowed(access_control *a, const access_perms *p, access_kind kind, amqp_bytes name)
{
    const regex *r = &p->re[kind];
    if (name.len == 0)
        name = AMQP_CSTR("amq.default");
    return r->all || run_match(a, r, r->code, name, &(whose){p->user, p->vhost, NULL, kind});
}

bool access_validate_permission(const meta_permission *p, char *err, size_t errlen)
{
    const char *res[3] = {p->configure, p->write, p->read};
    if (!check_name("user", p->user, err, errlen) || !check_name("vhost", p->vhost, err, errlen))
        return false;
    for (int i = 0; i < 3; i++)
        if (!access_regex_check(res[i], err, errlen))
            return false;
    return true;
}

static access_perms *perms_new(const meta_permission *row, char *err, size_t errlen)
{
    const char *res[3] = {row->configure, row->write, row->read};
    access_perms *p = calloc(1, sizeof *p);
    bool ok = p && (p->user = strdup(row->user)) && (p->vhost = strdup(row->vhost));
    for (int i = 0; ok && i < 3; i++)
        ok = regex_set(&p->re[i], res[i], err, errlen);
    if (!ok) {
        perms_free(p);
        return NULL;
    }
    return p;
}

/* Replaces (or inserts) the permissions of row's user in row's vhost. */
static bool install_perms(access_control *a, const meta_permission *row, char *err, size_t errlen)
{
    perm_key k = {AMQP_CSTR(row->user), AMQP_CSTR(row->vhost), {0}};
    bool found;
    size_t at = search(&a->perms, cmp_perms, &k, &found);
    access_perms *p = perms_new(row, err, errlen);
    if (!p || (!found && !insert_at(&a->perms, at, p))) {
        perms_free(p);
        return false;
    }
    if (found) {
        perms_free(a->perms.items[at]);
        a->perms.items[at] = p;
    }
    a->generation++;
    return true;
}

void access_load_permission(access_control *a, const meta_permission *p)
{
    char err[300];
    if (!install_perms(a, p, err, sizeof err))
        log_msg(LOG_ERROR, "cannot restore permissions of '%s' in vhost '%s': %s", p->user,
                p->vhost, err);
}

/* The user and the vhost must exist. */
static bool check_targets(access_control *a, const char *user, const char *vh, char *err,
                          size_t errlen)
{
    if (!access_find_user(a, user)) {
        snprintf(err, errlen, "no user '%s'", user);
        return false;
    }
    if (!server_vhost(a->srv, AMQP_CSTR(vh))) {
        snprintf(err, errlen, "no vhost '%s'", vh);
        return false;
    }
    return true;
}

bool access_put_permission(access_control *a, const meta_permission *p, char *err, size_t errlen)
{
    if (!access_validate_permission(p, err, errlen) ||
        !check_targets(a, p->user, p->vhost, err, errlen))
        return false;
    meta_permission row = {p->user, p->vhost, p->configure ? p->configure : "",
                           p->write ? p->write : "", p->read ? p->read : ""};
    if (!meta_put_permission(server_meta(a->srv), &row)) {
        snprintf(err, errlen, "cannot store permissions (see the log)");
        return false;
    }
    return install_perms(a, &row, err, errlen);
}

bool access_clear_permission(access_control *a, const char *user, const char *vh, char *err,
                             size_t errlen)
{
    perm_key k = {AMQP_CSTR(user), AMQP_CSTR(vh), {0}};
    bool found;
    size_t at = search(&a->perms, cmp_perms, &k, &found);
    if (!found) {
        snprintf(err, errlen, "no permissions for user '%s' in vhost '%s'", user, vh);
        return false;
    }
    if (!meta_delete_permission(server_meta(a->srv), user, vh)) {
        snprintf(err, errlen, "cannot delete permissions (see the log)");
        return false;
    }
    perms_free(a->perms.items[at]);
    remove_at(&a->perms, at);
    a->generation++;
    return true;
}

static bool matches_filter(const char *user, const char *vh, const char *want_user,
                           const char *want_vhost)
{
    return (!want_user || strcmp(user, want_user) == 0) &&
           (!want_vhost || strcmp(vh, want_vhost) == 0);
}

void access_foreach_permission(const access_control *a, const char *user, const char *vh,
                               void (*fn)(void *arg, const meta_permission *p), void *arg)
{
    for (size_t i = 0; i < a->perms.n; i++) {
        const access_perms *p = a->perms.items[i];
        if (!matches_filter(p->user, p->vhost, user, vh))
            continue;
        meta_permission row = {p->user, p->vhost, p->re[ACCESS_CONFIGURE].source,
                               p->re[ACCESS_WRITE].source, p->re[ACCESS_READ].source};
        fn(arg, &row);
    }
}

/* ---- topic permissions -------------------------------------------------- */

bool access_has_topic_perms(const access_control *a, amqp_bytes user, amqp_bytes vh)
{
    perm_key k = {user, vh, AMQP_CSTR("")}; /* "" sorts first: the user's first row in vh */
    bool found;
    size_t i = search(&a->topics, cmp_topic, &k, &found);
    if (i == a->topics.n)
        return false;
    const access_topic_perms *t = a->topics.items[i];
    return cmp_keys(t->user, t->vhost, NULL, &k) == 0;
}

const access_topic_perms *access_find_topic_perms(const access_control *a, amqp_bytes user,
                                                  amqp_bytes vh, amqp_bytes exchange)
{
    perm_key k = {user, vh, exchange};
    bool found;
    size_t i = search(&a->topics, cmp_topic, &k, &found);
    return found ? a->topics.items[i] : NULL;
}

/* Replaces every "{name}" in `text` with `value`. NULL on OOM. */
static char *replace_all(const char *text, const char *name, const char *value)
{
    size_t nlen = strlen(name), vlen = strlen(value), count = 0;
    for (const char *p = strstr(text, name); p; p = strstr(p + nlen, name))
        count++;
    char *out = malloc(strlen(text) + count * vlen + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = text;;) {
        const char *hit = strstr(p, name);
        size_t n = hit ? (size_t)(hit - p) : strlen(p);
        memcpy(o, p, n);
        o += n;
        if (!hit)
            break;
        memcpy(o, value, vlen);
        o += vlen;
        p = hit + nlen;
    }
    *o = 0;
    return out;
}

/* A pattern with {username} / {vhost}: expanded and compiled for this check. */
static bool match_expanded(access_control *a, const access_topic_perms *t, access_kind kind,
                           amqp_bytes key)
{
    const regex *r = kind == ACCESS_WRITE ? &t->write : &t->read;
    char *step = replace_all(*r->source ? r->source : "^$", "{username}", t->user);
    char *expanded = step ? replace_all(step, "{vhost}", t->vhost) : NULL;
    pattern_re *code = expanded ? compile(expanded, PATTERN_NO_JIT, NULL, 0) : NULL;
    bool ok = code && run_match(a, r, code, key, &(whose){t->user, t->vhost, t->exchange, kind});
    pattern_free(code);
    free(expanded);
    free(step);
    return ok;
}

bool access_topic_allowed(access_control *a, const access_topic_perms *t, access_kind kind,
                          amqp_bytes key)
{
    const regex *r = kind == ACCESS_WRITE ? &t->write : &t->read;
    if (r->all)
        return true;
    if (r->has_vars)
        return match_expanded(a, t, kind, key);
    return run_match(a, r, r->code, key, &(whose){t->user, t->vhost, t->exchange, kind});
}

bool access_validate_topic_permission(const meta_topic_permission *p, char *err, size_t errlen)
{
    return check_name("user", p->user, err, errlen) &&
           check_name("vhost", p->vhost, err, errlen) &&
           check_name("exchange", p->exchange, err, errlen) &&
           access_regex_check(p->write, err, errlen) && access_regex_check(p->read, err, errlen);
}

static bool install_topic(access_control *a, const meta_topic_permission *row, char *err, size_t errlen)
{
    perm_key k = {AMQP_CSTR(row->user), AMQP_CSTR(row->vhost), AMQP_CSTR(row->exchange)};
    bool found;
    size_t at = search(&a->topics, cmp_topic, &k, &found);
    access_topic_perms *t = calloc(1, sizeof *t);
    bool ok = t && (t->user = strdup(row->user)) && (t->vhost = strdup(row->vhost)) &&
              (t->exchange = strdup(row->exchange)) &&
              regex_set(&t->write, row->write, err, errlen) &&
              regex_set(&t->read, row->read, err, errlen) &&
              (found || insert_at(&a->topics, at, t));
    if (!ok) {
        topic_free(t);
        return false;
    }
    if (found) {
        topic_free(a->topics.items[at]);
        a->topics.items[at] = t;
    }
    a->generation++;
    return true;
}

void access_load_topic_permission(access_control *a, const meta_topic_permission *p)
{
    char err[300];
    if (!install_topic(a, p, err, sizeof err))
        log_msg(LOG_ERROR, "cannot restore topic permissions of '%s' in vhost '%s': %s",
                p->user, p->vhost, err);
}

bool access_put_topic_permission(access_control *a, const meta_topic_permission *p, char *err,
                                 size_t errlen)
{
    if (!access_validate_topic_permission(p, err, errlen) ||
        !check_targets(a, p->user, p->vhost, err, errlen))
        return false;
    meta_topic_permission row = {p->user, p->vhost, p->exchange, p->write ? p->write : "",
                                 p->read ? p->read : ""};
    if (!meta_put_topic_permission(server_meta(a->srv), &row)) {
        snprintf(err, errlen, "cannot store topic permissions (see the log)");
        return false;
    }
    return install_topic(a, &row, err, errlen);
}

bool access_clear_topic_permission(access_control *a, const char *user, const char *vh,
                                   const char *exchange, char *err, size_t errlen)
{
    bool any = false;
    for (size_t i = 0; i < a->topics.n; i++) {
        const access_topic_perms *t = a->topics.items[i];
        any |= strcmp(t->user, user) == 0 && strcmp(t->vhost, vh) == 0 &&
               (!exchange || strcmp(t->exchange, exchange) == 0);
    }
    if (!any) {
        snprintf(err, errlen, "no topic permissions for user '%s' in vhost '%s'", user, vh);
        return false;
    }
    if (!meta_delete_topic_permission(server_meta(a->srv), user, vh, exchange)) {
        snprintf(err, errlen, "cannot delete topic permissions (see the log)");
        return false;
    }
    size_t keep = 0;
    for (size_t i = 0; i < a->topics.n; i++) {
        access_topic_perms *t = a->topics.items[i];
        if (strcmp(t->user, user) == 0 && strcmp(t->vhost, vh) == 0 &&
            (!exchange || strcmp(t->exchange, exchange) == 0))
            topic_free(t);
        else
            a->topics.items[keep++] = t;
    }
    a->topics.n = keep;
    a->generation++;
    return true;
}

void access_foreach_topic_permission(const access_control *a, const char *user, const char *vh,
                                     void (*fn)(void *arg, const meta_topic_permission *p),
                                     void *arg)
{
    for (size_t i = 0; i < a->topics.n; i++) {
        const access_topic_perms *t = a->topics.items[i];
        if (!matches_filter(t->user, t->vhost, user, vh))
            continue;
        meta_topic_permission row = {t->user, t->vhost, t->exchange, t->write.source,
                                     t->read.source};
        fn(arg, &row);
    }
}

/* ---- vhosts going, reloading -------------------------------------------- */

void access_vhost_deleted(access_control *a, const char *vh) { drop_perms_of(a, NULL, vh); }

static void reload_user(void *ctx, const meta_user *u) { access_load_user(ctx, u); }
static void reload_perm(void *ctx, const meta_permission *p) { access_load_permission(ctx, p); }
static void reload_topic(void *ctx, const meta_topic_permission *p)
{
    access_load_topic_permission(ctx, p);
}

bool access_reload(access_control *a)
{
    static const meta_load_handlers h = {
        .user = reload_user, .permission = reload_perm, .topic_permission = reload_topic};
    clear_all(a);
    return meta_load(server_meta(a->srv), &h, a);
}
