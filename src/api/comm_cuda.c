/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The communicator's side of device buffers (CUDA builds): what the device
 * layer is asked for at setup, from the configuration. GS_CUDA_PATH says
 * whether NCCL may serve plain calls (auto), must (nccl; GS_TRANSPORT=nccl
 * says the same) or must not (staged); GS_TRANSPORT=mpi and tcp leave it
 * to GS_CUDA_PATH.
 */
#include <string.h>

#include "algo/algo_dev.h"
#include "api/comm_impl.h"
#include "core/host.h"

gs_status_t gs__comm_dev_ready(gs_comm_t comm, const gs_coll_desc_t *d)
{
    gs_algo_dev_params_t params;

    if ((comm->actx.dev != NULL) && comm->actx.dev->ready && (d->device == comm->actx.dev->device)) {
        return gs__dev_setup(&comm->actx, d, NULL);
    }
    memset(&params, 0, sizeof(params));
    params.want_nccl = 1;
    if ((strcmp(comm->cfg.cuda_path, "nccl") == 0) || (strcmp(comm->cfg.transport, "nccl") == 0)) {
        params.want_nccl = 2;
    } else if (strcmp(comm->cfg.cuda_path, "staged") == 0) {
        params.want_nccl = 0;
    }
    params.stage_bytes = (size_t)comm->cfg.cuda_stage_bytes;
    params.host_id = (comm->actx.hosts.ids != NULL) ? comm->actx.hosts.ids[comm->rank]
                                                    : gs__host_id(comm->cfg.host_id);
    return gs__dev_setup(&comm->actx, d, &params);
}
