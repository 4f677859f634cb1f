/* mirror/'s applying side: a replication stream from a leader, as a
 * follower's replica reads it from the network -- fed in slices of a size
 * the input picks into a replica on an emptied temporary directory.
 * Checks: a failed replica says why and stays failed; nothing appears
 * beside the directory (its parent holds it alone) whatever paths the
 * frames name; the handlers' arguments are readable.
 *
 * Input: a byte (slice size - 1; 255: all at once), then the stream. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../mirror/mirror.h"
#include "fuzz.h"

static char parent[] = "/tmp/warren-fuzz-mirror-XXXXXX";
static char dir[PATH_MAX];

static void empty_at(int dfd)
{
    DIR *d = fdopendir(dfd);
    FUZZ_CHECK(d != NULL);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (sub >= 0) {
            empty_at(sub);
            unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
        } else {
            unlinkat(dirfd(d), de->d_name, 0);
        }
    }
    closedir(d);
}

/* The parent holds the directory alone. */
static void check_parent(void)
{
    DIR *d = opendir(parent);
    FUZZ_CHECK(d != NULL);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            FUZZ_CHECK(!strcmp(de->d_name, "d") && ++n == 1);
    closedir(d);
}

static unsigned sum(const void *p, size_t len)
{
    unsigned s = 0;
    for (size_t i = 0; i < len; i++)
        s += ((const uint8_t *)p)[i];
    return s;
}

static void on_begin(void *ctx, uint64_t epoch) {}
static bool on_image(void *ctx, const void *p, size_t len)
{
    return sum(p, len) % 251 != 7; /* a refusal now and then */
}
static bool on_changes(void *ctx, const void *p, size_t len)
{
    return sum(p, len) % 251 != 7;
}
static void on_end(void *ctx) {}
static void on_synced(void *ctx, uint64_t seq) {}

static void remove_dirs(void)
{
    empty_at(open(dir, O_RDONLY | O_DIRECTORY));
    rmdir(dir);
    rmdir(parent);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        FUZZ_CHECK(mkdtemp(parent) != NULL);
        snprintf(dir, sizeof dir, "%s/d", parent);
        FUZZ_CHECK(mkdir(dir, 0700) == 0);
        atexit(remove_dirs);
    }
    empty_at(open(dir, O_RDONLY | O_DIRECTORY));
    fuzz_in in = {data, size};
    uint8_t b = fuzz_byte(&in);
    size_t slice = b == 255 ? in.len : (size_t)b + 1;
    const mirror_replica_handlers h = {on_begin, on_image, on_changes, on_end, on_synced};
    mirror_replica *r = mirror_replica_new(dir, &h, NULL);
    FUZZ_CHECK(r != NULL);
    mirror_apply_status st = MIRROR_APPLIED;
    while (in.len && st == MIRROR_APPLIED) {
        size_t got;
        const uint8_t *p = fuzz_take(&in, slice ? slice : 1, &got);
        st = mirror_replica_feed(r, p, got);
    }
    if (st != MIRROR_APPLIED) {
        FUZZ_CHECK(st == MIRROR_BAD_FRAME || st == MIRROR_IO_FAILED || st == MIRROR_APPLY_FAILED);
        FUZZ_CHECK(strcmp(mirror_replica_error(r), "no error") != 0);
        FUZZ_CHECK(mirror_replica_feed(r, (const uint8_t *)"\0\0\0\1\1", 5) == st);
    }
    mirror_replica_free(r);
    check_parent();
    return 0;
}
