/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPU reductions for every dtype and op, vectorised with AVX2/AVX-512 where
 * the CPU has them (chosen at run time; the library is never built with
 * -march=native) and plain C elsewhere (aarch64 included).
 * f16/bf16 are computed in f32 and rounded to nearest even once per call.
 * min/max propagate NaN (IEEE 754-2019 minimum/maximum: a NaN input gives a
 * NaN result; -0 < +0). GS_OP_AVG reduces as a sum; the caller divides once
 * at the end with gs__reduce_scale().
 */
#ifndef GS_CORE_REDUCE_CPU_H
#define GS_CORE_REDUCE_CPU_H

#include <stddef.h>

#include "gradsync/types.h"

/*
 * dst[i] = a[i] op b[i] for i < n. dst may alias a or b exactly (in place);
 * no other overlap. Caller guarantees (dt, op) is valid. AVG acts as SUM.
 */
void gs__reduce(void *dst, const void *a, const void *b, size_t n, gs_dtype_t dt, gs_op_t op);

/* buf[i] = buf[i] / divisor for float dtypes (computed in f32/f64, rounded once). */
void gs__reduce_scale(void *buf, size_t n, gs_dtype_t dt, int divisor);

/* 1 when the CPU has AVX2 (with the OS saving YMM state) and F16C, else 0;
 * looked up once, thread-safe. Shared with the codec kernels. */
int gs__cpu_has_avx2_f16c(void);

/* Name of the code path chosen at run time ("avx512", "avx2", "generic"). */
const char *gs__reduce_isa(void);

/*
 * The same two calls on the plain C path only (no multiversioning, no
 * F16C), with identical results (a NaN made from two NaNs may carry the
 * other input's payload). For tests and the bench, to check and measure
 * the dispatched path against the portable one.
 */
void gs__reduce_generic(void *dst, const void *a, const void *b, size_t n, gs_dtype_t dt,
                        gs_op_t op);
void gs__reduce_scale_generic(void *buf, size_t n, gs_dtype_t dt, int divisor);

#endif /* GS_CORE_REDUCE_CPU_H */
