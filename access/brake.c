/* The login brake: refused logins counted per source address, and the
 * number of refused connections held open.
 *
 * RabbitMQ's only brake on password guessing is the 3 s it holds a refused
 * connection before closing it (conn.c does the same); a client that opens
 * many connections at once guesses as fast as it likes. Warren also counts
 * refused logins per address: `failures` of them within `window` ms brake
 * the address for `duration` ms, during which its logins are refused
 * without looking at the password (conn.c, handshake.c). Logins refused
 * during a brake do not count, so an address gets `failures` guesses per
 * window-and-brake, and a user sharing its address waits out one brake.
 *
 * The table is fixed: SETS sets of WAYS slots, an address hashed (with a
 * seed, so a client cannot choose colliding addresses) to one set. A new
 * address takes, in its set, a free slot, else the unbraked slot idle the
 * longest, else the brake that ends first. Memory is the table whatever
 * the number of sources; a client with thousands of addresses can push
 * others out, but then one address was never its limit. IPv6 addresses
 * count by their /64 prefix (an end site's usual share, which one client
 * can pick addresses from at will); IPv4 and IPv4-mapped ones whole.
 *
 * Held connections: each refused connection stays open LOGIN_HOLD_MS, at
 * most `max_held` at once; past that conn.c closes a refused one at once,
 * so a flood of failing logins costs bounded descriptors and memory.
 */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "access.h"

#define WAYS 8
#define SETS 512 /* a power of two */

typedef struct brake_slot {
    uint8_t key[16];
    bool used;
    uint32_t failures;  /* in the window that began at window_ms */
    uint64_t window_ms; /* when the current window began */
    uint64_t last_ms;   /* the last refused login */
    uint64_t until_ms;  /* braked until then; 0 = not braked */
} brake_slot;

struct login_brake {
    uint32_t failures, window_ms, duration_ms, max_held, held;
    uint64_t seed;
    brake_slot slots[SETS][WAYS];
};

login_brake *login_brake_new(const config *cfg, uint64_t seed)
{
    login_brake *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->failures = cfg->login_brake_failures;
    b->window_ms = cfg->login_brake_window_ms;
    b->duration_ms = cfg->login_brake_duration_ms;
    b->max_held = cfg->login_brake_max_held;
    b->seed = seed;
    return b;
}

void login_brake_free(login_brake *b) { free(b); }

void login_brake_key(const struct sockaddr *sa, uint8_t key[16])
{
    static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    memset(key, 0, 16);
    if (sa->sa_family == AF_INET) {
        memcpy(key, v4_mapped, sizeof v4_mapped);
        memcpy(key + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        bool mapped = memcmp(a, v4_mapped, sizeof v4_mapped) == 0;
        memcpy(key, a, mapped ? 16 : 8);
    }
}

/* splitmix64's finalizer over the key's two halves and the seed. */
static uint32_t set_of(const login_brake *b, const uint8_t key[16])
{
    uint64_t h[2];
    memcpy(h, key, 16);
    uint64_t z = h[0] ^ b->seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ h[1] ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)(z ^ (z >> 31)) & (SETS - 1);
}

static brake_slot *find(login_brake *b, const uint8_t key[16])
{
    brake_slot *set = b->slots[set_of(b, key)];
    for (int i = 0; i < WAYS; i++)
        if (set[i].used && memcmp(set[i].key, key, 16) == 0)
            return &set[i];
    return NULL;
}

/* Whether slot a should give way before slot b (see the design note). */
static bool evicts_before(const brake_slot *a, const brake_slot *b, uint64_t now)
{
    if (!a->used || !b->used)
        return !a->used;
    bool a_braked = a->until_ms > now, b_braked = b->until_ms > now;
    if (a_braked != b_braked)
        return !a_braked;
    return a_braked ? a->until_ms < b->until_ms : a->last_ms < b->last_ms;
}

static brake_slot *claim(login_brake *b, const uint8_t key[16], uint64_t now)
{
    brake_slot *set = b->slots[set_of(b, key)], *victim = &set[0];
    for (int i = 1; i < WAYS; i++)
        if (evicts_before(&set[i], victim, now))
            victim = &set[i];
    *victim = (brake_slot){.used = true, .window_ms = now};
    memcpy(victim->key, key, 16);
    return victim;
}

uint64_t login_brake_left(login_brake *b, const uint8_t key[16], uint64_t now_ms)
{
    const brake_slot *s = b->failures ? find(b, key) : NULL;
    return s && s->until_ms > now_ms ? s->until_ms - now_ms : 0;
}

bool login_brake_failed(login_brake *b, const uint8_t key[16], uint64_t now_ms)
{
    if (!b->failures)
        return false;
    brake_slot *s = find(b, key);
    if (!s)
        s = claim(b, key, now_ms);
    if (now_ms - s->window_ms >= b->window_ms) {
        s->failures = 0;
        s->window_ms = now_ms;
    }
    s->last_ms = now_ms;
    if (++s->failures < b->failures)
        return false;
    s->until_ms = now_ms + b->duration_ms;
    s->failures = 0;
    s->window_ms = now_ms;
    return true;
}

bool login_brake_hold(login_brake *b)
{
    if (b->held >= b->max_held)
        return false;
    b->held++;
    return true;
}

void login_brake_release(login_brake *b) { b->held--; }

uint32_t login_brake_held(const login_brake *b) { return b->held; }
