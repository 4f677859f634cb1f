/* store journal recovery: a process that dies without journal_close (a
 * forked child that appends, waits for the sync and _exit()s), with and
 * without an older checkpoint; torn tails (cut mid-record, zero-filled,
 * garbage); corrupt records in the middle (payload CRC, header, the end of
 * an older segment) skipped and counted with the rest recovered; damaged
 * segment files and checkpoints; appends without a replay; and no acked
 * message coming back after a crash once its segments were collected. */
#include "test_store_journal_util.h"

enum { Q1 = 11, Q2 = 22 };

static const amqp_bytes none = {0};

/* ---- a child process that crashes ----------------------------------------------- */

typedef struct child {
    struct event_base *base;
    struct event *heartbeat;
    journal *j;
} child;

static bool child_open(child *c, const char *dir, uint64_t segment_size)
{
    char err[256];
    journal_config cfg = {.dir = dir, .segment_size = segment_size, .sync = JOURNAL_SYNC_BATCH};
    c->base = event_base_new();
    c->heartbeat = event_new(c->base, -1, EV_PERSIST, fx_heartbeat, NULL);
    struct timeval tv = {0, 20000};
    event_add(c->heartbeat, &tv);
    c->j = journal_open(&cfg, c->base, NULL, NULL, err, sizeof err);
    return c->j && journal_replay(c->j, NULL, NULL, NULL, err, sizeof err);
}

static bool child_wait(child *c, journal_seq seq)
{
    double deadline = now_s() + 10;
    while (journal_synced(c->j) < seq) {
        event_base_loop(c->base, EVLOOP_ONCE);
        if (now_s() > deadline)
            return false;
    }
    return true;
}

/* Runs fn in a child that then _exit()s without closing anything, as a
 * crash would leave the files. The parent must have no journal open. */
static void run_crashing_child(bool (*fn)(const char *dir, uint64_t segment_size),
                               const jfx *f)
{
    assert_null(f->j);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(fn(f->dir, f->segment_size) ? 0 : 1);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* 100 messages into Q1, every third acked; the last 10 appended after the
 * final sync (they may or may not survive). */
static bool child_publish(const char *dir, uint64_t segment_size)
{
    child c;
    if (!child_open(&c, dir, segment_size))
        return false;
    journal_seq s = 0;
    for (uint64_t i = 0; i < 100; i++) {
        journal_loc loc;
        append_msg(c.j, i, 300, &loc);
        s = journal_append_enqueue(c.j, Q1, i, loc);
        if (i % 3 == 0)
            s = journal_append_settle(c.j, Q1, i, loc, JOURNAL_ACK, none, none);
        if (i % 10 == 9) {
            event_base_loop(c.base, EVLOOP_NONBLOCK);
            if (i == 89 && !child_wait(&c, s))
                return false;
        }
    }
    return true; /* no close: the sync thread dies with us */
}

static void test_crash_recovery(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    fx_close(f);
    char ck[400];
    fx_checkpoint_path(f, ck, sizeof ck);
    unlink(ck); /* as if the child had been the first to open the journal */
    run_crashing_child(child_publish, f);
    assert_false(fx_exists(ck));

    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_false(rs.from_checkpoint);
    assert_int_equal(rs.corrupt_records, 0);
    live_set ls = live_from_log(&l);
    for (uint64_t i = 0; i < 90; i++) { /* all that was synced */
        assert_int_equal(live_has(&ls, Q1, i), i % 3 != 0);
        if (i % 3 != 0)
            check_msg(f->j, live_get(&ls, Q1, i)->loc, i, 300);
    }
    /* 90..99 were not waited for: any prefix of them may have made it */
    print_message("crash: %zu live entries recovered (60 synced + up to 10 unsynced)\n", ls.n);
    assert_true(ls.n >= 60 && ls.n <= 70);
    free(ls.v);
    free(l.v);

    /* the journal carries on, and a clean close now leaves a checkpoint */
    journal_loc loc;
    append_msg(f->j, 1000, 10, &loc);
    fx_wait_synced(f, journal_append_enqueue(f->j, Q2, 1000, loc));
    fx_close(f);
    assert_true(fx_exists(ck));
    fx_open(f);
    rlog l2 = {0};
    fx_replay(f, &l2, &rs);
    assert_true(rs.from_checkpoint);
    ls = live_from_log(&l2);
    assert_true(live_has(&ls, Q2, 1000) && live_has(&ls, Q1, 1) && !live_has(&ls, Q1, 3));
    free(ls.v);
    free(l2.v);
    fx_free(f);
}

/* Settles every entry of Q1 that is still live, publishes 5 more, crashes. */
static bool child_settle_and_publish(const char *dir, uint64_t segment_size)
{
    child c;
    char err[256];
    journal_config cfg = {.dir = dir, .segment_size = segment_size, .sync = JOURNAL_SYNC_BATCH};
    rlog l = {0};
    c.base = event_base_new();
    c.heartbeat = event_new(c.base, -1, EV_PERSIST, fx_heartbeat, NULL);
    struct timeval tv = {0, 20000};
    event_add(c.heartbeat, &tv);
    if ((c.j = journal_open(&cfg, c.base, NULL, NULL, err, sizeof err)) == NULL)
        return false;
    journal_replay_stats rs;
    if (!journal_replay(c.j, &recorder, &l, &rs, err, sizeof err) || !rs.from_checkpoint)
        return false;
    journal_seq s = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (l.v[i].type == 'E' && l.v[i].q == Q1)
            s = journal_append_settle(c.j, Q1, l.v[i].m, l.v[i].loc, JOURNAL_ACK, none, none);
    }
    for (uint64_t i = 500; i < 505; i++) {
        journal_loc loc;
        append_msg(c.j, i, 100, &loc);
        s = journal_append_enqueue(c.j, Q2, i, loc);
    }
    return child_wait(&c, s);
}

/* The checkpoint of a clean close is not removed at open: after a crash it
 * still describes a durable prefix, and what came after it is scanned. */
static void test_crash_after_checkpoint(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_seq s = 0;
    for (uint64_t i = 0; i < 30; i++) {
        journal_loc loc;
        append_msg(f->j, i, 400, &loc);
        s = journal_append_enqueue(f->j, Q1, i, loc);
    }
    fx_wait_synced(f, s);
    fx_close(f);
    run_crashing_child(child_settle_and_publish, f);

    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_true(rs.from_checkpoint);
    live_set ls = live_from_log(&l);
    assert_int_equal(ls.n, 5); /* Q1 all acked after the checkpoint; Q2's five */
    for (uint64_t i = 500; i < 505; i++)
        check_msg(f->j, live_get(&ls, Q2, i)->loc, i, 100);
    free(ls.v);
    free(l.v);
    fx_free(f);
}

/* Out-of-order acks with one stuck message: segments are collected relying
 * on periodic checkpoints; after a crash no acked message comes back. */
static bool child_stuck_and_acks(const char *dir, uint64_t segment_size)
{
    child c;
    if (!child_open(&c, dir, segment_size))
        return false;
    journal_loc stuck, prev = {0};
    append_msg(c.j, 0, 500, &stuck);
    journal_seq s = journal_append_enqueue(c.j, Q1, 0, stuck);
    for (uint64_t i = 1; i <= 400; i++) {
        journal_loc loc;
        append_msg(c.j, i, 500, &loc);
        s = journal_append_enqueue(c.j, Q1, i, loc);
        if (i > 1)
            s = journal_append_settle(c.j, Q1, i - 1, prev, JOURNAL_ACK, none, none);
        prev = loc;
        if (i % 20 == 0) {
            if (!child_wait(&c, s))
                return false;
            journal_tick(c.j);
            for (int k = 0; k < 3; k++)
                event_base_loop(c.base, EVLOOP_ONCE);
            journal_tick(c.j);
        }
    }
    journal_stats st;
    journal_get_stats(c.j, &st);
    return child_wait(&c, s) && st.segments < 20; /* ~100 were written */
}

static void test_crash_after_collection_no_resurrection(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    fx_close(f);
    run_crashing_child(child_stuck_and_acks, f);
    char ck[400];
    fx_checkpoint_path(f, ck, sizeof ck);
    assert_true(fx_exists(ck)); /* a periodic one */
    assert_true(fx_count_segments(f) < 20);
    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_true(rs.from_checkpoint);
    live_set ls = live_from_log(&l);
    assert_int_equal(ls.n, 2);
    assert_true(live_has(&ls, Q1, 0) && live_has(&ls, Q1, 400));
    check_msg(f->j, live_get(&ls, Q1, 0)->loc, 0, 500);
    free(ls.v);
    free(l.v);
    fx_free(f);
}

/* ---- torn tails ---------------------------------------------------------------------- */

/* 20 messages with enqueues, then one last message without one; returns
 * that message's loc. The checkpoint is removed, as after a crash. */
static journal_loc write_and_crash(jfx *f)
{
    journal_loc loc;
    for (uint64_t i = 0; i < 20; i++) {
        append_msg(f->j, i, 200, &loc);
        journal_append_enqueue(f->j, Q1, i, loc);
    }
    fx_wait_synced(f, append_msg(f->j, 99, 600, &loc));
    fx_close(f);
    char ck[400];
    fx_checkpoint_path(f, ck, sizeof ck);
    unlink(ck);
    return loc;
}

static void check_first_20(jfx *f, const rlog *l)
{
    live_set ls = live_from_log(l);
    assert_int_equal(ls.n, 20);
    for (uint64_t i = 0; i < 20; i++)
        check_msg(f->j, live_get(&ls, Q1, i)->loc, i, 200);
    free(ls.v);
}

static void test_torn_tail_mid_record(void **state)
{
    jfx *f = fx_new(0, JOURNAL_SYNC_BATCH);
    journal_loc last = write_and_crash(f);
    char seg[400];
    fx_seg_path(f, last.segment, seg, sizeof seg);
    assert_int_equal(fx_file_size(seg), last.offset + align8(last.length));
    assert_int_equal(truncate(seg, last.offset + 100), 0); /* cut inside the record */

    log_reset();
    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_int_equal(rs.torn_tail_bytes, 100);
    assert_int_equal(rs.corrupt_records, 0);
    assert_int_equal(rs.records, 40);
    assert_int_equal(log_warnings, 1);
    assert_non_null(strstr(log_last, "torn"));
    assert_int_equal(fx_file_size(seg), last.offset); /* truncated at the record */
    check_first_20(f, &l);
    for (size_t i = 0; i < l.n; i++)
        assert_true(l.v[i].m != 99);
    free(l.v);

    /* appends go on; the next replay finds nothing wrong */
    journal_loc loc;
    fx_wait_synced(f, append_msg(f->j, 100, 10, &loc));
    fx_close(f);
    fx_open(f);
    rlog l2 = {0};
    log_reset();
    fx_replay(f, &l2, &rs);
    assert_int_equal(rs.torn_tail_bytes + rs.corrupt_records, 0);
    assert_int_equal(log_warnings + log_errors, 0);
    check_msg(f->j, loc, 100, 10);
    free(l2.v);
    fx_free(f);
}

/* What a crash can leave after the last record: zeros (the file grew, the
 * data never came), or garbage. Either is cut off; with no record header
 * there, nothing was torn: it is logged as information, not a warning. */
static void test_torn_tail_zeros_and_garbage(void **state)
{
    for (int kind = 0; kind < 2; kind++) {
        jfx *f = fx_new(0, JOURNAL_SYNC_BATCH);
        journal_loc last = write_and_crash(f);
        char seg[400];
        fx_seg_path(f, last.segment, seg, sizeof seg);
        off_t size = fx_file_size(seg);
        uint8_t junk[5000];
        if (kind == 0)
            memset(junk, 0, sizeof junk);
        else
            fill_body(junk, sizeof junk, 42);
        int fd = open(seg, O_WRONLY | O_APPEND);
        assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
        close(fd);

        log_reset();
        fx_open(f);
        rlog l = {0};
        journal_replay_stats rs;
        fx_replay(f, &l, &rs);
        assert_int_equal(rs.torn_tail_bytes, sizeof junk);
        assert_int_equal(rs.corrupt_records, 0);
        assert_int_equal(fx_file_size(seg), size);
        assert_int_equal(log_warnings + log_errors, 0);
        assert_non_null(strstr(log_last, "records end"));
        check_first_20(f, &l);
        check_msg(f->j, last, 99, 600); /* the last whole record is kept */
        free(l.v);
        fx_free(f);
    }
}

/* ---- corruption in the middle ----------------------------------------------------------- */

static void test_corrupt_payload_crc_middle(void **state)
{
    jfx *f = fx_new(0, JOURNAL_SYNC_BATCH);
    journal_loc loc[20];
    journal_seq s = fill_queue(f->j, Q1, 20, 200, loc);
    fx_wait_synced(f, s);
    fx_close(f);
    char path[400];
    fx_checkpoint_path(f, path, sizeof path);
    unlink(path);
    fx_seg_path(f, loc[7].segment, path, sizeof path);
    fx_flip_byte(path, loc[7].offset + loc[7].length - 10, 0x20); /* in message 7's body */

    log_reset();
    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_int_equal(rs.corrupt_records, 1);
    assert_int_equal(rs.torn_tail_bytes, 0);
    assert_int_equal(rs.records, 39);
    assert_int_equal(log_errors, 1);
    assert_non_null(strstr(log_last, "corrupt record"));
    live_set ls = live_from_log(&l);
    assert_int_equal(ls.n, 19); /* message 7 and its enqueue are gone, the rest is there */
    assert_false(live_has(&ls, Q1, 7));
    for (uint64_t i = 8; i < 20; i++)
        check_msg(f->j, loc[i], i, 200);
    log_reset();
    uint8_t buf[1024];
    journal_message m;
    assert_false(journal_read_message(f->j, loc[7], buf, &m)); /* CRC checked on read */
    assert_int_equal(log_errors, 1);
    free(ls.v);
    free(l.v);
    fx_free(f);
}

/* A damaged header (its length) cannot be trusted to find the next record:
 * the scanner resynchronises on the next record whose CRCs check out. */
static void test_corrupt_header_resync(void **state)
{
    static const struct {
        const char *what;
        uint32_t off; /* within the record */
        uint8_t mask;
    } cases[] = {
        {"length made longer", 1, 0x10},
        {"length made shorter", 0, 0x08},
        {"type", 4, 0x03},
        {"header crc", 10, 0xff},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        jfx *f = fx_new(0, JOURNAL_SYNC_BATCH);
        journal_loc loc[10];
        journal_seq s = fill_queue(f->j, Q1, 10, 300, loc);
        fx_wait_synced(f, s);
        fx_close(f);
        char path[400];
        fx_checkpoint_path(f, path, sizeof path);
        unlink(path);
        fx_seg_path(f, loc[4].segment, path, sizeof path);
        fx_flip_byte(path, loc[4].offset + cases[c].off, cases[c].mask);

        fx_open(f);
        rlog l = {0};
        journal_replay_stats rs;
        fx_replay(f, &l, &rs);
        if (rs.corrupt_records != 1 || rs.records != 19)
            fail_msg("%s: %llu corrupt, %llu records", cases[c].what,
                     (unsigned long long)rs.corrupt_records, (unsigned long long)rs.records);
        live_set ls = live_from_log(&l);
        assert_int_equal(ls.n, 9);
        assert_false(live_has(&ls, Q1, 4));
        check_msg(f->j, loc[9], 9, 300);
        free(ls.v);
        free(l.v);
        fx_free(f);
    }
}

/* Damage at the end of an older segment is not a torn tail: it is counted,
 * the segment is not truncated, and the newer segments are read. */
static void test_corrupt_end_of_older_segment(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc loc[30];
    journal_seq s = fill_queue(f->j, Q1, 30, 700, loc);
    fx_wait_synced(f, s);
    fx_close(f);
    char path[400];
    fx_checkpoint_path(f, path, sizeof path);
    unlink(path);
    uint64_t victim = 0; /* the last message of segment 1: its enqueue ends it */
    while (loc[victim + 1].segment == 1)
        victim++;
    fx_seg_path(f, 1, path, sizeof path);
    off_t size = fx_file_size(path);
    off_t enqueue = loc[victim].offset + (off_t)align8(loc[victim].length);
    assert_int_equal(enqueue + 48, size);
    fx_flip_byte(path, enqueue + 2, 0x40);

    log_reset();
    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_int_equal(rs.corrupt_records, 1);
    assert_int_equal(rs.torn_tail_bytes, 0);
    assert_int_equal(fx_file_size(path), size);
    assert_true(log_errors >= 1);
    live_set ls = live_from_log(&l);
    assert_int_equal(ls.n, 29);
    assert_false(live_has(&ls, Q1, victim));
    check_msg(f->j, loc[29], 29, 700);
    free(ls.v);
    free(l.v);
    fx_free(f);
}

/* Files a crash or a stray copy can leave: an empty last segment, a
 * segment of garbage in the middle. Neither stops replay. */
static void test_damaged_segment_files(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc loc[10];
    journal_seq s = fill_queue(f->j, Q1, 10, 1500, loc);
    fx_wait_synced(f, s);
    fx_close(f);
    char path[400];
    fx_checkpoint_path(f, path, sizeof path);
    unlink(path);
    uint32_t last = loc[9].segment;
    char garbage[400], empty[400];
    fx_seg_path(f, last + 1, garbage, sizeof garbage);
    fx_seg_path(f, last + 5, empty, sizeof empty);
    uint8_t junk[3000];
    fill_body(junk, sizeof junk, 3);
    int fd = open(garbage, O_WRONLY | O_CREAT, 0644);
    assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);
    fd = open(empty, O_WRONLY | O_CREAT, 0644);
    close(fd);

    log_reset();
    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_int_equal(rs.corrupt_records, 1); /* the garbage segment */
    assert_false(fx_exists(empty));          /* a torn, empty last segment */
    live_set ls = live_from_log(&l);
    assert_int_equal(ls.n, 10);
    free(ls.v);
    free(l.v);
    /* the garbage holds nothing live: collected */
    journal_tick(f->j);
    double deadline = now_s() + 5;
    while (fx_exists(garbage) && now_s() < deadline) {
        event_base_loop(f->base, EVLOOP_NONBLOCK);
        usleep(2000);
    }
    assert_false(fx_exists(garbage));
    journal_loc n;
    s = append_msg(f->j, 77, 10, &n);
    assert_true(n.segment > last + 5); /* numbering goes past every file seen */
    fx_wait_synced(f, s);
    check_msg(f->j, n, 77, 10);
    fx_free(f);
}

static void test_damaged_checkpoint_rescans(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc loc;
    journal_seq s = 0;
    for (uint64_t i = 0; i < 20; i++) {
        append_msg(f->j, i, 500, &loc);
        s = journal_append_enqueue(f->j, Q1, i, loc);
        if (i % 2)
            s = journal_append_settle(f->j, Q1, i, loc, JOURNAL_ACK, none, none);
    }
    fx_wait_synced(f, s);
    fx_close(f);
    char ck[400];
    fx_checkpoint_path(f, ck, sizeof ck);
    fx_flip_byte(ck, 60, 0x01);

    log_reset();
    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_false(rs.from_checkpoint);
    assert_int_equal(log_warnings, 1);
    assert_non_null(strstr(log_last, "checkpoint"));
    live_set ls = live_from_log(&l);
    assert_int_equal(ls.n, 10);
    free(ls.v);
    free(l.v);
    fx_free(f);
}

/* Random damage: flipped bytes anywhere in the segments. Replay must not
 * crash or stop, must keep its promises to the handlers, and each flipped
 * byte may cost at most the one record it lands in. */
static void test_random_damage(void **state)
{
    uint64_t x = 0x2545F4914F6CDD1DULL;
    for (int round = 0; round < 40; round++) {
        jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
        journal_loc loc[50];
        journal_seq s = 0;
        for (uint64_t i = 0; i < 50; i++) {
            append_msg(f->j, i, 50 + (i * 37) % 400, &loc[i]);
            s = journal_append_enqueue(f->j, Q1, i, loc[i]);
        }
        fx_wait_synced(f, s);
        fx_close(f);
        char path[400];
        fx_checkpoint_path(f, path, sizeof path);
        unlink(path);
        int flips = 1 + round % 5;
        for (int k = 0; k < flips; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint32_t seg = loc[0].segment + (uint32_t)(x % (loc[49].segment - loc[0].segment + 1));
            fx_seg_path(f, seg, path, sizeof path);
            off_t size = fx_file_size(path);
            fx_flip_byte(path, (off_t)((x >> 20) % (uint64_t)size), (uint8_t)(1u << (x >> 60) % 8));
        }
        fx_open(f);
        rlog l = {0};
        journal_replay_stats rs;
        fx_replay(f, &l, &rs);
        live_set ls = live_from_log(&l);
        if (ls.n + (size_t)flips < 50)
            fail_msg("round %d: %d flips lost %zu entries", round, flips, 50 - ls.n);
        for (size_t i = 0; i < ls.n; i++)
            check_msg(f->j, ls.v[i].loc, ls.v[i].m, 50 + (ls.v[i].m * 37) % 400);
        free(ls.v);
        free(l.v);
        fx_free(f);
    }
}

/* ---- misuse ------------------------------------------------------------------------------ */

/* Appending without replaying first: nothing is collected (the state is
 * incomplete) and no checkpoint written; the next replay, from the older
 * checkpoint plus a scan of what follows it, sees everything. */
static void test_append_without_replay(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc a, b;
    append_msg(f->j, 1, 100, &a);
    fx_wait_synced(f, journal_append_enqueue(f->j, Q1, 1, a));
    fx_close(f);
    fx_open(f);
    append_msg(f->j, 2, 100, &b);
    journal_seq s = journal_append_settle(f->j, Q1, 1, a, JOURNAL_ACK, none, none);
    fx_wait_synced(f, s);
    journal_tick(f->j);
    fx_spin(f, 10);
    assert_int_equal(fx_count_segments(f), 2);
    char err[128];
    assert_false(journal_replay(f->j, NULL, NULL, NULL, err, sizeof err));
    assert_non_null(strstr(err, "before any append"));
    char ck[400];
    fx_checkpoint_path(f, ck, sizeof ck);
    struct stat before, after;
    assert_int_equal(stat(ck, &before), 0);
    fx_close(f);
    assert_int_equal(stat(ck, &after), 0);
    assert_int_equal(before.st_ino, after.st_ino); /* not rewritten */
    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_true(rs.from_checkpoint);
    live_set ls = live_from_log(&l);
    assert_int_equal(ls.n, 0); /* the settle was seen after its enqueue */
    assert_int_equal(l.n, 4);  /* M1 E1 M2 S1 */
    assert_false(journal_replay(f->j, NULL, NULL, NULL, err, sizeof err)); /* only once */
    free(ls.v);
    free(l.v);
    fx_free(f);
}

/* Segments written before version 2 (records' CRCs starting from 0) are
 * still read: replay and read-back take the seed from the header. */
static void test_version1_segments_read(void **state)
{
    jfx *f = fx_new(0, JOURNAL_SYNC_BATCH);
    journal_loc last = write_and_crash(f);
    char seg[400];
    fx_seg_path(f, last.segment, seg, sizeof seg);
    FILE *fp = fopen(seg, "r+b");
    assert_non_null(fp);
    off_t size = fx_file_size(seg);
    uint8_t *b = malloc((size_t)size);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)size, fp), (size_t)size);
    put32(b + 8, 1); /* version 1: seed 0 */
    put32(b + 28, journal_crc32c(0, b, 28));
    int records = 0;
    for (off_t off = SEG_HEADER_SIZE; off < size; records++) {
        uint32_t len = get32(b + off);
        journal_rec_seal(b + off, (rec_type)b[off + 4], 0, len, 0);
        off += (off_t)align8(len);
    }
    assert_int_equal(records, 41);
    rewind(fp);
    assert_int_equal(fwrite(b, 1, (size_t)size, fp), (size_t)size);
    fclose(fp);
    free(b);

    rlog l = {0};
    journal_replay_stats rs;
    log_reset();
    fx_reopen_replay(f, false, &l, &rs);
    assert_int_equal(rs.records, 41);
    assert_int_equal(rs.corrupt_records + rs.torn_tail_bytes, 0);
    assert_int_equal(log_warnings + log_errors, 0);
    check_first_20(f, &l); /* reads the bodies back */
    check_msg(f->j, last, 99, 600);
    free(l.v);
    fx_free(f);
}

/* A checkpoint may list segments that were collected after it was taken.
 * New segments must not reuse their numbers: replay would take a new
 * segment for the listed one and filter its records by the old state. */
static void test_numbering_past_checkpoint(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc loc[8];
    journal_seq s = fill_queue(f->j, Q1, 8, 1000, loc);
    for (uint64_t i = 0; i < 8; i++)
        s = journal_append_settle(f->j, Q1, i, loc[i], JOURNAL_ACK, none, none);
    fx_wait_synced(f, s);
    fx_close(f); /* collects all but the last segment, which the checkpoint lists */
    assert_int_equal(fx_count_segments(f), 1);
    DIR *d = opendir(f->jdir);
    struct dirent *de;
    uint32_t listed = 0;
    while ((de = readdir(d)) != NULL) {
        if (strstr(de->d_name, ".seg")) {
            listed = (uint32_t)strtoul(de->d_name, NULL, 10);
            char path[600];
            snprintf(path, sizeof path, "%s/%s", f->jdir, de->d_name);
            unlink(path); /* as a later run would have collected it */
        }
    }
    closedir(d);
    assert_true(listed > 1);
    /* and an older file it does not list: collected before it, unlink lost */
    char stale[400];
    fx_seg_path(f, listed - 1, stale, sizeof stale);
    uint8_t junk[1000];
    fill_body(junk, sizeof junk, 9);
    int fd = open(stale, O_WRONLY | O_CREAT, 0644);
    assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);

    log_reset();
    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_true(rs.from_checkpoint);
    assert_int_equal(rs.corrupt_records + rs.segments, 0); /* not even read */
    assert_int_equal(log_warnings + log_errors, 0);
    journal_tick(f->j);
    fx_wait_segments(f, 0);
    journal_loc n;
    s = append_msg(f->j, 50, 100, &n);
    journal_append_enqueue(f->j, Q2, 50, n);
    assert_true(n.segment > listed);
    fx_wait_synced(f, s + 1);
    fx_close(f);
    fx_open(f);
    rlog l2 = {0};
    fx_replay(f, &l2, &rs);
    live_set ls = live_from_log(&l2);
    assert_int_equal(ls.n, 1);
    assert_true(live_has(&ls, Q2, 50));
    free(ls.v);
    free(l.v);
    free(l2.v);
    fx_free(f);
}

int main(void)
{
    if (getenv("JOURNAL_TEST_FILTER"))
        cmocka_set_test_filter(getenv("JOURNAL_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_recovery),
        cmocka_unit_test(test_crash_after_checkpoint),
        cmocka_unit_test(test_crash_after_collection_no_resurrection),
        cmocka_unit_test(test_torn_tail_mid_record),
        cmocka_unit_test(test_torn_tail_zeros_and_garbage),
        cmocka_unit_test(test_corrupt_payload_crc_middle),
        cmocka_unit_test(test_corrupt_header_resync),
        cmocka_unit_test(test_corrupt_end_of_older_segment),
        cmocka_unit_test(test_damaged_segment_files),
        cmocka_unit_test(test_damaged_checkpoint_rescans),
        cmocka_unit_test(test_random_damage),
        cmocka_unit_test(test_append_without_replay),
        cmocka_unit_test(test_version1_segments_read),
        cmocka_unit_test(test_numbering_past_checkpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
