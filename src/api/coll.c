/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Public collective and point-to-point entry points: validate every
 * argument before anything is queued (a bad call changes nothing), build the
 * operation descriptor, and submit it to the communicator's worker, either
 * waiting (blocking calls, with the request on the stack) or returning a
 * heap request (gs_i* calls, released by gs_wait/gs_test).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/comm_impl.h"
#include "compress/codec.h"
#include "core/dtype.h"
#include "core/error.h"

/* Reject a message of more than 2^50 bytes (the wire's limit is 2^44 per
 * slice; this keeps every byte computation far from overflow). */
#define COLL_MAX_BYTES (1ull << 50)

static gs_status_t coll_check_comm(const char *fn, gs_comm_t comm)
{
    gs_status_t sticky;

    if (comm == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    }
    sticky = (gs_status_t)atomic_load(&comm->err.status);
    if (sticky != GS_OK) {
        pthread_mutex_lock(&comm->err.mu);
        gs__error_copy_in(comm->err.msg);
        pthread_mutex_unlock(&comm->err.mu);
        return sticky;
    }
    return GS_OK;
}

/* Validate dtype/op, and that count elements times @p mult fit. */
static gs_status_t coll_check_data(const char *fn, gs_comm_t comm, size_t count, size_t mult,
                                   gs_dtype_t dtype, int check_op, gs_op_t op)
{
    size_t esize;

    if (((unsigned)dtype >= GS_DTYPE_COUNT)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: unknown dtype %d", fn, (int)dtype);
    }
    if (check_op && ((unsigned)op >= GS_OP_COUNT)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: unknown op %d", fn, (int)op);
    }
    if (check_op && !gs__dtype_op_valid(dtype, op)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: op %s is not defined for dtype %s (avg needs a float type)", fn,
                             gs__op_name(op), gs__dtype_name(dtype));
    }
    esize = gs__dtype_size(dtype);
    if ((count > COLL_MAX_BYTES / esize / mult)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: count %zu of %s across %d ranks overflows the %llu-byte limit",
                             fn, count, gs__dtype_name(dtype), comm->size,
                             (unsigned long long)COLL_MAX_BYTES);
    }
    return GS_OK;
}

static gs_status_t coll_check_buf(const char *fn, const char *name, const void *buf, size_t count)
{
    if ((buf == NULL) && (count > 0)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: %s is NULL but count is %zu", fn, name,
                             count);
    }
    return GS_OK;
}

static gs_status_t coll_check_rank(const char *fn, const char *name, gs_comm_t comm, int rank)
{
    if ((rank < 0) || (rank >= comm->size)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: %s %d is out of range (communicator of %d)",
                             fn, name, rank, comm->size);
    }
    return GS_OK;
}

/* A compressed all-reduce: float data, sum or avg, a valid codec, a matching ef. */
static gs_status_t coll_check_codec(const char *fn, const gs_coll_desc_t *d)
{
    gs_codec_resolved_t rc;
    gs_status_t status;

    if (!gs__dtype_is_float(d->dtype) || ((d->op != GS_OP_SUM) && (d->op != GS_OP_AVG))) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: a codec needs a float dtype and GS_OP_SUM or GS_OP_AVG, not %s "
                             "and %s",
                             fn, gs__dtype_name(d->dtype), gs__op_name(d->op));
    }
    if (d->algo != GS_ALGO_AUTO) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: opts->algo must be GS_ALGO_AUTO with a codec (compressed "
                             "all-reduce has its own algorithm)",
                             fn);
    }
    status = gs__codec_resolve(d->codec, &rc);
    if (status != GS_OK) {
        return status;
    }
    if ((d->ef != NULL) && ((d->ef->count != d->count) || (d->ef->dtype != d->dtype))) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: opts->ef was made for %zu elements of %s, not %zu of %s", fn,
                             d->ef->count, gs__dtype_name(d->ef->dtype), d->count,
                             gs__dtype_name(d->dtype));
    }
    return GS_OK;
}

/* Validate a descriptor completely; returns GS_OK or the first problem. */
static gs_status_t coll_validate(const char *fn, gs_comm_t comm, const gs_coll_desc_t *d)
{
    const size_t n = (size_t)((comm != NULL) ? comm->size : 1);
    gs_status_t status = coll_check_comm(fn, comm);

    if (status != GS_OK) {
        return status;
    }
    switch (d->kind) {
    case GS_COLL_ALLREDUCE:
        status = coll_check_data(fn, comm, d->count, 1, d->dtype, 1, d->op);
        if (status == GS_OK) {
            status = coll_check_buf(fn, "sendbuf", d->sendbuf, d->count);
        }
        if (status == GS_OK) {
            status = coll_check_buf(fn, "recvbuf", d->recvbuf, d->count);
        }
        if ((status == GS_OK) && (d->codec != NULL)) {
            status = coll_check_codec(fn, d);
        }
        if ((status == GS_OK) && !gs__algo_offers(d->kind, d->algo)) {
            status = gs__error_set(GS_ERR_UNSUPPORTED, "%s: opts->algo %d does not implement %s",
                                   fn, (int)d->algo, gs__coll_name(d->kind));
        }
        break;
    case GS_COLL_BROADCAST:
        status = coll_check_data(fn, comm, d->count, 1, d->dtype, 0, GS_OP_SUM);
        if (status == GS_OK) {
            status = coll_check_buf(fn, "buf", d->recvbuf, d->count);
        }
        if (status == GS_OK) {
            status = coll_check_rank(fn, "root", comm, d->root);
        }
        break;
    case GS_COLL_REDUCE:
        status = coll_check_data(fn, comm, d->count, 1, d->dtype, 1, d->op);
        if (status == GS_OK) {
            status = coll_check_rank(fn, "root", comm, d->root);
        }
        if (status == GS_OK) {
            status = coll_check_buf(fn, "sendbuf", d->sendbuf, d->count);
        }
        if ((status == GS_OK) && (comm->rank == d->root)) {
            status = coll_check_buf(fn, "recvbuf (at the root)", d->recvbuf, d->count);
        }
        break;
    case GS_COLL_ALLGATHER:
    case GS_COLL_REDUCE_SCATTER:
    case GS_COLL_ALLTOALL:
        status = coll_check_data(fn, comm, d->count, n, d->dtype, d->kind == GS_COLL_REDUCE_SCATTER,
                                 d->op);
        if (status == GS_OK) {
            status = coll_check_buf(fn, "sendbuf", d->sendbuf, d->count);
        }
        if (status == GS_OK) {
            status = coll_check_buf(fn, "recvbuf", d->recvbuf, d->count);
        }
        break;
    case GS_COLL_BARRIER:
        break;
    case GS_COLL_SEND:
    case GS_COLL_RECV:
        status = coll_check_data(fn, comm, d->count, 1, d->dtype, 0, GS_OP_SUM);
        if (status == GS_OK) {
            status = coll_check_buf(fn, "buf", d->kind == GS_COLL_SEND ? d->sendbuf : d->recvbuf,
                                    d->count);
        }
        if ((status == GS_OK) && !((d->kind == GS_COLL_RECV) && (d->root == GS_ANY_SOURCE))) {
            status = coll_check_rank(fn, "peer", comm, d->root);
        }
        if ((status == GS_OK) && (d->root == comm->rank)) {
            status = gs__error_set(GS_ERR_INVALID_ARG,
                                   "%s: peer %d is the calling rank; copy locally instead", fn,
                                   d->root);
        }
        break;
    default:
        status = gs__error_set(GS_ERR_INTERNAL, "%s: unknown operation kind %d", fn, (int)d->kind);
    }
    return status;
}

static gs_status_t coll_blocking(const char *fn, gs_comm_t comm, const gs_coll_desc_t *d)
{
    struct gs_request req;
    gs_status_t status = coll_validate(fn, comm, d);

    if (status != GS_OK) {
        return status;
    }
    memset(&req, 0, sizeof(req));
    req.task.run = gs__comm_run_task;
    req.task.test = gs__comm_test_task;
    req.comm = comm;
    req.desc = *d;
    if ((d->kind == GS_COLL_SEND) || (d->kind == GS_COLL_RECV)) {
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

static gs_status_t coll_nonblocking(const char *fn, gs_comm_t comm, const gs_coll_desc_t *d,
                                    gs_request_t *req_out)
{
    struct gs_request *req;
    gs_status_t status;

    if (req_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: req_out is NULL", fn);
    }
    status = coll_validate(fn, comm, d);
    if (status != GS_OK) {
        return status;
    }
    req = calloc(1, sizeof(*req));
    if (req == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory for a request", fn);
    }
    req->task.run = gs__comm_run_task;
    req->task.test = gs__comm_test_task;
    req->comm = comm;
    req->desc = *d;
    status = gs__worker_submit(&comm->worker, &req->task);
    if (status != GS_OK) {
        free(req);
        return status;
    }
    *req_out = req;
    return GS_OK;
}

/* Fields of a caller's options struct, read only when they fit in its size. */
#define OPTS_HAS(_opts, _field) \
    (((_opts) != NULL) &&       \
     ((_opts)->size >= offsetof(gs_allreduce_opts_t, _field) + sizeof((_opts)->_field)))

static gs_algo_t coll_opts_algo(const gs_allreduce_opts_t *opts)
{
    return OPTS_HAS(opts, algo) ? opts->algo : GS_ALGO_AUTO;
}

/* The codec to run, or NULL for none (absent, NULL, or GS_CODEC_NONE). */
static const struct gs_codec_config *coll_opts_codec(const gs_allreduce_opts_t *opts)
{
    const gs_codec_config_t *cfg = OPTS_HAS(opts, codec) ? opts->codec : NULL;

    if ((cfg == NULL) || (cfg->size < offsetof(gs_codec_config_t, kind) + sizeof(cfg->kind)) ||
        (cfg->kind == GS_CODEC_NONE)) {
        return NULL;
    }
    return cfg;
}

static struct gs_ef *coll_opts_ef(const gs_allreduce_opts_t *opts)
{
    return OPTS_HAS(opts, ef) ? opts->ef : NULL;
}


#define DESC(...) ((gs_coll_desc_t){__VA_ARGS__})

gs_status_t gs_allreduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                         gs_dtype_t dtype, gs_op_t op)
{
    return coll_blocking("gs_allreduce", comm,
                         &DESC(.kind = GS_COLL_ALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = count, .dtype = dtype, .op = op));
}

gs_status_t gs_allreduce_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                            gs_dtype_t dtype, gs_op_t op, const gs_allreduce_opts_t *opts)
{
    return coll_blocking("gs_allreduce_ex", comm,
                         &DESC(.kind = GS_COLL_ALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = count, .dtype = dtype, .op = op,
                               .algo = coll_opts_algo(opts), .codec = coll_opts_codec(opts),
                               .ef = coll_opts_ef(opts)));
}

gs_status_t gs_broadcast(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int root)
{
    return coll_blocking("gs_broadcast", comm,
                         &DESC(.kind = GS_COLL_BROADCAST, .sendbuf = buf, .recvbuf = buf,
                               .count = count, .dtype = dtype, .root = root));
}

gs_status_t gs_reduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                      gs_dtype_t dtype, gs_op_t op, int root)
{
    return coll_blocking("gs_reduce", comm,
                         &DESC(.kind = GS_COLL_REDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = count, .dtype = dtype, .op = op, .root = root));
}

gs_status_t gs_allgather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                         gs_dtype_t dtype)
{
    return coll_blocking("gs_allgather", comm,
                         &DESC(.kind = GS_COLL_ALLGATHER, .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = count, .dtype = dtype));
}

gs_status_t gs_reduce_scatter(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                              gs_dtype_t dtype, gs_op_t op)
{
    return coll_blocking("gs_reduce_scatter", comm,
                         &DESC(.kind = GS_COLL_REDUCE_SCATTER, .sendbuf = sendbuf,
                               .recvbuf = recvbuf, .count = recvcount, .dtype = dtype, .op = op));
}

gs_status_t gs_alltoall(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                        gs_dtype_t dtype)
{
    return coll_blocking("gs_alltoall", comm,
                         &DESC(.kind = GS_COLL_ALLTOALL, .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = count, .dtype = dtype));
}

gs_status_t gs_barrier(gs_comm_t comm)
{
    return coll_blocking("gs_barrier", comm, &DESC(.kind = GS_COLL_BARRIER));
}

gs_status_t gs_send(gs_comm_t comm, const void *buf, size_t count, gs_dtype_t dtype, int peer,
                    uint32_t tag)
{
    return coll_blocking("gs_send", comm,
                         &DESC(.kind = GS_COLL_SEND, .sendbuf = buf, .count = count,
                               .dtype = dtype, .root = peer, .tag = tag));
}

gs_status_t gs_recv(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int peer,
                    uint32_t tag)
{
    return coll_blocking("gs_recv", comm,
                         &DESC(.kind = GS_COLL_RECV, .recvbuf = buf, .count = count,
                               .dtype = dtype, .root = peer, .tag = tag));
}

gs_status_t gs_iallreduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                          gs_dtype_t dtype, gs_op_t op, gs_request_t *req_out)
{
    return coll_nonblocking("gs_iallreduce", comm,
                            &DESC(.kind = GS_COLL_ALLREDUCE, .sendbuf = sendbuf,
                                  .recvbuf = recvbuf, .count = count, .dtype = dtype, .op = op),
                            req_out);
}

gs_status_t gs_iallreduce_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                             gs_dtype_t dtype, gs_op_t op, const gs_allreduce_opts_t *opts,
                             gs_request_t *req_out)
{
    return coll_nonblocking("gs_iallreduce_ex", comm,
                            &DESC(.kind = GS_COLL_ALLREDUCE, .sendbuf = sendbuf,
                                  .recvbuf = recvbuf, .count = count, .dtype = dtype, .op = op,
                                  .algo = coll_opts_algo(opts), .codec = coll_opts_codec(opts),
                                  .ef = coll_opts_ef(opts)),
                            req_out);
}

gs_status_t gs_ibroadcast(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int root,
                          gs_request_t *req_out)
{
    return coll_nonblocking("gs_ibroadcast", comm,
                            &DESC(.kind = GS_COLL_BROADCAST, .sendbuf = buf, .recvbuf = buf,
                                  .count = count, .dtype = dtype, .root = root),
                            req_out);
}

gs_status_t gs_ireduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                       gs_dtype_t dtype, gs_op_t op, int root, gs_request_t *req_out)
{
    return coll_nonblocking("gs_ireduce", comm,
                            &DESC(.kind = GS_COLL_REDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
                                  .count = count, .dtype = dtype, .op = op, .root = root),
                            req_out);
}

gs_status_t gs_iallgather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                          gs_dtype_t dtype, gs_request_t *req_out)
{
    return coll_nonblocking("gs_iallgather", comm,
                            &DESC(.kind = GS_COLL_ALLGATHER, .sendbuf = sendbuf,
                                  .recvbuf = recvbuf, .count = count, .dtype = dtype),
                            req_out);
}

gs_status_t gs_ireduce_scatter(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                               size_t recvcount, gs_dtype_t dtype, gs_op_t op,
                               gs_request_t *req_out)
{
    return coll_nonblocking("gs_ireduce_scatter", comm,
                            &DESC(.kind = GS_COLL_REDUCE_SCATTER, .sendbuf = sendbuf,
                                  .recvbuf = recvbuf, .count = recvcount, .dtype = dtype,
                                  .op = op),
                            req_out);
}

gs_status_t gs_ialltoall(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                         gs_dtype_t dtype, gs_request_t *req_out)
{
    return coll_nonblocking("gs_ialltoall", comm,
                            &DESC(.kind = GS_COLL_ALLTOALL, .sendbuf = sendbuf,
                                  .recvbuf = recvbuf, .count = count, .dtype = dtype),
                            req_out);
}

gs_status_t gs_ibarrier(gs_comm_t comm, gs_request_t *req_out)
{
    return coll_nonblocking("gs_ibarrier", comm, &DESC(.kind = GS_COLL_BARRIER), req_out);
}

gs_status_t gs_isend(gs_comm_t comm, const void *buf, size_t count, gs_dtype_t dtype, int peer,
                     uint32_t tag, gs_request_t *req_out)
{
    return coll_nonblocking("gs_isend", comm,
                            &DESC(.kind = GS_COLL_SEND, .sendbuf = buf, .count = count,
                                  .dtype = dtype, .root = peer, .tag = tag),
                            req_out);
}

gs_status_t gs_irecv(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int peer,
                     uint32_t tag, gs_request_t *req_out)
{
    return coll_nonblocking("gs_irecv", comm,
                            &DESC(.kind = GS_COLL_RECV, .recvbuf = buf, .count = count,
                                  .dtype = dtype, .root = peer, .tag = tag),
                            req_out);
}

/* Finish a completed request: carry its error text to this thread, free it. */
static gs_status_t coll_release(gs_request_t *req)
{
    struct gs_request *r = *req;
    const gs_status_t status = r->task.status;

    if (status != GS_OK) {
        gs__error_copy_in(r->task.errmsg);
    }
    free(r);
    *req = GS_REQUEST_NULL;
    return status;
}

gs_status_t gs_wait(gs_request_t *req)
{
    if (req == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_wait: req is NULL");
    }
    if (*req == GS_REQUEST_NULL) {
        return GS_OK;
    }
    gs__worker_wait(&(*req)->comm->worker, &(*req)->task);
    return coll_release(req);
}

gs_status_t gs_test(gs_request_t *req)
{
    if (req == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_test: req is NULL");
    }
    if (*req == GS_REQUEST_NULL) {
        return GS_OK;
    }
    if (!gs__task_done(&(*req)->task)) {
        return GS_INPROGRESS;
    }
    return coll_release(req);
}

gs_status_t gs_waitall(size_t n, gs_request_t *reqs)
{
    gs_status_t first = GS_OK;
    char msg[GS_ERROR_MSG_MAX] = "";

    if ((reqs == NULL) && (n > 0)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_waitall: reqs is NULL but n is %zu", n);
    }
    for (size_t i = 0; i < n; i++) {
        gs_status_t status = gs_wait(&reqs[i]);
        if ((status != GS_OK) && (first == GS_OK)) {
            first = status;
            snprintf(msg, sizeof(msg), "%s", gs__error_get());
        }
    }
    if (first != GS_OK) {
        gs__error_copy_in(msg);
    }
    return first;
}
