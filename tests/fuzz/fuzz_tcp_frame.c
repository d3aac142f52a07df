/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the TCP wire decoders: every input is fed to the
 * frame-header decoder, the handshake decoder and checker, and the
 * shared-memory setup record decoder. Whatever
 * decodes must re-encode to the same bytes, and must satisfy the invariants
 * the transport relies on (offset + chunk within total, total bounded).
 * Built with -fsanitize=fuzzer; regression_driver.c replays the corpus
 * without libFuzzer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tcp/tcp_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gs__tcp_frame_hdr_t hdr;
    gs__tcp_hs_t hs;
    uint8_t again[GS_TCP_FRAME_HDR_LEN > GS_TCP_HS_LEN ? GS_TCP_FRAME_HDR_LEN : GS_TCP_HS_LEN];
    char why[160];

    if (gs__tcp_frame_decode(data, size, &hdr, why, sizeof(why)) == GS_OK) {
        if ((hdr.total_len > GS_TCP_MAX_MSG) || (hdr.offset > hdr.total_len) ||
            (hdr.chunk_len > hdr.total_len - hdr.offset)) {
            abort();
        }
        gs__tcp_frame_encode(&hdr, again);
        if (memcmp(again, data, GS_TCP_FRAME_HDR_LEN) != 0) {
            abort();
        }
    }
    if (gs__tcp_hs_decode(data, size, &hs, why, sizeof(why)) == GS_OK) {
        const gs__tcp_hs_expect_t exp = {
            .job_id = 1, .comm_id = 2, .size = 4, .nsocks = 2, .rank_lo = 1, .rank_hi = 3};

        gs__tcp_hs_encode(&hs, again);
        if (memcmp(again, data, GS_TCP_HS_LEN) != 0) {
            abort();
        }
        if ((gs__tcp_hs_check(&hs, &exp, why, sizeof(why)) == GS_TCP_HS_OK) &&
            ((hs.index >= hs.nsocks) || (hs.rank < 1) || (hs.rank > 3))) {
            abort();
        }
        (void)gs__tcp_hs_verdict_str(hs.verdict);
    }
    {
        /* The shared-memory setup record: a decoded name is NUL-terminated. */
        gs__tcp_shm_msg_t m;
        uint8_t rec[GS_TCP_SHM_LEN];

        if (gs__tcp_shm_decode(data, size, &m, why, sizeof(why)) == GS_OK) {
            if (memchr(m.name, '\0', sizeof(m.name)) == NULL) {
                abort();
            }
            gs__tcp_shm_encode(&m, rec);
            if (memcmp(rec, data, GS_TCP_SHM_LEN) != 0) {
                abort();
            }
        }
    }
    return 0;
}
