/* access: users, permissions, topic permissions and the login brake. */
#ifndef WARREN_ACCESS_H
#define WARREN_ACCESS_H

#include "../core/core.h"

/* ---- identity and access (access.c) ------------------------------------ */

/* The users, permissions and topic permissions of a server, held in memory
 * and written through to the metadata store, which is the truth at start
 * (admin_load fills them). Regular expressions are compiled once (PCRE2
 * with JIT) when set, and a bad one is refused then with the reason. Every
 * change bumps a generation number; a permission object a lookup returned
 * stays valid while access_generation() is unchanged, so channels cache
 * their checks against it and a change applies to open channels at once.
 * (RabbitMQ instead caches allowed checks per channel until it is reopened.)
 *
 * Puts and deletes return false with a one-line reason in `err` and change
 * nothing when the input is invalid, a user or vhost it names is missing,
 * or the store write fails (also logged). Inside meta_begin/meta_commit
 * (a definitions import) they apply to memory at once; if the commit then
 * fails, call access_reload to bring memory back to the store. Strings
 * passed in are copied; strings handed out live until the next change of
 * the same kind. Everything runs on the loop thread. */
typedef struct access_user access_user;
typedef struct access_perms access_perms;
typedef struct access_topic_perms access_topic_perms;

typedef enum access_kind { ACCESS_CONFIGURE, ACCESS_WRITE, ACCESS_READ } access_kind;

/* Tags RabbitMQ knows, as bits; other (free-form) tags stay in the text. */
enum {
    ACCESS_TAG_ADMINISTRATOR = 1 << 0,
    ACCESS_TAG_MONITORING = 1 << 1,
    ACCESS_TAG_POLICYMAKER = 1 << 2,
    ACCESS_TAG_MANAGEMENT = 1 << 3,
    ACCESS_TAG_IMPERSONATOR = 1 << 4,
};

#define ACCESS_HASH_SHA256 "rabbit_password_hashing_sha256"
#define ACCESS_HASH_SHA512 "rabbit_password_hashing_sha512"
#define ACCESS_HASH_MD5 "rabbit_password_hashing_md5"

/* Empty; NULL on OOM. access_free frees everything it holds. A deleted
 * user's connections are closed by `user_deleted` (with `text`), which the
 * owner gives: access/ knows no connections. */
access_control *access_new(server *s, void (*user_deleted)(void *ctx, const char *user,
                                                          const char *text),
                           void *ctx);
void access_free(access_control *a);
uint64_t access_generation(const access_control *a);

/* RabbitMQ's rabbit_password: base64(4-byte random salt ++ H(salt ++
 * password)), H by algorithm (one of the ACCESS_HASH_ names). hash writes a
 * NUL-terminated hash into out (cap >= 96 fits every algorithm); false for
 * an unknown algorithm or too small a buffer. check: whether `password`
 * matches; false for "" (no password), a malformed hash or an unknown
 * algorithm. */
bool access_algorithm_known(const char *algorithm);
bool access_hash_password(const char *algorithm, amqp_bytes password, char *out, size_t cap);
bool access_check_password(const char *algorithm, const char *hash, amqp_bytes password);
/* ACCESS_TAG_ bits of a comma-separated tag list. */
unsigned access_parse_tags(const char *tags);
/* Whether `re` compiles as a permission regex ("" = "^$"); else the reason. */
bool access_regex_check(const char *re, char *err, size_t errlen);

/* ---- users ---- */

/* A user to create or update: either `password` (cleartext, hashed here
 * with hashing_algorithm) or `password_hash` (RabbitMQ's base64, "" = no
 * password, with its hashing_algorithm). hashing_algorithm NULL means
 * rabbit_password_hashing_sha256; tags NULL means none. */
typedef struct access_user_spec {
    const char *name, *password, *password_hash, *hashing_algorithm, *tags;
    /* limits to set (a definitions import), each with its set_ flag; the
     * others stay as the user has them (a new user has none) */
    bool set_max_connections, set_max_channels;
    meta_limit max_connections, max_channels;
} access_user_spec;

/* Checks a spec without changing anything: name 1..255 bytes, a known
 * algorithm, a password or a well-formed hash. */
bool access_validate_user(const access_user_spec *u, char *err, size_t errlen);
bool access_put_user(access_control *a, const access_user_spec *u, char *err, size_t errlen);
/* Also deletes the user's permissions and topic permissions and closes
 * their connections with 320 "user 'x' is deleted" (user_deleted), as RabbitMQ 3.10
 * does. false if there is no such user. */
bool access_delete_user(access_control *a, const char *name, char *err, size_t errlen);
const access_user *access_find_user(const access_control *a, const char *name);
/* In name order; fn must not change users. */
void access_foreach_user(const access_control *a, void (*fn)(void *arg, const access_user *u), void *arg);
const char *access_user_name(const access_user *u);
const char *access_user_password_hash(const access_user *u);
const char *access_user_hashing_algorithm(const access_user *u);
const char *access_user_tags(const access_user *u); /* comma-separated, as given */
unsigned access_user_tag_flags(const access_user *u);
/* RabbitMQ's user limits (max-connections, max-channels): unset, or a
 * value (negative: no limit; 0: none allowed). conn/ enforces them. */
meta_limit access_user_max_connections(const access_user *u);
meta_limit access_user_max_channels(const access_user *u);
/* Sets (value.set) or clears one limit, `limit` "max-connections" or
 * "max-channels", of user `name`, the rest of the user kept. false with
 * err "no_such_user", an unknown limit, or the store refused. */
bool access_set_user_limit(access_control *a, const char *name, const char *limit,
                           meta_limit value, char *err, size_t errlen);

/* The one login check, for AMQP (PLAIN, AMQPLAIN) and HTTP basic auth: the
 * user when the password matches (never for a blank password or a user
 * without one) and loopback_users allows the peer (`loopback`: it came
 * from 127.0.0.0/8 or ::1); else NULL with RabbitMQ's log reason in `why`
 * (may be NULL). The user lives until the next change of users. */
const access_user *access_login(access_control *a, amqp_bytes user, amqp_bytes password, bool loopback,
                                char *why, size_t whylen);
/* SASL EXTERNAL (a verified client certificate named the user): as
 * access_login without a password to check -- the user must exist. */
const access_user *access_login_external(access_control *a, amqp_bytes user, bool loopback,
                                         char *why, size_t whylen);

/* ---- permissions ---- */

/* Regexes of a permission compile; user and vhost names are well-formed
 * (not that they exist: an import may create them in the same go). */
bool access_validate_permission(const meta_permission *p, char *err, size_t errlen);
/* Sets (replaces) user's permissions in vhost; both must exist. */
bool access_put_permission(access_control *a, const meta_permission *p, char *err, size_t errlen);
/* false if there were none. */
bool access_clear_permission(access_control *a, const char *user, const char *vhost, char *err,
                             size_t errlen);
/* user / vhost NULL: any. In (user, vhost) order; the row lives during fn. */
void access_foreach_permission(const access_control *a, const char *user, const char *vhost,
                               void (*fn)(void *arg, const meta_permission *p), void *arg);
/* The permissions of `user` in `vhost`; NULL means no access to the vhost. */
const access_perms *access_find_perms(const access_control *a, amqp_bytes user, amqp_bytes vhost);
/* Whether p's `kind` regex matches resource `name` ("" = "amq.default"). */
bool access_allowed(access_control *a, const access_perms *p, access_kind kind, amqp_bytes name);

/* ---- topic permissions (write / read on routing keys of a topic exchange) ---- */

bool access_validate_topic_permission(const meta_topic_permission *p, char *err, size_t errlen);
bool access_put_topic_permission(access_control *a, const meta_topic_permission *p, char *err,
                                 size_t errlen);
/* exchange NULL: all of the user's in the vhost. false if there were none. */
bool access_clear_topic_permission(access_control *a, const char *user, const char *vhost,
                                   const char *exchange, char *err, size_t errlen);
void access_foreach_topic_permission(const access_control *a, const char *user, const char *vhost,
                                     void (*fn)(void *arg, const meta_topic_permission *p),
                                     void *arg);
/* Whether the user has any topic permission in the vhost (if not, every
 * routing key on every topic exchange is allowed). */
bool access_has_topic_perms(const access_control *a, amqp_bytes user, amqp_bytes vhost);
/* NULL: no topic permission for that exchange, so every key is allowed. */
const access_topic_perms *access_find_topic_perms(const access_control *a, amqp_bytes user,
                                                  amqp_bytes vhost, amqp_bytes exchange);
/* kind is ACCESS_WRITE or ACCESS_READ; {username} and {vhost} in the
 * pattern are replaced first. */
bool access_topic_allowed(access_control *a, const access_topic_perms *t, access_kind kind,
                          amqp_bytes key);

/* ---- for loading at start (admin_load) ---- */

/* Loading from the store at start (no write back). */
void access_load_user(access_control *a, const meta_user *u);
void access_load_permission(access_control *a, const meta_permission *p);
void access_load_topic_permission(access_control *a, const meta_topic_permission *p);
/* Forgets the vhost's permissions (the store cascades on its own). */
void access_vhost_deleted(access_control *a, const char *vhost);
/* Throws away what is in memory and loads users and permissions again
 * from the store (after a failed meta_commit). */
bool access_reload(access_control *a);


/* ---- login brake (brake.c) ---------------------------------------------- */

/* A connection whose handshake fails before connection.open (a refused
 * login, a malformed login response, a wrong method or frame) is held this
 * long before its socket is closed, as RabbitMQ does (SILENT_CLOSE_DELAY). */
#define LOGIN_HOLD_MS 3000

/* Refused logins per source address, and the number of refused
 * connections held (see brake.c for the rules and the table). */

/* From cfg's login_brake_* settings; `seed` scrambles the table's hash.
 * NULL when out of memory. */
login_brake *login_brake_new(const config *cfg, uint64_t seed);
void login_brake_free(login_brake *b);
/* The key an address is counted under: IPv4 (also IPv4-mapped IPv6) whole,
 * other IPv6 addresses by their /64. */
void login_brake_key(const struct sockaddr *sa, uint8_t key[16]);
/* ms left of the brake on `key`; 0 when it is not braked. */
uint64_t login_brake_left(login_brake *b, const uint8_t key[16], uint64_t now_ms);
/* Counts a refused login from `key`; true when it brakes the address. */
bool login_brake_failed(login_brake *b, const uint8_t key[16], uint64_t now_ms);
/* A refused connection is to be held: false when login_brake_max_held are
 * held already (it is closed at once then); each true is released once. */
bool login_brake_hold(login_brake *b);
void login_brake_release(login_brake *b);
/* Refused connections held now. */
uint32_t login_brake_held(const login_brake *b);
/* The server's brake. */
login_brake *server_login_brake(server *s);


#endif
