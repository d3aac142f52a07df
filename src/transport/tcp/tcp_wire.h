/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP transport's wire format: the connection handshake and the frame
 * header that precedes every chunk of every message. Pure encode/decode over
 * byte spans, every field little-endian and written one by one (never a
 * struct copied to the wire). No I/O, no allocation, no logging: the
 * decoders only say why bytes were rejected, in a caller buffer, and the
 * caller decides what to log and whom to fail. docs/wire.md has the layouts
 * with byte offsets; this file and that page must agree.
 */
#ifndef GS_TRANSPORT_TCP_TCP_WIRE_H
#define GS_TRANSPORT_TCP_TCP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gradsync/status.h"

/* Protocol version carried in every handshake. Bump on any layout change.
 * 2: adds the DOWN frame. 3: handshake flags (shared-memory offer) and the
 * shared-memory setup records. 4: authentication (nonce and MAC fields, the
 * PROOF message, the AUTH verdicts). 5: the HEARTBEAT frame. 6: the TLS
 * verdicts (with GS_TLS the handshake itself runs inside TLS 1.3). 7: lazy
 * connections (the LAZY flag, the CROSSED and CONNECT_DIFFERS verdicts;
 * either rank of a pair may connect) and no OFFER record (a pair shares
 * memory when the bootstrap's host ids match). 8: multi-rail (the granule
 * plan, the RAIL_DOWN frame and the RESEND flag; a pair's socket count is
 * its paired rails times GS_TCP_NSOCKS). 9: the REVOKE frame (gs_comm_revoke). */
#define GS_TCP_PROTO_VERSION 9u

/* "GSHS" and "GSFR" as bytes on the wire. */
#define GS_TCP_HS_MAGIC 0x53485347u
#define GS_TCP_FRAME_MAGIC 0x52465347u

#define GS_TCP_HS_LEN 96
#define GS_TCP_FRAME_HDR_LEN 48

/* Largest message the wire accepts (16 TiB). A bigger total is hostile. */
#define GS_TCP_MAX_MSG (1ull << 44)
/* Most sockets per peer a handshake may announce. */
#define GS_TCP_MAX_SOCKS 16
/* Messages at least this long are striped over all sockets of the peer. */
#define GS_TCP_STRIPE_MIN (64u * 1024u)
/* The granule plan: at most this many granules, each at least this long. */
#define GS_TCP_GRANULES_MAX 64u
#define GS_TCP_GRANULE_MIN (4u * 1024u)

/* Handshake flags. */
#define GS_TCP_HS_F_SHM 1u  /* socket 0: this side would carry the pair's frames in shared memory */
#define GS_TCP_HS_F_AUTH 2u /* this side has a token (core/auth.h): nonce (and MAC) are set */
#define GS_TCP_HS_F_LAZY 4u /* this side connects on first use (GS_CONNECT=lazy) */
#define GS_TCP_HS_F_KNOWN (GS_TCP_HS_F_SHM | GS_TCP_HS_F_AUTH | GS_TCP_HS_F_LAZY)

/*
 * Handshake kinds. Without a token: HELLO (connector), ACK (acceptor). With
 * one on both sides (core/auth.h): HELLO carries Nc, ACK carries Na and
 * MAC_A, and the connector, having checked MAC_A, sends PROOF with MAC_C;
 * the acceptor reads no frame before PROOF checks out.
 */
#define GS_TCP_HS_HELLO 1u
#define GS_TCP_HS_ACK 2u
#define GS_TCP_HS_PROOF 3u
/* The domain of the transport's MACs. */
#define GS_TCP_AUTH_DOMAIN "tcp"

/* Handshake verdicts, carried by an ACK (HELLO carries OK). */
typedef enum gs__tcp_hs_verdict {
    GS_TCP_HS_OK = 0,
    GS_TCP_HS_BAD_VERSION = 1,     /* protocol versions differ */
    GS_TCP_HS_BAD_JOB = 2,         /* job id or communicator id differ */
    GS_TCP_HS_BAD_RANK = 3,        /* rank, world size, socket index or nsocks wrong */
    GS_TCP_HS_DUPLICATE = 4,       /* that (rank, socket index) is already connected */
    GS_TCP_HS_AUTH_REQUIRED = 5,   /* the acceptor has a token, the HELLO did not */
    GS_TCP_HS_AUTH_UNEXPECTED = 6, /* the HELLO offered authentication, the acceptor has no token */
    GS_TCP_HS_TLS_REQUIRED = 7,    /* the acceptor uses TLS, the connector sent a plain HELLO */
    GS_TCP_HS_TLS_UNEXPECTED = 8,  /* the connector started TLS, the acceptor does not use it */
    GS_TCP_HS_CROSSED = 9,         /* both connect at once: the higher rank's sockets are kept */
    GS_TCP_HS_CONNECT_DIFFERS = 10, /* one side connects lazily, the other eagerly (GS_CONNECT) */
    GS_TCP_HS_VERDICT_MAX = 10
} gs__tcp_hs_verdict_t;

/* Frame types. */
#define GS_TCP_FRAME_DATA 1u      /* a chunk of a message */
#define GS_TCP_FRAME_BYE 2u       /* the sender is leaving; no frame follows on this socket */
#define GS_TCP_FRAME_SKIP 3u      /* message seq was cancelled before any byte was sent */
#define GS_TCP_FRAME_DOWN 4u      /* rank `tag` failed (control frame: takes no sequence number) */
#define GS_TCP_FRAME_HEARTBEAT 5u /* the sender is alive (control frame, every field zero) */
#define GS_TCP_FRAME_RAIL_DOWN                                                                     \
    6u                         /* the pair's rail `tag` failed (control frame, other fields zero) */
#define GS_TCP_FRAME_REVOKE 7u /* rank `tag` revoked the communicator (control frame) */

/* Frame flags (DATA only). */
#define GS_TCP_FRAME_F_RESEND 1u /* sent again after its rail failed: may repeat granules */

/* A decoded handshake (HELLO from the connecting side, ACK in reply). */
typedef struct gs__tcp_hs {
    uint32_t version;
    uint32_t kind;    /* GS_TCP_HS_HELLO or GS_TCP_HS_ACK */
    uint32_t verdict; /* gs__tcp_hs_verdict_t; 0 in a HELLO */
    uint64_t job_id;
    uint64_t comm_id;
    uint32_t rank;  /* the sender's rank */
    uint32_t size;  /* the sender's world size */
    uint32_t index; /* socket index within the pair, < nsocks */
    uint32_t nsocks;
    uint32_t flags;    /* GS_TCP_HS_F_* */
    uint8_t nonce[16]; /* F_AUTH: HELLO Nc, ACK Na (else zero) */
    uint8_t mac[32];   /* F_AUTH: ACK MAC_A, PROOF MAC_C (else zero) */
} gs__tcp_hs_t;

/* What the accepting side expects of a HELLO (and the connector of an ACK). */
typedef struct gs__tcp_hs_expect {
    uint64_t job_id;
    uint64_t comm_id;
    int size;
    int nsocks;  /* -1: any of 1..GS_TCP_MAX_SOCKS (the caller checks the pair's) */
    int rank_lo; /* the sender's rank must lie in [rank_lo, rank_hi] */
    int rank_hi;
} gs__tcp_hs_expect_t;

/* A decoded frame header. */
typedef struct gs__tcp_frame_hdr {
    uint32_t type;  /* GS_TCP_FRAME_* */
    uint32_t flags; /* GS_TCP_FRAME_F_* (DATA only) */
    uint64_t seq;   /* per (sender, receiver) message number, from 0 */
    uint64_t tag;
    uint64_t total_len; /* length of the whole message */
    uint64_t offset;    /* where this chunk starts in the message */
    uint64_t chunk_len; /* payload bytes that follow this header */
} gs__tcp_frame_hdr_t;

/*
 * Shared-memory setup records, exchanged on socket 0 right after the
 * handshakes of a pair whose HELLO and ACK both carried GS_TCP_HS_F_SHM
 * (tcp_pipe_shm.c): both send OFFER (host id, ring size); when the host ids
 * match, the lower rank answers CREATE (ok and the segment name, or not ok
 * when it could not make one) and the higher one MAPPED (ok or not).
 */
#define GS_TCP_SHM_MAGIC 0x4d534347u /* "GCSM" */
#define GS_TCP_SHM_LEN 96
#define GS_TCP_SHM_NAME_LEN 64
#define GS_TCP_SHM_MIN_RING 1024ull
#define GS_TCP_SHM_MAX_RING (1ull << 30)
#define GS_TCP_SHM_OFFER 1u
#define GS_TCP_SHM_CREATE 2u
#define GS_TCP_SHM_MAPPED 3u

typedef struct gs__tcp_shm_msg {
    uint32_t kind;       /* GS_TCP_SHM_* */
    bool ok;             /* OFFER: wants shm; CREATE: segment made; MAPPED: segment mapped */
    uint64_t host_id;    /* OFFER */
    uint64_t ring_bytes; /* OFFER, CREATE: bytes per direction */
    uint64_t nonce;      /* CREATE: the segment header's nonce */
    char name[GS_TCP_SHM_NAME_LEN]; /* CREATE with ok: the segment name, else empty */
} gs__tcp_shm_msg_t;

/* Write a setup record into buf[GS_TCP_SHM_LEN]. Never fails. */
void gs__tcp_shm_encode(const gs__tcp_shm_msg_t *m, uint8_t *buf);

/* Decode and validate a setup record: magic, known kind, ok 0/1, zero
 * reserved bytes, a NUL-terminated, zero-padded name present exactly in an
 * ok CREATE, and ring_bytes within GS_TCP_SHM_MIN_RING..MAX_RING in an ok
 * OFFER or CREATE. Whether the name is a safe segment name is the caller's
 * check. Returns GS_OK or GS_ERR_PROTOCOL with a reason in why[whylen]. */
gs_status_t gs__tcp_shm_decode(const uint8_t *buf, size_t len, gs__tcp_shm_msg_t *out, char *why,
                               size_t whylen);

/* Write a handshake into buf[GS_TCP_HS_LEN]. Never fails. */
void gs__tcp_hs_encode(const gs__tcp_hs_t *hs, uint8_t *buf);

/* Decode len bytes. Returns GS_OK, GS_ERR_PROTOCOL (short, bad magic, unknown
 * kind or verdict, unknown flags) or GS_ERR_VERSION_MISMATCH (our magic,
 * another protocol version; *out is still filled). Writes a reason into
 * why[whylen] on failure (may be NULL). */
gs_status_t gs__tcp_hs_decode(const uint8_t *buf, size_t len, gs__tcp_hs_t *out, char *why,
                              size_t whylen);

/* Check a decoded handshake against what we expect. Returns the verdict
 * (GS_TCP_HS_OK when it passes) and a reason in why[whylen]. */
gs__tcp_hs_verdict_t gs__tcp_hs_check(const gs__tcp_hs_t *hs, const gs__tcp_hs_expect_t *exp,
                                      char *why, size_t whylen);

/* One-line text for a verdict ("job or communicator id differs"). */
const char *gs__tcp_hs_verdict_str(uint32_t verdict);

/* Write a frame header into buf[GS_TCP_FRAME_HDR_LEN]. Never fails. */
void gs__tcp_frame_encode(const gs__tcp_frame_hdr_t *hdr, uint8_t *buf);

/*
 * The granule plan (docs/wire.md, "Messages, chunks and order"): a DATA
 * message of `total` bytes is cut into g = gs__tcp_granules() granules,
 * granule i starting at i * (total / g), each total / g long but the last,
 * which takes the rest. Every DATA frame carries a run of whole granules,
 * and each granule arrives once (the receiver keeps a bit per granule,
 * tcp_rx.c), so the sender may cut the runs as its rails' rates say. Both
 * sides call these, so they cannot drift apart. Pure.
 */

/* How many granules a message of @p total bytes is cut into: 1 unless
 * @p stripe (the pair has several sockets and no shared-memory link, whose
 * frames all take socket 0's ring) and total >= GS_TCP_STRIPE_MIN; then
 * min(GS_TCP_GRANULES_MAX, total / GS_TCP_GRANULE_MIN). */
unsigned gs__tcp_granules(uint64_t total, bool stripe);

/* Where the run of @p count granules from @p first starts in a message of
 * @p total bytes cut into @p g granules, and how long it is. */
void gs__tcp_granule_span(uint64_t total, unsigned g, unsigned first, unsigned count,
                          uint64_t *offset_out, uint64_t *len_out);

/* Which run of whole granules the chunk [offset, offset + len) is. Returns
 * true with *first_out and *count_out (>= 1) set, or false when it is not
 * one (a hostile or broken sender). */
bool gs__tcp_granule_run(uint64_t total, unsigned g, uint64_t offset, uint64_t len,
                         unsigned *first_out, unsigned *count_out);

/* The bits of a run in a 64-bit granule mask. */
static inline uint64_t gs__tcp_granule_mask(unsigned first, unsigned count)
{
    return ((count >= 64u) ? ~0ull : ((1ull << count) - 1u)) << first;
}

/* Set the RESEND flag of an encoded DATA frame header. */
void gs__tcp_frame_mark_resend(uint8_t *buf);
/* The type of an encoded frame header (not validated). */
uint32_t gs__tcp_frame_type(const uint8_t *buf);

/* Decode and validate a frame header: magic, known type, zero reserved bytes,
 * total_len <= GS_TCP_MAX_MSG, offset + chunk_len <= total_len without
 * overflow, chunk_len > 0 unless total_len == 0, all-zero fields for BYE
 * and HEARTBEAT, and for SKIP (but seq), and for DOWN zero seq/total/offset/chunk with a tag
 * (the failed rank) <= INT32_MAX, for RAIL_DOWN a tag (the rail) below
 * GS_TCP_MAX_SOCKS and every other field zero, flags only RESEND and only on DATA; whether that rank exists and is not the
 * receiver is the caller's check. Returns GS_OK or GS_ERR_PROTOCOL with a
 * reason in why[whylen]. */
gs_status_t gs__tcp_frame_decode(const uint8_t *buf, size_t len, gs__tcp_frame_hdr_t *out,
                                 char *why, size_t whylen);

#endif /* GS_TRANSPORT_TCP_TCP_WIRE_H */
