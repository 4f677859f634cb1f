/* store metadata (sqlite3): round trips of exchanges, queues, bindings,
 * vhosts, users, permissions, topic permissions, policies, runtime
 * parameters and settings, idempotence, queue ids, delete cascades
 * (exchange, queue, user, vhost), reopen, meta_begin/commit/rollback (also
 * across a crash), WAL mode, schema migration (from an empty file and from
 * versions 1 and 2) and refusal of
 * bad files, error logging, and a 10,000-binding load. Each test works in its own temp dir; a second, raw sqlite3
 * connection inspects or prepares the file where the interface cannot. */
#include <fcntl.h>
#include <ftw.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "../../store/store.h"

/* ---- temp dirs ---------------------------------------------------------- */

typedef struct fixture {
    char dir[256];
    char db[300];
    meta *m;
} fixture;

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static fixture *fx_new(void)
{
    fixture *f = calloc(1, sizeof *f);
    const char *tmp = getenv("TMPDIR");
    char err[512] = "";

    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "%s/warren-meta-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof f->db, "%s/metadata.db", f->dir);
    f->m = meta_open(f->dir, err, sizeof err);
    if (f->m == NULL)
        fail_msg("meta_open: %s", err);
    return f;
}

static void fx_reopen(fixture *f)
{
    char err[512] = "";

    meta_close(f->m);
    f->m = meta_open(f->dir, err, sizeof err);
    if (f->m == NULL)
        fail_msg("meta_open: %s", err);
}

static void fx_free(fixture *f)
{
    meta_close(f->m);
    nftw(f->dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    free(f);
}

/* An empty temp dir with no database opened yet (for hand-made files). */
static fixture *fx_empty(void)
{
    fixture *f = fx_new();
    meta_close(f->m);
    f->m = NULL;
    char side[320];

    assert_int_equal(unlink(f->db), 0);
    snprintf(side, sizeof side, "%s-wal", f->db);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", f->db);
    unlink(side);
    return f;
}

/* ---- a raw connection for inspection ------------------------------------ */

static sqlite3 *raw_open(const char *path)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    return db;
}

static void raw_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
}

static long long raw_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    long long v;

    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static void raw_text(sqlite3 *db, const char *sql, char *out, size_t cap)
{
    sqlite3_stmt *st;

    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
}

/* ---- collecting what meta_load hands out (copies: slices die) ----------- */

typedef struct blob {
    uint8_t *p;
    uint32_t len;
} blob;

typedef struct row {
    char *vhost, *name, *type, *dest; /* dest: bindings only; name = source */
    bool flag_a, flag_b;              /* auto_delete/internal, or dest_is_exchange */
    uint64_t id;
    blob key, args;
    char *f[5]; /* the text fields of the version-2 kinds, in struct order */
    int priority;
} row;

/* The kinds, numbered as note_kind records them. */
enum {
    K_EXCHANGE, K_QUEUE, K_BINDING, K_VHOST, K_USER, K_PERMISSION, K_TOPIC, K_POLICY,
    K_GLOBAL_PARAM, K_PARAM, K_N
};

typedef struct loaded {
    row *ex, *q, *b;
    size_t nex, nq, nb, cap_b;
    row *k[K_N]; /* version-2 and -3 kinds: k[K_VHOST] ... k[K_PARAM] */
    size_t nk[K_N];
    int order[K_N]; /* which kinds came in which order */
    int norder;
} loaded;

static blob copy_bytes(amqp_bytes b)
{
    blob c = {malloc(b.len ? b.len : 1), b.len};
    assert_non_null(c.p);
    if (b.len)
        memcpy(c.p, b.ptr, b.len);
    return c;
}

static char *copy_str(const char *s)
{
    assert_non_null(s);
    return strdup(s);
}

static void note_kind(loaded *l, int kind)
{
    if (l->norder == 0 || l->order[l->norder - 1] != kind) {
        assert_true(l->norder < K_N);
        l->order[l->norder++] = kind;
    }
}

static row *grow(row **arr, size_t *n)
{
    *arr = realloc(*arr, (*n + 1) * sizeof **arr);
    assert_non_null(*arr);
    memset(&(*arr)[*n], 0, sizeof **arr);
    return &(*arr)[(*n)++];
}

static void on_exchange(void *ctx, const meta_exchange *e)
{
    loaded *l = ctx;
    note_kind(l, 0);
    row *r = grow(&l->ex, &l->nex);
    r->vhost = copy_str(e->vhost);
    r->name = copy_str(e->name);
    r->type = copy_str(e->type);
    r->flag_a = e->auto_delete;
    r->flag_b = e->internal;
    r->args = copy_bytes(e->arguments);
}

static void on_queue(void *ctx, const meta_queue *q)
{
    loaded *l = ctx;
    note_kind(l, 1);
    row *r = grow(&l->q, &l->nq);
    r->id = q->id;
    r->vhost = copy_str(q->vhost);
    r->name = copy_str(q->name);
    r->flag_a = q->auto_delete;
    r->args = copy_bytes(q->arguments);
}

static void on_binding(void *ctx, const meta_binding *b)
{
    loaded *l = ctx;
    note_kind(l, 2);
    if (l->nb == l->cap_b) { /* amortised: the 10k test loads through here */
        l->cap_b = l->cap_b ? 2 * l->cap_b : 16;
        l->b = realloc(l->b, l->cap_b * sizeof *l->b);
        assert_non_null(l->b);
    }
    row *r = &l->b[l->nb++];
    memset(r, 0, sizeof *r);
    r->vhost = copy_str(b->vhost);
    r->name = copy_str(b->source);
    r->dest = copy_str(b->destination);
    r->flag_a = b->destination_is_exchange;
    r->key = copy_bytes(b->routing_key);
    r->args = copy_bytes(b->arguments);
}

/* A version-2 row: up to five strings (NULL ends the list early). */
static row *text_row(loaded *l, int kind, const char *a, const char *b, const char *c,
                     const char *d, const char *e)
{
    const char *texts[5] = {a, b, c, d, e};
    note_kind(l, kind);
    row *r = grow(&l->k[kind], &l->nk[kind]);
    for (int i = 0; i < 5 && texts[i]; i++)
        r->f[i] = copy_str(texts[i]);
    return r;
}

static void on_vhost(void *ctx, const meta_vhost *v)
{
    row *r = text_row(ctx, K_VHOST, v->name, v->description, v->tags, v->default_queue_type,
                      NULL);
    r->flag_a = v->tracing;
}

/* A user's limits, when it has any, as its fifth field: "conns=N chans=N"
 * ("-" for one not set). */
static void on_user(void *ctx, const meta_user *u)
{
    char limits[64], conns[24] = "-", chans[24] = "-";
    if (u->max_connections.set)
        snprintf(conns, sizeof conns, "%lld", (long long)u->max_connections.value);
    if (u->max_channels.set)
        snprintf(chans, sizeof chans, "%lld", (long long)u->max_channels.value);
    snprintf(limits, sizeof limits, "conns=%s chans=%s", conns, chans);
    bool any = u->max_connections.set || u->max_channels.set;
    text_row(ctx, K_USER, u->name, u->password_hash, u->hashing_algorithm, u->tags,
             any ? limits : NULL);
}

static void on_permission(void *ctx, const meta_permission *p)
{
    text_row(ctx, K_PERMISSION, p->user, p->vhost, p->configure, p->write, p->read);
}

static void on_topic_permission(void *ctx, const meta_topic_permission *p)
{
    text_row(ctx, K_TOPIC, p->user, p->vhost, p->exchange, p->write, p->read);
}

static void on_policy(void *ctx, const meta_policy *p)
{
    row *r = text_row(ctx, K_POLICY, p->vhost, p->name, p->pattern, p->apply_to, NULL);
    r->priority = p->priority;
    r->args = copy_bytes(p->definition);
    r->flag_a = p->operator_policy;
}

/* A global parameter is (name, value); one of a vhost (vhost, component,
 * name, value). */
static void on_parameter(void *ctx, const meta_parameter *p)
{
    if (p->vhost)
        text_row(ctx, K_PARAM, p->vhost, p->component, p->name, p->value, NULL);
    else
        text_row(ctx, K_GLOBAL_PARAM, p->name, p->value, NULL, NULL, NULL);
}

static const meta_load_handlers all_handlers = {
    .exchange = on_exchange,
    .queue = on_queue,
    .binding = on_binding,
    .vhost = on_vhost,
    .user = on_user,
    .permission = on_permission,
    .topic_permission = on_topic_permission,
    .policy = on_policy,
    .parameter = on_parameter,
};

static void free_rows(row *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(r[i].vhost);
        free(r[i].name);
        free(r[i].type);
        free(r[i].dest);
        free(r[i].key.p);
        free(r[i].args.p);
        for (int k = 0; k < 5; k++)
            free(r[i].f[k]);
    }
    free(r);
}

static void loaded_free(loaded *l)
{
    free_rows(l->ex, l->nex);
    free_rows(l->q, l->nq);
    free_rows(l->b, l->nb);
    for (int k = 0; k < K_N; k++)
        free_rows(l->k[k], l->nk[k]);
    memset(l, 0, sizeof *l);
}

static void load(fixture *f, loaded *l)
{
    memset(l, 0, sizeof *l);
    assert_true(meta_load(f->m, &all_handlers, l));
}

static void assert_blob(blob got, amqp_bytes want)
{
    assert_int_equal(got.len, want.len);
    if (want.len)
        assert_memory_equal(got.p, want.ptr, want.len);
}

/* ---- data --------------------------------------------------------------- */

/* Every byte value, NULs included, so nothing treats a blob as a string. */
static uint8_t all_bytes[256];
static const uint8_t key_with_nul[] = {'a', 0, 'b', 0xff, 0};

#define BYTES(arr) ((amqp_bytes){(arr), sizeof(arr)})
#define NONE ((amqp_bytes){NULL, 0})

static meta_exchange ex(const char *vhost, const char *name, const char *type, amqp_bytes args)
{
    return (meta_exchange){vhost, name, type, false, false, args};
}

static meta_queue qu(const char *vhost, const char *name, amqp_bytes args)
{
    return (meta_queue){0, vhost, name, false, args};
}

static meta_binding bq(const char *vhost, const char *src, const char *queue, amqp_bytes key,
                       amqp_bytes args)
{
    return (meta_binding){vhost, src, queue, false, key, args};
}

static meta_binding bx(const char *vhost, const char *src, const char *dest, amqp_bytes key,
                       amqp_bytes args)
{
    return (meta_binding){vhost, src, dest, true, key, args};
}

static int setup_bytes(void **state)
{
    for (int i = 0; i < 256; i++)
        all_bytes[i] = (uint8_t)(255 - i);
    return 0;
}

/* ---- round trips -------------------------------------------------------- */

static void test_exchange_round_trip(void **state)
{
    fixture *f = fx_new();
    meta_exchange e1 = ex("/", "logs", "topic", BYTES(all_bytes));
    meta_exchange e2 = {"/", "", "direct", false, false, NONE}; /* default exchange name */
    meta_exchange e3 = {"other", "internal.x", "headers", true, true, NONE};
    loaded l;

    assert_true(meta_put_exchange(f->m, &e1));
    assert_true(meta_put_exchange(f->m, &e2));
    assert_true(meta_put_exchange(f->m, &e3));
    load(f, &l);
    assert_int_equal(l.nex, 3);
    assert_int_equal(l.nq + l.nb, 0);
    assert_string_equal(l.ex[0].vhost, "/");
    assert_string_equal(l.ex[0].name, "logs");
    assert_string_equal(l.ex[0].type, "topic");
    assert_false(l.ex[0].flag_a);
    assert_false(l.ex[0].flag_b);
    assert_blob(l.ex[0].args, BYTES(all_bytes));
    assert_string_equal(l.ex[1].name, "");
    assert_int_equal(l.ex[1].args.len, 0);
    assert_string_equal(l.ex[2].vhost, "other");
    assert_string_equal(l.ex[2].type, "headers");
    assert_true(l.ex[2].flag_a);
    assert_true(l.ex[2].flag_b);
    loaded_free(&l);
    fx_free(f);
}

static void test_queue_round_trip(void **state)
{
    fixture *f = fx_new();
    meta_queue q1 = qu("/", "orders", BYTES(all_bytes));
    meta_queue q2 = {0, "/", "tmp", true, NONE};
    meta_queue q3 = qu("v2", "orders", BYTES(key_with_nul)); /* same name, other vhost */
    loaded l;

    assert_true(meta_put_queue(f->m, &q1));
    assert_true(meta_put_queue(f->m, &q2));
    assert_true(meta_put_queue(f->m, &q3));
    assert_true(q1.id > 0);
    assert_true(q2.id != q1.id && q3.id != q1.id && q3.id != q2.id);
    load(f, &l);
    assert_int_equal(l.nq, 3);
    assert_int_equal(l.q[0].id, q1.id);
    assert_string_equal(l.q[0].name, "orders");
    assert_false(l.q[0].flag_a);
    assert_blob(l.q[0].args, BYTES(all_bytes));
    assert_int_equal(l.q[1].id, q2.id);
    assert_true(l.q[1].flag_a);
    assert_int_equal(l.q[1].args.len, 0);
    assert_int_equal(l.q[2].id, q3.id);
    assert_string_equal(l.q[2].vhost, "v2");
    assert_blob(l.q[2].args, BYTES(key_with_nul));
    loaded_free(&l);
    fx_free(f);
}

static void test_binding_round_trip(void **state)
{
    fixture *f = fx_new();
    meta_binding b1 = bq("/", "amq.topic", "orders", BYTES(key_with_nul), BYTES(all_bytes));
    meta_binding b2 = bx("/", "logs", "audit", AMQP_CSTR("#"), NONE);
    meta_binding b3 = bq("/", "", "orders", NONE, NONE); /* empty key, default exchange */
    loaded l;

    assert_true(meta_put_binding(f->m, &b1));
    assert_true(meta_put_binding(f->m, &b2));
    assert_true(meta_put_binding(f->m, &b3));
    load(f, &l);
    assert_int_equal(l.nb, 3);
    assert_string_equal(l.b[0].name, "amq.topic");
    assert_string_equal(l.b[0].dest, "orders");
    assert_false(l.b[0].flag_a);
    assert_blob(l.b[0].key, BYTES(key_with_nul));
    assert_blob(l.b[0].args, BYTES(all_bytes));
    assert_string_equal(l.b[1].dest, "audit");
    assert_true(l.b[1].flag_a);
    assert_blob(l.b[1].key, AMQP_CSTR("#"));
    assert_int_equal(l.b[1].args.len, 0);
    assert_string_equal(l.b[2].name, "");
    assert_int_equal(l.b[2].key.len, 0);
    loaded_free(&l);
    fx_free(f);
}

/* Exchanges, then queues, then bindings, each in first-insertion order; an
 * update (upsert) does not move a row to the end. */
static void test_load_order(void **state)
{
    fixture *f = fx_new();
    const char *names[] = {"c", "a", "b"};
    loaded l;

    for (int i = 0; i < 3; i++) {
        meta_binding b = bq("/", names[i], "q", NONE, NONE);
        meta_queue q = qu("/", names[i], NONE);
        meta_exchange e = ex("/", names[i], "fanout", NONE);
        assert_true(meta_put_binding(f->m, &b));
        assert_true(meta_put_queue(f->m, &q));
        assert_true(meta_put_exchange(f->m, &e));
    }
    meta_exchange e = ex("/", "c", "direct", NONE);
    meta_queue q = qu("/", "c", BYTES(key_with_nul));
    assert_true(meta_put_exchange(f->m, &e));
    assert_true(meta_put_queue(f->m, &q));
    load(f, &l);
    assert_int_equal(l.norder, 3);
    assert_int_equal(l.order[0], 0);
    assert_int_equal(l.order[1], 1);
    assert_int_equal(l.order[2], 2);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(l.ex[i].name, names[i]);
        assert_string_equal(l.q[i].name, names[i]);
        assert_string_equal(l.b[i].name, names[i]);
    }
    assert_string_equal(l.ex[0].type, "direct");
    assert_blob(l.q[0].args, BYTES(key_with_nul));
    loaded_free(&l);

    /* A NULL handler skips its table. */
    meta_load_handlers only_queues = {.queue = on_queue};
    memset(&l, 0, sizeof l);
    assert_true(meta_load(f->m, &only_queues, &l));
    assert_int_equal(l.nex + l.nb, 0);
    assert_int_equal(l.nq, 3);
    loaded_free(&l);
    fx_free(f);
}

/* ---- idempotence and identity ------------------------------------------- */

static void test_idempotent_puts_and_deletes(void **state)
{
    fixture *f = fx_new();
    meta_exchange e = ex("/", "x", "direct", BYTES(all_bytes));
    meta_queue q = qu("/", "q", NONE);
    meta_binding b = bq("/", "x", "q", AMQP_CSTR("k"), BYTES(all_bytes));
    loaded l;

    for (int i = 0; i < 3; i++) {
        assert_true(meta_put_exchange(f->m, &e));
        assert_true(meta_put_queue(f->m, &q));
        assert_true(meta_put_binding(f->m, &b));
    }
    load(f, &l);
    assert_int_equal(l.nex, 1);
    assert_int_equal(l.nq, 1);
    assert_int_equal(l.nb, 1);
    loaded_free(&l);

    for (int i = 0; i < 2; i++) {
        assert_true(meta_delete_binding(f->m, &b));
        assert_true(meta_delete_queue(f->m, "/", "q"));
        assert_true(meta_delete_exchange(f->m, "/", "x"));
    }
    /* Deleting what never existed succeeds too. */
    assert_true(meta_delete_queue(f->m, "nowhere", "nothing"));
    assert_true(meta_delete_exchange(f->m, "nowhere", "nothing"));
    load(f, &l);
    assert_int_equal(l.nex + l.nq + l.nb, 0);
    loaded_free(&l);
    fx_free(f);
}

static bool blob_equal(blob a, amqp_bytes b)
{
    return a.len == b.len && (b.len == 0 || memcmp(a.p, b.ptr, b.len) == 0);
}

static int count_equal(const loaded *l, const meta_binding *b)
{
    int n = 0;
    for (size_t i = 0; i < l->nb; i++)
        n += strcmp(l->b[i].vhost, b->vhost) == 0 && strcmp(l->b[i].name, b->source) == 0 &&
             strcmp(l->b[i].dest, b->destination) == 0 &&
             l->b[i].flag_a == b->destination_is_exchange && blob_equal(l->b[i].key, b->routing_key) &&
             blob_equal(l->b[i].args, b->arguments);
    return n;
}

/* A binding is identified by all six fields: change any one and it is a
 * different binding; delete removes exactly the equal one. */
static void test_binding_identity(void **state)
{
    static const uint8_t args2[] = {0, 1, 2};
    fixture *f = fx_new();
    meta_binding base = bq("/", "x", "d", AMQP_CSTR("k"), BYTES(all_bytes));
    meta_binding variants[] = {
        base,
        bq("v2", "x", "d", AMQP_CSTR("k"), BYTES(all_bytes)),
        bq("/", "y", "d", AMQP_CSTR("k"), BYTES(all_bytes)),
        bq("/", "x", "e", AMQP_CSTR("k"), BYTES(all_bytes)),
        bx("/", "x", "d", AMQP_CSTR("k"), BYTES(all_bytes)),
        bq("/", "x", "d", AMQP_CSTR("k2"), BYTES(all_bytes)),
        bq("/", "x", "d", BYTES(key_with_nul), BYTES(all_bytes)),
        bq("/", "x", "d", AMQP_CSTR("k"), BYTES(args2)),
        bq("/", "x", "d", AMQP_CSTR("k"), NONE),
    };
    size_t n = sizeof variants / sizeof variants[0];
    loaded l;

    for (size_t i = 0; i < n; i++)
        assert_true(meta_put_binding(f->m, &variants[i]));
    load(f, &l);
    assert_int_equal(l.nb, n);
    loaded_free(&l);

    assert_true(meta_delete_binding(f->m, &base));
    load(f, &l);
    assert_int_equal(l.nb, n - 1);
    assert_int_equal(count_equal(&l, &base), 0);
    for (size_t i = 1; i < n; i++)
        assert_int_equal(count_equal(&l, &variants[i]), 1);
    loaded_free(&l);
    fx_free(f);
}

static void test_queue_id_stable_and_unique(void **state)
{
    fixture *f = fx_new();
    meta_queue a = qu("/", "a", NONE), b = qu("/", "b", NONE);
    uint64_t id_a, id_b;
    loaded l;

    assert_true(meta_put_queue(f->m, &a));
    assert_true(meta_put_queue(f->m, &b));
    id_a = a.id;
    id_b = b.id;
    assert_true(id_a > 0 && id_b > 0 && id_a != id_b);

    /* An update keeps the id and takes the new fields. */
    meta_queue a2 = {0, "/", "a", true, BYTES(all_bytes)};
    assert_true(meta_put_queue(f->m, &a2));
    assert_int_equal(a2.id, id_a);
    load(f, &l);
    assert_int_equal(l.nq, 2);
    assert_int_equal(l.q[0].id, id_a);
    assert_true(l.q[0].flag_a);
    assert_blob(l.q[0].args, BYTES(all_bytes));
    loaded_free(&l);

    /* Ids are never reused: not after deleting the newest queue, not after
     * a reopen, not for a re-declared queue of the same name. */
    assert_true(meta_delete_queue(f->m, "/", "b"));
    fx_reopen(f);
    meta_queue b2 = qu("/", "b", NONE), c = qu("/", "c", NONE);
    assert_true(meta_put_queue(f->m, &b2));
    assert_true(meta_put_queue(f->m, &c));
    assert_true(b2.id > id_b);
    assert_true(c.id > b2.id);
    meta_queue a3 = qu("/", "a", NONE);
    assert_true(meta_put_queue(f->m, &a3));
    assert_int_equal(a3.id, id_a);
    fx_free(f);
}

/* ---- delete cascades ---------------------------------------------------- */

static bool has_binding(const loaded *l, const char *vhost, const char *src, const char *dest,
                        bool to_exchange)
{
    for (size_t i = 0; i < l->nb; i++)
        if (strcmp(l->b[i].vhost, vhost) == 0 && strcmp(l->b[i].name, src) == 0 &&
            strcmp(l->b[i].dest, dest) == 0 && l->b[i].flag_a == to_exchange)
            return true;
    return false;
}

/* A queue "n" and an exchange "n" in vhost "/", plus the same in "v2". */
static void put_cascade_world(fixture *f)
{
    static const char *vhosts[] = {"/", "v2"};
    for (int v = 0; v < 2; v++) {
        const char *vh = vhosts[v];
        meta_exchange xs[] = {ex(vh, "n", "fanout", NONE), ex(vh, "src", "direct", NONE),
                              ex(vh, "dst", "fanout", NONE)};
        meta_queue q = qu(vh, "n", NONE);
        meta_binding bs[] = {
            bq(vh, "src", "n", AMQP_CSTR("a"), NONE), /* to queue n */
            bq(vh, "src", "n", AMQP_CSTR("b"), NONE), /* to queue n */
            bx(vh, "src", "n", AMQP_CSTR("c"), NONE), /* to exchange n */
            bx(vh, "n", "dst", AMQP_CSTR("d"), NONE), /* from exchange n */
            bq(vh, "n", "n", AMQP_CSTR("e"), NONE),   /* exchange n -> queue n */
            bx(vh, "src", "dst", AMQP_CSTR("f"), NONE),
            bx(vh, "n", "n", AMQP_CSTR("g"), NONE), /* exchange n -> itself */
        };
        for (size_t i = 0; i < 3; i++)
            assert_true(meta_put_exchange(f->m, &xs[i]));
        assert_true(meta_put_queue(f->m, &q));
        for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
            assert_true(meta_put_binding(f->m, &bs[i]));
    }
}

static void test_delete_queue_cascades(void **state)
{
    fixture *f = fx_new();
    loaded l;

    put_cascade_world(f);
    assert_true(meta_delete_queue(f->m, "/", "n"));
    load(f, &l);
    assert_int_equal(l.nq, 1);
    assert_string_equal(l.q[0].vhost, "v2");
    assert_int_equal(l.nex, 6);
    /* In "/": the three bindings to queue n are gone; those to and from
     * exchange n stay. "v2" is untouched. */
    assert_int_equal(l.nb, 7 + 4);
    assert_false(has_binding(&l, "/", "src", "n", false));
    assert_false(has_binding(&l, "/", "n", "n", false));
    assert_true(has_binding(&l, "/", "src", "n", true));
    assert_true(has_binding(&l, "/", "n", "dst", true));
    assert_true(has_binding(&l, "/", "src", "dst", true));
    assert_true(has_binding(&l, "/", "n", "n", true));
    assert_true(has_binding(&l, "v2", "src", "n", false));
    loaded_free(&l);
    fx_free(f);
}

static void test_delete_exchange_cascades(void **state)
{
    fixture *f = fx_new();
    loaded l;

    put_cascade_world(f);
    assert_true(meta_delete_exchange(f->m, "/", "n"));
    load(f, &l);
    assert_int_equal(l.nex, 5);
    assert_int_equal(l.nq, 2);
    /* In "/": gone are src->exchange n, n->dst, n->queue n and n->n; the
     * two bindings to queue n and src->dst stay. */
    assert_int_equal(l.nb, 7 + 3);
    assert_false(has_binding(&l, "/", "src", "n", true));
    assert_false(has_binding(&l, "/", "n", "dst", true));
    assert_false(has_binding(&l, "/", "n", "n", false));
    assert_false(has_binding(&l, "/", "n", "n", true));
    assert_true(has_binding(&l, "/", "src", "n", false));
    assert_true(has_binding(&l, "/", "src", "dst", true));
    assert_true(has_binding(&l, "v2", "n", "dst", true));
    loaded_free(&l);

    /* The cascade survives a reopen (it was committed, not just cached). */
    fx_reopen(f);
    load(f, &l);
    assert_int_equal(l.nb, 10);
    loaded_free(&l);
    fx_free(f);
}

/* ---- persistence -------------------------------------------------------- */

static void test_reopen_keeps_everything(void **state)
{
    fixture *f = fx_new();
    meta_exchange e = {"/", "x", "topic", true, true, BYTES(all_bytes)};
    meta_queue q = {0, "/", "q", true, BYTES(key_with_nul)};
    meta_binding b = bq("/", "x", "q", BYTES(key_with_nul), BYTES(all_bytes));
    loaded l;

    assert_true(meta_put_exchange(f->m, &e));
    assert_true(meta_put_queue(f->m, &q));
    assert_true(meta_put_binding(f->m, &b));
    fx_reopen(f);
    fx_reopen(f);
    load(f, &l);
    assert_int_equal(l.nex, 1);
    assert_int_equal(l.nq, 1);
    assert_int_equal(l.nb, 1);
    assert_string_equal(l.ex[0].type, "topic");
    assert_true(l.ex[0].flag_a && l.ex[0].flag_b);
    assert_blob(l.ex[0].args, BYTES(all_bytes));
    assert_int_equal(l.q[0].id, q.id);
    assert_true(l.q[0].flag_a);
    assert_blob(l.q[0].args, BYTES(key_with_nul));
    assert_blob(l.b[0].key, BYTES(key_with_nul));
    assert_blob(l.b[0].args, BYTES(all_bytes));
    loaded_free(&l);
    fx_free(f);
}

/* What a put commits is in the file at once, visible to another connection
 * while meta still has it open (nothing waits for close). */
static void test_commit_visible_before_close(void **state)
{
    fixture *f = fx_new();
    meta_queue q = qu("/", "q", NONE);
    sqlite3 *db;

    assert_true(meta_put_queue(f->m, &q));
    db = raw_open(f->db);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM queues WHERE name = 'q'"), 1);
    sqlite3_close(db);
    fx_free(f);
}

static void test_wal_mode_and_version(void **state)
{
    fixture *f = fx_new();
    char mode[32];
    char wal[320];
    struct stat sb;
    sqlite3 *db = raw_open(f->db);

    /* journal_mode=WAL is persistent, so another connection sees it. */
    raw_text(db, "PRAGMA journal_mode", mode, sizeof mode);
    assert_string_equal(mode, "wal");
    assert_int_equal(raw_int(db, "PRAGMA user_version"), 5);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table'"
                                 " AND name IN ('exchanges', 'queues', 'bindings', 'vhosts',"
                                 " 'users', 'permissions', 'topic_permissions', 'policies',"
                                 " 'settings', 'parameters', 'global_parameters', 'counters')"),
                     12);
    sqlite3_close(db);
    snprintf(wal, sizeof wal, "%s-wal", f->db);
    assert_int_equal(stat(wal, &sb), 0);
    fx_free(f);
}

/* ---- migration and bad files -------------------------------------------- */

/* Version 0 as an empty (zero-byte) file: migrated to 3 and usable. */
static void test_migrate_from_empty_file(void **state)
{
    fixture *f = fx_empty();
    char err[512] = "";
    sqlite3 *db;

    write_file(f->db, "", 0);
    f->m = meta_open(f->dir, err, sizeof err);
    if (f->m == NULL)
        fail_msg("meta_open: %s", err);
    meta_queue q = qu("/", "q", NONE);
    assert_true(meta_put_queue(f->m, &q));
    db = raw_open(f->db);
    assert_int_equal(raw_int(db, "PRAGMA user_version"), 5);
    sqlite3_close(db);
    fx_free(f);
}

/* Version 0 as a database with a pre-version table of its own: migrated,
 * and the old table and its rows are left alone. */
static void test_migrate_keeps_foreign_tables(void **state)
{
    fixture *f = fx_empty();
    char err[512] = "";
    sqlite3 *db = raw_open(f->db);
    loaded l;

    raw_exec(db, "PRAGMA journal_mode = DELETE;"
                 "CREATE TABLE notes (note TEXT);"
                 "INSERT INTO notes VALUES ('kept');");
    assert_int_equal(raw_int(db, "PRAGMA user_version"), 0);
    sqlite3_close(db);

    f->m = meta_open(f->dir, err, sizeof err);
    if (f->m == NULL)
        fail_msg("meta_open: %s", err);
    load(f, &l);
    assert_int_equal(l.nex + l.nq + l.nb, 0);
    loaded_free(&l);
    db = raw_open(f->db);
    assert_int_equal(raw_int(db, "PRAGMA user_version"), 5);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM notes"), 1);
    sqlite3_close(db);
    fx_free(f);
}

/* A version-0 database whose tables clash with version 1 cannot migrate:
 * open fails naming the step, and the step rolled back (still version 0,
 * the old table intact, no half-made schema). */
static void test_failed_migration_rolls_back(void **state)
{
    fixture *f = fx_empty();
    char err[512] = "";
    sqlite3 *db = raw_open(f->db);

    raw_exec(db, "CREATE TABLE queues (name TEXT PRIMARY KEY, durable INTEGER);"
                 "INSERT INTO queues VALUES ('legacy', 1);");
    sqlite3_close(db);

    assert_null(meta_open(f->dir, err, sizeof err));
    assert_non_null(strstr(err, f->db));
    assert_non_null(strstr(err, "migrating schema from version 0 to 1"));
    assert_non_null(strstr(err, "already exists"));
    db = raw_open(f->db);
    assert_int_equal(raw_int(db, "PRAGMA user_version"), 0);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM queues WHERE name = 'legacy'"), 1);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'exchanges'"),
                     0);
    sqlite3_close(db);
    fx_free(f);
}

static void test_newer_schema_refused(void **state)
{
    fixture *f = fx_empty();
    char err[512] = "";
    sqlite3 *db = raw_open(f->db);

    raw_exec(db, "PRAGMA user_version = 7");
    sqlite3_close(db);
    assert_null(meta_open(f->dir, err, sizeof err));
    assert_non_null(strstr(err, f->db));
    assert_non_null(strstr(err, "schema version 7 is newer"));
    fx_free(f);
}

static void test_not_a_database(void **state)
{
    static const char junk[] = "this is not an sqlite database, it is a text file\n"
                               "with more than one hundred bytes in it, so sqlite reads a "
                               "whole header and rejects it.\n";
    fixture *f = fx_empty();
    char err[512] = "";
    char want[400];

    write_file(f->db, junk, sizeof junk - 1);
    assert_null(meta_open(f->dir, err, sizeof err));
    snprintf(want, sizeof want, "%s: file is not a database", f->db);
    assert_string_equal(err, want);
    fx_free(f);
}

/* A real database whose pages after the first were overwritten: refused at
 * open with the path in the message. */
static void test_corrupt_database(void **state)
{
    fixture *f = fx_new();
    char err[512] = "";
    uint8_t junk[4096];
    int fd;

    for (int i = 0; i < 200; i++) {
        char name[32];
        snprintf(name, sizeof name, "queue-%d", i);
        meta_queue q = qu("/", name, BYTES(all_bytes));
        assert_true(meta_put_queue(f->m, &q));
    }
    meta_close(f->m); /* checkpoints the WAL into the file */
    f->m = NULL;
    memset(junk, 0xa5, sizeof junk);
    fd = open(f->db, O_WRONLY);
    assert_true(fd >= 0);
    for (off_t off = 4096; off < 4096 * 8; off += sizeof junk)
        assert_int_equal(pwrite(fd, junk, sizeof junk, off), (ssize_t)sizeof junk);
    close(fd);

    assert_null(meta_open(f->dir, err, sizeof err));
    assert_int_equal(strncmp(err, f->db, strlen(f->db)), 0);
    assert_true(strstr(err, "corrupt") != NULL || strstr(err, "malformed") != NULL);
    assert_null(strchr(err, '\n')); /* one line, fit for a log */
    printf("corrupt database refused: %s\n", err);
    fx_free(f);
}

static void test_unopenable_path(void **state)
{
    char err[512] = "";

    assert_null(meta_open("/nonexistent-warren-dir/deeper", err, sizeof err));
    assert_string_equal(err,
                        "/nonexistent-warren-dir/deeper/metadata.db: unable to open database file");
    /* err may be left out. */
    assert_null(meta_open("/nonexistent-warren-dir/deeper", NULL, 0));
}

/* ---- errors are logged in the broker's format --------------------------- */

static char *capture_stderr_begin(int *saved)
{
    static char path[] = "/tmp/warren-meta-stderr-XXXXXX";
    strcpy(path, "/tmp/warren-meta-stderr-XXXXXX");
    int fd = mkstemp(path);

    assert_true(fd >= 0);
    fflush(stderr);
    *saved = dup(STDERR_FILENO);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);
    close(fd);
    return path;
}

static void capture_stderr_end(int saved, const char *path, char *out, size_t cap)
{
    FILE *fp;
    size_t n;

    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    fp = fopen(path, "rb");
    assert_non_null(fp);
    n = fread(out, 1, cap - 1, fp);
    out[n] = 0;
    fclose(fp);
    unlink(path);
}

static void assert_log_line(const char *text, const char *tail_re)
{
    char re_text[512];
    regex_t re;

    snprintf(re_text, sizeof re_text,
             "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} \\[error\\] %s\n$",
             tail_re);
    assert_int_equal(regcomp(&re, re_text, REG_EXTENDED | REG_NOSUB), 0);
    if (regexec(&re, text, 0, NULL, 0) != 0)
        fail_msg("log line %s does not match %s", text, re_text);
    regfree(&re);
}

static void test_errors_logged(void **state)
{
    fixture *f = fx_new();
    char out[2048];
    int saved;
    char *path;
    loaded l;

    /* A NULL name violates NOT NULL: false and one log line, nothing stored. */
    meta_queue q = qu("/", NULL, NONE);
    q.id = 12345;
    path = capture_stderr_begin(&saved);
    bool ok = meta_put_queue(f->m, &q);
    capture_stderr_end(saved, path, out, sizeof out);
    assert_false(ok);
    assert_int_equal(q.id, 12345); /* untouched on failure */
    assert_log_line(out, "meta: put queue '\\(null\\)' in vhost '/': "
                         "NOT NULL constraint failed: queues\\.name");

    meta_binding b = bq("/", "x", NULL, NONE, NONE);
    path = capture_stderr_begin(&saved);
    ok = meta_put_binding(f->m, &b);
    capture_stderr_end(saved, path, out, sizeof out);
    assert_false(ok);
    assert_log_line(out, "meta: put binding from 'x' to queue '\\(null\\)' in vhost '/': "
                         "NOT NULL constraint failed: bindings\\.destination");

    meta_exchange e = ex("/", "x", NULL, NONE);
    path = capture_stderr_begin(&saved);
    ok = meta_put_exchange(f->m, &e);
    capture_stderr_end(saved, path, out, sizeof out);
    assert_false(ok);
    assert_log_line(out, "meta: put exchange 'x' in vhost '/': "
                         "NOT NULL constraint failed: exchanges\\.type");

    /* The handle still works after errors. */
    meta_queue good = qu("/", "good", NONE);
    assert_true(meta_put_queue(f->m, &good));
    assert_true(meta_delete_queue(f->m, "/", "good"));
    load(f, &l);
    assert_int_equal(l.nex + l.nq + l.nb, 0);
    loaded_free(&l);
    fx_free(f);
}

/* ---- scale -------------------------------------------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* 10,000 bindings load quickly. They are written in one transaction over a
 * raw connection (each meta put is its own fsync'd commit, timed here on a
 * sample of 100 for the record), then loaded through meta. */
static void test_many_bindings_load_fast(void **state)
{
    enum { N = 10000, SAMPLE = 100 };
    fixture *f = fx_new();
    sqlite3 *db;
    sqlite3_stmt *st;
    loaded l;
    double t0, put_ms, load_ms;
    char key[32];

    t0 = now_ms();
    for (int i = 0; i < SAMPLE; i++) {
        snprintf(key, sizeof key, "sample.%d", i);
        meta_binding b = bq("/", "amq.topic", "q", AMQP_CSTR(key), BYTES(key_with_nul));
        assert_true(meta_put_binding(f->m, &b));
    }
    put_ms = now_ms() - t0;

    db = raw_open(f->db);
    raw_exec(db, "BEGIN");
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "INSERT INTO bindings VALUES ('/', 'amq.topic', ?1, 0,"
                                        " ?2, x'00ff00')",
                                        -1, &st, NULL),
                     SQLITE_OK);
    for (int i = SAMPLE; i < N; i++) {
        char dest[32];
        snprintf(dest, sizeof dest, "queue-%d", i % 500);
        snprintf(key, sizeof key, "key.%d.#", i);
        sqlite3_bind_text(st, 1, dest, -1, SQLITE_TRANSIENT);
        sqlite3_bind_blob(st, 2, key, (int)strlen(key), SQLITE_TRANSIENT);
        assert_int_equal(sqlite3_step(st), SQLITE_DONE);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    raw_exec(db, "COMMIT");
    sqlite3_close(db);

    t0 = now_ms();
    load(f, &l);
    load_ms = now_ms() - t0;
    printf("meta: %d single puts %.1f ms (%.2f ms each, fsync per commit); "
           "load of %d bindings %.1f ms\n",
           SAMPLE, put_ms, put_ms / SAMPLE, N, load_ms);
    assert_int_equal(l.nb, N);
    assert_blob(l.b[0].key, AMQP_CSTR("sample.0"));
    assert_blob(l.b[N - 1].key, AMQP_CSTR("key.9999.#"));
    assert_string_equal(l.b[N - 1].dest, "queue-499");
    assert_true(load_ms < 2000); /* ~10 ms in practice; generous for sanitizers */
    loaded_free(&l);

    /* Deleting a queue with a few bindings among 10,000 uses the index. */
    int to_queue_7 = 0;
    for (int i = SAMPLE; i < N; i++)
        to_queue_7 += i % 500 == 7;
    t0 = now_ms();
    assert_true(meta_delete_queue(f->m, "/", "queue-7"));
    printf("meta: delete queue with %d of %d bindings %.1f ms\n", to_queue_7, N, now_ms() - t0);
    load(f, &l);
    assert_int_equal(l.nb, N - to_queue_7);
    loaded_free(&l);

    /* And an exchange that is the source of all of them. */
    t0 = now_ms();
    assert_true(meta_delete_exchange(f->m, "/", "amq.topic"));
    printf("meta: delete exchange with %d bindings %.1f ms\n", N - to_queue_7, now_ms() - t0);
    load(f, &l);
    assert_int_equal(l.nb, 0);
    loaded_free(&l);
    fx_free(f);
}

/* ---- version 2: users, vhosts, permissions, policies, settings ---------- */

static const char guest_hash[] = "bw/ZenBjZLWyOIVbJ664X1fHMYvmgBAyXqjSfR8tudJZfedy";

static void assert_fields(const row *r, const char *a, const char *b, const char *c,
                          const char *d, const char *e)
{
    const char *want[5] = {a, b, c, d, e};
    for (int i = 0; i < 5; i++) {
        if (want[i])
            assert_string_equal(r->f[i], want[i]);
        else
            assert_null(r->f[i]);
    }
}

/* A user's limits (schema 4): set, unset and negative ones kept as put,
 * across a reopen; a put replaces them with the row. */
static void test_user_limits(void **state)
{
    fixture *f = fx_new();
    meta_user u = {"lim", "", "rabbit_password_hashing_sha256", "", {true, 3}, {0}};
    loaded l;

    assert_true(meta_put_user(f->m, &u));
    fx_reopen(f);
    load(f, &l);
    assert_fields(&l.k[K_USER][0], "lim", "", "rabbit_password_hashing_sha256", "", "conns=3 chans=-");
    loaded_free(&l);
    u.max_connections = (meta_limit){0};
    u.max_channels = (meta_limit){true, -1};
    assert_true(meta_put_user(f->m, &u));
    load(f, &l);
    assert_fields(&l.k[K_USER][0], "lim", "", "rabbit_password_hashing_sha256", "", "conns=- chans=-1");
    loaded_free(&l);
    u.max_channels = (meta_limit){true, 0};
    assert_true(meta_put_user(f->m, &u));
    load(f, &l);
    assert_fields(&l.k[K_USER][0], "lim", "", "rabbit_password_hashing_sha256", "", "conns=- chans=0");
    loaded_free(&l);
    fx_free(f);
}

/* Puts, an update that keeps the row's place, and idempotent deletes. */
static void test_user_round_trip(void **state)
{
    fixture *f = fx_new();
    meta_user alice = {"alice", guest_hash, "rabbit_password_hashing_sha256", "administrator", {0}, {0}};
    meta_user bob = {"bob", "", "rabbit_password_hashing_sha256", "", {0}, {0}}; /* no password */
    meta_user alice2 = {"alice", "xyz", "rabbit_password_hashing_md5", "monitoring,my-team", {0}, {0}};
    loaded l;

    assert_true(meta_put_user(f->m, &alice));
    assert_true(meta_put_user(f->m, &bob));
    assert_true(meta_put_user(f->m, &bob));
    load(f, &l);
    assert_int_equal(l.nk[K_USER], 2);
    assert_fields(&l.k[K_USER][0], "alice", guest_hash, "rabbit_password_hashing_sha256",
                  "administrator", NULL);
    assert_fields(&l.k[K_USER][1], "bob", "", "rabbit_password_hashing_sha256", "", NULL);
    loaded_free(&l);

    assert_true(meta_put_user(f->m, &alice2));
    fx_reopen(f);
    load(f, &l);
    assert_int_equal(l.nk[K_USER], 2);
    assert_fields(&l.k[K_USER][0], "alice", "xyz", "rabbit_password_hashing_md5",
                  "monitoring,my-team", NULL);
    loaded_free(&l);

    for (int i = 0; i < 2; i++)
        assert_true(meta_delete_user(f->m, "alice"));
    assert_true(meta_delete_user(f->m, "nobody"));
    load(f, &l);
    assert_int_equal(l.nk[K_USER], 1);
    assert_string_equal(l.k[K_USER][0].f[0], "bob");
    loaded_free(&l);
    fx_free(f);
}

static void test_vhost_round_trip(void **state)
{
    fixture *f = fx_new();
    meta_vhost v1 = {"/", "Default virtual host", "", "", false};
    meta_vhost v2 = {"team-a", "orders & billing", "prod,eu", "quorum", true};
    meta_vhost v1b = {"/", "changed", "t1", "classic", true};
    loaded l;

    assert_true(meta_put_vhost(f->m, &v1));
    assert_true(meta_put_vhost(f->m, &v2));
    load(f, &l);
    assert_int_equal(l.nk[K_VHOST], 2);
    assert_fields(&l.k[K_VHOST][0], "/", "Default virtual host", "", "", NULL);
    assert_false(l.k[K_VHOST][0].flag_a);
    assert_fields(&l.k[K_VHOST][1], "team-a", "orders & billing", "prod,eu", "quorum", NULL);
    assert_true(l.k[K_VHOST][1].flag_a);
    loaded_free(&l);

    assert_true(meta_put_vhost(f->m, &v1b));
    load(f, &l);
    assert_int_equal(l.nk[K_VHOST], 2);
    assert_fields(&l.k[K_VHOST][0], "/", "changed", "t1", "classic", NULL);
    assert_true(l.k[K_VHOST][0].flag_a);
    loaded_free(&l);

    assert_true(meta_delete_vhost(f->m, "/"));
    assert_true(meta_delete_vhost(f->m, "/"));
    load(f, &l);
    assert_int_equal(l.nk[K_VHOST], 1);
    assert_string_equal(l.k[K_VHOST][0].f[0], "team-a");
    loaded_free(&l);
    fx_free(f);
}

/* One row per (user, vhost); "" regexes are kept as "". */
static void test_permission_round_trip(void **state)
{
    fixture *f = fx_new();
    meta_permission p1 = {"alice", "/", ".*", ".*", ".*"};
    meta_permission p2 = {"alice", "team-a", "", "^amq\\.gen.*", "^orders$"};
    meta_permission p3 = {"bob", "/", "^bob\\.", "", ""};
    meta_permission p1b = {"alice", "/", "^x$", "^y$", "^z$"};
    loaded l;

    assert_true(meta_put_permission(f->m, &p1));
    assert_true(meta_put_permission(f->m, &p2));
    assert_true(meta_put_permission(f->m, &p3));
    assert_true(meta_put_permission(f->m, &p1b));
    load(f, &l);
    assert_int_equal(l.nk[K_PERMISSION], 3);
    assert_fields(&l.k[K_PERMISSION][0], "alice", "/", "^x$", "^y$", "^z$");
    assert_fields(&l.k[K_PERMISSION][1], "alice", "team-a", "", "^amq\\.gen.*", "^orders$");
    assert_fields(&l.k[K_PERMISSION][2], "bob", "/", "^bob\\.", "", "");
    loaded_free(&l);

    assert_true(meta_delete_permission(f->m, "alice", "/"));
    assert_true(meta_delete_permission(f->m, "alice", "/"));
    assert_true(meta_delete_permission(f->m, "nobody", "nowhere"));
    load(f, &l);
    assert_int_equal(l.nk[K_PERMISSION], 2);
    assert_string_equal(l.k[K_PERMISSION][0].f[1], "team-a");
    assert_string_equal(l.k[K_PERMISSION][1].f[0], "bob");
    loaded_free(&l);
    fx_free(f);
}

/* One row per (user, vhost, exchange); delete one, or (exchange NULL) all
 * of a user in a vhost. */
static void test_topic_permission_round_trip(void **state)
{
    fixture *f = fx_new();
    meta_topic_permission ps[] = {
        {"alice", "/", "amq.topic", "^a\\.", "^b\\."},
        {"alice", "/", "logs", "", ".*"},
        {"alice", "v2", "amq.topic", ".*", ".*"},
        {"bob", "/", "amq.topic", "^bob", "^bob"},
    };
    meta_topic_permission update = {"alice", "/", "logs", "^w$", "^r$"};
    loaded l;

    for (size_t i = 0; i < 4; i++)
        assert_true(meta_put_topic_permission(f->m, &ps[i]));
    assert_true(meta_put_topic_permission(f->m, &update));
    load(f, &l);
    assert_int_equal(l.nk[K_TOPIC], 4);
    assert_fields(&l.k[K_TOPIC][0], "alice", "/", "amq.topic", "^a\\.", "^b\\.");
    assert_fields(&l.k[K_TOPIC][1], "alice", "/", "logs", "^w$", "^r$");
    loaded_free(&l);

    assert_true(meta_delete_topic_permission(f->m, "alice", "/", "logs"));
    assert_true(meta_delete_topic_permission(f->m, "alice", "/", "logs"));
    load(f, &l);
    assert_int_equal(l.nk[K_TOPIC], 3);
    loaded_free(&l);

    assert_true(meta_delete_topic_permission(f->m, "alice", "/", NULL));
    load(f, &l);
    assert_int_equal(l.nk[K_TOPIC], 2);
    assert_fields(&l.k[K_TOPIC][0], "alice", "v2", "amq.topic", ".*", ".*");
    assert_fields(&l.k[K_TOPIC][1], "bob", "/", "amq.topic", "^bob", "^bob");
    loaded_free(&l);
    fx_free(f);
}

/* Policies and operator policies are separate name spaces; the definition
 * is a blob kept byte for byte. */
static void test_policy_round_trip(void **state)
{
    fixture *f = fx_new();
    meta_policy p = {"/", "ttl", "^orders\\.", "queues", 5, BYTES(all_bytes), false};
    meta_policy op = {"/", "ttl", ".*", "all", -3, BYTES(key_with_nul), true};
    meta_policy other = {"v2", "ttl", ".*", "exchanges", 0, NONE, false};
    meta_policy p2 = {"/", "ttl", "^new$", "quorum_queues", 7, NONE, false};
    loaded l;

    assert_true(meta_put_policy(f->m, &p));
    assert_true(meta_put_policy(f->m, &op));
    assert_true(meta_put_policy(f->m, &other));
    load(f, &l);
    assert_int_equal(l.nk[K_POLICY], 3);
    assert_fields(&l.k[K_POLICY][0], "/", "ttl", "^orders\\.", "queues", NULL);
    assert_int_equal(l.k[K_POLICY][0].priority, 5);
    assert_false(l.k[K_POLICY][0].flag_a);
    assert_blob(l.k[K_POLICY][0].args, BYTES(all_bytes));
    assert_fields(&l.k[K_POLICY][1], "/", "ttl", ".*", "all", NULL);
    assert_int_equal(l.k[K_POLICY][1].priority, -3);
    assert_true(l.k[K_POLICY][1].flag_a);
    assert_blob(l.k[K_POLICY][1].args, BYTES(key_with_nul));
    assert_int_equal(l.k[K_POLICY][2].args.len, 0);
    loaded_free(&l);

    assert_true(meta_put_policy(f->m, &p2));
    assert_true(meta_delete_policy(f->m, "/", "ttl", true));
    assert_true(meta_delete_policy(f->m, "/", "ttl", true));
    load(f, &l);
    assert_int_equal(l.nk[K_POLICY], 2);
    assert_fields(&l.k[K_POLICY][0], "/", "ttl", "^new$", "quorum_queues", NULL);
    assert_int_equal(l.k[K_POLICY][0].priority, 7);
    assert_false(l.k[K_POLICY][0].flag_a);
    loaded_free(&l);
    assert_true(meta_delete_policy(f->m, "/", "ttl", false));
    load(f, &l);
    assert_int_equal(l.nk[K_POLICY], 1);
    assert_string_equal(l.k[K_POLICY][0].f[0], "v2");
    loaded_free(&l);
    fx_free(f);
}

/* Parameters are keyed by (vhost, component, name), global ones by name;
 * a value is text kept as given, and a put replaces it in place. */
static void test_parameter_round_trip(void **state)
{
    fixture *f = fx_new();
    meta_parameter up = {"/", "federation-upstream", "up", "{\"uri\":\"amqp://a\"}"};
    meta_parameter sh = {"/", "shovel", "up", "{\"src-uri\":\"amqp://\"}"};
    meta_parameter other = {"v2", "federation-upstream", "up", "[1,2]"};
    meta_parameter up2 = {"/", "federation-upstream", "up", "{\"uri\":\"amqp://b\"}"};
    meta_parameter g = {NULL, NULL, "cluster_name", "\"east\""};
    meta_parameter g2 = {NULL, "ignored", "cluster_name", "\"west\""};
    loaded l;

    assert_true(meta_put_parameter(f->m, &up));
    assert_true(meta_put_parameter(f->m, &sh));
    assert_true(meta_put_parameter(f->m, &other));
    assert_true(meta_put_parameter(f->m, &g));
    assert_true(meta_put_parameter(f->m, &up2));
    assert_true(meta_put_parameter(f->m, &g2));
    fx_reopen(f);
    load(f, &l);
    assert_int_equal(l.nk[K_PARAM], 3);
    assert_fields(&l.k[K_PARAM][0], "/", "federation-upstream", "up", "{\"uri\":\"amqp://b\"}",
                  NULL);
    assert_fields(&l.k[K_PARAM][1], "/", "shovel", "up", "{\"src-uri\":\"amqp://\"}", NULL);
    assert_fields(&l.k[K_PARAM][2], "v2", "federation-upstream", "up", "[1,2]", NULL);
    assert_int_equal(l.nk[K_GLOBAL_PARAM], 1);
    assert_fields(&l.k[K_GLOBAL_PARAM][0], "cluster_name", "\"west\"", NULL, NULL, NULL);
    loaded_free(&l);

    assert_true(meta_delete_parameter(f->m, "/", "shovel", "up"));
    assert_true(meta_delete_parameter(f->m, "/", "shovel", "up"));
    assert_true(meta_delete_parameter(f->m, NULL, NULL, "cluster_name"));
    assert_true(meta_delete_parameter(f->m, NULL, NULL, "never-set"));
    load(f, &l);
    assert_int_equal(l.nk[K_PARAM], 2);
    assert_string_equal(l.k[K_PARAM][0].f[1], "federation-upstream");
    assert_string_equal(l.k[K_PARAM][1].f[0], "v2");
    assert_int_equal(l.nk[K_GLOBAL_PARAM], 0);
    loaded_free(&l);
    fx_free(f);
}

static void test_settings(void **state)
{
    fixture *f = fx_new();
    char out[16] = "untouched";
    char tiny[4];

    assert_false(meta_get_setting(f->m, "initialized", out, sizeof out));
    assert_string_equal(out, "untouched");
    assert_true(meta_put_setting(f->m, "initialized", "1"));
    assert_true(meta_get_setting(f->m, "initialized", out, sizeof out));
    assert_string_equal(out, "1");
    assert_true(meta_put_setting(f->m, "initialized", "2024"));
    assert_true(meta_put_setting(f->m, "other", ""));
    fx_reopen(f);
    assert_true(meta_get_setting(f->m, "initialized", out, sizeof out));
    assert_string_equal(out, "2024");
    assert_true(meta_get_setting(f->m, "other", out, sizeof out));
    assert_string_equal(out, "");
    /* "2024" needs five bytes: refused (and logged), not truncated. */
    int saved = dup(STDERR_FILENO), devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDERR_FILENO);
    bool fits = meta_get_setting(f->m, "initialized", tiny, sizeof tiny);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(devnull);
    assert_false(fits);
    fx_free(f);
}

/* Two vhosts with one row of every kind each; two users. */
static void put_vhost_world(fixture *f)
{
    static const char *vhosts[] = {"/", "v2"};
    meta_user users[] = {{"alice", "", "rabbit_password_hashing_sha256", "", {0}, {0}},
                         {"bob", "", "rabbit_password_hashing_sha256", "", {0}, {0}}};
    for (int u = 0; u < 2; u++)
        assert_true(meta_put_user(f->m, &users[u]));
    for (int v = 0; v < 2; v++) {
        const char *vh = vhosts[v];
        meta_vhost vrow = {vh, "", "", "", false};
        meta_exchange e = ex(vh, "x", "topic", NONE);
        meta_queue q = qu(vh, "q", NONE);
        meta_binding b = bq(vh, "x", "q", AMQP_CSTR("k"), NONE);
        meta_binding b2 = bx(vh, "amq.topic", "x", AMQP_CSTR("#"), NONE);
        meta_policy pol = {vh, "p", ".*", "all", 0, NONE, false};
        meta_policy opol = {vh, "p", ".*", "all", 0, NONE, true};
        meta_parameter par = {vh, "shovel", "s", "{}"};
        assert_true(meta_put_vhost(f->m, &vrow));
        assert_true(meta_put_exchange(f->m, &e));
        assert_true(meta_put_queue(f->m, &q));
        assert_true(meta_put_binding(f->m, &b));
        assert_true(meta_put_binding(f->m, &b2));
        assert_true(meta_put_policy(f->m, &pol));
        assert_true(meta_put_policy(f->m, &opol));
        assert_true(meta_put_parameter(f->m, &par));
        for (int u = 0; u < 2; u++) {
            meta_permission p = {users[u].name, vh, ".*", ".*", ".*"};
            meta_topic_permission tp = {users[u].name, vh, "x", ".*", ".*"};
            assert_true(meta_put_permission(f->m, &p));
            assert_true(meta_put_topic_permission(f->m, &tp));
        }
    }
}

/* Counts rows whose field `field` (0-based; vhost fields differ by kind)
 * equals `value`. */
static size_t count_field(const row *rows, size_t n, int field, const char *value)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += rows[i].f[field] && strcmp(rows[i].f[field], value) == 0;
    return c;
}

static size_t count_vhost(const row *rows, size_t n, const char *vhost)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += strcmp(rows[i].vhost, vhost) == 0;
    return c;
}

/* Deleting a vhost deletes every row of it and nothing of the others. */
static void test_delete_vhost_cascades(void **state)
{
    fixture *f = fx_new();
    loaded l;

    put_vhost_world(f);
    assert_true(meta_delete_vhost(f->m, "/"));
    fx_reopen(f);
    load(f, &l);
    assert_int_equal(l.nk[K_VHOST], 1);
    assert_string_equal(l.k[K_VHOST][0].f[0], "v2");
    assert_int_equal(l.nk[K_USER], 2); /* users are not per vhost */
    assert_int_equal(l.nex, 1);
    assert_int_equal(l.nq, 1);
    assert_int_equal(l.nb, 2);
    assert_int_equal(count_vhost(l.ex, l.nex, "/") + count_vhost(l.q, l.nq, "/") +
                         count_vhost(l.b, l.nb, "/"),
                     0);
    assert_int_equal(l.nk[K_PERMISSION], 2);
    assert_int_equal(count_field(l.k[K_PERMISSION], 2, 1, "v2"), 2);
    assert_int_equal(l.nk[K_TOPIC], 2);
    assert_int_equal(count_field(l.k[K_TOPIC], 2, 1, "v2"), 2);
    assert_int_equal(l.nk[K_POLICY], 2);
    assert_int_equal(count_field(l.k[K_POLICY], 2, 0, "v2"), 2);
    assert_int_equal(l.nk[K_PARAM], 1);
    assert_string_equal(l.k[K_PARAM][0].f[0], "v2");
    loaded_free(&l);

    /* A queue of the same name in a re-created vhost gets a new id. */
    meta_queue again = qu("/", "q", NONE);
    uint64_t old_max = 0;
    load(f, &l);
    old_max = l.q[0].id;
    loaded_free(&l);
    assert_true(meta_put_queue(f->m, &again));
    assert_true(again.id > old_max);
    fx_free(f);
}

/* Deleting a user deletes their permissions and topic permissions in
 * every vhost, and nobody else's. */
static void test_delete_user_cascades(void **state)
{
    fixture *f = fx_new();
    loaded l;

    put_vhost_world(f);
    assert_true(meta_delete_user(f->m, "alice"));
    fx_reopen(f);
    load(f, &l);
    assert_int_equal(l.nk[K_USER], 1);
    assert_string_equal(l.k[K_USER][0].f[0], "bob");
    assert_int_equal(l.nk[K_PERMISSION], 2);
    assert_int_equal(count_field(l.k[K_PERMISSION], 2, 0, "bob"), 2);
    assert_int_equal(l.nk[K_TOPIC], 2);
    assert_int_equal(count_field(l.k[K_TOPIC], 2, 0, "bob"), 2);
    assert_int_equal(l.nk[K_VHOST] + l.nk[K_POLICY] + l.nk[K_PARAM], 2 + 4 + 2);
    assert_int_equal(l.nex + l.nq + l.nb, 8);
    loaded_free(&l);
    fx_free(f);
}

/* Vhosts, users, permissions, topic permissions, policies, global and
 * vhost parameters, then exchanges, queues, bindings -- whatever order they
 * were written in. */
static void test_load_order_all_kinds(void **state)
{
    static const int want[K_N] = {K_VHOST,   K_USER,         K_PERMISSION, K_TOPIC,
                                  K_POLICY,  K_GLOBAL_PARAM, K_PARAM,      K_EXCHANGE,
                                  K_QUEUE,   K_BINDING};
    fixture *f = fx_new();
    meta_binding b = bq("/", "x", "q", NONE, NONE);
    meta_queue q = qu("/", "q", NONE);
    meta_exchange e = ex("/", "x", "direct", NONE);
    meta_policy pol = {"/", "p", ".*", "all", 0, NONE, false};
    meta_topic_permission tp = {"u", "/", "x", "", ""};
    meta_permission p = {"u", "/", "", "", ""};
    meta_user u = {"u", "", "rabbit_password_hashing_sha256", "", {0}, {0}};
    meta_vhost v = {"/", "", "", "", false};
    meta_parameter par = {"/", "shovel", "s", "{}"}, global = {NULL, NULL, "cluster_name", "\"c\""};
    loaded l;

    assert_true(meta_put_parameter(f->m, &par));
    assert_true(meta_put_binding(f->m, &b));
    assert_true(meta_put_queue(f->m, &q));
    assert_true(meta_put_exchange(f->m, &e));
    assert_true(meta_put_policy(f->m, &pol));
    assert_true(meta_put_topic_permission(f->m, &tp));
    assert_true(meta_put_permission(f->m, &p));
    assert_true(meta_put_user(f->m, &u));
    assert_true(meta_put_vhost(f->m, &v));
    assert_true(meta_put_parameter(f->m, &global));
    load(f, &l);
    assert_int_equal(l.norder, K_N);
    for (int i = 0; i < K_N; i++)
        assert_int_equal(l.order[i], want[i]);
    loaded_free(&l);

    meta_load_handlers only_users = {.user = on_user};
    memset(&l, 0, sizeof l);
    assert_true(meta_load(f->m, &only_users, &l));
    assert_int_equal(l.norder, 1);
    assert_int_equal(l.nk[K_USER], 1);
    assert_int_equal(l.nk[K_VHOST] + l.nex, 0);
    loaded_free(&l);
    fx_free(f);
}

/* ---- meta_begin / meta_commit / meta_rollback --------------------------- */

static long long count_rows(const char *db_path, const char *table)
{
    char sql[128];
    sqlite3 *db = raw_open(db_path);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    long long n = raw_int(db, sql);
    sqlite3_close(db);
    return n;
}

/* A group is invisible to other connections until committed, then all of
 * it is there; cascades inside it join it. */
static void test_begin_commit(void **state)
{
    fixture *f = fx_new();
    meta_vhost v = {"v", "", "", "", false};
    meta_user u = {"u", "", "rabbit_password_hashing_sha256", "", {0}, {0}};
    meta_permission p = {"u", "v", ".*", ".*", ".*"};
    meta_queue q = qu("v", "q", NONE);
    loaded l;

    assert_false(meta_grouped(f->m));
    assert_true(meta_begin(f->m));
    assert_true(meta_grouped(f->m));
    assert_true(meta_put_vhost(f->m, &v));
    assert_true(meta_put_user(f->m, &u));
    assert_true(meta_put_permission(f->m, &p));
    assert_true(meta_put_queue(f->m, &q));
    assert_true(q.id > 0);
    assert_true(meta_put_setting(f->m, "initialized", "1"));
    assert_true(meta_delete_exchange(f->m, "v", "none")); /* a cascade inside */
    /* The group sees its own rows; another connection does not yet. */
    load(f, &l);
    assert_int_equal(l.nk[K_VHOST] + l.nk[K_USER] + l.nk[K_PERMISSION] + l.nq, 4);
    loaded_free(&l);
    assert_int_equal(count_rows(f->db, "vhosts"), 0);
    assert_int_equal(count_rows(f->db, "settings"), 0);
    assert_true(meta_commit(f->m));
    assert_false(meta_grouped(f->m));
    assert_int_equal(count_rows(f->db, "vhosts"), 1);
    assert_int_equal(count_rows(f->db, "users"), 1);
    assert_int_equal(count_rows(f->db, "permissions"), 1);
    assert_int_equal(count_rows(f->db, "queues"), 1);
    assert_int_equal(count_rows(f->db, "settings"), 1);
    /* Calls after the commit autocommit again. */
    assert_true(meta_delete_user(f->m, "u"));
    assert_int_equal(count_rows(f->db, "users"), 0);
    fx_free(f);
}

/* A rollback leaves nothing: puts, updates, deletes and cascades all undone,
 * after a reopen too. */
static void test_begin_rollback(void **state)
{
    fixture *f = fx_new();
    meta_vhost v = {"v", "before", "", "", false};
    meta_vhost v_changed = {"v", "after", "", "", true};
    meta_user u = {"u", "", "rabbit_password_hashing_sha256", "", {0}, {0}};
    meta_exchange e = ex("v", "x", "fanout", NONE);
    meta_queue q = qu("v", "q", NONE);
    meta_binding b = bq("v", "x", "q", NONE, NONE);
    meta_permission p = {"u", "v", ".*", ".*", ".*"};
    loaded l;

    assert_true(meta_put_vhost(f->m, &v));
    assert_true(meta_put_exchange(f->m, &e));
    assert_true(meta_put_queue(f->m, &q));
    assert_true(meta_put_binding(f->m, &b));

    assert_true(meta_begin(f->m));
    assert_true(meta_put_vhost(f->m, &v_changed));
    assert_true(meta_put_user(f->m, &u));
    assert_true(meta_put_permission(f->m, &p));
    assert_true(meta_delete_queue(f->m, "v", "q"));
    assert_true(meta_put_setting(f->m, "initialized", "1"));
    assert_true(meta_delete_vhost(f->m, "v"));
    meta_rollback(f->m);
    meta_rollback(f->m); /* a second one is a no-op */

    for (int pass = 0; pass < 2; pass++) {
        char out[8];
        load(f, &l);
        assert_int_equal(l.nk[K_VHOST], 1);
        assert_fields(&l.k[K_VHOST][0], "v", "before", "", "", NULL);
        assert_false(l.k[K_VHOST][0].flag_a);
        assert_int_equal(l.nk[K_USER] + l.nk[K_PERMISSION], 0);
        assert_int_equal(l.nex, 1);
        assert_int_equal(l.nq, 1);
        assert_int_equal(l.q[0].id, q.id);
        assert_int_equal(l.nb, 1);
        loaded_free(&l);
        assert_false(meta_get_setting(f->m, "initialized", out, sizeof out));
        fx_reopen(f);
    }
    fx_free(f);
}

/* Inside a group a failing call undoes only its own part; the rest of the
 * group still commits. Misuse (nested begin, commit without begin) fails. */
static void test_group_failed_call(void **state)
{
    fixture *f = fx_new();
    meta_user good = {"good", "", "rabbit_password_hashing_sha256", "", {0}, {0}};
    meta_user bad = {"bad", NULL, "rabbit_password_hashing_sha256", "", {0}, {0}};
    int saved = dup(STDERR_FILENO), devnull = open("/dev/null", O_WRONLY);

    dup2(devnull, STDERR_FILENO);
    assert_false(meta_commit(f->m));
    assert_true(meta_begin(f->m));
    assert_false(meta_begin(f->m));
    assert_true(meta_put_user(f->m, &good));
    assert_false(meta_put_user(f->m, &bad));
    assert_true(meta_commit(f->m));
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(devnull);
    assert_int_equal(count_rows(f->db, "users"), 1);
    fx_free(f);
}

/* A process that dies inside a group leaves nothing of it; one that dies
 * right after meta_commit returned leaves all of it. */
static void test_group_crash(void **state)
{
    for (int commit = 0; commit < 2; commit++) {
        fixture *f = fx_new();
        meta_close(f->m);
        f->m = NULL;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            char err[256];
            meta *m = meta_open(f->dir, err, sizeof err);
            if (!m || !meta_begin(m))
                _exit(2);
            for (int i = 0; i < 50; i++) {
                char name[32];
                snprintf(name, sizeof name, "user-%d", i);
                meta_user u = {name, "", "rabbit_password_hashing_sha256", "", {0}, {0}};
                meta_permission p = {name, "/", ".*", ".*", ".*"};
                if (!meta_put_user(m, &u) || !meta_put_permission(m, &p))
                    _exit(3);
            }
            if (commit && !meta_commit(m))
                _exit(4);
            _exit(0); /* no meta_close: as if killed */
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        fx_reopen(f);
        assert_int_equal(count_rows(f->db, "users"), commit ? 50 : 0);
        assert_int_equal(count_rows(f->db, "permissions"), commit ? 50 : 0);
        fx_free(f);
    }
}

/* ---- migration from version 1 ------------------------------------------- */

/* The version-1 schema as Warren wrote it, with rows in two vhosts. */
static void write_version_1(const char *path)
{
    sqlite3 *db = raw_open(path);
    raw_exec(db,
             "PRAGMA journal_mode = WAL;"
             "CREATE TABLE exchanges (vhost TEXT NOT NULL, name TEXT NOT NULL,"
             " type TEXT NOT NULL, auto_delete INTEGER NOT NULL CHECK (auto_delete IN (0, 1)),"
             " internal INTEGER NOT NULL CHECK (internal IN (0, 1)), arguments BLOB NOT NULL,"
             " PRIMARY KEY (vhost, name)) STRICT;"
             "CREATE TABLE queues (id INTEGER PRIMARY KEY AUTOINCREMENT, vhost TEXT NOT NULL,"
             " name TEXT NOT NULL, auto_delete INTEGER NOT NULL CHECK (auto_delete IN (0, 1)),"
             " arguments BLOB NOT NULL, UNIQUE (vhost, name)) STRICT;"
             "CREATE TABLE bindings (vhost TEXT NOT NULL, source TEXT NOT NULL,"
             " destination TEXT NOT NULL, destination_is_exchange INTEGER NOT NULL"
             " CHECK (destination_is_exchange IN (0, 1)), routing_key BLOB NOT NULL,"
             " arguments BLOB NOT NULL, UNIQUE (vhost, source, destination,"
             " destination_is_exchange, routing_key, arguments)) STRICT;"
             "CREATE INDEX bindings_by_destination"
             " ON bindings (vhost, destination, destination_is_exchange);"
             "INSERT INTO exchanges VALUES ('/', 'logs', 'topic', 0, 0, x'');"
             "INSERT INTO queues VALUES (7, '/', 'orders', 0, x'0102');"
             "INSERT INTO queues VALUES (9, 'legacy', 'jobs', 1, x'');"
             "INSERT INTO bindings VALUES ('/', 'logs', 'orders', 0, x'6b', x'');"
             "INSERT INTO bindings VALUES ('only-bindings', 'a', 'b', 1, x'', x'');"
             "PRAGMA user_version = 1;");
    sqlite3_close(db);
}

/* Writes an old schema with write_old, opens it (migrating) and checks it
 * is at the current version. */
static void open_migrated(fixture *f, void (*write_old)(const char *path))
{
    char err[512] = "";
    sqlite3 *db;

    write_old(f->db);
    f->m = meta_open(f->dir, err, sizeof err);
    if (f->m == NULL)
        fail_msg("meta_open: %s", err);
    db = raw_open(f->db);
    assert_int_equal(raw_int(db, "PRAGMA user_version"), 5);
    sqlite3_close(db);
}

/* Version 1 migrates: rows keep their vhost and queue ids, every vhost they
 * name gets a vhost row, the new tables are empty, and new ids stay above
 * the old ones. */
static void test_migrate_from_version_1(void **state)
{
    fixture *f = fx_empty();
    char out[8];
    loaded l;

    open_migrated(f, write_version_1);
    load(f, &l);
    assert_int_equal(l.nk[K_VHOST], 3);
    assert_fields(&l.k[K_VHOST][0], "/", "", "", "", NULL);
    assert_fields(&l.k[K_VHOST][1], "legacy", "", "", "", NULL);
    assert_fields(&l.k[K_VHOST][2], "only-bindings", "", "", "", NULL);
    assert_int_equal(l.nk[K_USER] + l.nk[K_PERMISSION] + l.nk[K_TOPIC] + l.nk[K_POLICY], 0);
    assert_int_equal(l.nex, 1);
    assert_int_equal(l.nq, 2);
    assert_int_equal(l.q[0].id, 7);
    assert_string_equal(l.q[0].vhost, "/");
    assert_int_equal(l.q[1].id, 9);
    assert_string_equal(l.q[1].vhost, "legacy");
    assert_true(l.q[1].flag_a);
    assert_int_equal(l.nb, 2);
    assert_string_equal(l.b[1].vhost, "only-bindings");
    loaded_free(&l);
    assert_false(meta_get_setting(f->m, "initialized", out, sizeof out));

    meta_queue q = qu("/", "new", NONE);
    assert_true(meta_put_queue(f->m, &q));
    assert_true(q.id > 9);
    /* The migrated cascade works on migrated rows. */
    assert_true(meta_delete_vhost(f->m, "/"));
    load(f, &l);
    assert_int_equal(l.nex, 0);
    assert_int_equal(l.nq, 1);
    assert_int_equal(l.nb, 1);
    loaded_free(&l);
    fx_free(f);
}

/* ---- migration from version 2 ------------------------------------------- */

/* The version-2 schema as Warren wrote it (version 1's tables plus
 * identity, policies and settings), with a vhost, a user, an operator
 * policy and the first-boot mark. */
static void write_version_2(const char *path)
{
    write_version_1(path);
    sqlite3 *db = raw_open(path);
    raw_exec(db,
             "CREATE TABLE vhosts (name TEXT NOT NULL PRIMARY KEY, description TEXT NOT NULL,"
             " tags TEXT NOT NULL, default_queue_type TEXT NOT NULL,"
             " tracing INTEGER NOT NULL CHECK (tracing IN (0, 1))) STRICT;"
             "CREATE TABLE users (name TEXT NOT NULL PRIMARY KEY, password_hash TEXT NOT NULL,"
             " hashing_algorithm TEXT NOT NULL, tags TEXT NOT NULL) STRICT;"
             "CREATE TABLE permissions (user TEXT NOT NULL, vhost TEXT NOT NULL,"
             " configure TEXT NOT NULL, write TEXT NOT NULL, read TEXT NOT NULL,"
             " PRIMARY KEY (user, vhost)) STRICT;"
             "CREATE INDEX permissions_by_vhost ON permissions (vhost);"
             "CREATE TABLE topic_permissions (user TEXT NOT NULL, vhost TEXT NOT NULL,"
             " exchange TEXT NOT NULL, write TEXT NOT NULL, read TEXT NOT NULL,"
             " PRIMARY KEY (user, vhost, exchange)) STRICT;"
             "CREATE INDEX topic_permissions_by_vhost ON topic_permissions (vhost);"
             "CREATE TABLE policies (vhost TEXT NOT NULL, name TEXT NOT NULL,"
             " operator_policy INTEGER NOT NULL CHECK (operator_policy IN (0, 1)),"
             " pattern TEXT NOT NULL, apply_to TEXT NOT NULL, priority INTEGER NOT NULL,"
             " definition BLOB NOT NULL, PRIMARY KEY (vhost, name, operator_policy)) STRICT;"
             "CREATE TABLE settings (key TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL) STRICT;"
             "INSERT INTO vhosts VALUES ('/', 'Default virtual host', '', '', 0);"
             "INSERT INTO users VALUES ('guest', 'aGFzaA==', 'rabbit_password_hashing_sha256',"
             " 'administrator');"
             "INSERT INTO policies VALUES ('/', 'cap', 1, '.*', 'queues', 3, x'0102');"
             "INSERT INTO settings VALUES ('initialized', '1');"
             "PRAGMA user_version = 2;");
    sqlite3_close(db);
}

/* Version 2 migrates to 3: every row stays, the parameter tables come
 * empty and work, and a vhost's delete cascades to its parameters. */
static void test_migrate_from_version_2(void **state)
{
    fixture *f = fx_empty();
    char out[8];
    loaded l;

    open_migrated(f, write_version_2);
    load(f, &l);
    assert_int_equal(l.nk[K_VHOST], 1);
    assert_fields(&l.k[K_VHOST][0], "/", "Default virtual host", "", "", NULL);
    assert_int_equal(l.nk[K_USER], 1);
    assert_fields(&l.k[K_USER][0], "guest", "aGFzaA==", "rabbit_password_hashing_sha256",
                  "administrator", NULL);
    assert_int_equal(l.nk[K_POLICY], 1);
    assert_true(l.k[K_POLICY][0].flag_a);
    assert_int_equal(l.k[K_POLICY][0].priority, 3);
    assert_int_equal(l.nex + l.nq + l.nb, 5);
    assert_int_equal(l.nk[K_PARAM] + l.nk[K_GLOBAL_PARAM], 0);
    loaded_free(&l);
    assert_true(meta_get_setting(f->m, "initialized", out, sizeof out));
    assert_string_equal(out, "1");

    meta_parameter p = {"/", "shovel", "s", "{}"}, g = {NULL, NULL, "cluster_name", "\"c\""};
    assert_true(meta_put_parameter(f->m, &p));
    assert_true(meta_put_parameter(f->m, &g));
    fx_reopen(f);
    assert_true(meta_delete_vhost(f->m, "/"));
    load(f, &l);
    assert_int_equal(l.nk[K_PARAM], 0);
    assert_int_equal(l.nk[K_GLOBAL_PARAM], 1); /* not of a vhost */
    loaded_free(&l);
    fx_free(f);
}

static void test_v2_errors_logged(void **state)
{
    fixture *f = fx_new();
    char out[2048];
    int saved;
    char *path;

    meta_user u = {"u", "h", NULL, "", {0}, {0}};
    path = capture_stderr_begin(&saved);
    bool ok = meta_put_user(f->m, &u);
    capture_stderr_end(saved, path, out, sizeof out);
    assert_false(ok);
    assert_log_line(out, "meta: put user 'u': "
                         "NOT NULL constraint failed: users\\.hashing_algorithm");

    meta_permission p = {"u", "/", ".*", NULL, ".*"};
    path = capture_stderr_begin(&saved);
    ok = meta_put_permission(f->m, &p);
    capture_stderr_end(saved, path, out, sizeof out);
    assert_false(ok);
    assert_log_line(out, "meta: put permissions of 'u' in vhost '/': "
                         "NOT NULL constraint failed: permissions\\.write");

    meta_policy pol = {"/", "p", NULL, "all", 0, NONE, true};
    path = capture_stderr_begin(&saved);
    ok = meta_put_policy(f->m, &pol);
    capture_stderr_end(saved, path, out, sizeof out);
    assert_false(ok);
    assert_log_line(out, "meta: put operator policy 'p' in vhost '/': "
                         "NOT NULL constraint failed: policies\\.pattern");

    meta_parameter par = {"/", "shovel", "s", NULL};
    path = capture_stderr_begin(&saved);
    ok = meta_put_parameter(f->m, &par);
    capture_stderr_end(saved, path, out, sizeof out);
    assert_false(ok);
    assert_log_line(out, "meta: put parameter 's' of component 'shovel' in vhost '/': "
                         "NOT NULL constraint failed: parameters\\.value");

    meta_parameter g = {NULL, NULL, "g", NULL};
    path = capture_stderr_begin(&saved);
    ok = meta_put_parameter(f->m, &g);
    capture_stderr_end(saved, path, out, sizeof out);
    assert_false(ok);
    assert_log_line(out, "meta: put global parameter 'g': "
                         "NOT NULL constraint failed: global_parameters\\.value");
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exchange_round_trip),
        cmocka_unit_test(test_queue_round_trip),
        cmocka_unit_test(test_binding_round_trip),
        cmocka_unit_test(test_load_order),
        cmocka_unit_test(test_idempotent_puts_and_deletes),
        cmocka_unit_test(test_binding_identity),
        cmocka_unit_test(test_queue_id_stable_and_unique),
        cmocka_unit_test(test_delete_queue_cascades),
        cmocka_unit_test(test_delete_exchange_cascades),
        cmocka_unit_test(test_reopen_keeps_everything),
        cmocka_unit_test(test_commit_visible_before_close),
        cmocka_unit_test(test_wal_mode_and_version),
        cmocka_unit_test(test_migrate_from_empty_file),
        cmocka_unit_test(test_migrate_keeps_foreign_tables),
        cmocka_unit_test(test_failed_migration_rolls_back),
        cmocka_unit_test(test_newer_schema_refused),
        cmocka_unit_test(test_not_a_database),
        cmocka_unit_test(test_corrupt_database),
        cmocka_unit_test(test_unopenable_path),
        cmocka_unit_test(test_errors_logged),
        cmocka_unit_test(test_many_bindings_load_fast),
        cmocka_unit_test(test_user_round_trip),
        cmocka_unit_test(test_user_limits),
        cmocka_unit_test(test_vhost_round_trip),
        cmocka_unit_test(test_permission_round_trip),
        cmocka_unit_test(test_topic_permission_round_trip),
        cmocka_unit_test(test_policy_round_trip),
        cmocka_unit_test(test_parameter_round_trip),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_delete_vhost_cascades),
        cmocka_unit_test(test_delete_user_cascades),
        cmocka_unit_test(test_load_order_all_kinds),
        cmocka_unit_test(test_begin_commit),
        cmocka_unit_test(test_begin_rollback),
        cmocka_unit_test(test_group_failed_call),
        cmocka_unit_test(test_group_crash),
        cmocka_unit_test(test_migrate_from_version_1),
        cmocka_unit_test(test_migrate_from_version_2),
        cmocka_unit_test(test_v2_errors_logged),
    };

    return cmocka_run_group_tests(tests, setup_bytes, NULL);
}
