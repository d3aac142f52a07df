/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs_comm_init_env: the table of bootstrap providers (comm_boot.h), asked
 * in order. The configuration is resolved once, and only when a row asks
 * whether it applies; when it does not resolve, no such row applies and
 * the rendezvous, which resolves it again, reports why.
 */
#include "api/comm_boot.h"

#include "core/check.h"
#include "core/error.h"
#ifdef GS_WITH_MPI
#include "api/comm_mpi.h"
#endif

static const gs__comm_boot_t comm_boots[] = {
#ifdef GS_WITH_MPI
    /* Under mpirun/srun without a master address, or with GS_TRANSPORT=mpi. */
    {.name = "mpi",
     .applies = gs__comm_boot_mpi_applies,
     .init = gs__comm_boot_mpi_init,
     .exchange = NULL},
#endif
    /* GS_STORE (or cfg->store): an explicit store wins over torchrun's (core/bootstrap.h). */
    {.name = "kv store",
     .applies = gs__boot_kv_applies,
     .init = gs__comm_init_exchange,
     .exchange = gs__bootstrap_kv_exchange},
    /* Under torchrun: its agent's TCPStore holds MASTER_PORT (core/bootstrap.h). */
    {.name = "torchrun store",
     .applies = gs__boot_store_applies,
     .init = gs__comm_init_exchange,
     .exchange = gs__bootstrap_store_exchange},
    {.name = "rendezvous",
     .applies = NULL,
     .init = gs__comm_init_exchange,
     .exchange = gs__bootstrap_exchange},
};

#define COMM_BOOT_COUNT (sizeof(comm_boots) / sizeof(comm_boots[0]))

gs_status_t gs_comm_init_env(gs_comm_t *comm_out, const gs_config_t *cfg)
{
    gs__cfg_t rcfg;
    int resolved = 0; /* 1: rcfg holds cfg resolved; -1: it did not resolve */

    for (size_t i = 0; i < COMM_BOOT_COUNT; i++) {
        const gs__comm_boot_t *b = &comm_boots[i];

        if (b->applies != NULL) {
            if (resolved == 0) {
                resolved = (gs__cfg_resolve(cfg, 1, &rcfg) == GS_OK) ? 1 : -1;
            }
            if ((resolved < 0) || !b->applies(&rcfg)) {
                continue;
            }
        }
        return b->init(comm_out, cfg, (resolved > 0) ? &rcfg : NULL, b);
    }
    GS_ASSERT(0); /* the last row always applies */
    return gs__error_set(GS_ERR_INTERNAL, "gs_comm_init_env: no bootstrap provider applies");
}
