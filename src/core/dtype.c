/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Datatype and op facts, generated from the GS_DTYPE_MAP and GS_OP_MAP
 * X-macro tables in gradsync/types.h, and the exported scalar f16/bf16 <->
 * f32 conversions. The conversions themselves are defined once, in
 * src/math/half_math.h (shared with the CUDA kernels): plain integer code,
 * round to nearest even, overflow to inf, exact subnormals, NaN kept a
 * quiet NaN with x86 F16C's payload rule, so that the vectorised reduce and
 * the plain C one agree bit for bit. This file does not reduce buffers;
 * that is reduce_cpu.c.
 */
#include "core/dtype.h"

#include "math/half_math.h"

#include <string.h>

typedef struct {
    const char *alias;
    gs_dtype_t dtype;
} dtype_alias_t;

/* Accepted spellings beyond the short names of GS_DTYPE_MAP. */
static const dtype_alias_t dtype_aliases[] = {
    {.alias = "float", .dtype = GS_DTYPE_F32},     {.alias = "float32", .dtype = GS_DTYPE_F32},
    {.alias = "double", .dtype = GS_DTYPE_F64},    {.alias = "float64", .dtype = GS_DTYPE_F64},
    {.alias = "half", .dtype = GS_DTYPE_F16},      {.alias = "float16", .dtype = GS_DTYPE_F16},
    {.alias = "bfloat16", .dtype = GS_DTYPE_BF16}, {.alias = "int8", .dtype = GS_DTYPE_I8},
    {.alias = "uint8", .dtype = GS_DTYPE_U8},      {.alias = "int", .dtype = GS_DTYPE_I32},
    {.alias = "int32", .dtype = GS_DTYPE_I32},     {.alias = "int64", .dtype = GS_DTYPE_I64},
};

size_t gs__dtype_size(gs_dtype_t dt)
{
    switch (dt) {
#define GS_DTYPE_SIZE_ROW(_name, _value, _size, _str)                                              \
    case _name:                                                                                    \
        return (_size);
        /* NOLINTNEXTLINE(bugprone-branch-clone): one case per dtype; equal sizes are meant. */
        GS_DTYPE_MAP(GS_DTYPE_SIZE_ROW)
#undef GS_DTYPE_SIZE_ROW
    default:
        return 0;
    }
}

const char *gs__dtype_name(gs_dtype_t dt)
{
    switch (dt) {
#define GS_DTYPE_NAME_ROW(_name, _value, _size, _str)                                              \
    case _name:                                                                                    \
        return (_str);
        GS_DTYPE_MAP(GS_DTYPE_NAME_ROW)
#undef GS_DTYPE_NAME_ROW
    default:
        return "unknown";
    }
}

const char *gs__op_name(gs_op_t op)
{
    switch (op) {
#define GS_OP_NAME_ROW(_name, _value, _str)                                                        \
    case _name:                                                                                    \
        return (_str);
        GS_OP_MAP(GS_OP_NAME_ROW)
#undef GS_OP_NAME_ROW
    default:
        return "unknown";
    }
}

int gs__dtype_parse(const char *s, gs_dtype_t *out)
{
    size_t i;

    if ((s == NULL) || (out == NULL)) {
        return -1;
    }
#define GS_DTYPE_PARSE_ROW(_name, _value, _size, _str)                                             \
    if (strcmp(s, (_str)) == 0) {                                                                  \
        *out = (_name);                                                                            \
        return 0;                                                                                  \
    }
    GS_DTYPE_MAP(GS_DTYPE_PARSE_ROW)
#undef GS_DTYPE_PARSE_ROW
    for (i = 0; i < sizeof(dtype_aliases) / sizeof(dtype_aliases[0]); i++) {
        if (strcmp(s, dtype_aliases[i].alias) == 0) {
            *out = dtype_aliases[i].dtype;
            return 0;
        }
    }
    return -1;
}

int gs__op_parse(const char *s, gs_op_t *out)
{
    if ((s == NULL) || (out == NULL)) {
        return -1;
    }
#define GS_OP_PARSE_ROW(_name, _value, _str)                                                       \
    if (strcmp(s, (_str)) == 0) {                                                                  \
        *out = (_name);                                                                            \
        return 0;                                                                                  \
    }
    GS_OP_MAP(GS_OP_PARSE_ROW)
#undef GS_OP_PARSE_ROW
    return -1;
}

int gs__dtype_is_float(gs_dtype_t dt)
{
    return (dt == GS_DTYPE_F32) || (dt == GS_DTYPE_F64) || (dt == GS_DTYPE_F16) ||
           (dt == GS_DTYPE_BF16);
}

int gs__dtype_op_valid(gs_dtype_t dt, gs_op_t op)
{
    if (((unsigned)dt >= (unsigned)GS_DTYPE_COUNT) || ((unsigned)op >= (unsigned)GS_OP_COUNT)) {
        return 0;
    }
    if (op == GS_OP_AVG) {
        return gs__dtype_is_float(dt);
    }
    if (gs__op_is_bitwise(op)) {
        return !gs__dtype_is_float(dt);
    }
    return 1;
}

int gs__op_is_bitwise(gs_op_t op)
{
    return (op == GS_OP_BAND) || (op == GS_OP_BOR) || (op == GS_OP_BXOR);
}

/* The conversions live in src/math/half_math.h, shared with the CUDA kernels;
 * these exported wrappers keep one definition. */
float gs__f16_to_f32(uint16_t h)
{
    return gs_km_f16_to_f32(h);
}

uint16_t gs__f32_to_f16(float f)
{
    return gs_km_f32_to_f16(f);
}

float gs__bf16_to_f32(uint16_t h)
{
    return gs_km_bf16_to_f32(h);
}

uint16_t gs__f32_to_bf16(float f)
{
    return gs_km_f32_to_bf16(f);
}

void gs__dtype_from_f32(const float *v, size_t n, gs_dtype_t dt, void *dst)
{
    size_t i;

    switch (dt) {
    case GS_DTYPE_F32:
        memmove(dst, v, n * sizeof(float));
        break;
    case GS_DTYPE_F64:
        for (i = 0; i < n; i++) {
            ((double *)dst)[i] = (double)v[i];
        }
        break;
    case GS_DTYPE_F16:
        for (i = 0; i < n; i++) {
            ((uint16_t *)dst)[i] = gs__f32_to_f16(v[i]);
        }
        break;
    default: /* GS_DTYPE_BF16 */
        for (i = 0; i < n; i++) {
            ((uint16_t *)dst)[i] = gs__f32_to_bf16(v[i]);
        }
        break;
    }
}
