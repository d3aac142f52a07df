/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs_soak: a bounded soak test. Every rank runs the same random sequence of
 * operations (one seed, shared): all-reduce (sum, min, max, and the bitwise
 * ops on integers), broadcast, all-gather, reduce-scatter, all-to-all, the v
 * collectives (all-gather-v, all-to-all-v, reduce-scatter-v), a
 * point-to-point ring (isend/irecv) and the compressed all-reduce with
 * every codec, over every dtype and random sizes (0 to SOAK_MAX_ELEMS
 * elements, log-uniform). Every rank's input is a function of (step, rank,
 * index), so each rank computes the expected result of every operation
 * locally and compares it bit for bit (the compressed all-reduce: within the
 * codec's error bound, and bit-identical on every rank).
 *
 * Memory must stay flat: after a warm-up that runs every kind of operation
 * at the largest size in every dtype (three times), then the random mix for
 * 20% of the time (so the library's workspaces and the allocator's arenas
 * are at their working size), each rank reads its peak RSS (VmHWM); at the
 * end it must be within SOAK_RSS_SLACK (10%) plus 4 MiB of that.
 *
 * usage: gsrun -n 4 gs_soak [--seconds S] [--seed N] [--max-elems N]
 * Rank 0 prints one summary line per rank and a total: operations, bytes
 * sent by the collectives' callers (the payload each call moves), errors
 * (must be 0) and peak RSS at the start and the end. On a terminal it
 * draws a one-line progress indicator with the time left (tools/progress.h).
 * Exit status: 0 clean, 1 a wrong result, an error or RSS growth.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gradsync/compress.h"
#include "gradsync/gradsync.h"
#include "progress.h"
#include "tc_coll_data.h"

#define SOAK_MAX_ELEMS_DEFAULT (1u << 18)
#define SOAK_RSS_SLACK 0.10
#define SOAK_RSS_SLACK_KIB 4096
#define SOAK_MAX_REPORTS 10
#define SOAK_WARMUP_FRACTION 0.2
#define SOAK_WARMUP_SWEEPS 3 /* the in-operation choices (in place, codec, order) vary */

/* Under ASan (its quarantine) or TSan (its shadow and history) memory grows
 * by design: the RSS bound is reported but not enforced there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SOAK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SOAK_SANITIZED 1
#endif
#endif
#ifndef SOAK_SANITIZED
#define SOAK_SANITIZED 0
#endif

enum {
    K_ALLREDUCE,
    K_BCAST,
    K_ALLGATHER,
    K_REDSCAT,
    K_ALLTOALL,
    K_ALLGATHERV,
    K_ALLTOALLV,
    K_REDSCATV,
    K_P2P,
    K_COMPRESSED,
    K_COUNT
};
static const char *const kind_names[K_COUNT] = {
    "allreduce", "broadcast",       "allgather", "reduce_scatter",      "alltoall", "allgatherv",
    "alltoallv", "reduce_scatterv", "p2p",       "compressed_allreduce"};
static const size_t dt_size[GS_DTYPE_COUNT] = {4, 8, 2, 2, 1, 1, 4, 8};
static const char *const dt_name[GS_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16",
                                                    "i8",  "u8",  "i32", "i64"};

typedef struct soak {
    gs_comm_t comm;
    int rank, size;
    size_t max_elems; /* per rank block */
    uint8_t *send, *recv, *expect;
    size_t buf_bytes;
    size_t *counts, *displs, *rcounts, *rdispls; /* size entries each */
    uint64_t ops, bytes, errors;
    int reports;
} soak_t;

/* ---- deterministic values ---------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    *s += 1;
    return tc_mix64(*s * 0x2545f4914f6cdd1dull);
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
    return (n == 0) ? 0 : rng_next(s) % n;
}

/* The input of (step, rank, i) in mode 0: a small integer, -7 .. 7 (exact
 * in every dtype and in sums over up to 16 ranks); 1: bits for the bitwise
 * ops, 0 .. 127; 2: 0 .. 14 (u8, whose min and max are unsigned). */
static int64_t val(uint64_t step, int rank, size_t i, int mode)
{
    const uint64_t h = tc_mix64(step * 0x100000001b3ull ^ ((uint64_t)rank << 48) ^ i);

    return (mode == 1) ? (int64_t)(h & 0x7f) : (int64_t)(h % 15) - ((mode == 2) ? 0 : 7);
}

static int vmode(gs_dtype_t dt, int bits)
{
    return bits ? 1 : (dt == GS_DTYPE_U8) ? 2 : 0;
}

/* Fill n elements of rank r's input at dst, starting at element index i0. */
static void fill(void *dst, gs_dtype_t dt, uint64_t step, int r, size_t i0, size_t n, int bits)
{
    for (size_t i = 0; i < n; i++) {
        tc_set(dst, i, dt, (double)val(step, r, i0 + i, vmode(dt, bits)));
    }
}

/* The reduction over all ranks of element i (integer sums wrap, as the
 * library's do, when tc_set stores them). */
static double reduced(const soak_t *s, gs_dtype_t dt, gs_op_t op, uint64_t step, size_t i, int bits)
{
    double acc = (double)val(step, 0, i, vmode(dt, bits));

    for (int r = 1; r < s->size; r++) {
        acc = tc_combine(op, acc, (double)val(step, r, i, vmode(dt, bits)));
    }
    return acc;
}

/* ---- checking ----------------------------------------------------------- */

static void report(soak_t *s, uint64_t step, int kind, gs_dtype_t dt, size_t count,
                   const char *what)
{
    s->errors++;
    if (s->reports++ < SOAK_MAX_REPORTS) {
        printf("soak: rank %d step %llu %s %s count %zu: %s\n", s->rank, (unsigned long long)step,
               kind_names[kind], dt_name[dt], count, what);
        fflush(stdout);
    }
}

static void compare(soak_t *s, uint64_t step, int kind, gs_dtype_t dt, size_t count,
                    const void *got, const void *want, size_t bytes)
{
    if ((bytes > 0) && (memcmp(got, want, bytes) != 0)) {
        size_t b = 0;
        char what[128];

        while ((b < bytes) && (((const uint8_t *)got)[b] == ((const uint8_t *)want)[b])) {
            b++;
        }
        snprintf(what, sizeof(what), "wrong result: first difference at element %zu",
                 b / dt_size[dt]);
        report(s, step, kind, dt, count, what);
    }
}

static void must(soak_t *s, gs_status_t st, const char *call)
{
    if (st != GS_OK) {
        printf("soak: rank %d: %s returned %s: %s\n", s->rank, call, gs_status_name(st),
               gs_last_error());
        fflush(stdout);
        exit(1); /* the ranks are out of step now; gsrun ends the others */
    }
}

/* ---- the operations ------------------------------------------------------ */

static size_t pick_count(uint64_t *rng, size_t max)
{
    /* log-uniform: mostly small, sometimes the largest */
    const unsigned bits = (unsigned)rng_below(rng, 20);
    size_t n = (size_t)rng_below(rng, ((uint64_t)1 << bits) + 1);

    return (n > max) ? max : n;
}

/* The warm-up's dtype (every one in turn), or -1: a random one. */
static int g_force_dtype = -1;

static gs_dtype_t pick_dtype(uint64_t *rng)
{
    const gs_dtype_t dt = (gs_dtype_t)rng_below(rng, GS_DTYPE_COUNT);

    return (g_force_dtype >= 0) ? (gs_dtype_t)g_force_dtype : dt;
}

static void op_allreduce(soak_t *s, uint64_t step, uint64_t *rng, size_t count)
{
    const gs_dtype_t dt = pick_dtype(rng);
    static const gs_op_t fops[] = {GS_OP_SUM, GS_OP_MIN, GS_OP_MAX};
    static const gs_op_t iops[] = {GS_OP_SUM,  GS_OP_MIN, GS_OP_MAX,
                                   GS_OP_BAND, GS_OP_BOR, GS_OP_BXOR};
    const gs_op_t op = tc_dtype_is_float(dt) ? fops[rng_below(rng, 3)] : iops[rng_below(rng, 6)];
    const int bits = (op >= GS_OP_BAND);
    const int inplace = (int)rng_below(rng, 2);
    const size_t es = dt_size[dt];

    fill(s->send, dt, step, s->rank, 0, count, bits);
    if (inplace) {
        memcpy(s->recv, s->send, count * es);
    }
    must(s, gs_allreduce(s->comm, inplace ? s->recv : s->send, s->recv, count, dt, op),
         "gs_allreduce");
    for (size_t i = 0; i < count; i++) {
        tc_set(s->expect, i, dt, reduced(s, dt, op, step, i, bits));
    }
    compare(s, step, K_ALLREDUCE, dt, count, s->recv, s->expect, count * es);
    s->bytes += count * es;
}

static void op_bcast(soak_t *s, uint64_t step, uint64_t *rng, size_t count)
{
    const gs_dtype_t dt = pick_dtype(rng);
    const int root = (int)rng_below(rng, (uint64_t)s->size);
    const size_t es = dt_size[dt];

    if (s->rank == root) {
        fill(s->recv, dt, step, root, 0, count, 0);
    } else {
        memset(s->recv, 0xee, count * es);
    }
    must(s, gs_broadcast(s->comm, s->recv, count, dt, root), "gs_broadcast");
    fill(s->expect, dt, step, root, 0, count, 0);
    compare(s, step, K_BCAST, dt, count, s->recv, s->expect, count * es);
    s->bytes += count * es;
}

static void op_allgather(soak_t *s, uint64_t step, uint64_t *rng, size_t count)
{
    const gs_dtype_t dt = pick_dtype(rng);
    const size_t es = dt_size[dt];

    fill(s->send, dt, step, s->rank, 0, count, 0);
    must(s, gs_allgather(s->comm, s->send, s->recv, count, dt), "gs_allgather");
    for (int r = 0; r < s->size; r++) {
        fill(s->expect + (size_t)r * count * es, dt, step, r, 0, count, 0);
    }
    compare(s, step, K_ALLGATHER, dt, count, s->recv, s->expect, (size_t)s->size * count * es);
    s->bytes += count * es;
}

static void op_redscat(soak_t *s, uint64_t step, uint64_t *rng, size_t count)
{
    const gs_dtype_t dt = pick_dtype(rng);
    const gs_op_t op = (rng_below(rng, 2) == 0) ? GS_OP_SUM : GS_OP_MAX;
    const size_t es = dt_size[dt];
    const size_t off = (size_t)s->rank * count;

    fill(s->send, dt, step, s->rank, 0, (size_t)s->size * count, 0);
    must(s, gs_reduce_scatter(s->comm, s->send, s->recv, count, dt, op), "gs_reduce_scatter");
    for (size_t i = 0; i < count; i++) {
        tc_set(s->expect, i, dt, reduced(s, dt, op, step, off + i, 0));
    }
    compare(s, step, K_REDSCAT, dt, count, s->recv, s->expect, count * es);
    s->bytes += (size_t)s->size * count * es;
}

static void op_alltoall(soak_t *s, uint64_t step, uint64_t *rng, size_t count)
{
    const gs_dtype_t dt = pick_dtype(rng);
    const size_t es = dt_size[dt];

    /* block j of rank r's input: elements [j*count, (j+1)*count) of its series */
    fill(s->send, dt, step, s->rank, 0, (size_t)s->size * count, 0);
    must(s, gs_alltoall(s->comm, s->send, s->recv, count, dt), "gs_alltoall");
    for (int r = 0; r < s->size; r++) {
        fill(s->expect + (size_t)r * count * es, dt, step, r, (size_t)s->rank * count, count, 0);
    }
    compare(s, step, K_ALLTOALL, dt, count, s->recv, s->expect, (size_t)s->size * count * es);
    s->bytes += (size_t)s->size * count * es;
}

/* Per-rank counts (shared: every rank draws the same) packed with a gap. */
static size_t layout(soak_t *s, uint64_t *rng, size_t max, size_t *counts, size_t *displs)
{
    size_t at = 0;

    for (int r = 0; r < s->size; r++) {
        counts[r] = pick_count(rng, max);
        at += (size_t)rng_below(rng, 3);
        displs[r] = at;
        at += counts[r];
    }
    return at;
}

static void op_allgatherv(soak_t *s, uint64_t step, uint64_t *rng, size_t count)
{
    const gs_dtype_t dt = pick_dtype(rng);
    const size_t es = dt_size[dt];
    const size_t total = layout(s, rng, count, s->counts, s->displs);

    fill(s->send, dt, step, s->rank, 0, s->counts[s->rank], 0);
    memset(s->recv, 0, total * es);
    memset(s->expect, 0, total * es);
    must(s,
         gs_allgatherv(s->comm, s->send, s->counts[s->rank], s->recv, total, s->counts, s->displs,
                       dt),
         "gs_allgatherv");
    for (int r = 0; r < s->size; r++) {
        fill(s->expect + s->displs[r] * es, dt, step, r, 0, s->counts[r], 0);
    }
    compare(s, step, K_ALLGATHERV, dt, total, s->recv, s->expect, total * es);
    s->bytes += s->counts[s->rank] * es;
}

/* count(i -> j) of the all-to-all-v at this step: every rank can compute it. */
static size_t a2av_count(uint64_t seed, int i, int j, size_t max)
{
    return (size_t)(tc_mix64(seed ^ ((uint64_t)i << 20) ^ (uint64_t)j) % (max + 1));
}

static void op_alltoallv(soak_t *s, uint64_t step, uint64_t *rng, size_t count)
{
    const gs_dtype_t dt = pick_dtype(rng);
    const size_t es = dt_size[dt];
    const uint64_t seed = rng_next(rng);
    const size_t max = count / (size_t)s->size;
    size_t sat = 0, rat = 0;

    for (int j = 0; j < s->size; j++) {
        s->counts[j] = a2av_count(seed, s->rank, j, max);
        s->displs[j] = sat;
        sat += s->counts[j] + 1;
        s->rcounts[j] = a2av_count(seed, j, s->rank, max);
        s->rdispls[j] = rat;
        rat += s->rcounts[j] + 1;
    }
    /* block j of my input: my series from index j * (max + 1) */
    for (int j = 0; j < s->size; j++) {
        fill(s->send + s->displs[j] * es, dt, step, s->rank, (size_t)j * (max + 1), s->counts[j],
             0);
    }
    memset(s->recv, 0, rat * es);
    memset(s->expect, 0, rat * es);
    must(s,
         gs_alltoallv(s->comm, s->send, sat, s->counts, s->displs, s->recv, rat, s->rcounts,
                      s->rdispls, dt),
         "gs_alltoallv");
    for (int j = 0; j < s->size; j++) {
        fill(s->expect + s->rdispls[j] * es, dt, step, j, (size_t)s->rank * (max + 1),
             s->rcounts[j], 0);
    }
    compare(s, step, K_ALLTOALLV, dt, rat, s->recv, s->expect, rat * es);
    s->bytes += sat * es;
}

static void op_redscatv(soak_t *s, uint64_t step, uint64_t *rng, size_t count)
{
    const gs_dtype_t dt = pick_dtype(rng);
    const size_t es = dt_size[dt];
    size_t total = 0, off = 0;

    for (int r = 0; r < s->size; r++) {
        s->counts[r] = pick_count(rng, count);
        if (r < s->rank) {
            off += s->counts[r];
        }
        total += s->counts[r];
    }
    fill(s->send, dt, step, s->rank, 0, total, 0);
    must(s, gs_reduce_scatterv(s->comm, s->send, s->recv, s->counts, dt, GS_OP_SUM),
         "gs_reduce_scatterv");
    for (size_t i = 0; i < s->counts[s->rank]; i++) {
        tc_set(s->expect, i, dt, reduced(s, dt, GS_OP_SUM, step, off + i, 0));
    }
    compare(s, step, K_REDSCATV, dt, s->counts[s->rank], s->recv, s->expect,
            s->counts[s->rank] * es);
    s->bytes += total * es;
}

/* A ring: receive from the left, send to the right, a few messages each
 * with its own tag (posted receives first on odd steps, sends first on
 * even ones). */
static void op_p2p(soak_t *s, uint64_t step, uint64_t *rng, size_t count)
{
    const gs_dtype_t dt = pick_dtype(rng);
    const size_t es = dt_size[dt];
    const int nmsg = 1 + (int)rng_below(rng, 4);
    const int right = (s->rank + 1) % s->size, left = (s->rank + s->size - 1) % s->size;
    const size_t per = count / (size_t)nmsg;
    gs_request_t reqs[8];
    int n = 0;

    if (s->size < 2) {
        return;
    }
    fill(s->send, dt, step, s->rank, 0, per * (size_t)nmsg, 0);
    for (int k = 0; k < 2; k++) {
        for (int m = 0; m < nmsg; m++) {
            const uint32_t tag = (uint32_t)(step % 1000u) * 8u + (uint32_t)m;
            if ((k == 0) == ((step & 1u) == 1u)) {
                must(s,
                     gs_irecv(s->comm, s->recv + (size_t)m * per * es, per, dt, left, tag,
                              &reqs[n++]),
                     "gs_irecv");
            } else {
                must(s,
                     gs_isend(s->comm, s->send + (size_t)m * per * es, per, dt, right, tag,
                              &reqs[n++]),
                     "gs_isend");
            }
        }
    }
    must(s, gs_waitall((size_t)n, reqs), "gs_waitall");
    fill(s->expect, dt, step, left, 0, per * (size_t)nmsg, 0);
    compare(s, step, K_P2P, dt, per * (size_t)nmsg, s->recv, s->expect, per * (size_t)nmsg * es);
    s->bytes += per * (size_t)nmsg * es;
}

/* Relative L2 error bound of the two-phase compressed all-reduce with each
 * codec (encode, sum, encode again) on uniform inputs: exact for none,
 * rounding for the casts, quantisation error for int8, and for the
 * stochastic and sparse codecs only "the result is the sum, not garbage". */
static double codec_bound(gs_codec_kind_t k)
{
    switch (k) {
    case GS_CODEC_NONE:
        return 1e-6;
    case GS_CODEC_FP16:
        return 2e-3;
    case GS_CODEC_BF16:
        return 1.5e-2;
    case GS_CODEC_INT8:
        return 0.05;
    case GS_CODEC_QSGD:
        return 1.0;
    case GS_CODEC_INT4:
        return 0.4;
    case GS_CODEC_FP8_E4M3:
        return 0.15;
    case GS_CODEC_FP8_E5M2:
        return 0.3;
    default:
        return 1.6; /* sign, topk, randk */
    }
}

/* Whether the library has the codecs' zstd stage (a build without libzstd
 * refuses it with GS_ERR_UNSUPPORTED): the soak then runs without it.
 * Probed once (the refusal logs a WARN). */
static int zstd_available(void)
{
    static int have = -1;

    if (have < 0) {
        gs_codec_config_t probe = GS_CODEC_CONFIG_INIT;
        size_t bytes;

        probe.zstd = GS_CODEC_ZSTD_AUTO;
        have = (gs_codec_encoded_size(&probe, 1, GS_DTYPE_F32, &bytes) != GS_ERR_UNSUPPORTED);
    }
    return have;
}

static void op_compressed(soak_t *s, uint64_t step, uint64_t *rng, size_t count)
{
    const gs_codec_kind_t kind = (gs_codec_kind_t)rng_below(rng, GS_CODEC_KIND_COUNT);
    gs_codec_config_t cfg = GS_CODEC_CONFIG_INIT;
    gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;
    float *x = (float *)(void *)s->send, *y = (float *)(void *)s->recv;
    double num = 0.0, den = 0.0;
    uint64_t h = 0, *all;

    cfg.kind = kind;
    cfg.ratio = 0.5;
    cfg.seed = step;
    cfg.zstd = (rng_below(rng, 4) == 0) ? GS_CODEC_ZSTD_AUTO : GS_CODEC_ZSTD_OFF;
    if ((cfg.zstd != GS_CODEC_ZSTD_OFF) && !zstd_available()) {
        cfg.zstd = GS_CODEC_ZSTD_OFF; /* the same draw on every rank, so they still agree */
    }
    opts.codec = &cfg;
    for (size_t i = 0; i < count; i++) {
        x[i] = (float)val(step, s->rank, i, 0) / 7.0f;
    }
    must(s, gs_allreduce_ex(s->comm, x, y, count, GS_DTYPE_F32, GS_OP_SUM, &opts),
         "gs_allreduce_ex (compressed)");
    for (size_t i = 0; i < count; i++) {
        double e = 0.0;
        for (int r = 0; r < s->size; r++) {
            e += (double)((float)val(step, r, i, 0) / 7.0f);
        }
        num += ((double)y[i] - e) * ((double)y[i] - e);
        den += e * e;
        h = tc_mix64(h ^ ((uint64_t) * (const uint32_t *)(const void *)&y[i] + i));
    }
    /* relative to the norm of the sum, but never to less than that of a
     * typical input (a sum near 0 would make any rounding look huge) */
    den = (den > (double)count * 0.25) ? den : (double)count * 0.25;
    if ((count > 0) && (num > codec_bound(kind) * codec_bound(kind) * den)) {
        char what[128];
        snprintf(what, sizeof(what), "codec %d: relative error %.3g over the bound %.3g", (int)kind,
                 sqrt(num / den), codec_bound(kind));
        report(s, step, K_COMPRESSED, GS_DTYPE_F32, count, what);
    }
    /* every rank must hold the same bits */
    all = (uint64_t *)(void *)s->expect;
    must(s, gs_allgather(s->comm, &h, all, 1, GS_DTYPE_I64), "gs_allgather (hash)");
    for (int r = 0; r < s->size; r++) {
        if (all[r] != all[0]) {
            report(s, step, K_COMPRESSED, GS_DTYPE_F32, count, "ranks hold different results");
            break;
        }
    }
    s->bytes += count * 4;
}

static void run_op(soak_t *s, int kind, uint64_t step, uint64_t *rng, size_t count)
{
    switch (kind) {
    case K_ALLREDUCE:
        op_allreduce(s, step, rng, count);
        break;
    case K_BCAST:
        op_bcast(s, step, rng, count);
        break;
    case K_ALLGATHER:
        op_allgather(s, step, rng, count);
        break;
    case K_REDSCAT:
        op_redscat(s, step, rng, count);
        break;
    case K_ALLTOALL:
        op_alltoall(s, step, rng, count);
        break;
    case K_ALLGATHERV:
        op_allgatherv(s, step, rng, count);
        break;
    case K_ALLTOALLV:
        op_alltoallv(s, step, rng, count);
        break;
    case K_REDSCATV:
        op_redscatv(s, step, rng, count);
        break;
    case K_P2P:
        op_p2p(s, step, rng, count);
        break;
    default:
        op_compressed(s, step, rng, count);
        break;
    }
    s->ops++;
}

/* ---- memory -------------------------------------------------------------- */

static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    const size_t n = strlen(field);

    while ((f != NULL) && (fgets(line, sizeof(line), f) != NULL)) {
        if (strncmp(line, field, n) == 0) {
            v = strtol(line + n, NULL, 10);
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return v;
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
    soak_t s;
    double seconds = 60.0;
    uint64_t seed = 1, rng, step = 0;
    long hwm_start = -1, hwm_end, rss_end;
    double warm;
    int warmed = 0;
    gs_progress_t prog;
    double t0;
    int keep = 1, failed = 0;
    uint64_t mine[6], *all;

    memset(&s, 0, sizeof(s));
    s.max_elems = SOAK_MAX_ELEMS_DEFAULT;
    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "--seconds") == 0) && (i + 1 < argc)) {
            seconds = atof(argv[++i]);
        } else if ((strcmp(argv[i], "--seed") == 0) && (i + 1 < argc)) {
            seed = strtoull(argv[++i], NULL, 0);
        } else if ((strcmp(argv[i], "--max-elems") == 0) && (i + 1 < argc)) {
            s.max_elems = strtoull(argv[++i], NULL, 0);
        } else {
            fprintf(stderr, "usage: gs_soak [--seconds S] [--seed N] [--max-elems N]\n");
            return 2;
        }
    }
    must(&s, gs_comm_init_env(&s.comm, NULL), "gs_comm_init_env");
    must(&s, gs_comm_rank(s.comm, &s.rank), "gs_comm_rank");
    must(&s, gs_comm_size(s.comm, &s.size), "gs_comm_size");
    /* the largest buffer: size blocks of max_elems 8-byte elements, plus gaps */
    s.buf_bytes = ((size_t)s.size * (s.max_elems + 4) + 64) * 8;
    s.send = malloc(s.buf_bytes);
    s.recv = malloc(s.buf_bytes);
    s.expect = malloc(s.buf_bytes);
    s.counts = calloc((size_t)s.size * 4, sizeof(size_t));
    if ((s.send == NULL) || (s.recv == NULL) || (s.expect == NULL) || (s.counts == NULL)) {
        printf("soak: rank %d: out of memory\n", s.rank);
        return 1;
    }
    s.displs = s.counts + s.size;
    s.rcounts = s.displs + s.size;
    s.rdispls = s.rcounts + s.size;
    memset(s.send, 0, s.buf_bytes);
    memset(s.recv, 0, s.buf_bytes);
    memset(s.expect, 0, s.buf_bytes);

    /* Warm-up: every kind at the largest size in every dtype, then the
     * random mix for SOAK_WARMUP_FRACTION of the time (at most 60 s), so
     * that the library's workspaces and the allocator's arenas reach their
     * working size before the start is measured. */
    rng = tc_mix64(seed);
    for (int round = 0; round < (SOAK_SANITIZED ? 1 : SOAK_WARMUP_SWEEPS); round++) {
        for (int dt = 0; dt < GS_DTYPE_COUNT; dt++) {
            g_force_dtype = dt;
            for (int k = 0; k < K_COUNT; k++) {
                run_op(&s, k, step++, &rng, s.max_elems);
            }
        }
    }
    g_force_dtype = -1;
    warm = seconds * SOAK_WARMUP_FRACTION;
    warm = (warm > 60.0) ? 60.0 : warm;
    gs_progress_start(&prog, "soak", seconds + warm, s.rank == 0);
    t0 = gs_progress_now();
    while (keep) {
        if (!warmed && (gs_progress_now() - t0 >= warm)) {
            hwm_start = status_kib("VmHWM:");
            warmed = 1;
        }
        const int kind = (int)rng_below(&rng, K_COUNT);
        const size_t count = pick_count(&rng, s.max_elems);
        int go;
        char what[96];

        run_op(&s, kind, step++, &rng, count);
        /* rank 0 decides when to stop; every rank learns it at once */
        go = (s.rank == 0) ? (gs_progress_now() - t0 < seconds + warm) : 0;
        must(&s, gs_broadcast(s.comm, &go, 1, GS_DTYPE_I32, 0), "gs_broadcast (go)");
        keep = go;
        snprintf(what, sizeof(what), "%llu ops, %.2f GiB, %llu errors", (unsigned long long)s.ops,
                 (double)s.bytes / 1073741824.0, (unsigned long long)s.errors);
        gs_progress_show(&prog, gs_progress_now() - t0, what);
    }
    gs_progress_end(&prog);
    if (!warmed) {
        hwm_start = status_kib("VmHWM:");
    }
    hwm_end = status_kib("VmHWM:");
    rss_end = status_kib("VmRSS:");

    mine[0] = s.ops;
    mine[1] = s.bytes;
    mine[2] = s.errors;
    mine[3] = (uint64_t)hwm_start;
    mine[4] = (uint64_t)hwm_end;
    mine[5] = (uint64_t)rss_end;
    all = (uint64_t *)(void *)s.expect;
    must(&s, gs_allgather(s.comm, mine, all, 6, GS_DTYPE_I64), "gs_allgather (summary)");
    if (s.rank == 0) {
        uint64_t ops = 0, bytes = 0, errors = 0;

        printf("soak: %d ranks, %.0f s (%.0f s of warm-up, then the measured %.0f s), seed %llu, "
               "up to %zu elements per rank\n",
               s.size, gs_progress_now() - t0, warm, seconds, (unsigned long long)seed,
               s.max_elems);
        for (int r = 0; r < s.size; r++) {
            const uint64_t *m = all + 6 * r;
            const double bound = (double)m[3] * (1.0 + SOAK_RSS_SLACK) + SOAK_RSS_SLACK_KIB;
            const int grew = ((double)m[4] > bound) && !SOAK_SANITIZED;

            printf("soak: rank %d: %llu ops, %.2f GiB, %llu errors, peak RSS %llu KiB after "
                   "warm-up, %llu KiB at the end (bound %.0f KiB), RSS now %llu KiB%s\n",
                   r, (unsigned long long)m[0], (double)m[1] / 1073741824.0,
                   (unsigned long long)m[2], (unsigned long long)m[3], (unsigned long long)m[4],
                   bound, (unsigned long long)m[5], grew ? ": GREW" : "");
            ops += m[0];
            bytes += m[1];
            errors += m[2];
            failed |= grew;
        }
        failed |= (errors != 0);
        if (SOAK_SANITIZED) {
            printf("soak: sanitizer build: the RSS bound is not enforced\n");
        }
        printf("soak: %s: %llu ops, %.2f GiB, %llu errors; peak RSS end <= start + 10%% + 4 MiB "
               "on every rank: %s\n",
               failed ? "FAIL" : "PASS", (unsigned long long)ops, (double)bytes / 1073741824.0,
               (unsigned long long)errors, failed ? "no" : "yes");
    }
    must(&s, gs_broadcast(s.comm, &failed, 1, GS_DTYPE_I32, 0), "gs_broadcast (verdict)");
    must(&s, gs_comm_destroy(s.comm), "gs_comm_destroy");
    free(s.send);
    free(s.recv);
    free(s.expect);
    free(s.counts);
    return failed ? 1 : 0;
}
