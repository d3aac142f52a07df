/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The all-peers exchange of variable-length payloads that both compressed
 * schemes run (algo_comp.h): the two-phase scheme of algo_compressed.c for
 * its unsliced fallback and the sparse paths of algo_sparse.c, which no
 * longer call into each other for it; and the test-only payload corrupter
 * both use (GS_COMP_TEST_CORRUPT, compiled in with GS_TEST_HOOKS only: the
 * test variant of the library, gradsync_testhooks).
 */
#include <stdlib.h>
#include <string.h>

#include "algo/sched/sched.h"
#include "algo/sched/algo_comp.h"
#include "core/error.h"

/* GS_COMP_TEST_CORRUPT (tests only): flip one byte of a payload this rank
 * is about to send, so that the receivers' checks meet a rogue peer.
 * Compiled in only in the test variant of the library (gradsync_testhooks,
 * GS_TEST_HOOKS): the library users get has no way to corrupt what it sends. */
#ifdef GS_TEST_HOOKS
void gs__comp_test_corrupt(const gs__algo_ctx_t *ctx, uint8_t *buf, size_t bytes)
{
    if ((ctx->comp_corrupt > 0) && (bytes > 0)) {
        buf[(size_t)(ctx->comp_corrupt - 1) % bytes] ^= 0xffu;
    }
}
#else
void gs__comp_test_corrupt(const gs__algo_ctx_t *ctx, uint8_t *buf, size_t bytes)
{
    (void)ctx;
    (void)buf;
    (void)bytes;
}
#endif

/* gs__algo_wait_each's hook: a payload arrived; its length is what the
 * transport delivered (received payloads vary in length). */
static gs_status_t comp_xchg_recv_done(gs__algo_ctx_t *ctx, const gs__algo_req_t *r, size_t i,
                                       gs_status_t status, size_t nbytes, const void *arg)
{
    const gs__comp_xchg_t *x = arg;

    (void)ctx;
    (void)i;
    x->recv_len[r->peer] = nbytes;
    return status;
}

gs_status_t gs__comp_exchange(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, uint32_t phase,
                              const gs__comp_xchg_t *x)
{
    const int n = ctx->size;
    const int r = ctx->rank;
    const uint8_t *send = x->send;
    uint8_t *bad = NULL;
    gs_status_t status = GS_OK;

#ifdef GS_TEST_HOOKS
    if (ctx->comp_corrupt > 0) {
        bad = malloc((size_t)n * x->cap);
        if (bad == NULL) {
            return gs__error_set(GS_ERR_NO_MEMORY, "%s: GS_COMP_TEST_CORRUPT copy", ctx->opname);
        }
        for (int q = 0; q < n; q++) {
            const size_t len = x->send_len[x->send_same_slot ? r : q];
            memcpy(bad + (size_t)q * x->cap, x->send + (size_t)(x->send_same_slot ? r : q) * x->cap,
                   len);
            gs__comp_test_corrupt(ctx, bad + (size_t)q * x->cap, len);
        }
        send = bad;
    }
#endif

    memset(x->reqs, 0, sizeof(gs__algo_req_t) * 2 * (size_t)n);
    for (int i = 1; (i < n) && (status == GS_OK); i++) {
        const int from = (r - i + n) % n;
        status = gs__algo_irecv(ctx, from, gs__algo_tag(ctx, d, phase),
                                x->recv + (size_t)from * x->cap, x->cap, &x->reqs[2 * from]);
    }
    for (int i = 1; (i < n) && (status == GS_OK); i++) {
        const int to = (r + i) % n;
        const int slot = x->send_same_slot ? r : to;
        status = gs__algo_isend(ctx, to, gs__algo_tag(ctx, d, phase),
                                send + (size_t)((bad != NULL) ? to : slot) * x->cap,
                                x->send_len[slot], &x->reqs[2 * to + 1]);
    }
    if (status == GS_OK) {
        status = gs__algo_wait_each(ctx, x->reqs, 2 * (size_t)n, comp_xchg_recv_done, x);
    }
    if (status != GS_OK) {
        gs__algo_release_all(ctx, x->reqs, 2 * (size_t)n);
    }
    free(bad); /* every request is finished or released */
    return status;
}
