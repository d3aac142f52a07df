/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Communicator creation from MPI: gs_comm_init_mpi (an MPI communicator the
 * application owns) and the mpirun/srun path of gs_comm_init_env (gradsync
 * initialises MPI itself when nobody has). Built only with GS_WITH_MPI. The
 * bootstrap duplicates the MPI communicator, exchanges the transport
 * endpoints with MPI_Allgather instead of the rendezvous store, and hands
 * the duplicate to the MPI transport (or frees it when another transport,
 * e.g. tcp, carries the data). It does not move any gradient itself.
 */
#include "api/comm_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/comm_impl.h"
#include "core/check.h"
#include "core/error.h"
#include "core/host.h"
#include "core/log.h"
#include "core/socket.h"
#include "gradsync/mpi.h"
#include "transport/mpi/mpi_transport.h"

#define COMM_MPI_ID_SEED 0x6d7069636f6d6dull /* "mpicomm" */

static int launched_by_mpi(void)
{
    return gs__cfg_mpi_launcher() != NULL;
}

/*
 * Every rank calls MPI_Allgather even after a local failure (publishing an
 * empty endpoint), so a failure on one rank fails every rank instead of
 * leaving them blocked in the exchange.
 */
static gs_status_t comm_init_over(gs_comm_t *comm_out, MPI_Comm user_comm, const gs__cfg_t *rcfg)
{
    char my_addr[GS_SOCK_ADDR_MAX];
    char(*addrs)[GS_SOCK_ADDR_MAX] = NULL;
    uint64_t *hosts = NULL;
    uint64_t my_host = gs__host_id(rcfg->host_id);
    MPI_Comm dup = MPI_COMM_NULL;
    gs_comm_t comm = NULL;
    gs_status_t status;
    gs_status_t local = GS_OK;
    int rank = 0;
    int size = 0;
    int ret;

    status = gs__mpi_env_acquire();
    if (status != GS_OK) {
        return status;
    }
    MPI_Comm_rank(user_comm, &rank);
    MPI_Comm_size(user_comm, &size);
    ret = MPI_Comm_dup(user_comm, &dup);
    if (ret != MPI_SUCCESS) {
        status = gs__error_set(GS_ERR_SYSTEM, "gs_comm_init_mpi: MPI_Comm_dup failed: %s",
                               gs__mpi_errstr(ret));
        goto out;
    }
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    addrs = calloc((size_t)size, GS_SOCK_ADDR_MAX);
    hosts = calloc((size_t)size, sizeof(*hosts));
    comm = gs__comm_alloc();
    if ((addrs == NULL) || (hosts == NULL) || (comm == NULL)) {
        local =
            gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_init_mpi: out of memory for %d ranks", size);
    } else {
        comm->cfg = *rcfg;
        /* No rendezvous here: the built-in master address (loopback) would
         * make the tcp transport listen on loopback, out of reach of other
         * hosts. Without one it listens on GS_SOCKET_IFNAME, else on the
         * first non-loopback interface that is up. */
        if (gs__cfg_source_of(rcfg, "GS_MASTER_ADDR") == GS_CFG_SRC_DEFAULT) {
            comm->cfg.master_addr[0] = '\0';
        }
        comm->cfg.rank = rank;
        comm->cfg.world_size = size;
        comm->rank = rank;
        comm->size = size;
        gs__log_set_rank(rank);
        local = gs__algo_policy_parse(comm->cfg.algo, &comm->sel.policy);
        if (local == GS_OK) {
            local = gs__comm_transport_init(comm);
        }
        if (local == GS_OK) {
            local = gs__tp_get_address(&comm->tr, my_addr, sizeof(my_addr));
        }
    }
    if (local != GS_OK) {
        memset(my_addr, 0, sizeof(my_addr));
    }
    if ((addrs == NULL) || (hosts == NULL)) {
        /* Take part in both exchanges without keeping the results. */
        char sink[GS_SOCK_ADDR_MAX];
        char *all = malloc((size_t)size * GS_SOCK_ADDR_MAX);
        ret = MPI_Allgather(my_addr, GS_SOCK_ADDR_MAX, MPI_CHAR, (all != NULL) ? all : sink,
                            (all != NULL) ? GS_SOCK_ADDR_MAX : 0, MPI_CHAR, dup);
        if (ret == MPI_SUCCESS) {
            (void)MPI_Allgather(&my_host, 1, MPI_UINT64_T, (all != NULL) ? all : sink,
                                (all != NULL) ? 1 : 0, MPI_UINT64_T, dup);
        }
        free(all);
        status = local;
        goto out;
    }
    ret =
        MPI_Allgather(my_addr, GS_SOCK_ADDR_MAX, MPI_CHAR, addrs, GS_SOCK_ADDR_MAX, MPI_CHAR, dup);
    if (ret == MPI_SUCCESS) {
        /* Every rank's host id, for the host table (algo_hosts.c). */
        ret = MPI_Allgather(&my_host, 1, MPI_UINT64_T, hosts, 1, MPI_UINT64_T, dup);
    }
    if (ret != MPI_SUCCESS) {
        status = gs__error_set(GS_ERR_PEER_FAILED, "gs_comm_init_mpi: MPI_Allgather failed: %s",
                               gs__mpi_errstr(ret));
        goto out;
    }
    if (local != GS_OK) {
        status = local;
        goto out;
    }
    for (int i = 0; i < size; i++) {
        addrs[i][GS_SOCK_ADDR_MAX - 1] = '\0';
        if (addrs[i][0] == '\0') {
            status = gs__error_set(GS_ERR_PEER_FAILED,
                                   "gs_comm_init_mpi: rank %d could not create its endpoint", i);
            goto out;
        }
    }
    /* Every rank derives the same ids from the same endpoints. */
    comm->comm_id = gs__hash64(addrs, (size_t)size * GS_SOCK_ADDR_MAX, COMM_MPI_ID_SEED);
    comm->job_id = gs__hash64(comm->cfg.job_id, strlen(comm->cfg.job_id), comm->comm_id);
    if (comm->tr.ops == &gs__mpi_ops) {
        status = gs__mpi_tp_adopt_comm(comm->tr.tp, dup);
        if (status != GS_OK) {
            goto out;
        }
        dup = MPI_COMM_NULL; /* the transport frees it */
    }
    status = gs__comm_start(comm, addrs, hosts);
out:
    if (dup != MPI_COMM_NULL) {
        MPI_Comm_free(&dup);
    }
    free(addrs);
    free(hosts);
    if (status == GS_OK) {
        GS_INFO(INIT, "communicator ready over MPI: rank %d of %d, transport %s", comm->rank,
                comm->size, gs__tp_name(&comm->tr));
        *comm_out = comm;
    } else if (comm != NULL) {
        gs__comm_free(comm); /* and its transport */
    }
    gs__mpi_env_release(); /* the transport holds its own reference */
    return status;
}

gs_status_t gs_comm_init_mpi(gs_comm_t *comm_out, MPI_Comm mpi_comm, const gs_config_t *cfg)
{
    gs__cfg_t rcfg;
    gs_status_t status;
    int inited = 0;

    gs__log_init();
    if ((comm_out == NULL) || (mpi_comm == MPI_COMM_NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_init_mpi: %s",
                             comm_out == NULL ? "comm_out is NULL" : "mpi_comm is MPI_COMM_NULL");
    }
    MPI_Initialized(&inited);
    if (!inited) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "gs_comm_init_mpi: MPI is not initialised; call "
                             "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) first");
    }
    /* Rank and size come from mpi_comm; the launcher variables are only
     * used so that resolution does not ask for them. */
    status = gs__cfg_resolve(cfg, 1, &rcfg);
    if (status != GS_OK) {
        return status;
    }
    gs__cfg_warn_unknown_env();
    if (gs__cfg_source_of(&rcfg, "GS_TRANSPORT") == GS_CFG_SRC_DEFAULT) {
        (void)snprintf(rcfg.transport, sizeof(rcfg.transport), "mpi");
    }
    return comm_init_over(comm_out, mpi_comm, &rcfg);
}

int gs__comm_boot_mpi_applies(const gs__cfg_t *rcfg)
{
    return (strcmp(rcfg->transport, "mpi") == 0) ||
           (launched_by_mpi() && (gs__cfg_source_of(rcfg, "GS_MASTER_ADDR") == GS_CFG_SRC_DEFAULT));
}

gs_status_t gs__comm_boot_mpi_init(gs_comm_t *comm_out, const gs_config_t *cfg,
                                   const gs__cfg_t *rcfg, const gs__comm_boot_t *self)
{
    gs__cfg_t mcfg;
    gs_status_t status;

    (void)cfg;
    (void)self;
    GS_ASSERT(rcfg != NULL);
    if (comm_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_init_env: comm_out is NULL");
    }
    mcfg = *rcfg;
    gs__cfg_warn_unknown_env();
    if (gs__cfg_source_of(&mcfg, "GS_TRANSPORT") == GS_CFG_SRC_DEFAULT) {
        (void)snprintf(mcfg.transport, sizeof(mcfg.transport), "mpi");
    }
    GS_INFO(BOOT, "bootstrapping through MPI (%s), transport %s",
            launched_by_mpi() ? "launched by mpirun/srun" : "GS_TRANSPORT=mpi", mcfg.transport);
    /* Holds MPI (initialising it if needed) across the bootstrap. */
    status = gs__mpi_env_acquire();
    if (status != GS_OK) {
        return status;
    }
    status = comm_init_over(comm_out, MPI_COMM_WORLD, &mcfg);
    gs__mpi_env_release();
    return status;
}
