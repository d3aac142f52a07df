/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GS_TUNE=probe: measure the cost model's parameters at init instead of
 * trusting the defaults. Every rank exchanges small and large messages with
 * its ring neighbours (host-grouped order), times a reduction, and then all
 * ranks agree on the slowest value of each parameter, so every rank's model
 * is identical and picks the same algorithm (a requirement: ranks that pick
 * different algorithms would mismatch). The link to the right neighbour is
 * sampled as an intra-host or an inter-host link, so a job spread over
 * hosts learns both.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/select/select.h"
#include "algo/ctx/ctx_shm.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "core/reduce_cpu.h"

#define PROBE_SMALL_BYTES 8
#define PROBE_SMALL_ITERS 24
#define PROBE_BIG_BYTES (4u << 20)
#define PROBE_BIG_ITERS 4
#define PROBE_REDUCE_ITERS 3
/* Sequence number of the probe's messages: collectives count up from 0
 * and cannot reach it before the probe (which runs before any of them) is done. */
#define PROBE_SEQ 0xffffffu
/* The same for gs__algo_model_agree_local, which runs before or after the probe. */
#define AGREE_SEQ 0xfffffeu

/* What the agreement exchanges: the largest (slowest) value of each; -1: no sample. */
enum { P_ALPHA, P_BETA, P_INTRA_ALPHA, P_INTRA_BETA, P_GAMMA, P_COUNT };

typedef struct probe {
    gs__algo_ctx_t *ctx;
    gs__coll_desc_t desc; /* signature of the probe's tags */
    int left;
    int right;
    uint32_t idx; /* next message number */
} probe_t;

/* Send sbytes to the right neighbour and receive rbytes from the left one. */
static gs_status_t probe_shift(probe_t *p, const void *sbuf, void *rbuf, size_t bytes)
{
    gs__algo_req_t reqs[2];
    size_t expect[2] = {bytes, 0};
    const uint64_t tag = gs__algo_tag(p->ctx, &p->desc, p->idx++);
    gs_status_t status;

    memset(reqs, 0, sizeof(reqs));
    status = gs__algo_irecv(p->ctx, p->left, tag, rbuf, bytes, &reqs[0]);
    if (status == GS_OK) {
        status = gs__algo_isend(p->ctx, p->right, tag, sbuf, bytes, &reqs[1]);
    }
    if (status != GS_OK) {
        gs__algo_release_all(p->ctx, reqs, 2);
        return status;
    }
    return gs__algo_wait_all(p->ctx, reqs, expect, 2);
}

static int probe_cmp(const void *a, const void *b)
{
    const double x = *(const double *)a;
    const double y = *(const double *)b;

    return (x > y) - (x < y);
}

static double probe_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), probe_cmp);
    return v[n / 2];
}

/* Median seconds of @p iters shifts of @p bytes after one warm-up. */
static gs_status_t probe_time_shift(probe_t *p, void *sbuf, void *rbuf, size_t bytes, int iters,
                                    double *out)
{
    double t[PROBE_SMALL_ITERS];
    gs_status_t status = probe_shift(p, sbuf, rbuf, bytes);
    int i;

    for (i = 0; (i < iters) && (status == GS_OK); i++) {
        const uint64_t t0 = gs__now_ns();
        status = probe_shift(p, sbuf, rbuf, bytes);
        t[i] = (double)(gs__now_ns() - t0) * 1e-9;
    }
    if (status == GS_OK) {
        *out = probe_median(t, iters);
    }
    return status;
}

/* Median seconds per byte of reducing two f32 vectors of @p bytes into a third. */
static double probe_gamma(float *dst, const float *a, const float *b, size_t bytes)
{
    double t[PROBE_REDUCE_ITERS];
    const size_t n = bytes / sizeof(float);
    int i;

    gs__reduce(dst, a, b, n, GS_DTYPE_F32, GS_OP_SUM); /* warm-up: fault the pages in */
    for (i = 0; i < PROBE_REDUCE_ITERS; i++) {
        const uint64_t t0 = gs__now_ns();
        gs__reduce(dst, a, b, n, GS_DTYPE_F32, GS_OP_SUM);
        t[i] = (double)(gs__now_ns() - t0) * 1e-9 / (double)bytes;
    }
    return probe_median(t, PROBE_REDUCE_ITERS);
}

/* Every rank ends with the element-wise maximum of every rank's v: n - 1
 * shifts of the running maximum around the ring. */
static gs_status_t probe_agree(probe_t *p, double v[P_COUNT])
{
    double in[P_COUNT];
    const int n = gs__route_n(p->ctx);
    int s;
    int k;

    for (s = 0; s < n - 1; s++) {
        const gs_status_t status = probe_shift(p, v, in, sizeof(in));
        if (status != GS_OK) {
            return status;
        }
        for (k = 0; k < P_COUNT; k++) {
            v[k] = (in[k] > v[k]) ? in[k] : v[k];
        }
    }
    return GS_OK;
}

/* The probe's ring neighbours and the signature of its tags. */
static void probe_setup(gs__algo_ctx_t *ctx, probe_t *p)
{
    const int n = gs__route_n(ctx);
    const int pos = gs__route_pos(ctx);

    memset(p, 0, sizeof(*p));
    p->ctx = ctx;
    p->desc.kind = GS_COLL_BARRIER;
    p->desc.dtype = GS_DTYPE_U8;
    p->desc.root = -1;
    p->desc.count = 0x9e3779b9u; /* a signature no barrier has */
    p->right = gs__route_rank(ctx, (pos + 1) % n);
    p->left = gs__route_rank(ctx, (pos + n - 1) % n);
}

gs_status_t gs__algo_model_agree_local(gs__algo_ctx_t *ctx, gs__algo_model_t *model, int local,
                                       double ring_bytes)
{
    const uint32_t saved_seq = ctx->seq;
    double v[P_COUNT] = {0.0};
    probe_t p;
    gs_status_t status;

    model->flat_intra = 0;
    if (gs__route_n(ctx) < 2) {
        return GS_OK;
    }
    probe_setup(ctx, &p);
    v[0] = local ? 0.0 : 1.0; /* the maximum is 0 only when every rank is local */
    ctx->seq = AGREE_SEQ;
    status = probe_agree(&p, v);
    ctx->seq = saved_seq;
    if (status != GS_OK) {
        return gs__error_wrap(status, "gs_comm_init: agreeing on the shared-memory model");
    }
    model->flat_intra = (v[0] == 0.0);
    if (model->flat_intra) {
        /* The rings live in the cache the data needs; keep an eighth at least. */
        const double n = (double)ctx->size;
        const double left = model->cache_bytes - n * (n - 1.0) * ring_bytes;
        const double floor = model->cache_bytes / 8.0;
        model->cache_bytes = (left > floor) ? left : floor;
        model->ring_bytes = ring_bytes;
    }
    GS_INFO(ALGO,
            "rank %d: cost model prices %s (this rank %s; last-level cache left for data %.1f "
            "MiB)",
            ctx->rank,
            model->flat_intra ? "every algorithm with the intra-host parameters (all ranks "
                                "on one host, shared memory between every pair)"
                              : "the flat algorithms with the network parameters",
            local ? "has shared memory with every peer" : "has a peer over TCP",
            model->cache_bytes / 1048576.0);
    return GS_OK;
}

/* Write v[k] into *dst unless it has no sample or the user set the value. */
static void probe_apply(double *dst, double v, int keep)
{
    if ((v > 0.0) && !keep) {
        *dst = v;
    }
}

gs_status_t gs__algo_probe(gs__algo_ctx_t *ctx, gs__algo_model_t *model, unsigned keep)
{
    const int n = gs__route_n(ctx);
    const uint32_t saved_seq = ctx->seq;
    const uint64_t t_start = gs__now_ns();
    double v[P_COUNT];
    double small = 0.0;
    double big = 0.0;
    probe_t p;
    char *buf;
    gs_status_t status;
    int intra;
    int k;

    if (n < 2) {
        return GS_OK;
    }
    buf = malloc(3 * (size_t)PROBE_BIG_BYTES);
    if (buf == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY,
                             "GS_TUNE=probe: cannot allocate %u bytes of probe buffers; unset "
                             "GS_TUNE to use the model's defaults",
                             3 * PROBE_BIG_BYTES);
    }
    memset(buf, 0, 3 * (size_t)PROBE_BIG_BYTES);
    probe_setup(ctx, &p);
    intra =
        (ctx->hosts.nhosts > 0) && (ctx->hosts.host_of[ctx->rank] == ctx->hosts.host_of[p.right]);
    ctx->seq = PROBE_SEQ;

    status = probe_time_shift(&p, buf, buf + PROBE_BIG_BYTES, PROBE_SMALL_BYTES, PROBE_SMALL_ITERS,
                              &small);
    if (status == GS_OK) {
        status = probe_time_shift(&p, buf, buf + PROBE_BIG_BYTES, PROBE_BIG_BYTES, PROBE_BIG_ITERS,
                                  &big);
    }
    for (k = 0; k < P_COUNT; k++) {
        v[k] = -1.0;
    }
    if (status == GS_OK) {
        const double alpha = (small > 1e-7) ? small : 1e-7;
        const double beta = (big > alpha) ? (big - alpha) / (double)PROBE_BIG_BYTES : 1e-12;
        v[intra ? P_INTRA_ALPHA : P_ALPHA] = alpha;
        v[intra ? P_INTRA_BETA : P_BETA] = beta;
        v[P_GAMMA] = probe_gamma((float *)(void *)(buf + 2 * (size_t)PROBE_BIG_BYTES),
                                 (const float *)(void *)buf,
                                 (const float *)(void *)(buf + PROBE_BIG_BYTES), PROBE_BIG_BYTES);
        status = probe_agree(&p, v);
    }
    ctx->seq = saved_seq;
    free(buf);
    if (status != GS_OK) {
        return gs__error_wrap(status, "GS_TUNE=probe at init");
    }
    /* One host: the only samples are intra-host, and they are the links of
     * every algorithm. */
    if ((v[P_ALPHA] < 0.0) && (v[P_INTRA_ALPHA] > 0.0)) {
        v[P_ALPHA] = v[P_INTRA_ALPHA];
        v[P_BETA] = v[P_INTRA_BETA];
    }
    probe_apply(&model->alpha, v[P_ALPHA], keep & GS_PROBE_KEEP_ALPHA);
    probe_apply(&model->beta, v[P_BETA], keep & GS_PROBE_KEEP_BETA);
    probe_apply(&model->gamma, v[P_GAMMA], keep & GS_PROBE_KEEP_GAMMA);
    probe_apply(&model->intra_alpha, v[P_INTRA_ALPHA], keep & GS_PROBE_KEEP_INTRA_ALPHA);
    probe_apply(&model->intra_beta, v[P_INTRA_BETA], keep & GS_PROBE_KEEP_INTRA_BETA);
    GS_INFO(ALGO,
            "GS_TUNE=probe over %d ranks in %.0f ms: alpha %.1f us, link %.0f MB/s, reduce %.0f "
            "MB/s, intra-host alpha %.1f us, link %.0f MB/s (slowest rank's values; explicit "
            "GS_ALGO_* settings kept)",
            n, (double)(gs__now_ns() - t_start) * 1e-6, model->alpha * 1e6, 1e-6 / model->beta,
            1e-6 / model->gamma, model->intra_alpha * 1e6, 1e-6 / model->intra_beta);
    return GS_OK;
}

/* Sequence number of the host segment's setup messages (before any collective). */
#define SHM_SEQ 0xfffffdu

/* What member 0 tells the others about the segment it made. */
typedef struct shm_offer {
    uint64_t ok; /* 0: none was made (they go without) */
    uint64_t pid;
    int64_t fd;
    gs__shm_hdr_t hdr;
} shm_offer_t;

/* The ranks of this rank's host in host order (@p n_out of them, this one
 * at *me_out): a communicator on one host is all of its ranks. */
static const int *shm_members(const gs__algo_ctx_t *ctx, int *n_out, int *me_out)
{
    const gs__algo_hosts_t *h = &ctx->hosts;

    if ((h->nhosts <= 1) || (h->order == NULL)) {
        *n_out = ctx->size;
        *me_out = ctx->rank;
        return NULL;
    }
    {
        const int g = h->host_of[ctx->rank];

        *n_out = h->first[g + 1] - h->first[g];
        *me_out = h->pos[ctx->rank] - h->first[g];
        return h->order + h->first[g];
    }
}

/* Member 0 of each host makes the segment and names it to every other
 * member, which maps it (a rank alone on its host has none and needs none).
 * Returns the exchange's status; *failed is 1 when this rank should have a
 * segment and has none (why logged). */
static gs_status_t shm_setup_map(probe_t *p, const gs__algo_shm_params_t *sp, gs__host_seg_t *seg,
                                 int *failed)
{
    gs__algo_ctx_t *ctx = p->ctx;
    const uint64_t tag = gs__algo_tag(ctx, &p->desc, p->idx++);
    shm_offer_t offer;
    char why[256];
    gs_status_t status = GS_OK;
    int n;
    int me;
    const int *ranks = shm_members(ctx, &n, &me);

    memset(&offer, 0, sizeof(offer));
    why[0] = '\0';
    *failed = 1;
    if (n < 2) {
        *failed = 0;
        return GS_OK;
    }
    if (me == 0) {
        gs__algo_req_t *reqs = calloc((size_t)n, sizeof(*reqs));

        if (reqs == NULL) {
            return gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_init: no memory for %d requests", n);
        }
        if (gs__host_seg_create(seg, n, sp->slot_bytes, sp->job_id, sp->comm_id, why,
                                sizeof(why)) == GS_OK) {
            seg->ranks = ranks;
            offer.ok = 1;
            offer.pid = (uint64_t)getpid();
            offer.fd = seg->fd;
            offer.hdr = *gs__host_seg_hdr(seg);
            *failed = 0;
        } else {
            GS_WARN("rank %d: no host segment for the collectives on this host (%s); they run "
                    "over the pair rings",
                    ctx->rank, why);
        }
        for (int r = 1; (r < n) && (status == GS_OK); r++) {
            status = gs__algo_isend(ctx, (ranks != NULL) ? ranks[r] : r, tag, &offer, sizeof(offer),
                                    &reqs[r]);
        }
        if (status == GS_OK) {
            status = gs__algo_wait_all(ctx, reqs, NULL, (size_t)n);
        } else {
            gs__algo_release_all(ctx, reqs, (size_t)n);
        }
        free(reqs);
        return status;
    }
    {
        gs__algo_req_t req;
        size_t expect = sizeof(offer);

        memset(&req, 0, sizeof(req));
        status =
            gs__algo_irecv(ctx, (ranks != NULL) ? ranks[0] : 0, tag, &offer, sizeof(offer), &req);
        if (status == GS_OK) {
            status = gs__algo_wait_all(ctx, &req, &expect, 1);
        }
    }
    if ((status != GS_OK) || (offer.ok == 0)) {
        return status;
    }
    if (gs__host_seg_attach(seg, me, offer.pid, (int)offer.fd, &offer.hdr, why, sizeof(why)) !=
        GS_OK) {
        GS_WARN("rank %d: cannot map the host segment rank %d made (%s); the collectives on this "
                "host run over the pair rings",
                ctx->rank, (ranks != NULL) ? ranks[0] : 0, why);
        return GS_OK;
    }
    seg->ranks = ranks;
    *failed = 0;
    return GS_OK;
}

gs_status_t gs__algo_shm_setup(gs__algo_ctx_t *ctx, const gs__algo_shm_params_t *sp)
{
    const uint32_t saved_seq = ctx->seq;
    double v[P_COUNT] = {0.0};
    gs__host_seg_t *seg;
    char why[256];
    probe_t p;
    int failed = 1;
    int cma = 0;
    gs_status_t status;

    if (ctx->size < 2) {
        return GS_OK;
    }
    seg = calloc(1, sizeof(*seg));
    if (seg == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_init: no memory for the host segment");
    }
    seg->fd = -1;
    probe_setup(ctx, &p);
    p.desc.count = 0x7f4a7c15u; /* a signature of its own */
    ctx->seq = SHM_SEQ;
    status = shm_setup_map(&p, sp, seg, &failed);
    if (status == GS_OK) {
        v[0] = failed ? 1.0 : 0.0; /* the maximum is 0 only when every rank mapped it */
        status = probe_agree(&p, v);
    }
    if ((status == GS_OK) && (v[0] == 0.0)) {
        why[0] = '\0';
        /* Every member has filled its line (the agreement above is a barrier). */
        cma = sp->cma && gs__host_seg_cma_probe(seg, sp->cma_deny, why, sizeof(why));
        if (sp->cma && !cma) {
            GS_INFO(ALGO,
                    "rank %d: single copy is off for the collectives on this host: %s; they use "
                    "the chunked design instead",
                    ctx->rank, why);
        }
        v[0] = 0.0;
        v[1] = cma ? 0.0 : 1.0;
        status = probe_agree(&p, v);
    }
    ctx->seq = saved_seq;
    if ((status != GS_OK) || (v[0] != 0.0) || (seg->base == NULL)) { /* or alone on its host */
        gs__host_seg_close(seg);
        free(seg);
        return (status == GS_OK) ? GS_OK
                                 : gs__error_wrap(status, "gs_comm_init: setting up the host "
                                                          "segment");
    }
    gs__host_seg_setup_done(seg); /* every member has mapped it */
    seg->cma = (v[1] == 0.0);
    ctx->shm = seg;
    if (seg->me == 0) {
        GS_INFO(ALGO,
                "host segment: %d ranks x 2 slots of %zu KiB (%.1f MiB, sealed memfd)%s; single "
                "copy %s",
                seg->n, seg->slot_bytes >> 10, (double)seg->len / 1048576.0,
                (seg->n < ctx->size) ? " for the hierarchical all-reduce's phases on this host"
                                     : "",
                seg->cma  ? "on (process_vm_readv works between every pair)"
                : sp->cma ? "off (a rank cannot process_vm_readv its peers; see its INFO line)"
                          : "off (GS_SHM_CMA=0)");
    }
    return GS_OK;
}
