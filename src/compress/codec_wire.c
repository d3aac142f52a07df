/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The payload header every codec output starts with, and its validation.
 * Pure functions over byte spans (linked by the fuzz target). Layout, all
 * little-endian (docs/compression.md):
 *
 *   offset  size  field
 *        0     4  magic "GSCZ"
 *        4     1  version (1)
 *        5     1  codec wire id (GS_CODEC_MAP value)
 *        6     1  flags (bit 0: body is a zstd frame)
 *        7     1  reserved, 0
 *        8     4  block size (elements per scale), 0 when unused
 *       12     4  param: qsgd levels, or k for topk/randk, else 0
 *       16     8  element count
 *       24     8  body length in bytes (as stored)
 *
 * The checker does not look at the body; the codec does.
 */
#include "compress/codec.h"
#include "core/le.h"

#include <inttypes.h>
#include <stdio.h>

void gs__codec_hdr_encode(const gs__codec_hdr_t *hdr, uint8_t *out)
{
    gs__put_le32(out, GS_CODEC_WIRE_MAGIC);
    out[4] = hdr->version;
    out[5] = hdr->codec;
    out[6] = hdr->flags;
    out[7] = 0;
    gs__put_le32(out + 8, hdr->block);
    gs__put_le32(out + 12, hdr->param);
    gs__put_le64(out + 16, hdr->count);
    gs__put_le64(out + 24, hdr->body_len);
}

gs_status_t gs__codec_hdr_check(const uint8_t *payload, size_t len, gs_codec_kind_t codec,
                                const gs__codec_params_t *p, gs__codec_hdr_t *hdr_out, char *why,
                                size_t why_len)
{
    gs__codec_hdr_t h;

    if ((payload == NULL) || (len < GS_CODEC_HEADER_BYTES)) {
        snprintf(why, why_len, "payload of %zu bytes is shorter than the %d-byte header", len,
                 GS_CODEC_HEADER_BYTES);
        return GS_ERR_PROTOCOL;
    }
    if (gs__get_le32(payload) != GS_CODEC_WIRE_MAGIC) {
        snprintf(why, why_len, "bad magic 0x%08" PRIx32, gs__get_le32(payload));
        return GS_ERR_PROTOCOL;
    }
    h.version = payload[4];
    h.codec = payload[5];
    h.flags = payload[6];
    h.block = gs__get_le32(payload + 8);
    h.param = gs__get_le32(payload + 12);
    h.count = gs__get_le64(payload + 16);
    h.body_len = gs__get_le64(payload + 24);
    if (h.version != GS_CODEC_WIRE_VERSION) {
        snprintf(why, why_len, "payload version %u, this library speaks %u", (unsigned)h.version,
                 GS_CODEC_WIRE_VERSION);
        return GS_ERR_PROTOCOL;
    }
    if (h.codec != (uint8_t)codec) {
        const gs__codec_ops_t *got = gs__codec_lookup((gs_codec_kind_t)h.codec);
        const gs__codec_ops_t *want = gs__codec_lookup(codec);
        snprintf(why, why_len, "payload of codec %s (id %u), expected %s (id %u)",
                 (got != NULL) ? got->name : "unknown", (unsigned)h.codec,
                 (want != NULL) ? want->name : "unknown", (unsigned)codec);
        return GS_ERR_PROTOCOL;
    }
    if (((h.flags & ~GS_CODEC_WIRE_FLAGS_KNOWN) != 0) || (payload[7] != 0)) {
        snprintf(why, why_len, "unknown flags 0x%02x or reserved byte 0x%02x", (unsigned)h.flags,
                 (unsigned)payload[7]);
        return GS_ERR_PROTOCOL;
    }
    if (h.count != (uint64_t)p->count) {
        snprintf(why, why_len, "payload of %" PRIu64 " elements, expected %zu", h.count, p->count);
        return GS_ERR_PROTOCOL;
    }
    if ((h.block != p->block) || (h.param != p->param)) {
        snprintf(why, why_len,
                 "payload block size %" PRIu32 " / param %" PRIu32
                 " differ from the configuration (%" PRIu32 " / %" PRIu32 ")",
                 h.block, h.param, p->block, p->param);
        return GS_ERR_PROTOCOL;
    }
    if (h.body_len != (uint64_t)(len - GS_CODEC_HEADER_BYTES)) {
        snprintf(why, why_len, "header says %" PRIu64 " body bytes, %zu arrived", h.body_len,
                 len - GS_CODEC_HEADER_BYTES);
        return GS_ERR_PROTOCOL;
    }
    *hdr_out = h;
    return GS_OK;
}
