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
 *
 * The probe's time is bounded whatever the link rate (about 0.15 s from
 * 10 Mbit/s to loopback on the lab's links). Three phases:
 *  - alpha: 24 shifts of 8 bytes (the median);
 *  - a pilot: pairs of messages from 64 KiB, growing until the agreed
 *    slowest link takes PROBE_PILOT_MIN_MS for one. Within a pair the
 *    second goes when the first is acknowledged, and the sender times the
 *    second to its acknowledgement: its right-hand link alone;
 *  - beta: a stream of PROBE_BIG_MSGS messages on every link, each kind of
 *    link (between hosts, within one) with the size that the agreed pilot
 *    says takes PROBE_BIG_BUDGET_MS. The receiver times the stream from its
 *    start to the last arrival: its left-hand link, one latency and no
 *    per-message start-up in it.
 * Every rank derives the sizes from the same agreed values (sizes that
 * differed between the two ends of a link would fail the probe).
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
/* The pilot: 64 KiB, then twice as large while the agreed slowest link
 * passed a pair's second message in under PROBE_PILOT_MIN_MS, up to 1 MiB.
 * What a shaper's burst or a switch's buffer lets pass faster than the
 * link (the lab's tbf: 256 KiB) is spent by the messages before; and a
 * message that takes 5 ms dwarfs what a burst refills between two. */
#define PROBE_PILOT_MIN_BYTES (64u << 10)
#define PROBE_PILOT_MAX_BYTES (1u << 20)
#define PROBE_PILOT_GROW 2u
#define PROBE_PILOT_MIN_MS 5
/* The large messages: PROBE_BIG_MSGS back to back on every link, of the
 * size the pilot's rate says sends them all in PROBE_BIG_BUDGET_MS, rounded
 * down to a multiple of PROBE_BIG_ALIGN (and at least that), at most
 * PROBE_BIG_MAX_BYTES: fast links get the largest and finish sooner. */
#define PROBE_BIG_MAX_BYTES (2u << 20)
#define PROBE_BIG_ALIGN (16u << 10)
#define PROBE_BIG_MSGS 5
#define PROBE_BIG_BUDGET_MS 120
#define PROBE_REDUCE_BYTES (4u << 20)
#define PROBE_REDUCE_ITERS 3
/* One buffer: the reduction's three vectors, or one message to send and
 * every large message received. */
#define PROBE_BUF_BYTES (3 * (size_t)PROBE_REDUCE_BYTES)
_Static_assert((PROBE_BIG_MSGS + 1) * (size_t)PROBE_BIG_MAX_BYTES <= PROBE_BUF_BYTES,
               "the probe's buffer holds a large message to send and every one received");
_Static_assert(2 * PROBE_PILOT_MAX_BYTES <= PROBE_BIG_MSGS * PROBE_BIG_MAX_BYTES,
               "a pilot pair's receives fit the same buffer");
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

/* Seconds of each of @p iters back-to-back shifts of @p bytes, into t. */
static gs_status_t probe_times(probe_t *p, void *sbuf, void *rbuf, size_t bytes, int iters,
                               double *t)
{
    gs_status_t status = GS_OK;
    int i;

    for (i = 0; (i < iters) && (status == GS_OK); i++) {
        const uint64_t t0 = gs__now_ns();
        status = probe_shift(p, sbuf, rbuf, bytes);
        t[i] = (double)(gs__now_ns() - t0) * 1e-9;
    }
    return status;
}

/* A probe message from @p r->peer of @p nbytes where @p expect were due. */
static gs_status_t probe_check_len(const gs__algo_req_t *r, size_t nbytes, size_t expect)
{
    if (nbytes != expect) {
        return gs__error_set(GS_ERR_MISMATCH,
                             "GS_TUNE=probe: rank %d sent %zu bytes where %zu were expected",
                             r->peer, nbytes, expect);
    }
    return GS_OK;
}

/* An acknowledged pair: the receives posted at once, and the sends that
 * the hook posts as they come due. */
enum { PAIR_DATA0_IN, PAIR_DATA1_IN, PAIR_ACK0_IN, PAIR_ACK1_IN, PAIR_DATA0_OUT, PAIR_WAITED };
enum { PAIR_DATA1_OUT, PAIR_ACK0_OUT, PAIR_ACK1_OUT, PAIR_POSTED };
typedef struct probe_pair {
    probe_t *p;
    const void *sbuf;
    size_t bytes;
    uint64_t data_tag[2];
    uint64_t ack_tag[2];
    const uint64_t *ack_out; /* the acknowledgements' bytes */
    gs__algo_req_t *posted;  /* [PAIR_POSTED] */
    uint64_t *ack_ns;        /* [2]: when the right neighbour acknowledged each */
} probe_pair_t;

/* gs__algo_wait_each's hook: check the length; acknowledge each message
 * from the left as soon as it is in; send the second message to the right
 * as soon as the first is acknowledged, noting when. */
static gs_status_t probe_pair_recv(gs__algo_ctx_t *ctx, const gs__algo_req_t *r, size_t i,
                                   gs_status_t status, size_t nbytes, const void *arg)
{
    const probe_pair_t *a = arg;
    const int ack = (i == PAIR_ACK0_IN) || (i == PAIR_ACK1_IN);

    if (status == GS_OK) {
        status = probe_check_len(r, nbytes, ack ? sizeof(*a->ack_out) : a->bytes);
    }
    if (status != GS_OK) {
        return status;
    }
    switch (i) {
    case PAIR_DATA0_IN:
    case PAIR_DATA1_IN: {
        const int k = (i == PAIR_DATA1_IN);
        return gs__algo_isend(ctx, a->p->left, a->ack_tag[k], a->ack_out, sizeof(*a->ack_out),
                              &a->posted[k ? PAIR_ACK1_OUT : PAIR_ACK0_OUT]);
    }
    case PAIR_ACK0_IN:
        a->ack_ns[0] = gs__now_ns();
        return gs__algo_isend(ctx, a->p->right, a->data_tag[1], a->sbuf, a->bytes,
                              &a->posted[PAIR_DATA1_OUT]);
    default:
        a->ack_ns[1] = gs__now_ns();
        return GS_OK;
    }
}

/* Two messages of @p bytes to the right neighbour, the second sent when the
 * first is acknowledged, and two from the left one (into rbuf, one after
 * the other), each acknowledged as it comes in. *out is the second's
 * seconds from its send to its acknowledgement: this rank's right-hand link
 * alone, there and back (the first one's time would hold how late the
 * neighbour came to the pair). */
static gs_status_t probe_pair(probe_t *p, const void *sbuf, char *rbuf, size_t bytes, double *out)
{
    gs__algo_req_t reqs[PAIR_WAITED];
    gs__algo_req_t posted[PAIR_POSTED];
    const uint64_t ack_out = 0;
    uint64_t ack_in[2] = {0, 0};
    uint64_t ack_ns[2] = {0, 0};
    probe_pair_t a = {
        .p = p,
        .sbuf = sbuf,
        .bytes = bytes,
        .ack_out = &ack_out,
        .posted = posted,
        .ack_ns = ack_ns,
    };
    gs_status_t status = GS_OK;
    int k;

    for (k = 0; k < 2; k++) {
        a.data_tag[k] = gs__algo_tag(p->ctx, &p->desc, p->idx++);
        a.ack_tag[k] = gs__algo_tag(p->ctx, &p->desc, p->idx++);
    }
    memset(reqs, 0, sizeof(reqs));
    memset(posted, 0, sizeof(posted));
    for (k = 0; (k < 2) && (status == GS_OK); k++) {
        status = gs__algo_irecv(p->ctx, p->left, a.data_tag[k], rbuf + (size_t)k * bytes, bytes,
                                &reqs[PAIR_DATA0_IN + k]);
        if (status == GS_OK) {
            status = gs__algo_irecv(p->ctx, p->right, a.ack_tag[k], &ack_in[k], sizeof(ack_in[k]),
                                    &reqs[PAIR_ACK0_IN + k]);
        }
    }
    if (status == GS_OK) {
        status =
            gs__algo_isend(p->ctx, p->right, a.data_tag[0], sbuf, bytes, &reqs[PAIR_DATA0_OUT]);
    }
    if (status == GS_OK) {
        status = gs__algo_wait_each(p->ctx, reqs, PAIR_WAITED, probe_pair_recv, &a);
    } else {
        gs__algo_release_all(p->ctx, reqs, PAIR_WAITED);
    }
    if (status == GS_OK) {
        status = gs__algo_wait_all(p->ctx, posted, NULL, PAIR_POSTED);
    } else {
        gs__algo_release_all(p->ctx, posted, PAIR_POSTED);
    }
    if (status == GS_OK) {
        *out = (double)(ack_ns[1] - ack_ns[0]) * 1e-9;
    }
    return status;
}

/* What probe_stream's wait needs. */
typedef struct probe_stream {
    size_t rbytes;
    uint64_t *done_ns; /* when each message from the left was in */
} probe_stream_t;

/* gs__algo_wait_each's hook: check the length, note the time. */
static gs_status_t probe_stream_recv(gs__algo_ctx_t *ctx, const gs__algo_req_t *r, size_t i,
                                     gs_status_t status, size_t nbytes, const void *arg)
{
    const probe_stream_t *st = arg;

    (void)ctx;
    if (status == GS_OK) {
        status = probe_check_len(r, nbytes, st->rbytes);
    }
    st->done_ns[i] = gs__now_ns();
    return status;
}

/* Send PROBE_BIG_MSGS messages of @p sbytes to the right neighbour back to
 * back and receive as many of @p rbytes from the left one (into
 * consecutive slots of @p rbuf); *out is the left link's seconds per byte:
 * the time from the start to the last arrival over the bytes received.
 * Every rank starts together (an agreement just ended), the stream keeps
 * the link busy, and it holds one latency, not one per message. */
static gs_status_t probe_stream(probe_t *p, const void *sbuf, size_t sbytes, char *rbuf,
                                size_t rbytes, double *out)
{
    gs__algo_req_t reqs[2 * PROBE_BIG_MSGS];
    uint64_t done_ns[PROBE_BIG_MSGS];
    const uint64_t t0 = gs__now_ns();
    uint64_t last = t0;
    const probe_stream_t st = {.rbytes = rbytes, .done_ns = done_ns};
    gs_status_t status = GS_OK;
    int k;

    memset(reqs, 0, sizeof(reqs));
    for (k = 0; (k < PROBE_BIG_MSGS) && (status == GS_OK); k++) {
        const uint64_t tag = gs__algo_tag(p->ctx, &p->desc, p->idx + (uint32_t)k);

        status = gs__algo_irecv(p->ctx, p->left, tag, rbuf + (size_t)k * rbytes, rbytes, &reqs[k]);
        if (status == GS_OK) {
            status = gs__algo_isend(p->ctx, p->right, tag, sbuf, sbytes, &reqs[PROBE_BIG_MSGS + k]);
        }
    }
    p->idx += PROBE_BIG_MSGS;
    if (status != GS_OK) {
        gs__algo_release_all(p->ctx, reqs, 2 * PROBE_BIG_MSGS);
        return status;
    }
    status = gs__algo_wait_each(p->ctx, reqs, 2 * PROBE_BIG_MSGS, probe_stream_recv, &st);
    if (status != GS_OK) {
        return status;
    }
    /* From the start to the last arrival: striped sockets finish the
     * messages unevenly, so the gaps between arrivals mislead. */
    for (k = 0; k < PROBE_BIG_MSGS; k++) {
        last = (done_ns[k] > last) ? done_ns[k] : last;
    }
    *out = (double)(last - t0) * 1e-9 / ((double)rbytes * PROBE_BIG_MSGS);
    *out = (*out > 1e-12) ? *out : 1e-12;
    return GS_OK;
}

/* The size of the large messages on a link whose agreed pilot seconds per
 * byte is @p beta: what sends PROBE_BIG_MSGS in PROBE_BIG_BUDGET_MS,
 * rounded down to a multiple of PROBE_BIG_ALIGN, at least that and at most
 * PROBE_BIG_MAX_BYTES; 0 where no link has a sample. A function of a value
 * every rank shares, so both ends of a link get the same size. */
static size_t probe_big_bytes(double beta)
{
    const double bytes = PROBE_BIG_BUDGET_MS * 1e-3 / PROBE_BIG_MSGS / beta;

    if (beta < 0.0) {
        return 0;
    }
    if (!(bytes < (double)PROBE_BIG_MAX_BYTES)) {
        return PROBE_BIG_MAX_BYTES;
    }
    if (!(bytes > (double)PROBE_BIG_ALIGN)) {
        return PROBE_BIG_ALIGN;
    }
    return (size_t)(bytes / PROBE_BIG_ALIGN) * PROBE_BIG_ALIGN;
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

/* What the probe chose, agreed by every rank; index 0: links between
 * hosts, 1: links within a host. */
typedef struct probe_plan {
    size_t pilot_bytes;   /* the pilot's last (largest) messages */
    double pilot_beta[2]; /* seconds per byte they took; -1: no such link */
    size_t big_bytes[2];  /* the large messages' size; 0: no such link */
} probe_plan_t;

/* 1 when ranks a and b are on one host. */
static int probe_same_host(const gs__algo_ctx_t *ctx, int a, int b)
{
    return (ctx->hosts.nhosts > 0) && (ctx->hosts.host_of[a] == ctx->hosts.host_of[b]);
}

/* Seconds per byte of a message of @p bytes that took @p t seconds there and
 * back (an acknowledgement), @p alpha one way. */
static double probe_beta_of(double t, double alpha, size_t bytes)
{
    return (t > 2.0 * alpha) ? (t - 2.0 * alpha) / (double)bytes : 1e-12;
}

/* Set every v[] to -1 (no sample), then this rank's alpha and beta in its
 * right-hand link's slots. */
static void probe_sample(double v[P_COUNT], int intra, double alpha, double beta)
{
    for (int k = 0; k < P_COUNT; k++) {
        v[k] = -1.0;
    }
    v[intra ? P_INTRA_ALPHA : P_ALPHA] = alpha;
    v[intra ? P_INTRA_BETA : P_BETA] = beta;
}

/* The link samples: alpha from small messages (this rank's right-hand
 * link), each kind of link's rate from the pilot, agreed between the ranks
 * (the slowest of each), then beta from a stream sized by that agreement
 * (*plan; this rank's left-hand link). Sets v[] as gs__algo_probe agrees
 * it: -1 where this rank has no sample. */
static gs_status_t probe_links(probe_t *p, char *buf, double v[P_COUNT], probe_plan_t *plan)
{
    gs__algo_ctx_t *ctx = p->ctx;
    const int out_intra = probe_same_host(ctx, ctx->rank, p->right);
    const int in_intra = probe_same_host(ctx, p->left, ctx->rank);
    char *rbuf = buf + PROBE_BIG_MAX_BYTES;
    double t[PROBE_SMALL_ITERS + 1];
    double alpha;
    gs_status_t status;

    /* Small: one warm-up, then the median. */
    status = probe_times(p, buf, rbuf, PROBE_SMALL_BYTES, PROBE_SMALL_ITERS + 1, t);
    if (status != GS_OK) {
        return status;
    }
    alpha = probe_median(t + 1, PROBE_SMALL_ITERS);
    alpha = (alpha > 1e-7) ? alpha : 1e-7;
    /* Pilot: pairs of growing messages, the second of each timed, agreed. */
    for (plan->pilot_bytes = PROBE_PILOT_MIN_BYTES;; plan->pilot_bytes *= PROBE_PILOT_GROW) {
        const size_t bytes = plan->pilot_bytes;
        double pair = 0.0;
        double slowest;

        status = probe_pair(p, buf, rbuf, bytes, &pair);
        if (status == GS_OK) {
            probe_sample(v, out_intra, alpha, probe_beta_of(pair, alpha, bytes));
            status = probe_agree(p, v);
        }
        if (status != GS_OK) {
            return status;
        }
        slowest = ((v[P_BETA] > v[P_INTRA_BETA]) ? v[P_BETA] : v[P_INTRA_BETA]) * (double)bytes;
        if ((slowest >= PROBE_PILOT_MIN_MS * 1e-3) || (bytes >= PROBE_PILOT_MAX_BYTES)) {
            break;
        }
    }
    plan->pilot_beta[0] = v[P_BETA];
    plan->pilot_beta[1] = v[P_INTRA_BETA];
    plan->big_bytes[0] = probe_big_bytes(v[P_BETA]);
    plan->big_bytes[1] = probe_big_bytes(v[P_INTRA_BETA]);
    /* Large: a stream on every link, timed by its receiver, so this rank's
     * beta is its left-hand link's. */
    {
        double beta = 0.0;

        status = probe_stream(p, buf, plan->big_bytes[out_intra], rbuf, plan->big_bytes[in_intra],
                              &beta);
        if (status == GS_OK) {
            probe_sample(v, out_intra, alpha, -1.0);
            v[in_intra ? P_INTRA_BETA : P_BETA] = beta;
        }
    }
    return status;
}

gs_status_t gs__algo_probe(gs__algo_ctx_t *ctx, gs__algo_model_t *model, unsigned keep)
{
    const int n = gs__route_n(ctx);
    const uint32_t saved_seq = ctx->seq;
    const uint64_t t_start = gs__now_ns();
    const size_t buf_bytes = PROBE_BUF_BYTES;
    probe_plan_t plan = {.pilot_bytes = 0, .pilot_beta = {-1.0, -1.0}, .big_bytes = {0, 0}};
    double v[P_COUNT];
    probe_t p;
    char *buf;
    gs_status_t status;

    if (n < 2) {
        return GS_OK;
    }
    buf = malloc(buf_bytes);
    if (buf == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY,
                             "GS_TUNE=probe: cannot allocate %zu bytes of probe buffers; unset "
                             "GS_TUNE to use the model's defaults",
                             buf_bytes);
    }
    memset(buf, 0, buf_bytes);
    probe_setup(ctx, &p);
    ctx->seq = PROBE_SEQ;

    status = probe_links(&p, buf, v, &plan);
    if (status == GS_OK) {
        float *f = (float *)(void *)buf;
        const size_t nf = PROBE_REDUCE_BYTES / sizeof(float);

        v[P_GAMMA] = probe_gamma(f + 2 * nf, f, f + nf, PROBE_REDUCE_BYTES);
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
    /* After the colon every value is agreed, so every rank's line reads the same. */
    GS_INFO(ALGO,
            "GS_TUNE=probe over %d ranks in %.0f ms: alpha %.1f us, link %.1f MB/s, reduce %.0f "
            "MB/s, intra-host alpha %.1f us, link %.1f MB/s (slowest rank's values; explicit "
            "GS_ALGO_* settings kept); messages of %d B x %d, pilot up to %zu KiB (%.1f MB/s "
            "between hosts, %.1f within), then x %d of %zu KiB between hosts, %zu KiB within "
            "(sized for %d ms; 0: no such link)",
            n, (double)(gs__now_ns() - t_start) * 1e-6, model->alpha * 1e6, 1e-6 / model->beta,
            1e-6 / model->gamma, model->intra_alpha * 1e6, 1e-6 / model->intra_beta,
            PROBE_SMALL_BYTES, PROBE_SMALL_ITERS + 1, plan.pilot_bytes >> 10,
            (plan.pilot_beta[0] > 0.0) ? 1e-6 / plan.pilot_beta[0] : 0.0,
            (plan.pilot_beta[1] > 0.0) ? 1e-6 / plan.pilot_beta[1] : 0.0, PROBE_BIG_MSGS,
            plan.big_bytes[0] >> 10, plan.big_bytes[1] >> 10, PROBE_BIG_BUDGET_MS);
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

/* Member 0 of each host makes the segment and names it down the chain of
 * members (k passes it to k + 1: ring neighbours), and each maps it (a rank
 * alone on its host has none and needs none).
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
    } else {
        /* The offer goes down the members' chain, member k to k + 1: the pairs of ring
         * neighbours, already connected (GS_CONNECT=lazy), instead of member 0 to all. */
        gs__algo_req_t req;
        size_t expect = sizeof(offer);

        memset(&req, 0, sizeof(req));
        status = gs__algo_irecv(ctx, (ranks != NULL) ? ranks[me - 1] : me - 1, tag, &offer,
                                sizeof(offer), &req);
        if (status == GS_OK) {
            status = gs__algo_wait_all(ctx, &req, &expect, 1);
        }
    }
    if ((status == GS_OK) && (me + 1 < n)) {
        gs__algo_req_t req;

        memset(&req, 0, sizeof(req));
        status = gs__algo_isend(ctx, (ranks != NULL) ? ranks[me + 1] : me + 1, tag, &offer,
                                sizeof(offer), &req);
        if (status == GS_OK) {
            status = gs__algo_wait_all(ctx, &req, NULL, 1);
        }
    }
    if (me == 0) {
        return status;
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
        return (status == GS_OK)
                   ? GS_OK
                   : gs__error_wrap(status, "gs_comm_init: setting up the host segment: %s",
                                    gs__error_get());
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
