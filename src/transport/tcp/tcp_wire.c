/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Encode and decode of the TCP handshake and frame header (layouts in
 * tcp_wire.h and docs/wire.md). Every decoder treats its input as hostile:
 * it checks the length first, then every field, before anything is trusted,
 * and never asserts on what it reads. This file is what fuzz_tcp_frame links.
 */
#include "transport/tcp/tcp_wire.h"

#include "core/error.h"
#include "core/socket.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Byte offsets of the handshake fields. */
enum {
    HS_OFF_MAGIC = 0,
    HS_OFF_VERSION = 4, /* u16 */
    HS_OFF_KIND = 6,    /* u8 */
    HS_OFF_VERDICT = 7, /* u8 */
    HS_OFF_JOB = 8,
    HS_OFF_COMM = 16,
    HS_OFF_RANK = 24,
    HS_OFF_SIZE = 28,
    HS_OFF_INDEX = 32,   /* u16 */
    HS_OFF_NSOCKS = 34,  /* u16 */
    HS_OFF_FLAGS = 36,   /* u32, GS_TCP_HS_F_* */
    HS_OFF_NONCE = 40,   /* 16 bytes */
    HS_OFF_MAC = 56,     /* 32 bytes */
    HS_OFF_RESERVED = 88 /* 8 zero bytes */
};

/* Byte offsets of the frame header fields. */
enum {
    FR_OFF_MAGIC = 0,
    FR_OFF_TYPE = 4,  /* u8 */
    FR_OFF_FLAGS = 5, /* u8: GS_TCP_FRAME_F_* (DATA), else zero */
    FR_OFF_RSVD = 6,  /* u16, zero */
    FR_OFF_SEQ = 8,
    FR_OFF_TAG = 16,
    FR_OFF_TOTAL = 24,
    FR_OFF_OFFSET = 32,
    FR_OFF_CHUNK = 40
};

_Static_assert(HS_OFF_RESERVED + 8 == GS_TCP_HS_LEN, "handshake layout");
_Static_assert(FR_OFF_CHUNK + 8 == GS_TCP_FRAME_HDR_LEN, "frame layout");

void gs__tcp_hs_encode(const gs__tcp_hs_t *hs, uint8_t *buf)
{
    gs__put_le32(buf + HS_OFF_MAGIC, GS_TCP_HS_MAGIC);
    gs__put_le16(buf + HS_OFF_VERSION, hs->version);
    buf[HS_OFF_KIND] = (uint8_t)hs->kind;
    buf[HS_OFF_VERDICT] = (uint8_t)hs->verdict;
    gs__put_le64(buf + HS_OFF_JOB, hs->job_id);
    gs__put_le64(buf + HS_OFF_COMM, hs->comm_id);
    gs__put_le32(buf + HS_OFF_RANK, hs->rank);
    gs__put_le32(buf + HS_OFF_SIZE, hs->size);
    gs__put_le16(buf + HS_OFF_INDEX, hs->index);
    gs__put_le16(buf + HS_OFF_NSOCKS, hs->nsocks);
    gs__put_le32(buf + HS_OFF_FLAGS, hs->flags);
    memcpy(buf + HS_OFF_NONCE, hs->nonce, sizeof(hs->nonce));
    memcpy(buf + HS_OFF_MAC, hs->mac, sizeof(hs->mac));
    memset(buf + HS_OFF_RESERVED, 0, 8);
}

gs_status_t gs__tcp_hs_decode(const uint8_t *buf, size_t len, gs__tcp_hs_t *out, char *why,
                              size_t whylen)
{
    gs__tcp_hs_t hs;
    uint32_t magic;

    if (len < GS_TCP_HS_LEN) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "handshake of %zu bytes, expected %d", len, GS_TCP_HS_LEN);
    }
    magic = gs__get_le32(buf + HS_OFF_MAGIC);
    if (magic != GS_TCP_HS_MAGIC) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "bad handshake magic 0x%08" PRIx32,
                                 magic);
    }
    hs.version = gs__get_le16(buf + HS_OFF_VERSION);
    hs.kind = buf[HS_OFF_KIND];
    hs.verdict = buf[HS_OFF_VERDICT];
    hs.job_id = gs__get_le64(buf + HS_OFF_JOB);
    hs.comm_id = gs__get_le64(buf + HS_OFF_COMM);
    hs.rank = gs__get_le32(buf + HS_OFF_RANK);
    hs.size = gs__get_le32(buf + HS_OFF_SIZE);
    hs.index = gs__get_le16(buf + HS_OFF_INDEX);
    hs.nsocks = gs__get_le16(buf + HS_OFF_NSOCKS);
    hs.flags = gs__get_le32(buf + HS_OFF_FLAGS);
    memcpy(hs.nonce, buf + HS_OFF_NONCE, sizeof(hs.nonce));
    memcpy(hs.mac, buf + HS_OFF_MAC, sizeof(hs.mac));
    if (hs.version != GS_TCP_PROTO_VERSION) {
        *out = hs;
        return gs__error_explain(GS_ERR_VERSION_MISMATCH, why, whylen,
                                 "protocol version %" PRIu32 ", this library speaks %u", hs.version,
                                 GS_TCP_PROTO_VERSION);
    }
    if ((hs.kind != GS_TCP_HS_HELLO) && (hs.kind != GS_TCP_HS_ACK) &&
        (hs.kind != GS_TCP_HS_PROOF)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "unknown handshake kind %" PRIu32,
                                 hs.kind);
    }
    if ((hs.verdict > GS_TCP_HS_VERDICT_MAX) ||
        ((hs.kind != GS_TCP_HS_ACK) && (hs.verdict != GS_TCP_HS_OK))) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "bad handshake verdict %" PRIu32,
                                 hs.verdict);
    }
    if ((hs.flags & ~GS_TCP_HS_F_KNOWN) != 0) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "unknown handshake flags 0x%08" PRIx32, hs.flags);
    }
    for (int i = 0; i < 8; i++) {
        if (buf[HS_OFF_RESERVED + i] != 0) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "nonzero reserved handshake byte %d", HS_OFF_RESERVED + i);
        }
    }
    *out = hs;
    return GS_OK;
}

gs__tcp_hs_verdict_t gs__tcp_hs_check(const gs__tcp_hs_t *hs, const gs__tcp_hs_expect_t *exp,
                                      char *why, size_t whylen)
{
    if (hs->version != GS_TCP_PROTO_VERSION) {
        gs__error_explain(GS_ERR_VERSION_MISMATCH, why, whylen,
                          "protocol version %" PRIu32 ", expected %u", hs->version,
                          GS_TCP_PROTO_VERSION);
        return GS_TCP_HS_BAD_VERSION;
    }
    if ((hs->job_id != exp->job_id) || (hs->comm_id != exp->comm_id)) {
        gs__error_explain(GS_ERR_MISMATCH, why, whylen,
                          "job/comm id 0x%016" PRIx64 "/0x%016" PRIx64 ", expected 0x%016" PRIx64
                          "/0x%016" PRIx64,
                          hs->job_id, hs->comm_id, exp->job_id, exp->comm_id);
        return GS_TCP_HS_BAD_JOB;
    }
    if ((int64_t)hs->size != (int64_t)exp->size) {
        gs__error_explain(GS_ERR_MISMATCH, why, whylen, "world size %" PRIu32 ", expected %d",
                          hs->size, exp->size);
        return GS_TCP_HS_BAD_RANK;
    }
    if (((int64_t)hs->rank < (int64_t)exp->rank_lo) ||
        ((int64_t)hs->rank > (int64_t)exp->rank_hi)) {
        gs__error_explain(GS_ERR_MISMATCH, why, whylen, "rank %" PRIu32 ", expected %d..%d",
                          hs->rank, exp->rank_lo, exp->rank_hi);
        return GS_TCP_HS_BAD_RANK;
    }
    if ((exp->nsocks >= 0) && ((int64_t)hs->nsocks != (int64_t)exp->nsocks)) {
        gs__error_explain(GS_ERR_MISMATCH, why, whylen, "%" PRIu32 " sockets per peer, expected %d",
                          hs->nsocks, exp->nsocks);
        return GS_TCP_HS_BAD_RANK;
    }
    if ((hs->nsocks < 1) || (hs->nsocks > GS_TCP_MAX_SOCKS) || (hs->index >= hs->nsocks)) {
        gs__error_explain(GS_ERR_MISMATCH, why, whylen, "socket index %" PRIu32 " of %" PRIu32,
                          hs->index, hs->nsocks);
        return GS_TCP_HS_BAD_RANK;
    }
    return GS_TCP_HS_OK;
}

const char *gs__tcp_hs_verdict_str(uint32_t verdict)
{
    switch (verdict) {
    case GS_TCP_HS_OK:
        return "accepted";
    case GS_TCP_HS_BAD_VERSION:
        return "protocol versions differ";
    case GS_TCP_HS_BAD_JOB:
        return "job or communicator id differs";
    case GS_TCP_HS_BAD_RANK:
        return "rank, world size or socket count does not fit";
    case GS_TCP_HS_DUPLICATE:
        return "duplicate connection";
    case GS_TCP_HS_AUTH_REQUIRED:
        return "it requires authentication (GS_AUTH_TOKEN) and this rank has no token";
    case GS_TCP_HS_AUTH_UNEXPECTED:
        return "this rank has a GS_AUTH_TOKEN and it has none";
    case GS_TCP_HS_TLS_REQUIRED:
        return "it requires TLS (GS_TLS=1) and this rank does not use it";
    case GS_TCP_HS_TLS_UNEXPECTED:
        return "this rank uses TLS (GS_TLS=1) and it does not";
    case GS_TCP_HS_CROSSED:
        return "it connects to this rank at the same time (its connection is kept)";
    case GS_TCP_HS_CONNECT_DIFFERS:
        return "GS_CONNECT differs between the ranks (lazy on one, eager on the other)";
    default:
        return "unknown verdict";
    }
}

void gs__tcp_frame_encode(const gs__tcp_frame_hdr_t *hdr, uint8_t *buf)
{
    gs__put_le32(buf + FR_OFF_MAGIC, GS_TCP_FRAME_MAGIC);
    buf[FR_OFF_TYPE] = (uint8_t)hdr->type;
    buf[FR_OFF_FLAGS] = (uint8_t)hdr->flags;
    gs__put_le16(buf + FR_OFF_RSVD, 0);
    gs__put_le64(buf + FR_OFF_SEQ, hdr->seq);
    gs__put_le64(buf + FR_OFF_TAG, hdr->tag);
    gs__put_le64(buf + FR_OFF_TOTAL, hdr->total_len);
    gs__put_le64(buf + FR_OFF_OFFSET, hdr->offset);
    gs__put_le64(buf + FR_OFF_CHUNK, hdr->chunk_len);
}

gs_status_t gs__tcp_frame_decode(const uint8_t *buf, size_t len, gs__tcp_frame_hdr_t *out,
                                 char *why, size_t whylen)
{
    gs__tcp_frame_hdr_t h;
    uint32_t magic;

    if (len < GS_TCP_FRAME_HDR_LEN) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "frame header of %zu bytes, expected %d", len,
                                 GS_TCP_FRAME_HDR_LEN);
    }
    magic = gs__get_le32(buf + FR_OFF_MAGIC);
    if (magic != GS_TCP_FRAME_MAGIC) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "bad frame magic 0x%08" PRIx32,
                                 magic);
    }
    h.type = buf[FR_OFF_TYPE];
    if ((h.type != GS_TCP_FRAME_DATA) && (h.type != GS_TCP_FRAME_BYE) &&
        (h.type != GS_TCP_FRAME_SKIP) && (h.type != GS_TCP_FRAME_DOWN) &&
        (h.type != GS_TCP_FRAME_HEARTBEAT) && (h.type != GS_TCP_FRAME_RAIL_DOWN) &&
        (h.type != GS_TCP_FRAME_REVOKE)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "unknown frame type %" PRIu32,
                                 h.type);
    }
    if (gs__get_le16(buf + FR_OFF_RSVD) != 0) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "reserved frame bytes are not zero");
    }
    h.flags = buf[FR_OFF_FLAGS];
    if ((h.flags != 0) && ((h.type != GS_TCP_FRAME_DATA) || (h.flags != GS_TCP_FRAME_F_RESEND))) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "frame flags 0x%02" PRIx32 " on a frame of type %" PRIu32, h.flags,
                                 h.type);
    }
    h.seq = gs__get_le64(buf + FR_OFF_SEQ);
    h.tag = gs__get_le64(buf + FR_OFF_TAG);
    h.total_len = gs__get_le64(buf + FR_OFF_TOTAL);
    h.offset = gs__get_le64(buf + FR_OFF_OFFSET);
    h.chunk_len = gs__get_le64(buf + FR_OFF_CHUNK);
    if (h.type == GS_TCP_FRAME_BYE) {
        if ((h.seq | h.tag | h.total_len | h.offset | h.chunk_len) != 0) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "bye frame with non-zero fields");
        }
    } else if (h.type == GS_TCP_FRAME_HEARTBEAT) {
        if ((h.seq | h.tag | h.total_len | h.offset | h.chunk_len) != 0) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "heartbeat frame with non-zero fields");
        }
    } else if (h.type == GS_TCP_FRAME_SKIP) {
        if ((h.tag | h.total_len | h.offset | h.chunk_len) != 0) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "skip frame with non-zero fields");
        }
    } else if (h.type == GS_TCP_FRAME_RAIL_DOWN) {
        if (((h.seq | h.total_len | h.offset | h.chunk_len) != 0) ||
            (h.tag >= (uint64_t)GS_TCP_MAX_SOCKS)) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "rail-down frame with non-zero fields or rail %" PRIu64,
                                     h.tag);
        }
    } else if ((h.type == GS_TCP_FRAME_DOWN) || (h.type == GS_TCP_FRAME_REVOKE)) {
        const char *what = (h.type == GS_TCP_FRAME_DOWN) ? "down" : "revoke";

        if ((h.seq | h.total_len | h.offset | h.chunk_len) != 0) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "%s frame with non-zero fields",
                                     what);
        }
        if (h.tag > (uint64_t)INT32_MAX) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "%s frame names rank %" PRIu64 ", not a rank", what, h.tag);
        }
    } else {
        if (h.total_len > GS_TCP_MAX_MSG) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "message length %" PRIu64 " exceeds the limit of %llu bytes",
                                     h.total_len, GS_TCP_MAX_MSG);
        }
        /* Both are <= 2^64-1; compare without forming offset + chunk_len. */
        if ((h.offset > h.total_len) || (h.chunk_len > h.total_len - h.offset)) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "chunk [%" PRIu64 ", +%" PRIu64
                                     ") lies outside a message of %" PRIu64 " bytes",
                                     h.offset, h.chunk_len, h.total_len);
        }
        if ((h.chunk_len == 0) && (h.total_len != 0)) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "empty chunk of a message of %" PRIu64 " bytes", h.total_len);
        }
    }
    *out = h;
    return GS_OK;
}

/* Byte offsets of the shared-memory setup record. */
enum {
    SM_OFF_MAGIC = 0,
    SM_OFF_KIND = 4, /* u8 */
    SM_OFF_OK = 5,   /* u8, 0 or 1 */
    SM_OFF_RSVD = 6, /* u16, zero */
    SM_OFF_HOST = 8,
    SM_OFF_RING = 16,
    SM_OFF_NONCE = 24,
    SM_OFF_NAME = 32 /* GS_TCP_SHM_NAME_LEN bytes, NUL-padded */
};

_Static_assert(SM_OFF_NAME + GS_TCP_SHM_NAME_LEN == GS_TCP_SHM_LEN, "shm record layout");

void gs__tcp_shm_encode(const gs__tcp_shm_msg_t *m, uint8_t *buf)
{
    size_t n = strnlen(m->name, GS_TCP_SHM_NAME_LEN - 1);

    gs__put_le32(buf + SM_OFF_MAGIC, GS_TCP_SHM_MAGIC);
    buf[SM_OFF_KIND] = (uint8_t)m->kind;
    buf[SM_OFF_OK] = (uint8_t)(m->ok ? 1 : 0);
    gs__put_le16(buf + SM_OFF_RSVD, 0);
    gs__put_le64(buf + SM_OFF_HOST, m->host_id);
    gs__put_le64(buf + SM_OFF_RING, m->ring_bytes);
    gs__put_le64(buf + SM_OFF_NONCE, m->nonce);
    memset(buf + SM_OFF_NAME, 0, GS_TCP_SHM_NAME_LEN);
    memcpy(buf + SM_OFF_NAME, m->name, n);
}

gs_status_t gs__tcp_shm_decode(const uint8_t *buf, size_t len, gs__tcp_shm_msg_t *out, char *why,
                               size_t whylen)
{
    gs__tcp_shm_msg_t m;
    const uint8_t *name = buf + SM_OFF_NAME;
    size_t n;

    if (len < GS_TCP_SHM_LEN) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "shm record of %zu bytes, expected %d", len, GS_TCP_SHM_LEN);
    }
    if (gs__get_le32(buf + SM_OFF_MAGIC) != GS_TCP_SHM_MAGIC) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "bad shm record magic 0x%08" PRIx32,
                                 gs__get_le32(buf + SM_OFF_MAGIC));
    }
    memset(&m, 0, sizeof(m));
    m.kind = buf[SM_OFF_KIND];
    if ((m.kind < GS_TCP_SHM_OFFER) || (m.kind > GS_TCP_SHM_MAPPED)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "unknown shm record kind %" PRIu32,
                                 m.kind);
    }
    if ((buf[SM_OFF_OK] > 1) || (gs__get_le16(buf + SM_OFF_RSVD) != 0)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "bad shm record flags");
    }
    m.ok = (buf[SM_OFF_OK] == 1);
    m.host_id = gs__get_le64(buf + SM_OFF_HOST);
    m.ring_bytes = gs__get_le64(buf + SM_OFF_RING);
    m.nonce = gs__get_le64(buf + SM_OFF_NONCE);
    n = strnlen((const char *)name, GS_TCP_SHM_NAME_LEN);
    if (n == GS_TCP_SHM_NAME_LEN) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "shm segment name is not NUL-terminated");
    }
    for (size_t i = n; i < GS_TCP_SHM_NAME_LEN; i++) {
        if (name[i] != 0) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "bytes after the shm segment name");
        }
    }
    memcpy(m.name, name, GS_TCP_SHM_NAME_LEN); /* NUL-padded, checked above */
    if ((m.kind == GS_TCP_SHM_CREATE) && m.ok && (n == 0)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "shm create record without a name");
    }
    if (((m.kind != GS_TCP_SHM_CREATE) || !m.ok) && (n != 0)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "shm record with an unexpected name");
    }
    if ((m.kind != GS_TCP_SHM_MAPPED) && m.ok &&
        ((m.ring_bytes < GS_TCP_SHM_MIN_RING) || (m.ring_bytes > GS_TCP_SHM_MAX_RING))) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "shm ring of %" PRIu64 " bytes, expected %llu..%llu", m.ring_bytes,
                                 GS_TCP_SHM_MIN_RING, GS_TCP_SHM_MAX_RING);
    }
    *out = m;
    return GS_OK;
}

void gs__tcp_frame_mark_resend(uint8_t *buf)
{
    buf[FR_OFF_FLAGS] = (uint8_t)GS_TCP_FRAME_F_RESEND;
}

uint32_t gs__tcp_frame_type(const uint8_t *buf)
{
    return buf[FR_OFF_TYPE];
}

unsigned gs__tcp_granules(uint64_t total, bool stripe)
{
    uint64_t g;

    if (!stripe || (total < GS_TCP_STRIPE_MIN)) {
        return 1u;
    }
    g = total / GS_TCP_GRANULE_MIN;
    return (g > GS_TCP_GRANULES_MAX) ? GS_TCP_GRANULES_MAX : (unsigned)g;
}

void gs__tcp_granule_span(uint64_t total, unsigned g, unsigned first, unsigned count,
                          uint64_t *offset_out, uint64_t *len_out)
{
    const uint64_t step = total / g;
    const uint64_t end = (first + count >= g) ? total : step * (first + count);

    *offset_out = step * first;
    *len_out = end - step * first;
}

bool gs__tcp_granule_run(uint64_t total, unsigned g, uint64_t offset, uint64_t len,
                         unsigned *first_out, unsigned *count_out)
{
    uint64_t step;
    uint64_t first;
    uint64_t end;

    if ((g == 0) || (g > GS_TCP_GRANULES_MAX) || (len > total) || (offset > total - len)) {
        return false;
    }
    if (g == 1) {
        if ((offset != 0) || (len != total)) {
            return false;
        }
        *first_out = 0;
        *count_out = 1;
        return true;
    }
    step = total / g; /* >= GS_TCP_GRANULE_MIN: g > 1 only for totals that large */
    if ((step == 0) || (len == 0) || ((offset % step) != 0)) {
        return false;
    }
    first = offset / step;
    end = offset + len;
    if (first >= g) {
        return false;
    }
    if (end == total) {
        *count_out = (unsigned)(g - first);
    } else if (((end % step) != 0) || ((end / step) >= g)) {
        return false;
    } else {
        *count_out = (unsigned)(end / step - first);
    }
    *first_out = (unsigned)first;
    return true;
}
