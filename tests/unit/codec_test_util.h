/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the tests/unit/test_codec_*.c files: a deterministic
 * normal generator, and encode / decode wrappers that size their own
 * buffers from gs_codec_encoded_size() and gs_codec_scratch_size().
 * Header-only (static functions), included by CMocka test files after
 * <cmocka.h>.
 */
#ifndef GS_TESTS_CODEC_TEST_UTIL_H
#define GS_TESTS_CODEC_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync/compress.h"

typedef struct codec_rng {
    uint64_t s;
} codec_rng_t;

static inline uint64_t codec_rng_next(codec_rng_t *r)
{
    /* splitmix64: deterministic, so failures reproduce. */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline double codec_rng_uniform(codec_rng_t *r)
{
    return ((double)(codec_rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Box-Muller standard normal. */
static inline double codec_rng_normal(codec_rng_t *r)
{
    const double u1 = codec_rng_uniform(r), u2 = codec_rng_uniform(r);

    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static inline float *codec_normal_vec(uint64_t seed, size_t n, double sigma)
{
    codec_rng_t r = {.s = seed};
    float *x = malloc((n > 0 ? n : 1) * sizeof(float));
    size_t i;

    assert_non_null(x);
    for (i = 0; i < n; i++) {
        x[i] = (float)(sigma * codec_rng_normal(&r));
    }
    return x;
}

/* A payload and the scratch to decode it. */
typedef struct codec_buf {
    uint8_t *payload;
    size_t len;
    size_t cap;
    void *scratch;
    size_t scratch_size;
} codec_buf_t;

static inline void codec_buf_init(codec_buf_t *b, const gs_codec_config_t *cfg, size_t n,
                                  gs_dtype_t dt)
{
    assert_int_equal(gs_codec_encoded_size(cfg, n, dt, &b->cap), GS_OK);
    assert_int_equal(gs_codec_scratch_size(cfg, n, dt, &b->scratch_size), GS_OK);
    b->payload = malloc(b->cap);
    b->scratch = (b->scratch_size > 0) ? malloc(b->scratch_size) : NULL;
    b->len = 0;
    assert_non_null(b->payload);
}

static inline void codec_buf_free(codec_buf_t *b)
{
    free(b->payload);
    free(b->scratch);
}

static inline void codec_encode_ok(const gs_codec_config_t *cfg, const void *x, size_t n,
                                   gs_dtype_t dt, gs_ef_t ef, codec_buf_t *b)
{
    assert_int_equal(gs_codec_encode(cfg, x, n, dt, ef, b->scratch, b->scratch_size, b->payload,
                                     b->cap, &b->len),
                     GS_OK);
    assert_true(b->len >= GS_CODEC_HEADER_BYTES);
    assert_true(b->len <= b->cap);
}

static inline void codec_decode_ok(const gs_codec_config_t *cfg, const codec_buf_t *b, size_t n,
                                   gs_dtype_t dt, void *y)
{
    assert_int_equal(
        gs_codec_decode(cfg, b->payload, b->len, n, dt, b->scratch, b->scratch_size, y), GS_OK);
}

static inline gs_codec_config_t codec_cfg(gs_codec_kind_t kind)
{
    gs_codec_config_t c = GS_CODEC_CONFIG_INIT;

    c.kind = kind;
    return c;
}

static inline double codec_norm2(const float *x, size_t n)
{
    double s = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        s += (double)x[i] * (double)x[i];
    }
    return sqrt(s);
}

static inline double codec_diff_norm2(const float *x, const float *y, size_t n)
{
    double s = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        const double d = (double)x[i] - (double)y[i];

        s += d * d;
    }
    return sqrt(s);
}

#endif /* GS_TESTS_CODEC_TEST_UTIL_H */
