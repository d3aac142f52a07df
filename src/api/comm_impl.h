/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The communicator and request structs behind the public handles. A
 * communicator is a set of sub-objects (configuration, transport, worker,
 * algorithm context, counters, error state), each owned by its module.
 */
#ifndef GS_API_COMM_IMPL_H
#define GS_API_COMM_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "algo/diag/diag.h"
#include "algo/select/select.h"
#include "core/auth.h"
#include "core/config.h"
#include "core/counters.h"
#include "core/worker.h"
#include "transport/transport.h"

/* The error that failed a communicator (sticky), readable from any thread. */
typedef struct gs__comm_error {
    atomic_int status; /* gs_status_t; GS_OK while healthy */
    pthread_mutex_t mu;
    char msg[GS_ERROR_MSG_MAX];
} gs__comm_error_t;

struct gs_comm {
    gs__cfg_t cfg; /* resolved configuration (rank and size of this comm) */
    int rank;
    int size;
    uint64_t comm_id;
    uint64_t job_id;
    atomic_uint split_seq; /* splits made from this comm, for child comm ids */
    atomic_int destroying; /* gs_comm_destroy has begun: in-flight p2p is cancelled */
    gs__transport_t tr;
    gs__worker_t worker;
    gs__algo_ctx_t actx;   /* used by the worker thread only */
    gs__algo_select_t sel; /* GS_ALGO, the cost model, what the planner logged */
    uint32_t coll_seq;     /* worker thread only */
    int dev_inflight;      /* worker thread only: non-blocking device calls in flight */
    gs__counters_t counters;
    gs__comm_error_t err;
    gs__auth_t auth; /* the job token (core/auth.h), from cfg; off: none */
    /* gs_comm_get_unique_id on rank 0 (comm_grow.c): the grow listener, open
     * from the first id to the destroy, and the nonce of the latest id. */
    struct {
        pthread_mutex_t mu;
        int fd; /* -1: none */
        char addr[GS_SOCK_ADDR_MAX];
        uint8_t nonce[GS_AUTH_NONCE_BYTES];
    } grow;
};

struct gs_request {
    gs__task_t task; /* first: the worker sees only this */
    gs_comm_t comm;
    gs__coll_desc_t desc;
    gs__algo_req_t p2p;    /* point-to-point: the transport request in flight */
    uint64_t p2p_deadline; /* point-to-point: fails with GS_ERR_TIMEOUT after this */
};

/* Record the error that fails @p comm (first one wins). */
void gs__comm_fail(gs_comm_t comm, gs_status_t status, const char *msg);

/* Building blocks of communicator creation (comm.c), shared with the other
 * bootstrap paths (MPI) and the children (split, dup, shrink): allocate a
 * zeroed comm with its error state; free it (finalizing its transport
 * first when it still has one: gs_comm_destroy finalizes it itself);
 * create comm->tr from comm->cfg, rank, size, job_id and comm_id; connect
 * to addrs (one per rank), build the host table from hosts (every rank's
 * host id, core/host.h) and start the worker. Each returns GS_OK or the
 * failing step's status. */
gs_comm_t gs__comm_alloc(void);
void gs__comm_free(gs_comm_t comm);

/* A rank that joins a communicator (gs_comm_grow on a new rank,
 * comm_grow.c): gs_comm_init's steps with the job and communicator ids the
 * join gives and its exchange instead of a bootstrap provider's. */
typedef struct gs__comm_join gs__comm_join_t;
struct gs__comm_join {
    uint64_t job_id;
    uint64_t comm_id;
    gs_status_t (*exchange)(const gs__comm_join_t *join, const gs__cfg_t *cfg,
                            const gs__auth_t *auth, const volatile int *abort_flag,
                            const char *my_addr, char (*addrs_out)[GS_SOCK_ADDR_MAX],
                            uint64_t *hosts_out);
    const void *ctx; /* the exchange's own */
};
gs_status_t gs__comm_init_join(gs_comm_t *comm_out, const gs_config_t *cfg,
                               const gs__comm_join_t *join);
gs_status_t gs__comm_transport_init(gs_comm_t comm);
gs_status_t gs__comm_start(gs_comm_t comm, char (*addrs)[GS_SOCK_ADDR_MAX], const uint64_t *hosts);

/* Children made by some of the parent's ranks only (comm_members.c): what
 * gs_comm_shrink and gs_comm_create_group share. Run on the parent's worker
 * thread (a gs__task_t), never beside the parent's own operations. */
typedef struct gs__members {
    const char *fn;                  /* the public call, for errors */
    gs_comm_t comm;                  /* the parent */
    gs_comm_t child;                 /* cfg, rank and size set; its transport is created here */
    const uint8_t *out;              /* parent-size flags: 1 = not a member */
    int coord;                       /* the parent rank that gathers and hands out */
    uint64_t tag_addr;               /* a member's endpoint, to the coordinator */
    uint64_t tag_table;              /* the table, from the coordinator */
    uint64_t deadline;               /* of the whole exchange */
    char (*addrs)[GS_SOCK_ADDR_MAX]; /* out: child-size endpoints */
    uint64_t *hosts;                 /* out: child-size host ids */
} gs__members_t;

/* Wait for n requests (NULL ones skipped) until all finished or @p
 * deadline, each with its own outcome: st[i] (GS_ERR_TIMEOUT when it did
 * not finish) and nbytes[i]; releases every request. GS_ERR_ABORTED when the
 * transport was aborted, else GS_OK. */
gs_status_t gs__comm_wait_each(gs_comm_t comm, const char *fn, gs__algo_req_t *reqs, size_t *nbytes,
                               gs_status_t *st, int n, uint64_t deadline);

/* Create the child's transport and exchange endpoints among the members:
 * the coordinator gathers them in new-rank (parent-rank) order and hands
 * the table out. reqs, nbytes and st have parent-size entries. Fills
 * m->addrs and m->hosts; returns GS_OK or why a member has none. */
gs_status_t gs__comm_members_exchange(const gs__members_t *m, gs__algo_req_t *reqs, size_t *nbytes,
                                      gs_status_t *st);

#ifdef GS_WITH_CUDA
/* Before a call with device buffers runs (comm_cuda.c): the device context
 * of @p comm is set up (collective, on the first such call) and the call's
 * device is the communicator's. Returns GS_OK or the setup's error. */
gs_status_t gs__comm_dev_ready(gs_comm_t comm, const gs__coll_desc_t *d);

/* gs_comm_split's part for device buffers: when @p parent has an NCCL
 * communicator, split it (ncclCommSplit; collective over the parent, every
 * rank calls it, color < 0 and ranks whose child failed too) and give the
 * child (when not NULL) a device context that already has it. Returns GS_OK
 * (also when the parent has no NCCL: the child sets up on its first device
 * call) or the split's error. */
gs_status_t gs__comm_dev_split(gs_comm_t parent, gs_comm_t child, int color, int key);
#endif

/* The executor (comm_exec.c). The task body every request runs on the
 * worker thread, and the test of a point-to-point request that run left in
 * flight: both apply the sticky-error rule (a failure of peer, comm or
 * internal scope is recorded with gs__comm_fail and fails every later
 * call). gs__comm_worker_hooks fills the worker's hooks for @p comm (idle:
 * the transport's progress; wake: its wake-up, when it has one; tick: its
 * heartbeat, when GS_HEARTBEAT_MS is on and the transport beats). */
gs_status_t gs__comm_run_task(gs__task_t *task, void *ctx);
gs_status_t gs__comm_test_task(gs__task_t *task, void *ctx);
void gs__comm_worker_hooks(gs_comm_t comm, gs__worker_hooks_t *hooks);

#endif /* GS_API_COMM_IMPL_H */
