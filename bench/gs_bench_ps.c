/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gs-bench ps`: the parameter server against the all-reduce, in one run,
 * through the public API only (gradsync/ps.h).
 *
 * 1. Latency. An ASP parameter server with one small key per server (key i
 *    lives on server i); each worker times a push (gs_ps_push +
 *    gs_ps_wait: until the server took it) and a pull of the key of the
 *    next rank's server, so every sample crosses ranks. Per size: the
 *    median over --lat-iters samples after warm-up, the worst rank's.
 * 2. Throughput. A BSP parameter server holding a model of --size bytes of
 *    f32 in --keys keys (each at least split_bytes is split over every
 *    server, so with colocated servers every rank serves 1/n of it). One
 *    iteration is what a BSP training step does: push the gradient of
 *    every key, pull every key (the pull returns the state after every
 *    worker's push of this clock), wait, gs_ps_clock. Beside it, in the
 *    same run, gs_allreduce of the same bytes (f32 sum). Both are timed
 *    per iteration after --warmup, in --rounds rounds that alternate which
 *    goes first; an iteration's time is the slowest rank's, and each
 *    column is the median over all timed iterations. The ratio is
 *    ps / allreduce (the target: at most 1.25 with colocated,
 *    sharded servers, since both move the same bytes per link).
 *
 * Usage: gs-bench ps [--size BYTES] [--keys K] [--iters N] [--warmup N]
 *                    [--rounds R] [--small LIST] [--lat-iters N]
 *                    [--servers S] [--consistency bsp|ssp|asp]
 * Sizes take K, M and G suffixes (powers of two).
 */
#include "gs_bench_ps.h"

#include "gs_bench.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gradsync/gradsync.h"
#include "gradsync/ps.h"

typedef struct ps_bench {
    size_t size;
    int keys;
    int iters;
    int warmup;
    int rounds;
    const char *small;
    int lat_iters;
    int servers;
    gs_ps_consistency_t consistency;
    gs_comm_t comm;
    int rank;
    int nranks;
} ps_bench_t;

#define PSB_CHECK(_b, _expr)                                                                       \
    do {                                                                                           \
        const gs_status_t _st = (_expr);                                                           \
        if (_st != GS_OK) {                                                                        \
            fprintf(stderr, "gs-bench ps: rank %d: %s failed: %s: %s\n", (_b)->rank, #_expr,       \
                    gs_status_name(_st), gs_last_error());                                         \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a;
    const double y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    if (n == 0) {
        return 0;
    }
    qsort(v, n, sizeof(double), cmp_double);
    return (n % 2) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gs-bench ps [--size BYTES] [--keys K] [--iters N] [--warmup N] [--rounds R]\n"
            "                   [--small LIST] [--lat-iters N] [--servers S]\n"
            "                   [--consistency bsp|ssp|asp]\n"
            "  --size       model bytes (f32), default 64M\n"
            "  --keys       keys the model is cut into, default 1\n"
            "  --iters      timed iterations per round, default 5\n"
            "  --warmup     untimed iterations first, default 2\n"
            "  --rounds     rounds alternating ps and allreduce, default 3\n"
            "  --small      comma list of small key sizes for latency, default 4,4K\n"
            "  --lat-iters  latency samples per size, default 200\n"
            "  --servers    0: colocated (default); S: the last S ranks serve only\n"
            "  --consistency of the throughput run, default bsp\n");
}

static int parse(ps_bench_t *b, int argc, char **argv)
{
    static const struct option longopts[] = {{"size", required_argument, NULL, 's'},
                                             {"keys", required_argument, NULL, 'k'},
                                             {"iters", required_argument, NULL, 'n'},
                                             {"warmup", required_argument, NULL, 'w'},
                                             {"rounds", required_argument, NULL, 'r'},
                                             {"small", required_argument, NULL, 'l'},
                                             {"lat-iters", required_argument, NULL, 'L'},
                                             {"servers", required_argument, NULL, 'S'},
                                             {"consistency", required_argument, NULL, 'c'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (!gs_bench_parse_size(optarg, &b->size)) {
                return -1;
            }
            break;
        case 'k':
            b->keys = atoi(optarg);
            break;
        case 'n':
            b->iters = atoi(optarg);
            break;
        case 'w':
            b->warmup = atoi(optarg);
            break;
        case 'r':
            b->rounds = atoi(optarg);
            break;
        case 'l':
            b->small = optarg;
            break;
        case 'L':
            b->lat_iters = atoi(optarg);
            break;
        case 'S':
            b->servers = atoi(optarg);
            break;
        case 'c':
            b->consistency = (strcmp(optarg, "asp") == 0)   ? GS_PS_ASP
                             : (strcmp(optarg, "ssp") == 0) ? GS_PS_SSP
                                                            : GS_PS_BSP;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            return -1;
        }
    }
    if ((b->keys < 1) || (b->iters < 1) || (b->warmup < 0) || (b->rounds < 1) ||
        (b->lat_iters < 1) || (b->size < 4 * (size_t)b->keys)) {
        return -1;
    }
    return 0;
}

/* ====================================================================== */
/* Latency                                                                */
/* ====================================================================== */

static int bench_latency(ps_bench_t *b, size_t bytes)
{
    gs_ps_opts_t o = GS_PS_OPTS_INIT;
    gs_ps_info_t info = GS_PS_INFO_INIT;
    gs_ps_t ps = GS_PS_NULL;
    const size_t count = (bytes + 3) / 4;
    float *buf = calloc(count, sizeof(float));
    double *push_us = calloc((size_t)b->lat_iters, sizeof(double));
    double *pull_us = calloc((size_t)b->lat_iters, sizeof(double));
    double med[2] = {0, 0};
    double worst[2] = {0, 0};
    int target;

    if ((buf == NULL) || (push_us == NULL) || (pull_us == NULL)) {
        fprintf(stderr, "gs-bench ps: out of memory\n");
        return 1;
    }
    o.consistency = GS_PS_ASP;
    o.servers = b->servers;
    o.lr = 1e-6;
    PSB_CHECK(b, gs_ps_create(b->comm, &o, &ps));
    PSB_CHECK(b, gs_ps_info(ps, &info));
    /* One key per server, registered in server order: key s lives on server s. */
    for (int s = 0; s < info.nservers; s++) {
        PSB_CHECK(b, gs_ps_register(ps, (uint64_t)s, count, GS_DTYPE_F32, NULL));
    }
    /* The next rank's server (or, with dedicated servers, one by worker). */
    target = info.worker >= 0 ? (info.worker + 1) % info.nservers : 0;
    if ((info.nservers == info.nranks) && (info.nranks > 1)) {
        target = (info.rank + 1) % info.nranks;
    }
    if (info.worker >= 0) {
        for (int i = -10; i < b->lat_iters; i++) {
            gs_ps_request_t r = GS_PS_REQUEST_NULL;
            double t0 = now_us();

            PSB_CHECK(b, gs_ps_push(ps, (uint64_t)target, buf, count, GS_DTYPE_F32, &r));
            PSB_CHECK(b, gs_ps_wait(&r));
            if (i >= 0) {
                push_us[i] = now_us() - t0;
            }
            t0 = now_us();
            PSB_CHECK(b, gs_ps_pull(ps, (uint64_t)target, buf, count, GS_DTYPE_F32, &r));
            PSB_CHECK(b, gs_ps_wait(&r));
            if (i >= 0) {
                pull_us[i] = now_us() - t0;
            }
            PSB_CHECK(b, gs_ps_clock(ps));
        }
        med[0] = median(push_us, (size_t)b->lat_iters);
        med[1] = median(pull_us, (size_t)b->lat_iters);
    }
    PSB_CHECK(b, gs_allreduce(b->comm, med, worst, 2, GS_DTYPE_F64, GS_OP_MAX));
    PSB_CHECK(b, gs_ps_destroy(ps));
    if (b->rank == 0) {
        printf("  %10zu %12.1f %12.1f\n", count * 4, worst[0], worst[1]);
    }
    free(buf);
    free(push_us);
    free(pull_us);
    return 0;
}

/* ====================================================================== */
/* Throughput                                                             */
/* ====================================================================== */

typedef struct model {
    size_t count;   /* f32 elements in all */
    size_t *kcount; /* per key */
    float *grad;
    float *params;
    float *ar_out;
    gs_ps_request_t *reqs;
} model_t;

static int ps_iteration(ps_bench_t *b, gs_ps_t ps, model_t *m)
{
    size_t off = 0;

    for (int k = 0; k < b->keys; k++) {
        PSB_CHECK(
            b, gs_ps_push(ps, (uint64_t)k, m->grad + off, m->kcount[k], GS_DTYPE_F32, &m->reqs[k]));
        off += m->kcount[k];
    }
    off = 0;
    for (int k = 0; k < b->keys; k++) {
        PSB_CHECK(b, gs_ps_pull(ps, (uint64_t)k, m->params + off, m->kcount[k], GS_DTYPE_F32,
                                &m->reqs[b->keys + k]));
        off += m->kcount[k];
    }
    PSB_CHECK(b, gs_ps_waitall((size_t)(2 * b->keys), m->reqs));
    PSB_CHECK(b, gs_ps_clock(ps));
    return 0;
}

/* Time one block of iterations of ps (which = 0) or allreduce (1); appends
 * the slowest rank's time of each iteration to @p out. */
static int timed_block(ps_bench_t *b, gs_ps_t ps, model_t *m, int which, double *out)
{
    double *mine = calloc((size_t)b->iters, sizeof(double));

    if (mine == NULL) {
        return 1;
    }
    PSB_CHECK(b, gs_barrier(b->comm));
    for (int i = 0; i < b->iters; i++) {
        const double t0 = now_us();

        if (which == 0) {
            if ((ps != GS_PS_NULL) && (ps_iteration(b, ps, m) != 0)) {
                return 1;
            }
        } else {
            PSB_CHECK(b,
                      gs_allreduce(b->comm, m->grad, m->ar_out, m->count, GS_DTYPE_F32, GS_OP_SUM));
        }
        mine[i] = now_us() - t0;
    }
    PSB_CHECK(b, gs_allreduce(b->comm, mine, out, (size_t)b->iters, GS_DTYPE_F64, GS_OP_MAX));
    free(mine);
    return 0;
}

static int bench_throughput(ps_bench_t *b)
{
    gs_ps_opts_t o = GS_PS_OPTS_INIT;
    gs_ps_info_t info = GS_PS_INFO_INIT;
    gs_ps_t ps = GS_PS_NULL;
    model_t m = {0};
    const size_t per = (size_t)b->rounds * (size_t)b->iters;
    double *t_ps = calloc(per, sizeof(double));
    double *t_ar = calloc(per, sizeof(double));
    size_t left;
    int worker;

    m.count = b->size / 4;
    m.kcount = calloc((size_t)b->keys, sizeof(size_t));
    m.grad = malloc(m.count * sizeof(float));
    m.params = malloc(m.count * sizeof(float));
    m.ar_out = malloc(m.count * sizeof(float));
    m.reqs = calloc(2 * (size_t)b->keys, sizeof(gs_ps_request_t));
    if ((t_ps == NULL) || (t_ar == NULL) || (m.kcount == NULL) || (m.grad == NULL) ||
        (m.params == NULL) || (m.ar_out == NULL) || (m.reqs == NULL)) {
        fprintf(stderr, "gs-bench ps: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < m.count; i++) {
        m.grad[i] = (float)(i % 13) * 1e-3f;
        m.params[i] = 0.0f;
    }
    o.consistency = b->consistency;
    o.servers = b->servers;
    o.lr = 1e-3;
    PSB_CHECK(b, gs_ps_create(b->comm, &o, &ps));
    PSB_CHECK(b, gs_ps_info(ps, &info));
    worker = info.worker >= 0;
    left = m.count;
    for (int k = 0; k < b->keys; k++) {
        m.kcount[k] = left / (size_t)(b->keys - k);
        left -= m.kcount[k];
        PSB_CHECK(b, gs_ps_register(ps, (uint64_t)k, m.kcount[k], GS_DTYPE_F32, NULL));
    }
    if (b->rank == 0) {
        printf("# throughput: %zu bytes of f32 in %d key(s), %s, %d workers, %d servers (%s); "
               "%d rounds of %d iterations after %d warm-up\n",
               m.count * 4, b->keys,
               (b->consistency == GS_PS_BSP)   ? "BSP"
               : (b->consistency == GS_PS_SSP) ? "SSP"
                                               : "ASP",
               info.nworkers, info.nservers,
               (info.nservers == info.nranks) ? "colocated" : "dedicated", b->rounds, b->iters,
               b->warmup);
    }
    for (int i = 0; i < b->warmup; i++) {
        if (worker && (ps_iteration(b, ps, &m) != 0)) {
            return 1;
        }
        PSB_CHECK(b, gs_allreduce(b->comm, m.grad, m.ar_out, m.count, GS_DTYPE_F32, GS_OP_SUM));
    }
    for (int r = 0; r < b->rounds; r++) {
        const int first = r % 2;

        for (int j = 0; j < 2; j++) {
            const int which = (j == 0) ? first : 1 - first;
            double *dst = ((which == 0) ? t_ps : t_ar) + (size_t)r * (size_t)b->iters;

            if (timed_block(b, worker ? ps : GS_PS_NULL, &m, which, dst) != 0) {
                return 1;
            }
        }
    }
    PSB_CHECK(b, gs_ps_destroy(ps));
    if (b->rank == 0) {
        const double ar = median(t_ar, per);
        const double p = median(t_ps, per);
        const double gb = (double)(m.count * 4) / 1e9;

        printf("  %-34s %12s %12s %10s\n", "operation", "time_ms", "algbw_GB/s", "ratio");
        printf("  %-34s %12.2f %12.3f %10s\n", "allreduce (f32 sum)", ar / 1e3, gb / (ar / 1e6),
               "1.00");
        printf("  %-34s %12.2f %12.3f %10.2f\n", "ps iteration (push + pull + wait)", p / 1e3,
               gb / (p / 1e6), p / ar);
        printf("# ratio = ps / allreduce, medians of the slowest rank per iteration; target <= "
               "1.25 (colocated, sharded)\n");
    }
    free(t_ps);
    free(t_ar);
    free(m.kcount);
    free(m.grad);
    free(m.params);
    free(m.ar_out);
    free(m.reqs);
    return 0;
}

int gs_bench_ps_main(int argc, char **argv)
{
    ps_bench_t b = {.size = 64u << 20,
                    .keys = 1,
                    .iters = 5,
                    .warmup = 2,
                    .rounds = 3,
                    .small = "4,4K",
                    .lat_iters = 200,
                    .servers = 0,
                    .consistency = GS_PS_BSP};
    char list[256];
    char *save = NULL;
    int rc = 0;

    if (parse(&b, argc, argv) != 0) {
        usage(stderr);
        return 2;
    }
    PSB_CHECK(&b, gs_comm_init_env(&b.comm, NULL));
    PSB_CHECK(&b, gs_comm_rank(b.comm, &b.rank));
    PSB_CHECK(&b, gs_comm_size(b.comm, &b.nranks));
    if (b.rank == 0) {
        printf("# gs-bench ps: %d ranks, gradsync %s\n", b.nranks, gs_version_string());
        printf("# latency: ASP, the key on another rank's server; median over %d samples, the "
               "worst rank's\n",
               b.lat_iters);
        printf("  %10s %12s %12s\n", "bytes", "push_us", "pull_us");
    }
    snprintf(list, sizeof(list), "%s", b.small);
    for (char *tok = strtok_r(list, ",", &save); (tok != NULL) && (rc == 0);
         tok = strtok_r(NULL, ",", &save)) {
        size_t bytes;

        if (!gs_bench_parse_size(tok, &bytes) || (bytes == 0)) {
            usage(stderr);
            rc = 2;
            break;
        }
        rc = bench_latency(&b, bytes);
    }
    if (rc == 0) {
        rc = bench_throughput(&b);
    }
    (void)gs_comm_destroy(b.comm);
    return rc;
}
