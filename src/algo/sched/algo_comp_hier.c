/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compressed reduce-scatter in two hops (GS_SCHEME_SHARD_HIER), as ZeRO++'s
 * qgZ moves gradients: full precision inside a host, compressed between
 * hosts, every element quantised once.
 *
 * What: H hosts of m ranks each (m >= 2, the same on every host; the
 * planner offers it only then). Rank (g, p) is local position p of host g
 * (ctx->hosts: positions in ascending rank order); its output is block
 * B_j of the send buffer, j = its rank, count elements.
 *   1. Host-grouped copy: T holds m chunks of H blocks; chunk c is, for
 *      h = 0 .. H-1, block B of rank (h, (c - 1) mod m). The reduce-scatter
 *      over the host's ranks (full precision, op SUM: in the host segment
 *      of its ranks, gs__shm_rs_chunks, else the ring, gs__ring_rs_chunks)
 *      leaves position p owning chunk (p + 1) mod m:
 *      S_h = the host's sum of block B of rank (h, p), for every h.
 *   2. Between hosts: the ranks of position p on every host (one per host,
 *      in host order) run the block-wise compressed reduce-scatter
 *      (gs__compressed_shard) on those H blocks: each S_h for h != g is
 *      encoded once and sent to rank (h, p); each rank sums, in f32 and in
 *      host order, the H - 1 decoded partial sums and its own host's
 *      exactly, divides by n for AVG, and writes its block.
 * Error feedback: the payloads are the host's partial sums, so their
 * residual (H blocks, the dtype) is ef's second residual (ef->server),
 * made on first use; the caller's residual of its own send buffer stays
 * unused.
 * Bytes between hosts per host: m (H - 1) encoded blocks, against
 * m (n - m) for the flat scheme: m times fewer. Inside a host: the ring's
 * (m - 1)/m of the n-block vector per rank, uncompressed, on shared memory.
 * Step table, n = 4 on hosts A = {0, 1}, B = {2, 3} (H = m = 2):
 *   1. rank 0 (A, p 0): T = [B1@0 B3@0 | B0@0 B2@0]; ring with rank 1
 *      leaves chunk 1 = [B0 B2] summed over A on rank 0, chunk 0 = [B1 B3]
 *      on rank 1. Same on B.
 *   2. position 0: ranks {0, 2}: rank 0 sends E(B2 sum over A) to 2 and
 *      gets E(B0 sum over B) from 2; output B0 = (0 + A's B0) + D(B's B0).
 * Deterministic: the member (or ring) order and the host order fix every sum.
 * Messages: phase 1 pairs share a host and phase 2 pairs do not, so their
 * message indices never meet on one pair.
 */
#include <string.h>

#include "algo/ctx/ctx_shm.h"
#include "algo/sched/sched.h"
#include "algo/sched/algo_comp.h"
#include "core/dtype.h"
#include "core/error.h"

enum { HOP_MAX_HOSTS = 4096 };

gs_status_t gs__compressed_rs_two_hop(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const gs__algo_hosts_t *hosts = &ctx->hosts;
    const gs__algo_route_t saved = ctx->route;
    const size_t esize = gs__dtype_size(d->dtype);
    const size_t blk = d->count * esize;
    const int nh = hosts->nhosts;
    int ranks[HOP_MAX_HOSTS];
    size_t bounds[HOP_MAX_HOSTS + 1];
    gs__coll_desc_t intra = *d, inter = *d;
    gs__comp_group_t grp;
    gs_ef_t server = GS_EF_NULL;
    uint8_t *t = NULL;
    gs_status_t status;
    int g, p, m;

    if ((hosts->order == NULL) || (nh < 2) || (nh > HOP_MAX_HOSTS) ||
        (hosts->min_local != hosts->max_local) || (hosts->min_local < 2) ||
        (hosts->max_local > HOP_MAX_HOSTS)) {
        return gs__error_set(GS_ERR_INTERNAL,
                             "%s: the two-hop reduce-scatter needs several hosts with the same "
                             "number (>= 2) of ranks each",
                             ctx->opname);
    }
    if (d->count == 0) {
        return GS_OK;
    }
    m = hosts->max_local;
    g = hosts->host_of[ctx->rank];
    p = hosts->pos[ctx->rank] - hosts->first[g];
    status = gs__ef_sync_host((gs_ef_t)d->ef);
    if (status == GS_OK) {
        status = gs__comp_server_ef((gs_ef_t)d->ef, (size_t)nh * d->count, d->dtype, &server);
    }
    if (status == GS_OK) {
        status = gs__algo_grow(ctx, &ctx->outer_buf, &ctx->outer_cap, (size_t)ctx->size * blk,
                               (void **)&t);
    }
    if (status != GS_OK) {
        return status;
    }

    /* 1. The host-grouped copy, then the ring reduce-scatter inside the host. */
    for (int c = 0; c < m; c++) {
        const int pp = (c + m - 1) % m;

        for (int h = 0; h < nh; h++) {
            const int q = hosts->order[hosts->first[h] + pp];

            memcpy(t + ((size_t)c * (size_t)nh + (size_t)h) * blk,
                   (const uint8_t *)d->sendbuf + (size_t)q * blk, blk);
        }
        bounds[c] = (size_t)c * (size_t)nh * d->count;
    }
    bounds[m] = (size_t)m * (size_t)nh * d->count;
    intra.sendbuf = t;
    intra.recvbuf = t;
    intra.count = (size_t)ctx->size * d->count;
    intra.op = GS_OP_SUM; /* AVG divides once, at the end of phase 2 */
    intra.codec = NULL;
    intra.ef = NULL;
    if (gs__shm_serves_host(ctx, m)) {
        status = gs__shm_rs_chunks(ctx, &intra, bounds);
    } else {
        ctx->route.order = hosts->order + hosts->first[g];
        ctx->route.n = m;
        ctx->route.pos = p;
        status = gs__ring_rs_chunks(ctx, &intra, bounds);
        ctx->route = saved;
    }

    /* 2. The compressed reduce-scatter among position p of every host. */
    for (int h = 0; h < nh; h++) {
        ranks[h] = hosts->order[hosts->first[h] + p];
    }
    grp = (gs__comp_group_t){.n = nh, .index = g, .ranks = ranks};
    inter.sendbuf = t + (size_t)((p + 1) % m) * (size_t)nh * blk;
    inter.ef = server;
    if (status == GS_OK) {
        status = gs__compressed_shard(ctx, &inter, &grp);
    }
    return status;
}
