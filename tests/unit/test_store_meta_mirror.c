/* store metadata replicated (meta_set_mirror, meta_serialize,
 * meta_replace_image, meta_apply_changes): a follower that starts from the
 * leader's image and applies every changeset after it loads what the
 * leader loads -- users, vhosts, permissions, topic permissions, policies,
 * parameters, exchanges, queues with their ids, bindings -- also after
 * cascading deletes, groups and rollbacks; its next queue id is the
 * leader's, even when a queue was created and deleted inside one commit. */
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../store/store.h"
#include "test_store_mirror_util.h"

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void temp_dir(char *out, size_t cap, const char *what)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(out, cap, "%s/warren-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", what);
    assert_non_null(mkdtemp(out));
}

static meta *open_meta(const char *dir)
{
    char err[512] = "";
    meta *m = meta_open(dir, err, sizeof err);
    if (m == NULL)
        fail_msg("meta_open %s: %s", dir, err);
    return m;
}

/* ---- what meta_load hands out, as lines of text ------------------------- */

typedef struct dump {
    char *text;
    size_t len, cap;
} dump;

static void add(dump *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(dump *d, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof line - 1);
    if (d->len + (size_t)n + 2 > d->cap) {
        d->cap = (d->len + (size_t)n + 2) * 2;
        d->text = realloc(d->text, d->cap);
        assert_non_null(d->text);
    }
    memcpy(d->text + d->len, line, (size_t)n);
    d->len += (size_t)n;
    d->text[d->len++] = '\n';
    d->text[d->len] = 0;
}

static const char *hex(amqp_bytes b, char *out)
{
    for (uint32_t i = 0; i < b.len && i < 100; i++)
        sprintf(out + 2 * i, "%02x", b.ptr[i]);
    out[2 * (b.len < 100 ? b.len : 100)] = 0;
    return out;
}

static void d_exchange(void *c, const meta_exchange *e)
{
    char h[256];
    add(c, "exchange %s %s %s %d %d %s", e->vhost, e->name, e->type, e->auto_delete,
        e->internal, hex(e->arguments, h));
}
static void d_queue(void *c, const meta_queue *q)
{
    char h[256];
    add(c, "queue %llu %s %s %d %s", (unsigned long long)q->id, q->vhost, q->name,
        q->auto_delete, hex(q->arguments, h));
}
static void d_binding(void *c, const meta_binding *b)
{
    char h1[256], h2[256];
    add(c, "binding %s %s %s %d %s %s", b->vhost, b->source, b->destination,
        b->destination_is_exchange, hex(b->routing_key, h1), hex(b->arguments, h2));
}
static void d_vhost(void *c, const meta_vhost *v)
{
    add(c, "vhost %s %s %s %s %d", v->name, v->description, v->tags, v->default_queue_type,
        v->tracing);
}
static void d_user(void *c, const meta_user *u)
{
    add(c, "user %s %s %s %s %d:%lld %d:%lld", u->name, u->password_hash, u->hashing_algorithm,
        u->tags, u->max_connections.set, (long long)u->max_connections.value,
        u->max_channels.set, (long long)u->max_channels.value);
}
static void d_permission(void *c, const meta_permission *p)
{
    add(c, "permission %s %s %s %s %s", p->user, p->vhost, p->configure, p->write, p->read);
}
static void d_topic(void *c, const meta_topic_permission *p)
{
    add(c, "topic %s %s %s %s %s", p->user, p->vhost, p->exchange, p->write, p->read);
}
static void d_policy(void *c, const meta_policy *p)
{
    char h[256];
    add(c, "policy %s %s %s %s %d %s %d", p->vhost, p->name, p->pattern, p->apply_to,
        p->priority, hex(p->definition, h), p->operator_policy);
}
static void d_parameter(void *c, const meta_parameter *p)
{
    add(c, "parameter %s %s %s %s", p->vhost ? p->vhost : "-", p->component ? p->component : "-",
        p->name, p->value);
}

static const meta_load_handlers dumper = {d_exchange, d_queue,      d_binding,
                                          d_vhost,    d_user,       d_permission,
                                          d_topic,    d_policy,     d_parameter};

static char *load_text(meta *m)
{
    dump d = {0};
    add(&d, "--");
    assert_true(meta_load(m, &dumper, &d));
    return d.text;
}

/* ---- the follower --------------------------------------------------------- */

typedef struct follower {
    char dir[256];
    mirror_reader *reader;
    mirror_replica *replica;
    meta *m; /* opened on the image */
    int images, changesets;
} follower;

static bool fl_image(void *ctx, const void *p, size_t len)
{
    follower *fl = ctx;
    char err[512] = "";
    meta_close(fl->m);
    fl->m = NULL;
    if (!meta_replace_image(fl->dir, p, len, err, sizeof err))
        fail_msg("meta_replace_image: %s", err);
    fl->m = open_meta(fl->dir);
    fl->images++;
    return true;
}

static bool fl_changes(void *ctx, const void *p, size_t len)
{
    follower *fl = ctx;
    fl->changesets++;
    return fl->m && meta_apply_changes(fl->m, p, len);
}

static const mirror_replica_handlers fl_handlers = {.meta_image = fl_image,
                                                    .meta_changes = fl_changes};

static void fl_pump(follower *fl) { mirror_pump(fl->reader, fl->replica); }

/* Attaches a follower: the leader's image, taken now, then its log. */
static void fl_start(follower *fl, mirror *mr, meta *leader)
{
    temp_dir(fl->dir, sizeof fl->dir, "meta-follower");
    fl->replica = mirror_replica_new(fl->dir, &fl_handlers, fl);
    assert_non_null(fl->replica);
    uint8_t *image;
    size_t len;
    assert_true(meta_serialize(leader, &image, &len));
    fl->reader = mirror_reader_new(mr, 7, image, len);
    assert_non_null(fl->reader);
    free(image);
}

static void fl_free(follower *fl)
{
    mirror_reader_free(fl->reader);
    mirror_replica_free(fl->replica);
    meta_close(fl->m);
    nftw(fl->dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* ---- changes ----------------------------------------------------------------- */

static const uint8_t args[] = {0x05, 'x', '-', 'a', 'b', 'c', 'S', 0, 0, 0, 1, 'v'};
#define ARGS ((amqp_bytes){args, sizeof args})
#define NOARGS ((amqp_bytes){(const uint8_t *)"", 0})

static uint64_t put_queue(meta *m, const char *vhost, const char *name)
{
    meta_queue q = {.vhost = vhost, .name = name, .arguments = ARGS};
    assert_true(meta_put_queue(m, &q));
    return q.id;
}

static void put_binding(meta *m, const char *vhost, const char *src, const char *dst,
                        const char *key)
{
    meta_binding b = {vhost, src, dst, false, AMQP_CSTR(key), NOARGS};
    assert_true(meta_put_binding(m, &b));
}

static void identity(meta *m, const char *vhost, const char *user)
{
    meta_vhost v = {vhost, "a vhost", "t1,t2", "quorum", false};
    assert_true(meta_put_vhost(m, &v));
    meta_user u = {user, "aGFzaA==", "rabbit_password_hashing_sha256", "administrator",
                   {true, 10}, {false, 0}};
    assert_true(meta_put_user(m, &u));
    meta_permission p = {user, vhost, ".*", ".*", "^amq"};
    assert_true(meta_put_permission(m, &p));
    meta_topic_permission t = {user, vhost, "amq.topic", "^a", "^b"};
    assert_true(meta_put_topic_permission(m, &t));
    meta_policy pol = {vhost, "ha", "^q", "queues", 5, ARGS, false};
    assert_true(meta_put_policy(m, &pol));
    pol.operator_policy = true;
    assert_true(meta_put_policy(m, &pol));
    meta_parameter par = {vhost, "shovel", "s1", "{\"a\":1}"};
    assert_true(meta_put_parameter(m, &par));
}

static void topology(meta *m, const char *vhost, const char *prefix)
{
    char name[64];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "%s-x%d", prefix, i);
        meta_exchange e = {vhost, name, "topic", i % 2, false, ARGS};
        assert_true(meta_put_exchange(m, &e));
        char q[64];
        snprintf(q, sizeof q, "%s-q%d", prefix, i);
        put_queue(m, vhost, q);
        put_binding(m, vhost, name, q, "a.#");
        put_binding(m, vhost, name, q, "b.*");
    }
}

/* ---- tests ---------------------------------------------------------------------- */

typedef struct leader {
    char dir[256];
    meta *m;
    mirror *mr;
} leader;

static void leader_start(leader *l)
{
    temp_dir(l->dir, sizeof l->dir, "meta-leader");
    l->m = open_meta(l->dir);
    l->mr = mirror_new(l->dir, 64u << 20);
    assert_non_null(l->mr);
    assert_true(meta_set_mirror(l->m, l->mr));
}

static void leader_free(leader *l)
{
    meta_close(l->m);
    mirror_free(l->mr);
    nftw(l->dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static int cmp_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The text's lines in sorted order (in place). */
static void sort_lines(char *text)
{
    size_t n = 0, cap = 64;
    char **lines = malloc(cap * sizeof *lines);
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (n == cap)
            lines = realloc(lines, (cap *= 2) * sizeof *lines);
        lines[n++] = strdup(l);
    }
    qsort(lines, n, sizeof *lines, cmp_line);
    char *p = text;
    for (size_t i = 0; i < n; i++) {
        p += sprintf(p, "%s\n", lines[i]);
        free(lines[i]);
    }
    free(lines);
}

/* Same rows; with `in_order`, also in the same order (first insertion). */
static void assert_same(meta *a, meta *b, bool in_order)
{
    char *ta = load_text(a), *tb = load_text(b);
    if (!in_order) {
        sort_lines(ta);
        sort_lines(tb);
    }
    size_t i = 0;
    while (ta[i] && ta[i] == tb[i])
        i++;
    if (ta[i] || tb[i])
        fail_msg("leader and follower differ at \"%.80s\" / \"%.80s\"", ta + i, tb + i);
    free(ta);
    free(tb);
}

/* The image carries what was there before; every kind of change after it
 * arrives as changesets, one per commit. */
static void test_follower_loads_what_the_leader_loads(void **state)
{
    leader l;
    leader_start(&l);
    identity(l.m, "/", "guest");
    topology(l.m, "/", "before");
    put_queue(l.m, "/", "gone-before");
    assert_true(meta_delete_queue(l.m, "/", "gone-before"));
    meta_put_setting(l.m, "initialized", "1");

    follower fl = {0};
    fl_start(&fl, l.mr, l.m);
    fl_pump(&fl);
    assert_int_equal(fl.images, 1);
    assert_same(l.m, fl.m, true);

    identity(l.m, "v2", "alice");
    topology(l.m, "v2", "after");
    topology(l.m, "/", "after");
    meta_parameter g = {NULL, NULL, "cluster_name", "\"warren\""};
    assert_true(meta_put_parameter(l.m, &g));
    meta_user u = {"alice", "bmV3", "rabbit_password_hashing_sha256", "", {false, 0},
                   {true, 3}};
    assert_true(meta_put_user(l.m, &u)); /* an update */
    assert_true(meta_delete_exchange(l.m, "/", "after-x1")); /* with its bindings */
    assert_true(meta_delete_queue(l.m, "/", "before-q2"));
    meta_binding b = {"/", "before-x3", "before-q3", false, AMQP_CSTR("a.#"), NOARGS};
    assert_true(meta_delete_binding(l.m, &b));
    assert_true(meta_delete_policy(l.m, "/", "ha", true));
    assert_true(meta_delete_parameter(l.m, "/", "shovel", "s1"));
    assert_true(meta_delete_topic_permission(l.m, "guest", "/", NULL));
    assert_true(meta_delete_permission(l.m, "alice", "v2"));
    int before = fl.changesets;
    fl_pump(&fl);
    assert_true(fl.changesets > before + 40); /* one per call */
    assert_same(l.m, fl.m, true);

    /* a group: one changeset, its rows in the session's order (see meta.c) */
    assert_true(meta_begin(l.m));
    topology(l.m, "/", "grouped");
    assert_true(meta_delete_user(l.m, "guest"));
    assert_true(meta_commit(l.m));
    /* rolled back: nothing of it goes */
    assert_true(meta_begin(l.m));
    topology(l.m, "/", "rolled-back");
    meta_rollback(l.m);
    before = fl.changesets;
    fl_pump(&fl);
    assert_int_equal(fl.changesets, before + 1);
    assert_same(l.m, fl.m, false);

    /* a whole vhost goes */
    assert_true(meta_delete_vhost(l.m, "v2"));
    fl_pump(&fl);
    assert_same(l.m, fl.m, false);
    char s[8];
    assert_true(meta_get_setting(fl.m, "initialized", s, sizeof s));

    fl_free(&fl);
    leader_free(&l);
}

/* A queue created and deleted within one commit leaves no row, but its id
 * was handed out: the follower's next id is still the leader's. */
static void test_queue_ids_follow_the_leader(void **state)
{
    leader l;
    leader_start(&l);
    put_queue(l.m, "/", "q1");
    follower fl = {0};
    fl_start(&fl, l.mr, l.m);
    fl_pump(&fl);

    put_queue(l.m, "/", "q2");
    assert_true(meta_delete_queue(l.m, "/", "q2"));
    assert_true(meta_begin(l.m));
    uint64_t brief = put_queue(l.m, "/", "brief");
    assert_true(meta_delete_queue(l.m, "/", "brief"));
    assert_true(meta_commit(l.m));
    fl_pump(&fl);
    assert_same(l.m, fl.m, true);

    /* both hand out the same next id (the follower after a failover) */
    assert_true(meta_set_mirror(l.m, NULL));
    uint64_t on_leader = put_queue(l.m, "/", "next");
    uint64_t on_follower = put_queue(fl.m, "/", "next");
    assert_int_equal(on_leader, brief + 1);
    assert_int_equal(on_follower, on_leader);

    /* and after a restart of the follower's meta */
    meta_close(fl.m);
    fl.m = open_meta(fl.dir);
    assert_int_equal(put_queue(fl.m, "/", "after-restart"), on_leader + 1);
    fl_free(&fl);
    leader_free(&l);
}

/* The image replaces a database that was there, WAL and all; a changeset
 * that finds rows in another state replaces them, one about rows that are
 * gone is left out. */
static void test_image_replaces_and_apply_is_forgiving(void **state)
{
    leader l;
    leader_start(&l);
    identity(l.m, "/", "guest");
    follower fl = {0};
    temp_dir(fl.dir, sizeof fl.dir, "meta-follower");
    fl.m = open_meta(fl.dir);
    topology(fl.m, "/", "stale"); /* the follower's old contents */
    meta_close(fl.m);
    fl.m = NULL;
    fl.replica = mirror_replica_new(fl.dir, &fl_handlers, &fl);
    uint8_t *image;
    size_t len;
    assert_true(meta_serialize(l.m, &image, &len));
    fl.reader = mirror_reader_new(l.mr, 1, image, len);
    free(image);
    fl_pump(&fl);
    assert_same(l.m, fl.m, true);

    /* the follower drifted: a row changed, one deleted, one added */
    meta_vhost v = {"/", "drifted", "", "", true};
    assert_true(meta_put_vhost(fl.m, &v));
    assert_true(meta_delete_permission(fl.m, "guest", "/"));
    put_queue(fl.m, "/", "drift");
    assert_true(meta_delete_queue(fl.m, "/", "drift"));
    meta_vhost v2 = {"/", "from the leader", "x", "", false};
    assert_true(meta_put_vhost(l.m, &v2));
    meta_permission p = {"guest", "/", "c", "w", "r"};
    assert_true(meta_put_permission(l.m, &p)); /* an update of a row the follower lost */
    fl_pump(&fl);
    char *tl = load_text(l.m), *tf = load_text(fl.m);
    /* an update carries the columns it changes: tracing stays the follower's */
    assert_non_null(strstr(tf, "vhost / from the leader x  1"));
    assert_null(strstr(tf, "permission guest /")); /* NOTFOUND: omitted */
    assert_non_null(strstr(tl, "permission guest / c w r"));
    free(tl);
    free(tf);
    assert_false(meta_apply_changes(fl.m, "garbage", 7));
    fl_free(&fl);
    leader_free(&l);
}

/* Replication costs the writes little: declarations with a mirror and a
 * reader against without (printed; no bound on time). */
static void test_declaration_cost(void **state)
{
    enum { N = 300 };
    double t[2];
    for (int with = 0; with < 2; with++) {
        leader l;
        temp_dir(l.dir, sizeof l.dir, "meta-leader");
        l.m = open_meta(l.dir);
        l.mr = mirror_new(l.dir, 64u << 20);
        mirror_reader *r = NULL;
        if (with) {
            assert_true(meta_set_mirror(l.m, l.mr));
            r = mirror_reader_new(l.mr, 1, "x", 1);
        }
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        char name[32];
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof name, "q%d", i);
            put_queue(l.m, "/", name);
            put_binding(l.m, "/", "amq.direct", name, name);
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        t[with] = ((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6) /
                  (2 * N);
        mirror_reader_free(r);
        leader_free(&l);
    }
    printf("# meta: a declaration %.3f ms without a mirror, %.3f ms with one and a reader\n",
           t[0], t[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_follower_loads_what_the_leader_loads),
        cmocka_unit_test(test_queue_ids_follow_the_leader),
        cmocka_unit_test(test_image_replaces_and_apply_is_forgiving),
        cmocka_unit_test(test_declaration_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
