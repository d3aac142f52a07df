/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Recursive doubling all-reduce, for small messages, and the pieces it
 * shares with Rabenseifner (algo_rabenseifner.c): the start (nothing to
 * send for one rank or no elements, else scratch and the fold in), the fold
 * of the ranks beyond a power of two and a blocking send+receive.
 *
 * What: with p = 2^k ranks, step s = 0..k-1 exchanges the whole vector
 * with the rank whose (new) rank differs in bit s and reduces it into the
 * local copy; after k steps every rank holds the full result. Each step
 * reduces (lower rank's vector) op (higher rank's vector), so both
 * partners compute identical bytes and every rank ends bit-identical.
 * Cost, p = n a power of two, B bytes:
 *   T = log2(n) * (alpha + B beta + B gamma)
 * The fewest steps of any all-reduce, but every step moves the whole
 * vector: it wins only while alpha dominates (small B).
 *
 * Odd n (any n that is not a power of two), MPICH's fold (pattern_rd.h):
 * p = largest power of two <= n, rem = n - p. Among ranks 0..2rem-1 the
 * even rank sends its vector to the odd one above it and waits; the odd
 * one reduces it and joins the p-rank doubling under new rank r/2; at the
 * end it sends the result back. Two extra steps:
 *   T = (log2(p) + 2) * (alpha + B beta) + (log2(p) + 1) * B gamma
 * AVG is a sum divided by n once, on the p active ranks, before the
 * result goes back to the folded ones. Any count works (count 0 returns
 * at once); in place (sendbuf == recvbuf) needs no copy, and the first
 * step reads sendbuf directly, so out of place needs none either.
 *
 * Step table, n = 4 (ranks exchange, "+" = reduce):
 *   step 0:  0<>1  2<>3     each holds 01 or 23
 *   step 1:  0<>2  1<>3     each holds 0123
 * n = 3 (p = 2, rem = 1; rank 0 folded into 1, new ranks 1->0, 2->1):
 *   fold:    0 > 1+         1 holds 01
 *   step 0:  1<>2           1 and 2 hold 012
 *   unfold:  1 > 0          0 holds 012
 * n = 5 (p = 4, rem = 1; new ranks 1->0, 2->1, 3->2, 4->3):
 *   fold:    0 > 1+
 *   step 0:  1<>2  3<>4
 *   step 1:  1<>3  2<>4
 *   unfold:  1 > 0
 * Message indices: fold 0, step s -> 1 + s, unfold 1 + log2(p).
 */
#include <string.h>

#include "algo/prim/prim.h"
#include "algo/prim/pattern_rd.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/reduce_cpu.h"

gs_status_t gs__algo_sendrecv(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, int peer, uint32_t idx,
                              const void *sbuf, size_t sbytes, void *rbuf, size_t rbytes)
{
    gs__algo_req_t reqs[2];
    size_t expect[2] = {rbytes, 0};
    gs_status_t status = GS_OK;
    const uint64_t tag = gs__algo_tag(ctx, d, idx);

    memset(reqs, 0, sizeof(reqs));
    if (rbytes > 0) {
        status = gs__algo_irecv(ctx, peer, tag, rbuf, rbytes, &reqs[0]);
    }
    if ((status == GS_OK) && (sbytes > 0)) {
        status = gs__algo_isend(ctx, peer, tag, sbuf, sbytes, &reqs[1]);
    }
    if (status != GS_OK) {
        gs__algo_release_all(ctx, reqs, 2);
        return status;
    }
    /* wait_all tests every request before it blocks, so a request that
     * completed while being posted is seen at once. */
    return gs__algo_wait_all(ctx, reqs, expect, 2);
}

gs_status_t gs__rd_fold_in(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, uint32_t idx, void *tmp,
                           const void **src_out)
{
    const int r = ctx->rank;
    const int peer = gs__rd_fold_peer(ctx->size, r);
    const size_t bytes = d->count * gs__dtype_size(d->dtype);
    gs_status_t status;

    if (peer < 0) {
        *src_out = d->sendbuf;
        return GS_OK;
    }
    if ((r % 2) == 0) {
        *src_out = NULL;
        return gs__algo_sendrecv(ctx, d, peer, idx, d->sendbuf, bytes, NULL, 0);
    }
    status = gs__algo_sendrecv(ctx, d, peer, idx, NULL, 0, tmp, bytes);
    if (status != GS_OK) {
        return status;
    }
    /* The even partner is the lower rank: its vector goes first. */
    gs__reduce(d->recvbuf, tmp, d->sendbuf, d->count, d->dtype, d->op);
    *src_out = d->recvbuf;
    return GS_OK;
}

gs_status_t gs__rd_fold_out(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, uint32_t idx)
{
    const int r = ctx->rank;
    const int peer = gs__rd_fold_peer(ctx->size, r);
    const size_t bytes = d->count * gs__dtype_size(d->dtype);

    if (peer < 0) {
        return GS_OK;
    }
    if ((r % 2) == 0) {
        return gs__algo_sendrecv(ctx, d, peer, idx, NULL, 0, d->recvbuf, bytes);
    }
    return gs__algo_sendrecv(ctx, d, peer, idx, d->recvbuf, bytes, NULL, 0);
}

gs_status_t gs__rd_start(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, void **tmp_out,
                         const void **src_out, int *done_out)
{
    const size_t bytes = d->count * gs__dtype_size(d->dtype);
    gs_status_t status;

    *tmp_out = NULL;
    *src_out = NULL;
    *done_out = 0;
    if ((ctx->size == 1) || (d->count == 0)) {
        if ((d->sendbuf != d->recvbuf) && (bytes > 0)) {
            memcpy(d->recvbuf, d->sendbuf, bytes);
        }
        *done_out = 1;
        return GS_OK;
    }
    status = gs__algo_scratch(ctx, bytes, tmp_out);
    if (status != GS_OK) {
        return status;
    }
    return gs__rd_fold_in(ctx, d, 0, *tmp_out, src_out);
}

gs_status_t gs__rd_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const int n = ctx->size;
    const int r = ctx->rank;
    const size_t esize = gs__dtype_size(d->dtype);
    const size_t bytes = d->count * esize;
    const int steps = gs__rd_log2(gs__rd_pof2(n));
    const void *src = NULL;
    void *tmp = NULL;
    int done = 0;
    gs_status_t status = gs__rd_start(ctx, d, &tmp, &src, &done);

    if ((status != GS_OK) || done) {
        return status;
    }
    for (int s = 0; (status == GS_OK) && (src != NULL) && (s < steps); s++) {
        const int peer = gs__rd_peer(n, r, s);

        status = gs__algo_sendrecv(ctx, d, peer, (uint32_t)(1 + s), src, bytes, tmp, bytes);
        if (status == GS_OK) {
            if (peer < r) {
                gs__reduce(d->recvbuf, tmp, src, d->count, d->dtype, d->op);
            } else {
                gs__reduce(d->recvbuf, src, tmp, d->count, d->dtype, d->op);
            }
            src = d->recvbuf;
        }
    }
    if ((status == GS_OK) && (src != NULL) && (d->op == GS_OP_AVG)) {
        gs__reduce_scale(d->recvbuf, d->count, d->dtype, n);
    }
    if (status == GS_OK) {
        status = gs__rd_fold_out(ctx, d, (uint32_t)(1 + steps));
    }
    return status;
}
