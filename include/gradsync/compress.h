/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file
 * gradsync gradient compression: codec configuration, error-feedback state
 * and the pure encode / decode functions behind the compressed collectives.
 * They are public so that a framework plugin can compress on its own, for
 * example before its own transport or inside an optimizer hook.
 *
 * A codec turns @c count elements of a float tensor into a self-describing
 * payload (a 32-byte header, then the codec's body; docs/compression.md
 * gives the layout and each codec's error bound). Decoding validates the
 * header and the body against the caller's configuration and count before
 * it writes anything: a payload that does not match, or that would decode
 * out of bounds, fails with GS_ERR_PROTOCOL and leaves the output alone.
 *
 * This header does not run collectives; gs_allreduce_ex() takes a codec and
 * an error-feedback handle through its options.
 *
 * Conventions for every call in this header:
 * - Local and synchronous: no communication, no threads, no blocking.
 * - The codec functions never allocate: large temporaries come from the
 *   caller's @p scratch (size it with gs_codec_scratch_size()). They are
 *   thread-safe as long as no two threads share a scratch buffer, an
 *   output buffer or a gs_ef_t.
 * - Tensors are f32, f64, f16 or bf16; the codecs compute in f32.
 * - Output pointers are named *_out and are written only on success.
 */
#ifndef GRADSYNC_COMPRESS_H
#define GRADSYNC_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/status.h"
#include "gradsync/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== */
/* Codec kinds and configuration                                         */
/* ===================================================================== */

/*
 * GS_CODEC_MAP(X): X(name, value, short name). The value is the codec's
 * stable wire id (written into every payload header); rows are only
 * appended. Every row is stable.
 */
/** @brief The codec table, one X(name, value, short name) row per codec. */
#define GS_CODEC_MAP(X)                                                                            \
    X(GS_CODEC_NONE, 0, "none")                                                                    \
    X(GS_CODEC_FP16, 1, "fp16")                                                                    \
    X(GS_CODEC_BF16, 2, "bf16")                                                                    \
    X(GS_CODEC_INT8, 3, "int8")                                                                    \
    X(GS_CODEC_QSGD, 4, "qsgd")                                                                    \
    X(GS_CODEC_SIGN, 5, "sign")                                                                    \
    X(GS_CODEC_TOPK, 6, "topk")                                                                    \
    X(GS_CODEC_RANDK, 7, "randk")                                                                  \
    X(GS_CODEC_INT4, 8, "int4")                                                                    \
    X(GS_CODEC_FP8_E4M3, 9, "fp8_e4m3")                                                            \
    X(GS_CODEC_FP8_E5M2, 10, "fp8_e5m2")

#define GS_CODEC_ENUM_ROW(_name, _value, _str) _name = (_value),

/**
 * @brief Codec kind.
 * - GS_CODEC_NONE: f32 as is (lossless; useful with the zstd stage).
 * - GS_CODEC_FP16, GS_CODEC_BF16: cast, round to nearest even.
 * - GS_CODEC_INT8: 8-bit codes with one f32 scale (max |x|) per block.
 * - GS_CODEC_QSGD: stochastic rounding to @c levels levels per sign with
 *   one f32 scale (max |x|) per block; unbiased. 4 bits per element when
 *   levels <= 7, else 8.
 * - GS_CODEC_SIGN: 1 bit per element with one f32 scale (mean |x|) per block.
 * - GS_CODEC_TOPK: the @c ratio x count largest |x|, as (index, value) pairs.
 * - GS_CODEC_RANDK: one element from each of ratio x count equal strata,
 *   chosen from the seed; only the values travel.
 * - GS_CODEC_INT4: 4-bit codes in [-7, 7] (two per byte) with one f32
 *   scale (max |x| / 7) per block; round to nearest even.
 * - GS_CODEC_FP8_E4M3: OCP FP8 E4M3 codes (1 byte) with one f32 scale per
 *   block that maps the block's max |x| onto 448; round to nearest even,
 *   saturating.
 * - GS_CODEC_FP8_E5M2: the same with FP8 E5M2 codes (max 57344): wider
 *   range, one mantissa bit less.
 */
typedef enum gs_codec_kind { GS_CODEC_MAP(GS_CODEC_ENUM_ROW) GS_CODEC_KIND_COUNT } gs_codec_kind_t;

#undef GS_CODEC_ENUM_ROW

/** @brief Lossless zstd stage applied to the codec's body. */
typedef enum gs_codec_zstd {
    GS_CODEC_ZSTD_OFF = 0, /**< never */
    GS_CODEC_ZSTD_ON = 1,  /**< always (even when the body grows) */
    GS_CODEC_ZSTD_AUTO = 2 /**< keep zstd's output only when it is >= 10% smaller */
} gs_codec_zstd_t;

/**
 * @brief Codec configuration. Initialise with GS_CODEC_CONFIG_INIT, then set
 * the fields you want; fields left at GS_UNSET take the default shown.
 * Fields are only ever appended: the library reads the fields that fit in
 * @c size, so callers built against an older header keep working.
 * @note Encoder and decoder must use equal configurations (the header of
 * every payload is checked against it).
 */
typedef struct gs_codec_config {
    size_t size; /**< sizeof the struct the caller was built with (set by the INIT macro) */
    gs_codec_kind_t kind; /**< codec; default GS_CODEC_NONE */
    int block_size; /**< elements per scale (int8, int4, fp8, qsgd, sign); 1 .. 2^24, default 256 */
    double ratio;   /**< fraction of elements kept (topk, randk); (0, 1], default 0.01 */
    int levels;     /**< qsgd levels per sign; 1 .. 127, default 7 (4-bit codes) */
    uint64_t seed;  /**< seed of the stochastic codecs (qsgd, randk); default 0 */
    gs_codec_zstd_t zstd; /**< lossless zstd stage; default GS_CODEC_ZSTD_OFF */
    int zstd_level;       /**< zstd compression level; 1 .. 19, default 1 */
} gs_codec_config_t;

/** @brief Initialiser of gs_codec_config_t: size set, GS_CODEC_NONE, every knob unset. */
#define GS_CODEC_CONFIG_INIT                                                                       \
    {                                                                                              \
        sizeof(gs_codec_config_t), GS_CODEC_NONE, GS_UNSET, (double)GS_UNSET, GS_UNSET, 0,         \
            GS_CODEC_ZSTD_OFF, GS_UNSET                                                            \
    }

/** @brief Bytes of the header that starts every payload. */
#define GS_CODEC_HEADER_BYTES 32

/* ===================================================================== */
/* Error feedback                                                        */
/* ===================================================================== */

/**
 * @brief Handle to the error-feedback state of one tensor: an f32 residual
 * of @c count elements (what the lossy codec has not yet delivered) and a
 * step counter that varies the stochastic codecs' random draws. GS_EF_NULL
 * when none.
 */
typedef struct gs_ef *gs_ef_t;

/** @brief The null error-feedback handle. */
#define GS_EF_NULL ((gs_ef_t)0)

/**
 * @brief Create error-feedback state for a tensor of @p count elements of
 * @p dtype, with a zero residual.
 * @param[in] count elements (0 is allowed).
 * @param[in] dtype GS_DTYPE_F32, F64, F16 or BF16.
 * @param[out] ef_out the new handle.
 * @return GS_OK; GS_ERR_INVALID_ARG for a NULL @p ef_out, a non-float
 * dtype or a count too large to address; GS_ERR_NO_MEMORY.
 * @note Local. The handle is used by one thread at a time.
 */
GS_API gs_status_t gs_ef_create(size_t count, gs_dtype_t dtype, gs_ef_t *ef_out);

/**
 * @brief Zero the residual and the step counter (for example after the
 * model was reloaded, or when the tensor changed meaning).
 * @return GS_OK; GS_ERR_INVALID_ARG for GS_EF_NULL.
 * @note Local; not thread-safe against a concurrent encode on @p ef.
 */
GS_API gs_status_t gs_ef_reset(gs_ef_t ef);

/**
 * @brief Free the state. GS_EF_NULL is accepted and ignored.
 * @return GS_OK.
 * @note Local; the caller makes sure no encode uses @p ef any more.
 */
GS_API gs_status_t gs_ef_destroy(gs_ef_t ef);

/* ===================================================================== */
/* Sizes                                                                 */
/* ===================================================================== */

/**
 * @brief Largest payload gs_codec_encode() can produce for @p count
 * elements under @p cfg (header included): the capacity to give it.
 * @return GS_OK; GS_ERR_INVALID_ARG for a bad configuration field (named in
 * gs_last_error()), a non-float dtype or a NULL pointer;
 * GS_ERR_UNSUPPORTED for topk/randk past 2^32 - 1 elements.
 * @note Local, pure.
 */
GS_API gs_status_t gs_codec_encoded_size(const gs_codec_config_t *cfg, size_t count,
                                         gs_dtype_t dtype, size_t *bytes_out);

/**
 * @brief Bytes of scratch that gs_codec_encode(), gs_codec_decode() and
 * gs_codec_decode_accumulate() need for @p count elements of @p dtype under
 * @p cfg (any alignment is accepted). 0 for f32 tensors without zstd.
 * @return as gs_codec_encoded_size().
 * @note Local, pure.
 */
GS_API gs_status_t gs_codec_scratch_size(const gs_codec_config_t *cfg, size_t count,
                                         gs_dtype_t dtype, size_t *bytes_out);

/* ===================================================================== */
/* Encode and decode                                                     */
/* ===================================================================== */

/**
 * @brief Encode @p count elements of @p src into a payload at @p dst.
 *
 * With @p ef, the residual is added to the input first, the sum is
 * encoded, and what the payload does not carry becomes the new residual
 * (error feedback); the step counter then advances. With GS_EF_NULL the
 * input is encoded as is.
 *
 * @param[in] cfg codec configuration.
 * @param[in] src the tensor (may be NULL when @p count is 0).
 * @param[in] count elements.
 * @param[in] dtype GS_DTYPE_F32, F64, F16 or BF16.
 * @param[in,out] ef error-feedback state made for @p count and @p dtype, or GS_EF_NULL.
 * @param[in] scratch at least gs_codec_scratch_size() bytes (NULL when that is 0).
 * @param[in] scratch_size its size.
 * @param[out] dst at least gs_codec_encoded_size() bytes; must not overlap @p src.
 * @param[in] dst_capacity size of @p dst.
 * @param[out] len_out bytes of payload written.
 * @return GS_OK; GS_ERR_INVALID_ARG for a bad configuration, dtype,
 * pointer, an @p ef of another count or dtype, or a @p dst or @p scratch
 * that is too small (named in gs_last_error()); GS_ERR_UNSUPPORTED for
 * topk/randk past 2^32 - 1 elements; GS_ERR_INTERNAL when zstd fails.
 * @note Local. Deterministic: the same input, configuration and ef state
 * give the same bytes. Non-finite inputs give well-formed payloads with
 * unspecified values.
 */
GS_API gs_status_t gs_codec_encode(const gs_codec_config_t *cfg, const void *src, size_t count,
                                   gs_dtype_t dtype, gs_ef_t ef, void *scratch, size_t scratch_size,
                                   void *dst, size_t dst_capacity, size_t *len_out);

/**
 * @brief Decode a payload of @p len bytes into @p dst (@p count elements
 * of @p dtype): dst = decode(payload). Elements a sparse codec did not
 * carry become zero.
 * @param[in] cfg the configuration the payload was encoded with.
 * @param[in] payload the bytes, as received (any alignment).
 * @param[in] len their exact length.
 * @param[in] count elements expected.
 * @param[in] dtype GS_DTYPE_F32, F64, F16 or BF16.
 * @param[in] scratch at least gs_codec_scratch_size() bytes (NULL when that is 0).
 * @param[in] scratch_size its size.
 * @param[out] dst the tensor.
 * @return GS_OK; GS_ERR_INVALID_ARG as for gs_codec_encode();
 * GS_ERR_PROTOCOL when the payload is malformed or does not match @p cfg
 * and @p count (@p dst is then untouched).
 * @note Local. @p payload is treated as hostile bytes: no read or write
 * ever leaves the buffers given.
 */
GS_API gs_status_t gs_codec_decode(const gs_codec_config_t *cfg, const void *payload, size_t len,
                                   size_t count, gs_dtype_t dtype, void *scratch,
                                   size_t scratch_size, void *dst);

/**
 * @brief As gs_codec_decode(), but dst += decode(payload). f16/bf16
 * destinations are summed in f32 and rounded once per element.
 * @return as gs_codec_decode(); on GS_ERR_PROTOCOL @p dst is untouched.
 * @note Local.
 */
GS_API gs_status_t gs_codec_decode_accumulate(const gs_codec_config_t *cfg, const void *payload,
                                              size_t len, size_t count, gs_dtype_t dtype,
                                              void *scratch, size_t scratch_size, void *dst);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_COMPRESS_H */
