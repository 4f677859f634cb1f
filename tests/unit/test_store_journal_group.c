/* store journal: atomic groups and delayed records. A workload of ordinary
 * records and groups (dead-letter-like moves: settle in one queue, a new
 * message, enqueues in others; a move without a new message; a one-record
 * group) is cut at every byte offset of its segment -- truncated, and
 * zero-filled as a reused file would be -- and each replay must give
 * exactly the state of the whole units before the cut: every group all or
 * nothing, incomplete ones counted and truncated whole. Groups covered by a
 * checkpoint, groups in compacted segments, and delays through restart,
 * checkpoint, rescan, compaction, GC and a crash. */
#include "test_store_journal_util.h"

enum { Q1 = 11, Q2 = 22, Q3 = 33, Q4 = 44 };

static const amqp_bytes none = {0};

/* ---- a model of the live state ------------------------------------------------- */

typedef struct op {
    char t;       /* M message, E enqueue, S settle, D delivered, L delayed, B/G group
                     begin/end, P purge */
    uint64_t q, m;
    uint64_t v;   /* D: count; L: until */
} op;

/* Applies ops[0..n) to a model live set (as the broker would see it). */
static live_set model_apply(const live_set *base, const op *ops, size_t n)
{
    live_set s = {calloc(base->n + n + 1, sizeof(live_entry)), base->n};
    if (base->n)
        memcpy(s.v, base->v, base->n * sizeof *s.v);
    for (size_t i = 0; i < n; i++) {
        const op *o = &ops[i];
        size_t k = 0;
        while (k < s.n && !(s.v[k].q == o->q && s.v[k].m == o->m))
            k++;
        switch (o->t) {
        case 'E': s.v[s.n++] = (live_entry){o->q, o->m, 0, {0}, 0}; break;
        case 'S': assert_true(k < s.n); s.v[k] = s.v[--s.n]; break;
        case 'D': assert_true(k < s.n); s.v[k].count = (uint32_t)o->v; break;
        case 'L': assert_true(k < s.n); s.v[k].until = o->v; break;
        case 'P':
            for (k = 0; k < s.n;)
                if (s.v[k].q == o->q)
                    s.v[k] = s.v[--s.n];
                else
                    k++;
            break;
        }
    }
    qsort(s.v, s.n, sizeof *s.v, live_cmp);
    return s;
}

/* The same (queue, message, count, delay) entries; locations aside. */
static void assert_same_live(const live_set *got, const live_set *want, const char *what,
                             long cut)
{
    bool same = got->n == want->n;
    for (size_t i = 0; same && i < got->n; i++)
        same = got->v[i].q == want->v[i].q && got->v[i].m == want->v[i].m &&
               got->v[i].count == want->v[i].count && got->v[i].until == want->v[i].until;
    if (!same) {
        for (size_t i = 0; i < got->n; i++)
            print_message("  got  q%llu m%llu c%u u%llu\n", (unsigned long long)got->v[i].q,
                          (unsigned long long)got->v[i].m, got->v[i].count,
                          (unsigned long long)got->v[i].until);
        for (size_t i = 0; i < want->n; i++)
            print_message("  want q%llu m%llu c%u u%llu\n", (unsigned long long)want->v[i].q,
                          (unsigned long long)want->v[i].m, want->v[i].count,
                          (unsigned long long)want->v[i].until);
        fail_msg("%s: live state differs (cut at %ld)", what, cut);
    }
}

/* Appends ops to the journal; message records are remembered in locs[m]. */
static journal_seq run_ops(journal *j, const op *ops, size_t n, journal_loc *locs)
{
    journal_seq s = 0;
    for (size_t i = 0; i < n; i++) {
        const op *o = &ops[i];
        switch (o->t) {
        case 'M': s = append_msg(j, o->m, 40 + o->m % 7 * 13, &locs[o->m]); break;
        case 'E': s = journal_append_enqueue(j, o->q, o->m, locs[o->m]); break;
        case 'S':
            s = journal_append_settle(j, o->q, o->m, locs[o->m], JOURNAL_DEAD_LETTER,
                                      AMQP_CSTR("rejected"), AMQP_CSTR("dlx"));
            break;
        case 'D': s = journal_append_delivered(j, o->q, o->m, (uint32_t)o->v); break;
        case 'L': s = journal_append_delayed(j, o->q, o->m, o->v); break;
        case 'B': journal_group_begin(j); break;
        case 'G': s = journal_group_end(j); break;
        case 'P': s = journal_append_purge(j, o->q); break;
        }
    }
    return s;
}

static live_set replay_live(jfx *f, journal_replay_stats *rs)
{
    rlog l = {0};
    fx_open(f);
    fx_replay(f, &l, rs);
    live_set ls = live_from_log(&l);
    free(l.v);
    return ls;
}

/* ---- the workload ------------------------------------------------------------- */

/* Before the checkpoint (segment 1): messages 1..5 in Q1, one delivered,
 * one delayed. */
static const op base_ops[] = {
    {'M', 0, 1, 0}, {'E', Q1, 1, 0}, {'M', 0, 2, 0}, {'E', Q1, 2, 0}, {'M', 0, 3, 0},
    {'E', Q1, 3, 0}, {'M', 0, 4, 0}, {'E', Q1, 4, 0}, {'M', 0, 5, 0}, {'E', Q1, 5, 0},
    {'D', Q1, 1, 1}, {'L', Q1, 2, 1234},
};

/* After it (segment 2, scanned): ordinary records and groups interleaved. */
static const op tail_ops[] = {
    {'M', 0, 100, 0}, {'E', Q1, 100, 0}, {'D', Q1, 100, 1},
    /* dead-letter 1 from Q1 into Q2 and Q3 as message 101 */
    {'B', 0, 0, 0}, {'S', Q1, 1, 0}, {'M', 0, 101, 0}, {'E', Q2, 101, 0}, {'E', Q3, 101, 0},
    {'G', 0, 0, 0},
    {'L', Q1, 100, 5000},
    /* a one-record group */
    {'B', 0, 0, 0}, {'E', Q2, 3, 0}, {'G', 0, 0, 0},
    /* a move without a new message, with its delay */
    {'B', 0, 0, 0}, {'S', Q2, 101, 0}, {'E', Q4, 101, 0}, {'L', Q4, 101, 7777}, {'G', 0, 0, 0},
    {'D', Q2, 3, 2}, {'L', Q1, 2, 0},
    /* dead-letter a delayed one (its delay goes with the entry) */
    {'B', 0, 0, 0}, {'S', Q1, 100, 0}, {'M', 0, 102, 0}, {'E', Q2, 102, 0}, {'G', 0, 0, 0},
    {'M', 0, 103, 0}, {'E', Q1, 103, 0},
};
enum { NTAIL = sizeof tail_ops / sizeof *tail_ops };

/* Where each record of tail_ops ends in segment 2, by op index: its last
 * byte (it is whole from there on) and its padding's (ops that append
 * nothing get the previous padded end for both). */
static void record_ends(const uint8_t *seg, size_t size, uint64_t *end, uint64_t *padded)
{
    uint64_t off = SEG_HEADER_SIZE;
    for (size_t i = 0; i < NTAIL; i++) {
        end[i] = off;
        if (tail_ops[i].t != 'B') {
            assert_true(off + REC_HEADER_SIZE <= size);
            end[i] = off + get32(seg + off);
            off += align8(get32(seg + off));
        }
        padded[i] = off;
    }
    assert_int_equal(off, size);
}

/* What survives a cut: the ops of every whole unit -- an ordinary record,
 * or a group with its end -- that ends at or before it. Also where the
 * last whole unit's padding ends (replay cuts what follows), and whether
 * the cut is inside a group whose first member is whole (then it counts
 * as incomplete). */
static size_t surviving_ops(const uint64_t *end, const uint64_t *padded, uint64_t cut,
                            uint64_t *boundary, bool *incomplete)
{
    size_t keep = 0;
    *boundary = SEG_HEADER_SIZE;
    *incomplete = false;
    for (size_t i = 0; i < NTAIL;) {
        size_t last = i;
        if (tail_ops[i].t == 'B')
            while (tail_ops[last].t != 'G')
                last++;
        if (end[last] > cut) {
            *incomplete = tail_ops[i].t == 'B' && cut >= end[i + 1];
            break;
        }
        keep = last + 1;
        *boundary = padded[last];
        i = last + 1;
    }
    return keep;
}

static uint8_t *read_file(const char *path, size_t *size)
{
    off_t n = fx_file_size(path);
    assert_true(n >= 0);
    uint8_t *b = malloc((size_t)n + 1);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0 && b);
    assert_int_equal(pread(fd, b, (size_t)n, 0), n);
    close(fd);
    *size = (size_t)n;
    return b;
}

static void write_file(const char *path, const uint8_t *b, size_t n, size_t zeros)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b, n), (ssize_t)n);
    if (zeros) {
        uint8_t *z = calloc(1, zeros);
        assert_int_equal(write(fd, z, zeros), (ssize_t)zeros);
        free(z);
    }
    close(fd);
}

/* Only segments 1 and 2 and the checkpoint as saved. */
static void restore_files(const jfx *f, const uint8_t *ck, size_t ck_len, const uint8_t *seg2,
                          size_t cut, size_t zeros)
{
    char path[400];
    for (uint32_t n = 3; n < 8; n++) {
        fx_seg_path(f, n, path, sizeof path);
        unlink(path);
    }
    fx_checkpoint_path(f, path, sizeof path);
    write_file(path, ck, ck_len, 0);
    fx_seg_path(f, 2, path, sizeof path);
    write_file(path, seg2, cut, zeros);
}

/* The tail cut at every byte offset of segment 2 (header included),
 * truncated and zero-filled: replay is always the whole units before the
 * cut, groups all or nothing; the torn rest is truncated from the start
 * of the unit it tore, so a second replay agrees. */
static void test_group_torn_at_every_offset(void **state)
{
    jfx *f = fx_new(1 << 20, JOURNAL_SYNC_BATCH);
    journal_loc locs[200] = {{0}};
    fx_wait_synced(f, run_ops(f->j, base_ops, sizeof base_ops / sizeof *base_ops, locs));
    fx_close(f); /* the checkpoint covers segment 1 */
    char ck_path[400], seg1[400], seg2[400];
    fx_checkpoint_path(f, ck_path, sizeof ck_path);
    size_t ck_len;
    uint8_t *ck = read_file(ck_path, &ck_len);

    rlog l0 = {0};
    journal_replay_stats rs;
    fx_reopen_replay(f, false, &l0, &rs);
    free(l0.v);
    fx_wait_synced(f, run_ops(f->j, tail_ops, NTAIL, locs));
    fx_close(f);
    fx_seg_path(f, 1, seg1, sizeof seg1);
    fx_seg_path(f, 2, seg2, sizeof seg2);
    assert_true(fx_exists(seg1));
    size_t size;
    uint8_t *pristine = read_file(seg2, &size);
    uint64_t end[NTAIL], padded[NTAIL];
    record_ends(pristine, size, end, padded);

    live_set empty = {NULL, 0};
    live_set base = model_apply(&empty, base_ops, sizeof base_ops / sizeof *base_ops);
    unsigned checked = 0, incomplete_seen = 0;
    for (size_t cut = 0; cut <= size; cut++) {
        for (int zero_fill = 0; zero_fill < 2; zero_fill++) {
            if (zero_fill && cut == size)
                continue;
            restore_files(f, ck, ck_len, pristine, cut, zero_fill ? size - cut : 0);
            uint64_t boundary;
            bool incomplete;
            /* zeroing bytes that were zero changes nothing: the cut is where they differ */
            size_t at = cut;
            while (zero_fill && at < size && pristine[at] == 0)
                at++;
            size_t keep = surviving_ops(end, padded, at, &boundary, &incomplete);
            size_t file = zero_fill ? size : cut;
            boundary = boundary < file ? boundary : file; /* a whole record, its padding cut */
            live_set want = model_apply(&base, tail_ops, keep);
            log_reset();
            live_set got = replay_live(f, &rs);
            assert_same_live(&got, &want, zero_fill ? "zero-filled" : "truncated", (long)cut);
            assert_true(rs.from_checkpoint);
            assert_int_equal(rs.incomplete_groups, incomplete);
            incomplete_seen += incomplete;
            if (cut >= SEG_HEADER_SIZE) {
                if (rs.torn_tail_bytes != file - boundary)
                    fail_msg("cut %zu%s: %llu bytes torn, not %llu", cut, zero_fill ? " (zeros)" : "",
                             (unsigned long long)rs.torn_tail_bytes,
                             (unsigned long long)(file - boundary));
                assert_int_equal(fx_file_size(seg2), (off_t)boundary);
            }
            assert_int_equal(rs.corrupt_records, 0);
            free(got.v);
            fx_close(f);
            free(want.v);
            checked++;
            if (!incomplete && cut % 8 != 0)
                continue; /* (a second replay where it matters most, to save time) */
            want = model_apply(&base, tail_ops, keep);
            got = replay_live(f, &rs); /* what the first replay left says the same */
            assert_same_live(&got, &want, "replayed again", (long)cut);
            assert_int_equal(rs.incomplete_groups, 0);
            assert_int_equal(rs.torn_tail_bytes, 0);
            free(got.v);
            fx_close(f);
            free(want.v);
        }
    }
    print_message("%u cuts of a %zu-byte segment replayed, %u inside a group\n", checked, size,
                  incomplete_seen);
    assert_true(incomplete_seen > 200);
    free(base.v);
    free(pristine);
    free(ck);
    fx_free(f);
}

/* A second replay after a torn group was truncated sees the same state,
 * and appends carry on in a new segment. */
static void test_group_torn_then_reopened(void **state)
{
    jfx *f = fx_new(1 << 20, JOURNAL_SYNC_BATCH);
    journal_loc locs[200] = {{0}};
    fx_wait_synced(f, run_ops(f->j, base_ops, sizeof base_ops / sizeof *base_ops, locs));
    static const op dl[] = {{'B', 0, 0, 0}, {'S', Q1, 3, 0}, {'M', 0, 150, 0},
                            {'E', Q2, 150, 0}, {'G', 0, 0, 0}};
    fx_wait_synced(f, run_ops(f->j, dl, 5, locs));
    fx_close(f);
    char seg[400], ck[400];
    fx_seg_path(f, 1, seg, sizeof seg);
    fx_checkpoint_path(f, ck, sizeof ck);
    unlink(ck);
    off_t size = fx_file_size(seg);
    assert_int_equal(truncate(seg, size - 30), 0); /* into its last enqueue */
    journal_replay_stats rs;
    live_set empty = {NULL, 0};
    live_set want = model_apply(&empty, base_ops, sizeof base_ops / sizeof *base_ops);
    for (int pass = 0; pass < 2; pass++) {
        live_set got = replay_live(f, &rs);
        assert_same_live(&got, &want, "torn group", (long)(size - 30));
        assert_int_equal(rs.incomplete_groups, pass == 0);
        free(got.v);
        if (pass == 0) {
            journal_loc l;
            append_msg(f->j, 160, 10, &l);
            fx_wait_synced(f, journal_append_enqueue(f->j, Q3, 160, l));
            want.v = realloc(want.v, (want.n + 1) * sizeof *want.v);
            want.v[want.n++] = (live_entry){Q3, 160, 0, {0}, 0};
            qsort(want.v, want.n, sizeof *want.v, live_cmp);
        }
        fx_close(f);
        unlink(ck);
    }
    free(want.v);
    fx_free(f);
}

/* A flagged record with no group end after it (another writer's bug, or
 * damage): dropped, and the records around it kept. Damage inside a group
 * in an older segment drops that group only, counted once. */
static void test_group_damaged_in_the_middle(void **state)
{
    jfx *f = fx_new(1 << 20, JOURNAL_SYNC_BATCH);
    journal_loc locs[200] = {{0}};
    fx_wait_synced(f, run_ops(f->j, base_ops, sizeof base_ops / sizeof *base_ops, locs));
    static const op g[] = {{'B', 0, 0, 0}, {'S', Q1, 3, 0}, {'M', 0, 150, 0},
                           {'E', Q2, 150, 0}, {'E', Q3, 150, 0}, {'G', 0, 0, 0},
                           {'M', 0, 151, 0}, {'E', Q4, 151, 0}};
    fx_wait_synced(f, run_ops(f->j, g, 8, locs));
    fx_close(f);
    char seg[400];
    fx_seg_path(f, 1, seg, sizeof seg);
    /* the enqueue into Q2 (after the message record): a payload byte */
    fx_flip_byte(seg, locs[150].offset + align8(locs[150].length) + REC_HEADER_SIZE + 3, 0x40);
    journal_replay_stats rs;
    rlog l = {0};
    fx_reopen_replay(f, true, &l, &rs);
    live_set got = live_from_log(&l);
    live_set empty = {NULL, 0};
    static const op after[] = {{'M', 0, 151, 0}, {'E', Q4, 151, 0}};
    live_set base = model_apply(&empty, base_ops, sizeof base_ops / sizeof *base_ops);
    live_set want = model_apply(&base, after, 2);
    assert_same_live(&got, &want, "damaged group", -1);
    assert_int_equal(rs.incomplete_groups, 1);
    assert_int_equal(rs.corrupt_records, 1);
    for (size_t i = 0; i < l.n; i++)
        assert_true(l.v[i].m != 150); /* not even its message record */
    free(got.v);
    free(want.v);
    free(base.v);
    free(l.v);
    fx_free(f);
}

/* Groups covered by a checkpoint (clean close) and by none (rescan) give
 * the same state; a group is never split by a segment rotation even when
 * the segment is full when it starts or fills inside it. */
static void test_groups_across_checkpoints_and_rotation(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc locs[2000] = {{0}};
    op *ops = calloc(4000, sizeof *ops);
    size_t n = 0;
    for (uint64_t i = 1; i <= 300; i++) {
        ops[n++] = (op){'M', 0, i, 0};
        ops[n++] = (op){'E', Q1, i, 0};
    }
    for (uint64_t i = 1; i <= 300; i += 2) { /* dead-letter every other one */
        ops[n++] = (op){'B', 0, 0, 0};
        ops[n++] = (op){'S', Q1, i, 0};
        ops[n++] = (op){'M', 0, 1000 + i, 0};
        ops[n++] = (op){'E', Q2, 1000 + i, 0};
        ops[n++] = (op){'L', Q2, 1000 + i, 100000 + i};
        ops[n++] = (op){'G', 0, 0, 0};
    }
    fx_wait_synced(f, run_ops(f->j, ops, n, locs));
    journal_stats st;
    journal_get_stats(f->j, &st);
    assert_true(st.segments > 10);
    live_set empty = {NULL, 0};
    live_set want = model_apply(&empty, ops, n);
    fx_close(f);
    for (int pass = 0; pass < 2; pass++) {
        journal_replay_stats rs;
        rlog l = {0};
        fx_reopen_replay(f, pass == 1, &l, &rs);
        live_set got = live_from_log(&l);
        assert_same_live(&got, &want, pass ? "rescan" : "checkpoint", -1);
        assert_int_equal(rs.from_checkpoint, pass == 0);
        assert_int_equal(rs.incomplete_groups, 0);
        assert_int_equal(rs.corrupt_records, 0);
        check_msg(f->j, live_get(&got, Q2, 1001)->loc, 1001, 40 + 1001 % 7 * 13);
        free(got.v);
        free(l.v);
        fx_close(f);
    }
    /* every group end is in the segment of its first member */
    DIR *d = opendir(f->jdir);
    struct dirent *de;
    unsigned groups = 0;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len < 4 || strcmp(de->d_name + len - 4, ".seg") != 0)
            continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", f->jdir, de->d_name);
        size_t size;
        uint8_t *b = read_file(path, &size);
        bool in_group = false;
        for (uint64_t off = SEG_HEADER_SIZE; off + REC_HEADER_SIZE <= size;
             off += align8(get32(b + off))) {
            if (b[off + 4] == REC_GROUP_END) {
                assert_true(in_group);
                groups++;
            }
            if (!in_group && (b[off + 5] & REC_FLAG_GROUP))
                assert_true(off + align8(get32(b + off)) < size); /* not last */
            in_group = (b[off + 5] & REC_FLAG_GROUP) != 0;
        }
        assert_false(in_group); /* no segment ends inside a group */
        free(b);
    }
    closedir(d);
    assert_int_equal(groups, 150);
    free(want.v);
    free(ops);
    fx_free(f);
}

/* Segments holding groups become sparse and are compacted: the moved
 * entries keep their counts and delays; replay agrees with the model. Then
 * a redrive moves two compacted messages from Q1 into Q4 with the locations the
 * broker still holds (those of the deleted segment): replay finds them. */
static void test_groups_in_compacted_segments(void **state)
{
    jfx *f = fx_new(16384, JOURNAL_SYNC_BATCH);
    journal_loc locs[2000] = {{0}};
    op *ops = calloc(4000, sizeof *ops);
    size_t n = 0;
    for (uint64_t i = 1; i <= 200; i++) {
        ops[n++] = (op){'M', 0, i, 0};
        ops[n++] = (op){'E', Q1, i, 0};
        if (i % 4 == 0) { /* dead-letter it at once, the copy delayed */
            ops[n++] = (op){'D', Q1, i, 1};
            ops[n++] = (op){'B', 0, 0, 0};
            ops[n++] = (op){'S', Q1, i, 0};
            ops[n++] = (op){'M', 0, 1000 + i, 0};
            ops[n++] = (op){'E', Q2, 1000 + i, 0};
            ops[n++] = (op){'L', Q2, 1000 + i, 50000 + i};
            ops[n++] = (op){'G', 0, 0, 0};
        }
    }
    for (uint64_t i = 1; i <= 200; i++) /* most acked: the early segments go sparse */
        if (i % 4 != 0 && i % 25 != 1)
            ops[n++] = (op){'S', Q1, i, 0};
    for (uint64_t i = 4; i <= 200; i += 4)
        if (i % 40 != 0)
            ops[n++] = (op){'S', Q2, 1000 + i, 0};
    ops[n++] = (op){'D', Q2, 1040, 3};
    journal_seq s = run_ops(f->j, ops, n, locs);
    fx_wait_synced(f, s);
    live_set empty = {NULL, 0};
    live_set want = model_apply(&empty, ops, n);
    assert_true(fx_tick_until_gone(f, 1, 400));
    size_t before = n;
    static const uint64_t moved[] = {1, 26};
    for (size_t i = 0; i < 2; i++) {
        ops[n++] = (op){'B', 0, 0, 0};
        ops[n++] = (op){'S', Q1, moved[i], 0};
        ops[n++] = (op){'E', Q4, moved[i], 0};
        ops[n++] = (op){'G', 0, 0, 0};
    }
    fx_wait_synced(f, run_ops(f->j, ops + before, n - before, locs));
    free(want.v);
    want = model_apply(&empty, ops, n);
    fx_close(f);
    for (int pass = 0; pass < 2; pass++) {
        journal_replay_stats rs;
        rlog l = {0};
        fx_reopen_replay(f, pass == 1, &l, &rs);
        live_set got = live_from_log(&l);
        assert_same_live(&got, &want, pass ? "compacted, rescan" : "compacted", -1);
        for (size_t i = 0; i < 2; i++) {
            const live_entry *e = live_get(&got, Q4, moved[i]);
            assert_non_null(e);
            check_msg(f->j, e->loc, moved[i], 40 + moved[i] % 7 * 13);
        }
        const live_entry *e = live_get(&got, Q2, 1040);
        assert_non_null(e);
        assert_int_equal(e->until, 50040);
        assert_int_equal(e->count, 3);
        check_msg(f->j, e->loc, 1040, 40 + 1040 % 7 * 13);
        assert_int_equal(rs.incomplete_groups, 0);
        free(got.v);
        free(l.v);
        fx_close(f);
    }
    free(want.v);
    free(ops);
    fx_free(f);
}

/* ---- delays -------------------------------------------------------------------- */

/* The newest delay wins, 0 clears it, it goes with a settle, and it
 * survives a clean restart (checkpoint) and a rescan alike. */
static void test_delayed_restart_and_checkpoint(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc locs[200] = {{0}};
    static const op ops[] = {
        {'M', 0, 1, 0},    {'E', Q1, 1, 0},    {'M', 0, 2, 0},      {'E', Q1, 2, 0},
        {'M', 0, 3, 0},    {'E', Q1, 3, 0},    {'E', Q2, 3, 0},     {'L', Q1, 1, 1700000000000},
        {'L', Q1, 1, 1700000000500}, {'L', Q1, 2, 99}, {'L', Q1, 2, 0}, {'L', Q1, 3, 42},
        {'L', Q2, 3, 43},  {'S', Q1, 3, 0},    {'D', Q1, 1, 2},
    };
    size_t n = sizeof ops / sizeof *ops;
    fx_wait_synced(f, run_ops(f->j, ops, n, locs));
    live_set empty = {NULL, 0};
    live_set want = model_apply(&empty, ops, n);
    fx_close(f);
    for (int pass = 0; pass < 3; pass++) {
        journal_replay_stats rs;
        rlog l = {0};
        fx_reopen_replay(f, pass == 1, &l, &rs);
        live_set got = live_from_log(&l);
        assert_same_live(&got, &want, "delays", pass);
        assert_int_equal(live_get(&got, Q1, 1)->until, 1700000000500);
        assert_int_equal(live_get(&got, Q1, 2)->until, 0);
        assert_int_equal(live_get(&got, Q2, 3)->until, 43);
        assert_false(live_has(&got, Q1, 3));
        free(got.v);
        free(l.v);
        fx_close(f); /* pass 2 replays the checkpoint pass 1's close wrote */
    }
    free(want.v);
    fx_free(f);
}

/* A delay whose record is alone in an otherwise settled segment keeps that
 * segment (its pin): GC must not lose it, nor a clear of it. */
static void test_delayed_pins_its_segment(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    journal_loc keep, loc;
    append_msg(f->j, 1, 100, &keep);
    journal_append_enqueue(f->j, Q1, 1, keep);
    journal_seq s = 0;
    for (uint64_t i = 10; i < 100; i++) { /* fill several segments, all settled */
        append_msg(f->j, i, 300, &loc);
        journal_append_enqueue(f->j, Q2, i, loc);
        s = journal_append_settle(f->j, Q2, i, loc, JOURNAL_ACK, none, none);
        if (i == 30)
            s = journal_append_delayed(f->j, Q1, 1, 123456);
        if (i == 45)
            s = journal_append_delayed(f->j, Q1, 1, 654321);
    }
    fx_wait_synced(f, s);
    /* settles that straddle segments keep a chain of them until a periodic
     * checkpoint drops those references; then only pins keep segments */
    journal_stats st;
    for (int k = 0; k < 50; k++) {
        journal_tick(f->j);
        fx_spin(f, 10);
        journal_get_stats(f->j, &st);
        if (st.segments <= 3)
            break;
    }
    assert_int_equal(st.segments, 3); /* the first, the newest delay's, the active one */
    assert_true(f->j->segs[1]->pins == 1 && f->j->segs[1]->refs == 0);
    /* a crash now: no checkpoint newer than the GC; rescan too */
    fx_close(f);
    for (int pass = 0; pass < 2; pass++) {
        journal_replay_stats rs;
        rlog l = {0};
        fx_reopen_replay(f, pass == 1, &l, &rs);
        live_set got = live_from_log(&l);
        /* (a rescan may bring back acked entries whose settles were
         * collected: the checkpoint is what made that safe) */
        assert_true(pass == 1 || got.n == 1);
        assert_int_equal(live_get(&got, Q1, 1)->until, 654321);
        free(got.v);
        free(l.v);
        fx_close(f);
    }
    fx_free(f);
}

/* A process that dies after its last sync keeps every synced delay. */
static bool child_delays(const char *dir, uint64_t segment_size)
{
    struct event_base *base = event_base_new();
    char err[256];
    journal_config cfg = {.dir = dir, .segment_size = segment_size, .sync = JOURNAL_SYNC_BATCH};
    journal *j = journal_open(&cfg, base, NULL, NULL, err, sizeof err);
    if (!j || !journal_replay(j, NULL, NULL, NULL, err, sizeof err))
        return false;
    journal_loc locs[200] = {{0}};
    static const op ops[] = {{'M', 0, 1, 0}, {'E', Q1, 1, 0}, {'L', Q1, 1, 1111},
                             {'M', 0, 2, 0}, {'E', Q1, 2, 0}, {'B', 0, 0, 0},
                             {'S', Q1, 2, 0}, {'E', Q2, 2, 0}, {'L', Q2, 2, 2222},
                             {'G', 0, 0, 0}, {'L', Q1, 1, 3333}};
    journal_seq s = run_ops(j, ops, sizeof ops / sizeof *ops, locs);
    double deadline = now_s() + 10;
    while (journal_synced(j) < s && now_s() < deadline)
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(1000);
    return journal_synced(j) >= s; /* no close */
}

static void test_delayed_survives_a_crash(void **state)
{
    jfx *f = fx_new(4096, JOURNAL_SYNC_BATCH);
    fx_close(f);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child_delays(f->dir, f->segment_size) ? 0 : 1);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    journal_replay_stats rs;
    live_set got = replay_live(f, &rs);
    assert_int_equal(got.n, 2);
    assert_int_equal(live_get(&got, Q1, 1)->until, 3333);
    assert_int_equal(live_get(&got, Q2, 2)->until, 2222);
    free(got.v);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_torn_at_every_offset),
        cmocka_unit_test(test_group_torn_then_reopened),
        cmocka_unit_test(test_group_damaged_in_the_middle),
        cmocka_unit_test(test_groups_across_checkpoints_and_rotation),
        cmocka_unit_test(test_groups_in_compacted_segments),
        cmocka_unit_test(test_delayed_restart_and_checkpoint),
        cmocka_unit_test(test_delayed_pins_its_segment),
        cmocka_unit_test(test_delayed_survives_a_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
