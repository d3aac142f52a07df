/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gs-bench kernels`: the bandwidth of every GPU kernel of kernels/ on one
 * GPU, next to a device-to-device cudaMemcpy of the same bytes measured in
 * the same run (CUDA builds only; gs_bench_cuda.h).
 *
 * For each size from -b to -e (times -f): every reduction (each dtype x
 * op, the fused average and the scale), the f32 multiply of the
 * compressed average and, where the build has them, every codec kernel (encode, encode with error
 * feedback, decode, decode and accumulate; f32 input, default parameters: blocks of 256, 7 qsgd
 * levels, k = 1% of the elements). Each kernel runs -w untimed times, then
 * -n times back to back on one stream, each run between two cudaEvents;
 * the row is the median run. GB/s counts the bytes the call reads plus the
 * bytes it writes, as its contract states them (reduce: 3 x size, scale
 * and copy: 2 x size, a codec: input plus payload, and the residual or
 * the accumulated output where there is one), not the extra passes a
 * kernel makes; 1 GB = 10^9 bytes. "vs copy" is GB/s over the copy's.
 * Input is approximately normal f32 (a sum of four uniforms), which is
 * what the codecs see in training; the other dtypes read the same bits.
 *
 * It does not check results (tests/gpu does) and uses no communicator.
 * Exit status: 0, 1 when a CUDA call fails, 2 on a usage error, 77 when
 * there is no CUDA device ("no CUDA device: skipped").
 */
#include "gs_bench.h"
#include "gs_bench_cuda.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gradsync/compress.h"
#include "gradsync/types.h"
#include "reduce_kernels.h"
#ifdef GS_BENCH_CODEC_KERNELS
#include "codec_kernels.h"
#endif

#define KB_ALIGN 256
#define KB_DIVISOR 4 /* the fused average and the scale divide by this (4 ranks) */

typedef enum kb_format { KB_TEXT, KB_CSV, KB_JSON } kb_format_t;

typedef struct kb_opts {
    size_t min_bytes;
    size_t max_bytes;
    size_t factor;
    int warmup;
    int iters;
    kb_format_t format;
    const char *out_path;
} kb_opts_t;

/* The run's state: buffers sized for -e, events, the timing scratch. */
typedef struct kb {
    kb_opts_t o;
    FILE *out;
    cudaStream_t stream;
    cudaEvent_t *ev;  /* 2 per timed iteration */
    float *ms;        /* per-iteration times */
    unsigned char *a; /* inputs (normal f32 bits) */
    unsigned char *b;
    unsigned char *d; /* reduce output */
    float *res;       /* codec residual */
    float *dst;       /* codec decode output */
    uint8_t *body;    /* codec payload body */
    void *work;       /* codec workspace */
    size_t work_size;
    int *bad; /* top-k decode flag */
    int nrows;
    double copy_gbps;   /* the copy of the current size */
    double worst_ratio; /* smallest "vs copy" at the largest size */
    char worst_name[48];
    gs_bench_gpu_t gpu;
} kb_t;

typedef struct kb_dtype {
    gs_dtype_t dtype;
    size_t size;
    const char *name;
    int is_float;
} kb_dtype_t;

static const kb_dtype_t kb_dtypes[] = {
    {GS_DTYPE_F32, 4, "f32", 1},   {GS_DTYPE_F64, 8, "f64", 1}, {GS_DTYPE_F16, 2, "f16", 1},
    {GS_DTYPE_BF16, 2, "bf16", 1}, {GS_DTYPE_I8, 1, "i8", 0},   {GS_DTYPE_U8, 1, "u8", 0},
    {GS_DTYPE_I32, 4, "i32", 0},   {GS_DTYPE_I64, 8, "i64", 0},
};

static const struct {
    gs_op_t op;
    const char *name;
} kb_ops[] = {{GS_OP_SUM, "sum"}, {GS_OP_PROD, "prod"}, {GS_OP_MIN, "min"}, {GS_OP_MAX, "max"}};

#define KB_COUNTOF(_a) (sizeof(_a) / sizeof((_a)[0]))

static void kb_cuda(int err, const char *what)
{
    if (err != 0) {
        fprintf(stderr, "gs-bench kernels: %s failed: %s (%s)\n", what,
                cudaGetErrorString((cudaError_t)err), cudaGetErrorName((cudaError_t)err));
        fflush(NULL);
        exit(1);
    }
}

static _Noreturn void kb_usage(const char *msg, const char *arg)
{
    fprintf(stderr, "gs-bench kernels: %s%s%s\n", msg, (arg != NULL) ? ": " : "",
            (arg != NULL) ? arg : "");
    fprintf(stderr, "usage: gs-bench kernels [-b MIN] [-e MAX] [-f N] [-w N] [-n N] "
                    "[--csv|--json] [-o FILE]\n"
                    "  sizes in bytes with K/M/G suffixes; defaults -b 1M -e 256M -f 4 -w 5 "
                    "-n 20\n");
    exit(2);
}

static int kb_parse_int(const char *s, int lo, int hi, const char *what)
{
    char *end = NULL;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if ((errno != 0) || (end == s) || (*end != '\0') || (v < lo) || (v > hi)) {
        kb_usage(what, s);
    }
    return (int)v;
}

static void kb_parse(kb_opts_t *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"warmup", required_argument, NULL, 'w'},
        {"iters", required_argument, NULL, 'n'},
        {"out", required_argument, NULL, 'o'},
        {"csv", no_argument, NULL, 'C'},
        {"json", no_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "b:e:f:w:n:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (!gs_bench_parse_size(optarg, &o->min_bytes)) {
                kb_usage("bad -b size", optarg);
            }
            break;
        case 'e':
            if (!gs_bench_parse_size(optarg, &o->max_bytes)) {
                kb_usage("bad -e size", optarg);
            }
            break;
        case 'f':
            o->factor = (size_t)kb_parse_int(optarg, 2, 1 << 20, "-f must be in [2, 2^20]");
            break;
        case 'w':
            o->warmup = kb_parse_int(optarg, 0, 100000, "-w must be in [0, 100000]");
            break;
        case 'n':
            o->iters = kb_parse_int(optarg, 1, 100000, "-n must be in [1, 100000]");
            break;
        case 'o':
            o->out_path = optarg;
            break;
        case 'C':
            o->format = KB_CSV;
            break;
        case 'J':
            o->format = KB_JSON;
            break;
        case 'h':
            printf("usage: gs-bench kernels [-b MIN] [-e MAX] [-f N] [-w N] [-n N] "
                   "[--csv|--json] [-o FILE]\n");
            exit(0);
        default:
            kb_usage("bad option", NULL);
        }
    }
    if (optind != argc) {
        kb_usage("unexpected argument", argv[optind]);
    }
    if ((o->min_bytes < 16) || (o->min_bytes > o->max_bytes)) {
        kb_usage("need 16 <= -b <= -e", NULL);
    }
}

/* ---------------------------------------------------------------------- */
/* Timing and rows                                                        */
/* ---------------------------------------------------------------------- */

static int kb_cmp_float(const void *x, const void *y)
{
    const float a = *(const float *)x, b = *(const float *)y;

    return (a > b) - (a < b);
}

/* What a timed launcher enqueues: one kernel call, or the copy. */
typedef int (*kb_launch_fn_t)(kb_t *k, const void *ctx);

/* Median milliseconds of -n runs of @p fn after -w untimed ones. */
static double kb_time(kb_t *k, kb_launch_fn_t fn, const void *ctx, const char *what)
{
    for (int i = 0; i < k->o.warmup; i++) {
        kb_cuda(fn(k, ctx), what);
    }
    for (int i = 0; i < k->o.iters; i++) {
        kb_cuda(cudaEventRecord(k->ev[2 * i], k->stream), "cudaEventRecord");
        kb_cuda(fn(k, ctx), what);
        kb_cuda(cudaEventRecord(k->ev[2 * i + 1], k->stream), "cudaEventRecord");
    }
    kb_cuda(cudaStreamSynchronize(k->stream), what);
    kb_cuda(cudaGetLastError(), what);
    for (int i = 0; i < k->o.iters; i++) {
        kb_cuda(cudaEventElapsedTime(&k->ms[i], k->ev[2 * i], k->ev[2 * i + 1]),
                "cudaEventElapsedTime");
    }
    qsort(k->ms, (size_t)k->o.iters, sizeof(float), kb_cmp_float);
    return (k->o.iters % 2) ? k->ms[k->o.iters / 2]
                            : 0.5 * ((double)k->ms[k->o.iters / 2 - 1] + k->ms[k->o.iters / 2]);
}

static void kb_header(kb_t *k)
{
    if (k->o.format == KB_CSV) {
        fprintf(k->out, "size,count,type,kernel,time_us,bytes_moved,gbps,copy_gbps,vs_copy\n");
        return;
    }
    if (k->o.format == KB_JSON) {
        fprintf(k->out,
                "{\"bench\": \"gs-bench kernels\", \"gpu\": \"%s\", \"device\": %d, "
                "\"warmup\": %d, \"iters\": %d, \"rows\": [",
                k->gpu.name, k->gpu.device, k->o.warmup, k->o.iters);
        return;
    }
    fprintf(k->out, "# gs-bench kernels: GPU %d of %d (%s), median of %d runs after %d warm-ups\n",
            k->gpu.device, k->gpu.ndevices, k->gpu.name, k->o.iters, k->o.warmup);
    fprintf(k->out, "# GB/s = (bytes read + bytes written) / time, 1 GB = 1e9 B; vs copy = GB/s "
                    "over a device-to-device cudaMemcpy of the same size\n#\n");
    fprintf(k->out, "# %12s %12s %6s %18s %10s %9s %8s\n", "size", "count", "type", "kernel",
            "time", "GB/s", "vs copy");
    fprintf(k->out, "# %12s %12s %6s %18s %10s %9s %8s\n", "(B)", "(elements)", "", "", "(us)", "",
            "");
}

/* One row: @p moved bytes in @p ms milliseconds. */
static void kb_row(kb_t *k, size_t bytes, size_t count, const char *type, const char *kernel,
                   double ms, double moved)
{
    const double gbps = (ms > 0.0) ? moved / (ms * 1e6) : 0.0;
    const double ratio = (k->copy_gbps > 0.0) ? gbps / k->copy_gbps : 0.0;

    if (k->o.format == KB_CSV) {
        fprintf(k->out, "%zu,%zu,%s,%s,%.3f,%.0f,%.2f,%.2f,%.4f\n", bytes, count, type, kernel,
                ms * 1e3, moved, gbps, k->copy_gbps, ratio);
    } else if (k->o.format == KB_JSON) {
        fprintf(k->out,
                "%s\n  {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"kernel\": \"%s\", "
                "\"time_us\": %.3f, \"bytes_moved\": %.0f, \"gbps\": %.2f, \"copy_gbps\": %.2f, "
                "\"vs_copy\": %.4f}",
                (k->nrows > 0) ? "," : "", bytes, count, type, kernel, ms * 1e3, moved, gbps,
                k->copy_gbps, ratio);
    } else {
        fprintf(k->out, "  %12zu %12zu %6s %18s %10.2f %9.1f %8.3f\n", bytes, count, type, kernel,
                ms * 1e3, gbps, ratio);
    }
    fflush(k->out);
    k->nrows++;
    if ((bytes == k->o.max_bytes) && (strcmp(kernel, "copy") != 0) &&
        ((k->worst_name[0] == '\0') || (ratio < k->worst_ratio))) {
        k->worst_ratio = ratio;
        snprintf(k->worst_name, sizeof(k->worst_name), "%s %s", type, kernel);
    }
}

/* ---------------------------------------------------------------------- */
/* The launches                                                           */
/* ---------------------------------------------------------------------- */

typedef struct kb_red {
    gs_dtype_t dtype;
    gs_op_t op;
    int divisor; /* fused average when > 0 */
    size_t n;
    int scale; /* gs_k_scale instead */
    int mul;   /* gs_k_mul_f32 (by 1/KB_DIVISOR) instead */
} kb_red_t;

static int kb_launch_copy(kb_t *k, const void *ctx)
{
    const size_t bytes = *(const size_t *)ctx;

    return (int)cudaMemcpyAsync(k->d, k->a, bytes, cudaMemcpyDeviceToDevice, k->stream);
}

static int kb_launch_reduce(kb_t *k, const void *ctx)
{
    const kb_red_t *r = ctx;

    if (r->mul) {
        return gs_k_mul_f32((float *)k->d, r->n, 1.0f / KB_DIVISOR, k->stream);
    }
    if (r->scale) {
        return gs_k_scale(k->d, r->n, r->dtype, r->divisor, k->stream);
    }
    return gs_k_reduce(k->d, k->a, k->b, r->n, r->dtype, r->op, r->divisor, k->stream);
}

static void kb_reduce_rows(kb_t *k, size_t bytes)
{
    char what[64];

    for (size_t t = 0; t < KB_COUNTOF(kb_dtypes); t++) {
        const kb_dtype_t *dt = &kb_dtypes[t];
        const size_t n = bytes / dt->size;
        kb_red_t r = {.dtype = dt->dtype, .n = n};
        double ms;

        for (size_t o = 0; o < KB_COUNTOF(kb_ops); o++) {
            r.op = kb_ops[o].op;
            snprintf(what, sizeof(what), "gs_k_reduce (%s %s)", dt->name, kb_ops[o].name);
            ms = kb_time(k, kb_launch_reduce, &r, what);
            snprintf(what, sizeof(what), "reduce.%s", kb_ops[o].name);
            kb_row(k, bytes, n, dt->name, what, ms, 3.0 * (double)(n * dt->size));
        }
        if (!dt->is_float) {
            continue;
        }
        r.op = GS_OP_AVG;
        r.divisor = KB_DIVISOR;
        snprintf(what, sizeof(what), "gs_k_reduce (%s fused avg)", dt->name);
        ms = kb_time(k, kb_launch_reduce, &r, what);
        kb_row(k, bytes, n, dt->name, "reduce.avg_fused", ms, 3.0 * (double)(n * dt->size));
        /* NOTE: scaling d in place again and again drifts the values towards
         * subnormals and zero, which costs a GPU nothing extra. */
        r.scale = 1;
        snprintf(what, sizeof(what), "gs_k_scale (%s)", dt->name);
        ms = kb_time(k, kb_launch_reduce, &r, what);
        kb_row(k, bytes, n, dt->name, "scale", ms, 2.0 * (double)(n * dt->size));
        if (dt->dtype == GS_DTYPE_F32) {
            r.mul = 1;
            ms = kb_time(k, kb_launch_reduce, &r, "gs_k_mul_f32");
            kb_row(k, bytes, n, dt->name, "mul", ms, 2.0 * (double)(n * dt->size));
        }
    }
}

#ifdef GS_BENCH_CODEC_KERNELS

typedef enum kb_codec_call { KB_ENC, KB_ENC_EF, KB_DEC, KB_DEC_ADD } kb_codec_call_t;

typedef struct kb_codec {
    gs_codec_kind_t kind;
    gs__k_codec_params_t p;
    kb_codec_call_t call;
} kb_codec_t;

static const struct {
    gs_codec_kind_t kind;
    const char *name;
} kb_codecs[] = {
    {GS_CODEC_FP16, "fp16"},   {GS_CODEC_BF16, "bf16"}, {GS_CODEC_INT8, "int8"},
    {GS_CODEC_QSGD, "qsgd"},   {GS_CODEC_SIGN, "sign"}, {GS_CODEC_TOPK, "topk"},
    {GS_CODEC_RANDK, "randk"},
};

static int kb_launch_codec(kb_t *k, const void *ctx)
{
    const kb_codec_t *c = ctx;

    switch (c->call) {
    case KB_ENC:
        return gs_k_codec_encode(c->kind, &c->p, (const float *)k->a, k->body, k->work,
                                 k->work_size, k->stream);
    case KB_ENC_EF:
        return gs_k_codec_encode_ef(c->kind, &c->p, (const float *)k->a, k->res, k->body, k->work,
                                    k->work_size, k->stream);
    case KB_DEC:
        return gs_k_codec_decode(c->kind, &c->p, k->body, k->dst, GS_K_CODEC_SET, 1.0f, k->bad,
                                 k->stream);
    default:
        return gs_k_codec_decode(c->kind, &c->p, k->body, k->dst, GS_K_CODEC_ADD, 1.0f, k->bad,
                                 k->stream);
    }
}

/* The default parameters of kind for n elements (block 256, 7 levels, k = 1%). */
static gs__k_codec_params_t kb_codec_params(gs_codec_kind_t kind, size_t n)
{
    gs__k_codec_params_t p = {.count = n, .block = 0, .param = 0, .seed = 0x5eedull};
    size_t kk = n / 100;

    switch (kind) {
    case GS_CODEC_INT8:
    case GS_CODEC_SIGN:
        p.block = 256;
        break;
    case GS_CODEC_QSGD:
        p.block = 256;
        p.param = 7;
        break;
    case GS_CODEC_TOPK:
    case GS_CODEC_RANDK:
        p.param = (uint32_t)((kk < 1) ? 1 : (kk > UINT32_MAX) ? UINT32_MAX : kk);
        break;
    default:
        break;
    }
    return p;
}

/* Payload body bytes of the CPU codec (the public size minus the header). */
static size_t kb_body_bytes(gs_codec_kind_t kind, const gs__k_codec_params_t *p)
{
    gs_codec_config_t cfg = GS_CODEC_CONFIG_INIT;
    size_t cap = 0;

    cfg.kind = kind;
    if ((kind == GS_CODEC_TOPK) || (kind == GS_CODEC_RANDK)) {
        cfg.ratio = 0.01;
    }
    if ((gs_codec_encoded_size(&cfg, p->count, GS_DTYPE_F32, &cap) != GS_OK) ||
        (cap < GS_CODEC_HEADER_BYTES)) {
        return 0;
    }
    return cap - GS_CODEC_HEADER_BYTES;
}

static void kb_codec_rows(kb_t *k, size_t bytes)
{
    static const char *const call_names[] = {"encode", "encode_ef", "decode", "decode_add"};
    const size_t n = bytes / sizeof(float);
    const double in = (double)(n * sizeof(float));
    char what[64], name[48];

    for (size_t c = 0; c < KB_COUNTOF(kb_codecs); c++) {
        kb_codec_t cc = {.kind = kb_codecs[c].kind, .p = kb_codec_params(kb_codecs[c].kind, n)};
        const double body = (double)kb_body_bytes(cc.kind, &cc.p);
        const size_t ws = gs_k_codec_workspace_size(cc.kind, &cc.p);
        /* read + written per call, in call order */
        const double moved[] = {in + body, 3.0 * in + body, body + in, body + 2.0 * in};

        if (ws > k->work_size) {
            fprintf(stderr, "gs-bench kernels: %s needs %zu bytes of workspace, %zu allocated\n",
                    kb_codecs[c].name, ws, k->work_size);
            exit(1);
        }
        kb_cuda(cudaMemsetAsync(k->res, 0, bytes, k->stream), "cudaMemsetAsync");
        kb_cuda(cudaMemsetAsync(k->dst, 0, bytes, k->stream), "cudaMemsetAsync");
        kb_cuda(cudaMemsetAsync(k->bad, 0, sizeof(int), k->stream), "cudaMemsetAsync");
        for (int call = KB_ENC; call <= KB_DEC_ADD; call++) {
            double ms;

            cc.call = (kb_codec_call_t)call;
            if (call == KB_DEC) {
                /* decode a body that the plain encode made (the EF runs changed it). */
                cc.call = KB_ENC;
                kb_cuda(kb_launch_codec(k, &cc), "gs_k_codec_encode");
                cc.call = KB_DEC;
            }
            snprintf(what, sizeof(what), "gs_k_codec %s %s", kb_codecs[c].name, call_names[call]);
            ms = kb_time(k, kb_launch_codec, &cc, what);
            snprintf(name, sizeof(name), "%s.%s", kb_codecs[c].name, call_names[call]);
            kb_row(k, bytes, n, "f32", name, ms, moved[call]);
        }
    }
}

/* The largest workspace and body any codec needs at n elements. */
static void kb_codec_sizes(size_t n, size_t *work_out, size_t *body_out)
{
    *work_out = 0;
    *body_out = 0;
    for (size_t c = 0; c < KB_COUNTOF(kb_codecs); c++) {
        const gs__k_codec_params_t p = kb_codec_params(kb_codecs[c].kind, n);
        const size_t ws = gs_k_codec_workspace_size(kb_codecs[c].kind, &p);
        const size_t bb = kb_body_bytes(kb_codecs[c].kind, &p);

        *work_out = (ws > *work_out) ? ws : *work_out;
        *body_out = (bb > *body_out) ? bb : *body_out;
    }
}

#else /* no codec kernels in this build */

static void kb_codec_rows(kb_t *k, size_t bytes)
{
    (void)bytes;
    if (k->o.format == KB_TEXT) {
        fprintf(k->out, "#  (no codec kernels in this build: kernels/codec*.cu is missing)\n");
    }
}

static void kb_codec_sizes(size_t n, size_t *work_out, size_t *body_out)
{
    *work_out = 0;
    *body_out = n * sizeof(float) + 64;
}

#endif /* GS_BENCH_CODEC_KERNELS */

/* ---------------------------------------------------------------------- */
/* Main                                                                   */
/* ---------------------------------------------------------------------- */

/* Approximately normal f32 (Irwin-Hall: four uniforms, centred, scaled). */
static void kb_fill_normal(float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;

    for (size_t i = 0; i < n; i++) {
        float u = 0.0f;

        for (int j = 0; j < 4; j++) {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            u += (float)((s * 0x2545f4914f6cdd1dull) >> 40) * (1.0f / 16777216.0f);
        }
        x[i] = (u - 2.0f) * 1.7320508f;
    }
}

static void *kb_alloc(size_t bytes)
{
    void *p = NULL;
    char what[80];

    snprintf(what, sizeof(what), "cudaMalloc (%zu bytes)", bytes);
    kb_cuda(cudaMalloc(&p, (bytes + KB_ALIGN - 1) / KB_ALIGN * KB_ALIGN + KB_ALIGN), what);
    return p;
}

int gs_bench_kernels_main(int argc, char **argv)
{
    kb_t k = {.o = {.min_bytes = 1u << 20,
                    .max_bytes = 256u << 20,
                    .factor = 4,
                    .warmup = 5,
                    .iters = 20,
                    .format = KB_TEXT}};
    size_t body_bytes = 0, bytes;
    float *host;
    int rc;

    kb_parse(&k.o, argc, argv);
    rc = gs_bench_cuda_open(&k.gpu);
    if (rc != 0) {
        return rc;
    }
    k.out = stdout;
    if (k.o.out_path != NULL) {
        k.out = fopen(k.o.out_path, "w");
        if (k.out == NULL) {
            fprintf(stderr, "gs-bench kernels: cannot open %s: %s\n", k.o.out_path,
                    strerror(errno));
            return 1;
        }
    }
    kb_codec_sizes(k.o.max_bytes / sizeof(float), &k.work_size, &body_bytes);
    k.a = kb_alloc(k.o.max_bytes);
    k.b = kb_alloc(k.o.max_bytes);
    k.d = kb_alloc(k.o.max_bytes);
    k.res = kb_alloc(k.o.max_bytes);
    k.dst = kb_alloc(k.o.max_bytes);
    /* Every codec's body is smaller than its f32 input; the slack covers a
     * k that rounds differently from the library's. */
    k.body = kb_alloc(((body_bytes > k.o.max_bytes) ? body_bytes : k.o.max_bytes) + 65536);
    k.work = (k.work_size > 0) ? kb_alloc(k.work_size) : NULL;
    k.bad = kb_alloc(sizeof(int));
    k.ev = calloc(2 * (size_t)k.o.iters, sizeof(cudaEvent_t));
    k.ms = calloc((size_t)k.o.iters, sizeof(float));
    host = malloc(k.o.max_bytes);
    if ((k.ev == NULL) || (k.ms == NULL) || (host == NULL)) {
        fprintf(stderr, "gs-bench kernels: out of host memory\n");
        return 1;
    }
    kb_cuda(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    for (int i = 0; i < 2 * k.o.iters; i++) {
        kb_cuda(cudaEventCreate(&k.ev[i]), "cudaEventCreate");
    }
    kb_fill_normal(host, k.o.max_bytes / sizeof(float), 1);
    kb_cuda(cudaMemcpy(k.a, host, k.o.max_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    kb_fill_normal(host, k.o.max_bytes / sizeof(float), 2);
    kb_cuda(cudaMemcpy(k.b, host, k.o.max_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    kb_cuda(cudaMemcpy(k.d, host, k.o.max_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    free(host);

    kb_header(&k);
    for (bytes = k.o.min_bytes;;) {
        const size_t n = bytes / sizeof(float);

        const double ms = kb_time(&k, kb_launch_copy, &bytes, "cudaMemcpyAsync (device to device)");
        k.copy_gbps = (ms > 0.0) ? 2.0 * (double)bytes / (ms * 1e6) : 0.0;
        kb_row(&k, bytes, n, "-", "copy", ms, 2.0 * (double)bytes);
        kb_reduce_rows(&k, bytes);
        kb_codec_rows(&k, bytes);
        if (bytes >= k.o.max_bytes) {
            break;
        }
        /* The last size is -e itself, whatever the factor. */
        bytes = (bytes > k.o.max_bytes / k.o.factor) ? k.o.max_bytes : bytes * k.o.factor;
    }
    if (k.o.format == KB_JSON) {
        fprintf(k.out, "\n ], \"worst_vs_copy\": %.4f, \"worst_kernel\": \"%s\"}\n", k.worst_ratio,
                k.worst_name);
    } else {
        fprintf((k.o.format == KB_TEXT) ? k.out : stderr, "# Min vs copy at %zu B : %.3f (%s)\n#\n",
                k.o.max_bytes, k.worst_ratio, k.worst_name);
    }
    if (k.out != stdout) {
        fclose(k.out);
    }
    for (int i = 0; i < 2 * k.o.iters; i++) {
        (void)cudaEventDestroy(k.ev[i]);
    }
    (void)cudaStreamDestroy(k.stream);
    (void)cudaFree(k.a);
    (void)cudaFree(k.b);
    (void)cudaFree(k.d);
    (void)cudaFree(k.res);
    (void)cudaFree(k.dst);
    (void)cudaFree(k.body);
    (void)cudaFree(k.work);
    (void)cudaFree(k.bad);
    free(k.ev);
    free(k.ms);
    return 0;
}
