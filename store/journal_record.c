/* The journal's record and segment-header codec (formats: journal.c).
 *
 * Every check is of the form `n <= avail - off` so a length read from disk
 * can never make us read past the bytes we have. A record must pass two
 * CRCs: the header CRC (so resynchronisation can reject a random 16-byte
 * window cheaply, without trusting its length) and the payload CRC. */
#include "journal_int.h"

/* Payload length bounds per type: [min, max]. */
static bool payload_len_ok(uint8_t type, uint64_t n)
{
    switch (type) {
    case REC_MESSAGE: return n >= MSG_FIXED;
    case REC_ENQUEUE: return n == ENQ_PAYLOAD;
    case REC_SETTLE: return n >= SETTLE_FIXED && n <= SETTLE_FIXED + 2 * 65535u;
    case REC_DELIVERED: return n == DLV_PAYLOAD;
    case REC_PURGE:
    case REC_QUEUE_DELETE: return n == QUEUE_PAYLOAD;
    case REC_GROUP_END: return n == GROUP_PAYLOAD;
    case REC_DELAYED: return n == DLY_PAYLOAD;
    default: return false;
    }
}

rec_status journal_rec_check(const uint8_t *p, uint64_t avail, uint32_t seed, uint32_t *len)
{
    if (avail < REC_HEADER_SIZE)
        return REC_TRUNCATED;
    uint32_t n = get32(p);
    uint8_t type = p[4];
    if ((p[5] & ~REC_FLAG_GROUP) != 0 || get16(p + 6) != 0 ||
        journal_crc32c(seed, p, 8) != get32(p + 8))
        return REC_BAD_HEADER;
    if ((p[5] & REC_FLAG_GROUP) && type == REC_GROUP_END)
        return REC_BAD_HEADER;
    if (n < REC_HEADER_SIZE || !payload_len_ok(type, n - REC_HEADER_SIZE))
        return REC_BAD_HEADER;
    *len = n;
    if (n > avail)
        return REC_TRUNCATED;
    if (journal_crc32c(seed, p + REC_HEADER_SIZE, n - REC_HEADER_SIZE) != get32(p + 12))
        return REC_BAD_CRC;
    return REC_OK;
}

static void loc_decode(const uint8_t *p, journal_loc *loc)
{
    loc->segment = get32(p);
    loc->offset = get32(p + 4);
    loc->length = get32(p + 8);
}

static bool decode_message(const uint8_t *p, uint64_t n, jrec *r)
{
    uint64_t ex = get16(p + 8), rk = get16(p + 10), props = get32(p + 12), body = get32(p + 16);
    if (ex + rk + props + body != n - MSG_FIXED)
        return false;
    const uint8_t *d = p + MSG_FIXED;
    r->msg_id = r->msg.msg_id = get64(p);
    r->msg.exchange = (amqp_bytes){d, (uint32_t)ex};
    r->msg.routing_key = (amqp_bytes){d + ex, (uint32_t)rk};
    r->msg.properties = (amqp_bytes){d + ex + rk, (uint32_t)props};
    r->msg.body = (amqp_bytes){d + ex + rk + props, (uint32_t)body};
    return true;
}

static bool decode_settle(const uint8_t *p, uint64_t n, jrec *r)
{
    uint8_t kind = p[28];
    uint64_t reason = get16(p + 30), target = get16(p + 32);
    if (kind < JOURNAL_ACK || kind > JOURNAL_MOVE || p[29] != 0)
        return false;
    if (reason + target != n - SETTLE_FIXED)
        return false;
    r->queue_id = get64(p);
    r->msg_id = get64(p + 8);
    loc_decode(p + 16, &r->loc);
    r->kind = (journal_settle_kind)kind;
    r->reason = (amqp_bytes){p + SETTLE_FIXED, (uint32_t)reason};
    r->target = (amqp_bytes){p + SETTLE_FIXED + reason, (uint32_t)target};
    return true;
}

bool journal_rec_decode(const uint8_t *rec, uint32_t len, jrec *r)
{
    const uint8_t *p = rec + REC_HEADER_SIZE;
    uint64_t n = len - REC_HEADER_SIZE;
    memset(r, 0, sizeof *r);
    r->type = (rec_type)rec[4];
    r->grouped = (rec[5] & REC_FLAG_GROUP) != 0;
    switch (r->type) {
    case REC_MESSAGE: return decode_message(p, n, r);
    case REC_ENQUEUE:
        r->queue_id = get64(p);
        r->msg_id = get64(p + 8);
        loc_decode(p + 16, &r->loc);
        return true;
    case REC_SETTLE: return decode_settle(p, n, r);
    case REC_DELIVERED:
        r->queue_id = get64(p);
        r->msg_id = get64(p + 8);
        r->count = get32(p + 16);
        return true;
    case REC_PURGE:
    case REC_QUEUE_DELETE: r->queue_id = get64(p); return true;
    case REC_GROUP_END:
        r->count = get32(p);
        r->bytes = get32(p + 4);
        return r->count > 0;
    case REC_DELAYED:
        r->queue_id = get64(p);
        r->msg_id = get64(p + 8);
        r->until_ms = get64(p + 16);
        return true;
    }
    return false;
}

void journal_rec_seal(uint8_t *rec, rec_type type, uint8_t flags, uint32_t len, uint32_t seed)
{
    put32(rec, len);
    rec[4] = (uint8_t)type;
    rec[5] = flags;
    put16(rec + 6, 0);
    put32(rec + 8, journal_crc32c(seed, rec, 8));
    put32(rec + 12, journal_crc32c(seed, rec + REC_HEADER_SIZE, len - REC_HEADER_SIZE));
    memset(rec + len, 0, align8(len) - len);
}

void journal_seg_header_encode(uint8_t *out, uint32_t num, uint64_t first_seq)
{
    memcpy(out, JOURNAL_SEG_MAGIC, 8);
    put32(out + 8, JOURNAL_SEG_VERSION);
    put32(out + 12, num);
    put64(out + 16, first_seq);
    put32(out + 24, 0);
    put32(out + 28, journal_crc32c(0, out, 28));
}

bool journal_seg_header_decode(const uint8_t *p, uint64_t avail, uint32_t *num,
                               uint64_t *first_seq, uint32_t *seed)
{
    if (avail < SEG_HEADER_SIZE || memcmp(p, JOURNAL_SEG_MAGIC, 8) != 0)
        return false;
    uint32_t version = get32(p + 8);
    if (version < 1 || version > JOURNAL_SEG_VERSION || journal_crc32c(0, p, 28) != get32(p + 28))
        return false;
    *num = get32(p + 12);
    *first_seq = get64(p + 16);
    *seed = journal_rec_seed(version, *num);
    return true;
}
