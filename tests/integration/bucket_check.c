/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gradient bucketing (gradsync/bucket.h) across real ranks, run under gsrun.
 *
 *   gsrun -n N bucket_check [--verbose]          every case below
 *   gsrun -n N bucket_check straggler            the last rank never marks one tensor
 *
 * Every case registers many tensors of odd sizes (0 and 1 included), marks
 * them ready from three threads per rank in a random order that differs by
 * rank and step (with short random pauses, so the ranks' launch loops run
 * on different threads at different times), runs several steps, and
 * compares each tensor with a plain gs_allreduce of the same input,
 * tensor by tensor:
 *   sum     f32, i32, f64, i64, i8 with small integer inputs: exact. Three
 *           layouts: separate buffers (fusion copies, rebuild on), one flat
 *           buffer in forward order (every bucket in place, rebuild off),
 *           the same buffer with the tensors registered in a shuffled memory
 *           order (not contiguous in order: copies).
 *   avg     f32, f64, f16, bf16 with fractional inputs: within 1e-5 (f32),
 *           1e-12 (f64), 1e-2 (f16, bf16) relative; the rebuild must happen.
 *   codec   int8 with error feedback, avg, f32 and bf16 tensors: bit for bit
 *           equal to gs_allreduce_ex with the same codec on each fused bucket
 *           (built from gs_bucketer_bucket_info/locate) with a reference
 *           residual per bucket, over five steps (the residuals carry over,
 *           and restart with the rebuild).
 *   errors  every argument error of the API (create, add, ready twice,
 *           unknown id, add after the first step, avg or a codec on
 *           integers, NULL pointers), each changing nothing; wait with
 *           unmarked tensors names them and returns at once, and the step
 *           then completes correctly once they are marked.
 * straggler: step 1 is normal; in step 2 the last rank leaves tensor 10
 *   unmarked. Its gs_bucketer_wait() fails at once with GS_ERR_INVALID_ARG
 *   naming tensor 10; the other ranks' wait fails with GS_ERR_TIMEOUT or
 *   GS_ERR_PEER_FAILED by their deadline (GS_TIMEOUT_MS + 3 s at most),
 *   never hangs; every rank then destroys its bucketer and communicator.
 *   Each rank prints "RESULT rank=R status=NAME t_ms=T" (run_bucket.sh
 *   checks them).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gradsync/bucket.h>
#include <gradsync/compress.h>
#include <gradsync/gradsync.h>

#include "check_report.h"
#include "tc_clock.h"
#include "tc_coll_data.h"

#define NTHREADS 3
#define MAXT 96

static gs_comm_t g_comm;
static int g_size;

typedef enum { LAYOUT_SEPARATE, LAYOUT_FLAT, LAYOUT_SHUFFLED } layout_t;

/* The registered tensors of one case and their reference copies. */
typedef struct tset {
    size_t n;
    void *ptr[MAXT];
    void *ref[MAXT];
    size_t count[MAXT];
    gs_dtype_t dtype[MAXT];
    void *flat; /* the one buffer of the flat layouts */
} tset_t;

/* Element i of tensor id on this rank at step s: small integers, or k/256 with frac. */
static void put(void *buf, gs_dtype_t dt, size_t i, int step, size_t id, int frac)
{
    const uint64_t h = tc_mix64(((uint64_t)(unsigned)g_rank << 48) ^ ((uint64_t)step << 36) ^
                                ((uint64_t)id << 24) ^ i);
    const int k = frac ? (int)(h % 2001) - 1000 : (int)(h % 17) - 8;
    const float f = frac ? (float)k / 256.0f : (float)k;

    switch (dt) {
    case GS_DTYPE_F32:
        ((float *)buf)[i] = f;
        break;
    case GS_DTYPE_F64:
        ((double *)buf)[i] = (double)f;
        break;
    case GS_DTYPE_F16:
        ((uint16_t *)buf)[i] = gs_km_f32_to_f16(f);
        break;
    case GS_DTYPE_BF16:
        ((uint16_t *)buf)[i] = gs_km_f32_to_bf16(f);
        break;
    case GS_DTYPE_I32:
        ((int32_t *)buf)[i] = k;
        break;
    case GS_DTYPE_I64:
        ((int64_t *)buf)[i] = (int64_t)k * 1000000007ll;
        break;
    default:
        ((int8_t *)buf)[i] = (int8_t)k;
        break;
    }
}

static double get(const void *buf, gs_dtype_t dt, size_t i)
{
    switch (dt) {
    case GS_DTYPE_F32:
        return ((const float *)buf)[i];
    case GS_DTYPE_F64:
        return ((const double *)buf)[i];
    case GS_DTYPE_F16:
        return gs_km_f16_to_f32(((const uint16_t *)buf)[i]);
    case GS_DTYPE_BF16:
        return gs_km_bf16_to_f32(((const uint16_t *)buf)[i]);
    default:
        return 0;
    }
}

static const size_t k_sizes[] = {1,  3,   0,    7,  31,   100, 257, 999, 4099, 13, 2,
                                 65, 511, 1023, 17, 5000, 33,  1,   129, 64,   0};

/* n tensors, dtypes from @p dts in runs of 1..4, laid out per @p layout. */
static void tset_make(tset_t *ts, size_t n, const gs_dtype_t *dts, size_t ndts, layout_t layout)
{
    size_t off[MAXT], total = 0, run = 0, d = 0, perm[MAXT];

    memset(ts, 0, sizeof(*ts));
    ts->n = n;
    for (size_t id = 0; id < n; id++) {
        if (run == 0) {
            run = 1 + tc_mix64(id * 31 + 7) % 4;
            d = (id == 0) ? 0 : (d + 1) % ndts;
        }
        run--;
        ts->dtype[id] = dts[d];
        ts->count[id] = k_sizes[(id * 7 + 3) % (sizeof(k_sizes) / sizeof(k_sizes[0]))];
        perm[id] = id;
    }
    if (layout == LAYOUT_SHUFFLED) { /* the same permutation on every rank */
        for (size_t i = n; i > 1; i--) {
            const size_t j = tc_mix64(i) % i, x = perm[i - 1];

            perm[i - 1] = perm[j];
            perm[j] = x;
        }
    }
    /* Memory order perm[0], perm[1], ...; a dtype change re-aligns to 64 bytes. */
    for (size_t k = 0; k < n; k++) {
        const size_t id = perm[k];

        if ((k > 0) && (ts->dtype[id] != ts->dtype[perm[k - 1]])) {
            total = (total + 63) / 64 * 64;
        }
        off[id] = total;
        total += ts->count[id] * tc_dtype_size(ts->dtype[id]);
    }
    if (layout != LAYOUT_SEPARATE) {
        ts->flat = aligned_alloc(64, (total + 64) / 64 * 64);
    }
    for (size_t id = 0; id < n; id++) {
        const size_t bytes = ts->count[id] * tc_dtype_size(ts->dtype[id]) + 8;

        ts->ptr[id] = (layout == LAYOUT_SEPARATE) ? malloc(bytes) : (char *)ts->flat + off[id];
        ts->ref[id] = malloc(bytes);
    }
}

static void tset_free(tset_t *ts)
{
    for (size_t id = 0; id < ts->n; id++) {
        if (ts->flat == NULL) {
            free(ts->ptr[id]);
        }
        free(ts->ref[id]);
    }
    free(ts->flat);
}

static void tset_fill(tset_t *ts, int step, int frac)
{
    for (size_t id = 0; id < ts->n; id++) {
        for (size_t i = 0; i < ts->count[id]; i++) {
            put(ts->ptr[id], ts->dtype[id], i, step, id, frac);
        }
        memcpy(ts->ref[id], ts->ptr[id], ts->count[id] * tc_dtype_size(ts->dtype[id]));
    }
}

/* ready() from NTHREADS threads, each over a slice of a random order. */
typedef struct marker {
    gs_bucketer_t b;
    size_t ids[MAXT];
    size_t n;
    uint64_t seed;
    int errors;
} marker_t;

static void *mark_thread(void *arg)
{
    marker_t *m = arg;

    for (size_t k = 0; k < m->n; k++) {
        m->seed = tc_mix64(m->seed);
        if ((m->seed % 4) == 0) {
            usleep((useconds_t)(m->seed % 300));
        }
        if (gs_bucketer_ready(m->b, m->ids[k]) != GS_OK) {
            m->errors++;
        }
    }
    return NULL;
}

/* Mark every tensor but @p skip (or all with skip >= n) from several threads. */
static int mark_all(gs_bucketer_t b, size_t n, int step, size_t skip)
{
    size_t order[MAXT], m = 0;
    marker_t mk[NTHREADS];
    pthread_t th[NTHREADS];
    int errors = 0;

    for (size_t id = 0; id < n; id++) {
        if (id != skip) {
            order[m++] = id;
        }
    }
    for (size_t i = m; i > 1; i--) {
        const size_t j =
            tc_mix64(((uint64_t)(unsigned)g_rank << 32) ^ ((uint64_t)step << 16) ^ i) % i;
        const size_t x = order[i - 1];

        order[i - 1] = order[j];
        order[j] = x;
    }
    for (int k = 0; k < NTHREADS; k++) {
        memset(&mk[k], 0, sizeof(mk[k]));
        mk[k].b = b;
        mk[k].seed = (uint64_t)(g_rank * 1000 + step * 10 + k);
        for (size_t i = (size_t)k; i < m; i += NTHREADS) {
            mk[k].ids[mk[k].n++] = order[i];
        }
        pthread_create(&th[k], NULL, mark_thread, &mk[k]);
    }
    for (int k = 0; k < NTHREADS; k++) {
        pthread_join(th[k], NULL);
        errors += mk[k].errors;
    }
    return errors;
}

static gs_bucketer_t make_bucketer(gs_op_t op, int rebuild, const gs_codec_config_t *codec)
{
    gs_bucketer_opts_t o = GS_BUCKETER_OPTS_INIT;
    gs_bucketer_t b = GS_BUCKETER_NULL;
    gs_status_t st;

    o.op = op;
    o.first_bucket_bytes = 1024;
    o.bucket_bytes = 8192;
    o.rebuild = rebuild;
    o.codec = codec;
    st = gs_bucketer_create(g_comm, &o, &b);
    if (st != GS_OK) {
        fail("create", "%s: %s", gs_status_name(st), gs_last_error());
    }
    return b;
}

/* Compare tensor id with its reference: exact for sums, relative tolerance for avg. */
static void compare(const char *label, const tset_t *ts, size_t id, int step, int exact)
{
    const gs_dtype_t dt = ts->dtype[id];
    const double tol = (dt == GS_DTYPE_F64) ? 1e-12 : (dt == GS_DTYPE_F32) ? 1e-5 : 1e-2;

    if (exact) {
        if (memcmp(ts->ptr[id], ts->ref[id], ts->count[id] * tc_dtype_size(dt)) != 0) {
            fail(label, "step %d: tensor %zu (%zu elements) differs from gs_allreduce", step, id,
                 ts->count[id]);
            return;
        }
        pass(label);
        return;
    }
    for (size_t i = 0; i < ts->count[id]; i++) {
        const double got = get(ts->ptr[id], dt, i), want = get(ts->ref[id], dt, i);
        const double err = (got > want) ? got - want : want - got;
        const double mag = (want < 0) ? -want : want;

        if (err > tol * ((mag > 1) ? mag : 1)) {
            fail(label, "step %d: tensor %zu element %zu: %.9g, gs_allreduce gives %.9g", step, id,
                 i, got, want);
            return;
        }
    }
    pass(label);
}

/* A plain case: several steps of bucketed sum or avg against per-tensor gs_allreduce. */
static void run_plain(const char *label, layout_t layout, gs_op_t op, int rebuild,
                      const gs_dtype_t *dts, size_t ndts, size_t n, int steps)
{
    const int frac = (op == GS_OP_AVG);
    gs_bucketer_stats_t st = GS_BUCKETER_STATS_INIT;
    tset_t ts;
    gs_bucketer_t b;
    size_t id;
    gs_status_t s;

    tset_make(&ts, n, dts, ndts, layout);
    b = make_bucketer(op, rebuild, NULL);
    if (b == GS_BUCKETER_NULL) {
        tset_free(&ts);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        s = gs_bucketer_add(b, ts.ptr[i], ts.count[i], ts.dtype[i], &id);
        if ((s != GS_OK) || (id != i)) {
            fail(label, "add %zu: %s: %s", i, gs_status_name(s), gs_last_error());
        }
    }
    for (int step = 0; step < steps; step++) {
        tset_fill(&ts, step, frac);
        if (mark_all(b, n, step, n) != 0) {
            fail(label, "step %d: a ready() call failed: %s", step, gs_last_error());
        }
        s = gs_bucketer_wait(b);
        if (s != GS_OK) {
            fail(label, "step %d: wait: %s: %s", step, gs_status_name(s), gs_last_error());
            break;
        }
        for (size_t i = 0; i < n; i++) {
            s = gs_allreduce(g_comm, ts.ref[i], ts.ref[i], ts.count[i], ts.dtype[i], op);
            if (s != GS_OK) {
                fail(label, "reference all-reduce of tensor %zu: %s", i, gs_last_error());
            }
        }
        for (size_t i = 0; i < n; i++) {
            compare(label, &ts, i, step, !frac);
        }
    }
    if (gs_bucketer_stats(b, &st) != GS_OK) {
        fail(label, "stats: %s", gs_last_error());
    }
    if ((st.steps != (uint64_t)steps) || (st.failed_steps != 0) || (st.buckets < 4) ||
        (st.tensors != n)) {
        fail(label, "stats: steps %llu (failed %llu), %llu buckets, %llu tensors",
             (unsigned long long)st.steps, (unsigned long long)st.failed_steps,
             (unsigned long long)st.buckets, (unsigned long long)st.tensors);
    }
    if ((layout == LAYOUT_FLAT) && !rebuild &&
        ((st.inplace_buckets != st.buckets) || (st.fusion_bytes != 0))) {
        fail(label, "flat forward layout: %llu of %llu buckets in place, %llu fusion bytes",
             (unsigned long long)st.inplace_buckets, (unsigned long long)st.buckets,
             (unsigned long long)st.fusion_bytes);
    }
    if ((layout == LAYOUT_SHUFFLED) && (st.inplace_buckets == st.buckets)) {
        fail(label, "shuffled layout: every bucket in place");
    }
    if ((rebuild != 0) && (st.rebuilt != 1)) {
        fail(label, "random ready order, rebuild on, but stats.rebuilt is %d", st.rebuilt);
    }
    if ((rebuild == 0) && (st.rebuilt != 0)) {
        fail(label, "rebuild off, but stats.rebuilt is %d", st.rebuilt);
    }
    s = gs_bucketer_destroy(b);
    if (s != GS_OK) {
        fail(label, "destroy: %s", gs_last_error());
    }
    tset_free(&ts);
}

/* The current grouping's buckets as fused buffers, with reference residuals. */
typedef struct fused {
    size_t nb;
    void *buf[MAXT];
    size_t count[MAXT];
    gs_dtype_t dtype[MAXT];
    gs_ef_t ef[MAXT];
} fused_t;

static void fused_free(fused_t *f)
{
    for (size_t k = 0; k < f->nb; k++) {
        free(f->buf[k]);
        gs_ef_destroy(f->ef[k]);
    }
    memset(f, 0, sizeof(*f));
}

/* Read the grouping of the running step; residuals start at zero, as the bucketer's do. */
static int fused_plan(gs_bucketer_t b, fused_t *f)
{
    gs_bucketer_stats_t st = GS_BUCKETER_STATS_INIT;

    fused_free(f);
    if ((gs_bucketer_stats(b, &st) != GS_OK) || (st.buckets > MAXT)) {
        return -1;
    }
    f->nb = st.buckets;
    for (size_t k = 0; k < f->nb; k++) {
        gs_bucket_info_t info = GS_BUCKET_INFO_INIT;

        if (gs_bucketer_bucket_info(b, k, &info) != GS_OK) {
            return -1;
        }
        f->count[k] = info.count;
        f->dtype[k] = info.dtype;
        f->buf[k] = malloc(info.count * tc_dtype_size(info.dtype) + 8);
        if (gs_ef_create(info.count, info.dtype, &f->ef[k]) != GS_OK) {
            return -1;
        }
    }
    return 0;
}

/* int8 + error feedback: each tensor equals its slice of a compressed all-reduce of its bucket. */
static void run_codec(void)
{
    static const gs_dtype_t dts[2] = {GS_DTYPE_F32, GS_DTYPE_BF16};
    enum { N = 40, STEPS = 5 };
    const char *label = "codec";
    gs_codec_config_t codec = GS_CODEC_CONFIG_INIT;
    gs_allreduce_opts_t ao = GS_ALLREDUCE_OPTS_INIT;
    gs_bucketer_stats_t st = GS_BUCKETER_STATS_INIT;
    size_t bk[N], off[N], id;
    fused_t f;
    tset_t ts;
    gs_bucketer_t b;
    gs_status_t s;
    int replans = 0;

    memset(&f, 0, sizeof(f));
    codec.kind = GS_CODEC_INT8;
    codec.block_size = 64;
    ao.codec = &codec;
    tset_make(&ts, N, dts, 2, LAYOUT_SEPARATE);
    b = make_bucketer(GS_OP_AVG, GS_UNSET, &codec);
    for (size_t i = 0; (b != GS_BUCKETER_NULL) && (i < N); i++) {
        if (gs_bucketer_add(b, ts.ptr[i], ts.count[i], ts.dtype[i], &id) != GS_OK) {
            fail(label, "add %zu: %s", i, gs_last_error());
        }
    }
    for (int step = 0; (b != GS_BUCKETER_NULL) && (step < STEPS); step++) {
        tset_fill(&ts, step, 1);
        if (mark_all(b, N, step, N) != 0) {
            fail(label, "step %d: a ready() call failed: %s", step, gs_last_error());
        }
        /* The first ready() formed the grouping; the rebuild after step 0 may change it. */
        if ((step == 0) || ((step == 1) && st.rebuilt)) {
            if (fused_plan(b, &f) != 0) {
                fail(label, "step %d: reading the grouping failed: %s", step, gs_last_error());
                break;
            }
            replans++;
        }
        for (size_t i = 0; i < N; i++) {
            if (gs_bucketer_locate(b, i, &bk[i], &off[i]) != GS_OK) {
                fail(label, "locate %zu: %s", i, gs_last_error());
                bk[i] = 0;
                off[i] = 0;
                continue;
            }
            memcpy((char *)f.buf[bk[i]] + off[i] * tc_dtype_size(ts.dtype[i]), ts.ref[i],
                   ts.count[i] * tc_dtype_size(ts.dtype[i]));
        }
        s = gs_bucketer_wait(b);
        if (s != GS_OK) {
            fail(label, "step %d: wait: %s: %s", step, gs_status_name(s), gs_last_error());
            break;
        }
        for (size_t k = 0; k < f.nb; k++) {
            ao.ef = f.ef[k];
            s = gs_allreduce_ex(g_comm, f.buf[k], f.buf[k], f.count[k], f.dtype[k], GS_OP_AVG, &ao);
            if (s != GS_OK) {
                fail(label, "reference bucket %zu: %s", k, gs_last_error());
            }
        }
        for (size_t i = 0; i < N; i++) {
            const size_t bytes = ts.count[i] * tc_dtype_size(ts.dtype[i]);

            if (memcmp(ts.ptr[i], (char *)f.buf[bk[i]] + off[i] * tc_dtype_size(ts.dtype[i]),
                       bytes) != 0) {
                fail(label,
                     "step %d: tensor %zu (%zu x %s) differs from its bucket's "
                     "compressed all-reduce",
                     step, i, ts.count[i], ts.dtype[i] == GS_DTYPE_F32 ? "f32" : "bf16");
            } else {
                pass(label);
            }
        }
        if (gs_bucketer_stats(b, &st) != GS_OK) {
            fail(label, "stats: %s", gs_last_error());
        }
    }
    if ((st.rebuilt != 1) || (replans != 2)) {
        fail(label, "expected a rebuild after step 0 (rebuilt %d, groupings read %d)", st.rebuilt,
             replans);
    }
    if ((b != GS_BUCKETER_NULL) && (gs_bucketer_destroy(b) != GS_OK)) {
        fail(label, "destroy: %s", gs_last_error());
    }
    fused_free(&f);
    tset_free(&ts);
}

/* Expect status @p want and a last-error sentence containing @p needle. */
static void expect_err(const char *label, gs_status_t got, gs_status_t want, const char *needle)
{
    if (got != want) {
        fail(label, "got %s, expected %s (%s)", gs_status_name(got), gs_status_name(want),
             gs_last_error());
    } else if ((needle != NULL) && (strstr(gs_last_error(), needle) == NULL)) {
        fail(label, "the error does not mention '%s': %s", needle, gs_last_error());
    } else {
        pass(label);
    }
}

/* Every argument error, each changing nothing; then the step still completes correctly. */
static void run_errors(void)
{
    static const gs_dtype_t dts[2] = {GS_DTYPE_I32, GS_DTYPE_I64};
    gs_bucketer_opts_t o = GS_BUCKETER_OPTS_INIT;
    gs_codec_config_t codec = GS_CODEC_CONFIG_INIT;
    gs_bucketer_stats_t st = GS_BUCKETER_STATS_INIT;
    gs_bucketer_t b = GS_BUCKETER_NULL, cb = GS_BUCKETER_NULL;
    int32_t ints[8];
    float fl[8];
    size_t id = 12345;
    char want[64];
    tset_t ts;
    double t0, dt;
    const size_t n = 24;

    expect_err("create NULL comm", gs_bucketer_create(GS_COMM_NULL, NULL, &b), GS_ERR_INVALID_ARG,
               "comm");
    expect_err("create NULL out", gs_bucketer_create(g_comm, NULL, NULL), GS_ERR_INVALID_ARG,
               "bucketer_out");
    o.op = GS_OP_PROD;
    expect_err("create op prod", gs_bucketer_create(g_comm, &o, &b), GS_ERR_INVALID_ARG,
               "GS_OP_SUM or GS_OP_AVG");
    o.op = GS_OP_AVG;
    o.size = 4;
    expect_err("create bad size", gs_bucketer_create(g_comm, &o, &b), GS_ERR_INVALID_ARG,
               "opts->size");
    o.size = sizeof(o);
    o.codec = &codec;
    codec.kind = GS_CODEC_INT8;
    o.algo = GS_ALGO_RING;
    expect_err("create codec+algo", gs_bucketer_create(g_comm, &o, &b), GS_ERR_INVALID_ARG,
               "GS_ALGO_AUTO");
    if (b != GS_BUCKETER_NULL) {
        fail("create errors", "the handle was written on error");
    }
    o.algo = GS_ALGO_AUTO;
    o.op = GS_OP_SUM; /* so that the codec, not the op, refuses integers */
    if (gs_bucketer_create(g_comm, &o, &cb) != GS_OK) {
        fail("create codec", "%s", gs_last_error());
        return;
    }
    expect_err("codec on i32", gs_bucketer_add(cb, ints, 8, GS_DTYPE_I32, &id), GS_ERR_INVALID_ARG,
               "codec");
    gs_bucketer_destroy(cb);

    o = (gs_bucketer_opts_t)GS_BUCKETER_OPTS_INIT;
    if (gs_bucketer_create(g_comm, &o, &b) != GS_OK) { /* avg */
        fail("create avg", "%s", gs_last_error());
        return;
    }
    expect_err("avg of i32", gs_bucketer_add(b, ints, 8, GS_DTYPE_I32, &id), GS_ERR_INVALID_ARG,
               "GS_OP_AVG needs a float dtype");
    expect_err("add NULL ptr", gs_bucketer_add(b, NULL, 8, GS_DTYPE_F32, &id), GS_ERR_INVALID_ARG,
               "ptr is NULL");
    expect_err("add NULL id_out", gs_bucketer_add(b, fl, 8, GS_DTYPE_F32, NULL), GS_ERR_INVALID_ARG,
               "id_out");
    expect_err("add NULL bucketer", gs_bucketer_add(NULL, fl, 8, GS_DTYPE_F32, &id),
               GS_ERR_INVALID_ARG, "bucketer");
    expect_err("add bad dtype", gs_bucketer_add(b, fl, 8, (gs_dtype_t)77, &id), GS_ERR_INVALID_ARG,
               "unknown dtype");
    if (id != 12345) {
        fail("add errors", "id_out was written on error");
    }
    expect_err("add f32", gs_bucketer_add(b, fl, 8, GS_DTYPE_F32, &id), GS_OK, NULL);
    expect_err("add overlap", gs_bucketer_add(b, fl + 4, 8, GS_DTYPE_F32, &id), GS_ERR_INVALID_ARG,
               "overlaps tensor 0");
    expect_err("add count 0", gs_bucketer_add(b, NULL, 0, GS_DTYPE_F32, &id), GS_OK, NULL);
    gs_bucketer_stats(b, &st);
    if (st.tensors != 2) {
        fail("add errors", "%llu tensors registered, expected 2", (unsigned long long)st.tensors);
    }
    gs_bucketer_destroy(b);

    /* The step errors, on integer sums (exact), every rank alike. */
    tset_make(&ts, n, dts, 2, LAYOUT_SEPARATE);
    o.op = GS_OP_SUM;
    o.first_bucket_bytes = 256;
    o.bucket_bytes = 2048;
    if (gs_bucketer_create(g_comm, &o, &b) != GS_OK) {
        fail("create sum", "%s", gs_last_error());
        tset_free(&ts);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        gs_bucketer_add(b, ts.ptr[i], ts.count[i], ts.dtype[i], &id);
    }
    tset_fill(&ts, 0, 0);
    t0 = tc_now_ms();
    expect_err("wait, none marked", gs_bucketer_wait(b), GS_ERR_INVALID_ARG, "24 of 24 tensors");
    expect_err("ready unknown id", gs_bucketer_ready(b, n), GS_ERR_INVALID_ARG,
               "unknown tensor id 24");
    expect_err("ready NULL", gs_bucketer_ready(NULL, 0), GS_ERR_INVALID_ARG, "NULL");
    expect_err("wait NULL", gs_bucketer_wait(NULL), GS_ERR_INVALID_ARG, "NULL");
    for (size_t i = n; i-- > 0;) {
        if ((i != 3) && (i != 17)) {
            expect_err("ready", gs_bucketer_ready(b, i), GS_OK, NULL);
        }
    }
    expect_err("ready twice", gs_bucketer_ready(b, 20), GS_ERR_INVALID_ARG,
               "tensor 20 was already marked ready");
    expect_err("add after first step", gs_bucketer_add(b, fl, 8, GS_DTYPE_F32, &id),
               GS_ERR_INVALID_ARG, "registration closed");
    expect_err("wait, 2 missing", gs_bucketer_wait(b), GS_ERR_INVALID_ARG, "2 of 24 tensors");
    snprintf(want, sizeof(want), ": 3, 17;");
    if (strstr(gs_last_error(), want) == NULL) {
        fail("wait names ids", "'%s' not in: %s", want, gs_last_error());
    }
    dt = tc_now_ms() - t0;
    if (dt > 2000) {
        fail("wait, 2 missing", "took %.0f ms; it must not wait", dt);
    }
    /* Mark them late: the step completes, and every value is right. */
    expect_err("ready late 17", gs_bucketer_ready(b, 17), GS_OK, NULL);
    expect_err("wait, 1 missing", gs_bucketer_wait(b), GS_ERR_INVALID_ARG, ": 3;");
    expect_err("ready late 3", gs_bucketer_ready(b, 3), GS_OK, NULL);
    expect_err("wait after errors", gs_bucketer_wait(b), GS_OK, NULL);
    for (size_t i = 0; i < n; i++) {
        gs_allreduce(g_comm, ts.ref[i], ts.ref[i], ts.count[i], ts.dtype[i], GS_OP_SUM);
        compare("values after errors", &ts, i, 0, 1);
    }
    st = (gs_bucketer_stats_t)GS_BUCKETER_STATS_INIT;
    gs_bucketer_stats(b, &st);
    if ((st.steps != 1) || (st.failed_steps != 0)) {
        fail("stats after errors", "steps %llu, failed %llu; expected 1 and 0",
             (unsigned long long)st.steps, (unsigned long long)st.failed_steps);
    }
    st.size = 1;
    expect_err("stats bad size", gs_bucketer_stats(b, &st), GS_ERR_INVALID_ARG, "size");
    expect_err("destroy", gs_bucketer_destroy(b), GS_OK, NULL);
    tset_free(&ts);
}

/* The last rank never marks tensor 10 in step 2 (see the file header). */
static int run_straggler(void)
{
    const char *env = getenv("GS_TIMEOUT_MS");
    const double timeout_ms = (env != NULL) ? atof(env) : 300000.0;
    const int victim = g_size - 1;
    const size_t n = 20, missing = 10;
    gs_bucketer_opts_t o = GS_BUCKETER_OPTS_INIT;
    float *t[20];
    gs_bucketer_t b;
    gs_status_t s;
    size_t id;
    double t0, dt;
    int ok = 1;

    o.op = GS_OP_SUM;
    o.first_bucket_bytes = 512;
    o.bucket_bytes = 1024;
    /* Reverse order kept: tensor 10 sits in bucket 3 of 7, so buckets 4..6 end up complete
     * but blocked behind it on the last rank (never started), and 0..2 in flight. */
    o.rebuild = 0;
    if (gs_bucketer_create(g_comm, &o, &b) != GS_OK) {
        fail("straggler", "create: %s", gs_last_error());
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        t[i] = calloc(100, sizeof(float));
        gs_bucketer_add(b, t[i], 100, GS_DTYPE_F32, &id);
    }
    if ((mark_all(b, n, 0, n) != 0) || ((s = gs_bucketer_wait(b)) != GS_OK)) {
        fail("straggler", "step 1 failed: %s", gs_last_error());
        return 1;
    }
    mark_all(b, n, 1, (g_rank == victim) ? missing : n);
    t0 = tc_now_ms();
    s = gs_bucketer_wait(b);
    dt = tc_now_ms() - t0;
    printf("RESULT rank=%d status=%s t_ms=%.0f err=%s\n", g_rank, gs_status_name(s), dt,
           gs_last_error());
    fflush(stdout);
    if (g_rank == victim) {
        if ((s != GS_ERR_INVALID_ARG) || (strstr(gs_last_error(), ": 10;") == NULL) ||
            (dt > 1000)) {
            fail("straggler victim", "wait gave %s after %.0f ms: %s", gs_status_name(s), dt,
                 gs_last_error());
            ok = 0;
        }
        /* Stay alive past the others' deadline, so that they fail by it, not by our exit. */
        usleep((useconds_t)((timeout_ms + 1500) * 1000));
    } else if (((s != GS_ERR_TIMEOUT) && (s != GS_ERR_PEER_FAILED)) || (dt > timeout_ms + 3000) ||
               (strstr(gs_last_error(), "rank") == NULL)) {
        fail("straggler survivor", "wait gave %s after %.0f ms (deadline %.0f ms): %s",
             gs_status_name(s), dt, timeout_ms, gs_last_error());
        ok = 0;
    }
    t0 = tc_now_ms();
    gs_bucketer_destroy(b);
    dt = tc_now_ms() - t0;
    if (dt > timeout_ms + 3000) {
        fail("straggler destroy", "took %.0f ms", dt);
        ok = 0;
    }
    printf("DESTROYED rank=%d t_ms=%.0f\n", g_rank, dt);
    for (size_t i = 0; i < n; i++) {
        free(t[i]);
    }
    if (ok) {
        pass("straggler");
    }
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    static const gs_dtype_t sum_dts[5] = {GS_DTYPE_F32, GS_DTYPE_I32, GS_DTYPE_F64, GS_DTYPE_I64,
                                          GS_DTYPE_I8};
    static const gs_dtype_t avg_dts[4] = {GS_DTYPE_F32, GS_DTYPE_F64, GS_DTYPE_F16, GS_DTYPE_BF16};
    int straggler = 0, rc;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--verbose") == 0) {
            g_verbose = 1;
        } else if (strcmp(argv[i], "straggler") == 0) {
            straggler = 1;
        } else {
            fprintf(stderr, "usage: bucket_check [straggler] [--verbose]\n");
            return 2;
        }
    }
    if (gs_comm_init_env(&g_comm, NULL) != GS_OK) {
        fprintf(stderr, "bucket_check: gs_comm_init_env: %s\n", gs_last_error());
        return 1;
    }
    gs_comm_rank(g_comm, &g_rank);
    gs_comm_size(g_comm, &g_size);
    if (straggler) {
        rc = run_straggler();
        gs_comm_destroy(g_comm);
        printf("bucket_check straggler rank %d: %ld passed, %ld failed\n", g_rank, g_passed,
               g_failed);
        return rc;
    }
    run_errors();
    run_plain("sum separate", LAYOUT_SEPARATE, GS_OP_SUM, GS_UNSET, sum_dts, 5, 57, 4);
    run_plain("sum flat", LAYOUT_FLAT, GS_OP_SUM, 0, sum_dts, 5, 57, 3);
    run_plain("sum shuffled", LAYOUT_SHUFFLED, GS_OP_SUM, 0, sum_dts, 5, 57, 3);
    run_plain("avg separate", LAYOUT_SEPARATE, GS_OP_AVG, 1, avg_dts, 4, 57, 4);
    run_plain("avg flat rebuild", LAYOUT_FLAT, GS_OP_AVG, 1, avg_dts, 4, 48, 3);
    run_codec();
    rc = (gs_comm_destroy(g_comm) == GS_OK) ? 0 : 1;
    printf("bucket_check rank %d of %d: %ld passed, %ld failed\n", g_rank, g_size, g_passed,
           g_failed);
    return (g_failed == 0) ? rc : 1;
}
