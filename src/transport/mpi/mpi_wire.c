/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MPI transport's message header: encode, decode and validation over
 * byte spans, no MPI calls (the pure part of the protocol).
 *
 * Why a header of our own: gradsync tags are 64 bits with a 49-bit match
 * part and 15 check bits (transport.h), MPI tags are only guaranteed up to
 * 32767, and the matching rules (mismatch and truncation detected before the
 * buffer is written, unexpected messages kept) need the full tag and length
 * before a message is received. So every message starts with a 32-byte
 * header on MPI tag GS_MPI_TAG_HDR, and mpi_match.c does the matching:
 *
 *   header  (MPI tag 1): u32 magic "GSMP", u16 version, u16 flags,
 *                        u64 tag, u64 len, u32 seq, u32 nchunks   (little endian)
 *   inline  (flag 1):    the payload follows the header in the same message
 *                        (len <= MPI_INLINE_MAX; one copy at each end)
 *   chunks  (MPI tag 2): otherwise the payload follows as nchunks messages of
 *                        at most 1 GiB (MPI counts are int), sent straight
 *                        from the user's buffer
 *
 * Header bytes come from the network: every field is checked before use
 * and a bad one is GS_ERR_PROTOCOL, never an assertion.
 */
#include "transport/mpi/mpi_internal.h"

#include <stdio.h>

#include "core/le.h"

void gs__mpi_hdr_encode(unsigned char *p, const mpi_hdr_t *h)
{
    gs__put_le32(p, MPI_HDR_MAGIC);
    gs__put_le16(p + 4, MPI_HDR_VERSION);
    gs__put_le16(p + 6, h->flags);
    gs__put_le64(p + 8, h->tag);
    gs__put_le64(p + 16, h->len);
    gs__put_le32(p + 24, h->seq);
    gs__put_le32(p + 28, h->nchunks);
}

/* Decode and validate @p count bytes from a peer. Returns GS_OK or
 * GS_ERR_PROTOCOL with @p why filled. */
gs_status_t gs__mpi_hdr_decode(const unsigned char *p, int count, uint32_t expect_seq, mpi_hdr_t *h,
                               char *why, size_t whylen)
{
    if (count < MPI_HDR_BYTES) {
        (void)snprintf(why, whylen, "a %d-byte header", count);
        return GS_ERR_PROTOCOL;
    }
    if (gs__get_le32(p) != MPI_HDR_MAGIC) {
        (void)snprintf(why, whylen, "bad magic 0x%08x", (unsigned)gs__get_le32(p));
        return GS_ERR_PROTOCOL;
    }
    if (gs__get_le16(p + 4) != MPI_HDR_VERSION) {
        (void)snprintf(why, whylen, "header version %u, expected %u", (unsigned)gs__get_le16(p + 4),
                       (unsigned)MPI_HDR_VERSION);
        return GS_ERR_PROTOCOL;
    }
    h->flags = (uint16_t)gs__get_le16(p + 6);
    h->tag = gs__get_le64(p + 8);
    h->len = gs__get_le64(p + 16);
    h->seq = gs__get_le32(p + 24);
    h->nchunks = gs__get_le32(p + 28);
    if ((h->flags & ~MPI_FLAG_INLINE) != 0) {
        (void)snprintf(why, whylen, "unknown flags 0x%x", (unsigned)h->flags);
        return GS_ERR_PROTOCOL;
    }
    if (h->flags & MPI_FLAG_INLINE) {
        if ((h->len > MPI_INLINE_MAX) || ((uint64_t)count != MPI_HDR_BYTES + h->len) ||
            (h->nchunks != 0)) {
            (void)snprintf(why, whylen, "inline message of %d bytes claims %llu payload bytes",
                           count, (unsigned long long)h->len);
            return GS_ERR_PROTOCOL;
        }
        return GS_OK;
    }
    if ((count != MPI_HDR_BYTES) || (h->len >= ((uint64_t)1 << 62)) ||
        ((uint64_t)h->nchunks != gs__mpi_chunk_count((size_t)h->len)) || (h->seq != expect_seq)) {
        (void)snprintf(why, whylen,
                       "header of %d bytes for %llu bytes in %u chunks at seq %u (expected %u)",
                       count, (unsigned long long)h->len, (unsigned)h->nchunks, (unsigned)h->seq,
                       (unsigned)expect_seq);
        return GS_ERR_PROTOCOL;
    }
    return GS_OK;
}
