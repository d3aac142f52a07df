/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for src/core/reduce_cpu.c. Every dtype x op is run over sizes
 * that straddle the vector widths (0 .. 4099), with pointers offset by one
 * element, with dst aliasing a or b, on the dispatched path (gs__reduce)
 * and the plain C one (gs__reduce_generic), against a scalar reference
 * computed in double for floats (exact: double rounding of one +, * or /
 * through double is innocuous for f32 and narrower) and in wrapping
 * unsigned arithmetic for integers. Bytes outside the destination range
 * must stay untouched. Named cases cover NaN propagation, inf - inf,
 * signed zeros in min/max, integer wraparound, half-way rounding of
 * f16/bf16 and the avg scaling step.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/dtype.h"
#include "core/reduce_cpu.h"

typedef enum { PATH_DISPATCH, PATH_GENERIC, PATH_COUNT } reduce_path_t;
typedef enum { ALIAS_NONE, ALIAS_DST_A, ALIAS_DST_B, ALIAS_COUNT } alias_mode_t;

static const size_t test_sizes[] = {0, 1, 7, 8, 15, 16, 17, 31, 33, 64, 1000, 4099};

static uint64_t prng_state = 0x2545f4914f6cdd1dull;

static uint64_t prng_next(void)
{
    /* xorshift64*: deterministic, so failures reproduce. */
    prng_state ^= prng_state >> 12;
    prng_state ^= prng_state << 25;
    prng_state ^= prng_state >> 27;
    return prng_state * 0x2545f4914f6cdd1dull;
}

/* ---------------------------------------------------------------------- */
/* Element access and the reference                                       */
/* ---------------------------------------------------------------------- */

static uint64_t load_bits(const void *buf, size_t i, gs_dtype_t dt)
{
    const size_t esz = gs__dtype_size(dt);
    uint64_t v = 0;

    /* Little-endian hosts only (x86-64, aarch64): low bytes first. */
    memcpy(&v, (const unsigned char *)buf + i * esz, esz);
    return v;
}

static void store_bits(void *buf, size_t i, gs_dtype_t dt, uint64_t v)
{
    const size_t esz = gs__dtype_size(dt);

    memcpy((unsigned char *)buf + i * esz, &v, esz);
}

static float f32_of(uint64_t bits)
{
    const uint32_t u = (uint32_t)bits;
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

static double f64_of(uint64_t bits)
{
    double d;

    memcpy(&d, &bits, sizeof(d));
    return d;
}

static uint64_t bits_of_f32(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

static uint64_t bits_of_f64(double d)
{
    uint64_t u;

    memcpy(&u, &d, sizeof(u));
    return u;
}

/* Value of a float element, widened to double. */
static double value_of(gs_dtype_t dt, uint64_t bits)
{
    switch (dt) {
    case GS_DTYPE_F32:
        return (double)f32_of(bits);
    case GS_DTYPE_F64:
        return f64_of(bits);
    case GS_DTYPE_F16:
        return (double)gs__f16_to_f32((uint16_t)bits);
    default:
        return (double)gs__bf16_to_f32((uint16_t)bits);
    }
}

/* Encode a double as an element (rounding once through f32 for halves). */
static uint64_t encode(gs_dtype_t dt, double v)
{
    switch (dt) {
    case GS_DTYPE_F32:
        return bits_of_f32((float)v);
    case GS_DTYPE_F64:
        return bits_of_f64(v);
    case GS_DTYPE_F16:
        return gs__f32_to_f16((float)v);
    default:
        return gs__f32_to_bf16((float)v);
    }
}

static int is_nan_bits(gs_dtype_t dt, uint64_t bits)
{
    switch (dt) {
    case GS_DTYPE_F32:
        return isnan(f32_of(bits));
    case GS_DTYPE_F64:
        return isnan(f64_of(bits));
    case GS_DTYPE_F16:
        return ((bits & 0x7c00u) == 0x7c00u) && ((bits & 0x3ffu) != 0);
    case GS_DTYPE_BF16:
        return ((bits & 0x7f80u) == 0x7f80u) && ((bits & 0x7fu) != 0);
    default:
        return 0;
    }
}

/* IEEE 754-2019 minimum/maximum, written the obvious branchy way. */
static double ref_min(double x, double y)
{
    if (isnan(x) || isnan(y)) {
        return NAN;
    }
    if (x == y) {
        return (signbit(x) != 0) ? x : y;
    }
    return (x < y) ? x : y;
}

static double ref_max(double x, double y)
{
    if (isnan(x) || isnan(y)) {
        return NAN;
    }
    if (x == y) {
        return (signbit(x) != 0) ? y : x;
    }
    return (x > y) ? x : y;
}

static uint64_t ref_int(gs_dtype_t dt, gs_op_t op, uint64_t a, uint64_t b)
{
    const size_t bits = 8 * gs__dtype_size(dt);
    const uint64_t mask = (bits == 64) ? ~0ull : ((1ull << bits) - 1u);
    int64_t sa, sb;

    if (op == GS_OP_BAND) {
        return a & b & mask;
    }
    if (op == GS_OP_BOR) {
        return (a | b) & mask;
    }
    if (op == GS_OP_BXOR) {
        return (a ^ b) & mask;
    }
    if ((op == GS_OP_SUM) || (op == GS_OP_AVG)) {
        return (a + b) & mask;
    }
    if (op == GS_OP_PROD) {
        return (a * b) & mask;
    }
    if (dt == GS_DTYPE_U8) {
        return ((op == GS_OP_MIN) == (a < b)) ? a : b;
    }
    /* Sign-extend for the signed compare. */
    sa = (bits == 64) ? (int64_t)a : (int64_t)((a ^ (1ull << (bits - 1))) - (1ull << (bits - 1)));
    sb = (bits == 64) ? (int64_t)b : (int64_t)((b ^ (1ull << (bits - 1))) - (1ull << (bits - 1)));
    return ((op == GS_OP_MIN) == (sa < sb)) ? a : b;
}

static uint64_t ref_elem(gs_dtype_t dt, gs_op_t op, uint64_t a, uint64_t b)
{
    double x, y, r;

    if (!gs__dtype_is_float(dt)) {
        return ref_int(dt, op, a, b);
    }
    x = value_of(dt, a);
    y = value_of(dt, b);
    switch (op) {
    case GS_OP_PROD:
        r = x * y;
        break;
    case GS_OP_MIN:
        r = ref_min(x, y);
        break;
    case GS_OP_MAX:
        r = ref_max(x, y);
        break;
    default:
        r = x + y;
        break;
    }
    return encode(dt, r);
}

static void check_elem(gs_dtype_t dt, gs_op_t op, size_t i, uint64_t a, uint64_t b, uint64_t got,
                       uint64_t want)
{
    if (is_nan_bits(dt, want)) {
        /* Only the class is defined when two NaNs meet (payload varies). */
        if (!is_nan_bits(dt, got)) {
            print_error("%s %s [%zu]: 0x%llx op 0x%llx = 0x%llx, want NaN\n", gs__dtype_name(dt),
                        gs__op_name(op), i, (unsigned long long)a, (unsigned long long)b,
                        (unsigned long long)got);
        }
        assert_true(is_nan_bits(dt, got));
        return;
    }
    if (got != want) {
        print_error("%s %s [%zu]: 0x%llx op 0x%llx = 0x%llx, want 0x%llx\n", gs__dtype_name(dt),
                    gs__op_name(op), i, (unsigned long long)a, (unsigned long long)b,
                    (unsigned long long)got, (unsigned long long)want);
    }
    assert_int_equal(got, want);
}

/* ---------------------------------------------------------------------- */
/* Random inputs                                                          */
/* ---------------------------------------------------------------------- */

static uint64_t random_special(gs_dtype_t dt)
{
    static const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, 1.0, -1.0, 65504.0};
    const uint64_t pick = prng_next() % 10;

    if (pick < sizeof(specials) / sizeof(specials[0])) {
        return encode(dt, specials[pick]);
    }
    if (pick == 7) {
        return encode(dt, NAN);
    }
    if (pick == 8) {
        return encode(dt, -NAN);
    }
    return 1u; /* the smallest positive subnormal, whatever the type */
}

static uint64_t random_elem(gs_dtype_t dt)
{
    const uint64_t r = prng_next();
    const uint64_t sign = (r >> 63) & 1u;

    if (!gs__dtype_is_float(dt)) {
        return r >> 7; /* every bit pattern; the store truncates */
    }
    if ((r & 15u) == 0) {
        return random_special(dt);
    }
    switch (dt) {
    case GS_DTYPE_F32: /* exponents 2^-8 .. 2^7: sums interact, products stay finite */
        return (sign << 31) | ((119u + (r >> 8) % 16u) << 23) | ((r >> 20) & 0x7fffffu);
    case GS_DTYPE_F64:
        return (sign << 63) | ((1015ull + (r >> 8) % 16u) << 52) | ((r >> 12) & 0xfffffffffffffull);
    case GS_DTYPE_F16: /* every finite code, so subnormals and overflow show up */
        return ((r >> 8) % 0x7c00u) | (sign << 15);
    default:
        return (sign << 15) | ((119u + (r >> 8) % 16u) << 7) | ((r >> 20) & 0x7fu);
    }
}

/* ---------------------------------------------------------------------- */
/* The sweep                                                              */
/* ---------------------------------------------------------------------- */

static void call_reduce(reduce_path_t path, void *d, const void *a, const void *b, size_t n,
                        gs_dtype_t dt, gs_op_t op)
{
    if (path == PATH_GENERIC) {
        gs__reduce_generic(d, a, b, n, dt, op);
    } else {
        gs__reduce(d, a, b, n, dt, op);
    }
}

/* Bytes of buf outside [lo, hi) must equal the saved copy. */
static void check_untouched(const unsigned char *buf, const unsigned char *saved, size_t cap,
                            const unsigned char *lo, const unsigned char *hi)
{
    size_t j;

    for (j = 0; j < cap; j++) {
        if ((buf + j >= lo) && (buf + j < hi)) {
            continue;
        }
        assert_int_equal(buf[j], saved[j]);
    }
}

static void run_case(gs_dtype_t dt, gs_op_t op, size_t n, unsigned offsets, alias_mode_t alias,
                     reduce_path_t path)
{
    const size_t esz = gs__dtype_size(dt);
    const size_t cap = (n + 2) * esz;
    unsigned char *abuf = malloc(cap), *bbuf = malloc(cap), *dbuf = malloc(cap);
    unsigned char *saved = malloc(3 * cap);
    uint64_t *want = malloc((n + 1) * sizeof(uint64_t));
    uint64_t *ain = malloc((n + 1) * sizeof(uint64_t));
    uint64_t *bin = malloc((n + 1) * sizeof(uint64_t));
    unsigned char *a, *b, *d;
    size_t i;

    assert_non_null(abuf);
    assert_non_null(bbuf);
    assert_non_null(dbuf);
    assert_non_null(saved);
    assert_non_null(want);
    assert_non_null(ain);
    assert_non_null(bin);
    for (i = 0; i < n + 2; i++) {
        store_bits(abuf, i, dt, random_elem(dt));
        /* Sometimes equal inputs, to reach the equality paths of min/max. */
        if ((prng_next() & 7u) == 0) {
            store_bits(bbuf, i, dt, load_bits(abuf, i, dt));
        } else {
            store_bits(bbuf, i, dt, random_elem(dt));
        }
    }
    memset(dbuf, 0xa5, cap);
    a = abuf + (((offsets & 1u) != 0) ? esz : 0);
    b = bbuf + (((offsets & 2u) != 0) ? esz : 0);
    d = dbuf + (((offsets & 4u) != 0) ? esz : 0);
    if (alias == ALIAS_DST_A) {
        d = a;
    } else if (alias == ALIAS_DST_B) {
        d = b;
    }
    for (i = 0; i < n; i++) {
        ain[i] = load_bits(a, i, dt);
        bin[i] = load_bits(b, i, dt);
        want[i] = ref_elem(dt, op, ain[i], bin[i]);
    }
    memcpy(saved, abuf, cap);
    memcpy(saved + cap, bbuf, cap);
    memcpy(saved + 2 * cap, dbuf, cap);

    call_reduce(path, d, a, b, n, dt, op);

    for (i = 0; i < n; i++) {
        check_elem(dt, op, i, ain[i], bin[i], load_bits(d, i, dt), want[i]);
    }
    check_untouched(abuf, saved, cap, d, d + n * esz);
    check_untouched(bbuf, saved + cap, cap, d, d + n * esz);
    check_untouched(dbuf, saved + 2 * cap, cap, d, d + n * esz);

    free(bin);
    free(ain);
    free(want);
    free(saved);
    free(dbuf);
    free(bbuf);
    free(abuf);
}

static void sweep_dtype(gs_dtype_t dt)
{
    size_t s;
    gs_op_t op;
    unsigned offsets;
    int alias, path;

    for (op = (gs_op_t)0; op < GS_OP_COUNT; op++) {
        if (!gs__dtype_op_valid(dt, op)) {
            continue;
        }
        for (s = 0; s < sizeof(test_sizes) / sizeof(test_sizes[0]); s++) {
            for (path = 0; path < PATH_COUNT; path++) {
                /* Offsets: none, each pointer alone, all three. */
                for (offsets = 0; offsets <= 7; offsets++) {
                    if ((offsets == 3) || (offsets == 5) || (offsets == 6)) {
                        continue;
                    }
                    run_case(dt, op, test_sizes[s], offsets, ALIAS_NONE, (reduce_path_t)path);
                }
                for (alias = ALIAS_DST_A; alias < ALIAS_COUNT; alias++) {
                    run_case(dt, op, test_sizes[s], 0, (alias_mode_t)alias, (reduce_path_t)path);
                    run_case(dt, op, test_sizes[s], 3, (alias_mode_t)alias, (reduce_path_t)path);
                }
            }
        }
    }
}

static void test_reduce_f32_matches_reference(void **state)
{
    (void)state;
    sweep_dtype(GS_DTYPE_F32);
}

static void test_reduce_f64_matches_reference(void **state)
{
    (void)state;
    sweep_dtype(GS_DTYPE_F64);
}

static void test_reduce_f16_matches_reference(void **state)
{
    (void)state;
    sweep_dtype(GS_DTYPE_F16);
}

static void test_reduce_bf16_matches_reference(void **state)
{
    (void)state;
    sweep_dtype(GS_DTYPE_BF16);
}

static void test_reduce_int_matches_reference(void **state)
{
    (void)state;
    sweep_dtype(GS_DTYPE_I8);
    sweep_dtype(GS_DTYPE_U8);
    sweep_dtype(GS_DTYPE_I32);
    sweep_dtype(GS_DTYPE_I64);
}

/* ---------------------------------------------------------------------- */
/* Named cases                                                            */
/* ---------------------------------------------------------------------- */

#define NAMED_N 21 /* a full vector of every width plus a tail */

static const gs_dtype_t float_dtypes[] = {GS_DTYPE_F32, GS_DTYPE_F64, GS_DTYPE_F16, GS_DTYPE_BF16};

/* d = a op b for NAMED_N elements on both paths; out[path][i] gets bits. */
static void run_named(gs_dtype_t dt, gs_op_t op, const uint64_t *a, const uint64_t *b,
                      uint64_t out[PATH_COUNT][NAMED_N])
{
    uint64_t abuf[NAMED_N], bbuf[NAMED_N], dbuf[NAMED_N];
    int path;
    size_t i;

    for (path = 0; path < PATH_COUNT; path++) {
        for (i = 0; i < NAMED_N; i++) {
            store_bits(abuf, i, dt, a[i]);
            store_bits(bbuf, i, dt, b[i]);
        }
        call_reduce((reduce_path_t)path, dbuf, abuf, bbuf, NAMED_N, dt, op);
        for (i = 0; i < NAMED_N; i++) {
            out[path][i] = load_bits(dbuf, i, dt);
        }
    }
}

static void test_reduce_nan_propagation(void **state)
{
    static const gs_op_t ops[] = {GS_OP_SUM, GS_OP_PROD, GS_OP_MIN, GS_OP_MAX};
    uint64_t a[NAMED_N], b[NAMED_N], out[PATH_COUNT][NAMED_N];
    size_t t, o, i;
    int path;

    (void)state;
    for (t = 0; t < sizeof(float_dtypes) / sizeof(float_dtypes[0]); t++) {
        const gs_dtype_t dt = float_dtypes[t];

        for (i = 0; i < NAMED_N; i++) {
            a[i] = encode(dt, 2.0);
            b[i] = encode(dt, -3.0);
        }
        /* NaN in a only, in b only, in both, next to -inf/+0/-0. */
        a[0] = encode(dt, NAN);
        b[3] = encode(dt, -NAN);
        a[5] = encode(dt, NAN);
        b[5] = encode(dt, NAN);
        a[9] = encode(dt, -INFINITY);
        b[9] = encode(dt, NAN);
        a[16] = encode(dt, NAN);
        b[16] = encode(dt, -0.0);
        a[20] = encode(dt, 0.0);
        b[20] = encode(dt, NAN);
        for (o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            run_named(dt, ops[o], a, b, out);
            for (path = 0; path < PATH_COUNT; path++) {
                for (i = 0; i < NAMED_N; i++) {
                    const int has_nan = is_nan_bits(dt, a[i]) || is_nan_bits(dt, b[i]);

                    assert_int_equal(is_nan_bits(dt, out[path][i]), has_nan);
                }
                /* One NaN input: min/max return that NaN, sign included. */
                if ((ops[o] == GS_OP_MIN) || (ops[o] == GS_OP_MAX)) {
                    assert_int_equal(out[path][0], a[0]);
                    assert_int_equal(out[path][3], b[3]);
                    assert_int_equal(out[path][16], a[16]);
                }
                assert_int_equal(out[path][1], ref_elem(dt, ops[o], a[1], b[1]));
            }
        }
    }
}

/* A signalling f16/bf16 NaN comes out quiet with its payload, on both paths. */
static void test_reduce_half_snan_quieted(void **state)
{
    static const gs_op_t ops[] = {GS_OP_SUM, GS_OP_MIN, GS_OP_MAX};
    uint64_t a[NAMED_N], b[NAMED_N], out[PATH_COUNT][NAMED_N];
    size_t o, i;
    int path;

    (void)state;
    for (o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
        for (i = 0; i < NAMED_N; i++) {
            a[i] = 0xfc01; /* -sNaN, payload 1 */
            b[i] = 0x3c00;
        }
        run_named(GS_DTYPE_F16, ops[o], a, b, out);
        for (path = 0; path < PATH_COUNT; path++) {
            for (i = 0; i < NAMED_N; i++) {
                assert_int_equal(out[path][i], 0xfe01);
            }
        }
        for (i = 0; i < NAMED_N; i++) {
            a[i] = 0x3f80;
            b[i] = 0x7f81; /* sNaN, payload 1 */
        }
        run_named(GS_DTYPE_BF16, ops[o], a, b, out);
        for (path = 0; path < PATH_COUNT; path++) {
            for (i = 0; i < NAMED_N; i++) {
                assert_int_equal(out[path][i], 0x7fc1);
            }
        }
    }
}

static void test_reduce_inf_minus_inf_is_nan(void **state)
{
    uint64_t a[NAMED_N], b[NAMED_N], out[PATH_COUNT][NAMED_N];
    size_t t, i;
    int path;

    (void)state;
    for (t = 0; t < sizeof(float_dtypes) / sizeof(float_dtypes[0]); t++) {
        const gs_dtype_t dt = float_dtypes[t];

        for (i = 0; i < NAMED_N; i++) {
            a[i] = encode(dt, ((i & 1u) != 0) ? INFINITY : -INFINITY);
            b[i] = encode(dt, ((i & 1u) != 0) ? -INFINITY : INFINITY);
        }
        run_named(dt, GS_OP_SUM, a, b, out);
        for (path = 0; path < PATH_COUNT; path++) {
            for (i = 0; i < NAMED_N; i++) {
                assert_true(is_nan_bits(dt, out[path][i]));
            }
        }
        /* 0 * inf is NaN too; inf + inf stays inf. */
        for (i = 0; i < NAMED_N; i++) {
            a[i] = encode(dt, 0.0);
            b[i] = encode(dt, INFINITY);
        }
        run_named(dt, GS_OP_PROD, a, b, out);
        for (path = 0; path < PATH_COUNT; path++) {
            assert_true(is_nan_bits(dt, out[path][NAMED_N - 1]));
        }
        run_named(dt, GS_OP_SUM, b, b, out);
        for (path = 0; path < PATH_COUNT; path++) {
            assert_int_equal(out[path][NAMED_N - 1], b[0]);
        }
    }
}

static void test_reduce_signed_zero_min_max(void **state)
{
    uint64_t a[NAMED_N], b[NAMED_N], mn[PATH_COUNT][NAMED_N], mx[PATH_COUNT][NAMED_N];
    size_t t, i;
    int path;

    (void)state;
    for (t = 0; t < sizeof(float_dtypes) / sizeof(float_dtypes[0]); t++) {
        const gs_dtype_t dt = float_dtypes[t];
        const uint64_t pz = encode(dt, 0.0), nz = encode(dt, -0.0);

        assert_true(pz != nz);
        for (i = 0; i < NAMED_N; i++) {
            a[i] = ((i & 1u) != 0) ? nz : pz;
            b[i] = ((i & 2u) != 0) ? nz : pz;
        }
        run_named(dt, GS_OP_MIN, a, b, mn);
        run_named(dt, GS_OP_MAX, a, b, mx);
        for (path = 0; path < PATH_COUNT; path++) {
            for (i = 0; i < NAMED_N; i++) {
                const int any_neg = ((i & 1u) != 0) || ((i & 2u) != 0);
                const int all_neg = ((i & 1u) != 0) && ((i & 2u) != 0);

                assert_int_equal(mn[path][i], any_neg ? nz : pz);
                assert_int_equal(mx[path][i], all_neg ? nz : pz);
            }
        }
    }
}

static void test_reduce_int_wraparound(void **state)
{
    int8_t i8a[NAMED_N], i8b[NAMED_N], i8d[NAMED_N];
    uint8_t u8a[NAMED_N], u8b[NAMED_N], u8d[NAMED_N];
    int32_t i32a[NAMED_N], i32b[NAMED_N], i32d[NAMED_N];
    int64_t i64a[NAMED_N], i64b[NAMED_N], i64d[NAMED_N];
    int path;
    size_t i;

    (void)state;
    for (path = 0; path < PATH_COUNT; path++) {
        for (i = 0; i < NAMED_N; i++) {
            i8a[i] = INT8_MAX;
            i8b[i] = 1;
            u8a[i] = UINT8_MAX;
            u8b[i] = 2;
            i32a[i] = INT32_MAX;
            i32b[i] = (int32_t)i + 1;
            i64a[i] = INT64_MIN;
            i64b[i] = -1;
        }
        call_reduce((reduce_path_t)path, i8d, i8a, i8b, NAMED_N, GS_DTYPE_I8, GS_OP_SUM);
        call_reduce((reduce_path_t)path, u8d, u8a, u8b, NAMED_N, GS_DTYPE_U8, GS_OP_SUM);
        call_reduce((reduce_path_t)path, i32d, i32a, i32b, NAMED_N, GS_DTYPE_I32, GS_OP_SUM);
        call_reduce((reduce_path_t)path, i64d, i64a, i64b, NAMED_N, GS_DTYPE_I64, GS_OP_SUM);
        for (i = 0; i < NAMED_N; i++) {
            assert_int_equal(i8d[i], INT8_MIN);
            assert_int_equal(u8d[i], 1);
            assert_int_equal(i32d[i], INT32_MIN + (int32_t)i);
            assert_true(i64d[i] == INT64_MAX);
        }
        /* Products: 16 * 16 = 256 -> 0 in 8 bits; -128 * -1 = -128; 2^31 wraps. */
        for (i = 0; i < NAMED_N; i++) {
            i8a[i] = ((i & 1u) != 0) ? INT8_MIN : 16;
            i8b[i] = ((i & 1u) != 0) ? -1 : 16;
            u8a[i] = 16;
            u8b[i] = 17;
            i32a[i] = 65536;
            i32b[i] = 32768;
            i64a[i] = INT64_MIN;
            i64b[i] = 3;
        }
        call_reduce((reduce_path_t)path, i8d, i8a, i8b, NAMED_N, GS_DTYPE_I8, GS_OP_PROD);
        call_reduce((reduce_path_t)path, u8d, u8a, u8b, NAMED_N, GS_DTYPE_U8, GS_OP_PROD);
        call_reduce((reduce_path_t)path, i32d, i32a, i32b, NAMED_N, GS_DTYPE_I32, GS_OP_PROD);
        call_reduce((reduce_path_t)path, i64d, i64a, i64b, NAMED_N, GS_DTYPE_I64, GS_OP_PROD);
        for (i = 0; i < NAMED_N; i++) {
            assert_int_equal(i8d[i], ((i & 1u) != 0) ? INT8_MIN : 0);
            assert_int_equal(u8d[i], 16);
            assert_int_equal(i32d[i], INT32_MIN);
            assert_true(i64d[i] == INT64_MIN);
        }
        /* Signed versus unsigned compare on the same bits. */
        for (i = 0; i < NAMED_N; i++) {
            i8a[i] = -1;
            i8b[i] = 1;
            u8a[i] = 0xff;
            u8b[i] = 1;
        }
        call_reduce((reduce_path_t)path, i8d, i8a, i8b, NAMED_N, GS_DTYPE_I8, GS_OP_MIN);
        call_reduce((reduce_path_t)path, u8d, u8a, u8b, NAMED_N, GS_DTYPE_U8, GS_OP_MIN);
        for (i = 0; i < NAMED_N; i++) {
            assert_int_equal(i8d[i], -1);
            assert_int_equal(u8d[i], 1);
        }
    }
}

static void test_reduce_half_halfway_rounding(void **state)
{
    /* {a, b, a + b}: exact sums halfway between two codes go to the even one. */
    static const uint16_t f16_cases[][3] = {
        {0x3c00, 0x1000, 0x3c00}, /* 1 + 2^-11 -> 1 (even) */
        {0x3c01, 0x1000, 0x3c02}, /* (1 + 2^-10) + 2^-11 -> 1 + 2^-9 */
        {0x7bff, 0x4c00, 0x7c00}, /* 65504 + 16 = 65520 -> inf */
        {0x7bff, 0x4bfe, 0x7bff}, /* 65504 + 15.97 -> 65504 */
        {0x0001, 0x8001, 0x0000}, /* subnormal cancels to +0 */
        {0x03ff, 0x0001, 0x0400}, /* largest subnormal + smallest -> smallest normal */
    };
    static const uint16_t bf16_cases[][3] = {
        {0x3f80, 0x3b80, 0x3f80}, /* 1 + 2^-8 -> 1 (even) */
        {0x3f81, 0x3b80, 0x3f82}, /* (1 + 2^-7) + 2^-8 -> 1 + 2^-6 */
        {0x7f7f, 0x7b00, 0x7f80}, /* max + half an ulp (2^119) -> inf */
        {0xbf80, 0xbb80, 0xbf80}, /* negative tie */
    };
    uint64_t a[NAMED_N], b[NAMED_N], out[PATH_COUNT][NAMED_N];
    size_t c, i;
    int path;

    (void)state;
    for (c = 0; c < sizeof(f16_cases) / sizeof(f16_cases[0]); c++) {
        for (i = 0; i < NAMED_N; i++) {
            a[i] = f16_cases[c][0];
            b[i] = f16_cases[c][1];
        }
        run_named(GS_DTYPE_F16, GS_OP_SUM, a, b, out);
        for (path = 0; path < PATH_COUNT; path++) {
            for (i = 0; i < NAMED_N; i++) {
                assert_int_equal(out[path][i], f16_cases[c][2]);
            }
        }
    }
    for (c = 0; c < sizeof(bf16_cases) / sizeof(bf16_cases[0]); c++) {
        for (i = 0; i < NAMED_N; i++) {
            a[i] = bf16_cases[c][0];
            b[i] = bf16_cases[c][1];
        }
        run_named(GS_DTYPE_BF16, GS_OP_SUM, a, b, out);
        for (path = 0; path < PATH_COUNT; path++) {
            for (i = 0; i < NAMED_N; i++) {
                assert_int_equal(out[path][i], bf16_cases[c][2]);
            }
        }
    }
}

/* All 65536 codes of a against several b patterns, every op, both paths. */
static void test_reduce_half_exhaustive(void **state)
{
    static const gs_dtype_t halves[] = {GS_DTYPE_F16, GS_DTYPE_BF16};
    static const gs_op_t ops[] = {GS_OP_SUM, GS_OP_PROD, GS_OP_MIN, GS_OP_MAX};
    const size_t n = 65536;
    uint16_t *a = malloc(n * sizeof(uint16_t));
    uint16_t *b = malloc(n * sizeof(uint16_t));
    uint16_t *d = malloc(n * sizeof(uint16_t));
    size_t h, o, i, pattern;
    int path;

    (void)state;
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(d);
    for (i = 0; i < n; i++) {
        a[i] = (uint16_t)i;
    }
    for (h = 0; h < sizeof(halves) / sizeof(halves[0]); h++) {
        const gs_dtype_t dt = halves[h];

        for (pattern = 0; pattern < 4; pattern++) {
            for (i = 0; i < n; i++) {
                /* A permutation of all codes, then constants 1, -0, 3. */
                static const double consts[] = {0.0, 1.0, -0.0, 3.0};

                b[i] = (pattern == 0) ? (uint16_t)(i * 40503u + 12345u)
                                      : (uint16_t)encode(dt, consts[pattern]);
            }
            for (o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
                for (path = 0; path < PATH_COUNT; path++) {
                    call_reduce((reduce_path_t)path, d, a, b, n, dt, ops[o]);
                    for (i = 0; i < n; i++) {
                        check_elem(dt, ops[o], i, a[i], b[i], d[i],
                                   ref_elem(dt, ops[o], a[i], b[i]));
                    }
                }
            }
        }
    }
    free(d);
    free(b);
    free(a);
}

static void test_reduce_avg_scale(void **state)
{
    static const int divisors[] = {3, 7, 2, 1, 0};
    const size_t n = 37;
    size_t t, k, i;
    int path;

    (void)state;
    for (t = 0; t < sizeof(float_dtypes) / sizeof(float_dtypes[0]); t++) {
        const gs_dtype_t dt = float_dtypes[t];
        uint64_t a[37], b[37], buf[37], want[37];

        for (k = 0; k < sizeof(divisors) / sizeof(divisors[0]); k++) {
            for (path = 0; path < PATH_COUNT; path++) {
                /* a, b and buf hold n packed elements of dt. */
                for (i = 0; i < n; i++) {
                    store_bits(a, i, dt, random_elem(dt));
                    store_bits(b, i, dt, random_elem(dt));
                }
                for (i = 0; i < n; i++) {
                    const uint64_t sum =
                        ref_elem(dt, GS_OP_SUM, load_bits(a, i, dt), load_bits(b, i, dt));

                    want[i] =
                        (divisors[k] <= 1) ? sum : encode(dt, value_of(dt, sum) / divisors[k]);
                }
                /* AVG reduces as a plain sum; the scale divides once. */
                call_reduce((reduce_path_t)path, buf, a, b, n, dt, GS_OP_AVG);
                if (path == PATH_GENERIC) {
                    gs__reduce_scale_generic(buf, n, dt, divisors[k]);
                } else {
                    gs__reduce_scale(buf, n, dt, divisors[k]);
                }
                for (i = 0; i < n; i++) {
                    check_elem(dt, GS_OP_AVG, i, load_bits(a, i, dt), load_bits(b, i, dt),
                               load_bits(buf, i, dt), want[i]);
                }
            }
        }
    }
}

/* Every f16/bf16 code divided by a few divisors, both paths. */
static void test_reduce_half_scale_exhaustive(void **state)
{
    static const gs_dtype_t halves[] = {GS_DTYPE_F16, GS_DTYPE_BF16};
    static const int divisors[] = {2, 3, 7, 96};
    const size_t n = 65536;
    uint16_t *buf = malloc(n * sizeof(uint16_t));
    size_t h, k, i;
    int path;

    (void)state;
    assert_non_null(buf);
    for (h = 0; h < sizeof(halves) / sizeof(halves[0]); h++) {
        const gs_dtype_t dt = halves[h];

        for (k = 0; k < sizeof(divisors) / sizeof(divisors[0]); k++) {
            for (path = 0; path < PATH_COUNT; path++) {
                for (i = 0; i < n; i++) {
                    buf[i] = (uint16_t)i;
                }
                if (path == PATH_GENERIC) {
                    gs__reduce_scale_generic(buf, n, dt, divisors[k]);
                } else {
                    gs__reduce_scale(buf, n, dt, divisors[k]);
                }
                for (i = 0; i < n; i++) {
                    check_elem(dt, GS_OP_AVG, i, i, (uint64_t)divisors[k], buf[i],
                               encode(dt, value_of(dt, i) / divisors[k]));
                }
            }
        }
    }
    free(buf);
}

static void test_reduce_avg_scale_values(void **state)
{
    float f32[9] = {3.0f, 1.0f, -6.0f, 0.0f, -0.0f, 1e30f, INFINITY, 0x1p-149f, 2.0f};
    int32_t i32[3] = {9, -9, 3};
    uint16_t f16[9];
    size_t i;

    (void)state;
    for (i = 0; i < 9; i++) {
        f16[i] = gs__f32_to_f16(f32[i] > 6e4f ? 6e4f : f32[i]);
    }
    gs__reduce_scale(f32, 9, GS_DTYPE_F32, 3);
    assert_true(f32[0] == 1.0f);
    assert_true(f32[1] == 1.0f / 3.0f);
    assert_true(f32[2] == -2.0f);
    assert_true(signbit(f32[4]) != 0);
    assert_true(isinf(f32[6]));
    assert_true(f32[7] == 0.0f); /* smallest subnormal / 3 rounds to 0 */
    assert_true(f32[8] == 2.0f / 3.0f);
    gs__reduce_scale(f16, 9, GS_DTYPE_F16, 3);
    assert_int_equal(f16[0], 0x3c00);
    assert_int_equal(f16[1], gs__f32_to_f16(1.0f / 3.0f));
    assert_int_equal(f16[8], 0x3955); /* 2/3 rounded to nearest even */
    /* Integers are never scaled. */
    gs__reduce_scale(i32, 3, GS_DTYPE_I32, 3);
    assert_int_equal(i32[0], 9);
    assert_int_equal(i32[1], -9);
}

/* The bitwise ops on known patterns of every integer type, through the
 * dispatched and the generic entry points, in place too; floats refuse them. */
static void test_reduce_bitwise_values(void **state)
{
    const uint8_t ua[4] = {0xf0, 0x0f, 0xff, 0x00}, ub[4] = {0xcc, 0xcc, 0x5a, 0x5a};
    const int8_t ia[3] = {-1, -128, 0x55}, ib[3] = {0x3c, -1, -0x56};
    const int32_t wa[3] = {-1, INT32_MIN, 0x12345678}, wb[3] = {0x0f0f0f0f, -1, -0x12345679};
    const int64_t la[2] = {-1, INT64_MIN | 0xff}, lb[2] = {0x7fffffff00000001ll, 0xf0};
    uint8_t u[4];
    int8_t i8[3];
    int32_t i32[3];
    int64_t i64[2];

    (void)state;
    gs__reduce(u, ua, ub, 4, GS_DTYPE_U8, GS_OP_BAND);
    assert_int_equal(u[0], 0xc0);
    assert_int_equal(u[1], 0x0c);
    assert_int_equal(u[2], 0x5a);
    assert_int_equal(u[3], 0x00);
    gs__reduce_generic(u, ua, ub, 4, GS_DTYPE_U8, GS_OP_BOR);
    assert_int_equal(u[0], 0xfc);
    assert_int_equal(u[1], 0xcf);
    assert_int_equal(u[2], 0xff);
    assert_int_equal(u[3], 0x5a);
    memcpy(u, ua, sizeof(u));
    gs__reduce(u, u, ub, 4, GS_DTYPE_U8, GS_OP_BXOR); /* in place */
    assert_int_equal(u[0], 0x3c);
    assert_int_equal(u[1], 0xc3);
    assert_int_equal(u[2], 0xa5);
    assert_int_equal(u[3], 0x5a);

    gs__reduce(i8, ia, ib, 3, GS_DTYPE_I8, GS_OP_BAND);
    assert_int_equal(i8[0], 0x3c);
    assert_int_equal(i8[1], -128);
    assert_int_equal(i8[2], 0x55 & -0x56);
    gs__reduce(i8, ia, ib, 3, GS_DTYPE_I8, GS_OP_BXOR);
    assert_int_equal(i8[0], (int8_t)~0x3c);
    assert_int_equal(i8[1], 0x7f);
    assert_int_equal(i8[2], -1);

    gs__reduce(i32, wa, wb, 3, GS_DTYPE_I32, GS_OP_BOR);
    assert_int_equal(i32[0], -1);
    assert_int_equal(i32[1], -1);
    assert_int_equal(i32[2], -1);
    gs__reduce_generic(i32, wa, wb, 3, GS_DTYPE_I32, GS_OP_BAND);
    assert_int_equal(i32[0], 0x0f0f0f0f);
    assert_int_equal(i32[1], INT32_MIN);
    assert_int_equal(i32[2], 0);

    gs__reduce(i64, la, lb, 2, GS_DTYPE_I64, GS_OP_BAND);
    assert_true(i64[0] == 0x7fffffff00000001ll);
    assert_true(i64[1] == 0xf0);
    gs__reduce(i64, la, lb, 2, GS_DTYPE_I64, GS_OP_BXOR);
    assert_true(i64[0] == ~0x7fffffff00000001ll);
    assert_true(i64[1] == (int64_t)((uint64_t)INT64_MIN | 0x0f));

    for (gs_dtype_t dt = (gs_dtype_t)0; dt < GS_DTYPE_COUNT; dt++) {
        const int want = !gs__dtype_is_float(dt);

        assert_int_equal(gs__dtype_op_valid(dt, GS_OP_BAND), want);
        assert_int_equal(gs__dtype_op_valid(dt, GS_OP_BOR), want);
        assert_int_equal(gs__dtype_op_valid(dt, GS_OP_BXOR), want);
    }
    assert_int_equal(gs__op_is_bitwise(GS_OP_BXOR), 1);
    assert_int_equal(gs__op_is_bitwise(GS_OP_MAX), 0);
}

static void test_reduce_zero_length(void **state)
{
    gs_dtype_t dt;
    gs_op_t op;

    (void)state;
    /* n = 0 must not touch any pointer, even NULL ones. */
    for (dt = (gs_dtype_t)0; dt < GS_DTYPE_COUNT; dt++) {
        for (op = (gs_op_t)0; op < GS_OP_COUNT; op++) {
            gs__reduce(NULL, NULL, NULL, 0, dt, op);
            gs__reduce_generic(NULL, NULL, NULL, 0, dt, op);
        }
        gs__reduce_scale(NULL, 0, dt, 4);
        gs__reduce_scale_generic(NULL, 0, dt, 4);
    }
}

static void test_reduce_isa_name(void **state)
{
    const char *isa = gs__reduce_isa();

    (void)state;
    assert_non_null(isa);
    assert_true((strcmp(isa, "avx512") == 0) || (strcmp(isa, "avx2") == 0) ||
                (strcmp(isa, "generic") == 0));
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_REDUCE_TSAN 1
#endif
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__) &&                   \
    !defined(TEST_REDUCE_TSAN)
    /* Multiversioning is on for x86-64 except under TSan (see reduce_cpu.c). */
    if (__builtin_cpu_supports("avx2")) {
        assert_string_not_equal(isa, "generic");
    }
#endif
    print_message("reduce isa: %s\n", isa);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_f32_matches_reference),
        cmocka_unit_test(test_reduce_f64_matches_reference),
        cmocka_unit_test(test_reduce_f16_matches_reference),
        cmocka_unit_test(test_reduce_bf16_matches_reference),
        cmocka_unit_test(test_reduce_int_matches_reference),
        cmocka_unit_test(test_reduce_nan_propagation),
        cmocka_unit_test(test_reduce_half_snan_quieted),
        cmocka_unit_test(test_reduce_inf_minus_inf_is_nan),
        cmocka_unit_test(test_reduce_signed_zero_min_max),
        cmocka_unit_test(test_reduce_int_wraparound),
        cmocka_unit_test(test_reduce_half_halfway_rounding),
        cmocka_unit_test(test_reduce_half_exhaustive),
        cmocka_unit_test(test_reduce_avg_scale),
        cmocka_unit_test(test_reduce_half_scale_exhaustive),
        cmocka_unit_test(test_reduce_avg_scale_values),
        cmocka_unit_test(test_reduce_bitwise_values),
        cmocka_unit_test(test_reduce_zero_length),
        cmocka_unit_test(test_reduce_isa_name),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
