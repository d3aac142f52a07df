/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL, loaded on first use: libgradsync does not link libnccl (readelf -d
 * names no libnccl), so a program that never passes a device buffer runs
 * where NCCL is not installed. The NCCL engine (nccl_engine.c, nccl_coll.c,
 * nccl_map.c) calls NCCL only through the table below, which
 * gs__nccl_load() fills from libnccl.so.2 (dlopen, found on the loader
 * path: LD_LIBRARY_PATH, the system's folders) the first time a device
 * buffer needs NCCL. docs/design.md, "Device buffers", says why.
 * Included by the NCCL-only sources (src/device/nccl_*.c) and the tests of
 * the loader; it includes nccl.h for NCCL's own types.
 */
#ifndef GS_DEVICE_NCCL_LIB_H
#define GS_DEVICE_NCCL_LIB_H

#include <nccl.h>

#include <stddef.h>

#include "gradsync/status.h"

/** The file gs__nccl_load() opens when GS_NCCL_LIBRARY is unset: NCCL 2's SONAME. */
#define GS_NCCL_LIB_FILE "libnccl.so.2"

/*
 * GS_NCCL_FN_MAP(X): X(name), every NCCL function the engine calls, the one
 * list. Each becomes a field of gs__nccl_api_t of the exact type nccl.h
 * gives the function, looked up by its own name.
 */
#define GS_NCCL_FN_MAP(X)                                                                          \
    X(ncclGetVersion)                                                                              \
    X(ncclGetUniqueId)                                                                             \
    X(ncclGetErrorString)                                                                          \
    X(ncclGetLastError)                                                                            \
    X(ncclCommInitRankConfig)                                                                      \
    X(ncclCommSplit)                                                                               \
    X(ncclCommGetAsyncError)                                                                       \
    X(ncclCommFinalize)                                                                            \
    X(ncclCommDestroy)                                                                             \
    X(ncclCommAbort)                                                                               \
    X(ncclCommCount)                                                                               \
    X(ncclCommUserRank)                                                                            \
    X(ncclGroupStart)                                                                              \
    X(ncclGroupEnd)                                                                                \
    X(ncclAllReduce)                                                                               \
    X(ncclBroadcast)                                                                               \
    X(ncclReduce)                                                                                  \
    X(ncclAllGather)                                                                               \
    X(ncclReduceScatter)                                                                           \
    X(ncclSend)                                                                                    \
    X(ncclRecv)

/** The NCCL functions, each field named as its function. */
typedef struct gs__nccl_api {
#define GS_NCCL_FN_FIELD(name) __typeof__(&name) name;
    GS_NCCL_FN_MAP(GS_NCCL_FN_FIELD)
#undef GS_NCCL_FN_FIELD
} gs__nccl_api_t;

/**
 * @brief Open @p file with dlopen and look up every function of
 * GS_NCCL_FN_MAP into *api_out. Changes no global state and sets no error
 * (the loader below and the tests use it): a failure is explained in @p why.
 * The library stays open on success (NCCL's threads outlive any one caller)
 * and is closed on failure.
 * @param[out] why on failure, "NCCL was not found: ..." naming @p file (or
 *        the function it lacks) and what to do; may be NULL.
 * @return GS_OK; GS_ERR_NO_RESOURCE when @p file cannot be opened or lacks
 *         a function; GS_ERR_INVALID_ARG for NULL arguments. *api_out is
 *         written only on success.
 */
gs_status_t gs__nccl_lib_open(const char *file, gs__nccl_api_t *api_out, char *why, size_t whylen);

/**
 * @brief Load NCCL (GS_NCCL_LIBRARY, or GS_NCCL_LIB_FILE when it is
 * unset) once for the process. Thread-safe;
 * after a success it costs one atomic load. A failure is not remembered:
 * the next call tries again (NCCL may have been installed meanwhile).
 * @param[in] who the caller's name, the sentence's first words.
 * @return GS_OK, or GS_ERR_NO_RESOURCE with "<who>: " and the sentence of
 *         gs__nccl_lib_open() as this thread's error.
 */
gs_status_t gs__nccl_load(const char *who);

/* gs__nccl_loadable(), the quiet form for callers outside the engine, is
 * declared in nccl_engine.h. */

/**
 * @brief The loaded table, or NULL before gs__nccl_load() succeeded. Sets
 * no error. Every handle (gs__nccl_t) exists only after a successful load,
 * so code that holds one may call GS_NCCL(...) directly.
 */
const gs__nccl_api_t *gs__nccl_api(void);

/** Call NCCL function @p name through the loaded table. */
#define GS_NCCL(name) (gs__nccl_api()->name)

#endif /* GS_DEVICE_NCCL_LIB_H */
