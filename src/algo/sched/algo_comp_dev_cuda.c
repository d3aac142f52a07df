/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The two-phase compressed all-reduce on device buffers (CUDA builds): the
 * scheme of algo_compressed.c with the codec kernels of kernels/ instead of
 * the CPU codecs, so that the gradient, the residuals and the sums never
 * leave the GPU; only the encoded payloads move.
 *
 *   1. Every rank encodes each of the n chunks of its input (balanced
 *      split) with its worker residual (encode with fused error feedback).
 *   2. All-to-all of the payloads: grouped ncclSend/ncclRecv on the
 *      caller's stream, or (ranks sharing a GPU, no NCCL) through pinned
 *      host memory over the host transport.
 *   3. Rank r decode-accumulates the n copies of its chunk into an f32
 *      sum, in rank order, multiplies it by 1/n for AVG, and encodes it
 *      with its server residual.
 *   4. All-gather of the encoded sums (the same two ways); every rank
 *      decodes all n, its own included, into recvbuf.
 *
 * The arithmetic is the CPU path's, bit for bit (codec_kernels.h: the
 * kernels and the CPU codecs share codec_math.h; the sum is taken in the
 * same order and the average multiplies by the same 1/n), and the seeds of
 * the stochastic codecs are derived the same way (gs__codec_step_seed of
 * the error-feedback step): a device all-reduce gives the bits a host
 * all-reduce of the same data gives. Unsliced (one
 * payload per chunk): a GPU encodes a chunk faster than a link moves it.
 * Bodies travel without the 32-byte header over NCCL (both sides know
 * every length from the plan); over the host transport they carry it and
 * it is checked, as on the host path. A top-k body from a peer is checked
 * index by index on the device before anything is decoded (one flag per
 * sender, read back at the end: GS_ERR_PROTOCOL naming the rank).
 *
 * Reduce-scatter and all-gather (fixed blocks) run the same way, as the
 * host path's sharded shapes (algo_compressed.c): reduce-scatter is phases
 * 1 and 3 with chunk c = rank c's block, our own block added exactly in
 * its rank-order place and the f32 sum copied to recvbuf; all-gather is
 * phase 4 alone, our block encoded once (no error feedback) and copied
 * exactly, the others decoded into place. Same bits as the host path.
 *
 * Residuals: the worker and server residuals of the caller's gs_ef_t get
 * device copies (ef->dev), made on first use from the host residual and
 * owned by the gs_ef_t (freed, zeroed and read back through its hooks, so
 * compress/ needs no CUDA); while they are current the host copy is stale
 * and a host call reads them back first (gs__ef_sync_host).
 */
#include "algo/sched/algo_dev.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "algo/sched/algo_comp.h"
#include "codec_kernels.h"
#include "compress/codec.h"
#include "core/dtype.h"
#include "core/error.h"
#include "reduce_kernels.h"
#ifdef GS_WITH_NCCL
#include "device/nccl_engine.h"
#endif

#define DCOMP_ALIGN 256

enum { DCOMP_ALLREDUCE = 0, DCOMP_REDUCE_SCATTER = 1, DCOMP_ALLGATHER = 2 };

/* A residual's device copy (gs__ef_dev_t first: the gs_ef_t sees only that). */
typedef struct dcomp_res {
    gs__ef_dev_t base;
    float *res; /* count f32 on device */
    size_t count;
    int device;
} dcomp_res_t;

/* The hooks run on the thread of a gs_ef_t call (gs_ef_destroy, a host
 * call that reads the residual back), with the residual's device current
 * for them and the caller's restored after. gs_ef_reset zeroes only the
 * host copy and marks the device copy stale, so that the next device call
 * uploads it on its own stream. */
static void dcomp_res_release(gs__ef_dev_t *self)
{
    dcomp_res_t *r = (dcomp_res_t *)self;
    gs__dev_guard_t guard;

    gs__dev_take_back(gs__dev_guard_enter(&guard, r->device));
    gs__dev_take_back(cudaFree(r->res));
    gs__dev_guard_leave(&guard);
    free(r);
}

static gs_status_t dcomp_res_to_host(gs__ef_dev_t *self, float *residual)
{
    dcomp_res_t *r = (dcomp_res_t *)self;
    gs__dev_guard_t guard;
    cudaError_t err = (cudaError_t)gs__dev_guard_enter(&guard, r->device);

    if (err == cudaSuccess) {
        err = cudaMemcpy(residual, r->res, r->count * sizeof(float), cudaMemcpyDeviceToHost);
    }
    gs__dev_guard_leave(&guard);
    if (err == cudaSuccess) {
        return GS_OK;
    }
    gs__dev_take_back(err);
    return gs__error_set(GS_ERR_CUDA,
                         "reading the device residual (CUDA device %d) back failed: %s (%s)",
                         r->device, cudaGetErrorString(err), cudaGetErrorName(err));
}

/* The device residual of @p ef (NULL when ef is), made current: created
 * on first use, refreshed from the host copy when a host call used it
 * since. */
static gs_status_t dcomp_residual(gs__algo_ctx_t *ctx, gs_ef_t ef, void *stream, float **out)
{
    dcomp_res_t *r;
    gs_status_t status;

    *out = NULL;
    if (ef == GS_EF_NULL) {
        return GS_OK;
    }
    r = (dcomp_res_t *)ef->dev;
    if ((r != NULL) && (r->device != ctx->dev->device)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: this gs_ef_t's residual lives on CUDA device %d, the call's "
                             "buffers on device %d: use one gs_ef_t per device",
                             ctx->opname, r->device, ctx->dev->device);
    }
    if (r == NULL) {
        r = calloc(1, sizeof(*r));
        if (r == NULL) {
            return gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory", ctx->opname);
        }
        status = gs__dev_cuda(ctx, cudaMalloc((void **)&r->res, (ef->count + 1) * sizeof(float)),
                              "cudaMalloc (device residual)");
        if (status != GS_OK) {
            free(r);
            return status;
        }
        r->base.release = dcomp_res_release;
        r->base.to_host = dcomp_res_to_host;
        r->count = ef->count;
        r->device = ctx->dev->device;
        ef->dev = &r->base;
        ef->dev_current = 0;
    }
    if (!ef->dev_current) {
        status = gs__dev_cuda(ctx,
                              cudaMemcpyAsync(r->res, ef->residual, ef->count * sizeof(float),
                                              cudaMemcpyHostToDevice, (cudaStream_t)stream),
                              "cudaMemcpyAsync (residual to the device)");
        if (status != GS_OK) {
            return status;
        }
        ef->dev_current = 1;
    }
    *out = r->res;
    return GS_OK;
}

/* Everything one call needs. */
typedef struct dcomp {
    gs__algo_ctx_t *ctx;
    const gs__coll_desc_t *d;
    gs__codec_resolved_t rc;
    gs_codec_kind_t kind;
    cudaStream_t st;
    int n, r, over_nccl;
    int mode;              /* DCOMP_ALLREDUCE, DCOMP_REDUCE_SCATTER or DCOMP_ALLGATHER */
    uint64_t wseed, sseed; /* worker and server seeds of this step */
    size_t cap;            /* slot bytes: header + largest body, aligned */
    uint8_t *send;         /* device, n slots: phase 1 payloads (ours in slot r) */
    uint8_t *recv;         /* device, n slots: phase 1 payloads of our chunk */
    uint8_t *sums;         /* device, n slots: encoded sums (ours in slot r) */
    float *acc;            /* device: our chunk's f32 sum */
    void *work;            /* device: codec workspace */
    size_t work_size;
    int *bad;           /* device: n flags, one per sender */
    float *wres, *sres; /* device residuals (worker: count, server: own_len) or NULL */
    gs_ef_t server;     /* host handle of the server residual, or NULL */
    /* Host bookkeeping, in the context's scratch (no allocation per call):
     * body lengths of the two exchanges, the host exchange's lengths and
     * requests, the checks' flags read back. */
    size_t *lens;         /* 2n */
    size_t *hlens;        /* 2n */
    gs__algo_req_t *reqs; /* 2n */
    int *flags;           /* n */
} dcomp_t;

static size_t dcomp_align(size_t x)
{
    return (x + DCOMP_ALIGN - 1) & ~(size_t)(DCOMP_ALIGN - 1);
}

/* Chunk c's elements: a balanced split of the all-reduce's vector, or
 * rank c's block of a reduce-scatter or all-gather (*off from the start
 * of the n-block buffer). */
static void dcomp_chunk(const dcomp_t *x, int c, size_t *off, size_t *len)
{
    if (x->mode == DCOMP_ALLREDUCE) {
        gs__algo_split(x->d->count, x->n, c, off, len);
    } else {
        *off = (size_t)c * x->d->count;
        *len = x->d->count;
    }
}

/* The kernels' parameters for @p len elements with @p seed, and the body size. */
static gs_status_t dcomp_params(const dcomp_t *x, size_t len, uint64_t seed,
                                gs__k_codec_params_t *kp, size_t *body_out)
{
    gs__codec_params_t p;
    gs_status_t status = gs__codec_params(&x->rc, len, &p);

    if (status != GS_OK) {
        return status;
    }
    p.seed = seed;
    kp->count = p.count;
    kp->block = p.block;
    kp->param = p.param;
    kp->seed = p.seed;
    *body_out = x->rc.ops->encoded_size(&p);
    return GS_OK;
}

/* Slots, workspace and residuals; every size from the plan, alike on every rank. */
static gs_status_t dcomp_layout(dcomp_t *x)
{
    gs__algo_ctx_t *ctx = x->ctx;
    size_t own_off, own_len, max_body = 0, work = 0, total, o = 0;
    gs_status_t status = GS_OK;
    uint8_t *base = NULL;
    gs_ef_t ef = (gs_ef_t)x->d->ef;

    dcomp_chunk(x, x->r, &own_off, &own_len);
    for (int c = 0; (c < x->n) && (status == GS_OK); c++) {
        size_t off, len, body;
        gs__k_codec_params_t kp;

        dcomp_chunk(x, c, &off, &len);
        status = dcomp_params(x, len, x->wseed, &kp, &body);
        if (status == GS_OK) {
            const size_t w = gs_k_codec_workspace_size(x->kind, &kp);

            max_body = (body > max_body) ? body : max_body;
            work = (w > work) ? w : work;
        }
    }
    if (status == GS_OK) {
        gs__k_codec_params_t kp;
        size_t body, w;

        status = dcomp_params(x, own_len, x->sseed, &kp, &body);
        w = gs_k_codec_workspace_size(x->kind, &kp);
        work = (w > work) ? w : work;
    }
    if (status != GS_OK) {
        return status;
    }
    x->cap = dcomp_align(GS_CODEC_HEADER_BYTES + max_body);
    x->work_size = work;
    total = 3 * (size_t)x->n * x->cap + dcomp_align(own_len * sizeof(float) + 1) +
            dcomp_align(work + 1) + dcomp_align((size_t)x->n * sizeof(int));
    status = gs__dev_workspace(ctx, total, x->st, (void **)&base);
    if (status != GS_OK) {
        return status;
    }
    x->send = base + o;
    o += (size_t)x->n * x->cap;
    x->recv = base + o;
    o += (size_t)x->n * x->cap;
    x->sums = base + o;
    o += (size_t)x->n * x->cap;
    x->acc = (float *)(void *)(base + o);
    o += dcomp_align(own_len * sizeof(float) + 1);
    x->work = (work > 0) ? base + o : NULL;
    o += dcomp_align(work + 1);
    x->bad = (int *)(void *)(base + o);
    status = gs__dev_cuda(ctx, cudaMemsetAsync(x->bad, 0, (size_t)x->n * sizeof(int), x->st),
                          "cudaMemsetAsync");
    if (status == GS_OK) {
        status = dcomp_residual(ctx, ef, x->st, &x->wres);
    }
    if ((status == GS_OK) && (ef != GS_EF_NULL) && (x->mode == DCOMP_ALLREDUCE)) {
        status = gs__comp_server_ef(ef, own_len, GS_DTYPE_F32, &x->server);
    }
    if (status == GS_OK) {
        status = dcomp_residual(ctx, x->server, x->st, &x->sres);
    }
    return status;
}

/* Body of slot q (the header space stays in front of it, for the host exchange). */
static uint8_t *dcomp_body(const dcomp_t *x, uint8_t *slots, int q)
{
    return slots + (size_t)q * x->cap + GS_CODEC_HEADER_BYTES;
}

static gs_status_t dcomp_k(const dcomp_t *x, int err, const char *what)
{
    return gs__dev_cuda(x->ctx, err, what);
}

/*
 * One exchange of bodies: all-to-all (send slot q to rank q, receive rank
 * q's into slot q of @p recv) or all-gather (send slot r to everyone).
 * send_len[q] / recv_len[q] are the body sizes, alike on both ends.
 */
static gs_status_t dcomp_exchange(dcomp_t *x, uint32_t phase, uint8_t *send, uint8_t *recv,
                                  const size_t *send_len, const size_t *recv_len, int gather)
{
    gs__algo_ctx_t *ctx = x->ctx;
    const size_t n = (size_t)x->n;
    gs_status_t status = GS_OK;

    if (x->n == 1) {
        return GS_OK;
    }
#ifdef GS_WITH_NCCL
    if (x->over_nccl) {
        struct gs__nccl *nc = ctx->dev->nccl;
        gs_status_t end;

        status = gs__nccl_group_start();
        for (int i = 1; (i < x->n) && (status == GS_OK); i++) {
            const int q = (x->r + i) % x->n;
            const int slot = gather ? x->r : q;

            status =
                gs__nccl_send(nc, dcomp_body(x, send, slot), send_len[slot], GS_DTYPE_U8, q, x->st);
            if (status == GS_OK) {
                status =
                    gs__nccl_recv(nc, dcomp_body(x, recv, q), recv_len[q], GS_DTYPE_U8, q, x->st);
            }
        }
        end = gs__nccl_group_end(nc);
        return (status != GS_OK) ? status : end;
    }
#endif
    {
        /* Through pinned memory: the bodies with their headers, as the
         * host path sends them, checked on arrival. */
        uint8_t *hsend, *hrecv;
        size_t *hs_len = x->hlens, *hr_len = x->hlens + n;
        gs__comp_xchg_t xc;
        gs__codec_params_t p;

        status = gs__dev_pinned(ctx, 2 * n * x->cap);
        if (status != GS_OK) {
            return status;
        }
        hsend = ctx->dev->pinned;
        hrecv = hsend + n * x->cap;
        for (size_t q = 0; (q < n) && (status == GS_OK); q++) {
            if (gather ? (q != (size_t)x->r) : (q == (size_t)x->r)) {
                continue;
            }
            status = dcomp_k(x,
                             cudaMemcpyAsync(hsend + q * x->cap + GS_CODEC_HEADER_BYTES,
                                             dcomp_body(x, send, (int)q), send_len[q],
                                             cudaMemcpyDeviceToHost, x->st),
                             "cudaMemcpyAsync (payload to the host)");
        }
        if (status == GS_OK) {
            status = gs__dev_wait_stream(ctx, x->st, "the copies of the payloads to the host");
        }
        memset(hs_len, 0, 2 * n * sizeof(size_t));
        for (size_t q = 0; (q < n) && (status == GS_OK); q++) {
            gs__codec_hdr_t hdr;
            size_t off, len;

            if (gather ? (q != (size_t)x->r) : (q == (size_t)x->r)) {
                continue;
            }
            dcomp_chunk(x, gather ? x->r : (int)q, &off, &len);
            status = gs__codec_params(&x->rc, len, &p);
            hdr.version = GS_CODEC_WIRE_VERSION;
            hdr.codec = (uint8_t)x->rc.ops->wire_id;
            hdr.flags = 0;
            hdr.block = p.block;
            hdr.param = p.param;
            hdr.count = (uint64_t)len;
            hdr.body_len = (uint64_t)send_len[q];
            gs__codec_hdr_encode(&hdr, hsend + q * x->cap);
            hs_len[q] = GS_CODEC_HEADER_BYTES + send_len[q];
        }
        if (status == GS_OK) {
            xc.send = hsend;
            xc.recv = hrecv;
            xc.cap = x->cap;
            xc.send_len = hs_len;
            xc.recv_len = hr_len;
            xc.reqs = x->reqs;
            xc.send_same_slot = gather;
            status = gs__comp_exchange(ctx, x->d, phase, &xc);
        }
        for (size_t q = 0; (q < n) && (status == GS_OK); q++) {
            gs__codec_hdr_t hdr;
            char why[160];
            size_t off, len;

            if (q == (size_t)x->r) {
                continue;
            }
            dcomp_chunk(x, gather ? (int)q : x->r, &off, &len);
            status = gs__codec_params(&x->rc, len, &p);
            if (status == GS_OK) {
                /* hdr holds nothing until the check passed: the text says why it failed. */
                const bool hdr_ok =
                    (gs__codec_hdr_check(hrecv + q * x->cap, hr_len[q], x->rc.ops->wire_id, &p,
                                         &hdr, why, sizeof(why)) == GS_OK);

                if (!hdr_ok || (hdr.flags != 0) || (hdr.body_len != recv_len[q])) {
                    status =
                        gs__error_set(GS_ERR_PROTOCOL,
                                      "%s: the compressed %s from rank %zu is bad: %s", ctx->opname,
                                      (x->mode != DCOMP_ALLREDUCE) ? "block"
                                      : gather                     ? "sum"
                                                                   : "chunk",
                                      q,
                                      !hdr_ok            ? why
                                      : (hdr.flags != 0) ? "zstd is not expected here"
                                                         : "its length differs from its header's");
                }
            }
            if (status == GS_OK) {
                status = dcomp_k(x,
                                 cudaMemcpyAsync(dcomp_body(x, recv, (int)q),
                                                 hrecv + q * x->cap + GS_CODEC_HEADER_BYTES,
                                                 recv_len[q], cudaMemcpyHostToDevice, x->st),
                                 "cudaMemcpyAsync (payload to the device)");
            }
        }
        /* The pinned slots are reused by the next exchange: the copies out
         * of them must be done first. */
        if (status == GS_OK) {
            status = gs__dev_wait_stream(ctx, x->st,
                                         "the copies of the payloads to the device (before the "
                                         "staging buffer is reused)");
        }
    }
    return status;
}

/* Read the per-sender flags of the top-k checks: GS_ERR_PROTOCOL naming the first bad one. */
static gs_status_t dcomp_check_bad(dcomp_t *x, const char *what)
{
    int *flags = x->flags;
    gs_status_t status;

    if (x->kind != GS_CODEC_TOPK) {
        return GS_OK;
    }
    status = dcomp_k(
        x,
        cudaMemcpyAsync(flags, x->bad, (size_t)x->n * sizeof(int), cudaMemcpyDeviceToHost, x->st),
        "cudaMemcpyAsync (payload checks)");
    if (status == GS_OK) {
        status = gs__dev_wait_stream(x->ctx, x->st, "the top-k payload checks");
    }
    for (int q = 0; (q < x->n) && (status == GS_OK); q++) {
        if (flags[q] != 0) {
            status = gs__error_set(GS_ERR_PROTOCOL,
                                   "%s: the top-k %s from rank %d is bad: an index is out of "
                                   "range or out of order",
                                   x->ctx->opname, what, q);
        }
    }
    return status;
}

/* Everything a call works out before its first kernel: the codec, the
 * step's seeds, the slots and residuals, the host bookkeeping. */
static gs_status_t dcomp_setup(dcomp_t *x, gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                               int over_nccl, int mode)
{
    gs_ef_t ef = (gs_ef_t)d->ef;
    gs_status_t status;

    memset(x, 0, sizeof(*x));
    x->ctx = ctx;
    x->d = d;
    x->st = (cudaStream_t)d->stream;
    x->n = ctx->size;
    x->r = ctx->rank;
    x->over_nccl = over_nccl;
    x->mode = mode;
    status = gs__codec_resolve(d->codec, &x->rc);
    if (status != GS_OK) {
        return status;
    }
    x->kind = x->rc.ops->wire_id;
    x->wseed = gs__codec_step_seed(&x->rc, (ef != GS_EF_NULL) ? ef->step : 0);
    x->sseed = gs__codec_step_seed(
        &x->rc, ((ef != GS_EF_NULL) && (ef->server != GS_EF_NULL)) ? ef->server->step : 0);
    status = dcomp_layout(x);
    if ((status == GS_OK) && (x->server != GS_EF_NULL)) {
        /* A server residual made just now starts at step 0 everywhere. */
        x->sseed = gs__codec_step_seed(&x->rc, x->server->step);
    }
    if (status == GS_OK) {
        void *mem = NULL;
        const size_t n2 = 2 * (size_t)x->n;

        status = gs__algo_scratch(
            ctx, 2 * n2 * sizeof(size_t) + n2 * sizeof(gs__algo_req_t) + (size_t)x->n * sizeof(int),
            &mem);
        if (status == GS_OK) {
            x->lens = (size_t *)mem;
            x->hlens = x->lens + n2;
            x->reqs = (gs__algo_req_t *)(void *)(x->hlens + n2);
            x->flags = (int *)(void *)(x->reqs + n2);
        }
    }
    return status;
}

/* The two-phase all-reduce on the codec kernels. */
static gs_status_t dcomp_allreduce(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, int over_nccl)
{
    dcomp_t x;
    gs_ef_t ef = (gs_ef_t)d->ef;
    size_t *lens = NULL;
    size_t own_off = 0, own_len = 0;
    gs__k_codec_params_t own_kp, sum_kp;
    size_t own_body = 0, sum_body = 0;
    gs_status_t status = dcomp_setup(&x, ctx, d, over_nccl, DCOMP_ALLREDUCE);

    lens = x.lens;
    dcomp_chunk(&x, x.r, &own_off, &own_len);
    if (status == GS_OK) {
        status = dcomp_params(&x, own_len, x.wseed, &own_kp, &own_body);
    }
    if (status == GS_OK) {
        status = dcomp_params(&x, own_len, x.sseed, &sum_kp, &sum_body);
    }
    /* Phase 1: encode every chunk with the worker residual; ours goes
     * straight into its receive slot. */
    for (int c = 0; (c < x.n) && (status == GS_OK); c++) {
        const int own = (c == x.r);
        uint8_t *body = dcomp_body(&x, own ? x.recv : x.send, c);
        gs__k_codec_params_t kp;
        size_t off, len;

        dcomp_chunk(&x, c, &off, &len);
        status = dcomp_params(&x, len, x.wseed, &kp, &lens[c]);
        if (status == GS_OK) {
            const float *src = (const float *)d->sendbuf + off;
            const int err = (x.wres != NULL) ? gs_k_codec_encode_ef(x.kind, &kp, src, x.wres + off,
                                                                    body, x.work, x.work_size, x.st)
                                             : gs_k_codec_encode(x.kind, &kp, src, body, x.work,
                                                                 x.work_size, x.st);
            status = dcomp_k(&x, err, "the codec's encode kernel");
        }
        lens[x.n + c] = own_body; /* every peer's copy of our chunk */
    }
    if (status == GS_OK) {
        status = dcomp_exchange(&x, 0, x.send, x.recv, lens, lens + x.n, 0);
    }
    /* Phase 2: the sum of our chunk in rank order, averaged, encoded with
     * the server residual into our slot of the sums; decoded into our part
     * of recvbuf like every other rank's. */
    if (status == GS_OK) {
        status = dcomp_k(&x, cudaMemsetAsync(x.acc, 0, own_len * sizeof(float), x.st),
                         "cudaMemsetAsync");
    }
    for (int q = 0; (q < x.n) && (status == GS_OK); q++) {
        status = dcomp_k(&x,
                         gs_k_codec_decode(x.kind, &own_kp, dcomp_body(&x, x.recv, q), x.acc,
                                           GS_K_CODEC_ADD, 1.0f, x.bad + q, x.st),
                         "the codec's decode kernel");
    }
    if (status == GS_OK) {
        status = dcomp_check_bad(&x, "chunk");
    }
    if ((status == GS_OK) && (d->op == GS_OP_AVG)) {
        status = dcomp_k(&x, gs_k_mul_f32(x.acc, own_len, 1.0f / (float)x.n, x.st),
                         "the average kernel");
    }
    if (status == GS_OK) {
        uint8_t *body = dcomp_body(&x, x.sums, x.r);
        const int err = (x.sres != NULL) ? gs_k_codec_encode_ef(x.kind, &sum_kp, x.acc, x.sres,
                                                                body, x.work, x.work_size, x.st)
                                         : gs_k_codec_encode(x.kind, &sum_kp, x.acc, body, x.work,
                                                             x.work_size, x.st);
        status = dcomp_k(&x, err, "the codec's encode kernel (sum)");
    }
    for (int c = 0; (c < x.n) && (status == GS_OK); c++) {
        gs__k_codec_params_t kp;
        size_t off, len;

        dcomp_chunk(&x, c, &off, &len);
        status = dcomp_params(&x, len, x.sseed, &kp, &lens[x.n + c]);
        lens[c] = sum_body;
    }
    if (status == GS_OK) {
        status = dcomp_exchange(&x, 1, x.sums, x.sums, lens, lens + x.n, 1);
    }
    for (int c = 0; (c < x.n) && (status == GS_OK); c++) {
        gs__k_codec_params_t kp;
        size_t off, len, body;

        dcomp_chunk(&x, c, &off, &len);
        status = dcomp_params(&x, len, x.sseed, &kp, &body);
        if (status == GS_OK) {
            status = dcomp_k(&x,
                             gs_k_codec_decode(x.kind, &kp, dcomp_body(&x, x.sums, c),
                                               (float *)d->recvbuf + off, GS_K_CODEC_SET, 1.0f,
                                               x.bad + c, x.st),
                             "the codec's decode kernel (sums)");
        }
    }
    if (status == GS_OK) {
        status = dcomp_check_bad(&x, "sum");
    }
    if (status == GS_OK) {
        /* The result is in recvbuf once the stream passes this point. */
        status = gs__dev_wait_stream(ctx, x.st, "the compressed all-reduce's kernels");
    }
    if (ef != GS_EF_NULL) {
        ef->step++;
    }
    if ((status == GS_OK) && (x.server != GS_EF_NULL)) {
        x.server->step++;
    }
    return status;
}

/* Reduce-scatter on the codec kernels: every peer's block encoded once
 * with the worker residual, all-to-all, our block's sum in rank order with
 * our own block added exactly. */
static gs_status_t dcomp_reduce_scatter(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, int over_nccl)
{
    dcomp_t x;
    gs_ef_t ef = (gs_ef_t)d->ef;
    const size_t blk = d->count;
    gs__k_codec_params_t kp;
    size_t body = 0;
    gs_status_t status = dcomp_setup(&x, ctx, d, over_nccl, DCOMP_REDUCE_SCATTER);

    if (status == GS_OK) {
        status = dcomp_params(&x, blk, x.wseed, &kp, &body);
    }
    for (int c = 0; (c < x.n) && (status == GS_OK); c++) {
        const float *src = (const float *)d->sendbuf + (size_t)c * blk;
        int err;

        x.lens[c] = body;       /* what we send to rank c */
        x.lens[x.n + c] = body; /* what rank c sends us */
        if (c == x.r) {
            continue; /* our own block never goes through the codec */
        }
        err = (x.wres != NULL)
                  ? gs_k_codec_encode_ef(x.kind, &kp, src, x.wres + (size_t)c * blk,
                                         dcomp_body(&x, x.send, c), x.work, x.work_size, x.st)
                  : gs_k_codec_encode(x.kind, &kp, src, dcomp_body(&x, x.send, c), x.work,
                                      x.work_size, x.st);
        status = dcomp_k(&x, err, "the codec's encode kernel");
    }
    if (status == GS_OK) {
        status = dcomp_exchange(&x, 0, x.send, x.recv, x.lens, x.lens + x.n, 0);
    }
    if (status == GS_OK) {
        status =
            dcomp_k(&x, cudaMemsetAsync(x.acc, 0, blk * sizeof(float), x.st), "cudaMemsetAsync");
    }
    for (int q = 0; (q < x.n) && (status == GS_OK); q++) {
        if (q == x.r) {
            status = dcomp_k(&x,
                             gs_k_reduce(x.acc, x.acc, (const float *)d->sendbuf + (size_t)q * blk,
                                         blk, GS_DTYPE_F32, GS_OP_SUM, 0, x.st),
                             "the sum kernel (our own block)");
        } else {
            status = dcomp_k(&x,
                             gs_k_codec_decode(x.kind, &kp, dcomp_body(&x, x.recv, q), x.acc,
                                               GS_K_CODEC_ADD, 1.0f, x.bad + q, x.st),
                             "the codec's decode kernel");
        }
    }
    if (status == GS_OK) {
        status = dcomp_check_bad(&x, "block");
    }
    if ((status == GS_OK) && (d->op == GS_OP_AVG)) {
        status =
            dcomp_k(&x, gs_k_mul_f32(x.acc, blk, 1.0f / (float)x.n, x.st), "the average kernel");
    }
    if (status == GS_OK) {
        status = dcomp_k(
            &x,
            cudaMemcpyAsync(d->recvbuf, x.acc, blk * sizeof(float), cudaMemcpyDeviceToDevice, x.st),
            "cudaMemcpyAsync (the sum to recvbuf)");
    }
    if (status == GS_OK) {
        status = gs__dev_wait_stream(ctx, x.st, "the compressed reduce-scatter's kernels");
    }
    if (ef != GS_EF_NULL) {
        ef->step++;
    }
    return status;
}

/* All-gather on the codec kernels: our block encoded once, sent to every
 * peer and copied exactly; the others decoded into place. */
static gs_status_t dcomp_allgather(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, int over_nccl)
{
    dcomp_t x;
    const size_t blk = d->count;
    gs__k_codec_params_t kp;
    size_t body = 0;
    float *out = (float *)d->recvbuf;
    gs_status_t status = dcomp_setup(&x, ctx, d, over_nccl, DCOMP_ALLGATHER);

    if (status == GS_OK) {
        status = dcomp_params(&x, blk, gs__codec_step_seed(&x.rc, 0), &kp, &body);
    }
    for (int c = 0; (c < x.n) && (status == GS_OK); c++) {
        x.lens[c] = body;
        x.lens[x.n + c] = body;
    }
    if (status == GS_OK) {
        status = dcomp_k(&x,
                         gs_k_codec_encode(x.kind, &kp, (const float *)d->sendbuf,
                                           dcomp_body(&x, x.sums, x.r), x.work, x.work_size, x.st),
                         "the codec's encode kernel");
    }
    if (status == GS_OK) {
        status = dcomp_exchange(&x, 1, x.sums, x.sums, x.lens, x.lens + x.n, 1);
    }
    if ((status == GS_OK) && ((const void *)(out + (size_t)x.r * blk) != d->sendbuf)) {
        status = dcomp_k(&x,
                         cudaMemcpyAsync(out + (size_t)x.r * blk, d->sendbuf, blk * sizeof(float),
                                         cudaMemcpyDeviceToDevice, x.st),
                         "cudaMemcpyAsync (our own block)");
    }
    for (int q = 0; (q < x.n) && (status == GS_OK); q++) {
        if (q != x.r) {
            status = dcomp_k(&x,
                             gs_k_codec_decode(x.kind, &kp, dcomp_body(&x, x.sums, q),
                                               out + (size_t)q * blk, GS_K_CODEC_SET, 1.0f,
                                               x.bad + q, x.st),
                             "the codec's decode kernel");
        }
    }
    if (status == GS_OK) {
        status = dcomp_check_bad(&x, "block");
    }
    if (status == GS_OK) {
        status = gs__dev_wait_stream(ctx, x.st, "the compressed all-gather's kernels");
    }
    return status;
}

gs_status_t gs__dev_compressed(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, const gs__algo_plan_t *plan,
                               int over_nccl)
{
    (void)plan;
    if (d->count == 0) {
        return GS_OK;
    }
    switch (d->kind) {
    case GS_COLL_REDUCE_SCATTER:
        return dcomp_reduce_scatter(ctx, d, over_nccl);
    case GS_COLL_ALLGATHER:
        return dcomp_allgather(ctx, d, over_nccl);
    default:
        return dcomp_allreduce(ctx, d, over_nccl);
    }
}
