/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cost model of selection (algo_select.c asks it).
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

#include "algo/select/select.h"

#include "algo/prim/pattern_rd.h"
#include "algo/prim/pattern_tree.h"
#include "core/env_table.h"
#include "core/llc.h"


/* The last-level cache (core/llc.h), or 32 MiB when sysfs does not say. */
static double algo_llc_bytes(void)
{
    const uint64_t b = gs__llc_bytes();

    return (b != 0) ? (double)b : 32.0 * 1048576.0;
}

void gs__algo_model_init(gs__algo_model_t *m, int alpha_us, int beta_mbps, int gamma_mbps)
{
    m->alpha = (alpha_us > 0 ? alpha_us : GS_ALGO_ALPHA_US_DEFAULT) * 1e-6;
    m->beta = 1.0 / ((beta_mbps > 0 ? beta_mbps : GS_ALGO_BETA_MBPS_DEFAULT) * 1e6);
    m->gamma = 1.0 / ((gamma_mbps > 0 ? gamma_mbps : GS_ALGO_GAMMA_MBPS_DEFAULT) * 1e6);
    m->cache_bytes = algo_llc_bytes();
    m->flat_intra = 0;
    m->ring_bytes = 0.0;
    gs__algo_model_set_intra(m, 0, 0);
}

void gs__algo_model_set_intra(gs__algo_model_t *m, int alpha_us, int beta_mbps)
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
static int cost_spills(const gs__algo_model_t *m, double ws, double msg)
{
    return (ws >= m->cache_bytes) || ((m->ring_bytes > 0.0) && (msg >= m->ring_bytes));
}

static double cost_allreduce(const gs__algo_model_t *m, gs_algo_t algo, int n, double b,
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

static double cost_rooted(const gs__algo_model_t *m, gs_algo_t algo, int n, double b,
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
static double cost_gather(const gs__algo_model_t *m, gs_algo_t algo, int n, double b)
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
static double cost_hier(const gs__algo_model_t *m, const gs__algo_shape_t *sh, double b,
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

double gs__algo_cost(const gs__algo_model_t *model, gs__coll_kind_t kind, gs_algo_t algo, int n,
                     size_t bytes, size_t slice_bytes)
{
    const gs__algo_shape_t flat = {.n = n, .nhosts = n, .min_local = 1, .max_local = 1};

    return gs__algo_cost_shape(model, kind, algo, &flat, bytes, slice_bytes);
}

/* Memory traffic the host moves per second when every rank copies at
 * once, as the model assumes when GS_TUNE does not measure it: 20 GB/s
 * (this machine kind's two-thread memcpy moves 27.7 GB/s of traffic). */
#define ALGO_MEM_BYTES_PER_S 20e9
/* One process_vm_readv call's fixed cost (page pinning, the syscall). */
#define ALGO_CMA_CALL_S 2e-6
/* Bytes a single-copy read brings in at a time (algo_shm.c's piece). */
#define ALGO_CMA_PIECE_BYTES (256.0 * 1024.0)

/*
 * The host segment's designs: phases at the intra-host alpha plus the memory
 * traffic at the host's rate. Their reductions stream slots and buffers the
 * traffic term already counts, at memory speed (docs/bench.md, "Reductions
 * at memory speed"), so no gamma term: the network-fitted gamma (800 MB/s)
 * priced the one-round design's reduction of every slot at 8x what an f32
 * sum takes and chose two phases at 4 KiB, where one is faster (measured 4
 * ranks: one-round about 12 us, chunked about 16-18 us).
 */
double gs__algo_cost_shm(const gs__algo_model_t *m, const gs__algo_shape_t *sh, size_t bytes,
                         int design)
{
    const double fn = (double)sh->n;
    const double s = (double)bytes;
    const double mem = 1.0 / ALGO_MEM_BYTES_PER_S;
    const double slot = (sh->shm_slot > 0) ? (double)sh->shm_slot : 1048576.0;

    if ((sh->shm == 0) || (sh->n < 1)) {
        return -1.0;
    }
    switch (design) {
    case GS_SHM_ONE_ROUND:
        if (s > slot) {
            return -1.0;
        }
        return m->intra_alpha + fn * (fn + 3.0) * s * mem;
    case GS_SHM_CHUNKED: {
        const double chunks = (s > slot) ? (double)(size_t)((s + slot - 1.0) / slot) : 1.0;
        return 2.0 * chunks * m->intra_alpha + 5.0 * fn * s * mem;
    }
    case GS_SHM_SINGLE_COPY: {
        const double pieces =
            (double)(size_t)((s / fn + ALGO_CMA_PIECE_BYTES - 1.0) / ALGO_CMA_PIECE_BYTES);
        if (sh->shm < 2) {
            return -1.0;
        }
        return 3.0 * m->intra_alpha + (fn - 1.0) * (pieces + 1.0) * ALGO_CMA_CALL_S +
               3.0 * fn * s * mem;
    }
    default:
        return -1.0;
    }
}

int gs__algo_shm_design(const gs__algo_model_t *m, const gs__algo_shape_t *sh, size_t bytes,
                        double *cost_out)
{
    int best = GS_SHM_CHUNKED;
    double best_cost = gs__algo_cost_shm(m, sh, bytes, GS_SHM_CHUNKED);

    for (int k = 0; k < GS_SHM_DESIGN_COUNT; k++) {
        const double c = gs__algo_cost_shm(m, sh, bytes, k);
        if ((c >= 0.0) && (c < best_cost)) {
            best = k;
            best_cost = c;
        }
    }
    *cost_out = best_cost;
    return best;
}

static double algo_shm_best(const gs__algo_model_t *m, const gs__algo_shape_t *sh, size_t bytes)
{
    double c = -1.0;

    (void)gs__algo_shm_design(m, sh, bytes, &c);
    return c;
}

uint64_t gs__algo_traffic(gs__coll_kind_t kind, gs_algo_t algo, int design, int n, size_t bytes)
{
    const double fn = (double)n;
    const double s = (double)bytes;
    double per_rank = 0.0;

    if ((kind != GS_COLL_ALLREDUCE) || (n < 2)) {
        return 0;
    }
    if (algo == GS_ALGO_SHM) {
        per_rank = (design == GS_SHM_ONE_ROUND)     ? (fn + 3.0) * s
                   : (design == GS_SHM_SINGLE_COPY) ? (3.0 - 1.0 / fn) * s
                                                    : 5.0 * s;
    } else if (algo == GS_ALGO_RING) {
        per_rank = (5.0 + 1.0 / fn) * s; /* through the pair rings: a copy in and out a step */
    }
    return (uint64_t)(per_rank * fn);
}

double gs__algo_cost_shape(const gs__algo_model_t *model, gs__coll_kind_t kind, gs_algo_t algo,
                           const gs__algo_shape_t *shape, size_t bytes, size_t slice_bytes)
{
    gs__algo_model_t def;
    gs__algo_model_t local;
    const gs__algo_model_t *m = model;
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
    if (algo == GS_ALGO_SHM) {
        /* Offered where a host segment serves the communicator. */
        if (shape->shm == 0) {
            return -1.0;
        }
        if (kind == GS_COLL_BARRIER) {
            return m->intra_alpha;
        }
        return (n == 1) ? 0.0 : algo_shm_best(m, shape, bytes);
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

gs_algo_t gs__algo_choose(const gs__algo_model_t *m, gs__coll_kind_t kind, int n, size_t bytes,
                          size_t slice_bytes)
{
    const gs__algo_shape_t flat = {.n = n, .nhosts = n, .min_local = 1, .max_local = 1};

    return gs__algo_choose_shape(m, kind, &flat, bytes, slice_bytes);
}

gs_algo_t gs__algo_choose_shape(const gs__algo_model_t *m, gs__coll_kind_t kind,
                                const gs__algo_shape_t *shape, size_t bytes, size_t slice_bytes)
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

/*
 * The compressed reduce-scatter's schemes (algo_compressed.c, algo_comp_hier.c),
 * S = @p block_bytes per rank, rho = @p ratio (encoded / raw bytes), H hosts
 * of m ranks whose m ranks share the host's link (beta), shared memory
 * inside a host (intra parameters):
 *   flat:    alpha + m (n - m) S rho beta + (m - 1) S rho beta_i
 *   two-hop: (m - 1) alpha_i + (m - 1)/m n S (beta_i + gamma)
 *            + alpha + m (H - 1) S rho beta
 * The codec's own time is the same n - 1 encodes and decodes in both (the
 * two-hop scheme encodes H - 1), so it is left out. Two-hop: -1 unless
 * several hosts have the same number (>= 2) of ranks. All on one host
 * (flat_intra): every link is intra. Pure.
 */
double gs__algo_cost_shard_rs(const gs__algo_model_t *model, const gs__algo_shape_t *sh,
                              size_t block_bytes, double ratio, int two_hop)
{
    gs__algo_model_t def;
    const gs__algo_model_t *m = model;
    const double s = (double)block_bytes;
    const double fn = (double)sh->n;
    const double fm = (double)sh->max_local;
    const double fh = (double)sh->nhosts;
    const double beta_inter = ((model != NULL) && model->flat_intra) ? model->intra_beta : 0.0;

    if ((m == NULL) || (m->alpha <= 0.0)) {
        gs__algo_model_init(&def, 0, 0, 0);
        m = &def;
    }
    if (!two_hop) {
        const double beta = (beta_inter > 0.0) ? beta_inter : m->beta;
        return m->alpha + fm * (fn - fm) * s * ratio * beta +
               (fm - 1.0) * s * ratio * m->intra_beta;
    }
    if ((sh->nhosts < 2) || (sh->min_local != sh->max_local) || (sh->max_local < 2) ||
        m->flat_intra) {
        return -1.0;
    }
    return (fm - 1.0) * m->intra_alpha + (fm - 1.0) / fm * fn * s * (m->intra_beta + m->gamma) +
           m->alpha + fm * (fh - 1.0) * s * ratio * m->beta;
}
