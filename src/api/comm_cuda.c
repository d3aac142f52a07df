/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The communicator's side of device buffers (CUDA builds): what the device
 * layer is asked for at setup, from the configuration. GS_CUDA_PATH says
 * whether NCCL may serve plain calls (auto), must (nccl; GS_TRANSPORT=nccl
 * says the same) or must not (staged); GS_TRANSPORT=mpi and tcp leave it
 * to GS_CUDA_PATH. GS_MPI_CUDA_AWARE=1 on the MPI transport lets plain
 * calls hand device buffers to MPI where there is no NCCL. Whatever device
 * the device layer makes current, the calling thread's comes back.
 */
#include <string.h>

#include "algo/sched/algo_dev.h"
#include "api/comm_impl.h"
#include "core/clock.h"
#include "core/host.h"
#ifdef GS_WITH_NCCL
#include "device/nccl_engine.h"
#endif

gs_status_t gs__comm_dev_ready(gs_comm_t comm, const gs__coll_desc_t *d)
{
    gs__algo_dev_params_t params;

    if ((comm->actx.dev != NULL) && comm->actx.dev->ready &&
        (d->device == comm->actx.dev->device)) {
        return gs__dev_setup(&comm->actx, d, NULL);
    }
    if ((d->kind == GS_COLL_SEND) || (d->kind == GS_COLL_RECV)) {
        /* Setting up is collective; a pair of ranks cannot do it alone. */
        return gs__error_set(GS_ERR_INVALID_USAGE,
                             "%s: the first call with device buffers on a communicator must be "
                             "a collective (every rank takes part in setting NCCL up): call one "
                             "first, e.g. a one-element gs_allreduce on device memory",
                             (d->kind == GS_COLL_SEND) ? "gs_send" : "gs_recv");
    }
    memset(&params, 0, sizeof(params));
    params.want_nccl = 1;
    if ((strcmp(comm->cfg.cuda_path, "nccl") == 0) || (strcmp(comm->cfg.transport, "nccl") == 0)) {
        params.want_nccl = 2;
    } else if (strcmp(comm->cfg.cuda_path, "staged") == 0) {
        params.want_nccl = 0;
    }
    params.stage_bytes = (size_t)comm->cfg.cuda_stage_bytes;
    params.mpi_cuda =
        (comm->cfg.mpi_cuda_aware == 1) && gs__tp_has_cap(&comm->tr, GS_TP_CAP_NATIVE_DEVICE);
    params.host_id = (comm->actx.hosts.ids != NULL) ? comm->actx.hosts.ids[comm->rank]
                                                    : gs__host_id(comm->cfg.host_id);
    return gs__dev_setup(&comm->actx, d, &params);
}

gs_status_t gs__comm_dev_split(gs_comm_t parent, gs_comm_t child, int color, int key)
{
#ifdef GS_WITH_NCCL
    gs__dev_t *pdev = parent->actx.dev;
    struct gs__nccl *nc = NULL;
    gs__dev_guard_t guard;
    gs_status_t status;

    if ((pdev == NULL) || !pdev->ready || (pdev->nccl == NULL)) {
        return GS_OK;
    }
    /* ncclCommSplit (and a destroy) make the parent's device current: the
     * caller's comes back after them. */
    status = gs__dev_enter(&parent->actx, &guard);
    if (status == GS_OK) {
        status = gs__nccl_split(pdev->nccl, color, key,
                                gs__now_ns() + (uint64_t)parent->cfg.timeout_ms * 1000000ull, &nc);
    }
    if ((status == GS_OK) && (nc != NULL)) {
        if (child == NULL) {
            status = gs__nccl_destroy(nc);
        } else {
            child->actx.opname = "gs_comm_split";
            status =
                gs__dev_adopt(&child->actx, pdev->device, nc, (size_t)parent->cfg.cuda_stage_bytes);
        }
    }
    gs__dev_guard_leave(&guard);
    return status;
#else
    (void)parent;
    (void)child;
    (void)color;
    (void)key;
    return GS_OK;
#endif
}
