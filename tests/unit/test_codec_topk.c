/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for top-k's one-pass paths (src/compress/codec_topk.c and the
 * collect kernel of codec_simd.c):
 *  - the collect kernel against a plain loop: every length 0..70 and long
 *    ones, bounds from 0 (every index) to above every key, the add stored
 *    bit for bit, and a list cut at its capacity (the count still exact);
 *  - the fused error-feedback encode (encode_ef) against add, encode and
 *    decode-accumulate with alpha -1 (same body, same residual bits), and
 *    both against the plain C select (gs__codec_force_scalar), over three
 *    steps, for k = 0, 1, a few, 1%, 30% and all of the elements, with NaN,
 *    inf, -0 and subnormal keys, heavy ties, all-equal magnitudes (the list
 *    overflows), a strided pattern that misleads the sample, and n from 0
 *    to 70 and past the sample's size;
 *  - gs__codec_topk_sum against decode-accumulating the payloads one by
 *    one into zeros (and the AVG multiply), bit for bit, with shared
 *    indices, NaN and -0 values, counts around its block size; and its
 *    checks: a bad header, zstd flag, body length, an index out of range
 *    or out of order in any payload is GS_ERR_PROTOCOL naming that payload,
 *    with dst untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "codec_test_util.h"
#include "compress/codec.h"

enum { IN_NORMAL, IN_SPECIALS, IN_TIES, IN_EQUAL, IN_STRIDED, IN_KINDS };

static float float_of(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

/* n floats of one of the IN_* kinds (deterministic in seed). */
static float *make_input(int kind, uint64_t seed, size_t n)
{
    static const uint32_t specials[] = {0x7fc00001u, 0xff800000u, 0x80000000u,
                                        0x00000001u, 0x7f800001u, 0x7f7fffffu,
                                        0xffc00000u, 0x807fffffu, 0x7f800000u};
    codec_rng_t r = {.s = seed};
    float *x = codec_normal_vec(seed, n, 2.0);

    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case IN_SPECIALS:
            if ((codec_rng_next(&r) % 7) == 0) {
                x[i] = float_of(specials[codec_rng_next(&r) % 9]);
            }
            break;
        case IN_TIES:
            x[i] = (float)((int)(codec_rng_next(&r) % 9) - 4) * 0.5f;
            break;
        case IN_EQUAL:
            x[i] = (codec_rng_next(&r) & 1) ? 0.75f : -0.75f;
            break;
        case IN_STRIDED:
            x[i] = (i % 16 == 0) ? 100.0f + (float)(i % 7) : 0.001f * (float)(i % 5);
            break;
        default:
            break;
        }
    }
    return x;
}

static size_t key_of(float f)
{
    return bits_of(f) & 0x7fffffffu;
}

/* ---- collect kernel ----------------------------------------------------- */

static void collect_case(size_t n, uint32_t lo, size_t cap, int with_add, uint64_t seed)
{
    float *a = make_input(IN_SPECIALS, seed, n), *b = make_input(IN_NORMAL, seed + 1, n);
    float *out = calloc(n + 1, sizeof(float)), *ref = calloc(n + 1, sizeof(float));
    uint8_t *cand = calloc(4 * cap + 4, 1);
    size_t m, want = 0;

    assert_true(out && ref && cand);
    m = gs__codec_topk_collect_simd(a, with_add ? b : NULL, with_add ? out : NULL, n, lo, cand,
                                    cap);
    for (size_t i = 0; i < n; i++) {
        float v = a[i];

        if (with_add) {
            v = a[i] + b[i];
            ref[i] = v;
        }
        if (key_of(v) >= lo) {
            if (want < cap) {
                uint32_t e;

                memcpy(&e, cand + 4 * want, 4);
                assert_int_equal(e, i);
            }
            want++;
        }
    }
    assert_int_equal(m, want);
    if (with_add && (memcmp(out, ref, n * sizeof(float)) != 0)) {
        fail_msg("collect n %zu: the stored sums differ from a[i] + b[i]", n);
    }
    free(a);
    free(b);
    free(out);
    free(ref);
    free(cand);
}

static void test_codec_topk_collect_kernel(void **state)
{
    static const uint32_t los[] = {0, 1, 0x3f800000u, 0x40000000u, 0x7f800000u, 0x7fffffffu};

    (void)state;
    if (!gs__codec_isa()) {
        skip(); /* the kernel runs only where the CPU has AVX2 */
    }
    for (size_t n = 0; n <= 70; n++) {
        for (size_t li = 0; li < sizeof(los) / sizeof(los[0]); li++) {
            collect_case(n, los[li], n + 1, (int)(li & 1), 10 + n);
            collect_case(n, los[li], n / 3, (int)((li + 1) & 1), 20 + n); /* cut list */
        }
    }
    collect_case(100003, 0x40000000u, 100003, 1, 3);
    collect_case(100003, 0x40000000u, 1000, 0, 4);
    collect_case(100003, 0x3f000000u, 50000, 1, 5);
}

/* ---- encode and fused error feedback ------------------------------------ */

/* Three steps of: fused encode_ef, the unfused sequence, and a plain C
 * encode of the unfused residual; all three must agree. */
static void ef_case(int kind, size_t n, double ratio, uint64_t seed)
{
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_TOPK);
    gs__codec_resolved_t rc;
    gs__codec_params_t p;
    float *x = make_input(kind, seed, n);
    float *r = calloc(n + 1, sizeof(float)), *ref = calloc(n + 1, sizeof(float));
    uint8_t *body, *body_ref, *body_plain;
    size_t bytes;

    cfg.ratio = ratio;
    assert_int_equal(gs__codec_resolve(&cfg, &rc), GS_OK);
    assert_int_equal(gs__codec_params(&rc, n, &p), GS_OK);
    assert_non_null(rc.ops->encode_ef);
    bytes = rc.ops->encoded_size(&p) + 1;
    body = calloc(bytes, 1);
    body_ref = calloc(bytes, 1);
    body_plain = calloc(bytes, 1);
    assert_true(r && ref && body && body_ref && body_plain);
    for (int step = 0; step < 3; step++) {
        assert_int_equal(rc.ops->encode_ef(&p, x, r, body), GS_OK);
        gs__ef_add_f32(ref, x, n);
        gs__codec_force_scalar = 1;
        assert_int_equal(rc.ops->encode(&p, ref, body_plain), GS_OK);
        gs__codec_force_scalar = 0;
        assert_int_equal(rc.ops->encode(&p, ref, body_ref), GS_OK);
        assert_int_equal(
            rc.ops->decode_accumulate(&p, body_ref, ref, GS_CODEC_MODE_ADD, gs__codec_minus_one),
            GS_OK);
        if (memcmp(body_ref, body_plain, bytes) != 0) {
            fail_msg("input %d n %zu ratio %g step %d: the kernels' selection differs from the "
                     "plain radix select",
                     kind, n, ratio, step);
        }
        if ((memcmp(body, body_ref, bytes) != 0) || (memcmp(r, ref, n * sizeof(float)) != 0)) {
            fail_msg("input %d n %zu ratio %g step %d: the fused encode differs from add + "
                     "encode + decode",
                     kind, n, ratio, step);
        }
    }
    free(x);
    free(r);
    free(ref);
    free(body);
    free(body_ref);
    free(body_plain);
}

static void test_codec_topk_fused_ef(void **state)
{
    static const double ratios[] = {1e-9, 0.01, 0.05, 0.3, 1.0};
    static const size_t sizes[] = {4096, 65536, 100003};

    (void)state;
    for (int kind = 0; kind < IN_KINDS; kind++) {
        for (size_t ri = 0; ri < sizeof(ratios) / sizeof(ratios[0]); ri++) {
            for (size_t n = 0; n <= 70; n++) {
                ef_case(kind, n, ratios[ri], 700 + n);
            }
            for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
                ef_case(kind, sizes[si], ratios[ri], 800 + si);
            }
        }
    }
    ef_case(IN_NORMAL, 1u << 20, 0.01, 9); /* past the sample's size */
    ef_case(IN_SPECIALS, 1u << 20, 0.01, 10);
}

/* ---- all-gather sum ----------------------------------------------------- */

typedef struct sum_fixture {
    gs_codec_config_t cfg;
    gs__codec_params_t p;
    size_t nb;
    codec_buf_t b[5];
    const uint8_t *payloads[5];
    size_t lens[5];
} sum_fixture_t;

/* nb payloads of n elements whose indices overlap (every body keeps the
 * large values at shared positions), NaN and -0 values included. */
static void sum_setup(sum_fixture_t *f, size_t n, size_t nb, double ratio)
{
    gs__codec_resolved_t rc;

    f->cfg = codec_cfg(GS_CODEC_TOPK);
    f->cfg.ratio = ratio;
    f->nb = nb;
    assert_int_equal(gs__codec_resolve(&f->cfg, &rc), GS_OK);
    assert_int_equal(gs__codec_params(&rc, n, &f->p), GS_OK);
    for (size_t q = 0; q < nb; q++) {
        float *x = make_input((q % 2) ? IN_SPECIALS : IN_NORMAL, 900 + q, n);

        for (size_t i = 0; i < n; i += 5) {
            x[i] = (i % 10 == 0) ? 50.0f + (float)q : -50.0f - (float)q;
        }
        if (n > 3) {
            x[3] = float_of(0x80000000u); /* -0: kept only when k is large */
        }
        codec_buf_init(&f->b[q], &f->cfg, n, GS_DTYPE_F32);
        codec_encode_ok(&f->cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &f->b[q]);
        f->payloads[q] = f->b[q].payload;
        f->lens[q] = f->b[q].len;
        free(x);
    }
}

static void sum_teardown(sum_fixture_t *f)
{
    for (size_t q = 0; q < f->nb; q++) {
        codec_buf_free(&f->b[q]);
    }
}

static void sum_case(size_t n, size_t nb, double ratio, int avg)
{
    sum_fixture_t f;
    float *ref = calloc(n + 1, sizeof(float)), *dst = malloc((n + 1) * sizeof(float));
    const float inv = 1.0f / (float)nb;
    size_t cursor[5], bad = 99;
    char why[192];

    assert_true(ref && dst);
    sum_setup(&f, n, nb, ratio);
    for (size_t q = 0; q < nb; q++) {
        assert_int_equal(gs_codec_decode_accumulate(&f.cfg, f.payloads[q], f.lens[q], n,
                                                    GS_DTYPE_F32, NULL, 0, ref),
                         GS_OK);
    }
    for (size_t i = 0; avg && (i < n); i++) {
        ref[i] *= inv;
    }
    memset(dst, 0x5a, (n + 1) * sizeof(float));
    assert_int_equal(gs__codec_topk_sum(&f.p, f.payloads, f.lens, nb, avg ? &inv : NULL, dst,
                                        cursor, &bad, why, sizeof(why)),
                     GS_OK);
    if (memcmp(dst, ref, n * sizeof(float)) != 0) {
        for (size_t i = 0; i < n; i++) {
            if (bits_of(dst[i]) != bits_of(ref[i])) {
                print_message("first difference at %zu: 0x%08x, expected 0x%08x\n", i,
                              (unsigned)bits_of(dst[i]), (unsigned)bits_of(ref[i]));
                for (size_t q = 0; q < nb; q++) { /* what each payload holds there */
                    const uint8_t *bb = f.payloads[q] + GS_CODEC_HEADER_BYTES;

                    for (size_t j = 0; j < f.p.param; j++) {
                        uint32_t e, vb;

                        memcpy(&e, bb + 4 * j, 4);
                        memcpy(&vb, bb + 4 * f.p.param + 4 * j, 4);
                        if (e == i) {
                            print_message("  payload %zu: 0x%08x\n", q, (unsigned)vb);
                        }
                    }
                }
                break;
            }
        }
        fail_msg("topk sum n %zu nb %zu ratio %g avg %d differs from decode-accumulate", n, nb,
                 ratio, avg);
    }
    assert_int_equal(bits_of(dst[n]), 0x5a5a5a5au); /* nothing past count */
    sum_teardown(&f);
    free(ref);
    free(dst);
}

static void test_codec_topk_sum_matches_decode(void **state)
{
    static const size_t counts[] = {1, 2, 7, 4095, 4096, 4097, 10007, 65536};

    (void)state;
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        for (size_t nb = 1; nb <= 5; nb += 2) {
            sum_case(counts[ci], nb, 0.01, 0);
            sum_case(counts[ci], nb, 0.3, 1);
            sum_case(counts[ci], nb, 1.0, 1);
        }
    }
}

/* Corrupt payload 1 of 3 with @p fn; the sum must fail naming payload 1
 * and leave dst as it was. */
static void sum_reject(void (*fn)(uint8_t *payload, size_t *len, size_t k), const char *what)
{
    const size_t n = 5000;
    sum_fixture_t f;
    uint8_t *copy;
    float *dst = malloc(n * sizeof(float));
    size_t cursor[5], bad = 99, len;
    char why[192] = "";

    assert_non_null(dst);
    sum_setup(&f, n, 3, 0.02);
    len = f.lens[1];
    copy = malloc(len + 8);
    assert_non_null(copy);
    memcpy(copy, f.payloads[1], len);
    fn(copy, &len, f.p.param);
    f.payloads[1] = copy;
    f.lens[1] = len;
    memset(dst, 0x5a, n * sizeof(float));
    assert_int_equal(
        gs__codec_topk_sum(&f.p, f.payloads, f.lens, 3, NULL, dst, cursor, &bad, why, sizeof(why)),
        GS_ERR_PROTOCOL);
    assert_int_equal(bad, 1);
    if (why[0] == '\0') {
        fail_msg("%s: no reason given", what);
    }
    for (size_t i = 0; i < n; i++) {
        if (bits_of(dst[i]) != 0x5a5a5a5au) {
            fail_msg("%s: dst written before the payloads were checked", what);
        }
    }
    sum_teardown(&f);
    free(copy);
    free(dst);
}

static void corrupt_magic(uint8_t *p, size_t *len, size_t k)
{
    (void)len, (void)k;
    p[0] ^= 1;
}

static void corrupt_zstd_flag(uint8_t *p, size_t *len, size_t k)
{
    (void)len, (void)k;
    p[6] |= GS_CODEC_WIRE_FLAG_ZSTD;
}

static void corrupt_short(uint8_t *p, size_t *len, size_t k)
{
    const uint64_t body = (uint64_t)(*len - GS_CODEC_HEADER_BYTES - 4);

    (void)k;
    *len -= 4; /* consistent header, body too short for k pairs */
    memcpy(p + 24, &body, sizeof(body));
}

static void corrupt_index_range(uint8_t *p, size_t *len, size_t k)
{
    const uint32_t big = 5000;

    (void)len;
    memcpy(p + GS_CODEC_HEADER_BYTES + 4 * (k - 1), &big, 4);
}

static void corrupt_index_order(uint8_t *p, size_t *len, size_t k)
{
    uint8_t *idx = p + GS_CODEC_HEADER_BYTES;
    uint8_t t[4];

    (void)len;
    memcpy(t, idx + 4 * (k / 2), 4);
    memcpy(idx + 4 * (k / 2), idx + 4 * (k / 2 + 1), 4);
    memcpy(idx + 4 * (k / 2 + 1), t, 4);
}

static void test_codec_topk_sum_rejects(void **state)
{
    (void)state;
    sum_reject(corrupt_magic, "bad magic");
    sum_reject(corrupt_zstd_flag, "zstd flag");
    sum_reject(corrupt_short, "short body");
    sum_reject(corrupt_index_range, "index out of range");
    sum_reject(corrupt_index_order, "indices out of order");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_topk_collect_kernel),
        cmocka_unit_test(test_codec_topk_fused_ef),
        cmocka_unit_test(test_codec_topk_sum_matches_decode),
        cmocka_unit_test(test_codec_topk_sum_rejects),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
