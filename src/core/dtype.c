/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Datatype and op facts, generated from the GS_DTYPE_MAP and GS_OP_MAP
 * X-macro tables in gradsync/types.h, and the scalar f16/bf16 <-> f32
 * conversions. The conversions are plain integer code (no FP environment
 * dependence, no compiler half-float types), round to nearest even, turn
 * overflow into inf, keep subnormals exact and keep NaN a NaN (quiet, same
 * sign). Their NaN handling matches x86 F16C (payload shifted, quiet bit
 * set) so that the vectorised reduce and the plain C one agree bit for bit.
 * This file does not reduce buffers; that is reduce_cpu.c.
 */
#include "core/dtype.h"

#include <string.h>

typedef struct {
    const char *alias;
    gs_dtype_t dtype;
} dtype_alias_t;

/* Accepted spellings beyond the short names of GS_DTYPE_MAP. */
static const dtype_alias_t dtype_aliases[] = {
    {.alias = "float", .dtype = GS_DTYPE_F32},   {.alias = "float32", .dtype = GS_DTYPE_F32},
    {.alias = "double", .dtype = GS_DTYPE_F64},  {.alias = "float64", .dtype = GS_DTYPE_F64},
    {.alias = "half", .dtype = GS_DTYPE_F16},    {.alias = "float16", .dtype = GS_DTYPE_F16},
    {.alias = "bfloat16", .dtype = GS_DTYPE_BF16}, {.alias = "int8", .dtype = GS_DTYPE_I8},
    {.alias = "uint8", .dtype = GS_DTYPE_U8},    {.alias = "int", .dtype = GS_DTYPE_I32},
    {.alias = "int32", .dtype = GS_DTYPE_I32},   {.alias = "int64", .dtype = GS_DTYPE_I64},
};

size_t gs__dtype_size(gs_dtype_t dt)
{
    switch (dt) {
#define GS_DTYPE_SIZE_ROW(_name, _value, _size, _str) \
    case _name:                                       \
        return (_size);
        GS_DTYPE_MAP(GS_DTYPE_SIZE_ROW)
#undef GS_DTYPE_SIZE_ROW
    default:
        return 0;
    }
}

const char *gs__dtype_name(gs_dtype_t dt)
{
    switch (dt) {
#define GS_DTYPE_NAME_ROW(_name, _value, _size, _str) \
    case _name:                                       \
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
#define GS_OP_NAME_ROW(_name, _value, _str) \
    case _name:                             \
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
#define GS_DTYPE_PARSE_ROW(_name, _value, _size, _str) \
    if (strcmp(s, (_str)) == 0) {                      \
        *out = (_name);                                \
        return 0;                                      \
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
#define GS_OP_PARSE_ROW(_name, _value, _str) \
    if (strcmp(s, (_str)) == 0) {            \
        *out = (_name);                      \
        return 0;                            \
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
    return 1;
}

static float bits_to_f32(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint32_t f32_to_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

float gs__f16_to_f32(uint16_t h)
{
    const uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t exp = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t mant = (uint32_t)h & 0x3ffu;

    if (exp == 0x1fu) {
        /* inf stays inf; a NaN keeps its payload and becomes quiet. */
        return bits_to_f32(sign | 0x7f800000u | (mant != 0 ? (0x400000u | (mant << 13)) : 0));
    }
    if (exp == 0) {
        if (mant == 0) {
            return bits_to_f32(sign);
        }
        /* Subnormal: normalise so the leading one lands on bit 10. */
        exp = 1;
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            exp--;
        }
        mant &= 0x3ffu;
    }
    /* Rebias 15 -> 127; exp may be <= 0 here only transiently (subnormals). */
    return bits_to_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t gs__f32_to_f16(float f)
{
    const uint32_t u = f32_to_bits(f);
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

float gs__bf16_to_f32(uint16_t h)
{
    return bits_to_f32((uint32_t)h << 16);
}

uint16_t gs__f32_to_bf16(float f)
{
    const uint32_t u = f32_to_bits(f);

    if ((u & 0x7fffffffu) > 0x7f800000u) {
        /* NaN: truncate and set the quiet bit, so rounding cannot make it inf. */
        return (uint16_t)((u >> 16) | 0x40u);
    }
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
