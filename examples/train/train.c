/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Data-parallel training with compressed gradients: a one-hidden-layer MLP
 * (or, with --hidden 0, softmax regression) trained with SGD + momentum on a
 * deterministic synthetic classification problem (Gaussian clusters with
 * label noise; train_data.c) or on a CSV file. Every rank builds the same
 * data set and trains on its shard of the training split. By default
 * (--sync allreduce) it averages the flattened gradient with
 * gs_allreduce_ex(GS_OP_AVG), through a codec when --codec is not "none";
 * --sync bucket, ps-bsp, ps-ssp=N and ps-asp use gradient bucketing or a
 * parameter server instead (train_sync.c), and --slow-rank R --slow-ms M
 * makes rank R a straggler. Error feedback is on for every lossy codec
 * unless --no-ef: one gs_ef_t for the flattened gradient (as a DDP bucket
 * would have), kept for the whole run. Rank 0 prints the training loss, the
 * held-out loss and accuracy per epoch with the seconds since training
 * started, then the parameters' checksum (equal on every rank) and a last
 * line
 *
 *     final: loss L acc A          (held-out cross-entropy, accuracy in %)
 *
 * that scripts parse. With ps-ssp and ps-asp the ranks do not hold the same
 * parameters during training: the epoch lines are rank 0's own (its
 * training loss, and the whole held-out split evaluated by rank 0 alone on
 * the parameters it last pulled, without waiting for the others); the final
 * line evaluates the servers' parameters after every rank has finished.
 * Launch:
 *
 *     gsrun -n 4 build/examples/train/train --codec int8
 *     gsrun -n 4 build/examples/train/train --codec topk --ratio 0.01
 *     gsrun -n 2 build/examples/train/train --data iris.csv --epochs 50
 *     gsrun -n 4 build/examples/train/train --sync ps-ssp=2 --slow-rank 3 --slow-ms 20
 *
 * Elastic training (--elastic, with --sync allreduce): when a rank dies
 * (--kill-rank R --kill-at-step S makes rank R raise SIGKILL on itself at
 * global step S, counted from 0), the survivors' step fails with
 * GS_ERR_PEER_FAILED; they call gs_comm_shrink, say which shard of the
 * training split they lost (the dead ranks' shares), re-broadcast the
 * parameters and momentum from the new rank 0, and go on with their own
 * shards and the same per-rank batch. Start such a job by hand (RANK,
 * WORLD_SIZE, MASTER_ADDR, MASTER_PORT per process, or
 * tests/integration/run_train_elastic.sh): gsrun stops every rank when one
 * dies. Rank 0 prints one line per change of size ("elastic: steps 0-59
 * ran at 4 ranks") and, at the end, which steps ran at which size.
 *
 * Growing back (--grow-back, with --elastic): after the shrink the new rank
 * 0 makes an id (gs_comm_get_unique_id) and starts one fresh worker per
 * rank gone, itself: posix_spawn of /proc/self/exe with this command line
 * plus --join HEX --join-rank R --join-size N --join-shard Q (internal
 * options; the worker's output goes where rank 0's goes, and it dies with
 * the rank that started it). The survivors train --grow-after S steps
 * (default 2) at the smaller size while the worker starts, then every one
 * calls gs_comm_grow back to the size at the start; the new worker joins
 * with gs_comm_grow(GS_COMM_NULL, ...) as rank R, takes the shard of the
 * original rank Q, receives the parameters, momentum, epoch and step from
 * rank 0, and trains from that step to the end like the others. The rank
 * that started a worker waits for it at the end (bounded) and reports its
 * exit status. When the grow fails (the worker did not come within
 * GS_TIMEOUT_MS) the worker is stopped and the survivors go on at the
 * smaller size; training that ends before the grow step stops the worker
 * too. The S steps must take less than GS_TIMEOUT_MS (the worker waits that
 * long in its gs_comm_grow). At most 4 grow-backs a run.
 *
 * What it does not do: no threads, no BLAS, no checkpointing. Exit status:
 * 0 success, 1 a gradsync error (gs_last_error() is printed) or ranks whose
 * parameters diverged, 2 a usage or data error.
 */
#include "progress.h"
#include "train_data.h"
#include "train_sync.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <gradsync/compress.h>
#include <gradsync/gradsync.h>

#define CODEC_NAME_ROW(_name, _value, _str) {(_str), (_name)},

typedef struct codec_name {
    const char *name;
    gs_codec_kind_t kind;
} codec_name_t;

static const codec_name_t codec_names[] = {GS_CODEC_MAP(CODEC_NAME_ROW)};

typedef struct train_args {
    const char *codec;
    double ratio; /* topk / randk; <= 0: library default */
    int block;    /* <= 0: library default */
    bool ef;
    int epochs;
    double lr;
    double momentum;
    size_t batch; /* global: split evenly over the ranks */
    uint64_t seed;
    const char *data; /* CSV file, or NULL for the synthetic set */
    size_t hidden;    /* 0: softmax regression */
    double held_out;  /* fraction of the samples kept for evaluation */
    synth_params_t synth;
    train_sync_opts_t sync;
    bool elastic;    /* shrink and go on when a rank dies */
    int kill_rank;   /* -1: nobody */
    long kill_step;  /* global step at which kill_rank raises SIGKILL */
    bool grow_back;  /* --elastic: start a new worker per rank gone and grow back */
    long grow_after; /* steps at the smaller size before the grow */
    /* A new worker started by --grow-back (internal options). */
    const char *join_hex; /* the id as hex; NULL: not a new worker */
    int join_rank, join_size, join_shard;
} train_args_t;

/* At most this many grow-backs a run (a worker that fails at once would
 * otherwise be replaced for ever). */
#define GROW_BACK_MAX 4
/* The rank that started a worker waits this long for it at the end. */
#define JOINER_WAIT_S 30

/* Parameters, flattened: [w1 (h x d), b1 (h)] when h > 0, then w2 (c x in), b2 (c). */
typedef struct model {
    size_t d, h, c, in; /* in = h, or d for softmax regression */
    size_t nparams;
    size_t off_b1, off_w2, off_b2;
    float *theta, *grad, *vel;
    float *act, *dact, *z; /* per-sample scratch: h, h, c */
} model_t;

static int g_rank;

static int gs_failed(gs_status_t status, const char *what)
{
    if (status == GS_OK) {
        return 0;
    }
    fprintf(stderr, "train: rank %d: %s failed: %s: %s\n", g_rank, what, gs_status_name(status),
            gs_last_error());
    return 1;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ===================================================================== */
/* Command line                                                          */
/* ===================================================================== */

static void usage(FILE *f)
{
    fprintf(
        f, "usage: train [--codec none|fp16|bf16|int8|qsgd|sign|topk|randk] [--ratio R]\n"
           "             [--block B] [--no-ef] [--epochs N] [--lr X] [--momentum X]\n"
           "             [--batch N] [--seed N] [--hidden H] [--held-out F]\n"
           "             [--data FILE.csv | --samples N --features D --classes C\n"
           "              --clusters K --spread S --label-noise P]\n"
           "             [--sync allreduce|bucket|ps-bsp|ps-ssp=N|ps-asp]\n"
           "             [--bucket-bytes B]\n"
           "             [--slow-rank R --slow-ms M]\n"
           "             [--elastic [--grow-back [--grow-after S]]]\n"
           "             [--kill-rank R --kill-at-step S]\n"
           "  launch with: gsrun -n N train ...  (rank 0 prints; last line 'final: loss L acc A')\n"
           "  --codec      gradient codec (default none); --ratio for topk/randk (default 0.01)\n"
           "  --no-ef      run a lossy codec without error feedback (on by default)\n"
           "  --batch      global batch, split over the ranks (default 256)\n"
           "  --hidden     hidden units, 0 for softmax regression (default 64)\n"
           "  --data       CSV: integer label, then the features, one sample per line\n"
           "  --sync       gradient all-reduce (default), buckets, or a parameter server with\n"
           "               bulk, stale (N clocks) or no synchronisation; ps modes keep error\n"
           "               feedback for lossy codecs (no --no-ef)\n"
           "  --bucket-bytes  bucket mode: bytes per bucket, 0 for one per tensor\n"
           "               (default: the library's, one bucket for this model below 1 MiB)\n"
           "  --slow-rank  rank R sleeps --slow-ms M milliseconds every step (a straggler)\n"
           "  --elastic    when a rank dies, shrink the communicator and go on without it\n"
           "               (--sync allreduce; start the ranks by hand, not with gsrun)\n"
           "  --grow-back  with --elastic: rank 0 then starts a new worker per rank gone and,\n"
           "               --grow-after S steps later (default 2), the job grows back to its\n"
           "               size at the start (gs_comm_grow); the new workers take the lost shards\n"
           "  --kill-rank  rank R raises SIGKILL on itself at global step --kill-at-step S\n");
}

static bool parse_num(const char *s, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(s, &end);

    if ((end == s) || (*end != '\0') || !(v >= lo) || !(v <= hi)) {
        return false;
    }
    *out = v;
    return true;
}

/* Returns 0, or 2 after printing a usage error (on rank 0). */
static int parse_args(int argc, char **argv, train_args_t *a)
{
    enum {
        O_RATIO = 256,
        O_BLOCK,
        O_NOEF,
        O_MOM,
        O_HID,
        O_HELD,
        O_SAMP,
        O_FEAT,
        O_CLS,
        O_CLU,
        O_SPREAD,
        O_NOISE,
        O_SYNC,
        O_BUCKET,
        O_SLOWR,
        O_SLOWMS,
        O_ELASTIC,
        O_KILLR,
        O_KILLS,
        O_GROW,
        O_GROWAFTER,
        O_JOIN,
        O_JOINR,
        O_JOINN,
        O_JOINQ
    };
    static const struct option longopts[] = {{"codec", required_argument, NULL, 'c'},
                                             {"ratio", required_argument, NULL, O_RATIO},
                                             {"block", required_argument, NULL, O_BLOCK},
                                             {"no-ef", no_argument, NULL, O_NOEF},
                                             {"epochs", required_argument, NULL, 'e'},
                                             {"lr", required_argument, NULL, 'l'},
                                             {"momentum", required_argument, NULL, O_MOM},
                                             {"batch", required_argument, NULL, 'b'},
                                             {"seed", required_argument, NULL, 's'},
                                             {"data", required_argument, NULL, 'd'},
                                             {"hidden", required_argument, NULL, O_HID},
                                             {"held-out", required_argument, NULL, O_HELD},
                                             {"samples", required_argument, NULL, O_SAMP},
                                             {"features", required_argument, NULL, O_FEAT},
                                             {"classes", required_argument, NULL, O_CLS},
                                             {"clusters", required_argument, NULL, O_CLU},
                                             {"spread", required_argument, NULL, O_SPREAD},
                                             {"label-noise", required_argument, NULL, O_NOISE},
                                             {"help", no_argument, NULL, 'h'},
                                             {"sync", required_argument, NULL, O_SYNC},
                                             {"bucket-bytes", required_argument, NULL, O_BUCKET},
                                             {"slow-rank", required_argument, NULL, O_SLOWR},
                                             {"slow-ms", required_argument, NULL, O_SLOWMS},
                                             {"elastic", no_argument, NULL, O_ELASTIC},
                                             {"kill-rank", required_argument, NULL, O_KILLR},
                                             {"kill-at-step", required_argument, NULL, O_KILLS},
                                             {"grow-back", no_argument, NULL, O_GROW},
                                             {"grow-after", required_argument, NULL, O_GROWAFTER},
                                             {"join", required_argument, NULL, O_JOIN},
                                             {"join-rank", required_argument, NULL, O_JOINR},
                                             {"join-size", required_argument, NULL, O_JOINN},
                                             {"join-shard", required_argument, NULL, O_JOINQ},
                                             {NULL, 0, NULL, 0}};
    int c, li = -1;

    while ((c = getopt_long(argc, argv, "c:e:l:b:s:d:h", longopts, &li)) != -1) {
        double v = 0;
        bool ok = true;

        switch (c) {
        case 'c':
            a->codec = optarg;
            break;
        case O_RATIO:
            ok = parse_num(optarg, 1e-9, 1, &a->ratio);
            break;
        case O_BLOCK:
            ok = parse_num(optarg, 1, 1 << 24, &v);
            a->block = (int)v;
            break;
        case O_NOEF:
            a->ef = false;
            break;
        case 'e':
            ok = parse_num(optarg, 1, 100000, &v);
            a->epochs = (int)v;
            break;
        case 'l':
            ok = parse_num(optarg, 1e-9, 100, &a->lr);
            break;
        case O_MOM:
            ok = parse_num(optarg, 0, 0.999, &a->momentum);
            break;
        case 'b':
            ok = parse_num(optarg, 1, 1 << 24, &v);
            a->batch = (size_t)v;
            break;
        case 's':
            ok = parse_num(optarg, 0, 1e15, &v);
            a->seed = (uint64_t)v;
            a->synth.seed = a->seed;
            break;
        case 'd':
            a->data = optarg;
            break;
        case O_HID:
            ok = parse_num(optarg, 0, 1 << 16, &v);
            a->hidden = (size_t)v;
            break;
        case O_HELD:
            ok = parse_num(optarg, 0.001, 0.9, &a->held_out);
            break;
        case O_SAMP:
            ok = parse_num(optarg, 2, 1e8, &v);
            a->synth.samples = (size_t)v;
            break;
        case O_FEAT:
            ok = parse_num(optarg, 1, 1 << 20, &v);
            a->synth.features = (size_t)v;
            break;
        case O_CLS:
            ok = parse_num(optarg, 2, 65536, &v);
            a->synth.classes = (int)v;
            break;
        case O_CLU:
            ok = parse_num(optarg, 1, 1024, &v);
            a->synth.clusters = (int)v;
            break;
        case O_SPREAD:
            ok = parse_num(optarg, 0, 1000, &a->synth.spread);
            break;
        case O_NOISE:
            ok = parse_num(optarg, 0, 1, &a->synth.label_noise);
            break;
        case O_SYNC:
            ok = train_sync_parse(optarg, &a->sync);
            break;
        case O_BUCKET:
            ok = parse_num(optarg, 0, 1 << 30, &v);
            a->sync.bucket_bytes = (long)v;
            break;
        case O_SLOWR:
            ok = parse_num(optarg, 0, 1 << 20, &v);
            a->sync.slow_rank = (int)v;
            break;
        case O_SLOWMS:
            ok = parse_num(optarg, 0, 600000, &v);
            a->sync.slow_ms = (int)v;
            break;
        case O_ELASTIC:
            a->elastic = true;
            break;
        case O_KILLR:
            ok = parse_num(optarg, 0, 1 << 20, &v);
            a->kill_rank = (int)v;
            break;
        case O_KILLS:
            ok = parse_num(optarg, 0, 1e12, &v);
            a->kill_step = (long)v;
            break;
        case O_GROW:
            a->grow_back = true;
            break;
        case O_GROWAFTER:
            ok = parse_num(optarg, 0, 1e9, &v);
            a->grow_after = (long)v;
            break;
        case O_JOIN:
            a->join_hex = optarg;
            ok = (strlen(optarg) == 2 * GS_UNIQUE_ID_BYTES);
            break;
        case O_JOINR:
            ok = parse_num(optarg, 1, 1 << 20, &v);
            a->join_rank = (int)v;
            break;
        case O_JOINN:
            ok = parse_num(optarg, 2, 1 << 20, &v);
            a->join_size = (int)v;
            break;
        case O_JOINQ:
            ok = parse_num(optarg, 0, 1 << 20, &v);
            a->join_shard = (int)v;
            break;
        case 'h':
            if (g_rank == 0) {
                usage(stdout);
            }
            return -1;
        default:
            if (g_rank == 0) {
                usage(stderr);
            }
            return 2;
        }
        if (!ok) {
            if (g_rank == 0) {
                if (li >= 0) {
                    fprintf(stderr, "train: bad value '%s' for --%s\n", optarg, longopts[li].name);
                } else {
                    fprintf(stderr, "train: bad value '%s' for -%c\n", optarg, c);
                }
            }
            return 2;
        }
        li = -1;
    }
    if (optind < argc) {
        if (g_rank == 0) {
            fprintf(stderr, "train: unexpected argument '%s'\n", argv[optind]);
        }
        return 2;
    }
    if (a->elastic && (a->sync.mode != TRAIN_SYNC_ALLREDUCE)) {
        if (g_rank == 0) {
            fprintf(stderr, "train: --elastic needs --sync allreduce\n");
        }
        return 2;
    }
    if (a->grow_back && !a->elastic) {
        if (g_rank == 0) {
            fprintf(stderr, "train: --grow-back needs --elastic\n");
        }
        return 2;
    }
    if ((a->grow_after >= 0) && !a->grow_back) {
        if (g_rank == 0) {
            fprintf(stderr, "train: --grow-after needs --grow-back\n");
        }
        return 2;
    }
    if (a->grow_after < 0) {
        a->grow_after = 2;
    }
    if ((a->join_hex != NULL) && (!a->elastic || (a->join_size < 2) || (a->join_rank < 1) ||
                                  (a->join_rank >= a->join_size) || (a->join_shard < 0) ||
                                  (a->join_shard >= a->join_size))) {
        /* Internal: only --grow-back starts a process with --join. */
        fprintf(stderr, "train: --join (a new worker of --grow-back) needs --elastic, and "
                        "--join-rank R, --join-size N and --join-shard Q with 0 < R < N and "
                        "0 <= Q < N\n");
        return 2;
    }
    if (!a->ef && (a->sync.mode >= TRAIN_SYNC_PS_BSP)) {
        if (g_rank == 0) {
            fprintf(stderr, "train: --no-ef does not apply to --sync ps-*: the parameter server "
                            "always keeps error feedback for lossy codecs\n");
        }
        return 2;
    }
    return 0;
}

static int make_codec(const train_args_t *a, gs_codec_config_t *cfg, bool *compress)
{
    for (size_t i = 0; i < sizeof(codec_names) / sizeof(codec_names[0]); i++) {
        if (strcmp(a->codec, codec_names[i].name) == 0) {
            cfg->kind = codec_names[i].kind;
            if (a->ratio > 0) {
                cfg->ratio = a->ratio;
            }
            if (a->block > 0) {
                cfg->block_size = a->block;
            }
            cfg->seed = a->seed;
            *compress = (cfg->kind != GS_CODEC_NONE);
            return 0;
        }
    }
    if (g_rank == 0) {
        fprintf(stderr, "train: unknown --codec '%s' (none fp16 bf16 int8 qsgd sign topk randk)\n",
                a->codec);
    }
    return 2;
}

/* ===================================================================== */
/* Model                                                                 */
/* ===================================================================== */

static int model_init(model_t *m, size_t d, size_t h, size_t c, uint64_t seed)
{
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 7;
    const size_t w1 = h * d;
    float *w2;

    memset(m, 0, sizeof(*m));
    m->d = d;
    m->h = h;
    m->c = c;
    m->in = (h > 0) ? h : d;
    m->off_b1 = w1;
    m->off_w2 = w1 + h;
    m->off_b2 = m->off_w2 + c * m->in;
    m->nparams = m->off_b2 + c;
    m->theta = calloc(m->nparams, sizeof(float));
    m->grad = calloc(m->nparams, sizeof(float));
    m->vel = calloc(m->nparams, sizeof(float));
    m->act = calloc(m->in + 1, sizeof(float));
    m->dact = calloc(m->in + 1, sizeof(float));
    m->z = calloc(c, sizeof(float));
    if ((m->theta == NULL) || (m->grad == NULL) || (m->vel == NULL) || (m->act == NULL) ||
        (m->dact == NULL) || (m->z == NULL)) {
        return -1;
    }
    /* He initialisation for the ReLU layer, Glorot-like for the output. */
    for (size_t i = 0; i < w1; i++) {
        m->theta[i] = (float)(sqrt(2.0 / (double)d) * train_rng_normal(&rng));
    }
    w2 = m->theta + m->off_w2;
    for (size_t i = 0; i < c * m->in; i++) {
        w2[i] = (float)(sqrt(1.0 / (double)m->in) * train_rng_normal(&rng));
    }
    return 0;
}

static void model_free(model_t *m)
{
    free(m->theta);
    free(m->grad);
    free(m->vel);
    free(m->act);
    free(m->dact);
    free(m->z);
}

/* Logits of sample x into m->z (and the hidden activations into m->act).
 * Returns the cross-entropy of label y; *pred_out = arg max. */
static double model_forward(model_t *m, const float *x, int y, int *pred_out)
{
    const float *w2 = m->theta + m->off_w2, *b2 = m->theta + m->off_b2;
    const float *in = x;
    double zmax, sum = 0;
    int pred = 0;

    if (m->h > 0) {
        const float *w1 = m->theta, *b1 = m->theta + m->off_b1;

        for (size_t j = 0; j < m->h; j++) {
            const float *row = w1 + j * m->d;
            float s = b1[j];

            for (size_t k = 0; k < m->d; k++) {
                s += row[k] * x[k];
            }
            m->act[j] = (s > 0.0f) ? s : 0.0f;
        }
        in = m->act;
    }
    for (size_t o = 0; o < m->c; o++) {
        const float *row = w2 + o * m->in;
        float s = b2[o];

        for (size_t k = 0; k < m->in; k++) {
            s += row[k] * in[k];
        }
        m->z[o] = s;
        pred = (s > m->z[pred]) ? (int)o : pred;
    }
    zmax = m->z[pred];
    for (size_t o = 0; o < m->c; o++) {
        sum += exp((double)m->z[o] - zmax);
    }
    *pred_out = pred;
    return zmax + log(sum) - (double)m->z[y];
}

/* Adds the gradient of sample (x, y)'s loss to m->grad; returns the loss. */
static double model_backward(model_t *m, const float *x, int y)
{
    const float *w2 = m->theta + m->off_w2;
    float *g = m->grad, *gw2 = g + m->off_w2, *gb2 = g + m->off_b2;
    const float *in = (m->h > 0) ? m->act : x;
    int pred;
    const double loss = model_forward(m, x, y, &pred);
    const double zmax = m->z[pred];
    double sum = 0;

    for (size_t o = 0; o < m->c; o++) {
        sum += exp((double)m->z[o] - zmax);
    }
    if (m->h > 0) {
        memset(m->dact, 0, m->h * sizeof(float));
    }
    for (size_t o = 0; o < m->c; o++) {
        /* dL/dz = softmax(z) - onehot(y). */
        const float dz = (float)(exp((double)m->z[o] - zmax) / sum) - ((int)o == y ? 1.0f : 0.0f);
        float *grow = gw2 + o * m->in;
        const float *wrow = w2 + o * m->in;

        gb2[o] += dz;
        for (size_t k = 0; k < m->in; k++) {
            grow[k] += dz * in[k];
        }
        if (m->h > 0) {
            for (size_t k = 0; k < m->h; k++) {
                m->dact[k] += dz * wrow[k];
            }
        }
    }
    for (size_t j = 0; j < m->h; j++) {
        const float dh = (m->act[j] > 0.0f) ? m->dact[j] : 0.0f;
        float *grow = g + j * m->d;

        if (dh == 0.0f) {
            continue;
        }
        g[m->off_b1 + j] += dh;
        for (size_t k = 0; k < m->d; k++) {
            grow[k] += dh * x[k];
        }
    }
    return loss;
}

/* ===================================================================== */
/* Training                                                              */
/* ===================================================================== */

/* A new worker started by --grow-back. */
typedef struct joiner {
    pid_t pid;
    int rank, shard;
    bool grown;  /* joined: it trains to the end */
    bool reaped; /* waited for */
} joiner_t;

#define SEG_MAX 64

typedef struct run {
    gs_comm_t comm;
    int rank, size;
    const train_args_t *args;
    gs_codec_config_t codec;
    bool compress;
    train_sync_t sync;
    bool sync_open;
    bool replicated; /* every rank holds the same parameters after each step */
    model_t model;
    train_data_t train, test;
    size_t shard_lo, shard_n; /* this rank's part of the training split */
    size_t *order;            /* shard_n indices, shuffled each epoch */
    int world0;               /* --elastic: the size at the start */
    int rank0;                /* --elastic: this rank at the start */
    size_t lost;              /* --elastic: training samples of the ranks gone */
    size_t steps;             /* steps per epoch, the same on every rank */
    int start_epoch;          /* 1, or the epoch a new worker starts in */
    size_t start_step;        /* 0, or the step of start_epoch it starts at */
    /* --elastic: which global steps ran at which size, for the summary. */
    struct {
        long first, last;
        int size;
    } seg[SEG_MAX];
    int nseg;
    long seg_first; /* the first step at the current size */
    /* --grow-back */
    int argc;
    char **argv;            /* the command line, for the new workers */
    long grow_at;           /* the global step to grow back at; -1: none planned */
    int grows;              /* grow-backs planned so far */
    int grown;              /* and done */
    int *gone;              /* world0: the shards (first ranks) of the ranks gone */
    int ngone;              /* ... in the last shrink */
    gs_unique_id_t grow_id; /* rank 0: the id of the planned grow */
    joiner_t *kids;         /* the workers this process started */
    int nkids, kids_cap;
} run_t;

static void split_range(size_t n, int parts, int i, size_t *lo, size_t *len)
{
    const size_t base = n / (size_t)parts, extra = n % (size_t)parts, ui = (size_t)i;

    *lo = ui * base + (ui < extra ? ui : extra);
    *len = base + (ui < extra ? 1 : 0);
}

/* Held-out loss sum, correct count and sample count over this rank's share
 * of the test split, summed over all ranks (an uncompressed f64 all-reduce),
 * and the training statistics summed likewise. With @p alone, rank 0
 * evaluates the whole split and keeps its own training statistics, without
 * communication (the other ranks return at once). */
static int evaluate(run_t *r, bool alone, double *loss_out, double *acc_out, double train_stats[2])
{
    size_t lo = 0, len = r->test.n;
    double v[5] = {0, 0, 0, train_stats[0], train_stats[1]};

    if (alone && (r->rank != 0)) {
        return 0;
    }
    if (!alone) {
        split_range(r->test.n, r->size, r->rank, &lo, &len);
    }
    for (size_t i = lo; i < lo + len; i++) {
        int pred;

        v[0] += model_forward(&r->model, r->test.x + i * r->test.d, r->test.y[i], &pred);
        v[1] += (pred == r->test.y[i]);
        v[2] += 1;
    }
    if (!alone &&
        gs_failed(gs_allreduce(r->comm, v, v, 5, GS_DTYPE_F64, GS_OP_SUM), "gs_allreduce (eval)")) {
        return -1;
    }
    *loss_out = v[0] / v[2];
    *acc_out = 100.0 * v[1] / v[2];
    train_stats[0] = v[3];
    train_stats[1] = v[4];
    return 0;
}

static int open_sync(run_t *r);

/* The global step of step @p s of epoch @p epoch (1-based), counted from 0. */
static long global_step(const run_t *r, int epoch, size_t s)
{
    return (long)((size_t)(epoch - 1) * r->steps + s);
}

static void print_steps(const char *prefix, long first, long last, const char *suffix)
{
    if (first == last) {
        printf("%sstep %ld%s", prefix, first, suffix);
    } else {
        printf("%ssteps %ld-%ld%s", prefix, first, last, suffix);
    }
}

/* --elastic: steps seg_first..last ran at @p size ranks. Every rank keeps
 * the list (any of them may become rank 0); rank 0 prints the line. */
static void seg_end(run_t *r, long last, int size)
{
    char tail[48];

    if (last < r->seg_first) {
        return; /* no step ran at that size */
    }
    if (r->nseg < SEG_MAX) {
        r->seg[r->nseg].first = r->seg_first;
        r->seg[r->nseg].last = last;
        r->seg[r->nseg].size = size;
        r->nseg++;
    }
    if (r->rank == 0) {
        snprintf(tail, sizeof(tail), " ran at %d ranks\n", size);
        print_steps("elastic: ", r->seg_first, last, tail);
    }
}

/* Rank 0, at the end of an --elastic run: which steps ran at which size,
 * and the steps dropped between them (the ones a rank died in). */
static void seg_summary(const run_t *r)
{
    long next = 0;

    printf("elastic: summary:");
    for (int i = 0; i < r->nseg; i++) {
        char tail[32];

        if (r->seg[i].first > next) {
            print_steps(" ", next, r->seg[i].first - 1, " dropped,");
        }
        snprintf(tail, sizeof(tail), " at %d ranks%s", r->seg[i].size,
                 (i + 1 < r->nseg) ? "," : "");
        print_steps(" ", r->seg[i].first, r->seg[i].last, tail);
        next = r->seg[i].last + 1;
    }
    printf("%s\n", (r->nseg == SEG_MAX) ? " (the first changes only)" : "");
}

/* Waits for the workers this process started (only those not grown yet
 * with @p pending_only), up to @p wait_s seconds in all, then kills those
 * still running; says how each ended. Returns how many failed: a worker
 * that joined and then exited with a status other than 0, or had to be
 * killed here. One killed here before it joined, or that died of a signal
 * from elsewhere (a lost worker, which the others survive as they survived
 * the first), does not count. */
static int reap_kids(run_t *r, bool pending_only, double wait_s)
{
    const double end = now_s() + wait_s;
    int bad = 0;

    for (int i = 0; i < r->nkids; i++) {
        joiner_t *k = &r->kids[i];
        int st = 0;
        bool killed = false;
        pid_t w;
        char how[64];

        if (k->reaped || (pending_only && k->grown)) {
            continue;
        }
        while (((w = waitpid(k->pid, &st, WNOHANG)) == 0) && (now_s() < end)) {
            const struct timespec ts = {0, 10000000L};

            (void)nanosleep(&ts, NULL);
        }
        if (w == 0) {
            (void)kill(k->pid, SIGKILL);
            killed = true;
            while (((w = waitpid(k->pid, &st, 0)) < 0) && (errno == EINTR)) {
            }
        }
        k->reaped = true;
        if (w < 0) {
            fprintf(stderr, "train: rank %d: waitpid for the new worker %d failed: %s\n", r->rank,
                    (int)k->pid, strerror(errno));
            bad++;
            continue;
        }
        if (killed) {
            snprintf(how, sizeof(how), "was stopped (SIGKILL)%s",
                     k->grown ? " after the wait" : " before it joined");
        } else if (WIFEXITED(st)) {
            snprintf(how, sizeof(how), "exited with status %d", WEXITSTATUS(st));
        } else {
            snprintf(how, sizeof(how), "died of signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
        }
        printf("elastic: new worker pid %d (rank %d, shard %d) %s\n", (int)k->pid, k->rank,
               k->shard, how);
        fflush(stdout);
        if (k->grown && (killed || (WIFEXITED(st) && (WEXITSTATUS(st) != 0)))) {
            bad++;
        }
    }
    return bad;
}

static bool is_join_opt(const char *a)
{
    static const char *const names[] = {"--join", "--join-rank", "--join-size", "--join-shard"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const size_t n = strlen(names[i]);

        if ((strncmp(a, names[i], n) == 0) && ((a[n] == '\0') || (a[n] == '='))) {
            return true;
        }
    }
    return false;
}

extern char **environ;

/* Rank 0 after a shrink: start a worker that joins as rank @p new_rank
 * with the shard of first rank @p shard: this program, its command line
 * (without --join options of its own) and --join ... Returns 0 or -1. */
static int spawn_joiner(run_t *r, int new_rank, int shard)
{
    char hex[2 * GS_UNIQUE_ID_BYTES + 1], nr[16], nn[16], nq[16];
    char o_join[] = "--join", o_rank[] = "--join-rank", o_size[] = "--join-size",
         o_shard[] = "--join-shard";
    char **av;
    int n = 0, rc;
    pid_t pid;

    if (r->nkids == r->kids_cap) {
        const int cap = 2 * r->kids_cap + 4;
        joiner_t *k = realloc(r->kids, (size_t)cap * sizeof(*k));

        if (k == NULL) {
            fprintf(stderr, "train: rank %d: out of memory for a new worker\n", r->rank);
            return -1;
        }
        r->kids = k;
        r->kids_cap = cap;
    }
    av = calloc((size_t)r->argc + 9, sizeof(*av));
    if (av == NULL) {
        fprintf(stderr, "train: rank %d: out of memory for a new worker\n", r->rank);
        return -1;
    }
    av[n++] = r->argv[0];
    for (int i = 1; i < r->argc; i++) {
        if (is_join_opt(r->argv[i])) {
            i += (strchr(r->argv[i], '=') == NULL) ? 1 : 0; /* and its value */
            continue;
        }
        av[n++] = r->argv[i];
    }
    for (int i = 0; i < GS_UNIQUE_ID_BYTES; i++) {
        snprintf(hex + 2 * i, 3, "%02x", r->grow_id.bytes[i]);
    }
    snprintf(nr, sizeof(nr), "%d", new_rank);
    snprintf(nn, sizeof(nn), "%d", r->world0);
    snprintf(nq, sizeof(nq), "%d", shard);
    av[n++] = o_join;
    av[n++] = hex;
    av[n++] = o_rank;
    av[n++] = nr;
    av[n++] = o_size;
    av[n++] = nn;
    av[n++] = o_shard;
    av[n++] = nq;
    av[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, av, environ);
    free(av);
    if (rc != 0) {
        fprintf(stderr,
                "train: rank %d: could not start a new worker (posix_spawn of /proc/self/exe: "
                "%s); going on without growing back\n",
                r->rank, strerror(rc));
        return -1;
    }
    r->kids[r->nkids].pid = pid;
    r->kids[r->nkids].rank = new_rank;
    r->kids[r->nkids].shard = shard;
    r->kids[r->nkids].grown = false;
    r->kids[r->nkids].reaped = false;
    r->nkids++;
    printf("elastic: started a new worker, pid %d, to join as rank %d with shard %d\n", (int)pid,
           new_rank, shard);
    fflush(stdout);
    return 0;
}

/* --grow-back, rank 0 after a shrink at global step @p failed: make an id
 * and start one worker per shard gone. Returns the global step at which
 * the ranks grow back, or -1 (no grow: the reason is printed). */
static long plan_grow(run_t *r, long failed)
{
    if (r->grows >= GROW_BACK_MAX) {
        printf("elastic: not growing back: %d grow-backs already (at most %d a run)\n", r->grows,
               GROW_BACK_MAX);
        return -1;
    }
    if (gs_failed(gs_comm_get_unique_id(r->comm, &r->grow_id), "gs_comm_get_unique_id")) {
        printf("elastic: not growing back: no id for the new workers (see the error above)\n");
        return -1;
    }
    for (int i = 0; i < r->ngone; i++) {
        if (spawn_joiner(r, r->size + i, r->gone[i]) != 0) {
            (void)reap_kids(r, true, 0); /* the ones started already */
            return -1;
        }
    }
    return failed + 1 + r->args->grow_after;
}

/*
 * --elastic: a step failed. When a peer failed (not a local error), shrink
 * the communicator to the survivors, report the training samples the dead
 * ranks' shards held (this rank keeps its own shard), re-broadcast the
 * parameters and momentum from the new rank 0 and reopen the sync on the
 * new communicator. The survivors need not have failed in the same step (a
 * dead rank's last bytes reach some of them and not others), so the new
 * rank 0's state wins: its parameters, and its failed step as *step, the
 * one every survivor drops before going on with the next. With
 * --grow-back, rank 0 also starts a worker per rank gone and says at which
 * step every survivor grows back (elastic_grow). Returns 0 to go on, -1 to
 * give up.
 */
static int elastic_recover(run_t *r, int epoch, size_t *step)
{
    /* Rank 0's failed step, and the global step to grow back at (-1: none). */
    int64_t plan[2] = {(int64_t)*step, -1};
    const int size_before = r->size;
    gs_status_t err = GS_OK;
    gs_comm_t shrunk = GS_COMM_NULL;
    int32_t mine = r->rank0;
    int32_t *olds;
    char *present;
    size_t lost = 0;
    long failed;

    (void)gs_comm_get_async_error(r->comm, &err);
    if ((err != GS_ERR_PEER_FAILED) && (err != GS_ERR_TIMEOUT)) {
        return -1;
    }
    if (r->sync_open) {
        (void)train_sync_close(&r->sync); /* all-reduce mode: local */
        r->sync_open = false;
    }
    /* Workers started for an earlier loss that have not joined yet: this
     * shrink makes their id stale, and the grow below starts new ones. */
    (void)reap_kids(r, true, 0);
    r->grow_at = -1;
    if (gs_failed(gs_comm_shrink(r->comm, &shrunk), "gs_comm_shrink")) {
        return -1;
    }
    (void)gs_comm_destroy(r->comm); /* the failed one: its status is the failure */
    r->comm = shrunk;
    if (gs_failed(gs_comm_rank(r->comm, &r->rank), "gs_comm_rank") ||
        gs_failed(gs_comm_size(r->comm, &r->size), "gs_comm_size")) {
        return -1;
    }
    g_rank = r->rank;
    if (r->rank == 0) {
        /* Rank 0's step is the one every survivor takes (the broadcast below). */
        seg_end(r, global_step(r, epoch, *step) - 1, size_before);
    }
    olds = calloc((size_t)r->size, sizeof(*olds));
    present = calloc((size_t)r->world0, 1);
    if ((olds == NULL) || (present == NULL) ||
        gs_failed(gs_allgather(r->comm, &mine, olds, 1, GS_DTYPE_I32), "gs_allgather (ranks)")) {
        free(olds);
        free(present);
        return -1;
    }
    for (int i = 0; i < r->size; i++) {
        present[olds[i]] = 1;
    }
    r->ngone = 0;
    for (int q = 0; q < r->world0; q++) {
        size_t lo, len;

        if (present[q]) {
            continue;
        }
        r->gone[r->ngone++] = q;
        split_range(r->train.n, r->world0, q, &lo, &len);
        lost += len;
        if (r->rank == 0) {
            printf("elastic: rank %d is gone (epoch %d, step %zu): its shard, training samples "
                   "[%zu, %zu) (%zu samples), %s\n",
                   q, epoch, *step, lo, lo + len, len,
                   r->args->grow_back ? "waits for a new worker" : "is lost");
        }
    }
    free(olds);
    free(present);
    r->lost = lost;
    if (r->rank == 0) {
        printf("elastic: going on with %d of %d ranks; %zu of %zu training samples (%.1f%%) "
               "%s\n",
               r->size, r->world0, lost, r->train.n, 100.0 * (double)lost / (double)r->train.n,
               r->args->grow_back ? "left out until the grow back" : "lost");
        if (r->args->grow_back) {
            plan[1] = plan_grow(r, global_step(r, epoch, *step));
        }
        fflush(stdout);
    }
    if (gs_failed(gs_broadcast(r->comm, r->model.theta, r->model.nparams, GS_DTYPE_F32, 0),
                  "gs_broadcast (parameters)") ||
        gs_failed(gs_broadcast(r->comm, r->model.vel, r->model.nparams, GS_DTYPE_F32, 0),
                  "gs_broadcast (momentum)") ||
        gs_failed(gs_broadcast(r->comm, plan, 2, GS_DTYPE_I64, 0), "gs_broadcast (step)")) {
        return -1;
    }
    *step = (size_t)plan[0];
    failed = global_step(r, epoch, *step);
    if (r->rank != 0) {
        seg_end(r, failed - 1, size_before);
    }
    r->seg_first = failed + 1; /* the failed step is dropped */
    r->grow_at = (long)plan[1];
    if (r->grow_at >= 0) {
        r->grows++;
        if (r->rank == 0) {
            printf("elastic: step %ld dropped; growing back to %d ranks at step %ld\n", failed,
                   r->world0, r->grow_at);
            fflush(stdout);
        }
    }
    return (open_sync(r) == 0) ? 0 : -1;
}

/*
 * --grow-back: the planned step has come (before it runs). Every survivor
 * calls gs_comm_grow back to the size at the start, rank 0 with the id its
 * new workers hold; the new workers join as the ranks after the survivors.
 * Rank 0 then broadcasts the parameters, momentum, epoch and step, which
 * the new workers start from. A failed grow leaves the survivors'
 * communicator as it was: the workers not joined are stopped and training
 * goes on at the smaller size. Returns 0 to go on, -1 to give up.
 */
static int elastic_grow(run_t *r, int epoch, size_t step)
{
    const long at = global_step(r, epoch, step);
    const int size_before = r->size;
    int64_t pos[3] = {epoch, (int64_t)step, r->grows};
    gs_comm_t grown = GS_COMM_NULL;
    gs_status_t st;

    r->grow_at = -1;
    if (r->sync_open) {
        (void)train_sync_close(&r->sync); /* all-reduce mode: local */
        r->sync_open = false;
    }
    st = gs_comm_grow(r->comm, r->world0, (r->rank == 0) ? &r->grow_id : NULL, NULL, &grown);
    if (st != GS_OK) {
        (void)gs_failed(st, "gs_comm_grow");
        (void)reap_kids(r, true, 0);
        if (r->rank == 0) {
            printf("elastic: the grow back to %d ranks at step %ld failed (%s); going on with %d "
                   "ranks\n",
                   r->world0, at, gs_status_name(st), r->size);
            fflush(stdout);
        }
        return (open_sync(r) == 0) ? 0 : -1;
    }
    (void)gs_comm_destroy(r->comm); /* the survivors' own: grown has every rank */
    r->comm = grown;
    if (gs_failed(gs_comm_rank(r->comm, &r->rank), "gs_comm_rank") ||
        gs_failed(gs_comm_size(r->comm, &r->size), "gs_comm_size")) {
        return -1;
    }
    g_rank = r->rank;
    for (int i = 0; i < r->nkids; i++) {
        r->kids[i].grown = r->kids[i].grown || !r->kids[i].reaped;
    }
    if (gs_failed(gs_broadcast(r->comm, r->model.theta, r->model.nparams, GS_DTYPE_F32, 0),
                  "gs_broadcast (parameters)") ||
        gs_failed(gs_broadcast(r->comm, r->model.vel, r->model.nparams, GS_DTYPE_F32, 0),
                  "gs_broadcast (momentum)") ||
        gs_failed(gs_broadcast(r->comm, pos, 3, GS_DTYPE_I64, 0), "gs_broadcast (epoch, step)")) {
        return -1;
    }
    seg_end(r, at - 1, size_before);
    r->seg_first = at;
    r->lost = 0;
    r->grown++;
    if (r->rank == 0) {
        printf("elastic: grew back to %d ranks at step %ld (", r->size, at);
        for (int i = 0; i < r->ngone; i++) {
            printf("%snew rank %d took shard %d", (i > 0) ? ", " : "", size_before + i, r->gone[i]);
        }
        printf(")\n");
        fflush(stdout);
    }
    return (open_sync(r) == 0) ? 0 : -1;
}

/* A new worker of --grow-back: join the survivors with the id on the
 * command line as rank --join-rank, take shard --join-shard, and receive
 * the parameters, momentum, epoch and step from rank 0. Returns 0, 1 (a
 * gradsync error) or 2 (a bad id). */
static int join_job(run_t *r)
{
    const train_args_t *a = r->args;
    gs_unique_id_t id;
    gs_config_t cfg;
    int64_t pos[3] = {0, 0, 0};

    for (int i = 0; i < GS_UNIQUE_ID_BYTES; i++) {
        unsigned v;

        if (sscanf(a->join_hex + 2 * i, "%2x", &v) != 1) {
            fprintf(stderr, "train: --join: not a hex id of %d bytes\n", GS_UNIQUE_ID_BYTES);
            return 2;
        }
        id.bytes[i] = (unsigned char)v;
    }
    if (gs_failed(gs_config_init(&cfg), "gs_config_init")) {
        return 1;
    }
    cfg.rank = a->join_rank;
    if (gs_failed(gs_comm_grow(GS_COMM_NULL, a->join_size, &id, &cfg, &r->comm),
                  "gs_comm_grow (joining)")) {
        r->comm = GS_COMM_NULL;
        return 1;
    }
    if (gs_failed(gs_comm_rank(r->comm, &r->rank), "gs_comm_rank") ||
        gs_failed(gs_comm_size(r->comm, &r->size), "gs_comm_size")) {
        return 1;
    }
    r->world0 = r->size;
    r->rank0 = a->join_shard;
    if (gs_failed(gs_broadcast(r->comm, r->model.theta, r->model.nparams, GS_DTYPE_F32, 0),
                  "gs_broadcast (parameters)") ||
        gs_failed(gs_broadcast(r->comm, r->model.vel, r->model.nparams, GS_DTYPE_F32, 0),
                  "gs_broadcast (momentum)") ||
        gs_failed(gs_broadcast(r->comm, pos, 3, GS_DTYPE_I64, 0), "gs_broadcast (epoch, step)")) {
        return 1;
    }
    r->start_epoch = (int)pos[0];
    r->start_step = (size_t)pos[1];
    r->grows = (int)pos[2];
    printf("elastic: new worker pid %d joined as rank %d of %d with shard %d; it trains from "
           "epoch %d step %zu\n",
           (int)getpid(), r->rank, r->size, r->rank0, r->start_epoch, r->start_step);
    fflush(stdout);
    return 0;
}

/* One epoch, from step @p first (0 but for a new worker's first epoch):
 * returns 0 and fills the per-rank loss sum and sample count. */
static int train_epoch(run_t *r, int epoch, size_t per_rank, size_t steps, size_t first,
                       double stats[2])
{
    model_t *m = &r->model;
    uint64_t rng = (r->args->seed + 1) * 0xd1342543de82ef95ull + (uint64_t)epoch * 1000003u +
                   (uint64_t)r->rank;

    for (size_t i = r->shard_n; i > 1; i--) {
        const size_t j = train_rng_below(&rng, i), t = r->order[i - 1];

        r->order[i - 1] = r->order[j];
        r->order[j] = t;
    }
    for (size_t s = first; s < steps; s++) {
        const float inv = 1.0f / (float)per_rank;

        if ((r->grow_at >= 0) && (global_step(r, epoch, s) >= r->grow_at) &&
            (elastic_grow(r, epoch, s) != 0)) {
            return -1;
        }
        memset(m->grad, 0, m->nparams * sizeof(float));
        for (size_t b = 0; b < per_rank; b++) {
            const size_t i = r->order[s * per_rank + b];

            stats[0] += model_backward(m, r->train.x + i * r->train.d, r->train.y[i]);
            stats[1] += 1;
        }
        for (size_t k = 0; k < m->nparams; k++) {
            m->grad[k] *= inv;
        }
        if ((r->rank0 == r->args->kill_rank) &&
            ((long)((size_t)(epoch - 1) * steps + s) == r->args->kill_step)) {
            printf("train: rank %d raises SIGKILL at step %ld\n", r->rank0, r->args->kill_step);
            fflush(stdout);
            raise(SIGKILL);
        }
        if (train_sync_step(&r->sync) != 0) {
            /* --elastic: the survivors shrink and drop this step. */
            if (!r->args->elastic || (elastic_recover(r, epoch, &s) != 0)) {
                return -1;
            }
        }
    }
    return 0;
}

/* Every rank must hold the same parameters: the all-reduce gives every rank
 * the same average, and the update is deterministic (the parameter server
 * modes pull the servers' final state). Rank 0 prints the checksum, so that
 * runs can be compared bit for bit. */
static int check_replicas(run_t *r)
{
    double sum = 0, v[2];

    for (size_t k = 0; k < r->model.nparams; k++) {
        sum += (double)r->model.theta[k] * (double)(k % 7 + 1);
    }
    v[0] = sum;
    v[1] = -sum;
    if (gs_failed(gs_allreduce(r->comm, v, v, 2, GS_DTYPE_F64, GS_OP_MAX),
                  "gs_allreduce (check)")) {
        return -1;
    }
    if (v[0] != -v[1]) {
        fprintf(stderr,
                "train: rank %d: parameters differ across ranks (checksums %.17g .. %.17g)\n",
                r->rank, -v[1], v[0]);
        return -1;
    }
    if (r->rank == 0) {
        printf("params: checksum %.17g\n", sum);
    }
    if (r->args->elastic) {
        /* Every rank's own, new workers' included (theirs go where rank 0's go). */
        printf("elastic: rank %d (shard %d) checksum %.17g\n", r->rank, r->rank0, sum);
    }
    return 0;
}

/* The largest of every rank's @p rc. Only rank 0 reports bad arguments and
 * bad data: the ranks leave together, so that a fast rank's exit cannot
 * make gsrun stop rank 0 before it has printed why. */
static int ranks_agree(gs_comm_t comm, int rc)
{
    int32_t worst = rc;

    if (gs_failed(gs_allreduce(comm, &worst, &worst, 1, GS_DTYPE_I32, GS_OP_MAX),
                  "gs_allreduce (error check)")) {
        return (rc != 0) ? rc : 1;
    }
    return (int)worst;
}

static int train_run(run_t *r)
{
    gs_progress_t progress;
    const train_args_t *a = r->args;
    const size_t per_rank = a->batch / (size_t)r->size;
    size_t steps, min_shard;
    gs_counters_t c0 = {.size = sizeof(gs_counters_t)}, c1 = {.size = sizeof(gs_counters_t)};
    double loss = 0, acc = 0, start;
    char sync_name[32], slow[64] = "";
    const bool ps = (a->sync.mode >= TRAIN_SYNC_PS_BSP);
    const bool joiner = (a->join_hex != NULL);

    if (per_rank == 0) {
        if (r->rank == 0) {
            fprintf(stderr, "train: --batch %zu is smaller than the %d ranks\n", a->batch, r->size);
        }
        return 2;
    }
    min_shard = r->train.n / (size_t)r->size;
    steps = min_shard / per_rank; /* the same on every rank: the all-reduces must match */
    if (steps == 0) {
        if (r->rank == 0) {
            fprintf(stderr, "train: %zu training samples per rank, fewer than the batch of %zu\n",
                    min_shard, per_rank);
        }
        return 2;
    }
    r->steps = steps;
    /* The shard of the rank at the start (a new worker: of the rank it replaces). */
    split_range(r->train.n, r->world0, r->rank0, &r->shard_lo, &r->shard_n);
    r->order = malloc(r->shard_n * sizeof(size_t));
    if (r->order == NULL) {
        fprintf(stderr, "train: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < r->shard_n; i++) {
        r->order[i] = r->shard_lo + i;
    }
    if ((a->sync.slow_rank >= 0) && (a->sync.slow_ms > 0)) {
        /* main checked that slow_rank is a rank, with every rank agreeing. */
        snprintf(slow, sizeof(slow), "; rank %d sleeps %d ms/step", a->sync.slow_rank,
                 a->sync.slow_ms);
    }
    if (joiner) {
        /* The others are past the start: no header, no barrier. */
        r->seg_first = global_step(r, r->start_epoch, r->start_step);
    } else if (r->rank == 0) {
        printf("train: %d ranks, %zu train / %zu held-out samples, %zu features, %d classes; "
               "%s %zu params; codec %s%s; sync %s%s; batch %zu (%zu per rank), %zu steps/epoch, "
               "lr %g, momentum %g\n",
               r->size, r->train.n, r->test.n, r->train.d, r->train.classes,
               r->model.h > 0 ? "mlp" : "softmax", r->model.nparams, a->codec,
               !r->compress ? "" : ((a->ef || ps) ? "+ef" : " (no ef)"),
               train_sync_name(&a->sync, sync_name, sizeof(sync_name)), slow,
               per_rank * (size_t)r->size, per_rank, steps, a->lr, a->momentum);
        fflush(stdout);
    }
    /* The clock starts when every rank is ready to train. */
    if (!joiner && gs_failed(gs_barrier(r->comm), "gs_barrier (start)")) {
        return 1;
    }
    start = now_s();
    /* A progress line with the time left, on rank 0's terminal only. */
    gs_progress_start(&progress, "train", (double)a->epochs, r->rank == 0);
    for (int e = r->start_epoch; e <= a->epochs; e++) {
        double stats[2] = {0, 0};
        const size_t first = (e == r->start_epoch) ? r->start_step : 0;
        const double t0 = now_s();
        char sent[32] = "-";
        char where[32];

        snprintf(where, sizeof(where), "epoch %d/%d", e, a->epochs);
        gs_progress_show(&progress, (double)(e - 1), where);

        if (gs_failed(gs_comm_counters(r->comm, &c0), "gs_comm_counters") ||
            (train_epoch(r, e, per_rank, steps, first, stats) != 0) ||
            gs_failed(gs_comm_counters(r->comm, &c1), "gs_comm_counters") ||
            (evaluate(r, !r->replicated, &loss, &acc, stats) != 0)) {
            return 1;
        }
        if (!isfinite(loss) && (r->rank == 0)) {
            printf("epoch %d: the loss is not finite; training diverged\n", e);
        }
        gs_progress_clear(&progress);
        if (r->rank == 0) {
            /* The parameter server's traffic runs on its own communicator. */
            if (!ps && (c1.bytes_sent >= c0.bytes_sent)) { /* a shrink restarts the count */
                snprintf(sent, sizeof(sent), "%.2f", (double)(c1.bytes_sent - c0.bytes_sent) / 1e6);
            }
            printf("epoch %3d/%d  train loss %.4f  held-out loss %.4f  acc %6.2f%%  "
                   "sent %s MB/rank  %.2f s  elapsed %.3f s\n",
                   e, a->epochs, stats[0] / stats[1], loss, acc, sent, now_s() - t0,
                   now_s() - start);
            fflush(stdout);
        }
    }
    gs_progress_end(&progress);
    if (r->grow_at >= 0) {
        if (r->rank == 0) {
            printf("elastic: training ended before the grow back at step %ld\n", r->grow_at);
        }
        r->grow_at = -1;
        (void)reap_kids(r, true, 0);
    }
    if (train_sync_finish(&r->sync) != 0) {
        return 1;
    }
    if (!r->replicated) {
        double stats[2] = {0, 1};

        if (evaluate(r, false, &loss, &acc, stats) != 0) {
            return 1;
        }
    }
    if (check_replicas(r) != 0) {
        return 1;
    }
    /* The new workers are done too: wait for them here, so that 'final:'
     * stays the last line (gs_comm_destroy is local). */
    if (reap_kids(r, false, JOINER_WAIT_S) != 0) {
        fprintf(stderr, "train: rank %d: a new worker failed (its error is above)\n", r->rank);
        return 1;
    }
    if (r->rank == 0) {
        printf("done: %.3f s (every rank finished)\n", now_s() - start);
        if (a->elastic) {
            seg_end(r, global_step(r, a->epochs, steps) - 1, r->size);
            seg_summary(r);
        }
        if (r->size != r->world0) {
            printf("elastic: finished on %d of %d ranks, %zu training samples lost\n", r->size,
                   r->world0, r->lost);
        } else if (r->grown > 0) {
            printf("elastic: finished on %d of %d ranks, no training samples lost (new workers "
                   "took the shards of the ranks gone; the steps between were left out)\n",
                   r->size, r->world0);
        }
        printf("final: loss %.4f acc %.2f\n", loss, acc);
    }
    return 0;
}

/* The --sync mode over the flat model: its tensors are the layers' weights
 * and biases in forward order. */
static int open_sync(run_t *r)
{
    const model_t *m = &r->model;
    train_sync_model_t sm = {
        .theta = m->theta, .grad = m->grad, .vel = m->vel, .nparams = m->nparams, .ntensors = 0};

    if (m->h > 0) {
        sm.count[sm.ntensors++] = m->h * m->d; /* w1 */
        sm.count[sm.ntensors++] = m->h;        /* b1 */
    }
    sm.count[sm.ntensors++] = m->c * m->in; /* w2 */
    sm.count[sm.ntensors++] = m->c;         /* b2 */
    r->replicated = train_sync_replicated(&r->args->sync);
    r->sync_open = true;
    return train_sync_open(&r->sync, r->comm, &r->args->sync, &sm, r->args->lr, r->args->momentum,
                           r->compress ? &r->codec : NULL, r->args->ef);
}

/* Builds the data set (every rank the same), splits and standardises it. */
static int load_data(run_t *r, train_data_t *all)
{
    const train_args_t *a = r->args;
    size_t held;

    if (a->data != NULL) {
        char err[512];

        if (train_data_load_csv(a->data, all, err, sizeof(err)) != 0) {
            if (r->rank == 0) {
                fprintf(stderr, "train: %s\n", err);
            }
            return 2;
        }
    } else if (train_data_synth(&a->synth, all) != 0) {
        return 2;
    }
    train_data_shuffle(all, a->seed);
    held = (size_t)((double)all->n * a->held_out + 0.5);
    held = (held < 1) ? 1 : (held >= all->n ? all->n - 1 : held);
    train_data_split(all, held, &r->train, &r->test);
    train_data_standardise(&r->train, all);
    return 0;
}

int main(int argc, char **argv)
{
    train_args_t args = {.codec = "none",
                         .ratio = 0,
                         .block = 0,
                         .ef = true,
                         .epochs = 10,
                         .lr = 0.05,
                         .momentum = 0.9,
                         .batch = 256,
                         .seed = 1,
                         .data = NULL,
                         .hidden = 64,
                         .held_out = 0.2,
                         .synth = {.samples = 50000,
                                   .features = 128,
                                   .classes = 10,
                                   .clusters = 2,
                                   .spread = 0.25,
                                   .label_noise = 0.1,
                                   .seed = 1},
                         .sync = {.mode = TRAIN_SYNC_ALLREDUCE,
                                  .staleness = 0,
                                  .slow_rank = -1,
                                  .slow_ms = 0,
                                  .bucket_bytes = -1},
                         .elastic = false,
                         .kill_rank = -1,
                         .kill_step = 0,
                         .grow_back = false,
                         .grow_after = -1,
                         .join_hex = NULL,
                         .join_rank = 0,
                         .join_size = 0,
                         .join_shard = 0};
    run_t r = {.comm = NULL,
               .args = &args,
               .codec = GS_CODEC_CONFIG_INIT,
               .start_epoch = 1,
               .grow_at = -1,
               .argc = argc};
    train_data_t all = {0};
    bool joiner = false;
    int rc;

    /* --grow-back starts new workers with this command line: keep it as it
     * was (getopt_long may permute argv). A new worker (--join) does not
     * init from the environment it inherited: it joins with gs_comm_grow. */
    r.argv = calloc((size_t)argc + 1, sizeof(*r.argv));
    if (r.argv == NULL) {
        fprintf(stderr, "train: out of memory\n");
        return 1;
    }
    for (int i = 0; i < argc; i++) {
        r.argv[i] = argv[i];
        joiner = joiner || ((i > 0) && (strncmp(argv[i], "--join", 6) == 0) &&
                            ((argv[i][6] == '\0') || (argv[i][6] == '=')));
    }
    if (joiner) {
#ifdef __linux__
        /* Started by a rank, not by the launcher: it dies with that rank
         * (the thread that started it), so that no worker outlives the job. */
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        rc = parse_args(argc, argv, &args); /* g_rank is 0: errors are printed */
        if ((rc == 0) && (args.join_hex == NULL)) {
            rc = 2;
        }
        if (rc == 0) {
            args.kill_rank = -1; /* the rank it replaces died already */
            g_rank = args.join_rank;
            r.world0 = args.join_size;
            r.rank0 = args.join_shard;
            rc = make_codec(&args, &r.codec, &r.compress);
        }
        if (rc == 0) {
            setvbuf(stdout, NULL, _IOLBF, 0); /* its lines go where rank 0's go: whole lines */
        }
    } else {
        if (gs_failed(gs_comm_init_env(&r.comm, NULL), "gs_comm_init_env")) {
            free(r.argv);
            return 1;
        }
        if (gs_failed(gs_comm_rank(r.comm, &r.rank), "gs_comm_rank") ||
            gs_failed(gs_comm_size(r.comm, &r.size), "gs_comm_size")) {
            gs_comm_destroy(r.comm);
            free(r.argv);
            return 1;
        }
        g_rank = r.rank;
        r.world0 = r.size;
        r.rank0 = r.rank;
        rc = parse_args(argc, argv, &args);
        if ((rc == 0) && (args.join_hex != NULL)) {
            rc = 2; /* not reached: joiner above */
        }
        if ((rc == 0) && args.grow_back) {
            setvbuf(stdout, NULL, _IOLBF, 0); /* a new worker's lines come between ours */
        }
        if (rc == 0) {
            rc = make_codec(&args, &r.codec, &r.compress);
        }
        if ((rc == 0) && (args.sync.slow_rank >= r.size)) {
            if (r.rank == 0) {
                fprintf(stderr, "train: --slow-rank %d is not a rank of this %d-rank job\n",
                        args.sync.slow_rank, r.size);
            }
            rc = 2;
        }
    }
    r.gone = calloc((size_t)((r.world0 > 0) ? r.world0 : 1), sizeof(*r.gone));
    if ((rc == 0) && (r.gone == NULL)) {
        fprintf(stderr, "train: out of memory\n");
        rc = 1;
    }
    if (joiner) {
        /* Alone until it joins: its data and model first, so that it is
         * ready when the survivors grow. */
        if (rc == 0) {
            rc = load_data(&r, &all);
        }
        if ((rc == 0) && (model_init(&r.model, r.train.d, args.hidden, (size_t)r.train.classes,
                                     args.seed) != 0)) {
            fprintf(stderr, "train: out of memory for the model\n");
            rc = 1;
        }
        if (rc == 0) {
            rc = join_job(&r);
        }
        if (rc == 0) {
            rc = open_sync(&r);
        }
    } else {
        /* Every rank fails a bad command line together, after rank 0 has said
         * why (a rank that left first would make gsrun stop rank 0 mid-sentence). */
        rc = ranks_agree(r.comm, rc);
        if (rc == 0) {
            rc = ranks_agree(r.comm, load_data(&r, &all));
        }
        if ((rc == 0) && (model_init(&r.model, r.train.d, args.hidden, (size_t)r.train.classes,
                                     args.seed) != 0)) {
            fprintf(stderr, "train: out of memory for the model\n");
            rc = 1;
        }
        /* Rank 0's initial parameters are everyone's, as in DDP. */
        if ((rc == 0) &&
            gs_failed(gs_broadcast(r.comm, r.model.theta, r.model.nparams, GS_DTYPE_F32, 0),
                      "gs_broadcast (parameters)")) {
            rc = 1;
        }
        if (rc == 0) {
            rc = ranks_agree(r.comm, open_sync(&r));
        }
    }
    if (rc == 0) {
        rc = train_run(&r);
    }
    if (r.sync_open && (train_sync_close(&r.sync) != 0) && (rc == 0)) {
        rc = 1;
    }
    model_free(&r.model);
    train_data_free(&all);
    free(r.order);
    if ((r.comm != GS_COMM_NULL) && gs_failed(gs_comm_destroy(r.comm), "gs_comm_destroy") &&
        (rc == 0)) {
        rc = 1;
    }
    /* Workers still running after an error: wait for them (bounded), then stop them. */
    if ((reap_kids(&r, false, JOINER_WAIT_S) != 0) && (rc == 0)) {
        rc = 1;
    }
    free(r.kids);
    free(r.gone);
    free(r.argv);
    return (rc < 0) ? 0 : rc;
}
