/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hand-vectorised codec kernels for x86-64 (AVX2, and F16C for fp16),
 * chosen at run time: gs__codec_isa() says whether the CPU has them, and
 * each codec calls its kernel here when it does, its plain C loop
 * otherwise. The compiler does not vectorise these loops by itself (16-bit
 * stores through memcpy, bit unpacking, the fp16 rounding select, the
 * top-k histograms, qsgd's hash and nibbles), which left them at 0.4-3.3
 * GB/s.
 *
 * Every kernel gives the same bits as the plain C loop it replaces
 * (tests/unit/test_codec_simd.c compares both on every length up to 70,
 * odd offsets, NaN, inf and subnormal patterns, heavy ties for topk):
 *   - fp16: VCVTPS2PH with round-to-nearest-even and VCVTPH2PS agree with
 *     core/dtype.c's converters on every value, subnormals and NaN
 *     payloads included (a NaN becomes quiet, its top payload bits kept).
 *   - bf16: the same integer rounding as the scalar code, 8 lanes at once.
 *   - int8: max |x| by VMAXPS (a block with a NaN goes back to the plain
 *     loop, which picks the NaN the scale carries), codes by the same
 *     multiply, magic-number rounding and clamps, packed with saturation
 *     (never reached: the clamp comes first).
 *   - topk: the same exact threshold and tie count as codec_topk.c's
 *     radix select, found with 11/11/9-bit levels whose passes test 8 keys
 *     at a time against a lower bound from a strided sample (only the keys
 *     above it reach a histogram); then the same index-order selection.
 *     When the sample's bound leaves fewer than k keys, the plain select
 *     runs instead. The one-pass path of codec_topk.c uses the collect
 *     kernel: the (optional) residual add, the key test against a bound and
 *     a left-pack of the hit lanes' indices (a 256-entry permutation table)
 *     into the body, 8 elements a step.
 *   - sign: bit i of the byte is the sign test x < 0 (ordered, so -0 and
 *     NaN give 0), by VMOVMSKPS; decode rebuilds +-scale by XOR of the
 *     sign bit. The error-feedback encode packs and updates the residual
 *     from the same compare (pack_update), for blocks whose scale is not
 *     NaN.
 *   - qsgd: the noise is counter-based (hash32 of the global index plus
 *     the seed's key, codec_qsgd.c), so 8 lanes draw exactly the plain
 *     loop's u with two VPMULLDs; then the same multiply and add (no
 *     FMA), the same clamp (MINPS: a NaN goes to the top level, like the
 *     plain compare), truncation and sign; codes packed to bytes as int8
 *     does, or to nibbles in 16-bit lanes. 32 elements a step; the
 *     error-feedback variant updates the residual from the same codes.
 *     Decode sign-extends 8 nibbles of one 32-bit load with VPSLLVD and
 *     an arithmetic shift. The caller runs the plain loop on what the
 *     kernels leave (a partial step, a nibble-odd block start).
 * fp16 and bf16 tails (n % 8 elements) go through the same vector step on
 * a padded copy; the other kernels finish with the plain loop's arithmetic.
 */
#include "compress/codec.h"
#include "core/reduce_cpu.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define GS_CODEC_X86 1
#include <immintrin.h>
#endif

/* Test hook: 0 = detect, 1 = force plain C (tests/unit/test_codec_simd.c). */
int gs__codec_force_scalar;

#if defined(GS_CODEC_X86)

#define SIMD_TARGET __attribute__((target("avx2,f16c")))
#define SIMD_LANES 8

/* The CPU check is core's (reduce_cpu.c), shared with the reductions. */
int gs__codec_isa(void)
{
    return (gs__codec_force_scalar == 0) && gs__cpu_has_avx2_f16c();
}

/* ---- fp16 ------------------------------------------------------------ */

SIMD_TARGET static inline void f16_enc_step(const float *x, uint8_t *out)
{
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x), _MM_FROUND_TO_NEAREST_INT);

    _mm_storeu_si128((__m128i *)(void *)out, h);
}

/* Run an 8-lane f32 -> 16-bit step over n elements; the tail goes through
 * the same step on a zero-padded copy. */
typedef void (*enc16_step_t)(const float *x, uint8_t *out);

SIMD_TARGET static inline __attribute__((always_inline)) void
enc16_run(const float *x, size_t n, uint8_t *out, enc16_step_t step)
{
    const size_t body = n - n % SIMD_LANES;
    size_t i;

    for (i = 0; i < body; i += SIMD_LANES) {
        step(x + i, out + 2 * i);
    }
    if (body < n) {
        float t[SIMD_LANES] = {0};
        uint8_t o[2 * SIMD_LANES];

        memcpy(t, x + body, (n - body) * sizeof(float));
        step(t, o);
        memcpy(out + 2 * body, o, (n - body) * 2);
    }
}

SIMD_TARGET void gs__codec_f16_encode_simd(const float *x, size_t n, uint8_t *out)
{
    enc16_run(x, n, out, f16_enc_step);
}

SIMD_TARGET static inline void f16_dec_step(const uint8_t *in, float *dst, int add, __m256 alpha)
{
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)in));

    if (add) {
        _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_loadu_ps(dst), _mm256_mul_ps(alpha, v)));
    } else {
        _mm256_storeu_ps(dst, v);
    }
}

SIMD_TARGET void gs__codec_f16_decode_simd(const uint8_t *in, size_t n, float *dst, int add,
                                           float alpha)
{
    const __m256 va = _mm256_set1_ps(alpha);
    const size_t body = n - n % SIMD_LANES;
    size_t i;

    for (i = 0; i < body; i += SIMD_LANES) {
        f16_dec_step(in + 2 * i, dst + i, add, va);
    }
    if (body < n) {
        uint8_t t[2 * SIMD_LANES] = {0};
        float d[SIMD_LANES] = {0};

        memcpy(t, in + 2 * body, (n - body) * 2);
        memcpy(d, dst + body, (n - body) * sizeof(float));
        f16_dec_step(t, d, add, va);
        memcpy(dst + body, d, (n - body) * sizeof(float));
    }
}

/* ---- bf16 ------------------------------------------------------------ */

SIMD_TARGET static inline void bf16_enc_step(const float *x, uint8_t *out)
{
    const __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)x);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    /* Pack the 32-bit lanes (all <= 0xffff) to 16 bits, then undo the
     * per-128-bit-lane interleave of packus. */
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);

    _mm_storeu_si128((__m128i *)(void *)out, _mm256_castsi256_si128(p));
}

SIMD_TARGET void gs__codec_bf16_encode_simd(const float *x, size_t n, uint8_t *out)
{
    enc16_run(x, n, out, bf16_enc_step);
}

/* ---- sign ------------------------------------------------------------ */

SIMD_TARGET void gs__codec_sign_pack_simd(const float *x, size_t nbytes, uint8_t *bits)
{
    const __m256 zero = _mm256_setzero_ps();
    size_t j;

    for (j = 0; j < nbytes; j++) {
        const __m256 lt = _mm256_cmp_ps(_mm256_loadu_ps(x + 8 * j), zero, _CMP_LT_OQ);

        bits[j] = (uint8_t)_mm256_movemask_ps(lt);
    }
}

/* dst[0 .. 8) = +-s (bit t of @p byte set: -s), stored or added. */
SIMD_TARGET static inline void sign_unpack_step(unsigned byte, __m256 s, float *dst, int add)
{
    const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i hit =
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)byte), sel), sel);
    const __m256i sbit = _mm256_and_si256(hit, _mm256_set1_epi32((int)0x80000000u));
    const __m256 v = _mm256_xor_ps(s, _mm256_castsi256_ps(sbit));

    if (add) {
        _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_loadu_ps(dst), v));
    } else {
        _mm256_storeu_ps(dst, v);
    }
}

SIMD_TARGET void gs__codec_sign_unpack_simd(const uint8_t *bits, size_t nbytes, float s, float *dst,
                                            int add)
{
    const __m256 vs = _mm256_set1_ps(s);
    size_t j;

    for (j = 0; j < nbytes; j++) {
        sign_unpack_step(bits[j], vs, dst + 8 * j, add);
    }
}

SIMD_TARGET void gs__codec_sign_pack_update_simd(float *r, size_t nbytes, float s, uint8_t *bits)
{
    const __m256 zero = _mm256_setzero_ps(), vs = _mm256_set1_ps(s);
    const __m256 sbit = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    size_t j;

    /* The lanes of the compare are the bits of the byte: the same +-s as
     * sign_unpack_step builds from the stored byte. */
    for (j = 0; j < nbytes; j++) {
        const __m256 v = _mm256_loadu_ps(r + 8 * j);
        const __m256 lt = _mm256_cmp_ps(v, zero, _CMP_LT_OQ);

        bits[j] = (uint8_t)_mm256_movemask_ps(lt);
        _mm256_storeu_ps(r + 8 * j, _mm256_add_ps(v, _mm256_xor_ps(vs, _mm256_and_ps(lt, sbit))));
    }
}

/* ---- int8 ------------------------------------------------------------ */

SIMD_TARGET int gs__codec_max_abs_simd(const float *x, size_t n, float *m_out)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
    float lanes[SIMD_LANES], r = 0.0f;
    size_t i;

    for (i = 0; i + SIMD_LANES <= n; i += SIMD_LANES) {
        const __m256 v = _mm256_loadu_ps(x + i);

        m = _mm256_max_ps(m, _mm256_and_ps(v, absmask));
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    if (_mm256_movemask_ps(nan) != 0) {
        return 0; /* the plain loop decides which NaN the scale carries */
    }
    _mm256_storeu_ps(lanes, m);
    for (int l = 0; l < SIMD_LANES; l++) {
        r = (lanes[l] > r) ? lanes[l] : r;
    }
    for (; i < n; i++) {
        const float a = __builtin_fabsf(x[i]);

        if (a != a) {
            return 0;
        }
        r = (a > r) ? a : r;
    }
    *m_out = r;
    return 1;
}

/* Codes of 8 elements: round_even(x * inv) clamped to [-127, 127] (NaN
 * to -127, as the plain loop's compares do), as 8 int32 lanes. */
SIMD_TARGET static inline __m256i int8_codes(const float *x, __m256 inv)
{
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    __m256 v = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x), inv), magic), magic);

    v = _mm256_max_ps(v, _mm256_set1_ps(-127.0f)); /* NaN -> -127 */
    v = _mm256_min_ps(v, _mm256_set1_ps(127.0f));
    return _mm256_cvttps_epi32(v);
}

SIMD_TARGET void gs__codec_int8_quantize_simd(const float *x, size_t n, float inv, int8_t *q)
{
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t i;

    for (i = 0; i + 32 <= n; i += 32) {
        const __m256i a = int8_codes(x + i, vinv), b = int8_codes(x + i + 8, vinv);
        const __m256i c = int8_codes(x + i + 16, vinv), d = int8_codes(x + i + 24, vinv);
        /* packs works per 128-bit lane: fix the order with one permute. */
        const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
        const __m256i p = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), order);

        _mm256_storeu_si256((__m256i *)(void *)(q + i), p);
    }
    for (; i < n; i++) {
        float v = (x[i] * inv + 12582912.0f) - 12582912.0f;

        v = (v >= -127.0f) ? v : -127.0f;
        v = (v <= 127.0f) ? v : 127.0f;
        q[i] = (int8_t)v;
    }
}

/* ---- fused error feedback --------------------------------------------- */

SIMD_TARGET int gs__codec_add_max_abs_simd(const float *x, float *r, size_t n, float *m_out)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
    float lanes[SIMD_LANES], best = 0.0f;
    int has_nan = 0;
    size_t i;

    for (i = 0; i + SIMD_LANES <= n; i += SIMD_LANES) {
        const __m256 v = _mm256_add_ps(_mm256_loadu_ps(r + i), _mm256_loadu_ps(x + i));

        _mm256_storeu_ps(r + i, v);
        m = _mm256_max_ps(m, _mm256_and_ps(v, absmask));
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    _mm256_storeu_ps(lanes, m);
    for (int l = 0; l < SIMD_LANES; l++) {
        best = (lanes[l] > best) ? lanes[l] : best;
    }
    for (; i < n; i++) {
        const float a = __builtin_fabsf(r[i] += x[i]);

        has_nan |= (a != a);
        best = (a > best) ? a : best;
    }
    if (has_nan || (_mm256_movemask_ps(nan) != 0)) {
        return 0; /* every add is done; the plain loop picks the NaN */
    }
    *m_out = best;
    return 1;
}

SIMD_TARGET float gs__codec_add_mean_abs_simd(const float *x, float *r, size_t n)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 acc = _mm256_setzero_ps();
    float p[SIMD_LANES], s = 0.0f;
    size_t i;

    /* Lane j is the plain loop's partial p[j]: the same adds in the same order. */
    for (i = 0; i + SIMD_LANES <= n; i += SIMD_LANES) {
        __m256 v = _mm256_loadu_ps(r + i);

        if (x != NULL) {
            v = _mm256_add_ps(v, _mm256_loadu_ps(x + i));
            _mm256_storeu_ps(r + i, v);
        }
        acc = _mm256_add_ps(acc, _mm256_and_ps(v, absmask));
    }
    _mm256_storeu_ps(p, acc);
    for (; i < n; i++) {
        if (x != NULL) {
            r[i] += x[i];
        }
        p[i % SIMD_LANES] += __builtin_fabsf(r[i]);
    }
    for (i = 0; i < SIMD_LANES; i++) {
        s += p[i];
    }
    return s / (float)n;
}

/* ---- topk ------------------------------------------------------------ */

/* Bit mask of the 8 elements at x whose key (|x| bits) satisfies
 * (key & mask) == prefix and key >= lo (lo < 2^31). */
SIMD_TARGET static inline unsigned topk_hits(const float *x, __m256i mask, __m256i prefix,
                                             __m256i lo_minus_1)
{
    const __m256i key = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)x),
                                         _mm256_set1_epi32(0x7fffffff));
    const __m256i in = _mm256_and_si256(
        _mm256_cmpeq_epi32(_mm256_and_si256(key, mask), prefix),
        _mm256_cmpgt_epi32(key, lo_minus_1)); /* keys are < 2^31: signed compare is fine */

    return (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(in));
}

static inline uint32_t topk_key(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u & 0x7fffffffu;
}

/* hist[(key >> shift) & (bins - 1)]++ for every element that topk_hits
 * accepts; returns how many it accepted. */
SIMD_TARGET static size_t topk_hist(const float *x, size_t n, uint32_t mask, uint32_t prefix,
                                    uint32_t lo, int shift, uint32_t bins, uint32_t *hist)
{
    const __m256i vm = _mm256_set1_epi32((int)mask), vp = _mm256_set1_epi32((int)prefix);
    const __m256i vlo = _mm256_set1_epi32((int)lo - 1);
    size_t i, hits = 0;

    for (i = 0; i + SIMD_LANES <= n; i += SIMD_LANES) {
        unsigned b = topk_hits(x + i, vm, vp, vlo);

        while (b != 0) {
            const uint32_t key = topk_key(x[i + (size_t)__builtin_ctz(b)]);

            hist[(key >> shift) & (bins - 1)]++;
            hits++;
            b &= b - 1;
        }
    }
    for (; i < n; i++) {
        const uint32_t key = topk_key(x[i]);

        if (((key & mask) == prefix) && (key >= lo)) {
            hist[(key >> shift) & (bins - 1)]++;
            hits++;
        }
    }
    return hits;
}

/* Walk hist from the top: the bin holding the need-th largest, and how
 * many of that bin are still needed (the plain radix select's walk). */
static uint32_t topk_walk(const uint32_t *hist, uint32_t bins, size_t *need)
{
    uint32_t d;

    for (d = bins - 1; d > 0; d--) {
        if (hist[d] >= *need) {
            break;
        }
        *need -= hist[d];
    }
    return d;
}

int gs__codec_topk_threshold_simd(const float *x, size_t n, size_t k, uint32_t *t_out,
                                  size_t *ties_out)
{
    /* Levels of the radix select on the 31-bit key: bits 30..20, 19..9, 8..0. */
    static const int shift[3] = {20, 9, 0};
    static const uint32_t bins[3] = {2048, 2048, 512};
    uint32_t hist[2048];
    uint32_t prefix = 0, mask = 0, lo = 0;
    size_t need = k;

    /* A lower bound from a strided sample of about 4096 keys: the top bin
     * holding about 2k + 64 of the n keys (scaled). Exactness does not
     * depend on it; it only lets the passes below skip most elements. */
    if (n >= 65536) {
        const size_t stride = n / 4096;
        size_t acc = 0;
        uint32_t d;

        memset(hist, 0, sizeof(hist));
        for (size_t i = 0; i < n; i += stride) {
            hist[topk_key(x[i]) >> 20]++;
        }
        for (d = 2047; d > 0; d--) {
            acc += hist[d];
            if (acc * stride >= 2 * k + 64) {
                break;
            }
        }
        lo = d << 20;
    }
    for (int level = 0; level < 3; level++) {
        size_t hits;

        memset(hist, 0, bins[level] * sizeof(uint32_t));
        hits = topk_hist(x, n, mask, prefix, lo, shift[level], bins[level], hist);
        if ((level == 0) && (hits < k)) {
            return 0; /* the sample overshot: the plain select handles it */
        }
        prefix |= topk_walk(hist, bins[level], &need) << shift[level];
        mask |= (bins[level] - 1) << shift[level];
        lo = 0; /* the prefix now implies key >= the old bound */
    }
    *t_out = prefix;
    *ties_out = need;
    return 1;
}

SIMD_TARGET void gs__codec_topk_select_simd(const float *x, size_t n, size_t k, uint32_t t,
                                            size_t ties, uint8_t *body)
{
    const __m256i none = _mm256_setzero_si256(), vlo = _mm256_set1_epi32((int)t - 1);
    uint8_t *vals = body + k * sizeof(uint32_t);
    size_t i, j = 0;

    /* Elements with key >= t, in index order, until k are kept. */
    for (i = 0; (i + SIMD_LANES <= n) && (j < k); i += SIMD_LANES) {
        unsigned b = topk_hits(x + i, none, none, vlo);

        while ((b != 0) && (j < k)) {
            const size_t e = i + (size_t)__builtin_ctz(b);
            const uint32_t key = topk_key(x[e]);

            b &= b - 1;
            if ((key > t) || (ties > 0)) {
                const uint32_t idx = (uint32_t)e;

                ties -= (key == t) ? 1 : 0;
                memcpy(body + j * sizeof(uint32_t), &idx, sizeof(idx));
                memcpy(vals + j * sizeof(float), &x[e], sizeof(float));
                j++;
            }
        }
    }
    for (; (i < n) && (j < k); i++) {
        const uint32_t key = topk_key(x[i]);

        if ((key > t) || ((key == t) && (ties > 0))) {
            const uint32_t idx = (uint32_t)i;

            ties -= (key == t) ? 1 : 0;
            memcpy(body + j * sizeof(uint32_t), &idx, sizeof(idx));
            memcpy(vals + j * sizeof(float), &x[i], sizeof(float));
            j++;
        }
    }
}

/* lut[b]: the lane numbers of the set bits of b, lowest first, one byte
 * each (for the left-pack of the candidate indices). */
static void topk_pack_lut(uint64_t lut[256])
{
    for (unsigned b = 0; b < 256; b++) {
        uint64_t e = 0;
        unsigned c = 0;

        for (unsigned t = 0; t < 8; t++) {
            if ((b >> t) & 1u) {
                e |= (uint64_t)t << (8 * c++);
            }
        }
        lut[b] = e;
    }
}

SIMD_TARGET size_t gs__codec_topk_collect_simd(const float *a, const float *b, float *out, size_t n,
                                               uint32_t lo, uint8_t *cand, size_t cap)
{
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff), vlo = _mm256_set1_epi32((int)lo - 1);
    const __m256i step = _mm256_set1_epi32(SIMD_LANES);
    __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    uint64_t lut[256];
    size_t i, m = 0;

    topk_pack_lut(lut);
    for (i = 0; i + SIMD_LANES <= n; i += SIMD_LANES) {
        __m256 v = _mm256_loadu_ps(a + i);
        unsigned hit;

        if (b != NULL) {
            v = _mm256_add_ps(v, _mm256_loadu_ps(b + i));
            _mm256_storeu_ps(out + i, v);
        }
        /* keys are < 2^31: the signed compare is fine, and lo = 0 takes all */
        hit = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
            _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_castps_si256(v), absmask), vlo)));
        if ((hit != 0) && (m + SIMD_LANES <= cap)) {
            /* Left-pack the hit lanes' indices: 8 stored, popcount kept. */
            const __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)lut[hit]));

            _mm256_storeu_si256((__m256i *)(void *)(cand + m * sizeof(uint32_t)),
                                _mm256_permutevar8x32_epi32(idx, perm));
            m += (size_t)__builtin_popcount(hit);
        } else {
            for (; hit != 0; hit &= hit - 1) {
                const uint32_t e = (uint32_t)(i + (size_t)__builtin_ctz(hit));

                if (m < cap) {
                    memcpy(cand + m * sizeof(uint32_t), &e, sizeof(e));
                }
                m++;
            }
        }
        idx = _mm256_add_epi32(idx, step);
    }
    for (; i < n; i++) {
        float v = a[i];

        if (b != NULL) {
            v = a[i] + b[i];
            out[i] = v;
        }
        if (topk_key(v) >= lo) {
            const uint32_t e = (uint32_t)i;

            if (m < cap) {
                memcpy(cand + m * sizeof(uint32_t), &e, sizeof(e));
            }
            m++;
        }
    }
    return m;
}

/* ---- qsgd ------------------------------------------------------------ */

/* Codes of the 8 elements x whose global indices are idx (mod 2^32), as
 * codec_qsgd.c's plain loop draws them: u = (hash32(idx + key) >> 8) / 2^24
 * (exact: a 24-bit integer times a power of two), t = |x| inv + u (no FMA:
 * the same two roundings), min(t, levels) (MINPS returns its second
 * operand for a NaN t, as the plain compare does), truncated, and negated
 * where x < 0 (ordered: -0 and NaN keep +l). 8 int32 lanes. */
SIMD_TARGET static inline __m256i qsgd_codes8(__m256 x, __m256i idx, __m256i key, __m256 inv,
                                              __m256 levels)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256i h = _mm256_add_epi32(idx, key);
    __m256 u, t;
    __m256i l, neg;

    /* gs__codec_hash32, 8 lanes at once */
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32((int)0x7feb352du));
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 15));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32((int)0x846ca68bu));
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
    u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)),
                      _mm256_set1_ps(1.0f / 16777216.0f));
    t = _mm256_add_ps(_mm256_mul_ps(_mm256_and_ps(x, absmask), inv), u);
    l = _mm256_cvttps_epi32(_mm256_min_ps(t, levels));
    neg = _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
    return _mm256_sub_epi32(_mm256_xor_si256(l, neg), neg); /* neg ? -l : l */
}

/* The 32 codes of x[0 .. 32) as bytes in element order, and with upd set,
 * r[i] += (float)code * s (the residual update of decode_accumulate). */
SIMD_TARGET static inline __attribute__((always_inline)) __m256i
qsgd_step32(const float *x, float *r, __m256i idx, __m256i key, __m256 inv, __m256 levels, __m256 s,
            int upd)
{
    const __m256i eight = _mm256_set1_epi32(SIMD_LANES);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256i c[4];

    for (int v = 0; v < 4; v++) {
        const __m256 xv = _mm256_loadu_ps(x + SIMD_LANES * v);

        c[v] = qsgd_codes8(xv, idx, key, inv, levels);
        if (upd) {
            _mm256_storeu_ps(r + SIMD_LANES * v,
                             _mm256_add_ps(xv, _mm256_mul_ps(_mm256_cvtepi32_ps(c[v]), s)));
        }
        idx = _mm256_add_epi32(idx, eight);
    }
    /* |codes| <= 127: the saturating packs only narrow; one permute puts
     * the 128-bit lanes of packs back in element order. */
    return _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3])), order);
}

/* 32 code bytes (each -7 .. 7) as 16 bytes of nibbles: element 2j in the
 * low nibble of byte j. */
SIMD_TARGET static inline __m128i qsgd_nibbles32(__m256i b)
{
    const __m256i lo = _mm256_and_si256(b, _mm256_set1_epi16(0x000f));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), _mm256_set1_epi16(0x00f0));
    const __m256i w = _mm256_or_si256(lo, hi); /* 16 words, each 0 .. 255 */

    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi16(w, w), 0x08));
}

/* With upd, the residual r (the same array as x) is updated as well; the flag,
 * not r != NULL, says so, which also tells the static analyzer that r is then
 * never NULL. */
SIMD_TARGET static inline __attribute__((always_inline)) size_t
qsgd_quantize_run(const float *x, float *r, int upd, size_t n, size_t start, uint32_t key,
                  float inv, float levels, int nib, float s, uint8_t *codes)
{
    const __m256i vkey = _mm256_set1_epi32((int)key);
    const __m256 vinv = _mm256_set1_ps(inv), vlev = _mm256_set1_ps(levels);
    const __m256 vs = _mm256_set1_ps(s);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    size_t i;

    for (i = 0; i + 32 <= n; i += 32) {
        /* The plain loop's uint32_t index: the global index mod 2^32. */
        const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)(start + i)), lane);
        const __m256i b = qsgd_step32(x + i, upd ? r + i : NULL, idx, vkey, vinv, vlev, vs, upd);

        if (nib) {
            _mm_storeu_si128((__m128i *)(void *)(codes + (start + i) / 2), qsgd_nibbles32(b));
        } else {
            _mm256_storeu_si256((__m256i *)(void *)(codes + start + i), b);
        }
    }
    return i;
}

SIMD_TARGET size_t gs__codec_qsgd_quantize_simd(const float *x, size_t n, size_t start,
                                                uint32_t key, float inv, float levels, int nib,
                                                uint8_t *codes)
{
    return qsgd_quantize_run(x, NULL, 0, n, start, key, inv, levels, nib, 0.0f, codes);
}

SIMD_TARGET size_t gs__codec_qsgd_quantize_update_simd(float *r, size_t n, size_t start,
                                                       uint32_t key, float inv, float levels,
                                                       int nib, float s, uint8_t *codes)
{
    return qsgd_quantize_run(r, r, 1, n, start, key, inv, levels, nib, s, codes);
}

SIMD_TARGET size_t gs__codec_qsgd_dequant_simd(const uint8_t *codes, size_t start, size_t n,
                                               int nib, float s, float *dst, int add)
{
    const __m256i shl = _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0);
    const __m256 vs = _mm256_set1_ps(s);
    size_t i;

    for (i = 0; i + SIMD_LANES <= n; i += SIMD_LANES) {
        __m256i q;
        __m256 v;

        if (nib) {
            /* 4 bytes hold the 8 nibbles: move each to the top of its
             * lane, then an arithmetic shift sign-extends it. */
            uint32_t w;

            memcpy(&w, codes + (start + i) / 2, sizeof(w));
            q = _mm256_srai_epi32(_mm256_sllv_epi32(_mm256_set1_epi32((int)w), shl), 28);
        } else {
            q = _mm256_cvtepi8_epi32(
                _mm_loadl_epi64((const __m128i *)(const void *)(codes + start + i)));
        }
        v = _mm256_mul_ps(_mm256_cvtepi32_ps(q), vs);
        if (add) {
            v = _mm256_add_ps(_mm256_loadu_ps(dst + i), v);
        }
        _mm256_storeu_ps(dst + i, v);
    }
    return i;
}

#else /* !GS_CODEC_X86: the plain C loops only */

int gs__codec_isa(void)
{
    return 0;
}

void gs__codec_f16_encode_simd(const float *x, size_t n, uint8_t *out)
{
    (void)x, (void)n, (void)out;
}

void gs__codec_f16_decode_simd(const uint8_t *in, size_t n, float *dst, int add, float alpha)
{
    (void)in, (void)n, (void)dst, (void)add, (void)alpha;
}

void gs__codec_bf16_encode_simd(const float *x, size_t n, uint8_t *out)
{
    (void)x, (void)n, (void)out;
}

void gs__codec_sign_pack_simd(const float *x, size_t nbytes, uint8_t *bits)
{
    (void)x, (void)nbytes, (void)bits;
}

void gs__codec_sign_unpack_simd(const uint8_t *bits, size_t nbytes, float s, float *dst, int add)
{
    (void)bits, (void)nbytes, (void)s, (void)dst, (void)add;
}

void gs__codec_sign_pack_update_simd(float *r, size_t nbytes, float s, uint8_t *bits)
{
    (void)r, (void)nbytes, (void)s, (void)bits;
}

int gs__codec_max_abs_simd(const float *x, size_t n, float *m_out)
{
    (void)x, (void)n, (void)m_out;
    return 0;
}

void gs__codec_int8_quantize_simd(const float *x, size_t n, float inv, int8_t *q)
{
    (void)x, (void)n, (void)inv, (void)q;
}

int gs__codec_add_max_abs_simd(const float *x, float *r, size_t n, float *m_out)
{
    (void)x, (void)r, (void)n, (void)m_out;
    return 0;
}

float gs__codec_add_mean_abs_simd(const float *x, float *r, size_t n)
{
    (void)x, (void)r, (void)n;
    return 0.0f;
}

int gs__codec_topk_threshold_simd(const float *x, size_t n, size_t k, uint32_t *t_out,
                                  size_t *ties_out)
{
    (void)x, (void)n, (void)k, (void)t_out, (void)ties_out;
    return 0;
}

void gs__codec_topk_select_simd(const float *x, size_t n, size_t k, uint32_t t, size_t ties,
                                uint8_t *body)
{
    (void)x, (void)n, (void)k, (void)t, (void)ties, (void)body;
}

size_t gs__codec_topk_collect_simd(const float *a, const float *b, float *out, size_t n,
                                   uint32_t lo, uint8_t *cand, size_t cap)
{
    (void)a, (void)b, (void)out, (void)n, (void)lo, (void)cand, (void)cap;
    return 0;
}

size_t gs__codec_qsgd_quantize_simd(const float *x, size_t n, size_t start, uint32_t key, float inv,
                                    float levels, int nib, uint8_t *codes)
{
    (void)x, (void)n, (void)start, (void)key, (void)inv, (void)levels, (void)nib, (void)codes;
    return 0;
}

size_t gs__codec_qsgd_quantize_update_simd(float *r, size_t n, size_t start, uint32_t key,
                                           float inv, float levels, int nib, float s,
                                           uint8_t *codes)
{
    (void)r, (void)n, (void)start, (void)key, (void)inv, (void)levels, (void)nib, (void)s;
    (void)codes;
    return 0;
}

size_t gs__codec_qsgd_dequant_simd(const uint8_t *codes, size_t start, size_t n, int nib, float s,
                                   float *dst, int add)
{
    (void)codes, (void)start, (void)n, (void)nib, (void)s, (void)dst, (void)add;
    return 0;
}

#endif /* GS_CODEC_X86 */
