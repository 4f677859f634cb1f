/* The journal through a mirror (journal_config.mirror): a follower that
 * applies what a reader hands out -- a snapshot taken while the leader
 * runs, then every operation after it -- ends with the leader's journal
 * files, byte for byte, and replays the same messages, enqueues, settles,
 * delivery counts and delays. mirror_synced comes before the loop hears of
 * a sequence. The gate (journal_config.gated, journal_set_replicated)
 * holds journal_synced and on_synced back until replication catches up. */
#include "test_store_journal_util.h"
#include "test_store_mirror_util.h"

/* ---- a follower: a replica fed by a reader ---------------------------------- */

typedef struct follower {
    char dir[256];
    mirror_reader *reader;
    mirror_replica *replica;
    uint64_t synced; /* the last sync mark applied */
    int snapshots, snapshot_ends;
} follower;

static void fl_begin(void *ctx, uint64_t epoch) { ((follower *)ctx)->snapshots++; }
static bool fl_meta(void *ctx, const void *p, size_t len) { return true; }
static void fl_end(void *ctx) { ((follower *)ctx)->snapshot_ends++; }
static void fl_synced(void *ctx, uint64_t seq) { ((follower *)ctx)->synced = seq; }

static const mirror_replica_handlers fl_handlers = {fl_begin, fl_meta, fl_meta, fl_end,
                                                    fl_synced};

static void fl_start(follower *fl, mirror *m)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(fl->dir, sizeof fl->dir, "%s/warren-follower-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(fl->dir));
    fl->replica = mirror_replica_new(fl->dir, &fl_handlers, fl);
    assert_non_null(fl->replica);
    fl->reader = mirror_reader_new(m, 1, NULL, 0);
    assert_non_null(fl->reader);
}

static void fl_pump(follower *fl) { mirror_pump(fl->reader, fl->replica); }

static void fl_free(follower *fl)
{
    mirror_reader_free(fl->reader);
    mirror_replica_free(fl->replica);
    nftw(fl->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- the leader ---------------------------------------------------------------- */

static mirror *leader_mirror;      /* for the on_synced check */
static bool synced_before_mirror;  /* on_synced heard of a sequence the mirror had not */

static void leader_on_synced(void *ctx, journal_seq s)
{
    if (leader_mirror && mirror_last_synced(leader_mirror) < s)
        synced_before_mirror = true;
    fx_on_synced(ctx, s);
}

static void open_with(jfx *f, mirror *m, bool gated)
{
    char err[256] = "";
    journal_config cfg = {.dir = f->dir,
                          .segment_size = f->segment_size,
                          .sync = f->mode,
                          .log = capture_log,
                          .mirror = m,
                          .gated = gated};
    f->synced = 0;
    f->j = journal_open(&cfg, f->base, leader_on_synced, f, err, sizeof err);
    if (f->j == NULL)
        fail_msg("journal_open: %s", err);
}

/* A fixture whose journal goes through `m` (replayed, empty). */
static jfx *leader_new(mirror **m, bool gated, journal_sync_mode mode)
{
    jfx *f = fx_new(4096, mode);
    fx_close(f);
    *m = mirror_new(f->dir, 64u << 20);
    assert_non_null(*m);
    leader_mirror = *m;
    synced_before_mirror = false;
    open_with(f, *m, gated);
    rlog l = {0};
    fx_replay(f, &l, NULL);
    free(l.v);
    return f;
}

/* ---- comparing ----------------------------------------------------------------- */

/* The journal directories of a and b hold the same files, byte for byte;
 * returns how many. */
static int same_journal_files(const char *a, const char *b)
{
    char da[300], db[300];
    snprintf(da, sizeof da, "%s/journal", a);
    snprintf(db, sizeof db, "%s/journal", b);
    return mirror_same_dirs(da, db);
}

/* Replays the journal in `dir` (no mirror) into *l. */
static void replay_dir(const char *dir, rlog *l)
{
    struct event_base *base = event_base_new();
    char err[256] = "";
    journal_config cfg = {.dir = dir, .segment_size = 4096, .log = capture_log};
    journal *j = journal_open(&cfg, base, NULL, NULL, err, sizeof err);
    if (j == NULL)
        fail_msg("journal_open %s: %s", dir, err);
    if (!journal_replay(j, &recorder, l, NULL, err, sizeof err))
        fail_msg("journal_replay %s: %s", dir, err);
    journal_close(j);
    event_base_free(base);
}

static void same_replay(const char *a, const char *b, size_t want_live)
{
    rlog la = {0}, lb = {0};
    replay_dir(a, &la);
    replay_dir(b, &lb);
    assert_int_equal(la.n, lb.n);
    for (size_t i = 0; i < la.n; i++) {
        const rrec *x = &la.v[i], *y = &lb.v[i];
        assert_int_equal(x->type, y->type);
        assert_true(x->q == y->q && x->m == y->m && x->count == y->count &&
                    x->kind == y->kind && x->until == y->until);
        assert_memory_equal(&x->loc, &y->loc, sizeof x->loc);
    }
    live_set sa = live_from_log(&la), sb = live_from_log(&lb);
    assert_int_equal(sa.n, want_live);
    assert_int_equal(sa.n, sb.n);
    for (size_t i = 0; i < sa.n; i++)
        assert_memory_equal(&sa.v[i], &sb.v[i], sizeof sa.v[i]);
    free(sa.v);
    free(sb.v);
    free(la.v);
    free(lb.v);
}

/* ---- tests ----------------------------------------------------------------------- */

enum { BODY = 300, QA = 1, QB = 2, QC = 3, QD = 4 };

/* Messages 1..n-1 into queue QA (and the even ones into QB too). */
static journal_seq publish(jfx *f, uint64_t from, uint64_t to, journal_loc *loc)
{
    journal_seq s = 0;
    for (uint64_t id = from; id < to; id++) {
        append_msg(f->j, id, BODY, &loc[id]);
        s = journal_append_enqueue(f->j, QA, id, loc[id]);
        if (id % 2 == 0)
            s = journal_append_enqueue(f->j, QB, id, loc[id]);
    }
    return s;
}

static void ack(jfx *f, uint64_t q, uint64_t from, uint64_t to, const journal_loc *loc)
{
    for (uint64_t id = from; id < to; id++)
        journal_append_settle(f->j, q, id, loc[id], JOURNAL_ACK, (amqp_bytes){0},
                              (amqp_bytes){0});
}

static void tick(jfx *f, follower *fl, int n)
{
    for (int i = 0; i < n; i++) {
        journal_tick(f->j);
        fx_spin(f, 3);
        if (fl)
            fl_pump(fl);
    }
}

/* The follower attaches while the leader already has segments, follows
 * appends, settles (segments collected: unlinked or kept as spares, which
 * new segments take), delivery counts, delays, an atomic group, a purge and
 * a queue deletion, and the close's checkpoint: same files, same replay. */
static void test_follower_repeats_the_journal(void **state)
{
    mirror *m;
    jfx *f = leader_new(&m, false, JOURNAL_SYNC_BATCH);
    static journal_loc loc[600];
    fx_wait_synced(f, publish(f, 1, 40, loc));

    follower fl = {0};
    fl_start(&fl, m);
    journal_seq s = publish(f, 40, 200, loc); /* while the snapshot is read */
    fl_pump(&fl);
    assert_int_equal(fl.snapshots, 1);
    assert_int_equal(fl.snapshot_ends, 1);
    fx_wait_synced(f, s);

    ack(f, QA, 1, 150, loc);
    ack(f, QB, 1, 120, loc);
    for (uint64_t id = 150; id < 170; id++)
        journal_append_delivered(f->j, QA, id, (uint32_t)(id % 5 + 1));
    journal_append_delayed(f->j, QA, 171, 1234567);
    journal_group_begin(f->j);
    journal_append_settle(f->j, QA, 172, loc[172], JOURNAL_DEAD_LETTER, AMQP_CSTR("expired"),
                          AMQP_CSTR("dlx"));
    journal_append_enqueue(f->j, QC, 172, loc[172]);
    journal_group_end(f->j);
    fx_wait_synced(f, journal_append_purge(f->j, QB));
    tick(f, &fl, 30); /* collects the acked segments */
    char spare[400];
    snprintf(spare, sizeof spare, "%s/spare0", f->jdir);
    assert_true(fx_exists(spare));
    s = publish(f, 200, 400, loc); /* new segments take the spares */
    for (uint64_t id = 200; id < 400; id += 7)
        journal_append_enqueue(f->j, QD, id, loc[id]);
    s = journal_append_queue_delete(f->j, QD);
    fx_wait_synced(f, s);
    tick(f, &fl, 10);
    assert_false(synced_before_mirror);
    assert_true(mirror_last_synced(m) >= s);
    fl_pump(&fl);
    assert_true(fl.synced >= s);

    fx_close(f); /* the final checkpoint goes through the mirror too */
    fl_pump(&fl);
    assert_true(same_journal_files(f->dir, fl.dir) > 2);
    /* QA: 150..399 but 172 (dead-lettered); QB: the even ones from 200
     * (purged before); QC: 172; QD deleted. */
    same_replay(f->dir, fl.dir, (400 - 150 - 1) + 100 + 1);
    fl_free(&fl);
    leader_mirror = NULL;
    mirror_free(m);
    fx_free(f);
}

/* A mirror with no reader records nothing, and the journal works as it
 * does without one; a reader attached later still gets everything. */
static void test_reader_attaches_late(void **state)
{
    mirror *m;
    jfx *f = leader_new(&m, false, JOURNAL_SYNC_NONE);
    static journal_loc loc[300];
    fx_wait_synced(f, publish(f, 1, 100, loc));
    ack(f, QA, 1, 100, loc);
    for (uint64_t id = 2; id < 100; id += 2)
        ack(f, QB, id, id + 1, loc);
    tick(f, NULL, 20);
    assert_int_equal(mirror_log_bytes(m), 0);
    follower fl = {0};
    fl_start(&fl, m);
    fx_wait_synced(f, publish(f, 100, 250, loc));
    fx_close(f);
    fl_pump(&fl);
    same_journal_files(f->dir, fl.dir);
    same_replay(f->dir, fl.dir, 150 + 75);
    fl_free(&fl);
    leader_mirror = NULL;
    mirror_free(m);
    fx_free(f);
}

/* Loops until the sync thread has told the mirror of `seq`. */
static void wait_local(jfx *f, mirror *m, journal_seq seq)
{
    double deadline = now_s() + 10;
    while (mirror_last_synced(m) < seq) {
        event_base_loop(f->base, EVLOOP_ONCE);
        if (now_s() > deadline)
            fail_msg("the sync thread never reached %llu", (unsigned long long)seq);
    }
    fx_spin(f, 20); /* the loop hears of it */
}

/* Gated: on_synced and journal_synced stay at the lesser of the local and
 * the replicated position, and move when either catches up. */
static void test_gate_holds_synced_until_replicated(void **state)
{
    mirror *m;
    jfx *f = leader_new(&m, true, JOURNAL_SYNC_BATCH);
    journal_loc loc;
    journal_seq s1 = append_msg(f->j, 1, 10, &loc);
    journal_seq s2 = append_msg(f->j, 2, 10, &loc);
    wait_local(f, m, s2);
    assert_int_equal(journal_synced(f->j), 0);
    assert_int_equal(f->synced_calls, 0);

    journal_set_replicated(f->j, s1); /* on_synced from here */
    assert_int_equal(journal_synced(f->j), s1);
    assert_int_equal(f->synced, s1);
    assert_int_equal(f->synced_calls, 1);
    journal_set_replicated(f->j, s1); /* no news: no call */
    assert_int_equal(f->synced_calls, 1);
    journal_set_replicated(f->j, s2);
    assert_int_equal(f->synced, s2);

    /* replicated ahead of the local disk: the local round releases it */
    journal_seq s3 = append_msg(f->j, 3, 10, &loc);
    journal_set_replicated(f->j, s3);
    assert_true(journal_synced(f->j) < s3);
    fx_wait_synced(f, s3);
    assert_int_equal(journal_synced(f->j), s3);
    assert_false(f->went_backwards);
    leader_mirror = NULL;
    fx_close(f);
    mirror_free(m);
    fx_free(f);
}

/* What replay found counts as replicated: a gated journal reopened
 * reports it synced at once. Ungated, journal_set_replicated changes
 * nothing. */
static void test_gate_starts_at_replay(void **state)
{
    mirror *m;
    jfx *f = leader_new(&m, true, JOURNAL_SYNC_NONE);
    journal_loc loc;
    journal_seq s = append_msg(f->j, 1, 10, &loc);
    journal_set_replicated(f->j, s);
    fx_wait_synced(f, s);
    fx_close(f);
    open_with(f, m, true);
    rlog l = {0};
    fx_replay(f, &l, NULL);
    free(l.v);
    assert_int_equal(journal_synced(f->j), s);
    fx_close(f);

    open_with(f, NULL, false);
    fx_replay(f, &l, NULL);
    free(l.v);
    assert_null(journal_mirror(f->j));
    journal_seq s2 = append_msg(f->j, 2, 10, &loc);
    journal_set_replicated(f->j, 0);
    fx_wait_synced(f, s2);
    assert_int_equal(journal_synced(f->j), s2);
    leader_mirror = NULL;
    mirror_free(m);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_follower_repeats_the_journal),
        cmocka_unit_test(test_reader_attaches_late),
        cmocka_unit_test(test_gate_holds_synced_until_replicated),
        cmocka_unit_test(test_gate_starts_at_replay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
