/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MPI transport (mpi_transport.c and the files mpi_internal.h lists,
 * mpi_coll.c) and the process-wide MPI ownership it shares with the MPI
 * bootstrap (mpi_env.c). Compiled only when
 * the build has MPI (GS_WITH_MPI). This header includes <mpi.h>; it is
 * included only by the MPI transport files, transport.c and
 * src/api/comm_mpi.c.
 */
#ifndef GS_TRANSPORT_MPI_MPI_TRANSPORT_H
#define GS_TRANSPORT_MPI_MPI_TRANSPORT_H

#include <mpi.h>

#include "transport/transport.h"

extern const gs__transport_ops_t gs__mpi_ops;

/*
 * Make sure MPI is initialised with MPI_THREAD_MULTIPLE (the worker thread
 * of every communicator calls MPI while the application may call it too)
 * and count one user. When MPI is not initialised yet, gradsync calls
 * MPI_Init_thread itself and then owns it: the last gs__mpi_env_release
 * calls MPI_Finalize. An MPI the application initialised is never
 * finalized by gradsync. Blocking (MPI_Init_thread); call from the
 * application thread. Returns GS_OK, GS_ERR_UNSUPPORTED (the library
 * provides a lower thread level, or MPI was already finalized), GS_ERR_SYSTEM
 * (MPI_Init_thread failed).
 */
gs_status_t gs__mpi_env_acquire(void);

/* Drop one user; MPI_Finalize when it was the last and gradsync owns MPI. */
void gs__mpi_env_release(void);

/* Text of an MPI error code, for error messages (thread-local buffer). */
const char *gs__mpi_errstr(int code);

/*
 * Give a transport instance (created by gs__mpi_ops.init, not yet
 * connected) the MPI communicator to use; the transport takes ownership and
 * frees it in finalize. Without it, connect builds one from the addresses
 * with MPI_Comm_create_group over MPI_COMM_WORLD (the path of gs_comm_split).
 * Returns GS_OK or GS_ERR_INVALID_ARG (size or rank differ from the comm's).
 */
gs_status_t gs__mpi_tp_adopt_comm(gs__tp_t *tp, MPI_Comm comm);

/* The communicator of a connected instance (for the native collectives). */
MPI_Comm gs__mpi_tp_comm(const gs__tp_t *tp);

/* Native collectives (mpi_coll.c): the optional slots of gs__mpi_ops. */
gs_status_t gs__mpi_coll_allreduce(gs__tp_t *tp, const void *sendbuf, void *recvbuf, size_t count,
                                   gs_dtype_t dtype, gs_op_t op, uint64_t deadline_ns);
gs_status_t gs__mpi_coll_bcast(gs__tp_t *tp, void *buf, size_t count, gs_dtype_t dtype, int root,
                               uint64_t deadline_ns);
gs_status_t gs__mpi_coll_allgather(gs__tp_t *tp, const void *sendbuf, void *recvbuf, size_t count,
                                   gs_dtype_t dtype, uint64_t deadline_ns);
gs_status_t gs__mpi_coll_reduce_scatter(gs__tp_t *tp, const void *sendbuf, void *recvbuf,
                                        size_t count, gs_dtype_t dtype, gs_op_t op,
                                        uint64_t deadline_ns);

/* Wait for an MPI request with a deadline, polling politely; on timeout or
 * abort the request is left to MPI (MPI_Request_free). Worker thread only.
 * Returns GS_OK, GS_ERR_TIMEOUT, GS_ERR_ABORTED, GS_ERR_PEER_FAILED. */
gs_status_t gs__mpi_tp_wait(gs__tp_t *tp, MPI_Request *mreq, uint64_t deadline_ns,
                            const char *what);

#endif /* GS_TRANSPORT_MPI_MPI_TRANSPORT_H */
