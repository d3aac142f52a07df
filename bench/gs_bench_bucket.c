/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gs-bench bucket`: exposed communication of gradient bucketing.
 *
 * The parameter list of ResNet-50 (torchvision, 161 tensors, 25,557,032
 * parameters) or BERT-base (BertModel with pooler, 199 tensors,
 * 109,482,240 parameters) is generated in code, in forward (registration)
 * order; --scale S divides every tensor's element count by S (at least 1
 * element) for small machines (bucket sizes are not scaled: pass
 * --bucket-mb 25/S to keep the number of buckets). The gradients are f32,
 * averaged.
 *
 * One iteration measures, every rank starting together after a barrier:
 *  1. bucketed: a simulated backward pass walks the tensors last to first,
 *     sleeping for each a share of --compute-ms proportional to its size
 *     (absolute deadlines, so the pass lasts compute-ms however fine the
 *     tensors; sleeping leaves the cores to communication), then calls
 *     gs_bucketer_ready() on it (one hook thread, as autograd on one device
 *     has). exposed = from the last ready() to gs_bucketer_wait() returning.
 *  2. the non-overlapped baseline of the same bytes, after the pass: one
 *     gs_allreduce of every gradient fused into one buffer (the flat
 *     gradient buffer itself with --layout flat), and, as a second column,
 *     one gs_iallreduce per tensor, all posted, then gs_waitall.
 * Each time is the slowest rank's; a row gives the median over -n
 * iterations after -w warm-ups. ratio = exposed / fused all-reduce (the
 * issue's target: at most 0.25 when the pass is longer than the
 * all-reduce). --compute-ms auto (the default) makes the pass twice the
 * fused all-reduce measured during the warm-ups. #wrong counts elements
 * of the last bucketed iteration that differ from the exact average.
 *
 * Usage: gs-bench bucket [--model resnet50|bert] [--scale S] [--compute-ms MS|auto]
 *        [--layout flat|separate] [--bucket-mb MB] [--first-mb MB] [--rebuild 0|1]
 *        [-w N] [-n N]
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gs_bench_bucket.h"
#include "tc_clock.h"

#include "gradsync/bucket.h"
#include "gradsync/gradsync.h"

#define BB_MAX_TENSORS 256
#define BB_MAX_ITERS 1000

typedef struct bb_model {
    const char *name;
    size_t n;
    size_t count[BB_MAX_TENSORS];
} bb_model_t;

typedef struct bb_args {
    const char *model;
    long scale;
    double compute_ms; /* < 0: auto */
    int flat;
    double bucket_mb;
    double first_mb;
    int rebuild; /* GS_UNSET: library default */
    int warmup;
    int iters;
} bb_args_t;

/* One measured iteration, the slowest rank's times in ms. */
typedef struct bb_sample {
    double backward;
    double exposed;
    double fused;
    double per_tensor;
    double step;
} bb_sample_t;

static void model_add(bb_model_t *m, size_t count)
{
    m->count[m->n++] = count;
}

/* torchvision resnet50().named_parameters(), in order. */
static void model_resnet50(bb_model_t *m)
{
    static const size_t planes_of[4] = {64, 128, 256, 512}, blocks_of[4] = {3, 4, 6, 3};
    size_t inplanes = 64;

    m->name = "resnet50";
    model_add(m, 64 * 3 * 7 * 7); /* conv1 */
    model_add(m, 64);             /* bn1 weight, bias */
    model_add(m, 64);
    for (int l = 0; l < 4; l++) {
        const size_t p = planes_of[l];

        for (size_t blk = 0; blk < blocks_of[l]; blk++) {
            model_add(m, p * inplanes); /* conv1 1x1 */
            model_add(m, p);
            model_add(m, p);
            model_add(m, p * p * 9); /* conv2 3x3 */
            model_add(m, p);
            model_add(m, p);
            model_add(m, 4 * p * p); /* conv3 1x1 */
            model_add(m, 4 * p);
            model_add(m, 4 * p);
            if (blk == 0) { /* downsample conv + bn */
                model_add(m, 4 * p * inplanes);
                model_add(m, 4 * p);
                model_add(m, 4 * p);
            }
            inplanes = 4 * p;
        }
    }
    model_add(m, 1000 * 2048); /* fc */
    model_add(m, 1000);
}

/* transformers BertModel (bert-base-uncased).named_parameters(), in order. */
static void model_bert(bb_model_t *m)
{
    const size_t h = 768, ffn = 3072;

    m->name = "bert";
    model_add(m, 30522 * h); /* word, position, token type embeddings */
    model_add(m, 512 * h);
    model_add(m, 2 * h);
    model_add(m, h); /* embeddings LayerNorm */
    model_add(m, h);
    for (int layer = 0; layer < 12; layer++) {
        for (int qkvo = 0; qkvo < 4; qkvo++) { /* query, key, value, attention output */
            model_add(m, h * h);
            model_add(m, h);
        }
        model_add(m, h); /* attention LayerNorm */
        model_add(m, h);
        model_add(m, ffn * h); /* intermediate */
        model_add(m, ffn);
        model_add(m, h * ffn); /* output */
        model_add(m, h);
        model_add(m, h); /* output LayerNorm */
        model_add(m, h);
    }
    model_add(m, h * h); /* pooler */
    model_add(m, h);
}

static void sleep_until(const struct timespec *t0, double ms)
{
    struct timespec t = *t0;
    const long long ns = (long long)(ms * 1e6);

    t.tv_sec += (time_t)(ns / 1000000000ll);
    t.tv_nsec += (long)(ns % 1000000000ll);
    if (t.tv_nsec >= 1000000000l) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000l;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {
    }
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median_of(const bb_sample_t *s, int n, size_t field_off)
{
    double v[BB_MAX_ITERS];

    for (int i = 0; i < n; i++) {
        memcpy(&v[i], (const char *)&s[i] + field_off, sizeof(double));
    }
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return v[n / 2];
}

static int usage(const char *why)
{
    if (why != NULL) {
        fprintf(stderr, "gs-bench bucket: %s\n", why);
    }
    fprintf(stderr,
            "usage: gs-bench bucket [--model resnet50|bert] [--scale S] [--compute-ms MS|auto]\n"
            "                       [--layout flat|separate] [--bucket-mb MB] [--first-mb MB]\n"
            "                       [--rebuild 0|1] [-w N] [-n N]\n");
    return 2;
}

static int parse_args(int argc, char **argv, bb_args_t *a)
{
    static const struct option longopts[] = {{"model", required_argument, NULL, 'm'},
                                             {"scale", required_argument, NULL, 's'},
                                             {"compute-ms", required_argument, NULL, 'c'},
                                             {"layout", required_argument, NULL, 'l'},
                                             {"bucket-mb", required_argument, NULL, 'b'},
                                             {"first-mb", required_argument, NULL, 'f'},
                                             {"rebuild", required_argument, NULL, 'r'},
                                             {"warmup", required_argument, NULL, 'w'},
                                             {"iters", required_argument, NULL, 'n'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int c;
    char *end;

    optind = 1;
    while ((c = getopt_long(argc, argv, "w:n:h", longopts, NULL)) != -1) {
        errno = 0;
        switch (c) {
        case 'm':
            a->model = optarg;
            if ((strcmp(optarg, "resnet50") != 0) && (strcmp(optarg, "bert") != 0)) {
                return usage("--model must be resnet50 or bert");
            }
            break;
        case 's':
            a->scale = strtol(optarg, &end, 10);
            if ((*end != '\0') || (a->scale < 1) || (a->scale > 1000000)) {
                return usage("--scale must be an integer >= 1");
            }
            break;
        case 'c':
            if (strcmp(optarg, "auto") == 0) {
                a->compute_ms = -1;
                break;
            }
            a->compute_ms = strtod(optarg, &end);
            if ((*end != '\0') || !(a->compute_ms >= 0) || (a->compute_ms > 1e6)) {
                return usage("--compute-ms must be a number of milliseconds or auto");
            }
            break;
        case 'l':
            if ((strcmp(optarg, "flat") != 0) && (strcmp(optarg, "separate") != 0)) {
                return usage("--layout must be flat or separate");
            }
            a->flat = (strcmp(optarg, "flat") == 0);
            break;
        case 'b':
        case 'f': {
            const double v = strtod(optarg, &end);

            if ((*end != '\0') || !(v >= 0) || (v > 1e6)) {
                return usage("--bucket-mb and --first-mb take a size in MiB");
            }
            *((c == 'b') ? &a->bucket_mb : &a->first_mb) = v;
            break;
        }
        case 'r':
            if ((strcmp(optarg, "0") != 0) && (strcmp(optarg, "1") != 0)) {
                return usage("--rebuild must be 0 or 1");
            }
            a->rebuild = optarg[0] - '0';
            break;
        case 'w':
        case 'n': {
            const long v = strtol(optarg, &end, 10);

            if ((*end != '\0') || (v < ((c == 'n') ? 1 : 0)) || (v > BB_MAX_ITERS)) {
                return usage("-w takes 0..1000 and -n 1..1000");
            }
            *((c == 'w') ? &a->warmup : &a->iters) = (int)v;
            break;
        }
        case 'h':
            usage(NULL);
            return 1;
        default:
            return usage(NULL);
        }
    }
    if (optind < argc) {
        return usage("unexpected argument");
    }
    return 0;
}

/* Everything one run holds. */
typedef struct bb_run {
    gs_comm_t comm;
    int rank, nranks;
    bb_args_t args;
    bb_model_t model;
    size_t total;                /* elements */
    float *flat;                 /* the flat gradient buffer (--layout flat) */
    float *fused;                /* the baseline's buffer (flat, or its own) */
    float *grad[BB_MAX_TENSORS]; /* each tensor's gradient */
    gs_request_t reqs[BB_MAX_TENSORS];
    gs_bucketer_t b;
    double compute_ms;
} bb_run_t;

#define BB_CHECK(_run, _what, _expr)                                                               \
    do {                                                                                           \
        const gs_status_t _st = (_expr);                                                           \
        if (_st != GS_OK) {                                                                        \
            fprintf(stderr, "gs-bench bucket: rank %d: %s failed: %s: %s\n", (_run)->rank,         \
                    (_what), gs_status_name(_st), gs_last_error());                                \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int bb_alloc(bb_run_t *r)
{
    size_t off = 0;

    for (size_t k = 0; k < r->model.n; k++) {
        r->total += r->model.count[k];
    }
    r->fused = malloc(r->total * sizeof(float));
    if (r->fused == NULL) {
        fprintf(stderr, "gs-bench bucket: out of memory for %zu floats\n", r->total);
        return 1;
    }
    memset(r->fused, 0, r->total * sizeof(float));
    if (r->args.flat) {
        r->flat = r->fused;
    }
    for (size_t k = 0; k < r->model.n; k++) {
        if (r->args.flat) {
            r->grad[k] = r->flat + off;
        } else {
            r->grad[k] = calloc(r->model.count[k], sizeof(float));
            if (r->grad[k] == NULL) {
                fprintf(stderr, "gs-bench bucket: out of memory\n");
                return 1;
            }
        }
        off += r->model.count[k];
    }
    return 0;
}

/* Gradient values whose average over the ranks is exact in f32 (small integers). */
static float bb_value(int rank, size_t k, size_t i)
{
    return (float)((rank * 3 + (int)(k % 11) + (int)(i % 13)) % 9) - 4.0f;
}

static void bb_fill(bb_run_t *r)
{
    for (size_t k = 0; k < r->model.n; k++) {
        for (size_t i = 0; i < r->model.count[k]; i++) {
            r->grad[k][i] = bb_value(r->rank, k, i);
        }
    }
}

static long long bb_wrong(const bb_run_t *r)
{
    long long wrong = 0;

    for (size_t k = 0; k < r->model.n; k++) {
        for (size_t i = 0; i < r->model.count[k]; i++) {
            double sum = 0;

            for (int q = 0; q < r->nranks; q++) {
                sum += bb_value(q, k, i);
            }
            if (fabs((double)r->grad[k][i] - sum / r->nranks) > 1e-6 * (1 + fabs(sum))) {
                wrong++;
            }
        }
    }
    return wrong;
}

/* The simulated backward pass: last tensor first, calling ready() when @p mark. */
static int bb_backward(bb_run_t *r, int mark)
{
    const double total = (double)r->total;
    struct timespec t0;
    double at = 0;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t k = r->model.n; k-- > 0;) {
        at += r->compute_ms * (double)r->model.count[k] / total;
        sleep_until(&t0, at);
        if (mark) {
            BB_CHECK(r, "gs_bucketer_ready", gs_bucketer_ready(r->b, k));
        }
    }
    return 0;
}

/* One iteration; times of this rank, then the slowest rank's (a MAX all-reduce). */
static int bb_iteration(bb_run_t *r, bb_sample_t *s)
{
    double t0, t1, t2, v[5];

    BB_CHECK(r, "gs_barrier", gs_barrier(r->comm));
    t0 = tc_now_ms();
    if (bb_backward(r, 1) != 0) {
        return 1;
    }
    t1 = tc_now_ms();
    BB_CHECK(r, "gs_bucketer_wait", gs_bucketer_wait(r->b));
    t2 = tc_now_ms();
    s->backward = t1 - t0;
    s->exposed = t2 - t1;
    s->step = t2 - t0;

    BB_CHECK(r, "gs_barrier", gs_barrier(r->comm));
    t0 = tc_now_ms();
    BB_CHECK(r, "gs_allreduce (fused)",
             gs_allreduce(r->comm, r->fused, r->fused, r->total, GS_DTYPE_F32, GS_OP_AVG));
    s->fused = tc_now_ms() - t0;

    BB_CHECK(r, "gs_barrier", gs_barrier(r->comm));
    t0 = tc_now_ms();
    for (size_t k = 0; k < r->model.n; k++) {
        BB_CHECK(r, "gs_iallreduce (per tensor)",
                 gs_iallreduce(r->comm, r->grad[k], r->grad[k], r->model.count[k], GS_DTYPE_F32,
                               GS_OP_AVG, &r->reqs[k]));
    }
    BB_CHECK(r, "gs_waitall", gs_waitall(r->model.n, r->reqs));
    s->per_tensor = tc_now_ms() - t0;

    v[0] = s->backward;
    v[1] = s->exposed;
    v[2] = s->fused;
    v[3] = s->per_tensor;
    v[4] = s->step;
    BB_CHECK(r, "gs_allreduce (max of the times)",
             gs_allreduce(r->comm, v, v, 5, GS_DTYPE_F64, GS_OP_MAX));
    s->backward = v[0];
    s->exposed = v[1];
    s->fused = v[2];
    s->per_tensor = v[3];
    s->step = v[4];
    return 0;
}

static int bb_setup(bb_run_t *r)
{
    gs_bucketer_opts_t o = GS_BUCKETER_OPTS_INIT;
    size_t id;

    o.op = GS_OP_AVG;
    o.bucket_bytes = (int64_t)(r->args.bucket_mb * 1048576.0);
    o.first_bucket_bytes = (int64_t)(r->args.first_mb * 1048576.0);
    o.rebuild = r->args.rebuild;
    BB_CHECK(r, "gs_bucketer_create", gs_bucketer_create(r->comm, &o, &r->b));
    for (size_t k = 0; k < r->model.n; k++) {
        BB_CHECK(r, "gs_bucketer_add",
                 gs_bucketer_add(r->b, r->grad[k], r->model.count[k], GS_DTYPE_F32, &id));
    }
    return 0;
}

/* --compute-ms auto: twice the fused all-reduce (median of 3, slowest rank). */
static int bb_auto_compute(bb_run_t *r)
{
    double t[3];

    for (int i = 0; i < 3; i++) {
        double t0;

        BB_CHECK(r, "gs_barrier", gs_barrier(r->comm));
        t0 = tc_now_ms();
        BB_CHECK(r, "gs_allreduce",
                 gs_allreduce(r->comm, r->fused, r->fused, r->total, GS_DTYPE_F32, GS_OP_AVG));
        t[i] = tc_now_ms() - t0;
    }
    BB_CHECK(r, "gs_allreduce (max)", gs_allreduce(r->comm, t, t, 3, GS_DTYPE_F64, GS_OP_MAX));
    qsort(t, 3, sizeof(double), cmp_d);
    r->compute_ms = 2 * t[1];
    return 0;
}

static void bb_report(const bb_run_t *r, const bb_sample_t *s, int n, long long wrong)
{
    gs_bucketer_stats_t st = GS_BUCKETER_STATS_INIT;
    const double bytes = (double)r->total * 4;
    const double backward = median_of(s, n, offsetof(bb_sample_t, backward));
    const double exposed = median_of(s, n, offsetof(bb_sample_t, exposed));
    const double fused = median_of(s, n, offsetof(bb_sample_t, fused));
    const double per_tensor = median_of(s, n, offsetof(bb_sample_t, per_tensor));
    const double step = median_of(s, n, offsetof(bb_sample_t, step));
    const double busbw =
        (fused > 0) ? bytes / (fused * 1e6) * 2.0 * (r->nranks - 1) / r->nranks : 0;

    (void)gs_bucketer_stats(r->b, &st);
    printf("# gs-bench bucket: model %s (%zu tensors, %zu params, f32, scale 1/%ld), nranks %d, "
           "op avg, gradsync %s\n",
           r->model.name, r->model.n, r->total, r->args.scale, r->nranks, gs_version_string());
    printf("# buckets of %g MiB (first %g MiB): %llu buckets, %llu in place, %llu fusion bytes, "
           "layout %s, rebuilt %d\n",
           r->args.bucket_mb, r->args.first_mb, (unsigned long long)st.buckets,
           (unsigned long long)st.inplace_buckets, (unsigned long long)st.fusion_bytes,
           r->args.flat ? "flat" : "separate", st.rebuilt);
    printf("# backward pass %.1f ms%s; warmup %d, iters %d; time = median over iterations of "
           "the slowest rank\n",
           r->compute_ms, (r->args.compute_ms < 0) ? " (auto: 2 x the fused all-reduce)" : "",
           r->args.warmup, r->args.iters);
    printf("# exposed = last ready() to wait() return; allreduce = one gs_allreduce of all "
           "gradients fused in one buffer after the pass; per-tensor = one gs_iallreduce per "
           "tensor, then gs_waitall; ratio = exposed / allreduce\n#\n");
    printf("# %12s %12s %7s %7s %9s %9s %9s %9s %7s %10s %7s %9s %9s %6s\n", "size", "count",
           "tensors", "buckets", "compute", "backward", "exposed", "allreduce", "busbw",
           "per-tensor", "ratio", "step", "step-base", "#wrong");
    printf("# %12s %12s %7s %7s %9s %9s %9s %9s %7s %10s %7s %9s %9s %6s\n", "(B)", "(elements)",
           "", "", "(ms)", "(ms)", "(ms)", "(ms)", "(GB/s)", "(ms)", "", "(ms)", "(ms)", "");
    printf("  %12.0f %12zu %7zu %7llu %9.1f %9.1f %9.2f %9.2f %7.3f %10.2f %7.3f %9.1f %9.1f "
           "%6lld\n",
           bytes, r->total, r->model.n, (unsigned long long)st.buckets, r->compute_ms, backward,
           exposed, fused, busbw, per_tensor, (fused > 0) ? exposed / fused : 0, step,
           backward + fused, wrong);
    fflush(stdout);
}

int gs_bench_bucket_main(int argc, char **argv)
{
    bb_run_t *r = calloc(1, sizeof(*r));
    bb_sample_t *s = NULL;
    long long wrong = 0, wrong_all = 0;
    int rc = 1;

    if (r == NULL) {
        return 1;
    }
    r->args = (bb_args_t){.model = "resnet50",
                          .scale = 1,
                          .compute_ms = -1,
                          .flat = 1,
                          .bucket_mb = 25,
                          .first_mb = 1,
                          .rebuild = GS_UNSET,
                          .warmup = 2,
                          .iters = 5};
    rc = parse_args(argc, argv, &r->args);
    if (rc != 0) {
        free(r);
        return (rc == 1) ? 0 : rc;
    }
    rc = 1;
    if (strcmp(r->args.model, "bert") == 0) {
        model_bert(&r->model);
    } else {
        model_resnet50(&r->model);
    }
    for (size_t k = 0; k < r->model.n; k++) {
        r->model.count[k] /= (size_t)r->args.scale;
        if (r->model.count[k] == 0) {
            r->model.count[k] = 1;
        }
    }
    if (gs_comm_init_env(&r->comm, NULL) != GS_OK) {
        fprintf(stderr, "gs-bench bucket: gs_comm_init_env: %s\n", gs_last_error());
        free(r);
        return 1;
    }
    (void)gs_comm_rank(r->comm, &r->rank);
    (void)gs_comm_size(r->comm, &r->nranks);
    s = calloc((size_t)r->args.iters, sizeof(*s));
    if ((s == NULL) || (bb_alloc(r) != 0) || (bb_setup(r) != 0)) {
        goto out;
    }
    r->compute_ms = r->args.compute_ms;
    if ((r->compute_ms < 0) && (bb_auto_compute(r) != 0)) {
        goto out;
    }
    for (int it = 0; it < r->args.warmup + r->args.iters; it++) {
        const int measured = it - r->args.warmup;
        const int last = (it + 1 == r->args.warmup + r->args.iters);
        bb_sample_t tmp;

        if (bb_iteration(r, (measured >= 0) ? &s[measured] : &tmp) != 0) {
            goto out;
        }
        if (last) {
            /* The bucketed result was overwritten by the baselines: redo one checked step. */
            bb_fill(r);
            if ((bb_backward(r, 1) != 0) || (gs_bucketer_wait(r->b) != GS_OK)) {
                fprintf(stderr, "gs-bench bucket: checked step failed: %s\n", gs_last_error());
                goto out;
            }
            wrong = bb_wrong(r);
        }
    }
    wrong_all = wrong;
    if (gs_allreduce(r->comm, &wrong_all, &wrong_all, 1, GS_DTYPE_I64, GS_OP_SUM) != GS_OK) {
        goto out;
    }
    if (r->rank == 0) {
        bb_report(r, s, r->args.iters, wrong_all);
    }
    rc = (wrong_all == 0) ? 0 : 1;
out:
    if (r->b != GS_BUCKETER_NULL) {
        (void)gs_bucketer_destroy(r->b);
    }
    (void)gs_comm_destroy(r->comm);
    if (!r->args.flat) {
        for (size_t k = 0; k < r->model.n; k++) {
            free(r->grad[k]);
        }
    }
    free(r->fused);
    free(s);
    free(r);
    return rc;
}
