/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cast codecs: none (f32 as is), fp16 and bf16. fp16 and bf16 round to
 * nearest even with src/math/half_math.h's converters, which core/dtype.c
 * and the CUDA kernels use too (overflow to inf, exact subnormals, NaN
 * stays a quiet NaN with its payload; test_codec_cast checks every f16 code
 * and a dense sweep of f32 patterns). On x86-64 with AVX2 and F16C the fp16
 * encode and decode and the bf16 encode run codec_simd.c's kernels instead
 * (same bits). Bodies: 4 or 2 bytes per element,
 * little-endian, no scales. Error bound: fp16 |x - y| <= 2^-11 |x| for
 * 2^-14 <= |x| <= 65504 and <= 2^-25 below; bf16 |x - y| <= 2^-8 |x|.
 */
#include "compress/codec.h"

#include <string.h>

/* ---------------------------------------------------------------------- */
/* none                                                                   */
/* ---------------------------------------------------------------------- */

static size_t none_body_size(const gs__codec_params_t *p)
{
    return p->count * sizeof(float);
}

static gs_status_t none_encode(const gs__codec_params_t *p, const float *src, uint8_t *body)
{
    if (p->count > 0) {
        memcpy(body, src, p->count * sizeof(float));
    }
    return GS_OK;
}

GS_CODEC_CLONES
static gs_status_t none_decode(const gs__codec_params_t *p, const uint8_t *body, float *dst,
                               gs__codec_mode_t mode, float alpha)
{
    size_t i;

    if (mode == GS_CODEC_MODE_SET) {
        if (p->count > 0) {
            memcpy(dst, body, p->count * sizeof(float));
        }
        return GS_OK;
    }
    for (i = 0; i < p->count; i++) {
        dst[i] += alpha * gs__codec_load_f32(body + 4 * i);
    }
    return GS_OK;
}

const gs__codec_ops_t gs__codec_none_ops = {
    .name = "none",
    .wire_id = GS_CODEC_NONE,
    .flags = 0,
    .encoded_size = none_body_size,
    .encode = none_encode,
    .decode_accumulate = none_decode,
};

/* ---------------------------------------------------------------------- */
/* fp16 and bf16                                                          */
/* ---------------------------------------------------------------------- */

static size_t half_body_size(const gs__codec_params_t *p)
{
    return p->count * sizeof(uint16_t);
}

GS_CODEC_CLONES
static gs_status_t fp16_encode(const gs__codec_params_t *p, const float *src, uint8_t *body)
{
    size_t i;

    if (gs__codec_isa()) {
        gs__codec_f16_encode_simd(src, p->count, body);
        return GS_OK;
    }
    for (i = 0; i < p->count; i++) {
        gs_km_st_u16(body + 2 * i, gs_km_f32_to_f16(src[i]));
    }
    return GS_OK;
}

GS_CODEC_CLONES
static gs_status_t fp16_decode(const gs__codec_params_t *p, const uint8_t *body, float *dst,
                               gs__codec_mode_t mode, float alpha)
{
    size_t i;

    if (gs__codec_isa()) {
        gs__codec_f16_decode_simd(body, p->count, dst, mode == GS_CODEC_MODE_ADD, alpha);
        return GS_OK;
    }
    if (mode == GS_CODEC_MODE_SET) {
        for (i = 0; i < p->count; i++) {
            dst[i] = gs_km_f16_to_f32(gs_km_ld_u16(body + 2 * i));
        }
    } else {
        for (i = 0; i < p->count; i++) {
            dst[i] = gs_km_acc(dst[i], alpha, gs_km_f16_to_f32(gs_km_ld_u16(body + 2 * i)));
        }
    }
    return GS_OK;
}

GS_CODEC_CLONES
static gs_status_t bf16_encode(const gs__codec_params_t *p, const float *src, uint8_t *body)
{
    size_t i;

    if (gs__codec_isa()) {
        gs__codec_bf16_encode_simd(src, p->count, body);
        return GS_OK;
    }
    for (i = 0; i < p->count; i++) {
        gs_km_st_u16(body + 2 * i, gs_km_f32_to_bf16(src[i]));
    }
    return GS_OK;
}

GS_CODEC_CLONES
static gs_status_t bf16_decode(const gs__codec_params_t *p, const uint8_t *body, float *dst,
                               gs__codec_mode_t mode, float alpha)
{
    size_t i;

    if (mode == GS_CODEC_MODE_SET) {
        for (i = 0; i < p->count; i++) {
            dst[i] = gs_km_bf16_to_f32(gs_km_ld_u16(body + 2 * i));
        }
    } else {
        for (i = 0; i < p->count; i++) {
            dst[i] = gs_km_acc(dst[i], alpha, gs_km_bf16_to_f32(gs_km_ld_u16(body + 2 * i)));
        }
    }
    return GS_OK;
}

const gs__codec_ops_t gs__codec_fp16_ops = {
    .name = "fp16",
    .wire_id = GS_CODEC_FP16,
    .flags = GS_CODEC_F_LOSSY,
    .encoded_size = half_body_size,
    .encode = fp16_encode,
    .decode_accumulate = fp16_decode,
};

const gs__codec_ops_t gs__codec_bf16_ops = {
    .name = "bf16",
    .wire_id = GS_CODEC_BF16,
    .flags = GS_CODEC_F_LOSSY,
    .encoded_size = half_body_size,
    .encode = bf16_encode,
    .decode_accumulate = bf16_decode,
};
