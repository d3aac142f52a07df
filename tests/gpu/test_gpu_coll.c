/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every collective with device buffers, through the public API only; one
 * process per rank, launched by gsrun (tests/gpu/CMakeLists.txt), every
 * rank on GPU (local rank % device count), so on a one-GPU machine all
 * ranks share it. Usage: gsrun -n N test_gpu_coll --expect nccl|staged|refused
 *
 * --expect nccl or staged: for allreduce (also in place), broadcast,
 * reduce, allgather, reduce_scatter, alltoall and a ring of
 * gs_isend_ex/gs_irecv_ex, over dtypes, ops and counts 0, 1, 7, 1031 and
 * 100003 (plus 3 Mi + 5 elements of f32 all-reduce, several staging
 * slices), each call is made on device buffers in five ways: the plain
 * blocking call (legacy default stream), the _ex call on a stream of its
 * own, its non-blocking twin then gs_wait, and both with
 * GS_COLL_F_STREAM_ORDERED. The input reaches the device by a
 * cudaMemcpyAsync queued on the call's stream just before the call, and
 * the result leaves by one queued just after it, so the call must order
 * itself on the stream. The result must equal, bit for bit, the same
 * collective on host buffers and the serial reference (integer-exact
 * patterns as gs-bench --check's; avg within 2 ulp of the reference,
 * since NCCL may average in another order), and the element after the
 * output must keep its poison. The path is checked (gs_comm_stats
 * last_algo of a plain all-reduce: GS_ALGO_NATIVE is NCCL), and where it
 * is the staged path the stream-ordered calls must fail with
 * GS_ERR_UNSUPPORTED (gradsync.h; with count 0 they may succeed, a note);
 * point-to-point on the staged path may run or fail with
 * GS_ERR_UNSUPPORTED (a note). Buffers of
 * mixed kinds (one host, one device) must fail with GS_ERR_INVALID_ARG and
 * leave the communicator usable. The compressed all-reduce (fp16, int8,
 * topk) on device buffers must give the host one's bits, as the design
 * promises (docs/gpu.md, "Bit-exactness"); so must four steps of error
 * feedback (int8, sign, qsgd, dense topk on the codec kernels; sparse topk
 * and randk on the CPU codecs), sum and avg, whose one gs_ef_t moves
 * between device and host buffers; so must the compressed reduce-scatter
 * (three steps of error feedback) and all-gather (fp16, int8, sign, topk
 * for the reduce-scatter). A difference names the first element
 * that differs. After every library call the CUDA runtime's last-error
 * slot must be clean (GT_LIB, gpu_test_util.h).
 *
 * --expect refused (GS_CUDA_PATH=nccl with ranks sharing a GPU): a device
 * all-reduce must fail with GS_ERR_INVALID_USAGE on every rank, twice,
 * without hanging (gsrun's --timeout bounds it), and a host all-reduce
 * must still work afterwards.
 *
 * Exit status: 0, 1 on any failure (every rank), 77 when there is no CUDA
 * device. Every rank makes the same calls in the same order whatever the
 * results, so one rank's failure cannot hang the others.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu_test_util.h"
#include "gradsync/compress.h"
#include "gradsync/gradsync.h"
#include "tc_coll_data.h"

#define BIG_COUNT ((size_t)3 * 1024 * 1024 + 5)
#define MAX_BLOCKED 100003u /* largest per-rank count of the blocked collectives */
#define MAX_RANKS 64
#define POISON 0xA5
#define TAG 0x677075u

typedef enum coll {
    C_ALLREDUCE,
    C_ALLREDUCE_INPLACE,
    C_BROADCAST,
    C_REDUCE,
    C_ALLGATHER,
    C_REDUCE_SCATTER,
    C_ALLTOALL,
    C_SENDRECV,
    C_COUNT
} coll_t;

static const char *const coll_names[] = {
    "allreduce", "allreduce(in place)", "broadcast", "reduce",
    "allgather", "reduce_scatter",      "alltoall",  "sendrecv"};

typedef enum variant {
    V_BLOCKING,   /* the plain call */
    V_STREAM,     /* _ex on our stream, blocking */
    V_NB,         /* gs_i*_ex on our stream, then gs_wait */
    V_ORDERED,    /* _ex with GS_COLL_F_STREAM_ORDERED */
    V_NB_ORDERED, /* gs_i*_ex with GS_COLL_F_STREAM_ORDERED, then gs_wait */
    V_COUNT
} variant_t;

static const char *const variant_names[] = {"blocking", "_ex on a stream", "non-blocking",
                                            "stream-ordered", "non-blocking stream-ordered"};

typedef struct dtype_info {
    gs_dtype_t dt;
    size_t size;
    const char *name;
} dtype_info_t;

static const dtype_info_t dtypes[] = {
    {GS_DTYPE_F32, 4, "f32"},   {GS_DTYPE_F64, 8, "f64"}, {GS_DTYPE_F16, 2, "f16"},
    {GS_DTYPE_BF16, 2, "bf16"}, {GS_DTYPE_I8, 1, "i8"},   {GS_DTYPE_U8, 1, "u8"},
    {GS_DTYPE_I32, 4, "i32"},   {GS_DTYPE_I64, 8, "i64"},
};

static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};

static const size_t counts[] = {0, 1, 7, 1031, 100003};

#define NELEMS(_a) (sizeof(_a) / sizeof((_a)[0]))

typedef struct ctx {
    gs_comm_t comm;
    int rank;
    int n;
    bool nccl;            /* the NCCL path is expected */
    cudaStream_t stream;  /* the _ex calls' stream */
    unsigned char *hs;    /* host: this rank's input */
    unsigned char *hr;    /* host: the device result, copied back */
    unsigned char *href;  /* host: the serial reference */
    unsigned char *hhost; /* host: the same collective on host buffers */
    unsigned char *hin;   /* host: the input as the host-path call takes it (then its output) */
    unsigned char *ds;    /* device send buffer */
    unsigned char *dr;    /* device recv buffer */
    size_t cap;           /* bytes of every buffer */
    long notes;           /* point-to-point that was unsupported on the staged path */
} ctx_t;

/* ---------------------------------------------------------------------- */
/* Elements and patterns: tests/common/tc_coll_data.h                     */
/* ---------------------------------------------------------------------- */

/* The collective as tests/common/tc_coll_data.h names it (the ring of sends:
 * GS_COLL_TYPE_SEND). */
static gs_coll_type_t coll_type(coll_t coll)
{
    static const gs_coll_type_t types[C_COUNT] = {
        [C_ALLREDUCE] = GS_COLL_TYPE_ALLREDUCE, [C_ALLREDUCE_INPLACE] = GS_COLL_TYPE_ALLREDUCE,
        [C_BROADCAST] = GS_COLL_TYPE_BROADCAST, [C_REDUCE] = GS_COLL_TYPE_REDUCE,
        [C_ALLGATHER] = GS_COLL_TYPE_ALLGATHER, [C_REDUCE_SCATTER] = GS_COLL_TYPE_REDUCE_SCATTER,
        [C_ALLTOALL] = GS_COLL_TYPE_ALLTOALL,   [C_SENDRECV] = GS_COLL_TYPE_SEND,
    };

    return types[coll];
}

/* ---------------------------------------------------------------------- */
/* One collective                                                         */
/* ---------------------------------------------------------------------- */

typedef struct call {
    coll_t coll;
    const dtype_info_t *dt;
    gs_op_t op;
    size_t count; /* the count argument (per rank for the blocked ones) */
    int root;
    uint64_t salt;
} call_t;

/* Elements of the input and of the output of @p c on one rank. */
static size_t in_elems(const ctx_t *x, const call_t *c)
{
    return tc_coll_in_elems(coll_type(c->coll), c->count, x->n);
}

static size_t out_elems(const ctx_t *x, const call_t *c)
{
    return tc_coll_out_elems(coll_type(c->coll), c->count, x->n);
}

/* Whether the call reads its input from the receive buffer. */
static bool in_place(const call_t *c)
{
    return (c->coll == C_ALLREDUCE_INPLACE) || (c->coll == C_BROADCAST);
}

/* This rank's input into @p buf (the broadcast root's pattern on the root,
 * poison elsewhere), and the serial reference of its output into x->href. */
static void make_case(ctx_t *x, const call_t *c, unsigned char *buf)
{
    const gs_dtype_t dt = c->dt->dt;
    const size_t es = c->dt->size, nin = in_elems(x, c), nout = out_elems(x, c);

    memset(buf, POISON, (nin + 1) * es);
    memset(x->href, POISON, (nout + 1) * es);
    if ((c->coll != C_BROADCAST) || (x->rank == c->root)) {
        tc_exact_fill(buf, nin, dt, c->op, x->n, x->rank, c->salt);
    }
    for (size_t i = 0; i < nout; i++) {
        tc_set(x->href, i, dt,
               tc_exact_want(coll_type(c->coll), dt, c->op, x->n, x->rank, c->root, c->count, i,
                             c->salt));
    }
}

/* Issue @p c on (send, recv) in the given variant; returns the status of the
 * call (and of gs_wait for the non-blocking ones). */
static gs_status_t issue(ctx_t *x, const call_t *c, variant_t v, void *send, void *recv)
{
    gs_coll_opts_t o = GS_COLL_OPTS_INIT;
    gs_allreduce_opts_t ao = GS_ALLREDUCE_OPTS_INIT;
    gs_request_t req = GS_REQUEST_NULL, reqs[2] = {GS_REQUEST_NULL, GS_REQUEST_NULL};
    const gs_dtype_t dt = c->dt->dt;
    const bool nb = (v == V_NB) || (v == V_NB_ORDERED);
    gs_status_t st;

    o.stream = ao.stream = (v == V_BLOCKING) ? NULL : (void *)x->stream;
    o.flags = ao.flags = ((v == V_ORDERED) || (v == V_NB_ORDERED)) ? GS_COLL_F_STREAM_ORDERED : 0;
    if (in_place(c)) {
        send = recv;
    }
    switch (c->coll) {
    case C_ALLREDUCE:
    case C_ALLREDUCE_INPLACE:
        if (v == V_BLOCKING) {
            return GT_LIB(gs_allreduce(x->comm, send, recv, c->count, dt, c->op));
        }
        st = nb ? GT_LIB(gs_iallreduce_ex(x->comm, send, recv, c->count, dt, c->op, &ao, &req))
                : GT_LIB(gs_allreduce_ex(x->comm, send, recv, c->count, dt, c->op, &ao));
        break;
    case C_BROADCAST:
        if (v == V_BLOCKING) {
            return GT_LIB(gs_broadcast(x->comm, recv, c->count, dt, c->root));
        }
        st = nb ? GT_LIB(gs_ibroadcast_ex(x->comm, recv, c->count, dt, c->root, &o, &req))
                : GT_LIB(gs_broadcast_ex(x->comm, recv, c->count, dt, c->root, &o));
        break;
    case C_REDUCE:
        if (v == V_BLOCKING) {
            return GT_LIB(gs_reduce(x->comm, send, recv, c->count, dt, c->op, c->root));
        }
        st = nb ? GT_LIB(gs_ireduce_ex(x->comm, send, recv, c->count, dt, c->op, c->root, &o, &req))
                : GT_LIB(gs_reduce_ex(x->comm, send, recv, c->count, dt, c->op, c->root, &o));
        break;
    case C_ALLGATHER:
        if (v == V_BLOCKING) {
            return GT_LIB(gs_allgather(x->comm, send, recv, c->count, dt));
        }
        st = nb ? GT_LIB(gs_iallgather_ex(x->comm, send, recv, c->count, dt, &o, &req))
                : GT_LIB(gs_allgather_ex(x->comm, send, recv, c->count, dt, &o));
        break;
    case C_REDUCE_SCATTER:
        if (v == V_BLOCKING) {
            return GT_LIB(gs_reduce_scatter(x->comm, send, recv, c->count, dt, c->op));
        }
        st = nb ? GT_LIB(gs_ireduce_scatter_ex(x->comm, send, recv, c->count, dt, c->op, &o, &req))
                : GT_LIB(gs_reduce_scatter_ex(x->comm, send, recv, c->count, dt, c->op, &o));
        break;
    case C_ALLTOALL:
        if (v == V_BLOCKING) {
            return GT_LIB(gs_alltoall(x->comm, send, recv, c->count, dt));
        }
        st = nb ? GT_LIB(gs_ialltoall_ex(x->comm, send, recv, c->count, dt, &o, &req))
                : GT_LIB(gs_alltoall_ex(x->comm, send, recv, c->count, dt, &o));
        break;
    default: { /* a ring: receive from rank - 1, send to rank + 1, both non-blocking */
        const int next = (x->rank + 1) % x->n, prev = (x->rank + x->n - 1) % x->n;
        gs_status_t st2;

        st = (v == V_BLOCKING)
                 ? GT_LIB(gs_irecv(x->comm, recv, c->count, dt, prev, TAG, &reqs[0]))
                 : GT_LIB(gs_irecv_ex(x->comm, recv, c->count, dt, prev, TAG, &o, &reqs[0]));
        st2 = (v == V_BLOCKING)
                  ? GT_LIB(gs_isend(x->comm, send, c->count, dt, next, TAG, &reqs[1]))
                  : GT_LIB(gs_isend_ex(x->comm, send, c->count, dt, next, TAG, &o, &reqs[1]));
        /* Wait for both whatever happened, so that nothing stays in flight. */
        {
            const gs_status_t w = GT_LIB(gs_waitall(2, reqs));
            return (st != GS_OK) ? st : (st2 != GS_OK) ? st2 : w;
        }
    }
    }
    if (nb && (st == GS_OK)) {
        st = GT_LIB(gs_wait(&req));
    }
    return st;
}

/* Compare the output in x->hr with the host path's and the reference. */
static void compare(ctx_t *x, const call_t *c, const char *what)
{
    const gs_dtype_t dt = c->dt->dt;
    const size_t nout = out_elems(x, c), es = c->dt->size;
    const bool check_out = (c->coll != C_REDUCE) || (x->rank == c->root);
    double tol;

    switch (dt) {
    case GS_DTYPE_F16:
        tol = ldexp(1.0, -9);
        break;
    case GS_DTYPE_BF16:
        tol = ldexp(1.0, -6);
        break;
    case GS_DTYPE_F64:
        tol = ldexp(1.0, -51);
        break;
    default:
        tol = ldexp(1.0, -22);
        break;
    }
    if (!check_out) {
        return;
    }
    for (size_t i = 0; i < nout; i++) {
        const double got = tc_get(x->hr, i, dt), want = tc_get(x->href, i, dt);
        bool ok;

        if (c->op == GS_OP_AVG) {
            ok = tc_close(got, want, tol);
        } else {
            ok = (memcmp(x->hr + i * es, x->hhost + i * es, es) == 0) && (got == want);
        }
        if (!ok) {
            gt_check(false, "rank %d: %s: element %zu of %zu is %.9g, want %.9g (host path %.9g)",
                     x->rank, what, i, nout, got, want, tc_get(x->hhost, i, dt));
            return; /* one line per call is enough */
        }
    }
    gt_check(true, "%s", what);
    /* The element after the output must still be poisoned. */
    for (size_t b = 0; b < es; b++) {
        if (!gt_check(x->hr[nout * es + b] == POISON,
                      "rank %d: %s: the element after the output was written", x->rank, what)) {
            return;
        }
    }
}

/* The collective on host buffers (the path the device one is checked against). */
static void run_host(ctx_t *x, const call_t *c, const char *what)
{
    const size_t es = c->dt->size;
    gs_status_t st;

    make_case(x, c, x->hin);
    memset(x->hhost, POISON, (out_elems(x, c) + 1) * es);
    if (in_place(c)) {
        memcpy(x->hhost, x->hin, (in_elems(x, c) + 1) * es);
    }
    st = issue(x, c, V_BLOCKING, x->hin, x->hhost);
    gt_check(st == GS_OK, "rank %d: %s on host buffers: %s: %s", x->rank, what, gs_status_name(st),
             gs_last_error());
}

/* The collective on device buffers, in one variant, checked. */
static void run_device(ctx_t *x, const call_t *c, variant_t v, const char *what)
{
    const size_t es = c->dt->size, nin = in_elems(x, c), nout = out_elems(x, c);
    const cudaStream_t s = (v == V_BLOCKING) ? (cudaStream_t)0 : x->stream;
    const bool ordered = (v == V_ORDERED) || (v == V_NB_ORDERED);
    unsigned char *din = in_place(c) ? x->dr : x->ds;
    gs_status_t st;

    make_case(x, c, x->hs);
    GT_CUDA(cudaMemset(x->ds, POISON, x->cap));
    GT_CUDA(cudaMemset(x->dr, POISON, x->cap));
    GT_CUDA(cudaDeviceSynchronize());
    memset(x->hr, 0, (nout + 1) * es);
    /* Queued on the call's stream: the call must wait for it. */
    GT_CUDA(cudaMemcpyAsync(din, x->hs, (nin + 1) * es, cudaMemcpyHostToDevice, s));
    st = issue(x, c, v, x->ds, x->dr);
    GT_CUDA(cudaMemcpyAsync(x->hr, x->dr, (nout + 1) * es, cudaMemcpyDeviceToHost, s));
    GT_CUDA(cudaStreamSynchronize(s));
    if (c->coll == C_SENDRECV && !x->nccl && (st == GS_ERR_UNSUPPORTED)) {
        x->notes++;
        return;
    }
    if (ordered && !x->nccl && (c->count == 0) && (st == GS_OK)) {
        x->notes++; /* nothing to order: an empty call may succeed */
        return;
    }
    if (ordered && !x->nccl) {
        gt_check(st == GS_ERR_UNSUPPORTED,
                 "rank %d: %s: stream-ordered on the staged path returned %s, want "
                 "GS_ERR_UNSUPPORTED (%s)",
                 x->rank, what, gs_status_name(st), gs_last_error());
        return;
    }
    if (!gt_check(st == GS_OK, "rank %d: %s: %s: %s", x->rank, what, gs_status_name(st),
                  gs_last_error())) {
        return;
    }
    compare(x, c, what);
}

static void run_case(ctx_t *x, call_t *c)
{
    char what[160];

    c->salt = (c->salt + 1) * 0x100000001b3ull;
    snprintf(what, sizeof(what), "%s %s %s count %zu", coll_names[c->coll], c->dt->name,
             op_names[c->op], c->count);
    run_host(x, c, what);
    for (int v = 0; v < V_COUNT; v++) {
        char vwhat[224];

        snprintf(vwhat, sizeof(vwhat), "%s, %s", what, variant_names[v]);
        run_device(x, c, (variant_t)v, vwhat);
    }
}

/* ---------------------------------------------------------------------- */
/* The parts                                                              */
/* ---------------------------------------------------------------------- */

static void part_path(ctx_t *x)
{
    gs_comm_stats_t s = GS_COMM_STATS_INIT;
    gs_status_t st;

    GT_CUDA(cudaMemset(x->ds, 0, 4096));
    GT_CUDA(cudaDeviceSynchronize());
    st = GT_LIB(gs_allreduce(x->comm, x->ds, x->dr, 1000, GS_DTYPE_F32, GS_OP_SUM));
    if (!gt_check(st == GS_OK, "rank %d: first device all-reduce: %s: %s", x->rank,
                  gs_status_name(st), gs_last_error())) {
        return;
    }
    st = GT_LIB(gs_comm_stats(x->comm, &s));
    gt_check(st == GS_OK, "rank %d: gs_comm_stats: %s", x->rank, gs_status_name(st));
    gt_check((s.coll[GS_COLL_TYPE_ALLREDUCE].last_algo == GS_ALGO_NATIVE) == x->nccl,
             "rank %d: a plain device all-reduce ran algorithm %d; want the %s path", x->rank,
             (int)s.coll[GS_COLL_TYPE_ALLREDUCE].last_algo, x->nccl ? "NCCL (native)" : "staged");
    if (x->rank == 0) {
        printf("path: a plain device all-reduce ran algorithm %d (%s)\n",
               (int)s.coll[GS_COLL_TYPE_ALLREDUCE].last_algo,
               (s.coll[GS_COLL_TYPE_ALLREDUCE].last_algo == GS_ALGO_NATIVE) ? "NCCL" : "staged");
    }
}

/* One host and one device buffer in a call: GS_ERR_INVALID_ARG, nothing run. */
static void part_mixed(ctx_t *x)
{
    const size_t cnt = 64;
    gs_status_t st[5];

    st[0] = GT_LIB(gs_allreduce(x->comm, x->hs, x->dr, cnt, GS_DTYPE_F32, GS_OP_SUM));
    st[1] = GT_LIB(gs_allreduce(x->comm, x->ds, x->hr, cnt, GS_DTYPE_F32, GS_OP_SUM));
    st[2] = GT_LIB(gs_reduce_scatter(x->comm, x->ds, x->hr, cnt, GS_DTYPE_F32, GS_OP_SUM));
    st[3] = GT_LIB(gs_allgather(x->comm, x->hs, x->dr, cnt, GS_DTYPE_F32));
    st[4] = GT_LIB(gs_alltoall(x->comm, x->ds, x->hr, cnt, GS_DTYPE_F32));
    for (int i = 0; i < 5; i++) {
        gt_check(st[i] == GS_ERR_INVALID_ARG,
                 "rank %d: mixed host/device call %d returned %s, want GS_ERR_INVALID_ARG (%s)",
                 x->rank, i, gs_status_name(st[i]), gs_last_error());
    }
    if (x->rank == 0) {
        printf("mixed host/device buffers: %s (\"%s\")\n", gs_status_name(st[4]), gs_last_error());
    }
}

static void part_collectives(ctx_t *x)
{
    static const int mover_dt[] = {0, 2, 7, 5};   /* f32 f16 i64 u8 */
    static const int reducer_dt[] = {0, 3, 6, 5}; /* f32 bf16 i32 u8 */
    static const gs_op_t reducer_ops[] = {GS_OP_SUM, GS_OP_MAX};
    call_t c = {.root = x->n - 1};

    for (size_t t = 0; t < NELEMS(dtypes); t++) {
        for (int op = 0; op < 5; op++) {
            if ((op == GS_OP_AVG) && (t >= 4)) {
                continue; /* avg needs a float dtype */
            }
            for (size_t k = 0; k < NELEMS(counts); k++) {
                c = (call_t){.coll = C_ALLREDUCE,
                             .dt = &dtypes[t],
                             .op = (gs_op_t)op,
                             .count = counts[k],
                             .root = 0,
                             .salt = c.salt};
                run_case(x, &c);
            }
        }
    }
    c = (call_t){
        .coll = C_ALLREDUCE, .dt = &dtypes[0], .op = GS_OP_SUM, .count = BIG_COUNT, .salt = c.salt};
    run_case(x, &c);
    for (size_t t = 0; t < 4; t++) {
        for (size_t k = 0; k < NELEMS(counts); k++) {
            const dtype_info_t *rd = &dtypes[reducer_dt[t]], *md = &dtypes[mover_dt[t]];

            for (size_t o = 0; o < NELEMS(reducer_ops); o++) {
                c = (call_t){.coll = C_ALLREDUCE_INPLACE,
                             .dt = rd,
                             .op = reducer_ops[o],
                             .count = counts[k],
                             .salt = c.salt};
                run_case(x, &c);
                c.coll = C_REDUCE;
                c.root = x->n - 1;
                run_case(x, &c);
                c.coll = C_REDUCE_SCATTER;
                run_case(x, &c);
            }
            c = (call_t){.coll = C_BROADCAST,
                         .dt = md,
                         .op = GS_OP_SUM,
                         .count = counts[k],
                         .root = x->n / 2,
                         .salt = c.salt};
            run_case(x, &c);
            c.coll = C_ALLGATHER;
            run_case(x, &c);
            c.coll = C_ALLTOALL;
            run_case(x, &c);
            if (x->n > 1) {
                c.coll = C_SENDRECV;
                run_case(x, &c);
            }
        }
    }
}

/* Rank r's input of step @p step of a compressed all-reduce of n elements
 * (uniform in [-0.5, 0.5), from (r, n, step) alone, so every rank can make
 * every input). */
static void comp_input(int r, size_t n, unsigned step, float *out)
{
    uint64_t seed = 0x1234u + (uint64_t)r * 7919u + n + (uint64_t)step * 0x9E3779B97F4A7C15ull;

    for (size_t i = 0; i < n; i++) {
        out[i] = (float)((double)(gt_rand(&seed) >> 11) / 9007199254740992.0 - 0.5);
    }
}

/* ||got - exact|| / ||exact||, exact the f64 sum (AVG: mean) of every
 * rank's input of @p step. Only for the failure messages: it tells a codec
 * that did not run (error near 0) from one that ran differently. */
static double comp_error(const ctx_t *x, const float *got, size_t n, unsigned step, gs_op_t op,
                         float *scratch)
{
    double ee = 0.0, xx = 0.0;
    double *exact = calloc(n, sizeof(double));

    if (exact == NULL) {
        return INFINITY;
    }
    for (int r = 0; r < x->n; r++) {
        comp_input(r, n, step, scratch);
        for (size_t i = 0; i < n; i++) {
            exact[i] += scratch[i];
        }
    }
    for (size_t i = 0; i < n; i++) {
        const double want = (op == GS_OP_AVG) ? exact[i] / x->n : exact[i];

        ee += (got[i] - want) * (got[i] - want);
        xx += want * want;
    }
    free(exact);
    return sqrt(ee / ((xx > 0.0) ? xx : 1.0));
}

/*
 * The device result @p dev of a compressed all-reduce against the host
 * path's @p host, bit for bit: the codec kernels share the CPU codecs'
 * arithmetic, sum in the same rank order, average by the same 1/n and draw
 * the same seeds (algo_comp_dev_cuda.c, docs/gpu.md "Bit-exactness"), and
 * the schemes that stay on the CPU codecs run the host code itself. On a
 * difference, one failure names the first element that differs (and the
 * rank whose chunk of the two-phase scheme holds it), how many differ,
 * and both results' error against the exact sum.
 */
static void comp_same_bits(const ctx_t *x, const float *dev, const float *host, size_t n,
                           unsigned step, gs_op_t op, const char *what)
{
    size_t first = n, ndiff = 0, off = 0, len = 0;
    uint32_t db = 0, hb = 0;
    int owner = 0;

    for (size_t i = 0; i < n; i++) {
        if (memcmp(&dev[i], &host[i], sizeof(float)) != 0) {
            first = (ndiff == 0) ? i : first;
            ndiff++;
        }
    }
    if (ndiff == 0) {
        gt_check(true, "%s", what);
        return;
    }
    /* gs__algo_split's cut (src/algo/ctx/ctx.h): chunk c of n elements over x->n ranks. */
    for (owner = 0; owner < x->n; owner++) {
        const size_t base = n / (size_t)x->n, extra = n % (size_t)x->n, c = (size_t)owner;

        off = c * base + ((c < extra) ? c : extra);
        len = base + ((c < extra) ? 1 : 0);
        if ((first >= off) && (first < off + len)) {
            break;
        }
    }
    memcpy(&db, &dev[first], sizeof(db));
    memcpy(&hb, &host[first], sizeof(hb));
    {
        float *scratch = malloc(n * sizeof(float));
        const double ed = (scratch != NULL) ? comp_error(x, dev, n, step, op, scratch) : NAN;
        const double eh = (scratch != NULL) ? comp_error(x, host, n, step, op, scratch) : NAN;

        gt_check(false,
                 "rank %d: %s: the device result must have the host path's bits: element %zu "
                 "of %zu (element %zu of rank %d's chunk) is %.9g (0x%08x) on the device, "
                 "%.9g (0x%08x) on the host; %zu elements differ; error against the exact "
                 "result: device %.3g, host %.3g",
                 x->rank, what, first, n, first - off, owner, (double)dev[first], db,
                 (double)host[first], hb, ndiff, ed, eh);
        free(scratch);
    }
}

static const char *codec_name(gs_codec_kind_t k)
{
    switch (k) {
    case GS_CODEC_FP16:
        return "fp16";
    case GS_CODEC_BF16:
        return "bf16";
    case GS_CODEC_INT8:
        return "int8";
    case GS_CODEC_QSGD:
        return "qsgd";
    case GS_CODEC_SIGN:
        return "sign";
    case GS_CODEC_TOPK:
        return "topk";
    case GS_CODEC_RANDK:
        return "randk";
    default:
        return "?";
    }
}

/*
 * The compressed all-reduce (sum, no error feedback) on device buffers
 * against the same call on host buffers: the same bits (comp_same_bits).
 */
static void part_compressed(ctx_t *x)
{
    static const gs_codec_kind_t kinds[] = {GS_CODEC_FP16, GS_CODEC_INT8, GS_CODEC_TOPK};
    static const size_t ccounts[] = {1031, 100003};

    for (size_t k = 0; k < NELEMS(kinds); k++) {
        for (size_t j = 0; j < NELEMS(ccounts); j++) {
            const size_t n = ccounts[j];
            gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
            gs_allreduce_opts_t o = GS_ALLREDUCE_OPTS_INIT;
            float *in = (float *)x->hs, *host = (float *)x->hhost, *dev = (float *)x->hr;
            char what[128];
            gs_status_t st1, st2;

            snprintf(what, sizeof(what), "compressed all-reduce, codec %s, sum, count %zu",
                     codec_name(kinds[k]), n);
            cc.kind = kinds[k];
            o.codec = &cc;
            comp_input(x->rank, n, 0, in);
            memcpy(host, in, n * sizeof(float));
            st1 = GT_LIB(gs_allreduce_ex(x->comm, host, host, n, GS_DTYPE_F32, GS_OP_SUM, &o));
            GT_CUDA(cudaMemcpy(x->dr, in, n * sizeof(float), cudaMemcpyHostToDevice));
            o.stream = (void *)x->stream;
            st2 = GT_LIB(gs_allreduce_ex(x->comm, x->dr, x->dr, n, GS_DTYPE_F32, GS_OP_SUM, &o));
            GT_CUDA(cudaMemcpy(dev, x->dr, n * sizeof(float), cudaMemcpyDeviceToHost));
            if (gt_check((st1 == GS_OK) && (st2 == GS_OK), "rank %d: %s: host %s, device %s: %s",
                         x->rank, what, gs_status_name(st1), gs_status_name(st2),
                         gs_last_error())) {
                comp_same_bits(x, dev, host, n, 0, GS_OP_SUM, what);
            }
        }
    }
}

/*
 * Compressed reduce-scatter and all-gather on device buffers (the block-wise
 * schemes on the codec kernels, algo_comp_dev_cuda.c) against the same calls
 * on host buffers: the same bits. Reduce-scatter runs three steps with error
 * feedback, one gs_ef_t per side (the device one's residual lives on the
 * GPU), sum and avg; all-gather one call. A difference names the first
 * element that differs.
 */
static void part_compressed_shard(ctx_t *x)
{
    static const gs_codec_kind_t kinds[] = {GS_CODEC_FP16, GS_CODEC_INT8, GS_CODEC_SIGN,
                                            GS_CODEC_TOPK};
    static const gs_op_t ops[] = {GS_OP_SUM, GS_OP_AVG};
    const size_t blk = 1031;
    const size_t total = blk * (size_t)x->n;
    float *in = (float *)x->hs, *host = (float *)x->hhost, *dev = (float *)x->hr;

    if (total * sizeof(float) > x->cap) {
        gt_check(false, "rank %d: part_compressed_shard: %zu elements do not fit the buffers",
                 x->rank, total);
        return;
    }
    for (size_t k = 0; k < NELEMS(kinds); k++) {
        for (size_t o = 0; o < NELEMS(ops); o++) {
            gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
            gs_coll_opts_t ho = GS_COLL_OPTS_INIT, dopt = GS_COLL_OPTS_INIT;
            gs_ef_t efh = GS_EF_NULL, efd = GS_EF_NULL;

            cc.kind = kinds[k];
            cc.ratio = 0.5; /* topk: a block-wise payload of half the elements */
            GT_LIB(gs_ef_create(total, GS_DTYPE_F32, &efh));
            GT_LIB(gs_ef_create(total, GS_DTYPE_F32, &efd));
            ho.codec = &cc;
            ho.ef = efh;
            dopt.codec = &cc;
            dopt.ef = efd;
            dopt.stream = (void *)x->stream;
            for (unsigned step = 0; step < 3; step++) {
                char what[128];
                gs_status_t st1, st2;

                snprintf(what, sizeof(what),
                         "compressed reduce-scatter, codec %s, %s, block %zu, step %u",
                         codec_name(kinds[k]), (ops[o] == GS_OP_AVG) ? "avg" : "sum", blk, step);
                comp_input(x->rank, total, step, in);
                st1 =
                    GT_LIB(gs_reduce_scatter_ex(x->comm, in, host, blk, GS_DTYPE_F32, ops[o], &ho));
                GT_CUDA(cudaMemcpy(x->ds, in, total * sizeof(float), cudaMemcpyHostToDevice));
                st2 = GT_LIB(
                    gs_reduce_scatter_ex(x->comm, x->ds, x->dr, blk, GS_DTYPE_F32, ops[o], &dopt));
                GT_CUDA(cudaMemcpy(dev, x->dr, blk * sizeof(float), cudaMemcpyDeviceToHost));
                if (gt_check((st1 == GS_OK) && (st2 == GS_OK),
                             "rank %d: %s: host %s, device %s: %s", x->rank, what,
                             gs_status_name(st1), gs_status_name(st2), gs_last_error())) {
                    size_t bad = blk;
                    for (size_t i = 0; (i < blk) && (bad == blk); i++) {
                        bad = (memcmp(&dev[i], &host[i], sizeof(float)) != 0) ? i : bad;
                    }
                    gt_check(bad == blk,
                             "rank %d: %s: the device result must have the host path's bits: "
                             "element %zu is %.9g on the device, %.9g on the host",
                             x->rank, what, bad, (bad < blk) ? (double)dev[bad] : 0.0,
                             (bad < blk) ? (double)host[bad] : 0.0);
                }
            }
            gs_ef_destroy(efh);
            gs_ef_destroy(efd);
        }
        if (kinds[k] != GS_CODEC_TOPK) { /* all-gather refuses the sparsifiers */
            gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
            gs_coll_opts_t ho = GS_COLL_OPTS_INIT, dopt = GS_COLL_OPTS_INIT;
            char what[128];
            gs_status_t st1, st2;
            size_t bad = total;

            cc.kind = kinds[k];
            ho.codec = &cc;
            dopt.codec = &cc;
            dopt.stream = (void *)x->stream;
            snprintf(what, sizeof(what), "compressed all-gather, codec %s, block %zu",
                     codec_name(kinds[k]), blk);
            comp_input(x->rank, blk, 7, in);
            st1 = GT_LIB(gs_allgather_ex(x->comm, in, host, blk, GS_DTYPE_F32, &ho));
            GT_CUDA(cudaMemcpy(x->ds, in, blk * sizeof(float), cudaMemcpyHostToDevice));
            st2 = GT_LIB(gs_allgather_ex(x->comm, x->ds, x->dr, blk, GS_DTYPE_F32, &dopt));
            GT_CUDA(cudaMemcpy(dev, x->dr, total * sizeof(float), cudaMemcpyDeviceToHost));
            if (gt_check((st1 == GS_OK) && (st2 == GS_OK), "rank %d: %s: host %s, device %s: %s",
                         x->rank, what, gs_status_name(st1), gs_status_name(st2),
                         gs_last_error())) {
                for (size_t i = 0; (i < total) && (bad == total); i++) {
                    bad = (memcmp(&dev[i], &host[i], sizeof(float)) != 0) ? i : bad;
                }
                gt_check(bad == total,
                         "rank %d: %s: the device result must have the host path's bits: "
                         "element %zu is %.9g on the device, %.9g on the host",
                         x->rank, what, bad, (bad < total) ? (double)dev[bad] : 0.0,
                         (bad < total) ? (double)host[bad] : 0.0);
                gt_check(memcmp(dev + (size_t)x->rank * blk, in, blk * sizeof(float)) == 0,
                         "rank %d: %s: this rank's own block must be copied exactly", x->rank,
                         what);
            }
        }
    }
}

/*
 * Error feedback and AVG through the collective. For each codec, op and
 * count, two gs_ef_t start alike: one serves four host calls, the other
 * the same four steps as
 *   0. device buffers, in place, on our stream (the device residuals are
 *      made from the host ones);
 *   1. device buffers, out of place, on the legacy default stream;
 *   2. host buffers (the residuals must be read back from the device);
 *   3. device buffers, in place, on our stream (the device residuals must
 *      be refreshed from the host ones);
 * and every step's result must have the host calls' bits. The codecs:
 * the two-phase ones on the GPU (int8, sign, qsgd with the error-feedback
 * step's seed, topk at a ratio where it falls back to the dense scheme)
 * and the sparse ones that stay on the CPU codecs (topk and randk at 1%).
 */
static void part_compressed_ef(ctx_t *x)
{
    static const struct {
        gs_codec_kind_t kind;
        double ratio; /* 0: the default */
    } codecs[] = {{GS_CODEC_INT8, 0.0}, {GS_CODEC_SIGN, 0.0}, {GS_CODEC_QSGD, 0.0},
                  {GS_CODEC_TOPK, 0.5}, {GS_CODEC_TOPK, 0.0}, {GS_CODEC_RANDK, 0.0}};
    static const gs_op_t ops[] = {GS_OP_SUM, GS_OP_AVG};
    static const size_t ccounts[] = {1031, 100003};
    static const char *const how[] = {"device, in place", "device, out of place",
                                      "host buffers after device calls",
                                      "device again after a host call"};

    for (size_t k = 0; k < NELEMS(codecs); k++) {
        for (size_t o = 0; o < NELEMS(ops); o++) {
            for (size_t j = 0; j < NELEMS(ccounts); j++) {
                const size_t n = ccounts[j];
                const gs_op_t op = ops[o];
                gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
                gs_ef_t efh = GS_EF_NULL, efd = GS_EF_NULL;
                float *in = (float *)x->hs, *host = (float *)x->hhost, *dev = (float *)x->hr;
                gs_status_t st;

                cc.kind = codecs[k].kind;
                if (codecs[k].ratio > 0.0) {
                    cc.ratio = codecs[k].ratio;
                }
                st = GT_LIB(gs_ef_create(n, GS_DTYPE_F32, &efh));
                gt_check(st == GS_OK, "rank %d: gs_ef_create: %s: %s", x->rank, gs_status_name(st),
                         gs_last_error());
                st = GT_LIB(gs_ef_create(n, GS_DTYPE_F32, &efd));
                gt_check(st == GS_OK, "rank %d: gs_ef_create: %s: %s", x->rank, gs_status_name(st),
                         gs_last_error());
                /* Every rank makes every call whatever happened before. */
                for (unsigned step = 0; step < 4; step++) {
                    gs_allreduce_opts_t oh = GS_ALLREDUCE_OPTS_INIT, od = GS_ALLREDUCE_OPTS_INIT;
                    char what[200];
                    gs_status_t st1, st2;

                    snprintf(what, sizeof(what),
                             "compressed all-reduce with error feedback, codec %s%s, %s, count "
                             "%zu, step %u (%s)",
                             codec_name(cc.kind), (codecs[k].ratio > 0.0) ? " ratio 0.5" : "",
                             (op == GS_OP_AVG) ? "avg" : "sum", n, step, how[step]);
                    comp_input(x->rank, n, step + 1, in);
                    oh.codec = od.codec = &cc;
                    oh.ef = efh;
                    od.ef = efd;
                    memcpy(host, in, n * sizeof(float));
                    st1 = GT_LIB(gs_allreduce_ex(x->comm, host, host, n, GS_DTYPE_F32, op, &oh));
                    if (step == 2) {
                        memcpy(dev, in, n * sizeof(float));
                        st2 = GT_LIB(gs_allreduce_ex(x->comm, dev, dev, n, GS_DTYPE_F32, op, &od));
                    } else if (step == 1) {
                        GT_CUDA(cudaMemcpy(x->ds, in, n * sizeof(float), cudaMemcpyHostToDevice));
                        GT_CUDA(cudaMemset(x->dr, POISON, (n + 1) * sizeof(float)));
                        st2 = GT_LIB(
                            gs_allreduce_ex(x->comm, x->ds, x->dr, n, GS_DTYPE_F32, op, &od));
                        GT_CUDA(cudaMemcpy(dev, x->dr, (n + 1) * sizeof(float),
                                           cudaMemcpyDeviceToHost));
                        {
                            uint32_t after;

                            memcpy(&after, &dev[n], sizeof(after));
                            gt_check(after == 0xA5A5A5A5u,
                                     "rank %d: %s: the element after the output was written",
                                     x->rank, what);
                        }
                    } else {
                        od.stream = (void *)x->stream;
                        GT_CUDA(cudaMemcpy(x->dr, in, n * sizeof(float), cudaMemcpyHostToDevice));
                        st2 = GT_LIB(
                            gs_allreduce_ex(x->comm, x->dr, x->dr, n, GS_DTYPE_F32, op, &od));
                        GT_CUDA(cudaMemcpy(dev, x->dr, n * sizeof(float), cudaMemcpyDeviceToHost));
                    }
                    if (gt_check((st1 == GS_OK) && (st2 == GS_OK),
                                 "rank %d: %s: host %s, device %s: %s", x->rank, what,
                                 gs_status_name(st1), gs_status_name(st2), gs_last_error())) {
                        comp_same_bits(x, dev, host, n, step + 1, op, what);
                    }
                }
                if (efh != GS_EF_NULL) {
                    GT_LIB(gs_ef_destroy(efh));
                }
                if (efd != GS_EF_NULL) {
                    GT_LIB(gs_ef_destroy(efd));
                }
            }
        }
    }
}

/* GS_CUDA_PATH=nccl with ranks sharing a GPU: a clean GS_ERR_INVALID_USAGE. */
static void part_refused(ctx_t *x)
{
    float h[8];
    gs_status_t st;

    for (int k = 0; k < 2; k++) {
        st = GT_LIB(gs_allreduce(x->comm, x->ds, x->dr, 1000, GS_DTYPE_F32, GS_OP_SUM));
        gt_check(st == GS_ERR_INVALID_USAGE,
                 "rank %d: device all-reduce with GS_CUDA_PATH=nccl on a shared GPU returned %s, "
                 "want GS_ERR_INVALID_USAGE (%s)",
                 x->rank, gs_status_name(st), gs_last_error());
        if ((x->rank == 0) && (k == 0)) {
            printf("GS_CUDA_PATH=nccl on a shared GPU: %s (\"%s\")\n", gs_status_name(st),
                   gs_last_error());
        }
    }
    for (int i = 0; i < 8; i++) {
        h[i] = (float)(x->rank + i);
    }
    st = GT_LIB(gs_allreduce(x->comm, h, h, 8, GS_DTYPE_F32, GS_OP_SUM));
    gt_check((st == GS_OK) && (h[1] == (float)(x->n * (x->n - 1) / 2 + x->n)),
             "rank %d: a host all-reduce after the refusal: %s (%s), h[1] = %g", x->rank,
             gs_status_name(st), gs_last_error(), (double)h[1]);
}

int main(int argc, char **argv)
{
    ctx_t x;
    const char *expect = NULL;
    int64_t bad;
    long mine;
    gs_status_t st;
    int ndev = 0;

    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "--expect") == 0) && (i + 1 < argc)) {
            expect = argv[++i];
        }
    }
    if ((expect == NULL) || ((strcmp(expect, "nccl") != 0) && (strcmp(expect, "staged") != 0) &&
                             (strcmp(expect, "refused") != 0))) {
        fprintf(stderr, "usage: gsrun -n N test_gpu_coll --expect nccl|staged|refused\n");
        return 2;
    }
    gt_skip_without_device("test_gpu_coll");
    memset(&x, 0, sizeof(x));
    GT_CUDA(cudaGetDeviceCount(&ndev));
    GT_CUDA(cudaSetDevice(gt_local_rank() % ndev));
    st = GT_LIB(gs_comm_init_env(&x.comm, NULL));
    if (st != GS_OK) {
        fprintf(stderr, "test_gpu_coll: gs_comm_init_env: %s: %s\n", gs_status_name(st),
                gs_last_error());
        return 1;
    }
    GT_LIB(gs_comm_rank(x.comm, &x.rank));
    GT_LIB(gs_comm_size(x.comm, &x.n));
    if (x.n > MAX_RANKS) {
        fprintf(stderr, "test_gpu_coll: at most %d ranks\n", MAX_RANKS);
        return 2;
    }
    x.nccl = (strcmp(expect, "nccl") == 0);
    x.cap = BIG_COUNT * 8 + (size_t)MAX_BLOCKED * 8 * (size_t)x.n + 64;
    x.hs = malloc(x.cap);
    x.hr = malloc(x.cap);
    x.href = malloc(x.cap);
    x.hhost = malloc(x.cap);
    x.hin = malloc(x.cap);
    if ((x.hs == NULL) || (x.hr == NULL) || (x.href == NULL) || (x.hhost == NULL) ||
        (x.hin == NULL)) {
        fprintf(stderr, "test_gpu_coll: out of host memory\n");
        return 1;
    }
    GT_CUDA(cudaMalloc((void **)&x.ds, x.cap));
    GT_CUDA(cudaMalloc((void **)&x.dr, x.cap));
    GT_CUDA(cudaStreamCreateWithFlags(&x.stream, cudaStreamNonBlocking));
    if (x.rank == 0) {
        printf("test_gpu_coll: %d ranks on %d GPU(s), expecting %s\n", x.n, ndev, expect);
        fflush(stdout);
    }

    if (strcmp(expect, "refused") == 0) {
        part_refused(&x);
    } else {
        part_path(&x);
        part_mixed(&x);
        part_collectives(&x);
        part_compressed(&x);
        part_compressed_ef(&x);
        part_compressed_shard(&x);
    }

    /* Every rank learns whether any failed, and exits the same way. */
    bad = gt_failures;
    mine = gt_failures;
    st = GT_LIB(gs_allreduce(x.comm, &bad, &bad, 1, GS_DTYPE_I64, GS_OP_SUM));
    if (gt_failures > mine) {
        bad++; /* the all-reduce itself left a CUDA error behind (GT_LIB) */
    }
    if (st != GS_OK) {
        fprintf(stderr, "test_gpu_coll: rank %d: the final all-reduce failed: %s: %s\n", x.rank,
                gs_status_name(st), gs_last_error());
        bad = (bad > 0) ? bad : 1;
    }
    printf("test_gpu_coll: rank %d: %ld checks, %ld failed here, %ld notes; %lld failed on all "
           "ranks\n",
           x.rank, gt_checks, gt_failures, x.notes, (long long)bad);
    mine = gt_failures;
    st = GT_LIB(gs_comm_destroy(x.comm));
    if ((st != GS_OK) || (gt_failures > mine)) {
        fprintf(stderr, "test_gpu_coll: rank %d: gs_comm_destroy: %s: %s\n", x.rank,
                gs_status_name(st), gs_last_error());
        bad++;
    }
    GT_CUDA(cudaStreamDestroy(x.stream));
    GT_CUDA(cudaFree(x.ds));
    GT_CUDA(cudaFree(x.dr));
    free(x.hs);
    free(x.hr);
    free(x.href);
    free(x.hhost);
    free(x.hin);
    return (bad > 0) ? 1 : 0;
}
