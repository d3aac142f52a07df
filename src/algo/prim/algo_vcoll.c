/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rooted and variable-size collectives: gather and scatter (binomial
 * tree and direct), all-gather-v and reduce-scatter-v (ring), all-to-all-v
 * (direct pairwise exchange). Every block is a whole message; nothing is
 * sliced or pipelined (the fixed-size ring of algo_ring.c is the fast path
 * for uniform blocks). Host memory only: the API refuses device buffers
 * for these calls.
 *
 * Gather, b bytes per rank, v = (rank - root) mod n (pattern_tree.h):
 *   binomial: v collects its subtree, vranks [v, v + min(span, n - v)),
 *     in vrank order in scratch: its own block first, then child v + m's
 *     subtree at offset m (all children's receives posted at once), and
 *     sends the lot to its parent. The root rotates vrank order into rank
 *     order. ceil(log2 n) rounds; the root receives (n-1) b; every byte is
 *     copied once more through scratch:
 *       T = ceil(log2 n) alpha + (n-1) b (beta + gamma)
 *   direct: the root posts n-1 receives straight into recvbuf, each other
 *     rank one send: T = (n-1) alpha + (n-1) b beta.
 *   The model (algo_select.c) picks binomial for small b, direct for large,
 *   as MPI implementations do.
 * Scatter is gather backwards (largest subtree sent first). Step table,
 * binomial gather, root 0 (leaves send at once; an interior rank sends
 * when its subtree is in; scatter runs it backwards):
 *   n = 3:  round 0: 1>0  2>0
 *   n = 4:  round 0: 1>0  3>2         round 1: 2>0 (blocks 2,3)
 *   n = 5:  round 0: 1>0  3>2  4>0    round 1: 2>0 (blocks 2,3)
 * Message index: the sender's vrank (gather), the receiver's (scatter).
 *
 * All-gather-v, ring over ranks: step s = 0..n-2 sends block (r - s) to
 * r+1 and receives block (r - s - 1) from r-1, straight from and into
 * recvbuf at its displacement. T = (n-1) alpha + (total - own) beta.
 *
 * Reduce-scatter-v, ring over ranks with rank r ending on block r: a
 * working copy of sendbuf in scratch; step s = 0..n-2 sends the partial
 * block (r - s - 1) and receives block (r - s - 2), which is reduced into
 * the copy, except at the last step, where it is block r and is reduced
 * with the copy straight into recvbuf. AVG divides once at the end.
 * T = (n-1) alpha + (total - own)(beta + gamma). n = 3 (rank: send/recv):
 *   r0: C / B+   B / A=      r1: A / C+   C / B=      r2: B / A+   A / C=
 * ("+": reduce into the copy; "=": final, into recvbuf.)
 *
 * All-to-all-v, direct: every rank posts its n-1 receives (into recvbuf at
 * rdispls) and n-1 sends at once, peers r+1, r+2, ..., as the fixed-size
 * all-to-all does; one round: T = alpha + sum of sends * beta.
 *
 * Disagreement: every message of the v calls is sent, even an empty one,
 * and every receive must get exactly the bytes this rank's counts say.
 * Shorter (gs__algo_check's GS_ERR_MISMATCH) or longer (the transport's
 * GS_ERR_TRUNCATED) becomes GS_ERR_MISMATCH naming both ranks and the
 * block, so disagreeing counts fail at once instead of hanging. Gather and
 * scatter put their count in the tag signature (every rank passes the
 * same one); the v calls cannot (counts differ per rank by design).
 * Any n >= 1 works; counts of 0 still exchange their empty messages.
 */
#include <string.h>

#include "algo/prim/prim.h"
#include "algo/prim/pattern_tree.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/reduce_cpu.h"

#define VCOLL_MAX_CHILDREN 32

/* memmove of @p len bytes, nothing at all for 0: the buffers of an empty
 * block may be NULL, which memcpy and memmove must never be given. */
static void vcoll_copy(void *dst, const void *src, size_t len)
{
    if (len > 0) {
        memmove(dst, src, len);
    }
}

/* Round @p bytes up to a multiple of 16, for carving scratch. */
static size_t vcoll_align(size_t bytes)
{
    return (bytes + 15u) & ~(size_t)15u;
}

static int vcoll_mod(int a, int n)
{
    const int m = a % n;

    return (m < 0) ? m + n : m;
}

/* Element offsets of the n blocks: @p displs, or packed in rank order. */
static void vcoll_layout(const size_t *counts, const size_t *displs, int n, size_t *out)
{
    size_t off = 0;

    for (int j = 0; j < n; j++) {
        out[j] = (displs != NULL) ? displs[j] : off;
        off += counts[j];
    }
}

/* Turn a receive that got the wrong length into GS_ERR_MISMATCH naming both ranks. */
static gs_status_t vcoll_disagree(const gs__algo_ctx_t *ctx, const gs__algo_req_t *r, int block,
                                  gs_status_t status, size_t got, size_t expect)
{
    if (status == GS_ERR_TRUNCATED) {
        return gs__error_set(GS_ERR_MISMATCH,
                             "%s: rank %d sent rank %d more than the %zu bytes it expects for "
                             "block %d (the ranks' counts disagree)",
                             ctx->opname, r->peer, ctx->rank, expect, block);
    }
    if (status == GS_ERR_MISMATCH) {
        return gs__error_set(GS_ERR_MISMATCH,
                             "%s: rank %d and rank %d disagree on block %d (count, dtype, root "
                             "or collective): %s",
                             ctx->opname, r->peer, ctx->rank, block, gs__error_get());
    }
    return gs__error_set(GS_ERR_MISMATCH,
                         "%s: rank %d sent rank %d %zu bytes for block %d where %zu were "
                         "expected (the ranks' counts disagree)",
                         ctx->opname, r->peer, ctx->rank, got, block, expect);
}

/* What a receive of a v call must get: expect[i] bytes, for block[i] (error text). */
typedef struct vcoll_expect {
    const size_t *bytes;
    const int *block;
} vcoll_expect_t;

/* gs__algo_wait_each's check of a finished receive: the wrong length, or a
 * message of another call, becomes GS_ERR_MISMATCH naming both ranks. */
static gs_status_t vcoll_recv_done(gs__algo_ctx_t *ctx, const gs__algo_req_t *r, size_t i,
                                   gs_status_t status, size_t got, const void *arg)
{
    const vcoll_expect_t *e = arg;

    if ((status == GS_ERR_TRUNCATED) || (status == GS_ERR_MISMATCH) ||
        ((status == GS_OK) && (got != e->bytes[i]))) {
        return vcoll_disagree(ctx, r, e->block[i], status, got, e->bytes[i]);
    }
    return status;
}

/*
 * The end of a call that posted reqs[0..nreq): after a posting failure
 * (@p status) release them and return it; else wait for them all, where
 * receives must deliver exactly expect[i] bytes (sends: ignored) and
 * block[i] names the block for error text. On any error every other
 * request is released. Returns GS_OK, GS_ERR_MISMATCH (both ranks named),
 * or the transport's failure.
 */
static gs_status_t vcoll_finish(gs__algo_ctx_t *ctx, gs_status_t status, gs__algo_req_t *reqs,
                                const size_t *expect, const int *block, size_t nreq)
{
    const vcoll_expect_t e = {.bytes = expect, .block = block};

    if (status != GS_OK) {
        gs__algo_release_all(ctx, reqs, nreq);
        return status;
    }
    return gs__algo_wait_each(ctx, reqs, nreq, vcoll_recv_done, &e);
}

/* Send sbytes to @p to and receive exactly rbytes from @p from as message
 * @p idx, both posted even when empty, and wait for both. A negative peer
 * skips that half. */
static gs_status_t vcoll_sendrecv(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, uint32_t idx,
                                  int to, const void *sbuf, size_t sbytes, int from, void *rbuf,
                                  size_t rbytes, int rblock)
{
    const uint64_t tag = gs__algo_tag(ctx, d, idx);
    const size_t expect[2] = {rbytes, 0};
    const int block[2] = {rblock, -1};
    gs__algo_req_t reqs[2];
    gs_status_t status;

    memset(reqs, 0, sizeof(reqs));
    status = (from >= 0) ? gs__algo_irecv(ctx, from, tag, rbuf, rbytes, &reqs[0]) : GS_OK;
    if ((status == GS_OK) && (to >= 0)) {
        status = gs__algo_isend(ctx, to, tag, sbuf, sbytes, &reqs[1]);
    }
    return vcoll_finish(ctx, status, reqs, expect, block, 2);
}

/* Blocks (vranks) in the subtree of vrank v. */
static int vcoll_subtree(int n, int v)
{
    const int span = gs__binom_span(n, v);

    return (span < n - v) ? span : n - v;
}

/* ------------------------------------------------------------------ */
/* Gather and scatter                                                  */
/* ------------------------------------------------------------------ */

/* This rank's place in the binomial tree of a gather or scatter. */
typedef struct vcoll_tree {
    int n, root;
    int v;      /* vrank: (rank - root) mod n */
    int parent; /* the parent's rank, -1 at the root */
    int sub;    /* blocks in v's subtree */
    size_t block;
} vcoll_tree_t;

static vcoll_tree_t vcoll_tree(const gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    vcoll_tree_t t;

    t.n = ctx->size;
    t.root = d->root;
    t.v = gs__binom_vrank(t.n, t.root, ctx->rank);
    t.parent = gs__binom_rank(t.n, t.root, gs__binom_parent(t.v));
    t.sub = vcoll_subtree(t.n, t.v);
    t.block = d->count * gs__dtype_size(d->dtype);
    return t;
}

/* recvbuf = sendbuf for this rank's own block (@p own_dst, @p own_src),
 * unless the call is in place. */
static void vcoll_own(const gs__coll_desc_t *d, void *own_dst, const void *own_src, size_t block)
{
    if ((d->recvbuf != d->sendbuf) && (block > 0) && (own_dst != own_src)) {
        vcoll_copy(own_dst, own_src, block);
    }
}

/* A subtree of one block (a leaf, or n = 1): the root keeps its own block,
 * a leaf sends it to its parent (gather) or receives it (scatter). */
static gs_status_t vcoll_leaf(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, const vcoll_tree_t *t,
                              int gather)
{
    if (t->parent < 0) {
        vcoll_own(d, d->recvbuf, d->sendbuf, t->block);
        return GS_OK;
    }
    if (gather) {
        return vcoll_sendrecv(ctx, d, (uint32_t)t->v, t->parent, d->sendbuf, t->block, -1, NULL, 0,
                              -1);
    }
    return vcoll_sendrecv(ctx, d, (uint32_t)t->v, -1, NULL, 0, t->parent, d->recvbuf, t->block,
                          t->v);
}

/* Between rank order and vrank order (vrank p is rank (p + root) mod n). */
static void vcoll_rotate(uint8_t *dst, const uint8_t *src, const vcoll_tree_t *t, int to_rank_order)
{
    const size_t head = (size_t)(t->n - t->root) * t->block;
    const size_t tail = (size_t)t->root * t->block;

    if (to_rank_order) {
        vcoll_copy(dst + tail, src, head);
        vcoll_copy(dst, src + head, tail);
    } else {
        vcoll_copy(dst, src + tail, head);
        vcoll_copy(dst + head, src, tail);
    }
}

/* The messages to or from v's children: requests, the bytes each receive
 * must get, and the blocks they carry (for error text). */
typedef struct vcoll_kids {
    gs__algo_req_t reqs[VCOLL_MAX_CHILDREN];
    size_t expect[VCOLL_MAX_CHILDREN];
    int ids[VCOLL_MAX_CHILDREN];
    size_t n;
} vcoll_kids_t;

/*
 * Post the messages to or from v's children, each a whole subtree at its
 * vrank offset of the buffer: the gather receives into @p rbuf (nearest
 * child first), the scatter sends from @p sbuf (largest subtree first),
 * into @p k. Returns GS_OK or the first posting failure (the caller ends
 * with vcoll_finish either way).
 */
static gs_status_t vcoll_children(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                                  const vcoll_tree_t *t, const uint8_t *sbuf, uint8_t *rbuf,
                                  vcoll_kids_t *k)
{
    const int gather = (rbuf != NULL);
    int dist[VCOLL_MAX_CHILDREN];
    int nkids = 0;
    gs_status_t status = GS_OK;

    for (int m = 1; (m < gs__binom_span(t->n, t->v)) && (t->v + m < t->n); m *= 2) {
        dist[nkids++] = m;
    }
    memset(k->reqs, 0, sizeof(k->reqs));
    k->n = 0;
    for (int i = 0; (i < nkids) && (status == GS_OK); i++) {
        const int m = gather ? dist[i] : dist[nkids - 1 - i];
        const int peer = gs__binom_rank(t->n, t->root, t->v + m);
        const uint64_t tag = gs__algo_tag(ctx, d, (uint32_t)(t->v + m));
        const size_t bytes = (size_t)vcoll_subtree(t->n, t->v + m) * t->block;
        const size_t off = (size_t)m * t->block;
        gs__algo_req_t *q = &k->reqs[k->n];

        k->expect[k->n] = gather ? bytes : 0;
        k->ids[k->n] = gather ? peer : -1;
        if (gather) {
            status = gs__algo_irecv(ctx, peer, tag, rbuf + off, bytes, q);
        } else {
            /* cppcheck-suppress nullPointerArithmetic ; sbuf is set whenever rbuf is NULL */
            status = gs__algo_isend(ctx, peer, tag, sbuf + off, bytes, q);
        }
        k->n++;
    }
    return status;
}

gs_status_t gs__binomial_gather(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const vcoll_tree_t t = vcoll_tree(ctx, d);
    vcoll_kids_t k;
    uint8_t *buf;
    void *scratch = NULL;
    gs_status_t status;

    if (t.sub == 1) {
        return vcoll_leaf(ctx, d, &t, 1);
    }
    if ((t.v == 0) && (t.root == 0)) {
        buf = (uint8_t *)d->recvbuf; /* vrank order is rank order */
    } else {
        status = gs__algo_scratch(ctx, (size_t)t.sub * t.block, &scratch);
        if (status != GS_OK) {
            return status;
        }
        buf = (uint8_t *)scratch;
    }
    if ((buf != (const uint8_t *)d->sendbuf) && (t.block > 0)) {
        vcoll_copy(buf, d->sendbuf, t.block);
    }
    status = vcoll_children(ctx, d, &t, NULL, buf, &k);
    status = vcoll_finish(ctx, status, k.reqs, k.expect, k.ids, k.n);
    if (status != GS_OK) {
        return status;
    }
    if (t.parent >= 0) {
        return vcoll_sendrecv(ctx, d, (uint32_t)t.v, t.parent, buf, (size_t)t.sub * t.block, -1,
                              NULL, 0, -1);
    }
    if (buf != (uint8_t *)d->recvbuf) {
        vcoll_rotate((uint8_t *)d->recvbuf, buf, &t, 1);
    }
    return GS_OK;
}

gs_status_t gs__binomial_scatter(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const vcoll_tree_t t = vcoll_tree(ctx, d);
    vcoll_kids_t k;
    const uint8_t *buf;
    void *scratch = NULL;
    gs_status_t status;

    if (t.sub == 1) {
        return vcoll_leaf(ctx, d, &t, 0);
    }
    if ((t.v == 0) && (t.root == 0)) {
        buf = (const uint8_t *)d->sendbuf;
    } else {
        status = gs__algo_scratch(ctx, (size_t)t.sub * t.block, &scratch);
        if (status != GS_OK) {
            return status;
        }
        if (t.v == 0) {
            vcoll_rotate((uint8_t *)scratch, (const uint8_t *)d->sendbuf, &t, 0);
        } else {
            status = vcoll_sendrecv(ctx, d, (uint32_t)t.v, -1, NULL, 0, t.parent, scratch,
                                    (size_t)t.sub * t.block, t.v);
            if (status != GS_OK) {
                return status;
            }
        }
        buf = (const uint8_t *)scratch;
    }
    status = vcoll_children(ctx, d, &t, buf, NULL, &k);
    if ((status == GS_OK) && (buf != (const uint8_t *)d->recvbuf) && (t.block > 0)) {
        vcoll_copy(d->recvbuf, buf, t.block);
    }
    return vcoll_finish(ctx, status, k.reqs, k.expect, k.ids, k.n);
}

/*
 * Direct gather (@p gather) or scatter: the root posts its n - 1 receives
 * (sends) at once, straight into (from) the user's buffer at each rank's
 * block, and copies its own block (the gather first, the scatter once its
 * sends are out); every other rank sends (receives) one.
 */
static gs_status_t vcoll_direct(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, int gather)
{
    const int n = ctx->size;
    const int r = ctx->rank;
    const size_t block = d->count * gs__dtype_size(d->dtype);
    const uint64_t tag = gs__algo_tag(ctx, d, 0);
    gs__algo_req_t *reqs;
    size_t *expect;
    int *ids;
    void *scratch = NULL;
    size_t nreq = 0;
    gs_status_t status;

    if ((r != d->root) && gather) {
        return vcoll_sendrecv(ctx, d, 0, d->root, d->sendbuf, block, -1, NULL, 0, -1);
    }
    if (r != d->root) {
        return vcoll_sendrecv(ctx, d, 0, -1, NULL, 0, d->root, d->recvbuf, block, r);
    }
    if (gather) {
        vcoll_own(d, (uint8_t *)d->recvbuf + (size_t)r * block, d->sendbuf, block);
    }
    status = gs__algo_scratch(ctx, (size_t)n * (sizeof(*reqs) + sizeof(*expect) + sizeof(*ids)),
                              &scratch);
    if (status != GS_OK) {
        return status;
    }
    reqs = (gs__algo_req_t *)scratch;
    expect = (size_t *)(reqs + n);
    ids = (int *)(expect + n);
    memset(reqs, 0, sizeof(*reqs) * (size_t)n);
    for (int i = 1; (i < n) && (status == GS_OK); i++) {
        const int peer = (r + i) % n;
        const size_t off = (size_t)peer * block;

        expect[nreq] = gather ? block : 0;
        ids[nreq] = gather ? peer : -1;
        status =
            gather ? gs__algo_irecv(ctx, peer, tag, (uint8_t *)d->recvbuf + off, block, &reqs[nreq])
                   : gs__algo_isend(ctx, peer, tag, (const uint8_t *)d->sendbuf + off, block,
                                    &reqs[nreq]);
        nreq++;
    }
    if ((status == GS_OK) && !gather) {
        vcoll_own(d, d->recvbuf, (const uint8_t *)d->sendbuf + (size_t)r * block, block);
    }
    return vcoll_finish(ctx, status, reqs, expect, ids, nreq);
}

gs_status_t gs__direct_gather(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    return vcoll_direct(ctx, d, 1);
}

gs_status_t gs__direct_scatter(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    return vcoll_direct(ctx, d, 0);
}

/* ------------------------------------------------------------------ */
/* All-gather-v and reduce-scatter-v (ring)                            */
/* ------------------------------------------------------------------ */

gs_status_t gs__ring_allgatherv(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const int n = ctx->size;
    const int r = ctx->rank;
    const int next = (r + 1) % n;
    const int prev = (r - 1 + n) % n;
    const size_t esize = gs__dtype_size(d->dtype);
    uint8_t *dst = (uint8_t *)d->recvbuf;
    size_t *off;
    void *scratch = NULL;
    gs_status_t status;

    status = gs__algo_scratch(ctx, (size_t)n * sizeof(size_t), &scratch);
    if (status != GS_OK) {
        return status;
    }
    off = (size_t *)scratch;
    vcoll_layout(d->rcounts, d->rdispls, n, off);
    if ((d->count > 0) && (dst + off[r] * esize != (const uint8_t *)d->sendbuf)) {
        vcoll_copy(dst + off[r] * esize, d->sendbuf, d->count * esize);
    }
    for (int s = 0; (s < n - 1) && (status == GS_OK); s++) {
        const int sb = vcoll_mod(r - s, n);
        const int rb = vcoll_mod(r - s - 1, n);

        status =
            vcoll_sendrecv(ctx, d, (uint32_t)s, next, dst + off[sb] * esize, d->rcounts[sb] * esize,
                           prev, dst + off[rb] * esize, d->rcounts[rb] * esize, rb);
    }
    return status;
}

gs_status_t gs__ring_reduce_scatterv(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const int n = ctx->size;
    const int r = ctx->rank;
    const int next = (r + 1) % n;
    const int prev = (r - 1 + n) % n;
    const size_t esize = gs__dtype_size(d->dtype);
    size_t total = 0;
    size_t maxc = 0;
    size_t *off;
    uint8_t *work;
    uint8_t *tmp;
    void *scratch = NULL;
    gs_status_t status;

    for (int j = 0; j < n; j++) {
        total += d->rcounts[j];
        maxc = (d->rcounts[j] > maxc) ? d->rcounts[j] : maxc;
    }
    status = gs__algo_scratch(
        ctx, vcoll_align((size_t)n * sizeof(size_t)) + vcoll_align(total * esize) + maxc * esize,
        &scratch);
    if (status != GS_OK) {
        return status;
    }
    off = (size_t *)scratch;
    work = (uint8_t *)scratch + vcoll_align((size_t)n * sizeof(size_t));
    tmp = work + vcoll_align(total * esize);
    vcoll_layout(d->rcounts, NULL, n, off);
    if (n == 1) {
        if ((d->count > 0) && (d->recvbuf != d->sendbuf)) {
            vcoll_copy(d->recvbuf, d->sendbuf, d->count * esize);
        }
        return GS_OK;
    }
    /* A working copy: recvbuf may overlap sendbuf, and partial sums must not
     * touch the caller's input. */
    if (total > 0) {
        vcoll_copy(work, d->sendbuf, total * esize);
    }
    for (int s = 0; (s < n - 1) && (status == GS_OK); s++) {
        const int sb = vcoll_mod(r - s - 1, n);
        const int rb = vcoll_mod(r - s - 2, n);
        const size_t rc = d->rcounts[rb];

        status = vcoll_sendrecv(ctx, d, (uint32_t)s, next, work + off[sb] * esize,
                                d->rcounts[sb] * esize, prev, tmp, rc * esize, rb);
        if ((status != GS_OK) || (rc == 0)) {
            continue;
        }
        if (s < n - 2) {
            gs__reduce(work + off[rb] * esize, work + off[rb] * esize, tmp, rc, d->dtype, d->op);
        } else {
            gs__reduce(d->recvbuf, work + off[rb] * esize, tmp, rc, d->dtype, d->op);
        }
    }
    if ((status == GS_OK) && (d->op == GS_OP_AVG) && (d->count > 0)) {
        gs__reduce_scale(d->recvbuf, d->count, d->dtype, n);
    }
    return status;
}

/* ------------------------------------------------------------------ */
/* All-to-all-v (direct)                                               */
/* ------------------------------------------------------------------ */

gs_status_t gs__direct_alltoallv(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const int n = ctx->size;
    const int r = ctx->rank;
    const size_t esize = gs__dtype_size(d->dtype);
    const uint8_t *src = (const uint8_t *)d->sendbuf;
    uint8_t *dst = (uint8_t *)d->recvbuf;
    gs__algo_req_t *reqs;
    size_t *expect;
    size_t *soff;
    size_t *roff;
    int *ids;
    void *scratch = NULL;
    gs_status_t status;

    status = gs__algo_scratch(
        ctx, (size_t)n * (2 * sizeof(*reqs) + 4 * sizeof(size_t) + 2 * sizeof(int)), &scratch);
    if (status != GS_OK) {
        return status;
    }
    reqs = (gs__algo_req_t *)scratch;
    expect = (size_t *)(reqs + 2 * n);
    soff = expect + 2 * n;
    roff = soff + n;
    ids = (int *)(roff + n);
    vcoll_layout(d->scounts, d->sdispls, n, soff);
    vcoll_layout(d->rcounts, d->rdispls, n, roff);
    memset(reqs, 0, sizeof(*reqs) * 2 * (size_t)n);
    if (d->rcounts[r] > 0) {
        vcoll_copy(dst + roff[r] * esize, src + soff[r] * esize, d->rcounts[r] * esize);
    }
    for (int i = 1; (i < n) && (status == GS_OK); i++) {
        const int from = (r - i + n) % n;

        expect[2 * i] = d->rcounts[from] * esize;
        ids[2 * i] = from;
        status = gs__algo_irecv(ctx, from, gs__algo_tag(ctx, d, 0), dst + roff[from] * esize,
                                expect[2 * i], &reqs[2 * i]);
    }
    for (int i = 1; (i < n) && (status == GS_OK); i++) {
        const int to = (r + i) % n;

        expect[2 * i + 1] = 0;
        ids[2 * i + 1] = -1;
        status = gs__algo_isend(ctx, to, gs__algo_tag(ctx, d, 0), src + soff[to] * esize,
                                d->scounts[to] * esize, &reqs[2 * i + 1]);
    }
    return vcoll_finish(ctx, status, reqs, expect, ids, 2 * (size_t)n);
}
