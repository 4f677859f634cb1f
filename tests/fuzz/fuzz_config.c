/* The configuration parser (core/config.c): a rabbitmq.conf-style file,
 * read by config_load_file from a memfd as from disk. A refusal names the
 * file and line; what loads describes itself (config_describe, GET
 * /api/environment) in keys and values that set again, one by one, to a
 * configuration that describes itself the same. */
#include <sys/mman.h>
#include <unistd.h>

#include "../../core/core.h"
#include "fuzz.h"

typedef struct described {
    config *c; /* set each key on it, when not NULL */
    char text[16384];
    size_t len;
} described;

static void describe(void *arg, const char *key, const char *value)
{
    described *d = arg;
    char err[512];
    int n = snprintf(d->text + d->len, sizeof d->text - d->len, "%s=%s\n", key, value);
    FUZZ_CHECK(n > 0 && (size_t)n < sizeof d->text - d->len);
    d->len += (size_t)n;
    if (d->c && !config_set(d->c, key, value, "describe", err, sizeof err)) {
        fprintf(stderr, "described as %s = %s, which sets as: %s\n", key, value, err);
        FUZZ_CHECK(!"a described setting sets again");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-config", 0);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(write(fd, data, size) == (ssize_t)size);
    char path[64], err[1024];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    config c;
    config_defaults(&c);
    if (config_load_file(&c, path, err, sizeof err)) {
        static config again;
        static described first, second;
        config_defaults(&again);
        first = (described){.c = &again};
        second = (described){.c = NULL};
        config_describe(&c, describe, &first);
        config_describe(&again, describe, &second);
        bool same = first.len == second.len && memcmp(first.text, second.text, first.len) == 0;
        if (!same)
            fprintf(stderr, "described as:\n%.*s\nwhich sets to:\n%.*s\n", (int)first.len,
                    first.text, (int)second.len, second.text);
        FUZZ_CHECK(same);
        (void)config_loopback_only(&c, "guest");
    } else {
        FUZZ_CHECK(strncmp(err, path, strlen(path)) == 0 && strlen(err) < sizeof err);
    }
    close(fd);
    return 0;
}
