/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Public collective and point-to-point entry points: build the operation
 * descriptor, validate it completely before anything is queued (a bad call
 * changes nothing; coll_check.c), and submit it to the communicator's
 * worker, either waiting (blocking calls, with the request on the stack) or
 * returning a heap request (gs_i* calls, released by gs_wait/gs_test).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/coll_impl.h"
#include "api/comm_impl.h"
#include "compress/codec.h"
#include "core/error.h"

static gs_status_t coll_blocking(const char *fn, gs_comm_t comm, const gs__coll_desc_t *d_in)
{
    struct gs_request req;
    gs__coll_desc_t dv = *d_in;
    gs__coll_desc_t *d = &dv;
    gs_status_t status = gs__coll_validate(fn, comm, d);

    if (status != GS_OK) {
        return status;
    }
    if (gs__group_active() && ((d->kind == GS_COLL_SEND) || (d->kind == GS_COLL_RECV))) {
        return gs__group_add(fn, comm, d); /* posted by gs_group_end() (p2p.c) */
    }
    memset(&req, 0, sizeof(req));
    req.task.run = gs__comm_run_task;
    req.task.test = gs__comm_test_task;
    req.comm = comm;
    d->flags |= GS_DESC_F_BLOCKING;
    req.desc = *d;
    if (((d->kind == GS_COLL_SEND) || (d->kind == GS_COLL_RECV)) && (d->mem == GS_MEM_HOST)) {
        /* Point-to-point stays in flight on the worker. */
        status = gs__worker_submit(&comm->worker, &req.task);
        if (status != GS_OK) {
            return status;
        }
        status = gs__worker_wait(&comm->worker, &req.task);
        if (status != GS_OK) {
            gs__error_copy_in(req.task.errmsg);
        }
        return status;
    }
    return gs__worker_run_blocking(&comm->worker, &req.task);
}

/*
 * A zeroed heap request holding a copy of *d. The caller may free the
 * count and displacement arrays of a v call as soon as it returns, so
 * they are copied into the same allocation, right after the request: the
 * one free() that releases the request (request.c) frees them too.
 * Returns NULL when out of memory.
 */
static struct gs_request *coll_request_alloc(gs_comm_t comm, const gs__coll_desc_t *d)
{
    const size_t n = (size_t)comm->size;
    const size_t head = (sizeof(struct gs_request) + 15u) & ~(size_t)15u;
    const size_t *const src[4] = {d->scounts, d->sdispls, d->rcounts, d->rdispls};
    const size_t **dst[4];
    struct gs_request *req;
    size_t narrays = 0;
    size_t *copy;

    for (int i = 0; i < 4; i++) {
        narrays += (src[i] != NULL);
    }
    req = calloc(1, head + narrays * n * sizeof(size_t));
    if (req == NULL) {
        return NULL;
    }
    req->desc = *d;
    dst[0] = &req->desc.scounts;
    dst[1] = &req->desc.sdispls;
    dst[2] = &req->desc.rcounts;
    dst[3] = &req->desc.rdispls;
    copy = (size_t *)(void *)((uint8_t *)req + head);
    for (int i = 0; i < 4; i++) {
        if (src[i] != NULL) {
            memcpy(copy, src[i], n * sizeof(size_t));
            *dst[i] = copy;
            copy += n;
        }
    }
    return req;
}

static gs_status_t coll_nonblocking(const char *fn, gs_comm_t comm, const gs__coll_desc_t *d_in,
                                    gs_request_t *req_out)
{
    struct gs_request *req;
    gs__coll_desc_t dv = *d_in;
    gs__coll_desc_t *d = &dv;
    gs_status_t status;

    if (req_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: req_out is NULL", fn);
    }
    status = gs__coll_validate(fn, comm, d);
    if (status != GS_OK) {
        return status;
    }
    req = coll_request_alloc(comm, d);
    if (req == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory for a request", fn);
    }
    req->task.run = gs__comm_run_task;
    req->task.test = gs__comm_test_task;
    req->comm = comm;
    status = gs__worker_submit(&comm->worker, &req->task);
    if (status != GS_OK) {
        free(req);
        return status;
    }
    *req_out = req;
    return GS_OK;
}

/* Fields of a caller's options struct, read only when they fit in its size. */
#define OPTS_HAS(_type, _opts, _field)                                                             \
    (((_opts) != NULL) && ((_opts)->size >= offsetof(_type, _field) + sizeof((_opts)->_field)))

/* The options every call understands, from either options struct. */
typedef struct coll_opts {
    gs_algo_t algo;
    const struct gs_codec_config *codec;
    struct gs_ef *ef;
    void *stream;
    unsigned flags;
} coll_opts_t;

/* The codec to run, or NULL for none (absent, NULL, or GS_CODEC_NONE). */
static const gs_codec_config_t *coll_codec(const gs_codec_config_t *cfg)
{
    if ((cfg != NULL) && (cfg->size >= offsetof(gs_codec_config_t, kind) + sizeof(cfg->kind)) &&
        (cfg->kind != GS_CODEC_NONE)) {
        return cfg;
    }
    return NULL;
}

static coll_opts_t coll_opts(const gs_coll_opts_t *o)
{
    coll_opts_t r = {.algo = GS_ALGO_AUTO};

    r.algo = OPTS_HAS(gs_coll_opts_t, o, algo) ? o->algo : GS_ALGO_AUTO;
    r.stream = OPTS_HAS(gs_coll_opts_t, o, stream) ? o->stream : NULL;
    r.flags = OPTS_HAS(gs_coll_opts_t, o, flags) ? o->flags : 0u;
    r.codec = coll_codec(OPTS_HAS(gs_coll_opts_t, o, codec) ? o->codec : NULL);
    r.ef = OPTS_HAS(gs_coll_opts_t, o, ef) ? o->ef : NULL;
    return r;
}

static coll_opts_t coll_allreduce_opts(const gs_allreduce_opts_t *o)
{
    coll_opts_t r = {.algo = GS_ALGO_AUTO};

    r.algo = OPTS_HAS(gs_allreduce_opts_t, o, algo) ? o->algo : GS_ALGO_AUTO;
    r.codec = coll_codec(OPTS_HAS(gs_allreduce_opts_t, o, codec) ? o->codec : NULL);
    r.ef = OPTS_HAS(gs_allreduce_opts_t, o, ef) ? o->ef : NULL;
    r.stream = OPTS_HAS(gs_allreduce_opts_t, o, stream) ? o->stream : NULL;
    r.flags = OPTS_HAS(gs_allreduce_opts_t, o, flags) ? o->flags : 0u;
    return r;
}

#define DESC(...) ((gs__coll_desc_t){__VA_ARGS__})

/* Run d with the options @p o, blocking or not: every entry point ends here
 * (gs_barrier and p2p.c's calls, which have no options, go straight to
 * coll_blocking / coll_nonblocking). */
static gs_status_t coll_submit_o(const char *fn, gs_comm_t comm, gs__coll_desc_t d,
                                 const coll_opts_t *o, gs_request_t *req_out, int nonblocking)
{
    d.algo = o->algo;
    d.codec = o->codec;
    d.ef = o->ef;
    d.stream = o->stream;
    d.flags = o->flags;
    return nonblocking ? coll_nonblocking(fn, comm, &d, req_out) : coll_blocking(fn, comm, &d);
}

/* The same with the options of a gs_coll_opts_t (every call but all-reduce). */
static gs_status_t coll_submit(const char *fn, gs_comm_t comm, gs__coll_desc_t d,
                               const gs_coll_opts_t *opts, gs_request_t *req_out, int nonblocking)
{
    const coll_opts_t o = coll_opts(opts);

    return coll_submit_o(fn, comm, d, &o, req_out, nonblocking);
}

static gs_status_t coll_allreduce(const char *fn, gs_comm_t comm, const void *sendbuf,
                                  void *recvbuf, size_t count, gs_dtype_t dtype, gs_op_t op,
                                  const gs_allreduce_opts_t *opts, gs_request_t *req_out, int nb)
{
    const coll_opts_t o = coll_allreduce_opts(opts);

    return coll_submit_o(fn, comm,
                         DESC(.kind = GS_COLL_ALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
                              .count = count, .dtype = dtype, .op = op),
                         &o, req_out, nb);
}

/* The collectives of count elements per block: broadcast, reduce,
 * allgather, reduce_scatter, alltoall, gather and scatter (@p op and
 * @p root where the collective has them; GS_OP_SUM and 0 otherwise). */
static gs_status_t coll_fixed(const char *fn, gs__coll_kind_t kind, gs_comm_t comm,
                              const void *sendbuf, void *recvbuf, size_t count, gs_dtype_t dtype,
                              gs_op_t op, int root, const gs_coll_opts_t *opts,
                              gs_request_t *req_out, int nb)
{
    return coll_submit(fn, comm,
                       DESC(.kind = kind, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
                            .dtype = dtype, .op = op, .root = root),
                       opts, req_out, nb);
}

static gs_status_t coll_p2p(const char *fn, gs__coll_kind_t kind, gs_comm_t comm, void *buf,
                            size_t count, gs_dtype_t dtype, int peer, uint32_t tag,
                            const gs_coll_opts_t *opts, gs_request_t *req_out, int nb)
{
    return coll_submit(fn, comm,
                       DESC(.kind = kind, .sendbuf = (kind == GS_COLL_SEND) ? buf : NULL,
                            .recvbuf = (kind == GS_COLL_RECV) ? buf : NULL, .count = count,
                            .dtype = dtype, .root = peer, .tag = tag),
                       opts, req_out, nb);
}

gs_status_t gs_allreduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                         gs_dtype_t dtype, gs_op_t op)
{
    return coll_allreduce("gs_allreduce", comm, sendbuf, recvbuf, count, dtype, op, NULL, NULL, 0);
}

gs_status_t gs_allreduce_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                            gs_dtype_t dtype, gs_op_t op, const gs_allreduce_opts_t *opts)
{
    return coll_allreduce("gs_allreduce_ex", comm, sendbuf, recvbuf, count, dtype, op, opts, NULL,
                          0);
}

gs_status_t gs_iallreduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                          gs_dtype_t dtype, gs_op_t op, gs_request_t *req_out)
{
    return coll_allreduce("gs_iallreduce", comm, sendbuf, recvbuf, count, dtype, op, NULL, req_out,
                          1);
}

gs_status_t gs_iallreduce_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                             gs_dtype_t dtype, gs_op_t op, const gs_allreduce_opts_t *opts,
                             gs_request_t *req_out)
{
    return coll_allreduce("gs_iallreduce_ex", comm, sendbuf, recvbuf, count, dtype, op, opts,
                          req_out, 1);
}

gs_status_t gs_broadcast(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int root)
{
    return coll_fixed("gs_broadcast", GS_COLL_BROADCAST, comm, buf, buf, count, dtype, GS_OP_SUM,
                      root, NULL, NULL, 0);
}

gs_status_t gs_broadcast_ex(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int root,
                            const gs_coll_opts_t *opts)
{
    return coll_fixed("gs_broadcast_ex", GS_COLL_BROADCAST, comm, buf, buf, count, dtype, GS_OP_SUM,
                      root, opts, NULL, 0);
}

gs_status_t gs_ibroadcast(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int root,
                          gs_request_t *req_out)
{
    return coll_fixed("gs_ibroadcast", GS_COLL_BROADCAST, comm, buf, buf, count, dtype, GS_OP_SUM,
                      root, NULL, req_out, 1);
}

gs_status_t gs_ibroadcast_ex(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int root,
                             const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_fixed("gs_ibroadcast_ex", GS_COLL_BROADCAST, comm, buf, buf, count, dtype,
                      GS_OP_SUM, root, opts, req_out, 1);
}

gs_status_t gs_reduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                      gs_dtype_t dtype, gs_op_t op, int root)
{
    return coll_fixed("gs_reduce", GS_COLL_REDUCE, comm, sendbuf, recvbuf, count, dtype, op, root,
                      NULL, NULL, 0);
}

gs_status_t gs_reduce_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                         gs_dtype_t dtype, gs_op_t op, int root, const gs_coll_opts_t *opts)
{
    return coll_fixed("gs_reduce_ex", GS_COLL_REDUCE, comm, sendbuf, recvbuf, count, dtype, op,
                      root, opts, NULL, 0);
}

gs_status_t gs_ireduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                       gs_dtype_t dtype, gs_op_t op, int root, gs_request_t *req_out)
{
    return coll_fixed("gs_ireduce", GS_COLL_REDUCE, comm, sendbuf, recvbuf, count, dtype, op, root,
                      NULL, req_out, 1);
}

gs_status_t gs_ireduce_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                          gs_dtype_t dtype, gs_op_t op, int root, const gs_coll_opts_t *opts,
                          gs_request_t *req_out)
{
    return coll_fixed("gs_ireduce_ex", GS_COLL_REDUCE, comm, sendbuf, recvbuf, count, dtype, op,
                      root, opts, req_out, 1);
}

gs_status_t gs_allgather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                         gs_dtype_t dtype)
{
    return coll_fixed("gs_allgather", GS_COLL_ALLGATHER, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, 0, NULL, NULL, 0);
}

gs_status_t gs_allgather_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                            gs_dtype_t dtype, const gs_coll_opts_t *opts)
{
    return coll_fixed("gs_allgather_ex", GS_COLL_ALLGATHER, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, 0, opts, NULL, 0);
}

gs_status_t gs_iallgather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                          gs_dtype_t dtype, gs_request_t *req_out)
{
    return coll_fixed("gs_iallgather", GS_COLL_ALLGATHER, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, 0, NULL, req_out, 1);
}

gs_status_t gs_iallgather_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                             gs_dtype_t dtype, const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_fixed("gs_iallgather_ex", GS_COLL_ALLGATHER, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, 0, opts, req_out, 1);
}

gs_status_t gs_reduce_scatter(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                              gs_dtype_t dtype, gs_op_t op)
{
    return coll_fixed("gs_reduce_scatter", GS_COLL_REDUCE_SCATTER, comm, sendbuf, recvbuf,
                      recvcount, dtype, op, 0, NULL, NULL, 0);
}

gs_status_t gs_reduce_scatter_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                 size_t recvcount, gs_dtype_t dtype, gs_op_t op,
                                 const gs_coll_opts_t *opts)
{
    return coll_fixed("gs_reduce_scatter_ex", GS_COLL_REDUCE_SCATTER, comm, sendbuf, recvbuf,
                      recvcount, dtype, op, 0, opts, NULL, 0);
}

gs_status_t gs_ireduce_scatter(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                               gs_dtype_t dtype, gs_op_t op, gs_request_t *req_out)
{
    return coll_fixed("gs_ireduce_scatter", GS_COLL_REDUCE_SCATTER, comm, sendbuf, recvbuf,
                      recvcount, dtype, op, 0, NULL, req_out, 1);
}

gs_status_t gs_ireduce_scatter_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                  size_t recvcount, gs_dtype_t dtype, gs_op_t op,
                                  const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_fixed("gs_ireduce_scatter_ex", GS_COLL_REDUCE_SCATTER, comm, sendbuf, recvbuf,
                      recvcount, dtype, op, 0, opts, req_out, 1);
}

gs_status_t gs_alltoall(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                        gs_dtype_t dtype)
{
    return coll_fixed("gs_alltoall", GS_COLL_ALLTOALL, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, 0, NULL, NULL, 0);
}

gs_status_t gs_alltoall_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                           gs_dtype_t dtype, const gs_coll_opts_t *opts)
{
    return coll_fixed("gs_alltoall_ex", GS_COLL_ALLTOALL, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, 0, opts, NULL, 0);
}

gs_status_t gs_ialltoall(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                         gs_dtype_t dtype, gs_request_t *req_out)
{
    return coll_fixed("gs_ialltoall", GS_COLL_ALLTOALL, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, 0, NULL, req_out, 1);
}

gs_status_t gs_ialltoall_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                            gs_dtype_t dtype, const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_fixed("gs_ialltoall_ex", GS_COLL_ALLTOALL, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, 0, opts, req_out, 1);
}

gs_status_t gs_barrier(gs_comm_t comm)
{
    return coll_blocking("gs_barrier", comm, &DESC(.kind = GS_COLL_BARRIER));
}

gs_status_t gs_ibarrier(gs_comm_t comm, gs_request_t *req_out)
{
    return coll_nonblocking("gs_ibarrier", comm, &DESC(.kind = GS_COLL_BARRIER), req_out);
}

gs_status_t gs_send(gs_comm_t comm, const void *buf, size_t count, gs_dtype_t dtype, int peer,
                    uint32_t tag)
{
    return coll_p2p("gs_send", GS_COLL_SEND, comm, (void *)(uintptr_t)buf, count, dtype, peer, tag,
                    NULL, NULL, 0);
}

gs_status_t gs_send_ex(gs_comm_t comm, const void *buf, size_t count, gs_dtype_t dtype, int peer,
                       uint32_t tag, const gs_coll_opts_t *opts)
{
    return coll_p2p("gs_send_ex", GS_COLL_SEND, comm, (void *)(uintptr_t)buf, count, dtype, peer,
                    tag, opts, NULL, 0);
}

gs_status_t gs_isend(gs_comm_t comm, const void *buf, size_t count, gs_dtype_t dtype, int peer,
                     uint32_t tag, gs_request_t *req_out)
{
    return coll_p2p("gs_isend", GS_COLL_SEND, comm, (void *)(uintptr_t)buf, count, dtype, peer, tag,
                    NULL, req_out, 1);
}

gs_status_t gs_isend_ex(gs_comm_t comm, const void *buf, size_t count, gs_dtype_t dtype, int peer,
                        uint32_t tag, const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_p2p("gs_isend_ex", GS_COLL_SEND, comm, (void *)(uintptr_t)buf, count, dtype, peer,
                    tag, opts, req_out, 1);
}

gs_status_t gs_recv(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int peer,
                    uint32_t tag)
{
    return coll_p2p("gs_recv", GS_COLL_RECV, comm, buf, count, dtype, peer, tag, NULL, NULL, 0);
}

gs_status_t gs_recv_ex(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int peer,
                       uint32_t tag, const gs_coll_opts_t *opts)
{
    return coll_p2p("gs_recv_ex", GS_COLL_RECV, comm, buf, count, dtype, peer, tag, opts, NULL, 0);
}

gs_status_t gs_irecv(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int peer,
                     uint32_t tag, gs_request_t *req_out)
{
    return coll_p2p("gs_irecv", GS_COLL_RECV, comm, buf, count, dtype, peer, tag, NULL, req_out, 1);
}

gs_status_t gs_irecv_ex(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int peer,
                        uint32_t tag, const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_p2p("gs_irecv_ex", GS_COLL_RECV, comm, buf, count, dtype, peer, tag, opts, req_out,
                    1);
}

/* ------------------------------------------------------------------ */
/* Rooted and variable-size collectives                                */
/* ------------------------------------------------------------------ */

static gs_status_t coll_allgatherv(const char *fn, gs_comm_t comm, const void *sendbuf,
                                   size_t sendcount, void *recvbuf, size_t recvbuf_count,
                                   const size_t *recvcounts, const size_t *displs, gs_dtype_t dtype,
                                   const gs_coll_opts_t *opts, gs_request_t *req_out, int nb)
{
    return coll_submit(fn, comm,
                       DESC(.kind = GS_COLL_ALLGATHERV, .sendbuf = sendbuf, .recvbuf = recvbuf,
                            .count = sendcount, .dtype = dtype, .rcounts = recvcounts,
                            .rdispls = displs, .rcap = recvbuf_count),
                       opts, req_out, nb);
}

static gs_status_t coll_alltoallv(const char *fn, gs_comm_t comm, const void *sendbuf,
                                  size_t sendbuf_count, const size_t *sendcounts,
                                  const size_t *sdispls, void *recvbuf, size_t recvbuf_count,
                                  const size_t *recvcounts, const size_t *rdispls, gs_dtype_t dtype,
                                  const gs_coll_opts_t *opts, gs_request_t *req_out, int nb)
{
    return coll_submit(fn, comm,
                       DESC(.kind = GS_COLL_ALLTOALLV, .sendbuf = sendbuf, .recvbuf = recvbuf,
                            .dtype = dtype, .scounts = sendcounts, .sdispls = sdispls,
                            .rcounts = recvcounts, .rdispls = rdispls, .scap = sendbuf_count,
                            .rcap = recvbuf_count),
                       opts, req_out, nb);
}

static gs_status_t coll_reduce_scatterv(const char *fn, gs_comm_t comm, const void *sendbuf,
                                        void *recvbuf, const size_t *recvcounts, gs_dtype_t dtype,
                                        gs_op_t op, const gs_coll_opts_t *opts,
                                        gs_request_t *req_out, int nb)
{
    return coll_submit(fn, comm,
                       DESC(.kind = GS_COLL_REDUCE_SCATTERV, .sendbuf = sendbuf, .recvbuf = recvbuf,
                            .dtype = dtype, .op = op, .rcounts = recvcounts),
                       opts, req_out, nb);
}

gs_status_t gs_gather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                      gs_dtype_t dtype, int root)
{
    return coll_fixed("gs_gather", GS_COLL_GATHER, comm, sendbuf, recvbuf, count, dtype, GS_OP_SUM,
                      root, NULL, NULL, 0);
}

gs_status_t gs_gather_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                         gs_dtype_t dtype, int root, const gs_coll_opts_t *opts)
{
    return coll_fixed("gs_gather_ex", GS_COLL_GATHER, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, root, opts, NULL, 0);
}

gs_status_t gs_igather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                       gs_dtype_t dtype, int root, gs_request_t *req_out)
{
    return coll_fixed("gs_igather", GS_COLL_GATHER, comm, sendbuf, recvbuf, count, dtype, GS_OP_SUM,
                      root, NULL, req_out, 1);
}

gs_status_t gs_igather_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                          gs_dtype_t dtype, int root, const gs_coll_opts_t *opts,
                          gs_request_t *req_out)
{
    return coll_fixed("gs_igather_ex", GS_COLL_GATHER, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, root, opts, req_out, 1);
}

gs_status_t gs_scatter(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                       gs_dtype_t dtype, int root)
{
    return coll_fixed("gs_scatter", GS_COLL_SCATTER, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, root, NULL, NULL, 0);
}

gs_status_t gs_scatter_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                          gs_dtype_t dtype, int root, const gs_coll_opts_t *opts)
{
    return coll_fixed("gs_scatter_ex", GS_COLL_SCATTER, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, root, opts, NULL, 0);
}

gs_status_t gs_iscatter(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                        gs_dtype_t dtype, int root, gs_request_t *req_out)
{
    return coll_fixed("gs_iscatter", GS_COLL_SCATTER, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, root, NULL, req_out, 1);
}

gs_status_t gs_iscatter_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                           gs_dtype_t dtype, int root, const gs_coll_opts_t *opts,
                           gs_request_t *req_out)
{
    return coll_fixed("gs_iscatter_ex", GS_COLL_SCATTER, comm, sendbuf, recvbuf, count, dtype,
                      GS_OP_SUM, root, opts, req_out, 1);
}

gs_status_t gs_allgatherv(gs_comm_t comm, const void *sendbuf, size_t sendcount, void *recvbuf,
                          size_t recvbuf_count, const size_t *recvcounts, const size_t *displs,
                          gs_dtype_t dtype)
{
    return coll_allgatherv("gs_allgatherv", comm, sendbuf, sendcount, recvbuf, recvbuf_count,
                           recvcounts, displs, dtype, NULL, NULL, 0);
}

gs_status_t gs_allgatherv_ex(gs_comm_t comm, const void *sendbuf, size_t sendcount, void *recvbuf,
                             size_t recvbuf_count, const size_t *recvcounts, const size_t *displs,
                             gs_dtype_t dtype, const gs_coll_opts_t *opts)
{
    return coll_allgatherv("gs_allgatherv_ex", comm, sendbuf, sendcount, recvbuf, recvbuf_count,
                           recvcounts, displs, dtype, opts, NULL, 0);
}

gs_status_t gs_iallgatherv(gs_comm_t comm, const void *sendbuf, size_t sendcount, void *recvbuf,
                           size_t recvbuf_count, const size_t *recvcounts, const size_t *displs,
                           gs_dtype_t dtype, gs_request_t *req_out)
{
    return coll_allgatherv("gs_iallgatherv", comm, sendbuf, sendcount, recvbuf, recvbuf_count,
                           recvcounts, displs, dtype, NULL, req_out, 1);
}

gs_status_t gs_alltoallv(gs_comm_t comm, const void *sendbuf, size_t sendbuf_count,
                         const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                         size_t recvbuf_count, const size_t *recvcounts, const size_t *rdispls,
                         gs_dtype_t dtype)
{
    return coll_alltoallv("gs_alltoallv", comm, sendbuf, sendbuf_count, sendcounts, sdispls,
                          recvbuf, recvbuf_count, recvcounts, rdispls, dtype, NULL, NULL, 0);
}

gs_status_t gs_alltoallv_ex(gs_comm_t comm, const void *sendbuf, size_t sendbuf_count,
                            const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                            size_t recvbuf_count, const size_t *recvcounts, const size_t *rdispls,
                            gs_dtype_t dtype, const gs_coll_opts_t *opts)
{
    return coll_alltoallv("gs_alltoallv_ex", comm, sendbuf, sendbuf_count, sendcounts, sdispls,
                          recvbuf, recvbuf_count, recvcounts, rdispls, dtype, opts, NULL, 0);
}

gs_status_t gs_ialltoallv(gs_comm_t comm, const void *sendbuf, size_t sendbuf_count,
                          const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                          size_t recvbuf_count, const size_t *recvcounts, const size_t *rdispls,
                          gs_dtype_t dtype, gs_request_t *req_out)
{
    return coll_alltoallv("gs_ialltoallv", comm, sendbuf, sendbuf_count, sendcounts, sdispls,
                          recvbuf, recvbuf_count, recvcounts, rdispls, dtype, NULL, req_out, 1);
}

gs_status_t gs_ialltoallv_ex(gs_comm_t comm, const void *sendbuf, size_t sendbuf_count,
                             const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                             size_t recvbuf_count, const size_t *recvcounts, const size_t *rdispls,
                             gs_dtype_t dtype, const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_alltoallv("gs_ialltoallv_ex", comm, sendbuf, sendbuf_count, sendcounts, sdispls,
                          recvbuf, recvbuf_count, recvcounts, rdispls, dtype, opts, req_out, 1);
}

gs_status_t gs_reduce_scatterv(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                               const size_t *recvcounts, gs_dtype_t dtype, gs_op_t op)
{
    return coll_reduce_scatterv("gs_reduce_scatterv", comm, sendbuf, recvbuf, recvcounts, dtype, op,
                                NULL, NULL, 0);
}

gs_status_t gs_reduce_scatterv_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                  const size_t *recvcounts, gs_dtype_t dtype, gs_op_t op,
                                  const gs_coll_opts_t *opts)
{
    return coll_reduce_scatterv("gs_reduce_scatterv_ex", comm, sendbuf, recvbuf, recvcounts, dtype,
                                op, opts, NULL, 0);
}

gs_status_t gs_ireduce_scatterv(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                const size_t *recvcounts, gs_dtype_t dtype, gs_op_t op,
                                gs_request_t *req_out)
{
    return coll_reduce_scatterv("gs_ireduce_scatterv", comm, sendbuf, recvbuf, recvcounts, dtype,
                                op, NULL, req_out, 1);
}

gs_status_t gs_ireduce_scatterv_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                   const size_t *recvcounts, gs_dtype_t dtype, gs_op_t op,
                                   const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_reduce_scatterv("gs_ireduce_scatterv_ex", comm, sendbuf, recvbuf, recvcounts, dtype,
                                op, opts, req_out, 1);
}

gs_status_t gs_iallgatherv_ex(gs_comm_t comm, const void *sendbuf, size_t sendcount, void *recvbuf,
                              size_t recvbuf_count, const size_t *recvcounts, const size_t *displs,
                              gs_dtype_t dtype, const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_allgatherv("gs_iallgatherv_ex", comm, sendbuf, sendcount, recvbuf, recvbuf_count,
                           recvcounts, displs, dtype, opts, req_out, 1);
}

/* The submit paths for p2p.c (coll_impl.h). */
gs_status_t gs__coll_blocking(const char *fn, gs_comm_t comm, const gs__coll_desc_t *d)
{
    return coll_blocking(fn, comm, d);
}

gs_status_t gs__coll_nonblocking(const char *fn, gs_comm_t comm, const gs__coll_desc_t *d,
                                 gs_request_t *req_out)
{
    return coll_nonblocking(fn, comm, d, req_out);
}
