/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ring all-reduce, reduce-scatter and all-gather, sliced and pipelined.
 *
 * All-reduce is a reduce-scatter followed by an all-gather (Patarasuk and
 * Yuan). The buffer is split into n chunks (balanced: the first count % n
 * chunks hold one element more). Rank r sends to r+1 and receives from r-1.
 *   reduce-scatter, step s = 0..n-2: send chunk (r-s), receive chunk (r-s-1)
 *     and reduce it into the local copy; after n-1 steps rank r holds the
 *     full result of chunk (r+1).
 *   all-gather, step t = 0..n-2: send chunk (r+1-t), receive chunk (r-t)
 *     straight into the user's buffer (no copy).
 * Cost: 2(n-1) steps, 2(n-1)/n * bytes sent per rank:
 *   T = 2(n-1) alpha + 2(n-1)/n * bytes * beta + (n-1)/n * bytes * gamma.
 * Each chunk is cut into slices (GS_SLICE_BYTES); every slice runs through
 * the 2(n-1) steps on its own, so the send of slice j at step k starts as
 * soon as slice j of step k-1 is reduced: receive, reduce and send overlap.
 * AVG is a sum whose owned chunk is divided by n once, before the
 * all-gather. Any n >= 1 and any count (chunks may be empty) work.
 *
 * Step table, n = 3, chunks A B C (rank: send/recv per step):
 *        RS s=0      RS s=1      AG t=0      AG t=1
 *   r0:  A / C+      C / B+      B / A       A / C        (ends owning B)
 *   r1:  B / A+      A / C+      C / B       B / A        (ends owning C)
 *   r2:  C / B+      B / A+      A / C       C / B        (ends owning A)
 * ("+" = reduce into the local chunk; chunk ids mod n.)
 *
 * Reduce-scatter runs the same reduce-scatter phase shifted by one so that
 * rank r ends owning chunk r, which lands directly in the user's recvbuf;
 * the other partial sums live in scratch. All-gather is the all-gather
 * phase with rank r owning chunk r.
 *
 * Order: "r" above is a position on ctx->route, not a rank. The ring runs
 * over the host-grouped order (algo_hosts.c), so that it crosses between
 * hosts once per host; position p is rank order[p], sends go to the rank
 * at p+1 and receives come from the rank at p-1. All-reduce chunks are
 * numbered by position (any numbering every rank agrees on works). The
 * blocks of reduce-scatter and all-gather belong to ranks, so position p
 * carries the block of rank order[p] and each rank still ends with its own
 * block. With ranks launched host by host the order is the identity.
 * gs__ring_rs_chunks/ag_chunks run the two all-reduce phases alone over a
 * sub-group route with caller-given chunk bounds (algo_hier.c).
 */
#include <stdlib.h>
#include <string.h>

#include "algo/prim/prim.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/reduce_cpu.h"

#define RING_MAX_SLICES 4096
#define RING_RECV_AHEAD 2

/* RS_CHUNKS and AG_CHUNKS are the two halves of RING_ALLREDUCE on their own
 * (the hierarchical all-reduce runs them inside each host). */
typedef enum ring_mode {
    RING_ALLREDUCE,
    RING_REDUCE_SCATTER,
    RING_ALLGATHER,
    RING_RS_CHUNKS,
    RING_AG_CHUNKS
} ring_mode_t;

typedef struct ring_slot {
    gs__algo_req_t send;
    gs__algo_req_t recv;
} ring_slot_t;

typedef struct ring_slice {
    int next_send;  /* next step whose send is not posted */
    int sends_done; /* steps whose sends completed (in order) */
    int next_recv;  /* next step whose receive is not posted */
    int recvs_done; /* steps whose receives completed and were processed */
} ring_slice_t;

typedef struct ring {
    gs__algo_ctx_t *ctx;
    const gs__coll_desc_t *d;
    ring_mode_t mode;
    int n;    /* positions on the route */
    int q;    /* this rank's position; chunk ids below are positions */
    int next; /* rank at position q+1 */
    int prev; /* rank at position q-1 */
    size_t esize;
    int rs_steps;
    int steps;
    int rs_base;          /* RS step s sends chunk (rs_base - s) */
    int ag_base;          /* AG step t sends chunk (ag_base - t) */
    size_t total;         /* elements in the full buffer */
    size_t block;         /* RS/AG modes: elements per chunk (0 for balanced split) */
    const size_t *bounds; /* chunk modes: chunk c is [bounds[c], bounds[c+1]), or NULL */
    size_t nslices;
    size_t max_chunk;   /* elements */
    size_t slot_elems;  /* staging slot size: ceil(max_chunk / nslices) */
    const uint8_t *src; /* local contribution (RS modes) */
    uint8_t *work;      /* full-size buffer holding the chunks */
    uint8_t *tmp;       /* 2 * nslices staging slots for RS receives */
    ring_slot_t *slots; /* steps * nslices */
    ring_slice_t *slice;
} ring_t;

static inline int ring_mod(int a, int n)
{
    int m = a % n;
    return (m < 0) ? m + n : m;
}

static void ring_chunk(const ring_t *g, int c, size_t *off, size_t *len)
{
    if ((g->mode == RING_REDUCE_SCATTER) || (g->mode == RING_ALLGATHER)) {
        /* Blocks belong to ranks: position c carries the block of its rank. */
        *off = (size_t)gs__route_rank(g->ctx, c) * g->block;
        *len = g->block;
    } else if (g->bounds != NULL) {
        *off = g->bounds[c];
        *len = g->bounds[c + 1] - g->bounds[c];
    } else {
        gs__algo_split(g->total, g->n, c, off, len);
    }
}

/* Element range of slice j within a chunk of len elements. */
static void ring_slice_range(const ring_t *g, size_t len, size_t j, size_t *soff, size_t *slen)
{
    const size_t lo = (size_t)(((unsigned __int128)len * j) / g->nslices);
    const size_t hi = (size_t)(((unsigned __int128)len * (j + 1)) / g->nslices);
    *soff = lo;
    *slen = hi - lo;
}

/* Address of chunk c in the working buffer. */
static uint8_t *ring_chunk_ptr(const ring_t *g, int c)
{
    size_t off;
    size_t len;

    if ((g->mode == RING_REDUCE_SCATTER) && (c == g->q)) {
        return (uint8_t *)g->d->recvbuf;
    }
    ring_chunk(g, c, &off, &len);
    return g->work + off * g->esize;
}

static int ring_send_chunk(const ring_t *g, int k)
{
    return (k < g->rs_steps) ? ring_mod(g->rs_base - k, g->n)
                             : ring_mod(g->ag_base - (k - g->rs_steps), g->n);
}

static int ring_recv_chunk(const ring_t *g, int k)
{
    return ring_send_chunk(g, k) == 0 ? g->n - 1 : ring_send_chunk(g, k) - 1;
}

static ring_slot_t *ring_slot(const ring_t *g, int k, size_t j)
{
    return &g->slots[(size_t)k * g->nslices + j];
}

static uint32_t ring_tag_idx(const ring_t *g, int k, size_t j)
{
    return (uint32_t)((size_t)k * g->nslices + j);
}

static gs_status_t ring_post_send(ring_t *g, int k, size_t j)
{
    const int c = ring_send_chunk(g, k);
    size_t off, len, soff, slen;
    const uint8_t *base;

    ring_chunk(g, c, &off, &len);
    ring_slice_range(g, len, j, &soff, &slen);
    /* Step 0 of a reduce-scatter phase sends the caller's own data. */
    if ((k == 0) && (g->rs_steps > 0)) {
        base = g->src + off * g->esize;
    } else {
        base = ring_chunk_ptr(g, c);
    }
    return gs__algo_isend(g->ctx, g->next, gs__algo_tag(g->ctx, g->d, ring_tag_idx(g, k, j)),
                          base + soff * g->esize, slen * g->esize, &ring_slot(g, k, j)->send);
}

static uint8_t *ring_recv_dst(const ring_t *g, int k, size_t j, size_t *bytes)
{
    const int c = ring_recv_chunk(g, k);
    size_t off, len, soff, slen;

    ring_chunk(g, c, &off, &len);
    ring_slice_range(g, len, j, &soff, &slen);
    *bytes = slen * g->esize;
    if (k < g->rs_steps) {
        /* Staging slot (k % 2, j). Chunks differ in length by one element,
         * so slice j of one chunk may be one element longer than slice j of
         * another: slots are slot_elems apart, the longest any slice can be. */
        return g->tmp + (((size_t)(k % 2) * g->nslices + j) * g->slot_elems) * g->esize;
    }
    return ring_chunk_ptr(g, c) + soff * g->esize;
}

static int ring_can_post_recv(const ring_t *g, int k, size_t j)
{
    const ring_slice_t *s = &g->slice[j];

    if (k - s->recvs_done >= RING_RECV_AHEAD) {
        return 0;
    }
    if (k < g->rs_steps) {
        return 1; /* staging slot k%2 is free once step k-2 is processed, implied above */
    }
    if (g->mode == RING_ALLREDUCE) {
        /* All-gather receives into chunk (r - t), last sent at RS step t. */
        return s->sends_done > k - g->rs_steps;
    }
    return 1;
}

static gs_status_t ring_post_recv(ring_t *g, int k, size_t j)
{
    size_t bytes;
    uint8_t *dst = ring_recv_dst(g, k, j, &bytes);

    return gs__algo_irecv(g->ctx, g->prev, gs__algo_tag(g->ctx, g->d, ring_tag_idx(g, k, j)), dst,
                          bytes, &ring_slot(g, k, j)->recv);
}

/* A receive of step k, slice j completed: reduce it (RS) or nothing (AG). */
static void ring_process(ring_t *g, int k, size_t j)
{
    const gs__coll_desc_t *d = g->d;
    int c;
    size_t off, len, soff, slen, bytes;
    uint8_t *staged;
    uint8_t *dst;

    if (k >= g->rs_steps) {
        return;
    }
    c = ring_recv_chunk(g, k);
    ring_chunk(g, c, &off, &len);
    ring_slice_range(g, len, j, &soff, &slen);
    staged = ring_recv_dst(g, k, j, &bytes);
    dst = ring_chunk_ptr(g, c) + soff * g->esize;
    gs__reduce(dst, staged, g->src + (off + soff) * g->esize, slen, d->dtype, d->op);
    if ((k == g->rs_steps - 1) && (d->op == GS_OP_AVG) && (g->mode != RING_RS_CHUNKS)) {
        gs__reduce_scale(dst, slen, d->dtype, g->n);
    }
}

static gs_status_t ring_run(ring_t *g)
{
    gs__algo_ctx_t *ctx = g->ctx;
    gs_status_t status = GS_OK;
    uint64_t deadline;
    size_t finished = 0;

    gs__algo_renew(ctx, &deadline);
    while (finished < g->nslices) {
        const gs__algo_req_t *blame = NULL;
        int progressed = 0;

        for (size_t j = 0; (j < g->nslices) && (status == GS_OK); j++) {
            ring_slice_t *s = &g->slice[j];
            int done;

            if ((s->sends_done == g->steps) && (s->recvs_done == g->steps)) {
                continue;
            }
            /* Complete in order: the frontier receive, then the frontier sends. */
            while ((s->recvs_done < s->next_recv) && (status == GS_OK)) {
                size_t bytes;
                (void)ring_recv_dst(g, s->recvs_done, j, &bytes);
                status = gs__algo_check(ctx, &ring_slot(g, s->recvs_done, j)->recv, bytes, &done);
                if (!done) {
                    if (blame == NULL) {
                        blame = &ring_slot(g, s->recvs_done, j)->recv;
                    }
                    break;
                }
                if (status == GS_OK) {
                    ring_process(g, s->recvs_done, j);
                    s->recvs_done++;
                    progressed = 1;
                }
            }
            while ((s->sends_done < s->next_send) && (status == GS_OK)) {
                status = gs__algo_check(ctx, &ring_slot(g, s->sends_done, j)->send, 0, &done);
                if (!done) {
                    break;
                }
                s->sends_done++;
                progressed = 1;
            }
            /* Post what became possible. A posted request may already be
             * complete (an immediate write, a message that arrived early),
             * and a completed send can unblock a receive, so any posting
             * counts as progress: re-scan before blocking in the transport,
             * which only wakes for completions still to come. */
            while ((status == GS_OK) && (s->next_send < g->steps) &&
                   ((s->next_send == 0) || (s->recvs_done >= s->next_send))) {
                status = ring_post_send(g, s->next_send, j);
                s->next_send++;
                progressed = 1;
            }
            while ((status == GS_OK) && (s->next_recv < g->steps) &&
                   ring_can_post_recv(g, s->next_recv, j)) {
                status = ring_post_recv(g, s->next_recv, j);
                s->next_recv++;
                progressed = 1;
            }
            if ((s->sends_done == g->steps) && (s->recvs_done == g->steps)) {
                finished++;
            }
        }
        if (status != GS_OK) {
            break;
        }
        if (progressed) {
            gs__algo_renew(ctx, &deadline);
            continue; /* re-scan before blocking: posting may have completed more */
        }
        if (finished < g->nslices) {
            status = gs__algo_progress(ctx, &deadline, blame);
            if (status != GS_OK) {
                break;
            }
        }
    }
    if (status != GS_OK) {
        for (size_t i = 0; i < (size_t)g->steps * g->nslices; i++) {
            gs__algo_release_all(ctx, &g->slots[i].send, 1);
            gs__algo_release_all(ctx, &g->slots[i].recv, 1);
        }
    }
    return status;
}

static gs_status_t ring_setup_and_run(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                                      ring_mode_t mode, const size_t *bounds)
{
    ring_t g;
    gs_status_t status;
    size_t slice_elems;
    size_t tmp_bytes;
    size_t work_bytes = 0;
    void *scratch = NULL;

    memset(&g, 0, sizeof(g));
    g.ctx = ctx;
    g.d = d;
    g.mode = mode;
    g.n = gs__route_n(ctx);
    g.q = gs__route_pos(ctx);
    g.next = gs__route_rank(ctx, ring_mod(g.q + 1, g.n));
    g.prev = gs__route_rank(ctx, ring_mod(g.q - 1, g.n));
    g.esize = gs__dtype_size(d->dtype);
    g.src = (const uint8_t *)d->sendbuf;

    switch (mode) {
    case RING_ALLREDUCE:
        g.total = d->count;
        g.rs_steps = g.n - 1;
        g.steps = 2 * (g.n - 1);
        g.rs_base = g.q;
        g.ag_base = g.q + 1;
        g.work = (uint8_t *)d->recvbuf;
        g.max_chunk = (d->count + (size_t)g.n - 1) / (size_t)g.n;
        break;
    case RING_REDUCE_SCATTER:
        g.total = d->count * (size_t)g.n;
        g.block = d->count;
        g.rs_steps = g.n - 1;
        g.steps = g.n - 1;
        g.rs_base = g.q - 1;
        g.max_chunk = d->count;
        work_bytes = g.total * g.esize;
        break;
    case RING_ALLGATHER:
        g.total = d->count * (size_t)g.n;
        g.block = d->count;
        g.rs_steps = 0;
        g.steps = g.n - 1;
        g.ag_base = g.q;
        g.work = (uint8_t *)d->recvbuf;
        g.max_chunk = d->count;
        break;
    case RING_RS_CHUNKS:
    case RING_AG_CHUNKS:
        g.total = d->count;
        g.bounds = bounds;
        g.rs_steps = (mode == RING_RS_CHUNKS) ? g.n - 1 : 0;
        g.steps = g.n - 1;
        g.rs_base = g.q;
        g.ag_base = g.q + 1;
        g.work = (uint8_t *)d->recvbuf;
        g.max_chunk = (bounds != NULL) ? 0 : (d->count + (size_t)g.n - 1) / (size_t)g.n;
        for (int c = 0; (bounds != NULL) && (c < g.n); c++) {
            if (bounds[c + 1] - bounds[c] > g.max_chunk) {
                g.max_chunk = bounds[c + 1] - bounds[c];
            }
        }
        break;
    }

    slice_elems = ctx->slice_bytes / g.esize;
    if (slice_elems == 0) {
        slice_elems = 1;
    }
    g.nslices = (g.max_chunk + slice_elems - 1) / slice_elems;
    if (g.nslices == 0) {
        g.nslices = 1;
    }
    if (g.nslices > RING_MAX_SLICES) {
        g.nslices = RING_MAX_SLICES;
    }
    if ((size_t)g.steps * g.nslices >= (1u << 24)) {
        g.nslices = ((1u << 24) - 1) / (size_t)g.steps;
        if (g.nslices == 0) {
            return gs__error_set(GS_ERR_UNSUPPORTED, "%s: %d ranks are too many for the ring",
                                 ctx->opname, g.n);
        }
    }

    g.slot_elems = (g.max_chunk + g.nslices - 1) / g.nslices;
    tmp_bytes = (g.rs_steps > 0) ? 2 * g.nslices * g.slot_elems * g.esize : 0;
    status = gs__algo_scratch(ctx, work_bytes + tmp_bytes, &scratch);
    if (status != GS_OK) {
        return status;
    }
    if (mode == RING_REDUCE_SCATTER) {
        g.work = (uint8_t *)scratch;
    }
    g.tmp = (uint8_t *)scratch + work_bytes;

    g.slots = calloc((size_t)g.steps * g.nslices, sizeof(ring_slot_t));
    g.slice = calloc(g.nslices, sizeof(ring_slice_t));
    if ((g.slots == NULL) || (g.slice == NULL)) {
        free(g.slots);
        free(g.slice);
        return gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory for %zu ring slices", ctx->opname,
                             g.nslices);
    }
    status = ring_run(&g);
    free(g.slots);
    free(g.slice);
    return status;
}

/* All-reduce and its reduce-scatter half: one rank (or nothing to move) is a copy. */
static gs_status_t ring_reduce_or_copy(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                                       ring_mode_t mode, const size_t *bounds)
{
    const size_t bytes = d->count * gs__dtype_size(d->dtype);

    if ((gs__route_n(ctx) == 1) || (d->count == 0)) {
        if ((d->sendbuf != d->recvbuf) && (bytes > 0)) {
            memcpy(d->recvbuf, d->sendbuf, bytes);
        }
        return GS_OK;
    }
    return ring_setup_and_run(ctx, d, mode, bounds);
}

gs_status_t gs__ring_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    return ring_reduce_or_copy(ctx, d, RING_ALLREDUCE, NULL);
}

gs_status_t gs__ring_reduce_scatter(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const size_t esize = gs__dtype_size(d->dtype);
    const uint8_t *own = (const uint8_t *)d->sendbuf + (size_t)ctx->rank * d->count * esize;

    if (ctx->size == 1 || d->count == 0) {
        if (((const void *)own != d->recvbuf) && (d->count > 0)) {
            memmove(d->recvbuf, own, d->count * esize);
        }
        return GS_OK;
    }
    return ring_setup_and_run(ctx, d, RING_REDUCE_SCATTER, NULL);
}

gs_status_t gs__ring_allgather(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const size_t esize = gs__dtype_size(d->dtype);
    uint8_t *own = (uint8_t *)d->recvbuf + (size_t)ctx->rank * d->count * esize;

    if ((own != (const uint8_t *)d->sendbuf) && (d->count > 0)) {
        memmove(own, d->sendbuf, d->count * esize);
    }
    if (ctx->size == 1 || d->count == 0) {
        return GS_OK;
    }
    return ring_setup_and_run(ctx, d, RING_ALLGATHER, NULL);
}

gs_status_t gs__ring_rs_chunks(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, const size_t *bounds)
{
    return ring_reduce_or_copy(ctx, d, RING_RS_CHUNKS, bounds);
}

gs_status_t gs__ring_ag_chunks(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, const size_t *bounds)
{
    if ((gs__route_n(ctx) == 1) || (d->count == 0)) {
        return GS_OK;
    }
    return ring_setup_and_run(ctx, d, RING_AG_CHUNKS, bounds);
}
