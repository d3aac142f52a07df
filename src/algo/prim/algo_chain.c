/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pipelined chain broadcast and reduce.
 *
 * Ranks are ordered by distance from the root along ctx->route (the
 * host-grouped order, algo_hosts.c, so the chain crosses between hosts
 * once per host): d = (pos(rank) - pos(root)) mod n, and "d-1", "d+1"
 * below are the ranks at those distances.
 * Broadcast: d receives each slice from d-1 straight into the user's buffer
 * and forwards it to d+1; the last rank only receives. Reduce: the data
 * flows the other way, d receives a partial sum from d+1, adds its own
 * contribution and forwards it to d-1; the root (d = 0) ends with the full
 * result (and divides by n for AVG).
 * Cost with s slices of a message of B bytes:
 *   T = (n - 2 + s) * (alpha + B/s * beta)  (+ B/s * gamma per step for reduce),
 * which approaches B * beta for large messages: the bandwidth-optimal
 * broadcast for one sender. A small message pays (n-1) alpha; the tree and
 * binomial variants of the algorithms issue will cover that case.
 *
 * Step table, n = 4, root 0, slices 0 1 2 (broadcast; "x>y" = send):
 *   t=0: 0>1 s0
 *   t=1: 0>1 s1   1>2 s0
 *   t=2: 0>1 s2   1>2 s1   2>3 s0
 *   t=3:          1>2 s2   2>3 s1
 *   t=4:                   2>3 s2
 * Slices in flight per rank are bounded by a window so that the
 * transport's match lists stay short.
 */
#include <stdlib.h>
#include <string.h>

#include "algo/prim/prim.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/reduce_cpu.h"

#define CHAIN_MAX_SLICES 65536
#define CHAIN_WINDOW 8

typedef struct chain {
    gs__algo_ctx_t *ctx;
    const gs__coll_desc_t *d;
    int dist; /* distance from the root */
    int from; /* rank we receive from, -1 for none */
    int to;   /* rank we send to, -1 for none */
    size_t esize;
    size_t nslices;
    gs__algo_req_t *send; /* one per slice */
    gs__algo_req_t *recv; /* one per slice */
    uint8_t *rbuf;        /* reduce: where incoming partial sums land */
    uint8_t *acc;         /* reduce: where this rank's partial sum is built */
} chain_t;

static void chain_slice(const chain_t *c, size_t j, size_t *off, size_t *len)
{
    const size_t n = c->d->count;
    const size_t lo = (size_t)(((unsigned __int128)n * j) / c->nslices);
    const size_t hi = (size_t)(((unsigned __int128)n * (j + 1)) / c->nslices);

    *off = lo;
    *len = hi - lo;
}

static gs_status_t chain_setup(chain_t *c, gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                               int toward_root)
{
    const int n = gs__route_n(ctx);
    const int root_pos = gs__route_pos_of(ctx, d->root);
    size_t slice_elems;

    memset(c, 0, sizeof(*c));
    c->ctx = ctx;
    c->d = d;
    c->esize = gs__dtype_size(d->dtype);
    if (root_pos < 0) {
        return gs__error_set(GS_ERR_INTERNAL, "%s: root %d is not on the chain", ctx->opname,
                             d->root);
    }
    c->dist = (gs__route_pos(ctx) - root_pos + n) % n;
    if (toward_root) {
        c->from = (c->dist < n - 1) ? gs__route_rank(ctx, (root_pos + c->dist + 1) % n) : -1;
        c->to = (c->dist > 0) ? gs__route_rank(ctx, (root_pos + c->dist - 1) % n) : -1;
    } else {
        c->from = (c->dist > 0) ? gs__route_rank(ctx, (root_pos + c->dist - 1) % n) : -1;
        c->to = (c->dist < n - 1) ? gs__route_rank(ctx, (root_pos + c->dist + 1) % n) : -1;
    }
    slice_elems = ctx->slice_bytes / c->esize;
    if (slice_elems == 0) {
        slice_elems = 1;
    }
    c->nslices = (d->count + slice_elems - 1) / slice_elems;
    if (c->nslices > CHAIN_MAX_SLICES) {
        c->nslices = CHAIN_MAX_SLICES;
    }
    c->send = calloc(c->nslices, sizeof(gs__algo_req_t));
    c->recv = calloc(c->nslices, sizeof(gs__algo_req_t));
    if ((c->send == NULL) || (c->recv == NULL)) {
        free(c->send);
        free(c->recv);
        return gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory for %zu slices", ctx->opname,
                             c->nslices);
    }
    return GS_OK;
}

static void chain_free(chain_t *c, gs_status_t status)
{
    if (status != GS_OK) {
        gs__algo_release_all(c->ctx, c->send, c->nslices);
        gs__algo_release_all(c->ctx, c->recv, c->nslices);
    }
    free(c->send);
    free(c->recv);
}

/*
 * The pipeline shared by broadcast and reduce. recv_dst(j) is where slice j
 * is received; on_recv(j) turns a received slice into the slice to forward
 * (reduce adds the local contribution); send_src(j) is what is forwarded.
 */
typedef uint8_t *(*chain_addr_fn_t)(chain_t *c, size_t j);
typedef void (*chain_step_fn_t)(chain_t *c, size_t j);

static gs_status_t chain_pipeline(chain_t *c, chain_addr_fn_t recv_dst, chain_step_fn_t on_recv,
                                  chain_addr_fn_t send_src)
{
    gs__algo_ctx_t *ctx = c->ctx;
    size_t recv_posted = 0, recv_done = 0, send_posted = 0, send_done = 0;
    const size_t ns = c->nslices;
    const size_t need_recv = (c->from >= 0) ? ns : 0;
    const size_t need_send = (c->to >= 0) ? ns : 0;
    gs_status_t status = GS_OK;
    uint64_t deadline;

    gs__algo_renew(ctx, &deadline);
    while ((status == GS_OK) && ((recv_done < need_recv) || (send_done < need_send))) {
        int progressed = 0;
        int done;
        size_t off, len;

        while ((status == GS_OK) && (recv_posted < need_recv) &&
               (recv_posted < recv_done + CHAIN_WINDOW)) {
            chain_slice(c, recv_posted, &off, &len);
            status =
                gs__algo_irecv(ctx, c->from, gs__algo_tag(ctx, c->d, (uint32_t)recv_posted),
                               recv_dst(c, recv_posted), len * c->esize, &c->recv[recv_posted]);
            recv_posted++;
            progressed = 1;
        }
        while ((status == GS_OK) && (recv_done < recv_posted)) {
            chain_slice(c, recv_done, &off, &len);
            status = gs__algo_check(ctx, &c->recv[recv_done], len * c->esize, &done);
            if (!done || status != GS_OK) {
                break;
            }
            on_recv(c, recv_done);
            recv_done++;
            progressed = 1;
        }
        /* A slice can be forwarded once it has been received (or at once
         * when this rank only sends). */
        while ((status == GS_OK) && (send_posted < need_send) &&
               (send_posted < send_done + CHAIN_WINDOW) &&
               ((need_recv == 0) || (send_posted < recv_done))) {
            chain_slice(c, send_posted, &off, &len);
            status =
                gs__algo_isend(ctx, c->to, gs__algo_tag(ctx, c->d, (uint32_t)send_posted),
                               send_src(c, send_posted), len * c->esize, &c->send[send_posted]);
            send_posted++;
            progressed = 1;
        }
        while ((status == GS_OK) && (send_done < send_posted)) {
            status = gs__algo_check(ctx, &c->send[send_done], 0, &done);
            if (!done || status != GS_OK) {
                break;
            }
            send_done++;
            progressed = 1;
        }
        if (status != GS_OK) {
            break;
        }
        if (progressed) {
            gs__algo_renew(ctx, &deadline);
        } else if ((recv_done < need_recv) || (send_done < need_send)) {
            const gs__algo_req_t *blame =
                (recv_done < recv_posted) ? &c->recv[recv_done] : &c->send[send_done];
            status = gs__algo_progress(ctx, &deadline, blame);
        }
    }
    return status;
}

/* Broadcast: receive into the user's buffer and forward from there. */
static uint8_t *bcast_addr(chain_t *c, size_t j)
{
    size_t off, len;
    chain_slice(c, j, &off, &len);
    return (uint8_t *)c->d->recvbuf + off * c->esize;
}

static void bcast_on_recv(chain_t *c, size_t j)
{
    (void)c;
    (void)j;
}

gs_status_t gs__chain_broadcast(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    chain_t c;
    gs_status_t status;

    if ((ctx->size == 1) || (d->count == 0)) {
        return GS_OK;
    }
    status = chain_setup(&c, ctx, d, 0);
    if (status != GS_OK) {
        return status;
    }
    status = chain_pipeline(&c, bcast_addr, bcast_on_recv, bcast_addr);
    chain_free(&c, status);
    return status;
}

/* Reduce: incoming partial sums land in rbuf (the root's recvbuf, or
 * scratch); the local contribution is added into acc, which is forwarded.
 * The leaf forwards its own sendbuf. rbuf == acc except at an in-place root,
 * which must not overwrite its contribution before adding it. */
static uint8_t *reduce_recv_dst(chain_t *c, size_t j)
{
    size_t off, len;
    chain_slice(c, j, &off, &len);
    return c->rbuf + off * c->esize;
}

static void reduce_on_recv(chain_t *c, size_t j)
{
    const gs__coll_desc_t *d = c->d;
    size_t off, len;
    uint8_t *acc;

    chain_slice(c, j, &off, &len);
    acc = c->acc + off * c->esize;
    gs__reduce(acc, c->rbuf + off * c->esize, (const uint8_t *)d->sendbuf + off * c->esize, len,
               d->dtype, d->op);
    if ((c->dist == 0) && (d->op == GS_OP_AVG)) {
        gs__reduce_scale(acc, len, d->dtype, c->ctx->size);
    }
}

static uint8_t *reduce_send_src(chain_t *c, size_t j)
{
    size_t off, len;
    chain_slice(c, j, &off, &len);
    if (c->from < 0) {
        return (uint8_t *)c->d->sendbuf + off * c->esize;
    }
    return c->acc + off * c->esize;
}

gs_status_t gs__chain_reduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const size_t bytes = d->count * gs__dtype_size(d->dtype);
    chain_t c;
    gs_status_t status;
    void *scratch = NULL;
    const int is_root = (ctx->rank == d->root);

    if ((ctx->size == 1) || (d->count == 0)) {
        if (is_root && (d->sendbuf != d->recvbuf) && (bytes > 0)) {
            memcpy(d->recvbuf, d->sendbuf, bytes);
        }
        return GS_OK;
    }
    status = chain_setup(&c, ctx, d, 1);
    if (status != GS_OK) {
        return status;
    }
    if (is_root) {
        c.acc = (uint8_t *)d->recvbuf;
        c.rbuf = c.acc;
        if (d->sendbuf == d->recvbuf) {
            status = gs__algo_scratch(ctx, bytes, &scratch);
            c.rbuf = (uint8_t *)scratch;
        }
    } else if (c.from >= 0) {
        status = gs__algo_scratch(ctx, bytes, &scratch);
        c.acc = (uint8_t *)scratch;
        c.rbuf = c.acc;
    }
    if (status == GS_OK) {
        status = chain_pipeline(&c, reduce_recv_dst, reduce_on_recv, reduce_send_src);
    }
    chain_free(&c, status);
    return status;
}
