/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compressed all-reduce across real ranks:
 *  1. For every codec (int4 and fp8 too), the result equals a serial reference that every rank
 *     computes itself with the public codec functions. Quantizers, and
 *     sparsifiers too dense for the sparse paths: encode each rank's chunks,
 *     decode-and-sum per chunk in rank order, divide (avg), encode the sum,
 *     decode (two-phase). top-k and random-k: encode each rank's whole
 *     tensor, decode-and-sum in rank order, divide (avg), round to the dtype
 *     (all-gather of pairs; random-k's inputs are multiples of 2^-10 so the
 *     inner dense all-reduce sums exactly in any order). Bit for bit, on
 *     every rank, for f32 and bf16 inputs, counts 1, n-1, n+1 and 10007, sum
 *     and avg, in place and not, ratios 0.01 (with zstd on: top-k sums the
 *     payloads one by one), 0.02 (zstd off: top-k's blocked sum of all
 *     payloads), 0.25 and 0.5 for the sparsifiers; both the sparse paths
 *     and the dense fallback must run.
 *  1b. random-k with different seeds on different ranks: GS_ERR_PROTOCOL.
 *  2. Error feedback: repeating the same all-reduce with sign, top-k and
 *     random-k + EF, the mean of the outputs converges to the exact average
 *     (the residual carries what was dropped), and does much better than
 *     without EF.
 *  3. Bad use: a codec on an integer dtype, an ef of the wrong size.
 * In a build without zstd (GS_WITH_ZSTD off) the zstd cases of 1 must fail
 * on every rank with GS_ERR_UNSUPPORTED saying the library was built
 * without zstd, and the rest runs as usual.
 *   gsrun -n N compress_check
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gradsync/compress.h>
#include <gradsync/gradsync.h>

#include "math/half_math.h"

static int g_rank, g_size, g_fail, g_pass;
static int g_dyadic;   /* inputs are multiples of 2^-10 (exact sums in any order) */
static int g_paths[2]; /* [0]: sparse-path cases checked, [1]: dense-fallback cases */
static int g_zstd;     /* the library has the zstd stage (a probe in main) */

#define EXPECT(_cond, ...)                                                                         \
    do {                                                                                           \
        if (_cond) {                                                                               \
            g_pass++;                                                                              \
        } else {                                                                                   \
            g_fail++;                                                                              \
            fprintf(stderr, "rank %d: FAIL: ", g_rank);                                            \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

static float input_value(int rank, size_t i)
{
    /* Deterministic, varied magnitudes and signs. */
    unsigned x = (unsigned)(rank * 2654435761u) ^ (unsigned)(i * 40503u + 17u);
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return ((float)(x % 20001u) - 10000.0f) / (g_dyadic ? 1024.0f : 997.0f);
}

static void split(size_t count, int parts, int i, size_t *off, size_t *len)
{
    size_t base = count / (size_t)parts, extra = count % (size_t)parts, ui = (size_t)i;
    *off = ui * base + (ui < extra ? ui : extra);
    *len = base + (ui < extra ? 1 : 0);
}

/* The element-wise input of rank q in dtype dt, into in. */
static void rank_input(int q, size_t off, size_t len, gs_dtype_t dt, uint8_t *in)
{
    for (size_t i = 0; i < len; i++) {
        float v = input_value(q, off + i);
        if (dt == GS_DTYPE_F32) {
            memcpy(in + i * 4, &v, 4);
        } else { /* bf16, truncation is fine: both sides use the same bits */
            uint32_t b;
            memcpy(&b, &v, 4);
            uint16_t h = (uint16_t)(b >> 16);
            memcpy(in + i * 2, &h, 2);
        }
    }
}

/* Does the library take a sparse path (the rule of src/algo/sched/algo_sparse.c)? */
static int sparse_path(gs_codec_kind_t kind, double ratio, size_t count, gs_dtype_t dt)
{
    const size_t dense = count * ((dt == GS_DTYPE_F32) ? 4 : 2);
    double kd = floor(ratio * (double)count + 0.5);
    size_t k = (size_t)(kd < 1 ? 1 : (kd > (double)count ? (double)count : kd));

    if (kind == GS_CODEC_TOPK) {
        return (size_t)g_size * k * 8 < dense;
    }
    if (kind == GS_CODEC_RANDK) {
        return k * 4 < dense;
    }
    return 0;
}

/* Reference of the sparse paths: every rank's whole tensor encoded, decoded
 * and summed in rank order, divided once (avg), rounded to dt. */
static int reference_sparse(const gs_codec_config_t *cfg, size_t count, gs_dtype_t dt, gs_op_t op,
                            void *out)
{
    size_t cap, sc, sc2, elen;
    uint8_t *in, *enc, *scratch;
    float *acc;
    int rc = 0;

    if (gs_codec_encoded_size(cfg, count, dt, &cap) || gs_codec_scratch_size(cfg, count, dt, &sc) ||
        gs_codec_scratch_size(cfg, count, GS_DTYPE_F32, &sc2)) {
        return -1;
    }
    sc = sc > sc2 ? sc : sc2;
    in = malloc(count * 4 + 1);
    enc = malloc(cap);
    scratch = malloc(sc + 1);
    acc = calloc(count + 1, sizeof(float));
    for (int q = 0; (q < g_size) && (rc == 0); q++) {
        rank_input(q, 0, count, dt, in);
        if (gs_codec_encode(cfg, in, count, dt, GS_EF_NULL, scratch, sc, enc, cap, &elen) ||
            gs_codec_decode_accumulate(cfg, enc, elen, count, GS_DTYPE_F32, scratch, sc, acc)) {
            rc = -1;
        }
    }
    for (size_t i = 0; i < count; i++) {
        float v = acc[i] * ((op == GS_OP_AVG) ? 1.0f / (float)g_size : 1.0f);
        if (dt == GS_DTYPE_F32) {
            memcpy((uint8_t *)out + i * 4, &v, 4);
        } else {
            uint16_t h = gs_km_f32_to_bf16(v);
            memcpy((uint8_t *)out + i * 2, &h, 2);
        }
    }
    free(in);
    free(enc);
    free(scratch);
    free(acc);
    return rc;
}

/* The reference result for all ranks' inputs, as f32 decoded into out (dtype dt). */
static int reference(const gs_codec_config_t *cfg, size_t count, gs_dtype_t dt, gs_op_t op,
                     void *out)
{
    const size_t esize = (dt == GS_DTYPE_F32) ? 4 : 2;
    size_t cap, sc, sc2;
    uint8_t *in, *enc, *scratch;
    float *acc;

    if (gs_codec_encoded_size(cfg, count, dt, &cap) || gs_codec_scratch_size(cfg, count, dt, &sc) ||
        gs_codec_scratch_size(cfg, count, GS_DTYPE_F32, &sc2)) {
        return -1;
    }
    sc = sc > sc2 ? sc : sc2;
    in = malloc(count * esize + 1);
    enc = malloc(cap);
    scratch = malloc(sc + 1);
    acc = malloc(count * sizeof(float) + 1);
    for (int c = 0; c < g_size; c++) {
        size_t off, len, elen;
        split(count, g_size, c, &off, &len);
        memset(acc, 0, len * sizeof(float) + 1);
        for (int q = 0; q < g_size; q++) {
            rank_input(q, off, len, dt, in);
            if (gs_codec_encode(cfg, in, len, dt, GS_EF_NULL, scratch, sc, enc, cap, &elen) ||
                gs_codec_decode_accumulate(cfg, enc, elen, len, GS_DTYPE_F32, scratch, sc, acc)) {
                return -1;
            }
        }
        if (op == GS_OP_AVG) {
            const float inv = 1.0f / (float)g_size;
            for (size_t i = 0; i < len; i++) {
                acc[i] *= inv;
            }
        }
        if (gs_codec_encode(cfg, acc, len, GS_DTYPE_F32, GS_EF_NULL, scratch, sc, enc, cap,
                            &elen) ||
            gs_codec_decode(cfg, enc, elen, len, dt, scratch, sc, (uint8_t *)out + off * esize)) {
            return -1;
        }
    }
    free(in);
    free(enc);
    free(scratch);
    free(acc);
    return 0;
}

static void fill_input(void *buf, size_t count, gs_dtype_t dt)
{
    rank_input(g_rank, 0, count, dt, (uint8_t *)buf);
}

static void check_reference(gs_comm_t comm, gs_codec_kind_t kind, const char *name, double ratio)
{
    static const gs_dtype_t dts[] = {GS_DTYPE_F32, GS_DTYPE_BF16};
    const size_t counts[] = {1, (size_t)(g_size > 1 ? g_size - 1 : 1), (size_t)g_size + 1, 10007};

    g_dyadic = (kind == GS_CODEC_RANDK);
    for (size_t di = 0; di < 2; di++) {
        for (size_t ci = 0; ci < 4; ci++) {
            for (int opi = 0; opi < 2; opi++) {
                const gs_dtype_t dt = dts[di];
                const gs_op_t op = opi ? GS_OP_AVG : GS_OP_SUM;
                const size_t count = counts[ci];
                const size_t esize = (dt == GS_DTYPE_F32) ? 4 : 2;
                const int inplace = (int)((ci + di) % 2);
                gs_codec_config_t cfg = GS_CODEC_CONFIG_INIT;
                gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;
                uint8_t *send = malloc(count * esize), *recv = malloc(count * esize);
                uint8_t *ref = malloc(count * esize);
                gs_status_t st;

                cfg.kind = kind;
                cfg.block_size = 64;
                const int sparse = sparse_path(kind, ratio, count, dt);

                cfg.ratio = ratio;
                cfg.seed = 42;
                /* ratio 0.01 runs with the zstd stage (variable-length
                 * payloads on the all-gather; randk drops it, the values
                 * are summed raw). */
                cfg.zstd = (ratio == 0.01) ? GS_CODEC_ZSTD_ON : GS_CODEC_ZSTD_OFF;
                opts.codec = &cfg;
                fill_input(send, count, dt);
                memset(recv, 0x5a, count * esize);
                st = gs_allreduce_ex(comm, send, inplace ? send : recv, count, dt, op, &opts);
                if ((cfg.zstd != GS_CODEC_ZSTD_OFF) && !g_zstd) {
                    /* Refused on every rank before any traffic: the communicator lives on. */
                    EXPECT((st == GS_ERR_UNSUPPORTED) &&
                               (strstr(gs_last_error(), "built without zstd") != NULL),
                           "%s count %zu with zstd in a build without it: %s: %s", name, count,
                           gs_status_name(st), gs_last_error());
                    free(send);
                    free(recv);
                    free(ref);
                    continue;
                }
                EXPECT(st == GS_OK, "%s count %zu: %s: %s", name, count, gs_status_name(st),
                       gs_last_error());
                EXPECT((sparse ? reference_sparse(&cfg, count, dt, op, ref)
                               : reference(&cfg, count, dt, op, ref)) == 0,
                       "%s: reference failed: %s", name, gs_last_error());
                EXPECT(memcmp(inplace ? send : recv, ref, count * esize) == 0,
                       "%s %s %s count %zu ratio %g%s (%s path): result differs from the serial "
                       "reference",
                       name, dt == GS_DTYPE_F32 ? "f32" : "bf16", op == GS_OP_AVG ? "avg" : "sum",
                       count, ratio, inplace ? " (in place)" : "", sparse ? "sparse" : "two-phase");
                if ((kind == GS_CODEC_TOPK) || (kind == GS_CODEC_RANDK)) {
                    g_paths[sparse ? 0 : 1]++;
                }
                free(send);
                free(recv);
                free(ref);
            }
        }
    }
    g_dyadic = 0;
}

/* random-k with a seed that differs between ranks: every rank must see
 * GS_ERR_PROTOCOL (rank 0 uses seed 1, the others seed 2). Leaves the
 * communicator failed: run it last. */
static void check_seed_mismatch(gs_comm_t comm)
{
    const size_t count = 4096;
    float *x = calloc(count, sizeof(float));
    gs_codec_config_t cfg = GS_CODEC_CONFIG_INIT;
    gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;
    gs_status_t st;

    cfg.kind = GS_CODEC_RANDK;
    cfg.ratio = 0.01;
    cfg.seed = (g_rank == 0) ? 1 : 2;
    opts.codec = &cfg;
    fill_input(x, count, GS_DTYPE_F32);
    st = gs_allreduce_ex(comm, x, x, count, GS_DTYPE_F32, GS_OP_SUM, &opts);
    EXPECT(st == GS_ERR_PROTOCOL,
           "randk with seeds that differ between ranks gave %s, not "
           "GS_ERR_PROTOCOL",
           gs_status_name(st));
    EXPECT(strstr(gs_last_error(), "random-k") != NULL, "randk seed mismatch: message '%s'",
           gs_last_error());
    free(x);
}

/* Mean over steps of compressed averages vs the exact average. */
static double ef_error(gs_comm_t comm, gs_codec_kind_t kind, double ratio, int use_ef, int steps)
{
    const size_t count = 4096;
    float *x = malloc(count * 4), *y = malloc(count * 4);
    double *sum = calloc(count, sizeof(double));
    double num = 0, den = 0;
    gs_codec_config_t cfg = GS_CODEC_CONFIG_INIT;
    gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;
    gs_ef_t ef = GS_EF_NULL;

    cfg.kind = kind;
    cfg.block_size = 256;
    if (ratio > 0) {
        cfg.ratio = ratio;
    }
    opts.codec = &cfg;
    if (use_ef && gs_ef_create(count, GS_DTYPE_F32, &ef) != GS_OK) {
        return 1e9;
    }
    opts.ef = ef;
    fill_input(x, count, GS_DTYPE_F32);
    for (int s = 0; s < steps; s++) {
        if (gs_allreduce_ex(comm, x, y, count, GS_DTYPE_F32, GS_OP_AVG, &opts) != GS_OK) {
            return 1e9;
        }
        for (size_t i = 0; i < count; i++) {
            sum[i] += y[i];
        }
    }
    for (size_t i = 0; i < count; i++) {
        double exact = 0;
        for (int q = 0; q < g_size; q++) {
            exact += input_value(q, i);
        }
        exact /= g_size;
        num += (sum[i] / steps - exact) * (sum[i] / steps - exact);
        den += exact * exact;
    }
    gs_ef_destroy(ef);
    free(x);
    free(y);
    free(sum);
    return sqrt(num / den);
}

int main(void)
{
    static const struct {
        gs_codec_kind_t kind;
        const char *name;
    } codecs[] = {{GS_CODEC_FP16, "fp16"},         {GS_CODEC_BF16, "bf16"},
                  {GS_CODEC_INT8, "int8"},         {GS_CODEC_QSGD, "qsgd"},
                  {GS_CODEC_SIGN, "sign"},         {GS_CODEC_TOPK, "topk"},
                  {GS_CODEC_RANDK, "randk"},       {GS_CODEC_INT4, "int4"},
                  {GS_CODEC_FP8_E4M3, "fp8_e4m3"}, {GS_CODEC_FP8_E5M2, "fp8_e5m2"}};
    gs_comm_t comm;
    long long fails;

    if (gs_comm_init_env(&comm, NULL) != GS_OK) {
        fprintf(stderr, "init: %s\n", gs_last_error());
        return 1;
    }
    gs_comm_rank(comm, &g_rank);
    gs_comm_size(comm, &g_size);
    {
        gs_codec_config_t probe = GS_CODEC_CONFIG_INIT;
        size_t bytes;

        probe.kind = GS_CODEC_INT8;
        probe.zstd = GS_CODEC_ZSTD_ON;
        g_zstd = (gs_codec_encoded_size(&probe, 1, GS_DTYPE_F32, &bytes) != GS_ERR_UNSUPPORTED);
        if ((g_rank == 0) && !g_zstd) {
            printf("compress_check: built without zstd: its cases expect GS_ERR_UNSUPPORTED\n");
        }
    }

    for (size_t k = 0; k < sizeof(codecs) / sizeof(codecs[0]); k++) {
        const int sparse = (codecs[k].kind == GS_CODEC_TOPK) || (codecs[k].kind == GS_CODEC_RANDK);
        static const double ratios[] = {0.25, 0.01, 0.5, 0.02};

        for (size_t ri = 0; ri < (sparse ? 4u : 1u); ri++) {
            check_reference(comm, codecs[k].kind, codecs[k].name, ratios[ri]);
        }
    }
    EXPECT((g_paths[0] > 0) && (g_paths[1] > 0),
           "sparsifiers: %d cases took a sparse path and %d the dense fallback; both must run",
           g_paths[0], g_paths[1]);
    {
        static const struct {
            gs_codec_kind_t kind;
            double ratio, bound;
            const char *name;
        } efc[] = {{GS_CODEC_SIGN, 0, 0.1, "sign"},
                   {GS_CODEC_TOPK, 0.1, 0.15, "topk 10%"},
                   {GS_CODEC_RANDK, 0.1, 0.3, "randk 10%"}};

        for (size_t e = 0; e < sizeof(efc) / sizeof(efc[0]); e++) {
            const double with_ef = ef_error(comm, efc[e].kind, efc[e].ratio, 1, 60);
            const double without = ef_error(comm, efc[e].kind, efc[e].ratio, 0, 60);
            EXPECT(with_ef < efc[e].bound,
                   "%s+EF: mean of 60 steps is %.3f away from the exact average", efc[e].name,
                   with_ef);
            EXPECT(with_ef < without / 3, "%s: EF error %.3f is not well below no-EF error %.3f",
                   efc[e].name, with_ef, without);
            if (g_rank == 0) {
                printf("%s, 60 steps: relative error of the mean %.4f with EF, %.4f without\n",
                       efc[e].name, with_ef, without);
            }
        }
    }
    {
        gs_codec_config_t cfg = GS_CODEC_CONFIG_INIT;
        gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;
        int32_t iv[4] = {1, 2, 3, 4};
        float fv[4] = {1, 2, 3, 4};
        gs_ef_t ef;
        cfg.kind = GS_CODEC_INT8;
        opts.codec = &cfg;
        EXPECT(gs_allreduce_ex(comm, iv, iv, 4, GS_DTYPE_I32, GS_OP_SUM, &opts) ==
                   GS_ERR_INVALID_ARG,
               "int8 codec on i32 accepted");
        gs_ef_create(5, GS_DTYPE_F32, &ef);
        opts.ef = ef;
        EXPECT(gs_allreduce_ex(comm, fv, fv, 4, GS_DTYPE_F32, GS_OP_SUM, &opts) ==
                   GS_ERR_INVALID_ARG,
               "ef of 5 elements accepted for 4");
        gs_ef_destroy(ef);
        /* The communicator still works. */
        opts.ef = GS_EF_NULL;
        EXPECT(gs_allreduce_ex(comm, fv, fv, 4, GS_DTYPE_F32, GS_OP_SUM, &opts) == GS_OK,
               "allreduce after bad calls: %s", gs_last_error());
    }

    fails = g_fail;
    gs_allreduce(comm, &fails, &fails, 1, GS_DTYPE_I64, GS_OP_SUM);
    if (g_rank == 0) {
        printf("compress_check world=%d: %d passed, %lld failed (sparsifiers: %d sparse-path "
               "cases, %d dense fallback)\n",
               g_size, g_pass, fails, g_paths[0], g_paths[1]);
    }
    if (g_size > 1) {
        const int before = g_fail;
        check_seed_mismatch(comm);
        fails += g_fail - before;
    }
    gs_comm_destroy(comm);
    return fails == 0 ? 0 : 1;
}
