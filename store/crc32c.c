/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78) for journal records.
 *
 * Two implementations with the same result: the SSE4.2 crc32 instruction
 * eight bytes at a time, used when the CPU has it (checked once with
 * __builtin_cpu_supports), and a portable slice-by-8 table walk. The tables
 * are built once, on first use, under pthread_once, so the loop thread and
 * tests may call this concurrently.
 *
 * Chaining: journal_crc32c(journal_crc32c(0, a), b) == journal_crc32c(0, a||b).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "journal_int.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86_CRC 1
#include <nmmintrin.h>
#endif

/* Process-wide and written once (init_once): the table and whether the
 * CPU has the instruction, read-only afterwards by every thread. */
static uint32_t table[8][256];
static bool use_hw;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++)
            table[k][n] = (table[k - 1][n] >> 8) ^ table[0][table[k - 1][n] & 0xff];
#ifdef HAVE_X86_CRC
    __builtin_cpu_init();
    use_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static uint32_t crc_sw(uint32_t c, const uint8_t *p, size_t n)
{
    while (n > 0 && ((uintptr_t)p & 7) != 0) {
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
        n--;
    }
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w = load_le64(p) ^ c;
        c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
            table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^
            table[2][(w >> 40) & 0xff] ^ table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
    }
    while (n-- > 0)
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
    return c;
}

#ifdef HAVE_X86_CRC
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n)
{
    while (n > 0 && ((uintptr_t)p & 7) != 0) {
        c = _mm_crc32_u8(c, *p++);
        n--;
    }
    uint64_t c64 = c;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = _mm_crc32_u64(c64, w);
    }
    c = (uint32_t)c64;
    while (n-- > 0)
        c = _mm_crc32_u8(c, *p++);
    return c;
}
#endif

uint32_t journal_crc32c(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&init_once, crc_init);
#ifdef HAVE_X86_CRC
    if (use_hw)
        return ~crc_hw(~crc, data, len);
#endif
    return ~crc_sw(~crc, data, len);
}

uint32_t journal_crc32c_sw(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&init_once, crc_init);
    return ~crc_sw(~crc, data, len);
}

bool journal_crc32c_hw(void)
{
    pthread_once(&init_once, crc_init);
    return use_hw;
}
