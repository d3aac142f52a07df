/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fp8 codecs, E4M3 (OCP E4M3FN) and E5M2: one f32 scale per block of
 * params.block elements, step = max|x| / FP8_MAX (448 for E4M3, 57344 for
 * E5M2), and one byte per element, the fp8 code of x x (FP8_MAX / max|x|)
 * rounded to nearest even, so that the block's largest |x| lands on the
 * largest finite code. The conversions are codec_math.h's (exact bit
 * arithmetic, subnormals included, saturating: a finite input never
 * becomes inf or NaN).
 *
 * Body: nblocks f32 steps, then count fp8 codes (code i belongs to element
 * i). Decoded value = f32(code) x step. Every byte is a valid code: the NaN
 * codes decode to NaN and E5M2's inf codes to +-inf, times the step.
 * Error bound, per element with v = x / step in the format's units:
 * |x - y| <= max(2^-4 |x|, step 2^-10) for E4M3 and max(2^-3 |x|,
 * step 2^-17) for E5M2 (half an ulp of the normal range, relative; half the
 * subnormal spacing below it), plus f32 roundings of the scale. A block of
 * zeros has step 0.
 * Non-finite inputs: as int8 (codec_int8.c): a NaN in a block makes its
 * step NaN, an inf (and no NaN) makes it inf; the whole block then decodes
 * to non-finite values.
 */
#include "compress/codec.h"

static size_t fp8_body_size(const gs__codec_params_t *p)
{
    return gs__codec_nblocks(p->count, p->block) * sizeof(float) + p->count;
}

/* The two formats' loops, written out so that each vectorises with its
 * constants folded (the conversions are branch-free). */
GS_CODEC_CLONES
static void e4m3_quantize(const float *x, size_t n, float inv, uint8_t *q)
{
    size_t i;

    for (i = 0; i < n; i++) {
        q[i] = gs_km_e4m3_code(x[i], inv);
    }
}

GS_CODEC_CLONES
static void e5m2_quantize(const float *x, size_t n, float inv, uint8_t *q)
{
    size_t i;

    for (i = 0; i < n; i++) {
        q[i] = gs_km_e5m2_code(x[i], inv);
    }
}

GS_CODEC_CLONES
static void e4m3_dequant(const uint8_t *q, size_t n, float s, float *dst, gs__codec_mode_t mode)
{
    size_t i;

    if (mode == GS_CODEC_MODE_SET) {
        for (i = 0; i < n; i++) {
            dst[i] = gs_km_fp8_dequant(q[i], 0, s);
        }
    } else {
        for (i = 0; i < n; i++) {
            dst[i] = gs_km_addf(dst[i], gs_km_fp8_dequant(q[i], 0, s));
        }
    }
}

GS_CODEC_CLONES
static void e5m2_dequant(const uint8_t *q, size_t n, float s, float *dst, gs__codec_mode_t mode)
{
    size_t i;

    if (mode == GS_CODEC_MODE_SET) {
        for (i = 0; i < n; i++) {
            dst[i] = gs_km_fp8_dequant(q[i], 1, s);
        }
    } else {
        for (i = 0; i < n; i++) {
            dst[i] = gs_km_addf(dst[i], gs_km_fp8_dequant(q[i], 1, s));
        }
    }
}

static void fp8_dequant(int e5m2, const uint8_t *q, size_t n, float s, float *dst,
                        gs__codec_mode_t mode)
{
    if (e5m2) {
        e5m2_dequant(q, n, s, dst, mode);
    } else {
        e4m3_dequant(q, n, s, dst, mode);
    }
}

static void fp8_decode_blocks(int e5m2, const gs__codec_params_t *p, const uint8_t *body,
                              float *dst, gs__codec_mode_t mode, float alpha)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    const uint8_t *codes = body + nb * sizeof(float);
    size_t b;

    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;
        const float step = gs__codec_load_f32(body + b * sizeof(float));

        fp8_dequant(e5m2, codes + lo, n,
                    (mode == GS_CODEC_MODE_SET) ? step : gs_km_mulf(alpha, step), dst + lo, mode);
    }
}

/* Encode src block by block. With a residual res (error feedback, the
 * fused encode_ef), each block does res += src, encodes res, then res -=
 * decoded while the block is in L1: the steps and bits of the unfused
 * sequence (add, encode, decode_accumulate with alpha -1). */
static void fp8_encode_blocks(int e5m2, const gs__codec_params_t *p, const float *src, float *res,
                              uint8_t *body)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    uint8_t *codes = body + nb * sizeof(float);
    const float fmax = e5m2 ? GS_KM_E5M2_MAX : GS_KM_E4M3_MAX;
    const int simd = gs__codec_isa();
    size_t b;

    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;
        const float *x = (res != NULL) ? res + lo : src + lo;
        float m, inv, step;
        int have_m;

        if (res != NULL) {
            if (!simd) {
                gs__ef_add_f32(res + lo, src + lo, n);
            }
            have_m = simd && gs__codec_add_max_abs_simd(src + lo, res + lo, n, &m);
        } else {
            have_m = simd && gs__codec_max_abs_simd(x, n, &m);
        }
        if (!have_m) {
            m = gs__codec_max_abs(x, n);
        }
        step = gs_km_block_step(m, fmax, &inv);
        gs__codec_store_f32(body + b * sizeof(float), step);
        if (e5m2) {
            e5m2_quantize(x, n, inv, codes + lo);
        } else {
            e4m3_quantize(x, n, inv, codes + lo);
        }
        if (res != NULL) {
            fp8_dequant(e5m2, codes + lo, n, gs_km_mulf(gs__codec_minus_one, step), res + lo,
                        GS_CODEC_MODE_ADD);
        }
    }
}

static gs_status_t e4m3_encode(const gs__codec_params_t *p, const float *src, uint8_t *body)
{
    fp8_encode_blocks(0, p, src, NULL, body);
    return GS_OK;
}

static gs_status_t e4m3_encode_ef(const gs__codec_params_t *p, const float *src, float *res,
                                  uint8_t *body)
{
    fp8_encode_blocks(0, p, src, res, body);
    return GS_OK;
}

static gs_status_t e4m3_decode(const gs__codec_params_t *p, const uint8_t *body, float *dst,
                               gs__codec_mode_t mode, float alpha)
{
    fp8_decode_blocks(0, p, body, dst, mode, alpha);
    return GS_OK;
}

static gs_status_t e5m2_encode(const gs__codec_params_t *p, const float *src, uint8_t *body)
{
    fp8_encode_blocks(1, p, src, NULL, body);
    return GS_OK;
}

static gs_status_t e5m2_encode_ef(const gs__codec_params_t *p, const float *src, float *res,
                                  uint8_t *body)
{
    fp8_encode_blocks(1, p, src, res, body);
    return GS_OK;
}

static gs_status_t e5m2_decode(const gs__codec_params_t *p, const uint8_t *body, float *dst,
                               gs__codec_mode_t mode, float alpha)
{
    fp8_decode_blocks(1, p, body, dst, mode, alpha);
    return GS_OK;
}

const gs__codec_ops_t gs__codec_fp8_e4m3_ops = {
    .name = "fp8_e4m3",
    .wire_id = GS_CODEC_FP8_E4M3,
    .flags = GS_CODEC_F_LOSSY | GS_CODEC_F_BLOCKED,
    .encoded_size = fp8_body_size,
    .encode = e4m3_encode,
    .decode_accumulate = e4m3_decode,
    .encode_ef = e4m3_encode_ef,
};

const gs__codec_ops_t gs__codec_fp8_e5m2_ops = {
    .name = "fp8_e5m2",
    .wire_id = GS_CODEC_FP8_E5M2,
    .flags = GS_CODEC_F_LOSSY | GS_CODEC_F_BLOCKED,
    .encoded_size = fp8_body_size,
    .encode = e5m2_encode,
    .decode_accumulate = e5m2_decode,
    .encode_ef = e5m2_encode_ef,
};
