/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cast codecs: none (f32 as is), fp16 and bf16. fp16 and bf16 round to
 * nearest even and agree bit for bit with core/dtype.c's scalar converters
 * (overflow to inf, exact subnormals, NaN stays a quiet NaN with its
 * payload); they are re-written here branch-free so that the loops
 * vectorise (test_codec_cast checks the agreement on every f16 code and on
 * a dense sweep of f32 patterns). On x86-64 with AVX2 and F16C the fp16
 * encode and decode and the bf16 encode run codec_simd.c's kernels instead
 * (same bits). Bodies: 4 or 2 bytes per element,
 * little-endian, no scales. Error bound: fp16 |x - y| <= 2^-11 |x| for
 * 2^-14 <= |x| <= 65504 and <= 2^-25 below; bf16 |x - y| <= 2^-8 |x|.
 */
#include "compress/codec.h"

#include <string.h>

static inline uint32_t f32_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

/*
 * f32 -> f16, round to nearest even, as three candidates and a select
 * (F. Giesen's float_to_half_fast3_rtne). Subnormal results come from one
 * f32 addition against 0.5f, which rounds the value to units of 2^-24 in
 * the default rounding mode.
 */
static inline uint16_t f32_to_f16(float f)
{
    const uint32_t u = f32_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7fffffffu;
    const uint32_t special = (a > 0x7f800000u) ? (0x7e00u | ((a >> 13) & 0x3ffu)) : 0x7c00u;
    const uint32_t sub = f32_bits(bits_f32(a) + 0.5f) - 0x3f000000u;
    const uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
    const uint32_t r = (a >= 0x47800000u) ? special : ((a < 0x38800000u) ? sub : norm);

    return (uint16_t)(sign | r);
}

/* f16 -> f32, exact, as candidates and a select (a NaN gets the quiet bit). */
static inline float f16_to_f32(uint16_t h)
{
    const uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
    const uint32_t e = o & 0x0f800000u;
    const uint32_t normal = o + 0x38000000u;
    const uint32_t special = (o + 0x70000000u) | (((o & 0x7fffffu) != 0) ? 0x400000u : 0);
    const uint32_t sub = f32_bits(bits_f32(o + 0x38800000u) - bits_f32(0x38800000u));
    const uint32_t r = (e == 0x0f800000u) ? special : ((e == 0) ? sub : normal);

    return bits_f32(r | (((uint32_t)h & 0x8000u) << 16));
}

static inline uint16_t f32_to_bf16(float f)
{
    const uint32_t u = f32_bits(f);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;

    return (uint16_t)(((u & 0x7fffffffu) > 0x7f800000u) ? ((u >> 16) | 0x40u) : rounded);
}

/* ---------------------------------------------------------------------- */
/* none                                                                   */
/* ---------------------------------------------------------------------- */

static size_t none_body_size(const gs_codec_params_t *p)
{
    return p->count * sizeof(float);
}

static gs_status_t none_encode(const gs_codec_params_t *p, const float *src, uint8_t *body)
{
    if (p->count > 0) {
        memcpy(body, src, p->count * sizeof(float));
    }
    return GS_OK;
}

GS_CODEC_CLONES
static gs_status_t none_decode(const gs_codec_params_t *p, const uint8_t *body, float *dst,
                               gs_codec_mode_t mode, float alpha)
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

const gs_codec_ops_t gs__codec_none_ops = {
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

static size_t half_body_size(const gs_codec_params_t *p)
{
    return p->count * sizeof(uint16_t);
}

static inline void store_u16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, sizeof(v));
}

static inline uint16_t load_u16(const uint8_t *p)
{
    uint16_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

GS_CODEC_CLONES
static gs_status_t fp16_encode(const gs_codec_params_t *p, const float *src, uint8_t *body)
{
    size_t i;

    if (gs__codec_isa()) {
        gs__codec_f16_encode_simd(src, p->count, body);
        return GS_OK;
    }
    for (i = 0; i < p->count; i++) {
        store_u16(body + 2 * i, f32_to_f16(src[i]));
    }
    return GS_OK;
}

GS_CODEC_CLONES
static gs_status_t fp16_decode(const gs_codec_params_t *p, const uint8_t *body, float *dst,
                               gs_codec_mode_t mode, float alpha)
{
    size_t i;

    if (gs__codec_isa()) {
        gs__codec_f16_decode_simd(body, p->count, dst, mode == GS_CODEC_MODE_ADD, alpha);
        return GS_OK;
    }
    if (mode == GS_CODEC_MODE_SET) {
        for (i = 0; i < p->count; i++) {
            dst[i] = f16_to_f32(load_u16(body + 2 * i));
        }
    } else {
        for (i = 0; i < p->count; i++) {
            dst[i] += alpha * f16_to_f32(load_u16(body + 2 * i));
        }
    }
    return GS_OK;
}

GS_CODEC_CLONES
static gs_status_t bf16_encode(const gs_codec_params_t *p, const float *src, uint8_t *body)
{
    size_t i;

    if (gs__codec_isa()) {
        gs__codec_bf16_encode_simd(src, p->count, body);
        return GS_OK;
    }
    for (i = 0; i < p->count; i++) {
        store_u16(body + 2 * i, f32_to_bf16(src[i]));
    }
    return GS_OK;
}

GS_CODEC_CLONES
static gs_status_t bf16_decode(const gs_codec_params_t *p, const uint8_t *body, float *dst,
                               gs_codec_mode_t mode, float alpha)
{
    size_t i;

    if (mode == GS_CODEC_MODE_SET) {
        for (i = 0; i < p->count; i++) {
            dst[i] = bits_f32((uint32_t)load_u16(body + 2 * i) << 16);
        }
    } else {
        for (i = 0; i < p->count; i++) {
            dst[i] += alpha * bits_f32((uint32_t)load_u16(body + 2 * i) << 16);
        }
    }
    return GS_OK;
}

const gs_codec_ops_t gs__codec_fp16_ops = {
    .name = "fp16",
    .wire_id = GS_CODEC_FP16,
    .flags = GS_CODEC_F_LOSSY,
    .encoded_size = half_body_size,
    .encode = fp16_encode,
    .decode_accumulate = fp16_decode,
};

const gs_codec_ops_t gs__codec_bf16_ops = {
    .name = "bf16",
    .wire_id = GS_CODEC_BF16,
    .flags = GS_CODEC_F_LOSSY,
    .encoded_size = half_body_size,
    .encode = bf16_encode,
    .decode_accumulate = bf16_decode,
};
