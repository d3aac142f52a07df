/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel bodies of the dense codecs: fp16 and bf16 encode, the decode of
 * fp16, bf16, int8, int4, fp8 (E4M3, E5M2), qsgd and sign, and the blocked
 * encodes of int8, int4, fp8, qsgd and sign (codec_body.h says how the
 * work is laid out). Included by codec_body.h only, after its types and
 * helpers.
 */
#ifndef GS_KERNELS_CODEC_DENSE_BODY_H
#define GS_KERNELS_CODEC_DENSE_BODY_H

#ifndef GS_KERNELS_CODEC_BODY_H
#error "include codec_body.h, not codec_dense_body.h"
#endif

/* ---------------------------------------------------------------------- */
/* fp16 / bf16 encode                                                     */
/* ---------------------------------------------------------------------- */

GS_KFN uint16_t gs_kc_half_enc1(float v, int bf)
{
    return bf ? gs_km_f32_to_bf16(v) : gs_km_f32_to_f16(v);
}

GS_KFN float gs_kc_half_dec1(uint16_t h, int bf)
{
    return bf ? gs_km_bf16_to_f32(h) : gs_km_f16_to_f32(h);
}

/* One element: the code, and with error feedback residual -= decoded. */
GS_KFN void gs_kc_half_one(const gs__kc_args_t *a, size_t i, int bf)
{
    const float v = gs_kc_take(a, i);
    const uint16_t h = gs_kc_half_enc1(v, bf);

    gs_km_st_u16(a->body + 2 * i, h);
    if (a->res != NULL) {
        a->res[i] = gs_km_acc(v, a->minus_one, gs_kc_half_dec1(h, bf));
    }
}

GS_KFN void gs_kc_half_enc(gs__kthread_t t, gs__kc_args_t a, const int bf)
{
    const size_t nchunks = (a.count + GS_KC_CHUNK - 1) / GS_KC_CHUNK;

    for (size_t c = gs_kthread_gid(t); c < nchunks; c += gs_kthread_gstride(t)) {
        const size_t i0 = c * GS_KC_CHUNK;

        if (a.vec && (i0 + GS_KC_CHUNK <= a.count)) {
            float x[8], r[8];
            uint16_t h[8];

            gs_kc_ld4(a.src + i0, x);
            gs_kc_ld4(a.src + i0 + 4, x + 4);
            if (a.res != NULL) {
                gs_kc_ld4(a.res + i0, r);
                gs_kc_ld4(a.res + i0 + 4, r + 4);
                for (int e = 0; e < 8; e++) {
                    x[e] = gs_km_addf(r[e], x[e]);
                }
            }
            for (int e = 0; e < 8; e++) {
                h[e] = gs_kc_half_enc1(x[e], bf);
            }
            gs_kc_st_h8(a.body + 2 * i0, h);
            if (a.res != NULL) {
                for (int e = 0; e < 8; e++) {
                    r[e] = gs_km_acc(x[e], a.minus_one, gs_kc_half_dec1(h[e], bf));
                }
                gs_kc_st4(a.res + i0, r);
                gs_kc_st4(a.res + i0 + 4, r + 4);
            }
        } else {
            const size_t i1 = gs_kc_min(i0 + GS_KC_CHUNK, a.count);

            for (size_t i = i0; i < i1; i++) {
                gs_kc_half_one(&a, i, bf);
            }
        }
    }
}

GS_KFN void gs_kb_half_enc(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    (void)ph;
    (void)sm;
    if (a.kind == GS_CODEC_BF16) {
        gs_kc_half_enc(t, a, 1);
    } else {
        gs_kc_half_enc(t, a, 0);
    }
}

/* ---------------------------------------------------------------------- */
/* Decode of the dense codecs                                             */
/* ---------------------------------------------------------------------- */

/* Element i of a dense body, combined with old as the mode says (old is
 * unused by SET). The forms are the CPU decoders': alpha scales the fp16
 * value, and the block scale of the others before the code multiplies. */
GS_KFN float gs_kc_dec_one(const gs__kc_args_t *a, size_t i, size_t nb, float old, const int kind)
{
    const int add = (a->mode == GS_K_CODEC_ADD);
    float v, s;

    if ((kind == GS_CODEC_FP16) || (kind == GS_CODEC_BF16)) {
        v = gs_kc_half_dec1(gs_km_ld_u16(a->in + 2 * i), kind == GS_CODEC_BF16);
        return add ? gs_km_acc(old, a->alpha, v) : v;
    }
    s = gs_km_ld_f32(a->in + 4 * gs_kc_block_of(a, i));
    s = add ? gs_km_mulf(a->alpha, s) : s;
    if (kind == GS_CODEC_INT8) {
        v = gs_km_dequant((int8_t)a->in[4 * nb + i], s);
    } else if (kind == GS_CODEC_INT4) {
        v = gs_km_dequant(gs_km_nibble_code(a->in + 4 * nb, i), s);
    } else if ((kind == GS_CODEC_FP8_E4M3) || (kind == GS_CODEC_FP8_E5M2)) {
        v = gs_km_fp8_dequant(a->in[4 * nb + i], kind == GS_CODEC_FP8_E5M2, s);
    } else if (kind == GS_CODEC_QSGD) {
        v = gs_km_dequant((a->param <= 7) ? gs_km_nibble_code(a->in + 4 * nb, i)
                                          : (int32_t)(int8_t)a->in[4 * nb + i],
                          s);
    } else { /* GS_CODEC_SIGN */
        v = gs_km_sign_value((a->in[4 * nb + (i >> 3)] >> (i & 7)) & 1u, s);
    }
    return add ? gs_km_addf(old, v) : v;
}

GS_KFN void gs_kc_dec(gs__kthread_t t, gs__kc_args_t a, const int kind)
{
    const size_t nchunks = (a.count + GS_KC_CHUNK - 1) / GS_KC_CHUNK;
    const size_t nb =
        ((kind == GS_CODEC_FP16) || (kind == GS_CODEC_BF16)) ? 0 : gs_km_nblocks(a.count, a.block);

    for (size_t c = gs_kthread_gid(t); c < nchunks; c += gs_kthread_gstride(t)) {
        const size_t i0 = c * GS_KC_CHUNK;

        if (a.vec && (i0 + GS_KC_CHUNK <= a.count)) {
            float d[8] = {0, 0, 0, 0, 0, 0, 0, 0};

            if (a.mode == GS_K_CODEC_ADD) {
                gs_kc_ld4(a.dst + i0, d);
                gs_kc_ld4(a.dst + i0 + 4, d + 4);
            }
            if ((kind == GS_CODEC_FP16) || (kind == GS_CODEC_BF16)) {
                uint16_t h[8];

                gs_kc_ld_h8(a.in + 2 * i0, h);
                for (int e = 0; e < 8; e++) {
                    const float v = gs_kc_half_dec1(h[e], kind == GS_CODEC_BF16);

                    d[e] = (a.mode == GS_K_CODEC_ADD) ? gs_km_acc(d[e], a.alpha, v) : v;
                }
            } else {
                for (int e = 0; e < 8; e++) {
                    d[e] = gs_kc_dec_one(&a, i0 + (size_t)e, nb, d[e], kind);
                }
            }
            gs_kc_st4(a.dst + i0, d);
            gs_kc_st4(a.dst + i0 + 4, d + 4);
        } else {
            const size_t i1 = gs_kc_min(i0 + GS_KC_CHUNK, a.count);

            for (size_t i = i0; i < i1; i++) {
                a.dst[i] =
                    gs_kc_dec_one(&a, i, nb, (a.mode == GS_K_CODEC_ADD) ? a.dst[i] : 0.0f, kind);
            }
        }
    }
}

GS_KFN void gs_kb_dec(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    (void)ph;
    (void)sm;
    switch (a.kind) {
    case GS_CODEC_FP16:
        gs_kc_dec(t, a, GS_CODEC_FP16);
        break;
    case GS_CODEC_BF16:
        gs_kc_dec(t, a, GS_CODEC_BF16);
        break;
    case GS_CODEC_INT8:
        gs_kc_dec(t, a, GS_CODEC_INT8);
        break;
    case GS_CODEC_INT4:
        gs_kc_dec(t, a, GS_CODEC_INT4);
        break;
    case GS_CODEC_FP8_E4M3:
        gs_kc_dec(t, a, GS_CODEC_FP8_E4M3);
        break;
    case GS_CODEC_FP8_E5M2:
        gs_kc_dec(t, a, GS_CODEC_FP8_E5M2);
        break;
    case GS_CODEC_QSGD:
        gs_kc_dec(t, a, GS_CODEC_QSGD);
        break;
    default: /* GS_CODEC_SIGN (the plan sends no other) */
        gs_kc_dec(t, a, GS_CODEC_SIGN);
        break;
    }
}

/* ---------------------------------------------------------------------- */
/* int8, int4, fp8 and qsgd encode                                        */
/* ---------------------------------------------------------------------- */

/* The group's codec block for this phase; 0 when the group has none. */
GS_KFN int gs_kc_group_block(gs__kthread_t t, int ph, const gs__kc_args_t *a, unsigned nsub,
                             size_t *cb_out, unsigned *sub_out)
{
    const size_t gpb = t.nthreads / a->group;
    const size_t iter = (size_t)ph / nsub;
    const size_t cb = (iter * t.nblocks + t.block) * gpb + t.thread / a->group;

    *cb_out = cb;
    *sub_out = (unsigned)ph % nsub;
    return cb < gs_km_nblocks(a->count, a->block);
}

/* The levels of a max-scaled codec: the value its block's max |x| maps to. */
GS_KFN float gs_kc_levels(const gs__kc_args_t *a, const int kind)
{
    switch (kind) {
    case GS_CODEC_INT8:
        return 127.0f;
    case GS_CODEC_INT4:
        return 7.0f;
    case GS_CODEC_FP8_E4M3:
        return GS_KM_E4M3_MAX;
    case GS_CODEC_FP8_E5M2:
        return GS_KM_E5M2_MAX;
    default: /* GS_CODEC_QSGD */
        return (float)a->param;
    }
}

/* The code of element i (global index) of value v: a signed integer code
 * (int8, int4, qsgd) or an fp8 byte (0 .. 255). */
GS_KFN int32_t gs_kc_quant_code(const gs__kc_args_t *a, size_t i, float v, float inv,
                                const int kind)
{
    switch (kind) {
    case GS_CODEC_INT8:
        return gs_km_int8_code(v, inv);
    case GS_CODEC_INT4:
        return gs_km_int4_code(v, inv);
    case GS_CODEC_FP8_E4M3:
        return gs_km_e4m3_code(v, inv);
    case GS_CODEC_FP8_E5M2:
        return gs_km_e5m2_code(v, inv);
    default: /* GS_CODEC_QSGD */
        return gs_km_qsgd_code(v, gs_km_qsgd_noise((uint32_t)i, a->key), inv, (float)a->param);
    }
}

/* The decoded value of code c with step s (the CPU decoders' product). */
GS_KFN float gs_kc_quant_value(int32_t c, float s, const int kind)
{
    if ((kind == GS_CODEC_FP8_E4M3) || (kind == GS_CODEC_FP8_E5M2)) {
        return gs_km_fp8_dequant((uint8_t)c, kind == GS_CODEC_FP8_E5M2, s);
    }
    return gs_km_dequant(c, s);
}

/* Codes of elements lo .. lo + n of one codec block (the fused path), the
 * residual updated with s = -step when there is one. */
GS_KFN void gs_kc_quant_codes_block(const gs__kc_args_t *a, unsigned lane, size_t lo, size_t n,
                                    float inv, float s, const int kind)
{
    const size_t nb = gs_km_nblocks(a->count, a->block);
    uint8_t *codes = a->body + 4 * nb;
    const float *x = (a->res != NULL) ? a->res : a->src;

    if (gs_kc_nibbles(kind, a->param)) {
        /* Whole bytes: lo is even (even blocks, or the only block). */
        for (size_t j = lane; 2 * j < n; j += a->group) {
            const size_t e = lo + 2 * j;
            const int32_t c0 = gs_kc_quant_code(a, e, x[e], inv, kind);
            const int32_t c1 =
                (2 * j + 1 < n) ? gs_kc_quant_code(a, e + 1, x[e + 1], inv, kind) : 0;

            codes[e >> 1] = (uint8_t)(((unsigned)c0 & 15u) | (((unsigned)c1 & 15u) << 4));
            if (a->res != NULL) {
                a->res[e] = gs_km_addf(x[e], gs_kc_quant_value(c0, s, kind));
                if (2 * j + 1 < n) {
                    a->res[e + 1] = gs_km_addf(x[e + 1], gs_kc_quant_value(c1, s, kind));
                }
            }
        }
        return;
    }
    for (size_t j = lane; j < n; j += a->group) {
        const size_t e = lo + j;
        const int32_t c = gs_kc_quant_code(a, e, x[e], inv, kind);

        codes[e] = (uint8_t)c;
        if (a->res != NULL) {
            a->res[e] = gs_km_addf(x[e], gs_kc_quant_value(c, s, kind));
        }
    }
}

/*
 * Phases per codec block: 0 add and lane maxima; 1 .. tree the max tree;
 * tree + 1 the step (lane 0); tree + 2 the codes (fused only).
 */
GS_KFN void gs_kc_quant_group(gs__kthread_t t, int ph, const gs__kc_args_t *a, gs__kc_smem_t *sm,
                              const int kind)
{
    const unsigned lane = t.thread % a->group, slot = t.thread, g = t.thread / a->group;
    const float levels = gs_kc_levels(a, kind);
    size_t cb, lo, n;
    unsigned sub;

    if (!gs_kc_group_block(t, ph, a, a->tree + 3, &cb, &sub)) {
        return;
    }
    lo = cb * a->block;
    n = gs_kc_min(a->block, a->count - lo);
    if (sub == 0) {
        float m = 0.0f;
        uint32_t nan = 0;

        for (size_t i = lane; i < n; i += a->group) {
            const float v = gs_km_absf(gs_kc_take(a, lo + i));

            m = (v > m) ? v : m;
            nan = (v != v) ? (uint32_t)i + 1 : nan;
        }
        sm->q.m[slot] = m;
        sm->q.nan[slot] = nan;
    } else if (sub <= a->tree) {
        const unsigned half = a->group >> sub;

        if (lane < half) {
            const float o = sm->q.m[slot + half];
            const uint32_t on = sm->q.nan[slot + half];

            sm->q.m[slot] = (o > sm->q.m[slot]) ? o : sm->q.m[slot];
            sm->q.nan[slot] = (on > sm->q.nan[slot]) ? on : sm->q.nan[slot];
        }
    } else if (sub == a->tree + 1) {
        if (lane == 0) {
            const float *x = (a->res != NULL) ? a->res : a->src;
            const uint32_t nan = sm->q.nan[slot];
            const float m = (nan != 0) ? gs_km_absf(x[lo + nan - 1]) : sm->q.m[slot];
            float inv;
            const float step = gs_km_block_step(m, levels, &inv);

            gs_km_st_f32(a->body + 4 * cb, step);
            sm->q.inv[g] = inv;
            sm->q.step[g] = step;
            if (!a->fused) {
                a->wf[cb] = inv;
            }
        }
    } else if (a->fused) {
        gs_kc_quant_codes_block(a, lane, lo, n, sm->q.inv[g],
                                gs_km_mulf(a->minus_one, sm->q.step[g]), kind);
    }
}

GS_KFN void gs_kb_quant_group(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    switch (a.kind) {
    case GS_CODEC_INT8:
        gs_kc_quant_group(t, ph, &a, sm, GS_CODEC_INT8);
        break;
    case GS_CODEC_INT4:
        gs_kc_quant_group(t, ph, &a, sm, GS_CODEC_INT4);
        break;
    case GS_CODEC_FP8_E4M3:
        gs_kc_quant_group(t, ph, &a, sm, GS_CODEC_FP8_E4M3);
        break;
    case GS_CODEC_FP8_E5M2:
        gs_kc_quant_group(t, ph, &a, sm, GS_CODEC_FP8_E5M2);
        break;
    default: /* GS_CODEC_QSGD */
        gs_kc_quant_group(t, ph, &a, sm, GS_CODEC_QSGD);
        break;
    }
}

/* The split path of the 4-bit codes (int4, qsgd): code bytes over the
 * whole tensor, each element with its block's factor (workspace) and step
 * (body). */
GS_KFN void gs_kc_quant_codes(gs__kthread_t t, gs__kc_args_t a, const int kind)
{
    const size_t nb = gs_km_nblocks(a.count, a.block);
    const size_t nbytes = (a.count + 1) / 2;
    const float *x = (a.res != NULL) ? a.res : a.src;

    for (size_t j = gs_kthread_gid(t); j < nbytes; j += gs_kthread_gstride(t)) {
        unsigned byte = 0;

        for (size_t e = 2 * j; (e < 2 * j + 2) && (e < a.count); e++) {
            const size_t b = gs_kc_block_of(&a, e);
            const int32_t c = gs_kc_quant_code(&a, e, x[e], a.wf[b], kind);

            byte |= ((unsigned)c & 15u) << (4 * (e & 1));
            if (a.res != NULL) {
                const float s = gs_km_mulf(a.minus_one, gs_km_ld_f32(a.body + 4 * b));

                a.res[e] = gs_km_addf(x[e], gs_km_dequant(c, s));
            }
        }
        a.body[4 * nb + j] = (uint8_t)byte;
    }
}

GS_KFN void gs_kb_quant_codes(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    (void)ph;
    (void)sm;
    if (a.kind == GS_CODEC_INT4) {
        gs_kc_quant_codes(t, a, GS_CODEC_INT4);
    } else {
        gs_kc_quant_codes(t, a, GS_CODEC_QSGD);
    }
}

/* ---------------------------------------------------------------------- */
/* sign encode                                                            */
/* ---------------------------------------------------------------------- */

/* Bits of elements e0 .. e1 (one code byte), the residual updated with
 * the scale of each element's block when there is one. */
GS_KFN unsigned gs_kc_sign_byte(const gs__kc_args_t *a, size_t e0, size_t e1, float s_block,
                                int per_element)
{
    const float *x = (a->res != NULL) ? a->res : a->src;
    unsigned byte = 0;

    for (size_t e = e0; e < e1; e++) {
        const unsigned bit = gs_km_sign_bit(x[e]);

        byte |= bit << (e - e0);
        if (a->res != NULL) {
            const float s =
                per_element
                    ? gs_km_mulf(a->minus_one, gs_km_ld_f32(a->body + 4 * gs_kc_block_of(a, e)))
                    : s_block;

            a->res[e] = gs_km_addf(x[e], gs_km_sign_value(bit, s));
        }
    }
    return byte;
}

/*
 * Groups of 8 lanes. Phases per codec block: 0 lane j: add and partial j;
 * 1 lane 0: the mean of the partials; 2 the bit bytes (fused only).
 */
GS_KFN void gs_kb_sign_group(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    const unsigned lane = t.thread % GS_KM_SIGN_PARTIALS, g = t.thread / GS_KM_SIGN_PARTIALS;
    const size_t nb = gs_km_nblocks(a.count, a.block);
    size_t cb, lo, n;
    unsigned sub;

    if (!gs_kc_group_block(t, ph, &a, 3, &cb, &sub)) {
        return;
    }
    lo = cb * a.block;
    n = gs_kc_min(a.block, a.count - lo);
    if (sub == 0) {
        float p = 0.0f;

        for (size_t i = lane; i < n; i += GS_KM_SIGN_PARTIALS) {
            p = gs_km_sign_partial(p, gs_kc_take(&a, lo + i));
        }
        sm->q.m[t.thread] = p;
    } else if (sub == 1) {
        if (lane == 0) {
            const float scale = gs_km_sign_mean(&sm->q.m[t.thread], n);

            gs_km_st_f32(a.body + 4 * cb, scale);
            sm->q.step[g] = scale;
        }
    } else if (a.fused) {
        const float s = gs_km_mulf(a.minus_one, sm->q.step[g]);

        /* Whole bytes: lo is a multiple of 8. */
        for (size_t j = lane; 8 * j < n; j += GS_KM_SIGN_PARTIALS) {
            const size_t e0 = lo + 8 * j;

            a.body[4 * nb + (e0 >> 3)] =
                (uint8_t)gs_kc_sign_byte(&a, e0, gs_kc_min(e0 + 8, lo + n), s, 0);
        }
    }
}

/* sign split path: the bit bytes over the whole tensor. */
GS_KFN void gs_kb_sign_pack(gs__kthread_t t, int ph, gs__kc_args_t a, gs__kc_smem_t *sm)
{
    const size_t nb = gs_km_nblocks(a.count, a.block);
    const size_t nbytes = (a.count + 7) / 8;

    (void)ph;
    (void)sm;
    for (size_t j = gs_kthread_gid(t); j < nbytes; j += gs_kthread_gstride(t)) {
        a.body[4 * nb + j] =
            (uint8_t)gs_kc_sign_byte(&a, 8 * j, gs_kc_min(8 * j + 8, a.count), 0.0f, 1);
    }
}

#endif /* GS_KERNELS_CODEC_DENSE_BODY_H */
