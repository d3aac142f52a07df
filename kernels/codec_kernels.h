/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host entry points of the codec kernels (codec.cu): encode, encode with
 * fused error feedback, decode (set or accumulate) and the top-k body
 * check, for fp16, bf16, int8, int4, fp8 (E4M3, E5M2), qsgd, sign, topk and
 * randk. Built only with CUDA; the kernel bodies (codec_body.h) also
 * compile as C, and tests/unit/test_kernel_codec.c runs them on the CPU
 * against the CPU codecs.
 *
 * Common rules:
 * - Every call enqueues on @p stream (a cudaStream_t; NULL is the legacy
 *   default stream) and returns at once with the cudaError_t of the
 *   launches (0 on success): their own, whatever an earlier call left in
 *   the thread's last-error slot (launch_kernels.h); nothing is
 *   synchronised and nothing is allocated. cudaErrorInvalidValue (1) before anything is enqueued for
 *   a codec other than those ten, a workspace smaller than
 *   gs_k_codec_workspace_size(), or a top-k decode or check without @p bad.
 * - Buffers are device (or managed) memory: src, residual and dst hold
 *   p->count f32; body is the codec body (the payload after its 32-byte
 *   header, which the host writes and checks), exactly the CPU codec's
 *   encoded_size(p) bytes, any alignment (16-byte aligned buffers take
 *   vector loads). Buffers must not overlap, except as stated.
 * - p holds the fields of the CPU codec's gs__codec_params_t
 *   (src/compress/codec.h): count, block (int8, int4, fp8, qsgd, sign),
 *   param (qsgd levels, topk/randk k) and seed (qsgd, randk; the effective seed, which
 *   an error-feedback step changes), validated by the caller
 *   (gs__codec_params): count < 2^32 for topk and randk, k <= count.
 *
 * Bits: the payload is the CPU codec's wire body, byte for byte. For fp16,
 * bf16, int8, int4, fp8, sign, qsgd (same seed), randk (same seed) and
 * topk a GPU-encoded body is byte-identical to the CPU encoder's, a GPU decode of
 * any body gives the CPU decoder's f32 bits, and the fused error-feedback
 * encode leaves the residual the CPU's encode_ef (or codec_api.c's unfused
 * residual += src; body = encode(residual); residual -= decode(body))
 * leaves. The arithmetic is src/math/codec_math.h's, which the CPU codecs
 * call. Exception: where a NaN result has two NaN operands, its payload
 * may differ (it depends on the operand order the C compiler picked); a
 * NaN is a NaN on both sides.
 *
 * top-k returns EXACTLY k elements, the same ones as the CPU codec: every
 * element whose |x| bits are above the k-th largest key T, then those
 * equal to T in index order until there are k; indices ascending. The
 * selection is by threshold: a strided sample of ~4096 keys estimates a
 * lower bound for the k-th largest |x| (skipping most elements in the
 * first histogram; if the sample overshoots, the pass is redone without
 * it, decided on the device), three histogram passes (11, 11 and 9 bits
 * of the key) find T and the ties to keep, and an index-ordered
 * compaction (per-chunk counts, a scan, a write) writes the k (index,
 * value) pairs: six passes over the tensor (seven when the sample
 * overshoots), 12 launches, no host synchronisation. Its workspace is
 * gs_k_codec_workspace_size() bytes.
 */
#ifndef GS_KERNELS_CODEC_KERNELS_H
#define GS_KERNELS_CODEC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/compress.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The parameters of one tensor's codec: gs__codec_params_t's fields. */
typedef struct gs__k_codec_params {
    size_t count;   /* elements */
    uint32_t block; /* elements per scale (int8, int4, fp8, qsgd, sign), else 0 */
    uint32_t param; /* qsgd levels, topk/randk k, else 0 */
    uint64_t seed;  /* qsgd and randk: the effective seed */
} gs__k_codec_params_t;

/* How gs_k_codec_decode writes dst (the values of gs__codec_mode_t). */
#define GS_K_CODEC_SET 0 /* dst[i] = decoded[i] (0 where a sparse body sends nothing) */
#define GS_K_CODEC_ADD 1 /* dst[i] += alpha * decoded[i] */

/*
 * Bytes of device workspace gs_k_codec_encode/_encode_ef need for @p p:
 * 0 for most; int4 and 4-bit qsgd with an odd block (one f32 per block),
 * topk (8 KiB plus 8 bytes per 4096 elements). Decode needs none. Local,
 * pure, thread-safe.
 */
size_t gs_k_codec_workspace_size(gs_codec_kind_t kind, const gs__k_codec_params_t *p);

/*
 * body = encode(src). @p work: gs_k_codec_workspace_size(kind, p) bytes of
 * device memory, 4-byte aligned (NULL when that is 0); it holds nothing
 * between calls, but one workspace serves one call in flight at a time.
 * The top-k body is written by several launches; read it only after the
 * stream has passed them all.
 */
int gs_k_codec_encode(gs_codec_kind_t kind, const gs__k_codec_params_t *p, const float *src,
                      uint8_t *body, void *work, size_t work_size, void *stream);

/*
 * Fused error feedback: residual[i] += src[i]; body = encode(residual);
 * residual -= decode(body), in one pass over src and the residual where
 * the codec allows (fp16, bf16, int8, fp8, int4, qsgd and sign with blocks
 * of whole code bytes: one launch; sign, int4 or 4-bit qsgd with other
 * block sizes, and randk: the codes or the k draws in a second launch; topk: the add rides
 * on its first histogram pass). Bits as the CPU's (header comment).
 */
int gs_k_codec_encode_ef(gs_codec_kind_t kind, const gs__k_codec_params_t *p, const float *src,
                         float *residual, uint8_t *body, void *work, size_t work_size,
                         void *stream);

/*
 * Decode @p body into dst: GS_K_CODEC_SET (dst = decoded; topk and randk
 * zero the elements they do not carry) or GS_K_CODEC_ADD (dst += alpha *
 * decoded, with the CPU decoder's rounding: for int8, int4, fp8, qsgd and
 * sign the scale is multiplied by alpha first).
 *
 * IMPORTANT: a top-k body is hostile (it came from the network). @p bad is
 * a device int that the caller zeroes before the first use (e.g.
 * cudaMemsetAsync); the decode first checks every index (< count,
 * strictly ascending) and sets *bad = 1 when one is not (it never clears
 * it), then writes dst only if *bad is still 0: a bad body leaves dst
 * untouched, and nothing is ever written out of bounds. Share one flag
 * across the payloads of a collective and run gs_k_codec_check on all of
 * them first to decode none when any is bad. The caller reads *bad after
 * the stream passes the call and maps 1 to GS_ERR_PROTOCOL. @p bad may be
 * NULL for the other codecs (every body of theirs is valid).
 */
int gs_k_codec_decode(gs_codec_kind_t kind, const gs__k_codec_params_t *p, const uint8_t *body,
                      float *dst, int mode, float alpha, int *bad, void *stream);

/* The top-k body check alone (sets *bad = 1 as gs_k_codec_decode does);
 * nothing to check, and nothing enqueued, for the other codecs. */
int gs_k_codec_check(gs_codec_kind_t kind, const gs__k_codec_params_t *p, const uint8_t *body,
                     int *bad, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* GS_KERNELS_CODEC_KERNELS_H */
