/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-element arithmetic of every reduction: one GS_KFN function per
 * (dtype, op) family, compiled by the C compiler (src/core/reduce_cpu.c's
 * plain C loops, which GCC also vectorises for its AVX2/AVX-512 clones) and
 * by nvcc (kernels/reduce_body.h), so the CPU library and the GPU kernels
 * cannot drift. It holds no loops and no dispatch over dtypes.
 *
 * Semantics (those of gs__reduce, src/core/reduce_cpu.h):
 * - GS_OP_AVG combines as GS_OP_SUM; the final divide is gs_km_scale_*
 *   (unfused) or gs_km_avg_* (fused with the last sum);
 * - float min/max are IEEE 754-2019 minimum/maximum: a NaN input gives
 *   that NaN (x's when both are NaN) and -0 < +0; pure selects on the bit
 *   patterns, so no FP exception or NaN canonicalisation can change them;
 * - f16/bf16 are widened to f32 exactly, combined in f32 and rounded once
 *   to nearest even (half_math.h);
 * - integer sum/prod wrap modulo 2^n, computed in the unsigned type of the
 *   same width (no signed overflow); min/max compare with the sign;
 * - scale divides by the divisor in f32 (f64 for f64) and rounds once.
 *
 * NOTE: NVIDIA GPUs return one canonical NaN (0x7fffffff) from any
 * arithmetic that makes a NaN, where x86 returns the NaN operand quietened,
 * or the "default NaN" 0xffc00000 for an invalid operation (inf - inf,
 * 0 * inf). On the device, gs_km_nan_f32/_f64 rewrite a NaN result the x86
 * way, so a GPU reduction gives the CPU's bits; in C they are the identity.
 * Which operand's payload wins when both are NaN still depends on the
 * operand order the C compiler picks (reduce_cpu.h says so).
 */
#ifndef GS_MATH_REDUCE_MATH_H
#define GS_MATH_REDUCE_MATH_H

#include <stdint.h>

#include "gradsync/types.h"
#include "math/gs_device.h"
#include "math/half_math.h"

/* ---------------------------------------------------------------------- */
/* NaN results as x86 makes them (device only)                            */
/* ---------------------------------------------------------------------- */

/* r = x op y already computed; on the device a NaN r becomes x's NaN, else
 * y's (quietened), else the x86 default NaN. */
GS_KFN float gs_km_nan_f32(float r, float x, float y)
{
#if defined(__CUDA_ARCH__)
    if (r != r) {
        if (x != x) {
            return gs_km_f32_from_bits(gs_km_f32_bits(x) | 0x400000u);
        }
        if (y != y) {
            return gs_km_f32_from_bits(gs_km_f32_bits(y) | 0x400000u);
        }
        return gs_km_f32_from_bits(0xffc00000u);
    }
#endif
    (void)x;
    (void)y;
    return r;
}

GS_KFN double gs_km_nan_f64(double r, double x, double y)
{
#if defined(__CUDA_ARCH__)
    if (r != r) {
        if (x != x) {
            return gs_km_f64_from_bits(gs_km_f64_bits(x) | 0x8000000000000ull);
        }
        if (y != y) {
            return gs_km_f64_from_bits(gs_km_f64_bits(y) | 0x8000000000000ull);
        }
        return gs_km_f64_from_bits(0xfff8000000000000ull);
    }
#endif
    (void)x;
    (void)y;
    return r;
}

/* ---------------------------------------------------------------------- */
/* f32 and f64                                                            */
/* ---------------------------------------------------------------------- */

/*
 * IEEE minimum as compare-and-select: x < y picks x; equal values (only
 * +-0 can differ) combine their bits with OR, so -0 wins; a NaN in x is
 * kept and a NaN in y falls out of the first select. Written on the bit
 * patterns so that every step maps onto a compare and a blend (GCC
 * vectorises it).
 */
GS_KFN float gs_km_min_f32(float x, float y)
{
    const uint32_t xb = gs_km_f32_bits(x);
    const uint32_t yb = gs_km_f32_bits(y);
    uint32_t rb = gs_km_f32_bits((x < y) ? x : y);

    rb = (x == y) ? (xb | yb) : rb;
    rb = (x != x) ? xb : rb;
    return gs_km_f32_from_bits(rb);
}

/* IEEE maximum: as gs_km_min_f32 with AND on equality, so +0 wins. The f64
 * twins follow the same scheme. */
GS_KFN float gs_km_max_f32(float x, float y)
{
    const uint32_t xb = gs_km_f32_bits(x);
    const uint32_t yb = gs_km_f32_bits(y);
    uint32_t rb = gs_km_f32_bits((x > y) ? x : y);

    rb = (x == y) ? (xb & yb) : rb;
    rb = (x != x) ? xb : rb;
    return gs_km_f32_from_bits(rb);
}

GS_KFN double gs_km_min_f64(double x, double y)
{
    const uint64_t xb = gs_km_f64_bits(x);
    const uint64_t yb = gs_km_f64_bits(y);
    uint64_t rb = gs_km_f64_bits((x < y) ? x : y);

    rb = (x == y) ? (xb | yb) : rb;
    rb = (x != x) ? xb : rb;
    return gs_km_f64_from_bits(rb);
}

GS_KFN double gs_km_max_f64(double x, double y)
{
    const uint64_t xb = gs_km_f64_bits(x);
    const uint64_t yb = gs_km_f64_bits(y);
    uint64_t rb = gs_km_f64_bits((x > y) ? x : y);

    rb = (x == y) ? (xb & yb) : rb;
    rb = (x != x) ? xb : rb;
    return gs_km_f64_from_bits(rb);
}

/* x op y in f32; AVG (and any unknown op) is a sum. */
GS_KFN float gs_km_op_f32(float x, float y, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        return gs_km_nan_f32(x * y, x, y);
    case GS_OP_MIN:
        return gs_km_min_f32(x, y);
    case GS_OP_MAX:
        return gs_km_max_f32(x, y);
    default:
        return gs_km_nan_f32(x + y, x, y);
    }
}

GS_KFN double gs_km_op_f64(double x, double y, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        return gs_km_nan_f64(x * y, x, y);
    case GS_OP_MIN:
        return gs_km_min_f64(x, y);
    case GS_OP_MAX:
        return gs_km_max_f64(x, y);
    default:
        return gs_km_nan_f64(x + y, x, y);
    }
}

/* ---------------------------------------------------------------------- */
/* f16 and bf16: widen, combine in f32, round once                        */
/* ---------------------------------------------------------------------- */

GS_KFN uint16_t gs_km_op_f16(uint16_t x, uint16_t y, gs_op_t op)
{
    return gs_km_f32_to_f16(gs_km_op_f32(gs_km_f16_to_f32(x), gs_km_f16_to_f32(y), op));
}

GS_KFN uint16_t gs_km_op_bf16(uint16_t x, uint16_t y, gs_op_t op)
{
    return gs_km_f32_to_bf16(gs_km_op_f32(gs_km_bf16_to_f32(x), gs_km_bf16_to_f32(y), op));
}

/* ---------------------------------------------------------------------- */
/* Integers                                                               */
/* ---------------------------------------------------------------------- */

/*
 * The bitwise ops (BAND, BOR, BXOR) act on the bits as stored; i8 goes
 * through u8, which gives the same bits. Float types never see them (the
 * API refuses the pairing).
 *
 * Sum and prod on the unsigned type of the same width, which wraps by
 * definition; the conversion back to the signed type keeps the bits (GCC,
 * clang and nvcc define it as modulo 2^n). The u8 product goes through
 * unsigned int, since uint8_t promotes to (signed) int.
 */
GS_KFN uint8_t gs_km_op_u8(uint8_t x, uint8_t y, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        return (uint8_t)((unsigned)x * (unsigned)y);
    case GS_OP_MIN:
        return (x < y) ? x : y;
    case GS_OP_MAX:
        return (x > y) ? x : y;
    case GS_OP_BAND:
        return (uint8_t)(x & y);
    case GS_OP_BOR:
        return (uint8_t)(x | y);
    case GS_OP_BXOR:
        return (uint8_t)(x ^ y);
    default:
        return (uint8_t)((unsigned)x + (unsigned)y);
    }
}

GS_KFN int8_t gs_km_op_i8(int8_t x, int8_t y, gs_op_t op)
{
    switch (op) {
    case GS_OP_MIN:
        return (x < y) ? x : y;
    case GS_OP_MAX:
        return (x > y) ? x : y;
    default:
        return (int8_t)gs_km_op_u8((uint8_t)x, (uint8_t)y, op);
    }
}

GS_KFN int32_t gs_km_op_i32(int32_t x, int32_t y, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        return (int32_t)((uint32_t)x * (uint32_t)y);
    case GS_OP_MIN:
        return (x < y) ? x : y;
    case GS_OP_MAX:
        return (x > y) ? x : y;
    case GS_OP_BAND:
        return x & y;
    case GS_OP_BOR:
        return x | y;
    case GS_OP_BXOR:
        return x ^ y;
    default:
        return (int32_t)((uint32_t)x + (uint32_t)y);
    }
}

GS_KFN int64_t gs_km_op_i64(int64_t x, int64_t y, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        return (int64_t)((uint64_t)x * (uint64_t)y);
    case GS_OP_MIN:
        return (x < y) ? x : y;
    case GS_OP_MAX:
        return (x > y) ? x : y;
    case GS_OP_BAND:
        return x & y;
    case GS_OP_BOR:
        return x | y;
    case GS_OP_BXOR:
        return x ^ y;
    default:
        return (int64_t)((uint64_t)x + (uint64_t)y);
    }
}

/* ---------------------------------------------------------------------- */
/* The final AVG step: scale, and sum fused with scale                    */
/* ---------------------------------------------------------------------- */

/* x / divisor, one rounding (divisor is the int divisor converted once by
 * the caller: (float) for f32 and the halves, (double) for f64). */
GS_KFN float gs_km_scale_f32(float x, float divisor)
{
    return gs_km_nan_f32(x / divisor, x, divisor);
}

GS_KFN double gs_km_scale_f64(double x, double divisor)
{
    return gs_km_nan_f64(x / divisor, x, divisor);
}

GS_KFN uint16_t gs_km_scale_f16(uint16_t x, float divisor)
{
    return gs_km_f32_to_f16(gs_km_scale_f32(gs_km_f16_to_f32(x), divisor));
}

GS_KFN uint16_t gs_km_scale_bf16(uint16_t x, float divisor)
{
    return gs_km_f32_to_bf16(gs_km_scale_f32(gs_km_bf16_to_f32(x), divisor));
}

/*
 * (x + y) / divisor: the last sum of an average and its divide in one
 * pass. f32 and f64 round twice, exactly as a sum then gs_km_scale_*; the
 * halves keep the sum in f32 and round once to their type, so the result
 * can differ from a rounded sum divided afterwards (it is the closer one).
 */
GS_KFN float gs_km_avg_f32(float x, float y, float divisor)
{
    return gs_km_scale_f32(gs_km_op_f32(x, y, GS_OP_SUM), divisor);
}

GS_KFN double gs_km_avg_f64(double x, double y, double divisor)
{
    return gs_km_scale_f64(gs_km_op_f64(x, y, GS_OP_SUM), divisor);
}

GS_KFN uint16_t gs_km_avg_f16(uint16_t x, uint16_t y, float divisor)
{
    return gs_km_f32_to_f16(gs_km_avg_f32(gs_km_f16_to_f32(x), gs_km_f16_to_f32(y), divisor));
}

GS_KFN uint16_t gs_km_avg_bf16(uint16_t x, uint16_t y, float divisor)
{
    return gs_km_f32_to_bf16(gs_km_avg_f32(gs_km_bf16_to_f32(x), gs_km_bf16_to_f32(y), divisor));
}

#endif /* GS_MATH_REDUCE_MATH_H */
