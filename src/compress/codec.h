/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal codec layer: the codec table type (one gs__codec_ops_t per codec,
 * filled with designated initializers), the resolved parameters every codec
 * function takes, the payload header (codec_wire.c), the zstd stage
 * (zstd_wrap.c) and the error-feedback internals (ef.c).
 *
 * A codec's functions are pure: they work on f32 spans, never allocate,
 * never log, and see only a validated gs__codec_params_t. The public entry
 * points in codec_api.c resolve the configuration, lay out the caller's
 * scratch, convert dtypes, run error feedback and the zstd stage.
 * Wire bodies are little-endian; only little-endian hosts are supported.
 */
#ifndef GS_COMPRESS_CODEC_H
#define GS_COMPRESS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/compress.h"

/* The codecs' per-element arithmetic, shared with the CUDA kernels. NOTE:
 * a path relative to this file, so that code outside the library (tests,
 * fuzzers, bench) that includes codec.h needs no kernels/ include path. */
#include "math/codec_math.h" /* kernels/: the arithmetic the codec kernels share */

#if defined(__BYTE_ORDER__) && (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
#error "gradsync codecs assume a little-endian host"
#endif

/* ---------------------------------------------------------------------- */
/* Defaults and limits                                                    */
/* ---------------------------------------------------------------------- */

#define GS_CODEC_DEFAULT_BLOCK 256
#define GS_CODEC_MAX_BLOCK (1 << 24)
#define GS_CODEC_DEFAULT_RATIO 0.01
#define GS_CODEC_DEFAULT_LEVELS 7
#define GS_CODEC_MAX_LEVELS 127
#define GS_CODEC_DEFAULT_ZSTD_LEVEL 1
#define GS_CODEC_MAX_ZSTD_LEVEL 19
/* Largest element count any codec accepts (keeps every size product in range). */
#define GS_CODEC_MAX_COUNT (SIZE_MAX / 16)

/* ---------------------------------------------------------------------- */
/* Codec table                                                            */
/* ---------------------------------------------------------------------- */

/* Flags of a codec (gs__codec_ops_t.flags). */
#define GS_CODEC_F_LOSSY (1u << 0)      /* decode(encode(x)) != x in general */
#define GS_CODEC_F_NEEDS_EF (1u << 1)   /* biased: run it with error feedback */
#define GS_CODEC_F_BLOCKED (1u << 2)    /* uses params.block (one scale per block) */
#define GS_CODEC_F_LEVELS (1u << 3)     /* params.param is the number of levels */
#define GS_CODEC_F_SPARSE (1u << 4)     /* params.param is k (elements kept) */
#define GS_CODEC_F_STOCHASTIC (1u << 5) /* draws from params.seed */

/* Everything a codec function needs, validated by codec_api.c. */
typedef struct gs__codec_params {
    size_t count;   /* elements of the tensor */
    uint32_t block; /* elements per scale (BLOCKED codecs), else 0 */
    uint32_t param; /* levels (LEVELS) or k (SPARSE), else 0 */
    uint64_t seed;  /* effective seed (STOCHASTIC codecs; encode only) */
} gs__codec_params_t;

/* How decode_accumulate writes its output. */
typedef enum gs__codec_mode {
    GS_CODEC_MODE_SET = 0, /* dst[i] = decoded[i] (zero where nothing was sent) */
    GS_CODEC_MODE_ADD = 1  /* dst[i] += alpha * decoded[i] */
} gs__codec_mode_t;

/* Exact size in bytes of the body for @p p (no header, no zstd). */
typedef size_t (*gs__codec_body_size_fn_t)(const gs__codec_params_t *p);

/* Encode src[0 .. p->count) into body (exactly body_size(p) bytes, any
 * alignment). src is finite in the normal case; non-finite values must not
 * cause undefined behaviour. Returns GS_OK (codecs cannot fail). */
typedef gs_status_t (*gs__codec_encode_fn_t)(const gs__codec_params_t *p, const float *src,
                                             uint8_t *body);

/* Decode body (exactly body_size(p) bytes, any alignment, HOSTILE: every
 * index is checked) into dst as @p mode says. Validates the whole body
 * before writing: on GS_ERR_PROTOCOL dst is untouched. Sets no error text;
 * codec_api.c does. */
typedef gs_status_t (*gs__codec_decode_fn_t)(const gs__codec_params_t *p, const uint8_t *body,
                                             float *dst, gs__codec_mode_t mode, float alpha);

/* Error-feedback encode fused into one pass over memory: residual[i] +=
 * src[i]; body = encode(residual); residual -= decode(body). The body and
 * the new residual are bit-identical to running those three steps one
 * after the other (codec_api.c's unfused sequence: gs__ef_add_f32, encode,
 * decode_accumulate with alpha -1). src and residual hold p->count f32.
 * Returns GS_OK. */
typedef gs_status_t (*gs__codec_encode_ef_fn_t)(const gs__codec_params_t *p, const float *src,
                                                float *residual, uint8_t *body);

/* One codec. Filled with designated initializers; every slot is required
 * except encode_ef (NULL: codec_api.c runs the unfused sequence). */
typedef struct gs__codec_ops {
    const char *name;                        /* short name, as in GS_CODEC_MAP */
    gs_codec_kind_t wire_id;                 /* stable id written into payloads */
    unsigned flags;                          /* GS_CODEC_F_* */
    gs__codec_body_size_fn_t encoded_size;   /* body bytes */
    gs__codec_encode_fn_t encode;            /* f32 -> body */
    gs__codec_decode_fn_t decode_accumulate; /* body -> f32 (set or add) */
    gs__codec_encode_ef_fn_t encode_ef;      /* fused error-feedback encode, or NULL */
} gs__codec_ops_t;

extern const gs__codec_ops_t gs__codec_none_ops;
extern const gs__codec_ops_t gs__codec_fp16_ops;
extern const gs__codec_ops_t gs__codec_bf16_ops;
extern const gs__codec_ops_t gs__codec_int8_ops;
extern const gs__codec_ops_t gs__codec_qsgd_ops;
extern const gs__codec_ops_t gs__codec_sign_ops;
extern const gs__codec_ops_t gs__codec_topk_ops;
extern const gs__codec_ops_t gs__codec_randk_ops;
extern const gs__codec_ops_t gs__codec_int4_ops;
extern const gs__codec_ops_t gs__codec_fp8_e4m3_ops;
extern const gs__codec_ops_t gs__codec_fp8_e5m2_ops;

/* The codec of @p kind, or NULL for an unknown kind (codec_table.c). */
const gs__codec_ops_t *gs__codec_lookup(gs_codec_kind_t kind);

/* ---------------------------------------------------------------------- */
/* Resolved configuration (codec_api.c)                                   */
/* ---------------------------------------------------------------------- */

typedef struct gs__codec_resolved {
    const gs__codec_ops_t *ops;
    uint32_t block;
    int levels;
    double ratio;
    uint64_t seed;
    gs_codec_zstd_t zstd;
    int zstd_level;
} gs__codec_resolved_t;

/* Apply defaults to @p cfg and validate it (GS_ERR_INVALID_ARG with text
 * naming the field). Reads only the fields inside cfg->size. */
gs_status_t gs__codec_resolve(const gs_codec_config_t *cfg, gs__codec_resolved_t *out);

/* The parameters for @p count elements: block, levels or k (seed left 0).
 * GS_ERR_UNSUPPORTED (with text) for a sparse codec past UINT32_MAX. */
gs_status_t gs__codec_params(const gs__codec_resolved_t *rc, size_t count,
                             gs__codec_params_t *p_out);

/* Where a call's parts sit in the caller's scratch (codec_api.c's header
 * comment has the layout); total is what gs_codec_scratch_size reports. */
typedef struct gs__codec_layout {
    size_t conv_off, conv_len;
    size_t zbuf_off, zbuf_len;
    size_t work_off, work_len;
    size_t total; /* bytes the caller must provide (0 when nothing is needed) */
} gs__codec_layout_t;

/*
 * A resolved configuration prepared for payloads of up to max_count
 * elements of one dtype: what every gs_codec_* call works out before it
 * touches data (the dtype and count checks, the parameters, the largest
 * payload, the scratch layout). The public calls make one per call; a
 * caller that encodes or decodes many payloads with one configuration
 * (the compressed all-reduce's slices) makes it once and passes it down.
 */
typedef struct gs__codec_plan {
    gs__codec_resolved_t rc;
    gs_dtype_t dtype;
    size_t max_count;
    gs__codec_params_t p;   /* for max_count elements (seed 0) */
    size_t payload_max;     /* gs_codec_encoded_size of max_count elements */
    gs__codec_layout_t lay; /* lay.total: gs_codec_scratch_size of max_count elements */
} gs__codec_plan_t;

/* Prepare @p rc for up to @p max_count elements of @p dtype. Local, pure.
 * GS_ERR_INVALID_ARG (not a float dtype, count too large) or
 * GS_ERR_UNSUPPORTED (a sparse codec past 2^32 - 1 elements), with text
 * starting "fn: ". */
gs_status_t gs__codec_plan(const char *fn, const gs__codec_resolved_t *rc, size_t max_count,
                           gs_dtype_t dtype, gs__codec_plan_t *out);

/* gs_codec_encode of @p count <= pl->max_count elements of pl->dtype;
 * scratch of pl->lay.total bytes serves every count. Same checks and
 * errors as gs_codec_encode, named after it. */
gs_status_t gs__codec_plan_encode(const gs__codec_plan_t *pl, const void *src, size_t count,
                                  gs_ef_t ef, void *scratch, size_t scratch_size, void *dst,
                                  size_t dst_capacity, size_t *len_out);

/* gs_codec_decode (GS_CODEC_MODE_SET) or gs_codec_decode_accumulate
 * (GS_CODEC_MODE_ADD) of @p count <= pl->max_count elements, with their
 * checks and errors, named after them. */
gs_status_t gs__codec_plan_decode(const gs__codec_plan_t *pl, const void *payload, size_t len,
                                  size_t count, void *scratch, size_t scratch_size, void *dst,
                                  gs__codec_mode_t mode);

/* The seed of a stochastic codec's draws at error-feedback step @p step:
 * every step draws differently (qsgd noise, random-k strata), alike on
 * every rank and on the host and device paths. */
static inline uint64_t gs__codec_step_seed(const gs__codec_resolved_t *rc, uint64_t step)
{
    return rc->seed + step * 0x9e3779b97f4a7c15ull;
}

/* ---------------------------------------------------------------------- */
/* Payload header (codec_wire.c)                                          */
/* ---------------------------------------------------------------------- */

#define GS_CODEC_WIRE_MAGIC 0x5a435347u /* "GSCZ" read as little-endian u32 */
#define GS_CODEC_WIRE_VERSION 1u
#define GS_CODEC_WIRE_FLAG_ZSTD 0x01u
#define GS_CODEC_WIRE_FLAGS_KNOWN GS_CODEC_WIRE_FLAG_ZSTD

/* The header fields (docs/compression.md has the byte layout). */
typedef struct gs__codec_hdr {
    uint8_t version;
    uint8_t codec;     /* wire id */
    uint8_t flags;     /* GS_CODEC_WIRE_FLAG_* */
    uint32_t block;    /* params.block */
    uint32_t param;    /* params.param */
    uint64_t count;    /* elements */
    uint64_t body_len; /* bytes after the header, as stored (after zstd) */
} gs__codec_hdr_t;

_Static_assert(GS_CODEC_HEADER_BYTES == 32, "the header layout is 32 bytes");

/* Write @p hdr (with magic) into out[0 .. GS_CODEC_HEADER_BYTES). */
void gs__codec_hdr_encode(const gs__codec_hdr_t *hdr, uint8_t *out);

/* Parse and check a payload of @p len bytes against the expected codec and
 * params: magic, version, codec id, known flags, reserved byte, count,
 * block, param, and body_len == len - header. On success *hdr_out is set.
 * GS_ERR_PROTOCOL with a sentence in why[] otherwise. Pure. */
gs_status_t gs__codec_hdr_check(const uint8_t *payload, size_t len, gs_codec_kind_t codec,
                                const gs__codec_params_t *p, gs__codec_hdr_t *hdr_out, char *why,
                                size_t why_len);

/* ---------------------------------------------------------------------- */
/* zstd stage (zstd_wrap.c)                                               */
/* ---------------------------------------------------------------------- */

/* The zstd stage exists only in a build with libzstd (CMake GS_WITH_ZSTD,
 * on when found). Without it gs__codec_resolve refuses every configuration
 * with the stage (gs__zstd_unsupported), so the calls below are never
 * reached; they then return GS_ERR_UNSUPPORTED and sizes of 0. */

/* 1 when this build has the zstd stage, else 0. */
int gs__zstd_available(void);
/* Write "on (libzstd 1.5.4, headers 1.5.4)" or "off (...)" into buf: what
 * gs_info prints. */
void gs__zstd_summary(char *buf, size_t len);
/* Set the error text for a configuration asking for the zstd stage in a
 * build without it, naming @p what and the fix; the caller returns
 * GS_ERR_UNSUPPORTED. */
void gs__zstd_unsupported(const char *what);
/* Worst-case compressed size of @p raw bytes. */
size_t gs__zstd_bound(size_t raw);
/* Workspace bytes for compressing at @p level and for decompressing. */
size_t gs__zstd_workspace(int level);
/* Compress src into dst (capacity gs__zstd_bound(src_len)) using the
 * caller's workspace (gs__zstd_workspace(level) bytes, 8-aligned).
 * GS_ERR_INTERNAL (with text) when zstd fails. */
gs_status_t gs__zstd_compress(const void *src, size_t src_len, void *dst, size_t dst_cap, int level,
                              void *work, size_t work_len, size_t *len_out);
/* Decompress a hostile frame into exactly @p raw_len bytes at dst.
 * GS_ERR_PROTOCOL (reason in why[]) unless it decodes to exactly raw_len. */
gs_status_t gs__zstd_decompress(const void *src, size_t src_len, void *dst, size_t raw_len,
                                void *work, size_t work_len, char *why, size_t why_len);

/* ---------------------------------------------------------------------- */
/* Error feedback internals (ef.c)                                        */
/* ---------------------------------------------------------------------- */

/*
 * A device copy of a residual, made by the algorithm layer (CUDA builds)
 * for compressed calls on device buffers and owned by its gs_ef_t: this
 * layer frees, zeroes and reads it back through these hooks and knows
 * nothing of CUDA.
 */
typedef struct gs__ef_dev gs__ef_dev_t;
struct gs__ef_dev {
    void (*release)(gs__ef_dev_t *self);                         /* free it */
    gs_status_t (*to_host)(gs__ef_dev_t *self, float *residual); /* copy it back (waits) */
};

struct gs_ef {
    size_t count;
    gs_dtype_t dtype;
    uint64_t step;        /* encodes so far; varies the stochastic codecs' draws */
    float *residual;      /* count elements */
    struct gs_ef *server; /* compressed all-reduce: this rank's chunk of the sum, or NULL */
    gs__ef_dev_t *dev;    /* device copy of the residual, or NULL */
    int dev_current;      /* 1: the device copy is the residual (the host copy is stale) */
};

/* Make the host residual of @p ef (and of its server residual) current:
 * read the device copy back when a device call used it last. Every host
 * use of a residual calls this first. Returns GS_OK or the copy's error. */
gs_status_t gs__ef_sync_host(gs_ef_t ef);

/* max |x[i]| over n values; a NaN anywhere gives NaN (codec_int8.c,
 * shared by the blocked quantizers). */
float gs__codec_max_abs(const float *x, size_t n);

/* residual[i] += (float)src[i] for a tensor of ef->dtype. */
void gs__ef_add_input(gs_ef_t ef, const void *src);

/* -1.0f, read at run time. NOTE: the fused encodes scale by -1 as
 * decode_accumulate does with its alpha argument; a constant -1.0f * s is
 * folded into -s, which flips the sign bit of a NaN scale where the
 * multiply keeps it, and the residuals would differ in that bit. */
extern volatile const float gs__codec_minus_one;

/* r[i] += x[i] for i < n (f32; the add of gs__ef_add_input). */
void gs__ef_add_f32(float *r, const float *x, size_t n);

/* ---------------------------------------------------------------------- */
/* Shared helpers                                                         */
/* ---------------------------------------------------------------------- */

/*
 * Run-time ISA dispatch for the hot loops, as in core/reduce_cpu.c: an
 * avx2 and a default clone, picked by the loader. Not under TSan (ifunc
 * resolvers run before its runtime is up).
 */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GS_CODEC_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define GS_CODEC_TSAN 1
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(GS_CODEC_TSAN) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define GS_CODEC_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef GS_CODEC_CLONES
#define GS_CODEC_CLONES
#endif

/*
 * Hand-vectorised kernels (codec_simd.c, x86-64 AVX2 + F16C), bit-identical
 * to the plain C loops of the codecs. Call them only when gs__codec_isa()
 * is non-zero (the CPU has AVX2 and F16C, as core/reduce_cpu.c's
 * gs__cpu_has_avx2_f16c() says, and gs__codec_force_scalar is 0).
 * n counts elements, nbytes whole sign bytes (8 elements each); add
 * selects dst += alpha * v (dst = v otherwise).
 */
extern int gs__codec_force_scalar; /* test hook: 1 = plain C only */
int gs__codec_isa(void);
void gs__codec_f16_encode_simd(const float *x, size_t n, uint8_t *out);
void gs__codec_f16_decode_simd(const uint8_t *in, size_t n, float *dst, int add, float alpha);
void gs__codec_bf16_encode_simd(const float *x, size_t n, uint8_t *out);
void gs__codec_sign_pack_simd(const float *x, size_t nbytes, uint8_t *bits);
void gs__codec_sign_unpack_simd(const uint8_t *bits, size_t nbytes, float s, float *dst, int add);
/* gs__codec_sign_pack_simd(r, nbytes, bits), then
 * gs__codec_sign_unpack_simd(bits, nbytes, s, r, 1), in one pass; s must
 * not be NaN (where both addends are NaN, which one the sum carries depends
 * on the operand order the compiler picks). */
void gs__codec_sign_pack_update_simd(float *r, size_t nbytes, float s, uint8_t *bits);
/* max |x| into *m_out and 1, or 0 (nothing written) when x holds a NaN. */
int gs__codec_max_abs_simd(const float *x, size_t n, float *m_out);
void gs__codec_int8_quantize_simd(const float *x, size_t n, float inv, int8_t *q);
/* Fused error-feedback steps: r[i] += x[i] for i < n, then max |r| into
 * *m_out and 1, or 0 (nothing written, r still updated) when r holds a NaN. */
int gs__codec_add_max_abs_simd(const float *x, float *r, size_t n, float *m_out);
/* r[i] += x[i] for i < n (x NULL: r unchanged), then the sign codec's mean
 * |r| over n >= 1 elements, with its eight interleaved partial sums. */
float gs__codec_add_mean_abs_simd(const float *x, float *r, size_t n);
/* top-k: the k-th largest key (|x| bits) t and the ties at t to keep, as
 * codec_topk.c's radix select finds them; 0 (nothing written) when the
 * plain select must run instead. Then the (index, value) body. */
int gs__codec_topk_threshold_simd(const float *x, size_t n, size_t k, uint32_t *t_out,
                                  size_t *ties_out);
void gs__codec_topk_select_simd(const float *x, size_t n, size_t k, uint32_t t, size_t ties,
                                uint8_t *body);
/* top-k in one pass: v[i] = a[i] + b[i], stored into out[i] (b NULL: v = a,
 * nothing stored); the indices i with |v[i]| bits >= lo, ascending, as
 * little-endian u32 into cand (any alignment) while they fit in cap
 * entries. Returns how many there are (more than cap: the list is cut). */
size_t gs__codec_topk_collect_simd(const float *a, const float *b, float *out, size_t n,
                                   uint32_t lo, uint8_t *cand, size_t cap);
/* qsgd (codec_qsgd.c's draw and codes, bit for bit): the codes of x[0 ..
 * n) whose global indices are start .. start + n, for the whole 32-element
 * steps only; returns how many elements that is (n rounded down to 32).
 * nib: 4-bit codes into codes + start / 2 (start must be even), else one
 * byte each into codes + start. key = gs__codec_seed32(seed); inv and
 * levels as the plain loop's. */
size_t gs__codec_qsgd_quantize_simd(const float *x, size_t n, size_t start, uint32_t key, float inv,
                                    float levels, int nib, uint8_t *codes);
/* The same codes of r, then r[i] += (float)code[i] * s in the same pass
 * (decode_accumulate's residual update; s must not be NaN, see
 * gs__codec_sign_pack_update_simd). */
size_t gs__codec_qsgd_quantize_update_simd(float *r, size_t n, size_t start, uint32_t key,
                                           float inv, float levels, int nib, float s,
                                           uint8_t *codes);
/* dst[i] = code(start + i) * s (add: dst[i] += ...) for the whole 8-element
 * steps of n; returns how many elements that is. nib: start must be even. */
size_t gs__codec_qsgd_dequant_simd(const uint8_t *codes, size_t start, size_t n, int nib, float s,
                                   float *dst, int add);

/*
 * The sum of the top-k payloads of an all-gather (codec_topk.c), for
 * algo_sparse.c: payloads[q] (lens[q] bytes, HOSTILE) are checked first,
 * header (codec, count, k, no zstd, exact body length) and every index
 * (< count, strictly ascending); on GS_ERR_PROTOCOL *bad_out is the payload
 * and why[] the reason, and dst is untouched. Then dst[i] = 0 + v_0 + v_1 +
 * ... over the payloads holding index i, in payload order (the bits of
 * decode-accumulating them one by one into zeros), times *scale when scale
 * is not NULL, written block by block in one pass over dst. cursor holds
 * nb entries of scratch.
 */
gs_status_t gs__codec_topk_sum(const gs__codec_params_t *p, const uint8_t *const *payloads,
                               const size_t *lens, size_t nb, const float *scale, float *dst,
                               size_t *cursor, size_t *bad_out, char *why, size_t why_len);

/* gs__codec_hash32 (the counter-based mixer of qsgd's noise and random-k's
 * draws) and gs__codec_seed32 (a seed's 32-bit key) live in
 * src/math/codec_math.h with the rest of the codecs' arithmetic. */

/* Number of blocks of @p block elements covering @p count elements. */
static inline size_t gs__codec_nblocks(size_t count, uint32_t block)
{
    return gs_km_nblocks(count, block);
}

/* Unaligned little-endian loads/stores of f32 scales in bodies. */
static inline float gs__codec_load_f32(const uint8_t *p)
{
    float f;

    __builtin_memcpy(&f, p, sizeof(f));
    return f;
}

static inline void gs__codec_store_f32(uint8_t *p, float f)
{
    __builtin_memcpy(p, &f, sizeof(f));
}

/* The same for u32 indices (top-k bodies and index lists). */
static inline uint32_t gs__codec_load_u32(const uint8_t *p)
{
    uint32_t v;

    __builtin_memcpy(&v, p, sizeof(v));
    return v;
}

static inline void gs__codec_store_u32(uint8_t *p, uint32_t v)
{
    __builtin_memcpy(p, &v, sizeof(v));
}

#endif /* GS_COMPRESS_CODEC_H */
