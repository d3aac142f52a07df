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

static size_t sign_body_size(const gs__codec_params_t *p)
{
    return gs__codec_nblocks(p->count, p->block) * sizeof(float) + (p->count + 7) / 8;
}

GS_CODEC_CLONES
static float sign_mean_abs(const float *x, size_t n)
{
    size_t i;

    /* NOTE: a strict left-to-right f32 sum does not vectorise; double
     * would be slower. Summing eight interleaved partials keeps the
     * result deterministic (independent of the ISA clone); the order is
     * codec_math.h's, which the GPU kernels follow too. */
    float p[GS_KM_SIGN_PARTIALS] = {0};

    for (i = 0; i + GS_KM_SIGN_PARTIALS <= n; i += GS_KM_SIGN_PARTIALS) {
        for (size_t j = 0; j < GS_KM_SIGN_PARTIALS; j++) {
            p[j] = gs_km_sign_partial(p[j], x[i + j]);
        }
    }
    for (; i < n; i++) {
        p[i % GS_KM_SIGN_PARTIALS] = gs_km_sign_partial(p[i % GS_KM_SIGN_PARTIALS], x[i]);
    }
    return gs_km_sign_mean(p, n);
}

GS_CODEC_CLONES
static void sign_pack(const float *x, size_t nbytes, uint8_t *bits)
{
    size_t j;

    for (j = 0; j < nbytes; j++) {
        unsigned b = 0;

        for (unsigned t = 0; t < 8; t++) {
            b |= gs_km_sign_bit(x[8 * j + t]) << t;
        }
        bits[j] = (uint8_t)b;
    }
}

static gs_status_t sign_encode(const gs__codec_params_t *p, const float *src, uint8_t *body)
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
    if (gs__codec_isa()) {
        gs__codec_sign_pack_simd(src, full, bits);
    } else {
        sign_pack(src, full, bits);
    }
    if (full * 8 < p->count) {
        unsigned last = 0;

        for (i = full * 8; i < p->count; i++) {
            last |= gs_km_sign_bit(src[i]) << (i - full * 8);
        }
        bits[full] = (uint8_t)last;
    }
    return GS_OK;
}

/* Elements start .. start + n of one block, all with magnitude s. */
GS_CODEC_CLONES
static void sign_unpack(const uint8_t *bits, size_t start, size_t n, float s, float *dst,
                        gs__codec_mode_t mode)
{
    size_t i;

    for (i = 0; i < n; i++) {
        const size_t g = start + i;
        const float v = gs_km_sign_value((bits[g >> 3] >> (g & 7)) & 1u, s);

        dst[i] = (mode == GS_CODEC_MODE_SET) ? v : gs_km_addf(dst[i], v);
    }
}

static gs_status_t sign_decode(const gs__codec_params_t *p, const uint8_t *body, float *dst,
                               gs__codec_mode_t mode, float alpha)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    const uint8_t *bits = body + nb * sizeof(float);
    size_t b;

    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;
        const float scale = gs__codec_load_f32(body + b * sizeof(float));

        const float s = (mode == GS_CODEC_MODE_SET) ? scale : gs_km_mulf(alpha, scale);

        if (gs__codec_isa()) {
            /* Whole sign bytes inside the block go 8 at a time; the
             * elements before the first and after the last run plain. */
            const size_t head = ((lo + 7) / 8 * 8 - lo < n) ? (lo + 7) / 8 * 8 - lo : n;
            const size_t nbytes = (n - head) / 8;
            const size_t done = head + 8 * nbytes;

            sign_unpack(bits, lo, head, s, dst + lo, mode);
            gs__codec_sign_unpack_simd(bits + (lo + head) / 8, nbytes, s, dst + lo + head,
                                       mode == GS_CODEC_MODE_ADD);
            sign_unpack(bits, lo + done, n - done, s, dst + lo + done, mode);
        } else {
            sign_unpack(bits, lo, n, s, dst + lo, mode);
        }
    }
    return GS_OK;
}

/* One block at a time (the block stays in L1 between the steps): add,
 * mean |r|, pack, and the residual update of decode_accumulate with
 * alpha -1. Blocks must start on a sign byte; other block sizes take the
 * unfused sequence. */
static gs_status_t sign_encode_ef(const gs__codec_params_t *p, const float *src, float *res,
                                  uint8_t *body)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    uint8_t *bits = body + nb * sizeof(float);
    const int simd = gs__codec_isa();
    size_t b;

    if (p->block % 8 != 0) {
        gs__ef_add_f32(res, src, p->count);
        sign_encode(p, res, body);
        return sign_decode(p, body, res, GS_CODEC_MODE_ADD, gs__codec_minus_one);
    }
    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;
        const size_t full = n / 8, done = 8 * full;
        float *r = res + lo;
        uint8_t *bb = bits + lo / 8;
        float scale, s;

        if (simd) {
            scale = gs__codec_add_mean_abs_simd(src + lo, r, n);
        } else {
            gs__ef_add_f32(r, src + lo, n);
            scale = sign_mean_abs(r, n);
        }
        gs__codec_store_f32(body + b * sizeof(float), scale);
        s = gs_km_mulf(gs__codec_minus_one, scale);
        if (simd && (s == s)) {
            gs__codec_sign_pack_update_simd(r, full, s, bb);
        } else if (simd) { /* a NaN scale: the separate steps give its bits */
            gs__codec_sign_pack_simd(r, full, bb);
            gs__codec_sign_unpack_simd(bb, full, s, r, 1);
        } else {
            sign_pack(r, full, bb);
            sign_unpack(bits, lo, done, s, r, GS_CODEC_MODE_ADD);
        }
        if (done < n) { /* the last block's partial byte */
            unsigned last = 0;

            for (size_t i = done; i < n; i++) {
                last |= gs_km_sign_bit(r[i]) << (i - done);
            }
            bb[full] = (uint8_t)last;
            sign_unpack(bits, lo + done, n - done, s, r + done, GS_CODEC_MODE_ADD);
        }
    }
    return GS_OK;
}

const gs__codec_ops_t gs__codec_sign_ops = {
    .name = "sign",
    .wire_id = GS_CODEC_SIGN,
    .flags = GS_CODEC_F_LOSSY | GS_CODEC_F_NEEDS_EF | GS_CODEC_F_BLOCKED,
    .encoded_size = sign_body_size,
    .encode = sign_encode,
    .decode_accumulate = sign_decode,
    .encode_ef = sign_encode_ef,
};
