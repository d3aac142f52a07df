/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MPI transport: gradsync's tagged point-to-point messages over MPI
 * point-to-point on a communicator of its own (a duplicate of the
 * application's, or one made with MPI_Comm_create_group), so gradsync
 * traffic never matches the application's receives. It does not implement
 * collectives (mpi_coll.c hands the native ones to MPI) and never blocks:
 * every MPI call is a non-blocking start or test, and progress loops over
 * them until something completes or the deadline.
 *
 * This file holds the ops table and the instance lifetime: init, address,
 * communicator (adopted or created), connect, abort, wake, finalize. The
 * header format is in mpi_wire.c, matching in mpi_match.c, the request
 * calls in mpi_request.c and polling in mpi_progress.c (mpi_internal.h).
 *
 * Failures: the communicator uses MPI_ERRORS_RETURN; an MPI error on a
 * request fails it with GS_ERR_PEER_FAILED naming the peer. Open MPI
 * normally kills the whole job when a rank dies (docs/cluster.md); when it
 * does not, the algorithms' deadlines turn the silence into GS_ERR_TIMEOUT.
 */
#include "transport/mpi/mpi_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/msg_limit.h"

static gs_status_t mpi_tp_init(const gs__tp_params_t *params, gs__tp_t **tp_out)
{
    gs__tp_t *tp;
    gs_status_t status;

    if ((params == NULL) || (tp_out == NULL) || (params->size < 1) || (params->rank < 0) ||
        (params->rank >= params->size)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "mpi: bad transport parameters");
    }
    status = gs__mpi_env_acquire();
    if (status != GS_OK) {
        return status;
    }
    tp = calloc(1, sizeof(*tp));
    if (tp != NULL) {
        tp->send_seq = calloc((size_t)params->size, sizeof(*tp->send_seq));
        tp->recv_seq = calloc((size_t)params->size, sizeof(*tp->recv_seq));
        tp->peer_err = calloc((size_t)params->size, sizeof(*tp->peer_err));
    }
    if ((tp == NULL) || (tp->send_seq == NULL) || (tp->recv_seq == NULL) ||
        (tp->peer_err == NULL)) {
        if (tp != NULL) {
            free(tp->send_seq);
            free(tp->recv_seq);
            free(tp->peer_err);
            free(tp);
        }
        gs__mpi_env_release();
        return gs__error_set(GS_ERR_NO_MEMORY, "mpi: out of memory for %d ranks", params->size);
    }
    tp->rank = params->rank;
    tp->size = params->size;
    tp->comm_id = params->comm_id;
    tp->comm = MPI_COMM_NULL;
    tp->counters = params->counters;
    tp->max_msg =
        (params->max_message_bytes != 0) ? params->max_message_bytes : GS_MAX_MESSAGE_BYTES_DEFAULT;
    gs__match_budget_init(&tp->held, MPI_UNEXP_MAX, MPI_UNEXP_MAX_MSGS);
    gs__match_init(&tp->unexp);
    atomic_init(&tp->aborted, 0);
    atomic_init(&tp->woken, 0);
    *tp_out = tp;
    return GS_OK;
}

static gs_status_t mpi_tp_get_address(gs__tp_t *tp, char *buf, size_t len)
{
    int wrank = 0;
    int n;

    (void)tp;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    n = snprintf(buf, len, "mpi:%d", wrank);
    if ((n < 0) || ((size_t)n >= len)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "mpi: address buffer of %zu bytes is too small",
                             len);
    }
    return GS_OK;
}

gs_status_t gs__mpi_tp_adopt_comm(gs__tp_t *tp, MPI_Comm comm)
{
    int rank = -1;
    int size = 0;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if ((rank != tp->rank) || (size != tp->size)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "mpi: communicator has rank %d of %d, gradsync expected %d of %d",
                             rank, size, tp->rank, tp->size);
    }
    tp->comm = comm;
    return GS_OK;
}

MPI_Comm gs__mpi_tp_comm(const gs__tp_t *tp)
{
    return tp->comm;
}

/* Build the communicator from the members' MPI_COMM_WORLD ranks. Collective
 * over the members only (MPI_Comm_create_group), blocking. */
static gs_status_t create_comm(gs__tp_t *tp, char (*addrs)[GS_TP_ADDR_MAX])
{
    MPI_Group world_group;
    MPI_Group group;
    MPI_Comm comm = MPI_COMM_NULL;
    int wsize = 0;
    int *wranks;
    int ret;

    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    wranks = malloc((size_t)tp->size * sizeof(int));
    if (wranks == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "mpi: out of memory");
    }
    for (int i = 0; i < tp->size; i++) {
        char *end = NULL;
        long v;

        addrs[i][GS_TP_ADDR_MAX - 1] = '\0';
        v = (strncmp(addrs[i], "mpi:", 4) == 0) ? strtol(addrs[i] + 4, &end, 10) : -1;
        if ((end == NULL) || (*end != '\0') || (v < 0) || (v >= wsize)) {
            free(wranks);
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "mpi: rank %d published the address \"%.40s\", not an MPI "
                                 "endpoint (do all ranks use GS_TRANSPORT=mpi?)",
                                 i, addrs[i]);
        }
        wranks[i] = (int)v;
    }
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    ret = MPI_Group_incl(world_group, tp->size, wranks, &group);
    free(wranks);
    MPI_Group_free(&world_group);
    if (ret != MPI_SUCCESS) {
        return gs__error_set(GS_ERR_INVALID_ARG, "mpi: MPI_Group_incl failed: %s",
                             gs__mpi_errstr(ret));
    }
    /* The tag only has to differ between concurrent creations over
     * overlapping groups; every member derives the same one. */
    ret = MPI_Comm_create_group(MPI_COMM_WORLD, group, (int)(tp->comm_id & 0x3fff), &comm);
    MPI_Group_free(&group);
    if ((ret != MPI_SUCCESS) || (comm == MPI_COMM_NULL)) {
        return gs__error_set(GS_ERR_PEER_FAILED, "mpi: MPI_Comm_create_group failed: %s",
                             gs__mpi_errstr(ret));
    }
    return gs__mpi_tp_adopt_comm(tp, comm);
}

static gs_status_t mpi_tp_connect(gs__tp_t *tp, char (*addrs)[GS_TP_ADDR_MAX],
                                  const uint64_t *hosts, uint64_t deadline_ns)
{
    gs_status_t status;

    (void)hosts;       /* MPI knows its own topology */
    (void)deadline_ns; /* MPI communicator creation is blocking (see docs/cluster.md) */
    if (tp->comm == MPI_COMM_NULL) {
        status = create_comm(tp, addrs);
        if (status != GS_OK) {
            return status;
        }
    }
    MPI_Comm_set_errhandler(tp->comm, MPI_ERRORS_RETURN);
    tp->connected = 1;
    GS_INFO(NET, "mpi: rank %d of %d connected", tp->rank, tp->size);
    return GS_OK;
}

static gs_status_t mpi_tp_abort(gs__tp_t *tp)
{
    atomic_store(&tp->aborted, 1);
    return GS_OK;
}

static gs_status_t mpi_tp_wake(gs__tp_t *tp)
{
    atomic_store(&tp->woken, 1);
    return GS_OK;
}

static gs_status_t mpi_tp_finalize(gs__tp_t *tp)
{
    const uint64_t deadline = gs__now_ns() + 2000000000ull;

    if (tp == NULL) {
        return GS_OK;
    }
    /* Let headers and orphaned requests finish briefly, then hand the rest
     * to MPI (MPI_Request_free) so that the communicator can be freed. */
    while (tp->connected && ((tp->hdrq != NULL) || (tp->orphans != NULL)) &&
           (gs__now_ns() < deadline) && !atomic_load(&tp->aborted)) {
        gs__mpi_poll_messages(tp);
        while (tp->hdrq != NULL) {
            int flag = 0;
            MPI_Status st;
            mpi_hdrq_t *q = tp->hdrq;
            MPI_Test(&q->mr, &flag, &st);
            if (!flag) {
                break;
            }
            tp->hdrq = q->next;
            free(q);
        }
        gs__mpi_nap(1000000);
    }
    while (tp->hdrq != NULL) {
        mpi_hdrq_t *q = tp->hdrq;
        tp->hdrq = q->next;
        if (q->mr != MPI_REQUEST_NULL) {
            MPI_Request_free(&q->mr);
        }
        free(q); /* NOTE: an unfinished header receive may still write here (bounded wait above) */
    }
    while (tp->orphans != NULL) {
        mpi_orphan_t *o = tp->orphans;
        tp->orphans = o->next;
        for (int i = 0; i < o->rs.n; i++) {
            if (o->rs.mr[i] != MPI_REQUEST_NULL) {
                MPI_Request_free(&o->rs.mr[i]);
            }
        }
        gs__mpi_reqset_free(&o->rs);
        free(o->to_free);
        free(o);
    }
    while (tp->unexp.head != NULL) {
        mpi_msg_t *m = (mpi_msg_t *)tp->unexp.head;
        for (int i = 0; i < m->rs.n; i++) {
            if (m->rs.mr[i] != MPI_REQUEST_NULL) {
                MPI_Request_free(&m->rs.mr[i]);
            }
        }
        gs__mpi_msg_free(tp, m);
    }
    gs__match_free(&tp->unexp);
    if (tp->comm != MPI_COMM_NULL) {
        MPI_Comm_free(&tp->comm);
    }
    free(tp->send_seq);
    free(tp->recv_seq);
    free(tp->peer_err);
    free(tp);
    gs__mpi_env_release();
    return GS_OK;
}

const gs__transport_ops_t gs__mpi_ops = {
    .name = "mpi",
    .abi_size = sizeof(gs__transport_ops_t),
    .caps = GS_TP_CAP_HOST_MEM | GS_TP_CAP_ANY_SOURCE | GS_TP_CAP_NATIVE_COLL | GS_TP_CAP_ORDERED |
            GS_TP_CAP_NATIVE_DEVICE,
    .init = mpi_tp_init,
    .get_address = mpi_tp_get_address,
    .connect = mpi_tp_connect,
    .isend = gs__mpi_tp_isend,
    .irecv = gs__mpi_tp_irecv,
    .test = gs__mpi_tp_test,
    .progress = gs__mpi_tp_progress,
    .req_release = gs__mpi_tp_req_release,
    .abort = mpi_tp_abort,
    .finalize = mpi_tp_finalize,
    .wake = mpi_tp_wake,
    .probe = gs__mpi_tp_probe,
    .coll_allreduce = gs__mpi_coll_allreduce,
    .coll_bcast = gs__mpi_coll_bcast,
    .coll_allgather = gs__mpi_coll_allgather,
    .coll_reduce_scatter = gs__mpi_coll_reduce_scatter,
};
