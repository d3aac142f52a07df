/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The codec kernels and their host launchers (codec_kernels.h). Each
 * kernel is a thin __global__ wrapper around one body of codec_body.h,
 * running its phases with a barrier between them; a launcher builds the
 * plan of a call (codec_body.h, the same plan the unit tests run on the
 * CPU) and launches its steps in order on the caller's stream. Launchers
 * check their arguments before launching anything, never synchronise,
 * allocate nothing and keep no state, so any thread may call them.
 */
#include "codec_kernels.h"

#include "codec_body.h"
#include "launch_kernels.h"

#include <cuda_runtime.h>

/* Threads per block, and the most blocks a launch uses (grid-stride loops:
 * 1024 x 256 threads fill any current GPU; larger tensors loop). */
#define GS_KC_THREADS 256u
#define GS_KC_MAX_BLOCKS 1024u

/* ---------------------------------------------------------------------- */
/* Kernels                                                                */
/* ---------------------------------------------------------------------- */

/* Bodies without barriers: one phase, no shared memory. */
static __global__ void __launch_bounds__(GS_KC_THREADS) gs_kc_half_enc_kernel(gs__kc_args_t a)
{
    gs_kb_half_enc(gs_kthread_here(), 0, a, NULL);
}

static __global__ void __launch_bounds__(GS_KC_THREADS) gs_kc_dec_kernel(gs__kc_args_t a)
{
    gs_kb_dec(gs_kthread_here(), 0, a, NULL);
}

static __global__ void __launch_bounds__(GS_KC_THREADS) gs_kc_quant_codes_kernel(gs__kc_args_t a)
{
    gs_kb_quant_codes(gs_kthread_here(), 0, a, NULL);
}

static __global__ void __launch_bounds__(GS_KC_THREADS) gs_kc_sign_pack_kernel(gs__kc_args_t a)
{
    gs_kb_sign_pack(gs_kthread_here(), 0, a, NULL);
}

static __global__ void __launch_bounds__(GS_KC_THREADS) gs_kc_add_kernel(gs__kc_args_t a)
{
    gs_kb_add(gs_kthread_here(), 0, a, NULL);
}

static __global__ void __launch_bounds__(GS_KC_THREADS) gs_kc_randk_gather_kernel(gs__kc_args_t a)
{
    gs_kb_randk_gather(gs_kthread_here(), 0, a, NULL);
}

static __global__ void __launch_bounds__(GS_KC_THREADS) gs_kc_zero_kernel(gs__kc_args_t a)
{
    gs_kb_zero(gs_kthread_here(), 0, a, NULL);
}

static __global__ void __launch_bounds__(GS_KC_THREADS) gs_kc_randk_scatter_kernel(gs__kc_args_t a)
{
    gs_kb_randk_scatter(gs_kthread_here(), 0, a, NULL);
}

static __global__ void __launch_bounds__(GS_KC_THREADS) gs_kc_topk_check_kernel(gs__kc_args_t a)
{
    gs_kb_topk_check(gs_kthread_here(), 0, a, NULL);
}

static __global__ void __launch_bounds__(GS_KC_THREADS) gs_kc_topk_scatter_kernel(gs__kc_args_t a)
{
    gs_kb_topk_scatter(gs_kthread_here(), 0, a, NULL);
}

/* Bodies cut into phases: __syncthreads() between phases, which every
 * thread of the block reaches (a body returns early, the loop does not). */
static __global__ void __launch_bounds__(GS_KC_THREADS)
    gs_kc_quant_group_kernel(gs__kc_args_t a, int nphases)
{
    __shared__ gs__kc_smem_t sm;
    const gs__kthread_t t = gs_kthread_here();

    for (int ph = 0; ph < nphases; ph++) {
        if (ph > 0) {
            __syncthreads();
        }
        gs_kb_quant_group(t, ph, a, &sm);
    }
}

static __global__ void __launch_bounds__(GS_KC_THREADS)
    gs_kc_sign_group_kernel(gs__kc_args_t a, int nphases)
{
    __shared__ gs__kc_smem_t sm;
    const gs__kthread_t t = gs_kthread_here();

    for (int ph = 0; ph < nphases; ph++) {
        if (ph > 0) {
            __syncthreads();
        }
        gs_kb_sign_group(t, ph, a, &sm);
    }
}

static __global__ void __launch_bounds__(GS_KC_THREADS)
    gs_kc_topk_sample_kernel(gs__kc_args_t a, int nphases)
{
    __shared__ gs__kc_smem_t sm;
    const gs__kthread_t t = gs_kthread_here();

    for (int ph = 0; ph < nphases; ph++) {
        if (ph > 0) {
            __syncthreads();
        }
        gs_kb_topk_sample(t, ph, a, &sm);
    }
}

static __global__ void __launch_bounds__(GS_KC_THREADS)
    gs_kc_topk_hist_kernel(gs__kc_args_t a, int nphases)
{
    __shared__ gs__kc_smem_t sm;
    const gs__kthread_t t = gs_kthread_here();

    for (int ph = 0; ph < nphases; ph++) {
        if (ph > 0) {
            __syncthreads();
        }
        gs_kb_topk_hist(t, ph, a, &sm);
    }
}

static __global__ void __launch_bounds__(GS_KC_THREADS)
    gs_kc_topk_fix_kernel(gs__kc_args_t a, int nphases)
{
    const gs__kthread_t t = gs_kthread_here();

    for (int ph = 0; ph < nphases; ph++) {
        if (ph > 0) {
            __syncthreads();
        }
        gs_kb_topk_fix(t, ph, a, NULL);
    }
}

static __global__ void __launch_bounds__(GS_KC_THREADS)
    gs_kc_topk_walk_kernel(gs__kc_args_t a, int nphases)
{
    const gs__kthread_t t = gs_kthread_here();

    for (int ph = 0; ph < nphases; ph++) {
        if (ph > 0) {
            __syncthreads();
        }
        gs_kb_topk_walk(t, ph, a, NULL);
    }
}

static __global__ void __launch_bounds__(GS_KC_THREADS)
    gs_kc_topk_chunks_kernel(gs__kc_args_t a, int nphases)
{
    __shared__ gs__kc_smem_t sm;
    const gs__kthread_t t = gs_kthread_here();

    for (int ph = 0; ph < nphases; ph++) {
        if (ph > 0) {
            __syncthreads();
        }
        gs_kb_topk_chunks(t, ph, a, &sm);
    }
}

static __global__ void __launch_bounds__(GS_KC_THREADS)
    gs_kc_topk_scan_kernel(gs__kc_args_t a, int nphases)
{
    __shared__ gs__kc_smem_t sm;
    const gs__kthread_t t = gs_kthread_here();

    for (int ph = 0; ph < nphases; ph++) {
        if (ph > 0) {
            __syncthreads();
        }
        gs_kb_topk_scan(t, ph, a, &sm);
    }
}

/* ---------------------------------------------------------------------- */
/* Launchers                                                              */
/* ---------------------------------------------------------------------- */

/* Launch the steps of @p pl in order on @p s; the first launch error (each
 * launch's own, launch_kernels.h). */
static int kc_run(const gs__kc_plan_t *pl, cudaStream_t s)
{
    for (int i = 0; i < pl->nsteps; i++) {
        const gs__kc_step_t *st = &pl->step[i];
        const dim3 grid((unsigned)st->grid), block(pl->nthreads);
        int err;

        switch (st->body) {
        case GS_KC_HALF_ENC:
            err = gs_k_launch(gs_kc_half_enc_kernel, grid, block, s, st->a);
            break;
        case GS_KC_DEC:
            err = gs_k_launch(gs_kc_dec_kernel, grid, block, s, st->a);
            break;
        case GS_KC_QUANT_GROUP:
            err = gs_k_launch(gs_kc_quant_group_kernel, grid, block, s, st->a, st->nphases);
            break;
        case GS_KC_QUANT_CODES:
            err = gs_k_launch(gs_kc_quant_codes_kernel, grid, block, s, st->a);
            break;
        case GS_KC_SIGN_GROUP:
            err = gs_k_launch(gs_kc_sign_group_kernel, grid, block, s, st->a, st->nphases);
            break;
        case GS_KC_SIGN_PACK:
            err = gs_k_launch(gs_kc_sign_pack_kernel, grid, block, s, st->a);
            break;
        case GS_KC_ADD:
            err = gs_k_launch(gs_kc_add_kernel, grid, block, s, st->a);
            break;
        case GS_KC_RANDK_GATHER:
            err = gs_k_launch(gs_kc_randk_gather_kernel, grid, block, s, st->a);
            break;
        case GS_KC_ZERO:
            err = gs_k_launch(gs_kc_zero_kernel, grid, block, s, st->a);
            break;
        case GS_KC_RANDK_SCATTER:
            err = gs_k_launch(gs_kc_randk_scatter_kernel, grid, block, s, st->a);
            break;
        case GS_KC_TOPK_SAMPLE:
            err = gs_k_launch(gs_kc_topk_sample_kernel, grid, block, s, st->a, st->nphases);
            break;
        case GS_KC_TOPK_HIST:
            err = gs_k_launch(gs_kc_topk_hist_kernel, grid, block, s, st->a, st->nphases);
            break;
        case GS_KC_TOPK_FIX:
            err = gs_k_launch(gs_kc_topk_fix_kernel, grid, block, s, st->a, st->nphases);
            break;
        case GS_KC_TOPK_WALK:
            err = gs_k_launch(gs_kc_topk_walk_kernel, grid, block, s, st->a, st->nphases);
            break;
        case GS_KC_TOPK_CHUNKS:
            err = gs_k_launch(gs_kc_topk_chunks_kernel, grid, block, s, st->a, st->nphases);
            break;
        case GS_KC_TOPK_SCAN:
            err = gs_k_launch(gs_kc_topk_scan_kernel, grid, block, s, st->a, st->nphases);
            break;
        case GS_KC_TOPK_CHECK:
            err = gs_k_launch(gs_kc_topk_check_kernel, grid, block, s, st->a);
            break;
        case GS_KC_TOPK_SCATTER:
            err = gs_k_launch(gs_kc_topk_scatter_kernel, grid, block, s, st->a);
            break;
        default:
            return (int)cudaErrorInvalidValue;
        }
        if (err != (int)cudaSuccess) {
            return err;
        }
    }
    return (int)cudaSuccess;
}

extern "C" size_t gs_k_codec_workspace_size(gs_codec_kind_t kind, const gs__k_codec_params_t *p)
{
    return (p == NULL) ? 0 : gs_kc_work_size((int)kind, p, GS_KC_THREADS);
}

extern "C" int gs_k_codec_encode(gs_codec_kind_t kind, const gs__k_codec_params_t *p,
                                 const float *src, uint8_t *body, void *work, size_t work_size,
                                 void *stream)
{
    gs__kc_plan_t pl;

    if ((p == NULL) || (gs_kc_plan_encode(&pl, (int)kind, p, src, NULL, body, work, work_size,
                                          GS_KC_THREADS, GS_KC_MAX_BLOCKS) != 0)) {
        return (int)cudaErrorInvalidValue;
    }
    return kc_run(&pl, (cudaStream_t)stream);
}

extern "C" int gs_k_codec_encode_ef(gs_codec_kind_t kind, const gs__k_codec_params_t *p,
                                    const float *src, float *residual, uint8_t *body, void *work,
                                    size_t work_size, void *stream)
{
    gs__kc_plan_t pl;

    if ((p == NULL) || (residual == NULL) ||
        (gs_kc_plan_encode(&pl, (int)kind, p, src, residual, body, work, work_size, GS_KC_THREADS,
                           GS_KC_MAX_BLOCKS) != 0)) {
        return (int)cudaErrorInvalidValue;
    }
    return kc_run(&pl, (cudaStream_t)stream);
}

extern "C" int gs_k_codec_decode(gs_codec_kind_t kind, const gs__k_codec_params_t *p,
                                 const uint8_t *body, float *dst, int mode, float alpha, int *bad,
                                 void *stream)
{
    gs__kc_plan_t pl;

    if ((p == NULL) || (gs_kc_plan_decode(&pl, (int)kind, p, body, dst, mode, alpha, bad,
                                          GS_KC_THREADS, GS_KC_MAX_BLOCKS) != 0)) {
        return (int)cudaErrorInvalidValue;
    }
    return kc_run(&pl, (cudaStream_t)stream);
}

extern "C" int gs_k_codec_check(gs_codec_kind_t kind, const gs__k_codec_params_t *p,
                                const uint8_t *body, int *bad, void *stream)
{
    gs__kc_plan_t pl;

    if ((p == NULL) ||
        (gs_kc_plan_check(&pl, (int)kind, p, body, bad, GS_KC_THREADS, GS_KC_MAX_BLOCKS) != 0)) {
        return (int)cudaErrorInvalidValue;
    }
    return kc_run(&pl, (cudaStream_t)stream);
}
