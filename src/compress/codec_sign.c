/* SPDX-License-Identifier: Apache-2.0 */
/*
 * 1-bit sign codec with a scale per block (scaled sign, as in EF-SignSGD,
 * Karimireddy et al., 2019): per block of params.block elements,
 * scale = mean |x|, and each element becomes -scale when x < 0, else
 * +scale (0, -0 and NaN count as non-negative).
 *
 * Body: nblocks f32 scales, then ceil(count / 8) bytes of sign bits:
 * element i is bit (i % 8) of byte i / 8, 1 meaning negative; pad bits 0.
 * Error: per block ||x - y||^2 = ||x||^2 - n scale^2 <= ||x||^2 (a
 * contraction, but biased): run it with error feedback.
 */
#include "compress/codec.h"

#include <math.h>

static size_t sign_body_size(const gs_codec_params_t *p)
{
    return gs__codec_nblocks(p->count, p->block) * sizeof(float) + (p->count + 7) / 8;
}

GS_CODEC_CLONES
static float sign_mean_abs(const float *x, size_t n)
{
    float s = 0.0f;
    size_t i;

    /* NOTE: a strict left-to-right f32 sum does not vectorise; double
     * would be slower. Summing eight interleaved partials keeps the
     * result deterministic (independent of the ISA clone). */
    float p[8] = {0};

    for (i = 0; i + 8 <= n; i += 8) {
        for (size_t j = 0; j < 8; j++) {
            p[j] += fabsf(x[i + j]);
        }
    }
    for (; i < n; i++) {
        p[i % 8] += fabsf(x[i]);
    }
    for (i = 0; i < 8; i++) {
        s += p[i];
    }
    return s / (float)n;
}

GS_CODEC_CLONES
static void sign_pack(const float *x, size_t nbytes, uint8_t *bits)
{
    size_t j;

    for (j = 0; j < nbytes; j++) {
        unsigned b = 0;

        for (unsigned t = 0; t < 8; t++) {
            b |= (x[8 * j + t] < 0.0f ? 1u : 0u) << t;
        }
        bits[j] = (uint8_t)b;
    }
}

static gs_status_t sign_encode(const gs_codec_params_t *p, const float *src, uint8_t *body)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    uint8_t *bits = body + nb * sizeof(float);
    const size_t full = p->count / 8;
    size_t b, i;

    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;

        gs__codec_store_f32(body + b * sizeof(float), sign_mean_abs(src + lo, n));
    }
    sign_pack(src, full, bits);
    if (full * 8 < p->count) {
        unsigned last = 0;

        for (i = full * 8; i < p->count; i++) {
            last |= (src[i] < 0.0f ? 1u : 0u) << (i - full * 8);
        }
        bits[full] = (uint8_t)last;
    }
    return GS_OK;
}

/* Elements start .. start + n of one block, all with magnitude s. */
GS_CODEC_CLONES
static void sign_unpack(const uint8_t *bits, size_t start, size_t n, float s, float *dst,
                        gs_codec_mode_t mode)
{
    size_t i;

    for (i = 0; i < n; i++) {
        const size_t g = start + i;
        const float v = (((bits[g >> 3] >> (g & 7)) & 1u) != 0) ? -s : s;

        dst[i] = (mode == GS_CODEC_MODE_SET) ? v : dst[i] + v;
    }
}

static gs_status_t sign_decode(const gs_codec_params_t *p, const uint8_t *body, float *dst,
                               gs_codec_mode_t mode, float alpha)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    const uint8_t *bits = body + nb * sizeof(float);
    size_t b;

    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;
        const float scale = gs__codec_load_f32(body + b * sizeof(float));

        sign_unpack(bits, lo, n, (mode == GS_CODEC_MODE_SET) ? scale : alpha * scale, dst + lo,
                    mode);
    }
    return GS_OK;
}

const gs_codec_ops_t gs__codec_sign_ops = {
    .name = "sign",
    .wire_id = GS_CODEC_SIGN,
    .flags = GS_CODEC_F_LOSSY | GS_CODEC_F_NEEDS_EF | GS_CODEC_F_BLOCKED,
    .encoded_size = sign_body_size,
    .encode = sign_encode,
    .decode_accumulate = sign_decode,
};
