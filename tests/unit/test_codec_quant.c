/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the block quantizers: int8 (codec_int8.c), int4
 * (codec_int4.c), qsgd (codec_qsgd.c, 4-bit and 8-bit codes) and sign
 * (codec_sign.c). Each is checked against its stated error bound on normal
 * data over counts and block sizes that hit every edge (empty, one
 * element, a partial last block, odd counts for nibble packing), plus
 * qsgd's unbiasedness and determinism, sign's exact magnitude and error
 * identity, and int4's exact codes, ties to even, bytes against an
 * independent encoder (odd blocks sharing a byte) and non-finite blocks
 * that behave as int8's. The fp8 codecs are in test_codec_fp8.c.
 * qsgd runs on both paths (the AVX2 kernels and the plain C loops, forced
 * with gs__codec_force_scalar): its bytes must be those of the draw that
 * docs/compression.md states, computed here independently.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "codec_test_util.h"
#include "compress/codec.h"

static const size_t counts[] = {0, 1, 2, 7, 255, 256, 257, 1000, 100003};
static const int blocks[] = {1, 3, 8, 256, 1000, 1 << 20};

#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))
#define NBLOCKS (sizeof(blocks) / sizeof(blocks[0]))

static double block_max(const float *x, size_t lo, size_t n)
{
    double m = 0;
    size_t i;

    for (i = lo; i < lo + n; i++) {
        m = fmax(m, fabs((double)x[i]));
    }
    return m;
}

/* Round trip int8, int4 or qsgd over all counts x blocks; check |x - y| <=
 * the per-element bound: max|x| / 254 for int8, max|x| / 14 for int4,
 * max|x| / levels for qsgd; and the payload's size: gs_codec_encoded_size,
 * header + scales + codes. */
static void check_blocked_bound(gs_codec_kind_t kind, int levels)
{
    size_t c, bi, i;

    for (c = 0; c < NCOUNTS; c++) {
        for (bi = 0; bi < NBLOCKS; bi++) {
            const size_t n = counts[c];
            const size_t blk = (size_t)blocks[bi];
            gs_codec_config_t cfg = codec_cfg(kind);
            float *x = codec_normal_vec(100 + c * 7 + bi, n, 0.01);
            float *y = malloc((n > 0 ? n : 1) * sizeof(float));
            codec_buf_t b;
            size_t nb = (n + blk - 1) / blk, code_bytes;

            assert_non_null(y);
            cfg.block_size = blocks[bi];
            cfg.levels = levels;
            cfg.seed = 42;
            codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
            codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
            code_bytes = (((kind == GS_CODEC_QSGD) && (levels <= 7)) || (kind == GS_CODEC_INT4))
                             ? (n + 1) / 2
                             : n;
            assert_int_equal(b.len, GS_CODEC_HEADER_BYTES + nb * 4 + code_bytes);
            assert_int_equal(b.len, b.cap);
            codec_decode_ok(&cfg, &b, n, GS_DTYPE_F32, y);
            double m = 0;

            for (i = 0; i < n; i++) {
                const size_t lo = (i / blk) * blk;
                double bound;

                if (i == lo) {
                    m = block_max(x, lo, (n - lo < blk) ? n - lo : blk);
                }
                bound = ((kind == GS_CODEC_INT8)   ? m / 254.0
                         : (kind == GS_CODEC_INT4) ? m / 14.0
                                                   : m / levels) *
                            (1 + 1e-5) +
                        1e-30;
                if (fabs((double)x[i] - (double)y[i]) > bound) {
                    fail_msg("kind %d levels %d n %zu block %zu: x[%zu] %g -> %g, bound %g",
                             (int)kind, levels, n, blk, i, (double)x[i], (double)y[i], bound);
                }
            }
            codec_buf_free(&b);
            free(x);
            free(y);
        }
    }
}

static void test_codec_int8_roundtrip_bound(void **state)
{
    (void)state;
    check_blocked_bound(GS_CODEC_INT8, GS_UNSET);
}

static void test_codec_int4_roundtrip_bound(void **state)
{
    (void)state;
    for (int scalar = 0; scalar < 2; scalar++) {
        gs__codec_force_scalar = scalar;
        check_blocked_bound(GS_CODEC_INT4, GS_UNSET);
    }
    gs__codec_force_scalar = 0;
}

static void test_codec_qsgd_roundtrip_bound(void **state)
{
    (void)state;
    check_blocked_bound(GS_CODEC_QSGD, 1);
    check_blocked_bound(GS_CODEC_QSGD, 7);
    check_blocked_bound(GS_CODEC_QSGD, 8);
    check_blocked_bound(GS_CODEC_QSGD, 127);
}

/* A block of zeros (and a block of tiny subnormals) decodes to zeros:
 * int8, int4 and the fp8 codecs alike. */
static void test_codec_int8_zero_and_tiny_blocks(void **state)
{
    static const gs_codec_kind_t kinds[] = {GS_CODEC_INT8, GS_CODEC_INT4, GS_CODEC_FP8_E4M3,
                                            GS_CODEC_FP8_E5M2};
    const size_t n = 512;
    float x[512], y[512];
    size_t i, k;

    (void)state;
    for (i = 0; i < n; i++) {
        x[i] = (i < 256) ? 0.0f : 1e-44f;
    }
    for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        gs_codec_config_t cfg = codec_cfg(kinds[k]);
        codec_buf_t b;

        codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
        codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
        codec_decode_ok(&cfg, &b, n, GS_DTYPE_F32, y);
        for (i = 0; i < n; i++) {
            assert_true(fabsf(y[i] - x[i]) <= 1e-44f);
            assert_false(isnan(y[i]));
        }
        codec_buf_free(&b);
    }
}

/* ---------------------------------------------------------------------- */
/* int4                                                                   */
/* ---------------------------------------------------------------------- */

/* Encode x (n elements, blocks of blk) as int4 and return the payload. */
static void int4_encode(const float *x, size_t n, int blk, codec_buf_t *b)
{
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_INT4);

    cfg.block_size = blk;
    codec_buf_init(b, &cfg, n, GS_DTYPE_F32);
    codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, b);
}

/* Every code -7 .. 7: x = k s in a block whose max is 7 s decodes to
 * exactly k s, with the nibbles where docs/compression.md puts them. */
static void test_codec_int4_exact_codes(void **state)
{
    static const float scales[] = {1.0f, 0.125f, 0x1p-100f, 0x1p100f, 3.0f};
    float x[16], y[16];

    (void)state;
    for (size_t si = 0; si < sizeof(scales) / sizeof(scales[0]); si++) {
        const float s = scales[si];
        gs_codec_config_t cfg = codec_cfg(GS_CODEC_INT4);
        codec_buf_t b;
        const uint8_t *body;

        for (int k = -7; k <= 7; k++) {
            x[k + 7] = (float)k * s;
        }
        int4_encode(x, 15, 256, &b);
        assert_int_equal(b.len, GS_CODEC_HEADER_BYTES + 4 + 8);
        body = b.payload + GS_CODEC_HEADER_BYTES;
        assert_true(gs__codec_load_f32(body) == s); /* 7 s / 7 */
        for (int k = -7; k <= 7; k++) {
            const size_t i = (size_t)(k + 7);
            const unsigned nib = (body[4 + i / 2] >> (4 * (i & 1))) & 15u;

            assert_int_equal(nib, (unsigned)k & 15u);
        }
        assert_int_equal(body[4 + 7] >> 4, 0); /* the pad nibble */
        codec_decode_ok(&cfg, &b, 15, GS_DTYPE_F32, y);
        for (int k = -7; k <= 7; k++) {
            assert_true(y[k + 7] == (float)k * s);
        }
        codec_buf_free(&b);
    }
}

/* Halfway values round to the even code; the block max (7) fixes scale 1. */
static void test_codec_int4_ties_to_even(void **state)
{
    static const struct {
        float x;
        int code;
    } cases[] = {{0.5f, 0},   {1.5f, 2},  {2.5f, 2},  {3.5f, 4},   {4.5f, 4},
                 {5.5f, 6},   {6.5f, 6},  {-0.5f, 0}, {-1.5f, -2}, {-2.5f, -2},
                 {-6.5f, -6}, {0.49f, 0}, {0.51f, 1}, {2.51f, 3},  {-2.49f, -2}};
    const size_t n = sizeof(cases) / sizeof(cases[0]);
    float x[32];
    codec_buf_t b;

    (void)state;
    x[0] = 7.0f;
    for (size_t i = 0; i < n; i++) {
        x[i + 1] = cases[i].x;
    }
    int4_encode(x, n + 1, 256, &b);
    for (size_t i = 0; i < n; i++) {
        const size_t e = i + 1;
        const int code = gs_km_nibble_code(b.payload + GS_CODEC_HEADER_BYTES + 4, e);

        if (code != cases[i].code) {
            fail_msg("int4 of %g: code %d, want %d", (double)cases[i].x, code, cases[i].code);
        }
    }
    codec_buf_free(&b);
}

/* The body against an encoder written here from docs/compression.md: per
 * block scale = max|x| / 7, code = clamp(rint(x / scale)) with the block's
 * own 7 / max factor, nibbles over the whole tensor. Odd blocks put the
 * codes of two blocks into one byte; both paths (AVX2 max, plain C). */
static void test_codec_int4_reference_bytes(void **state)
{
    static const size_t ns[] = {1, 2, 3, 7, 8, 255, 256, 257, 1001};
    static const int blks[] = {1, 2, 3, 7, 64, 256};

    (void)state;
    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
        for (size_t bi = 0; bi < sizeof(blks) / sizeof(blks[0]); bi++) {
            const size_t n = ns[ni], blk = (size_t)blks[bi], nb = (n + blk - 1) / blk;
            float *x = codec_normal_vec(31 + ni * 11 + bi, n, 2.0);
            uint8_t *want = calloc(nb * 4 + (n + 1) / 2, 1);

            assert_non_null(want);
            for (size_t lo = 0; lo < n; lo += blk) {
                const size_t len = (n - lo < blk) ? n - lo : blk;
                float m = 0.0f, inv, scale;

                for (size_t i = lo; i < lo + len; i++) {
                    m = fmaxf(m, fabsf(x[i]));
                }
                inv = 7.0f / m;
                scale = m / 7.0f;
                memcpy(want + (lo / blk) * 4, &scale, 4);
                for (size_t i = lo; i < lo + len; i++) {
                    float v = rintf(x[i] * inv);

                    v = fminf(fmaxf(v, -7.0f), 7.0f);
                    want[nb * 4 + i / 2] |= (uint8_t)(((unsigned)(int)v & 15u) << (4 * (i & 1)));
                }
            }
            for (int scalar = 0; scalar < 2; scalar++) {
                codec_buf_t b;

                gs__codec_force_scalar = scalar;
                int4_encode(x, n, (int)blk, &b);
                gs__codec_force_scalar = 0;
                assert_int_equal(b.len, GS_CODEC_HEADER_BYTES + nb * 4 + (n + 1) / 2);
                if (memcmp(b.payload + GS_CODEC_HEADER_BYTES, want,
                           b.len - GS_CODEC_HEADER_BYTES) != 0) {
                    fail_msg("int4 n %zu block %zu scalar %d: body differs from the reference", n,
                             blk, scalar);
                }
                codec_buf_free(&b);
            }
            free(x);
            free(want);
        }
    }
}

/* Non-finite blocks decode as int8's do: the same elements come back
 * non-finite (a NaN block all NaN; an inf block NaN for its finite
 * elements, -inf for its infs), the other blocks within int4's bound. */
static void test_codec_int4_nonfinite_like_int8(void **state)
{
    enum { N = 300, BLK = 50 };
    float x[N], y4[N], y8[N];
    size_t i;

    (void)state;
    for (i = 0; i < N; i++) {
        x[i] = (float)i * 0.01f - 1.5f;
    }
    x[3] = NAN;        /* block 0 */
    x[120] = INFINITY; /* block 2 */
    x[149] = -INFINITY;
    x[201] = -NAN; /* block 4, with an inf too */
    x[230] = INFINITY;
    for (int scalar = 0; scalar < 2; scalar++) {
        gs_codec_config_t c4 = codec_cfg(GS_CODEC_INT4), c8 = codec_cfg(GS_CODEC_INT8);
        codec_buf_t b4, b8;

        c4.block_size = BLK;
        c8.block_size = BLK;
        gs__codec_force_scalar = scalar;
        codec_buf_init(&b4, &c4, N, GS_DTYPE_F32);
        codec_buf_init(&b8, &c8, N, GS_DTYPE_F32);
        codec_encode_ok(&c4, x, N, GS_DTYPE_F32, GS_EF_NULL, &b4);
        codec_encode_ok(&c8, x, N, GS_DTYPE_F32, GS_EF_NULL, &b8);
        codec_decode_ok(&c4, &b4, N, GS_DTYPE_F32, y4);
        codec_decode_ok(&c8, &b8, N, GS_DTYPE_F32, y8);
        gs__codec_force_scalar = 0;
        for (i = 0; i < N; i++) {
            const size_t blk = i / BLK;

            assert_int_equal(isnan(y4[i]) != 0, isnan(y8[i]) != 0);
            assert_int_equal(isinf(y4[i]) != 0, isinf(y8[i]) != 0);
            if ((blk == 0) || (blk == 4)) {
                assert_true(isnan(y4[i]));
            } else if ((i == 120) || (i == 149)) {
                /* inf x 0 is NaN, whose code is the lowest: -7 x inf */
                assert_true(isinf(y4[i]) && (y4[i] < 0));
            } else if (blk == 2) {
                assert_true(isnan(y4[i])); /* code 0 x scale inf */
            } else {
                const double bound = block_max(x, blk * BLK, BLK) / 14.0 * (1 + 1e-5);

                assert_true(fabs((double)x[i] - (double)y4[i]) <= bound);
            }
        }
        codec_buf_free(&b4);
        codec_buf_free(&b8);
    }
}

/* E[decode] = x: average many seeds; each element's mean must be within
 * 5 standard errors (the variance of one draw is at most step^2 / 4).
 * n = 100 in blocks of 33 (or one block): whole 32-element kernel steps,
 * plain tails and, for 4-bit codes, blocks that start mid-byte. */
static void qsgd_unbiased_case(int levels, int block, int scalar)
{
    enum { N = 100 };
    const size_t n = N, trials = 4000;
    float *x = codec_normal_vec(77, n, 1.0), y[N];
    double mean[N] = {0}, step[N];
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_QSGD);
    codec_buf_t b;
    size_t t, i;

    cfg.levels = levels;
    cfg.block_size = block;
    for (i = 0; i < n; i++) {
        const size_t lo = i / (size_t)block * (size_t)block;

        step[i] = block_max(x, lo, (n - lo < (size_t)block) ? n - lo : (size_t)block) / levels;
    }
    gs__codec_force_scalar = scalar;
    codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
    for (t = 0; t < trials; t++) {
        cfg.seed = t;
        codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
        codec_decode_ok(&cfg, &b, n, GS_DTYPE_F32, y);
        for (i = 0; i < n; i++) {
            mean[i] += y[i];
        }
    }
    gs__codec_force_scalar = 0;
    for (i = 0; i < n; i++) {
        const double m = mean[i] / (double)trials;

        if (fabs(m - x[i]) > 5 * step[i] / (2 * sqrt((double)trials))) {
            fail_msg("levels %d block %d scalar %d element %zu: x %g, mean of decodes %g "
                     "(step %g)",
                     levels, block, scalar, i, (double)x[i], m, step[i]);
        }
    }
    codec_buf_free(&b);
    free(x);
}

static void test_codec_qsgd_unbiased(void **state)
{
    (void)state;
    for (int scalar = 0; scalar < 2; scalar++) {
        qsgd_unbiased_case(3, 100, scalar);
        qsgd_unbiased_case(3, 33, scalar);
        qsgd_unbiased_case(100, 33, scalar);
    }
}

/* The documented draw, written out again here: key = the splitmix64
 * finaliser of seed + 0x9e3779b97f4a7c15 (low 32 bits), u =
 * (lowbias32(index + key) >> 8) / 2^24, code = sign(x) *
 * min(floor(|x| * levels / m + u), levels). */
static uint32_t ref_hash32(uint32_t v)
{
    v ^= v >> 16;
    v *= 0x7feb352du;
    v ^= v >> 15;
    v *= 0x846ca68bu;
    v ^= v >> 16;
    return v;
}

static int ref_code(float x, size_t index, uint64_t seed, float inv, int levels)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ull;
    uint32_t key;
    float u, t;
    int l;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    key = (uint32_t)(z ^ (z >> 31));
    u = (float)(ref_hash32((uint32_t)index + key) >> 8) * (1.0f / 16777216.0f);
    t = fabsf(x) * inv + u;
    l = (t <= (float)levels) ? (int)t : levels;
    return (x < 0.0f) ? -l : l;
}

/* The body of both paths, byte for byte against ref_code (ranks on CPUs
 * with and without AVX2 exchange the same format): the steps, then
 * nibbles (element 2j in the low nibble) or bytes. */
static void test_codec_qsgd_reference_bytes(void **state)
{
    static const int lv[] = {7, 127};
    static const int blks[] = {37, 256};
    const size_t n = 1001;
    float *x = codec_normal_vec(31, n, 2.0);

    (void)state;
    for (size_t li = 0; li < 2; li++) {
        for (size_t bi = 0; bi < 2; bi++) {
            const size_t blk = (size_t)blks[bi], nb = (n + blk - 1) / blk;
            const int nib = (lv[li] <= 7);
            gs_codec_config_t cfg = codec_cfg(GS_CODEC_QSGD);
            uint8_t *want = calloc(nb * 4 + n, 1);
            codec_buf_t b;

            assert_non_null(want);
            cfg.levels = lv[li];
            cfg.block_size = blks[bi];
            cfg.seed = 0x123456789abcull;
            for (size_t lo = 0; lo < n; lo += blk) {
                const size_t len = (n - lo < blk) ? n - lo : blk;
                const float m = (float)block_max(x, lo, len);
                const float inv = (float)lv[li] / m, step = m / (float)lv[li];

                memcpy(want + lo / blk * 4, &step, 4);
                for (size_t i = lo; i < lo + len; i++) {
                    const unsigned c = (unsigned)ref_code(x[i], i, cfg.seed, inv, lv[li]);

                    if (nib) {
                        want[nb * 4 + i / 2] |= (uint8_t)((c & 15u) << (4 * (i & 1)));
                    } else {
                        want[nb * 4 + i] = (uint8_t)c;
                    }
                }
            }
            for (int scalar = 0; scalar < 2; scalar++) {
                gs__codec_force_scalar = scalar;
                codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
                codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
                gs__codec_force_scalar = 0;
                assert_int_equal(b.len, GS_CODEC_HEADER_BYTES + nb * 4 + (nib ? (n + 1) / 2 : n));
                if (memcmp(b.payload + GS_CODEC_HEADER_BYTES, want,
                           b.len - GS_CODEC_HEADER_BYTES) != 0) {
                    fail_msg("levels %d block %zu scalar %d: the body is not the documented draw",
                             lv[li], blk, scalar);
                }
                codec_buf_free(&b);
            }
            free(want);
        }
    }
    free(x);
}

/* Non-finite input, on both paths: a block holding a NaN gets a NaN step
 * and decodes to NaN throughout; a block with an inf and no NaN gets an
 * inf step (its finite elements decode to NaN, 0 x inf, its infs to
 * +-inf); every other block is untouched by them and within its bound. */
static void test_codec_qsgd_nonfinite_blocks(void **state)
{
    enum { N = 300, BLK = 50 };
    static const int lv[] = {7, 127};
    float x[N], y[N];
    size_t i;

    (void)state;
    for (i = 0; i < N; i++) {
        x[i] = (float)i * 0.01f - 1.5f;
    }
    x[3] = NAN;        /* block 0 */
    x[120] = INFINITY; /* block 2 */
    x[149] = -INFINITY;
    for (size_t li = 0; li < 2; li++) {
        for (int scalar = 0; scalar < 2; scalar++) {
            gs_codec_config_t cfg = codec_cfg(GS_CODEC_QSGD);
            codec_buf_t b;

            cfg.levels = lv[li];
            cfg.block_size = BLK;
            gs__codec_force_scalar = scalar;
            codec_buf_init(&b, &cfg, N, GS_DTYPE_F32);
            codec_encode_ok(&cfg, x, N, GS_DTYPE_F32, GS_EF_NULL, &b);
            codec_decode_ok(&cfg, &b, N, GS_DTYPE_F32, y);
            gs__codec_force_scalar = 0;
            for (i = 0; i < N; i++) {
                const size_t blk = i / BLK;

                if (blk == 0) {
                    assert_true(isnan(y[i]));
                } else if ((i == 120) || (i == 149)) {
                    assert_true(isinf(y[i]) && ((y[i] < 0) == (x[i] < 0)));
                } else if (blk == 2) {
                    assert_true(isnan(y[i])); /* code 0 x step inf */
                } else {
                    const double bound = block_max(x, blk * BLK, BLK) / lv[li] * (1 + 1e-5);

                    assert_true(fabs((double)x[i] - (double)y[i]) <= bound);
                }
            }
            codec_buf_free(&b);
        }
    }
}

/* Same seed, same bytes; another seed, other bytes. */
static void test_codec_qsgd_deterministic(void **state)
{
    const size_t n = 10007;
    float *x = codec_normal_vec(3, n, 1.0);
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_QSGD);
    codec_buf_t a, b;

    (void)state;
    cfg.seed = 123;
    codec_buf_init(&a, &cfg, n, GS_DTYPE_F32);
    codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
    codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &a);
    codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.payload, b.payload, a.len);
    cfg.seed = 124;
    codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
    assert_int_equal(a.len, b.len);
    assert_true(memcmp(a.payload, b.payload, a.len) != 0);
    codec_buf_free(&a);
    codec_buf_free(&b);
    free(x);
}

/* sign: |y| is the block's mean |x|, the sign is x's, and per block
 * ||x - y||^2 = ||x||^2 - n scale^2 <= ||x||^2. */
static void test_codec_sign_roundtrip_exact(void **state)
{
    size_t c, bi, i;

    (void)state;
    for (c = 0; c < NCOUNTS; c++) {
        for (bi = 0; bi < NBLOCKS; bi++) {
            const size_t n = counts[c], blk = (size_t)blocks[bi];
            gs_codec_config_t cfg = codec_cfg(GS_CODEC_SIGN);
            float *x = codec_normal_vec(500 + c * 7 + bi, n, 2.0);
            float *y = malloc((n > 0 ? n : 1) * sizeof(float));
            codec_buf_t b;
            size_t lo;

            assert_non_null(y);
            cfg.block_size = blocks[bi];
            codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
            codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
            assert_int_equal(b.len,
                             GS_CODEC_HEADER_BYTES + ((n + blk - 1) / blk) * 4 + (n + 7) / 8);
            codec_decode_ok(&cfg, &b, n, GS_DTYPE_F32, y);
            for (lo = 0; lo < n; lo += blk) {
                const size_t len = (n - lo < blk) ? n - lo : blk;
                double sabs = 0, xx = 0, ee = 0, scale;

                for (i = lo; i < lo + len; i++) {
                    sabs += fabs((double)x[i]);
                }
                scale = sabs / (double)len;
                for (i = lo; i < lo + len; i++) {
                    assert_true(fabs(fabs((double)y[i]) - scale) <= 1e-5 * scale);
                    assert_true((x[i] < 0) == (y[i] < 0));
                    xx += (double)x[i] * x[i];
                    ee += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
                }
                assert_true(fabs(ee - (xx - (double)len * scale * scale)) <= 1e-4 * xx + 1e-12);
                assert_true(ee <= xx * (1 + 1e-5));
            }
            codec_buf_free(&b);
            free(x);
            free(y);
        }
    }
}

/* Non-finite inputs give well-formed payloads (and no UB under UBSan). */
static void test_codec_quant_nonfinite_inputs(void **state)
{
    static const gs_codec_kind_t kinds[] = {GS_CODEC_INT8, GS_CODEC_QSGD,     GS_CODEC_SIGN,
                                            GS_CODEC_INT4, GS_CODEC_FP8_E4M3, GS_CODEC_FP8_E5M2};
    float x[300], y[300];
    size_t k, i;

    (void)state;
    for (i = 0; i < 300; i++) {
        x[i] = (float)i - 150.0f;
    }
    x[3] = NAN;
    x[200] = INFINITY;
    x[260] = -INFINITY;
    for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        gs_codec_config_t cfg = codec_cfg(kinds[k]);
        codec_buf_t b;

        codec_buf_init(&b, &cfg, 300, GS_DTYPE_F32);
        codec_encode_ok(&cfg, x, 300, GS_DTYPE_F32, GS_EF_NULL, &b);
        codec_decode_ok(&cfg, &b, 300, GS_DTYPE_F32, y);
        codec_buf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_int8_roundtrip_bound),
        cmocka_unit_test(test_codec_qsgd_roundtrip_bound),
        cmocka_unit_test(test_codec_int8_zero_and_tiny_blocks),
        cmocka_unit_test(test_codec_int4_roundtrip_bound),
        cmocka_unit_test(test_codec_int4_exact_codes),
        cmocka_unit_test(test_codec_int4_ties_to_even),
        cmocka_unit_test(test_codec_int4_reference_bytes),
        cmocka_unit_test(test_codec_int4_nonfinite_like_int8),
        cmocka_unit_test(test_codec_qsgd_unbiased),
        cmocka_unit_test(test_codec_qsgd_deterministic),
        cmocka_unit_test(test_codec_qsgd_reference_bytes),
        cmocka_unit_test(test_codec_qsgd_nonfinite_blocks),
        cmocka_unit_test(test_codec_sign_roundtrip_exact),
        cmocka_unit_test(test_codec_quant_nonfinite_inputs),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
