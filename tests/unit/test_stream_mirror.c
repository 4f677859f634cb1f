/* A stream through a mirror (stream_config.mirror): a follower applying
 * what a reader hands out has the stream's directory, segment and index
 * files byte for byte -- across segment rolls, retention and a reopen --
 * and loses the directory when the stream is deleted. stream_set_config keeps the mirror; stream_set_mirror hands
 * one to a stream opened without. */
#include "test_stream_util.h"
#include "test_store_mirror_util.h"

typedef struct mfx {
    char data[64], dir[128]; /* the leader's data directory, the stream's in it */
    char fdata[64], fdir[128]; /* the follower's */
    mirror *m;
    mirror_reader *reader;
    mirror_replica *replica;
    sfx s; /* the stream (s.dir unused) */
} mfx;

static const mirror_replica_handlers no_handlers = {0};

static mfx *mfx_new(void)
{
    mfx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->data, sizeof f->data, "/tmp/warren-stream-XXXXXX");
    assert_non_null(mkdtemp(f->data));
    snprintf(f->fdata, sizeof f->fdata, "/tmp/warren-streamf-XXXXXX");
    assert_non_null(mkdtemp(f->fdata));
    snprintf(f->dir, sizeof f->dir, "%s/s1", f->data);
    snprintf(f->fdir, sizeof f->fdir, "%s/s1", f->fdata);
    f->m = mirror_new(f->data, 64u << 20);
    f->replica = mirror_replica_new(f->fdata, &no_handlers, NULL);
    f->reader = mirror_reader_new(f->m, 1, NULL, 0);
    f->s.b = stream_builder_new();
    assert_true(f->m && f->replica && f->reader && f->s.b);
    return f;
}

static void mfx_free(mfx *f)
{
    stream_close(f->s.log);
    stream_builder_free(f->s.b);
    mirror_reader_free(f->reader);
    mirror_replica_free(f->replica);
    mirror_free(f->m);
    nftw(f->data, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    nftw(f->fdata, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
}

static void pump(mfx *f) { mirror_pump(f->reader, f->replica); }

/* The follower's stream directory holds the leader's files, and only
 * them; returns how many. */
static int same_files(mfx *f) { return mirror_same_dirs(f->dir, f->fdir); }

static void open_stream(mfx *f, const stream_config *cfg)
{
    stream_close(f->s.log);
    f->s.log = NULL;
    assert_int_equal(stream_open(f->dir, cfg, &f->s.log), STREAM_OK);
}

static void test_follower_repeats_the_stream(void **state)
{
    mfx *f = mfx_new();
    stream_config cfg = {.max_segment_bytes = 3000, .max_bytes = 9000, .mirror = f->m};
    open_stream(f, &cfg);
    put_chunks(&f->s, 10, 3, 200, 1000, NULL);
    pump(f);
    assert_true(same_files(f) >= 4); /* segments rolled */

    /* a new config keeps the mirror */
    stream_config cfg2 = {.max_segment_bytes = 2000, .max_bytes = 6000};
    assert_int_equal(stream_set_config(f->s.log, &cfg2), STREAM_OK);
    put_chunks(&f->s, 20, 2, 300, 2000, "f");
    unsigned removed = 0;
    assert_int_equal(stream_retain(f->s.log, 5000, &removed), STREAM_OK);
    assert_true(removed > 0);
    pump(f);
    same_files(f);

    /* reopened (recovery does not go through the mirror: nothing to
     * repair here) and appended to */
    open_stream(f, &cfg);
    put_chunks(&f->s, 3, 1, 100, 3000, NULL);
    pump(f);
    same_files(f);

    assert_int_equal(stream_delete(f->s.log), STREAM_OK);
    f->s.log = NULL;
    pump(f);
    assert_int_equal(access(f->fdir, F_OK), -1);
    mfx_free(f);
}

/* Opened without a mirror (a broker's streams open before the journal),
 * given one later: what follows is mirrored. */
static void test_mirror_given_later(void **state)
{
    mfx *f = mfx_new();
    stream_config cfg = {.max_segment_bytes = 3000};
    open_stream(f, &cfg);
    put_chunks(&f->s, 4, 2, 200, 1000, NULL);
    /* a reader attached now has those files in its snapshot */
    mirror_reader_free(f->reader);
    f->reader = mirror_reader_new(f->m, 2, NULL, 0);
    stream_set_mirror(f->s.log, f->m);
    put_chunks(&f->s, 12, 2, 200, 2000, NULL);
    pump(f);
    assert_true(same_files(f) >= 4);
    mfx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_follower_repeats_the_stream),
        cmocka_unit_test(test_mirror_given_later),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
