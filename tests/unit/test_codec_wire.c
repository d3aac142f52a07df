/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the payload header (src/compress/codec_wire.c), the zstd
 * stage (zstd_wrap.c) and the argument checks of codec_api.c. Malformed
 * payloads of every codec (each header byte changed, every truncation, an
 * extra byte, bad topk indices, broken zstd frames, a zstd payload under a
 * zstd-off configuration) must fail with GS_ERR_PROTOCOL and leave the
 * output untouched; bad configurations fail with GS_ERR_INVALID_ARG. In a
 * build without zstd (GS_WITH_ZSTD off) the zstd cases are left out and the
 * stage must be refused with GS_ERR_UNSUPPORTED and a sentence.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "codec_test_util.h"
#include "compress/codec.h"
#include "gradsync/gradsync.h"

#define N 300
#define SENTINEL 7.25f

static gs_status_t try_decode(const gs_codec_config_t *cfg, const uint8_t *p, size_t len,
                              const codec_buf_t *b, float *y)
{
    size_t i;
    gs_status_t s;

    for (i = 0; i < N; i++) {
        y[i] = SENTINEL;
    }
    s = gs_codec_decode_accumulate(cfg, p, len, N, GS_DTYPE_F32, b->scratch, b->scratch_size, y);
    if (s != GS_OK) {
        for (i = 0; i < N; i++) {
            assert_true(y[i] == SENTINEL); /* untouched on error */
        }
    }
    return s;
}

/* The zstd modes a build has: off, and on where libzstd was built in. */
#ifdef GS_WITH_ZSTD
#define NUM_ZSTD_MODES 2
#else
#define NUM_ZSTD_MODES 1
#endif

static void test_codec_wire_malformed_rejected(void **state)
{
    static const gs_codec_zstd_t modes[] = {GS_CODEC_ZSTD_OFF, GS_CODEC_ZSTD_ON};
    float *x = codec_normal_vec(1, N, 1.0), y[N];
    int kind, m;
    size_t i;

    (void)state;
    for (kind = 0; kind < GS_CODEC_KIND_COUNT; kind++) {
        for (m = 0; m < NUM_ZSTD_MODES; m++) {
            gs_codec_config_t cfg = codec_cfg((gs_codec_kind_t)kind);
            codec_buf_t b;
            uint8_t *bad;

            cfg.zstd = modes[m];
            cfg.ratio = 0.1;
            codec_buf_init(&b, &cfg, N, GS_DTYPE_F32);
            codec_encode_ok(&cfg, x, N, GS_DTYPE_F32, GS_EF_NULL, &b);
            assert_int_equal(try_decode(&cfg, b.payload, b.len, &b, y), GS_OK);
            bad = malloc(b.len + 1);
            assert_non_null(bad);
            /* Every header byte changed. */
            for (i = 0; i < GS_CODEC_HEADER_BYTES; i++) {
                memcpy(bad, b.payload, b.len);
                bad[i] ^= 0x41;
                assert_int_equal(try_decode(&cfg, bad, b.len, &b, y), GS_ERR_PROTOCOL);
            }
            /* Every truncation, and one byte too many. */
            for (i = 0; i < b.len; i++) {
                assert_int_equal(try_decode(&cfg, b.payload, i, &b, y), GS_ERR_PROTOCOL);
            }
            memcpy(bad, b.payload, b.len);
            bad[b.len] = 0;
            assert_int_equal(try_decode(&cfg, bad, b.len + 1, &b, y), GS_ERR_PROTOCOL);
            /* Another count or configuration than the payload's. */
            assert_int_equal(gs_codec_decode(&cfg, b.payload, b.len, N - 1, GS_DTYPE_F32, b.scratch,
                                             b.scratch_size, y),
                             GS_ERR_PROTOCOL);
            if ((gs__codec_lookup(cfg.kind)->flags & GS_CODEC_F_BLOCKED) != 0) {
                gs_codec_config_t other = cfg;

                other.block_size = 128;
                assert_int_equal(try_decode(&other, b.payload, b.len, &b, y), GS_ERR_PROTOCOL);
            }
            if (m == 1) {
                gs_codec_config_t off = cfg;

                off.zstd = GS_CODEC_ZSTD_OFF;
                assert_int_equal(try_decode(&off, b.payload, b.len, &b, y), GS_ERR_PROTOCOL);
            }
            free(bad);
            codec_buf_free(&b);
        }
    }
    free(x);
}

static void put_index(uint8_t *payload, size_t j, uint32_t idx)
{
    memcpy(payload + GS_CODEC_HEADER_BYTES + 4 * j, &idx, sizeof(idx));
}

static void test_codec_wire_topk_bad_indices(void **state)
{
    float *x = codec_normal_vec(2, N, 1.0), y[N];
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_TOPK);
    codec_buf_t b;
    uint8_t *p;

    (void)state;
    cfg.ratio = 0.1; /* k = 30 */
    codec_buf_init(&b, &cfg, N, GS_DTYPE_F32);
    codec_encode_ok(&cfg, x, N, GS_DTYPE_F32, GS_EF_NULL, &b);
    p = malloc(b.len);
    assert_non_null(p);
    memcpy(p, b.payload, b.len);
    put_index(p, 29, N); /* out of range */
    assert_int_equal(try_decode(&cfg, p, b.len, &b, y), GS_ERR_PROTOCOL);
    put_index(p, 29, 0xffffffffu);
    assert_int_equal(try_decode(&cfg, p, b.len, &b, y), GS_ERR_PROTOCOL);
    memcpy(p, b.payload, b.len);
    memcpy(p + GS_CODEC_HEADER_BYTES + 4 * 5, p + GS_CODEC_HEADER_BYTES + 4 * 4, 4); /* dup */
    assert_int_equal(try_decode(&cfg, p, b.len, &b, y), GS_ERR_PROTOCOL);
    memcpy(p, b.payload, b.len);
    put_index(p, 0, N - 1); /* descending */
    assert_int_equal(try_decode(&cfg, p, b.len, &b, y), GS_ERR_PROTOCOL);
    free(p);
    codec_buf_free(&b);
    free(x);
}

/* auto keeps zstd only when it saves >= 10%: zeros shrink, noise does not. */
static void test_codec_wire_zstd_auto(void **state)
{
#ifndef GS_WITH_ZSTD
    (void)state;
    skip(); /* built without zstd: test_codec_wire_zstd_unsupported */
#else
    float *noise = codec_normal_vec(3, 4096, 1.0), *zeros = calloc(4096, 4), *y = malloc(4096 * 4);
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_NONE);
    codec_buf_t b;

    (void)state;
    assert_non_null(zeros);
    assert_non_null(y);
    cfg.zstd = GS_CODEC_ZSTD_AUTO;
    codec_buf_init(&b, &cfg, 4096, GS_DTYPE_F32);
    assert_int_equal(b.cap, GS_CODEC_HEADER_BYTES + 4096 * 4);
    codec_encode_ok(&cfg, zeros, 4096, GS_DTYPE_F32, GS_EF_NULL, &b);
    assert_true((b.payload[6] & GS_CODEC_WIRE_FLAG_ZSTD) != 0);
    assert_true(b.len < 200);
    codec_decode_ok(&cfg, &b, 4096, GS_DTYPE_F32, y);
    assert_memory_equal(y, zeros, 4096 * 4);
    codec_encode_ok(&cfg, noise, 4096, GS_DTYPE_F32, GS_EF_NULL, &b);
    assert_int_equal(b.payload[6], 0);
    assert_int_equal(b.len, GS_CODEC_HEADER_BYTES + 4096 * 4);
    codec_decode_ok(&cfg, &b, 4096, GS_DTYPE_F32, y);
    assert_memory_equal(y, noise, 4096 * 4);
    codec_buf_free(&b);
    free(noise);
    free(zeros);
    free(y);
#endif
}

/* The zstd stage, on or auto: every call that resolves a configuration
 * takes it in a build with zstd, and refuses it with GS_ERR_UNSUPPORTED and
 * a sentence naming the cause and the fix in a build without. */
static void test_codec_wire_zstd_unsupported(void **state)
{
    static const gs_codec_zstd_t modes[] = {GS_CODEC_ZSTD_ON, GS_CODEC_ZSTD_AUTO};
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_INT8);
    float x[N], y[N];
    uint8_t payload[GS_CODEC_HEADER_BYTES + 8 * N];
    gs_status_t status;
    size_t sz, len;
    int m;

    (void)state;
    memset(x, 0, sizeof(x));
    memset(payload, 0, sizeof(payload));
    for (m = 0; m < 2; m++) {
        gs_status_t want = gs__zstd_available() ? GS_OK : GS_ERR_UNSUPPORTED;

        cfg.zstd = modes[m];
        assert_int_equal(gs_codec_encoded_size(&cfg, N, GS_DTYPE_F32, &sz), want);
        assert_int_equal(gs_codec_scratch_size(&cfg, N, GS_DTYPE_F32, &sz), want);
        if (want == GS_OK) {
            continue;
        }
        status = gs_codec_encode(&cfg, x, N, GS_DTYPE_F32, GS_EF_NULL, NULL, 0, payload,
                                 sizeof(payload), &len);
        assert_int_equal(status, GS_ERR_UNSUPPORTED);
        status = gs_codec_decode(&cfg, payload, sizeof(payload), N, GS_DTYPE_F32, NULL, 0, y);
        assert_int_equal(status, GS_ERR_UNSUPPORTED);
        /* The sentence: which stage, that the library lacks zstd, how to get it. */
        assert_non_null(strstr(gs_last_error(), (m == 0) ? "zstd stage on" : "zstd stage auto"));
        assert_non_null(strstr(gs_last_error(), "built without zstd"));
        assert_non_null(strstr(gs_last_error(), "install libzstd-dev"));
        assert_non_null(strstr(gs_last_error(), "rebuild"));
        assert_non_null(strstr(gs_last_error(), "GS_CODEC_ZSTD_OFF"));
    }
#ifdef GS_WITH_ZSTD
    assert_int_equal(gs__zstd_available(), 1);
#else
    assert_int_equal(gs__zstd_available(), 0);
#endif
}

static void test_codec_wire_bad_config(void **state)
{
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_INT8), bad;
    float x[N], y[N];
    size_t sz, len;
    codec_buf_t b;

    (void)state;
    memset(x, 0, sizeof(x));
    bad = cfg, bad.kind = (gs_codec_kind_t)99;
    assert_int_equal(gs_codec_encoded_size(&bad, N, GS_DTYPE_F32, &sz), GS_ERR_INVALID_ARG);
    bad = cfg, bad.block_size = 0;
    assert_int_equal(gs_codec_encoded_size(&bad, N, GS_DTYPE_F32, &sz), GS_ERR_INVALID_ARG);
    bad = cfg, bad.ratio = 1.5;
    assert_int_equal(gs_codec_encoded_size(&bad, N, GS_DTYPE_F32, &sz), GS_ERR_INVALID_ARG);
    bad = cfg, bad.ratio = NAN;
    assert_int_equal(gs_codec_encoded_size(&bad, N, GS_DTYPE_F32, &sz), GS_ERR_INVALID_ARG);
    bad = cfg, bad.levels = 128;
    assert_int_equal(gs_codec_encoded_size(&bad, N, GS_DTYPE_F32, &sz), GS_ERR_INVALID_ARG);
    bad = cfg, bad.zstd = (gs_codec_zstd_t)3;
    assert_int_equal(gs_codec_encoded_size(&bad, N, GS_DTYPE_F32, &sz), GS_ERR_INVALID_ARG);
    bad = cfg, bad.size = 4;
    assert_int_equal(gs_codec_encoded_size(&bad, N, GS_DTYPE_F32, &sz), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_codec_encoded_size(NULL, N, GS_DTYPE_F32, &sz), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_codec_encoded_size(&cfg, N, GS_DTYPE_I32, &sz), GS_ERR_INVALID_ARG);
    /* A caller built with an older, shorter struct gets defaults past its size
     * (here block_size would be invalid, but lies outside size). */
    bad = cfg, bad.size = offsetof(gs_codec_config_t, block_size), bad.block_size = 0;
    assert_int_equal(gs_codec_encoded_size(&bad, N, GS_DTYPE_F32, &sz), GS_OK);
    assert_int_equal(sz, GS_CODEC_HEADER_BYTES + 2 * 4 + N);
    /* dst or scratch too small. */
    codec_buf_init(&b, &cfg, N, GS_DTYPE_F32);
    assert_int_equal(
        gs_codec_encode(&cfg, x, N, GS_DTYPE_F32, GS_EF_NULL, NULL, 0, b.payload, b.cap - 1, &len),
        GS_ERR_INVALID_ARG);
    codec_buf_free(&b);
#ifdef GS_WITH_ZSTD
    cfg.zstd = GS_CODEC_ZSTD_AUTO;
    codec_buf_init(&b, &cfg, N, GS_DTYPE_F32);
    assert_true(b.scratch_size > 0);
    assert_int_equal(gs_codec_encode(&cfg, x, N, GS_DTYPE_F32, GS_EF_NULL, b.scratch,
                                     b.scratch_size - 1, b.payload, b.cap, &len),
                     GS_ERR_INVALID_ARG);
    codec_encode_ok(&cfg, x, N, GS_DTYPE_F32, GS_EF_NULL, &b);
    assert_int_equal(gs_codec_decode(&cfg, b.payload, b.len, N, GS_DTYPE_F32, NULL, 0, y),
                     GS_ERR_INVALID_ARG);
    codec_buf_free(&b);
#else
    (void)y;
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_wire_malformed_rejected),
        cmocka_unit_test(test_codec_wire_topk_bad_indices),
        cmocka_unit_test(test_codec_wire_zstd_auto),
        cmocka_unit_test(test_codec_wire_zstd_unsupported),
        cmocka_unit_test(test_codec_wire_bad_config),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
