/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Encode, decode and check the parameter server's control messages
 * (ps_wire.h). Pure: the unit tests and any fuzzer link this file alone
 * with core/error.c. Every multi-byte field is little-endian, written and
 * read byte by byte with core/le.h, so the layout does not depend on the
 * host or on struct padding.
 */
#include "ps/ps_wire.h"

#include <string.h>

#include "core/error.h"
#include "core/le.h"
#include "gradsync/compress.h"

const char *gs__ps_msg_type_name(unsigned type)
{
    switch (type) {
    case GS_PS_MSG_PUSH:
        return "push";
    case GS_PS_MSG_PULL:
        return "pull";
    case GS_PS_MSG_CLOCK:
        return "clock";
    case GS_PS_MSG_HEARTBEAT:
        return "heartbeat";
    case GS_PS_MSG_BYE:
        return "bye";
    case GS_PS_MSG_ACK:
        return "ack";
    case GS_PS_MSG_REPLY:
        return "reply";
    case GS_PS_MSG_CTS:
        return "clear-to-send";
    default:
        return "?";
    }
}

void gs__ps_msg_encode(const gs__ps_msg_t *m, uint8_t *out)
{
    size_t tlen = strnlen(m->text, GS_PS_MSG_TEXT_MAX - 1);

    memset(out, 0, GS_PS_MSG_BYTES);
    gs__put_le32(out + 0, GS_PS_WIRE_MAGIC);
    out[4] = (uint8_t)GS_PS_WIRE_VERSION;
    out[5] = m->type;
    out[6] = m->dtype;
    out[7] = m->flags;
    gs__put_le32(out + 8, (uint32_t)m->src);
    gs__put_le32(out + 12, m->seq & GS_PS_SEQ_MASK);
    gs__put_le64(out + 16, m->key);
    gs__put_le32(out + 24, m->shard);
    gs__put_le32(out + 28, (uint32_t)m->status);
    gs__put_le64(out + 32, m->offset);
    gs__put_le64(out + 40, m->count);
    gs__put_le64(out + 48, m->nbytes);
    gs__put_le64(out + 56, (uint64_t)m->clock);
    memcpy(out + GS_PS_MSG_TEXT_OFF, m->text, tlen);
}

/* A status a server may report: GS_OK or a code of the published table. */
static int status_known(int32_t s)
{
    switch (s) {
#define GS_PS_STATUS_CASE(_name, _value, _msg) case (_value):
        GS_STATUS_MAP(GS_PS_STATUS_CASE)
#undef GS_PS_STATUS_CASE
        return s != GS_INPROGRESS;
    default:
        return 0;
    }
}

gs_status_t gs__ps_msg_decode(const uint8_t *buf, size_t len, int nranks, gs__ps_msg_t *m,
                              char *why, size_t whylen)
{
    const char *name;
    uint32_t magic;
    uint32_t version;

    if ((buf == NULL) || (len != GS_PS_MSG_BYTES)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "control message of %zu bytes (expected %u)", len,
                                 GS_PS_MSG_BYTES);
    }
    magic = gs__get_le32(buf);
    version = buf[4];
    if (magic != GS_PS_WIRE_MAGIC) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "bad magic 0x%08x (not a parameter server message)", magic);
    }
    if (version != GS_PS_WIRE_VERSION) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "wire version %u (this library speaks %u)", version,
                                 GS_PS_WIRE_VERSION);
    }
    memset(m, 0, sizeof(*m));
    m->type = buf[5];
    m->dtype = buf[6];
    m->flags = buf[7];
    m->src = (int32_t)gs__get_le32(buf + 8);
    m->seq = gs__get_le32(buf + 12);
    m->key = gs__get_le64(buf + 16);
    m->shard = gs__get_le32(buf + 24);
    m->status = (int32_t)gs__get_le32(buf + 28);
    m->offset = gs__get_le64(buf + 32);
    m->count = gs__get_le64(buf + 40);
    m->nbytes = gs__get_le64(buf + 48);
    m->clock = (int64_t)gs__get_le64(buf + 56);
    name = gs__ps_msg_type_name(m->type);

    if ((m->type < GS_PS_MSG_PUSH) || (m->type > GS_PS_MSG_CTS)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "unknown message type %u",
                                 (unsigned)m->type);
    }
    if ((m->src < 0) || (m->src >= nranks)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "%s message from rank %d of a %d-rank communicator", name,
                                 (int)m->src, nranks);
    }
    if ((m->flags & ~GS_PS_MSGF_ALL) != 0) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "%s message with unknown flags 0x%02x", name, (unsigned)m->flags);
    }
    if ((m->seq & ~GS_PS_SEQ_MASK) != 0) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "%s message with sequence number 0x%08x beyond 28 bits", name,
                                 (unsigned)m->seq);
    }
    if (memchr(buf + GS_PS_MSG_TEXT_OFF, '\0', GS_PS_MSG_TEXT_MAX) == NULL) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "%s message whose text is not NUL-terminated", name);
    }
    memcpy(m->text, buf + GS_PS_MSG_TEXT_OFF, GS_PS_MSG_TEXT_MAX);

    switch (m->type) {
    case GS_PS_MSG_HEARTBEAT:
    case GS_PS_MSG_BYE:
        if ((m->key | m->offset | m->count | m->nbytes | m->shard | m->seq | m->flags | m->dtype) !=
                0 ||
            (m->clock != 0) || (m->status != 0) || (m->text[0] != '\0')) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "%s message with non-zero fields", name);
        }
        return GS_OK;
    case GS_PS_MSG_CLOCK:
        if ((m->key | m->offset | m->count | m->nbytes | m->shard | m->flags | m->dtype) != 0 ||
            (m->status != 0) || (m->text[0] != '\0')) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "clock message with non-zero fields");
        }
        if (m->clock < 1) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "clock message with clock %lld (must be >= 1)",
                                     (long long)m->clock);
        }
        return GS_OK;
    default:
        break;
    }
    /* push, pull, ack, reply: a key's shard */
    if (m->dtype >= (uint8_t)GS_DTYPE_COUNT) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "%s message with dtype %u", name,
                                 (unsigned)m->dtype);
    }
    if ((m->count == 0) || (m->offset > UINT64_MAX - m->count)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "%s message with %llu elements at offset %llu", name,
                                 (unsigned long long)m->count, (unsigned long long)m->offset);
    }
    if (m->clock < 0) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "%s message with clock %lld", name,
                                 (long long)m->clock);
    }
    if ((m->type == GS_PS_MSG_PUSH) || (m->type == GS_PS_MSG_PULL)) {
        if ((m->status != 0) || (m->text[0] != '\0')) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "%s request carrying a status or text", name);
        }
        if ((m->type == GS_PS_MSG_PUSH) && ((m->flags & GS_PS_MSGF_PUSHED) != 0)) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "push with the pull-only flag");
        }
        if ((m->type == GS_PS_MSG_PULL) && ((m->flags & ~GS_PS_MSGF_PUSHED) != 0)) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "pull with a push-only flag");
        }
        return GS_OK;
    }
    if (m->type == GS_PS_MSG_CTS) {
        if ((m->flags != 0) || (m->status != 0) || (m->text[0] != '\0')) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "clear-to-send carrying flags, a status or text");
        }
        return GS_OK;
    }
    /* ack, reply */
    if (m->flags != 0) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "%s message with flags 0x%02x", name,
                                 (unsigned)m->flags);
    }
    if (!status_known(m->status)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "%s message with status %d", name,
                                 (int)m->status);
    }
    if ((m->status == GS_OK) != (m->text[0] == '\0')) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "%s message whose status and text disagree", name);
    }
    return GS_OK;
}

gs_status_t gs__ps_msg_check_shard(const gs__ps_msg_t *m, const gs__ps_shard_expect_t *e, char *why,
                                   size_t whylen)
{
    const char *name = gs__ps_msg_type_name(m->type);

    if ((m->type == GS_PS_MSG_PUSH) &&
        (((m->flags & GS_PS_MSGF_RNDV) != 0) != (m->nbytes > GS_PS_EAGER_BYTES))) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "push of key %llu with %llu bytes %s the clear-to-send flag",
                                 (unsigned long long)m->key, (unsigned long long)m->nbytes,
                                 ((m->flags & GS_PS_MSGF_RNDV) != 0) ? "with" : "without");
    }
    if ((m->offset != e->offset) || (m->count != e->count)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "%s of key %llu shard %u names elements [%llu, +%llu) but the "
                                 "shard is [%llu, +%llu)",
                                 name, (unsigned long long)m->key, (unsigned)m->shard,
                                 (unsigned long long)m->offset, (unsigned long long)m->count,
                                 (unsigned long long)e->offset, (unsigned long long)e->count);
    }
    if (m->dtype != (uint8_t)e->dtype) {
        return gs__error_explain(
            GS_ERR_PROTOCOL, why, whylen, "%s of key %llu with dtype %u but the key has dtype %u",
            name, (unsigned long long)m->key, (unsigned)m->dtype, (unsigned)e->dtype);
    }
    if ((m->type == GS_PS_MSG_PUSH) && ((m->flags & GS_PS_MSGF_COMPRESSED) != 0)) {
        if (e->max_encoded == 0) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "compressed push of key %llu but this server has no codec",
                                     (unsigned long long)m->key);
        }
        if ((m->nbytes < GS_CODEC_HEADER_BYTES) || (m->nbytes > e->max_encoded)) {
            return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                     "compressed push of key %llu shard %u of %llu bytes (the "
                                     "codec gives %u to %zu)",
                                     (unsigned long long)m->key, (unsigned)m->shard,
                                     (unsigned long long)m->nbytes, GS_CODEC_HEADER_BYTES,
                                     e->max_encoded);
        }
        return GS_OK;
    }
    if (m->nbytes != e->value_bytes) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "%s of key %llu shard %u with %llu bytes (the shard has %zu)",
                                 name, (unsigned long long)m->key, (unsigned)m->shard,
                                 (unsigned long long)m->nbytes, e->value_bytes);
    }
    return GS_OK;
}
