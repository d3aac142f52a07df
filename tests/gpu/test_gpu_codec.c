/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The codec kernels on the GPU (kernels/codec_kernels.h) against the CPU
 * codecs (src/compress/codec.h: encode, encode_ef or its unfused
 * sequence, decode_accumulate), for fp16, bf16, int8, qsgd, sign, topk
 * and randk. CUDA builds only; exits 77 without a device.
 *
 * For every codec, a few configurations (block sizes that fill whole code
 * bytes and ones that do not, 4- and 8-bit qsgd, sparse ratios from 1% to
 * all) and counts 0, 1, 3, 1000, 4099, 100003 and 4 Mi + 3, on fresh
 * random f32 (never zero; the same seed on both sides for qsgd and randk):
 * - encode: the GPU body must be byte-identical to the CPU body (every one
 *   of these codecs is deterministic given the seed), and the bytes around
 *   the body, poisoned first, must be left alone;
 * - payloads crossed: the CPU body decoded on the GPU and the GPU body
 *   decoded by the CPU must both give the CPU decode's f32 bits, in set
 *   mode (output poisoned first) and in add mode (alpha 0.5 and -1 onto
 *   the same random output);
 * - encode with error feedback: body and new residual as the CPU's
 *   encode_ef (or codec_api.c's unfused residual += src; encode;
 *   residual -= decode when a codec has no fused one);
 * - top-k bodies that are hostile (an index out of range, indices out of
 *   order): the GPU check and decode set *bad and leave the output
 *   untouched, as the CPU decode returns GS_ERR_PROTOCOL.
 * A second pass mixes NaN, +-inf, +-0 and subnormal inputs in; a GPU
 * makes its own NaN payloads, so there the decoded values only have to
 * agree NaN for NaN, and a body that differs must decode (on the CPU) to
 * the same values, NaN for NaN (counted as a note, not a failure).
 * A third pass (chunk_sweep) runs every configuration on the chunks the
 * compressed all-reduce cuts (element offsets of any alignment, odd and
 * empty lengths, bodies 32 bytes into their slot), with guards on both
 * sides of every output. After every kernel launcher and codec call the
 * CUDA runtime's last-error slot must be clean (GT_KLIB, GT_LIB).
 * GPUTEST_QUICK=1 shortens the largest count to 1 Mi + 3.
 */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "codec_kernels.h"
#include "compress/codec.h"
#include "gradsync/gradsync.h"
#include "gpu_test_util.h"

#define POISON 0xA5u
#define MAX_COUNT ((size_t)4 * 1024 * 1024 + 3)
/* GPUTEST_QUICK=1 (tests/gpu/run.sh --quick): the largest count instead. */
#define QUICK_MAX_COUNT ((size_t)1024 * 1024 + 3)

#define NELEMS(_a) (sizeof(_a) / sizeof((_a)[0]))

static const size_t counts[] = {0, 1, 3, 1000, 4099, 100003, MAX_COUNT};

/* A codec configuration under test. */
typedef struct conf {
    gs_codec_kind_t kind;
    int block;    /* 0: default */
    int levels;   /* 0: default */
    double ratio; /* 0: default */
} conf_t;

static const conf_t confs[] = {
    {GS_CODEC_FP16, 0, 0, 0},   {GS_CODEC_BF16, 0, 0, 0},     {GS_CODEC_INT8, 0, 0, 0},
    {GS_CODEC_INT8, 100, 0, 0}, {GS_CODEC_INT8, 1, 0, 0},     {GS_CODEC_QSGD, 0, 0, 0},
    {GS_CODEC_QSGD, 99, 0, 0},  {GS_CODEC_QSGD, 256, 100, 0}, {GS_CODEC_QSGD, 7, 3, 0},
    {GS_CODEC_SIGN, 0, 0, 0},   {GS_CODEC_SIGN, 8, 0, 0},     {GS_CODEC_SIGN, 100, 0, 0},
    {GS_CODEC_SIGN, 1, 0, 0},   {GS_CODEC_TOPK, 0, 0, 0},     {GS_CODEC_TOPK, 0, 0, 0.5},
    {GS_CODEC_TOPK, 0, 0, 1.0}, {GS_CODEC_RANDK, 0, 0, 0},    {GS_CODEC_RANDK, 0, 0, 0.3},
};

typedef struct st {
    /* device */
    float *dsrc, *dres, *ddst;
    uint8_t *dbody;
    void *dwork;
    size_t work_cap;
    int *dbad;
    cudaStream_t stream;
    /* host */
    float *src, *res0, *out0; /* inputs: gradient, residual, add-mode output */
    float *cpu_f, *gpu_f;     /* f32 results */
    uint8_t *cpu_body, *gpu_body;
    uint64_t rng;
    long notes;
    /* Where the case's device buffers start: @p off elements into dsrc,
     * dres and ddst, @p boff bytes into dbody (0 and 0: the cudaMalloc'd
     * bases; the chunk sweep sets them as the compressed all-reduce cuts). */
    size_t off;
    size_t boff;
} st_t;

static float *d_src(const st_t *s)
{
    return s->dsrc + s->off;
}

static float *d_res(const st_t *s)
{
    return s->dres + s->off;
}

static float *d_dst(const st_t *s)
{
    return s->ddst + s->off;
}

static uint8_t *d_body(const st_t *s)
{
    return s->dbody + s->boff;
}

static const char *kind_name(gs_codec_kind_t k)
{
    const gs__codec_ops_t *ops = gs__codec_lookup(k);

    return (ops != NULL) ? ops->name : "?";
}

/* ---------------------------------------------------------------------- */
/* Data and comparisons                                                   */
/* ---------------------------------------------------------------------- */

static float rand_value(st_t *s, bool special)
{
    const uint64_t r = gt_rand(&s->rng);
    uint32_t bits;
    float x;

    if (special && ((r % 50u) == 0)) {
        switch ((r >> 8) % 5u) {
        case 0:
            bits = 0x7f800000u | (uint32_t)((r >> 16) & 0x7fffffu) | 1u;
            break; /* NaN */
        case 1:
            bits = 0x7f800000u;
            break; /* inf */
        case 2:
            bits = 0;
            break; /* +0 */
        case 3:
            bits = 0x80000000u;
            break; /* -0 */
        default:
            bits = (uint32_t)((r >> 16) & 0x7fffffu) | 1u;
            break; /* sub */
        }
        bits |= ((r >> 40) & 1u) ? 0x80000000u : 0;
        memcpy(&x, &bits, sizeof(x));
        return x;
    }
    /* Roughly normal, never zero: a sum of uniforms, nudged off zero. */
    x = (float)(((double)(r >> 11) / 9007199254740992.0 - 0.5) * 4.0);
    return (x != 0.0f) ? x : 1e-3f;
}

static void fill(st_t *s, float *x, size_t n, bool special)
{
    for (size_t i = 0; i < n; i++) {
        x[i] = rand_value(s, special);
    }
}

static bool f32_same(float g, float w, bool nan_class)
{
    uint32_t gb, wb;

    memcpy(&gb, &g, 4);
    memcpy(&wb, &w, 4);
    return (gb == wb) || (nan_class && isnan(g) && isnan(w));
}

/* got[] == want[] as f32 bits (NaN for NaN when nan_class); one line on failure. */
static bool same_f32(const float *got, const float *want, size_t n, bool nan_class,
                     const char *what, const char *how)
{
    for (size_t i = 0; i < n; i++) {
        if (!f32_same(got[i], want[i], nan_class)) {
            uint32_t gb, wb;

            memcpy(&gb, &got[i], 4);
            memcpy(&wb, &want[i], 4);
            gt_check(false, "%s: %s: element %zu of %zu is %.9g (0x%08x), want %.9g (0x%08x)", what,
                     how, i, n, (double)got[i], gb, (double)want[i], wb);
            return false;
        }
    }
    gt_check(true, "%s", what);
    return true;
}

/* The bytes before (when there is one) and after a device body must keep their poison. */
static void body_guard(st_t *s, size_t len, const char *what)
{
    uint8_t after = 0, before = POISON;

    GT_CUDA(cudaMemcpy(&after, d_body(s) + len, 1, cudaMemcpyDeviceToHost));
    gt_check(after == POISON, "%s: the byte after the %zu-byte body was written (0x%02x)", what,
             len, after);
    if (s->boff > 0) {
        GT_CUDA(cudaMemcpy(&before, d_body(s) - 1, 1, cudaMemcpyDeviceToHost));
        gt_check(before == POISON, "%s: the byte before the body was written (0x%02x)", what,
                 before);
    }
}

/* Poison @p len + 1 body bytes, and the byte before the body when there is one. */
static void body_poison(st_t *s, size_t len)
{
    GT_CUDA(cudaMemset(s->dbody, POISON, s->boff + len + 1));
}

/* f32 element @p i of device buffer @p base (-1: the one before), as bits. */
static uint32_t dev_bits(const float *base, ptrdiff_t i)
{
    uint32_t v = 0;

    GT_CUDA(cudaMemcpy(&v, base + i, sizeof(v), cudaMemcpyDeviceToHost));
    return v;
}

/* Poison the f32 before @p base (when @p off > 0) and the one after its @p n elements. */
static void f32_guards_poison(float *base, size_t n, size_t off)
{
    GT_CUDA(cudaMemset(base + n, POISON, sizeof(float)));
    if (off > 0) {
        GT_CUDA(cudaMemset(base - 1, POISON, sizeof(float)));
    }
}

/* ... and check that they kept the poison. */
static void f32_guards_ok(const float *base, size_t n, size_t off, const char *what,
                          const char *name)
{
    const uint32_t after = dev_bits(base, (ptrdiff_t)n);

    gt_check(after == 0xA5A5A5A5u, "%s: the element after %s was written (0x%08x)", what, name,
             after);
    if (off > 0) {
        const uint32_t before = dev_bits(base, -1);

        gt_check(before == 0xA5A5A5A5u, "%s: the element before %s was written (0x%08x)", what,
                 name, before);
    }
}

/*
 * GPU body against CPU body. Identical: pass. Otherwise, in the special
 * pass, both must decode on the CPU to the same values, NaN for NaN (a
 * note); anywhere else it is a failure.
 */
static bool same_body(st_t *s, const gs__codec_ops_t *ops, const gs__codec_params_t *p, size_t len,
                      bool special, const char *what)
{
    size_t i;

    for (i = 0; i < len; i++) {
        if (s->gpu_body[i] != s->cpu_body[i]) {
            break;
        }
    }
    if (i == len) {
        gt_check(true, "%s", what);
        return true;
    }
    if (special) {
        const gs_status_t a =
            GT_LIB(ops->decode_accumulate(p, s->cpu_body, s->cpu_f, GS_CODEC_MODE_SET, 1.0f));
        const gs_status_t b =
            GT_LIB(ops->decode_accumulate(p, s->gpu_body, s->gpu_f, GS_CODEC_MODE_SET, 1.0f));

        if ((a == GS_OK) && (b == GS_OK) &&
            same_f32(s->gpu_f, s->cpu_f, p->count, true, what,
                     "the bodies differ and decode differently")) {
            s->notes++;
            return true;
        }
        return false;
    }
    gt_check(false, "%s: body byte %zu of %zu is 0x%02x on the GPU, 0x%02x on the CPU", what, i,
             len, s->gpu_body[i], s->cpu_body[i]);
    return false;
}

/* ---------------------------------------------------------------------- */
/* One case                                                               */
/* ---------------------------------------------------------------------- */

static void ensure_work(st_t *s, size_t need)
{
    if (need > s->work_cap) {
        GT_CUDA(cudaFree(s->dwork));
        GT_CUDA(cudaMalloc(&s->dwork, need));
        s->work_cap = need;
    }
}

static bool launched(int rc, st_t *s, const char *what, const char *call)
{
    const cudaError_t sync = cudaStreamSynchronize(s->stream);

    if (!gt_check(rc == 0, "%s: %s returned %d (%s)", what, call, rc,
                  cudaGetErrorString((cudaError_t)rc))) {
        return false;
    }
    GT_CUDA(sync);
    GT_CUDA(cudaGetLastError());
    return true;
}

/* Decode @p body (host) on the GPU and on the CPU in @p mode, compare. */
static void cross_decode(st_t *s, const gs__codec_ops_t *ops, const gs__codec_params_t *p,
                         const gs__k_codec_params_t *kp, const uint8_t *body, size_t len, int mode,
                         float alpha, bool special, const char *what)
{
    const size_t n = p->count;
    char w[384];
    int bad = 0;
    gs_status_t st;

    snprintf(w, sizeof(w), "%s, %s body decoded in %s mode (alpha %g)", what,
             (body == s->cpu_body) ? "CPU" : "GPU", (mode == GS_K_CODEC_SET) ? "set" : "add",
             (double)alpha);
    /* The CPU: decode this body into the starting output. */
    if (mode == GS_K_CODEC_SET) {
        memset(s->cpu_f, POISON, n * sizeof(float));
    } else {
        memcpy(s->cpu_f, s->out0, n * sizeof(float));
    }
    st = GT_LIB(ops->decode_accumulate(p, body, s->cpu_f, (gs__codec_mode_t)mode, alpha));
    if (!gt_check(st == GS_OK, "%s: the CPU decode failed: %s", w, gs_status_name(st))) {
        return;
    }
    /* The GPU: the same body, the same starting output. */
    GT_CUDA(cudaMemcpy(d_body(s), body, len, cudaMemcpyHostToDevice));
    if (mode == GS_K_CODEC_SET) {
        GT_CUDA(cudaMemset(d_dst(s), POISON, n * sizeof(float)));
    } else if (n > 0) {
        GT_CUDA(cudaMemcpy(d_dst(s), s->out0, n * sizeof(float), cudaMemcpyHostToDevice));
    }
    f32_guards_poison(d_dst(s), n, s->off);
    GT_CUDA(cudaMemset(s->dbad, 0, sizeof(int)));
    if (!launched(GT_KLIB(gs_k_codec_decode(ops->wire_id, kp, d_body(s), d_dst(s), mode, alpha,
                                            s->dbad, s->stream)),
                  s, w, "gs_k_codec_decode")) {
        return;
    }
    if (n > 0) {
        GT_CUDA(cudaMemcpy(s->gpu_f, d_dst(s), n * sizeof(float), cudaMemcpyDeviceToHost));
    }
    GT_CUDA(cudaMemcpy(&bad, s->dbad, sizeof(int), cudaMemcpyDeviceToHost));
    gt_check(bad == 0, "%s: *bad was set for a valid body", w);
    same_f32(s->gpu_f, s->cpu_f, n, special, w, "GPU decode against the CPU decode");
    f32_guards_ok(d_dst(s), n, s->off, w, "the output");
}

static void hostile_topk(st_t *s, const gs__codec_ops_t *ops, const gs__codec_params_t *p,
                         const gs__k_codec_params_t *kp, size_t len, const char *what)
{
    const uint32_t k = p->param;
    const size_t n = p->count;

    for (int how = 0; how < 2; how++) {
        char w[384];
        uint32_t idx;
        int bad = 0;
        gs_status_t st;

        if ((k == 0) || ((how == 1) && (k < 2))) {
            continue;
        }
        memcpy(s->cpu_body, s->gpu_body, len);
        if (how == 0) {
            idx = (uint32_t)n; /* out of range */
            memcpy(s->cpu_body + 4u * (k - 1u), &idx, 4);
        } else { /* two indices swapped: not ascending */
            uint32_t i0, i1;

            memcpy(&i0, s->cpu_body, 4);
            memcpy(&i1, s->cpu_body + 4, 4);
            memcpy(s->cpu_body, &i1, 4);
            memcpy(s->cpu_body + 4, &i0, 4);
        }
        snprintf(w, sizeof(w), "%s, hostile body (%s)", what,
                 (how == 0) ? "index out of range" : "indices out of order");
        memcpy(s->cpu_f, s->out0, n * sizeof(float));
        st = GT_LIB(ops->decode_accumulate(p, s->cpu_body, s->cpu_f, GS_CODEC_MODE_ADD, 1.0f));
        gt_check(st == GS_ERR_PROTOCOL, "%s: the CPU decode returned %s, want GS_ERR_PROTOCOL", w,
                 gs_status_name(st));
        GT_CUDA(cudaMemcpy(d_body(s), s->cpu_body, len, cudaMemcpyHostToDevice));
        GT_CUDA(cudaMemcpy(d_dst(s), s->out0, n * sizeof(float), cudaMemcpyHostToDevice));
        GT_CUDA(cudaMemset(s->dbad, 0, sizeof(int)));
        if (launched(GT_KLIB(gs_k_codec_check(ops->wire_id, kp, d_body(s), s->dbad, s->stream)), s,
                     w, "gs_k_codec_check")) {
            GT_CUDA(cudaMemcpy(&bad, s->dbad, sizeof(int), cudaMemcpyDeviceToHost));
            gt_check(bad == 1, "%s: gs_k_codec_check left *bad at %d", w, bad);
        }
        GT_CUDA(cudaMemset(s->dbad, 0, sizeof(int)));
        if (launched(GT_KLIB(gs_k_codec_decode(ops->wire_id, kp, d_body(s), d_dst(s),
                                               GS_K_CODEC_ADD, 1.0f, s->dbad, s->stream)),
                     s, w, "gs_k_codec_decode")) {
            GT_CUDA(cudaMemcpy(&bad, s->dbad, sizeof(int), cudaMemcpyDeviceToHost));
            GT_CUDA(cudaMemcpy(s->gpu_f, d_dst(s), n * sizeof(float), cudaMemcpyDeviceToHost));
            gt_check(bad == 1, "%s: gs_k_codec_decode left *bad at %d", w, bad);
            same_f32(s->gpu_f, s->out0, n, false, w, "the output of a rejected decode changed");
        }
    }
}

static void run_case(st_t *s, const conf_t *c, size_t n, bool special)
{
    gs_codec_config_t cfg = GS_CODEC_CONFIG_INIT;
    gs__codec_resolved_t rc;
    gs__codec_params_t p;
    gs__k_codec_params_t kp;
    const gs__codec_ops_t *ops;
    size_t len, ws;
    char what[260], where[80] = "";
    gs_status_t st;

    if ((s->off > 0) || (s->boff > 0)) {
        snprintf(where, sizeof(where), ", at element %zu (body at byte %zu)", s->off, s->boff);
    }
    cfg.kind = c->kind;
    if (c->block > 0) {
        cfg.block_size = c->block;
    }
    if (c->levels > 0) {
        cfg.levels = c->levels;
    }
    if (c->ratio > 0) {
        cfg.ratio = c->ratio;
    }
    st = GT_LIB(gs__codec_resolve(&cfg, &rc));
    if (st == GS_OK) {
        st = GT_LIB(gs__codec_params(&rc, n, &p));
    }
    if (!gt_check(st == GS_OK, "codec %s: resolve/params failed: %s", kind_name(c->kind),
                  gs_last_error())) {
        return;
    }
    ops = rc.ops;
    p.seed = gt_rand(&s->rng);
    kp.count = p.count;
    kp.block = p.block;
    kp.param = p.param;
    kp.seed = p.seed;
    len = ops->encoded_size(&p);
    snprintf(what, sizeof(what), "%s block %u param %u, n %zu%s%s", ops->name, p.block, p.param, n,
             special ? ", special values" : "", where);
    ws = gs_k_codec_workspace_size(c->kind, &kp);
    ensure_work(s, ws);

    /* encode */
    fill(s, s->src, n, special);
    if (n > 0) {
        GT_CUDA(cudaMemcpy(d_src(s), s->src, n * sizeof(float), cudaMemcpyHostToDevice));
    }
    body_poison(s, len);
    if (!launched(
            GT_KLIB(gs_k_codec_encode(c->kind, &kp, d_src(s), d_body(s), s->dwork, ws, s->stream)),
            s, what, "gs_k_codec_encode")) {
        return;
    }
    GT_CUDA(cudaMemcpy(s->gpu_body, d_body(s), len, cudaMemcpyDeviceToHost));
    body_guard(s, len, what);
    memset(s->cpu_body, POISON, len);
    st = GT_LIB(ops->encode(&p, s->src, s->cpu_body));
    gt_check(st == GS_OK, "%s: the CPU encode failed", what);
    same_body(s, ops, &p, len, special, what);

    /* payloads crossed, set and add */
    fill(s, s->out0, n, false);
    cross_decode(s, ops, &p, &kp, s->cpu_body, len, GS_K_CODEC_SET, 1.0f, special, what);
    cross_decode(s, ops, &p, &kp, s->gpu_body, len, GS_K_CODEC_SET, 1.0f, special, what);
    cross_decode(s, ops, &p, &kp, s->cpu_body, len, GS_K_CODEC_ADD, 0.5f, special, what);
    cross_decode(s, ops, &p, &kp, s->gpu_body, len, GS_K_CODEC_ADD, -1.0f, special, what);

    /* hostile top-k bodies */
    if (c->kind == GS_CODEC_TOPK) {
        hostile_topk(s, ops, &p, &kp, len, what);
    }

    /* encode with error feedback */
    {
        char w[320];

        snprintf(w, sizeof(w), "%s, encode_ef", what);
        fill(s, s->src, n, special);
        fill(s, s->res0, n, false);
        if (n > 0) {
            GT_CUDA(cudaMemcpy(d_src(s), s->src, n * sizeof(float), cudaMemcpyHostToDevice));
            GT_CUDA(cudaMemcpy(d_res(s), s->res0, n * sizeof(float), cudaMemcpyHostToDevice));
        }
        f32_guards_poison(d_res(s), n, s->off);
        body_poison(s, len);
        if (!launched(GT_KLIB(gs_k_codec_encode_ef(c->kind, &kp, d_src(s), d_res(s), d_body(s),
                                                   s->dwork, ws, s->stream)),
                      s, w, "gs_k_codec_encode_ef")) {
            return;
        }
        GT_CUDA(cudaMemcpy(s->gpu_body, d_body(s), len, cudaMemcpyDeviceToHost));
        if (n > 0) {
            GT_CUDA(cudaMemcpy(s->gpu_f, d_res(s), n * sizeof(float), cudaMemcpyDeviceToHost));
        }
        body_guard(s, len, w);
        f32_guards_ok(d_res(s), n, s->off, w, "the residual");
        memcpy(s->cpu_f, s->res0, n * sizeof(float));
        memset(s->cpu_body, POISON, len);
        if (ops->encode_ef != NULL) {
            st = GT_LIB(ops->encode_ef(&p, s->src, s->cpu_f, s->cpu_body));
        } else {
            gs__ef_add_f32(s->cpu_f, s->src, n);
            st = GT_LIB(ops->encode(&p, s->cpu_f, s->cpu_body));
            if (st == GS_OK) {
                st = GT_LIB(ops->decode_accumulate(&p, s->cpu_body, s->cpu_f, GS_CODEC_MODE_ADD,
                                                   gs__codec_minus_one));
            }
        }
        gt_check(st == GS_OK, "%s: the CPU encode_ef failed", w);
        /* same_body decodes into cpu_f/gpu_f when the bodies differ: compare
         * the residuals first. */
        same_f32(s->gpu_f, s->cpu_f, n, special, w, "the GPU residual against the CPU one");
        same_body(s, ops, &p, len, special, w);
    }
}

/*
 * The codec kernels on the buffers the compressed all-reduce on device
 * buffers hands them (src/algo/sched/algo_comp_dev_cuda.c): chunk c of a count
 * cut over n ranks (gs__algo_split, src/algo/ctx/ctx.h: balanced, so chunks
 * start at any element and have odd lengths, some none) is encoded from
 * sendbuf + off with the worker residual + off, and decoded into recvbuf +
 * off, while its body sits GS_CODEC_HEADER_BYTES into a 256-byte aligned
 * slot. On a GPU an unaligned start takes the scalar path and a 16-byte
 * aligned one the vector loads (float4, uint4), which a CPU build of the
 * same bodies never tells apart; the element before and after each output
 * and residual, and the byte before and after each body, must keep their
 * poison.
 */
static void chunk_sweep(st_t *s)
{
    static const size_t totals[] = {7, 1031, 100003};
    static const int ranks[] = {3, 4, 8};

    for (size_t c = 0; c < NELEMS(confs); c++) {
        for (size_t t = 0; t < NELEMS(totals); t++) {
            for (size_t r = 0; r < NELEMS(ranks); r++) {
                const size_t base = totals[t] / (size_t)ranks[r];
                const size_t extra = totals[t] % (size_t)ranks[r];

                for (size_t q = 0; q < (size_t)ranks[r]; q++) {
                    s->off = q * base + ((q < extra) ? q : extra);
                    s->boff = GS_CODEC_HEADER_BYTES;
                    run_case(s, &confs[c], base + ((q < extra) ? 1 : 0), false);
                }
            }
        }
    }
    s->off = 0;
    s->boff = 0;
}

int main(void)
{
    st_t s;
    struct cudaDeviceProp prop;
    bool quick;
    const size_t fbytes = (MAX_COUNT + 16) * sizeof(float);

    gt_skip_without_device("test_gpu_codec");
    memset(&s, 0, sizeof(s));
    s.rng = 0x243f6a8885a308d3ull;
    GT_CUDA(cudaSetDevice(0));
    GT_CUDA(cudaGetDeviceProperties(&prop, 0));
    printf("test_gpu_codec: GPU 0 (%s, sm_%d%d)\n", prop.name, prop.major, prop.minor);
    fflush(stdout);
    GT_CUDA(cudaMalloc((void **)&s.dsrc, fbytes));
    GT_CUDA(cudaMalloc((void **)&s.dres, fbytes));
    GT_CUDA(cudaMalloc((void **)&s.ddst, fbytes));
    /* Every body is at most as large as its f32 input, plus scales and seed. */
    GT_CUDA(cudaMalloc((void **)&s.dbody, 2 * fbytes));
    GT_CUDA(cudaMalloc((void **)&s.dbad, sizeof(int)));
    GT_CUDA(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    s.src = malloc(fbytes);
    s.res0 = malloc(fbytes);
    s.out0 = malloc(fbytes);
    s.cpu_f = malloc(fbytes);
    s.gpu_f = malloc(fbytes);
    s.cpu_body = malloc(2 * fbytes);
    s.gpu_body = malloc(2 * fbytes);
    if ((s.src == NULL) || (s.res0 == NULL) || (s.out0 == NULL) || (s.cpu_f == NULL) ||
        (s.gpu_f == NULL) || (s.cpu_body == NULL) || (s.gpu_body == NULL)) {
        fprintf(stderr, "test_gpu_codec: out of host memory\n");
        return 1;
    }

    quick = (getenv("GPUTEST_QUICK") != NULL) && (strcmp(getenv("GPUTEST_QUICK"), "1") == 0);
    for (size_t c = 0; c < NELEMS(confs); c++) {
        for (size_t k = 0; k < NELEMS(counts); k++) {
            const size_t n = (quick && (counts[k] == MAX_COUNT)) ? QUICK_MAX_COUNT : counts[k];

            run_case(&s, &confs[c], n, false);
            if ((n > 0) && (n <= 100003)) {
                run_case(&s, &confs[c], n, true);
            }
        }
    }
    chunk_sweep(&s);

    printf("test_gpu_codec: %ld checks, %ld failed, %ld notes (bodies that differ only in NaN "
           "payloads)\n",
           gt_checks, gt_failures, s.notes);
    GT_CUDA(cudaStreamDestroy(s.stream));
    GT_CUDA(cudaFree(s.dsrc));
    GT_CUDA(cudaFree(s.dres));
    GT_CUDA(cudaFree(s.ddst));
    GT_CUDA(cudaFree(s.dbody));
    GT_CUDA(cudaFree(s.dbad));
    GT_CUDA(cudaFree(s.dwork));
    free(s.src);
    free(s.res0);
    free(s.out0);
    free(s.cpu_f);
    free(s.gpu_f);
    free(s.cpu_body);
    free(s.gpu_body);
    return (gt_failures > 0) ? 1 : 0;
}
