/* Helpers shared by the journal unit tests: a fixture with its own temp dir,
 * event_base and journal; waiting (by running the loop) for on_synced;
 * a replay recorder and the live state it implies; log capture; file
 * helpers to damage segments. Header-only, so each test_store_journal*.c
 * stays one translation unit. */
#ifndef WARREN_TEST_STORE_JOURNAL_UTIL_H
#define WARREN_TEST_STORE_JOURNAL_UTIL_H

#include <dirent.h>
#include <errno.h>
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "../../store/journal_int.h"
#include "../../store/store.h"

/* ---- log capture ------------------------------------------------------------ */

static int log_warnings, log_errors;
static char log_last[1024];

static inline void capture_log(int level, const char *text)
{
    if (level == JLOG_WARNING)
        log_warnings++;
    else if (level >= JLOG_ERROR)
        log_errors++;
    snprintf(log_last, sizeof log_last, "%s", text);
    if (getenv("JOURNAL_TEST_VERBOSE"))
        fprintf(stderr, "  [log %d] %s\n", level, text);
}

static inline void log_reset(void)
{
    log_warnings = log_errors = 0;
    log_last[0] = 0;
}

/* ---- fixture ---------------------------------------------------------------- */

typedef struct jfx {
    char dir[256];
    char jdir[300];
    struct event_base *base;
    struct event *heartbeat; /* bounds each EVLOOP_ONCE wait */
    journal *j;
    journal_seq synced;
    uint64_t synced_calls;
    bool went_backwards;
    uint64_t segment_size;
    journal_sync_mode mode;
} jfx;

static inline void fx_on_synced(void *ctx, journal_seq s)
{
    jfx *f = ctx;
    if (s <= f->synced)
        f->went_backwards = true;
    f->synced = s;
    f->synced_calls++;
}

static inline void fx_heartbeat(evutil_socket_t fd, short what, void *arg) {}

static inline void fx_open(jfx *f)
{
    char err[256] = "";
    journal_config cfg = {
        .dir = f->dir, .segment_size = f->segment_size, .sync = f->mode, .log = capture_log};
    f->synced = 0;
    f->j = journal_open(&cfg, f->base, fx_on_synced, f, err, sizeof err);
    if (f->j == NULL)
        fail_msg("journal_open: %s", err);
}

static inline jfx *fx_new(uint64_t segment_size, journal_sync_mode mode)
{
    jfx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/warren-journal-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->jdir, sizeof f->jdir, "%s/journal", f->dir);
    f->base = event_base_new();
    assert_non_null(f->base);
    f->heartbeat = event_new(f->base, -1, EV_PERSIST, fx_heartbeat, NULL);
    struct timeval tv = {0, 20000};
    event_add(f->heartbeat, &tv);
    f->segment_size = segment_size;
    f->mode = mode;
    log_reset();
    fx_open(f);
    return f;
}

static inline void fx_close(jfx *f)
{
    journal_close(f->j);
    f->j = NULL;
}

static inline int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static inline void fx_free(jfx *f)
{
    if (f->j)
        journal_close(f->j);
    event_free(f->heartbeat);
    event_base_free(f->base);
    nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
}

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs the loop until on_synced has reported `seq` (10 s at most). */
static inline void fx_wait_synced(jfx *f, journal_seq seq)
{
    double deadline = now_s() + 10;
    while (f->synced < seq) {
        event_base_loop(f->base, EVLOOP_ONCE);
        if (now_s() > deadline)
            fail_msg("on_synced never reached %llu (at %llu)", (unsigned long long)seq,
                     (unsigned long long)f->synced);
    }
}

/* Runs the loop for a while (lets commits and notifications happen). */
static inline void fx_spin(jfx *f, int ms)
{
    double deadline = now_s() + ms / 1000.0;
    while (now_s() < deadline)
        event_base_loop(f->base, EVLOOP_ONCE);
}

static inline void fx_reopen(jfx *f)
{
    if (f->j)
        fx_close(f);
    fx_open(f);
}

/* ---- files ------------------------------------------------------------------ */

static inline int fx_count_segments(const jfx *f)
{
    DIR *d = opendir(f->jdir);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        n += len > 4 && strcmp(de->d_name + len - 4, ".seg") == 0;
    }
    closedir(d);
    return n;
}

/* Polls (running the loop) until there are `want` segment files (5 s). */
static inline void fx_wait_segments(jfx *f, int want)
{
    double deadline = now_s() + 5;
    while (fx_count_segments(f) != want) {
        if (now_s() > deadline)
            fail_msg("expected %d segment files, have %d", want, fx_count_segments(f));
        event_base_loop(f->base, EVLOOP_NONBLOCK);
        usleep(2000);
    }
}

static inline void fx_seg_path(const jfx *f, uint32_t num, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%08u.seg", f->jdir, num);
}

static inline off_t fx_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static inline bool fx_exists(const char *path) { return access(path, F_OK) == 0; }

/* Ticks the journal (running the loop 2 ms after each tick) until segment
 * `num` is gone, at most `ticks` times; whether it went. */
static inline bool fx_tick_until_gone(jfx *f, uint32_t num, int ticks)
{
    char path[400];
    fx_seg_path(f, num, path, sizeof path);
    for (int i = 0; i < ticks && fx_exists(path); i++) {
        journal_tick(f->j);
        fx_spin(f, 2);
    }
    return !fx_exists(path);
}

static inline void fx_checkpoint_path(const jfx *f, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/checkpoint", f->jdir);
}

/* XORs one byte of a file. */
static inline void fx_flip_byte(const char *path, off_t off, uint8_t mask)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, off), 1);
    b ^= mask;
    assert_int_equal(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

/* ---- messages ---------------------------------------------------------------- */

/* A deterministic body for message `id` of `len` bytes. */
static inline void fill_body(uint8_t *b, size_t len, uint64_t id)
{
    uint64_t x = id * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (uint8_t)x;
    }
}

static inline journal_seq append_msg(journal *j, uint64_t id, size_t body_len, journal_loc *loc)
{
    uint8_t *body = malloc(body_len ? body_len : 1);
    assert_non_null(body);
    fill_body(body, body_len, id);
    char rk[32];
    snprintf(rk, sizeof rk, "key.%llu", (unsigned long long)id);
    static const uint8_t props[] = {0x90, 0x00, 0x0a, 't', 'e', 'x', 't', '/', 'p', 'l', 'a', 'i', 'n', 0x02};
    journal_seq s = journal_append_message(j, id, AMQP_CSTR("amq.direct"), AMQP_CSTR(rk),
                                           (amqp_bytes){props, sizeof props},
                                           (amqp_bytes){body, (uint32_t)body_len}, loc);
    free(body);
    return s;
}

/* Appends messages 0..n-1 (body_len bytes each), each enqueued in queue
 * `q`, their locations in loc[]; returns the last sequence. */
static inline journal_seq fill_queue(journal *j, uint64_t q, uint64_t n, size_t body_len,
                                     journal_loc *loc)
{
    journal_seq s = 0;
    for (uint64_t i = 0; i < n; i++) {
        append_msg(j, i, body_len, &loc[i]);
        s = journal_append_enqueue(j, q, i, loc[i]);
    }
    return s;
}

/* Reads message `loc` back and checks it is message `id` with its body. */
static inline void check_msg(journal *j, journal_loc loc, uint64_t id, size_t body_len)
{
    uint8_t *buf = malloc(loc.length);
    uint8_t *want = malloc(body_len ? body_len : 1);
    assert_non_null(buf);
    assert_non_null(want);
    journal_message m;
    assert_true(journal_read_message(j, loc, buf, &m));
    assert_int_equal(m.msg_id, id);
    assert_true(amqp_bytes_equal_cstr(m.exchange, "amq.direct"));
    char rk[32];
    snprintf(rk, sizeof rk, "key.%llu", (unsigned long long)id);
    assert_true(amqp_bytes_equal_cstr(m.routing_key, rk));
    assert_int_equal(m.properties.len, 14);
    assert_int_equal(m.body.len, body_len);
    fill_body(want, body_len, id);
    assert_memory_equal(m.body.ptr, want, body_len);
    free(buf);
    free(want);
}

/* ---- replay recorder ----------------------------------------------------------- */

typedef struct rrec {
    char type; /* M E S D P X, L (delayed) */
    uint64_t q, m;
    journal_loc loc;
    uint32_t count;
    int kind;
    uint64_t until;
} rrec;

typedef struct rlog {
    rrec *v;
    size_t n, cap;
} rlog;

static inline void rlog_push(rlog *l, rrec r)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        assert_non_null(l->v);
    }
    l->v[l->n++] = r;
}

static inline void r_message(void *c, uint64_t m, journal_loc loc, const journal_message *jm)
{
    assert_int_equal(jm->msg_id, m); /* the handler sees the record it names */
    rlog_push(c, (rrec){.type = 'M', .m = m, .loc = loc});
}
static inline void r_enqueue(void *c, uint64_t q, uint64_t m, journal_loc loc)
{
    rlog_push(c, (rrec){.type = 'E', .q = q, .m = m, .loc = loc});
}
static inline void r_settle(void *c, uint64_t q, uint64_t m, journal_settle_kind k)
{
    rlog_push(c, (rrec){.type = 'S', .q = q, .m = m, .kind = (int)k});
}
static inline void r_delivered(void *c, uint64_t q, uint64_t m, uint32_t n)
{
    rlog_push(c, (rrec){.type = 'D', .q = q, .m = m, .count = n});
}
static inline void r_purge(void *c, uint64_t q) { rlog_push(c, (rrec){.type = 'P', .q = q}); }
static inline void r_delete(void *c, uint64_t q) { rlog_push(c, (rrec){.type = 'X', .q = q}); }
static inline void r_delayed(void *c, uint64_t q, uint64_t m, uint64_t until)
{
    rlog_push(c, (rrec){.type = 'L', .q = q, .m = m, .until = until});
}

static const journal_replay_handlers recorder = {r_message, r_enqueue, r_settle, r_delivered,
                                                 r_purge,   r_delete,  r_delayed};

static inline void fx_replay(jfx *f, rlog *l, journal_replay_stats *st)
{
    char err[256] = "";
    if (!journal_replay(f->j, &recorder, l, st, err, sizeof err))
        fail_msg("journal_replay: %s", err);
}

/* Opens the closed journal again -- without its checkpoint if asked, so
 * that replay scans everything -- and replays it into *l. */
static inline void fx_reopen_replay(jfx *f, bool without_checkpoint, rlog *l,
                                    journal_replay_stats *st)
{
    if (without_checkpoint) {
        char ck[400];
        fx_checkpoint_path(f, ck, sizeof ck);
        unlink(ck);
    }
    fx_open(f);
    fx_replay(f, l, st);
}

/* The live state a replay log implies: (queue, message) -> delivery count,
 * as a sorted array, built the way a broker would from the handlers. */
typedef struct live_entry {
    uint64_t q, m;
    uint32_t count;
    journal_loc loc;
    uint64_t until; /* its delay (0: none) */
} live_entry;

typedef struct live_set {
    live_entry *v;
    size_t n;
} live_set;

static inline int live_cmp(const void *a, const void *b)
{
    const live_entry *x = a, *y = b;
    if (x->q != y->q)
        return x->q < y->q ? -1 : 1;
    return x->m < y->m ? -1 : x->m > y->m;
}

static inline live_set live_from_log(const rlog *l)
{
    live_set s = {calloc(l->n + 1, sizeof(live_entry)), 0};
    for (size_t i = 0; i < l->n; i++) {
        const rrec *r = &l->v[i];
        size_t k;
        switch (r->type) {
        case 'E': /* an enqueue of a live entry moves it (compaction) */
            for (k = 0; k < s.n && !(s.v[k].q == r->q && s.v[k].m == r->m); k++) {
            }
            if (k == s.n)
                s.v[s.n++] = (live_entry){r->q, r->m, 0, r->loc, 0};
            else
                s.v[k].loc = r->loc;
            break;
        case 'S':
        case 'D':
        case 'L':
            for (k = 0; k < s.n && !(s.v[k].q == r->q && s.v[k].m == r->m); k++) {
            }
            assert_true(k < s.n); /* never about an entry we were not given */
            if (r->type == 'D') {
                s.v[k].count = r->count;
            } else if (r->type == 'L') {
                s.v[k].until = r->until;
            } else {
                s.v[k] = s.v[--s.n];
            }
            break;
        case 'P':
        case 'X':
            for (k = 0; k < s.n;) {
                if (s.v[k].q == r->q)
                    s.v[k] = s.v[--s.n];
                else
                    k++;
            }
            break;
        }
    }
    qsort(s.v, s.n, sizeof *s.v, live_cmp);
    return s;
}

static inline bool live_has(const live_set *s, uint64_t q, uint64_t m)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i].q == q && s->v[i].m == m)
            return true;
    }
    return false;
}

static inline const live_entry *live_get(const live_set *s, uint64_t q, uint64_t m)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i].q == q && s->v[i].m == m)
            return &s->v[i];
    }
    return NULL;
}

#endif
