/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "native" algorithm: all-reduce, broadcast, all-gather and
 * reduce-scatter handed to the transport's optional native collective slots
 * (transport.h), e.g. MPI_Iallreduce on the mpi transport, for comparison
 * with gradsync's own algorithms and as a fallback. Costs are whatever the
 * native library achieves; the cost model never chooses it. When the
 * transport declines a dtype/op/count (MPI has no f16/bf16), the operation
 * runs gradsync's ring or chain instead, on every rank alike (the decision
 * depends only on the arguments). Compressed work never comes here.
 */
#include "algo/prim/prim.h"

#include <string.h>

#include "core/build_info.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"

/* The forced 'native' algorithm on a transport without the call. The way
 * out names the MPI transport only when this build has it (build_info.h). */
static gs_status_t native_missing(const gs__algo_ctx_t *ctx, const char *what)
{
    size_t n = 0;
    const gs__build_part_t *parts = gs__build_parts(&n);
    const gs__build_part_t *mpi = NULL;

    for (size_t i = 0; i < n; i++) {
        if (strcmp(parts[i].name, "mpi") == 0) {
            mpi = &parts[i];
        }
    }
    if ((mpi != NULL) && mpi->on) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "%s: algorithm 'native' needs a transport with a native %s; "
                             "transport '%s' has none (use GS_TRANSPORT=mpi, or leave the "
                             "algorithm to GS_ALGO_AUTO)",
                             ctx->opname, what, gs__tp_name(ctx->tr));
    }
    return gs__error_set(GS_ERR_UNSUPPORTED,
                         "%s: algorithm 'native' needs a transport with a native %s; transport "
                         "'%s' has none, nor has any other transport of this build: leave the "
                         "algorithm to GS_ALGO_AUTO (the MPI transport has one: %s)",
                         ctx->opname, what, gs__tp_name(ctx->tr),
                         (mpi != NULL) ? mpi->rebuild : "a build with MPI");
}

static uint64_t native_deadline(const gs__algo_ctx_t *ctx)
{
    return gs__now_ns() + ctx->timeout_ns;
}

static int native_declined(const gs__algo_ctx_t *ctx, gs_status_t status)
{
    (void)ctx; /* used only when TRACE is compiled in */
    if (status != GS_ERR_UNSUPPORTED) {
        return 0;
    }
    GS_TRACE(ALGO, "%s: native declined (%s); running gradsync's algorithm", ctx->opname,
             gs__error_get());
    gs__error_clear();
    return 1;
}

gs_status_t gs__native_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    gs_status_t status;

    if (!gs__tp_has_coll_allreduce(ctx->tr)) {
        return native_missing(ctx, "allreduce");
    }
    status = gs__tp_coll_allreduce(ctx->tr, d->sendbuf, d->recvbuf, d->count, d->dtype, d->op,
                                   native_deadline(ctx));
    return native_declined(ctx, status) ? gs__ring_allreduce(ctx, d) : status;
}

gs_status_t gs__native_broadcast(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    gs_status_t status;
    void *buf = (ctx->rank == d->root) ? (void *)d->sendbuf : d->recvbuf;

    if (!gs__tp_has_coll_bcast(ctx->tr)) {
        return native_missing(ctx, "broadcast");
    }
    /* The native broadcast is in place: the root sends from its buffer, the
     * others receive into theirs. */
    status = gs__tp_coll_bcast(ctx->tr, buf, d->count, d->dtype, d->root, native_deadline(ctx));
    if (native_declined(ctx, status)) {
        return gs__chain_broadcast(ctx, d);
    }
    if ((status == GS_OK) && (ctx->rank == d->root) && (d->recvbuf != NULL) &&
        (d->recvbuf != d->sendbuf) && (d->count > 0)) {
        memcpy(d->recvbuf, d->sendbuf, d->count * gs__dtype_size(d->dtype));
    }
    return status;
}

gs_status_t gs__native_allgather(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    gs_status_t status;

    if (!gs__tp_has_coll_allgather(ctx->tr)) {
        return native_missing(ctx, "allgather");
    }
    status = gs__tp_coll_allgather(ctx->tr, d->sendbuf, d->recvbuf, d->count, d->dtype,
                                   native_deadline(ctx));
    return native_declined(ctx, status) ? gs__ring_allgather(ctx, d) : status;
}

gs_status_t gs__native_reduce_scatter(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    gs_status_t status;

    if (!gs__tp_has_coll_reduce_scatter(ctx->tr)) {
        return native_missing(ctx, "reduce_scatter");
    }
    status = gs__tp_coll_reduce_scatter(ctx->tr, d->sendbuf, d->recvbuf, d->count, d->dtype, d->op,
                                        native_deadline(ctx));
    return native_declined(ctx, status) ? gs__ring_reduce_scatter(ctx, d) : status;
}
