/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Datatype and op facts (from the X-macro tables in types.h) and the
 * f16/bf16 <-> f32 conversions (round to nearest even; NaN stays NaN,
 * overflow goes to inf, subnormals handled exactly).
 */
#ifndef GS_CORE_DTYPE_H
#define GS_CORE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/types.h"

/* Element size in bytes, or 0 for an unknown dtype. */
size_t gs__dtype_size(gs_dtype_t dt);
/* "f32", ... or "unknown". */
const char *gs__dtype_name(gs_dtype_t dt);
/* "sum", ... or "unknown". */
const char *gs__op_name(gs_op_t op);
/* Parse "f32"/"float"/... into *out; returns 0 on success, -1 otherwise. */
int gs__dtype_parse(const char *s, gs_dtype_t *out);
int gs__op_parse(const char *s, gs_op_t *out);
/* 1 when dt is f32, f64, f16 or bf16. */
int gs__dtype_is_float(gs_dtype_t dt);
/* 1 when (dt, op) is a valid combination (AVG needs a float type, the
 * bitwise ops an integer type). */
int gs__dtype_op_valid(gs_dtype_t dt, gs_op_t op);
/* 1 when op is GS_OP_BAND, GS_OP_BOR or GS_OP_BXOR. */
int gs__op_is_bitwise(gs_op_t op);

/* Scalar conversions, out-of-line forms of src/math/half_math.h's gs_km_*
 * (same bits); code that can include that header may call those inline. */
float gs__f16_to_f32(uint16_t h);
uint16_t gs__f32_to_f16(float f);
float gs__bf16_to_f32(uint16_t h);
uint16_t gs__f32_to_bf16(float f);

/* dst[i] = v[i] converted to float dtype @p dt (f32, f64, f16, bf16; round
 * to nearest even) for i < n; dst may be v itself when dt is f32. */
void gs__dtype_from_f32(const float *v, size_t n, gs_dtype_t dt, void *dst);

#endif /* GS_CORE_DTYPE_H */
