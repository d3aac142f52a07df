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

#include "algo/algo.h"
#include "algo/pattern_tree.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/reduce_cpu.h"

#define VCOLL_MAX_CHILDREN 32

/* Round @p bytes up to a multiple of 16, for carving scratch. */
/* memmove of @p len bytes, nothing at all for 0: the buffers of an empty
 * block may be NULL, which memcpy and memmove must never be given. */
static void vcoll_copy(void *dst, const void *src, size_t len)
{
    if (len > 0) {
        memmove(dst, src, len);
    }
}

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
static gs_status_t vcoll_disagree(const gs_algo_ctx_t *ctx, const gs_algo_req_t *r, int block,
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

/*
 * Wait for reqs[0..n): receives must deliver exactly expect[i] bytes
 * (sends: ignored); block[i] names the block for error text. On any error
 * every other request is released. Returns GS_OK, GS_ERR_MISMATCH (both
 * ranks named), or the transport's failure.
 */
static gs_status_t vcoll_wait(gs_algo_ctx_t *ctx, gs_algo_req_t *reqs, const size_t *expect,
                              const int *block, size_t n)
{
    uint64_t deadline;
    size_t left = 0;
    gs_status_t status = GS_OK;

    for (size_t i = 0; i < n; i++) {
        left += (reqs[i].req != NULL);
    }
    gs__algo_renew(ctx, &deadline);
    while (left > 0) {
        const gs_algo_req_t *blame = NULL;

        for (size_t i = 0; (i < n) && (status == GS_OK); i++) {
            size_t got = 0;
            int done = 0;

            if (reqs[i].req == NULL) {
                continue;
            }
            status = gs__algo_check_len(ctx, &reqs[i], &done, &got);
            if (!done) {
                if (blame == NULL) {
                    blame = &reqs[i];
                }
                continue;
            }
            left--;
            gs__algo_renew(ctx, &deadline);
            if (!reqs[i].is_send && ((status == GS_ERR_TRUNCATED) || (status == GS_ERR_MISMATCH) ||
                                     ((status == GS_OK) && (got != expect[i])))) {
                status = vcoll_disagree(ctx, &reqs[i], block[i], status, got, expect[i]);
            }
        }
        if ((status == GS_OK) && (left > 0)) {
            status = gs__algo_progress(ctx, &deadline, blame);
        }
        if (status != GS_OK) {
            gs__algo_release_all(ctx, reqs, n);
            return status;
        }
    }
    return GS_OK;
}

/* Send sbytes to @p to and receive exactly rbytes from @p from as message
 * @p idx, both posted even when empty, and wait for both. A negative peer
 * skips that half. */
static gs_status_t vcoll_sendrecv(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, uint32_t idx, int to,
                                  const void *sbuf, size_t sbytes, int from, void *rbuf,
                                  size_t rbytes, int rblock)
{
    const uint64_t tag = gs__algo_tag(ctx, d, idx);
    const size_t expect[2] = {rbytes, 0};
    const int block[2] = {rblock, -1};
    gs_algo_req_t reqs[2];
    gs_status_t status;

    memset(reqs, 0, sizeof(reqs));
    status = (from >= 0) ? gs__algo_irecv(ctx, from, tag, rbuf, rbytes, &reqs[0]) : GS_OK;
    if ((status == GS_OK) && (to >= 0)) {
        status = gs__algo_isend(ctx, to, tag, sbuf, sbytes, &reqs[1]);
    }
    if (status != GS_OK) {
        gs__algo_release_all(ctx, reqs, 2);
        return status;
    }
    return vcoll_wait(ctx, reqs, expect, block, 2);
}

/* Blocks (vranks) in the subtree of vrank v. */
static int vcoll_subtree(int n, int v)
{
    const int span = gs__binom_span(n, v);

    return (span < n - v) ? span : n - v;
}

/* ------------------------------------------------------------------ */
/* Gather                                                              */
/* ------------------------------------------------------------------ */

gs_status_t gs__binomial_gather(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d)
{
    const int n = ctx->size;
    const int root = d->root;
    const int v = gs__binom_vrank(n, root, ctx->rank);
    const int parent = gs__binom_parent(v);
    const int sub = vcoll_subtree(n, v);
    const size_t block = d->count * gs__dtype_size(d->dtype);
    gs_algo_req_t reqs[VCOLL_MAX_CHILDREN];
    size_t expect[VCOLL_MAX_CHILDREN];
    int ids[VCOLL_MAX_CHILDREN];
    size_t nreq = 0;
    uint8_t *buf;
    void *scratch = NULL;
    gs_status_t status = GS_OK;

    if (sub == 1) {
        /* A leaf (or n = 1): its block goes straight to the parent. */
        if (parent < 0) {
            if ((d->recvbuf != d->sendbuf) && (block > 0)) {
                vcoll_copy(d->recvbuf, d->sendbuf, block);
            }
            return GS_OK;
        }
        return vcoll_sendrecv(ctx, d, (uint32_t)v, gs__binom_rank(n, root, parent), d->sendbuf,
                              block, -1, NULL, 0, -1);
    }
    if ((v == 0) && (root == 0)) {
        buf = (uint8_t *)d->recvbuf; /* vrank order is rank order */
    } else {
        status = gs__algo_scratch(ctx, (size_t)sub * block, &scratch);
        if (status != GS_OK) {
            return status;
        }
        buf = (uint8_t *)scratch;
    }
    if ((buf != (const uint8_t *)d->sendbuf) && (block > 0)) {
        vcoll_copy(buf, d->sendbuf, block);
    }
    memset(reqs, 0, sizeof(reqs));
    for (int m = 1; (status == GS_OK) && (m < gs__binom_span(n, v)) && (v + m < n); m *= 2) {
        const int csub = vcoll_subtree(n, v + m);

        expect[nreq] = (size_t)csub * block;
        ids[nreq] = gs__binom_rank(n, root, v + m);
        status = gs__algo_irecv(ctx, ids[nreq], gs__algo_tag(ctx, d, (uint32_t)(v + m)),
                                buf + (size_t)m * block, expect[nreq], &reqs[nreq]);
        nreq++;
    }
    if (status != GS_OK) {
        gs__algo_release_all(ctx, reqs, nreq);
        return status;
    }
    status = vcoll_wait(ctx, reqs, expect, ids, nreq);
    if (status != GS_OK) {
        return status;
    }
    if (parent >= 0) {
        return vcoll_sendrecv(ctx, d, (uint32_t)v, gs__binom_rank(n, root, parent), buf,
                              (size_t)sub * block, -1, NULL, 0, -1);
    }
    if (buf != (uint8_t *)d->recvbuf) {
        /* vrank p is rank (p + root) mod n. */
        uint8_t *dst = (uint8_t *)d->recvbuf;
        const size_t head = (size_t)(n - root) * block;

        vcoll_copy(dst + (size_t)root * block, buf, head);
        vcoll_copy(dst, buf + head, (size_t)root * block);
    }
    return GS_OK;
}

gs_status_t gs__direct_gather(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d)
{
    const int n = ctx->size;
    const int r = ctx->rank;
    const size_t block = d->count * gs__dtype_size(d->dtype);
    gs_algo_req_t *reqs;
    size_t *expect;
    int *ids;
    void *scratch = NULL;
    size_t nreq = 0;
    gs_status_t status;

    if (r != d->root) {
        return vcoll_sendrecv(ctx, d, 0, d->root, d->sendbuf, block, -1, NULL, 0, -1);
    }
    if ((d->recvbuf != d->sendbuf) && (block > 0)) {
        uint8_t *own = (uint8_t *)d->recvbuf + (size_t)r * block;
        if (own != (const uint8_t *)d->sendbuf) {
            vcoll_copy(own, d->sendbuf, block);
        }
    }
    status = gs__algo_scratch(ctx, (size_t)n * (sizeof(*reqs) + sizeof(*expect) + sizeof(*ids)),
                              &scratch);
    if (status != GS_OK) {
        return status;
    }
    reqs = (gs_algo_req_t *)scratch;
    expect = (size_t *)(reqs + n);
    ids = (int *)(expect + n);
    memset(reqs, 0, sizeof(*reqs) * (size_t)n);
    for (int i = 1; (i < n) && (status == GS_OK); i++) {
        const int from = (r + i) % n;

        expect[nreq] = block;
        ids[nreq] = from;
        status = gs__algo_irecv(ctx, from, gs__algo_tag(ctx, d, 0),
                                (uint8_t *)d->recvbuf + (size_t)from * block, block, &reqs[nreq]);
        nreq++;
    }
    if (status != GS_OK) {
        gs__algo_release_all(ctx, reqs, nreq);
        return status;
    }
    return vcoll_wait(ctx, reqs, expect, ids, nreq);
}

/* ------------------------------------------------------------------ */
/* Scatter                                                             */
/* ------------------------------------------------------------------ */

gs_status_t gs__binomial_scatter(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d)
{
    const int n = ctx->size;
    const int root = d->root;
    const int v = gs__binom_vrank(n, root, ctx->rank);
    const int parent = gs__binom_parent(v);
    const int sub = vcoll_subtree(n, v);
    const size_t block = d->count * gs__dtype_size(d->dtype);
    gs_algo_req_t reqs[VCOLL_MAX_CHILDREN];
    size_t expect[VCOLL_MAX_CHILDREN];
    int ids[VCOLL_MAX_CHILDREN];
    size_t nreq = 0;
    const uint8_t *buf;
    void *scratch = NULL;
    gs_status_t status = GS_OK;

    if (sub == 1) {
        if (parent < 0) {
            if ((d->recvbuf != d->sendbuf) && (block > 0)) {
                vcoll_copy(d->recvbuf, d->sendbuf, block);
            }
            return GS_OK;
        }
        return vcoll_sendrecv(ctx, d, (uint32_t)v, -1, NULL, 0, gs__binom_rank(n, root, parent),
                              d->recvbuf, block, v);
    }
    if ((v == 0) && (root == 0)) {
        buf = (const uint8_t *)d->sendbuf;
    } else {
        uint8_t *s;

        status = gs__algo_scratch(ctx, (size_t)sub * block, &scratch);
        if (status != GS_OK) {
            return status;
        }
        s = (uint8_t *)scratch;
        if (v == 0) {
            /* Rank order to vrank order: vrank p is rank (p + root) mod n. */
            const size_t head = (size_t)(n - root) * block;

            vcoll_copy(s, (const uint8_t *)d->sendbuf + (size_t)root * block, head);
            vcoll_copy(s + head, d->sendbuf, (size_t)root * block);
        } else {
            status = vcoll_sendrecv(ctx, d, (uint32_t)v, -1, NULL, 0,
                                    gs__binom_rank(n, root, parent), s, (size_t)sub * block, v);
            if (status != GS_OK) {
                return status;
            }
        }
        buf = s;
    }
    memset(reqs, 0, sizeof(reqs));
    for (int m = gs__binom_span(n, v) / 2; (status == GS_OK) && (m >= 1); m /= 2) {
        if (v + m >= n) {
            continue;
        }
        expect[nreq] = 0;
        ids[nreq] = -1;
        status = gs__algo_isend(ctx, gs__binom_rank(n, root, v + m),
                                gs__algo_tag(ctx, d, (uint32_t)(v + m)), buf + (size_t)m * block,
                                (size_t)vcoll_subtree(n, v + m) * block, &reqs[nreq]);
        nreq++;
    }
    if ((status == GS_OK) && (buf != (const uint8_t *)d->recvbuf) && (block > 0)) {
        vcoll_copy(d->recvbuf, buf, block);
    }
    if (status != GS_OK) {
        gs__algo_release_all(ctx, reqs, nreq);
        return status;
    }
    return vcoll_wait(ctx, reqs, expect, ids, nreq);
}

gs_status_t gs__direct_scatter(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d)
{
    const int n = ctx->size;
    const int r = ctx->rank;
    const size_t block = d->count * gs__dtype_size(d->dtype);
    gs_algo_req_t *reqs;
    size_t *expect;
    int *ids;
    void *scratch = NULL;
    size_t nreq = 0;
    gs_status_t status;

    if (r != d->root) {
        return vcoll_sendrecv(ctx, d, 0, -1, NULL, 0, d->root, d->recvbuf, block, r);
    }
    status = gs__algo_scratch(ctx, (size_t)n * (sizeof(*reqs) + sizeof(*expect) + sizeof(*ids)),
                              &scratch);
    if (status != GS_OK) {
        return status;
    }
    reqs = (gs_algo_req_t *)scratch;
    expect = (size_t *)(reqs + n);
    ids = (int *)(expect + n);
    memset(reqs, 0, sizeof(*reqs) * (size_t)n);
    for (int i = 1; (i < n) && (status == GS_OK); i++) {
        const int to = (r + i) % n;

        expect[nreq] = 0;
        ids[nreq] = -1;
        status =
            gs__algo_isend(ctx, to, gs__algo_tag(ctx, d, 0),
                           (const uint8_t *)d->sendbuf + (size_t)to * block, block, &reqs[nreq]);
        nreq++;
    }
    if ((status == GS_OK) && (d->recvbuf != d->sendbuf) && (block > 0)) {
        const uint8_t *own = (const uint8_t *)d->sendbuf + (size_t)r * block;
        if (own != (const uint8_t *)d->recvbuf) {
            vcoll_copy(d->recvbuf, own, block);
        }
    }
    if (status != GS_OK) {
        gs__algo_release_all(ctx, reqs, nreq);
        return status;
    }
    return vcoll_wait(ctx, reqs, expect, ids, nreq);
}

/* ------------------------------------------------------------------ */
/* All-gather-v and reduce-scatter-v (ring)                            */
/* ------------------------------------------------------------------ */

gs_status_t gs__ring_allgatherv(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d)
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

gs_status_t gs__ring_reduce_scatterv(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d)
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

gs_status_t gs__direct_alltoallv(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d)
{
    const int n = ctx->size;
    const int r = ctx->rank;
    const size_t esize = gs__dtype_size(d->dtype);
    const uint8_t *src = (const uint8_t *)d->sendbuf;
    uint8_t *dst = (uint8_t *)d->recvbuf;
    gs_algo_req_t *reqs;
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
    reqs = (gs_algo_req_t *)scratch;
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
    if (status != GS_OK) {
        gs__algo_release_all(ctx, reqs, 2 * (size_t)n);
        return status;
    }
    return vcoll_wait(ctx, reqs, expect, ids, 2 * (size_t)n);
}
