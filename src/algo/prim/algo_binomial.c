/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Binomial-tree broadcast and reduce, for small messages (the pipelined
 * chain in algo_chain.c wins for large ones).
 *
 * What: ranks are renumbered from the root, v = (rank - root) mod n
 * (pattern_tree.h). Broadcast: v > 0 receives the whole vector from v with
 * its lowest set bit cleared, straight into the user's buffer, then sends
 * it to its children v + m, largest subtree first. Reduce: the same tree
 * upward; v receives each child's partial result (smallest subtree first,
 * the order they become ready), reduces (its own range first, the child's
 * higher ranks second) and sends the sum to its parent; the root ends
 * with the result and divides once for AVG.
 * Cost, B bytes: ceil(log2 n) rounds,
 *   broadcast  T = ceil(log2 n) (alpha + B beta)
 *   reduce     T = ceil(log2 n) (alpha + B beta + B gamma)
 * against the chain's (n - 2 + s)(alpha + B/s beta): fewer latency terms,
 * but the whole vector per round, so it suits small B.
 *
 * Any n works (the tree is simply cut at n; no fold is needed). count 0
 * returns at once; an in-place reduce root (sendbuf == recvbuf) reduces
 * into its own buffer, which is allowed because gs__reduce may alias.
 *
 * Step table, broadcast, root 0 (reduce runs the rounds backwards):
 *   n = 3:  round 0: 0>2      round 1: 0>1
 *   n = 4:  round 0: 0>2      round 1: 0>1  2>3
 *   n = 5:  round 0: 0>4      round 1: 0>2  round 2: 0>1  2>3
 * Message index: the receiver's virtual rank (broadcast) or the sender's
 * (reduce); each rank receives at most once per index.
 */
#include <string.h>

#include "algo/prim/prim.h"
#include "algo/prim/pattern_tree.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/reduce_cpu.h"

#define BINOM_MAX_CHILDREN 32

gs_status_t gs__binomial_broadcast(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const int n = ctx->size;
    const int v = gs__binom_vrank(n, d->root, ctx->rank);
    const int parent = gs__binom_parent(v);
    const size_t bytes = d->count * gs__dtype_size(d->dtype);
    gs__algo_req_t sends[BINOM_MAX_CHILDREN];
    size_t nsend = 0;
    gs_status_t status = GS_OK;

    if ((n == 1) || (d->count == 0)) {
        return GS_OK;
    }
    if (parent >= 0) {
        status = gs__algo_sendrecv(ctx, d, gs__binom_rank(n, d->root, parent), (uint32_t)v, NULL, 0,
                                   d->recvbuf, bytes);
    }
    memset(sends, 0, sizeof(sends));
    for (int m = gs__binom_span(n, v) / 2; (status == GS_OK) && (m >= 1); m /= 2) {
        if (v + m < n) {
            status = gs__algo_isend(ctx, gs__binom_rank(n, d->root, v + m),
                                    gs__algo_tag(ctx, d, (uint32_t)(v + m)), d->recvbuf, bytes,
                                    &sends[nsend++]);
        }
    }
    if (status != GS_OK) {
        gs__algo_release_all(ctx, sends, nsend);
        return status;
    }
    return gs__algo_wait_all(ctx, sends, NULL, nsend);
}

gs_status_t gs__binomial_reduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const int n = ctx->size;
    const int v = gs__binom_vrank(n, d->root, ctx->rank);
    const int parent = gs__binom_parent(v);
    const int nchild = gs__binom_nchildren(n, v);
    const size_t esize = gs__dtype_size(d->dtype);
    const size_t bytes = d->count * esize;
    const uint8_t *acc = (const uint8_t *)d->sendbuf;
    uint8_t *sum = NULL;
    uint8_t *tmp = NULL;
    void *scratch = NULL;
    gs_status_t status = GS_OK;

    if ((n == 1) || (d->count == 0)) {
        if ((v == 0) && (d->sendbuf != d->recvbuf) && (bytes > 0)) {
            memcpy(d->recvbuf, d->sendbuf, bytes);
        }
        return GS_OK;
    }
    if (nchild > 0) {
        /* The root sums into recvbuf; an interior rank into scratch. */
        status = gs__algo_scratch(ctx, (v == 0) ? bytes : 2 * bytes, &scratch);
        if (status != GS_OK) {
            return status;
        }
        tmp = (uint8_t *)scratch;
        sum = (v == 0) ? (uint8_t *)d->recvbuf : tmp + bytes;
    }
    for (int m = 1; (status == GS_OK) && (m < gs__binom_span(n, v)); m *= 2) {
        if (v + m >= n) {
            break;
        }
        status = gs__algo_sendrecv(ctx, d, gs__binom_rank(n, d->root, v + m), (uint32_t)(v + m),
                                   NULL, 0, tmp, bytes);
        if (status == GS_OK) {
            gs__reduce(sum, acc, tmp, d->count, d->dtype, d->op);
            acc = sum;
        }
    }
    if (status != GS_OK) {
        return status;
    }
    if (parent >= 0) {
        return gs__algo_sendrecv(ctx, d, gs__binom_rank(n, d->root, parent), (uint32_t)v, acc,
                                 bytes, NULL, 0);
    }
    if (d->op == GS_OP_AVG) {
        gs__reduce_scale(d->recvbuf, d->count, d->dtype, n);
    }
    return GS_OK;
}
