/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compressed all-reduce: the two-phase scheme (as in 1-bit Adam and
 * PowerSGD's reference implementations), with error feedback owned by the
 * library on both sides.
 *
 *   1. Every rank adds its worker residual to its input and encodes each of
 *      the n chunks (balanced split) separately.
 *   2. All-to-all: chunk c goes to rank c, which receives n encoded copies
 *      of its chunk (its own included, decoded locally).
 *   3. Rank r decodes and sums them in f32 (dividing by n for AVG), adds its
 *      server residual for chunk r and encodes the sum once more.
 *   4. All-gather of the encoded sums; every rank decodes all n chunks,
 *      its own included, so every rank ends with identical values.
 *
 * Wire bytes per rank: 2(n-1)/n * encoded size, i.e. the codec's ratio
 * times what the uncompressed ring sends. Two steps of alpha each (all
 * peers at once), so the latency term is 2 alpha + the per-peer costs.
 * Payloads carry the codec's self-describing header and are validated
 * before anything is decoded: a payload that does not match is
 * GS_ERR_PROTOCOL, never a read past a buffer. Lengths vary (zstd, sparse
 * codecs): receives are posted with the codec's upper bound and the real
 * length comes from the transport.
 *
 * Sparsifiers (top-k, random-k) take the schemes of algo_sparse.c (an
 * all-gather of (index, value) pairs, or a dense all-reduce of the k values
 * of a shared random draw) unless the result would be at least as dense as
 * the tensor (gs__algo_plan decides); only then do they run through this scheme, sparsified once
 * by the sender and once by the owner, both residuals keeping what was
 * dropped. Odd world sizes and counts < n need nothing special: chunks may
 * be empty, and an empty chunk still sends its header.
 *
 * Step table, n = 3 (chunk c of rank r written c@r; E = encode):
 *   phase 1:  r0 sends E(1@0) to r1, E(2@0) to r2; receives E(0@1), E(0@2)
 *   phase 2:  r0 sums 0@0+0@1+0@2, encodes S0, sends it to r1 and r2;
 *             receives S1 from r1, S2 from r2; decodes S0 S1 S2.
 *
 * Pipelining. Each chunk is cut into slices of GS_SLICE_BYTES of input
 * (rounded down to whole codec blocks, at least one block), each its own
 * payload with its own header, validated on receipt like a whole chunk.
 * Every receive of both phases is posted first. Phase 1 then encodes slice
 * s for every peer (ours last) and sends it without waiting, and between
 * slices polls the transport once without blocking, so the link carries
 * slice s while the CPU encodes slice s + 1. Whatever has arrived is
 * summed at once, in rank order per slice (so the f32 sums are those of the
 * unsliced scheme); a slice whose n copies are in is averaged, encoded with
 * the server residual and sent (phase 2 of that slice) while later slices
 * are still in phase 1, and received sums are decoded as they come. Since
 * slices start on codec blocks, every scale and code is the one the whole
 * chunk would get: the result is bit-identical to the unsliced scheme
 * whatever the slice size (tests/integration compress_slices_w*). Codecs
 * whose output depends on the whole payload (top-k's selection, qsgd's
 * noise drawn by index) keep one slice per chunk. The codec's configuration
 * is resolved, checked and laid out once per call for the largest slice
 * (gs__comp_plan_t), not per slice. In-place is safe: the
 * sum of slice s of chunk c can only arrive after rank c got our encoding
 * of it, i.e. after we read that part of the input.
 *
 * Sharded shapes (gs__compressed_shard, GS_SCHEME_SHARD): reduce-scatter
 * is phase 1 alone and all-gather phase 2 alone, on the same pipeline.
 * Chunk c is rank c's block (count elements, or recvcounts[c] for the v
 * calls) instead of a balanced split; it starts at coff[c] in the send
 * buffer and doff[c] in the receive buffer.
 * - Reduce-scatter: every rank encodes each peer's block once (with the
 *   worker residual over the whole send buffer) and sends it to its owner;
 *   the owner sums, in f32 and in rank order, the n - 1 decoded copies and
 *   its own block exactly (never through the codec), divides by n for AVG
 *   and writes the sum in the output dtype. Every element is quantised
 *   once; the result is the same on every run.
 * - All-gather: every rank encodes its block once and sends the payload to
 *   every peer, copies its own block exactly and decodes the others into
 *   place. No error feedback (weights are not summed over steps).
 * Wire bytes per rank: (n-1)/n of the uncompressed call's, times the
 * codec's ratio. Step table, reduce-scatter, n = 3, rank 0: phase 1 sends
 * E(blk1) to r1 and E(blk2) to r2, receives E(blk0@1), E(blk0@2); output
 * = ((0 + blk0@0) + D(blk0@1)) + D(blk0@2).
 */
#include <stdlib.h>
#include <string.h>

#include "algo/sched/sched.h"
#include "algo/sched/algo_comp.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"

#define COMP_ALIGN 64
/* Slices per chunk at most: message indices 2 x slice + phase stay < 2^24. */
#define COMP_MAX_SLICES ((size_t)1 << 20)

/* What the pipeline runs: both phases, phase 1 alone, phase 2 alone. */
enum { COMP_ALLREDUCE = 0, COMP_REDUCE_SCATTER = 1, COMP_ALLGATHER = 2 };

/* Request kinds; each has a row of n x max_ns requests (peer, slice). */
enum { COMP_P1_RECV = 0, COMP_P1_SEND = 1, COMP_P2_RECV = 2, COMP_P2_SEND = 3, COMP_KINDS = 4 };

typedef struct comp_state {
    gs__algo_ctx_t *ctx;
    const gs__coll_desc_t *d;
    gs_ef_t ef;           /* worker residual, or NULL */
    gs_ef_t server;       /* server residual of our chunk, or NULL */
    gs__comp_plan_t plan; /* the codec, prepared once for the largest slice */
    size_t esize;         /* bytes per element of d->dtype */
    int n, r;             /* the group's size and our index in it */
    const int *peers;     /* group index -> rank of ctx (NULL: the identity over ctx's ranks) */
    int avg_div;          /* GS_OP_AVG divides the sums by this (ctx's size) */
    int mode;             /* COMP_ALLREDUCE, COMP_REDUCE_SCATTER or COMP_ALLGATHER */
    size_t *clen;         /* [c]: elements of chunk c */
    size_t *coff;         /* [c]: where chunk c starts in sendbuf (elements) */
    size_t *doff;         /* [c]: where chunk c starts in recvbuf (elements) */
    size_t slice;         /* elements per slice: a multiple of the codec block */
    size_t max_ns;        /* slices of the largest chunk */
    size_t own_len;       /* elements of our chunk */
    uint8_t *p1_send;     /* [c][s]: phase 1 payload for rank c */
    uint8_t *p1_recv;     /* [q][s]: slice s of our chunk from rank q (q = r: our own) */
    uint8_t *p2;          /* [c][s]: encoded sum of slice s of chunk c (c = r: ours, sent) */
    size_t *len;          /* [kind][peer][s]: payload bytes */
    uint8_t *got;         /* [q][s]: the phase 1 slice from q is here */
    uint32_t *next_q;     /* [s]: ranks summed into slice s of acc so far (n + 1: sent) */
    float *acc;           /* our chunk, f32 */
    uint8_t *codec_scratch;
    gs__algo_req_t *reqs; /* [kind][peer][s] */
    size_t left;          /* requests posted and not finished */
} comp_state_t;

static size_t comp_align(size_t x)
{
    return (x + COMP_ALIGN - 1) & ~(size_t)(COMP_ALIGN - 1);
}

/* ---------------------------------------------------------------------- */
/* Slices                                                                 */
/* ---------------------------------------------------------------------- */

/* Elements per slice. Slices start on codec blocks, so every block, and
 * with it every scale, is the one the whole chunk would have: the bits do
 * not depend on the slice size. Codecs whose output depends on the whole
 * payload (top-k's selection, the noise of qsgd and random-k, drawn by
 * index in the payload) keep one slice per chunk. */
static size_t comp_slice_elems(const gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                               const gs__codec_resolved_t *rc, size_t max_chunk)
{
    const size_t whole = (max_chunk > 0) ? max_chunk : 1;
    size_t unit = 64, e;

    if ((rc->ops->flags & (GS_CODEC_F_SPARSE | GS_CODEC_F_STOCHASTIC)) != 0) {
        return whole;
    }
    if ((rc->ops->flags & GS_CODEC_F_BLOCKED) != 0) {
        unit = rc->block;
    }
    e = ctx->slice_bytes / gs__dtype_size(d->dtype);
    e -= e % unit;
    e = (e < unit) ? unit : e;
    if (max_chunk / e >= COMP_MAX_SLICES) {
        e = (max_chunk / COMP_MAX_SLICES / unit + 1) * unit;
    }
    return e;
}

static size_t comp_nslices(const comp_state_t *st, size_t chunk_len)
{
    return (chunk_len == 0) ? 1 : (chunk_len - 1) / st->slice + 1;
}

/* Slices of chunk c. */
static size_t comp_chunk_ns(const comp_state_t *st, int c)
{
    return comp_nslices(st, st->clen[c]);
}

/* Elements [*lo_out, *lo_out + *len_out) of chunk c: its slice s. */
static void comp_slice(const comp_state_t *st, int c, size_t s, size_t *lo_out, size_t *len_out)
{
    const size_t len = st->clen[c];
    const size_t lo = s * st->slice;

    *lo_out = lo;
    *len_out = (len > lo) ? ((len - lo < st->slice) ? len - lo : st->slice) : 0;
}

/* Chunk c of @p d on @p n ranks as mode runs it: its length, and where it
 * starts in sendbuf and in recvbuf. */
static void comp_chunk_of(const gs__coll_desc_t *d, int mode, int n, int c, size_t *len_out,
                          size_t *coff_out, size_t *doff_out)
{
    const int v = gs__coll_is_v(d->kind);
    size_t off = 0;

    if (mode == COMP_ALLREDUCE) {
        gs__algo_split(d->count, n, c, &off, len_out);
        *coff_out = off;
        *doff_out = off;
        return;
    }
    *len_out = v ? d->rcounts[c] : d->count;
    if (v) {
        for (int j = 0; j < c; j++) {
            off += d->rcounts[j];
        }
    } else {
        off = (size_t)c * d->count;
    }
    if ((mode == COMP_ALLGATHER) && (d->rdispls != NULL)) {
        off = d->rdispls[c];
    }
    /* Reduce-scatter reads block c at off and writes its own at 0;
     * all-gather reads its own at 0 and writes block c at off. */
    *coff_out = (mode == COMP_REDUCE_SCATTER) ? off : 0;
    *doff_out = (mode == COMP_ALLGATHER) ? off : 0;
}

static size_t comp_ix(const comp_state_t *st, int kind, int peer, size_t s)
{
    return ((size_t)kind * (size_t)st->n + (size_t)peer) * st->max_ns + s;
}

static uint8_t *comp_slot(const comp_state_t *st, uint8_t *base, int peer, size_t s)
{
    return base + ((size_t)peer * st->max_ns + s) * st->plan.cap;
}

gs_status_t gs__comp_plan(const gs__algo_ctx_t *ctx, const gs__codec_resolved_t *rc,
                          size_t max_count, gs_dtype_t dtype, gs__comp_plan_t *out)
{
    gs_status_t status = gs__codec_plan(ctx->opname, rc, max_count, dtype, &out->in);

    if (status == GS_OK) {
        status = gs__codec_plan(ctx->opname, rc, max_count, GS_DTYPE_F32, &out->f32);
    }
    if (status != GS_OK) {
        return status;
    }
    /* The payload bound depends on the count, not the dtype. */
    out->cap = comp_align(out->in.payload_max);
    out->scratch =
        (out->in.lay.total > out->f32.lay.total) ? out->in.lay.total : out->f32.lay.total;
    return GS_OK;
}

/* Slices, the codec plan for the largest, and every buffer in ctx's scratch. */
static gs_status_t comp_layout(comp_state_t *st, const gs__codec_resolved_t *rc)
{
    const size_t n = (size_t)st->n;
    size_t max_chunk = 0;
    size_t slots, slice_max, total;
    uint8_t *base = NULL;
    gs_status_t status;
    void *mem = NULL;

    for (int c = 0; c < st->n; c++) {
        size_t len, coff, doff;

        comp_chunk_of(st->d, st->mode, st->n, c, &len, &coff, &doff);
        max_chunk = (len > max_chunk) ? len : max_chunk;
    }

    st->slice = comp_slice_elems(st->ctx, st->d, rc, max_chunk);
    st->max_ns = comp_nslices(st, max_chunk);
    slice_max = (st->slice < max_chunk) ? st->slice : max_chunk;
    status = gs__comp_plan(st->ctx, rc, slice_max, st->d->dtype, &st->plan);
    if (status != GS_OK) {
        return status;
    }
    slots = n * st->max_ns;
    total = 3 * slots * st->plan.cap + comp_align(COMP_KINDS * slots * sizeof(size_t)) +
            comp_align(slots) + comp_align(st->max_ns * sizeof(uint32_t)) +
            comp_align(st->own_len * sizeof(float) + 1) + comp_align(st->plan.scratch + 1) +
            comp_align(COMP_KINDS * slots * sizeof(gs__algo_req_t)) +
            comp_align(3 * n * sizeof(size_t));
    status = gs__algo_scratch(st->ctx, total + COMP_ALIGN, &mem);
    if (status != GS_OK) {
        return status;
    }
    base = (uint8_t *)comp_align((size_t)mem);
    st->p1_send = base;
    base += slots * st->plan.cap;
    st->p1_recv = base;
    base += slots * st->plan.cap;
    st->p2 = base;
    base += slots * st->plan.cap;
    st->len = (size_t *)(void *)base;
    base += comp_align(COMP_KINDS * slots * sizeof(size_t));
    st->got = base;
    memset(st->got, 0, slots);
    base += comp_align(slots);
    st->next_q = (uint32_t *)(void *)base;
    memset(st->next_q, 0, st->max_ns * sizeof(uint32_t));
    base += comp_align(st->max_ns * sizeof(uint32_t));
    st->acc = (float *)(void *)base;
    base += comp_align(st->own_len * sizeof(float) + 1);
    st->codec_scratch = base;
    base += comp_align(st->plan.scratch + 1);
    st->reqs = (gs__algo_req_t *)(void *)base;
    memset(st->reqs, 0, COMP_KINDS * slots * sizeof(gs__algo_req_t));
    base += comp_align(COMP_KINDS * slots * sizeof(gs__algo_req_t));
    st->clen = (size_t *)(void *)base;
    st->coff = st->clen + n;
    st->doff = st->coff + n;
    for (int c = 0; c < st->n; c++) {
        comp_chunk_of(st->d, st->mode, st->n, c, &st->clen[c], &st->coff[c], &st->doff[c]);
    }
    return GS_OK;
}

gs_status_t gs__comp_server_ef(gs_ef_t ef, size_t own_len, gs_dtype_t dtype, gs_ef_t *out)
{
    gs_status_t status;

    *out = GS_EF_NULL;
    if (ef == GS_EF_NULL) {
        return GS_OK;
    }
    if ((ef->server != GS_EF_NULL) &&
        ((ef->server->count != own_len) || (ef->server->dtype != dtype))) {
        gs_ef_destroy(ef->server);
        ef->server = GS_EF_NULL;
    }
    if (ef->server == GS_EF_NULL) {
        status = gs_ef_create(own_len, dtype, &ef->server);
        if (status != GS_OK) {
            return status;
        }
    }
    *out = ef->server;
    return GS_OK;
}

/* A view of @p len elements of residual @p ef from element @p off (the
 * step counter is the parent's, so every slice draws alike). */
static gs_ef_t comp_ef_view(gs_ef_t ef, size_t off, size_t len, struct gs_ef *view)
{
    if (ef == GS_EF_NULL) {
        return GS_EF_NULL;
    }
    *view = *ef;
    view->count = len;
    view->residual = ef->residual + off;
    view->server = GS_EF_NULL;
    view->dev = NULL; /* the parent's copy was made current at the start */
    view->dev_current = 0;
    return view;
}

/* ---------------------------------------------------------------------- */
/* The pipeline                                                           */
/* ---------------------------------------------------------------------- */

/* Post request (kind, peer, s) on @p buf: @p bytes to send, or up to cap
 * to receive. Phase 1 is message 2s, phase 2 message 2s + 1. */
static gs_status_t comp_post(comp_state_t *st, int kind, int peer, size_t s, uint8_t *buf,
                             size_t bytes)
{
    const uint64_t tag = gs__algo_tag(st->ctx, st->d, (uint32_t)(2 * s + (kind >= COMP_P2_RECV)));
    gs__algo_req_t *q = &st->reqs[comp_ix(st, kind, peer, s)];
    gs_status_t status;

    const int rank = (st->peers != NULL) ? st->peers[peer] : peer;

    if ((kind == COMP_P1_SEND) || (kind == COMP_P2_SEND)) {
        status = gs__algo_isend(st->ctx, rank, tag, buf, bytes, q);
    } else {
        status = gs__algo_irecv(st->ctx, rank, tag, buf, st->plan.cap, q);
    }
    st->left += (status == GS_OK);
    return status;
}

/* Decode slice s of chunk c's sum (phase 2) into the output. */
static gs_status_t comp_decode_sum(comp_state_t *st, int c, size_t s)
{
    const gs__coll_desc_t *d = st->d;
    size_t lo, len;
    gs_status_t status;

    comp_slice(st, c, s, &lo, &len);
    status = gs__codec_plan_decode(
        &st->plan.in, comp_slot(st, st->p2, c, s), st->len[comp_ix(st, COMP_P2_RECV, c, s)], len,
        st->codec_scratch, st->plan.scratch, (uint8_t *)d->recvbuf + (st->doff[c] + lo) * st->esize,
        GS_CODEC_MODE_SET);
    if (status != GS_OK) {
        status =
            gs__error_wrap(status, "%s: the compressed %s from rank %d is bad: %s", st->ctx->opname,
                           (st->mode == COMP_ALLGATHER) ? "block" : "sum", c, gs__error_get());
    }
    return status;
}

/* Sum, in rank order, the phase 1 copies of slice s of our chunk that have
 * arrived; once all n are in: average, encode with the server residual,
 * send to every peer and decode our own. */
static gs_status_t comp_reduce(comp_state_t *st, size_t s)
{
    const gs__coll_desc_t *d = st->d;
    const size_t ir = comp_ix(st, COMP_P2_RECV, st->r, s);
    size_t loff, len;
    struct gs_ef view;
    gs_status_t status = GS_OK;

    comp_slice(st, st->r, s, &loff, &len);
    while ((status == GS_OK) && (st->next_q[s] < (uint32_t)st->n) &&
           st->got[(size_t)st->next_q[s] * st->max_ns + s]) {
        const int q = (int)st->next_q[s];

        if (q == 0) {
            memset(st->acc + loff, 0, len * sizeof(float));
        }
        if ((q == st->r) && (st->mode == COMP_REDUCE_SCATTER)) {
            /* Our own block is summed exactly, never through the codec. */
            view = (struct gs_ef){.count = len, .dtype = d->dtype, .residual = st->acc + loff};
            gs__ef_add_input(&view,
                             (const uint8_t *)d->sendbuf + (st->coff[st->r] + loff) * st->esize);
            st->next_q[s]++;
            continue;
        }
        status =
            gs__codec_plan_decode(&st->plan.f32, comp_slot(st, st->p1_recv, q, s),
                                  st->len[comp_ix(st, COMP_P1_RECV, q, s)], len, st->codec_scratch,
                                  st->plan.scratch, st->acc + loff, GS_CODEC_MODE_ADD);
        if (status != GS_OK) {
            return gs__error_wrap(status, "%s: the compressed chunk from rank %d is bad: %s",
                                  st->ctx->opname, q, gs__error_get());
        }
        st->next_q[s]++;
    }
    if ((status != GS_OK) || (st->next_q[s] != (uint32_t)st->n)) {
        return status;
    }
    st->next_q[s]++;
    if (d->op == GS_OP_AVG) {
        const float inv = 1.0f / (float)st->avg_div;

        for (size_t i = 0; i < len; i++) {
            st->acc[loff + i] *= inv;
        }
    }
    if (st->mode == COMP_REDUCE_SCATTER) {
        gs__dtype_from_f32(st->acc + loff, len, d->dtype,
                           (uint8_t *)d->recvbuf + (st->doff[st->r] + loff) * st->esize);
        return GS_OK;
    }
    status = gs__codec_plan_encode(&st->plan.f32, st->acc + loff, len,
                                   comp_ef_view(st->server, loff, len, &view), st->codec_scratch,
                                   st->plan.scratch, comp_slot(st, st->p2, st->r, s), st->plan.cap,
                                   &st->len[ir]);
    if (status == GS_OK) {
        gs__comp_test_corrupt(st->ctx, comp_slot(st, st->p2, st->r, s), st->len[ir]);
    }
    for (int i = 1; (i < st->n) && (status == GS_OK); i++) {
        status = comp_post(st, COMP_P2_SEND, (st->r + i) % st->n, s,
                           comp_slot(st, st->p2, st->r, s), st->len[ir]);
    }
    return (status == GS_OK) ? comp_decode_sum(st, st->r, s) : status;
}

/* Phase 1: encode slice s of chunk c with the worker residual; send it to
 * rank c, or (our own chunk) sum it in. */
static gs_status_t comp_encode(comp_state_t *st, int c, size_t s)
{
    const gs__coll_desc_t *d = st->d;
    const int own = (c == st->r);
    uint8_t *slot = comp_slot(st, own ? st->p1_recv : st->p1_send, c, s);
    size_t *len_out = &st->len[comp_ix(st, own ? COMP_P1_RECV : COMP_P1_SEND, c, s)];
    size_t lo, len, off;
    struct gs_ef view;
    gs_status_t status;

    if (own && (st->mode == COMP_REDUCE_SCATTER)) {
        st->got[(size_t)st->r * st->max_ns + s] = 1; /* summed exactly by comp_reduce */
        return comp_reduce(st, s);
    }
    comp_slice(st, c, s, &lo, &len);
    off = st->coff[c] + lo;
    status = gs__codec_plan_encode(&st->plan.in, (const uint8_t *)d->sendbuf + off * st->esize, len,
                                   comp_ef_view(st->ef, off, len, &view), st->codec_scratch,
                                   st->plan.scratch, slot, st->plan.cap, len_out);
    if (status != GS_OK) {
        return status;
    }
    if (!own) {
        gs__comp_test_corrupt(st->ctx, slot, *len_out);
        return comp_post(st, COMP_P1_SEND, c, s, slot, *len_out);
    }
    st->got[(size_t)st->r * st->max_ns + s] = 1;
    return comp_reduce(st, s);
}

/* Act on every finished request. *progressed_out: one finished; *blame_out:
 * the first still pending (for a timeout message). */
static gs_status_t comp_drain(comp_state_t *st, int *progressed_out,
                              const gs__algo_req_t **blame_out)
{
    const size_t row = (size_t)st->n * st->max_ns;
    gs_status_t status = GS_OK;

    *blame_out = NULL;
    for (size_t i = 0; (i < COMP_KINDS * row) && (status == GS_OK); i++) {
        gs__algo_req_t *q = &st->reqs[i];
        const int kind = (int)(i / row);
        const int peer = (int)((i % row) / st->max_ns);
        const size_t s = i % st->max_ns;
        size_t nbytes = 0;
        int done = 0;

        if (q->req == NULL) {
            continue;
        }
        status = gs__algo_check_len(st->ctx, q, &done, &nbytes);
        if (!done) {
            *blame_out = (*blame_out == NULL) ? q : *blame_out;
            continue;
        }
        st->left--;
        *progressed_out = 1;
        if ((status == GS_OK) && (kind == COMP_P1_RECV)) {
            st->len[i] = nbytes;
            st->got[(size_t)peer * st->max_ns + s] = 1;
            status = comp_reduce(st, s);
        } else if ((status == GS_OK) && (kind == COMP_P2_RECV)) {
            st->len[i] = nbytes;
            status = comp_decode_sum(st, peer, s);
        }
    }
    return status;
}

/* Let the transport move bytes without blocking, then act on what finished. */
static gs_status_t comp_poke(comp_state_t *st)
{
    const gs__algo_req_t *blame;
    int progressed = 0;
    gs_status_t status = gs__tp_progress(st->ctx->tr, 0);

    if (status != GS_OK) {
        return gs__error_wrap(status, "%s: %s", st->ctx->opname, gs__error_get());
    }
    return comp_drain(st, &progressed, &blame);
}

/* Block until every request has finished (deadline renewed on progress). */
static gs_status_t comp_wait(comp_state_t *st)
{
    gs_status_t status = GS_OK;
    uint64_t deadline;

    gs__algo_renew(st->ctx, &deadline);
    while ((status == GS_OK) && (st->left > 0)) {
        const gs__algo_req_t *blame = NULL;
        int progressed = 0;

        status = comp_drain(st, &progressed, &blame);
        if ((status == GS_OK) && (st->left > 0)) {
            if (progressed) {
                gs__algo_renew(st->ctx, &deadline);
            } else {
                status = gs__algo_progress(st->ctx, &deadline, blame);
            }
        }
    }
    return status;
}

/* Post every receive: the n - 1 copies of each slice of our chunk, and the
 * sum of each slice of every other chunk. */
static gs_status_t comp_post_receives(comp_state_t *st)
{
    const size_t own_ns = comp_nslices(st, st->own_len);
    const size_t p1_ns = (st->mode == COMP_ALLGATHER) ? 0 : own_ns;
    gs_status_t status = GS_OK;

    for (int i = 1; (i < st->n) && (status == GS_OK); i++) {
        const int q = (st->r - i + st->n) % st->n;
        const size_t ns = (st->mode == COMP_REDUCE_SCATTER) ? 0 : comp_chunk_ns(st, q);

        for (size_t s = 0; (s < p1_ns) && (status == GS_OK); s++) {
            status = comp_post(st, COMP_P1_RECV, q, s, comp_slot(st, st->p1_recv, q, s), 0);
        }
        for (size_t s = 0; (s < ns) && (status == GS_OK); s++) {
            status = comp_post(st, COMP_P2_RECV, q, s, comp_slot(st, st->p2, q, s), 0);
        }
    }
    return status;
}

/* All-gather: encode slice s of our block once (no error feedback) and
 * send it to every peer. */
static gs_status_t comp_gather_slice(comp_state_t *st, size_t s)
{
    const size_t ir = comp_ix(st, COMP_P2_RECV, st->r, s);
    uint8_t *slot = comp_slot(st, st->p2, st->r, s);
    size_t lo, len;
    gs_status_t status;

    comp_slice(st, st->r, s, &lo, &len);
    status = gs__codec_plan_encode(&st->plan.in, (const uint8_t *)st->d->sendbuf + lo * st->esize,
                                   len, GS_EF_NULL, st->codec_scratch, st->plan.scratch, slot,
                                   st->plan.cap, &st->len[ir]);
    if (status == GS_OK) {
        gs__comp_test_corrupt(st->ctx, slot, st->len[ir]);
    }
    for (int i = 1; (i < st->n) && (status == GS_OK); i++) {
        status = comp_post(st, COMP_P2_SEND, (st->r + i) % st->n, s, slot, st->len[ir]);
    }
    return status;
}

/* Phase 1 (all-reduce, reduce-scatter), slice by slice, every peer's
 * slice s before anyone's s + 1, our own last; or the all-gather's
 * encodes of our block. Between slices the transport moves what is queued
 * and what has arrived is summed or decoded (phase 2 starts per slice as
 * soon as its n copies are in). */
static gs_status_t comp_send_all(comp_state_t *st)
{
    gs_status_t status = GS_OK;

    for (size_t s = 0; (s < st->max_ns) && (status == GS_OK); s++) {
        if (st->mode == COMP_ALLGATHER) {
            if (s < comp_nslices(st, st->own_len)) {
                status = comp_gather_slice(st, s);
            }
        } else {
            for (int i = 1; (i <= st->n) && (status == GS_OK); i++) {
                const int c = (st->r + i) % st->n;

                if (s < comp_chunk_ns(st, c)) {
                    status = comp_encode(st, c, s);
                }
            }
        }
        if (status == GS_OK) {
            status = comp_poke(st);
        }
    }
    return status;
}

/* Run @p d through the pipeline as @p mode says, over the group @p grp
 * (NULL: all of ctx's ranks). */
static gs_status_t comp_run(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, int mode,
                            const gs__comp_group_t *grp)
{
    const int n = (grp != NULL) ? grp->n : ctx->size;
    gs__codec_resolved_t rc;
    comp_state_t st;
    size_t own_coff, own_doff;
    gs_status_t status;

    status = gs__ef_sync_host((gs_ef_t)d->ef); /* a device call may hold the residuals */
    if (status == GS_OK) {
        status = gs__codec_resolve(d->codec, &rc); /* once per call: see comp_layout */
    }
    if (status != GS_OK) {
        return status;
    }
    memset(&st, 0, sizeof(st));
    st.ctx = ctx;
    st.d = d;
    st.mode = mode;
    st.ef = (mode == COMP_ALLGATHER) ? GS_EF_NULL : (gs_ef_t)d->ef;
    st.esize = gs__dtype_size(d->dtype);
    st.n = n;
    st.r = (grp != NULL) ? grp->index : ctx->rank;
    st.peers = (grp != NULL) ? grp->ranks : NULL;
    st.avg_div = ctx->size;
    comp_chunk_of(d, mode, n, st.r, &st.own_len, &own_coff, &own_doff);
    status = comp_layout(&st, &rc);
    if ((status == GS_OK) && (mode == COMP_ALLREDUCE)) {
        status = gs__comp_server_ef(st.ef, st.own_len, GS_DTYPE_F32, &st.server);
    }
    if (status == GS_OK) {
        status = comp_post_receives(&st);
    }
    if (status == GS_OK) {
        status = comp_send_all(&st);
    }
    if (st.ef != GS_EF_NULL) {
        st.ef->step++;
    }
    if ((status == GS_OK) && (mode == COMP_ALLGATHER) && (st.own_len > 0)) {
        /* Our own block, exactly (memmove: in place it is already there). */
        memmove((uint8_t *)d->recvbuf + st.doff[st.r] * st.esize, d->sendbuf,
                st.own_len * st.esize);
    }
    if (status == GS_OK) {
        status = comp_wait(&st);
    }
    if ((status == GS_OK) && (st.server != GS_EF_NULL)) {
        st.server->step++;
    }
    if ((status != GS_OK) && (st.reqs != NULL)) {
        gs__algo_release_all(ctx, st.reqs, COMP_KINDS * (size_t)st.n * st.max_ns);
    }
    return status;
}

gs_status_t gs__compressed_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    return (d->count == 0) ? GS_OK : comp_run(ctx, d, COMP_ALLREDUCE, NULL);
}

gs_status_t gs__compressed_shard(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                                 const gs__comp_group_t *grp)
{
    const int rs = (d->kind == GS_COLL_REDUCE_SCATTER) || (d->kind == GS_COLL_REDUCE_SCATTERV);
    const int n = (grp != NULL) ? grp->n : ctx->size;
    size_t total = 0;

    for (int c = 0; c < n; c++) {
        total += gs__coll_is_v(d->kind) ? d->rcounts[c] : d->count;
    }
    if (total == 0) {
        return GS_OK;
    }
    return comp_run(ctx, d, rs ? COMP_REDUCE_SCATTER : COMP_ALLGATHER, grp);
}
