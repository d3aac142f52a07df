/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Direct algorithms: pairwise all-to-all, the dissemination barrier and
 * point-to-point send/receive.
 *
 * All-to-all: every rank posts its n-1 receives (straight into recvbuf) and
 * its n-1 sends at once, peers ordered r+1, r+2, ... so that no rank is hit
 * by everyone first. One step: T = alpha + (n-1)/n * bytes * beta when the
 * network is not the bottleneck. In place, the outgoing blocks are first
 * copied to scratch.
 *
 * Point-to-point: gs__p2p_post() only posts; the communicator keeps the
 * request in flight on its worker (so a receive posted before a send never
 * blocks the queue) and checks it with gs__algo_check(). gs__p2p_send/recv
 * are the blocking forms, for callers that run them as one operation.
 *
 * Barrier (dissemination, Hensgen et al.): in round k = 0..ceil(log2 n)-1
 * rank r sends an empty message to r + 2^k and waits for one from r - 2^k.
 * Works for any n; ceil(log2 n) * alpha.
 *   n = 5, round 0: r -> r+1; round 1: r -> r+2; round 2: r -> r+4.
 */
#include <string.h>

#include "algo/prim/prim.h"
#include "core/dtype.h"
#include "core/error.h"


gs_status_t gs__direct_alltoall(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const int n = ctx->size;
    const int r = ctx->rank;
    const size_t block = d->count * gs__dtype_size(d->dtype);
    const uint8_t *src = (const uint8_t *)d->sendbuf;
    uint8_t *dst = (uint8_t *)d->recvbuf;
    gs__algo_req_t *reqs;
    size_t *expect;
    void *scratch = NULL;
    gs_status_t status;

    if (block == 0) {
        return GS_OK;
    }
    if (src == dst) {
        /* In place: keep the outgoing blocks, since receives overwrite them. */
        const size_t roff = (block * (size_t)n + 15) & ~(size_t)15;
        status = gs__algo_scratch(
            ctx, roff + (size_t)n * 2 * (sizeof(gs__algo_req_t) + sizeof(size_t)), &scratch);
        if (status != GS_OK) {
            return status;
        }
        memcpy(scratch, src, block * (size_t)n);
        src = (const uint8_t *)scratch;
        reqs = (gs__algo_req_t *)((uint8_t *)scratch + roff);
    } else {
        memcpy(dst + (size_t)r * block, src + (size_t)r * block, block);
        status = gs__algo_scratch(ctx, (size_t)n * 2 * (sizeof(gs__algo_req_t) + sizeof(size_t)),
                                  &scratch);
        if (status != GS_OK) {
            return status;
        }
        reqs = (gs__algo_req_t *)scratch;
    }
    expect = (size_t *)(reqs + 2 * n);
    memset(reqs, 0, sizeof(gs__algo_req_t) * 2 * (size_t)n);
    for (int i = 1; (i < n) && (status == GS_OK); i++) {
        const int from = (r - i + n) % n;
        expect[2 * i] = block;
        status = gs__algo_irecv(ctx, from, gs__algo_tag(ctx, d, 0), dst + (size_t)from * block,
                                block, &reqs[2 * i]);
    }
    for (int i = 1; (i < n) && (status == GS_OK); i++) {
        const int to = (r + i) % n;
        expect[2 * i + 1] = 0;
        status = gs__algo_isend(ctx, to, gs__algo_tag(ctx, d, 0), src + (size_t)to * block, block,
                                &reqs[2 * i + 1]);
    }
    if (status != GS_OK) {
        gs__algo_release_all(ctx, reqs, 2 * (size_t)n);
        return status;
    }
    return gs__algo_wait_all(ctx, reqs, expect, 2 * (size_t)n);
}

gs_status_t gs__direct_barrier(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const int n = ctx->size;
    const int r = ctx->rank;
    static const size_t expect[2] = {0, 0};
    uint32_t round = 0;

    for (int dist = 1; dist < n; dist *= 2, round++) {
        gs__algo_req_t reqs[2];
        gs_status_t status;

        memset(reqs, 0, sizeof(reqs));
        status =
            gs__algo_irecv(ctx, (r - dist + n) % n, gs__algo_tag(ctx, d, round), NULL, 0, &reqs[0]);
        if (status == GS_OK) {
            status =
                gs__algo_isend(ctx, (r + dist) % n, gs__algo_tag(ctx, d, round), NULL, 0, &reqs[1]);
        }
        if (status != GS_OK) {
            gs__algo_release_all(ctx, reqs, 2);
            return status;
        }
        status = gs__algo_wait_all(ctx, reqs, expect, 2);
        if (status != GS_OK) {
            return status;
        }
    }
    return GS_OK;
}

gs_status_t gs__p2p_post(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, gs__algo_req_t *r)
{
    const size_t bytes = d->count * gs__dtype_size(d->dtype);

    if (d->kind == GS_COLL_SEND) {
        return gs__algo_isend(ctx, d->root, GS_TP_TAG_P2P | d->tag, d->sendbuf, bytes, r);
    }
    return gs__algo_irecv(ctx, d->root, GS_TP_TAG_P2P | d->tag, d->recvbuf, bytes, r);
}

gs_status_t gs__p2p_send(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    gs__algo_req_t req = {0};
    gs_status_t status = gs__p2p_post(ctx, d, &req);

    if (status != GS_OK) {
        return status;
    }
    return gs__algo_wait_all(ctx, &req, NULL, 1);
}

gs_status_t gs__p2p_recv(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const size_t bytes = d->count * gs__dtype_size(d->dtype);
    gs__algo_req_t req = {0};
    gs_status_t status = gs__p2p_post(ctx, d, &req);

    if (status != GS_OK) {
        return status;
    }
    return gs__algo_wait_all(ctx, &req, &bytes, 1);
}
