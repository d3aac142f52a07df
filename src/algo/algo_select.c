/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Selection: the only place that decides how a call runs (gs__algo_plan).
 * Three choices, each a row of a table below, in this order:
 * - the path: host buffers go over the communicator's transport; device
 *   buffers go through NCCL when the context has it and the call is plain
 *   with no gradsync algorithm forced, and are staged through pinned host
 *   memory otherwise (path_table);
 * - the scheme: plain, or for a codec the two-phase scheme, or a sparse
 *   one when the sparse result stays smaller than the tensor (a rule on
 *   the configuration, count, dtype and world size that every rank
 *   evaluates alike, without a message);
 * - the algorithm (plain scheme): the caller's explicit choice
 *   (opts.algo), then GS_ALGO, then the cost model.
 * It keeps no state but the per-communicator "already logged" bits in the
 * context: each (collective, path and scheme, size class) is logged once
 * at INFO.
 *
 * The model is alpha-beta-gamma (Hockney, with Rabenseifner's reduction
 * term): a message costs alpha, every byte a rank sends costs beta, every
 * byte it reduces costs gamma, and an algorithm's time is the sum over its
 * critical path. Each algorithm file states its formula; cost_*() below
 * evaluates them. alpha, beta and gamma come from GS_ALGO_ALPHA_US,
 * GS_ALGO_BETA_MBPS and GS_ALGO_GAMMA_MBPS (defaults in env_table.h, set
 * from measurements on loopback TCP; docs/design.md has the table), so a
 * user on a slower or faster network moves every crossover at once
 * instead of tuning thresholds. The cheapest algorithm wins; on a tie the
 * later one in GS_ALGO_MAP (see gs__algo_choose).
 *
 * Hosts: alpha and beta describe the links the flat algorithms cross (the
 * network between hosts on a cluster, loopback on one machine). The
 * hierarchical all-reduce also pays GS_ALGO_INTRA_ALPHA_US and
 * GS_ALGO_INTRA_BETA_MBPS inside each host, and is a candidate only when
 * there are several hosts and some host has several ranks (ctx->hosts).
 * When every rank is on one host and every pair talks over shared memory
 * (model.flat_intra, agreed at init), the flat algorithms pay the intra
 * parameters as well: a shared-memory hop costs a fraction of a loopback
 * TCP one, which moves the recursive-doubling/Rabenseifner crossover on 4
 * ranks from about 22 KiB down to 11 KiB. The last-level cache is shared by
 * a host's ranks (the cost of the unsliced algorithms counts them).
 */
#include <stdio.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/algo_comp.h"
#include "algo/algo_dev.h"
#include "algo/algo_native.h"
#include "algo/pattern_rd.h"
#include "algo/pattern_tree.h"
#include "compress/codec.h"
#include "core/dtype.h"
#include "core/env_table.h"
#include "core/error.h"
#include "core/log.h"

#define COLL_NAME_ROW(_kind, _public, _name, _api) [_kind] = _name,
static const char *const coll_names[GS_COLL_KIND_COUNT] = {GS_COLL_KIND_MAP(COLL_NAME_ROW)};
#undef COLL_NAME_ROW

#define GS_ALGO_NAME_ROW(_name, _value, _str) [_value] = _str,
static const char *const algo_names[GS_ALGO_COUNT] = {GS_ALGO_MAP(GS_ALGO_NAME_ROW)};
#undef GS_ALGO_NAME_ROW

typedef gs_status_t (*algo_fn_t)(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
typedef gs_status_t (*path_fn_t)(gs_algo_ctx_t *ctx, gs_coll_desc_t *d, const gs_algo_plan_t *plan);

static const char *const path_names[GS_PATH_COUNT] = {
    [GS_PATH_HOST] = "host",
    [GS_PATH_NCCL] = "nccl",
    [GS_PATH_STAGED] = "staged",
    [GS_PATH_MPI_CUDA] = "CUDA-aware MPI",
};

static const char *const scheme_names[GS_SCHEME_COUNT] = {
    [GS_SCHEME_PLAIN] = "plain",
    [GS_SCHEME_TWO_PHASE] = "two-phase",
    [GS_SCHEME_SPARSE_GATHER] = "sparse gather",
    [GS_SCHEME_SPARSE_SHARED] = "sparse shared",
};

/* Who runs each path (NULL: not built in; the plan never picks it). */
static const path_fn_t path_table[GS_PATH_COUNT] = {
    [GS_PATH_HOST] = gs__algo_run_host,
#ifdef GS_WITH_NCCL
    [GS_PATH_NCCL] = gs__dev_run_nccl,
#endif
#ifdef GS_WITH_CUDA
    [GS_PATH_STAGED] = gs__dev_run_staged,
    [GS_PATH_MPI_CUDA] = gs__dev_run_mpi,
#endif
};

/* Which algorithm implements which collective (NULL: not offered). */
static const algo_fn_t algo_table[GS_COLL_KIND_COUNT][GS_ALGO_COUNT] = {
    [GS_COLL_ALLREDUCE] = {[GS_ALGO_RING] = gs__ring_allreduce,
                           [GS_ALGO_TREE] = gs__tree_allreduce,
                           [GS_ALGO_RECURSIVE_DOUBLING] = gs__rd_allreduce,
                           [GS_ALGO_RABENSEIFNER] = gs__rabenseifner_allreduce,
                           [GS_ALGO_NATIVE] = gs__native_allreduce,
                           [GS_ALGO_HIERARCHICAL] = gs__hier_allreduce},
    [GS_COLL_BROADCAST] = {[GS_ALGO_CHAIN] = gs__chain_broadcast,
                           [GS_ALGO_BINOMIAL] = gs__binomial_broadcast,
                           [GS_ALGO_NATIVE] = gs__native_broadcast},
    [GS_COLL_REDUCE] =
        {[GS_ALGO_CHAIN] = gs__chain_reduce, [GS_ALGO_BINOMIAL] = gs__binomial_reduce},
    [GS_COLL_ALLGATHER] =
        {[GS_ALGO_RING] = gs__ring_allgather, [GS_ALGO_NATIVE] = gs__native_allgather},
    [GS_COLL_REDUCE_SCATTER] =
        {[GS_ALGO_RING] = gs__ring_reduce_scatter, [GS_ALGO_NATIVE] = gs__native_reduce_scatter},
    [GS_COLL_ALLTOALL] = {[GS_ALGO_DIRECT] = gs__direct_alltoall},
    [GS_COLL_BARRIER] = {[GS_ALGO_DIRECT] = gs__direct_barrier},
    [GS_COLL_SEND] = {[GS_ALGO_DIRECT] = gs__p2p_send},
    [GS_COLL_RECV] = {[GS_ALGO_DIRECT] = gs__p2p_recv},
    [GS_COLL_GATHER] =
        {[GS_ALGO_DIRECT] = gs__direct_gather, [GS_ALGO_BINOMIAL] = gs__binomial_gather},
    [GS_COLL_SCATTER] =
        {[GS_ALGO_DIRECT] = gs__direct_scatter, [GS_ALGO_BINOMIAL] = gs__binomial_scatter},
    [GS_COLL_ALLGATHERV] = {[GS_ALGO_RING] = gs__ring_allgatherv},
    [GS_COLL_ALLTOALLV] = {[GS_ALGO_DIRECT] = gs__direct_alltoallv},
    [GS_COLL_REDUCE_SCATTERV] = {[GS_ALGO_RING] = gs__ring_reduce_scatterv},
};

/* ------------------------------------------------------------------ */
/* Cost model                                                          */
/* ------------------------------------------------------------------ */

/* Size of the last-level cache from sysfs ("32768K"), or 32 MiB when it
 * cannot be read (sysconf's value is wrong on some VMs). */
static double algo_llc_bytes(void)
{
    static const char *const paths[] = {"/sys/devices/system/cpu/cpu0/cache/index3/size",
                                        "/sys/devices/system/cpu/cpu0/cache/index2/size"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        FILE *f = fopen(paths[i], "r");
        unsigned long v = 0;
        char unit = 0;
        int got;

        if (f == NULL) {
            continue;
        }
        /* NOLINTNEXTLINE(cert-err34-c): a size the kernel wrote, not user input. */
        got = fscanf(f, "%lu%c", &v, &unit);
        fclose(f);
        if (got >= 1 && v > 0) {
            const double scale = (unit == 'K') ? 1024.0 : (unit == 'M') ? 1048576.0 : 1.0;
            const double bytes = (double)v * scale;
            if ((bytes >= 65536.0) && (bytes <= 4294967296.0)) {
                return bytes;
            }
        }
    }
    return 32.0 * 1048576.0;
}

void gs__algo_model_init(gs_algo_model_t *m, int alpha_us, int beta_mbps, int gamma_mbps)
{
    m->alpha = (alpha_us > 0 ? alpha_us : GS_ALGO_ALPHA_US_DEFAULT) * 1e-6;
    m->beta = 1.0 / ((beta_mbps > 0 ? beta_mbps : GS_ALGO_BETA_MBPS_DEFAULT) * 1e6);
    m->gamma = 1.0 / ((gamma_mbps > 0 ? gamma_mbps : GS_ALGO_GAMMA_MBPS_DEFAULT) * 1e6);
    m->cache_bytes = algo_llc_bytes();
    m->flat_intra = 0;
    m->ring_bytes = 0.0;
    gs__algo_model_set_intra(m, 0, 0);
}

void gs__algo_model_set_intra(gs_algo_model_t *m, int alpha_us, int beta_mbps)
{
    m->intra_alpha = (alpha_us > 0 ? alpha_us : GS_ALGO_INTRA_ALPHA_US_DEFAULT) * 1e-6;
    m->intra_beta = 1.0 / ((beta_mbps > 0 ? beta_mbps : GS_ALGO_INTRA_BETA_MBPS_DEFAULT) * 1e6);
}

/* Pipeline slices of a message of b bytes (at least 1). */
static double cost_slices(double b, size_t slice_bytes)
{
    const double s = (slice_bytes > 0) ? b / (double)slice_bytes : 1.0;

    return (s < 1.0) ? 1.0 : (double)(size_t)(s + 0.999999);
}

/*
 * Whether an unsliced algorithm pays one more pass over its staged bytes:
 * its host's working set @p ws reaches the last-level cache, or (one host on
 * shared memory) its largest message @p msg fills a ring, so that the
 * sender stalls until the receiver, itself busy sending, drains it.
 * Measured on 4 ranks with 1 MiB rings: Rabenseifner (first message b/2)
 * 1.2 ms at 1 MiB and 2.2-3.3 ms at 2 MiB against the ring's 1.3 and 2.0-2.5;
 * with 4 MiB rings it stayed ahead at 2 MiB.
 */
static int cost_spills(const gs_algo_model_t *m, double ws, double msg)
{
    return (ws >= m->cache_bytes) || ((m->ring_bytes > 0.0) && (msg >= m->ring_bytes));
}

static double cost_allreduce(const gs_algo_model_t *m, gs_algo_t algo, int n, double b,
                             size_t slice_bytes, int sharing)
{
    const double a = m->alpha, be = m->beta, g = m->gamma;
    const int p = gs__rd_pof2(n);
    const double lp = (double)gs__rd_log2(p);
    const double fold = (p != n) ? 1.0 : 0.0;
    const double fn = (double)n;

    switch (algo) {
    case GS_ALGO_RING: {
        /* When a byte takes longer to cross the link than to reduce (a real
         * network, not loopback, where the same cores do both), the ring's
         * slices hide the reduction behind the next slice's transfer. */
        const double s = cost_slices(b / fn, slice_bytes);
        const double hidden = (be > g) ? (fn - 1.0) / fn * b * g * (1.0 - 1.0 / s) : 0.0;
        return 2.0 * (fn - 1.0) * a + 2.0 * (fn - 1.0) / fn * b * be + (fn - 1.0) / fn * b * g -
               hidden;
    }
    /* The unsliced algorithms stage whole messages (b for recursive doubling,
     * b/2 for Rabenseifner's first halving) while touching the whole vector:
     * a working set of 2b and 1.5b. When the working sets of the
     * ranks sharing this host's last-level cache (@p sharing) exceed it, the
     * staged bytes come back from memory, one more pass that the ring's
     * cache-sized slices avoid (cost_spills). Measured on the 2-core VM
     * (32 MiB L3, 4 ranks on one host): the ring ahead of Rabenseifner from
     * 2 MiB over shared memory (1 MiB rings) and from 16 MiB over loopback
     * TCP; Rabenseifner ahead from 16 KiB to 1 MiB and to 4 MiB. */
    case GS_ALGO_RECURSIVE_DOUBLING:
        return (lp + 2.0 * fold) * (a + b * be) + (lp + fold) * b * g +
               (cost_spills(m, 2.0 * b * sharing, b) ? (lp + fold) * b * g : 0.0);
    case GS_ALGO_RABENSEIFNER:
        return 2.0 * lp * a + 2.0 * ((double)p - 1.0) / (double)p * b * be +
               ((double)p - 1.0) / (double)p * b * g + fold * (2.0 * (a + b * be) + b * g) +
               (cost_spills(m, 1.5 * b * sharing, b / 2.0) ? ((double)p - 1.0) / (double)p * b * g
                                                           : 0.0);
    case GS_ALGO_TREE: {
        const double depth = (double)gs__dtree_depth(n);
        const double half = b / 2.0;
        const double chunks = cost_slices(half, slice_bytes);
        const double chunk = half / chunks;
        /* Bytes the busiest rank sends and reduces (pattern_tree.h shapes). */
        const double sent = (n == 2) ? b : (n == 3) ? 1.5 * b : 2.0 * b;
        const double reduced = (n == 2) ? 0.5 * b : b;
        return 2.0 * depth * (a + chunk * be) + sent * be + reduced * g;
    }
    default:
        return -1.0;
    }
}

static double cost_rooted(const gs_algo_model_t *m, gs_algo_t algo, int n, double b,
                          size_t slice_bytes, int reduces)
{
    const double per_byte = m->beta + (reduces ? m->gamma : 0.0);

    switch (algo) {
    case GS_ALGO_CHAIN: {
        const double s = cost_slices(b, slice_bytes);
        return ((double)n - 2.0 + s) * (m->alpha + b / s * per_byte);
    }
    case GS_ALGO_BINOMIAL:
        return (double)gs__binom_rounds(n) * (m->alpha + b * per_byte);
    default:
        return -1.0;
    }
}

/*
 * Gather and scatter of b bytes per rank (algo_vcoll.c's formulas). Both
 * move (n-1)b through the root's link. Direct pays n-1 messages there;
 * binomial pays ceil(log2 n) rounds but stages subtrees in scratch, and
 * the root rotates them into place: about (n-1)b more bytes copied, charged
 * at the reduction rate gamma (a memory pass). So binomial for small
 * blocks, direct for large, as MPI implementations choose.
 */
static double cost_gather(const gs_algo_model_t *m, gs_algo_t algo, int n, double b)
{
    const double fn = (double)n;

    switch (algo) {
    case GS_ALGO_DIRECT:
        return (fn - 1.0) * (m->alpha + b * m->beta);
    case GS_ALGO_BINOMIAL:
        return (double)gs__binom_rounds(n) * m->alpha + (fn - 1.0) * b * (m->beta + m->gamma);
    default:
        return -1.0;
    }
}

/*
 * algo_hier.c's formula: ring reduce-scatter and all-gather inside a host
 * (intra parameters), the ring all-reduce of B/m between hosts, where the m
 * rings of a host share its link, so that link carries 2(H-1)/H B. Uneven
 * hosts: m is the largest host, and the busiest rank runs up to
 * ceil(max/min) rings between hosts one after the other.
 */
static double cost_hier(const gs_algo_model_t *m, const gs_algo_shape_t *sh, double b,
                        size_t slice_bytes)
{
    const double fm = (double)sh->max_local;
    const double fh = (double)sh->nhosts;
    const int runs_int = (sh->max_local + sh->min_local - 1) / sh->min_local; /* ceil(max/min) */
    const double runs = (double)runs_int;
    const double intra = 2.0 * (fm - 1.0) * m->intra_alpha +
                         2.0 * (fm - 1.0) / fm * b * m->intra_beta + (fm - 1.0) / fm * b * m->gamma;
    const double s = cost_slices(b / (fh * fm), slice_bytes);
    const double hidden =
        (m->beta > m->gamma) ? (fh - 1.0) / fh * (b / fm) * m->gamma * (1.0 - 1.0 / s) : 0.0;
    const double inter = runs * 2.0 * (fh - 1.0) * m->alpha + 2.0 * (fh - 1.0) / fh * b * m->beta +
                         (fh - 1.0) / fh * (b / fm) * m->gamma - hidden;

    return intra + inter;
}

double gs__algo_cost(const gs_algo_model_t *model, gs_coll_kind_t kind, gs_algo_t algo, int n,
                     size_t bytes, size_t slice_bytes)
{
    const gs_algo_shape_t flat = {.n = n, .nhosts = n, .min_local = 1, .max_local = 1};

    return gs__algo_cost_shape(model, kind, algo, &flat, bytes, slice_bytes);
}

double gs__algo_cost_shape(const gs_algo_model_t *model, gs_coll_kind_t kind, gs_algo_t algo,
                           const gs_algo_shape_t *shape, size_t bytes, size_t slice_bytes)
{
    gs_algo_model_t def;
    gs_algo_model_t local;
    const gs_algo_model_t *m = model;
    const double b = (double)bytes;
    const int n = shape->n;
    const double fn = (double)n;

    if (!gs__algo_offers(kind, algo) || (algo == GS_ALGO_AUTO) || (algo == GS_ALGO_NATIVE) ||
        (n < 1)) {
        return -1.0;
    }
    if ((m == NULL) || (m->alpha <= 0.0)) {
        gs__algo_model_init(&def, 0, 0, 0);
        m = &def;
    }
    if (algo == GS_ALGO_HIERARCHICAL) {
        /* Offered only where it differs from the ring: several hosts, and
         * some host with several ranks. It still runs anywhere if forced. */
        if ((shape->nhosts < 2) || (shape->max_local < 2) || (shape->min_local < 1) ||
            (shape->nhosts * shape->min_local > n)) {
            return -1.0;
        }
        return cost_hier(m, shape, b, slice_bytes);
    }
    if (n == 1) {
        return 0.0;
    }
    if (m->flat_intra) {
        /* One host, shared memory between every pair: the flat algorithms'
         * links are intra-host links too. */
        local = *m;
        local.alpha = m->intra_alpha;
        local.beta = m->intra_beta;
        m = &local;
    }
    switch (kind) {
    case GS_COLL_ALLREDUCE:
        return cost_allreduce(m, algo, n, b, slice_bytes,
                              (shape->max_local > 1) ? shape->max_local : 1);
    case GS_COLL_BROADCAST:
        return cost_rooted(m, algo, n, b, slice_bytes, 0);
    case GS_COLL_REDUCE:
        return cost_rooted(m, algo, n, b, slice_bytes, 1);
    case GS_COLL_ALLGATHER:
        return (fn - 1.0) * (m->alpha + b * m->beta);
    case GS_COLL_REDUCE_SCATTER:
        return (fn - 1.0) * (m->alpha + b * (m->beta + m->gamma));
    case GS_COLL_ALLTOALL:
        return (fn - 1.0) * (m->alpha + b * m->beta);
    case GS_COLL_BARRIER:
        return (double)gs__binom_rounds(n) * m->alpha;
    case GS_COLL_GATHER:
    case GS_COLL_SCATTER:
        return cost_gather(m, algo, n, b);
    case GS_COLL_ALLGATHERV:
    case GS_COLL_ALLTOALLV:
        /* b is this rank's own part: only one algorithm is offered, so the
         * ranks (whose parts differ) cannot choose differently. */
        return (fn - 1.0) * (m->alpha + b * m->beta);
    case GS_COLL_REDUCE_SCATTERV:
        return (fn - 1.0) * (m->alpha + b * (m->beta + m->gamma));
    default:
        return m->alpha + b * m->beta;
    }
}

gs_algo_t gs__algo_choose(const gs_algo_model_t *m, gs_coll_kind_t kind, int n, size_t bytes,
                          size_t slice_bytes)
{
    const gs_algo_shape_t flat = {.n = n, .nhosts = n, .min_local = 1, .max_local = 1};

    return gs__algo_choose_shape(m, kind, &flat, bytes, slice_bytes);
}

gs_algo_t gs__algo_choose_shape(const gs_algo_model_t *m, gs_coll_kind_t kind,
                                const gs_algo_shape_t *shape, size_t bytes, size_t slice_bytes)
{
    const int n = shape->n;
    gs_algo_t best = GS_ALGO_AUTO;
    double best_cost = 0.0;

    if ((unsigned)kind >= GS_COLL_KIND_COUNT) {
        return GS_ALGO_AUTO;
    }
    for (int a = 1; a < GS_ALGO_COUNT; a++) {
        const double c = gs__algo_cost_shape(m, kind, (gs_algo_t)a, shape, bytes, slice_bytes);

        /* On a tie the later algorithm wins. Ties happen at n = 2, where
         * ring and Rabenseifner are the same exchange and the unsliced
         * Rabenseifner measured 10-30% faster up to 1 MiB. One rank costs
         * nothing anywhere: keep the first (ring, chain or direct). */
        if ((c >= 0.0) &&
            ((best == GS_ALGO_AUTO) || (c < best_cost) || ((c == best_cost) && (n > 1)))) {
            best = (gs_algo_t)a;
            best_cost = c;
        }
    }
    return best;
}

/* The host layout of the context as the model sees it (unknown: one rank per host). */
static gs_algo_shape_t algo_shape(const gs_algo_ctx_t *ctx)
{
    gs_algo_shape_t sh = {.n = ctx->size, .nhosts = ctx->size, .min_local = 1, .max_local = 1};

    if (ctx->hosts.nhosts > 0) {
        sh.nhosts = ctx->hosts.nhosts;
        sh.min_local = ctx->hosts.min_local;
        sh.max_local = ctx->hosts.max_local;
    }
    return sh;
}

/* Bytes the model is asked about: the whole vector, or one rank's block. */
static size_t algo_bytes(const gs_coll_desc_t *d)
{
    return d->count * gs__dtype_size(d->dtype);
}

/* Size class of a message: 0 for empty, else floor(log2 bytes) + 1, at most 63. */
static int algo_size_class(size_t bytes)
{
    int c = 0;

    while ((bytes > 0) && (c < 63)) {
        bytes >>= 1;
        c++;
    }
    return c;
}

/* INFO line, once per (collective, path and scheme, size class) per
 * communicator. The host path's plain line reads as it always has. */
static void algo_log_choice(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, const gs_algo_plan_t *plan)
{
    const size_t bytes = algo_bytes(d);
    const int cls = algo_size_class(bytes);
    const uint64_t bit = 1ull << cls;
    const gs_algo_shape_t shape = algo_shape(ctx);
    const int row = (int)plan->path * GS_SCHEME_COUNT + (int)plan->scheme;
    char costs[320];
    char what[96];
    size_t used = 0;

    if (!gs__log_enabled(GS_LOG_INFO, GS_SUBSYS_ALGO) || ((ctx->logged[d->kind][row] & bit) != 0)) {
        return;
    }
    ctx->logged[d->kind][row] |= bit;
    costs[0] = '\0';
    for (int a = 1; (a < GS_ALGO_COUNT) && (used < sizeof(costs)) &&
                    (plan->scheme == GS_SCHEME_PLAIN) && (plan->algo != GS_ALGO_NATIVE);
         a++) {
        const double c = gs__algo_cost_shape(&ctx->model, d->kind, (gs_algo_t)a, &shape, bytes,
                                             ctx->slice_bytes);
        if (c >= 0.0) {
            const int w = snprintf(costs + used, sizeof(costs) - used, "%s%s %.1f us",
                                   (used > 0) ? ", " : "", algo_names[a], c * 1e6);
            used += (w > 0) ? (size_t)w : 0;
        }
    }
    snprintf(what, sizeof(what), "%s%s%s%s",
             (plan->scheme == GS_SCHEME_PLAIN) ? algo_names[plan->algo]
                                               : scheme_names[plan->scheme],
             (plan->scheme == GS_SCHEME_PLAIN) ? ""
             : plan->device_codec              ? " compressed (GPU codecs)"
                                               : " compressed",
             (plan->path == GS_PATH_HOST) ? "" : " on the ",
             (plan->path == GS_PATH_HOST) ? "" : path_names[plan->path]);
    if (plan->path != GS_PATH_HOST) {
        snprintf(what + strlen(what), sizeof(what) - strlen(what), " path");
    }
    GS_INFO(ALGO, "%s of %zu bytes (size class %llu..%llu) on %d ranks, %d hosts: %s (%s%s%s)",
            coll_names[d->kind], bytes, (cls == 0) ? 0ull : (unsigned long long)(bit >> 1),
            (cls == 0) ? 0ull : (unsigned long long)(bit - 1ull), ctx->size, shape.nhosts, what,
            plan->why, (costs[0] != '\0') ? "; model: " : "", costs);
}

const char *gs__algo_name(gs_algo_t algo)
{
    return ((unsigned)algo < GS_ALGO_COUNT) ? algo_names[algo] : "unknown";
}

int gs__algo_offers(gs_coll_kind_t kind, gs_algo_t algo)
{
    if (((unsigned)kind >= GS_COLL_KIND_COUNT) || ((unsigned)algo >= GS_ALGO_COUNT)) {
        return 0;
    }
    return (algo == GS_ALGO_AUTO) || (algo_table[kind][algo] != NULL);
}

const char *gs__coll_name(gs_coll_kind_t kind)
{
    return ((unsigned)kind < GS_COLL_KIND_COUNT) ? coll_names[kind] : "unknown";
}

static int algo_lookup(const char *name, size_t len, gs_algo_t *out)
{
    for (int a = 0; a < GS_ALGO_COUNT; a++) {
        if ((strlen(algo_names[a]) == len) && (strncmp(algo_names[a], name, len) == 0)) {
            *out = (gs_algo_t)a;
            return 0;
        }
    }
    return -1;
}

static int coll_lookup(const char *name, size_t len, gs_coll_kind_t *out)
{
    for (int k = 0; k < GS_COLL_KIND_COUNT; k++) {
        if ((strlen(coll_names[k]) == len) && (strncmp(coll_names[k], name, len) == 0)) {
            *out = (gs_coll_kind_t)k;
            return 0;
        }
    }
    return -1;
}

gs_status_t gs__algo_policy_parse(const char *text, gs_algo_policy_t *out)
{
    gs_algo_policy_t p;
    const char *s = text;

    memset(&p, 0, sizeof(p));
    while ((s != NULL) && (*s != '\0')) {
        const char *end = strchr(s, ',');
        const size_t len = (end != NULL) ? (size_t)(end - s) : strlen(s);
        const char *colon = memchr(s, ':', len);
        gs_algo_t algo;

        if (colon == NULL) {
            /* A bare name applies to every collective that offers it. */
            int used = 0;
            if (algo_lookup(s, len, &algo) != 0) {
                return gs__error_set(GS_ERR_INVALID_ARG, "GS_ALGO: unknown algorithm '%.*s'",
                                     (int)len, s);
            }
            for (int k = 0; k < GS_COLL_KIND_COUNT; k++) {
                if ((algo == GS_ALGO_AUTO) || (algo_table[k][algo] != NULL)) {
                    p.forced[k] = algo;
                    used = 1;
                }
            }
            if (!used) {
                return gs__error_set(GS_ERR_INVALID_ARG, "GS_ALGO: no collective implements '%.*s'",
                                     (int)len, s);
            }
        } else {
            gs_coll_kind_t kind;
            const size_t clen = (size_t)(colon - s);
            if (coll_lookup(s, clen, &kind) != 0) {
                return gs__error_set(GS_ERR_INVALID_ARG, "GS_ALGO: unknown collective '%.*s'",
                                     (int)clen, s);
            }
            if ((algo_lookup(colon + 1, len - clen - 1, &algo) != 0) ||
                ((algo != GS_ALGO_AUTO) && (algo_table[kind][algo] == NULL))) {
                return gs__error_set(GS_ERR_INVALID_ARG,
                                     "GS_ALGO: '%.*s' is not an algorithm of %s",
                                     (int)(len - clen - 1), colon + 1, coll_names[kind]);
            }
            p.forced[kind] = algo;
        }
        s = (end != NULL) ? end + 1 : NULL;
    }
    *out = p;
    return GS_OK;
}

const char *gs__path_name(gs_path_t path)
{
    return ((unsigned)path < GS_PATH_COUNT) ? path_names[path] : "unknown";
}

const char *gs__scheme_name(gs_scheme_t scheme)
{
    return ((unsigned)scheme < GS_SCHEME_COUNT) ? scheme_names[scheme] : "unknown";
}

/*
 * The scheme of a compressed all-reduce. Sparsifiers take their own
 * schemes unless the result would be at least as dense as the tensor:
 * random-k when k values are fewer bytes than the tensor, top-k when the
 * union of n * k (index, value) pairs is. Anything the two-phase scheme
 * would reject goes there, to be reported.
 */
static gs_scheme_t algo_scheme(const gs_coll_desc_t *d, int n)
{
    gs_codec_resolved_t rc;
    gs_codec_params_t p;
    size_t dense, pair_bytes;

    if (d->codec == NULL) {
        return GS_SCHEME_PLAIN;
    }
    if ((gs__codec_resolve(d->codec, &rc) != GS_OK) || ((rc.ops->flags & GS_CODEC_F_SPARSE) == 0) ||
        !gs__dtype_is_float(d->dtype) || (d->count > GS_CODEC_MAX_COUNT)) {
        gs__error_clear();
        return GS_SCHEME_TWO_PHASE;
    }
    if (gs__codec_params(&rc, d->count, &p) != GS_OK) {
        gs__error_clear(); /* past 2^32 - 1 elements: the chunks of the two-phase path may fit */
        return GS_SCHEME_TWO_PHASE;
    }
    dense = d->count * gs__dtype_size(d->dtype); /* count <= SIZE_MAX / 16: no overflow */
    if (rc.ops->wire_id == GS_CODEC_RANDK) {
        return ((size_t)p.param * sizeof(float) >= dense) ? GS_SCHEME_TWO_PHASE
                                                          : GS_SCHEME_SPARSE_SHARED;
    }
    /* top-k: the union of n * k pairs against the dense tensor, as
     * n * 8k >= dense without overflow. */
    pair_bytes = (size_t)p.param * (sizeof(uint32_t) + sizeof(float));
    return (pair_bytes >= (dense + (size_t)n - 1) / (size_t)n) ? GS_SCHEME_TWO_PHASE
                                                               : GS_SCHEME_SPARSE_GATHER;
}

/*
 * Whether the codec kernels can run a two-phase all-reduce of *d on the
 * device: a build with CUDA, f32 data (the kernels take f32; other float
 * types are staged and converted on the CPU) and no zstd stage (zstd runs
 * on the CPU only).
 */
static int algo_device_codec(const gs_coll_desc_t *d)
{
#ifdef GS_WITH_CUDA
    gs_codec_resolved_t rc;

    if ((d->dtype != GS_DTYPE_F32) || (gs__codec_resolve(d->codec, &rc) != GS_OK)) {
        gs__error_clear();
        return 0;
    }
    return rc.zstd == GS_CODEC_ZSTD_OFF;
#else
    (void)d;
    return 0;
#endif
}

/*
 * What a CUDA-aware MPI's native collectives take without any host work
 * (transport/mpi: no f16/bf16, an average is a host-side scale, counts
 * above INT_MAX are declined, and a declined call would fall back to
 * gradsync's algorithms, which cannot read device memory).
 */
static int algo_mpi_cuda_ok(const gs_coll_desc_t *d)
{
    const int kind_ok = (d->kind == GS_COLL_ALLREDUCE) || (d->kind == GS_COLL_BROADCAST) ||
                        (d->kind == GS_COLL_ALLGATHER) || (d->kind == GS_COLL_REDUCE_SCATTER);
    const int dtype_ok = (d->dtype != GS_DTYPE_F16) && (d->dtype != GS_DTYPE_BF16);
    const int op_ok =
        (d->kind == GS_COLL_BROADCAST) || (d->kind == GS_COLL_ALLGATHER) || (d->op != GS_OP_AVG);

    return kind_ok && dtype_ok && op_ok && (d->count <= 2147483647u);
}

/*
 * The path of device buffers: NCCL when the context has it and either the
 * call is plain with no gradsync algorithm forced (GS_ALGO_AUTO, or
 * GS_ALGO_NATIVE, which asks for the transport's own collectives), or it
 * is a two-phase compressed call whose codec runs on the device (its
 * payloads then move by grouped NCCL sends and receives). Otherwise staged
 * through host memory, where every gradsync algorithm runs as on host
 * buffers (and the codec kernels still run on the device when they can).
 */
static gs_path_t algo_path(const gs_algo_ctx_t *ctx, const gs_coll_desc_t *d,
                           const gs_algo_plan_t *plan)
{
    /* A capability whose runner is not built in (no NCCL in this build) is none. */
    const int nccl = ((ctx->dev_caps & GS_DEV_CAP_NCCL) != 0) && (path_table[GS_PATH_NCCL] != NULL);

    if (d->mem != GS_MEM_DEVICE) {
        return GS_PATH_HOST;
    }
    /* NCCL has no bitwise reductions: those calls are staged, where the CPU reduces. */
    if (nccl && (plan->scheme == GS_SCHEME_PLAIN) && !gs__op_is_bitwise(d->op) &&
        ((plan->algo == GS_ALGO_AUTO) || (plan->algo == GS_ALGO_NATIVE))) {
        return GS_PATH_NCCL;
    }
    if (nccl && (plan->scheme == GS_SCHEME_TWO_PHASE) && plan->device_codec) {
        return GS_PATH_NCCL;
    }
    if (((ctx->dev_caps & GS_DEV_CAP_MPI_CUDA) != 0) && (plan->scheme == GS_SCHEME_PLAIN) &&
        ((plan->algo == GS_ALGO_AUTO) || (plan->algo == GS_ALGO_NATIVE)) && algo_mpi_cuda_ok(d)) {
        return GS_PATH_MPI_CUDA;
    }
    return GS_PATH_STAGED;
}

gs_status_t gs__algo_plan(gs_algo_ctx_t *ctx, const gs_algo_policy_t *policy,
                          const gs_coll_desc_t *d, gs_algo_plan_t *plan_out)
{
    gs_algo_plan_t plan = {
        .path = GS_PATH_HOST, .scheme = GS_SCHEME_PLAIN, .algo = d->algo, .why = "caller"};

    if ((unsigned)d->kind >= GS_COLL_KIND_COUNT) {
        return gs__error_set(GS_ERR_INTERNAL, "%s: unknown collective %d", ctx->opname,
                             (int)d->kind);
    }
    if ((plan.algo == GS_ALGO_AUTO) && (policy != NULL)) {
        plan.algo = policy->forced[d->kind];
        plan.why = "GS_ALGO";
    }
    if (d->kind == GS_COLL_ALLREDUCE) {
        plan.scheme = algo_scheme(d, ctx->size);
    }
    plan.device_codec =
        (d->mem == GS_MEM_DEVICE) && (plan.scheme == GS_SCHEME_TWO_PHASE) && algo_device_codec(d);
    plan.path = algo_path(ctx, d, &plan);
    if (path_table[plan.path] == NULL) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "%s: the %s path is not built into this library (device buffers "
                             "need a build with GS_WITH_CUDA)",
                             ctx->opname, path_names[plan.path]);
    }
    if (plan.scheme != GS_SCHEME_PLAIN) {
        plan.algo = GS_ALGO_AUTO;
        plan.why = "codec";
    } else if ((plan.path == GS_PATH_NCCL) || (plan.path == GS_PATH_MPI_CUDA)) {
        plan.algo = GS_ALGO_NATIVE;
        plan.why = "device buffers";
    } else {
        if (plan.algo == GS_ALGO_AUTO) {
            const gs_algo_shape_t shape = algo_shape(ctx);
            plan.algo = gs__algo_choose_shape(&ctx->model, d->kind, &shape, algo_bytes(d),
                                              ctx->slice_bytes);
            plan.why = "cost model";
        }
        if (((unsigned)plan.algo >= GS_ALGO_COUNT) || (algo_table[d->kind][plan.algo] == NULL)) {
            return gs__error_set(GS_ERR_UNSUPPORTED, "%s: algorithm '%s' does not implement %s",
                                 ctx->opname, gs__algo_name(plan.algo), coll_names[d->kind]);
        }
    }
    algo_log_choice(ctx, d, &plan);
    *plan_out = plan;
    return GS_OK;
}

gs_status_t gs__algo_run_host(gs_algo_ctx_t *ctx, gs_coll_desc_t *d, const gs_algo_plan_t *plan)
{
    switch (plan->scheme) {
    case GS_SCHEME_PLAIN:
        GS_TRACE(ALGO, "%s: %s count %zu with %s", ctx->opname, coll_names[d->kind], d->count,
                 algo_names[plan->algo]);
        return algo_table[d->kind][plan->algo](ctx, d);
    case GS_SCHEME_TWO_PHASE:
        return gs__compressed_allreduce(ctx, d);
    case GS_SCHEME_SPARSE_GATHER:
    case GS_SCHEME_SPARSE_SHARED:
        return gs__sparse_allreduce(ctx, d, plan->scheme);
    default:
        return gs__error_set(GS_ERR_INTERNAL, "%s: unknown scheme %d", ctx->opname,
                             (int)plan->scheme);
    }
}

gs_status_t gs__algo_run(gs_algo_ctx_t *ctx, const gs_algo_policy_t *policy, gs_coll_desc_t *d)
{
    gs_algo_plan_t plan;
    gs_status_t status = gs__algo_plan(ctx, policy, d, &plan);

    if (status != GS_OK) {
        return status;
    }
    d->algo = plan.algo;
    return path_table[plan.path](ctx, d, &plan);
}
