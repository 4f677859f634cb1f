/* The spill: records come back as written, from the buffer or the file,
 * across segments; dropping the last record of a segment gives its space
 * back; nothing is left in the directory (the files are unlinked). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../store/store.h"


static char dir[] = "/tmp/warren-spill-XXXXXX";

static void fill(uint8_t *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(seed * 31 + i * 7);
}

/* Writes a record of `n` bytes (a 4-byte header part and the rest). */
static journal_loc put(spill *sp, size_t n, unsigned seed)
{
    uint8_t *b = malloc(n);
    fill(b, n, seed);
    amqp_bytes parts[2] = {{b, 4}, {b + 4, (uint32_t)(n - 4)}};
    journal_loc loc;
    assert_true(spill_write(sp, parts, 2, &loc));
    assert_int_equal(loc.length, n);
    free(b);
    return loc;
}

static void check(spill *sp, journal_loc loc, unsigned seed)
{
    uint8_t *got = malloc(loc.length), *want = malloc(loc.length);
    fill(want, loc.length, seed);
    assert_true(spill_read(sp, loc, got));
    assert_memory_equal(got, want, loc.length);
    free(got);
    free(want);
}

static size_t files_in(const char *path)
{
    DIR *d = opendir(path);
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void test_records_come_back_and_space_is_reclaimed(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(dir));
    spill *sp = spill_new(dir, NULL);
    enum { N = 400 };
    static journal_loc locs[N];
    uint64_t total = 0;
    for (unsigned i = 0; i < N; i++) { /* ~200 MB: segments roll over, buffers flush */
        size_t n = i % 50 == 7 ? (3u << 20) : 4 + (i * 7919) % 700000;
        locs[i] = put(sp, n, i);
        total += n;
    }
    assert_int_equal(spill_bytes(sp), total);
    assert_true(locs[N - 1].segment > 1);
    for (unsigned i = 0; i < N; i += 3) /* from the files and the buffer alike */
        check(sp, locs[i], i);
    check(sp, locs[N - 1], N - 1);
    char sub[64];
    snprintf(sub, sizeof sub, "%s/spill", dir);
    assert_int_equal(files_in(sub), 0); /* unlinked: nothing outlives the process */
    for (unsigned i = 0; i < N; i++)
        spill_drop(sp, locs[i]);
    assert_int_equal(spill_bytes(sp), 0);
    /* the active segment starts over from 0 */
    journal_loc again = put(sp, 1000, 9);
    assert_int_equal(again.offset, 0);
    check(sp, again, 9);
    spill_drop(sp, again);
    spill_drop(sp, again); /* a second drop changes nothing */
    assert_int_equal(spill_bytes(sp), 0);
    journal_loc bogus = {.segment = 99, .offset = 0, .length = 4};
    uint8_t b[4];
    assert_false(spill_read(sp, bogus, b));
    spill_free(sp);
    rmdir(sub);
    assert_int_equal(rmdir(dir), 0);
}

/* A directory that cannot hold files: every write is refused (the caller
 * keeps the message in RAM), again and again, and nothing breaks. */
static void test_no_place_to_write_refuses_records(void **state)
{
    (void)state;
    spill *sp = spill_new("/proc/self/nonexistent", NULL);
    uint8_t b[16] = {0};
    amqp_bytes part = {b, sizeof b};
    journal_loc loc;
    for (int i = 0; i < 3; i++)
        assert_false(spill_write(sp, &part, 1, &loc));
    assert_int_equal(spill_bytes(sp), 0);
    spill_free(sp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_come_back_and_space_is_reclaimed),
        cmocka_unit_test(test_no_place_to_write_refuses_records),
    };
    return cmocka_run_group_tests_name("store_spill", tests, NULL, NULL);
}
