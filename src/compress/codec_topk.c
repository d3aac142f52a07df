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
 * O(5 n), no allocation.
 *
 * On x86-64 with AVX2 the same elements are found in one pass over the
 * tensor (the candidate path): a strided sample of keys, stored in the
 * body, gives a bound lo with 1.25 to 1.5 k keys above it; one vector pass
 * (codec_simd.c) lists the indices of the keys >= lo into the body, which
 * has room for 2k; the exact threshold and ties come from a radix select
 * over the listed keys only, and the selection keeps the listed elements
 * in index order. Every key >= T is listed when at least k keys are, so
 * T, the ties and the kept elements are those of the plain select; when
 * the sample misjudges (fewer than k listed, or more than 2k), the
 * filtered 11/11/9-bit select of codec_simd.c runs over the whole tensor.
 * With error feedback the same pass adds the input into the residual
 * (encode_ef), so the whole encode reads the input and the residual once.
 *
 * Body: k u32 indices (strictly ascending, < count), then k f32 values.
 * Decode checks the indices before writing anything.
 * Error: ||x - y||^2 = sum of the dropped x_i^2 <= (1 - k/n) ||x||^2.
 * Biased: run it with error feedback.
 */
#include "compress/codec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Samples for the candidate path's bound, at most (and at most 2k). */
#define TOPK_SAMPLES 16384
/* Sample keys above the bound, at least (fewer: the bound is too noisy). */
#define TOPK_MIN_SAMPLE_HITS 16
/* List entries ahead whose element is prefetched in the passes over the list. */
#define TOPK_PREFETCH 16
/* Output elements per block of the all-gather sum (16 KiB, stays in L1). */
#define TOPK_SUM_BLOCK 4096

static size_t topk_body_size(const gs__codec_params_t *p)
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
            const uint32_t key = gs_km_topk_key(src[i]);

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

/* The k-th largest (1 <= k <= m) of m keys, and the ties at it to keep,
 * by an 11/11/9-bit radix select. The keys are list[i] (little-endian u32)
 * when x is NULL, else the keys of x[list[i]]. */
static uint32_t topk_list_threshold(const float *x, const uint8_t *list, size_t m, size_t k,
                                    size_t *ties_out)
{
    static const int shift[3] = {20, 9, 0};
    static const uint32_t bins[3] = {2048, 2048, 512};
    uint32_t hist[2048];
    uint32_t prefix = 0, mask = 0;
    size_t need = k;

    for (int level = 0; level < 3; level++) {
        uint32_t d;

        memset(hist, 0, bins[level] * sizeof(uint32_t));
        for (size_t i = 0; i < m; i++) {
            const uint32_t e = gs__codec_load_u32(list + i * sizeof(uint32_t));
            const uint32_t key = (x == NULL) ? e : gs_km_topk_key(x[e]);

            if ((x != NULL) && (i + TOPK_PREFETCH < m)) {
                __builtin_prefetch(
                    x + gs__codec_load_u32(list + (i + TOPK_PREFETCH) * sizeof(uint32_t)));
            }

            if ((key & mask) == prefix) {
                hist[(key >> shift[level]) & (bins[level] - 1)]++;
            }
        }
        for (d = bins[level] - 1; d > 0; d--) {
            if (hist[d] >= need) {
                break;
            }
            need -= hist[d];
        }
        prefix |= d << shift[level];
        mask |= (bins[level] - 1) << shift[level];
    }
    *ties_out = need;
    return prefix;
}

/* The candidate path's bound for the values a[i] (+ b[i]): a sample key
 * with 1.25 to 1.5 k of the n keys at or above it, found in the sample's
 * keys (kept in body, which has room for 2k). 1 and *lo_out, or 0 when k
 * is too small for the sample to say anything. */
static int topk_bound(const float *a, const float *b, size_t n, size_t k, uint8_t *body,
                      uint32_t *lo_out)
{
    const size_t cap = 2 * k;
    size_t ns, stride, j, ties;
    double jk, extra;

    if (n <= cap) {
        *lo_out = 0; /* everything fits in the list */
        return 1;
    }
    ns = (cap < TOPK_SAMPLES) ? cap : TOPK_SAMPLES;
    /* An odd stride, so that data with a power-of-two period does not
     * line up with the sample. */
    stride = (n / ns) | 1u;
    ns = ((n - 1) / stride + 1 < ns) ? (n - 1) / stride + 1 : ns;
    /* jk sample keys are expected at or above the k-th largest; aim 4
     * standard deviations (sqrt jk) above it, between 1.25 and 1.5 jk, so
     * that the list holds k to 2k keys nearly always, and as few as that
     * allows (each listed key is gathered a few times). */
    jk = (double)ns * (double)k / (double)n;
    extra = 4.0 * sqrt(jk);
    extra = (extra < jk / 4) ? jk / 4 : ((extra > jk / 2) ? jk / 2 : extra);
    j = (size_t)(jk + extra);
    if (j < TOPK_MIN_SAMPLE_HITS) {
        return 0;
    }
    for (size_t s = 0; s < ns; s++) {
        const size_t i = s * stride;

        gs__codec_store_u32(body + s * sizeof(uint32_t),
                            gs_km_topk_key((b != NULL) ? a[i] + b[i] : a[i]));
    }
    *lo_out = topk_list_threshold(NULL, body, ns, j, &ties);
    return 1;
}

/*
 * The candidate path over v[i] = a[i] + b[i], stored into out (b NULL: v =
 * a, read only). With res set (then res == out == a), the kept elements'
 * residual update of decode_accumulate with alpha -1 follows. Returns 1
 * when the body is complete; 0 when the whole-tensor select must run on
 * (out or a): the adds are done; -1 when nothing was done (k too small for
 * the sample).
 */
static int topk_candidates(const gs__codec_params_t *p, const float *a, const float *b, float *out,
                           float *res, uint8_t *body)
{
    const size_t k = p->param, cap = 2 * k;
    const float *v = (b != NULL) ? out : a;
    uint8_t *vals = body + k * sizeof(uint32_t);
    size_t m, ties, j = 0;
    uint32_t lo, t;

    if (!topk_bound(a, b, p->count, k, body, &lo)) {
        return -1;
    }
    m = gs__codec_topk_collect_simd(a, b, out, p->count, lo, body, cap);
    if ((m < k) || (m > cap)) {
        return 0;
    }
    t = topk_list_threshold(v, body, m, k, &ties);
    /* Keep the listed elements with key > t, and the first ties at t, in
     * index order: list entry i moves to j <= i. */
    for (size_t i = 0; (i < m) && (j < k); i++) {
        const uint32_t e = gs__codec_load_u32(body + i * sizeof(uint32_t));
        const uint32_t key = gs_km_topk_key(v[e]);

        if (i + TOPK_PREFETCH < m) {
            __builtin_prefetch(v +
                               gs__codec_load_u32(body + (i + TOPK_PREFETCH) * sizeof(uint32_t)));
        }

        if ((key > t) || ((key == t) && (ties > 0))) {
            ties -= (key == t) ? 1 : 0;
            gs__codec_store_u32(body + j * sizeof(uint32_t), e);
            j++;
        }
    }
    /* The values overwrite list entries k .. 2k, no longer needed. */
    if (res != NULL) {
        const float minus_one = gs__codec_minus_one;

        for (j = 0; j < k; j++) {
            const uint32_t e = gs__codec_load_u32(body + j * sizeof(uint32_t));
            const float x = res[e];

            gs__codec_store_f32(vals + j * sizeof(float), x);
            res[e] = gs_km_acc(res[e], minus_one, x);
        }
    } else {
        for (j = 0; j < k; j++) {
            gs__codec_store_f32(vals + j * sizeof(float),
                                v[gs__codec_load_u32(body + j * sizeof(uint32_t))]);
        }
    }
    return 1;
}

/* The whole-tensor select: codec_simd.c's filtered passes, or plain C. */
static void topk_select_all(const gs__codec_params_t *p, const float *src, uint8_t *body)
{
    const size_t k = p->param;
    uint8_t *vals = body + k * sizeof(uint32_t);
    size_t ties, i, j = 0;
    uint32_t t;

    if (gs__codec_isa() && gs__codec_topk_threshold_simd(src, p->count, k, &t, &ties)) {
        gs__codec_topk_select_simd(src, p->count, k, t, ties, body);
        return;
    }
    t = topk_threshold(src, p->count, k, &ties);
    for (i = 0; (i < p->count) && (j < k); i++) {
        const uint32_t key = gs_km_topk_key(src[i]);

        if ((key > t) || ((key == t) && (ties > 0))) {
            ties -= (key == t) ? 1 : 0;
            gs__codec_store_u32(body + j * sizeof(uint32_t), (uint32_t)i);
            gs__codec_store_f32(vals + j * sizeof(float), src[i]);
            j++;
        }
    }
}

static gs_status_t topk_encode(const gs__codec_params_t *p, const float *src, uint8_t *body)
{
    if (p->param == 0) {
        return GS_OK;
    }
    if (gs__codec_isa() && (topk_candidates(p, src, NULL, NULL, NULL, body) == 1)) {
        return GS_OK;
    }
    topk_select_all(p, src, body);
    return GS_OK;
}

/* IMPORTANT: hostile bytes. Every index < count and strictly ascending. */
static gs_status_t topk_check(const gs__codec_params_t *p, const uint8_t *body)
{
    uint32_t idx, prev = 0;

    for (size_t j = 0; j < p->param; j++) {
        idx = gs__codec_load_u32(body + j * sizeof(uint32_t));
        if (((size_t)idx >= p->count) || ((j > 0) && (idx <= prev))) {
            return GS_ERR_PROTOCOL;
        }
        prev = idx;
    }
    return GS_OK;
}

/*
 * dst[idx_j] += alpha * val_j for pairs lo .. hi of a checked body of k
 * pairs. NOTE: decode-accumulate and the all-gather sum both add through
 * this one function, kept out of line and never cloned: where both addends
 * are NaN the sum carries the NaN of whichever operand the compiler put
 * first, and one copy of the code makes that the same choice on both paths.
 */
#if defined(__clang__)
#define TOPK_ONE_COPY __attribute__((noinline))
#else
#define TOPK_ONE_COPY __attribute__((noipa)) /* no constant-propagated clone either */
#endif
TOPK_ONE_COPY static void topk_add_pairs(const uint8_t *body, size_t k, size_t lo, size_t hi,
                                         float alpha, float *dst)
{
    const uint8_t *vals = body + k * sizeof(uint32_t);

    for (size_t j = lo; j < hi; j++) {
        const uint32_t idx = gs__codec_load_u32(body + j * sizeof(uint32_t));

        dst[idx] = gs_km_acc(dst[idx], alpha, gs__codec_load_f32(vals + j * sizeof(float)));
    }
}

static gs_status_t topk_decode(const gs__codec_params_t *p, const uint8_t *body, float *dst,
                               gs__codec_mode_t mode, float alpha)
{
    const size_t k = p->param;
    const uint8_t *vals = body + k * sizeof(uint32_t);

    if (topk_check(p, body) != GS_OK) {
        return GS_ERR_PROTOCOL; /* checked before any write */
    }
    if (mode == GS_CODEC_MODE_ADD) {
        topk_add_pairs(body, k, 0, k, alpha, dst);
        return GS_OK;
    }
    if (p->count > 0) {
        memset(dst, 0, p->count * sizeof(float));
    }
    for (size_t j = 0; j < k; j++) {
        dst[gs__codec_load_u32(body + j * sizeof(uint32_t))] =
            gs__codec_load_f32(vals + j * sizeof(float));
    }
    return GS_OK;
}

/* Error feedback: with the kernels, the candidate path adds src into the
 * residual in its one pass; otherwise (or when it cannot finish) the
 * unfused sequence, which gives the same bits. */
static gs_status_t topk_encode_ef(const gs__codec_params_t *p, const float *src, float *res,
                                  uint8_t *body)
{
    int done = -1;

    if (gs__codec_isa() && (p->param > 0)) {
        done = topk_candidates(p, res, src, res, res, body);
    }
    if (done == 1) {
        return GS_OK;
    }
    if (done == -1) {
        gs__ef_add_f32(res, src, p->count);
    }
    if (p->param > 0) {
        topk_select_all(p, res, body);
    }
    return topk_decode(p, body, res, GS_CODEC_MODE_ADD, gs__codec_minus_one);
}

/* Header and indices of every payload; GS_ERR_PROTOCOL names the first bad one. */
static gs_status_t topk_sum_check(const gs__codec_params_t *p, const uint8_t *const *payloads,
                                  const size_t *lens, size_t nb, size_t *bad_out, char *why,
                                  size_t why_len)
{
    const size_t raw = topk_body_size(p);

    for (size_t q = 0; q < nb; q++) {
        gs__codec_hdr_t hdr;

        *bad_out = q;
        if (gs__codec_hdr_check(payloads[q], lens[q], GS_CODEC_TOPK, p, &hdr, why, why_len) !=
            GS_OK) {
            return GS_ERR_PROTOCOL;
        }
        if (((hdr.flags & GS_CODEC_WIRE_FLAG_ZSTD) != 0) || (hdr.body_len != (uint64_t)raw)) {
            snprintf(why, why_len, "%s, %llu body bytes where the codec needs %zu",
                     ((hdr.flags & GS_CODEC_WIRE_FLAG_ZSTD) != 0) ? "zstd-compressed"
                                                                  : "not compressed",
                     (unsigned long long)hdr.body_len, raw);
            return GS_ERR_PROTOCOL;
        }
        if (topk_check(p, payloads[q] + GS_CODEC_HEADER_BYTES) != GS_OK) {
            snprintf(why, why_len, "an index is out of range or out of order");
            return GS_ERR_PROTOCOL;
        }
    }
    return GS_OK;
}

gs_status_t gs__codec_topk_sum(const gs__codec_params_t *p, const uint8_t *const *payloads,
                               const size_t *lens, size_t nb, const float *scale, float *dst,
                               size_t *cursor, size_t *bad_out, char *why, size_t why_len)
{
    const size_t k = p->param;
    gs_status_t status;

    status = topk_sum_check(p, payloads, lens, nb, bad_out, why, why_len);
    if (status != GS_OK) {
        return status;
    }
    memset(cursor, 0, nb * sizeof(size_t));
    for (size_t lo = 0; lo < p->count; lo += TOPK_SUM_BLOCK) {
        const size_t hi = (p->count - lo < TOPK_SUM_BLOCK) ? p->count : lo + TOPK_SUM_BLOCK;

        memset(dst + lo, 0, (hi - lo) * sizeof(float));
        for (size_t q = 0; q < nb; q++) {
            const uint8_t *body = payloads[q] + GS_CODEC_HEADER_BYTES;
            size_t j = cursor[q];

            while ((j < k) && (gs__codec_load_u32(body + j * sizeof(uint32_t)) < hi)) {
                j++;
            }
            topk_add_pairs(body, k, cursor[q], j, 1.0f, dst);
            cursor[q] = j;
        }
        if (scale != NULL) {
            const float s = *scale;

            for (size_t i = lo; i < hi; i++) {
                dst[i] *= s;
            }
        }
    }
    return GS_OK;
}

const gs__codec_ops_t gs__codec_topk_ops = {
    .name = "topk",
    .wire_id = GS_CODEC_TOPK,
    .flags = GS_CODEC_F_LOSSY | GS_CODEC_F_NEEDS_EF | GS_CODEC_F_SPARSE,
    .encoded_size = topk_body_size,
    .encode = topk_encode,
    .decode_accumulate = topk_decode,
    .encode_ef = topk_encode_ef,
};
