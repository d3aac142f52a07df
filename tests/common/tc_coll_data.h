/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tc_coll_data.h: the data of the collective checks, one definition for
 * gs-bench --check (bench/gs_bench.c), coll_check, the soak and
 * test_gpu_coll: element access by dtype, the hashes the inputs come from,
 * one reduction step of the serial reference, the tolerance test, and the
 * integer-exact patterns that gs-bench and test_gpu_coll fill their inputs
 * with and check their outputs against. Header-only (static inline), on the
 * public types of gradsync.h; it links nothing of the library.
 *
 * The f16 and bf16 conversions are the library's own, math/half_math.h
 * (header-only arithmetic): the data here only holds values every one of
 * those formats represents exactly, so the rounding never decides a check.
 * The rounding itself is tested against an independent oracle in one place,
 * tests/unit/test_dtype.c (ref_f32_to_f16, ref_f32_to_bf16: nearest of the
 * two neighbours, by value); keep that oracle apart from this code.
 *
 * Each program keeps its own tolerances and its own choice of what to
 * compare (values, raw bytes, or bits): this file only says what the data
 * is.
 */
#ifndef GS_TESTS_COMMON_TC_COLL_DATA_H
#define GS_TESTS_COMMON_TC_COLL_DATA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gradsync/gradsync.h"
#include "math/half_math.h"

/* ---- dtypes ------------------------------------------------------------- */

/* Bytes of one element of @p dt (0 for a value outside the enum). */
static inline size_t tc_dtype_size(gs_dtype_t dt)
{
    switch (dt) {
    case GS_DTYPE_F64:
    case GS_DTYPE_I64:
        return 8;
    case GS_DTYPE_F32:
    case GS_DTYPE_I32:
        return 4;
    case GS_DTYPE_F16:
    case GS_DTYPE_BF16:
        return 2;
    case GS_DTYPE_I8:
    case GS_DTYPE_U8:
        return 1;
    default:
        return 0;
    }
}

/* Whether @p dt is one of the floating-point dtypes. */
static inline int tc_dtype_is_float(gs_dtype_t dt)
{
    return (dt == GS_DTYPE_F32) || (dt == GS_DTYPE_F64) || (dt == GS_DTYPE_F16) ||
           (dt == GS_DTYPE_BF16);
}

/* Element @p i of @p buf, of dtype @p dt, as a double (NaN for an unknown dtype). */
static inline double tc_get(const void *buf, size_t i, gs_dtype_t dt)
{
    const unsigned char *p = (const unsigned char *)buf + i * tc_dtype_size(dt);

    switch (dt) {
    case GS_DTYPE_F32: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    case GS_DTYPE_F64: {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    case GS_DTYPE_F16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return gs_km_f16_to_f32(v);
    }
    case GS_DTYPE_BF16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return gs_km_bf16_to_f32(v);
    }
    case GS_DTYPE_I8:
        return (double)(int8_t)p[0];
    case GS_DTYPE_U8:
        return (double)p[0];
    case GS_DTYPE_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case GS_DTYPE_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        return (double)v;
    }
    default:
        return NAN;
    }
}

/* Store @p x as element @p i of @p buf in dtype @p dt: the float dtypes round
 * to nearest even; the integer ones take x truncated to an integer (which
 * must fit in an int64) and wrapped to their width, as the library's
 * integer sums wrap. */
static inline void tc_set(void *buf, size_t i, gs_dtype_t dt, double x)
{
    unsigned char *p = (unsigned char *)buf + i * tc_dtype_size(dt);

    switch (dt) {
    case GS_DTYPE_F32: {
        const float v = (float)x;
        memcpy(p, &v, 4);
        break;
    }
    case GS_DTYPE_F64:
        memcpy(p, &x, 8);
        break;
    case GS_DTYPE_F16: {
        const uint16_t v = gs_km_f32_to_f16((float)x);
        memcpy(p, &v, 2);
        break;
    }
    case GS_DTYPE_BF16: {
        const uint16_t v = gs_km_f32_to_bf16((float)x);
        memcpy(p, &v, 2);
        break;
    }
    case GS_DTYPE_I8:
    case GS_DTYPE_U8:
        p[0] = (unsigned char)(uint64_t)(int64_t)x;
        break;
    case GS_DTYPE_I32: {
        const uint32_t v = (uint32_t)(uint64_t)(int64_t)x;
        memcpy(p, &v, 4);
        break;
    }
    case GS_DTYPE_I64: {
        const int64_t v = (int64_t)x;
        memcpy(p, &v, 8);
        break;
    }
    default:
        break;
    }
}

/* ---- the serial reference ------------------------------------------------ */

/* One step of the serial reduction: @p acc combined with @p v by @p op (avg
 * adds; divide by the rank count at the end). The bitwise ops work on the
 * integer values, which must be exact in a double. */
static inline double tc_combine(gs_op_t op, double acc, double v)
{
    switch (op) {
    case GS_OP_PROD:
        return acc * v;
    case GS_OP_MIN:
        return (v < acc) ? v : acc;
    case GS_OP_MAX:
        return (v > acc) ? v : acc;
    case GS_OP_BAND:
        return (double)((int64_t)acc & (int64_t)v);
    case GS_OP_BOR:
        return (double)((int64_t)acc | (int64_t)v);
    case GS_OP_BXOR:
        return (double)((int64_t)acc ^ (int64_t)v);
    default: /* sum, avg */
        return acc + v;
    }
}

/* Whether @p got is within @p tol of @p want, relative to max(1, |want|). */
static inline int tc_close(double got, double want, double tol)
{
    return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

/* ---- hashes -------------------------------------------------------------- */

/* SplitMix64's finaliser of x + the golden ratio: coll_check's and the soak's
 * inputs. */
static inline uint64_t tc_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* 32 bits from (rank r, index i, salt): the exact patterns' hash. */
static inline uint32_t tc_mix_ri(uint64_t r, uint64_t i, uint64_t salt)
{
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ (r + 1) * 0xC2B2AE3D27D4EB4Full ^ salt;

    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return (uint32_t)(h >> 16);
}

/* ---- integer-exact patterns (gs-bench --check, test_gpu_coll) ------------ */

/*
 * Element @p i of rank @p r's input for @p op over @p n ranks in @p dt:
 * every partial result in any order is an exact integer of the dtype, and
 * no value is 0 (a lost contribution shows). Sums stay below the dtype's
 * exact limit over n ranks (2048 f16, 256 bf16, 127 i8, 255 u8, 1000 the
 * wide types); prod: at most two ranks contribute a factor of 2 or 3 (no
 * product above 9); min, max and the bitwise ops: 1 to 99.
 */
static inline double tc_exact_value(gs_dtype_t dt, gs_op_t op, int n, int r, size_t i,
                                    uint64_t salt)
{
    double limit = 1000.0, m;

    if (op == GS_OP_PROD) {
        if ((size_t)r == i % (size_t)n) {
            return (double)(2 + i % 2);
        }
        if ((n > 1) && ((size_t)r == (i + 1) % (size_t)n)) {
            return (double)(2 + (i / 2) % 2);
        }
        return 1.0;
    }
    if ((op == GS_OP_MIN) || (op == GS_OP_MAX) || (op == GS_OP_BAND) || (op == GS_OP_BOR) ||
        (op == GS_OP_BXOR)) {
        return (double)(1 + tc_mix_ri((uint64_t)r, i, salt) % 99u);
    }
    switch (dt) {
    case GS_DTYPE_F16:
        limit = 2048.0;
        break;
    case GS_DTYPE_BF16:
        limit = 256.0;
        break;
    case GS_DTYPE_I8:
        limit = 127.0;
        break;
    case GS_DTYPE_U8:
        limit = 255.0;
        break;
    default:
        break;
    }
    m = floor(limit / n);
    m = (m > 1000.0) ? 1000.0 : (m < 2.0) ? 2.0 : m;
    return (double)(1 + tc_mix_ri((uint64_t)r, i, salt) % (uint32_t)(m - 1));
}

/* The serial reduction over the @p n ranks of element @p i of the exact
 * patterns (avg: the sum divided by n, in double). */
static inline double tc_exact_reduced(gs_dtype_t dt, gs_op_t op, int n, size_t i, uint64_t salt)
{
    double acc = tc_exact_value(dt, op, n, 0, i, salt);

    for (int r = 1; r < n; r++) {
        acc = tc_combine(op, acc, tc_exact_value(dt, op, n, r, i, salt));
    }
    return (op == GS_OP_AVG) ? acc / n : acc;
}

/* Elements of one rank's input of collective @p coll with count argument
 * @p count on @p n ranks (GS_COLL_TYPE_SEND: a ring of sends). */
static inline size_t tc_coll_in_elems(gs_coll_type_t coll, size_t count, int n)
{
    const int blocked = (coll == GS_COLL_TYPE_REDUCE_SCATTER) || (coll == GS_COLL_TYPE_ALLTOALL);

    return blocked ? count * (size_t)n : count;
}

/* Elements of one rank's output of the same call. */
static inline size_t tc_coll_out_elems(gs_coll_type_t coll, size_t count, int n)
{
    const int blocked = (coll == GS_COLL_TYPE_ALLGATHER) || (coll == GS_COLL_TYPE_ALLTOALL);

    return blocked ? count * (size_t)n : count;
}

/* Fill @p nin elements of @p buf with rank @p r's exact pattern. */
static inline void tc_exact_fill(void *buf, size_t nin, gs_dtype_t dt, gs_op_t op, int n, int r,
                                 uint64_t salt)
{
    for (size_t i = 0; i < nin; i++) {
        tc_set(buf, i, dt, tc_exact_value(dt, op, n, r, i, salt));
    }
}

/*
 * The expected output element @p i on rank @p me of collective @p coll on
 * the exact patterns of every rank (count as in tc_coll_in_elems; root for
 * broadcast; GS_COLL_TYPE_SEND: a ring where every rank receives from
 * me - 1; allreduce and reduce, on the root: the reduction).
 */
static inline double tc_exact_want(gs_coll_type_t coll, gs_dtype_t dt, gs_op_t op, int n, int me,
                                   int root, size_t count, size_t i, uint64_t salt)
{
    switch (coll) {
    case GS_COLL_TYPE_BROADCAST:
        return tc_exact_value(dt, op, n, root, i, salt);
    case GS_COLL_TYPE_ALLGATHER:
        return tc_exact_value(dt, op, n, (int)(i / count), i % count, salt);
    case GS_COLL_TYPE_REDUCE_SCATTER:
        return tc_exact_reduced(dt, op, n, (size_t)me * count + i, salt);
    case GS_COLL_TYPE_ALLTOALL:
        return tc_exact_value(dt, op, n, (int)(i / count), (size_t)me * count + i % count, salt);
    case GS_COLL_TYPE_SEND:
        return tc_exact_value(dt, op, n, (me + n - 1) % n, i, salt);
    default:
        return tc_exact_reduced(dt, op, n, i, salt);
    }
}

#endif /* GS_TESTS_COMMON_TC_COLL_DATA_H */
