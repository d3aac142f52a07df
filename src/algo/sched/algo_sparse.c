/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compressed all-reduce for the sparsifiers (top-k, random-k): no second
 * sparsification, no server residual.
 *
 * top-k (GS_SCHEME_SPARSE_GATHER): every rank adds its worker residual, keeps its
 * own k largest, and sends the (index, value) payload to every peer (an
 * all-gather over all peers at once). Every rank decodes the n payloads in
 * rank order into an f32 sum (indices checked < count before any write;
 * GS_ERR_PROTOCOL naming the sender otherwise), divides once for AVG and
 * converts to the tensor's dtype: all ranks end bit-identical. Wire bytes
 * per rank: (n-1) * 8k, against 2(n-1)/n * 4 count for the uncompressed ring.
 *
 * random-k (GS_SCHEME_SPARSE_SHARED): the indices are a function of the seed, the
 * count and k (codec_randk.c), and the seed of every step is cfg.seed plus
 * the error-feedback step, equal on every rank. So every rank draws the
 * same k coordinates and only the values need summing: a plain dense
 * all-reduce of k f32 values (chosen by the cost model), 2(n-1)/n * 4k
 * bytes per rank, cheaper than an all-gather. One more value rides along,
 * a 12-bit digest of the seed: its sum must be n times each rank's own,
 * so ranks whose draws differ (another cfg.seed, an ef reset on one rank)
 * get GS_ERR_PROTOCOL instead of a silently wrong sum. The payload lives in
 * ctx->outer_buf, kept across calls (the nested all-reduce may move
 * ctx's scratch), so repeated calls of one size allocate nothing.
 *
 * Error feedback: the worker residual (gs_codec_encode with the caller's
 * gs_ef_t) keeps what this rank did not send. The sum is not sparsified
 * again, so there is nothing for a server residual to keep.
 *
 * Dense fallback (decided by gs__algo_plan in algo_select.c): when the union of the pairs would be
 * at least as large as the dense tensor (n * k * 8 >= count * dtype size
 * for top-k; k * 4 >= count * dtype size for random-k), the two-phase
 * scheme of algo_compressed.c runs instead. The rule uses only the
 * configuration, count, dtype and n, so every rank takes the same path
 * without a message.
 */
#include <stdlib.h>
#include <string.h>

#include "algo/sched/sched.h"
#include "algo/sched/algo_comp.h"
#include "core/dtype.h"
#include "core/error.h"

#define SPARSE_ALIGN 64
#define SPARSE_BODY_OFF (GS_CODEC_HEADER_BYTES + sizeof(uint64_t)) /* randk values */
#define SPARSE_DIGEST_MASK 0xfffu

static size_t sparse_align(size_t x)
{
    return (x + SPARSE_ALIGN - 1) & ~(size_t)(SPARSE_ALIGN - 1);
}

/* dst (count elements of dtype) = acc, rounded once per element. */
static void sparse_store(const float *acc, size_t count, gs_dtype_t dtype, void *dst)
{
    size_t i;

    switch (dtype) {
    case GS_DTYPE_F32:
        if ((void *)acc != dst) {
            memcpy(dst, acc, count * sizeof(float));
        }
        break;
    case GS_DTYPE_F64:
        for (i = 0; i < count; i++) {
            ((double *)dst)[i] = (double)acc[i];
        }
        break;
    case GS_DTYPE_F16:
        for (i = 0; i < count; i++) {
            ((uint16_t *)dst)[i] = gs__f32_to_f16(acc[i]);
        }
        break;
    default: /* GS_DTYPE_BF16 (the path checked a float dtype) */
        for (i = 0; i < count; i++) {
            ((uint16_t *)dst)[i] = gs__f32_to_bf16(acc[i]);
        }
        break;
    }
}

static void sparse_scale(float *v, size_t n, float s)
{
    for (size_t i = 0; i < n; i++) {
        v[i] *= s;
    }
}

/* The sum of the n gathered payloads into acc (count f32), divided by n
 * for AVG. Without zstd, codec_topk.c checks every payload and then sums
 * them in one blocked pass over acc; with the zstd stage, each payload is
 * decoded into acc in turn. Both give the same bits. */
static gs_status_t sparse_sum(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                              const gs__comp_plan_t *plan, uint8_t *recv, const size_t *lens,
                              const uint8_t **slots, size_t *cursor, uint8_t *codec_scratch,
                              float *acc)
{
    const size_t n = (size_t)ctx->size;
    const size_t cap = plan->cap;
    const float inv = 1.0f / (float)n;
    gs_status_t status = GS_OK;

    if (plan->f32.rc.zstd == GS_CODEC_ZSTD_OFF) {
        char why[192];
        size_t bad = 0;

        for (size_t q = 0; q < n; q++) {
            slots[q] = recv + q * cap;
        }
        /* The plan's parameters are the whole tensor's (seed 0), as a
         * payload's header states them. */
        status =
            gs__codec_topk_sum(&plan->f32.p, slots, lens, n, (d->op == GS_OP_AVG) ? &inv : NULL,
                               acc, cursor, &bad, why, sizeof(why));
        if (status != GS_OK) {
            status = gs__error_set(status,
                                   "%s: the top-k payload from rank %zu is bad: malformed topk "
                                   "payload: %s",
                                   ctx->opname, bad, why);
        }
        return status;
    }
    memset(acc, 0, d->count * sizeof(float));
    for (size_t q = 0; (q < n) && (status == GS_OK); q++) {
        status = gs__codec_plan_decode(&plan->f32, recv + q * cap, lens[q], d->count, codec_scratch,
                                       plan->scratch, acc, GS_CODEC_MODE_ADD);
        if (status != GS_OK) {
            status = gs__error_wrap(status, "%s: the top-k payload from rank %zu is bad: %s",
                                    ctx->opname, q, gs__error_get());
        }
    }
    if ((status == GS_OK) && (d->op == GS_OP_AVG)) {
        sparse_scale(acc, d->count, inv);
    }
    return status;
}

/* top-k: all-gather of the payloads, sum in rank order. */
static gs_status_t sparse_gather(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                                 const gs__codec_resolved_t *rc)
{
    const size_t n = (size_t)ctx->size;
    const int r = ctx->rank;
    const int f32 = (d->dtype == GS_DTYPE_F32);
    gs__comp_plan_t plan;
    size_t cap, sc, total;
    uint8_t *base, *recv, *codec_scratch;
    size_t *lens, *cursor;
    const uint8_t **slots;
    float *acc;
    gs__algo_req_t *reqs;
    void *mem = NULL;
    gs_status_t status;

    status = gs__comp_plan(ctx, rc, d->count, d->dtype, &plan);
    if (status != GS_OK) {
        return status;
    }
    cap = plan.cap;
    sc = plan.scratch;
    total = n * cap + sparse_align(2 * n * sizeof(size_t)) + sparse_align(n * sizeof(void *)) +
            (f32 ? 0 : sparse_align(d->count * sizeof(float))) + sparse_align(sc + 1) +
            sparse_align(2 * n * sizeof(gs__algo_req_t));
    status = gs__algo_scratch(ctx, total + SPARSE_ALIGN, &mem);
    if (status != GS_OK) {
        return status;
    }
    base = (uint8_t *)sparse_align((size_t)mem);
    recv = base;
    base += n * cap;
    lens = (size_t *)(void *)base;
    cursor = lens + n;
    base += sparse_align(2 * n * sizeof(size_t));
    slots = (const uint8_t **)(void *)base;
    base += sparse_align(n * sizeof(void *));
    acc = f32 ? (float *)d->recvbuf : (float *)(void *)base;
    base += f32 ? 0 : sparse_align(d->count * sizeof(float));
    codec_scratch = base;
    base += sparse_align(sc + 1);
    reqs = (gs__algo_req_t *)(void *)base;

    /* Our payload sits in our own receive slot and goes to every peer. The
     * input is read only here, so recvbuf may alias sendbuf. */
    status = gs__codec_plan_encode(&plan.in, d->sendbuf, d->count, d->ef, codec_scratch, sc,
                                   recv + (size_t)r * cap, cap, &lens[r]);
    if (status == GS_OK) {
        const gs__comp_xchg_t x = {
            .send = recv,
            .recv = recv,
            .cap = cap,
            .send_len = lens,
            .recv_len = lens,
            .reqs = reqs,
            .send_same_slot = 1,
        };

        status = gs__comp_exchange(ctx, d, 0, &x);
    }
    if (status == GS_OK) {
        status = sparse_sum(ctx, d, &plan, recv, lens, slots, cursor, codec_scratch, acc);
    }
    if (status == GS_OK) {
        sparse_store(acc, d->count, d->dtype, d->recvbuf);
    }
    return status;
}

/* random-k: same draw on every rank, dense all-reduce of the k values. */
static gs_status_t sparse_shared(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                                 const gs__codec_resolved_t *rc_call, gs_algo_t inner)
{
    /* The dense all-reduce of the k values runs as the planner chose for its size. */
    const gs__algo_plan_t sum_plan = {
        .path = GS_PATH_HOST, .scheme = GS_SCHEME_PLAIN, .algo = inner, .why = "sparse"};
    gs__codec_resolved_t rc = *rc_call;
    const float n = (float)ctx->size;
    gs__comp_plan_t plan;
    gs__coll_desc_t sum;
    size_t cap, len = 0, sc = 0, k;
    uint8_t *payload;
    float *vals, digest;
    uint64_t seed;
    void *scratch = NULL, *keep = NULL;
    gs_status_t status;

    /* The caller's configuration with the zstd stage off: the values are
     * summed as raw f32, so there is no payload to compress. */
    rc.zstd = GS_CODEC_ZSTD_OFF;
    status = gs__comp_plan(ctx, &rc, d->count, d->dtype, &plan);
    if (status != GS_OK) {
        return status;
    }
    cap = plan.cap;
    sc = plan.scratch;
    /* Not ctx's scratch: the nested all-reduce may grow it, moving it. */
    status = gs__algo_grow(ctx, &ctx->outer_buf, &ctx->outer_cap, cap + sizeof(float), &keep);
    if (status != GS_OK) {
        return status;
    }
    payload = keep;
    if (sc > 0) {
        status = gs__algo_scratch(ctx, sc, &scratch);
    }
    if (status == GS_OK) {
        status = gs__codec_plan_encode(&plan.in, d->sendbuf, d->count, d->ef, scratch, sc, payload,
                                       cap, &len);
    }
    if (status == GS_OK) {
        k = (len - SPARSE_BODY_OFF) / sizeof(float);
        vals = (float *)(void *)(payload + SPARSE_BODY_OFF);
        memcpy(&seed, payload + GS_CODEC_HEADER_BYTES, sizeof(seed));
        digest = (float)(gs__codec_seed32(seed) & SPARSE_DIGEST_MASK);
        vals[k] = digest;
        memset(&sum, 0, sizeof(sum));
        sum.kind = GS_COLL_ALLREDUCE;
        sum.sendbuf = vals;
        sum.recvbuf = vals;
        sum.count = k + 1;
        sum.dtype = GS_DTYPE_F32;
        sum.op = GS_OP_SUM;
        sum.tag = d->tag;
        sum.algo = inner;
        status = gs__algo_run_host(ctx, &sum, &sum_plan);
        if ((status == GS_OK) && (vals[k] != digest * n)) {
            status = gs__error_set(GS_ERR_PROTOCOL,
                                   "%s: the ranks drew different random-k coordinates (seed "
                                   "digest sum %g, expected %g): cfg.seed or the error-feedback "
                                   "step differ between ranks; use one seed everywhere and "
                                   "create and reset the gs_ef_t on all ranks together",
                                   ctx->opname, (double)vals[k], (double)(digest * n));
        }
    }
    if (status == GS_OK) {
        if (d->op == GS_OP_AVG) {
            sparse_scale(vals, k, 1.0f / n);
        }
        /* The inner all-reduce may have moved ctx's scratch: fetch it again. */
        if (sc > 0) {
            status = gs__algo_scratch(ctx, sc, &scratch);
        }
    }
    if (status == GS_OK) {
        status = gs__codec_plan_decode(&plan.in, payload, len, d->count, scratch, sc, d->recvbuf,
                                       GS_CODEC_MODE_SET);
    }
    return status;
}

gs_status_t gs__sparse_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                                 const gs__algo_plan_t *plan)
{
    gs__codec_resolved_t rc;
    gs_status_t status = gs__ef_sync_host((gs_ef_t)d->ef);

    if (status == GS_OK) {
        status = gs__codec_resolve(d->codec, &rc);
    }
    if (status != GS_OK) {
        return status;
    }
    return (plan->scheme == GS_SCHEME_SPARSE_SHARED) ? sparse_shared(ctx, d, &rc, plan->inner)
                                                     : sparse_gather(ctx, d, &rc);
}
