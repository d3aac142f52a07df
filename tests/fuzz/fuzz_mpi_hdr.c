/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the MPI transport's 32-byte message header
 * (src/transport/mpi/mpi_wire.c): gs__mpi_hdr_decode on the whole input
 * (an inline message carries its payload after the header), expecting the
 * sequence number the input itself carries and then a fixed one. What
 * decodes must satisfy what mpi_match.c relies on: only known flags; an
 * inline message's length is exactly the bytes that follow, at most
 * MPI_INLINE_MAX, with no chunks; otherwise a bare header at the expected
 * sequence number whose chunk count covers its length. It must re-encode to
 * the same 32 bytes. Built only with the MPI transport (the header is
 * pure, but lives in it); regression_driver.c replays corpora/mpi_hdr/.
 */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/mpi/mpi_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const uint8_t *data, int count, uint32_t expect_seq)
{
    mpi_hdr_t h;
    unsigned char again[MPI_HDR_BYTES];
    char why[MPI_WHY_MAX];

    if (gs__mpi_hdr_decode(data, count, expect_seq, &h, why, sizeof(why)) != GS_OK) {
        if (memchr(why, '\0', sizeof(why)) == NULL) {
            abort();
        }
        return;
    }
    if ((count < MPI_HDR_BYTES) || ((h.flags & ~MPI_FLAG_INLINE) != 0)) {
        abort();
    }
    if ((h.flags & MPI_FLAG_INLINE) != 0) {
        if ((h.len > MPI_INLINE_MAX) || (h.len != (uint64_t)count - MPI_HDR_BYTES) ||
            (h.nchunks != 0)) {
            abort();
        }
    } else if ((count != MPI_HDR_BYTES) || (h.seq != expect_seq) ||
               ((uint64_t)h.nchunks * MPI_CHUNK_MAX < h.len) ||
               ((h.nchunks > 0) && ((uint64_t)(h.nchunks - 1) * MPI_CHUNK_MAX >= h.len))) {
        abort();
    }
    gs__mpi_hdr_encode(again, &h);
    if (memcmp(again, data, MPI_HDR_BYTES) != 0) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int count = (size > INT_MAX) ? INT_MAX : (int)size;
    uint32_t seq = 0;

    if (size >= 28) {
        seq = (uint32_t)data[24] | ((uint32_t)data[25] << 8) | ((uint32_t)data[26] << 16) |
              ((uint32_t)data[27] << 24);
    }
    one(data, count, seq);
    one(data, count, 7);
    return 0;
}
