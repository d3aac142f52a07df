/* SPDX-License-Identifier: Apache-2.0 */
/*
 * int4 codec: one f32 scale per block of params.block elements (the block's
 * max |x| / 7) and one 4-bit code per element, round to nearest even, codes
 * in [-7, 7] (the int8 codec with 7 levels; ZeRO++'s block-scaled int4).
 *
 * Body: nblocks f32 scales, then ceil(count / 2) code bytes: element g is
 * the two's complement nibble of byte g / 2, the low nibble for even g and
 * the high nibble for odd g, counted over the whole tensor (a block of odd
 * size shares a byte with the next block); a pad nibble of 0 when count is
 * odd. This is qsgd's 4-bit layout. Decoded value = code x scale. Every
 * byte is a valid pair of codes (a nibble of -8, which the encoder never
 * writes, decodes to -8 x scale).
 * Error bound: |x - y| <= scale / 2 = max|x of its block| / 14 per element
 * (plus one f32 rounding). A block of zeros has scale 0.
 * Non-finite inputs: as int8 (codec_int8.c): a NaN in a block makes its
 * scale NaN, an inf (and no NaN) makes it inf; the whole block then decodes
 * to non-finite values. Codes are clamped without undefined behaviour.
 */
#include "compress/codec.h"

static size_t int4_body_size(const gs__codec_params_t *p)
{
    return gs__codec_nblocks(p->count, p->block) * sizeof(float) + (p->count + 1) / 2;
}

/* Code bytes of the pairs of x[0 .. 2 npairs): codes[j] holds elements 2j, 2j + 1. */
GS_CODEC_CLONES
static void int4_quantize_pairs(const float *x, size_t npairs, float inv, uint8_t *codes)
{
    size_t j;

    for (j = 0; j < npairs; j++) {
        const unsigned lo = (unsigned)gs_km_int4_code(x[2 * j], inv) & 15u;
        const unsigned hi = (unsigned)gs_km_int4_code(x[2 * j + 1], inv) & 15u;

        codes[j] = (uint8_t)(lo | (hi << 4));
    }
}

/* The codes of the n elements x (global elements start .. start + n). A
 * block that starts on an odd element fills the high nibble of the byte
 * its predecessor started; one that ends on an even element leaves the
 * high nibble 0 for the next block (or the pad). */
static void int4_quantize(const float *x, size_t start, size_t n, float inv, uint8_t *codes)
{
    size_t j = 0;

    if ((n > 0) && ((start & 1) != 0)) {
        const unsigned c = (unsigned)gs_km_int4_code(x[0], inv) & 15u;

        codes[start >> 1] = (uint8_t)((codes[start >> 1] & 0x0fu) | (c << 4));
        j = 1;
    }
    int4_quantize_pairs(x + j, (n - j) / 2, inv, codes + ((start + j) >> 1));
    j += 2 * ((n - j) / 2);
    if (j < n) {
        codes[(start + j) >> 1] = (uint8_t)((unsigned)gs_km_int4_code(x[j], inv) & 15u);
    }
}

/* dst[0 .. 2 npairs) from the code bytes of its pairs (codes[j] holds
 * elements 2j and 2j + 1). */
GS_CODEC_CLONES
static void int4_dequant_pairs(const uint8_t *codes, size_t npairs, float s, float *dst,
                               gs__codec_mode_t mode)
{
    size_t j;

    if (mode == GS_CODEC_MODE_SET) {
        for (j = 0; j < npairs; j++) {
            dst[2 * j] = gs_km_dequant(gs_km_nibble_code(codes + j, 0), s);
            dst[2 * j + 1] = gs_km_dequant(gs_km_nibble_code(codes + j, 1), s);
        }
    } else {
        for (j = 0; j < npairs; j++) {
            dst[2 * j] = gs_km_addf(dst[2 * j], gs_km_dequant(gs_km_nibble_code(codes + j, 0), s));
            dst[2 * j + 1] =
                gs_km_addf(dst[2 * j + 1], gs_km_dequant(gs_km_nibble_code(codes + j, 1), s));
        }
    }
}

/* One element g from its nibble (the ends of a block that do not fill a byte). */
static void int4_dequant_one(const uint8_t *codes, size_t g, float s, float *dst,
                             gs__codec_mode_t mode)
{
    const float v = gs_km_dequant(gs_km_nibble_code(codes, g), s);

    *dst = (mode == GS_CODEC_MODE_SET) ? v : gs_km_addf(*dst, v);
}

/* dst[0 .. n) from the codes of global elements start .. start + n (s is
 * the scale, times alpha for ADD). */
static void int4_dequant(const uint8_t *codes, size_t start, size_t n, float s, float *dst,
                         gs__codec_mode_t mode)
{
    size_t j = 0;

    if ((n > 0) && ((start & 1) != 0)) {
        int4_dequant_one(codes, start, s, dst, mode);
        j = 1;
    }
    int4_dequant_pairs(codes + ((start + j) >> 1), (n - j) / 2, s, dst + j, mode);
    j += 2 * ((n - j) / 2);
    if (j < n) {
        int4_dequant_one(codes, start + j, s, dst + j, mode);
    }
}

static gs_status_t int4_decode(const gs__codec_params_t *p, const uint8_t *body, float *dst,
                               gs__codec_mode_t mode, float alpha)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    const uint8_t *codes = body + nb * sizeof(float);
    size_t b;

    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;
        const float scale = gs__codec_load_f32(body + b * sizeof(float));

        int4_dequant(codes, lo, n, (mode == GS_CODEC_MODE_SET) ? scale : gs_km_mulf(alpha, scale),
                     dst + lo, mode);
    }
    return GS_OK;
}

/* Encode src block by block. With a residual res (error feedback, the
 * fused encode_ef), each block does res += src, encodes res, then res -=
 * decoded while the block is in L1: the steps and bits of the unfused
 * sequence (add, encode, decode_accumulate with alpha -1). */
static void int4_encode_blocks(const gs__codec_params_t *p, const float *src, float *res,
                               uint8_t *body)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    uint8_t *codes = body + nb * sizeof(float);
    const int simd = gs__codec_isa();
    size_t b;

    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;
        const float *x = (res != NULL) ? res + lo : src + lo;
        float m, inv, scale;
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
        scale = gs_km_block_step(m, 7.0f, &inv);
        gs__codec_store_f32(body + b * sizeof(float), scale);
        int4_quantize(x, lo, n, inv, codes);
        if (res != NULL) {
            int4_dequant(codes, lo, n, gs_km_mulf(gs__codec_minus_one, scale), res + lo,
                         GS_CODEC_MODE_ADD);
        }
    }
}

static gs_status_t int4_encode(const gs__codec_params_t *p, const float *src, uint8_t *body)
{
    int4_encode_blocks(p, src, NULL, body);
    return GS_OK;
}

static gs_status_t int4_encode_ef(const gs__codec_params_t *p, const float *src, float *res,
                                  uint8_t *body)
{
    int4_encode_blocks(p, src, res, body);
    return GS_OK;
}

const gs__codec_ops_t gs__codec_int4_ops = {
    .name = "int4",
    .wire_id = GS_CODEC_INT4,
    .flags = GS_CODEC_F_LOSSY | GS_CODEC_F_BLOCKED,
    .encoded_size = int4_body_size,
    .encode = int4_encode,
    .decode_accumulate = int4_decode,
    .encode_ef = int4_encode_ef,
};
