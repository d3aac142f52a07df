/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mpi-bench: the MPI_Allreduce (f32, sum) side of the gradsync comparison.
 * Same options subset, columns and timing rule as gs-bench: warm-up, a
 * barrier, then each timed iteration measured on every rank; the reported
 * time is the median over iterations of the slowest rank (MPI_MAX across
 * ranks per iteration). busbw = algbw * 2(n-1)/n as in nccl-tests.
 * Launch with: mpirun -np N mpi-bench -b 8 -e 256M -f 2 -w 5 -n 20 [--csv]
 * Exit status: 0 success, 1 an MPI or result error, 2 a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>
#include "tc_clock.h"

typedef struct mpi_bench {
    size_t min_bytes;
    size_t max_bytes;
    size_t factor;
    int warmup;
    int iters;
    int csv;
    int inplace;
    const char *out_path;
} mpi_bench_t;

static _Noreturn void usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "mpi-bench: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "usage: mpi-bench [-b MIN] [-e MAX] [-f N] [-w N] [-n N] [--inplace] [--csv] "
                    "[-o FILE]\n");
    exit(2);
}

static int parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    errno = 0;
    if (s[0] == '-' || s[0] == '\0') {
        return 0;
    }
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long mult = 1;
    if (errno != 0 || end == s) {
        return 0;
    }
    if (*end == 'k' || *end == 'K') {
        mult = 1ull << 10;
    } else if (*end == 'm' || *end == 'M') {
        mult = 1ull << 20;
    } else if (*end == 'g' || *end == 'G') {
        mult = 1ull << 30;
    }
    if (mult != 1) {
        end++;
    }
    if (*end == 'B' || *end == 'b') {
        end++;
    }
    if (*end != '\0' || v > (unsigned long long)SIZE_MAX / mult) {
        return 0;
    }
    *out = (size_t)(v * mult);
    return 1;
}

static int parse_int(const char *s, int lo, int hi)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        usage_error("bad number", s);
    }
    return (int)v;
}

static void parse_args(mpi_bench_t *b, int argc, char **argv)
{
    enum { OPT_CSV = 256, OPT_INPLACE };
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"warmup", required_argument, NULL, 'w'},
        {"iters", required_argument, NULL, 'n'},
        {"out", required_argument, NULL, 'o'},
        {"csv", no_argument, NULL, OPT_CSV},
        {"inplace", no_argument, NULL, OPT_INPLACE},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "b:e:f:w:n:o:", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (!parse_size(optarg, &b->min_bytes)) {
                usage_error("bad -b size", optarg);
            }
            break;
        case 'e':
            if (!parse_size(optarg, &b->max_bytes)) {
                usage_error("bad -e size", optarg);
            }
            break;
        case 'f':
            b->factor = (size_t)parse_int(optarg, 2, 1 << 20);
            break;
        case 'w':
            b->warmup = parse_int(optarg, 0, 1000000);
            break;
        case 'n':
            b->iters = parse_int(optarg, 1, 1000000);
            break;
        case 'o':
            b->out_path = optarg;
            break;
        case OPT_CSV:
            b->csv = 1;
            break;
        case OPT_INPLACE:
            b->inplace = 1;
            break;
        default:
            usage_error("bad option", NULL);
        }
    }
    if (optind != argc) {
        usage_error("unexpected argument", argv[optind]);
    }
    if (b->min_bytes > b->max_bytes) {
        usage_error("-b is larger than -e", NULL);
    }
    if (b->max_bytes / sizeof(float) > (size_t)INT_MAX) {
        usage_error("-e is larger than MPI's int count allows", NULL);
    }
}

static int cmp_double(const void *a, const void *c)
{
    double x = *(const double *)a, y = *(const double *)c;
    return (x > y) - (x < y);
}

static void mpi_check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "mpi-bench: %s failed: %s\n", what, msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv)
{
    mpi_bench_t b = {.min_bytes = 8, .max_bytes = 32u << 20, .factor = 2, .warmup = 5, .iters = 20};
    int rank = 0, nranks = 1;
    int version = 0, subversion = 0;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen = 0;
    FILE *out = stdout;

    parse_args(&b, argc, argv);
    mpi_check(MPI_Init(&argc, &argv), "MPI_Init");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Get_version(&version, &subversion);
    MPI_Get_library_version(lib, &liblen);
    lib[strcspn(lib, "\n,")] = '\0';

    size_t max_count = b.max_bytes / sizeof(float);
    float *send = calloc(max_count + 1, sizeof(float));
    float *recv = calloc(max_count + 1, sizeof(float));
    double *times = calloc((size_t)b.iters, sizeof(double));
    if (send == NULL || recv == NULL || times == NULL) {
        fprintf(stderr, "mpi-bench: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0 && b.out_path != NULL) {
        out = fopen(b.out_path, "w");
        if (out == NULL) {
            fprintf(stderr, "mpi-bench: cannot open %s: %s\n", b.out_path, strerror(errno));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (rank == 0) {
        if (b.csv) {
            fprintf(out, "coll,nranks,size,count,type,redop,root,algo,inplace,time_us,algbw_gbps,"
                         "busbw_gbps,wrong\n");
        } else {
            fprintf(out, "# mpi-bench allreduce: nranks %d, dtype f32, op sum, %s (MPI %d.%d)\n",
                    nranks, lib, version, subversion);
            fprintf(out,
                    "# %s, warmup %d, iters %d; time = median over iterations of the "
                    "slowest rank\n#\n",
                    b.inplace ? "in-place" : "out-of-place", b.warmup, b.iters);
            fprintf(out, "# %12s %12s %8s %6s %6s %10s %8s %8s %7s\n", "size", "count", "type",
                    "redop", "root", "time", "algbw", "busbw", "#wrong");
            fprintf(out, "# %12s %12s %8s %6s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "",
                    "", "(us)", "(GB/s)", "(GB/s)", "");
        }
    }

    int failed = 0;
    for (size_t bytes = b.min_bytes;;) {
        size_t count = bytes / sizeof(float);
        /* One exact check per size: every rank contributes rank + 1. */
        for (size_t i = 0; i < count; i++) {
            send[i] = (float)(rank + 1);
            recv[i] = (float)(rank + 1);
        }
        const void *sbuf = b.inplace ? MPI_IN_PLACE : (const void *)send;
        mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        for (int k = 0; k < b.warmup; k++) {
            mpi_check(MPI_Allreduce(sbuf, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                      "MPI_Allreduce");
            if (b.inplace) {
                memset(recv, 0, count * sizeof(float)); /* keep in-place values finite */
            }
        }
        mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        for (int k = 0; k < b.iters; k++) {
            double t0 = tc_now_s();
            mpi_check(MPI_Allreduce(sbuf, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                      "MPI_Allreduce");
            times[k] = tc_now_s() - t0;
        }
        mpi_check(MPI_Allreduce(MPI_IN_PLACE, times, b.iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
                  "MPI_Allreduce");
        qsort(times, (size_t)b.iters, sizeof(double), cmp_double);
        double med = (b.iters % 2) ? times[b.iters / 2]
                                   : 0.5 * (times[b.iters / 2 - 1] + times[b.iters / 2]);
        double algbw = med > 0 ? (double)(count * sizeof(float)) / med / 1e9 : 0.0;
        double busbw = algbw * 2.0 * (nranks - 1) / nranks;

        /* The check: out-of-place results must equal n(n+1)/2 everywhere. */
        long long wrong = 0;
        if (!b.inplace) {
            float want = (float)nranks * (float)(nranks + 1) / 2.0f;
            for (size_t i = 0; i < count; i++) {
                wrong += recv[i] != want;
            }
        }
        mpi_check(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD),
                  "MPI_Allreduce");
        failed |= wrong != 0;
        if (rank == 0) {
            if (b.csv) {
                fprintf(out, "allreduce,%d,%zu,%zu,f32,sum,-1,mpi,%d,%.3f,%.4f,%.4f,%lld\n", nranks,
                        count * sizeof(float), count, b.inplace, med * 1e6, algbw, busbw,
                        b.inplace ? -1 : wrong);
            } else {
                fprintf(out, "  %12zu %12zu %8s %6s %6d %10.2f %8.3f %8.3f %7lld\n",
                        count * sizeof(float), count, "f32", "sum", -1, med * 1e6, algbw, busbw,
                        b.inplace ? -1 : wrong);
            }
            fflush(out);
        }
        if (bytes >= b.max_bytes || (bytes > 0 && bytes > b.max_bytes / b.factor)) {
            break;
        }
        bytes = bytes > 0 ? bytes * b.factor : 1;
    }
    if (rank == 0 && out != stdout) {
        fclose(out);
    }
    free(send);
    free(recv);
    free(times);
    MPI_Finalize();
    return failed ? 1 : 0;
}
