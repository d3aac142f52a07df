/* SPDX-License-Identifier: Apache-2.0 */
/*
 * int8 codec: one f32 scale per block of params.block elements (the block's
 * max |x| / 127) and one signed byte per element, round to nearest even.
 *
 * Body: nblocks f32 scales, then count int8 codes (code i belongs to
 * element i). Decoded value = code x scale.
 * Error bound: |x - y| <= scale / 2 = max|x of its block| / 254 per
 * element (plus one f32 rounding). A block of zeros has scale 0.
 * Non-finite inputs make their block's scale non-finite; codes are still
 * clamped to [-127, 127] without undefined behaviour.
 */
#include "compress/codec.h"

static size_t int8_body_size(const gs__codec_params_t *p)
{
    return gs__codec_nblocks(p->count, p->block) * sizeof(float) + p->count;
}

GS_CODEC_CLONES
float gs__codec_max_abs(const float *x, size_t n)
{
    float m = 0.0f;
    size_t i;

    for (i = 0; i < n; i++) {
        m = gs_km_max_abs_step(m, x[i]);
    }
    return m;
}

GS_CODEC_CLONES
static void quantize_block(const float *x, size_t n, float inv, int8_t *q)
{
    size_t i;

    for (i = 0; i < n; i++) {
        q[i] = gs_km_int8_code(x[i], inv);
    }
}

/* Store the scale of a block of max |x| = m and quantize its n elements. */
static float int8_block(const float *x, size_t n, float m, int simd, uint8_t *scale_out, int8_t *q)
{
    float inv;
    const float scale = gs_km_block_step(m, 127.0f, &inv);

    gs__codec_store_f32(scale_out, scale);
    if (simd) {
        gs__codec_int8_quantize_simd(x, n, inv, q);
    } else {
        quantize_block(x, n, inv, q);
    }
    return scale;
}

GS_CODEC_CLONES
static void dequant_block(const int8_t *q, size_t n, float scale, float *dst, gs__codec_mode_t mode)
{
    size_t i;

    if (mode == GS_CODEC_MODE_SET) {
        for (i = 0; i < n; i++) {
            dst[i] = gs_km_dequant(q[i], scale);
        }
    } else {
        for (i = 0; i < n; i++) {
            dst[i] = gs_km_addf(dst[i], gs_km_dequant(q[i], scale));
        }
    }
}

static gs_status_t int8_decode(const gs__codec_params_t *p, const uint8_t *body, float *dst,
                               gs__codec_mode_t mode, float alpha)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    const int8_t *codes = (const int8_t *)(body + nb * sizeof(float));
    size_t b;

    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;
        const float scale = gs__codec_load_f32(body + b * sizeof(float));

        dequant_block(codes + lo, n, (mode == GS_CODEC_MODE_SET) ? scale : gs_km_mulf(alpha, scale),
                      dst + lo, mode);
    }
    return GS_OK;
}

/* Encode src block by block. With a residual res (error feedback, the
 * fused encode_ef), each block first does res += src and encodes res, then
 * res -= decoded while the block is still in L1: one pass over src and the
 * residual instead of four, with the steps of the unfused sequence. */
static void int8_encode_blocks(const gs__codec_params_t *p, const float *src, float *res,
                               uint8_t *body)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    int8_t *codes = (int8_t *)(body + nb * sizeof(float));
    const int simd = gs__codec_isa();
    size_t b;

    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;
        const float *x = (res != NULL) ? res + lo : src + lo;
        float m;
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
        const float scale = int8_block(x, n, m, simd, body + b * sizeof(float), codes + lo);

        if (res != NULL) {
            /* decode_accumulate's ADD with alpha -1, written the same way. */
            dequant_block(codes + lo, n, gs_km_mulf(gs__codec_minus_one, scale), res + lo,
                          GS_CODEC_MODE_ADD);
        }
    }
}

static gs_status_t int8_encode(const gs__codec_params_t *p, const float *src, uint8_t *body)
{
    int8_encode_blocks(p, src, NULL, body);
    return GS_OK;
}

static gs_status_t int8_encode_ef(const gs__codec_params_t *p, const float *src, float *res,
                                  uint8_t *body)
{
    int8_encode_blocks(p, src, res, body);
    return GS_OK;
}

const gs__codec_ops_t gs__codec_int8_ops = {
    .name = "int8",
    .wire_id = GS_CODEC_INT8,
    .flags = GS_CODEC_F_LOSSY | GS_CODEC_F_BLOCKED,
    .encoded_size = int8_body_size,
    .encode = int8_encode,
    .decode_accumulate = int8_decode,
    .encode_ef = int8_encode_ef,
};
