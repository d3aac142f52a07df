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
 * Non-finite input: a NaN in a block makes its step NaN, and the whole
 * block decodes to NaN; an inf (and no NaN) makes the step inf: the infs
 * decode to +-inf, the block's finite elements to NaN (code 0 x inf).
 * Other blocks are unaffected; nothing is undefined behaviour.
 *
 * Because each element's draw depends only on (seed, index), the AVX2
 * kernels of codec_simd.c (encode, the fused error-feedback encode and
 * decode) draw the same u in 8 lanes and give the same bytes and bits as
 * the plain loops here, which run on other CPUs and on what the kernels
 * leave (a partial 32-element step, a block that starts mid-byte).
 */
#include "compress/codec.h"

#define QSGD_CHUNK 512

static int qsgd_nibbles(const gs__codec_params_t *p)
{
    return p->param <= 7;
}

static size_t qsgd_body_size(const gs__codec_params_t *p)
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
        q[i] = gs_km_qsgd_code(x[i], gs_km_qsgd_noise(first + (uint32_t)i, key), inv, levels);
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

/* Plain codes of the n elements x (global elements start .. start + n). */
static void qsgd_codes_plain(const float *x, size_t start, size_t n, uint32_t key, float inv,
                             float levels, int nib, uint8_t *codes)
{
    int8_t tmp[QSGD_CHUNK];
    size_t c;

    for (c = 0; c < n; c += QSGD_CHUNK) {
        const size_t len = (n - c < QSGD_CHUNK) ? n - c : QSGD_CHUNK;

        if (nib) {
            qsgd_quantize(x + c, len, (uint32_t)(start + c), key, inv, levels, tmp);
            pack_nibbles(codes, start + c, tmp, len);
        } else {
            qsgd_quantize(x + c, len, (uint32_t)(start + c), key, inv, levels,
                          (int8_t *)(codes + start + c));
        }
    }
}

GS_CODEC_CLONES
static void qsgd_dequant8(const int8_t *q, size_t n, float step, float *dst, gs__codec_mode_t mode)
{
    size_t i;

    if (mode == GS_CODEC_MODE_SET) {
        for (i = 0; i < n; i++) {
            dst[i] = gs_km_dequant(q[i], step);
        }
    } else {
        for (i = 0; i < n; i++) {
            dst[i] = gs_km_addf(dst[i], gs_km_dequant(q[i], step));
        }
    }
}

/* Elements start .. start + n from nibbles. */
GS_CODEC_CLONES
static void qsgd_dequant4(const uint8_t *codes, size_t start, size_t n, float step, float *dst,
                          gs__codec_mode_t mode)
{
    size_t i;

    for (i = 0; i < n; i++) {
        const float v = gs_km_dequant(gs_km_nibble_code(codes, start + i), step);

        dst[i] = (mode == GS_CODEC_MODE_SET) ? v : gs_km_addf(dst[i], v);
    }
}

static void qsgd_dequant_plain(const uint8_t *codes, size_t start, size_t n, int nib, float s,
                               float *dst, gs__codec_mode_t mode)
{
    if (nib) {
        qsgd_dequant4(codes, start, n, s, dst, mode);
    } else {
        qsgd_dequant8((const int8_t *)(codes + start), n, s, dst, mode);
    }
}

/*
 * The kernels of codec_simd.c start a nibble run on a byte: a block that
 * starts on an odd element does its first element with the plain loop.
 * qsgd_head() is that element count (0 or 1, at most n).
 */
static size_t qsgd_head(size_t start, size_t n, int nib)
{
    return (nib && ((start & 1) != 0) && (n > 0)) ? 1 : 0;
}

/* dst[0 .. n) from the codes of global elements start .. start + n, as
 * @p mode says, s already scaled by alpha. */
static void qsgd_dequant(const uint8_t *codes, size_t start, size_t n, int nib, float s, float *dst,
                         gs__codec_mode_t mode, int simd)
{
    size_t c = 0;

    if (simd) {
        c = qsgd_head(start, n, nib);
        qsgd_dequant_plain(codes, start, c, nib, s, dst, mode);
        c += gs__codec_qsgd_dequant_simd(codes, start + c, n - c, nib, s, dst + c,
                                         mode == GS_CODEC_MODE_ADD);
    }
    qsgd_dequant_plain(codes, start + c, n - c, nib, s, dst + c, mode);
}

/* Encode src block by block. With a residual res (error feedback, the
 * fused encode_ef), each block first does res += src and encodes res, then
 * res -= decoded while the block is still in L1, with the steps and bits
 * of the unfused sequence (add, encode, decode_accumulate with alpha -1). */
static void qsgd_encode_blocks(const gs__codec_params_t *p, const float *src, float *res,
                               uint8_t *body)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    uint8_t *codes = body + nb * sizeof(float);
    const uint32_t key = gs__codec_seed32(p->seed);
    const float levels = (float)p->param;
    const int nib = qsgd_nibbles(p);
    const int simd = gs__codec_isa();
    size_t b;

    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;
        float *r = (res != NULL) ? res + lo : NULL;
        const float *x = (r != NULL) ? r : src + lo;
        const size_t head = qsgd_head(lo, n, nib);
        size_t done = 0;
        float m, inv, step, s;
        int have_m;

        if (r != NULL) {
            if (!simd) {
                gs__ef_add_f32(r, src + lo, n);
            }
            have_m = simd && gs__codec_add_max_abs_simd(src + lo, r, n, &m);
        } else {
            have_m = simd && gs__codec_max_abs_simd(x, n, &m);
        }
        if (!have_m) {
            m = gs__codec_max_abs(x, n);
        }
        step = gs_km_block_step(m, levels, &inv);
        gs__codec_store_f32(body + b * sizeof(float), step);
        s = gs_km_mulf(gs__codec_minus_one, step);
        if (simd && ((r == NULL) || (s == s))) {
            /* Codes (and the residual update) of the whole steps after
             * the head; the head and the rest take the plain loops. */
            done = head + ((r != NULL)
                               ? gs__codec_qsgd_quantize_update_simd(
                                     r + head, n - head, lo + head, key, inv, levels, nib, s, codes)
                               : gs__codec_qsgd_quantize_simd(x + head, n - head, lo + head, key,
                                                              inv, levels, nib, codes));
            qsgd_codes_plain(x, lo, head, key, inv, levels, nib, codes);
            if (r != NULL) {
                qsgd_dequant_plain(codes, lo, head, nib, s, r, GS_CODEC_MODE_ADD);
            }
        }
        qsgd_codes_plain(x + done, lo + done, n - done, key, inv, levels, nib, codes);
        if ((r != NULL) && simd && (s == s)) {
            qsgd_dequant_plain(codes, lo + done, n - done, nib, s, r + done, GS_CODEC_MODE_ADD);
        } else if (r != NULL) {
            /* decode_accumulate's update, the same calls: with a NaN step
             * both addends can be NaN, and which one the sum keeps
             * depends on the instruction's operand order. */
            qsgd_dequant(codes, lo, n, nib, s, r, GS_CODEC_MODE_ADD, simd);
        }
    }
}

static gs_status_t qsgd_encode(const gs__codec_params_t *p, const float *src, uint8_t *body)
{
    qsgd_encode_blocks(p, src, NULL, body);
    return GS_OK;
}

static gs_status_t qsgd_encode_ef(const gs__codec_params_t *p, const float *src, float *res,
                                  uint8_t *body)
{
    qsgd_encode_blocks(p, src, res, body);
    return GS_OK;
}

static gs_status_t qsgd_decode(const gs__codec_params_t *p, const uint8_t *body, float *dst,
                               gs__codec_mode_t mode, float alpha)
{
    const size_t nb = gs__codec_nblocks(p->count, p->block);
    const uint8_t *codes = body + nb * sizeof(float);
    const int nib = qsgd_nibbles(p);
    const int simd = gs__codec_isa();
    size_t b;

    for (b = 0; b < nb; b++) {
        const size_t lo = b * p->block;
        const size_t n = (p->count - lo < p->block) ? p->count - lo : p->block;
        const float step = gs__codec_load_f32(body + b * sizeof(float));
        const float s = (mode == GS_CODEC_MODE_SET) ? step : gs_km_mulf(alpha, step);

        qsgd_dequant(codes, lo, n, nib, s, dst + lo, mode, simd);
    }
    return GS_OK;
}

const gs__codec_ops_t gs__codec_qsgd_ops = {
    .name = "qsgd",
    .wire_id = GS_CODEC_QSGD,
    .flags = GS_CODEC_F_LOSSY | GS_CODEC_F_BLOCKED | GS_CODEC_F_LEVELS | GS_CODEC_F_STOCHASTIC,
    .encoded_size = qsgd_body_size,
    .encode = qsgd_encode,
    .decode_accumulate = qsgd_decode,
    .encode_ef = qsgd_encode_ef,
};
