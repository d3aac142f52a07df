/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Selection: the only place that decides how a call runs (gs__algo_plan).
 * Three choices, each a row of a table below, in this order:
 * - the path: host buffers go over the communicator's transport; device
 *   buffers go through NCCL when the context has it and the call is plain
 *   with no gradsync algorithm forced, and are staged through pinned host
 *   memory otherwise (path_table);
 * - the scheme: plain, or for a codec the two-phase scheme, or a sparse
 *   one when the sparse result stays smaller than the tensor (a rule on
 *   the configuration, count, dtype and world size that every rank
 *   evaluates alike, without a message);
 * - the algorithm (plain scheme): the caller's explicit choice
 *   (opts.algo), then GS_ALGO, then the cost model.
 * Its state is the communicator's gs__algo_select_t: the policy, the cost
 * model, and the "already logged" bits (each collective, path and scheme,
 * size class is logged once at INFO).
 */
#include <stdio.h>
#include <string.h>

#include "algo/select/select.h"
#include "algo/ctx/ctx_shm.h"
#include "compress/codec.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"

/* The host layout of the context as the model sees it (unknown: one rank per host). */
static gs__algo_shape_t algo_shape(const gs__algo_ctx_t *ctx)
{
    gs__algo_shape_t sh = {.n = ctx->size, .nhosts = ctx->size, .min_local = 1, .max_local = 1};

    if (ctx->hosts.nhosts > 0) {
        sh.nhosts = ctx->hosts.nhosts;
        sh.min_local = ctx->hosts.min_local;
        sh.max_local = ctx->hosts.max_local;
    }
    if ((ctx->shm != NULL) && (ctx->shm->n == ctx->size)) { /* the whole communicator */
        sh.shm = ctx->shm->cma ? 2 : 1;
        sh.shm_slot = ctx->shm->slot_bytes;
    }
    return sh;
}

/* Bytes the model is asked about: the whole vector, or one rank's block. */
static size_t algo_bytes(const gs__coll_desc_t *d)
{
    return d->count * gs__dtype_size(d->dtype);
}

/* Size class of a message: 0 for empty, else floor(log2 bytes) + 1, at most 63. */
static int algo_size_class(size_t bytes)
{
    int c = 0;

    while ((bytes > 0) && (c < 63)) {
        bytes >>= 1;
        c++;
    }
    return c;
}

/*
 * The scheme of a compressed reduce-scatter or all-gather (the API let
 * only those kinds through with a codec): each block encoded once and
 * moved all-to-all, or, for a reduce-scatter of equal blocks on several
 * hosts with the same number (>= 2) of ranks each, the two-hop scheme when
 * the cost model prices it below the flat one. The codec's ratio is its
 * largest payload over the raw block; every rank computes the same.
 * *cost_out gets both prices for the log (-1 where not offered).
 */
static gs__scheme_t algo_shard_scheme(const gs__algo_select_t *sel, const gs__algo_ctx_t *ctx,
                                      const gs__coll_desc_t *d, double cost_out[2])
{
    const gs__algo_shape_t shape = algo_shape(ctx);
    const size_t raw = d->count * gs__dtype_size(d->dtype);
    size_t enc = 0;

    cost_out[0] = -1.0;
    cost_out[1] = -1.0;
    if ((d->kind != GS_COLL_REDUCE_SCATTER) || (raw == 0) ||
        (gs_codec_encoded_size(d->codec, d->count, d->dtype, &enc) != GS_OK)) {
        gs__error_clear();
        return GS_SCHEME_SHARD;
    }
    cost_out[0] = gs__algo_cost_shard_rs(&sel->model, &shape, raw, (double)enc / (double)raw, 0);
    cost_out[1] = gs__algo_cost_shard_rs(&sel->model, &shape, raw, (double)enc / (double)raw, 1);
    return ((cost_out[1] >= 0.0) && (cost_out[1] < cost_out[0])) ? GS_SCHEME_SHARD_HIER
                                                                 : GS_SCHEME_SHARD;
}

/* INFO line, once per (collective, path and scheme, size class) per
 * communicator. The host path's plain line reads as it always has. */
static void algo_log_choice(gs__algo_select_t *sel, const gs__algo_ctx_t *ctx,
                            const gs__coll_desc_t *d, const gs__algo_plan_t *plan)
{
    const size_t bytes = algo_bytes(d);
    const int cls = algo_size_class(bytes);
    const uint64_t bit = 1ull << cls;
    const gs__algo_shape_t shape = algo_shape(ctx);
    const int row = (int)plan->path * GS_SCHEME_COUNT + (int)plan->scheme;
    char costs[320];
    char what[224];
    size_t used = 0;

    if (!gs__log_enabled(GS_LOG_INFO, GS_SUBSYS_ALGO) || ((sel->logged[d->kind][row] & bit) != 0)) {
        return;
    }
    sel->logged[d->kind][row] |= bit;
    costs[0] = '\0';
    for (int a = 1; (a < GS_ALGO_COUNT) && (used < sizeof(costs)) &&
                    (plan->scheme == GS_SCHEME_PLAIN) && (plan->algo != GS_ALGO_NATIVE);
         a++) {
        const double c = gs__algo_cost_shape(&sel->model, d->kind, (gs_algo_t)a, &shape, bytes,
                                             ctx->slice_bytes);
        if (c >= 0.0) {
            const int w = snprintf(costs + used, sizeof(costs) - used, "%s%s %.1f us",
                                   (used > 0) ? ", " : "", gs__algo_name((gs_algo_t)a), c * 1e6);
            used += (w > 0) ? (size_t)w : 0;
        }
    }
    if ((plan->scheme == GS_SCHEME_SHARD) || (plan->scheme == GS_SCHEME_SHARD_HIER)) {
        double sc[2];

        algo_shard_scheme(sel, ctx, d, sc);
        if (sc[0] >= 0.0) {
            snprintf(costs, sizeof(costs), "block-wise %.1f us, two-hop %s", sc[0] * 1e6,
                     (sc[1] >= 0.0) ? "" : "not offered (hosts unequal or one rank each)");
            if (sc[1] >= 0.0) {
                snprintf(costs + strlen(costs), sizeof(costs) - strlen(costs), "%.1f us",
                         sc[1] * 1e6);
            }
        }
    }
    snprintf(what, sizeof(what), "%s%s%s%s",
             (plan->scheme == GS_SCHEME_PLAIN) ? gs__algo_name(plan->algo)
                                               : gs__scheme_name(plan->scheme),
             (plan->scheme == GS_SCHEME_PLAIN) ? ""
             : plan->device_codec              ? " compressed (GPU codecs)"
                                               : " compressed",
             (plan->path == GS_PATH_HOST) ? "" : " on the ",
             (plan->path == GS_PATH_HOST) ? "" : gs__path_name(plan->path));
    if (plan->path != GS_PATH_HOST) {
        snprintf(what + strlen(what), sizeof(what) - strlen(what), " path");
    }
    if ((plan->scheme == GS_SCHEME_PLAIN) && (plan->algo == GS_ALGO_SHM) &&
        (d->kind == GS_COLL_ALLREDUCE)) {
        snprintf(what + strlen(what), sizeof(what) - strlen(what), " (%s;",
                 gs__shm_design_name(plan->design));
        for (int k = 0; k < GS_SHM_DESIGN_COUNT; k++) {
            const double c = gs__algo_cost_shm(&sel->model, &shape, bytes, k);
            if (c >= 0.0) {
                snprintf(what + strlen(what), sizeof(what) - strlen(what), " %s %.1f us",
                         gs__shm_design_name(k), c * 1e6);
            } else {
                snprintf(what + strlen(what), sizeof(what) - strlen(what), " %s n/a",
                         gs__shm_design_name(k));
            }
        }
        snprintf(what + strlen(what), sizeof(what) - strlen(what), ")");
    }
    GS_INFO(ALGO, "%s of %zu bytes (size class %llu..%llu) on %d ranks, %d hosts: %s (%s%s%s)",
            gs__coll_name(d->kind), bytes, (cls == 0) ? 0ull : (unsigned long long)(bit >> 1),
            (cls == 0) ? 0ull : (unsigned long long)(bit - 1ull), ctx->size, shape.nhosts, what,
            plan->why, (costs[0] != '\0') ? "; model: " : "", costs);
}

/*
 * The scheme of a compressed all-reduce. Sparsifiers take their own
 * schemes unless the result would be at least as dense as the tensor:
 * random-k when k values are fewer bytes than the tensor, top-k when the
 * union of n * k (index, value) pairs is. Anything the two-phase scheme
 * would reject goes there, to be reported.
 */
static gs__scheme_t algo_scheme(const gs__coll_desc_t *d, int n, size_t *k_out)
{
    gs__codec_resolved_t rc;
    gs__codec_params_t p;
    size_t dense, pair_bytes;

    if (d->codec == NULL) {
        return GS_SCHEME_PLAIN;
    }
    if ((gs__codec_resolve(d->codec, &rc) != GS_OK) || ((rc.ops->flags & GS_CODEC_F_SPARSE) == 0) ||
        !gs__dtype_is_float(d->dtype) || (d->count > GS_CODEC_MAX_COUNT)) {
        gs__error_clear();
        return GS_SCHEME_TWO_PHASE;
    }
    if (gs__codec_params(&rc, d->count, &p) != GS_OK) {
        gs__error_clear(); /* past 2^32 - 1 elements: the chunks of the two-phase path may fit */
        return GS_SCHEME_TWO_PHASE;
    }
    dense = d->count * gs__dtype_size(d->dtype); /* count <= SIZE_MAX / 16: no overflow */
    if (rc.ops->wire_id == GS_CODEC_RANDK) {
        *k_out = (size_t)p.param;
        return ((size_t)p.param * sizeof(float) >= dense) ? GS_SCHEME_TWO_PHASE
                                                          : GS_SCHEME_SPARSE_SHARED;
    }
    /* top-k: the union of n * k pairs against the dense tensor, as
     * n * 8k >= dense without overflow. */
    pair_bytes = (size_t)p.param * (sizeof(uint32_t) + sizeof(float));
    return (pair_bytes >= (dense + (size_t)n - 1) / (size_t)n) ? GS_SCHEME_TWO_PHASE
                                                               : GS_SCHEME_SPARSE_GATHER;
}

/*
 * Whether the codec kernels can run a two-phase all-reduce of *d on the
 * device: a build with CUDA, f32 data (the kernels take f32; other float
 * types are staged and converted on the CPU) and no zstd stage (zstd runs
 * on the CPU only).
 */
static int algo_device_codec(const gs__coll_desc_t *d)
{
#ifdef GS_WITH_CUDA
    gs__codec_resolved_t rc;

    if ((d->dtype != GS_DTYPE_F32) || (gs__codec_resolve(d->codec, &rc) != GS_OK)) {
        gs__error_clear();
        return 0;
    }
    return rc.zstd == GS_CODEC_ZSTD_OFF;
#else
    (void)d;
    return 0;
#endif
}

/*
 * What a CUDA-aware MPI's native collectives take without any host work
 * (transport/mpi: no f16/bf16, an average is a host-side scale, counts
 * above INT_MAX are declined, and a declined call would fall back to
 * gradsync's algorithms, which cannot read device memory).
 */
static int algo_mpi_cuda_ok(const gs__coll_desc_t *d)
{
    const int kind_ok = (d->kind == GS_COLL_ALLREDUCE) || (d->kind == GS_COLL_BROADCAST) ||
                        (d->kind == GS_COLL_ALLGATHER) || (d->kind == GS_COLL_REDUCE_SCATTER);
    const int dtype_ok = (d->dtype != GS_DTYPE_F16) && (d->dtype != GS_DTYPE_BF16);
    const int op_ok =
        (d->kind == GS_COLL_BROADCAST) || (d->kind == GS_COLL_ALLGATHER) || (d->op != GS_OP_AVG);

    return kind_ok && dtype_ok && op_ok && (d->count <= 2147483647u);
}

/*
 * The path of device buffers: NCCL when the context has it and either the
 * call is plain with no gradsync algorithm forced (GS_ALGO_AUTO, or
 * GS_ALGO_NATIVE, which asks for the transport's own collectives), or it
 * is a compressed call whose codec runs on the device (the two-phase
 * all-reduce, the block-wise reduce-scatter or all-gather: its payloads
 * then move by grouped NCCL sends and receives). Otherwise staged
 * through host memory, where every gradsync algorithm runs as on host
 * buffers (and the codec kernels still run on the device when they can).
 */
static gs__path_t algo_path(const gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                            const gs__algo_plan_t *plan)
{
    /* A capability whose runner is not built in (no NCCL in this build) is none. */
    const int nccl = ((ctx->dev_caps & GS_DEV_CAP_NCCL) != 0) && gs__algo_path_built(GS_PATH_NCCL);

    if (d->mem != GS_MEM_DEVICE) {
        return GS_PATH_HOST;
    }
    /* NCCL has no bitwise reductions: those calls are staged, where the CPU reduces. */
    if (nccl && (plan->scheme == GS_SCHEME_PLAIN) && !gs__op_is_bitwise(d->op) &&
        ((plan->algo == GS_ALGO_AUTO) || (plan->algo == GS_ALGO_NATIVE))) {
        return GS_PATH_NCCL;
    }
    if (nccl && plan->device_codec) {
        return GS_PATH_NCCL;
    }
    if (((ctx->dev_caps & GS_DEV_CAP_MPI_CUDA) != 0) && (plan->scheme == GS_SCHEME_PLAIN) &&
        ((plan->algo == GS_ALGO_AUTO) || (plan->algo == GS_ALGO_NATIVE)) && algo_mpi_cuda_ok(d)) {
        return GS_PATH_MPI_CUDA;
    }
    return GS_PATH_STAGED;
}

gs_status_t gs__algo_plan(gs__algo_select_t *sel, const gs__algo_ctx_t *ctx,
                          const gs__coll_desc_t *d, gs__algo_plan_t *plan_out)
{
    gs__algo_plan_t plan = {.path = GS_PATH_HOST,
                            .scheme = GS_SCHEME_PLAIN,
                            .algo = d->algo,
                            .inner = GS_ALGO_AUTO,
                            .why = "caller"};

    if ((unsigned)d->kind >= GS_COLL_KIND_COUNT) {
        return gs__error_set(GS_ERR_INTERNAL, "%s: unknown collective %d", ctx->opname,
                             (int)d->kind);
    }
    if (plan.algo == GS_ALGO_AUTO) {
        plan.algo = sel->policy.forced[d->kind];
        plan.why = "GS_ALGO";
    }
    if (d->kind == GS_COLL_ALLREDUCE) {
        size_t k = 0;

        plan.scheme = algo_scheme(d, ctx->size, &k);
        if (plan.scheme == GS_SCHEME_SPARSE_SHARED) {
            /* Its dense all-reduce of the k values and the seed digest, on the host. */
            const gs__algo_shape_t shape = algo_shape(ctx);
            plan.inner = gs__algo_choose_shape(&sel->model, GS_COLL_ALLREDUCE, &shape,
                                               (k + 1) * sizeof(float), ctx->slice_bytes);
        }
    } else if (d->codec != NULL) {
        double costs[2];

        plan.scheme = algo_shard_scheme(sel, ctx, d, costs);
    }
    /* The codec kernels serve the two-phase all-reduce and the block-wise
     * reduce-scatter and all-gather of fixed blocks (the v calls take host
     * buffers only). */
    plan.device_codec = (d->mem == GS_MEM_DEVICE) &&
                        ((plan.scheme == GS_SCHEME_TWO_PHASE) ||
                         ((plan.scheme == GS_SCHEME_SHARD) && !gs__coll_is_v(d->kind))) &&
                        algo_device_codec(d);
    plan.path = algo_path(ctx, d, &plan);
    if (!gs__algo_path_built(plan.path)) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "%s: the %s path is not built into this library (device buffers "
                             "need a build with GS_WITH_CUDA)",
                             ctx->opname, gs__path_name(plan.path));
    }
    if (plan.scheme != GS_SCHEME_PLAIN) {
        plan.algo = GS_ALGO_AUTO;
        plan.why = "codec";
    } else if ((plan.path == GS_PATH_NCCL) || (plan.path == GS_PATH_MPI_CUDA)) {
        plan.algo = GS_ALGO_NATIVE;
        plan.why = "device buffers";
    } else {
        if (plan.algo == GS_ALGO_AUTO) {
            const gs__algo_shape_t shape = algo_shape(ctx);
            plan.algo = gs__algo_choose_shape(&sel->model, d->kind, &shape, algo_bytes(d),
                                              ctx->slice_bytes);
            plan.why = "cost model";
        }
        if ((plan.algo == GS_ALGO_AUTO) || !gs__algo_offers(d->kind, plan.algo)) {
            return gs__error_set(GS_ERR_UNSUPPORTED, "%s: algorithm '%s' does not implement %s",
                                 ctx->opname, gs__algo_name(plan.algo), gs__coll_name(d->kind));
        }
        if (plan.algo == GS_ALGO_SHM) {
            const gs__algo_shape_t shape = algo_shape(ctx);
            double c;

            plan.design = (sel->shm_design > 0)
                              ? sel->shm_design - 1
                              : gs__algo_shm_design(&sel->model, &shape, algo_bytes(d), &c);
        }
        /* Memory traffic is counted where the bytes move through memory: the host
         * segment, or pair rings when every pair is on shared memory (not TCP). */
        if ((ctx->hosts.nhosts == 1) && (plan.path == GS_PATH_HOST) &&
            ((plan.algo == GS_ALGO_SHM) || sel->model.flat_intra)) {
            plan.traffic =
                gs__algo_traffic(d->kind, plan.algo, plan.design, ctx->size, algo_bytes(d));
        }
    }
    algo_log_choice(sel, ctx, d, &plan);
    *plan_out = plan;
    return GS_OK;
}

gs_status_t gs__algo_run(gs__algo_select_t *sel, gs__algo_ctx_t *ctx, gs__coll_desc_t *d)
{
    gs__algo_plan_t plan;
    gs_status_t status = gs__algo_plan(sel, ctx, d, &plan);

    if (status != GS_OK) {
        return status;
    }
    d->algo = plan.algo;
    d->design = plan.design;
    d->traffic = plan.traffic;
    return gs__algo_exec(ctx, d, &plan);
}
