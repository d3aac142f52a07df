/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file
 * gradsync over MPI: create a communicator from an MPI communicator, for
 * programs that already use MPI. This is the one public header that
 * includes <mpi.h>; it is installed with every build, but its call exists
 * only in libraries built with GS_WITH_MPI (on when CMake finds an MPI C
 * library): a program using it does not link against a library built
 * without MPI, and find_package(gradsync COMPONENTS MPI) fails for such an
 * installation (docs/install.md).
 *
 * Thread level: gradsync's worker thread calls MPI while the application
 * may call it too, so MPI must be initialised with MPI_THREAD_MULTIPLE
 * (MPI_Init_thread). gradsync never finalizes an MPI it did not initialise.
 */
#ifndef GRADSYNC_MPI_H
#define GRADSYNC_MPI_H

#include <mpi.h>

#include "gradsync/gradsync.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Create a gradsync communicator with the ranks of @p mpi_comm (same
 * rank numbers and size). gradsync duplicates @p mpi_comm (MPI_Comm_dup), so
 * its traffic never matches the application's receives; the application
 * keeps @p mpi_comm and may free it after this call.
 *
 * The transport is "mpi" unless @p cfg (or GS_TRANSPORT) asks for another
 * one, in which case MPI only carries the bootstrap: each rank's endpoint
 * is exchanged with MPI_Allgather, so no GS_MASTER_ADDR is needed. rank and
 * world_size in @p cfg are ignored (they come from @p mpi_comm); every other
 * field and GS_* variable applies as in gs_comm_init().
 *
 * @param[out] comm_out The new communicator (a handle), written on success.
 * @param[in] mpi_comm An intra-communicator; MPI must be initialised with
 *            MPI_THREAD_MULTIPLE.
 * @param[in] cfg Configuration (may be NULL: environment and defaults).
 * @return GS_OK; GS_ERR_INVALID_ARG (NULL comm_out, MPI_COMM_NULL, a bad
 *         configuration); GS_ERR_UNSUPPORTED (MPI not initialised, or
 *         initialised with less than MPI_THREAD_MULTIPLE: the message names
 *         the level); GS_ERR_PEER_FAILED (another rank could not create its
 *         endpoint); GS_ERR_SYSTEM, GS_ERR_NO_MEMORY, GS_ERR_TIMEOUT.
 * @note Collective over @p mpi_comm and blocking (MPI_Comm_dup and
 *       MPI_Allgather have no deadline). Call it from the thread that makes
 *       the application's other MPI calls on @p mpi_comm, in the same order
 *       on every rank. Destroy the communicator with gs_comm_destroy()
 *       before MPI_Finalize().
 */
GS_API gs_status_t gs_comm_init_mpi(gs_comm_t *comm_out, MPI_Comm mpi_comm, const gs_config_t *cfg);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_MPI_H */
