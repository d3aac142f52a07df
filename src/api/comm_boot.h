/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bootstrap providers of gs_comm_init_env (comm_boot.c): one row each
 * in a table, asked in order; the first that applies to this environment
 * creates the communicator. A provider says who this rank is among how
 * many and how the ranks exchange their transport endpoints: the
 * rendezvous (core/bootstrap.c, from GS_RANK/GS_WORLD_SIZE or the
 * launcher's variables) and MPI (comm_mpi.c, from MPI_COMM_WORLD, built
 * with GS_WITH_MPI). A provider that differs from the rendezvous only in
 * its exchange is a row with the rendezvous's init and its own exchange:
 * an explicit store (GS_STORE, core/bootstrap_store.c) and torchrun's store
 * (the same file), under torchrun.
 */
#ifndef GS_API_COMM_BOOT_H
#define GS_API_COMM_BOOT_H

#include "core/bootstrap.h"
#include "core/config.h"
#include "gradsync/gradsync.h"

typedef struct gs__comm_boot gs__comm_boot_t;

/* Create the communicator through provider @p self: gs_comm_init_env's
 * contract (blocking, collective over the job). @p cfg is the caller's
 * (may be NULL); @p rcfg is cfg resolved over the environment and the
 * launcher when a row before (or this row's applies) needed it, else NULL.
 * Returns what gs_comm_init_env returns. */
typedef gs_status_t (*gs__comm_boot_init_fn_t)(gs_comm_t *comm_out, const gs_config_t *cfg,
                                               const gs__cfg_t *rcfg, const gs__comm_boot_t *self);

struct gs__comm_boot {
    const char *name; /* "mpi", "kv store", "torchrun store", "rendezvous" */
    /* 1 when this provider creates gs_comm_init_env's communicator in the
     * environment @p rcfg was resolved in; NULL: always (the last row). */
    int (*applies)(const gs__cfg_t *rcfg);
    gs__comm_boot_init_fn_t init;
    /* The endpoint exchange init runs (core/bootstrap.h's contract), or
     * NULL when init has its own (MPI's runs over the MPI communicator). */
    gs__boot_exchange_fn_t exchange;
};

/* The rendezvous's init (comm.c): rank and size from the resolved
 * configuration (launcher variables included), the transport, then
 * self->exchange (for the rendezvous, gs__bootstrap_exchange), the
 * connections and the worker. Ignores @p rcfg (it resolves cfg itself). */
gs_status_t gs__comm_init_exchange(gs_comm_t *comm_out, const gs_config_t *cfg,
                                   const gs__cfg_t *rcfg, const gs__comm_boot_t *self);

#endif /* GS_API_COMM_BOOT_H */
