/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel bodies of the sparse codecs: random-k (encode, decode) and top-k
 * (the threshold select, the index-ordered compaction, and the decode of
 * hostile bodies; codec_kernels.h has the contract). Included by
 * codec_body.h only, after its types and helpers.
 */
#ifndef GS_KERNELS_CODEC_SPARSE_BODY_H
#define GS_KERNELS_CODEC_SPARSE_BODY_H

#ifndef GS_KERNELS_CODEC_BODY_H
#error "include codec_body.h, not codec_sparse_body.h"
#endif

/* ---------------------------------------------------------------------- */
/* random-k, and the helpers of the sparse decoders                       */
/* ---------------------------------------------------------------------- */

/* residual += src. */
GS_KFN void gs_kb_add(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    const size_t nchunks = (a.count + 3) / 4;

    (void)ph;
    (void)sm;
    for (size_t c = gs_kthread_gid(t); c < nchunks; c += gs_kthread_gstride(t)) {
        const size_t i0 = 4 * c;

        if (a.vec && (i0 + 4 <= a.count)) {
            float x[4], r[4];

            gs_kc_ld4(a.src + i0, x);
            gs_kc_ld4(a.res + i0, r);
            for (int e = 0; e < 4; e++) {
                r[e] = gs_km_addf(r[e], x[e]);
            }
            gs_kc_st4(a.res + i0, r);
        } else {
            for (size_t i = i0; i < gs_kc_min(i0 + 4, a.count); i++) {
                a.res[i] = gs_km_addf(a.res[i], a.src[i]);
            }
        }
    }
}

/* Seed, then value j = src[index of stratum j]; with a residual (already
 * holding the sum: src == res) the drawn elements are sent and zeroed as
 * decode-accumulate with alpha -1 does. */
GS_KFN void gs_kb_randk_gather(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    const size_t k = a.param;

    (void)ph;
    (void)sm;
    if (gs_kthread_gid(t) == 0) {
        gs_km_st_u32(a.body, (uint32_t)a.seed);
        gs_km_st_u32(a.body + 4, (uint32_t)(a.seed >> 32));
    }
    for (size_t j = gs_kthread_gid(t); j < k; j += gs_kthread_gstride(t)) {
        const size_t idx = gs_km_randk_index(a.count, k, j, a.key);
        const float v = a.src[idx];

        gs_km_st_f32(a.body + 8 + 4 * j, v);
        if (a.res != NULL) {
            a.res[idx] = gs_km_acc(a.res[idx], a.minus_one, v);
        }
    }
}

/* dst = 0, unless *bad says the body is malformed. */
GS_KFN void gs_kb_zero(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    const size_t nchunks = (a.count + 3) / 4;
    const float z[4] = {0.0f, 0.0f, 0.0f, 0.0f};

    (void)ph;
    (void)sm;
    if ((a.bad != NULL) && (*(volatile int *)a.bad != 0)) {
        return;
    }
    for (size_t c = gs_kthread_gid(t); c < nchunks; c += gs_kthread_gstride(t)) {
        const size_t i0 = 4 * c;

        if (a.vec && (i0 + 4 <= a.count)) {
            gs_kc_st4(a.dst + i0, z);
        } else {
            for (size_t i = i0; i < gs_kc_min(i0 + 4, a.count); i++) {
                a.dst[i] = 0.0f;
            }
        }
    }
}

GS_KFN void gs_kb_randk_scatter(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    const size_t k = a.param;
    const uint64_t seed = (uint64_t)gs_km_ld_u32(a.in) | ((uint64_t)gs_km_ld_u32(a.in + 4) << 32);
    const uint32_t key = gs__codec_seed32(seed);

    (void)ph;
    (void)sm;
    for (size_t j = gs_kthread_gid(t); j < k; j += gs_kthread_gstride(t)) {
        const size_t idx = gs_km_randk_index(a.count, k, j, key);
        const float v = gs_km_ld_f32(a.in + 8 + 4 * j);

        a.dst[idx] = (a.mode == GS_K_CODEC_SET) ? v : gs_km_acc(a.dst[idx], a.alpha, v);
    }
}

/* ---------------------------------------------------------------------- */
/* top-k encode                                                           */
/* ---------------------------------------------------------------------- */

/* Bins and shift of the key digit of each level (31-bit keys: bits 30..20,
 * 19..9, 8..0). */
GS_KFN unsigned gs_kc_topk_bins(int level)
{
    return (level == 2) ? 512u : 2048u;
}

GS_KFN unsigned gs_kc_topk_shift(int level)
{
    return (level == 0) ? 20u : ((level == 1) ? 9u : 0u);
}

GS_KFN size_t gs_kc_topk_nchunks(size_t count, unsigned nthreads)
{
    const size_t chunk = (size_t)nthreads * GS_KC_TOPK_PER_THREAD;

    return (count + chunk - 1) / chunk;
}

/*
 * One block. Phase 0: zero both histograms; 1: the sample's keys (of
 * residual + src with error feedback, not yet added) into the shared one;
 * 2 (thread 0): the bound (the lowest 2^20-wide key bin with about 2k + 64
 * of the n keys at or above it, as codec_simd.c's estimate) and the state.
 */
GS_KFN void gs_kb_topk_sample(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    const size_t n = a.count, k = a.param;
    const size_t stride = (n >= 16 * GS_KC_TOPK_SAMPLES) ? n / GS_KC_TOPK_SAMPLES : 0;

    if (ph == 0) {
        for (unsigned b = t.thread; b < GS_KC_TOPK_BINS; b += t.nthreads) {
            sm->h.hist[b] = 0;
            a.wu[b] = 0;
        }
    } else if (ph == 1) {
        for (size_t s = t.thread; (stride > 0) && (s * stride < n); s += t.nthreads) {
            const size_t i = s * stride;
            const float v = (a.res != NULL) ? gs_km_addf(a.res[i], a.src[i]) : a.src[i];

            gs_kc_atomic_add(&sm->h.hist[gs_km_topk_key(v) >> 20], 1);
        }
    } else if (t.thread == 0) {
        uint32_t lo = 0;

        if (stride > 0) {
            size_t acc = 0;
            unsigned d;

            for (d = GS_KC_TOPK_BINS - 1; d > 0; d--) {
                acc += sm->h.hist[d];
                if (acc * stride >= 2 * k + 64) {
                    break;
                }
            }
            lo = (uint32_t)d << 20;
        }
        a.wu[GS_KC_TK_LO] = lo;
        a.wu[GS_KC_TK_PREFIX] = 0;
        a.wu[GS_KC_TK_MASK] = 0;
        a.wu[GS_KC_TK_NEED] = (uint32_t)k;
        a.wu[GS_KC_TK_HITS] = 0;
        a.wu[GS_KC_TK_REDO] = 0;
    }
}

/*
 * Histogram of the keys of one level (a.stage) into the workspace: keys >=
 * the bound for level 0, keys whose higher digits are the prefix found so
 * far for levels 1 and 2. Level 0 adds src into the residual on the way
 * (a.res set). Phase 0 zeroes the block's histogram, 1 counts, 2 adds it
 * into the global one. The level-0 rerun (a.redo) runs only when
 * TOPK_FIX asked for it.
 */
GS_KFN void gs_kb_topk_hist(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    const int level = a.stage;
    const unsigned bins = gs_kc_topk_bins(level), shift = gs_kc_topk_shift(level);

    if (a.redo && (*(volatile uint32_t *)&a.wu[GS_KC_TK_REDO] == 0)) {
        return;
    }
    if (ph == 0) {
        for (unsigned b = t.thread; b < bins; b += t.nthreads) {
            sm->h.hist[b] = 0;
        }
        if (t.thread == 0) {
            sm->h.hits = 0;
        }
    } else if (ph == 1) {
        const uint32_t lo = a.wu[GS_KC_TK_LO], prefix = a.wu[GS_KC_TK_PREFIX];
        const uint32_t mask = a.wu[GS_KC_TK_MASK];
        const size_t nchunks = (a.count + 3) / 4;
        uint32_t hits = 0;

        for (size_t c = gs_kthread_gid(t); c < nchunks; c += gs_kthread_gstride(t)) {
            const size_t i0 = 4 * c, i1 = gs_kc_min(i0 + 4, a.count);
            float v[4];

            if (a.vec && (i1 == i0 + 4) && (a.res == NULL)) {
                gs_kc_ld4(a.src + i0, v);
            } else {
                for (size_t i = i0; i < i1; i++) {
                    v[i - i0] = gs_kc_take(&a, i);
                }
            }
            for (size_t i = i0; i < i1; i++) {
                const uint32_t key = gs_km_topk_key(v[i - i0]);
                const int in = (level == 0) ? (key >= lo) : ((key & mask) == prefix);

                if (in) {
                    gs_kc_atomic_add(&sm->h.hist[(key >> shift) & (bins - 1)], 1);
                    hits++;
                }
            }
        }
        if ((level == 0) && (hits > 0)) {
            gs_kc_atomic_add(&sm->h.hits, hits);
        }
    } else {
        for (unsigned b = t.thread; b < bins; b += t.nthreads) {
            if (sm->h.hist[b] != 0) {
                gs_kc_atomic_add(&a.wu[b], sm->h.hist[b]);
            }
        }
        if ((level == 0) && (t.thread == 0) && (sm->h.hits != 0)) {
            gs_kc_atomic_add(&a.wu[GS_KC_TK_HITS], sm->h.hits);
        }
    }
}

/* One block. Phase 0 (thread 0): fewer than k keys at or above the bound
 * means the sample overshot: drop the bound and ask for the rerun; phase
 * 1: then clear the histogram for it. */
GS_KFN void gs_kb_topk_fix(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    (void)sm;
    if (ph == 0) {
        if ((t.thread == 0) && (a.wu[GS_KC_TK_HITS] < a.param)) {
            a.wu[GS_KC_TK_REDO] = 1;
            a.wu[GS_KC_TK_LO] = 0;
        }
    } else if (a.wu[GS_KC_TK_REDO] != 0) {
        for (unsigned b = t.thread; b < GS_KC_TOPK_BINS; b += t.nthreads) {
            a.wu[b] = 0;
        }
    }
}

/* One block. Phase 0 (thread 0): the digit of level a.stage holding the
 * key of rank need (from the top), as codec_topk.c's radix select walks
 * its histograms; phase 1 clears the histogram for the next level. After
 * level 2 the prefix is T and need the ties at T to keep. */
GS_KFN void gs_kb_topk_walk(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    const unsigned bins = gs_kc_topk_bins(a.stage), shift = gs_kc_topk_shift(a.stage);

    (void)sm;
    if (ph == 0) {
        if (t.thread == 0) {
            uint32_t need = a.wu[GS_KC_TK_NEED];
            unsigned d;

            for (d = bins - 1; d > 0; d--) {
                if (a.wu[d] >= need) {
                    break;
                }
                need -= a.wu[d];
            }
            a.wu[GS_KC_TK_PREFIX] |= (uint32_t)d << shift;
            a.wu[GS_KC_TK_MASK] |= (uint32_t)(bins - 1) << shift;
            a.wu[GS_KC_TK_NEED] = need;
        }
    } else {
        for (unsigned b = t.thread; b < GS_KC_TOPK_BINS; b += t.nthreads) {
            a.wu[b] = 0;
        }
    }
}

/* Hillis-Steele step @p s (1-based) of an inclusive scan of both count
 * arrays: buffer (s - 1) & 1 into buffer s & 1. */
GS_KFN void gs_kc_scan_step(gs__kthread_t t, gs__kc_smem_t *sm, unsigned s)
{
    const unsigned from = (s - 1) & 1u, to = s & 1u, d = 1u << (s - 1);
    const unsigned i = t.thread;

    sm->s.gt[to][i] = sm->s.gt[from][i] + ((i >= d) ? sm->s.gt[from][i - d] : 0u);
    sm->s.eq[to][i] = sm->s.eq[from][i] + ((i >= d) ? sm->s.eq[from][i - d] : 0u);
}

/*
 * Chunks of nthreads x 16 elements, thread i owning 16 consecutive ones.
 * Phases per chunk: 0 count the keys above T and equal to T; 1 .. log2(T)
 * scan them across the block; last: stage 0 stores the chunk's totals,
 * stage 1 writes the kept elements. An element's slot is the number of
 * kept ones before it: (keys above T before it) + min(keys equal to T
 * before it, ties), the chunk's share from the scanned chunk offsets.
 */
GS_KFN void gs_kb_topk_chunks(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    const unsigned lg = gs_kc_log2(t.nthreads), nsub = lg + 2;
    const size_t chunk = (size_t)t.nthreads * GS_KC_TOPK_PER_THREAD;
    const size_t nchunks = gs_kc_topk_nchunks(a.count, t.nthreads);
    const size_t c = ((size_t)ph / nsub) * t.nblocks + t.block;
    const unsigned sub = (unsigned)ph % nsub;
    const uint32_t tk = a.wu[GS_KC_TK_PREFIX];
    float v[GS_KC_TOPK_PER_THREAD];
    size_t e0, e1;

    if (c >= nchunks) {
        return;
    }
    e0 = gs_kc_min(c * chunk + (size_t)t.thread * GS_KC_TOPK_PER_THREAD, a.count);
    e1 = gs_kc_min(e0 + GS_KC_TOPK_PER_THREAD, a.count);
    if ((sub != 0) && (sub <= lg)) {
        gs_kc_scan_step(t, sm, sub);
        return;
    }
    if ((sub != 0) && (a.stage == 0)) {
        if (t.thread == t.nthreads - 1) { /* the chunk's totals */
            a.wu[GS_KC_TK_CHUNKS + c] = sm->s.gt[lg & 1u][t.thread];
            a.wu[GS_KC_TK_CHUNKS + nchunks + c] = sm->s.eq[lg & 1u][t.thread];
        }
        return;
    }
    if (a.vec && (e1 == e0 + GS_KC_TOPK_PER_THREAD)) {
        for (unsigned q = 0; q < GS_KC_TOPK_PER_THREAD; q += 4) {
            gs_kc_ld4(a.src + e0 + q, v + q);
        }
    } else {
        for (unsigned q = 0; q < GS_KC_TOPK_PER_THREAD; q++) {
            v[q] = (e0 + q < e1) ? a.src[e0 + q] : 0.0f;
        }
    }
    if (sub == 0) {
        uint32_t gt = 0, eq = 0;

        for (unsigned q = 0; (q < GS_KC_TOPK_PER_THREAD) && (e0 + q < e1); q++) {
            const uint32_t key = gs_km_topk_key(v[q]);

            gt += (key > tk) ? 1u : 0u;
            eq += (key == tk) ? 1u : 0u;
        }
        sm->s.gt[0][t.thread] = gt;
        sm->s.eq[0][t.thread] = eq;
    } else {
        const size_t k = a.param, ties = a.wu[GS_KC_TK_NEED];
        const unsigned buf = lg & 1u;
        size_t gt = a.wu[GS_KC_TK_CHUNKS + c], eq = a.wu[GS_KC_TK_CHUNKS + nchunks + c];

        if (t.thread > 0) {
            gt += sm->s.gt[buf][t.thread - 1];
            eq += sm->s.eq[buf][t.thread - 1];
        }
        for (unsigned q = 0; (q < GS_KC_TOPK_PER_THREAD) && (e0 + q < e1); q++) {
            const uint32_t key = gs_km_topk_key(v[q]);
            size_t slot = k;

            if (key > tk) {
                slot = gt + gs_kc_min(eq, ties);
                gt++;
            } else if (key == tk) {
                slot = (eq < ties) ? gt + eq : k;
                eq++;
            }
            if (slot < k) {
                gs_km_st_u32(a.body + 4 * slot, (uint32_t)(e0 + q));
                gs_km_st_f32(a.body + 4 * k + 4 * slot, v[q]);
                if (a.res != NULL) {
                    a.res[e0 + q] = gs_km_acc(a.res[e0 + q], a.minus_one, v[q]);
                }
            }
        }
    }
}

/* One block: the chunk counts become exclusive offsets, in place. Thread i
 * owns a run of consecutive chunks; phase 0 sums it, 1 .. log2(T) scan
 * the sums, the last writes the offsets. */
GS_KFN void gs_kb_topk_scan(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    const unsigned lg = gs_kc_log2(t.nthreads);
    const size_t nchunks = gs_kc_topk_nchunks(a.count, t.nthreads);
    const size_t per = (nchunks + t.nthreads - 1) / t.nthreads;
    const size_t c0 = gs_kc_min((size_t)t.thread * per, nchunks), c1 = gs_kc_min(c0 + per, nchunks);
    uint32_t *gtc = a.wu + GS_KC_TK_CHUNKS, *eqc = a.wu + GS_KC_TK_CHUNKS + nchunks;

    if (ph == 0) {
        uint32_t gt = 0, eq = 0;

        for (size_t c = c0; c < c1; c++) {
            gt += gtc[c];
            eq += eqc[c];
        }
        sm->s.gt[0][t.thread] = gt;
        sm->s.eq[0][t.thread] = eq;
    } else if ((unsigned)ph <= lg) {
        gs_kc_scan_step(t, sm, (unsigned)ph);
    } else {
        uint32_t gt = (t.thread > 0) ? sm->s.gt[lg & 1u][t.thread - 1] : 0u;
        uint32_t eq = (t.thread > 0) ? sm->s.eq[lg & 1u][t.thread - 1] : 0u;

        for (size_t c = c0; c < c1; c++) {
            const uint32_t g = gtc[c], q = eqc[c];

            gtc[c] = gt;
            eqc[c] = eq;
            gt += g;
            eq += q;
        }
    }
}

/* ---------------------------------------------------------------------- */
/* top-k decode                                                           */
/* ---------------------------------------------------------------------- */

/* IMPORTANT: hostile bytes. *bad = 1 unless every index is < count and
 * strictly above the one before it. */
GS_KFN void gs_kb_topk_check(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    (void)ph;
    (void)sm;
    for (size_t j = gs_kthread_gid(t); j < a.param; j += gs_kthread_gstride(t)) {
        const uint32_t idx = gs_km_ld_u32(a.in + 4 * j);

        if (((size_t)idx >= a.count) || ((j > 0) && (idx <= gs_km_ld_u32(a.in + 4 * (j - 1))))) {
            *(volatile int *)a.bad = 1;
        }
    }
}

/* The pairs of a checked body (nothing when *bad; an index out of range is
 * skipped even so, never written). */
GS_KFN void gs_kb_topk_scatter(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    const size_t k = a.param;

    (void)ph;
    (void)sm;
    if (*(volatile int *)a.bad != 0) {
        return;
    }
    for (size_t j = gs_kthread_gid(t); j < k; j += gs_kthread_gstride(t)) {
        const uint32_t idx = gs_km_ld_u32(a.in + 4 * j);
        const float v = gs_km_ld_f32(a.in + 4 * k + 4 * j);

        if ((size_t)idx < a.count) {
            a.dst[idx] = (a.mode == GS_K_CODEC_SET) ? v : gs_km_acc(a.dst[idx], a.alpha, v);
        }
    }
}

#endif /* GS_KERNELS_CODEC_SPARSE_BODY_H */
