/* file: an exchange's cache on disk (x-cache-persistence disk), written
 * whole when the broker stops and read back when the exchange is restored.
 *
 *   offset  size      field
 *   0       8         magic "WDEDUP1\n"
 *   8       16        the cache's SipHash secret (keys stay valid)
 *   24      4         entry count n (host order)
 *   28      4         zero
 *   32      24 * n    entries oldest first: key (16), expiry as wall-clock
 *                     ms since the epoch (8; 0 = never)
 *
 * Written to path.tmp and renamed, so a crash leaves the old file or the
 * new one. Expiry is stored as wall time because the loop's clock starts
 * again at each boot.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dedup_int.h"

#define MAGIC "WDEDUP1\n"

typedef struct file_entry {
    dedup_key k;
    uint64_t wall;
} file_entry;

bool dedup_cache_save(const dedup_cache *c, const char *path, uint64_t now_ms, uint64_t wall_ms)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return false;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return false;
    uint32_t head[2] = {c->n, 0};
    bool ok = fwrite(MAGIC, 8, 1, f) == 1 && fwrite(c->secret, 16, 1, f) == 1 &&
              fwrite(head, sizeof head, 1, f) == 1;
    for (uint32_t p = c->oldest; ok && p != UINT32_MAX; p = c->e[p].next) {
        uint64_t v = c->e[p].v;
        file_entry fe = {c->e[p].k, v == 0 ? 0 : v > now_ms ? wall_ms + (v - now_ms) : 1};
        ok = fwrite(&fe, sizeof fe, 1, f) == 1;
    }
    ok = fflush(f) == 0 && ok;
    int saved = errno;
    if (fclose(f) != 0)
        ok = false;
    if (ok && rename(tmp, path) == 0)
        return true;
    saved = errno ? errno : saved;
    remove(tmp);
    errno = saved;
    return false;
}

bool dedup_cache_load(dedup_cache *c, const char *path, uint64_t now_ms, uint64_t wall_ms)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char magic[8];
    uint64_t secret[2];
    uint32_t head[2];
    if (fread(magic, 8, 1, f) != 1 || memcmp(magic, MAGIC, 8) != 0 ||
        fread(secret, 16, 1, f) != 1 || fread(head, sizeof head, 1, f) != 1) {
        fclose(f);
        return false;
    }
    dedup_cache_clear(c);
    c->secret[0] = secret[0], c->secret[1] = secret[1];
    file_entry fe;
    for (uint32_t i = 0; i < head[0] && fread(&fe, sizeof fe, 1, f) == 1; i++) {
        if (fe.wall && fe.wall <= wall_ms)
            continue; /* expired while the broker was down */
        dedup_add(c, fe.k, fe.wall ? now_ms + (fe.wall - wall_ms) : 0);
    }
    fclose(f);
    return true;
}
