/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for error feedback (src/compress/ef.c with codec_api.c). For
 * every lossy codec, over T steps of fresh normal gradients x_t:
 *   sum_t x_t = sum_t decode(payload_t) + residual_T   (up to f32 rounding)
 * and the residual stays bounded (||r_t|| <= C ||x_t||) while, for the
 * biased codecs, the same run without feedback drifts away from the sum of
 * the inputs. Also: reset, and the argument checks on the handle.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "codec_test_util.h"
#include "compress/codec.h" /* struct gs_ef, to read the residual */

#define N 2048
#define STEPS 400

typedef struct ef_case {
    gs_codec_kind_t kind;
    double ratio;
    double bound; /* C in ||r_t|| <= C ||x_t|| */
} ef_case_t;

static const ef_case_t cases[] = {
    {GS_CODEC_FP16, 0, 0.001},    {GS_CODEC_BF16, 0, 0.005}, {GS_CODEC_INT8, 0, 0.02},
    {GS_CODEC_QSGD, 0, 0.5},      {GS_CODEC_SIGN, 0, 2.0},   {GS_CODEC_TOPK, 0.1, 3.0},
    {GS_CODEC_RANDK, 0.1, 8.0},   {GS_CODEC_INT4, 0, 0.3},   {GS_CODEC_FP8_E4M3, 0, 0.06},
    {GS_CODEC_FP8_E5M2, 0, 0.12},
};

/* Run STEPS steps; return ||sum x - sum dec|| / ||x|| at the end, and the
 * largest ||r_t|| / ||x_t|| seen (with ef). */
static double run(const ef_case_t *c, int with_ef, double *rmax_out)
{
    gs_codec_config_t cfg = codec_cfg(c->kind);
    double sx[N] = {0}, sd[N] = {0}, drift, xnorm = 0, rmax = 0;
    float y[N];
    gs_ef_t ef = GS_EF_NULL;
    codec_buf_t b;
    size_t t, i;

    if (c->ratio > 0) {
        cfg.ratio = c->ratio;
    }
    if (with_ef) {
        assert_int_equal(gs_ef_create(N, GS_DTYPE_F32, &ef), GS_OK);
    }
    codec_buf_init(&b, &cfg, N, GS_DTYPE_F32);
    for (t = 0; t < STEPS; t++) {
        /* A gradient with a persistent mean (what EF must not lose). */
        float *x = codec_normal_vec(7000 + t, N, 1.0);

        for (i = 0; i < N; i++) {
            x[i] += 0.3f * (float)((int)(i % 7) - 3) / 3.0f;
        }
        xnorm = codec_norm2(x, N);
        cfg.seed = t; /* without ef, vary the draws by hand */
        codec_encode_ok(&cfg, x, N, GS_DTYPE_F32, ef, &b);
        codec_decode_ok(&cfg, &b, N, GS_DTYPE_F32, y);
        for (i = 0; i < N; i++) {
            sx[i] += x[i];
            sd[i] += y[i];
        }
        if (with_ef) {
            double rr = 0, id = 0, sxn = 0;

            for (i = 0; i < N; i++) {
                const double r = ef->residual[i];

                rr += r * r;
                id += (sx[i] - sd[i] - r) * (sx[i] - sd[i] - r);
                sxn += sx[i] * sx[i];
            }
            rmax = fmax(rmax, sqrt(rr) / xnorm);
            /* The bookkeeping identity, up to f32 rounding of the residual. */
            if (sqrt(id) > 1e-4 * sqrt(sxn) + 1e-3) {
                fail_msg("codec %d step %zu: sum x - sum dec - r = %g", (int)c->kind, t, sqrt(id));
            }
        }
        free(x);
    }
    drift = 0;
    for (i = 0; i < N; i++) {
        drift += (sx[i] - sd[i]) * (sx[i] - sd[i]);
    }
    codec_buf_free(&b);
    gs_ef_destroy(ef);
    *rmax_out = rmax;
    return sqrt(drift) / xnorm;
}

static void test_codec_ef_tracks_sum(void **state)
{
    size_t c;

    (void)state;
    for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        double rmax, rmax_no, with, without;

        with = run(&cases[c], 1, &rmax);
        without = run(&cases[c], 0, &rmax_no);
        print_message("codec %-5s  max ||r||/||x|| %.4f  drift with ef %.4f, without %.4f\n",
                      gs__codec_lookup(cases[c].kind)->name, rmax, with, without);
        if (rmax > cases[c].bound) {
            fail_msg("codec %d: residual grew to %g x ||x|| (bound %g)", (int)cases[c].kind, rmax,
                     cases[c].bound);
        }
        /* With ef the drift is the residual; for the biased codecs the run
         * without ef drifts much further. */
        assert_true(with <= cases[c].bound + 1e-3);
        if ((gs__codec_lookup(cases[c].kind)->flags & GS_CODEC_F_NEEDS_EF) != 0) {
            assert_true(without > 3 * with);
        }
    }
}

static void test_codec_ef_reset_and_args(void **state)
{
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_SIGN);
    float x[100], y[100];
    uint8_t first[256];
    size_t first_len, i;
    gs_ef_t ef;
    codec_buf_t b;

    (void)state;
    for (i = 0; i < 100; i++) {
        x[i] = (float)i - 49.5f;
    }
    assert_int_equal(gs_ef_create(100, GS_DTYPE_I32, &ef), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_ef_create(100, GS_DTYPE_F32, NULL), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_ef_reset(GS_EF_NULL), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_ef_destroy(GS_EF_NULL), GS_OK);
    assert_int_equal(gs_ef_create(100, GS_DTYPE_F32, &ef), GS_OK);
    codec_buf_init(&b, &cfg, 100, GS_DTYPE_F32);
    codec_encode_ok(&cfg, x, 100, GS_DTYPE_F32, ef, &b);
    assert_true(b.len <= sizeof(first));
    memcpy(first, b.payload, b.len);
    first_len = b.len;
    codec_encode_ok(&cfg, x, 100, GS_DTYPE_F32, ef, &b);
    assert_true(memcmp(first, b.payload, first_len) != 0); /* the residual changed the input */
    assert_int_equal(gs_ef_reset(ef), GS_OK);
    codec_encode_ok(&cfg, x, 100, GS_DTYPE_F32, ef, &b);
    assert_memory_equal(first, b.payload, first_len);
    /* An ef of another count or dtype is refused, and left alone. */
    assert_int_equal(
        gs_codec_encode(&cfg, x, 99, GS_DTYPE_F32, ef, NULL, 0, b.payload, b.cap, &b.len),
        GS_ERR_INVALID_ARG);
    assert_int_equal(gs_codec_encode(&cfg, x, 50, GS_DTYPE_F16, ef, b.scratch, b.scratch_size,
                                     b.payload, b.cap, &b.len),
                     GS_ERR_INVALID_ARG);
    (void)y;
    codec_buf_free(&b);
    gs_ef_destroy(ef);
}

/* Error feedback on a bf16 tensor: the residual is f32, the sum still tracks. */
static void test_codec_ef_half_tensor(void **state)
{
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_SIGN);
    uint16_t x[512], y[512];
    gs_ef_t ef;
    codec_buf_t b;
    size_t i;

    (void)state;
    for (i = 0; i < 512; i++) {
        x[i] = (uint16_t)(0x3f80u + (i % 50)); /* bf16 values in [1, 1.4) */
    }
    assert_int_equal(gs_ef_create(512, GS_DTYPE_BF16, &ef), GS_OK);
    codec_buf_init(&b, &cfg, 512, GS_DTYPE_BF16);
    codec_encode_ok(&cfg, x, 512, GS_DTYPE_BF16, ef, &b);
    codec_decode_ok(&cfg, &b, 512, GS_DTYPE_BF16, y);
    codec_buf_free(&b);
    gs_ef_destroy(ef);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_ef_tracks_sum),
        cmocka_unit_test(test_codec_ef_reset_and_args),
        cmocka_unit_test(test_codec_ef_half_tensor),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
