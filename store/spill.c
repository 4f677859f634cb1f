/* spill: transient messages paged out while memory is short -- files that
 * die with the process, so such a message is gone after a restart, as a
 * RabbitMQ transient message paged to disk is.
 *
 * Why not the journal: what it writes comes back at a restart and needs a
 * settle record to go, and every durable queue's confirms wait behind its
 * syncs; a spilled message needs neither durability nor a record of its
 * leaving, only its bytes back once, soon.
 *
 * Files: <dir>/spill/, opened O_TMPFILE (or created and unlinked at once
 * where the file system lacks it), so none outlives its descriptor. They
 * are segments of about SPILL_SEGMENT bytes; records go to the active one,
 * at its end. A segment counts its live records: when that count falls to
 * 0 the segment is closed -- its blocks go back to the file system -- or,
 * for the active one, cut to 0 and written again from the start.
 *
 * Writes go through a buffer of SPILL_BUFFER bytes written out with one
 * pwrite when full or when the active segment changes, so paging costs a
 * memcpy per message and a syscall per buffer; a record still in the
 * buffer is read from it. A failed write (ENOSPC, ...) keeps the buffer
 * -- its records are read from it still -- and refuses new records (their
 * messages stay in RAM) until a later flush succeeds.
 *
 * A record's location is a journal_loc: segment number (slot + 1), offset,
 * length. Its bytes are the caller's parts, concatenated.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal_int.h"

#define SPILL_SEGMENT (64u << 20)
#define SPILL_BUFFER (1u << 20)

typedef struct spill_seg {
    int fd;        /* -1: a free slot */
    uint32_t live; /* records not dropped yet */
    uint64_t size; /* bytes appended (some may still be in the buffer) */
} spill_seg;

struct spill {
    char dir[PATH_MAX];
    spill_seg *segs;
    uint32_t nsegs;
    uint32_t active;    /* slot being written (none: not below nsegs, or a free slot) */
    uint8_t *buf;       /* the active segment's bytes [buf_off, buf_off + buf_len) */
    uint64_t buf_off;
    size_t buf_len;
    uint64_t bytes;     /* in every segment, live or not yet reclaimed */
    bool failed_logged; /* a write failure was logged, no success since */
    void (*log)(int level, const char *text);
};

static void spill_log(spill *sp, const char *what)
{
    char line[PATH_MAX + 200];
    snprintf(line, sizeof line, "%s %s: %s", what, sp->dir, strerror(errno));
    if (sp->log)
        sp->log(3, line);
    else
        fprintf(stderr, "[error] spill: %s\n", line);
}

spill *spill_new(const char *data_dir, void (*log)(int level, const char *text))
{
    spill *sp = calloc(1, sizeof *sp);
    if (!sp)
        return NULL;
    sp->log = log;
    snprintf(sp->dir, sizeof sp->dir, "%s/spill", data_dir);
    return sp;
}

void spill_free(spill *sp)
{
    if (!sp)
        return;
    for (uint32_t i = 0; i < sp->nsegs; i++)
        if (sp->segs[i].fd >= 0)
            close(sp->segs[i].fd);
    free(sp->segs);
    free(sp->buf);
    free(sp);
}

uint64_t spill_bytes(const spill *sp) { return sp ? sp->bytes : 0; }

static int open_file(spill *sp)
{
    mkdir(sp->dir, 0700);
    int fd = open(sp->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        char path[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/XXXXXX", sp->dir);
        if ((fd = mkostemp(path, O_CLOEXEC)) >= 0)
            unlink(path);
    }
    return fd;
}

static bool write_all(int fd, const uint8_t *p, size_t n, uint64_t off)
{
    while (n > 0) {
        ssize_t k = pwrite(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        p += k, n -= (size_t)k, off += (uint64_t)k;
    }
    return true;
}

static bool write_failed(spill *sp)
{
    if (!sp->failed_logged)
        spill_log(sp, "writing transient messages out failed (they stay in RAM until it works "
                  "again) in");
    sp->failed_logged = true;
    return false;
}

/* Writes the buffer out; false (buffer kept) when it cannot. */
static bool flush(spill *sp)
{
    if (sp->buf_len == 0)
        return true;
    if (!write_all(sp->segs[sp->active].fd, sp->buf, sp->buf_len, sp->buf_off))
        return write_failed(sp);
    sp->buf_off += sp->buf_len;
    sp->buf_len = 0;
    sp->failed_logged = false;
    return true;
}

/* A segment with room for `len` more bytes becomes the active one. */
static bool make_room(spill *sp, uint64_t len)
{
    bool has_active = sp->active < sp->nsegs && sp->segs[sp->active].fd >= 0;
    if (has_active &&
        (sp->segs[sp->active].size == 0 || sp->segs[sp->active].size + len <= SPILL_SEGMENT))
        return true;
    if (!flush(sp))
        return false;
    uint32_t slot = 0;
    while (slot < sp->nsegs && sp->segs[slot].fd >= 0)
        slot++;
    if (slot == sp->nsegs) {
        spill_seg *n = realloc(sp->segs, (sp->nsegs + 1) * sizeof *n);
        if (!n)
            return false;
        sp->segs = n;
        sp->segs[sp->nsegs++] = (spill_seg){.fd = -1};
    }
    int fd = open_file(sp);
    if (fd < 0)
        return write_failed(sp);
    uint32_t old = sp->active;
    sp->segs[slot] = (spill_seg){.fd = fd};
    sp->active = slot;
    sp->buf_off = 0;
    if (has_active && sp->segs[old].live == 0) { /* nothing left in the old one */
        close(sp->segs[old].fd);
        sp->bytes -= sp->segs[old].size;
        sp->segs[old] = (spill_seg){.fd = -1};
    }
    return true;
}

bool spill_write(spill *sp, const amqp_bytes *parts, size_t nparts, journal_loc *loc)
{
    uint64_t len = 0;
    for (size_t i = 0; i < nparts; i++)
        len += parts[i].len;
    if (len > UINT32_MAX / 2 || !make_room(sp, len))
        return false;
    if (!sp->buf && !(sp->buf = malloc(SPILL_BUFFER)))
        return false;
    if (sp->buf_len + len > SPILL_BUFFER && !flush(sp))
        return false;
    spill_seg *seg = &sp->segs[sp->active];
    *loc = (journal_loc){.segment = sp->active + 1, .offset = (uint32_t)seg->size,
                         .length = (uint32_t)len};
    if (len > SPILL_BUFFER) { /* a big one goes straight out */
        uint64_t off = seg->size;
        for (size_t i = 0; i < nparts; i++, off += parts[i - 1].len)
            if (!write_all(seg->fd, parts[i].ptr, parts[i].len, off))
                return write_failed(sp);
        sp->buf_off = off;
    } else {
        for (size_t i = 0; i < nparts; i++) {
            if (parts[i].len)
                memcpy(sp->buf + sp->buf_len, parts[i].ptr, parts[i].len);
            sp->buf_len += parts[i].len;
        }
    }
    seg->size += len;
    seg->live++;
    sp->bytes += len;
    return true;
}

bool spill_read(spill *sp, journal_loc loc, uint8_t *out)
{
    uint32_t slot = loc.segment - 1;
    if (slot >= sp->nsegs || sp->segs[slot].fd < 0)
        return false;
    if (slot == sp->active && loc.offset >= sp->buf_off) {
        memcpy(out, sp->buf + (loc.offset - sp->buf_off), loc.length);
        return true;
    }
    return journal_pread_full(sp->segs[slot].fd, out, loc.length, loc.offset);
}

void spill_drop(spill *sp, journal_loc loc)
{
    uint32_t slot = loc.segment - 1;
    if (slot >= sp->nsegs || sp->segs[slot].fd < 0 || sp->segs[slot].live == 0)
        return;
    spill_seg *seg = &sp->segs[slot];
    if (--seg->live > 0)
        return;
    sp->bytes -= seg->size;
    if (slot != sp->active) {
        close(seg->fd);
        *seg = (spill_seg){.fd = -1};
        return;
    }
    /* the active one starts over: its blocks go back, the buffer is void */
    if (ftruncate(seg->fd, 0) != 0)
        spill_log(sp, "truncating a file in");
    seg->size = 0;
    sp->buf_off = 0;
    sp->buf_len = 0;
}
