/* Helpers shared by the stream log's unit tests: a temp dir per test,
 * writing numbered messages ("m<offset>" padded to a size), reading them
 * all back, and file helpers to damage segments and indexes. Header-only,
 * so each test_stream_*.c stays one translation unit. */
#ifndef WARREN_TEST_STREAM_UTIL_H
#define WARREN_TEST_STREAM_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../stream/stream.h"

typedef struct sfx {
    char dir[64];
    stream_log *log;
    stream_builder *b;
} sfx;

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static inline int sfx_setup(void **state)
{
    sfx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/warren-stream-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->b = stream_builder_new();
    assert_non_null(f->b);
    *state = f;
    return 0;
}

static inline int sfx_teardown(void **state)
{
    sfx *f = *state;
    stream_close(f->log);
    stream_builder_free(f->b);
    nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static inline void sfx_open(sfx *f, const stream_config *cfg)
{
    stream_close(f->log);
    f->log = NULL;
    stream_config none = {0};
    assert_int_equal(stream_open(f->dir, cfg ? cfg : &none, &f->log), STREAM_OK);
}

/* The body of message `o` in out[4096]: "m<o>" then '.' up to `size`
 * bytes (at most 4096); returns its length. */
static inline size_t msg_body(char *out, size_t size, uint64_t o)
{
    int n = snprintf(out, 4096, "m%" PRIu64, o);
    for (size_t i = (size_t)n; i < size && i < 4096; i++)
        out[i] = '.';
    return size > (size_t)n ? (size < 4096 ? size : 4096) : (size_t)n;
}

/* Appends `chunks` chunks of `per` messages of `size` bytes at timestamp
 * ts, ts+1, ..., each with filter value `filter` (NULL: none), then syncs. */
static inline void put_chunks(sfx *f, int chunks, int per, size_t size, int64_t ts, const char *filter)
{
    char body[4096];
    for (int c = 0; c < chunks; c++) {
        stream_info in;
        stream_get_info(f->log, &in);
        for (int i = 0; i < per; i++) {
            size_t n = msg_body(body, size, in.next_offset + (uint64_t)i);
            stream_part part = {body, n};
            size_t flen = filter ? strlen(filter) : 0;
            assert_int_equal(stream_builder_add(f->b, &part, 1, filter, flen), STREAM_OK);
        }
        uint64_t first;
        assert_int_equal(stream_append(f->log, f->b, ts + c, &first), STREAM_OK);
        assert_int_equal(first, in.next_offset);
    }
    assert_int_equal(stream_sync(f->log), STREAM_OK);
}

/* Checks that an entry is message `o` as msg_body wrote it. */
static inline void check_msg(const stream_entry *e, uint64_t o)
{
    char want[4096];
    size_t n = msg_body(want, e->len < sizeof want ? e->len : sizeof want, o);
    assert_int_equal(e->len, n);
    assert_memory_equal(e->bytes, want, n);
}

/* Reads a reader to the end: returns the number of records, checks each is
 * its offset's message and that offsets ascend from *first (set to the
 * first offset seen; UINT64_MAX when none). */
static inline uint64_t read_all(stream_reader *r, uint64_t *first)
{
    uint64_t count = 0, expect = UINT64_MAX;
    stream_chunk c;
    stream_status st;
    if (first)
        *first = UINT64_MAX;
    for (int guard = 0; (st = stream_reader_next(r, true, &c)) == STREAM_OK || st == STREAM_AGAIN; guard++) {
        assert_true(guard < 1000000);
        if (st == STREAM_AGAIN)
            continue;
        stream_entry_iter it;
        stream_entry e;
        stream_entry_begin(&it, &c);
        while ((st = stream_entry_next(&it, &e)) == STREAM_OK) {
            if (expect == UINT64_MAX && first)
                *first = e.offset;
            if (expect != UINT64_MAX)
                assert_int_equal(e.offset, expect);
            if (!e.batch)
                check_msg(&e, e.offset);
            expect = e.offset + e.records;
            count += e.records;
        }
        assert_int_equal(st, STREAM_END);
    }
    assert_int_equal(st, STREAM_END);
    return count;
}

static inline stream_reader *open_at(sfx *f, stream_start_kind kind, uint64_t offset, int64_t ts)
{
    stream_start s = {kind, offset, ts};
    stream_reader *r;
    assert_int_equal(stream_reader_open(f->log, &s, NULL, &r), STREAM_OK);
    return r;
}

static inline off_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

static inline void seg_path(char *out, size_t n, const sfx *f, uint64_t id, const char *ext)
{
    snprintf(out, n, "%s/%020" PRIu64 ".%s", f->dir, id, ext);
}

static inline size_t count_files(const sfx *f, const char *ext)
{
    DIR *d = opendir(f->dir);
    size_t n = 0, el = strlen(ext);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        n += l > el && strcmp(e->d_name + l - el, ext) == 0;
    }
    if (d)
        closedir(d);
    return n;
}

#endif
