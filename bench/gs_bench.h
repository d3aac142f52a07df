/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of gs-bench share: the name tables, the collective table,
 * the run's settings and state (bench_t), and the argument parser
 * (gs_bench_args.c). gs_bench.c runs the measurements; gs_bench_codec.c,
 * gs_bench_stats.c, gs_bench_floor.c, gs_bench_cuda.c and gs_bench_kernels.c
 * are its parts.
 */
#ifndef GRADSYNC_BENCH_GS_BENCH_H
#define GRADSYNC_BENCH_GS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "gs_bench_cuda.h"
#include "gs_bench_floor.h"

#include "gradsync/compress.h"
#include "gradsync/gradsync.h"

#define BENCH_EXIT_FAIL 1
#define BENCH_EXIT_USAGE 2

/* ===================================================================== */
/* Tables (names come from the public X-macro tables)                    */
/* ===================================================================== */

/* -a: how a row's per-iteration times are combined over ranks (nccl-tests' -a). */
enum { BENCH_AGG_RANK0 = 0, BENCH_AGG_AVG = 1, BENCH_AGG_MIN = 2, BENCH_AGG_MAX = 3 };
extern const char *const gs_bench_agg_names[4];

typedef struct dtype_info {
    gs_dtype_t dtype;
    size_t size;
    const char *name;
} dtype_info_t;

extern const dtype_info_t gs_bench_dtypes[GS_DTYPE_COUNT];

typedef struct name_info {
    int value;
    const char *name;
} name_info_t;

extern const name_info_t gs_bench_ops[GS_OP_COUNT];
extern const name_info_t gs_bench_algos[GS_ALGO_COUNT];

#define BENCH_COUNTOF(_a) (sizeof(_a) / sizeof((_a)[0]))

/*
 * How the size column maps to the call, and the bus-bandwidth factor of
 * nccl-tests' PERFORMANCE.md. BLOCKED collectives take the size as the total
 * buffer (count per rank = size / nranks), as nccl-tests does.
 */
typedef enum coll_kind {
    COLL_ALLREDUCE,
    COLL_BROADCAST,
    COLL_REDUCE,
    COLL_ALLGATHER,
    COLL_REDUCE_SCATTER,
    COLL_ALLTOALL,
    COLL_SENDRECV,
    COLL_BARRIER
} coll_kind_t;

typedef struct coll_info {
    coll_kind_t kind;
    gs_coll_type_t type; /* its statistics row (also how tc_coll_data.h names it), the
                          * kind gs_algo_implements() takes */
    const char *name;
    bool blocked; /* size = count * nranks elements */
    bool reduces; /* uses --op */
    bool rooted;  /* uses --root */
    bool codec;   /* takes --codec (the compressed shapes of gs_allreduce_ex,
                   * gs_reduce_scatter_ex and gs_allgather_ex) */
    bool ef;      /* takes --ef (error feedback of the send buffer) */
} coll_info_t;


#define BENCH_MAX_ALGOS GS_ALGO_COUNT /* names are unique in a list */

typedef enum out_format { OUT_TEXT, OUT_CSV, OUT_JSON } out_format_t;

typedef struct bench {
    const coll_info_t *coll;
    const dtype_info_t *dt;
    gs_op_t op;
    gs_algo_t algo;                   /* the algorithm of the row being measured */
    gs_algo_t algos[BENCH_MAX_ALGOS]; /* --algo LIST: measured in turn at every size */
    int nalgos;
    int rounds; /* --rounds: passes over the list per size, rows show medians */
    int root;
    size_t min_bytes;
    size_t max_bytes;
    size_t factor;
    int warmup;
    int iters;
    bool check; /* -c 1 (default) / -c 0: verify every size after timing it */
    int agg;    /* -a: 0 rank 0, 1 average, 2 min, 3 max (default) over ranks */
    bool inplace;
    bool use_codec; /* --codec given (the collectives whose coll_info_t says codec) */
    bool use_ef;    /* --ef: one gs_ef_t per size (of the send buffer's elements), reset
                     * before the error run */
    const char *codec_name;
    gs_codec_config_t codec;
    gs_ef_t ef;
    float *codec_input; /* in-place --codec runs restore their input from here */
    out_format_t format;
    const char *out_path;
    const char *transport; /* --transport NAME, or NULL for GS_TRANSPORT/default */
    bool stats;            /* --stats: print the slowest link per rank after the run */
    bool show_algo;        /* --algo auto: a column with the algorithm that ran */
    bool device;           /* --device cuda: the collective gets device buffers */
    bool tls_compare;      /* --tls-compare: every size on plain TCP and on TLS in turn */
    /* runtime */
    gs_comm_t comm;     /* the communicator being measured (one of comms[]) */
    gs_comm_t comms[2]; /* comms[0]; with --tls-compare comms[1] is the TLS one */
    int ncomms;
    int link; /* index into comms[] of the row being measured */
    int rank;
    int nranks;
    FILE *out;
    unsigned char *sendbuf;
    unsigned char *recvbuf;
    double *times;
    /* --device cuda: the GPU, and device twins of sendbuf, recvbuf and codec_input */
    gs_bench_gpu_t gpu;
    unsigned char *dsend;
    unsigned char *drecv;
    float *dcodec_input;
    unsigned paths_seen;    /* bit 0: a row ran on NCCL, bit 1: staged */
    bool comm_nccl;         /* a plain device call of this communicator ran on NCCL */
    gs_bench_floor_t floor; /* rank 0: the host's memory-copy rate (the floor column) */
} bench_t;

/* Parse "123", "4K", "256M", "1G" (powers of 1024, an optional B) into
 * *out: true, or false for anything else (every subcommand's sizes). */
bool gs_bench_parse_size(const char *s, size_t *out);

/* Fill *b from the command line (defaults first); on a usage error print
 * it and exit(BENCH_EXIT_USAGE), on --help exit(0). */
void gs_bench_parse_args(bench_t *b, int argc, char **argv);

#endif /* GRADSYNC_BENCH_GS_BENCH_H */
