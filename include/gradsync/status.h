/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file
 * gradsync status codes. One X-macro table is the single source of truth:
 * the enum, gs_strerror() and gs_status_name() are generated from it.
 * Values never change once published. 0 is success, positive values mean
 * "not finished, not failed", negative values are errors in bands grouped
 * by blast radius (see docs/guide/troubleshooting.md).
 */
#ifndef GRADSYNC_STATUS_H
#define GRADSYNC_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief The status table, one X(name, value, message) row per code. All
 * rows are stable. The bands:
 * @verbatim
 *   -1 .. -19   the call was wrong; nothing was changed
 *   -20 .. -39  local resource problem; the call may be retried
 *   -40 .. -59  a peer or link failed; the operation is lost and the
 *               communicator is failed (sticky)
 *   -60 .. -79  the communicator is dead; destroy it
 *   -100        internal bug
   @endverbatim
 */
#define GS_STATUS_MAP(X)                                                                           \
    X(GS_OK, 0, "success")                                                                         \
    X(GS_INPROGRESS, 1, "operation in progress")                                                   \
    X(GS_ERR_INVALID_ARG, -1, "invalid argument")                                                  \
    X(GS_ERR_INVALID_USAGE, -2, "invalid usage")                                                   \
    X(GS_ERR_UNSUPPORTED, -3, "operation not supported")                                           \
    X(GS_ERR_TRUNCATED, -4, "message larger than the receive buffer")                              \
    X(GS_ERR_NO_MEMORY, -20, "out of memory")                                                      \
    X(GS_ERR_NO_RESOURCE, -21, "resource unavailable")                                             \
    X(GS_ERR_SYSTEM, -22, "system call failed")                                                    \
    X(GS_ERR_CUDA, -23, "CUDA error")                                                              \
    X(GS_ERR_PEER_FAILED, -40, "peer failed")                                                      \
    X(GS_ERR_TIMEOUT, -41, "timed out")                                                            \
    X(GS_ERR_PROTOCOL, -42, "protocol error")                                                      \
    X(GS_ERR_VERSION_MISMATCH, -43, "version mismatch")                                            \
    X(GS_ERR_MISMATCH, -44, "ranks disagree (different collective, count or world size)")          \
    X(GS_ERR_AUTH, -45, "authentication failed (GS_AUTH_TOKEN differs or is missing)")             \
    X(GS_ERR_ABORTED, -60, "communicator aborted")                                                 \
    X(GS_ERR_COMM_FAILED, -61, "communicator failed")                                              \
    X(GS_ERR_REVOKED, -62, "communicator revoked (gs_comm_revoke): shrink, grow or destroy it")    \
    X(GS_ERR_INTERNAL, -100, "internal error")

#define GS_STATUS_ENUM_ROW(_name, _value, _msg) _name = (_value),

/** @brief Result of every gradsync call. GS_OK is 0; errors are negative. */
typedef enum gs_status { GS_STATUS_MAP(GS_STATUS_ENUM_ROW) } gs_status_t;

#undef GS_STATUS_ENUM_ROW

/** @brief True when @p _s is an error (negative). */
#define GS_IS_ERR(_s) ((int)(_s) < 0)

/** @brief Which part of the system an error concerns. */
typedef enum gs_status_scope {
    GS_SCOPE_NONE = 0,     /**< GS_OK or GS_INPROGRESS */
    GS_SCOPE_ARGUMENT = 1, /**< the call was wrong; nothing changed */
    GS_SCOPE_RESOURCE = 2, /**< local resource; may retry */
    GS_SCOPE_PEER = 3,     /**< a peer or link failed; communicator failed */
    GS_SCOPE_COMM = 4,     /**< communicator dead; destroy it */
    GS_SCOPE_INTERNAL = 5  /**< a bug in gradsync */
} gs_status_scope_t;

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_STATUS_H */
