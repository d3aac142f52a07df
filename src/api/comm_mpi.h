/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MPI bootstrap hook of gs_comm_init_env (comm_mpi.c, built with
 * GS_WITH_MPI only). Free of <mpi.h>, so comm.c stays MPI-agnostic.
 */
#ifndef GS_API_COMM_MPI_H
#define GS_API_COMM_MPI_H

#include "gradsync/gradsync.h"

/*
 * gs_comm_init_env's MPI path. Sets *handled_out to 0 and returns GS_OK
 * when the MPI path does not apply: GS_TRANSPORT (or cfg->transport) is not
 * "mpi", and the process was not started by mpirun/srun (OMPI_COMM_WORLD_SIZE,
 * PMIX_RANK, PMI_RANK, SLURM_PROCID) or a master address is given. Otherwise
 * sets *handled_out to 1, initialises MPI when nobody has (gradsync then
 * finalizes it with its last communicator), and creates the communicator
 * over MPI_COMM_WORLD as gs_comm_init_mpi does. Returns what
 * gs_comm_init_mpi returns.
 */
gs_status_t gs__comm_init_env_mpi(gs_comm_t *comm_out, const gs_config_t *cfg, int *handled_out);

#endif /* GS_API_COMM_MPI_H */
