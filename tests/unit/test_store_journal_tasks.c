/* Journal sync tasks (journal_append_sync_task, journal_set_before_commit):
 * another file synced in the journal's round -- a stream queue's log. A
 * task's sequence is synced only after it ran, and only if it succeeded;
 * before_commit runs on the loop thread just before the batch holding the
 * task is handed over, and what it appends goes with that batch. */
#include <stdatomic.h>

#include "test_store_journal_util.h"

typedef struct counted_task {
    journal_sync_task task;
    _Atomic int runs;
    _Atomic bool saw_sync; /* the sync flag it was run with */
    bool fail;
    journal_seq seq;
} counted_task;

static bool counted_run(journal_sync_task *t, bool sync)
{
    counted_task *c = (counted_task *)t;
    atomic_fetch_add(&c->runs, 1);
    atomic_store(&c->saw_sync, sync);
    return !c->fail;
}

typedef struct hook {
    int calls;
    journal *j;
    bool append; /* append a message record from the hook */
    journal_seq appended;
} hook;

static void on_before_commit(void *ctx)
{
    hook *h = ctx;
    h->calls++;
    if (h->append) {
        journal_loc loc;
        h->appended = append_msg(h->j, 900 + (uint64_t)h->calls, 10, &loc);
    }
}

static void run_task(journal_sync_mode mode)
{
    jfx *f = fx_new(0, mode);
    hook h = {.j = f->j};
    journal_set_before_commit(f->j, on_before_commit, &h);
    journal_loc loc;
    journal_seq s1 = append_msg(f->j, 1, 32, &loc);
    counted_task t = {.task.run = counted_run};
    t.seq = journal_append_sync_task(f->j, &t.task);
    assert_int_equal(t.seq, s1 + 1); /* the next sequence, like a record */
    assert_int_equal(h.calls, 0);     /* not before the batch is handed over */
    fx_wait_synced(f, t.seq);
    assert_int_equal(h.calls, 1);
    assert_int_equal(atomic_load(&t.runs), 1);
    assert_int_equal(atomic_load(&t.saw_sync), mode != JOURNAL_SYNC_NONE);
    fx_free(f);
}

static void test_task_runs_once_before_its_sequence_syncs(void **state) { run_task(JOURNAL_SYNC_BATCH); }
static void test_task_in_mode_none_is_told_not_to_sync(void **state) { run_task(JOURNAL_SYNC_NONE); }

/* A batch without tasks never calls the hook (the common case costs
 * nothing); one with several calls it once. */
static void test_hook_only_for_batches_with_tasks(void **state)
{
    jfx *f = fx_new(0, JOURNAL_SYNC_BATCH);
    hook h = {.j = f->j};
    journal_set_before_commit(f->j, on_before_commit, &h);
    journal_loc loc;
    fx_wait_synced(f, append_msg(f->j, 1, 32, &loc));
    assert_int_equal(h.calls, 0);
    counted_task a = {.task.run = counted_run}, b = {.task.run = counted_run};
    journal_append_sync_task(f->j, &a.task);
    append_msg(f->j, 2, 32, &loc);
    journal_seq last = journal_append_sync_task(f->j, &b.task);
    fx_wait_synced(f, last);
    assert_int_equal(h.calls, 1);
    assert_int_equal(atomic_load(&a.runs), 1);
    assert_int_equal(atomic_load(&b.runs), 1);
    fx_free(f);
}

/* What the hook appends goes with the task's batch: synced with it. */
static void test_hook_appends_join_the_batch(void **state)
{
    jfx *f = fx_new(0, JOURNAL_SYNC_BATCH);
    hook h = {.j = f->j, .append = true};
    journal_set_before_commit(f->j, on_before_commit, &h);
    counted_task t = {.task.run = counted_run};
    journal_seq seq = journal_append_sync_task(f->j, &t.task);
    fx_wait_synced(f, seq);
    assert_int_equal(h.calls, 1);
    assert_true(h.appended > seq);
    assert_true(f->synced >= h.appended); /* the same round */
    fx_free(f);
}

/* A task that fails fails the journal: its sequence never counts as
 * synced, so nothing waiting for it is confirmed. */
static void test_failed_task_never_syncs(void **state)
{
    log_reset();
    jfx *f = fx_new(0, JOURNAL_SYNC_BATCH);
    journal_loc loc;
    journal_seq before = append_msg(f->j, 1, 32, &loc);
    fx_wait_synced(f, before);
    counted_task t = {.task.run = counted_run, .fail = true};
    journal_seq seq = journal_append_sync_task(f->j, &t.task);
    fx_spin(f, 200);
    assert_int_equal(atomic_load(&t.runs), 1);
    assert_true(journal_synced(f->j) < seq);
    assert_true(log_errors >= 1);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_runs_once_before_its_sequence_syncs),
        cmocka_unit_test(test_task_in_mode_none_is_told_not_to_sync),
        cmocka_unit_test(test_hook_only_for_batches_with_tasks),
        cmocka_unit_test(test_hook_appends_join_the_batch),
        cmocka_unit_test(test_failed_task_never_syncs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
