/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs-bench: collective benchmark for gradsync in the conventions of
 * nccl-tests (size, count, type, redop, root, time, algbw, busbw, #wrong),
 * so that its numbers read like everyone else's. Written against the public
 * API only. Launch one process per rank, e.g.
 *   gsrun -n 4 gs-bench allreduce -b 8 -e 256M -f 2 -w 5 -n 20 --check
 * For each size: warm-up iterations, a barrier, then every timed iteration
 * is measured on every rank; the reported time is the median over
 * iterations of the slowest rank's time (the per-iteration maximum across
 * ranks is taken with gs_allreduce(GS_OP_MAX) on f64). With --check the
 * inputs are refilled with integer-exact per-rank patterns after the timed
 * loop, the collective runs once more and every output element is compared
 * with a serial reference. Only rank 0 prints. Exit status: 0 success,
 * 1 a gradsync error or wrong results, 2 a usage error.
 * allreduce, reduce_scatter or allgather --codec NAME [--ef] [--ratio R] runs
 * the compressed call (gs_allreduce_ex, gs_reduce_scatter_ex or
 * gs_allgather_ex with opts.codec; --ef for the summed shapes only) on
 * normal f32 data and adds the bytes that crossed the wire (the
 * gs_comm_counters bytes_sent delta per call) and the relative error against
 * the exact result (gs_bench_codec.c; docs/bench.md, "Compressed all-reduce,
 * reduce-scatter and all-gather"). One path serves the three: the input's
 * place and length, the error feedback's length and the output's place come
 * from the collective (codec_input_at, codec_output_at).
 * With --algo auto (the default) every row names the algorithm that ran
 * (gs_comm_stats' last_algo right after the timed loop, checked equal on
 * every rank). --stats prints, after the run, each rank's slowest link: the
 * peer it spent the most time blocked on (gs_comm_peer_stats, gathered to
 * rank 0), the most waited-on rank and the slowest link overall
 * (docs/stats.md explains how to read it).
 * When every rank shares one host, rank 0 first measures the host's
 * memory-copy rate (gs_bench_floor.c) while the others wait idle,
 * and every row's floor column is the fraction of the memory-traffic floor
 * it reached: the traffic of the design that ran (gs_comm_stats'
 * traffic_bytes, the cost model's count for the host) at that rate, over
 * the row's time; `-` where the library does not count it.
 * --device cuda (gs_bench_cuda.c, CUDA builds only) runs every collective on
 * cudaMalloc'd buffers: the patterns are made on the host and copied in
 * before the timed loop, the results copied back for --check, and the timer
 * still brackets the blocking call alone (which returns once the result is
 * in recvbuf); each row's path is nccl (last_algo native) or staged.
 * `gs-bench kernels` (gs_bench_kernels.c) times the CUDA kernels.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gs_bench.h"
#include "progress.h"
#include "tc_clock.h"
#include "tc_coll_data.h"
#include "gs_bench_bucket.h"
#include "gs_bench_codec.h"
#include "gs_bench_ps.h"
#include "gs_bench_cuda.h"
#include "gs_bench_floor.h"
#include "gs_bench_stats.h"

#include "gradsync/compress.h"
#include "gradsync/gradsync.h"

#define BENCH_TAG 0x6273u /* "bs": tag of the sendrecv benchmark */
#define BENCH_ALIGN 64

/* ===================================================================== */
/* Errors                                                                */
/* ===================================================================== */

static _Noreturn void die_gs(const bench_t *b, const char *what, gs_status_t status)
{
    fprintf(stderr, "gs-bench: rank %d: %s failed: %s (%d): %s\n", b ? b->rank : -1, what,
            gs_status_name(status), (int)status, gs_last_error());
    fflush(NULL);
    exit(BENCH_EXIT_FAIL);
}

/* Check a gradsync call; on error print gs_last_error() and exit 1. */
#define BENCH_CHECK(_b, _call)                                                                     \
    do {                                                                                           \
        gs_status_t st_ = (_call);                                                                 \
        if (st_ != GS_OK) {                                                                        \
            die_gs((_b), #_call, st_);                                                             \
        }                                                                                          \
    } while (0)

/* ===================================================================== */
/* The check's data: tests/common/tc_coll_data.h's integer-exact patterns  */
/* ===================================================================== */

/* Exact for every op but avg, which is a sum then a scale in the element type. */
static bool value_ok(const bench_t *b, gs_op_t op, double got, double want)
{
    if (op != GS_OP_AVG) {
        return got == want;
    }
    double tol;
    switch (b->dt->dtype) {
    case GS_DTYPE_F16:
        tol = ldexp(1.0, -10);
        break;
    case GS_DTYPE_BF16:
        tol = ldexp(1.0, -7);
        break;
    case GS_DTYPE_F64:
        tol = 1e-12;
        break;
    default:
        tol = ldexp(1.0, -22);
        break;
    }
    return tc_close(got, want, tol);
}

/* ===================================================================== */
/* Running one collective                                                */
/* ===================================================================== */

/* Elements passed as the count argument, and the bytes of the size column. */
static size_t count_for(const bench_t *b, size_t bytes)
{
    size_t per = b->dt->size * (b->coll->blocked ? (size_t)b->nranks : 1);
    return bytes / per;
}

static size_t bytes_for(const bench_t *b, size_t count)
{
    return count * b->dt->size * (b->coll->blocked ? (size_t)b->nranks : 1);
}

static double busbw_factor(const bench_t *b)
{
    double n = b->nranks;
    switch (b->coll->kind) {
    case COLL_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case COLL_ALLGATHER:
    case COLL_REDUCE_SCATTER:
    case COLL_ALLTOALL:
        return (n - 1) / n;
    case COLL_BROADCAST:
    case COLL_REDUCE:
    case COLL_SENDRECV:
        return 1.0;
    default:
        return 0.0;
    }
}

/* The options of the sharded shapes' _ex call: the codec and error feedback with --codec,
 * else the defaults (the plain call). */
static const gs_coll_opts_t *coll_opts(const bench_t *b, gs_coll_opts_t *opts)
{
    if (!b->use_codec) {
        return NULL;
    }
    opts->codec = &b->codec;
    opts->ef = b->ef;
    return opts;
}

static gs_status_t run_once(bench_t *b, size_t count)
{
    gs_coll_opts_t copts = GS_COLL_OPTS_INIT;
    size_t es = b->dt->size;
    gs_dtype_t dt = b->dt->dtype;
    unsigned char *send = b->device ? b->dsend : b->sendbuf;
    unsigned char *recv = b->device ? b->drecv : b->recvbuf;

    switch (b->coll->kind) {
    case COLL_ALLREDUCE: {
        gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;
        opts.algo = b->algo;
        if (b->use_codec) {
            opts.codec = &b->codec;
            opts.ef = b->ef;
        }
        return gs_allreduce_ex(b->comm, b->inplace ? recv : send, recv, count, dt, b->op, &opts);
    }
    case COLL_BROADCAST:
        return gs_broadcast(b->comm, recv, count, dt, b->root);
    case COLL_REDUCE:
        return gs_reduce(b->comm, b->inplace ? recv : send, recv, count, dt, b->op, b->root);
    case COLL_ALLGATHER:
        return gs_allgather_ex(b->comm, b->inplace ? recv + (size_t)b->rank * count * es : send,
                               recv, count, dt, coll_opts(b, &copts));
    case COLL_REDUCE_SCATTER:
        if (b->inplace) {
            return gs_reduce_scatter_ex(b->comm, send, send + (size_t)b->rank * count * es, count,
                                        dt, b->op, coll_opts(b, &copts));
        }
        return gs_reduce_scatter_ex(b->comm, send, recv, count, dt, b->op, coll_opts(b, &copts));
    case COLL_ALLTOALL:
        return gs_alltoall(b->comm, b->inplace ? recv : send, recv, count, dt);
    case COLL_SENDRECV: {
        gs_request_t reqs[2] = {GS_REQUEST_NULL, GS_REQUEST_NULL};
        int next = (b->rank + 1) % b->nranks;
        int prev = (b->rank + b->nranks - 1) % b->nranks;
        gs_status_t status = gs_irecv(b->comm, recv, count, dt, prev, BENCH_TAG, &reqs[0]);
        if (status != GS_OK) {
            return status;
        }
        status = gs_isend(b->comm, send, count, dt, next, BENCH_TAG, &reqs[1]);
        if (status != GS_OK) {
            (void)gs_wait(&reqs[0]); /* the peer's send still completes it */
            return status;
        }
        return gs_waitall(2, reqs);
    }
    case COLL_BARRIER:
        return gs_barrier(b->comm);
    }
    return GS_ERR_INTERNAL;
}

/* run_once(), exiting with a message naming the collective and count on error. */
static void run_checked(bench_t *b, size_t count)
{
    gs_status_t status = run_once(b, count);
    if (status != GS_OK) {
        char what[128];
        snprintf(what, sizeof(what), "%s (count %zu, %s)", b->coll->name, count, b->dt->name);
        die_gs(b, what, status);
    }
}

/* Where the collective reads its input: in recvbuf (true) or sendbuf (false), at byte
 * offset *off of it (the same on the device twins). */
static bool input_in_recv(const bench_t *b, size_t count, size_t *off)
{
    *off = 0;
    switch (b->coll->kind) {
    case COLL_BROADCAST:
        return true;
    case COLL_ALLGATHER:
        *off = b->inplace ? (size_t)b->rank * count * b->dt->size : 0;
        return b->inplace;
    case COLL_ALLTOALL:
    case COLL_ALLREDUCE:
    case COLL_REDUCE:
        return b->inplace;
    default: /* reduce_scatter (in place: from sendbuf too), sendrecv */
        return false;
    }
}

/* The buffer the check run's collective reads its input from. */
static unsigned char *check_input(const bench_t *b, size_t count)
{
    size_t off;

    return (input_in_recv(b, count, &off) ? b->recvbuf : b->sendbuf) + off;
}

/* The host buffer the collective writes its output to (in-place reduce_scatter: its block
 * of sendbuf). */
static unsigned char *output_at(const bench_t *b, size_t count)
{
    return ((b->coll->kind == COLL_REDUCE_SCATTER) && b->inplace)
               ? b->sendbuf + (size_t)b->rank * count * b->dt->size
               : b->recvbuf;
}

/*
 * Fill the inputs for the check run: the buffer the collective reads holds
 * this rank's pattern (the root's only, for broadcast), every output element
 * holds a sentinel.
 */
static void fill_for_check(bench_t *b, size_t count)
{
    const gs_coll_type_t coll = b->coll->type;
    const gs_op_t op = b->coll->reduces ? b->op : GS_OP_SUM;

    memset(b->recvbuf, 0xA5, bytes_for(b, count) + b->dt->size);
    memset(b->sendbuf, 0xA5, bytes_for(b, count) + b->dt->size);
    if ((b->coll->kind == COLL_BARRIER) ||
        ((b->coll->kind == COLL_BROADCAST) && (b->rank != b->root))) {
        return;
    }
    tc_exact_fill(check_input(b, count), tc_coll_in_elems(coll, count, b->nranks), b->dt->dtype, op,
                  b->nranks, b->rank, 0);
}

/* Number of wrong output elements on this rank after the check run. */
static int64_t count_wrong(const bench_t *b, size_t count)
{
    const gs_coll_type_t coll = b->coll->type;
    const gs_dtype_t dt = b->dt->dtype;
    const gs_op_t op = b->coll->reduces ? b->op : GS_OP_SUM;
    const unsigned char *out = output_at(b, count);
    const size_t nout = tc_coll_out_elems(coll, count, b->nranks);
    int64_t wrong = 0;

    if ((b->coll->kind == COLL_BARRIER) ||
        ((b->coll->kind == COLL_REDUCE) && (b->rank != b->root))) {
        return 0;
    }
    for (size_t i = 0; i < nout; i++) {
        const double want = tc_exact_want(coll, dt, op, b->nranks, b->rank, b->root, count, i, 0);

        wrong += !value_ok(b, op, tc_get(out, i, dt), want);
    }
    return wrong;
}

/* --device cuda: the bytes of each buffer that a call of @p count touches
 * (the range fill_for_check writes). */
static size_t touched_bytes(const bench_t *b, size_t count)
{
    return bytes_for(b, count) + b->dt->size;
}

/* --device cuda: copy the host buffers (patterns and sentinels) to the device. */
static void device_put(const bench_t *b, size_t count)
{
    if (b->device) {
        gs_bench_cuda_put(b->dsend, b->sendbuf, touched_bytes(b, count));
        gs_bench_cuda_put(b->drecv, b->recvbuf, touched_bytes(b, count));
    }
}

/* --device cuda: bring both buffers back (in-place reduce_scatter writes
 * sendbuf) for the checks, which run on the host. */
static void device_get(const bench_t *b, size_t count)
{
    if (b->device) {
        gs_bench_cuda_get(b->sendbuf, b->dsend, touched_bytes(b, count));
        gs_bench_cuda_get(b->recvbuf, b->drecv, touched_bytes(b, count));
    }
}

/* ===================================================================== */
/* Timing and output                                                     */
/* ===================================================================== */

static int cmp_double(const void *a, const void *c)
{
    double x = *(const double *)a, y = *(const double *)c;
    return (x > y) - (x < y);
}

typedef struct row {
    size_t bytes;
    size_t count;
    double time_us;    /* median over iterations of the slowest rank */
    double best_us;    /* fastest iteration (slowest rank) */
    double algbw;      /* GB/s */
    double busbw;      /* GB/s */
    int64_t wrong;     /* -1 when not checked */
    double wire_bytes; /* --codec: bytes_sent per call, the largest over ranks */
    double wirebw;     /* --codec: wire_bytes / time, GB/s */
    double relerr;     /* --codec: ||out - exact|| / ||exact||, the largest over ranks */
    int algo_used;     /* gs_algo_t of the timed calls; ALGO_MIXED when ranks disagree */
    const char *path;  /* --device cuda: "nccl" or "staged" (rank 0's last call) */
    uint64_t traffic;  /* memory traffic of the last timed call (the host's), 0 unknown */
} row_t;

#define ALGO_MIXED (-1)

/* GS_CUDA_PATH as the library reads it (its default is auto). */
static const char *cuda_path_env(void)
{
    const char *v = getenv("GS_CUDA_PATH");

    return ((v != NULL) && (*v != '\0')) ? v : "auto";
}

static const char *op_name(gs_op_t op)
{
    for (size_t i = 0; i < BENCH_COUNTOF(gs_bench_ops); i++) {
        if (gs_bench_ops[i].value == (int)op) {
            return gs_bench_ops[i].name;
        }
    }
    return "?";
}

static const char *algo_name(gs_algo_t algo)
{
    for (size_t i = 0; i < BENCH_COUNTOF(gs_bench_algos); i++) {
        if (gs_bench_algos[i].value == (int)algo) {
            return gs_bench_algos[i].name;
        }
    }
    return "?";
}

/* The algorithm that ran for a row ("mixed" when ranks disagreed: a bug). */
static const char *row_algo_name(const row_t *row)
{
    return (row->algo_used == ALGO_MIXED) ? "mixed" : algo_name((gs_algo_t)row->algo_used);
}

/* The --algo list as given ("auto,ring,rd"). */
static const char *algo_list_text(const bench_t *b, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; (i < b->nalgos) && (used < size); i++) {
        const int w =
            snprintf(buf + used, size - used, "%s%s", i ? "," : "", algo_name(b->algos[i]));
        used += (w > 0) ? (size_t)w : 0;
    }
    return buf;
}

static void print_header(const bench_t *b)
{
    FILE *f = b->out;
    const char *redop = b->coll->reduces ? op_name(b->op) : "none";
    char algos[BENCH_MAX_ALGOS * 16];

    algo_list_text(b, algos, sizeof(algos));

    if (b->format == OUT_CSV) {
        fprintf(f,
                "coll,nranks,size,count,type,redop,root,algo,inplace,time_us,algbw_gbps,"
                "busbw_gbps,wrong%s%s%s%s,floor\n",
                b->show_algo ? ",algo_used" : "",
                b->use_codec ? ",codec,ef,wire_bytes,wirebw_gbps,rel_err" : "",
                b->device ? ",device_path" : "", (b->ncomms > 1) ? ",link" : "");
        gs_bench_floor_print(&b->floor, stderr); /* the CSV stays machine-readable */
        return;
    }
    if (b->format == OUT_JSON) {
        fprintf(f,
                "{\"bench\": \"gs-bench\", \"coll\": \"%s\", \"nranks\": %d, \"dtype\": \"%s\", "
                "\"op\": \"%s\", \"root\": %d, \"algo\": \"%s\", \"inplace\": %s, "
                "\"warmup\": %d, \"iters\": %d, \"check\": %s, \"aggregation\": \"%s\", "
                "\"version\": \"%s\",\n",
                b->coll->name, b->nranks, b->dt->name, redop, b->coll->rooted ? b->root : -1, algos,
                b->inplace ? "true" : "false", b->warmup, b->iters, b->check ? "true" : "false",
                gs_bench_agg_names[b->agg], gs_version_string());
        if (b->use_codec) {
            fprintf(f, " \"codec\": \"%s\", \"ef\": %s,\n", b->codec_name,
                    b->use_ef ? "true" : "false");
        }
        if (b->device) {
            fprintf(f, " \"device\": \"cuda\", \"gpu\": \"%s\", \"gs_cuda_path\": \"%s\",\n",
                    b->gpu.name, cuda_path_env());
        }
        if (b->ncomms > 1) {
            fprintf(f, " \"links\": [\"tcp\", \"tls\"], \"shm\": false,\n");
        }
        if (b->floor.copy_bps > 0.0) {
            fprintf(f,
                    " \"memory_floor\": {\"threads\": %d, \"bytes_per_thread\": %zu, "
                    "\"memcpy_gbps\": %.4f, \"traffic_gbps\": %.4f},\n",
                    b->floor.threads, b->floor.bytes, b->floor.copy_bps / 1e9,
                    b->floor.traffic_bps / 1e9);
        } else {
            fprintf(f, " \"memory_floor\": null,\n");
        }
        fprintf(f, " \"rows\": [");
        return;
    }
    fprintf(f, "# gs-bench %s: nranks %d, dtype %s, op %s, algo %s, gradsync %s\n", b->coll->name,
            b->nranks, b->dt->name, redop, algos, gs_version_string());
    fprintf(f, "# %s, warmup %d, iters %d, check %s; time = median over iterations of %s\n",
            b->inplace ? "in-place" : "out-of-place", b->warmup, b->iters, b->check ? "on" : "off",
            gs_bench_agg_names[b->agg]);
    gs_bench_floor_print(&b->floor, f);
    if (b->rounds > 1) {
        fprintf(f, "# %d rounds over the algorithms, interleaved; a row is the median round\n",
                b->rounds);
    }
    if (b->device) {
        fprintf(f,
                "# device cuda: rank 0 on GPU %d of %d (%s), GS_CUDA_PATH %s; path nccl = "
                "NCCL, staged = through pinned host memory\n",
                b->gpu.device, b->gpu.ndevices, b->gpu.name, cuda_path_env());
    }
    if (b->ncomms > 1) {
        fprintf(f, "# --tls-compare: every size on a plain TCP and a TLS 1.3 communicator in turn, "
                   "both without shared memory; the last column is the link\n");
    }
    fprintf(f, "#\n");
    if (b->use_codec) {
        const bool sparse = b->codec.kind == GS_CODEC_TOPK || b->codec.kind == GS_CODEC_RANDK;
        fprintf(f, "# codec %s%s", b->codec_name, b->use_ef ? "+ef" : " (no ef)");
        if (sparse) {
            fprintf(f, ", ratio %g", b->codec.ratio > 0 ? b->codec.ratio : 0.01);
        }
        fprintf(f, "; busbw on the uncompressed size (effective); wire = bytes sent per rank "
                   "and call; rel.err of one call vs the exact f32 result\n");
        fprintf(f, "# %12s %12s %8s %6s %6s %10s %8s %8s %12s %8s %9s%s %6s\n", "size", "count",
                "type", "redop", "root", "time", "algbw", "busbw", "wire", "wirebw", "rel.err",
                b->device ? "    path" : "", "floor");
        fprintf(f, "# %12s %12s %8s %6s %6s %10s %8s %8s %12s %8s %9s%s %6s\n", "(B)", "(elements)",
                "", "", "", "(us)", "(GB/s)", "(GB/s)", "(B)", "(GB/s)", "",
                b->device ? "        " : "", "");
        return;
    }
    fprintf(f, "# %12s %12s %8s %6s %6s %10s %8s %8s %7s%s %6s%s\n", "size", "count", "type",
            "redop", "root", "time", "algbw", "busbw", "#wrong", b->device ? "    path" : "",
            "floor", b->show_algo ? "  algo" : "");
    fprintf(f, "# %12s %12s %8s %6s %6s %10s %8s %8s %7s%s %6s%s\n", "(B)", "(elements)", "", "",
            "", "(us)", "(GB/s)", "(GB/s)", "", b->device ? "        " : "", "",
            !b->show_algo     ? ""
            : (b->nalgos > 1) ? "  (asked->ran)"
                              : "  (auto chose)");
}

/* --tls-compare: the link of the row being printed. */
static const char *link_name(const bench_t *b)
{
    return (b->link == 1) ? "tls" : "tcp";
}

/* The text column of --device cuda ("  staged"), empty on the host. */
static const char *path_column(const bench_t *b, const row_t *row, char buf[16])
{
    buf[0] = '\0';
    if (b->device) {
        snprintf(buf, 16, "  %6s", row->path);
    }
    return buf;
}

static void print_row(const bench_t *b, const row_t *row, bool first)
{
    FILE *f = b->out;
    char path[16];
    const char *redop = b->coll->reduces ? op_name(b->op) : "none";
    int root = b->coll->rooted ? b->root : -1;
    const double frac = gs_bench_floor_frac(&b->floor, row->traffic, row->time_us);
    char floor_text[32] = "-";

    if (frac >= 0.0) {
        snprintf(floor_text, sizeof(floor_text), "%.3f", frac);
    }
    if (b->format == OUT_CSV) {
        fprintf(f, "%s,%d,%zu,%zu,%s,%s,%d,%s,%d,%.3f,%.4f,%.4f,%" PRId64, b->coll->name, b->nranks,
                row->bytes, row->count, b->dt->name, redop, root, algo_name(b->algo),
                b->inplace ? 1 : 0, row->time_us, row->algbw, row->busbw, row->wrong);
        if (b->show_algo) {
            fprintf(f, ",%s", row_algo_name(row));
        }
        if (b->use_codec) {
            fprintf(f, ",%s,%d,%.0f,%.4f,%.4e", b->codec_name, b->use_ef ? 1 : 0, row->wire_bytes,
                    row->wirebw, row->relerr);
        }
        if (b->device) {
            fprintf(f, ",%s", row->path);
        }
        if (b->ncomms > 1) {
            fprintf(f, ",%s", link_name(b));
        }
        fprintf(f, ",%s\n", floor_text);
    } else if (b->format == OUT_JSON) {
        fprintf(f,
                "%s\n  {\"size\": %zu, \"count\": %zu, \"time_us\": %.3f, \"best_us\": %.3f, "
                "\"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f, \"wrong\": %" PRId64,
                first ? "" : ",", row->bytes, row->count, row->time_us, row->best_us, row->algbw,
                row->busbw, row->wrong);
        if (b->nalgos > 1) {
            fprintf(f, ", \"algo\": \"%s\"", algo_name(b->algo));
        }
        if (b->show_algo) {
            fprintf(f, ", \"algo_used\": \"%s\"", row_algo_name(row));
        }
        if (b->use_codec) {
            fprintf(f, ", \"wire_bytes\": %.0f, \"wirebw_gbps\": %.4f, \"rel_err\": %.4e",
                    row->wire_bytes, row->wirebw, row->relerr);
        }
        if (b->device) {
            fprintf(f, ", \"path\": \"%s\"", row->path);
        }
        if (b->ncomms > 1) {
            fprintf(f, ", \"link\": \"%s\"", link_name(b));
        }
        fprintf(f, ", \"floor\": %s}", (frac >= 0.0) ? floor_text : "null");
    } else if (b->use_codec) {
        fprintf(f, "  %12zu %12zu %8s %6s %6d %10.2f %8.3f %8.3f %12.0f %8.3f %9.2e%s %6s%s%s\n",
                row->bytes, row->count, b->dt->name, redop, root, row->time_us, row->algbw,
                row->busbw, row->wire_bytes, row->wirebw, row->relerr, path_column(b, row, path),
                floor_text, (b->ncomms > 1) ? "  " : "", (b->ncomms > 1) ? link_name(b) : "");
    } else {
        char wrong[32];
        if (row->wrong < 0) {
            snprintf(wrong, sizeof(wrong), "N/A");
        } else {
            snprintf(wrong, sizeof(wrong), "%" PRId64, row->wrong);
        }
        char ran[40] = "";
        if (b->show_algo) {
            snprintf(ran, sizeof(ran), "  %s%s",
                     (b->nalgos > 1 && b->algo == GS_ALGO_AUTO) ? "auto->" : "",
                     row_algo_name(row));
        }
        fprintf(f, "  %12zu %12zu %8s %6s %6d %10.2f %8.3f %8.3f %7s%s %6s%s%s%s\n", row->bytes,
                row->count, b->dt->name, redop, root, row->time_us, row->algbw, row->busbw, wrong,
                path_column(b, row, path), floor_text, ran, (b->ncomms > 1) ? "  " : "",
                (b->ncomms > 1) ? link_name(b) : "");
    }
    fflush(f);
}

/* --codec: the elements of this rank's input (the send buffer's). */
static size_t codec_in_elems(const bench_t *b, size_t count)
{
    return gs_bench_codec_in_elems(b->coll->type, count, b->nranks);
}

/* --codec, in place: every call starts from the same input (outside the timer). */
static void codec_restore(bench_t *b, size_t count)
{
    size_t off;
    const bool in_recv = input_in_recv(b, count, &off);

    if (!b->use_codec || !b->inplace) {
        return;
    }
    if (b->device) {
        gs_bench_cuda_copy((in_recv ? b->drecv : b->dsend) + off, b->dcodec_input,
                           codec_in_elems(b, count) * sizeof(float));
    } else {
        memcpy((in_recv ? b->recvbuf : b->sendbuf) + off, b->codec_input,
               codec_in_elems(b, count) * sizeof(float));
    }
}

/* The algorithm the last call of the benchmarked collective ran on this rank. */
static int last_algo(const bench_t *b)
{
    gs_comm_stats_t st = GS_COMM_STATS_INIT;

    BENCH_CHECK(b, gs_comm_stats(b->comm, &st));
    return (int)st.coll[b->coll->type].last_algo;
}

/* The memory traffic of the last call of the benchmarked collective (the host's, summed over
 * its ranks), 0 when the library does not count it. */
static uint64_t last_traffic(const bench_t *b)
{
    gs_comm_stats_t st = GS_COMM_STATS_INIT;

    BENCH_CHECK(b, gs_comm_stats(b->comm, &st));
    return st.traffic_bytes[b->coll->type];
}

/* @p algo if every rank reports it, ALGO_MIXED otherwise (collective). */
static int agreed_algo(const bench_t *b, int algo)
{
    int32_t v[2] = {algo, -algo}; /* max of both: the largest and minus the smallest */

    BENCH_CHECK(b, gs_allreduce(b->comm, v, v, 2, GS_DTYPE_I32, GS_OP_MAX));
    return (v[0] == -v[1]) ? v[0] : ALGO_MIXED;
}

/* Index of @p algo in the --algo list, or -1. */
static int algo_index(const bench_t *b, gs_algo_t algo)
{
    for (int i = 0; i < b->nalgos; i++) {
        if (b->algos[i] == algo) {
            return i;
        }
    }
    return -1;
}

static int cmp_row_time(const void *a, const void *b)
{
    const double x = ((const row_t *)a)->time_us, y = ((const row_t *)b)->time_us;
    return (x > y) - (x < y);
}

/* Combine each iteration's time over the ranks as -a says (every rank ends
 * with the same values): rank 0's, the average, the fastest or the slowest. */
static void aggregate_times(bench_t *b, int iters)
{
    switch (b->agg) {
    case BENCH_AGG_RANK0:
        BENCH_CHECK(b, gs_broadcast(b->comm, b->times, (size_t)iters, GS_DTYPE_F64, 0));
        break;
    case BENCH_AGG_AVG:
        BENCH_CHECK(
            b, gs_allreduce(b->comm, b->times, b->times, (size_t)iters, GS_DTYPE_F64, GS_OP_AVG));
        break;
    case BENCH_AGG_MIN:
        BENCH_CHECK(
            b, gs_allreduce(b->comm, b->times, b->times, (size_t)iters, GS_DTYPE_F64, GS_OP_MIN));
        break;
    default:
        BENCH_CHECK(
            b, gs_allreduce(b->comm, b->times, b->times, (size_t)iters, GS_DTYPE_F64, GS_OP_MAX));
        break;
    }
}

/* The median of @p n rounds of one algorithm at one size (rounds reordered). */
static void row_median(row_t *rounds, int n, row_t *out)
{
    const double bus_per_alg = (rounds[0].algbw > 0.0) ? rounds[0].busbw / rounds[0].algbw : 0.0;
    double best = rounds[0].best_us;
    int64_t wrong = -1;

    for (int r = 0; r < n; r++) {
        best = (rounds[r].best_us < best) ? rounds[r].best_us : best;
        wrong = (rounds[r].wrong > wrong) ? rounds[r].wrong : wrong;
    }
    qsort(rounds, (size_t)n, sizeof(row_t), cmp_row_time);
    *out = rounds[(n - 1) / 2];
    out->time_us =
        (n % 2) ? rounds[n / 2].time_us : 0.5 * (rounds[n / 2 - 1].time_us + rounds[n / 2].time_us);
    out->best_us = best;
    out->wrong = wrong;
    out->algbw = (out->time_us > 0.0) ? (double)out->bytes / out->time_us / 1e3 : 0.0;
    out->busbw = out->algbw * bus_per_alg;
}

/*
 * With auto and forced algorithms in the --algo list: auto's median time over
 * the best forced one's at this size, printed under the rows (text) or to
 * stderr (csv, json), and returned; 0 when the list has no such pair.
 */
static double print_auto_ratio(const bench_t *b, const row_t *rows)
{
    const int ai = algo_index(b, GS_ALGO_AUTO);
    int best = -1;
    double ratio;

    for (int i = 0; i < b->nalgos; i++) {
        if ((i != ai) && ((best < 0) || (rows[i].time_us < rows[best].time_us))) {
            best = i;
        }
    }
    if ((ai < 0) || (best < 0) || (rows[best].time_us <= 0.0)) {
        return 0.0;
    }
    ratio = rows[ai].time_us / rows[best].time_us;
    fprintf((b->format == OUT_TEXT) ? b->out : stderr,
            "#  %zu bytes: auto (%s) / best forced (%s) = %.2f\n", rows[ai].bytes,
            row_algo_name(&rows[ai]), algo_name(b->algos[best]), ratio);
    return ratio;
}

/*
 * --device cuda: the path of a row. NCCL runs plain calls as GS_ALGO_NATIVE;
 * anything else moved through host memory. last_algo says nothing for the
 * compressed all-reduce and point-to-point, which take the communicator's
 * path (device_probe).
 */
static const char *row_path(const bench_t *b, int algo_used)
{
    if (b->use_codec || (b->coll->kind == COLL_SENDRECV) || (b->coll->kind == COLL_BARRIER)) {
        return (b->coll->kind == COLL_BARRIER) ? "host" : b->comm_nccl ? "nccl" : "staged";
    }
    return (algo_used == GS_ALGO_NATIVE) ? "nccl" : "staged";
}

/* --device cuda: one plain all-reduce of one element on the device buffers
 * (collective, untimed), which also sets the communicator's device side up:
 * does this communicator hand plain device calls to NCCL? */
static bool device_probe(const bench_t *b)
{
    gs_comm_stats_t st = GS_COMM_STATS_INIT;

    BENCH_CHECK(b, gs_allreduce(b->comm, b->dsend, b->drecv, 1, GS_DTYPE_F32, GS_OP_SUM));
    BENCH_CHECK(b, gs_comm_stats(b->comm, &st));
    return st.coll[GS_COLL_TYPE_ALLREDUCE].last_algo == GS_ALGO_NATIVE;
}

static void bench_size(bench_t *b, size_t count, row_t *row)
{
    int iters = b->iters;
    gs_counters_t c0 = {.size = sizeof(gs_counters_t)}, c1 = {.size = sizeof(gs_counters_t)};

    if (b->use_ef) {
        BENCH_CHECK(b, gs_ef_destroy(b->ef));
        b->ef = GS_EF_NULL;
        BENCH_CHECK(b, gs_ef_create(codec_in_elems(b, count), GS_DTYPE_F32, &b->ef));
    }
    BENCH_CHECK(b, gs_barrier(b->comm));
    for (int k = 0; k < b->warmup; k++) {
        codec_restore(b, count);
        run_checked(b, count);
    }
    BENCH_CHECK(b, gs_barrier(b->comm));
    double wire = 0.0;
    for (int k = 0; k < iters; k++) {
        codec_restore(b, count);
        if (b->use_codec && b->inplace) {
            /* Meet after the copy: on shared cores one rank's memcpy would
             * otherwise show up as the others' wait inside the timed call. */
            BENCH_CHECK(b, gs_barrier(b->comm));
        }
        BENCH_CHECK(b, gs_comm_counters(b->comm, &c0));
        double t0 = tc_now_s();
        run_checked(b, count);
        b->times[k] = tc_now_s() - t0;
        BENCH_CHECK(b, gs_comm_counters(b->comm, &c1));
        wire += (double)(c1.bytes_sent - c0.bytes_sent);
    }
    /* Read before the bookkeeping all-reduces below choose their own algorithm. */
    const int algo_used = (b->show_algo || b->device) ? last_algo(b) : (int)b->algo;
    const uint64_t traffic = last_traffic(b);
    aggregate_times(b, iters);
    qsort(b->times, (size_t)iters, sizeof(double), cmp_double);
    double median =
        (iters % 2) ? b->times[iters / 2] : 0.5 * (b->times[iters / 2 - 1] + b->times[iters / 2]);

    row->count = count;
    row->bytes = b->coll->kind == COLL_BARRIER ? 0 : bytes_for(b, count);
    row->time_us = median * 1e6;
    row->best_us = b->times[0] * 1e6;
    row->algbw = median > 0 ? (double)row->bytes / median / 1e9 : 0.0;
    row->busbw = row->algbw * busbw_factor(b);
    row->wrong = -1;
    row->wire_bytes = 0.0;
    row->wirebw = 0.0;
    row->relerr = 0.0;
    row->algo_used = b->show_algo ? agreed_algo(b, algo_used) : algo_used;
    row->path = row_path(b, algo_used);
    row->traffic = traffic;
    if (b->device) {
        b->paths_seen |= (strcmp(row->path, "nccl") == 0)     ? 1u
                         : (strcmp(row->path, "staged") == 0) ? 2u
                                                              : 0u;
    }

    if (b->use_codec) {
        /* The bytes of one call on the busiest rank, and the error of one call from a zero
         * residual, the largest over ranks (every rank checks the whole output). */
        double v[2] = {wire / iters, 0.0};
        if (b->use_ef) {
            BENCH_CHECK(b, gs_ef_reset(b->ef));
        }
        codec_restore(b, count);
        run_checked(b, count);
        device_get(b, count);
        v[1] = gs_bench_codec_relerr((const float *)output_at(b, count), b->coll->type, count,
                                     b->nranks, b->rank, b->coll->reduces && (b->op == GS_OP_AVG));
        BENCH_CHECK(b, gs_allreduce(b->comm, v, v, 2, GS_DTYPE_F64, GS_OP_MAX));
        row->wire_bytes = v[0];
        row->wirebw = median > 0 ? v[0] / median / 1e9 : 0.0;
        row->relerr = v[1];
    }

    if (b->check) {
        int64_t wrong;
        fill_for_check(b, count);
        device_put(b, count);
        run_checked(b, count);
        device_get(b, count);
        wrong = count_wrong(b, count);
        BENCH_CHECK(b, gs_allreduce(b->comm, &wrong, &wrong, 1, GS_DTYPE_I64, GS_OP_SUM));
        row->wrong = wrong;
    }
}

static void *alloc_buf(size_t bytes)
{
    size_t rounded = (bytes + BENCH_ALIGN) / BENCH_ALIGN * BENCH_ALIGN; /* +1 element slack */
    void *p = aligned_alloc(BENCH_ALIGN, rounded);
    if (p == NULL) {
        fprintf(stderr, "gs-bench: cannot allocate %zu bytes\n", rounded);
        exit(BENCH_EXIT_FAIL);
    }
    memset(p, 0, rounded);
    return p;
}

int main(int argc, char **argv)
{
    bench_t b = {
        .dt = &gs_bench_dtypes[0],
        .op = GS_OP_SUM,
        .algo = GS_ALGO_AUTO,
        .algos = {GS_ALGO_AUTO},
        .nalgos = 1,
        .rounds = 1,
        .min_bytes = 8,
        .max_bytes = 32u << 20,
        .factor = 2,
        .warmup = 5,
        .iters = 20,
        .check = true,
        .agg = BENCH_AGG_MAX,
        .codec = GS_CODEC_CONFIG_INIT,
        .format = OUT_TEXT,
    };

    if ((argc > 1) && (strcmp(argv[1], "codec") == 0)) {
        return gs_bench_codec_main(argc - 1, argv + 1);
    }
    if ((argc > 1) && (strcmp(argv[1], "kernels") == 0)) {
        return gs_bench_kernels_main(argc - 1, argv + 1);
    }
    if ((argc > 1) && (strcmp(argv[1], "bucket") == 0)) {
        return gs_bench_bucket_main(argc - 1, argv + 1);
    }
    if ((argc > 1) && (strcmp(argv[1], "ps") == 0)) {
        return gs_bench_ps_main(argc - 1, argv + 1);
    }
    int status_exit = 0;

    gs_bench_parse_args(&b, argc, argv);
    b.show_algo = ((b.nalgos > 1) || (b.algo == GS_ALGO_AUTO)) && !b.use_codec &&
                  (b.coll->kind != COLL_SENDRECV);

    gs_config_t cfg;
    BENCH_CHECK(NULL, gs_config_init(&cfg));
    cfg.transport = b.transport; /* NULL: GS_TRANSPORT or the default */
    if (b.tls_compare) {
        /* Both links over TCP sockets (TLS turns same-host shared memory off):
         * the difference between the rows is TLS alone. */
        cfg.shm = 0;
        cfg.tls = 0;
    }
    BENCH_CHECK(NULL, gs_comm_init_env(&b.comms[0], &cfg));
    b.ncomms = 1;
    if (b.tls_compare) {
        cfg.tls = 1; /* certificate, key and CA from GS_TLS_CERT, GS_TLS_KEY, GS_TLS_CA */
        BENCH_CHECK(NULL, gs_comm_init_env(&b.comms[1], &cfg));
        b.ncomms = 2;
    }
    b.comm = b.comms[0];
    BENCH_CHECK(&b, gs_comm_rank(b.comm, &b.rank));
    BENCH_CHECK(&b, gs_comm_size(b.comm, &b.nranks));
    if (b.coll->rooted && b.root >= b.nranks) {
        fprintf(stderr, "gs-bench: --root %d is not a rank (nranks %d)\n", b.root, b.nranks);
        return BENCH_EXIT_USAGE;
    }
    if (b.coll->kind == COLL_SENDRECV && b.nranks < 2) {
        fprintf(stderr, "gs-bench: sendrecv needs at least 2 ranks\n");
        return BENCH_EXIT_USAGE;
    }
    if (b.device) {
        const int rc = gs_bench_cuda_open(&b.gpu);
        if (rc != 0) {
            (void)gs_comm_destroy(b.comm);
            return rc;
        }
    }

    b.out = stdout;
    if (b.rank == 0 && b.out_path != NULL) {
        b.out = fopen(b.out_path, "w");
        if (b.out == NULL) {
            fprintf(stderr, "gs-bench: cannot open %s: %s\n", b.out_path, strerror(errno));
            return BENCH_EXIT_FAIL;
        }
    }
    size_t max_count = count_for(&b, b.max_bytes);
    size_t buf_bytes = bytes_for(&b, max_count > 0 ? max_count : 1) + b.dt->size;
    b.sendbuf = alloc_buf(buf_bytes);
    b.recvbuf = alloc_buf(buf_bytes);
    b.times = calloc((size_t)b.iters, sizeof(double));
    if (b.use_codec && b.inplace) {
        b.codec_input = alloc_buf(buf_bytes);
    }
    if (b.device) {
        /* Rounded up as alloc_buf does: the probe's f32 fits in any buffer. */
        const size_t dev_bytes = (buf_bytes + BENCH_ALIGN) / BENCH_ALIGN * BENCH_ALIGN;

        b.dsend = gs_bench_cuda_alloc(dev_bytes);
        b.drecv = gs_bench_cuda_alloc(dev_bytes);
        b.dcodec_input = (b.codec_input != NULL) ? gs_bench_cuda_alloc(dev_bytes) : NULL;
        b.comm_nccl = device_probe(&b);
    }
    if (b.times == NULL) {
        fprintf(stderr, "gs-bench: out of memory\n");
        return BENCH_EXIT_FAIL;
    }
    BENCH_CHECK(&b, gs_bench_floor_setup(b.comm, b.rank, b.nranks, &b.floor));
    if (b.rank == 0) {
        print_header(&b);
    }

    double busbw_sum = 0.0;
    int nrows = 0;
    int64_t wrong_total = 0;
    size_t bytes = b.min_bytes;
    size_t worst_bytes = 0;
    double worst_ratio = 0.0;
    row_t *hist = calloc((size_t)b.rounds * BENCH_MAX_ALGOS * 2, sizeof(row_t));
    double tls_ratios[64]; /* --tls-compare: tls/tcp time per size (and algorithm) */
    int ntls = 0;
    if (hist == NULL) {
        fprintf(stderr, "gs-bench: out of memory\n");
        return BENCH_EXIT_FAIL;
    }
    /* The progress line (rank 0, a terminal only): a size's work is its
     * bytes plus a fixed cost, times the runs it takes. */
    gs_progress_t progress;
    double work_total = 0.0;
    double work_done = 0.0;
    for (size_t s = b.min_bytes;;) { /* the sizes of the loop below */
        work_total += (double)s + 65536.0;
        if (b.coll->kind == COLL_BARRIER || s >= b.max_bytes ||
            (s > 0 && s > b.max_bytes / b.factor)) {
            break;
        }
        s = s > 0 ? s * b.factor : 1;
    }
    gs_progress_start(&progress, b.coll->name, work_total, b.rank == 0);
    for (;;) {
        row_t rows[BENCH_MAX_ALGOS * 2]; /* [link * nalgos + algo] */
        size_t count = b.coll->kind == COLL_BARRIER ? 0 : count_for(&b, bytes);
        /*
         * Timed runs read the check pattern; in-place reductions read zeros
         * instead (a fixed point of every op), so that repeating them can
         * neither overflow integers nor drift floats to infinity.
         */
        fill_for_check(&b, count);
        if (b.inplace && b.coll->reduces) {
            memset(b.sendbuf, 0, buf_bytes);
            memset(b.recvbuf, 0, buf_bytes);
        }
        if (b.use_codec) { /* normal data: the codecs' error depends on the values */
            gs_bench_codec_fill(b.inplace ? b.codec_input : (float *)b.sendbuf,
                                codec_in_elems(&b, count), b.rank);
        }
        device_put(&b, count);
        if (b.dcodec_input != NULL) {
            gs_bench_cuda_put(b.dcodec_input, b.codec_input,
                              codec_in_elems(&b, count) * sizeof(float));
        }
        /* Rounds outside, algorithms inside, each round starting one later
         * (A B C, B C A, C A B, ...): a noisy moment of the machine hits every
         * algorithm alike, and none is always the first after a size change
         * (measured: the first one ran up to 1.5x slower). */
        {
            char where[48];

            snprintf(where, sizeof(where), "size %zu B", bytes);
            gs_progress_show(&progress, work_done, where);
        }
        /* With --tls-compare the links take turns the same way. */
        for (int r = 0; r < b.rounds; r++) {
            for (int jl = 0; jl < b.ncomms; jl++) {
                b.link = (jl + r) % b.ncomms;
                b.comm = b.comms[b.link];
                for (int j = 0; j < b.nalgos; j++) {
                    const int i = (j + r) % b.nalgos;
                    b.algo = b.algos[i];
                    bench_size(&b, count, &hist[(b.link * b.nalgos + i) * b.rounds + r]);
                }
            }
        }
        work_done += (double)bytes + 65536.0;
        gs_progress_clear(&progress);
        for (b.link = 0; b.link < b.ncomms; b.link++) {
            row_t *lrows = &rows[b.link * b.nalgos];

            b.comm = b.comms[b.link];
            for (int i = 0; i < b.nalgos; i++) {
                row_median(&hist[(b.link * b.nalgos + i) * b.rounds], b.rounds, &lrows[i]);
                b.algo = b.algos[i];
                if (b.rank == 0) {
                    print_row(&b, &lrows[i], nrows == 0);
                }
                busbw_sum += lrows[i].busbw;
                nrows++;
                if (lrows[i].wrong > 0) {
                    wrong_total += lrows[i].wrong;
                }
            }
            if (b.rank == 0) {
                double ratio = print_auto_ratio(&b, lrows);
                if (ratio > worst_ratio) {
                    worst_ratio = ratio;
                    worst_bytes = lrows[0].bytes;
                }
            }
        }
        b.link = 0;
        b.comm = b.comms[0];
        for (int i = 0; (b.ncomms == 2) && (i < b.nalgos); i++) {
            const double ratio =
                (rows[i].time_us > 0.0) ? rows[b.nalgos + i].time_us / rows[i].time_us : 0.0;

            if (ntls < (int)BENCH_COUNTOF(tls_ratios)) {
                tls_ratios[ntls++] = ratio;
            }
            if (b.rank == 0) {
                fprintf((b.format == OUT_TEXT) ? b.out : stderr,
                        "#  %zu bytes%s%s: tls / tcp time = %.2f\n", rows[i].bytes,
                        (b.nalgos > 1) ? ", " : "", (b.nalgos > 1) ? algo_name(b.algos[i]) : "",
                        ratio);
            }
        }
        if (b.coll->kind == COLL_BARRIER || bytes >= b.max_bytes ||
            (bytes > 0 && bytes > b.max_bytes / b.factor)) {
            break;
        }
        bytes = bytes > 0 ? bytes * b.factor : 1;
    }
    gs_progress_end(&progress);

    int64_t *stats = NULL;
    if (b.stats) {
        BENCH_CHECK(&b, gs_bench_stats_gather(b.comm, b.rank, b.nranks, &stats));
    }
    if (b.rank == 0) {
        if (b.format == OUT_JSON) {
            fprintf(b.out, "\n ], \"avg_busbw_gbps\": %.4f, \"wrong_total\": %" PRId64,
                    busbw_sum / nrows, b.check ? wrong_total : (int64_t)-1);
            if (stats != NULL) {
                gs_bench_stats_json(stats, b.nranks, b.out);
            }
            fprintf(b.out, "}\n");
        } else if (b.format == OUT_TEXT) {
            fprintf(b.out, "# Out of bounds values : %" PRId64 " %s\n", wrong_total,
                    !b.check      ? "(not checked)"
                    : wrong_total ? "FAILED"
                                  : "OK");
            fprintf(b.out, "# Avg bus bandwidth    : %.4f\n", busbw_sum / nrows);
            if (worst_ratio > 0.0) {
                fprintf(b.out, "# Worst auto/best      : %.2f at %zu bytes\n", worst_ratio,
                        worst_bytes);
            }
            if (ntls > 0) {
                qsort(tls_ratios, (size_t)ntls, sizeof(double), cmp_double);
                fprintf(b.out,
                        "# TLS / plain TCP time : median %.2f, range %.2f .. %.2f over "
                        "%d sizes\n",
                        tls_ratios[ntls / 2], tls_ratios[0], tls_ratios[ntls - 1], ntls);
            }
            if (b.device) {
                static const char *const paths[] = {"none", "nccl", "staged", "nccl and staged"};
                fprintf(b.out, "# Device path          : %s (GS_CUDA_PATH %s, rank 0)\n",
                        paths[b.paths_seen & 3u], cuda_path_env());
            }
            fprintf(b.out, "#\n");
        }
        if (stats != NULL && b.format != OUT_JSON) {
            /* CSV stays machine-readable: the table goes to stderr. */
            gs_bench_stats_text(stats, b.nranks, b.format == OUT_TEXT ? b.out : stderr);
            gs_bench_stats_rails(b.comm, b.rank, b.nranks, b.format == OUT_TEXT ? b.out : stderr);
        }
        fflush(b.out);
        if (b.out != stdout) {
            fclose(b.out);
        }
    }
    if (wrong_total > 0) {
        if (b.rank == 0) {
            fprintf(stderr, "gs-bench: %" PRId64 " wrong elements\n", wrong_total);
        }
        status_exit = BENCH_EXIT_FAIL;
    }
    free(stats);
    free(hist);
    free(b.times);
    free(b.codec_input);
    BENCH_CHECK(&b, gs_ef_destroy(b.ef));
    free(b.sendbuf);
    free(b.recvbuf);
    if (b.device) {
        gs_bench_cuda_free(b.dsend);
        gs_bench_cuda_free(b.drecv);
        gs_bench_cuda_free(b.dcodec_input);
    }
    for (int l = b.ncomms - 1; l >= 0; l--) {
        BENCH_CHECK(&b, gs_comm_destroy(b.comms[l]));
    }
    return status_exit;
}
