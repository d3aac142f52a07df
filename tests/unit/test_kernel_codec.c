/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the codec kernels (kernels/codec_body.h, launched by
 * kernels/codec.cu), run on the CPU: the kernel bodies compile as C and
 * the plans of codec_body.h (the same launch sequences codec.cu runs) go
 * through GS_CPU_GRID_PHASES with several grid shapes (256 threads and a
 * wide grid; 32 threads and 3 blocks; 8 threads and 1 block, so that the
 * grid-stride loops and phase iterations turn many times).
 *
 * Against the CPU codecs (gs__codec_lookup(kind)->encode / encode_ef /
 * decode_accumulate), for fp16, bf16, int8, int4, fp8 (E4M3 and E5M2),
 * qsgd (4- and 8-bit codes), sign, randk and topk, on normal data and on data with inf, a NaN and
 * subnormals (never zeros), blocks of 1, 7 and 256, counts 0, 1, 7, 255,
 * 256, 257 and 10007, buffers 16-byte aligned or not, with the SIMD and
 * the plain C codecs:
 *   - encode: the body byte for byte (bodies poisoned with 0xA5 first);
 *   - encode with error feedback: body byte for byte, residual bit for bit
 *     (a NaN equals any NaN);
 *   - decode (set, output poisoned first) and decode-accumulate (alpha 0.75
 *     and -1) of a CPU-encoded body and of random bytes: output bit for bit
 *     against the CPU decoder; the kernel-encoded body decoded by the CPU;
 * top-k also: exactly k ascending indices, every kept |x| >= every dropped
 * |x|, heavy ties, the sampled bound on n >= 65536 and its device-side
 * rerun when the sample overshoots (checked through the workspace flag);
 * hostile bodies (index out of range, repeated, descending) set *bad and
 * leave dst untouched, guards after dst included; a shared flag stops a
 * later decode; the plans reject arguments out of contract.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "codec_test_util.h"
#include "compress/codec.h"
/* NOTE: relative, as compress/codec.h includes codec_math.h. */
#include "codec_body.h"

static const size_t counts[] = {0, 1, 7, 255, 256, 257, 10007};
static const uint32_t blocks[] = {1, 7, 256};

#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))
#define NBLOCKS (sizeof(blocks) / sizeof(blocks[0]))
#define GUARD 16 /* poisoned floats after every output */

typedef struct grid_shape {
    unsigned threads;
    size_t maxgrid;
} grid_shape_t;

static const grid_shape_t shapes[] = {{256, 1024}, {32, 3}, {8, 1}};

#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

/* ---------------------------------------------------------------------- */
/* The CPU runner                                                         */
/* ---------------------------------------------------------------------- */

/* One phase of one thread; the shared memory is poisoned when a block
 * starts, so that a body reading what it did not write differs. */
static void cpu_phase(gs__kthread_t t, int ph, int body, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    if ((ph == 0) && (t.thread == 0)) {
        memset(sm, 0xA5, sizeof(*sm));
    }
    gs_kb_step(t, ph, body, a, sm);
}

static void run_plan(const gs__kc_plan_t *pl)
{
    gs__kc_smem_t *sm = malloc(sizeof(*sm));

    assert_non_null(sm);
    for (int i = 0; i < pl->nsteps; i++) {
        const gs__kc_step_t *st = &pl->step[i];

        assert_true(st->grid >= 1);
        GS_CPU_GRID_PHASES(st->grid, pl->nthreads, st->nphases, cpu_phase, st->body, st->a, sm);
    }
    free(sm);
}

/* ---------------------------------------------------------------------- */
/* Data and comparisons                                                   */
/* ---------------------------------------------------------------------- */

static float f32_of(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

/* n normal values (sigma), none zero; with specials (1 or 2), some inf,
 * subnormal, fp16-overflowing and fp16-halfway values, and one NaN at
 * random (specials 1), or four with different payloads at i, i + 1, i + 8
 * and i + 32 (specials 2: which one a block's max keeps is part of the
 * bits, and the kernels split a block across lanes 8 or 32 apart). */
static float *make_data(uint64_t seed, size_t n, double sigma, int specials)
{
    static const uint32_t sp[] = {0x7f800000u, 0xff800000u, 0x00000001u, 0x80000005u,
                                  0x477ff000u, 0x7149f2cau, 0x387fffffu, 0x33000001u};
    codec_rng_t r = {.s = seed ^ 0x5bd1e995u};
    float *x = codec_normal_vec(seed, n + GUARD, sigma);

    for (size_t i = 0; i < n; i++) {
        if (x[i] == 0.0f) {
            x[i] = 0.5f;
        }
        if (specials && ((codec_rng_next(&r) % 7) == 0)) {
            x[i] = f32_of(sp[codec_rng_next(&r) % (sizeof(sp) / sizeof(sp[0]))]);
        }
    }
    if ((specials > 0) && (n > 0)) {
        const size_t i = codec_rng_next(&r) % n;

        x[i] = f32_of(0x7fc00001u | (uint32_t)((seed & 1) << 31));
        /* More NaNs, other payloads: in the same block and thread lane
         * (8 or 32 apart) or not. */
        for (size_t d = 1; (specials > 1) && (d <= 32); d *= 2) {
            if ((i + d < n) && ((d == 1) || (d == 8) || (d == 32))) {
                x[i + d] = f32_of(0xffc0ab00u + (uint32_t)d);
            }
        }
    }
    return x;
}

/* a[i] and b[i] the same bits, or both NaN (see the header comment of
 * kernels/codec_kernels.h: a NaN's payload may differ). */
static void assert_same_f32(const float *a, const float *b, size_t n, const char *what,
                            const char *ctx)
{
    for (size_t i = 0; i < n; i++) {
        if (!((a[i] != a[i]) && (b[i] != b[i])) && (memcmp(&a[i], &b[i], sizeof(float)) != 0)) {
            uint32_t ua, ub;

            memcpy(&ua, &a[i], 4);
            memcpy(&ub, &b[i], 4);
            fail_msg("%s: %s[%zu] kernel 0x%08x (%g), CPU 0x%08x (%g)", ctx, what, i, ua,
                     (double)a[i], ub, (double)b[i]);
        }
    }
}

static void assert_same_bytes(const uint8_t *a, const uint8_t *b, size_t n, const char *ctx)
{
    for (size_t i = 0; i < n; i++) {
        if (a[i] != b[i]) {
            fail_msg("%s: body byte %zu of %zu: kernel 0x%02x, CPU 0x%02x", ctx, i, n, a[i], b[i]);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* One case: a codec, its parameters, a grid shape, an alignment          */
/* ---------------------------------------------------------------------- */

typedef struct kcase {
    gs_codec_kind_t kind;
    gs__codec_params_t p;
    grid_shape_t shape;
    int misalign; /* 1: every buffer off 16-byte alignment */
    int specials;
    uint64_t seed;
} kcase_t;

/* A buffer of n bytes at an offset of 0 or a few bytes into its block. */
typedef struct kbuf {
    void *base;
    uint8_t *p;
} kbuf_t;

static void *kbuf_alloc(kbuf_t *b, size_t n, int misalign, size_t off)
{
    b->base = malloc(n + 64);
    assert_non_null(b->base);
    b->p = (uint8_t *)b->base + 16 + (misalign ? off : 0);
    assert_true(((uintptr_t)b->base & 15u) == 0);
    return b->p;
}

static gs__k_codec_params_t kparams(const gs__codec_params_t *p)
{
    gs__k_codec_params_t k = {
        .count = p->count, .block = p->block, .param = p->param, .seed = p->seed};

    return k;
}

static void kernel_encode(const kcase_t *c, const float *src, float *res, uint8_t *body)
{
    const gs__k_codec_params_t kp = kparams(&c->p);
    const size_t ws = gs_kc_work_size((int)c->kind, &kp, c->shape.threads);
    void *work = malloc(ws + 4);
    gs__kc_plan_t pl;

    assert_non_null(work);
    memset(work, 0xA5, ws + 4);
    assert_int_equal(gs_kc_plan_encode(&pl, (int)c->kind, &kp, src, res, body,
                                       (ws > 0) ? work : NULL, ws, c->shape.threads,
                                       c->shape.maxgrid),
                     0);
    run_plan(&pl);
    free(work);
}

/* Decode a valid body (top-k: its flag must stay 0). */
static void kernel_decode(const kcase_t *c, const uint8_t *body, float *dst, int mode, float alpha)
{
    const gs__k_codec_params_t kp = kparams(&c->p);
    gs__kc_plan_t pl;
    int bad = 0;

    assert_int_equal(gs_kc_plan_decode(&pl, (int)c->kind, &kp, body, dst, mode, alpha, &bad,
                                       c->shape.threads, c->shape.maxgrid),
                     0);
    run_plan(&pl);
    assert_int_equal(bad, 0);
}

/* The CPU's error-feedback encode: encode_ef, or codec_api.c's unfused
 * sequence when the codec has none. */
static void cpu_encode_ef(const gs__codec_ops_t *ops, const gs__codec_params_t *p, const float *src,
                          float *res, uint8_t *body)
{
    if (ops->encode_ef != NULL) {
        assert_int_equal(ops->encode_ef(p, src, res, body), GS_OK);
        return;
    }
    gs__ef_add_f32(res, src, p->count);
    assert_int_equal(ops->encode(p, res, body), GS_OK);
    assert_int_equal(ops->decode_accumulate(p, body, res, GS_CODEC_MODE_ADD, -1.0f), GS_OK);
}

static void check_case(const kcase_t *c)
{
    const gs__codec_ops_t *ops = gs__codec_lookup(c->kind);
    const size_t n = c->p.count, blen = ops->encoded_size(&c->p);
    const size_t fl = (n + GUARD) * sizeof(float);
    const int mis = c->misalign;
    char ctx[160];
    kbuf_t bx, bbk, bbc, brk, brc, bdk, bdc;
    /* Two NaNs only where no sum meets both (sign adds a block's |x|: two
     * NaN operands would keep a payload the compiler's operand order picks). */
    float *x =
        make_data(c->seed, n, 0.01, (c->kind == GS_CODEC_SIGN) ? c->specials : 2 * c->specials);
    float *r0 = make_data(c->seed + 1, n, 0.003, 0);
    float *src = kbuf_alloc(&bx, fl, mis, 4);
    uint8_t *bk = kbuf_alloc(&bbk, blen + GUARD, mis, 1);
    uint8_t *bc = kbuf_alloc(&bbc, blen + GUARD, 0, 0);
    float *rk = kbuf_alloc(&brk, fl, mis, 8);
    float *rc = kbuf_alloc(&brc, fl, 0, 0);
    float *dk = kbuf_alloc(&bdk, fl, mis, 12);
    float *dc = kbuf_alloc(&bdc, fl, 0, 0);
    static const float alphas[] = {0.75f, -1.0f};

    snprintf(ctx, sizeof(ctx),
             "codec %s n %zu block %u param %u threads %u maxgrid %zu misalign %d specials %d",
             ops->name, n, c->p.block, c->p.param, c->shape.threads, c->shape.maxgrid, mis,
             c->specials);
    memcpy(src, x, fl);

    /* encode */
    memset(bk, 0xA5, blen + GUARD);
    memset(bc, 0xA5, blen + GUARD);
    kernel_encode(c, src, NULL, bk);
    assert_int_equal(ops->encode(&c->p, src, bc), GS_OK);
    assert_same_bytes(bk, bc, blen + GUARD, ctx);
    assert_same_f32(src, x, n, "src (read only)", ctx);

    /* encode with error feedback */
    memset(bk, 0xA5, blen + GUARD);
    memset(bc, 0xA5, blen + GUARD);
    memcpy(rk, r0, fl);
    memcpy(rc, r0, fl);
    kernel_encode(c, src, rk, bk);
    cpu_encode_ef(ops, &c->p, src, rc, bc);
    assert_same_bytes(bk, bc, blen + GUARD, ctx);
    assert_same_f32(rk, rc, n + GUARD, "residual", ctx);

    /* decode, set: the CPU body on both sides, and the kernel's body on the CPU */
    for (int garbage = 0; garbage < 2; garbage++) {
        if (garbage) {
            codec_rng_t g = {.s = c->seed * 31 + 7};

            for (size_t i = 0; i < blen; i++) {
                bc[i] = (uint8_t)codec_rng_next(&g);
            }
            if (c->kind == GS_CODEC_TOPK) {
                break; /* hostile top-k bodies: test_kernel_codec_topk_hostile */
            }
        }
        memset(dk, 0xA5, fl);
        memset(dc, 0xA5, fl);
        kernel_decode(c, bc, dk, GS_K_CODEC_SET, 1.0f);
        assert_int_equal(ops->decode_accumulate(&c->p, bc, dc, GS_CODEC_MODE_SET, 1.0f), GS_OK);
        assert_same_f32(dk, dc, n + GUARD, garbage ? "decode of random bytes" : "decode", ctx);
        for (size_t a = 0; a < 2; a++) {
            memcpy(dk, r0, fl);
            memcpy(dc, r0, fl);
            kernel_decode(c, bc, dk, GS_K_CODEC_ADD, alphas[a]);
            assert_int_equal(ops->decode_accumulate(&c->p, bc, dc, GS_CODEC_MODE_ADD, alphas[a]),
                             GS_OK);
            assert_same_f32(dk, dc, n + GUARD, "decode-accumulate", ctx);
        }
    }
    /* the kernel's (error-feedback) body decodes on the CPU as the CPU's does */
    memset(dk, 0xA5, fl);
    memset(dc, 0xA5, fl);
    memcpy(bc, bk, blen);
    assert_int_equal(ops->decode_accumulate(&c->p, bk, dk, GS_CODEC_MODE_SET, 1.0f), GS_OK);
    kernel_decode(c, bc, dc, GS_K_CODEC_SET, 1.0f);
    assert_same_f32(dc, dk, n + GUARD, "kernel body decoded on the CPU", ctx);

    free(bx.base);
    free(bbk.base);
    free(bbc.base);
    free(brk.base);
    free(brc.base);
    free(bdk.base);
    free(bdc.base);
    free(x);
    free(r0);
}

/* Every count x shape x alignment x data kind for one codec and its
 * parameter choices; each case twice, with the SIMD and plain C codecs. */
static void sweep(gs_codec_kind_t kind, uint32_t param_or_zero, int blocked)
{
    uint64_t seed = 1000 * (uint64_t)kind + param_or_zero;

    for (size_t ci = 0; ci < NCOUNTS; ci++) {
        for (size_t bi = 0; bi < (blocked ? NBLOCKS : 1); bi++) {
            for (size_t si = 0; si < NSHAPES; si++) {
                for (int v = 0; v < 4; v++) {
                    /* Not inside the initializer: its expressions are evaluated in no set
                     * order, and .seed below reads seed too. */
                    ++seed;
                    kcase_t c = {.kind = kind,
                                 .p = {.count = counts[ci],
                                       .block = blocked ? blocks[bi] : 0,
                                       .param = param_or_zero,
                                       .seed = 0x9e3779b97f4a7c15ull * seed},
                                 .shape = shapes[si],
                                 .misalign = v & 1,
                                 .specials = (v >> 1) & 1,
                                 .seed = seed};

                    if ((kind == GS_CODEC_TOPK) || (kind == GS_CODEC_RANDK)) {
                        /* k = round(param% of n), at least 1, at most n */
                        size_t k = (counts[ci] * param_or_zero + 50) / 100;

                        k = (k < 1) ? 1 : k;
                        c.p.param = (uint32_t)((k > counts[ci]) ? counts[ci] : k);
                    }
                    for (int scalar = 0; scalar < 2; scalar++) {
                        gs__codec_force_scalar = scalar;
                        check_case(&c);
                    }
                    gs__codec_force_scalar = 0;
                }
            }
        }
    }
}

static void test_kernel_codec_fp16(void **state)
{
    (void)state;
    sweep(GS_CODEC_FP16, 0, 0);
}

static void test_kernel_codec_bf16(void **state)
{
    (void)state;
    sweep(GS_CODEC_BF16, 0, 0);
}

static void test_kernel_codec_int8(void **state)
{
    (void)state;
    sweep(GS_CODEC_INT8, 0, 1);
}

/* int4: 4-bit codes; blocks of 1 and 7 take the split path (a second
 * launch writes the code bytes, the step factors in the workspace). */
static void test_kernel_codec_int4(void **state)
{
    (void)state;
    sweep(GS_CODEC_INT4, 0, 1);
}

static void test_kernel_codec_fp8_e4m3(void **state)
{
    (void)state;
    sweep(GS_CODEC_FP8_E4M3, 0, 1);
}

static void test_kernel_codec_fp8_e5m2(void **state)
{
    (void)state;
    sweep(GS_CODEC_FP8_E5M2, 0, 1);
}

static void test_kernel_codec_qsgd(void **state)
{
    (void)state;
    sweep(GS_CODEC_QSGD, 7, 1);  /* 4-bit codes */
    sweep(GS_CODEC_QSGD, 3, 1);  /* 4-bit codes */
    sweep(GS_CODEC_QSGD, 15, 1); /* 8-bit codes */
}

static void test_kernel_codec_sign(void **state)
{
    (void)state;
    sweep(GS_CODEC_SIGN, 0, 1);
}

static void test_kernel_codec_randk(void **state)
{
    (void)state;
    sweep(GS_CODEC_RANDK, 1, 0);   /* 1% */
    sweep(GS_CODEC_RANDK, 30, 0);  /* 30% */
    sweep(GS_CODEC_RANDK, 100, 0); /* every element */
}

static void test_kernel_codec_topk(void **state)
{
    (void)state;
    sweep(GS_CODEC_TOPK, 1, 0);
    sweep(GS_CODEC_TOPK, 30, 0);
    sweep(GS_CODEC_TOPK, 100, 0);
}

/* Odd blocks that are not 1 or 7: sign's, int4's and 4-bit qsgd's split path with
 * blocks that end mid-byte in other ways, and large blocks (groups loop). */
static void test_kernel_codec_more_blocks(void **state)
{
    static const uint32_t more[] = {2, 3, 8, 9, 31, 64, 255, 257, 1000, 1u << 20};

    (void)state;
    for (size_t bi = 0; bi < sizeof(more) / sizeof(more[0]); bi++) {
        for (size_t si = 0; si < NSHAPES; si++) {
            static const gs_codec_kind_t kinds[] = {
                GS_CODEC_INT8, GS_CODEC_QSGD,     GS_CODEC_QSGD,    GS_CODEC_SIGN,
                GS_CODEC_INT4, GS_CODEC_FP8_E4M3, GS_CODEC_FP8_E5M2};
            static const uint32_t params[] = {0, 7, 100, 0, 0, 0, 0};

            for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
                kcase_t c = {
                    .kind = kinds[k],
                    .p = {.count = 3001, .block = more[bi], .param = params[k], .seed = 77 + bi},
                    .shape = shapes[si],
                    .misalign = (int)(bi & 1),
                    .specials = 1,
                    .seed = 500 + bi * 10 + si};

                check_case(&c);
            }
        }
    }
}

/* ---------------------------------------------------------------------- */
/* top-k: selection property, sample bound and its rerun, hostile bodies  */
/* ---------------------------------------------------------------------- */

/* The body is a valid top-k selection of x: k indices, strictly
 * ascending, < n, values x[idx] (bits), every kept |x| key >= every
 * dropped key; and the CPU decoder accepts it and rebuilds exactly that. */
static void assert_topk_selection(const float *x, size_t n, size_t k, const uint8_t *body)
{
    gs__codec_params_t p = {.count = n, .block = 0, .param = (uint32_t)k, .seed = 0};
    uint8_t *kept = calloc(n + 1, 1);
    float *y = malloc((n + 1) * sizeof(float));
    uint32_t min_kept = 0xffffffffu, max_dropped = 0;

    assert_non_null(kept);
    assert_non_null(y);
    for (size_t j = 0; j < k; j++) {
        const uint32_t idx = gs__codec_load_u32(body + 4 * j);
        const float v = gs__codec_load_f32(body + 4 * k + 4 * j);

        assert_true(idx < n);
        if (j > 0) {
            assert_true(idx > gs__codec_load_u32(body + 4 * (j - 1)));
        }
        assert_memory_equal(&v, &x[idx], sizeof(float));
        kept[idx] = 1;
        min_kept = (gs_km_topk_key(v) < min_kept) ? gs_km_topk_key(v) : min_kept;
    }
    for (size_t i = 0; i < n; i++) {
        if (!kept[i]) {
            max_dropped = (gs_km_topk_key(x[i]) > max_dropped) ? gs_km_topk_key(x[i]) : max_dropped;
        }
    }
    if ((k > 0) && (k < n) && (min_kept < max_dropped)) {
        fail_msg("top-k n %zu k %zu: kept key 0x%08x below dropped key 0x%08x", n, k, min_kept,
                 max_dropped);
    }
    memset(y, 0xA5, (n + 1) * sizeof(float));
    assert_int_equal(gs__codec_topk_ops.decode_accumulate(&p, body, y, GS_CODEC_MODE_SET, 1.0f),
                     GS_OK);
    for (size_t i = 0; i < n; i++) {
        const float want = kept[i] ? x[i] : 0.0f;

        assert_memory_equal(&y[i], &want, sizeof(float));
    }
    free(kept);
    free(y);
}

/* Encode x (n, k) on the kernels with 256-thread blocks; compare with the
 * CPU codec; return the workspace's rerun flag. */
static uint32_t topk_run(const float *x, size_t n, size_t k, unsigned threads, size_t maxgrid)
{
    const gs__codec_params_t p = {.count = n, .block = 0, .param = (uint32_t)k, .seed = 0};
    const gs__k_codec_params_t kp = kparams(&p);
    const size_t ws = gs_kc_work_size(GS_CODEC_TOPK, &kp, threads);
    uint32_t *work = malloc(ws);
    uint8_t *bk = malloc(8 * k + 1), *bc = malloc(8 * k + 1);
    gs__kc_plan_t pl;
    uint32_t redo;

    assert_non_null(work);
    assert_non_null(bk);
    assert_non_null(bc);
    memset(work, 0xA5, ws);
    memset(bk, 0xA5, 8 * k + 1);
    memset(bc, 0xA5, 8 * k + 1);
    assert_int_equal(
        gs_kc_plan_encode(&pl, GS_CODEC_TOPK, &kp, x, NULL, bk, work, ws, threads, maxgrid), 0);
    run_plan(&pl);
    redo = work[GS_KC_TK_REDO];
    assert_int_equal(gs__codec_topk_ops.encode(&p, x, bc), GS_OK);
    assert_topk_selection(x, n, k, bk);
    assert_same_bytes(bk, bc, 8 * k + 1, "top-k against the CPU");
    free(work);
    free(bk);
    free(bc);
    return redo;
}

static void test_kernel_codec_topk_selection(void **state)
{
    const size_t n = 70001; /* >= 65536: the sampled bound runs */
    float *x = make_data(3, n, 1.0, 0);
    codec_rng_t r = {.s = 9};

    (void)state;
    /* Normal data: the sample's bound holds, no rerun. */
    assert_int_equal(topk_run(x, n, 700, 256, 1024), 0);
    assert_int_equal(topk_run(x, n, 70001, 32, 7), 0);
    /* Heavy ties: 16 distinct values. */
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)((int)(codec_rng_next(&r) % 16) - 8) * 0.25f + 0.125f;
    }
    for (size_t k = 1; k < n; k = k * 7 + 3) {
        topk_run(x, n, k, 256, 1024);
        topk_run(x, n, k, 8, 5);
    }
    /* Large values exactly where the sample looks (every n / 4096-th
     * element), small ones elsewhere: the bound overshoots (fewer than k
     * keys above it) and the level-0 pass reruns on the device. */
    for (size_t i = 0; i < n; i++) {
        x[i] = (i % (n / GS_KC_TOPK_SAMPLES) == 0) ? 1000.0f + (float)(i % 13)
                                                   : 0.001f * (float)(1 + i % 11);
    }
    assert_int_equal(topk_run(x, n, 7000, 256, 1024), 1);
    assert_int_equal(topk_run(x, n, 7000, 32, 3), 1);
    free(x);
}

static void test_kernel_codec_topk_hostile(void **state)
{
    const size_t n = 1000, k = 10;
    const gs__codec_params_t p = {.count = n, .block = 0, .param = k, .seed = 0};
    const gs__k_codec_params_t kp = kparams(&p);
    float *x = make_data(5, n, 1.0, 0);
    float *dst = malloc((n + GUARD) * sizeof(float)), *want = malloc((n + GUARD) * sizeof(float));
    uint8_t good[80], body[80];
    /* (entry, index) rewrites, each making the body bad */
    static const struct {
        size_t j;
        uint32_t idx;
    } bad_edits[] = {{9, 1000}, {9, 0xffffffffu}, {0, 1000}, {5, 0}, {3, 0}, {4, 4}};
    gs__kc_plan_t pl;

    (void)state;
    assert_non_null(dst);
    assert_non_null(want);
    assert_int_equal(gs__codec_topk_ops.encode(&p, x, good), GS_OK);
    /* Make indices 0..9 pairwise distinct known values: 0, 100, 200, ... */
    for (size_t j = 0; j < k; j++) {
        gs__codec_store_u32(good + 4 * j, (uint32_t)(100 * j));
    }
    for (size_t e = 0; e < sizeof(bad_edits) / sizeof(bad_edits[0]); e++) {
        for (int mode = 0; mode < 2; mode++) {
            int bad = 0;

            memcpy(body, good, sizeof(body));
            if (bad_edits[e].j == 5) { /* a repeat of the entry before */
                gs__codec_store_u32(body + 4 * 5, gs__codec_load_u32(body + 4 * 4));
            } else if (bad_edits[e].j == 4) { /* descending */
                gs__codec_store_u32(body + 4 * 4, 250);
            } else if (bad_edits[e].j == 3) {
                gs__codec_store_u32(body + 4 * 3, 0);
            } else {
                gs__codec_store_u32(body + 4 * bad_edits[e].j, bad_edits[e].idx);
            }
            assert_int_equal(
                gs__codec_topk_ops.decode_accumulate(&p, body, dst, GS_CODEC_MODE_ADD, 1.0f),
                GS_ERR_PROTOCOL);
            memset(dst, 0xA5, (n + GUARD) * sizeof(float));
            memcpy(want, dst, (n + GUARD) * sizeof(float));
            assert_int_equal(
                gs_kc_plan_decode(&pl, GS_CODEC_TOPK, &kp, body, dst, mode, 1.0f, &bad, 32, 2), 0);
            run_plan(&pl);
            assert_int_equal(bad, 1);
            assert_memory_equal(dst, want, (n + GUARD) * sizeof(float));
        }
    }
    /* The good body: no flag, and the CPU's output. */
    {
        int bad = 0;

        memset(dst, 0xA5, (n + GUARD) * sizeof(float));
        memset(want, 0xA5, (n + GUARD) * sizeof(float));
        assert_int_equal(gs_kc_plan_decode(&pl, GS_CODEC_TOPK, &kp, good, dst, GS_K_CODEC_SET, 1.0f,
                                           &bad, 32, 2),
                         0);
        run_plan(&pl);
        assert_int_equal(bad, 0);
        assert_int_equal(
            gs__codec_topk_ops.decode_accumulate(&p, good, want, GS_CODEC_MODE_SET, 1.0f), GS_OK);
        assert_memory_equal(dst, want, (n + GUARD) * sizeof(float));
    }
    /* A flag shared by two payloads: checking a bad one first stops the
     * decode of a good one. */
    {
        int bad = 0;

        memcpy(body, good, sizeof(body));
        gs__codec_store_u32(body, 5000);
        assert_int_equal(gs_kc_plan_check(&pl, GS_CODEC_TOPK, &kp, body, &bad, 8, 1), 0);
        run_plan(&pl);
        assert_int_equal(bad, 1);
        memset(dst, 0xA5, (n + GUARD) * sizeof(float));
        memcpy(want, dst, (n + GUARD) * sizeof(float));
        assert_int_equal(
            gs_kc_plan_decode(&pl, GS_CODEC_TOPK, &kp, good, dst, GS_K_CODEC_SET, 1.0f, &bad, 8, 1),
            0);
        run_plan(&pl);
        assert_memory_equal(dst, want, (n + GUARD) * sizeof(float));
    }
    free(x);
    free(dst);
    free(want);
}

/* Arguments out of the plans' contract are refused before any step. */
static void test_kernel_codec_plan_contract(void **state)
{
    gs__k_codec_params_t kp = {.count = 100, .block = 8, .param = 10, .seed = 1};
    float x[100] = {1.0f};
    uint8_t body[1024];
    gs__kc_plan_t pl;
    int bad = 0;

    (void)state;
    /* thread counts: a power of two from 8 to 256 */
    assert_int_equal(gs_kc_plan_encode(&pl, GS_CODEC_INT8, &kp, x, NULL, body, NULL, 0, 4, 8), -1);
    assert_int_equal(gs_kc_plan_encode(&pl, GS_CODEC_INT8, &kp, x, NULL, body, NULL, 0, 48, 8), -1);
    assert_int_equal(gs_kc_plan_encode(&pl, GS_CODEC_INT8, &kp, x, NULL, body, NULL, 0, 512, 8),
                     -1);
    assert_int_equal(gs_kc_plan_encode(&pl, GS_CODEC_INT8, &kp, x, NULL, body, NULL, 0, 64, 8), 0);
    /* codecs: not none, not unknown */
    assert_int_equal(gs_kc_plan_encode(&pl, GS_CODEC_NONE, &kp, x, NULL, body, NULL, 0, 64, 8), -1);
    assert_int_equal(gs_kc_plan_decode(&pl, 99, &kp, body, x, GS_K_CODEC_SET, 1.0f, NULL, 64, 8),
                     -1);
    /* top-k: a workspace, and a flag to decode */
    assert_int_equal(gs_kc_plan_encode(&pl, GS_CODEC_TOPK, &kp, x, NULL, body, NULL, 0, 64, 8), -1);
    assert_int_equal(
        gs_kc_plan_decode(&pl, GS_CODEC_TOPK, &kp, body, x, GS_K_CODEC_SET, 1.0f, NULL, 64, 8), -1);
    assert_int_equal(
        gs_kc_plan_decode(&pl, GS_CODEC_TOPK, &kp, body, x, GS_K_CODEC_SET, 1.0f, &bad, 64, 8), 0);
    assert_int_equal(gs_kc_plan_check(&pl, GS_CODEC_TOPK, &kp, body, NULL, 64, 8), -1);
    /* bad modes, blocks, k */
    assert_int_equal(gs_kc_plan_decode(&pl, GS_CODEC_SIGN, &kp, body, x, 2, 1.0f, NULL, 64, 8), -1);
    kp.block = 0;
    assert_int_equal(gs_kc_plan_encode(&pl, GS_CODEC_SIGN, &kp, x, NULL, body, NULL, 0, 64, 8), -1);
    kp.param = 101;
    assert_int_equal(gs_kc_plan_encode(&pl, GS_CODEC_RANDK, &kp, x, NULL, body, NULL, 0, 64, 8),
                     -1);
    /* qsgd's split path needs its workspace */
    kp.block = 7;
    kp.param = 7;
    assert_true(gs_kc_work_size(GS_CODEC_QSGD, &kp, 64) == 15 * sizeof(float));
    assert_int_equal(gs_kc_plan_encode(&pl, GS_CODEC_QSGD, &kp, x, NULL, body, NULL, 0, 64, 8), -1);
    /* ... and int4's; the byte codes (fp8) need none, nor even blocks */
    assert_true(gs_kc_work_size(GS_CODEC_INT4, &kp, 64) == 15 * sizeof(float));
    assert_int_equal(gs_kc_plan_encode(&pl, GS_CODEC_INT4, &kp, x, NULL, body, NULL, 0, 64, 8), -1);
    assert_true(gs_kc_work_size(GS_CODEC_FP8_E4M3, &kp, 64) == 0);
    assert_true(gs_kc_work_size(GS_CODEC_FP8_E5M2, &kp, 64) == 0);
    kp.block = 8;
    assert_true(gs_kc_work_size(GS_CODEC_INT4, &kp, 64) == 0);
    /* blocked codecs need a block */
    kp.block = 0;
    assert_int_equal(gs_kc_plan_encode(&pl, GS_CODEC_INT4, &kp, x, NULL, body, NULL, 0, 64, 8), -1);
    assert_int_equal(gs_kc_plan_encode(&pl, GS_CODEC_FP8_E4M3, &kp, x, NULL, body, NULL, 0, 64, 8),
                     -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_codec_fp16),
        cmocka_unit_test(test_kernel_codec_bf16),
        cmocka_unit_test(test_kernel_codec_int8),
        cmocka_unit_test(test_kernel_codec_int4),
        cmocka_unit_test(test_kernel_codec_fp8_e4m3),
        cmocka_unit_test(test_kernel_codec_fp8_e5m2),
        cmocka_unit_test(test_kernel_codec_qsgd),
        cmocka_unit_test(test_kernel_codec_sign),
        cmocka_unit_test(test_kernel_codec_randk),
        cmocka_unit_test(test_kernel_codec_topk),
        cmocka_unit_test(test_kernel_codec_more_blocks),
        cmocka_unit_test(test_kernel_codec_topk_selection),
        cmocka_unit_test(test_kernel_codec_topk_hostile),
        cmocka_unit_test(test_kernel_codec_plan_contract),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
