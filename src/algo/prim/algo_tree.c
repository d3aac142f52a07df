/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pipelined double binary tree all-reduce, the way NCCL does it.
 *
 * What: two binary trees over the same ranks (pattern_tree.h) in which
 * every rank is an interior node of at most one: tree 0 takes the first
 * half of the vector, tree 1 the second. Each half is cut into chunks
 * (GS_SLICE_BYTES). Up (reduce): a rank receives chunk j from each child,
 * adds its own contribution and sends the partial sum to its parent; the
 * root's sum is the result (divided by n once for AVG). Down (broadcast):
 * the root sends chunk j to its children, every rank receives it from its
 * parent straight into recvbuf and forwards it. Chunks are independent,
 * so chunk j+1 goes up while chunk j comes down, and both trees run at
 * once: the links a rank uses as a leaf of one tree are idle in the other.
 * Every rank receives the root's bytes, so all ranks end bit-identical.
 *
 * Cost, B bytes, depth D = floor(log2 n), s chunks of c = B/(2s) bytes
 * per tree. The busiest rank (interior in one tree, a leaf in the other)
 * sends c to its parent and 2c to its children per chunk of its interior
 * tree, plus c per chunk of the other tree: 2B in all, and reduces B.
 *   T = 2 D (alpha + c beta) + 2 B beta + B gamma      (n >= 4; n = 2: B beta)
 * against the ring's 2(n-1) alpha + 2(n-1)/n B beta: the same bandwidth
 * for large n with log n latency; for small n the ring moves less.
 *
 * Ranks: the trees are built over positions of ctx->route (the
 * host-grouped order of algo_hosts.c; the identity when ranks are launched
 * host by host), and the step tables below use positions.
 * Odd n: nothing special (the in-order trees exist for every n and rank 0
 * is a leaf of both when n is odd). count < 2: a tree whose half is empty
 * sends nothing. In place: a leaf sends sendbuf and then receives the
 * result into the same bytes, so a down receive of chunk j is posted only
 * after the up send of chunk j completed; interior ranks sum into recvbuf
 * (gs__reduce may alias sendbuf exactly).
 *
 * Step table, n = 4 (tree 0: 3 root, 1 under it, 0 2 under 1; tree 1: 0
 * root, 2 under it, 1 3 under 2), one chunk per half, "x>y" = send:
 *   t=0:  tree 0 up:   0>1  2>1          tree 1 up:   1>2  3>2
 *   t=1:  tree 0 up:   1>3               tree 1 up:   2>0
 *   t=2:  tree 0 down: 3>1               tree 1 down: 0>2
 *   t=3:  tree 0 down: 1>0  1>2          tree 1 down: 2>1  2>3
 * n = 3 (tree 0: 1 root over 0 2; tree 1: 2 root over 1 0):
 *   t=0: 0>1 2>1 | 1>2 0>2;  t=1: 1>0 1>2 | 2>1 2>0
 * n = 5 (tree 0: 3 root over 1 4, 1 over 0 2; tree 1: 4 root over 2 0,
 * 2 over 1 3): up in 2 rounds, down in 2 rounds, trees side by side.
 * Message index: (tree * 2 + phase) * 65536 + chunk, phase 0 up, 1 down.
 */
#include <stdlib.h>
#include <string.h>

#include "algo/prim/prim.h"
#include "algo/prim/pattern_tree.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/reduce_cpu.h"

#define TREE_MAX_CHUNKS 65536
#define TREE_WINDOW 8

typedef struct tree_half {
    int t;
    int is_root;
    int parent;   /* rank, -1 at the root */
    int child[2]; /* ranks; nchild of them are valid */
    int nchild;
    size_t off;        /* first element of this half */
    size_t count;      /* elements in this half */
    size_t nchunks;    /* 0 when the half is empty */
    size_t chunk_max;  /* elements in the longest chunk */
    uint8_t *stage[2]; /* TREE_WINDOW chunk slots per child */
    gs__algo_req_t *up_recv[2];
    gs__algo_req_t *up_send;
    gs__algo_req_t *down_recv;
    gs__algo_req_t *down_send[2];
    size_t up_recv_posted[2], up_recv_done[2];
    size_t reduced; /* chunks whose partial sum (or result, at the root) is ready */
    size_t up_send_posted, up_send_done;
    size_t down_recv_posted, down_recv_done;
    size_t down_send_posted[2], down_send_done[2];
} tree_half_t;

typedef struct tree {
    gs__algo_ctx_t *ctx;
    const gs__coll_desc_t *d;
    size_t esize;
    tree_half_t half[2];
    gs__algo_req_t *reqs; /* every request array, for release on error */
    size_t nreqs;
} tree_t;

static void tree_chunk(const tree_half_t *h, size_t j, size_t *off, size_t *len)
{
    const size_t lo = (size_t)(((unsigned __int128)h->count * j) / h->nchunks);
    const size_t hi = (size_t)(((unsigned __int128)h->count * (j + 1)) / h->nchunks);

    *off = h->off + lo;
    *len = hi - lo;
}

static uint64_t tree_tag(const tree_t *g, const tree_half_t *h, int phase, size_t j)
{
    /* The halves may have different chunk counts: a fixed stride keeps the
     * four ranges apart (4 * TREE_MAX_CHUNKS < 2^24). */
    return gs__algo_tag(g->ctx, g->d, (uint32_t)((size_t)(h->t * 2 + phase) * TREE_MAX_CHUNKS + j));
}

static uint8_t *tree_stage(const tree_t *g, const tree_half_t *h, int c, size_t j)
{
    return h->stage[c] + (j % TREE_WINDOW) * h->chunk_max * g->esize;
}

static uint8_t *tree_user(const tree_t *g, void *buf, size_t off)
{
    return (uint8_t *)buf + off * g->esize;
}

static const uint8_t *tree_user_c(const tree_t *g, const void *buf, size_t off)
{
    return (const uint8_t *)buf + off * g->esize;
}

/* Reduce chunk j: own contribution plus every child's, into recvbuf. */
static void tree_reduce_chunk(tree_t *g, tree_half_t *h, size_t j)
{
    const gs__coll_desc_t *d = g->d;
    size_t off, len;
    uint8_t *dst;

    tree_chunk(h, j, &off, &len);
    dst = tree_user(g, d->recvbuf, off);
    if (h->nchild > 0) {
        gs__reduce(dst, tree_user_c(g, d->sendbuf, off), tree_stage(g, h, 0, j), len, d->dtype,
                   d->op);
    }
    if (h->nchild > 1) {
        gs__reduce(dst, dst, tree_stage(g, h, 1, j), len, d->dtype, d->op);
    }
    if (h->is_root && (d->op == GS_OP_AVG)) {
        gs__reduce_scale(dst, len, d->dtype, g->ctx->size);
    }
}

static int tree_half_done(const tree_half_t *h)
{
    if (h->reduced < h->nchunks) {
        return 0;
    }
    if (!h->is_root && ((h->up_send_done < h->nchunks) || (h->down_recv_done < h->nchunks))) {
        return 0;
    }
    for (int c = 0; c < h->nchild; c++) {
        if (h->down_send_done[c] < h->nchunks) {
            return 0;
        }
    }
    return 1;
}

/* One pass over a half: complete what finished, post what became possible.
 * Sets *progressed when anything changed and *blame to a pending request. */
static gs_status_t tree_step(tree_t *g, tree_half_t *h, int *progressed,
                             const gs__algo_req_t **blame)
{
    gs__algo_ctx_t *ctx = g->ctx;
    const gs__coll_desc_t *d = g->d;
    const size_t ns = h->nchunks;
    gs_status_t status = GS_OK;
    size_t off, len;
    int done;

    /* Up: receives from the children into the staging slots. */
    for (int c = 0; (c < h->nchild) && (status == GS_OK); c++) {
        while ((status == GS_OK) && (h->up_recv_done[c] < h->up_recv_posted[c])) {
            const size_t j = h->up_recv_done[c];
            tree_chunk(h, j, &off, &len);
            status = gs__algo_check(ctx, &h->up_recv[c][j], len * g->esize, &done);
            if (!done) {
                *blame = (*blame == NULL) ? &h->up_recv[c][j] : *blame;
                break;
            }
            h->up_recv_done[c]++;
            *progressed = 1;
        }
        /* A staging slot is free once the chunk that used it is reduced. */
        while ((status == GS_OK) && (h->up_recv_posted[c] < ns) &&
               (h->up_recv_posted[c] < h->reduced + TREE_WINDOW)) {
            const size_t j = h->up_recv_posted[c];
            tree_chunk(h, j, &off, &len);
            status = gs__algo_irecv(ctx, h->child[c], tree_tag(g, h, 0, j), tree_stage(g, h, c, j),
                                    len * g->esize, &h->up_recv[c][j]);
            h->up_recv_posted[c]++;
            *progressed = 1;
        }
    }
    /* Reduce every chunk whose children's parts are all in. */
    while ((status == GS_OK) && (h->reduced < ns) &&
           ((h->nchild < 1) || (h->up_recv_done[0] > h->reduced)) &&
           ((h->nchild < 2) || (h->up_recv_done[1] > h->reduced))) {
        tree_reduce_chunk(g, h, h->reduced);
        h->reduced++;
        *progressed = 1;
    }
    if (!h->is_root) {
        /* Up: partial sums to the parent (a leaf sends its own data). */
        while ((status == GS_OK) && (h->up_send_done < h->up_send_posted)) {
            status = gs__algo_check(ctx, &h->up_send[h->up_send_done], 0, &done);
            if (!done) {
                *blame = (*blame == NULL) ? &h->up_send[h->up_send_done] : *blame;
                break;
            }
            h->up_send_done++;
            *progressed = 1;
        }
        while ((status == GS_OK) && (h->up_send_posted < h->reduced) &&
               (h->up_send_posted < h->up_send_done + TREE_WINDOW)) {
            const size_t j = h->up_send_posted;
            const void *base = (h->nchild == 0) ? d->sendbuf : (const void *)d->recvbuf;
            tree_chunk(h, j, &off, &len);
            status = gs__algo_isend(ctx, h->parent, tree_tag(g, h, 0, j), tree_user_c(g, base, off),
                                    len * g->esize, &h->up_send[j]);
            h->up_send_posted++;
            *progressed = 1;
        }
        /* Down: the result from the parent, into recvbuf once the partial
         * sum that lived there has left. */
        while ((status == GS_OK) && (h->down_recv_done < h->down_recv_posted)) {
            const size_t j = h->down_recv_done;
            tree_chunk(h, j, &off, &len);
            status = gs__algo_check(ctx, &h->down_recv[j], len * g->esize, &done);
            if (!done) {
                *blame = (*blame == NULL) ? &h->down_recv[j] : *blame;
                break;
            }
            h->down_recv_done++;
            *progressed = 1;
        }
        while ((status == GS_OK) && (h->down_recv_posted < h->up_send_done) &&
               (h->down_recv_posted < h->down_recv_done + TREE_WINDOW)) {
            const size_t j = h->down_recv_posted;
            tree_chunk(h, j, &off, &len);
            status =
                gs__algo_irecv(ctx, h->parent, tree_tag(g, h, 1, j), tree_user(g, d->recvbuf, off),
                               len * g->esize, &h->down_recv[j]);
            h->down_recv_posted++;
            *progressed = 1;
        }
    }
    /* Down: forward the result to the children. */
    for (int c = 0; (c < h->nchild) && (status == GS_OK); c++) {
        const size_t ready = h->is_root ? h->reduced : h->down_recv_done;
        while ((status == GS_OK) && (h->down_send_done[c] < h->down_send_posted[c])) {
            status = gs__algo_check(ctx, &h->down_send[c][h->down_send_done[c]], 0, &done);
            if (!done) {
                *blame = (*blame == NULL) ? &h->down_send[c][h->down_send_done[c]] : *blame;
                break;
            }
            h->down_send_done[c]++;
            *progressed = 1;
        }
        while ((status == GS_OK) && (h->down_send_posted[c] < ready) &&
               (h->down_send_posted[c] < h->down_send_done[c] + TREE_WINDOW)) {
            const size_t j = h->down_send_posted[c];
            tree_chunk(h, j, &off, &len);
            status =
                gs__algo_isend(ctx, h->child[c], tree_tag(g, h, 1, j),
                               tree_user(g, d->recvbuf, off), len * g->esize, &h->down_send[c][j]);
            h->down_send_posted[c]++;
            *progressed = 1;
        }
    }
    return status;
}

static gs_status_t tree_run(tree_t *g)
{
    gs__algo_ctx_t *ctx = g->ctx;
    gs_status_t status = GS_OK;
    uint64_t deadline;

    gs__algo_renew(ctx, &deadline);
    for (;;) {
        const gs__algo_req_t *blame = NULL;
        int progressed = 0;
        int finished = 0;

        for (int t = 0; (t < 2) && (status == GS_OK); t++) {
            status = tree_step(g, &g->half[t], &progressed, &blame);
            finished += tree_half_done(&g->half[t]);
        }
        if ((status != GS_OK) || (finished == 2)) {
            break;
        }
        /* A posted request may already be complete and a completion can
         * enable a post, but the transport only wakes for completions still
         * to come: re-scan after any change before blocking. */
        if (progressed) {
            gs__algo_renew(ctx, &deadline);
            continue;
        }
        status = gs__algo_progress(ctx, &deadline, blame);
        if (status != GS_OK) {
            break;
        }
    }
    if (status != GS_OK) {
        gs__algo_release_all(ctx, g->reqs, g->nreqs);
    }
    return status;
}

/* Shape, chunking and request arrays of half t; returns the request slots it needs. */
static size_t tree_half_setup(tree_t *g, int t, size_t slice_elems)
{
    const gs__algo_ctx_t *ctx = g->ctx;
    tree_half_t *h = &g->half[t];
    int c0, c1;

    memset(h, 0, sizeof(*h));
    h->t = t;
    /* The trees are built over positions of the host-grouped order, so
     * that subtrees stay on one host where they can. */
    gs__dtree_node(gs__route_n(ctx), t, gs__route_pos(ctx), &h->parent, &c0, &c1);
    h->parent = (h->parent >= 0) ? gs__route_rank(ctx, h->parent) : -1;
    c0 = (c0 >= 0) ? gs__route_rank(ctx, c0) : -1;
    c1 = (c1 >= 0) ? gs__route_rank(ctx, c1) : -1;
    h->is_root = (h->parent < 0);
    h->child[0] = (c0 >= 0) ? c0 : c1;
    h->child[1] = (c0 >= 0) ? c1 : -1;
    h->nchild = (c0 >= 0) + (c1 >= 0);
    h->off = (t == 0) ? 0 : g->d->count / 2;
    h->count = (t == 0) ? g->d->count / 2 : g->d->count - g->d->count / 2;
    h->nchunks = (h->count + slice_elems - 1) / slice_elems;
    if (h->nchunks > TREE_MAX_CHUNKS) {
        h->nchunks = TREE_MAX_CHUNKS;
    }
    h->chunk_max = (h->nchunks > 0) ? (h->count + h->nchunks - 1) / h->nchunks : 0;
    if (h->nchunks == 0) {
        h->nchild = 0; /* nothing to do in this tree */
        h->is_root = 1;
        return 0;
    }
    return h->nchunks * (size_t)(2 * h->nchild + 2);
}

gs_status_t gs__tree_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const size_t esize = gs__dtype_size(d->dtype);
    const size_t bytes = d->count * esize;
    size_t slice_elems = ctx->slice_bytes / esize;
    size_t nreqs = 0;
    size_t stage_bytes = 0;
    void *scratch = NULL;
    tree_t g;
    gs_status_t status;

    if ((ctx->size == 1) || (d->count == 0)) {
        if ((d->sendbuf != d->recvbuf) && (bytes > 0)) {
            memcpy(d->recvbuf, d->sendbuf, bytes);
        }
        return GS_OK;
    }
    memset(&g, 0, sizeof(g));
    g.ctx = ctx;
    g.d = d;
    g.esize = esize;
    if (slice_elems == 0) {
        slice_elems = 1;
    }
    for (int t = 0; t < 2; t++) {
        nreqs += tree_half_setup(&g, t, slice_elems);
        stage_bytes += (size_t)g.half[t].nchild * TREE_WINDOW * g.half[t].chunk_max * esize;
    }
    status = gs__algo_scratch(ctx, stage_bytes, &scratch);
    if (status != GS_OK) {
        return status;
    }
    g.reqs = calloc(nreqs, sizeof(gs__algo_req_t));
    if ((g.reqs == NULL) && (nreqs > 0)) {
        return gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory for %zu tree requests",
                             ctx->opname, nreqs);
    }
    g.nreqs = nreqs;
    {
        gs__algo_req_t *next = g.reqs;
        uint8_t *stage = (uint8_t *)scratch;

        for (int t = 0; t < 2; t++) {
            tree_half_t *h = &g.half[t];
            if (h->nchunks == 0) {
                continue;
            }
            for (int c = 0; c < h->nchild; c++) {
                h->stage[c] = stage;
                stage += TREE_WINDOW * h->chunk_max * esize;
                h->up_recv[c] = next;
                next += h->nchunks;
                h->down_send[c] = next;
                next += h->nchunks;
            }
            h->up_send = next;
            next += h->nchunks;
            h->down_recv = next;
            next += h->nchunks;
        }
    }
    status = tree_run(&g);
    free(g.reqs);
    return status;
}
