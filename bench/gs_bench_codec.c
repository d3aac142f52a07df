/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gs-bench codec`: single-process throughput of every codec on
 * normal-distributed f32 data, through the public API only. For each codec
 * it prints encode and decode GB/s (of f32 input, 1 GB = 10^9 bytes, the
 * median of -n timed runs after -w warm-ups), the compression ratio
 * (input bytes / payload bytes) and the relative error
 * ||x - decode(encode(x))|| / ||x||, next to a memcpy of the same buffer.
 * Usage: gs-bench codec [-e BYTES] [-w N] [-n N] [--zstd off|on|auto] [--list]
 * (--list: the codec names of GS_CODEC_MAP, one a line, and nothing else;
 * bench/net/bench_net.sh asks it which codecs this library has).
 * Also the helpers of `gs-bench allreduce|reduce_scatter|allgather --codec`
 * (gs_bench_codec.h).
 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gs_bench_codec.h"
#include "tc_clock.h"

#include "gradsync/compress.h"
#include "gradsync/gradsync.h"

#define CODEC_NAME_ROW(_name, _value, _str) {(_str), (_name)},

typedef struct {
    const char *name;
    gs_codec_kind_t kind;
} codec_name_t;

static const codec_name_t codec_names[] = {GS_CODEC_MAP(CODEC_NAME_ROW)};

int gs_bench_codec_lookup(const char *name, gs_codec_kind_t *kind_out)
{
    for (size_t k = 0; k < sizeof(codec_names) / sizeof(codec_names[0]); k++) {
        if (strcmp(codec_names[k].name, name) == 0) {
            *kind_out = codec_names[k].kind;
            return 0;
        }
    }
    return -1;
}

const char *gs_bench_codec_names(void)
{
#define CODEC_STR_ROW(_name, _value, _str) " " _str
    return GS_CODEC_MAP(CODEC_STR_ROW);
#undef CODEC_STR_ROW
}

/* Element i of rank r's --codec input: Box-Muller on two splitmix64 hashes of (r, i). */
static double codec_input(int rank, size_t i)
{
    uint64_t z = ((uint64_t)(unsigned)rank << 40) ^ (uint64_t)i, h[2];
    double u1, u2;

    for (int k = 0; k < 2; k++) {
        uint64_t x = z * 2 + (uint64_t)k + 0x9e3779b97f4a7c15ull;

        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        h[k] = x ^ (x >> 31);
    }
    u1 = ((double)(h[0] >> 11) + 0.5) / 9007199254740992.0;
    u2 = ((double)(h[1] >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void gs_bench_codec_fill(float *buf, size_t count, int rank)
{
    for (size_t i = 0; i < count; i++) {
        buf[i] = (float)codec_input(rank, i);
    }
}

size_t gs_bench_codec_in_elems(gs_coll_type_t coll, size_t count, int nranks)
{
    return (coll == GS_COLL_TYPE_REDUCE_SCATTER) ? count * (size_t)nranks : count;
}

double gs_bench_codec_relerr(const float *out, gs_coll_type_t coll, size_t count, int nranks,
                             int rank, int avg)
{
    const size_t nout = (coll == GS_COLL_TYPE_ALLGATHER) ? count * (size_t)nranks : count;
    const size_t base = (coll == GS_COLL_TYPE_REDUCE_SCATTER) ? (size_t)rank * count : 0;
    double ee = 0, xx = 0;

    for (size_t i = 0; i < nout; i++) {
        double exact = 0;
        float want;

        if (coll == GS_COLL_TYPE_ALLGATHER) {
            want = (float)codec_input((int)(i / count), i % count);
        } else {
            for (int r = 0; r < nranks; r++) {
                exact += (double)(float)codec_input(r, base + i);
            }
            want = (float)(avg ? exact / nranks : exact);
        }
        ee += ((double)out[i] - want) * ((double)out[i] - want);
        xx += (double)want * want;
    }
    return (xx > 0) ? sqrt(ee / xx) : sqrt(ee);
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return v[n / 2];
}

int gs_bench_codec_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"maxbytes", required_argument, NULL, 'e'}, {"warmup", required_argument, NULL, 'w'},
        {"iters", required_argument, NULL, 'n'},    {"zstd", required_argument, NULL, 'z'},
        {"list", no_argument, NULL, 'l'},           {NULL, 0, NULL, 0}};
    size_t bytes = 64u << 20, n, i, cap = 0, ss = 0, len = 0;
    int warmup = 3, iters = 10, c, it;
    gs_codec_zstd_t zstd = GS_CODEC_ZSTD_OFF;
    float *x, *y;
    uint8_t *payload = NULL;
    void *scratch = NULL;
    double *te, *td, xx = 0;
    uint64_t s = 0x9e3779b97f4a7c15ull;

    while ((c = getopt_long(argc, argv, "e:w:n:", longopts, NULL)) != -1) {
        switch (c) {
        case 'e':
            bytes = (size_t)strtoull(optarg, NULL, 0);
            break;
        case 'w':
            warmup = atoi(optarg);
            break;
        case 'n':
            iters = atoi(optarg);
            break;
        case 'z':
            zstd = (strcmp(optarg, "on") == 0)     ? GS_CODEC_ZSTD_ON
                   : (strcmp(optarg, "auto") == 0) ? GS_CODEC_ZSTD_AUTO
                                                   : GS_CODEC_ZSTD_OFF;
            break;
        case 'l':
            for (size_t k = 0; k < sizeof(codec_names) / sizeof(codec_names[0]); k++) {
                printf("%s\n", codec_names[k].name);
            }
            return 0;
        default:
            fprintf(stderr, "usage: gs-bench codec [-e BYTES] [-w N] [-n N] [--zstd off|on|auto] "
                            "[--list]\n");
            return 2;
        }
    }
    if ((bytes < 4) || (iters < 1) || (warmup < 0)) {
        fprintf(stderr, "gs-bench codec: bad -e, -w or -n\n");
        return 2;
    }
    n = bytes / sizeof(float);
    x = malloc(n * sizeof(float));
    y = malloc(n * sizeof(float));
    te = malloc((size_t)iters * sizeof(double));
    td = malloc((size_t)iters * sizeof(double));
    if ((x == NULL) || (y == NULL) || (te == NULL) || (td == NULL)) {
        fprintf(stderr, "gs-bench codec: out of memory\n");
        return 1;
    }
    for (i = 0; i < n; i++) {
        /* Box-Muller on a splitmix64 stream: deterministic normal data. */
        double u1, u2;
        uint64_t z;

        z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        u1 = ((double)(z >> 11) + 0.5) / 9007199254740992.0;
        u2 = ((double)(z & 0x7ff) + 0.5) / 2048.0;
        x[i] = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
        xx += (double)x[i] * x[i];
    }
    for (it = 0; it < iters; it++) {
        const double t0 = tc_now_s();

        memcpy(y, x, n * sizeof(float));
        te[it] = tc_now_s() - t0;
    }
    printf("# gs-bench codec: %zu f32 elements (%zu bytes), normal data, zstd %s, median of %d\n",
           n, n * sizeof(float),
           zstd == GS_CODEC_ZSTD_ON     ? "on"
           : zstd == GS_CODEC_ZSTD_AUTO ? "auto"
                                        : "off",
           iters);
    printf("%-8s %12s %12s %9s %12s\n", "codec", "enc GB/s", "dec GB/s", "ratio", "rel.error");
    printf("%-8s %12.2f %12s %9s %12s\n", "memcpy", (double)bytes / median(te, iters) / 1e9, "-",
           "-", "-");
    for (size_t k = 0; k < sizeof(codec_names) / sizeof(codec_names[0]); k++) {
        gs_codec_config_t cfg = GS_CODEC_CONFIG_INIT;
        double ee = 0;
        gs_status_t st;

        cfg.kind = codec_names[k].kind;
        cfg.zstd = zstd;
        if ((gs_codec_encoded_size(&cfg, n, GS_DTYPE_F32, &cap) != GS_OK) ||
            (gs_codec_scratch_size(&cfg, n, GS_DTYPE_F32, &ss) != GS_OK)) {
            fprintf(stderr, "gs-bench codec: %s\n", gs_last_error());
            return 1;
        }
        payload = malloc(cap);
        scratch = (ss > 0) ? malloc(ss) : NULL;
        if ((payload == NULL) || ((ss > 0) && (scratch == NULL))) {
            fprintf(stderr, "gs-bench codec: out of memory\n");
            return 1;
        }
        for (it = -warmup; it < iters; it++) {
            double t0 = tc_now_s(), t1, t2;

            st = gs_codec_encode(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, scratch, ss, payload, cap,
                                 &len);
            t1 = tc_now_s();
            if (st == GS_OK) {
                st = gs_codec_decode(&cfg, payload, len, n, GS_DTYPE_F32, scratch, ss, y);
            }
            t2 = tc_now_s();
            if (st != GS_OK) {
                fprintf(stderr, "gs-bench codec: %s: %s\n", codec_names[k].name, gs_last_error());
                return 1;
            }
            if (it >= 0) {
                te[it] = t1 - t0;
                td[it] = t2 - t1;
            }
        }
        for (i = 0; i < n; i++) {
            const double d = (double)x[i] - y[i];

            ee += d * d;
        }
        printf("%-8s %12.2f %12.2f %9.2f %12.3e\n", codec_names[k].name,
               (double)bytes / median(te, iters) / 1e9, (double)bytes / median(td, iters) / 1e9,
               (double)(n * sizeof(float)) / (double)len, sqrt(ee / xx));
        free(payload);
        free(scratch);
    }
    free(x);
    free(y);
    free(te);
    free(td);
    return 0;
}
