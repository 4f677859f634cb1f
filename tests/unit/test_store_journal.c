/* store journal: CRC32C vectors, the record codec, appends read back before
 * and after sync, the on_synced sequence, sync modes, replay order and
 * content, checkpoints, segment GC (settled, out-of-order acks, purge,
 * queue delete, dead-lettering across segments), durable delivery counts,
 * appends racing the sync thread and a 1 MiB body. Throughput is measured
 * by tests/bench (make bench), not here.
 * Crash recovery and damaged files are in test_store_journal_recovery.c. */
#include "test_store_journal_util.h"

enum { Q1 = 11, Q2 = 22, Q3 = 33 };

/* Every enqueue in a replay log follows a message record of its id. */
static void check_log_contract(const rlog *l)
{
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].type != 'E')
            continue;
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = l->v[k].type == 'M' && l->v[k].m == l->v[i].m;
        assert_true(seen);
    }
}

/* ---- CRC32C --------------------------------------------------------------------- */

static void test_crc32c_vectors(void **state)
{
    static const struct {
        const char *name;
        uint8_t fill; /* 0xA5: bytes 0..31 ascending */
        size_t len;
        uint32_t crc;
    } vectors[] = {
        {"32 zeros", 0x00, 32, 0x8A9136AA},
        {"32 ones", 0xFF, 32, 0x62A8AB43},
        {"0..31", 0xA5, 32, 0x46DD794E},
        {"empty", 0x00, 0, 0x00000000},
    };
    assert_int_equal(journal_crc32c(0, "123456789", 9), 0xE3069283);
    assert_int_equal(journal_crc32c_sw(0, "123456789", 9), 0xE3069283);
    for (size_t i = 0; i < sizeof vectors / sizeof *vectors; i++) {
        uint8_t b[32];
        for (size_t k = 0; k < sizeof b; k++)
            b[k] = vectors[i].fill == 0xA5 ? (uint8_t)k : vectors[i].fill;
        assert_int_equal(journal_crc32c(0, b, vectors[i].len), vectors[i].crc);
        assert_int_equal(journal_crc32c_sw(0, b, vectors[i].len), vectors[i].crc);
    }
    /* chaining */
    assert_int_equal(journal_crc32c(journal_crc32c(0, "1234", 4), "56789", 5), 0xE3069283);
    print_message("crc32c: %s\n", journal_crc32c_hw() ? "SSE4.2" : "software slice-by-8");
}

static void test_crc32c_hw_matches_sw(void **state)
{
    uint8_t buf[4096 + 16];
    fill_body(buf, sizeof buf, 7);
    for (size_t off = 0; off < 9; off++) {
        for (size_t len = 0; len < 300; len += 1 + len / 8) {
            uint32_t a = journal_crc32c(0, buf + off, len), b = journal_crc32c_sw(0, buf + off, len);
            assert_int_equal(a, b);
        }
    }
    assert_int_equal(journal_crc32c(0, buf, 4096), journal_crc32c_sw(0, buf, 4096));
}

/* ---- record codec --------------------------------------------------------------- */

enum { SEED = 7 }; /* segment 7's records */

static size_t make_record(uint8_t *buf, rec_type type, const uint8_t *payload, size_t n)
{
    memcpy(buf + REC_HEADER_SIZE, payload, n);
    journal_rec_seal(buf, type, 0, (uint32_t)(REC_HEADER_SIZE + n), SEED);
    return REC_HEADER_SIZE + n;
}

static void test_record_check_rejects(void **state)
{
    uint8_t p[ENQ_PAYLOAD] = {1, 2, 3};
    uint8_t rec[128];
    uint32_t len = 0;
    size_t n = make_record(rec, REC_ENQUEUE, p, sizeof p);
    assert_int_equal(journal_rec_check(rec, n, SEED, &len), REC_OK);
    assert_int_equal(len, n);
    jrec r;
    assert_true(journal_rec_decode(rec, len, &r));
    assert_int_equal(r.queue_id, 0x030201);

    static const struct {
        const char *what;
        size_t off;
        uint8_t mask;
        rec_status want;
    } damage[] = {
        {"length byte", 0, 0x01, REC_BAD_HEADER},
        {"length high byte", 3, 0x80, REC_BAD_HEADER},
        {"type", 4, 0x07, REC_BAD_HEADER},
        {"reserved", 5, 0x01, REC_BAD_HEADER},
        {"header crc", 9, 0x10, REC_BAD_HEADER},
        {"payload crc", 13, 0x10, REC_BAD_CRC},
        {"payload", 20, 0x40, REC_BAD_CRC},
    };
    for (size_t i = 0; i < sizeof damage / sizeof *damage; i++) {
        uint8_t copy[128];
        memcpy(copy, rec, sizeof copy);
        copy[damage[i].off] ^= damage[i].mask;
        if (journal_rec_check(copy, n, SEED, &len) != damage[i].want)
            fail_msg("damaged %s: not detected as expected", damage[i].what);
    }
    /* the same bytes are no record of another segment (a reused file's) */
    assert_int_equal(journal_rec_check(rec, n, SEED + 1, &len), REC_BAD_HEADER);
    assert_int_equal(journal_rec_check(rec, n - 1, SEED, &len), REC_TRUNCATED);
    assert_int_equal(journal_rec_check(rec, 10, SEED, &len), REC_TRUNCATED);

    /* impossible lengths: an enqueue must be exactly 48 bytes */
    uint8_t big[64] = {0};
    assert_int_equal(make_record(big, REC_ENQUEUE, big + 40, 8), 24);
    assert_int_equal(journal_rec_check(big, 64, SEED, &len), REC_BAD_HEADER);

    /* a message whose inner lengths do not add up decodes as bad */
    uint8_t m[MSG_FIXED + 4] = {0};
    put32(m + 16, 5); /* body len 5, but only 4 bytes follow */
    n = make_record(rec, REC_MESSAGE, m, sizeof m);
    assert_int_equal(journal_rec_check(rec, n, SEED, &len), REC_OK);
    assert_false(journal_rec_decode(rec, len, &r));
}

/* ---- appends and read-back ---------------------------------------------------- */

static void test_append_read_before_and_after_sync(void **state)
{
    jfx *f = fx_new(0, JOURNAL_SYNC_BATCH);
    journal_loc loc[5];
    journal_seq last = 0;
    for (uint64_t i = 0; i < 5; i++)
        last = append_msg(f->j, 100 + i, 10 + 100 * i, &loc[i]);
    assert_int_equal(last, 5);
    assert_int_equal(journal_synced(f->j), 0);
    for (uint64_t i = 0; i < 5; i++) /* still in the batch buffer */
        check_msg(f->j, loc[i], 100 + i, 10 + 100 * i);
    assert_int_equal(loc[0].segment, 1);
    assert_int_equal(loc[0].offset, SEG_HEADER_SIZE);
    assert_int_equal(loc[1].offset, SEG_HEADER_SIZE + align8(loc[0].length));
    fx_wait_synced(f, last);
    assert_int_equal(journal_synced(f->j), last);
    for (uint64_t i = 0; i < 5; i++) /* from the file */
        check_msg(f->j, loc[i], 100 + i, 10 + 100 * i);

    /* a loc that is not a message record is refused, not crashed on */
    journal_loc bad = loc[2];
    bad.offset += 8;
    uint8_t buf[1024];
    journal_message m;
    assert_false(journal_read_message(f->j, bad, buf, &m));
    bad = (journal_loc){99, 32, 100};
    assert_false(journal_read_message(f->j, bad, buf, &m));
    assert_true(log_errors >= 2);
    fx_free(f);
}

/* Several records in one read: a written stretch of one segment in
 * ascending order, bounded by the buffer; else one at a time. */
static void test_read_several_in_one_read(void **state)
{
    jfx *f = fx_new(0, JOURNAL_SYNC_BATCH);
    journal_loc loc[8];
    journal_seq last = 0;
    for (uint64_t i = 0; i < 8; i++)
        last = append_msg(f->j, 200 + i, 50 + 300 * i, &loc[i]);
    uint8_t buf[8192];
    journal_message m[8];
    uint64_t ids[8] = {200, 201, 202, 203, 204, 205, 206, 207};
    /* not written yet: one at a time, from the batch */
    assert_int_equal(journal_read_messages(f->j, ids, loc, 8, buf, sizeof buf, m), 1);
    assert_int_equal(m[0].msg_id, 200);
    fx_wait_synced(f, last);
    size_t got = journal_read_messages(f->j, ids, loc, 8, buf, sizeof buf, m);
    uint64_t span = loc[got - 1].offset + loc[got - 1].length - loc[0].offset;
    assert_true(got > 2 && got < 8); /* the buffer ends the stretch */
    assert_true(span <= sizeof buf);
    assert_true(loc[got].offset + loc[got].length - loc[0].offset > sizeof buf);
    for (size_t i = 0; i < got; i++) {
        uint8_t want[2200];
        assert_int_equal(m[i].msg_id, 200 + i);
        fill_body(want, 50 + 300 * i, 200 + i);
        assert_int_equal(m[i].body.len, 50 + 300 * i);
        assert_memory_equal(m[i].body.ptr, want, m[i].body.len);
    }
    /* out of order: the stretch stops where the order breaks */
    journal_loc swapped[3] = {loc[1], loc[3], loc[2]};
    uint64_t swapped_ids[3] = {201, 203, 202};
    assert_int_equal(journal_read_messages(f->j, swapped_ids, swapped, 3, buf, sizeof buf, m), 2);
    /* a record that is not the message asked for is refused */
    assert_int_equal(journal_read_messages(f->j, &ids[1], &loc[0], 1, buf, sizeof buf, m), 0);
    assert_int_equal(m[1].msg_id, 203);
    /* a first record that does not fit the buffer is not read */
    assert_int_equal(journal_read_messages(f->j, &ids[7], &loc[7], 1, buf, 100, m), 0);
    fx_free(f);
}

/* A FIFO backlog of consecutive ids: settling from the head must not
 * scan the rest of the table each time (it did with a locality-keeping
 * hash: one long run of occupied slots, quadratic overall). */
static void test_entry_table_fifo_is_linear(void **state)
{
    enum { N = 300000 };
    jentry_table t = {0};
    double t0 = now_s();
    for (uint64_t id = 1; id <= N; id++) {
        bool created;
        jentry *e = journal_entry_upsert(&t, id, &created);
        assert_non_null(e);
        assert_true(created);
        e->seg = e->enq_seg = 1;
    }
    for (uint64_t id = 1; id <= N; id++) {
        jentry *e = journal_entry_find(&t, id);
        assert_non_null(e);
        journal_entry_remove(&t, e);
    }
    double took = now_s() - t0;
    print_message("%d consecutive ids in and out (FIFO): %.0f ms\n", N, took * 1000);
    assert_int_equal(t.count, 0);
    assert_true(took < 2.0); /* linear: tens of ms; quadratic: minutes */
    journal_entry_table_free(&t);
}

static void test_sync_callback_sequence(void **state)
{
    jfx *f = fx_new(0, JOURNAL_SYNC_BATCH);
    journal_seq expect = 0;
    journal_loc loc;
    for (int turn = 0; turn < 20; turn++) {
        for (int k = 0; k < 1 + turn % 4; k++) {
            uint64_t id = expect;
            journal_seq s = append_msg(f->j, id, 64, &loc);
            assert_int_equal(s, ++expect); /* consecutive from 1 */
            s = journal_append_enqueue(f->j, Q1, id, loc);
            assert_int_equal(s, ++expect);
        }
        if (turn % 3 == 0)
            fx_wait_synced(f, expect);
        else
            event_base_loop(f->base, EVLOOP_NONBLOCK);
    }
    fx_wait_synced(f, expect);
    assert_false(f->went_backwards);
    assert_int_equal(f->synced, expect);
    assert_int_equal(journal_synced(f->j), expect);
    journal_stats st;
    journal_get_stats(f->j, &st);
    assert_int_equal(st.appended_records, expect);
    assert_true(st.syncs >= 7 && st.syncs <= expect);
    assert_int_equal(st.live_messages, expect / 2);
    fx_free(f);
}

static void run_mode(journal_sync_mode mode)
{
    jfx *f = fx_new(0, mode);
    journal_loc loc;
    journal_seq s = 0;
    for (int turn = 0; turn < 10; turn++) {
        for (int k = 0; k < 5; k++) {
            append_msg(f->j, (uint64_t)(turn * 5 + k), 100, &loc);
            s = journal_append_enqueue(f->j, Q1, (uint64_t)(turn * 5 + k), loc);
        }
        event_base_loop(f->base, EVLOOP_NONBLOCK); /* ends the turn */
    }
    fx_wait_synced(f, s);
    journal_stats st;
    journal_get_stats(f->j, &st);
    if (mode == JOURNAL_SYNC_ALWAYS)
        assert_int_equal(st.syncs, 10); /* one per turn, never merged */
    else
        assert_true(st.syncs >= 1 && st.syncs <= 10);
    check_msg(f->j, loc, 49, 100);
    fx_close(f);
    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_int_equal(l.n, 100); /* 50 messages and their enqueues */
    check_log_contract(&l);
    free(l.v);
    fx_free(f);
}

static void test_sync_mode_always(void **state) { run_mode(JOURNAL_SYNC_ALWAYS); }
static void test_sync_mode_none(void **state) { run_mode(JOURNAL_SYNC_NONE); }

/* ---- replay ---------------------------------------------------------------------- */

/* A small history with every record type; returns the last sequence. */
static journal_seq write_history(journal *j, journal_loc *loc)
{
    append_msg(j, 1, 100, &loc[1]);
    journal_append_enqueue(j, Q1, 1, loc[1]);
    journal_append_enqueue(j, Q2, 1, loc[1]);
    append_msg(j, 2, 200, &loc[2]);
    journal_append_enqueue(j, Q1, 2, loc[2]);
    journal_append_delivered(j, Q1, 1, 1);
    journal_append_delivered(j, Q1, 1, 2);
    journal_append_settle(j, Q1, 1, loc[1], JOURNAL_ACK, (amqp_bytes){0}, (amqp_bytes){0});
    journal_append_settle(j, Q2, 1, loc[1], JOURNAL_DEAD_LETTER, AMQP_CSTR("rejected"),
                          AMQP_CSTR("dlx"));
    journal_append_enqueue(j, Q3, 1, loc[1]); /* dead-lettered into Q3 */
    append_msg(j, 3, 0, &loc[3]);
    journal_append_enqueue(j, Q2, 3, loc[3]);
    journal_append_purge(j, Q2);
    append_msg(j, 4, 50, &loc[4]);
    journal_append_enqueue(j, Q2, 4, loc[4]);
    journal_append_delivered(j, Q2, 4, 1);
    journal_append_delivered(j, Q3, 1, 1);
    journal_append_queue_delete(j, Q1);
    return journal_append_enqueue(j, Q1, 4, loc[4]); /* Q1 declared again, same id */
}

static void test_replay_order_and_content(void **state)
{
    jfx *f = fx_new(0, JOURNAL_SYNC_BATCH);
    journal_loc loc[5];
    journal_seq last = write_history(f->j, loc);
    fx_wait_synced(f, last);
    fx_close(f);
    char ck[400];
    fx_checkpoint_path(f, ck, sizeof ck);
    assert_true(fx_exists(ck));
    unlink(ck); /* force a full scan */

    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_false(rs.from_checkpoint);
    assert_int_equal(rs.records, last);
    assert_int_equal(rs.corrupt_records, 0);
    assert_int_equal(rs.torn_tail_bytes, 0);
    assert_int_equal(rs.segments, 1);
    static const struct {
        char type;
        uint64_t q, m;
        uint32_t count;
    } want[] = {
        {'M', 0, 1, 0},  {'E', Q1, 1, 0}, {'E', Q2, 1, 0}, {'M', 0, 2, 0},  {'E', Q1, 2, 0},
        {'D', Q1, 1, 1}, {'D', Q1, 1, 2}, {'S', Q1, 1, 0}, {'S', Q2, 1, 0}, {'E', Q3, 1, 0},
        {'M', 0, 3, 0},  {'E', Q2, 3, 0}, {'P', Q2, 0, 0}, {'M', 0, 4, 0},  {'E', Q2, 4, 0},
        {'D', Q2, 4, 1}, {'D', Q3, 1, 1}, {'X', Q1, 0, 0}, {'E', Q1, 4, 0},
    };
    assert_int_equal(l.n, sizeof want / sizeof *want);
    for (size_t i = 0; i < l.n; i++) {
        if (l.v[i].type != want[i].type || l.v[i].q != want[i].q || l.v[i].m != want[i].m ||
            l.v[i].count != want[i].count)
            fail_msg("record %zu: got %c q%llu m%llu n%u", i, l.v[i].type,
                     (unsigned long long)l.v[i].q, (unsigned long long)l.v[i].m, l.v[i].count);
    }
    assert_int_equal(l.v[7].kind, JOURNAL_ACK);
    assert_int_equal(l.v[8].kind, JOURNAL_DEAD_LETTER);
    assert_memory_equal(&l.v[0].loc, &loc[1], sizeof loc[1]);
    assert_memory_equal(&l.v[9].loc, &loc[1], sizeof loc[1]); /* Q3's entry points at msg 1 */
    for (int i = 1; i <= 4; i++)
        check_msg(f->j, loc[i], (uint64_t)i, i == 1 ? 100 : i == 2 ? 200 : i == 3 ? 0 : 50);

    /* sequences continue after the replayed ones */
    assert_int_equal(journal_synced(f->j), last);
    journal_loc l5;
    assert_int_equal(append_msg(f->j, 5, 10, &l5), last + 1);
    assert_true(l5.segment > loc[4].segment);
    check_log_contract(&l);
    live_set s = live_from_log(&l);
    assert_int_equal(s.n, 3); /* Q1/2 went with the queue delete */
    assert_true(live_has(&s, Q3, 1) && live_has(&s, Q2, 4) && live_has(&s, Q1, 4));
    assert_int_equal(live_get(&s, Q3, 1)->count, 1);
    free(s.v);
    free(l.v);
    fx_free(f);
}

/* Clean close -> checkpoint: same live state, and a segment kept only for
 * its settles is not read. */
static void test_replay_from_checkpoint(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc loc[40];
    journal_seq s = 0;
    for (uint64_t i = 0; i < 12; i++) { /* segments 1.. hold 4 messages each */
        append_msg(f->j, i, 1000, &loc[i]);
        s = journal_append_enqueue(f->j, Q1, i, loc[i]);
        if (i == 0)
            journal_append_delivered(f->j, Q1, 0, 3);
    }
    for (uint64_t i = 1; i < 12; i++) /* message 0 stays; the rest are acked */
        s = journal_append_settle(f->j, Q1, i, loc[i], JOURNAL_ACK, (amqp_bytes){0},
                                  (amqp_bytes){0});
    fx_wait_synced(f, s);
    fx_close(f);

    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_true(rs.from_checkpoint);
    /* only the segment of message 0 is read: the others have no live entry */
    assert_int_equal(rs.segments, 1);
    live_set ls = live_from_log(&l);
    assert_int_equal(ls.n, 1);
    assert_true(live_has(&ls, Q1, 0));
    assert_int_equal(live_get(&ls, Q1, 0)->count, 3);
    assert_memory_equal(&live_get(&ls, Q1, 0)->loc, &loc[0], sizeof loc[0]);
    check_log_contract(&l);
    free(ls.v);

    /* Without the checkpoint, a full scan gives the same live state. */
    fx_close(f);
    char ck[400];
    fx_checkpoint_path(f, ck, sizeof ck);
    unlink(ck);
    fx_open(f);
    rlog l2 = {0};
    fx_replay(f, &l2, &rs);
    assert_false(rs.from_checkpoint);
    assert_true(rs.segments > 1);
    ls = live_from_log(&l2);
    assert_int_equal(ls.n, 1);
    assert_int_equal(live_get(&ls, Q1, 0)->count, 3);
    check_log_contract(&l2);
    free(ls.v);
    free(l.v);
    free(l2.v);
    fx_free(f);
}

/* ---- segment GC ------------------------------------------------------------------ */

static void test_gc_fully_settled_segments(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc loc[30];
    journal_seq s = fill_queue(f->j, Q1, 30, 900, loc);
    fx_wait_synced(f, s);
    int before = fx_count_segments(f);
    assert_true(before >= 7);
    journal_tick(f->j);
    assert_int_equal(fx_count_segments(f), before); /* everything live */
    journal_loc at;
    assert_true(journal_message_at(f->j, 0, loc[0], &at));
    assert_memory_equal(&at, &loc[0], sizeof at);

    for (uint64_t i = 0; i < 30; i++) /* acked in reverse order */
        s = journal_append_settle(f->j, Q1, 29 - i, loc[29 - i], JOURNAL_ACK, (amqp_bytes){0},
                                  (amqp_bytes){0});
    fx_wait_synced(f, s);
    journal_stats st;
    journal_get_stats(f->j, &st);
    assert_int_equal(st.live_messages, 0);
    journal_tick(f->j);
    fx_wait_segments(f, 1); /* only the active one is left */
    journal_get_stats(f->j, &st);
    assert_int_equal(st.segments, 1);
    /* collected: enqueueing message 0 again needs a new record */
    assert_false(journal_message_at(f->j, 0, loc[0], &at));
    assert_true(journal_message_at(f->j, 29, loc[29], &at)); /* in the active one */

    usleep(1100 * 1000); /* idle for over a second */
    journal_tick(f->j);
    journal_tick(f->j);
    fx_wait_segments(f, 0);
    journal_get_stats(f->j, &st);
    assert_int_equal(st.segments, 0);
    assert_int_equal(st.bytes_on_disk, 0);

    /* appending again starts a new segment */
    journal_loc l2;
    s = append_msg(f->j, 99, 10, &l2);
    assert_true(l2.segment > loc[29].segment);
    fx_wait_synced(f, s);
    fx_wait_segments(f, 1);
    check_msg(f->j, l2, 99, 10);
    fx_free(f);
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    *len = (size_t)ftell(fp);
    rewind(fp);
    uint8_t *b = malloc(*len);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *len, fp), *len);
    fclose(fp);
    return b;
}

/* Collected segment files are kept as spares (two at most) and reused for
 * new segments, so that fdatasync overwrites blocks instead of growing a
 * file. A reused file's old records never come back: a closed segment is
 * cut to its own records, and what a crash leaves after the last one's
 * records (here: a whole old segment, valid records of another number) is
 * truncated at replay without a warning. */
static void test_gc_reuses_segment_files(void **state)
{
    jfx *f = fx_new(8192, JOURNAL_SYNC_BATCH);
    journal_loc loc[40];
    journal_seq s = fill_queue(f->j, Q1, 40, 900, loc);
    for (uint64_t i = 0; i < 40; i++)
        s = journal_append_settle(f->j, Q1, i, loc[i], JOURNAL_ACK, (amqp_bytes){0},
                                  (amqp_bytes){0});
    fx_wait_synced(f, s);
    journal_tick(f->j);
    fx_wait_segments(f, 1);
    char spare0[400], spare1[400], spare2[400];
    snprintf(spare0, sizeof spare0, "%s/spare0", f->jdir);
    snprintf(spare1, sizeof spare1, "%s/spare1", f->jdir);
    snprintf(spare2, sizeof spare2, "%s/spare2", f->jdir);
    assert_true(fx_exists(spare0) && fx_exists(spare1));
    assert_false(fx_exists(spare2));
    size_t old_len;
    uint8_t *old = read_file(spare0, &old_len);
    assert_true(old_len >= 8192);

    /* new messages roll into a new segment: the first spare's file */
    journal_loc l2[12];
    for (uint64_t i = 0; i < 12; i++) {
        append_msg(f->j, 1000 + i, i < 10 ? 900 : 50, &l2[i]);
        s = journal_append_enqueue(f->j, Q2, 1000 + i, l2[i]);
    }
    fx_wait_synced(f, s);
    uint32_t last_seg = l2[11].segment;
    assert_true(last_seg > loc[39].segment);
    assert_false(fx_exists(spare0));
    for (uint64_t i = 0; i < 12; i++)
        check_msg(f->j, l2[i], 1000 + i, i < 10 ? 900 : 50);
    fx_close(f);

    char seg[400];
    fx_seg_path(f, last_seg, seg, sizeof seg);
    /* its records end with the last message's enqueue */
    uint64_t end = l2[11].offset + align8(l2[11].length) + align8(REC_HEADER_SIZE + ENQ_PAYLOAD);
    assert_true(end < old_len);
    assert_int_equal(fx_file_size(seg), end); /* cut to its records at close */

    /* a crash could leave old bytes after them: append a whole old segment */
    FILE *fp = fopen(seg, "ab");
    assert_non_null(fp);
    assert_int_equal(fwrite(old, 1, old_len, fp), old_len);
    fclose(fp);
    free(old);
    rlog l = {0};
    journal_replay_stats rs;
    log_reset();
    fx_reopen_replay(f, true, &l, &rs);
    assert_int_equal(log_warnings + log_errors, 0);
    assert_int_equal(rs.torn_tail_bytes, old_len);
    assert_int_equal(fx_file_size(seg), end);
    live_set ls = live_from_log(&l);
    assert_int_equal(ls.n, 12); /* Q2's; none of Q1's old records */
    for (uint64_t i = 0; i < 12; i++)
        assert_true(live_has(&ls, Q2, 1000 + i));
    free(ls.v);
    free(l.v);
    fx_free(f);
}

/* One message is never acked; everything after it is acked a little late
 * (so settles land in later segments than their enqueues). Disk use must
 * follow the live data, not grow with the history. */
static void test_gc_out_of_order_acks(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc stuck, prev = {0};
    journal_seq s = append_msg(f->j, 0, 500, &stuck);
    journal_append_enqueue(f->j, Q1, 0, stuck);
    int max_segments = 0;
    for (uint64_t i = 1; i <= 600; i++) {
        journal_loc loc;
        append_msg(f->j, i, 500, &loc);
        s = journal_append_enqueue(f->j, Q1, i, loc);
        if (i > 1)
            s = journal_append_settle(f->j, Q1, i - 1, prev, JOURNAL_ACK, (amqp_bytes){0},
                                      (amqp_bytes){0});
        prev = loc;
        if (i % 20 == 0) {
            fx_wait_synced(f, s);
            journal_tick(f->j);
            fx_spin(f, 5);
            journal_tick(f->j);
            int n = fx_count_segments(f);
            max_segments = n > max_segments ? n : max_segments;
        }
    }
    fx_wait_synced(f, s);
    for (int k = 0; k < 4; k++) {
        journal_tick(f->j);
        fx_spin(f, 10);
    }
    journal_stats st;
    journal_get_stats(f->j, &st);
    print_message("out-of-order acks: %d segments at most over %llu written\n", max_segments,
                  (unsigned long long)(st.appended_records * 520 / 4096));
    assert_int_equal(st.live_messages, 2);
    assert_true(max_segments <= 16); /* ~150 segments were written */
    assert_true(fx_count_segments(f) <= 12);
    check_msg(f->j, stuck, 0, 500);

    /* The state survives a restart. Without the checkpoint (which the
     * collection relied on) nothing live is lost either; some acked entries
     * whose settles were collected may come back. */
    fx_close(f);
    for (int pass = 0; pass < 2; pass++) {
        rlog l = {0};
        journal_replay_stats rs;
        fx_reopen_replay(f, pass == 1, &l, &rs);
        live_set ls = live_from_log(&l);
        assert_true(live_has(&ls, Q1, 0) && live_has(&ls, Q1, 600));
        if (pass == 0)
            assert_int_equal(ls.n, 2);
        else
            print_message("without the checkpoint: %zu entries (2 live)\n", ls.n);
        check_log_contract(&l);
        free(ls.v);
        free(l.v);
        fx_close(f);
    }
    fx_free(f);
}

static void test_gc_purge_and_delete(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc loc;
    journal_seq s = 0;
    for (uint64_t i = 0; i < 40; i++) {
        append_msg(f->j, i, 700, &loc);
        journal_append_enqueue(f->j, Q1, i, loc);
        s = journal_append_enqueue(f->j, (i % 2) ? Q2 : Q3, i, loc);
    }
    journal_append_purge(f->j, Q1);
    s = journal_append_queue_delete(f->j, Q2);
    fx_wait_synced(f, s);
    int before = fx_count_segments(f);
    journal_tick(f->j);
    fx_spin(f, 10);
    assert_int_equal(fx_count_segments(f), before); /* Q3 still holds every other one */
    journal_stats st;
    journal_get_stats(f->j, &st);
    assert_int_equal(st.live_messages, 20);

    s = journal_append_purge(f->j, Q3);
    fx_wait_synced(f, s);
    journal_tick(f->j);
    fx_spin(f, 10);
    journal_tick(f->j);
    fx_wait_segments(f, 1);
    journal_get_stats(f->j, &st);
    assert_int_equal(st.live_messages, 0);
    fx_close(f);
    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    live_set ls = live_from_log(&l);
    assert_int_equal(ls.n, 0);
    free(ls.v);
    free(l.v);
    fx_free(f);
}

/* A message dead-lettered long after it was published: the enqueue into the
 * dead-letter queue is in a much later segment than the message, and both
 * must stay while that entry lives. */
static void test_gc_dead_letter_across_segments(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc old;
    append_msg(f->j, 1, 800, &old);
    journal_seq s = journal_append_enqueue(f->j, Q1, 1, old);
    for (uint64_t i = 2; i < 40; i++) { /* filler, consumed at once */
        journal_loc loc;
        append_msg(f->j, i, 800, &loc);
        journal_append_enqueue(f->j, Q2, i, loc);
        s = journal_append_settle(f->j, Q2, i, loc, JOURNAL_ACK, (amqp_bytes){0},
                                  (amqp_bytes){0});
    }
    journal_append_settle(f->j, Q1, 1, old, JOURNAL_DEAD_LETTER, AMQP_CSTR("expired"),
                          AMQP_CSTR("dlx"));
    s = journal_append_enqueue(f->j, Q3, 1, old);
    for (uint64_t i = 40; i < 60; i++) { /* more filler: the DL enqueue's segment rolls */
        journal_loc loc;
        append_msg(f->j, i, 800, &loc);
        journal_append_enqueue(f->j, Q2, i, loc);
        s = journal_append_settle(f->j, Q2, i, loc, JOURNAL_ACK, (amqp_bytes){0},
                                  (amqp_bytes){0});
    }
    fx_wait_synced(f, s);
    /* GC needs a few ticks and syncs; on a loaded machine they take longer */
    for (double deadline = now_s() + 5; fx_count_segments(f) > 6 && now_s() < deadline;) {
        journal_tick(f->j);
        fx_spin(f, 10);
    }
    assert_true(fx_count_segments(f) <= 6);
    check_msg(f->j, old, 1, 800);
    fx_close(f);
    for (int pass = 0; pass < 2; pass++) {
        /* pass 1: a full scan must find the message and the DL enqueue too */
        rlog l = {0};
        journal_replay_stats rs;
        fx_reopen_replay(f, pass == 1, &l, &rs);
        live_set ls = live_from_log(&l);
        assert_true(live_has(&ls, Q3, 1));
        assert_memory_equal(&live_get(&ls, Q3, 1)->loc, &old, sizeof old);
        if (pass == 0)
            assert_int_equal(ls.n, 1);
        check_msg(f->j, old, 1, 800);
        check_log_contract(&l);
        free(ls.v);
        free(l.v);
        fx_close(f);
    }
    fx_free(f);
}

/* Delivery counts survive a restart, the newest one winning, even after the
 * segments of the older delivered records are collected. */
/* A sparse segment (a few long-unacked messages among settled ones) is
 * compacted while appends go on: its live records are copied, it is
 * deleted, readers of the old locations find the copies, and replay (with
 * and without the checkpoint) gives the same live state and counts. */
static void test_compaction_under_concurrent_appends(void **state)
{
    jfx *f = fx_new(16384, JOURNAL_SYNC_BATCH);
    enum { N = 300 };
    journal_loc loc[N];
    journal_seq s = 0;
    for (uint64_t i = 0; i < N; i++) {
        append_msg(f->j, 1000 + i, 200, &loc[i]);
        s = journal_append_enqueue(f->j, Q1, 1000 + i, loc[i]);
        if (i % 50 == 0)
            s = journal_append_enqueue(f->j, Q2, 1000 + i, loc[i]);
    }
    static const uint64_t kept[] = {3, 40, 150, 151};
    for (uint64_t i = 0; i < N; i++) {
        bool keep = i == 3 || i == 40 || i == 150 || i == 151;
        if (!keep)
            s = journal_append_settle(f->j, Q1, 1000 + i, loc[i], JOURNAL_ACK, (amqp_bytes){0},
                                      (amqp_bytes){0});
        if (i % 50 == 0 && i >= 100)
            s = journal_append_settle(f->j, Q2, 1000 + i, loc[i], JOURNAL_DROP, (amqp_bytes){0},
                                      (amqp_bytes){0});
    }
    s = journal_append_delivered(f->j, Q1, 1003, 3);
    fx_wait_synced(f, s);
    char seg1[400];
    fx_seg_path(f, 1, seg1, sizeof seg1);
    assert_true(fx_exists(seg1));

    /* ticks with appends in between, as a busy broker would do */
    uint64_t next = 5000;
    for (int round = 0; round < 400 && fx_exists(seg1); round++) {
        journal_loc l;
        append_msg(f->j, next, 100, &l);
        s = journal_append_enqueue(f->j, Q3, next++, l);
        journal_tick(f->j);
        fx_spin(f, 2);
    }
    fx_wait_synced(f, s);
    assert_false(fx_exists(seg1));
    journal_stats st;
    journal_get_stats(f->j, &st);
    assert_int_equal(st.live_messages, 4 + 2 + (next - 5000));

    /* the old locations still lead to the messages */
    for (size_t i = 0; i < 4; i++) {
        uint64_t id = 1000 + kept[i];
        uint8_t buf[1024];
        journal_message m;
        uint8_t want[200];
        assert_int_equal(journal_read_messages(f->j, &id, &loc[kept[i]], 1, buf, sizeof buf, &m),
                         1);
        fill_body(want, 200, id);
        assert_int_equal(m.body.len, 200);
        assert_memory_equal(m.body.ptr, want, 200);
    }

    fx_close(f);
    for (int pass = 0; pass < 2; pass++) {
        rlog l = {0};
        journal_replay_stats rs;
        fx_reopen_replay(f, pass == 1, &l, &rs);
        live_set ls = live_from_log(&l);
        for (size_t i = 0; i < 4; i++) {
            const live_entry *e = live_get(&ls, Q1, 1000 + kept[i]);
            assert_non_null(e);
            assert_int_equal(e->count, kept[i] == 3 ? 3 : 0);
            check_msg(f->j, e->loc, 1000 + kept[i], 200);
        }
        assert_true(live_has(&ls, Q2, 1000) && live_has(&ls, Q2, 1050));
        assert_int_equal(ls.n, 4 + 2 + (next - 5000));
        check_log_contract(&l);
        free(ls.v);
        free(l.v);
        fx_close(f);
    }
    fx_free(f);
}

/* Compaction leaves alone a segment whose live entries are still falling
 * (a consumer or an expiry draining it empties it without reads), gives the
 * loop a turn between its steps (one step per pass, not all of them in the
 * pass that started it), and stops reading once what it was to copy has
 * been settled meanwhile. */
static void test_compaction_waits_for_draining_yields_and_stops_early(void **state)
{
    jfx *f = fx_new(4u << 20, JOURNAL_SYNC_BATCH);
    enum { N = 260, BODY = 20000, KEEP = 20 };
    journal_loc loc[N];
    journal_seq s = 0;
    for (uint64_t i = 0; i < N; i++) {
        append_msg(f->j, 1000 + i, BODY, &loc[i]);
        s = journal_append_enqueue(f->j, Q1, 1000 + i, loc[i]);
    }
    fx_wait_synced(f, s);
    size_t in_seg1 = 0;
    while (in_seg1 < N && loc[in_seg1].segment == 1)
        in_seg1++;
    assert_true(in_seg1 > 150 && in_seg1 < N); /* segment 1 is closed and ~4 MB */
    journal_tick(f->j);

    /* drained a slice per tick down to KEEP live entries: never compacted,
     * though sparse from a quarter down */
    size_t live = in_seg1;
    while (live > KEEP) {
        size_t slice = live - KEEP < 10 ? live - KEEP : 10;
        for (size_t k = 0; k < slice; k++, live--)
            s = journal_append_settle(f->j, Q1, 1000 + (in_seg1 - live), loc[in_seg1 - live],
                                      JOURNAL_ACK, (amqp_bytes){0}, (amqp_bytes){0});
        fx_wait_synced(f, s);
        journal_tick(f->j);
        assert_null(f->j->compact);
    }
    journal_tick(f->j); /* stable since the last tick: now it is compacted */
    assert_non_null(f->j->compact);

    /* one step per loop pass: collecting, then 256 KiB of ~4 MB read */
    event_base_loop(f->base, EVLOOP_ONCE);
    event_base_loop(f->base, EVLOOP_ONCE);
    assert_non_null(f->j->compact);

    /* the rest settled meanwhile: the next step ends it, the segment unread */
    for (size_t i = in_seg1 - KEEP; i < in_seg1; i++)
        s = journal_append_settle(f->j, Q1, 1000 + i, loc[i], JOURNAL_ACK, (amqp_bytes){0},
                                  (amqp_bytes){0});
    int passes = 0;
    while (f->j->compact && passes < 100) {
        event_base_loop(f->base, EVLOOP_ONCE);
        passes++;
    }
    assert_null(f->j->compact);
    assert_true(passes <= 3);
    assert_non_null(strstr(log_last, "segment 1 compacted"));
    assert_int_equal(log_warnings + log_errors, 0);

    fx_wait_synced(f, s);
    assert_true(fx_tick_until_gone(f, 1, 200));
    journal_stats st;
    journal_get_stats(f->j, &st);
    assert_int_equal(st.live_messages, N - in_seg1);
    fx_free(f);
}

static void test_delivered_is_durable(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc a, b;
    append_msg(f->j, 1, 500, &a);
    journal_append_enqueue(f->j, Q1, 1, a);
    append_msg(f->j, 2, 500, &b);
    journal_seq s = journal_append_enqueue(f->j, Q1, 2, b);
    for (uint32_t n = 1; n <= 5; n++) {
        journal_append_delivered(f->j, Q1, 1, n);
        for (uint64_t i = 0; i < 10; i++) { /* filler between redeliveries */
            journal_loc loc;
            uint64_t id = 100 + n * 10 + i;
            append_msg(f->j, id, 900, &loc);
            journal_append_enqueue(f->j, Q2, id, loc);
            s = journal_append_settle(f->j, Q2, id, loc, JOURNAL_DROP, (amqp_bytes){0},
                                      (amqp_bytes){0});
        }
    }
    fx_wait_synced(f, s);
    journal_tick(f->j);
    fx_spin(f, 10);
    journal_tick(f->j);
    fx_close(f);
    for (int pass = 0; pass < 2; pass++) {
        rlog l = {0};
        journal_replay_stats rs;
        fx_reopen_replay(f, pass == 1, &l, &rs);
        assert_int_equal(rs.from_checkpoint, pass == 0);
        live_set ls = live_from_log(&l);
        if (pass == 0)
            assert_int_equal(ls.n, 2);
        assert_non_null(live_get(&ls, Q1, 1));
        assert_non_null(live_get(&ls, Q1, 2));
        assert_int_equal(live_get(&ls, Q1, 1)->count, 5);
        assert_int_equal(live_get(&ls, Q1, 2)->count, 0);
        free(ls.v);
        free(l.v);
        fx_close(f);
    }
    fx_free(f);
}

/* ---- concurrency, size, speed ------------------------------------------------------ */

static void test_concurrent_appends(void **state)
{
    enum { TURNS = 1500, PER_TURN = 8 };
    jfx *f = fx_new(256 << 10, JOURNAL_SYNC_BATCH);
    journal_loc *loc = calloc(TURNS * PER_TURN, sizeof *loc);
    assert_non_null(loc);
    journal_seq s = 0;
    uint64_t n = 0, x = 12345;
    for (int t = 0; t < TURNS; t++) {
        for (int k = 0; k < PER_TURN; k++, n++) {
            append_msg(f->j, n, 50 + n % 700, &loc[n]);
            s = journal_append_enqueue(f->j, Q1, n, loc[n]);
        }
        event_base_loop(f->base, EVLOOP_NONBLOCK); /* hands the batch over */
        /* read back something recent: in the fill, queued, being written, or on disk */
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        uint64_t back = n - 1 - (x >> 33) % (n < 64 ? n : 64);
        check_msg(f->j, loc[back], back, 50 + back % 700);
    }
    fx_wait_synced(f, s);
    assert_false(f->went_backwards);
    for (uint64_t i = 0; i < n; i++)
        check_msg(f->j, loc[i], i, 50 + i % 700);
    journal_stats st;
    journal_get_stats(f->j, &st);
    assert_int_equal(st.live_messages, n);
    print_message("concurrent: %llu records in %llu syncs\n",
                  (unsigned long long)st.appended_records, (unsigned long long)st.syncs);
    free(loc);
    fx_free(f);
}

static void test_big_body(void **state)
{
    jfx *f = fx_new(64 << 10, JOURNAL_SYNC_BATCH); /* smaller than the message */
    journal_loc small, big, after;
    append_msg(f->j, 1, 10, &small);
    journal_seq s = append_msg(f->j, 2, 1 << 20, &big);
    journal_append_enqueue(f->j, Q1, 2, big);
    s = append_msg(f->j, 3, 10, &after);
    check_msg(f->j, big, 2, 1 << 20); /* from memory */
    fx_wait_synced(f, s);
    check_msg(f->j, big, 2, 1 << 20); /* from disk */
    assert_true(after.segment > big.segment);
    fx_close(f);
    fx_open(f);
    rlog l = {0};
    journal_replay_stats rs;
    fx_replay(f, &l, &rs);
    assert_int_equal(rs.corrupt_records, 0);
    check_msg(f->j, big, 2, 1 << 20);
    free(l.v);
    fx_free(f);
}

int main(void)
{
    if (getenv("JOURNAL_TEST_FILTER"))
        cmocka_set_test_filter(getenv("JOURNAL_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_crc32c_hw_matches_sw),
        cmocka_unit_test(test_record_check_rejects),
        cmocka_unit_test(test_append_read_before_and_after_sync),
        cmocka_unit_test(test_read_several_in_one_read),
        cmocka_unit_test(test_entry_table_fifo_is_linear),
        cmocka_unit_test(test_sync_callback_sequence),
        cmocka_unit_test(test_sync_mode_always),
        cmocka_unit_test(test_sync_mode_none),
        cmocka_unit_test(test_replay_order_and_content),
        cmocka_unit_test(test_replay_from_checkpoint),
        cmocka_unit_test(test_gc_fully_settled_segments),
        cmocka_unit_test(test_gc_reuses_segment_files),
        cmocka_unit_test(test_gc_out_of_order_acks),
        cmocka_unit_test(test_gc_purge_and_delete),
        cmocka_unit_test(test_gc_dead_letter_across_segments),
        cmocka_unit_test(test_compaction_under_concurrent_appends),
        cmocka_unit_test(test_compaction_waits_for_draining_yields_and_stops_early),
        cmocka_unit_test(test_delivered_is_durable),
        cmocka_unit_test(test_concurrent_appends),
        cmocka_unit_test(test_big_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
