/* SPDX-License-Identifier: Apache-2.0 */
/*
 * top-k sparsifier: keeps the k = params.param elements of largest |x|,
 * exactly, as (index, value) pairs in ascending index order.
 *
 * Selection is a radix select on the bit patterns of |x| (which order like
 * the values for non-negative floats; NaN sorts above inf): four passes of
 * an 8-bit histogram find the k-th largest key T without scratch memory or
 * sorting, then one pass keeps every element with key > T and the first
 * (in index order) of those equal to T until k are kept. Deterministic,
 * O(5 n), no allocation. On x86-64 with AVX2, codec_simd.c finds the same
 * threshold with an 11/11/9-bit radix select whose passes filter 8 keys at
 * a time against a lower bound taken from a sample (only the few keys above
 * it reach a histogram), and selects the same elements.
 *
 * Body: k u32 indices (strictly ascending, < count), then k f32 values.
 * Decode checks the indices before writing anything.
 * Error: ||x - y||^2 = sum of the dropped x_i^2 <= (1 - k/n) ||x||^2.
 * Biased: run it with error feedback.
 */
#include "compress/codec.h"

#include <string.h>

static inline uint32_t abs_key(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u & 0x7fffffffu;
}

static size_t topk_body_size(const gs_codec_params_t *p)
{
    return (size_t)p->param * (sizeof(uint32_t) + sizeof(float));
}

/* The k-th largest key of src (k >= 1), and how many elements equal to it
 * must be kept. */
static uint32_t topk_threshold(const float *src, size_t n, size_t k, size_t *ties_out)
{
    uint32_t prefix = 0, mask = 0;
    size_t need = k;
    int shift;

    for (shift = 24; shift >= 0; shift -= 8) {
        size_t hist[256] = {0};
        size_t i;
        int d;

        for (i = 0; i < n; i++) {
            const uint32_t key = abs_key(src[i]);

            if ((key & mask) == prefix) {
                hist[(key >> shift) & 0xffu]++;
            }
        }
        for (d = 255; d > 0; d--) {
            if (hist[d] >= need) {
                break;
            }
            need -= hist[d];
        }
        prefix |= (uint32_t)d << shift;
        mask |= 0xffu << shift;
    }
    *ties_out = need;
    return prefix;
}

static gs_status_t topk_encode(const gs_codec_params_t *p, const float *src, uint8_t *body)
{
    const size_t k = p->param;
    uint8_t *vals = body + k * sizeof(uint32_t);
    size_t ties, i, j = 0;
    uint32_t t;

    if (k == 0) {
        return GS_OK;
    }
    if (gs__codec_isa() && gs__codec_topk_threshold_simd(src, p->count, k, &t, &ties)) {
        gs__codec_topk_select_simd(src, p->count, k, t, ties, body);
        return GS_OK;
    }
    t = topk_threshold(src, p->count, k, &ties);
    for (i = 0; (i < p->count) && (j < k); i++) {
        const uint32_t key = abs_key(src[i]);

        if ((key > t) || ((key == t) && (ties > 0))) {
            const uint32_t idx = (uint32_t)i;

            ties -= (key == t) ? 1 : 0;
            memcpy(body + j * sizeof(uint32_t), &idx, sizeof(idx));
            gs__codec_store_f32(vals + j * sizeof(float), src[i]);
            j++;
        }
    }
    return GS_OK;
}

static gs_status_t topk_decode(const gs_codec_params_t *p, const uint8_t *body, float *dst,
                               gs_codec_mode_t mode, float alpha)
{
    const size_t k = p->param;
    const uint8_t *vals = body + k * sizeof(uint32_t);
    uint32_t idx, prev = 0;
    size_t j;

    /* IMPORTANT: hostile bytes. Check every index before any write. */
    for (j = 0; j < k; j++) {
        memcpy(&idx, body + j * sizeof(uint32_t), sizeof(idx));
        if (((size_t)idx >= p->count) || ((j > 0) && (idx <= prev))) {
            return GS_ERR_PROTOCOL;
        }
        prev = idx;
    }
    if ((mode == GS_CODEC_MODE_SET) && (p->count > 0)) {
        memset(dst, 0, p->count * sizeof(float));
    }
    for (j = 0; j < k; j++) {
        const float v = gs__codec_load_f32(vals + j * sizeof(float));

        memcpy(&idx, body + j * sizeof(uint32_t), sizeof(idx));
        dst[idx] = (mode == GS_CODEC_MODE_SET) ? v : dst[idx] + alpha * v;
    }
    return GS_OK;
}

const gs_codec_ops_t gs__codec_topk_ops = {
    .name = "topk",
    .wire_id = GS_CODEC_TOPK,
    .flags = GS_CODEC_F_LOSSY | GS_CODEC_F_NEEDS_EF | GS_CODEC_F_SPARSE,
    .encoded_size = topk_body_size,
    .encode = topk_encode,
    .decode_accumulate = topk_decode,
};
