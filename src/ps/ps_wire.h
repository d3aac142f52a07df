/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The parameter server's wire format: one fixed-size control message
 * (GS_PS_MSG_BYTES, little-endian, magic and version first) and the tags
 * that pair it with its payloads on the parameter server's private
 * communicator. Pure encode, decode and validation over byte spans: no I/O,
 * no allocation, no knowledge of threads. Bytes from the network are
 * hostile: decoding checks every field, and gs__ps_msg_check_shard() checks
 * a request against what the receiving server knows about the shard;
 * failures are GS_ERR_PROTOCOL with the reason in @p why.
 *
 * Messages (docs/async.md, "Parameter server", has the layout):
 *   PUSH      worker -> server, tag CTRL; a payload of at most
 *             GS_PS_EAGER_BYTES follows at once as one message, tag
 *             PUSH_DATA(seq); a larger one (flag RNDV) waits for the CTS
 *   CTS       server -> worker, tag CTRL: the payload's receive is posted,
 *             send it (one message, tag PUSH_DATA(seq)) straight into place
 *   PULL      worker -> server, tag CTRL
 *   CLOCK     worker -> every server, tag CTRL (clock = the new clock)
 *   HEARTBEAT every rank -> every rank, tag CTRL (keeps the any-source
 *             receive of an idle rank inside its deadline)
 *   BYE       every rank -> every rank, tag CTRL (gs_ps_destroy)
 *   ACK       server -> worker, tag CTRL: a push was taken
 *   REPLY     server -> worker, tag CTRL; then the shard's values as one
 *             message, tag PULL_DATA(seq), always (also on error); the
 *             worker posted that receive before sending its PULL
 */
#ifndef GS_PS_WIRE_H
#define GS_PS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/status.h"
#include "gradsync/types.h"

#define GS_PS_WIRE_MAGIC 0x53505347u /* "GSPS" as little-endian bytes */
#define GS_PS_WIRE_VERSION 1u
#define GS_PS_MSG_BYTES 256u
#define GS_PS_MSG_TEXT_OFF 64u
#define GS_PS_MSG_TEXT_MAX (GS_PS_MSG_BYTES - GS_PS_MSG_TEXT_OFF)

/* Push payloads up to this size follow their header at once (and may
 * arrive before the server posts their receive: a small copy); larger ones
 * wait for the server's CTS, so that they land in place, never held as an
 * unexpected message and copied twice. */
#define GS_PS_EAGER_BYTES ((size_t)64 << 10)

/* Message types; values are on the wire. */
typedef enum gs__ps_msg_type {
    GS_PS_MSG_PUSH = 1,
    GS_PS_MSG_PULL = 2,
    GS_PS_MSG_CLOCK = 3,
    GS_PS_MSG_HEARTBEAT = 4,
    GS_PS_MSG_BYE = 5,
    GS_PS_MSG_ACK = 6,
    GS_PS_MSG_REPLY = 7,
    GS_PS_MSG_CTS = 8
} gs__ps_msg_type_t;

/* Flags (on the wire). */
#define GS_PS_MSGF_COMPRESSED 0x01u /* PUSH: the payload is a codec payload */
#define GS_PS_MSGF_PUSHED 0x02u     /* PULL: the worker pushed this key in its clock */
#define GS_PS_MSGF_RNDV 0x04u       /* PUSH: the payload waits for a CTS */
#define GS_PS_MSGF_ALL (GS_PS_MSGF_COMPRESSED | GS_PS_MSGF_PUSHED | GS_PS_MSGF_RNDV)

/* Tags on the private communicator: [kind:4][seq:28]. */
#define GS_PS_TAG_KIND_CTRL 1u
#define GS_PS_TAG_KIND_PUSH_DATA 2u
#define GS_PS_TAG_KIND_PULL_DATA 3u
#define GS_PS_SEQ_MASK 0x0fffffffu

static inline uint32_t gs__ps_tag(uint32_t kind, uint32_t seq)
{
    return (kind << 28) | (seq & GS_PS_SEQ_MASK);
}

/* The decoded form. Offsets in the comments are the wire layout. */
typedef struct gs__ps_msg {
    uint8_t type;                  /* 5: gs__ps_msg_type_t (0: magic u32, 4: version u8) */
    uint8_t dtype;                 /* 6: gs_dtype_t of the key */
    uint8_t flags;                 /* 7: GS_PS_MSGF_* */
    int32_t src;                   /* 8: sender's rank */
    uint32_t seq;                  /* 12: the worker's request number (28 bits used) */
    uint64_t key;                  /* 16 */
    uint32_t shard;                /* 24: shard index within the key */
    int32_t status;                /* 28: ACK / REPLY: gs_status_t */
    uint64_t offset;               /* 32: first element of the shard */
    uint64_t count;                /* 40: elements of the shard */
    uint64_t nbytes;               /* 48: PUSH: payload bytes; PULL / REPLY: value bytes */
    int64_t clock;                 /* 56: PUSH / PULL: the worker's clock; CLOCK: the new clock;
                                      ACK / REPLY: the round or clock the server served */
    char text[GS_PS_MSG_TEXT_MAX]; /* 64: NUL-terminated sentence (ACK / REPLY errors) */
} gs__ps_msg_t;

/* Write @p m into @p out (GS_PS_MSG_BYTES). The text is truncated to fit
 * and always NUL-terminated; unused text bytes are zero. */
void gs__ps_msg_encode(const gs__ps_msg_t *m, uint8_t *out);

/*
 * Decode @p len bytes into *m. Checks the length, magic, version, type,
 * flags, dtype, the sender rank against @p nranks, the NUL-terminated text,
 * and the fields each type must or must not carry.
 * Returns GS_OK, or GS_ERR_PROTOCOL with the reason in @p why (*m is then
 * unspecified).
 */
gs_status_t gs__ps_msg_decode(const uint8_t *buf, size_t len, int nranks, gs__ps_msg_t *m,
                              char *why, size_t whylen);

/* What a server knows about one of its shards, to check a request by. */
typedef struct gs__ps_shard_expect {
    uint64_t offset;
    uint64_t count;
    gs_dtype_t dtype;
    size_t value_bytes; /* count x element size */
    size_t max_encoded; /* largest codec payload for the shard; 0 without a codec */
} gs__ps_shard_expect_t;

/*
 * Check a decoded PUSH, PULL or CTS against the shard it names: offset,
 * count, dtype, payload size (exactly value_bytes, or for a compressed push
 * GS_CODEC_HEADER_BYTES .. max_encoded) and the flags (a push carries RNDV
 * exactly when its payload is larger than GS_PS_EAGER_BYTES).
 * Returns GS_OK or GS_ERR_PROTOCOL with the reason in @p why.
 */
gs_status_t gs__ps_msg_check_shard(const gs__ps_msg_t *m, const gs__ps_shard_expect_t *e, char *why,
                                   size_t whylen);

/* Name of a message type for error text ("push", "pull", ...); "?" when unknown. */
const char *gs__ps_msg_type_name(unsigned type);

#endif /* GS_PS_WIRE_H */
