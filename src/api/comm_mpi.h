/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MPI row of gs_comm_init_env's bootstrap providers (comm_boot.c;
 * comm_mpi.c, built with GS_WITH_MPI only). Free of <mpi.h>, so the table
 * stays MPI-agnostic.
 */
#ifndef GS_API_COMM_MPI_H
#define GS_API_COMM_MPI_H

#include "api/comm_boot.h"

/*
 * Whether the MPI provider applies: GS_TRANSPORT (or cfg->transport) is
 * "mpi", or the process was started by mpirun/srun (OMPI_COMM_WORLD_SIZE,
 * PMIX_RANK, PMI_RANK, SLURM_PROCID) and no master address is given.
 */
int gs__comm_boot_mpi_applies(const gs__cfg_t *rcfg);

/*
 * gs_comm_init_env's MPI path (@p rcfg is not NULL: applies resolved it):
 * initialises MPI when nobody has (gradsync then finalizes it with its last
 * communicator), and creates the communicator over MPI_COMM_WORLD as
 * gs_comm_init_mpi does, with GS_TRANSPORT=mpi unless a transport was set.
 * Returns what gs_comm_init_mpi returns.
 */
gs_status_t gs__comm_boot_mpi_init(gs_comm_t *comm_out, const gs_config_t *cfg,
                                   const gs__cfg_t *rcfg, const gs__comm_boot_t *self);

#endif /* GS_API_COMM_MPI_H */
