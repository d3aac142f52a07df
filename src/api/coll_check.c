/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The argument checks of every collective and point-to-point call
 * (gs__coll_validate, coll_impl.h): the communicator's sticky error, dtype
 * and op, byte sizes against overflow, buffers, roots and peers, the count
 * and displacement arrays of the v collectives (negative, overflowing, past
 * the stated capacity, overlapping), codecs and error feedback, forced
 * algorithms, and the memory kind of every buffer. Each failure is
 * GS_ERR_INVALID_ARG (or GS_ERR_UNSUPPORTED) with a sentence naming the
 * argument, and changes nothing.
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
#include "device/memkind.h"

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
        return gs__error_set(
            GS_ERR_INVALID_ARG, "%s: count %zu of %s across %d ranks overflows the %llu-byte limit",
            fn, count, gs__dtype_name(dtype), comm->size, (unsigned long long)COLL_MAX_BYTES);
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
static gs_status_t coll_check_v(const char *fn, gs_comm_t comm, const gs__coll_desc_t *d)
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

/* Elements of the send buffer of a compressed call: what its error
 * feedback must be made for (all-reduce: count; reduce-scatter: n blocks;
 * reduce-scatterv: the sum of recvcounts, validated by coll_check_v). */
static size_t coll_codec_send_elems(gs_comm_t comm, const gs__coll_desc_t *d)
{
    size_t total = 0;

    switch (d->kind) {
    case GS_COLL_REDUCE_SCATTER:
        return d->count * (size_t)comm->size; /* coll_check_data bounded the product */
    case GS_COLL_REDUCE_SCATTERV:
        for (int j = 0; j < comm->size; j++) {
            total += d->rcounts[j];
        }
        return total;
    default:
        return d->count;
    }
}

/*
 * A compressed call: one of the kinds that compress, float data, sum or
 * avg where it reduces, a valid codec that serves the kind, a matching ef
 * (none for all-gather).
 */
static gs_status_t coll_check_codec(const char *fn, gs_comm_t comm, const gs__coll_desc_t *d)
{
    const int reduces = gs__coll_reduces(d->kind);
    const int gathers = (d->kind == GS_COLL_ALLGATHER) || (d->kind == GS_COLL_ALLGATHERV);
    gs__codec_resolved_t rc;
    gs_status_t status;
    size_t elems;

    if ((d->kind != GS_COLL_ALLREDUCE) && (d->kind != GS_COLL_REDUCE_SCATTER) &&
        (d->kind != GS_COLL_REDUCE_SCATTERV) && !gathers) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: opts->codec is set, but %s does not compress: only all-reduce, "
                             "reduce-scatter(v) and all-gather(v) take a codec (leave it NULL)",
                             fn, gs__coll_name(d->kind));
    }
    if (!gs__dtype_is_float(d->dtype)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: opts->codec needs a float dtype (f32, f64, f16 or bf16), not %s: "
                             "integers are never compressed (leave opts->codec NULL)",
                             fn, gs__dtype_name(d->dtype));
    }
    if (reduces && (d->op != GS_OP_SUM) && (d->op != GS_OP_AVG)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: opts->codec cannot serve %s with %s: a compressed reduction "
                             "sums (GS_OP_SUM or GS_OP_AVG)",
                             fn, gs__coll_name(d->kind), gs__op_name(d->op));
    }
    if (d->algo != GS_ALGO_AUTO) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: opts->algo must be GS_ALGO_AUTO with a codec (compressed %s "
                             "has its own algorithm)",
                             fn, gs__coll_name(d->kind));
    }
    status = gs__codec_resolve(d->codec, &rc);
    if (status != GS_OK) {
        return status;
    }
    if (gathers && ((rc.ops->flags & GS_CODEC_F_SPARSE) != 0)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: opts->codec '%s' cannot serve %s: a sparsifier drops the "
                             "elements it does not keep, and all-gather has no error feedback to "
                             "carry them (use int8, int4, fp8_e4m3, fp16 or bf16)",
                             fn, rc.ops->name, gs__coll_name(d->kind));
    }
    if (gathers && (d->ef != NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: opts->ef is set, but all-gather takes no error feedback (what "
                             "it moves is not summed over steps); leave it NULL",
                             fn);
    }
    elems = coll_codec_send_elems(comm, d);
    if ((d->ef != NULL) && ((d->ef->count != elems) || (d->ef->dtype != d->dtype))) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: opts->ef was made for %zu elements of %s, not %zu of %s (the "
                             "elements of sendbuf)",
                             fn, d->ef->count, gs__dtype_name(d->ef->dtype), elems,
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
static gs_status_t coll_check_mem(const char *fn, gs_comm_t comm, gs__coll_desc_t *d)
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

/* The algorithms that implement @p kind, by name ("chain, binomial, native"),
 * from the execution table (GS_ALGO_AUTO left out). */
static void coll_check_offered(gs__coll_kind_t kind, char *out, size_t len)
{
    size_t used = 0;

    out[0] = '\0';
    for (int a = 0; a < GS_ALGO_COUNT; a++) {
        if ((a != GS_ALGO_AUTO) && gs__algo_offers(kind, (gs_algo_t)a) && (used < len)) {
            int n = snprintf(out + used, len - used, "%s%s", (used > 0) ? ", " : "",
                             gs__algo_name((gs_algo_t)a));
            used += (n > 0) ? (size_t)n : 0;
        }
    }
}

/* Validate a descriptor completely; returns GS_OK or the first problem. */
gs_status_t gs__coll_validate(const char *fn, gs_comm_t comm, gs__coll_desc_t *d)
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
            status =
                gs__error_set(GS_ERR_INVALID_ARG,
                              "%s: peer %d is the calling rank; copy locally instead", fn, d->root);
        }
        break;
    default:
        status = gs__error_set(GS_ERR_INTERNAL, "%s: unknown operation kind %d", fn, (int)d->kind);
    }
    if ((status == GS_OK) && (d->codec != NULL)) {
        status = coll_check_codec(fn, comm, d);
    }
    if ((status == GS_OK) && ((unsigned)d->algo >= GS_ALGO_COUNT)) {
        status = gs__error_set(GS_ERR_INVALID_ARG,
                               "%s: opts->algo %d is not a gs_algo_t (0..%d); GS_ALGO_AUTO lets "
                               "the library choose",
                               fn, (int)d->algo, GS_ALGO_COUNT - 1);
    }
    if ((status == GS_OK) && !gs__algo_offers(d->kind, d->algo)) {
        char offered[160];
        coll_check_offered(d->kind, offered, sizeof(offered));
        status = gs__error_set(GS_ERR_UNSUPPORTED,
                               "%s: opts->algo '%s' does not implement %s; leave it GS_ALGO_AUTO "
                               "or force one that does: %s",
                               fn, gs__algo_name(d->algo), gs__coll_name(d->kind), offered);
    }
    if (status == GS_OK) {
        status = coll_check_mem(fn, comm, d);
    }
    return status;
}

GS_API int gs_algo_implements(gs_coll_type_t coll, gs_algo_t algo)
{
    return gs__algo_offers((gs__coll_kind_t)coll, algo); /* 0 out of range */
}
