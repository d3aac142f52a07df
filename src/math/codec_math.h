/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-element and per-block arithmetic of the codecs (fp16, bf16, int8,
 * int4, fp8 e4m3/e5m2, qsgd, sign, topk, randk), one definition compiled by
 * the C compiler (the CPU codecs in src/compress/codec_*.c call these
 * functions) and by nvcc (kernels/codec_body.h, the GPU kernels), so that
 * a payload encoded on one side decodes to the same bits on the other. No loops over tensors and no
 * memory layout beyond one element or one block's scale: the loops are the
 * codecs' (CPU) and the kernel bodies' (GPU). codec_simd.c's AVX2 kernels
 * compute the same functions 8 lanes at a time (test_codec_simd.c checks).
 * int4 and fp8 have no hand kernels: their conversions are written
 * branch-free (integer selects) so that the compiler vectorises the plain
 * loops.
 *
 * Bits, CPU against GPU:
 * - Everything is IEEE f32 in the default rounding mode, with no FMA
 *   contraction (-ffp-contract=off in C, --fmad=false for nvcc) and IEEE
 *   division (nvcc's default -prec-div=true; never --use_fast_math).
 * - |x| and -x are sign-bit operations on the bits (PTX abs/neg may
 *   return another NaN; x86 andps/xorps do not touch the payload).
 * - NVIDIA GPUs return a canonical NaN from arithmetic; gs_km_addf/mulf/
 *   divf rewrite a NaN result as x86 makes it (reduce_math.h's
 *   gs_km_nan_f32), and are plain operators in C. Where both operands are
 *   NaN, which payload the CPU keeps depends on the operand order the C
 *   compiler picked, so NaN results can differ in payload only.
 * - Codes (int8, int4, fp8, qsgd, sign bits) and top-k keys are exact
 *   functions of their inputs, NaN included (an fp8 code of a NaN is the
 *   one canonical NaN code, whatever the NaN's sign and payload).
 */
#ifndef GS_MATH_CODEC_MATH_H
#define GS_MATH_CODEC_MATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "math/gs_device.h"
#include "math/half_math.h"
#include "math/reduce_math.h"

/* FLT_MAX, spelled out (<float.h> is not in every device compile). */
#define GS_KM_FLT_MAX 3.40282346638528859812e+38f

/* ---------------------------------------------------------------------- */
/* f32 operations with the CPU's NaN bits                                 */
/* ---------------------------------------------------------------------- */

GS_KFN float gs_km_absf(float x)
{
    return gs_km_f32_from_bits(gs_km_f32_bits(x) & 0x7fffffffu);
}

GS_KFN float gs_km_negf(float x)
{
    return gs_km_f32_from_bits(gs_km_f32_bits(x) ^ 0x80000000u);
}

GS_KFN float gs_km_addf(float x, float y)
{
    return gs_km_nan_f32(x + y, x, y);
}

GS_KFN float gs_km_mulf(float x, float y)
{
    return gs_km_nan_f32(x * y, x, y);
}

GS_KFN float gs_km_divf(float x, float y)
{
    return gs_km_nan_f32(x / y, x, y);
}

/* d + alpha v: the decode-accumulate of one element (fp16, bf16, topk,
 * randk; alpha -1 is the error-feedback update of the residual). */
GS_KFN float gs_km_acc(float d, float alpha, float v)
{
    return gs_km_addf(d, gs_km_mulf(alpha, v));
}

/* ---------------------------------------------------------------------- */
/* Unaligned little-endian loads and stores of body fields                */
/* ---------------------------------------------------------------------- */

GS_KFN float gs_km_ld_f32(const uint8_t *p)
{
    float f;

#if defined(__CUDA_ARCH__)
    if (((uintptr_t)p & 3u) == 0) {
        return *(const float *)(const void *)p;
    }
#endif
    memcpy(&f, p, sizeof(f));
    return f;
}

GS_KFN void gs_km_st_f32(uint8_t *p, float f)
{
#if defined(__CUDA_ARCH__)
    if (((uintptr_t)p & 3u) == 0) {
        *(float *)(void *)p = f;
        return;
    }
#endif
    memcpy(p, &f, sizeof(f));
}

GS_KFN uint32_t gs_km_ld_u32(const uint8_t *p)
{
    uint32_t v;

#if defined(__CUDA_ARCH__)
    if (((uintptr_t)p & 3u) == 0) {
        return *(const uint32_t *)(const void *)p;
    }
#endif
    memcpy(&v, p, sizeof(v));
    return v;
}

GS_KFN void gs_km_st_u32(uint8_t *p, uint32_t v)
{
#if defined(__CUDA_ARCH__)
    if (((uintptr_t)p & 3u) == 0) {
        *(uint32_t *)(void *)p = v;
        return;
    }
#endif
    memcpy(p, &v, sizeof(v));
}

GS_KFN uint16_t gs_km_ld_u16(const uint8_t *p)
{
    uint16_t v;

#if defined(__CUDA_ARCH__)
    if (((uintptr_t)p & 1u) == 0) {
        return *(const uint16_t *)(const void *)p;
    }
#endif
    memcpy(&v, p, sizeof(v));
    return v;
}

GS_KFN void gs_km_st_u16(uint8_t *p, uint16_t v)
{
#if defined(__CUDA_ARCH__)
    if (((uintptr_t)p & 1u) == 0) {
        *(uint16_t *)(void *)p = v;
        return;
    }
#endif
    memcpy(p, &v, sizeof(v));
}

/* ---------------------------------------------------------------------- */
/* Counter-based draws (qsgd noise, random-k strata)                      */
/* ---------------------------------------------------------------------- */

/* lowbias32 (C. Wellons): a 32-bit mixer good enough for rounding noise
 * and index draws, written in 32-bit arithmetic so loops vectorise. */
GS_KFN uint32_t gs__codec_hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* The 32-bit stream key of a 64-bit seed (splitmix64 finaliser). */
GS_KFN uint32_t gs__codec_seed32(uint64_t seed)
{
    seed += 0x9e3779b97f4a7c15ull;
    seed = (seed ^ (seed >> 30)) * 0xbf58476d1ce4e5b9ull;
    seed = (seed ^ (seed >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(seed ^ (seed >> 31));
}

/* Number of blocks of @p block elements covering @p count elements. */
GS_KFN size_t gs_km_nblocks(size_t count, uint32_t block)
{
    return (count == 0) ? 0 : (count - 1) / block + 1;
}

/* ---------------------------------------------------------------------- */
/* int8 and qsgd: the block scale                                         */
/* ---------------------------------------------------------------------- */

/*
 * One step of max |x| over a block, in index order: a NaN anywhere makes
 * the result NaN, the last NaN's bits (sign cleared). The GPU reduces in
 * another order and gets the same value: max over the other elements is
 * exact, and it picks the NaN of the highest index explicitly.
 */
GS_KFN float gs_km_max_abs_step(float m, float x)
{
    const float a = gs_km_absf(x);

    m = (a > m) ? a : m;
    return (a != a) ? a : m;
}

/*
 * The step (decoded value of code 1) of a block whose max |x| is m, for
 * @p levels codes above zero (127 for int8, s for qsgd), and in *inv_out
 * the factor that maps x onto code units. A block of zeros, or one so tiny
 * that levels / m overflows, gets step 0 and inv 0 (all codes 0); a NaN or
 * inf m is stored as the step, so the block decodes to non-finite values.
 */
GS_KFN float gs_km_block_step(float m, float levels, float *inv_out)
{
    const float inv = ((m > 0.0f) && (levels / m <= GS_KM_FLT_MAX)) ? levels / m : 0.0f;

    *inv_out = inv;
    return (inv > 0.0f) ? m / levels : (((m != m) || (m > GS_KM_FLT_MAX)) ? m : 0.0f);
}

/* int8 code of x: round_even(x inv) clamped to [-127, 127]; NaN -> -127.
 * The magic-number rounding is exact for |x inv| < 2^22 and vectorises. */
GS_KFN int8_t gs_km_int8_code(float x, float inv)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    float v = (x * inv + magic) - magic;

    v = (v >= -127.0f) ? v : -127.0f;
    v = (v <= 127.0f) ? v : 127.0f;
    return (int8_t)v;
}

/* qsgd rounding noise of global element @p index (mod 2^32): uniform in
 * [0, 1) on a 2^-24 grid, exact in f32. */
GS_KFN float gs_km_qsgd_noise(uint32_t index, uint32_t key)
{
    const uint32_t h = gs__codec_hash32(index + key);

    return (float)(h >> 8) * (1.0f / 16777216.0f);
}

/* qsgd code of x: sign(x) floor(|x| inv + u), at most levels; a NaN (or a
 * rounding overshoot) lands on the top level; -0 and NaN count as >= 0. */
GS_KFN int8_t gs_km_qsgd_code(float x, float u, float inv, float levels)
{
    float t = gs_km_absf(x) * inv + u;
    int32_t l;

    t = (t <= levels) ? t : levels;
    l = (int32_t)t;
    return (int8_t)((x < 0.0f) ? -l : l);
}

/* The code of element g from 4-bit two's complement nibbles (element 2j in
 * the low nibble of byte j). */
GS_KFN int32_t gs_km_nibble_code(const uint8_t *codes, size_t g)
{
    const unsigned nibble = ((unsigned)codes[g >> 1] >> ((g & 1) * 4)) & 15u;

    return (int32_t)(nibble ^ 8u) - 8;
}

/* A decoded int8/qsgd element: code x s, where s is the block's step (set)
 * or alpha x step (add, then added to the old value). */
GS_KFN float gs_km_dequant(int32_t code, float s)
{
    return gs_km_mulf((float)code, s);
}

/* ---------------------------------------------------------------------- */
/* int4                                                                   */
/* ---------------------------------------------------------------------- */

/* int4 code of x: round_even(x inv) clamped to [-7, 7]; NaN -> -7 (the
 * int8 code's rules with 7 levels; inv from gs_km_block_step(m, 7)). The
 * code travels as a two's complement nibble (gs_km_nibble_code reads it). */
GS_KFN int8_t gs_km_int4_code(float x, float inv)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    float v = (x * inv + magic) - magic;

    v = (v >= -7.0f) ? v : -7.0f;
    v = (v <= 7.0f) ? v : 7.0f;
    return (int8_t)v;
}

/* ---------------------------------------------------------------------- */
/* fp8 (OCP FP8: E4M3FN and E5M2)                                         */
/* ---------------------------------------------------------------------- */

/*
 * E4M3FN: sign, 4 exponent bits (bias 7), 3 mantissa bits; no inf, NaN is
 * S.1111.111, largest finite 448 (S.1111.110), smallest subnormal 2^-9.
 * E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like (inf
 * S.11111.00, NaN S.11111.xx), largest finite 57344 (S.11110.11),
 * smallest subnormal 2^-16.
 *
 * f32 -> fp8 rounds to nearest even, subnormals exactly, and saturates:
 * every finite value (and inf) beyond the largest finite code becomes
 * +-largest finite, never inf or NaN. A NaN becomes the canonical NaN code
 * (0x7f for both formats), whatever its sign and payload. -0 is 0x80.
 * fp8 -> f32 is exact; a NaN code gives the canonical quiet NaN with the
 * code's sign, E5M2's inf codes +-inf.
 */
#define GS_KM_E4M3_MAX 448.0f
#define GS_KM_E5M2_MAX 57344.0f
#define GS_KM_FP8_NAN 0x7fu

/*
 * The fp8 code of |v| (bits a = bits(v) & 0x7fffffff, not NaN) for a format
 * of @p mbits mantissa bits and exponent bias @p bias, saturated to
 * @p maxcode; the caller adds the sign and handles NaN. Integer arithmetic
 * only, and selects, so that loops vectorise (a float operation under a
 * condition is not if-converted: it could trap):
 * - normal range (a >= the format's smallest normal): round the f32
 *   mantissa to mbits bits, ties to even, by adding half an ulp (less one,
 *   plus the kept lsb) and shifting; a carry moves into the exponent as it
 *   should; then rebias the exponent. Above the largest finite, clamp.
 * - below it: the subnormal code is round_even(|v| / 2^(1 - bias - mbits)),
 *   the f32 significand (implicit bit included) shifted right by
 *   151 - bias - mbits - exponent with the same rounding (at most 31: the
 *   result is then 0, as for every f32 subnormal). A result of 2^mbits is
 *   the smallest normal's code, as it should be.
 */
GS_KFN uint32_t gs_km_fp8_mag(uint32_t a, unsigned mbits, unsigned bias, uint32_t maxcode)
{
    const unsigned sh = 23u - mbits;
    const uint32_t min_normal = (127u + 1u - bias) << 23;
    const uint32_t rebias = (127u - bias) << mbits;
    const uint32_t r = (a + ((1u << (sh - 1u)) - 1u) + ((a >> sh) & 1u)) >> sh;
    const uint32_t normal = (r - rebias <= maxcode) ? r - rebias : maxcode;
    const uint32_t sig = (a & 0x7fffffu) | 0x800000u;
    const uint32_t ds = (151u - bias - mbits) - (a >> 23);
    /* 21 .. 31 below min_normal; kept in 1 .. 31 above it (unused there). */
    const uint32_t s = (ds - 1u < 30u) ? ds : 31u;
    const uint32_t sub = (sig + ((1u << (s - 1u)) - 1u) + ((sig >> s) & 1u)) >> s;

    /* r >= rebias whenever a >= min_normal, so normal never wraps there. */
    return (a >= min_normal) ? normal : sub;
}

/* The E4M3 code of v (no scaling). */
GS_KFN uint8_t gs_km_f32_to_e4m3(float v)
{
    const uint32_t u = gs_km_f32_bits(v);
    const uint32_t a = u & 0x7fffffffu;
    const uint32_t mag = gs_km_fp8_mag(a, 3u, 7u, 0x7eu);

    return (uint8_t)((a > 0x7f800000u) ? GS_KM_FP8_NAN : (((u >> 24) & 0x80u) | mag));
}

/* The E5M2 code of v (no scaling). */
GS_KFN uint8_t gs_km_f32_to_e5m2(float v)
{
    const uint32_t u = gs_km_f32_bits(v);
    const uint32_t a = u & 0x7fffffffu;
    const uint32_t mag = gs_km_fp8_mag(a, 2u, 15u, 0x7bu);

    return (uint8_t)((a > 0x7f800000u) ? GS_KM_FP8_NAN : (((u >> 24) & 0x80u) | mag));
}

/*
 * fp8 -> f32 for a format of @p mbits mantissa bits and exponent bias
 * @p bias (exponent field all ones: E4M3's NaN is only mantissa all ones,
 * E5M2's inf is mantissa 0; @p ieee selects E5M2's rule). A normal code
 * moves its fields into f32 position and rebiases; a subnormal mantissa m
 * (m x 2^(1 - bias - mbits)) is normalised with its leading bit p (m < 8:
 * p = [m >= 2] + [m >= 4]). Integer selects only, as gs_km_fp8_mag.
 */
GS_KFN float gs_km_fp8_to_f32(uint32_t b, unsigned mbits, unsigned bias, int ieee)
{
    const uint32_t ebits = 7u - mbits;
    const uint32_t sign = (b & 0x80u) << 24;
    const uint32_t e = (b >> mbits) & ((1u << ebits) - 1u);
    const uint32_t m = b & ((1u << mbits) - 1u);
    const uint32_t top = (1u << ebits) - 1u;
    const uint32_t normal = sign | ((e + 127u - bias) << 23) | (m << (23u - mbits));
    const uint32_t p = (uint32_t)(m >= 2u) + (uint32_t)(m >= 4u);
    const uint32_t sub_bits =
        ((p + 127u + 1u - bias - mbits) << 23) | ((m << (23u - p)) & 0x7fffffu);
    const uint32_t sub = sign | ((m != 0u) ? sub_bits : 0u);
    const uint32_t is_top = (uint32_t)(e == top);
    const uint32_t nan =
        ieee ? (is_top & (uint32_t)(m != 0u)) : (is_top & (uint32_t)(m == (1u << mbits) - 1u));
    const uint32_t inf = ieee ? (is_top & (uint32_t)(m == 0u)) : 0u;
    uint32_t bits = (e == 0u) ? sub : normal;

    bits = (inf != 0u) ? (sign | 0x7f800000u) : bits;
    bits = (nan != 0u) ? (sign | 0x7fc00000u) : bits;
    return gs_km_f32_from_bits(bits);
}

GS_KFN float gs_km_e4m3_to_f32(uint8_t b)
{
    return gs_km_fp8_to_f32(b, 3u, 7u, 0);
}

GS_KFN float gs_km_e5m2_to_f32(uint8_t b)
{
    return gs_km_fp8_to_f32(b, 2u, 15u, 1);
}

/*
 * The block codes: fp8(x inv) with inv from gs_km_block_step(m, FP8_MAX),
 * so that the block's largest |x| lands on the largest finite code, and
 * the decoded value f32(code) x step (gs_km_fp8_dequant). The product
 * x inv is a plain multiply, as in the int8 code: a NaN product, whatever
 * its payload on either side, maps to the one NaN code.
 */
GS_KFN uint8_t gs_km_e4m3_code(float x, float inv)
{
    return gs_km_f32_to_e4m3(x * inv);
}

GS_KFN uint8_t gs_km_e5m2_code(float x, float inv)
{
    return gs_km_f32_to_e5m2(x * inv);
}

/* A decoded fp8 element: f32(code) x s, s the block's step (set) or alpha
 * x step (add), as gs_km_dequant for the integer codes. */
GS_KFN float gs_km_fp8_dequant(uint8_t code, int e5m2, float s)
{
    return gs_km_mulf(e5m2 ? gs_km_e5m2_to_f32(code) : gs_km_e4m3_to_f32(code), s);
}

/* ---------------------------------------------------------------------- */
/* sign                                                                   */
/* ---------------------------------------------------------------------- */

/* The sign bit of the code: 1 for x < 0 (-0 and NaN give 0). */
GS_KFN unsigned gs_km_sign_bit(float x)
{
    return (x < 0.0f) ? 1u : 0u;
}

/* Decoded value of a sign element: -s for bit 1, else s. */
GS_KFN float gs_km_sign_value(unsigned bit, float s)
{
    return (bit != 0) ? gs_km_negf(s) : s;
}

/*
 * IMPORTANT: the block scale mean |x| is summed in one fixed order, on
 * every path: eight partials, partial j the sum of |x[i]| for the block's
 * elements i = j, j + 8, j + 16, ... in ascending order (block-relative
 * indices), then the partials summed 0..7 into 0.0f, then one division by
 * n. gs_km_sign_partial is one step of a partial; gs_km_sign_mean the rest.
 */
#define GS_KM_SIGN_PARTIALS 8

GS_KFN float gs_km_sign_partial(float p, float x)
{
    return gs_km_addf(p, gs_km_absf(x));
}

GS_KFN float gs_km_sign_mean(const float *p, size_t n)
{
    float s = 0.0f;

    for (unsigned j = 0; j < GS_KM_SIGN_PARTIALS; j++) {
        s = gs_km_addf(s, p[j]);
    }
    return gs_km_divf(s, (float)n);
}

/* ---------------------------------------------------------------------- */
/* random-k and top-k                                                     */
/* ---------------------------------------------------------------------- */

/* Index drawn from stratum j of k over n elements (k <= n < 2^32): stratum
 * j is [floor(j n / k), floor((j + 1) n / k)). */
GS_KFN size_t gs_km_randk_index(size_t n, size_t k, size_t j, uint32_t key)
{
    const uint64_t lo = ((uint64_t)j * n) / k;
    const uint64_t hi = ((uint64_t)(j + 1) * n) / k;
    const uint32_t h = gs__codec_hash32((uint32_t)j * 0x9e3779b9u + key);

    return (size_t)(lo + (((uint64_t)h * (hi - lo)) >> 32));
}

/* top-k's order key: the bits of |x|, which order like |x| (NaN above inf). */
GS_KFN uint32_t gs_km_topk_key(float x)
{
    return gs_km_f32_bits(x) & 0x7fffffffu;
}

#endif /* GS_MATH_CODEC_MATH_H */
