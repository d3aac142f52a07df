/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the cast codecs (src/compress/codec_fp16.c): none, fp16
 * and bf16. The branch-free converters inside the codec must agree bit for
 * bit with core/dtype.c's scalar converters: every f16 and bf16 code is
 * decoded, and f32 -> f16/bf16 is checked on a dense sweep of f32 bit
 * patterns plus every rounding boundary (each halfway point between two
 * neighbouring f16 codes and the f32 values either side of it). Then the
 * round-trip error bounds on normal data, f16/bf16/f64 tensors, and
 * decode-accumulate.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "codec_test_util.h"
#include "core/dtype.h"

#define CHUNK (1u << 20)

static uint32_t bits_of(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

static float float_of(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Encode x[0..n) with @p kind and compare every u16 of the body with ref(). */
static void check_cast_encode(gs_codec_kind_t kind, const float *x, size_t n,
                              uint16_t (*ref)(float))
{
    gs_codec_config_t cfg = codec_cfg(kind);
    codec_buf_t b;
    size_t i;

    codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
    codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
    assert_int_equal(b.len, GS_CODEC_HEADER_BYTES + 2 * n);
    for (i = 0; i < n; i++) {
        uint16_t got;

        memcpy(&got, b.payload + GS_CODEC_HEADER_BYTES + 2 * i, sizeof(got));
        if (got != ref(x[i])) {
            fail_msg("%s(0x%08x) = 0x%04x, dtype.c says 0x%04x",
                     kind == GS_CODEC_FP16 ? "fp16" : "bf16", bits_of(x[i]), got, ref(x[i]));
        }
    }
    codec_buf_free(&b);
}

static void sweep_encode(gs_codec_kind_t kind, uint16_t (*ref)(float))
{
    float *x = malloc(CHUNK * sizeof(float));
    uint64_t u = 0;
    size_t n = 0;

    assert_non_null(x);
    /* Every 509th f32 pattern: all exponents, signs, NaNs, subnormals. */
    for (u = 0; u <= 0xffffffffull; u += 509) {
        x[n++] = float_of((uint32_t)u);
        if (n == CHUNK) {
            check_cast_encode(kind, x, n, ref);
            n = 0;
        }
    }
    if (n > 0) {
        check_cast_encode(kind, x, n, ref);
    }
    free(x);
}

static void test_codec_fp16_encode_matches_dtype(void **state)
{
    float *x = malloc(65536 * 4 * sizeof(float));
    size_t n = 0;
    uint32_t h;

    (void)state;
    assert_non_null(x);
    /* Each halfway point between f16 codes h and h + 1, and its neighbours. */
    for (h = 0; h < 0x7c00u; h++) {
        const double lo = (double)gs__f16_to_f32((uint16_t)h);
        const double hi = (h == 0x7bffu) ? 65536.0 : (double)gs__f16_to_f32((uint16_t)(h + 1));
        const float mid = (float)((lo + hi) / 2);

        x[n++] = mid;
        x[n++] = float_of(bits_of(mid) + 1);
        x[n++] = float_of(bits_of(mid) - 1);
        x[n++] = -mid;
    }
    check_cast_encode(GS_CODEC_FP16, x, n, gs__f32_to_f16);
    free(x);
    sweep_encode(GS_CODEC_FP16, gs__f32_to_f16);
}

static void test_codec_bf16_encode_matches_dtype(void **state)
{
    (void)state;
    sweep_encode(GS_CODEC_BF16, gs__f32_to_bf16);
}

/* Decode every 16-bit code and compare with ref() bit for bit. */
static void check_cast_decode_all(gs_codec_kind_t kind, float (*ref)(uint16_t))
{
    gs_codec_config_t cfg = codec_cfg(kind);
    const size_t n = 65536;
    float *x = calloc(n, sizeof(float)), *y = malloc(n * sizeof(float));
    codec_buf_t b;
    size_t i;

    assert_non_null(x);
    assert_non_null(y);
    codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
    codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
    for (i = 0; i < n; i++) {
        const uint16_t code = (uint16_t)i;

        memcpy(b.payload + GS_CODEC_HEADER_BYTES + 2 * i, &code, sizeof(code));
    }
    codec_decode_ok(&cfg, &b, n, GS_DTYPE_F32, y);
    for (i = 0; i < n; i++) {
        if (bits_of(y[i]) != bits_of(ref((uint16_t)i))) {
            fail_msg("code 0x%04zx decodes to 0x%08x, dtype.c says 0x%08x", i, bits_of(y[i]),
                     bits_of(ref((uint16_t)i)));
        }
    }
    codec_buf_free(&b);
    free(x);
    free(y);
}

static void test_codec_fp16_decode_every_code(void **state)
{
    (void)state;
    check_cast_decode_all(GS_CODEC_FP16, gs__f16_to_f32);
}

static void test_codec_bf16_decode_every_code(void **state)
{
    (void)state;
    check_cast_decode_all(GS_CODEC_BF16, gs__bf16_to_f32);
}

/* Round trip on normal data within the stated bounds, for sigma from tiny to large. */
static void test_codec_cast_roundtrip_bounds(void **state)
{
    static const double sigmas[] = {1e-6, 1e-3, 1.0, 100.0};
    const size_t n = 100003;
    size_t s, i;

    (void)state;
    for (s = 0; s < sizeof(sigmas) / sizeof(sigmas[0]); s++) {
        float *x = codec_normal_vec(11 + s, n, sigmas[s]);
        float *y = malloc(n * sizeof(float));
        gs_codec_kind_t kinds[] = {GS_CODEC_NONE, GS_CODEC_FP16, GS_CODEC_BF16};
        size_t k;

        assert_non_null(y);
        for (k = 0; k < 3; k++) {
            gs_codec_config_t cfg = codec_cfg(kinds[k]);
            codec_buf_t b;

            codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
            codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
            codec_decode_ok(&cfg, &b, n, GS_DTYPE_F32, y);
            for (i = 0; i < n; i++) {
                const double ax = fabs((double)x[i]), err = fabs((double)x[i] - (double)y[i]);
                double bound = 0;

                if (kinds[k] == GS_CODEC_FP16) {
                    bound = (ax >= ldexp(1.0, -14)) ? ldexp(ax, -11) : ldexp(1.0, -25);
                } else if (kinds[k] == GS_CODEC_BF16) {
                    bound = ldexp(ax, -8);
                }
                if (err > bound) {
                    fail_msg("codec %zu sigma %g: x %g -> %g, error %g > bound %g", k, sigmas[s],
                             (double)x[i], (double)y[i], err, bound);
                }
            }
            codec_buf_free(&b);
        }
        free(x);
        free(y);
    }
}

/* f16 through fp16 and bf16 through bf16 are lossless; f64 is cast to f32. */
static void test_codec_cast_half_tensors_lossless(void **state)
{
    const size_t n = 4099;
    float *x = codec_normal_vec(5, n, 3.0);
    uint16_t *h = malloc(n * 2), *out = malloc(n * 2);
    double *d = malloc(n * 8), *dout = malloc(n * 8);
    size_t i;

    (void)state;
    assert_non_null(h);
    assert_non_null(out);
    assert_non_null(d);
    assert_non_null(dout);
    for (int pass = 0; pass < 2; pass++) {
        const gs_dtype_t dt = (pass == 0) ? GS_DTYPE_F16 : GS_DTYPE_BF16;
        gs_codec_config_t cfg = codec_cfg((pass == 0) ? GS_CODEC_FP16 : GS_CODEC_BF16);
        codec_buf_t b;

        for (i = 0; i < n; i++) {
            h[i] = (pass == 0) ? gs__f32_to_f16(x[i]) : gs__f32_to_bf16(x[i]);
        }
        codec_buf_init(&b, &cfg, n, dt);
        assert_true(b.scratch_size >= n * sizeof(float));
        codec_encode_ok(&cfg, h, n, dt, GS_EF_NULL, &b);
        codec_decode_ok(&cfg, &b, n, dt, out);
        assert_memory_equal(h, out, n * 2);
        /* dst += decode: 2h for every element (exact in binary floating point). */
        assert_int_equal(gs_codec_decode_accumulate(&cfg, b.payload, b.len, n, dt, b.scratch,
                                                    b.scratch_size, out),
                         GS_OK);
        for (i = 0; i < n; i++) {
            const float v = (pass == 0) ? gs__f16_to_f32(h[i]) : gs__bf16_to_f32(h[i]);
            const float w = (pass == 0) ? gs__f16_to_f32(out[i]) : gs__bf16_to_f32(out[i]);

            assert_true(w == 2.0f * v);
        }
        codec_buf_free(&b);
    }
    {
        gs_codec_config_t cfg = codec_cfg(GS_CODEC_NONE);
        codec_buf_t b;

        for (i = 0; i < n; i++) {
            d[i] = (double)x[i] + 1e-12;
        }
        codec_buf_init(&b, &cfg, n, GS_DTYPE_F64);
        codec_encode_ok(&cfg, d, n, GS_DTYPE_F64, GS_EF_NULL, &b);
        codec_decode_ok(&cfg, &b, n, GS_DTYPE_F64, dout);
        for (i = 0; i < n; i++) {
            assert_true(dout[i] == (double)(float)d[i]);
        }
        codec_buf_free(&b);
    }
    free(x);
    free(h);
    free(out);
    free(d);
    free(dout);
}

static void test_codec_cast_decode_accumulate_f32(void **state)
{
    const size_t n = 1001;
    float *x = codec_normal_vec(9, n, 1.0), *y = malloc(n * sizeof(float));
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_FP16);
    codec_buf_t b;
    size_t i;

    (void)state;
    assert_non_null(y);
    codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
    assert_int_equal(b.scratch_size, 0);
    codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
    for (i = 0; i < n; i++) {
        y[i] = 1.0f;
    }
    assert_int_equal(
        gs_codec_decode_accumulate(&cfg, b.payload, b.len, n, GS_DTYPE_F32, NULL, 0, y), GS_OK);
    for (i = 0; i < n; i++) {
        assert_true(y[i] == 1.0f + gs__f16_to_f32(gs__f32_to_f16(x[i])));
    }
    codec_buf_free(&b);
    free(x);
    free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_fp16_encode_matches_dtype),
        cmocka_unit_test(test_codec_bf16_encode_matches_dtype),
        cmocka_unit_test(test_codec_fp16_decode_every_code),
        cmocka_unit_test(test_codec_bf16_decode_every_code),
        cmocka_unit_test(test_codec_cast_roundtrip_bounds),
        cmocka_unit_test(test_codec_cast_half_tensors_lossless),
        cmocka_unit_test(test_codec_cast_decode_accumulate_f32),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
