/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the TCP transport's 96-byte v4 handshake (HELLO,
 * ACK, PROOF, with the nonce and MAC of an authenticated job):
 * gs__tcp_hs_decode, then gs__tcp_hs_check against an expectation taken
 * from the input's own fields (so that mutated handshakes get past the id
 * check and reach the rank and socket checks) and against a fixed one, then
 * the MAC check of both directions with a fixed token. Whatever decodes
 * must re-encode to the same bytes; an accepted handshake must satisfy
 * what the transport relies on (rank in range, index < nsocks <= the
 * expected count). A version mismatch still fills the output (the caller
 * reports the peer's version). Built with -fsanitize=fuzzer;
 * regression_driver.c replays corpora/tcp_hs/ without libFuzzer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/auth.h"
#include "transport/tcp/tcp_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_against(const gs__tcp_hs_t *hs, const gs__tcp_hs_expect_t *exp)
{
    char why[160];

    if (gs__tcp_hs_check(hs, exp, why, sizeof(why)) == GS_TCP_HS_OK) {
        if ((hs->job_id != exp->job_id) || (hs->comm_id != exp->comm_id) ||
            ((int64_t)hs->size != exp->size) || ((int64_t)hs->rank < exp->rank_lo) ||
            ((int64_t)hs->rank > exp->rank_hi) || ((int64_t)hs->nsocks != exp->nsocks) ||
            (hs->index >= hs->nsocks)) {
            abort();
        }
    } else if (memchr(why, '\0', sizeof(why)) == NULL) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gs__auth_t auth;
    static int auth_ready;
    gs__tcp_hs_t hs;
    uint8_t again[GS_TCP_HS_LEN];
    char why[160];
    gs_status_t st;

    if (!auth_ready) {
        /* Without OpenSSL the token is refused and auth stays off: the MAC
         * check then must say no, which is checked below too. */
        if (gs__auth_init(&auth, "fuzz-token", NULL) != GS_OK) {
            memset(&auth, 0, sizeof(auth));
        }
        auth_ready = 1;
    }
    memset(&hs, 0xa5, sizeof(hs));
    st = gs__tcp_hs_decode(data, size, &hs, why, sizeof(why));
    if ((st != GS_OK) && (st != GS_ERR_PROTOCOL) && (st != GS_ERR_VERSION_MISMATCH)) {
        abort();
    }
    if ((st != GS_OK) && (size < GS_TCP_HS_LEN) && (st != GS_ERR_PROTOCOL)) {
        abort();
    }
    if (st == GS_ERR_VERSION_MISMATCH) {
        /* Filled, and the check must turn it down for its version. */
        const gs__tcp_hs_expect_t any = {.job_id = hs.job_id,
                                         .comm_id = hs.comm_id,
                                         .size = 1,
                                         .nsocks = 1,
                                         .rank_lo = 0,
                                         .rank_hi = 0};
        if (gs__tcp_hs_check(&hs, &any, why, sizeof(why)) != GS_TCP_HS_BAD_VERSION) {
            abort();
        }
        return 0;
    }
    if (st != GS_OK) {
        return 0;
    }
    if ((hs.kind < GS_TCP_HS_HELLO) || (hs.kind > GS_TCP_HS_PROOF) ||
        (hs.verdict > GS_TCP_HS_VERDICT_MAX) || ((hs.flags & ~GS_TCP_HS_F_KNOWN) != 0) ||
        ((hs.kind != GS_TCP_HS_ACK) && (hs.verdict != GS_TCP_HS_OK))) {
        abort();
    }
    gs__tcp_hs_encode(&hs, again);
    if (memcmp(again, data, GS_TCP_HS_LEN) != 0) {
        abort();
    }
    {
        const gs__tcp_hs_expect_t fixed = {
            .job_id = 1, .comm_id = 2, .size = 4, .nsocks = 2, .rank_lo = 1, .rank_hi = 3};
        /* The input's own ids, size and socket count (clamped to what an int
         * holds), a rank window around its rank. */
        const int sz = (hs.size > 1u << 20) ? 1 << 20 : (int)hs.size;
        const int ns = (hs.nsocks > GS_TCP_MAX_SOCKS) ? GS_TCP_MAX_SOCKS : (int)hs.nsocks;
        const int rk = (hs.rank > 1u << 20) ? 1 << 20 : (int)hs.rank;
        const gs__tcp_hs_expect_t own = {.job_id = hs.job_id,
                                         .comm_id = hs.comm_id,
                                         .size = sz,
                                         .nsocks = ns,
                                         .rank_lo = rk > 0 ? rk - 1 : 0,
                                         .rank_hi = rk};

        check_against(&hs, &fixed);
        check_against(&hs, &own);
    }
    (void)gs__tcp_hs_verdict_str(hs.verdict);
    if ((hs.flags & GS_TCP_HS_F_AUTH) != 0) {
        /* A MAC from the network: checked in both directions against a
         * nonce pair made of the input's nonce; a random input must not
         * pass (2^-256), and without a token nothing passes. */
        uint8_t other[GS_AUTH_NONCE_BYTES];
        uint8_t mac[GS_AUTH_MAC_BYTES];

        memset(other, 0x5a, sizeof(other));
        if (auth.on) {
            gs__auth_mac(&auth, GS_AUTH_ACCEPTOR, GS_TCP_AUTH_DOMAIN, other, hs.nonce, mac);
            if (!gs__auth_check(&auth, GS_AUTH_ACCEPTOR, GS_TCP_AUTH_DOMAIN, other, hs.nonce,
                                mac)) {
                abort();
            }
            if ((memcmp(mac, hs.mac, sizeof(mac)) != 0) &&
                gs__auth_check(&auth, GS_AUTH_ACCEPTOR, GS_TCP_AUTH_DOMAIN, other, hs.nonce,
                               hs.mac)) {
                abort();
            }
            (void)gs__auth_check(&auth, GS_AUTH_CONNECTOR, GS_TCP_AUTH_DOMAIN, hs.nonce, other,
                                 hs.mac);
        }
    }
    return 0;
}
