/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The scalar f16/bf16 <-> f32 conversions and f32 bit casts, the one
 * definition shared by the CPU library (src/core/dtype.c forwards to these),
 * the reduction kernels and the codec kernels. Every function is GS_KFN, so
 * it compiles as C and as CUDA device code and gives the same bits on both.
 *
 * The conversions are plain integer code (no FP environment dependence, no
 * compiler or CUDA half-float types): round to nearest even, overflow goes
 * to inf, subnormals are exact, and a NaN stays a NaN of the same sign,
 * made quiet. The NaN payload rule matches x86 F16C (payload shifted, quiet
 * bit set), so the vectorised CPU reduce and the plain C one agree bit for
 * bit. This file does no reduction; that is reduce_math.h.
 */
#ifndef GS_MATH_HALF_MATH_H
#define GS_MATH_HALF_MATH_H

#include <stdint.h>

#include "math/gs_device.h"

#if !defined(__CUDA_ARCH__)
#include <string.h>
#endif

/* The bits of f, as an integer. */
GS_KFN uint32_t gs_km_f32_bits(float f)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
#endif
}

/* The float whose bits are u. */
GS_KFN float gs_km_f32_from_bits(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
#endif
}

/* The bits of d, as an integer. */
GS_KFN uint64_t gs_km_f64_bits(double d)
{
#if defined(__CUDA_ARCH__)
    return (uint64_t)__double_as_longlong(d);
#else
    uint64_t u;

    memcpy(&u, &d, sizeof(u));
    return u;
#endif
}

/* The double whose bits are u. */
GS_KFN double gs_km_f64_from_bits(uint64_t u)
{
#if defined(__CUDA_ARCH__)
    return __longlong_as_double((long long)u);
#else
    double d;

    memcpy(&d, &u, sizeof(d));
    return d;
#endif
}

/* IEEE binary16 -> binary32, exact (every f16 is an f32). */
GS_KFN float gs_km_f16_to_f32(uint16_t h)
{
    const uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t exp = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t mant = (uint32_t)h & 0x3ffu;

    if (exp == 0x1fu) {
        /* inf stays inf; a NaN keeps its payload and becomes quiet. */
        return gs_km_f32_from_bits(sign | 0x7f800000u |
                                   ((mant != 0) ? (0x400000u | (mant << 13)) : 0u));
    }
    if (exp == 0) {
        if (mant == 0) {
            return gs_km_f32_from_bits(sign);
        }
        /* Subnormal: normalise so the leading one lands on bit 10. */
        exp = 1;
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            exp--;
        }
        mant &= 0x3ffu;
    }
    /* Rebias 15 -> 127; exp wraps below zero only transiently (subnormals),
     * and the unsigned sum lands on the right biased exponent. */
    return gs_km_f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

/* binary32 -> binary16, rounded to nearest even. */
GS_KFN uint16_t gs_km_f32_to_f16(float f)
{
    const uint32_t u = gs_km_f32_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t au = u & 0x7fffffffu;
    uint32_t exp, mant, shift, r, rem, half;

    if (au > 0x7f800000u) {
        /* NaN: keep the top of the payload, force the quiet bit (as F16C). */
        return (uint16_t)(sign | 0x7e00u | ((au >> 13) & 0x3ffu));
    }
    if (au >= 0x477ff000u) {
        /* >= 65520 (halfway past 65504, ties to even go up) and inf. */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (au >= 0x38800000u) {
        /* Normal f16: round the 13 dropped bits to nearest even; a carry
         * into the exponent is exactly right (up to 0x7bff, checked above). */
        r = (au + 0xfffu + ((au >> 13) & 1u)) >> 13;
        return (uint16_t)(sign | (r - (112u << 10)));
    }
    exp = au >> 23;
    if (exp < 102u) {
        /* Below 2^-25 (half the smallest subnormal): rounds to zero. */
        return (uint16_t)sign;
    }
    /* f16 subnormal: the value in units of 2^-24, rounded to nearest even. */
    mant = (au & 0x7fffffu) | 0x800000u;
    shift = 126u - exp;
    r = mant >> shift;
    rem = mant & ((1u << shift) - 1u);
    half = 1u << (shift - 1u);
    if ((rem > half) || ((rem == half) && ((r & 1u) != 0))) {
        r++;
    }
    return (uint16_t)(sign | r);
}

/* bfloat16 -> binary32, exact. */
GS_KFN float gs_km_bf16_to_f32(uint16_t h)
{
    return gs_km_f32_from_bits((uint32_t)h << 16);
}

/*
 * binary32 -> bfloat16 rounded to nearest even, left in the top 16 bits of
 * the result (the low 16 are garbage), so that two bf16 packed in a word
 * narrow without shuffles (reduce_cpu.c's bf16 loops). A NaN only gets its
 * quiet bit set, so rounding cannot carry it into inf.
 */
GS_KFN uint32_t gs_km_f32_to_bf16_hi(float f)
{
    const uint32_t u = gs_km_f32_bits(f);

    return (f != f) ? (u | 0x400000u) : (u + 0x7fffu + ((u >> 16) & 1u));
}

/* binary32 -> bfloat16, rounded to nearest even. */
GS_KFN uint16_t gs_km_f32_to_bf16(float f)
{
    return (uint16_t)(gs_km_f32_to_bf16_hi(f) >> 16);
}

#endif /* GS_MATH_HALF_MATH_H */
