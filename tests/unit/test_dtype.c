/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for src/core/dtype.c: dtype/op names, sizes and parsing, and
 * the f16/bf16 <-> f32 conversions. Every f16 and bf16 bit pattern is
 * decoded and round-tripped; f32 -> f16/bf16 rounding is checked against an
 * independent reference that works in double (nearest of the two
 * neighbouring representable values, ties to the even code) on every
 * halfway point, its neighbours, subnormals, overflow and random inputs.
 * That reference is the tree's one independent oracle of the rounding: the
 * other tests and gs-bench convert with the library's own
 * math/half_math.h (through tests/common/tc_coll_data.h) and rely on this
 * file for its correctness, so keep it apart from that code.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/dtype.h"

#define F16_INF_CODE 0x7c00u
#define F16_MAX_FINITE 0x7bffu

static uint32_t f32_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint64_t prng_state = 0x9e3779b97f4a7c15ull;

static uint32_t prng_next(void)
{
    /* xorshift64*: deterministic, so failures reproduce. */
    prng_state ^= prng_state >> 12;
    prng_state ^= prng_state << 25;
    prng_state ^= prng_state >> 27;
    return (uint32_t)((prng_state * 0x2545f4914f6cdd1dull) >> 32);
}

/* Reference f16 decode straight from the format definition. */
static double ref_f16_value(uint16_t h)
{
    const int exp = (h >> 10) & 0x1f;
    const int mant = h & 0x3ff;
    const double sign = ((h & 0x8000u) != 0) ? -1.0 : 1.0;

    if (exp == 0x1f) {
        return (mant == 0) ? sign * INFINITY : NAN;
    }
    if (exp == 0) {
        return sign * ldexp((double)mant, -24);
    }
    return sign * ldexp((double)(1024 + mant), exp - 25);
}

/* Magnitudes of the codes 0 .. 0x7bff, then 65536 standing for "one past the
 * largest finite value": IEEE rounds to inf exactly when that is nearer. */
static double f16_mag[F16_INF_CODE + 1];

static void init_f16_mag(void)
{
    uint32_t k;

    for (k = 0; k <= F16_MAX_FINITE; k++) {
        f16_mag[k] = ref_f16_value((uint16_t)k);
    }
    f16_mag[F16_INF_CODE] = 65536.0;
}

/* Pick between two neighbouring codes lo < hi for magnitude x, ties to even. */
static uint32_t ref_pick(double x, double lo_val, double hi_val, uint32_t lo, uint32_t hi)
{
    const double d_lo = x - lo_val;
    const double d_hi = hi_val - x;

    if (d_lo < d_hi) {
        return lo;
    }
    if (d_hi < d_lo) {
        return hi;
    }
    return ((lo & 1u) == 0) ? lo : hi;
}

static uint16_t ref_f32_to_f16(float f)
{
    const double x = fabs((double)f);
    const uint32_t sign = (signbit(f) != 0) ? 0x8000u : 0;
    uint32_t lo = 0, hi = F16_INF_CODE;

    if (isnan(f)) {
        return 0x7e00; /* Only the NaN class is compared. */
    }
    if (x >= f16_mag[F16_INF_CODE]) {
        return (uint16_t)(sign | F16_INF_CODE);
    }
    /* Binary search: f16_mag[lo] <= x < f16_mag[hi]. */
    while (hi - lo > 1) {
        const uint32_t mid = (lo + hi) / 2;

        if (f16_mag[mid] <= x) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return (uint16_t)(sign | ref_pick(x, f16_mag[lo], f16_mag[hi], lo, hi));
}

static uint16_t ref_f32_to_bf16(float f)
{
    const uint32_t u = f32_bits(f);
    const uint32_t sign = u & 0x80000000u;
    const uint32_t lo = (u & 0x7fffffffu) >> 16;
    const double x = fabs((double)f);
    double hi_val;

    if (isnan(f)) {
        return 0x7fc0;
    }
    if ((u & 0xffffu) == 0) {
        return (uint16_t)(u >> 16);
    }
    /* Truncation lo is below x; the next code up is lo + 1, whose value is
     * 2^128 when lo is the largest finite bf16 (so overflow rounds to inf). */
    hi_val = (lo + 1u == 0x7f80u) ? ldexp(1.0, 128) : (double)f32_from_bits((lo + 1u) << 16);
    return (uint16_t)((sign >> 16) |
                      ref_pick(x, (double)f32_from_bits(lo << 16), hi_val, lo, lo + 1u));
}

static int f16_is_nan(uint16_t h)
{
    return ((h & 0x7c00u) == 0x7c00u) && ((h & 0x3ffu) != 0);
}

static int bf16_is_nan(uint16_t h)
{
    return ((h & 0x7f80u) == 0x7f80u) && ((h & 0x7fu) != 0);
}

/* Compare one f32 -> f16 conversion with the reference (NaN: class + sign). */
static void check_f16(float f)
{
    const uint16_t got = gs__f32_to_f16(f);

    if (isnan(f)) {
        assert_true(f16_is_nan(got));
        assert_int_equal(got & 0x8000u, (f32_bits(f) >> 16) & 0x8000u);
        return;
    }
    if (got != ref_f32_to_f16(f)) {
        print_error("f32 0x%08x -> f16 0x%04x, expected 0x%04x\n", (unsigned)f32_bits(f),
                    (unsigned)got, (unsigned)ref_f32_to_f16(f));
    }
    assert_int_equal(got, ref_f32_to_f16(f));
}

static void check_bf16(float f)
{
    const uint16_t got = gs__f32_to_bf16(f);

    if (isnan(f)) {
        assert_true(bf16_is_nan(got));
        assert_int_equal(got & 0x8000u, (f32_bits(f) >> 16) & 0x8000u);
        return;
    }
    if (got != ref_f32_to_bf16(f)) {
        print_error("f32 0x%08x -> bf16 0x%04x, expected 0x%04x\n", (unsigned)f32_bits(f),
                    (unsigned)got, (unsigned)ref_f32_to_bf16(f));
    }
    assert_int_equal(got, ref_f32_to_bf16(f));
}

static void test_dtype_f16_decode_exhaustive(void **state)
{
    uint32_t h;

    (void)state;
    for (h = 0; h <= 0xffffu; h++) {
        const float f = gs__f16_to_f32((uint16_t)h);
        const double ref = ref_f16_value((uint16_t)h);

        if (f16_is_nan((uint16_t)h)) {
            assert_true(isnan(f));
            /* Quiet, same sign, payload kept (F16C's rule). */
            assert_int_equal(f32_bits(f),
                             (((h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x3ffu) << 13)));
        } else {
            assert_true((double)f == ref);
            assert_int_equal(signbit(f) != 0, (h & 0x8000u) != 0);
        }
    }
}

static void test_dtype_f16_roundtrip_exhaustive(void **state)
{
    uint32_t h;

    (void)state;
    for (h = 0; h <= 0xffffu; h++) {
        const uint16_t back = gs__f32_to_f16(gs__f16_to_f32((uint16_t)h));

        if (f16_is_nan((uint16_t)h)) {
            /* A NaN stays a NaN: same sign and payload, quiet bit set. */
            assert_int_equal(back, h | 0x200u);
        } else {
            assert_int_equal(back, h);
        }
    }
}

static void test_dtype_bf16_roundtrip_exhaustive(void **state)
{
    uint32_t h;

    (void)state;
    for (h = 0; h <= 0xffffu; h++) {
        const float f = gs__bf16_to_f32((uint16_t)h);
        const uint16_t back = gs__f32_to_bf16(f);

        assert_int_equal(f32_bits(f), h << 16);
        if (bf16_is_nan((uint16_t)h)) {
            assert_true(isnan(f));
            assert_int_equal(back, h | 0x40u);
        } else {
            assert_int_equal(back, h);
        }
    }
}

/* Every f16 value, the halfway point to its successor, and the floats
 * just around both, with both signs. */
static void test_dtype_f32_to_f16_rounding(void **state)
{
    uint32_t k, i;

    (void)state;
    for (k = 0; k < F16_INF_CODE; k++) {
        const float v = (float)f16_mag[k];
        const float mid = (float)((f16_mag[k] + f16_mag[k + 1]) / 2.0);
        const float probes[] = {v,   nextafterf(v, 0.0f),   nextafterf(v, INFINITY),
                                mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};

        /* The midpoint of two neighbours always fits in f32 exactly. */
        assert_true((double)mid == (f16_mag[k] + f16_mag[k + 1]) / 2.0);
        for (i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
            check_f16(probes[i]);
            check_f16(-probes[i]);
        }
    }
    /* Named edges: -0, halfway ties, overflow, f16 subnormal limits. */
    check_f16(-0.0f);
    assert_int_equal(gs__f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(gs__f32_to_f16(1.0f + 0x1p-11f), 0x3c00);     /* tie to even, down */
    assert_int_equal(gs__f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02); /* tie to even, up */
    assert_int_equal(gs__f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(gs__f32_to_f16(65519.996f), 0x7bff);
    assert_int_equal(gs__f32_to_f16(65520.0f), 0x7c00); /* tie goes to inf */
    assert_int_equal(gs__f32_to_f16(1e10f), 0x7c00);
    assert_int_equal(gs__f32_to_f16(-INFINITY), 0xfc00);
    assert_int_equal(gs__f32_to_f16(0x1p-24f), 0x0001); /* smallest subnormal */
    assert_int_equal(gs__f32_to_f16(0x1p-25f), 0x0000); /* tie to even zero */
    assert_int_equal(gs__f32_to_f16(0x1.000002p-25f), 0x0001);
    assert_int_equal(gs__f32_to_f16(3 * 0x1p-25f), 0x0002);        /* tie to even, up */
    assert_int_equal(gs__f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400); /* rounds to normal */
    assert_int_equal(gs__f32_to_f16(0x1p-149f), 0x0000);           /* f32 subnormal */
    assert_int_equal(gs__f32_to_f16(-0x1p-149f), 0x8000);
    assert_true(f16_is_nan(gs__f32_to_f16(f32_from_bits(0x7f800001u)))); /* low payload */
    assert_int_equal(gs__f32_to_f16(f32_from_bits(0xffc00000u)), 0xfe00);
    /* Random bit patterns over the whole f32 range. */
    for (i = 0; i < 200000; i++) {
        check_f16(f32_from_bits(prng_next()));
        /* and ones concentrated in the f16 range (exponents 100 .. 143). */
        check_f16(f32_from_bits((prng_next() & 0x807fffffu) | ((100u + prng_next() % 44u) << 23)));
    }
}

/* Every bf16 code with the dropped 16 bits at each interesting value. */
static void test_dtype_f32_to_bf16_rounding(void **state)
{
    static const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
    uint32_t h, i;

    (void)state;
    for (h = 0; h <= 0xffffu; h++) {
        for (i = 0; i < sizeof(lows) / sizeof(lows[0]); i++) {
            check_bf16(f32_from_bits((h << 16) | lows[i]));
        }
        check_bf16(f32_from_bits((h << 16) | (prng_next() & 0xffffu)));
    }
    assert_int_equal(gs__f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);     /* tie to even, down */
    assert_int_equal(gs__f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82); /* tie to even, up */
    assert_int_equal(gs__f32_to_bf16(-0.0f), 0x8000);
    assert_int_equal(gs__f32_to_bf16(f32_from_bits(0x7f7fffffu)), 0x7f80); /* overflow to inf */
    assert_int_equal(gs__f32_to_bf16(f32_from_bits(0x7f7f7fffu)), 0x7f7f);
    assert_int_equal(gs__f32_to_bf16(INFINITY), 0x7f80);
    /* NaNs whose payload sits in the dropped bits must not become inf,
     * and 0x7fffffff must not carry into the sign. */
    assert_int_equal(gs__f32_to_bf16(f32_from_bits(0x7f800001u)), 0x7fc0);
    assert_int_equal(gs__f32_to_bf16(f32_from_bits(0xff800001u)), 0xffc0);
    assert_int_equal(gs__f32_to_bf16(f32_from_bits(0x7fffffffu)), 0x7fff);
    assert_int_equal(gs__f32_to_bf16(f32_from_bits(0x7fc00000u)), 0x7fc0);
    assert_int_equal(gs__f32_to_bf16(0x1p-149f), 0x0000);                  /* f32 subnormal */
    assert_int_equal(gs__f32_to_bf16(f32_from_bits(0x00008000u)), 0x0000); /* tie to even */
    assert_int_equal(gs__f32_to_bf16(f32_from_bits(0x00018000u)), 0x0002);
}

static void test_dtype_names_roundtrip(void **state)
{
    gs_dtype_t dt, parsed;
    gs_op_t op, parsed_op;

    (void)state;
    for (dt = (gs_dtype_t)0; dt < GS_DTYPE_COUNT; dt++) {
        assert_int_equal(gs__dtype_parse(gs__dtype_name(dt), &parsed), 0);
        assert_int_equal(parsed, dt);
    }
    for (op = (gs_op_t)0; op < GS_OP_COUNT; op++) {
        assert_int_equal(gs__op_parse(gs__op_name(op), &parsed_op), 0);
        assert_int_equal(parsed_op, op);
    }
    assert_string_equal(gs__dtype_name(GS_DTYPE_BF16), "bf16");
    assert_string_equal(gs__dtype_name(GS_DTYPE_COUNT), "unknown");
    assert_string_equal(gs__op_name(GS_OP_AVG), "avg");
    assert_string_equal(gs__op_name(GS_OP_COUNT), "unknown");
}

static void test_dtype_parse_aliases(void **state)
{
    static const struct {
        const char *s;
        gs_dtype_t dt;
    } cases[] = {
        {"f32", GS_DTYPE_F32},  {"float", GS_DTYPE_F32},  {"float32", GS_DTYPE_F32},
        {"f64", GS_DTYPE_F64},  {"double", GS_DTYPE_F64}, {"f16", GS_DTYPE_F16},
        {"half", GS_DTYPE_F16}, {"bf16", GS_DTYPE_BF16},  {"i8", GS_DTYPE_I8},
        {"int8", GS_DTYPE_I8},  {"u8", GS_DTYPE_U8},      {"uint8", GS_DTYPE_U8},
        {"i32", GS_DTYPE_I32},  {"int", GS_DTYPE_I32},    {"int32", GS_DTYPE_I32},
        {"i64", GS_DTYPE_I64},  {"int64", GS_DTYPE_I64},
    };
    static const char *const bad[] = {"", "F32", "fp32", "f32 ", "float128", "i16", "Sum"};
    gs_dtype_t dt = GS_DTYPE_COUNT;
    gs_op_t op = GS_OP_COUNT;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        dt = GS_DTYPE_COUNT;
        assert_int_equal(gs__dtype_parse(cases[i].s, &dt), 0);
        assert_int_equal(dt, cases[i].dt);
    }
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        dt = GS_DTYPE_COUNT;
        assert_int_equal(gs__dtype_parse(bad[i], &dt), -1);
        assert_int_equal(dt, GS_DTYPE_COUNT); /* untouched on failure */
        assert_int_equal(gs__op_parse(bad[i], &op), -1);
    }
    assert_int_equal(gs__dtype_parse(NULL, &dt), -1);
    assert_int_equal(gs__dtype_parse("f32", NULL), -1);
    assert_int_equal(gs__op_parse("sum", &op), 0);
    assert_int_equal(op, GS_OP_SUM);
    assert_int_equal(gs__op_parse("prod", &op), 0);
    assert_int_equal(op, GS_OP_PROD);
    assert_int_equal(gs__op_parse("min", &op), 0);
    assert_int_equal(op, GS_OP_MIN);
    assert_int_equal(gs__op_parse("max", &op), 0);
    assert_int_equal(op, GS_OP_MAX);
    assert_int_equal(gs__op_parse("avg", &op), 0);
    assert_int_equal(op, GS_OP_AVG);
    assert_int_equal(gs__op_parse("band", &op), 0);
    assert_int_equal(op, GS_OP_BAND);
    assert_int_equal(gs__op_parse("bor", &op), 0);
    assert_int_equal(op, GS_OP_BOR);
    assert_int_equal(gs__op_parse("bxor", &op), 0);
    assert_int_equal(op, GS_OP_BXOR);
    assert_int_equal(gs__op_parse("mean", &op), -1);
    assert_int_equal(gs__op_parse(NULL, &op), -1);
}

static void test_dtype_size_and_validity(void **state)
{
    gs_dtype_t dt;

    (void)state;
    assert_int_equal(gs__dtype_size(GS_DTYPE_F32), 4);
    assert_int_equal(gs__dtype_size(GS_DTYPE_F64), 8);
    assert_int_equal(gs__dtype_size(GS_DTYPE_F16), 2);
    assert_int_equal(gs__dtype_size(GS_DTYPE_BF16), 2);
    assert_int_equal(gs__dtype_size(GS_DTYPE_I8), 1);
    assert_int_equal(gs__dtype_size(GS_DTYPE_U8), 1);
    assert_int_equal(gs__dtype_size(GS_DTYPE_I32), 4);
    assert_int_equal(gs__dtype_size(GS_DTYPE_I64), 8);
    assert_int_equal(gs__dtype_size(GS_DTYPE_COUNT), 0);
    assert_int_equal(gs__dtype_size((gs_dtype_t)-1), 0);
    for (dt = (gs_dtype_t)0; dt < GS_DTYPE_COUNT; dt++) {
        const int is_float = (dt == GS_DTYPE_F32) || (dt == GS_DTYPE_F64) || (dt == GS_DTYPE_F16) ||
                             (dt == GS_DTYPE_BF16);

        assert_int_equal(gs__dtype_is_float(dt), is_float);
        assert_int_equal(gs__dtype_op_valid(dt, GS_OP_SUM), 1);
        assert_int_equal(gs__dtype_op_valid(dt, GS_OP_PROD), 1);
        assert_int_equal(gs__dtype_op_valid(dt, GS_OP_MIN), 1);
        assert_int_equal(gs__dtype_op_valid(dt, GS_OP_MAX), 1);
        assert_int_equal(gs__dtype_op_valid(dt, GS_OP_AVG), is_float);
        assert_int_equal(gs__dtype_op_valid(dt, GS_OP_BAND), !is_float);
        assert_int_equal(gs__dtype_op_valid(dt, GS_OP_BOR), !is_float);
        assert_int_equal(gs__dtype_op_valid(dt, GS_OP_BXOR), !is_float);
        assert_int_equal(gs__dtype_op_valid(dt, GS_OP_COUNT), 0);
    }
    assert_int_equal(gs__dtype_is_float(GS_DTYPE_COUNT), 0);
    assert_int_equal(gs__dtype_op_valid(GS_DTYPE_COUNT, GS_OP_SUM), 0);
    assert_int_equal(gs__dtype_op_valid((gs_dtype_t)-1, GS_OP_SUM), 0);
    assert_int_equal(gs__dtype_op_valid(GS_DTYPE_F32, (gs_op_t)-1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_f16_decode_exhaustive),
        cmocka_unit_test(test_dtype_f16_roundtrip_exhaustive),
        cmocka_unit_test(test_dtype_bf16_roundtrip_exhaustive),
        cmocka_unit_test(test_dtype_f32_to_f16_rounding),
        cmocka_unit_test(test_dtype_f32_to_bf16_rounding),
        cmocka_unit_test(test_dtype_names_roundtrip),
        cmocka_unit_test(test_dtype_parse_aliases),
        cmocka_unit_test(test_dtype_size_and_validity),
    };

    init_f16_mag();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
