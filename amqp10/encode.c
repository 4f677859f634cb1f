/* AMQP 1.0 encoding, choosing each value's form as RabbitMQ 3.10's
 * amqp10_binary_generator does, so that a converted message is the same
 * bytes RabbitMQ stores (the test vectors check it).
 *
 * Compounds are written header-last: begin reserves the 9 bytes of the
 * 32-bit header, end picks the form from the items' size and count and,
 * for the 8-bit form, moves the items back over the 6 spare bytes.
 */
#include "amqp10_int.h"

#define COMPOUND_RESERVE 9 /* code + 32-bit size + 32-bit count */

void amqp10_put_null(amqp_writer *w)
{
    amqp_put_u8(w, 0x40);
}

void amqp10_put_bool(amqp_writer *w, bool v)
{
    amqp_put_u8(w, 0x56);
    amqp_put_u8(w, v ? 1 : 0);
}

void amqp10_put_ubyte(amqp_writer *w, uint8_t v)
{
    amqp_put_u8(w, 0x50);
    amqp_put_u8(w, v);
}

void amqp10_put_ushort(amqp_writer *w, uint16_t v)
{
    amqp_put_u8(w, 0x60);
    amqp_put_u16(w, v);
}

void amqp10_put_uint(amqp_writer *w, uint32_t v)
{
    if (v == 0) {
        amqp_put_u8(w, 0x43);
    } else if (v < 256) {
        amqp_put_u8(w, 0x52);
        amqp_put_u8(w, (uint8_t)v);
    } else {
        amqp_put_u8(w, 0x70);
        amqp_put_u32(w, v);
    }
}

void amqp10_put_ulong(amqp_writer *w, uint64_t v)
{
    if (v == 0) {
        amqp_put_u8(w, 0x44);
    } else if (v < 256) {
        amqp_put_u8(w, 0x53);
        amqp_put_u8(w, (uint8_t)v);
    } else {
        amqp_put_u8(w, 0x80);
        amqp_put_u64(w, v);
    }
}

void amqp10_put_byte(amqp_writer *w, int8_t v)
{
    amqp_put_u8(w, 0x51);
    amqp_put_u8(w, (uint8_t)v);
}

void amqp10_put_short(amqp_writer *w, int16_t v)
{
    amqp_put_u8(w, 0x61);
    amqp_put_u16(w, (uint16_t)v);
}

void amqp10_put_int(amqp_writer *w, int32_t v)
{
    if (v >= -128 && v <= 127) {
        amqp_put_u8(w, 0x54);
        amqp_put_u8(w, (uint8_t)v);
    } else {
        amqp_put_u8(w, 0x71);
        amqp_put_u32(w, (uint32_t)v);
    }
}

void amqp10_put_long(amqp_writer *w, int64_t v)
{
    if (v >= -128 && v <= 127) {
        amqp_put_u8(w, 0x55);
        amqp_put_u8(w, (uint8_t)v);
    } else {
        amqp_put_u8(w, 0x81);
        amqp_put_u64(w, (uint64_t)v);
    }
}

void amqp10_put_float(amqp_writer *w, float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    amqp_put_u8(w, 0x72);
    amqp_put_u32(w, b);
}

void amqp10_put_double(amqp_writer *w, double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    amqp_put_u8(w, 0x82);
    amqp_put_u64(w, b);
}

void amqp10_put_timestamp(amqp_writer *w, int64_t ms)
{
    amqp_put_u8(w, 0x83);
    amqp_put_u64(w, (uint64_t)ms);
}

void amqp10_put_uuid(amqp_writer *w, const uint8_t uuid[16])
{
    amqp_put_u8(w, 0x98);
    amqp_put_raw(w, uuid, 16);
}

/* code8 when v is shorter than limit8 bytes, else code8 + 0x10 (32-bit). */
static void put_variable(amqp_writer *w, uint8_t code8, size_t limit8, amqp_bytes v)
{
    if (v.len < limit8) {
        amqp_put_u8(w, code8);
        amqp_put_u8(w, (uint8_t)v.len);
    } else {
        amqp_put_u8(w, (uint8_t)(code8 + 0x10));
        amqp_put_u32(w, v.len);
    }
    amqp_put_raw(w, v.ptr, v.len);
}

void amqp10_put_binary(amqp_writer *w, amqp_bytes v)
{
    put_variable(w, 0xa0, 255, v);
}

void amqp10_put_string(amqp_writer *w, amqp_bytes v)
{
    put_variable(w, 0xa1, 255, v);
}

void amqp10_put_symbol(amqp_writer *w, amqp_bytes v)
{
    put_variable(w, 0xa3, 256, v); /* RabbitMQ: sym8 whenever it fits */
}

void amqp10_put_descriptor(amqp_writer *w, uint64_t code)
{
    amqp_put_u8(w, 0x00);
    amqp10_put_ulong(w, code);
}

size_t amqp10_compound_begin(amqp_writer *w)
{
    static const uint8_t room[COMPOUND_RESERVE];
    size_t mark = w->len;
    amqp_put_raw(w, room, sizeof room);
    return mark;
}

/* The header for the items after mark + 9: 8-bit when count < 255 and the
 * size (count byte + items) < 256, as RabbitMQ's generator decides. Arrays
 * count their constructor in the items. */
static void compound_end(amqp_writer *w, size_t mark, uint32_t count, uint8_t code8)
{
    if (w->overflow)
        return;
    uint8_t *h = w->buf + mark;
    size_t items = w->len - mark - COMPOUND_RESERVE;
    if (count < 255 && items + 1 < 256) {
        h[0] = code8;
        h[1] = (uint8_t)(items + 1);
        h[2] = (uint8_t)count;
        memmove(h + 3, h + COMPOUND_RESERVE, items);
        w->len -= COMPOUND_RESERVE - 3;
        return;
    }
    if (items > UINT32_MAX - 4) {
        w->overflow = true;
        return;
    }
    amqp_writer hw;
    amqp_writer_init(&hw, h, COMPOUND_RESERVE);
    amqp_put_u8(&hw, (uint8_t)(code8 + 0x10));
    amqp_put_u32(&hw, (uint32_t)(items + 4));
    amqp_put_u32(&hw, count);
}

void amqp10_list_end(amqp_writer *w, size_t mark, uint32_t count)
{
    if (count == 0 && !w->overflow && w->len == mark + COMPOUND_RESERVE) {
        w->buf[mark] = 0x45; /* list0, RabbitMQ's {list, []} */
        w->len = mark + 1;
        return;
    }
    compound_end(w, mark, count, 0xc0);
}

void amqp10_map_end(amqp_writer *w, size_t mark, uint32_t count)
{
    compound_end(w, mark, count, 0xc1);
}

size_t amqp10_array_begin(amqp_writer *w, uint8_t elem_code)
{
    size_t mark = amqp10_compound_begin(w);
    amqp_put_u8(w, elem_code);
    return mark;
}

void amqp10_array_end(amqp_writer *w, size_t mark, uint32_t count)
{
    compound_end(w, mark, count, 0xe0);
}
