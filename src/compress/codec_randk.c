/* SPDX-License-Identifier: Apache-2.0 */
/*
 * random-k sparsifier: the count elements are cut into k = params.param
 * strata [floor(j n / k), floor((j + 1) n / k)) and one element is drawn
 * from each, uniformly, by hash(j, seed). The indices are a function of
 * (seed, n, k) alone, so only the seed travels: ranks that share a seed
 * (and an error-feedback step) pick the same coordinates.
 *
 * Body: the u64 effective seed, then k f32 values (value j belongs to the
 * element drawn from stratum j). Any seed is valid, so decoding cannot go
 * out of bounds. Values are not rescaled by n/k: the codec is a
 * contraction (E||x - y||^2 = (1 - k/n) ||x||^2), biased by k/n, meant to
 * run with error feedback.
 */
#include "compress/codec.h"

#include <string.h>

static size_t randk_body_size(const gs__codec_params_t *p)
{
    return sizeof(uint64_t) + (size_t)p->param * sizeof(float);
}

static gs_status_t randk_encode(const gs__codec_params_t *p, const float *src, uint8_t *body)
{
    const size_t k = p->param;
    const uint32_t key = gs__codec_seed32(p->seed);
    size_t j;

    memcpy(body, &p->seed, sizeof(p->seed));
    for (j = 0; j < k; j++) {
        gs__codec_store_f32(body + sizeof(uint64_t) + j * sizeof(float),
                            src[gs_km_randk_index(p->count, k, j, key)]);
    }
    return GS_OK;
}

static gs_status_t randk_decode(const gs__codec_params_t *p, const uint8_t *body, float *dst,
                                gs__codec_mode_t mode, float alpha)
{
    const size_t k = p->param;
    uint64_t seed;
    uint32_t key;
    size_t j;

    memcpy(&seed, body, sizeof(seed));
    key = gs__codec_seed32(seed);
    if ((mode == GS_CODEC_MODE_SET) && (p->count > 0)) {
        memset(dst, 0, p->count * sizeof(float));
    }
    for (j = 0; j < k; j++) {
        const size_t idx = gs_km_randk_index(p->count, k, j, key);
        const float v = gs__codec_load_f32(body + sizeof(uint64_t) + j * sizeof(float));

        dst[idx] = (mode == GS_CODEC_MODE_SET) ? v : gs_km_acc(dst[idx], alpha, v);
    }
    return GS_OK;
}

const gs__codec_ops_t gs__codec_randk_ops = {
    .name = "randk",
    .wire_id = GS_CODEC_RANDK,
    .flags = GS_CODEC_F_LOSSY | GS_CODEC_F_NEEDS_EF | GS_CODEC_F_SPARSE | GS_CODEC_F_STOCHASTIC,
    .encoded_size = randk_body_size,
    .encode = randk_encode,
    .decode_accumulate = randk_decode,
};
