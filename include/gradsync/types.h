/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file
 * gradsync value types and handles: datatypes, reduction operations,
 * algorithms, the opaque communicator and request handles, and the export
 * macro. Datatypes and ops are X-macro tables (the single source of truth
 * for their names and sizes inside the library).
 */
#ifndef GRADSYNC_TYPES_H
#define GRADSYNC_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(GS_BUILDING_LIBRARY) && defined(__GNUC__)
/** @brief Marks an exported function (default visibility while building the library). */
#define GS_API __attribute__((visibility("default")))
#else
/** @brief Marks an exported function (empty outside the library build). */
#define GS_API
#endif

/** @brief "Not set by the caller" for numeric fields of options structs. */
#define GS_UNSET ((int)(-2147483647 - 1))

/* GS_DTYPE_MAP(X): X(name, value, element size in bytes, short name). */
/** @brief The dtype table, one X(name, value, element size in bytes, short name) row per dtype. */
#define GS_DTYPE_MAP(X)                                                                            \
    X(GS_DTYPE_F32, 0, 4, "f32")                                                                   \
    X(GS_DTYPE_F64, 1, 8, "f64")                                                                   \
    X(GS_DTYPE_F16, 2, 2, "f16")                                                                   \
    X(GS_DTYPE_BF16, 3, 2, "bf16")                                                                 \
    X(GS_DTYPE_I8, 4, 1, "i8")                                                                     \
    X(GS_DTYPE_U8, 5, 1, "u8")                                                                     \
    X(GS_DTYPE_I32, 6, 4, "i32")                                                                   \
    X(GS_DTYPE_I64, 7, 8, "i64")

#define GS_DTYPE_ENUM_ROW(_name, _value, _size, _str) _name = (_value),

/** @brief Element type of a buffer. f16/bf16 are reduced in f32 and rounded once per step. */
typedef enum gs_dtype { GS_DTYPE_MAP(GS_DTYPE_ENUM_ROW) GS_DTYPE_COUNT } gs_dtype_t;

#undef GS_DTYPE_ENUM_ROW

/* GS_OP_MAP(X): X(name, value, short name). */
/** @brief The reduction-op table, one X(name, value, short name) row per op. */
#define GS_OP_MAP(X)                                                                               \
    X(GS_OP_SUM, 0, "sum")                                                                         \
    X(GS_OP_PROD, 1, "prod")                                                                       \
    X(GS_OP_MIN, 2, "min")                                                                         \
    X(GS_OP_MAX, 3, "max")                                                                         \
    X(GS_OP_AVG, 4, "avg")                                                                         \
    X(GS_OP_BAND, 5, "band")                                                                       \
    X(GS_OP_BOR, 6, "bor")                                                                         \
    X(GS_OP_BXOR, 7, "bxor")

#define GS_OP_ENUM_ROW(_name, _value, _str) _name = (_value),

/**
 * @brief Reduction operation. GS_OP_AVG is valid for float types only (a sum,
 * then a scale); the bitwise GS_OP_BAND, GS_OP_BOR and GS_OP_BXOR for integer
 * types only (i8, u8, i32, i64). Any other pairing is GS_ERR_INVALID_ARG.
 */
typedef enum gs_op { GS_OP_MAP(GS_OP_ENUM_ROW) GS_OP_COUNT } gs_op_t;

#undef GS_OP_ENUM_ROW

/* GS_ALGO_MAP(X): X(name, value, short name). */
/** @brief The algorithm table, one X(name, value, short name) row per algorithm. */
#define GS_ALGO_MAP(X)                                                                             \
    X(GS_ALGO_AUTO, 0, "auto")                                                                     \
    X(GS_ALGO_RING, 1, "ring")                                                                     \
    X(GS_ALGO_CHAIN, 2, "chain")                                                                   \
    X(GS_ALGO_DIRECT, 3, "direct")                                                                 \
    X(GS_ALGO_TREE, 4, "tree")                                                                     \
    X(GS_ALGO_RECURSIVE_DOUBLING, 5, "rd")                                                         \
    X(GS_ALGO_RABENSEIFNER, 6, "rabenseifner")                                                     \
    X(GS_ALGO_BINOMIAL, 7, "binomial")                                                             \
    X(GS_ALGO_NATIVE, 8, "native")                                                                 \
    X(GS_ALGO_HIERARCHICAL, 9, "hier")                                                             \
    X(GS_ALGO_SHM, 10, "shm")

#define GS_ALGO_ENUM_ROW(_name, _value, _str) _name = (_value),

/**
 * @brief Collective algorithm. GS_ALGO_AUTO lets the selection model choose
 * (overridable by GS_ALGO). Not every algorithm implements every collective;
 * forcing one that does not gives GS_ERR_UNSUPPORTED.
 */
typedef enum gs_algo { GS_ALGO_MAP(GS_ALGO_ENUM_ROW) GS_ALGO_COUNT } gs_algo_t;

#undef GS_ALGO_ENUM_ROW

/** @brief Handle to a communicator (a group of ranks). GS_COMM_NULL when none. */
typedef struct gs_comm *gs_comm_t;
/** @brief Handle to a non-blocking operation. GS_REQUEST_NULL when none. */
typedef struct gs_request *gs_request_t;

/** @brief The null communicator handle. */
#define GS_COMM_NULL ((gs_comm_t)0)
/** @brief The null request handle (what gs_wait() and gs_test() leave behind). */
#define GS_REQUEST_NULL ((gs_request_t)0)

/** @brief Receive from any rank (gs_recv only). */
#define GS_ANY_SOURCE (-1)

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_TYPES_H */
