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

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;

    for (int i = n - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

void gs__mpi_hdr_encode(unsigned char *p, const mpi_hdr_t *h)
{
    put_u32(p, MPI_HDR_MAGIC);
    put_u16(p + 4, MPI_HDR_VERSION);
    put_u16(p + 6, h->flags);
    put_u64(p + 8, h->tag);
    put_u64(p + 16, h->len);
    put_u32(p + 24, h->seq);
    put_u32(p + 28, h->nchunks);
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
    if ((uint32_t)get_le(p, 4) != MPI_HDR_MAGIC) {
        (void)snprintf(why, whylen, "bad magic 0x%08x", (unsigned)get_le(p, 4));
        return GS_ERR_PROTOCOL;
    }
    if (get_le(p + 4, 2) != MPI_HDR_VERSION) {
        (void)snprintf(why, whylen, "header version %u, expected %u", (unsigned)get_le(p + 4, 2),
                       (unsigned)MPI_HDR_VERSION);
        return GS_ERR_PROTOCOL;
    }
    h->flags = (uint16_t)get_le(p + 6, 2);
    h->tag = get_le(p + 8, 8);
    h->len = get_le(p + 16, 8);
    h->seq = (uint32_t)get_le(p + 24, 4);
    h->nchunks = (uint32_t)get_le(p + 28, 4);
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
