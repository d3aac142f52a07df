/* SPDX-License-Identifier: Apache-2.0 */
/*
 * QSGD codec (Alistarh et al., 2017, with the max-norm scale): per block of
 * params.block elements, step = max|x| / s for s = params.param levels, and
 * each element becomes sign(x) x l with l = floor(|x| / step + u), u uniform
 * in [0, 1), so E[decoded] = x (unbiased; no error feedback needed).
 *
 * The noise u is a counter-based draw: hash(index + key(seed)), so encoding
 * is deterministic given the seed; the error-feedback step counter (or the
 * caller) changes the seed between steps.
 *
 * Body: nblocks f32 steps, then the codes: 4 bits per element (two's
 * complement nibbles, element 2j in the low nibble of byte j, a zero pad
 * nibble when count is odd) when s <= 7, else one signed byte per element.
 * Decoded value = code x step.
 * Error bound: |x - y| < step = max|x of its block| / s per element.
 */
#include "compress/codec.h"

#include <float.h>
#include <math.h>

#define QSGD_CHUNK 512

static int qsgd_nibbles(const gs_codec_params_t *p)
{
    return p->param <= 7;
}

static size_t qsgd_body_size(const gs_codec_params_t *p)
{
    const size_t codes = qsgd_nibbles(p) ? (p->count + 1) / 2 : p->count;

    return gs__codec_nblocks(p->count, p->block) * sizeof(float) + codes;
}

/* Codes of x[0 .. n) (global index first .. first + n) into q. */
GS_CODEC_CLONES
static void qsgd_quantize(const float *x, size_t n, uint32_t first, uint32_t key, float inv,
                          float levels, int8_t *q)
{
    size_t i;

    for (i = 0; i < n; i++) {
        const uint32_t h = gs__codec_hash32((first + (uint32_t)i) + key);
        const float u = (float)(h >> 8) * (1.0f / 16777216.0f);
        float t = fabsf(x[i]) * inv + u;
        int32_t l;

        /* t >= 0; a NaN or a rounding overshoot lands on the top level. */
        t = (t <= levels) ? t : levels;
        l = (int32_t)t;
        q[i] = (int8_t)((x[i] < 0.0f) ? -l : l);
    }
}

/* Store n codes for global elements start .. start + n as nibbles. */
static void pack_nibbles(uint8_t *codes, size_t start, const int8_t *q, size_t n)
{
    size_t j = 0;
    uint8_t *out;

    if ((n > 0) && ((start & 1) != 0)) {
        codes[start >> 1] = (uint8_t)((codes[start >> 1] & 0x0fu) | (((unsigned)q[0] & 15u) << 4));
        j = 1;
    }
    out = codes + ((start + j) >> 1);
    for (; j + 1 < n; j += 2) {
        *out++ = (uint8_t)(((unsigned)q[j] & 15u) | (((unsigned)q[j + 1] & 15u) << 4));
    }
    if (j < n) {
        *out = (uint8_t)((unsigned)q[j] & 15u);
    }
}

static gs_status_t qsgd_encode(const gs_codec_params_t *p, const float *src, uint8_t *body)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    uint8_t *codes = body + nb * sizeof(float);
    const uint32_t key = gs__codec_seed32(p->seed);
    const float levels = (float)p->param;
    const int nib = qsgd_nibbles(p);
    int8_t tmp[QSGD_CHUNK];
    size_t b, c;

    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;
        const float m = gs__codec_max_abs(src + lo, n);
        const float inv = ((m > 0.0f) && (levels / m <= FLT_MAX)) ? levels / m : 0.0f;
        const float step = (inv > 0.0f) ? m / levels : ((m != m) || (m > FLT_MAX) ? m : 0.0f);

        gs__codec_store_f32(body + b * sizeof(float), step);
        for (c = 0; c < n; c += QSGD_CHUNK) {
            const size_t len = (n - c < QSGD_CHUNK) ? n - c : QSGD_CHUNK;

            if (nib) {
                qsgd_quantize(src + lo + c, len, (uint32_t)(lo + c), key, inv, levels, tmp);
                pack_nibbles(codes, lo + c, tmp, len);
            } else {
                qsgd_quantize(src + lo + c, len, (uint32_t)(lo + c), key, inv, levels,
                              (int8_t *)(codes + lo + c));
            }
        }
    }
    return GS_OK;
}

GS_CODEC_CLONES
static void qsgd_dequant8(const int8_t *q, size_t n, float step, float *dst, gs_codec_mode_t mode)
{
    size_t i;

    if (mode == GS_CODEC_MODE_SET) {
        for (i = 0; i < n; i++) {
            dst[i] = (float)q[i] * step;
        }
    } else {
        for (i = 0; i < n; i++) {
            dst[i] += (float)q[i] * step;
        }
    }
}

/* Elements start .. start + n from nibbles. */
GS_CODEC_CLONES
static void qsgd_dequant4(const uint8_t *codes, size_t start, size_t n, float step, float *dst,
                          gs_codec_mode_t mode)
{
    size_t i;

    for (i = 0; i < n; i++) {
        const size_t g = start + i;
        const unsigned nibble = ((unsigned)codes[g >> 1] >> ((g & 1) * 4)) & 15u;
        const float v = (float)((int)(nibble ^ 8u) - 8) * step;

        dst[i] = (mode == GS_CODEC_MODE_SET) ? v : dst[i] + v;
    }
}

static gs_status_t qsgd_decode(const gs_codec_params_t *p, const uint8_t *body, float *dst,
                               gs_codec_mode_t mode, float alpha)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    const uint8_t *codes = body + nb * sizeof(float);
    const int nib = qsgd_nibbles(p);
    size_t b;

    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;
        const float step = gs__codec_load_f32(body + b * sizeof(float));
        const float s = (mode == GS_CODEC_MODE_SET) ? step : alpha * step;

        if (nib) {
            qsgd_dequant4(codes, lo, n, s, dst + lo, mode);
        } else {
            qsgd_dequant8((const int8_t *)(codes + lo), n, s, dst + lo, mode);
        }
    }
    return GS_OK;
}

const gs_codec_ops_t gs__codec_qsgd_ops = {
    .name = "qsgd",
    .wire_id = GS_CODEC_QSGD,
    .flags = GS_CODEC_F_LOSSY | GS_CODEC_F_BLOCKED | GS_CODEC_F_LEVELS | GS_CODEC_F_STOCHASTIC,
    .encoded_size = qsgd_body_size,
    .encode = qsgd_encode,
    .decode_accumulate = qsgd_decode,
};
