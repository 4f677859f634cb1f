/* The Bloom filter of a chunk (osiris_bloom.erl's layout and rules, not its
 * hash): `size` bytes = size*8 bits, bit n is byte n/8's bit 0x80 >> n%8
 * (an Erlang bitstring's order). Bit 0 says "an entry without a filter
 * value is here"; each value sets two bits h1, h2 in 1..bits-1. A chunk in
 * which no entry has a value has no filter (size 0), and matches only a
 * reader that takes unfiltered entries.
 *
 * Hash: RabbitMQ uses erlang:phash2, which only Erlang computes; Warren is
 * the only reader of its filters, so it uses 64-bit FNV-1a with a final mix
 * (splitmix64's), h1 from the low and h2 from the high 32 bits, each
 * modulo bits-1, plus 1. A filter written by RabbitMQ is therefore not
 * meaningful here (it never is: Warren reads only its own streams).
 */
#include <stdlib.h>
#include <string.h>

#include "stream_int.h"

static void hash_value(const uint8_t *v, size_t n, uint32_t bits, uint32_t out[2])
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ v[i]) * 0x100000001b3ULL;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    out[0] = (uint32_t)h % (bits - 1) + 1;
    out[1] = (uint32_t)(h >> 32) % (bits - 1) + 1;
}

static void set_bit(uint8_t *bits, uint32_t n) { bits[n / 8] |= (uint8_t)(0x80u >> (n % 8)); }
static bool bit_set(const uint8_t *bits, uint32_t n) { return bits[n / 8] & (0x80u >> (n % 8)); }

void bloom_build(const stream_builder *b, uint8_t *bits, uint32_t size)
{
    memset(bits, 0, size);
    for (size_t pos = 0; pos + 2 <= b->values.len;) {
        uint16_t n = rd16(b->values.p + pos);
        if (n == 0) {
            set_bit(bits, 0);
        } else {
            uint32_t h[2];
            hash_value(b->values.p + pos + 2, n, size * 8, h);
            set_bit(bits, h[0]);
            set_bit(bits, h[1]);
        }
        pos += 2 + (size_t)n;
    }
}

bool bloom_matcher_init(bloom_matcher *m, const stream_filter *f)
{
    *m = (bloom_matcher){.match_unfiltered = f->match_unfiltered, .count = f->count};
    size_t total = 0;
    for (size_t i = 0; i < f->count; i++) {
        if (f->values[i].len > STREAM_FILTER_VALUE_MAX)
            return false;
        total += 2 + f->values[i].len;
    }
    m->values = malloc(total ? total : 1);
    m->hashes = calloc(f->count ? f->count : 1, sizeof *m->hashes);
    if (!m->values || !m->hashes) {
        bloom_matcher_free(m);
        return false;
    }
    for (size_t i = 0; i < f->count; i++) {
        be16(m->values + m->values_len, (uint16_t)f->values[i].len);
        if (f->values[i].len)
            memcpy(m->values + m->values_len + 2, f->values[i].bytes, f->values[i].len);
        m->values_len += 2 + f->values[i].len;
    }
    return true;
}

void bloom_matcher_free(bloom_matcher *m)
{
    free(m->values);
    free(m->hashes);
    m->values = NULL;
    m->hashes = NULL;
}

bool bloom_may_match(bloom_matcher *m, const uint8_t *filter, uint32_t size)
{
    if (size == 0)
        return m->match_unfiltered;
    if (m->match_unfiltered && bit_set(filter, 0))
        return true;
    if (m->size != size) { /* chunks written with another filter size */
        size_t pos = 0;
        for (size_t i = 0; i < m->count; i++) {
            uint16_t n = rd16(m->values + pos);
            if (n == 0) /* "" is no value (osiris_bloom): bit 0 */
                m->hashes[i][0] = m->hashes[i][1] = 0;
            else
                hash_value(m->values + pos + 2, n, size * 8, m->hashes[i]);
            pos += 2 + (size_t)n;
        }
        m->size = size;
    }
    for (size_t i = 0; i < m->count; i++)
        if (bit_set(filter, m->hashes[i][0]) && bit_set(filter, m->hashes[i][1]))
            return true;
    return false;
}
