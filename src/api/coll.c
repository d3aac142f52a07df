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

#include "api/coll_impl.h"
#include "api/comm_impl.h"
#include "compress/codec.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/memkind.h"

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
    if (check_op && gs__op_is_bitwise(op) && gs__dtype_is_float(dtype)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: bitwise op %s needs an integer dtype, not %s (i8, u8, i32 or "
                             "i64)",
                             fn, gs__op_name(op), gs__dtype_name(dtype));
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

/* A count or displacement this large is a negative number passed through size_t. */
#define COLL_NEGATIVE (1ull << 63)

/* One block of a v call's buffer, for the overlap check. */
typedef struct coll_span {
    size_t off;
    size_t len;
    int rank;
} coll_span_t;

static int coll_span_cmp(const void *a, const void *b)
{
    const coll_span_t *x = a;
    const coll_span_t *y = b;

    return (x->off < y->off) ? -1 : (x->off > y->off) ? 1 : 0;
}

/*
 * The n blocks counts[j] at displs[j] (NULL: packed in rank order) of a
 * buffer of @p cap elements (cap of SIZE_MAX: no stated capacity): no
 * negative value, no byte size past the limit, no block past cap, and with
 * @p no_overlap no two non-empty blocks sharing an element. Names the
 * array and the rank index. Returns GS_OK, GS_ERR_INVALID_ARG,
 * GS_ERR_NO_MEMORY.
 */
static gs_status_t coll_check_layout(const char *fn, int n, gs_dtype_t dtype, const char *cname,
                                     const size_t *counts, const char *dname, const size_t *displs,
                                     const char *capname, size_t cap, int no_overlap)
{
    const size_t limit = COLL_MAX_BYTES / gs__dtype_size(dtype);
    coll_span_t *spans;
    size_t packed = 0;
    size_t end = 0;
    int prev = -1;

    if (counts == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: %s is NULL", fn, cname);
    }
    for (int j = 0; j < n; j++) {
        const size_t off = (displs != NULL) ? displs[j] : packed;

        if (counts[j] >= COLL_NEGATIVE) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "%s: %s[%d] is %zu: a negative count passed as size_t", fn, cname,
                                 j, counts[j]);
        }
        if ((displs != NULL) && (displs[j] >= COLL_NEGATIVE)) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "%s: %s[%d] is %zu: a negative displacement passed as size_t", fn,
                                 dname, j, displs[j]);
        }
        if ((counts[j] > limit) || (off > limit) || (counts[j] > limit - off)) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "%s: block %d (%s[%d] = %zu at element %zu) of %s overflows the "
                                 "%llu-byte limit",
                                 fn, j, cname, j, counts[j], off, gs__dtype_name(dtype),
                                 (unsigned long long)COLL_MAX_BYTES);
        }
        if ((cap != SIZE_MAX) && (off + counts[j] > cap) && (counts[j] > 0)) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "%s: block %d (%s[%d] = %zu at element %zu) ends past %s = %zu",
                                 fn, j, cname, j, counts[j], off, capname, cap);
        }
        packed = off + counts[j];
    }
    if (!no_overlap || (displs == NULL) || (n < 2)) {
        return GS_OK;
    }
    spans = malloc(sizeof(*spans) * (size_t)n);
    if (spans == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory checking %s", fn, dname);
    }
    for (int j = 0; j < n; j++) {
        spans[j] = (coll_span_t){.off = displs[j], .len = counts[j], .rank = j};
    }
    qsort(spans, (size_t)n, sizeof(*spans), coll_span_cmp);
    for (int i = 0; i < n; i++) {
        if (spans[i].len == 0) {
            continue;
        }
        if ((prev >= 0) && (spans[i].off < end)) {
            const coll_span_t a = spans[prev];
            const coll_span_t b = spans[i];

            free(spans);
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "%s: the blocks of rank %d (%s[%d] = %zu, %zu elements) and "
                                 "rank %d (%s[%d] = %zu, %zu elements) overlap",
                                 fn, a.rank, dname, a.rank, a.off, a.len, b.rank, dname, b.rank,
                                 b.off, b.len);
        }
        if ((prev < 0) || (spans[i].off + spans[i].len > end)) {
            end = spans[i].off + spans[i].len;
            prev = i;
        }
    }
    free(spans);
    return GS_OK;
}

/* A stated capacity (recvbuf_count, sendbuf_count): not negative, within the limit. */
static gs_status_t coll_check_cap(const char *fn, const char *name, size_t cap, gs_dtype_t dtype)
{
    if (cap >= COLL_NEGATIVE) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: %s is %zu: a negative count passed as size_t",
                             fn, name, cap);
    }
    if (cap > COLL_MAX_BYTES / gs__dtype_size(dtype)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: %s %zu of %s overflows the %llu-byte limit",
                             fn, name, cap, gs__dtype_name(dtype),
                             (unsigned long long)COLL_MAX_BYTES);
    }
    return GS_OK;
}

/* The v calls' arrays, buffers and capacities (kinds GS_COLL_*V). */
static gs_status_t coll_check_v(const char *fn, gs_comm_t comm, const gs_coll_desc_t *d)
{
    const int n = comm->size;
    const int me = comm->rank;
    const size_t esize = gs__dtype_size(d->dtype);
    gs_status_t status = GS_OK;

    switch (d->kind) {
    case GS_COLL_ALLGATHERV:
        status = coll_check_cap(fn, "sendcount", d->count, d->dtype);
        if (status == GS_OK) {
            status = coll_check_cap(fn, "recvbuf_count", d->rcap, d->dtype);
        }
        if (status == GS_OK) {
            status = coll_check_layout(fn, n, d->dtype, "recvcounts", d->rcounts, "displs",
                                       d->rdispls, "recvbuf_count", d->rcap, 1);
        }
        if ((status == GS_OK) && (d->rcounts[me] != d->count)) {
            status = gs__error_set(GS_ERR_INVALID_ARG,
                                   "%s: recvcounts[%d] is %zu but this rank's sendcount is %zu "
                                   "(rank %d's block must be its sendcount)",
                                   fn, me, d->rcounts[me], d->count, me);
        }
        if (status == GS_OK) {
            status = coll_check_buf(fn, "sendbuf", d->sendbuf, d->count);
        }
        if (status == GS_OK) {
            status = coll_check_buf(fn, "recvbuf", d->recvbuf, d->rcap);
        }
        break;
    case GS_COLL_ALLTOALLV:
        status = coll_check_cap(fn, "sendbuf_count", d->scap, d->dtype);
        if (status == GS_OK) {
            status = coll_check_cap(fn, "recvbuf_count", d->rcap, d->dtype);
        }
        if (status == GS_OK) {
            status = coll_check_layout(fn, n, d->dtype, "sendcounts", d->scounts, "sdispls",
                                       d->sdispls, "sendbuf_count", d->scap, 0);
        }
        if (status == GS_OK) {
            status = coll_check_layout(fn, n, d->dtype, "recvcounts", d->rcounts, "rdispls",
                                       d->rdispls, "recvbuf_count", d->rcap, 1);
        }
        if ((status == GS_OK) && (d->scounts[me] != d->rcounts[me])) {
            status = gs__error_set(GS_ERR_INVALID_ARG,
                                   "%s: sendcounts[%d] is %zu but recvcounts[%d] is %zu (the "
                                   "block this rank sends itself)",
                                   fn, me, d->scounts[me], me, d->rcounts[me]);
        }
        if (status == GS_OK) {
            status = coll_check_buf(fn, "sendbuf", d->sendbuf, d->scap);
        }
        if (status == GS_OK) {
            status = coll_check_buf(fn, "recvbuf", d->recvbuf, d->rcap);
        }
        if ((status == GS_OK) && (d->scap > 0) && (d->rcap > 0)) {
            const uintptr_t s0 = (uintptr_t)d->sendbuf;
            const uintptr_t r0 = (uintptr_t)d->recvbuf;

            if ((s0 < r0 + d->rcap * esize) && (r0 < s0 + d->scap * esize)) {
                status = gs__error_set(GS_ERR_INVALID_ARG,
                                       "%s: sendbuf and recvbuf overlap (all-to-all-v is not in "
                                       "place)",
                                       fn);
            }
        }
        break;
    case GS_COLL_REDUCE_SCATTERV: {
        size_t total = 0;

        status = coll_check_layout(fn, n, d->dtype, "recvcounts", d->rcounts, "displs", NULL, "",
                                   SIZE_MAX, 0);
        for (int j = 0; (status == GS_OK) && (j < n); j++) {
            total += d->rcounts[j]; /* packed and checked against the limit above */
        }
        if (status == GS_OK) {
            status = coll_check_buf(fn, "sendbuf", d->sendbuf, total);
        }
        if (status == GS_OK) {
            status = coll_check_buf(fn, "recvbuf", d->recvbuf, d->rcounts[me]);
        }
        break;
    }
    default:
        status = gs__error_set(GS_ERR_INTERNAL, "%s: kind %d is not a v call", fn, (int)d->kind);
        break;
    }
    return status;
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

/* One buffer of a call, named as the caller knows it. */
typedef struct coll_buf {
    const char *name;
    const void *ptr;
} coll_buf_t;

/*
 * The memory kind of the call's buffers (the ones it touches on this
 * rank): all host, or all on one CUDA device of a build with CUDA.
 * Sets d->mem and d->device. Returns GS_OK or GS_ERR_INVALID_ARG naming
 * the buffer and saying why.
 */
static gs_status_t coll_check_mem(const char *fn, gs_comm_t comm, gs_coll_desc_t *d)
{
    coll_buf_t bufs[2];
    int nbufs = 0;
    int dev_of[2] = {-1, -1};
    int first_dev = -1;

    if ((d->kind >= GS_COLL_GATHER) && (d->kind <= GS_COLL_REDUCE_SCATTERV)) {
        /* Host memory only (their arrays size the staging; not done yet). */
        const void *ptrs[2] = {d->sendbuf, d->recvbuf};
        static const char *const names[2] = {"sendbuf", "recvbuf"};

        for (int i = 0; i < 2; i++) {
            int dev = 0;

            if (gs__mem_is_device(ptrs[i], &dev)) {
                return gs__error_set(GS_ERR_UNSUPPORTED,
                                     "%s: %s is CUDA device memory (device %d); %s takes host "
                                     "buffers only in this version (copy to host memory first)",
                                     fn, names[i], dev, fn);
            }
        }
        d->mem = GS_MEM_HOST;
        return GS_OK;
    }
    if (d->count == 0) {
        return GS_OK;
    }
    switch (d->kind) {
    case GS_COLL_BROADCAST:
        bufs[nbufs++] = (coll_buf_t){"buf", d->recvbuf};
        break;
    case GS_COLL_SEND:
        bufs[nbufs++] = (coll_buf_t){"buf", d->sendbuf};
        break;
    case GS_COLL_RECV:
        bufs[nbufs++] = (coll_buf_t){"buf", d->recvbuf};
        break;
    case GS_COLL_REDUCE:
        bufs[nbufs++] = (coll_buf_t){"sendbuf", d->sendbuf};
        if ((comm->rank == d->root) && (d->recvbuf != d->sendbuf)) {
            bufs[nbufs++] = (coll_buf_t){"recvbuf", d->recvbuf};
        }
        break;
    case GS_COLL_BARRIER:
        return GS_OK;
    default:
        bufs[nbufs++] = (coll_buf_t){"sendbuf", d->sendbuf};
        bufs[nbufs++] = (coll_buf_t){"recvbuf", d->recvbuf};
        break;
    }
    for (int i = 0; i < nbufs; i++) {
        int dev = 0;

        if (gs__mem_is_device(bufs[i].ptr, &dev)) {
            dev_of[i] = dev;
            if (first_dev < 0) {
                first_dev = i;
            }
        }
    }
    if (first_dev < 0) {
        d->mem = GS_MEM_HOST;
        return GS_OK;
    }
#ifndef GS_WITH_CUDA
    return gs__error_set(GS_ERR_INVALID_ARG,
                         "%s: %s is CUDA device memory (device %d), but this gradsync was built "
                         "without CUDA: rebuild with -DGS_WITH_CUDA=ON, or pass host memory",
                         fn, bufs[first_dev].name, dev_of[first_dev]);
#else
    for (int i = 0; i < nbufs; i++) {
        if (dev_of[i] < 0) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "%s: %s is CUDA device memory (device %d) but %s is host "
                                 "memory: the buffers of one call must be of one kind",
                                 fn, bufs[first_dev].name, dev_of[first_dev], bufs[i].name);
        }
        if (dev_of[i] != dev_of[first_dev]) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "%s: %s is on CUDA device %d but %s on device %d: the buffers "
                                 "of one call must be on one device",
                                 fn, bufs[first_dev].name, dev_of[first_dev], bufs[i].name,
                                 dev_of[i]);
        }
    }
    if ((d->codec != NULL) && (d->flags & GS_COLL_F_STREAM_ORDERED)) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "%s: GS_COLL_F_STREAM_ORDERED with a codec: compressed calls on "
                             "device buffers wait for their result (the payload checks are read "
                             "back on the host)",
                             fn);
    }
    d->mem = GS_MEM_DEVICE;
    d->device = dev_of[first_dev];
    return GS_OK;
#endif
}

/* Validate a descriptor completely; returns GS_OK or the first problem. */
static gs_status_t coll_validate(const char *fn, gs_comm_t comm, gs_coll_desc_t *d)
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
    case GS_COLL_GATHER:
    case GS_COLL_SCATTER: {
        const int gather = (d->kind == GS_COLL_GATHER);

        status = coll_check_data(fn, comm, d->count, n, d->dtype, 0, GS_OP_SUM);
        if (status == GS_OK) {
            status = coll_check_rank(fn, "root", comm, d->root);
        }
        if (status == GS_OK) {
            status = gather ? coll_check_buf(fn, "sendbuf", d->sendbuf, d->count)
                            : coll_check_buf(fn, "recvbuf", d->recvbuf, d->count);
        }
        if ((status == GS_OK) && (comm->rank == d->root)) {
            status = gather ? coll_check_buf(fn, "recvbuf (at the root)", d->recvbuf, d->count)
                            : coll_check_buf(fn, "sendbuf (at the root)", d->sendbuf, d->count);
        }
        break;
    }
    case GS_COLL_ALLGATHERV:
    case GS_COLL_ALLTOALLV:
    case GS_COLL_REDUCE_SCATTERV:
        status =
            coll_check_data(fn, comm, 0, 1, d->dtype, d->kind == GS_COLL_REDUCE_SCATTERV, d->op);
        if (status == GS_OK) {
            status = coll_check_v(fn, comm, d);
        }
        if ((status == GS_OK) && (d->kind == GS_COLL_ALLTOALLV)) {
            d->count = 0; /* what this rank sends, for statistics (saturating) */
            for (int j = 0; j < comm->size; j++) {
                d->count =
                    (d->scounts[j] > SIZE_MAX - d->count) ? SIZE_MAX : d->count + d->scounts[j];
            }
        } else if ((status == GS_OK) && (d->kind == GS_COLL_REDUCE_SCATTERV)) {
            d->count = d->rcounts[comm->rank];
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
    if ((status == GS_OK) && !gs__algo_offers(d->kind, d->algo)) {
        status = gs__error_set(GS_ERR_UNSUPPORTED, "%s: opts->algo %d does not implement %s", fn,
                               (int)d->algo, gs__coll_name(d->kind));
    }
    if (status == GS_OK) {
        status = coll_check_mem(fn, comm, d);
    }
    return status;
}

static gs_status_t coll_blocking(const char *fn, gs_comm_t comm, const gs_coll_desc_t *d_in)
{
    struct gs_request req;
    gs_coll_desc_t dv = *d_in;
    gs_coll_desc_t *d = &dv;
    gs_status_t status = coll_validate(fn, comm, d);

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
static struct gs_request *coll_request_alloc(gs_comm_t comm, const gs_coll_desc_t *d)
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

static gs_status_t coll_nonblocking(const char *fn, gs_comm_t comm, const gs_coll_desc_t *d_in,
                                    gs_request_t *req_out)
{
    struct gs_request *req;
    gs_coll_desc_t dv = *d_in;
    gs_coll_desc_t *d = &dv;
    gs_status_t status;

    if (req_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: req_out is NULL", fn);
    }
    status = coll_validate(fn, comm, d);
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
#define OPTS_HAS(_type, _opts, _field) \
    (((_opts) != NULL) && ((_opts)->size >= offsetof(_type, _field) + sizeof((_opts)->_field)))

/* The options every call understands, from either options struct. */
typedef struct coll_opts {
    gs_algo_t algo;
    const struct gs_codec_config *codec;
    struct gs_ef *ef;
    void *stream;
    unsigned flags;
} coll_opts_t;

static coll_opts_t coll_opts(const gs_coll_opts_t *o)
{
    coll_opts_t r = {.algo = GS_ALGO_AUTO};

    r.algo = OPTS_HAS(gs_coll_opts_t, o, algo) ? o->algo : GS_ALGO_AUTO;
    r.stream = OPTS_HAS(gs_coll_opts_t, o, stream) ? o->stream : NULL;
    r.flags = OPTS_HAS(gs_coll_opts_t, o, flags) ? o->flags : 0u;
    return r;
}

static coll_opts_t coll_allreduce_opts(const gs_allreduce_opts_t *o)
{
    const gs_codec_config_t *cfg = OPTS_HAS(gs_allreduce_opts_t, o, codec) ? o->codec : NULL;
    coll_opts_t r = {.algo = GS_ALGO_AUTO};

    r.algo = OPTS_HAS(gs_allreduce_opts_t, o, algo) ? o->algo : GS_ALGO_AUTO;
    /* The codec to run, or NULL for none (absent, NULL, or GS_CODEC_NONE). */
    if ((cfg != NULL) && (cfg->size >= offsetof(gs_codec_config_t, kind) + sizeof(cfg->kind)) &&
        (cfg->kind != GS_CODEC_NONE)) {
        r.codec = cfg;
    }
    r.ef = OPTS_HAS(gs_allreduce_opts_t, o, ef) ? o->ef : NULL;
    r.stream = OPTS_HAS(gs_allreduce_opts_t, o, stream) ? o->stream : NULL;
    r.flags = OPTS_HAS(gs_allreduce_opts_t, o, flags) ? o->flags : 0u;
    return r;
}

/* The descriptor fields that come from options. */
#define OPTS_FIELDS(_o) \
    .algo = (_o).algo, .codec = (_o).codec, .ef = (_o).ef, .stream = (_o).stream, .flags = (_o).flags

#define DESC(...) ((gs_coll_desc_t){__VA_ARGS__})

/* Blocking or not: the same descriptor, submitted one way or the other. */
static gs_status_t coll_submit(const char *fn, gs_comm_t comm, const gs_coll_desc_t *d,
                               gs_request_t *req_out, int nonblocking)
{
    return nonblocking ? coll_nonblocking(fn, comm, d, req_out) : coll_blocking(fn, comm, d);
}

static gs_status_t coll_allreduce(const char *fn, gs_comm_t comm, const void *sendbuf,
                                  void *recvbuf, size_t count, gs_dtype_t dtype, gs_op_t op,
                                  const gs_allreduce_opts_t *opts, gs_request_t *req_out, int nb)
{
    const coll_opts_t o = coll_allreduce_opts(opts);

    return coll_submit(fn, comm,
                       &DESC(.kind = GS_COLL_ALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
                             .count = count, .dtype = dtype, .op = op, OPTS_FIELDS(o)),
                       req_out, nb);
}

static gs_status_t coll_broadcast(const char *fn, gs_comm_t comm, void *buf, size_t count,
                                  gs_dtype_t dtype, int root, const gs_coll_opts_t *opts,
                                  gs_request_t *req_out, int nb)
{
    const coll_opts_t o = coll_opts(opts);

    return coll_submit(fn, comm,
                       &DESC(.kind = GS_COLL_BROADCAST, .sendbuf = buf, .recvbuf = buf,
                             .count = count, .dtype = dtype, .root = root, OPTS_FIELDS(o)),
                       req_out, nb);
}

static gs_status_t coll_reduce(const char *fn, gs_comm_t comm, const void *sendbuf,
                               void *recvbuf, size_t count, gs_dtype_t dtype, gs_op_t op,
                               int root, const gs_coll_opts_t *opts, gs_request_t *req_out,
                               int nb)
{
    const coll_opts_t o = coll_opts(opts);

    return coll_submit(fn, comm,
                       &DESC(.kind = GS_COLL_REDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
                             .count = count, .dtype = dtype, .op = op, .root = root,
                             OPTS_FIELDS(o)),
                       req_out, nb);
}

/* allgather, reduce_scatter and alltoall: per-rank blocks, no root. */
static gs_status_t coll_blocks(const char *fn, gs_coll_kind_t kind, gs_comm_t comm,
                               const void *sendbuf, void *recvbuf, size_t count,
                               gs_dtype_t dtype, gs_op_t op, const gs_coll_opts_t *opts,
                               gs_request_t *req_out, int nb)
{
    const coll_opts_t o = coll_opts(opts);

    return coll_submit(fn, comm,
                       &DESC(.kind = kind, .sendbuf = sendbuf, .recvbuf = recvbuf,
                             .count = count, .dtype = dtype, .op = op, OPTS_FIELDS(o)),
                       req_out, nb);
}

static gs_status_t coll_p2p(const char *fn, gs_coll_kind_t kind, gs_comm_t comm, void *buf,
                            size_t count, gs_dtype_t dtype, int peer, uint32_t tag,
                            const gs_coll_opts_t *opts, gs_request_t *req_out, int nb)
{
    const coll_opts_t o = coll_opts(opts);

    return coll_submit(fn, comm,
                       &DESC(.kind = kind, .sendbuf = (kind == GS_COLL_SEND) ? buf : NULL,
                             .recvbuf = (kind == GS_COLL_RECV) ? buf : NULL, .count = count,
                             .dtype = dtype, .root = peer, .tag = tag, OPTS_FIELDS(o)),
                       req_out, nb);
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
    return coll_allreduce("gs_iallreduce", comm, sendbuf, recvbuf, count, dtype, op, NULL,
                          req_out, 1);
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
    return coll_broadcast("gs_broadcast", comm, buf, count, dtype, root, NULL, NULL, 0);
}

gs_status_t gs_broadcast_ex(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int root,
                            const gs_coll_opts_t *opts)
{
    return coll_broadcast("gs_broadcast_ex", comm, buf, count, dtype, root, opts, NULL, 0);
}

gs_status_t gs_ibroadcast(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int root,
                          gs_request_t *req_out)
{
    return coll_broadcast("gs_ibroadcast", comm, buf, count, dtype, root, NULL, req_out, 1);
}

gs_status_t gs_ibroadcast_ex(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int root,
                             const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_broadcast("gs_ibroadcast_ex", comm, buf, count, dtype, root, opts, req_out, 1);
}

gs_status_t gs_reduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                      gs_dtype_t dtype, gs_op_t op, int root)
{
    return coll_reduce("gs_reduce", comm, sendbuf, recvbuf, count, dtype, op, root, NULL, NULL,
                       0);
}

gs_status_t gs_reduce_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                         gs_dtype_t dtype, gs_op_t op, int root, const gs_coll_opts_t *opts)
{
    return coll_reduce("gs_reduce_ex", comm, sendbuf, recvbuf, count, dtype, op, root, opts, NULL,
                       0);
}

gs_status_t gs_ireduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                       gs_dtype_t dtype, gs_op_t op, int root, gs_request_t *req_out)
{
    return coll_reduce("gs_ireduce", comm, sendbuf, recvbuf, count, dtype, op, root, NULL,
                       req_out, 1);
}

gs_status_t gs_ireduce_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                          gs_dtype_t dtype, gs_op_t op, int root, const gs_coll_opts_t *opts,
                          gs_request_t *req_out)
{
    return coll_reduce("gs_ireduce_ex", comm, sendbuf, recvbuf, count, dtype, op, root, opts,
                       req_out, 1);
}

gs_status_t gs_allgather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                         gs_dtype_t dtype)
{
    return coll_blocks("gs_allgather", GS_COLL_ALLGATHER, comm, sendbuf, recvbuf, count, dtype,
                       GS_OP_SUM, NULL, NULL, 0);
}

gs_status_t gs_allgather_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                            gs_dtype_t dtype, const gs_coll_opts_t *opts)
{
    return coll_blocks("gs_allgather_ex", GS_COLL_ALLGATHER, comm, sendbuf, recvbuf, count, dtype,
                       GS_OP_SUM, opts, NULL, 0);
}

gs_status_t gs_iallgather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                          gs_dtype_t dtype, gs_request_t *req_out)
{
    return coll_blocks("gs_iallgather", GS_COLL_ALLGATHER, comm, sendbuf, recvbuf, count, dtype,
                       GS_OP_SUM, NULL, req_out, 1);
}

gs_status_t gs_iallgather_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                             gs_dtype_t dtype, const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_blocks("gs_iallgather_ex", GS_COLL_ALLGATHER, comm, sendbuf, recvbuf, count,
                       dtype, GS_OP_SUM, opts, req_out, 1);
}

gs_status_t gs_reduce_scatter(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                              gs_dtype_t dtype, gs_op_t op)
{
    return coll_blocks("gs_reduce_scatter", GS_COLL_REDUCE_SCATTER, comm, sendbuf, recvbuf,
                       recvcount, dtype, op, NULL, NULL, 0);
}

gs_status_t gs_reduce_scatter_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                 size_t recvcount, gs_dtype_t dtype, gs_op_t op,
                                 const gs_coll_opts_t *opts)
{
    return coll_blocks("gs_reduce_scatter_ex", GS_COLL_REDUCE_SCATTER, comm, sendbuf, recvbuf,
                       recvcount, dtype, op, opts, NULL, 0);
}

gs_status_t gs_ireduce_scatter(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                               size_t recvcount, gs_dtype_t dtype, gs_op_t op,
                               gs_request_t *req_out)
{
    return coll_blocks("gs_ireduce_scatter", GS_COLL_REDUCE_SCATTER, comm, sendbuf, recvbuf,
                       recvcount, dtype, op, NULL, req_out, 1);
}

gs_status_t gs_ireduce_scatter_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                  size_t recvcount, gs_dtype_t dtype, gs_op_t op,
                                  const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_blocks("gs_ireduce_scatter_ex", GS_COLL_REDUCE_SCATTER, comm, sendbuf, recvbuf,
                       recvcount, dtype, op, opts, req_out, 1);
}

gs_status_t gs_alltoall(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                        gs_dtype_t dtype)
{
    return coll_blocks("gs_alltoall", GS_COLL_ALLTOALL, comm, sendbuf, recvbuf, count, dtype,
                       GS_OP_SUM, NULL, NULL, 0);
}

gs_status_t gs_alltoall_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                           gs_dtype_t dtype, const gs_coll_opts_t *opts)
{
    return coll_blocks("gs_alltoall_ex", GS_COLL_ALLTOALL, comm, sendbuf, recvbuf, count, dtype,
                       GS_OP_SUM, opts, NULL, 0);
}

gs_status_t gs_ialltoall(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                         gs_dtype_t dtype, gs_request_t *req_out)
{
    return coll_blocks("gs_ialltoall", GS_COLL_ALLTOALL, comm, sendbuf, recvbuf, count, dtype,
                       GS_OP_SUM, NULL, req_out, 1);
}

gs_status_t gs_ialltoall_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                            gs_dtype_t dtype, const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_blocks("gs_ialltoall_ex", GS_COLL_ALLTOALL, comm, sendbuf, recvbuf, count, dtype,
                       GS_OP_SUM, opts, req_out, 1);
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
    return coll_p2p("gs_isend", GS_COLL_SEND, comm, (void *)(uintptr_t)buf, count, dtype, peer,
                    tag, NULL, req_out, 1);
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
    return coll_p2p("gs_irecv", GS_COLL_RECV, comm, buf, count, dtype, peer, tag, NULL, req_out,
                    1);
}

gs_status_t gs_irecv_ex(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int peer,
                        uint32_t tag, const gs_coll_opts_t *opts, gs_request_t *req_out)
{
    return coll_p2p("gs_irecv_ex", GS_COLL_RECV, comm, buf, count, dtype, peer, tag, opts,
                    req_out, 1);
}

/* ------------------------------------------------------------------ */
/* Rooted and variable-size collectives                                */
/* ------------------------------------------------------------------ */

/* gather and scatter: count elements per rank, a root. */
static gs_status_t coll_rooted(const char *fn, gs_coll_kind_t kind, gs_comm_t comm,
                               const void *sendbuf, void *recvbuf, size_t count, gs_dtype_t dtype,
                               int root, const gs_coll_opts_t *opts, gs_request_t *req_out, int nb)
{
    const coll_opts_t o = coll_opts(opts);

    return coll_submit(fn, comm,
                       &DESC(.kind = kind, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
                             .dtype = dtype, .root = root, OPTS_FIELDS(o)),
                       req_out, nb);
}

static gs_status_t coll_allgatherv(const char *fn, gs_comm_t comm, const void *sendbuf,
                                   size_t sendcount, void *recvbuf, size_t recvbuf_count,
                                   const size_t *recvcounts, const size_t *displs, gs_dtype_t dtype,
                                   const gs_coll_opts_t *opts, gs_request_t *req_out, int nb)
{
    const coll_opts_t o = coll_opts(opts);

    return coll_submit(fn, comm,
                       &DESC(.kind = GS_COLL_ALLGATHERV, .sendbuf = sendbuf, .recvbuf = recvbuf,
                             .count = sendcount, .dtype = dtype, .rcounts = recvcounts,
                             .rdispls = displs, .rcap = recvbuf_count, OPTS_FIELDS(o)),
                       req_out, nb);
}

static gs_status_t coll_alltoallv(const char *fn, gs_comm_t comm, const void *sendbuf,
                                  size_t sendbuf_count, const size_t *sendcounts,
                                  const size_t *sdispls, void *recvbuf, size_t recvbuf_count,
                                  const size_t *recvcounts, const size_t *rdispls, gs_dtype_t dtype,
                                  const gs_coll_opts_t *opts, gs_request_t *req_out, int nb)
{
    const coll_opts_t o = coll_opts(opts);

    return coll_submit(fn, comm,
                       &DESC(.kind = GS_COLL_ALLTOALLV, .sendbuf = sendbuf, .recvbuf = recvbuf,
                             .dtype = dtype, .scounts = sendcounts, .sdispls = sdispls,
                             .rcounts = recvcounts, .rdispls = rdispls, .scap = sendbuf_count,
                             .rcap = recvbuf_count, OPTS_FIELDS(o)),
                       req_out, nb);
}

static gs_status_t coll_reduce_scatterv(const char *fn, gs_comm_t comm, const void *sendbuf,
                                        void *recvbuf, const size_t *recvcounts, gs_dtype_t dtype,
                                        gs_op_t op, const gs_coll_opts_t *opts,
                                        gs_request_t *req_out, int nb)
{
    const coll_opts_t o = coll_opts(opts);

    return coll_submit(fn, comm,
                       &DESC(.kind = GS_COLL_REDUCE_SCATTERV, .sendbuf = sendbuf,
                             .recvbuf = recvbuf, .dtype = dtype, .op = op, .rcounts = recvcounts,
                             OPTS_FIELDS(o)),
                       req_out, nb);
}

gs_status_t gs_gather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                      gs_dtype_t dtype, int root)
{
    return coll_rooted("gs_gather", GS_COLL_GATHER, comm, sendbuf, recvbuf, count, dtype, root,
                       NULL, NULL, 0);
}

gs_status_t gs_gather_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                         gs_dtype_t dtype, int root, const gs_coll_opts_t *opts)
{
    return coll_rooted("gs_gather_ex", GS_COLL_GATHER, comm, sendbuf, recvbuf, count, dtype, root,
                       opts, NULL, 0);
}

gs_status_t gs_igather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                       gs_dtype_t dtype, int root, gs_request_t *req_out)
{
    return coll_rooted("gs_igather", GS_COLL_GATHER, comm, sendbuf, recvbuf, count, dtype, root,
                       NULL, req_out, 1);
}

gs_status_t gs_scatter(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                       gs_dtype_t dtype, int root)
{
    return coll_rooted("gs_scatter", GS_COLL_SCATTER, comm, sendbuf, recvbuf, count, dtype, root,
                       NULL, NULL, 0);
}

gs_status_t gs_scatter_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                          gs_dtype_t dtype, int root, const gs_coll_opts_t *opts)
{
    return coll_rooted("gs_scatter_ex", GS_COLL_SCATTER, comm, sendbuf, recvbuf, count, dtype, root,
                       opts, NULL, 0);
}

gs_status_t gs_iscatter(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                        gs_dtype_t dtype, int root, gs_request_t *req_out)
{
    return coll_rooted("gs_iscatter", GS_COLL_SCATTER, comm, sendbuf, recvbuf, count, dtype, root,
                       NULL, req_out, 1);
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

/* The submit paths for p2p.c (coll_impl.h). */
gs_status_t gs__coll_blocking(const char *fn, gs_comm_t comm, const gs_coll_desc_t *d)
{
    return coll_blocking(fn, comm, d);
}

gs_status_t gs__coll_nonblocking(const char *fn, gs_comm_t comm, const gs_coll_desc_t *d,
                                 gs_request_t *req_out)
{
    return coll_nonblocking(fn, comm, d, req_out);
}
