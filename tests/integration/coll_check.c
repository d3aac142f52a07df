/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coll_check: multi-process correctness check of every gradsync collective,
 * run on every rank under gsrun. For each collective x dtype x op x count x
 * variant (blocking, in place, non-blocking interleaved with local compute)
 * it fills the inputs deterministically from (rank, index, seed), so that
 * each rank can compute every other rank's input, computes the serial
 * reference in double and compares with a per-dtype tolerance (exact for
 * integers). Reduction inputs are small integers (sum), sparse {1,-1,2}
 * (prod) or exactly representable values (min/max), so results are exact
 * where the type allows; copy collectives compare raw bytes. It also checks
 * gs_comm_split, two communicators driven from two threads at once, the
 * counters, gs_waitall and gs_test. Uses the public API only.
 *
 *   coll_check [--colls all|allreduce,broadcast,reduce,allgather,reduce_scatter,alltoall,
 *                       gather,scatter,allgatherv,alltoallv,reduce_scatterv,
 *                       barrier,sendrecv,split,multicomm,misc]
 *              [--dtypes all|f32,...] [--ops all|sum,...,band,bor,bxor]
 *              [--counts 0,1,7,w-1,w+1,...|none]
 *              [--variants all|blk,inplace,nb,nbinplace,any,ex] [--algo NAME] [--iters K]
 *              [--large] [--seed S] [--verbose]
 *
 * Without --colls and --ops it runs the collectives and ops it has always
 * run (not the rooted and v collectives, not the bitwise ops), so that the
 * runs registered before them keep their duration; name them to run them.
 * The v collectives give every rank a different count, derived from the
 * count of the case ("count" is the base), and lay blocks out packed, with
 * gaps, or in reverse rank order with gaps (gaps must stay untouched).
 *
 * One line per failed case, "N passed, M failed" on rank 0 (cases summed
 * over ranks), exit status 1 when any rank saw a failure (agreed with an
 * all-reduce of the failure counts), 2 for bad arguments.
 */
#include <gradsync/gradsync.h>

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tc_coll_data.h"
#include "tc_clock.h"

#define MAX_COUNTS 32
#define MAX_FAIL_LINES 60
#define LARGE_COUNT ((size_t)16 * 1024 * 1024)
#define SENTINEL_BYTE 0xA5

/* Collectives and pseudo-collectives (extra checks) selectable by --colls. */
enum coll {
    COLL_ALLREDUCE,
    COLL_BROADCAST,
    COLL_REDUCE,
    COLL_ALLGATHER,
    COLL_REDUCE_SCATTER,
    COLL_ALLTOALL,
    COLL_GATHER,
    COLL_SCATTER,
    COLL_ALLGATHERV,
    COLL_ALLTOALLV,
    COLL_REDUCE_SCATTERV,
    COLL_BARRIER,
    COLL_SENDRECV,
    COLL_SPLIT,
    COLL_MULTICOMM,
    COLL_MISC,
    COLL_NUM
};

static const char *const coll_names[COLL_NUM] = {
    "allreduce", "broadcast", "reduce",     "allgather", "reduce_scatter",  "alltoall",
    "gather",    "scatter",   "allgatherv", "alltoallv", "reduce_scatterv", "barrier",
    "sendrecv",  "split",     "multicomm",  "misc"};

/* What runs without --colls: everything but the rooted and v collectives. */
#define COLLS_DEFAULT                                                                              \
    (((1u << COLL_NUM) - 1u) &                                                                     \
     ~((1u << COLL_GATHER) | (1u << COLL_SCATTER) | (1u << COLL_ALLGATHERV) |                      \
       (1u << COLL_ALLTOALLV) | (1u << COLL_REDUCE_SCATTERV)))

/* Variants of one collective call. */
/* VAR_EX: the _ex form (with --algo's algorithm, or GS_ALGO_AUTO), blocking. */
enum variant { VAR_BLK, VAR_INPLACE, VAR_NB, VAR_NB_INPLACE, VAR_ANY, VAR_EX, VAR_NUM };

static const char *const var_names[VAR_NUM] = {"blk", "inplace", "nb", "nbinplace", "any", "ex"};

/* Which variants each collective has (bit per enum variant). */
#define VB(_v) (1u << (_v))
static const unsigned coll_variants[COLL_NUM] = {
    [COLL_ALLREDUCE] = VB(VAR_BLK) | VB(VAR_INPLACE) | VB(VAR_NB) | VB(VAR_NB_INPLACE),
    [COLL_BROADCAST] = VB(VAR_BLK) | VB(VAR_NB),
    [COLL_REDUCE] = VB(VAR_BLK) | VB(VAR_NB),
    [COLL_ALLGATHER] = VB(VAR_BLK) | VB(VAR_INPLACE) | VB(VAR_NB) | VB(VAR_NB_INPLACE),
    [COLL_REDUCE_SCATTER] = VB(VAR_BLK) | VB(VAR_INPLACE) | VB(VAR_NB) | VB(VAR_NB_INPLACE),
    [COLL_ALLTOALL] = VB(VAR_BLK) | VB(VAR_INPLACE) | VB(VAR_NB) | VB(VAR_NB_INPLACE),
    [COLL_BARRIER] = VB(VAR_BLK) | VB(VAR_NB),
    [COLL_SENDRECV] = VB(VAR_BLK) | VB(VAR_NB) | VB(VAR_ANY),
    [COLL_GATHER] = VB(VAR_BLK) | VB(VAR_INPLACE) | VB(VAR_NB) | VB(VAR_NB_INPLACE) | VB(VAR_EX),
    [COLL_SCATTER] = VB(VAR_BLK) | VB(VAR_INPLACE) | VB(VAR_NB) | VB(VAR_NB_INPLACE) | VB(VAR_EX),
    [COLL_ALLGATHERV] =
        VB(VAR_BLK) | VB(VAR_INPLACE) | VB(VAR_NB) | VB(VAR_NB_INPLACE) | VB(VAR_EX),
    [COLL_ALLTOALLV] = VB(VAR_BLK) | VB(VAR_NB) | VB(VAR_EX),
    [COLL_REDUCE_SCATTERV] =
        VB(VAR_BLK) | VB(VAR_INPLACE) | VB(VAR_NB) | VB(VAR_NB_INPLACE) | VB(VAR_EX),
};

static const char *const dt_names[GS_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16",
                                                     "i8",  "u8",  "i32", "i64"};
static const size_t dt_sizes[GS_DTYPE_COUNT] = {4, 8, 2, 2, 1, 1, 4, 8};
static const char *const op_names[GS_OP_COUNT] = {"sum", "prod", "min", "max",
                                                  "avg", "band", "bor", "bxor"};

static int op_is_bitwise(int op)
{
    return op == GS_OP_BAND || op == GS_OP_BOR || op == GS_OP_BXOR;
}

/* What runs without --ops: the arithmetic ops. */
#define OPS_DEFAULT                                                                                \
    (((1u << GS_OP_COUNT) - 1u) & ~((1u << GS_OP_BAND) | (1u << GS_OP_BOR) | (1u << GS_OP_BXOR)))

/* Command-line options, read-only once parsed. */
static struct {
    unsigned colls;    /* bit per enum coll */
    unsigned dtypes;   /* bit per gs_dtype_t */
    unsigned ops;      /* bit per gs_op_t */
    unsigned variants; /* bit per enum variant */
    char count_spec[MAX_COUNTS][24];
    int ncounts;
    int has_algo;
    gs_algo_t algo;
    int iters;
    int large;
    uint64_t seed;
    int verbose;
} g_opt;

/* Per-thread, per-communicator test state. */
struct tctx {
    gs_comm_t comm;
    int rank;
    int world;
    const char *name; /* "world", "sub", "dup" */
    uint32_t seq;     /* case number, identical on every rank of comm */
    long passed;
    long failed;
    long skipped;
    int dead; /* comm hit a peer/communicator error: stop */
    size_t counts[MAX_COUNTS];
    int ncounts;
};

static pthread_mutex_t g_print_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_fail_lines;

/* ------------------------------------------------------------------ */
/* Deterministic inputs and the serial reference                       */
/* ------------------------------------------------------------------ */

static uint64_t hash3(uint64_t seed, int rank, size_t idx)
{
    return tc_mix64(seed * 0x2545f4914f6cdd1dull + (uint64_t)(rank + 1) * 0xd1b54a32d192ed03ull +
                    (uint64_t)idx * 0x9e3779b97f4a7c15ull);
}

/*
 * Input of @p rank at @p idx for a reduction with @p op over @p world
 * ranks: chosen so that every partial result is exact in @p dt.
 */
static double gen_value(int rank, size_t idx, uint64_t seed, gs_dtype_t dt, gs_op_t op, int world)
{
    uint64_t h = hash3(seed, rank, idx);
    int is8 = dt == GS_DTYPE_I8 || dt == GS_DTYPE_U8;
    int half = dt == GS_DTYPE_F16 || dt == GS_DTYPE_BF16;
    switch (op) {
    case GS_OP_SUM:
    case GS_OP_AVG: {
        int amp = 1000;
        if (is8)
            amp = 120 / world;
        else if (half)
            amp = 250 / world;
        if (amp > 7 && (is8 || half))
            amp = 7;
        if (amp < 1)
            amp = 1;
        if (dt == GS_DTYPE_U8)
            return (double)(h % (uint64_t)(2 * amp + 1));
        return (double)(int64_t)(h % (uint64_t)(2 * amp + 1)) - amp;
    }
    case GS_OP_PROD: {
        unsigned r = (unsigned)(h % 16u);
        /* At most ceil(world/4) twos per index keeps |prod| small. */
        int twos_ok = !is8 || (world + 3) / 4 <= 6;
        if (r < 2 && dt != GS_DTYPE_U8)
            return -1.0;
        if (r == 2 && twos_ok && (idx + (size_t)rank) % 4 == 0)
            return 2.0;
        return 1.0;
    }
    case GS_OP_BAND:
    case GS_OP_BOR:
    case GS_OP_BXOR:
        /* Every bit pattern of the type (i64: 53 bits, exact in a double). */
        if (dt == GS_DTYPE_U8)
            return (double)(h & 0xffu);
        if (dt == GS_DTYPE_I8)
            return (double)(int8_t)(uint8_t)(h & 0xffu);
        if (dt == GS_DTYPE_I32)
            return (double)(int32_t)(uint32_t)h;
        return (double)((int64_t)(h >> 11) - ((int64_t)1 << 52));
    case GS_OP_MIN:
    case GS_OP_MAX:
    default:
        if (dt == GS_DTYPE_U8)
            return (double)(h % 256u);
        if (dt == GS_DTYPE_I8 || half)
            return (double)(int64_t)(h % 201u) - 100.0;
        if (dt == GS_DTYPE_F32 || dt == GS_DTYPE_F64)
            return ((double)(int64_t)(h % 200001u) - 100000.0) / 64.0;
        return (double)(int64_t)(h % 2000001u) - 1000000.0;
    }
}

static double ref_reduce(int world, size_t idx, uint64_t seed, gs_dtype_t dt, gs_op_t op)
{
    double acc = gen_value(0, idx, seed, dt, op, world);
    for (int r = 1; r < world; r++)
        acc = tc_combine(op, acc, gen_value(r, idx, seed, dt, op, world));
    if (op == GS_OP_AVG)
        acc /= world;
    return acc;
}

static void fill_values(void *buf, size_t n, size_t idx0, int rank, uint64_t seed, gs_dtype_t dt,
                        gs_op_t op, int world)
{
    for (size_t i = 0; i < n; i++)
        tc_set(buf, i, dt, gen_value(rank, idx0 + i, seed, dt, op, world));
}

/* Raw element bytes of @p rank at @p idx, for the copy collectives. */
static void gen_bytes(unsigned char *out, int rank, size_t idx, uint64_t seed, gs_dtype_t dt)
{
    uint64_t h = hash3(seed ^ 0x5bd1e995ull, rank, idx);
    memcpy(out, &h, dt_sizes[dt]);
}

static void fill_bytes(void *buf, size_t n, size_t idx0, int rank, uint64_t seed, gs_dtype_t dt)
{
    size_t es = dt_sizes[dt];
    for (size_t i = 0; i < n; i++)
        gen_bytes((unsigned char *)buf + i * es, rank, idx0 + i, seed, dt);
}

static double dt_tolerance(gs_dtype_t dt)
{
    switch (dt) {
    case GS_DTYPE_F16:
    case GS_DTYPE_BF16:
        return 1e-2;
    case GS_DTYPE_F32:
        return 1e-5;
    case GS_DTYPE_F64:
        return 1e-12;
    default:
        return 0.0;
    }
}

/* ------------------------------------------------------------------ */
/* Reporting                                                           */
/* ------------------------------------------------------------------ */

/* First mismatch of one case plus how many elements were wrong. */
struct mism {
    size_t nbad;
    size_t first;
    char detail[200];
};

__attribute__((format(printf, 3, 4))) static void case_fail(struct tctx *t, const char *label,
                                                            const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    t->failed++;
    pthread_mutex_lock(&g_print_lock);
    if (g_fail_lines < MAX_FAIL_LINES)
        printf("FAIL rank %d [%s] %s: %s\n", t->rank, t->name, label, msg);
    else if (g_fail_lines == MAX_FAIL_LINES)
        printf("FAIL rank %d: further failure lines suppressed\n", t->rank);
    g_fail_lines++;
    pthread_mutex_unlock(&g_print_lock);
}

static void case_pass(struct tctx *t, const char *label)
{
    t->passed++;
    if (g_opt.verbose)
        printf("ok   rank %d [%s] %s\n", t->rank, t->name, label);
}

/*
 * Check the status of a call. Returns 1 when it succeeded; otherwise
 * records the failure, marks the communicator dead for peer/comm errors.
 */
static int call_ok(struct tctx *t, const char *label, const char *what, gs_status_t st)
{
    if (st == GS_OK)
        return 1;
    case_fail(t, label, "%s returned %s (%d): %s", what, gs_status_name(st), (int)st,
              gs_last_error());
    gs_status_scope_t sc = gs_status_scope(st);
    if (sc == GS_SCOPE_PEER || sc == GS_SCOPE_COMM || sc == GS_SCOPE_INTERNAL)
        t->dead = 1;
    return 0;
}

static void check_value(struct mism *m, size_t i, gs_dtype_t dt, double got, double exp)
{
    int ok;
    if (tc_dtype_is_float(dt)) {
        ok = isfinite(got) && tc_close(got, exp, dt_tolerance(dt));
    } else {
        ok = got == exp;
    }
    if (ok)
        return;
    if (m->nbad++ == 0) {
        m->first = i;
        snprintf(m->detail, sizeof(m->detail), "got %.10g expected %.10g", got, exp);
    }
}

static void check_bytes(struct mism *m, size_t i, const unsigned char *got,
                        const unsigned char *exp, size_t es)
{
    if (memcmp(got, exp, es) == 0)
        return;
    if (m->nbad++ == 0) {
        uint64_t g = 0, e = 0;
        memcpy(&g, got, es);
        memcpy(&e, exp, es);
        m->first = i;
        snprintf(m->detail, sizeof(m->detail), "got bytes 0x%0*" PRIx64 " expected 0x%0*" PRIx64,
                 (int)(2 * es), g, (int)(2 * es), e);
    }
}

static void finish_case(struct tctx *t, const char *label, const struct mism *m, size_t n)
{
    if (m->nbad)
        case_fail(t, label, "%zu of %zu elements wrong, first at index %zu: %s", m->nbad, n,
                  m->first, m->detail);
    else
        case_pass(t, label);
}

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "coll_check: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static int is_nb(enum variant v)
{
    return v == VAR_NB || v == VAR_NB_INPLACE;
}

static int is_inplace(enum variant v)
{
    return v == VAR_INPLACE || v == VAR_NB_INPLACE;
}

/*
 * Finish a non-blocking request while doing local compute: a few rounds of
 * hashing with gs_test() between them, then gs_wait(). Checks that the
 * handle is released (GS_REQUEST_NULL) afterwards.
 */
static gs_status_t nb_finish(struct tctx *t, const char *label, gs_request_t *req)
{
    gs_status_t st = GS_INPROGRESS;
    volatile uint64_t acc = 0;
    for (int k = 0; k < 8 && st == GS_INPROGRESS; k++) {
        for (uint64_t j = 0; j < 4096; j++)
            acc += tc_mix64(j + (uint64_t)k);
        st = gs_test(req);
    }
    if (st == GS_INPROGRESS)
        st = gs_wait(req);
    if (*req != GS_REQUEST_NULL) {
        case_fail(t, label, "request handle not set to GS_REQUEST_NULL after completion (%s)",
                  gs_status_name(st));
        st = GS_ERR_INTERNAL;
    }
    (void)acc;
    return st;
}

static void make_label(char *buf, size_t len, enum coll c, gs_dtype_t dt, int op, size_t count,
                       enum variant v, int root, uint32_t seq)
{
    char rootbuf[16] = "-";
    if (root >= 0)
        snprintf(rootbuf, sizeof(rootbuf), "%d", root);
    snprintf(buf, len, "%s dt=%s op=%s count=%zu var=%s root=%s case=%" PRIu32, coll_names[c],
             dt_names[dt], op >= 0 ? op_names[op] : "-", count, var_names[v], rootbuf, seq);
}

/* Pointer to pass for a buffer: NULL for count 0 in the blocking variant (count 0 is valid). */
static void *argbuf(void *p, size_t count, enum variant v)
{
    return (count == 0 && v == VAR_BLK) ? NULL : p;
}

/* ------------------------------------------------------------------ */
/* One case per collective                                             */
/* ------------------------------------------------------------------ */

static gs_status_t post_allreduce(struct tctx *t, const void *s, void *r, size_t n, gs_dtype_t dt,
                                  gs_op_t op, gs_request_t *req)
{
    if (g_opt.has_algo) {
        gs_allreduce_opts_t o = GS_ALLREDUCE_OPTS_INIT;
        o.algo = g_opt.algo;
        if (req)
            return gs_iallreduce_ex(t->comm, s, r, n, dt, op, &o, req);
        return gs_allreduce_ex(t->comm, s, r, n, dt, op, &o);
    }
    if (req)
        return gs_iallreduce(t->comm, s, r, n, dt, op, req);
    return gs_allreduce(t->comm, s, r, n, dt, op);
}

static void case_allreduce(struct tctx *t, gs_dtype_t dt, gs_op_t op, size_t count, enum variant v)
{
    char label[256];
    uint32_t seq = t->seq++;
    uint64_t seed = g_opt.seed + seq;
    size_t es = dt_sizes[dt];
    make_label(label, sizeof(label), COLL_ALLREDUCE, dt, (int)op, count, v, -1, seq);

    unsigned char *send = xmalloc(count * es);
    unsigned char *recv = is_inplace(v) ? send : xmalloc(count * es);
    fill_values(send, count, 0, t->rank, seed, dt, op, t->world);
    if (!is_inplace(v))
        memset(recv, SENTINEL_BYTE, count * es);

    gs_status_t st;
    if (is_nb(v)) {
        gs_request_t req = GS_REQUEST_NULL;
        st = post_allreduce(t, send, recv, count, dt, op, &req);
        if (st == GS_OK)
            st = nb_finish(t, label, &req);
    } else {
        st = post_allreduce(t, argbuf(send, count, v), argbuf(recv, count, v), count, dt, op, NULL);
    }
    if (st == GS_ERR_UNSUPPORTED && g_opt.has_algo) {
        t->skipped++;
        if (g_opt.verbose)
            printf("skip rank %d %s: %s\n", t->rank, label, gs_last_error());
    } else if (call_ok(t, label, "gs_allreduce", st)) {
        struct mism m = {0};
        for (size_t i = 0; i < count; i++)
            check_value(&m, i, dt, tc_get(recv, i, dt), ref_reduce(t->world, i, seed, dt, op));
        finish_case(t, label, &m, count);
    }
    if (recv != send)
        free(recv);
    free(send);
}

static void case_broadcast(struct tctx *t, gs_dtype_t dt, size_t count, enum variant v)
{
    char label[256];
    uint32_t seq = t->seq++;
    uint64_t seed = g_opt.seed + seq;
    int root = (int)(seq % (uint32_t)t->world);
    size_t es = dt_sizes[dt];
    make_label(label, sizeof(label), COLL_BROADCAST, dt, -1, count, v, root, seq);

    unsigned char *buf = xmalloc(count * es);
    if (t->rank == root)
        fill_bytes(buf, count, 0, root, seed, dt);
    else
        memset(buf, SENTINEL_BYTE, count * es);

    gs_status_t st;
    if (is_nb(v)) {
        gs_request_t req = GS_REQUEST_NULL;
        st = gs_ibroadcast(t->comm, buf, count, dt, root, &req);
        if (st == GS_OK)
            st = nb_finish(t, label, &req);
    } else {
        st = gs_broadcast(t->comm, argbuf(buf, count, v), count, dt, root);
    }
    if (call_ok(t, label, "gs_broadcast", st)) {
        struct mism m = {0};
        unsigned char exp[8];
        for (size_t i = 0; i < count; i++) {
            gen_bytes(exp, root, i, seed, dt);
            check_bytes(&m, i, buf + i * es, exp, es);
        }
        finish_case(t, label, &m, count);
    }
    free(buf);
}

static void case_reduce(struct tctx *t, gs_dtype_t dt, gs_op_t op, size_t count, enum variant v)
{
    char label[256];
    uint32_t seq = t->seq++;
    uint64_t seed = g_opt.seed + seq;
    int root = (int)(seq % (uint32_t)t->world);
    size_t es = dt_sizes[dt];
    make_label(label, sizeof(label), COLL_REDUCE, dt, (int)op, count, v, root, seq);

    unsigned char *send = xmalloc(count * es);
    unsigned char *recv = xmalloc(count * es);
    fill_values(send, count, 0, t->rank, seed, dt, op, t->world);
    memset(recv, SENTINEL_BYTE, count * es);
    /* Non-roots pass NULL every other time: recvbuf is ignored there. */
    void *rarg = recv;
    if (t->rank != root && (seq / (uint32_t)t->world) % 2 == 0)
        rarg = NULL;

    gs_status_t st;
    if (is_nb(v)) {
        gs_request_t req = GS_REQUEST_NULL;
        st = gs_ireduce(t->comm, send, rarg, count, dt, op, root, &req);
        if (st == GS_OK)
            st = nb_finish(t, label, &req);
    } else {
        st = gs_reduce(t->comm, argbuf(send, count, v), rarg ? argbuf(recv, count, v) : NULL, count,
                       dt, op, root);
    }
    if (call_ok(t, label, "gs_reduce", st)) {
        struct mism m = {0};
        if (t->rank == root)
            for (size_t i = 0; i < count; i++)
                check_value(&m, i, dt, tc_get(recv, i, dt), ref_reduce(t->world, i, seed, dt, op));
        finish_case(t, label, &m, count);
    }
    free(recv);
    free(send);
}

static void case_allgather(struct tctx *t, gs_dtype_t dt, size_t count, enum variant v)
{
    char label[256];
    uint32_t seq = t->seq++;
    uint64_t seed = g_opt.seed + seq;
    size_t es = dt_sizes[dt];
    size_t total = count * (size_t)t->world;
    make_label(label, sizeof(label), COLL_ALLGATHER, dt, -1, count, v, -1, seq);

    unsigned char *recv = xmalloc(total * es);
    memset(recv, SENTINEL_BYTE, total * es);
    unsigned char *send;
    if (is_inplace(v)) {
        send = recv + (size_t)t->rank * count * es;
    } else {
        send = xmalloc(count * es);
    }
    fill_bytes(send, count, 0, t->rank, seed, dt);

    gs_status_t st;
    if (is_nb(v)) {
        gs_request_t req = GS_REQUEST_NULL;
        st = gs_iallgather(t->comm, send, recv, count, dt, &req);
        if (st == GS_OK)
            st = nb_finish(t, label, &req);
    } else {
        st = gs_allgather(t->comm, argbuf(send, count, v), argbuf(recv, count, v), count, dt);
    }
    if (call_ok(t, label, "gs_allgather", st)) {
        struct mism m = {0};
        unsigned char exp[8];
        for (int r = 0; r < t->world; r++)
            for (size_t i = 0; i < count; i++) {
                size_t j = (size_t)r * count + i;
                gen_bytes(exp, r, i, seed, dt);
                check_bytes(&m, j, recv + j * es, exp, es);
            }
        finish_case(t, label, &m, total);
    }
    if (!is_inplace(v))
        free(send);
    free(recv);
}

static void case_reduce_scatter(struct tctx *t, gs_dtype_t dt, gs_op_t op, size_t count,
                                enum variant v)
{
    char label[256];
    uint32_t seq = t->seq++;
    uint64_t seed = g_opt.seed + seq;
    size_t es = dt_sizes[dt];
    size_t total = count * (size_t)t->world;
    make_label(label, sizeof(label), COLL_REDUCE_SCATTER, dt, (int)op, count, v, -1, seq);

    unsigned char *send = xmalloc(total * es);
    fill_values(send, total, 0, t->rank, seed, dt, op, t->world);
    unsigned char *recv;
    if (is_inplace(v)) {
        recv = send + (size_t)t->rank * count * es;
    } else {
        recv = xmalloc(count * es);
        memset(recv, SENTINEL_BYTE, count * es);
    }

    gs_status_t st;
    if (is_nb(v)) {
        gs_request_t req = GS_REQUEST_NULL;
        st = gs_ireduce_scatter(t->comm, send, recv, count, dt, op, &req);
        if (st == GS_OK)
            st = nb_finish(t, label, &req);
    } else {
        st = gs_reduce_scatter(t->comm, argbuf(send, count, v), argbuf(recv, count, v), count, dt,
                               op);
    }
    if (call_ok(t, label, "gs_reduce_scatter", st)) {
        struct mism m = {0};
        size_t base = (size_t)t->rank * count;
        for (size_t i = 0; i < count; i++)
            check_value(&m, i, dt, tc_get(recv, i, dt),
                        ref_reduce(t->world, base + i, seed, dt, op));
        finish_case(t, label, &m, count);
    }
    if (!is_inplace(v))
        free(recv);
    free(send);
}

static void case_alltoall(struct tctx *t, gs_dtype_t dt, size_t count, enum variant v)
{
    char label[256];
    uint32_t seq = t->seq++;
    uint64_t seed = g_opt.seed + seq;
    size_t es = dt_sizes[dt];
    size_t total = count * (size_t)t->world;
    make_label(label, sizeof(label), COLL_ALLTOALL, dt, -1, count, v, -1, seq);

    unsigned char *send = xmalloc(total * es);
    fill_bytes(send, total, 0, t->rank, seed, dt);
    unsigned char *recv = send;
    if (!is_inplace(v)) {
        recv = xmalloc(total * es);
        memset(recv, SENTINEL_BYTE, total * es);
    }

    gs_status_t st;
    if (is_nb(v)) {
        gs_request_t req = GS_REQUEST_NULL;
        st = gs_ialltoall(t->comm, send, recv, count, dt, &req);
        if (st == GS_OK)
            st = nb_finish(t, label, &req);
    } else {
        st = gs_alltoall(t->comm, argbuf(send, count, v), argbuf(recv, count, v), count, dt);
    }
    if (call_ok(t, label, "gs_alltoall", st)) {
        struct mism m = {0};
        unsigned char exp[8];
        /* Block s of my recvbuf is block <my rank> of rank s's sendbuf. */
        for (int s = 0; s < t->world; s++)
            for (size_t i = 0; i < count; i++) {
                size_t j = (size_t)s * count + i;
                gen_bytes(exp, s, (size_t)t->rank * count + i, seed, dt);
                check_bytes(&m, j, recv + j * es, exp, es);
            }
        finish_case(t, label, &m, total);
    }
    if (recv != send)
        free(recv);
    free(send);
}

/* ------------------------------------------------------------------ */
/* Rooted and variable-size collectives                                */
/* ------------------------------------------------------------------ */

/* The _ex form runs for VAR_EX, and for every blocking variant under --algo. */
static int use_ex(enum variant v)
{
    return v == VAR_EX || (g_opt.has_algo && !is_nb(v));
}

static gs_coll_opts_t ex_opts(void)
{
    gs_coll_opts_t o = GS_COLL_OPTS_INIT;
    if (g_opt.has_algo)
        o.algo = g_opt.algo;
    return o;
}

/* A forced algorithm that does not implement the collective: skipped. */
static int skip_unsupported(struct tctx *t, const char *label, gs_status_t st)
{
    if (st != GS_ERR_UNSUPPORTED || !g_opt.has_algo)
        return 0;
    t->skipped++;
    if (g_opt.verbose)
        printf("skip rank %d %s: %s\n", t->rank, label, gs_last_error());
    return 1;
}

/* Rank @p r's count in a v case of base @p base: 0 .. 2*base, uneven across ranks. */
static size_t vcount(size_t base, int a, int b, uint32_t seq)
{
    if (base == 0)
        return 0;
    return (base + (size_t)a * 5u + (size_t)b * 3u + seq) % (2 * base + 1);
}

/*
 * Displacements of @p n blocks: mode 0 packed (returns NULL: the library's
 * default), 1 in rank order with a one-element gap before each block, 2 in
 * reverse rank order with two-element gaps. *cap_out: elements spanned.
 */
static size_t *vlayout(int n, const size_t *counts, int mode, size_t *cap_out)
{
    size_t *d = xmalloc((size_t)n * sizeof(size_t));
    size_t off = 0;
    for (int k = 0; k < n; k++) {
        int j = mode == 2 ? n - 1 - k : k;
        off += (size_t)mode;
        d[j] = off;
        off += counts[j];
    }
    *cap_out = off + (size_t)mode;
    if (mode == 0) {
        free(d);
        return NULL;
    }
    return d;
}

static size_t voff(const size_t *displs, const size_t *counts, int j)
{
    size_t off = 0;
    if (displs)
        return displs[j];
    for (int k = 0; k < j; k++)
        off += counts[k];
    return off;
}

/* A copy of an array the library must not read after a non-blocking call returns. */
static size_t *vdup(const size_t *a, int n)
{
    size_t *c;
    if (!a)
        return NULL;
    c = xmalloc((size_t)n * sizeof(size_t));
    memcpy(c, a, (size_t)n * sizeof(size_t));
    return c;
}

/* Scribble over and free the caller's arrays of a call in flight. */
static void vtrash(size_t *a, int n)
{
    if (a) {
        memset(a, 0xff, (size_t)n * sizeof(size_t));
        free(a);
    }
}

/* Element bytes outside every block must still hold the sentinel. */
static void check_gaps(struct mism *m, const unsigned char *buf, size_t cap, size_t es,
                       const unsigned char *inblock)
{
    for (size_t i = 0; i < cap; i++) {
        if (inblock[i])
            continue;
        for (size_t b = 0; b < es; b++)
            if (buf[i * es + b] != SENTINEL_BYTE) {
                if (m->nbad++ == 0) {
                    m->first = i;
                    snprintf(m->detail, sizeof(m->detail), "gap element %zu was written", i);
                }
                break;
            }
    }
}

static void case_rooted(struct tctx *t, enum coll c, gs_dtype_t dt, size_t count, enum variant v)
{
    char label[256];
    uint32_t seq = t->seq++;
    uint64_t seed = g_opt.seed + seq;
    int root = (int)(seq % (uint32_t)t->world);
    int gather = c == COLL_GATHER;
    size_t es = dt_sizes[dt];
    size_t total = count * (size_t)t->world;
    make_label(label, sizeof(label), c, dt, -1, count, v, root, seq);

    /* big: the root's world-block buffer; small: this rank's block. */
    unsigned char *big = xmalloc(total * es);
    unsigned char *small = xmalloc(count * es);
    unsigned char *mine = small;
    if (t->rank == root && is_inplace(v))
        mine = big + (size_t)root * count * es;
    if (gather) {
        memset(big, SENTINEL_BYTE, total * es);
        fill_bytes(mine, count, 0, t->rank, seed, dt);
    } else {
        memset(small, SENTINEL_BYTE, count * es);
        if (t->rank == root)
            fill_bytes(big, total, 0, root, seed, dt);
    }
    /* Non-roots pass NULL for the root-only buffer every other time. */
    unsigned char *bigarg = big;
    if (t->rank != root && (seq / (uint32_t)t->world) % 2 == 0)
        bigarg = NULL;
    const void *sarg = gather ? (const void *)mine : (const void *)bigarg;
    void *rarg = gather ? (void *)bigarg : (void *)mine;

    gs_status_t st;
    if (is_nb(v)) {
        gs_request_t req = GS_REQUEST_NULL;
        gs_coll_opts_t o = ex_opts();
        /* The _ex forms every other call (the same semantics with options). */
        if (seq % 2 == 0)
            st = gather ? gs_igather(t->comm, sarg, rarg, count, dt, root, &req)
                        : gs_iscatter(t->comm, sarg, rarg, count, dt, root, &req);
        else
            st = gather ? gs_igather_ex(t->comm, sarg, rarg, count, dt, root, &o, &req)
                        : gs_iscatter_ex(t->comm, sarg, rarg, count, dt, root, &o, &req);
        if (st == GS_OK)
            st = nb_finish(t, label, &req);
    } else if (use_ex(v)) {
        gs_coll_opts_t o = ex_opts();
        st = gather ? gs_gather_ex(t->comm, sarg, rarg, count, dt, root, &o)
                    : gs_scatter_ex(t->comm, sarg, rarg, count, dt, root, &o);
    } else {
        st = gather ? gs_gather(t->comm, argbuf((void *)(uintptr_t)sarg, count, v),
                                count == 0 ? NULL : rarg, count, dt, root)
                    : gs_scatter(t->comm, count == 0 ? NULL : sarg, argbuf(rarg, count, v), count,
                                 dt, root);
    }
    if (skip_unsupported(t, label, st)) {
    } else if (call_ok(t, label, gather ? "gs_gather" : "gs_scatter", st)) {
        struct mism m = {0};
        unsigned char exp[8];
        if (gather && t->rank == root) {
            for (int r = 0; r < t->world; r++)
                for (size_t i = 0; i < count; i++) {
                    size_t j = (size_t)r * count + i;
                    gen_bytes(exp, r, i, seed, dt);
                    check_bytes(&m, j, big + j * es, exp, es);
                }
        } else if (!gather) {
            for (size_t i = 0; i < count; i++) {
                gen_bytes(exp, root, (size_t)t->rank * count + i, seed, dt);
                check_bytes(&m, i, mine + i * es, exp, es);
            }
        }
        finish_case(t, label, &m, gather ? total : count);
    }
    free(small);
    free(big);
}

static void case_allgatherv(struct tctx *t, gs_dtype_t dt, size_t count, enum variant v)
{
    char label[256];
    uint32_t seq = t->seq++;
    uint64_t seed = g_opt.seed + seq;
    int n = t->world;
    size_t es = dt_sizes[dt];
    size_t cap;
    make_label(label, sizeof(label), COLL_ALLGATHERV, dt, -1, count, v, -1, seq);

    size_t *counts = xmalloc((size_t)n * sizeof(size_t));
    for (int r = 0; r < n; r++)
        counts[r] = vcount(count, r, 0, seq);
    size_t *displs = vlayout(n, counts, (int)(seq % 3u), &cap);
    size_t mycount = counts[t->rank];
    size_t myoff = voff(displs, counts, t->rank);
    unsigned char *recv = xmalloc(cap * es);
    memset(recv, SENTINEL_BYTE, cap * es);
    unsigned char *send = is_inplace(v) ? recv + myoff * es : xmalloc(mycount * es);
    fill_bytes(send, mycount, 0, t->rank, seed, dt);

    gs_status_t st;
    if (is_nb(v)) {
        gs_request_t req = GS_REQUEST_NULL;
        size_t *c2 = vdup(counts, n), *d2 = vdup(displs, n);
        st = gs_iallgatherv(t->comm, send, mycount, recv, cap, c2, d2, dt, &req);
        vtrash(c2, n); /* the request holds its own copy */
        vtrash(d2, n);
        if (st == GS_OK)
            st = nb_finish(t, label, &req);
    } else if (use_ex(v)) {
        gs_coll_opts_t o = ex_opts();
        st = gs_allgatherv_ex(t->comm, send, mycount, recv, cap, counts, displs, dt, &o);
    } else {
        st = gs_allgatherv(t->comm, argbuf(send, mycount, v), mycount, argbuf(recv, cap, v), cap,
                           counts, displs, dt);
    }
    if (skip_unsupported(t, label, st)) {
    } else if (call_ok(t, label, "gs_allgatherv", st)) {
        struct mism m = {0};
        unsigned char exp[8];
        unsigned char *inblock = calloc(cap ? cap : 1, 1);
        for (int r = 0; r < n; r++) {
            size_t off = voff(displs, counts, r);
            for (size_t i = 0; i < counts[r]; i++) {
                gen_bytes(exp, r, i, seed, dt);
                check_bytes(&m, off + i, recv + (off + i) * es, exp, es);
                inblock[off + i] = 1;
            }
        }
        check_gaps(&m, recv, cap, es, inblock);
        free(inblock);
        finish_case(t, label, &m, cap);
    }
    if (!is_inplace(v))
        free(send);
    free(recv);
    free(displs);
    free(counts);
}

static void case_alltoallv(struct tctx *t, gs_dtype_t dt, size_t count, enum variant v)
{
    char label[256];
    uint32_t seq = t->seq++;
    uint64_t seed = g_opt.seed + seq;
    int n = t->world;
    size_t es = dt_sizes[dt];
    size_t scap, rcap;
    const size_t stride = 1000003; /* element index of block j: j * stride + i */
    make_label(label, sizeof(label), COLL_ALLTOALLV, dt, -1, count, v, -1, seq);

    size_t *sc = xmalloc((size_t)n * sizeof(size_t));
    size_t *rc = xmalloc((size_t)n * sizeof(size_t));
    for (int j = 0; j < n; j++) {
        sc[j] = vcount(count, t->rank, j, seq);
        rc[j] = vcount(count, j, t->rank, seq);
    }
    size_t *sd = vlayout(n, sc, (int)(seq % 3u), &scap);
    size_t *rd = vlayout(n, rc, (int)((seq + 1) % 3u), &rcap);
    unsigned char *send = xmalloc(scap * es);
    unsigned char *recv = xmalloc(rcap * es);
    memset(send, SENTINEL_BYTE, scap * es);
    memset(recv, SENTINEL_BYTE, rcap * es);
    for (int j = 0; j < n; j++)
        fill_bytes(send + voff(sd, sc, j) * es, sc[j], (size_t)j * stride, t->rank, seed, dt);

    gs_status_t st;
    if (is_nb(v)) {
        gs_request_t req = GS_REQUEST_NULL;
        size_t *a = vdup(sc, n), *b = vdup(sd, n), *c = vdup(rc, n), *d = vdup(rd, n);
        gs_coll_opts_t o = ex_opts();
        if (seed % 2 == 0)
            st = gs_ialltoallv(t->comm, send, scap, a, b, recv, rcap, c, d, dt, &req);
        else
            st = gs_ialltoallv_ex(t->comm, send, scap, a, b, recv, rcap, c, d, dt, &o, &req);
        vtrash(a, n);
        vtrash(b, n);
        vtrash(c, n);
        vtrash(d, n);
        if (st == GS_OK)
            st = nb_finish(t, label, &req);
    } else if (use_ex(v)) {
        gs_coll_opts_t o = ex_opts();
        st = gs_alltoallv_ex(t->comm, send, scap, sc, sd, recv, rcap, rc, rd, dt, &o);
    } else {
        st = gs_alltoallv(t->comm, argbuf(send, scap, v), scap, sc, sd, argbuf(recv, rcap, v), rcap,
                          rc, rd, dt);
    }
    if (skip_unsupported(t, label, st)) {
    } else if (call_ok(t, label, "gs_alltoallv", st)) {
        struct mism m = {0};
        unsigned char exp[8];
        unsigned char *inblock = calloc(rcap ? rcap : 1, 1);
        for (int s = 0; s < n; s++) {
            size_t off = voff(rd, rc, s);
            for (size_t i = 0; i < rc[s]; i++) {
                gen_bytes(exp, s, (size_t)t->rank * stride + i, seed, dt);
                check_bytes(&m, off + i, recv + (off + i) * es, exp, es);
                inblock[off + i] = 1;
            }
        }
        check_gaps(&m, recv, rcap, es, inblock);
        free(inblock);
        finish_case(t, label, &m, rcap);
    }
    free(recv);
    free(send);
    free(rd);
    free(sd);
    free(rc);
    free(sc);
}

static void case_reduce_scatterv(struct tctx *t, gs_dtype_t dt, gs_op_t op, size_t count,
                                 enum variant v)
{
    char label[256];
    uint32_t seq = t->seq++;
    uint64_t seed = g_opt.seed + seq;
    int n = t->world;
    size_t es = dt_sizes[dt];
    size_t total = 0;
    make_label(label, sizeof(label), COLL_REDUCE_SCATTERV, dt, (int)op, count, v, -1, seq);

    size_t *counts = xmalloc((size_t)n * sizeof(size_t));
    for (int r = 0; r < n; r++) {
        counts[r] = vcount(count, r, 0, seq);
        total += counts[r];
    }
    size_t mycount = counts[t->rank];
    size_t myoff = voff(NULL, counts, t->rank);
    unsigned char *send = xmalloc(total * es);
    fill_values(send, total, 0, t->rank, seed, dt, op, n);
    unsigned char *recv;
    if (is_inplace(v)) {
        recv = send + myoff * es;
    } else {
        recv = xmalloc(mycount * es);
        memset(recv, SENTINEL_BYTE, mycount * es);
    }

    gs_status_t st;
    if (is_nb(v)) {
        gs_request_t req = GS_REQUEST_NULL;
        size_t *c2 = vdup(counts, n);
        st = gs_ireduce_scatterv(t->comm, send, recv, c2, dt, op, &req);
        vtrash(c2, n);
        if (st == GS_OK)
            st = nb_finish(t, label, &req);
    } else if (use_ex(v)) {
        gs_coll_opts_t o = ex_opts();
        st = gs_reduce_scatterv_ex(t->comm, send, recv, counts, dt, op, &o);
    } else {
        st = gs_reduce_scatterv(t->comm, argbuf(send, total, v), argbuf(recv, mycount, v), counts,
                                dt, op);
    }
    if (skip_unsupported(t, label, st)) {
    } else if (call_ok(t, label, "gs_reduce_scatterv", st)) {
        struct mism m = {0};
        for (size_t i = 0; i < mycount; i++)
            check_value(&m, i, dt, tc_get(recv, i, dt), ref_reduce(n, myoff + i, seed, dt, op));
        finish_case(t, label, &m, mycount);
    }
    if (!is_inplace(v))
        free(recv);
    free(send);
    free(counts);
}

static void case_sendrecv(struct tctx *t, gs_dtype_t dt, size_t count, enum variant v)
{
    char label[256];
    uint32_t seq = t->seq++;
    uint64_t seed = g_opt.seed + seq;
    size_t es = dt_sizes[dt];
    int next = (t->rank + 1) % t->world;
    int prev = (t->rank + t->world - 1) % t->world;
    uint32_t tag = 1000u + seq;
    make_label(label, sizeof(label), COLL_SENDRECV, dt, -1, count, v, -1, seq);

    unsigned char *send = xmalloc(count * es);
    unsigned char *recv = xmalloc(count * es);
    fill_bytes(send, count, 0, t->rank, seed, dt);
    memset(recv, SENTINEL_BYTE, count * es);

    int ok;
    if (v == VAR_BLK) {
        /* Blocking send first: the receiver buffers unexpected messages. */
        ok = call_ok(t, label, "gs_send",
                     gs_send(t->comm, argbuf(send, count, v), count, dt, next, tag)) &&
             call_ok(t, label, "gs_recv",
                     gs_recv(t->comm, argbuf(recv, count, v), count, dt, prev, tag));
    } else {
        /*
         * Send posted first: operations run in submission order on the
         * worker, and a send never needs the receive to be posted first.
         */
        gs_request_t reqs[2] = {GS_REQUEST_NULL, GS_REQUEST_NULL};
        int src = v == VAR_ANY ? GS_ANY_SOURCE : prev;
        ok = call_ok(t, label, "gs_isend", gs_isend(t->comm, send, count, dt, next, tag, &reqs[0]));
        if (ok && !call_ok(t, label, "gs_irecv",
                           gs_irecv(t->comm, recv, count, dt, src, tag, &reqs[1]))) {
            ok = 0;
            t->dead = 1; /* the posted send can no longer be matched */
        }
        if (ok)
            ok = call_ok(t, label, "gs_waitall", gs_waitall(2, reqs));
        if (ok && (reqs[0] != GS_REQUEST_NULL || reqs[1] != GS_REQUEST_NULL)) {
            case_fail(t, label, "gs_waitall left a request handle set");
            ok = 0;
        }
    }
    if (ok) {
        struct mism m = {0};
        unsigned char exp[8];
        for (size_t i = 0; i < count; i++) {
            gen_bytes(exp, prev, i, seed, dt);
            check_bytes(&m, i, recv + i * es, exp, es);
        }
        finish_case(t, label, &m, count);
    }
    free(recv);
    free(send);
}

static void case_barrier(struct tctx *t, enum variant v)
{
    char label[256];
    uint32_t seq = t->seq++;
    make_label(label, sizeof(label), COLL_BARRIER, GS_DTYPE_F32, -1, 0, v, -1, seq);
    gs_status_t st;
    if (is_nb(v)) {
        gs_request_t req = GS_REQUEST_NULL;
        st = gs_ibarrier(t->comm, &req);
        if (st == GS_OK)
            st = nb_finish(t, label, &req);
    } else {
        st = gs_barrier(t->comm);
    }
    if (call_ok(t, label, "gs_barrier", st))
        case_pass(t, label);
}

/*
 * Barrier semantics: rank 0 enters 100 ms late, so every other rank must
 * spend at least 50 ms in the barrier (a barrier that does not wait fails).
 */
static void case_barrier_timing(struct tctx *t)
{
    char label[64];
    snprintf(label, sizeof(label), "barrier-timing case=%" PRIu32, t->seq++);
    if (!call_ok(t, label, "gs_barrier", gs_barrier(t->comm)))
        return;
    if (t->rank == 0) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    double t0 = tc_now_ms();
    if (!call_ok(t, label, "gs_barrier", gs_barrier(t->comm)))
        return;
    double waited = tc_now_ms() - t0;
    if (t->rank != 0 && t->world > 1 && waited < 50.0)
        case_fail(t, label, "returned after %.1f ms although rank 0 entered 100 ms late", waited);
    else
        case_pass(t, label);
}

/* ------------------------------------------------------------------ */
/* Drivers                                                             */
/* ------------------------------------------------------------------ */

static int coll_has_op(enum coll c)
{
    return c == COLL_ALLREDUCE || c == COLL_REDUCE || c == COLL_REDUCE_SCATTER ||
           c == COLL_REDUCE_SCATTERV;
}

static void run_one(struct tctx *t, enum coll c, gs_dtype_t dt, int op, size_t count,
                    enum variant v)
{
    switch (c) {
    case COLL_ALLREDUCE:
        case_allreduce(t, dt, (gs_op_t)op, count, v);
        break;
    case COLL_BROADCAST:
        case_broadcast(t, dt, count, v);
        break;
    case COLL_REDUCE:
        case_reduce(t, dt, (gs_op_t)op, count, v);
        break;
    case COLL_ALLGATHER:
        case_allgather(t, dt, count, v);
        break;
    case COLL_REDUCE_SCATTER:
        case_reduce_scatter(t, dt, (gs_op_t)op, count, v);
        break;
    case COLL_ALLTOALL:
        case_alltoall(t, dt, count, v);
        break;
    case COLL_GATHER:
    case COLL_SCATTER:
        case_rooted(t, c, dt, count, v);
        break;
    case COLL_ALLGATHERV:
        case_allgatherv(t, dt, count, v);
        break;
    case COLL_ALLTOALLV:
        case_alltoallv(t, dt, count, v);
        break;
    case COLL_REDUCE_SCATTERV:
        case_reduce_scatterv(t, dt, (gs_op_t)op, count, v);
        break;
    case COLL_SENDRECV:
        /* The library rejects a send to oneself ("copy locally"): no ring at world 1. */
        if (t->world > 1)
            case_sendrecv(t, dt, count, v);
        else
            t->skipped++;
        break;
    default:
        break;
    }
}

static void run_coll(struct tctx *t, enum coll c)
{
    if (c == COLL_BARRIER) {
        for (int it = 0; it < g_opt.iters && !t->dead; it++)
            for (int v = 0; v < VAR_NUM && !t->dead; v++)
                if ((coll_variants[c] & g_opt.variants) & VB(v))
                    case_barrier(t, (enum variant)v);
        if (!t->dead)
            case_barrier_timing(t);
        return;
    }
    for (int dt = 0; dt < GS_DTYPE_COUNT; dt++) {
        if (!(g_opt.dtypes & (1u << dt)))
            continue;
        for (int op = 0; op < GS_OP_COUNT; op++) {
            if (coll_has_op(c)) {
                if (!(g_opt.ops & (1u << op)))
                    continue;
                if (op == GS_OP_AVG && !tc_dtype_is_float((gs_dtype_t)dt))
                    continue;
                if (op_is_bitwise(op) && tc_dtype_is_float((gs_dtype_t)dt))
                    continue; /* refused (badinput_check asserts that) */
            } else if (op > 0) {
                break;
            }
            int nc = t->ncounts;
            size_t counts[MAX_COUNTS + 1];
            memcpy(counts, t->counts, sizeof(t->counts));
            if (g_opt.large && c == COLL_ALLREDUCE && dt == GS_DTYPE_F32)
                counts[nc++] = LARGE_COUNT;
            for (int ci = 0; ci < nc; ci++)
                for (int v = 0; v < VAR_NUM; v++) {
                    if (!((coll_variants[c] & g_opt.variants) & VB(v)))
                        continue;
                    /* The 16M case runs blocking and in place only. */
                    if (counts[ci] == LARGE_COUNT && is_nb((enum variant)v))
                        continue;
                    for (int it = 0; it < g_opt.iters; it++) {
                        if (t->dead)
                            return;
                        run_one(t, c, (gs_dtype_t)dt, coll_has_op(c) ? op : -1, counts[ci],
                                (enum variant)v);
                    }
                }
        }
    }
}

/* Allgather the parent ranks over @p sub and check them against @p expect. */
static void check_members(struct tctx *t, const char *label, gs_comm_t sub, const int32_t *expect,
                          int n)
{
    int32_t mine = t->rank;
    int32_t *all = xmalloc((size_t)n * sizeof(int32_t));
    if (call_ok(t, label, "gs_allgather(members)",
                gs_allgather(sub, &mine, all, 1, GS_DTYPE_I32))) {
        struct mism m = {0};
        for (int i = 0; i < n; i++)
            check_value(&m, (size_t)i, GS_DTYPE_I32, all[i], expect[i]);
        finish_case(t, label, &m, (size_t)n);
    }
    free(all);
}

/* Check size and rank of @p sub, then its membership. */
static void check_split(struct tctx *t, const char *label, gs_comm_t sub, int want_rank,
                        const int32_t *expect, int n)
{
    int r = -1, s = -1;
    if (!call_ok(t, label, "gs_comm_rank", gs_comm_rank(sub, &r)) ||
        !call_ok(t, label, "gs_comm_size", gs_comm_size(sub, &s)))
        return;
    if (r != want_rank || s != n) {
        case_fail(t, label, "rank/size %d/%d, expected %d/%d", r, s, want_rank, n);
        return;
    }
    check_members(t, label, sub, expect, n);
}

/*
 * gs_comm_create_group: only the members call. The even ranks make a group
 * while the odd ones go straight on; then every rank makes its row and its
 * column of a 2 x ceil(w/2) grid (a 2-D DeviceMesh's groups, overlapping,
 * each with its own tag), and a group of itself alone. Bad lists fail with
 * GS_ERR_INVALID_ARG and send nothing: the parent's next collective works.
 */
static void run_create_group(struct tctx *t)
{
    int w = t->world, me = t->rank;
    int *ranks = xmalloc((size_t)w * sizeof(int));
    int32_t *expect = xmalloc((size_t)w * sizeof(int32_t));
    gs_comm_t sub;
    int n;

    if (me % 2 == 0) {
        n = 0;
        for (int r = 0; r < w; r += 2) {
            ranks[n] = r;
            expect[n++] = r;
        }
        sub = GS_COMM_NULL;
        if (call_ok(t, "create_group evens", "gs_comm_create_group",
                    gs_comm_create_group(t->comm, n, ranks, 1, &sub))) {
            check_split(t, "create_group evens", sub, me / 2, expect, n);
            call_ok(t, "create_group evens", "gs_comm_destroy", gs_comm_destroy(sub));
        }
    }
    if (t->dead)
        goto out;
    /* Rows (r / 2 equal, tag 2) and columns (r % 2 equal, tag 3), in that order. */
    for (int dim = 0; dim < 2 && !t->dead; dim++) {
        const char *label = dim == 0 ? "create_group row" : "create_group column";
        int myidx = -1;

        n = 0;
        for (int r = 0; r < w; r++) {
            if (dim == 0 ? (r / 2 == me / 2) : (r % 2 == me % 2)) {
                if (r == me)
                    myidx = n;
                ranks[n] = r;
                expect[n++] = r;
            }
        }
        if (call_ok(t, label, "gs_comm_create_group",
                    gs_comm_create_group(t->comm, n, ranks, 2u + (uint32_t)dim, &sub))) {
            check_split(t, label, sub, myidx, expect, n);
            call_ok(t, label, "gs_comm_destroy", gs_comm_destroy(sub));
        }
    }
    if (t->dead)
        goto out;
    ranks[0] = me;
    expect[0] = me;
    if (call_ok(t, "create_group self", "gs_comm_create_group",
                gs_comm_create_group(t->comm, 1, ranks, 4, &sub))) {
        check_split(t, "create_group self", sub, 0, expect, 1);
        call_ok(t, "create_group self", "gs_comm_destroy", gs_comm_destroy(sub));
    }
    if (w >= 2) {
        /* Unsorted, repeated, without this rank, out of range, empty. */
        static const char *const what[] = {"unsorted", "repeated", "without me", "out of range",
                                           "empty"};
        int bad = 0;

        for (int c = 0; c < 5; c++) {
            int nr = 2;
            gs_status_t st;

            sub = (gs_comm_t)&sub;
            ranks[0] = me;
            ranks[1] = me; /* repeated */
            if (c == 0) {  /* decreasing, with this rank */
                ranks[0] = me == 0 ? 1 : me;
                ranks[1] = me == 0 ? 0 : me - 1;
            } else if (c == 2) {
                ranks[0] = (me + 1) % w;
                nr = 1;
            } else if (c == 3) {
                ranks[1] = w;
            } else if (c == 4) {
                nr = 0;
            }
            st = gs_comm_create_group(t->comm, nr, ranks, 5, &sub);
            if (st != GS_ERR_INVALID_ARG || sub != (gs_comm_t)&sub) {
                case_fail(t, "create_group bad list", "%s list: %s (%s), newcomm %s", what[c],
                          gs_status_name(st), gs_last_error(),
                          sub == (gs_comm_t)&sub ? "untouched" : "written");
                bad = 1;
            }
        }
        if (!bad)
            case_pass(t, "create_group bad list");
        /* Nothing was sent: the parent's next collective still matches up. */
        for (int i = 0; i < w; i++)
            expect[i] = i;
        check_members(t, "create_group bad list then allgather", t->comm, expect, w);
    }
out:
    free(ranks);
    free(expect);
}

static void run_split(struct tctx *t)
{
    int w = t->world, me = t->rank;
    int32_t *expect = xmalloc((size_t)w * sizeof(int32_t));
    gs_comm_t sub;
    int n;

    /* Parity split, key = rank: members in parent order. */
    sub = (gs_comm_t)&sub;
    if (call_ok(t, "split parity", "gs_comm_split", gs_comm_split(t->comm, me % 2, me, &sub))) {
        n = 0;
        for (int r = me % 2; r < w; r += 2)
            expect[n++] = r;
        check_split(t, "split parity", sub, me / 2, expect, n);
        call_ok(t, "split parity", "gs_comm_destroy", gs_comm_destroy(sub));
    }
    if (t->dead)
        goto out;

    /* One color, key = -rank: order reversed. */
    if (call_ok(t, "split reversed", "gs_comm_split", gs_comm_split(t->comm, 0, -me, &sub))) {
        for (int i = 0; i < w; i++)
            expect[i] = w - 1 - i;
        check_split(t, "split reversed", sub, w - 1 - me, expect, w);
        call_ok(t, "split reversed", "gs_comm_destroy", gs_comm_destroy(sub));
    }
    if (t->dead)
        goto out;

    /* Equal keys: parent order breaks ties. Rank 0 passes color -1. */
    sub = (gs_comm_t)&sub; /* must be overwritten with GS_COMM_NULL */
    if (call_ok(t, "split color-1", "gs_comm_split",
                gs_comm_split(t->comm, me == 0 ? -1 : 7, 0, &sub))) {
        if (me == 0) {
            if (sub != GS_COMM_NULL)
                case_fail(t, "split color-1", "color -1 did not give GS_COMM_NULL");
            else
                case_pass(t, "split color-1");
        } else {
            for (int i = 0; i < w - 1; i++)
                expect[i] = i + 1;
            check_split(t, "split color-1", sub, me - 1, expect, w - 1);
            call_ok(t, "split color-1", "gs_comm_destroy", gs_comm_destroy(sub));
        }
    }
    if (t->dead)
        goto out;

    /* A split of a split, with an allreduce on the grandchild. */
    gs_comm_t half = GS_COMM_NULL, quarter = GS_COMM_NULL;
    if (call_ok(t, "split nested", "gs_comm_split", gs_comm_split(t->comm, me % 2, me, &half))) {
        int hr = -1;
        (void)gs_comm_rank(half, &hr);
        if (call_ok(t, "split nested", "gs_comm_split",
                    gs_comm_split(half, hr % 2, -hr, &quarter))) {
            int64_t one = me, sum = -1, want = 0;
            for (int r = 0; r < w; r++)
                if (r % 2 == me % 2 && (r / 2) % 2 == hr % 2)
                    want += r;
            if (call_ok(t, "split nested", "gs_allreduce",
                        gs_allreduce(quarter, &one, &sum, 1, GS_DTYPE_I64, GS_OP_SUM))) {
                if (sum != want)
                    case_fail(t, "split nested",
                              "sum of parent ranks %" PRId64 ", expected %" PRId64, sum, want);
                else
                    case_pass(t, "split nested");
            }
            call_ok(t, "split nested", "gs_comm_destroy", gs_comm_destroy(quarter));
        }
        call_ok(t, "split nested", "gs_comm_destroy", gs_comm_destroy(half));
    }
    if (t->dead)
        goto out;
    run_create_group(t);
out:
    free(expect);
}

/* Collectives on one communicator, for the two-thread test. */
static void *multicomm_thread(void *arg)
{
    struct tctx *t = arg;
    static const size_t counts[] = {1, 7, 4097, 100003};
    for (int it = 0; it < 3 * g_opt.iters && !t->dead; it++)
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]) && !t->dead; ci++) {
            size_t n = counts[ci];
            enum variant v = it % 2 ? VAR_NB : VAR_BLK;
            case_allreduce(t, GS_DTYPE_F32, GS_OP_SUM, n, v);
            if (!t->dead)
                case_allreduce(t, GS_DTYPE_I32, GS_OP_MAX, n, VAR_INPLACE);
            if (!t->dead)
                case_allgather(t, GS_DTYPE_U8, n, VAR_BLK);
            if (!t->dead)
                case_broadcast(t, GS_DTYPE_F64, n, VAR_NB);
            if (!t->dead && t->world > 1)
                case_sendrecv(t, GS_DTYPE_I64, n, VAR_NB);
        }
    return NULL;
}

static void run_multicomm(struct tctx *t)
{
    struct tctx a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    a.name = "sub";
    b.name = "dup";
    if (!call_ok(t, "multicomm", "gs_comm_split(parity)",
                 gs_comm_split(t->comm, t->rank % 2, t->rank, &a.comm)))
        return;
    if (!call_ok(t, "multicomm", "gs_comm_split(dup)",
                 gs_comm_split(t->comm, 0, t->world - t->rank, &b.comm))) {
        (void)gs_comm_destroy(a.comm);
        return;
    }
    (void)gs_comm_rank(a.comm, &a.rank);
    (void)gs_comm_size(a.comm, &a.world);
    (void)gs_comm_rank(b.comm, &b.rank);
    (void)gs_comm_size(b.comm, &b.world);
    a.seq = b.seq = 0;

    pthread_t ta, tb;
    int ea = pthread_create(&ta, NULL, multicomm_thread, &a);
    int eb = pthread_create(&tb, NULL, multicomm_thread, &b);
    if (ea == 0)
        pthread_join(ta, NULL);
    if (eb == 0)
        pthread_join(tb, NULL);
    if (ea || eb)
        case_fail(t, "multicomm", "pthread_create failed");

    call_ok(&a, "multicomm", "gs_comm_destroy", gs_comm_destroy(a.comm));
    call_ok(&b, "multicomm", "gs_comm_destroy", gs_comm_destroy(b.comm));
    t->passed += a.passed + b.passed;
    t->failed += a.failed + b.failed;
    t->skipped += a.skipped + b.skipped;
}

/* Counters, gs_waitall over mixed operations, gs_test polling, async error. */
static void run_misc(struct tctx *t)
{
    char label[64];

    /* waitall over four different operations in flight at once. */
    snprintf(label, sizeof(label), "waitall case=%" PRIu32, t->seq);
    uint64_t seed = g_opt.seed + t->seq++;
    int root = t->world - 1;
    size_t n = 1000;
    float *ar = xmalloc(n * sizeof(float));
    int32_t *ag = xmalloc(n * (size_t)t->world * sizeof(int32_t));
    int32_t *agsend = xmalloc(n * sizeof(int32_t));
    double *bc = xmalloc(n * sizeof(double));
    fill_values(ar, n, 0, t->rank, seed, GS_DTYPE_F32, GS_OP_SUM, t->world);
    fill_values(agsend, n, 0, t->rank, seed, GS_DTYPE_I32, GS_OP_MAX, t->world);
    fill_values(bc, n, 0, t->rank, seed, GS_DTYPE_F64, GS_OP_MAX, t->world);
    gs_request_t reqs[4] = {GS_REQUEST_NULL, GS_REQUEST_NULL, GS_REQUEST_NULL, GS_REQUEST_NULL};
    int ok = call_ok(t, label, "gs_iallreduce",
                     gs_iallreduce(t->comm, ar, ar, n, GS_DTYPE_F32, GS_OP_SUM, &reqs[0])) &&
             call_ok(t, label, "gs_iallgather",
                     gs_iallgather(t->comm, agsend, ag, n, GS_DTYPE_I32, &reqs[1])) &&
             call_ok(t, label, "gs_ibroadcast",
                     gs_ibroadcast(t->comm, bc, n, GS_DTYPE_F64, root, &reqs[2])) &&
             call_ok(t, label, "gs_ibarrier", gs_ibarrier(t->comm, &reqs[3]));
    if (ok && call_ok(t, label, "gs_waitall", gs_waitall(4, reqs))) {
        struct mism m = {0};
        for (int i = 0; i < 4; i++)
            if (reqs[i] != GS_REQUEST_NULL)
                check_value(&m, (size_t)i, GS_DTYPE_I32, 1, 0);
        for (size_t i = 0; i < n; i++) {
            check_value(&m, i, GS_DTYPE_F32, ar[i],
                        ref_reduce(t->world, i, seed, GS_DTYPE_F32, GS_OP_SUM));
            check_value(&m, i, GS_DTYPE_F64, bc[i],
                        gen_value(root, i, seed, GS_DTYPE_F64, GS_OP_MAX, t->world));
            for (int r = 0; r < t->world; r++)
                check_value(&m, (size_t)r * n + i, GS_DTYPE_I32, ag[(size_t)r * n + i],
                            gen_value(r, i, seed, GS_DTYPE_I32, GS_OP_MAX, t->world));
        }
        finish_case(t, label, &m, n);
    } else if (!ok) {
        t->dead = 1; /* posted requests cannot be matched any more */
    }
    free(ar);
    free(ag);
    free(agsend);
    free(bc);
    if (t->dead)
        return;

    /* gs_wait on a null handle and gs_test polling to completion. */
    gs_request_t nreq = GS_REQUEST_NULL;
    if (call_ok(t, "wait-null", "gs_wait(GS_REQUEST_NULL)", gs_wait(&nreq)))
        case_pass(t, "wait-null");
    gs_request_t req = GS_REQUEST_NULL;
    if (call_ok(t, "test-poll", "gs_ibarrier", gs_ibarrier(t->comm, &req))) {
        double deadline = tc_now_ms() + 60000.0;
        gs_status_t st = GS_INPROGRESS;
        long polls = 0;
        while (st == GS_INPROGRESS && tc_now_ms() < deadline) {
            st = gs_test(&req);
            polls++;
        }
        if (st == GS_INPROGRESS) {
            case_fail(t, "test-poll", "gs_test still in progress after 60 s (%ld polls)", polls);
            t->dead = 1;
            return;
        }
        if (call_ok(t, "test-poll", "gs_test", st)) {
            if (req != GS_REQUEST_NULL)
                case_fail(t, "test-poll", "gs_test left the handle set");
            else
                case_pass(t, "test-poll");
        }
    }
    if (t->dead)
        return;

    /* Counters after all that traffic; a short size writes only what fits. */
    gs_counters_t c;
    memset(&c, 0, sizeof(c));
    c.size = sizeof(c);
    if (call_ok(t, "counters", "gs_comm_counters", gs_comm_counters(t->comm, &c))) {
        if (c.ops_completed == 0)
            case_fail(t, "counters", "ops_completed is 0 after traffic");
        else if (t->world > 1 && (c.bytes_sent == 0 || c.bytes_received == 0 || c.msgs_sent == 0 ||
                                  c.msgs_received == 0))
            case_fail(t, "counters",
                      "zero after traffic: bytes_sent %" PRIu64 " bytes_received %" PRIu64
                      " msgs_sent %" PRIu64 " msgs_received %" PRIu64,
                      c.bytes_sent, c.bytes_received, c.msgs_sent, c.msgs_received);
        else
            case_pass(t, "counters");
    }
    gs_counters_t s;
    memset(&s, 0xff, sizeof(s));
    s.size = offsetof(gs_counters_t, bytes_received);
    if (call_ok(t, "counters-size", "gs_comm_counters", gs_comm_counters(t->comm, &s))) {
        if (s.bytes_received != UINT64_MAX || s.busy_ns != UINT64_MAX)
            case_fail(t, "counters-size", "wrote fields beyond the caller's size");
        else if (t->world > 1 && s.bytes_sent == UINT64_MAX)
            case_fail(t, "counters-size", "did not write bytes_sent although it fits");
        else
            case_pass(t, "counters-size");
    }

    gs_status_t aerr = GS_ERR_INTERNAL;
    if (call_ok(t, "async-error", "gs_comm_get_async_error",
                gs_comm_get_async_error(t->comm, &aerr))) {
        if (aerr != GS_OK)
            case_fail(t, "async-error", "healthy communicator reports %s", gs_status_name(aerr));
        else
            case_pass(t, "async-error");
    }
}

/* ------------------------------------------------------------------ */
/* Arguments                                                           */
/* ------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: coll_check [--colls all|LIST] [--dtypes all|LIST] [--ops all|LIST]\n"
            "                  [--counts N,w-1,w+1,...|none] [--variants all|LIST] [--algo NAME]\n"
            "                  [--iters K] [--large] [--seed S] [--verbose]\n"
            "colls: allreduce broadcast reduce allgather reduce_scatter alltoall gather\n"
            "       scatter allgatherv alltoallv reduce_scatterv barrier sendrecv split\n"
            "       multicomm misc (default: all but gather..reduce_scatterv)\n"
            "dtypes: f32 f64 f16 bf16 i8 u8 i32 i64\n"
            "ops: sum prod min max avg band bor bxor (default: all but the bitwise ones)\n"
            "variants: blk inplace nb nbinplace any ex\n");
}

/* Parse a comma list of names from @p names into a bit mask; -1 on an unknown one. */
static long parse_mask(const char *arg, const char *const *names, int n)
{
    if (strcmp(arg, "all") == 0)
        return (long)((1u << n) - 1u);
    long mask = 0;
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", arg);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int i;
        for (i = 0; i < n; i++)
            if (strcmp(tok, names[i]) == 0)
                break;
        if (i == n) {
            fprintf(stderr, "coll_check: unknown name '%s'\n", tok);
            return -1;
        }
        mask |= 1L << i;
    }
    return mask;
}

static int parse_args(int argc, char **argv)
{
#define CC_ALGO_NAME_ROW(_name, _value, _str) [_value] = _str,
    static const char *const algo_names[GS_ALGO_COUNT] = {GS_ALGO_MAP(CC_ALGO_NAME_ROW)};
#undef CC_ALGO_NAME_ROW
    const char *counts = "0,1,7,w-1,w+1,1000003";
    long m;

    g_opt.colls = COLLS_DEFAULT;
    g_opt.dtypes = (1u << GS_DTYPE_COUNT) - 1u;
    g_opt.ops = OPS_DEFAULT;
    g_opt.variants = (1u << VAR_NUM) - 1u;
    g_opt.iters = 1;
    g_opt.seed = 12345;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--large") == 0) {
            g_opt.large = 1;
            continue;
        }
        if (strcmp(a, "--verbose") == 0) {
            g_opt.verbose = 1;
            continue;
        }
        if (strcmp(a, "--help") == 0 || !val) {
            usage();
            return -1;
        }
        i++;
        if (strcmp(a, "--colls") == 0) {
            if ((m = parse_mask(val, coll_names, COLL_NUM)) < 0)
                return -1;
            g_opt.colls = (unsigned)m;
        } else if (strcmp(a, "--dtypes") == 0) {
            if ((m = parse_mask(val, dt_names, GS_DTYPE_COUNT)) < 0)
                return -1;
            g_opt.dtypes = (unsigned)m;
        } else if (strcmp(a, "--ops") == 0) {
            if ((m = parse_mask(val, op_names, GS_OP_COUNT)) < 0)
                return -1;
            g_opt.ops = (unsigned)m;
        } else if (strcmp(a, "--variants") == 0) {
            if ((m = parse_mask(val, var_names, VAR_NUM)) < 0)
                return -1;
            g_opt.variants = (unsigned)m;
        } else if (strcmp(a, "--algo") == 0) {
            if ((m = parse_mask(val, algo_names, GS_ALGO_COUNT)) < 0 || (m & (m - 1)) != 0)
                return -1;
            g_opt.has_algo = 1;
            g_opt.algo = (gs_algo_t)__builtin_ctzl((unsigned long)m);
        } else if (strcmp(a, "--counts") == 0) {
            counts = val;
        } else if (strcmp(a, "--iters") == 0) {
            g_opt.iters = atoi(val);
            if (g_opt.iters < 1 || g_opt.iters > 100000)
                return -1;
        } else if (strcmp(a, "--seed") == 0) {
            g_opt.seed = strtoull(val, NULL, 0);
        } else {
            fprintf(stderr, "coll_check: unknown option %s\n", a);
            usage();
            return -1;
        }
    }
    if (strcmp(counts, "none") != 0) {
        char buf[512];
        snprintf(buf, sizeof(buf), "%s", counts);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (g_opt.ncounts == MAX_COUNTS)
                return -1;
            snprintf(g_opt.count_spec[g_opt.ncounts++], sizeof(g_opt.count_spec[0]), "%s", tok);
        }
    }
    return 0;
}

/* Resolve "w-1", "w", "w+1" and numbers against the world size; -1 on a bad one. */
static int resolve_counts(struct tctx *t)
{
    for (int i = 0; i < g_opt.ncounts; i++) {
        const char *s = g_opt.count_spec[i];
        long long v;
        if (s[0] == 'w') {
            v = t->world + (s[1] ? strtoll(s + 1, NULL, 10) : 0);
        } else {
            char *end;
            v = strtoll(s, &end, 10);
            if (*end)
                return -1;
        }
        if (v < 0)
            return -1;
        t->counts[t->ncounts++] = (size_t)v;
    }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (parse_args(argc, argv) != 0)
        return 2;

    struct tctx t;
    memset(&t, 0, sizeof(t));
    t.name = "world";
    gs_status_t st = gs_comm_init_env(&t.comm, NULL);
    if (st != GS_OK) {
        printf("FAIL coll_check: gs_comm_init_env returned %s: %s\n", gs_status_name(st),
               gs_last_error());
        return 1;
    }
    if (gs_comm_rank(t.comm, &t.rank) != GS_OK || gs_comm_size(t.comm, &t.world) != GS_OK) {
        printf("FAIL coll_check: gs_comm_rank/size: %s\n", gs_last_error());
        return 1;
    }
    if (resolve_counts(&t) != 0) {
        fprintf(stderr, "coll_check: bad --counts\n");
        return 2;
    }
    double t0 = tc_now_ms();

    for (int c = 0; c < COLL_NUM && !t.dead; c++) {
        if (!(g_opt.colls & (1u << c)))
            continue;
        double tc = tc_now_ms();
        if (c == COLL_SPLIT)
            run_split(&t);
        else if (c == COLL_MULTICOMM)
            run_multicomm(&t);
        else if (c == COLL_MISC)
            run_misc(&t);
        else
            run_coll(&t, (enum coll)c);
        if (g_opt.verbose && t.rank == 0)
            printf("rank 0: %s done in %.0f ms\n", coll_names[c], tc_now_ms() - tc);
    }

    int64_t mine[3] = {t.passed, t.failed, t.skipped}, tot[3] = {0, 0, 0};
    int exit_code;
    if (t.dead) {
        printf("coll_check rank %d: stopped after a communicator error: %ld passed, %ld failed\n",
               t.rank, t.passed, t.failed);
        exit_code = 1;
    } else if ((st = gs_allreduce(t.comm, mine, tot, 3, GS_DTYPE_I64, GS_OP_SUM)) != GS_OK) {
        printf("coll_check rank %d: final all-reduce of failure counts failed (%s: %s): "
               "%ld passed, %ld failed\n",
               t.rank, gs_status_name(st), gs_last_error(), t.passed, t.failed);
        exit_code = 1;
    } else {
        if (t.failed)
            printf("coll_check rank %d: %ld passed, %ld failed\n", t.rank, t.passed, t.failed);
        if (t.rank == 0)
            printf("coll_check world=%d: %" PRId64 " passed, %" PRId64 " failed, %" PRId64
                   " skipped (rank-cases over all ranks) in %.1f s\n",
                   t.world, tot[0], tot[1], tot[2], (tc_now_ms() - t0) / 1e3);
        exit_code = tot[1] ? 1 : 0;
    }
    st = gs_comm_destroy(t.comm);
    if (st != GS_OK && !t.dead) {
        printf("FAIL rank %d: gs_comm_destroy returned %s: %s\n", t.rank, gs_status_name(st),
               gs_last_error());
        exit_code = 1;
    }
    return exit_code;
}
