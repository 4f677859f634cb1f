/* Encoding server->client frames (rabbit_stream_core.erl's frame/1 and
 * response_body/1, v3.13.x; byte layouts confirmed against RabbitMQ 3.10.8,
 * see tests/unit/test_streamproto_encode.c). Each encoder is begin, puts,
 * end (frame.c): the frame lands whole or not at all.
 */
#include "streamproto_int.h"

static size_t begin_response(sp_buf *b, uint16_t key, uint32_t correlation_id, uint16_t code)
{
    size_t start = sp_frame_begin(b, key | SP_RESPONSE, 1);
    sp_put_u32(b, correlation_id);
    sp_put_u16(b, code);
    return start;
}

static void put_pairs(sp_buf *b, const sp_pair *props, size_t n)
{
    sp_put_u32(b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        sp_put_str(b, props[i].key);
        sp_put_str(b, props[i].value);
    }
}

static void put_strings(sp_buf *b, const sp_slice *s, size_t n)
{
    sp_put_u32(b, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        sp_put_str(b, s[i]);
}

bool sp_encode_response(sp_buf *b, uint16_t key, uint32_t correlation_id, uint16_t code)
{
    return sp_frame_end(b, begin_response(b, key, correlation_id, code));
}

bool sp_encode_peer_properties_response(sp_buf *b, uint32_t correlation_id, uint16_t code,
                                        const sp_pair *props, size_t n)
{
    size_t start = begin_response(b, SP_PEER_PROPERTIES, correlation_id, code);
    put_pairs(b, props, n);
    return sp_frame_end(b, start);
}

bool sp_encode_sasl_handshake_response(sp_buf *b, uint32_t correlation_id, uint16_t code,
                                       const sp_slice *mechanisms, size_t n)
{
    size_t start = begin_response(b, SP_SASL_HANDSHAKE, correlation_id, code);
    put_strings(b, mechanisms, n);
    return sp_frame_end(b, start);
}

bool sp_encode_tune(sp_buf *b, uint32_t frame_max, uint32_t heartbeat)
{
    size_t start = sp_frame_begin(b, SP_TUNE, 1);
    sp_put_u32(b, frame_max);
    sp_put_u32(b, heartbeat);
    return sp_frame_end(b, start);
}

bool sp_encode_open_response(sp_buf *b, uint32_t correlation_id, uint16_t code,
                             const sp_pair *props, size_t n)
{
    size_t start = begin_response(b, SP_OPEN, correlation_id, code);
    if (n)
        put_pairs(b, props, n);
    return sp_frame_end(b, start);
}

bool sp_encode_close(sp_buf *b, uint32_t correlation_id, uint16_t code, sp_slice reason)
{
    size_t start = sp_frame_begin(b, SP_CLOSE, 1);
    sp_put_u32(b, correlation_id);
    sp_put_u16(b, code);
    sp_put_str(b, reason);
    return sp_frame_end(b, start);
}

bool sp_encode_heartbeat(sp_buf *b)
{
    return sp_frame_end(b, sp_frame_begin(b, SP_HEARTBEAT, 1));
}

bool sp_encode_publish_confirm(sp_buf *b, uint8_t publisher_id, const uint64_t *ids, size_t n)
{
    size_t start = sp_frame_begin(b, SP_PUBLISH_CONFIRM, 1);
    sp_put_u8(b, publisher_id);
    sp_put_u32(b, (uint32_t)n);
    for (size_t i = 0; i < n && !b->full; i++)
        sp_put_u64(b, ids[i]);
    return sp_frame_end(b, start);
}

bool sp_encode_publish_error(sp_buf *b, uint8_t publisher_id, uint16_t code,
                             const uint64_t *ids, size_t n)
{
    size_t start = sp_frame_begin(b, SP_PUBLISH_ERROR, 1);
    sp_put_u8(b, publisher_id);
    sp_put_u32(b, (uint32_t)n);
    for (size_t i = 0; i < n && !b->full; i++) {
        sp_put_u64(b, ids[i]);
        sp_put_u16(b, code);
    }
    return sp_frame_end(b, start);
}

static bool code_and_u64(sp_buf *b, uint16_t key, uint32_t correlation_id, uint16_t code,
                         uint64_t v)
{
    size_t start = begin_response(b, key, correlation_id, code);
    sp_put_u64(b, v);
    return sp_frame_end(b, start);
}

bool sp_encode_query_publisher_sequence_response(sp_buf *b, uint32_t correlation_id,
                                                 uint16_t code, uint64_t sequence)
{
    return code_and_u64(b, SP_QUERY_PUBLISHER_SEQUENCE, correlation_id, code, sequence);
}

bool sp_encode_query_offset_response(sp_buf *b, uint32_t correlation_id, uint16_t code,
                                     uint64_t offset)
{
    return code_and_u64(b, SP_QUERY_OFFSET, correlation_id, code, offset);
}

bool sp_encode_deliver_header(sp_buf *b, uint16_t version, uint8_t subscription_id,
                              uint64_t committed_chunk_id, uint64_t chunk_len)
{
    uint64_t size = SP_HEADER_LEN + 1 + (version == 2 ? 8 : 0) + chunk_len;
    if (chunk_len > UINT32_MAX || size > UINT32_MAX || version < 1 || version > 2)
        return false;
    size_t start = b->len;
    sp_put_u32(b, (uint32_t)size);
    sp_put_u16(b, SP_DELIVER);
    sp_put_u16(b, version);
    sp_put_u8(b, subscription_id);
    if (version == 2)
        sp_put_u64(b, committed_chunk_id);
    if (b->full) {
        b->len = start;
        b->full = false;
        return false;
    }
    return true;
}

bool sp_encode_credit_response(sp_buf *b, uint16_t code, uint8_t subscription_id)
{
    /* no correlation id: RabbitMQ's special case */
    size_t start = sp_frame_begin(b, SP_CREDIT | SP_RESPONSE, 1);
    sp_put_u16(b, code);
    sp_put_u8(b, subscription_id);
    return sp_frame_end(b, start);
}

bool sp_encode_metadata_update(sp_buf *b, uint16_t code, sp_slice stream)
{
    size_t start = sp_frame_begin(b, SP_METADATA_UPDATE, 1);
    sp_put_u16(b, code);
    sp_put_str(b, stream);
    return sp_frame_end(b, start);
}

bool sp_encode_streams_response(sp_buf *b, uint16_t key, uint32_t correlation_id, uint16_t code,
                                const sp_slice *streams, size_t n)
{
    size_t start = begin_response(b, key, correlation_id, code);
    put_strings(b, streams, n);
    return sp_frame_end(b, start);
}

bool sp_encode_consumer_update(sp_buf *b, uint32_t correlation_id, uint8_t subscription_id,
                               bool active)
{
    size_t start = sp_frame_begin(b, SP_CONSUMER_UPDATE, 1);
    sp_put_u32(b, correlation_id);
    sp_put_u8(b, subscription_id);
    sp_put_u8(b, active ? 1 : 0);
    return sp_frame_end(b, start);
}

bool sp_encode_exchange_command_versions_response(sp_buf *b, uint32_t correlation_id,
                                                  uint16_t code, const sp_command_version *v,
                                                  size_t n)
{
    size_t start = begin_response(b, SP_EXCHANGE_COMMAND_VERSIONS, correlation_id, code);
    sp_put_u32(b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        sp_put_u16(b, v[i].key);
        sp_put_u16(b, v[i].min_version);
        sp_put_u16(b, v[i].max_version);
    }
    return sp_frame_end(b, start);
}

bool sp_encode_stream_stats_response(sp_buf *b, uint32_t correlation_id, uint16_t code,
                                     const sp_stat *stats, size_t n)
{
    size_t start = begin_response(b, SP_STREAM_STATS, correlation_id, code);
    sp_put_u32(b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        sp_put_str(b, stats[i].key);
        sp_put_u64(b, (uint64_t)stats[i].value);
    }
    return sp_frame_end(b, start);
}

/* Metadata response (response_body({metadata, ...})):
 *   correlation id, [broker: reference u16, host string, port u32],
 *   [stream: name string, code u16, leader u16, [replica u16]]
 * It has no response code of its own: each stream carries one. */
size_t sp_metadata_begin(sp_buf *b, uint32_t correlation_id, uint32_t broker_count)
{
    size_t start = sp_frame_begin(b, SP_METADATA | SP_RESPONSE, 1);
    sp_put_u32(b, correlation_id);
    sp_put_u32(b, broker_count);
    return start;
}

void sp_metadata_broker(sp_buf *b, uint16_t reference, sp_slice host, uint32_t port)
{
    sp_put_u16(b, reference);
    sp_put_str(b, host);
    sp_put_u32(b, port);
}

void sp_metadata_streams(sp_buf *b, uint32_t stream_count)
{
    sp_put_u32(b, stream_count);
}

void sp_metadata_stream_put(sp_buf *b, const sp_metadata_stream *s)
{
    bool ok = s->code == SP_OK;
    sp_put_str(b, s->name);
    sp_put_u16(b, s->code);
    sp_put_u16(b, ok ? s->leader : 0xFFFF);
    sp_put_u32(b, ok ? s->replica_count : 0);
    for (uint32_t i = 0; ok && i < s->replica_count; i++)
        sp_put_u16(b, s->replicas[i]);
}
