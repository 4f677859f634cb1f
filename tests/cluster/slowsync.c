/* A slow disk for the cluster tests: LD_PRELOADed into a broker, it delays
 * every fsync and fdatasync (the journal's group commit, sqlite's commits)
 * before doing the real one.
 *
 *   WARREN_SLOW_SYNC_MS=N     the delay, read once at load (0 or unset: none)
 *   WARREN_SLOW_SYNC_FILE=F   the delay is read from F at each call instead
 *                             (missing or unreadable: none), so a test can
 *                             slow a running node's disk and speed it again.
 *
 * Built by `make build/slowsync.so` (tests/cluster/netns.py preloads it). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int sync_fn(int);

static long parse_ms(const char *s)
{
    char *end;
    long ms = s ? strtol(s, &end, 10) : 0;
    return s && end != s && ms > 0 && ms <= 3600 * 1000 ? ms : 0;
}

static long delay_ms(void)
{
    const char *path = getenv("WARREN_SLOW_SYNC_FILE");
    if (!path)
        return parse_ms(getenv("WARREN_SLOW_SYNC_MS"));
    char buf[32];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return parse_ms(buf);
}

/* Sleeps the whole delay even when signals interrupt it; errno is kept, so
 * the caller sees only the real call's. */
static void pause_for_disk(void)
{
    int saved = errno;
    long ms = delay_ms();
    struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
    while (ms > 0 && nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
    errno = saved;
}

static int call_next(const char *name, int fd)
{
    sync_fn *real = (sync_fn *)dlsym(RTLD_NEXT, name);
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(fd);
}

int fsync(int fd)
{
    pause_for_disk();
    return call_next("fsync", fd);
}

int fdatasync(int fd)
{
    pause_for_disk();
    return call_next("fdatasync", fd);
}
