/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the fp8 codecs (codec_fp8.c: E4M3 and E5M2 with a scale
 * per block) and their conversions (src/math/codec_math.h), against a
 * reference written here in double precision from the OCP FP8 formats:
 *   - every one of the 256 codes of each format decodes to the value the
 *     format defines (NaN and inf codes included), and every finite code
 *     converts back to itself;
 *   - f32 -> fp8 equals the nearest-value reference (ties to the even
 *     code, saturation to the largest finite, subnormals) on every
 *     midpoint between neighbouring codes and its f32 neighbours, and on a
 *     few million f32 bit patterns; explicit ties, saturation and NaN;
 *   - the codec: decode(encode(f32(code) x s)) gives back every finite
 *     code of a block whose max is the format's max, for several scales;
 *     payload sizes equal gs_codec_encoded_size and the documented layout
 *     over counts 0, 1, 2, 7, 255 .. 100003 and blocks 1 .. 2^20; the
 *     documented error bound; decode-accumulate adds the decoded value;
 *     non-finite blocks decode as int8's do; the AVX2 and plain paths
 *     give the same bytes.
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

/* One format: its shape, and the functions under test. */
typedef struct fmt {
    const char *name;
    gs_codec_kind_t kind;
    int mbits, bias, ieee; /* ieee: E5M2 (exponent all ones = inf/NaN) */
    double max;
    uint8_t (*enc)(float v);
    float (*dec)(uint8_t b);
} fmt_t;

static uint8_t enc_e4m3(float v)
{
    return gs_km_f32_to_e4m3(v);
}

static float dec_e4m3(uint8_t b)
{
    return gs_km_e4m3_to_f32(b);
}

static uint8_t enc_e5m2(float v)
{
    return gs_km_f32_to_e5m2(v);
}

static float dec_e5m2(uint8_t b)
{
    return gs_km_e5m2_to_f32(b);
}

static const fmt_t fmts[] = {
    {"e4m3", GS_CODEC_FP8_E4M3, 3, 7, 0, 448.0, enc_e4m3, dec_e4m3},
    {"e5m2", GS_CODEC_FP8_E5M2, 2, 15, 1, 57344.0, enc_e5m2, dec_e5m2},
};

#define NFMTS (sizeof(fmts) / sizeof(fmts[0]))

/* ---------------------------------------------------------------------- */
/* Reference                                                              */
/* ---------------------------------------------------------------------- */

/* 0: finite, 1: NaN, 2: inf (by the format's rules). */
static int ref_class(const fmt_t *f, unsigned b)
{
    const unsigned e = (b & 0x7fu) >> f->mbits, m = b & ((1u << f->mbits) - 1u);
    const unsigned top = (1u << (7 - f->mbits)) - 1u;

    if (e != top) {
        return 0;
    }
    if (f->ieee) {
        return (m == 0) ? 2 : 1;
    }
    return (m == (1u << f->mbits) - 1u) ? 1 : 0;
}

/* The value of a finite code, from the format's definition. */
static double ref_value(const fmt_t *f, unsigned b)
{
    const unsigned e = (b & 0x7fu) >> f->mbits, m = b & ((1u << f->mbits) - 1u);
    const double frac = (double)m / (double)(1u << f->mbits);
    const double v = (e == 0) ? ldexp(frac, 1 - f->bias) : ldexp(1.0 + frac, (int)e - f->bias);

    return (b & 0x80u) ? -v : v;
}

/* The positive finite magnitudes, ascending (codes 0 .. last finite). */
static size_t ref_table(const fmt_t *f, double *v)
{
    size_t n = 0;

    for (unsigned b = 0; b < 0x80u; b++) {
        if (ref_class(f, b) == 0) {
            v[n++] = ref_value(f, b);
        }
    }
    return n;
}

/* The code the format's round to nearest even with saturation gives x. */
static uint8_t ref_encode(const double *tab, size_t ntab, float x)
{
    const unsigned sign = signbit(x) ? 0x80u : 0u;
    const double a = fabs((double)x);
    size_t lo = 0, hi = ntab - 1;

    if (isnan(x)) {
        return GS_KM_FP8_NAN;
    }
    if (a >= tab[ntab - 1]) {
        return (uint8_t)(sign | (unsigned)(ntab - 1));
    }
    /* tab[lo] <= a < tab[hi] */
    while (hi - lo > 1) {
        const size_t mid = (lo + hi) / 2;

        if (tab[mid] <= a) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if (a - tab[lo] < tab[hi] - a) {
        return (uint8_t)(sign | (unsigned)lo);
    }
    if (a - tab[lo] > tab[hi] - a) {
        return (uint8_t)(sign | (unsigned)hi);
    }
    return (uint8_t)(sign | (unsigned)(((lo & 1u) == 0) ? lo : hi)); /* the even code */
}

static void check_encode(const fmt_t *f, const double *tab, size_t ntab, float x)
{
    const uint8_t got = f->enc(x), want = ref_encode(tab, ntab, x);

    if (got != want) {
        uint32_t u;

        memcpy(&u, &x, 4);
        fail_msg("%s of %a (0x%08x): 0x%02x, want 0x%02x", f->name, (double)x, u, got, want);
    }
}

static float next_up(float x)
{
    return nextafterf(x, INFINITY);
}

static float next_down(float x)
{
    return nextafterf(x, -INFINITY);
}

/* ---------------------------------------------------------------------- */
/* Conversions                                                            */
/* ---------------------------------------------------------------------- */

/* Every code decodes to its value; every finite code converts back. */
static void test_codec_fp8_every_code(void **state)
{
    (void)state;
    for (size_t fi = 0; fi < NFMTS; fi++) {
        const fmt_t *f = &fmts[fi];
        int nfinite = 0;

        for (unsigned b = 0; b < 256; b++) {
            const float v = f->dec((uint8_t)b);
            const int cls = ref_class(f, b);

            if (cls == 1) {
                assert_true(isnan(v));
                assert_int_equal(f->enc(v), GS_KM_FP8_NAN);
                continue;
            }
            if (cls == 2) {
                assert_true(isinf(v));
                assert_int_equal(signbit(v) != 0, (b & 0x80u) != 0);
                continue;
            }
            nfinite++;
            if ((double)v != ref_value(f, b) || ((signbit(v) != 0) != ((b & 0x80u) != 0))) {
                fail_msg("%s code 0x%02x decodes to %a, want %a", f->name, b, (double)v,
                         ref_value(f, b));
            }
            assert_int_equal(f->enc(v), b);
        }
        assert_int_equal(nfinite, f->ieee ? 248 : 254);
    }
    assert_true(gs_km_e4m3_to_f32(0x7e) == 448.0f);
    assert_true(gs_km_e5m2_to_f32(0x7b) == 57344.0f);
    assert_true(gs_km_e4m3_to_f32(0x01) == 0x1p-9f);
    assert_true(gs_km_e5m2_to_f32(0x01) == 0x1p-16f);
}

/* f32 -> fp8 against the reference: every midpoint between neighbouring
 * magnitudes (the ties), its f32 neighbours, the codes' values and theirs,
 * values up to far beyond the max and into the f32 subnormals, both signs;
 * then a sweep of f32 bit patterns. */
static void test_codec_fp8_encode_reference(void **state)
{
    double tab[128];

    (void)state;
    for (size_t fi = 0; fi < NFMTS; fi++) {
        const fmt_t *f = &fmts[fi];
        const size_t ntab = ref_table(f, tab);
        codec_rng_t r = {.s = 77 + fi};

        for (size_t i = 0; i + 1 < ntab; i++) {
            const float mid = (float)((tab[i] + tab[i + 1]) / 2); /* exact in f32 */
            const float v = (float)tab[i];

            assert_true((double)mid == (tab[i] + tab[i + 1]) / 2);
            for (int sgn = 0; sgn < 2; sgn++) {
                const float m = sgn ? -mid : mid, w = sgn ? -v : v;

                check_encode(f, tab, ntab, m);
                check_encode(f, tab, ntab, next_up(m));
                check_encode(f, tab, ntab, next_down(m));
                check_encode(f, tab, ntab, w);
                check_encode(f, tab, ntab, next_up(w));
                check_encode(f, tab, ntab, next_down(w));
            }
        }
        /* Above the max, and the f32 extremes. */
        for (float x = (float)f->max; x < 3e38f; x *= 1.0625f) {
            check_encode(f, tab, ntab, x);
            check_encode(f, tab, ntab, -x);
        }
        check_encode(f, tab, ntab, 0x1p-149f);
        check_encode(f, tab, ntab, -0x1p-149f);
        check_encode(f, tab, ntab, 0x1p-126f);
        check_encode(f, tab, ntab, 3.4028234e38f);
        check_encode(f, tab, ntab, 0.0f);
        check_encode(f, tab, ntab, -0.0f);
        /* Random bit patterns (NaNs included), and values near the
         * format's range, where every bit matters. */
        for (int i = 0; i < 2000000; i++) {
            const uint32_t u = (uint32_t)codec_rng_next(&r);
            float x;

            memcpy(&x, &u, 4);
            check_encode(f, tab, ntab, x);
            x = ldexpf((float)((u >> 8) & 0xffffu) / 65536.0f + 1.0f, (int)(u % 40u) - f->bias - 6);
            check_encode(f, tab, ntab, (u & 0x80u) ? -x : x);
        }
    }
}

/* Ties to even, saturation and the special inputs, spelled out. */
static void test_codec_fp8_ties_saturation_nan(void **state)
{
    (void)state;
    /* E4M3: 1 = 0x38, 1.125 = 0x39, 1.25 = 0x3a. */
    assert_int_equal(gs_km_f32_to_e4m3(1.0625f), 0x38);
    assert_int_equal(gs_km_f32_to_e4m3(1.1875f), 0x3a);
    assert_int_equal(gs_km_f32_to_e4m3(-1.0625f), 0xb8);
    assert_int_equal(gs_km_f32_to_e4m3(next_up(1.0625f)), 0x39);
    /* subnormal ties: 2^-10 (0 or 2^-9) to 0; 3 2^-10 to 2 2^-9 (0x02) */
    assert_int_equal(gs_km_f32_to_e4m3(0x1p-10f), 0x00);
    assert_int_equal(gs_km_f32_to_e4m3(0x3p-10f), 0x02);
    assert_int_equal(gs_km_f32_to_e4m3(0x5p-10f), 0x02);
    assert_int_equal(gs_km_f32_to_e4m3(-0x1p-10f), 0x80);
    /* the top subnormal's tie with the smallest normal (7.5 2^-9) */
    assert_int_equal(gs_km_f32_to_e4m3(0xfp-10f), 0x08);
    /* saturation: 448 is the max; 464 (halfway to 480, which is NaN) and
     * everything above, inf included, saturate */
    assert_int_equal(gs_km_f32_to_e4m3(448.0f), 0x7e);
    assert_int_equal(gs_km_f32_to_e4m3(464.0f), 0x7e);
    assert_int_equal(gs_km_f32_to_e4m3(1e30f), 0x7e);
    assert_int_equal(gs_km_f32_to_e4m3(INFINITY), 0x7e);
    assert_int_equal(gs_km_f32_to_e4m3(-INFINITY), 0xfe);
    assert_int_equal(gs_km_f32_to_e4m3(NAN), 0x7f);
    assert_int_equal(gs_km_f32_to_e4m3(-NAN), 0x7f);
    /* E5M2: 1 = 0x3c, 1.25 = 0x3d; halfway 1.125 to 0x3c, 1.375 to 0x3e */
    assert_int_equal(gs_km_f32_to_e5m2(1.125f), 0x3c);
    assert_int_equal(gs_km_f32_to_e5m2(1.375f), 0x3e);
    assert_int_equal(gs_km_f32_to_e5m2(0x1p-17f), 0x00);
    assert_int_equal(gs_km_f32_to_e5m2(0x3p-17f), 0x02);
    assert_int_equal(gs_km_f32_to_e5m2(57344.0f), 0x7b);
    assert_int_equal(gs_km_f32_to_e5m2(61440.0f), 0x7b); /* halfway to inf's slot */
    assert_int_equal(gs_km_f32_to_e5m2(1e30f), 0x7b);
    assert_int_equal(gs_km_f32_to_e5m2(INFINITY), 0x7b);
    assert_int_equal(gs_km_f32_to_e5m2(-INFINITY), 0xfb);
    assert_int_equal(gs_km_f32_to_e5m2(NAN), 0x7f);
    assert_true(isinf(gs_km_e5m2_to_f32(0x7c)) && (gs_km_e5m2_to_f32(0xfc) < 0));
    assert_true(isnan(gs_km_e5m2_to_f32(0x7d)) && isnan(gs_km_e4m3_to_f32(0xff)));
}

/* ---------------------------------------------------------------------- */
/* The codec                                                              */
/* ---------------------------------------------------------------------- */

/* A block holding f32(code) x s for every finite code (the max code sets
 * the scale to s): every code comes back, and decodes to code x s. */
static void test_codec_fp8_codes_roundtrip(void **state)
{
    static const float scales[] = {1.0f, 0.125f, 0x1p-40f, 0x1p40f, 0.37f, 3.0f, 1e-3f};

    (void)state;
    for (size_t fi = 0; fi < NFMTS; fi++) {
        const fmt_t *f = &fmts[fi];
        float x[256], y[256];
        uint8_t code[256];
        size_t n = 0;

        for (unsigned b = 0; b < 256; b++) {
            if (ref_class(f, b) == 0) {
                code[n++] = (uint8_t)b;
            }
        }
        for (size_t si = 0; si < sizeof(scales) / sizeof(scales[0]); si++) {
            for (int scalar = 0; scalar < 2; scalar++) {
                gs_codec_config_t cfg = codec_cfg(f->kind);
                codec_buf_t b;
                const uint8_t *body;
                float step;

                for (size_t i = 0; i < n; i++) {
                    x[i] = f->dec(code[i]) * scales[si];
                }
                gs__codec_force_scalar = scalar;
                codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
                codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
                gs__codec_force_scalar = 0;
                assert_int_equal(b.len, GS_CODEC_HEADER_BYTES + 4 + n);
                body = b.payload + GS_CODEC_HEADER_BYTES;
                step = gs__codec_load_f32(body);
                for (size_t i = 0; i < n; i++) {
                    if (body[4 + i] != code[i]) {
                        fail_msg("%s scale %g: code 0x%02x came back as 0x%02x", f->name,
                                 (double)scales[si], code[i], body[4 + i]);
                    }
                }
                codec_decode_ok(&cfg, &b, n, GS_DTYPE_F32, y);
                for (size_t i = 0; i < n; i++) {
                    assert_true(y[i] == f->dec(code[i]) * step);
                }
                if (scales[si] == 1.0f || scales[si] == 0.125f) {
                    assert_true(step == scales[si]); /* power of two: exact */
                }
                codec_buf_free(&b);
            }
        }
    }
}

static double block_max(const float *x, size_t lo, size_t n)
{
    double m = 0;

    for (size_t i = lo; i < lo + n; i++) {
        m = fmax(m, fabs((double)x[i]));
    }
    return m;
}

/* Sizes and the error bound over all counts x blocks (docs/compression.md):
 * |x - y| <= max(2^-(M+1) |x|, step 2^-(bias+M)) with step = max / FP8_MAX;
 * decode-accumulate gives dst + decoded, bit for bit. */
static void test_codec_fp8_roundtrip_bound(void **state)
{
    (void)state;
    for (size_t fi = 0; fi < NFMTS; fi++) {
        const fmt_t *f = &fmts[fi];

        for (size_t c = 0; c < NCOUNTS; c++) {
            for (size_t bi = 0; bi < NBLOCKS; bi++) {
                const size_t n = counts[c], blk = (size_t)blocks[bi];
                const size_t nb = (n + blk - 1) / blk;
                gs_codec_config_t cfg = codec_cfg(f->kind);
                /* a wide range of magnitudes: the subnormal codes are used */
                float *x = codec_normal_vec(300 + c * 7 + bi, n, 0.01);
                float *y = malloc((n > 0 ? n : 1) * sizeof(float));
                float *acc = malloc((n > 0 ? n : 1) * sizeof(float));
                size_t cap;
                codec_buf_t b;

                assert_non_null(y);
                assert_non_null(acc);
                for (size_t i = 0; i < n; i += 5) {
                    x[i] *= ldexpf(1.0f, -(int)(i % 23u));
                }
                cfg.block_size = blocks[bi];
                codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
                codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
                assert_int_equal(gs_codec_encoded_size(&cfg, n, GS_DTYPE_F32, &cap), GS_OK);
                assert_int_equal(b.len, cap);
                assert_int_equal(b.len, GS_CODEC_HEADER_BYTES + nb * 4 + n);
                codec_decode_ok(&cfg, &b, n, GS_DTYPE_F32, y);
                double m = 0;

                for (size_t i = 0; i < n; i++) {
                    const size_t lo = (i / blk) * blk;
                    double bound;

                    if (i == lo) {
                        m = block_max(x, lo, (n - lo < blk) ? n - lo : blk);
                    }
                    bound = fmax(ldexp(fabs((double)x[i]), -(f->mbits + 1)),
                                 ldexp(m / f->max, -(f->bias + f->mbits))) *
                                (1 + 1e-5) +
                            1e-37;
                    if (fabs((double)x[i] - (double)y[i]) > bound) {
                        fail_msg("%s n %zu block %zu: x[%zu] %g -> %g, bound %g", f->name, n, blk,
                                 i, (double)x[i], (double)y[i], bound);
                    }
                }
                for (size_t i = 0; i < n; i++) {
                    acc[i] = (float)i * 0.5f;
                }
                assert_int_equal(gs_codec_decode_accumulate(&cfg, b.payload, b.len, n, GS_DTYPE_F32,
                                                            b.scratch, b.scratch_size, acc),
                                 GS_OK);
                for (size_t i = 0; i < n; i++) {
                    const float want = (float)i * 0.5f + y[i];

                    assert_memory_equal(&acc[i], &want, sizeof(float));
                }
                codec_buf_free(&b);
                free(x);
                free(y);
                free(acc);
            }
        }
    }
}

/* The block's largest |x| lands on the largest finite code (no
 * saturation needed, never NaN); the plain and AVX2 paths agree. */
static void test_codec_fp8_block_max_and_paths(void **state)
{
    const size_t n = 10007;
    float *x = codec_normal_vec(9, n, 3.0);

    (void)state;
    for (size_t fi = 0; fi < NFMTS; fi++) {
        const fmt_t *f = &fmts[fi];
        const uint8_t maxcode = f->ieee ? 0x7b : 0x7e;

        for (int blk = 1; blk <= 300; blk += 37) {
            gs_codec_config_t cfg = codec_cfg(f->kind);
            codec_buf_t b[2];

            cfg.block_size = blk;
            for (int scalar = 0; scalar < 2; scalar++) {
                gs__codec_force_scalar = scalar;
                codec_buf_init(&b[scalar], &cfg, n, GS_DTYPE_F32);
                codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b[scalar]);
            }
            gs__codec_force_scalar = 0;
            assert_int_equal(b[0].len, b[1].len);
            assert_memory_equal(b[0].payload, b[1].payload, b[0].len);
            for (size_t lo = 0; lo < n; lo += (size_t)blk) {
                const size_t len = (n - lo < (size_t)blk) ? n - lo : (size_t)blk;
                const size_t nb = (n + (size_t)blk - 1) / (size_t)blk;
                const uint8_t *codes = b[0].payload + GS_CODEC_HEADER_BYTES + 4 * nb;
                int top = 0;

                for (size_t i = lo; i < lo + len; i++) {
                    assert_true((codes[i] & 0x7fu) <= maxcode);
                    top |= ((codes[i] & 0x7fu) == maxcode);
                }
                assert_true(top);
            }
            codec_buf_free(&b[0]);
            codec_buf_free(&b[1]);
        }
    }
    free(x);
}

/* Non-finite blocks decode as int8's do (codec_int8.c): the same elements
 * come back NaN or inf; other blocks within the bound. */
static void test_codec_fp8_nonfinite_like_int8(void **state)
{
    enum { N = 300, BLK = 50 };
    float x[N], y[N], y8[N];
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
    for (size_t fi = 0; fi < NFMTS; fi++) {
        for (int scalar = 0; scalar < 2; scalar++) {
            gs_codec_config_t cf = codec_cfg(fmts[fi].kind), c8 = codec_cfg(GS_CODEC_INT8);
            codec_buf_t bf, b8;

            cf.block_size = BLK;
            c8.block_size = BLK;
            gs__codec_force_scalar = scalar;
            codec_buf_init(&bf, &cf, N, GS_DTYPE_F32);
            codec_buf_init(&b8, &c8, N, GS_DTYPE_F32);
            codec_encode_ok(&cf, x, N, GS_DTYPE_F32, GS_EF_NULL, &bf);
            codec_encode_ok(&c8, x, N, GS_DTYPE_F32, GS_EF_NULL, &b8);
            codec_decode_ok(&cf, &bf, N, GS_DTYPE_F32, y);
            codec_decode_ok(&c8, &b8, N, GS_DTYPE_F32, y8);
            gs__codec_force_scalar = 0;
            for (i = 0; i < N; i++) {
                const size_t blk = i / BLK;

                assert_int_equal(isfinite(y[i]) != 0, isfinite(y8[i]) != 0);
                if ((blk == 0) || (blk == 2) || (blk == 4)) {
                    assert_false(isfinite(y[i]));
                } else {
                    const double bound = fabs((double)x[i]) / ((fi == 0) ? 16.0 : 8.0) +
                                         block_max(x, blk * BLK, BLK) * 1e-5;

                    assert_true(fabs((double)x[i] - (double)y[i]) <= bound);
                }
            }
            codec_buf_free(&bf);
            codec_buf_free(&b8);
        }
    }
}

/* Hostile bodies: every byte is a valid code, so any body of the right
 * size decodes (NaN and inf codes to non-finite values); a body of another
 * size is refused with dst untouched. */
static void test_codec_fp8_hostile_bodies(void **state)
{
    enum { N = 100 };
    float x[N], y[N + 1];

    (void)state;
    for (size_t i = 0; i < N; i++) {
        x[i] = (float)i - 50.0f;
    }
    for (size_t fi = 0; fi < NFMTS; fi++) {
        gs_codec_config_t cfg = codec_cfg(fmts[fi].kind);
        codec_rng_t r = {.s = 5 + fi};
        codec_buf_t b;

        codec_buf_init(&b, &cfg, N, GS_DTYPE_F32);
        codec_encode_ok(&cfg, x, N, GS_DTYPE_F32, GS_EF_NULL, &b);
        for (int t = 0; t < 50; t++) {
            for (size_t i = GS_CODEC_HEADER_BYTES + 4; i < b.len; i++) {
                b.payload[i] = (uint8_t)codec_rng_next(&r);
            }
            codec_decode_ok(&cfg, &b, N, GS_DTYPE_F32, y);
        }
        memset(y, 0x5a, sizeof(y));
        assert_int_equal(gs_codec_decode(&cfg, b.payload, b.len - 1, N, GS_DTYPE_F32, b.scratch,
                                         b.scratch_size, y),
                         GS_ERR_PROTOCOL);
        for (size_t i = 0; i < N; i++) {
            uint32_t u;

            memcpy(&u, &y[i], 4);
            assert_int_equal(u, 0x5a5a5a5au);
        }
        codec_buf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_fp8_every_code),
        cmocka_unit_test(test_codec_fp8_encode_reference),
        cmocka_unit_test(test_codec_fp8_ties_saturation_nan),
        cmocka_unit_test(test_codec_fp8_codes_roundtrip),
        cmocka_unit_test(test_codec_fp8_roundtrip_bound),
        cmocka_unit_test(test_codec_fp8_block_max_and_paths),
        cmocka_unit_test(test_codec_fp8_nonfinite_like_int8),
        cmocka_unit_test(test_codec_fp8_hostile_bodies),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
