/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NCCL engine's pure tables: gradsync dtype -> ncclDataType_t, gradsync
 * op -> ncclRedOp_t, ncclResult_t -> gs_status_t plus the error sentence.
 * One X-macro row per value; the unit test walks every row. Nothing here
 * touches a communicator or a GPU (ncclGetErrorString and ncclGetLastError
 * only read NCCL's static strings).
 */
#include "device/nccl_engine.h"
#include "device/nccl_lib.h"

#include "core/error.h"

#include <string.h>

/* GS_NCCL_DTYPE_MAP(X): X(gradsync dtype, NCCL type). Every gs dtype has a row. */
#define GS_NCCL_DTYPE_MAP(X)                                                                       \
    X(GS_DTYPE_F32, ncclFloat32)                                                                   \
    X(GS_DTYPE_F64, ncclFloat64)                                                                   \
    X(GS_DTYPE_F16, ncclFloat16)                                                                   \
    X(GS_DTYPE_BF16, ncclBfloat16)                                                                 \
    X(GS_DTYPE_I8, ncclInt8)                                                                       \
    X(GS_DTYPE_U8, ncclUint8)                                                                      \
    X(GS_DTYPE_I32, ncclInt32)                                                                     \
    X(GS_DTYPE_I64, ncclInt64)

/* GS_NCCL_OP_MAP(X): X(gradsync op, NCCL op). AVG is refused on integers
 * below; NCCL has no bitwise ops (GS_OP_BAND/BOR/BXOR have no row and are
 * GS_ERR_UNSUPPORTED; the planner never sends them here). */
#define GS_NCCL_OP_MAP(X)                                                                          \
    X(GS_OP_SUM, ncclSum)                                                                          \
    X(GS_OP_PROD, ncclProd)                                                                        \
    X(GS_OP_MIN, ncclMin)                                                                          \
    X(GS_OP_MAX, ncclMax)                                                                          \
    X(GS_OP_AVG, ncclAvg)

/* GS_NCCL_RESULT_MAP(X): X(ncclResult_t, gs_status_t of a returned code). */
#define GS_NCCL_RESULT_MAP(X)                                                                      \
    X(ncclSuccess, GS_OK)                                                                          \
    X(ncclUnhandledCudaError, GS_ERR_CUDA)                                                         \
    X(ncclSystemError, GS_ERR_SYSTEM)                                                              \
    X(ncclInternalError, GS_ERR_INTERNAL)                                                          \
    X(ncclInvalidArgument, GS_ERR_INVALID_ARG)                                                     \
    X(ncclInvalidUsage, GS_ERR_INVALID_USAGE)                                                      \
    X(ncclRemoteError, GS_ERR_PEER_FAILED)                                                         \
    X(ncclInProgress, GS_INPROGRESS)

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "the NCCL engine needs NCCL 2.18 or newer (non-blocking communicators, ncclCommSplit)"
#endif

_Static_assert(sizeof(ncclUniqueId) == GS_NCCL_ID_BYTES,
               "GS_NCCL_ID_BYTES != sizeof(ncclUniqueId)");
_Static_assert(NCCL_UNIQUE_ID_BYTES == GS_NCCL_ID_BYTES,
               "GS_NCCL_ID_BYTES != NCCL_UNIQUE_ID_BYTES");

/* What NCCL prints when two ranks of one communicator sit on one GPU. */
#define NCCL_DUPLICATE_GPU_TEXT "Duplicate GPU"

gs_status_t gs__nccl_dtype(gs_dtype_t dtype, int *nccl_type_out)
{
    if (nccl_type_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "nccl: no output for the NCCL type of dtype %d",
                             (int)dtype);
    }
    switch (dtype) {
#define GS_NCCL_DTYPE_CASE(_gs, _nccl)                                                             \
    case _gs:                                                                                      \
        *nccl_type_out = (int)(_nccl);                                                             \
        return GS_OK;
        GS_NCCL_DTYPE_MAP(GS_NCCL_DTYPE_CASE)
#undef GS_NCCL_DTYPE_CASE
    default:
        break;
    }
    return gs__error_set(GS_ERR_INVALID_ARG, "nccl: unknown dtype %d", (int)dtype);
}

static int dtype_is_float(gs_dtype_t dtype)
{
    return (dtype == GS_DTYPE_F32) || (dtype == GS_DTYPE_F64) || (dtype == GS_DTYPE_F16) ||
           (dtype == GS_DTYPE_BF16);
}

gs_status_t gs__nccl_op(gs_op_t op, gs_dtype_t dtype, int *nccl_op_out)
{
    int nccl_type;
    gs_status_t status;

    if (nccl_op_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "nccl: no output for the NCCL op of op %d",
                             (int)op);
    }
    status = gs__nccl_dtype(dtype, &nccl_type);
    if (status != GS_OK) {
        return status;
    }
    if ((op == GS_OP_AVG) && !dtype_is_float(dtype)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "nccl: GS_OP_AVG needs a floating-point dtype, not dtype %d",
                             (int)dtype);
    }
    if ((op == GS_OP_BAND) || (op == GS_OP_BOR) || (op == GS_OP_BXOR)) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "nccl: NCCL has no bitwise reduction (op %d); gradsync runs it on "
                             "the staged path",
                             (int)op);
    }
    switch (op) {
#define GS_NCCL_OP_CASE(_gs, _nccl)                                                                \
    case _gs:                                                                                      \
        *nccl_op_out = (int)(_nccl);                                                               \
        return GS_OK;
        GS_NCCL_OP_MAP(GS_NCCL_OP_CASE)
#undef GS_NCCL_OP_CASE
    default:
        break;
    }
    return gs__error_set(GS_ERR_INVALID_ARG, "nccl: unknown op %d", (int)op);
}

/* The row of @p nccl_result: its status, or GS_ERR_INTERNAL with *known 0. */
static gs_status_t result_row(int nccl_result, const char **name_out, int *known_out)
{
    *known_out = 1;
    switch (nccl_result) {
#define GS_NCCL_RESULT_CASE(_nccl, _gs)                                                            \
    case _nccl:                                                                                    \
        *name_out = #_nccl;                                                                        \
        return _gs;
        GS_NCCL_RESULT_MAP(GS_NCCL_RESULT_CASE)
#undef GS_NCCL_RESULT_CASE
    default:
        break;
    }
    *known_out = 0;
    *name_out = "unknown NCCL result";
    return GS_ERR_INTERNAL;
}

const char *gs__nccl_result_name(int nccl_result)
{
    const char *name;
    int known;

    (void)result_row(nccl_result, &name, &known);
    return name;
}

gs_status_t gs__nccl_status_msg(int nccl_result, int async, const char *what, const char *nccl_text)
{
    const char *name;
    const char *sep;
    int known;
    gs_status_t status = result_row(nccl_result, &name, &known);

    if ((status == GS_OK) || (status == GS_INPROGRESS)) {
        return status;
    }
    if (what == NULL) {
        what = "nccl";
    }
    if (nccl_text == NULL) {
        nccl_text = "";
    }
    sep = (nccl_text[0] != '\0') ? "; NCCL says: " : "";
    if (!known) {
        return gs__error_set(GS_ERR_INTERNAL, "%s: unknown NCCL result %d%s%s", what, nccl_result,
                             sep, nccl_text);
    }
    if ((nccl_result == ncclInvalidUsage) && (strstr(nccl_text, NCCL_DUPLICATE_GPU_TEXT) != NULL)) {
        return gs__error_set(GS_ERR_INVALID_USAGE,
                             "%s: two ranks of this communicator use the same GPU, and NCCL needs "
                             "one GPU per rank (ncclInvalidUsage; NCCL says: %s); ranks that share "
                             "a GPU must use the staged path (GS_CUDA_PATH=staged)",
                             what, nccl_text);
    }
    if (async && (nccl_result == ncclSystemError)) {
        /* Under a running communicator NCCL's system errors are its sockets
         * and proxies failing: a peer died or the link broke. */
        status = GS_ERR_PEER_FAILED;
    }
    return gs__error_set(status, "%s: %s (%s)%s%s", what, name,
                         gs__nccl_loadable(NULL, 0)
                             ? GS_NCCL(ncclGetErrorString)((ncclResult_t)nccl_result)
                             : "NCCL not loaded",
                         sep, nccl_text);
}

gs_status_t gs__nccl_status(int nccl_result, const char *what)
{
    if ((nccl_result == ncclSuccess) || (nccl_result == ncclInProgress)) {
        return (nccl_result == ncclSuccess) ? GS_OK : GS_INPROGRESS;
    }
    return gs__nccl_status_msg(nccl_result, 0, what,
                               gs__nccl_loadable(NULL, 0) ? GS_NCCL(ncclGetLastError)(NULL) : NULL);
}
