/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public codec entry points (gradsync/compress.h): configuration
 * resolution, size and scratch arithmetic, dtype conversion, the error
 * feedback step and the zstd stage around the pure codecs of the table.
 * The arithmetic a call does before it touches data is a gs__codec_plan_t
 * (codec.h): each public call makes one; the compressed all-reduce makes
 * one per call and encodes and decodes every slice through it.
 *
 * Scratch layout (each part 64-byte aligned inside the caller's buffer):
 *   conv  count f32   tensors that are not f32: the converted input
 *                     (encode without ef) or the decoded values (decode)
 *   zbuf  zstd bound  zstd output (encode) or the decompressed body (decode)
 *   work  zstd ctx    a static ZSTD_CCtx or ZSTD_DCtx
 * Nothing here allocates; nothing here talks to the network.
 */
#include "compress/codec.h"

#include "core/dtype.h"
#include "core/error.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#define SCRATCH_ALIGN 64

/* True when the caller's struct (of cfg->size bytes) contains @p _field. */
#define CFG_HAS(_cfg, _field)                                                                      \
    ((_cfg)->size >= offsetof(gs_codec_config_t, _field) + sizeof((_cfg)->_field))

static size_t align_up(size_t v)
{
    return (v + SCRATCH_ALIGN - 1) & ~(size_t)(SCRATCH_ALIGN - 1);
}

gs_status_t gs__codec_resolve(const gs_codec_config_t *cfg, gs__codec_resolved_t *out)
{
    gs__codec_resolved_t rc = {
        .ops = NULL,
        .block = GS_CODEC_DEFAULT_BLOCK,
        .levels = GS_CODEC_DEFAULT_LEVELS,
        .ratio = GS_CODEC_DEFAULT_RATIO,
        .seed = 0,
        .zstd = GS_CODEC_ZSTD_OFF,
        .zstd_level = GS_CODEC_DEFAULT_ZSTD_LEVEL,
    };

    if (cfg == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "codec configuration is NULL");
    }
    if (!CFG_HAS(cfg, kind)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "codec configuration size %zu is too small (use "
                             "GS_CODEC_CONFIG_INIT)",
                             cfg->size);
    }
    rc.ops = gs__codec_lookup(cfg->kind);
    if (rc.ops == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "unknown codec kind %d", (int)cfg->kind);
    }
    if (CFG_HAS(cfg, block_size) && (cfg->block_size != GS_UNSET)) {
        if ((cfg->block_size < 1) || (cfg->block_size > GS_CODEC_MAX_BLOCK)) {
            return gs__error_set(GS_ERR_INVALID_ARG, "codec block_size %d is outside 1 .. %d",
                                 cfg->block_size, GS_CODEC_MAX_BLOCK);
        }
        rc.block = (uint32_t)cfg->block_size;
    }
    if (CFG_HAS(cfg, ratio) && (cfg->ratio != (double)GS_UNSET)) {
        if (!((cfg->ratio > 0.0) && (cfg->ratio <= 1.0))) {
            return gs__error_set(GS_ERR_INVALID_ARG, "codec ratio %g is outside (0, 1]",
                                 cfg->ratio);
        }
        rc.ratio = cfg->ratio;
    }
    if (CFG_HAS(cfg, levels) && (cfg->levels != GS_UNSET)) {
        if ((cfg->levels < 1) || (cfg->levels > GS_CODEC_MAX_LEVELS)) {
            return gs__error_set(GS_ERR_INVALID_ARG, "codec levels %d is outside 1 .. %d",
                                 cfg->levels, GS_CODEC_MAX_LEVELS);
        }
        rc.levels = cfg->levels;
    }
    if (CFG_HAS(cfg, seed)) {
        rc.seed = cfg->seed;
    }
    if (CFG_HAS(cfg, zstd)) {
        if ((cfg->zstd != GS_CODEC_ZSTD_OFF) && (cfg->zstd != GS_CODEC_ZSTD_ON) &&
            (cfg->zstd != GS_CODEC_ZSTD_AUTO)) {
            return gs__error_set(GS_ERR_INVALID_ARG, "codec zstd mode %d is not off, on or auto",
                                 (int)cfg->zstd);
        }
        if ((cfg->zstd != GS_CODEC_ZSTD_OFF) && !gs__zstd_available()) {
            gs__zstd_unsupported((cfg->zstd == GS_CODEC_ZSTD_ON) ? "codec zstd stage on"
                                                                 : "codec zstd stage auto");
            return GS_ERR_UNSUPPORTED;
        }
        rc.zstd = cfg->zstd;
    }
    if (CFG_HAS(cfg, zstd_level) && (cfg->zstd_level != GS_UNSET)) {
        if ((cfg->zstd_level < 1) || (cfg->zstd_level > GS_CODEC_MAX_ZSTD_LEVEL)) {
            return gs__error_set(GS_ERR_INVALID_ARG, "codec zstd_level %d is outside 1 .. %d",
                                 cfg->zstd_level, GS_CODEC_MAX_ZSTD_LEVEL);
        }
        rc.zstd_level = cfg->zstd_level;
    }
    *out = rc;
    return GS_OK;
}

gs_status_t gs__codec_params(const gs__codec_resolved_t *rc, size_t count,
                             gs__codec_params_t *p_out)
{
    const unsigned flags = rc->ops->flags;
    gs__codec_params_t p = {.count = count, .block = 0, .param = 0, .seed = 0};

    if ((flags & GS_CODEC_F_BLOCKED) != 0) {
        p.block = rc->block;
    }
    if ((flags & GS_CODEC_F_LEVELS) != 0) {
        p.param = (uint32_t)rc->levels;
    }
    if ((flags & GS_CODEC_F_SPARSE) != 0) {
        double k;

        if (count > (size_t)UINT32_MAX) {
            return gs__error_set(GS_ERR_UNSUPPORTED,
                                 "codec %s handles at most 2^32 - 1 elements, not %zu",
                                 rc->ops->name, count);
        }
        /* k = round(ratio x count), at least 1 for a non-empty tensor. */
        k = floor(rc->ratio * (double)count + 0.5);
        k = (k < 1.0) ? 1.0 : k;
        k = (k > (double)count) ? (double)count : k;
        p.param = (uint32_t)k;
    }
    *p_out = p;
    return GS_OK;
}

/* The largest payload of a body of @p raw bytes: header, and zstd's bound
 * when zstd is on (auto keeps the raw body when zstd would not shrink it). */
static size_t payload_max(const gs__codec_resolved_t *rc, size_t raw)
{
    if ((rc->zstd == GS_CODEC_ZSTD_ON) && (raw > 0)) {
        const size_t bound = gs__zstd_bound(raw);

        return GS_CODEC_HEADER_BYTES + ((bound > raw) ? bound : raw);
    }
    return GS_CODEC_HEADER_BYTES + raw;
}

gs_status_t gs__codec_plan(const char *fn, const gs__codec_resolved_t *rc, size_t max_count,
                           gs_dtype_t dtype, gs__codec_plan_t *out)
{
    gs__codec_layout_t *lay = &out->lay;
    gs_status_t status;
    size_t raw, off = 0;

    if (((unsigned)dtype >= (unsigned)GS_DTYPE_COUNT) || !gs__dtype_is_float(dtype)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: dtype %d is not f32, f64, f16 or bf16", fn,
                             (int)dtype);
    }
    if (max_count > GS_CODEC_MAX_COUNT) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: count %zu is too large", fn, max_count);
    }
    status = gs__codec_params(rc, max_count, &out->p);
    if (status != GS_OK) {
        return gs__error_wrap(status, "%s: %s", fn, gs__error_get());
    }
    out->rc = *rc;
    out->dtype = dtype;
    out->max_count = max_count;
    raw = rc->ops->encoded_size(&out->p);
    out->payload_max = payload_max(rc, raw);
    memset(lay, 0, sizeof(*lay));
    if (dtype != GS_DTYPE_F32) {
        lay->conv_off = off;
        lay->conv_len = max_count * sizeof(float);
        off += align_up(lay->conv_len);
    }
    if (rc->zstd != GS_CODEC_ZSTD_OFF) {
        lay->zbuf_off = off;
        lay->zbuf_len = gs__zstd_bound(raw);
        off += align_up(lay->zbuf_len);
        lay->work_off = off;
        lay->work_len = gs__zstd_workspace(rc->zstd_level);
        off += lay->work_len;
    }
    /* Slack so that any caller alignment can be rounded up to 64. */
    lay->total = (off == 0) ? 0 : off + SCRATCH_ALIGN;
    return GS_OK;
}

/* Resolve @p cfg and prepare it for @p count elements (the public calls). */
static gs_status_t prepare(const char *fn, const gs_codec_config_t *cfg, size_t count,
                           gs_dtype_t dtype, gs__codec_plan_t *pl)
{
    gs__codec_resolved_t rc;
    gs_status_t status;

    status = gs__codec_resolve(cfg, &rc);
    if (status != GS_OK) {
        return gs__error_wrap(status, "%s: %s", fn, gs__error_get());
    }
    return gs__codec_plan(fn, &rc, count, dtype, pl);
}

/* The parameters of a payload of @p count elements: the plan's own for
 * max_count (every whole slice), else worked out (count <= max_count
 * cannot fail where max_count did not). */
static gs_status_t plan_params(const char *fn, const gs__codec_plan_t *pl, size_t count,
                               gs__codec_params_t *p)
{
    gs_status_t status;

    if (count == pl->max_count) {
        *p = pl->p;
        return GS_OK;
    }
    if (count > pl->max_count) {
        return gs__error_set(GS_ERR_INTERNAL, "%s: %zu elements, but the plan is for %zu at most",
                             fn, count, pl->max_count);
    }
    status = gs__codec_params(&pl->rc, count, p);
    if (status != GS_OK) {
        return gs__error_wrap(status, "%s: %s", fn, gs__error_get());
    }
    return GS_OK;
}

/* The 64-aligned base of the caller's scratch, after checking its size. */
static gs_status_t scratch_base(const char *fn, const gs__codec_layout_t *lay, void *scratch,
                                size_t scratch_size, uint8_t **base_out)
{
    uintptr_t a;

    if (lay->total == 0) {
        *base_out = NULL;
        return GS_OK;
    }
    if ((scratch == NULL) || (scratch_size < lay->total)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: scratch of %zu bytes given, %zu needed "
                             "(gs_codec_scratch_size)",
                             fn, (scratch == NULL) ? (size_t)0 : scratch_size, lay->total);
    }
    a = ((uintptr_t)scratch + SCRATCH_ALIGN - 1) & ~(uintptr_t)(SCRATCH_ALIGN - 1);
    *base_out = (uint8_t *)a;
    return GS_OK;
}

/* A stage of the layout (conversion, zstd) about to run without scratch: the
 * layout gives every stage a call needs room (total > 0), so this is a bug in
 * the layout, reported instead of dereferencing NULL. */
static gs_status_t no_stage_room(const char *fn, const char *stage)
{
    return gs__error_set(GS_ERR_INTERNAL, "%s: the scratch layout has no room for the %s stage", fn,
                         stage);
}

gs_status_t gs_codec_encoded_size(const gs_codec_config_t *cfg, size_t count, gs_dtype_t dtype,
                                  size_t *bytes_out)
{
    gs__codec_plan_t pl;
    gs_status_t status;

    status = prepare("gs_codec_encoded_size", cfg, count, dtype, &pl);
    if (status != GS_OK) {
        return status;
    }
    if (bytes_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_codec_encoded_size: bytes_out is NULL");
    }
    *bytes_out = pl.payload_max;
    return GS_OK;
}

gs_status_t gs_codec_scratch_size(const gs_codec_config_t *cfg, size_t count, gs_dtype_t dtype,
                                  size_t *bytes_out)
{
    gs__codec_plan_t pl;
    gs_status_t status;

    status = prepare("gs_codec_scratch_size", cfg, count, dtype, &pl);
    if (status != GS_OK) {
        return status;
    }
    if (bytes_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_codec_scratch_size: bytes_out is NULL");
    }
    *bytes_out = pl.lay.total;
    return GS_OK;
}

/* ---------------------------------------------------------------------- */
/* dtype conversion                                                       */
/* ---------------------------------------------------------------------- */

static void to_f32(const void *src, gs_dtype_t dtype, size_t n, float *out)
{
    size_t i;

    for (i = 0; i < n; i++) {
        switch (dtype) {
        case GS_DTYPE_F64:
            out[i] = (float)((const double *)src)[i];
            break;
        case GS_DTYPE_F16:
            out[i] = gs__f16_to_f32(((const uint16_t *)src)[i]);
            break;
        default: /* GS_DTYPE_BF16 */
            out[i] = gs__bf16_to_f32(((const uint16_t *)src)[i]);
            break;
        }
    }
}

/* dst = v (SET) or dst = dst + v rounded once (ADD), for non-f32 dst. */
static void from_f32(const float *v, size_t n, gs_dtype_t dtype, gs__codec_mode_t mode, void *dst)
{
    const int add = (mode == GS_CODEC_MODE_ADD);
    size_t i;

    for (i = 0; i < n; i++) {
        switch (dtype) {
        case GS_DTYPE_F64: {
            double *d = (double *)dst;

            d[i] = add ? d[i] + (double)v[i] : (double)v[i];
            break;
        }
        case GS_DTYPE_F16: {
            uint16_t *d = (uint16_t *)dst;

            d[i] = gs__f32_to_f16(add ? gs__f16_to_f32(d[i]) + v[i] : v[i]);
            break;
        }
        default: { /* GS_DTYPE_BF16 */
            uint16_t *d = (uint16_t *)dst;

            d[i] = gs__f32_to_bf16(add ? gs__bf16_to_f32(d[i]) + v[i] : v[i]);
            break;
        }
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Encode                                                                 */
/* ---------------------------------------------------------------------- */

gs_status_t gs__codec_plan_encode(const gs__codec_plan_t *pl, const void *src, size_t count,
                                  gs_ef_t ef, void *scratch, size_t scratch_size, void *dst,
                                  size_t dst_capacity, size_t *len_out)
{
    static const char fn[] = "gs_codec_encode";
    const gs__codec_resolved_t *rc = &pl->rc;
    const gs__codec_layout_t *lay = &pl->lay;
    const gs_dtype_t dtype = pl->dtype;
    gs__codec_params_t p;
    gs__codec_hdr_t hdr;
    uint8_t *base = NULL, *out = dst, *body;
    const float *x;
    size_t raw;
    int fused;
    gs_status_t status;

    status = plan_params(fn, pl, count, &p);
    if (status != GS_OK) {
        return status;
    }
    if (((src == NULL) && (count > 0)) || (dst == NULL) || (len_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: src, dst or len_out is NULL", fn);
    }
    if ((ef != NULL) && ((ef->count != count) || (ef->dtype != dtype))) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: ef was made for %zu elements of %s, not %zu of %s", fn, ef->count,
                             gs__dtype_name(ef->dtype), count, gs__dtype_name(dtype));
    }
    if (dst_capacity < pl->payload_max) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: dst of %zu bytes given, %zu needed (gs_codec_encoded_size)", fn,
                             dst_capacity, pl->payload_max);
    }
    status = scratch_base(fn, lay, scratch, scratch_size, &base);
    if (status == GS_OK) {
        status = gs__ef_sync_host(ef); /* a device call may hold the residual */
    }
    if (status != GS_OK) {
        return status;
    }
    fused = (ef != NULL) && (dtype == GS_DTYPE_F32) && (rc->ops->encode_ef != NULL);
    if (ef != NULL) {
        /* Every step draws differently (qsgd noise, randk strata). */
        p.seed = gs__codec_step_seed(rc, ef->step);
        if (!fused) {
            gs__ef_add_input(ef, src);
        }
        x = ef->residual;
    } else if (dtype == GS_DTYPE_F32) {
        p.seed = rc->seed;
        x = src;
    } else {
        p.seed = rc->seed;
        if ((base == NULL) && (count > 0)) {
            return no_stage_room(fn, "conversion");
        }
        to_f32(src, dtype, count, (float *)(void *)(base + lay->conv_off));
        x = (const float *)(const void *)(base + lay->conv_off);
    }
    raw = rc->ops->encoded_size(&p);
    body = out + GS_CODEC_HEADER_BYTES;
    if (fused) {
        /* residual += src, encode, residual -= decoded, in one pass. */
        status = rc->ops->encode_ef(&p, (const float *)src, ef->residual, body);
    } else {
        status = rc->ops->encode(&p, x, body);
    }
    if (status != GS_OK) {
        return status;
    }
    if ((ef != NULL) && fused) {
        ef->step++;
    } else if (ef != NULL) {
        /* The new residual is what the payload does not carry. */
        status = rc->ops->decode_accumulate(&p, body, ef->residual, GS_CODEC_MODE_ADD, -1.0f);
        if (status != GS_OK) {
            return gs__error_set(GS_ERR_INTERNAL, "%s: codec %s rejected its own body", fn,
                                 rc->ops->name);
        }
        ef->step++;
    }
    hdr.version = GS_CODEC_WIRE_VERSION;
    hdr.codec = (uint8_t)rc->ops->wire_id;
    hdr.flags = 0;
    hdr.block = p.block;
    hdr.param = p.param;
    hdr.count = (uint64_t)count;
    hdr.body_len = (uint64_t)raw;
    if ((rc->zstd != GS_CODEC_ZSTD_OFF) && (raw > 0)) {
        uint8_t *zbuf;
        size_t zlen;

        if (base == NULL) { /* raw > 0 */
            return no_stage_room(fn, "zstd");
        }
        zbuf = base + lay->zbuf_off;
        status = gs__zstd_compress(body, raw, zbuf, lay->zbuf_len, rc->zstd_level,
                                   base + lay->work_off, lay->work_len, &zlen);
        if (status != GS_OK) {
            return status;
        }
        /* auto keeps zstd's output only when it saves at least 10%. */
        if ((rc->zstd == GS_CODEC_ZSTD_ON) || (zlen <= raw - raw / 10)) {
            memcpy(body, zbuf, zlen);
            hdr.flags |= GS_CODEC_WIRE_FLAG_ZSTD;
            hdr.body_len = (uint64_t)zlen;
        }
    }
    gs__codec_hdr_encode(&hdr, out);
    *len_out = GS_CODEC_HEADER_BYTES + (size_t)hdr.body_len;
    return GS_OK;
}

gs_status_t gs_codec_encode(const gs_codec_config_t *cfg, const void *src, size_t count,
                            gs_dtype_t dtype, gs_ef_t ef, void *scratch, size_t scratch_size,
                            void *dst, size_t dst_capacity, size_t *len_out)
{
    gs__codec_plan_t pl;
    const gs_status_t status = prepare("gs_codec_encode", cfg, count, dtype, &pl);

    if (status != GS_OK) {
        return status;
    }
    return gs__codec_plan_encode(&pl, src, count, ef, scratch, scratch_size, dst, dst_capacity,
                                 len_out);
}

/* ---------------------------------------------------------------------- */
/* Decode                                                                 */
/* ---------------------------------------------------------------------- */

/* The public call a decode in @p mode is, for error text. */
static const char *decode_fn(gs__codec_mode_t mode)
{
    return (mode == GS_CODEC_MODE_ADD) ? "gs_codec_decode_accumulate" : "gs_codec_decode";
}

gs_status_t gs__codec_plan_decode(const gs__codec_plan_t *pl, const void *payload, size_t len,
                                  size_t count, void *scratch, size_t scratch_size, void *dst,
                                  gs__codec_mode_t mode)
{
    const char *fn = decode_fn(mode);
    const gs__codec_resolved_t *rc = &pl->rc;
    const gs__codec_layout_t *lay = &pl->lay;
    const gs_dtype_t dtype = pl->dtype;
    gs__codec_params_t p;
    gs__codec_hdr_t hdr;
    const uint8_t *body;
    uint8_t *base = NULL;
    size_t raw;
    float *target;
    char why[192];
    gs_status_t status;

    status = plan_params(fn, pl, count, &p);
    if (status != GS_OK) {
        return status;
    }
    if ((payload == NULL) || ((dst == NULL) && (count > 0))) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: payload or dst is NULL", fn);
    }
    status = scratch_base(fn, lay, scratch, scratch_size, &base);
    if (status != GS_OK) {
        return status;
    }
    status = gs__codec_hdr_check(payload, len, rc->ops->wire_id, &p, &hdr, why, sizeof(why));
    if (status != GS_OK) {
        return gs__error_set(status, "%s: malformed %s payload: %s", fn, rc->ops->name, why);
    }
    raw = rc->ops->encoded_size(&p);
    body = (const uint8_t *)payload + GS_CODEC_HEADER_BYTES;
    if ((hdr.flags & GS_CODEC_WIRE_FLAG_ZSTD) != 0) {
        if (rc->zstd == GS_CODEC_ZSTD_OFF) {
            return gs__error_set(GS_ERR_PROTOCOL,
                                 "%s: malformed %s payload: zstd-compressed, but the "
                                 "configuration has zstd off",
                                 fn, rc->ops->name);
        }
        if ((base == NULL) && (raw > 0)) {
            return no_stage_room(fn, "zstd");
        }
        status = gs__zstd_decompress(body, (size_t)hdr.body_len, base + lay->zbuf_off, raw,
                                     base + lay->work_off, lay->work_len, why, sizeof(why));
        if (status != GS_OK) {
            return gs__error_set(status, "%s: malformed %s payload: %s", fn, rc->ops->name, why);
        }
        body = base + lay->zbuf_off;
    } else if (hdr.body_len != (uint64_t)raw) {
        return gs__error_set(GS_ERR_PROTOCOL,
                             "%s: malformed %s payload: %llu body bytes, the codec needs %zu", fn,
                             rc->ops->name, (unsigned long long)hdr.body_len, raw);
    }
    if ((dtype != GS_DTYPE_F32) && (base == NULL) && (count > 0)) {
        return no_stage_room(fn, "conversion");
    }
    target = (dtype == GS_DTYPE_F32) ? (float *)dst : (float *)(void *)(base + lay->conv_off);
    status = rc->ops->decode_accumulate(&p, body, target,
                                        (dtype == GS_DTYPE_F32) ? mode : GS_CODEC_MODE_SET, 1.0f);
    if (status != GS_OK) {
        return gs__error_set(status,
                             "%s: malformed %s payload: an index is out of range or "
                             "out of order",
                             fn, rc->ops->name);
    }
    if (dtype != GS_DTYPE_F32) {
        from_f32(target, count, dtype, mode, dst);
    }
    return GS_OK;
}

/* Resolve, prepare and decode: the two public decode calls. */
static gs_status_t decode_common(const gs_codec_config_t *cfg, const void *payload, size_t len,
                                 size_t count, gs_dtype_t dtype, void *scratch, size_t scratch_size,
                                 void *dst, gs__codec_mode_t mode)
{
    gs__codec_plan_t pl;
    const gs_status_t status = prepare(decode_fn(mode), cfg, count, dtype, &pl);

    if (status != GS_OK) {
        return status;
    }
    return gs__codec_plan_decode(&pl, payload, len, count, scratch, scratch_size, dst, mode);
}

gs_status_t gs_codec_decode(const gs_codec_config_t *cfg, const void *payload, size_t len,
                            size_t count, gs_dtype_t dtype, void *scratch, size_t scratch_size,
                            void *dst)
{
    return decode_common(cfg, payload, len, count, dtype, scratch, scratch_size, dst,
                         GS_CODEC_MODE_SET);
}

gs_status_t gs_codec_decode_accumulate(const gs_codec_config_t *cfg, const void *payload,
                                       size_t len, size_t count, gs_dtype_t dtype, void *scratch,
                                       size_t scratch_size, void *dst)
{
    return decode_common(cfg, payload, len, count, dtype, scratch, scratch_size, dst,
                         GS_CODEC_MODE_ADD);
}
