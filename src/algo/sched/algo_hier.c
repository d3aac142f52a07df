/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hierarchical all-reduce: reduce-scatter inside each host, all-reduce
 * between hosts among the ranks that own the same piece, all-gather inside
 * each host (NCCL's "tree of rings" idea, with rings at both levels).
 *
 * What: H hosts, host g has m_g ranks (ctx->hosts), M = max m_g. The
 * vector is split into M balanced parts. On host g the parts are grouped
 * into m_g balanced, contiguous chunks (chunk c = parts split(M, m_g, c));
 * with the same number of ranks on every host each chunk is one part.
 *   1. Intra-host reduce-scatter: the ring reduce-scatter phase over the
 *      host's ranks (gs__ring_rs_chunks); local position p ends owning the
 *      host's sum of chunk (p+1) mod m_g.
 *   2. Inter-host all-reduce: for every part, the owners of that part on
 *      the H hosts (one per host) run the ring all-reduce on it, over the
 *      hosts in order. Consecutive parts with the same owners on every
 *      host form one run (one ring); a rank whose host has fewer ranks owns
 *      more parts and runs its rings one after the other, in part order on
 *      every rank, so that no two groups wait on each other. AVG: the
 *      owner divides its chunk by n once, here.
 *   3. Intra-host all-gather: the ring all-gather phase over the host's
 *      ranks (gs__ring_ag_chunks), straight into recvbuf.
 * Every rank ends with the bytes the owners computed, so all ranks are
 * bit-identical. Phases 1 and 3 reduce with SUM when op is AVG.
 *
 * Cost, B bytes, H hosts of m ranks (alpha_i/beta_i inside a host; alpha,
 * beta between hosts, where the m rings of phase 2 share the host's link):
 *   T = 2(m-1) alpha_i + 2(m-1)/m B beta_i + (m-1)/m B gamma
 *     + 2(H-1) alpha + 2(H-1)/H B beta + (H-1)/H B/m gamma
 * against the flat ring's 2(n-1)/n B beta over the same slow link: it
 * saves (2(n-1)/n - 2(H-1)/H) B beta and pays the intra-host phases, so it
 * wins when links between hosts are much slower than inside a host.
 * Uneven hosts: the alpha term of phase 2 grows with the number of runs of
 * the busiest rank, at most ceil(M / min m_g).
 *
 * Degenerate layouts: one host (H = 1) is the ring all-reduce over the
 * host (phases 1 and 3); one rank per host skips phases 1 and 3 and is the
 * ring over the hosts; an unknown host table (nhosts 0) runs the ring.
 *
 * Step table, n = 4 on hosts A = {0, 2}, B = {1, 3} (interleaved), M = 2
 * parts P0 P1, "x>y" = send, "+" = reduce:
 *   1. A: 0>2 P0+, 2>0 P1+     B: 1>3 P0+, 3>1 P1+   (0 owns P1, 2 owns P0;
 *                                                      1 owns P1, 3 owns P0)
 *   2. P1: ring {0, 1};  P0: ring {2, 3}              (each 2 steps)
 *   3. A: 0>2 P1, 2>0 P0       B: 1>3 P1, 3>1 P0
 * Hosts A = {0, 1, 2}, B = {3} (uneven), M = 3 parts: A's chunks are P0,
 * P1, P2 (owners 2, 0, 1); B's one chunk is P0..P2 (owner 3), so phase 2
 * runs P0 on {2, 3}, then P1 on {0, 3}, then P2 on {1, 3}; rank 3 runs
 * three rings in that order.
 * Messages: phases reuse message indices; they never overlap on a pair of
 * ranks, and the transport matches equal tags in send order.
 */
#include <stdlib.h>
#include <string.h>

#include "algo/ctx/ctx_shm.h"
#include "algo/sched/sched.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/reduce_cpu.h"

typedef struct hier {
    gs__algo_ctx_t *ctx;
    const gs__algo_hosts_t *hosts;
    size_t count;
    int nparts; /* M */
    int host;   /* this rank's host */
    int lpos;   /* this rank's position on its host */
} hier_t;

static int hier_local_size(const hier_t *hr, int g)
{
    return hr->hosts->first[g + 1] - hr->hosts->first[g];
}

/* First element of part j (j == nparts: the end of the vector). */
static size_t hier_part_off(const hier_t *hr, int j)
{
    size_t off, len;

    if (j >= hr->nparts) {
        return hr->count;
    }
    gs__algo_split(hr->count, hr->nparts, j, &off, &len);
    return off;
}

/* The chunk of host g that holds part j (inverse of the balanced split). */
static int hier_chunk_of(const hier_t *hr, int g, int j)
{
    const int m = hier_local_size(hr, g);
    const int base = hr->nparts / m;
    const int extra = hr->nparts % m;

    if (j < extra * (base + 1)) {
        return j / (base + 1);
    }
    return extra + (j - extra * (base + 1)) / base;
}

/* Rank that owns part j on host g after phase 1. */
static int hier_owner(const hier_t *hr, int g, int j)
{
    const int m = hier_local_size(hr, g);
    const int owner_pos = (hier_chunk_of(hr, g, j) + m - 1) % m;

    return hr->hosts->order[hr->hosts->first[g] + owner_pos];
}

/* 1 when parts j and k have the same owner on every host. */
static int hier_same_group(const hier_t *hr, int j, int k)
{
    for (int g = 0; g < hr->hosts->nhosts; g++) {
        if (hier_chunk_of(hr, g, j) != hier_chunk_of(hr, g, k)) {
            return 0;
        }
    }
    return 1;
}

/* Phase 2 for the chunk this rank owns: one ring per run of parts. */
static gs_status_t hier_inter(hier_t *hr, const gs__coll_desc_t *sub, int chunk, int *group)
{
    gs__algo_ctx_t *ctx = hr->ctx;
    const int m = hier_local_size(hr, hr->host);
    const size_t esize = gs__dtype_size(sub->dtype);
    const gs__algo_route_t saved = ctx->route;
    gs_status_t status = GS_OK;
    size_t plo, nparts;
    int j;

    gs__algo_split((size_t)hr->nparts, m, chunk, &plo, &nparts);
    j = (int)plo;
    while ((status == GS_OK) && (j < (int)(plo + nparts))) {
        gs__coll_desc_t run = *sub;
        int end = j + 1;

        while ((end < (int)(plo + nparts)) && hier_same_group(hr, j, end)) {
            end++;
        }
        for (int g = 0; g < hr->hosts->nhosts; g++) {
            group[g] = hier_owner(hr, g, j);
        }
        run.count = hier_part_off(hr, end) - hier_part_off(hr, j);
        run.recvbuf = (uint8_t *)sub->recvbuf + hier_part_off(hr, j) * esize;
        run.sendbuf = run.recvbuf;
        ctx->route.order = group;
        ctx->route.n = hr->hosts->nhosts;
        ctx->route.pos = hr->host;
        status = gs__ring_allreduce(ctx, &run);
        ctx->route = saved;
        j = end;
    }
    return status;
}

gs_status_t gs__hier_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const gs__algo_hosts_t *hosts = &ctx->hosts;
    const gs__algo_route_t saved = ctx->route;
    const size_t esize = gs__dtype_size(d->dtype);
    gs__coll_desc_t sub = *d;
    size_t *bounds = NULL;
    int *group = NULL;
    gs_status_t status;
    hier_t hr;
    int m;
    int chunk;

    if ((hosts->nhosts == 0) || (hosts->order == NULL)) {
        return gs__ring_allreduce(ctx, d); /* hosts unknown: one rank per host */
    }
    if ((ctx->size == 1) || (d->count == 0)) {
        if ((d->sendbuf != d->recvbuf) && (d->count > 0)) {
            memcpy(d->recvbuf, d->sendbuf, d->count * esize);
        }
        return GS_OK;
    }
    memset(&hr, 0, sizeof(hr));
    hr.ctx = ctx;
    hr.hosts = hosts;
    hr.count = d->count;
    hr.nparts = hosts->max_local;
    hr.host = hosts->host_of[ctx->rank];
    hr.lpos = hosts->pos[ctx->rank] - hosts->first[hr.host];
    m = hier_local_size(&hr, hr.host);
    chunk = (hr.lpos + 1) % m;
    if (sub.op == GS_OP_AVG) {
        sub.op = GS_OP_SUM; /* divided by n once, by the owner, after phase 2 */
    }
    bounds = malloc((size_t)(m + 1) * sizeof(*bounds));
    group = malloc((size_t)hosts->nhosts * sizeof(*group));
    if ((bounds == NULL) || (group == NULL)) {
        free(bounds);
        free(group);
        return gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory for the host layout",
                             ctx->opname);
    }
    for (int c = 0; c <= m; c++) {
        size_t plo, np;
        gs__algo_split((size_t)hr.nparts, m, (c < m) ? c : m - 1, &plo, &np);
        bounds[c] = hier_part_off(&hr, (c < m) ? (int)plo : (int)(plo + np));
    }

    /* 1. Reduce-scatter over this host's ranks: in the host segment of its
     * ranks when there is one, else the ring over them. */
    if (gs__shm_serves_host(ctx, m)) {
        status = gs__shm_rs_chunks(ctx, &sub, bounds);
    } else {
        ctx->route.order = hosts->order + hosts->first[hr.host];
        ctx->route.n = m;
        ctx->route.pos = hr.lpos;
        status = gs__ring_rs_chunks(ctx, &sub, bounds);
        ctx->route = saved;
    }

    /* 2. All-reduce of the owned chunk between hosts. */
    sub.sendbuf = sub.recvbuf;
    if ((status == GS_OK) && (hosts->nhosts > 1)) {
        status = hier_inter(&hr, &sub, chunk, group);
    }
    if ((status == GS_OK) && (d->op == GS_OP_AVG)) {
        gs__reduce_scale((uint8_t *)d->recvbuf + bounds[chunk] * esize,
                         bounds[chunk + 1] - bounds[chunk], d->dtype, ctx->size);
    }

    /* 3. All-gather over this host's ranks. */
    if ((status == GS_OK) && gs__shm_serves_host(ctx, m)) {
        status = gs__shm_ag_chunks(ctx, &sub, bounds);
    } else if (status == GS_OK) {
        ctx->route.order = hosts->order + hosts->first[hr.host];
        ctx->route.n = m;
        ctx->route.pos = hr.lpos;
        status = gs__ring_ag_chunks(ctx, &sub, bounds);
        ctx->route = saved;
    }
    free(bounds);
    free(group);
    return status;
}
