/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the vectorised codec kernels (src/compress/codec_simd.c):
 * every codec that has one (fp16, bf16, int8, qsgd, sign, topk) must give the same bytes on
 * encode and the same f32 bits on decode and decode-accumulate as its
 * plain C loop (forced with gs__codec_force_scalar), on every length 0..70
 * (all tails), at odd offsets into the buffers, with NaN, inf, -0 and
 * subnormal inputs mixed in, and for int8 and sign with block sizes that
 * are not multiples of 8 (sign blocks start mid-byte; odd qsgd blocks start
 * mid-nibble-byte), qsgd with 4-bit and 8-bit codes; and the fused
 * error-feedback encodes of int8, qsgd and sign against the unfused
 * sequence.
 * Skipped checks: none; on a CPU
 * without AVX2/F16C both runs take the plain C path and must still agree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "codec_test_util.h"
#include "compress/codec.h"

#define MAXN 70

static int g_specials = 1; /* 0: plain normal data (no NaN: the vector max path runs) */
static double g_ratio;     /* topk: fraction kept (0: the default) */
static int g_ties;         /* 1: values from a set of 16, so many keys tie */
static int g_strided;      /* 1: large values at every 16th index only (fools topk's sample) */
static int g_levels;       /* qsgd: levels (0: the default, 7, 4-bit codes) */

static float float_of(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

/* n + 1 floats: normal data with specials sprinkled in (x[0] is unused so
 * that x + 1 is not 32-byte aligned). */
/* Residuals equal bit for bit, except that any NaN equals any NaN: the sign
 * of a NaN made from inf - inf depends on the operand order the compiler
 * picked (the plain-C path under UBSan at -O1 gave -nan where the kernel
 * gave nan), and a NaN residual means the same whatever its bits. */
static int same_f32(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!((a[i] != a[i]) && (b[i] != b[i])) && (memcmp(&a[i], &b[i], sizeof(float)) != 0)) {
            return 0;
        }
    }
    return 1;
}

static float *mixed_input(uint64_t seed, size_t n)
{
    static const uint32_t specials[] = {0x7fc00001u, 0xff800000u, 0x80000000u, 0x00000001u,
                                        0x387fffffu, 0x7f7fffffu, 0x477ff000u, 0x33000001u,
                                        0x7f800001u, 0xb3800000u};
    codec_rng_t r = {.s = seed};
    float *x = codec_normal_vec(seed, n + 1, 3.0);

    for (size_t i = 1; i <= n; i++) {
        if (g_strided) {
            x[i] = ((i - 1) % 16 == 0) ? 100.0f + (float)(i % 7) : 0.001f * (float)(i % 5);
        } else if (g_ties) {
            x[i] = (float)((int)(codec_rng_next(&r) % 16) - 8) * 0.25f;
        } else if (g_specials && ((codec_rng_next(&r) % 5) == 0)) {
            x[i] = float_of(specials[codec_rng_next(&r) % (sizeof(specials) / 4)]);
        }
    }
    return x;
}

/* Encode, decode and decode-accumulate with the kernels and with plain C;
 * compare the payloads byte for byte and the outputs bit for bit. */
static void compare_paths(gs_codec_kind_t kind, int block, size_t n, uint64_t seed)
{
    gs_codec_config_t cfg = codec_cfg(kind);
    float *x = mixed_input(seed, n);
    float *dst[2], *acc[2];
    codec_buf_t b[2];

    if (block > 0) {
        cfg.block_size = block;
    }
    if (g_ratio > 0) {
        cfg.ratio = g_ratio;
    }
    if (g_levels > 0) {
        cfg.levels = g_levels;
    }
    cfg.seed = seed * 0x9e3779b97f4a7c15ull; /* qsgd: another draw per case */
    for (int path = 0; path < 2; path++) {
        gs__codec_force_scalar = path;
        codec_buf_init(&b[path], &cfg, n, GS_DTYPE_F32);
        codec_encode_ok(&cfg, x + 1, n, GS_DTYPE_F32, GS_EF_NULL, &b[path]);
        dst[path] = calloc(n + 1, sizeof(float));
        acc[path] = codec_normal_vec(seed + 7, n + 1, 1.0);
        assert_non_null(dst[path]);
        codec_decode_ok(&cfg, &b[path], n, GS_DTYPE_F32, dst[path] + 1);
        assert_int_equal(gs_codec_decode_accumulate(&cfg, b[path].payload, b[path].len, n,
                                                    GS_DTYPE_F32, b[path].scratch,
                                                    b[path].scratch_size, acc[path] + 1),
                         GS_OK);
    }
    gs__codec_force_scalar = 0;
    assert_int_equal(b[0].len, b[1].len);
    if (memcmp(b[0].payload, b[1].payload, b[0].len) != 0) {
        fail_msg("codec %d block %d n %zu: the kernel's payload differs from plain C", (int)kind,
                 block, n);
    }
    if ((memcmp(dst[0], dst[1], (n + 1) * sizeof(float)) != 0) ||
        (memcmp(acc[0], acc[1], (n + 1) * sizeof(float)) != 0)) {
        fail_msg("codec %d block %d n %zu: the kernel's decode differs from plain C", (int)kind,
                 block, n);
    }
    for (int path = 0; path < 2; path++) {
        codec_buf_free(&b[path]);
        free(dst[path]);
        free(acc[path]);
    }
    free(x);
}

static void test_codec_simd_fp16_bf16_every_tail(void **state)
{
    (void)state;
    for (size_t n = 0; n <= MAXN; n++) {
        compare_paths(GS_CODEC_FP16, 0, n, 100 + n);
        compare_paths(GS_CODEC_BF16, 0, n, 200 + n);
    }
    compare_paths(GS_CODEC_FP16, 0, 100003, 5);
    compare_paths(GS_CODEC_BF16, 0, 100003, 6);
}

static void blocks_and_tails(gs_codec_kind_t kind)
{
    static const int blocks[] = {1, 3, 8, 13, 33, 64, 256};

    for (size_t bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
        for (size_t n = 0; n <= MAXN; n++) {
            compare_paths(kind, blocks[bi], n, 300 + n);
        }
        compare_paths(kind, blocks[bi], 100003, 7);
        g_specials = 0;
        compare_paths(kind, blocks[bi], 100003, 8);
        compare_paths(kind, blocks[bi], 61, 9);
        g_specials = 1;
    }
}

static void test_codec_simd_sign_blocks_and_tails(void **state)
{
    (void)state;
    blocks_and_tails(GS_CODEC_SIGN);
}

/* int8: blocks with and without NaN (mixed_input puts specials in about
 * one element of five; block 33 and up nearly always hold one, block 1
 * to 8 often do not), tails of the 32-element packing step. */
static void test_codec_simd_int8_blocks_and_tails(void **state)
{
    (void)state;
    blocks_and_tails(GS_CODEC_INT8);
}

/* qsgd: the same draws and codes, 4-bit (levels 7, and 1: codes 0 and +-1
 * only) and 8-bit (levels 8 and 127); odd block sizes start nibble runs
 * mid-byte, where the plain loop takes the first element; blocks with NaN
 * (scale NaN: every code decodes to NaN) and with inf and no NaN. */
static void test_codec_simd_qsgd_blocks_and_tails(void **state)
{
    static const int levels[] = {7, 1, 8, 127};

    (void)state;
    for (size_t li = 0; li < sizeof(levels) / sizeof(levels[0]); li++) {
        g_levels = levels[li];
        blocks_and_tails(GS_CODEC_QSGD);
    }
    g_levels = 0;
}

/* qsgd on data with a large dynamic range and exact ties at the levels
 * (x a multiple of the step: t = l + u exactly, so the clamp and the
 * truncation see boundary values), both code widths. */
static void test_codec_simd_qsgd_boundaries(void **state)
{
    (void)state;
    g_ties = 1; /* multiples of 0.25 up to 2: steps of 2 / levels */
    for (int levels = 1; levels <= 127; levels = levels * 2 + 1) {
        g_levels = levels;
        for (size_t n = 0; n <= MAXN; n++) {
            compare_paths(GS_CODEC_QSGD, 64, n, 700 + n);
        }
        compare_paths(GS_CODEC_QSGD, 256, 100003, 701);
    }
    g_ties = 0;
    g_levels = 0;
}

/* topk: the sampled lower bound (n >= 65536), the plain tail, NaN and inf
 * keys, heavy ties at the threshold (taken in index order), and ratios
 * from one element to nearly all. */
static void test_codec_simd_topk_same_selection(void **state)
{
    static const double ratios[] = {0.01, 0.3, 0.999};
    static const size_t sizes[] = {65536, 100003, 300007};

    (void)state;
    for (size_t ri = 0; ri < sizeof(ratios) / sizeof(ratios[0]); ri++) {
        g_ratio = ratios[ri];
        for (size_t n = 0; n <= MAXN; n++) {
            compare_paths(GS_CODEC_TOPK, 0, n, 400 + n);
        }
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
            compare_paths(GS_CODEC_TOPK, 0, sizes[si], 500 + si);
            g_specials = 0;
            compare_paths(GS_CODEC_TOPK, 0, sizes[si], 510 + si);
            g_specials = 1;
            g_ties = 1;
            compare_paths(GS_CODEC_TOPK, 0, sizes[si], 520 + si);
            compare_paths(GS_CODEC_TOPK, 0, 61, 530 + si);
            g_ties = 0;
            g_strided = 1; /* ratio 0.3: the sample's bound leaves < k keys */
            compare_paths(GS_CODEC_TOPK, 0, sizes[si], 540 + si);
            g_strided = 0;
        }
    }
    g_ratio = 0;
}

/* Fused error-feedback encode (ops->encode_ef, int8, qsgd and sign) against the
 * unfused sequence it replaces (add, encode, decode-accumulate with alpha
 * -1): the same body bytes and the same residual bits, on both paths,
 * over three steps (so the residual is not zero), for every length 0..70
 * and block sizes that do and do not start sign blocks on a byte. */
static void fused_ef_case(gs_codec_kind_t kind, int block, size_t n, uint64_t seed)
{
    const gs_codec_config_t cfg = codec_cfg(kind);
    gs_codec_config_t c = cfg;
    gs__codec_resolved_t rc;
    gs__codec_params_t p;
    float *x = mixed_input(seed, n), *r[2], *ref[2];
    uint8_t *body[2], *body_ref[2];
    size_t bytes;

    c.block_size = block;
    if (g_levels > 0) {
        c.levels = g_levels;
    }
    assert_int_equal(gs__codec_resolve(&c, &rc), GS_OK);
    assert_int_equal(gs__codec_params(&rc, n, &p), GS_OK);
    p.seed = seed; /* qsgd: as codec_api.c sets it from cfg.seed and the ef step */
    assert_non_null(rc.ops->encode_ef);
    bytes = rc.ops->encoded_size(&p) + 1;
    for (int path = 0; path < 2; path++) {
        r[path] = calloc(n + 1, sizeof(float));
        ref[path] = calloc(n + 1, sizeof(float));
        body[path] = calloc(bytes, 1);
        body_ref[path] = calloc(bytes, 1);
        assert_true(r[path] && ref[path] && body[path] && body_ref[path]);
        gs__codec_force_scalar = path;
        for (int step = 0; step < 3; step++) {
            assert_int_equal(rc.ops->encode_ef(&p, x + 1, r[path], body[path]), GS_OK);
            gs__ef_add_f32(ref[path], x + 1, n);
            assert_int_equal(rc.ops->encode(&p, ref[path], body_ref[path]), GS_OK);
            assert_int_equal(rc.ops->decode_accumulate(&p, body_ref[path], ref[path],
                                                       GS_CODEC_MODE_ADD, gs__codec_minus_one),
                             GS_OK);
            if ((memcmp(body[path], body_ref[path], bytes) != 0) ||
                !same_f32(r[path], ref[path], n)) {
                fail_msg("codec %d block %d n %zu step %d path %d: the fused encode differs "
                         "from add + encode + decode",
                         (int)kind, block, n, step, path);
            }
        }
    }
    gs__codec_force_scalar = 0;
    if ((memcmp(body[0], body[1], bytes) != 0) || !same_f32(r[0], r[1], n)) {
        fail_msg("codec %d block %d n %zu: the fused kernels differ from plain C", (int)kind, block,
                 n);
    }
    for (int path = 0; path < 2; path++) {
        free(r[path]);
        free(ref[path]);
        free(body[path]);
        free(body_ref[path]);
    }
    free(x);
}

static void test_codec_simd_fused_ef(void **state)
{
    /* qsgd twice: 4-bit codes (levels 7), then 8-bit (levels 127) */
    static const gs_codec_kind_t kinds[] = {GS_CODEC_INT8, GS_CODEC_SIGN, GS_CODEC_QSGD,
                                            GS_CODEC_QSGD};
    static const int blocks[] = {1, 3, 8, 13, 16, 33, 64, 256};

    (void)state;
    for (size_t ki = 0; ki < sizeof(kinds) / sizeof(kinds[0]); ki++) {
        g_levels = (ki == 3) ? 127 : 0;
        for (size_t bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
            for (size_t n = 0; n <= MAXN; n++) {
                fused_ef_case(kinds[ki], blocks[bi], n, 600 + n);
            }
            fused_ef_case(kinds[ki], blocks[bi], 100003, 11);
            g_specials = 0; /* no NaN: the vector max and mean paths run to the end */
            fused_ef_case(kinds[ki], blocks[bi], 100003, 12);
            fused_ef_case(kinds[ki], blocks[bi], 67, 13);
            g_specials = 1;
        }
    }
    g_levels = 0;
}

/* The kernels are really used where the CPU has them: the hook changes
 * the answer of gs__codec_isa(). */
static void test_codec_simd_force_scalar_hook(void **state)
{
    (void)state;
    gs__codec_force_scalar = 1;
    assert_int_equal(gs__codec_isa(), 0);
    gs__codec_force_scalar = 0;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        assert_int_not_equal(gs__codec_isa(), 0);
    }
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_simd_fp16_bf16_every_tail),
        cmocka_unit_test(test_codec_simd_sign_blocks_and_tails),
        cmocka_unit_test(test_codec_simd_int8_blocks_and_tails),
        cmocka_unit_test(test_codec_simd_qsgd_blocks_and_tails),
        cmocka_unit_test(test_codec_simd_qsgd_boundaries),
        cmocka_unit_test(test_codec_simd_topk_same_selection),
        cmocka_unit_test(test_codec_simd_fused_ef),
        cmocka_unit_test(test_codec_simd_force_scalar_hook),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
