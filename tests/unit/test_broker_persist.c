/* Persistence of messages without a network: a server journals persistent
 * messages in durable queues, their delivery counts and delays, and moves
 * between queues; after it stops, replaying its journal hands each live
 * entry on as recovery gives it to queue_restore (queue_paged) -- with its
 * delivery count and its deadline (delayed_until), and a moved message in
 * its new queue only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "test_broker_start.h"

static char dir[64];

static server *start(void)
{
    config c;
    config_defaults(&c);
    strcpy(c.listen_host, "127.0.0.1");
    c.listen_port = 0;
    strcpy(c.data_dir, dir);
    log_set_level(LOG_NONE);
    server *s = test_broker_new(&c);
    assert_non_null(s);
    return s;
}

static int setup(void **state)
{
    strcpy(dir, "/tmp/warren-unit-persist-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

static queue *durable(vhost *v, const char *name)
{
    queue_spec spec = {.name = AMQP_CSTR(name), .durable = true};
    queue *q = queue_new(v, &spec);
    assert_non_null(q);
    vhost_queue_add(v, q);
    durable_queue_declared(v, q); /* the metadata store gives it its store id */
    assert_true(queue_store_id(q) != 0);
    return q;
}

static msg *persistent(const char *body)
{
    static const uint8_t mode2[3] = {0x10, 0x00, 0x02}; /* delivery-mode 2 */
    msg *m = msg_new(test_msgs(), AMQP_CSTR(""), AMQP_CSTR("k"), (amqp_bytes){mode2, 3}, strlen(body));
    assert_non_null(m);
    assert_true(msg_append_body(m, (const uint8_t *)body, strlen(body)));
    assert_true(msg_persistent(m));
    return m;
}

/* What recovery hands on, collected. */
typedef struct found {
    uint64_t queue_id;
    queue_paged p;
} found;

typedef struct found_list {
    found v[16];
    size_t n;
} found_list;

static void collect(void *ctx, uint64_t queue_id, const queue_paged *p)
{
    found_list *l = ctx;
    assert_true(l->n < 16);
    l->v[l->n++] = (found){queue_id, *p};
}

static const queue_paged *find(const found_list *l, uint64_t queue_id, uint64_t id)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].queue_id == queue_id && l->v[i].p.id == id)
            return &l->v[i].p;
    return NULL;
}

/* Replays the stopped server's journal (checkpoint or not) into a list. */
static void replay(bool without_checkpoint, found_list *l)
{
    char path[128];
    if (without_checkpoint) {
        snprintf(path, sizeof path, "%s/journal/checkpoint", dir);
        unlink(path);
    }
    struct event_base *base = event_base_new();
    journal_config cfg = {.dir = dir};
    char err[256];
    journal *j = journal_open(&cfg, base, NULL, NULL, err, sizeof err);
    assert_non_null(j);
    uint64_t max_id = 0;
    l->n = 0;
    assert_true(persist_replay(j, true, collect, l, &max_id));
    journal_close(j);
    event_base_free(base);
}

static void test_delay_and_count_reach_queue_paged(void **state)
{
    server *s = start();
    vhost *v = server_vhost(s, AMQP_CSTR("/"));
    queue *q = durable(v, "pq"), *dlq = durable(v, "pq.dlq");
    msg *m[3] = {persistent("one"), persistent("two"), persistent("three")};
    for (int i = 0; i < 3; i++)
        assert_true(persist_publish(s, m[i], &q, 1) > 0);
    persist_delivered(q, m[0], 2);
    persist_delayed(q, m[0], 1767225600123ull);
    persist_delayed(q, m[1], 1767225600999ull);
    persist_delayed(q, m[1], 0); /* cleared */
    /* the third is dead-lettered: its copy, a message of its own, moves */
    msg *copy = msg_copy_with(test_msgs(), m[2], AMQP_CSTR("dlx"), AMQP_CSTR("k"), msg_properties(m[2]));
    assert_non_null(copy);
    assert_true(persist_move(q, m[2], JOURNAL_DEAD_LETTER, "rejected", copy, &dlq, 1) > 0);
    persist_delayed(dlq, copy, 42);
    uint64_t qid = queue_store_id(q), dlqid = queue_store_id(dlq), copy_id = msg_id(copy);
    uint64_t ids[3] = {msg_id(m[0]), msg_id(m[1]), msg_id(m[2])};
    for (int i = 0; i < 3; i++)
        msg_unref(m[i]);
    msg_unref(copy);
    test_broker_free(s);

    for (int pass = 0; pass < 2; pass++) {
        found_list l;
        replay(pass == 1, &l);
        assert_int_equal(l.n, 3);
        const queue_paged *p = find(&l, qid, ids[0]);
        assert_non_null(p);
        assert_int_equal(p->delivery_count, 2);
        assert_int_equal(p->delayed_until, 1767225600123ull);
        p = find(&l, qid, ids[1]);
        assert_non_null(p);
        assert_int_equal(p->delayed_until, 0);
        assert_null(find(&l, qid, ids[2])); /* moved out */
        p = find(&l, dlqid, copy_id);
        assert_non_null(p);
        assert_int_equal(p->delayed_until, 42);
        assert_int_equal(p->body_size, 5);
    }
}

/* A move of a message kept as it is (redrive: same properties) enqueues
 * the same record in the target; a non-persistent copy or transient
 * targets journal only the settle. */
static void test_move_without_a_new_message(void **state)
{
    server *s = start();
    vhost *v = server_vhost(s, AMQP_CSTR("/"));
    queue *a = durable(v, "mv.a"), *b = durable(v, "mv.b");
    queue_spec spec = {.name = AMQP_CSTR("mv.transient")};
    queue *t = queue_new(v, &spec);
    vhost_queue_add(v, t);
    msg *m = persistent("moved"), *n = persistent("to nowhere durable");
    persist_publish(s, m, &a, 1);
    persist_publish(s, n, &a, 1);
    assert_true(persist_move(a, m, JOURNAL_MOVE, "redrive", m, &b, 1) > 0);
    assert_int_equal(persist_move(a, n, JOURNAL_MOVE, "redrive", n, &t, 1), 0);
    uint64_t ida = queue_store_id(a), idb = queue_store_id(b), mid = msg_id(m), nid = msg_id(n);
    msg_unref(m);
    msg_unref(n);
    test_broker_free(s);
    found_list l;
    replay(true, &l);
    assert_non_null(find(&l, idb, mid));
    assert_null(find(&l, ida, mid));
    assert_null(find(&l, ida, nid));
    assert_int_equal(l.n, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_delay_and_count_reach_queue_paged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_move_without_a_new_message, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
