/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The codec kernels' bodies and their launch plans, one source compiled by
 * nvcc (codec.cu wraps each body in a __global__ and runs a plan's steps on
 * a stream) and by the C compiler (tests/unit/test_kernel_codec.c runs the
 * same plans through GS_CPU_GRID_PHASES and compares with the CPU codecs).
 * The arithmetic is codec_math.h's; this file only arranges it over
 * threads, and never allocates or synchronises with the host.
 *
 * A plan (gs_kc_plan_encode/_decode/_check) is the list of steps one codec
 * call launches, in stream order: which body, how many blocks, how many
 * phases, and the arguments. Bodies take (thread, phase, args, smem); a
 * body that needs barriers is cut into phases (gs_device.h), and a
 * grid-stride loop over units that need barriers (codec blocks, top-k
 * chunks) runs as iterations of the phase sequence: phase = iter * P + sub.
 *
 * Layout of the work:
 * - Element-wise bodies (fp16/bf16 encode, every decode, sign/qsgd codes on
 *   the split path, random-k): grid-stride over chunks of 8 elements;
 *   16-byte loads and stores when the plan found every buffer 16-byte
 *   aligned (args.vec) and the chunk is whole.
 * - Blocked encodes (int8, int4, fp8, qsgd, sign): a group of args.group
 *   threads per codec block (the max-scaled codecs: the power of two at or
 *   above block / 8, at most the CUDA block, so a lane takes about 8
 *   elements; 8 for sign), groups packed into a CUDA block. The max-scaled
 *   codecs (int8, int4, fp8, qsgd): max |x| by a shared-memory tree
 *   (order-free: the max of the non-NaN values is exact, and the NaN kept
 *   is the one at the highest index, as the CPU's index-order loop keeps);
 *   sign: lane j sums partial j of codec_math.h's mean in the CPU's order,
 *   then lane 0 adds the 8 partials 0..7. The codes follow in the same
 *   launch when the codec block covers whole code bytes ("fused": int8,
 *   fp8, 8-bit qsgd, even blocks for int4 and 4-bit qsgd, blocks of 8k
 *   for sign, or one block); else a second, element-wise launch writes the
 *   code bytes (int4 and qsgd read each block's 1/step factor from the
 *   workspace).
 * - top-k: see codec_kernels.h; the workspace words are GS_KC_TK_* below.
 *
 * Files: this one holds the types, the helpers, the dispatch of the CPU
 * runner and the plans; the bodies are in codec_dense_body.h (fp16, bf16,
 * int8, int4, fp8, qsgd, sign) and codec_sparse_body.h (randk, topk),
 * which only this file includes.
 */
#ifndef GS_KERNELS_CODEC_BODY_H
#define GS_KERNELS_CODEC_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "codec_kernels.h"
#include "math/codec_math.h"
#include "math/gs_device.h"

/* Threads per CUDA block: a power of two from 8 to this. */
#define GS_KC_MAX_THREADS 256
/* Steps in a plan, at most. */
#define GS_KC_MAX_STEPS 12
/* Elements per element-wise chunk. */
#define GS_KC_CHUNK 8
/* Max-scaled encodes: elements per lane of a codec block's group, about. */
#define GS_KC_PER_LANE 8
/* top-k: elements per thread in the compaction (a chunk is nthreads x this). */
#define GS_KC_TOPK_PER_THREAD 16
/* top-k: histogram bins, and the samples behind the first pass's bound. */
#define GS_KC_TOPK_BINS 2048
#define GS_KC_TOPK_SAMPLES 4096

/*
 * top-k workspace, in u32 words: the global histogram, the select's state,
 * then two arrays of nchunks counts (turned into offsets by the scan).
 */
#define GS_KC_TK_LO (GS_KC_TOPK_BINS + 0)     /* level-0 bound: keys below are skipped */
#define GS_KC_TK_PREFIX (GS_KC_TOPK_BINS + 1) /* the key digits found so far */
#define GS_KC_TK_MASK (GS_KC_TOPK_BINS + 2)   /* their bits */
#define GS_KC_TK_NEED (GS_KC_TOPK_BINS + 3)   /* rank still to find; at the end, ties to keep */
#define GS_KC_TK_HITS (GS_KC_TOPK_BINS + 4)   /* keys counted by the level-0 pass */
#define GS_KC_TK_REDO (GS_KC_TOPK_BINS + 5)   /* 1: the bound was too high, level 0 again */
#define GS_KC_TK_CHUNKS (GS_KC_TOPK_BINS + 8) /* first word of the chunk counts */

/* The bodies a plan can launch. */
typedef enum gs__kc_body {
    GS_KC_HALF_ENC = 0,  /* fp16/bf16 encode (+ error feedback) */
    GS_KC_DEC,           /* fp16/bf16/int8/int4/fp8/qsgd/sign decode, set or add */
    GS_KC_QUANT_GROUP,   /* int8/int4/fp8/qsgd: block steps (+ add, + codes when fused) */
    GS_KC_QUANT_CODES,   /* int4/qsgd split path: code bytes (+ residual update) */
    GS_KC_SIGN_GROUP,    /* sign: block scales (+ add, + bits when fused) */
    GS_KC_SIGN_PACK,     /* sign split path: bit bytes (+ residual update) */
    GS_KC_ADD,           /* residual += src */
    GS_KC_RANDK_GATHER,  /* randk encode: seed and the k drawn values (+ update) */
    GS_KC_ZERO,          /* dst = 0 (set-mode sparse decode; not when *bad) */
    GS_KC_RANDK_SCATTER, /* randk decode */
    GS_KC_TOPK_SAMPLE,   /* top-k: init the state, level-0 bound from a sample */
    GS_KC_TOPK_HIST,     /* top-k: histogram of one level (level 0: + add) */
    GS_KC_TOPK_FIX,      /* top-k: redo level 0 without the bound if it overshot */
    GS_KC_TOPK_WALK,     /* top-k: pick the digit of one level */
    GS_KC_TOPK_CHUNKS,   /* top-k: per-chunk counts (stage 0) or the write (stage 1) */
    GS_KC_TOPK_SCAN,     /* top-k: exclusive scan of the chunk counts */
    GS_KC_TOPK_CHECK,    /* top-k decode: index check into *bad */
    GS_KC_TOPK_SCATTER,  /* top-k decode: the pairs (not when *bad) */
    GS_KC_NBODIES
} gs__kc_body_t;

/* Arguments of one step (by value: kernel parameters). */
typedef struct gs__kc_args {
    size_t count;      /* elements */
    uint32_t block;    /* blocked codecs: elements per scale */
    uint32_t param;    /* qsgd levels; topk, randk k */
    uint64_t seed;     /* randk: written at the head of the body */
    uint32_t key;      /* gs__codec_seed32(seed) */
    int kind;          /* gs_codec_kind_t */
    unsigned group;    /* blocked encode: threads per codec block */
    unsigned tree;     /* log2(group) */
    int fused;         /* blocked encode: the group writes the codes too */
    int stage;         /* top-k: histogram/walk level, or chunk stage */
    int redo;          /* top-k level-0 histogram: the rerun (runs only if needed) */
    int mode;          /* decode: GS_K_CODEC_SET or _ADD */
    int vec;           /* every buffer is 16-byte aligned */
    float alpha;       /* decode add: dst += alpha * decoded */
    float minus_one;   /* -1.0f at run time: the error-feedback update's alpha */
    const float *src;  /* encode: the values to encode (or the gradient with EF) */
    float *res;        /* encode with EF: the residual (add / update it), else NULL */
    uint8_t *body;     /* encode: the body */
    const uint8_t *in; /* decode: the body (hostile for top-k) */
    float *dst;        /* decode: the output */
    float *wf;         /* int4/qsgd split path: 1/step factor per block */
    uint32_t *wu;      /* top-k: the workspace words */
    int *bad;          /* top-k decode: set to 1 on a bad index */
} gs__kc_args_t;

typedef struct gs__kc_step {
    int body;    /* gs__kc_body_t */
    size_t grid; /* CUDA blocks */
    int nphases; /* phases (iterations x phases per iteration) */
    gs__kc_args_t a;
} gs__kc_step_t;

typedef struct gs__kc_plan {
    unsigned nthreads; /* threads per CUDA block, every step */
    int nsteps;
    gs__kc_step_t step[GS_KC_MAX_STEPS];
} gs__kc_plan_t;

/* Per-block shared memory of every body. */
typedef union gs__kc_smem {
    struct {
        float m[GS_KC_MAX_THREADS];      /* max |x| (int8/int4/fp8/qsgd) or sign partials */
        uint32_t nan[GS_KC_MAX_THREADS]; /* 1 + highest NaN index, 0 for none */
        float inv[GS_KC_MAX_THREADS];    /* per group: x -> code factor */
        float step[GS_KC_MAX_THREADS];   /* per group: the stored scale */
    } q;
    struct {
        uint32_t hist[GS_KC_TOPK_BINS];
        uint32_t hits;
    } h;
    struct {
        uint32_t gt[2][GS_KC_MAX_THREADS]; /* scan of the counts above T */
        uint32_t eq[2][GS_KC_MAX_THREADS]; /* scan of the counts equal to T */
    } s;
} gs__kc_smem_t;

/* ---------------------------------------------------------------------- */
/* Helpers                                                                */
/* ---------------------------------------------------------------------- */

GS_KFN size_t gs_kc_min(size_t a, size_t b)
{
    return (a < b) ? a : b;
}

/* The codecs whose block scale is max |x| over a number of levels (the
 * GS_KC_QUANT_GROUP encode): int8, int4, the two fp8 and qsgd. */
GS_KFN int gs_kc_max_scaled(int kind)
{
    return (kind == GS_CODEC_INT8) || (kind == GS_CODEC_INT4) || (kind == GS_CODEC_FP8_E4M3) ||
           (kind == GS_CODEC_FP8_E5M2) || (kind == GS_CODEC_QSGD);
}

/* Codes of 4 bits, two per byte: int4, and qsgd with up to 7 levels. */
GS_KFN int gs_kc_nibbles(int kind, uint32_t param)
{
    return (kind == GS_CODEC_INT4) || ((kind == GS_CODEC_QSGD) && (param <= 7));
}

/* Codec block of element i (32-bit division when the count allows). */
GS_KFN size_t gs_kc_block_of(const gs__kc_args_t *a, size_t i)
{
    return (a->count <= 0xffffffffu) ? (size_t)((uint32_t)i / a->block) : i / a->block;
}

GS_KFN void gs_kc_atomic_add(uint32_t *p, uint32_t v)
{
#if defined(__CUDA_ARCH__)
    atomicAdd((unsigned int *)p, (unsigned int)v);
#else
    *p += v;
#endif
}

/* v[0..4) = p[0..4); p 16-byte aligned on the device. */
GS_KFN void gs_kc_ld4(const float *p, float *v)
{
#if defined(__CUDA_ARCH__)
    const float4 q = *(const float4 *)(const void *)p;

    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
#else
    for (int e = 0; e < 4; e++) {
        v[e] = p[e];
    }
#endif
}

GS_KFN void gs_kc_st4(float *p, const float *v)
{
#if defined(__CUDA_ARCH__)
    float4 q;

    q.x = v[0];
    q.y = v[1];
    q.z = v[2];
    q.w = v[3];
    *(float4 *)(void *)p = q;
#else
    for (int e = 0; e < 4; e++) {
        p[e] = v[e];
    }
#endif
}

/* Eight little-endian u16 at p (16-byte aligned on the device). */
GS_KFN void gs_kc_ld_h8(const uint8_t *p, uint16_t *h)
{
#if defined(__CUDA_ARCH__)
    const uint4 q = *(const uint4 *)(const void *)p;
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};

    for (int e = 0; e < 4; e++) {
        h[2 * e] = (uint16_t)(w[e] & 0xffffu);
        h[2 * e + 1] = (uint16_t)(w[e] >> 16);
    }
#else
    for (int e = 0; e < 8; e++) {
        h[e] = gs_km_ld_u16(p + 2 * e);
    }
#endif
}

GS_KFN void gs_kc_st_h8(uint8_t *p, const uint16_t *h)
{
#if defined(__CUDA_ARCH__)
    uint4 q;

    q.x = (uint32_t)h[0] | ((uint32_t)h[1] << 16);
    q.y = (uint32_t)h[2] | ((uint32_t)h[3] << 16);
    q.z = (uint32_t)h[4] | ((uint32_t)h[5] << 16);
    q.w = (uint32_t)h[6] | ((uint32_t)h[7] << 16);
    *(uint4 *)(void *)p = q;
#else
    for (int e = 0; e < 8; e++) {
        gs_km_st_u16(p + 2 * e, h[e]);
    }
#endif
}

/* The smallest l with 2^l >= v. */
GS_KFN unsigned gs_kc_log2(unsigned v)
{
    unsigned l = 0;

    while ((1u << l) < v) {
        l++;
    }
    return l;
}

/* The value encode reads: src, or with error feedback residual + src
 * (stored back). */
GS_KFN float gs_kc_take(const gs__kc_args_t *a, size_t i)
{
    float v = a->src[i];

    if (a->res != NULL) {
        v = gs_km_addf(a->res[i], v);
        a->res[i] = v;
    }
    return v;
}

/* ---------------------------------------------------------------------- */
/* The bodies                                                             */
/* ---------------------------------------------------------------------- */

#include "codec_dense_body.h"
#include "codec_sparse_body.h"

/* ---------------------------------------------------------------------- */
/* Dispatch (the CPU runner's; codec.cu has one __global__ per body)      */
/* ---------------------------------------------------------------------- */

GS_KFN void gs_kb_step(gs__kthread_t t, int ph, int body, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    switch (body) {
    case GS_KC_HALF_ENC:
        gs_kb_half_enc(t, ph, a, sm);
        break;
    case GS_KC_DEC:
        gs_kb_dec(t, ph, a, sm);
        break;
    case GS_KC_QUANT_GROUP:
        gs_kb_quant_group(t, ph, a, sm);
        break;
    case GS_KC_QUANT_CODES:
        gs_kb_quant_codes(t, ph, a, sm);
        break;
    case GS_KC_SIGN_GROUP:
        gs_kb_sign_group(t, ph, a, sm);
        break;
    case GS_KC_SIGN_PACK:
        gs_kb_sign_pack(t, ph, a, sm);
        break;
    case GS_KC_ADD:
        gs_kb_add(t, ph, a, sm);
        break;
    case GS_KC_RANDK_GATHER:
        gs_kb_randk_gather(t, ph, a, sm);
        break;
    case GS_KC_ZERO:
        gs_kb_zero(t, ph, a, sm);
        break;
    case GS_KC_RANDK_SCATTER:
        gs_kb_randk_scatter(t, ph, a, sm);
        break;
    case GS_KC_TOPK_SAMPLE:
        gs_kb_topk_sample(t, ph, a, sm);
        break;
    case GS_KC_TOPK_HIST:
        gs_kb_topk_hist(t, ph, a, sm);
        break;
    case GS_KC_TOPK_FIX:
        gs_kb_topk_fix(t, ph, a, sm);
        break;
    case GS_KC_TOPK_WALK:
        gs_kb_topk_walk(t, ph, a, sm);
        break;
    case GS_KC_TOPK_CHUNKS:
        gs_kb_topk_chunks(t, ph, a, sm);
        break;
    case GS_KC_TOPK_SCAN:
        gs_kb_topk_scan(t, ph, a, sm);
        break;
    case GS_KC_TOPK_CHECK:
        gs_kb_topk_check(t, ph, a, sm);
        break;
    default: /* GS_KC_TOPK_SCATTER */
        gs_kb_topk_scatter(t, ph, a, sm);
        break;
    }
}

/* ---------------------------------------------------------------------- */
/* Plans (host)                                                           */
/* ---------------------------------------------------------------------- */

/* Blocks for @p items units of @p per_block, within [1, maxgrid]. */
GS_KFN size_t gs_kc_grid(size_t items, size_t per_block, size_t maxgrid)
{
    size_t g = (items + per_block - 1) / per_block;

    g = (g < 1) ? 1 : g;
    return (g > maxgrid) ? maxgrid : g;
}

/* Append a step running @p iters iterations of @p nsub phases. */
GS_KFN int gs_kc_plan_add(gs__kc_plan_t *pl, int body, size_t grid, size_t iters, unsigned nsub,
                          const gs__kc_args_t *a)
{
    gs__kc_step_t *st;

    if ((pl->nsteps >= GS_KC_MAX_STEPS) || (iters > (size_t)0x7fffffff / nsub)) {
        return -1;
    }
    st = &pl->step[pl->nsteps++];
    st->body = body;
    st->grid = grid;
    st->nphases = (int)(iters * nsub);
    st->a = *a;
    return 0;
}

/* An element-wise step over @p items units (grid-stride, one phase). */
GS_KFN int gs_kc_plan_flat(gs__kc_plan_t *pl, int body, size_t items, size_t maxgrid,
                           const gs__kc_args_t *a)
{
    return gs_kc_plan_add(pl, body, gs_kc_grid(items, pl->nthreads, maxgrid), 1, 1, a);
}

/* A step of one block (top-k's bookkeeping) of @p nsub phases. */
GS_KFN int gs_kc_plan_one(gs__kc_plan_t *pl, int body, unsigned nsub, const gs__kc_args_t *a)
{
    return gs_kc_plan_add(pl, body, 1, 1, nsub, a);
}

GS_KFN int gs_kc_aligned(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

/* Workspace bytes of an encode (see gs_k_codec_workspace_size). */
GS_KFN size_t gs_kc_work_size(int kind, const gs__k_codec_params_t *p, unsigned nthreads)
{
    const size_t nb = ((p->block > 0) && (p->count > 0)) ? gs_km_nblocks(p->count, p->block) : 0;

    if (gs_kc_nibbles(kind, p->param) && ((p->block & 1u) != 0) && (nb > 1)) {
        return nb * sizeof(float);
    }
    if ((kind == GS_CODEC_TOPK) && (p->param > 0)) {
        return (GS_KC_TK_CHUNKS + 2 * gs_kc_topk_nchunks(p->count, nthreads)) * sizeof(uint32_t);
    }
    return 0;
}

GS_KFN int gs_kc_plan_init(gs__kc_plan_t *pl, int kind, const gs__k_codec_params_t *p,
                           unsigned nthreads, gs__kc_args_t *a)
{
    pl->nthreads = nthreads;
    pl->nsteps = 0;
    memset(a, 0, sizeof(*a));
    a->count = p->count;
    a->block = p->block;
    a->param = p->param;
    a->seed = p->seed;
    a->key = gs__codec_seed32(p->seed);
    a->kind = kind;
    a->minus_one = -1.0f;
    if ((nthreads < 8) || (nthreads > GS_KC_MAX_THREADS) || ((nthreads & (nthreads - 1)) != 0)) {
        return -1;
    }
    if ((kind != GS_CODEC_FP16) && (kind != GS_CODEC_BF16) && (kind != GS_CODEC_SIGN) &&
        (kind != GS_CODEC_TOPK) && (kind != GS_CODEC_RANDK) && !gs_kc_max_scaled(kind)) {
        return -1;
    }
    if ((gs_kc_max_scaled(kind) || (kind == GS_CODEC_SIGN)) && (p->block == 0)) {
        return -1;
    }
    if (((kind == GS_CODEC_TOPK) || (kind == GS_CODEC_RANDK)) &&
        ((p->count > 0xffffffffu) || (p->param > p->count))) {
        return -1;
    }
    return 0;
}

/* The blocked-encode step: groups of @p group threads, @p nsub phases per
 * codec block. */
GS_KFN int gs_kc_plan_groups(gs__kc_plan_t *pl, int body, unsigned group, unsigned nsub,
                             size_t maxgrid, gs__kc_args_t *a)
{
    const size_t nb = gs_km_nblocks(a->count, a->block);
    const size_t gpb = pl->nthreads / group;
    const size_t grid = gs_kc_grid(nb, gpb, maxgrid);

    a->group = group;
    a->tree = gs_kc_log2(group);
    return gs_kc_plan_add(pl, body, grid, (nb + grid * gpb - 1) / (grid * gpb), nsub, a);
}

/*
 * The steps of an encode (res NULL) or a fused error-feedback encode, for
 * blocks of @p nthreads threads (a power of two, 8 .. 256) and at most
 * @p maxgrid blocks per launch. 0, or -1 for arguments out of contract
 * (kind, nthreads, block, k, a workspace too small).
 */
GS_KFN int gs_kc_plan_encode(gs__kc_plan_t *pl, int kind, const gs__k_codec_params_t *p,
                             const float *src, float *res, uint8_t *body, void *work,
                             size_t work_size, unsigned nthreads, size_t maxgrid)
{
    gs__kc_args_t a;
    const size_t nb = (p->block > 0) ? gs_km_nblocks(p->count, p->block) : 0;
    const float *x = (res != NULL) ? res : src;
    unsigned group;
    int rc = 0;

    if ((gs_kc_plan_init(pl, kind, p, nthreads, &a) != 0) || (maxgrid < 1) ||
        (work_size < gs_kc_work_size(kind, p, nthreads)) ||
        ((gs_kc_work_size(kind, p, nthreads) > 0) && (work == NULL))) {
        return -1;
    }
    a.src = src;
    a.res = res;
    a.body = body;
    a.vec = gs_kc_aligned(src) && gs_kc_aligned(res) && gs_kc_aligned(body);
    if ((p->count == 0) && (kind != GS_CODEC_RANDK)) {
        return 0;
    }
    switch (kind) {
    case GS_CODEC_FP16:
    case GS_CODEC_BF16:
        return gs_kc_plan_flat(pl, GS_KC_HALF_ENC, (p->count + 7) / 8, maxgrid, &a);
    case GS_CODEC_INT8:
    case GS_CODEC_INT4:
    case GS_CODEC_FP8_E4M3:
    case GS_CODEC_FP8_E5M2:
    case GS_CODEC_QSGD:
        a.fused = !gs_kc_nibbles(kind, p->param) || ((p->block & 1u) == 0) || (nb == 1);
        a.wf = (float *)work;
        /* About GS_KC_PER_LANE elements a lane: a tree of few levels, and
         * several codec blocks per CUDA block between barriers. */
        group = 1u << gs_kc_log2((p->block + GS_KC_PER_LANE - 1) / GS_KC_PER_LANE);
        group = (group > nthreads) ? nthreads : group;
        rc = gs_kc_plan_groups(pl, GS_KC_QUANT_GROUP, group, gs_kc_log2(group) + 3, maxgrid, &a);
        if ((rc == 0) && !a.fused) {
            rc = gs_kc_plan_flat(pl, GS_KC_QUANT_CODES, (p->count + 1) / 2, maxgrid, &a);
        }
        return rc;
    case GS_CODEC_SIGN:
        a.fused = ((p->block & 7u) == 0) || (nb == 1);
        rc = gs_kc_plan_groups(pl, GS_KC_SIGN_GROUP, GS_KM_SIGN_PARTIALS, 3, maxgrid, &a);
        if ((rc == 0) && !a.fused) {
            rc = gs_kc_plan_flat(pl, GS_KC_SIGN_PACK, (p->count + 7) / 8, maxgrid, &a);
        }
        return rc;
    case GS_CODEC_RANDK:
        if (res != NULL) {
            rc = gs_kc_plan_flat(pl, GS_KC_ADD, (p->count + 3) / 4, maxgrid, &a);
        }
        a.src = x;
        return (rc == 0) ? gs_kc_plan_flat(pl, GS_KC_RANDK_GATHER, p->param, maxgrid, &a) : rc;
    default: /* GS_CODEC_TOPK */
        break;
    }
    if (p->param == 0) {
        return 0;
    }
    {
        const size_t n4 = (p->count + 3) / 4;
        const size_t nchunks = gs_kc_topk_nchunks(p->count, nthreads);
        const size_t grid = gs_kc_grid(nchunks, 1, maxgrid);
        const unsigned lg = gs_kc_log2(nthreads);

        a.wu = (uint32_t *)work;
        rc |= gs_kc_plan_one(pl, GS_KC_TOPK_SAMPLE, 3, &a);
        rc |= gs_kc_plan_add(pl, GS_KC_TOPK_HIST, gs_kc_grid(n4, nthreads, maxgrid), 1, 3, &a);
        /* The later passes read the (updated) values and leave them. */
        a.src = x;
        a.res = NULL;
        a.vec = gs_kc_aligned(x);
        rc |= gs_kc_plan_one(pl, GS_KC_TOPK_FIX, 2, &a);
        a.redo = 1;
        rc |= gs_kc_plan_add(pl, GS_KC_TOPK_HIST, gs_kc_grid(n4, nthreads, maxgrid), 1, 3, &a);
        a.redo = 0;
        for (int level = 0; level < 3; level++) {
            a.stage = level;
            if (level > 0) {
                rc |= gs_kc_plan_add(pl, GS_KC_TOPK_HIST, gs_kc_grid(n4, nthreads, maxgrid), 1, 3,
                                     &a);
            }
            rc |= gs_kc_plan_one(pl, GS_KC_TOPK_WALK, 2, &a);
        }
        a.stage = 0;
        rc |= gs_kc_plan_add(pl, GS_KC_TOPK_CHUNKS, grid, (nchunks + grid - 1) / grid, lg + 2, &a);
        rc |= gs_kc_plan_one(pl, GS_KC_TOPK_SCAN, lg + 2, &a);
        a.stage = 1;
        a.res = res; /* the kept elements leave the residual */
        rc |= gs_kc_plan_add(pl, GS_KC_TOPK_CHUNKS, grid, (nchunks + grid - 1) / grid, lg + 2, &a);
    }
    return (rc == 0) ? 0 : -1;
}

/* The steps of a decode (mode GS_K_CODEC_SET or _ADD). -1 for arguments
 * out of contract (top-k without @p bad among them). */
GS_KFN int gs_kc_plan_decode(gs__kc_plan_t *pl, int kind, const gs__k_codec_params_t *p,
                             const uint8_t *in, float *dst, int mode, float alpha, int *bad,
                             unsigned nthreads, size_t maxgrid)
{
    gs__kc_args_t a;
    int rc = 0;

    if ((gs_kc_plan_init(pl, kind, p, nthreads, &a) != 0) || (maxgrid < 1) ||
        ((mode != GS_K_CODEC_SET) && (mode != GS_K_CODEC_ADD)) ||
        ((kind == GS_CODEC_TOPK) && (bad == NULL))) {
        return -1;
    }
    a.in = in;
    a.dst = dst;
    a.mode = mode;
    a.alpha = alpha;
    a.bad = bad;
    a.vec = gs_kc_aligned(in) && gs_kc_aligned(dst);
    if ((kind != GS_CODEC_TOPK) && (kind != GS_CODEC_RANDK)) {
        return (p->count == 0) ? 0
                               : gs_kc_plan_flat(pl, GS_KC_DEC, (p->count + 7) / 8, maxgrid, &a);
    }
    if (kind == GS_CODEC_TOPK) {
        rc |= gs_kc_plan_flat(pl, GS_KC_TOPK_CHECK, p->param, maxgrid, &a);
    } else {
        a.bad = NULL;
    }
    if ((mode == GS_K_CODEC_SET) && (p->count > 0)) {
        rc |= gs_kc_plan_flat(pl, GS_KC_ZERO, (p->count + 3) / 4, maxgrid, &a);
    }
    if (p->param > 0) {
        rc |=
            gs_kc_plan_flat(pl, (kind == GS_CODEC_TOPK) ? GS_KC_TOPK_SCATTER : GS_KC_RANDK_SCATTER,
                            p->param, maxgrid, &a);
    }
    return (rc == 0) ? 0 : -1;
}

/* The top-k check alone (no steps for the other codecs). */
GS_KFN int gs_kc_plan_check(gs__kc_plan_t *pl, int kind, const gs__k_codec_params_t *p,
                            const uint8_t *in, int *bad, unsigned nthreads, size_t maxgrid)
{
    gs__kc_args_t a;

    if ((gs_kc_plan_init(pl, kind, p, nthreads, &a) != 0) || (maxgrid < 1) ||
        ((kind == GS_CODEC_TOPK) && (bad == NULL))) {
        return -1;
    }
    if ((kind != GS_CODEC_TOPK) || (p->param == 0)) {
        return 0;
    }
    a.in = in;
    a.bad = bad;
    return gs_kc_plan_flat(pl, GS_KC_TOPK_CHECK, p->param, maxgrid, &a);
}

#endif /* GS_KERNELS_CODEC_BODY_H */
