/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by every algorithm: message tags, scratch memory, posting
 * and checking requests, and waiting with a no-progress deadline. Every
 * request of every algorithm passes through here, which is why the per-peer
 * statistics (bytes, messages, time blocked waiting on each peer) are counted
 * here and not in each transport.
 */
#include "algo/ctx/ctx.h"
#include "algo/ctx/ctx_shm.h"

#include <stdlib.h>

#include "core/clock.h"
#include "core/counters.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/socket.h"
#include "core/recorder.h"

uint64_t gs__algo_tag(const gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, uint32_t idx)
{
    /* Inside an operation its fingerprint, computed once (gs__algo_op_begin). */
    const uint64_t sig = (ctx->cur != NULL) ? ctx->fp : gs__algo_fingerprint(d);

    return (sig << 48) | ((uint64_t)(ctx->seq & 0xffffffu) << 24) | (uint64_t)(idx & 0xffffffu);
}

gs_status_t gs__algo_grow(const gs__algo_ctx_t *ctx, void **buf, size_t *cap, size_t bytes,
                          void **out)
{
    if (bytes > *cap) {
        void *p = malloc(bytes);
        if (p == NULL) {
            return gs__error_set(GS_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes of scratch",
                                 ctx->opname, bytes);
        }
        free(*buf);
        *buf = p;
        *cap = bytes;
    }
    *out = *buf;
    return GS_OK;
}

gs_status_t gs__algo_ctx_init(gs__algo_ctx_t *ctx, const gs__algo_ctx_params_t *p)
{
    const gs_status_t status = gs__algo_hosts_init(&ctx->hosts, p->host_ids, p->size, p->rank);

    if (status != GS_OK) {
        return status;
    }
    ctx->tr = p->tr;
    ctx->diag = p->diag;
    ctx->rank = p->rank;
    ctx->size = p->size;
    ctx->timeout_ns = p->timeout_ns;
    ctx->slice_bytes = p->slice_bytes;
    ctx->comp_corrupt = p->comp_corrupt;
    ctx->opname = "gs_comm_init";
    gs__algo_route_hosts(ctx);
    return GS_OK;
}

void gs__algo_ctx_fini(gs__algo_ctx_t *ctx)
{
    free(ctx->scratch);
    ctx->scratch = NULL;
    ctx->scratch_cap = 0;
    free(ctx->outer_buf);
    ctx->outer_buf = NULL;
    ctx->outer_cap = 0;
    gs__algo_hosts_free(&ctx->hosts);
    ctx->route.order = NULL;
    if (ctx->shm != NULL) {
        gs__host_seg_close(ctx->shm);
        free(ctx->shm);
        ctx->shm = NULL;
    }
}

gs_status_t gs__algo_scratch(gs__algo_ctx_t *ctx, size_t bytes, void **out)
{
    return gs__algo_grow(ctx, &ctx->scratch, &ctx->scratch_cap, bytes, out);
}

/*
 * Statistics: charge a finished request to its peer. The time blocked since
 * the previous completion goes to this request, because its completion is
 * what ended the wait (a request that finished earlier was not the one being
 * waited for). Bytes count only on success. One relaxed add per counter.
 */
static void algo_stats_complete(gs__algo_ctx_t *ctx, const gs__algo_req_t *r, size_t nbytes, int ok)
{
    gs__peer_counters_t *pc;
    const uint64_t wait = ctx->wait_pending_ns;

    ctx->wait_pending_ns = 0;
    if ((ctx->peer_ctr == NULL) || (r->peer < 0) || (r->peer >= ctx->size)) {
        return;
    }
    pc = &ctx->peer_ctr[r->peer];
    if (r->is_send) {
        if (ok) {
            gs__counter_add(&pc->bytes_sent, nbytes);
            gs__counter_add(&pc->msgs_sent, 1);
        }
        if (wait > 0) {
            gs__counter_add(&pc->send_wait_ns, wait);
        }
    } else {
        if (ok) {
            gs__counter_add(&pc->bytes_received, nbytes);
            gs__counter_add(&pc->msgs_received, 1);
        }
        if (wait > 0) {
            gs__counter_add(&pc->recv_wait_ns, wait);
        }
    }
}

gs_status_t gs__algo_isend(gs__algo_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                           gs__algo_req_t *r)
{
    gs_status_t status;

    r->peer = peer;
    r->is_send = 1;
    status = gs__tp_isend(ctx->tr, peer, tag, buf, len, &r->req);
    if (status == GS_OK) {
        gs__recorder_pend(ctx->recorder, peer, 1, 1);
    }
    return status;
}

gs_status_t gs__algo_irecv(gs__algo_ctx_t *ctx, int peer, uint64_t tag, void *buf, size_t len,
                           gs__algo_req_t *r)
{
    gs_status_t status;

    r->peer = peer;
    r->is_send = 0;
    status = gs__tp_irecv(ctx->tr, peer, tag, buf, len, &r->req);
    if (status == GS_OK) {
        gs__recorder_pend(ctx->recorder, peer, 0, 1);
    }
    return status;
}

gs_status_t gs__algo_check_len(gs__algo_ctx_t *ctx, gs__algo_req_t *r, int *done_out,
                               size_t *nbytes_out)
{
    gs__tp_completion_t comp;
    int done = 0;

    *done_out = 0;
    if (r->req == NULL) {
        return GS_OK;
    }
    gs__tp_test(ctx->tr, r->req, &done, &comp);
    if (!done) {
        return GS_OK;
    }
    gs__tp_req_release(ctx->tr, r->req);
    r->req = NULL;
    gs__recorder_pend(ctx->recorder, r->peer, r->is_send, -1); /* the peer it was posted for */
    *done_out = 1;
    *nbytes_out = comp.nbytes;
    if (!r->is_send && (comp.status == GS_OK)) {
        r->peer = comp.peer; /* resolves GS_ANY_SOURCE for messages and callers */
    }
    algo_stats_complete(ctx, r, comp.nbytes, comp.status == GS_OK);
    if ((comp.status == GS_ERR_MISMATCH) && !r->is_send && (ctx->cur != NULL) &&
        ((comp.tag & GS_TP_TAG_P2P) == 0)) {
        /* Another collective's message: find out what the sender called. */
        if (ctx->diag != NULL) {
            return ctx->diag->mismatch(ctx, comp.peer, comp.tag);
        }
    }
    if ((comp.status == GS_ERR_PEER_FAILED) && (ctx->cur != NULL) && (ctx->diag != NULL)) {
        /* A rank that found a mismatch may have left right after reporting it. */
        gs_status_t why = ctx->diag->explain(ctx);
        if (why != GS_OK) {
            return why;
        }
    }
    if (comp.status != GS_OK) {
        return gs__error_wrap(comp.status, "%s: %s rank %d failed: %s", ctx->opname,
                              r->is_send ? "send to" : "receive from", r->peer, gs__error_get());
    }
    return GS_OK;
}

/* A finished receive of @p nbytes where @p expect were due ((size_t)-1: any). */
static gs_status_t algo_check_nbytes(const gs__algo_ctx_t *ctx, const gs__algo_req_t *r,
                                     size_t nbytes, size_t expect)
{
    if ((expect != (size_t)-1) && (nbytes != expect)) {
        return gs__error_set(GS_ERR_MISMATCH,
                             "%s: rank %d sent %zu bytes where %zu were expected (do all ranks "
                             "pass the same count and dtype?)",
                             ctx->opname, r->peer, nbytes, expect);
    }
    return GS_OK;
}

gs_status_t gs__algo_check(gs__algo_ctx_t *ctx, gs__algo_req_t *r, size_t expect, int *done_out)
{
    size_t nbytes = 0;
    gs_status_t status = gs__algo_check_len(ctx, r, done_out, &nbytes);

    if ((status == GS_OK) && *done_out && !r->is_send) {
        return algo_check_nbytes(ctx, r, nbytes, expect);
    }
    return status;
}

void gs__algo_renew(const gs__algo_ctx_t *ctx, uint64_t *deadline)
{
    *deadline = gs__now_ns() + ctx->timeout_ns;
}

/* GS_ERR_TIMEOUT: inside an operation diagnosis names it and every peer it
 * waits on; outside one (or without diagnosis) the peer waited on. */
static gs_status_t algo_timeout(gs__algo_ctx_t *ctx, const gs__algo_req_t *waiting_on)
{
    const unsigned long long ms = (unsigned long long)(ctx->timeout_ns / 1000000ull);

    if ((ctx->cur != NULL) && (ctx->diag != NULL)) {
        return ctx->diag->timeout(ctx, waiting_on);
    }
    if (waiting_on != NULL) {
        return gs__error_set(GS_ERR_TIMEOUT,
                             "%s: rank %d timed out after %llu ms waiting to %s rank %d",
                             ctx->opname, ctx->rank, ms,
                             waiting_on->is_send ? "send to" : "receive from", waiting_on->peer);
    }
    return gs__error_set(GS_ERR_TIMEOUT, "%s: rank %d timed out after %llu ms", ctx->opname,
                         ctx->rank, ms);
}

/* An operation blocked this long looks for another rank's REPORT (algo/diag),
 * and from then on wakes at least this often to look again. */
#define ALGO_DIAG_POLL_NS 1000000ull
#define ALGO_DIAG_SLICE_NS 50000000ull

gs_status_t gs__algo_progress(gs__algo_ctx_t *ctx, uint64_t *deadline,
                              const gs__algo_req_t *waiting_on)
{
    const uint64_t t0 = gs__now_ns();
    uint64_t until = *deadline;
    gs_status_t status;

    if (t0 >= *deadline) {
        if (waiting_on != NULL) {
            algo_stats_complete(ctx, waiting_on, 0, 0); /* the wait that timed out is its */
        }
        return algo_timeout(ctx, waiting_on);
    }
    if ((ctx->cur != NULL) && (ctx->diag != NULL)) {
        /* Blocked since the last completion (the deadline is renewed then). */
        const uint64_t stalled =
            (t0 + ctx->timeout_ns > *deadline) ? t0 + ctx->timeout_ns - *deadline : 0;
        uint64_t wake;

        if (stalled >= ALGO_DIAG_POLL_NS) {
            status = ctx->diag->poll(ctx, stalled);
            if (status != GS_OK) {
                return status;
            }
            wake = t0 + ALGO_DIAG_SLICE_NS;
        } else {
            wake = t0 + (ALGO_DIAG_POLL_NS - stalled);
        }
        until = (wake < until) ? wake : until;
    }
    status = gs__tp_progress(ctx->tr, until);
    ctx->wait_pending_ns += gs__now_ns() - t0;
    if (status != GS_OK) {
        return gs__error_wrap(status, "%s: %s", ctx->opname, gs__error_get());
    }
    return GS_OK;
}

void gs__algo_release_all(gs__algo_ctx_t *ctx, gs__algo_req_t *reqs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (reqs[i].req != NULL) {
            gs__tp_req_release(ctx->tr, reqs[i].req);
            reqs[i].req = NULL;
            gs__recorder_pend(ctx->recorder, reqs[i].peer, reqs[i].is_send, -1);
        }
    }
}

gs_status_t gs__algo_wait_each(gs__algo_ctx_t *ctx, gs__algo_req_t *reqs, size_t n,
                               gs__algo_recv_done_fn_t on_recv, const void *arg)
{
    uint64_t deadline;
    size_t left = 0;
    gs_status_t status = GS_OK;

    for (size_t i = 0; i < n; i++) {
        left += (reqs[i].req != NULL);
    }
    gs__algo_renew(ctx, &deadline);
    while (left > 0) {
        const gs__algo_req_t *blame = NULL;

        for (size_t i = 0; (i < n) && (status == GS_OK); i++) {
            size_t nbytes = 0;
            int done = 0;

            if (reqs[i].req == NULL) {
                continue;
            }
            status = gs__algo_check_len(ctx, &reqs[i], &done, &nbytes);
            if (!done) {
                if (blame == NULL) {
                    blame = &reqs[i];
                }
                continue;
            }
            left--;
            gs__algo_renew(ctx, &deadline);
            if (!reqs[i].is_send && (on_recv != NULL)) {
                status = on_recv(ctx, &reqs[i], i, status, nbytes, arg);
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

/* gs__algo_wait_all's check of a finished receive: gs__algo_check's. */
static gs_status_t algo_recv_expect(gs__algo_ctx_t *ctx, const gs__algo_req_t *r, size_t i,
                                    gs_status_t status, size_t nbytes, const void *arg)
{
    const size_t *expect = arg;

    if ((status != GS_OK) || (expect == NULL)) {
        return status;
    }
    return algo_check_nbytes(ctx, r, nbytes, expect[i]);
}

gs_status_t gs__algo_wait_all(gs__algo_ctx_t *ctx, gs__algo_req_t *reqs, const size_t *expect,
                              size_t n)
{
    return gs__algo_wait_each(ctx, reqs, n, algo_recv_expect, expect);
}
